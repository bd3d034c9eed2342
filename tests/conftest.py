"""Test-suite settings shared by every module.

Property tests run without a deadline (the CI machine is small and shared) and, when the
``CI`` environment variable is set, derandomized: CI then checks the same examples on every
run, so a red CI always means a change broke something. Local runs keep exploring new
examples; `make test-slow` runs the long explorations.
"""

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "ci", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI") else "default")


#: Queries whose runs, with ``CER_JIT=1``, call every numba-compiled function of the engine
#: (the CEA kernel's enumeration and counting, partitions, strategies, consumption, the
#: next-match scan, the hash join): run once per session by ``compiled_kernels``.
WARM_QUERIES = (
    "A ; B+ ; C",
    "SELECT * FROM S WHERE A AS a ; B AS b PARTITION BY [id] WITHIN 4 EVENTS",
    "SELECT MAX * FROM S WHERE A ; B+ WITHIN 4 EVENTS CONSUME BY ANY",
    "SELECT NEXT * FROM S WHERE A ; C LIMIT 2",
    "SELECT LAST * FROM S WHERE A ; C",
    "SELECT STRICT * FROM S WHERE A ; B",
    "A AS a ;> B AS b FILTER b.v > a.v WITHIN 5 EVENTS",
    "A AS a ; B AS b FILTER a.id = b.id WITHIN 5 EVENTS",
)

_WARM = """
import sys
import polars as pl
import cer_cli
frame = pl.DataFrame({"type": list("ABBCABCACB" * 3), "v": list(range(30)), "id": [i % 3 for i in range(30)]})
for text in sys.argv[1:]:
    cer_cli.match(frame, text, stream="S")
    cer_cli.count(frame, text, stream="S")
"""


#: The hash join's kernel, about two thirds of a cold compile: compiled beside the others.
_WARM_APART = ("A AS a ; B AS b FILTER a.id = b.id WITHIN 5 EVENTS",)


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels():
    """Compile the numba kernel once, before the first test: numba caches the machine code
    on disk, so the first test to run a large log no longer pays a cold compile (~80 s on a
    small machine) and no test's time depends on which test ran first. In subprocesses, so
    the test process itself does not import numba. Without numba, or with
    ``NUMBA_DISABLE_JIT``, there is nothing to compile.

    One worker compiles (a lock; the others then find the cache warm), in two processes at
    once: the hash join's kernel beside the rest. Every worker compiling everything at once
    cost a fresh clone's CI about 80 s of both cores; this takes about 50."""
    from cer_cli.engine import jit

    if jit.HAVE_NUMBA and os.environ.get("NUMBA_DISABLE_JIT", "0") in ("", "0"):
        import fcntl
        import tempfile

        env = {**os.environ, "CER_JIT": "1"}
        lock = os.path.join(tempfile.gettempdir(), f"cer-tests-compile-{os.getuid()}.lock")
        with open(lock, "w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            rest = [q for q in WARM_QUERIES if q not in _WARM_APART]
            runs = [subprocess.Popen([sys.executable, "-c", _WARM, *group], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                    for group in (_WARM_APART, rest)]
            for run in runs:
                out, _ = run.communicate(timeout=900)
                assert run.returncode == 0, out.decode(errors="replace")
    yield
