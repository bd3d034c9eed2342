"""The reference evaluator against the papers' worked examples and CORE's documented behaviour.

Expected outputs are the papers' (Foundations of CEP, CORE, and the selection-strategy and
RMA papers), or derived from their definitions; complex events are compared as sets of reported positions
unless the interval or the variables matter.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cer_cli import events as ev
from cer_cli.query import ast
from cer_cli.query.checks import check_query
from tests.builders import events_frame, letters
from tests.gen_formulas import formulas, queries, schema_of, streams
from tests.reference import (
    assert_same_matches,
    check_limited,
    formula_matches,
    reference_matches,
    vdef,
)

# --------------------------------------------------------------------------- AST helpers


def E(name: str, stream: str | None = None) -> ast.EventType:
    return ast.EventType(name, stream)


def AS(f: ast.Formula, var: str) -> ast.As:
    return ast.As(f, var)


def seq(*fs: ast.Formula, contiguous: bool = False) -> ast.Formula:
    out = fs[0]
    for f in fs[1:]:
        out = ast.Seq(out, f, contiguous)
    return out


def OR(*fs: ast.Formula) -> ast.Formula:
    out = fs[0]
    for f in fs[1:]:
        out = ast.FOr(out, f)
    return out


def plus(f: ast.Formula, contiguous: bool = False) -> ast.Plus:
    return ast.Plus(f, contiguous)


def attr(ref: str) -> ast.AttrRef:
    var, name = ref.split(".")
    return ast.AttrRef(var, name)


def cmp(left: str, op: str, right) -> ast.Compare:
    """``cmp("x.tmp", ">", 40)`` or ``cmp("x.id", "=", "y.id")``."""
    rhs = attr(right) if isinstance(right, str) and "." in right else ast.Literal(right)
    return ast.Compare(op, attr(left), rhs)


def AND(*ps: ast.Predicate) -> ast.Predicate:
    out = ps[0]
    for p in ps[1:]:
        out = ast.And(out, p)
    return out


def FILTER(f: ast.Formula, *ps: ast.Predicate) -> ast.Filter:
    return ast.Filter(f, AND(*ps))


def Q(f: ast.Formula, **clauses) -> ast.Query:
    return ast.Query(formula=f, **clauses)


def sets(matches) -> set[frozenset[int]]:
    return {frozenset(p for p, _ in m.events) for m in matches}


def S(*sets_: tuple[int, ...]) -> set[frozenset[int]]:
    return {frozenset(s) for s in sets_}


def run(f: ast.Formula, events, strategy: str = "ALL", **clauses) -> set[frozenset[int]]:
    return sets(reference_matches(Q(f, strategy=strategy, **clauses), events))


# --------------------------------------------------------------------------- streams

#: Figure 1 of "Foundations of CEP": value is tmp/temp for T events and hum for H events.
F1 = [
    {"type": t, "id": i, **({"tmp": v, "temp": v} if t == "T" else {"hum": v})}
    for t, i, v in zip(
        "HTHHTTTHH",
        (2, 0, 0, 1, 1, 0, 1, 1, 0),
        (25, 45, 20, 25, 40, 42, 25, 70, 18),
        strict=True,
    )
]

#: Table 1 of "Symbolic Automata with Memory".
T1 = [
    {"type": t, "id": i, "value": v}
    for t, i, v in zip("TTTHHT", (1, 1, 2, 1, 1, 2), (22, 24, 32, 70, 68, 33), strict=True)
]

x, y, z, w = "x", "y", "z", "w"

PHI1 = FILTER(
    seq(AS(E("T"), x), AS(E("H"), y)),
    cmp("x.tmp", ">", 40),
    cmp("y.hum", "<=", 25),
    cmp("x.id", "=", 0),
    cmp("y.id", "=", 0),
)
PHI2 = FILTER(
    OR(seq(AS(E("T"), x), AS(E("H"), y)), seq(AS(E("H"), y), AS(E("T"), x))),
    cmp("x.tmp", ">", 40),
    cmp("y.hum", "<=", 25),
    cmp("x.id", "=", 0),
    cmp("y.id", "=", 0),
)
PHI3 = FILTER(
    seq(AS(E("H"), x), plus(FILTER(AS(E("T"), y), cmp("y.id", "=", 1))), AS(E("H"), z)),
    cmp("x.hum", "<", 30),
    cmp("z.hum", ">", 60),
    cmp("x.id", "=", "z.id"),
    cmp("z.id", "=", 1),
)
PHI4 = FILTER(
    seq(AS(E("H"), x), plus(FILTER(AS(E("T"), y), cmp("y.id", "=", "x.id"))), AS(E("H"), z)),
    cmp("x.hum", "<", 30),
    cmp("z.hum", ">", 60),
    cmp("x.id", "=", "z.id"),
)
PHI6 = seq(
    AS(E("T"), x),
    OR(
        FILTER(AS(E("T"), y), cmp("x.temp", ">=", 40)),
        FILTER(AS(E("H"), y), cmp("x.temp", "<", 40)),
    ),
)

FIGURE1_TABLE = [
    # C.1 rows 1-5: formula, ALL, STRICT, NEXT, LAST, MAX.
    (
        PHI1,
        S((1, 2), (1, 8), (5, 8)),
        S((1, 2)),
        S((1, 2), (1, 8)),
        S((1, 2), (5, 8)),
        S((1, 2), (1, 8), (5, 8)),
    ),
    (
        PHI2,
        S((1, 2), (2, 5), (1, 8), (5, 8)),
        S((1, 2)),
        S((1, 2), (2, 5), (1, 8)),
        S((1, 2), (2, 5), (5, 8)),
        S((1, 2), (2, 5), (1, 8), (5, 8)),
    ),
    (
        PHI3,
        S((3, 4, 7), (3, 6, 7), (3, 4, 6, 7)),
        set(),
        S((3, 4, 6, 7)),
        S((3, 4, 6, 7)),
        S((3, 4, 6, 7)),
    ),
    (
        PHI4,
        S((3, 4, 7), (3, 6, 7), (3, 4, 6, 7)),
        set(),
        S((3, 4, 6, 7)),
        S((3, 4, 6, 7)),
        S((3, 4, 6, 7)),
    ),
    (
        PHI6,
        S((1, 4), (1, 5), (1, 6), (4, 5), (4, 6), (5, 6), (6, 7), (6, 8)),
        S((4, 5), (5, 6), (6, 7)),
        S((1, 4), (1, 5), (1, 6), (6, 7), (6, 8)),
        S((1, 4), (4, 5), (5, 6), (6, 7), (6, 8)),
        S((1, 4), (1, 5), (1, 6), (4, 5), (4, 6), (5, 6), (6, 7), (6, 8)),
    ),
]


@pytest.mark.parametrize("row", FIGURE1_TABLE, ids=["phi1", "phi2", "phi3", "phi4", "phi6"])
@pytest.mark.parametrize("strategy", ["ALL", "STRICT", "NEXT", "LAST", "MAX"])
def test_figure1_formulas_with_every_strategy(row, strategy):
    formula, *expected = row
    column = ["ALL", "STRICT", "NEXT", "LAST", "MAX"].index(strategy)
    assert run(formula, F1, strategy) == expected[column]


def test_any_is_all():
    assert run(PHI2, F1, "ANY") == run(PHI2, F1, "ALL")


# C.1 items 7-8: iteration re-defines its variables; repeated `+` is safe.
AAA = letters("AAA")


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("ALL", {frozenset(c) for k in (1, 2, 3) for c in itertools.combinations(range(3), k)}),
        ("STRICT", S((0,), (1,), (2,), (0, 1), (1, 2), (0, 1, 2))),
        ("NEXT", S((0,), (0, 1), (0, 1, 2))),
        ("LAST", S((0,), (0, 1), (0, 1, 2))),
        ("MAX", S((0,), (0, 1), (0, 1, 2))),
    ],
)
def test_iteration_of_a_variable(strategy, expected):
    assert run(plus(AS(E("A"), x)), AAA, strategy) == expected


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("ALL", S((0, 1), (0, 2), (1, 2), (0, 1, 2))),
        ("STRICT", S((0, 1), (1, 2), (0, 1, 2))),
        ("NEXT", S((0, 1), (0, 1, 2))),
        ("LAST", S((0, 1), (0, 1, 2))),
        ("MAX", S((0, 1), (0, 1, 2))),
    ],
)
def test_repeated_iteration_is_safe(strategy, expected):
    f = seq(plus(AS(E("A"), x)), plus(AS(E("A"), x)))
    assert run(f, AAA, strategy) == expected


def test_unsafe_sequence_has_no_match():
    assert run(seq(AS(E("T"), x), AS(E("T"), x)), letters("TTTT")) == set()
    # Event-type names are labels, not defined variables.
    assert run(seq(E("T"), E("T")), letters("TTT")) == S((0, 1), (0, 2), (1, 2))


def test_safety_is_per_disjunct():
    # C.2 item 14: only the H branch can precede a second definition of x.
    f = seq(OR(AS(E("T"), x), AS(E("H"), y)), AS(E("T"), x))
    assert run(f, letters("THTT")) == S((1, 2), (1, 3))


def test_repeated_variable_reports_every_binding():
    # The valuations of C.1 item 8 in full: x binds both halves.
    ms = reference_matches(Q(seq(plus(AS(E("A"), x)), plus(AS(E("A"), x)))), AAA)
    assert [(m.start, m.end, m.events) for m in ms] == [
        (0, 1, ((0, ("A", "x")), (1, ("A", "x")))),
        (0, 2, ((0, ("A", "x")), (1, ("A", "x")), (2, ("A", "x")))),
        (0, 2, ((0, ("A", "x")), (2, ("A", "x")))),
        (1, 2, ((1, ("A", "x")), (2, ("A", "x")))),
    ]


# --------------------------------------------------------------------------- C.4 benchmarks


def Q1_():
    return seq(AS(E("A"), x), AS(E("B"), y), AS(E("C"), z))


def Q2_():
    return seq(AS(E("A"), x), AS(E("B"), y), AS(E("C"), z), AS(E("D"), w))


def Q3_():
    return seq(OR(AS(E("A"), x), AS(E("B"), y), AS(E("C"), z)), AS(E("D"), w))


def Q4_():
    return seq(plus(AS(E("A"), x)), AS(E("B"), y))


def Q5_():
    return seq(plus(AS(E("A"), x)), plus(AS(E("B"), y)), AS(E("C"), z))


def Q6_():
    return seq(plus(seq(plus(AS(E("A"), x)), AS(E("B"), y))), AS(E("C"), z))


AABCBCD = letters("AABCBCD")
Q5_AT_5 = {
    frozenset(a) | frozenset(b) | {5}
    for a in (s for k in (1, 2) for s in itertools.combinations((0, 1), k))
    for b in (s for k in (1, 2) for s in itertools.combinations((2, 4), k))
}
Q6_ALL = S((0, 2, 3), (1, 2, 3), (0, 1, 2, 3), (0, 2, 5), (1, 2, 5), (0, 1, 2, 5), (0, 4, 5))
Q6_ALL |= S((1, 4, 5), (0, 1, 4, 5))
Q1_ALL = S((0, 2, 3), (1, 2, 3), (0, 2, 5), (0, 4, 5), (1, 2, 5), (1, 4, 5))
Q2_ALL = {frozenset({a, b, c, 6}) for a in (0, 1) for b, c in ((2, 3), (2, 5), (4, 5))}
Q4_ALL = S((0, 2), (1, 2), (0, 1, 2), (0, 4), (1, 4), (0, 1, 4))

Q3_ALL = {frozenset({i, 6}) for i in range(6)}
Q4_NEXT = S((0, 1, 2), (0, 1, 4))
Q5_NEXT = S((0, 1, 2, 3), (0, 1, 2, 4, 5))
Q5_ABABC = S((0, 1, 4), (0, 3, 4), (2, 3, 4), (0, 1, 3, 4), (0, 2, 3, 4))
Q6_ABABC = S((0, 1, 4), (0, 3, 4), (2, 3, 4), (0, 2, 3, 4), (0, 1, 2, 3, 4))
Q6_ABABC_BEST = S((0, 1, 2, 3, 4))

BENCHMARKS = {
    # name: (query, stream, ALL, STRICT, NEXT, LAST, MAX), from C.4
    "Q1": (
        Q1_,
        AABCBCD,
        Q1_ALL,
        S((1, 2, 3)),
        S((0, 2, 3), (0, 2, 5)),
        S((1, 2, 3), (1, 4, 5)),
        Q1_ALL,
    ),
    "Q2": (Q2_, AABCBCD, Q2_ALL, set(), S((0, 2, 3, 6)), S((1, 4, 5, 6)), Q2_ALL),
    "Q3": (Q3_, AABCBCD, Q3_ALL, S((5, 6)), S((0, 6)), S((5, 6)), Q3_ALL),
    "Q4": (Q4_, AABCBCD, Q4_ALL, S((0, 1, 2), (1, 2)), Q4_NEXT, Q4_NEXT, Q4_NEXT),
    "Q5": (
        Q5_,
        AABCBCD,
        S((0, 2, 3), (1, 2, 3), (0, 1, 2, 3)) | Q5_AT_5,
        S((0, 1, 2, 3), (1, 2, 3)),
        Q5_NEXT,
        Q5_NEXT,
        Q5_NEXT,
    ),
    "Q6": (
        Q6_,
        AABCBCD,
        Q6_ALL,
        S((0, 1, 2, 3), (1, 2, 3)),
        S((0, 1, 2, 3), (0, 1, 2, 5)),
        S((0, 1, 2, 3), (0, 1, 4, 5)),
        S((0, 1, 2, 3), (0, 1, 2, 5), (0, 1, 4, 5)),
    ),
    "Q5-ABABC": (
        Q5_,
        letters("ABABC"),
        Q5_ABABC,
        S((2, 3, 4)),
        S((0, 1, 3, 4)),
        S((0, 2, 3, 4)),
        S((0, 1, 3, 4), (0, 2, 3, 4)),
    ),
    "Q6-ABABC": (
        Q6_,
        letters("ABABC"),
        Q6_ABABC,
        S((0, 1, 2, 3, 4), (2, 3, 4)),
        Q6_ABABC_BEST,
        Q6_ABABC_BEST,
        Q6_ABABC_BEST,
    ),
}


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_queries_on_small_streams(name):
    make, stream, *expected = BENCHMARKS[name]
    for strategy, want in zip(("ALL", "STRICT", "NEXT", "LAST", "MAX"), expected, strict=True):
        assert run(make(), stream, strategy) == want, strategy


@given(st.integers(1, 4), st.integers(1, 3))
@settings(max_examples=15, deadline=None)
def test_closed_form_counts(a, b):
    ab_c = letters("A" * a + "B" * b + "C")
    assert len(reference_matches(Q(Q1_()), ab_c)) == a * b
    assert len(reference_matches(Q(Q5_()), ab_c)) == (2**a - 1) * (2**b - 1)
    assert len(reference_matches(Q(Q6_()), ab_c)) == (2**a - 1) * b
    assert len(reference_matches(Q(Q2_()), letters("A" * a + "B" * b + "C" * 2 + "D"))) == a * b * 2
    a_b = letters("A" * a + "B")
    assert len(reference_matches(Q(Q4_()), a_b)) == 2**a - 1
    assert run(Q4_(), a_b, "STRICT") == {frozenset(range(j, a + 1)) for j in range(a)}
    for strategy in ("NEXT", "LAST", "MAX"):
        assert run(Q4_(), a_b, strategy) == {frozenset(range(a + 1))}


# --------------------------------------------------------------------------- C.5, [001]

TH = seq(AS(E("T"), x), AS(E("H"), y))
PHI1_RMA = FILTER(TH, cmp("x.id", "=", "y.id"))


def test_plain_sequence_on_table1():
    assert run(TH, T1) == S((0, 3), (0, 4), (1, 3), (1, 4), (2, 3), (2, 4))


def test_equality_filter_on_table1():
    # The paper says only {2,3} drops out; {2,4} fails too (T id 2 vs H id 1).
    assert run(PHI1_RMA, T1) == S((0, 3), (0, 4), (1, 3), (1, 4))


@pytest.mark.parametrize(
    ("w", "expected"),
    [
        (2, set()),
        (3, S((1, 3))),
        (4, S((0, 3), (1, 3), (1, 4))),
        (5, S((0, 3), (0, 4), (1, 3), (1, 4))),
    ],
)
def test_windowed_equality_on_table1(w, expected):
    # [001] keeps max - min < w; ours is inclusive, so its window w is our w - 1.
    assert run(PHI1_RMA, T1, within=ast.EventsWindow(w - 1)) == expected


def test_filter_on_a_later_variable_inside_iteration():
    # C.5 item 21: x is filtered against y, which the enclosing `;` binds after the `+`.
    f = seq(plus(FILTER(AS(E("T"), x), cmp("x.id", "=", "y.id"))), AS(E("H"), y))
    assert run(f, T1) == S((0, 3), (1, 3), (0, 1, 3), (0, 4), (1, 4), (0, 1, 4))


def test_disjunction_of_filtered_atoms():
    # C.5 item 22, each T written as T(id, value).
    f = FILTER(
        seq(
            OR(
                FILTER(AS(E("T"), x), cmp("x.value", "<", -40)),
                FILTER(AS(E("T"), x), cmp("x.value", ">", 50)),
            ),
            AS(E("T"), y),
        ),
        cmp("y.id", "=", "x.id"),
    )
    assert run(f, T1) == set()
    stream = [
        {"type": "T", "id": i, "value": v}
        for i, v in ((1, -45), (2, 60), (1, 20), (2, 30), (3, 55))
    ]
    assert run(f, stream) == S((0, 2), (1, 3))


def test_register_clobbering_example():
    # C.5 item 25: both orders of x and w must be tried.
    f = FILTER(
        seq(
            OR(seq(AS(E("A"), x), AS(E("A"), w)), seq(AS(E("A"), w), AS(E("A"), x))),
            AS(E("B"), z),
        ),
        cmp("z.v", "=", "x.v"),
    )
    stream = [{"type": "A", "v": 1}, {"type": "A", "v": 2}, {"type": "B", "v": 1}]
    assert run(f, stream) == S((0, 1, 2))


# --------------------------------------------------------------------------- filter rules


def test_rule1_for_all_events_of_an_iterated_variable():
    stream = [{"type": "T", "tmp": t} for t in (50, 30, 45)]
    f = FILTER(plus(AS(E("T"), x)), cmp("x.tmp", ">", 40))
    assert run(f, stream) == S((0,), (2,), (0, 2))


def test_rule2_equals_filtering_where_bound():
    stream = [
        {"type": "T", "tmp": 50},
        {"type": "T", "tmp": 30},
        {"type": "H", "hum": 1},
        {"type": "H", "hum": 2},
    ]
    outer = seq(AS(E("T"), x), FILTER(AS(E("H"), y), cmp("x.tmp", ">", 40)))
    moved = seq(FILTER(AS(E("T"), x), cmp("x.tmp", ">", 40)), AS(E("H"), y))
    assert run(outer, stream) == run(moved, stream) == S((0, 2), (0, 3))


def test_rule2_outer_variable_is_the_same_event_in_every_iteration():
    stream = [
        {"type": "A", "v": 1},
        {"type": "B", "v": 1},
        {"type": "B", "v": 2},
        {"type": "B", "v": 1},
    ]
    f = seq(AS(E("A"), x), plus(FILTER(AS(E("B"), y), cmp("y.v", "=", "x.v"))))
    assert run(f, stream) == S((0, 1), (0, 3), (0, 1, 3))


def test_rule2_under_or():
    stream = [{"type": "A", "v": 1}, {"type": "B", "v": 0}, {"type": "C", "v": 0}]
    f = seq(AS(E("A"), x), OR(FILTER(E("B"), cmp("x.v", "=", 0)), E("C")))
    assert run(f, stream) == S((0, 2))


def test_event_lacking_an_attribute_fails_the_atom():
    stream = [{"type": "A", "v": 1}, {"type": "A"}, {"type": "A", "v": None}]
    assert run(FILTER(E("A"), cmp("A.v", ">=", 0)), stream) == S((0,))
    # NOT(atom) cannot rescue it: the atom is "v != 1" as a whole.
    assert run(FILTER(E("A"), ast.Not(cmp("A.v", "=", 1))), stream) == set()


def test_arithmetic_truncates_like_c():
    stream = [{"type": "A", "p": p} for p in (100, 101, -7, 7)]
    half = ast.Compare("=", ast.BinOp("/", attr("A.p"), ast.Literal(2)), ast.Literal(50))
    assert run(FILTER(E("A"), half), stream) == S((0,), (1,))
    neg = ast.Compare("=", ast.BinOp("/", attr("A.p"), ast.Literal(2)), ast.Literal(-3))
    assert run(FILTER(E("A"), neg), stream) == S((2,))
    mod = ast.Compare("=", ast.BinOp("%", attr("A.p"), ast.Literal(2)), ast.Literal(-1))
    assert run(FILTER(E("A"), mod), stream) == S((2,))
    # Numeric comparison: an integer attribute against 100.5 is not truncated.
    assert run(FILTER(E("A"), cmp("A.p", ">=", 100.5)), stream) == S((1,))


def test_like_is_a_regex_search():
    stream = [{"type": "S", "name": n} for n in ("MSFT", "SF", "msft")]
    assert run(FILTER(E("S"), ast.Like(attr("S.name"), "SF")), stream) == S((0,), (1,))
    assert run(FILTER(E("S"), ast.Like(attr("S.name"), "^SF$")), stream) == S((1,))


def test_string_against_number_is_an_error():
    with pytest.raises(TypeError):
        run(FILTER(E("S"), cmp("S.name", "=", 1)), [{"type": "S", "name": "a"}])


def test_in_set_interval_and_range():
    stream = [{"type": "A", "v": v, "lo": 1} for v in range(5)]
    v = attr("A.v")
    assert run(FILTER(E("A"), ast.InSet(v, (ast.Literal(1), ast.Literal(3)))), stream) == S(
        (1,), (3,)
    )
    assert run(FILTER(E("A"), ast.InSet(v, (ast.Literal(1),), negated=True)), stream) == S(
        (0,), (2,), (3,), (4,)
    )
    assert run(FILTER(E("A"), ast.InInterval(v, ast.Literal(3), None)), stream) == S((3,), (4,))
    assert run(FILTER(E("A"), ast.InInterval(v, None, ast.Literal(0), True)), stream) == S(
        (1,), (2,), (3,), (4,)
    )
    in_range = ast.InRange(v, attr("A.lo"), ast.BinOp("+", attr("A.lo"), ast.Literal(1)))
    assert run(FILTER(E("A"), in_range), stream) == S((1,), (2,))


# --------------------------------------------------------------------------- CORE behaviour

#: The example stream of CORE's Figure 3 (its CEA tests name="INTL"; Figure 1 writes "INTC").
STOCK = [
    {"type": t, "name": n, "price": p}
    for t, n, p in (
        ("SELL", "MSFT", 101),
        ("SELL", "MSFT", 102),
        ("SELL", "INTL", 80),
        ("BUY", "INTL", 80),
        ("SELL", "AMZN", 1900),
        ("SELL", "INTL", 81),
        ("SELL", "AMZN", 1920),
    )
]
CORE_Q1 = FILTER(
    seq(AS(E("SELL"), "msft"), AS(E("SELL"), "intel"), AS(E("SELL"), "amzn")),
    cmp("msft.name", "=", "MSFT"),
    cmp("msft.price", ">", 100),
    cmp("intel.name", "=", "INTL"),
    cmp("amzn.name", "=", "AMZN"),
    cmp("amzn.price", "<", 2000),
)


def test_core_figure3():
    ms = reference_matches(Q(CORE_Q1, streams=("S",)), STOCK)
    assert {m.end for m in ms} == {4, 6}
    assert [(m.start, m.end, [p for p, _ in m.events]) for m in ms] == [
        (0, 4, [0, 2, 4]),
        (1, 4, [1, 2, 4]),
        (0, 6, [0, 2, 6]),
        (0, 6, [0, 5, 6]),
        (1, 6, [1, 2, 6]),
        (1, 6, [1, 5, 6]),
    ]
    assert ms[0].events == ((0, ("SELL", "msft")), (2, ("SELL", "intel")), (4, ("SELL", "amzn")))


def test_not_consumes_without_reporting():
    stream = letters(["SELL", "BUY", "BUY", "SELL"])
    ms = reference_matches(Q(seq(ast.FNot(E("SELL")), E("BUY"), E("SELL"))), stream)
    assert [(m.start, m.end, m.events) for m in ms] == [(1, 3, ((2, ("BUY",)), (3, ("SELL",))))]
    alone = reference_matches(Q(ast.FNot(E("SELL"))), stream)
    assert [(m.start, m.end, m.events) for m in alone] == [(1, 1, ()), (2, 2, ())]


def test_not_is_not_absence():
    stream = letters(["BUY", "BUY", "BUY"])
    f = seq(E("BUY"), ast.FNot(E("SELL")), E("BUY"))
    assert [(m.start, m.end) for m in reference_matches(Q(f), stream)] == [(0, 2)]


def test_not_negates_the_whole_filtered_atom():
    stream = [
        {"type": "SELL", "name": n, "price": p} for n, p in (("MSFT", 5), ("MSFT", 50), ("X", 5))
    ]
    atom = FILTER(E("SELL"), ast.Or(cmp("SELL.name", "=", "X"), cmp("SELL.price", ">", 10)))
    assert run(ast.FNot(atom), stream, select=()) == {frozenset()}
    assert [m.start for m in reference_matches(Q(ast.FNot(atom)), stream)] == [0]


def test_iteration_gives_every_subset_ending_at_the_last():
    for k in range(1, 6):
        ms = reference_matches(Q(plus(E("SELL"))), letters(["SELL"] * k))
        assert sum(m.end == k - 1 for m in ms) == 2 ** (k - 1)


def test_projection_merges_matches():
    ms = reference_matches(Q(CORE_Q1), STOCK)
    assert len(ms) == 6
    projected = reference_matches(Q(CORE_Q1, select=(ast.SelectItem("amzn"),)), STOCK)
    # Intervals still differ by start: [0,4], [1,4], [0,6], [1,6].
    assert [(m.start, m.end, m.events) for m in projected] == [
        (0, 4, ((4, ("amzn",)),)),
        (1, 4, ((4, ("amzn",)),)),
        (0, 6, ((6, ("amzn",)),)),
        (1, 6, ((6, ("amzn",)),)),
    ]
    none = reference_matches(Q(CORE_Q1, select=()), STOCK)
    assert [(m.start, m.end, m.events) for m in none] == [
        (0, 4, ()),
        (1, 4, ()),
        (0, 6, ()),
        (1, 6, ()),
    ]


def test_projection_keeps_stream_qualified_labels():
    stream = [{"type": "BUY", "stream": "S1"}, {"type": "BUY", "stream": "S2"}]
    f = OR(E("BUY", "S1"), E("BUY", "S2"))
    ms = reference_matches(Q(f, select=(ast.SelectItem("S1>BUY"),)), stream)
    assert [m.events for m in ms] == [((0, ("S1>BUY",)),), ()]
    full = reference_matches(Q(f), stream)
    assert [m.events for m in full] == [((0, ("BUY", "S1>BUY")),), ((1, ("BUY", "S2>BUY")),)]


def test_from_keeps_global_positions_and_counts_events_locally():
    stream = [
        {"type": "A", "stream": "S1"},
        {"type": "B", "stream": "S2"},
        {"type": "B", "stream": "S2"},
        {"type": "B", "stream": "S1"},
    ]
    f = seq(E("A"), E("B"), contiguous=True)
    assert [(m.start, m.end) for m in reference_matches(Q(f, streams=("S1",)), stream)] == [(0, 3)]
    assert reference_matches(Q(f), stream)[0].end == 1
    windowed = Q(seq(E("A"), E("B")), streams=("S1",), within=ast.EventsWindow(1))
    assert [(m.start, m.end) for m in reference_matches(windowed, stream)] == [(0, 3)]


def test_partition_by_alternative_names():
    stream = [
        {"type": "SELL", "sym": "X"},
        {"type": "BUY", "symbol": "Y"},
        {"type": "BUY", "symbol": "X"},
        {"type": "BUY"},
        {"type": "SELL", "sym": "Y"},
    ]
    q = Q(seq(E("SELL"), E("BUY"), contiguous=True), partition_by=(("sym", "symbol"),))
    ms = reference_matches(q, stream)
    # Within partition X the BUY at 2 is next to the SELL at 0; the key-less event is skipped.
    assert [(m.start, m.end, m.partition) for m in ms] == [(0, 2, ("X",))]
    q2 = Q(seq(E("BUY"), E("SELL")), partition_by=(("sym", "symbol"),), within=ast.EventsWindow(1))
    assert [(m.start, m.end, m.partition) for m in reference_matches(q2, stream)] == [
        (1, 4, ("Y",))
    ]
    assert reference_matches(Q(E("SELL")), stream)[0].partition is None


def test_windows_are_inclusive_in_every_form():
    stream = [{"type": "A", "time": 0, "ts": 10}, {"type": "B", "time": 10**9, "ts": 13}]
    f = seq(E("A"), E("B"))
    assert run(f, stream, within=ast.EventsWindow(1)) == S((0, 1))
    assert run(f, stream, within=ast.EventsWindow(0)) == set()
    assert run(f, stream, within=ast.DurationWindow(((1, "second"),))) == S((0, 1))
    assert run(f, stream, within=ast.DurationWindow(((999, "millisecond"),))) == set()
    assert run(f, stream, within=ast.AttributeWindow(3, "ts")) == S((0, 1))
    assert run(f, stream, within=ast.AttributeWindow(2, "ts")) == set()


def test_consume_by_any_and_partition():
    stream = [
        {"type": t, "k": k} for t, k in (("A", 1), ("A", 2), ("B", 1), ("B", 2), ("A", 1), ("B", 1))
    ]
    f = seq(E("A"), E("B"))
    part = (("k",),)
    none = reference_matches(Q(f, partition_by=part), stream)
    assert [(m.start, m.end) for m in none] == [(0, 2), (1, 3), (0, 5), (4, 5)]
    by_partition = reference_matches(Q(f, partition_by=part, consume="PARTITION"), stream)
    assert [(m.start, m.end) for m in by_partition] == [(0, 2), (1, 3), (4, 5)]
    # ANY: the output at 2 also forgets partition 2's run started at 1.
    by_any = reference_matches(Q(f, partition_by=part, consume="ANY"), stream)
    assert [(m.start, m.end) for m in by_any] == [(0, 2), (4, 5)]


def test_limit_keeps_latest_starts():
    stream = letters("AAAB")
    q = Q(seq(E("A"), E("B")), limit=2)
    assert [(m.start, m.end) for m in reference_matches(q, stream)] == [(1, 3), (2, 3)]
    assert len(reference_matches(q, stream, apply_limit=False)) == 3
    assert reference_matches(Q(seq(E("A"), E("B")), limit=0), stream) == []


def test_limit_zero_never_consumes():
    stream = letters("ABAB")
    f = seq(E("A"), E("B"))
    assert len(reference_matches(Q(f, consume="ANY"), stream, apply_limit=False)) == 2
    assert len(reference_matches(Q(f, consume="ANY", limit=0), stream, apply_limit=False)) == 3


def test_check_limited_accepts_valid_and_rejects_invalid_choices():
    stream = letters("AAAB")
    q = Q(seq(E("A"), E("B")), limit=2)
    everything = reference_matches(q, stream, apply_limit=False)
    check_limited([m for m in everything if m.start >= 1], q, stream)
    with pytest.raises(AssertionError, match="dropped"):
        check_limited([m for m in everything if m.start != 1], q, stream)
    with pytest.raises(AssertionError, match="expected 2"):
        check_limited(everything, q, stream)


def test_assert_same_matches_reports_the_difference():
    ms = reference_matches(Q(PHI1), F1)
    assert_same_matches(list(reversed(ms)), ms)
    with pytest.raises(AssertionError, match="missing"):
        assert_same_matches(ms[1:], ms)


# --------------------------------------------------------------------------- generators


@given(queries(formulas(4, binary=True)), streams(max_size=10))
@settings(max_examples=150, deadline=None)
def test_generated_queries_evaluate_quickly_and_without_duplicates(query, events):
    ms = reference_matches(query, events)
    assert len({(m.key(), m.partition) for m in ms}) == len(ms)
    for m in ms:
        assert all(m.start <= p <= m.end for p, _ in m.events)
    if query.limit is not None:
        check_limited(ms, query, events)


@given(formulas(4), streams())
@settings(max_examples=100, deadline=None)
def test_generated_formulas_are_well_formed(formula, events):
    # Evaluation raises on a filter whose variable nothing binds (rule 3).
    for v in formula_matches(formula, events):
        assert not v.pending


@given(streams(max_size=6))
@settings(max_examples=20, deadline=None)
def test_events_frame_has_the_reserved_columns(events):
    frame = events_frame(events)
    assert frame.columns[:5] == list(ev.RESERVED)
    assert frame[ev.POS].to_list() == list(range(len(events)))
    assert frame[ev.TIME].to_list() == [t["time"] for t in events]
    assert frame["v"].to_list() == [t["v"] for t in events]


@given(queries(formulas(4, binary=True)), streams(max_size=4))
@settings(max_examples=100, deadline=None)
def test_generated_queries_pass_the_checker(query, events):
    check_query(query, schema_of(events))


# --------------------------------------------------------------------------- metamorphic


@given(formulas(3), streams())
@settings(max_examples=100, deadline=None)
def test_or_is_a_union_and_filter_only_removes(formula, events):
    union = reference_matches(Q(OR(formula, E("A"))), events)
    parts = reference_matches(Q(formula), events) + reference_matches(Q(E("A")), events)
    assert_same_matches(union, list({(m.key(), m.partition): m for m in parts}.values()))
    # Rule 1 on A, which only one branch binds (an empty set passes).
    filtered = reference_matches(Q(FILTER(OR(formula, E("A")), cmp("A.v", ">", 1))), events)
    assert {m.key() for m in filtered} <= {m.key() for m in union}


@given(formulas(3), streams(max_size=8))
@settings(max_examples=100, deadline=None)
def test_outer_filter_equals_filter_where_bound(formula, events):
    # Rule 2: `A AS x ; (φ FILTER x.v > 1)` = `(A AS x FILTER x.v > 1) ; φ`, φ not defining x.
    if "x" in vdef(formula):
        return
    atom = cmp("x.v", ">", 1)
    outer = seq(AS(E("A"), x), FILTER(formula, atom))
    moved = seq(FILTER(AS(E("A"), x), atom), formula)
    assert_same_matches(reference_matches(Q(outer), events), reference_matches(Q(moved), events))


@given(queries(formulas(3), limit=False), streams())
@settings(max_examples=100, deadline=None)
def test_consumption_and_strategies_only_remove(query, events):
    full = {
        m.key()
        for m in reference_matches(
            dataclasses.replace(query, consume="NONE", strategy="ALL"), events
        )
    }
    assert {m.key() for m in reference_matches(query, events)} <= full


@pytest.mark.slow
@given(queries(formulas(4, binary=True)), streams(max_size=10))
@settings(max_examples=2000, deadline=None)
def test_generated_queries_long_run(query, events):
    ms = reference_matches(query, events)
    if query.limit is not None:
        check_limited(ms, query, events)
