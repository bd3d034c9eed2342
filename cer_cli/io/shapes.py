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
from cer_cli.io.output import (
    EVENT_COLUMNS,
    LONG_COLUMNS,
    MATCH_COLUMNS,
    SHAPES,
    OutputSpec,
)

__all__ = ["EVENT_COLUMNS", "LONG_COLUMNS", "MATCH_COLUMNS", "SHAPES", "batch_variables",
           "empty_frame", "match_frame", "match_frames", "output_spec", "spec_frames"]

#: polars types of the columns that are not the log's (``OutputSpec.columns``), per source:
#: a match's (``of == "match"``) and an event's own. Kept apart from the log's columns by
#: ``of``: a log may have columns named ``match`` or ``vars`` (``log.match``), which keep
#: their own type (looked up by name, they were cast to the fixed column's: values lost).
_MATCH_DTYPES = {"match": pl.Int64, "start": pl.Int64, "end": pl.Int64, "partition": pl.String}
_EVENT_DTYPES = {POS: pl.Int64, STREAM: pl.String, ROW: pl.Int64, TYPE: pl.String}
_VARS_DTYPE = pl.List(pl.String)


def output_spec(
    lookup: EventLookup, shape: str = "long", variables: Sequence[tuple[str, bool]] | None = None,
    partition_names: Sequence[str] = (),
) -> OutputSpec:
    """The ``OutputSpec`` of matches over the log ``lookup`` follows."""
    spec = OutputSpec(shape, tuple(lookup.columns), tuple(lookup.time_columns), None,
                      tuple(partition_names))
    return spec if variables is None else spec.with_variables(variables)


def _schema(spec: OutputSpec, lookup: EventLookup) -> dict[str, pl.DataType]:
    """The polars type of each column of ``spec``: the event frame's for the log's columns
    (a list under ``many``), the time columns' common one for the match's times."""
    time = lookup.time_dtype() or pl.String
    out: dict[str, pl.DataType] = {}
    for c in spec.columns():
        if c.of == "match":
            d = time if c.source in ("start_time", "end_time") else _MATCH_DTYPES[c.source]
        elif c.of == "vars":
            d = _VARS_DTYPE
        else:
            d = _EVENT_DTYPES.get(c.source) or lookup.dtypes.get(c.source, pl.String)
        out[c.name] = pl.List(d) if c.many else d
    return out


def _match_frame(batch: MatchBatch, lookup: EventLookup, first: int, spec: OutputSpec
                 ) -> pl.DataFrame:
    """One row per match of ``batch``: ``MATCH_COLUMNS``. ``partition`` is the JSON text of
    the JSONL record's ``partition`` object (null without PARTITION BY), so that one column
    type holds any keys in CSV and Parquet alike."""
    import numpy as np

    start = np.asarray(batch.start, dtype=np.int64)
    end = np.asarray(batch.end, dtype=np.int64)
    times = times_at(lookup, np.concatenate([start, end]))
    part_text = {k: partition_json(batch.partitions.get(k), spec.partition_names)
                 for k in np.unique(np.asarray(batch.part, dtype=np.int64)).tolist()}
    parts = pl.Series(np.asarray(batch.part, dtype=np.int64)).replace_strict(
        part_text, return_dtype=pl.String
    ) if len(start) else pl.Series([], dtype=pl.String)
    return pl.DataFrame({
        "match": np.arange(first, first + len(start), dtype=np.int64),
        "start": start,
        "end": end,
        "start_time": times[: len(start)],
        "end_time": times[len(start):],
        "partition": parts,
    })


