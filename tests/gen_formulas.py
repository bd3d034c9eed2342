"""Hypothesis strategies for small random CEL formulas, CEQL queries and event streams.

They feed the property tests that compare the real pipeline with ``tests/reference.py``,
so everything is kept small (formula depth <= 4, about ten events) for brute force to stay
fast, and every choice lists its simplest option first so that failures shrink to short
formulas over short streams.

Vocabulary: event types A, B, C; streams S1, S2; attributes ``v`` (0..3) and ``id`` (0..2);
every event also has a ``time`` (nanoseconds, non-decreasing) and an attribute ``ts``
(non-decreasing), for the three forms of WITHIN. Generated queries are well-formed (filter
rules 1-3): a filter only reads variables that the filtered formula defines or that an
enclosing formula binds.
"""

from __future__ import annotations

import math
from functools import cache

from hypothesis import assume
from hypothesis import strategies as st

from cer_cli import events as cer_events
from cer_cli.query import ast
from tests.reference import bound, vdef

EVENT_TYPES = ("A", "B", "C")
STREAMS = ("S1", "S2")
VARIABLES = ("x", "y", "z")
ATTRIBUTES = {"v": 3, "id": 2}  # attribute -> largest value (smallest is 0)
TIME_STEP = 500_000_000  # ns between time ticks: half a second


# --------------------------------------------------------------------------- streams


@st.composite
def streams(draw, min_size: int = 1, max_size: int = 8, types=EVENT_TYPES) -> list[dict]:
    """Events with "type", "stream", "time", and attributes ``v``, ``id``, ``ts``."""
    raw = draw(
        st.lists(
            st.tuples(
                st.sampled_from(types),
                st.sampled_from(STREAMS),
                st.integers(0, 2),  # time step
                st.integers(0, 2),  # ts step
                *(st.integers(0, hi) for hi in ATTRIBUTES.values()),
            ),
            min_size=min_size,
            max_size=max_size,
        )
    )
    out, time, ts = [], 0, 0
    for typ, stream, dt, dts, *values in raw:
        time, ts = time + dt, ts + dts
        attrs = dict(zip(ATTRIBUTES, values, strict=True))
        out.append({"type": typ, "stream": stream, "time": time * TIME_STEP, "ts": ts, **attrs})
    return out





#: values where comparisons go wrong quietly: missing (None, NaN), signed zeros, and the
#: integers around 2^53, where float64 starts rounding (``edge_values``)
EDGE_INTS = (0, 1, 2, 3, -1, None, 2 ** 53, 2 ** 53 + 1, -(2 ** 53 + 1), 2 ** 62)
EDGE_FLOATS = (0.0, -0.0, 1.5, 2.0, 3.0, -1.0, math.nan, None)


@st.composite
def edge_values(draw, events: list[dict]) -> list[dict]:
    """``events`` (from ``streams``) with each attribute's values 0..3 mapped to values of
    ``EDGE_INTS`` or ``EDGE_FLOATS`` (one kind per attribute, so its column keeps one type),
    not all missing."""
    out = [dict(e) for e in events]
    for attr, top in ATTRIBUTES.items():
        pool = draw(st.sampled_from((EDGE_INTS, EDGE_FLOATS)))
        to = {i: draw(st.sampled_from(pool + (None,) * 3)) for i in range(top + 1)}  # often
        if all(v is None for v in to.values()):
            to[0] = pool[0]
        for e in out:
            e[attr] = to[e[attr]]
    return out


def schema_of(events: list[dict], types=EVENT_TYPES, streams=STREAMS) -> cer_events.Schema:
    """A Schema for generated streams: every type has ``v``, ``id``, ``ts`` (int) and is in
    every stream, so checks accept every generated query even on an empty stream."""
    attrs = {"v": "int", "id": "int", "ts": "int"}
    for t in events:
        for k, value in t.items():
            if k not in ("type", "stream", "time"):
                attrs.setdefault(k, "str" if isinstance(value, str) else "int")
    return cer_events.Schema(
        event_types={t: dict(attrs) for t in sorted(set(types) | {e["type"] for e in events})},
        streams={
            s: tuple(types) for s in sorted(set(streams) | {e.get("stream", "S") for e in events})
        },
        time_column="time",
    )


# --------------------------------------------------------------------------- predicates


def _values(attr: str) -> st.SearchStrategy[int]:
    return st.integers(0, ATTRIBUTES[attr])


