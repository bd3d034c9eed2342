"""Where ``-o`` writes, and how: no run leaves a half-written file, and no run writes a file
it did not create or was not named.

* A regular file is written through the descriptor of a temporary file that this run
  created next to it (``O_EXCL``, a random name ``.<name>.cer-<16 hex digits>.part``, mode
  0600), then renamed onto it through a descriptor of its directory. No name is opened twice:
  whoever can write the directory may swap the temporary file or the directory itself for a
  symlink during the run, and it redirects nothing.
* Symlinks in the path are followed (the file a link names is replaced, the link stays),
  except one that the kernel's ``fs.protected_symlinks`` would not follow: in a sticky,
  world-writable directory (``/tmp``), a link owned by neither the directory's owner nor the
  user may have been planted to aim cer at someone else's file. It is refused.
* The writer holds an ``flock`` on its temporary file for the whole run; the lock dies with
  the process, however it dies. A later write to the same target removes the temporary files
  of earlier runs that it can lock (their process is gone, in any PID namespace on this host),
  only regular files owned by the user, never through a symlink.
* Devices and FIFOs (``/dev/null``, a named pipe) are written directly; ``/dev/stdout``,
  ``/dev/stderr``, ``/dev/fd/N`` and ``/proc/self/fd/N`` name a descriptor, written as it is
  (never resolved to the file behind it, which would replace that file).
* A failure to write names the output (``OutputError``, exit 1): the streams handed to the
  writers raise it themselves, so a failure while reading a log is never reported as one.

Kept free of polars and pyarrow: the entry point uses ``standard_streams`` before anything
heavy is imported.
"""

from __future__ import annotations

import atexit
import errno
import io
import os
import re
import secrets
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO

try:
    import fcntl
except ImportError:  # not POSIX: no locks, so no stale temporary file is ever removed
    fcntl = None  # type: ignore[assignment]

#: Longest file name (bytes) most file systems accept; the temporary name must fit in it.
NAME_MAX = 255
#: Hex digits of the random part of a temporary name (64 bits: guessing them is hopeless).
_TOKEN_DIGITS = 16
#: Room the temporary name adds around the target's name: ".", ".cer-<token>", ".part".
_PART_ROOM = 1 + 5 + _TOKEN_DIGITS + 5
#: Symlinks followed at most while resolving one path (the kernel's own limit).
_MAX_LINKS = 40
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NOCTTY = getattr(os, "O_NOCTTY", 0)
#: A directory descriptor that needs no read permission (Linux); else a readable one.
_O_DIR = getattr(os, "O_PATH", os.O_RDONLY) | getattr(os, "O_DIRECTORY", 0) | _O_CLOEXEC


