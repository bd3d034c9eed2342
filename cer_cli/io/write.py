"""Write streams of matches as JSONL, CSV or Parquet, or as a terminal table, in the long
shape (one row per match x event) or the wide shape (one row per match, ``SHAPES``).

Writers consume an iterator of ``Match`` or of ``MatchBatch`` (the engine's column-wise
batches) and never hold it whole: the table writes one match at a time, JSONL each
``MatchBatch`` column-wise as it arrives (and each ``Match`` on its own), CSV and Parquet
batch by batch, at most ``buffer_rows`` rows at once. Cost: O(reported events)
time, O(buffer_rows) memory on top of the ``EventLookup``. Files are written atomically
(``io.files.open_output``): a temporary file next to the target is renamed over it at the
end, and removed if anything (even Ctrl-C or SIGTERM) interrupts the run; devices, FIFOs and
descriptors are written directly.
"""

from __future__ import annotations

import codecs
import datetime as dt
import io
import json
import math
import os
import stat
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import polars as pl

if TYPE_CHECKING:  # only the table format loads rich (start-up, issue #15)
    from rich.console import Console

from cer_cli.events import POS, ROW, STREAM, TYPE, Match, MatchBatch, as_batches, as_matches
from cer_cli.io.files import open_output, output_descriptor
from cer_cli.io.read import EventLog, LogError

OUTPUT_FORMATS = ("table", "jsonl", "csv", "parquet")
#: Leading columns of the long (one row per match x event) format.
LONG_COLUMNS = ("match", "start", "end", "position", "stream", "row", "type", "vars",
                "start_time", "end_time", "partition")
#: Columns of one match in either shape (the wide shape starts with them).
MATCH_COLUMNS = ("match", "start", "end", "start_time", "end_time", "partition")
#: Per-event columns of a variable in the wide shape (``x.position`` ...), before attributes.
EVENT_COLUMNS = ("position", "stream", "row", "type")
SHAPES = ("long", "wide")


# --------------------------------------------------------------------------- lookup


@dataclass(frozen=True)
class EventRow:
    """One event of the log, as writers show it."""

    position: int
    stream: str
    row: int
    type: str
    time: Any
    attrs: dict[str, Any]


@dataclass
class EventLookup:
    """Finds an event's row by its stream position.

    Feed it the event frames the engine reads (``tap``). ``window=None`` keeps every frame:
    exact, but memory grows with the log (fine for in-memory logs, which are held anyway).
    With ``window=n`` it keeps the current frame plus at least the ``n`` events before it,
    dropping older frames: memory stays bounded for batched logs, but a match reaching back
    further than ``n`` events cannot be written (``get`` raises ``LogError``). A window at
    least the query's event window (``WITHIN n EVENTS``) is always enough. For a time window,
    ``horizon=(column, bound)`` drops frames whose last value of ``column`` is more than
    ``bound`` before the first value of the newest frame: no match ending in the newest frame
    can reach them, because a match spans at most ``bound`` of that time.

    Mutable on purpose: it follows the stream as the engine advances.
    """

    columns: tuple[str, ...]
    time_column: str | None = None
    window: int | None = None
    horizon: tuple[str, float] | None = None
    dtypes: dict[str, pl.DataType] = field(default_factory=dict)
    n_seen: int = 0
    _frames: deque = field(default_factory=deque, repr=False)

    @classmethod
    def for_log(
        cls, log: EventLog, window: int | None = None, horizon: tuple[str, float] | None = None
    ) -> EventLookup:
        return cls(log.columns, log.schema.time_column, window, horizon)

    def add(self, frame: pl.DataFrame) -> None:
        if frame.height == 0:
            return
        schema = frame.schema  # once: each ``frame.schema`` / ``.columns`` is O(columns)
        for c in self.columns:
            if c not in self.dtypes and c in schema:
                self.dtypes[c] = schema[c]
        self._frames.append((frame[POS][0], frame))
        self.n_seen += frame.height
        if self.window is not None:
            while len(self._frames) > 1:
                older = sum(f.height for _, f in list(self._frames)[1:-1])
                if older < self.window:
                    break
                self._frames.popleft()
        if self.horizon is not None and self.horizon[0] in frame.columns:
            column, bound = self.horizon
            first = frame[column].drop_nulls()
            if first.len():
                oldest_needed = first[0] - bound
                while len(self._frames) > 1:
                    last = self._frames[0][1][column].drop_nulls()
                    if not last.len() or last[-1] >= oldest_needed:
                        break
                    self._frames.popleft()

    def tap(self, frames: Iterable[pl.DataFrame]) -> Iterator[pl.DataFrame]:
        """Pass frames through (to the engine), remembering each one first."""
        for frame in frames:
            self.add(frame)
            yield frame

    def get(self, position: int) -> EventRow:
        for base, frame in reversed(self._frames):
            if base <= position < base + frame.height:
                rec = frame.row(position - base, named=True)
                return EventRow(
                    position=position,
                    stream=rec[STREAM],
                    row=rec[ROW],
                    type=rec[TYPE],
                    time=rec[self.time_column] if self.time_column else None,
                    attrs={c: rec.get(c) for c in self.columns},
                )
        if self._frames and position < self._frames[0][0]:
            kept = "the events" if self.window is None else f"the {self.window} events"
            raise LogError(
                f"event {position} is older than {kept} kept for output",
                ["read the log without batches, or keep a larger window of events"],
            )
        raise LogError(f"no event at position {position} has been read")

    def time_of(self, position: int) -> Any:
        """The event's time; None at ``n_seen``, the end of the log (an open match's end)."""
        return None if position >= self.n_seen else self.get(position).time


# --------------------------------------------------------------------------- records


