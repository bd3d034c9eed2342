"""CEL formula -> complex event automaton (Foundations of CEP, Theorem 3; CORE §3 and
App. A, "valuation CEA"; notes A.10 and core §1.2, §3.4–3.5).

Thompson-style: every sub-formula becomes a fragment with one entry and one exit state,
glued with ε-edges; transitions carry the set of variables they mark.

* ``E`` — one transition testing the type (and stream for ``S>E``), marking ``{E}`` (and
  ``S>E``);
* ``φ AS x`` — adds ``x`` to every marking transition of φ;
* ``φ FILTER P(x)`` — conjoins ``P`` to every transition of φ that marks ``x`` (CORE's
  "for all"; after the rewrites P already sits on its atom, so this is one transition);
* ``φ ; ψ`` — φ's exit, a fresh state with an unmarked ``TRUE`` skip loop, ψ's entry;
  ``φ : ψ`` — no skip state; ``φ1 ; !ψ ; φ2`` — the skip loop guarded by ``NOT ψ``; a
  correlated gap (``Seq.gap``, ψ checked by the post-filter) — an unguarded loop, entered
  only through copies of φ1's last transitions marking ``gapK.left`` and left only through
  copies of φ2's first transitions marking ``gapK.right`` (hidden: never reported);
* ``φ+`` — exit back to entry through a fresh skip state; ``φ:+`` — directly;
* ``φ OR ψ`` — fresh entry and exit around both;
* ``NOT(a)`` — one unmarked transition guarded by the negation of the whole atom guard.

Skip states are fresh so that skipping is only possible *between* the parts of ``;``
(not, say, between the iterations of a ``:+`` that starts the right part). The initial
state has no skip loop: the engine starts a run at every event.

Then: ε-removal (a state is final when its ε-closure contains the exit), SELECT
projection (labels are intersected, an emptied label makes the transition unmarked, so
runs differing only in projected-away events merge), a fresh initial state if the old one
is re-entered, and trimming of states that are unreachable or cannot reach a final state.

The input must be rewritten first (``rewrite``): the CEA cannot see variables, so it
relies on safety and on filters reading variables their formula defines. Cost: linear
states and transitions for the construction; ε-removal is O(|Q| · |Δ|).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from cer_cli.compiler.cea import CEA, GAnd, GAtom, GNot, GOr, GTrue, Guard, Transition
from cer_cli.compiler.predicates import GFALSE, Alphabet, StreamTest, TypeTest
from cer_cli.query import ast
from cer_cli.query.errors import QueryError
from cer_cli.query.scope import pred_vars, type_labels

EPSILON = None


@dataclass(frozen=True)
class _Fragment:
    entry: int
    exit: int
    edges: tuple[int, ...]  # indices of this fragment's non-ε edges


class _Builder:
    """Mutable ε-NFA under construction: edges are ``[source, guard, labels, target]``
    (``guard`` None for ε)."""

    def __init__(self, alphabet: Alphabet) -> None:
        self.alphabet = alphabet
        self.n_states = 0
        self.edges: list[list] = []
        self.hidden: set[str] = set()  # the gap bounds' variables (mark_last, mark_first)

    def eps_closure(self, start: int, forward: bool) -> set[int]:
        """States reachable from ``start`` along ε-edges (backwards: that reach it)."""
        seen, todo = {start}, [start]
        while todo:
            s = todo.pop()
            for a, g, _, b in self.edges:
                if g is EPSILON and (a if forward else b) == s:
                    t = b if forward else a
                    if t not in seen:
                        seen.add(t)
                        todo.append(t)
        return seen

    def mark_last(self, frag: _Fragment, var: str, target: int) -> tuple[int, ...]:
        """Copies of ``frag``'s transitions that can end its match, marking ``var`` and
        leading to ``target`` (every ε-path to the exit already exists: nothing follows
        the fragment's exit while its parent is being built)."""
        self.hidden.add(var)
        ends = self.eps_closure(frag.exit, forward=False)
        return tuple(self.edge(a, g, frozenset(lab | {var}), target)
                     for a, g, lab, b in [self.edges[i] for i in frag.edges] if b in ends)

    def mark_first(self, frag: _Fragment, var: str, source: int) -> tuple[int, ...]:
        """Copies of ``frag``'s transitions that can start its match, marking ``var`` and
        leaving from ``source``."""
        self.hidden.add(var)
        starts = self.eps_closure(frag.entry, forward=True)
        return tuple(self.edge(source, g, frozenset(lab | {var}), b)
                     for a, g, lab, b in [self.edges[i] for i in frag.edges] if a in starts)

    def state(self) -> int:
        self.n_states += 1
        return self.n_states - 1

    def edge(self, source: int, guard: Guard | None, labels: frozenset[str], target: int) -> int:
        self.edges.append([source, guard, labels, target])
        return len(self.edges) - 1

    def build(self, f: ast.Formula) -> _Fragment:
        if isinstance(f, ast.EventType):
            entry, exit_ = self.state(), self.state()
            e = self.edge(entry, self.type_guard(f), type_labels(f), exit_)
            return _Fragment(entry, exit_, (e,))
        if isinstance(f, ast.FNot):
            entry, exit_ = self.state(), self.state()
            e = self.edge(entry, GNot(self.not_atom_guard(f.atom)), frozenset(), exit_)
            return _Fragment(entry, exit_, (e,))
        if isinstance(f, ast.As):
            inner = self.build(f.formula)
            for i in inner.edges:
                if self.edges[i][2] - self.hidden:  # a hidden mark alone reports nothing
                    self.edges[i][2] = self.edges[i][2] | {f.var}
            return inner
        if isinstance(f, ast.Filter):
            return self.filter(self.build(f.formula), f)
        if isinstance(f, ast.Seq):
            left, right = self.build(f.left), self.build(f.right)
            if f.contiguous:
                self.edge(left.exit, EPSILON, frozenset(), right.entry)
                return _Fragment(left.entry, right.exit, left.edges + right.edges)
            # φ1 ; !ψ ; φ2: the gap's skip loop reads only events that are not ψ, so a run
            # that would skip a ψ event dies there (constant work per event, tECS unchanged)
            gap = GTrue() if f.absent is None else GNot(self.absent_guard(f.absent))
            skip = self.state()
            loop = self.edge(skip, gap, frozenset(), skip)
            if f.gap is None:
                self.edge(left.exit, EPSILON, frozenset(), skip)
                self.edge(skip, EPSILON, frozenset(), right.entry)
                return _Fragment(left.entry, right.exit, left.edges + (loop,) + right.edges)
            # a correlated gap (relax_absence): the post-filter needs its exact bounds, so
            # φ1's last transitions and φ2's first are duplicated, the copies marking the
            # hidden variables and the only way into and out of the gap
            last = self.mark_last(left, f"{f.gap}.left", skip)
            first = self.mark_first(right, f"{f.gap}.right", skip)
            return _Fragment(left.entry, right.exit,
                             left.edges + last + (loop,) + right.edges + first)
        if isinstance(f, ast.FOr):
            left, right = self.build(f.left), self.build(f.right)
            entry, exit_ = self.state(), self.state()
            for part in (left, right):
                self.edge(entry, EPSILON, frozenset(), part.entry)
                self.edge(part.exit, EPSILON, frozenset(), exit_)
            return _Fragment(entry, exit_, left.edges + right.edges)
        if isinstance(f, ast.Plus):
            body = self.build(f.body)
            entry, exit_ = self.state(), self.state()
            self.edge(entry, EPSILON, frozenset(), body.entry)
            self.edge(body.exit, EPSILON, frozenset(), exit_)
            if f.contiguous:
                self.edge(body.exit, EPSILON, frozenset(), body.entry)
                return _Fragment(entry, exit_, body.edges)
            skip = self.state()
            self.edge(body.exit, EPSILON, frozenset(), skip)
            loop = self.edge(skip, GTrue(), frozenset(), skip)
            self.edge(skip, EPSILON, frozenset(), body.entry)
            return _Fragment(entry, exit_, body.edges + (loop,))
        raise TypeError(f"not a formula: {f!r}")

    def type_guard(self, e: ast.EventType) -> Guard:
        test: Guard = GAtom(self.alphabet.index(TypeTest(e.name)))
        if e.stream is None:
            return test
        return GAnd((test, GAtom(self.alphabet.index(StreamTest(e.stream)))))

    def not_atom_guard(self, atom: ast.Formula) -> Guard:
        """Guard of ``E FILTER f ...``: the event is an ``E`` (from ``S``) satisfying every ``f``."""
        guards = []
        while isinstance(atom, ast.Filter):
            if not pred_vars(atom.predicate) <= type_labels(_base(atom)):
                raise QueryError("inside NOT(...), a filter may only read the negated event "
                                 f"'{_base(atom).label}'", atom.predicate.span or atom.span)
            guards.append(self.alphabet.guard(atom.predicate))
            atom = atom.formula
        if not isinstance(atom, ast.EventType):
            raise QueryError("NOT(...) takes one event type, optionally filtered", atom.span)
        return GAnd((self.type_guard(atom), *guards)) if guards else self.type_guard(atom)

    def absent_guard(self, psi: ast.Formula) -> Guard:
        """Guard of the absent ψ of ``φ1 ; !ψ ; φ2``: an event type under AS and FILTERs that
        read only its own variables (``check_absence`` refuses other shapes first)."""
        guards, own = [], set()
        atom = psi
        while isinstance(atom, (ast.As, ast.Filter)):
            if isinstance(atom, ast.As):
                own.add(atom.var)
            else:
                guards.append(atom.predicate)
            atom = atom.formula
        if not isinstance(atom, ast.EventType):
            raise QueryError("'!' takes one event type, optionally named with AS and filtered",
                             psi.span)
        own |= type_labels(atom)
        out: list[Guard] = [self.type_guard(atom)]
        for p in guards:
            if not pred_vars(p) <= own:
                raise QueryError("a filter inside '!(…)' may only read the absent event's own "
                                 "variables here", p.span or psi.span)
            out.append(self.alphabet.guard(p))
        return GAnd(tuple(out)) if len(out) > 1 else out[0]

    def filter(self, inner: _Fragment, f: ast.Filter) -> _Fragment:
        xs = pred_vars(f.predicate)
        if len(xs) > 1:
            raise QueryError("a predicate between events reached the automaton construction;"
                             " rewrite the query first (equality_to_partition, relax_correlation)",
                             f.predicate.span or f.span)
        guard = self.alphabet.guard(f.predicate)
        if xs:
            (x,) = xs
            targets = [i for i in inner.edges if x in self.edges[i][2]]
            if not targets:
                raise ValueError(f"filter on '{x}', which its formula does not define: "
                                 "rewrite the formula first (cer_cli.compiler.rewrite)")
        else:  # constant: every transition carries it, so a false one kills every run
            targets = list(inner.edges)
        for i in targets:
            self.edges[i][1] = GAnd((self.edges[i][1], guard))
        return inner


def _base(atom: ast.Formula) -> ast.EventType:
    while isinstance(atom, (ast.Filter, ast.As)):
        atom = atom.formula
    if not isinstance(atom, ast.EventType):
        raise QueryError("NOT(...) takes one event type, optionally filtered", atom.span)
    return atom


def simplify_guard(g: Guard) -> Guard:
    """Flatten nested AND/OR, drop TRUE from ANDs; ``GFALSE`` when an AND meets FALSE."""
    if isinstance(g, GNot):
        inner = simplify_guard(g.operand)
        if isinstance(inner, GNot):
            return inner.operand
        if inner == GFALSE:
            return GTrue()
        return GFALSE if isinstance(inner, GTrue) else GNot(inner)
    if isinstance(g, (GAnd, GOr)):
        unit, absorbing = (GTrue(), GFALSE) if isinstance(g, GAnd) else (GFALSE, GTrue())
        parts: list[Guard] = []
        for part in map(simplify_guard, g.operands):
            if part == absorbing:
                return absorbing
            for p in (part.operands if type(part) is type(g) else (part,)):  # type: ignore[union-attr]
                if p != unit and p not in parts:
                    parts.append(p)
        if not parts:
            return unit
        return parts[0] if len(parts) == 1 else type(g)(tuple(parts))
    return g


def compile_formula(
    formula: ast.Formula | None,
    alphabet: Alphabet,
    projection: frozenset[str] | None = None,
) -> CEA:
    """The CEA of a rewritten formula (``None``, i.e. unsatisfiable: a CEA with no final
    state). ``alphabet`` must come from ``Alphabet.from_formula(formula)``; ``projection`` is
    the set of SELECTed variables (``None`` keeps all, ``frozenset()`` is SELECT NONE).

    Raises QueryError for predicates between events: the rewrite passes remove them first.
    """
    if formula is None:
        return CEA(1, 0, frozenset(), ())
    b = _Builder(alphabet)
    top = b.build(formula)
    n = b.n_states

    eps: list[list[int]] = [[] for _ in range(n)]
    out: list[list[tuple[Guard, frozenset[str], int]]] = [[] for _ in range(n)]
    for source, guard, labels, target in b.edges:
        if guard is EPSILON:
            eps[source].append(target)
            continue
        guard = simplify_guard(guard)
        if guard == GFALSE:
            continue
        if projection is not None:
            labels = labels & projection
        out[source].append((guard, frozenset(labels), target))

    transitions: set[tuple[int, Guard, frozenset[str], int]] = set()
    finals: set[int] = set()
    for p in range(n):
        for q in _reach((p,), eps):
            if q == top.exit:
                finals.add(p)
            transitions.update((p, g, labels, r) for g, labels, r in out[q])

    initial = top.entry
    if any(t[3] == initial for t in transitions):  # keep q0 free of incoming transitions
        fresh = n
        n += 1
        transitions.update((fresh, g, labels, r) for s, g, labels, r in list(transitions)
                           if s == initial)
        initial = fresh
    return _trim(n, initial, finals, transitions)


def _trim(n: int, initial: int, finals: set[int], transitions) -> CEA:
    """Keep states reachable from ``initial`` that reach a final state; renumber in BFS
    order from ``initial`` (so the initial state is 0) for stable output."""
    succ: list[set[int]] = [set() for _ in range(n)]
    pred: list[set[int]] = [set() for _ in range(n)]
    for s, _, _, t in transitions:
        succ[s].add(t)
        pred[t].add(s)
    useful = _reach(finals, pred)
    if initial not in useful:
        return CEA(1, 0, frozenset(), ())
    order = [initial]
    seen = {initial}
    queue = deque(order)
    while queue:
        s = queue.popleft()
        for t in sorted(succ[s]):
            if t in useful and t not in seen:
                seen.add(t)
                order.append(t)
                queue.append(t)
    number = {s: i for i, s in enumerate(order)}
    kept = sorted(
        (Transition(number[s], g, labels, number[t])
         for s, g, labels, t in transitions if s in number and t in number),
        key=lambda tr: (tr.source, tr.target, sorted(tr.labels), repr(tr.guard)),
    )
    return CEA(len(order), 0, frozenset(number[f] for f in finals if f in number), tuple(kept))


def _reach(starts, edges) -> set[int]:
    """States reachable from ``starts`` along ``edges`` (adjacency lists or sets)."""
    seen, todo = set(starts), list(starts)
    while todo:
        for t in edges[todo.pop()]:
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return seen


def describe(cea: CEA, alphabet: Alphabet) -> dict:
    """A JSON-serialisable view of a CEA for ``cer explain``: states, readable guards, marks."""
    return {
        "states": cea.n_states,
        "initial": cea.initial,
        "finals": sorted(cea.finals),
        "transitions": [
            {
                "from": t.source,
                "to": t.target,
                "guard": alphabet.describe_guard(t.guard),
                "marks": sorted(t.labels),
            }
            for t in cea.transitions
        ],
    }


__all__ = ["compile_formula", "describe", "simplify_guard"]
