"""Next match with predicates between events (issue #26, part 2): a sequence of single
events with an absence in every gap, run by the next-match scan (``engine.next_match``),
against the brute-force reference (tests/reference.py defines absence)."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cer_cli.compiler.correlation import AbsenceSite, Site
from cer_cli.compiler.next_match import plan_next_match
from cer_cli.engine import jit
from cer_cli.engine import next_match as N
from cer_cli.engine.driver import run_matches
from cer_cli.events import Match
from cer_cli.plan import Method, plan
from cer_cli.query.checks import check_query
from cer_cli.query.errors import QueryError
from cer_cli.query.parser import parse
from cer_cli.query.printer import to_text
from tests import reference
from tests.builders import events_frame
from tests.gen_formulas import schema_of, streams

OPS = ("<", "<=", ">", ">=", "=", "!=")


@st.composite
def chains(draw, max_steps: int = 4, next_form: float = 0.7, shorthand: bool = False):
    """``E0 AS x0 ; !ψ0 ; E1 AS x1 ; … FILTER <comparisons>`` as text: comparisons of each
    step with an earlier one (mostly the one before), and each gap's ψ mostly the next
    step's own condition (the next-match form), else another type, filter or comparison.
    ``shorthand``: every ψ in the next-match form, and the text written with ';>' too:
    ``(text with ';>', text with the absences)``."""
    n = draw(st.integers(2, max_steps))
    types = [draw(st.sampled_from("ABC")) for _ in range(n)]
    unary = [draw(st.sampled_from(["", "", "", "v > 0", "id != 1"])) for _ in range(n)]
    joins: list[list[tuple[str, str, str, int]]] = [[]]
    for k in range(1, n):
        here = []
        for _ in range(draw(st.integers(0, 2))):
            attr = draw(st.sampled_from(("v", "v", "id")))
            j = k - 1 if draw(st.integers(0, 3)) else draw(st.integers(0, k - 1))
            here.append((attr, draw(st.sampled_from(OPS)), attr, j))
        joins.append(here)
    text, conds = f"{types[0]} AS x0", []
    short = text
    if unary[0]:
        conds.append(f"x0.{unary[0]}")
    for k in range(1, n):
        def cond(var: str, k: int = k) -> list[str]:
            out = [f"{var}.{unary[k]}"] if unary[k] else []
            return out + [f"{var}.{a} {op} x{j}.{b}" for a, op, b, j in joins[k]]

        if shorthand or draw(st.floats(0, 1)) < next_form:  # floats(0, 1) may draw 1.0
            psi_type, psi_conds = types[k], cond(f"n{k}")
        else:
            psi_type = draw(st.sampled_from("ABC"))
            psi_conds = draw(st.sampled_from([[], [f"n{k}.v > x{k - 1}.v"],
                                              [f"n{k}.id = x0.id", f"n{k}.v != 0"],
                                              [f"n{k}.v <= x{k - 1}.v + 1"]]))
        psi = (f"({psi_type} AS n{k} FILTER {' AND '.join(psi_conds)})" if psi_conds
               else psi_type)
        text += f" ; !{psi} ; {types[k]} AS x{k}"
        short += f" ;> {types[k]} AS x{k}"
        conds += cond(f"x{k}")
    if conds:
        text += " FILTER " + " AND ".join(conds)
        short += " FILTER " + " AND ".join(conds)
    select = draw(st.sampled_from(["", "", "SELECT * WHERE ", "SELECT x0 WHERE ",
                                   f"SELECT x0, x{n - 1} WHERE "]))
    tail = draw(st.sampled_from(["", " WITHIN 3 EVENTS", " WITHIN 5 EVENTS",
                                 " WITHIN 2 [ts]", " WITHIN 1 second"]))
    if draw(st.integers(0, 4)) == 0:
        select = select or "SELECT * WHERE "
        tail = " PARTITION BY id" + tail
    if draw(st.integers(0, 5)) == 0:
        select = select or "SELECT * WHERE "
        tail += " LIMIT 1"
    if shorthand:
        return select + short + tail, select + text + tail
    return select + text + tail


def _run(query, events, executor=None) -> list:
    ex = executor if executor is not None else plan(query).executor()
    return list(run_matches(ex, events_frame(events)))


def _check(query, events, got) -> None:
    if query.limit is None:
        reference.assert_same_matches(got, reference.reference_matches(query, events))
    else:
        reference.check_limited(got, query, events)


_USED = {"cases": 0, "scan": 0}


def _scan_equals_reference(text: str, events: list[dict]) -> None:
    query = parse(text)
    try:
        check_query(query, schema_of(events))
        compiled = plan(query)
    except QueryError:
        assume(False)  # e.g. equalities that become PARTITION BY without ψ on their key
    _USED["cases"] += 1
    if Method.NEXT_MATCH in compiled.correlation:
        _USED["scan"] += 1
    _check(query, events, _run(query, events))


@given(text=chains(), events=streams(min_size=2, max_size=10))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_next_match_with_correlation_equals_reference(text, events):
    _scan_equals_reference(text, events)


def test_the_property_test_runs_the_next_match_scan():
    """Many of the generated queries are in the scan's fragment (the others: a gap's ψ is
    not the next step's condition, the partition rewrite took every comparison, or none
    compares events)."""
    if _USED["cases"] == 0:
        test_next_match_with_correlation_equals_reference()
    assert _USED["scan"] >= _USED["cases"] // 4, _USED


@pytest.mark.slow
@given(text=chains(max_steps=5), events=streams(min_size=8, max_size=24))
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_next_match_with_correlation_equals_reference_on_longer_logs(text, events):
    _scan_equals_reference(text, events)


@given(text=chains(), events=streams(min_size=2, max_size=12), data=st.data())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_slices_and_budget_do_not_change_the_matches(text, events, data):
    """Runs wait between slices (a partition without events in a slice, a gap still open)
    and ``_scan`` returns every ``budget`` scanned events: the matches are those of one
    call over the whole log. Also for gaps whose ψ is not the next step's condition (a run
    then takes several events there), which the planner leaves to the post-filter: equal to
    the reference too."""
    assume(_slices_agree(text, events, data.draw(st.integers(1, 4)),
                         data.draw(st.integers(1, 3))) is not None)


def test_limit_keeps_the_same_match_among_equal_starts_whatever_the_slices():
    """Two matches end at the same event with the same start; LIMIT 1 keeps one of them,
    which must not depend on the slices or the budget (it did: the scan's order of such
    matches followed the slicing, and LIMIT keeps the first of equal starts)."""
    events = [{"type": t, "stream": "S1", "time": 0, "ts": 0, "v": 0, "id": 0}
              for t in "AAAAAAAAABBA"]
    text = ("SELECT * WHERE A AS x0 ; !(A AS n1 FILTER n1.v > x0.v) ; B AS x1 ; !A ; A AS x2"
            " PARTITION BY id LIMIT 1")
    for rows, budget in ((2, 1), (1, 1), (3, 2), (4, 3)):
        assert len(_slices_agree(text, events, rows, budget)) == 1


def _slices_agree(text: str, events: list[dict], rows: int, budget: int) -> list | None:
    """The scan's matches over ``events``, checked equal with ``rows`` per slice and a
    ``budget``, and to the reference where the scan takes several events per gap; None
    when the query is not the scan's."""
    query = parse(text)
    try:
        check_query(query, schema_of(events))
        compiled = plan(query)
    except QueryError:
        return None
    rw = compiled.rewritten
    nm, _ = plan_next_match(rw.query, rw.formula, tuple(s for s in rw.post_filters
                                                        if isinstance(s, Site)),
                            tuple(a for a in rw.post_filters if isinstance(a, AbsenceSite)),
                            any_gap=True)
    if nm is None:
        return None
    q = compiled.query

    def scan(rows: int, budget: int | None) -> list:
        with mock.patch.object(N, "SLICE_ROWS", rows):
            ex = N.NextMatchScan(nm, window=q.within, partition_by=compiled.partition_by,
                                 limit=q.limit, streams=q.streams, budget=budget)
            return [(m.start, m.end, m.events, m.partition) for m in _run(query, events, ex)]

    whole = scan(N.SLICE_ROWS, None)
    assert scan(rows, budget) == whole
    if not nm.deterministic:  # runs that take several events per gap: still the absence
        got = [Match(s, e, ev, p) for s, e, ev, p in whole]
        _check(query, events, got)
    return whole