def _json_value(v: Any) -> Any:
    if isinstance(v, dt.datetime | dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, list | tuple):
        return [_json_value(x) for x in v]
    if isinstance(v, dict):
        return {k: _json_value(x) for k, x in v.items()}
    return v


def _partition(match: Match, names: Sequence[str]) -> dict[str, Any] | None:
    if match.partition is None:
        return None
    keys = list(names) if len(names) == len(match.partition) else []
    keys = keys or [f"key{i}" for i in range(len(match.partition))]
    return {k: _json_value(v) for k, v in zip(keys, match.partition, strict=True)}


def partition_json(key: tuple | None, names: Sequence[str]) -> str | None:
    """The ``partition`` column of CSV/Parquet output: the JSON text of the JSONL record's
    ``partition`` object (None without PARTITION BY). Spark's writer uses it too."""
    value = None if key is None else _partition(Match(0, 0, (), key), names)
    return None if value is None else json.dumps(value, ensure_ascii=False, default=str)


def match_record(
    n: int, match: Match, lookup: EventLookup, partition_names: Sequence[str] = ()
) -> dict[str, Any]:
    """The JSON object of the ``n``-th match (0-based, output order)."""
    events = []
    for position, variables in match.events:
        ev = lookup.get(position)
        events.append(
            {
                "position": position,
                "stream": ev.stream,
                "row": ev.row,
                "type": ev.type,
                "vars": list(variables),
                "attrs": {k: _json_value(v) for k, v in ev.attrs.items()},
            }
        )
    return {
        "match": n,
        "start": match.start,
        "end": match.end,
        "start_time": _json_value(lookup.time_of(match.start)),
        "end_time": _json_value(lookup.time_of(match.end)),
        "partition": _partition(match, partition_names),
        "events": events,
    }


def _long_names(columns: Sequence[str]) -> list[str]:
    """Output names of the log's columns; a clash with a fixed column gets a ``log.`` prefix."""
    return [f"log.{c}" if c in LONG_COLUMNS else c for c in columns]


def _time_dtype(lookup: EventLookup) -> pl.DataType:
    """``start_time``/``end_time``: the time column's own dtype (its zone kept)."""
    tc = lookup.time_column
    return lookup.dtypes.get(tc, pl.String) if tc is not None else pl.String


def _long_schema(lookup: EventLookup) -> dict[str, pl.DataType]:
    fixed = [pl.Int64] * 4 + [pl.String, pl.Int64, pl.String, pl.List(pl.String)]
    fixed += [_time_dtype(lookup)] * 2 + [pl.String]
    schema: dict[str, pl.DataType] = dict(zip(LONG_COLUMNS, fixed, strict=True))
    for name, c in zip(_long_names(lookup.columns), lookup.columns, strict=True):
        schema[name] = lookup.dtypes.get(c, pl.String)
    return schema


def _match_frame(
    batch: MatchBatch, lookup: EventLookup, first: int, partition_names: Sequence[str]
) -> pl.DataFrame:
    """One row per match of ``batch``: ``MATCH_COLUMNS``. ``partition`` is the JSON text of
    the JSONL record's ``partition`` object (null without PARTITION BY), so that one column
    type holds any keys in CSV and Parquet alike."""
    import numpy as np

    start = np.asarray(batch.start, dtype=np.int64)
    end = np.asarray(batch.end, dtype=np.int64)
    tdt = _time_dtype(lookup)
    tc = lookup.time_column
    if tc is None or not len(start):
        start_time = end_time = pl.Series([None] * len(start), dtype=tdt)
    else:
        times = _times_at(lookup, np.concatenate([start, end]), tc)
        start_time, end_time = times[: len(start)], times[len(start):]
    part_text = {k: partition_json(batch.partitions.get(k), partition_names)
                 for k in np.unique(np.asarray(batch.part, dtype=np.int64)).tolist()}
    parts = pl.Series(np.asarray(batch.part, dtype=np.int64)).replace_strict(
        part_text, return_dtype=pl.String
    ) if len(start) else pl.Series([], dtype=pl.String)
    return pl.DataFrame({
        "match": np.arange(first, first + len(start), dtype=np.int64),
        "start": start,
        "end": end,
        "start_time": start_time.cast(tdt),
        "end_time": end_time.cast(tdt),
        "partition": parts,
    })


def _long_frame(
    batch: MatchBatch, lookup: EventLookup, first: int, partition_names: Sequence[str] = ()
) -> pl.DataFrame:
    """The long-format rows of ``batch`` (its matches numbered from ``first``), built
    column-wise: the events' rows are gathered from the looked-up frames in one go per
    frame, instead of one ``lookup.get`` per event.

    A match that reports no event (``SELECT NONE``, ``NOT(E)``, a selected variable it does
    not bind) still gets one row, its event columns null: every match has a row, so the
    distinct ``match`` values are the matches ``--count`` counts."""
    import numpy as np

    pos = np.asarray(batch.pos, dtype=np.int64)
    counts = np.diff(np.asarray(batch.off, dtype=np.int64))
    events = _gather(lookup, pos, [STREAM, ROW, TYPE, *lookup.columns])
    schema = _long_schema(lookup)
    vars_ = pl.Series("vars", [list(v) for v in batch.labelsets], dtype=pl.List(pl.String))
    lab = np.asarray(batch.lab, dtype=np.int64)
    per_event = [
        pl.Series("position", pos),
        (events[STREAM] if len(pos) else pl.Series([], dtype=pl.String)).alias("stream"),
        (events[ROW] if len(pos) else pl.Series([], dtype=pl.Int64)).alias("row"),
        (events[TYPE] if len(pos) else pl.Series([], dtype=pl.String)).alias("type"),
        (vars_[lab] if len(lab) else pl.Series([], dtype=pl.List(pl.String))).alias("vars"),
    ]
    have = set(events.columns)  # once: ``events.columns`` is O(columns)
    for name, c in zip(_long_names(lookup.columns), lookup.columns, strict=True):
        if len(pos) and c in have:
            per_event.append(events[c].alias(name))
        else:
            per_event.append(pl.Series(name, [None] * len(pos), dtype=schema[name]))
    rows = np.maximum(counts, 1)  # a match without events keeps one row
    out = pl.DataFrame(per_event)
    if len(rows) and (counts == 0).any():
        slot = np.full(int(rows.sum()), -1, dtype=np.int64)  # row -> its event, or none
        slot[np.repeat(counts > 0, rows)] = np.arange(len(pos), dtype=np.int64)
        none = np.flatnonzero(slot < 0)
        out = out.select(pl.all().gather(pl.Series(slot).scatter(none, None)))
    idx = np.repeat(np.arange(len(rows), dtype=np.int64), rows)  # row -> its match
    per_match = _match_frame(batch, lookup, first, partition_names)
    out = out.with_columns(
        pl.Series("match", idx + first),
        pl.Series("start", np.asarray(batch.start, dtype=np.int64)[idx]),
        pl.Series("end", np.asarray(batch.end, dtype=np.int64)[idx]),
        *(per_match[c][idx] for c in ("start_time", "end_time", "partition")),
    )
    return out.select(list(schema)).cast(schema, strict=False)  # type: ignore[arg-type]


