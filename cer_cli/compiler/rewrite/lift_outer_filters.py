"""Move filters on *outer* variables to the formula that binds them (Foundations of CEP,
Theorem 2 and local rule R2; docs/language.md, filter rule 2).

A unary filter ``F = ρ FILTER P(x)`` where ``ρ`` does not define ``x`` constrains the
events ``μ(x)`` of the lowest ancestor ``φx`` with ``x ∈ bound(φx)`` (language rule 2),
provided the match used ``F``. If the path from ``φx`` down to ``F`` crosses no ``OR``,
every match of ``φx`` uses ``F``: the filter just moves up to ``φx`` (R2) and down onto the
atoms binding ``x`` (R1). Otherwise ``φx`` is split::

    (φx[F := ρ] FILTER P(x))  OR  φx[F := ρ FILTER FALSE]

The paper also filters the second disjunct with ``NOT P(x)`` to make the two disjoint;
we do not, because with several events in ``μ(x)`` "all satisfy P" and "all satisfy
NOT P" are not complementary, and a set semantics does not need disjointness.
``simplify`` removes the FALSE branches and contradictory atoms. Example (φ6)::

    T AS x ; (T AS y FILTER x.temp >= 40 OR H AS y FILTER x.temp < 40)
    ->  (T AS x FILTER x.temp >= 40 ; T AS y) OR (T AS x FILTER x.temp < 40 ; H AS y)

A filter whose variable nothing binds on every path is a QueryError. Cost: R2 is linear;
each split doubles ``φx``, so the worst case is exponential in the number of outer
filters under ORs.
"""

from __future__ import annotations

from cer_cli.compiler.rewrite.lp_normal_form import push
from cer_cli.compiler.rewrite.split_filters import alternatives, events_of
from cer_cli.query import ast
from cer_cli.query.errors import QueryError
from cer_cli.query.scope import (
    bound,
    children,
    disj,
    filter_var,
    is_outer_filter,
    with_children,
)

FALSE = ast.BoolConst(False)


def lift_outer_filters(formula: ast.Formula) -> ast.Formula:
    out = _lift(formula)
    found = _find_outer(out, None)
    if found is not None:
        f = found[1]
        raise QueryError(
            f"the filter reads variable '{filter_var(f)}', which is not bound on every path "
            "of an enclosing pattern", f.predicate.span or f.span)
    return out


def _lift(node: ast.Formula) -> ast.Formula:
    if isinstance(node, ast.FNot):
        return node
    while True:
        node = with_children(node, tuple(_lift(k) for k in children(node)))
        found = _find_outer(node, bound(node, with_labels=True))
        if found is None:
            return node
        path, f = found
        x, pred = filter_var(f), f.predicate
        assert x is not None
        # At the binder, a predicate with connectives between atoms is one atom only when
        # x is one event here; otherwise OR is a union of filtered formulas (split_filters).
        single = frozenset({x}) if events_of(node, x) <= 1 else frozenset()
        options = []
        for conjuncts in alternatives(pred, single):
            option = _replace(node, path, f.formula)
            for part in conjuncts:
                option = push(option, x, part)
            options.append(option)
        kept = disj(options)
        if _crosses_or(node, path):
            node = ast.FOr(kept, _replace(node, path, ast.Filter(f.formula, FALSE)))
        else:
            node = kept


def _find_outer(node, xs) -> tuple[tuple[int, ...], ast.Filter] | None:
    """First filter (pre-order, outside NOT) on an outer variable in ``xs`` (any if None)."""
    if isinstance(node, ast.FNot):
        return None
    if is_outer_filter(node) and (xs is None or filter_var(node) in xs):
        return (), node
    for i, kid in enumerate(children(node)):
        found = _find_outer(kid, xs)
        if found is not None:
            return (i, *found[0]), found[1]
    return None


def _crosses_or(node: ast.Formula, path: tuple[int, ...]) -> bool:
    """Whether some match of ``node`` may avoid the filter at ``path`` (R2 would be wrong)."""
    for i in path:
        if isinstance(node, ast.FOr):
            return True
        node = children(node)[i]
    return False


def _replace(node: ast.Formula, path: tuple[int, ...], new: ast.Formula) -> ast.Formula:
    if not path:
        return new
    kids = list(children(node))
    kids[path[0]] = _replace(kids[path[0]], path[1:], new)
    return with_children(node, tuple(kids))
