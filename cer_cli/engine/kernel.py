"""The one evaluator of a CEA: Algorithm 1 of CORE (§4.3), tECS compaction and windowed
enumeration (Algorithm 2), over numpy arrays.

Written over typed arrays so numba can compile it. This module holds only those functions,
as plain Python, and the constants of their arrays' layout; ``engine/jit.py`` compiles them
(``cache=True``: once per machine) when a run is large, and ``engine/kernel_state.py``
(``KernelState``) owns the arrays, calls ``run_events`` and answers what it asks for. Without
numba, or with ``NUMBA_DISABLE_JIT=1``, the very same functions run as plain Python, which
is slow but lets the tests exercise this code with and without compilation.

The tECS (timed enumerable compact set, CORE §4.1–4.2 and App. B) is a DAG of three node
kinds: a *bottom* is where a run started (its position, its window time, and in field ``B``
its index in its partition's stream, which STRICT needs); an *output* marks one event with a
label set on top of its child ``A``; a *union* stands for ``A ∪ B``. Every node stores its
max-start as a position (``MX``, the order union-lists rely on) and as a window time
(``mt``, what windows compare). Unions are only built by the gadgets (a)–(d) of CORE Fig. 5
and by union-lists, which keep the structure time-ordered (``max(A) >= max(B)``) and
3-bounded, so windowed enumeration has output-linear delay. Children always have smaller ids
than their parents, so compaction is one mark pass from the live union-lists plus one
ascending sweep.

Per event (``run_events``): window pruning, Algorithm 1 (the initial det-state with a fresh
bottom first, then the table's det-states in insertion order — the paper's ordered-keys,
which makes every union-list insert legal) writing the new table T' into a spare row and
committing it by swapping row indices (T' never gets copied back), windowed enumeration
from the final det-states (skipped at once when the table holds none), CONSUME BY, and
compaction when the node arrays doubled since the last one. With a LIMIT
(``st[LIMIT_K]``) the loop stops instead of enumerating (``NEED_LIMIT``) and the caller
enumerates only the event's k latest starts, best-first (``kernel_state.latest_first``).

Layout (all owned by ``KernelState``):

* tECS nodes: ``nodes[n] = (kind, npos, mx, a, b, lab)`` (int64) and ``mt[n]`` (int64 or
  float64, the window-time dtype); ``st[NN]`` nodes are in use. The arrays double when full.
* Per partition ``p`` the Algorithm-1 table in row ``r = prow[p]``, in insertion order:
  ``tlen[r]`` entries, entry ``k`` is det-state ``tstate[r, k]`` with union-list
  ``ul[r, k, :ulen[r, k]]``. There is one row more than partitions: the spare row
  ``st[SPARE]`` (``tlen`` 0), where the next event's new table is built. A table has at
  most one entry per det-state, so ``tstate`` is as wide as the number of det-states (the
  caller widens it when states appear); union-lists grow (``ul`` is widened, and the event
  redone, ``NEED_WIDTH``) when needed.
* The det-automaton as a dense table indexed by ``(det-state, symbol column)``:
  ``tunm`` the unmarked target (-1 none, ``UNKNOWN`` not computed yet) and the marked
  moves ``mq/ml[toff : toff + tcnt]`` (target, label set). When the loop meets an
  ``UNKNOWN`` entry it undoes the event (only new nodes and the spare row: the
  partition's table is untouched until the commit) and returns ``NEED_MOVE`` with the
  event index, det-state and column in ``st``; the caller computes the move
  (``LazyDFA.step``), fills the table and calls again from that event.

Output: for every complex event its start and end position, its partition id, the
partition-local indices of its start and end (``o_sloc``/``o_eloc``, for STRICT) and its
marked events (CSR: ``o_off[m] : o_off[m + 1]`` into ``o_pos`` / ``o_lab``), in order of the
triggering event; or only a count (``emit = False``). With ``split`` (nothing
post-processes per event) one event's complex events may span several flushes, so the output
arrays stay at a fixed cap; otherwise they leave in the same flush (see ``_enumerate``).
Every ``st[BUDGET]`` units of work the loop returns ``NEED_YIELD`` — also in the middle of
one event's enumeration, which resumes — so that Python's signal handlers run.

With ``decide`` (the caller post-processes the candidates: strategy, LIMIT, post-filter),
CONSUME BY must wait for what the caller reports: after enumerating an event with
candidates the loop returns ``NEED_DECIDE`` without consuming, and the caller consumes
(``KernelState.consume``) only if the event reports a match.
"""

from __future__ import annotations

import numpy as np

from cer_cli.engine.jit import njit, njit_inline, njit_plain

