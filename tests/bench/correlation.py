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
import sys
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
    cpu: float | None = None
    side: str = "this tree"


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


def _measure(name: str, query: str, path: Path, cer: list[str], cwd, timeout: float,
             repeats: int, expected: int | None, side: str) -> Figure:
    """One query's ``Figure``: the median wall and CPU time of ``repeats`` ``cer match
    --count`` runs and the count the last one printed (or why a run failed)."""
    cmd = cer + ["match", "-e", query, str(path), "--count"]
    walls, cpus, count, error = [], [], None, None
    for _ in range(max(1, repeats)):
        proc = h.spawn(cmd, timeout, cwd=cwd)
        if proc.rc != 0 or proc.timed_out:
            error = h._reason(proc)
            break
        walls.append(proc.wall_s)
        cpus.append(proc.cpu_s)
        digits = "".join(c for c in (proc.stdout.strip().splitlines() or [""])[-1]
                         if c.isdigit())
        count = int(digits) if digits else None
    return Figure(name, query, cmd, None if error else statistics.median(walls), count,
                  expected, error, None if error else statistics.median(cpus), side)


def _sides(baseline: Path | None) -> list[tuple[str, list[str], Path]]:
    """(side, cer command, working directory): this tree, and the ``baseline`` tree if any."""
    sides = [("this tree", h.cer_command(), h.REPO)]
    if baseline is not None:
        sides.append((f"baseline {baseline}", [sys.executable, "-m", "cer_cli"], baseline))
    return sides


def run(data: Path, timeout: float = 600.0, repeats: int = 3,
        baseline: Path | None = None) -> list[Figure]:
    """Median wall and CPU time of ``repeats`` runs per query, after one unmeasured warm-up
    run of the plain pattern (numba fills its cache on the first run of a fresh tree). With
    ``baseline`` (another cer source tree, e.g. ``git archive main``) its figures too, run
    as ``python -m cer_cli`` there: before and after in one run, on the same machine load."""
    path = ensure_log(data)
    expected = brute_counts(pl.read_csv(path))
    figs = []
    for side, cer, cwd in _sides(baseline):
        h.spawn(cer + ["match", "-e", PLAIN, str(path), "--count"], timeout, cwd=cwd)
        figs += [_measure(name, query, path, cer, cwd, timeout, repeats, expected[name], side)
                 for name, query in QUERIES.items()]
    return figs


def agree(figs: list[Figure]) -> bool:
    return all(f.matches == f.expected for f in figs if f.error is None)


def report(figs: list[Figure]) -> list[str]:
    """Markdown lines: per side, the table with counts, brute-force agreement, wall and CPU
    time and their ratios to the plain pattern; then the commands."""
    lines = [f"{SIZE:,} events (types A/B, `v` uniform 0–999, `time` = position): median wall"
             " and CPU (user + system) time, after a warm-up run, of"
             " `cer match -e QUERY LOG --count`; counts checked by a numpy brute force;"
             f" target: ≤ {TARGET:g}× the plain pattern.", ""]
    for side in dict.fromkeys(f.side for f in figs):
        rows = [f for f in figs if f.side == side]
        plain = next((f for f in rows if f.name == "plain"), None)
        lines += [f"{side}:", "",
                  "| query | matches | brute force | agree | wall s | vs plain | CPU s | vs plain |",
                  "|---|---|---|---|---|---|---|---|"]
        for f in rows:
            ok = "–" if f.matches is None else ("yes" if f.matches == f.expected else "NO")
            if f.seconds is None:
                times = f"failed: {f.error} | – | – | –"
            else:
                times = " | ".join([f"{f.seconds:.2f}", _ratio(f.seconds, plain and plain.seconds),
                                    f"{f.cpu:.2f}", _ratio(f.cpu, plain and plain.cpu)])
            lines.append(f"| `{f.query}` | {'–' if f.matches is None else f'{f.matches:,}'} |"
                         f" {f.expected:,} | {ok} | {times} |")
        lines.append("")
    lines += ["Commands:", ""]
    lines += ["- `" + " ".join(repr(c) if any(ch in c for ch in " ;'") else c
                               for c in f.command) + "`" for f in figs]
    return lines


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if a is None or not b else f"{a / b:.2f}×"


# --------------------------------------------------------------------------- next match (issue #26)

