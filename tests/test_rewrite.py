"""Rewrite passes: the papers' examples (notes A.6–A.8, C.13–C.15) and a property test
that rewriting never changes the matches (reference evaluator)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from cer_cli.compiler.predicates import pred_vars
from cer_cli.compiler.rewrite import RULES, rewrite
from cer_cli.compiler.rewrite.lift_outer_filters import lift_outer_filters
from cer_cli.compiler.rewrite.lp_normal_form import lp_normal_form
from cer_cli.compiler.rewrite.make_safe import is_safe, make_safe
from cer_cli.compiler.rewrite.scope import atom_type, children
from cer_cli.compiler.rewrite.simplify import satisfiable, simplify
from cer_cli.compiler.rewrite.split_filters import split_filters
from cer_cli.query import ast as A
from cer_cli.query.errors import QueryError
from tests.gen_formulas import formulas, streams
from tests.reference import reference_matches


def T():
    return A.EventType("T")


def H():
    return A.EventType("H")


def cmp(var, attr, op, value):
    return A.Compare(op, A.AttrRef(var, attr), A.Literal(value))


def conjuncts(p):
    return conjuncts(p.left) | conjuncts(p.right) if isinstance(p, A.And) else {p}


def filters_on_atoms(f) -> bool:
    """LP-normal form: every single-variable filter sits directly on an atom."""
    if isinstance(f, A.Filter) and len(pred_vars(f.predicate)) == 1 and atom_type(f) is None:
        return False
    return all(filters_on_atoms(k) for k in children(f))


def test_phi1_becomes_lp_normal_form():
    phi1 = A.Filter(
        A.Seq(A.As(T(), "x"), A.As(H(), "y")),
        A.And(A.And(A.And(cmp("x", "tmp", ">", 40), cmp("y", "hum", "<=", 25)),
                    cmp("x", "id", "=", 0)), cmp("y", "id", "=", 0)),
    )
    out = rewrite(A.Query(phi1)).formula
    assert isinstance(out, A.Seq)
    left, right = out.left, out.right
    assert isinstance(left, A.Filter) and left.formula == A.As(T(), "x")
    assert conjuncts(left.predicate) == {cmp("x", "tmp", ">", 40), cmp("x", "id", "=", 0)}
    assert isinstance(right, A.Filter) and right.formula == A.As(H(), "y")
    assert conjuncts(right.predicate) == {cmp("y", "hum", "<=", 25), cmp("y", "id", "=", 0)}


def test_phi6_becomes_two_disjuncts():
    phi6 = A.Seq(
        A.As(T(), "x"),
        A.FOr(A.Filter(A.As(T(), "y"), cmp("x", "temp", ">=", 40)),
              A.Filter(A.As(H(), "y"), cmp("x", "temp", "<", 40))),
    )
    out = rewrite(A.Query(phi6)).formula
    expected = {
        A.Seq(A.Filter(A.As(T(), "x"), cmp("x", "temp", ">=", 40)), A.As(T(), "y")),
        A.Seq(A.Filter(A.As(T(), "x"), cmp("x", "temp", "<", 40)), A.As(H(), "y")),
    }
    assert isinstance(out, A.FOr) and {out.left, out.right} == expected


def test_local_lift_r2_moves_the_filter_onto_its_binder():
    # T AS x ; (H AS y FILTER x.tmp > 40)+  ->  (T AS x FILTER x.tmp > 40) ; (H AS y)+
    f = A.Seq(A.As(T(), "x"), A.Plus(A.Filter(A.As(H(), "y"), cmp("x", "tmp", ">", 40))))
    assert lift_outer_filters(f) == A.Seq(
        A.Filter(A.As(T(), "x"), cmp("x", "tmp", ">", 40)), A.Plus(A.As(H(), "y"))
    )


def test_unbound_filter_variable_is_a_query_error():
    span = A.Span(3, 9)
    f = A.Filter(A.As(H(), "x"), A.Compare("<=", A.AttrRef("y", "tmp"), A.Literal(30), span=span))
    with pytest.raises(QueryError) as info:
        lift_outer_filters(f)
    assert info.value.span == span


def test_unsafe_sequence_is_unsatisfiable():
    f = A.Seq(A.As(T(), "x"), A.As(T(), "x"))
    assert not is_safe(f) and make_safe(f) is None
    result = rewrite(A.Query(f))
    assert result.unsatisfiable and result.warnings


def test_make_safe_drops_clashing_disjuncts():
    f = A.Seq(A.FOr(A.As(T(), "x"), A.As(H(), "y")), A.As(T(), "x"))
    assert make_safe(f) == A.Seq(A.As(H(), "y"), A.As(T(), "x"))
    # safe formulas are returned unchanged, including re-definitions inside `+`
    g = A.Seq(A.Plus(A.As(T(), "x")), A.Plus(A.As(T(), "x")))
    assert make_safe(g) is g


def test_make_safe_keeps_vacuous_filters_off_disjuncts_without_the_variable():
    # (T AS x OR H) FILTER x[...] ; T AS x: the H branch is unfiltered (for all over nothing)
    p = cmp("x", "tmp", ">", 1)
    f = A.Seq(A.Filter(A.FOr(A.As(T(), "x"), H()), p), A.As(T(), "x"))
    assert make_safe(f) == A.Seq(H(), A.As(T(), "x"))


def test_split_filters_mixed_or_becomes_formula_or():
    base = A.Seq(A.As(T(), "x"), A.As(H(), "y"))
    px, qy = cmp("x", "tmp", ">", 40), cmp("y", "hum", "<", 20)
    assert split_filters(A.Filter(base, A.Or(px, qy))) == A.FOr(A.Filter(base, px), A.Filter(base, qy))
    assert split_filters(A.Filter(base, A.And(px, qy))) == A.Filter(A.Filter(base, px), qy)
    # NOT over a mixed predicate: De Morgan first
    assert split_filters(A.Filter(base, A.Not(A.And(px, qy)))) == A.FOr(
        A.Filter(base, A.Not(px)), A.Filter(base, A.Not(qy))
    )
    # one variable: the predicate stays whole
    one = A.Filter(base, A.Or(px, cmp("x", "id", "=", 0)))
    assert split_filters(one) == one


def test_lp_pushes_for_all_filters_through_plus_or_and_compound_as():
    p = cmp("x", "v", ">", 1)
    f = A.Filter(A.Plus(A.As(T(), "x")), p)
    assert lp_normal_form(f) == A.Plus(A.Filter(A.As(T(), "x"), p))
    g = A.Filter(A.FOr(A.As(T(), "x"), H()), p)
    assert lp_normal_form(g) == A.FOr(A.Filter(A.As(T(), "x"), p), H())
    h = A.Filter(A.As(A.Seq(T(), H()), "x"), p)
    assert lp_normal_form(h) == A.As(
        A.Seq(A.Filter(T(), cmp("T", "v", ">", 1)), A.Filter(H(), cmp("H", "v", ">", 1))), "x"
    )


def test_simplify_false_true_and_merging():
    x = A.As(T(), "x")
    a, b = cmp("x", "a", ">", 1), cmp("x", "b", "<", 2)
    assert simplify(A.FOr(A.Filter(A.Filter(x, a), b), A.Filter(A.As(H(), "y"), A.BoolConst(False)))) \
        == A.Filter(x, A.And(a, b))
    assert simplify(A.Filter(x, A.BoolConst(True))) == x
    assert simplify(A.Seq(x, A.Filter(H(), A.BoolConst(False)))) is None
    assert simplify(A.Plus(A.Filter(x, A.And(cmp("x", "t", ">=", 40), cmp("x", "t", "<", 40))))) is None
    assert simplify(A.FOr(x, x)) == x


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
    f = A.Filter(A.Seq(A.As(T(), "x"), A.As(H(), "y")), cmp("x", "tmp", ">", 40))
    result = rewrite(A.Query(f))
    assert [p.name for p in result.passes] == [r.__name__ for r in RULES]
    changed = [p.name for p in result.passes if p.changed]
    assert changed == ["lp_normal_form"]
    assert result.query.formula == result.formula == result.passes[-1].formula


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(f=formulas(max_depth=3, filter_probability=0.35), events=streams(max_size=7))
def test_rewriting_preserves_matches(f, events):
    result = rewrite(A.Query(f))
    expected = {m.key() for m in reference_matches(A.Query(f), events)}
    if result.unsatisfiable:
        assert expected == set()
        return
    assert is_safe(result.formula)
    assert filters_on_atoms(result.formula)
    assert {m.key() for m in reference_matches(result.query, events)} == expected


def test_equality_chain_through_a_constant_becomes_unary():
    # x.id = z.id = 1 means x.id = z.id AND z.id = 1; with z bound it is x.id = 1 AND z.id = 1
    base = A.Seq(A.As(H(), "x"), A.As(H(), "z"))
    chain = A.And(A.Compare("=", A.AttrRef("x", "id"), A.AttrRef("z", "id")), cmp("z", "id", "=", 1))
    out = rewrite(A.Query(A.Filter(base, chain))).formula
    assert out == A.Seq(A.Filter(A.As(H(), "x"), cmp("x", "id", "=", 1)),
                        A.Filter(A.As(H(), "z"), cmp("z", "id", "=", 1)))
    # not when z may be unbound (its for-all test would be vacuous)
    loose = A.Seq(A.As(H(), "x"), A.FOr(A.As(H(), "z"), T()))
    kept = split_filters(A.Filter(loose, chain))
    assert A.Compare("=", A.AttrRef("x", "id"), A.AttrRef("z", "id")) in conjuncts(kept.formula.predicate)
