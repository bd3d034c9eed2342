"""Hypothesis strategies for random, well-typed CEQL ASTs (every node kind of ``ast.py``).

Used by the printer round-trip test and by fuzzing; other test modules may import them.
Names mix plain identifiers, keywords and odd strings, so quoting is exercised too.
"""

from __future__ import annotations

from hypothesis import strategies as st

from cer_cli.query import ast

_PLAIN = st.sampled_from(["x", "y", "z", "T", "H", "SELL", "BUY", "price", "id", "_a1", "s2"])
_KEYWORD_LIKE = st.sampled_from(["select", "AS", "Or", "second", "events", "in", "range", "max"])
_ODD = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=6)

names = st.one_of(_PLAIN, _PLAIN, _PLAIN, _KEYWORD_LIKE, _ODD)
#: Variables: plain/odd names and stream-qualified labels ``S>E``.
variables = st.one_of(names, st.builds(lambda s, e: f"{s}>{e}", _PLAIN, _PLAIN))

ints = st.integers(min_value=-(10**12), max_value=10**12)
floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
numbers = st.one_of(ints, floats)
number_literals = st.builds(ast.Literal, numbers)
literals = st.one_of(number_literals, st.builds(ast.Literal, st.text(max_size=5)))

attr_refs = st.builds(ast.AttrRef, variables, names)

expressions = st.recursive(
    st.one_of(literals, attr_refs),
    lambda inner: st.one_of(
        st.builds(ast.BinOp, st.sampled_from(ast.ARITH_OPS), inner, inner),
        st.builds(ast.Neg, inner),
    ),
    max_leaves=6,
)

_atomic_predicates = st.one_of(
    st.builds(ast.Compare, st.sampled_from(ast.COMPARE_OPS), expressions, expressions),
    st.builds(ast.Like, expressions, st.text(max_size=5)),
    st.builds(ast.InSet, expressions, st.lists(literals, min_size=1, max_size=3).map(tuple),
              st.booleans()),
    st.builds(ast.InInterval, expressions, st.none() | number_literals,
              st.none() | number_literals, st.booleans()),
    st.builds(ast.InRange, expressions, expressions, expressions),
    st.builds(ast.BoolConst, st.booleans()),
)

predicates = st.recursive(
    _atomic_predicates,
    lambda inner: st.one_of(
        st.builds(ast.And, inner, inner),
        st.builds(ast.Or, inner, inner),
        st.builds(ast.Not, inner),
    ),
    max_leaves=5,
)

event_types = st.builds(ast.EventType, names, st.none() | names)


@st.composite
def not_atoms(draw) -> ast.Formula:
    """What NOT(...) takes: an event type under zero or more FILTERs."""
    atom: ast.Formula = draw(event_types)
    for p in draw(st.lists(predicates, max_size=2)):
        atom = ast.Filter(atom, p)
    return atom


formulas = st.recursive(
    st.one_of(event_types, event_types, st.builds(ast.FNot, not_atoms())),
    lambda inner: st.one_of(
        st.builds(ast.As, inner, names),
        st.builds(ast.Seq, inner, inner, st.booleans()),
        st.builds(ast.FOr, inner, inner),
        st.builds(ast.Plus, inner, st.booleans()),
        st.builds(ast.Filter, inner, predicates),
    ),
    max_leaves=8,
)

select_items = st.builds(ast.SelectItem, variables,
                         st.none() | st.lists(names, min_size=1, max_size=3).map(tuple))

windows = st.one_of(
    st.builds(ast.EventsWindow, st.integers(min_value=0, max_value=10**9)),
    st.builds(
        ast.DurationWindow,
        st.lists(
            st.tuples(st.one_of(st.integers(0, 10**6), st.floats(0, 1e6)),
                      st.sampled_from(sorted(ast.DURATION_UNITS))),
            min_size=1, max_size=3,
        ).map(tuple),
    ),
    st.builds(ast.AttributeWindow, st.one_of(st.integers(0, 10**9), st.floats(0, 1e9)), names),
)

queries = st.builds(
    ast.Query,
    formula=formulas,
    strategy=st.sampled_from(ast.STRATEGIES),
    select=st.none() | st.lists(select_items, max_size=3).map(tuple),
    streams=st.none() | st.lists(names, min_size=1, max_size=3).map(tuple),
    partition_by=st.lists(st.lists(names, min_size=1, max_size=2).map(tuple), max_size=2).map(tuple),
    within=st.none() | windows,
    consume=st.sampled_from(ast.CONSUME_POLICIES),
    limit=st.none() | st.integers(min_value=0, max_value=10**6),
)
