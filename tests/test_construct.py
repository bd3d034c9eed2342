"""CEL -> CEA construction: paper examples, structural invariants, and a property test
against the brute-force reference (compile -> simulate == reference_matches)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cer_cli.compiler.cea import CEA
from cer_cli.compiler.construct import compile_formula, describe
from cer_cli.compiler.predicates import Alphabet
from cer_cli.plan import plan
from cer_cli.query import ast as A
from cer_cli.query.errors import QueryError
from tests.builders import H, T, cmp, conj, events_frame, letters
from tests.cea_sim import simulate
from tests.gen_formulas import formulas, streams
from tests.reference import reference_matches

# Figure 1 of Foundations of CEP: value is tmp for T events and hum for H events.
F1 = [
    {"type": t, "id": i, "tmp": v, "hum": v}
    for t, i, v in zip(
        "HTHHTTTHH", [2, 0, 0, 1, 1, 0, 1, 1, 0], [25, 45, 20, 25, 40, 42, 25, 70, 18], strict=True
    )
]


def run(query: A.Query, events: list[dict]) -> set[tuple]:
    """Rewrite, compile, simulate: the matches as ``Match.key()`` tuples."""
    result = plan(query).rewritten
    alphabet = Alphabet.from_formula(result.formula)
    projection = None if query.select is None else frozenset(i.var for i in query.select)
    cea = compile_formula(result.formula, alphabet, projection)
    if not events:
        return set()
    ids, masks = alphabet.symbols(events_frame(events))
    return simulate(cea, [masks[i] for i in ids])


def position_sets(found: set[tuple]) -> set[frozenset[int]]:
    return {frozenset(p for p, _ in events) for _, _, events in found}


PHI1 = A.Filter(
    A.Seq(A.As(T(), "x"), A.As(H(), "y")),
    conj(
        cmp("x", "tmp", ">", 40),
        cmp("y", "hum", "<=", 25),
        cmp("x", "id", "=", 0),
        cmp("y", "id", "=", 0),
    ),
)


def test_paper_phi1_phi2_phi3_on_figure_1():
    assert position_sets(run(A.Query(PHI1), F1)) == {frozenset(s) for s in ({1, 2}, {1, 8}, {5, 8})}
    phi2 = A.Filter(
        A.FOr(A.Seq(A.As(T(), "x"), A.As(H(), "y")), A.Seq(A.As(H(), "y"), A.As(T(), "x"))),
        PHI1.predicate,
    )
    assert position_sets(run(A.Query(phi2), F1)) == {
        frozenset(s) for s in ({1, 2}, {2, 5}, {1, 8}, {5, 8})
    }
    phi3 = A.Filter(
        A.Seq(
            A.Seq(A.As(H(), "x"), A.Plus(A.Filter(A.As(T(), "y"), cmp("y", "id", "=", 1)))),
            A.As(H(), "z"),
        ),
        conj(
            cmp("x", "hum", "<", 30),
            cmp("z", "hum", ">", 60),
            cmp("x", "id", "=", 1),
            cmp("z", "id", "=", 1),
        ),
    )
    assert position_sets(run(A.Query(phi3), F1)) == {
        frozenset(s) for s in ({3, 4, 7}, {3, 6, 7}, {3, 4, 6, 7})
    }


def test_safety_examples():
    # (T AS x OR H AS y) ; T AS x over T H T T: {1,2} and {1,3} (Foundations of CEP, Theorem 1: unsafe branch dropped)
    f = A.Seq(A.FOr(A.As(T(), "x"), A.As(H(), "y")), A.As(T(), "x"))
    assert position_sets(run(A.Query(f), letters("THTT"))) == {frozenset({1, 2}), frozenset({1, 3})}
    assert run(A.Query(A.Seq(A.As(T(), "x"), A.As(T(), "x"))), letters("TTT")) == set()
    # (A AS x)+ ; (A AS x)+ is safe: {0,1} {0,2} {1,2} {0,1,2} over A A A (Foundations of CEP §5.1: `+` re-defines its variables)
    a = A.Plus(A.As(A.EventType("A"), "x"))
    assert position_sets(run(A.Query(A.Seq(a, a)), letters("AAA"))) == {
        frozenset(s) for s in ({0, 1}, {0, 2}, {1, 2}, {0, 1, 2})
    }


def test_plus_reports_all_subsets_and_contiguity():
    sell = A.EventType("S")
    assert len(run(A.Query(A.Plus(sell)), letters("SSS"))) == 7
    assert len(run(A.Query(A.Plus(sell, contiguous=True)), letters("SSS"))) == 6  # intervals
    # `A ; B :+`: B's iterations are back to back even though `;` skips before them
    f = A.Seq(A.EventType("A"), A.Plus(A.EventType("B"), contiguous=True))
    assert position_sets(run(A.Query(f), letters("ABCB"))) == {frozenset({0, 1}), frozenset({0, 3})}
    g = A.Seq(A.EventType("A"), A.EventType("B"), contiguous=True)
    assert position_sets(run(A.Query(g), letters("ACBAB"))) == {frozenset({3, 4})}


def test_not_consumes_an_unreported_event_and_fixes_the_start():
    # NOT(S) ; B ; S over B S B S: the NOT event starts the interval but is not reported
    f = A.Seq(A.Seq(A.FNot(A.EventType("S")), A.EventType("B")), A.EventType("S"))
    found = run(A.Query(f), letters("BSBS"))
    assert (0, 3, ((2, ("B",)), (3, ("S",)))) in found
    assert all(0 not in dict(events) for _, _, events in found)


def test_projection_merges_runs_and_select_none_keeps_intervals():
    f = A.Seq(A.As(A.EventType("A"), "x"), A.As(A.EventType("B"), "y"))
    q = A.Query(f, select=(A.SelectItem("y"),))
    assert run(q, letters("AAB")) == {(0, 2, ((2, ("y",)),)), (1, 2, ((2, ("y",)),))}
    assert run(A.Query(f, select=()), letters("AAB")) == {(0, 2, ()), (1, 2, ())}


def test_cea_invariants_and_describe():
    phi1 = plan(A.Query(PHI1)).rewritten.formula
    alphabet = Alphabet.from_formula(phi1)
    cea = compile_formula(phi1, alphabet)
    assert all(t.target != cea.initial for t in cea.transitions)
    assert cea.initial == 0 and cea.finals
    reachable = {cea.initial} | {t.target for t in cea.transitions}
    assert reachable == set(range(cea.n_states))
    # every state reaches a final state
    useful = set(cea.finals)
    while True:
        more = {t.source for t in cea.transitions if t.target in useful} - useful
        if not more:
            break
        useful |= more
    assert useful == set(range(cea.n_states))
    text = json.dumps(describe(cea, alphabet))
    assert "tmp > 40" in text and '"x"' in text


def test_unsatisfiable_compiles_to_an_empty_automaton():
    cea = compile_formula(None, Alphabet.from_formula(None))
    assert cea == CEA(1, 0, frozenset(), ())
    false = A.Filter(A.As(T(), "x"), A.BoolConst(False))
    assert not compile_formula(false, Alphabet.from_formula(false)).finals


def test_predicates_between_events_are_rejected_with_a_span():
    span = A.Span(10, 20)
    f = A.Filter(
        A.Seq(A.As(T(), "x"), A.As(H(), "y")),
        A.Compare("<", A.AttrRef("x", "id"), A.AttrRef("y", "id"), span=span),
    )
    with pytest.raises(QueryError, match="between events") as info:
        compile_formula(f, Alphabet.from_formula(f))  # the rewrite passes remove them first
    assert info.value.span == span


def test_unrewritten_outer_filter_is_refused():
    f = A.Seq(A.As(T(), "x"), A.Filter(H(), cmp("x", "tmp", ">", 1)))
    with pytest.raises(ValueError, match="rewrite"):
        compile_formula(f, Alphabet.from_formula(f))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    f=formulas(max_depth=3),
    events=streams(max_size=7),
    select=st.sampled_from(["all", "none", "x", "A"]),
)
def test_compiled_cea_agrees_with_reference(f, events, select):
    projection = {"all": None, "none": ()}.get(select, (A.SelectItem(select),))
    query = A.Query(f, select=projection)
    expected = {m.key() for m in reference_matches(query, events)}
    assert run(query, events) == expected


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(f=formulas(max_depth=4, filter_probability=0.4), events=streams(max_size=8))
def test_compiled_cea_agrees_with_reference_deep(f, events):
    query = A.Query(f)
    assert run(query, events) == {m.key() for m in reference_matches(query, events)}
