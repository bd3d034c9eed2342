"""The local pool (``cer match --jobs N``, cer_cli/plan/pool.py): the plan's fan-out run on
threads gives the single core's matches, in its order, and its count — through the pool's
own API on random queries over random streams cut into many frames and ranges, and through
``cer match`` in every output format and shape; ``cer explain`` names the runner; Ctrl-C
stops a pooled run as it stops one core's; the pool's memory stays within N times the
single core's plus the frames read ahead.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cer_cli.api import compile_query, read_events
from cer_cli.engine import driver
from cer_cli.events import MatchBatch, as_matches, join_batches
from cer_cli.io.read import read_frame
from cer_cli.plan import pool
from cer_cli.plan.fanout import PARTITION, SINGLE
from cer_cli.query.errors import QueryError
from cer_cli.query.parser import parse
from cer_cli.query.printer import to_text
from tests import test_outputs as outputs
from tests.gen_formulas import edge_values, formulas, queries, streams

ROOT = Path(__file__).resolve().parents[1]
#: the module (``cer_cli.plan.fanout`` is also the name of its function)
fanout = importlib.import_module("cer_cli.plan.fanout")


@contextmanager
def small_pieces(rows: int = 2):
    """The pool cut fine: ranges of ``rows`` events, slices of ``rows`` events (marks after
    each), every log large enough for it — so that tiny streams exercise many pieces,
    contexts that span them, and the merge."""
    with mock.patch.object(pool, "RANGE_ROWS", rows), \
            mock.patch.object(pool, "SLICE_ROWS", rows), \
            mock.patch.object(pool, "COUNT_SLICE_ROWS", rows), \
            mock.patch.object(pool, "JOIN_MATCHES", rows), \
            mock.patch.object(fanout, "POOL_MIN_EVENTS", 0):
        yield


def _logs(events: list[dict], directory: Path) -> list[str]:
    return outputs.write_logs(events, directory)


PROPS = settings(max_examples=60, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def check_pool_equals_one_core(query, events, directory: Path, batch: int) -> None:
    """The pool with 2 and 3 tasks, the stream read in frames of ``batch`` events: the
    same matches (partition keys included) in the same order, and the same count, as one
    driver over the stream."""
    logs = _logs(events, directory)
    text = to_text(query)
    log = read_events(logs, times=outputs.TIME_OPTIONS, batch_size=batch)
    try:
        compiled = compile_query(text, schema=log.schema)
    except QueryError:
        return
    if compiled.fanout.kind == SINGLE:
        return
    try:
        want = [(m.key(), repr(m.partition))  # repr: a key -0.0 is not 0.0, NaN is NaN
                for m in as_matches(driver.run_batches(compiled.executor(), log.batches()))]
    except QueryError as e:  # found while running: the pool finds it too
        for jobs in (2, 3):
            with small_pieces(), pytest.raises(QueryError) as got:
                list(pool.run_batches(compiled, log.batches(), jobs))
            assert got.value.message == e.message
        return
    for jobs in (2, 3):
        with small_pieces():
            got = [(m.key(), repr(m.partition))
                   for m in as_matches(pool.run_batches(compiled, log.batches(), jobs))]
            n = pool.run_count(compiled, log.batches(), jobs)
        assert got == want, (text, jobs)
        assert n == len(want), (text, jobs)


def compiled_kind(text: str, log) -> str | None:
    try:
        return compile_query(text, schema=log.schema).fanout.kind
    except QueryError:
        return None


#: The streams of the pool's properties: half of them with edge values in ``v`` and ``id``.
STREAMS = streams(max_size=12) | streams(max_size=12).flatmap(edge_values)


@given(query=queries(formulas(max_depth=3)) | queries(formulas(max_depth=3, with_absent=True)),
       events=STREAMS, batch=st.sampled_from([1, 3, 100]))
@PROPS
@example(query=parse("A ; B PARTITION BY [id] WITHIN 2 EVENTS"),
         events=[{"type": t, "stream": "S1", "time": i, "ts": i, "v": 0, "id": i % 2}
                 for i, t in enumerate("AABBAB")], batch=1).via("two keys, frames of 1")
@example(query=parse("A ; B PARTITION BY [id] WITHIN 3 EVENTS"),
         events=[{**e, "time": i} for i, e in enumerate(outputs.EDGE * 2)], batch=1).via(
    "edge values, a key -0.0 and 0.0")
@example(query=parse("A ; B ; C WITHIN 1 second"),
         events=[{"type": t, "stream": "S1", "time": i * 400_000_000, "ts": i, "v": 0, "id": 0}
                 for i, t in enumerate("ABCABCAABBCC")], batch=3).via("a duration's context")
@example(query=parse("SELECT * WHERE (S1>B AS x) OR B OR NOT(A) PARTITION BY [id]"),
         events=[{"type": t, "stream": s, "time": 0, "ts": 0, "v": 0, "id": int(s == "S2")}
                 for t, s in [("A", "S1")] * 4 + [("B", "S2"), ("B", "S1")]],
         batch=1).via("two label sets at one event: ordered by label, not by which came first")
def test_the_pool_gives_the_single_cores_matches_in_its_order(tmp_path_factory, query, events,
                                                             batch):
    check_pool_equals_one_core(query, events, tmp_path_factory.mktemp("logs"), batch)


@pytest.mark.slow
@given(query=queries(formulas(max_depth=3)) | queries(formulas(max_depth=3, with_absent=True)),
       events=streams(max_size=20) | streams(max_size=20).flatmap(edge_values),
       batch=st.sampled_from([1, 2, 5, 100]))
@settings(PROPS, max_examples=600)
def test_the_pool_gives_the_single_cores_matches_in_its_order_long(tmp_path_factory, query,
                                                                  events, batch):
    check_pool_equals_one_core(query, events, tmp_path_factory.mktemp("logs"), batch)


@pytest.mark.parametrize("jobs", [2, 3])
@given(case=outputs.OUTPUT_CASES)
@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@example(case=(parse("SELECT NONE WHERE A ; B PARTITION BY [id] WITHIN 3 EVENTS"),
               outputs._events("AABBAB"), None)).via("SELECT NONE, two keys")
@example(case=(parse("A AS x ; B AS y WITHIN 2 EVENTS"), outputs._events("ABABAB"), 2))
@example(case=(parse("A+ AS x ; B AS y PARTITION BY [id] WITHIN 4 EVENTS"),
               [{**e, "time": i} for i, e in enumerate(outputs.EDGE * 2)], None)).via(
    "edge values in every column and key")
def test_every_output_of_cer_match_jobs(tmp_path_factory, jobs, case):
    """``tests/test_outputs.py``'s property with ``--jobs N``: every format and shape, the
    table, ``--count`` and ``--limit`` read back equal to the engine's own matches, their
    values (edge values too) to the log's."""
    plain = outputs.run

    def run(*args):
        return plain(*args, "--jobs", str(jobs))

    with small_pieces(), mock.patch.object(outputs, "run", run):
        outputs.check_every_output(*case, tmp_path_factory.mktemp("out"))