class OutputError(Exception):
    """The output cannot be written. ``exit_code`` 1 when the system refuses it (no such
    directory, permission denied, a read-only file or file system, disk full, an I/O error,
    standard output closed): one rule for every "cannot write the output", whenever it is
    found. 2 when cer itself refuses a path that would do harm (a planted symlink)."""

    def __init__(self, message: str, hints: Sequence[str] = (), exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.hints = list(hints)
        self.exit_code = exit_code


class ReaderGone(BrokenPipeError):
    """Standard output is a pipe whose reader left (``cer match … | head -1``): the run ends
    quietly, with exit code 0, as ripgrep does."""


def _cannot(target: object, e: OSError) -> OutputError:
    return OutputError(f"cannot write {target}: {e.strerror or e}")


class _Sink(io.FileIO):
    """The output's descriptor, whose write failures name the output (``OutputError``)."""

    def __init__(self, fd: int, label: str, closefd: bool = True) -> None:
        super().__init__(fd, "wb", closefd=closefd)
        self.label = label

    def write(self, data) -> int:  # type: ignore[override]
        try:
            return super().write(data)
        except OSError as e:
            raise _cannot(self.label, e) from None


def _stream(fd: int, label: str, closefd: bool = True) -> BinaryIO:
    return io.BufferedWriter(_Sink(fd, label, closefd))  # type: ignore[return-value]


# --------------------------------------------------------------------------- descriptors

#: ``/dev/fd/N``, ``/proc/self/fd/N`` and what they resolve to (``/proc/<pid>/fd/N``).
_FD_PATH = re.compile(r"/(?:dev/fd|proc/(?:self|thread-self|(\d+)(?:/task/\d+)?)/fd)/(\d+)")
_STD_PATHS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def output_descriptor(path: str | os.PathLike) -> int | None:
    """The descriptor ``path`` names (``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``,
    ``/proc/self/fd/N``, also through symlinks), or None. Such a path is written as the
    descriptor it is: resolving it would find the file behind the descriptor and replace
    it (``cer … -o /dev/stdout >> f`` would lose ``f``), or fail for a pipe."""
    p = os.path.abspath(os.fspath(path))
    for _ in range(_MAX_LINKS):
        if p in _STD_PATHS:
            return _STD_PATHS[p]
        m = _FD_PATH.fullmatch(p)
        if m and (m.group(1) is None or int(m.group(1)) == os.getpid()):
            return int(m.group(2))
        parent, name = os.path.split(p)
        resolved = os.path.join(os.path.realpath(parent), name)  # /dev/fd -> /proc/<pid>/fd
        if resolved != p:
            p = resolved
            continue
        try:
            link = os.readlink(p)
        except OSError:
            return None
        p = os.path.normpath(os.path.join(parent, link))
    return None


@contextmanager
def _descriptor(target: object, fd: int) -> Iterator[BinaryIO]:
    try:
        own = os.dup(fd)  # closing our copy leaves the caller's descriptor open
    except OSError as e:
        raise _cannot(target, e) from None
    with _stream(own, str(target)) as f:
        yield f


# --------------------------------------------------------------------------- symlinks


def _check_link(directory: str, link: str, st: os.stat_result, target: object) -> None:
    """``fs.protected_symlinks``: a symlink in a sticky, world-writable directory is followed
    only if it belongs to the user or to the directory's owner."""
    try:
        d = os.stat(directory)
    except OSError:
        return
    shared = d.st_mode & stat.S_ISVTX and d.st_mode & stat.S_IWOTH
    if shared and st.st_uid not in (d.st_uid, os.geteuid()):
        raise OutputError(
            f"refusing to write {target}: {link} is a symlink in the shared directory"
            f" {directory} (sticky and world-writable) owned by another user (uid {st.st_uid}),"
            " who could aim it at any file",
            ["write to a path that is not such a link (the kernel's fs.protected_symlinks rule)"],
            exit_code=2,
        )


def _resolve(target: str | os.PathLike) -> str:
    """``os.path.realpath(target)``, one component at a time, so that each symlink is checked
    (``_check_link``) before it is followed. A missing component ends the walk: the rest of
    the path is kept as written."""
    path = os.fspath(target)
    resolved = "/" if path.startswith("/") else os.getcwd()
    todo = list(reversed(path.split("/")))
    links = 0
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            resolved = os.path.dirname(resolved)
            continue
        nxt = os.path.join(resolved, part)
        try:
            st = os.lstat(nxt)
        except OSError:
            return os.path.normpath(os.path.join(nxt, *reversed(todo)))
        if not stat.S_ISLNK(st.st_mode):
            resolved = nxt
            continue
        links += 1
        if links > _MAX_LINKS:
            raise _cannot(target, OSError(errno.ELOOP, os.strerror(errno.ELOOP)))
        _check_link(resolved, nxt, st, target)
        link = os.readlink(nxt)
        if link.startswith("/"):
            resolved = "/"
        todo.extend(reversed(link.split("/")))
    return resolved


# --------------------------------------------------------------------------- directories


def writes_in_place(target: str | os.PathLike) -> bool:
    """Whether ``target`` is written as it is, never replaced: a descriptor
    (``output_descriptor``), a device or a FIFO. Such an output cannot be a directory."""
    if output_descriptor(target) is not None:
        return True
    try:
        st = os.stat(target)
    except OSError:
        return False
    return not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode)


