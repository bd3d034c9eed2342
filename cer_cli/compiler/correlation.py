"""Predicates between events (correlation): where they sit, and how the query is rewritten.

A filter atom that reads two or more variables (``x.id = z.id``, ``x.v < y.v + 1``) is not a
property of one event, so the CEA, whose transitions read one event, cannot test it. Two
methods, tried in this order by the planner (``cer_cli.plan``) through
``equality_to_partition`` and ``relax_correlation``:

1. **Partition rewrite.** When every such atom is an equality ``x.a = y.a`` on one attribute
   name, and the equalities tie every event a match can report to every other one, then a
   match's events all share one value of ``a``: the query equals the same query with the
   atoms dropped and ``PARTITION BY [a]`` added (the sub-stream of one key keeps the order
   of the events). This needs positions to mean nothing across keys: no ``:`` / ``:+``
   contiguity, no ``NOT(…)`` (it consumes an event of any key), no ``WITHIN n EVENTS``, no
   ``STRICT`` (gaps are counted in the global stream), no ``CONSUME BY PARTITION`` (its
   scope would shrink to one key). The cost is then the cost of a unary query.

2. **Post-filtered relaxation.** Otherwise the conjuncts holding such atoms are removed
   from their filters (the *relaxation*), the automaton binds their variables, and the
   engine (``cer_cli.engine.post_filter``) keeps a candidate valuation iff every removed
   conjunct holds for every combination of the events of its variables (docs/language.md),
   before SELECT, the strategy, LIMIT and CONSUME BY. Exact when the valuation alone
   tells which events the conjunct constrains (``site_problem``); other shapes are
   rejected with a QueryError.
   The cost is the number of candidates, which may be exponentially larger than the
   number of results. When the removed conjuncts are equalities ``x.a = y.b`` in the
   fragment of ``cer_cli.compiler.pcea`` (chosen by the planner after the passes), the
   engine joins them by key in a PCEA (the hash join) instead of testing candidates.

Absence: ``implied_absence`` drops the comparisons of an absent ψ with the match that a
partition key implies; ``relax_absence`` turns any other into an ``AbsenceSite`` that the
post-filter checks per candidate (the gap leaves the automaton); a trailing ψ's becomes one
(``trailing_absence_site``) that ``engine.absence`` checks when a match's deadline passes.

Both analyses work on the formula *before* ``split_filters`` (which would copy a mixed
``OR`` into formula branches and lose which branch a conjunct belonged to).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from cer_cli.compiler.rewrite.split_filters import propagate_constants
from cer_cli.query import ast
from cer_cli.query.errors import QueryError
from cer_cli.query.printer import to_text
from cer_cli.query.scope import (
    Path,
    at,
    bound,
    children,
    conj,
    conjuncts,
    defines,
    filter_atoms,
    is_atom,
    nodes,
    pred_vars,
    prev_refs,
    rename_var,
    subformulas,
    with_children,
)

# --------------------------------------------------------------------------- predicate shape


def between_atoms(p: ast.Predicate) -> Iterator[ast.Predicate]:
    """Atoms of ``p`` that read two or more variables, or an event of the previous iteration
    (``PREV(y).a``: a register, docs/language.md)."""
    if is_atom(p):
        if len(pred_vars(p)) >= 2 or prev_refs(p):
            yield p
        return
    if isinstance(p, (ast.And, ast.Or)):
        yield from between_atoms(p.left)
        yield from between_atoms(p.right)
    elif isinstance(p, ast.Not):
        yield from between_atoms(p.operand)


def is_correlation(p: ast.Predicate) -> bool:
    return any(True for _ in between_atoms(p))


def has_correlation(formula: ast.Formula | None) -> bool:
    return formula is not None and any(
        isinstance(n, ast.Filter) and is_correlation(n.predicate) for _, n in nodes(formula)
    )


def shown(p: ast.Predicate) -> str:
    return to_text(p)


# --------------------------------------------------------------------------- formula walking


def _definers(f: ast.Formula, v: str) -> list[Path]:
    """Paths of the nodes that bind ``v``: ``AS v`` and event types labelled ``v``."""
    out = []
    for path, n in nodes(f):
        if (isinstance(n, ast.As) and n.var == v) or (
            isinstance(n, ast.EventType) and v in (n.name, n.label)
        ):
            out.append(path)
    return out


def _inside(path: Path, root: Path) -> bool:
    return path[: len(root)] == root


def _site_conjuncts(f: ast.Filter) -> list[ast.Predicate]:
    return conjuncts(propagate_constants(f.predicate, bound(f.formula, with_labels=True)))


@dataclass(frozen=True)
class Site:
    """A conjunct with an atom between events, at the filter found at ``path``.

    ``guards``: variables that are non-empty exactly when the match went through the OR
    branches leading to the filter; the conjunct is only tested then.
    """

    predicate: ast.Predicate
    path: Path
    guards: tuple[str, ...] = ()


def sites(formula: ast.Formula) -> list[tuple[Path, ast.Predicate]]:
    out = []
    for path, n in nodes(formula):
        if isinstance(n, ast.Filter):
            for c in _site_conjuncts(n):
                if is_correlation(c):
                    out.append((path, c))
    return out


def site_problem(formula: ast.Formula, path: Path, c: ast.Predicate) -> str | tuple[str, ...]:
    """Why a whole valuation cannot decide the conjunct ``c`` at the filter at ``path``
    (a message), or the guard variables under which it applies (a tuple).

    The conjunct constrains the events its variables have *at the filter*: inside the
    filtered formula for variables it defines (rule 1), at the lowest enclosing formula
    that binds them otherwise (rule 2). Those are all the valuation's events of the
    variable when every binder of the variable lies in that scope and the scope is used
    once per match. A ``+`` around the filter repeats the scope: fine when one variable of
    ``c`` is inside it and ``c`` is a single atom (a for-all over the union of the
    iterations), not otherwise. An ``OR`` on the way decides whether the filter applies at
    all: fine when a variable bound on every path of that branch, and nowhere else, says
    which branch the match took.
    """
    site = at(formula, path)
    assert isinstance(site, ast.Filter)
    local = defines(site.formula)
    vs = pred_vars(c)
    text = shown(c)
    if prev_refs(c):
        problem = _register_problem(formula, path, c)
        if problem is not None:
            return problem
    guards: list[str] = []
    plus_seen = False
    for depth in range(len(path)):
        anc = at(formula, path[:depth])
        below = path[: depth + 1]
        branch = at(formula, below)
        if isinstance(anc, ast.Plus):
            plus_seen = True
            inner = {v for v in vs if v in defines(anc.body)}
            if len(inner) > 1:
                return (
                    f"'{text}' compares {', '.join(sorted(inner))} within each repetition of a '+'"
                    " that binds them all; a match's events do not say which events were in the"
                    " same repetition"
                )
            if inner and not is_atom(c):
                return (
                    f"'{text}' combines several tests inside a '+'; each repetition may pass it"
                    " through a different part, which a match's events cannot show"
                )
        if isinstance(anc, ast.FOr):
            if plus_seen:
                return (
                    f"'{text}' sits in one branch of an OR inside a '+'; a match's events do not"
                    " say which repetitions took that branch"
                )
            other = children(anc)[1 - path[depth]]
            guard = next(
                (
                    g
                    for g in sorted(bound(branch, with_labels=True))
                    if g not in defines(other)
                    and all(_inside(d, below) for d in _definers(formula, g))
                ),
                None,
            )
            if guard is None:
                return (
                    f"'{text}' sits in one branch of an OR whose other branch binds the same"
                    " variables; a match's events cannot tell which branch it took, so whether"
                    " the predicate applies is unknown"
                )
            guards.append(guard)
    for v in sorted(vs):
        if v in local:
            scope = (*path, 0)
            where = "the filtered pattern"
        else:
            scope = next(
                (path[:d] for d in range(len(path), -1, -1)
                 if v in bound(at(formula, path[:d]), with_labels=True)),
                None,
            )
            if scope is None:  # checks reject this first
                return f"'{text}' reads '{v}', which no enclosing pattern binds on every path"
            where = "the pattern that binds it on every path"
        outside = [d for d in _definers(formula, v) if not _inside(d, scope)]
        if outside:
            return (
                f"'{text}' constrains the events of '{v}' inside {where}, but '{v}' is also bound"
                f" outside it; a match's events of '{v}' mix both"
            )
    return tuple(guards)


_REGISTER_HINT = ("PREV(y).a reads y's event in the previous iteration of the '+' around the"
                  " filter: write (T AS y FILTER y.v > PREV(y).v)+, one event of y per iteration")


def _register_problem(formula: ast.Formula, path: Path, c: ast.Predicate) -> str | None:
    """Why ``PREV(y).a`` in the conjunct ``c`` cannot be read from a match, or None.

    A match's events of y are the events of every iteration of y's ``+``; they say which
    event was the previous iteration's when each iteration binds y exactly once (then the
    iterations are y's events in order) and the ``+`` runs once per match."""
    text = shown(c)
    (y, *more) = sorted(prev_refs(c))
    if more or pred_vars(c) != {y} or not is_atom(c):
        return (f"'{text}' must be one comparison that reads only {y} and PREV({y}) (a register"
                " of the iteration)")
    pluses = [d for d in range(len(path)) if isinstance(at(formula, path[:d]), ast.Plus)]
    if not pluses:
        return f"'{text}' reads PREV({y}) outside any '+': there is no previous iteration"
    plus = at(formula, path[:pluses[-1]])
    if y not in defines(plus.body):
        return f"'{text}' reads PREV({y}) but the enclosing '+' does not bind {y}"
    if len(pluses) > 1:
        return (f"'{text}' reads PREV({y}) inside a '+' that is itself repeated; a match's events"
                " do not say where each inner sequence starts")
    if _once(plus.body, y) != 1:
        return (f"'{text}' reads PREV({y}), but an iteration of its '+' may bind {y} to several"
                " events (or none); bind it to exactly one event per iteration")
    return None