#: Issue #26, part 2: skip-till-next-match with and without predicates between events, on
#: 1M events of a uniform A–D log with ``val`` uniform 0–99 (``time`` = position). The
#: target: the correlated form within 2× the uncorrelated one (whole process).
NEXT_SIZE = 1_000_000
NEXT_WINDOW = 100
NEXT_QUERIES = {
    "next match": f"A AS a ; !B ; B AS b ; !C ; C AS c WITHIN {NEXT_WINDOW} EVENTS",
    "next match, correlated": (
        "A AS a ; !(B AS b0 FILTER b0.val > a.val) ; B AS b ; !(C AS c0 FILTER c0.val > b.val)"
        f" ; C AS c FILTER b.val > a.val AND c.val > b.val WITHIN {NEXT_WINDOW} EVENTS"),
    "next match, correlated, ';>'": ("A AS a ;> B AS b ;> C AS c FILTER b.val > a.val AND"
                                     f" c.val > b.val WITHIN {NEXT_WINDOW} EVENTS"),
}
NEXT_TARGET = 2.0


def next_log(n: int = NEXT_SIZE, seed: int = 26) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame({"type": np.array(list("ABCD"))[rng.integers(0, 4, n)],
                         "val": rng.integers(0, 100, n), "time": np.arange(n, dtype=np.int64)})


def ensure_next_log(data: Path, size: int = NEXT_SIZE) -> Path:
    """The next-match log of ``size`` events under ``data``, written once (atomically)."""
    path = data / f"next_match_{size}.csv"
    if not path.exists():
        data.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        next_log(size).write_csv(tmp)
        tmp.replace(path)
    return path


def _first_after(start: np.ndarray, limit: np.ndarray, ok) -> np.ndarray:
    """Per row: the first position p with ``start < p <= limit`` and ``ok(row, p)``, or -1;
    by offsets, column-wise (the window bounds the offsets)."""
    found = np.full(len(start), -1, dtype=np.int64)
    todo = np.flatnonzero(start >= 0)
    d = 1
    while len(todo):
        p = start[todo] + d
        todo = todo[p <= limit[todo]]
        p = start[todo] + d
        hit = ok(todo, p)
        found[todo[hit]] = p[hit]
        todo = todo[~hit]
        d += 1
    return found


def next_brute_counts(df: pl.DataFrame, window: int = NEXT_WINDOW) -> dict[str, int]:
    """Counts of ``NEXT_QUERIES`` by their meaning, not the engine: after each A, the first B
    (above it), then the first C (above that B), all within ``window`` positions."""
    t = df["type"].to_numpy()
    v = df["val"].to_numpy()
    n = len(t)
    a = np.flatnonzero(t == "A")
    limit = np.minimum(a + window, n - 1)

    def taking(kind: str, prev: np.ndarray, corr: bool):
        return lambda r, p: (t[p] == kind) & ((v[p] > v[prev[r]]) if corr else True)

    out = {}
    for name, corr in (("next match", False), ("next match, correlated", True)):
        b = _first_after(a, limit, taking("B", a, corr))
        c = _first_after(b, limit, taking("C", b, corr))
        out[name] = int((c >= 0).sum())
    out["next match, correlated, ';>'"] = out["next match, correlated"]
    return out


def run_next(data: Path, timeout: float = 600.0, repeats: int = 3,
             size: int = NEXT_SIZE) -> list[Figure]:
    """Median wall and CPU time of ``repeats`` runs per query of ``NEXT_QUERIES``, after an
    unmeasured warm-up run of each (numba fills its cache on a fresh tree)."""
    path = ensure_next_log(data, size)
    expected = next_brute_counts(pl.read_csv(path))
    cer = h.cer_command()
    figs = []
    for name, query in NEXT_QUERIES.items():
        h.spawn(cer + ["match", "-e", query, str(path), "--count"], timeout)  # warm-up
        figs.append(_measure(name, query, path, cer, None, timeout, repeats, expected[name],
                             "next match"))
    return figs


