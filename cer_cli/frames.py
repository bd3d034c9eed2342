"""The DataFrame API: run a query over frames and get the matches (or their counts) as a frame.

::

    import polars as pl
    import cer_cli

    df = pl.read_csv("samples/stocks.csv")
    cer_cli.match(df, "SELECT * WHERE SELL AS s ; BUY AS b WITHIN 10 EVENTS", shape="wide")
    cer_cli.count(df, "SELL ; BUY")
    cer_cli.count(df, "SELL AS s ; BUY AS b WITHIN 10 EVENTS", by="s.name")
    cer_cli.match(query=q, logs={"W": weather, "F": flights})    # W=w.csv F=f.parquet
    df.cer.match("SELL ; BUY")          # the same, once cer_cli.frames is imported

The frames are read by the same contract as log files (``io.read.read_frames``; a pandas
DataFrame or a pyarrow Table is converted to polars first) with the same options as
``cer match`` (a value for every log, or a dict of values by log name), and the result is
built by the writers' own code (``io.write.match_frame``), so ``match`` returns exactly what
``cer match -o out.parquet`` writes for the files the frames came from. Mistakes raise
``QueryError`` and ``LogError`` as the command line reports them, with the options named
as keywords (``time_format=...``, not ``--time-format``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from cer_cli.api import compile_query
from cer_cli.engine.driver import run_batches, run_count
from cer_cli.io.contract import LogError, api_options, named_logs
from cer_cli.io.counts import counts_frame, ordered
from cer_cli.io.read import EventLog, read_frames
from cer_cli.io.write import SHAPES, EventLookup, match_frame
from cer_cli.options import spelling
from cer_cli.plan import Plan, pool
from cer_cli.plan.count_by import count_by, count_keys
from cer_cli.query.scope import wide_variables

__all__ = ["count", "match"]

Frame = Any  # a polars DataFrame or LazyFrame, a pandas DataFrame, a pyarrow Table
#: A log option: one value for every log, or values by log name (``{"W": "ts"}``).
LogOption = str | Mapping[str, str] | None
OPEN_ABSENCE = ("drop", "report")


def as_polars(frame: Frame, name: str = "events") -> pl.DataFrame | pl.LazyFrame:
    """A polars frame of ``frame``: itself, or a pandas DataFrame (with its index as a
    column unless it is the default one, so a DatetimeIndex named ``ts`` is a time column)
    or a pyarrow Table / RecordBatch converted by polars. What polars cannot convert (a
    pandas column of mixed Python objects) is a ``LogError`` naming the log."""
    if isinstance(frame, pl.DataFrame | pl.LazyFrame):
        return frame
    pd, pa = sys.modules.get("pandas"), sys.modules.get("pyarrow")
    try:
        if pd is not None and isinstance(frame, pd.DataFrame):
            return pl.from_pandas(frame, include_index=True)
        if pa is not None and isinstance(frame, pa.Table | pa.RecordBatch):
            return pl.DataFrame(pl.from_arrow(frame))
    except (pl.exceptions.PolarsError, TypeError, ValueError, OverflowError,
            ImportError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise LogError(f"<{name}>: cannot convert the {type(frame).__name__} to polars:"
                       f" {first}", ["give the column one type (e.g. df[col].astype(str))"]
                       ) from None
    raise TypeError("expected a polars DataFrame or LazyFrame, a pandas DataFrame or a"
                    f" pyarrow Table, got {type(frame).__name__}")


def _logs(frame, logs, stream: str) -> dict[str, pl.DataFrame | pl.LazyFrame]:
    """The logs by stream name (``contract.named_logs``), as polars frames."""
    return {name: as_polars(f, name) for name, f in named_logs(frame, logs, stream).items()}


def _read(frame, logs, stream, type_column, time_column, time_unit, time_format) -> EventLog:
    types, times = api_options(type_column, time_column, time_unit, time_format)
    return read_frames(_logs(frame, logs, stream), types, times)


def _compile(query: str | Plan | None, log: EventLog) -> Plan:
    if query is None:
        raise TypeError("give the query: match(df, query) or match(query=..., logs=...)")
    return query if isinstance(query, Plan) else compile_query(query, schema=log.schema)


def _runner(compiled: Plan, jobs: int | None, log: EventLog, open_ends: bool):
    """Who runs the plan (``Fanout.runner``, as for ``cer match --jobs``): ``jobs`` threads
    of the local pool, or the single core."""
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"jobs must be a positive integer (or None: the cores), got {jobs!r}")
    return compiled.fanout.runner(jobs, log.n_events, open_ends)


def _open_ends(open_absence: str) -> bool:
    if open_absence not in OPEN_ABSENCE:
        raise ValueError(f"unknown open_absence {open_absence!r}; choices: drop, report")
    return open_absence == "report"


def match(
    frame: Frame | Mapping[str, Frame] | None = None,
    query: str | Plan | None = None,
    *,
    logs: Mapping[str, Frame] | None = None,
    type_column: LogOption = None,
    time_column: LogOption = None,
    time_unit: LogOption = None,
    time_format: LogOption = None,
    open_absence: str = "drop",
    shape: str = "long",
    stream: str = "events",
    jobs: int | None = None,
) -> pl.DataFrame:
    """The matches of ``query`` (CEQL text, or a compiled ``Plan``) over ``frame`` as one
    polars frame: the long shape (one row per match x event) or the wide shape (one row per
    match), the same frame ``cer match --shape SHAPE -o out.parquet`` writes.

    ``frame`` is one log named ``stream`` (``FROM`` and ``S>E`` refer to it; the CLI uses
    the file's stem); several logs are ``logs={"W": weather, "F": flights}``, what ``cer
    match q W=w.csv F=f.parquet`` reads. A log is a polars DataFrame or LazyFrame, a pandas
    DataFrame or a pyarrow Table. The options are ``cer match``'s: ``type_column``,
    ``time_column``, ``time_unit`` (``s|ms|us|ns``), ``time_format`` (strftime), each one
    value for every log or a dict by log name; ``open_absence="report"`` reports a
    trailing absence's matches whose window outlives the log; ``jobs`` as ``--jobs``: the
    threads of the local pool when the plan's fan-out splits the log (``None``: the
    cores; 1: the single core), the same matches in the same order.

    Raises ``LogError`` for a log the contract refuses (an unparsable time, a missing
    type column) and ``QueryError`` for a query mistake."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; shapes: {', '.join(SHAPES)}")
    with spelling("api"):  # messages name options as keywords
        open_ends = _open_ends(open_absence)
        log = _read(frame, logs, stream, type_column, time_column, time_unit, time_format)
        compiled = _compile(query, log)
        lookup = EventLookup.for_log(log)
        events = log.frame()
        lookup.add(events)
        names = [g[0] for g in compiled.query.partition_by]
        variables = wide_variables(compiled.query) if shape == "wide" else None
        runner = _runner(compiled, jobs, log, open_ends)
        batches = (pool.run_batches(compiled, events, runner.tasks) if runner.pool else
                   run_batches(compiled.executor(open_ends=open_ends), events))
        return match_frame(batches, lookup, shape, variables, names)


