"""Absence ``φ1 ; !ψ ; φ2`` (issue #16, part 1): syntax, errors, and the engine against the
brute-force reference (tests/reference.py) on random formulas with a unary ψ."""

from __future__ import annotations

import dataclasses
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cer_cli.engine import absence, post_filter
from cer_cli.plan import plan
from cer_cli.query import ast
from cer_cli.query.checks import check_query
from cer_cli.query.errors import QueryError
from cer_cli.query.parser import parse
from cer_cli.query.printer import to_text
from tests import reference
from tests.builders import events_frame
from tests.gen_formulas import absent_atoms, formulas, queries, schema_of, streams


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
    ("A OR C ; !B WITHIN 2 EVENTS", 13, "ends the whole formula"),
])
def test_misplaced_absence_is_a_syntax_error_at_its_position(text, column, words):
    with pytest.raises(QueryError) as e:
        parse(text)
    assert words in str(e.value)
    assert f":1:{column}:" in str(e.value)


@pytest.mark.parametrize("text, words", [
    ("(A AS a)+ ; !(B FILTER B.v = a.v) ; C", "not bound to exactly one event"),
    ("(A AS a OR C) ; !(B FILTER B.v = a.v) ; C", "not bound to exactly one event"),
    ("A AS a ; !(B FILTER B.v = z.v) ; C", "not bound to exactly one event"),
    ("A ; !(B ; C) ; A", "a single event type"),
    ("A ; !NOT(B) ; A", "a single event type"),
])
def test_unsupported_absence_is_refused_by_the_checks(text, words):
    with pytest.raises(QueryError, match=words):
        check_query(parse(text), schema_of(_events("ABC")))


@pytest.mark.parametrize("text, words", [
    ("(A AS a ; !(B AS b FILTER b.v < a.v) ; C)+", "inside a '\\+'"),
    ("A AS a ; !B ; C AS c FILTER a.v = c.v", "say so in the absent event's filter"),
])
def test_correlated_absence_the_engine_cannot_evaluate_is_refused(text, words):
    q = parse(text)
    check_query(q, schema_of(_events("ABC")))
    with pytest.raises(QueryError, match=words):
        plan(q)


@pytest.mark.parametrize("text", [
    # trailing, with a comparison in φ that cannot become PARTITION BY
    "A AS a ; C AS c FILTER a.v < c.v ; !(B AS b FILTER b.v = a.v) WITHIN 3 EVENTS",
    "A AS a ; !(B AS b FILTER b.v = a.v) ; C AS c FILTER a.v < c.v",
    # an uncorrelated absence beside comparisons the hash join would take without it
    "A AS a ; !B ; C AS c FILTER a.v < c.v",
    "A AS a ; !(B AS b FILTER b.v > 1) ; C AS c FILTER a.id = c.v WITHIN 4 EVENTS",
])
@given(events=streams(min_size=3, max_size=9))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_absence_beside_predicates_that_do_not_become_partition_by_equals_reference(
        text, events):
    """Once refused ('needs them to become PARTITION BY'): an absence, between or
    trailing, with predicates between events that stay predicates."""
    from cer_cli.engine.driver import run_matches

    query = parse(text)
    check_query(query, schema_of(events))
    ex = plan(query).executor()
    got = list(run_matches(ex, events_frame(events)))
    want = (reference.trailing_matches(query, events) if query.trailing is not None
            else reference.reference_matches(query, events))
    reference.assert_same_matches(got, want)


