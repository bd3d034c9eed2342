"""A CER query in the vocabulary of the SPJ criteria (``plan/memory/spj.py``).

* each event a match binds (an atom of the pattern) is a **stream**; its position is the
  stream's timestamp, and ``;`` orders streams. Atoms glued by ``:`` read adjacent events and
  are merged into one stream (as the paper merges streams with equal timestamps);
* ``OR`` in the pattern, and ``OR`` / ``!=`` / ``<=`` between events in filters, split the
  query into a union of conjunctive **members** (the paper's preprocessing); a union needs no
  more memory than its members (for ``--count``, overlapping members are also analysed
  together, for inclusion–exclusion: ``merge``);
* filter atoms between two events are **joins** (``=``, ``<``, or any other predicate), the
  others constrain one stream; constants and ranges make attributes **bounded** through the
  closure P+ (Definition 5) — a range only for integer attributes (from the log's schema; an
  attribute of unknown type is taken as unbounded);
* the output mode fixes the projection list L: ``cer match`` outputs positions (unbounded),
  ``--count`` outputs nothing (Theorem 1 with an empty L), a distinct projection outputs the
  attributes ``SELECT x[a]`` names (Theorem 2).

Repetitions (``+``) and ``NOT(…)`` are outside SPJ queries: when no predicate between
events reads them they are left out (they only multiply counters), otherwise a precondition
fails (``Translation.pre``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from cer_cli.compiler.correlation import is_correlation
from cer_cli.plan.memory.spj import SPJ, Attr, Closure, Condition, Const, Elem, Join, Pos
from cer_cli.query import ast
from cer_cli.query.printer import to_text
from cer_cli.query.scope import attr_refs, conjuncts, pred_vars, prev_refs

#: Past this many alternatives (OR branches times split comparisons) the analysis gives up.
MAX_MEMBERS = 64
#: Overlapping alternatives analysed together for inclusion–exclusion, at most.
MAX_OVERLAP = 5


def text(p: ast.Node) -> str:
    """A predicate or formula as written in queries, without the printer's outer parentheses."""
    return unwrap(to_text(p))


def unwrap(s: str) -> str:
    """``s`` (the printer's text) without its outer parentheses."""
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


class TooMany(Exception):
    """More than ``MAX_MEMBERS`` alternatives: the analysis gives up."""


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
        raise TooMany
    return xs


_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "!=": "!="}


@dataclass(frozen=True)
class Member:
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


def members(formula: ast.Formula) -> list[Member]:
    out = []
    for p in _expand(formula, [0]):
        out += _resolve(p)
        _capped(out)
    return out


def _resolve(p: _Partial) -> list[Member]:
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
        out.append(Member(p.streams, p.seps, tuple(rel), tuple(finite), joins, tuple(wide)))
        _capped(out)
    return out or [Member(p.streams, p.seps, tuple(relations), tuple(finite), (), tuple(wide))]


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

# --------------------------------------------------------------------------- member -> SPJ


@dataclass(frozen=True)
class Translation:
    """One member in the paper's vocabulary (``spj``; None when the criteria do not cover it
    or it never matches), with the preconditions the translation checked (``pre``: no
    iteration that the output or a join reads, no join on an event SELECT drops), the streams
    left out (no predicate between events reads them) and, when not covered, why."""

    spj: SPJ | None
    pre: tuple[Condition, ...] = ()
    left_out: tuple[str, ...] = ()
    uncovered: str | None = None


def translate(m: Member, mode: str, select: frozenset[str] | None,
              attrs: Mapping[str, tuple[str, ...]], schema) -> Translation:
    """``m`` as an SPJ query in output ``mode``: the streams the criteria must see (an
    unreported event or a repetition that no join reads only multiplies counters, so it is
    left out), ``:``-adjacent streams merged into one, and the projection list L
    (positions for ``match``, nothing for ``count``, ``attrs`` for ``distinct``)."""
    if m.wide:
        w = m.wide[0]
        if "PREV(" in w:
            return Translation(None, (Condition("no iteration", False, f"'{w}' compares iterations"),),
                               uncovered=f"'{w}' compares consecutive iterations of a '+' (a register)")
        return Translation(None, (Condition("joins of two", False, f"'{w}' reads three or more events"),),
                           uncovered=f"'{w}' relates three or more events")
    pre, keep = _kept(m, mode, select)
    groups = _adjacent(keep)
    names = _names(groups)
    stream_of = {s.sid: s.name() for s in m.streams}
    for g, n in zip(groups, names, strict=True):
        for s in g:
            stream_of[s.sid] = n
    projection, more = _projection(m, groups, names, mode, select, attrs)
    attributes = [e for e in projection if isinstance(e, Attr)]
    closure = Closure(m.relations, m.finite,
                      _types(m.streams, m.relations, m.joins, attributes, schema))
    if closure.unsatisfiable:
        return Translation(None)
    spj = SPJ(tuple(names), frozenset(itertools.pairwise(names)), stream_of, closure, m.joins,
              tuple(projection))
    kept = {s.sid for s, _ in keep}
    return Translation(spj, tuple(pre + more),
                       tuple(s.name() for s in m.streams if s.sid not in kept))


