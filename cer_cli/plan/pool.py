"""The local pool: a plan's fan-out (``plan/fanout.py``) run on threads, ``cer match --jobs N``.

Threads, not processes: the kernel (numba, compiled ``nogil``) and polars release the GIL,
so the tasks run side by side over the frames the reader made once, without copying them
to other processes (README, "Performance", measures both). Three kinds of thread:

- the *feeder* reads the log's frames, checks over the whole stream what an executor checks
  first (``engine.executor.prepare_frame``: FROM, the PARTITION BY keys, the window time's
  order — slice by slice as the driver cuts, so an error reads as on one core) and deals
  each task its *piece* of the stream: the events of its keys (``partition``: a key's
  events all go to one task, which keeps one executor for the whole log), or a range of
  consecutive events with the window's *context* before it (``ranges``: a fresh executor
  per range, whose matches ending in the context are dropped; ranges are dealt in turn);
- each *task* runs its pieces through its own ``engine.driver.Driver`` and queues its
  matches, every slice followed by a *mark*: the position up to which it has been dealt
  every event, so each of its later matches ends after the mark;
- the caller's thread merges: it emits a task's matches once every other task has queued a
  match ending later or a mark at or past them. Matches thus come in order of end, and those
  ending at one event in the order of the one task that owns the event, as on one core.

Queues are bounded: memory is the frames read ahead plus, per task, a few slices and
batches of matches. Ctrl-C reaches the caller's thread (tasks meet ``signals.check`` in
their drivers too); every thread then stops at its next queue operation or slice.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from cer_cli.compiler.predicates import Alphabet
from cer_cli.engine.driver import COUNT_SLICE_ROWS, SLICE_ROWS, Driver, Progress
from cer_cli.engine.executor import prepare_frame, window_bound, window_low
from cer_cli.engine.kernel_state import OUT_CAP
from cer_cli.events import BATCH_EVENTS, POS, MatchBatch, join_batches
from cer_cli.plan.fanout import PARTITION, RANGES
from cer_cli.query import ast

if TYPE_CHECKING:
    from cer_cli.plan import Plan

_KEY = "__cer_pool_key"  # PARTITION BY groups, as prepare_frame computes them
_WTIME = "__cer_pool_time"  # the window time

#: Events per range of a ``ranges`` fan-out, at least: a range pays a fresh executor and
#: re-reads its context, so ranges are large against both.
RANGE_ROWS = 262_144
#: A range is at least this many times its context (the window's events before it).
CONTEXT_RATIO = 4
#: Keys are spread over the tasks by hash into this many buckets, each bucket given, when
#: first seen, to the task with the fewest events so far (ten keys still split evenly).
BUCKETS = 1024
#: Pieces a task may have waiting, and items (batches, marks) it may have queued.
INBOX = 2
OUTBOX = 8
#: Events per frame the feeder deals when given one whole frame (``_consecutive``): the
#: command line's batches are this size too.
FRAME_ROWS = 262_144
#: Matches the merge joins into one batch before it yields it (or ``events.BATCH_EVENTS``
#: events): the size of the single core's batches (the kernel's ``OUT_CAP``), so a writer's
#: cost per batch is paid per thousands of matches and its memory is one core's (JSONL
#: batches of 65,536 matches peaked at 2.2x the RSS of the single core's 16,384).
JOIN_MATCHES = OUT_CAP
#: Seconds a thread waits on a queue before looking whether the run was called off.
POLL = 0.05
#: Seconds the caller waits, in all, for the threads to go once the run is called off.
STOP_WAIT = 0.05


def run_batches(plan: Plan, frames: pl.DataFrame | Iterable[pl.DataFrame], jobs: int,
                progress: Progress | None = None,
                follow: Callable[[Iterable[pl.DataFrame], Iterator[MatchBatch]],
                                 Iterator[MatchBatch]] | None = None) -> Iterator[MatchBatch]:
    """Every match of the frames, in the single core's order (``engine.driver.run_batches``),
    found by ``jobs`` tasks as the plan's fan-out says. With ``follow`` (the writers' event
    lookup, ``EventLookup.follow``) the batches pass through ``follow(frames read, batches)``
    in the caller's thread: the lookup takes each frame the feeder read once a match reaches
    it (frames are read ahead of the matches)."""
    pool = _Pool(plan, jobs, count=False)
    return pool.merged(frames, progress, follow)


def run_count(plan: Plan, frames: pl.DataFrame | Iterable[pl.DataFrame], jobs: int,
              progress: Progress | None = None) -> int:
    """How many matches ``run_batches`` yields, each task counting its own."""
    pool = _Pool(plan, jobs, count=True)
    return pool.counted(frames, progress)


@dataclass
class _Piece:
    """What the feeder deals a task: ``own`` events, whose matches it reports, after
    ``context`` events (a fresh pass only), whose matches it drops; ``fresh`` starts a new
    executor; ``mark``: every event up to this position has been dealt."""

    own: pl.DataFrame | None
    mark: int
    context: pl.DataFrame | None = None
    fresh: bool = False


class _Cancelled(BaseException):
    """The run was called off (the caller stopped reading, or failed)."""


@dataclass
class _Failed:
    error: BaseException


_END = object()


class _Pool:
    def __init__(self, plan: Plan, jobs: int, count: bool) -> None:
        kind = plan.fanout.kind
        if kind not in (PARTITION, RANGES) or jobs < 2:
            raise ValueError(f"a local pool runs a partition or ranges fan-out on 2+ tasks,"
                             f" not {kind!r} on {jobs}")
        self.plan = plan
        self.jobs = jobs
        self.count = count
        self.slice_rows = COUNT_SLICE_ROWS if count else SLICE_ROWS
        self.cancel = threading.Event()
        self.frames: queue.SimpleQueue | None = None  # frames read, for ``follow``
        self.inboxes = [queue.Queue(INBOX) for _ in range(jobs)]
        # counting needs no order: one box for every task's counts
        shared = queue.Queue(OUTBOX * jobs) if count else None
        self.outboxes = [shared or queue.Queue(OUTBOX) for _ in range(jobs)]
        self.read = 0  # events the feeder has read
        self.threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ queues

    def put(self, box: queue.Queue, item) -> None:
        while True:
            try:
                box.put(item, timeout=POLL)
                return
            except queue.Full:
                if self.cancel.is_set():
                    raise _Cancelled from None

    def take(self, box: queue.Queue):
        while True:
            try:
                return box.get(timeout=POLL)
            except queue.Empty:
                if self.cancel.is_set():
                    raise _Cancelled from None

    def receive(self, i: int):
        """Task ``i``'s next item (counting: any task's), in the caller's thread. A task
        that ended without a last word would be a bug: it is reported, not waited for."""
        box = self.outboxes[i]
        while True:
            try:
                return box.get(timeout=POLL)
            except queue.Empty:
                tasks = self.threads[1:] if self.count else [self.threads[i + 1]]
                if not any(t.is_alive() for t in tasks) and box.empty():
                    raise RuntimeError("a task of the local pool ended without a word") from None

    # ------------------------------------------------------------------ threads

    def start(self, frames) -> None:
        feeder = _Feeder(self, _consecutive(frames))
        self.threads = [threading.Thread(target=feeder.run, name="cer-pool-feeder", daemon=True)]
        self.threads += [threading.Thread(target=_Task(self, i).run, name=f"cer-pool-task-{i}",
                                          daemon=True) for i in range(self.jobs)]
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        """Call every thread off and give them, together, a moment to go: they are daemons,
        so a thread inside a long polars call or scan does not hold up the exit (Ctrl-C must
        end the run within a second), and it stops at its next queue operation or slice."""
        self.cancel.set()
        end = time.monotonic() + STOP_WAIT
        for t in self.threads:
            t.join(timeout=max(0.0, end - time.monotonic()))

    # ------------------------------------------------------------------ merging

    def counted(self, frames, progress: Progress | None) -> int:
        self.start(frames)
        try:
            total, marks, live, shown = 0, [-1] * self.jobs, self.jobs, 0
            while live:
                item = self.receive(0)
                if item is _END:
                    live -= 1
                    continue
                if isinstance(item, _Failed):
                    raise item.error
                task, mark, n = item
                total += n
                if mark is not None:
                    marks[task] = mark
                if progress is not None:
                    shown = max(shown, _events(marks, self.read))
                    progress(shown, n)
            if progress is not None:
                progress(self.read, 0)
            return total
        finally:
            self.stop()

    def merged(self, frames, progress: Progress | None, follow=None) -> Iterator[MatchBatch]:
        if follow is not None:
            self.frames = queue.SimpleQueue()
        self.start(frames)
        try:
            batches = self._merge(progress)
            yield from batches if follow is None else follow(self._read(), batches)
        finally:
            self.stop()

    def _read(self) -> Iterator[pl.DataFrame]:
        """The frames the feeder read, in order. The feeder queues a frame before it deals
        its events, so the frame a match reaches is always there already."""
        while (frame := self.take(self.frames)) is not _END:
            yield frame

    def _merge(self, progress) -> Iterator[MatchBatch]:
        heads: list = [None] * self.jobs  # per task, the batch at hand (or _END)
        firsts: list = [0] * self.jobs  # ... and its first match not merged yet
        marks: list = [-1] * self.jobs
        shown = 0  # events the progress bar shows: never back
        # The pieces merged but not yet yielded. The tasks' matches interleave by end, with
        # many keys at every few events: yielded piece by piece, a writer met batches of a
        # handful of matches and spent milliseconds on each (``-o`` 80x one core's time).
        # So pieces are joined into one batch, yielded when large or before the merge waits.
        pending: list[MatchBatch] = []
        held = [0, 0]  # matches, events

        def lower(i: int) -> float:
            """The least end task ``i`` may still report."""
            h = heads[i]
            if h is _END:
                return float("inf")
            if isinstance(h, MatchBatch):
                return int(h.end[firsts[i]])
            return marks[i] + 1

        def at_hand(i: int) -> float:
            """The greatest end up to which task ``i``'s matches are all at hand: its mark
            (every match ending there was queued before it), or the end before its batch's
            last one (a task reports its matches in order of end)."""
            h = heads[i]
            if h is _END:
                return float("inf")
            if isinstance(h, MatchBatch):
                return max(marks[i], int(h.end[-1]) - 1)
            return marks[i]

        def piece(i: int, bound: float) -> MatchBatch | None:
            """Take task ``i``'s matches at hand ending at or before ``bound``."""
            batch, at = heads[i], firsts[i]
            if not isinstance(batch, MatchBatch):
                return None
            k = len(batch) if bound == float("inf") else int(
                np.searchsorted(batch.end, bound, side="right"))
            if k < len(batch):
                firsts[i] = k
            else:
                heads[i] = None
            if k <= at:
                return None
            return batch if at == 0 and k == len(batch) else batch.slice(at, k)

        def joined() -> MatchBatch:
            out = join_batches(pending)
            pending.clear()
            held[0] = held[1] = 0
            return out

        while True:
            # Wait only on the task that may report the least end, and only when it has no
            # batch at hand (on a tie a batch goes first): waiting on any other could wait
            # for the feeder while the feeder waits for a task whose matches are due first.
            i = min(range(self.jobs), key=lambda j: (lower(j), heads[j] is None))
            if heads[i] is _END:
                break
            if heads[i] is None:
                if pending and self.outboxes[i].empty():
                    yield joined()  # what is merged goes out before the merge waits
                item = self.receive(i)
                if isinstance(item, _Failed):
                    raise item.error
                if isinstance(item, tuple):  # a mark
                    marks[i] = item[0]
                    if progress is not None and _events(marks, self.read) > shown:
                        shown = _events(marks, self.read)
                        progress(shown, 0)
                else:
                    heads[i], firsts[i] = item, 0
                continue
            top = min(at_hand(j) for j in range(self.jobs))
            if top >= lower(i):
                # Every match ending at or before ``top`` is at hand: those of every task,
                # in order of end (each end is one task's event, so no tie between tasks).
                pieces = [piece(j, top) for j in range(self.jobs)]
                out = join_batches([p for p in pieces if p is not None])
                if sum(p is not None for p in pieces) > 1:
                    out = out.take(np.argsort(out.end, kind="stable"))
            else:
                # No other task owns the events this batch ends at: every match of it
                # ending at or before the others' least end comes first.
                bound = min((lower(j) for j in range(self.jobs) if j != i),
                            default=float("inf"))
                out = piece(i, bound)
            pending.append(out)
            held[0] += len(out)
            held[1] += len(out.pos)
            if progress is not None:
                shown = max(shown, _events(marks, self.read), min(self.read, int(out.end[-1]) + 1))
                progress(shown, len(out))
            if held[0] >= JOIN_MATCHES or held[1] >= BATCH_EVENTS:
                yield joined()
        if pending:
            yield joined()
        if progress is not None:
            progress(self.read, 0)


