"""Brute-force reference evaluator: docs/language.md "Semantics", written for clarity only.

Tests compare the real pipeline (compiler + engine) against ``reference_matches``. Every
function here mirrors one clause of the definitions, and nothing is optimised: the cost is
exponential, which is fine on streams of about ten events.

A *valuation* is what docs/language.md calls a match while it is being built: an interval,
``μ`` as a set of ``(variable, position)`` pairs, plus two pieces of bookkeeping that the
definitions need and that never reach the output:

* ``defined`` — the ``AS`` variables defined outside every ``+`` (safety: ``φ ; ψ`` drops a
  combination whose ``defined`` sets meet; a ``+`` result defines nothing);
* ``pending`` — filter atoms on a variable bound by an *enclosing* formula (filter rule 2).
  They travel upward with the valuation until the lowest ancestor whose ``bound`` contains
  the variable, where they are checked against that ancestor's ``μ(x)``.

How a filter predicate is read (docs/language.md, "Filters"): one comparison (LIKE, IN ...),
on one variable or between several, is one *atom*, and so is one CORE ``x[pred]`` group
(its connectives are ``scoped``); ``x.v = 1 OR x.v = 2`` is two atoms, ``x[v = 1 OR v = 2]`` one.
An atom holds when it holds for every combination of its variables' events (an empty set
passes) and fails on an event that lacks an attribute it reads. ``AND``/``OR``/``NOT`` above
atoms combine their truth values, after pushing ``NOT`` down to the atoms (De Morgan), so
``NOT`` never turns a "for all" into "there exists".

Positions inside the evaluation are *local* (indices into the sub-stream the formula sees
after FROM and PARTITION BY); ``reference_matches`` maps them back to global positions.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache

from cer_cli.events import Match
from cer_cli.query import ast

Event = dict
#: A filter atom's variables resolved so far: ``((var, positions), ...)`` sorted by var.
Env = tuple[tuple[str, frozenset[int]], ...]


@dataclass(frozen=True)
class Valuation:
    start: int
    end: int
    mu: frozenset[tuple[str, int]]
    defined: frozenset[str] = frozenset()
    pending: frozenset[tuple[ast.Predicate, Env]] = frozenset()

    def positions(self, var: str) -> frozenset[int]:
        return frozenset(p for v, p in self.mu if v == var)

    def reported(self) -> frozenset[int]:
        return frozenset(p for _, p in self.mu)


# --------------------------------------------------------------------------- variable sets


@cache
def vdef(f: ast.Formula) -> frozenset[str]:
    """Every variable the formula can bind (AS variables and event-type labels, inside `+` too)."""
    if isinstance(f, ast.EventType):
        return frozenset({f.name, f.label})
    if isinstance(f, ast.FNot):
        return frozenset()
    if isinstance(f, ast.As):
        return vdef(f.formula) | {f.var}
    if isinstance(f, (ast.Seq, ast.FOr)):
        return vdef(f.left) | vdef(f.right)
    if isinstance(f, ast.Plus):
        return vdef(f.body)
    if isinstance(f, ast.Filter):
        return vdef(f.formula)
    raise TypeError(f)


@cache
def bound(f: ast.Formula) -> frozenset[str]:
    """The papers' ``bound``: variables bound on every path (OR intersects, `+` binds none)."""
    if isinstance(f, ast.EventType):
        return frozenset({f.name, f.label})
    if isinstance(f, (ast.FNot, ast.Plus)):
        return frozenset()
    if isinstance(f, ast.As):
        return bound(f.formula) | {f.var}
    if isinstance(f, ast.Seq):
        return bound(f.left) | bound(f.right)
    if isinstance(f, ast.FOr):
        return bound(f.left) & bound(f.right)
    if isinstance(f, ast.Filter):
        return bound(f.formula)
    raise TypeError(f)


def prev_name(var: str) -> str:
    """The pseudo-variable ``PREV(y)`` stands for: y's events in the previous iteration."""
    return f"PREV({var})"