def _once(f: ast.Formula, y: str) -> int | None:
    """How many events every match of ``f`` binds to ``y`` (None: it varies)."""
    if isinstance(f, ast.EventType):
        return int(y in (f.name, f.label))
    if isinstance(f, ast.FNot):
        return 0
    if isinstance(f, ast.As):
        if f.var != y:
            return _once(f.formula, y)
        return _once_size(f.formula)  # every event the inner formula reports
    if isinstance(f, ast.Filter):
        return _once(f.formula, y)
    if isinstance(f, ast.Plus):
        return 0 if _once(f.body, y) == 0 else None
    left, right = _once(f.left, y), _once(f.right, y)
    if isinstance(f, ast.Seq):
        return None if left is None or right is None else left + right
    return left if left == right else None


def _once_size(f: ast.Formula) -> int | None:
    """How many events every match of ``f`` reports (None: it varies)."""
    if isinstance(f, ast.EventType):
        return 1
    if isinstance(f, ast.FNot):
        return 0
    if isinstance(f, (ast.As, ast.Filter)):
        return _once_size(children(f)[0])
    if isinstance(f, ast.Plus):
        return None
    left, right = _once_size(f.left), _once_size(f.right)
    if isinstance(f, ast.Seq):
        return None if left is None or right is None else left + right
    return left if left == right else None


