"""What every executor shares: the ``Executor`` protocol, its statistics, and the
column-wise preparation of an event frame (FROM, PARTITION BY keys, the window time).
``engine/driver.py`` runs any executor over a log through this protocol.

``Engine`` (Algorithm 1 over a CEA, ``engine/run.py``) and ``HashJoinEngine`` (the PCEA hash
join, ``engine/pcea.py``) both implement ``Executor`` and both import this module, never
each other.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import polars as pl

from cer_cli.events import POS, ROW, STREAM, TIME, Match, MatchBatch
from cer_cli.io.texts import exact_text, inexact_in_python
from cer_cli.query import ast
from cer_cli.query.errors import QueryError
from cer_cli.query.printer import window_span


@dataclass(frozen=True)
class EngineStats:
    events: int
    matches: int
    partitions: int
    live_nodes: int
    allocated_nodes: int
    compactions: int
    peak_live_nodes: int
    det_states: int
    det_transitions: int
    det_cache_hits: int
    det_cache_resets: int


@runtime_checkable
class Executor(Protocol):
    """A query's evaluator over consecutive event frames: its state persists between calls,
    so feeding frames one by one gives the same matches as feeding their concatenation."""

    def run_batches(self, frame: pl.DataFrame, size: int = 10_000) -> Iterator[MatchBatch]:
        """The matches of ``frame``'s events, in columns, in order of their triggering event."""
        ...

    def run(self, frame: pl.DataFrame) -> Iterator[Match]:
        """The same matches as ``run_batches``, one ``Match`` each."""
        ...

    def count(self, frame: pl.DataFrame) -> int:
        """How many matches ``run(frame)`` would yield."""
        ...

    def finish(self) -> Iterator[MatchBatch]:
        """What the executor still reports once the log has ended (a trailing absence's
        open matches, when asked for); nothing for an executor without open matches. The
        pass is over afterwards."""
        ...

    @property
    def stats(self) -> EngineStats: ...

    def describe(self) -> str:
        """How this executor evaluates, and what it costs (printed by ``cer explain``)."""
        ...


def partition_columns(partition_by, columns) -> list[list[str]]:
    """Per PARTITION BY group, its attributes that the events have: an event's key in the
    group is the first of them it has (coalesce; null and NaN are none), and an event without
    a key in some group is in no partition. Both the executors and Spark's fan-out key events by this."""
    return [[a for a in group if a in columns] for group in partition_by]


def window_source(w: ast.Window, columns, timed: bool) -> tuple[str, float]:
    """The column a time or attribute window measures, and its bound: TIME and the
    duration in ns (``timed``: the log has a time column), or the attribute and the amount
    (the log has it). Both the executors and Spark's range split read a window by this."""
    if isinstance(w, ast.DurationWindow):
        if not timed:
            raise QueryError("WITHIN with a duration needs a time column in the log", w.span)
        return TIME, w.nanoseconds
    assert isinstance(w, ast.AttributeWindow)
    if w.attr not in columns:
        raise QueryError(f"WITHIN {w.amount} [{w.attr}]: no attribute {w.attr!r} in the log", w.span)
    return w.attr, w.amount


@dataclass(frozen=True)
class Earlier:
    """The last event with a window time in the frames before (``prepare_frame``): its
    window time, and what an error about a later, smaller one names of it."""

    time: object
    shown: object
    stream: str
    row: int

    def __str__(self) -> str:
        return f"{self.shown} of stream {self.stream!r}, data row {self.row}"


