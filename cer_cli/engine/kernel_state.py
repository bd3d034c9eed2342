"""The kernel's caller: ``KernelState`` owns every array ``kernel.run_events`` reads and
writes, kept across batches, and answers what the loop returns for (a move of the lazy
det-automaton, room in an array, a flush of the outputs, a compaction, CONSUME BY's
decision, LIMIT's latest starts, a count past int64, a signal check); ``latest_first`` is
LIMIT k's best-first search. Plain Python: what the compiled loop hands back to it is rare
(amortised O(1) per event), and numba is loaded only for large runs (``engine/jit.py``).
"""

from __future__ import annotations

import numpy as np

from cer_cli import signals
from cer_cli.engine import jit as loader
from cer_cli.engine import kernel as K
from cer_cli.engine.kernel import (
    BOTTOM,
    BUDGET,
    C_BIG,
    C_EPOCH,
    COMPACT_MIN,
    COMPACTIONS,
    CONSUME_ANY,
    CONSUME_NONE,
    CONSUME_PARTITION,
    CSLOTS,
    E_ON,
    EVENTS,
    KIND,
    LAB,
    LIMIT_DONE,
    LIMIT_K,
    MATCHES,
    MISS_COL,
    MISS_STATE,
    MX,
    N_EV,
    N_OUT,
    NEED_BIGCOUNT,
    NEED_COMPACT,
    NEED_DECIDE,
    NEED_ES,
    NEED_LIMIT,
    NEED_MOVE,
    NEED_NODES,
    NEED_OUT,
    NEED_PATH,
    NEED_ROOM,
    NEED_SCRATCH,
    NEED_WIDTH,
    NEED_YIELD,
    NEXT_COMPACT,
    NN,
    NPOS,
    NSLOTS,
    OUTPUT,
    P_PART,
    P_POS,
    P_PRUNE,
    P_ROW,
    PHASE,
    SPARE,
    SPLIT,
    UNKNOWN,
    UPDATE,
    A,
    B,
)

# ---------------------------------------------------------------------------- LIMIT k


def latest_first(nodes, mt, tstate, ulen, ul, final, p, ns, prune, etau, k):
    """The first ``k`` complex events of ``_enumerate``'s order stably sorted by start,
    latest first — what ``strategies.limit_latest`` keeps — found best-first, without
    enumerating the others: O(k · d · (d + log h)) for paths of depth d and a heap of h.

    A heap entry is a node still to walk with the partial path above it, keyed by
    ``(-max-start, root, turns)``: ``root`` is the rank of its union-list entry in
    ``_enumerate``'s order and ``turns`` encodes the left/right choices from the root as
    the negated runs of left turns before each right turn, which compares like the choice
    strings (left < right) — the depth-first order. Popping an entry walks its left spine to
    a bottom (the same max-start, and the least choice string among the entries tied on it),
    pushing each in-window right child. Every node's max-start is its left spine's start and
    in the window when the node is, so each pop yields one complex event. Returns
    ``(start, start_local, path)`` triples, ``path`` a linked list ``(pos, lab, rest)`` of
    the marked events from the earliest."""
    import heapq

    heap = []
    rank = 0
    for kk in range(ns):
        if not final[tstate[p, kk]]:
            continue
        for e in range(ulen[p, kk]):
            root = int(ul[p, kk, e])
            if not prune or mt[root] >= etau:
                heap.append((-int(nodes[root, MX]), rank, (), root, None))
            rank += 1
    heapq.heapify(heap)
    out = []
    while heap and len(out) < k:
        _, r, turns, x, path = heapq.heappop(heap)
        left = 0
        while True:
            kind = nodes[x, KIND]
            if kind == BOTTOM:
                out.append((int(nodes[x, NPOS]), int(nodes[x, B]), path))
                break
            if kind == OUTPUT:
                path = (int(nodes[x, NPOS]), int(nodes[x, LAB]), path)
            else:
                b = int(nodes[x, B])
                if not prune or mt[b] >= etau:
                    heapq.heappush(heap, (-int(nodes[b, MX]), r, turns + (-left,), b, path))
                left += 1
            x = int(nodes[x, A])
    return out


