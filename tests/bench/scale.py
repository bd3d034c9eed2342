"""Issue #23's ``scale`` group: one fan-out, several runners, side by side in one run.

A seeded Parquet log of ``--scale-size`` events (10M by default; ``type`` uniform over A–D,
``ts`` = 0, 1, 2, …, and key columns ``k10``, ``k100``, ``k100000`` with that many keys)
and four queries: ``PARTITION BY`` with 10, 100 and 100,000 keys (``A ; B ; C … WITHIN 10
EVENTS``) and the time-range split (``A ; B ; C WITHIN 10 [ts]``, no PARTITION BY). Each
runner of ``RUNNERS`` runs each query as a whole ``cer match --count`` process; the report
gives the wall time, events/s per core, the speed-up over the single core, the count (it must
be the same for every runner) and the peak RSS.

With ``spark_repeats`` (``run.py --spark-repeats``; 0 leaves them out) the Spark rows join
the table (``spark_runners``): ``--spark`` with ``local[1]``, ``local[2]`` and a standalone
master with two one-core workers on 127.0.0.1 (``spark.standalone_cluster``, started for the
run and stopped after), each beside the trivial Spark job on the same master, whose time is
the fixed start-up subtracted for the events/s per core after start-up (``spark_report``).

The 100-key query also runs with ``-o out.parquet`` instead of ``--count`` on the local
runners (``WRITE``): the pool's merge and the writers, the outputs compared by ``digest``.

Plus the "close to the physical limit" figure: ``cer match --count`` of ``A ; B ; C WITHIN
10 [t]`` on a CSV of the same size against a polars process that reads the CSV and counts
the three types.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from tests.bench import harness as h
from tests.bench import spark as spark_bench
from tests.bench.startup import _quote, ensure_csv

GROUP = "scale"
DEFAULT_SIZE = 10_000_000
KEYS = (10, 100, 100_000)
SELECT = "SELECT * WHERE A AS a ; B AS b ; C AS c"
QUERIES = (
    *((f"{k:,} keys", f"{SELECT} PARTITION BY k{k} WITHIN 10 EVENTS") for k in KEYS),
    ("time ranges", f"{SELECT} WITHIN 10 [ts]"),
)


@dataclass(frozen=True)
class Runner:
    """How a row runs ``cer match``: extra arguments and the cores it may use (events/s are
    divided by them)."""

    name: str
    args: tuple[str, ...]
    cores: int


#: The runners of the table, the single core first (the speed-ups are against it).
RUNNERS: list[Runner] = [
    Runner("1 core (--jobs 1)", ("--jobs", "1"), 1),
    Runner("--jobs 2", ("--jobs", "2"), 2),
    # the Spark rows are appended by `run` (`spark_runners`): the cluster needs a set-up
]


@dataclass(frozen=True)
class SparkRunner(Runner):
    """A Spark row: ``master`` also runs the trivial Spark job, the run's fixed start-up."""

    master: str = ""


#: The Spark rows' workers: a standalone master with this many workers of one core each.
WORKERS = 2


@contextmanager
def spark_runners(data: Path, on: bool) -> Iterator[list[SparkRunner]]:
    """The Spark rows (none unless ``on``): ``local[1]``, ``local[2]``, and a standalone
    cluster of ``WORKERS`` one-core workers on 127.0.0.1, running while the rows run."""
    if not on:
        yield []
        return
    rows = [SparkRunner(f"--spark local[{n}]", ("--spark", "--master", f"local[{n}]"), n,
                        f"local[{n}]") for n in (1, 2)]
    with tempfile.TemporaryDirectory(prefix="cer-bench-cluster-", dir=data) as work, \
            spark_bench.standalone_cluster(Path(work), workers=WORKERS, cores=1,
                                           memory="2g") as url:
        yield [*rows, SparkRunner(f"--spark standalone, {WORKERS} one-core workers",
                                  ("--spark", "--master", url, *spark_bench.cluster_conf()),
                                  WORKERS, url)]


TRIVIAL = "trivial Spark job"
#: The row that writes its matches (``-o`` Parquet) instead of counting them: the pool's
#: merge and the writers at work (local runners only).
WRITE = "100 keys, -o Parquet"
WRITE_QUERY = dict(QUERIES)["100 keys"]


def digest(path: Path) -> str:
    """Rows and an order-sensitive digest of a Parquet output (each row hashed with its
    index, the hashes summed), so two runners' outputs compare without loading both."""
    lf = pl.scan_parquet(path)
    cols = lf.collect_schema().names()
    rows, total = lf.select(
        pl.len(), pl.struct(*cols, pl.int_range(pl.len()).alias("__row")).hash()
        .mod(1 << 32).sum()).collect().row(0)
    return f"{rows:,} rows, digest {total:x}"

