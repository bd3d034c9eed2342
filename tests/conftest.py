"""Test-suite settings shared by every module.

Property tests run without a deadline (the CI machine is small and shared) and, when the
``CI`` environment variable is set, derandomized: CI then checks the same examples on every
run, so a red CI always means a change broke something. Local runs keep exploring new
examples; `make test-slow` runs the long explorations.
"""

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "ci", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI") else "default")


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels():
    """Compile the numba kernel once, before the first test: numba caches the machine code
    on disk, so the first test to run a large log no longer pays a cold compile (~80 s on a
    small machine) and no test's time depends on which test ran first. In subprocesses, so
    the test process itself does not import numba. Without numba, or with
    ``NUMBA_DISABLE_JIT``, there is nothing to compile.

    One worker compiles (a lock; the others then find the cache warm), in two processes at
    once: the hash join's kernel beside the rest (``tests/warm_kernels.py``, which ``make
    install`` runs too, so a fresh clone's cache is warm before the first test). Every worker
    compiling everything at once cost a fresh clone's CI about 80 s of both cores."""
    import fcntl
    import tempfile

    from tests import warm_kernels

    lock = os.path.join(tempfile.gettempdir(), f"cer-tests-compile-{os.getuid()}.lock")
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        warm_kernels.warm()
    yield
