"""`-o` under abuse (issue #14): special files, inputs as outputs, modes, links, long names,
signals, stale temporary files, refused option combinations.

Device nodes are made by the tests in their own temporary directories (the tests run as
root); no test touches a real device file. Signals are sent to `python -m cer_cli`
subprocesses, always with a hard timeout.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import secrets
import shlex
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl
import pytest

from cer_cli.events import Match
from cer_cli.io.files import NAME_MAX, OutputError, open_output, remove_stale_parts
from cer_cli.io.read import LogError, read_events
from cer_cli.io.write import EventLookup, write_matches
from tests.builders import run

ROOT = Path(__file__).resolve().parent.parent
MATCHES = [
    Match(1, 2, ((1, ("T", "x")), (2, ("y",)))),
    Match(1, 8, ((1, ("x",)), (8, ("y",))), partition=(0,)),
]
CSV = "type,id,tmp,hum\nH,2,,25\nT,0,45,\nH,0,,20\nH,1,,25\nT,1,40,\nT,0,42,\nT,1,25,\nH,1,,70\nH,0,,18\n"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="making device nodes needs root")


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    d = tmp_path / "logs"
    d.mkdir()
    (d / "s.csv").write_text(CSV)
    return d


@pytest.fixture
def lookup(logdir: Path) -> EventLookup:
    log = read_events([str(logdir / "s.csv")])
    lk = EventLookup.for_log(log)
    list(lk.tap(log.batches()))
    return lk


def _names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait(timeout=60)
    return p.pid


# --------------------------------------------------------------------------- special files


@root_only
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_a_character_device_is_written_not_replaced(tmp_path: Path, lookup, fmt) -> None:
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    write_matches(MATCHES, lookup, fmt, null)
    st = os.stat(null)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert _names(tmp_path) == ["logs", "null"]


@root_only
def test_a_device_through_a_symlink_stays_a_device(tmp_path: Path, lookup) -> None:
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    (tmp_path / "out.jsonl").symlink_to(null)
    write_matches(MATCHES, lookup, "jsonl", tmp_path / "out.jsonl")
    assert stat.S_ISCHR(os.stat(null).st_mode) and (tmp_path / "out.jsonl").is_symlink()


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_fifo_is_written_directly(tmp_path: Path, lookup, fmt) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def reader() -> None:
        with open(fifo, "rb") as f:
            got.append(f.read())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    write_matches(MATCHES, lookup, fmt, fifo)
    t.join(timeout=30)
    assert not t.is_alive() and stat.S_ISFIFO(os.stat(fifo).st_mode)
    if fmt == "jsonl":
        assert len(got[0].decode().splitlines()) == 2
    else:
        assert got[0][:4] == b"PAR1", got
        (tmp_path / "copy.parquet").write_bytes(got[0])
        assert pl.read_parquet(tmp_path / "copy.parquet").height == 4
    assert _names(tmp_path) == ["copy.parquet", "logs", "pipe"] if fmt == "parquet" else ["logs", "pipe"]


@root_only
def test_a_full_device_is_a_runtime_failure_with_a_clear_message(tmp_path: Path, logdir) -> None:
    full = tmp_path / "full"
    os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # every write: ENOSPC
    result = run("match", "-e", "H ; T", str(logdir / "s.csv"), "-o", str(full), "--format", "jsonl")
    assert result.exit_code == 1, result.output
    assert f"cannot write {full}: No space left on device" in result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    assert stat.S_ISCHR(os.stat(full).st_mode)


def test_dash_writes_standard_output(logdir: Path) -> None:
    result = run("match", "-e", "H ; T", str(logdir / "s.csv"), "-o", "-")
    assert result.exit_code == 0, result.output
    assert result.output.startswith('{"match": 0')
    assert not (logdir / "-").exists()


def _sh(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-o", "pipefail", "-c", script], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})


def _cer(logdir: Path, *args: str) -> str:
    """The shell command of `cer match -e 'H ; T'` on the test log (10 matches)."""
    return shlex.join([sys.executable, "-m", "cer_cli", "match", "-e", "H ; T",
                       str(logdir / "s.csv"), *args])


@pytest.mark.parametrize("fmt", [[], ["--format", "jsonl"]])
def test_dev_stdout_is_standard_output_not_the_file_behind_it(tmp_path, logdir, fmt) -> None:
    """`-o /dev/stdout >> f` appends to f, as `-o -` does: resolving /dev/stdout to f and
    replacing f would lose what f held; into a pipe it works too."""
    f = tmp_path / "f"
    result = _sh(f"printf 'X\\n' > {f}; {_cer(logdir, '-o', '/dev/stdout', *fmt)} >> {f}")
    assert result.returncode == 0, result.stderr
    lines = f.read_text().splitlines()
    assert lines[0] == "X" and len(lines) == 11 and json.loads(lines[1])["match"] == 0
    result = _sh(f"{_cer(logdir, '-o', '/dev/stdout', *fmt)} | cat")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 10


@pytest.mark.parametrize("path", ["/dev/stderr", "/dev/fd/2", "/proc/self/fd/2"])
def test_dev_stderr_and_fd_paths_write_the_descriptor(tmp_path, logdir, path) -> None:
    f = tmp_path / "f"
    f.write_text("X\n")
    result = _sh(f"{_cer(logdir, '-o', path)} 2>> {f}")
    assert result.returncode == 0, result.stderr
    lines = f.read_text().splitlines()
    assert lines[0] == "X" and len(lines) == 11 and json.loads(lines[10])["match"] == 9


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_an_fd_path_is_written_directly(tmp_path, logdir, fmt) -> None:
    out = tmp_path / f"out.{fmt}"
    out.write_text("X\n" if fmt == "jsonl" else "")
    result = _sh(f"{_cer(logdir, '-o', '/dev/fd/3', '--format', fmt)} 3>>{out}")
    assert result.returncode == 0, result.stderr
    if fmt == "jsonl":
        assert out.read_text().splitlines()[0] == "X"
        assert len(out.read_text().splitlines()) == 11
    else:
        assert pl.read_parquet(out).height == 20
    assert _names(tmp_path) == sorted(["logs", out.name])


# --------------------------------------------------------------------------- inputs


@pytest.mark.parametrize("kind", ["same", "named", "symlink", "hardlink", "parquet", "query"])
def test_an_input_is_never_the_output(logdir: Path, kind) -> None:
    log = logdir / "s.csv"
    if kind == "parquet":
        pl.read_csv(log).write_parquet(logdir / "s.parquet")
        log = logdir / "s.parquet"
    query = logdir / "q.cel"
    query.write_text("H ; T\n")
    spec, out = str(log), str(log)
    if kind == "named":
        spec = f"NAME={log}"
    elif kind == "symlink":
        (logdir / "link.csv").symlink_to(log)
        out = str(logdir / "link.csv")
    elif kind == "hardlink":
        os.link(log, logdir / "hard.csv")
        out = str(logdir / "hard.csv")
    elif kind == "query":
        out = str(query)
    before = log.read_bytes(), query.read_bytes()
    result = run("match", str(query), spec, "-o", out, "--format", "jsonl")
    assert result.exit_code == 2, result.output
    assert "it is an input" in result.output and "Traceback" not in result.output
    assert (log.read_bytes(), query.read_bytes()) == before
    assert not [n for n in _names(logdir) if n.endswith(".part")]


# --------------------------------------------------------------------------- replacing a file


def test_replacing_keeps_the_mode(tmp_path: Path, lookup) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("secret\n")
    target.chmod(0o600)
    write_matches(MATCHES, lookup, "jsonl", target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert len(target.read_text().splitlines()) == 2


def test_a_new_file_gets_the_umask_mode(tmp_path: Path, lookup) -> None:
    old = os.umask(0o027)
    try:
        write_matches(MATCHES, lookup, "csv", tmp_path / "new.csv")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.csv").stat().st_mode) == 0o640


def test_a_symlink_is_followed_and_kept(tmp_path: Path, lookup) -> None:
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    real = real_dir / "out.jsonl"
    real.write_text("old\n")
    real.chmod(0o640)
    link = tmp_path / "out.jsonl"
    link.symlink_to(real)
    write_matches(MATCHES, lookup, "jsonl", link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert len(real.read_text().splitlines()) == 2
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert _names(real_dir) == ["out.jsonl"] and _names(tmp_path) == ["logs", "out.jsonl", "real"]


def test_a_hard_link_is_replaced_with_a_warning(tmp_path: Path, lookup, capsys) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("old\n")
    os.link(target, tmp_path / "other.jsonl")
    write_matches(MATCHES, lookup, "jsonl", target)
    assert "1 other hard link(s); they keep the old content" in capsys.readouterr().err
    assert len(target.read_text().splitlines()) == 2
    assert (tmp_path / "other.jsonl").read_text() == "old\n"


def test_a_read_only_file_is_not_replaced(tmp_path: Path, lookup) -> None:
    if os.geteuid() == 0:
        pytest.skip("root may write any file")
    target = tmp_path / "out.jsonl"
    target.write_text("keep\n")
    target.chmod(0o444)
    with pytest.raises(OutputError, match="read-only"):
        write_matches(MATCHES, lookup, "jsonl", target)
    assert target.read_text() == "keep\n"


@pytest.mark.parametrize("name", ["x" * 244 + ".jsonl", "é" * 120 + ".jsonl"])
def test_a_long_output_name_works(tmp_path: Path, lookup, name) -> None:
    target = tmp_path / name
    seen: list[str] = []

    def watched():
        seen.extend(n for n in os.listdir(tmp_path) if n.endswith(".part"))
        yield from MATCHES

    write_matches(watched(), lookup, "jsonl", target)
    assert len(target.read_text().splitlines()) == 2
    assert len(seen) == 1 and len(seen[0].encode()) <= NAME_MAX
    assert seen[0].startswith(".") and re.search(r"\.cer-[0-9a-f]{16}\.part$", seen[0])
    assert _names(tmp_path) == sorted(["logs", name])


def test_a_failed_rename_leaves_nothing(tmp_path: Path, lookup, monkeypatch) -> None:
    target = tmp_path / "out.csv"
    target.write_text("previous\n")

    def fail(src, dst, **dir_fds):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), src, None, dst)

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OutputError, match="cannot replace"):
        write_matches(MATCHES, lookup, "csv", target)
    assert target.read_text() == "previous\n"
    assert _names(tmp_path) == ["logs", "out.csv"]


def _part(d: Path, name: str) -> Path:
    """A temporary file name as cer makes them: ``.<name>.cer-<16 hex digits>.part``."""
    return d / f".{name}.cer-{secrets.token_hex(8)}.part"


def _locked(path: Path) -> int:
    """An open descriptor of ``path`` holding its lock, as a live writer does."""
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def test_stale_parts_are_removed_only_when_unlocked_and_ours(tmp_path: Path, lookup) -> None:
    """A temporary file is removed only if it is named for this target, a regular file of
    the user's, and no process holds its lock (a live writer in any PID namespace does):
    never a live run's file, another user's file or a symlink's target."""
    target = tmp_path / "out.jsonl"
    dead = _part(tmp_path, "out.jsonl")
    live = _part(tmp_path, "out.jsonl")
    other = _part(tmp_path, "other.jsonl")
    not_ours = tmp_path / ".out.jsonl.part"
    # a run in another container: its pid is dead here, its process alive there
    elsewhere = tmp_path / f".out.jsonl.cer-{_dead_pid()}.part"
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = _part(tmp_path, "out.jsonl")
    link.symlink_to(victim)
    for p in (dead, live, other, not_ours, elsewhere):
        p.write_text("partial")
    held = [_locked(live), _locked(elsewhere)]
    try:
        write_matches(MATCHES, lookup, "jsonl", target)
        assert live.exists() and other.exists() and not_ours.exists() and elsewhere.exists()
        assert link.is_symlink() and victim.read_text() == "precious\n"
        assert not dead.exists()
        assert remove_stale_parts(target) == []
        assert remove_stale_parts(tmp_path / "other.jsonl") == [other]
    finally:
        for fd in held:
            os.close(fd)
    assert remove_stale_parts(target) == [live]  # its writer is gone now