ISSUE = ("A AS a ; !(B AS b0 FILTER b0.val > a.val) ; B AS b ; !(C AS c0 FILTER c0.val > b.val)"
         " ; C AS c FILTER b.val > a.val AND c.val > b.val WITHIN 100 EVENTS")


def test_issue_example_by_hand():
    """A0(5) B1(3) A2(1) B3(7) C4(6) C5(9) B6(8) C7(9): a0 skips B1 (3 is not above 5) and
    takes B3, the first B above 5; B3 takes C5, the first C above 7 (C4 is 6). a2 takes B3
    too (the first B after it), then C5. The uncorrelated next match (A ; !B ; B ; !C ; C)
    would pair a0 with B1 and drop it at the filter."""
    kinds, vals = "ABABCCBC", [5, 3, 1, 7, 6, 9, 8, 9]
    events = [{"type": t, "stream": "S", "time": i, "val": v}
              for i, (t, v) in enumerate(zip(kinds, vals, strict=True))]
    query = parse(ISSUE)
    assert plan(query).correlation.methods == (Method.NEXT_MATCH,)
    got = _run(query, events)
    assert [(m.start, m.end, m.events) for m in got] == [
        (0, 5, ((0, ("A", "a")), (3, ("B", "b")), (5, ("C", "c")))),
        (2, 5, ((2, ("A", "a")), (3, ("B", "b")), (5, ("C", "c"))))]
    reference.assert_same_matches(got, reference.reference_matches(query, events))