# ---------------------------------------------------------------------------- the caller's side

#: Past this many (det-state × symbol column) cells the move table is cleared between
#: batches (like ``LazyDFA``'s cache reset): it only costs recomputing moves.
TABLE_CELLS = 1 << 22
#: Output arrays hold this many complex events (and 4× as many marked events); with
#: ``split`` they never grow past it unless one complex event alone is larger.
OUT_CAP = 1 << 14
#: ``run_events`` returns to Python after about this many units of work (events and
#: enumerated nodes; ~10 ms compiled), so that signal handlers run (Ctrl-C acts at once).
BUDGET_UNITS = 1 << 20


class KernelState:
    """Everything ``run_events`` reads and writes, kept across batches, plus the lazy fill of
    the dense move table from a ``LazyDFA``. ``float_times``: window times are float64
    (otherwise int64: positions, nanoseconds, integer attributes). ``decide``: CONSUME BY
    waits for the caller (``NEED_DECIDE``; see the module doc). ``limit``: report (and count)
    only each event's ``limit`` latest starts (``latest_first``), in the order
    ``strategies.limit_latest`` keeps them; CONSUME BY applies if one is reported."""

    def __init__(self, dfa, by_events: bool, bound, consume: str, compact_min: int,
                 float_times: bool, decide: bool = False, limit: int | None = None,
                 split: bool = False, out_cap: int = OUT_CAP, budget: int = BUDGET_UNITS,
                 jit: bool | None = None) -> None:
        self.dfa = dfa
        #: compiled (``compiled``) if True, plain if False; ``None``: plain until the run has
        #: seen ``JIT_MIN_EVENTS`` events, compiled from then on (both use the same arrays).
        self.jit = jit
        self._fns = loader.compiled_for_run() if jit else {}
        self.split = split
        self.out_cap = max(1, out_cap)
        self.ev_cap = 4 * self.out_cap
        #: the most complex events the output arrays ever held at once (``out_cap`` unless
        #: one event had to leave whole, or a single complex event was larger)
        self.out_peak = 0
        self.decide = decide
        self.by_events = by_events
        self.has_bound = bound is not None
        self.float_times = float_times
        self.tdtype = np.float64 if float_times else np.int64
        self.bound = self.tdtype(0 if bound is None else bound)
        self.consume_policy = {"ANY": CONSUME_ANY, "PARTITION": CONSUME_PARTITION}.get(consume, CONSUME_NONE)
        self.nodes = np.zeros((1024, 6), np.int64)
        self.mt = np.zeros(1024, self.tdtype)
        self.st = np.zeros(NSLOTS, np.int64)
        self.st[NEXT_COMPACT] = self.st[COMPACT_MIN] = compact_min
        self.st[LIMIT_K] = 0 if limit is None else limit + 1
        self.st[BUDGET] = budget
        self.st[SPLIT] = 1 if split else 0
        self.now = np.zeros(1, self.tdtype)
        self.n_states = 0
        self.final = np.zeros(0, np.bool_)
        # table rows: partition p's is prow[p]; the one more row, st[SPARE], receives the
        # next event's new table (see ``run_events``)
        self.tstate = np.zeros((2, 4), np.int64)
        self.tlen = np.zeros(2, np.int64)
        self.ulen = np.zeros((2, 4), np.int64)
        self.ul = np.zeros((2, 4, 4), np.int64)
        self.prow = np.zeros(1, np.int64)
        self.st[SPARE] = 1
        self.pcount = np.zeros(1, np.int64)
        # counting without enumerating (no window): node counts, -1 past ``BIG``; and the
        # Python-int side for what does not fit in int64
        self.cnt = np.zeros(1024, np.int64)
        self.cst = np.zeros(CSLOTS, np.int64)
        self.cst[C_EPOCH] = -1
        self.big = 0  # matches beyond st[MATCHES] (see ``matches``)
        # per partition: what st[MATCHES] and ``big`` count (``partition_matches``)
        self.pmatch = np.zeros(1, np.int64)
        self.pbig: dict[int, int] = {}
        self._memo: dict[int, int] = {}
        self._memo_at = (-1, 0)  # (compaction number, nodes done) of ``_memo``
        self.colmap = np.full(0, -1, np.int64)  # global symbol id -> column
        self.col_sym: list[int] = []
        self.tunm = np.full((4, 8), UNKNOWN, np.int64)
        self.toff = np.zeros((4, 8), np.int64)
        self.tcnt = np.zeros((4, 8), np.int64)
        self.mq = np.zeros(64, np.int64)
        self.ml = np.zeros(64, np.int64)
        self.nmarks = 0
        self.ctx = np.zeros(1, self.tdtype)
        # per-event scratch: the new table's index of each det-state, the enumeration stacks
        self.slot_of = np.full(0, -1, np.int64)
        self.one = np.zeros(1, np.int64)
        self.es_node = np.zeros(64, np.int64)
        self.es_depth = np.zeros(64, np.int64)
        self.path_pos = np.zeros(64, np.int64)
        self.path_lab = np.zeros(64, np.int64)
        # outputs, flushed to the caller when full
        self._reset_out()
        self._states()

    def _fn(self, name: str):
        """The kernel function ``name`` this state runs: compiled if ``jit``, unless the
        kernel's name was replaced (tests wrap ``run_events`` to count calls)."""
        f = getattr(K, name)
        return self._fns.get(name, f) if f is loader.plain(name) else f

    def _reset_out(self) -> None:
        """Output arrays at the cap (room for ``out_cap`` complex events). Not zeroed: the
        kernel writes every cell it reports, and ``o_off[0]``."""
        m, e = self.out_cap + 1, self.ev_cap
        self.o_start = np.empty(m, np.int64)
        self.o_end = np.empty(m, np.int64)
        self.o_part = np.empty(m, np.int64)
        self.o_sloc = np.empty(m, np.int64)
        self.o_eloc = np.empty(m, np.int64)
        self.o_off = np.empty(m + 1, np.int64)
        self.o_off[0] = 0
        self.o_pos = np.empty(e, np.int64)
        self.o_lab = np.empty(e, np.int64)

    # ------------------------------------------------------------------ sizing

    def _states(self) -> None:
        """Make every array indexed by det-state cover the det-states interned so far."""
        n = len(self.dfa.states)
        if n == self.n_states:
            return
        self.final = np.array([self.dfa.is_final(q) for q in range(n)], np.bool_)
        self.n_states = n
        if n + 1 > len(self.slot_of):
            self.slot_of = np.full(2 * (n + 1), -1, np.int64)
        rows = self.tunm.shape[0]
        if n > rows:
            new = max(n, 2 * rows)
            self.tunm = _pad(self.tunm, 0, new, UNKNOWN)
            self.toff = _pad(self.toff, 0, new, 0)
            self.tcnt = _pad(self.tcnt, 0, new, 0)
        if n > self.tstate.shape[1]:
            new = max(n, 2 * self.tstate.shape[1])
            self.tstate = _pad(self.tstate, 1, new, 0)
            self.ulen = _pad(self.ulen, 1, new, 0)
            self.ul = _pad(self.ul, 1, new, 0)

    def partitions(self, n: int) -> None:
        """Room for partition ids ``< n``: the new partitions get new (empty) table rows."""
        old = len(self.prow)
        if n > old:
            new = max(n, 2 * old)
            rows = self.tlen.shape[0]  # old + 1: every partition's row and the spare one
            self.tstate = _pad(self.tstate, 0, rows + new - old, 0)
            self.ulen = _pad(self.ulen, 0, rows + new - old, 0)
            self.ul = _pad(self.ul, 0, rows + new - old, 0)
            self.tlen = _pad(self.tlen, 0, rows + new - old, 0)
            self.prow = np.concatenate([self.prow, np.arange(rows, rows + new - old, dtype=np.int64)])
            self.pcount = _pad(self.pcount, 0, new, 0)
            self.pmatch = _pad(self.pmatch, 0, new, 0)

    def use_float_times(self) -> None:
        """Switch window times to float64 (a batch brought non-integer times)."""
        if not self.float_times:
            self.float_times = True
            self.tdtype = np.float64
            self.mt = self.mt.astype(np.float64)
            self.now = self.now.astype(np.float64)
            self.ctx = self.ctx.astype(np.float64)
            self.bound = np.float64(self.bound)

    def columns(self, syms: np.ndarray) -> np.ndarray:
        """Move-table columns of the global symbol ids ``syms`` (new columns on demand)."""
        self._states()  # the table's rows first: its size decides when it starts over
        top = int(syms.max()) + 1 if len(syms) else 0
        if top > len(self.colmap):
            self.colmap = _pad(self.colmap, 0, max(top, 2 * len(self.colmap)), -1)
        # the symbols present, by a mask over the (few) symbol ids rather than np.unique
        # over the batch (a sort: ~10 ns per event)
        present = np.zeros(top, np.bool_)
        present[syms] = True
        ids = np.flatnonzero(present)
        if len(ids) and self.colmap[ids].min() < 0:
            new = ids[self.colmap[ids] < 0]
            if (len(self.col_sym) + len(new)) * self.tunm.shape[0] > TABLE_CELLS and self.col_sym:
                self.tunm[:] = UNKNOWN
                self.colmap[:] = -1
                self.col_sym = []
                self.nmarks = 0
                new = ids
            for s in new.tolist():
                self.colmap[s] = len(self.col_sym)
                self.col_sym.append(s)
            width = len(self.col_sym)
            if width > self.tunm.shape[1]:
                w = max(width, 2 * self.tunm.shape[1])
                self.tunm = _pad(self.tunm, 1, w, UNKNOWN)
                self.toff = _pad(self.toff, 1, w, 0)
                self.tcnt = _pad(self.tcnt, 1, w, 0)
        return self.colmap[syms]

    def fill(self, state: int, col: int) -> None:
        """Compute one move with the LazyDFA and store it in the table."""
        unmarked, marks = self.dfa.step(state, self.col_sym[col])
        self._states()
        k = self.nmarks
        if k + len(marks) > len(self.mq):
            size = max(k + len(marks), 2 * len(self.mq))
            self.mq = _pad(self.mq, 0, size, 0)
            self.ml = _pad(self.ml, 0, size, 0)
        for j, (q, lab) in enumerate(marks):
            self.mq[k + j] = q
            self.ml[k + j] = lab
        self.nmarks = k + len(marks)
        self.toff[state, col] = k
        self.tcnt[state, col] = len(marks)
        self.tunm[state, col] = unmarked

    # ------------------------------------------------------------------ running

    def run(self, cols, positions, keys, times, hastime, emit: bool, chunk: int = 1 << 16):
        """Feed one batch (``cols``: each event's move-table column, ``columns``); yields
        ``(outputs, pending)`` whenever the output arrays fill up or ``chunk`` events are
        done, when ``emit`` (nothing otherwise; see ``st[MATCHES]``).
        ``outputs`` is ``(start, end, part, sloc, eloc, off, pos, lab)`` (fresh copies).
        ``pending`` is -1, or (with ``decide``) the partition whose event — the last one in
        ``outputs``, alone there — awaits the decision: call ``consume(pending)`` before
        resuming if that event reports a match."""
        self._states()
        n = len(cols)
        if self.jit is None and int(self.st[EVENTS]) + n >= loader.JIT_MIN_EVENTS:
            self.jit, self._fns = True, loader.compiled_for_run()
        if times is None:  # no window, or an EVENTS one (times are then partition indices)
            times = np.zeros(n, self.tdtype)
            hastime = np.ones(n, np.bool_)
        positions, keys, times, hastime = loader.readonly(positions, keys, times, hastime)
        st = self.st
        st[N_OUT] = st[N_EV] = 0
        # count by node counts, never enumerating: count only, no window, no LIMIT
        count_paths = not emit and not self.has_bound and st[LIMIT_K] == 0
        i = 0
        while i < n or st[PHASE] != UPDATE:
            stop = min(n, i + chunk) if emit else n
            st[NEED_ES] = st[NEED_PATH] = 0
            if len(self.cnt) < len(self.mt):  # node counts beside the nodes
                self.cnt = _pad(self.cnt, 0, len(self.mt), 0)
            status, i = self._fn("run_events")(
                i, stop, cols, positions, keys, times, hastime, self.by_events,
                self.has_bound, self.bound, self.consume_policy, emit, self.decide,
                self.dfa.initial, self.final, self.tunm, self.toff, self.tcnt, self.mq, self.ml,
                self.nodes, self.mt, st, self.now, self.ctx,
                self.tstate, self.tlen, self.ulen, self.ul, self.prow, self.pcount,
                self.slot_of, self.one,
                self.es_node, self.es_depth, self.path_pos, self.path_lab,
                self.o_start, self.o_end, self.o_part, self.o_sloc, self.o_eloc, self.o_off,
                self.o_pos, self.o_lab,
                count_paths, self.cnt, self.cst, self.pmatch,
            )
            signals.check()  # the kernel returned (NEED_YIELD at least every ~2^20 steps)
            if status == NEED_BIGCOUNT:
                self._big_count()
            elif status == NEED_LIMIT:
                found = self._latest()
                if emit:
                    need_m, need_e = len(found), sum(_depth(m[2]) for m in found)
                    if st[N_OUT] and (st[N_OUT] + need_m >= len(self.o_start)
                                      or st[N_OUT] + need_m > self.out_cap
                                      or st[N_EV] + need_e > len(self.o_pos)):
                        yield self._flush(), -1
                    self._grow_out(need_m + 1, need_e)
                    self._write(found, int(st[P_POS]), int(st[P_PART]))
                st[LIMIT_DONE] = len(found) + 1
            elif status == NEED_DECIDE:
                yield self._flush(), int(st[P_PART])
                if st[NN] > st[NEXT_COMPACT]:  # the check the loop skipped by returning
                    self.compact()
            elif status == NEED_MOVE:
                self.fill(int(st[MISS_STATE]), int(st[MISS_COL]))
            elif status == NEED_COMPACT:
                self.compact()
            elif status == NEED_ROOM:
                need = int(st[NEED_NODES])
                if need > len(self.mt):
                    size = max(need, 2 * len(self.mt))
                    self.nodes = _pad(self.nodes, 0, size, 0)
                    self.mt = _pad(self.mt, 0, size, 0)
            elif status == NEED_WIDTH:
                self.ul = _pad(self.ul, 2, max(int(st[NEED_SCRATCH]), 2 * self.ul.shape[2]), 0)
            elif status == NEED_YIELD:
                pass  # back in Python once per budget: a pending Ctrl-C raises here
            elif status == NEED_OUT:
                if st[NEED_ES]:
                    self.es_node = _pad(self.es_node, 0, 2 * len(self.es_node), 0)
                    self.es_depth = _pad(self.es_depth, 0, 2 * len(self.es_depth), 0)
                elif st[NEED_PATH]:
                    self.path_pos = _pad(self.path_pos, 0, 2 * len(self.path_pos), 0)
                    self.path_lab = _pad(self.path_lab, 0, 2 * len(self.path_lab), 0)
                elif st[N_OUT] and (self.split or not st[E_ON]):
                    yield self._flush(), -1  # the enumeration resumes (or restarts) after it
                elif self.split:  # one complex event alone is larger than the arrays
                    self._grow_out(0, int(st[NEED_SCRATCH]))
                else:  # one event's complex events must leave together: they need room
                    self._grow_out(2 * len(self.o_start), max(int(st[NEED_SCRATCH]), 2 * len(self.o_pos)))
            elif emit and st[N_OUT]:
                yield self._flush(), -1
        if emit and st[N_OUT]:
            yield self._flush(), -1

    def _grow_out(self, m: int, e: int) -> None:
        """Output arrays for at least ``m`` complex events (``o_off`` one more) and ``e``
        marked events."""
        if m > len(self.o_start):
            m = max(m, 2 * len(self.o_start))
            self.o_start = _pad(self.o_start, 0, m, 0)
            self.o_end = _pad(self.o_end, 0, m, 0)
            self.o_part = _pad(self.o_part, 0, m, 0)
            self.o_sloc = _pad(self.o_sloc, 0, m, 0)
            self.o_eloc = _pad(self.o_eloc, 0, m, 0)
            self.o_off = _pad(self.o_off, 0, m + 1, 0)
        if e > len(self.o_pos):
            e = max(e, 2 * len(self.o_pos))
            self.o_pos = _pad(self.o_pos, 0, e, 0)
            self.o_lab = _pad(self.o_lab, 0, e, 0)

    def _latest(self):
        """``latest_first`` for the event the kernel stopped at (``NEED_LIMIT``)."""
        st = self.st
        r = int(st[P_ROW])
        return latest_first(self.nodes, self.mt, self.tstate, self.ulen, self.ul, self.final, r,
                            int(self.tlen[r]), st[P_PRUNE] == 1, self.ctx[0], int(st[LIMIT_K]) - 1)

    def _write(self, found, pos: int, p: int) -> None:
        """Append ``latest_first``'s complex events ending at ``pos`` to the outputs, as
        ``_enumerate`` would (the arrays are big enough)."""
        st = self.st
        nm, ne = int(st[N_OUT]), int(st[N_EV])
        local = int(self.pcount[p]) - 1
        for start, sloc, path in found:
            self.o_start[nm] = start
            self.o_end[nm] = pos
            self.o_part[nm] = p
            self.o_sloc[nm] = sloc
            self.o_eloc[nm] = local
            while path is not None:
                self.o_pos[ne], self.o_lab[ne], path = path
                ne += 1
            nm += 1
            self.o_off[nm] = ne
        st[N_OUT] = nm
        st[N_EV] = ne

    @property
    def matches(self) -> int:
        """Complex events counted so far (a Python int: it may exceed int64)."""
        return int(self.st[MATCHES]) + self.big

    def partition_matches(self) -> dict[int, int]:
        """``matches`` per partition id, for the partitions with any (Python ints)."""
        out = {int(p): int(self.pmatch[p]) for p in np.flatnonzero(self.pmatch)}
        for p, extra in self.pbig.items():
            out[p] = out.get(p, 0) + extra
        return out

    def _big_count(self) -> None:
        """``NEED_BIGCOUNT``: count the current event with Python ints. The nodes whose count
        is too big (-1 in ``cnt``) get theirs in ``_memo``, in ascending order (children
        first), once per node until a compaction renumbers them. The kernel adds 1 to
        ``st[MATCHES]`` for a non-zero count (so that CONSUME BY fires); ``big`` the rest."""
        st, cnt, nodes, memo = self.st, self.cnt, self.nodes, self._memo
        epoch, done = self._memo_at
        if epoch != int(st[COMPACTIONS]):
            memo.clear()
            done = 0
        nn = int(st[NN])

        def value(x: int) -> int:
            c = int(cnt[x])
            return memo[x] if c < 0 else c

        for x in (np.flatnonzero(cnt[done:nn] < 0) + done).tolist():
            a, b = int(nodes[x, A]), int(nodes[x, B])
            memo[x] = value(a) if nodes[x, KIND] == OUTPUT else value(a) + value(b)
        self._memo_at = (int(st[COMPACTIONS]), nn)
        r = int(st[P_ROW])
        total = sum(value(int(self.ul[r, k, e])) for k in range(int(self.tlen[r]))
                    if self.final[self.tstate[r, k]] for e in range(int(self.ulen[r, k])))
        self.big += max(total - 1, 0)
        if total > 1:
            p = int(st[P_PART])
            self.pbig[p] = self.pbig.get(p, 0) + total - 1
        self.cst[C_BIG] = 2 if total else 1

    def consume(self, p: int) -> None:
        """CONSUME BY after partition ``p``'s event reported a match: forget the partial
        matches of every partition (ANY) or of ``p`` (PARTITION)."""
        if self.consume_policy == CONSUME_ANY:
            self.tlen[:] = 0
        elif self.consume_policy == CONSUME_PARTITION:
            self.tlen[self.prow[p]] = 0

    def compact(self) -> None:
        """Compact the tECS now (also what ``NEED_COMPACT`` does)."""
        self._fn("_compact_all")(
            self.nodes, self.mt, self.st, self.tstate, self.tlen, self.ulen, self.ul,
            self.prow, self.pcount, self.now, self.by_events, self.has_bound, self.bound)

    def lowest_start(self) -> int | None:
        """The earliest start position of any stored partial match (``None``: none). After
        ``compact`` every stored bottom is live and in its window, so no future complex
        event holds a position below this one."""
        nn = int(self.st[NN])
        nodes = self.nodes[:nn]
        starts = nodes[nodes[:, KIND] == BOTTOM, NPOS]
        return int(starts.min()) if len(starts) else None

    def _flush(self):
        """The outputs gathered so far, and empty output arrays. Arrays at least half full
        are handed over as they are (views of them) and fresh ones taken; a barely used one
        is copied, so that a batch never holds much more memory than its matches."""
        nm, ne = int(self.st[N_OUT]), int(self.st[N_EV])
        self.out_peak = max(self.out_peak, nm)
        out = (self.o_start[:nm], self.o_end[:nm], self.o_part[:nm], self.o_sloc[:nm],
               self.o_eloc[:nm], self.o_off[: nm + 1], self.o_pos[:ne], self.o_lab[:ne])
        self.st[N_OUT] = self.st[N_EV] = 0
        if handed_over(nm, len(self.o_start)):
            self._reset_out()
        else:
            out = tuple(a.copy() for a in out)
            if len(self.o_start) > self.out_cap + 1 or len(self.o_pos) > self.ev_cap:
                self._reset_out()  # back to the cap after an event that had to leave whole
        return out


def handed_over(matches: int, room: int) -> bool:
    """Whether a flush hands its output arrays over rather than copying them: when they
    are at least half full. Copying cost about as much as the kernel's own writes (the
    plain pattern ``A ; B ; C WITHIN 100 EVENTS``, 77M matches enumerated: 35% of the
    engine's time); fresh arrays cost an allocation, which reuses the memory of the batches
    the writers let go."""
    return 2 * matches >= room


def _depth(path) -> int:
    n = 0
    while path is not None:
        path = path[2]
        n += 1
    return n


def _pad(arr: np.ndarray, axis: int, size: int, value) -> np.ndarray:
    """``arr`` grown along ``axis`` to ``size``, new cells set to ``value``."""
    shape = list(arr.shape)
    old = shape[axis]
    if size <= old:
        return arr
    shape[axis] = size
    out = np.full(shape, value, arr.dtype)
    out[tuple(slice(0, old) if d == axis else slice(None) for d in range(arr.ndim))] = arr
    return out