@root_only
def test_another_users_stale_part_is_never_removed(tmp_path: Path, lookup) -> None:
    """Run as root, cer must not delete another user's files: ownership is checked."""
    theirs = _part(tmp_path, "out.jsonl")
    old_style = tmp_path / f".out.jsonl.cer-{_dead_pid()}.part"
    for p in (theirs, old_style):
        p.write_text("theirs")
        os.chown(p, 4242, 4242)
    write_matches(MATCHES, lookup, "jsonl", tmp_path / "out.jsonl")
    assert theirs.read_text() == "theirs" and old_style.read_text() == "theirs"


def test_planted_temporary_names_cannot_block_a_write(tmp_path: Path, lookup) -> None:
    """Temporary names are random: planting names (every name the pid could give) blocks
    nothing."""
    for n in range(1000):
        (tmp_path / f".out.jsonl.cer-{os.getpid()}{f'-{n}' if n else ''}.part").write_text("x")
    write_matches(MATCHES, lookup, "jsonl", tmp_path / "out.jsonl")
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 2


def _swap_part_for_symlink(d: Path, victim: Path, matches):
    """Matches, after doing what another user who can write ``d`` could do while cer runs:
    move cer's temporary file away and put a symlink to ``victim`` under its name."""
    (part,) = [p for p in d.iterdir() if p.name.endswith(".part")]
    part.rename(d / "moved")
    part.symlink_to(victim)
    yield from matches


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_the_temporary_file_is_never_reopened_by_name(tmp_path: Path, lookup, fmt) -> None:
    """cer writes through the descriptor it created the temporary file with and renames only
    that file: a symlink swapped in for it redirects nothing, and the run fails (exit 1)
    instead of renaming the symlink onto the target."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    target = tmp_path / f"out.{fmt}"
    target.write_text("previous\n")
    error = None
    try:
        write_matches(_swap_part_for_symlink(tmp_path, victim, MATCHES), lookup, fmt, target)
    except OutputError as e:
        error = e.message
    assert victim.read_text() == "precious\n"
    assert not target.is_symlink() and target.read_text() == "previous\n"
    assert error is not None and "temporary file" in error and "was removed or replaced" in error


def _rename_dir(d: Path, to: Path, matches, fail: bool = False):
    d.rename(to)
    if fail:
        raise RuntimeError("the run fails")
    yield from matches


@pytest.mark.parametrize("fail", [False, True])
def test_a_directory_renamed_during_the_run_keeps_no_part(tmp_path: Path, lookup, fail) -> None:
    """The rename (or the removal after a failure) happens in the directory the run started
    in, through its descriptor, wherever that directory is now: no .part is left behind."""
    d, moved = tmp_path / "d", tmp_path / "d2"
    d.mkdir()
    (d / "out.jsonl").write_text("previous\n")
    matches = _rename_dir(d, moved, MATCHES, fail)
    if fail:
        with pytest.raises(RuntimeError):
            write_matches(matches, lookup, "jsonl", d / "out.jsonl")
        assert (moved / "out.jsonl").read_text() == "previous\n"
    else:
        write_matches(matches, lookup, "jsonl", d / "out.jsonl")
        assert len((moved / "out.jsonl").read_text().splitlines()) == 2
    assert _names(moved) == ["out.jsonl"] and not d.exists()


def _shared_dir(tmp_path: Path) -> Path:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp: sticky and world-writable
    return shared


@root_only
@pytest.mark.parametrize("where", ["file", "directory"])
def test_a_symlink_planted_in_a_shared_directory_is_refused(tmp_path: Path, logdir, where):
    """fs.protected_symlinks' rule: in a sticky world-writable directory, a symlink owned by
    neither the directory's owner nor the user is not followed; cer refuses (exit 2) and
    says why, and the file it aims at is untouched."""
    shared = _shared_dir(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / "out.jsonl"
    victim.write_text("precious\n")
    if where == "file":
        link, out = shared / "out.jsonl", shared / "out.jsonl"
        link.symlink_to(victim)
    else:
        link, out = shared / "dir", shared / "dir" / "out.jsonl"
        link.symlink_to(elsewhere)
    os.lchown(link, 4242, 4242)
    result = run("match", "-e", "H ; T", str(logdir / "s.csv"), "-o", str(out))
    assert result.exit_code == 2, result.output
    assert f"{link} is a symlink in the shared directory {shared}" in result.output
    assert "owned by another user (uid 4242)" in result.output and "Traceback" not in result.output
    assert victim.read_text() == "precious\n" and _names(elsewhere) == ["out.jsonl"]
    assert _names(shared) == [link.name]


@root_only
@pytest.mark.parametrize("owner", ["user", "directory owner", "non-sticky"])
def test_other_symlinks_are_followed(tmp_path: Path, lookup, owner) -> None:
    """A link of the user's or of the directory's owner is followed, as is any link in a
    directory that is not sticky and world-writable."""
    d = _shared_dir(tmp_path) if owner != "non-sticky" else tmp_path / "plain"
    d.mkdir(exist_ok=True)
    real = tmp_path / "real.jsonl"
    real.write_text("old\n")
    (d / "out.jsonl").symlink_to(real)
    if owner == "directory owner":
        os.chown(d, 4242, 4242)
        os.lchown(d / "out.jsonl", 4242, 4242)
    elif owner == "non-sticky":
        os.lchown(d / "out.jsonl", 4242, 4242)
    write_matches(MATCHES, lookup, "jsonl", d / "out.jsonl")
    assert (d / "out.jsonl").is_symlink() and len(real.read_text().splitlines()) == 2


def test_open_output_refuses_a_directory(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="is a directory"):
        with open_output(tmp_path):
            pass


# --------------------------------------------------------------------------- options


@pytest.mark.parametrize("extra", [["--count"], ["--format", "table"]])
def test_o_is_refused_where_it_would_be_ignored(tmp_path: Path, logdir, extra) -> None:
    out = tmp_path / "out.jsonl"
    result = run("match", "-e", "H ; T", str(logdir / "s.csv"), "-o", str(out), *extra)
    assert result.exit_code == 2, result.output
    assert "cannot be combined with --count" in result.output or "--format table" in result.output
    assert not out.exists()


def test_table_to_a_file_is_refused_by_the_library(tmp_path: Path, lookup) -> None:
    with pytest.raises(LogError, match="table format"):
        write_matches(MATCHES, lookup, "table", tmp_path / "t.txt")
    assert not (tmp_path / "t.txt").exists()


# --------------------------------------------------------------------------- signals


def _big_log(d: Path) -> Path:
    """`A ; B` on this log has about a million matches: the run is long enough to signal."""
    path = d / "big.csv"
    pl.DataFrame({"type": ["A", "B"] * 1500, "x": list(range(3000))}).write_csv(path)
    return path


def _start(d: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "cer_cli", "match", *args],
        cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )


def _wait_for_part(proc: subprocess.Popen, d: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not any(n.endswith(".part") for n in os.listdir(d)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never started writing"
        time.sleep(0.05)
    time.sleep(0.3)


@pytest.mark.parametrize(
    "signum, code, line",
    [(signal.SIGTERM, 143, "terminated"), (signal.SIGHUP, 129, "terminated"),
     (signal.SIGINT, 130, "interrupted")],
)
def test_a_signal_mid_write_leaves_the_old_file(tmp_path: Path, signum, code, line) -> None:
    log = _big_log(tmp_path)
    out = tmp_path / "out.jsonl"
    out.write_text("previous\n")
    out.chmod(0o600)
    proc = _start(tmp_path, "-e", "A ; B", log.name, "-o", out.name)
    try:
        _wait_for_part(proc, tmp_path)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert err.splitlines()[-1] == line and "Traceback" not in err
    assert out.read_text() == "previous\n" and stat.S_IMODE(out.stat().st_mode) == 0o600
    assert _names(tmp_path) == ["big.csv", "out.jsonl"]


def test_the_programs_exit_after_a_signal_removes_a_part_no_finally_block_removed(
        tmp_path: Path) -> None:
    """After a signal, the ``cer`` program leaves with ``os._exit`` (``signals.exit_for``),
    skipping the finalizers that would close a writer suspended in a generator: the
    temporary file that writer holds is removed by the ``atexit`` functions it runs."""
    code = (
        "import signal, sys\n"
        "from cer_cli import signals\n"
        "from cer_cli.io.files import open_output\n"
        "writer = open_output(sys.argv[1])\n"
        "writer.__enter__().write(b'partial')  # a writer whose finally never runs\n"
        "signals.exit_for(signals.Interrupted(signal.SIGTERM), program=True)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "out.jsonl")], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 143 and out.stderr == "terminated\n", out.stderr
    assert _names(tmp_path) == []


def test_a_killed_run_leaves_a_part_that_the_next_write_removes(tmp_path: Path, lookup) -> None:
    log = _big_log(tmp_path)
    proc = _start(tmp_path, "-e", "A ; B", log.name, "-o", "out.jsonl")
    try:
        _wait_for_part(proc, tmp_path)
        assert remove_stale_parts(tmp_path / "out.jsonl") == []  # its writer is alive
        proc.kill()  # as the out-of-memory killer would: no chance to clean up
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    (part,) = [n for n in _names(tmp_path) if n.endswith(".part")]
    assert re.fullmatch(r"\.out\.jsonl\.cer-[0-9a-f]{16}\.part", part)
    write_matches(MATCHES, lookup, "jsonl", tmp_path / "out.jsonl")
    assert _names(tmp_path) == ["big.csv", "logs", "out.jsonl"]


def _wait_for_handlers(proc: subprocess.Popen, timeout: float = 60) -> None:
    """Until the child catches SIGHUP, i.e. cer's handlers are installed (Python itself does
    not catch it): the interpreter's own start-up is over."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = Path(f"/proc/{proc.pid}/status").read_text()
        caught = int(next(x for x in status.splitlines() if x.startswith("SigCgt:")).split()[1], 16)
        if caught & (1 << (signal.SIGHUP - 1)):
            return
        time.sleep(0.001)
    raise AssertionError("cer never installed its signal handlers")


