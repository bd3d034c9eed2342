"""Parser: the papers' queries, precedence, every clause, and the errors users see."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cer_cli.query import ast
from cer_cli.query.ast import (
    And,
    As,
    BinOp,
    BoolConst,
    Compare,
    DurationWindow,
    EventsWindow,
    Filter,
    FNot,
    FOr,
    InInterval,
    InRange,
    InSet,
    Like,
    Literal,
    Neg,
    Not,
    Or,
    Plus,
    Query,
    SelectItem,
    Seq,
)
from cer_cli.query.errors import QueryError
from cer_cli.query.parser import MAX_DEPTH, parse
from tests.builders import E, cmp, conj, ref, seq


def f(text):
    return parse(text).formula


# ------------------------------------------------------------------ Foundations of CEP (§3, the paper's formulas)

# The papers write ∧ for AND; the formulas are otherwise as printed.
PHI1 = "(T AS x ; H AS y) FILTER (x.tmp>40 AND y.hum<=25 AND x.id=0 AND y.id=0)"
PHI2 = "[(T AS x ; H AS y) OR (H AS y ; T AS x)] FILTER (x.tmp>40 AND y.hum<=25 AND x.id=0 AND y.id=0)"
PHI3 = "[H AS x ; (T AS y FILTER y.id=1)+ ; H AS z] FILTER (x.hum<30 AND z.hum>60 AND x.id=z.id=1)"
PHI4 = "[H AS x ; (T AS y FILTER y.id=x.id)+ ; H AS z] FILTER (x.hum<30 AND z.hum>60 AND x.id=z.id)"
PHI5 = "(H AS x) FILTER (y.tmp <= 30)"
PHI6 = "(T AS x) ; ((T AS y FILTER x.temp>=40) OR (H AS y FILTER x.temp<40))"

_TH = conj(cmp("x", "tmp", ">", 40), cmp("y", "hum", "<=", 25), cmp("x", "id", "=", 0),
           cmp("y", "id", "=", 0))


def test_foundations_phi1_phi2():
    assert f(PHI1) == Filter(Seq(As(E("T"), "x"), As(E("H"), "y")), _TH)
    both = FOr(Seq(As(E("T"), "x"), As(E("H"), "y")), Seq(As(E("H"), "y"), As(E("T"), "x")))
    assert f(PHI2) == Filter(both, _TH)


def test_foundations_phi3_phi4_chained_equality():
    iter3 = Plus(Filter(As(E("T"), "y"), cmp("y", "id", "=", 1)))
    body3 = seq(As(E("H"), "x"), iter3, As(E("H"), "z"))
    chain = And(cmp("x", "id", "=", ref("z", "id")), cmp("z", "id", "=", 1))
    assert f(PHI3) == Filter(body3, conj(cmp("x", "hum", "<", 30), cmp("z", "hum", ">", 60), chain))
    iter4 = Plus(Filter(As(E("T"), "y"), cmp("y", "id", "=", ref("x", "id"))))
    body4 = seq(As(E("H"), "x"), iter4, As(E("H"), "z"))
    pred4 = conj(cmp("x", "hum", "<", 30), cmp("z", "hum", ">", 60), cmp("x", "id", "=", ref("z", "id")))
    assert f(PHI4) == Filter(body4, pred4)


def test_foundations_phi5_phi6():
    assert f(PHI5) == Filter(As(E("H"), "x"), cmp("y", "tmp", "<=", 30))
    right = FOr(Filter(As(E("T"), "y"), cmp("x", "temp", ">=", 40)),
                Filter(As(E("H"), "y"), cmp("x", "temp", "<", 40)))
    assert f(PHI6) == Seq(As(E("T"), "x"), right)


def test_foundations_benchmark_q1_to_q6():
    A, B, C, D = (As(E(t), v) for t, v in zip("ABCD", "xyzw", strict=True))
    assert f("A AS x ; B AS y ; C AS z") == seq(A, B, C)
    assert f("A AS x ; B AS y ; C AS z ; D AS w") == seq(A, B, C, D)
    assert f("((A AS x OR B AS y) OR C AS z) ; D AS w") == Seq(FOr(FOr(A, B), C), D)
    assert f("(A AS x)+ ; (B AS y)") == Seq(Plus(A), B)
    assert f("(A AS x)+ ; (B AS y)+ ; C AS z") == seq(Plus(A), Plus(B), C)
    assert f("((A AS x)+ ; (B AS y))+ ; C AS z") == Seq(Plus(Seq(Plus(A), B)), C)


# ------------------------------------------------------------------ RMA paper (Part B)


def test_rma_or_between_filtered_formulas():
    t = As(E("T"), "x")
    want = FOr(Filter(t, cmp("x", "value", "<", -40)), Filter(t, cmp("x", "value", ">", 50)))
    assert f("T AS x FILTER x.value < -40 OR T AS x FILTER x.value > 50") == want
    # the paper's own spacing: `<-40` is `<` then the number -40
    phi4 = "(T AS x FILTER x.value<-40 OR T AS x FILTER x.value>50) ; (T AS y) FILTER y.id=x.id"
    assert f(phi4) == Filter(Seq(want, As(E("T"), "y")), cmp("y", "id", "=", ref("x", "id")))


def test_rma_other_examples():
    txy = Seq(As(E("T"), "x"), As(E("H"), "y"))
    assert f("(T AS x);(H AS y)") == txy
    assert f("(T AS x);(H AS y) FILTER x.id=y.id") == Filter(txy, cmp("x", "id", "=", ref("y", "id")))
    assert f("(T AS x FILTER x.id=y.id)+ ; (H AS y)") == Seq(
        Plus(Filter(As(E("T"), "x"), cmp("x", "id", "=", ref("y", "id")))), As(E("H"), "y"))
    nested = ("((T AS x1 ; T AS x2 FILTER x1.value=x2.value) ; "
              "(H AS x3 ; H AS x4 FILTER x3.value=x4.value)+)+")
    pair = Filter(Seq(As(E("T"), "x1"), As(E("T"), "x2")), cmp("x1", "value", "=", ref("x2", "value")))
    pair2 = Filter(Seq(As(E("H"), "x3"), As(E("H"), "x4")), cmp("x3", "value", "=", ref("x4", "value")))
    assert f(nested) == Plus(Seq(pair, Plus(pair2)))
    clobber = "((A AS x ; A AS w) OR (A AS w ; A AS x)) ; B AS z FILTER z.v=x.v"
    ax, aw = As(E("A"), "x"), As(E("A"), "w")
    assert f(clobber) == Filter(Seq(FOr(Seq(ax, aw), Seq(aw, ax)), As(E("B"), "z")),
                                cmp("z", "v", "=", ref("x", "v")))


# ------------------------------------------------------------------ CORE paper, Figure 1

CORE_Q1 = """SELECT * FROM Stock
WHERE SELL as msft; SELL as intel; SELL as amzn
FILTER msft[name="MSFT"] AND msft[price > 100]
   AND intel[name="INTC"]
   AND amzn[name="AMZN"] AND amzn[price < 2000]"""
CORE_Q2 = """SELECT b FROM Stock
WHERE (BUY or SELL) as s;
      (BUY or SELL) as b
