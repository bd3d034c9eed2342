"""Where a ``cer match`` run's time goes, phase by phase (README, "Every core: `--jobs`").

``python -m tests.bench.phases match ARGS...`` runs ``cer match ARGS`` in this process with
the phases timed by wrapping the functions that start and end them: the imports, the log's
schema pass and time check, one pass (``io/read.py``), the query's compilation (with the compiled
kernel's load, started beside the read), and the run (the driver, or the pool's feeder and
tasks). It prints, on stderr, each phase's wall time and the process's CPU time over it
(every thread's: polars' and the pool's too), so that the serial phases before the run —
what bounds ``--jobs N``'s speed-up — can be told from the run that N cores share.
"""

from __future__ import annotations

import atexit
import sys
import time

_T0 = time.perf_counter()
_C0 = time.process_time()
_phases: list[tuple[str, float, float]] = []  # (name, wall, cpu)


def _wrap(owner, name: str, label: str) -> None:
    real = getattr(owner, name)

    def timed(*args, **kwargs):
        w, c = time.perf_counter(), time.process_time()
        try:
            return real(*args, **kwargs)
        finally:
            _phases.append((label, time.perf_counter() - w, time.process_time() - c))

    setattr(owner, name, timed)


def _top(i: int) -> float:
    """The phases' wall (0) or CPU (1) time, those nested in read + compile left out."""
    return sum(p[1 + i] for p in _phases if "io/read.py" not in p[0])


def _report() -> None:
    wall, cpu = time.perf_counter() - _T0, time.process_time() - _C0
    lines = ["| phase | wall s | CPU s (all threads) |", "|---|---|---|"]
    lines += [f"| {name} | {w:.2f} | {c:.2f} |" for name, w, c in _phases]
    lines.append(f"| the rest (options, notes, exit) | {wall - _top(0):.2f} |"
                 f" {cpu - _top(1):.2f} |")
    lines.append(f"| whole process (less the interpreter's start) | {wall:.2f} | {cpu:.2f} |")
    print("\n".join(lines), file=sys.stderr)


def main(argv: list[str]) -> None:
    import cer_cli.cli as cli
    from cer_cli.api import compile_query  # noqa: F401 - imported by _compile: time it here
    from cer_cli.io import read
    from cer_cli.plan import pool  # noqa: F401

    _phases.append(("imports (cli, polars, the planner)", time.perf_counter() - _T0,
                    time.process_time() - _C0))

    _wrap(read, "_schema_and_times", "- of which the schema pass and time check (io/read.py)")
    _wrap(cli, "_compile", "read + compile (the kernel loads beside them)")
    _wrap(cli, "_run_match", "run (driver or pool)")
    atexit.register(_report)
    from cer_cli.__main__ import main as cer

    sys.argv = ["cer", *argv]
    cer()


if __name__ == "__main__":
    main(sys.argv[1:])