def test_jobs_1_is_the_single_core_and_the_default_is_the_cores(tmp_path):
    """``--jobs 1`` runs one driver; ``--jobs`` unset is the machine's cores; 0 is refused."""
    log = outputs.write_logs(outputs._events("AABBAB" * 4), tmp_path)
    q = "A ; B PARTITION BY [id] WITHIN 3 EVENTS"
    with small_pieces(), mock.patch.object(pool, "run_count", side_effect=AssertionError):
        one = outputs.run("match", "-e", q, *log, *outputs.TIME, "--count", "--jobs", "1")
    assert one.exit_code == 0, one.output
    with small_pieces():
        default = outputs.run("match", "-e", q, *log, *outputs.TIME, "--count")
    assert default.stdout == one.stdout
    assert fanout.default_jobs() == len(os.sched_getaffinity(0))
    zero = outputs.run("match", "-e", q, *log, "--count", "--jobs", "0")
    assert zero.exit_code == 2 and "--jobs" in zero.output


def test_jobs_goes_with_local_runs_only():
    got = outputs.run("match", "-e", "A", "samples/fig1.csv", "--spark", "--jobs", "2")
    assert got.exit_code == 2 and "--jobs is for local runs" in got.output


# --------------------------------------------------------------------------- explain


@pytest.mark.parametrize(("text", "jobs", "log", "says"), [
    ("A ; B PARTITION BY [id] WITHIN 3 EVENTS", 4, None,
     "runner: a local pool of 4 threads: each PARTITION BY key's events go to one task"),
    ("A ; B WITHIN 3 EVENTS", 2, None,
     "runner: a local pool of 2 threads: the stream is cut into consecutive ranges"),
    ("A ; B", 2, None, "runner: one core: the query cannot be split (no PARTITION BY and no"
                       " WITHIN"),
    ("A ; B WITHIN 3 EVENTS", 1, None, "runner: one core: --jobs 1"),
    ("T ; H WITHIN 3 EVENTS", 2, "samples/fig1.csv",
     "runner: one core: 9 events (below 20,000 the kernel runs as plain Python"),
])
def test_explain_names_the_runner_and_its_tasks(text, jobs, log, says):
    args = ["explain", "-e", text, *([log] if log else []), "--jobs", str(jobs)]
    got = outputs.run(*args)
    assert got.exit_code == 0, got.output
    assert says in got.stdout
    data = json.loads(outputs.run(*args, "--format", "json").stdout)
    assert data["plan"]["runner"].startswith(says.removeprefix("runner: "))


