"""Clean-ups after the structural rewrites: constant filters, FALSE propagation, merged
filter chains, canonical atoms, duplicate disjuncts (the clean-up after Foundations of CEP's Theorem 2 rewriting).

* ``ρ FILTER TRUE`` is ``ρ``; ``ρ FILTER FALSE`` never matches, and neither does a
  ``;``, ``AS``, ``FILTER`` or ``+`` over something that never matches; ``φ OR never``
  is ``φ``. The whole formula may become unsatisfiable: the pass then returns None.
* ``ρ FILTER P(x) FILTER Q(x)`` is ``ρ FILTER P AND Q`` (for-all distributes over AND).
* An atom is written ``E AS x AS y FILTER P`` with one merged predicate, when all its
  filters read its own labels (then every filter tests the same single event).
* ``AS x AS x`` is ``AS x``; repeated OR disjuncts are dropped.

Example::

    (T AS x FILTER x.a > 1) FILTER x.b < 2 OR (H AS y FILTER FALSE)
    ->  T AS x FILTER x.a > 1 AND x.b < 2

Cost: linear (quadratic in the number of disjuncts of one OR, to drop duplicates).
"""

from __future__ import annotations

from dataclasses import replace

from cer_cli.compiler.rewrite.lp_normal_form import atom_labels
from cer_cli.query import ast
from cer_cli.query.scope import atom_type, children, conj, disj, filter_var, pred_vars, rename_var


def simplify(formula: ast.Formula) -> ast.Formula | None:
    if isinstance(formula, (ast.EventType, ast.FNot)):
        return formula
    kids = [simplify(k) for k in children(formula)]
    if isinstance(formula, ast.FOr):
        parts: list[ast.Formula] = []
        for k in kids:
            for d in _disjuncts(k):
                if d not in parts:
                    parts.append(d)
        return disj(parts) if parts else None
    if any(k is None for k in kids):
        return None
    if isinstance(formula, ast.As):
        inner = kids[0]
        if isinstance(inner, ast.As) and inner.var == formula.var:
            return inner
        return _atom(ast.As(inner, formula.var, span=formula.span))
    if isinstance(formula, ast.Seq):
        if formula.absent is None:
            return replace(formula, left=kids[0], right=kids[1])
        psi = absent_atom(formula.absent)
        return replace(formula, left=kids[0], right=kids[1], absent=psi)
    if isinstance(formula, ast.Plus):
        return ast.Plus(kids[0], formula.contiguous, span=formula.span)
    assert isinstance(formula, ast.Filter)
    pred = fold(formula.predicate)
    if isinstance(pred, ast.BoolConst):
        return kids[0] if pred.value else None
    inner = kids[0]
    if (isinstance(inner, ast.Filter) and filter_var(inner) is not None
            and pred_vars(pred) == pred_vars(inner.predicate)):
        return _atom(ast.Filter(inner.formula, ast.And(inner.predicate, pred), span=formula.span))
    return _atom(ast.Filter(inner, pred, span=formula.span))


def _disjuncts(f: ast.Formula | None) -> list[ast.Formula]:
    if f is None:
        return []
    if isinstance(f, ast.FOr):
        return _disjuncts(f.left) + _disjuncts(f.right)
    return [f]


def _atom(f: ast.Formula) -> ast.Formula | None:
    """Canonical ``E AS ... FILTER P`` when ``f`` is an atom whose filters read its labels.

    All labels of an atom name the same single event, so the filters merge into one
    predicate on one variable (the outermost AS variable, else the type label); a merged
    predicate that is contradictory makes the atom unsatisfiable (None).
    """
    t = atom_type(f)
    if t is None:
        return f
    labels = atom_labels(f)
    names, preds = [], []
    node = f
    while isinstance(node, (ast.As, ast.Filter)):
        if isinstance(node, ast.As):
            names.append(node.var)
        else:
            if not pred_vars(node.predicate) <= labels:
                return f
            preds.append(node.predicate)
        node = node.formula
    out: ast.Formula = t
    for name in reversed(dict.fromkeys(reversed(names))):
        out = ast.As(out, name)
    if not preds:
        return out
    var = names[0] if names else t.label
    pred = fold(conj([rename_var(p, None, var) for p in preds[::-1]]))
    if isinstance(pred, ast.BoolConst):
        return out if pred.value else None
    # One event, one guard; its connectives keep their scope. They mean the same inside
    # and between x[...] groups only while every value is there: on id null and v 0,
    # x[id < 0] OR x[v = 0] holds and x[id < 0 OR v = 0] does not (merged into one group,
    # the first was false).
    return ast.Filter(out, pred) if satisfiable(pred) else None