def test_explain_names_the_next_match_scan():
    compiled = plan(parse(ISSUE))
    step = compiled.correlation.step(Method.NEXT_MATCH)
    assert "one per step" in step.detail and "window" in step.cost
    assert [p.method for p in compiled.correlation.predicates] == [Method.NEXT_MATCH] * 4
    assert "next-match scan" in compiled.executor().describe()


def test_without_a_window_the_run_is_refused_unless_allowed():
    compiled = plan(parse(ISSUE.replace(" WITHIN 100 EVENTS", "")))
    assert Method.NEXT_MATCH in compiled.correlation
    err = compiled.unbounded()
    assert err is not None and "no WITHIN" in err.message


# --------------------------------------------------------------------------- the ';>' shorthand


@given(texts=chains(shorthand=True), events=streams(min_size=2, max_size=10))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_followed_by_equals_the_reference_of_its_absence_form(texts, events):
    """``x0 ;> x1 ;> … FILTER f`` is the absence form written by hand (each ψ: the next
    step's type and the conjuncts of f on it and earlier steps), evaluated by the reference;
    cer runs the shorthand."""
    short, long = texts
    query, written = parse(short), parse(long)
    try:
        check_query(query, schema_of(events))
        compiled = plan(query)
    except QueryError:
        assume(False)
    got = _run(query, events)
    if query.limit is None:
        reference.assert_same_matches(got, reference.reference_matches(written, events))
    else:
        reference.check_limited(got, written, events)
    assert compiled.correlation.methods in ((Method.NEXT_MATCH,), (), (Method.PARTITION,))


def test_followed_by_expands_to_the_issue_example():
    short = ("A AS a ;> B AS b ;> C AS c FILTER b.val > a.val AND c.val > b.val"
             " WITHIN 100 EVENTS")
    assert parse(short) == parse(ISSUE)


@pytest.mark.parametrize("text, expanded", [
    ("A ;> B", "A ; !(B AS B0) ; B"),
    ("A ;> B ; C", "(A ; !(B AS B0) ; B) ; C"),
    ("A ; B ;> C", "(A ; B) ; !(C AS C0) ; C"),
    ("A AS a ;> (B AS b FILTER b.v > 1)", "A AS a ; !(B AS b0 FILTER b0.v > 1) ; (B AS b FILTER b.v > 1)"),
    # a condition reading a later variable filters the match but does not choose B
    ("A AS a ;> B AS b ; C AS c FILTER b.v > a.v AND c.v > b.v",
     "(A AS a ; !(B AS b0 FILTER b0.v > a.v) ; B AS b) ; C AS c FILTER b.v > a.v AND c.v > b.v"),
    # the fresh name avoids the query's own
    ("A AS b0 ;> B AS b FILTER b.v = b0.v", "A AS b0 ; !(B AS b1 FILTER b1.v = b0.v) ; B AS b"
     " FILTER b.v = b0.v"),
    ("S1>A AS a ;> S1>B FILTER B.v < a.v", "S1>A AS a ; !(S1>B AS B0 FILTER B0.v < a.v) ; S1>B"
     " FILTER B.v < a.v"),
])
def test_followed_by_expansion(text, expanded):
    assert parse(text) == parse(expanded)
    assert parse(to_text(parse(text))) == parse(text)