def directory_output(target: str | os.PathLike) -> tuple[str, bool]:
    """Where a run that writes a directory of files (``--spark -o``; Spark writes it, not
    this module) may write ``target``, by the rules of this module that apply to a
    directory: symlinks are followed except one the kernel's ``fs.protected_symlinks`` would
    not follow (exit 2); an existing file or a directory that is not empty is refused (exit
    2: writing would destroy or mix into it); a directory that does not exist, is not a
    directory or cannot be written to is "cannot write the output" (exit 1). Returns the
    resolved path and whether it is an existing (empty) directory."""
    resolved = _resolve(target)
    if os.path.isdir(resolved):
        try:
            empty = not os.listdir(resolved)
        except OSError as e:
            raise _cannot(target, e) from None
        if not empty:
            raise OutputError(f"cannot write {target}: a directory that is not empty, and the"
                              " matches are written as a new directory",
                              ["remove it or choose another -o path"], exit_code=2)
        if not os.access(resolved, os.W_OK):
            raise OutputError(f"cannot write {target}: it is read-only")
        return resolved, True
    if os.path.lexists(resolved):
        raise OutputError(f"cannot write {target}: an existing file, and the matches are"
                          " written as a new directory",
                          ["remove it or choose another -o path"], exit_code=2)
    parent = os.path.dirname(resolved)
    os.close(_open_parent(parent, target))  # does not exist, is not a directory: exit 1
    if not os.access(parent, os.W_OK):
        raise _cannot(target, OSError(errno.EACCES, f"{os.strerror(errno.EACCES)} (creating a"
                                      f" directory in {parent})"))
    return resolved, False


# --------------------------------------------------------------------------- temporary files


def _part_stem(name: str) -> str:
    """``.<name>`` cut (at a character boundary) so that the temporary name fits NAME_MAX."""
    raw = name.encode("utf-8", "surrogateescape")[: NAME_MAX - _PART_ROOM]
    return "." + raw.decode("utf-8", "ignore")


def _part_name(name: str) -> str:
    return f"{_part_stem(name)}.cer-{secrets.token_hex(_TOKEN_DIGITS // 2)}.part"


def _part_pattern(name: str) -> re.Pattern:
    return re.compile(re.escape(_part_stem(name)) + rf"\.cer-[0-9a-f]{{{_TOKEN_DIGITS}}}\.part")


def _open_parent(parent: str, target: object) -> int:
    """The resolved directory, opened once; if it turned into a symlink since it was
    resolved, that is not followed (it is "not a directory")."""
    try:
        return os.open(parent, _O_DIR | _O_NOFOLLOW)
    except FileNotFoundError:
        raise OutputError(f"cannot write {target}: directory {parent} does not exist") from None
    except NotADirectoryError:
        raise OutputError(f"cannot write {target}: {parent} is not a directory") from None
    except OSError as e:
        raise _cannot(target, e) from None


