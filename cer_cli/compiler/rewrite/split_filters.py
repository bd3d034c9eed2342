"""Split compound filter predicates into single-variable filters (CORE §2.2, footnote 1).

``φ FILTER θ1 AND θ2`` is ``(φ FILTER θ1) FILTER θ2`` and ``φ FILTER θ1 OR θ2`` is
``(φ FILTER θ1) OR (φ FILTER θ2)``. A ``x[...]`` group is one atom and stays whole. Other
connectives are split, except over a part that reads one variable bound to at most one
event per match (or an outer variable, which ``lift_outer_filters`` splits at its binder):
on one event the atoms' "for all" readings combine like booleans, so
``T AS x FILTER x.a > 1 OR x.a < 0`` keeps its OR, while under ``+`` it becomes a union.
Atoms without variables (``1 = 2``) are evaluated first and folded: a FALSE conjunct
filters every match. NOT is pushed to the atoms (De Morgan); ``NOT x[p]`` is ``x[NOT p]``.
An atom reading two variables (a predicate between events) is left as its own filter.
Filters inside ``NOT(...)`` are never split: the negation covers the whole atom.

Equalities chained through a constant (the papers' ``x.id = z.id = 1``, i.e.
``x.id = z.id AND z.id = 1``) become unary first: ``x.id = 1 AND z.id = 1``. This is exact
when ``z`` is bound on every path of the filtered formula (so ``μ(z)`` is never empty).

Example::

    T AS x ; H AS y FILTER x.tmp > 40 OR y.hum < 20
    ->  (T AS x ; H AS y FILTER x.tmp > 40) OR (T AS x ; H AS y FILTER y.hum < 20)

Cost: linear, except that a mixed OR copies the filtered formula (exponential in the
number of mixed ORs nested under ANDs).
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from cer_cli.compiler.predicates import predicate_expression
from cer_cli.query import ast
from cer_cli.query.scope import (
    bound,
    children,
    conj,
    defines,
    disj,
    pred_vars,
    type_labels,
    with_children,
)


def split_filters(formula: ast.Formula) -> ast.Formula:
    if isinstance(formula, ast.FNot):
        return formula
    formula = with_children(formula, tuple(split_filters(k) for k in children(formula)))
    if not isinstance(formula, ast.Filter):
        return formula
    predicate = constants(formula.predicate)
    variables = pred_vars(predicate)
    # Outer variables count as single here: lift_outer_filters splits at their binder.
    single = frozenset(x for x in variables if x not in defines(formula.formula)
                       or events_of(formula.formula, x) <= 1)
    if not variables or _one_atom(predicate, single):
        return formula if predicate == formula.predicate else ast.Filter(
            formula.formula, predicate, span=formula.span)
    options = []
    predicate = propagate_constants(predicate, bound(formula.formula, with_labels=True))
    for conjuncts in alternatives(predicate, single):
        out = formula.formula
        for p in conjuncts:
            out = ast.Filter(out, p, span=formula.span)
        options.append(out)
    return disj(options)


def alternatives(pred: ast.Predicate,
                 single: frozenset[str] = frozenset()) -> list[list[ast.Predicate]]:
    """``pred`` as an OR of ANDs of atoms (Foundations: ``φ FILTER P OR Q`` is
    ``(φ FILTER P) OR (φ FILTER Q)``, ``AND`` two filters). A part reading only one
    variable of ``single`` (bound to at most one event) stays whole: on one event, the
    atoms' for-all readings combine like booleans."""
    if _one_atom(pred, single):
        return [[pred]]
    if isinstance(pred, ast.And):
        return [a + b for a in alternatives(pred.left, single)
                for b in alternatives(pred.right, single)]
    if isinstance(pred, ast.Or):
        return alternatives(pred.left, single) + alternatives(pred.right, single)
    if isinstance(pred, ast.Not):
        inner = pred.operand
        if isinstance(inner, ast.Not):
            return alternatives(inner.operand, single)
        if isinstance(inner, ast.And):
            return alternatives(ast.Or(ast.Not(inner.left), ast.Not(inner.right)), single)
        if isinstance(inner, ast.Or):
            return alternatives(ast.And(ast.Not(inner.left), ast.Not(inner.right)), single)
    return [[pred]]


def _one_atom(pred: ast.Predicate, single: frozenset[str]) -> bool:
    """Whether ``pred`` may be tested as one atom: a comparison, an ``x[...]`` group
    (``NOT x[p]`` is ``x[NOT p]``), or anything on one variable of ``single``."""
    if not isinstance(pred, _CONNECTIVES) or pred.scoped:
        return True
    if isinstance(pred, ast.Not) and (not isinstance(pred.operand, _CONNECTIVES)
                                      or pred.operand.scoped):
        return True
    vs = pred_vars(pred)
    return len(vs) == 1 and vs <= single


_CONNECTIVES = (ast.And, ast.Or, ast.Not)
_INFINITE = 2


