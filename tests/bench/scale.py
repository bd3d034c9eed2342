"""Issue #23's ``scale`` group: one fan-out, several runners, side by side in one run.

A seeded Parquet log of ``--scale-size`` events (10M by default; ``type`` uniform over A–D,
``ts`` = 0, 1, 2, …, and key columns ``k10``, ``k100``, ``k100000`` with that many keys)
and four queries: ``PARTITION BY`` with 10, 100 and 100,000 keys (``A ; B ; C … WITHIN 10
EVENTS``) and the time-range split (``A ; B ; C WITHIN 10 [ts]``, no PARTITION BY). Each
runner of ``RUNNERS`` runs each query as a whole ``cer match --count`` process; the report
gives the wall time, events/s per core, the speed-up over the single core, the count (it must
be the same for every runner) and the peak RSS.

Plus the "close to the physical limit" figure: ``cer match --count`` of ``A ; B ; C WITHIN
10 [t]`` on a CSV of the same size against a polars process that reads the CSV and counts
the three types.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from tests.bench import harness as h
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
    # SPARK SLOT (issue #23, the Spark half): append the Spark rows here, e.g.
    #   Runner("--spark local[1]", ("--spark", "--master", "local[1]"), 1),
    #   Runner("--spark local[2]", ("--spark", "--master", "local[2]"), 2),
    #   Runner("standalone, 2 one-core workers", ("--spark", "--master", URL), 2),
    # (a runner that needs a set-up, like the standalone cluster, may be appended by `run`).
]

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


def run(data: Path, size: int, seed: int, repeats: int, timeout: float) -> tuple[
        list[Cell], list[Cell]]:
    """Every (query, runner) cell, interleaved round by round (the machine is shared: a
    change of its load hits every cell alike); then the physical-limit pair."""
    data.mkdir(parents=True, exist_ok=True)
    log = ensure_parquet(data, size, seed)
    cer = h.cer_command()
    cells = [Cell(name, r, [*cer, "match", "-e", q, str(log), "--count", *r.args])
             for name, q in QUERIES for r in RUNNERS]
    csv = ensure_csv(data, size, seed)
    limit = [Cell("physical limit", Runner("cer match --count", (), 1),
                  [*cer, "match", "-e", LIMIT_QUERY, str(csv), "--count"]),
             Cell("physical limit", Runner("polars: read, count types", (), 1),
                  [sys.executable, "-c", POLARS_COUNT, str(csv)])]
    for cell_list in (cells, limit):
        _measure(cell_list, repeats, timeout)
    return cells, limit


def _measure(cells: list[Cell], repeats: int, timeout: float) -> None:
    for i in range(repeats + 1):  # round 0 warms up (numba's cache, the page cache)
        for c in cells:
            if c.error:
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
             " the runner's cores; speed-up against the single core on the same query.",
             "", "| query | runner | seconds | events/s per core | speed-up | count | peak RSS MB |",
             "|---|---|---|---|---|---|---|"]
    one = {c.query: c for c in cells if c.runner is RUNNERS[0]}
    for c in cells:
        if c.seconds is None:
            lines.append(f"| {c.query} | {c.runner.name} | failed: {c.error} | | | | |")
            continue
        base = one[c.query]
        speed = f"{base.seconds / c.seconds:.2f}×" if base.seconds else "–"
        same = "" if c.count == base.count else " (DIFFERS)"
        lines.append(f"| {c.query} | {c.runner.name} | {c.seconds:.2f} |"
                     f" {size / c.seconds / c.runner.cores:,.0f} | {speed} | {c.count}{same} |"
                     f" {c.rss_mb:,.0f} |")
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
    return all(c.count == one[c.query] for c in cells if c.seconds is not None)


def _secs(c: Cell) -> str:
    return f"{c.seconds:.2f} s" if c.seconds is not None else f"failed ({c.error})"
