"""Printer: canonical text that parses back to the same AST."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cer_cli.query import ast
from cer_cli.query.errors import QueryError
from cer_cli.query.parser import parse
from cer_cli.query.printer import groups_text, quote_name, shown, to_text, window_span
from cer_cli.query.scope import strip_var
from tests import gen_ast

_FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_FAST
@given(gen_ast.queries)
def test_round_trip_random_queries(query):
    assert parse(to_text(query)) == query


@_FAST
@given(gen_ast.formulas)
def test_round_trip_random_formulas(formula):
    assert parse(to_text(formula)).formula == formula


@_FAST
@given(gen_ast.queries)
def test_printing_is_canonical(query):
    text = to_text(query)
    assert to_text(parse(text)) == text


@_FAST
@given(gen_ast.predicates)
def test_round_trip_predicates_under_filter(pred):
    query = parse(f"A FILTER {to_text(pred)}")
    assert query.formula == ast.Filter(ast.EventType("A"), pred)


def test_keywords_upper_case_and_one_clause_per_line():
    q = parse("select max * from s where a as x ; b filter x[p > 1] partition by [k] "
              "within 2 minutes consume by any limit 3")
    assert to_text(q).splitlines() == [
        "SELECT MAX *",
        "FROM s",
        "WHERE (((a AS x) ; b) FILTER x[(p > 1)])",
        "PARTITION BY [k]",
        "WITHIN 2 minutes",
        "CONSUME BY ANY",
        "LIMIT 3",
    ]


def test_single_variable_predicates_print_core_style_multi_variable_cel_style():
    pred = ast.And(
        ast.Compare(">", ast.AttrRef("x", "tmp"), ast.Literal(40)),
        ast.Compare("=", ast.AttrRef("x", "id"), ast.AttrRef("y", "id")),
    )
    assert to_text(pred) == "(x[(tmp > 40)] AND (x.id = y.id))"
    assert to_text(ast.Compare("<", ast.AttrRef("S1>BUY", "p"), ast.Literal(1))) == "S1>BUY[(p < 1)]"


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        (ast.Literal(-3), "-3"),
        (ast.Neg(ast.Literal(3)), "-(3)"),
        (ast.BinOp("-", ast.AttrRef("x", "a"), ast.Literal(-3)), "(x.a - -3)"),
        (ast.Neg(ast.Neg(ast.AttrRef("x", "a"))), "-(-(x.a))"),
    ],
)
def test_negative_literals_and_negation_stay_apart(expr, text):
    assert to_text(expr) == text
    pred = ast.Compare("=", expr, ast.Literal(0))
    assert parse(f"A FILTER {to_text(pred)}").formula.predicate == pred


@pytest.mark.parametrize(
    ("name", "text"),
    [("price", "price"), ("second", "second"), ("events", "`events`"), ("Select", "`Select`"), ("a b", "`a b`"),
     ("a`b", "`a``b`"), ("1x", "`1x`"), ("größe", "größe"), ("温度", "温度"), ("é$", "`é$`")],
)
def test_quote_name(name, text):
    assert quote_name(name) == text


def test_strings_escape_quotes():
    pred = ast.Compare("=", ast.AttrRef("x", "n"), ast.Literal("O'Neil"))
    assert to_text(pred) == "x[(n = 'O''Neil')]"


def test_not_atom_must_be_an_event_type():
    with pytest.raises(ValueError):
        to_text(ast.FNot(ast.Seq(ast.EventType("A"), ast.EventType("B"))))


@_FAST
@given(gen_ast.queries, st.data())
def test_mutated_queries_raise_only_query_errors(query, data):
    text = to_text(query)
    pos = data.draw(st.integers(0, len(text)))
    edit = data.draw(st.sampled_from(["delete", "insert", "replace"]))
    piece = data.draw(st.sampled_from(list("()[]{};:+,.-'\"`*/<>=!") + [
        " OR ", " AND ", " FILTER ", " NOT ", " AS ", "--", "/*", " WITHIN ", "x", "1"]))
    if edit == "delete":
        text = text[:pos] + text[pos + len(piece):]
    elif edit == "insert":
        text = text[:pos] + piece + text[pos:]
    else:
        text = text[:pos] + piece + text[pos + 1:]
    try:
        parse(text)
    except QueryError as e:
        assert e.span is not None and e.line is not None


def test_shown_is_to_text_without_its_outer_parentheses():
    """The one printer quotes predicates and formulas in messages and ``cer explain``: the
    canonical text without the outer parentheses (parentheses inside strings and quoted
    names do not count); a predicate whose variable was erased (an atom of the alphabet)
    reads its attributes by bare name."""
    q = parse("SELECT * WHERE T AS x ; H AS y FILTER x.tmp > 40 AND x.`a(b` = 'c)(' AND x.id = y.id")
    pred = q.formula.predicate
    assert shown(pred) == to_text(pred)[1:-1]
    assert shown(pred.left.right) == "x[(`a(b` = 'c)(')]"
    assert shown(pred.right) == "x.id = y.id"
    assert shown(strip_var(pred.left)) == "(tmp > 40) AND (`a(b` = 'c)(')"
    assert shown(q.formula.formula) == "(T AS x) ; (H AS y)"
    assert shown(ast.AttrRef("x", "v")) == "x.v"


def test_groups_and_windows_have_one_text():
    """PARTITION BY groups and a window's reach are printed once, for the query text,
    the executors' descriptions and the Spark fan-out."""
    q = parse("SELECT * WHERE A ; B PARTITION BY [id, `user id`], [k] WITHIN 5 seconds")
    assert groups_text(q.partition_by) == "[id, user id], [k]"
    assert "PARTITION BY [id, `user id`], [k]" in to_text(q)
    assert window_span(q.within) == "5 seconds of event time"  # the user's unit
    assert window_span(parse("A WITHIN 1 hour 30 minutes").within) == "1 hour 30 minutes of event time"
    assert window_span(ast.EventsWindow(3)) == "3 events"
    assert window_span(ast.AttributeWindow(2, "seq")) == "2 of attribute seq"
