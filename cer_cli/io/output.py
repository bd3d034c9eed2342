"""The output spec: what an output of matches holds, described once for every writer.

The local writers (``io.shapes``, ``io.encoding``, ``io.write``) and Spark's
(``cer_cli.spark.output``) must write the same columns, in the same order, with the same
names and values, or a query's output would depend on where it ran. So they hold no layout
of their own: ``OutputSpec.columns()`` lists each shape's columns with where each value comes
from (a fact of the match, a column of the event frame, or the variables binding an event),
and the text rules below say how a value a format has no type for becomes text. Each writer
*interprets* these (polars expressions, Spark SQL); the local-vs-Spark tests keep the
interpreters equal. Pure data; no reader or writer library is imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cer_cli.events import POS, ROW, STREAM, TYPE
from cer_cli.io.contract import LogError

SHAPES = ("long", "wide")
#: Columns of one match in either shape (the wide shape starts with them).
MATCH_COLUMNS = ("match", "start", "end", "start_time", "end_time", "partition")
#: Per-event columns (``x.position`` ... in the wide shape), before the log's columns.
EVENT_COLUMNS = ("position", "stream", "row", "type")
#: Leading columns of the long shape (one row per match x event).
LONG_COLUMNS = ("match", "start", "end", *EVENT_COLUMNS, "vars", "start_time", "end_time",
                "partition")
#: The event frame's column behind each event column.
EVENT_SOURCES = {"position": POS, "stream": STREAM, "row": ROW, "type": TYPE}
#: Prefix of a log's column whose name clashes with a fixed column (``log.type``, ``x.log.row``).
LOG_PREFIX = "log."

# --------------------------------------------------------------------------- text rules
# How a value becomes text where the format has no type for it (JSONL, CSV, the table, and
# Spark's CSV and JSON writers): the same text everywhere.

#: Datetimes and dates: ISO 8601 as Python's ``isoformat`` writes it: the date, else
#: ``SECONDS_TEXT``, then ``.`` and ``FRACTION_DIGITS`` digits of microseconds only when they
#: are not zero, then a zoned value's offset (``+01:00``; Spark's instants are UTC:
#: ``UTC_OFFSET``). strftime patterns; Spark translates them to Java's.
DATE_TEXT = "%Y-%m-%d"
SECONDS_TEXT = "%Y-%m-%dT%H:%M:%S"
FRACTION_DIGITS = 6
UTC_OFFSET = "+00:00"
#: Lists (a wide variable under ``+`` in CSV, ``vars`` in JSONL): a JSON array, its items as
#: JSON, ``LIST_SEPARATOR`` between them (``json.dumps``'s ``[1, 2]``).
LIST_SEPARATOR = ", "
#: ``vars`` of the long shape in CSV: the variables joined by this.
VARS_SEPARATOR = "|"
#: Decimals: JSON numbers with their exact digits, in plain notation (``1.50``, never a
#: float's rounding). Durations: seconds, a number, in JSONL and CSV alike. Float NaN and
#: infinities: JSON ``null``. A null: JSON ``null``, an empty CSV cell.
#: Values CSV cannot hold, refused with the column's name (exit 2): lists, structs, binary,
#: Python objects.
CSV_REFUSED = ("lists", "structs", "binary values", "Python objects")


@dataclass(frozen=True)
class Column:
    """One output column: its ``name``, and where its value comes from: ``of`` ``"match"``
    (``source`` one of ``MATCH_COLUMNS``), ``"event"`` (``source`` a column of the event
    frame: POS, STREAM, ROW, TYPE or one of the log's) or ``"vars"`` (the variables binding
    the event). In the wide shape, ``variable`` is the variable whose event it shows, and
    ``many`` that it may bind several: a list, in stream order."""

    name: str
    source: str
    of: str
    variable: str | None = None
    many: bool = False


@dataclass(frozen=True)
class OutputSpec:
    """What an output of matches holds.

    ``attributes``: the log's columns (the event frame's, without the type column), in
    order. ``time_columns``: each log's time column; ``start_time``/``end_time`` are the
    TIME of the match's first and last event, in the common type of those columns (their
    own type when there is one; several logs' time columns of different names each give
    their own events' times). ``variables``: the wide shape's ``(name, many)``; ``None``
    until known (the local writers take the first batch's, ``shapes.batch_variables``).
    ``partition_names``: the PARTITION BY groups' names, the keys of ``partition``."""

    shape: str = "long"
    attributes: tuple[str, ...] = ()
    time_columns: tuple[str, ...] = ()
    variables: tuple[tuple[str, bool], ...] | None = None
    partition_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise LogError(f"unknown shape {self.shape!r}", ["shapes: " + ", ".join(SHAPES)])

    def with_variables(self, variables: Sequence[tuple[str, bool]]) -> OutputSpec:
        return OutputSpec(self.shape, self.attributes, self.time_columns,
                          tuple((v, bool(m)) for v, m in variables), self.partition_names)

    def attribute_name(self, column: str) -> str:
        """A log column's output name (before the wide shape's ``x.``): ``log.``-prefixed
        when it clashes with a fixed column of the shape."""
        fixed = LONG_COLUMNS if self.shape == "long" else EVENT_COLUMNS
        return LOG_PREFIX + column if column in fixed else column

    def columns(self) -> list[Column]:
        """The shape's columns in order. Long: ``LONG_COLUMNS`` then the log's columns.
        Wide: ``MATCH_COLUMNS``, then per variable ``x.position, x.stream, x.row, x.type``
        and ``x.<column>`` for each of the log's columns."""
        if self.shape == "long":
            fixed = [Column(c, EVENT_SOURCES[c], "event") if c in EVENT_SOURCES
                     else Column(c, c, "vars") if c == "vars" else Column(c, c, "match")
                     for c in LONG_COLUMNS]
            return fixed + [Column(self.attribute_name(a), a, "event") for a in self.attributes]
        out = [Column(c, c, "match") for c in MATCH_COLUMNS]
        for var, many in self.variables or ():
            out += [Column(f"{var}.{c}", EVENT_SOURCES[c], "event", var, many)
                    for c in EVENT_COLUMNS]
            out += [Column(f"{var}.{self.attribute_name(a)}", a, "event", var, many)
                    for a in self.attributes]
        return out
