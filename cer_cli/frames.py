"""The DataFrame API: run a query over a polars frame and get the matches as a frame.

::

    import polars as pl
    import cer_cli

    df = pl.read_csv("samples/stocks.csv")
    cer_cli.match(df, "SELECT * WHERE SELL AS s ; BUY AS b WITHIN 10 EVENTS", shape="wide")
    cer_cli.count(df, "SELL ; BUY")
    df.cer.match("SELL ; BUY")          # the same, once cer_cli.frames is imported

The frame is read by the same contract as a log file (``io.read.read_frame``) and the
result is built by the writers' own code (``io.write.match_frame``), so ``match`` returns
exactly what ``cer match -o out.parquet`` writes for the file the frame came from.
"""

from __future__ import annotations

import polars as pl

from cer_cli.api import compile_query
from cer_cli.engine.driver import run_batches, run_count
from cer_cli.io.contract import TimeOptions
from cer_cli.io.read import EventLog, read_frame
from cer_cli.io.write import SHAPES, EventLookup, match_frame
from cer_cli.plan import Plan
from cer_cli.query.scope import wide_variables

__all__ = ["count", "match"]

Frame = pl.DataFrame | pl.LazyFrame
def _read(frame: Frame, type_column, time_column, time_unit, stream: str) -> EventLog:
    if not isinstance(frame, pl.DataFrame | pl.LazyFrame):
        raise TypeError(f"expected a polars DataFrame or LazyFrame, got {type(frame).__name__}")
    time: str | TimeOptions | None = time_column
    if time_unit is not None:
        time = TimeOptions(column=(time_column,) if time_column else (), unit=(time_unit,))
    return read_frame(frame, stream, type_column, time)


def _compile(query: str | Plan, log: EventLog) -> Plan:
    return query if isinstance(query, Plan) else compile_query(query, schema=log.schema)


def match(
    frame: Frame,
    query: str | Plan,
    *,
    type_column: str | None = None,
    time_column: str | None = None,
    time_unit: str | None = None,
    shape: str = "long",
    stream: str = "events",
) -> pl.DataFrame:
    """The matches of ``query`` (CEQL text, or a compiled ``Plan``) over ``frame`` as one
    polars frame: the long shape (one row per match x event) or the wide shape (one row per
    match), the same frame ``cer match --shape SHAPE -o out.parquet`` writes. ``stream`` is
    the stream name (``FROM`` and ``S>E`` refer to it; the CLI uses the file's stem).

    Raises ``LogError`` for a frame the contract refuses (an unparsable time, a missing
    type column) and ``QueryError`` for a query mistake."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; shapes: {', '.join(SHAPES)}")
    log = _read(frame, type_column, time_column, time_unit, stream)
    compiled = _compile(query, log)
    lookup = EventLookup.for_log(log)
    events = log.frame()
    lookup.add(events)
    names = [g[0] for g in compiled.query.partition_by]
    variables = wide_variables(compiled.query) if shape == "wide" else None
    return match_frame(run_batches(compiled.executor(), events), lookup, shape, variables, names)


def count(
    frame: Frame,
    query: str | Plan,
    *,
    type_column: str | None = None,
    time_column: str | None = None,
    time_unit: str | None = None,
    stream: str = "events",
) -> int:
    """The number of matches of ``query`` over ``frame``, counted without enumerating them
    (what ``cer match --count`` prints)."""
    log = _read(frame, type_column, time_column, time_unit, stream)
    return run_count(_compile(query, log).executor(), log.frame())


@pl.api.register_dataframe_namespace("cer")
class CerFrame:
    """``df.cer.match(query, ...)`` and ``df.cer.count(query, ...)``: ``match``/``count``
    with the frame as the log."""

    def __init__(self, df: pl.DataFrame) -> None:
        self._df = df

    def match(self, query: str | Plan, **options) -> pl.DataFrame:
        return match(self._df, query, **options)

    def count(self, query: str | Plan, **options) -> int:
        return count(self._df, query, **options)


@pl.api.register_lazyframe_namespace("cer")
class CerLazyFrame(CerFrame):
    """``lf.cer.match(query)``: the same on a LazyFrame (collected once, by the reader)."""