def test_open_absence_report_runs_on_one_core():
    plan = compile_query("A ; !B PARTITION BY [id] WITHIN 3 EVENTS")
    assert plan.fanout.kind == PARTITION
    assert not plan.fanout.runner(4, 10**6, open_ends=True).pool
    assert plan.fanout.runner(4, 10**6).tasks == 4


# --------------------------------------------------------------------------- order errors


def test_an_unordered_window_attribute_fails_as_on_one_core(tmp_path):
    """The feeder checks the window time over the whole stream: the disorder between two
    keys (each key ordered on its own) is the single core's error, word for word."""
    path = tmp_path / "s.csv"
    pl.DataFrame({"type": ["A", "B", "A", "B"], "n": [1, 5, 3, 6], "id": [0, 1, 0, 1]}) \
        .write_csv(path)
    q = "A ; B PARTITION BY [id] WITHIN 3 [n]"
    want = outputs.run("match", "-e", q, str(path), "--count", "--jobs", "1")
    assert want.exit_code == 2 and "needs events ordered by n" in want.output
    with small_pieces(10):
        got = outputs.run("match", "-e", q, str(path), "--count", "--jobs", "2")
    assert (got.exit_code, got.output) == (want.exit_code, want.output)


# --------------------------------------------------------------------------- Ctrl-C


def _big_log(d: Path, keys: int) -> str:
    """20,000 padding events, then per key 3,000 As and a B: each B ends 2^3000 - 1 matches
    of ``A+ ; B`` (a run that never ends on its own); large enough for the pool."""
    pad = 20_000
    types = ["D"] * pad + ["A"] * 3000 * keys + ["B"] * keys
    k = [i % keys for i in range(pad)] + [i % keys for i in range(3000 * keys)] + list(range(keys))
    pl.DataFrame({"type": types, "k": k, "x": list(range(len(types)))}).write_csv(d / "log.csv")
    return "log.csv"


