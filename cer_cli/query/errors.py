"""User-facing errors in a query (or in how it meets a log).

Every mistake a user can make in query text ends up as a ``QueryError``: a message, the
span of the offending text, and optional hints ("did you mean ...", the known names).
The CLI renders it with the line, the column and a caret under the text, and exits with
code 2. Nothing else should escape to the user for an input mistake.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field

from cer_cli.query.ast import Span

#: What diagnostics call a query given without a name (the Python APIs).
UNNAMED = "query"


def query_name(filename: str | None) -> str:
    """How every diagnostic about a query names it — errors and warnings alike, from the
    parser, the checks, the plan and the run: the file, ``<stdin>``, ``<expr>`` (``-e``),
    or ``UNNAMED``."""
    return filename or UNNAMED


def line_col(source: str, offset: int) -> tuple[int, int]:
    """1-based line and column of ``offset`` in ``source``."""
    offset = max(0, min(offset, len(source)))
    line = source.count("\n", 0, offset) + 1
    col = offset - (source.rfind("\n", 0, offset) + 1) + 1
    return line, col


def suggest(name: str, known: Iterable[str]) -> str | None:
    """The closest known name, for a "did you mean" hint (case-insensitive)."""
    known = list(known)
    lowered = {k.lower(): k for k in known}
    if name.lower() in lowered:
        return lowered[name.lower()]
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[close[0]] if close else None


@dataclass
class QueryError(Exception):
    """A mistake in a query, located at ``span`` in ``source``."""

    message: str
    span: Span | None = None
    source: str | None = None
    hints: list[str] = field(default_factory=list)
    filename: str | None = None
    #: The stream position of the event the error is about, when it is about one (a window
    #: time refused while running): Spark's tasks each meet their own first, and the
    #: driver reports the one local mode meets, the least.
    position: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def with_source(self, source: str, filename: str | None = None) -> QueryError:
        """Attach the query text (errors are raised deep down without it)."""
        if self.source is None:
            self.source = source
        if filename and not self.filename:
            self.filename = filename
        return self

    @property
    def line(self) -> int | None:
        if self.span is None or self.source is None:
            return None
        return line_col(self.source, self.span.start)[0]

    @property
    def column(self) -> int | None:
        if self.span is None or self.source is None:
            return None
        return line_col(self.source, self.span.start)[1]

    def render(self) -> str:
        """Plain-text rendering: ``file:line:col: error: message``, the line, a caret, hints."""
        where = query_name(self.filename)
        out = []
        if self.line is not None:
            out.append(f"{where}:{self.line}:{self.column}: error: {self.message}")
            assert self.source is not None and self.span is not None
            text = self.source.split("\n")[self.line - 1]
            width = max(1, min(self.span.end, self.span.start + len(text)) - self.span.start)
            width = min(width, max(1, len(text) - (self.column - 1)))  # type: ignore[operator]
            out.append(f"  {text}")
            out.append("  " + " " * (self.column - 1) + "^" * width)  # type: ignore[operator]
        else:
            out.append(f"{where}: error: {self.message}")
        out.extend(f"  hint: {h}" for h in self.hints)
        return "\n".join(out)

    def __str__(self) -> str:
        return self.render()