def predicate_vars(p: ast.Predicate | ast.Expr) -> frozenset[str]:
    if isinstance(p, ast.PrevRef):
        return frozenset({prev_name(p.var)})
    if isinstance(p, ast.AttrRef):
        return frozenset({p.var})
    if isinstance(p, (ast.Literal, ast.BoolConst)):
        return frozenset()
    if isinstance(p, ast.Like):
        return predicate_vars(p.operand)
    if isinstance(p, (ast.InSet, ast.InInterval, ast.Neg, ast.Not)):
        return predicate_vars(p.operand)
    if isinstance(p, ast.InRange):
        return predicate_vars(p.operand) | predicate_vars(p.low) | predicate_vars(p.high)
    if isinstance(p, (ast.Compare, ast.BinOp, ast.And, ast.Or)):
        return predicate_vars(p.left) | predicate_vars(p.right)
    raise TypeError(p)


# --------------------------------------------------------------------------- predicates


class _Missing(Exception):
    """An event lacks an attribute the atom reads: the atom does not hold."""


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def eval_expr(e: ast.Expr, assignment: dict[str, Event]):
    """Value of ``e`` with each variable read from the one event ``assignment`` gives it."""
    if isinstance(e, ast.Literal):
        return e.value
    if isinstance(e, ast.AttrRef):
        who = prev_name(e.var) if isinstance(e, ast.PrevRef) else e.var
        value = assignment[who].get(e.attr)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            raise _Missing(e)  # absent, null or NaN: no value
        if isinstance(value, datetime) and value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)  # an instant; naive is UTC
        return value
    if isinstance(e, ast.Neg):
        return -eval_expr(e.operand, assignment)
    if isinstance(e, ast.BinOp):
        a, b = eval_expr(e.left, assignment), eval_expr(e.right, assignment)
        _check_numbers(a, b)
        if e.op in ("/", "%") and b == 0:
            raise _Missing(e)  # division by zero: the atom does not hold
        both_int = isinstance(a, int) and isinstance(b, int)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if e.op == "/":
            return _trunc_div(a, b) if both_int else a / b
        if e.op == "%":  # C remainder: the sign of the dividend
            return a - b * _trunc_div(a, b) if both_int else math.fmod(a, b)
    raise TypeError(e)


def _check_numbers(*values) -> None:
    if len({isinstance(v, str) for v in values}) > 1:
        raise TypeError(f"string compared with number: {values!r} (the checker should reject this)")


def _compare(op: str, a, b) -> bool:
    _check_numbers(a, b)
    return {
        "<": a < b,
        "<=": a <= b,
        ">": a > b,
        ">=": a >= b,
        "=": a == b,
        "!=": a != b,
    }[op]


def eval_predicate(p: ast.Predicate, assignment: dict[str, Event]) -> bool:
    """Classical truth of ``p`` on one event per variable (may raise ``_Missing``)."""
    if isinstance(p, ast.BoolConst):
        return p.value
    if isinstance(p, ast.Compare):
        return _compare(p.op, eval_expr(p.left, assignment), eval_expr(p.right, assignment))
    if isinstance(p, ast.Like):
        value = eval_expr(p.operand, assignment)
        if not isinstance(value, str):
            raise TypeError(f"LIKE on a non-string {value!r}")
        return re.search(p.pattern, value) is not None
    if isinstance(p, ast.InSet):
        value = eval_expr(p.operand, assignment)
        for lit in p.values:
            _check_numbers(value, lit.value)
        return (value in [lit.value for lit in p.values]) != p.negated
    if isinstance(p, ast.InInterval):
        value = eval_expr(p.operand, assignment)
        inside = (p.low is None or _compare(">=", value, p.low.value)) and (
            p.high is None or _compare("<=", value, p.high.value)
        )
        return inside != p.negated
    if isinstance(p, ast.InRange):
        value = eval_expr(p.operand, assignment)
        low, high = eval_expr(p.low, assignment), eval_expr(p.high, assignment)
        return _compare("<=", low, value) and _compare("<=", value, high)
    # Inside one atom, both sides are evaluated: a missing value anywhere fails the atom.
    if isinstance(p, ast.And):
        left, right = eval_predicate(p.left, assignment), eval_predicate(p.right, assignment)
        return left and right
    if isinstance(p, ast.Or):
        left, right = eval_predicate(p.left, assignment), eval_predicate(p.right, assignment)
        return left or right
    if isinstance(p, ast.Not):
        return not eval_predicate(p.operand, assignment)
    raise TypeError(p)


def _push_not(p: ast.Predicate) -> ast.Predicate:
    """``NOT p`` with the negation moved one level down (De Morgan)."""
    if isinstance(p, ast.And):
        return ast.Or(ast.Not(p.left), ast.Not(p.right))
    if isinstance(p, ast.Or):
        return ast.And(ast.Not(p.left), ast.Not(p.right))
    if isinstance(p, ast.Not):
        return p.operand
    return ast.Not(p)


