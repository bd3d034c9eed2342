"""The correlation decision: how each predicate between events is evaluated, decided once.

The planner applies the correlation rules (``RULES``, pure ``Relaxed -> Relaxed`` functions
like ``compiler.rewrite.RULES``) before the formula passes, and the hash join after them
(it needs the rewritten formula):

1. ``implied_absence`` — comparisons of an absent ψ with the match that a partition key
   implies are dropped (ψ is then tested inside the key's events);
2. ``equality_to_partition`` — equalities that tie every event of a match become
   ``PARTITION BY`` (the partition rewrite);
3. ``relax_correlation`` — the other predicates between events leave the automaton;
4. ``relax_absence`` — a gap whose ψ still compares with the match leaves the automaton too
   (the post-filter checks it), and a trailing ψ's comparisons go to ``engine.absence``;
5. ``hash_join`` — the predicates of step 3 run as a PCEA when they are in its fragment (never
   beside an absence: its run trees have no gaps);
6. ``next_match`` — else, a sequence of single events with an absence in every gap, each ψ the
   next event's condition (what ``;>`` writes), runs by the next-match scan, which checks the
   predicates of step 3 and the gaps of step 4 as it follows each run;
7. else the post-filter tests them on each candidate.

A query may use several methods at once (the partition rewrite for its equalities and the
post-filter for an absence): ``Correlation`` lists each method used, with what it evaluates,
why and at what cost, and the method of every predicate. ``explain``, the memory verdict and
the executor read it; nothing decides it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum

from cer_cli.compiler import correlation as rules
from cer_cli.compiler.correlation import AbsenceSite, Site, partition_plan, predicate_class
from cer_cli.compiler.rewrite import PassResult
from cer_cli.engine.absence import trailing_method
from cer_cli.query import ast
from cer_cli.query.printer import groups_text, to_text


class Method(StrEnum):
    """How predicates between events are evaluated (each member is its own text)."""

    PARTITION = "partition"
    HASH_JOIN = "hash join"
    NEXT_MATCH = "next-match scan"
    POST_FILTER = "post-filter"
    TRAILING = "trailing absence"

    @property
    def title(self) -> str:
        """The method's name in ``cer explain``'s correlation lines."""
        return _TITLES[self]


_TITLES = {Method.PARTITION: "partition rewrite", Method.HASH_JOIN: "hash join (PCEA)",
           Method.NEXT_MATCH: "next-match scan", Method.POST_FILTER: "post-filtered relaxation",
           Method.TRAILING: "trailing absence"}


@dataclass(frozen=True)
class PredicateMethod:
    """The decision for one predicate between events (one conjunct, or an absence's
    comparisons with the match): the ``method`` that evaluates it, ``how`` within that
    method when it has variants (``bisect on B.id``), what that costs, and ``reason``: the
    predicate's class and why this method — for the post-filter, why each other method does
    not apply."""

    predicate: str
    method: Method
    cost: str
    reason: str
    how: str | None = None

    @property
    def label(self) -> str:
        """The method as ``cer explain`` shows it: ``post-filter (bisect on B.id)``."""
        return str(self.method) if self.how is None else f"{self.method} ({self.how})"


@dataclass(frozen=True)
class Step:
    """One method the query uses: the predicates it evaluates, how (``detail``), what it
    costs per event, whether a window bounds that, and ``reason``: why this method (the
    partition rewrite, the hash join) or why not the hash join (the post-filter), if said."""

    method: Method
    predicates: tuple[str, ...]
    detail: str
    cost: str
    bounded: bool
    reason: str | None = None


@dataclass(frozen=True)
class Correlation:
    """How a query's predicates between events run: the methods used, in the order they
    apply (``steps``), and each predicate's method (``predicates``). Empty without them."""

    steps: tuple[Step, ...] = ()
    predicates: tuple[PredicateMethod, ...] = ()
    #: The PARTITION BY groups the partition rewrite added (``Method.PARTITION``).
    added: tuple[tuple[str, ...], ...] = ()

    @property
    def methods(self) -> tuple[Method, ...]:
        return tuple(s.method for s in self.steps)

    def __contains__(self, method: object) -> bool:
        return method in self.methods

    def __bool__(self) -> bool:
        return bool(self.steps)

    def step(self, method: Method) -> Step | None:
        return next((s for s in self.steps if s.method == method), None)


# --------------------------------------------------------------------------- the rules


