"""The memory verdict (cer_cli/plan/memory/): the bounded-memory criteria for streams
with application time (Theorem 1: C1–C5 for duplicate-preserving output such as a count;
Theorem 2: C1–C3 for distinct output), applied to CER queries, with the paper's worked
example and the examples derived from its definitions (D1–D5), unit tests of each notion
(boundedness, dependency tree, redundancy, MaxRef/MinRef, each condition failing on its own),
and the `cer match` warning."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from cer_cli import cli as cli_module
from cer_cli.api import compile_query
from cer_cli.cli import cli
from cer_cli.events import Schema
from cer_cli.plan.memory.spj import (
    CONSTANT,
    JOIN_KEYS,
    LOG,
    PARTITION_KEYS,
    SPJ,
    WINDOW,
    Attr,
    Closure,
    Const,
    Pos,
    dependency_tree,
    in_tree,
    theorem1,
    theorem2,
    tier,
)
from cer_cli.query.parser import parse
from tests import reference
from tests.builders import ev, events_frame

FIG1 = "samples/fig1.csv"
PHI4 = open("queries/phi4.cel").read()


def verdict(text: str, mode: str = "match", schema: Schema | None = None):
    return compile_query(text, schema=schema).memory(mode)


def conditions(v) -> dict[str, bool]:
    return {c.name: c.holds for c in v.conditions}




def run(text: str, events: list[dict], schema: Schema | None = None):
    got = list(compile_query(text, schema=schema).run(events_frame(events)))
    reference.assert_same_matches(got, reference.reference_matches(parse(text), events))
    return got


# --------------------------------------------------------------------------- D1/D2: the worked example

# Streams S(A), T(B), U(C) with integer attributes; the query joins S after T after U, with
# 0 < B < 5 and A > B. The paper's stream, in time order (ties broken as listed).
D1 = "U AS u ; T AS t ; S AS s FILTER t.B > 0 AND t.B < 5 AND s.A > t.B"
D1_STREAM = ev("S:A=42 T:B=7 U:C=1 T:B=2 U:C=3 T:B=1 S:A=42 T:B=3")
INTS = Schema({"U": {"C": "int"}, "T": {"B": "int"}, "S": {"A": "int"}})


def test_d1_matches_give_the_papers_bag():
    got = run(D1, D1_STREAM, INTS)
    assert {tuple(p for p, _ in m.events) for m in got} == {(2, 3, 6), (2, 5, 6), (4, 5, 6)}
    # projected to (A, B), duplicates kept: (42, 2) once and (42, 1) twice
    values = sorted((D1_STREAM[m.events[2][0]]["A"], D1_STREAM[m.events[1][0]]["B"]) for m in got)
    assert values == [(42, 1), (42, 1), (42, 2)]


def test_d2_counting_is_constant_by_theorem_1():
    v = verdict(D1, "count", INTS)
    assert v.verdict == CONSTANT
    assert conditions(v) == {"C1": True, "C2": True, "C3": True, "C4": True, "C5": True}
    # the paper's synopses: counters for u, counters per value of t.B, s never stored
    assert "t: a counter per value of t.B" in v.reason and "s (last) is never stored" in v.reason
    c5 = next(c for c in v.conditions if c.name == "C5")
    assert "s.A in MaxRef(s)" in c5.detail  # A is unbounded, but s is the root
    # this engine counts by enumerating candidates: it says it keeps more
    assert v.engine == LOG and "s.A > t.B" in v.engine_reason


def test_d2_enumeration_without_window_grows_with_the_log():
    v = verdict(D1, "match", INTS)
    assert v.verdict == LOG
    assert not conditions(v)["C3"] and "position of u" in v.reason and "SELECT *" in v.reason
    assert "s.A > t.B" in v.reason  # the ordered index keeps the compared values too
    windowed = verdict(f"SELECT * WHERE {D1} WITHIN 10 EVENTS", "match", INTS)
    assert windowed.verdict == WINDOW and "WITHIN 10 EVENTS" in windowed.reason


def test_d2_distinct_projection_is_not_guaranteed_because_A_is_output():
    v = verdict(f"SELECT s[A], t[B] WHERE {D1}", "distinct", INTS)
    assert v.verdict == LOG and not conditions(v)["T2 C1"]
    assert "s.A is output" in v.reason and "no upper bound" in v.reason
    assert conditions(v)["T2 C2"] and conditions(v)["T2 C3"]
    only_b = verdict(f"SELECT t[B] WHERE {D1}", "distinct", INTS)
    assert only_b.verdict == CONSTANT  # B is bounded; one max of s.A would suffice


def test_d1_boundedness_needs_integers():
    """A range bounds the number of values only for integers: with B unknown (no log) or a
    float, t.B is unbounded and MinRef(t) = {t.B} breaks C5 (t is not the root)."""
    unknown = verdict(D1, "count")
    assert unknown.verdict == JOIN_KEYS and not conditions(unknown)["C5"]
    assert "type is unknown" in unknown.reason and "s.A > t.B" in unknown.reason
    floats = verdict(D1, "count", Schema({"U": {"C": "int"}, "T": {"B": "float"}, "S": {"A": "int"}}))
    assert floats.verdict == JOIN_KEYS and "t.B is a float" in floats.reason


# --------------------------------------------------------------------------- D3: MaxRef / MinRef

D3 = "SELECT y[b] WHERE X AS x ; Y AS y FILTER x.a < y.a AND y.b > 0 AND y.b < 5"
D3_SCHEMA = Schema({"X": {"a": "int"}, "Y": {"a": "int", "b": "int"}})


def test_d3_matches():
    events = ev("X:a=5 Y:a=3,b=1 X:a=2 Y:a=4,b=1 Y:a=10,b=2")
    got = run(D3.replace("SELECT y[b]", "SELECT *"), events, D3_SCHEMA)
    assert {tuple(p for p, _ in m.events) for m in got} == {(2, 3), (0, 4), (2, 4)}
    assert sorted(events[m.end]["b"] for m in got) == [1, 2, 2]  # count: the bag {1, 2, 2}


def test_d3_distinct_is_constant_counting_needs_the_values_of_x_a():
    distinct = verdict(D3, "distinct", D3_SCHEMA)
    assert distinct.verdict == CONSTANT and all(c.holds for c in distinct.conditions)
    count = verdict(D3.replace("SELECT y[b]", "SELECT *"), "count", D3_SCHEMA)
    assert count.verdict == JOIN_KEYS and not conditions(count)["C5"]
    assert "'x.a < y.a'" in count.reason and "MinRef(x)" in count.reason
    assert verdict(D3.replace("SELECT y[b]", "SELECT *"), "match", D3_SCHEMA).verdict == LOG


# --------------------------------------------------------------------------- D4: the B1 query

B1 = "H AS x ; T AS y ; H AS z FILTER x.id = y.id"


def test_d4_b1_verdicts():
    assert verdict(B1, "match").verdict == LOG
    windowed = verdict(f"SELECT * WHERE {B1} WITHIN 10 EVENTS", "match")
    assert windowed.verdict == WINDOW and "WITHIN 10 EVENTS" in windowed.reason
    count = verdict(B1, "count")
    assert count.verdict == JOIN_KEYS and "'x.id = y.id'" in count.reason
    assert conditions(count) == {"C1": True, "C2": True, "C3": True, "C4": False, "C5": True}
    # the counter becomes one per value once the key is bounded
    bounded = verdict(B1 + " AND x.id IN {1, 2}", "count")
    assert bounded.verdict == CONSTANT


# --------------------------------------------------------------------------- D5: order tree


def test_d5_two_unordered_later_variables_break_the_tree():
    """D5 is `A AS a ; (B AS b AND C AS c)`: a is before b and before c, which are not
    ordered. Our language has no unordered AND, so the shape is built directly."""
    parents = dependency_tree(["a", "b", "c"], [("a", "b"), ("a", "c")])
    assert parents == {"a": {"b", "c"}, "b": set(), "c": set()}
    holds, why = in_tree(parents)
    assert not holds and "a has 2 later variables" in why
    spj = SPJ(("a", "b", "c"), frozenset({("a", "b"), ("a", "c")}), {}, Closure([]))
    conds = theorem1(spj)
    assert [(c.name, c.holds) for c in conds] == [("C1", False)]
    assert tier(conds) == LOG


def test_d5_written_with_or_is_a_union_of_chains():
    """In our language the shape is the OR of the two orders. Positions are distinct, so
    the unordered conjunction is the disjoint union of its two orders, and each order is a
    chain a < b < c or a < c < b — an in-tree: counting is constant (a counter per stream),
    unlike the D5 reading of the paper's C1, which has no such split of timestamps."""
    text = "A AS a ; ((B AS b ; C AS c) OR (C AS c ; B AS b))"
    count = verdict(text, "count")
    assert count.verdict == CONSTANT and conditions(count)["C1"]
    assert verdict(text, "match").verdict == LOG
    events = ev("A B C B A C")
    got = run(text, events)
    assert {tuple(p for p, _ in m.events) for m in got} == {(0, 1, 2), (0, 1, 5), (0, 3, 5),
                                                            (0, 2, 3)}


