"""Memory verdict: what evaluating a query must remember as the log grows, and why.

Three files, three ideas: ``spj.py`` is the bounded-memory theory for select-project-join
queries over streams (Schiff & Özçep: Theorems 1 and 2, their conditions C1–C5 and C1–C3);
``translate.py`` puts a CER query into that vocabulary (streams, joins, the projection list
of each output mode); this module reads the plan and writes the verdict: per output mode,
the worst member's outcome, then what the plan adds to it.

Every verdict is an upper bound: "constant" comes from the theorems' sufficient direction (the
paper's synopses: counters over bounded attributes); when a condition fails we report what the
paper's evaluation needs instead — counters per distinct value of the attributes C4/C5 name
("distinct join keys"), or the history (the log length) when C1–C3 fail. Repetitions (``+``) and
``NOT(…)`` are outside SPJ queries: when no predicate between events reads them, they only
multiply counters (a counter per automaton state), otherwise the verdict is the log length.

``WITHIN`` bounds whatever the criteria leave unbounded; ``PARTITION BY`` multiplies it by
the number of keys. ``engine`` says how much more this engine keeps, when it does (it counts
by enumerating its tECS, so it does not reach Theorem 1's counters). The methods for
predicates between events (the partition rewrite, the hash join, the post-filter) are the
plan's ``correlation``, read here, never decided again.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from cer_cli.compiler.correlation import AbsenceSite
from cer_cli.plan.correlation import Method
from cer_cli.plan.memory.spj import (
    CONSTANT,
    FAIL_TIER,
    JOIN_KEYS,
    LOG,
    PARTITION_KEYS,
    RANK,
    WINDOW,
    Condition,
    synopses,
    theorem1,
    theorem2,
)
from cer_cli.plan.memory.translate import (
    MAX_MEMBERS,
    MAX_OVERLAP,
    Member,
    TooMany,
    members,
    merge,
    signature,
    text,
    translate,
    unwrap,
)
from cer_cli.query import ast
from cer_cli.query.printer import groups_text, to_text
from cer_cli.query.scope import subformulas

__all__ = ["CONSTANT", "WINDOW", "JOIN_KEYS", "PARTITION_KEYS", "LOG", "RANK", "MODES",
           "MemoryVerdict", "memory_verdict"]

MODES = ("match", "count", "distinct")


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


# --------------------------------------------------------------------------- member verdicts


@dataclass(frozen=True)
class _Outcome:
    tier: str
    reason: str
    conditions: tuple[Condition, ...] = ()


#: What a failing condition costs, in the verdict's words.
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

#: Preconditions of the translation (``translate.Translation.pre``): the theorems do not
#: apply when one fails.
_PRECONDITIONS = ("no iteration", "projection", "joins of two")


def _analyse(m: Member, mode: str, select: frozenset[str] | None,
             attrs: Mapping[str, tuple[str, ...]], schema) -> _Outcome:
    """The verdict for one conjunctive member, without window or partitions."""
    t = translate(m, mode, select, attrs, schema)
    if t.uncovered is not None:
        return _Outcome(LOG, f"{t.uncovered}, which the criteria do not cover: assumed to need"
                        " the history", t.pre)
    if t.spj is None:
        return _Outcome(CONSTANT, "its filters contradict each other: it never matches")
    conds = t.pre + tuple(theorem2(t.spj) if mode == "distinct" else theorem1(t.spj))
    failing = [c for c in conds if not c.holds]
    if failing:
        return _failed(failing, conds, mode, select)
    names = t.spj.streams
    if len(names) <= 1:
        if t.left_out:
            return _Outcome(CONSTANT, f"one stream ('{names[0] if names else '-'}') once"
                            f" {', '.join(t.left_out)} are left out (no predicate between events"
                            " reads them: a counter per automaton state counts them)", conds)
        return _Outcome(CONSTANT, f"one stream ('{names[0]}'): no ';' and no '+', so a match is"
                        " one event or adjacent events and only the last few are kept", conds)
    if mode == "distinct":
        return _Outcome(CONSTANT, "Theorem 2 holds (C1–C3): the distinct bounded output tuples"
                        " and one extreme per stream are kept", conds)
    return _Outcome(CONSTANT, "Theorem 1 holds (C1–C5): " + synopses(t.spj), conds)


def _failed(failing: list[Condition], conds: tuple[Condition, ...], mode: str,
            select: frozenset[str] | None) -> _Outcome:
    """The outcome of a member whose conditions fail: the history when a precondition
    does, else the worst failing condition's consequence."""
    if failing[0].name in _PRECONDITIONS:
        return _Outcome(LOG, f"{failing[0].detail}; assumed to need the history", conds)
    worst = max(failing, key=lambda c: RANK[FAIL_TIER[c.name]])
    theorem = "Theorem 2" if worst.name.startswith("T2") else "Theorem 1"
    name = worst.name.removeprefix("T2 ")
    if mode == "match" and worst.name == "C3":
        clause = "SELECT *" if select is None else "SELECT " + (", ".join(sorted(select))
                                                               or "NONE")
        return _Outcome(LOG, f"{clause} outputs positions: {worst.detail} (Theorem 1 C3),"
                        " so every earlier event that may still be reported is kept", conds)
    return _Outcome(FAIL_TIER[worst.name], f"{worst.detail} ({theorem} {name}):"
                    f" {_CONSEQUENCE[worst.name]}", conds)