_CONNECTIVES = (ast.And, ast.Or, ast.Not)


def _is_atom(p: ast.Predicate) -> bool:
    """A comparison (LIKE, IN ...) or one ``x[...]`` group, possibly negated.

    Connectives written between atoms (``x.v > 1 OR x.v < 2``, ``x[v > 1] OR x[v < 2]``,
    ``x.v < 3 AND FALSE``) combine the atoms' truth values: Foundations of CEP reads
    ``φ FILTER (P OR Q)`` as ``(φ FILTER P) OR (φ FILTER Q)`` and ``AND`` as two filters,
    so each atom holds for every event of its variable on its own, and a constant is
    an atom of no variable. Connectives inside ``x[...]`` (``scoped``) are one atom."""
    if isinstance(p, _CONNECTIVES) and p.scoped:
        return True
    if isinstance(p, ast.Not) and (not isinstance(p.operand, _CONNECTIVES) or p.operand.scoped):
        return True  # ``NOT x[p]`` is ``x[NOT p]``: every event of x fails p
    return not isinstance(p, _CONNECTIVES)


def truth(p: ast.Predicate, env: dict[str, frozenset[int]], stream: list[Event]) -> bool:
    """Filter rules 1-2: an atom holds for *every* combination of its variables' events.

    ``env`` gives each variable its set of positions. An atom fails on an event that lacks
    an attribute it reads; connectives above atoms combine the atoms' truth values.
    """
    if _is_atom(p):
        names = sorted(predicate_vars(p))
        for combo in itertools.product(*(sorted(env[v]) for v in names)):
            try:
                if not eval_predicate(p, {v: stream[i] for v, i in zip(names, combo, strict=True)}):
                    return False
            except _Missing:
                return False
        return True
    if isinstance(p, ast.And):
        return truth(p.left, env, stream) and truth(p.right, env, stream)
    if isinstance(p, ast.Or):
        return truth(p.left, env, stream) or truth(p.right, env, stream)
    assert isinstance(p, ast.Not)
    return truth(_push_not(p.operand), env, stream)


# --------------------------------------------------------------------------- formulas


def formula_matches(f: ast.Formula, stream: list[Event]) -> frozenset[Valuation]:
    """``⟦f⟧`` over ``stream`` (local positions), with pending rule-2 atoms resolved at ``f``."""
    out = set()
    for v in _raw_matches(f, stream):
        resolved = _resolve_pending(v, bound(f), stream)
        if resolved is not None:
            out.add(resolved)
    return frozenset(out)


def _resolve_pending(v: Valuation, binders: frozenset[str], stream) -> Valuation | None:
    """Rule 2: a pending atom on ``x`` is checked at the lowest ancestor with ``x`` in ``bound``,
    against that ancestor's ``μ(x)``. Returns ``None`` when a completed atom fails."""
    pending = set()
    for pred, env in v.pending:
        env_d = dict(env)
        for x in (predicate_vars(pred) - env_d.keys()) & binders:
            env_d[x] = v.positions(x)
        if env_d.keys() >= predicate_vars(pred):
            if not truth(pred, env_d, stream):
                return None
        else:
            pending.add((pred, tuple(sorted(env_d.items()))))
    return Valuation(v.start, v.end, v.mu, v.defined, frozenset(pending))


def _concat(a: Valuation, b: Valuation, defined: frozenset[str]) -> Valuation:
    return Valuation(a.start, b.end, a.mu | b.mu, defined, a.pending | b.pending)


def _follows(a: Valuation, b: Valuation, contiguous: bool) -> bool:
    """``φ ; ψ`` needs ``k < l``; ``φ : ψ`` needs ``l = k + 1``."""
    return b.start == a.end + 1 if contiguous else b.start > a.end


