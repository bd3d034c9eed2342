"""Run the benchmark suite: generate the logs, measure every workload on `cer` (end to end and
engine only), CORE (pycer) and the polars limit, plus the whole-process start-up and ``--count``
figures (``startup.py``); print a table, write ``bench-out/report.md`` and a plot there
(``bench-out/`` is ignored by git: a run never modifies tracked files).

    .venv/bin/python tests/bench/run.py                      # everything, 1M-event logs
    .venv/bin/python tests/bench/run.py --size 100000 --groups uniformP3,Pn
    make bench                                               # the same through pytest -m bench

Options are listed by ``--help``. The environment variable ``CER_BENCH_ARGS`` (split like a
shell line) is appended to the arguments, which is how ``make bench`` passes options through
pytest, e.g. ``make bench CER_BENCH_ARGS='--size 100000'``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `tests.bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import polars as pl  # noqa: E402

from tests.bench import correlation, scale, startup  # noqa: E402
from tests.bench import generators as gen  # noqa: E402
from tests.bench import harness as h  # noqa: E402
from tests.bench import spark as spark_bench  # noqa: E402
from tests.bench.workloads import GROUPS, STRESS_LENGTHS, Workload, all_workloads  # noqa: E402

SIDES = ("cer", "engine", "core", "polars")
#: not a workload group: the start-up and whole-process ``--count`` figures (``startup.py``)
STARTUP = "startup"
#: not a workload group: issue #17's correlated queries against the plain pattern
#: (``correlation.py``, its own 100,000-event log whatever ``--size`` says)
CORRELATION = "correlation"
OUT = h.REPO / "bench-out"


@dataclass
class Result:
    workload: Workload
    events: int
    runs: dict[str, h.Run] = field(default_factory=dict)
    expected: int | None = None

    def eps(self, side: str) -> float | None:
        r = self.runs.get(side)
        return r.eps if r is not None and r.error is None else None

    def matches(self, side: str) -> int | None:
        r = self.runs.get(side)
        return r.matches if r is not None and r.error is None else None

    def agree(self) -> str:
        counts = {s: self.matches(s) for s in ("cer", "engine", "core")}
        if self.expected is not None:
            counts["expected"] = self.expected
        known = {k: v for k, v in counts.items() if v is not None}
        if len(known) < 2:
            return "–"
        return "yes" if len(set(known.values())) == 1 else "NO"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="cer benchmark suite")
    p.add_argument("--size", type=int, default=gen.DEFAULT_SIZE, help="events per log (1M)")
    p.add_argument("--seed", type=int, default=gen.DEFAULT_SEED)
    p.add_argument("--groups", default=",".join((*GROUPS, STARTUP, CORRELATION, scale.GROUP, spark_bench.SMALL)),
                   help="comma-separated subset of "
                        f"{','.join((*GROUPS, STARTUP, CORRELATION, scale.GROUP, *spark_bench.GROUPS))} "
                        f"(default: all but {spark_bench.BIG}, Spark on 1M+ events)")
    p.add_argument("--only", default="", help="comma-separated workload names (e.g. 'P3,F-Q1')")
    p.add_argument("--stress-lengths", default=",".join(map(str, STRESS_LENGTHS)))
    p.add_argument("--skip", default="", help=f"comma-separated sides to skip: {','.join(SIDES)}")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    p.add_argument("--data", type=Path, default=h.BENCH / "data", help="where logs are cached")
    p.add_argument("--repeats", type=int, default=3, help="runs per start-up figure (median)")
    p.add_argument("--baseline", type=Path, default=None,
                   help="another cer source tree (e.g. `git archive main`) to measure beside "
                        "this one in the start-up figures")
    p.add_argument("--spark-sizes", default="1000000",
                   help=f"events per log of the {spark_bench.BIG} group (e.g. 1000000,10000000)")
    p.add_argument("--spark-master", default=spark_bench.MASTER)
    p.add_argument("--spark-repeats", type=int, default=1,
                   help="runs per Spark figure (median, after a warm-up run); also of the "
                        f"{scale.GROUP} group's Spark rows (0: none)")
    p.add_argument("--scale-size", type=int, default=scale.DEFAULT_SIZE,
                   help=f"events of the {scale.GROUP} group's log (10M; e.g. 1000000 for a quick run)")
    p.add_argument("--report", type=Path, default=OUT / "report.md")
    p.add_argument("--plot", type=Path, default=OUT / "throughput.png")
    extra = shlex.split(os.environ.get("CER_BENCH_ARGS", ""))
    return p.parse_args((sys.argv[1:] if argv is None else argv) + extra)


def _fmt_eps(v: float | None) -> str:
    if v is None:
        return "–"
    if v >= 1e6:
        return f"{v / 1e6:.2f}M"
    if v >= 1e3:
        return f"{v / 1e3:.1f}k"
    return f"{v:.0f}"


def _fmt_int(v: int | None) -> str:
    return "–" if v is None else f"{v:,}"


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None or b == 0 else f"{a / b:.3g}"


def _rss(r: h.Run | None) -> str:
    return "–" if r is None or r.rss_mb is None or r.error else f"{r.rss_mb:.0f}"


HEADER = [
    "workload", "events", "matches cer", "matches CORE", "agree", "cer e2e e/s",
    "cer engine e/s", "CORE e/s", "polars e/s", "engine/CORE", "e2e/CORE", "e2e/polars",
    "RSS cer MiB", "RSS CORE MiB",
]


def row(r: Result) -> list[str]:
    cer_m = r.matches("cer") if r.matches("cer") is not None else r.matches("engine")
    return [
        r.workload.name, _fmt_int(r.events), _fmt_int(cer_m), _fmt_int(r.matches("core")),
        r.agree(), _fmt_eps(r.eps("cer")), _fmt_eps(r.eps("engine")), _fmt_eps(r.eps("core")),
        _fmt_eps(r.eps("polars")), _ratio(r.eps("engine"), r.eps("core")),
        _ratio(r.eps("cer"), r.eps("core")), _ratio(r.eps("cer"), r.eps("polars")),
        _rss(r.runs.get("cer") if r.eps("cer") else r.runs.get("engine")), _rss(r.runs.get("core")),
    ]


def text_table(rows: list[list[str]]) -> str:
    widths = [max(len(x) for x in col) for col in zip(HEADER, *rows, strict=True)]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in
                       enumerate(zip(line, widths, strict=True))) for line in [HEADER, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def md_table(rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    out += ["| " + " | ".join(x.replace("|", "\\|") for x in r) + " |" for r in rows]
    return "\n".join(out)


def plot(results: list[Result], path: Path) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plot skipped: matplotlib is not installed (pip install matplotlib)"
    panels = [("window", "P'3: window (×T, T = 10000 stock_time)"),
              ("Pn", "Pn (with output): n"), ("Pn'", "P'n (no output): n")]
    panels = [(g, t) for g, t in panels if any(r.workload.group == g for r in results)]
    if not panels:
        return "plot skipped: no window or Pn workload was run"
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    labels = {"cer": "cer end to end", "engine": "cer engine", "core": "CORE (pycer)",
              "polars": "polars limit"}
    for ax, (group, title) in zip(axes[0], panels, strict=True):
        rs = sorted((r for r in results if r.workload.group == group), key=lambda r: r.workload.x)
        for side, label in labels.items():
            pts = [(r.workload.x, r.eps(side)) for r in rs if r.eps(side)]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", label=label)
        ax.set_yscale("log")
        ax.set_xlabel(title)
        ax.set_ylabel("events/s")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"plot written to {path}"


def write_report(results: list[Result], args, notes: list[str], plot_msg: str,
                 startup_lines: list[str] | None = None,
                 correlation_lines: list[str] | None = None, spark_lines: list[str] | None = None,
                 issue_lines: list[str] | None = None,
                 scale_lines: list[str] | None = None) -> None:
    rows = [row(r) for r in results]
    lines = [
        "# cer benchmark report",
        "",
        f"Generated by `tests/bench/run.py` on {time.strftime('%Y-%m-%d %H:%M')}, "
        f"{platform.platform()}, Python {platform.python_version()}, polars {pl.__version__}, "
        f"{os.cpu_count()} CPUs. Logs: {args.size:,} events (stock-like and uniform A–D), seed "
        f"{args.seed}.",
        "",
        "- **cer e2e**: `cer match QUERY NAME=LOG --count` as a subprocess, process start to exit.",
        "- **cer engine**: `plan(query).run` over an event frame already in memory (read time excluded).",
        "- **CORE**: the C++ CORE through `pycer` 0.1.6 (Python 3.13), events preloaded as "
        "`PyEvent`s; `send_events` time (evaluation and enumeration). Same query with "
        "`WITHIN n+1 [attr]` (CORE is strict) and an explicit window where cer has none.",
        "- **polars**: the limit — read the columns the query reads and evaluate its atomic "
        "predicates, no pattern matching.",
        "- Ratios are throughput ratios (higher is better for cer). RSS is the peak of the run's "
        "own process.",
        "",
        md_table(rows),
        "",
    ]
    if issue_lines:
        lines[2:2] = ["## Issue #15 targets, measured in this run", "", *issue_lines, ""]
    if startup_lines:
        lines += ["## Start-up and whole-process `--count` (issue #15)", "", *startup_lines, ""]
    if correlation_lines:
        lines += ["## Predicates between events (issue #17)", "", *correlation_lines, ""]
    if scale_lines:
        lines += ["## Scale: one fan-out, several runners (issue #23)", "", *scale_lines, ""]
    if spark_lines:
        lines += ["## Spark (issue #15)", "", *spark_lines, ""]
    if any(r.workload.group == "stress" for r in results):
        lines.append("Stress rows: `agree` also compares with the exact count computed from the "
                     "stream (every match ends at the trigger).")
        lines.append("")
    core_extra = [
        f"- {r.workload.name}: CORE {_fmt_eps(r.runs['core'].extra.get('eps_with_output'))} e/s "
        f"including `get_output` (text rendering of {r.matches('core'):,} matches)"
        for r in results
        if r.eps("core") and r.matches("core")
    ]
    if core_extra:
        lines += ["CORE throughput when its output text is rendered too:", "", *core_extra, ""]
    if notes:
        lines += ["## Notes", "", *[f"- {n}" for n in notes], ""]
    if args.plot.exists() and plot_msg.startswith("plot written"):
        lines += [f"![throughput]({args.plot.name})", ""]
    else:
        lines += [plot_msg, ""]
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text("\n".join(lines))


def issue_table(results: list[Result], figs, trivial, cases) -> list[str]:
    """The table of issue #15, one row per target, from the figures of this run."""
    rows = []
    p3 = next((r for r in results if r.workload.name == "uniformP3"), None) or next(
        (r for r in results if r.workload.group == "uniformP3"), None)
    if p3 is not None and p3.eps("cer") and p3.eps("core"):
        rows.append((f"`cer match --count` whole process vs CORE's engine alone ({p3.workload.name},"
                     f" {p3.events:,} events)",
                     f"{p3.events / p3.eps('cer'):.2f} s vs {p3.events / p3.eps('core'):.2f} s "
                     f"→ {p3.eps('cer') / p3.eps('core'):.2f}×", "≥ 10×"))
    if figs:
        polars_import, tiny, count, polars_count = figs[-6], figs[-3], figs[-2], figs[-1]
        if tiny.seconds and polars_import.seconds:
            rows.append(("`cer match` on a 3-row log (start-up) vs `python -c 'import polars'`",
                         f"{tiny.seconds:.2f} s vs {polars_import.seconds:.2f} s → "
                         f"{tiny.seconds / polars_import.seconds:.2f}×", "≤ 2×"))
        if count.seconds and polars_count.seconds:
            rows.append((f"{count.name} vs polars reading the same CSV and counting",
                         f"{count.seconds:.2f} s vs {polars_count.seconds:.2f} s → "
                         f"{count.seconds / polars_count.seconds:.2f}×", "≤ 3×"))
    for c in cases:
        if c.spark.seconds and trivial is not None and trivial.seconds and c.events <= 10_000:
            rows.append((f"`cer match --spark`, {c.events:,} events, {c.name} vs a trivial Spark job",
                         f"{c.spark.seconds:.2f} s vs {trivial.seconds:.2f} s → "
                         f"{c.spark.seconds / trivial.seconds:.2f}× (local: "
                         f"{c.local.seconds:.2f} s)" if c.local.seconds else "", "≤ 2×"))
        elif c.spark.seconds and c.local.seconds:
            rows.append((f"`cer match --spark`, {c.events:,} events, {c.name} vs local",
                         f"{c.spark.seconds:.2f} s vs {c.local.seconds:.2f} s → "
                         f"{c.spark.seconds / c.local.seconds:.2f}×", "≤ 1.5× at 1M"))
    if not rows:
        return []
    return ["| what | measured | target |", "|---|---|---|",
            *[f"| {a} | {b} | {c} |" for a, b, c in rows]]


