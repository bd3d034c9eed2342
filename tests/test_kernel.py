"""The kernel (cer_cli/engine/kernel.py), the one evaluator of a CEA, beyond what
test_engine_props.py checks against brute force: odd window times, counting without
building matches, growth of every array, flushes that never split one event's complex
events, and skipped events.

``test_uncompiled_kernel_is_the_same_code`` runs this module and test_tecs.py again with
``NUMBA_DISABLE_JIT=1``: the very same kernel functions as plain Python.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cer_cli.compiler.cea import CEA, GAtom, GTrue, Transition
from cer_cli.compiler.predicates import Alphabet
from cer_cli.engine import jit as J
from cer_cli.engine import kernel as K
from cer_cli.engine import kernel_state
from cer_cli.engine.run import Engine
from cer_cli.plan import plan
from cer_cli.query import ast
from cer_cli.query.parser import parse
from tests import reference
from tests.builders import events_frame, letters
from tests.gen_formulas import streams
from tests.test_determinize import ceas
from tests.test_engine_props import ALPHABET_ATOMS, cea_queries, expected, project, run_engine

EXAMPLES = int(os.environ.get("CER_KERNEL_EXAMPLES", "300"))
PROPS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _engine(cea: CEA, query: ast.Query, **options) -> Engine:
    if query.select is not None:
        cea = project(cea, frozenset(i.var for i in query.select))
    return Engine(cea, Alphabet(ALPHABET_ATOMS), window=query.within, partition_by=query.partition_by,
                  strategy=query.strategy, consume=query.consume, limit=query.limit,
                  streams=query.streams, **options)


def _cut(frame: pl.DataFrame, cuts: list[int]) -> list[pl.DataFrame]:
    bounds = sorted({0, frame.height, *(c for c in cuts if c <= frame.height)})
    return [frame.slice(lo, hi - lo) for lo, hi in zip(bounds, bounds[1:], strict=False)]


def _check(cea: CEA, query: ast.Query, events: list[dict], got: list) -> None:
    if query.limit is None:
        reference.assert_same_matches(got, expected(cea, query, events))
    else:
        expected(cea, query, events, limited=got)


@st.composite
def odd_times(draw):
    """Attribute windows over float times, integer times with a fractional bound, and
    times missing on some events (such an event neither starts nor ends a match)."""
    events = draw(streams(max_size=12))
    kind = draw(st.sampled_from(("float", "null", "both")))
    out = []
    for e in events:
        e = dict(e)
        if kind in ("float", "both"):
            e["ts"] = e["ts"] * 0.5
        if kind in ("null", "both") and draw(st.booleans()):
            e["ts"] = None
        out.append(e)
    amount = draw(st.sampled_from((1, 2, 1.5, 0.5)))
    return out, amount


@given(ceas(), cea_queries(), odd_times(), st.lists(st.integers(0, 12), max_size=3), st.sampled_from((1, 4096)))
@PROPS
def test_odd_window_times_equal_brute_force(cea, query, data, cuts, compact_min):
    events, amount = data
    query = ast.Query(**{**vars(query), "within": ast.AttributeWindow(amount, "ts"), "partition_by": (("id",),)})
    _check(cea, query, events, run_engine(cea, query, events, cuts, compact_min))


@given(ceas(), cea_queries(), streams(max_size=12), st.lists(st.integers(0, 12), max_size=3),
       st.sampled_from((1, 4096)))
@PROPS
def test_count_equals_the_matches_run_reports(cea, query, events, cuts, compact_min):
    """``count`` counts in the kernel without building matches (or, with post-processing,
    counts what is reported); ``stats.matches`` counts reported matches either way."""
    frames = _cut(events_frame(events), cuts)
    runner, counter = _engine(cea, query, compact_min=compact_min), _engine(cea, query, compact_min=compact_min)
    got = [m for f in frames for m in runner.run(f)]
    assert sum(counter.count(f) for f in frames) == len(got)
    assert runner.stats.matches == counter.stats.matches == len(got)
    assert runner.stats.events == counter.stats.events


def _abc_cea():
    # A AS x ; B AS y (with anything in between)
    return CEA(3, 0, frozenset({2}), (
        Transition(0, GAtom(0), frozenset({"x"}), 1),
        Transition(1, GTrue(), frozenset(), 1),
        Transition(1, GAtom(1), frozenset({"y"}), 2),
    ))  # fmt: skip


def test_integer_then_float_times_switch_the_kernel_to_float():
    events = [{**e, "ts": t} for e, t in zip(letters("ABABAB"), (0, 1, 2, 3.5, 4.5, 5.5), strict=True)]
    query = parse("SELECT x, y WHERE A AS x ; B AS y WITHIN 2 [ts]")
    engine = Engine(_abc_cea(), Alphabet(ALPHABET_ATOMS), window=query.within)
    frames = [events_frame(events[:3]), events_frame(events[3:]).with_columns(pl.col("ts").cast(pl.Float64))]
    frames[1] = frames[1].with_columns(pl.col("__cer_pos") + 3)
    got = [m for f in frames for m in engine.run(f)]
    assert engine._k.float_times and got
    reference.assert_same_matches(got, reference.reference_matches(query, events))


def _random_frame(n: int, keys: int, seed: int = 7) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return events_frame([
        {"type": "ABCD"[t], "stream": "S", "time": i, "id": int(k), "v": int(v), "ts": i}
        for i, (t, k, v) in enumerate(zip(rng.integers(0, 4, n), rng.integers(0, keys, n),
                                          rng.integers(0, 4, n), strict=True))
    ])


def test_kernel_grows_its_tables_and_resets_the_move_table(monkeypatch):
    """Many partitions, long union-lists, compaction every few nodes and a move table
    cleared between batches give the same matches and counts as roomy defaults."""
    frame = _random_frame(3000, 40)
    query = parse("SELECT * WHERE (A AS x)+ ; B ; C FILTER x[v < 3] PARTITION BY [id] WITHIN 30 EVENTS")
    roomy = plan(query).executor()
    want = [m for f in _cut(frame, [1000, 2000]) for m in roomy.run(f)]
    monkeypatch.setattr(kernel_state, "TABLE_CELLS", 1)
    tight = plan(query).executor(compact_min=64)
    got = [m for f in _cut(frame, [1000, 2000]) for m in tight.run(f)]
    assert got == want and len(want) > 100
    assert tight.stats.compactions > roomy.stats.compactions
    assert tight.stats.peak_live_nodes <= roomy.stats.peak_live_nodes


def _chain_cea(n: int) -> CEA:
    """States 0 -> 1 -> ... -> n on A (unmarked), and each of 1 ... n to the final n + 1 on
    B, marked x: after n As a B inserts n outputs of distinct max-starts into one list."""
    return CEA(n + 2, 0, frozenset({n + 1}), (
        *(Transition(i, GAtom(0), frozenset(), i + 1) for i in range(n)),
        *(Transition(i, GAtom(1), frozenset({"x"}), n + 1) for i in range(1, n + 1)),
    ))  # fmt: skip


@pytest.mark.parametrize("partitioned", [False, True])
def test_union_lists_outgrowing_the_table_rows_redo_the_event(partitioned):
    """The new table is built in the spare row while the old one is read: a union-list
    longer than the rows are wide (4 at first) undoes the event, the rows are widened and
    the event is done again — with the brute-force matches, and with the partitions'
    rows swapped in between (interleaved keys)."""
    cea = _chain_cea(7)
    events = [{**e, "id": i % 2 if partitioned else 0}
              for i, e in enumerate(letters("AABAAAAAAAAAAAAABBAB"))]
    query = ast.Query(ast.EventType("A"), partition_by=(("id",),) if partitioned else ())
    engine = _engine(cea, query)
    got = list(engine.run(events_frame(events)))
    assert engine._k.ul.shape[2] > 4 and len(got) > 7
    reference.assert_same_matches(got, expected(cea, query, events))
    assert engine.stats.allocated_nodes == engine.stats.live_nodes  # undone nodes are not counted


@pytest.mark.parametrize("strategy", ["ALL", "LAST", "MAX"])
def test_flushes_split_an_events_complex_events_only_without_post_processing(strategy):
    """With output arrays for 2 matches, the kernel flushes often. With post-processing
    (LAST, MAX) each batch still holds whole groups of equal ``end`` (what strategies and
    LIMIT rely on); under ALL one event's 16 matches stream across batches of at most 2,
    and the arrays never grow. Either way the matches are those of roomy arrays."""
    query = parse(f"SELECT {strategy} * WHERE (A AS x)+ ; B AS y WITHIN 6 EVENTS")
    frame = events_frame(letters("AAABAABBAAAAAB"))
    want = list(plan(query).executor().run(frame))
    engine = plan(query).executor()
    engine._out_cap = 2
    batches = list(engine.run_batches(frame))
    assert len(batches) > 2
    ends = [set(b.end.tolist()) for b in batches]
    split = any(a & b for i, a in enumerate(ends) for b in ends[i + 1:])
    assert split == (strategy == "ALL")
    if strategy == "ALL":
        assert max(len(b) for b in batches) == 2 == engine._k.out_peak
        assert len(engine._k.o_start) == 3
    assert [m for b in batches for m in b.matches()] == want


def _shared(batches) -> bool:
    """Whether two of the batches' arrays share memory."""
    arrays = [(i, a) for i, b in enumerate(batches) for a in (b.start, b.end, b.part, b.off, b.pos, b.lab)]
    return any(i != j and np.shares_memory(a, c) for i, a in arrays for j, c in arrays)


