"""The `cer` command line: parse options, call one function per command, render.

Exit codes: 0 ok, 1 runtime failure, 2 usage or input error, 130 interrupted.
Input mistakes (query or log) are rendered as diagnostics, never as tracebacks; an unexpected
exception becomes a one-line message unless ``--debug`` asks for the traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.text import Text

from cer_cli import __version__
from cer_cli.query.ast import Span
from cer_cli.query.errors import QueryError, line_col

if TYPE_CHECKING:
    from cer_cli.query.ast import Query
    from cer_cli.query.checks import CheckReport

EXIT_RUNTIME = 1
EXIT_INPUT = 2


def _stderr() -> Console:
    # Created per call so that redirected streams (tests, pipes) are honoured.
    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


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
    where = filename or "query"
    colour = "red" if severity == "error" else "yellow"
    if span is not None and source is not None:
        line, col = line_col(source, span.start)
        text = source.split("\n")[line - 1]
        end_line, end_col = line_col(source, span.end)
        width = max(1, (end_col if end_line == line else len(text) + 1) - col)
        head = Text(f"{where}:{line}:{col}: ", style="bold")
        console.print(head + Text(f"{severity}:", style=f"bold {colour}") + Text(f" {message}"))
        console.print(Text(f"  {text}"))
        console.print(Text("  " + " " * (col - 1) + "^" * width, style=f"bold {colour}"))
    else:
        console.print(
            Text(f"{where}: ", style="bold")
            + Text(f"{severity}:", style=f"bold {colour}")
            + Text(f" {message}")
        )
    for hint in hints:
        console.print(Text("  hint: ", style="cyan") + Text(hint))


def render_query_error(error: QueryError) -> None:
    render_diagnostic(
        _stderr(), "error", error.message, error.span, error.source, error.filename, error.hints
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
    except (click.exceptions.Exit, click.ClickException, SystemExit, KeyboardInterrupt):
        raise
    except Exception as e:
        if _is_log_error(e):
            console = _stderr()
            console.print(Text("error: ", style="bold red") + Text(e.message))  # type: ignore[attr-defined]
            for hint in e.hints:  # type: ignore[attr-defined]
                console.print(Text("  hint: ", style="cyan") + Text(hint))
            sys.exit(EXIT_INPUT)
        if debug:
            raise
        _stderr().print(
            Text("error: ", style="bold red") + Text(f"internal error: {type(e).__name__}: {e}")
        )
        _stderr().print(Text("  hint: ", style="cyan") + Text("run with --debug for the traceback"))
        sys.exit(EXIT_RUNTIME)


def _is_log_error(error: Exception) -> bool:
    try:
        from cer_cli.io.read import LogError
    except ImportError:
        return False
    return isinstance(error, LogError)


def read_query_text(path: str | None, expr: str | None) -> tuple[str, str]:
    """The query text and the name to report it under (a path, ``<stdin>`` or ``<expr>``)."""
    if expr is not None:
        return expr, "<expr>"
    if path is None:
        raise click.UsageError("give a query file, '-' for stdin, or -e/--expr TEXT")
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except (OSError, UnicodeDecodeError) as e:
        raise click.BadParameter(
            f"cannot read query file {path!r}: {e}", param_hint="QUERY"
        ) from None


def parse_and_check(
    text: str,
    filename: str,
    logs: tuple[str, ...],
    type_column: str | None,
    time_column: str | None,
) -> tuple[Query, CheckReport]:
    """Parse ``text``, bind it to the logs' schema when logs are given, run the static checks."""
    from cer_cli.query.checks import check_query
    from cer_cli.query.parser import parse

    try:
        query = parse(text, filename=filename)
        schema = None
        if logs:
            from cer_cli.io.read import read_schema

            schema = read_schema(list(logs), type_column=type_column, time_column=time_column)
        report = check_query(query, schema)
    except QueryError as e:
        raise e.with_source(text, filename) from None
    return query, report


_debug_option = click.option(
    "--debug", is_flag=True, help="Show the Python traceback of an unexpected failure."
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cer")
def cli() -> None:
    """Complex event recognition over event logs.

    Write a pattern query in CEQL, point it at a CSV / Parquet / NDJSON log,
    and get every complex event that matches.
    """


@cli.command("check")
@click.argument("args", nargs=-1, metavar="QUERY [LOG]...")
@click.option("-e", "--expr", help="Query text given inline instead of a QUERY file.")
@click.option(
    "--type-column",
    help="Column holding the event type (default: 'type' if present, else the stream name).",
)
@click.option("--time-column", help="Column holding the event time (default: detected).")
@_debug_option
def check_command(
    args: tuple[str, ...],
    expr: str | None,
    type_column: str | None,
    time_column: str | None,
    debug: bool,
) -> None:
    """Check a query without running it.

    QUERY is a file (or '-' for stdin; or use -e TEXT). Prints 'ok' and the query in
    canonical, fully parenthesised form, then any warnings. With LOG files, also checks that
    event types, streams and attributes exist in them and that values have the right types.

    \b
    Examples:
      cer check -e "T AS x ; H AS y FILTER x[tmp > 40]"
      cer check alert.ceql sensors.csv --time-column ts

    Exit code 0 when the query is fine, 2 when it has a mistake (printed with its line,
    column and a caret under it).
    """
    with user_errors(debug):
        path, logs = (None, args) if expr is not None else (args[0] if args else None, args[1:])
        text, filename = read_query_text(path, expr)
        query, report = parse_and_check(text, filename, logs, type_column, time_column)
        from cer_cli.query.printer import to_text

        click.echo("ok")
        click.echo(to_text(query))
        console = _stderr()
        for message, span in report.warnings:
            render_diagnostic(console, "warning", message, span, text, filename)


def _not_yet(name: str) -> None:
    click.echo(f"cer {name}: not yet implemented", err=True)
    sys.exit(EXIT_RUNTIME)


@cli.command("explain", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def explain_command(args: tuple[str, ...]) -> None:
    """Show how a query is compiled (not yet implemented)."""
    _not_yet("explain")


@cli.command("match", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def match_command(args: tuple[str, ...]) -> None:
    """Find every complex event of a query in event logs (not yet implemented)."""
    _not_yet("match")


def main() -> None:
    try:
        cli.main(standalone_mode=True)
    except KeyboardInterrupt:
        sys.exit(130)
