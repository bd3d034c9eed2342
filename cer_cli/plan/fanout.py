"""The fan-out: how a planned query is cut into tasks, and why that is exact.

One engine over the whole time-ordered stream is the single core's way. A local pool of
threads (``cer match --jobs N``, ``plan/pool.py``) and Spark (``spark/tasks.py``) cut the
stream into pieces instead, run one engine per piece, and merge the pieces' matches by end
position. Three fan-outs, chosen from the query alone (``fanout``); which runner executes
it locally, and with how many tasks, is ``Fanout.runner``:

``partition`` — the query has ``PARTITION BY`` and no ``CONSUME BY ANY``. The engine
evaluates every key's sub-stream independently (its own table, its own EVENTS positions,
its own ``CONSUME BY PARTITION``), so events are shuffled by key, each Spark partition is
sorted by global position and fed to one engine. Every key lives in exactly one Spark
partition and sees the same sub-stream, in the same order, as in local mode: exact.

``ranges`` — no ``PARTITION BY``, a ``WITHIN`` bound, ``CONSUME BY NONE``. The stream the
query sees (after ``FROM``) is cut into position ranges; each task owns one range and also
reads the *context* before it: the ``n`` preceding events for ``WITHIN n EVENTS``, the events
whose window time is at least ``time(first owned event) − bound`` for a duration or an
attribute window. A task keeps only the matches that end inside its own range. A match
``[i, j]`` depends only on the events ``i..j`` and the window puts ``i`` inside the
context of ``j``'s range (window times never decrease along the stream), so the task that
owns ``j`` reports it, with the same strategy and LIMIT decision (all windowed matches
ending at ``j`` are visible there), and no other task does: no match lost or duplicated.
Consumption breaks the argument: with ``CONSUME BY ANY``/``PARTITION`` a match forgets
partial matches, so what ends in a range depends on matches before its context.

``single`` — everything else (no window and no partition, or consumption across the
whole stream): one task reads the whole time-ordered stream, as local mode does; Spark
still reads the logs and computes positions in parallel.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cer_cli.engine.jit import JIT_MIN_EVENTS
from cer_cli.query import ast
from cer_cli.query.printer import groups_text, window_span

PARTITION = "partition"
RANGES = "ranges"
SINGLE = "single"


@dataclass(frozen=True)
class Fanout:
    """The chosen fan-out: ``kind`` (``partition``, ``ranges`` or ``single``), the key
    groups (``partition``), the window (``ranges``) and ``reason`` for the choice."""

    kind: str
    reason: str
    partition_by: tuple[tuple[str, ...], ...] = ()
    window: ast.Window | None = None

    def describe(self, n_events: int | None = None) -> str:
        """What ``cer explain --spark`` prints; with the log's ``n_events``, also whether
        Spark pays for itself on it (``spark_pays``)."""
        if self.kind == PARTITION:
            keys = groups_text(self.partition_by)
            how = [
                f"spark plan: one engine per Spark partition, events shuffled by PARTITION BY {keys}",
                "  each Spark partition is sorted by global position; a key's events all go to one",
                "  partition, so every key sees the same sub-stream as locally (exact)",
            ]
        elif self.kind == RANGES:
            how = [
                f"spark plan: split the stream into position ranges, context {_context(self.window)}",
                "  each task runs the engine over its range plus the context before it and keeps",
                "  the matches ending in its own range (exact: the window bounds every match)",
            ]
        else:
            how = ["spark plan: one task over the whole time-ordered stream (no fan-out)"]
        how.append(f"  why: {self.reason}")
        how.append("  matches are merged by end position, then the engine's order (as local mode)")
        how += ["  " + line for line in spark_pays(self.kind, n_events)]
        return "\n".join(how)

    def runner(self, jobs: int | None = None, n_events: int | None = None,
               open_ends: bool = False) -> Runner:
        """Who runs this fan-out locally (``cer match --jobs``): a pool of ``jobs`` threads
        (default: ``default_jobs``), or the single core, and why. ``n_events``: the log's
        size when known; ``open_ends``: ``--open-absence report``."""
        jobs = default_jobs() if jobs is None else jobs
        if self.kind == SINGLE:
            return Runner(1, f"one core: the query cannot be split ({self.reason})")
        if jobs <= 1:
            return Runner(1, "one core: --jobs 1")
        if open_ends:
            return Runner(1, "one core: --open-absence report ends the open matches one past"
                             " the whole log's last event, which no task sees")
        if n_events is not None and n_events < POOL_MIN_EVENTS:
            return Runner(1, f"one core: {n_events:,} events (below {POOL_MIN_EVENTS:,} the"
                             " kernel runs as plain Python, which threads cannot share)")
        how = ("each PARTITION BY key's events go to one task (keys spread by hash)"
               if self.kind == PARTITION else
               "the stream is cut into consecutive ranges, dealt to the tasks in turn, each"
               f" run after its context ({_context(self.window)})")
        return Runner(jobs, f"a local pool of {jobs} threads: {how}")


@dataclass(frozen=True)
class Runner:
    """How ``cer match`` runs a plan locally: ``tasks`` threads of a local pool
    (``plan/pool.py``), or the single core when ``tasks`` is 1; ``reason`` says which
    and why (``cer explain`` prints it)."""

    tasks: int
    reason: str

    @property
    def pool(self) -> bool:
        return self.tasks > 1


#: The local pool runs only on logs of at least this many events: below it the kernel runs
#: as plain Python (``engine.jit.JIT_MIN_EVENTS``), which holds the GIL, so threads would
#: only take turns.
POOL_MIN_EVENTS = JIT_MIN_EVENTS


def default_jobs() -> int:
    """``--jobs`` by default: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