# --------------------------------------------------------------------------- pass 1: partition


def _equality_attr(c: ast.Predicate) -> tuple[str, str, str] | None:
    """``x.a = y.a`` -> ``(a, x, y)``."""
    if (
        isinstance(c, ast.Compare)
        and c.op == "="
        and isinstance(c.left, ast.AttrRef)
        and isinstance(c.right, ast.AttrRef)
        and c.left.attr == c.right.attr
        and c.left.var != c.right.var
    ):
        return c.left.attr, c.left.var, c.right.var
    return None


def _always_nonempty(f: ast.Formula) -> frozenset[str]:
    """Variables with at least one event in every match (``bound``, but a ``+`` has at least
    one repetition)."""
    if isinstance(f, ast.EventType):
        return frozenset({f.name, f.label})
    if isinstance(f, ast.FNot):
        return frozenset()
    if isinstance(f, ast.As):
        return _always_nonempty(f.formula) | {f.var}
    if isinstance(f, (ast.Filter, ast.Plus)):
        return _always_nonempty(children(f)[0])
    if isinstance(f, ast.Seq):
        return _always_nonempty(f.left) | _always_nonempty(f.right)
    return _always_nonempty(f.left) & _always_nonempty(f.right)


def partition_plan(query: ast.Query) -> tuple[str | None, str]:
    """``(attribute, why)`` when the partition rewrite applies, else ``(None, why not)``."""
    f = query.formula
    found = sites(f)
    if not found:
        return None, "no predicate between events"
    attrs, edges = set(), []
    for path, c in found:
        eq = _equality_attr(c)
        if eq is None:
            return None, f"'{shown(c)}' is not an equality of one attribute between two events"
        problem = site_problem(f, path, c)
        if isinstance(problem, str) or problem:
            return None, problem if isinstance(problem, str) else f"'{shown(c)}' sits under an OR"
        attrs.add(eq[0])
        edges.append(eq[1:])
    if len(attrs) > 1:
        return None, f"the equalities compare different attributes ({', '.join(sorted(attrs))})"
    (attr,) = attrs
    for _, n in nodes(f):
        if isinstance(n, ast.FNot):
            return None, "NOT(…) consumes events of every key"
        if isinstance(n, (ast.Seq, ast.Plus)) and n.contiguous:
            return None, "':' counts positions in the whole stream"
    if isinstance(query.within, ast.EventsWindow):
        return None, "WITHIN n EVENTS counts positions in the whole stream"
    if query.strategy == "STRICT":
        return None, "STRICT counts gaps in the whole stream"
    if query.consume == "PARTITION":
        return None, "CONSUME BY PARTITION would forget per key instead of per stream"
    tied = {v for e in edges for v in e}
    # every event a match reports is bound to a tied variable
    def leaves(g: ast.Formula, marks: frozenset[str]) -> Iterator[frozenset[str]]:
        if isinstance(g, ast.EventType):
            yield marks | {g.name, g.label}
        elif isinstance(g, ast.As):
            yield from leaves(g.formula, marks | {g.var})
        elif not isinstance(g, ast.FNot):
            for k in children(g):
                yield from leaves(k, marks)

    for marks in leaves(f, frozenset()):
        if not marks & tied:
            return None, f"an event bound to {', '.join(sorted(marks))} is not tied by the equalities"
    # the equalities connect the always-present variables, and reach every other one
    nonempty = _always_nonempty(f) & tied
    if not nonempty:
        return None, "no tied variable is present in every match"
    reach, todo = set(), [next(iter(sorted(nonempty)))]
    while todo:
        v = todo.pop()
        if v in reach:
            continue
        reach.add(v)
        todo += [b for a, b in edges if a == v and b in nonempty]
        todo += [a for a, b in edges if b == v and a in nonempty]
    if reach != nonempty:
        return None, "the equalities do not tie the variables into one class"
    # A match without a tied variable satisfies its equalities vacuously, so its other
    # events need no key at all; partitioning would drop those without one.
    absent = sorted(tied - nonempty)
    if absent:
        return None, (f"'{absent[0]}' may be absent from a match, and then its equalities hold"
                      " whatever the other events' keys are")
    return attr, f"every event of a match shares '{attr}'"


