"""What the command line prints when something is wrong, and the exit code it ends with.

A mistake in the query or the log is a diagnostic (``file:line:col: error: message``, the
source line with a caret, hints), never a traceback; ``user_errors`` turns every failure of
a command into its rendering and exit code (2 input, 1 runtime). The consoles are created per
call, so redirected streams (tests, pipes) are honoured; rich is imported only when something
is printed (start-up time).
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from cer_cli import signals
from cer_cli.io.files import OutputError, ReaderGone
from cer_cli.query.ast import Span
from cer_cli.query.errors import QueryError, line_col, query_name

if TYPE_CHECKING:
    from rich.console import Console

EXIT_RUNTIME = 1
EXIT_INPUT = 2


def stderr() -> Console:
    # Created per call so that redirected streams (tests, pipes) are honoured.
    from rich.console import Console

    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


def stdout(**options) -> Console:
    """The console of ``--format table`` and ``cer explain``. rich ends the process with exit
    code 1 when standard output's reader leaves; cer's rule is a quiet exit 0 (``ReaderGone``)."""
    from rich.console import Console

    console = Console(**{"highlight": False, "soft_wrap": True, **options})

    def reader_gone() -> None:
        console.quiet = True
        raise ReaderGone(errno.EPIPE, "standard output is a closed pipe")

    console.on_broken_pipe = reader_gone  # type: ignore[method-assign]
    return console


def table_console(fmt: str) -> Console | None:
    """What ``write_matches`` prints a table on; other formats never load rich."""
    return stdout(soft_wrap=False) if fmt == "table" else None


def error_line(console: Console, label: str, style: str, message: str) -> None:
    """``label: message`` with the label styled (``error: ...``, ``  hint: ...``)."""
    from rich.text import Text

    console.print(Text(label, style=style) + Text(message))


def render_diagnostic(
    console: Console,
    severity: str,
    message: str,
    span: Span | None,
    source: str | None,
    filename: str | None,
    hints: list[str] | tuple[str, ...] = (),
) -> None:
    """Print ``file:line:col: severity: message``, the source line with a caret, then hints."""
    from rich.text import Text

    where = query_name(filename)
    colour = "red" if severity == "error" else "yellow"
    if span is not None and source is not None:
        line, col = line_col(source, span.start)
        text = source.split("\n")[line - 1]
        end_line, end_col = line_col(source, span.end)
        width = max(1, (end_col if end_line == line else len(text) + 1) - col)
        head = Text(f"{where}:{line}:{col}: ", style="bold")
        console.print(head + Text(f"{severity}:", style=f"bold {colour}") + Text(f" {message}"))
        text, caret, width = excerpt(text, col - 1, width)
        console.print(Text(f"  {text}"))
        console.print(Text("  " + " " * caret + "^" * width, style=f"bold {colour}"))
    else:
        console.print(
            Text(f"{where}: ", style="bold")
            + Text(f"{severity}:", style=f"bold {colour}")
            + Text(f" {message}")
        )
    for hint in hints:
        console.print(Text("  hint: ", style="cyan") + Text(hint))


#: Longest source line a diagnostic shows whole; a longer one (a generated query) is cut
#: around the caret.
EXCERPT_CHARS = 160


def excerpt(text: str, start: int, width: int) -> tuple[str, int, int]:
    """``text`` cut to at most ~EXCERPT_CHARS around ``start`` (marked with …), and where
    the caret now starts and how wide it is."""
    if len(text) <= EXCERPT_CHARS:
        return text, start, width
    left = max(0, start - EXCERPT_CHARS // 4)
    right = min(len(text), left + EXCERPT_CHARS)
    cut = ("…" if left else "") + text[left:right] + ("…" if right < len(text) else "")
    caret = start - left + (1 if left else 0)
    return cut, caret, max(1, min(width, right - start))


@dataclass(frozen=True)
class Diagnostic:
    """A warning to print: about the query (``of_query``: named as the query, with a caret
    under ``span``), or about an option or a file (one ``warning:`` line)."""

    message: str
    span: Span | None = None
    hints: tuple[str, ...] = ()
    of_query: bool = True


#: Why a warning is printed as an error (``report_warnings`` under ``--strict``).
STRICT_HINT = "a warning, made an error by --strict (CER_STRICT=1)"


def report_warnings(console: Callable[[], Console], warnings: Sequence[Diagnostic],
                    source: str | None, filename: str | None, strict: bool) -> None:
    """Print ``warnings``, those about the query named as ``query_name(filename)``. Under
    ``--strict`` (``CER_STRICT=1``) each is printed as an error and the command then ends
    with exit 2, before the query runs or anything is written: scripts and CI jobs stop on what
    a person would only be warned of."""
    severity = "error" if strict else "warning"
    for w in warnings:
        hints = [*w.hints, STRICT_HINT] if strict else list(w.hints)
        if w.of_query:
            render_diagnostic(console(), severity, w.message, w.span,
                              source if w.span is not None else None, filename, hints)
            continue
        error_line(console(), f"{severity}: ", "bold red" if strict else "bold yellow", w.message)
        for hint in hints:
            error_line(console(), "  hint: ", "cyan", hint)
    if strict and warnings:
        sys.exit(EXIT_INPUT)


def render_query_error(error: QueryError) -> None:
    render_diagnostic(
        stderr(), "error", error.message, error.span, error.source, error.filename, error.hints
    )


@contextmanager
def user_errors(debug: bool) -> Iterator[None]:
    """Turn every failure into a rendered message and the right exit code.

    QueryError and the reader's LogError are the user's mistakes (exit 2); anything else is
    ours (exit 1), shown as one line unless ``debug``.
    """
    try:
        yield
    except QueryError as e:
        render_query_error(e)
        sys.exit(EXIT_INPUT)
    except ReaderGone:  # standard output's reader left (`| head -1`): a quiet end
        sys.exit(0)
    except (click.exceptions.Exit, click.ClickException, SystemExit, KeyboardInterrupt):
        raise
    except Exception as e:
        signals.check()  # an exception caused by a swallowed signal ends as the signal
        if isinstance(e, OutputError) or (type(e).__name__ == "SparkError"
                                          and hasattr(e, "exit_code")):
            console = stderr()
            if debug and getattr(e, "detail", None):  # what Spark said, Java stack and all
                print(e.detail, file=sys.stderr)  # type: ignore[attr-defined]
            error_line(console, "error: ", "bold red", e.message)  # type: ignore[attr-defined]
            for hint in e.hints:  # type: ignore[attr-defined]
                error_line(console, "  hint: ", "cyan", hint)
            sys.exit(e.exit_code)  # type: ignore[attr-defined]
        if is_log_error(e):
            console = stderr()
            error_line(console, "error: ", "bold red", e.message)  # type: ignore[attr-defined]
            for hint in e.hints:  # type: ignore[attr-defined]
                error_line(console, "  hint: ", "cyan", hint)
            sys.exit(EXIT_INPUT)
        if debug:
            raise
        error_line(stderr(), "error: ", "bold red", f"internal error: {type(e).__name__}: {e}")
        saved = save_traceback(e)
        if saved is not None:
            error_line(stderr(), "  hint: ", "cyan", f"the traceback is in {saved}: please"
                       " attach it to a bug report (--debug prints it)")
        else:
            error_line(stderr(), "  hint: ", "cyan", "run with --debug for the traceback")
        sys.exit(EXIT_RUNTIME)


#: Names of the files ``save_traceback`` writes, in the system's temporary directory.
TRACEBACK_PREFIX = "cer-internal-error-"


def save_traceback(error: BaseException) -> str | None:
    """Write ``error``'s traceback (with the frames of the thread it was first raised in: the
    pool re-raises its tasks' failures) to a new file in the temporary directory and return
    its path; None when it cannot. A failure that a run with ``--debug`` may not repeat (a
    race between threads) is then still diagnosable."""
    import os
    import tempfile
    import traceback

    try:
        fd, path = tempfile.mkstemp(prefix=TRACEBACK_PREFIX, suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"cer {' '.join(sys.argv[1:])}\n\n")
            f.write("".join(traceback.format_exception(error)))
    except Exception:  # noqa: BLE001 - the one-line error stands without it
        return None
    return path


def is_log_error(error: Exception) -> bool:
    try:
        from cer_cli.io.read import LogError
    except ImportError:
        return False
    return isinstance(error, LogError)