# --------------------------------------------------------------------------- unit: closure


def a(sid: int, name: str) -> Attr:
    return Attr(sid, name, f"s{sid}.{name}")


def test_boundedness_closes_over_equalities_and_ranges():
    x, y, z = a(1, "v"), a(2, "v"), a(3, "v")
    ints = {x: "int", y: "int", z: "int"}
    # an equality with a constant bounds every attribute of its class, whatever the type
    c = Closure([(x, "=", y), (y, "=", Const(3))], types={x: "float", y: None})
    assert c.bounded(x) and c.bounded(y)
    # an equality between streams alone bounds nothing
    assert not Closure([(x, "=", y)], types=ints).bounded(x)
    # 0 < x < y < 5 bounds both integers through the chain
    c = Closure([(Const(0), "<", x), (x, "<", y), (y, "<", Const(5))], types=ints)
    assert c.bounded(x) and c.bounded(y) and not c.bounded(z)
    assert c.less(Const(0), y) and c.less(x, Const(5))
    # only below: unbounded, with the reason
    c = Closure([(Const(0), "<", x)], types=ints)
    assert not c.bounded(x) and "no upper bound" in c.why_unbounded(x)
    # the same range on floats does not bound them
    c = Closure([(Const(0), "<", x), (x, "<", Const(5))], types={x: "float"})
    assert not c.bounded(x) and "float" in c.why_unbounded(x)
    # booleans and finite sets are bounded
    assert Closure([], types={x: "bool"}).bounded(x)
    assert Closure([], finite=[x]).bounded(x)
    # contradictions are found
    assert Closure([(x, "<", y), (y, "<", x)]).unsatisfiable
    assert Closure([(x, "=", Const(1)), (x, "=", Const(2))]).unsatisfiable
    assert Closure([(Const(5), "<", x), (x, "<", Const(1))]).unsatisfiable