BOTTOM, OUTPUT, UNION = 0, 1, 2
#: the columns of a tECS node: its kind, its event's position (``NPOS``), its max-start as a
#: position, its children, its label set
KIND, NPOS, MX, A, B, LAB = 0, 1, 2, 3, 4, 5
UNKNOWN = -2

# st[...] slots: scalar state shared with the caller.
NN, ALLOC, COMPACTIONS, PEAK, NEXT_COMPACT, COMPACT_MIN = 0, 1, 2, 3, 4, 5
EVENTS, MATCHES, HAVE_NOW, MISS_STATE, MISS_COL = 6, 7, 8, 9, 10

DONE, NEED_MOVE = 0, 1
CONSUME_NONE, CONSUME_ANY, CONSUME_PARTITION = 0, 1, 2


#: the least int64: a window's lower edge below it is held as it (``_low_edge``)
I64_MIN = -(1 << 63)


@njit_inline
def _low_edge(t, bound):
    """``t - bound``, the earliest start of the window ending at ``t``, without wrapping:
    in int64, -2^63 + 1 minus 3 wrapped around to a huge time, which pruned every run (no
    match, exit 0). Below the least int64 it is the least int64 (nothing is earlier)."""
    if bound > 0 and t < I64_MIN + bound:
        return I64_MIN
    return t - bound


# ---------------------------------------------------------------------------- tECS nodes


@njit_inline
def _add(nodes, mt, st, kind, pos, mx, t, a, b, lab):
    """Append a node; the caller made room (``NEED_ROOM``). Returns its index — and never an
    array: numba reference-counts every array a call returns, which cost ~30 ns per call."""
    n = st[NN]
    nodes[n, KIND] = kind
    nodes[n, NPOS] = pos
    nodes[n, MX] = mx
    nodes[n, A] = a
    nodes[n, B] = b
    nodes[n, LAB] = lab
    mt[n] = t
    st[NN] = n + 1
    st[ALLOC] += 1
    return n


@njit_inline
def _node(nodes, mt, st, left, right):
    return _add(nodes, mt, st, UNION, -1, nodes[left, MX], mt[left], left, right, -1)


@njit_inline
def _union(nodes, mt, st, n1, n2):
    """``⟦n1⟧ ∪ ⟦n2⟧`` for safe nodes of equal max-start, by the gadgets (a)–(d) of CORE
    Fig. 5: at most three new nodes, and the result is safe (time-ordered, 3-bounded)."""
    if nodes[n1, KIND] != UNION:
        return _node(nodes, mt, st, n1, n2)
    if nodes[n2, KIND] != UNION:
        return _node(nodes, mt, st, n2, n1)
    r1 = nodes[n1, B]
    r2 = nodes[n2, B]
    if nodes[r1, MX] >= nodes[r2, MX]:
        u2 = _node(nodes, mt, st, r1, r2)
    else:
        u2 = _node(nodes, mt, st, r2, r1)
    u = _node(nodes, mt, st, nodes[n2, A], u2)
    return _node(nodes, mt, st, nodes[n1, A], u)


@njit_inline
def _merge(nodes, mt, st, lst, length):
    """One safe node for the union-list ``lst[:length]``: the right comb
    ``∨(n0, ∨(n1, … nk))``, ``length - 1`` new nodes."""
    n = lst[length - 1]
    for i in range(length - 2, -1, -1):
        n = _node(nodes, mt, st, lst[i], n)
    return n


@njit
def _widen(arr, width):
    """``arr`` (2-D or 3-D) with its last axis at least ``width`` wide (doubling)."""
    w = arr.shape[-1]
    if width <= w:
        return arr
    neww = max(2 * w, width)
    shape = arr.shape[:-1] + (neww,)
    out = np.empty(shape, arr.dtype)
    out[..., :w] = arr
    return out


@njit_inline
def _insert(nodes, mt, st, nul, nulen, s, n):
    """Add safe node ``n`` (``max(n) <= max(head)``) to the union-list ``nul[s, :nulen[s]]``,
    keeping max-starts strictly decreasing from index 1: an equal max-start is merged with
    ``_union``. Returns False, changing nothing, when the list would grow past ``nul``'s
    width (the caller widens it and redoes the event)."""
    m = nodes[n, MX]
    length = nulen[s]
    for i in range(1, length):
        x = nul[s, i]
        mi = nodes[x, MX]
        if mi == m:
            nul[s, i] = _union(nodes, mt, st, x, n)
            return True
        if mi < m:
            if length >= nul.shape[1]:
                return False
            for j in range(length, i, -1):
                nul[s, j] = nul[s, j - 1]
            nul[s, i] = n
            nulen[s] = length + 1
            return True
    if length >= nul.shape[1]:
        return False
    nul[s, length] = n
    nulen[s] = length + 1
    return True