def test_full_output_arrays_are_handed_over_and_barely_used_ones_copied():
    """A flush hands over output arrays at least half full (the batch holds views of them;
    the kernel takes fresh ones) and copies barely used ones (a batch holds little more than
    its matches). Held together, no two batches share memory and each keeps its matches."""
    query = parse("SELECT * WHERE (A AS x)+ ; B AS y WITHIN 6 EVENTS")
    frame = events_frame(letters("AAABAABBAAAAAB"))
    want = list(plan(query).executor().run(frame))
    engine = plan(query).executor()
    engine._out_cap = 4
    batches = list(engine.run_batches(frame))  # all held before any is read
    assert [m for b in batches for m in b.matches()] == want and not _shared(batches)
    assert any(b.start.base is not None and len(b.start.base) == 5 for b in batches)
    assert kernel_state.handed_over(3, 5) and not kernel_state.handed_over(2, 5)
    engine = plan(query).executor()
    engine._out_cap = 1000  # the frame's 84 matches in arrays for 1,000: copied
    batches = list(engine.run_batches(frame))
    assert all(b.start.base is None for b in batches) and len(batches) == 1


@given(ceas(), cea_queries(), streams(max_size=12), st.lists(st.integers(0, 12), max_size=3),
       st.sampled_from((1, 2, 3)), st.sampled_from((1, 7, 50)))
