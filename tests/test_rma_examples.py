"""The worked examples of "Symbolic Automata with Memory: a Computational Model for Complex
Event Processing" (Register Match Automata, RMA), in our query language.

Each example runs through the whole pipeline (``compile_query(...).run``), is compared with
the outputs the paper states (tagged "paper") or that follow from its definitions (tagged
"derived"), and with the brute-force reference (tests/reference.py); ``cer explain`` must name
the method that evaluates the predicates between events, its cost, and a memory verdict.

Translation notes:
* The paper's stream is a sequence of (type, id, value) tuples indexed from 0, as ours.
* ``ψ WINDOW w`` keeps matches with ``max − min < w``; our ``WITHIN n EVENTS`` keeps
  ``end − start ≤ n``, so ``WINDOW w`` is ``WITHIN (w − 1) EVENTS``.
* The paper's matches are sets of positions (no variables); we compare position sets.
"""

from __future__ import annotations

import pytest

from cer_cli.api import compile_query
from cer_cli.explain import explanation
from cer_cli.plan.memory import CONSTANT, JOIN_KEYS, LOG, WINDOW
from cer_cli.query.errors import QueryError
from cer_cli.query.parser import parse
from tests import reference
from tests.builders import events_frame


def stream(*rows: tuple[str, int, int]) -> list[dict]:
    return [{"type": t, "stream": "S", "id": i, "value": v} for t, i, v in rows]


#: Table 1 of the paper: temperature (T) and humidity (H) readings (type, sensor id, value).
TABLE1 = stream(("T", 1, 22), ("T", 1, 24), ("T", 2, 32), ("H", 1, 70), ("H", 1, 68), ("T", 2, 33))



def matches(text: str, events: list[dict]) -> set[tuple[int, ...]]:
    """The position sets of ``text`` over ``events``, checked against the reference."""
    got = list(compile_query(text).run(events_frame(events)))
    reference.assert_same_matches(got, reference.reference_matches(parse(text), events))
    return {tuple(p for p, _ in m.events) for m in got}


def explained(text: str) -> dict:
    """`cer explain`'s plan, after checking it names the engine's method and its cost."""
    compiled = compile_query(text)
    plan = explanation(compiled)["plan"]
    corr = plan["correlation"]
    if not compiled.correlation:
        assert corr is None
    else:
        assert [s["method"] for s in corr["steps"]] == [
            m.title for m in compiled.correlation.methods]
        assert corr["cost"] and corr["predicates"]
    assert plan["memory"]["verdict"] and plan["memory"]["reason"]
    return plan


# --------------------------------------------------------------------------- section 3


def test_plain_sequence_reports_every_pair():
    """Paper, section 3: (T AS x);(H AS y) detects every T followed by an H, not only the
    contiguous {2, 3}."""
    text = "(T AS x) ; (H AS y)"
    assert matches(text, TABLE1) == {(0, 3), (0, 4), (1, 3), (1, 4), (2, 3), (2, 4)}
    plan = explained(text)
    assert plan["correlation"] is None


EXPRESSION_1 = "(T AS x) ; (H AS y) FILTER x.id = y.id"


def test_expression_1_equality_between_events():
    """Paper, Expression (1): the matches of the plain sequence except those whose sensor ids
    differ. The paper names {2, 3} only; {2, 4} fails too (T id 2, H id 1) — a slip in the
    paper, which the reference confirms."""
    assert matches(EXPRESSION_1, TABLE1) == {(0, 3), (0, 4), (1, 3), (1, 4)}
    plan = explained(EXPRESSION_1)
    # every event of a match shares the id: evaluated per sensor, at the cost of a filter
    assert plan["correlation"]["method"] == "partition rewrite"
    assert "constant per event" in plan["correlation"]["cost"]
    assert plan["memory"]["verdict"] == LOG  # enumeration without a window
    count = plan["memory"]["modes"]["count"]
    assert count["verdict"] == JOIN_KEYS and "x.id = y.id" in count["reason"]