@njit_inline
def _exec(nodes, mt, st, nul, nulen, nstate, slot_of, ns,
          unm, off, cnt, mq, ml, src, length, pos):
    """EXECTRANS of one det-move on the union-list ``src[:length]``: extend along every
    marking move, reuse the list along the unmarked one. The new table is
    ``nstate/nul/nulen[:ns]`` (the spare row of the table arrays, see ``run_events``) with
    ``slot_of[q]`` its index of ``q``. Allocates at most ``length + 4·cnt + 3`` nodes;
    returns the new ``ns``, or -1 when a union-list outgrew ``nul``'s width."""
    n = -1
    if cnt > 0:
        n = _merge(nodes, mt, st, src, length)
        for j in range(off, off + cnt):
            q = mq[j]
            o = _add(nodes, mt, st, OUTPUT, pos, nodes[n, MX], mt[n], n, -1, ml[j])
            s = slot_of[q]
            if s < 0:
                slot_of[q] = ns
                nstate[ns] = q
                nul[ns, 0] = o
                nulen[ns] = 1
                ns += 1
            elif not _insert(nodes, mt, st, nul, nulen, s, o):
                return -1
    if unm >= 0:
        s = slot_of[unm]
        if s < 0:
            slot_of[unm] = ns
            nstate[ns] = unm
            for i in range(length):
                nul[ns, i] = src[i]
            nulen[ns] = length
            ns += 1
        else:
            if n < 0:
                n = _merge(nodes, mt, st, src, length)
            if not _insert(nodes, mt, st, nul, nulen, s, n):
                return -1
    return ns


# ---------------------------------------------------------------------------- compaction


@njit
def _compact(nodes, mt, st, tstate, tlen, ulen, ul, taus, windowed):
    """Keep only the nodes every partition's table can still enumerate, then drop emptied
    table entries. ``taus[p]`` is partition ``p``'s window lower bound (used when
    ``windowed[p]``): a list entry whose max-start left the window goes, and a union whose
    right child left it is replaced by its left child (this only shortens spines, so the
    invariants hold). Window times never decrease, so what is out now stays out."""
    total = st[NN]
    flag = np.zeros(total, np.uint8)  # 0 dead, 1 keep, 2 union replaced by its left child
    stack = np.empty(64, np.int64)
    for p in range(tlen.shape[0]):
        tau = taus[p]
        win = windowed[p]
        top = 0
        for k in range(tlen[p]):
            for e in range(ulen[p, k]):
                x = ul[p, k, e]
                if (not win) or mt[x] >= tau:
                    if top >= stack.shape[0]:
                        stack = _widen(stack, top + 1)
                    stack[top] = x
                    top += 1
        while top > 0:
            top -= 1
            x = stack[top]
            if flag[x]:
                continue
            k = nodes[x, KIND]
            if k == UNION:
                if top + 2 > stack.shape[0]:
                    stack = _widen(stack, top + 2)
                stack[top] = nodes[x, A]
                top += 1
                r = nodes[x, B]
                if (not win) or mt[r] >= tau:
                    flag[x] = 1
                    stack[top] = r
                    top += 1
                else:
                    flag[x] = 2
            else:
                flag[x] = 1
                if k == OUTPUT:
                    if top + 1 > stack.shape[0]:
                        stack = _widen(stack, top + 1)
                    stack[top] = nodes[x, A]
                    top += 1
        # drop out-of-window entries and then emptied table entries (order kept)
        kk = 0
        for k in range(tlen[p]):
            m = 0
            for e in range(ulen[p, k]):
                x = ul[p, k, e]
                if (not win) or mt[x] >= tau:
                    ul[p, kk, m] = x
                    m += 1
            if m > 0:
                tstate[p, kk] = tstate[p, k]
                ulen[p, kk] = m
                kk += 1
        tlen[p] = kk
    # one ascending sweep, in place (survivors only move down; children are smaller)
    remap = np.full(total, -1, np.int64)
    nn = 0
    for x in range(total):
        f = flag[x]
        if f == 1:
            k = nodes[x, KIND]
            a = nodes[x, A]
            b = nodes[x, B]
            if k != BOTTOM:
                a = remap[a]
            if k == UNION:
                b = remap[b]
            nodes[nn, KIND] = k
            nodes[nn, NPOS] = nodes[x, NPOS]
            nodes[nn, MX] = nodes[x, MX]
            nodes[nn, A] = a
            nodes[nn, B] = b
            nodes[nn, LAB] = nodes[x, LAB]
            mt[nn] = mt[x]
            remap[x] = nn
            nn += 1
        elif f == 2:
            remap[x] = remap[nodes[x, A]]
    for p in range(tlen.shape[0]):
        for k in range(tlen[p]):
            for e in range(ulen[p, k]):
                ul[p, k, e] = remap[ul[p, k, e]]
    st[NN] = nn
    st[COMPACTIONS] += 1


