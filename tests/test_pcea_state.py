"""The hash join's array kernel (``engine/pcea_state.py`` over ``engine/pcea_kernel.py``)
against the brute-force reference and the Python objects (``engine/pcea.py``).

The kernel is the default for the shapes it supports, so ``tests/test_pcea.py`` runs every
hash-join test on both paths; here: the kernel with tiny arrays and a tiny work budget
(every growth, compaction, output flush and resumption path taken, with the same matches
in the same order), flat lists on every probe, some or none, trees rewritten in place, the
compiled kernel on the issue's comparison chain, memory bounded by the window, and which
path runs said by ``describe`` and ``cer explain``.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, assume, given, settings

from cer_cli import signals
from cer_cli.api import compile_query
from cer_cli.engine import jit as J
from cer_cli.engine import pcea as P
from cer_cli.engine import pcea_kernel as K
from cer_cli.engine import pcea_state
from cer_cli.engine.pcea import HashJoinEngine
from cer_cli.plan import plan
from cer_cli.query.errors import QueryError
from cer_cli.query.parser import parse
from tests import peak, reference
from tests.builders import events_frame
from tests.test_kernel import _shared
from tests.test_pcea import chain_queries, comparison_queries, ragged_streams, valued_streams
from tests.test_registers import register_queries

CHAIN = "A AS x ; B AS y ; C AS z FILTER x.val < y.val AND y.val < z.val WITHIN {w} EVENTS"
compiled_only = pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1" or not J.HAVE_NUMBA,
                                   reason="numba compiles the kernel")


def chain_log(n: int, seed: int = 26) -> list[dict]:
    rng = random.Random(seed)
    return [{"type": rng.choice("ABCD"), "val": rng.randrange(100)} for _ in range(n)]


def triple_loop(events: list[dict], w: int) -> int:
    """The chain's matches counted by a direct triple loop (WITHIN w EVENTS: last - first <= w)."""
    n = len(events)
    return sum(
        1
        for i in range(n) if events[i]["type"] == "A"
        for j in range(i + 1, min(n, i + w + 1)) if events[j]["type"] == "B"
        and events[j]["val"] > events[i]["val"]
        for k in range(j + 1, min(n, i + w + 1)) if events[k]["type"] == "C"
        and events[k]["val"] > events[j]["val"]
    )


def executors(text: str) -> tuple[HashJoinEngine, HashJoinEngine]:
    """The query's hash join on the array kernel and on the Python objects."""
    planned = compile_query(text)
    kernel = planned.executor()
    assert isinstance(kernel, HashJoinEngine)
    python = HashJoinEngine(kernel.pcea, kernel.window, kernel.partition_by, kernel.limit,
                            kernel.streams, kernel.strategy, kernel=False)
    return kernel, python


@pytest.fixture
def tiny(monkeypatch):
    """Arrays of a few rows, outputs of one match, a budget of a few units of work."""
    monkeypatch.setattr(pcea_state, "ROOM", 4)
    monkeypatch.setattr(pcea_state, "OUTPUT", 2)
    monkeypatch.setattr(pcea_state, "MIN_COMPACT", 8)
    monkeypatch.setattr(pcea_state, "BUDGET_PLAIN", 5)
    monkeypatch.setenv("CER_HJ_KERNEL", "1")
    monkeypatch.setenv("CER_JIT", "0")


def same_on_both(text: str, events: list[dict], one_by_one: bool = False,
                 size: int | None = None) -> list:
    """The matches of both, fed as one frame, one event at a time or ``size`` at a time."""
    kernel, python = executors(text)
    assert "array kernel" in kernel.kernel_text()
    frame = events_frame(events)
    size = 1 if one_by_one else size or frame.height
    frames = [frame.slice(i, size) for i in range(0, frame.height, size)]
    got = [m for f in frames for m in kernel.run(f)]
    want = [m for f in frames for m in python.run(f)]
    assert got == want  # the same matches in the same order
    assert kernel._state is not None  # the kernel ran, not a silent fallback
    return got


def test_tiny_arrays_and_budget_give_the_same_matches_in_the_same_order(tiny, monkeypatch):
    """Every array grows from 4 rows, outputs flush after each match, the kernel returns to
    Python every 5 units of work (and runs the signal handlers then), compactions run."""
    checks = []

    def check():
        checks.append(1)
        assert len(checks) < 100_000, "the kernel returns without making progress"

    monkeypatch.setattr(signals, "check", check)
    events = chain_log(600)
    got = same_on_both(CHAIN.format(w=20), events)
    assert len(got) == triple_loop(events, 20) > 100
    assert len(checks) > 100  # resumed mid-event many times
    kernel, _ = executors(CHAIN.format(w=20))
    assert kernel.count(events_frame(events)) == len(got)
    assert kernel._state.counters()["compactions"] > 0
    assert kernel._state.counters()["flat_lists"] > 0  # the runs in range, written out
    assert kernel._state.counters()["in_place"] > 0  # unshared trees rewritten


