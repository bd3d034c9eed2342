"""Traversal of CEL formulas and predicates: the one home of the syntactic walkers.

Checks, rewrite passes, correlation analysis, construction and the memory verdict all read the
same few facts off the AST — sub-formulas, the variables a predicate reads, the variable sets
of Foundations of CEP (Grez, Riveros, Ugarte, Vansummeren) §3 and §5: ``vdef``, ``vdef+``,
``bound`` — so each fact is computed here once. Event-type labels (``E``, ``S>E``) are
variables for filters and SELECT but are not *defined* variables; the functions say which they
count. Everything is linear in the formula and imports nothing but the AST.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from cer_cli.query import ast

Path = tuple[int, ...]
_CONNECTIVES = (ast.And, ast.Or, ast.Not)
_SCALARS = (str, int, float, bool)

# --------------------------------------------------------------------------- formula shape


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


def subformulas(f: ast.Formula) -> Iterator[ast.Formula]:
    """Pre-order walk over ``f`` and all its sub-formulas, those under ``NOT`` included."""
    yield f
    for kid in children(f):
        yield from subformulas(kid)


def nodes(f: ast.Formula, path: Path = ()) -> Iterator[tuple[Path, ast.Formula]]:
    """Pre-order ``(path, node)`` pairs, not entering ``NOT(…)``; ``at`` inverts the path."""
    yield path, f
    if isinstance(f, ast.FNot):
        return
    for i, k in enumerate(children(f)):
        yield from nodes(k, (*path, i))


def bottom_up(f: ast.Formula) -> Iterator[ast.Formula]:
    """Post-order walk: every sub-formula after its own, those under ``NOT`` and the ψ of
    ``φ1 ; !ψ ; φ2`` included (the order in which the alphabet numbers a CEA's atoms)."""
    for kid in children(f):
        yield from bottom_up(kid)
    if isinstance(f, ast.Seq) and f.absent is not None:
        yield from bottom_up(f.absent)
    yield f


def at(f: ast.Formula, path: Path) -> ast.Formula:
    """The node of ``f`` at ``path`` (child indices, as ``nodes`` gives them)."""
    for i in path:
        f = children(f)[i]
    return f


def size(f: ast.Formula | None) -> int:
    """Number of formula nodes, to report blow-ups."""
    if f is None:
        return 0
    return 1 + sum(size(k) for k in children(f))


def atom_type(f: ast.Formula) -> ast.EventType | None:
    """The event type of an *atom* (an ``EventType`` under AS / FILTER wrappers), else None."""
    while isinstance(f, (ast.As, ast.Filter)):
        f = f.formula
    return f if isinstance(f, ast.EventType) else None


def absent_formulas(f: ast.Formula) -> list[ast.Formula]:
    """Every ψ of ``φ1 ; !ψ ; φ2`` in ``f`` (a field of ``Seq``, not a sub-formula)."""
    return [n.absent for n in subformulas(f) if isinstance(n, ast.Seq) and n.absent is not None]


def disj(parts: list[ast.Formula]) -> ast.Formula:
    """``parts[0] OR parts[1] OR …``, left-nested."""
    out = parts[0]
    for p in parts[1:]:
        out = ast.FOr(out, p)
    return out


# --------------------------------------------------------------------------- variable sets


def type_labels(e: ast.EventType) -> frozenset[str]:
    """Variables an event-type atom binds: ``E``, and ``S>E`` too when qualified."""
    return frozenset({e.name, e.label})


def labels(f: ast.Formula) -> frozenset[str]:
    """Event-type labels ``f`` marks (inside ``+`` too); atoms under ``NOT`` mark nothing.

    Labels are variables for filters and SELECT, but not *defined* variables: ``SELL ; SELL``
    is safe."""
    if isinstance(f, ast.EventType):
        return type_labels(f)
    if isinstance(f, ast.FNot):
        return frozenset()
    return frozenset().union(*(labels(k) for k in children(f)))


def vdef(f: ast.Formula) -> frozenset[str]:
    """Variables defined by some ``AS`` anywhere in ``f``, never inside ``NOT`` (§3, vdef)."""
    if isinstance(f, (ast.EventType, ast.FNot)):
        return frozenset()
    own = frozenset({f.var}) if isinstance(f, ast.As) else frozenset()
    return own.union(*(vdef(k) for k in children(f)))


def vdef_plus(f: ast.Formula) -> frozenset[str]:
    """AS variables defined outside every ``+`` (§3, vdef+): the single-event ones, what
    safety is about."""
    if isinstance(f, (ast.EventType, ast.Plus, ast.FNot)):
        return frozenset()
    own = frozenset({f.var}) if isinstance(f, ast.As) else frozenset()
    return own.union(*(vdef_plus(k) for k in children(f)))


def defines(f: ast.Formula) -> frozenset[str]:
    """Variables some match of ``f`` may bind (AS variables and labels, inside ``+`` too,
    never inside ``NOT``): the variables a filter on ``f`` reads "for all"."""
    return vdef(f) | labels(f)


def bound(f: ast.Formula, with_labels: bool = False) -> frozenset[str]:
    """Variables every match of ``f`` binds (§5, bound): ``OR`` intersects, ``;`` unites,
    ``+`` binds nothing (zero iterations of an inner choice may skip it), ``FILTER`` is
    transparent, ``φ AS x`` binds ``x`` and ``bound(φ)``. ``with_labels`` also counts
    event-type labels, which filters may read (what an *outer* filter may refer to)."""
    if isinstance(f, ast.EventType):
        return type_labels(f) if with_labels else frozenset()
    if isinstance(f, ast.As):
        return bound(f.formula, with_labels) | {f.var}
    if isinstance(f, ast.Filter):
        return bound(f.formula, with_labels)
    if isinstance(f, ast.Seq):
        return bound(f.left, with_labels) | bound(f.right, with_labels)
    if isinstance(f, ast.FOr):
        return bound(f.left, with_labels) & bound(f.right, with_labels)
    return frozenset()  # Plus, FNot


# --------------------------------------------------------------------------- predicates


def attr_refs(node) -> Iterator[ast.AttrRef]:
    """Every ``x[a]`` a predicate or value expression reads, in pre-order."""
    if isinstance(node, ast.AttrRef):
        yield node
    elif isinstance(node, tuple):
        for item in node:
            yield from attr_refs(item)
    elif node is not None and not isinstance(node, (ast.Literal, ast.BoolConst, *_SCALARS)):
        for name, value in vars(node).items():
            if name != "span":
                yield from attr_refs(value)


def operands(pred: ast.Predicate) -> list[ast.Expr]:
    """The value expressions a predicate compares, under its connectives: it is undefined
    on an event where any of them is null."""
    if isinstance(pred, (ast.And, ast.Or)):
        return operands(pred.left) + operands(pred.right)
    if isinstance(pred, ast.Not):
        return operands(pred.operand)
    if isinstance(pred, ast.Compare):
        return [pred.left, pred.right]
    if isinstance(pred, ast.InRange):
        return [pred.operand, pred.low, pred.high]
    if isinstance(pred, (ast.Like, ast.InSet, ast.InInterval)):
        return [pred.operand]
    return []


def pred_vars(node: ast.Predicate | ast.Expr) -> frozenset[str]:
    """Variables a predicate (or value expression) reads (``PREV(y).a`` reads ``y``)."""
    return frozenset(r.var for r in attr_refs(node))


def prev_refs(node: ast.Predicate | ast.Expr) -> frozenset[str]:
    """Variables read through ``PREV(y).a`` (their previous iteration's event)."""
    return frozenset(r.var for r in attr_refs(node) if isinstance(r, ast.PrevRef))


def rename_var(node, old: str | None, new: str):
    """``node`` with references to variable ``old`` (every variable if ``None``) renamed."""
    if isinstance(node, ast.AttrRef):
        return replace(node, var=new) if old is None or node.var == old else node
    if isinstance(node, (ast.Literal, ast.BoolConst, *_SCALARS)) or node is None:
        return node
    if isinstance(node, tuple):
        return tuple(rename_var(item, old, new) for item in node)
    changes = {
        name: rename_var(value, old, new)
        for name, value in vars(node).items()
        if name != "span" and not isinstance(value, _SCALARS)
    }
    return replace(node, **changes)


def strip_var(predicate: ast.Predicate) -> ast.Predicate:
    """The predicate with its variable erased, so equal tests on different variables coincide."""
    return rename_var(predicate, None, "")


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


def is_atom(p: ast.Predicate) -> bool:
    """An atom of the filter semantics: a comparison (LIKE, IN ...) or one ``x[...]`` group
    (scoped connectives), possibly negated. Connectives between atoms, even on one
    variable (``x.v > 1 OR x.v < 2``), combine the atoms' truth values (docs/language.md)."""
    if isinstance(p, _CONNECTIVES) and p.scoped:
        return True
    if isinstance(p, ast.Not) and (not isinstance(p.operand, _CONNECTIVES) or p.operand.scoped):
        return True
    return not isinstance(p, _CONNECTIVES)


def push_not(p: ast.Predicate) -> ast.Predicate:
    """``NOT p`` with the negation moved one level down (De Morgan): how ``NOT`` over
    connectives between atoms reaches the atoms (docs/language.md)."""
    if isinstance(p, ast.And):
        return ast.Or(ast.Not(p.left), ast.Not(p.right))
    if isinstance(p, ast.Or):
        return ast.And(ast.Not(p.left), ast.Not(p.right))
    if isinstance(p, ast.Not):
        return p.operand
    return ast.Not(p)


def filter_atoms(p: ast.Predicate) -> Iterator[ast.Predicate]:
    """The leaves of a filter under ``AND``/``OR``/``NOT`` (constants excluded)."""
    if isinstance(p, (ast.And, ast.Or)):
        yield from filter_atoms(p.left)
        yield from filter_atoms(p.right)
    elif isinstance(p, ast.Not):
        yield from filter_atoms(p.operand)
    elif not isinstance(p, ast.BoolConst):
        yield p


def conjuncts(p: ast.Predicate) -> list[ast.Predicate]:
    """The operands of a top-level ``AND`` chain."""
    if isinstance(p, ast.And):
        return conjuncts(p.left) + conjuncts(p.right)
    return [p]


def conj(parts: list[ast.Predicate]) -> ast.Predicate:
    """``parts[0] AND parts[1] AND …``, left-nested (inverse of ``conjuncts``)."""
    out = parts[0]
    for p in parts[1:]:
        out = ast.And(out, p)
    return out


# --------------------------------------------------------------------------- wide shape

#: "Several events": the wide shape's multiplicities are capped here.
_MANY = 2


def _events(f: ast.Formula) -> int:
    """How many events a match of ``f`` spans at most (capped at ``_MANY``)."""
    if isinstance(f, ast.EventType):
        return 1
    if isinstance(f, ast.FNot):
        return 0
    if isinstance(f, ast.Plus):
        return _MANY if _events(f.body) else 0
    if isinstance(f, ast.Seq):
        return min(_MANY, _events(f.left) + _events(f.right))
    return max((_events(k) for k in children(f)), default=0)  # OR, FILTER, AS


def _bindings(f: ast.Formula, out: dict[str, int], times: int = 1, labels: bool = False
              ) -> None:
    """Add to ``out`` how many events each variable may bind in one match (capped):
    ``φ AS x`` binds x to every event of φ; under ``+`` everything repeats; ``OR`` takes the
    larger branch; ``;`` adds. A label counts only where its atom is not directly named,
    unless ``labels`` (a SELECT that names the label: ``SELECT A ... A AS x``)."""

    def add(v: str, n: int) -> None:
        out[v] = min(_MANY, out.get(v, 0) + n)

    if isinstance(f, ast.EventType):
        for label in sorted(type_labels(f)):
            add(label, times)
        return
    if isinstance(f, ast.FNot):
        return
    if isinstance(f, ast.As):
        add(f.var, min(_MANY, times * _events(f.formula)))
        if labels or not isinstance(f.formula, ast.EventType):  # ``T AS x``: T is noise
            _bindings(f.formula, out, times, labels)
        return
    if isinstance(f, ast.Plus):
        _bindings(f.body, out, _MANY, labels)
        return
    if isinstance(f, ast.FOr):
        left: dict[str, int] = {}
        right: dict[str, int] = {}
        _bindings(f.left, left, times, labels)
        _bindings(f.right, right, times, labels)
        for v in {**left, **right}:
            add(v, max(left.get(v, 0), right.get(v, 0)))
        return
    for k in children(f):
        _bindings(k, out, times, labels)


def wide_variables(query: ast.Query) -> list[tuple[str, bool]]:
    """The wide shape's variables ``(name, many)``, in the order the query names them:
    the SELECT's when it lists some, else every variable a match may bind (AS variables,
    and event-type labels except where ``T AS x`` names the atom). ``many`` when one match
    may bind several events (under ``+``, ``(A ; B) AS x``, a label used twice): those become
    list columns. A label's column holds every event of its type, named or not (``A ; A AS
    x``: ``A`` is both events, as in the long shape's ``vars``), so it is counted over every
    atom even where only the unnamed ones make it a column."""
    found: dict[str, int] = {}
    _bindings(query.formula, found, labels=query.select is not None)
    names = list(found)
    if query.select is not None:
        names = [item.var for item in query.select if item.var in found]
    counted: dict[str, int] = {}
    _bindings(query.formula, counted, labels=True)
    return [(v, counted[v] > 1) for v in names]