@st.composite
def unary_atoms(draw, var: str, depth: int = 1, scoped: bool | None = None) -> ast.Predicate:
    """A predicate on one variable: a comparison, a set or interval test, or (``depth`` > 0)
    a NOT, AND or OR of smaller ones, either inside one CORE ``x[pred]`` (``scoped``: one
    atom, tested per event) or between atoms (CEL ``x.a > 1 OR x.b < 2``: a union)."""
    if scoped is None:
        scoped = draw(st.booleans())
    attr = draw(st.sampled_from(sorted(ATTRIBUTES)))
    ref = ast.AttrRef(var, attr)
    kinds = ("compare", "inset", "interval") + (("not", "and", "or") if depth > 0 else ())
    kind = draw(st.sampled_from(kinds))
    if kind == "compare":
        op = draw(st.sampled_from(ast.COMPARE_OPS))
        return ast.Compare(op, ref, ast.Literal(draw(_values(attr))))
    if kind == "inset":
        values = draw(st.lists(_values(attr), min_size=1, max_size=2, unique=True))
        return ast.InSet(ref, tuple(ast.Literal(k) for k in values), draw(st.booleans()))
    if kind == "interval":
        low = draw(st.none() | _values(attr).map(ast.Literal))
        high = draw(st.none() | _values(attr).map(ast.Literal))
        return ast.InInterval(ref, low, high, draw(st.booleans()))
    if kind == "not":
        return ast.Not(draw(unary_atoms(var, depth - 1, scoped)), scoped=scoped)
    left = draw(unary_atoms(var, depth - 1, scoped))
    right = draw(unary_atoms(var, depth - 1, scoped))
    return (ast.And if kind == "and" else ast.Or)(left, right, scoped=scoped)


@st.composite
def binary_atoms(draw, var: str, other: str) -> ast.Predicate:
    """A predicate between two events: ``x.a op y.b``, possibly with arithmetic."""
    left = ast.AttrRef(var, draw(st.sampled_from(sorted(ATTRIBUTES))))
    right: ast.Expr = ast.AttrRef(other, draw(st.sampled_from(sorted(ATTRIBUTES))))
    if draw(st.booleans()):
        right = ast.BinOp(
            draw(st.sampled_from(ast.ARITH_OPS)), right, ast.Literal(draw(st.integers(1, 2)))
        )
    return ast.Compare(draw(st.sampled_from(ast.COMPARE_OPS)), left, right)


@st.composite
def predicates(draw, allowed: tuple[str, ...], binary: bool = False) -> ast.Predicate:
    """A filter predicate over ``allowed`` variables: one atom, or AND/OR/NOT of atoms."""

    def atom():
        if draw(st.integers(0, 9)) == 0:  # a constant: TRUE, FALSE, 1 = 1, 1 = 2
            if draw(st.booleans()):
                return ast.BoolConst(draw(st.booleans()))
            return ast.Compare("=", ast.Literal(1), ast.Literal(draw(st.integers(1, 2))))
        var = draw(st.sampled_from(allowed))
        others = [x for x in allowed if x != var]
        if binary and others and draw(st.booleans()):
            return draw(binary_atoms(var, draw(st.sampled_from(others))))
        return draw(unary_atoms(var))

    shape = draw(st.sampled_from(("atom", "and", "or", "not")))
    if shape == "atom":
        return atom()
    if shape == "not":
        return ast.Not(atom())
    left, right = atom(), atom()
    return ast.And(left, right) if shape == "and" else ast.Or(left, right)


# --------------------------------------------------------------------------- formulas


def _event_types(with_streams: bool) -> st.SearchStrategy[ast.EventType]:
    plain = st.sampled_from(EVENT_TYPES).map(ast.EventType)
    if not with_streams:
        return plain
    qualified = st.builds(ast.EventType, st.sampled_from(EVENT_TYPES), st.sampled_from(STREAMS))
    return _rarely(plain, qualified)


def _rarely(usual: st.SearchStrategy, rare: st.SearchStrategy) -> st.SearchStrategy:
    """``usual`` three times in four (and when shrinking), else ``rare``."""
    return st.integers(0, 3).flatmap(lambda k: rare if k == 3 else usual)


_SOMETIMES = st.integers(0, 3).map(lambda k: k == 3)


@st.composite
def _not_atoms(draw, with_streams: bool) -> ast.FNot:
    atom = draw(_event_types(with_streams))
    if draw(st.booleans()):
        return ast.FNot(atom)
    return ast.FNot(ast.Filter(atom, draw(unary_atoms(draw(st.sampled_from(sorted(vdef(atom))))))))