def report_next(figs: list[Figure]) -> list[str]:
    """Markdown lines: the next-match queries with their ratios to the uncorrelated form."""
    base = next((f for f in figs if f.name == "next match"), None)
    lines = ["Next match (issue #26): `cer match -e QUERY LOG --count`, uniform A–D log, `val`"
             " uniform 0–99, median wall and CPU time after a warm-up run; counts checked by"
             f" a numpy brute force; target: the correlated form ≤ {NEXT_TARGET:g}× the"
             " uncorrelated one.", "",
             "| query | matches | brute force | agree | wall s | vs uncorrelated | CPU s |"
             " vs uncorrelated |", "|---|---|---|---|---|---|---|---|"]
    for f in figs:
        ok = "–" if f.matches is None else ("yes" if f.matches == f.expected else "NO")
        if f.seconds is None:
            times = f"failed: {f.error} | – | – | –"
        else:
            times = " | ".join([f"{f.seconds:.2f}", _ratio(f.seconds, base and base.seconds),
                                f"{f.cpu:.2f}", _ratio(f.cpu, base and base.cpu)])
        lines.append(f"| `{f.query}` | {'–' if f.matches is None else f'{f.matches:,}'} |"
                     f" {f.expected:,} | {ok} | {times} |")
    return lines


# --------------------------------------------------------------------------- the chain (issue #26)

#: Issue #26, part 1: the comparison chain against the plain pattern on the next-match log
#: (uniform A–D, ``val`` uniform 0–99, ``time`` = position). The target: the chain within
#: ``TARGET``× the plain pattern per match enumerated (time / matches), and ≥ 10× faster than
#: the interpreted hash join (1M events: 56–61 s, 12.5M matches).
CHAIN_QUERIES = {
    "plain": f"A ; B ; C WITHIN {NEXT_WINDOW} EVENTS",
    "comparison chain": ("A AS x ; B AS y ; C AS z FILTER x.val < y.val AND y.val < z.val"
                         f" WITHIN {NEXT_WINDOW} EVENTS"),
    # the same window measured on the log's ``time`` (the position): the kernel's time path
    "comparison chain, time window": ("A AS x ; B AS y ; C AS z FILTER x.val < y.val AND"
                                      f" y.val < z.val WITHIN {NEXT_WINDOW} [time]"),
}


#: ``engine_per_match``'s rounds in ``make bench`` (whatever ``--repeats``): ~3 s each, and
#: fewer rounds let one busy moment of a shared machine move the figure by ±10%
PER_MATCH_ROUNDS = 7


def engine_per_match(data: Path, size: int = 1_000_000, repeats: int = PER_MATCH_ROUNDS
                     ) -> list[str]:
    """The engines alone, matches *enumerated*: each query of ``CHAIN_QUERIES`` run in this
    process over the same frames, every match built into a ``MatchBatch`` (what the writers
    receive), CPU seconds per match, in ``repeats`` rounds after a warm-up. ``--count``
    (``run_chain``) lets the plain pattern count without visiting its matches; this is the
    per-match cost when both enumerate.

    The ratio to the plain pattern is the median of the rounds' own ratios: each round runs
    every query once, in an order that turns from round to round, so a ratio compares runs
    made seconds apart under the same load. Medians of each query's times taken apart mix
    rounds, and the plain pattern's time moves most with the machine's load. The rounds'
    least and greatest ratios are printed beside it."""
    import time

    from cer_cli.api import compile_query, read_events
    from cer_cli.engine import driver

    log = read_events([str(ensure_next_log(data, size))], batch_size=262_144)
    names = list(CHAIN_QUERIES)
    cpu: dict[str, list[float]] = {name: [] for name in names}
    found: dict[str, int] = {}
    for i in range(repeats + 1):
        for name in names[i % len(names):] + names[:i % len(names)]:
            executor = compile_query(CHAIN_QUERIES[name], schema=log.schema).executor()
            started = time.process_time()
            found[name] = sum(len(b) for b in driver.run_batches(executor, log.batches()))
            if i:
                cpu[name].append(time.process_time() - started)
    return per_match_lines(cpu, found)


def per_match_lines(cpu: dict[str, list[float]], found: dict[str, int]) -> list[str]:
    """``engine_per_match``'s report from each query's CPU seconds per round (the rounds in
    the same order for every query) and match count; the first query is the plain pattern."""
    names = list(cpu)
    plain = names[0]
    lines = []
    for name in names:
        ratios = [(c / found[name]) / (p / found[plain])
                  for c, p in zip(cpu[name], cpu[plain], strict=True)]
        med = statistics.median(cpu[name])
        lines.append(f"- {name}: {found[name]:,} matches enumerated, {med:.2f} s CPU"
                     f" (median of {len(cpu[name])}), {med / found[name] * 1e6:.3f} µs/match,"
                     f" {statistics.median(ratios):.2f}× the plain pattern per match"
                     f" (rounds {min(ratios):.2f}–{max(ratios):.2f}×)")
    return lines