_EVENT_SOURCES = {"position": POS, "stream": STREAM, "row": ROW, "type": TYPE}
_EVENT_DTYPES = {"position": pl.Int64, "stream": pl.String, "row": pl.Int64, "type": pl.String}


def _wide_columns(
    lookup: EventLookup, variables: Sequence[tuple[str, bool]]
) -> list[tuple[str, str, str, pl.DataType]]:
    """``(name, variable, event frame column, dtype)`` of every variable column of the wide
    shape; an attribute named like an event column gets a ``log.`` prefix (``x.log.type``)."""
    out = []
    for var, many in variables:
        cols = [(f"{var}.{c}", _EVENT_SOURCES[c], _EVENT_DTYPES[c]) for c in EVENT_COLUMNS]
        cols += [(f"{var}.log.{c}" if c in EVENT_COLUMNS else f"{var}.{c}", c,
                  lookup.dtypes.get(c, pl.String)) for c in lookup.columns]
        out += [(name, var, source, pl.List(d) if many else d) for name, source, d in cols]
    return out


def _wide_schema(lookup: EventLookup, variables: Sequence[tuple[str, bool]]) -> dict[str, pl.DataType]:
    fixed = [pl.Int64] * 3 + [_time_dtype(lookup)] * 2 + [pl.String]
    schema: dict[str, pl.DataType] = dict(zip(MATCH_COLUMNS, fixed, strict=True))
    schema.update((name, dtype) for name, _, _, dtype in _wide_columns(lookup, variables))
    return schema


def batch_variables(batch: MatchBatch) -> list[tuple[str, bool]]:
    """The variables ``batch`` binds, in first-seen order, each with whether some match binds
    it to several events: the wide shape's variables when the query's are not known."""
    import numpy as np

    order: dict[str, bool] = {}
    match = np.repeat(np.arange(len(batch)), np.diff(np.asarray(batch.off)))
    for ls in batch.labelsets:
        for v in ls:
            order.setdefault(v, False)
    for v in order:
        has = np.asarray([v in ls for ls in batch.labelsets] or [False])
        m = match[has[np.asarray(batch.lab, dtype=np.int64)]] if len(batch.lab) else match[:0]
        order[v] = bool(len(m) and np.bincount(m).max() > 1)
    return list(order.items())


def _wide_frame(
    batch: MatchBatch, lookup: EventLookup, first: int,
    variables: Sequence[tuple[str, bool]], partition_names: Sequence[str] = (),
) -> pl.DataFrame:
    """The wide rows of ``batch``: one per match, ``MATCH_COLUMNS`` then, per variable, its
    event's ``EVENT_COLUMNS`` and attributes (``x.position``, ``x.price`` ...); a variable
    that may bind several events (under ``+``) gets list columns, in stream order. A match
    that binds a variable to no event has nulls there."""
    import numpy as np

    pos = np.asarray(batch.pos, dtype=np.int64)
    counts = np.diff(np.asarray(batch.off, dtype=np.int64))
    out = _match_frame(batch, lookup, first, partition_names).with_row_index("__m")
    schema = _wide_schema(lookup, variables)
    columns = _wide_columns(lookup, variables)
    if len(pos):
        events = _gather(lookup, pos, [STREAM, ROW, TYPE, *lookup.columns])
        lab = np.asarray(batch.lab, dtype=np.int64)
        vars_ = pl.Series([list(v) for v in batch.labelsets], dtype=pl.List(pl.String))
        events = events.with_columns(
            pl.Series("__m", np.repeat(np.arange(len(counts)), counts)).cast(pl.UInt32),
            pl.Series(POS, pos), vars_[lab].alias("__vars"),
        ).explode("__vars")
    for var, many in variables:
        if not len(pos):
            continue
        sub = events.filter(pl.col("__vars") == var).select(
            "__m", *(pl.col(source).alias(name) for name, v, source, _ in columns if v == var))
        if many:
            sub = sub.group_by("__m", maintain_order=True).agg(pl.exclude("__m"))
        elif sub["__m"].is_duplicated().any():
            raise LogError(f"variable {var!r} binds several events in one match, so it cannot"
                           " be one column of the wide shape")
        out = out.join(sub, on="__m", how="left", maintain_order="left")
    out = out.drop("__m")
    have = set(out.columns)
    return out.select(
        pl.col(c).cast(d, strict=False) if c in have else pl.lit(None, dtype=d).alias(c)
        for c, d in schema.items()
    )


