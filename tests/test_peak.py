"""The memory tests' measure (``tests/peak.py``) counts the measured process alone, not the
process measuring it: a parent holding 400 MB must not make its children look that large."""

from __future__ import annotations

import subprocess
import sys
import time

from tests import peak

PARENT_MB = 400
TOUCH = "b = bytearray({mb} * 2**20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"


def _hold(mb: int) -> bytearray:
    """``mb`` MB resident in this process (every page written)."""
    held = bytearray(mb * 2**20)
    for i in range(0, len(held), 4096):
        held[i] = 1
    return held


def test_a_childs_peak_is_its_own_not_its_parents():
    held = _hold(PARENT_MB)
    small = peak.run([sys.executable, "-c", TOUCH.format(mb=20)])
    large = peak.run([sys.executable, "-c", TOUCH.format(mb=120)])
    assert len(held) and small.rc == large.rc == 0, small.stderr + large.stderr
    assert small.peak_mb < 100, small.peak_mb
    assert 120 < large.peak_mb < 200, large.peak_mb
    assert large.peak_mb - small.peak_mb > 80


def test_a_child_reads_its_own_peak():
    held = _hold(PARENT_MB)
    code = peak.SELF_PEAK_DEF + TOUCH.format(mb=120) + "print(_self_peak_kb() // 1024)"
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert len(held) and got.returncode == 0, got.stderr
    assert 120 < int(got.stdout) < 200, got.stdout


def test_the_launcher_reports_exit_codes_and_timeouts():
    failed = peak.run([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"])
    assert (failed.rc, failed.stdout, failed.timed_out) == (3, "out\n", False)
    started = time.perf_counter()
    slow = peak.run([sys.executable, "-c", "import time; time.sleep(60)"], timeout=1)
    assert slow.timed_out and time.perf_counter() - started < 20  # killed, not waited for