def _long_frame(batch: MatchBatch, lookup: EventLookup, first: int, spec: OutputSpec
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
    columns = spec.columns()
    schema = _schema(spec, lookup)
    events = gather(lookup, pos, [c.source for c in columns if c.of == "event"
                                  and c.source != POS]).with_columns(pl.Series(POS, pos))
    vars_ = pl.Series("vars", [list(v) for v in batch.labelsets], dtype=pl.List(pl.String))
    lab = np.asarray(batch.lab, dtype=np.int64)
    have = set(events.columns)  # once: ``events.columns`` is O(columns)
    per_event = []
    for c in columns:
        if c.of == "vars":
            per_event.append(vars_[lab] if len(lab) else pl.Series([], dtype=schema[c.name]))
        elif c.of == "event" and len(pos) and c.source in have:
            per_event.append(events[c.source])
        elif c.of == "event":
            per_event.append(pl.Series([None] * len(pos), dtype=schema[c.name]))
        else:
            continue
        per_event[-1] = per_event[-1].alias(c.name)
    rows = np.maximum(counts, 1)  # a match without events keeps one row
    out = pl.DataFrame(per_event)
    if len(rows) and (counts == 0).any():
        slot = np.full(int(rows.sum()), -1, dtype=np.int64)  # row -> its event, or none
        slot[np.repeat(counts > 0, rows)] = np.arange(len(pos), dtype=np.int64)
        none = np.flatnonzero(slot < 0)
        out = out.select(pl.all().gather(pl.Series(slot).scatter(none, None)))
    idx = np.repeat(np.arange(len(rows), dtype=np.int64), rows)  # row -> its match
    per_match = _match_frame(batch, lookup, first, spec)
    out = out.with_columns(per_match[c.source][idx].alias(c.name)
                           for c in columns if c.of == "match")
    return out.select(list(schema)).cast(schema, strict=False)  # type: ignore[arg-type]


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


def _wide_frame(batch: MatchBatch, lookup: EventLookup, first: int, spec: OutputSpec
                ) -> pl.DataFrame:
    """The wide rows of ``batch``: one per match, ``MATCH_COLUMNS`` then, per variable, its
    event's ``EVENT_COLUMNS`` and attributes (``x.position``, ``x.price`` ...); a variable
    that may bind several events (under ``+``) gets list columns, in stream order. A match
    that binds a variable to no event has nulls there."""
    import numpy as np

    pos = np.asarray(batch.pos, dtype=np.int64)
    counts = np.diff(np.asarray(batch.off, dtype=np.int64))
    out = _match_frame(batch, lookup, first, spec).with_row_index("__m")
    schema = _schema(spec, lookup)
    columns = [c for c in spec.columns() if c.variable is not None]
    if len(pos):
        lab = np.asarray(batch.lab, dtype=np.int64)
        vars_ = pl.Series([list(v) for v in batch.labelsets], dtype=pl.List(pl.String))
        events = pl.DataFrame([
            pl.Series("__m", np.repeat(np.arange(len(counts)), counts)).cast(pl.UInt32),
            pl.Series(POS, pos), vars_[lab].alias("__vars"),
        ])
        sources = list(dict.fromkeys(c.source for c in columns if c.source != POS))
        if sources:  # none when no selected variable has a column of the log
            events = pl.concat([gather(lookup, pos, sources), events], how="horizontal")
        events = events.explode("__vars")
    for var, many in spec.variables or ():
        if not len(pos):
            continue
        sub = events.filter(pl.col("__vars") == var).select(
            "__m", *(pl.col(c.source).alias(c.name) for c in columns if c.variable == var))
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


def spec_frames(
    matches: Iterable[Match] | Iterable[MatchBatch], lookup: EventLookup, spec: OutputSpec,
    buffer_rows: int = 50_000,
) -> Iterator[tuple[OutputSpec, pl.DataFrame]]:
    """The rows of ``matches`` as ``spec`` says, a frame per batch of at most
    ``buffer_rows`` matches and ``BATCH_EVENTS`` reported events (``as_batches``; the
    engine's own batches as they come), each with the spec it follows: a wide spec without
    variables takes those of the first batch (``batch_variables``)."""
    n = 0
    for batch in as_batches(matches, buffer_rows):
        if spec.shape == "long":
            frame = _long_frame(batch, lookup, n, spec)
        else:
            if spec.variables is None:
                spec = spec.with_variables(batch_variables(batch))
            frame = _wide_frame(batch, lookup, n, spec)
        n += len(batch)
        yield spec, frame


def match_frames(
    matches: Iterable[Match] | Iterable[MatchBatch], lookup: EventLookup, shape: str = "long",
    variables: Sequence[tuple[str, bool]] | None = None, partition_names: Sequence[str] = (),
    buffer_rows: int = 50_000,
) -> Iterator[pl.DataFrame]:
    """The rows of ``matches`` in ``shape`` (``spec_frames``), what the CSV and Parquet
    writers write. ``variables`` (name, many) are the wide shape's; ``None`` takes those of
    the first batch."""
    spec = output_spec(lookup, shape, variables, partition_names)
    for _, frame in spec_frames(matches, lookup, spec, buffer_rows):
        yield frame


def empty_frame(
    lookup: EventLookup, shape: str = "long", variables: Sequence[tuple[str, bool]] | None = None
) -> pl.DataFrame:
    """The frame of no match in ``shape``: its columns and types."""
    return pl.DataFrame(schema=_schema(output_spec(lookup, shape, variables or ()), lookup))


def match_frame(
    matches: Iterable[Match] | Iterable[MatchBatch], lookup: EventLookup, shape: str = "long",
    variables: Sequence[tuple[str, bool]] | None = None, partition_names: Sequence[str] = (),
) -> pl.DataFrame:
    """All of ``matches`` as one frame in ``shape``: what ``write_parquet`` writes."""
    frames = [f for f in match_frames(matches, lookup, shape, variables, partition_names) if f.height]
    return pl.concat(frames) if frames else empty_frame(lookup, shape, variables)