@pytest.mark.parametrize(("query", "keys"), [
    ("A+ ; B PARTITION BY [k] WITHIN 10000 EVENTS", 2),
    ("A+ ; B WITHIN 5000 EVENTS", 1),
])
@pytest.mark.parametrize("mode", ["count", "parquet"])
def test_a_signal_stops_a_pooled_run(tmp_path: Path, query, keys, mode):
    """Ctrl-C while every task enumerates endlessly: one line, 130, within the same few
    seconds as one core, and no partial file."""
    from tests.test_interrupt import EXIT_WITHIN, _deep_in, _signal, _start

    log = _big_log(tmp_path, keys)
    out = ["--count"] if mode == "count" else ["-o", "out.parquet"]
    proc = _start(tmp_path, "-e", query, log, "--jobs", "2", *out)
    _deep_in(proc, tmp_path, 2.0, part=mode != "count")
    rc, err, took = _signal(proc, signal.SIGINT)
    assert rc == 130, err
    assert err.splitlines()[-1] == "interrupted" and "Traceback" not in err, err
    assert took < EXIT_WITHIN, took
    assert sorted(os.listdir(tmp_path)) == ["log.csv"]


# --------------------------------------------------------------------------- memory


def _peak(tmp_path: Path, *args: str) -> tuple[str, int]:
    """The output and the peak RSS (MB) of ``cer match ARGS`` in a child process."""
    from tests import peak

    got = peak.cer_match(list(args), cwd=tmp_path, timeout=600)
    return got.stdout.strip(), int(got.peak_mb)


def test_the_pools_memory_is_within_n_times_one_cores(tmp_path: Path):
    """Peak RSS of ``--jobs 2`` at most twice ``--jobs 1``'s plus the frames read ahead
    (loosely: the bound holds with room), on a 300,000-event log with 100 keys, counting
    and writing Parquet; the same matches both ways."""
    n = 300_000
    rng = np.random.default_rng(7)
    frame = pl.DataFrame({"type": np.array(list("ABCD"))[rng.integers(0, 4, n)],
                          "ts": np.arange(n), "k": rng.integers(0, 100, n)})
    frame.write_parquet(tmp_path / "log.parquet")
    frame_mb = frame.estimated_size() / 2**20
    q = "SELECT * WHERE A AS a ; B AS b ; C AS c PARTITION BY k WITHIN 10 EVENTS"
    for out in (["--count"], ["-o", "out.parquet"]):
        one, peak1 = _peak(tmp_path, "-e", q, "log.parquet", *out, "--jobs", "1")
        if out != ["--count"]:
            one = pl.read_parquet(tmp_path / "out.parquet")
        two, peak2 = _peak(tmp_path, "-e", q, "log.parquet", *out, "--jobs", "2")
        if out != ["--count"]:
            two = pl.read_parquet(tmp_path / "out.parquet")
            assert two.equals(one)
        else:
            assert two == one
        assert peak2 <= 2 * peak1 + frame_mb, (out, peak1, peak2, frame_mb)


def test_the_kernel_is_fed_one_array_type_on_every_path(tmp_path: Path, monkeypatch):
    """numba compiles a kernel once per argument types, and a read-only array (what polars
    hands over without a copy) is another type than a writable one: ``--jobs 2 -o`` fed the
    kernel writable positions where one core fed read-only ones, and compiled it a second
    time (~500 MB, 13-22 s); on a cold cache the memory test above failed on it. Every path
    now hands the kernel read-only inputs (``engine.jit.readonly``)."""
    from cer_cli.engine import kernel as K
    from tests.builders import run as cli

    seen = set()
    real = K.run_events

    def spy(i, stop, cols, positions, keys, times, hastime, *rest):
        seen.add(tuple(a.flags.writeable for a in (positions, keys, times, hastime)))
        return real(i, stop, cols, positions, keys, times, hastime, *rest)

    monkeypatch.setattr(K, "run_events", spy)
    log = tmp_path / "log.csv"
    pl.DataFrame({"type": list("ABCD") * 150, "k": [i % 5 for i in range(600)],
                  "ts": range(600)}).write_csv(log)
    q = "SELECT * WHERE A AS a ; B AS b ; C AS c PARTITION BY k WITHIN 10 EVENTS"
    with small_pieces(100):
        for jobs in ("1", "2"):
            for out in (["--count"], ["-o", str(tmp_path / f"out{jobs}.parquet")]):
                got = cli("match", "-e", q, str(log), "--jobs", jobs, *out)
                assert got.exit_code == 0, got.output
    assert seen == {(False, False, False, False)}


