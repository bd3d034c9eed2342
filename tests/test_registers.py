"""Registers under ``+`` (issue #17, item 3): ``PREV(y).a`` reads y's event in the previous
iteration of the ``+`` whose body binds y (docs/language.md, "Registers").

Syntax (parse, print, errors at the offending text), the RMA paper's motivating example
("the temperature of the last event is higher than that of the previous event") with the
matches derived by hand from the definition, a direct count of rising subsequences, and
property tests against the brute-force reference (tests/reference.py, which evaluates ``+``
iteration by iteration, independently of the post-filter that runs these queries).
"""

from __future__ import annotations

import itertools

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cer_cli.api import compile_query
from cer_cli.cli import cli
from cer_cli.plan import plan
from cer_cli.query import ast
from cer_cli.query.errors import QueryError
from cer_cli.query.parser import parse
from cer_cli.query.printer import to_text
from cer_cli.query.scope import conjuncts
from tests import reference
from tests.builders import events_frame
from tests.gen_formulas import projections, simple_windows
from tests.test_pcea import check_against_reference, valued_streams

# --------------------------------------------------------------------------- syntax


def test_prev_parses_prints_and_round_trips():
    q = parse("(T AS y FILTER y.v > PREV(y).v * 1.5 + 1)+")
    cmp = q.formula.body.predicate
    assert cmp.left == ast.AttrRef("y", "v")
    assert cmp.right.left.left == ast.PrevRef("y", "v")
    assert ast.PrevRef("y", "v") != ast.AttrRef("y", "v")
    text = to_text(q)
    assert "y.v > ((PREV(y).v * 1.5) + 1)" in text
    assert parse(text) == q
    assert parse("(T AS y FILTER y.v > prev(y).v)+") == parse("(T AS y FILTER y.v > PREV(y).v)+")


@pytest.mark.parametrize(
    "text, words, at",
    [
        ("T AS y FILTER y.tmp > PREV(y).tmp", "outside any '+'", "y.tmp > PREV(y).tmp"),
        ("((T AS y FILTER y.tmp > PREV(y).tmp)+ ; H)+", "itself repeated", "y.tmp > PREV(y).tmp"),
        ("((T AS y)+ FILTER y.tmp > PREV(y).tmp)+", "exactly one event per iteration", "y.tmp"),
        ("((T OR H AS y) FILTER y.id > PREV(y).id)+", "exactly one event per iteration", "y.id"),
        ("(T AS y ; T AS w FILTER y.tmp > PREV(y).tmp OR w.tmp > 1)+", "reads only y and PREV(y)",
         "y.tmp > PREV(y).tmp OR"),
        ("(T AS y FILTER y.tmp > PREV(y).tmp + w.hum)+ ; H AS w", "reads only y and PREV(y)",
         "y.tmp > PREV(y).tmp + w.hum"),
        ("(T AS y FILTER y.tmp > PREV(y).tmp)+ ; T AS y", "also bound outside", "y.tmp > PREV(y).tmp"),
        ("(T AS y FILTER y.tmp > LAG(y).tmp)+", "unknown function 'LAG'", "LAG"),
        ("(T AS y FILTER y.tmp > PREV(z).tmp)+", "never binds", "PREV(z).tmp"),
    ],
)
def test_misplaced_prev_is_an_error_at_the_predicate(text, words, at):
    with pytest.raises(QueryError) as e:
        compile_query(text)
    assert words in e.value.message
    span = e.value.span
    assert span is not None and text[span.start:span.end].startswith(at)
    out = CliRunner().invoke(cli, ["match", "-e", text, "samples/fig1.csv", "--no-progress"])
    assert out.exit_code == 2 and words in out.output


# --------------------------------------------------------------------------- examples


def positions(text: str, events: list[dict]) -> set[tuple[int, ...]]:
    got = list(compile_query(text).run(events_frame(events)))
    reference.assert_same_matches(got, reference.reference_matches(parse(text), events))
    return {tuple(p for p, _ in m.events) for m in got}