def _raw_matches(f: ast.Formula, stream: list[Event]) -> set[Valuation]:
    if isinstance(f, ast.EventType):
        # `E`: [i, i] with μ(E) = {i}; `S>E` also needs stream S and sets μ(S>E) = {i}.
        return {
            Valuation(i, i, frozenset({(f.name, i), (f.label, i)}))
            for i, t in enumerate(stream)
            if t["type"] == f.name and (f.stream is None or t.get("stream", "S") == f.stream)
        }
    if isinstance(f, ast.FNot):
        # NOT(a): [i, i] with an empty map for every event that does not satisfy the atom a.
        return {
            Valuation(i, i, frozenset())
            for i, t in enumerate(stream)
            if not _satisfies_atom(f.atom, t)
        }
    if isinstance(f, ast.As):
        # φ AS x: μ(x) extended by every position φ reports; x is now defined (safety).
        return {
            Valuation(
                v.start,
                v.end,
                v.mu | {(f.var, p) for p in v.reported()},
                v.defined | {f.var},
                v.pending,
            )
            for v in formula_matches(f.formula, stream)
        }
    if isinstance(f, ast.Seq):
        # φ ; ψ (or φ : ψ), discarding combinations that define an AS variable twice.
        # φ1 ; !χ ; φ2 also needs no m with k < m < l and ([m, m], ν) ∈ ⟦χ⟧ for some ν.
        # A ψ compared with the match (correlated) blocks m when its atoms hold with the
        # outer variables read in μ1 ∪ μ2.
        rights = formula_matches(f.right, stream)
        found = () if f.absent is None else _absent_valuations(f.absent, stream)
        return {
            _concat(a, b, a.defined | b.defined)
            for a in formula_matches(f.left, stream)
            for b in rights
            if _follows(a, b, f.contiguous) and not (a.defined & b.defined)
            and not any(a.end < m < b.start for m in _blocked(found, a.mu | b.mu, stream))
        }
    if isinstance(f, ast.FOr):
        return set(formula_matches(f.left, stream) | formula_matches(f.right, stream))
    if isinstance(f, ast.Plus):
        # φ+ = φ OR (φ ; φ+): each iteration defines its variables afresh, the result none.
        body = {
            Valuation(v.start, v.end, v.mu, frozenset(), v.pending)
            for v in formula_matches(f.body, stream)
        }
        if any(_prevs(pred) for v in body for pred, _ in v.pending):
            return _plus_with_registers(f, body, stream)
        result = set(body)
        while True:
            longer = {
                _concat(a, b, frozenset())
                for a in body
                for b in result
                if _follows(a, b, f.contiguous)
            }
            if longer <= result:
                return result
            result |= longer
    if isinstance(f, ast.Filter):
        return {w for v in formula_matches(f.formula, stream) if (w := _filter(f, v, stream))}
    raise TypeError(f)


def _prevs(pred: ast.Predicate) -> frozenset[str]:
    return frozenset(x for x in predicate_vars(pred) if x.startswith("PREV("))


def _resolve_prev(v: Valuation, prev: Valuation | None, stream) -> Valuation | None:
    """docs/language.md, "Registers": an iteration's atoms on ``PREV(y)`` read y's events in
    the previous iteration ``prev`` (none in the first: the atom passes, as for an unbound
    variable). ``None`` when such an atom fails."""
    pending = set()
    for pred, env in v.pending:
        env_d = dict(env)
        todo = _prevs(pred) - env_d.keys()
        if not todo:
            pending.add((pred, env))
            continue
        for x in todo:
            env_d[x] = frozenset() if prev is None else prev.positions(x[len("PREV("):-1])
        if env_d.keys() >= predicate_vars(pred):
            if not truth(pred, env_d, stream):
                return None
        else:
            pending.add((pred, tuple(sorted(env_d.items()))))
    return Valuation(v.start, v.end, v.mu, v.defined, frozenset(pending))


def _plus_with_registers(f: ast.Plus, body: set[Valuation], stream) -> set[Valuation]:
    """``φ+`` whose iterations read the previous one: sequences μ1 ; … ; μk of ``body``
    built left to right, each μi checked against μ(i-1)."""
    frontier = {(w, b) for b in body if (w := _resolve_prev(b, None, stream)) is not None}
    seen = set(frontier)
    while frontier:
        longer = set()
        for acc, last in frontier:
            for b in body:
                if _follows(acc, b, f.contiguous):
                    w = _resolve_prev(b, last, stream)
                    if w is not None and (pair := (_concat(acc, w, frozenset()), b)) not in seen:
                        longer.add(pair)
        seen |= longer
        frontier = longer
    return {acc for acc, _ in seen}


