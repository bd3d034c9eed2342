"""Static checks: variable sets, well-formedness, safety, schema binding, typing.

The schema is the running example of "Foundations of CEP" (Figure 1): temperature events ``T``
and humidity events ``H``, both with a sensor ``id``. The paper's queries read ``x.tmp`` and
``x.temp`` on T and ``y.hum`` on H, so T carries both spellings.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cer_cli.events import Schema
from cer_cli.query.ast import (
    And,
    As,
    AttrRef,
    Compare,
    EventType,
    Filter,
    FOr,
    Plus,
    Query,
    Seq,
)
from cer_cli.query.checks import check_query, check_well_formed, safety_warnings, var
from cer_cli.query.errors import QueryError
from cer_cli.query.scope import bound, labels, vdef, vdef_plus
from tests.builders import H, T, cmp

SENSORS = Schema(
    event_types={
        "T": {"id": "int", "tmp": "float", "temp": "float", "site": "str"},
        "H": {"id": "int", "hum": "float", "site": "str"},
    },
    streams={"S": ("T", "H"), "R": ("T",)},
    time_column=None,
)
TIMED = Schema(SENSORS.event_types, SENSORS.streams, time_column="ts")


# --------------------------------------------------------------------------- variable sets


def test_variable_sets_of_the_papers_example():
    # (T AS x ; (H AS y)+) FILTER z.id = 1 — Foundations of CEP §3 (var, vdef, vdef+)
    f = Filter(Seq(As(T(), "x"), Plus(As(H(), "y"))), cmp("z", "id", "=", 1))
    assert var(f) - labels(f) == {"x", "y", "z"}
    assert vdef(f) == {"x", "y"}
    assert vdef_plus(f) == {"x"}
    assert bound(f) == {"x"}
    with pytest.raises(QueryError, match="filter on 'z'"):
        check_well_formed(f)


def test_bound_intersects_or_and_unites_seq():
    both = FOr(Seq(As(T(), "x"), As(H(), "y")), Seq(As(H(), "y"), As(T(), "x")))
    assert bound(both) == {"x", "y"}
    assert bound(FOr(As(T(), "x"), As(H(), "y"))) == set()
    assert bound(Plus(As(T(), "x"))) == set()


def test_as_on_a_compound_formula_binds_its_variable_and_the_child_bound():
    f = As(Seq(As(T(), "x"), Plus(As(H(), "y"))), "z")
    assert bound(f) == {"x", "z"}
    assert vdef_plus(f) == {"x", "z"}
    assert vdef(f) == {"x", "y", "z"}


def test_labels_are_variables_for_filters_but_not_defined():
    f = Seq(EventType("H", stream="S"), T())
    assert labels(f) == {"H", "S>H", "T"}
    assert vdef(f) == set()
    assert bound(f, with_labels=True) == {"H", "S>H", "T"}
    assert safety_warnings(Seq(T(), T())) == ()


def test_phi2_filter_is_well_formed():
    inner = FOr(Seq(As(T(), "x"), As(H(), "y")), Seq(As(H(), "y"), As(T(), "x")))
    pred = And(cmp("x", "tmp", ">", 40), cmp("y", "hum", "<=", 25))
    check_query(Query(Filter(inner, pred)), SENSORS)


def test_phi4_is_well_formed_though_its_plus_is_not_alone():
    # [H AS x ; (T AS y FILTER y.id = x.id)+ ; H AS z] FILTER (x.hum < 30 AND z.hum > 60)
    corr = Compare("=", AttrRef("y", "id"), AttrRef("x", "id"))
    plus = Plus(Filter(As(T(), "y"), corr))
    phi4 = Filter(
        Seq(Seq(As(H(), "x"), plus), As(H(), "z")),
        And(cmp("x", "hum", "<", 30), cmp("z", "hum", ">", 60)),
    )
    report = check_query(Query(phi4), SENSORS)
    kinds = {a.kind for a in report.atoms if a.variables == {"x", "y"}}
    assert kinds == {"correlation"}
    assert {a.kind for a in report.atoms if len(a.variables) == 1} == {"unary"}
    with pytest.raises(QueryError, match="filter on 'x'"):
        check_well_formed(plus)


def test_event_types_per_variable():
    f = Seq(As(FOr(T(), H()), "x"), As(T(), "y"))
    report = check_query(Query(f), SENSORS)
    assert report.event_types["x"] == {"T", "H"}
    assert report.event_types["y"] == {"T"}
    assert report.variables["vdef"] == {"x", "y"}


# --------------------------------------------------------------------------- safety


def test_repeated_single_event_variable_is_unsafe():
    warnings = check_query(Query(Seq(As(T(), "x"), As(T(), "x")))).warnings
    assert len(warnings) == 1 and "x" in warnings[0][0] and "unsafe" in warnings[0][0]


def test_repeated_variable_under_plus_is_safe():
    f = Seq(Plus(As(EventType("A"), "x")), Plus(As(EventType("A"), "x")))
    assert check_query(Query(f)).warnings == ()


def test_every_unsafe_sequence_is_reported():
    a = As(T(), "x")
    inside_plus = Plus(Seq(a, a))
    f = Seq(Seq(a, As(H(), "y")), Seq(inside_plus, a))
    # the outer ';' (x on both sides) and the one inside the '+'; the other two are safe
    assert len(safety_warnings(f)) == 2
    assert len(safety_warnings(Seq(inside_plus, inside_plus))) == 2


# --------------------------------------------------------------------------- properties

_atoms = st.sampled_from(["A", "B"]).map(EventType)
_formulas = st.recursive(
    _atoms,
    lambda sub: st.one_of(
        st.tuples(sub, st.sampled_from(["x", "y", "z"])).map(lambda t: As(*t)),
        st.tuples(sub, sub, st.booleans()).map(lambda t: Seq(*t)),
        st.tuples(sub, sub).map(lambda t: FOr(*t)),
        sub.map(Plus),
    ),
    max_leaves=8,
)


@given(_formulas)
def test_bound_within_vdef_plus_within_vdef(f):
    assert bound(f) <= vdef_plus(f) <= vdef(f) <= var(f)


@given(_formulas, st.sampled_from(["x", "y", "z"]))
def test_filter_on_a_defined_variable_is_accepted_rule_1(f, v):
    g = Filter(f, cmp(v, "id", "=", 1))
    if v in vdef(f):
        check_well_formed(g)
    else:
        with pytest.raises(QueryError):
            check_well_formed(g)


@given(_formulas, _formulas, st.sampled_from(["x", "y", "z"]))
def test_filter_on_an_enclosing_bound_variable_is_accepted_rule_2(f, g, v):
    inner = Filter(g, cmp(v, "id", "=", 1))
    outer = Seq(As(f, v), inner)
    check_well_formed(outer)  # v ∈ bound(As(f, v)) ⊆ bound(outer)


# --------------------------------------------------------------------------- errors in query text


def parse(text: str):
    return pytest.importorskip("cer_cli.query.parser").parse(text)


def located(text: str, needle: str) -> tuple[int, int]:
    """1-based line and column of the first ``needle`` in ``text`` (the expected error position)."""
    offset = text.index(needle)
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def check_text(text: str, schema: Schema | None = SENSORS):
    try:
        return check_query(parse(text), schema)
    except QueryError as e:
        raise e.with_source(text) from None


#: (query, schema, message substring, hint substring or None, text where the caret must point)
MISTAKES = [
    ("T AS x FILTER x.tmpp > 40", SENSORS, "no attribute 'tmpp'", "did you mean 'tmp'", "x.tmpp"),
    (
        "(T OR H) AS x\nFILTER x.pressure > 1",
        SENSORS,
        "(H, T) has attribute 'pressure'",
        "hum",
        "x.pressure",
    ),
    ("T AS x ; H AS y\n  FILTER z.tmp > 40", SENSORS, "filter on 'z'", None, "z.tmp"),
    (
        "(H AS x) FILTER (y.tmp <= 30)",
        SENSORS,
        "filter on 'y', which this formula never binds (it binds: H, x)",
        None,
        "y.tmp",
    ),
    ("(H AS x) FILTER (y.tmp <= 30)", None, "filter on 'y'", None, "y.tmp"),
    (
        "(T AS x)+ ; (H AS y FILTER x.tmp > 4)",
        SENSORS,
        "filter on 'x'",
        "not on every path",
        "x.tmp",
    ),
    ("T ; H FILTER Tx[tmp > 1]", SENSORS, "filter on 'Tx'", "did you mean 'T'", "tmp >"),
    ("SELECT xx FROM S WHERE T AS x", SENSORS, "SELECT names 'xx'", "did you mean 'x'", "xx"),
    ("SELECT S>T FROM S WHERE T", SENSORS, "SELECT names 'S>T'", "without a stream", "S>T"),
    ("SELECT x[hum] FROM S WHERE T AS x", SENSORS, "no attribute 'hum'", "tmp", "x[hum]"),
    # SQL's habit: a text without quotes, compared with an attribute
    ("T AS x FILTER x[site = north]", SENSORS, "no attribute 'north'",
     "for the text north, quote it: site = 'north'", "north"),
    pytest.param(
        "SELECT * FROM S WHERE T AS x\nPARTITION BY [idd]",
        SENSORS,
        "attribute 'idd'",
        "did you mean 'id'",
        "idd",
        marks=(),
    ),
    (
        "T AS x FILTER x.site > 3",
        SENSORS,
        "cannot compare x.site (a string) with 3 (a number)",
        None,
        "x.site",
    ),
    ("T AS x ; H AS y FILTER y[hum = 'wet']", SENSORS, "cannot compare",
     "the log's column holds numbers: compare it with a number, unquoted", "y[hum"),
    ("T AS x FILTER x.site = 3", SENSORS, "cannot compare",
     "quote the value to compare as text", "x.site"),
    ("T AS x FILTER 'a' < 3", None, "cannot compare 'a' (a string) with 3", None, "'a'"),
    (
        "T AS x FILTER x.tmp LIKE 'a.*'",
        SENSORS,
        "LIKE needs a string, but x.tmp is a number",
        None,
        "x.tmp",
    ),
    ("T AS x FILTER x.site LIKE '(ab'", SENSORS, "invalid regular expression", None, "x.site"),
    ("T AS x FILTER x.site IN {'a', 1}", SENSORS, "mixes kinds of values (number, string)", None, "x.site"),
    ("T AS x FILTER x.site IN {1, 2}", SENSORS, "cannot compare", None, "x.site"),
    ("T AS x FILTER x.site + 1 > 3", SENSORS, "'+' needs numbers", None, "x.site"),
    (
        "T AS x FILTER x.tmp IN RANGE (x.site, 5)",
        SENSORS,
        "IN RANGE needs numbers",
        None,
        "x.site,",
    ),
    (
        "T AS x ; H AS y\nWITHIN 5 minutes",
        SENSORS,
        "needs a time column; this log has none",
        "--time-column",
        "5 minutes",
    ),
    ("T AS x WITHIN 10 [site]", SENSORS, "'site' is str", "numeric", "10 [site]"),
    (
        "T AS x WITHIN 10 [clock]",
        SENSORS,
        "no event type has attribute 'clock'",
        None,
        "10 [clock]",
    ),
    pytest.param(
        "SELECT * FROM S, Q WHERE T",
        SENSORS,
        "unknown stream 'Q' in FROM",
        "known streams: R, S",
        "Q",
        marks=(),
    ),
    (
        "SELECT * FROM S WHERE SS>T",
        SENSORS,
        "unknown stream 'SS' in 'SS>T'",
        "did you mean 'S'",
        "SS>T",
    ),
    ("NOT(T FILTER x.tmp > 3) ; T AS x", SENSORS, "may only read 'T', not 'x'", None, "x.tmp"),
]


@pytest.mark.parametrize(("text", "schema", "message", "hint", "at"), MISTAKES)
def test_mistakes_are_reported_where_they_are(text, schema, message, hint, at):
    with pytest.raises(QueryError) as info:
        check_text(text, schema)
    error = info.value
    assert message in error.message
    if hint is not None:
        assert any(hint in h for h in error.hints), error.hints
    assert (error.line, error.column) == located(text, at)


@pytest.mark.parametrize(
    "text",
    [
        "(T AS x OR H AS y) FILTER x.tmp > 40",  # rule 1: the filtered formula defines x
        "T AS x ; (H AS y FILTER x.tmp > 40)",  # rule 2: bound by the enclosing ';'
        "(T AS x)+ FILTER x[tmp > 40]",  # rule 1 reaches inside '+'
        "[H AS x ; (T AS y FILTER y.id = x.id)+ ; H AS z] FILTER (x.hum < 30 AND z.hum > 60 AND x.id = z.id)",
        "SELECT S>T FROM S WHERE S>T ; H FILTER T[tmp > 3] PARTITION BY [id] WITHIN 3 EVENTS",
        "SELECT * FROM S WHERE NOT(T FILTER T[site LIKE '^a']) ; H AS y PARTITION BY [nope, id]",
        "T AS x FILTER x.site IN {'a', 'b'} AND x.tmp IN {1..40} AND x.id + 1 IN RANGE (0, x.tmp)",
    ],
)
def test_well_formed_queries_pass(text):
    check_text(text)


def test_duration_window_with_a_time_column_passes():
    assert check_text("T AS x ; H AS y WITHIN 1 hour 30 minutes", TIMED).warnings == ()


def test_safety_warnings_point_at_the_sequence():
    text = "SELECT * FROM S\nWHERE T AS x ; T AS x"
    ((message, span),) = check_text(text).warnings
    assert "x" in message
    assert text[span.start : span.end] == "T AS x ; T AS x"
    assert check_text("(T AS x)+ ; (T AS x)+").warnings == ()


def test_a_stream_without_that_event_type_is_a_warning():
    ((message, span),) = check_text("SELECT * FROM R WHERE R>H").warnings
    assert "'R>H' never matches" in message


def test_report_classifies_atoms_of_a_text_query():
    report = check_text("T AS x ; H AS y FILTER x.tmp > 40 AND x.id = y.id AND y[hum < 3]")
    kinds = sorted((sorted(a.variables), a.kind) for a in report.atoms)
    assert kinds == [(["x"], "unary"), (["x", "y"], "correlation"), (["y"], "unary")]


_TOKENS = (
    "T H x y AS ; : + :+ OR AND FILTER ( ) [ ] . tmp site id > = 1 'a' NOT SELECT FROM S".split()
)
_TOKENS += "WHERE WITHIN EVENTS PARTITION BY , LIKE IN { } .. - * LIMIT S>T".split()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), max_size=14))
def test_checks_only_ever_raise_query_errors(tokens):
    text = " ".join(tokens)
    try:
        query = parse(text)
    except QueryError:
        return
    for schema in (None, SENSORS):
        try:
            check_query(query, schema)
        except QueryError as e:
            assert e.message


def test_an_event_type_the_log_lacks_is_a_warning():
    """#13 item 9: a daily log without refunds is no mistake: warn (naming a close known
    type), and the branch never matches. An attribute no event has stays an error."""
    report = check_text("SELECT * FROM S\nWHERE Tx AS x ; H AS y")
    (message, span), = [w for w in report.warnings if "Tx" in w[0]]
    assert "the log has no event type 'Tx'" in message and "did you mean 'T'?" in message
    assert span is not None
    report = check_text("T ; Refund AS r FILTER r[tmp > 1]")  # tmp exists in the log
    assert any("no event type 'Refund'" in m for m, _ in report.warnings)
    with pytest.raises(QueryError, match="no event of the log has attribute 'amount'"):
        check_text("T ; Refund AS r FILTER r[amount > 1]")


@pytest.mark.parametrize("window", ["0 EVENTS", "0 seconds", "0 [tmp]", "0 minutes 0 seconds"])
def test_a_window_of_zero_is_accepted(window):
    """#13 item 10: windows are inclusive, so 0 is meaningful (equal time or position)."""
    check_text(f"T AS x ; H AS y WITHIN {window}",
               Schema(SENSORS.event_types, SENSORS.streams, time_column="ts"))