def test_unary_filters_bound_through_the_query():
    s = Schema({"T": {"v": "int", "w": "float"}, "H": {"v": "int", "w": "float"}})
    cases = {
        "T AS x ; H AS y FILTER x.v = y.v AND y.v IN {1, 2}": CONSTANT,
        "T AS x ; H AS y FILTER x.v = y.v AND y[v > 3 OR v > 7] AND y.v <= 10": CONSTANT,
        "T AS x ; H AS y FILTER x.v = y.v AND y[v > 3 OR v < 1] AND y.v <= 10": JOIN_KEYS,
        "T AS x ; H AS y FILTER x.v = y.v AND y.v IN {1..9}": CONSTANT,
        "T AS x ; H AS y FILTER x.v = y.v AND x.v IN RANGE (1, 9)": CONSTANT,
        "T AS x ; H AS y FILTER x.w = y.w AND x.w > 1 AND x.w < 5": JOIN_KEYS,
        # a float equal to an integer in a range takes finitely many values
        "T AS x ; H AS y FILTER x.w = y.v AND x.w > 1 AND x.w < 5": CONSTANT,
    }
    for text, expected in cases.items():
        assert verdict(text, "count", s).verdict == expected, text


def test_redundant_inequalities_definition_8():
    x, y, z, w = a(1, "v"), a(2, "v"), a(3, "v"), a(4, "v")
    # (1) implied through another element
    c = Closure([(x, "<", y), (y, "<", z), (x, "<", z)])
    assert c.redundant(x, z) and not c.redundant(x, y)
    # ... which may be a constant
    c = Closure([(x, "<", Const(5)), (Const(5), "<", w), (x, "<", w)])
    assert c.redundant(x, w)
    # (2) and (3): one side equals a constant
    assert Closure([(x, "=", Const(1)), (x, "<", y)]).redundant(x, y)
    assert Closure([(y, "=", Const(1)), (x, "<", y)]).redundant(x, y)