# ---------------------------------------------------------------------------- the loop

# Why the loop is written as a resumable state machine: numba reference-counts every array
# a variable may be re-bound to inside a loop (atomic increments on every iteration), which
# cost more than the algorithm itself. So ``run_events`` never re-binds an array: it returns
# to the caller whenever an array is too small (``NEED_ROOM``/``NEED_WIDTH`` while building
# an event's new table, which is then undone and redone; ``NEED_OUT`` during its enumeration, which
# resumes), and the caller grows the array (or flushes the outputs) and calls again.

# st[...] slots of the resumable loop: the phase of the current event and what it needs
PHASE, P_PART, P_POS, P_PRUNE, P_ROW, N_OUT, N_EV = 11, 12, 13, 14, 15, 16, 17
NEED_NODES, NEED_SCRATCH, NEED_ES, NEED_PATH, SKIPPED = 18, 19, 20, 21, 22
# LIMIT in the kernel: ``st[LIMIT_K]`` is ``k + 1`` (0: no limit); ``st[LIMIT_DONE]`` is
# ``reported + 1`` once the caller enumerated the event's k latest starts (0: not yet).
LIMIT_K, LIMIT_DONE = 23, 24
# the work budget (``st[BUDGET]`` units, 0: none; ``st[WORK]`` used since the last return)
# and the resumable enumeration of the current event (see ``_enumerate``)
WORK, BUDGET, SPLIT, E_ON, E_K, E_E, E_TOP, E_REP, E_OUT0, E_EV0 = range(25, 35)
# the table row no partition holds (where the next event's new table is written)
SPARE, NSLOTS = 35, 36
UPDATE, ENUMERATE = 0, 2
NEED_ROOM, NEED_WIDTH, NEED_OUT, NEED_COMPACT, NEED_DECIDE, NEED_LIMIT = 2, 3, 4, 5, 6, 7
NEED_YIELD = 8
#: ``_update``'s answer for an event that changes no table (not a status of ``run_events``)
IDLE = -1


@njit
def _compact_all(nodes, mt, st, tstate, tlen, ulen, ul, prow, pcount, now, by_events,
                 has_bound, bound):
    """Compact with every partition's window lower bound (per partition for EVENTS
    windows, the latest time for time windows), by table row (``prow``)."""
    if st[NN] > st[PEAK]:
        st[PEAK] = st[NN]
    taus = np.zeros(tlen.shape[0], mt.dtype)
    windowed = np.zeros(tlen.shape[0], np.bool_)
    if has_bound:
        for pp in range(prow.shape[0]):
            r = prow[pp]
            if by_events:
                taus[r] = _low_edge(pcount[pp] - 1, bound)
                windowed[r] = True
            elif st[HAVE_NOW]:
                taus[r] = _low_edge(now[0], bound)
                windowed[r] = True
    _compact(nodes, mt, st, tstate, tlen, ulen, ul, taus, windowed)
    st[NEXT_COMPACT] = max(st[COMPACT_MIN], 2 * st[NN])


