"""Planning: decide once, before any event is read, how a query runs.

The layer that knows every method and engine (the ``meta`` layer of Rust's regex-automata):
``plan(query, schema) -> Plan`` takes a checked query and decides, in this order,

1. **correlation** — how predicates between events are evaluated: the partition rewrite
   (equalities that tie every event become PARTITION BY), else the PCEA hash join (equalities
   in its fragment), else the post-filtered relaxation (``compiler/correlation.py``);
2. **rewriting** — the pure formula passes of ``compiler/rewrite`` (safe form, LP-normal form);
3. **compilation** — the alphabet of atoms and the CEA, marking SELECT's variables and those
   the post-filter reads;
4. **execution** — which executor runs it (``engine.Engine`` over the CEA, or
   ``engine.HashJoinEngine`` over the PCEA), with which window, partitions and strategy;
5. **fan-out** under ``--spark`` (``plan/fanout.py``) and the **memory verdict**
   (``plan/memory.py``, from the bounded-memory criteria).

The ``Plan`` is immutable; ``api``, ``cli``, ``explain`` and ``spark`` read it and none of them
decides any of this again. Engines know nothing of each other or of this layer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

import polars as pl

from cer_cli.compiler.cea import CEA
from cer_cli.compiler.construct import compile_formula
from cer_cli.compiler.correlation import (
    equality_to_partition,
    implied_absence,
    partition_plan,
    predicate_class,
    relax_absence,
    relax_correlation,
    trailing_absence_site,
)
from cer_cli.compiler.correlation import (
    sites as correlation_sites,
)
from cer_cli.compiler.predicates import Alphabet
from cer_cli.compiler.rewrite import PassResult, rewrite
from cer_cli.engine.driver import run_matches
from cer_cli.engine.post_filter import PostFilter
from cer_cli.engine.run import Engine
from cer_cli.events import Match, Schema
from cer_cli.plan.fanout import Fanout, fanout
from cer_cli.query import ast
from cer_cli.query.checks import CheckReport
from cer_cli.query.printer import groups_text, to_text

if TYPE_CHECKING:  # loaded when used: most runs need neither (start-up time, issue #15)
    from cer_cli.engine.pcea import HashJoinEngine

__all__ = ["Plan", "RewriteResult", "PassResult", "PredicateMethod", "plan", "PARTITION",
           "HASH_JOIN", "POST_FILTER"]

#: How predicates between events are evaluated (``Plan.correlation_method``).
PARTITION, HASH_JOIN, POST_FILTER = "partition", "hash join", "post-filter"


@dataclass(frozen=True)
class PredicateMethod:
    """The planner's decision for one predicate between events (one conjunct): the
    ``method`` that evaluates it (``PARTITION``, ``HASH_JOIN``, ``POST_FILTER``), what that
    costs per event, and ``reason``: the predicate's class and why this method — for the
    post-filter, why each other method does not apply. ``explain`` shows these as they are;
    a new method adds its case to ``predicate_methods``, the one place that decides."""

    predicate: str
    method: str
    cost: str
    reason: str


@dataclass(frozen=True)
class RewriteResult:
    """The query after every pass. ``formula`` is None (``unsatisfiable``) when no stream can
    produce a match; ``query`` then keeps the original formula. ``passes`` lists every pass in
    order (the correlation steps first), with what each changed."""

    query: ast.Query
    formula: ast.Formula | None
    passes: tuple[PassResult, ...]
    warnings: tuple[str, ...]
    #: Conjuncts with predicates between events that the automaton does not test
    #: (``compiler.correlation.Site``): joined by ``pcea``, else post-filtered; then the
    #: correlated absences the post-filter checks (``AbsenceSite``).
    post_filters: tuple = ()
    #: The PCEA that evaluates ``post_filters`` as hash joins, and why it does (or why not).
    pcea: object | None = None
    pcea_reason: str | None = None
    #: A trailing ψ's comparisons with the match (``AbsenceSite``), checked by
    #: ``engine.absence`` when a match's deadline passes; None without them.
    trailing: object | None = None

    @property
    def unsatisfiable(self) -> bool:
        return self.formula is None


@dataclass(frozen=True)
class Plan:
    """Everything decided about one query: read it, never re-derive it.

    ``query`` is the query as written (checked against ``schema``); ``rewritten`` the query
    the executor runs. ``executor()`` builds a fresh executor (its own state) for one pass
    over a stream; ``run`` is the shortcut for a frame or a sequence of consecutive frames.
    """

    text: str
    query: ast.Query
    report: CheckReport
    rewritten: RewriteResult
    alphabet: Alphabet
    cea: CEA
    #: The log schema the query was checked against (None without a log).
    schema: Schema | None = None
    #: How predicates between events run (``PARTITION``, ``HASH_JOIN``, ``POST_FILTER``) or None.
    correlation_method: str | None = None
    #: Why that method (for the partition rewrite and the hash join) or why not the hash join
    #: (for the post-filter).
    correlation_reason: str | None = None
    #: The candidates' test when ``correlation_method == POST_FILTER``.
    post_filter: PostFilter | None = None
    #: ``"hash join"`` (the PCEA) or ``"cea"`` (Algorithm 1 over the CEA).
    executor_kind: str = "cea"
    #: How ``cer match --spark`` spreads the query over tasks.
    fanout: Fanout = field(default=None)  # type: ignore[assignment]
    #: Per predicate between events, its method, cost and reason (``predicate_methods``).
    predicate_methods: tuple[PredicateMethod, ...] = ()

    # ------------------------------------------------------------------ derived facts

    @property
    def partition_by(self) -> tuple[tuple[str, ...], ...]:
        """The groups the executor partitions by (the equality rewrite may have added one)."""
        return self.rewritten.query.partition_by

    @property
    def window(self) -> ast.Window | None:
        return self.query.within

    @property
    def projection(self) -> frozenset[str] | None:
        """The variables the automaton marks: SELECT's, plus those the post-filter reads."""
        return cea_projection(self.query, self.post_filter, self.rewritten.trailing)

    @cached_property
    def output_growth(self) -> str | None:
        """Why this query can report exponentially many matches ending at one event (the
        ``+`` responsible, in the rewritten formula), or None when they are polynomially
        many: ``cer match`` warns before such a run, ``cer explain`` shows it."""
        return output_growth(self.query, self.rewritten.formula)

    def memory(self, mode: str = "match"):
        """The memory verdict (``plan.memory.MemoryVerdict``) for an output mode: ``match``,
        ``count`` or ``distinct``."""
        return self._verdicts[mode]

    @cached_property
    def _verdicts(self) -> dict:
        from cer_cli.plan.memory import memory_verdict

        return {m: memory_verdict(self.query, self.rewritten, self.correlation_method, m, self.schema)
                for m in ("match", "count", "distinct")}

    # ------------------------------------------------------------------ running

    def executor(self, open_ends: bool = False, **options) -> Engine | HashJoinEngine:
        """A fresh executor. ``options`` tune the CEA executor (cache size, compaction).
        A trailing absence wraps φ's executor (``engine.absence``); ``open_ends`` makes its
        ``finish`` report the matches whose window outlives the log."""
        q = self.query
        if q.trailing is not None:
            from cer_cli.engine.absence import TrailingAbsence

            inner = replace(self, query=replace(q, trailing=None)).executor(**options)
            psi = self.rewritten.query.trailing  # without the comparisons a partition implies
            site = self.rewritten.trailing
            select = None if q.select is None else frozenset(i.var for i in q.select)
            if site is not None and select is not None:
                # φ's executor keeps the variables ψ reads; the wrapper drops them
                post = self.post_filter
                wide = select | site.match_vars
                inner = replace(self, query=replace(q, trailing=None), post_filter=None if post is None
                                else replace(post, select=wide)).executor(**options)
            return TrailingAbsence(inner, psi, q.within, self.partition_by, q.streams, open_ends,
                                   site, select)
        if self.executor_kind == HASH_JOIN:
            from cer_cli.engine.pcea import HashJoinEngine

            return HashJoinEngine(self.rewritten.pcea, window=q.within, partition_by=self.partition_by,
                                  limit=q.limit, streams=q.streams, strategy=q.strategy)
        return Engine(
            self.cea, self.alphabet, window=q.within, partition_by=self.partition_by,
            strategy=q.strategy, consume=q.consume, limit=q.limit, streams=q.streams,
            post_filter=self.post_filter, report_groups=len(q.partition_by), **options,
        )

    #: The documented API's name for ``executor``.
    engine = executor

    def run(self, frames: pl.DataFrame | Iterable[pl.DataFrame]) -> Iterator[Match]:
        """Matches over one event frame or consecutive frames, in order of their last event."""
        return run_matches(self.executor(), frames)