@pytest.mark.parametrize("text", [
    "SELECT * WHERE A AS a ; !(B AS b FILTER b.id = a.id AND b.v > 0) ; C PARTITION BY id",
    "SELECT * WHERE A AS a ; !(B AS b FILTER b.id = a.id) ; C AS c FILTER a.id = c.id",
    "SELECT * WHERE A AS a ; !(B AS b FILTER b.id = c.id) ; C AS c FILTER a.id = c.id",
    "SELECT * WHERE A AS a ; !(B AS b FILTER b.id = a.id) PARTITION BY id WITHIN 2 EVENTS",
])
def test_correlated_absence_by_partition_equals_reference(text):
    events = [{"type": t, "stream": "S", "time": i, "ts": i, "v": i % 2, "id": k}
              for i, (t, k) in enumerate(zip("ABCABCACBC", [1, 2, 1, 2, 1, 2, 1, 1, 1, 2],
                                             strict=True))]
    got = _run(text, events)
    q = plan(parse(text))
    assert q.rewritten.passes[0].changed and "PARTITION BY key" in q.rewritten.passes[0].note
    assert got or "WITHIN" in text


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
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_absence_equals_reference(query, events):
    got = list(plan(query).run(events_frame(events)))
    if query.limit is None:
        reference.assert_same_matches(got, reference.reference_matches(query, events))
    else:
        reference.check_limited(got, query, events)


# --------------------------------------------------------------------------- trailing absence


def _timed(types: str, times: list[int], ids: list[int] | None = None) -> list[dict]:
    return [{"type": t, "stream": "S", "time": s * 1_000_000_000, "ts": s, "v": 0,
             "id": 0 if ids is None else ids[i]}
            for i, (t, s) in enumerate(zip(types, times, strict=True))]


@pytest.mark.parametrize("text", [
    "A ; !B WITHIN 3 EVENTS",
    "SELECT * WHERE (A OR C) ; !(B AS b FILTER b.v > 1) WITHIN 30 minutes",
    "SELECT * WHERE (A ; !B ; C) ; !D PARTITION BY [id] WITHIN 2 EVENTS",
])
def test_trailing_absence_prints_and_parses_back(text):
    q = parse(text)
    assert q.trailing is not None
    assert parse(to_text(q)) == q


@pytest.mark.parametrize("text, column, words", [
    ("A ; !B", 3, "needs a WITHIN window"),
    ("A ; C ; !B\nPARTITION BY id", 7, "needs a WITHIN window"),
    ("A ; !B WITHIN 3 [ts]", 15, "needs the log's time column, and 'ts' is not it"),
    ("A ; !B WITHIN 3 EVENTS CONSUME BY ANY", 3, "CONSUME BY ANY"),
])
def test_misused_trailing_absence_is_refused_at_its_position(text, column, words):
    with pytest.raises(QueryError) as e:
        check_query(parse(text), schema_of(_events("ABC")))
    err = e.value.with_source(text)
    assert words in err.message
    assert err.column == column, (err.line, err.column)


def test_trailing_absence_reports_at_the_first_event_past_the_deadline():
    # deadline of A0 is 0 + 5 s; B at 6 s is too late to block it; C at 6 s reports it
    got = _run("A ; !B WITHIN 5 seconds", _timed("ACBC", [0, 2, 6, 6]))
    assert [(m.start, m.end, m.events) for m in got] == [(0, 2, ((0, ("A",)),))]
    # a B at the deadline (5 s, inclusive) blocks it
    assert _run("A ; !B WITHIN 5 seconds", _timed("ACBC", [0, 2, 5, 6])) == []


def test_trailing_absence_without_an_event_past_the_deadline_is_open():
    events = _timed("AC", [0, 2])
    q = parse("A ; !B WITHIN 5 seconds")
    assert list(plan(q).run(events_frame(events))) == []
    ex = plan(q).executor(open_ends=True)
    from cer_cli.engine.driver import run_matches

    got = list(run_matches(ex, events_frame(events)))
    want = reference.trailing_matches(q, events, open_ends=True)
    reference.assert_same_matches(got, want)
    assert [(m.start, m.end) for m in got] == [(0, 2)]  # end 2: one past the last position


def test_trailing_absence_is_per_partition():
    # A0 (id 1): the B of id 2 does not block it; it is reported at id 1's C at 9 s
    events = _timed("ABCC", [0, 1, 2, 9], [1, 2, 2, 1])
    got = _run("SELECT * WHERE A ; !B PARTITION BY id WITHIN 3 seconds", events)
    assert [(m.start, m.end, m.partition) for m in got] == [(0, 3, (1,))]


