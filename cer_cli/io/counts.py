"""Matches counted per value of a key (``cer match --count --by KEY``, ``cer_cli.count(...,
by=...)``): one row per value with its number of matches.

A key's value for a match comes from the match (its PARTITION BY key), from the event a
variable binds (a column of the wide shape: ``a.carrier``, ``a.type``), or from the streams
it draws from (``stream``). Partition keys are counted by the engine without enumerating
(``engine.driver.run_count_by_partition``; ``by_partition``); the others need each match's
events, so the matches are enumerated and counted batch by batch (``count_values``):
memory is one batch and a count per distinct value, never the matches. Which keys a query
has is the plan's decision (``plan.count_by``).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

import polars as pl
import polars.selectors as cs

from cer_cli.events import POS, ROW, STREAM, TYPE, Match, MatchBatch, as_batches
from cer_cli.io.contract import LogError
from cer_cli.io.encoding import encodable, json_dumps, plain_text, table_cell
from cer_cli.io.lookup import EventLookup, gather, match_streams
from cer_cli.io.texts import exact_frame, from_text, inexact_in_python

if TYPE_CHECKING:
    from rich.console import Console

#: The column of the counts; ``COUNT_COLUMN_ELSE`` when a key is itself named so.
COUNT_COLUMN, COUNT_COLUMN_ELSE = "matches", "count"
#: The formats of counts (parquet is for matches: counts are a few rows, printed).
COUNT_FORMATS = ("table", "jsonl", "csv")
#: The polars type of the event columns that are not the log's.
_FIXED_DTYPES = {POS: pl.Int64, STREAM: pl.String, ROW: pl.Int64, TYPE: pl.String}


@dataclass(frozen=True)
class CountKey:
    """One key: ``name`` as written (the column of the counts) and where a match's value
    comes from: ``of`` ``"partition"`` (item ``group`` of the PARTITION BY key the match
    reports; ``source`` the attribute written), ``"event"`` (column ``source`` of the event
    frame — POS, STREAM, ROW, TYPE or a log's column — of the event ``variable`` binds; null
    when the match binds none) or ``"stream"`` (``lookup.match_streams``)."""

    name: str
    of: str
    source: str | None = None
    group: int = 0
    variable: str | None = None


def by_partition(keys: Sequence[CountKey]) -> bool:
    """Whether the engine's counts per PARTITION BY key give these keys' counts."""
    return all(k.of == "partition" for k in keys)


def tally_partitions(per_key: Mapping[tuple | None, int], keys: Sequence[CountKey]
                     ) -> dict[tuple, int]:
    """The counts per value of ``keys`` (partition keys) from the counts per PARTITION BY
    key (``run_count_by_partition``): the groups the keys name, the others summed."""
    out: dict[tuple, int] = {}
    for key, n in per_key.items():
        value = tuple(None if key is None else _no_nan(key[k.group]) for k in keys)
        out[value] = out.get(value, 0) + n
    return out


def count_values(matches: Iterable[Match] | Iterable[MatchBatch], lookup: EventLookup | None,
                 keys: Sequence[CountKey]) -> dict[tuple, int]:
    """The number of ``matches`` per value of ``keys``, batch by batch; ``lookup`` finds
    the events (not needed for partition keys alone). A NaN is no value (null)."""
    out: dict[tuple, int] = {}
    for batch in as_batches(matches, 16_384):
        if not len(batch):
            continue
        columns = [_values(batch, lookup, k).alias(str(i)) for i, k in enumerate(keys)]
        frame = pl.DataFrame(columns).with_columns(cs.float().fill_nan(None))
        # values Python holds inexactly are keyed as outputs write them (``io.texts``): as
        # Python datetimes, keys 10 ns apart, or an hour apart across a DST change, were one
        grouped = exact_frame(frame.group_by(pl.all(), maintain_order=True).len())
        for *value, n in grouped.iter_rows():
            out[tuple(value)] = out.get(tuple(value), 0) + n
    return out


def _values(batch: MatchBatch, lookup: EventLookup | None, key: CountKey) -> pl.Series:
    """``key``'s value for each match of ``batch``."""
    import numpy as np

    k = len(batch)
    if key.of == "partition":
        part = np.asarray(batch.part, dtype=np.int64).tolist()
        return pl.Series([None if (p := batch.partitions.get(i)) is None else p[key.group]
                          for i in part], strict=False)
    assert lookup is not None
    if key.of == "stream":
        return match_streams(batch, lookup)
    counts = np.diff(np.asarray(batch.off, dtype=np.int64))
    lab = np.asarray(batch.lab, dtype=np.int64)
    binds = np.asarray([key.variable in ls for ls in batch.labelsets] or [False])
    chosen = np.flatnonzero(binds[lab]) if len(lab) else np.zeros(0, np.int64)
    owner = np.repeat(np.arange(k), counts)[chosen]
    if len(owner) and np.bincount(owner).max() > 1:
        raise LogError(f"variable {key.variable!r} binds several events in one match, so"
                       f" {key.name} has several values per match")
    pos = np.asarray(batch.pos, dtype=np.int64)[chosen]
    dtype = _FIXED_DTYPES.get(key.source) or lookup.dtypes.get(key.source, pl.Null)
    if dtype.is_nested() or dtype == pl.Object:  # was an internal error (polars' scatter)
        what = ("lists" if isinstance(dtype, pl.List | pl.Array) else
                "structs" if isinstance(dtype, pl.Struct) else "Python objects")
        raise LogError(f"--by {key.name}: its values are {what}, which cannot key a count",
                       ["count by a column of single values (text, numbers, times)"])
    got = pl.Series(pos) if key.source == POS else gather(lookup, pos, [key.source])[key.source]
    column = pl.Series([None] * k, dtype=got.dtype if len(got) else dtype)
    return column.scatter(owner, got) if len(owner) else column


