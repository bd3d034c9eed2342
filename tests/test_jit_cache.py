"""numba's cache and the kernels that span modules (``engine.jit``).

numba stamps a cached function with its own source file only. The hash join's entry point
(``pcea_kernel.run_events``) inlines ``ordered_kernel``'s functions, so an edit or a
``git pull`` that changed only ``ordered_kernel.py`` left the stale machine code in use,
silently: ``jit.compiled`` now stamps every function with all its modules' sources."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba")

ROOT = Path(__file__).resolve().parents[1]

ENTRY = """
from cer_cli.engine.jit import njit_plain
from kmod_b import value


@njit_plain
def entry(x):
    return x + value()
"""

HELPER = """
from cer_cli.engine.jit import njit_inline


@njit_inline
def value():
    return {value}
"""

RUN = """
from cer_cli.engine import jit
print(jit.compiled("kmod_a", "kmod_b")["entry"](1))
"""


def test_a_helper_module_edit_recompiles_its_callers(tmp_path: Path) -> None:
    """Run 1 compiles ``entry`` (which inlines ``value`` from another module) into the
    cache; only the helper's module changes; run 2 must see the change (it printed the
    old result, 2, loading ``entry`` from the cache)."""
    (tmp_path / "kmod_a.py").write_text(ENTRY)
    helper = tmp_path / "kmod_b.py"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "NUMBA_DISABLE_JIT": "0",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
           "PYTHONDONTWRITEBYTECODE": "1"}

    def run() -> str:
        out = subprocess.run([sys.executable, "-c", RUN], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    helper.write_text(HELPER.format(value=1))
    assert run() == "2"
    assert run() == "2"  # loaded from the cache
    assert any((tmp_path / "cache").rglob("*.nbi"))
    helper.write_text(HELPER.format(value=100))
    assert run() == "101"