def prepare_frame(
    frame: pl.DataFrame, streams, partition_by, window: ast.Window | None,
    earlier: Earlier | None, key: str, wtime: str,
) -> tuple[pl.DataFrame, Earlier | None]:
    """The column-wise work every executor does first: FROM, one column ``key{i}`` per
    PARTITION BY group (events without a key are dropped), and the window time ``wtime``
    checked (``refused_time``): finite, ordered (also after ``earlier``, the last timed
    event of the frames before), and exact under a decimal bound.

    A datetime window attribute becomes int64 nanoseconds (the bound is then in ns); any
    other non-numeric one is a ``QueryError`` naming it. A NaN time is no time: such an
    event can neither start nor end a windowed match. Returns the frame and the new
    ``earlier``."""
    if streams is not None:
        frame = frame.filter(pl.col(STREAM).is_in(list(streams)))
    if partition_by:
        exprs = []
        schema = frame.schema
        for i, present in enumerate(partition_columns(partition_by, frame.columns)):
            # NaN is no value (as in predicates): such a key is missing, the next one of
            # the group is tried
            cols = [pl.col(c).fill_nan(None) if schema[c].is_float() else pl.col(c)
                    for c in present]
            exprs.append((pl.coalesce(cols) if cols else pl.lit(None)).alias(f"{key}{i}"))
        names = [f"{key}{i}" for i in range(len(exprs))]
        frame = frame.with_columns(exprs).drop_nulls(names)
        # a key of nanosecond or zoned datetimes as its exact text: the engines number keys
        # as Python values, which held keys 10 ns apart, or an hour apart across a DST
        # change, as one (``io.texts``)
        frame = frame.with_columns(exact_text(pl.col(c), frame.schema[c]).alias(c)
                                   for c in names if inexact_in_python(frame.schema[c]))
    w = window
    if isinstance(w, ast.DurationWindow | ast.AttributeWindow):
        source, _ = window_source(w, frame.columns,
                                  timed=not (frame.height and frame[TIME].null_count()))
        frame = frame.with_columns((pl.col(TIME) if source == TIME else
                                    _window_time(frame[source].dtype, w)).alias(wtime))
    if isinstance(w, ast.DurationWindow | ast.AttributeWindow):
        if frame[wtime].dtype.is_float():
            frame = frame.with_columns(pl.col(wtime).fill_nan(None))
        times = frame[wtime].drop_nulls()
        if times.len():
            # not diff(): it wraps past int64 (2^62 after -2^63 read as a step back)
            if (times.dtype.is_float() and times.is_infinite().any()) \
                    or (times < times.shift(1)).any() \
                    or (earlier is not None and times[0] < earlier.time) \
                    or (_decimal_over_integers(w, times.dtype)
                        and max(abs(int(times[0])), abs(int(times[-1]))) > _FLOAT_EXACT):
                raise refused_time(frame, wtime, w, earlier)
            i = frame.height - 1 - int(frame[wtime].reverse().is_not_null().arg_true()[0])
            shown = frame[w.attr if isinstance(w, ast.AttributeWindow) else TIME][i]
            earlier = Earlier(times[-1], shown, frame[STREAM][i], frame[ROW][i])
    return frame, earlier


def _decimal_over_integers(w: ast.Window, dtype: pl.DataType) -> bool:
    """A decimal attribute bound over integer times: ``time - 2.5`` is float arithmetic."""
    return isinstance(w, ast.AttributeWindow) and isinstance(w.amount, float) \
        and dtype.is_integer()


def refused_time(frame: pl.DataFrame, wtime: str, w: ast.Window,
                 earlier: Earlier | None) -> QueryError:
    """The error for the first event of ``frame`` (in stream order) whose window time is
    refused: infinite, below an earlier event's, or beyond 2^53 under a decimal bound. The
    first whatever its fault (on one event: in that order), so that the error does not
    depend on where the log was cut into frames or tasks: local mode, ``--jobs`` and Spark
    (``spark.tasks.first_refused_time``) name the same event. Its ``position`` is the
    event's, for Spark to pick the first of its tasks' errors."""
    t = frame[wtime]
    found = []  # (index, fault order, error maker)
    if t.dtype.is_float():
        inf = t.is_infinite().fill_null(False)
        if inf.any():
            found.append((int(inf.arg_true()[0]), 0, _infinite_time))
    before = t.forward_fill().shift(1)
    if earlier is not None:
        before = before.fill_null(earlier.time)
    below = ((t < before) & t.is_not_null()).fill_null(False)
    if below.any():
        found.append((int(below.arg_true()[0]), 1, _unordered))
    if _decimal_over_integers(w, t.dtype):
        # not t.abs(): it wraps the least int64 to itself, and no row was found (exit 1)
        beyond = ((t > _FLOAT_EXACT) | (t < -_FLOAT_EXACT)).fill_null(False)
        if beyond.any():
            found.append((int(beyond.arg_true()[0]), 2, _inexact_bound))
    i, _, error = min(found, key=lambda f: f[:2])
    e = error(frame, wtime, w, i, earlier)
    if POS in frame.columns:
        e.position = int(frame[POS][i])
    return e


def _infinite_time(frame: pl.DataFrame, wtime: str, w: ast.Window, i: int,
                   earlier: Earlier | None) -> QueryError:
    """The error for an infinite window time (row ``i``): its distance to another event's
    is infinite or undefined (-inf - -inf), and the engines decided it differently (the
    automaton found no match where the hash join found one)."""
    name = w.attr if isinstance(w, ast.AttributeWindow) else "time"
    return QueryError(
        f"WITHIN {window_span(w)}: stream {frame[STREAM][i]!r}, data row {frame[ROW][i]}"
        f" (0-based) has {name} {frame[wtime][i]}: an infinite window time has no distance"
        " to the others", w.span,
        hints=[f"write a finite {name}, or leave it empty (an event without a window time"
               " may sit inside a match but neither start nor end one)"])