@njit_inline
def _enumerate(nodes, mt, st, tstate, ulen, ul, final, p, ns, pos, local, prune, etau, emit,
               es_node, es_depth, path_pos, path_lab,
               o_start, o_end, o_part, o_sloc, o_eloc, o_off, o_pos, o_lab):
    """Windowed enumeration (Algorithm 2) of the complex events ending at ``pos`` (index
    ``local`` in partition ``st[P_PART]``) from the final det-states of the table in row
    ``p`` (the partition's row, see ``run_events``): a depth-first
    walk that follows left children and pushes a right child only when its max-start is in
    the window, so every walk ends at a bottom that yields a complex event.

    Resumable, so that one event with astronomically many complex events neither blocks
    the caller nor fills memory: the walk (det-state ``st[E_K]``, next union-list entry
    ``st[E_E]``, stack ``es_*[:st[E_TOP]]`` and the path below it) stays in ``st`` and the
    arrays across returns. Appends to the outputs from ``st[N_OUT]``/``st[N_EV]``. Returns
    the number of complex events of the event once it is done (``st[E_ON]`` back to 0);
    -2 when ``st[BUDGET]`` units of work (nodes visited, counted in ``st[WORK]``) are used
    up; -1 when a stack, the path or an output array is full (the caller grows it, or
    flushes the outputs). With ``st[SPLIT]`` a flush may come mid-event; without it (the
    caller post-processes each event's complex events together) a full output array
    restarts the event from scratch (``st[E_ON]`` 0, outputs back to ``st[E_OUT0]``) when
    earlier events' outputs can be flushed instead, and grows otherwise."""
    if st[E_ON] == 0:
        st[E_ON] = 1
        st[E_K] = 0
        st[E_E] = 0
        st[E_TOP] = 0
        st[E_REP] = 0
        st[E_OUT0] = st[N_OUT]
        st[E_EV0] = st[N_EV]
    nm = st[N_OUT]
    ne = st[N_EV]
    k = st[E_K]
    e = st[E_E]
    top = st[E_TOP]
    reported = st[E_REP]
    part = st[P_PART]
    budget = st[BUDGET]
    work = st[WORK]
    status = 0
    while k < ns:
        if top == 0:
            if (not final[tstate[p, k]]) or e >= ulen[p, k]:
                k += 1
                e = 0
                continue
            root = ul[p, k, e]
            e += 1
            if prune and mt[root] < etau:
                continue
            es_node[0] = root
            es_depth[0] = 0
            top = 1
        top -= 1
        x = es_node[top]
        d = es_depth[top]
        while True:
            if budget > 0 and work >= budget:
                status = -2
                break
            work += 1
            kind = nodes[x, KIND]
            if kind == BOTTOM:
                if emit:
                    if nm + 1 >= o_start.shape[0] or ne + d > o_pos.shape[0]:
                        st[NEED_SCRATCH] = ne + d
                        status = -1
                        break
                    o_start[nm] = nodes[x, NPOS]
                    o_end[nm] = pos
                    o_part[nm] = part
                    o_sloc[nm] = nodes[x, B]
                    o_eloc[nm] = local
                    for j in range(d - 1, -1, -1):
                        o_pos[ne] = path_pos[j]
                        o_lab[ne] = path_lab[j]
                        ne += 1
                    nm += 1
                    o_off[nm] = ne
                reported += 1
                break
            if kind == OUTPUT:
                if d >= path_pos.shape[0]:
                    st[NEED_PATH] = d + 1
                    status = -1
                    break
                path_pos[d] = nodes[x, NPOS]
                path_lab[d] = nodes[x, LAB]
                d += 1
                x = nodes[x, A]
            else:
                r = nodes[x, B]
                if (not prune) or mt[r] >= etau:
                    if top + 2 > es_node.shape[0]:  # one slot stays free for the push-back
                        st[NEED_ES] = top + 2
                        status = -1
                        break
                    es_node[top] = r
                    es_depth[top] = d
                    top += 1
                x = nodes[x, A]
        if status != 0:
            # the node not walked yet goes back on the stack: its path ``[:d]`` is intact,
            # as everything above it on the stack only ever writes the path from ``d`` on
            es_node[top] = x
            es_depth[top] = d
            top += 1
            break
    st[WORK] = work
    if status == -1 and emit and not st[SPLIT] and st[E_OUT0] > 0 and st[NEED_ES] == 0 \
            and st[NEED_PATH] == 0:
        # outputs full and the event must leave whole: drop its outputs, the caller
        # flushes the earlier events' and the event is enumerated again
        st[N_OUT] = st[E_OUT0]
        st[N_EV] = st[E_EV0]
        st[E_ON] = 0
        return -1
    st[N_OUT] = nm
    st[N_EV] = ne
    if status != 0:
        st[E_K] = k
        st[E_E] = e
        st[E_TOP] = top
        st[E_REP] = reported
        return status
    st[E_ON] = 0
    return reported


