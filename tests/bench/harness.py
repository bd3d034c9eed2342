"""Measure one workload on every side: `cer` end to end (``cer match QUERY LOG --count`` in a
subprocess), `cer`'s engine alone, CORE (``pycer`` under Python 3.13) and the polars limit.

Every run is a child process, started by a small launcher that reports its wall time, CPU
time and peak RSS (``tests.peak``), so neither this process nor another run pollutes its
memory figure. A side that cannot run yields a
result with ``error`` set ("cer unavailable: …", "CORE unavailable: …"), never an exception.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests import peak

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent.parent
CORE_VENV = BENCH / ".core-venv"
CORE_PY = CORE_VENV / "bin" / "python"
PY313_CANDIDATES = ("/root/.pyenv/versions/3.13.0/bin/python3.13", "python3.13")


@dataclass
class Run:
    """One measurement: throughput (events/s), matches, peak RSS (MiB), or an error."""

    eps: float | None = None
    matches: int | None = None
    rss_mb: float | None = None
    seconds: float | None = None
    error: str | None = None
    extra: dict = field(default_factory=dict)


@dataclass
class Proc:
    rc: int
    wall_s: float
    rss_mb: float
    stdout: str
    stderr: str
    timed_out: bool
    cpu_s: float = 0.0  # the child's user + system time: less sensitive to a busy machine


def spawn(cmd: list[str], timeout: float, cwd: Path | None = None) -> Proc:
    """Run ``cmd``; return its exit code, wall time and its own peak RSS (``tests.peak``:
    ``os.wait4`` from this process would count this process's memory in the child's)."""
    got = peak.run(cmd, cwd=cwd, timeout=timeout)
    return Proc(got.rc, got.wall_s, got.peak_mb, got.stdout, got.stderr, got.timed_out,
                got.cpu_s)


def _last_json(text: str) -> dict | None:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


def _reason(proc: Proc) -> str:
    if proc.timed_out:
        return "timeout"
    lines = [ln.strip() for ln in (proc.stderr + "\n" + proc.stdout).splitlines() if ln.strip()]
    return (lines[-1] if lines else f"exit code {proc.rc}")[:160]


# ----------------------------------------------------------------------------- cer


def cer_command() -> list[str]:
    """The `cer` script next to this interpreter, else ``python -m cer_cli`` (run in the repo)."""
    exe = Path(sys.executable).parent / "cer"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "cer_cli"]


_WARMED: list = []


def run_cer_cli(query_file: Path, stream: str, log: Path, n_events: int, timeout: float) -> Run:
    """``cer match QUERY NAME=LOG --count``, end to end (process start to exit). The first
    call runs it once untimed: numba compiles the kernel into its cache on a machine's
    first compiled run (~20 s), which is installation, not the run an installed cer makes."""
    cmd = cer_command() + ["match", str(query_file), f"{stream}={log}", "--count"]
    if not _WARMED:
        _WARMED.append(spawn(cmd, timeout, cwd=REPO))
    proc = spawn(cmd, timeout, cwd=REPO)
    if proc.rc != 0 or proc.timed_out:
        return Run(error=f"cer unavailable: {_reason(proc)}", rss_mb=proc.rss_mb)
    numbers = re.findall(r"\d+", proc.stdout.replace(",", "").replace("_", ""))
    if not numbers:
        return Run(error=f"cer unavailable: no count in output {proc.stdout[:80]!r}")
    return Run(
        eps=n_events / proc.wall_s,
        matches=int(numbers[-1]),
        rss_mb=proc.rss_mb,
        seconds=proc.wall_s,
    )


def run_cer_engine(workload: str, log: Path, timeout: float, query_file: Path | None) -> Run:
    cmd = [sys.executable, "-m", "tests.bench.runners", "engine", workload, str(log)]
    if query_file is not None:
        cmd += ["--query-file", str(query_file)]
    proc = spawn(cmd, timeout, cwd=REPO)
    data = _last_json(proc.stdout)
    if proc.timed_out or data is None:
        return Run(error=f"cer unavailable: {_reason(proc)}", rss_mb=proc.rss_mb)
    if "error" in data:
        return Run(error=f"cer unavailable: {data['error']}")
    return Run(
        eps=data["eps"], matches=data["matches"], rss_mb=proc.rss_mb, seconds=data["engine_s"],
        extra={"read_s": data["read_s"]},
    )


# ----------------------------------------------------------------------------- polars


def run_polars(workload: str, log: Path, timeout: float) -> Run:
    proc = spawn([sys.executable, "-m", "tests.bench.runners", "polars", workload, str(log)],
                 timeout, cwd=REPO)
    data = _last_json(proc.stdout)
    if data is None or "error" in data:
        return Run(error=f"polars failed: {(data or {}).get('error') or _reason(proc)}")
    return Run(eps=data["eps"], rss_mb=proc.rss_mb, seconds=data["seconds"],
               extra={"atom_counts": data["atom_counts"]})


# ----------------------------------------------------------------------------- CORE


def ensure_core(log=print) -> str | None:
    """Create ``.core-venv`` (Python 3.13 + pycer + pyarrow) if needed. None, or the reason
    CORE is unavailable."""
    if CORE_PY.exists():
        check = spawn([str(CORE_PY), "-c", "import pycer, pyarrow"], 60)
        if check.rc == 0:
            return None
    py = next((c for c in PY313_CANDIDATES if shutil.which(c) or Path(c).exists()), None)
    if py is None:
        return "no Python 3.13 interpreter (pycer ships only cp313 wheels)"
    log(f"creating {CORE_VENV} with {py} and installing pycer, pyarrow ...")
    steps = [
        [py, "-m", "venv", str(CORE_VENV)],
        [str(CORE_PY), "-m", "pip", "install", "-q", "pycer", "pyarrow"],
    ]
    for cmd in steps:
        proc = spawn(cmd, 900)
        if proc.rc != 0:
            return f"{' '.join(cmd[-3:])}: {_reason(proc)}"
    return None


def run_core(query: str, stream: str, log: Path, timeout: float) -> Run:
    with tempfile.TemporaryDirectory(prefix="cer-bench-core-") as tmp:
        spec = Path(tmp) / "spec.json"
        spec.write_text(json.dumps({"log": str(log), "stream": stream, "query": query}))
        # pycer writes logs/logfile*.log under its working directory: keep it in tmp.
        proc = spawn([str(CORE_PY), str(BENCH / "core_runner.py"), str(spec)], timeout, cwd=tmp)
    data = _last_json(proc.stdout)
    if proc.timed_out or proc.rc != 0 or data is None:
        return Run(error=f"CORE failed: {_reason(proc)}", rss_mb=proc.rss_mb)
    return Run(
        eps=data["eps"], matches=data["matches"], rss_mb=proc.rss_mb, seconds=data["feed_s"],
        extra={"eps_with_output": data["eps_with_output"], "output_s": data["output_s"]},
    )