def chain_brute_counts(df: pl.DataFrame, window: int = NEXT_WINDOW) -> dict[str, int]:
    """Counts of ``CHAIN_QUERIES`` by their meaning, not the engine: per B at ``j``, the A's
    at ``j - d`` (``0 < d < window``) times the C's in ``(j, j - d + window]``, with and
    without the values rising. Column-wise in O(window) passes: ``cnt`` grows by the C's at
    offset ``m`` while ``d = window - m`` falls, so each A offset meets its C count."""
    t = df["type"].to_numpy()
    v = df["val"].to_numpy()
    n = len(t)
    j = np.flatnonzero(t == "B")
    out = {}
    for name, corr in (("plain", False), ("comparison chain", True)):
        cnt = np.zeros(len(j), dtype=np.int64)
        total = 0
        for m in range(1, window):
            k = j + m
            ok = k < n
            kk = np.minimum(k, n - 1)
            c = ok & (t[kk] == "C") & ((v[kk] > v[j]) if corr else True)
            cnt += c
            i = j - (window - m)
            ok = i >= 0
            ii = np.maximum(i, 0)
            a = ok & (t[ii] == "A") & ((v[ii] < v[j]) if corr else True)
            total += int(cnt[a].sum())
        out[name] = total
    # ``time`` is each event's position (``next_log``): the same window, the same matches
    out["comparison chain, time window"] = out["comparison chain"]
    return out


def run_chain(data: Path, timeout: float = 900.0, repeats: int = 3,
              size: int = NEXT_SIZE, baseline: Path | None = None) -> list[Figure]:
    """Median wall and CPU time of ``repeats`` runs per query of ``CHAIN_QUERIES`` on the
    next-match log of ``size`` events, after an unmeasured warm-up run of the plain pattern;
    with ``baseline`` (another source tree) its figures too, in the same run."""
    path = ensure_next_log(data, size)
    expected = chain_brute_counts(pl.read_csv(path))
    figs = []
    for side, cer, cwd in _sides(baseline):
        h.spawn(cer + ["match", "-e", CHAIN_QUERIES["plain"], str(path), "--count"], timeout,
                cwd=cwd)
        figs += [_measure(name, query, path, cer, cwd, timeout, repeats, expected[name], side)
                 for name, query in CHAIN_QUERIES.items()]
    return figs


def report_chain(figs: list[Figure], size: int = NEXT_SIZE) -> list[str]:
    """Markdown lines: per side, the plain pattern and the chain with their time per match
    (µs) and the chain's ratio to the plain pattern per match, wall and CPU."""
    lines = [f"Comparison chain (issue #26): {size:,} events, uniform A–D, `val` uniform 0–99:"
             " median wall and CPU time after a warm-up run of `cer match -e QUERY LOG"
             " --count`; counts checked by a numpy brute force; target: the chain within"
             f" {TARGET:g}× the plain pattern per match.", ""]
    for side in dict.fromkeys(f.side for f in figs):
        rows = [f for f in figs if f.side == side]
        plain = next((f for f in rows if f.name == "plain"), None)
        lines += [f"{side}:", "",
                  "| query | matches | brute force | agree | wall s | µs/match | vs plain |"
                  " CPU s | µs/match | vs plain |", "|---|---|---|---|---|---|---|---|---|---|"]
        for f in rows:
            ok = "–" if f.matches is None else ("yes" if f.matches == f.expected else "NO")
            if f.seconds is None:
                times = f"failed: {f.error} | – | – | – | – | –"
            else:
                cols = []
                for mine, base in ((f.seconds, plain and plain.seconds),
                                   (f.cpu, plain and plain.cpu)):
                    per = per_match(mine, f.matches)
                    cols += [f"{mine:.2f}", "–" if per is None else f"{per:.3f}",
                             _ratio(per, per_match(base, plain and plain.matches))]
                times = " | ".join(cols)
            lines.append(f"| `{f.query}` | {'–' if f.matches is None else f'{f.matches:,}'} |"
                         f" {f.expected:,} | {ok} | {times} |")
        lines.append("")
    return lines


def per_match(seconds: float | None, matches: int | None) -> float | None:
    """Microseconds per match (None without a time or a match)."""
    return None if seconds is None or not matches else seconds / matches * 1e6