@st.composite
def absent_atoms(draw, with_streams: bool = True) -> ast.Formula:
    """ψ of ``φ1 ; !ψ ; φ2``: an event type, maybe named (AS) and filtered on its own
    variables (unary: the absent event is not compared with the match's events)."""
    atom: ast.Formula = draw(_event_types(with_streams))
    own = sorted(vdef(atom))
    if draw(st.booleans()):
        atom = ast.As(atom, "n")
        own.append("n")
    if draw(st.booleans()):
        atom = ast.Filter(atom, draw(predicates(tuple(own))))
    return atom


@cache
def _skeletons(depth: int, with_not: bool, with_streams: bool, variables: tuple[str, ...],
               with_absent: bool = False):
    """Filter-free formulas of depth <= ``depth``; atoms first so examples shrink to atoms."""
    atoms = _event_types(with_streams)
    if with_not:
        atoms = _rarely(atoms, _not_atoms(with_streams))
    if depth <= 1:
        return atoms
    sub = _skeletons(depth - 1, with_not, with_streams, variables, with_absent)
    absent = (st.builds(lambda a, b, psi: ast.Seq(a, b, absent=psi), sub, sub,
                        absent_atoms(with_streams)),) if with_absent else ()
    return st.one_of(
        atoms,
        st.builds(ast.As, sub, st.sampled_from(variables)),
        st.builds(ast.Seq, sub, sub, _SOMETIMES),
        *absent,
        st.builds(ast.FOr, sub, sub),
        st.builds(ast.Plus, sub, _SOMETIMES),
    )


def _children(f: ast.Formula) -> tuple[ast.Formula, ...]:
    if isinstance(f, (ast.Seq, ast.FOr)):
        return (f.left, f.right)
    if isinstance(f, ast.As):
        return (f.formula,)
    if isinstance(f, ast.Plus):
        return (f.body,)
    return ()


def _rebuild(f: ast.Formula, children: tuple[ast.Formula, ...]) -> ast.Formula:
    if isinstance(f, ast.Seq):
        return ast.Seq(children[0], children[1], f.contiguous, absent=f.absent)
    if isinstance(f, ast.FOr):
        return ast.FOr(children[0], children[1])
    if isinstance(f, ast.As):
        return ast.As(children[0], f.var)
    if isinstance(f, ast.Plus):
        return ast.Plus(children[0], f.contiguous)
    return f


def _add_filters(draw, f: ast.Formula, outer: frozenset[str], p: float, binary: bool):
    """Wrap some nodes in FILTERs reading only variables the node defines (rule 1) or an
    ancestor binds (rule 2): ``outer`` is the union of ``bound`` over strict ancestors."""
    inner = outer | bound(f)
    g = _rebuild(f, tuple(_add_filters(draw, c, inner, p, binary) for c in _children(f)))
    allowed = tuple(sorted(vdef(f) | outer))
    if allowed and draw(st.integers(0, 99)) < p * 100:
        g = ast.Filter(g, draw(predicates(allowed, binary)))
    return g


@st.composite
def formulas(
    draw,
    max_depth: int = 3,
    *,
    with_not: bool = True,
    with_streams: bool = True,
    with_filters: bool = True,
    binary: bool = False,
    safe: bool = False,
    variables: tuple[str, ...] = VARIABLES,
    filter_probability: float = 0.2,
    with_absent: bool = False,
) -> ast.Formula:
    """A random well-formed formula of depth <= ``max_depth`` (at most 4 keeps brute force
    fast). ``with_absent`` also draws ``φ1 ; !ψ ; φ2`` with a unary ψ.
    ``binary`` allows predicates between events; ``safe`` rejects formulas whose
    ``;`` defines an AS variable on both sides (outside every ``+``)."""
    assert max_depth <= 4, "the brute-force reference is exponential"
    f = draw(_skeletons(max_depth, with_not, with_streams, tuple(variables), with_absent))
    assume(not safe or is_safe(f))
    if with_filters:
        f = _add_filters(draw, f, frozenset(), filter_probability, binary)
    return f


def vdef_plus(f: ast.Formula) -> frozenset[str]:
    """AS variables defined outside every ``+``."""
    if isinstance(f, ast.As):
        return vdef_plus(f.formula) | {f.var}
    if isinstance(f, (ast.Plus, ast.EventType, ast.FNot)):
        return frozenset()
    return frozenset().union(*(vdef_plus(c) for c in _children(f)))


def is_safe(f: ast.Formula) -> bool:
    """Every ``φ ; ψ`` has disjoint vdef+ sets (then no match is lost to the safety rule)."""
    if isinstance(f, ast.Seq) and vdef_plus(f.left) & vdef_plus(f.right):
        return False
    if isinstance(f, ast.Filter):
        return is_safe(f.formula)
    return all(is_safe(c) for c in _children(f))


# --------------------------------------------------------------------------- queries


