"""Exit codes and messages at the edges of the process: closed pipes, closed standard
streams, an output that cannot be written (one rule: exit 1, one line naming it), logs the
user may not read, and query texts that used to end in "internal error".

Each case runs `python -m cer_cli` in a subprocess (with a hard timeout), because what is
tested is the process: its descriptors, its exit code, what reaches stderr. Cases that need
a permission to be missing run as `nobody` through setpriv when the tests run as root.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl
import pytest

CSV = "type,id,tmp,hum\nH,2,,25\nT,0,45,\nH,0,,20\nH,1,,25\nT,1,40,\nT,0,42,\nT,1,25,\nH,1,,70\nH,0,,18\n"
ENV = {**os.environ, "NO_COLOR": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def cer(*args: str, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.run([sys.executable, "-m", "cer_cli", *args], env=ENV, timeout=300, **kw)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "s.csv"
    path.write_text(CSV)
    return path


@pytest.fixture
def big(tmp_path: Path) -> Path:
    """`A ; B` has about a million matches here: far more output than a pipe buffers."""
    path = tmp_path / "big.csv"
    pl.DataFrame({"type": ["A", "B"] * 1500, "x": list(range(3000))}).write_csv(path)
    return path


def _lines(text: bytes) -> list[str]:
    return text.decode().splitlines()


# --------------------------------------------------------------------------- closed pipes


def test_a_reader_that_leaves_ends_the_run_quietly(big: Path) -> None:
    """`cer match … | head -1`: exit 0 and nothing on stderr, as ripgrep does."""
    proc = subprocess.Popen([sys.executable, "-m", "cer_cli", "match", "-e", "A ; B", str(big),
                             "--format", "jsonl"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=ENV)
    try:
        assert json.loads(proc.stdout.readline())["match"] == 0
        proc.stdout.close()
        err = proc.stderr.read()
        proc.wait(timeout=120)
    finally:
        proc.kill()
    assert (proc.returncode, err) == (0, b"")


@pytest.mark.parametrize("command", [["match", "--format", "jsonl"], ["match", "--count"],
                                     ["match", "--format", "table"], ["explain"]])
def test_a_pipe_closed_before_anything_is_written_ends_quietly(log: Path, command) -> None:
    """The output fits in the stream's buffer, so the closed pipe is met only by the last
    flush (the interpreter's own at exit, unless cer flushes first): still exit 0, quietly."""
    proc = subprocess.Popen([sys.executable, "-m", "cer_cli", command[0], "-e", "H ; T",
                             str(log), *command[1:]], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=ENV)
    proc.stdout.close()  # before cer writes anything: every write meets a closed pipe
    try:
        err = proc.stderr.read()
        proc.wait(timeout=120)
    finally:
        proc.kill()
    assert (proc.returncode, err.decode()) == (0, "")


# --------------------------------------------------------------------------- closed streams


def test_a_closed_stderr_keeps_warnings_out_of_the_output(log: Path) -> None:
    """`2>&-`: warnings (here: exponentially many matches) are dropped, never written to
    standard output among the JSON lines, and the run succeeds."""
    result = cer("match", "-e", "H+ ; T", str(log), "--format", "jsonl",
                 stderr=None, preexec_fn=lambda: os.close(2))
    assert result.returncode == 0
    lines = _lines(result.stdout)
    assert lines and all(json.loads(line)["events"] for line in lines)


def test_a_closed_stdout_is_a_write_failure(log: Path, tmp_path: Path) -> None:
    """`>&-`: the matches cannot be written: exit 1, one line naming standard output. With
    -o the run does not need standard output and succeeds."""
    result = cer("match", "-e", "H ; T", str(log), "--format", "jsonl",
                 stdout=None, preexec_fn=lambda: os.close(1))
    assert result.returncode == 1
    assert _lines(result.stderr) == ["error: cannot write standard output: it is closed"]
    out = tmp_path / "out.jsonl"
    result = cer("match", "-e", "H ; T", str(log), "-o", str(out),
                 stdout=None, preexec_fn=lambda: os.close(1))
    assert result.returncode == 0, result.stderr
    assert len(out.read_text().splitlines()) == 10


# --------------------------------------------------------------------------- cannot write or read


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("command", [["match", "--format", "jsonl"], ["match", "--count"],
                                     ["explain"]])
def test_standard_output_on_a_full_device_is_exit_1_naming_it(log: Path, command) -> None:
    with open("/dev/full", "wb") as full:
        result = cer(command[0], "-e", "H ; T", str(log), *command[1:], stdout=full)
    assert result.returncode == 1
    assert _lines(result.stderr) == ["error: cannot write standard output: No space left on device"]


def _file_size_limit(size: int):
    """A file-size limit in the child: writing past it fails with EFBIG, as a full disk
    fails with ENOSPC (SIGXFSZ ignored, so the write returns the error)."""
    def set_limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    return set_limit


@pytest.mark.parametrize("fmt, query", [("parquet", "H ; T FILTER T[tmp > 1000]"),
                                        ("parquet", "H ; T"), ("jsonl", "H ; T"),
                                        ("csv", "H ; T")])
def test_a_full_file_system_is_exit_1_naming_the_file(tmp_path: Path, log: Path, fmt, query):
    """Also a Parquet file of no match (written by another path than the matches' one)."""
    out = tmp_path / f"out.{fmt}"
    out.write_text("previous\n")
    result = cer("match", "-e", query, str(log), "-o", str(out),
                 preexec_fn=_file_size_limit(300))
    assert result.returncode == 1
    assert _lines(result.stderr) == [f"error: cannot write {out}: File too large"]
    assert out.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name, "s.csv"]