def _remove_stale(dfd: int, name: str) -> list[str]:
    if fcntl is None:
        return []
    pattern = _part_pattern(name)
    try:
        rfd = os.open(".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return []  # an unreadable directory: nothing can be listed, nothing is removed
    try:
        names = [n for n in os.listdir(rfd) if pattern.fullmatch(n)]
    except OSError:
        names = []
    finally:
        os.close(rfd)
    removed = []
    flags = os.O_NONBLOCK | _O_NOFOLLOW | _O_NOCTTY | _O_CLOEXEC
    for n in names:
        try:  # never through a symlink (ELOOP); a FIFO or device opens without blocking
            fd = os.open(n, os.O_RDONLY | flags, dir_fd=dfd)
        except PermissionError:
            try:  # our file with a write-only mode copied from its target
                fd = os.open(n, os.O_WRONLY | flags, dir_fd=dfd)
            except OSError:
                continue
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                continue  # not a temporary file of ours
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # its writer is alive: OSError
            now = os.stat(n, dir_fd=dfd, follow_symlinks=False)
            if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                os.unlink(n, dir_fd=dfd)
                removed.append(n)
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed


def remove_stale_parts(target: str | Path) -> list[Path]:
    """Remove the temporary files that runs killed outright (SIGKILL, out of memory, power
    loss) left next to ``target``: named for it, regular files owned by the user, and only
    those no live writer holds the lock of. Returns the paths removed."""
    target = Path(target)
    try:
        dfd = os.open(target.parent, _O_DIR)
    except OSError:
        return []
    try:
        return [target.parent / n for n in _remove_stale(dfd, target.name)]
    finally:
        os.close(dfd)


#: The temporary files being written now, ``(directory descriptor, name)``.
_open_parts: set[tuple[int, str]] = set()


def _create_part(dfd: int, name: str, target: object, parent: str) -> tuple[int, str]:
    """A new temporary file for ``name`` in ``dfd``, locked: ``(descriptor, its name)``."""
    for _ in range(100):
        tmp = _part_name(name)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC,
                         0o600, dir_fd=dfd)
        except FileExistsError:
            continue
        except OSError as e:
            raise OutputError(f"cannot write {target}: {e.strerror} (creating a file in"
                              f" {parent})") from None
        try:
            if fcntl is not None:
                try:  # blocking: a cleaner that opened it before us holds the lock a moment
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except OSError:
                    pass  # no locks on this file system: cleaners cannot lock it either
            if os.fstat(fd).st_nlink:
                _open_parts.add((dfd, tmp))  # from here on, removed whatever happens
                return fd, tmp
        except BaseException:  # Ctrl-C just now: leave nothing behind
            with suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            os.close(fd)
            raise
        os.close(fd)  # a cleaner removed it between its creation and our lock: another name
    raise OutputError(f"cannot write {target}: cannot create a temporary file next to it")


def _copy_mode(fd: int, st: os.stat_result | None) -> None:
    """A new file gets the umask's mode; a replaced one its mode and, where allowed, owner."""
    if st is None:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        return
    with suppress(OSError):  # not allowed: the file gets our owner, as a new file would
        os.fchown(fd, st.st_uid, st.st_gid)
    os.fchmod(fd, stat.S_IMODE(st.st_mode))


def remove_open_parts() -> None:
    """Remove the temporary files being written: for an exit that skips ``finally`` blocks
    (``os._exit`` at a signal's deadline, ``cer_cli.signals.guard``; the ``cer`` program's
    exit after a signal, ``signals.exit_for``, which runs the ``atexit`` functions: a writer
    suspended in a generator would otherwise only clean up when the interpreter finalizes
    it, which that exit skips)."""
    for dfd, tmp in list(_open_parts):
        with suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)


atexit.register(remove_open_parts)


def shared_links(target: str | os.PathLike, st: os.stat_result | None = None) -> str | None:
    """The warning ``open_output`` gives when ``target`` is a regular file with other hard
    links (they keep the old content); None otherwise. ``st``: its ``stat``, when known
    (else it is looked up, a failure meaning no warning: writing reports it)."""
    if st is None:
        try:
            st = os.stat(target)
        except OSError:
            return None
    if not stat.S_ISREG(st.st_mode) or st.st_nlink <= 1:
        return None
    return (f"{target} has {st.st_nlink - 1} other hard link(s); they keep the old content"
            " (the file is replaced, not rewritten in place)")


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


