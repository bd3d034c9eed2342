"""Memory verdict: what evaluating a query must remember as the log grows.

The analysis follows the bounded-memory criteria for select-project-join (SPJ) queries over
streams with application time (Schiff & Özçep): Theorem 1 (duplicate-preserving projection;
its conditions C1–C5) and Theorem 2 (duplicate-eliminating projection; C1–C3, sufficient only).
A CER query is translated into that vocabulary:

* each event a match binds (an atom of the pattern) is a **stream**; its position is the
  stream's timestamp, and ``;`` orders streams. Atoms glued by ``:`` read adjacent events and
  are merged into one stream (as the paper merges streams with equal timestamps);
* ``OR`` in the pattern, and ``OR`` / ``!=`` / ``<=`` between events in filters, split the
  query into a union of conjunctive **members** (the paper's preprocessing); a union needs no
  more memory than its members (for ``--count``, overlapping members are also analysed
  together, for inclusion–exclusion);
* filter atoms between two events are **joins** (``=``, ``<``, or any other predicate), the
  others constrain one stream; constants and ranges make attributes **bounded** through the
  closure P+ (Definition 5) — a range only for integer attributes (from the log's schema; an
  attribute of unknown type is taken as unbounded);
* the output mode fixes the projection list L: ``cer match`` outputs positions (unbounded),
  ``--count`` outputs nothing (Theorem 1 with an empty L), a distinct projection outputs the
  attributes ``SELECT x[a]`` names (Theorem 2).

Every verdict is an upper bound: "constant" comes from the theorems' sufficient direction (the
paper's synopses: counters over bounded attributes); when a condition fails we report what the
paper's evaluation needs instead — counters per distinct value of the attributes C4/C5 name
("distinct join keys"), or the history (the log length) when C1–C3 fail. Repetitions (``+``) and
``NOT(…)`` are outside SPJ queries: when no predicate between events reads them, they only
multiply counters (a counter per automaton state), otherwise the verdict is the log length.

``WITHIN`` bounds whatever the criteria leave unbounded; ``PARTITION BY`` multiplies it by
the number of keys. ``engine`` says how much more this engine keeps, when it does (it counts
by enumerating its tECS, so it does not reach Theorem 1's counters).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cer_cli.compiler.correlation import AbsenceSite, is_correlation, sites
from cer_cli.plan.correlation import Method
from cer_cli.query import ast
from cer_cli.query.printer import to_text
from cer_cli.query.scope import attr_refs, conjuncts, pred_vars, prev_refs, subformulas

CONSTANT = "constant"
WINDOW = "bounded by the window"
JOIN_KEYS = "grows with the number of distinct join keys"
PARTITION_KEYS = "grows with the number of distinct partition keys"
LOG = "grows with the log length"
RANK = {CONSTANT: 0, WINDOW: 1, JOIN_KEYS: 2, PARTITION_KEYS: 2, LOG: 3}
MODES = ("match", "count", "distinct")

#: Past this many alternatives (OR branches times split comparisons) the analysis gives up.
MAX_MEMBERS = 64
#: Overlapping alternatives analysed together for inclusion–exclusion, at most.
MAX_OVERLAP = 5
_INTEGER_TYPES = ("int",)


def text(p: ast.Node) -> str:
    """A predicate or formula as written in queries, without the printer's outer parentheses."""
    s = to_text(p)
    while s.startswith("(") and s.endswith(")") and _balanced(s[1:-1]):
        s = s[1:-1]
    return s


def _balanced(s: str) -> bool:
    depth = 0
    for ch in s:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Condition:
    """One condition of Theorem 1 or 2 (or a precondition of the translation) and whether it
    holds, with the atom or clause it is about."""

    name: str
    holds: bool
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"condition": self.name, "holds": self.holds, "detail": self.detail}


@dataclass(frozen=True)
class MemoryVerdict:
    """What memory grows with in one output mode, and why (``reason`` names the predicate
    or clause responsible, in query syntax). ``engine``/``engine_reason``: this engine's own
    growth, only when it keeps more than the verdict requires."""

    mode: str
    verdict: str
    reason: str
    conditions: tuple[Condition, ...] = ()
    engine: str | None = None
    engine_reason: str | None = None

    @property
    def effective(self) -> str:
        """What a run of this engine actually grows with."""
        return self.engine or self.verdict

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.verdict, "reason": self.reason, "mode": self.mode,
                               "conditions": [c.as_dict() for c in self.conditions]}
        if self.engine is not None:
            out["engine"] = {"verdict": self.engine, "reason": self.engine_reason}
        return out


# --------------------------------------------------------------------------- elements, closure


@dataclass(frozen=True)
class Attr:
    """Attribute ``attr`` of the events of stream ``sid`` (``text``: as in the query)."""

    sid: int
    attr: str
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Const:
    value: Any


@dataclass(frozen=True)
class Pos:
    """The position of a stream's event: a timestamp, unbounded, output by ``cer match``."""

    stream: str

    @property
    def text(self) -> str:
        return f"the position of {self.stream}"


Elem = Attr | Const


