"""The fan-out: the events of each task, as the plan's ``fanout`` says (see
``cer_cli.plan.fanout`` for why each one is exact), sorted in the stream's order and
streamed, Arrow batch by Arrow batch, into a fresh executor of the plan (``mapInArrow``); a
task of the ``ranges`` plan keeps only the matches ending in its own range. Matches carry
their end position and their rank within the task: the one task that reports a match ending
at an event reports it in the engine's order, so sorting by (end, rank) gives local mode's
order.

One shuffle, by the fan-out's key (a PARTITION BY key, a range), then a sort within each
Spark partition. Events numbered by POS (``read.event_frame``) are sorted by it; events that
are not (``read.stream_frame``, for ``--count``) by ``read.ORDER``, the local reader's order,
and each task numbers them itself: the engines need positions that grow along the stream,
not the global ones, which only an output shows.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Iterator
from typing import TYPE_CHECKING

from cer_cli.engine.driver import Driver
from cer_cli.engine.executor import partition_columns, prepare_frame, window_low, window_source
from cer_cli.events import POS, ROW, STREAM, TIME, Match
from cer_cli.io.encoding import partition_json
from cer_cli.plan import Plan
from cer_cli.plan.fanout import PARTITION, RANGES
from cer_cli.query import ast
from cer_cli.query.errors import QueryError
from cer_cli.spark.errors import decode_query_error, encode_query_error
from cer_cli.spark.read import ORDER, Events, column
from cer_cli.spark.run import Run

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


_QPOS = "__cer_qpos"  # position in the stream the query sees (after FROM)
_GROUP = "__cer_group"  # engine instance within a Spark partition (the range of `ranges`)
_OWN = "__cer_own"  # the event belongs to its task's own range (not its context)
_KEY = "__cer_key"
_ATTR = "__cer_attr"  # a log column under another name into mapInArrow (``_arrow_safe``)
MATCH_SCHEMA = (
    "end long, seq long, start long, "
    "events array<struct<position: long, vars: array<string>>>, partition binary, "
    "partition_json string"
)
#: A task's match count, as text: a count without a window may exceed 64 bits.
COUNT_SCHEMA = "count string"
#: Rows a task hands its engines at once: Spark's Arrow batches (10,000 rows by default) are
#: joined up to this many, since every frame costs the engines a dozen polars queries
#: (~4 ms) whatever its size — on 10M events, 5 s of a task's 13 s at 10,000 rows.
TASK_ROWS = 1 << 18


def _task(compiled: Plan, count: bool = False, rows: int | None = None,
          names_back: dict[str, str] | None = None):
    """The ``mapInArrow`` function: batches sorted by (GROUP, stream order) -> match rows,
    or (``count``) one row with the task's match count.

    It ships the whole plan and runs ``compiled.executor()`` through the driver
    (``engine.driver.Driver``), so a task evaluates exactly as local mode does. Events
    without POS are numbered here, in the order they come (their ROW is then unknown: a
    message naming one is worth a rerun with it, ``job``). A fresh pass starts at every new
    GROUP; a match is kept when it ends at or after the group's first OWN event (events
    before it are the context of a ``ranges`` task), and counted when it ends at an OWN one.
    Spark's batches reach the engines joined into frames of ``rows`` (``TASK_ROWS``) rows,
    their columns named back as ``names_back`` says (``_arrow_safe``).
    """
    names = [g[0] for g in compiled.query.partition_by]
    rows = rows or TASK_ROWS  # read here, on the driver: the tasks get the value

    def run(batches):
        try:
            yield from _run(batches)
        except QueryError as e:  # the driver's to say, as local mode says it
            raise RuntimeError(encode_query_error(e)) from None

    def _run(batches):
        import polars as pl
        import pyarrow as pa

        group, driver, lo, seq, total, numbered = None, None, None, 0, 0, 0
        for frame in _frames(batches, rows):
            if names_back:
                frame = frame.rename(names_back)
            if POS not in frame.columns:
                frame = frame.with_columns(
                    pl.int_range(numbered, numbered + frame.height, dtype=pl.Int64).alias(POS),
                    pl.lit(-1, dtype=pl.Int64).alias(ROW))
                numbered += frame.height
            out = []
            for part in frame.partition_by(_GROUP, maintain_order=True):
                g = part[_GROUP][0]
                if driver is None or g != group:  # --open-absence report is local only:
                    group, driver, lo = g, Driver(compiled.executor()), None  # no finish
                events = part.drop(_GROUP, _OWN, _QPOS, *ORDER[1:], strict=False)
                if count:  # the context comes first: its matches are another task's
                    context = int((~part[_OWN]).sum())
                    if context:
                        driver.count(events.head(context))
                    total += driver.count(events.slice(context))
                    continue
                if lo is None and part[_OWN].any():
                    lo = part.filter(pl.col(_OWN))[POS][0]
                for found in driver.feed(events):
                    kept = [] if lo is None else (found.end >= lo).nonzero()[0]
                    if len(kept):
                        out.append(_match_rows(found.take(kept), seq, names))
                        seq += len(kept)
            if out:
                yield from out
        if count:
            yield pa.RecordBatch.from_pydict({"count": [str(total)]})

    return run


def _frames(batches, rows: int):
    """Consecutive Arrow batches as polars frames of at least ``rows`` rows (the last one
    fewer), in order."""
    import polars as pl
    import pyarrow as pa

    pending, n = [], 0
    for batch in batches:
        pending.append(batch)
        n += batch.num_rows
        if n >= rows:
            yield pl.from_arrow(pa.Table.from_batches(pending))
            pending, n = [], 0
    if pending:
        yield pl.from_arrow(pa.Table.from_batches(pending))


def _match_rows(found, seq: int, names: list[str]):
    """A ``MatchBatch`` as ``MATCH_SCHEMA``'s Arrow rows, column-wise: each event's
    variables and each partition's key (pickled, and as JSON text) built once, then taken."""
    import numpy as np
    import pyarrow as pa

    n = len(found)
    labels = pa.array([list(v) for v in found.labelsets] or [[]], pa.list_(pa.string()))
    events = pa.StructArray.from_arrays(
        [pa.array(np.asarray(found.pos, np.int64)), labels.take(pa.array(found.lab, pa.int64()))],
        names=["position", "vars"])
    ids, where = np.unique(np.asarray(found.part, np.int64), return_inverse=True)
    keys = [found.partitions.get(int(i)) for i in ids]
    where = pa.array(where.reshape(-1).astype(np.int64))
    return pa.RecordBatch.from_arrays([
        pa.array(np.asarray(found.end, np.int64)),
        pa.array(np.arange(seq, seq + n, dtype=np.int64)),
        pa.array(np.asarray(found.start, np.int64)),
        pa.ListArray.from_arrays(pa.array(np.asarray(found.off, np.int32)), events),
        pa.array([None if k is None else pickle.dumps(k) for k in keys], pa.binary()).take(where),
        pa.array([partition_json(k, names) for k in keys], pa.string()).take(where),
    ], names=["end", "seq", "start", "events", "partition", "partition_json"])