def main(argv: list[str] | None = None) -> list[Result]:
    args = parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    groups = {g.strip() for g in args.groups.split(",") if g.strip()}
    only = {o.strip() for o in args.only.split(",") if o.strip()}
    lengths = tuple(int(x) for x in args.stress_lengths.split(",") if x.strip())
    workloads = [w for w in all_workloads(lengths) if w.group in groups]
    if only:
        workloads = [w for w in workloads if w.name in only]
    notes: list[str] = []

    core_reason = None if "core" not in skip and workloads else "skipped"
    if core_reason is None:
        core_reason = h.ensure_core()
        if core_reason:
            print(f"CORE unavailable: {core_reason}")
            notes.append(f"CORE unavailable: {core_reason}")

    args.data.mkdir(parents=True, exist_ok=True)
    logs: dict[str, Path] = {}

    def log_of(w: Workload) -> Path:
        if w.log not in logs:
            if w.log.startswith("stress:"):
                _, q, n = w.log.split(":")
                logs[w.log] = gen.ensure_stress(q, int(n), args.data, args.seed)
            else:
                logs[w.log] = gen.ensure(w.log, args.data, args.size, args.seed)
        return logs[w.log]

    results: list[Result] = []
    unavailable: dict[str, str] = {}
    qdir = Path(tempfile.mkdtemp(prefix="cer-bench-q-"))
    for w in workloads:
        path = log_of(w)
        n = pl.scan_parquet(path).select(pl.len()).collect().item()
        res = Result(w, n)
        if w.group == "stress":
            _, q, _ = w.log.split(":")
            res.expected = gen.stress_expected(q, pl.read_parquet(path, columns=["type"]))
        qfile = qdir / f"{len(results):03d}.ceql"
        qfile.write_text(w.cer + "\n")
        print(f"[{w.name}] {n:,} events", flush=True)
        if "polars" not in skip:
            res.runs["polars"] = h.run_polars(w.name, path, args.timeout)
        if "core" not in skip:
            res.runs["core"] = (
                h.Run(error=f"CORE unavailable: {core_reason}") if core_reason
                else h.run_core(w.core_text(n), w.stream, path, args.timeout)
            )
        sides = (
            ("cer", partial(h.run_cer_cli, qfile, w.stream, path, n, args.timeout)),
            ("engine", partial(h.run_cer_engine, w.name, path, args.timeout, None)),
        )
        for side, fn in sides:
            if side in skip:
                continue
            if side in unavailable:  # the side is missing altogether: do not retry per workload
                res.runs[side] = h.Run(error=unavailable[side])
                continue
            run = fn()
            res.runs[side] = run
            if run.error and ("not yet implemented" in run.error or "import failed" in run.error):
                unavailable[side] = run.error
        for side, run in res.runs.items():
            status = run.error or f"{_fmt_eps(run.eps)} e/s, {_fmt_int(run.matches)} matches"
            print(f"    {side:7s} {status}", flush=True)
        results.append(res)

    for side, reason in unavailable.items():
        notes.append(f"{'cer end to end' if side == 'cer' else 'cer engine'}: {reason}")
    errors = sorted({f"{r.workload.name} {s}: {run.error}" for r in results
                     for s, run in r.runs.items()
                     if run.error and run.error not in unavailable.values()
                     and not run.error.startswith("CORE unavailable")})
    notes += errors
    notes += [f"{r.workload.name}: {r.workload.note}" for r in results if r.workload.note]
    startup_lines, figs = None, None
    if STARTUP in groups:
        print("[startup] start-up and whole-process --count", flush=True)
        figs = startup.run(args.data, args.size, args.seed, args.repeats, args.timeout,
                           args.baseline)
        startup_lines = startup.report(figs, args.repeats)
    correlation_lines = None
    if CORRELATION in groups:
        print("[correlation] correlated queries against the plain pattern", flush=True)
        cfigs = correlation.run(args.data, args.timeout, args.repeats, args.baseline)
        correlation_lines = correlation.report(cfigs)
        nfigs = correlation.run_next(args.data, args.timeout, args.repeats)
        correlation_lines += ["", *correlation.report_next(nfigs)]
        chfigs = correlation.run_chain(args.data, max(args.timeout, 900.0), args.repeats,
                                       baseline=args.baseline)
        correlation_lines += ["", *correlation.report_chain(chfigs)]
        correlation_lines += ["", "Every match enumerated into the batches the writers get (the"
                              " engines alone, in this process; CPU per match):", "",
                              *correlation.engine_per_match(args.data)]
        nfigs += chfigs
        if not correlation.agree(cfigs + nfigs):
            notes.append("correlation: a count differs from the brute force")
    scale_lines = None
    if scale.GROUP in groups:
        cells, limit = scale.run(args.data, args.scale_size, args.seed, args.repeats, args.timeout,
                                 args.spark_repeats)
        scale_lines = scale.report(cells, limit, args.scale_size, args.repeats)
        if not scale.agree(cells):
            notes.append("scale: a runner's count differs from the single core's")
    spark_lines = None
    spark_groups = groups & set(spark_bench.GROUPS)
    trivial, cases = None, []
    if spark_groups:
        sizes = tuple(int(x) for x in args.spark_sizes.split(",") if x.strip())
        trivial, cases = spark_bench.run(spark_groups, args.data, args.seed, args.spark_repeats,
                                         args.timeout, sizes, args.spark_master,
                                         args.baseline)
        spark_lines = spark_bench.report(trivial, cases, args.spark_repeats)
    issue_lines = issue_table(results, figs, trivial, cases)
    print()
    print(text_table([row(r) for r in results]))
    for block in (startup_lines, correlation_lines, scale_lines, spark_lines, issue_lines):
        if block:
            print("\n".join(["", *block]))
    args.plot.parent.mkdir(parents=True, exist_ok=True)
    plot_msg = plot(results, args.plot)
    print(plot_msg)
    write_report(results, args, notes, plot_msg, startup_lines, correlation_lines, spark_lines,
                 issue_lines, scale_lines)
    print(f"report written to {args.report}")
    for n in notes:
        print(f"note: {n}")
    return results


if __name__ == "__main__":
    main()