class Closure:
    """P+ of a member's selection over attributes and constants: equality classes, the strict
    order between them, and what follows — Definition 5 (bounded), Definition 8 (redundant
    inequality), Definition 9 (MaxRef, MinRef). ``types`` gives attribute types (None:
    unknown), since a range bounds only integers."""

    def __init__(self, relations: Iterable[tuple[Elem, str, Elem]], finite: Iterable[Elem] = (),
                 types: Mapping[Attr, str | None] | None = None):
        self.relations = tuple(relations)
        self.types = dict(types or {})
        self._parent: dict[Elem, Elem] = {}
        finite = list(finite)
        for a, op, b in self.relations:
            self.find(a)
            self.find(b)
            if op == "=":
                self._parent[self.find(a)] = self.find(b)
        self.finite = {self.find(e) for e in finite}
        consts = sorted({e for e in self._parent if isinstance(e, Const)}, key=_const_key)
        self.less_edges = {(self.find(a), self.find(b)) for a, op, b in self.relations if op == "<"}
        for a, b in itertools.pairwise(consts):  # constants are ordered among themselves
            if _const_key(a)[0] == _const_key(b)[0] and a.value != b.value:
                self.less_edges.add((self.find(a), self.find(b)))
        self.classes: dict[Elem, list[Elem]] = {}
        for e in self._parent:
            self.classes.setdefault(self.find(e), []).append(e)
        self.reach = {c: self._search(c) for c in self.classes}

    def find(self, e: Elem) -> Elem:
        self._parent.setdefault(e, e)
        while self._parent[e] != e:
            self._parent[e] = self._parent[self._parent[e]]
            e = self._parent[e]
        return e

    def _search(self, c: Elem) -> set[Elem]:
        seen, todo = set(), [b for a, b in self.less_edges if a == c]
        while todo:
            x = todo.pop()
            if x not in seen:
                seen.add(x)
                todo += [b for a, b in self.less_edges if a == x]
        return seen

    def _consts(self, c: Elem) -> list[Const]:
        return [e for e in self.classes.get(c, ()) if isinstance(e, Const)]

    @property
    def unsatisfiable(self) -> bool:
        """Two constants equal, or a strict cycle: no event combination passes."""
        return any(len({x.value for x in self._consts(c)}) > 1 or c in self.reach[c]
                   for c in self.classes)

    def same(self, a: Elem, b: Elem) -> bool:
        return self.find(a) == self.find(b)

    def less(self, a: Elem, b: Elem) -> bool:
        return self.find(b) in self.reach.get(self.find(a), ())

    def _lower(self, c: Elem) -> bool:
        return any(c in self.reach[k] for k in self.classes if self._consts(k))

    def _upper(self, c: Elem) -> bool:
        return any(self._consts(k) for k in self.reach.get(c, ()))

    def bounded(self, e: Attr) -> bool:
        """Definition 5: equal to a constant (or to a value of a finite set), or bounded
        below and above by constants — the latter only bounds integers."""
        c = self.find(e)
        members = self.classes.get(c, [e])
        if self._consts(c) or c in self.finite:
            return True
        if any(self.types.get(m) == "bool" for m in members if isinstance(m, Attr)):
            return True
        integer = any(self.types.get(m) in _INTEGER_TYPES for m in members if isinstance(m, Attr))
        return integer and self._lower(c) and self._upper(c)

    def why_unbounded(self, e: Attr) -> str:
        c = self.find(e)
        lower, upper = self._lower(c), self._upper(c)
        if not (lower and upper):
            missing = " or ".join(w for w, ok in (("lower", lower), ("upper", upper)) if not ok)
            return f"{e.text} has no {missing} bound"
        typ = self.types.get(e)
        if typ is None:
            return (f"{e.text} lies in a range, but its type is unknown (no log given): a range"
                    " bounds only integers")
        return f"{e.text} is a {typ}: a range does not bound its values"

    def redundant(self, a: Elem, b: Elem) -> bool:
        """Definition 8, for ``a < b``: implied through another element, or one side equals a
        constant (then the inequality is a filter on the other side)."""
        ca, cb = self.find(a), self.find(b)
        if self._consts(ca) or self._consts(cb):
            return True
        return any(k not in (ca, cb) and k in self.reach[ca] and cb in self.reach[k]
                   for k in self.classes)

    def refs(self, stream_of: Mapping[int, str]) -> tuple[dict[str, set[Attr]], dict[str, set[Attr]]]:
        """Definition 9: ``(MaxRef, MinRef)`` per stream — unbounded attributes on the larger
        (smaller) side of a non-redundant inequality in P+ with another stream's attribute.
        Non-redundant implied inequalities are the covering pairs of the class order."""
        max_ref: dict[str, set[Attr]] = {}
        min_ref: dict[str, set[Attr]] = {}
        for ca in self.classes:
            for cb in self.reach[ca]:
                if self._consts(ca) or self._consts(cb) or any(
                        k not in (ca, cb) and k in self.reach[ca] and cb in self.reach[k]
                        for k in self.classes):
                    continue
                lows = [e for e in self.classes[ca] if isinstance(e, Attr)]
                highs = [e for e in self.classes[cb] if isinstance(e, Attr)]
                for lo in lows:
                    for hi in highs:
                        if stream_of[lo.sid] == stream_of[hi.sid]:
                            continue
                        if not self.bounded(hi):
                            max_ref.setdefault(stream_of[hi.sid], set()).add(hi)
                        if not self.bounded(lo):
                            min_ref.setdefault(stream_of[lo.sid], set()).add(lo)
        return max_ref, min_ref

    def eq_classes(self, elems: Iterable[Elem]) -> int:
        """``|E|_eq`` of Theorem 2: how many equality classes ``elems`` fall into."""
        return len({self.find(e) for e in elems})


def _const_key(c: Const) -> tuple[int, Any]:
    return (1, c.value) if isinstance(c.value, str) else (0, c.value)


# --------------------------------------------------------------------------- dependency tree


