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

A ψ that compares itself with the match (``compiler.correlation.trailing_absence_site``:
``!(B AS b FILTER b.user = a.user)`` without PARTITION BY user) cannot kill every waiting
match of its partition. Then the wrapper keeps, per partition, the events of its last
window (time or position at least the partition's newest minus W: every waiting match
started there, so its events and every event that may block it are among them) with the
columns ψ reads, and decides a match when its deadline passes — every event up to the
deadline has then been read: it is blocked iff an event strictly between φ's last event and
the reporting event (in its partition, so exactly those up to the deadline) satisfies ψ
with the match's bindings (``engine.post_filter.gap_hits``, the gap check of absence
between). ``bisect`` (ψ.a = expr of one match variable): an as-of join by (partition,
value) on the sorted positions, O(log n) per match; ``scan``: every ψ event of the
match's window is tested, O(ψ events in the window) per match, in bounded groups of pairs.

A frame is taken ``SLICE_ROWS`` events at a time (as consecutive frames): φ's matches ending
in a slice and the due ones are Python objects, so memory is the waiting matches, the events
of each partition's last window and one slice — never the whole frame.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

import numpy as np
import polars as pl

from cer_cli import signals
from cer_cli.compiler.predicates import AttrTest, StreamTest, TypeTest, atom_expression, strip_var
from cer_cli.engine.executor import prepare_frame, window_bound, window_low
from cer_cli.engine.post_filter import MATCH_ID as _MATCH
from cer_cli.engine.post_filter import gap_hits
from cer_cli.engine.strategies import dedupe, project
from cer_cli.events import KEY, POS, STREAM, TIME, TYPE, Match, MatchBatch, as_matches, batch_of
from cer_cli.options import option
from cer_cli.query import ast
from cer_cli.query.errors import QueryError
from cer_cli.query.scope import attr_refs

_KEY = "__cer_absence_key"
_WTIME = "__cer_absence_time"
_PSI = "__cer_absence_psi"
_TAU = "__cer_absence_tau"
#: Events handled at once: φ's matches ending in them, and the due ones, are Python objects.
SLICE_ROWS = 8192


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


def _check_time_attribute(frame: pl.DataFrame, w: ast.AttributeWindow) -> None:
    """``WITHIN n [attr]`` gives every match a deadline only when ``attr`` is the log's time
    column (``query.checks.check_trailing``, which needs the schema): the events tell it
    when no schema did, since the attribute is then every event's time."""
    off = frame.filter((pl.col(_WTIME) == pl.col(TIME)).fill_null(False).not_())
    if off.height:
        raise QueryError(
            f"a trailing absence with an attribute window needs the log's time column, and"
            f" '{w.attr}' is not it (WITHIN {w.amount} [{w.attr}]; the event at position"
            f" {off[POS][0]} has {w.attr} = {off[_WTIME][0]}, time {off[TIME][0]}): an"
            f" event without '{w.attr}' would have no deadline", w.span,
            hints=[f"make it the time column: {option('time-column', w.attr)}, or use a"
                   " duration or"
                   " WITHIN n EVENTS"])


def trailing_method(site) -> tuple[str, str]:
    """How a trailing ψ compared with the match (``AbsenceSite``) is checked, and its cost:
    what ``describe`` and the plan's per-predicate methods say."""
    if site.method == "bisect":
        return (f"bisect on {site.etype.label}.{site.key[0].attr}",
                "per match O(log n): the first ψ event after φ's last event with the match's"
                " value, by an as-of join on ψ's events sorted by (partition, value, position);"
                " n: the events kept, each partition's last window")
    return ("scan of the window",
            "per match, every ψ event between φ's last event and the deadline is tested:"
            " O(ψ events in the window); memory: each partition's last window of events")