def test_maxref_minref_definition_9():
    x, y, yb, z = a(1, "a"), a(2, "a"), a(2, "b"), a(3, "a")
    names = {1: "x", 2: "y", 3: "z"}
    ints = {e: "int" for e in (x, y, yb, z)}
    max_ref, min_ref = Closure([(x, "<", y), (Const(0), "<", yb), (yb, "<", Const(5))],
                               types=ints).refs(names)
    assert max_ref == {"y": {y}} and min_ref == {"x": {x}}
    # a chain x < y < z: x < z is implied (redundant), so only the covering pairs count
    max_ref, min_ref = Closure([(x, "<", y), (y, "<", z), (x, "<", z)], types=ints).refs(names)
    assert max_ref == {"y": {y}, "z": {z}} and min_ref == {"x": {x}, "y": {y}}
    # a bounded side is in neither set
    max_ref, min_ref = Closure([(x, "<", y), (Const(0), "<", x), (x, "<", Const(9))],
                               types=ints).refs(names)
    assert max_ref == {"y": {y}} and min_ref == {}
    # equal attributes of other streams inherit the inequality (P+)
    max_ref, _ = Closure([(x, "=", z), (y, "<", x)], types=ints).refs(names)
    assert max_ref == {"x": {x}, "z": {z}}


def test_dependency_tree_is_the_hasse_diagram():
    parents = dependency_tree("uts", [("u", "t"), ("t", "s"), ("u", "s")])
    assert parents == {"u": {"t"}, "t": {"s"}, "s": set()}  # u -> s is implied
    holds, why = in_tree(parents)
    assert holds and "u < t < s (root s)" in why
    assert in_tree(dependency_tree("ab", []))[0]  # two one-node trees


# --------------------------------------------------------------------------- unit: each condition


def test_theorem_1_each_condition_fails_on_its_own():
    cases = [
        # C2: a join with the grandparent (the key is bounded and neither side is the last
        # variable, so C4 holds)
        ("H AS x ; T AS y ; H AS z ; T AS w FILTER x.id = z.id AND x.id IN {1, 2}", "count",
         "C2", "'x.id = z.id'", LOG),
        # C3: enumeration outputs the position of x, which is not the last variable
        ("H AS x ; T AS y", "match", "C3", "position of x", LOG),
        # C4: an unbounded equality between two variables that are not the last
        (B1, "count", "C4", "'x.id = y.id'", JOIN_KEYS),
        # C5: an unbounded attribute of an earlier variable in an inequality
        ("H AS x ; T AS y FILTER x.v < y.v", "count", "C5", "'x.v < y.v'", JOIN_KEYS),
    ]
    for text, mode, failing, names, expected in cases:
        v = verdict(text, mode)
        assert [c.name for c in v.conditions if not c.holds] == [failing], (text, v.conditions)
        assert v.verdict == expected and names in v.reason, (text, v.reason)
        assert failing in v.reason