def _ident(s: _Stream, mode: str, select: frozenset[str] | None) -> frozenset[str]:
    """What identifies a stream's event in the output."""
    return s.labels if select is None or mode == "distinct" else s.labels & select


def _kept(m: Member, mode: str, select) -> tuple[list[Condition], list[tuple[_Stream, str]]]:
    """The streams the criteria see, each with its separator from the previous one kept
    (``;`` when one was left out between), and the preconditions that fail on the way."""
    joined = {e.sid for j in m.joins for e in j.elems}
    last = len(m.streams) - 1
    pre: list[Condition] = []
    keep: list[tuple[_Stream, str]] = []
    gap = False  # a stream was left out since the last one kept
    iterations = [s for s in m.streams if s.iteration]
    if mode == "match" and iterations:
        pre.append(Condition("no iteration", False, f"the iteration '{iterations[0].iteration}'"
                             " reports any number of events per match"))
    for i, s in enumerate(m.streams):
        hidden = (s.negated or not _ident(s, mode, select)) and i not in (0, last)
        if mode != "match" and s.sid in joined and (s.iteration or hidden):
            pre.append(_unreadable(m, s))
        # a repetition or an unreported event that no join reads only multiplies counters
        if s.sid not in joined and ((mode != "match" and s.iteration) or hidden):
            gap = True
            continue
        keep.append((s, "" if not keep else ";" if gap or m.seps[i] != ":" else ":"))
        gap = False
    return pre, keep


def _unreadable(m: Member, s: _Stream) -> Condition:
    """A join reads a stream the count cannot see as one event: an iteration's, or one
    SELECT drops."""
    j = next(j for j in m.joins if s.sid in {e.sid for e in j.elems})
    if s.iteration:
        return Condition("no iteration", False, f"'{j.text}' compares events inside the"
                         f" iteration '{s.iteration}', which the criteria do not cover")
    return Condition("projection", False, f"SELECT drops {s.name()}, which '{j.text}' reads:"
                     " the count is of distinct projected matches")


def _adjacent(keep: list[tuple[_Stream, str]]) -> list[list[_Stream]]:
    """``:``-adjacent streams become one stream (the next event is determined)."""
    groups: list[list[_Stream]] = []
    for s, sep in keep:
        if sep == ":" and groups:
            groups[-1].append(s)
        else:
            groups.append([s])
    return groups


def _names(groups: list[list[_Stream]]) -> list[str]:
    """Each merged stream's name, numbered ``#k`` when several share one."""
    names = [" : ".join(s.name() for s in g) for g in groups]
    for n in set(names):
        if names.count(n) > 1:
            k = 0
            for i, x in enumerate(names):
                if x == n:
                    k += 1
                    names[i] = f"{n}#{k}"
    return names


def _projection(m: Member, groups, names, mode, select, attrs):
    """The projection list L and the preconditions it fails: ``match`` outputs the positions
    of the first, last and reported streams, ``distinct`` the attributes ``attrs`` names (not
    of an iteration), ``count`` nothing."""
    if mode == "match":
        ends = (0, len(groups) - 1)
        return [Pos(n) for i, (g, n) in enumerate(zip(groups, names, strict=True))
                if i in ends or any(_ident(s, mode, select) for s in g)], []
    if mode != "distinct":
        return [], []
    projection: list[Attr | Pos] = [Attr(s.sid, a, f"{v}.{a}") for g in groups for s in g
                                    for v, names_ in attrs.items() if v in s.labels
                                    for a in names_]
    pre = [Condition("no iteration", False, f"the output reads events of the iteration"
                     f" '{s.iteration}'")
           for s in m.streams if s.iteration and any(v in s.labels for v in attrs)]
    return projection, pre


def signature(m: Member, select: frozenset[str] | None) -> tuple:
    return tuple(s.labels if select is None else s.labels & select
                 for s in m.streams if not s.negated)


def merge(ms: list[Member], select: frozenset[str] | None) -> Member | None:
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
    return Member(base.streams, tuple(seps), tuple(relations), tuple(finite), tuple(joins),
                   tuple(base.wide) + tuple(wide))