def _drop(formula: ast.Formula, keep) -> ast.Formula:
    """Remove the conjuncts ``keep(path, conjunct)`` rejects from every filter."""

    def walk(f: ast.Formula, path: Path) -> ast.Formula:
        if isinstance(f, ast.FNot):
            return f
        f = with_children(f, tuple(walk(k, (*path, i)) for i, k in enumerate(children(f))))
        if isinstance(f, ast.Filter):
            parts = _site_conjuncts(f)
            kept = [c for c in parts if keep(path, c)]
            if len(kept) != len(parts):
                return replace(f, predicate=conj(kept)) if kept else f.formula
        return f

    return walk(formula, ())


def equality_to_partition(query: ast.Query) -> ast.Query:
    """Pass: equalities tying every event of a match -> ``PARTITION BY [attr]``."""
    attr, _ = partition_plan(query)
    if attr is None:
        return query
    formula = _drop(query.formula, lambda _p, c: not is_correlation(c))
    groups = query.partition_by
    if (attr,) not in groups:
        groups = (*groups, (attr,))
    return replace(query, formula=formula, partition_by=groups)



# --------------------------------------------------------------------------- pass 2: relaxation


def relax_correlation(query: ast.Query) -> tuple[ast.Query, tuple[Site, ...]]:
    """Pass: remove the conjuncts with atoms between events; return them as post-filters.

    Raises QueryError (naming the predicate) when a valuation cannot decide one."""
    f = query.formula
    found = []
    for path, c in sites(f):
        problem = site_problem(f, path, c)
        if isinstance(problem, str):
            raise QueryError(
                f"cannot evaluate the predicate between events {problem}",
                c.span or at(f, path).span,
                hints=[_REGISTER_HINT if prev_refs(c) else
                       "move the predicate to a filter around the whole pattern, or bind its"
                       " variables outside the OR / '+'"],
            )
        found.append(Site(c, path, problem))
    if not found:
        return query, ()
    relaxed = _drop(f, lambda _p, c: not is_correlation(c))
    return replace(query, formula=relaxed), tuple(found)