def cea_projection(query: ast.Query, post: PostFilter | None,
                   trailing=None) -> frozenset[str] | None:
    """SELECT's variables plus those the post-filter and a correlated trailing ψ read."""
    if query.select is None:
        return None
    projection = frozenset(item.var for item in query.select)
    if trailing is not None:
        projection |= trailing.match_vars
    return projection if post is None else projection | post.variables


#: Strategies that report every match ending at an event (docs/language.md); the others
#: keep the greatest one(s) under an order (NEXT, LAST), the maximal ones (MAX) or those
#: without skipped events (STRICT), a number bounded by the choices, not by 2^events.
_EVERY_MATCH = ("ALL", "ANY")


def output_growth(query: ast.Query, formula: ast.Formula | None) -> str | None:
    """Name the ``+`` of ``formula`` through which matches multiply exponentially, if any.

    Matches are distinct (interval, valuation) pairs after SELECT. A ``φ+`` whose iterations
    may skip events and whose body marks a reported variable (``A+ ; B``) lets every subset
    of the candidate events between two ends be a different match: 2^n of them. A
    contiguous ``φ:+`` fixes its events once the interval is fixed (polynomially many
    matches), unless its body itself chooses: a ``;``, a skipping ``+`` or an ``OR`` whose
    branches mark different reported variables. Unreported iterations, strategies other than
    ALL/ANY and a LIMIT in the query bound the output."""
    if formula is None or query.strategy not in _EVERY_MATCH or query.limit is not None:
        return None
    from cer_cli.query import scope
    from cer_cli.query.printer import to_text

    reported = None if query.select is None else frozenset(i.var for i in query.select)

    def marks(f: ast.Formula) -> frozenset[str]:
        found = scope.defines(f)
        return found if reported is None else found & reported

    def chooses(f: ast.Formula) -> bool:
        """Whether a fixed interval leaves ``f`` several reported valuations."""
        for sub in scope.subformulas(f):
            if isinstance(sub, ast.FNot):
                continue
            if isinstance(sub, (ast.Seq, ast.Plus)) and not sub.contiguous and marks(sub):
                return True
            if isinstance(sub, ast.FOr) and not _exclusive(sub) and (
                    marks(sub.left) != marks(sub.right)):
                return True
        return False

    for _, sub in scope.nodes(formula):
        if not isinstance(sub, ast.Plus) or not marks(sub.body):
            continue
        if sub.contiguous and not chooses(sub.body):
            continue
        text = to_text(sub)
        text = text[1:-1] if text.startswith("(") and text.endswith(")") else text
        how = ("its iterations may skip events" if not sub.contiguous
               else "each iteration chooses among events")
        return (f"'{text}' can report exponentially many matches per event (strategy"
                f" {query.strategy}): {how} and their events are reported, so every subset"
                " of the candidate events is a different match")
    return None