def _consecutive(frames: pl.DataFrame | Iterable[pl.DataFrame]) -> Iterable[pl.DataFrame]:
    """The frames as the feeder deals them: a whole log in one frame (the DataFrame API's)
    as consecutive slices of ``FRAME_ROWS`` (views, no copy), so that the tasks start on
    its first slice and merging follows every slice, as for a log read in batches."""
    if not isinstance(frames, pl.DataFrame):
        return frames
    return (frames.slice(at, FRAME_ROWS) for at in range(0, frames.height, FRAME_ROWS))


def _events(marks: list, read: int) -> int:
    """Events done, for the progress bar: every task has been dealt (and has run) all
    events up to its mark."""
    return max(0, min(min(marks) + 1, read))


class _Task:
    """One task of the pool: its pieces through its own driver; matches (or counts) and
    marks out."""

    def __init__(self, pool: _Pool, index: int) -> None:
        self.pool = pool
        self.index = index
        self.inbox = pool.inboxes[index]
        self.outbox = pool.outboxes[index]
        self.driver: Driver | None = None
        # its own alphabet: the interning of symbol ids (``Alphabet.symbols``) is one
        # pass's table, which threads may not grow together
        plan = pool.plan
        self.plan = replace(plan, alphabet=Alphabet(plan.alphabet.atoms))

    def run(self) -> None:
        pool = self.pool
        try:
            while True:
                piece = pool.take(self.inbox)
                if isinstance(piece, _Failed):
                    pool.put(self.outbox, piece)
                    return
                if piece is _END:
                    break
                self.work(piece)
            self.finish()
            pool.put(self.outbox, _END)
        except _Cancelled:
            return
        except BaseException as e:  # noqa: BLE001 - the caller's thread raises it
            try:
                pool.put(self.outbox, _Failed(e))
            except _Cancelled:
                return

    def work(self, piece: _Piece) -> None:
        pool = self.pool
        if piece.fresh or self.driver is None:
            self.finish()
            self.driver = Driver(self.plan.executor())
        driver = self.driver
        if piece.context is not None and piece.context.height:
            if pool.count:
                driver.count(piece.context)
            else:
                for _ in driver.feed(piece.context):  # matches ending in the context: dropped
                    if pool.cancel.is_set():
                        raise _Cancelled
        own = piece.own
        if own is not None:
            for offset in range(0, own.height, pool.slice_rows):
                part = own.slice(offset, pool.slice_rows)
                last = int(part[POS][-1])
                if pool.count:
                    pool.put(self.outbox, (self.index, last, driver.count(part)))
                    continue
                for batch in driver.feed(part):
                    pool.put(self.outbox, batch)
                pool.put(self.outbox, (last,))
        pool.put(self.outbox, (self.index, piece.mark, 0) if pool.count else (piece.mark,))

    def finish(self) -> None:
        """End the current pass (``Executor.finish``; nothing under the pool's plans, which
        leave ``--open-absence report`` to the single core)."""
        if self.driver is None:
            return
        for batch in self.driver.finish():
            self.pool.put(self.outbox, (self.index, None, len(batch)) if self.pool.count
                          else batch)
        self.driver = None