def predicate_class(p: ast.Predicate) -> str:
    """The class of a conjunct between events, as ``explain`` names it: ``equality`` (two
    attributes, ``x.a = y.b``), ``comparison`` (``<``, ``<=``, ``>``, ``>=``, ``!=``, or
    ``=`` over arithmetic), ``register`` (an atom reading ``PREV(y).a``), or ``other`` (OR,
    NOT, several atoms)."""
    if prev_refs(p):
        return "register"
    if isinstance(p, ast.Compare):
        plain = isinstance(p.left, ast.AttrRef) and isinstance(p.right, ast.AttrRef)
        if p.op == "=" and plain:
            return "equality"
        return "comparison"
    return "other"
# --------------------------------------------------------------------------- correlated absence


def _absent_nodes(f: ast.Formula) -> Iterator[ast.Formula]:
    for n in subformulas(f):
        if isinstance(n, ast.Seq) and n.absent is not None:
            yield n.absent


def _psi_own(psi: ast.Formula) -> frozenset[str]:
    own, atom = set(), psi
    while isinstance(atom, (ast.As, ast.Filter)):
        if isinstance(atom, ast.As):
            own.add(atom.var)
        atom = atom.formula
    return frozenset(own | {atom.name, atom.label})


def _implied(psi: ast.Formula, keys: frozenset[str], own: frozenset[str]) -> ast.Formula:
    """ψ without its conjuncts ``ψ.k = x.k`` on a partition key ``k`` (true for every event
    of a partition). Any other comparison with the match stays: the post-filter checks it
    for a gap (``relax_absence``), ``engine.absence`` for a trailing ψ
    (``trailing_absence_site``)."""
    if isinstance(psi, ast.As):
        return replace(psi, formula=_implied(psi.formula, keys, own))
    if not isinstance(psi, ast.Filter):
        return psi
    inner = _implied(psi.formula, keys, own)
    kept = []
    for c in conjuncts(psi.predicate):
        eq = _equality_attr(c)
        if (all(pred_vars(a) <= own for a in filter_atoms(c)) or eq is None
                or eq[0] not in keys or len({eq[1], eq[2]} & own) != 1):
            kept.append(c)
    return inner if not kept else replace(psi, formula=inner, predicate=conj(kept))