def _exclusive(f: ast.FOr) -> bool:
    """Both branches are atoms of different event types: no event takes both."""
    from cer_cli.query import scope

    left, right = scope.atom_type(f.left), scope.atom_type(f.right)
    return left is not None and right is not None and left.label != right.label


def _groups(groups) -> str:
    return groups_text(groups)


_CLASS_TEXT = {
    "equality": "an equality between events",
    "comparison": "a comparison between events",
    "register": "a comparison with the previous iteration of a '+' (a register)",
    "other": "a predicate between events that is neither an equality nor a comparison of"
             " two events' attributes",
}


def predicate_methods(query: ast.Query, method: str | None, sites, pcea, pcea_reason: str | None,
                      partitioned: ast.Query) -> tuple[PredicateMethod, ...]:
    """One ``PredicateMethod`` per predicate between events of ``query``. The methods are
    decided for the whole query (the partition rewrite, else the hash join, else the
    post-filter); this says, predicate by predicate, what that means and why."""
    if method is None:
        return ()
    if method == PARTITION:
        added = [g for g in partitioned.partition_by if g not in query.partition_by]
        why = partition_plan(query)[1]
        cost = ("none: the query runs per key of PARTITION BY " + _groups(added or partitioned.partition_by)
                + ", as a unary query (constant per event)")
        return tuple(PredicateMethod(to_text(c), PARTITION, cost, f"{_CLASS_TEXT['equality']}: {why}")
                     for _, c in correlation_sites(query.formula))
    if method == HASH_JOIN:
        from cer_cli.compiler.pcea import join_cost

        return tuple(PredicateMethod(to_text(s.predicate), HASH_JOIN, join_cost(pcea, s.predicate),
                                     f"{_CLASS_TEXT[predicate_class(s.predicate)]}: {pcea_reason}")
                     for s in sites)
    not_partition = partition_plan(query)[1]
    out = []
    for s in sites:
        kind = predicate_class(s.predicate)
        if kind == "equality":
            why = (f"partition rewrite: no ({not_partition}); hash join: no ({pcea_reason})")
        elif kind == "comparison":
            why = f"ordered index (hash join): no ({pcea_reason})"
        elif kind == "register":
            why = ("the post-filter checks each pair of consecutive events of the iterated"
                   " variable, the later against the earlier (exact); the engine keeps no"
                   " register for it yet")
        else:
            why = "only the post-filter decides it"
        out.append(PredicateMethod(
            to_text(s.predicate), POST_FILTER,
            "per event, every candidate of the relaxed pattern ending there is tested: up to"
            " exponentially more than the matches",
            f"{_CLASS_TEXT[kind]}: {why}"))
    return tuple(out)