@pytest.mark.parametrize("delay", [0, 0.01, 0.03, 0.06, 0.1, 0.2, 0.3, 0.6])
def test_an_early_ctrl_c_prints_one_line(tmp_path: Path, delay) -> None:
    """From the moment cer's handlers exist (while it still imports click, polars, numba),
    Ctrl-C always ends with one line and exit 130 (a swallowed exception included)."""
    log = _big_log(tmp_path)
    proc = _start(tmp_path, "-e", "A ; B", log.name, "-o", "out.jsonl")
    try:
        _wait_for_handlers(proc)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    # the whole stderr on failure (a tuple's diff cuts a traceback short): a rare run gave
    # exit 1 and a traceback ending "...Error'" under a loaded -n 2 suite
    assert (proc.returncode, err, out) == (130, "interrupted\n", ""), err
    assert _names(tmp_path) == ["big.csv"]


@pytest.mark.parametrize("delay", [0.005, 0.02, 0.05])
def test_a_ctrl_c_during_pythons_own_start_up_shows_no_frame_of_ours(tmp_path: Path, delay):
    """Before any code of cer runs (site, runpy) the interpreter handles Ctrl-C itself, which
    no package can change; whatever happens, no traceback shows a frame of cer and no
    file is left."""
    log = _big_log(tmp_path)
    proc = _start(tmp_path, "-e", "A ; B", log.name, "-o", "out.jsonl")
    try:
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert f"{ROOT / 'cer_cli'}{os.sep}" not in err, err
    if proc.returncode == 130:
        assert err == "interrupted\n"