class TrailingAbsence:
    """The executor of ``φ ; !ψ``: ``inner`` evaluates φ (any ``Executor``), this one holds
    its matches until their deadline passes (see the module docstring)."""

    def __init__(self, inner, psi: ast.Formula, window: ast.Window,
                 partition_by: tuple[tuple[str, ...], ...] = (), streams=None,
                 open_ends: bool = False, site=None,
                 select: frozenset[str] | None = None) -> None:
        self.inner = inner
        #: ``AbsenceSite`` when ψ compares with the match (its ``unary`` part then only
        #: narrows the events kept), and the real SELECT (the CEA also marks ψ's variables)
        self.site = site
        self.select = select
        self._rows: pl.DataFrame | None = None  # correlated: each partition's last window
        self.psi = psi
        self.window = window
        self.partition_by = partition_by
        self.streams = streams
        self.open_ends = open_ends
        self._events = isinstance(window, ast.EventsWindow)
        self._bound = window_bound(window)
        self._last_time = None  # the last timed event (executor.Earlier)
        self._key_ids: dict[tuple, int] = {}
        self._count: dict[int, int] = {}  # events seen per partition (EVENTS positions)
        self._waiting: dict[int, list] = {}  # partition -> heap of (deadline, seq, Match)
        self._seq = 0
        self._end = 0  # one past the last position read
        self._tpos = self._times = None  # window times of recent positions (durations)
        self._lpos = self._locals = self._lpart = None  # partition-local indices (EVENTS)

    def describe(self) -> str:
        if self.site is not None:
            site = self.site
            how, cost = trailing_method(site)
            return "\n".join([
                self.inner.describe(),
                "trailing absence compared with the match (ψ reads"
                f" {', '.join(sorted(site.match_vars))}): each match of φ waits until its"
                " deadline τ(first event) + W passes, then is reported at the first event of"
                " its partition past it unless an event between φ's last event and that one"
                f" satisfies ψ with the match's bindings ({how}: {cost}); memory: the waiting"
                " matches and each partition's events of its last window",
            ])
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
        """The frame in slices of ``SLICE_ROWS`` events (consecutive frames give the same
        matches as their concatenation): the candidates and due matches held at once are
        then those of a slice plus the open windows, not of the whole frame."""
        for first in range(0, max(frame.height, 1), SLICE_ROWS):
            signals.check()
            yield from self._run_slice(frame.slice(first, SLICE_ROWS))

    def _run_slice(self, frame: pl.DataFrame) -> Iterator[MatchBatch]:
        if frame.height:
            self._end = max(self._end, int(frame[POS].max()) + 1)
        prepared, self._last_time = prepare_frame(frame, self.streams, self.partition_by,
                                                  self.window, self._last_time, _KEY, _WTIME)
        if isinstance(self.window, ast.AttributeWindow):
            _check_time_attribute(prepared, self.window)
        if not self._events and prepared.height:
            self._remember_times(prepared)
        if self._events and prepared.height:
            self._remember_locals(prepared)
        candidates: dict[int, list[tuple[float, Match]]] = {}
        for batch in self.inner.run_batches(frame):
            if self._events and batch.start_local is not None:
                starts = np.asarray(batch.start_local, dtype=np.int64)
            elif self._events:  # an executor without partition-local indices (hash join)
                starts = self._locals[np.searchsorted(self._lpos, np.asarray(batch.start, np.int64))]
            else:
                starts = self._times[np.searchsorted(self._tpos, np.asarray(batch.start, np.int64))]
            for m, s in zip(batch.matches(), starts.tolist(), strict=True):
                candidates.setdefault(m.end, []).append((s + self._bound, m))
        out = self._advance(prepared, candidates)
        if self.site is not None:
            out = self._decide(out)
            self._prune()
        if out:
            yield self._reported(out)

    def _reported(self, matches: list[Match]) -> MatchBatch:
        """The due matches as reported: without the variables only a correlated ψ reads,
        once each (φ's matches with one start and one map that ended at different events
        became one match at the reporting event)."""
        batch = batch_of(matches)
        if self.site is not None and self.select is not None:
            batch = project(batch, self.select)
        return dedupe(batch)

    def _remember_locals(self, prepared: pl.DataFrame) -> None:
        """For ``WITHIN n EVENTS`` over an inner executor whose batches lack ``start_local``:
        each recent position's index in its partition's stream, kept while a match may start
        there: this slice's, and the last W + 1 of each partition before it."""
        part = np.asarray(self._partition_ids(prepared), dtype=np.int64)
        base = np.array([self._count.get(int(k), 0) for k in range(int(part.max()) + 1)],
                        dtype=np.int64)
        order = np.argsort(part, kind="stable")
        sorted_part = part[order]
        first = np.searchsorted(sorted_part, sorted_part, side="left")
        local = np.empty(len(part), dtype=np.int64)
        local[order] = np.arange(len(part)) - first + base[sorted_part]
        pos = prepared[POS].cast(pl.Int64).to_numpy()
        if self._lpos is not None:  # earlier events: only the last window of each partition
            old = self._lpart
            newest = np.full(int(old.max()) + 1, -1, dtype=np.int64)
            np.maximum.at(newest, old, self._locals)
            keep = self._locals >= newest[old] - int(self._bound)
            pos = np.concatenate([self._lpos[keep], pos])
            local = np.concatenate([self._locals[keep], local])
            part = np.concatenate([old[keep], part])
        self._lpos, self._locals, self._lpart = pos, local, part

    def _remember_times(self, prepared: pl.DataFrame) -> None:
        """Window times by position, for the deadlines of φ's matches: kept while a match
        may still start there (time at least the frame's first time minus W)."""
        pos = prepared[POS].cast(pl.Int64).to_numpy()
        times = prepared[_WTIME].to_numpy()
        if self._tpos is not None:
            # this frame's matches end at its first time or later: they start at most W before
            keep = self._times >= window_low(times[0], self._bound)
            pos, times = np.concatenate([self._tpos[keep], pos]), np.concatenate([self._times[keep], times])
        self._tpos, self._times = pos, times

    def finish(self) -> Iterator[MatchBatch]:
        """The matches still waiting at the end of the log (``open_ends`` only), ``end`` one
        past the last position read; then nothing waits any more."""
        waiting = [(key, m) for key, heap in self._waiting.items() for _, _, m in heap]
        self._waiting.clear()
        if self.open_ends and waiting:
            # a correlated ψ already seen still blocks: the window is open after it
            ended = [(key, m, self._end) for key, m in waiting]
            done = self._decide(ended) if self.site is not None else [m for _, m, _ in ended]
            if done:
                opened = self._reported([Match(m.start, self._end, m.events, m.partition)
                                         for m in done]).matches()
                yield batch_of(sorted(opened, key=lambda m: repr((m.start, m.events, m.partition))))
        self._rows = None

    def _advance(self, frame: pl.DataFrame, candidates) -> list:
        """Walk the prepared frame's events in order (see the module docstring);
        ``candidates``: φ's matches with their deadline, by their last event. Returns the
        reported matches, or with a correlated ψ the due ones as (partition, match of φ,
        reporting position) for ``_decide``."""
        corr = self.site is not None
        if not frame.height or (not corr and not candidates and not any(self._waiting.values())):
            if frame.height and self._events:
                self._count_only(frame)
            return []
        pos = frame[POS].to_list()
        psi = (frame.select(psi_expression(self.psi, frame.schema)).to_series().to_list()
               if not corr else None)
        part = self._partition_ids(frame)
        times = None if self._events else frame[_WTIME].to_list()
        taus: list = []
        out: list = []
        waiting, count = self._waiting, self._count
        for n, p in enumerate(pos):
            key = part[n]
            if self._events:
                t = count.get(key, 0)
                count[key] = t + 1
            else:
                t = times[n]
            taus.append(t)
            heap = waiting.get(key)
            if heap:
                while heap and heap[0][0] < t:
                    m = heapq.heappop(heap)[2]
                    out.append((key, m, p) if corr else Match(m.start, p, m.events, m.partition))
                if not corr and psi[n]:
                    heap.clear()
            for deadline, m in candidates.get(p, ()):
                self._seq += 1
                heapq.heappush(waiting.setdefault(key, []), (deadline, self._seq, m))
        if corr:
            self._keep(frame, part, taus)
        return out

    def _keep(self, frame: pl.DataFrame, part: list[int], taus: list) -> None:
        """Append the frame's events (position, partition, τ and the columns ψ reads)."""
        site = self.site
        names = {TYPE, STREAM} | {r.attr for p in (site.unary, site.correlated) if p is not None
                                  for r in attr_refs(p)}
        new = frame.select(pl.col(POS).cast(pl.Int64), *sorted(names & set(frame.columns)))
        new = new.with_columns(pl.Series(KEY, part, dtype=pl.Int64), pl.Series(_TAU, taus))
        self._rows = new if self._rows is None else pl.concat([self._rows, new],
                                                              how="diagonal_relaxed")

    def _prune(self) -> None:
        """Drop the events older than their partition's last window: every waiting match
        (deadline not passed, so it started in that window) and every later one starts
        there, and only events after a match's start can be bound in it or block it."""
        if self._rows is not None and self._rows.height:
            slack = self._bound + (1 if self._events else 0)
            self._rows = self._rows.filter(pl.col(_TAU) >= pl.col(_TAU).max().over(KEY) - slack)

    def _decide(self, due: list) -> list[Match]:
        """The due matches ``(partition, match of φ, reporting position)`` that no event
        between φ's last event and the reporting one blocks (ψ with their bindings), ended
        at the reporting position."""
        if not due:
            return []
        site, rows = self.site, self._rows
        cands = pl.DataFrame({_MATCH: np.arange(len(due), dtype=np.int64),
                              "__l": [m.end for _, m, _ in due],
                              "__r": [r for _, _, r in due],
                              "__part": [k for k, _, _ in due]},
                             schema={_MATCH: pl.Int64, "__l": pl.Int64, "__r": pl.Int64,
                                     "__part": pl.Int64})
        for v in sorted(site.match_vars):
            at = [next((p for p, labels in m.events if v in labels), None) for _, m, _ in due]
            attrs = sorted({r.attr for r in attr_refs(site.correlated) if r.var == v}
                           & set(rows.columns))
            table = rows.select(POS, *(pl.col(c).alias(f"{v}.{c}") for c in attrs))
            cands = (cands.with_columns(pl.Series("__at", at, dtype=pl.Int64))
                     .join(table, left_on="__at", right_on=POS, how="left").drop("__at"))
        blocked = set(gap_hits(site, cands.sort(_MATCH), rows).tolist())
        return [Match(m.start, r, m.events, m.partition)
                for i, (_, m, r) in enumerate(due) if i not in blocked]

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