def absence_methods(absences, within) -> tuple[PredicateMethod, ...]:
    """One ``PredicateMethod`` per correlated absence (``relax_absence``)."""
    out = []
    for a in absences:
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
        out.append(PredicateMethod(
            f"!({a.etype.label} FILTER {to_text(a.predicate)})", f"{POST_FILTER} ({how})", cost,
            f"a comparison of the absent event with the match that no PARTITION BY key makes"
            f" true: the automaton's gap is free; {left} and {right} (hidden, never reported)"
            " mark the last event before it and the first after it, and a candidate is kept"
            " iff no event strictly between them satisfies ψ with its bindings"))
    return tuple(out)


def trailing_methods(site) -> tuple[PredicateMethod, ...]:
    """The method of a trailing ψ's comparisons with the match (``trailing_absence_site``)."""
    if site is None:
        return ()
    from cer_cli.engine.absence import trailing_method

    how, cost = trailing_method(site)
    return (PredicateMethod(
        f"!({site.etype.label} FILTER {to_text(site.predicate)}) (trailing)",
        f"trailing absence ({how})", cost,
        "a comparison of the absent event with the match that no PARTITION BY key makes true:"
        " each match of φ waits until its deadline passes (every event up to it read), then is"
        " kept iff no event of its partition after its last event and up to the deadline"
        " satisfies ψ with its bindings"),)