def satisfiable(pred: ast.Predicate) -> bool:
    """False only when a conjunction of comparisons with constants is contradictory, e.g.
    ``temp >= 40 AND temp < 40``; True when unsure."""
    lows, highs, equal = {}, {}, {}
    for lit in _conjuncts(pred):
        cmp = _simple(lit)
        if cmp is None:
            continue
        key, op, value = cmp
        if op == "=":
            if equal.setdefault(key, value) != value:
                return False
            if isinstance(value, str):
                continue
            op_bounds = ((">=", value), ("<=", value))
        elif op == "!=" or isinstance(value, str):
            continue
        else:
            op_bounds = ((op, value),)
        for o, v in op_bounds:
            table, better = (lows, max) if o in (">", ">=") else (highs, min)
            strict = o in (">", "<")
            old = table.get(key)
            if old is None or better(old[0], v) != old[0] or (old[0] == v and strict):
                table[key] = (v, strict or (old is not None and old[0] == v and old[1]))
    for key, (lo, lo_strict) in lows.items():
        if key in highs:
            hi, hi_strict = highs[key]
            if isinstance(lo, str) or isinstance(hi, str):
                continue
            if lo > hi or (lo == hi and (lo_strict or hi_strict)):
                return False
    return True


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "=": "!=", "!=": "="}


def _conjuncts(pred: ast.Predicate) -> list[ast.Predicate]:
    if isinstance(pred, ast.And):
        return _conjuncts(pred.left) + _conjuncts(pred.right)
    return [pred]


def _simple(pred: ast.Predicate) -> tuple[tuple[str, str], str, object] | None:
    """``(variable, attribute), op, constant`` for ``attr op constant`` (possibly negated)."""
    negate = isinstance(pred, ast.Not)
    if negate:
        pred = pred.operand
    if not isinstance(pred, ast.Compare):
        return None
    op, left, right = pred.op, pred.left, pred.right
    if isinstance(left, ast.Literal) and isinstance(right, ast.AttrRef):
        op, left, right = _FLIP[op], right, left
    if not (isinstance(left, ast.AttrRef) and isinstance(right, ast.Literal)):
        return None
    return (left.var, left.attr), _NEGATE[op] if negate else op, right.value


def fold(pred: ast.Predicate) -> ast.Predicate:
    """Remove TRUE/FALSE from AND, OR and NOT."""
    if isinstance(pred, ast.Not):
        inner = fold(pred.operand)
        if isinstance(inner, ast.BoolConst):
            return ast.BoolConst(not inner.value)
        return replace(pred, operand=inner)  # its scope kept: x[NOT p] is one atom
    if isinstance(pred, (ast.And, ast.Or)):
        left, right = fold(pred.left), fold(pred.right)
        absorbing = isinstance(pred, ast.Or)  # TRUE absorbs OR, FALSE absorbs AND
        for a, b in ((left, right), (right, left)):
            if isinstance(a, ast.BoolConst):
                return a if a.value == absorbing else b
        return replace(pred, left=left, right=right)
    return pred


def absent_atom(psi: ast.Formula) -> ast.Formula | None:
    """ψ of ``φ1 ; !ψ ; φ2`` as ``E FILTER E[p]`` (``None``: ψ never holds, the gap is free).

    ψ matches one event, so all its variables (its labels, AS names) denote that event: they
    are renamed to the label and the filters merged, giving one unary predicate that the
    alphabet tests per event, as the automaton's gap guard ``NOT ψ`` needs."""
    preds = []
    while isinstance(psi, (ast.As, ast.Filter)):
        if isinstance(psi, ast.Filter):
            preds.append(psi.predicate)
        psi = psi.formula
    assert isinstance(psi, ast.EventType), psi
    if not preds:
        return psi
    pred = fold(conj([rename_var(p, None, psi.label) for p in reversed(preds)]))
    if isinstance(pred, ast.BoolConst):
        return psi if pred.value else None
    return ast.Filter(psi, pred)
