"""A run stuck in one event's astronomically many complex events still obeys Ctrl-C and
SIGTERM, and streams its output in bounded memory (issue #14 items 6 and 9): the compiled
kernel hands control back to Python every work budget (``kernel_state.BUDGET_UNITS``), where
the signal handlers run, and resumes its enumeration mid-event after flushing output
arrays that stay at their cap (``kernel_state.OUT_CAP``).

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


def _guarded(tmp_path: Path, body: str) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``body`` in a process whose signals cer handles, with a guard of 0.5 s whose
    ``before_exit`` removes a file (as a Spark run's removes its temporary output)."""
    part = tmp_path / ".out.cer-1.part"
    part.write_text("half")
    code = (
        "import os, signal, threading, time\n"
        "from cer_cli import signals\n"
        "signals.install()\n"
        f"signals.guard(0.5, lambda: None, lambda: os.unlink({str(part)!r}))\n"
        + body
    )
    t = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    return out, time.monotonic() - t


def test_a_stuck_main_thread_still_exits_by_the_deadline(tmp_path: Path):
    """A library call that swallows the signal's exception while it waits (pyspark unwinding
    with a py4j call that waits for the running job) cannot keep a guarded run alive: it
    ends by the deadline with the signal's code and one line, its temporary file gone."""
    out, took = _guarded(tmp_path, (
        "sent = False\n"
        "while True:\n"
        "    try:\n"
        "        if not sent:\n"
        "            sent = True\n"
        "            os.kill(os.getpid(), signal.SIGTERM)\n"
        "        time.sleep(10)\n"
        "    except BaseException:\n"
        "        pass  # swallowed, as the stuck library call does\n"
    ))
    assert out.returncode == 143, out.stderr
    assert out.stderr.strip().splitlines() == ["terminated"]
    assert not (tmp_path / ".out.cer-1.part").exists()
    assert took < 10  # not after the 10 s sleep


def test_a_signal_another_thread_receives_still_ends_a_guarded_run(tmp_path: Path):
    """The kernel may deliver a signal to any thread that does not block it; Python runs
    the handler only when the main thread next runs Python code, which a blocking call
    (a py4j call waiting for the JVM) delays for as long as it blocks. The guard hears of
    it all the same (``signal.set_wakeup_fd``). Here the main thread blocks the signal, so
    that only another thread can receive it, and waits on a pipe that is never written; the
    signal comes once it waits."""
    out, took = _guarded(tmp_path, (
        "threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()  # while read waits\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\n"
        "r, w = os.pipe()\n"
        "os.read(r, 1)\n"
    ))
    assert out.returncode == 130, out.stderr
    assert out.stderr.strip().splitlines() == ["interrupted"]
    assert not (tmp_path / ".out.cer-1.part").exists()
    assert took < 10


