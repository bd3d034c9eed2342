"""Split compound filter predicates into single-variable filters (CORE §2.2, footnote 1).

``φ FILTER θ1 AND θ2`` is ``(φ FILTER θ1) FILTER θ2`` and ``φ FILTER θ1 OR θ2`` is
``(φ FILTER θ1) OR (φ FILTER θ2)``. We split only where a predicate mixes variables: a
subtree reading one variable stays whole (it is tested per event, for every event of
that variable), so ``x[a > 1 OR a < 0]`` keeps its OR. NOT is first pushed to the leaves
(De Morgan) where it sits over a mixed predicate. An atom reading two variables (a
predicate between events) is left as its own filter. Filters inside ``NOT(...)`` are
never split: the negation covers the whole atom.

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

from cer_cli.query import ast
from cer_cli.query.scope import bound, children, conj, disj, pred_vars, with_children


def split_filters(formula: ast.Formula) -> ast.Formula:
    if isinstance(formula, ast.FNot):
        return formula
    formula = with_children(formula, tuple(split_filters(k) for k in children(formula)))
    if not isinstance(formula, ast.Filter) or len(pred_vars(formula.predicate)) <= 1:
        return formula
    options = []
    predicate = propagate_constants(formula.predicate, bound(formula.formula, with_labels=True))
    for conjuncts in alternatives(predicate):
        out = formula.formula
        for p in conjuncts:
            out = ast.Filter(out, p, span=formula.span)
        options.append(out)
    return disj(options)


def alternatives(pred: ast.Predicate) -> list[list[ast.Predicate]]:
    """``pred`` as an OR of ANDs of parts that each read at most one variable (or are
    atoms between events)."""
    if len(pred_vars(pred)) <= 1:
        return [[pred]]
    if isinstance(pred, ast.And):
        return [a + b for a in alternatives(pred.left) for b in alternatives(pred.right)]
    if isinstance(pred, ast.Or):
        return alternatives(pred.left) + alternatives(pred.right)
    if isinstance(pred, ast.Not):
        inner = pred.operand
        if isinstance(inner, ast.Not):
            return alternatives(inner.operand)
        if isinstance(inner, ast.And):
            return alternatives(ast.Or(ast.Not(inner.left), ast.Not(inner.right)))
        if isinstance(inner, ast.Or):
            return alternatives(ast.And(ast.Not(inner.left), ast.Not(inner.right)))
    return [[pred]]


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
