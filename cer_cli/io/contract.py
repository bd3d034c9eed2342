"""The log contract: every fact about a LOG argument, decided once for all readers.

The local reader (``cer_cli.io.read``, polars) and the Spark job (``cer_cli.spark.job``)
must agree on what a log means — its format and stream name, its type and time columns,
the kind of each column, how its time becomes the internal TIME column, and so its
``Schema`` — or one query would mean different things locally and on Spark (it did: Spark
typed an integer time column as ``datetime``). So the readers only translate their own
column types into *kinds* (``kind_of``, through Arrow types) and apply the decisions made
here, from column names and kinds alone. Pure functions; no reader library is imported.

Kinds are the Schema attribute types: ``int``, ``float``, ``str``, ``bool``, ``datetime``,
and ``null`` for a column whose type says it holds no value at all (polars' and Arrow's null
type: an all-null column written without a type); ``None`` marks a column predicates cannot
use (lists, structs, binary, durations, ...), which the schema keeps with its type's name so
that a query reading it is refused naming both.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

from cer_cli.events import EPOCH_UNIT_NAMES, Schema
from cer_cli.options import option as _option

#: File extension -> format name.
EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".ndjson": "ndjson",
    ".jsonl": "ndjson",
    ".json": "json",
}
FORMATS = ("csv", "parquet", "ndjson", "json")
#: Column names taken as the time column when no datetime column settles it.
TIME_NAMES = ("ts", "time", "timestamp")
DEFAULT_TYPE_COLUMN = "type"
#: Column names with this prefix are the readers' own (argument index, row ids, ...).
RESERVED_PREFIX = "__cer_"
#: The readers' column of each event's log argument index: events are ordered by (TIME,
#: ARG, ROW), so ties in time follow the arguments' order, then the rows' (both readers;
#: dropped from the event frame once it is ordered).
ARG = RESERVED_PREFIX + "arg"
#: Kinds a time column may have (strings are parsed as ISO 8601 datetimes).
TIME_KINDS = ("int", "float", "str", "datetime")
#: Unit of TIME for datetimes: nanoseconds since the epoch (UTC), as int64.
TIME_UNIT = "ns"
#: ``--time-unit`` of a numeric time column (seconds... since the epoch) -> nanoseconds.
TIME_UNITS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
#: The time texts read without ``--time-format``: ISO 8601 ``YYYY-MM-DD``, optionally with
#: ``T`` or a space and ``HH:MM[:SS[.fraction]]``, optionally ``Z`` or ``+HH:MM``/``+HHMM``
#: (a value without an offset is UTC). Both readers test values with this one pattern (a
#: Java and Rust regex alike) and then parse them (``ISO_FORMATS`` / Spark's cast).
ISO_TIME = (r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?"
            r"(Z|[+-]\d{2}:?\d{2})?)?$")
#: An ``ISO_TIME`` value that names its offset (``Z``, ``+01:00``, ``+0100``): a log whose
#: time texts include one is read as UTC instants (``zoned_time_columns``).
ISO_ZONED_TIME = (r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?"
                  r"(Z|[+-]\d{2}:?\d{2})$")
#: strftime patterns (polars/chrono) covering ``ISO_TIME`` once a space became ``T``.
ISO_FORMATS = ("%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S%.f")
ISO_ZONED_FORMATS = ("%Y-%m-%dT%H:%M%#z", "%Y-%m-%dT%H:%M:%S%.f%#z")
#: Rows at the head of a CSV log whose texts tell whether a column keeps the kind its
#: reader inferred (``csv_kind_holds``); both runners look at the same rows.
CSV_PROBE_ROWS = 1_000
#: ``ISO_TIME`` but for minutes with an offset (``10:00Z``, which Spark keeps as text); its
#: groups tell a value's class: a date, a datetime, one with an offset.
_CSV_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:?\d{2})?)?)?",
                       re.ASCII)


def iso_dates(values: Iterable[str | None]) -> bool:
    """Whether the texts of a CSV column that a reader inferred as dates or times are all
    ISO 8601 values of one class (dates; datetimes; datetimes with an offset), which both
    readers infer alike (``_CSV_DATE``). Other texts are guesses, and the readers guess
    apart: polars read ``01/02/2024`` as 1 February and ``2024/01/13`` as a date, Spark
    keeps both as text, reads ``10:00:00`` as today at ten and a column of dates and
    datetimes as datetimes. A column with any other text stays text on both runners, as
    written: no day/month order is guessed."""
    classes = set()
    for v in values:
        if v is not None:
            m = _CSV_DATE.fullmatch(v)
            if m is None:
                return False
            classes.add((m.group(1) is None, m.group(4) is None))
    return len(classes) <= 1


#: Texts that both CSV readers read as a number or a boolean, per kind: polars read
#: `` 5`` and ``+5`` as text where Spark read numbers, Spark ``inf`` as text where polars
#: read a number.
_CSV_VALUES = {  # ASCII: ``\d`` is any script's digit, which neither reader reads
    "int": re.compile(r"-?\d+", re.ASCII),
    "float": re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|NaN", re.ASCII),
    "bool": re.compile(r"true|false", re.IGNORECASE),
}


def csv_kind_holds(kind: str | None, values: Iterable[str | None]) -> bool:
    """Whether a CSV column that a reader inferred as ``kind`` keeps it on both runners,
    by its first ``CSV_PROBE_ROWS`` texts: numbers and booleans written as both readers
    read them (``_CSV_VALUES``), dates as ``iso_dates``; otherwise the column is text."""
    if kind == "datetime":
        return iso_dates(values)
    shape = _CSV_VALUES.get(kind or "")
    return shape is None or all(v is None or shape.fullmatch(v) for v in values)


#: The kinds whose CSV texts ``csv_kind_holds`` checks.
CSV_CHECKED_KINDS = ("int", "float", "bool", "datetime")


def csv_head_rows(head: bytes, sep: str, complete: bool) -> list[list[str | None]]:
    """The first ``CSV_PROBE_ROWS`` records under the header of a CSV log whose first
    bytes are ``head`` (``complete``: the whole file), as texts, an empty field None: the
    rows both runners look at for ``csv_kind_holds``. A record the end of ``head`` cuts is
    left out."""
    text = head.decode("utf-8", errors="replace").removeprefix("\ufeff")
    try:
        rows = list(islice(csv.reader(io.StringIO(text, newline=""), delimiter=sep),
                           CSV_PROBE_ROWS + 2))
    except csv.Error:
        return []
    if not complete and len(rows) <= CSV_PROBE_ROWS + 1:
        rows = rows[:-1]
    return [[v if v != "" else None for v in r] for r in rows[1:CSV_PROBE_ROWS + 1]]


def csv_text_columns(kinds: Sequence[str | None], rows: Sequence[Sequence[str | None]]) -> set[int]:
    """The positions of the columns that a CSV reader inferred as ``kinds`` (by position)
    but that both runners read as text (``csv_kind_holds``) by the texts of ``rows``
    (``csv_head_rows``)."""
    return {i for i, k in enumerate(kinds)
            if k in CSV_CHECKED_KINDS and not csv_kind_holds(k, csv_cells(rows, i))}


def csv_cells(rows: Sequence[Sequence[str | None]], i: int) -> list[str | None]:
    """Column ``i`` of ``csv_head_rows`` (None where a short record has no such field)."""
    return [r[i] if i < len(r) else None for r in rows]


#: The hint for an NDJSON line that is no record both runners read alike.
JSON_LINE_HINT = "fix the line: one JSON object per line, numbers finite (no NaN or Infinity)"


def json_line_problem(line: bytes | str) -> str | None:
    """Why one NDJSON line is no record that both runners read alike, or None. polars
    refuses such a line without naming it; Spark read ``NaN`` and ``Infinity`` (no JSON)
    and made a line it could not parse a row of nulls."""
    def constant(name: str) -> float:
        raise ValueError(f"{name} is not a JSON number")

    def number(text: str) -> float:
        if math.isinf(value := float(text)):
            raise ValueError(f"the number {text} is beyond a 64-bit float's range")
        return value

    text = (line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line).strip()
    if not text:
        return None
    try:
        record = json.loads(text, parse_constant=constant, parse_float=number)
    except json.JSONDecodeError as e:
        return f"not valid JSON: {e.msg} at column {e.colno}"
    except ValueError as e:
        return str(e)
    return None if isinstance(record, dict) else "not a JSON object"


def json_bad_line_in(path: str | os.PathLike) -> tuple[int, str] | None:
    """The first line (0-based) of the local NDJSON file at ``path`` that
    ``json_line_problem`` refuses, and why; None when there is none, when the file is one
    JSON array (its lines are no records) or cannot be read."""
    try:
        with open(path, "rb") as f:
            for row, line in enumerate(f):
                if row == 0 and line.lstrip().startswith(b"["):
                    return None
                if (problem := json_line_problem(line)) is not None:
                    return row, problem
    except OSError:
        pass
    return None


#: A date whose day and month order cannot be told (``01/02/2024``): needs --time-format.
AMBIGUOUS_DATE = re.compile(r"^\s*\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}\b")
_NUMBER = re.compile(r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$")
_NAME = re.compile(r"[^\W\d]\w*")  # a stream name as a query writes it bare (query.parser)


@dataclass
class LogError(Exception):
    """A problem with an event log the user gave (missing file, bad column, bad value)."""

    message: str
    hints: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def render(self) -> str:
        return "\n".join([f"error: {self.message}", *(f"  hint: {h}" for h in self.hints)])

    def __str__(self) -> str:
        return self.render()


# --------------------------------------------------------------------------- arguments


def split_log_arg(spec: str) -> tuple[str, str]:
    """``NAME=path`` -> (NAME, path); anything else -> ("", spec).

    ``NAME=`` is only recognised when NAME is an identifier, so paths containing ``=`` still
    work as plain paths.
    """
    name, sep, rest = spec.partition("=")
    if sep and _NAME.fullmatch(name) and rest:
        return name, rest
    return "", spec


_URI = re.compile(r"[A-Za-z][\w+.-]*://")


def local_path(path: str) -> str | None:
    """The local file-system path of a log or output argument (``file://`` dropped), or None
    for a URI of another file system (``hdfs://``, ``s3a://``), which only Spark reads."""
    if path.startswith("file://"):
        return path.removeprefix("file://")
    return None if _URI.match(path) else path


def stream_name(name: str, path: str) -> str:
    """The stream a log feeds: its ``NAME=``, else the stem of the path's last component."""
    if name:
        return name
    base = _base(str(path))
    suffix = _suffix(base)
    return base[: len(base) - len(suffix)] if suffix else base


def log_format(path: str, fmt: str | None = None, members: Iterable[str] = ()) -> str:
    """The format of a log: ``fmt`` when given, else from the path's extension, else (for a
    directory, whose file names are ``members``) the one format all its files share."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise LogError(f"unsupported log format {fmt!r}", ["supported: " + ", ".join(FORMATS)])
        return fmt
    suffix = _suffix(str(path))
    found = EXTENSIONS.get(suffix.lower())
    if found is None:
        inside = {EXTENSIONS.get(_suffix(m).lower()) for m in members} - {None}
        if len(inside) == 1:
            return inside.pop()  # type: ignore[return-value]
        raise LogError(
            f"unsupported log format {suffix or '(no extension)'!r} for {path}",
            [
                "supported extensions: " + ", ".join(EXTENSIONS),
                "or give the format explicitly (" + ", ".join(FORMATS) + ")",
            ],
        )
    return found


#: Bytes at the start of a CSV log that both readers give ``csv_dialect``.
CSV_HEAD_BYTES = 1 << 16
#: Field separators a CSV log may use instead of the comma (``csv_dialect``).
CSV_SEPARATORS = {"\t": "tab", ";": "';'", "|": "'|'"}


def csv_dialect(where: str, head: bytes) -> str:
    """The field separator of a CSV log whose first bytes are ``head`` (``csv_header``)."""
    return csv_header(where, head)[0]


def csv_header(where: str, head: bytes) -> tuple[str, list[str] | None]:
    """The field separator and the column names (``column_names``; ``None`` when ``head``
    holds no whole header line) of a CSV log whose first bytes are ``head``, once they are
    known to read alike everywhere: UTF-8 (``check_utf8``), and a header naming each column
    once (polars renamed a repeated name ``x_duplicated_0``, Spark ``x2``: a query would have
    read another column on each).

    The separator is the comma, unless the header line holds no comma and one of tab,
    ``;`` and ``|`` (spreadsheets export ``;``-separated CSV where the comma is the decimal
    mark; ``.tsv`` files use tabs). Read as comma-separated, such a log was one column named
    after its whole header line, and a query matched nothing. A header holding two of them
    and no comma is refused, as cer cannot tell which one separates."""
    check_utf8(where, head)
    line = head.split(b"\n", 1)[0].rstrip(b"\r").removeprefix(b"\xef\xbb\xbf")
    header = line.decode("utf-8", errors="replace")
    text = re.sub(r'"[^"]*"', "", header)  # quoted names
    found = [","] if "," in text else [s for s in CSV_SEPARATORS if s in text]
    if len(found) > 1:
        raise LogError(f"{where}: cannot tell the CSV's field separator: its header line holds "
                       + " and ".join(CSV_SEPARATORS[s] for s in found) + " but no comma",
                       ["give the log one separator (a comma, tab, ';' or '|'), or convert"
                        " it to Parquet"])
    sep = found[0] if found else ","
    if b"\n" not in head:  # not the whole header line
        return sep, None
    names = column_names(next(csv.reader([header], delimiter=sep), []))
    check_columns(where, names)
    return sep, names


def csv_bad_quote(path: Any, sep: str) -> tuple[int, int, int, str, str] | None:
    """The first CSV record quoted as RFC 4180 does not allow, which polars refuses with a
    message naming no record (``CSV malformed: expected 0 rows, actual 2 rows``) or as a
    value ``not a str``: ``(data row, line, field index, what, the field so far)``, or
    None. A field is quoted whole or not at all: a quote in a field that is not quoted
    (``ab"cd``), text after a quoted field's closing quote (``"q" tail``) and a quoted
    field never closed are found. A line that is whole records quoted right is passed over
    by one regular expression (a log of quoted texts is read at C speed); a blank line is a
    row, as polars reads it."""
    start, plain, quoted, closed = 0, 1, 2, 3
    row, line, field, opened = -2, 0, 0, 0  # the header is row -1
    state, text = start, ""
    s, q = re.escape(sep), '"(?:[^"]|"")*"'
    whole = re.compile(f'(?:{q}|[^"{s}\r\n]*)(?:{s}(?:{q}|[^"{s}\r\n]*))*\r?\n?')
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        for raw in f:
            line += 1
            if state != quoted:  # a record starts on this line
                row += 1
                field, state, text = 0, start, ""
                if '"' not in raw or whole.fullmatch(raw):
                    continue
            for c in raw:
                if state == quoted:
                    if c == '"':
                        state = closed
                    else:
                        text += c
                elif c in "\r\n":
                    break
                elif state == closed and c == '"':  # a doubled quote
                    state, text = quoted, text + '"'
                elif c == sep:
                    field, state, text = field + 1, start, ""
                elif state == closed:
                    return row, line, field, "text after a quoted field's closing quote", \
                        f'"{text}"{c}'
                elif c == '"' and state == start:
                    state, opened = quoted, line
                elif c == '"':
                    return row, line, field, "a quote in a field that is not quoted", text + c
                else:
                    state, text = plain, text + c
    if state == quoted:
        return row, opened, field, "a quoted field that is never closed", '"' + text[:40]
    return None


#: The name of a column that has none, by its 0-based position: a CSV header's empty field
#: (the trailing separators of a spreadsheet export, ``type,time,,``), or an empty name in
#: Parquet or JSON. Spark names a CSV's unnamed columns so; polars named them ``""`` and
#: ``_duplicated_0``, so local and Spark runs reported other columns.
UNNAMED = "_c{}"


def column_names(names: Iterable[str]) -> list[str]:
    """A log's column names as every reader calls them: an empty one is ``UNNAMED``."""
    return [name or UNNAMED.format(i) for i, name in enumerate(names)]


#: The hint for a text log that is not UTF-8 (``check_utf8``, and the local reader's
#: failures past the first bytes).
NOT_UTF8_HINT = ("cer reads text logs as UTF-8: convert the file, e.g. `iconv -f WINDOWS-1252"
                 " -t UTF-8 in.csv > out.csv` (spreadsheets on Windows write WINDOWS-1252)")


def check_utf8(where: str, data: bytes, line: int = 1, complete: bool = False) -> None:
    """Refuse ``data``, a text log's bytes from the start of its line ``line``, at the first
    byte that is not UTF-8, naming its line: polars refuses such a log naming no row, and
    Spark reads such bytes as U+FFFD, so the readers decide it here alike. A sequence cut at
    the end of ``data`` is no error unless ``complete`` (the whole file)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        if not complete and e.reason == "unexpected end of data":
            return
        at = line + data.count(b"\n", 0, e.start)
        before = data[data.rfind(b"\n", 0, e.start) + 1: e.start].decode("utf-8", "replace")
        raise LogError(f"{where}, line {at}: not UTF-8 text: byte 0x{data[e.start]:02x} after"
                       f" {before[-20:]!r}", [NOT_UTF8_HINT]) from None


def _base(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _suffix(path: str) -> str:
    """The extension of a path's last component, as ``pathlib.PurePath.suffix`` gives it."""
    base = _base(path)
    i = base.rfind(".")
    return base[i:] if 0 < i < len(base) - 1 else ""


# --------------------------------------------------------------------------- kinds


def kind_of(dtype: Any) -> str | None:
    """The kind (Schema attribute type) of a column type: a pyarrow ``DataType`` (the Spark
    reader's) or a polars dtype (the local reader's, mapped by name without pyarrow, whose
    import costs most of a small run's start-up; the same kinds as the dtype's Arrow type).

    ``None`` for types predicates cannot use. Unsigned and 128-bit integers are ``int``;
    decimals are ``float`` (a number that need not be whole: predicates compare them exactly,
    from the column's own type); dictionary-encoded strings (categoricals, enums) are
    ``str``; dates are ``datetime`` (their midnight, UTC); the null type is ``null``.
    """
    pa = sys.modules.get("pyarrow")  # a pyarrow type exists only once pyarrow is imported
    if pa is None or not isinstance(dtype, pa.DataType):
        return _polars_kind(dtype)
    t = pa.types
    if t.is_dictionary(dtype):
        return kind_of(dtype.value_type)
    if t.is_integer(dtype):
        return "int"
    if t.is_floating(dtype) or t.is_decimal(dtype):
        return "float"
    if t.is_string(dtype) or t.is_large_string(dtype) or _is_string_view(dtype):
        return "str"
    if t.is_boolean(dtype):
        return "bool"
    if t.is_timestamp(dtype) or t.is_date(dtype):
        return "datetime"
    if t.is_null(dtype):
        return "null"
    return None


def _is_string_view(dtype: Any) -> bool:
    check = getattr(sys.modules["pyarrow"].types, "is_string_view", None)
    return bool(check and check(dtype))


#: polars dtype name -> kind: the kind of the dtype's Arrow type (``kind_of``), and ``int``
#: for Int128 (no Arrow type; predicates compare it exactly). UInt128 has none: polars
#: compares it wrongly (``u > 5`` is null), so it is refused; nor have the nested, binary,
#: time-of-day and duration types.
_POLARS_KINDS = {
    **dict.fromkeys(("Int8", "Int16", "Int32", "Int64", "Int128", "UInt8", "UInt16", "UInt32",
                     "UInt64"), "int"),
    **dict.fromkeys(("Float16", "Float32", "Float64", "Decimal"), "float"),
    **dict.fromkeys(("String", "Utf8", "Categorical", "Enum"), "str"),
    "Boolean": "bool",
    **dict.fromkeys(("Date", "Datetime"), "datetime"),
    "Null": "null",
}


def _polars_kind(dtype: Any) -> str | None:
    """A polars dtype's kind; ``dtype`` may be a class (``pl.Int64``) or an instance."""
    cls = dtype if isinstance(dtype, type) else type(dtype)
    return _POLARS_KINDS.get(cls.__name__) if cls.__module__.startswith("polars") else None


def unify_kinds(a: str | None, b: str | None) -> str | None:
    """The kind of a column that has kind ``a`` in one log and ``b`` in another: the kind of
    the values' common supertype (as polars' relaxed concatenation gives it; ``null`` is
    no value, so the other kind). Raises ``ValueError`` for kinds with none (``bool`` and
    ``datetime``)."""
    if a == b or b is None or b == "null":
        return a
    if a is None or a == "null":
        return b
    pair = {a, b}
    for wider in ("str", "float", "int"):
        if wider in pair:
            return wider
    raise ValueError(f"no common type of {a} and {b}")


@dataclass(frozen=True)
class LogDecision:
    """One log as the contract sees it, then as it decided it: everything a reader needs.

    A reader says what it saw — ``where`` the log is (for messages), its ``stream``,
    ``format`` and argument ``index``, its columns in order with their kinds (``kind_of``)
    and its own name of each column's type (``types``, for messages, and for Spark's
    reader to tell a decimal time from a double), and whether it has no
    row (``empty``, asked only when ``untyped``) — and ``decide`` fills in the rest: the kinds
    the reader must read (``null`` for every column of an empty text log, ``str`` for a CSV's
    time column), the type column, the time column with its ``--time-unit`` and
    ``--time-format``; after the reader's values pass, ``judge_times`` says whether time
    texts are read as UTC instants (``time_zoned``). Readers interpret the decision: they
    hold no rule of their own."""

    where: str
    stream: str
    columns: Mapping[str, str | None]
    type_column: str | None = None
    time_column: str | None = None
    time_unit: str | None = None
    types: Mapping[str, str] = field(default_factory=dict)
    format: str = ""
    index: int = 0
    empty: bool = False
    time_format: str | None = None
    time_zoned: bool = False

    @property
    def data_columns(self) -> list[str]:
        return [c for c in self.columns if c != self.type_column]

    @property
    def time_kind(self) -> str | None:
        """The kind of the time column (None without one)."""
        return self.columns.get(self.time_column) if self.time_column else None

    @property
    def reads_time_as_datetime(self) -> bool:
        """Whether the time column's values become datetimes: parsed texts, or numbers with
        a unit (the event frame then shows the column as those datetimes)."""
        return self.time_kind == "str" or (self.time_unit is not None
                                           and self.time_kind in ("int", "float"))

    def time_text(self) -> str | None:
        """How the log's time is read, for ``cer explain``."""
        if self.time_column is None:
            return None
        if self.time_unit is not None:
            how = f"numbers, {self.time_unit} since the epoch"
        elif self.time_format is not None:
            how = f"texts, format {self.time_format!r}"
        elif self.time_zoned:
            how = "ISO 8601 texts with offsets: UTC instants"
        else:
            how = {"int": "integers: an order without a unit, no duration windows",
                   "float": "numbers: an order without a unit, no duration windows",
                   "str": "ISO 8601 texts", "null": "no values"}.get(self.time_kind or "",
                                                                     "datetimes")
        return f"{self.stream}: {self.time_column} ({how})"


#: Formats whose column types a reader infers from the values: a log of such a format
#: without rows has no types, only the text its reader guesses.
INFERRED_FORMATS = ("csv",)


def untyped(fmt: str, kinds: Mapping[str, str | None]) -> bool:
    """Whether a log's column kinds may be its reader's guess from no value at all: a CSV
    whose every column reads as text (what a reader infers for a header without rows). Its
    reader then tells whether it has a row (``LogDecision.empty``)."""
    return fmt in INFERRED_FORMATS and all(k == "str" for k in kinds.values())


def decide(seen: Sequence[LogDecision], type_column: str | Sequence[str] | None = None,
           times: Any = None) -> list[LogDecision]:
    """The contract's decisions on each log (``seen``: what its reader saw, see
    ``LogDecision``), in one pass for every reader: reserved column names refused; an empty
    log's columns of kind ``null`` (they have no value, and so widen no other log's column);
    the type column (``type_columns``); the time column and its unit (``time_columns``); a
    CSV's time column read as text, whatever its reader inferred (the contract parses it,
    not a reader's date guess); the time format (``time_format``). ``times``: see
    ``time_options``."""
    for g in seen:
        check_columns(g.where, g.columns)
    logs = [replace(g, columns=dict.fromkeys(g.columns, "null")) if g.empty else g for g in seen]
    tcols = type_columns([(g.where, g.stream, list(g.columns)) for g in logs], type_column)
    logs = [replace(g, type_column=t) for g, t in zip(logs, tcols, strict=True)]
    streams = [g.stream for g in logs]
    out = []
    for g in time_columns(logs, times):
        if g.format == "csv" and g.time_kind == "datetime":
            g = replace(g, columns={**g.columns, g.time_column: "str"})
        out.append(replace(g, time_format=time_format(g, times, streams)))
    return out


def judge_times(logs: Sequence[LogDecision], values: Sequence[TimeValues]
                ) -> tuple[list[LogDecision], dict[str, str]]:
    """The verdicts on the logs' time values, from the readers' values pass: the logs with
    ``time_zoned`` decided (``zoned_times``), and per stream the epoch unit that fits a
    numeric time without one (``check_times``, which refuses a unit that cannot be right)."""
    fits = check_times(logs, values)
    zoned = zoned_times(logs, values)
    return [replace(g, time_zoned=z) for g, z in zip(logs, zoned, strict=True)], fits


def event_time_kind(logs: Sequence[LogDecision]) -> str | None:
    """The kind of TIME over all logs (``time_kind`` of each, ``common_time_kind`` of
    them), ``None`` without a time column: refuses an unusable time column, and logs whose
    times are not comparable. A log without values (kind ``null``) takes any."""
    kinds = [(g.where, time_kind(g.where, g.time_column, g.time_kind,
                                 g.types.get(g.time_column, ""), g.time_unit))
             for g in logs if g.time_column is not None and g.time_kind != "null"]
    column = next((g.time_column for g in logs if g.time_column), None)
    return common_time_kind(column, kinds) if column is not None else None


def _columns_text(columns: Iterable[str]) -> str:
    names = list(columns)
    return ", ".join(names) if names else "(none)"


def check_columns(where: str, columns: Iterable[str]) -> None:
    """Reject column names the readers reserve for themselves, and a name given twice (a CSV
    header's, ``csv_header``; an unnamed column's ``UNNAMED`` name that another column has)."""
    columns = list(columns)
    clash = [c for c in columns if c.startswith(RESERVED_PREFIX)]
    if clash:
        raise LogError(
            f"{where}: column names starting with {RESERVED_PREFIX!r} are reserved: {clash}"
        )
    first: dict[str, int] = {}
    for i, name in enumerate(columns, 1):
        if name in first:
            j = first[name]
            if name in (UNNAMED.format(i - 1), UNNAMED.format(j - 1)):
                nameless, other = (i, j) if name == UNNAMED.format(i - 1) else (j, i)
                raise LogError(f"{where}: column {nameless} has no name, and a column without"
                               f" one is called by its position from 0, {name!r}: the name of"
                               f" column {other}", [f"name column {nameless}"])
            raise LogError(f"{where}: the header names column {name!r} twice (columns"
                           f" {j} and {i})", ["rename one of them"])
        first[name] = i


# --------------------------------------------------------------------------- log options


@dataclass(frozen=True)
class LogOption:
    """One log option as given: a bare VALUE (for every log that can use it) and
    ``NAME=VALUE`` pairs (for the log of stream NAME only), so several logs may differ.
    ``option`` is its name without dashes (``time-unit``; see ``cer_cli.options``)."""

    option: str
    default: str | None = None
    per_log: Mapping[str, str] = field(default_factory=dict)

    def value(self, stream: str) -> tuple[str | None, bool]:
        """The value for the log of ``stream`` and whether it names that log explicitly."""
        if stream in self.per_log:
            return self.per_log[stream], True
        return self.default, False


def log_option(option: str, given: str | Sequence[str] | None, streams: Sequence[str]) -> LogOption:
    """Parse ``--type-column`` & co. values (``option``: ``type-column``...): ``VALUE`` or
    ``NAME=VALUE`` with NAME a stream of ``streams``. A NAME that is no stream, or two
    values for one log, is an error."""
    values = (given,) if isinstance(given, str) else tuple(given or ())
    default: str | None = None
    per_log: dict[str, str] = {}
    for v in values:
        name, sep, rest = v.partition("=")
        if sep and _NAME.fullmatch(name):
            if name not in streams:
                raise LogError(
                    f"{_option(option, rest, name)}: no log named {name!r}",
                    [f"logs: {_columns_text(dict.fromkeys(streams))}",
                     "name a log as NAME=path, or its stream is its file name without extension"],
                )
            if per_log.get(name, rest) != rest:
                raise LogError(f"{_option(option)} is given twice for log {name!r}")
            per_log[name] = rest
        else:
            if default not in (None, v):
                raise LogError(f"{_option(option)} is given twice ({default!r} and {v!r})",
                               [f"use {_option(option, 'VALUE', 'NAME', placeholder=True)}"
                                " to give each log its own"])
            default = v
    return LogOption(option, default, per_log)


def named_logs(frame: Any, logs: Mapping[str, Any] | None, stream: str) -> dict[str, Any]:
    """The logs a Python API call names, by stream (what ``NAME=path`` arguments are on
    the command line): ``logs``, or the one ``frame`` named ``stream``; a dict given as
    ``frame`` is ``logs``."""
    if isinstance(frame, Mapping):
        if logs is not None:
            raise TypeError("give the logs once: as the first argument or as logs=")
        frame, logs = None, frame
    if (frame is None) == (logs is None):
        raise TypeError("give one frame, or several as logs={name: frame}")
    if logs is None:
        logs = {stream: frame}
    if not logs:
        raise LogError("no event log given", ["logs={'W': weather, 'F': flights}"])
    for name in logs:
        if not isinstance(name, str) or not name:
            raise TypeError(f"a log's name is a non-empty string, got {name!r}")
    return dict(logs)


def option_values(name: str, given: str | Mapping[str, str] | None) -> tuple[str, ...]:
    """A log option as the Python API takes it — one value for every log, or a dict of
    values per log (by stream name) — as the command line's values (``VALUE``,
    ``NAME=VALUE``) that ``log_option`` reads, so both front ends decide alike. ``name``:
    the option's keyword, for the error on a value of another type."""
    if given is None:
        return ()
    if isinstance(given, str):
        return (given,)
    if isinstance(given, Mapping) and all(isinstance(k, str) and isinstance(v, str)
                                          for k, v in given.items()):
        return tuple(f"{k}={v}" for k, v in given.items())
    raise TypeError(f"{name} must be a string or a dict of strings by log name, got"
                    f" {given!r}")


@dataclass(frozen=True)
class TimeOptions:
    """``--time-column``, ``--time-unit`` and ``--time-format`` as given (each value
    ``VALUE`` or ``NAME=VALUE``). Readers accept it where they accept a time column name."""

    column: tuple[str, ...] = ()
    unit: tuple[str, ...] = ()
    format: tuple[str, ...] = ()


def api_options(type_column: Any = None, time_column: Any = None, time_unit: Any = None,
                time_format: Any = None) -> tuple[tuple[str, ...], TimeOptions]:
    """The Python API's log options (each ``option_values``'s) as the readers take the
    command line's: the ``--type-column`` values and ``TimeOptions``."""
    return (option_values("type_column", type_column),
            TimeOptions(option_values("time_column", time_column),
                        option_values("time_unit", time_unit),
                        option_values("time_format", time_format)))


def time_options(given: str | Sequence[str] | TimeOptions | None) -> TimeOptions:
    """A reader's ``times`` argument (None, a name, names, or ``TimeOptions``)."""
    if isinstance(given, TimeOptions):
        return given
    if given is None:
        return TimeOptions()
    return TimeOptions((given,) if isinstance(given, str) else tuple(given))


def type_columns(
    logs: Sequence[tuple[str, str, Sequence[str]]], given: str | Sequence[str] | None
) -> list[str | None]:
    """The type column of each log, from ``(where, stream, columns)``: a value for that log
    (``NAME=col``: must exist), else the bare value when the log has it, else ``type`` when
    present, else ``None`` (every event of the log has its stream name as type). A bare
    value that no log has is an error (a typo, not a log of one type)."""
    opt = log_option("type-column", given, [s for _, s, _ in logs])
    out: list[str | None] = []
    for where, stream, columns in logs:
        value, explicit = opt.value(stream)
        if explicit and value not in columns:
            raise LogError(f"{where}: no type column {value!r}", [f"columns: {_columns_text(columns)}"])
        if value is not None and value in columns:
            out.append(value)
        else:
            out.append(DEFAULT_TYPE_COLUMN if DEFAULT_TYPE_COLUMN in columns else None)
    if opt.default is not None and logs and not any(opt.default in c for _, _, c in logs):
        where, _, columns = logs[0]
        raise LogError(
            f"{where}: no type column {opt.default!r}", [f"columns: {_columns_text(columns)}"]
        )
    return out


def type_column(where: str, columns: Iterable[str], given: str | None) -> str | None:
    """The type column of one log (``type_columns`` for a single log)."""
    return type_columns([(where, "", list(columns))], given)[0]


def _detect_time(log: LogDecision) -> str | None:
    """A log's time column by the rules: its only datetime column, else a column named
    ts/time/timestamp (in that order, case-insensitive) of a time kind: the one of that
    name exactly, else the one whose name differs only in case. Several of those (``Time``
    and ``TIME``) are refused, as cer cannot tell which one orders the events: the last of
    them was taken, so ``type,time,Time`` was ordered by ``Time``."""
    data = {c: log.columns[c] for c in log.data_columns}
    dated = [c for c, k in data.items() if k == "datetime"]
    if len(dated) == 1:
        return dated[0]
    usable = (*TIME_KINDS, "null") if log.empty else TIME_KINDS  # an empty log: by name alone
    for n in TIME_NAMES:
        named = [c for c, k in data.items() if c.lower() == n and k in usable]
        if n in named or len(named) == 1:
            return n if n in named else named[0]
        if named:
            raise LogError(f"{log.where}: cannot tell the time column: "
                           + " and ".join(repr(c) for c in named)
                           + f" differ only in case, and none is named {n!r}",
                           [f"pass {_option('time-column', named[0])} (or another column)"])
    return None


def time_columns(logs: Sequence[LogDecision], given: Any = None) -> list[LogDecision]:
    """Each log with its time column and unit decided (``given``: see ``time_options``).

    Per log: ``NAME=col`` (must exist), else the bare ``--time-column`` when the log has
    it, else the rules (``_detect_time``). Either every log has a time column or none.
    ``--time-unit`` (s, ms, us, ns) makes a numeric time column an instant (epoch); a unit
    named for a log whose time is not numeric is an error, a bare one applies to the
    numeric ones. ``--time-format`` is checked by ``time_format``."""
    opts = time_options(given)
    streams = [g.stream for g in logs]
    col = log_option("time-column", opts.column, streams)
    unit = log_option("time-unit", opts.unit, streams)
    fmt = log_option("time-format", opts.format, streams)
    for u in [unit.default, *unit.per_log.values()]:
        if u is not None and u not in TIME_UNITS:
            raise LogError(f"{_option('time-unit', u, quoted=True)} is not a unit",
                           ["units: " + ", ".join(TIME_UNITS)])
    out: list[LogDecision] = []
    for g in logs:
        value, explicit = col.value(g.stream)
        if explicit and value not in g.columns:
            raise LogError(f"{g.where}: no time column {value!r}",
                           [f"columns: {_columns_text(g.columns)}"])
        chosen = value if value is not None and value in g.columns else _detect_time(g)
        u, u_explicit = unit.value(g.stream)
        kind = g.columns.get(chosen) if chosen is not None else None
        if kind not in ("int", "float"):
            if u_explicit and kind != "null":  # a log without values: any unit fits
                raise LogError(
                    f"{g.where}: {_option('time-unit', u)} is for a numeric time column, and "
                    + (f"time column {chosen!r} holds {kind} values" if chosen else "there is none"),
                    ["datetimes and ISO 8601 texts need no unit"],
                )
            u = None
        out.append(replace(g, time_column=chosen, time_unit=u))
    if col.default is not None and logs and not any(col.default in g.columns for g in logs):
        raise LogError(f"{logs[0].where}: no time column {col.default!r}",
                       [f"columns: {_columns_text(logs[0].columns)}"])
    timed = [g for g in out if g.time_column is not None]
    if timed and len(timed) < len(out):
        lacking = next(g for g in out if g.time_column is None)
        raise LogError(
            f"{lacking.where} has no time column, but {timed[0].where} has {timed[0].time_column!r}",
            [f"pass {_option('time-column', 'COLUMN', lacking.stream, placeholder=True)}"
             " to name its time column"],
        )
    if not timed and (unit.default or unit.per_log or fmt.default or fmt.per_log):
        raise LogError(f"{_option('time-unit')} and {_option('time-format')} need a time"
                       " column, and the logs have none",
                       [f"pass {_option('time-column', 'COLUMN', placeholder=True)}"])
    return out


def time_columns_of(logs: Sequence[LogDecision]) -> tuple[str, ...]:
    """The decided logs' time columns, each once, in argument order: the first is the
    schema's (``Schema.time_column``), all of them give a match's times
    (``OutputSpec.time_columns``)."""
    return tuple(dict.fromkeys(g.time_column for g in logs if g.time_column))


def time_column(logs: Sequence[LogDecision], given: Any = None) -> str | None:
    """The schema's time column: that of the first log (``time_columns``), else ``None``."""
    return next((g.time_column for g in time_columns(logs, given) if g.time_column), None)


def time_format(log: LogDecision, given: Any = None, streams: Sequence[str] = ()) -> str | None:
    """The ``--time-format`` of a log whose time column holds text (``None``: ISO 8601);
    ``streams``: every log's, which ``NAME=`` may name (by default, this log's)."""
    opt = log_option("time-format", time_options(given).format, streams or [log.stream])
    value, explicit = opt.value(log.stream)
    kind = log.time_kind
    if kind != "str":
        if explicit and kind != "null":  # a log without values: any format fits
            raise LogError(f"{log.where}: {_option('time-format')} is for a time column of texts, and "
                           f"{log.time_column!r} holds {kind} values")
        return None
    return value


# --------------------------------------------------------------------------- time


def time_kind(
    where: str, column: str, kind: str | None, dtype_text: str = "", unit: str | None = None
) -> str:
    """How a time column of this kind becomes TIME: ``int`` and ``float`` values without a
    unit are kept as they are (an order, e.g. a sequence number: only ``n EVENTS`` and
    attribute windows apply); with a ``--time-unit`` they are instants since the epoch, like
    ``datetime`` and ``str`` (ISO 8601, or ``--time-format``) values: int64 nanoseconds since
    the epoch (UTC), kind ``datetime``."""
    if kind not in TIME_KINDS:
        raise LogError(f"{where}: time column {column!r} has unusable type {dtype_text or kind}")
    if unit is not None or kind == "str":
        return "datetime"
    return kind  # type: ignore[return-value]


def unit_bound(unit: str) -> int:
    """The largest magnitude of a numeric time in ``unit`` whose nanoseconds fit int64;
    larger values are refused, not wrapped around."""
    return (2**63 - 1) // TIME_UNITS[unit]


def unit_digits(unit: str) -> int:
    """The decimal places of a nanosecond in ``unit`` (s: 9, ns: 0): how finely both
    readers' ``_exact_ns`` round a fractional time in it."""
    return len(str(TIME_UNITS[unit])) - 1


#: From here on a float64 is a whole number: a float time with a unit is then taken as the
#: whole number it is, not by its shortest text (``io.read._exact_ns``, ``spark.read._exact_ns``)
FLOAT_WHOLE = 2.0**53


def rounded_integer(place: str, column: str, value) -> LogError:
    """The error for an integer of ``column`` at ``place`` that float64 would round: the
    column holds floats in another log, so both readers widen it to float64, exact only up
    to 2^53 (``io.read._refuse_rounded_integers``, ``spark.read.refuse_rounded_integers``)."""
    return LogError(
        f"{place}, column {column!r}: the integer {value} would be rounded to"
        f" {float(value):.0f}: another log holds floats in {column!r}, so the column is"
        " float64, which holds integers exactly only up to 2^53",
        [f"give {column!r} one type in every log: integers (where the other log's values are"
         " whole numbers) or floats (accepting the rounding)"],
    )


def row_place(path: Any, fmt: str, row: int) -> str:
    """Where 0-based data row ``row`` of a log is, in a message: line numbers for text
    formats (a header line in CSV; quoted line breaks before the row counted, in a local
    file: ``csv_record_line``), as both readers name a bad row."""
    if fmt == "csv":
        return f"{path}: line {csv_record_line(path, row)} (data row {row}, 0-based)"
    if fmt == "ndjson":
        return f"{path}: line {row + 1} (data row {row}, 0-based)"
    return f"{path}: data row {row} (0-based)"


def csv_record_line(path: Any, row: int) -> int:
    """The 1-based line on which data row ``row`` of a CSV log starts: ``row + 2``, unless
    quoted fields before it hold line breaks (read in a local file: a line with an odd
    number of quotes opens or closes a quoted field, as a doubled quote counts two). An
    error message is the only reader, so the pass it may take is paid only then."""
    where = local_path(str(path))
    inside, r = False, -2  # the header is row -1
    try:
        with open(where or "", encoding="utf-8", errors="replace", newline="") as f:
            for n, raw in enumerate(f, 1):
                if not inside:
                    r += 1
                    if r == row:
                        return n
                if '"' in raw and raw.count('"') % 2:
                    inside = not inside
    except OSError:
        pass
    return row + 2


#: The year of a time value: an ISO date's first four digits, or (read by --time-format) four
#: digits alone; and the years strictly between which nanoseconds since 1970 hold every
#: instant (1677-09-21 to 2262-04-11).
_ISO_YEAR = re.compile(r"\s*(\d{4})-\d{2}-\d{2}")
_YEAR = re.compile(r"(?<!\d)(\d{4})(?!\d)")
NS_YEARS = (1677, 2262)
#: The ISO time texts read, compared as text: a day inside nanoseconds' range, so that no
#: offset can carry one out of it; both runners' readers keep to it.
ISO_RANGE = ("1677-09-22", "2262-04-11")


def bad_time(where: str, column: str, raw: str | None, fmt: str | None = None,
             unit: str | None = None) -> LogError:
    """The error for a time value the readers could not read, with the hint that fits it:
    both readers raise it, so they word every case alike. A null and a NaN are both
    missing times (an event without a time cannot be ordered)."""
    if raw is None or raw.strip().lower() in ("nan", "-nan", "+nan"):
        what = "missing time value" + ("" if raw is None else f" ({raw})")
        return LogError(f"{where}: {what} in column {column!r}",
                        ["every event needs a time; remove the row or fill its time"])
    # a text that is no date ('event 0042') is not out of range: it is not a time
    year = _ISO_YEAR.match(raw) if fmt is None else _YEAR.search(raw)
    if year is not None and not NS_YEARS[0] < int(year.group(1)) < NS_YEARS[1]:
        return LogError(
            f"{where}: time value {raw!r} in column {column!r} is out of range: times are"
            " kept as nanoseconds since 1970, from 1677-09-21 to 2262-04-11 (texts: from"
            f" {ISO_RANGE[0]} to the day before {ISO_RANGE[1]})",
            ["fix the value, or order the events by another column (--time-column)"])
    if fmt is not None:
        return LogError(f"{where}: time value {raw!r} in column {column!r} does not match"
                        f" {_option('time-format', fmt, quoted=True)}")
    if AMBIGUOUS_DATE.match(raw):
        return LogError(
            f"{where}: time value {raw!r} in column {column!r} has no clear day/month order",
            [f"pass {_option('time-format', '%d/%m/%Y', quoted=True)} (day first) or"
             " '%m/%d/%Y' (month first), or write"
             " times as ISO 8601 (2024-02-01T10:00:00)"],
        )
    if unit is not None and _NUMBER.match(raw):
        return LogError(f"{where}: time value {raw} in column {column!r} is out of range for"
                        f" {_option('time-unit', unit)}")
    if re.fullmatch(r"\s*[+-]?\d+\s*", raw) and not -2**63 <= int(raw) < 2**63:
        return LogError(f"{where}: time value {raw.strip()} in column {column!r} is beyond a"
                        " 64-bit integer's range (-2^63 to 2^63 - 1), in which times are kept",
                        ["fix the value, or order the events by another column (--time-column)"])
    return LogError(
        f"{where}: cannot parse time value {raw!r} in column {column!r}",
        ["time values must be all datetimes (ISO 8601: 2024-02-01T10:00:00, optionally with Z"
         f" or +01:00) or all numbers; other texts need {_option('time-format')}"],
    )


def blame_time(values: Iterable[tuple[int, str | None]]) -> int | None:
    """Among ``(row, raw text)`` of a time column the reader could not read, the row to
    blame: the first value that is neither a number nor a datetime text, else the first
    value of the kind the column mostly does not hold (``0`` among dates, a date among
    numbers). ``0,soon`` blames ``soon``, not ``0``."""
    rows = list(values)
    odd = [r for r, v in rows if v is not None and not _NUMBER.match(v)
           and not re.match(ISO_TIME, v.strip())]
    if odd:
        return odd[0]
    numbers = [r for r, v in rows if v is not None and _NUMBER.match(v)]
    others = [r for r, v in rows if r not in set(numbers)]
    pick = numbers if len(numbers) <= len(others) else others
    return pick[0] if pick else None


def common_time_kind(column: str, kinds: Sequence[tuple[str, str]]) -> str | None:
    """The one time kind of all logs, from (where, ``time_kind``) pairs; mixed kinds are an
    error, since their TIME values are not comparable."""
    first: dict[str, str] = {}
    for where, kind in kinds:
        first.setdefault(kind, where)
    if len(first) > 1:
        (k1, p1), (k2, p2) = list(first.items())[:2]
        raise LogError(
            f"time column {column!r} holds {k1} values in {p1} but {k2} in {p2}",
            [
                "the time column must hold the same kind of value (datetime, int, float) in every log"
            ],
        )
    return next(iter(first), None)


def time_storage(kind: str) -> str:
    """The Arrow type name of TIME for a ``time_kind``: float64 for float, else int64."""
    return "float64" if kind == "float" else "int64"


# --------------------------------------------------------------------------- time values

#: The years a numeric time read as an instant (``--time-unit``) may plausibly fall in.
PLAUSIBLE_YEARS = (1990, 2100)
_PLAUSIBLE_S = (631_152_000, 4_102_444_800)  # 1990-01-01 and 2100-01-01, UTC


@dataclass(frozen=True)
class TimeValues:
    """What a reader's schema pass learns of one log's time values, for the decisions that
    need more than the column's type: the least and greatest finite value of a numeric time
    column (``None``: not numeric, or no value), and whether a time column of texts holds a
    value with an offset (``ISO_ZONED_TIME``, or ``zoned_format``; ``None``: the time is not
    texts — the Spark reader counts a CSV column it typed as timestamps as texts)."""

    low: int | float | None = None
    high: int | float | None = None
    zoned: bool | None = None


#: Names of the aggregations of a reader's values pass (one row per group of events) that
#: ``time_values`` reads: the least and greatest finite numeric time, and whether an ISO
#: text time has an offset (``ISO_ZONED_TIME``).
TIME_LOW, TIME_HIGH, TIME_ZONED = "__cer_time_low", "__cer_time_high", "__cer_time_zoned"


def time_values(log: LogDecision, facts: Iterable[Mapping[str, Any]]) -> TimeValues:
    """A log's ``TimeValues`` from its reader's values pass: ``facts`` per group of events,
    keyed ``TIME_LOW``/``TIME_HIGH``/``TIME_ZONED`` (a key not computed is missing or None).
    Texts read by a ``--time-format`` hold offsets when the format reads one."""
    facts = list(facts)
    lows = [f[TIME_LOW] for f in facts if f.get(TIME_LOW) is not None]
    highs = [f[TIME_HIGH] for f in facts if f.get(TIME_HIGH) is not None]
    zoned = None
    if log.time_kind == "str":
        zoned = (zoned_format(log.time_format) if log.time_format is not None
                 else any(f.get(TIME_ZONED) for f in facts))
    return TimeValues(min(lows, default=None), max(highs, default=None), zoned)


def zoned_format(fmt: str) -> bool:
    """Whether a ``--time-format`` reads an offset (then every value has one)."""
    return any(d in fmt for d in ("%z", "%#z", "%:z"))


def epoch_unit(low: float | None, high: float | None) -> str | None:
    """The unit that, counted from the epoch, puts every value in ``low..high`` within
    ``PLAUSIBLE_YEARS``; the units are 1000× apart and the years span 6.5×, so at most one
    does. ``None`` when none does (or there is no value)."""
    if low is None or high is None:
        return None
    lo, hi = (s * TIME_UNITS["s"] for s in _PLAUSIBLE_S)
    return next((u for u, f in TIME_UNITS.items() if lo <= low * f and high * f <= hi), None)


def _dates(low: float, high: float, unit: str) -> str:
    """``low..high`` in ``unit`` since the epoch as UTC dates, for messages."""
    import datetime as dt

    def day(x: float) -> str:
        try:
            return (dt.datetime(1970, 1, 1) + dt.timedelta(seconds=x * TIME_UNITS[unit] / 1e9)
                    ).date().isoformat()
        except OverflowError:
            return "before year 1" if x < 0 else "after year 9999"

    a, b = day(low), day(high)
    return a if a == b else f"{a} .. {b}"


def check_times(logs: Sequence[LogDecision], values: Sequence[TimeValues]) -> dict[str, str]:
    """Judge each numeric time column by its values (``values[i]`` of ``logs[i]``).

    With ``--time-unit``: a unit that puts the values outside ``PLAUSIBLE_YEARS`` while
    another unit puts them inside cannot be right (epoch seconds read as ms all fall in
    January 1970, and a window then matches what it should not), so it is refused, naming
    the unit that fits. Values that no unit puts inside (old or future data, or times not
    counted from the epoch) are taken as given. Without a unit, returns per stream the unit
    that fits its values (``Schema.epoch_units``), for the hint of a duration window."""
    fits: dict[str, str] = {}
    for g, v in zip(logs, values, strict=True):
        if g.time_column is None or g.columns.get(g.time_column) not in ("int", "float"):
            continue
        fit = epoch_unit(v.low, v.high)
        if fit is None or fit == g.time_unit:
            continue
        if g.time_unit is None:
            fits[g.stream] = fit
            continue
        assert v.low is not None and v.high is not None
        option = _option("time-unit", fit, g.stream if len(logs) > 1 else None)
        raise LogError(
            f"{g.where}: {_option('time-unit', g.time_unit)} puts the times of column {g.time_column!r}"
            f" in {_dates(v.low, v.high, g.time_unit)}, but they look like epoch"
            f" {EPOCH_UNIT_NAMES[fit]} ({_dates(v.low, v.high, fit)})",
            [f"pass {option}",
             f"if they do not count from the epoch, drop {_option('time-unit')}:"
             f" WITHIN n [{g.time_column}]"
             " and WITHIN n EVENTS use them as numbers"],
        )
    return fits


def zoned_times(logs: Sequence[LogDecision], values: Sequence[TimeValues]) -> list[bool]:
    """Per log, whether its time column of texts is read as UTC instants (output as such:
    ``+00:00``) rather than naive datetimes: when some value of a time column of texts of
    that name, in any log, has an offset (``TimeValues.zoned``). A value without an offset
    is UTC either way, so ``10:00+01:00`` and ``09:00`` are one instant, both printed
    ``09:00:00+00:00``; a column without any offset stays naive, as written."""
    zoned = {g.time_column for g, v in zip(logs, values, strict=True) if v.zoned}
    return [v.zoned is not None and g.time_column in zoned
            for g, v in zip(logs, values, strict=True)]


# --------------------------------------------------------------------------- schema


def column_kinds(logs: Sequence[LogDecision], time_col: str | None) -> dict[str, str | None]:
    """Each data column's kind across the logs (first-seen order): unified over the logs,
    with a string time column, or a numeric one with a unit, counted as ``datetime`` (it
    is read as an instant)."""
    out: dict[str, str | None] = {}
    where: dict[str, tuple[str, str | None]] = {}
    for g in logs:
        tc = g.time_column or time_col
        for c in g.data_columns:
            k = g.columns[c]
            if c == tc and (k == "str" or (g.time_unit is not None and k in ("int", "float"))):
                k = "datetime"
            if c not in out:
                out[c], where[c] = k, (g.where, k)
                continue
            try:
                out[c] = unify_kinds(out[c], k)
            except ValueError:
                raise LogError(
                    f"the logs have incompatible columns: {c!r} is {where[c][1]} in "
                    f"{where[c][0]} but {k} in {g.where}"
                ) from None
    return out


def attribute_columns(log: LogDecision, kinds: Mapping[str, str | None]) -> list[str]:
    """The columns of ``log`` that can be event attributes (usable kind, not the type)."""
    return [c for c in log.data_columns if kinds.get(c) is not None]


def build_schema(
    logs: Sequence[LogDecision],
    present: Sequence[Mapping[str | None, Mapping[str, bool]]],
    kinds: Mapping[str, str | None],
    time_col: str | None,
    epoch_units: Mapping[str, str] | None = None,
) -> Schema:
    """The Schema of the logs. A column of a log is an attribute of every event type of
    that log (``attribute_columns``): whether it holds a value on a given day is the data's
    business, not the query's, so a daily job keeps running on a day without gusts.
    ``present[i]`` maps each event type of log ``i`` (``None`` for a missing type) to
    whether each of those columns is non-null for at least one event of that type; the
    columns null for every event of a type (in every log) are that type's ``empty``
    attributes (a predicate on them is false; ``cer check`` warns). Columns predicates
    cannot use are ``refused``, with their type's name. Types are listed per stream in
    sorted order; attributes in column order (first log first). ``epoch_units``: per stream,
    the unit that fits a numeric time without one (``judge_times``)."""
    event_types: dict[str, dict[str, str]] = {}
    valued: dict[str, set[str]] = {}
    streams: dict[str, dict[str, None]] = {}  # ordered sets: a log may hold 100,000s of types
    refused: dict[str, str] = {}
    for g, seen in zip(logs, present, strict=True):
        usable = attribute_columns(g, kinds)
        for c in g.data_columns:
            if kinds.get(c) is None:
                refused.setdefault(c, g.types.get(c, "an unsupported type"))
        stream_types = streams.setdefault(g.stream, {})
        for etype in sorted(t for t in seen if t is not None):
            attrs = event_types.setdefault(etype, {})
            has = valued.setdefault(etype, set())
            for c in usable:
                attrs.setdefault(c, kinds[c])  # type: ignore[arg-type]
                if seen[etype].get(c):
                    has.add(c)
            stream_types.setdefault(etype)
    empty = {t: frozenset(a for a in attrs if a not in valued[t])
             for t, attrs in event_types.items()}
    return Schema(
        event_types=event_types,
        streams={s: tuple(ts) for s, ts in streams.items()},
        time_column=time_col,
        epoch_units=dict(epoch_units or {}),
        empty={t: e for t, e in empty.items() if e},
        refused=refused,
    )