def match_frames(
    matches: Iterable[Match] | Iterable[MatchBatch], lookup: EventLookup, shape: str = "long",
    variables: Sequence[tuple[str, bool]] | None = None, partition_names: Sequence[str] = (),
    buffer_rows: int = 50_000,
) -> Iterator[pl.DataFrame]:
    """The rows of ``matches`` in ``shape``, a frame per batch of at most ``buffer_rows``
    matches and ``BATCH_EVENTS`` reported events (``as_batches``; the engine's own batches
    as they come), what the CSV and Parquet writers write. ``variables`` (name, many) are
    the wide shape's; ``None`` takes those of the first batch (``batch_variables``)."""
    if shape not in SHAPES:
        raise LogError(f"unknown shape {shape!r}", ["shapes: " + ", ".join(SHAPES)])
    n = 0
    for batch in as_batches(matches, buffer_rows):
        if shape == "long":
            frame = _long_frame(batch, lookup, n, partition_names)
        else:
            if variables is None:
                variables = batch_variables(batch)
            frame = _wide_frame(batch, lookup, n, variables, partition_names)
        n += len(batch)
        yield frame


def empty_frame(
    lookup: EventLookup, shape: str = "long", variables: Sequence[tuple[str, bool]] | None = None
) -> pl.DataFrame:
    """The frame of no match in ``shape``: its columns and types."""
    if shape == "long":
        return pl.DataFrame(schema=_long_schema(lookup))
    return pl.DataFrame(schema=_wide_schema(lookup, variables or ()))


def match_frame(
    matches: Iterable[Match] | Iterable[MatchBatch], lookup: EventLookup, shape: str = "long",
    variables: Sequence[tuple[str, bool]] | None = None, partition_names: Sequence[str] = (),
) -> pl.DataFrame:
    """All of ``matches`` as one frame in ``shape``: what ``write_parquet`` writes."""
    frames = [f for f in match_frames(matches, lookup, shape, variables, partition_names) if f.height]
    return pl.concat(frames) if frames else empty_frame(lookup, shape, variables)


# --------------------------------------------------------------------------- writers


def write_jsonl(
    matches: Iterable[Match] | Iterable[MatchBatch],
    lookup: EventLookup,
    out: TextIO,
    partition_names: Sequence[str] = (),
) -> int:
    """One JSON object per line; returns the number of matches.

    A ``MatchBatch`` is written column-wise (``_jsonl_lines``: the same text as
    ``json.dumps(match_record(...))``, built in polars instead of one dict per event); a
    ``Match`` is written on its own, as it arrives."""
    n = 0
    for item in matches:
        if isinstance(item, MatchBatch):
            if len(item):
                out.write(_jsonl_lines(item, lookup, n, partition_names))
                n += len(item)
            continue
        record = match_record(n, item, lookup, partition_names)
        out.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        n += 1
    return n


#: dtypes whose JSON text polars writes exactly as ``json.dumps`` does.
_POLARS_JSON = (pl.String, pl.Categorical, pl.Enum)


def _json_texts(s: pl.Series) -> pl.Series:
    """The ``json.dumps(_json_value(v), ensure_ascii=False)`` text of every value of ``s``,
    computed in polars for the common dtypes and per value only for the others."""
    dtype = s.dtype
    if dtype.is_integer():
        return s.cast(pl.String).fill_null("null")
    if dtype == pl.Boolean:
        return pl.select(
            pl.when(s).then(pl.lit("true")).when(s.not_()).then(pl.lit("false"))
            .otherwise(pl.lit("null"))
        ).to_series()
    if isinstance(dtype, _POLARS_JSON) or dtype in _POLARS_JSON:
        enc = pl.DataFrame({"v": s.cast(pl.String)}).select(
            pl.struct("v").struct.json_encode().str.slice(5).str.head(-1)
        ).to_series()
        return enc
    if _iso_in_polars(s):
        text = s.dt.strftime("%Y-%m-%d")
        if dtype != pl.Date:  # isoformat: seconds, then microseconds only when not zero
            us = s.dt.microsecond()
            text = pl.select(
                pl.concat_str(
                    _lit(text), pl.lit("T"), _lit(s.dt.strftime("%H:%M:%S")),
                    pl.when(_lit(us) != 0)
                    .then(pl.lit(".") + _lit(us).cast(pl.String).str.zfill(6))
                    .otherwise(pl.lit("")),
                )
            ).to_series()
        return pl.select(
            (pl.lit('"') + _lit(text) + pl.lit('"')).fill_null(pl.lit("null"))
        ).to_series()
    if dtype.is_float():
        # polars writes a float64 as Python's repr does, except in exponent notation
        # (|x| < 1e-4 or >= 1e16): those few values take repr. float32 is widened first,
        # as Python sees it.
        x = s.cast(pl.Float64)
        text = x.cast(pl.String)
        finite = x.is_finite()
        plain = (x == 0) | ((x.abs() >= 1e-4) & (x.abs() < 1e16))
        odd = (finite & ~plain).fill_null(False)
        if odd.any():
            idx = odd.arg_true()
            text = text.scatter(idx, [repr(v) for v in x.gather(idx).to_list()])
        return pl.select(
            pl.when(_lit(finite)).then(_lit(text)).otherwise(pl.lit("null"))
        ).to_series()
    return pl.Series(
        [json.dumps(_json_value(v), ensure_ascii=False, default=str) for v in s.to_list()],
        dtype=pl.String,
    )


def _lit(s: pl.Series) -> pl.Expr:
    """A series as an expression (``pl.lit`` keeps its values and length)."""
    return pl.lit(s)


