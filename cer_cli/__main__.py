"""`python -m cer_cli` and the `cer` script (pyproject's [project.scripts]).

Signal handling is installed here, before the heavy imports (click, rich, polars, numba take
a few hundred milliseconds): Ctrl-C, SIGTERM or SIGHUP at any moment prints one line and exits
130, 143 or 129, never a traceback.
"""

import signal

from cer_cli import signals


def main() -> None:
    signals.install()
    try:
        try:
            from cer_cli.cli import main as cli_main
        except Exception:  # e.g. a RuntimeError wrapping the signal's exception (__set_name__)
            signals.check()
            raise
    except signals.Interrupted as e:
        signals.exit_for(e)
        return
    except KeyboardInterrupt:
        signals.exit_for(signals.Interrupted(signal.SIGINT))
        return
    cli_main()


if __name__ == "__main__":
    main()