@njit_inline
def _update(i, cols, positions, keys, times, hastime, by_events, has_bound, bound, initial,
            final, tunm, toff, tcnt, mq, ml, nodes, mt, st, now, ctx,
            tstate, tlen, ulen, ul, prow, pcount, slot_of, one):
    """Algorithm 1 (CORE §4.3) for event ``i``: its partition's table T (row ``prow[p]``)
    read, pruned by the window, and the new table T' built in the spare row
    (``st[SPARE]``), then committed by swapping the two rows (T' is never copied back).
    Returns ``DONE`` (committed; the event's partition, row, position and pruning are in
    ``st`` for ``_ended``), ``IDLE`` (the event changes no table: only its partition's
    count advanced), or ``NEED_MOVE``/``NEED_ROOM``/``NEED_WIDTH`` with the event undone."""
    c = cols[i]
    pos = positions[i]
    p = keys[i]
    r = prow[p]
    st[WORK] += 1 + tlen[r]
    local = pcount[p]
    if by_events:
        t = local
        ht = True
    else:
        t = times[i]
        ht = hastime[i]
    prune = has_bound and ht
    tau = _low_edge(t, bound)
    # One pass over T (row r), building T' in the spare row. T is only pruned (idempotent)
    # until the commit, so a move not known yet or too small a node array undoes the event
    # (its nodes are dropped) and returns; the caller fills the move or grows the arrays
    # and the event is done again from the start.
    sp = st[SPARE]
    nstate = tstate[sp]
    nulen = ulen[sp]
    nul = ul[sp]
    nn0 = st[NN]
    alloc0 = st[ALLOC]
    cap = nodes.shape[0]
    ns = 0
    status = DONE
    q = initial
    unm = tunm[q, c]
    cnt0 = tcnt[q, c]
    if unm == UNKNOWN:  # asked even without a window time: the move table fills alike
        st[MISS_STATE] = q
        st[MISS_COL] = c
        return NEED_MOVE
    # an event that moves every live det-state to itself, unmarked, starts nothing
    # and ends nothing changes no table: only its partition's count advances
    idle = (not ht) or (unm < 0 and cnt0 == 0)
    if ht and (unm >= 0 or cnt0 > 0):
        need = 5 + 4 * cnt0  # nodes: the bottom, and ``_exec``'s bound per list
        if nn0 + need > cap:
            st[NEED_NODES] = nn0 + need
            return NEED_ROOM
        st[WORK] += need
        one[0] = _add(nodes, mt, st, BOTTOM, pos, pos, t, -1, local, -1)
        ns = _exec(nodes, mt, st, nul, nulen, nstate, slot_of, ns,
                   unm, toff[q, c], cnt0, mq, ml, one, 1, pos)
    for k in range(tlen[r]):
        if ns < 0:
            break
        length = ulen[r, k]
        if prune:
            if length == 0 or mt[ul[r, k, 0]] < tau:
                continue  # the head has the list's max-start: all of it expired
            if mt[ul[r, k, length - 1]] < tau:  # drop expired entries, in place
                m = 0
                for e in range(length):
                    x = ul[r, k, e]
                    if mt[x] >= tau:
                        ul[r, k, m] = x
                        m += 1
                ulen[r, k] = m
                length = m
        q = tstate[r, k]
        unm = tunm[q, c]
        cnt0 = tcnt[q, c]
        if unm == UNKNOWN:
            st[MISS_STATE] = q
            st[MISS_COL] = c
            status = NEED_MOVE
            break
        need = length + 4 * cnt0 + 3
        if st[NN] + need > cap:
            st[NEED_NODES] = st[NN] + need
            status = NEED_ROOM
            break
        st[WORK] += need
        if idle and (unm != q or cnt0 > 0 or final[q]):
            idle = False
        ns = _exec(nodes, mt, st, nul, nulen, nstate, slot_of, ns,
                   unm, toff[q, c], cnt0, mq, ml, ul[r, k], length, pos)
    if ns < 0:  # a union-list outgrew the rows' width
        for q in range(slot_of.shape[0]):
            slot_of[q] = -1
        st[NEED_SCRATCH] = ul.shape[2] + 1
        status = NEED_WIDTH
    else:
        for k in range(ns):
            slot_of[nstate[k]] = -1
    if status != DONE or idle:  # undo: T is intact, T' and its nodes are dropped
        st[NN] = nn0
        st[ALLOC] = alloc0
        if status != DONE:
            return status
        pcount[p] = local + 1
        if ht:
            now[0] = t
            st[HAVE_NOW] = 1
        st[EVENTS] += 1
        st[SKIPPED] += 1
        return IDLE
    # ---- commit: the new table replaces the old one by swapping rows
    pcount[p] = local + 1
    if ht:
        now[0] = t
        st[HAVE_NOW] = 1
    prow[p] = sp
    tlen[sp] = ns
    tlen[r] = 0
    st[SPARE] = r
    st[P_PART] = p
    st[P_ROW] = sp
    st[P_POS] = pos
    st[P_PRUNE] = 1 if prune else 0
    ctx[0] = tau
    st[EVENTS] += 1
    return DONE


