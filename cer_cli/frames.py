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
from cer_cli.io.contract import TimeOptions
from cer_cli.io.read import EventLog, read_frame
from cer_cli.io.write import SHAPES, EventLookup, match_frame
from cer_cli.plan import Plan
from cer_cli.query import ast
from cer_cli.query.scope import children, type_labels

__all__ = ["count", "match", "wide_variables"]

Frame = pl.DataFrame | pl.LazyFrame
_MANY = 2  # "several events": multiplicities are capped here


def _events(f: ast.Formula) -> int:
    """How many events a match of ``f`` spans at most (capped at ``_MANY``)."""
    if isinstance(f, ast.EventType):
        return 1
    if isinstance(f, ast.FNot):
        return 0
    if isinstance(f, ast.Plus):
        return _MANY if _events(f.body) else 0
    if isinstance(f, ast.Seq):
        return min(_MANY, _events(f.left) + _events(f.right))
    return max((_events(k) for k in children(f)), default=0)  # OR, FILTER, AS


def _bindings(f: ast.Formula, out: dict[str, int], times: int = 1) -> None:
    """Add to ``out`` how many events each variable may bind in one match (capped):
    ``φ AS x`` binds x to every event of φ; under ``+`` everything repeats; ``OR`` takes the
    larger branch; ``;`` adds. A label counts only where its atom is not directly named."""

    def add(v: str, n: int) -> None:
        out[v] = min(_MANY, out.get(v, 0) + n)

    if isinstance(f, ast.EventType):
        for label in sorted(type_labels(f)):
            add(label, times)
        return
    if isinstance(f, ast.FNot):
        return
    if isinstance(f, ast.As):
        add(f.var, min(_MANY, times * _events(f.formula)))
        if not isinstance(f.formula, ast.EventType):  # ``T AS x``: x names it, T is noise
            _bindings(f.formula, out, times)
        return
    if isinstance(f, ast.Plus):
        _bindings(f.body, out, _MANY)
        return
    if isinstance(f, ast.FOr):
        left: dict[str, int] = {}
        right: dict[str, int] = {}
        _bindings(f.left, left, times)
        _bindings(f.right, right, times)
        for v in {**left, **right}:
            add(v, max(left.get(v, 0), right.get(v, 0)))
        return
    for k in children(f):
        _bindings(k, out, times)


def wide_variables(query: ast.Query) -> list[tuple[str, bool]]:
    """The wide shape's variables ``(name, many)``, in the order the query names them:
    the SELECT's when it lists some, else every variable a match may bind (AS variables,
    and event-type labels except where ``T AS x`` names the atom). ``many`` when one match may bind several events (under ``+``,
    ``(A ; B) AS x``, a label used twice): those become list columns."""
    found: dict[str, int] = {}
    _bindings(query.formula, found)
    names = list(found)
    if query.select is not None:
        names = [item.var for item in query.select if item.var in found]
    return [(v, found[v] > 1) for v in names]


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
    return match_frame(compiled.executor().run_batches(events), lookup, shape, variables, names)


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
    return _compile(query, log).executor().count(log.frame())


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