def test_trailing_absence_over_frames_equals_one_frame():
    events = _timed("ABACAABCAC", [0, 1, 1, 2, 4, 5, 5, 7, 9, 12])
    q = parse("A ; !B WITHIN 2 seconds")
    frame = events_frame(events)
    whole = list(plan(q).run(frame))
    pieces = list(plan(q).run([frame.slice(i, 3) for i in range(0, frame.height, 3)]))
    assert whole == pieces
    reference.assert_same_matches(whole, reference.reference_matches(q, events))


@st.composite
def _trailing_queries(draw):
    q = draw(queries(formulas(max_depth=2, with_absent=True), consume=False, limit=False))
    window = q.within if q.within is not None and not isinstance(q.within, ast.AttributeWindow) \
        else ast.EventsWindow(draw(st.integers(0, 4)))
    return dataclasses.replace(q, trailing=draw(absent_atoms()), within=window)


@given(_trailing_queries(), streams(max_size=9), st.booleans())
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_trailing_absence_equals_reference(query, events, open_ends):
    from cer_cli.engine.driver import run_matches

    ex = plan(query).executor(open_ends=open_ends)
    got = list(run_matches(ex, events_frame(events)))
    want = reference.trailing_matches(query, events, open_ends=open_ends)
    reference.assert_same_matches(got, want)
    assert [m.end for m in got] == sorted(m.end for m in got)  # in order of the reporting event


@st.composite
def _correlated_queries(draw, trailing: bool):
    """``φ1 ; !(T AS n FILTER n.id = a.id [AND unary]) ; φ2`` (or trailing) with ``a`` bound
    once by φ1 or φ2, under PARTITION BY id, around random formulas."""
    a = ast.As(ast.EventType(draw(st.sampled_from("ABC"))), "a")
    small = formulas(max_depth=2)
    left = draw(st.one_of(st.just(a), small.map(lambda f: ast.Seq(f, a)), small))
    pred = ast.Compare("=", ast.AttrRef("n", "id"), ast.AttrRef("a", "id"))
    if draw(st.booleans()):
        pred = ast.And(pred, ast.Compare(">", ast.AttrRef("n", "v"), ast.Literal(draw(st.integers(0, 2)))))
    psi = ast.Filter(ast.As(ast.EventType(draw(st.sampled_from("ABC"))), "n"), pred)
    base = draw(queries(st.just(left), select=not trailing, consume=False, limit=False,
                        partition=False))
    if trailing:
        assume(left != a and isinstance(left, ast.Seq) and left.right == a or left == a)
        window = base.within if isinstance(base.within, ast.EventsWindow | ast.DurationWindow) \
            else ast.EventsWindow(draw(st.integers(0, 3)))
        return dataclasses.replace(base, trailing=psi, within=window, partition_by=(("id",),))
    right = draw(st.one_of(st.sampled_from("ABC").map(ast.EventType), small))
    if left != a and not (isinstance(left, ast.Seq) and left.right == a):
        right = ast.Seq(a, right)
    return dataclasses.replace(base, formula=ast.Seq(left, right, absent=psi),
                               partition_by=(("id",),))


@pytest.mark.parametrize("trailing", [False, True])
@given(data=st.data(), events=streams(min_size=3, max_size=9))
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_correlated_absence_equals_reference(trailing, data, events):
    query = data.draw(_correlated_queries(trailing))
    try:
        check_query(query, schema_of(events))
    except QueryError:
        assume(False)  # e.g. 'a' defined on both sides
    from cer_cli.engine.driver import run_matches

    ex = plan(query).executor()
    got = list(run_matches(ex, events_frame(events)))
    if trailing:
        want = reference.trailing_matches(query, events)
    else:
        want = reference.reference_matches(query, events)
    reference.assert_same_matches(got, want)


# --------------------------------------------------------------------------- general correlated ψ