def _windows() -> st.SearchStrategy[ast.Window | None]:
    return st.one_of(
        st.none(),
        st.builds(ast.EventsWindow, st.integers(1, 4)),
        st.builds(
            ast.DurationWindow,
            st.tuples(
                st.tuples(st.sampled_from((1, 0.5, 2)), st.sampled_from(("second", "millisecond")))
            ),
        ),
        st.builds(ast.AttributeWindow, st.integers(1, 4), st.just("ts")),
    )


def simple_windows(max_events: int) -> st.SearchStrategy[ast.Window | None]:
    """No window, ``WITHIN 1..max_events EVENTS``, ``WITHIN 1 second`` or ``WITHIN 1..3 [ts]``:
    the windows the correlation generators draw (``_windows`` adds fractional durations)."""
    return st.one_of(
        st.none(),
        st.builds(ast.EventsWindow, st.integers(1, max_events)),
        st.builds(ast.DurationWindow, st.just(((1, "second"),))),
        st.builds(ast.AttributeWindow, st.integers(1, 3), st.just("ts")),
    )


@st.composite
def projections(draw, labels: list[str], max_size: int, kinds=("all", "all", "some")):
    """A SELECT list over ``labels``: ``None`` (``*``), ``()`` (kind "none") or a few of them."""
    kind = draw(st.sampled_from(kinds))
    if kind == "all":
        return None
    if kind == "none":
        return ()
    return tuple(ast.SelectItem(v) for v in draw(
        st.lists(st.sampled_from(labels), min_size=1, max_size=max_size, unique=True)))


@st.composite
def queries(
    draw,
    formula: st.SearchStrategy[ast.Formula] | None = None,
    *,
    strategies: bool = True,
    select: bool = True,
    from_streams: bool = True,
    partition: bool = True,
    window: bool = True,
    consume: bool = True,
    limit: bool = True,
) -> ast.Query:
    """A random query around ``formula`` (default ``formulas()``); each switch enables one
    clause, which the generator then sometimes sets (the default value shrinks first)."""
    f = draw(formula if formula is not None else formulas())
    projection = None
    if select:
        kind = draw(st.sampled_from(("all", "none", "some")))
        if kind == "none":
            projection = ()
        elif kind == "some" and vdef(f):
            names = draw(
                st.lists(st.sampled_from(sorted(vdef(f))), min_size=1, max_size=2, unique=True)
            )
            projection = tuple(ast.SelectItem(n) for n in names)
    return ast.Query(
        formula=f,
        strategy=draw(st.sampled_from(ast.STRATEGIES)) if strategies else "ALL",
        select=projection,
        streams=draw(st.none() | st.sampled_from((("S1",), ("S1", "S2"))))
        if from_streams
        else None,
        partition_by=draw(st.sampled_from(((), (("id",),)))) if partition else (),
        within=draw(_windows()) if window else None,
        consume=draw(st.sampled_from(("NONE", "ANY", "PARTITION"))) if consume else "NONE",
        limit=draw(st.none() | st.integers(0, 3)) if limit else None,
    )


# --------------------------------------------------------------------------- predicate trees


def predicate_trees(num_exprs, int_exprs, str_exprs, ints, like_refs, like_patterns,
                    max_leaves: int) -> st.SearchStrategy[ast.Predicate]:
    """Every predicate form of the language (comparisons, LIKE, IN sets and intervals, IN
    RANGE, constants, AND/OR/NOT) over the given expressions: the vectorised predicates'
    and the post-filter's property tests draw from one grammar, each over its own
    expressions (one event's attributes, or several variables')."""
    atomic = st.one_of(
        st.builds(ast.Compare, st.sampled_from(ast.COMPARE_OPS), num_exprs, num_exprs),
        st.builds(ast.Compare, st.sampled_from(["=", "!="]), str_exprs, str_exprs),
        st.builds(ast.Like, like_refs, st.sampled_from(like_patterns)),
        st.builds(ast.InSet, int_exprs,
                  st.lists(ints.map(ast.Literal), min_size=1, max_size=3).map(tuple), st.booleans()),
        st.builds(ast.InInterval, int_exprs, st.none() | ints.map(ast.Literal),
                  st.none() | ints.map(ast.Literal), st.booleans()),
        st.builds(ast.InRange, num_exprs, int_exprs, int_exprs),
        st.booleans().map(ast.BoolConst),
    )
    return st.recursive(
        atomic,
        lambda sub: st.one_of(st.builds(ast.And, sub, sub), st.builds(ast.Or, sub, sub),
                              st.builds(ast.Not, sub)),
        max_leaves=max_leaves,
    )