def temps(*values: int) -> list[dict]:
    return [{"type": "T", "stream": "S", "value": v} for v in values]


def test_rising_temperatures_rma_motivation():
    """Every event hotter than the previous one of the sequence; by the definition, the
    first iteration has no previous event and passes."""
    events = temps(5, 3, 4, 6)
    text = "SELECT * WHERE (T AS y FILTER y.value > PREV(y).value)+"
    assert positions(text, events) == {
        (0,), (1,), (2,), (3,),
        (1, 2), (1, 3), (2, 3), (0, 3),
        (1, 2, 3),
    }
    # the register compares with the previous iteration only, not with all earlier ones:
    # 1, 2, 1 alternates (a match), 1, 1 does not
    text = "SELECT * WHERE (T AS y FILTER y.value != PREV(y).value)+ WITHIN 2 EVENTS"
    assert positions(text, temps(1, 2, 1)) == {(0,), (1,), (2,), (0, 1), (1, 2), (0, 1, 2)}


def test_registers_of_an_iteration_between_two_events():
    """H, then T's each at least twice the previous minus one, then H (contiguous too)."""
    events = [{"type": t, "stream": "S", "value": v}
              for t, v in (("H", 0), ("T", 2), ("T", 3), ("T", 9), ("H", 0), ("T", 1))]
    text = "SELECT * WHERE H AS a ; (T AS y FILTER y.value >= PREV(y).value * 2 - 1)+ ; H AS b"
    assert positions(text, events) == {(0, 1, 4), (0, 2, 4), (0, 3, 4), (0, 1, 2, 4),
                                       (0, 1, 3, 4), (0, 2, 3, 4), (0, 1, 2, 3, 4)}
    text = "SELECT * WHERE H AS a : (T AS y FILTER y.value > PREV(y).value):+ : H AS b"
    assert positions(text, events) == {(0, 1, 2, 3, 4)}


def test_rising_subsequences_counted_directly():
    """The number of strictly rising subsequences of T values within a window, counted by
    enumerating index sets (independent of both the engine and the reference)."""
    values = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7]
    w = 4
    events = temps(*values)
    expected = 0
    for k in range(1, w + 2):
        for idx in itertools.combinations(range(len(values)), k):
            if idx[-1] - idx[0] <= w and all(values[a] < values[b]
                                              for a, b in itertools.pairwise(idx)):
                expected += 1
    text = f"SELECT * WHERE (T AS y FILTER y.value > PREV(y).value)+ WITHIN {w} EVENTS"
    assert compile_query(text).executor().count(events_frame(events)) == expected


def test_explain_says_how_the_register_runs():
    """One comparison with PREV(y) on an iterated event is the PCEA's register; another
    shape of it is the post-filter's, and explain says which per predicate."""
    text = "SELECT * WHERE (T AS y FILTER y.value > PREV(y).value)+ WITHIN 5 EVENTS"
    compiled = compile_query(text)
    assert compiled.correlation.methods == ("hash join",)
    assert compiled.rewritten.pcea.registers
    (m,) = compiled.correlation.predicates
    assert "register" in m.reason and "ordered index" in m.cost
    out = CliRunner().invoke(cli, ["explain", "-e", text]).output
    assert "(y.value > PREV(y).value): hash join — " in out
    text = "SELECT * WHERE (T AS y FILTER y.value - PREV(y).value > 1)+ WITHIN 5 EVENTS"
    (m,) = compile_query(text).correlation.predicates
    assert m.method == "post-filter" and "consecutive events" in m.reason


# --------------------------------------------------------------------------- property