@st.composite
def _correlated_psi(draw):
    """``T AS n FILTER n.x op a.x [AND n.v > k]``, op one of =, !=, <, on ``v`` or ``id``."""
    attr = draw(st.sampled_from(("v", "id")))
    op = draw(st.sampled_from(("=", "!=", "<")))
    sides = [ast.AttrRef("n", attr), ast.AttrRef("a", attr)]
    if draw(st.booleans()):
        sides.reverse()
    pred = ast.Compare(op, *sides)
    if draw(st.booleans()):
        pred = ast.And(pred, ast.Compare(">", ast.AttrRef("n", "v"),
                                         ast.Literal(draw(st.integers(0, 1)))))
    return ast.Filter(ast.As(ast.EventType(draw(st.sampled_from("ABC"))), "n"), pred)


@st.composite
def _general_correlated(draw):
    """``φ1 ; !(T AS n FILTER n.x op a.x [AND n.v > k]) ; φ2`` with ``a`` bound once by φ1
    or φ2, op one of =, !=, <, on ``v`` or ``id``, with or without PARTITION BY id, WITHIN,
    strategies, CONSUME BY and LIMIT: the post-filter's absence check (bisect or scan)."""
    a = ast.As(ast.EventType(draw(st.sampled_from("ABC"))), "a")
    small = formulas(max_depth=2)
    # mostly single events around the gap, so that random streams often have a ψ in it
    left = draw(st.one_of(st.just(a), st.just(a), small.map(lambda f: ast.Seq(f, a)), small))
    psi = draw(_correlated_psi())
    base = draw(queries(st.just(left), from_streams=False))
    right = draw(st.one_of(st.sampled_from("ABC").map(ast.EventType),
                           st.sampled_from("ABC").map(ast.EventType), small))
    if left != a and not (isinstance(left, ast.Seq) and left.right == a):
        right = ast.Seq(a, right)
    return dataclasses.replace(base, formula=ast.Seq(left, right, absent=psi))


_BLOCKED = {"cases": 0, "blocked": 0}


@given(query=_general_correlated(), events=streams(min_size=4, max_size=10))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_general_correlated_absence_equals_reference(query, events):
    try:
        check_query(query, schema_of(events))
        compiled = plan(query)
    except QueryError:
        assume(False)  # e.g. 'a' defined on both sides, or a partition rewrite it refuses
    got = list(compiled.run(events_frame(events)))
    if query.limit is None:
        reference.assert_same_matches(got, reference.reference_matches(query, events))
    else:
        reference.check_limited(got, query, events)
    free = dataclasses.replace(query, formula=dataclasses.replace(query.formula, absent=None),
                               limit=None, strategy="ALL", consume="NONE")
    _BLOCKED["cases"] += 1
    if len(reference.reference_matches(free, events)) > len(
            reference.reference_matches(dataclasses.replace(free, formula=query.formula), events)):
        _BLOCKED["blocked"] += 1