def dependency_tree(streams: Iterable[str], before: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    """The dependency graph as its Hasse diagram (transitive reduction): for each stream, its
    immediate *later* streams (its parents; the paper's edges go from later to earlier)."""
    streams = list(streams)
    later = {s: set() for s in streams}
    for a, b in before:
        later[a].add(b)
    changed = True
    while changed:  # transitive closure (queries are small)
        changed = False
        for s in streams:
            extra = set().union(*(later[t] for t in later[s])) - later[s]
            if extra:
                later[s] |= extra
                changed = True
    return {s: {p for p in later[s] if not any(p in later[m] for m in later[s])} for s in streams}


def in_tree(parents: Mapping[str, set[str]]) -> tuple[bool, str]:
    """Condition C1: every component is an in-tree (one latest stream, at most one parent
    each). Returns ``(holds, detail)``."""
    for s, ps in parents.items():
        if len(ps) > 1:
            return False, (f"{s} has {len(ps)} later variables ({', '.join(sorted(ps))}) that are"
                           " not ordered with each other: the dependency graph is not a tree")
    return True, "the dependency graph is an in-tree: " + _describe_tree(parents)


def _describe_tree(parents: Mapping[str, set[str]]) -> str:
    roots = [s for s, ps in parents.items() if not ps]
    chains = []
    for r in roots:
        below = [s for s in parents if _root(parents, s) == r]
        below.sort(key=lambda s: -_depth(parents, s))
        chains.append(" < ".join(below) + f" (root {r})")
    return "; ".join(chains)


def _root(parents: Mapping[str, set[str]], s: str) -> str:
    while parents[s]:
        s = next(iter(parents[s]))
    return s


def _depth(parents: Mapping[str, set[str]], s: str) -> int:
    d = 0
    while parents[s]:
        s = next(iter(parents[s]))
        d += 1
    return d


# --------------------------------------------------------------------------- one SPJ member


@dataclass(frozen=True)
class Join:
    """A predicate between events: ``op`` is ``"<"`` (``elems`` = smaller, larger), ``"="``,
    or ``"?"`` for any other predicate (``elems``: every attribute it reads)."""

    op: str
    elems: tuple[Attr, ...]
    text: str


@dataclass(frozen=True)
class SPJ:
    """One conjunctive member in the paper's vocabulary: streams, their order, the closure of
    the selection, the joins as stated, and the projection list L."""

    streams: tuple[str, ...]
    before: frozenset[tuple[str, str]]
    stream_of: Mapping[int, str]
    closure: Closure
    joins: tuple[Join, ...] = ()
    projection: tuple[Attr | Pos, ...] = ()

    def of(self, e: Attr | Pos) -> str:
        return e.stream if isinstance(e, Pos) else self.stream_of[e.sid]

    def bounded(self, e: Attr | Pos) -> bool:
        return isinstance(e, Attr) and self.closure.bounded(e)

    def why(self, e: Attr | Pos) -> str:
        return f"{e.text} is unbounded" if isinstance(e, Pos) else self.closure.why_unbounded(e)

    def stated(self) -> list[Join]:
        """Joins between different streams, without the ones other atoms imply (an equality
        already derived, an inequality redundant by Definition 8)."""
        out = []
        for j in self.joins:
            if len({self.of(e) for e in j.elems}) < 2:
                continue
            if j.op == "=" and Closure([r for r in self.closure.relations
                                        if r != (j.elems[0], "=", j.elems[1])]).same(*j.elems):
                continue
            if j.op == "<" and self.closure.redundant(*j.elems):
                continue
            out.append(j)
        return out


def theorem1(spj: SPJ) -> list[Condition]:
    """Conditions C1–C5 of Theorem 1 (duplicate-preserving: counting, or enumeration with
    positions in L). With one stream the query is a filter: nothing to remember."""
    if len(spj.streams) <= 1:
        return [Condition("Theorem 1", True, "one stream: every predicate is a filter on one event")]
    parents = dependency_tree(spj.streams, spj.before)
    c1, why = in_tree(parents)
    out = [Condition("C1", c1, why)]
    if not c1:
        return out
    depth = {s: _depth(parents, s) for s in spj.streams}
    tree = {s: _root(parents, s) for s in spj.streams}
    trees = len(set(tree.values()))
    parent = {s: next(iter(ps), None) for s, ps in parents.items()}
    joins = spj.stated()
    bad = None
    for j in joins:
        ss = sorted({spj.of(e) for e in j.elems}, key=spj.streams.index)
        if len(ss) > 2:
            bad = f"'{j.text}' relates {len(ss)} events; the criteria cover joins of two"
            break
        a, b = ss
        if tree[a] == tree[b]:
            if not (parent[a] == parent[b] or parent[a] == b or parent[b] == a):
                bad = (f"'{j.text}' joins {a} (depth {depth[a]}) with {b} (depth {depth[b]}),"
                       " which are neither parent and child nor siblings")
                break
        elif depth[a] or depth[b]:
            bad = f"'{j.text}' joins two trees below their roots"
            break
    out.append(Condition("C2", bad is None, bad or (
        "every predicate between events joins a variable with its parent or a sibling"
        if joins else "no predicate between events")))
    bad = None
    for e in spj.projection:
        s = spj.of(e)
        if isinstance(e, Pos) and depth[s] >= 1:
            bad = (f"the position of {s} is output, and {s} is "
                   + ("not the last variable" if depth[s] == 1 and trees == 1
                      else f"{depth[s]} steps before the last variable"))
        elif depth[s] > 1:
            bad = f"{e.text} is output and {s} is {depth[s]} steps before the last variable"
        elif (trees > 1 or depth[s] == 1) and not spj.bounded(e):
            bad = f"{e.text} is output and {s} is not the last variable: {spj.why(e)}"
        if bad:
            break
    out.append(Condition("C3", bad is None, bad or (
        "every output attribute is at the last variable (the root) or bounded" if spj.projection
        else "nothing is output per match (a count)")))
    bad = None
    for j in joins:
        if j.op == "<":
            continue
        ss = {spj.of(e) for e in j.elems}
        roots = {s for s in ss if depth[s] == 0} if trees == 1 else set()
        for e in j.elems:
            s = spj.of(e)
            if s in roots:
                continue
            if not spj.bounded(e):
                bad = f"'{j.text}': {spj.why(e)}, and {s} is not the last variable"
            elif roots and depth[s] != 1:
                bad = f"'{j.text}': {s} is {depth[s]} steps before the last variable"
            if bad:
                break
        if bad:
            break
    out.append(Condition("C4", bad is None, bad or (
        "the equalities between events bind bounded attributes (or the last variable)"
        if any(j.op != "<" for j in joins) else "no equality between events")))
    max_ref, min_ref = spj.closure.refs(spj.stream_of)
    bad = None
    for s in spj.streams:
        refs = sorted(max_ref.get(s, set()) | min_ref.get(s, set()), key=lambda e: e.text)
        if refs and not (trees == 1 and depth[s] == 0):
            j = next((j for j in joins if j.op == "<" and set(j.elems) & set(refs)), None)
            where = f"'{j.text}'" if j else "an inequality between events"
            kind = "MaxRef" if refs[0] in max_ref.get(s, set()) else "MinRef"
            bad = (f"{where}: {refs[0].text} is in {kind}({s}) (in a non-redundant inequality;"
                   f" {spj.closure.why_unbounded(refs[0])}) and {s} is not the last variable")
            break
    held = [f"{e.text} in {k}({s})" for k, refs in (("MaxRef", max_ref), ("MinRef", min_ref))
            for s, es in refs.items() for e in sorted(es, key=lambda e: e.text)]
    out.append(Condition("C5", bad is None, bad or (
        ("only the last variable has MaxRef/MinRef attributes: " + ", ".join(held)) if held
        else "MaxRef and MinRef are empty")))
    return out


def theorem2(spj: SPJ) -> list[Condition]:
    """Conditions C1–C3 of Theorem 2 (duplicate-eliminating projection; sufficient only)."""
    bad = next((f"{e.text} is output: {spj.why(e)}" for e in spj.projection if not spj.bounded(e)),
               None)
    out = [Condition("T2 C1", bad is None, bad or "every output attribute is bounded")]
    joins = spj.stated()
    bad = None
    for j in joins:
        if j.op != "<":
            e = next((e for e in j.elems if not spj.bounded(e)), None)
            if e is not None:
                bad = f"'{j.text}': {spj.why(e)}"
                break
    out.append(Condition("T2 C2", bad is None, bad or "the equalities between events bind bounded"
                         " attributes" if any(j.op != "<" for j in joins) else
                         "no equality between events"))
    max_ref, min_ref = spj.closure.refs(spj.stream_of)
    bad = None
    for s in spj.streams:
        n = spj.closure.eq_classes(max_ref.get(s, ())) + spj.closure.eq_classes(min_ref.get(s, ()))
        if n > 1:
            bad = f"{s} has {n} MaxRef/MinRef classes; one max or min per stream suffices only once"
            break
    out.append(Condition("T2 C3", bad is None, bad or "at most one MaxRef/MinRef class per stream"
                         " (a max or a min of it is kept)"))
    return out


# --------------------------------------------------------------------------- query -> members


@dataclass(frozen=True)
class _Stream:
    sid: int
    type: str | None
    labels: frozenset[str]
    iteration: str | None = None  # the innermost '+' around it, as text
    negated: bool = False
    first_as: str | None = None  # the innermost AS variable (its display name)

    def name(self) -> str:
        if self.negated:
            return f"NOT({self.type})"
        return self.first_as or self.type or "?"


@dataclass(frozen=True)
class _Partial:
    streams: tuple[_Stream, ...] = ()
    seps: tuple[str, ...] = ()  # before each stream: "" (first), ";" or ":"
    conjuncts: tuple[tuple[ast.Predicate, frozenset[int]], ...] = ()
    defined: frozenset[str] = frozenset()  # AS variables defined outside '+' (safety)


class _TooMany(Exception):
    pass


def _expand(f: ast.Formula, counter: list[int], in_plus: str | None = None) -> list[_Partial]:
    """The conjunctive members of ``f`` (OR in the pattern and between events split)."""
    if isinstance(f, ast.EventType):
        counter[0] += 1
        s = _Stream(counter[0], f.name, frozenset({f.name, f.label}), in_plus)
        return [_Partial((s,), ("",))]
    if isinstance(f, ast.FNot):
        counter[0] += 1
        atom = f.atom
        while isinstance(atom, (ast.Filter, ast.As)):
            atom = atom.formula
        name = atom.name if isinstance(atom, ast.EventType) else None
        return [_Partial((_Stream(counter[0], name, frozenset(), in_plus, True),), ("",))]
    if isinstance(f, ast.As):
        out = []
        for p in _expand(f.formula, counter, in_plus):
            ss = tuple(replace(s, labels=s.labels | {f.var}, first_as=s.first_as or f.var)
                       for s in p.streams)
            out.append(replace(p, streams=ss, defined=p.defined | ({f.var} if in_plus is None else set())))
        return out
    if isinstance(f, ast.Seq):
        out = []
        for a, b in itertools.product(_expand(f.left, counter, in_plus), _expand(f.right, counter, in_plus)):
            if a.defined & b.defined:
                continue  # defines a variable twice: never matches (docs/language.md, safety)
            seps = (*a.seps, ":" if f.contiguous else ";", *b.seps[1:])
            out.append(_Partial(a.streams + b.streams, seps, a.conjuncts + b.conjuncts,
                                a.defined | b.defined))
        return _capped(out)
    if isinstance(f, ast.FOr):
        return _capped(_expand(f.left, counter, in_plus) + _expand(f.right, counter, in_plus))
    if isinstance(f, ast.Plus):
        inner = _expand(f.body, counter, text(f))
        return [replace(p, defined=frozenset()) for p in inner]
    assert isinstance(f, ast.Filter)
    out = []
    for p in _expand(f.formula, counter, in_plus):
        local = frozenset(s.sid for s in p.streams)
        alternatives: list[tuple[tuple[ast.Predicate, frozenset[int]], ...]] = [()]
        for c in conjuncts(f.predicate):
            options = _dnf(c) if is_correlation(c) else [[c]]
            alternatives = _capped([a + tuple((x, local) for x in opt)
                                    for a in alternatives for opt in options])
        out += [replace(p, conjuncts=p.conjuncts + a) for a in alternatives]
    return _capped(out)


def _dnf(p: ast.Predicate) -> list[list[ast.Predicate]]:
    if isinstance(p, ast.Or):
        return _capped(_dnf(p.left) + _dnf(p.right))
    if isinstance(p, ast.And):
        return _capped([a + b for a in _dnf(p.left) for b in _dnf(p.right)])
    return [[p]]


def _capped(xs: list) -> list:
    if len(xs) > MAX_MEMBERS:
        raise _TooMany
    return xs


_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "!=": "!="}