def implied_absence(query: ast.Query) -> tuple[ast.Query, str | None]:
    """Correlated absence by partition (docs/language.md, "Absence"): ``!(B AS b FILTER
    b.user = a.user)`` under ``PARTITION BY user`` — given, or made by the partition rewrite
    from the query's own equalities on ``user`` — is ``!B`` inside each key's sub-stream, the
    cheapest exact method (the gap's guard stays in the automaton). Returns the query with
    those conjuncts dropped and a note for ``cer explain`` (None when nothing was dropped).

    Raises QueryError for absence in a query with predicates between events that do not all
    become PARTITION BY, or whose ψ is not tied to that key (moving the gap into a key's events would change what it forbids)."""
    psis = list(_absent_nodes(query.formula))
    if query.trailing is not None:
        psis.append(query.trailing)
    if not psis:
        return query, None
    keys = {g[0] for g in query.partition_by if len(g) == 1}
    if sites(query.formula):
        attr, why = partition_plan(query)
        if attr is None:
            c = sites(query.formula)[0][1]
            raise QueryError("'!' (absence) in a query with predicates between events needs them"
                             f" to become PARTITION BY, and here they cannot: {why}",
                             c.span, hints=["PARTITION BY the shared attribute instead of "
                                            "comparing it"])
        for psi in psis:
            own = _psi_own(psi)
            tied = any(
                (eq := _equality_attr(c)) is not None and eq[0] == attr
                and len({eq[1], eq[2]} & own) == 1
                for f in subformulas(psi) if isinstance(f, ast.Filter)
                for c in conjuncts(f.predicate))
            if not tied and (attr,) not in query.partition_by:
                raise QueryError(
                    f"the query's equalities on '{attr}' become PARTITION BY {attr}, which would"
                    f" make '!' forbid only events with the same {attr}; say so in the absent"
                    f" event's filter (e.g. b.{attr} = a.{attr}) or PARTITION BY {attr}",
                    psi.span)
        keys.add(attr)
    dropped = []

    def walk(f: ast.Formula) -> ast.Formula:
        kids = tuple(walk(k) for k in children(f))
        f = with_children(f, kids) if kids else f
        if isinstance(f, ast.Seq) and f.absent is not None:
            psi = _implied(f.absent, frozenset(keys), _psi_own(f.absent))
            if psi != f.absent:
                dropped.append(psi)
            f = replace(f, absent=psi)
        return f

    out = replace(query, formula=walk(query.formula))
    if query.trailing is not None:
        psi = _implied(query.trailing, frozenset(keys), _psi_own(query.trailing))
        if psi != query.trailing:
            dropped.append(psi)
        out = replace(out, trailing=psi)
    if not dropped:
        return out, None
    return out, (f"{len(dropped)} comparison(s) of an absent event with the match hold inside"
                 f" each PARTITION BY key ({', '.join(sorted(keys))}): the gap tests the rest")


#: The name ψ's own variables get in an ``AbsenceSite``'s predicates (not an identifier, so
#: it cannot meet a variable of the match).
PSI = "!ψ"


@dataclass(frozen=True)
class AbsenceSite:
    """A gap ``φ1 ; !ψ ; φ2`` whose ψ compares with the match (``relax_absence``).

    The automaton's gap is free and marks φ1's last event with ``gap + ".left"`` and φ2's
    first with ``gap + ".right"``; a candidate is kept iff no event strictly between them
    (in its partition) is an ``etype`` satisfying ``unary`` and ``correlated`` (ψ's own
    variables renamed ``PSI``, the others the match's single events). ``method``:
    ``bisect`` when ``correlated`` is ``ψ.a = expr`` of one match variable (``key``: the
    two sides), else ``scan``."""

    gap: str
    etype: ast.EventType
    unary: ast.Predicate | None
    correlated: ast.Predicate
    predicate: ast.Predicate  # as written, for messages and explain
    method: str
    key: tuple[ast.Expr, ast.Expr] | None = None

    @property
    def bounds(self) -> tuple[str, str]:
        return f"{self.gap}.left", f"{self.gap}.right"

    @property
    def match_vars(self) -> frozenset[str]:
        return frozenset(pred_vars(self.correlated) - {PSI})


