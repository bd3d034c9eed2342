"""Comparisons between events as ordered joins of the PCEA (issue #17, items 2 and 3).

The PCEA paper lets ``B(p)``, the predicate between an adopted run's last event ``t'`` and
the adopting event ``t``, be any binary predicate; the engine needs an index that finds
the runs satisfying it without looking at the others. For a comparison whose sides each
read one of the two events,

    key(t') rel probe(t)      rel ∈ {<, <=, >, >=, =, !=}

the runs of ``p`` are kept ordered by ``key`` (``cer_cli.engine.ordered``): a new event
computes ``probe`` and adopts the union of exactly the runs in the range. Linear (indeed
any) arithmetic on either side is just part of the side's expression: ``y.v > x.v * 1.1 + 2``
orders x's runs by ``x.v * 1.1 + 2`` and probes with ``y.v``. ``!=`` is the two ranges around
the probe. A bare equality ``x.a = y.b`` is left to the hash classes (``compiler.pcea``).

A *register* (``y.v > PREV(y).v`` inside ``(T AS y)+``, item 3) is the same construction on
the loop transition of the iterated step: the key is computed on the previous iteration's
event, the probe on the new one (``register``).

Values follow ``compiler.predicates``: a side that cannot be computed (absent, null or NaN
attribute, division by zero) relates to nothing, and a string never compares with a
number or a date-time (then the comparison never holds).
"""

from __future__ import annotations

from dataclasses import dataclass

from cer_cli.query import ast
from cer_cli.query.printer import to_text
from cer_cli.query.scope import attr_refs, pred_vars, prev_refs

#: ``a op b`` is ``b FLIP[op] a``.
FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}


@dataclass(frozen=True)
class Comparison:
    """``key rel probe`` where ``key`` reads only variable ``low`` (the adopted run's event)
    and ``probe`` only ``high`` (the adopting event); ``text`` is the predicate as written."""

    low: str
    key: ast.Expr
    rel: str
    high: str
    probe: ast.Expr
    text: str


def expr_vars(e: ast.Expr) -> frozenset[str]:
    """Variables a value expression reads (``PREV(y).a`` reads y)."""
    return pred_vars(e)


def comparison(p: ast.Predicate) -> tuple[str, ast.Expr, str, str, ast.Expr] | None:
    """``(x, ex, op, y, ey)`` for an atom ``ex op ey`` whose sides read one variable each
    (two different ones), except the bare attribute equality that the hash classes take."""
    if not isinstance(p, ast.Compare) or prev_refs(p):
        return None  # PREV(y): a register of a loop (``register``), not between two steps
    lv, rv = expr_vars(p.left), expr_vars(p.right)
    if len(lv) != 1 or len(rv) != 1 or lv == rv:
        return None
    if p.op == "=" and isinstance(p.left, ast.AttrRef) and isinstance(p.right, ast.AttrRef):
        return None
    (x,), (y,) = lv, rv
    return x, p.left, p.op, y, p.right


def oriented(p: ast.Predicate, low: str) -> Comparison:
    """The comparison ``p`` (see ``comparison``) written as ``key rel probe`` with the key
    on variable ``low``."""
    x, ex, op, y, ey = comparison(p)  # type: ignore[misc]
    text = to_text(p)
    if x == low:
        return Comparison(x, ex, op, y, ey, text)
    return Comparison(y, ey, FLIP[op], x, ex, text)


def register(p: ast.Predicate) -> Comparison | None:
    """``e(PREV(y)) op e'(y)`` (either order), one side reading only ``PREV(y)``, the other
    only ``y``, as the comparison ``key rel probe`` of an iterated step's loop: the key is
    computed on the previous iteration's event (``PREV(y).a`` read as ``y.a`` there), the
    probe on the new one. None for any other shape."""
    if not isinstance(p, ast.Compare):
        return None
    sides = []
    for e in (p.left, p.right):
        refs = list(attr_refs(e))
        prev = {isinstance(r, ast.PrevRef) for r in refs}
        if len(prev) != 1 or len({r.var for r in refs}) != 1:
            return None
        sides.append((prev.pop(), refs[0].var))
    (lp, lv), (rp, rv) = sides
    if lp == rp or lv != rv:
        return None
    text = to_text(p)
    if lp:
        return Comparison(lv, _unprev(p.left), p.op, rv, p.right, text)
    return Comparison(rv, _unprev(p.right), FLIP[p.op], lv, p.left, text)


def _unprev(e: ast.Expr) -> ast.Expr:
    """``e`` with ``PREV(y).a`` read as ``y.a`` (on the previous iteration's own event)."""
    if isinstance(e, ast.PrevRef):
        return ast.AttrRef(e.var, e.attr, e.span)
    if isinstance(e, ast.BinOp):
        return ast.BinOp(e.op, _unprev(e.left), _unprev(e.right), e.span)
    if isinstance(e, ast.Neg):
        return ast.Neg(_unprev(e.operand), e.span)
    return e


def ordered_cost(short: bool = False) -> str:
    if short:
        return "O(log w) expected per probe and insert (ordered index)"
    return ("ordered index: the runs of the adopted state are kept in a balanced search tree"
            " (treap) on the compared value that knows each subtree's latest start; a probe"
            " returns O(depth) subtrees to adopt, an insert copies one path: O(log w) expected,"
            " whatever the order in which the values arrive")