def test_run_3_of_the_figure_1_rma():
    """Paper, Run (3) and Definition 4.5: over the first four events, the RMA of Expression
    (1) has exactly the matches {1, 3} (the run shown) and {0, 3}."""
    assert matches(EXPRESSION_1, TABLE1[:4]) == {(0, 3), (1, 3)}


def test_expression_2_needs_unbounded_memory():
    """Paper, Expression (2): every T of the H's sensor before it — well-formed but not
    bounded: an automaton would have to store every T event. {0, 1, 3} is a match (paper);
    the rest follows from the definitions. Our language accepts it (the filter reads the
    outer y, bound after the '+'), and the memory verdict says why it is unbounded."""
    text = "(T AS x FILTER x.id = y.id)+ ; (H AS y)"
    got = matches(text, TABLE1)
    assert (0, 1, 3) in got
    assert got == {(0, 3), (1, 3), (0, 1, 3), (0, 4), (1, 4), (0, 1, 4)}
    plan = explained(text)
    assert plan["memory"]["verdict"] == LOG and "iteration" in plan["memory"]["reason"]
    # counting only needs a counter per sensor id (the '+' multiplies counts)
    assert plan["memory"]["modes"]["count"]["verdict"] == JOIN_KEYS


def test_nested_bounded_expression_is_not_expressible():
    """Paper, section 3: ((T AS x1 ; T AS x2 FILTER x1.value = x2.value) ; (H AS x3 ; H AS x4
    FILTER x3.value = x4.value)+)+ is bounded (each filter reads only its own iteration's
    variables) but has no stated output. Our language rejects it: its semantics reads a
    filter on x1, x2 "for every event of x1 and x2", and a match's variable sets do not say
    which events came from the same repetition, so the predicate cannot be decided from the
    match (docs/language.md, Correlation)."""
    text = ("((T AS x1 ; T AS x2 FILTER x1.value = x2.value) ;"
            " (H AS x3 ; H AS x4 FILTER x3.value = x4.value)+)+")
    with pytest.raises(QueryError) as e:
        compile_query(text)
    assert "repetition" in e.value.message and "x1.value = x2.value" in e.value.message


# --------------------------------------------------------------------------- section 5


EXPRESSION_4 = ("((T AS x FILTER x.value < -40) OR (T AS x FILTER x.value > 50)) ;"
                " (T AS y) FILTER y.id = x.id")


def test_expression_4_out_of_range_then_same_sensor():
    """Paper, Expression (4): a reading outside [-40, 50] followed by any reading of the same
    sensor. The paper shows the automaton, not outputs; they follow from the definitions:
    none on Table 1 (no value is out of range), and on the stream below {0, 2} and {1, 3}."""
    assert matches(EXPRESSION_4, TABLE1) == set()
    other = stream(("T", 1, -45), ("T", 2, 60), ("T", 1, 20), ("T", 2, 30), ("T", 3, 55))
    assert matches(EXPRESSION_4, other) == {(0, 2), (1, 3)}
    plan = explained(EXPRESSION_4)
    assert plan["memory"]["modes"]["count"]["verdict"] == JOIN_KEYS


# --------------------------------------------------------------------------- section 6


def test_theorem_6_2_m_candidates_need_m_registers():
    """Paper, proof of Theorem 6.2: m T events followed by one H of the same sensor give m
    matches, whatever m — so no automaton with a fixed number of registers and a single run
    finds them. Our memory verdict agrees: without a window it grows with the log."""
    m = 12
    events = stream(*[("T", 1, 20 + i) for i in range(m)], ("H", 1, 70))
    assert matches(EXPRESSION_1, events) == {(i, m) for i in range(m)}
    assert explained(EXPRESSION_1)["memory"]["verdict"] == LOG
    # ... and a window bounds it: WINDOW 5 is WITHIN 4 EVENTS, 4 matches
    windowed = f"SELECT * WHERE {EXPRESSION_1} WITHIN 4 EVENTS"
    assert matches(windowed, events) == {(i, m) for i in range(m - 4, m)}
    memory = explained(windowed)["memory"]
    assert memory["verdict"] == WINDOW and "WITHIN 4 EVENTS" in memory["reason"]