def test_general_correlated_cases_lose_matches_to_psi():
    """The property test above exercises blocking: ψ removes matches in some of its cases
    (typically 3-5%; test_issue_example_blocks_only_the_same_user pins =, != and <). The
    bound is half a percent: a run of random examples (without ``CI``) once blocked 3 of
    400, under the former 1%."""
    if _BLOCKED["cases"] == 0:
        test_general_correlated_absence_equals_reference()
    assert _BLOCKED["blocked"] >= max(2, _BLOCKED["cases"] // 200), _BLOCKED


@pytest.mark.parametrize("text, method", [
    ("A AS a ; !(B AS b FILTER b.user = a.user) ; C", "bisect"),
    ("A AS a ; !(B AS b FILTER b.user = c.user + 0) ; C AS c", "bisect"),
    ("A AS a ; !(B AS b FILTER b.user != a.user) ; C", "scan"),
    ("A AS a ; !(B AS b FILTER a.user < b.user AND b.v > 0) ; C", "scan"),
])
def test_issue_example_blocks_only_the_same_user(text, method):
    """A0(u1) B1(u2) C2(u1) A3(u1) B4(u1) C5(u1): checked by hand."""
    users = [1, 2, 1, 1, 1, 1]
    events = [{"type": t, "stream": "S", "time": i, "ts": i, "v": 1, "id": 0, "user": u}
              for i, (t, u) in enumerate(zip("ABCABC", users, strict=True))]
    got = sorted((m.start, m.end) for m in _run(text, events))
    want = {"A AS a ; !(B AS b FILTER b.user = a.user) ; C": [(0, 2)],
            "A AS a ; !(B AS b FILTER b.user = c.user + 0) ; C AS c": [(0, 2)],
            "A AS a ; !(B AS b FILTER b.user != a.user) ; C": [(3, 5)],
            "A AS a ; !(B AS b FILTER a.user < b.user AND b.v > 0) ; C": [(3, 5)]}[text]
    assert got == want
    m = plan(parse(text)).correlation.predicates[-1]
    assert m.method == "post-filter" and method in m.how and "gap1.left" in m.reason


@pytest.mark.parametrize("text", [
    # φ1 ends with a NOT(…) event (unmarked: the hidden mark alone reports nothing)
    "SELECT * WHERE (A AS a : NOT(C)) ; !(B AS b FILTER b.v < a.v) ; C WITHIN 5 EVENTS",
    # '+' at the end of φ1 and at the start of φ2: only its last / first iteration bounds
    "SELECT * WHERE A AS a ; B+ ; !(C AS n FILTER n.v != a.v) ; (A OR B)+ WITHIN 5 EVENTS",
    # OR on both sides, a nested sequence, and two correlated gaps
    "SELECT * WHERE (A AS a ; (B OR C)) ; !(B AS n FILTER n.v = a.v) ; (C ; A) ; "
    "!(C AS m FILTER m.v > a.v) ; B WITHIN 6 EVENTS",
    # the gap inside one branch of an OR: the other branch's matches are not checked
    "SELECT * WHERE (A AS a ; !(B AS n FILTER n.id = a.id) ; C) OR (A ; B) WITHIN 4 EVENTS",
    # right variable, SELECT dropping it, a strategy, LIMIT and CONSUME BY
    "SELECT NEXT a WHERE A AS a ; !(B AS n FILTER n.v = c.v) ; C AS c WITHIN 4 EVENTS "
    "CONSUME BY ANY",
    "SELECT * WHERE A AS a ; !(B AS n FILTER n.v = c.v) ; C AS c PARTITION BY id "
    "WITHIN 4 EVENTS LIMIT 1",
])
@given(events=streams(min_size=4, max_size=10))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_correlated_gap_bounds_are_exact_around_plus_or_and_nesting(text, events):
    query = parse(text)
    check_query(query, schema_of(events))
    got = list(plan(query).run(events_frame(events)))
    if query.limit is None:
        reference.assert_same_matches(got, reference.reference_matches(query, events))
    else:
        reference.check_limited(got, query, events)
    assert not any(v.startswith("gap") for m in got for _, vs in m.events for v in vs)


@pytest.mark.parametrize("text", [
    "A AS a ; !(B AS b FILTER b.u = a.u) ; C WITHIN 6 EVENTS",  # strings, bisect
    "A AS a ; !(B AS b FILTER b.f = a.v) ; C WITHIN 6 EVENTS",  # float against int, bisect
    "A AS a ; !(B AS b FILTER b.u != c.u) ; C AS c PARTITION BY id WITHIN 6 EVENTS",  # scan
])
def test_correlated_absence_over_frames_equals_one_frame_and_the_reference(text):
    """The post-filter's retained events span frames: feeding three slices gives the matches
    of the whole log, which are the reference's."""
    import random

    rng = random.Random(1)
    for _ in range(20):
        events = [{"type": rng.choice("ABC"), "stream": "S", "time": i, "ts": i,
                   "v": rng.randint(0, 2), "f": float(rng.randint(0, 2)), "id": rng.randint(0, 1),
                   "u": rng.choice("xy")} for i in range(14)]
        query = parse(text)
        check_query(query, schema_of(events))
        compiled = plan(query)
        whole = list(compiled.run(events_frame(events)))
        reference.assert_same_matches(whole, reference.reference_matches(query, events))
        ex, frame = compiled.executor(), events_frame(events)
        pieces = [m for a, b in ((0, 5), (5, 9), (9, 14)) for m in ex.run(frame.slice(a, b - a))]
        assert sorted(m.key() for m in pieces) == sorted(m.key() for m in whole)


# --------------------------------------------------------------------------- trailing correlated ψ


@st.composite
def _trailing_correlated(draw):
    """``φ ; !(T AS n FILTER n.x op a.x [AND n.v > k]) WITHIN W`` with ``a`` bound once by φ,
    op one of =, !=, <, on ``v`` or ``id``, with or without PARTITION BY id (which implies
    ``n.id = a.id``, so the rest is checked by ``engine.absence``), events or time windows,
    strategies: SELECT * (the reference reads μ from the reported events)."""
    a = ast.As(ast.EventType(draw(st.sampled_from("ABC"))), "a")
    small = formulas(max_depth=2)
    phi = draw(st.one_of(st.just(a), st.just(a), small.map(lambda f: ast.Seq(f, a)),
                         small.map(lambda f: ast.Seq(a, f))))
    psi = draw(_correlated_psi())
    base = draw(queries(st.just(phi), select=False, from_streams=False, consume=False,
                        limit=False, window=False))
    window = draw(st.one_of(
        st.builds(ast.EventsWindow, st.integers(0, 3)),
        st.builds(ast.DurationWindow, st.just(((1, "second"),))),
        st.builds(ast.DurationWindow, st.just(((2, "second"),)))))
    return dataclasses.replace(base, trailing=psi, within=window)


_TRAILING = {"cases": 0, "blocked": 0, "bisect": 0, "scan": 0}


@given(query=_trailing_correlated(), events=streams(min_size=3, max_size=10),
       cuts=st.lists(st.integers(1, 9), max_size=3), open_ends=st.booleans())
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_trailing_correlated_absence_equals_reference(query, events, cuts, open_ends):
    """The engine decides each waiting match when its deadline passes, from the events it
    kept (over several frames: the cuts), and agrees with the reference; ``--open-absence
    report``'s matches too."""
    from cer_cli.engine.driver import run_matches

    try:
        check_query(query, schema_of(events))
        compiled = plan(query)
    except QueryError:
        assume(False)  # e.g. 'a' defined twice
    ex, frame = compiled.executor(open_ends=open_ends), events_frame(events)
    bounds = [0, *sorted({c for c in cuts if c < frame.height}), frame.height]
    got = list(run_matches(ex, [frame.slice(lo, hi - lo)
                                for lo, hi in zip(bounds, bounds[1:], strict=False)]))
    want = reference.trailing_matches(query, events, open_ends=open_ends)
    reference.assert_same_matches(got, want)
    assert [m.end for m in got] == sorted(m.end for m in got)
    site = compiled.rewritten.trailing
    if site is not None:
        _TRAILING[site.method] += 1
    _TRAILING["cases"] += 1
    free = dataclasses.replace(query, trailing=ast.Filter(query.trailing.formula.formula
                                                          if isinstance(query.trailing.formula, ast.As)
                                                          else query.trailing, ast.BoolConst(False)))
    if len(reference.trailing_matches(free, events, open_ends=True)) > len(
            reference.trailing_matches(query, events, open_ends=True)):
        _TRAILING["blocked"] += 1


def test_trailing_correlated_cases_lose_matches_to_psi():
    """The property test above exercises blocking by a correlated ψ (and both methods)."""
    if _TRAILING["cases"] == 0:
        test_trailing_correlated_absence_equals_reference()
    assert _TRAILING["blocked"] >= max(4, _TRAILING["cases"] // 100), _TRAILING
    assert _TRAILING["bisect"] and _TRAILING["scan"], _TRAILING


# --------------------------------------------------------------------------- the scan in bounded groups


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 30)), max_size=20,
                unique_by=lambda e: e[1]),
       st.lists(st.tuples(st.integers(0, 3), st.integers(-1, 31), st.integers(-1, 31)),
                max_size=10))