# --------------------------------------------------------------------------- merging


def _batch(ends: list[int], parts: dict, labelsets: tuple, seed: int) -> MatchBatch:
    """Matches ending at ``ends``, 1-3 events each, random partition ids and label sets."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 4, len(ends))
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    pos = rng.integers(0, 1000, int(off[-1])).astype(np.int64)
    return MatchBatch(np.asarray(ends, np.int64) - 1, np.asarray(ends, np.int64),
                      rng.integers(0, len(parts), len(ends)).astype(np.int64), off, pos,
                      rng.integers(0, len(labelsets), len(pos)).astype(np.int64), labelsets,
                      parts)


def _rows(batch: MatchBatch) -> list:
    return [(m.key(), m.partition) for m in batch.matches()]


def test_joined_batches_keep_every_match_with_its_partition_and_labels():
    """``join_batches`` of slices of batches numbered each their own way (the pool's tasks:
    their own partition ids and label sets): the same matches, keys and labels, in order."""
    a = _batch([1, 2, 2, 5, 7], {0: ("x",), 1: ("y",)}, (("a",), ("a", "b")), 1)
    b = _batch([3, 4, 6], {0: ("y",), 1: ("z",), 2: None}, (("b",), ("a",)), 2)
    c = _batch([8, 9], a.partitions, a.labelsets, 3)
    assert _rows(a.slice(1, 4)) == _rows(a)[1:4]
    assert len(a.slice(2, 2)) == 0
    for parts in ([a.slice(0, 3), b, a.slice(3, 5), c], [a, c], [b.slice(1, 3)], [a, b, c]):
        joined = join_batches(parts)
        assert _rows(joined) == [r for p in parts for r in _rows(p)]
        assert list(joined.off) == sorted(joined.off) and joined.off[-1] == len(joined.pos)


def test_the_merge_yields_large_batches():
    """With many keys the tasks' matches interleave every few events: the merge joins them
    into large batches instead of yielding each run of one task's matches (it yielded a
    batch per ~20 matches, and a writer pays per batch: ``-o`` took 80x one core's time)."""
    n = 100_000
    rng = np.random.default_rng(7)
    frame = pl.DataFrame({"type": np.array(list("ABCD"))[rng.integers(0, 4, n)],
                          "ts": np.arange(n), "k": rng.integers(0, 100, n)})
    log = read_frame(frame)
    compiled = compile_query("A ; B ; C PARTITION BY [k] WITHIN 10 EVENTS", schema=log.schema)
    want = [m.key() for m in as_matches(driver.run_batches(compiled.executor(), log.batches()))]
    got = list(pool.run_batches(compiled, log.batches(), 2))
    assert [m.key() for m in as_matches(got)] == want
    assert len(want) / len(got) > 1_000, (len(want), [len(b) for b in got])


# --------------------------------------------------------------------------- reading