@pytest.fixture
def shared_tmp():
    """A directory another user can enter (pytest's tmp_path is private to its owner)."""
    d = Path(tempfile.mkdtemp(prefix="cer-test-"))
    d.chmod(0o755)
    yield d
    for p in d.rglob("*"):
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
    shutil.rmtree(d)


def _unprivileged() -> list[str]:
    """A command prefix that runs without the permissions the test takes away (root has
    them all): setpriv to `nobody` when root, nothing otherwise."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no way to drop permissions")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


def _cer_as_user(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*_unprivileged(), sys.executable, "-m", "cer_cli", *args],
                          capture_output=True, env=ENV, timeout=300)


def test_a_read_only_directory_is_exit_1_like_any_write_failure(shared_tmp: Path) -> None:
    """One rule for "cannot write the output": the system's refusal is exit 1 with one line
    naming the file, whether the disk is full or the directory read-only."""
    log = shared_tmp / "s.csv"
    log.write_text(CSV)
    log.chmod(0o644)
    ro = shared_tmp / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    result = _cer_as_user("match", "-e", "H ; T", str(log), "-o", str(ro / "out.jsonl"))
    assert result.returncode == 1, result.stderr
    assert _lines(result.stderr) == [f"error: cannot write {ro / 'out.jsonl'}: Permission denied"
                                     f" (creating a file in {ro})"]
    assert list(ro.iterdir()) == []


@pytest.mark.parametrize("command", ["match", "check", "explain"])
def test_a_log_in_a_directory_the_user_cannot_enter_is_exit_2_naming_it(shared_tmp, command):
    locked = shared_tmp / "locked"
    locked.mkdir()
    (locked / "s.csv").write_text(CSV)
    locked.chmod(0o000)
    result = _cer_as_user(command, "-e", "H ; T", str(locked / "s.csv"))
    assert result.returncode == 2
    assert _lines(result.stderr) == [f"error: cannot read {locked / 's.csv'}: Permission denied"]


# --------------------------------------------------------------------------- messages


def test_an_unordered_window_attribute_names_the_stream_row_and_values(tmp_path: Path) -> None:
    path = tmp_path / "seqs.csv"
    path.write_text("type,seq\nA,1\nB,5\nA,3\nB,6\n")
    result = cer("match", "-e", "A ; B WITHIN 5 [seq]", str(path), "--count")
    assert result.returncode == 2
    err = result.stderr.decode()
    assert ("WITHIN 5 [seq] needs events ordered by seq, but the log is not: stream 'seqs',"
            " data row 2 (0-based) has seq 3, below 5 of stream 'seqs', data row 1") in err
    assert err.startswith("<expr>:1:14: error:")


@pytest.mark.parametrize("query", ["A ; B WITHIN {b} [seq]",
                                   "A AS a ; B AS b FILTER a.v < b.v WITHIN {b} [seq]"])
def test_a_decimal_window_bound_over_integers_float_rounds_is_exit_2(tmp_path: Path, query) -> None:
    """``seq - 2.5`` is float arithmetic: beyond 2^53 it rounds, and every B would count as
    within 2.5 of the A (the CEA kernel, the hash join and the others all said 3). Refused,
    with the integer bound that keeps the same window; small integers keep the decimal."""
    big = 2 ** 60
    path = tmp_path / "seqs.csv"
    path.write_text(f"type,seq,v\nA,{big},1\nB,{big + 2},2\nB,{big + 3},3\nB,{big + 4},4\n")
    result = cer("match", "-e", query.format(b="2.5"), str(path), "--count")
    assert result.returncode == 2
    err = result.stderr.decode()
    assert (f"WITHIN 2.5 [seq]: a decimal bound over the integer seq of stream 'seqs', data row 0"
            f" (0-based), {big}, beyond 2^53") in err
    assert "hint: write WITHIN 2 [seq]: over integers it is the same window" in err
    assert cer("match", "-e", query.format(b="2"), str(path), "--count").stdout == b"1\n"
    path.write_text("type,seq,v\nA,10,1\nB,12,2\nB,13,3\n")
    assert cer("match", "-e", query.format(b="2.5"), str(path), "--count").stdout == b"1\n"
    # the least int64, whose absolute value int64 cannot hold, is named as well (it was an
    # internal error, exit 1)
    path.write_text(f"type,seq,v\nA,{-2 ** 63},1\nB,{2 ** 62},2\n")
    result = cer("match", "-e", query.format(b="2.5"), str(path), "--count")
    assert result.returncode == 2, result.stderr
    assert f"data row 0 (0-based), {-2 ** 63}, beyond 2^53" in result.stderr.decode()


@pytest.mark.parametrize("source", ["file", "stdin", "expr"])
def test_a_byte_order_mark_before_the_query_is_skipped(tmp_path: Path, log: Path, source) -> None:
    text = "\ufeffH ; T\n"
    if source == "file":
        (tmp_path / "q.cel").write_text(text, encoding="utf-8")
        result = cer("check", str(tmp_path / "q.cel"), str(log))
    elif source == "stdin":
        result = cer("check", "-", str(log), input=text.encode())
    else:
        result = cer("check", "-e", text, str(log))
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().splitlines()[-1] == "WHERE (H ; T)"


def test_a_huge_integer_literal_is_exit_2_with_its_position(log: Path) -> None:
    result = cer("match", "-e", "H ; T FILTER T[tmp > " + "9" * 5000 + "]", str(log))
    assert result.returncode == 2
    err = result.stderr.decode()
    assert err.startswith("<expr>:1:22: error: integer too large: 99999999999999999999…(5,000 digits)")
    assert "internal error" not in err and len(err) < 2000


@pytest.mark.parametrize("query", ["A ; B WITHIN 3 [seq]",
                                   "A ; !C ; B WITHIN 3 [seq]",
                                   "A AS a ; B AS b FILTER a.v < b.v WITHIN 3 [seq]"])
def test_a_window_reaching_below_the_least_int64_keeps_its_runs(tmp_path: Path, query) -> None:
    """``seq - 3`` below the least int64 wrapped around to a huge time in the automaton's
    kernel, which then dropped the A: no match, exit 0 (the hash join, on offsets, found
    it). The window's lower edge is now held at the least int64."""
    import polars as pl

    low = -(2 ** 63)
    path = tmp_path / "seqs.parquet"
    for first in (low, low + 3):
        pl.DataFrame({"type": ["A", "B"], "seq": [first, first + 1], "v": [1, 2]}).write_parquet(path)
        result = cer("match", "-e", query, str(path), "--count")
        assert (result.returncode, result.stdout, result.stderr) == (0, b"1\n", b""), first