def test_gap_slices_are_the_events_strictly_inside_each_gap(events, gaps):
    """Each gap (partition, l, r) bisects to exactly its partition's events with l < pos < r."""
    events = sorted(events)
    part = np.array([p for p, _ in events], dtype=np.int64)
    pos = np.array([x for _, x in events], dtype=np.int64)
    lo, hi = post_filter.gap_slices(part, pos, *(np.array(c, dtype=np.int64).reshape(-1)
                                                 for c in zip(*gaps, strict=True))) \
        if gaps else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    for (p, left, right), a, b in zip(gaps, lo, hi, strict=True):
        assert a <= b
        assert list(range(a, b)) == [i for i, (q, x) in enumerate(events)
                                     if q == p and left < x < right]


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 4)), max_size=8),
       st.integers(1, 6))
def test_gap_pairs_are_every_pair_once_in_groups_of_at_most_the_cap(slices, cap):
    lo = np.array([a for a, _ in slices], dtype=np.int64)
    hi = lo + np.array([n for _, n in slices], dtype=np.int64)
    groups = list(post_filter.gap_pairs(lo, hi, cap))
    assert all(0 < len(g) <= cap and len(g) == len(e) for g, e in groups)
    got = [(int(g), int(e)) for gs, es in groups for g, e in zip(gs, es, strict=True)]
    assert got == [(i, j) for i, (a, b) in enumerate(zip(lo, hi, strict=True)) for j in range(a, b)]