@dataclass(frozen=True)
class _Member:
    """A conjunctive member, resolved: its streams in order, and its atoms over them."""

    streams: tuple[_Stream, ...]
    seps: tuple[str, ...]
    relations: tuple[tuple[Elem, str, Elem], ...]
    finite: tuple[Attr, ...]
    joins: tuple[Join, ...]
    wide: tuple[str, ...]  # predicates over three or more events (outside the criteria)

    def text(self) -> str:
        return " ".join(f"{sep} {s.name()}" if sep else s.name()
                        for s, sep in zip(self.streams, self.seps, strict=True))


def _members(formula: ast.Formula) -> list[_Member]:
    out = []
    for p in _expand(formula, [0]):
        out += _resolve(p)
        _capped(out)
    return out


def _resolve(p: _Partial) -> list[_Member]:
    """Resolve each atom's variables to streams (rule 1: the filtered pattern's own events;
    rule 2: the events binding an outer variable), and split ``!=``, ``<=``, ``>=`` between
    events into their strict cases (the paper's preprocessing into a union)."""
    relations: list[tuple[Elem, str, Elem]] = []
    finite: list[Attr] = []
    wide: list[str] = []
    choices: list[list[tuple[Join, tuple[Elem, str, Elem] | None]]] = []

    def streams_of(v: str, local: frozenset[int]) -> list[_Stream]:
        mine = [s for s in p.streams if s.sid in local and v in s.labels]
        return mine or [s for s in p.streams if v in s.labels]

    def attr(s: _Stream, name: str, var: str) -> Attr:
        return Attr(s.sid, name, f"{var}.{name}" if var in s.labels else f"{s.name()}.{name}")

    for pred, local in p.conjuncts:
        if prev_refs(pred):
            wide.append(text(pred))  # y.v > PREV(y).v relates iterations: outside the criteria
            continue
        vs = sorted(pred_vars(pred))
        resolved = {v: streams_of(v, local) for v in vs}
        if not vs or any(not ss for ss in resolved.values()):
            continue  # a constant, or a variable with no event here: it bounds nothing
        if len(vs) == 1:
            for s in resolved[vs[0]]:
                r, fin = _unary_facts(pred, lambda ref, s=s: attr(s, ref.attr, ref.var))
                relations += r
                finite += list(fin)
            continue
        if len(vs) > 2:
            wide.append(text(pred))
            continue
        simple = (isinstance(pred, ast.Compare) and isinstance(pred.left, ast.AttrRef)
                  and isinstance(pred.right, ast.AttrRef))
        for sa, sb in itertools.product(resolved[vs[0]], resolved[vs[1]]):
            env = {vs[0]: sa, vs[1]: sb}
            if simple:
                a = attr(env[pred.left.var], pred.left.attr, pred.left.var)
                b = attr(env[pred.right.var], pred.right.attr, pred.right.var)
                if sa.sid == sb.sid:  # one event bound to both variables: a filter
                    if pred.op in ("=", "<", ">"):
                        relations.append(_rel(a, pred.op, b))
                    continue
                choices.append(_cases(pred.op, a, b, text(pred)))
            else:
                refs = sorted({(r.var, r.attr) for r in attr_refs(pred)})
                elems = tuple(attr(env[v], n, v) for v, n in refs)
                choices.append([(Join("?", elems, text(pred)), None)])
    out = []
    for combo in itertools.product(*[c for c in choices if c]):
        rel = list(relations) + [r for _, r in combo if r is not None]
        joins = tuple(j for j, _ in combo if j.text)
        out.append(_Member(p.streams, p.seps, tuple(rel), tuple(finite), joins, tuple(wide)))
        _capped(out)
    return out or [_Member(p.streams, p.seps, tuple(relations), tuple(finite), (), tuple(wide))]


