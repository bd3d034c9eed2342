"""Push unary filters down onto the atoms that bind their variable (LP-normal form,
Foundations of CEP Theorem 2, local rule R1).

In LP-normal form every filter on one variable sits directly on an atom
``E AS x FILTER P``, so the CEA construction only conjoins ``P`` to that atom's marking
transition. Filters whose variable the filtered formula defines (language rule 1, "for
all") are pushed into every part that defines the variable: both sides of ``;`` or
``OR`` that define it, through ``+`` (every iteration must satisfy it), and, under an
``φ AS x`` with compound ``φ``, onto *every* atom of ``φ`` (each reported event is an
``x``). A filter copied onto an atom that binds ``x`` only through that outer AS is
rewritten to read the atom's own event-type label, which keeps it a rule-1 filter.

Example (φ1 of the paper)::

    (T AS x ; H AS y) FILTER x.tmp > 40 AND y.hum <= 25
    ->  (T AS x FILTER x.tmp > 40) ; (H AS y FILTER y.hum <= 25)

Cost: linear in the formula times the number of filters; only ``AS`` over a compound
formula copies a predicate onto several atoms.
"""

from __future__ import annotations

from cer_cli.query import ast
from cer_cli.query.scope import (
    atom_type,
    children,
    defines,
    filter_var,
    rename_var,
    type_labels,
    with_children,
)


def lp_normal_form(formula: ast.Formula) -> ast.Formula:
    if isinstance(formula, ast.FNot):
        return formula
    formula = with_children(formula, tuple(lp_normal_form(k) for k in children(formula)))
    if isinstance(formula, ast.Filter) and atom_type(formula.formula) is None:
        x = filter_var(formula)
        if x is not None and x in defines(formula.formula):
            return push(formula.formula, x, formula.predicate)
    return formula


def atom_labels(f: ast.Formula) -> frozenset[str]:
    """Variables an atom binds: its event-type labels and the AS variables wrapped on it."""
    out: frozenset[str] = frozenset()
    while isinstance(f, (ast.As, ast.Filter)):
        if isinstance(f, ast.As):
            out |= {f.var}
        f = f.formula
    assert isinstance(f, ast.EventType)
    return out | type_labels(f)


def push(f: ast.Formula, x: str, pred: ast.Predicate) -> ast.Formula:
    """``f FILTER pred`` for a for-all filter on ``x``, with ``pred`` moved onto atoms."""
    if atom_type(f) is not None:
        return ast.Filter(f, pred) if x in atom_labels(f) else f
    if isinstance(f, ast.As):
        if f.var == x:
            return ast.As(push_all(f.formula, pred), x, span=f.span)
        return ast.As(push(f.formula, x, pred), f.var, span=f.span)
    if isinstance(f, ast.FNot):
        return f
    return with_children(f, tuple(push(k, x, pred) if x in defines(k) else k for k in children(f)))


def push_all(f: ast.Formula, pred: ast.Predicate) -> ast.Formula:
    """Put ``pred`` on every atom that ``f`` reports, reading that atom's own label."""
    t = atom_type(f)
    if t is not None:
        return ast.Filter(f, rename_var(pred, None, t.label))
    if isinstance(f, ast.FNot):
        return f
    return with_children(f, tuple(push_all(k, pred) for k in children(f)))
