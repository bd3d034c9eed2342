"""SIGINT, SIGTERM and SIGHUP as one exception, so that every signal that ends a run unwinds
the stack (``finally`` blocks remove temporary output files) and ends with one line.

Kept free of heavy imports on purpose: the entry point installs it before importing click,
rich, polars or numba, so Ctrl-C at any moment prints "interrupted", never a traceback.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

#: signal -> (exit code, the one line printed on stderr). 128 + the signal's number, as shells do.
EXITS: dict[int, tuple[int, str]] = {signal.SIGINT: (130, "interrupted")}
if hasattr(signal, "SIGTERM"):
    EXITS[signal.SIGTERM] = (143, "terminated")
if hasattr(signal, "SIGHUP"):
    EXITS[signal.SIGHUP] = (129, "terminated")

_state: dict = {"raised": False, "signum": None, "installed": set(), "ignored": set(),
                "guard": None}


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
        code, line = EXITS.get(signum, (128 + signum, "interrupted"))
        if _state["guard"] is not None:  # its processes and files are to go all the same
            _leave(line, _state["guard"])
        os._exit(code)
    _state["raised"] = True
    _state["signum"] = signum
    raise Interrupted(signum)


def guard(seconds: float, on_signal: Callable[[], None], before_exit: Callable[[], None]) -> None:
    """After a signal, end this run within ``seconds`` whatever its main thread does.

    pyspark can hold it in a py4j call that waits for the running job: unwinding makes
    another call on the same connection, and a signal the kernel gives another thread does
    not even interrupt the call. So a helper thread waits on ``signal.set_wakeup_fd``, which
    a signal writes whichever thread receives it: it runs ``on_signal`` at once and
    ``os._exit``s at the deadline. ``before_exit`` runs before either exit (``exit_for``'s
    or the deadline's, which skips ``finally`` blocks: it removes temporary files; it may
    run twice). Armed only while cer handles the signals, until ``restore``."""
    if not _state["installed"]:
        return
    if _state["guard"] is not None:
        _state["guard"].update(seconds=seconds, on_signal=on_signal, before_exit=before_exit)
        return
    import _thread
    import threading

    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except ValueError:  # not the main thread
        os.close(read)
        os.close(write)
        return
    g = {"seconds": seconds, "on_signal": on_signal, "before_exit": before_exit,
         "fds": (read, write), "previous": previous, "said": _thread.allocate_lock()}
    threading.Thread(target=_deadline, args=(g,), name="cer-signal-deadline", daemon=True).start()
    _state["guard"] = g


def _disarm() -> None:
    g = _state["guard"]
    if g is not None:
        _state["guard"] = None
        signal.set_wakeup_fd(g["previous"])
        try:
            os.write(g["fds"][1], b"\0")  # dismisses the helper thread
        except OSError:
            pass
        os.close(g["fds"][1])


def _deadline(g: dict) -> None:
    import time

    signum = 0
    while signum not in EXITS:
        try:
            got = os.read(g["fds"][0], 1)
        except OSError:
            return
        signum = got[0] if got else 0
        if signum == 0:  # disarmed: the run ended without a signal
            os.close(g["fds"][0])
            return
    end = time.monotonic() + g["seconds"]
    try:
        g["on_signal"]()
    except Exception:
        pass
    time.sleep(max(0.0, end - time.monotonic()))
    code, line = EXITS.get(signum, (128 + signum, "interrupted"))
    _leave(line, g)
    os._exit(code)


def _leave(line: str, g: dict | None) -> None:
    """``before_exit`` of the guard (if any), then the signal's line, printed once whichever
    thread (the unwound main one or the deadline's) gets here first."""
    if g is not None:
        try:
            g["before_exit"]()
        except Exception:
            pass
        if not g["said"].acquire(blocking=False):
            return
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def check() -> None:
    """Raise the signal's ``Interrupted`` again if one arrived. CPython drops, silently, an
    exception that a signal handler raises while Python code runs for some C functions (a
    ``__hash__``/``__eq__`` inside a dict lookup; ``__set_name__`` turns it into a
    RuntimeError): measured ~5% of Ctrl-Cs during the imports. Checkpoints between batches
    and at exit make sure such a run still stops, with the signal's exit code."""
    if _state["signum"] is not None:
        raise Interrupted(_state["signum"])


def _unraisable(info: object) -> None:
    """``sys.unraisablehook`` while cer handles the signals: an ``Interrupted`` raised where
    Python can only print it (a ctypes callback of llvmlite while numba loads the kernel, a
    ``__del__``) is already recorded in ``_state``; ``check`` raises it again at the next
    checkpoint, so printing its traceback would only break the promise of one line."""
    if isinstance(getattr(info, "exc_value", None), Interrupted):
        return
    sys.__unraisablehook__(info)  # type: ignore[arg-type]


def install() -> dict[int, object]:
    """Route the signals to ``Interrupted``; idempotent. Signals the parent ignored (SIGINT
    of a background job, SIGHUP under nohup) stay ignored; only the main thread can install.
    Returns the previous handlers, for ``restore`` (an in-process caller, e.g. a test)."""
    previous: dict[int, object] = {}
    if signal.getsignal(signal.SIGINT) is not _handler:  # not nested: a fresh run
        _state["raised"] = False
        _state["signum"] = None
        _state["ignored"] = set()
        _disarm()
    for signum in EXITS:
        handler = signal.getsignal(signum)
        if handler is signal.SIG_IGN:
            _state["ignored"].add(signum)
        else:
            try:
                signal.signal(signum, _handler)
            except ValueError:  # not the main thread: leave Python's handling alone
                return previous
            previous[signum] = handler
            _state["installed"].add(signum)
    if previous and sys.unraisablehook is not _unraisable:
        previous[0] = sys.unraisablehook  # 0: no signal; the hook ``restore`` puts back
        sys.unraisablehook = _unraisable
    return previous


def restore(previous: dict[int, object]) -> None:
    """Put back the handlers ``install`` replaced."""
    if 0 in previous:
        previous = dict(previous)
        sys.unraisablehook = previous.pop(0)  # type: ignore[assignment]
    for signum, handler in previous.items():
        if handler is not None:
            signal.signal(signum, handler)  # type: ignore[arg-type]
    if previous and previous.get(signal.SIGINT) is not _handler:  # the outermost run ended
        _state["raised"] = False
        _state["signum"] = None
        _state["installed"] = set()
        _state["ignored"] = set()
        _disarm()


def reclaim() -> None:
    """Put cer's handlers back where a library replaced them: pyspark's SparkContext installs
    its own SIGINT handler, whose KeyboardInterrupt surfaces as py4j tracebacks. Only the
    signals ``install`` routed (in this run) are taken back; those it left ignored are
    ignored again (``keep_ignored``)."""
    for signum in _state["installed"]:
        if signal.getsignal(signum) is not _handler:
            signal.signal(signum, _handler)
    keep_ignored()


def keep_ignored() -> None:
    """Ignore again the signals the parent ignored (``install``). polars, when imported,
    installs its own SIGINT handler over an inherited SIG_IGN (Python still reports SIG_IGN),
    and a SIGINT then cancels a running polars query: a background job's schema pass ended
    early without an error, its event types empty. Called once polars is imported, before
    any query (``io.read``); only the main thread can (elsewhere it does nothing)."""
    for signum in _state["ignored"]:
        try:
            signal.signal(signum, signal.SIG_IGN)
        except ValueError:  # not the main thread
            return


def exit_for(error: Interrupted, program: bool = False) -> None:
    """Print the signal's one line and exit with its code (never returns). The ``cer``
    program (``program``) and a guarded run (``guard``) end with ``os._exit`` after the
    ``atexit`` functions (the ``finally`` blocks ran while the stack unwound): the
    interpreter's own exit would run finalizers that a signal may have caught half-way —
    py4j's call the JVM (and may wait for it), and LLVM's, after a signal that landed while
    numba loaded a compiled function, crashed the process (SIGSEGV instead of 130). An
    in-process caller gets ``SystemExit``."""
    import atexit

    _leave(error.message, _state["guard"])
    if _state["guard"] is None and not program:
        sys.exit(error.exit_code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed pipe, a full disk: the signal's exit code stands
            pass
    os._exit(error.exit_code)
