"""The bounded-memory criteria for select-project-join (SPJ) queries over streams with
application time (Schiff & Özçep): what evaluating such a query must remember as the streams
grow.

A query here is already in the paper's vocabulary (``plan/memory/translate.py`` puts a CER
query there): streams ordered by their timestamps, a selection whose closure P+ (Definition 5)
says which attributes are bounded, the joins between streams, and the projection list L.
Theorem 1 (duplicate-preserving projection) holds iff C1–C5 do; Theorem 2
(duplicate-eliminating) holds if its C1–C3 do (sufficient only). Each condition is
returned with the atom or clause it is about, and ``tier`` turns failing conditions into what
the paper's evaluation keeps instead: counters per distinct value, or the history.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# What memory grows with, from least to most (``RANK``).
CONSTANT = "constant"
WINDOW = "bounded by the window"
JOIN_KEYS = "grows with the number of distinct join keys"
PARTITION_KEYS = "grows with the number of distinct partition keys"
LOG = "grows with the log length"
RANK = {CONSTANT: 0, WINDOW: 1, JOIN_KEYS: 2, PARTITION_KEYS: 2, LOG: 3}

_INTEGER_TYPES = ("int",)


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
    if not c1:
        return [Condition("C1", False, why)]
    forest = _Forest.of(parents)
    joins = spj.stated()
    max_ref, min_ref = spj.closure.refs(spj.stream_of)
    held = [f"{e.text} in {k}({s})" for k, refs in (("MaxRef", max_ref), ("MinRef", min_ref))
            for s, es in refs.items() for e in sorted(es, key=lambda e: e.text)]
    return [
        Condition("C1", True, why),
        _condition("C2", _c2(spj, joins, forest),
                   "every predicate between events joins a variable with its parent or a"
                   " sibling" if joins else "no predicate between events"),
        _condition("C3", _c3(spj, forest),
                   "every output attribute is at the last variable (the root) or bounded"
                   if spj.projection else "nothing is output per match (a count)"),
        _condition("C4", _c4(spj, joins, forest),
                   "the equalities between events bind bounded attributes (or the last"
                   " variable)" if any(j.op != "<" for j in joins) else
                   "no equality between events"),
        _condition("C5", _c5(spj, joins, forest, max_ref, min_ref),
                   ("only the last variable has MaxRef/MinRef attributes: " + ", ".join(held))
                   if held else "MaxRef and MinRef are empty"),
    ]


def _condition(name: str, failure: str | None, holds: str) -> Condition:
    """Condition ``name``: it fails with the text ``failure``, else holds as ``holds`` says."""
    return Condition(name, failure is None, failure or holds)


@dataclass(frozen=True)
class _Forest:
    """The dependency graph's in-trees (C1 holds): each stream's parent, root (the latest
    stream of its tree) and depth below it, and how many trees there are."""

    parent: Mapping[str, str | None]
    root: Mapping[str, str]
    depth: Mapping[str, int]
    trees: int

    @classmethod
    def of(cls, parents: Mapping[str, set[str]]) -> _Forest:
        root = {s: _root(parents, s) for s in parents}
        return cls({s: next(iter(ps), None) for s, ps in parents.items()}, root,
                   {s: _depth(parents, s) for s in parents}, len(set(root.values())))

    def last(self, s: str) -> bool:
        """``s`` is the last variable: the root of the only tree."""
        return self.trees == 1 and self.depth[s] == 0


def _c2(spj: SPJ, joins: list[Join], f: _Forest) -> str | None:
    """C2: every join relates two streams, parent and child or siblings (or two roots)."""
    for j in joins:
        ss = sorted({spj.of(e) for e in j.elems}, key=spj.streams.index)
        if len(ss) > 2:
            return f"'{j.text}' relates {len(ss)} events; the criteria cover joins of two"
        a, b = ss
        if f.root[a] != f.root[b]:
            if f.depth[a] or f.depth[b]:
                return f"'{j.text}' joins two trees below their roots"
        elif not (f.parent[a] == f.parent[b] or f.parent[a] == b or f.parent[b] == a):
            return (f"'{j.text}' joins {a} (depth {f.depth[a]}) with {b} (depth {f.depth[b]}),"
                    " which are neither parent and child nor siblings")
    return None


def _c3(spj: SPJ, f: _Forest) -> str | None:
    """C3: what is output per match lies at the last variable, or one step before it and
    bounded."""
    for e in spj.projection:
        s = spj.of(e)
        if isinstance(e, Pos) and f.depth[s] >= 1:
            return (f"the position of {s} is output, and {s} is "
                    + ("not the last variable" if f.depth[s] == 1 and f.trees == 1
                       else f"{f.depth[s]} steps before the last variable"))
        if f.depth[s] > 1:
            return f"{e.text} is output and {s} is {f.depth[s]} steps before the last variable"
        if (f.trees > 1 or f.depth[s] == 1) and not spj.bounded(e):
            return f"{e.text} is output and {s} is not the last variable: {spj.why(e)}"
    return None


def _c4(spj: SPJ, joins: list[Join], f: _Forest) -> str | None:
    """C4: an equality (or any other non-``<`` join) binds bounded attributes, except at the
    last variable, and reaches at most one step below it."""
    for j in joins:
        if j.op == "<":
            continue
        roots = {spj.of(e) for e in j.elems if f.depth[spj.of(e)] == 0} if f.trees == 1 else set()
        for e in j.elems:
            s = spj.of(e)
            if s in roots:
                continue
            if not spj.bounded(e):
                return f"'{j.text}': {spj.why(e)}, and {s} is not the last variable"
            if roots and f.depth[s] != 1:
                return f"'{j.text}': {s} is {f.depth[s]} steps before the last variable"
    return None


def _c5(spj: SPJ, joins: list[Join], f: _Forest, max_ref, min_ref) -> str | None:
    """C5: only the last variable has MaxRef/MinRef attributes (Definition 9)."""
    for s in spj.streams:
        refs = sorted(max_ref.get(s, set()) | min_ref.get(s, set()), key=lambda e: e.text)
        if refs and not f.last(s):
            j = next((j for j in joins if j.op == "<" and set(j.elems) & set(refs)), None)
            where = f"'{j.text}'" if j else "an inequality between events"
            kind = "MaxRef" if refs[0] in max_ref.get(s, set()) else "MinRef"
            return (f"{where}: {refs[0].text} is in {kind}({s}) (in a non-redundant inequality;"
                    f" {spj.closure.why_unbounded(refs[0])}) and {s} is not the last variable")
    return None


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


#: What the paper's evaluation keeps when a condition fails: the history (the log length)
#: when the tree, the join placement or the projection fails, counters per distinct value
#: when only the boundedness of joined attributes does.
FAIL_TIER = {"C1": LOG, "C2": LOG, "C3": LOG, "C4": JOIN_KEYS, "C5": JOIN_KEYS,
             "T2 C1": LOG, "T2 C2": JOIN_KEYS, "T2 C3": JOIN_KEYS}


def tier(conds: Iterable[Condition]) -> str:
    """The verdict the conditions give: the history (log length) when the tree, the join
    placement or the projection fails (Theorem 1 C1–C3, Theorem 2 C1), counters per
    distinct value when only the boundedness of joined attributes fails, else constant."""
    failing = [c.name for c in conds if not c.holds]
    if not failing:
        return CONSTANT
    return max((FAIL_TIER.get(n, LOG) for n in failing), key=RANK.get)


def synopses(spj: SPJ) -> str:
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