def test_batches_held_together_keep_their_matches(tiny):
    """Outputs of 2 matches, handed over when full (``kernel_state.handed_over``): every
    batch held before any is read, none sharing memory with another, gives the Python
    objects' matches in their order."""
    events = chain_log(300)
    kernel, python = executors(CHAIN.format(w=20))
    frame = events_frame(events)
    batches = list(kernel.run_batches(frame))
    assert [m for b in batches for m in b.matches()] == list(python.run(frame))
    assert len(batches) > 50 and any(b.start.base is not None for b in batches)
    assert not _shared(batches)


#: R adopts a T run and an S run, both compared, both whole runs: R's runs expand a flat list
#: with another set still to expand after it, then one with nothing after it
TREE = ("SELECT * WHERE ((T AS t ; S AS s) ; R AS r) OR ((S AS s ; T AS t) ; R AS r)"
        " FILTER t.v < r.v AND s.v > r.v WITHIN 8 EVENTS")


#: the kernel's own bound on a flat list (the tests below lower it)
FLAT_MAX = pcea_state.K.FLAT_MAX


@pytest.mark.parametrize("flat_max", [0, 2, FLAT_MAX])
@pytest.mark.parametrize("text, types, n", [(CHAIN.format(w=12).replace("val", "v"), "ABCD", 250),
                                            (TREE, "TSR", 150)])
def test_flat_lists_and_in_place_trees_give_the_same_matches_in_the_same_order(
        tiny, monkeypatch, flat_max, text, types, n):
    """A probe whose runs in range are at most ``FLAT_MAX`` — whole runs (a first step's,
    ``FLAT_RUNS``) or runs that each adopted one set (the chain's B runs, ``FLAT_KIDS``) —
    adopts them as a flat list instead of tree pieces, and a tree whose pieces no live run
    holds is rewritten in place: the matches, their order and the count do not change,
    whether every probe, some or none gets a list (``flat_max``: every tree insertion is in
    place, some are, or only those before a probe keeps pieces), with the walk interrupted
    anywhere in a list (tiny budget and outputs)."""
    monkeypatch.setattr(pcea_state.K, "FLAT_MAX", flat_max)
    rng = random.Random(11)
    events = [{"type": rng.choice(types), "v": rng.randrange(8)} for _ in range(n)]
    got = same_on_both(text, events)
    assert len(got) > 30
    reference.assert_same_matches(got, reference.reference_matches(parse(text), events))
    kernel, _ = executors(text)
    assert kernel.count(events_frame(events)) == len(got)
    counters = kernel._state.counters()
    assert (counters["flat_lists"] > 0) == (flat_max > 0)
    assert 0 < counters["in_place"] <= counters["tree_inserts"]
    assert (counters["in_place"] == counters["tree_inserts"]) == (flat_max == FLAT_MAX)


@pytest.mark.parametrize("text", [
    "SELECT * WHERE A AS a ; B AS b ; C AS c FILTER a.id = b.id AND b.v < c.v WITHIN 6 EVENTS",
    "SELECT * WHERE (A AS a ; B AS b) OR (B AS b ; A AS a) FILTER a.id = b.id WITHIN 5 EVENTS",
    "SELECT a, c WHERE A AS a ; B AS b ; C AS c FILTER a.v < b.v AND b.v < c.v WITHIN 6 EVENTS",
    "SELECT * WHERE A AS a ; B AS b FILTER a.v != b.v PARTITION BY [id] WITHIN 3 EVENTS",
    "SELECT * WHERE A AS a ; B AS b FILTER a.v <= b.v WITHIN 4 EVENTS LIMIT 1",
    "SELECT * WHERE A AS a ; B AS b ; C AS c FILTER a.v < b.v AND b.id = c.id",
])
def test_tiny_kernel_on_joins_trees_projections_partitions_and_limits(tiny, text):
    rng = random.Random(5)
    events = [{"type": rng.choice("ABC"), "v": rng.randrange(6), "id": rng.randrange(3)}
              for _ in range(150)]
    got = same_on_both(text, events)
    query = parse(text)
    if query.limit is None:
        reference.assert_same_matches(got, reference.reference_matches(query, events))
    else:
        reference.check_limited(got, query, events)
    same_on_both(text, events[:40], one_by_one=True)


#: the random tests' settings (the ``tiny`` fixture is not reset between examples: harmless)
RANDOM = settings(max_examples=60, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                         HealthCheck.function_scoped_fixture])


def kernel_and_python(query) -> tuple[HashJoinEngine, HashJoinEngine]:
    """A random query's hash join on the kernel and on the Python objects (hypothesis
    skips the queries the hash join or the kernel does not take)."""
    try:
        engine = plan(query).executor()
    except QueryError:
        assume(False)
    assume(isinstance(engine, HashJoinEngine) and engine._kernel_why is None)
    return engine, HashJoinEngine(engine.pcea, engine.window, engine.partition_by,
                                  engine.limit, engine.streams, engine.strategy, kernel=False)


