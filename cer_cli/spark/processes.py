"""What a signal does to a Spark run: every process below cer is SIGKILLed (the JVM,
pyspark's daemon and workers), and what the run was writing and the JVM's scratch files are
removed, within ``SIGNAL_DEADLINE`` however stuck pyspark's main thread is."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cer_cli import signals
from cer_cli.io.contract import local_path
from cer_cli.io.files import remove_open_parts

#: Seconds from a signal to the end of a Spark run, however stuck its main thread is.
SIGNAL_DEADLINE = 1.0
_stopping: dict = {"pids": {}, "partial": None, "scratch": None}


def watch() -> None:
    """From here on, a signal ends the run within ``SIGNAL_DEADLINE``: ``stop_processes``
    at once, ``end_run`` before the exit (``signals.guard``)."""
    _stopping.update(pids={}, partial=None)
    signals.guard(SIGNAL_DEADLINE, stop_processes, end_run)  # pyspark can hold the main thread


def remove_at_signal(scratch: str) -> None:
    """Have a signal's exit remove the directory ``scratch`` (the JVM's scratch files)."""
    _stopping["scratch"] = scratch


@contextmanager
def writing(output: str, mode: str) -> Iterator[None]:
    """While the block has Spark write the directory ``output`` (with save ``mode``), a
    signal's exit removes what it wrote (``_remove_partial``)."""
    _stopping["partial"] = (output, mode)
    try:
        yield
    except Exception:
        signals.check()  # failed because of a signal: keep it marked for removal
        _stopping["partial"] = None
        raise
    _stopping["partial"] = None


def stop_processes() -> None:
    """On a signal (``signals.guard``): SIGKILL every process below cer (the JVM, pyspark's
    daemon and its Python workers, which would compute on after cer exits). The main
    thread's pending py4j calls then fail at once instead of waiting for the job. SIGKILL,
    not SIGTERM: a JVM shutting down with a job running prints Java stack traces. Logging
    is switched off: py4j logs the lost connection with tracebacks, some through the root
    logger (cer itself does not log); so are the tracebacks of pyspark's threads that lose
    the JVM (its accumulator server prints them as a ``socketserver``)."""
    logging.disable(logging.CRITICAL)
    threading.excepthook = lambda args: None
    try:
        from pyspark import SparkContext

        server = getattr(SparkContext._active_spark_context, "_accumulatorServer", None)
        if server is not None:
            server.handle_error = lambda request, address: None
    except Exception:
        pass
    _kill_processes()


def end_run() -> None:
    """Before a signal's exit: SIGKILL what is still below cer, then remove what the run
    was writing and the JVM's scratch files (the JVM is gone, it writes no more)."""
    _kill_processes()
    remove_open_parts()
    if _stopping["partial"] is not None:
        _remove_partial(*_stopping["partial"])
    if _stopping["scratch"] is not None:
        shutil.rmtree(_stopping["scratch"], ignore_errors=True)


def _kill_processes() -> None:
    """SIGKILL every process below cer, and those found below it before (a process whose
    parent died moves to init)."""
    _stopping["pids"].update(_descendants())
    for pid, start in list(_stopping["pids"].items()):
        fields = _stat(pid)
        if fields is not None and fields[19] == start and fields[0] not in "ZX":  # not reused
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _stat(pid: int) -> list[str] | None:
    """Fields of ``/proc/PID/stat`` after the command name: state, ppid, ..."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def _descendants() -> dict[int, str]:
    """Every process below this one (Linux ``/proc``; elsewhere none), pid -> start time."""
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return {}
    children: dict[int, list[int]] = {}
    started: dict[int, str] = {}
    for pid in pids:
        fields = _stat(pid)
        if fields and len(fields) > 19:
            children.setdefault(int(fields[1]), []).append(pid)
            started[pid] = fields[19]
    found: dict[int, str] = {}
    todo = [os.getpid()]
    while todo:
        for kid in children.get(todo.pop(), ()):
            if kid not in found:
                found[kid] = started[kid]
                todo.append(kid)
    return found


def _remove_partial(output: str, mode: str) -> None:
    """Remove what an interrupted ``spark_write`` left of ``output``: the directory, or its
    content if it existed (empty) before the run. Local paths only."""
    if (where := local_path(output)) is None:
        return
    path = Path(where)
    if mode != "overwrite":
        shutil.rmtree(path, ignore_errors=True)
        return
    try:
        entries = list(path.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
