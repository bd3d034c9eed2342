"""Property tests: the engine against brute force.

Two oracles. For random hand-made CEAs, the reference's query-level logic (FROM, PARTITION
BY, WITHIN, strategies, CONSUME BY, LIMIT in tests/reference.py) runs over a brute-force
enumeration of the CEA's accepting runs. For random formulas (once the compiler exists),
``plan(query).run`` is compared with ``reference_matches`` directly.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cer_cli.compiler.cea import CEA, Transition, holds
from cer_cli.compiler.predicates import Alphabet, TypeTest
from cer_cli.engine.run import Engine
from cer_cli.plan import plan
from cer_cli.query import ast
from tests import reference
from tests.builders import events_frame
from tests.gen_formulas import EVENT_TYPES, _windows, formulas, queries, streams
from tests.test_determinize import ceas

ALPHABET_ATOMS = tuple(TypeTest(t) for t in EVENT_TYPES)  # atom i tests type EVENT_TYPES[i]


def project(cea: CEA, variables: frozenset[str]) -> CEA:
    """SELECT on a hand-made CEA: labels keep only ``variables`` (empty means unmarked)."""
    transitions = tuple(
        Transition(t.source, t.guard, t.labels & variables, t.target) for t in cea.transitions
    )
    return CEA(cea.n_states, cea.initial, cea.finals, transitions)


def cea_valuations(cea: CEA, stream: list[dict]) -> set[reference.Valuation]:
    """Accepting runs of ``cea`` started at every position of ``stream``, as valuations."""
    masks = [1 << EVENT_TYPES.index(e["type"]) for e in stream]
    out = set()
    for i in range(len(stream)):
        configs = {(cea.initial, frozenset())}
        for j in range(i, len(stream)):
            configs = {
                (t.target, mu | {(x, j) for x in t.labels})
                for q, mu in configs
                for t in cea.outgoing(q)
                if holds(t.guard, masks[j])
            }
            out |= {reference.Valuation(i, j, mu) for q, mu in configs if q in cea.finals}
            if not configs:
                break
    return out


def expected(cea: CEA, query: ast.Query, events: list[dict], limited: list | None = None):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reference, "formula_matches", lambda f, s: cea_valuations(cea, s))
        if limited is not None:
            reference.check_limited(limited, query, events)
            return None
        return reference.reference_matches(query, events)


def run_engine(cea, query: ast.Query, events, cuts: list[int], compact_min: int) -> list:
    if query.select is not None:
        cea = project(cea, frozenset(i.var for i in query.select))
    engine = Engine(
        cea,
        Alphabet(ALPHABET_ATOMS),
        window=query.within,
        partition_by=query.partition_by,
        strategy=query.strategy,
        consume=query.consume,
        limit=query.limit,
        streams=query.streams,
        compact_min=compact_min,
    )
    frame = events_frame(events)
    out = []
    bounds = sorted({0, len(events), *(c for c in cuts if c <= len(events))})
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        out.extend(engine.run(frame.slice(lo, hi - lo)))
    return out


@st.composite
def cea_queries(draw):
    select = draw(st.sampled_from((None, (), (ast.SelectItem("x"),), (ast.SelectItem("y"),))))
    return ast.Query(
        formula=ast.EventType("A"),  # unused: the CEA stands for the formula
        strategy=draw(st.sampled_from(ast.STRATEGIES)),
        select=select,
        streams=draw(st.none() | st.sampled_from((("S1",), ("S1", "S2")))),
        partition_by=draw(st.sampled_from(((), (("id",),)))),
        within=draw(_windows()),
        consume=draw(st.sampled_from(ast.CONSUME_POLICIES)),
        limit=draw(st.none() | st.integers(0, 3)),
    )


@given(
    ceas(),
    cea_queries(),
    streams(max_size=9),
    st.lists(st.integers(0, 9), max_size=3),
    st.sampled_from((1, 4096)),
)
@settings(max_examples=700, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_engine_equals_brute_force_on_random_ceas(cea, query, events, cuts, compact_min):
    got = run_engine(cea, query, events, cuts, compact_min)
    if query.limit is None:
        reference.assert_same_matches(got, expected(cea, query, events))
    else:
        expected(cea, query, events, limited=got)


@pytest.mark.slow
@given(
    ceas(max_states=6),
    cea_queries(),
    streams(max_size=10),
    st.lists(st.integers(0, 10), max_size=3),
    st.sampled_from((1, 4096)),
)
@settings(max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_engine_equals_brute_force_on_random_ceas_long(cea, query, events, cuts, compact_min):
    test_engine_equals_brute_force_on_random_ceas.hypothesis.inner_test(
        cea, query, events, cuts, compact_min
    )


def check_query(query: ast.Query, events: list[dict]) -> None:
    got = list(plan(query).run(events_frame(events)))
    if query.limit is None:
        reference.assert_same_matches(got, reference.reference_matches(query, events))
    else:
        reference.check_limited(got, query, events)


@given(queries(formulas(max_depth=3)), streams(max_size=8))
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_run_query_equals_reference(query, events):
    check_query(query, events)


@pytest.mark.slow
@given(queries(formulas(max_depth=4)), streams(max_size=10))
@settings(max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_run_query_equals_reference_long(query, events):
    check_query(query, events)


#: Patterns that bind x (or the label A) to several events, or to none (issue #13).
_MANY = ("(A AS x)+", "((A ; B) AS x)+", "(A AS x)+ ; B AS y", "((A OR B) AS x)+",
         "(A ; A) AS x", "(A AS x OR B)+", "((A AS x)+ OR C) ; B AS y", "A ; A")


@st.composite
def _many_filters(draw) -> ast.Query:
    """A pattern binding x to several events, filtered by OR/AND/NOT of atoms on x (CEL
    comparisons, x[...] groups, constants), maybe with a second filter."""
    from cer_cli.query.parser import parse
    from tests.gen_formulas import predicates

    skeleton = parse(draw(st.sampled_from(_MANY))).formula
    var = "A" if skeleton == parse("A ; A").formula else "x"
    pred = draw(predicates((var,)))
    if draw(st.booleans()):
        other = draw(predicates((var,)))
        pred = draw(st.sampled_from((ast.Or, ast.And)))(pred, other)
    if draw(st.booleans()):
        pred = ast.Not(pred)
    return ast.Query(ast.Filter(skeleton, pred))


@given(_many_filters(), streams(max_size=6))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_filters_on_variables_with_several_events_equal_reference(query, events):
    check_query(query, events)
