"""Atomic predicates: polars evaluation agrees with a plain-Python evaluation of the same
predicate on random rows (nulls, negative integer division, floats, strings), and symbol
ids are interned stably across batches."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cer_cli.compiler.cea import holds
from cer_cli.compiler.predicates import (
    Alphabet,
    AttrTest,
    StreamTest,
    TypeTest,
    atom_expression,
    predicate_expression,
)
from cer_cli.events import STREAM, TYPE
from cer_cli.query import ast as A
from cer_cli.query.errors import QueryError
from tests.gen_formulas import predicate_trees

INT_ATTRS = ("a", "b")


class Undefined(Exception):
    """A null attribute or a division by zero: the whole atom is false."""


def trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def py_value(e, row):
    if isinstance(e, A.Literal):
        return e.value
    if isinstance(e, A.AttrRef):
        if row.get(e.attr) is None:
            raise Undefined
        return row[e.attr]
    if isinstance(e, A.Neg):
        return -py_value(e.operand, row)
    a, b = py_value(e.left, row), py_value(e.right, row)
    if e.op in "/%" and b == 0:
        raise Undefined
    ints = isinstance(a, int) and isinstance(b, int)
    if e.op == "/":
        return trunc_div(a, b) if ints else a / b
    if e.op == "%":
        return a - b * trunc_div(a, b) if ints else math.fmod(a, b)
    return {"+": a + b, "-": a - b, "*": a * b}[e.op]


def py_truth(p, row) -> bool:
    if isinstance(p, A.BoolConst):
        return p.value
    if isinstance(p, A.And):
        return py_truth(p.left, row) & py_truth(p.right, row)  # no short circuit: strict
    if isinstance(p, A.Or):
        return py_truth(p.left, row) | py_truth(p.right, row)
    if isinstance(p, A.Not):
        return not py_truth(p.operand, row)
    if isinstance(p, A.Compare):
        a, b = py_value(p.left, row), py_value(p.right, row)
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "=": a == b, "!=": a != b}[p.op]
    if isinstance(p, A.Like):
        return re.search(p.pattern, py_value(p.operand, row)) is not None
    if isinstance(p, A.InSet):
        v = py_value(p.operand, row)
        return (v in [lit.value for lit in p.values]) != p.negated
    if isinstance(p, A.InInterval):
        v = py_value(p.operand, row)
        inside = (p.low is None or v >= p.low.value) and (p.high is None or v <= p.high.value)
        return inside != p.negated
    v, lo, hi = py_value(p.operand, row), py_value(p.low, row), py_value(p.high, row)
    return lo <= v <= hi


def py_holds(p, row) -> bool:
    """An atom (a comparison, or an ``x[...]`` group: scoped connectives, possibly negated)
    is false where a value it reads is missing; connectives between atoms combine their
    truth values, with NOT moved down to the atoms (De Morgan)."""
    between = (A.And, A.Or, A.Not)
    if isinstance(p, (A.And, A.Or)) and not p.scoped:
        left, right = py_holds(p.left, row), py_holds(p.right, row)
        return (left and right) if isinstance(p, A.And) else (left or right)
    if isinstance(p, A.Not) and not p.scoped and isinstance(p.operand, between) \
            and not p.operand.scoped:
        q = p.operand
        if isinstance(q, A.Not):
            return py_holds(q.operand, row)
        inner = A.And if isinstance(q, A.Or) else A.Or
        return py_holds(inner(A.Not(q.left), A.Not(q.right)), row)
    try:
        return py_truth(p, row)
    except Undefined:
        return False


def group(p):
    """``p`` as one ``x[...]`` group: every connective in it scoped."""
    if isinstance(p, (A.And, A.Or)):
        return dataclasses.replace(p, left=group(p.left), right=group(p.right), scoped=True)
    if isinstance(p, A.Not):
        return A.Not(group(p.operand), scoped=True)
    return p


# Tiny floats are excluded: polars divides by subnormals as if they were zero, and float
# `%` is computed as a - b * trunc(a / b), which is inexact when a / b is huge.
floats = st.floats(-5, 5, allow_subnormal=False).filter(lambda v: v == 0 or abs(v) > 1e-3)
ints = st.integers(-9, 9)
int_exprs = st.recursive(
    st.one_of(st.sampled_from(INT_ATTRS).map(lambda a: A.AttrRef("", a)), ints.map(A.Literal)),
    lambda sub: st.one_of(
        st.builds(A.BinOp, st.sampled_from(A.ARITH_OPS), sub, sub), st.builds(A.Neg, sub)
    ),
    max_leaves=4,
)
num_exprs = st.one_of(
    int_exprs,
    st.builds(A.BinOp, st.sampled_from(A.ARITH_OPS), int_exprs,
              st.one_of(st.just(A.AttrRef("", "f")), floats.map(A.Literal))),
)
str_exprs = st.one_of(st.just(A.AttrRef("", "s")), st.sampled_from(["ab", "b", ""]).map(A.Literal))
trees = predicate_trees(num_exprs, int_exprs, str_exprs, ints, st.just(A.AttrRef("", "s")),
                        ["a", "^b", "b$", "a.b"], max_leaves=4)
# written between atoms (x.a > 1 OR x.b < 2), as one group (x[a > 1 OR b < 2]), or mixed
predicates = st.one_of(trees, trees.map(group),
                       st.builds(A.Or, trees.map(group), trees),
                       st.builds(A.Not, st.builds(A.And, trees, trees.map(group))))
rows = st.lists(
    st.fixed_dictionaries({
        "a": st.none() | ints,
        "b": st.none() | ints,
        "f": st.none() | floats,
        "s": st.none() | st.sampled_from(["ab", "ba", "b", "", "xab"]),
    }),
    min_size=1,
    max_size=12,
)


def frame(rows_: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "a": pl.Series([r["a"] for r in rows_], dtype=pl.Int64),
            "b": pl.Series([r["b"] for r in rows_], dtype=pl.Int32),
            "f": pl.Series([r["f"] for r in rows_], dtype=pl.Float64),
            "s": pl.Series([r["s"] for r in rows_], dtype=pl.String),
        }
    )


@settings(max_examples=400, deadline=None)
@given(pred=predicates, rows_=rows)
def test_polars_agrees_with_python(pred, rows_):
    df = frame(rows_)
    try:
        got = df.select(atom_expression(AttrTest(pred), df.schema)).to_series().to_list()
    except QueryError as e:  # exact or refused: only arithmetic that could leave 128 bits
        assert "may exceed 128 bits" in str(e)
        return
    assert got == [py_holds(pred, r) for r in rows_]


def test_integer_division_truncates_and_remainder_is_c_style():
    df = frame([{"a": -7, "b": 2, "f": None, "s": None}, {"a": 7, "b": -2, "f": None, "s": None}])
    quotient = A.BinOp("/", A.AttrRef("", "a"), A.AttrRef("", "b"))
    remainder = A.BinOp("%", A.AttrRef("", "a"), A.AttrRef("", "b"))
    for expr, expected in ((quotient, -3), (remainder, None)):
        if expected is None:
            continue
        pred = A.Compare("=", expr, A.Literal(expected))
        assert df.select(atom_expression(AttrTest(pred), df.schema)).to_series().to_list() == [True, True]
    rem = A.Compare("=", remainder, A.Literal(-1))
    assert df.select(atom_expression(AttrTest(rem), df.schema)).to_series().to_list() == [True, False]


def test_absent_attribute_and_type_mismatch_are_false():
    df = pl.DataFrame({"a": [1, 2], "s": ["x", "y"]})
    for pred in (
        A.Compare(">", A.AttrRef("", "missing"), A.Literal(0)),
        A.Not(A.Compare(">", A.AttrRef("", "missing"), A.Literal(0))),
        A.Compare("=", A.AttrRef("", "s"), A.Literal(1)),
    ):
        assert df.select(atom_expression(AttrTest(pred), df.schema)).to_series().to_list() == [False, False]



def test_nan_is_no_value_even_under_not_or_or():
    """A NaN attribute (or a NaN computed from finite-looking parts) cannot be compared:
    polars alone would order NaN above every number and make it equal to itself."""
    nan = float("nan")
    df = pl.DataFrame({"f": [nan, 1.0], "a": [1, 1]})
    f, a = A.AttrRef("", "f"), A.AttrRef("", "a")
    for pred in (
        A.Compare(">", f, A.Literal(0)),
        A.Compare("=", f, f),
        A.Not(A.Compare("<", f, A.Literal(0))),
        # one group x[a > 0 OR f > 0]: a NaN anywhere in it fails it
        A.Or(A.Compare(">", a, A.Literal(0)), A.Compare(">", f, A.Literal(0)), scoped=True),
        A.InInterval(f, A.Literal(0), None, True),
    ):
        assert df.select(atom_expression(AttrTest(pred), df.schema)).to_series().to_list()[0] is False
    # between atoms (x.a > 0 OR x.f > 0), the atom on a holds alone; NOT reaches the atoms
    # (NOT(x.a < 0 AND x.f > 0) is x.a >= 0 OR x.f <= 0)
    for pred in (A.Or(A.Compare(">", a, A.Literal(0)), A.Compare(">", f, A.Literal(0))),
                 A.Not(A.And(A.Compare("<", a, A.Literal(0)), A.Compare(">", f, A.Literal(0))))):
        assert df.select(atom_expression(AttrTest(pred), df.schema)).to_series().to_list()[0] is True
    inf = pl.DataFrame({"f": [float("inf")]})
    undefined = A.Compare(">=", A.BinOp("-", f, f), A.Literal(0))  # inf - inf
    assert inf.select(atom_expression(AttrTest(undefined), inf.schema)).item() is False


def test_connectives_between_atoms_keep_their_meaning_when_merged_into_one_test(tmp_path):
    """The simplify pass merges the filters of one event into one test; merged into one
    group x[...], an atom on a null failed the whole test: x.id < 0 OR x.v = 0 found no
    match on id null, v 0 (the reference: one, through x.v = 0)."""
    from tests.builders import run

    log = tmp_path / "log.parquet"
    pl.DataFrame({"type": ["A", "A"], "v": [0, 5],
                  "id": pl.Series([None, 3], dtype=pl.Int64)}).write_parquet(log)
    for text, want in (("A FILTER A.id < 0 OR A.v = 0", 1), ("A FILTER A[id < 0] OR A[v = 0]", 1),
                       ("A FILTER A[id < 0 OR v = 0]", 0),
                       ("A AS x FILTER x.id < 0 OR NOT(x.v < 0)", 2),
                       ("A FILTER NOT(A.id < 0 AND A.v > 0)", 2),
                       ("A FILTER NOT A[id < 0 AND v > 0]", 1),
                       ("A AS x ; B FILTER x.id < 0 OR x.v = 0", 0)):
        result = run("match", "-e", text, str(log), "--count")
        assert result.exit_code == 0, result.output
        assert result.output.splitlines()[-1] == str(want), text


def test_predicate_expression_reads_columns_named_by_the_caller():
    """Between events: one row per combination, columns ``var.attr``; same semantics."""
    df = pl.DataFrame({"x.v": [1, 4, None], "y.v": [2, 2, 2]})
    x, y = A.AttrRef("x", "v"), A.AttrRef("y", "v")
    pred = A.Not(A.Compare("<", x, y))
    got = df.select(predicate_expression(pred, df.schema, column=lambda r: f"{r.var}.{r.attr}"))
    assert got.to_series().to_list() == [False, True, False]
    assert df.select(predicate_expression(pred, df.schema)).to_series().to_list() == [False] * 3

def _filtered(var, pred):
    return A.Filter(A.As(A.EventType("E"), var), pred)


def test_equal_atoms_on_different_variables_share_a_bit():
    p = A.Compare(">", A.AttrRef("x", "v"), A.Literal(1))
    q = A.Compare(">", A.AttrRef("y", "v"), A.Literal(1))
    f = A.Seq(_filtered("x", p), A.Filter(A.As(A.EventType("S", "S1"), "y"), q))
    alphabet = Alphabet.from_formula(f)
    assert alphabet.atoms == (TypeTest("E"), AttrTest(A.Compare(">", A.AttrRef("", "v"), A.Literal(1))),
                              TypeTest("S"), StreamTest("S1"))
    assert alphabet.guard(p) == alphabet.guard(q)


def test_symbols_are_stable_across_batches():
    f = A.Seq(_filtered("x", A.Compare(">", A.AttrRef("x", "v"), A.Literal(1))), A.EventType("H"))
    alphabet = Alphabet.from_formula(f)
    batch1 = pl.DataFrame({TYPE: ["E", "H", "E"], STREAM: ["s"] * 3, "v": [5, 0, 0]})
    batch2 = pl.DataFrame({TYPE: ["H", "X", "E"], STREAM: ["s"] * 3, "v": [None, 3, 9]})
    ids1, masks1 = alphabet.symbols(batch1)
    ids2, masks2 = alphabet.symbols(batch2)
    assert ids1.dtype == np.int32 and ids2.dtype == np.int32
    assert masks2[: len(masks1)] == masks1
    assert ids1[1] == ids2[0]  # both H events: the same mask keeps its id
    e = alphabet.index(TypeTest("E"))
    big = alphabet.guard(A.Compare(">", A.AttrRef("x", "v"), A.Literal(1)))
    assert [holds(big, masks1[i]) for i in ids1] == [True, False, False]
    assert [bool(masks2[i] >> e & 1) for i in ids2] == [False, False, True]
    empty_ids, _ = alphabet.symbols(batch1.head(0))
    assert empty_ids.shape == (0,)


def test_more_than_64_atoms():
    preds = [A.Compare("=", A.AttrRef("x", "v"), A.Literal(i)) for i in range(70)]
    f = A.EventType("E")
    for p in preds:
        f = A.FOr(f, _filtered("x", p))
    alphabet = Alphabet.from_formula(f)
    df = pl.DataFrame({TYPE: ["E"] * 4, STREAM: ["s"] * 4, "v": [69, 0, 69, 68]})
    ids, masks = alphabet.symbols(df)
    assert ids[0] == ids[2] and len(set(ids.tolist())) == 3
    g = alphabet.guard(preds[69])
    assert [holds(g, masks[i]) for i in ids] == [True, False, True, False]


@pytest.mark.parametrize("atoms", [3, 16, 17, 63, 70])
def test_summaries_give_each_rows_mask(atoms: int) -> None:
    """``summaries`` (16-bit words, 64-bit words, packed rows) against each atom evaluated
    on its own: ``distinct[codes[i]]`` is row i's mask, and ``distinct`` holds each mask
    present once; ``symbols`` numbers the same masks."""
    preds = [A.Compare(">", A.AttrRef("x", "v"), A.Literal(i)) for i in range(atoms - 1)]
    f = A.EventType("E")
    for p in preds:
        f = A.FOr(f, _filtered("x", p))
    alphabet = Alphabet.from_formula(f)
    assert len(alphabet.atoms) == atoms
    rng = np.random.default_rng(atoms)
    v = [None if x < 0 else int(x) for x in rng.integers(-3, atoms + 2, 500)]
    df = pl.DataFrame({TYPE: rng.choice(["E", "F"], 500).tolist(), STREAM: ["s"] * 500, "v": v})
    codes, distinct = alphabet.summaries(df)
    bits = df.select(alphabet.expressions(df.schema)).fill_null(False).rows()
    want = [sum(1 << i for i, b in enumerate(row) if b) for row in bits]
    assert codes.dtype == np.int32 and len(codes) == 500
    assert [distinct[c] for c in codes.tolist()] == want
    assert sorted(distinct) == sorted(set(want))
    ids, masks = alphabet.symbols(df)
    assert [masks[i] for i in ids.tolist()] == want
    assert alphabet.summaries(df.head(0))[0].shape == (0,)


def test_invalid_like_regex_is_a_query_error():
    span = A.Span(0, 5)
    f = _filtered("x", A.Like(A.AttrRef("x", "s"), "(", span=span))
    with pytest.raises(QueryError) as info:
        Alphabet.from_formula(f)
    assert info.value.span == span


def test_float_remainder_is_exact_fmod():
    """Found by the property test above: ``1 % 0.2`` is 0.19999999999999996 (C's fmod), so
    ``1 % f <= a`` with ``a = 0`` is false; polars' ``a - b * trunc(a / b)`` gave 0 (a / b
    rounds to 5) and true. A null or zero divisor stays no value (false)."""
    df = frame([{"a": 0, "b": None, "f": f, "s": None} for f in (0.2, -0.2, None, 0.0)])
    rem = A.BinOp("%", A.Literal(1), A.AttrRef("", "f"))
    pred = A.Compare("<=", rem, A.AttrRef("", "a"))
    rows_ = df.to_dicts()
    want = [py_holds(pred, r) for r in rows_]
    assert want == [False, False, False, False]
    assert df.select(atom_expression(AttrTest(pred), df.schema)).to_series().to_list() == want
    value = A.Compare(">", rem, A.Literal(0.19))
    assert df.select(atom_expression(AttrTest(value), df.schema)).to_series().to_list() == \
        [True, True, False, False]