#: polars' side of the physical limit: read the CSV, count the three types
POLARS_COUNT = ("import sys, polars as pl; t = pl.col('type'); "
                "print(pl.read_csv(sys.argv[1]).select(*((t == x).sum().alias(x) for x in 'ABC'))"
                ".row(0))")
LIMIT_QUERY = "A ; B ; C WITHIN 10 [t]"


@dataclass
class Cell:
    query: str
    runner: Runner
    command: list[str]
    seconds: float | None = None
    count: str = ""
    rss_mb: float | None = None
    error: str | None = None
    times: list[float] = field(default_factory=list)


def ensure_parquet(out: Path, n: int, seed: int) -> Path:
    path = out / f"scale_{n}_{seed}.parquet"
    if not path.exists():
        rng = np.random.default_rng(seed + 23)
        cols = {"type": np.array(list("ABCD"))[rng.integers(0, 4, n)],
                "ts": np.arange(n, dtype=np.int64)}
        cols |= {f"k{k}": rng.integers(0, k, n, dtype=np.int64) for k in KEYS}
        tmp = path.with_suffix(".tmp")
        pl.DataFrame(cols).write_parquet(tmp)
        tmp.replace(path)
    return path


def run(data: Path, size: int, seed: int, repeats: int, timeout: float,
        spark_repeats: int = 0) -> tuple[list[Cell], list[Cell]]:
    """Every (query, runner) cell, interleaved round by round (the machine is shared: a
    change of its load hits every cell alike); then the physical-limit pair. The Spark
    cells (``spark_repeats`` > 0) and each Spark master's trivial job run in the first
    ``spark_repeats`` rounds after the warm-up (a Spark run is a fresh JVM: no warm-up)."""
    data.mkdir(parents=True, exist_ok=True)
    log = ensure_parquet(data, size, seed)
    cer = h.cer_command()
    with spark_runners(data, spark_repeats > 0) as spark:
        cells = [Cell(name, r, [*cer, "match", "-e", q, str(log), "--count", *r.args])
                 for name, q in QUERIES for r in [*RUNNERS, *spark]]
        cells += [Cell(TRIVIAL, r, [sys.executable, "-c", spark_bench.TRIVIAL, r.master])
                  for r in spark]
        writes = [Cell(WRITE, r, [*cer, "match", "-e", WRITE_QUERY, str(log), "-o",
                                  str(data / f"scale_out_{i}.parquet"), *r.args])
                  for i, r in enumerate(RUNNERS)]
        cells += writes
        _measure(cells, repeats, timeout, spark_repeats)
        for c in writes:  # the outputs, compared: rows and an order-sensitive digest
            if c.error is None:
                out = Path(c.command[c.command.index("-o") + 1])
                c.count = digest(out)
                out.unlink()
    csv = ensure_csv(data, size, seed)
    limit = [Cell("physical limit", Runner("cer match --count", (), 1),
                  [*cer, "match", "-e", LIMIT_QUERY, str(csv), "--count"]),
             Cell("physical limit", Runner("polars: read, count types", (), 1),
                  [sys.executable, "-c", POLARS_COUNT, str(csv)])]
    _measure(limit, repeats, timeout)
    return cells, limit


def _measure(cells: list[Cell], repeats: int, timeout: float, spark_repeats: int = 0) -> None:
    for i in range(repeats + 1):  # round 0 warms up (numba's cache, the page cache)
        for c in cells:
            if c.error or (isinstance(c.runner, SparkRunner) and not 0 < i <= spark_repeats):
                continue
            print(f"[scale] {c.query}, {c.runner.name}" + (" (warm-up)" if not i else ""),
                  flush=True)
            p = h.spawn(c.command, timeout)
            if p.rc or p.timed_out:
                c.error = h._reason(p)
                continue
            c.count = p.stdout.strip()
            c.rss_mb = max(c.rss_mb or 0, p.rss_mb)
            if i:
                c.times.append(p.wall_s)
    for c in cells:
        if c.times:
            c.seconds = statistics.median(c.times)