@given(query=st.one_of(_general_correlated(), _trailing_correlated()),
       events=streams(min_size=4, max_size=12))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_scan_in_small_groups_and_slices_equals_the_reference(query, events):
    """The scan tests its (candidate, ψ event) pairs ``SCAN_PAIRS`` at a time, and a trailing
    absence takes ``SLICE_ROWS`` events at a time: with 2 and 3, every candidate's pairs
    and every frame are cut somewhere, and the matches stay the reference's."""
    try:
        check_query(query, schema_of(events))
        compiled = plan(query)
    except QueryError:
        assume(False)  # e.g. 'a' defined twice
    with mock.patch.object(post_filter, "SCAN_PAIRS", 2), mock.patch.object(absence, "SLICE_ROWS", 3):
        got = list(compiled.run(events_frame(events)))
    if query.trailing is not None:
        reference.assert_same_matches(got, reference.trailing_matches(query, events))
    elif query.limit is None:
        reference.assert_same_matches(got, reference.reference_matches(query, events))
    else:
        reference.check_limited(got, query, events)


@pytest.mark.parametrize("op, want", [("=", [(0, 3)]), ("!=", [(3, 6)]), ("<", [(0, 3), (3, 6)])])
def test_trailing_correlated_blocks_only_by_the_comparison(op, want):
    """A0(u1) B1(u2) C2(u1) A3(u1) B4(u1) C5(u1) C6(u2), WITHIN 2 EVENTS, hand-checked: with
    =, B4 blocks A3 and B1 (another user) does not block A0; with !=, the reverse; with
    b.user < a.user neither blocks."""
    users = [1, 2, 1, 1, 1, 1, 2]
    events = [{"type": t, "stream": "S", "time": i, "ts": i, "v": 0, "id": 0, "user": u}
              for i, (t, u) in enumerate(zip("ABCABCC", users, strict=True))]
    text = f"A AS a ; !(B AS b FILTER b.user {op} a.user) WITHIN 2 EVENTS"
    q = parse(text)
    check_query(q, schema_of(events))
    got = list(plan(q).run(events_frame(events)))
    reference.assert_same_matches(got, reference.trailing_matches(q, events))
    assert [(m.start, m.end) for m in got] == want


def test_trailing_correlated_memory_is_the_last_window():
    """The kept events are pruned to each partition's last window."""
    events = [{"type": "AB"[i % 2], "stream": "S", "time": i, "ts": i, "v": i % 3, "id": 0}
              for i in range(200)]
    q = parse("A AS a ; !(B AS b FILTER b.v = a.v) WITHIN 4 EVENTS")
    check_query(q, schema_of(events))
    ex, frame = plan(q).executor(), events_frame(events)
    got = [m for i in range(0, 200, 20) for m in ex.run(frame.slice(i, 20))]
    reference.assert_same_matches(got, reference.trailing_matches(q, events))
    assert ex._rows.height <= 6