@contextmanager
def open_output(
    target: str | os.PathLike, warn: Callable[[str], None] = _warn
) -> Iterator[BinaryIO]:
    """A binary stream that writes ``target`` (see the module's docstring).

    A regular file (new or existing) is written to a locked temporary file in its directory,
    renamed onto it only if the block succeeds; on any exception, Ctrl-C and SIGTERM
    included, the temporary file is removed and an existing file is left as it was, even if
    the directory was renamed meanwhile (the rename happens in the directory the run started
    in, wherever it is now). An existing file keeps its mode (and, where allowed, its owner);
    a file with other hard links is replaced too (a half-written file is worse): ``warn``
    says the other links keep the old content. Temporary files of earlier runs that were
    killed are removed first. Devices, FIFOs and descriptors are written directly.
    Write failures raise ``OutputError``.
    """
    fd_number = output_descriptor(target)
    if fd_number is not None:
        with _descriptor(target, fd_number) as f:
            yield f
        return
    parent, name = os.path.split(_resolve(target))
    dfd = _open_parent(parent, target)
    try:
        try:
            st: os.stat_result | None = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        except OSError as e:
            raise _cannot(target, e) from None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise OutputError(f"cannot write {target}: it is a directory")
        if st is not None and not stat.S_ISREG(st.st_mode):
            with _special(dfd, name, target) as f:
                yield f
            return
        if st is not None and not os.access(name, os.W_OK, dir_fd=dfd):
            raise OutputError(f"cannot write {target}: it is read-only")
        links = st is not None and shared_links(target, st)
        if links:
            warn(links)
        _remove_stale(dfd, name)
        with _replacing(dfd, name, st, target, parent) as f:
            yield f
    finally:
        os.close(dfd)


@contextmanager
def _special(dfd: int, name: str, target: object) -> Iterator[BinaryIO]:
    """A device or FIFO, opened without following a symlink and without truncating; if it
    turned into something else since it was looked at, nothing is written."""
    try:  # a FIFO blocks here until a reader opens it
        fd = os.open(name, os.O_WRONLY | _O_NOFOLLOW | _O_NOCTTY | _O_CLOEXEC, dir_fd=dfd)
    except OSError as e:
        raise _cannot(target, e) from None
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISBLK(mode)):
        os.close(fd)
        raise OutputError(f"cannot write {target}: it was replaced while being opened")
    with _stream(fd, str(target)) as f:
        yield f


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _is_ours(dfd: int, tmp: str, fd: int) -> bool:
    """Whether ``tmp`` still names the file open as ``fd`` (not one that replaced it)."""
    try:
        return _same(os.stat(tmp, dir_fd=dfd, follow_symlinks=False), os.fstat(fd))
    except OSError:
        return False


@contextmanager
def _replacing(
    dfd: int, name: str, st: os.stat_result | None, target: object, parent: str
) -> Iterator[BinaryIO]:
    """Write a locked temporary file through its descriptor; rename it onto ``name`` if the
    block succeeds, remove it if not."""
    fd, tmp = _create_part(dfd, name, target, parent)  # in _open_parts
    done = False
    try:
        f = _stream(fd, str(target), closefd=False)
        try:
            try:
                _copy_mode(fd, st)
            except OSError as e:
                raise _cannot(target, e) from None
            yield f
            f.close()  # flushes: a full disk is found here at the latest
            if not _is_ours(dfd, tmp, fd):
                raise OutputError(f"cannot write {target}: its temporary file {tmp} was"
                                  " removed or replaced during the run")
            try:
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except OSError as e:
                raise OutputError(f"cannot replace {target}: {e.strerror}") from None
            done = True
        except BaseException:  # Ctrl-C and SIGTERM included
            with suppress(Exception):
                f.close()  # what is still buffered goes to the file being removed
            if _is_ours(dfd, tmp, fd):
                with suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)
            raise
    finally:
        _open_parts.discard((dfd, tmp))
        try:
            os.close(fd)  # also releases the lock
        except OSError as e:  # a network file system may report a failed write only now
            if done:
                raise _cannot(target, e) from None


# --------------------------------------------------------------------------- standard streams