def _rel(a: Elem, op: str, b: Elem) -> tuple[Elem, str, Elem]:
    return (b, "<", a) if op == ">" else (a, op, b)


def _cases(op: str, a: Attr, b: Attr, shown: str) -> list[tuple[Join, tuple[Elem, str, Elem]]]:
    """``a op b`` between events as the union of its strict cases."""
    def less(x, y, note=""):
        return (Join("<", (x, y), shown + note), (x, "<", y))

    def equal(note=""):
        return (Join("=", (a, b), shown + note), (a, "=", b))

    if op == "=":
        return [equal()]
    if op == "<":
        return [less(a, b)]
    if op == ">":
        return [less(b, a)]
    if op == "<=":
        return [less(a, b), equal(" (its '=' case)")]
    if op == ">=":
        return [less(b, a), equal(" (its '=' case)")]
    return [less(a, b, " (its '<' case)"), less(b, a, " (its '>' case)")]  # !=


def _unary_facts(p: ast.Predicate, attr) -> tuple[list[tuple[Elem, str, Elem]], dict[Attr, set]]:
    """What a filter on one event says about bounds: relations to constants (and between the
    event's own attributes), and attributes restricted to a finite set of values. An OR keeps
    what both sides guarantee; NOT, LIKE and arithmetic say nothing (conservatively)."""
    if isinstance(p, ast.And):
        r1, f1 = _unary_facts(p.left, attr)
        r2, f2 = _unary_facts(p.right, attr)
        return r1 + r2, {a: f1.get(a, set()) | f2.get(a, set()) if a in f1 and a in f2
                         else f1.get(a) or f2.get(a) for a in f1.keys() | f2.keys()}
    if isinstance(p, ast.Or):
        return _either(_unary_facts(p.left, attr), _unary_facts(p.right, attr))
    if isinstance(p, ast.Compare):
        left, right, op = p.left, p.right, p.op
        if isinstance(left, ast.Literal) and isinstance(right, ast.AttrRef):
            left, right, op = right, left, _FLIP[op]
        if isinstance(left, ast.AttrRef) and isinstance(right, ast.Literal):
            a, k = attr(left), Const(right.value)
            if op == "=":
                return [(a, "=", k)], {}
            if op in ("<", "<="):
                return [(a, "<", k)], {}
            if op in (">", ">="):
                return [(k, "<", a)], {}
        if isinstance(left, ast.AttrRef) and isinstance(right, ast.AttrRef) and op in ("=", "<", ">"):
            return [_rel(attr(left), op, attr(right))], {}
        return [], {}
    if isinstance(p, ast.InSet) and not p.negated and isinstance(p.operand, ast.AttrRef):
        if len(p.values) == 1:
            return [(attr(p.operand), "=", Const(p.values[0].value))], {}
        return [], {attr(p.operand): {v.value for v in p.values}}
    if isinstance(p, ast.InInterval) and not p.negated and isinstance(p.operand, ast.AttrRef):
        a = attr(p.operand)
        out = []
        if p.low is not None:
            out.append((Const(p.low.value), "<", a))
        if p.high is not None:
            out.append((a, "<", Const(p.high.value)))
        return out, {}
    if isinstance(p, ast.InRange) and isinstance(p.operand, ast.AttrRef):
        a, out = attr(p.operand), []
        if isinstance(p.low, ast.Literal):
            out.append((Const(p.low.value), "<", a))
        if isinstance(p.high, ast.Literal):
            out.append((a, "<", Const(p.high.value)))
        return out, {}
    return [], {}


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _either(x, y):
    """Facts both sides of an OR guarantee, per attribute: a finite set when both restrict
    it to one, else the loosest lower (upper) bound when both bound it from below (above)."""
    def summary(facts):
        rel, fin = facts
        lo: dict[Attr, list] = {}
        hi: dict[Attr, list] = {}
        eq: dict[Attr, set] = {a: set(vs) for a, vs in fin.items()}
        for a, op, b in rel:
            if op == "<" and isinstance(a, Const) and isinstance(b, Attr) and _num(a.value):
                lo.setdefault(b, []).append(a.value)
            elif op == "<" and isinstance(a, Attr) and isinstance(b, Const) and _num(b.value):
                hi.setdefault(a, []).append(b.value)
            elif op == "=" and isinstance(a, Attr) and isinstance(b, Const):
                eq.setdefault(a, set()).add(b.value)
        return lo, hi, eq

    def low(s, a):  # the bound a side guarantees, or None
        lo, _, eq = s
        if a in eq and all(_num(v) for v in eq[a]):
            return min(eq[a])
        return max(lo[a]) if a in lo else None

    def high(s, a):
        _, hi, eq = s
        if a in eq and all(_num(v) for v in eq[a]):
            return max(eq[a])
        return min(hi[a]) if a in hi else None

    s1, s2 = summary(x), summary(y)
    finite = {a: s1[2][a] | s2[2][a] for a in s1[2].keys() & s2[2].keys()}
    rel: list[tuple[Elem, str, Elem]] = []
    attrs = set().union(*s1, *s2) - finite.keys()
    for a in sorted(attrs, key=lambda a: a.text):
        l1, l2, h1, h2 = low(s1, a), low(s2, a), high(s1, a), high(s2, a)
        if l1 is not None and l2 is not None:
            rel.append((Const(min(l1, l2)), "<", a))
        if h1 is not None and h2 is not None:
            rel.append((a, "<", Const(max(h1, h2))))
    return rel, finite


# --------------------------------------------------------------------------- member verdicts


@dataclass(frozen=True)
class _Outcome:
    tier: str
    reason: str
    conditions: tuple[Condition, ...] = ()


_FAIL_TIER = {"C1": LOG, "C2": LOG, "C3": LOG, "C4": JOIN_KEYS, "C5": JOIN_KEYS,
              "T2 C1": LOG, "T2 C2": JOIN_KEYS, "T2 C3": JOIN_KEYS}