@PROPS
def test_enumeration_resumed_across_flushes_and_budgets_is_the_same(cea, query, events, cuts,
                                                                     cap, budget):
    """Tiny output caps and work budgets stop the kernel mid-event (and mid-walk) again and
    again; resuming gives exactly the matches, in the same order, of one uninterrupted run,
    and the same counts."""
    frames = _cut(events_frame(events), cuts)
    roomy, tiny = _engine(cea, query), _engine(cea, query, out_cap=cap, budget=budget)
    want = [m for f in frames for m in roomy.run(f)]
    assert [m for f in frames for m in tiny.run(f)] == want
    counter = _engine(cea, query, out_cap=cap, budget=budget)
    assert sum(counter.count(f) for f in frames) == len(want)
    # LIMIT k: the k latest leave together; STRICT keeps or drops each candidate alone
    if tiny._k is not None and (not tiny._post_process or tiny._per_match):
        assert tiny._k.out_peak <= max(cap, query.limit or 0)


def test_work_budget_returns_to_python_within_one_event():
    """``A+ ; B`` over 14 As: the B ends 2^14 - 1 complex events; with a budget of 1000 units the
    kernel hands control back to Python many times inside that one event's enumeration, in
    both emitting and counting runs."""
    query = parse("SELECT * WHERE A+ ; B WITHIN 100 EVENTS")
    frame = events_frame(letters("A" * 14 + "B"))
    calls = {"n": 0}
    real = K.run_events

    def counting(*args):
        calls["n"] += 1
        return real(*args)

    for emit in (True, False):
        for budget in (0, 1000):  # 0: no budget
            calls["n"] = 0
            engine = plan(query).executor()
            engine._budget, engine._out_cap = budget, 1 << 16
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(K, "run_events", counting)
                got = len(list(engine.run(frame))) if emit else engine.count(frame)
            assert got == 2 ** 14 - 1
            # at least one return per 1000 of the >= 2^14 nodes the walk visits
            assert calls["n"] > 16 if budget else calls["n"] < 10


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1" or not J.HAVE_NUMBA,
                    reason="already running uncompiled")
