"""Peak memory of a child process, measured so that the parent's memory does not count.

When a process calls exec, Linux keeps the peak RSS of the memory map it had until then
(``exec_mmap``). A child made by fork or vfork had its parent's map, so the ``ru_maxrss``
that ``os.wait4`` (or the child's own ``RUSAGE_SELF``) reports is at least the parent's
size: a child of a 350 MB pytest worker "peaks" at 350 MB whether it uses 200 MB or 300 MB,
and a test comparing two runs' peaks passes whatever the runs do (measured: a `cer match`
of 5,000 and of 100,000 events, 210 and 295 MB alone, both 346.2 MB from a worker).

So a command is measured through this file run as a small launcher (``python -S``, ~10 MB):
it starts the command, waits for it and reports its peak (``RUSAGE_CHILDREN``), its wall
time and CPU time. Inside a child, ``SELF_PEAK_KB`` reads ``VmHWM`` of its own map, which
exec started afresh.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: An expression for code run in a child: its own peak RSS in KB (``VmHWM``), never its
#: parent's (``resource.getrusage(RUSAGE_SELF)`` would include that).
SELF_PEAK_KB = ("int(next(line.split()[1] for line in open('/proc/self/status')"
                " if line.startswith('VmHWM:')))")
#: The same as a function ``_self_peak_kb()``, to put before such code.
SELF_PEAK_DEF = f"def _self_peak_kb():\n    return {SELF_PEAK_KB}\n"


@dataclass
class Measured:
    """A command's exit code, outputs, peak RSS (MB), wall and CPU seconds."""

    rc: int
    stdout: str
    stderr: str
    peak_mb: float
    wall_s: float
    cpu_s: float
    timed_out: bool = False


def run(cmd: list[str], *, cwd: Path | str | None = None, env: dict | None = None,
        timeout: float | None = None, address_space: int = 0) -> Measured:
    """Run ``cmd`` (stdin empty, outputs captured) and measure it alone. ``address_space``:
    an ``RLIMIT_AS`` in bytes for it (0: none), so a run that would eat the machine fails.
    On ``timeout`` the command and the launcher are killed (``timed_out``)."""
    with tempfile.TemporaryDirectory(prefix="cer-peak-") as tmp:
        report = Path(tmp) / "report.json"
        launcher = [sys.executable, "-S", __file__, str(report), str(address_space), *cmd]
        proc = subprocess.Popen(launcher, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=cwd, env=env,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return Measured(-9, out, err, 0.0, float(timeout or 0), 0.0, timed_out=True)
        if not report.exists():  # the launcher itself failed
            return Measured(proc.returncode or 1, out, err, 0.0, 0.0, 0.0)
        r = json.loads(report.read_text())
        return Measured(r["rc"], out, err, r["peak_kb"] / 1024, r["wall"], r["cpu"])


def cer_match(args: list[str], *, cwd: Path | str, env: dict | None = None,
              timeout: float | None = None, address_space: int = 0) -> Measured:
    """``cer match ARGS`` measured by ``run`` (``NO_COLOR`` set, ``env`` over this process's
    environment); it must succeed."""
    got = run([sys.executable, "-m", "cer_cli", "match", *args], cwd=cwd,
              env={**os.environ, "NO_COLOR": "1", **(env or {})}, timeout=timeout,
              address_space=address_space)
    assert got.rc == 0, (got.stdout + got.stderr)[-3000:]
    return got


def _launch(argv: list[str]) -> None:
    """The launcher: ``REPORT ADDRESS_SPACE CMD...``."""
    import resource
    import time

    report, limit, cmd = argv[0], int(argv[1]), argv[2:]
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    started = time.perf_counter()
    rc = subprocess.call(cmd)
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    Path(report).write_text(json.dumps({
        "rc": rc, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
        "peak_kb": usage.ru_maxrss}))


if __name__ == "__main__":
    _launch(sys.argv[1:])