def test_without_a_guard_a_signal_unwinds_as_before(tmp_path: Path):
    """The guard is armed only where a library may hold the main thread (Spark): a plain run
    is not cut short while its finally blocks clean up, and the run that ends disarms it."""
    code = (
        "import os, signal, time\n"
        "from cer_cli import signals\n"
        "previous = signals.install()\n"
        "signals.guard(0.2, lambda: None, lambda: None)\n"
        "signals.restore(previous)\n"
        "signals.install()\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(5)\n"
        "except signals.Interrupted:\n"
        "    time.sleep(1.5)  # a slow cleanup\n"
        "    print('cleaned')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.strip() == "cleaned", out.stderr


def test_a_signal_where_python_can_only_print_it_prints_no_traceback():
    """A signal whose ``Interrupted`` is raised where Python cannot propagate it (here a
    ``__del__``; in a run, llvmlite's ctypes callback while numba loads the kernel) is not
    printed as "Exception ignored ... Traceback": the next checkpoint raises it again, and
    ``restore`` puts the interpreter's own hook back."""
    code = (
        "import os, signal, sys\n"
        "from cer_cli import signals\n"
        "class Dropped:\n"
        "    def __del__(self):\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "previous = signals.install()\n"
        "Dropped()\n"
        "try:\n"
        "    signals.check()\n"
        "except signals.Interrupted as error:\n"
        "    print('checked', error.exit_code)\n"
        "signals.restore(previous)\n"
        "print(sys.unraisablehook is sys.__unraisablehook__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=30)
    assert out.stdout.split() == ["checked", "130", "True"], out
    assert "Traceback" not in out.stderr and "Exception ignored" not in out.stderr, out.stderr


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process, its threads included (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("query", [
    "A AS a ; !(A AS b FILTER b.v > a.v) WITHIN 20000 EVENTS",
    "SELECT * WHERE A AS a ; !(A AS b FILTER b.v > a.v) ; A AS c WITHIN 3000 EVENTS",
], ids=["trailing", "between"])
def test_a_signal_stops_the_absence_scan(tmp_path: Path, query):
    """A correlated absence over a wide window: every candidate scans the ψ events of its
    gap (40,000 events, gaps of thousands: ~10^8 pairs and more), which used to be one
    polars join that a Ctrl-C could not interrupt. The scan now goes in groups of pairs,
    so SIGINT, sent once the run has spent 4 s of CPU (past start-up, inside the scan),
    ends it with 130 within a second, its output file removed."""
    import random

    rng = random.Random(1)
    pl.DataFrame({"type": ["A"] * 40_000, "v": [rng.randrange(100) for _ in range(40_000)]}
                 ).write_csv(tmp_path / "log.csv")
    _stops_after_4s_of_cpu(tmp_path, query)


def _stops_after_4s_of_cpu(tmp_path: Path, query: str) -> None:
    """``cer match -e query log.csv -o out.csv``, sent SIGINT once it has spent 4 s of CPU:
    it ends with 130 and one line within a second, and leaves no file."""
    proc = _start(tmp_path, "-e", query, "log.csv", "-o", "out.csv", "--no-progress",
                  preexec_fn=_limit_memory)
    deadline = time.monotonic() + 240
    while _cpu_seconds(proc.pid) < 4.0:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.05)
    rc, err, took = _signal(proc, signal.SIGINT)
    assert rc == 130, err
    assert err.splitlines()[-1] == "interrupted" and "Traceback" not in err, err
    assert took < 1.0, took
    assert sorted(os.listdir(tmp_path)) == ["log.csv"]


def test_a_signal_stops_the_next_match_scan(tmp_path: Path):
    """The next-match scan (``engine.next_match``) over a log whose values only fall: no run
    ever meets its next event, so each scans every later event of its window (~10^10 steps
    in all). The compiled scan returns to Python every ``BUDGET`` scanned events: SIGINT,
    sent once the run has spent 4 s of CPU, ends it with 130 within a second, no file left."""
    n = 300_000
    pl.DataFrame({"type": ["A"] * n, "v": list(range(n, 0, -1))}).write_csv(tmp_path / "log.csv")
    _stops_after_4s_of_cpu(tmp_path, "A AS a ;> A AS b FILTER b.v > a.v WITHIN 200000 EVENTS")


IGNORED_PROBE = """
import signal
from cer_cli import signals
signals.install()
import cer_cli.io.read  # imports polars
for line in open("/proc/self/status"):
    if line.startswith("SigIgn"):
        print(int(line.split()[1], 16) >> (signal.SIGINT - 1) & 1)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_a_sigint_the_parent_ignored_stays_ignored_once_polars_is_imported():
    """A background job (``cer match … &`` in a script) inherits SIGINT ignored, and cer
    leaves it so. Importing polars installed polars' own SIGINT handler over it: a SIGINT
    then cancelled a running polars query, and the schema pass ended early without an error
    (the run went on with no event types, warning that the log had none). The reader
    ignores it again at once (``signals.keep_ignored``)."""
    out = subprocess.run(
        [sys.executable, "-c", IGNORED_PROBE], cwd=ROOT, capture_output=True, text=True,
        timeout=120, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1", "SIGINT is no longer ignored at the OS level"


def test_a_background_run_signalled_with_sigint_runs_to_its_end(tmp_path: Path):
    """The same job end to end: signalled while it reads its log, it ends as if never
    signalled (exit 0, every match, no warning)."""
    n = 600_000
    (tmp_path / "log.csv").write_text(
        "type,t\n" + "".join(f"{'ABC'[i % 3]},{i}\n" for i in range(n)))
    proc = _start(tmp_path, "-e", "A ; B WITHIN 1 EVENTS", "log.csv", "--time-column", "t",
                  "--count", preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    for delay in (0.3, 0.2, 0.2, 0.2):
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out == f"{n // 3}\n" and "warning" not in err, (out, err)