def report(cells: list[Cell], limit: list[Cell], size: int, repeats: int) -> list[str]:
    """Markdown lines: the runners' table, the physical-limit ratio, the commands."""
    lines = [f"{size:,} events (Parquet), `cer match --count`, medians of {repeats} interleaved"
             " whole-process runs after a warm-up round. events/s per core = events / seconds /"
             " the runner's cores; speed-up against the single core on the same query. The"
             f" rows `{WRITE}` write the matches instead (`-o out.parquet`); their count is the"
             " output's rows and an order-sensitive digest, equal for equal files.",
             "", "| query | runner | seconds | events/s per core | speed-up | count | peak RSS MB |",
             "|---|---|---|---|---|---|---|"]
    one = {c.query: c for c in cells if c.runner is RUNNERS[0]}
    for c in cells:
        if c.query == TRIVIAL:
            continue
        if c.seconds is None:
            lines.append(f"| {c.query} | {c.runner.name} | failed: {c.error} | | | | |")
            continue
        base = one[c.query]
        speed = f"{base.seconds / c.seconds:.2f}×" if base.seconds else "–"
        same = "" if c.count == base.count else " (DIFFERS)"
        lines.append(f"| {c.query} | {c.runner.name} | {c.seconds:.2f} |"
                     f" {size / c.seconds / c.runner.cores:,.0f} | {speed} | {c.count}{same} |"
                     f" {c.rss_mb:,.0f} |")
    lines += spark_report(cells, size)
    cer, polars = limit
    ratio = (f"{cer.seconds / polars.seconds:.2f}×" if cer.seconds and polars.seconds else "–")
    lines += ["", f"Close to the physical limit ({size:,}-event CSV): `cer match --count`"
              f" {_secs(cer)} against polars reading it and counting the three types"
              f" {_secs(polars)}: {ratio} (target ≤ 3×).", "", "Commands:", ""]
    lines += [f"- `{' '.join(_quote(a) for a in c.command)}`" for c in cells + limit]
    return lines


def agree(cells: list[Cell]) -> bool:
    """Every runner counted what the single core counted."""
    one = {c.query: c.count for c in cells if c.runner is RUNNERS[0]}
    return all(c.count == one[c.query] for c in cells
               if c.seconds is not None and c.query != TRIVIAL)


def spark_report(cells: list[Cell], size: int) -> list[str]:
    """The Spark rows against their fixed start-up (the trivial job on the same master, in
    the same rounds): seconds after it, events/s per core after it and its ratio to the
    single core's, the speed-up after start-up over ``local[1]``, and the targets' ratios
    (``local[2]`` ≤ 1.5× the single core, ≤ 2× on time ranges; the cluster ≤ 1.2×
    ``local[2]``; per core after start-up ≥ 1/3 of local's)."""
    spark = [c for c in cells if isinstance(c.runner, SparkRunner)]
    if not spark:
        return []
    trivial = {c.runner: c for c in spark if c.query == TRIVIAL}
    one = {c.query: c for c in cells if c.runner is RUNNERS[0]}
    by = {(c.query, c.runner.master): c for c in spark}
    lines = ["", "Spark rows after the fixed start-up: the trivial Spark job (SparkSession +"
             " `range(10).count()`) on the same master, in the same rounds: "
             + "; ".join(f"{r.name} {_secs(t)}" for r, t in trivial.items()) + ".", "",
             "| query | runner | seconds | after start-up s | events/s per core after"
             " start-up | per core vs local 1 core | speed-up over local[1] after start-up |"
             " vs local 1 core (wall) | vs local[2] (wall) |", "|---|---|---|---|---|---|---|---|---|"]
    for c in spark:
        t = trivial.get(c.runner)
        if c.query == TRIVIAL or c.seconds is None or t is None or t.seconds is None:
            continue
        after = c.seconds - t.seconds
        base, first = one[c.query], by.get((c.query, "local[1]"))
        eps = size / after / c.runner.cores if after > 0 else None
        local_eps = size / base.seconds if base.seconds else None
        first_after = (first.seconds - trivial[first.runner].seconds
                       if first and first.seconds and trivial[first.runner].seconds else None)
        if first_after is not None and first_after <= 0:  # the load changed between them
            first_after = None
        two = by.get((c.query, "local[2]"))
        lines.append(
            f"| {c.query} | {c.runner.name} | {c.seconds:.2f} | {after:.2f} |"
            f" {_n(eps)} | {_ratio(eps, local_eps)} |"
            f" {_ratio(first_after, after if after > 0 else None)} |"
            f" {_ratio(c.seconds, base.seconds)} |"
            f" {_ratio(c.seconds, two.seconds if two else None)} |")
    return lines


def _n(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if a is None or not b else f"{a / b:.2f}×"


def _secs(c: Cell) -> str:
    return f"{c.seconds:.2f} s" if c.seconds is not None else f"failed ({c.error})"