@pytest.mark.parametrize("query", ["A ; B WITHIN 1 [v]",
                                   "A AS a ; B AS b FILTER a.w < b.w WITHIN 1 [v]"])
def test_an_infinite_window_time_is_exit_2_naming_its_row(tmp_path: Path, query) -> None:
    """-inf - -inf has no value: on v = -inf, -inf, 0 the automaton found no match and the
    hash join one, both exit 0. Refused, naming the row; finite floats run."""
    import polars as pl

    path = tmp_path / "vals.parquet"
    inf = float("inf")
    pl.DataFrame({"type": ["A", "B", "B"], "v": [-inf, -inf, 0.0], "w": [1, 2, 3]}).write_parquet(path)
    result = cer("match", "-e", query, str(path), "--count")
    assert result.returncode == 2, result.stderr
    err = result.stderr.decode()
    assert "stream 'vals', data row 0 (0-based) has v -inf: an infinite window time" in err
    assert "hint: write a finite v, or leave it empty" in err
    pl.DataFrame({"type": ["A", "B", "B"], "v": [-1.5, -1.0, 0.0], "w": [1, 2, 3]}).write_parquet(path)
    assert cer("match", "-e", query, str(path), "--count").stdout == b"1\n"  # B at -1.0


#: (query, log) pairs whose window times are refused at several events, in several ways:
#: the error names the first such event of the stream (``executor.refused_time``) whatever
#: the frames, the ``--jobs`` pool's tasks or Spark's tasks (``tests/test_spark.py``) it is
#: cut into, and it names the earlier event a smaller time is below, even in a frame before.
INF = float("inf")
REFUSED_TIMES = {
    # each key in order on its own, not the stream: row 2's 2 is below row 1's 100
    "out of order between keys": ("A ; B PARTITION BY [id] WITHIN 5 [v]", {
        "type": ["A", "A", "B", "B", "A", "B"], "v": [1, 100, 2, 101, 3, 102],
        "id": [0, 1, 0, 1, 0, 1]}),
    # two falls: rows 10 and 21
    "out of order twice": ("A ; B WITHIN 1 [v]", {
        "type": ["A", "B"] * 15,
        "v": [*range(10), 3, *range(11, 21), 5, *range(22, 30)]}),
    # an infinite time at rows 3 and 8 (key 1, then key 0); row 3 is also below row 2
    "infinite twice": ("A ; B PARTITION BY [id] WITHIN 1 [v]", {
        "type": ["A", "B"] * 5, "v": [0.0, 1.0, 2.0, -INF, 4.0, 5.0, 6.0, 7.0, INF, 9.0],
        "id": [0, 1] * 5}),
    # out of order at row 2 (key 0's 2 below key 1's 50), then key 1 infinite at row 5:
    # the first is the order's, though each key's own first fault is another
    "out of order, then infinite": ("A ; B PARTITION BY [id] WITHIN 1 [v]", {
        "type": ["A", "B", "A", "B", "A", "B"], "v": [1.0, 50.0, 2.0, 51.0, 3.0, INF],
        "id": [0, 1, 0, 1, 0, 1]}),
}
REFUSED_FIRST = {
    "out of order between keys": "data row 2 (0-based) has v 2, below 100 of stream 'log',"
                                 " data row 1",
    "out of order twice": "data row 10 (0-based) has v 3, below 9 of stream 'log', data row 9",
    "infinite twice": "data row 3 (0-based) has v -inf: an infinite window time",
    "out of order, then infinite": "data row 2 (0-based) has v 2.0, below 50.0 of stream"
                                   " 'log', data row 1",
}