PARTITION BY [name], [volume]
WITHIN 1 minute"""
# The paper prints `(BUY OR SELL as) high`, a typo for `(BUY OR SELL) as high`.
CORE_Q3 = """SELECT MAX * FROM Stock
WHERE (BUY OR SELL) as low; (BUY OR SELL)+ as mid; (BUY OR SELL) as high
FILTER low[price < 100] AND mid[price >= 100]
   AND mid[price <= 2000] AND high[price > 2000]
PARTITION BY [name]"""


def test_core_figure1_q1():
    sells = seq(As(E("SELL"), "msft"), As(E("SELL"), "intel"), As(E("SELL"), "amzn"))
    pred = conj(cmp("msft", "name", "=", "MSFT"), cmp("msft", "price", ">", 100),
                cmp("intel", "name", "=", "INTC"), cmp("amzn", "name", "=", "AMZN"),
                cmp("amzn", "price", "<", 2000))
    assert parse(CORE_Q1) == Query(Filter(sells, pred), streams=("Stock",))


def test_core_figure1_q2():
    bs = FOr(E("BUY"), E("SELL"))
    assert parse(CORE_Q2) == Query(
        Seq(As(bs, "s"), As(bs, "b")), select=(SelectItem("b"),), streams=("Stock",),
        partition_by=(("name",), ("volume",)), within=DurationWindow(((1, "minute"),)))


def test_core_figure1_q3():
    bs = FOr(E("BUY"), E("SELL"))
    body = seq(As(bs, "low"), As(Plus(bs), "mid"), As(bs, "high"))
    pred = conj(cmp("low", "price", "<", 100), cmp("mid", "price", ">=", 100),
                cmp("mid", "price", "<=", 2000), cmp("high", "price", ">", 2000))
    assert parse(CORE_Q3) == Query(Filter(body, pred), strategy="MAX", streams=("Stock",),
                                   partition_by=(("name",),))
    with pytest.raises(QueryError):  # the typo as printed is not a query
        parse(CORE_Q3.replace("(BUY OR SELL) as high", "(BUY OR SELL as) high"))


# ------------------------------------------------------------------ CORE benchmarks (App. D-G)


def test_core_stock_sequence_p3():
    q = parse("""SELECT * FROM S
        WHERE (SELL as T1; BUY as T2; BUY as T3)
        FILTER T1[name = 'INTC'] AND T2[name = 'RIMM'] AND T3[name = 'QQQ']
        WITHIN 10000 [stock_time]""")
    assert q == Query(
        Filter(seq(As(E("SELL"), "T1"), As(E("BUY"), "T2"), As(E("BUY"), "T3")),
               conj(cmp("T1", "name", "=", "INTC"), cmp("T2", "name", "=", "RIMM"),
                    cmp("T3", "name", "=", "QQQ"))),
        streams=("S",), within=ast.AttributeWindow(10000, "stock_time"))


def test_core_smart_homes_h3_prime():
    q = parse("""SELECT * FROM S
        WHERE (LOAD as L1; LOAD as L2; LOAD as L3; LOAD as NE) as L
        FILTER L[value > 76] AND L1[household_id = 0] AND L2[household_id = 2]
           AND L3[household_id = 4] AND NE[household_id = 1000]
        WITHIN 10 [plug_timestamp]""")
    loads = As(seq(*(As(E("LOAD"), v) for v in ("L1", "L2", "L3", "NE"))), "L")
    pred = conj(cmp("L", "value", ">", 76), cmp("L1", "household_id", "=", 0),
                cmp("L2", "household_id", "=", 2), cmp("L3", "household_id", "=", 4),
                cmp("NE", "household_id", "=", 1000))
    assert q.formula == Filter(loads, pred)
    assert q.within == ast.AttributeWindow(10, "plug_timestamp")


def test_core_taxi_t3():
    q = parse("""SELECT * FROM S
        WHERE (TRIP as loc1; TRIP as loc2; TRIP as loc3)
        FILTER loc1[pickup_loc = 'East Harlem North' AND dropoff_loc = 'Midwood']
           AND loc2[pickup_loc = 'Midwood' AND dropoff_loc = 'Gravesend']
        WITHIN 10000 [dropoff_datetime]""")
    # each x[...] is one atom (scoped); the AND between them is not
    p1 = And(cmp("loc1", "pickup_loc", "=", "East Harlem North"), cmp("loc1", "dropoff_loc", "=", "Midwood"),
             scoped=True)
    p2 = And(cmp("loc2", "pickup_loc", "=", "Midwood"), cmp("loc2", "dropoff_loc", "=", "Gravesend"),
             scoped=True)
    assert q.formula.predicate == And(p1, p2)


def test_core_other_operators_q1_to_q7():
    base = "SELL as msft; {m} as oracle; {m} as csco; SELL as amat"
    q1 = parse("SELECT * FROM S WHERE " + base.format(m="BUY") + " WITHIN 30000 [stock_time]")
    assert q1.formula == seq(As(E("SELL"), "msft"), As(E("BUY"), "oracle"), As(E("BUY"), "csco"),
                             As(E("SELL"), "amat"))
    q2 = parse("SELECT * FROM S WHERE " + base.format(m="BUY") + " FILTER msft[price > 26.0] AND "
               "oracle[price > 11.14] AND amat[price >= 18.92] WITHIN 30000 [stock_time]")
    assert q2.formula.predicate == conj(cmp("msft", "price", ">", 26.0),
                                        cmp("oracle", "price", ">", 11.14),
                                        cmp("amat", "price", ">=", 18.92))
    q3 = parse("SELECT * FROM S WHERE " + base.format(m="BUY") +
               " PARTITION BY [volume] WITHIN 30000 [stock_time] CONSUME BY ANY")
    assert (q3.partition_by, q3.consume) == ((("volume",),), "ANY")
    q4 = parse("SELECT * FROM S WHERE " + base.format(m="(BUY OR SELL)"))
    assert q4.formula.left.left.right == As(FOr(E("BUY"), E("SELL")), "oracle")
    q7 = parse("SELECT * FROM S WHERE SELL as msft; (BUY OR SELL)+ as qqq; SELL as amat "
               "FILTER qqq[name='QQQ'] AND qqq[volume=4000] WITHIN 30000 [stock_time]")
    assert q7.formula.formula.left.right == As(Plus(FOr(E("BUY"), E("SELL"))), "qqq")


# ------------------------------------------------------------------ docs/language.md examples


def test_core_examples_contiguous_iteration_and_projection():
    q = parse("""SELECT amzn FROM Stock
        WHERE (SELL):+ as msft; (SELL OR BUY) as intel; SELL as amzn
        FILTER msft[name='MSFT'] AND intel[name='INTL'] AND amzn[name='AMZN']
        WITHIN 1000 EVENTS""")
    assert q.formula.formula == seq(As(Plus(E("SELL"), True), "msft"),
                                    As(FOr(E("SELL"), E("BUY")), "intel"), As(E("SELL"), "amzn"))
    assert q.select == (SelectItem("amzn"),) and q.within == EventsWindow(1000)


def test_core_examples_negation():
    q = parse("SELECT * FROM Stock WHERE BUY; NOT(SELL FILTER SELL[name='MSFT']); "
              "NOT(BUY FILTER BUY[price < 100])")
    assert q.formula == seq(E("BUY"), FNot(Filter(E("SELL"), cmp("SELL", "name", "=", "MSFT"))),
                            FNot(Filter(E("BUY"), cmp("BUY", "price", "<", 100))))


def test_core_examples_in_range_with_arithmetic():
    q = parse("""SELECT msft, intel, amzn FROM Stock
        WHERE SELL as msft; SELL as intel; SELL as amzn
        FILTER msft[price IN RANGE (((quantity*100)/120), price * quantity)]
           AND intel[name='INTL'] AND amzn[name='AMZN']
        WITHIN 1000 EVENTS""")
    rng = InRange(ref("msft", "price"),
                  BinOp("/", BinOp("*", ref("msft", "quantity"), Literal(100)), Literal(120)),
                  BinOp("*", ref("msft", "price"), ref("msft", "quantity")))
    assert q.formula.predicate.left.left == rng
    assert q.select == (SelectItem("msft"), SelectItem("intel"), SelectItem("amzn"))


def test_core_examples_streams_partition_consume_limit():
    q = parse("SELECT S1>BUY FROM S1, S2 WHERE (S1>BUY OR S2>BUY) WITHIN 1000 EVENTS")
    assert q == Query(FOr(E("BUY", "S1"), E("BUY", "S2")), select=(SelectItem("S1>BUY"),),
                      streams=("S1", "S2"), within=EventsWindow(1000))
    q = parse("""SELECT * FROM S
        WHERE (SELL as msft; (BUY OR SELL) as oracle; (BUY OR SELL) as csco; SELL as amat)
        FILTER msft[name = 'MSFT'] AND oracle[name = 'ORCL'] AND csco[name = 'CSCO']
           AND amat[name = 'AMAT']
        PARTITION BY [volume]
        WITHIN 10000 [stock_time]
        CONSUME BY PARTITION
        LIMIT 1000""")
    assert (q.partition_by, q.consume, q.limit) == ((("volume",),), "PARTITION", 1000)


# ------------------------------------------------------------------ precedence (docs/language.md)


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("SELL ; BUY AS x", Seq(E("SELL"), As(E("BUY"), "x"))),
        ("SELL ; BUY OR BUY", FOr(Seq(E("SELL"), E("BUY")), E("BUY"))),
        ("A ; B FILTER x[a > 1]", Filter(Seq(E("A"), E("B")), cmp("x", "a", ">", 1))),
        ("(S>T ; H+ ; T AS t2) AS all_",
         As(Seq(Seq(E("T", "S"), Plus(E("H"))), As(E("T"), "t2")), "all_")),
        ("(SELL AS s FILTER s[price > 5]) ; BUY",
         Seq(Filter(As(E("SELL"), "s"), cmp("s", "price", ">", 5)), E("BUY"))),
        ("A : B ; C", Seq(E("A"), Seq(E("B"), E("C")), True)),
        ("A ; B : C", Seq(Seq(E("A"), E("B")), E("C"), True)),
        ("A OR B ; C", FOr(E("A"), Seq(E("B"), E("C")))),
        ("A AS x+", Plus(As(E("A"), "x"))),
        ("A+ AS x", As(Plus(E("A")), "x")),
        ("A ; B ; C", Seq(Seq(E("A"), E("B")), E("C"))),
        ("A OR B OR C", FOr(FOr(E("A"), E("B")), E("C"))),
        ("A FILTER x[a > 1] ; B", Seq(Filter(E("A"), cmp("x", "a", ">", 1)), E("B"))),
        ("A FILTER x[a > 1] FILTER y[b < 2]",
         Filter(Filter(E("A"), cmp("x", "a", ">", 1)), cmp("y", "b", "<", 2))),
    ],
)
def test_formula_precedence(text, tree):
    assert f(text) == tree


def test_bracket_group_is_one_atom():
    # x[p OR q] is one atom (scoped); x.p OR x.q and x[p] OR x[q] are two (issue #13)
    one = f("A FILTER x[a = 1 OR b = 2]").predicate
    two = f("A FILTER x.a = 1 OR x.b = 2").predicate
    assert one.scoped and not two.scoped
    assert f("A FILTER x[a = 1] OR x[b = 2]").predicate == two
    assert f("A FILTER NOT x[a = 1 AND b = 2]").predicate == Not(
        And(cmp("x", "a", "=", 1), cmp("x", "b", "=", 2), scoped=True))


def test_predicate_precedence():
    # NOT > comparison-level atoms > AND > OR
    p = f("A FILTER x[NOT a > 5 OR name = 'X' AND b < 1]").predicate
    assert p == Or(Not(cmp("x", "a", ">", 5), scoped=True),
                   And(cmp("x", "name", "=", "X"), cmp("x", "b", "<", 1), scoped=True), scoped=True)
    # inside a FILTER, an OR followed by a filter atom stays in the filter
    p = f("A FILTER x[a = 1] OR y.b = 2 AND (x.c = 3 OR TRUE)").predicate
    assert p == Or(cmp("x", "a", "=", 1),
                   And(cmp("y", "b", "=", 2), Or(cmp("x", "c", "=", 3), BoolConst(True))))
    # ...and an OR followed by a formula ends it
    assert f("A FILTER x[a = 1] OR (B ; C)") == FOr(Filter(E("A"), cmp("x", "a", "=", 1)),
                                                    Seq(E("B"), E("C")))
    assert f("A FILTER x[a = 1] OR S1>B") == FOr(Filter(E("A"), cmp("x", "a", "=", 1)), E("B", "S1"))
    assert f("A FILTER x[a = 1] OR S1>B[c = 2]").predicate == Or(
        cmp("x", "a", "=", 1), cmp("S1>B", "c", "=", 2))


def test_arithmetic_precedence_and_signs():
    p = f("A FILTER x.a + 2 * x.b - -3 % 2 > -(1) + +4").predicate
    left = BinOp("-", BinOp("+", ref("x", "a"), BinOp("*", Literal(2), ref("x", "b"))),
                 BinOp("%", Literal(-3), Literal(2)))
    assert p == Compare(">", left, BinOp("+", Neg(Literal(1)), Literal(4)))
    assert f("A FILTER x.a-3 > 0").predicate == Compare(
        ">", BinOp("-", ref("x", "a"), Literal(3)), Literal(0))


# ------------------------------------------------------------------ lexical rules and clauses


def test_lexical_rules():
    p = f("a filter x[`second` = 'O''Neil' and b = \"say \"\"hi\"\"\"] -- comment\n").predicate
    assert p == And(cmp("x", "second", "=", "O'Neil"), cmp("x", "b", "=", 'say "hi"'), scoped=True)
    p = f("A /* block\ncomment */ FILTER x[a IN {12, -3, 1.5, 1e3, .5, 'z'}]").predicate
    assert p == InSet(ref("x", "a"), tuple(Literal(v) for v in (12, -3, 1.5, 1000.0, 0.5, "z")))
    assert isinstance(p.values[0].value, int) and isinstance(p.values[3].value, float)
    assert f("`SELECT` AS `my var`") == As(E("SELECT"), "my var")


def test_comparison_operators_normalised():
    ops = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "=": "=", "==": "=", "!=": "!=", "<>": "!="}
    for written, canonical in ops.items():
        assert f(f"A FILTER x.a {written} 1").predicate == cmp("x", "a", canonical, 1)


def test_membership_predicates():
    assert f("A FILTER x[a NOT IN {1, 2}]").predicate == InSet(
        ref("x", "a"), (Literal(1), Literal(2)), True)
    assert f("A FILTER x[a IN {1..5}]").predicate == InInterval(ref("x", "a"), Literal(1), Literal(5))
    assert f("A FILTER x[a NOT IN {1.5..}]").predicate == InInterval(
        ref("x", "a"), Literal(1.5), None, True)
    assert f("A FILTER x[a IN {..-2}]").predicate == InInterval(ref("x", "a"), None, Literal(-2))
    assert f("A FILTER x[a LIKE '^M.*T$']").predicate == Like(ref("x", "a"), "^M.*T$")
    assert f("A FILTER TRUE AND NOT FALSE").predicate == And(BoolConst(True), Not(BoolConst(False)))


def test_all_clauses():
    q = parse("""select last x[price, name], S>E from S, T
        where A as x ; S>E
        partition by [a, b], [c]
        within 1 hour 30 minutes 1.5 s
        consume by partition
        limit 7""")
    assert q == Query(
        Seq(As(E("A"), "x"), E("E", "S")), strategy="LAST",
        select=(SelectItem("x", ("price", "name")), SelectItem("S>E")), streams=("S", "T"),
        partition_by=(("a", "b"), ("c",)),
        within=DurationWindow(((1, "hour"), (30, "minute"), (1.5, "second"))),
        consume="PARTITION", limit=7)
    assert parse("SELECT NONE A").select == ()
    assert parse("SELECT ANY * WHERE A").strategy == "ANY"
    assert parse("A WITHIN 5 EVENTS").within == EventsWindow(5)
    assert parse("A WITHIN 2.5 [ts]").within == ast.AttributeWindow(2.5, "ts")


def test_spans_cover_the_source():
    text = "SELL AS s ; BUY FILTER s[price > 10]"
    q = parse(text)
    seq_node = q.formula.formula
    assert text[seq_node.span.start:seq_node.span.end] == "SELL AS s ; BUY"
    lit = q.formula.predicate.right
    assert text[lit.span.start:lit.span.end] == "10"
    assert (q.span.start, q.span.end) == (0, len(text))


# ------------------------------------------------------------------ errors

ERRORS = [
    ("A FILTER x[n = 'abc]", "unterminated string", 1, 16),
    ("A\n/* never closed", "unterminated comment", 2, 1),
    ("`abc", "unterminated name", 1, 1),
    ("SELECT * FROM S WHERE", "expected a formula after 'WHERE'", 1, 22),
    ("A ;", "expected a formula after ';'", 1, 4),
    ("A ; ; B", "expected a formula after ';'", 1, 5),
    ("(A ; B", "'(' is never closed", 1, 1),
    ("A ; B)", "unmatched ')'", 1, 6),
    ("(A ; B]", "expected ')' to close '('", 1, 7),
    ("SELECT FROM S WHERE A", "expected *, NONE or a list of variables after SELECT", 1, 8),
    ("NOT SELL", "NOT applies to a single event type", 1, 5),
    ("A ; NOT(A ; B)", "NOT applies to a single event type", 1, 11),
    ("A WITHIN 3 weeks", "unknown window unit 'weeks' (known: ms", 1, 12),
    ("A\nWITHIN 10", "WITHIN 10 needs a unit", 2, 10),
    ("A LIMIT -1", "LIMIT needs a whole number", 1, 9),
    ("A LIMIT 1.5", "LIMIT needs a whole number", 1, 9),
    ("A CONSUME BY ALL", "CONSUME BY takes ANY, PARTITION or NONE", 1, 14),
    ("SELECT * MAX FROM S WHERE A", "selection strategy goes right after SELECT", 1, 10),
    ("A WITHIN 1 EVENTS\nPARTITION BY [a]", "PARTITION is out of place", 2, 1),
    ("A PARTITION BY 3", "PARTITION BY lists attribute names", 1, 16),
    ("A FILTER x[a IN {}]", "an IN set needs at least one value", 1, 18),
    ("A FILTER x[a IN (1, 2)]", "an IN set is written in braces, e.g. IN {1, 2}", 1, 17),
    ("A FILTER x[a NOT IN ('p')]", "an IN set is written in braces", 1, 21),
    ("SELL AND BUY", "AND combines conditions inside FILTER, not patterns", 1, 6),
    ("A FILTER x[]", "expected a condition inside x[...]", 1, 12),
    ("A FILTER a > 1", "attribute 'a' needs a variable", 1, 10),
    ("A FILTER x[y[a > 1]]", "cannot contain another", 1, 13),
    ("A FILTER x.a >", "expected a value after '>'", 1, 15),
    ("A #", "unexpected character '#'", 1, 3),
    ("A AS 3", "expected a name, found the number 3", 1, 6),
    ("SELECT * FROM WHERE A", "found the keyword WHERE; back-quote it", 1, 15),
    ("A WITHIN 1.5 EVENTS", "needs a whole number", 1, 10),
    ("", "expected a formula", 1, 1),
    ("A FILTER x[a LIKE 3]", "expected a string, found the number 3", 1, 19),
    ("A FILTER x[a = 1e999]", "number too large", 1, 16),
]


@pytest.mark.parametrize(("text", "message", "line", "column"), ERRORS)
def test_syntax_errors(text, message, line, column):
    with pytest.raises(QueryError) as info:
        parse(text, filename="q.ceql")
    err = info.value
    assert message in err.message
    assert (err.line, err.column) == (line, column)
    assert err.filename == "q.ceql" and err.source == text
    assert "q.ceql:" in err.render()


#: A careful user's mistakes: a misspelt keyword gets a did-you-mean (where it is, or where
#: it was read as a name), SQL's and C's habits get the CEQL spelling, and none of them the
#: parser's list of expected tokens.
FRIENDLY = [
    ("T AS x ; H AS y WITHN 10 EVENTS", "unknown word 'WITHN' here; did you mean WITHIN?", 1, 17),
    ("T AS x ; H AS y\nFILTR x.tmp > 40", "unknown word 'FILTR' here; did you mean FILTER?", 2, 1),
    ("T ; H PARTITON BY id", "unknown word 'PARTITON' here; did you mean PARTITION?", 1, 7),
    ("A ; B limt 3", "unknown word 'limt' here; did you mean LIMIT?", 1, 7),
    ("A CONSUME BY PARTITON", "did you mean PARTITION?", 1, 14),
    ("A FILTER A[x = 1] ANDD A[y = 2]", "did you mean AND?", 1, 19),
    # read as an event type or a variable first, refused at the next token
    ("SELECT * FORM S WHERE T ; H", "'FORM' is read as a name, so 'S' cannot follow; did you"
     " mean FROM?", 1, 10),
    ("SELECT * FROM S WHER T ; H", "did you mean WHERE?", 1, 17),
    ("SELECT NXT * WHERE T ; H", "did you mean NEXT?", 1, 8),
    ("A WITHIN 2 EVENT", "unknown window unit 'EVENT'", 1, 12),
    # SQL and C habits
    ("T AS t FILTER t.origin = JFK", "JFK is not quoted: write 'JFK' to compare t.origin with"
     " the text JFK", 1, 26),
    ("T AS t FILTER JFK <> t.origin", "write 'JFK' to compare t.origin", 1, 15),
    ("T AS t FILTER t.origin IN {JFK, 'LGA'}", "found the name JFK; quote it, 'JFK', for the"
     " text", 1, 28),
    ("T AS t FILTER t.a > 1 && t.b < 2", "unexpected '&&': CEQL writes AND", 1, 23),
    ("T AS t FILTER t.a > 1 || t.b < 2", "unexpected '||': CEQL writes OR", 1, 23),
    ("T AS t FILTER t.a > 1 & t.b < 2", "unexpected '&': CEQL writes AND", 1, 23),
    ("SELECT * FROM S WHERE T AS t ; H AS h\n  WHERE t.tmp > 40", "WHERE does not filter in"
     " CEQL: conditions on events follow FILTER (… FILTER t.tmp > 40)", 2, 3),
    ("SELL BUY", "'BUY' cannot follow a pattern directly: join two patterns with ';'", 1, 6),
]


@pytest.mark.parametrize(("text", "message", "line", "column"), FRIENDLY)
def test_typos_and_sql_habits_are_named(text, message, line, column):
    with pytest.raises(QueryError) as info:
        parse(text, filename="q.ceql")
    err = info.value
    assert message in err.message, err.message
    assert (err.line, err.column) == (line, column)
    assert "expected ')'" not in err.message and "..." not in err.message
    assert err.render().startswith(f"q.ceql:{line}:{column}: error:")


def test_unit_typo_hint_and_no_false_keyword():
    """A unit's near miss is offered as a hint; a name near a keyword the parser would not
    take there is no typo (BUY is not BY)."""
    with pytest.raises(QueryError) as info:
        parse("A WITHIN 2 minuts")
    assert info.value.hints == ["did you mean minutes?"]
    with pytest.raises(QueryError) as info:
        parse("SELL BUY BUY")
    assert "did you mean" not in info.value.message


def test_names_may_be_written_in_any_script():
    """Bare names are Python's identifiers (``größe``, ``温度``, ``_x``); a name holding
    another character is back-quoted, which the error at that character says."""
    from cer_cli.query.printer import to_text
    from cer_cli.query.scope import attr_refs

    q = parse("Mesure AS größe ; Alerte FILTER größe[温度 > 1.5 AND _x = 'é']")
    assert {(a.var, a.attr) for a in attr_refs(q.formula)} == {("größe", "温度"), ("größe", "_x")}
    assert parse(to_text(q)) == q
    with pytest.raises(QueryError) as info:
        parse("A ; B FILTER B[price$ > 1]")
    assert (info.value.message, info.value.hints) == (
        "unexpected character '$'", ["a name holding it is back-quoted: `price$`"])
    assert {a.attr for a in attr_refs(parse("A ; B FILTER B[`price$` > 1]").formula)} == {"price$"}


def test_two_names_in_a_row_hint_at_a_back_quoted_event_type():
    """``Buy Order ; Sell Order`` over a log whose types hold a space: the error says how to
    write such a type; names apart on two lines get no such hint."""
    with pytest.raises(QueryError) as info:
        parse("Buy Order ; Sell Order")
    assert info.value.hints == ["an event type whose name holds a space is back-quoted:"
                                " `Buy Order`"]
    with pytest.raises(QueryError) as info:
        parse("SELL\nBUY")
    assert info.value.hints == []


def test_deep_nesting_is_a_query_error():
    with pytest.raises(QueryError, match="nest too deeply"):
        parse("(" * 5000 + "A" + ")" * 5000)
    with pytest.raises(QueryError, match=f"chains {MAX_DEPTH + 5} terms with ';'"):
        parse(" ; ".join(["A"] * (MAX_DEPTH + 5)))
    with pytest.raises(QueryError, match="applies NOT 5,000 times in a row"):
        parse("A FILTER " + "NOT " * 5000 + "x[a = 1]")
    assert parse(" ; ".join(["A"] * 100)).formula.right == E("A")


@pytest.mark.parametrize("op, name", [(" ; ", "';'"), (" OR ", "OR"), (" : ", "':'")])
def test_a_long_flat_chain_is_reported_as_too_many_terms(op, name):
    """A flat query of 100,000 terms has no nesting to speak of: the message says what it
    has, too many terms in one chain (the binary AST nests one level per term)."""
    with pytest.raises(QueryError) as info:
        parse(op.join(["A"] * 100_000))
    assert info.value.message.startswith(f"the query chains 100,000 terms with {name}")
    assert "nest" not in info.value.message.split(":")[0]
    with pytest.raises(QueryError, match="chains 400 terms with AND"):
        parse("A FILTER " + " AND ".join(["A[x > 1]"] * 400))


@pytest.mark.parametrize("digits", [40, 4301, 100_000])  # 40 nines > 2**127
def test_an_integer_of_any_length_is_a_query_error(digits):
    """Python's int() refuses more than 4,300 digits (ValueError): cer says the integer is
    too large, with its position, whatever its length."""
    text = "A FILTER A[x > " + "9" * digits + "]"
    with pytest.raises(QueryError, match="integer too large") as info:
        parse(text)
    assert (info.value.line, info.value.column) == (1, 16)
    assert len(info.value.message) < 200


_ALPHABET = st.sampled_from(
    ["SELECT", "FROM", "WHERE", "FILTER", "AS", "OR", "AND", "NOT", "IN", "RANGE", "LIKE",
     "WITHIN", "EVENTS", "PARTITION", "BY", "CONSUME", "LIMIT", "ANY", "MAX", "NONE", "TRUE",
     "A", "x", "S", "price", "1", "-2", "1.5", "'s'", "\"t\"", "`q`", "(", ")", "[", "]", "{",
     "}", "..", ";", ":", ":+", "+", "-", "*", "/", "%", ",", ".", ">", "<", "=", "!=", "<>",
     "--", "/*", "*/", "\n", "'", "`", "?", "minutes"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_ALPHABET, max_size=25).map(" ".join))
def test_random_token_soup_raises_only_query_errors(text):
    try:
        assert isinstance(parse(text), Query)
    except QueryError as e:
        assert e.span is not None and e.line is not None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_random_text_raises_only_query_errors(text):
    try:
        parse(text)
    except QueryError as e:
        assert e.line is not None