def test_theorem_1_c4_root_exception():
    # the last variable's side may be unbounded; the other side must be bounded at depth 1
    assert verdict("H AS x ; T AS y FILTER x.id = y.id AND x.id IN {1, 2}", "count").verdict \
        == CONSTANT
    assert verdict("H AS x ; T AS y FILTER x.id = y.id", "count").verdict == JOIN_KEYS


def test_theorem_2_each_condition_fails_on_its_own():
    s = Schema({"X": {"a": "int", "id": "int"}, "Y": {"b": "int", "c": "int", "id": "int"},
                "Z": {"a": "int", "b": "int", "c": "int"}})
    cases = [
        ("SELECT x[a] WHERE X AS x ; Y AS y", "T2 C1", "x.a is output", LOG),
        ("SELECT y[b] WHERE X AS x ; Y AS y FILTER x.id = y.id AND y.b IN {1, 2}", "T2 C2",
         "'x.id = y.id'", JOIN_KEYS),
        ("SELECT z[b] WHERE X AS x ; Y AS y ; Z AS z FILTER x.a < z.a AND y.c < z.c"
         " AND z.b IN {1, 2}", "T2 C3", "z has 2 MaxRef/MinRef classes", JOIN_KEYS),
    ]
    for text, failing, names, expected in cases:
        v = verdict(text, "distinct", s)
        assert [c.name for c in v.conditions if not c.holds] == [failing], (text, v.conditions)
        assert v.verdict == expected and names in v.reason, (text, v.reason)


def test_theorem_2_counts_maxref_classes_up_to_equality():
    """|MaxRef(z)|_eq: two attributes of z above other streams' attributes need a max each,
    unless an equality makes them one class."""
    xa, yc, za, zc = a(1, "a"), a(2, "c"), a(3, "a"), a(3, "c")
    names = {1: "x", 2: "y", 3: "z"}

    def c3(*relations):
        spj = SPJ(("x", "y", "z"), frozenset({("x", "y"), ("y", "z")}), names, Closure(relations))
        return {c.name: c.holds for c in theorem2(spj)}["T2 C3"]

    assert not c3((xa, "<", za), (yc, "<", zc))
    assert c3((xa, "<", za), (yc, "<", zc), (za, "=", zc))


def test_theorem_1_projection_of_attributes():
    """C3 with attributes in L (the SPJ form): at the root anything, one level down only
    bounded ones, deeper nothing."""
    u, t, s = a(1, "C"), a(2, "B"), a(3, "A")
    c = Closure([(Const(0), "<", t), (t, "<", Const(5))], types={t: "int", u: "int", s: "int"})
    names = {1: "u", 2: "t", 3: "s"}
    order = frozenset({("u", "t"), ("t", "s")})

    def c3(*projection):
        return {x.name: x.holds for x in theorem1(SPJ(("u", "t", "s"), order, names, c, (),
                                                      projection))}["C3"]

    assert c3(s) and c3(t) and c3(s, t) and c3(Pos("s"))
    assert not c3(u) and not c3(Pos("t"))


# --------------------------------------------------------------------------- queries and clauses