def _filter(f: ast.Filter, v: Valuation, stream: list[Event]) -> Valuation | None:
    """Rule 1 for variables the filtered formula defines (every event of ``μ(x)``); an atom
    that also reads outer variables waits in ``pending`` for the ancestor that binds them."""
    local = predicate_vars(f.predicate) & vdef(f.formula)
    env = {x: v.positions(x) for x in local}
    if local == predicate_vars(f.predicate):
        return v if truth(f.predicate, env, stream) else None
    item = (f.predicate, tuple(sorted(env.items())))
    return Valuation(v.start, v.end, v.mu, v.defined, v.pending | {item})


def _absent_valuations(chi: ast.Formula, stream: list[Event]) -> list[Valuation]:
    """The single-event matches of χ, maybe with pending atoms on the match's variables."""
    return [v for v in formula_matches(chi, stream) if v.start == v.end]


def _blocked(found, mu: frozenset[tuple[str, int]], stream: list[Event]) -> set[int]:
    """Positions ``m`` with ``([m, m], ν) ∈ ⟦χ⟧`` whose comparisons with the match hold,
    an outer variable ``x`` read as the events ``μ(x)`` (one event: the checks demand it)."""
    out = set()
    for v in found:
        ok = True
        for pred, env in v.pending:
            env_d = dict(env)
            for x in predicate_vars(pred) - env_d.keys():
                env_d[x] = frozenset(p for y, p in mu if y == x)
                if len(env_d[x]) != 1:
                    raise ValueError(f"ψ reads {x!r}, bound to {len(env_d[x])} events")
            ok = ok and truth(pred, env_d, stream)
        if ok:
            out.add(v.start)
    return out


def _absent_positions(chi: ast.Formula, stream: list[Event]) -> set[int]:
    """Positions ``m`` with ``([m, m], ν) ∈ ⟦χ⟧`` for some ν: the events χ forbids in a gap."""
    found = formula_matches(chi, stream)
    if any(v.pending for v in found):
        raise ValueError(f"an absent formula may only filter its own events: {chi!r}")
    return {v.start for v in found if v.start == v.end}


def _satisfies_atom(atom: ast.Formula, event: Event) -> bool:
    """Whether one event satisfies a NOT's atom (``E`` possibly filtered on its own labels)."""
    found = formula_matches(atom, [event])
    if any(v.pending for v in found):
        raise ValueError(f"a NOT atom may only filter its own event: {atom!r}")
    return bool(found)


# --------------------------------------------------------------------------- query level


def _time(event: Event, position: int):
    return event.get("time", position)


def in_window(window: ast.Window | None, start: int, end: int, local: list[int], events) -> bool:
    """``time(end) − time(start) ≤ bound``; EVENTS counts local positions, durations read the
    event "time" (ns; the global position when absent), ``n [attr]`` reads ``attr``."""
    if window is None:
        return True
    if isinstance(window, ast.EventsWindow):
        return end - start <= window.count
    first, last = local[start], local[end]
    if isinstance(window, ast.DurationWindow):
        return _time(events[last], last) - _time(events[first], first) <= window.nanoseconds
    if isinstance(window, ast.AttributeWindow):
        a, b = events[first].get(window.attr), events[last].get(window.attr)
        return a is not None and b is not None and b - a <= window.amount
    raise TypeError(window)