#: The schema of ``in_arrow``'s rows: one Arrow IPC stream of match rows each.
IPC_SCHEMA = "ipc binary"


def in_arrow(batches):
    """The ``mapInArrow`` function that sends a partition's match rows to the driver as they
    are, each Arrow batch as one IPC stream: the driver builds its ``Match`` objects from
    columns (``matches_of``), not from a Spark ``Row`` per match, which the JVM pickles and
    the driver unpickles (on 1M events, 700,778 matches: most of the printing's time)."""
    import pyarrow as pa

    for batch in batches:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        yield pa.RecordBatch.from_pydict({"ipc": [sink.getvalue().to_pybytes()]},
                                         schema=pa.schema([("ipc", pa.binary())]))


def matches_of(ipc: bytes, keys: dict) -> Iterator[Match]:
    """The matches of one ``in_arrow`` IPC stream of ``MATCH_SCHEMA`` rows, in its order;
    ``keys`` caches the unpickled partition keys (shared by many matches)."""
    import pyarrow as pa

    for batch in pa.ipc.open_stream(ipc):
        events = batch.column("events")
        offsets = events.offsets.to_numpy()
        offsets = (offsets - offsets[0]).tolist()
        flat = events.flatten()
        positions = flat.field("position").to_pylist()
        labels = [tuple(v) for v in flat.field("vars").to_pylist()]
        parts = batch.column("partition").to_pylist()
        for i, (start, end) in enumerate(zip(batch.column("start").to_pylist(),
                                             batch.column("end").to_pylist(), strict=True)):
            lo, hi = offsets[i], offsets[i + 1]
            key = parts[i]
            if key is not None and key not in keys:
                keys[key] = pickle.loads(key)
            yield Match(start, end, tuple(zip(positions[lo:hi], labels[lo:hi], strict=True)),
                        None if key is None else keys[key])