def _iso_in_polars(s: pl.Series) -> bool:
    """Whether polars' ``strftime`` gives the same text as Python's ``isoformat`` for every
    value: naive datetimes and dates with four-digit years (a time zone adds an offset,
    other years other padding: those take the per-value path)."""
    dtype = s.dtype
    if dtype == pl.Date:
        pass
    elif not isinstance(dtype, pl.Datetime) or dtype.time_zone is not None:
        return False
    years = s.dt.year().drop_nulls()
    return not years.len() or (years.min() >= 1000 and years.max() <= 9999)  # type: ignore[operator]


def _times_at(lookup: EventLookup, pos: Any, tc: str) -> pl.Series:
    """The time column at positions ``pos``; null at ``lookup.n_seen`` and after: the end
    of the log, which a trailing absence's open match ends at (docs/language.md)."""
    import numpy as np

    past = pos >= lookup.n_seen
    if not past.any():
        return _gather(lookup, pos, [tc])[tc]
    times = _gather(lookup, np.where(past, pos.min(), pos), [tc])[tc]
    return pl.select(pl.when(pl.Series(past)).then(None).otherwise(times).alias(tc)).to_series()


def _gather(lookup: EventLookup, pos: Any, cols: Sequence[str]) -> pl.DataFrame:
    """Columns ``cols`` of the events at positions ``pos`` (in that order), gathered from the
    looked-up frames in one go per frame; a position not kept raises ``LogError``."""
    import numpy as np

    frames = list(lookup._frames)
    if len(pos) and (not frames or pos.min() < frames[0][0]):
        lookup.get(int(pos.min()))  # raises the LogError that explains why
    bases = np.array([b for b, _ in frames], dtype=np.int64)
    which = np.searchsorted(bases, pos, side="right") - 1
    parts, order = [], []
    for f in np.unique(which).tolist():
        base, frame = frames[f]
        sel = np.flatnonzero(which == f)
        rows = pos[sel] - base
        if rows.max() >= frame.height:
            lookup.get(int(pos[sel][rows.argmax()]))  # a position never read: raises
        have = set(frame.columns)
        parts.append(frame.select([c for c in cols if c in have])[rows])
        order.append(sel)
    if not parts:  # no position (matches that report no event): the columns, no rows
        if not frames:
            return pl.DataFrame()
        have = set(frames[-1][1].columns)
        return frames[-1][1].select([c for c in cols if c in have]).clear()
    events = pl.concat(parts, how="diagonal_relaxed")
    if len(order) > 1:
        events = events[np.argsort(np.concatenate(order), kind="stable")]
    return events


def event_columns(lookup: EventLookup, pos: Any, cols: Sequence[str]) -> pl.DataFrame:
    """Columns ``cols`` (the event frame's, reserved ones included) of the events at
    positions ``pos``, in that order: for outputs built beside these writers (the plot)."""
    import numpy as np

    return _gather(lookup, np.asarray(pos, dtype=np.int64), cols)


def _jsonl_lines(
    batch: MatchBatch, lookup: EventLookup, first: int, partition_names: Sequence[str]
) -> str:
    """The JSONL text of ``batch`` (matches numbered from ``first``), byte for byte what
    ``match_record`` + ``json.dumps`` give, but built column-wise: one string column per
    event, joined per match, so the cost per event is polars', not a Python dict's."""
    import numpy as np

    pos = np.asarray(batch.pos, dtype=np.int64)
    counts = np.diff(np.asarray(batch.off, dtype=np.int64))
    cols = [STREAM, ROW, TYPE, *lookup.columns]
    events = _gather(lookup, pos, cols)
    lit = pl.lit
    ev_parts: list[pl.Expr | pl.Series] = [
        lit('{"position": '), pl.Series(pos).cast(pl.String),
        lit(', "stream": '), _json_texts(events[STREAM]),
        lit(', "row": '), _json_texts(events[ROW]),
        lit(', "type": '), _json_texts(events[TYPE]),
        lit(', "vars": '),
    ]
    vars_text = pl.Series([json.dumps(list(v), ensure_ascii=False) for v in batch.labelsets],
                          dtype=pl.String)
    lab = np.asarray(batch.lab, dtype=np.int64)
    ev_parts.append(vars_text[lab] if len(lab) else pl.Series([], dtype=pl.String))
    ev_parts.append(lit(', "attrs": {'))
    have = set(events.columns)  # once: ``events.columns`` is O(columns)
    for i, c in enumerate(lookup.columns):
        key = json.dumps(c, ensure_ascii=False)
        ev_parts.append(lit(("" if i == 0 else ", ") + key + ": "))
        if c in have:
            ev_parts.append(_json_texts(events[c]))
        else:
            ev_parts.append(lit("null"))
    ev_parts.append(lit("}}"))
    match_ids = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    ev_text = pl.DataFrame({"m": match_ids}).with_columns(
        pl.concat_str(ev_parts).alias("ev")
    )
    if (counts == 1).all():  # the common case needs no grouping
        per_match = ev_text["ev"]
    else:
        joined = ev_text.group_by("m", maintain_order=True).agg(pl.col("ev").str.join(", "))
        # a match without events (SELECT NONE, NOT(E)) has no group: its list stays empty
        per_match = pl.repeat("", len(counts), dtype=pl.String, eager=True).scatter(
            joined["m"], joined["ev"])
    start = np.asarray(batch.start, dtype=np.int64)
    end = np.asarray(batch.end, dtype=np.int64)
    tc = lookup.time_column
    if tc is None:
        start_time = end_time = lit("null")
    else:
        times = _json_texts(_times_at(lookup, np.concatenate([start, end]), tc))
        start_time, end_time = times[: len(start)], times[len(start):]
    part_text: dict[int, str] = {}
    for k in np.unique(np.asarray(batch.part, dtype=np.int64)).tolist():
        key = batch.partitions.get(k)
        value = None if key is None else _partition(Match(0, 0, (), key), partition_names)
        part_text[k] = json.dumps(value, ensure_ascii=False, default=str)
    parts = pl.Series(np.asarray(batch.part, dtype=np.int64)).replace_strict(
        part_text, return_dtype=pl.String
    )
    lines = pl.select(
        pl.concat_str(
            lit('{"match": '), pl.Series(np.arange(first, first + len(start), dtype=np.int64)).cast(pl.String),
            lit(', "start": '), pl.Series(start).cast(pl.String),
            lit(', "end": '), pl.Series(end).cast(pl.String),
            lit(', "start_time": '), start_time,
            lit(', "end_time": '), end_time,
            lit(', "partition": '), parts,
            lit(', "events": ['), per_match, lit("]}\n"),
        )
    ).to_series()
    return lines.str.join("").item()