@given(comparison_queries(), valued_streams())
@RANDOM
def test_tiny_kernel_equals_the_python_objects_on_random_comparisons(tiny, query, events):
    kernel, python = kernel_and_python(query)
    frame = events_frame(events)
    got, want = list(kernel.run(frame)), list(python.run(frame))
    assert got == want
    if query.limit is None:
        reference.assert_same_matches(got, reference.reference_matches(query, events))


@given(chain_queries(), ragged_streams())
@RANDOM
def test_tiny_kernel_equals_the_python_objects_on_random_equality_chains(tiny, shaped_query,
                                                                        events):
    _, query = shaped_query
    engine, python = kernel_and_python(query)
    frame = events_frame(events)
    assert list(engine.run(frame)) == list(python.run(frame))
    if query.limit is None:
        assert plan(query).executor().count(frame) == len(reference.reference_matches(query, events))


#: time and attribute windows: ``ts`` null on some events (no start, no end there), equal on
#: others; a tree (two compared sources), a partition, a projection, a fractional bound
#: (floored: exact over integers) and a duration (``time`` in ms)
TIMED = [
    "SELECT * WHERE A AS x ; B AS y ; C AS z FILTER x.v < y.v AND y.v < z.v WITHIN 4 [ts]",
    "SELECT * WHERE A AS x ; B AS y FILTER x.v <= y.v PARTITION BY [id] WITHIN 2 [ts]",
    "SELECT x, z WHERE A AS x ; B AS y ; C AS z FILTER x.id = y.id AND y.v > z.v WITHIN 3.5 [ts]",
    TREE.replace("WITHIN 8 EVENTS", "WITHIN 3 [ts]"),
    "SELECT * WHERE A AS x ; B AS y ; C AS z FILTER x.v < y.v AND y.v < z.v WITHIN 15 ms",
]