class _Feeder:
    """Reads the frames and deals the pieces (see the module's docstring)."""

    def __init__(self, pool: _Pool, frames: Iterable[pl.DataFrame]) -> None:
        self.pool = pool
        self.frames = frames
        plan = pool.plan
        self.streams = plan.query.streams
        self.groups = plan.partition_by if plan.fanout.kind == PARTITION else ()
        self.window = plan.query.within
        self.bound = window_bound(self.window)
        self.last_time = None  # the last timed event (executor.Earlier)
        # partition: the task of each bucket of keys (-1: not seen yet), events per task
        self.owner = np.full(BUCKETS, -1, dtype=np.int64)
        self.load = np.zeros(pool.jobs, dtype=np.int64)
        # ranges: events not dealt yet, the events a later range may need as context
        self.pending: list[pl.DataFrame] = []
        self.tail: pl.DataFrame | None = None
        self.turn = 0
        self.dealt = -1  # the last position dealt
        self.last = -1  # the last position read

    def run(self) -> None:
        pool = self.pool
        try:
            for frame in self.frames:
                if not frame.height:
                    continue
                if pool.frames is not None:
                    pool.frames.put(frame)
                pool.read += frame.height
                prepared = self.prepare(frame)
                self.last = int(frame[POS][-1])
                if pool.plan.fanout.kind == PARTITION:
                    self.deal_keys(prepared)
                else:
                    self.deal_ranges(prepared, final=False)
            if pool.plan.fanout.kind == RANGES:
                self.deal_ranges(None, final=True)
            if pool.frames is not None:
                pool.frames.put(_END)
            for box in pool.inboxes:
                pool.put(box, _END)
        except _Cancelled:
            return
        except BaseException as e:  # noqa: BLE001 - each task passes it on, in turn
            try:
                for box in pool.inboxes:
                    pool.put(box, _Failed(e))
            except _Cancelled:
                return

    def prepare(self, frame: pl.DataFrame) -> pl.DataFrame:
        """FROM, the keys and the window time, the order checked, slice by slice as the
        driver cuts (``prepare_frame``): an unordered log fails as on one core."""
        parts = []
        for offset in range(0, frame.height, self.pool.slice_rows):
            part, self.last_time = prepare_frame(
                frame.slice(offset, self.pool.slice_rows), self.streams, self.groups,
                self.window, self.last_time, _KEY, _WTIME)
            parts.append(part)
        return parts[0] if len(parts) == 1 else pl.concat(parts, rechunk=False)

    def _own(self, frame: pl.DataFrame) -> pl.DataFrame:
        return frame.drop([c for c in frame.columns if c.startswith((_KEY, _WTIME))])

    # ------------------------------------------------------------------ partition

    def deal_keys(self, prepared: pl.DataFrame) -> None:
        """Each key's events to its task (one task per bucket of keys, for the whole log)."""
        pool = self.pool
        pieces: list[pl.DataFrame | None] = [None] * pool.jobs
        if prepared.height:
            keys = [f"{_KEY}{i}" for i in range(len(self.groups))]
            key = pl.col(keys[0]) if len(keys) == 1 else pl.struct(keys)
            bucket = (prepared.select(key.hash() % BUCKETS).to_series().to_numpy()
                      .astype(np.int64, copy=False))
            sizes = np.bincount(bucket, minlength=BUCKETS)
            known = self.owner >= 0
            self.load += np.bincount(self.owner[known], weights=sizes[known],
                                     minlength=pool.jobs).astype(np.int64)
            new = np.flatnonzero(~known & (sizes > 0))
            for b in new[np.argsort(-sizes[new], kind="stable")]:  # the largest first
                self.owner[b] = int(np.argmin(self.load))
                self.load[self.owner[b]] += sizes[b]
            tasks, own = self.owner[bucket], self._own(prepared)
            for t in np.unique(tasks):  # a filter per task: 2-3x cheaper than partition_by
                pieces[t] = own.filter(pl.Series(tasks == t))
        self.dealt = self.last
        for t, piece in enumerate(pieces):
            pool.put(pool.inboxes[t], _Piece(piece, self.last))

    # ------------------------------------------------------------------ ranges

    def deal_ranges(self, prepared: pl.DataFrame | None, final: bool) -> None:
        """Consecutive ranges of at least ``RANGE_ROWS`` events (and ``CONTEXT_RATIO``
        times the context they may need), each with its context, to the tasks in turn."""
        if prepared is not None and prepared.height:
            self.pending.append(prepared)
        pending = sum(f.height for f in self.pending)
        while pending:
            tail = 0 if self.tail is None else self.tail.height
            size = max(RANGE_ROWS, CONTEXT_RATIO * tail)
            if pending < size and not final:
                break
            events = pl.concat(self.pending, rechunk=False) if len(self.pending) > 1 \
                else self.pending[0]
            own, rest = events.head(size), events.slice(size)
            self.pending = [rest] if rest.height else []
            pending = rest.height
            self.deal(own, self.context(own), int(own[POS][-1]) if pending else self.last)
        if not pending and self.last > self.dealt:  # nothing held back: every task goes on
            for box in self.pool.inboxes:
                self.pool.put(box, _Piece(None, self.last))
            self.dealt = self.last

    def deal(self, own: pl.DataFrame, context: pl.DataFrame | None, mark: int) -> None:
        pool = self.pool
        owner = self.turn % pool.jobs
        self.turn += 1
        for t in range(pool.jobs):
            piece = (_Piece(self._own(own), mark, None if context is None else self._own(context),
                            fresh=True) if t == owner else _Piece(None, mark))
            pool.put(pool.inboxes[t], piece)
        self.dealt = mark
        self.tail = self.reach(own if self.tail is None or not self.tail.height else
                               pl.concat([self.tail, own], rechunk=False))

    def context(self, own: pl.DataFrame) -> pl.DataFrame | None:
        """The events before ``own`` that a match ending in it may start at: the window's
        ``n`` events, or those from the first whose window time is within the bound of
        ``own``'s first time (matches end only at events with a time)."""
        tail = self.tail
        if tail is None or not tail.height:
            return None
        if isinstance(self.window, ast.EventsWindow):
            return tail.tail(self.window.count)
        first = own[_WTIME].drop_nulls()
        if not first.len():
            return None
        return _from(tail, window_low(first[0], self.bound))

    def reach(self, events: pl.DataFrame) -> pl.DataFrame:
        """What of ``events`` a later range may need as context."""
        if isinstance(self.window, ast.EventsWindow):
            return events.tail(self.window.count)
        times = events[_WTIME].drop_nulls()
        if not times.len():
            return events.clear()
        return _from(events, window_low(times[-1], self.bound))


def _from(events: pl.DataFrame, low) -> pl.DataFrame:
    """``events`` from the first whose window time is at least ``low`` (times never
    decrease along the stream; events without one are kept after it)."""
    at = (events[_WTIME] >= low).fill_null(False).arg_true()
    return events.clear() if not at.len() else events.slice(int(at[0]))
