"""Absence ``φ1 ; !ψ ; φ2`` (issue #16, part 1): syntax, errors, and the engine against the
brute-force reference (tests/reference.py) on random formulas with a unary ψ."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from cer_cli.plan import plan
from cer_cli.query import ast
from cer_cli.query.checks import check_query
from cer_cli.query.errors import QueryError
from cer_cli.query.parser import parse
from cer_cli.query.printer import to_text
from tests import reference
from tests.builders import events_frame
from tests.gen_formulas import formulas, queries, schema_of, streams


def _events(types: str) -> list[dict]:
    return [{"type": t, "stream": "S", "time": i, "ts": i, "v": 0, "id": 0}
            for i, t in enumerate(types)]


def _run(text: str, events: list[dict]) -> list:
    query = parse(text)
    check_query(query, schema_of(events))
    got = list(plan(query).run(events_frame(events)))
    reference.assert_same_matches(got, reference.reference_matches(query, events))
    return got


@pytest.mark.parametrize("text", [
    "A ; !B ; C",
    "A AS a ; !(B AS b FILTER b.v > 1) ; C",
    "A ; B ; !C ; A ; !(B FILTER B[v = 0]) ; C",
    "(A ; !B ; C) OR (A ; !S1>C ; B)",
    "(A FILTER A[v > 1]) ; !B ; C+",
])
def test_absence_prints_and_parses_back(text):
    q = parse(text)
    assert any(isinstance(n, ast.Seq) and n.absent is not None
               for n in [q.formula, getattr(q.formula, "left", None),
                         getattr(q.formula, "right", None)] if n is not None)
    assert parse(to_text(q)) == q


def test_absence_groups_left_operand_and_right_operand():
    f = parse("A ; B ; !C ; D ; E").formula
    assert f == ast.Seq(ast.Seq(ast.Seq(ast.EventType("A"), ast.EventType("B")),
                                ast.EventType("D"), absent=ast.EventType("C")),
                        ast.EventType("E"))


@pytest.mark.parametrize("text, column, words", [
    ("!B", 1, "between two parts"),
    ("!B ; C", 1, "between two parts"),
    ("A OR !B ; C", 6, "between two parts"),
    ("A : !B ; C", 5, "between two parts"),
    ("A ; !B FILTER B[v > 1] ; C", 8, "in parentheses"),
    ("A ; !B : C", 8, "followed by ';'"),
    ("A ; !B", 3, "trailing absence"),
    ("A ; !B\nWITHIN 30 minutes", 3, "not supported yet"),
])
def test_misplaced_absence_is_a_syntax_error_at_its_position(text, column, words):
    with pytest.raises(QueryError) as e:
        parse(text)
    assert words in str(e.value)
    assert f":1:{column}:" in str(e.value)


@pytest.mark.parametrize("text, words", [
    ("A AS a ; !(B FILTER B.v = a.v) ; C", "comparing the absent event"),
    ("A AS a ; !B ; C AS c FILTER a.v = c.v", "predicates between events"),
    ("A ; !(B ; C) ; A", "a single event type"),
    ("A ; !NOT(B) ; A", "a single event type"),
])
def test_unsupported_absence_is_refused_by_the_checks(text, words):
    with pytest.raises(QueryError, match=words):
        check_query(parse(text), schema_of(_events("ABC")))


def test_absence_reads_no_absent_event_in_the_gap():
    got = _run("A ; !B ; C", _events("ACABCAC"))
    assert sorted((m.start, m.end) for m in got) == [(0, 1), (5, 6)]  # B3 blocks A0, A2


def test_absence_is_per_partition():
    events = [{"type": t, "stream": "S", "time": i, "ts": i, "v": 0, "id": k}
              for i, (t, k) in enumerate([("A", 1), ("B", 2), ("C", 1), ("B", 1), ("C", 1)])]
    got = _run("SELECT * WHERE A ; !B ; C PARTITION BY id", events)
    assert [(m.start, m.end) for m in got] == [(0, 2)]


def test_explain_shows_the_gap_guard():
    from cer_cli.compiler.construct import compile_formula, describe
    from cer_cli.compiler.predicates import Alphabet

    f = parse("A ; !(B FILTER B[v > 1]) ; C").formula
    alphabet = Alphabet.from_formula(f)
    guards = [t["guard"] for t in describe(compile_formula(f, alphabet), alphabet)["transitions"]]
    assert any(g.startswith("NOT") and "B" in g for g in guards), guards


@given(queries(formulas(max_depth=3, with_absent=True)), streams(max_size=8))
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_absence_equals_reference(query, events):
    got = list(plan(query).run(events_frame(events)))
    if query.limit is None:
        reference.assert_same_matches(got, reference.reference_matches(query, events))
    else:
        reference.check_limited(got, query, events)