def timed_log(n: int, seed: int, types: str = "ABC", ts: int = 0, timed_until: int = 0
              ) -> list[dict]:
    """``ts`` from the given start, rising by 0-2, null on one event in five from
    ``timed_until`` on (``n``: never); ``time`` in ms."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ts += rng.choice((0, 0, 1, 1, 2))
        e = {"type": rng.choice(types), "v": rng.randrange(6), "id": rng.randrange(3),
             "time": 3 * i // 2 * 1_000_000}
        if rng.randrange(5) or i < timed_until:
            e["ts"] = ts
        out.append(e)
    return out


@pytest.mark.parametrize("nulls", ["throughout", "late", "none"])
@pytest.mark.parametrize("text", TIMED)
def test_tiny_kernel_runs_time_and_attribute_windows_as_the_python_objects(tiny, text, nulls):
    """A time window is one for all partitions; an event without a time ends no match;
    times far below zero are offsets from the first. While every event fed had a time,
    max-start pruning is exact (a start's node has its time as max-start) and flat lists are
    built; from the slice with the first event without one, a run's start is checked on its
    node and no flat list is built (the older ones hold earlier, timed starts). Fed in
    slices of 40: same matches, same order as the Python objects, and the brute force's."""
    # times below the kernel's NEG (they are offsets from the first in it), except with a
    # decimal bound, which every engine refuses over integers beyond 2^53 (``test_exits``)
    base = 0 if "3.5" in text else -(2 ** 62) - 50
    until = {"throughout": 0, "late": 120, "none": 200}[nulls]
    events = timed_log(200, 7, "TSR" if "T AS t" in text else "ABC", base, until)
    got = same_on_both(text, events, size=40)
    kernel, _ = executors(text)
    frame = events_frame(events)
    assert sum(kernel.count(frame.slice(i, 40)) for i in range(0, 200, 40)) == len(got) > 5
    counters = kernel._state.counters()
    assert kernel._state.timed and counters["compactions"] > 0
    if "[ts]" not in text:
        nulls = "none"  # a duration: the time column, which has no nulls
    assert kernel._state.st[pcea_state.K.NO_FLATS] == (nulls != "none")
    assert {"throughout": counters["flat_lists"] == 0, "none": counters["flat_lists"] > 0,
            "late": counters["flat_lists"] > 0 or "id" in text}[nulls]
    head = events[:70]
    reference.assert_same_matches(same_on_both(text, head), reference.reference_matches(parse(text), head))
    same_on_both(text, events[:50], one_by_one=True)
    if nulls == "late":
        reference.assert_same_matches(
            same_on_both(text, events[80:160], size=20),
            [m for m in reference.reference_matches(parse(text), events[80:160])])


@pytest.mark.parametrize("nulls", [False, True])
def test_time_windows_on_wide_values_and_many_runs_equal_the_python_objects(nulls):
    """``TIMED`` on 1,500 events with values 0-999 (trees of hundreds of runs, flat lists,
    compactions at the default sizes), fed in slices of 300: the same matches in the same
    order as the Python objects."""
    rng = random.Random(1)
    events, ts = [], 0
    for i in range(1500):
        ts += rng.choice((0, 1, 1, 2))
        e = {"type": rng.choice("ABC"), "v": rng.randrange(1000), "id": rng.randrange(5),
             "time": i * 1_000_000}
        if not nulls or rng.randrange(5):
            e["ts"] = ts
        events.append(e)
    renamed = [dict(e, type={"A": "T", "B": "S", "C": "R"}[e["type"]]) for e in events]
    for text in TIMED:
        wide = text.replace("4 [ts]", "20 [ts]").replace("3 [ts]", "15 [ts]").replace(
            "15 ms", "40 ms")
        got = same_on_both(wide, renamed if "T AS t" in text else events, size=300)
        assert len(got) > 10


def live_entries_after(text: str, events: list[dict]) -> int:
    """The kernel's live index entries after counting ``events`` in slices of 100 and a
    compaction."""
    kernel, _ = executors(text)
    frame = events_frame(events)
    for i in range(0, frame.height, 100):
        kernel.count(frame.slice(i, 100))
    kernel._state._compact()
    return kernel._state.live_entries()


def test_a_time_window_keeps_memory_to_the_window_in_every_partition(tiny):
    """Compaction keeps the runs whose start is within the window of the latest time of
    the whole log, not of their partition: a partition that falls silent is emptied."""
    text = "SELECT * WHERE A AS x ; B AS y FILTER x.v < y.v PARTITION BY [id] WITHIN 5 [ts]"
    rng = random.Random(3)

    def rows(n: int) -> int:
        return live_entries_after(text, [
            {"type": rng.choice("AB"), "v": rng.randrange(9), "ts": i,
             "id": i % 7 if i < 100 else 100 + i // 50} for i in range(n)])

    small, large = rows(600), rows(6000)
    assert large <= small + 4 and small < 40, (small, large)


def test_float_window_times_keep_the_python_objects_and_a_later_change_is_refused(tiny):
    text = "SELECT * WHERE A AS a ; B AS b FILTER a.v < b.v WITHIN 2 [ts]"
    ints = events_frame([{"type": "A", "v": 1, "ts": 1}, {"type": "B", "v": 2, "ts": 2}])
    floats = events_frame([{"type": "A", "v": 1, "ts": 3.5}, {"type": "B", "v": 2, "ts": 4.0}])
    engine = compile_query(text).executor()
    assert engine.count(floats) == 1
    assert "runs as Python objects: a window over Float64 times" in engine.describe()
    engine = compile_query(text).executor()
    assert engine.count(ints) == 1 and engine._state is not None
    with pytest.raises(QueryError, match="window's times changed type") as e:
        engine.count(floats)
    assert "CER_HJ_KERNEL=0" in e.value.hints[0]


def test_window_times_too_far_apart_for_int64_are_refused_not_wrapped(tiny):
    text = "SELECT * WHERE A AS a ; B AS b FILTER a.v < b.v WITHIN 9223372036854775807 [ts]"
    frame = events_frame([{"type": "A", "v": 1, "ts": -(2 ** 61)}, {"type": "B", "v": 2, "ts": 2 ** 61 - 1},
                          {"type": "B", "v": 3, "ts": 2 ** 62}])
    engine = compile_query(text).executor()
    assert engine.count(frame.slice(0, 2)) == 1  # 2^62 apart, the most the offsets hold
    with pytest.raises(QueryError, match="span .* more than the compiled hash join holds") as e:
        engine.count(frame.slice(2, 1))
    assert "CER_HJ_KERNEL=0" in e.value.hints[0]
    _, python = executors(text)
    assert python.count(frame) == 2


def test_the_comparison_chain_runs_on_the_kernel_and_explain_says_so():
    """The issue's chain must not fall back silently: ``describe`` (what ``cer explain``
    prints) names the array kernel, and a run keeps it."""
    engine = compile_query(CHAIN.format(w=100)).executor()
    assert isinstance(engine, HashJoinEngine)
    assert "runs on the array kernel" in engine.describe()
    engine.count(events_frame(chain_log(50)))
    assert engine._state is not None and "runs on the array kernel" in engine.describe()
    out = subprocess.run([sys.executable, "-m", "cer_cli", "explain", "-e", CHAIN.format(w=100)],
                         capture_output=True, text=True, check=True).stdout
    assert "runs on the array kernel" in out


#: iterated steps on the kernel: registers (an ordered loop index, whose trees hold first
#: iterations beside later ones), loops on keys (heaps), before, after and between other
#: steps, projected, partitioned, under EVENTS and attribute windows
LOOPS = [
    "SELECT * WHERE (A AS y FILTER y.v > PREV(y).v)+ WITHIN 12 EVENTS",
    "SELECT * WHERE C AS x ; (A AS y FILTER y.v > PREV(y).v)+ ; B AS z WITHIN 10 EVENTS",
    "SELECT * WHERE C AS x ; (A AS y FILTER y.v <= PREV(y).v AND y.id = x.id)+ WITHIN 10 EVENTS",
    "SELECT * WHERE (A AS y FILTER y.v > PREV(y).v * 2 - 900)+ ; B AS z FILTER y.id = z.id"
    " WITHIN 10 EVENTS",
    "SELECT y WHERE (A AS y FILTER y.v > PREV(y).v)+ ; B AS z WITHIN 10 EVENTS",
    "SELECT * WHERE C AS x ; (A AS y FILTER y.id = x.id)+ ; B AS z WITHIN 8 EVENTS",
    "SELECT * WHERE (A AS y FILTER y.v < PREV(y).v)+ PARTITION BY [id] WITHIN 12 EVENTS",
    "SELECT * WHERE (A AS y FILTER y.v > PREV(y).v)+ WITHIN 6 [ts]",
]


def looped_log(n: int, seed: int, values: int) -> list[dict]:
    rng = random.Random(seed)
    return [{"type": rng.choice("AAABC"), "v": rng.randrange(values), "id": rng.randrange(3),
             "ts": i // 2} for i in range(n)]


def test_an_iterations_first_and_later_runs_at_one_event_are_both_kept():
    """Found at scale: an iterated state's event makes two runs, its first iteration (a
    whole run) and its continuation (it adopted the earlier ones), in the same tree of
    the register's ordered index. A NULL ``T_KID`` at a subtree's root let the walk of
    whole runs report the continuation as a whole run: the rising subsequences of these
    14 values were 114, not 166, and ``1 2 4 3 5`` gave (3, 4) twice."""
    text = "SELECT * WHERE (A AS y FILTER y.v > PREV(y).v)+ WITHIN 12 EVENTS"
    for values, want in (((1, 2, 4, 3, 5), 23), ((864, 394, 776, 911, 430, 41, 265, 988, 523,
                                                   497, 414, 940, 802, 849), 166)):
        events = [{"type": "A", "v": v} for v in values]
        got = same_on_both(text, events)
        assert len(got) == len(set(got)) == want
        reference.assert_same_matches(got, reference.reference_matches(parse(text), events))


@pytest.mark.parametrize("text", LOOPS)
def test_tiny_kernel_runs_iterated_steps_as_the_python_objects(tiny, text):
    events = looped_log(160, 3, 6)
    got = same_on_both(text, events, size=40)
    assert len(got) > 10
    # the brute force enumerates every subset of the iterated events: 24 events at most
    reference.assert_same_matches(same_on_both(text, events[:24], one_by_one=True),
                                  reference.reference_matches(parse(text), events[:24]))


def test_iterated_steps_on_wide_values_and_many_runs_equal_the_python_objects(monkeypatch):
    """``LOOPS`` on 1,500 events with values 0-999 (trees of hundreds of runs, flat lists,
    compactions at the default sizes), fed in slices of 300."""
    monkeypatch.setenv("CER_HJ_KERNEL", "1")  # counted on the kernel too, uncompiled
    events = looped_log(1500, 4, 1000)
    for text in LOOPS:
        got = same_on_both(text, events, size=300)
        assert len(got) > 100
        counter, _ = executors(text)
        assert counter.count(events_frame(events)) == len(got)
        assert dag_counted(counter) == ("[ts]" not in text)


@given(register_queries(), valued_streams())
@RANDOM
def test_tiny_kernel_equals_the_python_objects_on_random_registers(tiny, query, events):
    engine, python = kernel_and_python(query)
    frame = events_frame(events)
    got = list(engine.run(frame))
    assert engine._kernel_why is None  # no silent fallback
    assert got == list(python.run(frame))
    if query.limit is None:
        reference.assert_same_matches(got, reference.reference_matches(query, events))
        # counted over the DAG (resumed after every few units of work, its stack grown)
        assert plan(query).executor().count(frame) == len(got)


def dag_counted(engine: HashJoinEngine) -> bool:
    """Whether the engine's kernel counted events over the DAG (``_count_dag``)."""
    return engine._state is not None and engine._state.st[K.C_STAMP] > 0


@pytest.mark.parametrize("text", [t for t in LOOPS if "[ts]" not in t])
def test_tiny_kernel_counts_iterated_steps_over_the_dag(tiny, text):
    """``--count`` of an iterated step walks the DAG of runs on the kernel (each shared
    set counted once per event), with tiny arrays and budget: the number of matches the
    kernel and the Python objects enumerate."""
    events = looped_log(400, 8, 6)
    frames = [events_frame(events[i:i + 70]) for i in range(0, len(events), 70)]
    kernel, python = executors(text)
    want = sum(len(list(python.run(f))) for f in frames)
    assert want > 20 and sum(kernel.count(f) for f in frames) == want
    assert dag_counted(kernel) and kernel._state.big_matches == 0


def rising_count(n: int, w: int) -> int:
    """Matches of ``(A AS y FILTER y.v > PREV(y).v)+ WITHIN w EVENTS`` over n rising values:
    every subset of a window's events that holds its last one."""
    return sum(2 ** (j - i - 1) if j > i else 1
               for i in range(n) for j in range(i, min(n, i + w + 1)))


def rising_engine(w: int) -> HashJoinEngine:
    return compile_query(f"SELECT * WHERE (A AS y FILTER y.v > PREV(y).v)+ WITHIN {w} EVENTS"
                         ).executor()


@pytest.mark.parametrize("jit", ["0", "1"])
@pytest.mark.parametrize("w", [61, 100])
def test_counts_beyond_int64_on_the_kernel_are_exact(monkeypatch, jit, w):
    """A register over a rising log: ~2^w runs per event. Within 61 events (the widest
    whose counts fit int64 per event) the kernel's total passes 2^62 and moves into a Python
    integer; within 100 (made to run on the kernel) events pass it on their own and are
    counted again in Python integers."""
    if jit == "1" and (os.environ.get("NUMBA_DISABLE_JIT") == "1" or not J.HAVE_NUMBA):
        pytest.skip("numba compiles the kernel")
    monkeypatch.setenv("CER_JIT", jit)
    monkeypatch.setenv("CER_HJ_KERNEL", "1")  # uncompiled too
    monkeypatch.setattr(P, "DAG_COUNT_BITS", 1000)  # w = 100 too: the kernel's own fallback
    events = [{"type": "A", "v": i} for i in range(150)]
    engine = rising_engine(w)
    assert engine.count(events_frame(events[:70])) + engine.count(events_frame(events[70:])) \
        == rising_count(150, w)
    assert dag_counted(engine) and engine._state.compiled == (jit == "1")
    assert 2 ** 63 < engine._state.big_matches


def test_counts_that_may_pass_int64_per_event_stay_on_the_python_objects(monkeypatch):
    """Within 61 events one state's runs fit the kernel's int64 per event; within 62 they
    may not, and the Python objects count them (10x faster than the kernel's count in
    Python integers). So do they in a small log, which the kernel would count uncompiled,
    unless ``CER_HJ_KERNEL=1``."""
    events = events_frame([{"type": "A", "v": i} for i in range(130)])
    for w, forced, kernel in [(61, "1", True), (62, "1", False), (61, "", False)]:
        monkeypatch.setenv("CER_HJ_KERNEL", forced)
        engine = rising_engine(w)
        assert engine.count(events) == rising_count(130, w)
        assert ("runs on the array kernel" in engine.describe()) == kernel
        assert kernel or "counting the runs of an iterated step" in engine.describe()
    assert "fewer than 20,000 events" in engine.describe()


#: carried keys: a value of an earlier event carried through the events between (a nested
#: index entry per probe key, one child per carried value), through iterations and a
#: register, beside a comparison, two carried at once, projected, partitioned, timed
CARRIED = [
    "SELECT * WHERE C AS x ; A AS y ; B AS z FILTER x.v = z.v WITHIN 12 EVENTS",
    "SELECT * WHERE C AS x ; A AS y ; B AS z ; A AS w FILTER x.id = z.id AND y.v = w.v"
    " WITHIN 10 EVENTS",
    "SELECT * WHERE C AS x ; (A AS y)+ ; B AS z FILTER x.v = z.v AND x.id = y.id WITHIN 8 EVENTS",
    "SELECT * WHERE C AS x ; (A AS y FILTER y.v > PREV(y).v)+ ; B AS z FILTER x.id = z.id"
    " WITHIN 10 EVENTS",
    "SELECT * WHERE C AS x ; A AS y ; B AS z FILTER x.v = z.v AND x.id < y.id WITHIN 12 EVENTS",
    "SELECT * WHERE C AS x ; A AS y ; A AS u ; B AS z FILTER x.v = z.v AND x.id = z.id"
    " WITHIN 12 EVENTS",
    "SELECT x, z WHERE C AS x ; A AS y ; B AS z FILTER x.v = z.v PARTITION BY [id]"
    " WITHIN 12 EVENTS",
    "SELECT * WHERE C AS x ; A AS y ; B AS z FILTER x.v = z.v WITHIN 6 [ts]",
]


@pytest.mark.parametrize("text", CARRIED)
def test_tiny_kernel_runs_carried_keys_as_the_python_objects(tiny, text):
    assert any(s.carried for s in compile_query(text).executor().pcea.states)
    events = looped_log(300, 5, 4)
    assert len(same_on_both(text, events, size=50)) > 5
    # the brute force enumerates every subset of the iterated events: fewer for a '+'
    few = events[:14] if ")+" in text else events[:24]
    reference.assert_same_matches(same_on_both(text, few, one_by_one=True),
                                  reference.reference_matches(parse(text), few))


def test_carried_keys_on_wide_values_equal_the_python_objects_and_compact():
    """``CARRIED`` on 10,000 events with values 0-99 (many carried values per probe key,
    compactions of nested entries at the default sizes), fed in slices of 4,000."""
    events = looped_log(10_000, 6, 100)
    for text in CARRIED:
        kernel, _ = executors(text)
        assert len(same_on_both(text, events, size=4000)) > 8
    frame = events_frame(events)
    kernel.count(frame)
    assert kernel._state.counters()["compactions"] > 0


def test_carried_values_follow_the_window_not_the_log(tiny):
    """Each carried value is a child entry of its probe key's: a value that left the window
    goes at the next compaction, so the entries do not grow with the distinct values seen."""
    text = "SELECT * WHERE C AS x ; A AS y ; B AS z FILTER x.v = z.v WITHIN 6 EVENTS"

    def entries(n: int) -> int:
        return live_entries_after(text, [{"type": "CAB"[i % 3], "v": i // 3} for i in range(n)])

    small, large = entries(600), entries(6000)
    assert large <= small + 2 and small < 20, (small, large)


def test_shapes_the_kernel_does_not_run_say_why():
    text = "SELECT * WHERE (A AS y FILTER y.v > PREV(y).v)+ WITHIN 5 EVENTS"
    engine = compile_query(text).executor()
    assert isinstance(engine, HashJoinEngine)
    assert "runs on the array kernel" in engine.describe()
    # counted in a small log, an iterated step's runs stay on the Python objects (the
    # uncompiled kernel counts them slower)
    assert engine.count(events_frame([{"type": "A", "v": 1}, {"type": "A", "v": 2}])) == 3
    assert "runs as Python objects: counting the runs of an iterated step" in engine.describe()
    engine = compile_query("SELECT * WHERE A AS a ; B AS b FILTER a.s < b.s WITHIN 5 EVENTS"
                           ).executor()
    engine.count(events_frame([{"type": "A", "s": "a"}, {"type": "B", "s": "b"}]))
    assert "runs as Python objects: compared values of kind str" in engine.describe()


def test_integers_beyond_float_precision_are_never_rounded():
    """float64 holds integers exactly up to 2^53: beyond, in the first frame, the Python
    objects run the join (exact); in a later one, the run is refused with a hint."""
    text = "SELECT * WHERE A AS a ; B AS b FILTER a.v < b.v WITHIN 5 EVENTS"
    big = 2 ** 60
    frame = events_frame([{"type": "A", "v": 1}, {"type": "B", "v": 2},
                          {"type": "A", "v": big}, {"type": "B", "v": big + 1}])
    engine = compile_query(text).executor()
    assert engine.count(frame) == 3  # (0, 1), (0, 3), (2, 3)
    assert "runs as Python objects: compared integers beyond 2^53" in engine.describe()
    engine = compile_query(text).executor()
    assert engine.count(frame.slice(0, 2)) == 1 and engine._state is not None
    with pytest.raises(QueryError, match="beyond 2\\^53 in a.v") as e:
        engine.count(frame.slice(2, 2))
    assert "CER_HJ_KERNEL=0" in e.value.hints[0]


@pytest.mark.parametrize("sign", [1, -1])
def test_the_first_integer_float64_rounds_is_never_compared_rounded(sign):
    """2^53 + 1 is the first integer float64 cannot hold, and it rounds to 2^53: the check
    once read the rounded values, took 2^53 for exact, and compared 2^53 + 1 > 2^53 as
    false (no match, exit 0). 2^53 itself is exact and stays on the kernel."""
    text = "SELECT * WHERE A AS a ; B AS b FILTER a.v > b.v WITHIN 5 EVENTS"
    top, low = sorted((sign * (2 ** 53 + 1), sign * 2 ** 53), reverse=True)
    frame = events_frame([{"type": "A", "v": top}, {"type": "B", "v": low}])
    engine = compile_query(text).executor()
    assert engine.count(frame) == 1
    assert "runs as Python objects: compared integers beyond 2^53" in engine.describe()
    exact = events_frame([{"type": "A", "v": sign * 2 ** 53}, {"type": "B", "v": sign * 2 ** 53}])
    engine = compile_query(text).executor()
    assert engine.count(exact) == 0 and engine._state is not None
    # a later frame with it is refused, as any integer beyond 2^53
    with pytest.raises(QueryError, match="beyond 2\\^53 in a.v"):
        engine.count(frame)


@compiled_only
def test_compiled_kernel_counts_and_enumerates_the_chain_as_the_brute_force(monkeypatch):
    monkeypatch.setenv("CER_JIT", "1")
    events = chain_log(4000)
    want = triple_loop(events, 30)
    kernel, python = executors(CHAIN.format(w=30))
    frame = events_frame(events)
    got = [m for b in kernel.run_batches(frame) for m in b.matches()]
    assert kernel._state.compiled and "numba-compiled" in kernel.describe()
    assert got == list(python.run(frame)) and len(got) == want
    again, _ = executors(CHAIN.format(w=30))
    assert again.count(frame) == want and again._state.compiled
    # compiled, with outputs of two matches and a budget of a few units: the walk stops and
    # resumes inside the nested flat lists (``_flat_kids``) and the template writes
    monkeypatch.setattr(pcea_state, "ROOM", 4)
    monkeypatch.setattr(pcea_state, "OUTPUT", 2)
    monkeypatch.setattr(pcea_state, "BUDGET_COMPILED", 5)
    small, _ = executors(CHAIN.format(w=30))
    assert [m for b in small.run_batches(frame) for m in b.matches()] == got
    assert small._state.compiled


_PEAK = peak.SELF_PEAK_DEF + """
import sys
import numpy as np, polars as pl
from cer_cli import events as E
from cer_cli.api import compile_query
n = int(sys.argv[1])
engine = compile_query(sys.argv[2]).executor()
rng = np.random.default_rng(3)
for k in range(n // 100_000):
    m = 100_000
    frame = pl.DataFrame({E.TYPE: rng.choice(list("ABCD"), m), E.STREAM: ["S"] * m,
                          E.TIME: np.arange(k * m, (k + 1) * m), E.ROW: np.arange(k * m, (k + 1) * m),
                          E.POS: np.arange(k * m, (k + 1) * m), "val": rng.integers(0, 100, m),
                          "ts": np.arange(k * m, (k + 1) * m)})
    engine.count(frame)
st = engine._state
print(_self_peak_kb(), st.hi.shape[0] + st.ti.shape[0],
      st.counters()["compactions"], st.pc.shape[0] + st.bi.shape[0], st.counters()["flat_lists"])
"""


@compiled_only
@pytest.mark.parametrize("window", ["100 EVENTS", "100 [ts]"])
def test_memory_follows_the_window_not_the_log(window):
    """Peak RSS and the arrays' sizes of the compiled chain on 200k and 1.2M events (fed
    in frames of 100k, as the driver does): compaction keeps the window's runs only (nodes,
    trees, bundles and the flat lists in ``pc``), and runs once per doubling of what was
    allocated, not every few events. The same over an attribute window."""
    query = CHAIN.format(w=100).replace("100 EVENTS", window)

    def peak(n: int) -> tuple[int, ...]:
        out = subprocess.run([sys.executable, "-c", _PEAK, str(n), query],
                             capture_output=True, text=True, check=True,
                             env={**os.environ, "CER_JIT": "1"}).stdout.split()
        return tuple(int(x) for x in out)

    (small, rows_small, _, pieces_small, _), (large, rows_large, compactions, pieces_large,
                                              flats) = peak(200_000), peak(1_200_000)
    assert flats > 100_000  # the middle events adopt their first steps as flat lists
    assert rows_large <= 2 * rows_small and pieces_large <= 2 * pieces_small
    assert large < 1.3 * small
    assert compactions < 1_200_000 / 2_000


def test_integer_keys_are_their_own_ids_so_nothing_grows_with_the_log(tiny):
    """The kernel's index holds canonical ids of the join keys: an integer key is its own,
    so no dictionary of every value seen grows with the log (other types need one)."""
    text = "SELECT * WHERE A AS a ; B AS b ; C AS c FILTER a.id = b.id AND b.v < c.v WITHIN 6 EVENTS"
    rng = random.Random(9)
    events = [{"type": rng.choice("ABC"), "v": rng.randrange(6), "id": i // 3} for i in range(300)]
    got = same_on_both(text, events)
    reference.assert_same_matches(got, reference.reference_matches(parse(text), events))
    kernel, _ = executors(text)
    kernel.count(events_frame(events))
    assert list(kernel._key_ids.values()) == [None]
    named = [dict(e, id=f"k{e['id']}") for e in events]
    assert [len(m.events) for m in same_on_both(text, named)] == [len(m.events) for m in got]
    kernel, _ = executors(text)
    kernel.count(events_frame(named))
    assert [0 < len(d) <= 100 for d in kernel._key_ids.values()] == [True]  # a dictionary


def test_a_dictionary_of_key_values_follows_the_window_not_the_log(monkeypatch):
    """Text keys need a dictionary of canonical ids; it is pruned to the ids the index still
    holds after each compaction, so on a log of ever new keys it stays the size of the
    window however long the log (fed slice by slice, as the driver does), and the matches
    stay the Python objects' and the brute force's."""
    monkeypatch.setattr(pcea_state, "ROOM", 4)  # small arrays: compactions come often
    monkeypatch.setattr(pcea_state, "MIN_COMPACT", 8)
    monkeypatch.setenv("CER_HJ_KERNEL", "1")
    monkeypatch.setenv("CER_JIT", "1")  # compiled (the session compiled it once already)
    text = "SELECT * WHERE A AS a ; B AS b ; C AS c FILTER a.id = b.id AND b.v < c.v WITHIN 6 EVENTS"
    rng = random.Random(4)

    def held_after(n: int) -> int:
        events = [{"type": rng.choice("ABC"), "v": rng.randrange(6), "id": f"k{i // 3}"}
                  for i in range(n)]
        kernel, python = executors(text)
        frame = events_frame(events)
        got = [m for i in range(0, n, 50) for m in kernel.run(frame.slice(i, 50))]
        if n <= 600:
            assert got == [m for i in range(0, n, 50) for m in python.run(frame.slice(i, 50))]
            head = events[:120]  # the brute force is exponential: a prefix of the log
            reference.assert_same_matches([m for m in got if m.end < len(head)],
                                          reference.reference_matches(parse(text), head))
        return max(len(d) for d in kernel._key_ids.values())

    small, large = held_after(600), held_after(4_800)
    assert large <= 2 * small + 60, (small, large)  # 1,600 distinct keys in the large log
