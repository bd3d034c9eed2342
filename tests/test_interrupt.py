"""A run stuck in one event's astronomically many complex events still obeys Ctrl-C and
SIGTERM, and streams its output in bounded memory (issue #14 items 6 and 9): the compiled
kernel hands control back to Python every work budget (``kernel.BUDGET_UNITS``), where
the signal handlers run, and resumes its enumeration mid-event after flushing output
arrays that stay at their cap (``kernel.OUT_CAP``).

Each test runs ``python -m cer_cli match`` in a subprocess that would never end on its
own (hard timeouts catch a hang), signals it once it is deep in the kernel and checks the
exit code, the one line on stderr and that no partial file is left."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[1]
#: How long a signalled run may take to exit (it acts within a budget, ~10 ms compiled).
EXIT_WITHIN = 3.0


def _log(d: Path, types: list[str]) -> str:
    pl.DataFrame({"type": types, "x": list(range(len(types)))}).write_csv(d / "log.csv")
    return "log.csv"


def _start(d: Path, *args: str, preexec_fn=None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "cer_cli", "match", *args], cwd=d,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "NO_COLOR": "1"}, preexec_fn=preexec_fn,
    )


def _deep_in(proc: subprocess.Popen, d: Path, seconds: float, part: bool) -> None:
    """Wait until the run has gone on for ``seconds`` (after it started writing, with
    ``part``), checking it is still running."""
    deadline = time.monotonic() + 240  # start-up, including a first numba compilation
    while part and not any(n.endswith(".part") for n in os.listdir(d)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never started writing"
        time.sleep(0.05)
    time.sleep(seconds)
    assert proc.poll() is None, proc.communicate()


def _signal(proc: subprocess.Popen, signum: int) -> tuple[int, str, float]:
    t0 = time.monotonic()
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    return proc.returncode, err, time.monotonic() - t0


@pytest.mark.parametrize("signum, code, line", [(signal.SIGINT, 130, "interrupted"),
                                                (signal.SIGTERM, 143, "terminated")])
@pytest.mark.parametrize("mode", ["count", "jsonl"])
def test_a_signal_stops_one_events_endless_enumeration(tmp_path: Path, signum, code, line, mode):
    """``A+ ; B`` over 5,000 As then a B: the B ends 2^5000 - 1 complex events. Counting
    (windowed, so every one is walked) and writing them both stop within a second or so
    of the signal."""
    log = _log(tmp_path, ["A"] * 5000 + ["B"])
    if mode == "count":
        proc = _start(tmp_path, "-e", "A+ ; B WITHIN 6000 EVENTS", log, "--count")
    else:
        proc = _start(tmp_path, "-e", "A+ ; B", log, "-o", "out.jsonl")
    _deep_in(proc, tmp_path, 2.0 if mode == "count" else 1.0, part=mode == "jsonl")
    rc, err, took = _signal(proc, signum)
    assert rc == code, err
    assert err.splitlines()[-1] == line and "Traceback" not in err, err
    assert took < EXIT_WITHIN, took
    assert sorted(os.listdir(tmp_path)) == ["log.csv"]


def _limit_memory() -> None:
    limit = 2_500_000_000
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def test_an_output_heavy_windowed_query_streams_in_bounded_memory(tmp_path: Path):
    """``(A OR B)+ WITHIN 30 EVENTS``: each event ends 2^29 complex events (~8 billion
    rows). Under a 2.5 GB address-space limit the run keeps writing Parquet (output arrays
    at their cap, batches streamed to the writer) until it is interrupted — growing the
    arrays for the whole event would fail with MemoryError or abort."""
    log = _log(tmp_path, ["A", "B"] * 1500)
    proc = _start(tmp_path, "-e", "SELECT * WHERE (A OR B)+ WITHIN 30 EVENTS", log,
                  "-o", "out.parquet", preexec_fn=_limit_memory)
    _deep_in(proc, tmp_path, 6.0, part=True)
    part = next(n for n in os.listdir(tmp_path) if n.endswith(".part"))
    assert (tmp_path / part).stat().st_size > 0  # batches are being written
    rc, err, took = _signal(proc, signal.SIGINT)
    assert rc == 130, err
    assert err.splitlines()[-1] == "interrupted" and "MemoryError" not in err, err
    assert took < EXIT_WITHIN, took
    assert sorted(os.listdir(tmp_path)) == ["log.csv"]


_PEAK = """
from cer_cli.plan import plan
from cer_cli.query.parser import parse
from tests.builders import events_frame, letters
engine = plan(parse("SELECT * WHERE (A OR B)+ WITHIN 12 EVENTS")).executor()
engine._out_cap = 1000
batches = 0
for batch in engine.run_batches(events_frame(letters("AB" * 20))):
    batches += 1
k = engine._k
print(batches, engine.stats.matches, k.out_peak, len(k.o_start), len(k.o_pos))
"""


def test_output_arrays_stay_at_their_cap():
    """Events with 2^11 complex events each leave in batches of at most ``out_cap``
    matches, and the output arrays never grow past it."""
    proc = subprocess.run([sys.executable, "-c", _PEAK], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    batches, matches, peak, m, e = map(int, proc.stdout.split())
    assert matches > 20 * 2 ** 11 and batches >= matches // 1000
    assert 0 < peak <= 1000 and m == 1001 and e == 4000
