"""Issue #17's figures, side by side in one run: ``cer match --count`` on three queries over
one 100,000-event log (types A/B, ``v`` uniform 0–999, ``time`` = position, fixed seed):

* the plain pattern ``A AS x ; B AS y ; A AS z WITHIN 20 EVENTS``;
* the comparison chain ``… FILTER y.v > x.v AND z.v > y.v`` (issue item 2, i17b);
* the equality across an unconstrained event ``… FILTER x.v = z.v`` (issue item 1).

Each count is checked against an independent brute force (numpy over position offsets, not
the engine), and each time is reported with its ratio to the plain pattern (the issue's
target: within 3×), as the median of a few runs.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from tests.bench import harness as h

SIZE = 100_000
WINDOW = 20
PLAIN = f"A AS x ; B AS y ; A AS z WITHIN {WINDOW} EVENTS"
QUERIES = {
    "plain": PLAIN,
    "comparison chain": f"A AS x ; B AS y ; A AS z FILTER y.v > x.v AND z.v > y.v"
                        f" WITHIN {WINDOW} EVENTS",
    "x.v = z.v (y between)": f"A AS x ; B AS y ; A AS z FILTER x.v = z.v WITHIN {WINDOW} EVENTS",
}
#: the issue's target: a correlated query within this factor of the plain pattern
TARGET = 3.0


@dataclass
class Figure:
    name: str
    query: str
    command: list[str]
    seconds: float | None
    matches: int | None
    expected: int
    error: str | None = None


def log(n: int = SIZE, seed: int = 17) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame({"type": np.array(["A", "B"])[rng.integers(0, 2, n)],
                         "v": rng.integers(0, 1000, n), "time": np.arange(n, dtype=np.int64)})


def ensure_log(out: Path, n: int = SIZE, seed: int = 17) -> Path:
    path = out / f"correlation_{n}_{seed}.csv"
    if not path.exists():
        out.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        log(n, seed).write_csv(tmp)
        tmp.replace(path)
    return path


def brute_counts(df: pl.DataFrame, window: int = WINDOW) -> dict[str, int]:
    """Exact counts by enumerating the offsets ``i < j < k`` with ``k - i <= window``
    (``WITHIN n EVENTS``: end − start ≤ n) column-wise: independent of the engine."""
    a = (df["type"] == "A").to_numpy()
    b = (df["type"] == "B").to_numpy()
    v = df["v"].to_numpy()
    n = len(v)
    plain = chain = equal = 0
    for d1 in range(1, window):
        for d2 in range(1, window - d1 + 1):
            m = n - d1 - d2
            if m <= 0:
                continue
            x, y, z = slice(0, m), slice(d1, d1 + m), slice(d1 + d2, d1 + d2 + m)
            ok = a[x] & b[y] & a[z]
            plain += int(ok.sum())
            chain += int((ok & (v[y] > v[x]) & (v[z] > v[y])).sum())
            equal += int((ok & (v[x] == v[z])).sum())
    names = list(QUERIES)
    return {names[0]: plain, names[1]: chain, names[2]: equal}


def run(data: Path, timeout: float = 600.0, repeats: int = 3) -> list[Figure]:
    """Median wall time of ``repeats`` runs per query, after one unmeasured warm-up run of
    the plain pattern (numba fills its cache on the first run of a fresh tree)."""
    path = ensure_log(data)
    expected = brute_counts(pl.read_csv(path))
    cer = h.cer_command()
    h.spawn(cer + ["match", "-e", PLAIN, str(path), "--count"], timeout, cwd=h.REPO)
    figs = []
    for name, query in QUERIES.items():
        cmd = cer + ["match", "-e", query, str(path), "--count"]
        times, count, error = [], None, None
        for _ in range(max(1, repeats)):
            proc = h.spawn(cmd, timeout, cwd=h.REPO)
            if proc.rc != 0 or proc.timed_out:
                error = h._reason(proc)
                break
            times.append(proc.wall_s)
            digits = "".join(c for c in (proc.stdout.strip().splitlines() or [""])[-1]
                             if c.isdigit())
            count = int(digits) if digits else None
        secs = None if error else statistics.median(times)
        figs.append(Figure(name, query, cmd, secs, count, expected[name], error))
    return figs


def agree(figs: list[Figure]) -> bool:
    return all(f.matches == f.expected for f in figs if f.error is None)


def report(figs: list[Figure]) -> list[str]:
    """Markdown lines: the table with counts, brute-force agreement and ratios, then commands."""
    plain = next((f for f in figs if f.name == "plain"), None)
    base = plain.seconds if plain is not None else None
    lines = [f"{SIZE:,} events (types A/B, `v` uniform 0–999, `time` = position), median"
             " wall time (after a warm-up run) of `cer match -e QUERY LOG --count`; counts checked by a numpy"
             f" brute force; target: ≤ {TARGET:g}× the plain pattern.", "",
             "| query | matches | brute force | agree | seconds | vs plain |", "|---|---|---|---|---|---|"]
    for f in figs:
        secs = f"{f.seconds:.2f}" if f.seconds is not None else f"failed: {f.error}"
        ratio = f"{f.seconds / base:.2f}×" if f.seconds and base else "–"
        ok = "–" if f.matches is None else ("yes" if f.matches == f.expected else "NO")
        lines.append(f"| `{f.query}` | {'–' if f.matches is None else f'{f.matches:,}'} |"
                     f" {f.expected:,} | {ok} | {secs} | {ratio} |")
    lines += ["", "Commands:", ""]
    lines += ["- `" + " ".join(repr(c) if any(ch in c for ch in " ;'") else c
                               for c in f.command) + "`" for f in figs]
    return lines