def _criteria(formula: ast.Formula, mode: str, select, attrs, schema) -> _Outcome:
    """The worst verdict over the union's members (and, for a count, over the conjunctions
    of members that may report the same match)."""
    try:
        union = members(formula)
    except TooMany:
        return _Outcome(LOG, f"the query has more than {MAX_MEMBERS} alternatives (OR branches and"
                        " split comparisons): not analysed, assumed to need the history")
    if not union:
        return _Outcome(CONSTANT, "the query never matches (it defines a variable twice)")
    outcomes = [(m, _analyse(m, mode, select, attrs, schema)) for m in union]
    if mode != "match":
        outcomes += _overlaps(union, mode, select, attrs, schema)
    m, worst = max(outcomes, key=lambda mo: RANK[mo[1].tier])
    if len(union) > 1 and worst.tier != CONSTANT:
        worst = replace(worst, reason=f"in the alternative '{m.text()}': {worst.reason}")
    return worst


def _overlaps(union: list[Member], mode: str, select, attrs, schema) -> list:
    """For a count, the conjunctions of members that may report the same match
    (inclusion–exclusion), each with its outcome."""
    groups: dict[tuple, list[Member]] = {}
    for m in union:
        groups.setdefault(signature(m, select), []).append(m)
    out = []
    for ms in groups.values():
        if len(ms) > MAX_OVERLAP:
            out.append((ms[0], _Outcome(LOG, f"{len(ms)} alternatives may report the same"
                                        " matches: not analysed, assumed to need the history")))
            continue
        for k in range(2, len(ms) + 1):
            for sub in itertools.combinations(ms, k):
                merged = merge(list(sub), select)
                if merged is not None:
                    out.append((merged, _analyse(merged, mode, select, attrs, schema)))
    return out


# --------------------------------------------------------------------------- the plan