def test_known_names_are_listed_up_to_a_limit():
    """A log of many event types: the warning names the first ``LISTED`` in order and how
    many more, not every one."""
    from cer_cli.query.checks import LISTED, check_schema_names

    names = [f"E{i:03d}" for i in range(LISTED + 12)]
    schema = Schema(event_types={n: {} for n in names}, streams={"S": tuple(names)},
                    time_column=None)
    (warning, _), = check_schema_names(parse("X ; E001"), schema)
    listed = warning.split("known event types: ")[1]
    assert listed == ", ".join(names[:LISTED]) + ", … and 12 more"
    schema = Schema(event_types={n: {} for n in names[:LISTED]},
                    streams={"S": tuple(names[:LISTED])}, time_column=None)
    (warning, _), = check_schema_names(parse("X ; E001"), schema)
    assert warning.endswith(", ".join(names[:LISTED]))


def test_known_names_are_listed_as_a_query_writes_them():
    """A log's event type holding a space, or an attribute named like a keyword, must be
    back-quoted in a query: the lists of known names show them so."""
    from cer_cli.query.checks import check_schema_names

    schema = Schema(event_types={"Buy Order": {"max": "int", "price": "float"},
                                 "Sell": {"max": "int", "price": "float"}},
                    streams={"S": ("Buy Order", "Sell")}, time_column=None)
    warned = check_schema_names(parse("Buy ; Sell"), schema)
    assert [w for w, _ in warned] == ["the log has no event type 'Buy', so 'Buy' never"
                                      " matches; known event types: `Buy Order`, Sell"]
    with pytest.raises(QueryError) as info:
        check_text("Sell AS s FILTER s.cost > 1", schema)
    assert info.value.hints == ["attributes of 's': `max`, price"]
    # "did you mean" names a close one as it must be written, to be pasted
    warned = check_schema_names(parse("`Buy Ordr` ; Sel"), schema)
    assert [w.split(";")[0] for w, _ in warned] == [
        "the log has no event type 'Buy Ordr', so 'Buy Ordr' never matches (did you mean"
        " `Buy Order`?)",
        "the log has no event type 'Sel', so 'Sel' never matches (did you mean 'Sell'?)"]
    with pytest.raises(QueryError) as info:
        check_text("Sell AS s FILTER s.mx > 1", schema)
    assert info.value.hints[0] == "did you mean `max`?"