_CONSEQUENCE = {
    "C1": "counting needs the history of the unordered events",
    "C2": "the counters between the joined events would need the history of the events in"
          " between",
    "C3": "every earlier event that may still be output is kept",
    "C4": "a counter per distinct value of the join attributes",
    "C5": "the values of that attribute are kept (a counter per distinct value)",
    "T2 C1": "every distinct output value is remembered so as not to repeat it (not guaranteed"
             " bounded)",
    "T2 C2": "not guaranteed bounded: the equality's values are kept",
    "T2 C3": "not guaranteed bounded: several extremes per stream",
}


def tier(conds: Iterable[Condition]) -> str:
    """The verdict the conditions give: the history (log length) when the tree, the join
    placement or the projection fails (Theorem 1 C1–C3, Theorem 2 C1), counters per
    distinct value when only the boundedness of joined attributes fails, else constant."""
    failing = [c.name for c in conds if not c.holds]
    if not failing:
        return CONSTANT
    return max((_FAIL_TIER.get(n, LOG) for n in failing), key=RANK.get)


def _types(streams: Iterable[_Stream], relations, joins, extra, schema) -> dict[Attr, str | None]:
    by = {s.sid: s for s in streams}
    attrs = {e for r in relations for e in (r[0], r[2]) if isinstance(e, Attr)}
    attrs |= {e for j in joins for e in j.elems} | set(extra)
    out: dict[Attr, str | None] = {}
    for a in attrs:
        s = by.get(a.sid)
        out[a] = None if schema is None or s is None or s.type is None else \
            schema.attributes(s.type).get(a.attr)
    return out


def _analyse(m: _Member, mode: str, select: frozenset[str] | None,
             attrs: Mapping[str, tuple[str, ...]], schema) -> _Outcome:
    """The verdict for one conjunctive member, without window or partitions."""
    if m.wide and "PREV(" in m.wide[0]:
        return _Outcome(LOG, f"'{m.wide[0]}' compares consecutive iterations of a '+' (a"
                        " register), which the criteria do not cover: assumed to need the history",
                        (Condition("no iteration", False, f"'{m.wide[0]}' compares iterations"),))
    if m.wide:
        return _Outcome(LOG, f"'{m.wide[0]}' relates three or more events, which the criteria do"
                        " not cover: assumed to need the history",
                        (Condition("joins of two", False, f"'{m.wide[0]}' reads three or more events"),))
    joined = {e.sid for j in m.joins for e in j.elems}
    last = len(m.streams) - 1

    def ident(s: _Stream) -> frozenset[str]:  # what identifies a stream's event in the output
        return s.labels if select is None or mode == "distinct" else s.labels & select

    pre: list[Condition] = []
    keep: list[tuple[_Stream, str]] = []
    gap = False  # a stream was left out since the last one kept
    iterations = [s for s in m.streams if s.iteration]
    if mode == "match" and iterations:
        pre.append(Condition("no iteration", False, f"the iteration '{iterations[0].iteration}'"
                             " reports any number of events per match"))
    for i, s in enumerate(m.streams):
        edge = i in (0, last)
        hidden = s.negated or not ident(s)
        if mode != "match" and s.sid in joined and (s.iteration or (hidden and not edge)):
            j = next(j for j in m.joins if s.sid in {e.sid for e in j.elems})
            pre.append(Condition("no iteration", False, f"'{j.text}' compares events inside the"
                                 f" iteration '{s.iteration}', which the criteria do not cover")
                       if s.iteration else
                       Condition("projection", False, f"SELECT drops {s.name()}, which"
                                 f" '{j.text}' reads: the count is of distinct projected matches"))
        # a repetition or an unreported event that no join reads only multiplies counters
        if s.sid not in joined and ((mode != "match" and s.iteration) or (hidden and not edge)):
            gap = True
            continue
        keep.append((s, "" if not keep else ";" if gap or m.seps[i] != ":" else ":"))
        gap = False
    # ':'-adjacent streams become one stream (the next event is determined)
    groups: list[list[_Stream]] = []
    for s, sp in keep:
        if sp == ":" and groups:
            groups[-1].append(s)
        else:
            groups.append([s])
    names = [" : ".join(s.name() for s in g) for g in groups]
    for n in set(names):
        if names.count(n) > 1:
            k = 0
            for i, x in enumerate(names):
                if x == n:
                    k += 1
                    names[i] = f"{n}#{k}"
    stream_of = {s.sid: s.name() for s in m.streams}
    for g, n in zip(groups, names, strict=True):
        for s in g:
            stream_of[s.sid] = n
    projection: list[Attr | Pos] = []
    if mode == "match":
        projection = [Pos(n) for i, (g, n) in enumerate(zip(groups, names, strict=True))
                      if i in (0, len(groups) - 1) or any(ident(s) for s in g)]
    elif mode == "distinct":
        for g in groups:
            for s in g:
                for v, names_ in attrs.items():
                    if v in s.labels:
                        projection += [Attr(s.sid, a, f"{v}.{a}") for a in names_]
        for s in m.streams:
            if s.iteration and any(v in s.labels for v in attrs):
                pre.append(Condition("no iteration", False, f"the output reads events of the"
                                     f" iteration '{s.iteration}'"))
    attributes = [e for e in projection if isinstance(e, Attr)]
    closure = Closure(m.relations, m.finite,
                      _types(m.streams, m.relations, m.joins, attributes, schema))
    if closure.unsatisfiable:
        return _Outcome(CONSTANT, "its filters contradict each other: it never matches")
    spj = SPJ(tuple(names), frozenset(itertools.pairwise(names)), stream_of, closure, m.joins,
              tuple(projection))
    conds = pre + (theorem2(spj) if mode == "distinct" else theorem1(spj))
    bad = next((c for c in conds if not c.holds), None)
    if bad is not None and bad.name in ("no iteration", "projection", "joins of two"):
        return _Outcome(LOG, f"{bad.detail}; assumed to need the history", tuple(conds))
    failing = [c for c in conds if not c.holds]
    if failing:
        worst = max(failing, key=lambda c: RANK[_FAIL_TIER[c.name]])
        theorem = "Theorem 2" if worst.name.startswith("T2") else "Theorem 1"
        name = worst.name.removeprefix("T2 ")
        if mode == "match" and worst.name == "C3":
            clause = "SELECT *" if select is None else "SELECT " + (", ".join(sorted(select))
                                                                   or "NONE")
            return _Outcome(LOG, f"{clause} outputs positions: {worst.detail} (Theorem 1 C3),"
                            " so every earlier event that may still be reported is kept",
                            tuple(conds))
        return _Outcome(_FAIL_TIER[worst.name], f"{worst.detail} ({theorem} {name}):"
                        f" {_CONSEQUENCE[worst.name]}", tuple(conds))
    if len(names) <= 1:
        kept = {s.sid for s, _ in keep}
        left = [s.name() for s in m.streams if s.sid not in kept]
        if left:
            return _Outcome(CONSTANT, f"one stream ('{names[0] if names else '-'}') once"
                            f" {', '.join(left)} are left out (no predicate between events reads"
                            " them: a counter per automaton state counts them)", tuple(conds))
        return _Outcome(CONSTANT, f"one stream ('{names[0]}'): no ';' and no '+', so a match is"
                        " one event or adjacent events and only the last few are kept", tuple(conds))
    if mode == "distinct":
        return _Outcome(CONSTANT, "Theorem 2 holds (C1–C3): the distinct bounded output tuples"
                        " and one extreme per stream are kept", tuple(conds))
    return _Outcome(CONSTANT, "Theorem 1 holds (C1–C5): " + _synopses(spj), tuple(conds))