@njit_inline
def _ended(i, by_events, hastime, emit, count_paths, final, nodes, mt, st, ctx,
           tstate, tlen, ulen, ul, pcount, cnt, cst,
           es_node, es_depth, path_pos, path_lab,
           o_start, o_end, o_part, o_sloc, o_eloc, o_off, o_pos, o_lab):
    """How many complex events end at the committed event ``i``: windowed enumeration
    (Algorithm 2) from the final det-states of its table (``st[P_ROW]``), or LIMIT k's
    number once the caller enumerated its latest starts, or (count only, no window) the
    sum of node counts. Negative when the caller must act first (``-NEED_LIMIT``,
    ``-NEED_BIGCOUNT``, ``-NEED_YIELD``, ``-NEED_OUT``; the call then resumes)."""
    r = st[P_ROW]
    prune = st[P_PRUNE] == 1
    reported = 0
    ended = st[E_ON] != 0  # a final det-state in the table (or an enumeration resumes)
    if not ended:
        for k in range(tlen[r]):
            if final[tstate[r, k]]:
                ended = True
                break
    if (by_events or hastime[i]) and st[LIMIT_K] > 0:
        # LIMIT k: the caller enumerates the k latest starts (``latest_first``)
        if st[LIMIT_DONE] > 0:
            reported = st[LIMIT_DONE] - 1
            st[LIMIT_DONE] = 0
        elif st[LIMIT_K] > 1 and ended:
            return -NEED_LIMIT
    elif count_paths and hastime[i]:
        # count only, no window: sum node counts instead of enumerating
        if cst[C_BIG] > 0:  # the caller counted this event (and added all but 1)
            reported = cst[C_BIG] - 1
            cst[C_BIG] = 0
        else:
            reported = _count_event(nodes, st, cnt, cst, tstate, ulen, ul, final, r, tlen[r])
            if reported < 0 or st[MATCHES] + reported > BIG:
                return -NEED_BIGCOUNT
        cst[C_COUNTED] += 1
    elif (by_events or hastime[i]) and ended:  # (no final det-state: nothing ends)
        reported = _enumerate(nodes, mt, st, tstate, ulen, ul, final, r, tlen[r],
                              st[P_POS], pcount[st[P_PART]] - 1, prune, ctx[0], emit,
                              es_node, es_depth, path_pos, path_lab,
                              o_start, o_end, o_part, o_sloc, o_eloc, o_off, o_pos, o_lab)
        if reported == -2:
            st[WORK] = 0
            return -NEED_YIELD
        if reported < 0:
            return -NEED_OUT
    return reported


@njit_plain
def run_events(
    i, stop, cols, positions, keys, times, hastime, by_events, has_bound, bound, consume, emit,
    decide, initial, final, tunm, toff, tcnt, mq, ml,
    nodes, mt, st, now, ctx,
    tstate, tlen, ulen, ul, prow, pcount,
    slot_of, one,
    es_node, es_depth, path_pos, path_lab,
    o_start, o_end, o_part, o_sloc, o_eloc, o_off, o_pos, o_lab,
    count_paths, cnt, cst, pmatch,
):
    """Events ``i … stop-1`` (``cols``: symbol columns of the transition table, ``keys``:
    partition ids, ``times``/``hastime``: window times). Returns ``(status, next event)``:
    ``DONE``, ``NEED_MOVE`` (see module doc), ``NEED_DECIDE`` (with ``decide``: event
    ``next - 1`` of partition ``st[P_PART]`` has candidates, not consumed yet), ``NEED_LIMIT``
    (with ``st[LIMIT_K]``: event ``next``'s table is committed and has final det-states; the
    caller enumerates its k latest starts, sets ``st[LIMIT_DONE]`` and calls again),
    ``NEED_BIGCOUNT`` (with ``count_paths``: event ``next``'s count does not fit in int64;
    the caller counts it, sets ``cst[C_BIG]`` and calls again), or a
    ``NEED_*`` for an array that is too small (sizes in ``st``). ``ctx`` holds the event
    time and window bound across a return.

    The tables live in rows: partition ``p``'s is row ``prow[p]`` of ``tstate``/``tlen``/
    ``ulen``/``ul``, and one more row, ``st[SPARE]``, belongs to no partition. ``pmatch[p]``
    counts what ``st[MATCHES]`` counts, per partition (``cer match --count --by KEY``). Algorithm 1
    writes the new table T' straight into the spare row while it reads T from the
    partition's row; committing T' is then a swap of the two row indices, not a copy of
    every live union-list. T is left untouched until the swap, so an event whose new
    union-list outgrows the rows' width (``NEED_WIDTH``) is simply undone (its nodes
    dropped) and redone once the caller widened ``ul``.

    Per event: ``_update`` (Algorithm 1), then ``_ended`` (what ends at it), then CONSUME BY
    and compaction. The shape is numba's, not the algorithm's: one flat list of arrays and
    scalars (a jitclass or a tuple of arrays would be reference-counted per call), a
    resumable loop that returns a status instead of growing an array or raising (an array
    re-bound in a loop costs atomic reference counts per iteration), the state across
    returns in ``st``, and helpers inlined (``njit_inline``: an array argument of a
    compiled call is some seven machine words)."""
    while True:
        if st[PHASE] == UPDATE:
            if i >= stop:
                return DONE, i
            if st[BUDGET] > 0 and st[WORK] >= st[BUDGET]:  # let Python run (signals)
                st[WORK] = 0
                return NEED_YIELD, i
            status = _update(i, cols, positions, keys, times, hastime, by_events, has_bound,
                             bound, initial, final, tunm, toff, tcnt, mq, ml, nodes, mt, st,
                             now, ctx, tstate, tlen, ulen, ul, prow, pcount, slot_of, one)
            if status == IDLE:
                i += 1
            elif status == DONE:
                st[PHASE] = ENUMERATE
            else:
                return status, i
        else:
            reported = _ended(i, by_events, hastime, emit, count_paths, final, nodes, mt, st,
                              ctx, tstate, tlen, ulen, ul, pcount, cnt, cst,
                              es_node, es_depth, path_pos, path_lab,
                              o_start, o_end, o_part, o_sloc, o_eloc, o_off, o_pos, o_lab)
            if reported < 0:
                return -reported, i
            st[PHASE] = UPDATE
            if reported:
                st[MATCHES] += reported
                pmatch[st[P_PART]] += reported
                if decide:  # the caller consumes if the event reports a match after all
                    return NEED_DECIDE, i + 1
                if consume == CONSUME_ANY:
                    for pp in range(tlen.shape[0]):
                        tlen[pp] = 0
                elif consume == CONSUME_PARTITION:
                    tlen[st[P_ROW]] = 0
            i += 1
            # ---- memory: compact when the arrays doubled since the last compaction
            if st[NN] > st[NEXT_COMPACT]:
                return NEED_COMPACT, i


