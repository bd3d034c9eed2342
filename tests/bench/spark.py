"""Spark figures of issue #15, side by side in one run: `cer match --spark --count` against a
trivial Spark job (``SparkSession`` + ``range(10).count()``, the floor of any Spark run on
this machine) and against `cer match --count` in one local process, on the same CSV log.

Groups (``run.py --groups``):

* ``spark`` — 3,000 events, ``A ; B ; C PARTITION BY [id] WITHIN 10 [ts]`` with 10 keys
  (target: ≤ 2× the trivial job).
* ``spark-big`` — ``--spark-sizes`` events (1M by default; add 10M with
  ``--spark-sizes 1000000,10000000``): PARTITION BY with 10 and 100,000 keys, and the
  time-range split (``A ; B ; C WITHIN 10 [ts]``, no PARTITION BY); events/s and the ratio to
  local (target at 1M: ≤ 1.5× local).

Every figure is the median wall time of ``repeats`` whole processes after one warm-up run
(``startup.measure``); the report prints each command.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from tests.bench import harness as h
from tests.bench.startup import Figure, measure

SMALL = "spark"
BIG = "spark-big"
GROUPS = (SMALL, BIG)
MASTER = "local[2]"
PARTITIONED = "A ; B ; C PARTITION BY [id] WITHIN 10 [ts]"
RANGES = "A ; B ; C WITHIN 10 [ts]"
TRIVIAL = ("import sys; from pyspark.sql import SparkSession; "
           "s = SparkSession.builder.master(sys.argv[1]).getOrCreate(); "
           "print(s.range(10).count())")


def ensure_log(out: Path, n: int, keys: int, seed: int) -> Path:
    """A CSV log of ``n`` events: ``type`` uniform over A–D, ``ts`` = 0, 1, 2, …, ``id``
    uniform over ``keys`` values."""
    path = out / f"spark_{n}_{keys}_{seed}.csv"
    if not path.exists():
        rng = np.random.default_rng(seed + 11)
        df = pl.DataFrame({"type": np.array(list("ABCD"))[rng.integers(0, 4, n)],
                           "ts": np.arange(n, dtype=np.int64),
                           "id": rng.integers(0, keys, n)})
        tmp = path.with_suffix(".tmp")
        df.write_csv(tmp)
        tmp.replace(path)
    return path


@dataclass
class Case:
    """One Spark workload: the Spark run, the local run and the events."""

    name: str
    events: int
    spark: Figure
    local: Figure
    baseline: Figure | None = None


def run(groups: set[str], data: Path, seed: int, repeats: int, timeout: float,
        sizes: tuple[int, ...], master: str = MASTER, baseline: Path | None = None
        ) -> tuple[Figure, list[Case]]:
    """The trivial job and every case; with ``baseline`` (another cer source tree) also its
    Spark figure for the small case, as ``python -m cer_cli`` run there."""
    cer = h.cer_command()
    trivial = measure(f"trivial Spark job ({master}: SparkSession + range(10).count())",
                      [sys.executable, "-c", TRIVIAL, master], repeats, timeout)
    work: list[tuple[str, int, int, str]] = []
    if SMALL in groups:
        work.append(("PARTITION BY [id], 10 keys", 3000, 10, PARTITIONED))
    if BIG in groups:
        for n in sizes:
            work += [("PARTITION BY [id], 10 keys", n, 10, PARTITIONED),
                     ("PARTITION BY [id], 100,000 keys", n, 100_000, PARTITIONED),
                     ("time ranges (no PARTITION BY)", n, 10, RANGES)]
    cases = []
    for what, n, keys, query in work:
        log = ensure_log(data, n, keys, seed)
        print(f"[spark] {what}, {n:,} events", flush=True)
        base = ["match", "-e", query, str(log), "--count"]
        spark = measure(f"cer match --spark --master {master} --count: {what}, {n:,} events",
                        cer + base + ["--spark", "--master", master], repeats, timeout)
        local = measure(f"cer match --count (local): {what}, {n:,} events", cer + base,
                        repeats, timeout)
        for f in (spark, local):
            print(f"    {f.name}: {f.error or f'{f.seconds:.2f} s, {f.output} matches'}",
                  flush=True)
        if spark.output and local.output and spark.output != local.output:
            spark.error = f"match count {spark.output} differs from local {local.output}"
        before = None
        if baseline is not None and n <= 10_000:
            before = measure(f"baseline {baseline}: cer match --spark --count: {what}, {n:,} events",
                             [sys.executable, "-m", "cer_cli"] + base
                             + ["--spark", "--master", master], repeats, timeout, baseline)
            print(f"    {before.name}: {before.error or f'{before.seconds:.2f} s'}", flush=True)
        cases.append(Case(what, n, spark, local, before))
    return trivial, cases


def _secs(f: Figure) -> str:
    return f"{f.seconds:.2f}" if f.seconds is not None else f"failed: {f.error}"


def _x(a: Figure, b: Figure) -> str:
    return "–" if a.seconds is None or not b.seconds else f"{a.seconds / b.seconds:.2f}×"


def _eps(n: int, f: Figure) -> str:
    if not f.seconds:
        return "–"
    eps = n / f.seconds
    return f"{eps / 1e3:,.0f}k" if eps >= 10_000 else f"{eps:,.0f}"


def report(trivial: Figure, cases: list[Case], repeats: int) -> list[str]:
    lines = [f"Medians of {repeats} runs (after one warm-up run), wall time of the whole "
             "process; the trivial job is the floor of any Spark run here "
             f"({_secs(trivial)} s).", "",
             "| workload | events | matches | Spark s | local s | Spark e/s | Spark / trivial "
             "job | Spark / local |", "|---|---|---|---|---|---|---|---|"]
    for c in cases:
        target = " (target ≤ 2×)" if c.events <= 10_000 else ""
        lines.append(
            f"| {c.name} | {c.events:,} | {c.spark.output or c.local.output or '–'} | "
            f"{_secs(c.spark)} | {_secs(c.local)} | {_eps(c.events, c.spark)} | "
            f"{_x(c.spark, trivial)}{target} | {_x(c.spark, c.local)}"
            f"{' (target ≤ 1.5× at 1M)' if c.events >= 1_000_000 else ''} |")
        if c.baseline is not None:
            lines.append(f"| {c.name}, baseline | {c.events:,} | {c.baseline.output or '–'} | "
                         f"{_secs(c.baseline)} | | | {_x(c.baseline, trivial)} | "
                         f"{_x(c.baseline, c.local)} |")
    lines += ["", "Commands:", ""]
    figs = [trivial] + [f for c in cases for f in (c.spark, c.local, c.baseline) if f]
    lines += [f"- `{'cd ' + str(f.cwd) + ' && ' if f.cwd else ''}"
              f"{' '.join(_quote(a) for a in f.command)}`" for f in figs]
    return lines


def _quote(arg: str) -> str:
    return repr(arg) if any(c in arg for c in " ;'[]<>()") else arg
