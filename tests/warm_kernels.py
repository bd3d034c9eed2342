"""Compile every numba kernel of the engine into numba's on-disk cache, once.

``python -m tests.warm_kernels`` (``make install`` runs it when it creates the venv) and the
test session's ``compiled_kernels`` fixture (``tests/conftest.py``) both call ``warm()``: a
fresh clone's first ``make test`` then finds the machine code ready instead of spending about
a minute of both cores compiling it, and so does its first ``cer match`` on a large log (13-22
s of compile otherwise). With numba's cache warm it takes a few seconds (two imports and cache
loads). Without numba, or with ``NUMBA_DISABLE_JIT``, there is nothing to compile.
"""

from __future__ import annotations

import os
import subprocess
import sys

#: Queries whose runs, with ``CER_JIT=1``, call every numba-compiled function of the engine
#: (the CEA kernel's enumeration and counting, partitions, strategies, consumption, the
#: next-match scan, the hash join).
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


def warm() -> None:
    """Run ``WARM_QUERIES`` compiled, in two processes at once (the hash join's kernel beside
    the rest), so that this process does not import numba. Raises ``RuntimeError`` with a
    process's output when one fails."""
    from cer_cli.engine import jit

    if not jit.HAVE_NUMBA or os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        return
    env = {**os.environ, "CER_JIT": "1"}
    rest = [q for q in WARM_QUERIES if q not in _WARM_APART]
    runs = [subprocess.Popen([sys.executable, "-c", _WARM, *group], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            for group in (_WARM_APART, rest)]
    for run in runs:
        out, _ = run.communicate(timeout=900)
        if run.returncode != 0:
            raise RuntimeError(out.decode(errors="replace"))


if __name__ == "__main__":
    warm()