def _synopses(spj: SPJ) -> str:
    """The paper's synopses: per non-root stream, a counter per value of its bounded
    attributes that joins read; the root's events are output at once, never stored."""
    parents = dependency_tree(spj.streams, spj.before)
    parts = []
    for s in spj.streams:
        if not parents[s]:
            parts.append(f"{s} (last) is never stored")
            continue
        used = sorted({e.text for j in spj.joins for e in j.elems if spj.of(e) == s}
                      | {e.text for e in spj.projection if spj.of(e) == s})
        parts.append(f"{s}: a counter" + (f" per value of {', '.join(used)}" if used else ""))
    return "; ".join(parts)


def _signature(m: _Member, select: frozenset[str] | None) -> tuple:
    return tuple(s.labels if select is None else s.labels & select
                 for s in m.streams if not s.negated)


def _merge(ms: list[_Member], select: frozenset[str] | None) -> _Member | None:
    """The conjunction of members that may report the same matches (inclusion–exclusion):
    their labelled streams aligned in order, every atom of each."""
    base = ms[0]
    labelled = [s for s in base.streams if not s.negated]
    relations, finite, joins, wide = list(base.relations), list(base.finite), list(base.joins), []
    seps = list(base.seps)
    for other in ms[1:]:
        theirs = [s for s in other.streams if not s.negated]
        sid = {b.sid: a.sid for a, b in zip(labelled, theirs, strict=True)}
        if any(s.iteration for s in other.streams) or any(s.iteration for s in labelled):
            return None

        def mv(e, sid=sid):
            return replace(e, sid=sid.get(e.sid, e.sid)) if isinstance(e, Attr) else e

        relations += [(mv(a), op, mv(b)) for a, op, b in other.relations]
        finite += [mv(e) for e in other.finite]
        joins += [replace(j, elems=tuple(mv(e) for e in j.elems)) for j in other.joins]
        wide += list(other.wide)
        if len(other.streams) == len(base.streams):
            seps = [":" if ":" in (a, b) else a for a, b in zip(seps, other.seps, strict=True)]
    return _Member(base.streams, tuple(seps), tuple(relations), tuple(finite), tuple(joins),
                   tuple(base.wide) + tuple(wide))


def _criteria(formula: ast.Formula, mode: str, select, attrs, schema) -> _Outcome:
    """The worst verdict over the union's members (and, for a count, over the conjunctions
    of members that may report the same match)."""
    try:
        members = _members(formula)
    except _TooMany:
        return _Outcome(LOG, f"the query has more than {MAX_MEMBERS} alternatives (OR branches and"
                        " split comparisons): not analysed, assumed to need the history")
    if not members:
        return _Outcome(CONSTANT, "the query never matches (it defines a variable twice)")
    outcomes = [(m, _analyse(m, mode, select, attrs, schema)) for m in members]
    if mode != "match":
        groups: dict[tuple, list[_Member]] = {}
        for m in members:
            groups.setdefault(_signature(m, select), []).append(m)
        for ms in groups.values():
            if len(ms) > MAX_OVERLAP:
                outcomes.append((ms[0], _Outcome(LOG, f"{len(ms)} alternatives may report the same"
                                                 " matches: not analysed, assumed to need the history")))
                continue
            for k in range(2, len(ms) + 1):
                for sub in itertools.combinations(ms, k):
                    merged = _merge(list(sub), select)
                    if merged is not None:
                        outcomes.append((merged, _analyse(merged, mode, select, attrs, schema)))
    m, worst = max(outcomes, key=lambda mo: RANK[mo[1].tier])
    if len(members) > 1 and worst.tier != CONSTANT:
        worst = replace(worst, reason=f"in the alternative '{m.text()}': {worst.reason}")
    return worst


# --------------------------------------------------------------------------- the query


def _groups(groups) -> str:
    return ", ".join("[" + ", ".join(g) + "]" for g in groups)


def _pattern_culprit(f: ast.Formula) -> str | None:
    """A '+' or ';' that lets the engine's partial matches wait for ever, as text."""
    plus = [text(n) for n in subformulas(f) if isinstance(n, ast.Plus)]
    if plus:
        return f"the iteration '{min(plus, key=len)}'"
    seqs = [text(n) for n in subformulas(f) if isinstance(n, ast.Seq) and not n.contiguous]
    if seqs:
        return f"the sequence '{min(seqs, key=len)}'"
    return None


def _window(query: ast.Query, partitioned: bool, post) -> tuple[str, str] | None:
    w = query.within
    if w is None:
        return None
    if partitioned and isinstance(w, ast.EventsWindow):
        return PARTITION_KEYS, (f"PARTITION BY {_groups(query.partition_by)} with WITHIN"
                                f" {to_text(w)}: each key keeps the partial matches of its own"
                                " last window until it sees more events")
    return WINDOW, (f"WITHIN {to_text(w)}: partial matches"
                    + (" and the attributes the post-filter reads" if post else "")
                    + " older than the window are dropped")


def _engine(query: ast.Query, rewritten, methods: Collection[Method]) -> tuple[str, str]:
    """What this engine keeps (it counts by enumerating its tECS)."""
    rq = rewritten.query if rewritten is not None else query
    post = getattr(rewritten, "post_filters", ()) if Method.POST_FILTER in methods else ()
    win = _window(replace(query, partition_by=rq.partition_by), bool(rq.partition_by), post)
    if win is not None:
        return win
    if Method.POST_FILTER in methods:
        preds = ", ".join(text(s.predicate) for s in post) or "the predicates between events"
        return LOG, (f"the post-filtered relaxation keeps every earlier candidate event and the"
                     f" attributes '{preds}' reads, whatever the output")
    if Method.HASH_JOIN in methods:
        pcea = getattr(rewritten, "pcea", None)
        preds = "" if pcea is None else " joined on '" + "', '".join(pcea.predicates) + "'"
        return LOG, ("the hash join keeps the partial matches of every join key (and compared"
                     f" value){preds} for the whole log")
    culprit = _pattern_culprit(query.formula)
    if culprit is not None:
        return LOG, (f"its tECS keeps the partial matches of {culprit} for the whole log, also"
                     " when it only counts")
    if rq.partition_by:
        return PARTITION_KEYS, f"one evaluator per key of PARTITION BY {_groups(rq.partition_by)}"
    return CONSTANT, "a match spans a fixed number of adjacent events"