def memory_verdict(plan, mode: str = "match",
                   projection: Mapping[str, tuple[str, ...]] | None = None) -> MemoryVerdict:
    """What memory grows with when the query of ``plan`` (a ``cer_cli.plan.Plan``, which
    imports this module: not annotated, to keep the imports one-way) runs in ``mode``:

    * ``"match"`` — every complex event with its positions (``cer match``);
    * ``"count"`` — the number of matches (``cer match --count``; duplicate-preserving);
    * ``"distinct"`` — the distinct values of ``projection`` (``{var: attrs}``; default: the
      attributes ``SELECT x[a, b]`` names), Theorem 2.

    The criteria judge the query as written; then the plan's decisions weigh in: the
    partition rewrite (judged per key), a correlated absence, PARTITION BY, the window, a
    trailing absence and what this engine keeps.
    """
    if mode not in MODES:
        raise ValueError(mode)
    query = plan.query
    if plan.rewritten.unsatisfiable:
        return MemoryVerdict(mode, CONSTANT, "the query never matches")
    select = None if query.select is None else frozenset(i.var for i in query.select)
    attrs = dict(projection) if projection is not None else {
        i.var: i.attrs for i in query.select or () if i.attrs}
    lead, analysed = _chooses(query, mode)
    base = _criteria(query.formula, analysed, select, attrs, plan.schema)
    if Method.PARTITION in plan.correlation:
        base = _per_key(plan, base, analysed, select, attrs)
    base = _partitioned(plan, base)
    tier, reason = _windowed(plan, base.tier, lead + base.reason, analysed)
    if query.trailing is not None:
        tier, reason = _trailing(query, plan.partition_by, plan.rewritten.trailing, tier, reason)
    etier, ereason = _engine(plan)
    if RANK[etier] <= RANK[tier]:
        etier = ereason = None
    return MemoryVerdict(mode, tier, reason, base.conditions, etier, ereason)


def _chooses(query: ast.Query, mode: str) -> tuple[str, str]:
    """A count whose strategy, LIMIT or CONSUME BY chooses among matches by their positions
    needs what enumerating them needs: the verdict's lead-in and the mode analysed."""
    if mode != "count" or (query.strategy in ("ALL", "ANY") and query.limit is None
                           and query.consume == "NONE"):
        return "", mode
    clause = (f"SELECT {query.strategy}" if query.strategy not in ("ALL", "ANY")
              else f"LIMIT {query.limit}" if query.limit is not None
              else f"CONSUME BY {query.consume}")
    return (f"{clause} chooses among matches by their positions, so counting them needs what"
            " enumerating them needs; "), "match"


def _per_key(plan, base: _Outcome, mode: str, select, attrs) -> _Outcome:
    """The partition rewrite's query, judged per key, when that needs less than ``base``."""
    if plan.rewritten.formula is None:
        return base
    per_key = _criteria(plan.rewritten.query.formula, mode, select, attrs, plan.schema)
    eqs = ", ".join(unwrap(p) for p in plan.correlation.step(Method.PARTITION).predicates)
    groups = groups_text(plan.correlation.added or plan.query.partition_by)
    alt = _Outcome(max(per_key.tier, JOIN_KEYS, key=RANK.get),
                   f"'{eqs}' run as PARTITION BY {groups}: per value"
                   f" of the key, {per_key.reason}" if per_key.tier == CONSTANT else per_key.reason,
                   per_key.conditions)
    return alt if RANK[alt.tier] < RANK[base.tier] else base


def _partitioned(plan, base: _Outcome) -> _Outcome:
    """What a correlated absence and the written PARTITION BY add to ``base``."""
    query = plan.query
    absences = tuple(a for a in plan.rewritten.post_filters if isinstance(a, AbsenceSite))
    if absences and RANK[base.tier] < RANK[LOG]:
        shown = "', '".join(f"!({a.etype.label} FILTER {text(a.predicate)})" for a in absences)
        base = _Outcome(LOG, f"the absence '{shown}' compares the absent event with the match,"
                        " which the criteria do not cover: every candidate that no such event"
                        " has blocked yet is kept, with the values it compares", base.conditions)
    if query.partition_by and RANK[base.tier] < RANK[PARTITION_KEYS]:
        base = _Outcome(PARTITION_KEYS, f"PARTITION BY {groups_text(query.partition_by)}: one"
                        " evaluator per key, kept for the whole log (no time window expires"
                        f" keys); per key, {base.reason}", base.conditions)
    return base


