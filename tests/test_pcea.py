"""The hash join (PCEA, Algorithm 1 of "CER meets hierarchical conjunctive queries"):
the persistent union-heap, the paper's worked examples, equivalence with the brute-force
reference on random chain queries (fallbacks included), and the update-work bound.

Expected outputs of the worked examples come from the paper's definitions (A1-A3, B1-B3),
not from the implementation; the property tests decide the fragment criterion with their
own union-find (``carried_from_one_event``) rather than the compiler's.

Every test runs twice (``hash_join_path``): on the array kernel (``engine/pcea_state.py``,
plain Python below ``JIT_MIN_EVENTS`` events, as numba would run it) and on the Python
objects (``CER_HJ_KERNEL=0``); the tests of the Python objects' own internals run once.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from cer_cli.api import compile_query
from cer_cli.compiler.correlation import partition_plan
from cer_cli.engine import ordered
from cer_cli.engine import pcea as P
from cer_cli.engine.pcea import HashJoinEngine, Node, adopted, depth, heap_nodes, runs, union
from cer_cli.plan import plan
from cer_cli.query import ast
from cer_cli.query.errors import QueryError
from cer_cli.query.parser import parse
from cer_cli.query.scope import conjuncts
from tests import reference
from tests.builders import ev, events_frame
from tests.gen_formulas import STREAMS, projections, simple_windows, streams, unary_atoms


@pytest.fixture(autouse=True, scope="module", params=["kernel", "python"])
def hash_join_path(request):
    """The implementation every hash join of the module runs on (module-scoped: hypothesis
    refuses function-scoped fixtures around its examples)."""
    old = os.environ.get("CER_HJ_KERNEL")
    os.environ["CER_HJ_KERNEL"] = "1" if request.param == "kernel" else "0"
    yield request.param
    if old is None:
        del os.environ["CER_HJ_KERNEL"]
    else:
        os.environ["CER_HJ_KERNEL"] = old


@pytest.fixture
def python_objects(hash_join_path):
    """For the tests of the Python objects' internals (monkeypatched helpers, heap
    depths): once, on that path."""
    if hash_join_path != "python":
        pytest.skip("about the Python objects' internals")


# --------------------------------------------------------------------------- the union-heap


def leaf(ms, pos) -> Node:
    return Node(ms, pos, 0, ms)


def snapshot(h) -> frozenset:
    return frozenset((n.ms, n.pos) for n in heap_nodes(h))


def test_union_is_fully_persistent():
    rng = random.Random(7)
    versions, contents, h = [], [], None
    for pos in range(300):
        h = union(h, leaf(rng.randrange(0, 50), pos), lo=-math.inf)
        versions.append(h)
        contents.append(snapshot(h))
    for v, c in zip(versions, contents, strict=True):
        assert snapshot(v) == c  # later inserts never changed an older version
    assert [len(c) for c in contents] == list(range(1, 301))


def test_union_keeps_heap_order():
    rng = random.Random(3)
    h = None
    for pos in range(500):
        h = union(h, leaf(rng.randrange(0, 1000), pos), lo=-math.inf)
    for n in heap_nodes(h):
        for c in (n.left, n.right):
            if c is not None:
                assert (n.ms, n.pos) > (c.ms, c.pos)
    assert (h.ms, h.pos) == max((n.ms, n.pos) for n in heap_nodes(h))


def test_union_drops_expired_sub_heaps():
    w, h = 16, None
    for pos in range(2000):
        lo = pos - w
        h = union(h, leaf(pos, pos), lo)
        live = [n for n in heap_nodes(h) if n.ms >= lo]
        assert len(live) == min(pos + 1, w + 1)  # every live run is kept
        assert sum(1 for _ in heap_nodes(h)) <= 4 * (w + 1)  # dead ones do not pile up
    x = leaf(5000, 5000)
    assert union(h, x, lo=4990) is x  # a wholly expired heap is replaced


@pytest.mark.parametrize("spread", [0, 8, 64])
def test_heap_depth_stays_logarithmic_in_the_window(spread):
    """Over a long run, the insertion path (and the height) stays O(log w), also when
    max-starts arrive out of order (runs adopting older runs)."""
    rng = random.Random(spread)
    w, h, worst = 64, None, 0
    for pos in range(20_000):
        ms = pos - rng.randint(0, spread)
        h = union(h, leaf(ms, pos), pos - w)
        worst = max(worst, depth(h))
    assert worst <= 2 * math.log2(w + spread + 1) + 3


def test_heap_depth_without_window_is_logarithmic_in_the_inserts():
    h = None
    for pos in range(4096):
        h = union(h, leaf(pos, pos), -math.inf)
    assert depth(h) <= math.log2(4096) + 2


def test_runs_prune_by_max_start():
    h = None
    for pos in range(10):
        h = union(h, leaf(pos, pos), -math.inf)
    assert sorted(r[0].pos for r in runs(h, 6)) == [6, 7, 8, 9]


# --------------------------------------------------------------------------- worked examples




S0 = ev("S:a=2,b=11 T:a=2 R:a=1,b=10 S:a=2,b=11 T:a=1 R:a=2,b=11 S:a=4,b=13 T:a=1")
B_STREAM = ev("H:id=1 T:id=1 H:id=2 T:id=2 H:id=1")
A1 = "((T AS t ; S AS s) OR (S AS s ; T AS t)) ; R AS r FILTER t.a = r.a AND s.a = r.a AND s.b = r.b"


def matches_of(text: str, events: list[dict], method: str | None = "hash join") -> set:
    """Matches as ``{(end, ((var, pos), ...))}``, checked against the reference too."""
    compiled = compile_query(text)
    assert compiled.correlation.methods == (() if method is None else (method,))
    got = list(compiled.run(events_frame(events)))
    reference.assert_same_matches(got, reference.reference_matches(parse(text), events))
    return {(m.end, tuple(sorted((v, p) for p, vs in m.events for v in vs if v.islower())))
            for m in got}


# The paper's window w is "last - first <= w", which is WITHIN w EVENTS (inclusive).
@pytest.mark.parametrize(
    "window, expected",
    [
        ("", {(5, (("r", 5), ("s", 3), ("t", 1))), (5, (("r", 5), ("s", 0), ("t", 1)))}),  # A1
        ("WITHIN 5 EVENTS", {(5, (("r", 5), ("s", 3), ("t", 1))), (5, (("r", 5), ("s", 0), ("t", 1)))}),
        ("WITHIN 4 EVENTS", {(5, (("r", 5), ("s", 3), ("t", 1)))}),  # A3
        ("WITHIN 3 EVENTS", set()),
    ],
)
def test_pcea_paper_example_3_3_and_its_windows(window, expected):
    text = f"SELECT * WHERE {A1} {window}"
    assert matches_of(text, S0) == expected
    pcea = compile_query(text).rewritten.pcea
    assert len(pcea.families) == 1 and pcea.tree_families  # R adopts a T run and an S run
    assert pcea.dedupe is None


def test_ccea_c0_is_one_chain():  # A2
    text = "T AS t ; S AS s ; R AS r FILTER t.a = s.a AND s.a = r.a AND s.b = r.b"
    assert matches_of(text, S0) == {(5, (("r", 5), ("s", 3), ("t", 1)))}


@pytest.mark.parametrize(
    "window, expected",
    [
        ("", {(2, (("x", 0), ("y", 1), ("z", 2))), (4, (("x", 0), ("y", 1), ("z", 4))),
              (4, (("x", 2), ("y", 3), ("z", 4)))}),
        ("WITHIN 2 EVENTS", {(2, (("x", 0), ("y", 1), ("z", 2))), (4, (("x", 2), ("y", 3), ("z", 4)))}),
    ],
)
def test_b1_chain_with_an_equality_on_a_prefix(window, expected):
    text = f"SELECT * WHERE H AS x ; T AS y ; H AS z FILTER x.id = y.id {window}"
    assert matches_of(text, B_STREAM) == expected


def test_b2_equality_across_an_unconstrained_step_is_carried():
    """``x.id = z.id`` with ``y`` between: y's runs carry x.id (Proposition 3.4's pattern,
    which a chain automaton cannot check), so the hash join runs it."""
    text = "H AS x ; T AS y ; H AS z FILTER x.id = z.id"
    assert matches_of(text, B_STREAM) == {
        (4, (("x", 0), ("y", 1), ("z", 4))), (4, (("x", 0), ("y", 3), ("z", 4)))}
    pcea = compile_query(text).rewritten.pcea
    assert pcea.carries and "carry x.id" in pcea.describe()[0]
    assert matches_of(text + " WITHIN 3 EVENTS", B_STREAM) == set()


def test_values_carried_from_two_events_fall_back_with_the_witness():
    text = "H AS x ; T AS y ; R AS u ; H AS z FILTER x.id = z.id AND y.id = z.k"
    events = ev("H:id=1 T:id=2 R:id=3 H:id=1,k=2 H:id=2,k=2")
    assert matches_of(text, events, "post-filter") == {
        (3, (("u", 2), ("x", 0), ("y", 1), ("z", 3)))}
    reason = compile_query(text).rewritten.pcea_reason
    assert "'R AS u'" in reason and "x and of y" in reason


def test_b3_ordered_chain_over_a_non_hierarchical_join_graph():
    text = "R AS r ; S AS s ; T AS t FILTER r.x = s.x AND s.y = t.y"
    events = ev("R:x=1 S:x=1,y=2 T:y=2 S:x=1,y=3 T:y=3 T:y=2")
    assert matches_of(text, events) == {
        (2, (("r", 0), ("s", 1), ("t", 2))), (4, (("r", 0), ("s", 3), ("t", 4))),
        (5, (("r", 0), ("s", 1), ("t", 5)))}


@pytest.mark.parametrize(
    "text, method, words",
    [
        ("H AS x ; T AS y ; H AS z FILTER x.id + y.id > 3", "post-filter", "not an equality"),
        ("H AS x ; T AS y ; H AS z FILTER x.id < z.id", "post-filter", "not consecutive"),
        ("H AS x ; T AS y FILTER x.id < y.id AND x.tmp > y.tmp", "post-filter", "same two steps"),
        ("H AS x ; T AS y ; H AS z FILTER x.id < y.id", "hash join", None),
        ("H AS x ; T AS y ; H AS z FILTER y.id * 2 != z.tmp - 1 AND x.id = y.id", "hash join", None),
        ("SELECT NEXT * WHERE H AS x ; T AS y ; H AS z FILTER x.id = y.id", "post-filter", "NEXT"),
        ("H AS x ; T AS y ; H AS z FILTER x.id = y.id CONSUME BY ANY", "post-filter", "CONSUME"),
        ("H AS x ; (T AS y)+ ; H AS z FILTER x.id = z.hum", "hash join", None),
        ("H AS x ; (T AS y ; H AS z)+ FILTER x.id = z.hum", "post-filter", "'+' over more"),
        ("H AS x ; (T AS y):+ ; H AS z FILTER x.id = z.hum", "post-filter", "':+'"),
        ("H AS x : T AS y FILTER x.id = y.hum", "post-filter", "':'"),
        ("H AS x ; T AS y ; H AS z FILTER x.id = y.id AND y.id = z.id", "partition", None),
        ("SELECT * WHERE H AS x ; T AS y FILTER x.id = y.id WITHIN 3 EVENTS", "hash join", None),
        ("H AS x ; T AS y FILTER x.id = y.tmp", "hash join", None),
    ],
)
def test_which_method_runs(text, method, words):
    compiled = compile_query(text)
    assert compiled.correlation.methods == (() if method is None else (method,))
    if words is not None:
        assert words in compiled.rewritten.pcea_reason
    engine = compiled.executor()
    assert isinstance(engine, HashJoinEngine) == (method == "hash join")
    assert isinstance(plan(parse(text)).executor(), HashJoinEngine) == (method == "hash join")


# --------------------------------------------------------------------------- details


def test_missing_attribute_and_nan_never_join():
    events = [{"type": "A", "k": 1}, {"type": "A"}, {"type": "A", "k": float("nan")},
              {"type": "B", "k": 1}, {"type": "B"}, {"type": "B", "k": float("nan")}]
    text = "SELECT * WHERE A AS a ; B AS b FILTER a.k = b.k WITHIN 9 EVENTS"
    compiled = compile_query(text)
    assert compiled.correlation.methods == ("hash join",)
    got = list(compiled.run(events_frame(events)))
    assert [(m.start, m.end) for m in got] == [(0, 3)]  # NaN = NaN is false, as in Python


@pytest.mark.parametrize(
    "text, method",
    [
        ("A AS a ; B AS b FILTER a.u = b.w AND a.v = b.w", "hash join"),  # a.u = a.v in a's event
        ("SELECT b WHERE A AS a ; B AS b FILTER a.u = b.w AND A.v = a.u", "hash join"),
        ("A AS a ; B AS b FILTER a.u = b.w AND b.w = 1", None),  # constants propagated
    ],
)
def test_equalities_between_attributes_of_one_event_and_constants(text, method):
    events = ev("A:u=1,v=1 A:u=1,v=2 B:w=1 B:w=2 A:u=2,v=2 B:w=2")
    compiled = compile_query(text)
    assert compiled.correlation.methods == (() if method is None else (method,))
    got = list(compiled.run(events_frame(events)))
    reference.assert_same_matches(got, reference.reference_matches(parse(text), events))


def test_projection_deduplicates_and_limit_keeps_latest_starts():
    events = ev("A:id=1 B:id=1 B:id=1 C:id=2 C:id=1")
    text = "SELECT a, c WHERE A AS a ; B AS b ; C AS c FILTER a.id = b.id"
    compiled = compile_query(text)
    assert compiled.rewritten.pcea.dedupe is not None  # b's position is projected away
    got = list(compiled.run(events_frame(events)))
    reference.assert_same_matches(got, reference.reference_matches(parse(text), events))
    text = "SELECT * WHERE A AS a ; B AS b FILTER a.id = b.id LIMIT 2"
    events = ev("A:id=1 A:id=1 A:id=1 B:id=1")
    got = list(compile_query(text).run(events_frame(events)))
    assert sorted(m.start for m in got) == [1, 2]


def test_hash_join_keys_are_equal_exactly_when_the_predicate_holds():
    """The keys are ``compiler.predicates``' values, so ``=`` joins what it relates and
    nothing else: a boolean never equals an integer, nor an instant its nanoseconds (Python
    equals ``True`` with ``1``), whichever attribute of a class an event holds; an integer
    equals a decimal and a float of the same value; NaN equals nothing."""
    import datetime as dt
    from decimal import Decimal

    import polars as pl

    def run(text: str, a: pl.Series, b: pl.Series) -> list:
        frame = events_frame([{"type": "A"}, {"type": "B"}]).with_columns(x=a, y=b)
        compiled = compile_query(text)
        assert compiled.executor_kind == "hash join"
        return [(m.start, m.end) for m in compiled.run(frame)]

    join = "SELECT * WHERE A AS a ; B AS b FILTER a.x = b.y"
    both = "SELECT * WHERE A AS a ; B AS b FILTER a.x = b.y AND a.x = a.y"
    assert run(join, pl.Series([True, None]), pl.Series([None, 1])) == []
    assert run(join, pl.Series([dt.datetime(1970, 1, 1, 0, 0, 0, 1), None]),
               pl.Series([None, 1000])) == []
    assert run(join, pl.Series([1, None]), pl.Series([None, 1.0])) == [(0, 1)]
    assert run(join, pl.Series([2, None]), pl.Series([None, Decimal("2.00")])) == [(0, 1)]
    assert run(join, pl.Series([True, None]), pl.Series([None, True])) == [(0, 1)]
    assert run(both, pl.Series([1.0, 1.0]), pl.Series([1, 1])) == [(0, 1)]
    assert run(both, pl.Series([float("nan"), 1.0]), pl.Series([float("nan"), 1])) == []
    assert run(both, pl.Series([True, None]), pl.Series([1, 1])) == []


def test_the_hash_join_reports_through_the_cea_executors_strategies(monkeypatch):
    """De-duplication and LIMIT are ``strategies.report``'s, for the hash join as for the
    CEA executor (one rule each): distinct matches, the latest starts first."""
    from cer_cli.engine import pcea as engine_pcea
    from cer_cli.engine import strategies

    calls = []

    def spy(batch, strategy, limit, distinct=False):
        calls.append((strategy, limit, distinct))
        return strategies.report(batch, strategy, limit, distinct)

    monkeypatch.setattr(engine_pcea, "report", spy)
    events = ev("A:id=1 A:id=1 B:id=2 A:id=1 B:id=1 C:id=1 B:id=1")
    text = "SELECT a, c WHERE A AS a ; B AS b ; C AS c FILTER a.id = b.id LIMIT 2"
    compiled = compile_query(text)
    assert compiled.executor_kind == "hash join" and compiled.rewritten.pcea.dedupe is not None
    got = list(compiled.run(events_frame(events)))
    assert calls and all(c == ("ALL", 2, True) for c in calls)
    reference.check_limited(got, parse(text), events)
    assert [(m.start, m.end) for m in got] == [(3, 5), (1, 5)]


def test_partition_by_and_events_windows_count_in_the_partition():
    text = "SELECT * WHERE A AS a ; B AS b FILTER a.v = b.v PARTITION BY [id] WITHIN 1 EVENTS"
    events = [{"type": "A", "id": 1, "v": 0}, {"type": "A", "id": 2, "v": 0},
              {"type": "C", "id": 2, "v": 0}, {"type": "B", "id": 1, "v": 0},
              {"type": "B", "v": 0}]
    compiled = compile_query(text)
    assert compiled.correlation.methods == ("hash join",)
    got = list(compiled.run(events_frame(events)))
    reference.assert_same_matches(got, reference.reference_matches(parse(text), events))
    assert [(m.start, m.end, m.partition) for m in got] == [(0, 3, (1,))]


def test_match_runs_hash_joins_without_window_and_explain_shows_the_chain():
    from click.testing import CliRunner

    from cer_cli.cli import cli

    runner = CliRunner()
    text = "H AS x ; T AS y ; H AS z FILTER x.id = y.id"
    out = runner.invoke(cli, ["match", "-e", text, "samples/fig1.csv", "--count", "--no-progress"])
    assert out.exit_code == 0, out.output
    events = [dict(e, stream="fig1") for e in _fig1()]
    assert int(out.output) == len(reference.reference_matches(parse(text), events))
    shown = runner.invoke(cli, ["explain", "-e", text]).output
    assert "hash join (PCEA)" in shown and "H AS x ─[x.id = y.id]→ T AS y ─[true]→ H AS z" in shown
    assert "|P| = " in shown and "output-linear delay" in shown
    assert "joined by the hash join" in shown  # the rewrite listing says where they went


def _fig1() -> list[dict]:
    from cer_cli.io.read import read_events

    frame = read_events(["samples/fig1.csv"]).frame()
    return [{k: v for k, v in row.items() if not k.startswith("__cer") and v is not None}
            | {"type": row["__cer_type"]} for row in frame.iter_rows(named=True)]


# --------------------------------------------------------------------------- update work


@pytest.mark.parametrize("window", [16, 256])
def test_update_work_does_not_grow_with_partial_matches(window):
    """Every A (and B) of one key is a partial match; each new run is one heap insert
    whose path stays within c·log(w), however many runs wait for that key."""
    text = (f"SELECT * WHERE A AS a ; B AS b ; C AS c FILTER a.id = b.id AND b.v = c.v"
            f" WITHIN {window} EVENTS")
    engine = plan(parse(text)).executor()
    assert isinstance(engine, HashJoinEngine)
    n = 6000
    events = [{"type": "AB"[i % 2], "id": 1, "v": 1} for i in range(n)]
    engine.count(events_frame(events))
    ops = engine.ops
    assert ops.unions == n  # one insert per new run: A runs, B runs (each B adopts all As)
    assert ops.max_union_nodes <= 2 * math.log2(window) + 4
    assert ops.union_nodes <= n * (2 * math.log2(window) + 4)
    assert ops.probes == n // 2  # each B probes its one source
    live = engine.stats.live_nodes
    assert live <= 2  # one heap per (state, key)


def test_update_work_without_window_is_logarithmic_in_runs_per_key():
    engine = plan(parse("A AS a ; B AS b ; C AS c FILTER a.id = b.id")).executor()
    n = 4096
    engine.count(events_frame([{"type": "A", "id": i % 4} for i in range(n)]))
    assert engine.ops.max_union_nodes <= math.log2(n / 4) + 2


# --------------------------------------------------------------------------- property tests

VARS = ("p", "q", "r", "s", "u")
ATTRS = ("v", "id", "k")  # "k" is missing on some events


@st.composite
def steps(draw, names: tuple[str, ...]) -> list[ast.Formula]:
    out = []
    for name in names:
        typ = draw(st.sampled_from(("A", "B", "C")))
        f: ast.Formula = ast.EventType(typ, draw(st.sampled_from((None, None, None, *STREAMS))))
        if name is not None:
            f = ast.As(f, name)
            if draw(st.integers(0, 3)) == 0:
                f = ast.Filter(f, draw(unary_atoms(name)))
        if draw(st.integers(0, 4)) == 0:  # an iterated step: equalities hold for every event
            f = ast.Plus(f)
        out.append(f)
    return out


def seq(parts: list[ast.Formula]) -> ast.Formula:
    out = parts[0]
    for p in parts[1:]:
        out = ast.Seq(out, p)
    return out


@st.composite
def chain_queries(draw):
    """An OR of 1-3 ``;`` chains (sometimes the paper's "any order, then" shape) with
    random equalities ``x.a = y.b``, a random window, SELECT, FROM, PARTITION BY, LIMIT.
    Returns ``(shaped, query)``: whether the "any order" shape was used (then the hash
    join may apply although a distributed chain is not contiguous)."""
    branches, names_of, shaped = [], [], False
    for _ in range(draw(st.integers(1, 3))):
        k = draw(st.integers(1, 4))
        names = draw(st.lists(st.sampled_from(VARS), min_size=k, max_size=k, unique=True))
        names = [n if draw(st.integers(0, 5)) else None for n in names]
        parts = draw(steps(tuple(names)))
        if k == 3 and draw(st.booleans()):  # (X ; Y OR Y ; X) ; Z
            branches.append(ast.Seq(ast.FOr(ast.Seq(parts[0], parts[1]), ast.Seq(parts[1], parts[0])),
                                    parts[2]))
            shaped = True
        else:
            branches.append(seq(parts))
        names_of += [n for n in names if n is not None]
    # Equalities sit around the whole pattern, or (guarded) inside one branch; they may
    # name event types, which can label several steps.
    inside = len(branches) > 1 and draw(st.integers(0, 3)) == 0
    target = draw(st.integers(0, len(branches) - 1)) if inside else None
    scope = branches[target] if inside else None
    pool = sorted(reference.vdef(scope) if inside else set(names_of))
    if draw(st.integers(0, 3)) == 0:
        pool = sorted(set(pool) | {v for v in reference.vdef(scope or branches[0]) if "S" not in v})
    atoms = []
    if len(pool) >= 2:
        for _ in range(draw(st.integers(1, 3))):
            x, y = draw(st.lists(st.sampled_from(pool), min_size=2, max_size=2, unique=True))
            atoms.append(ast.Compare("=", ast.AttrRef(x, draw(st.sampled_from(ATTRS))),
                                     ast.AttrRef(y, draw(st.sampled_from(ATTRS)))))
    assume(atoms)
    pred = atoms[0]
    for a in atoms[1:]:
        pred = ast.And(pred, a)
    if inside:
        branches[target] = ast.Filter(branches[target], pred)
    f = branches[0]
    for b in branches[1:]:
        f = ast.FOr(f, b)
    if not inside:
        f = ast.Filter(f, pred)
    elif draw(st.booleans()) and names_of:  # a unary filter around everything
        f = ast.Filter(f, draw(unary_atoms(draw(st.sampled_from(sorted(names_of))))))
    labels = sorted(reference.vdef(f))
    projection = draw(projections(labels, 3, kinds=("all", "some", "none")))
    window = draw(simple_windows(4))
    return shaped, ast.Query(
        formula=f,
        strategy=draw(st.sampled_from(("ALL", "ALL", "ALL", "ANY", "MAX"))),
        select=projection,
        streams=draw(st.sampled_from((None, None, ("S1",)))),
        partition_by=draw(st.sampled_from(((), (), (("v",),)))),
        within=window,
        consume=draw(st.sampled_from(("NONE", "NONE", "NONE", "ANY"))),
        limit=draw(st.sampled_from((None, None, None, 1, 2))),
    )


@st.composite
def ragged_streams(draw):
    """Generated streams where ``k`` is on some events only and ``ts`` is sometimes null."""
    events = draw(streams(max_size=9))
    out = []
    for e in events:
        e = dict(e)
        k = draw(st.sampled_from((None, 0, 1)))
        if k is not None:
            e["k"] = k
        if draw(st.integers(0, 5)) == 0:
            e["ts"] = None
        out.append(e)
    return out


def chains_of(f: ast.Formula) -> list[list[frozenset[str]]]:
    """The formula's branches as lists of the variables of each step (test's own view)."""
    if isinstance(f, ast.EventType):
        return [[frozenset({f.name, f.label})]]
    if isinstance(f, ast.As):
        return [[s | {f.var} for s in b] for b in chains_of(f.formula)]
    if isinstance(f, (ast.Filter, ast.Plus)):
        return chains_of(f.formula if isinstance(f, ast.Filter) else f.body)
    if isinstance(f, ast.Seq):
        return [a + b for a in chains_of(f.left) for b in chains_of(f.right)]
    assert isinstance(f, ast.FOr)
    return chains_of(f.left) + chains_of(f.right)


def looped_steps(f: ast.Formula, loop: bool = False) -> list[list[bool]]:
    """Per branch of ``chains_of``, whether each step is iterated (inside a ``+``)."""
    if isinstance(f, ast.EventType):
        return [[loop]]
    if isinstance(f, (ast.As, ast.Filter)):
        return looped_steps(f.formula, loop)
    if isinstance(f, ast.Plus):
        return looped_steps(f.body, True)
    if isinstance(f, ast.Seq):
        return [a + b for a in looped_steps(f.left, loop) for b in looped_steps(f.right, loop)]
    return looped_steps(f.left, loop) + looped_steps(f.right, loop)


def carried_from_one_event(query: ast.Query) -> bool:
    """The fragment criterion, decided independently: per branch, union-find over (step,
    attribute) joined by the equalities whose variables the branch binds; a step inside a
    class's span without a member carries the class's value from the class's last member
    before it, and the values a step carries must all come from one step (else its runs
    split by pairs of values). (Only for equalities around the pattern.)"""
    atoms = [(a.left.var, a.left.attr, a.right.var, a.right.attr)
             for a in conjuncts(query.formula.predicate)]
    for chain in chains_of(query.formula.formula):
        parent: dict = {}

        def find(u, parent=parent):
            while parent.setdefault(u, u) != u:
                u = parent[u]
            return u

        for x, a, y, b in atoms:
            xs = [i for i, s in enumerate(chain) if x in s]
            ys = [i for i, s in enumerate(chain) if y in s]
            if xs and ys:
                for i in xs:
                    for j in ys:
                        parent[find((i, a))] = find((j, b))
        classes: dict = {}
        for u in list(parent):
            classes.setdefault(find(u), set()).add(u[0])
        origins: dict = {}
        for steps_ in classes.values():
            for i in range(min(steps_), max(steps_)):
                if i not in steps_:
                    origins.setdefault(i, set()).add(max(j for j in steps_ if j < i))
        if any(len(o) > 1 for o in origins.values()):
            return False
    return True


def check_against_reference(query: ast.Query, events: list[dict], one_by_one: bool) -> None:
    engine = plan(query).executor()
    frame = events_frame(events)
    if one_by_one:
        got = [m for i in range(frame.height) for m in engine.run(frame.slice(i, 1))]
    else:
        got = list(engine.run(frame))
    if query.limit is None:
        want = reference.reference_matches(query, events)
        reference.assert_same_matches(got, want)
        assert plan(query).executor().count(frame) == len(want)
    else:
        reference.check_limited(got, query, events)


@given(chain_queries(), ragged_streams(), st.booleans())
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_hash_join_is_chosen_by_the_criterion_and_equals_the_reference(shaped_query, events,
                                                                       one_by_one):
    shaped, query = shaped_query
    try:
        planned = plan(query)
    except QueryError:
        assume(False)
    result = planned.rewritten
    # explain's per-predicate methods: one per predicate the method evaluates, all the same
    methods = planned.correlation.methods
    assert len(methods) <= 1
    assert {m.method for m in planned.correlation.predicates} == set(methods)
    if methods in (("hash join",), ("post-filter",)):
        assert len(planned.correlation.predicates) == len(result.post_filters)
    possible = (
        partition_plan(query)[0] is None
        and query.strategy in ("ALL", "ANY")
        and query.consume == "NONE"
        and result.formula is not None
    )
    around = isinstance(query.formula, ast.Filter) and any(
        len(reference.predicate_vars(c)) == 2 for c in conjuncts(query.formula.predicate))
    if not around:
        assert result.pcea is None or possible
    elif possible and carried_from_one_event(query):
        assert result.pcea is not None, result.pcea_reason
    elif not possible or not shaped:
        # unless simplification dropped the branches that bind the joined variables (e.g.
        # a branch with contradictory filters): then no join is left to get wrong
        joined = {v for c in conjuncts(query.formula.predicate)
                  if len(reference.predicate_vars(c)) == 2 for v in reference.predicate_vars(c)}
        vacuous = result.formula is not None and not joined <= reference.bound(result.formula)
        assert result.pcea is None or vacuous
    check_against_reference(query, events, one_by_one)


@pytest.mark.slow
@given(chain_queries(), ragged_streams(), st.booleans())
@settings(max_examples=3000, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_hash_join_equals_the_reference_long(shaped_query, events, one_by_one):
    _, query = shaped_query
    try:
        plan(query)
    except QueryError:
        assume(False)
    check_against_reference(query, events, one_by_one)


def test_equalities_through_plus_are_a_loop_key():
    """``(T AS y FILTER y.id = x.id)+`` with x fixed: every iteration adopts the previous one
    on the key, so each T of the match has x's id (no PARTITION BY: z is not tied)."""
    events = ev("H:id=1 T:id=1 T:id=2 T:id=1 H:id=2 T:id=1 H:id=1")
    text = "H AS x ; (T AS y FILTER y.id = x.id)+ ; H AS z"
    got = matches_of(text, events)
    assert (4, (("x", 0), ("y", 1), ("y", 3), ("z", 4))) in got
    assert not any(("y", 2) in m for _, m in got)
    pcea = compile_query(text).rewritten.pcea
    assert "(T AS y)+" in pcea.describe()[0]
    # the key carried through the iterations, and the SELECT that hides them
    matches_of("H AS x ; (T AS y)+ ; H AS z FILTER x.id = z.id", events)
    matches_of("SELECT x, z WHERE H AS x ; (T AS y)+ ; H AS z FILTER x.id = z.id", events)
    assert compile_query("SELECT x, z WHERE H AS x ; (T AS y)+ ; H AS z FILTER x.id = z.id"
                         ).rewritten.pcea.dedupe