def _has_value(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def _partitions(query: ast.Query, events: list[Event]) -> dict[tuple | None, list[int]]:
    """FROM, then PARTITION BY: key -> global positions of the sub-stream, in order.

    Each group uses the first of its names that the event has (not null, not NaN: no
    value, as in predicates); an event that has none of a group's names is skipped."""
    seen = [
        i
        for i, t in enumerate(events)
        if query.streams is None or t.get("stream", "S") in query.streams
    ]
    if not query.partition_by:
        return {None: seen}
    parts: dict[tuple | None, list[int]] = defaultdict(list)
    for i in seen:
        key = []
        for group in query.partition_by:
            value = next((events[i][a] for a in group if _has_value(events[i].get(a))), None)
            if value is None:
                break
            key.append(value)
        else:
            parts[tuple(key)].append(i)
    return dict(parts)


def _project(v: Valuation, select: tuple[ast.SelectItem, ...] | None) -> frozenset:
    if select is None:
        return v.mu
    keep = {item.var for item in select}
    return frozenset((x, p) for x, p in v.mu if x in keep)


def _next_greater(c1: frozenset[int], c2: frozenset[int]) -> bool:
    """``c1 <next c2``: the earliest position where they differ is in c2."""
    return c1 != c2 and min(c1 ^ c2) in c2


def _last_greater(c1: frozenset[int], c2: frozenset[int]) -> bool:
    """``c1 <last c2``: the latest position where they differ is in c2."""
    return c1 != c2 and max(c1 ^ c2) in c2


def select_strategy(strategy: str, candidates: list[tuple[int, int, frozenset]]) -> list:
    """Strategy among ``(start, end, μ)`` ending at the same event, on reported positions
    (local, so STRICT's "every position of the interval" is within the sub-stream)."""
    if strategy in ("ALL", "ANY"):
        return candidates
    rep = {c: frozenset(p for _, p in c[2]) for c in candidates}
    if strategy == "STRICT":
        return [c for c in candidates if rep[c] == frozenset(range(c[0], c[1] + 1))]
    beats = {"NEXT": _next_greater, "LAST": _last_greater, "MAX": frozenset.__lt__}[strategy]
    return [c for c in candidates if not any(beats(rep[c], rep[d]) for d in candidates)]


def reference_matches(
    query: ast.Query, events: list[Event], *, apply_limit: bool = True
) -> list[Match]:
    """All complex events of ``query`` over ``events`` (global positions), without duplicates.

    Order of evaluation (docs/language.md): FROM, PARTITION BY, the formula per sub-stream,
    SELECT, WITHIN; then, per end position in stream order, CONSUME BY (a match must start
    after the last consuming event of its scope), the strategy, LIMIT.

    LIMIT keeps ``n`` matches per triggering event, latest start first; ties are unspecified,
    so with ``apply_limit`` this returns *one* valid choice — compare an engine's output with
    ``check_limited`` instead. ``apply_limit=False`` returns every candidate. Either way
    consumption fires after an event that reported at least one match, i.e. when
    ``min(n, candidates) > 0``, which does not depend on the choice.
    """
    if query.trailing is not None:
        return _trailing_matches(query, events, apply_limit, open_ends=False)
    by_end: dict[int, list[tuple[tuple | None, list[int], tuple]]] = defaultdict(list)
    for key, local in _partitions(query, events).items():
        stream = [events[i] for i in local]
        candidates = set()
        for v in formula_matches(query.formula, stream):
            if v.pending:
                raise ValueError(f"filter on a variable no formula binds: {v.pending!r}")
            if in_window(query.within, v.start, v.end, local, events):
                candidates.add((v.start, v.end, _project(v, query.select)))
        for c in candidates:
            by_end[local[c[1]]].append((key, local, c))

    out: list[Match] = []
    consumed_all = -1
    consumed: dict[tuple | None, int] = defaultdict(lambda: -1)
    for end in sorted(by_end):
        key, local = by_end[end][0][:2]  # one event belongs to one partition
        floor = max(consumed_all, consumed[key])
        alive = [c for _, _, c in by_end[end] if local[c[0]] > floor]
        selected = sorted(
            select_strategy(query.strategy, alive), key=lambda c: (-c[0], sorted(c[2]))
        )
        reported = len(selected) if query.limit is None else min(query.limit, len(selected))
        chosen = selected[:reported] if apply_limit else selected
        out.extend(_to_match(c, local, key) for c in chosen)
        if reported and query.consume == "ANY":
            consumed_all = end
        elif reported and query.consume == "PARTITION":
            consumed[key] = end
    return sorted(out, key=lambda m: (m.end, m.start, m.events))


def _deadline_time(window: ast.Window, p: int, local: list[int], events) -> int | float:
    """τ(p): the local position for ``WITHIN n EVENTS``, the attribute for ``n [attr]``
    (the log's time column: every event has it), else the event time."""
    if isinstance(window, ast.EventsWindow):
        return p
    if isinstance(window, ast.AttributeWindow):
        return events[local[p]][window.attr]
    return _time(events[local[p]], local[p])


def trailing_matches(
    query: ast.Query, events: list[Event], *, apply_limit: bool = True, open_ends: bool = False
) -> list[Match]:
    """``φ ; !ψ WITHIN W`` (docs/language.md, "Absence"): per sub-stream, a match
    ``([i, k], μ)`` of φ inside the window (strategy and LIMIT chosen among φ's matches
    ending at ``k``) with deadline ``D = τ(i) + W`` holds when no ``m > k`` with
    ``τ(m) ≤ D`` satisfies ψ; it is reported as ``[i, r]`` at ``r``, the first position with
    ``τ(r) > D``. Without such an ``r`` the answer is unknown: dropped, or with ``open_ends``
    reported as ``[i, len(events)]`` (the end of the log, which has no time)."""
    return _trailing_matches(query, events, apply_limit, open_ends)


def _trailing_matches(query, events, apply_limit, open_ends) -> list[Match]:
    from dataclasses import replace

    w = query.within
    bound = (w.count if isinstance(w, ast.EventsWindow) else
             w.amount if isinstance(w, ast.AttributeWindow) else w.nanoseconds)
    phi = replace(query, trailing=None)
    out = []
    parts = _partitions(query, events)
    owner = {g: (key, local) for key, local in parts.items() for g in local}
    for m in reference_matches(phi, events, apply_limit=apply_limit):
        key, local = owner[m.end]
        i, k = local.index(m.start), local.index(m.end)
        stream = [events[g] for g in local]
        # a correlated ψ reads the match's variables in its (projected) μ: tests use SELECT *
        mu = frozenset((x, local.index(p)) for p, xs in m.events for x in xs)
        blocked = _blocked(_absent_valuations(query.trailing, stream), mu, stream)
        deadline = _deadline_time(w, i, local, events) + bound
        if any(p > k and _deadline_time(w, p, local, events) <= deadline for p in blocked):
            continue
        after = [p for p in range(k + 1, len(local)) if _deadline_time(w, p, local, events) > deadline]
        if after:
            out.append(Match(m.start, local[after[0]], m.events, m.partition))
        elif open_ends:
            out.append(Match(m.start, len(events), m.events, m.partition))
    return sorted(set(out), key=lambda m: (m.end, m.start, m.events))  # one per [i, r] and μ


def _to_match(c: tuple[int, int, frozenset], local: list[int], key: tuple | None) -> Match:
    start, end, mu = c
    by_pos: dict[int, list[str]] = defaultdict(list)
    for x, p in mu:
        by_pos[local[p]].append(x)
    events = tuple((p, tuple(sorted(xs))) for p, xs in sorted(by_pos.items()))
    return Match(local[start], local[end], events, key)


# --------------------------------------------------------------------------- comparing


def _show(m: Match) -> str:
    return f"[{m.start},{m.end}] {dict(m.events)}" + (
        "" if m.partition is None else f" partition={m.partition}"
    )


def diff_matches(actual: list[Match], expected: list[Match]) -> str:
    """Human-readable difference between two match lists ('' when equal as sets)."""
    a = {(m.key(), m.partition): m for m in actual}
    e = {(m.key(), m.partition): m for m in expected}
    lines = [f"  unexpected {_show(a[k])}" for k in sorted(a.keys() - e.keys(), key=repr)]
    lines += [f"  missing    {_show(e[k])}" for k in sorted(e.keys() - a.keys(), key=repr)]
    if len(actual) != len(a):
        lines.append(f"  {len(actual) - len(a)} duplicate match(es) in actual")
    return "\n".join(lines)


def assert_same_matches(actual: list[Match], expected: list[Match]) -> None:
    diff = diff_matches(actual, expected)
    assert not diff, "matches differ from the reference:\n" + diff


def check_limited(engine_matches: list[Match], query: ast.Query, events: list[Event]) -> None:
    """Check an engine's output under LIMIT n: per end position, ``min(n, candidates)``
    distinct matches, all candidates, and none dropped in favour of an earlier start."""
    n = query.limit
    candidates = reference_matches(query, events, apply_limit=False)
    problems = []
    ends = {m.end for m in candidates} | {m.end for m in engine_matches}
    for end in sorted(ends):
        cands = {(m.key(), m.partition): m for m in candidates if m.end == end}
        got_list = [m for m in engine_matches if m.end == end]
        got = {(m.key(), m.partition): m for m in got_list}
        want = len(cands) if n is None else min(n, len(cands))
        if len(got_list) != len(got):
            problems.append(f"end {end}: duplicate matches")
        if len(got) != want:
            problems.append(f"end {end}: {len(got)} matches, expected {want}")
        for k in got.keys() - cands.keys():
            problems.append(f"end {end}: not a candidate: {_show(got[k])}")
        kept = [cands[k].start for k in got.keys() & cands.keys()]
        for k in cands.keys() - got.keys():
            if kept and min(kept) < cands[k].start:
                problems.append(
                    f"end {end}: dropped {_show(cands[k])} but kept a match starting at {min(kept)}"
                )
    assert not problems, "LIMIT output is not a valid choice:\n  " + "\n  ".join(problems)