def plan(query: ast.Query, schema: Schema | None = None, report: CheckReport | None = None,
         text: str | None = None) -> Plan:
    """Decide how ``query`` (already checked) runs. Raises QueryError for a predicate
    between events that no valuation can decide."""
    passes: list[PassResult] = []
    # 0. correlated absence: comparisons of ψ with the match implied by a partition key
    written = query
    query, implied = implied_absence(query)
    passes.append(PassResult("implied_absence", implied is not None, query.formula, implied))
    trailing = trailing_absence_site(query)
    # 1. correlation: the partition rewrite, else the relaxation (post-filters or hash join)
    partitioned = equality_to_partition(query)
    grew = partitioned.partition_by != query.partition_by
    passes.append(PassResult("equality_to_partition", grew, partitioned.formula,
                             "PARTITION BY " + _groups(partitioned.partition_by) if grew else None))
    relaxed, sites = relax_correlation(partitioned)
    note = f"{len(sites)} predicate(s) between events tested on each candidate" if sites else None
    passes.append(PassResult("relax_correlation", bool(sites), relaxed.formula, note))
    relaxed, absences = relax_absence(relaxed)
    passes.append(PassResult(
        "relax_absence", bool(absences), relaxed.formula,
        f"{len(absences)} absence(s) compared with the match: the gap is free in the automaton,"
        " its bounds are marked, the post-filter checks it" if absences else None))
    # 2. the formula passes
    formula, formula_passes, warnings = rewrite(relaxed.formula, reference=query.formula)
    passes += formula_passes
    rewritten_query = replace(relaxed, formula=query.formula if formula is None else formula)
    pcea = reason = None
    if sites and absences:
        reason = "a correlated absence is checked by the post-filter, which then tests these too"
    elif sites:  # the hash join's planner loads only for predicates between events
        from cer_cli.compiler.pcea import plan_pcea

        pcea, reason = plan_pcea(rewritten_query, formula, sites)
        if pcea is not None:
            n = len(sites)
            what = (f"{n} equalit{'y' if n == 1 else 'ies'}" if not pcea.ordered else
                    f"{n} predicate{'' if n == 1 else 's'}")
            passes[2] = replace(passes[2], note=f"{what} between events joined by the hash join"
                                " (PCEA), not by the automaton")
    rewritten = RewriteResult(rewritten_query, formula, tuple(passes), tuple(warnings),
                              tuple(sites) + absences, pcea, reason, trailing)
    if pcea is not None:
        method = HASH_JOIN
    elif sites:
        method = POST_FILTER
    elif grew:
        method = PARTITION
    else:
        method = None
    why = partition_plan(query)[1] if method == PARTITION else reason
    base = method
    post = None
    if method == POST_FILTER or absences:
        select = None if query.select is None else frozenset(i.var for i in query.select)
        post = PostFilter(tuple(sites) if method == POST_FILTER else (), select, absences)
        method = POST_FILTER
    # 3. compilation
    alphabet = Alphabet.from_formula(formula)
    cea = compile_formula(formula, alphabet, cea_projection(query, post, trailing))
    return Plan(
        text=text if text is not None else "",
        query=written,
        report=report if report is not None else CheckReport((), (), {}, {}),
        rewritten=rewritten,
        alphabet=alphabet,
        cea=cea,
        schema=schema,
        correlation_method=method,
        correlation_reason=why,
        post_filter=post,
        executor_kind=HASH_JOIN if pcea is not None else "cea",
        fanout=fanout(query, rewritten_query.partition_by),
        predicate_methods=predicate_methods(query, base, sites, pcea, reason, partitioned)
        + absence_methods(absences, query.within) + trailing_methods(trailing),
    )