@dataclass(frozen=True)
class Relaxed:
    """The query as the correlation rules leave it, and what they took out of its automaton."""

    query: ast.Query
    #: ``partition_plan`` of the written query, ``(attribute, why)``: computed once, read by
    #: ``implied_absence``, ``equality_to_partition`` and the explanation of both outcomes.
    partition: tuple[str | None, str]
    #: The equalities the partition rewrite dropped and the groups it added.
    equalities: tuple[ast.Predicate, ...] = ()
    added: tuple[tuple[str, ...], ...] = ()
    sites: tuple[Site, ...] = ()
    absences: tuple[AbsenceSite, ...] = ()
    #: A trailing ψ's comparisons with the match, checked by ``engine.absence``.
    trailing: AbsenceSite | None = None
    #: What the last rule changed besides the formula (None: nothing), for ``cer explain``.
    note: str | None = None


Rule = Callable[[Relaxed], Relaxed]


def implied_absence(r: Relaxed) -> Relaxed:
    """Drop the comparisons of an absent ψ with the match that a partition key implies."""
    query, note = rules.implied_absence(r.query, r.partition)
    return replace(r, query=query, note=note)


def equality_to_partition(r: Relaxed) -> Relaxed:
    """Equalities that tie every event of a match become PARTITION BY (the rewrite)."""
    query = rules.equality_to_partition(r.query, r.partition[0])
    added = tuple(g for g in query.partition_by if g not in r.query.partition_by)
    # dropped also when the query already partitions by the key: recorded all the same, so
    # that explain says where they went (they hold within each key)
    dropped = query.formula != r.query.formula
    equalities = tuple(c for _, c in rules.sites(r.query.formula)) if dropped else ()
    note = None
    if added:
        note = "PARTITION BY " + groups_text(query.partition_by)
    elif dropped:
        note = (f"{len(equalities)} equalit{'y' if len(equalities) == 1 else 'ies'} implied by"
                " PARTITION BY " + groups_text(query.partition_by) + " dropped")
    return replace(r, query=query, equalities=equalities, added=added, note=note)


def relax_correlation(r: Relaxed) -> Relaxed:
    """The other predicates between events leave the automaton (``Site``s)."""
    query, sites = rules.relax_correlation(r.query)
    return replace(r, query=query, sites=sites, note=(
        f"{len(sites)} predicate(s) between events leave the automaton" if sites else None))


def relax_absence(r: Relaxed) -> Relaxed:
    """A gap whose ψ compares with the match leaves the automaton (``AbsenceSite``s); a
    trailing ψ's comparisons go to ``engine.absence``."""
    query, absences = rules.relax_absence(r.query)
    return replace(r, query=query, absences=absences,
                   trailing=rules.trailing_absence_site(r.query), note=(
                       f"{len(absences)} absence(s) compared with the match: the gap is free in"
                       " the automaton, its bounds are marked, the post-filter checks it"
                       if absences else None))


RULES: tuple[Rule, ...] = (implied_absence, equality_to_partition, relax_correlation,
                           relax_absence)


def relax(query: ast.Query) -> tuple[Relaxed, list[PassResult]]:
    """Apply ``RULES`` in order: the relaxed query and one ``PassResult`` per rule."""
    r = Relaxed(query, partition_plan(query))
    passes = []
    for rule in RULES:
        r = rule(replace(r, note=None))
        passes.append(PassResult(rule.__name__, r.note is not None, r.query.formula, r.note))
    return r, passes


def hash_join(r: Relaxed, query: ast.Query, formula: ast.Formula | None):
    """The PCEA that joins ``r.sites`` in the rewritten ``query`` (``formula``: after the
    formula passes), or None, and why (not); with the ``PassResult`` to show when it joins."""
    if not r.sites:
        return None, None, None
    if r.absences:
        return None, ("a correlated absence is checked by the post-filter, which then tests"
                      " these too"), None
    if rules.has_absence(formula):
        return None, "the hash join's run trees have no gaps to keep an absence ('!') in", None
    from cer_cli.compiler.pcea import plan_pcea  # loads only for predicates between events

    pcea, reason = plan_pcea(query, formula, r.sites)
    if pcea is None:
        return None, reason, None
    n = len(r.sites)
    what = (f"{n} equalit{'y' if n == 1 else 'ies'}" if not pcea.ordered else
            f"{n} predicate{'' if n == 1 else 's'}")
    return pcea, reason, PassResult(
        "hash_join", True, formula,
        f"{what} between events joined by the hash join (PCEA), not by the automaton")