# --------------------------------------------------------------------------- WITHIN n [time]


def test_trailing_absence_within_another_attribute_hints_real_options():
    """``WITHIN n [attr]`` with a trailing absence needs the log's time column; the hint
    names options that exist (it named ``--time COLUMN``)."""
    events = _events("ABC")
    q = parse("A ; !B WITHIN 3 [ts]")
    with pytest.raises(QueryError) as e:
        check_query(q, schema_of(events))
    assert e.value.hints == ["use WITHIN n [time], a duration, or WITHIN n EVENTS"]
    untimed = dataclasses.replace(schema_of(events), time_column=None)
    with pytest.raises(QueryError) as e:
        check_query(q, untimed)
    assert e.value.hints == ["make it the time column: --time-column ts"]
    check_query(q, dataclasses.replace(schema_of(events), time_column="ts"))  # accepted


def _time_is_ts(events: list[dict]) -> list[dict]:
    """The events with ``ts`` as their time: a log whose time column is ``ts``."""
    return [{**e, "time": e["ts"]} for e in events]


@given(_trailing_queries(), streams(max_size=9), st.integers(0, 3), st.booleans())
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_trailing_absence_within_the_time_column_equals_reference(query, events, n, open_ends):
    from cer_cli.engine.driver import run_matches

    events = _time_is_ts(events)
    query = dataclasses.replace(query, within=ast.AttributeWindow(n, "ts"))
    ex = plan(query).executor(open_ends=open_ends)
    got = list(run_matches(ex, events_frame(events)))
    want = reference.trailing_matches(query, events, open_ends=open_ends)
    reference.assert_same_matches(got, want)


def test_trailing_absence_within_the_time_column_by_hand():
    # A@1: deadline 3, the B@3 blocks it; A@6: deadline 8, reported at the C@9 (position 6)
    events = _time_is_ts([{"type": t, "stream": "S", "ts": s, "v": 0, "id": 0}
                          for t, s in zip("ACBCACCB", [1, 2, 3, 5, 6, 7, 9, 10], strict=True)])
    query = parse("A ; !B WITHIN 2 [ts]")
    check_query(query, dataclasses.replace(schema_of(events), time_column="ts"))
    got = list(plan(query).run(events_frame(events)))
    assert [(m.start, m.end) for m in got] == [(4, 6)]
    reference.assert_same_matches(got, reference.trailing_matches(query, events))


def test_trailing_absence_within_an_attribute_that_is_not_the_time_is_refused_at_run_time():
    """Compiled without a schema, the executor sees that ``ts`` is not the events' time."""
    events = [{**e, "time": 10 * e["ts"]} for e in _events("ACBC")]
    with pytest.raises(QueryError, match="'ts' is not it") as e:
        list(plan(parse("A ; !B WITHIN 2 [ts]")).run(events_frame(events)))
    assert "--time-column ts" in e.value.hints[0]


def test_cli_trailing_absence_within_the_time_column(tmp_path):
    from click.testing import CliRunner

    from cer_cli.cli import cli

    log = tmp_path / "t.csv"
    log.write_text("type,time,v\nA,1,0\nC,2,0\nB,3,0\nC,5,0\nA,6,0\nC,7,0\nC,9,0\nB,10,0\n")
    run = lambda *a: CliRunner().invoke(cli, ["match", *a, str(log)], env={"NO_COLOR": "1"})  # noqa: E731
    ok = run("-e", "A ; !B WITHIN 2 [time]", "--format", "csv")
    assert ok.exit_code == 0, ok.output
    rows = [line.split(",")[:3] for line in ok.stdout.splitlines()[1:]]
    assert rows == [["0", "4", "6"]]
    refused = run("-e", "A ; !B WITHIN 2 [v]")
    assert refused.exit_code == 2 and "--time COLUMN" not in refused.output
    assert "hint: use WITHIN n [time], a duration, or WITHIN n EVENTS" in refused.output