@pytest.mark.parametrize("text, column, words", [
    ("A ;> B+", 6, "one event after it"),
    ("A ;> (B ; C)", 6, "one event after it"),
    ("A ;> (B OR C)", 6, "one event after it"),
    ("X AS x ; (A ;> B AS b) FILTER b.v > x.v", 31, "bound before the left side"),
    ("A ;> !B ; C", 6, "after ':', ';>' or OR"),
    ("(A AS a)+ ;> B AS b FILTER b.v > a.v", 28, "one event of every match of the left side"),
    ("(A AS a OR C) ;> B AS b FILTER b.v > a.v", 32, "one event of every match"),
    ("A ; A ;> B AS b FILTER b.v > A.v", 24, "reads 'A'"),
    (";> B", 1, "expected a formula"),
])
def test_followed_by_mistakes_are_refused_at_their_position(text, column, words):
    with pytest.raises(QueryError) as e:
        parse(text)
    assert words in str(e.value)
    assert f":1:{column}:" in str(e.value)


def test_check_and_explain_show_the_expansion():
    from click.testing import CliRunner

    from cer_cli.cli import cli as main

    text = "A AS a ;> B AS b FILTER b.v > a.v WITHIN 5 EVENTS"
    out = CliRunner().invoke(main, ["check", "-e", text]).output
    assert "!((B AS b0) FILTER (b0.v > a.v))" in out
    out = CliRunner().invoke(main, ["explain", "-e", text]).output
    assert "!((B AS b0) FILTER (b0.v > a.v))" in out and "next-match scan" in out


@pytest.mark.parametrize("text", [
    "A AS a ;> B AS b FILTER b.v > a.v ; !C WITHIN 4 EVENTS",
    "A AS a ;> B AS b ;> C AS c FILTER b.v >= a.v AND c.id != b.id ; !(A AS n FILTER n.v = c.v)"
    " WITHIN 5 EVENTS",
    "SELECT * WHERE A AS a ;> B AS b FILTER b.v < a.v ; !(C AS n FILTER n.id = b.id)"
    " PARTITION BY id WITHIN 1 second",
])
@given(events=streams(min_size=3, max_size=10), open_ends=st.booleans())
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_next_match_before_a_trailing_absence_equals_reference(text, events, open_ends):
    """A trailing absence after a next-match sequence: the scan runs φ (its batches give
    the partition-local starts the deadline needs) and the wrapper waits for the deadline."""
    query = parse(text)
    check_query(query, schema_of(events))
    compiled = plan(query)
    assert Method.NEXT_MATCH in compiled.correlation
    ex = compiled.executor(open_ends=open_ends)
    got = list(run_matches(ex, events_frame(events)))
    reference.assert_same_matches(got, reference.trailing_matches(query, events,
                                                                  open_ends=open_ends))


@given(text=chains(), events=streams(min_size=2, max_size=12))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_compiled_scan_equals_the_reference(text, events):
    """The tests above run ``_scan`` as plain Python (their logs are small); ``CER_JIT=1``
    runs the numba-compiled one (compiled once, then cached)."""
    import os

    with mock.patch.dict(os.environ, {"CER_JIT": "1"}):
        if os.environ.get("NUMBA_DISABLE_JIT", "0") in ("", "0") and jit.HAVE_NUMBA:
            assert N._scanner(0) is not N._scan
        _scan_equals_reference(text, events)


@pytest.mark.parametrize("text", [
    "A AS a ;> B AS b ;> C AS c FILTER b.u = a.u AND c.u > b.u WITHIN 6 EVENTS",  # strings
    "A AS a ;> B AS b FILTER b.f > a.v WITHIN 5 EVENTS",  # float against int
    "A AS a ;> B AS b FILTER b.big != a.big AND b.u <= a.u PARTITION BY id WITHIN 6 EVENTS",
])
def test_values_that_float64_cannot_hold_compare_by_rank_across_slices(text):
    """Strings, and integers beyond 2^53, are compared by their ranks among the slice's and
    the waiting runs' values (recomputed per slice); floats against integers as floats.
    Three events per slice, so runs wait across slices with their raw values."""
    import random

    rng = random.Random(3)
    query = parse(text)
    for _ in range(25):
        events = [{"type": rng.choice("ABC"), "stream": "S", "time": i, "ts": i,
                   "v": rng.randint(0, 2), "f": rng.choice([0.5, 1.0, 1.5, float("nan")]),
                   "id": rng.randint(0, 1), "u": rng.choice("xyz"),
                   "big": 2**60 + rng.randint(0, 2)} for i in range(14)]
        compiled = plan(query)
        assert Method.NEXT_MATCH in compiled.correlation
        want = reference.reference_matches(query, events)
        with mock.patch.object(N, "SLICE_ROWS", 3):
            reference.assert_same_matches(_run(query, events), want)
        reference.assert_same_matches(_run(query, events), want)