def write_csv(
    matches: Iterable[Match] | Iterable[MatchBatch], lookup: EventLookup, out: TextIO,
    buffer_rows: int = 10_000, *, shape: str = "long",
    variables: Sequence[tuple[str, bool]] | None = None, partition_names: Sequence[str] = (),
) -> int:
    """One row per (match, event) in the long shape (one with empty event columns for a
    match without reported events), ``vars`` joined with ``|``; one row per match in the
    wide shape, list columns as JSON arrays. Dates and times are written as
    JSONL writes them (``isoformat``, zone kept). Returns rows."""
    total = 0
    for frame in match_frames(matches, lookup, shape, variables, partition_names, buffer_rows):
        if shape == "long":
            frame = frame.with_columns(pl.col("vars").list.join("|"))
        frame = _csv_ready(frame)
        if total == 0:
            _refuse_nested_for_csv(frame.schema)
        if frame.height:
            out.write(frame.write_csv(include_header=total == 0))
            total += frame.height
    if total == 0:
        out.write(",".join(empty_frame(lookup, shape, variables).columns) + "\n")
    return total


def _iso_texts(s: pl.Series) -> pl.Series:
    """Dates and datetimes as the JSONL text without quotes (``isoformat``, zone kept)."""
    text = _json_texts(s)
    return pl.select(
        pl.when(_lit(text) == "null").then(None).otherwise(_lit(text).str.slice(1).str.head(-1))
    ).to_series().alias(s.name)


def _csv_ready(frame: pl.DataFrame) -> pl.DataFrame:
    """Temporal columns as ``_iso_texts``; list columns of the wide shape as JSON arrays."""
    out = []
    for name, dtype in frame.schema.items():
        if dtype in (pl.Date,) or isinstance(dtype, pl.Datetime):
            out.append(_iso_texts(frame[name]))
        elif isinstance(dtype, pl.List) and not isinstance(dtype.inner, pl.List | pl.Struct):
            texts = _json_texts(frame[name])
            out.append(pl.select(pl.when(_lit(texts) == "null").then(None)
                                 .otherwise(_lit(texts))).to_series().alias(name))
    return frame.with_columns(out) if out else frame


def _refuse_nested_for_csv(schema: pl.Schema) -> None:
    """CSV has no lists, structs or bytes (polars fails mid-write): name the column instead."""
    for name, dtype in schema.items():
        what = ("lists" if isinstance(dtype, pl.List | pl.Array) else
                "structs" if isinstance(dtype, pl.Struct) else
                "binary values" if dtype == pl.Binary else None)
        if what is not None:
            raise LogError(
                f"column {name!r} holds {what}, which the CSV output cannot hold",
                ["use --format jsonl or --format parquet (both keep nested values)"],
            )


#: Rows per Parquet row group, at most (see ``write_parquet``).
ROW_GROUP_ROWS = 1 << 19
#: Bytes (Arrow, in memory) per Parquet row group, at most: a wide row of a match under
#: ``A+`` holds lists of every event it reports, so rows alone bound nothing.
ROW_GROUP_BYTES = 32 * 2**20


def write_parquet(
    matches: Iterable[Match] | Iterable[MatchBatch], lookup: EventLookup, path: str | Path | Any,
    buffer_rows: int = 50_000, *, shape: str = "long",
    variables: Sequence[tuple[str, bool]] | None = None, partition_names: Sequence[str] = (),
) -> int:
    """Row groups of ``ROW_GROUP_ROWS`` rows or ``ROW_GROUP_BYTES`` bytes, whichever comes
    first, in ``shape``; ``vars`` and the wide shape's variables under ``+`` are lists.
    ``path`` may be a binary stream instead of a path. Returns rows. Large row groups on
    purpose: a Parquet writer keeps every row group's metadata until it writes the footer,
    so small groups make memory grow with the output; the byte bound keeps a group of
    large matches from growing with them."""
    import pyarrow as pa  # only Parquet output needs pyarrow: imported here, not at start-up
    import pyarrow.parquet as pq

    writer: pq.ParquetWriter | None = None
    pending: list[pa.Table] = []
    total = 0
    rows = nbytes = 0  # held in ``pending``

    def flush() -> None:
        if pending:
            writer.write_table(pa.concat_tables(pending))
            pending.clear()

    try:
        for frame in match_frames(matches, lookup, shape, variables, partition_names, buffer_rows):
            if not frame.height:
                continue
            table = frame.to_arrow()
            if writer is None:
                sink = str(path) if isinstance(path, str | Path) else path
                writer = pq.ParquetWriter(sink, table.schema)
            table = table.cast(writer.schema)
            pending.append(table)
            total += frame.height
            rows += table.num_rows
            nbytes += table.nbytes
            if rows >= ROW_GROUP_ROWS or nbytes >= ROW_GROUP_BYTES:
                flush()
                rows = nbytes = 0
        if writer is None:  # through pyarrow too: polars would write to the descriptor itself,
            # bypassing the stream that names the output in a failure
            empty = empty_frame(lookup, shape, variables).to_arrow()
            writer = pq.ParquetWriter(str(path) if isinstance(path, str | Path) else path,
                                      empty.schema)
        flush()
    finally:
        if writer is not None:
            writer.close()
    return total


