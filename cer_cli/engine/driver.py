"""The driver: one pass of one executor over consecutive event frames.

Every caller runs a query the same way — the CLI (``cer match``, ``cer plot``), the DataFrame
API, ``Plan.run`` and each Spark task: frames are cut into slices (an executor's state
persists, so slices give the same matches as the whole frame, and a slice bounds what one
call holds), a signal checkpoint follows every slice (a Ctrl-C that CPython swallowed inside
a C call still stops the run within a slice), progress is reported per batch of matches, and
``Executor.finish`` ends the pass (a trailing absence's open matches). A ``Driver`` holds one
pass, so a task of a fan-out (a Spark task, a local pool's worker) runs its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import polars as pl

from cer_cli import signals
from cer_cli.engine.executor import Executor
from cer_cli.events import Match, MatchBatch, as_matches

#: Events per executor call when matches are enumerated: a slice's events and its matches'
#: batches are what one call holds at once.
SLICE_ROWS = 65_536
#: Events per call when only counting: fewer per-call costs (atoms, symbol mapping), and no
#: output waits between slices.
COUNT_SLICE_ROWS = 262_144

#: ``progress(events, matches)``: ``events`` read so far (never decreasing), ``matches`` new
#: since the previous call.
Progress = Callable[[int, int], None]


@dataclass
class Driver:
    """One pass of ``executor`` over consecutive event frames (``feed`` / ``count`` each
    frame in order, then ``finish`` once). ``events`` is what ``progress`` was last told."""

    executor: Executor
    progress: Progress | None = None
    slice_rows: int = SLICE_ROWS
    count_slice_rows: int = COUNT_SLICE_ROWS
    events: int = 0

    def feed(self, frame: pl.DataFrame) -> Iterator[MatchBatch]:
        """The matches of ``frame``'s events, slice by slice. Within a slice the progress
        follows each batch: one slice may take minutes of enumeration."""
        for offset in range(0, frame.height, self.slice_rows):
            part = frame.slice(offset, self.slice_rows)
            done = self.events + part.height
            for batch in self.executor.run_batches(part):
                self._advance(_enumerated(batch, self.events, done), len(batch))
                yield batch
            signals.check()
            self._advance(done, 0)

    def count(self, frame: pl.DataFrame) -> int:
        """How many matches ``feed(frame)`` would yield, counted by the executor."""
        n = 0
        for offset in range(0, frame.height, self.count_slice_rows):
            part = frame.slice(offset, self.count_slice_rows)
            got = self.executor.count(part)
            n += got
            signals.check()
            self._advance(self.events + part.height, got)
        return n

    def finish(self) -> Iterator[MatchBatch]:
        """What the executor reports once the log has ended (``Executor.finish``)."""
        for batch in self.executor.finish():
            self._advance(self.events, len(batch))
            yield batch

    def _advance(self, events: int, matches: int) -> None:
        self.events = events
        if self.progress is not None:
            self.progress(events, matches)


def frames_of(frames: pl.DataFrame | Iterable[pl.DataFrame]) -> Iterable[pl.DataFrame]:
    """One event frame or consecutive ones, as consecutive frames."""
    return (frames,) if isinstance(frames, pl.DataFrame) else frames


def run_batches(executor: Executor, frames: pl.DataFrame | Iterable[pl.DataFrame],
                progress: Progress | None = None) -> Iterator[MatchBatch]:
    """Every match of the frames (one event frame or consecutive ones), in columns, in order
    of their triggering event, then the executor's ``finish``."""
    driver = Driver(executor, progress)
    for frame in frames_of(frames):
        yield from driver.feed(frame)
    yield from driver.finish()


def run_matches(executor: Executor,
                frames: pl.DataFrame | Iterable[pl.DataFrame]) -> Iterator[Match]:
    """``run_batches`` as ``Match`` objects."""
    return as_matches(run_batches(executor, frames))


def run_count(executor: Executor, frames: pl.DataFrame | Iterable[pl.DataFrame],
              progress: Progress | None = None) -> int:
    """How many matches ``run_batches`` yields, counted by the executor (a Python int: exact
    beyond int64)."""
    driver = Driver(executor, progress)
    n = sum(driver.count(frame) for frame in frames_of(frames))
    return n + sum(len(b) for b in driver.finish())


def run_count_by_partition(executor: Executor, frames: pl.DataFrame | Iterable[pl.DataFrame],
                           progress: Progress | None = None) -> dict[tuple | None, int]:
    """How many matches ``run_batches`` yields per PARTITION BY key (the key a match
    reports; ``None`` without one), for the keys with any. An executor that keeps these
    counts itself (``partition_counts``: the CEA executor) counts as ``run_count`` does,
    without enumerating where it does not; the others' matches are enumerated and tallied
    batch by batch (memory: one batch, plus a count per key)."""
    per_key = getattr(executor, "partition_counts", None)
    if per_key is not None:
        run_count(executor, frames, progress)
        return per_key()
    counts: dict[tuple | None, int] = {}
    for batch in run_batches(executor, frames, progress):
        for key, n in batch.partition_counts().items():
            counts[key] = counts.get(key, 0) + n
    return counts


def _enumerated(batch: MatchBatch, read: int, slice_end: int) -> int:
    """Events read once ``batch`` is out: a match is reported at the event that ends it, so
    the batch's latest end is the event being enumerated (positions count events from 0);
    never back, never past the slice being run."""
    if not len(batch):
        return read
    return max(read, min(slice_end, int(batch.end.max()) + 1))
