"""The fan-out: the events of each task, as the plan's ``fanout`` says (see
``cer_cli.plan.fanout`` for why each one is exact), sorted by POS and streamed, Arrow batch
by Arrow batch, into a fresh executor of the plan (``mapInArrow``); a task of the
``ranges`` plan keeps only the matches ending in its own range. Matches carry their end
position and their rank within the task: the one task that reports a match ending at an
event reports it in the engine's order, so sorting by (end, rank) gives local mode's order.
"""

from __future__ import annotations

import math
import pickle
from typing import TYPE_CHECKING

from cer_cli.engine.driver import Driver
from cer_cli.engine.executor import partition_columns, window_source
from cer_cli.events import POS, STREAM, as_matches
from cer_cli.io.encoding import partition_json
from cer_cli.plan import Plan
from cer_cli.plan.fanout import PARTITION, RANGES
from cer_cli.query import ast
from cer_cli.spark.read import Events, column
from cer_cli.spark.run import Run

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


_QPOS = "__cer_qpos"  # position in the stream the query sees (after FROM)
_GROUP = "__cer_group"  # engine instance within a Spark partition (the range of `ranges`)
_OWN = "__cer_own"  # the event belongs to its task's own range (not its context)
_KEY = "__cer_key"
MATCH_SCHEMA = (
    "end long, seq long, start long, "
    "events array<struct<position: long, vars: array<string>>>, partition binary, "
    "partition_json string"
)


def _task(compiled: Plan):
    """The ``mapInArrow`` function: batches sorted by (GROUP, POS) -> match rows.

    It ships the whole plan and runs ``compiled.executor()`` through the driver
    (``engine.driver.Driver``), so a task evaluates exactly as local mode does.
    A fresh pass starts at every new GROUP; a match is kept when it ends at or after the
    group's first OWN event (events before it are the context of a ``ranges`` task).
    """
    names = [g[0] for g in compiled.query.partition_by]

    def run(batches):
        import polars as pl
        import pyarrow as pa

        schema = None
        group, driver, lo, seq = None, None, None, 0
        for batch in batches:
            frame = pl.from_arrow(batch)
            out: list[dict] = []
            for part in frame.partition_by(_GROUP, maintain_order=True):
                g = part[_GROUP][0]
                if driver is None or g != group:  # --open-absence report is local only:
                    group, driver, lo = g, Driver(compiled.executor()), None  # no finish
                own = part.filter(pl.col(_OWN))[POS]
                if lo is None and own.len():
                    lo = own[0]
                events = part.drop(_GROUP, _OWN, _QPOS, strict=False)
                for m in as_matches(driver.feed(events)):
                    if lo is not None and m.end >= lo:
                        out.append({
                            "end": m.end, "seq": seq, "start": m.start,
                            "events": [{"position": p, "vars": list(v)} for p, v in m.events],
                            "partition": None if m.partition is None else pickle.dumps(m.partition),
                            "partition_json": partition_json(m.partition, names),
                        })
                        seq += 1
            if schema is None:
                schema = pa.schema([
                    ("end", pa.int64()), ("seq", pa.int64()), ("start", pa.int64()),
                    ("events", pa.list_(pa.struct([("position", pa.int64()),
                                                   ("vars", pa.list_(pa.string()))]))),
                    ("partition", pa.binary()), ("partition_json", pa.string()),
                ])
            yield pa.RecordBatch.from_pylist(out, schema=schema)

    return run


def _wtime(query: ast.Query, ev: Events):
    """The window time column and bound of a time or attribute window, as the executors
    read it (``window_source``)."""
    source, bound = window_source(query.within, ev.frame.columns, ev.time_column is not None)
    return column(source), bound


def _tasks(run: Run, compiled: Plan, ev: Events, ranges: int | None) -> DataFrame:
    """The events of every task, partitioned and sorted by (GROUP, POS), with OWN."""
    from pyspark.sql import functions as F

    q, plan = compiled.query, compiled.fanout
    frame = ev.frame
    if q.streams is not None:
        frame = frame.filter(F.col(STREAM).isin(list(q.streams)))
    nparts = ranges or run.spark.sparkContext.defaultParallelism
    if plan.kind == PARTITION:
        keys = []
        for i, present in enumerate(partition_columns(plan.partition_by, frame.columns)):
            key = F.coalesce(*map(column, present)) if present else F.lit(None)
            keys.append(key.alias(f"{_KEY}{i}"))
        names = [f"{_KEY}{i}" for i in range(len(keys))]
        keyed = frame.select("*", *keys).dropna(subset=names)
        return (keyed.repartition(nparts, *names).drop(*names)
                .withColumns({_GROUP: F.lit(0), _OWN: F.lit(True)})
                .sortWithinPartitions(POS))
    if plan.kind != RANGES:
        return (frame.repartition(1).withColumns({_GROUP: F.lit(0), _OWN: F.lit(True)})
                .sortWithinPartitions(POS))
    if q.streams is not None:
        # eager: ev.frame's partitions are already in POS order
        frame, n = run.rank(frame, _QPOS, POS) if run.lazy else run.index(frame, _QPOS)
    else:
        frame, n = frame.withColumn(_QPOS, F.col(POS)), ev.n
    if n is None:  # a lazy run: the ranges need the number of events
        n = frame.count()
    r = max(1, min(nparts, n))
    size = math.ceil(n / r) if n else 1
    starts = [k * size for k in range(r)]
    if isinstance(q.within, ast.EventsWindow):
        context = [max(0, p - q.within.count) for p in starts]
    else:
        wt, bound = _wtime(q, ev)
        qpos = F.col(_QPOS)
        first = frame.agg(*(F.min(F.when(qpos >= p, wt)) for p in starts)).first()
        reach = frame.agg(*(
            F.min(F.when(wt >= F.lit(t) - bound, qpos)) if t is not None else F.lit(p)
            for t, p in zip(first, starts, strict=True)
        )).first()
        # One event more than needed: every pair of neighbours is then inside one task,
        # so the engines check the whole stream's time order, as local mode does.
        context = [max(0, min(p - 1, p if c is None else c)) for c, p in zip(reach, starts,
                                                                             strict=True)]
    lo = F.array(*(F.lit(c).cast("long") for c in context))
    hi = F.array(*(F.lit(p).cast("long") for p in [*starts[1:], max(n, 1)]))
    qpos = F.col(_QPOS)
    owners = F.filter(
        F.sequence(F.lit(0), F.lit(r - 1)),
        lambda k: (F.element_at(lo, k + 1) <= qpos) & (qpos < F.element_at(hi, k + 1)),
    )
    pieces = frame.withColumn(_GROUP, F.explode(owners))
    own = qpos >= F.element_at(F.array(*(F.lit(p).cast("long") for p in starts)), F.col(_GROUP) + 1)
    return (pieces.withColumn(_OWN, own).repartitionByRange(r, _GROUP)
            .sortWithinPartitions(_GROUP, POS))


def find_matches(run: Run, compiled: Plan, ev: Events, ranges: int | None) -> DataFrame:
    tasks = _tasks(run, compiled, ev, ranges)
    # Persisted: sorting by end samples its input first, which would run the engines twice.
    return run.persist(tasks.mapInArrow(_task(compiled), MATCH_SCHEMA))
