"""The CEA executor: a compiled query run over time-ordered event frames (CORE §4,
Algorithms 1–2).

``Engine`` owns everything that persists across frames: the lazy det-automaton and the
kernel state (``kernel_state.KernelState``: tECS node arrays and one Algorithm-1 table per
PARTITION BY key). ``run(frame)`` does the column-wise work with polars first — FROM
filtering, partition key ids, window times, and the event symbols (``Alphabet.symbols``) —
and then feeds the kernel, the one evaluator, which per event advances the event's
partition (pruning by the window), enumerates the windowed complex events ending at it,
applies CONSUME BY, and compacts the tECS so that windowed queries run in memory bounded by
the window rather than the log.

Post-processing runs over the kernel's ``MatchBatch``es, per triggering event (then a
batch never splits one event's complex events, see ``kernel._enumerate``): the correlation
post-filter (then projection to the real SELECT and de-duplication), the selection strategy,
LIMIT (``strategies.py``). With post-processing, CONSUME BY happens only when the event
reports a match after it: the kernel runs in decide mode and asks. Without it the kernel
streams: one event's complex events may span several batches of at most ``out_cap``
matches, so memory is bounded by the window and that cap, not by the matches of an event
(with post-processing, by the candidates of one event).

Per-event cost is constant for a fixed query plus the size of the reported matches (with
post-processing, of all windowed candidates ending at the event). ``LIMIT k`` under ALL/ANY
without a post-filter is no post-processing: the kernel stops at each event with final
states and ``kernel_state.latest_first`` enumerates only its k latest starts, best-first by
max-start, in the order ``limit_latest`` would keep them. Feeding several frames one
after another gives the same matches as feeding their concatenation.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import polars as pl

from cer_cli.compiler.cea import CEA
from cer_cli.compiler.determinize import LazyDFA
from cer_cli.engine import kernel as K
from cer_cli.engine.executor import EngineStats, prepare_frame, window_bound, window_text
from cer_cli.engine.jit import jit_forced
from cer_cli.engine.kernel_state import BUDGET_UNITS, OUT_CAP, KernelState
from cer_cli.engine.strategies import STRATEGY_COST, project, report
from cer_cli.events import KEY, POS, Match, MatchBatch, as_matches
from cer_cli.query import ast
from cer_cli.query.printer import groups_text

_KEY = KEY
_WTIME = "__cer_engine_time"
MIN_COMPACT = 4096


class Engine:
    """Evaluate a CEA over event frames, with window, partitions, strategy, consumption, limit.

    ``alphabet`` needs ``symbols(frame) -> (symbol ids, masks)``: one id per row and the
    atom bit mask of each id. ``window`` is an AST window (or ``None``), ``partition_by``
    the bracket groups of alternative attribute names, ``streams`` the FROM list.
    ``cache_limit`` bounds the det-automaton's transition cache; the tECS is compacted when
    it holds more than ``max(compact_min, 2 × nodes live after the last compaction)`` nodes.
    ``post_filter`` tests predicates between events on each candidate
    (``engine.post_filter.PostFilter``); ``report_groups``: how many leading PARTITION BY
    groups a match reports (the rest were added by the equality rewrite; ``None``: all).
    ``out_cap``: matches per kernel batch; ``budget``: units of kernel work between returns
    to Python (where a Ctrl-C acts); both small only in tests.
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
        out_cap: int = OUT_CAP,
        budget: int = BUDGET_UNITS,
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
        self.post = post_filter
        self.report_groups = report_groups
        self._bound = window_bound(window)
        self._key_ids: dict[tuple, int] = {}
        #: per key id, the key a match reports (``_reported_key``), kept as keys are numbered
        self._key_of: dict[int, tuple | None] = {}
        self._key_view: dict[int, tuple | None] = {}  # its copy the batches share
        #: every key numbered so far and its id, joined to each frame (``_with_keys``)
        self._key_table: pl.DataFrame | None = None
        #: whether a frame came with other key dtypes: every frame is then numbered key by key
        self._key_fallback = False
        self._last_time = None  # the last timed event (executor.Earlier)
        self._compact_min = compact_min
        self._out_cap = out_cap
        self._budget = budget
        #: Whether the kernel reports only each event's ``limit`` latest starts itself
        #: (best-first, ``kernel_state.latest_first``): ALL/ANY without a post-filter.
        self._kernel_limit = limit is not None and strategy in ("ALL", "ANY") and post_filter is None
        #: Whether the kernel's candidates are filtered before they are reported.
        self._post_process = (strategy not in ("ALL", "ANY") or post_filter is not None
                              or (limit is not None and not self._kernel_limit))
        #: Whether post-processing keeps or drops each candidate alone (STRICT: gap-free),
        #: needing no other of its event's: the kernel may then hand one event's candidates
        #: over in several batches, and memory stays one batch however many they are.
        self._per_match = (strategy == "STRICT" and post_filter is None and limit is None
                           and consume == "NONE")
        self._reported = 0
        #: per reported PARTITION BY key, the matches post-processing reported
        #: (``partition_counts``; without it the kernel counts them)
        self._reported_by: dict = {}
        #: The post-filter's attributes of the events a future candidate may still hold
        #: (POS plus ``post.columns``), pruned when it doubled (``_prune_rows``).
        self._rows: pl.DataFrame | None = None
        self._next_prune = compact_min
        self._k: KernelState | None = None

    # ------------------------------------------------------------------ description

    def describe(self) -> str:
        """How this engine evaluates, and what it costs (printed by ``cer explain``)."""
        window = window_text(self.window, "partial matches")
        parts = (
            "one evaluator per PARTITION BY key " + groups_text(self.partition_by)
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
        """``matches`` counts reported matches (after post-processing)."""
        d = self.dfa.stats
        k = self._k
        if k is None:
            return EngineStats(0, 0, 0, 0, 0, 0, 0, d.states, d.transitions_computed, d.cache_hits, d.resets)
        st = k.st
        return EngineStats(
            int(st[K.EVENTS]),
            self._reported if self._post_process else int(st[K.MATCHES]),
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

    # ------------------------------------------------------------------ column-wise preparation

    def _prepare(self, frame: pl.DataFrame) -> pl.DataFrame:
        frame, self._last_time = prepare_frame(
            frame, self.streams, self.partition_by, self.window, self._last_time, _KEY, _WTIME
        )
        if self.partition_by:
            frame = self._with_keys(frame)
        return frame

    def _with_keys(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Add the partition key id column (one id per distinct key, stable across frames).

        Only the keys not seen before are numbered in Python (``_key_ids``, ``_key_of``);
        the frame's keys are looked up by a join on the table of every key numbered so far
        (``_key_table``): with 100,000 keys, walking each slice's keys in Python cost more
        than the kernel. A frame whose key columns have other dtypes than the table's (one
        frame at a time from the API) is numbered key by key, as the table cannot join it."""
        if not frame.height:
            return frame.with_columns(pl.lit(None, dtype=pl.Int64).alias(_KEY))
        names = [f"{_KEY}{i}" for i in range(len(self.partition_by))]
        uniq = frame.select(names).unique(maintain_order=True)
        table = self._key_table
        if table is not None and table.select(names).schema != uniq.schema:
            self._key_fallback, table, self._key_table = True, None, None
        if self._key_fallback:
            ids = [self._number(k) for k in uniq.rows()]
            return frame.join(uniq.with_columns(pl.Series(_KEY, ids, dtype=pl.Int64)),
                              on=names, how="left", maintain_order="left")
        new = uniq if table is None else uniq.join(table, on=names, how="anti",
                                                   maintain_order="left")
        if new.height:
            ids = [self._number(k) for k in new.rows()]
            new = new.with_columns(pl.Series(_KEY, ids, dtype=pl.Int64))
            table = self._key_table = new if table is None else pl.concat([table, new])
        return frame.join(table, on=names, how="left", maintain_order="left")

    def _number(self, key: tuple) -> int:
        """The id of ``key``, numbering it when new (``_key_of``: its reported key)."""
        i = self._key_ids.setdefault(key, len(self._key_ids))
        if i not in self._key_of:
            self._key_of[i] = self._reported_key(key)
        return i

    def _kernel_inputs(self, frame: pl.DataFrame):
        """Column arrays for ``KernelState.run``; creates the kernel state on the first frame.
        Window times are int64 unless a frame brings float times or the bound is fractional."""
        times = hastime = None
        if _WTIME in frame.columns:
            col = frame[_WTIME]
            hastime = col.is_not_null().to_numpy()
            bound = self._bound
            fl = col.dtype.is_float() or (isinstance(bound, float) and not bound.is_integer())
            if self._k is None:
                self._new_kernel(fl)
            elif fl:
                self._k.use_float_times()
            times = col.fill_null(0).cast(pl.Float64 if self._k.float_times else pl.Int64).to_numpy()
        if self._k is None:
            self._new_kernel(False)
        # the few distinct summaries to symbols and columns, then every row in one lookup
        codes, distinct = self.alphabet.summaries(frame)
        syms = np.array([self.dfa.symbol(m) for m in distinct], dtype=np.int64)
        cols = self._k.columns(syms)[codes]
        positions = frame[POS].cast(pl.Int64).to_numpy()
        if self.partition_by:
            keys = frame[_KEY].to_numpy().astype(np.int64, copy=False)
            self._k.partitions(len(self._key_ids))
        else:
            keys = np.zeros(frame.height, dtype=np.int64)
        return cols, positions, keys, times, hastime

    def _new_kernel(self, float_times: bool) -> None:
        """The kernel state: uncompiled until the run is large (``KernelState``'s ``jit``), so a
        small log does not wait for numba's import and cache load; ``CER_JIT`` forces it."""
        bound = self._bound
        if bound is not None and not float_times:
            bound = int(bound)
        self._k = KernelState(
            self.dfa, isinstance(self.window, ast.EventsWindow), bound, self.consume,
            self._compact_min, float_times, decide=self._post_process and self.consume != "NONE",
            limit=self.limit if self._kernel_limit else None,
            split=not self._post_process or self._per_match, out_cap=self._out_cap,
            budget=self._budget,
            jit=jit_forced(),
        )

    # ------------------------------------------------------------------ running

    def run(self, frame: pl.DataFrame) -> Iterator[Match]:
        """Matches of the events of ``frame`` (continuing from earlier frames), in order of
        their triggering event."""
        yield from as_matches(self._produce(frame))

    def run_batches(self, frame: pl.DataFrame, size: int = 10_000) -> Iterator[MatchBatch]:
        """``run`` in columns: the same matches, in the same order, as ``MatchBatch``es filled
        by the kernel (``size`` is the protocol's; the kernel sizes its own batches)."""
        yield from self._produce(frame)

    def count(self, frame: pl.DataFrame) -> int:
        """How many matches ``run(frame)`` would yield: counted in the kernel without
        building them, unless post-processing decides which candidates are reported.
        Without a window (and without LIMIT) the kernel sums tECS node counts instead of
        enumerating, so the time is linear in the tECS, not in the count; the result is a
        Python int, exact beyond int64 (``A+ ; B`` over 2,000 As: 2^2000 - 1)."""
        if self._post_process:
            return sum(len(b) for b in self._produce(frame))
        frame = self._prepare(frame)
        if frame.height == 0:
            return 0
        inputs = self._kernel_inputs(frame)
        before = self._k.matches
        for _ in self._k.run(*inputs, emit=False):
            pass
        return self._k.matches - before

    def partition_counts(self) -> dict[tuple | None, int]:
        """How many matches ``run``/``count`` reported so far per PARTITION BY key, the key
        a match reports (``None`` without PARTITION BY), for the keys with any: counted
        where ``count`` counts, so without enumerating where it does not (``cer match
        --count --by KEY``)."""
        if self._post_process:
            return dict(self._reported_by)
        if self._k is None:
            return {}
        ids = {v: self._reported_key(k) for k, v in self._key_ids.items()}
        out: dict = {}
        for p, n in self._k.partition_matches().items():
            key = ids.get(p)
            out[key] = out.get(key, 0) + n
        return out

    def finish(self) -> Iterator[MatchBatch]:
        """Nothing: every match is reported at the event that ends it."""
        return iter(())

    def _produce(self, frame: pl.DataFrame) -> Iterator[MatchBatch]:
        frame = self._prepare(frame)
        if frame.height == 0:
            return
        inputs = self._kernel_inputs(frame)
        if self.post is not None:
            self._remember(frame)
        k = self._k
        labelsets = tuple(self.dfa.labelsets)
        if len(self._key_view) != len(self._key_of):  # a copy only when keys were added
            self._key_view = dict(self._key_of)
        key_of = self._key_view
        for (start, end, part, sloc, eloc, off, pos, lab), pending in k.run(*inputs, emit=True):
            if len(labelsets) < len(self.dfa.labelsets):
                labelsets = tuple(self.dfa.labelsets)
            batch = MatchBatch(start, end, part, off, pos, lab, labelsets, key_of, sloc, eloc)
            if self._post_process:
                batch = self._report(batch)
                self._reported += len(batch)
                for key, n in batch.partition_counts().items():
                    self._reported_by[key] = self._reported_by.get(key, 0) + n
                if pending >= 0 and len(batch):
                    k.consume(pending)  # before the kernel resumes with the next event
            if len(batch):
                yield batch
        if self.post is not None:
            self._prune_rows()

    def _reported_key(self, key):
        if self.report_groups is None or key is None:
            return key
        return tuple(key[: self.report_groups]) or None

    # ------------------------------------------------------------------ post-processing

    def _report(self, batch: MatchBatch) -> MatchBatch:
        """What the candidates of ``batch`` report: post-filter (then the real SELECT and one
        match per distinct complex event), strategy, LIMIT — per triggering event."""
        post = self.post
        if post is not None and len(batch):
            batch = batch.take(np.flatnonzero(np.asarray(post.keep(batch, self._rows), dtype=np.bool_)))
            if post.select is not None:
                batch = project(batch, post.select)
            elif post.hidden:
                batch = project(batch, frozenset(v for ls in batch.labelsets for v in ls)
                                - post.hidden)
        # Candidates repeat a complex event only when a projection dropped the variables
        # that told them apart: the I/O-deterministic CEA gives each valuation once.
        distinct = post is not None and (post.select is not None or bool(post.hidden))
        return report(batch, self.strategy, self.limit, distinct=distinct)

    def _remember(self, frame: pl.DataFrame) -> None:
        """Keep the post-filter's attributes of ``frame``'s events (before the kernel reads it)."""
        new = frame.select([POS, *(c for c in self.post.columns if c in frame.columns)])
        self._rows = new if self._rows is None else pl.concat([self._rows, new], how="diagonal_relaxed")

    def _prune_rows(self) -> None:
        """Forget the attributes of events that no future candidate can hold: those before
        the earliest start of a stored partial match once the tECS is compacted (compaction
        drops what left the window and what CONSUME BY forgot). Done when the rows doubled,
        so the compaction it forces costs amortised O(1) per event."""
        if self._rows.height <= self._next_prune:
            return
        self._k.compact()
        low = self._k.lowest_start()
        self._rows = self._rows.clear() if low is None else self._rows.filter(pl.col(POS) >= low)
        self._next_prune = max(self._compact_min, 2 * self._rows.height)