#: the least int64: a window's lower edge below it is held as it (nothing is earlier)
INT64_MIN = -(1 << 63)


def window_low(time, bound):
    """``time - bound``, the earliest window time of a match ending at ``time``, computed
    without wrapping: in int64, -2^63 + 1 minus 3 wrapped around to a huge time, which
    dropped every run (no match, exit 0). Below the least int64 it is the least int64."""
    if isinstance(time, int | np.integer):
        return max(int(time) - bound, INT64_MIN)
    return time - bound


#: integers float64 holds exactly (a window's ``time - bound`` with a float bound is float)
_FLOAT_EXACT = 1 << 53


def _inexact_bound(frame: pl.DataFrame, wtime: str, w: ast.AttributeWindow, i: int,
                   earlier: Earlier | None) -> QueryError:
    """The error for a float bound over integer times that float64 rounds (row ``i``):
    ``time - 2.5`` is computed in floats, so whether an event is in the window would be
    decided on rounded times. Over integers the floor of the bound is the same window."""
    floor = int(w.amount // 1)
    return QueryError(
        f"WITHIN {w.amount} [{w.attr}]: a decimal bound over the integer {w.attr} of"
        f" stream {frame[STREAM][i]!r}, data row {frame[ROW][i]} (0-based), {frame[w.attr][i]},"
        " beyond 2^53, where float arithmetic rounds integers", w.span,
        hints=[f"write WITHIN {floor} [{w.attr}]: over integers it is the same window"])


def _unordered(frame: pl.DataFrame, wtime: str, w: ast.Window, i: int,
               earlier: Earlier | None) -> QueryError:
    """The error for an event (row ``i``) whose window time is below the last earlier
    one's: which stream and data row, and the two values with the earlier event's place
    (from ``earlier`` when it is in a frame before)."""
    t = frame[wtime]
    name = w.attr if isinstance(w, ast.AttributeWindow) else "time"
    shown = frame[w.attr] if isinstance(w, ast.AttributeWindow) else frame[TIME]
    where = f"stream {frame[STREAM][i]!r}, data row {frame[ROW][i]} (0-based)"
    prior = t.head(i).is_not_null()
    if prior.any():
        j = i - 1 - int(prior.reverse().arg_true()[0])
        earlier = Earlier(t[j], shown[j], frame[STREAM][j], frame[ROW][j])
    return QueryError(
        f"WITHIN {_window_source(w)} needs events ordered by {name}, but the log is not: {where}"
        f" has {name} {shown[i]}, below {earlier}",
        w.span,
        hints=[f"sort the log by {name}" + ("" if isinstance(w, ast.DurationWindow) else
                                          ", or use a window on an ordered column")],
    )


def _window_source(w: ast.Window) -> str:
    if isinstance(w, ast.AttributeWindow):
        return f"{w.amount} [{w.attr}]"
    return "a duration"


def _window_time(dtype: pl.DataType, w: ast.AttributeWindow) -> pl.Expr:
    """The window attribute as a number: itself, datetimes as int64 ns, a column with no
    value at all (null dtype) as int64 nulls."""
    col = pl.col(w.attr)
    if dtype.is_numeric():
        return col
    if dtype == pl.Null:
        return col.cast(pl.Int64)
    if dtype == pl.Date:
        return col.cast(pl.Datetime("ns")).dt.epoch("ns")
    if isinstance(dtype, pl.Datetime):
        return col.dt.epoch("ns")
    raise QueryError(
        f"WITHIN {w.amount} [{w.attr}]: '{w.attr}' is {dtype} in the log,"
        " but the window attribute must be numeric (or a datetime)",
        w.span,
    )


def window_bound(w: ast.Window | None) -> float | None:
    """The window's bound in its own unit (events, nanoseconds, attribute units)."""
    if isinstance(w, ast.EventsWindow):
        return w.count
    if isinstance(w, ast.DurationWindow):
        return w.nanoseconds
    if isinstance(w, ast.AttributeWindow):
        return w.amount
    return None


def window_text(w: ast.Window | None, kept: str) -> str:
    """The window as ``describe`` prints it; ``kept`` names what lives until it closes."""
    if w is None:
        return f"no window: {kept} are kept for the whole log"
    where = " (positions in the partition's stream)" if isinstance(w, ast.EventsWindow) else ""
    return f"window {window_span(w)}{where}"