@pytest.mark.parametrize(
    "text, mode, expected, names",
    [
        # B1 / D4: full enumeration, no window -> log length
        (B1, "match", LOG, "SELECT *"),
        ("H AS x ; T AS y ; H AS z FILTER x.id = z.id", "match", LOG, "x.id = z.id"),
        (f"SELECT * WHERE {B1} WITHIN 10 EVENTS", "match", WINDOW, "WITHIN 10 EVENTS"),
        # φ4: the '+' reports any number of events; counting runs per id
        (PHI4, "match", LOG, "the iteration '"),
        (PHI4, "count", JOIN_KEYS, "PARTITION BY [id]"),
        ("SELECT * WHERE H AS x ; H AS z FILTER x.id = z.id WITHIN 1 minute", "match", WINDOW,
         "1 minute"),
        ("SELECT * WHERE H AS x ; H AS z PARTITION BY [id] WITHIN 3 EVENTS", "match",
         PARTITION_KEYS, "PARTITION BY [id]"),
        ("SELECT * WHERE H AS x : T AS y PARTITION BY [id]", "match", PARTITION_KEYS,
         "PARTITION BY [id]"),
        ("SELECT * WHERE H AS x ; T AS y PARTITION BY [id]", "count", PARTITION_KEYS,
         "PARTITION BY [id]"),
        ("H AS x : T AS y", "match", CONSTANT, "no ';'"),
        ("T FILTER T[tmp > 40]", "match", CONSTANT, "no '+'"),
        ("H AS x ; T AS y", "count", CONSTANT, "Theorem 1 holds"),
        # iterations: outside SPJ, counted by counters unless a join reads them
        ("H AS x ; (T AS y)+ ; H AS z", "count", CONSTANT, "Theorem 1 holds"),
        ("H AS x ; (T AS y)+ ; H AS z FILTER x.v < z.v", "count", JOIN_KEYS, "x.v < z.v"),
        ("H AS x ; (T AS y FILTER y.v < x.v)+ ; H AS z", "count", LOG, "y.v < x.v"),
        # NOT(…) in the middle is not reported: it only multiplies counters
        ("H AS x ; NOT(T) ; H AS z FILTER x.v = z.v AND x.v IN {1, 2}", "count", CONSTANT,
         "x: a counter per value of x.v"),
        # SELECT that drops a joined variable: a count of distinct projected matches
        ("SELECT x, z WHERE H AS x ; T AS y ; H AS z FILTER x.v = y.v", "count", LOG,
         "SELECT drops y"),
        # strategies choose by positions: counting needs what enumeration needs
        ("SELECT NEXT * WHERE H AS x ; T AS y", "count", LOG, "SELECT NEXT"),
        # three events in one predicate: outside the criteria
        ("H AS x ; T AS y ; H AS z FILTER x.v + y.v = z.v", "count", LOG, "three or more"),
        # alternatives: the worst one decides, and is named
        ("(H AS x ; T AS y FILTER x.v = y.v) OR (T AS w ; H AS z)", "count", JOIN_KEYS,
         "in the alternative 'x ; y'"),
        # OR between events splits the query; overlapping cases are analysed together
        ("H AS x ; T AS y FILTER x.v = y.v AND x.v IN {1} OR x.w < y.w", "count", JOIN_KEYS,
         "x.w < y.w"),
        # != is the union of < and >, each with an unbounded earlier side
        ("H AS x ; T AS y FILTER x.v != y.v", "count", JOIN_KEYS, "x.v != y.v"),
        ("T AS x ; T AS x", "count", CONSTANT, "never matches"),
        # a correlated absence is outside the criteria: what it may still block is kept
        ("H AS x ; !(T AS y FILTER y.v > x.v) ; H AS z", "count", LOG,
         "the absence '!(T FILTER y.v > x.v)'"),
        ("SELECT * WHERE H AS x ; !(T AS y FILTER y.v > x.v) ; H AS z WITHIN 5 EVENTS",
         "count", WINDOW, "WITHIN 5 EVENTS"),
        # an absence ψ compares only with itself: the automaton checks it, counters suffice
        ("H AS x ; !(T AS y FILTER y.v > 1) ; H AS z", "count", CONSTANT, "Theorem 1 holds"),
        # a trailing absence: each match waits for its window to close
        ("H AS x ; !(T AS y FILTER y.v > x.v) WITHIN 5 EVENTS", "match", WINDOW,
         "the trailing absence"),
        ("H AS x ; !T WITHIN 5 EVENTS", "count", WINDOW, "waits until its window closes"),
        # ... and, under PARTITION BY, for its key's next event
        ("SELECT * WHERE H AS x ; !T PARTITION BY [id] WITHIN 5 seconds", "count",
         PARTITION_KEYS, "until its own key's next event"),
    ],
)
def test_verdicts_name_the_clause(text, mode, expected, names):
    v = verdict(text, mode)
    assert v.verdict == expected, v.reason
    assert names in v.reason, v.reason