def test_uncompiled_kernel_is_the_same_code():
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1", "CER_KERNEL_EXAMPLES": "25"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(Path(__file__)),
         str(Path(__file__).with_name("test_tecs.py")), "-k", "not uncompiled"],
        cwd=root, env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.skipif(not J.HAVE_NUMBA, reason="counts the compiled kernel's skips")
def test_events_that_move_no_state_are_skipped():
    """In A ; B ; C every D (and, with no run open, every B or C) moves each live state to
    itself: the kernel skips it after one table check, and the matches stay exact."""
    events = [{"type": t, "stream": "S"} for t in "DDABDDCDBCD"]
    query = parse("SELECT * WHERE A ; B ; C WITHIN 6 EVENTS")
    engine = plan(query).executor()
    got = list(engine.run(events_frame(events)))
    reference.assert_same_matches(got, reference.reference_matches(query, events))
    assert int(engine._k.st[K.SKIPPED]) >= 2  # at least the two leading Ds
    assert int(engine._k.st[K.EVENTS]) == len(events)


def _limit_by_sorting(cea: CEA, query: ast.Query, events: list[dict], cuts: list[int]) -> list:
    """The matches of ``query`` as post-processing reports them: every candidate ending at
    an event enumerated, then ``strategies.limit_latest`` (a stable sort by start)."""
    if query.select is not None:
        cea = project(cea, frozenset(i.var for i in query.select))
    engine = _engine(cea, query)
    engine._kernel_limit, engine._post_process = False, True  # before the kernel exists
    return [m for f in _cut(events_frame(events), cuts) for m in engine.run(f)]


@given(ceas(), cea_queries(), streams(max_size=10), st.lists(st.integers(0, 10), max_size=3),
       st.sampled_from((1, 4096)), st.sampled_from(("ALL", "ANY")), st.integers(0, 3))
@PROPS
def test_limit_in_the_kernel_equals_sorting_every_candidate(cea, query, events, cuts, compact_min,
                                                             strategy, limit):
    """ALL/ANY with LIMIT k: the kernel's best-first enumeration reports exactly what
    enumerating every candidate and keeping the k latest starts (ties in enumeration order)
    reports, in the same order; and that is a valid choice against brute force."""
    query = ast.Query(**{**vars(query), "strategy": strategy, "limit": limit})
    got = run_engine(cea, query, events, cuts, compact_min)
    assert got == _limit_by_sorting(cea, query, events, cuts)
    _check(cea, query, events, got)
    counter = _engine(cea, query, compact_min=compact_min)
    assert sum(counter.count(f) for f in _cut(events_frame(events), cuts)) == len(got)


_MANY_AS = """
import sys
from cer_cli.plan import plan
from cer_cli.query.parser import parse
from tests.builders import events_frame
n, k = int(sys.argv[1]), int(sys.argv[2])
query = parse(f"SELECT * WHERE A+ ; B LIMIT {k}")
frame = events_frame([{"type": "A", "stream": "S"}] * n + [{"type": "B", "stream": "S"}])
for m in plan(query).run(frame):
    print(m.start, m.end, *(p for p, _ in m.events))
print("count", plan(query).executor().count(frame))
"""


@pytest.mark.parametrize("limit", [1, 3])
def test_limit_does_not_enumerate_every_candidate(limit):
    """``A+ ; B LIMIT k`` over 60 As then a B: 2^60 candidates end at the B, and the k
    latest starts come out at once (enumerating every candidate first would never end)."""
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-c", _MANY_AS, "60", str(limit)], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    # the same query over 6 As, enumerated whole and sorted, shifted to positions 54 …
    small = plan(parse(f"SELECT * WHERE A+ ; B LIMIT {limit}")).executor()
    small._kernel_limit, small._post_process = False, True
    want = [[m.start + 54, m.end + 54, *(p + 54 for p, _ in m.events)]
            for m in small.run(events_frame(letters("AAAAAAB")))]
    assert [[int(x) for x in line.split()] for line in lines[:-1]] == want
    assert [w[0] for w in want] == [59, 58, 58][:limit]
    assert lines[-1] == f"count {limit}"