def _bisect_key(c: ast.Predicate) -> tuple[ast.Expr, ast.Expr] | None:
    """``(ψ.a, expr)`` when ``c`` is ``ψ.a = expr`` (either order), expr of one match
    variable."""
    if not isinstance(c, ast.Compare) or c.op != "=" or prev_refs(c):
        return None
    for mine, other in ((c.left, c.right), (c.right, c.left)):
        if (isinstance(mine, ast.AttrRef) and mine.var == PSI
                and len(pred_vars(other)) == 1 and PSI not in pred_vars(other)):
            return mine, other
    return None


def relax_absence(query: ast.Query) -> tuple[ast.Query, tuple[AbsenceSite, ...]]:
    """Pass: a gap whose ψ still compares with the match (after ``implied_absence``) leaves
    the automaton; ``AbsenceSite`` says how the post-filter checks it (docs/language.md,
    "Absence"). Raises QueryError for a gap inside a '+' (its bounds repeat) or a ψ reading
    a variable also bound outside the gap's sequence."""
    out: list[AbsenceSite] = []

    def walk(f: ast.Formula, path: Path, in_plus: bool) -> ast.Formula:
        kids = tuple(walk(k, (*path, i), in_plus or isinstance(f, ast.Plus))
                     for i, k in enumerate(children(f)))
        f = with_children(f, kids) if kids else f
        if not (isinstance(f, ast.Seq) and f.absent is not None):
            return f
        site = _absence_site(f.absent, f"gap{len(out) + 1}")
        if site is None:
            return f
        if in_plus:
            raise QueryError(f"'{shown(site.predicate)}' compares the absent event with the match"
                             " inside a '+': each repetition has its own gap", site.predicate.span,
                             hints=["move the absence out of the '+'"])
        for v in sorted(site.match_vars):
            if any(not _inside(d, path) for d in _definers(query.formula, v)):
                raise QueryError(f"'{shown(site.predicate)}' reads '{v}', which is also bound"
                                 " outside the sequence around the '!'", site.predicate.span)
        out.append(site)
        return replace(f, absent=None, gap=site.gap)

    formula = walk(query.formula, (), False)
    return (replace(query, formula=formula) if out else query), tuple(out)


def _absence_site(psi: ast.Formula, gap: str) -> AbsenceSite | None:
    """ψ's comparisons with the match as an ``AbsenceSite`` (None when it has none)."""
    own, parts, atom = _psi_own(psi), [], psi
    while isinstance(atom, (ast.As, ast.Filter)):
        if isinstance(atom, ast.Filter):
            parts += conjuncts(atom.predicate)
        atom = atom.formula
    mine = [c for c in parts if all(pred_vars(a) <= own for a in filter_atoms(c))]
    theirs = [c for c in parts if c not in mine]
    if not theirs:
        return None
    rename = _rename_own(own)
    corr = rename(conj(theirs))
    key = _bisect_key(corr) if len(theirs) == 1 else None
    return AbsenceSite(gap, atom, rename(conj(mine)) if mine else None, corr, conj(theirs),
                       "bisect" if key else "scan", key)


def trailing_absence_site(query: ast.Query) -> AbsenceSite | None:
    """A trailing ψ that still compares with the match (after ``implied_absence``): checked
    by ``engine.absence.TrailingAbsence`` when a waiting match's deadline passes, over the
    events between φ's last event and the first event past the deadline (the "gap" bounds
    are those two positions, not marks)."""
    return None if query.trailing is None else _absence_site(query.trailing, "trailing")


def _rename_own(own: frozenset[str]):
    def rename(p: ast.Predicate) -> ast.Predicate:
        for v in sorted(own):
            p = rename_var(p, v, PSI)
        return p

    return rename