def _windowed(plan, tier: str, reason: str, mode: str) -> tuple[str, str]:
    """The window bounds what the criteria leave unbounded; without it, say what the
    post-filter or the hash join's ordered index also keeps."""
    win = _window(plan)
    if win is not None and RANK[win[0]] < RANK[tier]:
        return win[0], f"{win[1]} (without it: {tier})"
    if win is not None:
        return tier, reason
    if tier in (LOG, JOIN_KEYS):
        reason = "no WITHIN; " + reason
    if tier != LOG or mode != "match":
        return tier, reason
    post = _post_filtered(plan)
    pcea = plan.rewritten.pcea
    if Method.POST_FILTER in plan.correlation:
        preds = ", ".join(text(s.predicate) for s in post)
        reason += f"; the post-filtered relaxation also keeps the attributes '{preds}' reads"
    if Method.HASH_JOIN in plan.correlation and pcea is not None and pcea.ordered:
        preds = ", ".join(pcea.predicates)
        reason += f"; the hash join's ordered index also keeps the values '{preds}' compares"
    return tier, reason


def _post_filtered(plan) -> tuple:
    """What the post-filter tests: the predicates between events, then the absences."""
    post = plan.post_filter
    return () if post is None else post.sites + post.absences


def _window(plan) -> tuple[str, str] | None:
    """What the window bounds (per key of an events window under PARTITION BY)."""
    w = plan.query.within
    if w is None:
        return None
    if plan.partition_by and isinstance(w, ast.EventsWindow):
        return PARTITION_KEYS, (f"PARTITION BY {groups_text(plan.partition_by)} with WITHIN"
                                f" {to_text(w)}: each key keeps the partial matches of its own"
                                " last window until it sees more events")
    return WINDOW, (f"WITHIN {to_text(w)}: partial matches"
                    + (" and the attributes the post-filter reads" if _post_filtered(plan) else "")
                    + " older than the window are dropped")


def _engine(plan) -> tuple[str, str]:
    """What this engine keeps (it counts by enumerating its tECS)."""
    win = _window(plan)
    if win is not None:
        return win
    if Method.POST_FILTER in plan.correlation:
        preds = ", ".join(text(s.predicate) for s in _post_filtered(plan))
        return LOG, (f"the post-filtered relaxation keeps every earlier candidate event and the"
                     f" attributes '{preds or 'the predicates between events'}' reads, whatever"
                     " the output")
    if Method.NEXT_MATCH in plan.correlation:
        preds = "', '".join(plan.rewritten.next_match.predicates)
        return LOG, ("the next-match scan keeps every run that has not met its next event, with"
                     f" the values '{preds}' compare, for the whole log")
    if Method.HASH_JOIN in plan.correlation:
        pcea = plan.rewritten.pcea
        preds = "" if pcea is None else " joined on '" + "', '".join(pcea.predicates) + "'"
        return LOG, ("the hash join keeps the partial matches of every join key (and compared"
                     f" value){preds} for the whole log")
    culprit = _pattern_culprit(plan.query.formula)
    if culprit is not None:
        return LOG, (f"its tECS keeps the partial matches of {culprit} for the whole log, also"
                     " when it only counts")
    if plan.partition_by:
        return PARTITION_KEYS, f"one evaluator per key of PARTITION BY {groups_text(plan.partition_by)}"
    return CONSTANT, "a match spans a fixed number of adjacent events"


def _pattern_culprit(f: ast.Formula) -> str | None:
    """A '+' or ';' that lets the engine's partial matches wait for ever, as text."""
    plus = [text(n) for n in subformulas(f) if isinstance(n, ast.Plus)]
    if plus:
        return f"the iteration '{min(plus, key=len)}'"
    seqs = [text(n) for n in subformulas(f) if isinstance(n, ast.Seq) and not n.contiguous]
    if seqs:
        return f"the sequence '{min(seqs, key=len)}'"
    return None


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
        what += (f"; under PARTITION BY {groups_text(partition_by)} until its own key's next event"
                 " past the deadline, so every key keeps the matches of its last window")
    return floor, (f"the trailing absence '!{to_text(query.trailing)} WITHIN"
                   f" {to_text(query.within)}': {what} (without it: {tier})")
