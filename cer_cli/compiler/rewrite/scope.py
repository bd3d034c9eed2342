"""Variable scopes of CEL formulas and small tree utilities shared by the rewrite passes.

Implements the syntactic sets of Foundations of CEP §3–4 (notes A.3, A.6): ``defines``
(the paper's vdef, plus event-type labels, which CORE treats as variables), ``vdef_plus``
(AS variables defined outside every ``+``; what safety is about), and ``bound`` (variables
bound on every path; what an *outer* filter may refer to). All are linear in the formula.
"""

from __future__ import annotations

from dataclasses import replace

from cer_cli.compiler.predicates import pred_vars
from cer_cli.query import ast

FORMULAS = (ast.EventType, ast.As, ast.Seq, ast.FOr, ast.Plus, ast.Filter, ast.FNot)


def children(f: ast.Formula) -> tuple[ast.Formula, ...]:
    """Direct sub-formulas (the atom inside ``NOT`` counts: passes must skip it explicitly)."""
    if isinstance(f, (ast.As, ast.Filter)):
        return (f.formula,)
    if isinstance(f, (ast.Seq, ast.FOr)):
        return (f.left, f.right)
    if isinstance(f, ast.Plus):
        return (f.body,)
    if isinstance(f, ast.FNot):
        return (f.atom,)
    return ()


def with_children(f: ast.Formula, kids: tuple[ast.Formula, ...]) -> ast.Formula:
    """``f`` with its direct sub-formulas replaced (same order as ``children``)."""
    if isinstance(f, (ast.As, ast.Filter)):
        return replace(f, formula=kids[0])
    if isinstance(f, (ast.Seq, ast.FOr)):
        return replace(f, left=kids[0], right=kids[1])
    if isinstance(f, ast.Plus):
        return replace(f, body=kids[0])
    if isinstance(f, ast.FNot):
        return replace(f, atom=kids[0])
    return f


def type_labels(e: ast.EventType) -> frozenset[str]:
    """Variables an event-type atom binds: ``E``, and ``S>E`` too when qualified."""
    return frozenset({e.name, e.label})


def defines(f: ast.Formula) -> frozenset[str]:
    """Variables some match of ``f`` may bind (AS variables and event-type labels, inside
    ``+`` too, never inside ``NOT``): the variables a filter on ``f`` reads "for all"."""
    if isinstance(f, ast.EventType):
        return type_labels(f)
    if isinstance(f, ast.FNot):
        return frozenset()
    out = frozenset({f.var}) if isinstance(f, ast.As) else frozenset()
    for kid in children(f):
        out |= defines(kid)
    return out


def vdef_plus(f: ast.Formula) -> frozenset[str]:
    """AS variables defined outside every ``+`` (the paper's vdef+)."""
    if isinstance(f, (ast.EventType, ast.Plus, ast.FNot)):
        return frozenset()
    out = frozenset({f.var}) if isinstance(f, ast.As) else frozenset()
    for kid in children(f):
        out |= vdef_plus(kid)
    return out


def bound(f: ast.Formula) -> frozenset[str]:
    """Variables bound on every path (notes A.6), with event-type labels as variables."""
    if isinstance(f, ast.EventType):
        return type_labels(f)
    if isinstance(f, ast.As):
        return bound(f.formula) | {f.var}
    if isinstance(f, ast.Filter):
        return bound(f.formula)
    if isinstance(f, ast.Seq):
        return bound(f.left) | bound(f.right)
    if isinstance(f, ast.FOr):
        return bound(f.left) & bound(f.right)
    return frozenset()  # Plus, FNot


def atom_type(f: ast.Formula) -> ast.EventType | None:
    """The event type of an *atom* (an ``EventType`` under AS / FILTER wrappers), else None."""
    while isinstance(f, (ast.As, ast.Filter)):
        f = f.formula
    return f if isinstance(f, ast.EventType) else None


def size(f: ast.Formula | None) -> int:
    """Number of formula nodes, to report blow-ups."""
    if f is None:
        return 0
    return 1 + sum(size(k) for k in children(f))


def filter_var(f: ast.Filter) -> str | None:
    """The single variable a filter reads, or None (no variable, or several)."""
    vs = pred_vars(f.predicate)
    return next(iter(vs)) if len(vs) == 1 else None


def is_outer_filter(f: ast.Formula) -> bool:
    """A unary filter on a variable its own formula does not define (language rule 2)."""
    if not isinstance(f, ast.Filter):
        return False
    x = filter_var(f)
    return x is not None and x not in defines(f.formula)


def conj(parts: list[ast.Predicate]) -> ast.Predicate:
    out = parts[0]
    for p in parts[1:]:
        out = ast.And(out, p)
    return out


def disj(parts: list[ast.Formula]) -> ast.Formula:
    out = parts[0]
    for p in parts[1:]:
        out = ast.FOr(out, p)
    return out