def count(
    frame: Frame | Mapping[str, Frame] | None = None,
    query: str | Plan | None = None,
    *,
    by: str | Sequence[str] | None = None,
    logs: Mapping[str, Frame] | None = None,
    type_column: LogOption = None,
    time_column: LogOption = None,
    time_unit: LogOption = None,
    time_format: LogOption = None,
    open_absence: str = "drop",
    stream: str = "events",
    jobs: int | None = None,
) -> int | pl.DataFrame:
    """The number of matches of ``query`` over ``frame`` (or ``logs``), counted without
    enumerating them where ``cer match --count`` does not: a Python int, exact however big.

    With ``by`` (a key, or a list of keys: a PARTITION BY key, a variable's column as the
    wide shape names it such as ``"a.carrier"``, or ``"stream"``), a polars frame with a
    row per value (a column per key, then ``matches``), most matches first: what ``cer
    match --count --by KEY`` prints. Partition keys are counted by the engine; the others
    enumerate the matches. Options as for ``match``; ``by`` counts on one core, as ``--count
    --by`` does."""
    with spelling("api"):
        open_ends = _open_ends(open_absence)
        log = _read(frame, logs, stream, type_column, time_column, time_unit, time_format)
        compiled = _compile(query, log)
        events = log.frame()
        runner = _runner(compiled, jobs, log, open_ends)
        if by is None:
            if runner.pool:
                return pool.run_count(compiled, events, runner.tasks)
            return run_count(compiled.executor(open_ends=open_ends), events)
        keys = count_keys(compiled, [by] if isinstance(by, str) else list(by), log.columns)
        counts = count_by(compiled, keys, events, EventLookup.for_log(log), open_ends=open_ends)
        return counts_frame(ordered(counts), keys, dict(events.schema))


@pl.api.register_dataframe_namespace("cer")
class CerFrame:
    """``df.cer.match(query, ...)`` and ``df.cer.count(query, ...)``: ``match``/``count``
    with the frame as the log."""

    def __init__(self, df: pl.DataFrame) -> None:
        self._df = df

    def match(self, query: str | Plan, **options) -> pl.DataFrame:
        return match(self._df, query, **options)

    def count(self, query: str | Plan, **options) -> int | pl.DataFrame:
        return count(self._df, query, **options)


@pl.api.register_lazyframe_namespace("cer")
class CerLazyFrame(CerFrame):
    """``lf.cer.match(query)``: the same on a LazyFrame (collected once, by the reader)."""