#: Below this many events `cer explain --spark` says local mode is faster. Measured
#: (`make bench`, groups spark and spark-big; README, "Performance"): a Spark run pays a
#: fixed ~8-15 s (JVM, ~15 small jobs, Python workers) and then ~7 passes over the events
#: to read, number and sort them in local mode's order, ~15x local mode's whole run at
#: 1M events on 2 cores; only many more cores, or logs one machine cannot read, repay it.
SPARK_MIN_EVENTS = 10_000_000


def spark_pays(kind: str, n_events: int | None) -> list[str]:
    """Lines saying when Spark pays for itself, for ``cer explain --spark``."""
    lines = []
    if kind == SINGLE:
        lines.append("cost: one task runs the whole stream, so Spark only adds its start-up "
                     "and its passes over the events to local mode")
    if n_events is not None and n_events < SPARK_MIN_EVENTS:
        lines.append(f"cost: this log has {n_events:,} events: `cer match` without --spark is "
                     "faster (Spark's start-up alone, ~8-15 s, exceeds local mode's whole run; "
                     "at 1M events Spark took ~15x local mode on 2 cores)")
    elif n_events is None:
        lines.append("cost: Spark starts a JVM and Python workers (~8-15 s) and passes over "
                     f"the events ~7 times; below ~{SPARK_MIN_EVENTS:,} events, or on a few "
                     "cores, local mode is faster")
    return lines


def _context(window: ast.Window | None) -> str:
    return "none" if window is None else f"the preceding {window_span(window)}"


def fanout(q: ast.Query, groups: tuple[tuple[str, ...], ...]) -> Fanout:
    """The fan-out of query ``q`` whose executor partitions by ``groups`` (PARTITION BY may
    have grown a group from equalities between events; fanning out by it is exact for the
    same reason)."""
    if groups:
        if q.consume == "ANY":
            return Fanout(
                SINGLE,
                "CONSUME BY ANY forgets the partial matches of every partition after a match, "
                "so partitions depend on each other and need the global order",
            )
        return Fanout(
            PARTITION,
            "the engine evaluates every PARTITION BY key independently"
            + (" (CONSUME BY PARTITION stays within a key)" if q.consume == "PARTITION" else ""),
            partition_by=groups,
        )
    if q.trailing is not None:
        return Fanout(
            SINGLE,
            "a trailing absence reports a match at the first event past its window, which may"
            " lie any distance after the match's first event: a range's context cannot hold it",
        )
    if q.within is None:
        return Fanout(
            SINGLE,
            "no PARTITION BY and no WITHIN: a match may span the whole log, "
            "so the stream cannot be cut",
        )
    if q.consume != "NONE":
        return Fanout(
            SINGLE,
            f"CONSUME BY {q.consume} without PARTITION BY: a match forgets every partial match, "
            "so what ends in a range depends on matches before it",
        )
    return Fanout(
        RANGES,
        "WITHIN bounds every match, and CONSUME BY NONE keeps ranges independent",
        window=q.within,
    )