def _wtime(query: ast.Query, ev: Events):
    """The window time column and bound of a time or attribute window, as the executors
    read it (``window_source``)."""
    source, bound = window_source(query.within, ev.frame.columns, ev.time_column is not None)
    return column(source), bound


def _tasks(run: Run, compiled: Plan, ev: Events, ranges: int | None) -> DataFrame:
    """The events of every task, partitioned and sorted by (GROUP, stream order), with OWN."""
    from pyspark.sql import functions as F

    q, plan = compiled.query, compiled.fanout
    frame = ev.frame
    order = [POS] if POS in frame.columns else list(ORDER)
    if q.streams is not None:
        frame = frame.filter(F.col(STREAM).isin(list(q.streams)))
    nparts = ranges or run.spark.sparkContext.defaultParallelism
    one = {_GROUP: F.lit(0), _OWN: F.lit(True)}
    if plan.kind == PARTITION:
        keys = []
        # NaN is no value, as locally (``prepare_frame``): the group's next attribute
        floats = {f.name for f in frame.schema.fields if f.dataType.typeName() in ("double", "float")}
        for i, present in enumerate(partition_columns(plan.partition_by, frame.columns)):
            cols = [F.when(~F.isnan(column(c)), column(c)) if c in floats else column(c)
                    for c in present]
            key = F.coalesce(*cols) if cols else F.lit(None)
            keys.append(key.alias(f"{_KEY}{i}"))
        names = [f"{_KEY}{i}" for i in range(len(keys))]
        keyed = frame.select("*", *keys).dropna(subset=names)
        return (keyed.repartition(nparts, *names).drop(*names).withColumns(one)
                .sortWithinPartitions(*order))
    if plan.kind != RANGES:
        return frame.repartition(1).withColumns(one).sortWithinPartitions(*order)
    if POS not in frame.columns:
        return _time_ranges(compiled, ev, frame, nparts)
    return _position_ranges(run, q, ev, frame, nparts)


def _position_ranges(run: Run, q: ast.Query, ev: Events, frame: DataFrame,
                     nparts: int) -> DataFrame:
    """The ``ranges`` fan-out cut by position (``frame``: ``ev``'s events after FROM, with
    POS): about ``nparts`` ranges, each with its context, as GROUP and OWN, partitioned by
    GROUP and sorted by position."""
    from pyspark.sql import functions as F

    if q.streams is not None:
        # eager: ev.frame's partitions are already in POS order
        frame, n = (run.rank(frame, _QPOS, POS) if run.lazy or not ev.partitions_in_order
                    else run.index(frame, _QPOS))
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
            F.min(F.when(wt >= F.lit(window_low(t, bound)), qpos)) if t is not None
            else F.lit(p)
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


ERROR_SCHEMA = "position long, error string"


def checks_time_order(compiled: Plan, ev: Events) -> bool:
    """Whether the fan-out leaves a window time's order unchecked: a ``partition`` task
    sees only its keys' events, so an attribute window over a column the logs are not
    sorted by (their time column) could be out of order between keys, which local mode
    refuses (and a task holding both keys would). ``first_refused_time`` checks it."""
    w = compiled.query.within
    return (compiled.fanout.kind == PARTITION and isinstance(w, ast.AttributeWindow)
            and ev.time_columns != (w.attr,))


