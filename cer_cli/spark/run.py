"""What a Spark run holds and how it numbers rows: ``Run`` persists what the run reuses
(and releases it at the end), sizes the shuffles to the logs, and numbers rows 0.. in an
order (events by POS, matches by their end) without collecting them to the driver."""

from __future__ import annotations

import math
from itertools import accumulate
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


#: A row's id while it is numbered (``monotonically_increasing_id``).
MID = "__cer_mid"
#: Bytes of local log per shuffle partition (``Run.size_shuffles``): Spark's advisory
#: partition size.
SHUFFLE_BYTES = 64 << 20


class Run:
    """Holds what a run persisted, to release it at the end.

    A ``lazy`` run (``cer_cli.spark.match``) builds its result without any action: it
    persists nothing (a lazy result has no end at which to unpersist), numbers rows by a
    join with per-partition counts instead of collecting them, and reports bad rows by
    ``raise_error`` when the result is computed instead of by a look-up up front."""

    def __init__(self, spark: SparkSession, lazy: bool = False) -> None:
        self.spark = spark
        self.lazy = lazy
        self.cached: list[DataFrame] = []
        self.restore: dict[str, str] = {}

    def size_shuffles(self, size: int | None) -> None:
        """Shuffle into as many partitions as the logs need, not Spark's fixed 200: every
        sort and repartition of a run is a stage of that many tasks, and AQE cannot
        coalesce the persisted ones (``canChangeCachedPlanOutputPartitioning``). On the
        3,000-event bench log those stages took ~12 of ~22 s on 2 cores. The setting is
        left alone when the user gave it (``--spark-conf``, spark-defaults, a session
        that changed it) or a log is not a local file (``size``, the logs' bytes, is
        None), and restored by ``close``."""
        key = "spark.sql.shuffle.partitions"
        if self.lazy or self.spark.sparkContext.getConf().contains(key):
            return
        current = self.spark.conf.get(key, "200")
        if current != "200" or size is None:
            return
        parallelism = self.spark.sparkContext.defaultParallelism
        self.restore[key] = current
        self.spark.conf.set(key, str(max(parallelism, math.ceil(size / SHUFFLE_BYTES))))

    def persist(self, df: DataFrame) -> DataFrame:
        """``df`` kept for the rest of the run: on disk with a local master, whose tasks
        run in the driver's JVM (a frame of the log's size kept in its memory crowded out
        the rest: the 1 GB default heap failed a 10M-event run); in the executors' memory,
        or disk, on a cluster."""
        if self.lazy:
            return df
        from pyspark import StorageLevel

        local = self.spark.sparkContext.master.startswith("local")
        df = df.persist(StorageLevel.DISK_ONLY if local else StorageLevel.MEMORY_AND_DISK)
        self.cached.append(df)
        return df

    def close(self) -> None:
        """Release what the run persisted. Best effort: Spark may have stopped under the
        run (its failure is what the caller reports, not this)."""
        try:
            for df in self.cached:
                df.unpersist()
            for k, v in self.restore.items():
                self.spark.conf.set(k, v)
        except Exception:
            pass

    def rank(self, df: DataFrame, name: str, *order) -> tuple[DataFrame, int | None]:
        """Number the rows 0.. in ``order``. A lazy run ranks in one window: numbering a
        sorted frame by partition offsets reads the sort twice, and each read samples its
        own range bounds (seeded by the RDD's id), so offsets and rows would disagree."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        if not self.lazy:
            return self.index(df.orderBy(*order), name)
        return df.withColumn(name, F.row_number().over(Window.orderBy(*order)) - 1), None

    def index(self, df: DataFrame, name: str) -> tuple[DataFrame, int | None]:
        """Number the rows 0.. in partition order: per-partition counts become offsets
        (the count is None for a lazy run, which never collects them)."""
        from pyspark.sql import functions as F

        if self.lazy:
            return _number(df, name), None
        df = self.persist(df.withColumn(MID, F.monotonically_increasing_id()))
        pid = F.shiftright(F.col(MID), 33)  # monotonically_increasing_id's partition bits
        counts = dict(df.groupBy(pid.alias("p")).count().collect())
        nparts = df.rdd.getNumPartitions()
        offsets = list(accumulate((counts.get(p, 0) for p in range(nparts)), initial=0))
        table = F.array(*(F.lit(o).cast("long") for o in offsets[:-1]))
        value = F.element_at(table, (pid + 1).cast("int")) + F.col(MID) - F.shiftleft(pid, 33)
        return df.withColumn(name, value).drop(MID), offsets[-1]


def _number(df: DataFrame, name: str) -> DataFrame:
    """``Run.index`` without an action: the per-partition counts stay a (small) frame whose
    running sum, broadcast and joined back by partition id, gives each row its offset."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    pid, off = "__cer_pid", "__cer_off"
    df = df.withColumn(MID, F.monotonically_increasing_id())
    df = df.withColumn(pid, F.shiftright(F.col(MID), 33))
    counts = df.groupBy(pid).count()
    offsets = counts.select(pid, (F.sum("count").over(Window.orderBy(pid)) - F.col("count"))
                            .alias(off))
    value = F.col(off) + F.col(MID) - F.shiftleft(F.col(pid), 33)
    return (df.join(F.broadcast(offsets), pid).withColumn(name, value)
            .drop(MID, pid, off))
