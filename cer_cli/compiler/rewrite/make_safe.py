"""Rewrite a formula into an equivalent *safe* one (Foundations of CEP, Theorem 1).

A formula is safe when no ``φ ; ψ`` defines the same AS variable outside ``+`` on both
sides. Such a sequence never matches (one event cannot be in both parts), but a CEA
cannot see variables, so it would wrongly accept it. When the cheap syntactic check fails
we expand the formula into a disjunctive normal form outside ``+`` (ORs pulled to the
top, ``+`` bodies made safe bottom-up), and drop the disjuncts whose sequences clash.

Example::

    (T AS x OR H AS y) ; T AS x   ->   H AS y ; T AS x
    T AS x ; T AS x               ->   None (unsatisfiable)

Cost: linear when the formula is already safe; otherwise the DNF is exponential in the
number of ORs under sequences.
"""

from __future__ import annotations

from dataclasses import replace

from cer_cli.query import ast
from cer_cli.query.scope import children, defines, disj, filter_var, vdef_plus


def is_safe(formula: ast.Formula) -> bool:
    """Every ``;``/``:`` (also inside ``+``) has disjoint vdef+ on its two sides."""
    if isinstance(formula, ast.Seq) and vdef_plus(formula.left) & vdef_plus(formula.right):
        return False
    return all(is_safe(k) for k in children(formula))


def make_safe(formula: ast.Formula) -> ast.Formula | None:
    """An equivalent safe formula, or None when the formula can never match."""
    if is_safe(formula):
        return formula
    kept = [d for d in _dnf(formula) if is_safe(d)]
    return disj(kept) if kept else None


def _dnf(f: ast.Formula) -> list[ast.Formula]:
    """Disjuncts without OR outside ``+`` whose union is ``f``."""
    if isinstance(f, (ast.EventType, ast.FNot)):
        return [f]
    if isinstance(f, ast.As):
        return [ast.As(d, f.var, span=f.span) for d in _dnf(f.formula)]
    if isinstance(f, ast.Filter):
        x = filter_var(f)
        rule1 = x is not None and x in defines(f.formula)
        # A for-all filter is vacuous on a disjunct that never binds its variable.
        return [ast.Filter(d, f.predicate, span=f.span) if not rule1 or x in defines(d) else d
                for d in _dnf(f.formula)]
    if isinstance(f, ast.FOr):
        return _dnf(f.left) + _dnf(f.right)
    if isinstance(f, ast.Seq):
        # replace, not a new Seq: the absent ψ of ``φ1 ; !ψ ; φ2`` stays with the sequence
        return [replace(f, left=a, right=b) for a in _dnf(f.left) for b in _dnf(f.right)]
    if isinstance(f, ast.Plus):
        body = make_safe(f.body)
        return [] if body is None else [ast.Plus(body, f.contiguous, span=f.span)]
    raise TypeError(f)
