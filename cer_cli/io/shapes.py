"""The shapes of matches as frames: long (one row per match x event) and wide (one row per
match, a group of columns per variable), built column-wise from ``MatchBatch``es.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import polars as pl

from cer_cli.events import POS, ROW, STREAM, TYPE, Match, MatchBatch, as_batches
from cer_cli.io.contract import LogError
from cer_cli.io.encoding import partition_json
from cer_cli.io.lookup import EventLookup, gather, times_at

#: Leading columns of the long (one row per match x event) format.
LONG_COLUMNS = ("match", "start", "end", "position", "stream", "row", "type", "vars",
                "start_time", "end_time", "partition")
#: Columns of one match in either shape (the wide shape starts with them).
MATCH_COLUMNS = ("match", "start", "end", "start_time", "end_time", "partition")
#: Per-event columns of a variable in the wide shape (``x.position`` ...), before attributes.
EVENT_COLUMNS = ("position", "stream", "row", "type")
SHAPES = ("long", "wide")


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
        times = times_at(lookup, np.concatenate([start, end]), tc)
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
    events = gather(lookup, pos, [STREAM, ROW, TYPE, *lookup.columns])
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
        events = gather(lookup, pos, [STREAM, ROW, TYPE, *lookup.columns])
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


