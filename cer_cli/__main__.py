"""`python -m cer_cli` and the `cer` script (pyproject's [project.scripts]).

Signal handling is installed here, before the heavy imports (click, rich, polars, numba take
a few hundred milliseconds): Ctrl-C, SIGTERM or SIGHUP at any moment prints one line and exits
130, 143 or 129, never a traceback.
"""

import gc
import os
import signal

from cer_cli import signals
from cer_cli.io.files import standard_streams


def main() -> None:
    # No garbage collection during start-up: the imports and the compiled query are ~1M
    # objects that live to the end, and collecting while they are made cost ~45 ms of a
    # 0.4 s run (issue #15); the CLI turns it back on before work that grows with the log.
    gc.disable()
    # numpy's OpenBLAS starts a thread pool when numpy is imported: ~55 ms of `import numpy`
    # here (0.14 s -> 0.085 s with one thread). cer does no linear algebra (the kernel works
    # on integer arrays), so one BLAS thread costs nothing; a value the user set is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # A closed descriptor 0-2 is opened on /dev/null (no file cer opens takes its number);
    # standard output's failures name it, and a reader that left ends the run quietly.
    standard_streams()
    signals.install()
    try:
        try:
            from cer_cli.cli import main as cli_main
        except Exception:  # e.g. a RuntimeError wrapping the signal's exception (__set_name__)
            signals.check()
            raise
    except signals.Interrupted as e:
        signals.exit_for(e, program=True)
        return
    except KeyboardInterrupt:
        signals.exit_for(signals.Interrupted(signal.SIGINT), program=True)
        return
    cli_main(gc_paused=True, program=True)


if __name__ == "__main__":
    main()
