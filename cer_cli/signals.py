"""SIGINT, SIGTERM and SIGHUP as one exception, so that every signal that ends a run unwinds
the stack (``finally`` blocks remove temporary output files) and ends with one line.

Kept free of heavy imports on purpose: the entry point installs it before importing click,
rich, polars or numba, so Ctrl-C at any moment prints "interrupted", never a traceback.
"""

from __future__ import annotations

import os
import signal
import sys

#: signal -> (exit code, the one line printed on stderr). 128 + the signal's number, as shells do.
EXITS: dict[int, tuple[int, str]] = {signal.SIGINT: (130, "interrupted")}
if hasattr(signal, "SIGTERM"):
    EXITS[signal.SIGTERM] = (143, "terminated")
if hasattr(signal, "SIGHUP"):
    EXITS[signal.SIGHUP] = (129, "terminated")

_state: dict = {"raised": False, "signum": None, "installed": set()}


class Interrupted(BaseException):
    """A signal asked the run to stop. A ``BaseException`` (like ``KeyboardInterrupt``) so
    that ``except Exception`` does not swallow it; unlike ``KeyboardInterrupt``, click does
    not turn it into ``Abort`` (which prints an extra blank line)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return EXITS.get(self.signum, (128 + self.signum, ""))[0]

    @property
    def message(self) -> str:
        return EXITS.get(self.signum, (0, "interrupted"))[1]


def _handler(signum: int, frame: object) -> None:
    if _state["raised"]:
        # A second signal while unwinding: leave at once. A temporary file left behind is
        # recognisable by its name and removed by the next write to the same target.
        os._exit(EXITS.get(signum, (128 + signum, ""))[0])
    _state["raised"] = True
    _state["signum"] = signum
    raise Interrupted(signum)


def check() -> None:
    """Raise the signal's ``Interrupted`` again if one arrived. CPython drops, silently, an
    exception that a signal handler raises while Python code runs for some C functions (a
    ``__hash__``/``__eq__`` inside a dict lookup; ``__set_name__`` turns it into a
    RuntimeError): measured ~5% of Ctrl-Cs during the imports. Checkpoints between batches
    and at exit make sure such a run still stops, with the signal's exit code."""
    if _state["signum"] is not None:
        raise Interrupted(_state["signum"])


def install() -> dict[int, object]:
    """Route the signals to ``Interrupted``; idempotent. Signals the parent ignored (SIGINT
    of a background job, SIGHUP under nohup) stay ignored; only the main thread can install.
    Returns the previous handlers, for ``restore`` (an in-process caller, e.g. a test)."""
    previous: dict[int, object] = {}
    if signal.getsignal(signal.SIGINT) is not _handler:  # not nested: a fresh run
        _state["raised"] = False
        _state["signum"] = None
    for signum in EXITS:
        handler = signal.getsignal(signum)
        if handler is not signal.SIG_IGN:
            try:
                signal.signal(signum, _handler)
            except ValueError:  # not the main thread: leave Python's handling alone
                return previous
            previous[signum] = handler
            _state["installed"].add(signum)
    return previous


def restore(previous: dict[int, object]) -> None:
    """Put back the handlers ``install`` replaced."""
    for signum, handler in previous.items():
        if handler is not None:
            signal.signal(signum, handler)  # type: ignore[arg-type]
    if previous and previous.get(signal.SIGINT) is not _handler:  # the outermost run ended
        _state["raised"] = False
        _state["signum"] = None
        _state["installed"] = set()


def reclaim() -> None:
    """Put cer's handlers back where a library replaced them: pyspark's SparkContext installs
    its own SIGINT handler, whose KeyboardInterrupt surfaces as py4j tracebacks. Only the
    signals ``install`` routed (in this run) are taken back."""
    for signum in _state["installed"]:
        if signal.getsignal(signum) is not _handler:
            signal.signal(signum, _handler)


def exit_for(error: Interrupted) -> None:
    """Print the signal's one line and exit with its code (never returns)."""
    try:
        sys.stderr.write(error.message + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    sys.exit(error.exit_code)