@pytest.mark.parametrize("case", list(REFUSED_TIMES))
def test_a_refused_window_time_names_the_streams_first(tmp_path: Path, case) -> None:
    """The first refused window time of the stream, whichever the fault: the infinite
    check ran before the order check on each frame, so an infinite time after a fall in
    the same frame was named instead of the fall."""
    query, columns = REFUSED_TIMES[case]
    path = tmp_path / "log.parquet"
    pl.DataFrame(columns).write_parquet(path)
    for jobs in ("1", "2"):
        result = cer("match", "-e", query, str(path), "--count", "--jobs", jobs)
        assert result.returncode == 2, result.stderr
        assert REFUSED_FIRST[case] in result.stderr.decode(), (jobs, result.stderr)


def test_an_unordered_window_time_names_the_earlier_event_in_a_frame_before(tmp_path):
    """The earlier event a time is below is named even when it ended the frame before:
    it was then "below 9, an earlier event's", so the message depended on the frames."""
    from cer_cli.api import compile_query, read_events
    from cer_cli.query.errors import QueryError

    query, columns = REFUSED_TIMES["out of order twice"]
    path = tmp_path / "log.parquet"
    pl.DataFrame(columns).write_parquet(path)
    for size in (2, 5, 10, 1000):  # row 10 first in its frame (2, 5, 10) or not (1000)
        log = read_events([str(path)], batch_size=size)
        with pytest.raises(QueryError) as e:
            list(compile_query(query, schema=log.schema).run(log.batches()))
        assert REFUSED_FIRST["out of order twice"] in e.value.message, size