def write_wide_jsonl(
    matches: Iterable[Match] | Iterable[MatchBatch], lookup: EventLookup, out: TextIO,
    variables: Sequence[tuple[str, bool]] | None = None, partition_names: Sequence[str] = (),
) -> int:
    """The wide shape as JSON lines: one object per match, keyed by the wide columns
    (``partition`` as the object it names). Returns matches."""
    n = 0
    for frame in match_frames(matches, lookup, "wide", variables, partition_names):
        for row in frame.iter_rows(named=True):
            if row["partition"] is not None:
                row["partition"] = json.loads(row["partition"])
            out.write(json.dumps(_json_value(row), ensure_ascii=False, default=str) + "\n")
            n += 1
    return n


def render_wide_table(
    matches: Iterable[Match] | Iterable[MatchBatch], lookup: EventLookup, console: Console,
    variables: Sequence[tuple[str, bool]] | None = None, partition_names: Sequence[str] = (),
    started: float | None = None,
) -> int:
    """The wide shape on a terminal: per match a title line, then one table row per variable
    (its position(s), type(s) and non-null attributes), then the summary line."""
    from rich.table import Table

    started = time.perf_counter() if started is None else started
    n = 0
    for frame in match_frames(matches, lookup, "wide", variables, partition_names):
        names = [c[: -len(".position")] for c in frame.columns if c.endswith(".position")]
        for row in frame.iter_rows(named=True):
            title = f"[bold]match {row['match']}[/]  positions {row['start']}..{row['end']}"
            if row["start_time"] is not None:
                title += f"  time {_cell(row['start_time'])} → {_cell(row['end_time'])}"
            if row["partition"] is not None:
                part = json.loads(row["partition"])
                title += "  " + " ".join(f"{k}={_cell(v)}" for k, v in part.items())
            console.print(title)
            n += 1
            if all(row[f"{var}.position"] is None for var in names):
                console.print(NO_EVENTS_LINE)
                console.print()
                continue
            table = Table(show_edge=False, pad_edge=False)
            for col in ("var", "pos", "type", "attributes"):
                table.add_column(col, style="cyan" if col == "var" else None)
            for var in names:
                if row[f"{var}.position"] is None:
                    continue
                fixed = {f"{var}.{c}" for c in EVENT_COLUMNS}
                attrs = "  ".join(
                    f"{k[len(var) + 1:]}={_cells(v)}" for k, v in row.items()
                    if k.startswith(var + ".") and k not in fixed and v is not None
                    and (not isinstance(v, list) or any(x is not None for x in v)))
                table.add_row(var, _cells(row[f"{var}.position"]), _cells(row[f"{var}.type"]), attrs)
            console.print(table)
            console.print()
    elapsed = max(time.perf_counter() - started, 1e-9)
    console.print(
        f"[bold]{n}[/] match{'es' if n != 1 else ''} · {lookup.n_seen:,} events read · "
        f"{lookup.n_seen / elapsed:,.0f} events/s"
    )
    return n


#: The table's line for a match that reports no event (SELECT NONE, NOT(E), a selected
#: variable it does not bind): the match is shown, with nothing under it.
NO_EVENTS_LINE = "[dim](no reported events)[/]"


def _cell(v: Any) -> str:
    v = _json_value(v)
    return "∅" if v is None else str(v)


def _cells(v: Any) -> str:
    """A cell of the wide table: a list (a variable under ``+``) as ``[a, b]``."""
    return "[" + ", ".join(map(_cell, v)) + "]" if isinstance(v, list) else _cell(v)


def render_table(
    matches: Iterable[Match] | Iterable[MatchBatch],
    lookup: EventLookup,
    console: Console,
    partition_names: Sequence[str] = (),
    started: float | None = None,
) -> int:
    """Print each match as a small table as it arrives, then a summary line."""
    from rich.table import Table

    started = time.perf_counter() if started is None else started
    n = 0
    for n, match in enumerate(as_matches(matches), start=1):
        rec = match_record(n - 1, match, lookup, partition_names)
        title = f"[bold]match {n - 1}[/]  positions {match.start}..{match.end}"
        if rec["start_time"] is not None:
            title += f"  time {rec['start_time']} → {rec['end_time']}"
        if rec["partition"]:
            title += "  " + " ".join(f"{k}={_cell(v)}" for k, v in rec["partition"].items())
        console.print(title)
        if not rec["events"]:
            console.print(NO_EVENTS_LINE)
            console.print()
            continue
        table = Table(show_edge=False, pad_edge=False)
        for col in ("pos", "stream", "type", "vars", "attributes"):
            table.add_column(col, style="cyan" if col == "vars" else None)
        for ev in rec["events"]:
            attrs = "  ".join(f"{k}={_cell(v)}" for k, v in ev["attrs"].items() if v is not None)
            table.add_row(
                str(ev["position"]), ev["stream"], ev["type"], ",".join(ev["vars"]), attrs
            )
        console.print(table)
        console.print()
    elapsed = max(time.perf_counter() - started, 1e-9)
    rate = lookup.n_seen / elapsed
    console.print(
        f"[bold]{n}[/] match{'es' if n != 1 else ''} · {lookup.n_seen:,} events read · "
        f"{rate:,.0f} events/s"
    )
    return n


# --------------------------------------------------------------------------- files