def test_count_reads_only_the_columns_the_query_needs(tmp_path):
    """``--count`` outputs no event: the frames carry the type and time columns and what the
    predicates, PARTITION BY and the window read, nothing else; the count is unchanged."""
    from cer_cli.io.read import read_events as read

    path = tmp_path / "log.csv"
    pl.DataFrame({"type": list("ABCABC"), "t": range(6), "v": range(6), "w": ["x"] * 6,
                  "k": [0, 1] * 3}).write_csv(path)
    q = "A ; B FILTER B[v < 5] PARTITION BY [k] WITHIN 10 [t]"
    assert compile_query(q, schema=read([str(path)]).schema).columns_read == {"v", "k", "t"}
    seen: list[list[str]] = []
    real = driver.run_count

    def spy(executor, frames, progress=None):
        def tap(fs):
            for f in fs:
                seen.append(f.columns)
                yield f
        return real(executor, tap(frames), progress)

    with mock.patch.object(driver, "run_count", spy):
        got = outputs.run("match", "-e", q, str(path), "--count", "--jobs", "1")
    assert got.exit_code == 0, got.output
    log = read([str(path)])
    want = len(list(as_matches(driver.run_batches(
        compile_query(q, schema=log.schema).executor(), log.batches()))))
    assert want and got.stdout.strip() == str(want)
    assert seen and all({c for c in cols if not c.startswith("__cer")} == {"type", "v", "k", "t"}
                        for cols in seen), seen


def test_count_looks_only_at_the_columns_the_query_reads(tmp_path):
    """``--count``'s schema pass looks only at the attributes the query reads, as its
    events pass does (Spark's schema pass too): a column it never reads is not parsed, so a
    late value that does not fit its type is no error for a count, while a run that outputs
    the events reads the column and names the value's row."""
    log = tmp_path / "l.csv"
    log.write_text("type,v,w\n" + "A,1,5\nB,2,6\n" * 6_000 + "A,abc,7\nB,3,8\n")
    for jobs in ("1", "2"):
        got = outputs.run("match", "-e", "A ; B FILTER B[w > 0] WITHIN 2 EVENTS", str(log),
                          "--count", "--jobs", jobs)
        assert got.exit_code == 0, got.output
        assert got.stdout.strip() == "6001"
    got = outputs.run("match", "-e", "A ; B WITHIN 2 EVENTS", str(log), "--format", "jsonl")
    assert got.exit_code == 2 and "line 12002" in got.output and "column 'v'" in got.output, \
        got.output


# --------------------------------------------------------------------------- Python API


@pytest.mark.parametrize("query", [
    "SELECT * WHERE A AS a ; B AS b ; C AS c PARTITION BY k WITHIN 5 EVENTS",
    "A ; B ; C WITHIN 6 [ts]",
])
def test_the_python_api_runs_the_pool_with_jobs(query):
    """``cer_cli.match`` / ``count`` with ``jobs=2`` run the plan's fan-out on the local
    pool (the whole frame dealt slice by slice) and give ``jobs=1``'s frame and count."""
    import cer_cli

    n = 60_000
    rng = np.random.default_rng(23)
    df = pl.DataFrame({"type": np.array(list("ABCD"))[rng.integers(0, 4, n)],
                       "ts": np.arange(n), "k": rng.integers(0, 10, n)})
    one = cer_cli.match(df, query, jobs=1, shape="wide")
    used = []
    real_batches, real_count = pool.run_batches, pool.run_count

    def batches(plan, frames, jobs, *a, **k):
        used.append(("match", jobs))
        return real_batches(plan, frames, jobs, *a, **k)

    def count(plan, frames, jobs, *a, **k):
        used.append(("count", jobs))
        return real_count(plan, frames, jobs, *a, **k)

    with mock.patch.object(pool, "run_batches", batches), \
            mock.patch.object(pool, "run_count", count):
        two = cer_cli.match(df, query, jobs=2, shape="wide")
        counted = cer_cli.count(df, query, jobs=2)
    assert used == [("match", 2), ("count", 2)]
    assert one.height > 1000 and two.equals(one)
    assert counted == cer_cli.count(df, query, jobs=1) == one.height
    with pytest.raises(ValueError, match="jobs must be a positive integer"):
        cer_cli.count(df, query, jobs=0)