def events_of(f: ast.Formula, x: str) -> int:
    """How many events a match of ``f`` may bind to ``x``: 0, 1, or 2 (two or more)."""
    if isinstance(f, ast.EventType):
        return int(x in type_labels(f))
    if isinstance(f, ast.FNot):
        return 0
    if isinstance(f, ast.As):
        inner = events_of(f.formula, x)
        return max(inner, _reported(f.formula)) if f.var == x else inner
    if isinstance(f, ast.Filter):
        return events_of(f.formula, x)
    if isinstance(f, ast.Seq):
        return min(_INFINITE, events_of(f.left, x) + events_of(f.right, x))
    if isinstance(f, ast.FOr):
        return max(events_of(f.left, x), events_of(f.right, x))
    if isinstance(f, ast.Plus):
        return _INFINITE if events_of(f.body, x) else 0
    raise TypeError(f)


def _reported(f: ast.Formula) -> int:
    """How many events a match of ``f`` may report: 0, 1 or 2 (two or more)."""
    if isinstance(f, ast.EventType):
        return 1
    if isinstance(f, ast.FNot):
        return 0
    if isinstance(f, (ast.As, ast.Filter)):
        return _reported(f.formula)
    if isinstance(f, ast.Seq):
        return min(_INFINITE, _reported(f.left) + _reported(f.right))
    if isinstance(f, ast.FOr):
        return max(_reported(f.left), _reported(f.right))
    if isinstance(f, ast.Plus):
        return _INFINITE if _reported(f.body) else 0
    raise TypeError(f)


def constants(pred: ast.Predicate) -> ast.Predicate:
    """``pred`` with each atom that reads no variable (``1 = 2``) replaced by its value,
    then folded: a constant conjunct is a filter of its own (``φ FILTER (P AND FALSE)``
    never matches, even where ``P``'s variable is unbound). ``x[...]`` groups are atoms
    of ``x`` and are left alone (empty ``μ(x)`` passes them)."""
    def walk(p: ast.Predicate) -> ast.Predicate:
        if isinstance(p, _CONNECTIVES) and p.scoped:
            return p
        if isinstance(p, (ast.And, ast.Or)):
            return replace(p, left=walk(p.left), right=walk(p.right))
        if isinstance(p, ast.Not):
            return replace(p, operand=walk(p.operand))
        if isinstance(p, ast.BoolConst) or pred_vars(p):
            return p
        value = pl.DataFrame({"row": [0]}).select(predicate_expression(p, {})).item()
        return ast.BoolConst(bool(value), span=p.span)

    return _fold(walk(pred))


def _fold(p: ast.Predicate) -> ast.Predicate:
    """Remove TRUE/FALSE from connectives between atoms (not inside ``x[...]``)."""
    if isinstance(p, _CONNECTIVES) and p.scoped:
        return p
    if isinstance(p, ast.Not):
        inner = _fold(p.operand)
        return ast.BoolConst(not inner.value) if isinstance(inner, ast.BoolConst) else replace(
            p, operand=inner)
    if isinstance(p, (ast.And, ast.Or)):
        left, right = _fold(p.left), _fold(p.right)
        absorbing = isinstance(p, ast.Or)  # TRUE absorbs OR, FALSE absorbs AND
        for a, b in ((left, right), (right, left)):
            if isinstance(a, ast.BoolConst):
                return a if a.value == absorbing else b
        return replace(p, left=left, right=right)
    return p


def propagate_constants(pred: ast.Predicate, binders: frozenset[str]) -> ast.Predicate:
    """In a top-level conjunction, ``u = v.b AND v.b = c`` -> ``u = c AND v.b = c`` for
    ``v`` in ``binders``."""
    parts = _conjuncts(pred)
    known = {(c.left.var, c.left.attr): c.right for c in map(_oriented, parts)
             if c is not None and isinstance(c.right, ast.Literal) and c.left.var in binders}
    out = []
    for part in parts:
        if (isinstance(part, ast.Compare) and part.op == "="
                and isinstance(part.left, ast.AttrRef) and isinstance(part.right, ast.AttrRef)):
            for this, other in ((part.left, part.right), (part.right, part.left)):
                constant = known.get((other.var, other.attr))
                if constant is not None and this.var != other.var:
                    part = ast.Compare("=", this, constant, span=part.span)
                    break
        out.append(part)
    return conj(out) if out != parts else pred


def _conjuncts(pred: ast.Predicate) -> list[ast.Predicate]:
    if isinstance(pred, ast.And):
        return _conjuncts(pred.left) + _conjuncts(pred.right)
    return [pred]


def _oriented(pred: ast.Predicate) -> ast.Compare | None:
    """``attr = constant`` with the attribute on the left, else None."""
    if not isinstance(pred, ast.Compare) or pred.op != "=":
        return None
    if isinstance(pred.right, ast.AttrRef) and isinstance(pred.left, ast.Literal):
        return ast.Compare("=", pred.right, pred.left)
    return pred if isinstance(pred.left, ast.AttrRef) else None
