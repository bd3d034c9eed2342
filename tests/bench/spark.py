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

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def standalone_cluster(work: Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                       timeout: float = 60) -> Iterator[str]:
    """A standalone Spark master and ``workers`` workers of ``cores`` cores each on
    127.0.0.1, run from pyspark's own jars (a Spark home of them: ``RELEASE`` tells the
    workers' launcher to use ``jars/``); yields the master URL and stops them all after."""
    import pyspark

    home = work / "spark_home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "RELEASE").write_text("Spark (pyspark jars)\n")
    if not (home / "jars").exists():
        (home / "jars").symlink_to(Path(pyspark.__file__).parent / "jars")
    jars = str(home / "jars" / "*")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_SCALA_VERSION": "2.13",
           "PYSPARK_PYTHON": sys.executable}
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []

    def start(name: str, cls: str, *args: str, ready: str) -> None:
        log = work / f"{name}.log"
        p = subprocess.Popen(["java", "-cp", jars, cls, *args], stdout=log.open("w"),
                             stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL)
        procs.append(p)
        deadline = time.monotonic() + timeout
        while ready not in log.read_text(errors="replace"):
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start: "
                                   f"{log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.3)

    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
              "--port", str(port), "--webui-port", str(_free_port()),
              ready="I have been elected leader")
        for i in range(workers):
            start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", url, "--host",
                  "127.0.0.1", "--cores", str(cores), "--memory", memory, "--webui-port",
                  str(_free_port()), "--work-dir", str(work / f"work{i}"),
                  ready="Successfully registered with master")
        yield url
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def cluster_conf(executor_memory: str = "768m") -> list[str]:
    """``--spark-conf`` arguments of a run on ``standalone_cluster``: the executors run this
    Python, each in a JVM of ``executor_memory`` (within a worker's memory)."""
    return ["--spark-conf", f"spark.pyspark.python={sys.executable}",
            "--spark-conf", f"spark.executor.memory={executor_memory}"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


# ----------------------------------------------------------------------------- passes


def profile(query: str, log: str, how: str, master: str = MASTER, out: Path | None = None
            ) -> tuple[list[tuple[str, float]], list[dict]]:
    """Run ``query`` over ``log`` on Spark in this process, as ``cer match --spark`` does
    (``how``: ``count``, ``print``: the matches streamed to the driver, ``write``: an
    ``-o`` Parquet directory ``out``), and return the driver's steps ``(what, seconds)``
    and every Spark job of the run from the UI's REST API: id, call site (the pass), wall
    seconds, the tasks' summed run time (CPU-ish) and task count."""
    import json
    import urllib.request

    from cer_cli.api import compile_query
    from cer_cli.plan import read_attributes
    from cer_cli.query.parser import parse
    from cer_cli.spark.job import spark_count, spark_match, spark_schema, spark_session, spark_write

    steps: list[tuple[str, float]] = []
    t = time.perf_counter()

    def step(what: str) -> None:
        nonlocal t
        now = time.perf_counter()
        steps.append((what, now - t))
        t = now

    spark = spark_session(master)
    step("session (JVM start-up)")
    compiled = compile_query(query, spark_schema([log], master=master,
                                                 columns=read_attributes(parse(query))))
    step("schema pass + compile")
    if how == "count":
        result = spark_count(compiled, [log], master=master)
    elif how == "print":
        result = sum(1 for _ in spark_match(compiled, [log], master=master))
    else:
        result = spark_write(compiled, [log], str(out), "parquet", master=master)
    step(f"{how} ({result} matches)")
    ui = spark.sparkContext.uiWebUrl
    app = spark.sparkContext.applicationId

    def get(path: str):
        with urllib.request.urlopen(f"{ui}/api/v1/applications/{app}/{path}") as r:
            return json.load(r)

    jobs = []
    for j in sorted(get("jobs"), key=lambda j: j["jobId"]):
        stages = [s for sid in j["stageIds"] for s in get(f"stages/{sid}")
                  if s.get("status") != "SKIPPED"]
        jobs.append({"job": j["jobId"], "pass": j["name"].split(" at ")[0] + " at "
                     + j["name"].rsplit("/", 1)[-1],
                     "seconds": _span(j), "task_s": sum(s["executorRunTime"] for s in stages) / 1e3,
                     "tasks": sum(s["numTasks"] for s in stages),
                     "stages": [(s["stageId"], s["name"].split(" at ")[0], s["numTasks"],
                                 s["executorRunTime"] / 1e3, s["executorCpuTime"] / 1e9,
                                 s.get("shuffleWriteBytes", 0) >> 20) for s in stages]})
    return steps, jobs


def _span(job: dict) -> float:
    from datetime import datetime

    def at(s: str) -> datetime:
        return datetime.strptime(s.replace("GMT", ""), "%Y-%m-%dT%H:%M:%S.%f")

    if "completionTime" not in job:
        return float("nan")
    return (at(job["completionTime"]) - at(job["submissionTime"])).total_seconds()


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(description="the Spark jobs (passes) of one cer run, timed")
    p.add_argument("how", choices=("count", "print", "write"))
    p.add_argument("log")
    p.add_argument("query")
    p.add_argument("--master", default=MASTER)
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    driver, passes = profile(a.query, a.log, a.how, a.master, a.out)
    for what, s in driver:
        print(f"driver  {s:7.2f} s  {what}")
    for j in passes:
        print(f"job {j['job']:3d} {j['seconds']:7.2f} s  tasks {j['task_s']:7.2f} s"
              f" ({j['tasks']} tasks)  {j['pass']}")
        for sid, name, n, run_s, cpu_s, mb in j["stages"]:
            print(f"    stage {sid}: {name}, {n} tasks, run {run_s:.2f} s, JVM CPU {cpu_s:.2f} s,"
                  f" shuffle write {mb} MB")
