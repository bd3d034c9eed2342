"""Whole-process figures of issue #15, side by side in one run: start-up (`cer --help`,
`cer check`, `cer match` on a 3-row log, against ``python -c "import polars"``) and
`cer match --count` on a CSV log against a polars process that reads the same CSV and counts
the query's atoms. Every figure is the median wall time of ``repeats`` child processes
(``harness.spawn``); the report prints each command so it can be rerun by hand.
"""

from __future__ import annotations

import compileall
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from tests.bench import harness as h

#: the `--count` query: A then a rare B then a rare C within 10 time units
COUNT_QUERY = "A ; B FILTER B[v < 5] ; C FILTER C[v < 5] WITHIN 10 [t]"
#: polars' side of it: read the same CSV, evaluate the atoms, count
POLARS_COUNT = (
    "import sys, polars as pl; df = pl.read_csv(sys.argv[1]); t, v = pl.col('type'), pl.col('v');"
    " print(df.select((t == 'A').sum().alias('a'), ((t == 'B') & (v < 5)).sum().alias('b'),"
    " ((t == 'C') & (v < 5)).sum().alias('c'), pl.len()).row(0))"
)


@dataclass
class Figure:
    name: str
    command: list[str]
    seconds: float | None
    error: str | None = None
    output: str = ""
    cwd: Path | None = None


def ensure_csv(out: Path, n: int, seed: int) -> Path:
    """A CSV log of ``n`` events: ``type`` uniform over A–D, ``t`` = 0, 1, 2, …, ``v``
    uniform in 0–99 (the log README's `--count` figures use)."""
    path = out / f"count_{n}_{seed}.csv"
    if not path.exists():
        rng = np.random.default_rng(seed + 7)
        df = pl.DataFrame({"type": np.array(list("ABCD"))[rng.integers(0, 4, n)],
                           "t": np.arange(n, dtype=np.int64), "v": rng.integers(0, 100, n)})
        tmp = path.with_suffix(".tmp")
        df.write_csv(tmp)
        tmp.replace(path)
    return path


def ensure_tiny(out: Path) -> Path:
    path = out / "tiny.csv"
    if not path.exists():
        path.write_text("type,t,v\nA,0,1\nB,1,2\nC,2,3\n")
    return path


def measure(name: str, cmd: list[str], repeats: int, timeout: float,
            cwd: Path | None = None) -> Figure:
    """Median wall time of ``repeats`` runs of ``cmd`` (after one unmeasured warm-up run,
    which also lets numba fill its cache)."""
    return measure_all([(name, cmd, cwd)], repeats, timeout)[0]


def measure_all(specs: list[tuple[str, list[str], Path | None]], repeats: int,
                timeout: float) -> list[Figure]:
    """``measure`` for several commands, interleaved: each round runs every command once,
    so a change of the machine's load (it is shared) hits all of them alike, not one block."""
    times: list[list[float]] = [[] for _ in specs]
    outs = [""] * len(specs)
    failed: dict[int, Figure] = {}
    for i in range(repeats + 1):
        for j, (name, cmd, cwd) in enumerate(specs):
            if j in failed:
                continue
            proc = h.spawn(cmd, timeout, cwd=cwd or h.REPO)
            if proc.rc != 0 or proc.timed_out:
                failed[j] = Figure(name, cmd, None, error=h._reason(proc), cwd=cwd)
                continue
            outs[j] = proc.stdout.strip()
            if i:
                times[j].append(proc.wall_s)
    return [failed.get(j) or Figure(name, cmd, statistics.median(times[j]), output=outs[j], cwd=cwd)
            for j, (name, cmd, cwd) in enumerate(specs)]


def byte_compile(tree: Path) -> None:
    """Write the bytecode of ``tree``'s cer_cli, as ``pip install`` does for an installed
    package (and as polars' is): the editable install never gets any under
    ``PYTHONDONTWRITEBYTECODE=1``, so every run would recompile its ~80 modules from source
    (about 0.1 s, ``builtins.compile`` in a cProfile of one run), which is not start-up."""
    compileall.compile_dir(str(tree / "cer_cli"), quiet=1)


def run(data: Path, size: int, seed: int, repeats: int = 3, timeout: float = 600.0,
        baseline: Path | None = None) -> list[Figure]:
    """The figures; with ``baseline`` (a source tree of another cer version, e.g. from
    ``git archive``) also its two `cer match` figures, as ``python -m cer_cli`` run there."""
    cer = h.cer_command()
    py = sys.executable
    for tree in (h.REPO, baseline):
        if tree is not None:
            byte_compile(tree)
    tiny = ensure_tiny(data)
    log = ensure_csv(data, size, seed)
    base = []
    if baseline is not None:
        bcer = [py, "-m", "cer_cli"]
        base = [
            (f"baseline {baseline}: cer match, 3-row log",
             bcer + ["match", "-e", "A ; B ; C", str(tiny)], baseline),
            (f"baseline {baseline}: cer match --count, {size:,}-row CSV",
             bcer + ["match", "-e", COUNT_QUERY, str(log), "--count"], baseline),
        ]
    return measure_all(base + [
        ("python -c 'import polars'", [py, "-c", "import polars"], None),
        ("cer --help", cer + ["--help"], None),
        ("cer check (query only)", cer + ["check", "-e", "A ; B ; C"], None),
        ("cer match, 3-row log", cer + ["match", "-e", "A ; B ; C", str(tiny)], None),
        (f"cer match --count, {size:,}-row CSV",
         cer + ["match", "-e", COUNT_QUERY, str(log), "--count"], None),
        (f"polars: read the {size:,}-row CSV, count the atoms",
         [py, "-c", POLARS_COUNT, str(log)], None),
    ], repeats, timeout)


def _ratio(a: Figure, b: Figure) -> str:
    return "–" if a.seconds is None or not b.seconds else f"{a.seconds / b.seconds:.2f}×"


def report(figs: list[Figure], repeats: int) -> list[str]:
    """Markdown lines: the table (with the ratios the issue sets targets for) and commands."""
    base, (polars_import, _, _, tiny, count, polars_count) = figs[:-6], figs[-6:]
    targets = {tiny.name: f"{_ratio(tiny, polars_import)} polars import (target ≤ 2×)",
               count.name: f"{_ratio(count, polars_count)} polars (target ≤ 3×)"}
    if len(base) == 2:
        targets[base[0].name] = f"{_ratio(base[0], polars_import)} polars import"
        targets[base[1].name] = f"{_ratio(base[1], polars_count)} polars"
    lines = [f"Medians of {repeats} interleaved runs (after one warm-up round), wall time of the"
             " whole process;"
             " cer_cli byte-compiled first, as an installed package is.",
             "", "| command | seconds | ratio |", "|---|---|---|"]
    for f in figs:
        secs = f"{f.seconds:.3f}" if f.seconds is not None else f"failed: {f.error}"
        lines.append(f"| {f.name} | {secs} | {targets.get(f.name, '')} |")
    lines += ["", "Commands:", ""]
    lines += [f"- `{'cd ' + str(f.cwd) + ' && ' if f.cwd else ''}"
              f"{' '.join(_quote(c) for c in f.command)}`" for f in figs]
    return lines


def _quote(arg: str) -> str:
    return repr(arg) if any(c in arg for c in " ;'[]<>()") else arg
