"""Planning: decide once, before any event is read, how a query runs.

The layer that knows every method and engine (the ``meta`` layer of Rust's regex-automata):
``plan(query, schema) -> Plan`` takes a checked query and decides, in this order,

1. **correlation** — how predicates between events are evaluated: the partition rewrite
   (equalities that tie every event become PARTITION BY), else the PCEA hash join (equalities
   in its fragment), else the next-match scan (a next-match sequence: an absence in every gap),
   else the post-filtered relaxation; a correlated absence by the next-match scan, the
   post-filter or, trailing, by ``engine.absence`` (``plan/correlation.py``: one ``Correlation``);
2. **rewriting** — the pure formula passes of ``compiler/rewrite`` (safe form, LP-normal form);
3. **compilation** — the alphabet of atoms and the CEA, marking SELECT's variables and those
   the post-filter reads;
4. **execution** — which executor runs it (``engine.Engine`` over the CEA,
   ``engine.HashJoinEngine`` over the PCEA, or ``engine.next_match.NextMatchScan``), with which
   window, partitions and strategy;
5. **fan-out** under ``--spark`` (``plan/fanout.py``) and the **memory verdict**
   (``plan/memory/``, from the bounded-memory criteria).

The ``Plan`` is immutable; ``api``, ``cli``, ``explain`` and ``spark`` read it and none of them
decides any of this again: also not whether a run without a window is refused
(``unbounded``), what the output keeps of the log (``output_window``) or what ``cer match``
warns of (``memory_warning``, ``growth_warning``). Engines know nothing of each other or of
this layer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields, is_dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING

import polars as pl

from cer_cli.compiler.cea import CEA
from cer_cli.compiler.construct import compile_formula
from cer_cli.compiler.predicates import Alphabet
from cer_cli.compiler.rewrite import PassResult, rewrite
from cer_cli.engine.driver import run_matches
from cer_cli.engine.executor import prepare_frame
from cer_cli.engine.post_filter import PostFilter
from cer_cli.engine.run import Engine
from cer_cli.events import POS, STREAM, TIME, Match, Schema
from cer_cli.plan.correlation import (
    Correlation,
    Method,
    PredicateMethod,
    decide,
    hash_join,
    next_match,
    relax,
)
from cer_cli.plan.fanout import Fanout, fanout
from cer_cli.query import ast
from cer_cli.query.checks import CheckReport
from cer_cli.query.errors import QueryError
from cer_cli.query.scope import attr_refs

if TYPE_CHECKING:  # loaded when used: most runs need neither (start-up time, issue #15)
    from cer_cli.engine.pcea import HashJoinEngine

__all__ = ["Plan", "RewriteResult", "PassResult", "Correlation", "Method", "PredicateMethod",
           "OutputWindow", "plan"]



def read_attributes(query: ast.Query) -> frozenset[str]:
    """The log columns evaluating ``query`` reads besides the type, time and stream: the
    attributes its predicates, PARTITION BY and window name. A reader may leave the other
    columns unread (Spark's column pruning); an output reads them from the log."""
    names = {r.attr for r in attr_refs(query)}
    names.update(a for group in query.partition_by for a in group)
    if isinstance(query.within, ast.AttributeWindow):
        names.add(query.within.attr)
    return frozenset(names)

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
    #: The ``compiler.next_match.NextMatch`` that the next-match scan follows (a sequence
    #: with an absence in every gap), when it evaluates ``post_filters``.
    next_match: object | None = None

    @property
    def unsatisfiable(self) -> bool:
        return self.formula is None


@dataclass(frozen=True)
class KeyWindow:
    """``PARTITION BY … WITHIN count EVENTS``: a match spans at most ``count`` events of its
    partition's stream (the events of ``streams`` that have a key in every group of
    ``partition_by``: ``engine.executor.prepare_frame``), however far apart in the log.
    ``horizon`` (column, bound) instead of ``count``: a match's events lie within ``bound``
    of that column before its partition's latest value so far (a trailing absence's, under a
    time window)."""

    count: int | None
    streams: frozenset[str] | None
    partition_by: tuple[tuple[str, ...], ...]
    horizon: tuple[str, float] | None = None

    def keyed(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The frame's events that are in a partition: their position and one key column
        per group (``__cer_key_0`` …), as the executors key them."""
        keys = "__cer_key_"
        need = {POS, STREAM, *(a for group in self.partition_by for a in group)}
        prepared, _ = prepare_frame(frame.select(c for c in frame.columns if c in need),
                                    self.streams, self.partition_by, None, None,
                                    keys, keys + "t")
        if not self.partition_by:  # FROM without PARTITION BY: one stream, one key
            return prepared.select(POS, pl.lit(0, pl.Int8).alias(f"{keys}0"))
        return prepared.select(POS, *(f"{keys}{i}" for i in range(len(self.partition_by))))


@dataclass(frozen=True)
class OutputWindow:
    """What the writers keep of the log to print a match's events (``io.write.EventLookup``):
    the last ``events`` events, or those whose column ``horizon[0]`` lies within
    ``horizon[1]`` of the newest, or per key the last events ``per_key`` says; none of them:
    every event."""

    events: int | None = None
    horizon: tuple[str, float] | None = None
    per_key: KeyWindow | None = None
    #: ``horizon`` counts back from the newest frame's predecessor's last value rather than
    #: from the newest frame's first: a trailing absence's match ends at the first event
    #: past its deadline, however long after its window
    lagged: bool = False


#: ``cer match`` does not warn of exponentially many matches under ``WITHIN n EVENTS`` with
#: n at most this: at most 2^n matches end at an event.
SMALL_WINDOW = 16


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
    #: How predicates between events run: the methods used and each predicate's method.
    correlation: Correlation = Correlation()
    #: The candidates' test when ``Method.POST_FILTER in correlation``.
    post_filter: PostFilter | None = None
    #: How ``cer match --spark`` spreads the query over tasks.
    fanout: Fanout = field(default=None)  # type: ignore[assignment]
    #: The name the query's diagnostics carry (``query.errors.query_name``): its file,
    #: ``<stdin>`` or ``<expr>``; None for a query without one.
    filename: str | None = None

    # ------------------------------------------------------------------ derived facts

    @property
    def partition_by(self) -> tuple[tuple[str, ...], ...]:
        """The groups the executor partitions by (the equality rewrite may have added one)."""
        return self.rewritten.query.partition_by

    @property
    def window(self) -> ast.Window | None:
        return self.query.within

    @property
    def read_columns(self) -> frozenset[str]:
        """The log columns a run reads besides type, time and stream (``read_attributes``
        of the query and of the partitions the equality rewrite added)."""
        return read_attributes(self.query) | {a for g in self.partition_by for a in g}

    @property
    def executor_kind(self) -> str:
        """``"hash join"`` (the PCEA), ``"next-match scan"`` or ``"cea"`` (Algorithm 1 over
        the CEA)."""
        for method in (Method.HASH_JOIN, Method.NEXT_MATCH):
            if method in self.correlation:
                return method
        return "cea"

    @cached_property
    def columns_read(self) -> frozenset[str]:
        """The log attributes evaluation reads: its predicates' (``x[a]``, ``PREV``), the
        PARTITION BY groups and an attribute window's, in the query as written and as
        rewritten. A run that outputs no event (``--count``) reads only these of the logs'
        columns, besides their type and time columns (``EventLog.reading``)."""
        names: set[str] = set()
        for q in (self.query, self.rewritten.query):
            names.update(a.attr for a in _attr_refs(q))
            names.update(c for group in q.partition_by for c in group)
            if isinstance(q.within, ast.AttributeWindow):
                names.add(q.within.attr)
        return frozenset(names)

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

        return {m: memory_verdict(self, m) for m in ("match", "count", "distinct")}

    def memory_warning(self, n_events: int, count: bool = False) -> str | None:
        """The warning for a run over ``n_events`` events whose memory grows (with the log or
        with keys): the verdict of the mode run (``count``: ``--count``), or what this engine
        keeps when that is more; None when the run's memory is bounded."""
        from cer_cli.plan.memory import CONSTANT, WINDOW

        v = self.memory("count" if count else "match")
        if v.effective in (CONSTANT, WINDOW):
            return None
        reason = v.engine_reason if v.engine else v.reason
        return (f"memory {v.effective} on this {n_events:,}-event log: {reason}"
                + ("" if self.query.within is not None else "; add a WITHIN window to bound it"))

    @property
    def growth_warning(self) -> str | None:
        """``output_growth`` when enumerating the matches may explode: not under ``WITHIN n
        EVENTS`` with n ≤ ``SMALL_WINDOW`` (at most 2^n matches per event)."""
        w = self.query.within
        if isinstance(w, ast.EventsWindow) and w.count <= SMALL_WINDOW:
            return None
        return self.output_growth

    @property
    def choice_cost(self) -> str | None:
        """Why SELECT NEXT / LAST / MAX / STRICT costs time per event that grows with the log:
        the strategy chooses among the matches ending at each event by enumerating them
        (``engine.strategies``), and with no WITHIN window a ``;`` or ``+`` that skips lets
        them start at any earlier event — ``A ; B ; C`` with the square of the log's length,
        while the output stays small. ``cer match`` warns before such a run."""
        from cer_cli.query import scope

        q, f = self.query, self.rewritten.formula
        if q.strategy in _EVERY_MATCH or q.within is not None or f is None:
            return None
        skips = next((s for s in scope.subformulas(f)
                      if isinstance(s, (ast.Seq, ast.Plus)) and not s.contiguous), None)
        if skips is None:
            return None
        from cer_cli.query.printer import to_text

        return (f"SELECT {q.strategy} chooses among the matches ending at each event by"
                " enumerating them all, and with no WITHIN window "
                f"'{to_text(skips)}' lets them start at any earlier event: the time per event"
                " grows with the log")

    def unbounded(self) -> QueryError | None:
        """Why the cost and memory of a run grow with the log for want of a window: a key
        the hash join carries (every value seen stays live), or predicates between events
        the post-filter tests on candidates that may combine any earlier events. ``cer
        match`` raises it (exit 2) unless ``--allow-unbounded``; None when bounded."""
        if self.query.within is not None:
            return None
        hints = ["add a window (WITHIN 10 minutes, WITHIN 100 EVENTS), or pass --allow-unbounded"]
        pcea = self.rewritten.pcea
        if pcea is not None and pcea.carries:
            step = next(s for s in pcea.states if s.carried)
            return QueryError(
                f"'{step.step.text()}' carries {', '.join(r for _, r in step.carried)} to a"
                " later equality and the query has no WITHIN window: each such event adopts the"
                " partial matches of every value seen so far, so the cost and memory grow with"
                " the log", self.rewritten.post_filters[0].predicate.span, self.text, hints,
                self.filename)
        nm = self.rewritten.next_match
        if nm is not None:
            return QueryError(
                f"'{nm.predicates[0]}' is checked by the next-match scan and the query has no"
                " WITHIN window: a run that never meets its next event waits"
                " for the whole log, so the cost and memory grow with the log",
                self.rewritten.post_filters[0].predicate.span, self.text, hints,
                self.filename)
        post = self.post_filter
        if post is None:
            return None
        return QueryError(
            f"'{post.describe()[0]}' is a predicate between events and the query has no WITHIN"
            " window: each match is found by testing candidates that may combine any earlier"
            " events, so the cost and memory grow with the log",
            (post.sites + post.absences)[0].predicate.span, self.text,
            hints + ["equalities on one attribute that tie every event become a cheap PARTITION"
                     " BY; see `cer explain`"], self.filename)

    @property
    def output_window(self) -> OutputWindow:
        """How much of the log the output must keep to print a match's events: the query's
        window bounds it (positions for EVENTS without partitions, each key's last events
        with them, time otherwise)."""
        w = self.query.within
        streams = None if self.query.streams is None else frozenset(self.query.streams)
        # A trailing absence reports a match at the first event of its partition past the
        # deadline (the match's end), any time after its window: a match still to come
        # began within the window before its partition's latest event so far.
        trailing = self.query.trailing is not None
        if isinstance(w, ast.EventsWindow) and not self.query.partition_by and streams is None:
            return OutputWindow(events=w.count + trailing)
        if isinstance(w, ast.EventsWindow):  # the n events of a key, or of FROM's streams
            return OutputWindow(per_key=KeyWindow(w.count + trailing, streams, self.partition_by))
        if trailing and isinstance(w, (ast.DurationWindow, ast.AttributeWindow)):
            horizon = ((TIME, w.nanoseconds) if isinstance(w, ast.DurationWindow)
                       else (w.attr, w.amount))
            if self.query.partition_by or streams is not None:
                # the latest event of a key (or of FROM's streams) may be far back in the log
                return OutputWindow(per_key=KeyWindow(None, streams, self.partition_by, horizon))
            return OutputWindow(horizon=horizon, lagged=True)
        if isinstance(w, ast.DurationWindow):
            return OutputWindow(horizon=(TIME, w.nanoseconds))
        if isinstance(w, ast.AttributeWindow):
            return OutputWindow(horizon=(w.attr, w.amount))
        return OutputWindow()

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
        if Method.NEXT_MATCH in self.correlation:
            from cer_cli.engine.next_match import NextMatchScan

            return NextMatchScan(self.rewritten.next_match, window=q.within,
                                 partition_by=self.partition_by, limit=q.limit,
                                 streams=q.streams, strategy=q.strategy)
        if Method.HASH_JOIN in self.correlation:
            from cer_cli.engine.pcea import HashJoinEngine

            return HashJoinEngine(self.rewritten.pcea, window=q.within, partition_by=self.partition_by,
                                  limit=q.limit, streams=q.streams, strategy=q.strategy)
        return Engine(
            self.cea, self.alphabet, window=q.within, partition_by=self.partition_by,
            strategy=q.strategy, consume=q.consume, limit=q.limit, streams=q.streams,
            post_filter=self.post_filter, report_groups=len(q.partition_by), **options,
        )

    def engine(self, **options) -> Engine | HashJoinEngine:
        """Deprecated: the former name of ``executor`` (README, "Python API")."""
        import warnings

        warnings.warn("Plan.engine() is deprecated: use Plan.executor()", DeprecationWarning,
                      stacklevel=2)
        return self.executor(**options)

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


def plan(query: ast.Query, schema: Schema | None = None, report: CheckReport | None = None,
         text: str | None = None, filename: str | None = None) -> Plan:
    """Decide how ``query`` (already checked) runs. Raises QueryError for a predicate
    between events that no valuation can decide."""
    # 1. correlation: the rules before the formula passes (plan/correlation.py)
    relaxed, passes = relax(query)
    # 2. the formula passes
    formula, formula_passes, warnings = rewrite(relaxed.query.formula, reference=query.formula)
    passes += formula_passes
    rewritten_query = replace(relaxed.query, formula=query.formula if formula is None else formula)
    # ... and the hash join, which needs the rewritten formula
    pcea, reason, joined = hash_join(relaxed, rewritten_query, formula)
    if joined is not None:
        passes.append(joined)
    # ... or the next-match scan, for a sequence with an absence in every gap
    scan, scan_reason, scanned = (None, None, None) if pcea is not None else next_match(
        relaxed, rewritten_query, formula)
    if scanned is not None:
        passes.append(scanned)
    rewritten = RewriteResult(rewritten_query, formula, tuple(passes), tuple(warnings),
                              relaxed.sites + relaxed.absences, pcea, reason, relaxed.trailing,
                              scan)
    post = None
    if scan is None and ((relaxed.sites and pcea is None) or relaxed.absences):
        select = None if query.select is None else frozenset(i.var for i in query.select)
        post = PostFilter(relaxed.sites if pcea is None else (), select, relaxed.absences)
    # 3. compilation
    alphabet = Alphabet.from_formula(formula)
    cea = compile_formula(formula, alphabet, cea_projection(query, post, relaxed.trailing))
    return Plan(
        text=text if text is not None else "",
        query=query,
        report=report if report is not None else CheckReport((), (), {}, {}),
        rewritten=rewritten,
        alphabet=alphabet,
        cea=cea,
        schema=schema,
        correlation=decide(query, relaxed, pcea, reason, post, scan, scan_reason),
        post_filter=post,
        fanout=fanout(query, rewritten_query.partition_by),
        filename=filename,
    )


def _attr_refs(node) -> Iterator[ast.AttrRef]:
    """Every ``x[a]`` (and ``PREV(x).a``) anywhere under a query's node."""
    if isinstance(node, ast.AttrRef):
        yield node
    elif isinstance(node, (tuple, list)):
        for item in node:
            yield from _attr_refs(item)
    elif is_dataclass(node) and not isinstance(node, type):
        for f in fields(node):
            yield from _attr_refs(getattr(node, f.name))