# ---------------------------------------------------------------------------- counting

# Without a window the complex events below a node never change (the tECS is a DAG that
# only grows), so their number is a sum over the DAG: count(bottom) = 1, count(output) =
# count(A), count(union) = count(A) + count(B). ``--count`` then costs time linear in the
# tECS, not in the output (``A+ ; B`` over n As has 2^n - 1 matches). With a window an
# event's bound tau prunes subtrees, so the count of a node depends on tau and windowed
# queries keep counting by enumeration (the window bounds it).

#: A node count above this is stored as -1 in ``cnt`` ("too big"), and an event whose count
#: is too big (or would push ``st[MATCHES]`` past it) is finished by the caller with Python
#: ints (``NEED_BIGCOUNT``, ``KernelState._big_count``).
BIG = 1 << 62
# cst[...] slots (``KernelState.cst``): ``cnt`` is valid below C_DONE for compaction number
# C_EPOCH; C_COUNTED events were counted this way; C_BIG is 1 + (caller's count > 0) once
# the caller counted the current event (0: not yet).
C_DONE, C_EPOCH, C_COUNTED, C_BIG, CSLOTS = 0, 1, 2, 3, 4
NEED_BIGCOUNT = 16


@njit_plain
def _fill_counts(nodes, st, cnt, cst):
    """Extend ``cnt`` to every node: children have smaller ids, so one ascending sweep from
    where the last one stopped (from 0 after a compaction renumbered the nodes)."""
    if cst[C_EPOCH] != st[COMPACTIONS]:
        cst[C_EPOCH] = st[COMPACTIONS]
        cst[C_DONE] = 0
    for n in range(cst[C_DONE], st[NN]):
        kind = nodes[n, KIND]
        if kind == BOTTOM:
            cnt[n] = 1
        elif kind == OUTPUT:
            cnt[n] = cnt[nodes[n, A]]
        else:
            x = cnt[nodes[n, A]]
            y = cnt[nodes[n, B]]
            cnt[n] = -1 if x < 0 or y < 0 or x + y > BIG else x + y
    cst[C_DONE] = st[NN]


@njit_inline
def _count_event(nodes, st, cnt, cst, tstate, ulen, ul, final, p, ns):
    """How many complex events end at the current event of partition ``p`` (no window):
    the sum of the node counts of the final det-states' union-list entries; -1 if too big."""
    _fill_counts(nodes, st, cnt, cst)
    total = 0
    for k in range(ns):
        if not final[tstate[p, k]]:
            continue
        for e in range(ulen[p, k]):
            c = cnt[ul[p, k, e]]
            if c < 0 or total + c > BIG:
                return -1
            total += c
    return total
