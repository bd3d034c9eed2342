"""Equalities between events as join keys of a parallelized CEA (PCEA; Pinto & Riveros,
"Complex event recognition meets hierarchical conjunctive queries", Sections 3 and 5).

A PCEA's runs are trees: a transition ``(P, U, B, L, q)`` reads an event satisfying the
unary predicate ``U``, adopts one finished run per source state ``p ∈ P`` whose last event
``t'`` is related to the new event ``t`` by ``B(p)``, and labels the new node with ``L``.
When every ``B(p)`` is an equality of attribute tuples, the runs waiting in ``p`` can be
hashed by their key, so an event costs a few hash probes however many partial matches
there are (``cer_cli.engine.pcea`` runs the paper's Algorithm 1 on what is built here).

The supported fragment (``plan_pcea``; anything else keeps the other methods):

* the rewritten (relaxed) formula is an OR of branches, each a ``;`` sequence of single
  events ``E`` / ``S>E`` with AS variables and unary filters, or of iterated single events
  ``(E AS y)+`` — distributing ``;`` over OR, at most ``MAX_BRANCHES`` branches;
* every predicate between events is an equality ``x.a = y.b`` of two attributes, or a
  comparison ``e(x) rel e'(y)`` of two consecutive steps (``compiler.comparisons``: the
  runs are found through an ordered index instead of a hash bucket, at most one
  comparison per edge of the run tree);
* strategy ALL or ANY, no CONSUME BY (SELECT, FROM, WITHIN, LIMIT and an explicit
  PARTITION BY are fine).

Per branch, union-find over (step, attribute) turns the equalities into *classes*; a class
holds iff every pair of its members is equal, and a member whose event lacks the attribute
fails it. A run tree can only compare a node with its direct children, so in a sequence (a
chain) a class whose steps are not contiguous is *carried*: in
``H AS x ; T AS y ; H AS z FILTER x.id = z.id`` the runs of y keep x.id (``State.carried``),
a T event adopts the x runs of every live id separately (one node per value, indexed by it)
and z probes y's runs by its own id. That is the PCEA paper's point (Proposition 3.4: a chain
automaton cannot check ``R.y = S.y`` across T; a parallelized one indexes the inner run by
the outer key). The work per T event is the number of live values, at most the x events in
the window, never the number of partial matches; so a step may carry values from one
earlier event only (``_carried``): ``x.a = w.a AND y.b = w.b`` over ``x ; y ; z ; w``
would split z's runs by pairs (x.a, y.b), as many as the partial matches — the
non-hierarchical case (Theorem 4.2) — and is refused; the post-filter runs it.

An iterated step ``(T AS y)+`` is a state with a loop transition: each iteration adopts the
run of the previous one, probing a second index keyed by all the step's classes, so an
equality through ``+`` (``(T AS y FILTER y.id = x.id)+`` with x fixed) is a key that every
iteration meets, and a carried key passes through the iterations unchanged.

Branches that are exactly all the orders of one set of steps — ``(T;S);R OR (S;T);R`` —
form one *family*: the set of their orders is a partial order whose cover relation is a
tree, and the family compiles to one tree-shaped PCEA (R adopts a T run and an S run).
That is how the paper's P0 (Example 3.3) arises; distributed into chains, ``S;T;R`` would
need ``s.b = r.b`` across T. A family needs its incomparable steps to be of different
event types (no event can take both), else its branches stay separate chains.

The PCEA must be unambiguous for Algorithm 1 to enumerate each match once. Within a family
runs map one-to-one to valuations; across families, or when SELECT drops every variable
of a step, two runs may report the same match, and the engine then de-duplicates the
matches of each event with a hash set (``PCEA.dedupe`` says why; it costs the
output-linear delay its guarantee, not correctness).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from itertools import product

from cer_cli.compiler.comparisons import Comparison, comparison, ordered_cost, oriented, register
from cer_cli.query import ast
from cer_cli.query.printer import to_text
from cer_cli.query.scope import attr_refs, pred_vars, prev_refs, type_labels

#: Distributing ``;`` over OR may multiply branches; beyond this the query falls back.
MAX_BRANCHES = 64
#: States are tested column-wise into one integer bit mask per event.
MAX_STATES = 60
#: Steps of one family whose orders are enumerated to check it is a tree (n! orders).
MAX_FAMILY_STEPS = 8


# --------------------------------------------------------------------------- the automaton


@dataclass(frozen=True)
class Step:
    """One single-event step of a branch: an event of type ``name`` (from ``stream``),
    bound to every variable of ``labels``, satisfying every unary ``filters`` predicate."""

    name: str
    stream: str | None
    labels: frozenset[str]
    filters: frozenset[ast.Predicate] = frozenset()
    #: ``(E AS y)+``: one or more events, each adopting the run of the previous one (a loop
    #: transition keyed by the step's classes, so every iteration has the class values)
    loop: bool = False

    @property
    def var(self) -> str:
        """The variable that names this step in messages: an AS variable, else its type."""
        own = sorted(self.labels - {self.name, self.label})
        return own[0] if own else self.label

    @property
    def label(self) -> str:
        return self.name if self.stream is None else f"{self.stream}>{self.name}"

    def text(self) -> str:
        own = sorted(self.labels - {self.name, self.label})
        out = self.label + "".join(f" AS {v}" for v in own)
        if self.filters:
            out += " [" + " AND ".join(sorted(to_text(p) for p in self.filters)) + "]"
        return f"({out})+" if self.loop else out

    def exclusive(self, other: Step) -> bool:
        """No event can take both steps (different types, or different streams)."""
        return self.name != other.name or (
            self.stream is not None and other.stream is not None and self.stream != other.stream
        )


@dataclass(frozen=True)
class State:
    """A PCEA state: runs whose last event took ``step``.

    ``classes`` maps each equality class with a member at this step to the step's
    attributes in it: the event must have all of them, equal to each other (the first one
    is the class's value here)."""

    step: Step
    family: int
    classes: tuple[tuple[int, tuple[str, ...]], ...] = ()
    #: Classes this state's runs *carry* without an attribute of their own (the class spans
    #: the step in a chain), with the attribute of the earlier event the value comes from.
    #: A run keeps its class value: the runs of one event are split by it.
    carried: tuple[tuple[int, str], ...] = ()

    def attrs(self, cls: int) -> tuple[str, ...]:
        return dict(self.classes)[cls]

    def ref(self, cls: int) -> str:
        """``var.attr`` that gives this state's runs their value of class ``cls``."""
        own = dict(self.classes)
        return f"{self.step.var}.{own[cls][0]}" if cls in own else dict(self.carried)[cls]


@dataclass(frozen=True)
class Transition:
    """``(P, U, B, L, q)`` into ``target``: reads an event taking the target's step (U),
    adopts one run from each of ``sources`` (P; empty: the transition starts a run), whose
    key on the classes ``keys[j]`` equals the new event's (B: composite-key equality; an
    empty key always holds), and labels the node with ``labels`` (L).

    ``carried[j]``: the classes the target carries (``State.carried``), taken from the run
    adopted from ``sources[j]``: the event has no value to probe them with, so it adopts
    the runs of every live value separately (one node per value). ``compares[j]``, when
    set, adds the comparison ``key(t') rel probe(t)`` with the run of ``sources[j]`` (B is
    then the conjunction; the engine orders those runs by key)."""

    target: int
    sources: tuple[int, ...]
    keys: tuple[tuple[int, ...], ...]
    labels: frozenset[str]
    carried: tuple[tuple[int, ...], ...] = ()
    compares: tuple[Comparison | None, ...] = ()

    def compare(self, j: int) -> Comparison | None:
        return self.compares[j] if self.compares else None


@dataclass(frozen=True)
class PCEA:
    """An unambiguous-by-construction PCEA with equality predicates.

    ``transitions[q]`` is the only transition into state ``q``; ``parent[p]`` is the state
    whose transition adopts runs of ``p`` (None for the final states, the roots).
    ``select`` is the SELECT projection (None: every variable). ``dedupe`` says why the
    matches of an event must be de-duplicated (None: they never repeat)."""

    states: tuple[State, ...]
    transitions: tuple[Transition, ...]
    parent: tuple[int | None, ...]
    finals: frozenset[int]
    families: tuple[tuple[int, ...], ...]
    predicates: tuple[str, ...]
    select: frozenset[str] | None = None
    dedupe: str | None = None
    tree_families: frozenset[int] = field(default=frozenset())
    #: ``(state, comparison)``: the loop of that iterated state adopts only the previous
    #: iterations related to the new event by the comparison (a register, ``PREV(y).a``)
    registers: tuple[tuple[int, Comparison], ...] = ()

    def register(self, q: int) -> Comparison | None:
        return dict(self.registers).get(q)

    @property
    def size(self) -> int:
        """|P| = |Q| + Σ over transitions of (|P_e| + |L_e|), as in the paper."""
        return len(self.states) + sum(
            (len(t.sources) + len(self.states[t.target].step.labels))
            * (2 if self.states[t.target].step.loop else 1)
            for t in self.transitions
        )

    @property
    def attributes(self) -> tuple[str, ...]:
        """Attributes the PCEA reads (|t| in the cost: filters and join keys)."""
        out: set[str] = set()
        for s in self.states:
            for _, attrs in s.classes:
                out.update(attrs)
            for p in s.step.filters:
                out.update(r.attr for r in attr_refs(p))
        cmps = [c for t in self.transitions for c in t.compares if c is not None]
        for c in cmps + [c for _, c in self.registers]:
            out.update(r.attr for r in attr_refs(ast.Compare("=", c.key, c.probe)))
        return tuple(sorted(out))

    @property
    def ordered(self) -> bool:
        """Some transition finds its runs through an ordered index (a comparison or a
        register)."""
        return bool(self.registers) or any(c is not None for t in self.transitions
                                           for c in t.compares)

    @property
    def carries(self) -> bool:
        """Some state carries a key from an earlier event (see ``State.carried``)."""
        return any(s.carried for s in self.states)

    def edge_text(self, child: int, parent: int) -> str:
        t = self.transitions[parent]
        j = t.sources.index(child)
        c, p = self.states[child], self.states[parent]
        out = [f"{c.ref(k)} = {p.step.var}.{p.attrs(k)[0]}" for k in t.keys[j]]
        out += [f"carry {c.ref(k)}" for k in (t.carried[j] if t.carried else ())]
        if t.compare(j) is not None:
            out.append(t.compare(j).text)
        return ", ".join(out) or "true"

    def describe(self) -> list[str]:
        """One line per family: the chain with each edge's key, or the tree's transitions."""
        lines = []
        for f, members in enumerate(self.families):
            if f not in self.tree_families:
                parts = [self.states[members[0]].step.text()]
                for a, b in zip(members, members[1:], strict=False):
                    parts.append(f"─[{self.edge_text(a, b)}]→ {self.states[b].step.text()}")
                lines.append("chain " + " ".join(parts))
                continue
            inner = []
            for q in members:
                t = self.transitions[q]
                if t.sources:
                    adopts = "; ".join(
                        f"{self.states[p].step.text()} on [{self.edge_text(p, q)}]"
                        for p in t.sources
                    )
                    inner.append(f"{self.states[q].step.text()} adopts {adopts}")
            lines.append("tree (any order of the adopted runs) " + " · ".join(inner))
        return lines


# --------------------------------------------------------------------------- branches


class _Unsupported(Exception):
    """The query is outside the fragment; the message says why (shown by explain)."""


def branches(f: ast.Formula) -> list[tuple[Step, ...]]:
    """The formula as an OR of ``;`` sequences of single-event steps (``;`` distributed
    over OR). Raises ``_Unsupported`` for anything else."""
    if isinstance(f, ast.EventType):
        return [(Step(f.name, f.stream, type_labels(f)),)]
    if isinstance(f, ast.As):
        return [
            tuple(Step(s.name, s.stream, s.labels | {f.var}, s.filters, s.loop) for s in b)
            for b in branches(f.formula)
        ]
    if isinstance(f, ast.Filter):
        inner = branches(f.formula)
        vs = pred_vars(f.predicate)
        if len(vs) > 1:
            raise _Unsupported(f"the filter '{to_text(f.predicate)}' reads several variables")
        if vs:
            (v,) = vs
            if not any(v in s.labels for b in inner for s in b):
                raise _Unsupported(f"a filter on '{v}' sits outside the pattern that binds it")
        return [
            tuple(
                Step(s.name, s.stream, s.labels, s.filters | {f.predicate}, s.loop)
                if not vs or vs <= s.labels else s
                for s in b
            )
            for b in inner
        ]
    if isinstance(f, ast.Seq):
        if f.contiguous:
            raise _Unsupported("':' (next event) is not supported by the hash join")
        left, right = branches(f.left), branches(f.right)
        if len(left) * len(right) > MAX_BRANCHES:
            raise _Unsupported(f"the pattern has more than {MAX_BRANCHES} sequences once ';' is"
                               " distributed over OR")
        return [a + b for a, b in product(left, right)]
    if isinstance(f, ast.FOr):
        out = branches(f.left) + branches(f.right)
        if len(out) > MAX_BRANCHES:
            raise _Unsupported(f"the pattern has more than {MAX_BRANCHES} OR branches")
        return out
    if isinstance(f, ast.Plus):
        if f.contiguous:
            raise _Unsupported("':+' (contiguous iteration) is not supported by the hash join")
        inner = branches(f.body)
        if len(inner) != 1 or len(inner[0]) != 1 or inner[0][0].loop:
            raise _Unsupported("'+' over more than one single event is not supported by the"
                               " hash join")
        (s,), = inner
        return [(Step(s.name, s.stream, s.labels, s.filters, True),)]
    if isinstance(f, ast.FNot):
        raise _Unsupported("NOT(…) is not supported by the hash join")
    raise _Unsupported(f"unsupported pattern {to_text(f)}")


# --------------------------------------------------------------------------- equalities


def equality(p: ast.Predicate) -> tuple[str, str, str, str] | None:
    """``x.a = y.b`` between two variables -> ``(x, a, y, b)``, else None."""
    if (
        isinstance(p, ast.Compare)
        and p.op == "="
        and isinstance(p.left, ast.AttrRef)
        and isinstance(p.right, ast.AttrRef)
        and p.left.var != p.right.var
    ):
        return p.left.var, p.left.attr, p.right.var, p.right.attr
    return None


def _classes(steps, atoms) -> list[list[tuple[int, str]]]:
    """Union-find over (step index, attribute): each atom ``x.a = y.b`` joins every step
    binding x (its a) with every step binding y (its b). Applies an atom only when the
    steps bind its variables and its guards (an empty variable passes every atom)."""
    parent: dict[tuple[int, str], tuple[int, str]] = {}

    def find(u):
        parent.setdefault(u, u)
        while parent[u] != u:
            parent[u] = parent[parent[u]]
            u = parent[u]
        return u

    labels = set().union(*(s.labels for s in steps))
    for (x, a, y, b), guards in atoms:
        if x not in labels or y not in labels or not set(guards) <= labels:
            continue
        xs = [i for i, s in enumerate(steps) if x in s.labels]
        ys = [i for i, s in enumerate(steps) if y in s.labels]
        for i in xs:
            for j in ys:
                parent[find((i, a))] = find((j, b))
    groups: dict[tuple[int, str], list[tuple[int, str]]] = {}
    for u in list(parent):
        groups.setdefault(find(u), []).append(u)
    return sorted(sorted(g) for g in groups.values())


def _tree(chains: list[tuple[Step, ...]]) -> tuple[list[Step], list[int | None]] | None:
    """The steps and parent links of the tree whose linear extensions are exactly
    ``chains`` (all orders of the same steps), or None when no tree has exactly them."""
    steps = list(chains[0])
    n = len(steps)
    if len(set(steps)) != n or n > MAX_FAMILY_STEPS or any(s.loop for s in steps):
        return None
    index = [{s: i for i, s in enumerate(c)} for c in chains]
    before = [[all(ix[steps[u]] < ix[steps[v]] for ix in index) for v in range(n)] for u in range(n)]
    parent: list[int | None] = []
    for u in range(n):
        later = [v for v in range(n) if before[u][v]]
        covers = [v for v in later if not any(before[w][v] for w in later)]
        if len(covers) > 1:
            return None
        parent.append(covers[0] if covers else None)
    if sum(p is None for p in parent) != 1:
        return None
    for u in range(n):
        for v in range(u + 1, n):
            if not before[u][v] and not before[v][u] and not steps[u].exclusive(steps[v]):
                return None
    sizes = [1] * n  # subtree sizes: a rooted tree has n! / prod(sizes) linear extensions
    for u in sorted(range(n), key=lambda u: -_depth(u, parent)):
        if parent[u] is not None:
            sizes[parent[u]] += sizes[u]
    extensions = math.factorial(n) // math.prod(sizes)
    if extensions != len(set(chains)):
        return None
    return steps, parent


def _depth(u: int, parent: list[int | None]) -> int:
    d = 0
    while parent[u] is not None:
        u = parent[u]
        d += 1
    return d


def _connected(members: set[int], parent: list[int | None]) -> bool:
    return sum(1 for u in members if parent[u] not in members) == 1


def _carried(steps, classes) -> list[dict[int, tuple[int, str]]] | str:
    """Per step of a chain, the classes it carries: those whose members lie before and
    after it but not at it, each with the member (step, attribute) its value comes from
    (the nearest one before). A run tree compares an event only with the one before it,
    so the value travels in the runs of the steps between: the runs of such a step are
    indexed by the carried value as if the event had it.

    Refused (the message says why) when a step carries values from two different earlier
    events (``x.a = w.a AND y.b = w.b`` over ``x ; y ; z ; w`` at z): its runs would then be
    split by pairs of values, as many as the partial matches — the non-hierarchical case."""
    out: list[dict[int, tuple[int, str]]] = [{} for _ in steps]
    for k, members in enumerate(classes):
        at = {i: a for i, a in reversed(members)}
        lo, hi = min(at), max(at)
        origin = (lo, at[lo])
        for i in range(lo + 1, hi):
            if i in at:
                origin = (i, at[i])
            else:
                out[i][k] = origin
    for i, carried in enumerate(out):
        origins = {o for o, _ in carried.values()}
        if len(origins) > 1:
            a, b = sorted(origins)[:2]
            return (f"'{steps[i].text()}' ({steps[i].var}) lies inside equalities of"
                    f" {steps[a].var} and of {steps[b].var} and has no attribute in either:"
                    " its runs would be split by pairs of values, as many as the partial"
                    " matches (the equality classes are not hierarchical along the chain)")
    return out


# --------------------------------------------------------------------------- planning


@dataclass
class _Family:
    steps: list[Step]
    parent: list[int | None]
    classes: list[list[tuple[int, str]]]
    orders: list[tuple[Step, ...]]
    tree: bool
    #: per step, the classes its runs carry (``_carried``); empty for tree families
    carried: list[dict[int, tuple[int, str]]] = field(default_factory=list)
    compares: dict[int, Comparison] = field(default_factory=dict)  # child step -> its edge's


def _compares(steps, parent, cmps) -> dict[int, Comparison] | str:
    """The comparison on each tree edge (keyed by the child step), or why one cannot be
    tested along the run trees. Like ``_classes``, a comparison whose variables or guards
    the steps do not bind passes (an unbound variable has no events)."""
    labels = set().union(*(s.labels for s in steps))
    out: dict[int, Comparison] = {}
    for p, guards in cmps:
        x, _, _, y, _ = comparison(p)
        if x not in labels or y not in labels or not set(guards) <= labels:
            continue
        text = to_text(p)
        xs = [i for i, s in enumerate(steps) if x in s.labels]
        ys = [i for i, s in enumerate(steps) if y in s.labels]
        if len(xs) != 1 or len(ys) != 1:
            return f"'{text}' compares a variable bound by several steps"
        (i,), (j,) = xs, ys
        if steps[i].loop or steps[j].loop:
            # a key is the same in every iteration, a compared value is not: a later
            # iteration would never be compared with the other side
            loop = steps[i] if steps[i].loop else steps[j]
            return (f"'{text}' compares {loop.var}, which every iteration of a '+' binds: an"
                    " ordered index compares one value per run, not every iteration's")
        if parent[i] == j:
            child, low = i, x
        elif parent[j] == i:
            child, low = j, y
        else:
            return (f"'{text}' compares {x} and {y}, which are not consecutive steps: a run tree"
                    " only compares an event with the runs it adopts")
        if child in out:
            return (f"'{out[child].text}' and '{text}' compare the same two steps; one ordered"
                    " index answers one comparison")
        out[child] = oriented(p, low)
    return out


def _family(chains: list[tuple[Step, ...]], atoms, cmps=()) -> _Family | str:
    """One family of branches (all orders of one tree), or a message saying why its
    equality classes cannot be checked along its run trees."""
    if len(chains) == 1:
        steps = list(chains[0])
        shape = (steps, [i + 1 for i in range(len(steps) - 1)] + [None])
    else:
        shape = _tree(chains)
    if shape is None:
        return "not a tree"
    steps, parent = shape
    classes = _classes(steps, atoms)
    if len(chains) == 1:
        carried = _carried(steps, classes)
        if isinstance(carried, str):
            return carried
        compares = _compares(steps, parent, cmps)
        if isinstance(compares, str):
            return compares
        return _Family(steps, parent, classes, list(chains), False, carried, compares)
    for members in classes:
        if not _connected({i for i, _ in members}, parent):
            return "not connected"
    compares = _compares(steps, parent, cmps)
    if isinstance(compares, str):
        return "not connected"
    return _Family(steps, parent, classes, list(dict.fromkeys(chains)), True,
                   [{} for _ in steps], compares)


def plan_pcea(query: ast.Query, formula: ast.Formula | None, sites) -> tuple[PCEA | None, str]:
    """The PCEA of a rewritten query whose predicates between events are ``sites``
    (``correlation.Site``), or ``(None, why not)`` when the query is outside the fragment."""
    if not sites:
        return None, "no predicate between events"
    if query.strategy not in ("ALL", "ANY"):
        return None, f"the hash join implements strategies ALL and ANY, not {query.strategy}"
    if query.consume != "NONE":
        return None, "the hash join does not implement CONSUME BY"
    if formula is None:
        return None, "the pattern never matches"
    atoms, cmps, regs = [], [], []
    for s in sites:
        if prev_refs(s.predicate):
            reg = register(s.predicate)
            if reg is None:
                return None, (f"'{to_text(s.predicate)}' compares PREV({sorted(prev_refs(s.predicate))[0]})"
                              " with the new event other than as one side each")
            regs.append(reg)
            continue
        eq = equality(s.predicate)
        if eq is not None:
            atoms.append((eq, tuple(s.guards)))
        elif comparison(s.predicate) is not None:
            cmps.append((s.predicate, tuple(s.guards)))
        else:
            return None, (f"'{to_text(s.predicate)}' is not an equality between attributes of"
                          " two events, nor a comparison of two values each read from one event")
    try:
        chains = branches(formula)
    except _Unsupported as e:
        return None, str(e)
    # Group the branches that order one set of steps; try each group as one tree family.
    groups: dict[tuple, list[tuple[Step, ...]]] = {}
    for c in chains:
        groups.setdefault((frozenset(c), len(c)), []).append(c)
    families: list[_Family] = []
    for group in groups.values():
        fam = _family(group, atoms, cmps) if len(set(group)) > 1 else "single"
        if isinstance(fam, _Family):
            families.append(fam)
            continue
        for c in dict.fromkeys(group):
            one = _family([c], atoms, cmps)
            if isinstance(one, str):
                return None, one
            families.append(one)
    pcea = _build(query, families, sites)
    if pcea is None:
        return None, f"the PCEA would have more than {MAX_STATES} states"
    if regs:
        loops: dict[int, Comparison] = {}
        for reg in regs:
            at = [q for q, s in enumerate(pcea.states) if s.step.loop and reg.low in s.step.labels]
            if not at and any(reg.low in s.step.labels for s in pcea.states):
                return None, (f"'{reg.text}' reads the previous iteration of a '+' that is not"
                              " one iterated event")
            for q in at:
                if q in loops:
                    return None, (f"'{loops[q].text}' and '{reg.text}' both compare iterations"
                                  " of one '+'; one ordered index answers one comparison")
                loops[q] = reg
        pcea = replace(pcea, registers=tuple(sorted(loops.items(), key=lambda kv: kv[0])))
    return pcea, pcea_class(pcea)


def pcea_class(pcea: PCEA) -> str:
    """The part of the hash join's class the PCEA uses, for ``explain``: every equality
    class is connected along its run trees, through adjacent events, carried keys,
    iterations or any-order trees."""
    keyed = any(k for t in pcea.transitions for k in t.keys) or not pcea.ordered
    how = ["keys between adjacent events"] if keyed else []
    carriers = [f"{s.step.var} carries {', '.join(r for _, r in s.carried)}"
                for s in pcea.states if s.carried]
    if carriers:
        how.append("keys carried through the events between (" + "; ".join(carriers) + ")")
    loops = [s.step.text() for s in pcea.states if s.step.loop]
    if loops:
        how.append("iterations joined on their keys (" + ", ".join(loops) + ")")
    if pcea.tree_families:
        how.append("any order of some events before a common one (one tree)")
    compares = [f"{c.text} ({pcea.states[p].step.var} → {pcea.states[q].step.var})"
                for q, t in enumerate(pcea.transitions) for j, p in enumerate(t.sources)
                if (c := t.compare(j)) is not None]
    if compares:
        how.append("comparisons between an event and the runs it adopts, by ordered index ("
                   + "; ".join(compares) + ")")
    if pcea.registers:
        how.append("registers: an iteration adopts the previous ones in range, by ordered index ("
                   + "; ".join(f"{c.text} ({pcea.states[q].step.text()})"
                               for q, c in pcea.registers) + ")")
    return ("hierarchical: every equality class is connected along its run trees — "
            + ", ".join(how))


def _build(query: ast.Query, families: list[_Family], sites) -> PCEA | None:
    select = None if query.select is None else frozenset(i.var for i in query.select)
    states: list[State] = []
    transitions: list[Transition] = []
    parents: list[int | None] = []
    n_classes = 0  # equality classes of earlier families: class ids are global
    fam_states: list[tuple[int, ...]] = []
    trees = set()
    for f, fam in enumerate(families):
        base = len(states)
        ids = [base + i for i in range(len(fam.steps))]
        cls_base = n_classes
        n_classes += len(fam.classes)
        at_step: list[dict[int, list[str]]] = [{} for _ in fam.steps]
        for k, group in enumerate(fam.classes):
            for i, a in group:
                at_step[i].setdefault(cls_base + k, []).append(a)
        carried = [{cls_base + k: f"{fam.steps[o].var}.{a}" for k, (o, a) in c.items()}
                   for c in fam.carried]
        for i, s in enumerate(fam.steps):
            states.append(State(s, f, tuple((k, tuple(v)) for k, v in sorted(at_step[i].items())),
                                tuple(sorted(carried[i].items()))))
            parents.append(None if fam.parent[i] is None else base + fam.parent[i])
        for i in range(len(fam.steps)):
            kids = [j for j in range(len(fam.steps)) if fam.parent[j] == i]
            keys = tuple(tuple(sorted((set(at_step[j]) | set(carried[j])) & set(at_step[i])))
                         for j in kids)
            carry = tuple(tuple(sorted(carried[i])) for _ in kids)
            compares = tuple(fam.compares.get(j) for j in kids)
            transitions.append(Transition(base + i, tuple(base + j for j in kids), keys,
                                          fam.steps[i].labels, carry if carried[i] else (),
                                          compares if any(compares) else ()))
        # Families list their states leaves first, root last (chains: in order).
        order = sorted(range(len(fam.steps)), key=lambda i: -_depth(i, fam.parent))
        fam_states.append(tuple(ids[i] for i in (order if fam.tree else range(len(ids)))))
        if fam.tree:
            trees.add(f)
    if len(states) > MAX_STATES:
        return None
    return PCEA(
        tuple(states), tuple(transitions), tuple(parents),
        frozenset(q for q, p in enumerate(parents) if p is None),
        tuple(fam_states),
        tuple(to_text(s.predicate) for s in sites),
        select, _dedupe(families, select), frozenset(trees),
    )


def _dedupe(families: list[_Family], select: frozenset[str] | None) -> str | None:
    """Why two runs may report the same match, or None (then every match is reported by
    exactly one run: Algorithm 1 needs no de-duplication)."""

    def shown(s: Step) -> frozenset[str]:
        return s.labels if select is None else s.labels & select

    for fam in families:
        n = len(fam.steps)
        for i, s in enumerate(fam.steps):
            # the first and last events of a chain are the match's interval, unless iterated
            kept_anyway = not s.loop and ((not fam.tree and i in (0, n - 1))
                                          or fam.parent[i] is None)
            if not shown(s) and not kept_anyway:
                return (f"SELECT drops every variable of '{s.text()}', so runs that differ only"
                        " there report the same match")
    if len(families) > 1 and any(s.loop for fam in families for s in fam.steps):
        return ("an OR branch iterates an event with '+': two branches can report the same"
                " match with a different number of steps")
    seen: set[tuple] = set()
    for fam in families:
        for order in fam.orders:  # the orders of one family are distinct sequences too
            sig = tuple(shown(s) for s in order if shown(s))
            if sig in seen:
                return "two OR branches can report the same match (same variables in the same order)"
            seen.add(sig)
    return None


def pcea_cost(pcea: PCEA, window: ast.Window | None, short: bool = False) -> str:
    """The update cost of Theorem 5.1 with this query's numbers."""
    size, t = pcea.size, len(pcea.attributes)
    n_transitions = len(pcea.transitions) + sum(s.step.loop for s in pcea.states)  # + loops
    carry = ("; a step that carries a key ("
             + ", ".join(f"{s.step.var} carries {', '.join(r for _, r in s.carried)}"
                         for s in pcea.states if s.carried)
             + ") adopts the runs of each live value separately: k more extends and heap"
             " inserts per such event, k ≤ the events of one step in the window"
             + ("" if window is not None else
                " (no window: every value seen so far stays live)")
             if pcea.carries else "")
    if isinstance(window, ast.EventsWindow):
        w = f"w = {window.count} events"
    elif window is None:
        w = "no window: log w becomes the log of the number of partial matches per key"
    else:
        w = f"w = the events within {to_text(window)}"
    ordered = "" if not pcea.ordered else "; comparisons: " + ordered_cost(short)
    if short:
        return (f"update O(|P|·(|t| + log|P| + log w)) with |P| = {size}, |t| = {t}, {w}{carry};"
                " output-linear delay" + ("" if pcea.dedupe is None else
                                          " (matches de-duplicated per event)") + ordered)
    return (f"update O(|P|·(|t| + log|P| + log w)) per event with |P| = {size}"
            f" ({len(pcea.states)} states, {n_transitions} transitions), |t| = {t}"
            f" attribute(s) read, {w}; independent of the number of partial matches"
            " (hash probes per transition, one persistent-heap insert per new run)"
            f"{carry};"
            " output-linear delay"
            + ("" if pcea.dedupe is None else
               f", except that matches are de-duplicated per event ({pcea.dedupe})") + ordered)


def join_cost(pcea: PCEA, predicate: ast.Predicate) -> str:
    """How the hash join checks one predicate of ``pcea.predicates``: for an equality
    ``x.a = y.b``, on which edges of the run trees it is a key, and the work that costs per
    event; for a comparison, the edge whose ordered index answers it."""
    if comparison(predicate) is not None:
        return compare_cost(pcea, predicate)
    if prev_refs(predicate):
        return (f"a register: {', '.join(pcea.states[q].step.text() for q, _ in pcea.registers)}"
                " keeps its runs in an ordered index on the compared value of their last"
                " iteration, and a new iteration adopts exactly those in range; "
                + ordered_cost(short=True) + ", independent of the number of partial matches")
    eq = equality(predicate)
    members: dict[int, set[tuple[str, str]]] = {}
    for s in pcea.states:
        for c, attrs in s.classes:
            members.setdefault(c, set()).update((v, a) for v in s.step.labels for a in attrs)
    ks = set() if eq is None else {
        c for c, m in members.items() if (eq[0], eq[1]) in m and (eq[2], eq[3]) in m}
    edges, carriers = [], []
    for q, t in enumerate(pcea.transitions):
        parent = pcea.states[q]
        for j, p in enumerate(t.sources):
            edges += [f"{pcea.states[p].ref(k)} = {parent.step.var}.{parent.attrs(k)[0]}"
                      for k in t.keys[j] if k in ks]
        carriers += [f"{parent.step.var} carries {ref}" for k, ref in parent.carried if k in ks]
    out = ("a hash probe on the key " + "; ".join(dict.fromkeys(edges)) if edges
           else "a hash probe on its key")
    out += " per event: O(1) per transition, independent of the number of partial matches"
    if carriers:
        out += ("; " + ", ".join(dict.fromkeys(carriers)) + ": each such event adopts the runs"
                " of every live value separately (at most the events of one step in the window)")
    return out


def compare_cost(pcea: PCEA, predicate: ast.Predicate) -> str:
    """How the ordered index answers one comparison of ``pcea.predicates``."""
    text = to_text(predicate)
    edges = [f"{pcea.states[p].step.var} → {pcea.states[q].step.var}"
             for q, t in enumerate(pcea.transitions) for j, p in enumerate(t.sources)
             if t.compare(j) is not None and t.compare(j).text == text]
    where = ("on the edge " + ", ".join(dict.fromkeys(edges))) if edges else "on its edge"
    return (f"an ordered-index probe {where}: the runs waiting there are kept sorted by the"
            f" compared value; {ordered_cost(short=True)}, independent of the"
            " number of partial matches")