class _StandardStream(io.FileIO):
    """Descriptor 1 or 2 as the ``cer`` process writes it. Standard output: a reader that
    left raises ``ReaderGone``, another failure (``/dev/full``, closed at start) an
    ``OutputError`` naming it. Standard error: failures are ignored, there is nowhere to
    report them (the exit code still tells). After a failure, writes are dropped, so that
    the interpreter's final flush cannot fail a second time."""

    def __init__(self, fd: int, closed: bool) -> None:
        super().__init__(fd, "wb", closefd=False)
        self.closed_at_start, self.failed = closed, False

    def write(self, data) -> int:  # type: ignore[override]
        if self.failed:
            return len(memoryview(data))
        try:
            if self.closed_at_start:
                raise OSError(errno.EBADF, "it is closed")
            return super().write(data)
        except OSError as e:
            self.failed = True
            if self.fileno() == 2:
                return len(memoryview(data))
            if e.errno == errno.EPIPE:
                raise ReaderGone(errno.EPIPE, "standard output is a closed pipe") from None
            raise _cannot("standard output", e) from None


def standard_streams() -> None:
    """Make the ``cer`` process's standard streams safe to use (the entry point calls it).

    A descriptor 0, 1 or 2 closed at start (``>&-``, ``2>&-``) is opened on /dev/null, so
    that no file cer opens takes its number (and receives what was meant for the stream);
    standard output then refuses to be written (exit 1), standard error drops what it gets.
    Standard output and standard error are rebuilt on ``_StandardStream``, with their
    encoding and buffering kept."""
    closed = set()
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.add(fd)
    if closed:
        null = os.open(os.devnull, os.O_RDWR)  # takes the lowest closed number itself
        for fd in closed:
            if fd != null:
                os.dup2(null, fd)
        if null not in closed:
            os.close(null)
    if sys.stdin is None or 0 in closed:
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - the process's
    for fd, name in ((1, "stdout"), (2, "stderr")):
        old = getattr(sys, name)
        new = io.TextIOWrapper(
            io.BufferedWriter(_StandardStream(fd, fd in closed)),
            encoding=getattr(old, "encoding", None) or "utf-8",
            errors=getattr(old, "errors", None) or "backslashreplace",
            line_buffering=getattr(old, "line_buffering", False),
            write_through=getattr(old, "write_through", False),
        )
        if old is not None:
            with suppress(Exception):
                old.flush()
        setattr(sys, name, new)


# --------------------------------------------------------------------------- writers' helpers


class SequentialStream:
    """A write-only stream that counts what it wrote, for Parquet writers that ask ``tell()``
    of a FIFO or a device (where ``lseek`` fails)."""

    def __init__(self, raw: Any) -> None:
        self.raw, self.position, self.closed = raw, 0, False

    def write(self, data: bytes) -> int:
        self.raw.write(data)
        self.position += len(data)
        return len(data)

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        self.raw.flush()

    def close(self) -> None:
        self.closed = True  # the caller closes ``raw``

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False


def refuse_input_as_output(output: str | Path | None, inputs: Iterable[str | Path]) -> None:
    """Raise ``LogError`` if ``output`` is one of ``inputs`` (a log or the query file): writing
    it would destroy the input. Files are compared by (device, inode), so a symlink or a hard
    link to an input is caught too; ``-`` and paths that do not exist are never inputs."""
    from cer_cli.io.contract import LogError  # here: the entry point imports this module first

    if output is None or str(output) == "-":
        return
    try:
        out = os.stat(output)
    except OSError:
        return
    if not stat.S_ISREG(out.st_mode) and not stat.S_ISDIR(out.st_mode):
        return  # /dev/null or a FIFO: writing it destroys nothing
    for path in inputs:
        if str(path) == "-":
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino):
            same = "" if os.path.abspath(path) == os.path.abspath(output) else f" (the same file as {path})"
            raise LogError(
                f"refusing to write the output to {output}{same}: it is an input, and writing"
                " it would destroy it",
                ["write the matches to another file"],
            )


