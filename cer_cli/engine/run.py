"""The engine: a compiled query run over time-ordered event frames (CORE §4, Algorithm 1–2).

``Engine`` owns everything that persists across batches: the lazy det-automaton, the tECS
node arrays, and one Algorithm-1 table per PARTITION BY key. ``run(frame)`` does the
column-wise work with polars first — FROM filtering, partition key ids, window times, and
the event symbols (``Alphabet.symbols``) — and then runs a small per-event loop:

1. advance the event's partition (``evaluate.advance``), pruning by the window;
2. enumerate the windowed complex events ending at the event from the final det-states
   (``enumerate.py``), apply the selection strategy and LIMIT (``strategies.py``);
3. apply CONSUME BY (forget partial matches of every partition, or of this one);
4. every so often, compact the tECS (``TECS.compact``) so that windowed queries run in
   memory bounded by the window rather than the log.

Per-event cost is constant for a fixed query plus the size of the reported matches (with
a strategy, of all windowed matches ending at the event). Feeding several frames one after
another gives the same matches as feeding their concatenation.

``run_query`` composes the compiler (rewrite → construct → alphabet) with the engine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from cer_cli.compiler.cea import CEA
from cer_cli.compiler.construct import compile_formula
from cer_cli.compiler.determinize import LazyDFA
from cer_cli.compiler.predicates import Alphabet
from cer_cli.compiler.rewrite import rewrite
from cer_cli.engine import kernel as K
from cer_cli.engine.enumerate import enumerate_latest_first, enumerate_window, events_of
from cer_cli.engine.evaluate import Table, advance
from cer_cli.engine.strategies import STRATEGY_COST, select
from cer_cli.engine.tecs import NO_WINDOW, TECS
from cer_cli.events import POS, STREAM, TIME, Match, MatchBatch, as_batches, as_matches
from cer_cli.query import ast
from cer_cli.query.errors import QueryError

_KEY = "__cer_engine_key"
_WTIME = "__cer_engine_time"
_SYM = "__cer_engine_sym"
MIN_COMPACT = 4096
#: Use the compiled kernel (``kernel.py``) where it applies; ``CER_KERNEL=0`` turns it off,
#: ``CER_KERNEL=1`` forces it on even without numba (then it runs as plain Python).
KERNEL_DEFAULT = os.environ.get("CER_KERNEL", "1" if K.HAVE_NUMBA else "0") != "0"


def prepare_frame(
    frame: pl.DataFrame, streams, partition_by, window: ast.Window | None, last_time,
    key: str, wtime: str,
) -> tuple[pl.DataFrame, float]:
    """The column-wise work every engine does first: FROM, one column ``key{i}`` per
    PARTITION BY group (events without a key are dropped), and the window time ``wtime``
    checked to be ordered (also against ``last_time``, the previous frame's last time).
    A NaN time is no time: such an event can neither start nor end a windowed match.
    Returns the frame and the new ``last_time``."""
    if streams is not None:
        frame = frame.filter(pl.col(STREAM).is_in(list(streams)))
    if partition_by:
        exprs = []
        for i, group in enumerate(partition_by):
            present = [pl.col(a) for a in group if a in frame.columns]
            exprs.append((pl.coalesce(present) if present else pl.lit(None)).alias(f"{key}{i}"))
        frame = frame.with_columns(exprs).drop_nulls([f"{key}{i}" for i in range(len(exprs))])
    w = window
    if isinstance(w, ast.DurationWindow):
        if frame.height and frame[TIME].null_count():
            raise QueryError("WITHIN with a duration needs a time column in the log", w.span)
        frame = frame.with_columns(pl.col(TIME).alias(wtime))
    elif isinstance(w, ast.AttributeWindow):
        if w.attr not in frame.columns:
            raise QueryError(f"WITHIN {w.amount} [{w.attr}]: no attribute {w.attr!r} in the log", w.span)
        frame = frame.with_columns(pl.col(w.attr).alias(wtime))
    if isinstance(w, ast.DurationWindow | ast.AttributeWindow):
        if frame[wtime].dtype.is_float():
            frame = frame.with_columns(pl.col(wtime).fill_nan(None))
        times = frame[wtime].drop_nulls()
        if times.len():
            if (times.diff().drop_nulls() < 0).any() or times[0] < last_time:
                raise QueryError("WITHIN needs events ordered by their window time; the log is not", w.span)
            last_time = times[-1]
    return frame, last_time


def window_bound(w: ast.Window | None) -> float | None:
    """The window's bound in its own unit (events, nanoseconds, attribute units)."""
    if isinstance(w, ast.EventsWindow):
        return w.count
    if isinstance(w, ast.DurationWindow):
        return w.nanoseconds
    if isinstance(w, ast.AttributeWindow):
        return w.amount
    return None


def window_text(w: ast.Window | None, kept: str) -> str:
    """The window as ``describe`` prints it; ``kept`` names what lives until it closes."""
    if w is None:
        return f"no window: {kept} are kept for the whole log"
    if isinstance(w, ast.EventsWindow):
        return f"window {w.count} events (positions in the partition's stream)"
    if isinstance(w, ast.DurationWindow):
        return f"window {w.nanoseconds} ns of event time"
    return f"window {w.amount} of attribute {w.attr}"


@dataclass
class _Partition:
    """Algorithm-1 state of one sub-stream: its table and how many events it has seen."""

    key: tuple | None
    table: Table = field(default_factory=dict)
    count: int = 0


@dataclass(frozen=True)
class EngineStats:
    events: int
    matches: int
    partitions: int
    live_nodes: int
    allocated_nodes: int
    compactions: int
    peak_live_nodes: int
    det_states: int
    det_transitions: int
    det_cache_hits: int
    det_cache_resets: int


class Engine:
    """Evaluate a CEA over event frames, with window, partitions, strategy, consumption, limit.

    ``alphabet`` needs ``symbols(frame) -> (symbol ids, masks)``: one id per row and the
    atom bit mask of each id. ``window`` is an AST window (or ``None``), ``partition_by``
    the bracket groups of alternative attribute names, ``streams`` the FROM list.
    ``cache_limit`` bounds the det-automaton's transition cache; the tECS is compacted when
    it holds more than ``max(compact_min, 2 × nodes live after the last compaction)`` nodes.
    """

    def __init__(
        self,
        cea: CEA,
        alphabet,
        window: ast.Window | None = None,
        partition_by: tuple[tuple[str, ...], ...] = (),
        strategy: str = "ALL",
        consume: str = "NONE",
        limit: int | None = None,
        streams: tuple[str, ...] | None = None,
        cache_limit: int = 100_000,
        compact_min: int = MIN_COMPACT,
        post_filter=None,
        report_groups: int | None = None,
        kernel: bool | None = None,
    ) -> None:
        if strategy not in ast.STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}")
        if consume not in ast.CONSUME_POLICIES:
            raise ValueError(f"unknown CONSUME BY policy {consume!r}")
        self.dfa = LazyDFA(cea, cache_limit)
        self.alphabet = alphabet
        self.window = window
        self.partition_by = partition_by
        self.strategy = strategy
        self.consume = consume
        self.limit = limit
        self.streams = streams
        self.tecs = TECS()
        self._bound = window_bound(window)
        self._parts: dict[int, _Partition] = {}
        self._key_ids: dict[tuple, int] = {}
        self._last_time: float = NO_WINDOW
        self._now: float = NO_WINDOW
        self._compact_min = compact_min
        self._next_compact = compact_min
        self._events = 0
        self._matches = 0
        self._peak = 0
        #: Correlation post-filter (``cer_cli.compiler.correlation.PostFilter``): candidates
        #: are tested, projected to its ``select`` and de-duplicated before strategy/LIMIT.
        self.post = post_filter
        #: How many leading PARTITION BY groups a match reports (the rest were added by the
        #: equality rewrite); ``None``: all.
        self.report_groups = report_groups
        self._rows: dict[int, dict] = {}
        self._row_meta: dict[int, tuple[int, float]] = {}
        self._next_prune = compact_min
        #: The compiled kernel covers strategies ALL/ANY without LIMIT and without a
        #: correlation post-filter (any window, partitions, FROM, CONSUME BY); the rest runs
        #: the Python loop below. Chosen once: an engine never switches between the two.
        self.kernel = (KERNEL_DEFAULT if kernel is None else kernel) and (
            strategy in ("ALL", "ANY") and limit is None and post_filter is None
        )
        self._k: K.KernelState | None = None

    # ------------------------------------------------------------------ description

    def describe(self) -> str:
        """How this engine evaluates, and what it costs (printed by ``cer explain``)."""
        window = window_text(self.window, "partial matches")
        parts = (
            "one evaluator per PARTITION BY key " + ", ".join("[" + ", ".join(g) + "]" for g in self.partition_by)
            if self.partition_by
            else "a single evaluator"
        )
        update = (
            "constant per event for the relaxed pattern, plus every candidate ending at the"
            " event (tested against the predicates between events)"
            if self.post is not None
            else "constant per event for the query"
        )
        return "\n".join(
            [
                "engine: CORE Algorithm 1 over a lazily I/O-determinised CEA, tECS with "
                "union-lists, windowed enumeration (Algorithm 2)",
                f"  update: {update}; {window}",
                f"  partitions: {parts}",
                f"  strategy {self.strategy}: {STRATEGY_COST[self.strategy]}",
                f"  consume by {self.consume}; limit {self.limit if self.limit is not None else 'none'}"
                + (" per triggering event, latest start first" if self.limit is not None else ""),
                f"  det-automaton cache: {self.dfa.cache_limit} transitions, cleared when full",
            ]
        )

    @property
    def stats(self) -> EngineStats:
        d = self.dfa.stats
        k = self._k
        if k is not None:
            st = k.st
            return EngineStats(
                int(st[K.EVENTS]),
                int(st[K.MATCHES]),
                int((k.pcount > 0).sum()),
                int(st[K.NN]),
                int(st[K.ALLOC]),
                int(st[K.COMPACTIONS]),
                int(max(st[K.PEAK], st[K.NN])),
                d.states,
                d.transitions_computed,
                d.cache_hits,
                d.resets,
            )
        return EngineStats(
            self._events,
            self._matches,
            len(self._parts),
            len(self.tecs),
            self.tecs.allocated,
            self.tecs.compactions,
            max(self._peak, len(self.tecs)),
            d.states,
            d.transitions_computed,
            d.cache_hits,
            d.resets,
        )

    # ------------------------------------------------------------------ column-wise preparation

    def _prepare(self, frame: pl.DataFrame) -> pl.DataFrame:
        frame, self._last_time = prepare_frame(
            frame, self.streams, self.partition_by, self.window, self._last_time, _KEY, _WTIME
        )
        if self.partition_by:
            frame = self._with_keys(frame)
        return frame

    def _with_keys(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Add the partition key id column (one id per distinct key, stable across frames)."""
        names = [f"{_KEY}{i}" for i in range(len(self.partition_by))]
        uniq = frame.select(names).unique(maintain_order=True)
        ids = [self._key_ids.setdefault(k, len(self._key_ids)) for k in uniq.rows()]
        uniq = uniq.with_columns(pl.Series(_KEY, ids, dtype=pl.Int64))
        return frame.join(uniq, on=names, how="left", maintain_order="left")

    # ------------------------------------------------------------------ the loop

    def run(self, frame: pl.DataFrame) -> Iterator[Match]:
        """Matches of the events of ``frame`` (continuing from earlier frames), in order of
        their triggering event."""
        yield from as_matches(self._produce(frame))

    def run_batches(self, frame: pl.DataFrame, size: int = 10_000) -> Iterator[MatchBatch]:
        """``run`` in columns: the same matches, in the same order, as ``MatchBatch``es (the
        compiled kernel fills them directly; the Python loop's are packed ``size`` at a time)."""
        yield from as_batches(self._produce(frame), size)

    def _produce(self, frame: pl.DataFrame) -> Iterator[Match] | Iterator[MatchBatch]:
        """``MatchBatch``es from the kernel, or ``Match`` objects from the Python loop."""
        frame = self._prepare(frame)
        if frame.height == 0:
            return iter(())
        if self.kernel:
            inputs = self._kernel_inputs(frame)
            if inputs is not None:
                return self._run_kernel(inputs)
        return self._run_python(frame)

    def _run_python(self, frame: pl.DataFrame) -> Iterator[Match]:
        ids, masks = self.alphabet.symbols(frame)
        to_dfa = [self.dfa.symbol(m) for m in masks]
        syms = [to_dfa[s] for s in (ids.tolist() if hasattr(ids, "tolist") else ids)]
        positions = frame[POS].to_list()
        keys = frame[_KEY].to_list() if self.partition_by else [0] * frame.height
        times = frame[_WTIME].to_list() if _WTIME in frame.columns else None
        rows = None
        if self.post is not None:
            cols = [c for c in self.post.columns if c in frame.columns]
            rows = frame.select(cols).to_dicts() if cols else [{} for _ in range(frame.height)]
        yield from self._loop(syms, positions, keys, times, rows)

    def count(self, frame: pl.DataFrame) -> int:
        """How many matches ``run(frame)`` would yield, without building them (the
        kernel only counts; other engines count ``run``'s output)."""
        if not self.kernel:
            return sum(1 for _ in self.run(frame))
        frame = self._prepare(frame)
        if frame.height == 0:
            return 0
        inputs = self._kernel_inputs(frame)
        if inputs is None:
            return sum(1 for _ in self._run_python(frame))
        before = int(self._k.st[K.MATCHES])
        for _ in self._k.run(*inputs, emit=False):
            pass
        return int(self._k.st[K.MATCHES]) - before

    # ------------------------------------------------------------------ the compiled path

    def _kernel_inputs(self, frame: pl.DataFrame):
        """Column arrays for ``KernelState.run``; creates the kernel state on the first
        batch. ``None`` (and the Python loop from then on) when the window time is not
        numeric."""
        times = hastime = None
        if _WTIME in frame.columns:
            col = frame[_WTIME]
            if not col.dtype.is_numeric():
                if self._k is None:
                    self.kernel = False
                    return None
                col = col.cast(pl.Float64)
            hastime = col.is_not_null().to_numpy()
            bound = self._bound
            fl = col.dtype.is_float() or (isinstance(bound, float) and not bound.is_integer())
            if self._k is None:
                self._new_kernel(fl)
            elif fl:
                self._k.use_float_times()
            col = col.fill_null(0)
            times = col.cast(pl.Float64 if self._k.float_times else pl.Int64).to_numpy()
        if self._k is None:
            self._new_kernel(False)
        ids, masks = self.alphabet.symbols(frame)
        to_dfa = np.array([self.dfa.symbol(m) for m in masks], dtype=np.int64)
        syms = to_dfa[np.asarray(ids, dtype=np.int64)]
        positions = frame[POS].cast(pl.Int64).to_numpy()
        if self.partition_by:
            keys = frame[_KEY].to_numpy().astype(np.int64, copy=False)
            self._k.partitions(len(self._key_ids))
        else:
            keys = np.zeros(frame.height, dtype=np.int64)
        return syms, positions, keys, times, hastime

    def _new_kernel(self, float_times: bool) -> None:
        bound = self._bound
        if bound is not None and not float_times:
            bound = int(bound)
        self._k = K.KernelState(
            self.dfa, isinstance(self.window, ast.EventsWindow), bound, self.consume,
            self._compact_min, float_times,
        )

    def _run_kernel(self, inputs) -> Iterator[MatchBatch]:
        labelsets = tuple(self.dfa.labelsets)
        key_of = {v: self._reported_key(k) for k, v in self._key_ids.items()} if self.partition_by else {}
        for start, end, part, off, epos, elab in self._k.run(*inputs, emit=True):
            if len(labelsets) < len(self.dfa.labelsets):
                labelsets = tuple(self.dfa.labelsets)
            yield MatchBatch(start, end, part, off, epos, elab, labelsets, key_of)

    def _reported_key(self, key):
        if self.report_groups is None or key is None:
            return key
        return tuple(key[: self.report_groups]) or None

    def _loop(self, syms, positions, keys, times, rows=None) -> Iterator[Match]:
        t, dfa, parts = self.tecs, self.dfa, self._parts
        bound = self._bound
        by_events = isinstance(self.window, ast.EventsWindow)
        key_of = {v: k for k, v in self._key_ids.items()} if self.partition_by else {}
        for i, pos in enumerate(positions):
            kid = keys[i]
            part = parts.get(kid)
            if part is None:
                part = parts[kid] = _Partition(key_of.get(kid))
            local = part.count
            part.count += 1
            time = local if by_events else (times[i] if times is not None else 0)
            # An event without a window time (attribute missing) can neither start nor end a
            # match under the window, but may sit inside one.
            tau = NO_WINDOW if bound is None or time is None else time - bound
            if time is not None:
                self._now = time
            if rows is not None:
                self._rows[pos] = rows[i]
                self._row_meta[pos] = (kid, local if by_events else self._now)
            table = part.table = advance(t, dfa, part.table, syms[i], pos, time, local, tau)
            self._events += 1
            reported = 0
            finals = [ul for q, ul in table.items() if dfa.is_final(q)] if time is not None else ()
            if finals and self.post is not None:
                for start, events in self._post_batch(finals, tau, local):
                    reported += 1
                    yield Match(start, pos, events, self._reported_key(part.key))
            elif finals:
                for start, _, p in self._batch(finals, tau, local):
                    reported += 1
                    yield Match(start, pos, events_of(p, dfa.labelsets), self._reported_key(part.key))
            if reported:
                self._matches += reported
                if self.consume == "ANY":
                    for other in parts.values():
                        other.table = {}
                elif self.consume == "PARTITION":
                    part.table = {}
            if len(t) > self._next_compact:
                self._peak = max(self._peak, len(t))
                self._compact()
            if rows is not None and bound is not None and len(self._rows) > self._next_prune:
                self._prune_rows()

    def _post_batch(self, finals: list[list[int]], tau: float, local: int):
        """Correlation: every windowed candidate ending now, kept iff the post-filter holds
        on its valuation, projected to the real SELECT and de-duplicated; then strategy and
        LIMIT as in ``_batch``. Cost: every candidate is enumerated and tested."""
        t, labelsets, post = self.tecs, self.dfa.labelsets, self.post
        keep = post.select
        seen: dict[tuple, tuple] = {}
        for ul in finals:
            for n in ul:
                for start, start_local, p in enumerate_window(t, n, tau):
                    events = events_of(p, labelsets)
                    if not post.holds(events, self._rows):
                        continue
                    if keep is not None:
                        events = tuple(
                            (q, tuple(x for x in xs if x in keep))
                            for q, xs in events
                            if any(x in keep for x in xs)
                        )
                    seen.setdefault((start, events), (start, start_local, events))
        batch = []
        for start, start_local, events in seen.values():
            cons = None
            for q, xs in reversed(events):
                cons = (q, xs, cons)
            batch.append((start, start_local, cons))
        kept = select(self.strategy, batch, local)
        if self.limit is not None:
            kept = sorted(kept, key=lambda c: -c[0])[: self.limit]
        for start, _, cons in kept:
            out = []
            while cons is not None:
                out.append((cons[0], cons[1]))
                cons = cons[2]
            yield start, tuple(out)

    def _prune_rows(self) -> None:
        """Forget the attributes of events that are out of every window (their partition's
        for EVENTS windows): no future candidate can contain them."""
        bound = self._bound
        by_events = isinstance(self.window, ast.EventsWindow)
        taus = {kid: part.count - 1 - bound for kid, part in self._parts.items()} if by_events else {}
        now_tau = self._now - bound
        for pos in [
            pos for pos, (kid, time) in self._row_meta.items()
            if time < (taus.get(kid, -1) if by_events else now_tau)
        ]:
            del self._rows[pos]
            del self._row_meta[pos]
        self._next_prune = max(self._compact_min, 2 * len(self._rows))

    def _batch(self, finals: list[list[int]], tau: float, local: int):
        """Windowed complex events ending now, after strategy and LIMIT."""
        t, limit = self.tecs, self.limit
        if self.strategy in ("ALL", "ANY"):
            if limit is None:
                return (c for ul in finals for n in ul for c in enumerate_window(t, n, tau))
            roots = [n for ul in finals for n in ul]
            return (c for _, c in zip(range(limit), enumerate_latest_first(t, roots, tau), strict=False))
        batch = [c for ul in finals for n in ul for c in enumerate_window(t, n, tau)]
        kept = select(self.strategy, batch, local)
        if limit is not None:
            kept = sorted(kept, key=lambda c: -c[0])[:limit]
        return kept

    def _compact(self) -> None:
        """Compact the tECS from the live tables. Window times never decrease, so what is
        out of the window now (per partition for EVENTS, globally for time) stays out."""
        bound = self._bound
        by_events = isinstance(self.window, ast.EventsWindow)
        groups = []
        for part in self._parts.values():
            if bound is None:
                tau = NO_WINDOW
            elif by_events:
                tau = part.count - 1 - bound
            else:
                tau = self._now - bound
            groups.append((tau, list(part.table.values())))
        self.tecs.compact(groups)
        for part in self._parts.values():
            if any(not ul for ul in part.table.values()):
                part.table = {q: ul for q, ul in part.table.items() if ul}
        live = len(self.tecs)
        self._next_compact = max(self._compact_min, 2 * live)


def run_query(query: ast.Query, frame: pl.DataFrame) -> Iterator[Match]:
    """All matches of ``query`` over ``frame`` (an event frame, see ``cer_cli.events``)."""
    yield from build_engine(query).run(frame)


def build_engine(query: ast.Query, result=None, alphabet: Alphabet | None = None,
                 cea: CEA | None = None, **options):
    """Compile ``query`` — rewrite, collect its atoms, construct the CEA with the SELECT
    projection — into an ``Engine``, or into a ``HashJoinEngine`` when its equalities
    between events are in the PCEA fragment (``cer_cli.compiler.pcea``). The query should
    have passed ``checks`` already. ``CompiledQuery.engine`` passes its own rewrite result,
    alphabet and CEA, so this is the one place where the engine is chosen; ``options`` go
    to ``Engine`` (the hash join has none)."""
    result = rewrite(query) if result is None else result
    if result.pcea is not None:
        from cer_cli.engine.pcea import HashJoinEngine

        return HashJoinEngine(
            result.pcea,
            window=query.within,
            partition_by=result.query.partition_by,
            limit=query.limit,
            streams=query.streams,
            strategy=query.strategy,
        )
    alphabet = Alphabet.from_formula(result.formula) if alphabet is None else alphabet
    post = post_filter_of(query, result)
    if cea is None:
        cea = compile_formula(result.formula, alphabet, cea_projection(query, post))
    return Engine(
        cea,
        alphabet,
        window=query.within,
        partition_by=result.query.partition_by,
        strategy=query.strategy,
        consume=query.consume,
        limit=query.limit,
        streams=query.streams,
        post_filter=post,
        report_groups=len(query.partition_by),
        **options,
    )


def post_filter_of(query: ast.Query, result):
    """The correlation post-filter of a rewritten query, or None when it needs none (no
    predicate between events left, or the hash join evaluates them)."""
    if not result.post_filters or getattr(result, "pcea", None) is not None:
        return None
    from cer_cli.compiler.correlation import PostFilter

    select = None if query.select is None else frozenset(item.var for item in query.select)
    return PostFilter(tuple(result.post_filters), select)


def cea_projection(query: ast.Query, post) -> frozenset[str] | None:
    """The variables the automaton marks: SELECT's, plus those the post-filter reads."""
    if query.select is None:
        return None
    projection = frozenset(item.var for item in query.select)
    return projection if post is None else projection | post.variables
