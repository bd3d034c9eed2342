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


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels():
    """Compile the numba kernel once, before the first test: numba caches the machine code
    on disk, so the first test to run a large log no longer pays a cold compile (~50 s on a
    small machine) and no test's time depends on which test ran first. In a subprocess, so
    the test process itself does not import numba. Without numba, or with
    ``NUMBA_DISABLE_JIT``, there is nothing to compile."""
    from cer_cli.engine import jit

    if jit.HAVE_NUMBA and os.environ.get("NUMBA_DISABLE_JIT", "0") in ("", "0"):
        subprocess.run([sys.executable, "-c", _WARM, *WARM_QUERIES],
                       env={**os.environ, "CER_JIT": "1"}, capture_output=True, timeout=900,
                       check=True)
    yield