def next_match(r: Relaxed, query: ast.Query, formula: ast.Formula | None):
    """The ``NextMatch`` that follows the runs of a sequence with an absence in every gap
    (``compiler.next_match``), or None, and why (not); with the ``PassResult`` to show. Tried
    when the hash join does not apply (it takes no query with '!')."""
    if not (r.sites or r.absences) or not rules.has_absence(formula):
        return None, None, None
    from cer_cli.compiler.next_match import plan_next_match  # loads the PCEA's fragment

    nm, reason = plan_next_match(query, formula, r.sites, r.absences)
    if nm is None:
        return None, reason, None
    return nm, reason, PassResult(
        "next_match", True, formula,
        f"{len(nm.predicates)} predicate(s) between events and absence(s) compared with the"
        " match checked by the next-match scan, not by the automaton")


# --------------------------------------------------------------------------- the decision


def decide(query: ast.Query, r: Relaxed, pcea, join_reason: str | None, post,
           scan=None, scan_reason: str | None = None) -> Correlation:
    """The methods ``query`` (as written) uses, in the order they apply, from the rules'
    outcome ``r``, the hash join's ``pcea`` (or None, and ``join_reason`` why), the
    next-match ``scan`` (or None, and ``scan_reason`` why) and the post-filter ``post``. A
    new method adds its step here: nothing else decides."""
    uses = []
    if r.equalities:
        uses.append(_partition(r))
    if pcea is not None:
        uses.append(_hash_join(r, pcea, join_reason, query.within))
    if scan is not None:
        uses.append(_next_match(r, scan, query.within))
    if post is not None:
        uses.append(_post_filter(r, post, join_reason, query.within))
    if r.trailing is not None:
        uses.append(_trailing_step(r.trailing))
    return Correlation(tuple(step for step, _ in uses),
                       tuple(p for _, preds in uses for p in preds), r.added)


Use = tuple[Step, list[PredicateMethod]]


def _partition(r: Relaxed) -> Use:
    why, shown = r.partition[1], groups_text(r.added or r.query.partition_by)
    done = (f"the equalities become PARTITION BY {shown}" if r.added else
            f"the query's PARTITION BY {shown} implies the equalities: dropped")
    return Step(
        Method.PARTITION, tuple(to_text(c) for c in r.equalities), f"{why}: {done}",
        "as the query without them, evaluated per key: constant per event", True, why,
    ), [PredicateMethod(to_text(c), Method.PARTITION, f"none: the query runs per key of"
                        f" PARTITION BY {shown}, as a unary query (constant per event)",
                        f"{_CLASS_TEXT['equality']}: {why}") for c in r.equalities]


def _hash_join(r: Relaxed, pcea, why: str | None, within: ast.Window | None) -> Use:
    from cer_cli.compiler.pcea import join_cost, pcea_cost

    return Step(
        Method.HASH_JOIN, tuple(pcea.predicates),
        "the engine runs this PCEA, not the CEA above (which lacks the predicates between"
        " events): " + " | ".join(pcea.describe()),
        pcea_cost(pcea, within) + ("; memory: the runs within the window" if within is not None
                                   else "; no WITHIN: exact, but memory grows with the partial"
                                   " matches per join key"),
        within is not None, why,
    ), [PredicateMethod(to_text(s.predicate), Method.HASH_JOIN, join_cost(pcea, s.predicate),
                        f"{_CLASS_TEXT[predicate_class(s.predicate)]}: {why}") for s in r.sites]


def _next_match(r: Relaxed, nm, within: ast.Window | None) -> Use:
    one = nm.deterministic
    per = ("each gap's ψ is what the next step asks for, so a run takes the first such event:"
           " one per step, and each first event starts at most one match" if one else
           "a run takes every event of the next step before the first one that satisfies the"
           " gap's ψ")
    cost = ("per run, the events of its partition scanned in its gaps (at most the window's),"
            " plus the matches" + ("; memory: the runs still scanning, those started within"
                                   " the window" if within is not None else
                                   "; no WITHIN: a run that never finds its next event waits"
                                   " for the whole log (cer match refuses it without"
                                   " --allow-unbounded)"))
    step = Step(
        Method.NEXT_MATCH, nm.predicates,
        "the query is one sequence of single events with an absence in every gap: one run per"
        " event taking the first step follows its partition's events, taking the next step's"
        " events that satisfy its predicates between events, until the first event that"
        f" satisfies the gap's ψ with the run's bindings, or the window, ends the gap ({per});"
        " the engine runs this, not the CEA above: " + nm.describe(),
        cost, within is not None,
        "the hash join takes no query with '!'")
    why = "checked when a run takes the later of its two events"
    return step, ([PredicateMethod(to_text(s.predicate), Method.NEXT_MATCH, cost,
                                   f"{_CLASS_TEXT[predicate_class(s.predicate)]}: {why}")
                   for s in r.sites]
                  + [PredicateMethod(absent_text(a), Method.NEXT_MATCH, cost,
                                     "a comparison of the absent event with the match: the"
                                     " first event that satisfies it ends the run's scan of"
                                     " the gap", "scan of the gap") for a in r.absences])