def _no_nan(v: Any) -> Any:
    return None if isinstance(v, float) and math.isnan(v) else v


def ordered(counts: Mapping[tuple, int]) -> list[tuple[tuple, int]]:
    """The counts, most matches first; ties by value (nulls last), so the order does not
    depend on how the counts were found."""
    def value(key: tuple) -> tuple:
        return tuple((v is None, v) for v in key)

    rows = list(counts.items())
    try:
        return sorted(rows, key=lambda r: (-r[1], value(r[0])))
    except TypeError:  # values of kinds that do not compare
        return sorted(rows, key=lambda r: (-r[1], repr(r[0])))


def count_column(keys: Sequence[CountKey]) -> str:
    """The name of the counts' column: ``matches``, or ``count`` if a key is ``matches``."""
    return COUNT_COLUMN_ELSE if any(k.name == COUNT_COLUMN for k in keys) else COUNT_COLUMN


def counts_frame(rows: Sequence[tuple[tuple, int]], keys: Sequence[CountKey],
                 dtypes: Mapping[str, pl.DataType] | None = None) -> pl.DataFrame:
    """``rows`` (``ordered``) as a polars frame: a column per key, in the type of the column
    it reads (``dtypes``: the event frame's), then the counts: Int64, or Int128 / Python
    ints (Object) when a count does not fit."""
    dtypes = dtypes or {}
    columns = []
    for i, k in enumerate(keys):
        values = [r[0][i] for r in rows]
        dtype = pl.String if k.of == "stream" else (
            _FIXED_DTYPES.get(k.source) or dtypes.get(k.source))  # type: ignore[arg-type]
        if dtype is not None and inexact_in_python(dtype):  # keyed as outputs write them
            columns.append(from_text(pl.Series(k.name, values, strict=False), dtype))
            continue
        try:
            columns.append(pl.Series(k.name, values, dtype=dtype))
        except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
            columns.append(pl.Series(k.name, values, strict=False))
    counts = [n for _, n in rows]
    top = max(counts, default=0)
    dtype = pl.Int64 if top < 2**63 else pl.Int128 if top < 2**127 else pl.Object
    columns.append(pl.Series(count_column(keys), counts, dtype=dtype))
    return pl.DataFrame(columns)


def write_counts(rows: Sequence[tuple[tuple, int]], keys: Sequence[CountKey], fmt: str,
                 out: TextIO | None = None, console: Console | None = None) -> None:
    """Print ``rows`` (``ordered``) as ``fmt``: ``table`` on ``console``; ``jsonl`` (one
    object per value, the io.output text rules: ISO datetimes, exact decimals) or ``csv``
    (a header, then a line per value) on ``out``. Counts are exact integers, however big."""
    import sys

    names = [k.name for k in keys] + [count_column(keys)]
    sys.set_int_max_str_digits(0)  # counts of exponential queries have thousands of digits
    if fmt == "table":
        from rich.markup import escape  # a value [/] is text, not rich's markup
        from rich.table import Table

        assert console is not None
        encodable(console.file, fmt)
        table = Table(show_edge=False, pad_edge=False)
        for name in names[:-1]:
            table.add_column(escape(name))
        table.add_column(escape(names[-1]), justify="right")
        for value, n in rows:
            table.add_row(*(escape(table_cell(v)) for v in value), f"{n:,}")
        console.print(table)
        return
    if fmt not in COUNT_FORMATS:
        raise LogError(f"counts cannot be written as {fmt}",
                       ["formats: " + ", ".join(COUNT_FORMATS)])
    out = encodable(out or sys.stdout, fmt)
    if fmt == "jsonl":
        for value, n in rows:
            out.write(json_dumps(dict(zip(names, (*value, n), strict=True))) + "\n")
    else:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(names)
        writer.writerows([*map(_csv_cell, value), n] for value, n in rows)
    out.flush()


def _csv_cell(v: Any) -> str:
    """A value as the CSV writer of matches writes it (``io.output``'s text rules)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return plain_text(v) or ""