def test_pcea_paper_q0_in_any_order_of_arrival():
    """The paper's HCQ Q0(x, y) <- T(x), S(x, y), R(x, y) as every order of the three events
    (its P_Q0, Figure 2): each of the 6 arrival orders of T(2), S(2,11), R(2,11) is exactly
    one match; orders where S and R are apart carry S's y through T."""
    from itertools import permutations

    steps = {"T": "T AS t", "S": "S AS s", "R": "R AS r"}
    orders = " OR ".join("(" + " ; ".join(steps[v] for v in p) + ")" for p in permutations("TSR"))
    text = f"SELECT * WHERE ({orders}) FILTER t.a = s.a AND s.a = r.a AND s.b = r.b"
    assert compile_query(text).rewritten.pcea.dedupe is None
    tuples = {"T": "T:a=2", "S": "S:a=2,b=11", "R": "R:a=2,b=11"}
    for p in permutations("TSR"):
        events = ev(" ".join(tuples[v] for v in p) + " S:a=2,b=12 R:a=3,b=11")
        assert len(matches_of(text, events)) == 1
    assert len(matches_of(text, S0)) == 2


@pytest.mark.parametrize("window, keys", [(16, 1), (256, 1), (256, 4)])
def test_carried_key_work_follows_the_live_keys_not_the_partial_matches(window, keys):
    """``x.v = z.v`` across y: a B event adopts the A runs of each live value of x.v, so it
    makes one run per distinct key however many A runs (and A;B partial matches) wait."""
    text = f"SELECT * WHERE A AS x ; B AS y ; C AS z FILTER x.v = z.v WITHIN {window} EVENTS"
    engine = plan(parse(text)).executor()
    assert isinstance(engine, HashJoinEngine) and engine.pcea.carries
    n = 4000
    events = [{"type": "AB"[i % 2], "v": (i // 2) % keys} for i in range(n)]
    engine.count(events_frame(events))
    ops = engine.ops
    assert ops.extends <= n // 2 + (n // 2) * keys  # one per A, at most `keys` per B
    assert ops.max_union_nodes <= 2 * math.log2(window) + 4
    assert engine.stats.live_nodes <= 2 * keys + 1  # one heap per (state, key)


# --------------------------------------------------------------------------- comparisons (ordered index)

CMP_OPS = ("<", "<=", ">", ">=", "!=", "=")


@st.composite
def sides(draw, var: str, attr: str) -> ast.Expr:
    """A value of one event: the attribute, or linear arithmetic on it."""
    ref = ast.AttrRef(var, attr)
    if attr == "s":
        return ref
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return ast.BinOp("*", ref, ast.Literal(draw(st.sampled_from((2, -1, 1.5)))))
    if kind == 1:
        return ast.BinOp("+", ref, ast.Literal(draw(st.sampled_from((1, -2, 0.5)))))
    if kind == 2:
        return ast.BinOp("-", ast.BinOp("*", ref, ast.Literal(3)), ast.Literal(1))
    return ref


@st.composite
def comparison_queries(draw):
    """An OR of 1-2 ``;`` chains with random comparisons between their AS variables
    (sides with linear arithmetic, all six operators, string and float attributes), and
    sometimes an equality; random window, SELECT, FROM, PARTITION BY, strategy, LIMIT."""
    branches, names_of = [], []
    for _ in range(draw(st.integers(1, 2))):
        k = draw(st.integers(2, 4))
        names = draw(st.lists(st.sampled_from(VARS), min_size=k, max_size=k, unique=True))
        branches.append(seq(draw(steps(tuple(names)))))
        names_of += names
    pool = sorted(set(names_of))
    atoms = []
    for _ in range(draw(st.integers(1, 3))):
        x, y = draw(st.lists(st.sampled_from(pool), min_size=2, max_size=2, unique=True))
        attr = draw(st.sampled_from(("v", "v", "k", "f", "s")))
        other = attr if attr == "s" else draw(st.sampled_from(("v", "k", "f", "id")))
        op = draw(st.sampled_from(CMP_OPS))
        atoms.append(ast.Compare(op, draw(sides(x, attr)), draw(sides(y, other))))
    if draw(st.integers(0, 4)) == 0:
        x, y = draw(st.lists(st.sampled_from(pool), min_size=2, max_size=2, unique=True))
        atoms.append(ast.Compare("=", ast.AttrRef(x, "id"), ast.AttrRef(y, "id")))
    pred = atoms[0]
    for a in atoms[1:]:
        pred = ast.And(pred, a)
    f = branches[0]
    for b in branches[1:]:
        f = ast.FOr(f, b)
    f = ast.Filter(f, pred)
    labels = sorted(reference.vdef(f))
    projection = draw(projections(labels, 3))
    window = draw(simple_windows(5))
    return ast.Query(
        formula=f,
        strategy=draw(st.sampled_from(("ALL", "ALL", "ALL", "ANY", "NEXT"))),
        select=projection,
        streams=draw(st.sampled_from((None, None, ("S1",)))),
        partition_by=draw(st.sampled_from(((), (), (("id",),)))),
        within=window,
        consume="NONE",
        limit=draw(st.sampled_from((None, None, None, 2))),
    )


@st.composite
def valued_streams(draw):
    """``ragged_streams`` plus a float ``f`` (sometimes NaN or absent) and a string ``s``."""
    out = []
    for e in draw(ragged_streams()):
        e = dict(e)
        f = draw(st.sampled_from((None, 0.5, 1.0, 2.0, float("nan"))))
        if f is not None:
            e["f"] = f
        e["s"] = draw(st.sampled_from(("a", "b", "ab")))
        out.append(e)
    return out


def bare_equality(c: ast.Predicate) -> bool:
    return c.op == "=" and isinstance(c.left, ast.AttrRef) and isinstance(c.right, ast.AttrRef)


def orderable(query: ast.Query) -> bool | None:
    """The ordered-index criterion, decided independently: in every branch, each
    comparison whose variables the branch binds relates two consecutive steps (each
    variable on one step), and no two comparisons relate the same pair. None (not
    decided here) when an equality (on ``id``) skips a step: whether its key can be carried
    is the hash join's own criterion, tested with ``chain_queries``. A comparison with an
    iterated step is not orderable: each iteration has its own value."""
    cmps = list(conjuncts(query.formula.predicate))
    loops = looped_steps(query.formula.formula)
    for chain, looped in zip(chains_of(query.formula.formula), loops, strict=True):
        used = set()
        for c in cmps:
            vs = sorted(reference.predicate_vars(c))
            at = [[i for i, s in enumerate(chain) if v in s] for v in vs]
            if not all(at):
                continue  # not bound in this branch: vacuous
            if any(len(a) != 1 for a in at) or abs(at[0][0] - at[1][0]) != 1:
                if bare_equality(c):
                    return None
                return False
            if not bare_equality(c):
                if looped[at[0][0]] or looped[at[1][0]]:
                    return False
                pair = frozenset((at[0][0], at[1][0]))
                if pair in used:
                    return False
                used.add(pair)
    return True


@given(comparison_queries(), valued_streams(), st.booleans())
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@example(  # found by hypothesis: the first branch cannot match, its iterated steps go with it
    parse("SELECT * WHERE (A AS p FILTER p.id < 0)+ ; (A AS q)+ ; (A AS r FILTER r.id < 0)+ ;"
          " (A AS s FILTER s.id < 0 AND s.id > 0)+ OR (A AS r FILTER r.id < 0) ;"
          " (A AS s FILTER s.id < 0) FILTER r.v * 2 < s.v * 3 - 1"),
    [{"type": "A", "stream": "S1", "time": 0, "ts": None, "v": 0, "id": 0, "s": "a"}], False)
def test_ordered_index_is_chosen_by_the_criterion_and_equals_the_reference(query, events,
                                                                          one_by_one):
    try:
        result = plan(query).rewritten
    except QueryError:
        assume(False)
    possible = (partition_plan(query)[0] is None and query.strategy in ("ALL", "ANY")
                and result.formula is not None)
    criterion = orderable(query)
    if possible and criterion:
        assert result.pcea is not None, result.pcea_reason
    elif result.pcea is not None and criterion is not None:
        # only when simplification changed what is compiled: it left no join to get wrong,
        # or the criterion holds on the formula left (a branch that can never match, such as
        # one filtering `s.id < 0 AND s.id > 0`, is dropped with its iterated steps)
        joined = {v for c in conjuncts(query.formula.predicate) for v in reference.predicate_vars(c)}
        left = dataclasses.replace(query, formula=dataclasses.replace(query.formula,
                                                                      formula=result.formula))
        assert possible and (not joined <= reference.bound(result.formula) or orderable(left))
    check_against_reference(query, events, one_by_one)


def test_the_issue_comparison_query_against_brute_force():
    """``A AS x ; B AS y ; A AS z FILTER y.v > x.v AND z.v > y.v WITHIN w EVENTS`` on a
    random log, counted by a direct triple loop (the issue's table, smaller)."""
    rng = random.Random(17)
    n, w = 3000, 20
    events = [{"type": rng.choice("AB"), "v": rng.randrange(1000), "time": i} for i in range(n)]
    text = f"A AS x ; B AS y ; A AS z FILTER y.v > x.v AND z.v > y.v WITHIN {w} EVENTS"
    compiled = compile_query(text)
    assert compiled.rewritten.pcea is not None and compiled.rewritten.pcea.ordered
    expected = sum(
        1
        for i in range(n) if events[i]["type"] == "A"
        for j in range(i + 1, min(n, i + w + 1)) if events[j]["type"] == "B"
        and events[j]["v"] > events[i]["v"]
        for k in range(j + 1, min(n, i + w + 1)) if events[k]["type"] == "A"
        and events[k]["v"] > events[j]["v"]
    )
    assert compiled.executor().count(events_frame(events)) == expected


# --------------------------------------------------------------------------- the ordered index


def tnodes(t):
    stack = [t] if t is not None else []
    while stack:
        m = stack.pop()
        yield m
        stack += [c for c in (m.left, m.right) if c is not None]


def tdepth(t) -> int:
    return 0 if t is None else 1 + max(tdepth(t.left), tdepth(t.right))


def _rel(rel: str, k, v) -> bool:
    return {"<": k < v, "<=": k <= v, ">": k > v, ">=": k >= v, "=": k == v, "!=": k != v}[rel]


RELS = ("<", "<=", ">", ">=", "=", "!=")


@pytest.mark.parametrize("w", [8, 64])
def test_ordered_index_pieces_are_exactly_the_live_runs_in_range(w):
    """Random keys with ties, a sliding window: the pieces of every probe hold exactly the
    live runs whose key is in range, each once; older versions never change."""
    rng = random.Random(w)
    t, versions = None, []
    alive = []
    for pos in range(1500):
        lo = pos - w
        key = rng.randrange(20)
        ms = pos - rng.randint(0, 3)
        t = ordered.insert(t, leaf(ms, pos), key, lo)
        alive.append((ms, pos, key))
        if pos % 100 == 0:
            versions.append((t, frozenset((n.node.ms, n.node.pos) for n in tnodes(t))))
        for rel in RELS:
            v = rng.randrange(21)
            got = [(n.ms, n.pos) for piece in ordered.pieces(t, rel, v, lo)
                   for run in adopted(piece, lo) for n in run]
            want = sorted((m, p) for m, p, k in alive if m >= lo and _rel(rel, k, v))
            assert sorted(got) == want
            assert len(got) == len(set(got))
    for old, content in versions:
        assert frozenset((n.node.ms, n.node.pos) for n in tnodes(old)) == content


def test_ordered_index_depth_is_logarithmic_for_values_unrelated_to_time():
    rng = random.Random(5)
    w, t, worst = 256, None, 0
    for pos in range(20_000):
        t = ordered.insert(t, leaf(pos, pos), rng.random(), pos - w)
        worst = max(worst, tdepth(t))
    assert worst <= 4 * math.log2(w) + 4


@pytest.mark.parametrize("order", ["increasing", "decreasing", "random", "constant"])
@pytest.mark.parametrize("w", [64, 512])
def test_ordered_index_probe_work_is_logarithmic_for_any_arrival_order(order, w):
    """Values monotone in time (a rising or falling price) made the old max-start-heap
    tree a list and a probe O(w) pieces. Counted, not timed: for every arrival order the
    tree holds only the window's runs, its depth and the pieces (and nodes visited) of
    every probe stay O(log w), and each insert makes O(log w) nodes amortised."""
    rng = random.Random(w)
    value = {"increasing": lambda p: p, "decreasing": lambda p: -p,
             "random": lambda p: rng.random(), "constant": lambda p: 7}[order]
    t, worst_depth, worst_pieces, keys = None, 0, 0, []

    class Ops:
        tree_inserts = tree_nodes = 0

    ops = Ops()
    n = 8 * w
    for pos in range(n):
        lo = pos - w
        k = value(pos)
        keys.append(k)
        t = ordered.insert(t, leaf(pos, pos), k, lo, ops)
        assert ordered.size(t) == min(pos + 1, w + 1)  # expired runs are deleted
        worst_depth = max(worst_depth, tdepth(t))
        live = sorted(keys[max(0, lo):])
        v = live[rng.randrange(len(live))]
        for rel in RELS:
            found = ordered.pieces(t, rel, v, lo)
            worst_pieces = max(worst_pieces, len(found))
            if pos % 97 == 0:  # and they are exactly the runs in range
                got = sorted(n.pos for piece in found for run in adopted(piece, lo) for n in run)
                assert got == [p for p in range(max(0, lo), pos + 1) if _rel(rel, keys[p], v)]
    bound = 4 * math.log2(w) + 4
    assert worst_depth <= bound
    assert worst_pieces <= 2 * bound
    assert ops.tree_inserts == n
    assert ops.tree_nodes <= n * 2 * bound


@pytest.mark.parametrize("order", ["random", "rising", "falling"])
@pytest.mark.parametrize("w", [32, 512])
def test_ordered_index_work_does_not_grow_with_partial_matches(w, order, monkeypatch,
                                                              python_objects):
    """Every A is a partial match that a later B may extend; each B's probe returns at most
    O(depth) heaps, and the trees it probes stay O(log w) deep (values random, or monotone
    in time as a rising price), however many runs wait: the work counted, not timed."""
    import cer_cli.engine.pcea as engine_module

    seen = []

    def counted(t, rel, v, lo):
        found = ordered.pieces(t, rel, v, lo)
        seen.append((len(found), tdepth(t)))
        return found

    monkeypatch.setattr(engine_module, "pieces", counted)
    rng = random.Random(w)
    text = f"SELECT * WHERE A AS x ; B AS y FILTER y.v > x.v * 2 - 100 WITHIN {w} EVENTS"
    engine = plan(parse(text)).executor()
    value = {"random": lambda i: rng.randrange(1000), "rising": lambda i: i,
             "falling": lambda i: -i}[order]
    events = [{"type": "A" if rng.random() < 0.7 else "B", "v": value(i)} for i in range(6000)]
    engine.count(events_frame(events))
    assert len(seen) > 1000
    assert engine.ops.tree_inserts == sum(e["type"] == "A" for e in events)
    bound = 4 * math.log2(w) + 4
    assert max(d for _, d in seen) <= bound
    assert max(k for k, _ in seen) <= 2 * bound


@pytest.mark.parametrize("order", ["random", "rising"])
def test_ordered_index_inserts_are_counted_in_ops_and_allocated_nodes(order):
    """Every run put into an ordered index is counted (``tree_inserts``), and the tree nodes
    it makes (``tree_nodes``, O(log w) amortised each) are part of ``allocated_nodes``."""
    rng = random.Random(3)
    w = 64
    engine = plan(parse(f"SELECT * WHERE A AS x ; B AS y FILTER y.v > x.v WITHIN {w} EVENTS")).executor()
    events = [{"type": "A" if rng.random() < 0.6 else "B",
               "v": i if order == "rising" else rng.randrange(100)} for i in range(3000)]
    engine.count(events_frame(events))
    ops, stats = engine.ops, engine.stats
    a = sum(e["type"] == "A" for e in events)
    assert ops.tree_inserts == a
    assert a <= ops.tree_nodes <= a * 2 * (4 * math.log2(w) + 4)
    assert stats.allocated_nodes == ops.extends + ops.union_nodes + ops.tree_nodes
    assert ops.union_nodes == 0  # the only index is the ordered one


def test_a_comparison_with_an_iterated_step_compares_every_iteration():
    """Found by the property test above: ``(A AS p)+ ; (A AS q)+ FILTER p.v < q.v`` must
    hold for every iteration of q (and of p). An ordered index compares one value per run,
    so such a comparison is not given to it (the post-filter checks every binding)."""
    text = ("SELECT * WHERE ((A AS p)+ ; (A AS q)+) FILTER p.v * 2 < q.v * 2 AND p.id = q.id")
    query = parse(text)
    result = plan(query).rewritten
    assert result.pcea is None and "every iteration" in result.pcea_reason
    events = [{"type": "A", "stream": "S1", "time": 0, "ts": None, "v": v, "id": 0, "s": "a"}
              for v in (0, 1, 0)]
    check_against_reference(query, events, False)
    assert len(reference.reference_matches(query, events)) == 1  # {p: 0, q: 1}, not {p: 0, q: 1, 2}


def test_count_builds_no_match_and_equals_the_runs(monkeypatch):
    """``--count`` of a hash join without a time window counts the runs over the DAG
    (``count_runs``): no match is built, and the count is the brute force's."""
    rng = random.Random(26)
    events = [{"type": rng.choice("ABCD"), "val": rng.randrange(10)} for _ in range(200)]
    query = parse("A AS x ; B AS y ; C AS z FILTER x.val < y.val AND y.val < z.val"
                  " WITHIN 20 EVENTS")
    want = len(reference.reference_matches(query, events))
    assert want > 50

    def no_match(*_):
        raise AssertionError("a match was built")

    monkeypatch.setattr(P, "Match", no_match)
    assert plan(query).executor().count(events_frame(events)) == want


def test_count_of_exponentially_many_runs_is_exact():
    """A register over a rising log: every subset of a window is a match (2^100 and more),
    which no enumeration reaches; counted over the DAG, the count is exact."""
    n, w = 150, 100
    events = [{"type": "A", "v": i} for i in range(n)]
    query = parse(f"(A AS y FILTER y.v > PREV(y).v)+ WITHIN {w} EVENTS")
    want = sum(2 ** (j - i - 1) if j > i else 1 for i in range(n) for j in range(i, min(n, i + w + 1)))
    assert plan(query).executor().count(events_frame(events)) == want


def test_count_falls_back_to_enumeration_when_too_deep(monkeypatch, python_objects):
    """Runs nested deeper than Python recurses are counted by enumerating them."""
    events = [{"type": rng_t, "val": i % 7} for i, rng_t in enumerate("ABCABCDACBBCAC" * 5)]
    query = parse("A AS x ; B AS y ; C AS z FILTER x.val < y.val AND y.val < z.val"
                  " WITHIN 9 EVENTS")
    want = len(reference.reference_matches(query, events))

    def deep(*_):
        raise RecursionError

    monkeypatch.setattr(P, "count_runs", deep)
    assert want > 0 and plan(query).executor().count(events_frame(events)) == want