def _post_filter(r: Relaxed, post, not_joined: str | None, within: ast.Window | None) -> Use:
    why_not = not_joined if post.sites else None  # an absence alone: the hash join never applied
    return Step(
        Method.POST_FILTER, tuple(post.describe()),
        "the automaton accepts the pattern without these predicates (binding their"
        " variables); every candidate ending at an event is enumerated and kept iff they"
        " hold for every combination of the events of their variables, before SELECT,"
        " strategy, LIMIT and CONSUME BY" + (f" (no hash join: {why_not})" if why_not else ""),
        "per event, the number of candidates ending there, which can be exponentially"
        " larger than the number of matches"
        + ("; the window bounds it" if within is not None else
           "; without WITHIN it grows with the log (cer match refuses it without"
           " --allow-unbounded)"),
        within is not None, why_not,
    ), ([_post_filtered(s, r.partition[1], not_joined) for s in post.sites]
        + [_absence(a, within) for a in post.absences])


def _trailing_step(site: AbsenceSite) -> Use:
    method = _trailing(site)
    return Step(
        Method.TRAILING, (absent_text(site),),
        "each match of φ waits until its deadline passes (every event up to it read), then"
        " is kept iff no event of its partition after its last event and up to the"
        " deadline satisfies ψ with its bindings", method.cost, True,
    ), [method]


def absent_text(a: AbsenceSite) -> str:
    """An absence's comparisons with the match: ``!(B FILTER (b.v > a.v))``."""
    return f"!({a.etype.label} FILTER {to_text(a.predicate)})"


_CLASS_TEXT = {
    "equality": "an equality between events",
    "comparison": "a comparison between events",
    "register": "a comparison with the previous iteration of a '+' (a register)",
    "other": "a predicate between events that is neither an equality nor a comparison of"
             " two events' attributes",
}


def _post_filtered(s: Site, not_partition: str, not_joined: str | None) -> PredicateMethod:
    """A conjunct the post-filter tests, with why neither the partition rewrite nor the
    hash join (nor its ordered index) takes it."""
    kind = predicate_class(s.predicate)
    if kind == "equality":
        why = f"partition rewrite: no ({not_partition}); hash join: no ({not_joined})"
    elif kind == "comparison":
        why = f"ordered index (hash join): no ({not_joined})"
    elif kind == "register":
        why = ("the post-filter checks each pair of consecutive events of the iterated"
               " variable, the later against the earlier (exact); the engine keeps no"
               " register for it yet")
    else:
        why = "only the post-filter decides it"
    return PredicateMethod(
        to_text(s.predicate), Method.POST_FILTER,
        "per event, every candidate of the relaxed pattern ending there is tested: up to"
        " exponentially more than the matches", f"{_CLASS_TEXT[kind]}: {why}")


def _absence(a: AbsenceSite, within: ast.Window | None) -> PredicateMethod:
    """A correlated absence between ``;`` (``relax_absence``), checked by the post-filter."""
    left, right = a.bounds
    if a.method == "bisect":
        cost = ("per candidate O(log n): the first ψ event after its gap's start with its"
                " value, found in ψ's events sorted by (partition, value, position);"
                " n: the events kept for the candidates")
        how = f"bisect on {a.etype.label}.{a.key[0].attr}"
    else:
        cost = ("per candidate, every ψ event in its gap is tested: O(events in the gap)"
                + (", which the window bounds" if within is not None else
                   "; without WITHIN the gaps grow with the log"))
        how = "scan of the gap"
    return PredicateMethod(
        absent_text(a), Method.POST_FILTER, cost,
        "a comparison of the absent event with the match that no PARTITION BY key makes"
        f" true: the automaton's gap is free; {left} and {right} (hidden, never reported)"
        " mark the last event before it and the first after it, and a candidate is kept"
        " iff no event strictly between them satisfies ψ with its bindings", how)


def _trailing(site: AbsenceSite) -> PredicateMethod:
    """A trailing ψ's comparisons with the match (``trailing_absence_site``)."""
    how, cost = trailing_method(site)
    return PredicateMethod(
        absent_text(site) + " (trailing)", Method.TRAILING, cost,
        "a comparison of the absent event with the match that no PARTITION BY key makes true:"
        " each match of φ waits until its deadline passes (every event up to it read), then is"
        " kept iff no event of its partition after its last event and up to the deadline"
        " satisfies ψ with its bindings", how)