def test_in_process_main_exits_143_and_restores_the_handlers(tmp_path, logdir, monkeypatch, capsys):
    from cer_cli import cli as cli_module
    from cer_cli import signals
    from cer_cli.io import write

    def terminated(matches, lookup, out, partition_names=()):
        out.write("partial\n")
        raise signals.Interrupted(signal.SIGTERM)

    monkeypatch.setattr(write, "write_jsonl", terminated)
    before = {s: signal.getsignal(s) for s in signals.EXITS}
    out = tmp_path / "out.jsonl"
    argv = ["cer", "match", "-e", "H ; T", str(logdir / "s.csv"), "-o", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_info:
        cli_module.main()
    assert exit_info.value.code == 143
    assert capsys.readouterr().err == "terminated\n"
    assert {s: signal.getsignal(s) for s in signals.EXITS} == before
    assert _names(tmp_path) == ["logs"]


def test_importing_the_package_leaves_the_excepthook_alone() -> None:
    """The early-Ctrl-C hook is for the program only: a library user's Ctrl-C keeps its
    traceback."""
    code = "import sys; h = sys.excepthook; import cer_cli; print(sys.excepthook is h)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=ROOT)
    assert r.stdout.strip() == "True", r.stderr


SWALLOWED = """
import sys
from cer_cli import signals

install = signals.install


def swallowed():  # a Ctrl-C arrived, and CPython dropped the exception its handler raised
    previous = install()
    signals._state.update(raised=True, signum=2)
    return previous


signals.install = swallowed
sys.argv = ["cer", "match", *sys.argv[1:]]
from cer_cli.cli import main
main()
"""


@pytest.mark.parametrize("extra", [["-o", "out.jsonl"], ["--count"]])
def test_a_signal_whose_exception_was_swallowed_still_stops_the_run(tmp_path: Path, extra) -> None:
    """CPython silently drops an exception raised by a signal handler inside some C calls
    (measured: ~5% of Ctrl-Cs during the imports ran to the end with exit 0). The run's
    checkpoints must still end it: exit 130, one line, no output file."""
    log = _big_log(tmp_path)
    script = tmp_path / "swallowed.py"
    script.write_text(SWALLOWED)
    proc = subprocess.run([sys.executable, str(script), "-e", "A ; B", log.name, *extra],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(ROOT)})
    assert (proc.returncode, proc.stderr, proc.stdout) == (130, "interrupted\n", "")
    assert _names(tmp_path) == ["big.csv", "swallowed.py"]


def test_a_signal_wrapped_in_another_error_during_the_imports_is_still_the_signal(tmp_path):
    """Python 3.11 wraps an exception raised in ``__set_name__`` (a dataclass field being
    created when Ctrl-C arrives) in RuntimeError: the entry point must still end with the
    signal's line and code, not a traceback."""
    script = tmp_path / "wrapped.py"
    script.write_text(
        "import sys\n"
        "from cer_cli import signals, __main__ as entry\n"
        "import builtins\n"
        "real = builtins.__import__\n"
        "def imp(name, *a, **k):\n"
        "    if name == 'cer_cli.cli':\n"
        "        signals._state.update(raised=True, signum=2)\n"
        "        raise RuntimeError(\"Error calling __set_name__ on 'Field' instance\")\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = imp\n"
        "sys.argv = ['cer', '--help']\n"
        "entry.main()\n"
    )
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (proc.returncode, proc.stderr) == (130, "interrupted\n")
