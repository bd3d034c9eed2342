"""The hash join's kernel against another tree's, in one process (README, "The comparison
chain (hash join)").

``python -m tests.bench.kernel_ab BASE [QUERY] [ROUNDS]`` loads ``BASE``'s
``cer_cli/engine/pcea_kernel.py`` (e.g. a ``git archive`` of main) beside this tree's, and
runs ``QUERY`` (a name of ``correlation.CHAIN_QUERIES``, default the comparison chain) on the
1M-event next-match log with each kernel in turn, ``ROUNDS`` times, alternating which goes
first, after a warm-up (where each kernel loads or compiles). It prints each kernel's CPU
seconds (least and median) and the per-round ratio this / base.

Why in one process: on this shared machine two processes run minutes apart differ by 10-20%
(other work's caches), more than most kernel changes; alternating runs of one process see the
same conditions. Both kernels share this tree's ``ordered_kernel`` and Python side
(``pcea_state``), so only ``pcea_kernel.py`` may differ.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from pathlib import Path

from cer_cli.api import compile_query, read_events
from cer_cli.engine import driver, pcea_state
from tests.bench import correlation

DATA = Path(__file__).resolve().parents[2] / "bench-out" / "data"
_BASE = "cer_base_pcea_kernel"
_THIS = "cer_cli.engine.pcea_kernel"
_ORDERED = "cer_cli.engine.ordered_kernel"


def _load_base(tree: Path) -> None:
    """``tree``'s kernel module under another name: its functions are marked for
    ``engine.jit`` under that name and compiled (or loaded from numba's cache) apart."""
    spec = importlib.util.spec_from_file_location(
        _BASE, tree / "cer_cli" / "engine" / "pcea_kernel.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[_BASE] = module
    spec.loader.exec_module(module)


def compare(tree: Path, name: str = "comparison chain", rounds: int = 8) -> list[str]:
    _load_base(tree)
    log = read_events([str(correlation.ensure_next_log(DATA, correlation.NEXT_SIZE))],
                      batch_size=262_144)
    query = correlation.CHAIN_QUERIES[name]
    sides = {"base": (_BASE, _ORDERED), "this": (_THIS, _ORDERED)}
    cpu: dict[str, list[float]] = {side: [] for side in sides}
    found: dict[str, int] = {}
    for r in range(rounds + 1):
        order = list(sides.items()) if r % 2 else list(sides.items())[::-1]
        for side, modules in order:
            pcea_state.MODULES = modules
            executor = compile_query(query, schema=log.schema).executor()
            started = time.process_time()
            found[side] = sum(len(b) for b in driver.run_batches(executor, log.batches()))
            if r:  # the first round loads (or compiles) the kernels
                cpu[side].append(time.process_time() - started)
    if found["base"] != found["this"]:
        raise SystemExit(f"the kernels disagree: {found}")
    ratios = [a / b for a, b in zip(cpu["this"], cpu["base"], strict=True)]
    return [f"{side}: {found[side]:,} matches, CPU s least {min(v):.3f}, median"
            f" {statistics.median(v):.3f}" for side, v in cpu.items()] + [
        "this / base per round: " + " ".join(f"{x:.3f}" for x in ratios)
        + f" (median {statistics.median(ratios):.3f})"]


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args:
        raise SystemExit(__doc__)
    print("\n".join(compare(Path(args[0]), *(args[1:2] or ["comparison chain"]),
                            *([int(args[2])] if len(args) > 2 else []))))
