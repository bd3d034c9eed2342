"""The log contract: every fact about a LOG argument, decided once for all readers.

The local reader (``cer_cli.io.read``, polars) and the Spark job (``cer_cli.spark.job``)
must agree on what a log means — its format and stream name, its type and time columns,
the kind of each column, how its time becomes the internal TIME column, and so its
``Schema`` — or one query would mean different things locally and on Spark (it did: Spark
typed an integer time column as ``datetime``). So the readers only translate their own
column types into *kinds* (``kind_of``, through Arrow types) and apply the decisions made
here, from column names and kinds alone. Pure functions; no reader library is imported.

Kinds are the Schema attribute types: ``int``, ``float``, ``str``, ``bool``, ``datetime``;
``None`` marks a column predicates cannot use (lists, structs, binary, all-null, ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import pyarrow as pa

from cer_cli.events import Schema

#: File extension -> format name.
EXTENSIONS = {
    ".csv": "csv",
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
KINDS = ("int", "float", "str", "bool", "datetime")
#: Kinds a time column may have (strings are parsed as ISO 8601 datetimes).
TIME_KINDS = ("int", "float", "str", "datetime")
#: Unit of TIME for datetimes: nanoseconds since the epoch (UTC), as int64.
TIME_UNIT = "ns"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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


def _base(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _suffix(path: str) -> str:
    """The extension of a path's last component, as ``pathlib.PurePath.suffix`` gives it."""
    base = _base(path)
    i = base.rfind(".")
    return base[i:] if 0 < i < len(base) - 1 else ""


# --------------------------------------------------------------------------- kinds


def kind_of(dtype: Any) -> str | None:
    """The kind (Schema attribute type) of a column type: a pyarrow ``DataType`` or a polars
    dtype (converted to its Arrow type, so both readers go through the one table below).

    ``None`` for types predicates cannot use. Unsigned integers are ``int``; decimals are
    ``float``; dictionary-encoded strings (categoricals) are ``str``; dates are ``datetime``.
    """
    if not isinstance(dtype, pa.DataType):
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
    return None


def _is_string_view(dtype: pa.DataType) -> bool:
    check = getattr(pa.types, "is_string_view", None)
    return bool(check and check(dtype))


@lru_cache(maxsize=256)
def _polars_kind(dtype: Any) -> str | None:
    import polars as pl  # the local reader's library; only polars dtypes get here

    try:
        arrow = pl.Series("x", [], dtype=dtype).to_arrow().type
    except Exception:  # dtypes without an Arrow type (Int128, Object) are unusable
        return None
    return kind_of(arrow)


def unify_kinds(a: str | None, b: str | None) -> str | None:
    """The kind of a column that has kind ``a`` in one log and ``b`` in another: the kind of
    the values' common supertype (as polars' relaxed concatenation gives it). Raises
    ``ValueError`` for kinds with none (``bool`` and ``datetime``)."""
    if a == b or b is None:
        return a
    if a is None:
        return b
    pair = {a, b}
    for wider in ("str", "float", "int"):
        if wider in pair:
            return wider
    raise ValueError(f"no common type of {a} and {b}")


@dataclass(frozen=True)
class LogColumns:
    """What the contract needs to know of one log: where it is (for messages), its stream,
    its columns in order with their kinds (``kind_of``), and its type column (or None)."""

    where: str
    stream: str
    columns: Mapping[str, str | None]
    type_column: str | None = None

    @property
    def data_columns(self) -> list[str]:
        return [c for c in self.columns if c != self.type_column]


def _columns_text(columns: Iterable[str]) -> str:
    names = list(columns)
    return ", ".join(names) if names else "(none)"


def check_columns(where: str, columns: Iterable[str]) -> None:
    """Reject column names the readers reserve for themselves."""
    clash = [c for c in columns if c.startswith(RESERVED_PREFIX)]
    if clash:
        raise LogError(
            f"{where}: column names starting with {RESERVED_PREFIX!r} are reserved: {clash}"
        )


