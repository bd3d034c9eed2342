"""Trailing absence ``φ ; !ψ WITHIN W`` (docs/language.md, "Absence"): φ's executor, then a
deadline per candidate.

The automaton cannot report such a match when φ completes: whether a ψ follows is known only
once the window has closed. So φ runs on its own executor (with the query's window, strategy
and LIMIT), and each of its matches ``[i, k]`` waits in its partition with the deadline
``τ(i) + W`` (τ: the event time, or the position in the partition's stream for ``WITHIN n
EVENTS``). Per event of the partition: the waiting matches whose deadline it passes are
reported with this event as their end; then, if the event satisfies ψ, every match still
waiting in its partition dies (each began before it, and its deadline is not past). Work per
event is O(1) amortised plus O(log c) per reported match (c: matches waiting in the
partition, a heap by deadline), and memory is the waiting matches — those whose window is
still open.

At the end of the log the waiting matches are unknown: dropped, or with ``open_ends``
reported by ``finish`` with ``end`` one past the log's last position (no event, so no time).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

import numpy as np
import polars as pl

from cer_cli.compiler.predicates import AttrTest, StreamTest, TypeTest, atom_expression, strip_var
from cer_cli.engine.executor import prepare_frame, window_bound
from cer_cli.events import POS, Match, MatchBatch, as_matches, batch_of
from cer_cli.query import ast

_KEY = "__cer_absence_key"
_WTIME = "__cer_absence_time"
_PSI = "__cer_absence_psi"


def psi_expression(psi: ast.Formula, schema) -> pl.Expr:
    """Whether an event satisfies ψ (an event type under AS and FILTERs on its own
    variables, as ``check_absence`` requires): never null."""
    tests, atom = [], psi
    while isinstance(atom, (ast.As, ast.Filter)):
        if isinstance(atom, ast.Filter):
            p = atom.predicate
            tests.append(pl.lit(p.value) if isinstance(p, ast.BoolConst)
                         else atom_expression(AttrTest(strip_var(p)), schema))
        atom = atom.formula
    expr = atom_expression(TypeTest(atom.name), schema)
    if atom.stream is not None:
        expr = expr & atom_expression(StreamTest(atom.stream), schema)
    for t in tests:
        expr = expr & t
    return expr


class TrailingAbsence:
    """The executor of ``φ ; !ψ``: ``inner`` evaluates φ (any ``Executor``), this one holds
    its matches until their deadline passes (see the module docstring)."""

    def __init__(self, inner, psi: ast.Formula, window: ast.Window,
                 partition_by: tuple[tuple[str, ...], ...] = (), streams=None,
                 open_ends: bool = False) -> None:
        self.inner = inner
        self.psi = psi
        self.window = window
        self.partition_by = partition_by
        self.streams = streams
        self.open_ends = open_ends
        self._events = isinstance(window, ast.EventsWindow)
        self._bound = window_bound(window)
        self._last_time = float("-inf")
        self._key_ids: dict[tuple, int] = {}
        self._count: dict[int, int] = {}  # events seen per partition (EVENTS positions)
        self._waiting: dict[int, list] = {}  # partition -> heap of (deadline, seq, Match)
        self._seq = 0
        self._end = 0  # one past the last position read
        self._tpos = self._times = None  # window times of recent positions (durations)

    def describe(self) -> str:
        return "\n".join([
            self.inner.describe(),
            "trailing absence: each match of φ waits until its window closes (deadline"
            " τ(first event) + W), then is reported at the first event of its partition past"
            " the deadline unless a ψ event of that partition came after φ's last event;"
            " O(1) amortised per event plus O(log waiting) per match, memory: the matches"
            " whose window is open",
        ])

    @property
    def stats(self):
        return self.inner.stats

    def run(self, frame: pl.DataFrame) -> Iterator[Match]:
        yield from as_matches(self.run_batches(frame))

    def count(self, frame: pl.DataFrame) -> int:
        return sum(len(b) for b in self.run_batches(frame))

    def run_batches(self, frame: pl.DataFrame, size: int = 10_000) -> Iterator[MatchBatch]:
        if frame.height:
            self._end = max(self._end, int(frame[POS].max()) + 1)
        prepared, self._last_time = prepare_frame(frame, self.streams, self.partition_by,
                                                  self.window, self._last_time, _KEY, _WTIME)
        if not self._events and prepared.height:
            self._remember_times(prepared)
        candidates: dict[int, list[tuple[float, Match]]] = {}
        for batch in self.inner.run_batches(frame):
            if self._events:
                starts = np.asarray(batch.start_local, dtype=np.int64)
            else:
                starts = self._times[np.searchsorted(self._tpos, np.asarray(batch.start, np.int64))]
            for m, s in zip(batch.matches(), starts.tolist(), strict=True):
                candidates.setdefault(m.end, []).append((s + self._bound, m))
        out = self._advance(prepared, candidates)
        if out:
            yield batch_of(out)

    def _remember_times(self, prepared: pl.DataFrame) -> None:
        """Window times by position, for the deadlines of φ's matches: kept while a match
        may still start there (time at least the newest time minus W)."""
        pos = prepared[POS].cast(pl.Int64).to_numpy()
        times = prepared[_WTIME].to_numpy()
        if self._tpos is not None:
            keep = self._times >= times[-1] - self._bound
            pos, times = np.concatenate([self._tpos[keep], pos]), np.concatenate([self._times[keep], times])
        self._tpos, self._times = pos, times

    def finish(self) -> Iterator[MatchBatch]:
        """The matches still waiting at the end of the log (``open_ends`` only), ``end`` one
        past the last position read; then nothing waits any more."""
        waiting = [m for heap in self._waiting.values() for _, _, m in heap]
        self._waiting.clear()
        if self.open_ends and waiting:
            once = {(m.start, m.events, m.partition): m for m in waiting}
            yield batch_of([Match(s, self._end, e, p) for s, e, p in sorted(once, key=repr)])

    def _advance(self, frame: pl.DataFrame, candidates) -> list[Match]:
        """Walk the prepared frame's events in order (see the module docstring);
        ``candidates``: φ's matches with their deadline, by their last event."""
        if not frame.height or (not candidates and not any(self._waiting.values())):
            if frame.height and self._events:
                self._count_only(frame)
            return []
        frame = frame.with_columns(psi_expression(self.psi, frame.schema).alias(_PSI))
        pos = frame[POS].to_list()
        psi = frame[_PSI].to_list()
        part = self._partition_ids(frame)
        times = None if self._events else frame[_WTIME].to_list()
        out: list[Match] = []
        waiting, count = self._waiting, self._count
        for n, p in enumerate(pos):
            key = part[n]
            if self._events:
                t = count.get(key, 0)
                count[key] = t + 1
            else:
                t = times[n]
            heap = waiting.get(key)
            if heap:
                if heap[0][0] < t:
                    # φ's matches with one start and one map (ending at different events)
                    # become one match [start, p]: reported once
                    seen = set()
                    while heap and heap[0][0] < t:
                        m = heapq.heappop(heap)[2]
                        if (m.start, m.events) not in seen:
                            seen.add((m.start, m.events))
                            out.append(Match(m.start, p, m.events, m.partition))
                if psi[n]:
                    heap.clear()
            for deadline, m in candidates.get(p, ()):
                self._seq += 1
                heapq.heappush(waiting.setdefault(key, []), (deadline, self._seq, m))
        return out

    def _count_only(self, frame: pl.DataFrame) -> None:
        part = self._partition_ids(frame)
        for key, c in zip(*np.unique(np.asarray(part, dtype=np.int64), return_counts=True), strict=True):
            self._count[int(key)] = self._count.get(int(key), 0) + int(c)

    def _partition_ids(self, frame: pl.DataFrame) -> list[int]:
        if not self.partition_by:
            return [0] * frame.height
        names = [f"{_KEY}{i}" for i in range(len(self.partition_by))]
        ids = self._key_ids
        return [ids.setdefault(k, len(ids)) for k in frame.select(names).rows()]