def first_refused_time(run: Run, compiled: Plan, ev: Events,
                       ranges: int | None = None) -> QueryError | None:
    """The error local mode raises for the stream's first refused window time
    (``executor.refused_time``: infinite, out of order, inexact), or None; ``ev`` numbered
    by POS. The stream is cut into position ranges with the ``ranges`` fan-out's context,
    so every earlier event a later one could be below is in its range's task; each task
    checks its ranges as the engines do (``prepare_frame``) and the least position wins.
    Run before a ``partition`` fan-out that cannot check the order itself
    (``checks_time_order``), and when a task refused a time, to name the one local mode
    names, whichever task failed first."""
    q = compiled.query
    frame = ev.frame
    if q.streams is not None:
        frame = frame.filter(column(STREAM).isin(list(q.streams)))
    nparts = ranges or run.spark.sparkContext.defaultParallelism
    tasks, back = _arrow_safe(_position_ranges(run, q, ev, frame, nparts))
    found = tasks.mapInArrow(_check_times(compiled, back), ERROR_SCHEMA).collect()
    if not found:
        return None
    return decode_query_error(min(found, key=lambda r: r[0])[1])


def _check_times(compiled: Plan, names_back: dict[str, str]):
    """``first_refused_time``'s ``mapInArrow`` function: per range, the first refused window
    time's error (``ERROR_SCHEMA``), if any."""
    q, groups = compiled.query, compiled.partition_by

    def run(batches):
        import pyarrow as pa

        group, earlier, failed = None, None, False
        for frame in _frames(batches, TASK_ROWS):
            if names_back:
                frame = frame.rename(names_back)
            for part in frame.partition_by(_GROUP, maintain_order=True):
                if part[_GROUP][0] != group:
                    group, earlier, failed = part[_GROUP][0], None, False
                if failed:
                    continue
                events = part.drop(_GROUP, _OWN, _QPOS, strict=False)
                try:
                    _, earlier = prepare_frame(events, None, groups, q.within, earlier,
                                               _KEY, _WTIME)
                except QueryError as e:
                    failed = True
                    yield pa.RecordBatch.from_pydict({"position": [e.position],
                                                      "error": [encode_query_error(e)]})

    return run


_WTIME = "__cer_wtime"


def time_ranges(compiled: Plan, ev: Events) -> bool:
    """Whether a ``ranges`` fan-out can cut ``ev`` (events without POS) by time: its window
    measures TIME (a duration, or the logs' one time column as an attribute), and the logs'
    time span is known. Otherwise the ranges are cut by position, which needs POS."""
    w = compiled.query.within
    known = all(g.rows is not None and g.rows.low is not None for g in ev.logs)
    if isinstance(w, ast.DurationWindow):
        return known and ev.time_column is not None
    return (isinstance(w, ast.AttributeWindow) and known
            and ev.time_columns == (w.attr,))


