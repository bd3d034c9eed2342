"""Rewrite passes: text fixtures per pass (sqlglot-optimizer style: parse, apply the pass,
print, compare with the printed expectation), the examples of Foundations of CEP (§4–5:
phi1, phi6, Theorems 1 and 2) and a property test that rewriting never changes the matches
(reference evaluator)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings

from cer_cli.compiler.rewrite import RULES, rewrite
from cer_cli.compiler.rewrite.lift_outer_filters import lift_outer_filters
from cer_cli.compiler.rewrite.lp_normal_form import lp_normal_form
from cer_cli.compiler.rewrite.make_safe import is_safe, make_safe
from cer_cli.compiler.rewrite.simplify import satisfiable, simplify
from cer_cli.compiler.rewrite.split_filters import split_filters
from cer_cli.query import ast as A
from cer_cli.query.errors import QueryError
from cer_cli.query.parser import parse
from cer_cli.query.printer import to_text
from cer_cli.query.scope import atom_type, children, conjuncts, pred_vars
from tests.builders import H, T, cmp
from tests.gen_formulas import formulas, streams
from tests.reference import reference_matches

# --------------------------------------------------------------------------- text fixtures

#: (pass, formula in, formula out); ``None`` out: the pass proves the formula never matches.
FIXTURES = [
    # split_filters: a compound predicate mixing variables becomes separate filters
    (split_filters, "(T AS x ; H AS y) FILTER (x.tmp > 40 OR y.hum < 20)",
     "((T AS x ; H AS y) FILTER x.tmp > 40) OR ((T AS x ; H AS y) FILTER y.hum < 20)"),
    (split_filters, "(T AS x ; H AS y) FILTER (x.tmp > 40 AND y.hum < 20)",
     "((T AS x ; H AS y) FILTER x.tmp > 40) FILTER y.hum < 20"),
    # NOT over a mixed predicate: De Morgan first
    (split_filters, "(T AS x ; H AS y) FILTER NOT (x.tmp > 40 AND y.hum < 20)",
     "((T AS x ; H AS y) FILTER NOT x.tmp > 40) OR ((T AS x ; H AS y) FILTER NOT y.hum < 20)"),
    # one variable: the predicate stays whole
    (split_filters, "(T AS x ; H AS y) FILTER (x.tmp > 40 OR x.id = 0)",
     "(T AS x ; H AS y) FILTER (x.tmp > 40 OR x.id = 0)"),
    # x.id = z.id = 1 with z bound: the chain through the constant makes both unary
    (split_filters, "(H AS x ; H AS z) FILTER (x.id = z.id AND z.id = 1)",
     "((H AS x ; H AS z) FILTER x.id = 1) FILTER z.id = 1"),
    # make_safe (Theorem 1): a sequence defining a variable twice never matches
    (make_safe, "T AS x ; T AS x", None),
    (make_safe, "(T AS x OR H AS y) ; T AS x", "H AS y ; T AS x"),
    # re-definitions inside `+` are safe
    (make_safe, "(T AS x)+ ; (T AS x)+", "(T AS x)+ ; (T AS x)+"),
    # (T AS x OR H) FILTER x[...] ; T AS x: the H branch is unfiltered (for all over nothing)
    (make_safe, "((T AS x OR H) FILTER x.tmp > 1) ; T AS x", "H ; T AS x"),
    # lift_outer_filters (Theorem 2 / R2): a filter on an outer variable moves to its binder
    (lift_outer_filters, "T AS x ; (H AS y FILTER x.tmp > 40)+",
     "(T AS x FILTER x.tmp > 40) ; (H AS y)+"),
    (lift_outer_filters, "T AS x ; (H AS y FILTER x.tmp > 40)",
     "(T AS x FILTER x.tmp > 40) ; H AS y"),
    # lp_normal_form (R1): for-all filters move through +, OR and compound AS onto atoms
    (lp_normal_form, "(T AS x)+ FILTER x.v > 1", "(T AS x FILTER x.v > 1)+"),
    (lp_normal_form, "(T AS x OR H) FILTER x.v > 1", "(T AS x FILTER x.v > 1) OR H"),
    (lp_normal_form, "(T ; H) AS x FILTER x.v > 1",
     "((T FILTER T.v > 1) ; (H FILTER H.v > 1)) AS x"),
    (lp_normal_form, "(T AS x ; H AS y) FILTER x.tmp > 40",
     "(T AS x FILTER x.tmp > 40) ; H AS y"),
    # simplify: constants, FALSE branches, merged filter chains, duplicate disjuncts
    (simplify, "((T AS x FILTER x.a > 1) FILTER x.b < 2) OR (H AS y FILTER FALSE)",
     "T AS x FILTER x.a > 1 AND x.b < 2"),  # one event: one merged test, scopes kept
    (simplify, "(T AS x FILTER x.a > 1) FILTER x[b < 2 OR c > 1] OR x.d = 1",
     "T AS x FILTER x.a > 1 AND (x[b < 2 OR c > 1] OR x.d = 1)"),
    (simplify, "T AS x FILTER TRUE", "T AS x"),
    (simplify, "T AS x ; (H FILTER FALSE)", None),
    (simplify, "(T AS x FILTER (x.t >= 40 AND x.t < 40))+", None),
    (simplify, "T AS x OR T AS x", "T AS x"),
]


def _text(f: A.Formula | None) -> str | None:
    return None if f is None else to_text(f)


@pytest.mark.parametrize(
    "rule, text, expected", FIXTURES, ids=[f"{r.__name__}:{t}" for r, t, _ in FIXTURES]
)
def test_pass_fixture(rule, text, expected):
    out = rule(parse(text).formula)
    assert _text(out) == (None if expected is None else to_text(parse(expected).formula))


def test_every_pass_has_fixtures():
    assert {r.__name__ for r, _, _ in FIXTURES} == {r.__name__ for r in RULES}


# --------------------------------------------------------------------------- the papers' examples


def filters_on_atoms(f) -> bool:
    """LP-normal form: every single-variable filter sits directly on an atom."""
    if isinstance(f, A.Filter) and len(pred_vars(f.predicate)) == 1 and atom_type(f) is None:
        return False
    return all(filters_on_atoms(k) for k in children(f))


def test_phi1_becomes_lp_normal_form():
    phi1 = parse("(T AS x ; H AS y) FILTER (x.tmp > 40 AND y.hum <= 25 AND x.id = 0 "
                 "AND y.id = 0)").formula
    out, _, _ = rewrite(phi1)
    assert isinstance(out, A.Seq)
    left, right = out.left, out.right
    assert isinstance(left, A.Filter) and left.formula == A.As(T(), "x")
    assert set(conjuncts(left.predicate)) == {cmp("x", "tmp", ">", 40), cmp("x", "id", "=", 0)}
    assert isinstance(right, A.Filter) and right.formula == A.As(H(), "y")
    assert set(conjuncts(right.predicate)) == {cmp("y", "hum", "<=", 25), cmp("y", "id", "=", 0)}


def test_phi6_becomes_two_disjuncts():
    phi6 = parse("T AS x ; ((T AS y FILTER x.temp >= 40) OR (H AS y FILTER x.temp < 40))").formula
    out, _, _ = rewrite(phi6)
    expected = {
        to_text(parse("(T AS x FILTER x.temp >= 40) ; T AS y").formula),
        to_text(parse("(T AS x FILTER x.temp < 40) ; H AS y").formula),
    }
    assert isinstance(out, A.FOr) and {to_text(out.left), to_text(out.right)} == expected


def test_unbound_filter_variable_is_a_query_error():
    span = A.Span(3, 9)
    f = A.Filter(A.As(H(), "x"), A.Compare("<=", A.AttrRef("y", "tmp"), A.Literal(30), span=span))
    with pytest.raises(QueryError) as info:
        lift_outer_filters(f)
    assert info.value.span == span


def test_unsafe_sequence_is_unsatisfiable():
    f = parse("T AS x ; T AS x").formula
    assert not is_safe(f) and make_safe(f) is None
    out, _, warnings = rewrite(f)
    assert out is None and warnings


def test_make_safe_returns_safe_formulas_unchanged():
    g = parse("(T AS x)+ ; (T AS x)+").formula
    assert make_safe(g) is g


@pytest.mark.parametrize(
    "parts, expected",
    [
        ([(">=", 40), ("<", 40)], False),
        ([(">", 3), ("<", 4)], True),
        ([("=", 3), ("=", 4)], False),
        ([("=", 3), (">", 3)], False),
        ([(">=", 3), ("<=", 3)], True),
        ([("!=", 3), ("=", 4)], True),
    ],
)
def test_satisfiable_intervals(parts, expected):
    pred = cmp("x", "t", *parts[0])
    for op, value in parts[1:]:
        pred = A.And(pred, cmp("x", "t", op, value))
    assert satisfiable(pred) is expected
    brute = any(all(_holds(op, v, value) for op, value in parts) for v in [i / 2 for i in range(0, 20)])
    assert brute is expected


def _holds(op, a, b):
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "=": a == b, "!=": a != b}[op]


def test_rewrite_records_each_pass():
    f = parse("(T AS x ; H AS y) FILTER x.tmp > 40").formula
    out, passes, _ = rewrite(f)
    assert [p.name for p in passes] == [r.__name__ for r in RULES]
    assert [p.name for p in passes if p.changed] == ["lp_normal_form"]
    assert out == passes[-1].formula


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(f=formulas(max_depth=3, filter_probability=0.35), events=streams(max_size=7))
def test_rewriting_preserves_matches(f, events):
    out, _, _ = rewrite(f)
    expected = {m.key() for m in reference_matches(A.Query(f), events)}
    if out is None:
        assert expected == set()
        return
    assert is_safe(out)
    assert filters_on_atoms(out)
    assert {m.key() for m in reference_matches(replace(A.Query(f), formula=out), events)} == expected


def test_equality_chain_through_a_constant_becomes_unary():
    # x.id = z.id = 1 means x.id = z.id AND z.id = 1; with z bound it is x.id = 1 AND z.id = 1
    out, _, _ = rewrite(parse("(H AS x ; H AS z) FILTER (x.id = z.id AND z.id = 1)").formula)
    assert to_text(out) == to_text(parse("(H AS x FILTER x.id = 1) ; (H AS z FILTER z.id = 1)").formula)


def test_equality_chain_kept_when_the_constant_side_may_be_unbound():
    # not when z may be unbound (its for-all test would be vacuous)
    loose = parse("(H AS x ; (H AS z OR T)) FILTER (x.id = z.id AND z.id = 1)").formula
    kept = split_filters(loose)
    assert A.Compare("=", A.AttrRef("x", "id"), A.AttrRef("z", "id")) in conjuncts(
        kept.formula.predicate)