def test_windowed_expression_1_reports_only_the_second_t():
    """Paper, section 6 (Figure 3): over two T events and an H of the same sensor, the
    unrolled RMA of Expression (1) WINDOW 2 reports only the second T with the H (the
    output-agnostic deterministic RMA would mark all three). WINDOW 2 is WITHIN 1 EVENTS."""
    events = stream(("T", 1, 22), ("T", 1, 24), ("H", 1, 70))
    assert matches(f"SELECT * WHERE {EXPRESSION_1} WITHIN 1 EVENTS", events) == {(1, 2)}
    assert matches(f"SELECT * WHERE {EXPRESSION_1} WITHIN 2 EVENTS", events) == {(0, 2), (1, 2)}


@pytest.mark.parametrize(
    "w, expected",
    [(2, set()), (3, {(1, 3)}), (4, {(0, 3), (1, 3), (1, 4)}), (5, {(0, 3), (0, 4), (1, 3), (1, 4)})],
)
def test_expression_1_window_w_on_table_1(w, expected):
    """Derived from Definition 6.4 (max − min < w) on Table 1."""
    text = f"SELECT * WHERE {EXPRESSION_1} WITHIN {w - 1} EVENTS"
    assert matches(text, TABLE1) == expected
    plan = explained(text)
    # WITHIN n EVENTS counts positions in the whole stream: no partition rewrite
    assert plan["correlation"]["method"] != "partition rewrite"
    assert plan["memory"]["verdict"] == WINDOW


# --------------------------------------------------------------------------- comparisons


def test_comparison_with_the_previous_reading():
    """The paper's motivating constraint (section 1): "the temperature of the last event is
    higher than that of the previous event". No output is stated; on Table 1 the rises are
    22 → 24 and 24 → 32. A comparison is not an equality: post-filtered relaxation. The
    next-event form needs only the last event: constant memory."""
    text = "T AS x : T AS y FILTER y.value > x.value"
    assert matches(text, TABLE1) == {(0, 1), (1, 2)}
    plan = explained(text)
    assert plan["correlation"]["method"] == "post-filtered relaxation"
    assert "exponentially" in plan["correlation"]["cost"]
    assert plan["memory"]["verdict"] == CONSTANT


def test_comparison_under_a_window():
    """A comparison between events under a window (derived): every T below a later H within
    3 events. A PCEA with an ordered index on x.value; the window bounds its memory."""
    text = "SELECT * WHERE (T AS x) ; (H AS y) FILTER x.value < y.value WITHIN 3 EVENTS"
    assert matches(text, TABLE1) == {(0, 3), (1, 3), (1, 4), (2, 3), (2, 4)}
    plan = explained(text)
    corr = plan["correlation"]
    assert corr["method"] == "hash join (PCEA)" and "x.value < y.value" in corr["predicates"][0]
    assert "ordered index" in corr["cost"]
    assert plan["memory"]["verdict"] == WINDOW and "WITHIN 3 EVENTS" in plan["memory"]["reason"]
    # without the window, counting would need every distinct value of x.value (C5)
    count = compile_query(text.replace(" WITHIN 3 EVENTS", "")).memory("count")
    assert count.verdict == JOIN_KEYS and "x.value < y.value" in count.reason


def test_register_clobbering_of_the_determinised_rma():
    """Derived: the paper's determinisation (Algorithm 5) merges runs with the same marks into
    one register file, which a later write can clobber. Here the branch w-then-x overwrites
    x's register at position 1, so a DRMA compares z with v=2 and loses the match; the
    semantics (and the reference) keep {0, 1, 2} with x at 0."""
    text = "((A AS x ; A AS w) OR (A AS w ; A AS x)) ; B AS z FILTER z.v = x.v"
    events = [{"type": "A", "stream": "S", "v": 1}, {"type": "A", "stream": "S", "v": 2},
              {"type": "B", "stream": "S", "v": 1}]
    got = list(compile_query(text).run(events_frame(events)))
    reference.assert_same_matches(got, reference.reference_matches(parse(text), events))
    assert [m.events for m in got] == [((0, ("A", "x")), (1, ("A", "w")), (2, ("B", "z")))]
    explained(text)
