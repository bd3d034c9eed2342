"""The compiled kernel (cer_cli/engine/kernel.py) against the Python engine loop.

The Python loop is checked against brute force in test_engine_props.py; here the kernel
must give *exactly* the same output — the same matches in the same order — and the same
engine statistics (node for node: allocations, compactions, live nodes), on random CEAs and
random queries, with the batch cut anywhere and compaction after every event or rarely.
Those property tests run the kernel by default too (``Engine(kernel=None)``), so they check
it against brute force directly.

``test_uncompiled_kernel_is_the_same_code`` runs this module again with
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

from cer_cli.compiler.predicates import Alphabet
from cer_cli.engine import kernel as K
from cer_cli.engine.run import Engine
from cer_cli.plan import plan
from cer_cli.query import ast
from tests.builders import events_frame
from tests.gen_formulas import formulas, queries, streams
from tests.test_determinize import ceas
from tests.test_engine_props import ALPHABET_ATOMS, cea_queries, project

EXAMPLES = int(os.environ.get("CER_KERNEL_EXAMPLES", "400"))
PROPS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _run(engine: Engine, frame: pl.DataFrame, cuts: list[int], count: bool = False):
    out: list = []
    n = 0
    bounds = sorted({0, frame.height, *(c for c in cuts if c <= frame.height)})
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        part = frame.slice(lo, hi - lo)
        if count:
            n += engine.count(part)
        else:
            out.extend(engine.run(part))
    return n if count else out


def _stats(engine: Engine) -> tuple:
    s = engine.stats
    return (s.events, s.matches, s.partitions, s.live_nodes, s.allocated_nodes, s.compactions,
            s.peak_live_nodes)


def _same(make, frame: pl.DataFrame, cuts: list[int]) -> None:
    """Python loop, kernel and kernel count agree exactly, stats included."""
    py, kern, cnt = make(False), make(True), make(True)
    assert not py.kernel
    if not kern.kernel:  # a query the kernel does not cover
        return
    expected = _run(py, frame, cuts)
    got = _run(kern, frame, cuts)
    assert got == expected
    assert _run(cnt, frame, cuts, count=True) == len(expected)
    assert _stats(kern) == _stats(py)
    assert _stats(cnt)[:2] == _stats(py)[:2]


def _covered(q: ast.Query, **changes) -> ast.Query:
    """``q`` made into a query the kernel covers (ALL/ANY, no LIMIT)."""
    strategy = q.strategy if q.strategy in ("ALL", "ANY") else "ALL"
    return ast.Query(**{**vars(q), "strategy": strategy, "limit": None, **changes})


@given(
    ceas(),
    cea_queries(),
    streams(max_size=12),
    st.lists(st.integers(0, 12), max_size=3),
    st.sampled_from((1, 4096)),
)
@PROPS
def test_kernel_equals_python_loop_on_random_ceas(cea, query, events, cuts, compact_min):
    query = _covered(query)
    if query.select is not None:
        cea = project(cea, frozenset(i.var for i in query.select))

    def make(kernel: bool) -> Engine:
        return Engine(
            cea, Alphabet(ALPHABET_ATOMS), window=query.within, partition_by=query.partition_by,
            strategy=query.strategy, consume=query.consume, streams=query.streams,
            compact_min=compact_min, kernel=kernel,
        )

    _same(make, events_frame(events), cuts)


@given(queries(formulas(max_depth=3)), streams(max_size=10), st.lists(st.integers(0, 10), max_size=2))
@PROPS
def test_kernel_equals_python_loop_on_random_queries(query, events, cuts):
    query = _covered(query)

    def make(kernel: bool) -> Engine:
        engine = plan(query).executor()
        engine.kernel = engine.kernel and kernel
        return engine

    _same(make, events_frame(events), cuts)


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


@given(ceas(), odd_times(), st.sampled_from(ast.CONSUME_POLICIES), st.lists(st.integers(0, 12), max_size=3),
       st.sampled_from((1, 4096)))
@PROPS
def test_kernel_equals_python_loop_on_odd_window_times(cea, data, consume, cuts, compact_min):
    events, amount = data
    window = ast.AttributeWindow(amount, "ts")

    def make(kernel: bool) -> Engine:
        return Engine(cea, Alphabet(ALPHABET_ATOMS), window=window, consume=consume,
                      partition_by=(("id",),), compact_min=compact_min, kernel=kernel)

    _same(make, events_frame(events), cuts)


def test_integer_then_float_times_switch_the_kernel_to_float():
    from tests.gen_formulas import letters

    events = letters("ABABAB")
    cea = _abc_cea()
    frames = [
        events_frame([{**e, "ts": i} for i, e in enumerate(events[:3])]),
        events_frame([{**e, "ts": i + 3.5} for i, e in enumerate(events[3:])]),
    ]
    outs = []
    for kernel in (False, True):
        engine = Engine(cea, Alphabet(ALPHABET_ATOMS), window=ast.AttributeWindow(2, "ts"), kernel=kernel)
        outs.append([m for f in frames for m in engine.run(f)])
    assert outs[0] == outs[1] and outs[0]


def _abc_cea():
    from cer_cli.compiler.cea import CEA, GAtom, GTrue, Transition

    # A AS x ; B AS y (with anything in between)
    return CEA(3, 0, frozenset({2}), (
        Transition(0, GAtom(0), frozenset({"x"}), 1),
        Transition(1, GTrue(), frozenset(), 1),
        Transition(1, GAtom(1), frozenset({"y"}), 2),
    ))


def test_kernel_grows_its_tables_and_resets_the_move_table(monkeypatch):
    """Many partitions, long union-lists and a move table cleared between batches."""
    monkeypatch.setattr(K, "TABLE_CELLS", 1)
    rng = np.random.default_rng(7)
    n = 3000
    frame = events_frame([
        {"type": "ABCD"[t], "stream": "S", "time": i, "id": int(k), "v": int(v), "ts": i}
        for i, (t, k, v) in enumerate(zip(rng.integers(0, 4, n), rng.integers(0, 40, n),
                                          rng.integers(0, 4, n), strict=True))
    ])
    from cer_cli.query.parser import parse

    query = parse("SELECT * WHERE (A AS x)+ ; B ; C FILTER x[v < 3] PARTITION BY [id] WITHIN 30 EVENTS", "<t>")

    def make(kernel: bool) -> Engine:
        engine = plan(query).executor()
        engine.kernel = engine.kernel and kernel
        engine._compact_min = engine._next_compact = 64
        return engine

    assert make(True).kernel, "this query is one the kernel covers"
    _same(make, frame, [1000, 2000])


def test_engines_outside_the_kernel_keep_the_python_loop():
    for kw in ({"strategy": "NEXT"}, {"limit": 1}):
        engine = Engine(_abc_cea(), Alphabet(ALPHABET_ATOMS), kernel=True, **kw)
        assert not engine.kernel


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1" or not K.HAVE_NUMBA,
                    reason="already running uncompiled")
def test_uncompiled_kernel_is_the_same_code():
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1", "CER_KERNEL_EXAMPLES": "25"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(Path(__file__)),
         "-k", "not uncompiled"],
        cwd=root, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.skipif(not K.HAVE_NUMBA, reason="counts the compiled kernel's skips")
def test_events_that_move_no_state_are_skipped():
    """In A ; B ; C every D (and, with no run open, every B or C) moves each live state to
    itself: the kernel skips it after one table check, and the matches stay exact."""
    from cer_cli.query.parser import parse
    from tests import reference

    events = [{"type": t, "stream": "S"} for t in "DDABDDCDBCD"]
    query = parse("SELECT * WHERE A ; B ; C WITHIN 6 EVENTS")
    engine = plan(query).executor()
    assert engine.kernel
    got = list(engine.run(events_frame(events)))
    reference.assert_same_matches(got, reference.reference_matches(query, events))
    assert int(engine._k.st[K.SKIPPED]) >= 2  # at least the two leading Ds
    assert int(engine._k.st[K.EVENTS]) == len(events)