def _time_ranges(compiled: Plan, ev: Events, frame: DataFrame, nparts: int) -> DataFrame:
    """The ``ranges`` fan-out cut by time (``time_ranges``): range k owns the events whose
    TIME lies in [low + k·width, low + (k+1)·width), and its context is the events of
    earlier ranges within the window's bound of that start. A match ending in range k
    starts at most the bound before its end, so its events are all there; equal times
    share a range. The span comes from the aggregation that checked the logs' rows, so
    cutting takes no pass; the ranges are as even as the times."""
    from pyspark.sql import functions as F

    low = min(g.rows.low for g in ev.logs)
    high = max(g.rows.high for g in ev.logs)
    _, bound = window_source(compiled.query.within, frame.columns, True)
    exact = isinstance(low, int) and isinstance(high, int) and float(bound).is_integer()
    if exact:
        bound = int(bound)
    else:  # float times: some room for rounding (a wider context changes no match)
        bound = float(bound) * (1 + 1e-9) + 1e-9 * max(abs(low), abs(high), 1)
    span = high - low
    r = max(1, min(nparts, int(span // bound) if bound > 0 else nparts))
    if exact:  # integer division: exact on ns since the epoch, which a double is not
        width = span // r + 1

        def index(x: str):
            return F.expr(f"({x} - {low}) div {width}").cast("int")
    else:
        width = span / r or 1.0

        def index(x: str):
            return F.floor((F.expr(x) - F.lit(low)) / F.lit(width)).cast("int")
    t = f"`{TIME}`"
    first = F.least(index(t), F.lit(r - 1))
    last = F.least(index(f"{t} + {bound!r}"), F.lit(r - 1))
    # each range's group id hashes to a Spark partition of its own (no two share a core)
    label = F.element_at(F.array(*map(F.lit, spread(r))), F.col(_K) + 1)
    return (frame.withColumn(_FIRST, first)
            .withColumn(_K, F.explode(F.sequence(F.col(_FIRST), F.greatest(first, last))))
            .withColumns({_GROUP: label, _OWN: F.col(_FIRST) == F.col(_K)})
            .drop(_FIRST, _K).repartition(r, _GROUP).sortWithinPartitions(_GROUP, *ORDER))


_FIRST, _K = "__cer_first", "__cer_k"  # an event's own range, and each range it is in


def spread(r: int) -> list[int]:
    """``r`` ints that Spark's hash partitioning into ``r`` partitions (Murmur3 with seed
    42, as ``pmod(hash(x), r)``) sends to ``r`` different partitions: the ranges' ids."""
    labels, taken, x = [], set(), 0
    while len(labels) < r:
        p = _murmur3_int(x) % r
        if p not in taken:
            taken.add(p)
            labels.append((p, x))
        x += 1
    return [x for _, x in sorted(labels)]


def _murmur3_int(k: int, seed: int = 42) -> int:
    """Spark's ``Murmur3_x86_32.hashInt`` (``F.hash`` of an int column), signed."""
    mask = 0xFFFFFFFF
    k1 = (k & mask) * 0xCC9E2D51 & mask
    k1 = ((k1 << 15) | (k1 >> 17)) & mask
    k1 = k1 * 0x1B873593 & mask
    h1 = (seed & mask) ^ k1
    h1 = ((h1 << 13) | (h1 >> 19)) & mask
    h1 = (h1 * 5 + 0xE6546B64) & mask
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & mask
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


def _arrow_safe(tasks: DataFrame) -> tuple[DataFrame, dict[str, str]]:
    """``tasks`` with its columns whose name holds a dot or a back-quote (a log's ``a.b``)
    renamed ``_ATTR`` and their index, and the names to give them back. PySpark's
    ``mapInArrow`` takes its input columns as ``df[name]``, which reads ``a.b`` as field
    ``b`` of a struct ``a``: the run failed "cannot resolve `a`.`b`" where local mode ran."""
    names = [f"{_ATTR}{i}" if "." in c or "`" in c else c for i, c in enumerate(tasks.columns)]
    back = {n: c for n, c in zip(names, tasks.columns, strict=True) if n != c}
    return (tasks.toDF(*names) if back else tasks), back


def find_matches(run: Run, compiled: Plan, ev: Events, ranges: int | None) -> DataFrame:
    """The match rows (``MATCH_SCHEMA``) of the events ``ev`` (numbered by POS)."""
    tasks, back = _arrow_safe(_tasks(run, compiled, ev, ranges))
    # Persisted: sorting by end samples its input first, which would run the engines twice.
    return run.persist(tasks.mapInArrow(_task(compiled, names_back=back), MATCH_SCHEMA))


def count_matches(run: Run, compiled: Plan, ev: Events, ranges: int | None) -> int:
    """How many matches the events ``ev`` hold: each task counts its own (the engines count
    without enumerating where they can), the driver adds the few counts up."""
    tasks, back = _arrow_safe(_tasks(run, compiled, ev, ranges))
    return sum(int(r[0]) for r in tasks.mapInArrow(_task(compiled, count=True, names_back=back),
                                                   COUNT_SCHEMA).collect())