@st.composite
def register_queries(draw):
    """``[H AS x ;] (body FILTER y.a rel PREV(y).b ...)+ [; H AS z]`` with a body binding y
    once per iteration, ``+`` or ``:+``, arithmetic on either side, a second comparison or
    a unary filter sometimes; random window, SELECT, FROM, PARTITION BY, strategy."""
    typ = draw(st.sampled_from(("A", "B")))
    body: ast.Formula = ast.As(ast.EventType(typ), "y")
    if draw(st.integers(0, 3)) == 0:
        body = ast.Seq(body, ast.As(ast.EventType(draw(st.sampled_from(("A", "B", "C")))), "w"))
    attr = draw(st.sampled_from(("v", "v", "k", "f")))
    cur: ast.Expr = ast.AttrRef("y", attr)
    prev: ast.Expr = ast.PrevRef("y", draw(st.sampled_from((attr, attr, "id"))))
    if draw(st.booleans()):
        prev = ast.BinOp(draw(st.sampled_from(("*", "+", "-"))), prev,
                         ast.Literal(draw(st.sampled_from((2, 1, 0.5)))))
    op = draw(st.sampled_from(ast.COMPARE_OPS))
    pred: ast.Predicate = ast.Compare(op, cur, prev) if draw(st.booleans()) else \
        ast.Compare(ast.COMPARE_OPS[ast.COMPARE_OPS.index(op)], prev, cur)
    if draw(st.integers(0, 3)) == 0:
        pred = ast.And(pred, ast.Compare(draw(st.sampled_from(("<", ">="))), ast.PrevRef("y", "v"),
                                         ast.AttrRef("y", "id")))
    if draw(st.integers(0, 3)) == 0:
        pred = ast.And(pred, ast.Compare("<=", ast.AttrRef("y", "v"), ast.Literal(2)))
    f: ast.Formula = ast.Plus(ast.Filter(body, pred), contiguous=draw(st.integers(0, 3)) == 0)
    if draw(st.booleans()):
        f = ast.Seq(ast.As(ast.EventType("C"), "x"), f)
    if draw(st.booleans()):
        f = ast.Seq(f, ast.As(ast.EventType("C"), "z"))
    labels = sorted(reference.vdef(f))
    projection = draw(projections(labels, 2))
    window = draw(simple_windows(5))
    return ast.Query(
        formula=f,
        strategy=draw(st.sampled_from(("ALL", "ALL", "ANY", "NEXT", "MAX"))),
        select=projection,
        streams=draw(st.sampled_from((None, None, ("S1",)))),
        partition_by=draw(st.sampled_from(((), (), (("id",),)))),
        within=window,
        consume=draw(st.sampled_from(("NONE", "NONE", "ANY"))),
        limit=draw(st.sampled_from((None, None, 2))),
    )


@given(register_queries(), valued_streams(), st.booleans())
@settings(max_examples=250, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_registers_equal_the_reference(query, events, one_by_one):
    try:
        compiled = plan(query)
    except QueryError:
        assume(False)
    if compiled.rewritten.formula is not None:
        assert ("hash join" in compiled.correlation) == engine_register(query)
    check_against_reference(query, events, one_by_one)


def engine_register(query: ast.Query) -> bool:
    """The criterion for the PCEA's register, decided here from the generator's shape: a
    skipping ``+`` of one event, one comparison with PREV(y), strategy ALL/ANY, no CONSUME."""
    plus = next(n for n in _walk(query.formula) if isinstance(n, ast.Plus))
    body = plus.body
    registers = [c for c in conjuncts(body.predicate) if "PREV(" in to_text(c)]
    return (not plus.contiguous and isinstance(body.formula, ast.As)
            and len(registers) == 1 and query.strategy in ("ALL", "ANY")
            and query.consume == "NONE")


def _walk(f: ast.Formula):
    yield f
    for child in (getattr(f, "left", None), getattr(f, "right", None), getattr(f, "body", None)):
        if isinstance(child, (ast.Seq, ast.Plus, ast.As, ast.EventType, ast.Filter)):
            yield from _walk(child)