class _Sequential:
    """A write-only stream that counts what it wrote, for Parquet writers that ask ``tell()``
    of a FIFO or a device (where ``lseek`` fails)."""

    def __init__(self, raw: Any) -> None:
        self.raw, self.position, self.closed = raw, 0, False

    def write(self, data: bytes) -> int:
        self.raw.write(data)
        self.position += len(data)
        return len(data)

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        self.raw.flush()

    def close(self) -> None:
        self.closed = True  # the caller closes ``raw``

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False


def refuse_input_as_output(output: str | Path | None, inputs: Iterable[str | Path]) -> None:
    """Raise ``LogError`` if ``output`` is one of ``inputs`` (a log or the query file): writing
    it would destroy the input. Files are compared by (device, inode), so a symlink or a hard
    link to an input is caught too; ``-`` and paths that do not exist are never inputs."""
    if output is None or str(output) == "-":
        return
    try:
        out = os.stat(output)
    except OSError:
        return
    if not stat.S_ISREG(out.st_mode) and not stat.S_ISDIR(out.st_mode):
        return  # /dev/null or a FIFO: writing it destroys nothing
    for path in inputs:
        if str(path) == "-":
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino):
            same = "" if os.path.abspath(path) == os.path.abspath(output) else f" (the same file as {path})"
            raise LogError(
                f"refusing to write the output to {output}{same}: it is an input, and writing"
                " it would destroy it",
                ["write the matches to another file"],
            )


def _json_escape(exc: UnicodeError) -> tuple[str, int]:
    """Codec error handler: a character the stream cannot encode as its JSON ``\\uXXXX``
    escape (a surrogate pair beyond the BMP), the same string to any JSON reader."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = []
    for ch in exc.object[exc.start:exc.end]:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            out.append(f"\\u{0xD800 | (cp >> 10):04x}\\u{0xDC00 | (cp & 0x3FF):04x}")
        else:
            out.append(f"\\u{cp:04x}")
    return "".join(out), exc.end


codecs.register_error("cer-json-escape", _json_escape)


def _encodable(out: TextIO, fmt: str) -> TextIO:
    """``out``, set not to fail on characters its encoding lacks (``PYTHONIOENCODING=ascii``,
    a C locale): JSONL escapes them as ``\\uXXXX`` (still the same JSON), CSV and the table
    as ``\\xe9``-style backslash escapes (readable, and better than an internal error)."""
    encoding = getattr(out, "encoding", None)
    if not encoding or not hasattr(out, "reconfigure"):
        return out
    try:
        if codecs.lookup(encoding).name in ("utf-8", "utf-16", "utf-32", "gb18030"):
            return out
        out.reconfigure(errors="cer-json-escape" if fmt == "jsonl" else "backslashreplace")
    except (LookupError, ValueError, OSError, AttributeError):
        pass
    return out


def write_matches(
    matches: Iterable[Match] | Iterable[MatchBatch],
    lookup: EventLookup,
    fmt: str,
    output: str | Path | None = None,
    *,
    console: Console | None = None,
    stdout: TextIO | None = None,
    partition_names: Sequence[str] = (),
    started: float | None = None,
    shape: str = "long",
    variables: Sequence[tuple[str, bool]] | None = None,
) -> int:
    """Write ``matches`` in ``fmt`` to ``output`` (a file, through ``open_output``) or to
    standard output (``None``, ``-`` or ``/dev/stdout``), in ``shape`` (``SHAPES``; ``variables`` are the
    wide shape's ``(name, many)``, see ``match_frames``).

    ``table`` always goes to ``console`` (an ``output`` with it is refused, not ignored);
    ``parquet`` needs a file. A failure to write (disk full, a failed rename) raises
    ``OutputError``; on standard output, a reader that left raises ``ReaderGone``. Returns
    the number of matches for jsonl/table and of rows for csv/parquet.
    """
    if fmt not in OUTPUT_FORMATS:
        raise LogError(f"unknown output format {fmt!r}", ["formats: " + ", ".join(OUTPUT_FORMATS)])
    if shape not in SHAPES:
        raise LogError(f"unknown shape {shape!r}", ["shapes: " + ", ".join(SHAPES)])
    wide = shape == "wide"
    shaped = {"shape": shape, "variables": variables, "partition_names": partition_names}
    to_stdout = output is None or str(output) == "-" or output_descriptor(output) == 1
    if fmt == "table":
        if not to_stdout:
            raise LogError("the table format is for the terminal and cannot be written to a file",
                           ["use --format jsonl, csv or parquet with -o"])
        if console is None:
            from rich.console import Console

            console = Console()
        _encodable(console.file, fmt)
        if wide:
            return render_wide_table(matches, lookup, console, variables, partition_names, started)
        return render_table(matches, lookup, console, partition_names, started)
    if fmt == "parquet" and to_stdout:
        raise LogError("parquet output needs a file", ["give an output path (-o FILE)"])
    if to_stdout:
        out = _encodable(stdout or sys.stdout, fmt)
        n = _write_text(matches, lookup, fmt, out, shaped)
        out.flush()
        return n
    with open_output(output) as raw:  # type: ignore[arg-type]
        if fmt == "parquet":
            return write_parquet(matches, lookup, raw if raw.seekable() else _Sequential(raw),
                                 **shaped)
        with io.TextIOWrapper(raw, encoding="utf-8", newline="") as f:
            return _write_text(matches, lookup, fmt, f, shaped)


def _write_text(matches, lookup: EventLookup, fmt: str, out: TextIO, shaped: dict) -> int:
    if fmt == "jsonl" and shaped["shape"] == "wide":
        return write_wide_jsonl(matches, lookup, out, shaped["variables"], shaped["partition_names"])
    if fmt == "jsonl":
        return write_jsonl(matches, lookup, out, shaped["partition_names"])
    return write_csv(matches, lookup, out, **shaped)