def type_column(where: str, columns: Iterable[str], given: str | None) -> str | None:
    """The type column: ``given`` (must exist), else ``type`` when present, else ``None``
    (every event of the log then has the stream name as its type)."""
    columns = list(columns)
    if given is not None:
        if given not in columns:
            raise LogError(
                f"{where}: no type column {given!r}", [f"columns: {_columns_text(columns)}"]
            )
        return given
    return DEFAULT_TYPE_COLUMN if DEFAULT_TYPE_COLUMN in columns else None


def time_column(logs: Sequence[LogColumns], given: str | None) -> str | None:
    """The time column: ``given`` (must be in every log) or detected, else ``None``.

    Detection: the only datetime column of the logs, else a column named ts/time/timestamp
    (first found, case-insensitive) of a time kind. A detected column must exist in every log.
    """
    if given is not None:
        for g in logs:
            if given not in g.columns:
                raise LogError(
                    f"{g.where}: no time column {given!r}",
                    [f"columns: {_columns_text(g.columns)}"],
                )
        return given
    union: dict[str, str | None] = {}
    for g in logs:
        for c in g.data_columns:
            union.setdefault(c, g.columns[c])
    dated = [c for c, k in union.items() if k == "datetime"]
    lowered = {c.lower(): c for c in union}
    named = [lowered[n] for n in TIME_NAMES if n in lowered]
    named = [c for c in named if union[c] in TIME_KINDS]
    if len(dated) == 1:
        chosen = dated[0]
    elif named:
        chosen = named[0]
    else:
        return None
    for g in logs:
        if chosen not in g.columns:
            raise LogError(
                f"time column {chosen!r} (detected) is missing from {g.where}",
                ["pass --time-column to choose the time column of every log"],
            )
    return chosen


# --------------------------------------------------------------------------- time


def time_kind(where: str, column: str, kind: str | None, dtype_text: str = "") -> str:
    """How a time column of this kind becomes TIME: ``int`` and ``float`` values are kept
    as they are (a numeric time, e.g. a sequence number); ``datetime`` and ``str`` (parsed
    as ISO 8601) become ``datetime``, stored as int64 nanoseconds since the epoch (UTC)."""
    if kind not in TIME_KINDS:
        raise LogError(f"{where}: time column {column!r} has unusable type {dtype_text or kind}")
    return "datetime" if kind == "str" else kind  # type: ignore[return-value]


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


# --------------------------------------------------------------------------- schema


def column_kinds(logs: Sequence[LogColumns], time_col: str | None) -> dict[str, str | None]:
    """Each data column's kind across the logs (first-seen order): unified over the logs,
    with a string time column counted as ``datetime`` (it is parsed)."""
    out: dict[str, str | None] = {}
    where: dict[str, tuple[str, str | None]] = {}
    for g in logs:
        for c in g.data_columns:
            k = g.columns[c]
            if c == time_col and k == "str":
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


def attribute_columns(log: LogColumns, kinds: Mapping[str, str | None]) -> list[str]:
    """The columns of ``log`` that can be event attributes (usable kind, not the type)."""
    return [c for c in log.data_columns if kinds.get(c) is not None]


def build_schema(
    logs: Sequence[LogColumns],
    present: Sequence[Mapping[str | None, Mapping[str, bool]]],
    kinds: Mapping[str, str | None],
    time_col: str | None,
) -> Schema:
    """The Schema of the logs. ``present[i]`` maps each event type of log ``i`` (``None``
    for a missing type) to whether each of its ``attribute_columns`` is non-null for at
    least one event of that type: those columns are the type's attributes. Types are listed
    per stream in sorted order; attributes in column order (first log first)."""
    event_types: dict[str, dict[str, str]] = {}
    streams: dict[str, list[str]] = {}
    for g, seen in zip(logs, present, strict=True):
        usable = attribute_columns(g, kinds)
        stream_types = streams.setdefault(g.stream, [])
        for etype in sorted(t for t in seen if t is not None):
            attrs = event_types.setdefault(etype, {})
            for c in usable:
                if seen[etype].get(c):
                    attrs.setdefault(c, kinds[c])  # type: ignore[arg-type]
            if etype not in stream_types:
                stream_types.append(etype)
    return Schema(
        event_types=event_types,
        streams={s: tuple(ts) for s, ts in streams.items()},
        time_column=time_col,
    )
