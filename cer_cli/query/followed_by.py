"""``φ ;> ψ``: the next ψ after φ (skip-till-next-match: SASE's next match, Siddhi's ``every
a -> b``, Flink's ``followedBy``), written as the absence it means (docs/language.md).

``ψ`` is one event (``E``, ``S>E``, named with AS, filtered in parentheses). ``φ ;> ψ`` is
``φ ; !ψ' ; ψ`` where ψ' is ψ's event type under a fresh variable, filtered by every
condition the query puts on ψ's event that can be decided when it arrives: the conjuncts of
ψ's own filters and of every filter around it that read ψ's event and otherwise only
variables of φ. So the ψ of a match is the *first* event after φ's match that satisfies
them: ``A AS a ;> B AS b ;> C AS c FILTER b.v > a.v AND c.v > b.v`` takes, after each a,
the first B above it, then the first C above that B. A conjunct that also reads a variable
bound after ψ (``c`` above, for ``b``) filters the match but does not choose ψ; one that
reads a variable bound before ``φ ;> ψ`` but outside φ is refused (which event it should
choose is unclear: group the sequence so that φ binds it).

The parser builds ``FollowedBy`` nodes; ``expand`` (called by ``parse``) writes each as that
``Seq``, so everything after the parser sees the absence form, which ``cer check`` and ``cer
explain`` print.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cer_cli.query import ast
from cer_cli.query.errors import QueryError
from cer_cli.query.scope import (
    bound,
    children,
    conj,
    conjuncts,
    defines,
    labels,
    pred_vars,
    rename_var,
    subformulas,
    with_children,
)


@dataclass(frozen=True)
class FollowedBy(ast.Seq):
    """``left ;> right`` as parsed, before ``expand``."""


def expand(query: ast.Query) -> ast.Query:
    """``query`` with every ``φ ;> ψ`` written as ``φ ; !ψ' ; ψ`` (the module docstring)."""
    if not any(isinstance(n, FollowedBy) for n in subformulas(query.formula)):
        return query
    taken = _names(query)
    return replace(query, formula=_walk(query.formula, (), frozenset(), taken))


def _names(query: ast.Query) -> set[str]:
    """Every variable name the query uses (a fresh one must differ from them all)."""
    out = set(defines(query.formula)) | set(labels(query.formula))
    for n in subformulas(query.formula):
        if isinstance(n, ast.Filter):
            out |= pred_vars(n.predicate)
        if isinstance(n, ast.Seq) and n.absent is not None:
            out |= set(defines(n.absent)) | set(labels(n.absent))
        if isinstance(n, ast.As):
            out.add(n.var)
    out |= {i.var for i in query.select or ()}
    return out


def _walk(f: ast.Formula, around: tuple[ast.Predicate, ...], before: frozenset[str],
          taken: set[str]) -> ast.Formula:
    """Expand below ``f``: ``around`` are the predicates of the filters around it,
    ``before`` the variables bound before it in its sequences (outside it)."""
    if isinstance(f, ast.FNot):
        return f
    if isinstance(f, ast.Filter):
        return replace(f, formula=_walk(f.formula, (*around, f.predicate), before, taken))
    if isinstance(f, ast.Seq):
        left = _walk(f.left, around, before, taken)
        right = _walk(f.right, around, before | defines(f.left), taken)
        if not isinstance(f, FollowedBy):
            return replace(f, left=left, right=right)
        return ast.Seq(left, right, False, f.span,
                       absent=_next(f, around, before, taken))
    kids = children(f)
    return with_children(f, tuple(_walk(k, around, before, taken) for k in kids)) if kids else f


def _next(f: FollowedBy, around: tuple[ast.Predicate, ...], before: frozenset[str],
          taken: set[str]) -> ast.Formula:
    """ψ' of ``f = φ ;> ψ``: ψ's event type under a fresh variable, with the conditions on
    ψ's event decided by φ's variables."""
    own, mine, atom = set(), [], f.right
    while isinstance(atom, (ast.As, ast.Filter)):
        if isinstance(atom, ast.As):
            own.add(atom.var)
        else:
            mine.append(atom.predicate)
        atom = atom.formula
    if not isinstance(atom, ast.EventType):
        raise QueryError("';>' (next match) takes one event after it, maybe named with AS and"
                         " filtered in parentheses", f.right.span,
                         hints=["write A ;> B, A ;> B AS b or A ;> (B AS b FILTER b.v > 1);"
                                " for several events, chain them: A ;> B ;> C"])
    names = own | {atom.name, atom.label}
    earlier = defines(f.left)
    repeated = set().union(*(defines(n.body) for n in subformulas(f.left)
                             if isinstance(n, ast.Plus)))
    binders: dict[str, int] = {}  # how many events of φ's pattern each name binds
    for n in subformulas(f.left):
        for v in ({n.var} if isinstance(n, ast.As) else {n.name, n.label}
                  if isinstance(n, ast.EventType) else ()):
            binders[v] = binders.get(v, 0) + 1
    once = {v for v in bound(f.left, with_labels=True) - repeated if binders.get(v) == 1}
    copied = []
    for predicate in (*mine, *around):
        for c in conjuncts(predicate):
            reads = pred_vars(c)
            if not reads & names:
                continue
            others = reads - names
            if others <= earlier:
                several = sorted(v for v in others if v not in once)
                if several:
                    raise QueryError(
                        f"';>' chooses the first {atom.label} after its left side by this"
                        f" condition, which reads '{several[0]}': that must be one event of"
                        " every match of the left side", c.span or f.span,
                        hints=[f"name one event with AS outside '+' and OR, e.g. A AS a ;>"
                               f" {atom.label} AS x FILTER x.v > a.v"])
                copied.append(c)
                continue
            outside = sorted(others & before - earlier)
            if outside:
                raise QueryError(
                    f"';>' chooses the first {atom.label} after its left side that satisfies the"
                    f" conditions on it, but this one also reads '{outside[0]}', which is bound"
                    " before the left side of that ';>' and outside it", c.span or f.span,
                    hints=[f"group the sequence so that the left side of ';>' binds"
                           f" '{outside[0]}', e.g. X AS x ; A ;> B rather than X AS x ; (A ;> B)"])
    fresh = _fresh(sorted(own)[0] if own else atom.name, taken)
    psi: ast.Formula = ast.As(ast.EventType(atom.name, atom.stream, atom.span), fresh, f.right.span)
    if copied:
        renamed = []
        for c in dict.fromkeys(copied):
            for v in sorted(names):
                c = rename_var(c, v, fresh)
            renamed.append(c)
        psi = ast.Filter(psi, conj(renamed), f.right.span)
    return psi


def _fresh(base: str, taken: set[str]) -> str:
    """``base0``, ``base1``, … : the first name the query does not use (then taken)."""
    base = base.split(">")[-1]
    k = 0
    while f"{base}{k}" in taken:
        k += 1
    taken.add(f"{base}{k}")
    return f"{base}{k}"