def memory_verdict(query: ast.Query, rewritten=None, methods: Collection[Method] = (),
                   mode: str = "match", schema=None,
                   projection: Mapping[str, tuple[str, ...]] | None = None) -> MemoryVerdict:
    """What memory grows with when ``query`` runs in ``mode``:

    * ``"match"`` — every complex event with its positions (``cer match``);
    * ``"count"`` — the number of matches (``cer match --count``; duplicate-preserving);
    * ``"distinct"`` — the distinct values of ``projection`` (``{var: attrs}``; default: the
      attributes ``SELECT x[a, b]`` names), Theorem 2.

    ``rewritten`` is the RewriteResult, ``methods`` the methods that evaluate predicates between
    events (``Plan.correlation``), ``schema`` the log's, for attribute types.
    """
    if mode not in MODES:
        raise ValueError(mode)
    if rewritten is not None and rewritten.unsatisfiable:
        return MemoryVerdict(mode, CONSTANT, "the query never matches")
    select = None if query.select is None else frozenset(i.var for i in query.select)
    attrs = dict(projection) if projection is not None else {
        i.var: i.attrs for i in query.select or () if i.attrs}
    lead = ""
    analysed = mode
    if mode == "count" and (query.strategy not in ("ALL", "ANY") or query.limit is not None
                            or query.consume != "NONE"):
        clause = (f"SELECT {query.strategy}" if query.strategy not in ("ALL", "ANY")
                  else f"LIMIT {query.limit}" if query.limit is not None
                  else f"CONSUME BY {query.consume}")
        lead = (f"{clause} chooses among matches by their positions, so counting them needs what"
                " enumerating them needs; ")
        analysed = "match"
    base = _criteria(query.formula, analysed, select, attrs, schema)
    rq = rewritten.query if rewritten is not None else query
    if Method.PARTITION in methods and rewritten is not None and rewritten.formula is not None:
        per_key = _criteria(rq.formula, analysed, select, attrs, schema)
        added = [g for g in rq.partition_by if g not in query.partition_by]
        eqs = ", ".join(text(c) for c in _equalities(query.formula))
        alt = _Outcome(max(per_key.tier, JOIN_KEYS, key=RANK.get),
                       f"'{eqs}' run as PARTITION BY {_groups(added)}: per value of the key,"
                       f" {per_key.reason}" if per_key.tier == CONSTANT else per_key.reason,
                       per_key.conditions)
        if RANK[alt.tier] < RANK[base.tier]:
            base = alt
    absences = [a for a in getattr(rewritten, "post_filters", ()) if isinstance(a, AbsenceSite)]
    if absences and RANK[base.tier] < RANK[LOG]:
        shown = "', '".join(f"!({a.etype.label} FILTER {text(a.predicate)})" for a in absences)
        base = _Outcome(LOG, f"the absence '{shown}' compares the absent event with the match,"
                        " which the criteria do not cover: every candidate that no such event"
                        " has blocked yet is kept, with the values it compares", base.conditions)
    if query.partition_by and RANK[base.tier] < RANK[PARTITION_KEYS]:
        base = _Outcome(PARTITION_KEYS, f"PARTITION BY {_groups(query.partition_by)}: one"
                        " evaluator per key, kept for the whole log (no time window expires"
                        f" keys); per key, {base.reason}", base.conditions)
    tier, reason = base.tier, lead + base.reason
    post = getattr(rewritten, "post_filters", ()) if Method.POST_FILTER in methods else ()
    win = _window(replace(query, partition_by=rq.partition_by), bool(rq.partition_by), post)
    if win is not None and RANK[win[0]] < RANK[tier]:
        tier, reason = win[0], f"{win[1]} (without it: {tier})"
    elif win is None and tier in (LOG, JOIN_KEYS):
        reason = "no WITHIN; " + reason
    if win is None and Method.POST_FILTER in methods and tier == LOG and analysed == "match":
        preds = ", ".join(text(s.predicate) for s in post)
        reason += f"; the post-filtered relaxation also keeps the attributes '{preds}' reads"
    pcea = getattr(rewritten, "pcea", None)
    if (win is None and Method.HASH_JOIN in methods and pcea is not None and pcea.ordered
            and tier == LOG and analysed == "match"):
        preds = ", ".join(pcea.predicates)
        reason += f"; the hash join's ordered index also keeps the values '{preds}' compares"
    if query.trailing is not None:
        tier, reason = _trailing(query, rq.partition_by, getattr(rewritten, "trailing", None),
                                 tier, reason)
    etier, ereason = _engine(query, rewritten, methods)
    if RANK[etier] <= RANK[tier]:
        etier = ereason = None
    return MemoryVerdict(mode, tier, reason, base.conditions, etier, ereason)


def _trailing(query: ast.Query, partition_by, site, tier: str, reason: str) -> tuple[str, str]:
    """``φ ; !ψ WITHIN W``: each match of φ waits until its deadline passes, and is reported
    at its partition's next event past it — a key that sees no more events keeps its last
    window's matches (and, when ψ compares with them, its last window's events) for good."""
    floor = PARTITION_KEYS if partition_by else WINDOW
    if RANK[tier] >= RANK[floor]:
        return tier, reason
    what = "each match of φ waits until its window closes"
    if site is not None:
        what += ", with the events of its last window that ψ compares with it"
    if partition_by:
        what += (f"; under PARTITION BY {_groups(partition_by)} until its own key's next event"
                 " past the deadline, so every key keeps the matches of its last window")
    return floor, (f"the trailing absence '!{to_text(query.trailing)} WITHIN"
                   f" {to_text(query.within)}': {what} (without it: {tier})")


def _equalities(f: ast.Formula) -> list[ast.Predicate]:
    return [c for _, c in sites(f)]


def plan_entry(plan) -> dict[str, Any]:
    """``plan.memory`` of ``cer explain``: the ``cer match`` verdict, and under ``modes`` the
    ``--count`` one (and a distinct projection's when SELECT names attributes)."""
    out = plan.memory("match").as_dict()
    out["modes"] = {"count": plan.memory("count").as_dict()}
    if any(i.attrs for i in plan.query.select or ()):
        out["modes"]["distinct"] = plan.memory("distinct").as_dict()
    return out