def test_the_window_bounds_whatever_the_criteria_leave():
    v = verdict("SELECT * WHERE H AS x ; T AS y FILTER x.v < y.v WITHIN 5 EVENTS", "count")
    assert v.verdict == WINDOW and f"(without it: {JOIN_KEYS})" in v.reason
    assert not conditions(v)["C5"]  # the conditions still say what fails
    # a constant count stays constant with a window
    assert verdict("SELECT * WHERE H AS x ; T AS y WITHIN 5 EVENTS", "count").verdict == CONSTANT


@pytest.mark.parametrize("text", ["A FILTER 1 = 1", "A AS a FILTER a[v > 1] AND 2 > 1",
                                  "A AS a ; B AS b FILTER a.v < b.v AND 1 != 2"])
def test_a_constant_filter_says_nothing_about_memory(text):
    """A conjunct that reads no event (``1 = 1``) bounds nothing: the verdict is that of
    the query without it (explain failed with an internal IndexError)."""
    bare = text.split(" FILTER")[0] if text.startswith("A FILTER") else text.rsplit(" AND", 1)[0]
    for mode in ("match", "count"):
        assert verdict(text, mode) == verdict(bare, mode)
    out = CliRunner().invoke(cli, ["explain", "-e", text])
    assert out.exit_code == 0 and "memory:" in out.output, out.output


def test_engine_note_says_what_this_engine_keeps():
    v = verdict("H AS x ; T AS y", "count")
    assert v.verdict == CONSTANT and v.engine == LOG and "tECS" in v.engine_reason
    assert verdict("H AS x ; T AS y", "match").engine is None  # nothing more than the verdict
    assert verdict("SELECT * WHERE H AS x ; T AS y WITHIN 3 EVENTS", "count").engine == WINDOW


# --------------------------------------------------------------------------- explain and match


def test_explain_shows_every_mode_with_its_conditions():
    from cer_cli.explain import explanation

    plan = explanation(compile_query(f"SELECT s[A], t[B] WHERE {D1}", schema=INTS))["plan"]
    mem = plan["memory"]
    assert mem["verdict"] == LOG and mem["mode"] == "match"
    assert mem["modes"]["count"]["verdict"] == CONSTANT
    assert [c["holds"] for c in mem["modes"]["count"]["conditions"]] == [True] * 5
    assert mem["modes"]["distinct"]["verdict"] == LOG
    text = CliRunner().invoke(cli, ["explain", "-e", D1], env={"COLUMNS": "200"}).output
    assert "memory: grows with the log length" in text
    assert "memory (--count): grows with the number of distinct join keys" in text  # no log
    assert "conditions: C1 holds · C2 holds · C3 holds · C4 holds · C5 fails" in text
    assert "this engine: grows with the log length" in text


def match(*args):
    return CliRunner().invoke(cli, ["match", *args, "--format", "jsonl", "--no-progress"])


def test_match_warns_about_memory_on_large_logs(monkeypatch):
    monkeypatch.setattr(cli_module, "MEMORY_WARNING_EVENTS", 5)  # fig1 has 9 events
    unbounded = match("-e", "T AS x ; H AS y", FIG1)
    assert unbounded.exit_code == 0 and unbounded.stdout.strip()
    warning = [line for line in unbounded.stderr.splitlines() if "warning" in line]
    assert len(warning) == 1 and "memory grows with the log length" in warning[0]
    assert "SELECT *" in warning[0] and "WITHIN" in warning[0]
    counted = match("-e", "T AS x ; H AS y", FIG1, "--count")
    assert "tECS" in counted.stderr and "T AS x" in counted.stderr
    windowed = match("-e", "SELECT * WHERE T AS x ; H AS y WITHIN 3 EVENTS", FIG1)
    assert windowed.exit_code == 0 and "warning" not in windowed.stderr
    constant = match("-e", "T AS x : H AS y", FIG1)
    assert "warning" not in constant.stderr


def test_match_does_not_warn_on_small_logs():
    assert cli_module.MEMORY_WARNING_EVENTS >= 100_000  # larger than every bundled sample
    result = match("-e", "T AS x ; H AS y", FIG1)
    assert result.exit_code == 0 and "warning" not in result.stderr
