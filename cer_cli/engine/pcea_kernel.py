"""The hash join's kernel: Algorithm 1 of the PCEA paper (Pinto & Riveros, Section 5,
Appendix C) over flat arrays, the PCEA that ``cer_cli.compiler.pcea`` builds.

``engine/pcea_state.py`` (``JoinState``: the PCEA's tables, canonical key ids, growth,
compaction, ``MatchBatch`` output, resuming) runs it for ``HashJoinEngine`` (``engine/pcea.py``)
whenever the shape allows (``pcea_state.unsupported``); windows over float times keep the
Python objects (``HashJoinEngine._on_kernel``). The ordered index it uses is
``engine/ordered_kernel.py``.

Written over typed arrays so numba can compile it, like ``engine/kernel.py`` (the CEA's):
this module holds only those functions, as plain Python, and the constants of their
arrays' layout; ``engine/jit.py`` compiles them (with ``engine/ordered_kernel.py``, the ordered
index) when a run is large, and ``engine/pcea_state.py`` (``JoinState``) owns the arrays,
calls ``run_events`` and answers what it returns for. Without numba, or with
``NUMBA_DISABLE_JIT=1``, the very same functions run as plain Python.

Runs are kept factorised in DS_w, a DAG of nodes. A node stands for a set of runs: its
*payload* (state, position, window time, the references ``prod`` to the sets of runs it
adopted, one per source state) gives the runs ending at its own event, and its union
children (``H_LEFT``, ``H_RIGHT``) hold more runs of the same state and key: a persistent
Braun heap ordered by ``(max-start, position)``, largest on top (``h_union``). ``M_MS``
(max-start) is the latest start time of any run in the node's payload; union children never
have a larger one, so it is also the latest start of the whole heap: a heap whose max-start
is before the window holds no live run and is dropped in O(1).

A reference is ``id << 2 | kind``: a heap node (``HEAP``), an ordered-index subtree
(``TREE``, ``engine.ordered_kernel``), a *bundle* (``BUNDLE``: the pieces an ordered index
returned for one probe, adopted together) or a *flat list* (``FLAT``: the same runs written
out, when they are at most ``FLAT_MAX`` and either whole runs — a first step's, which adopted
nothing — or runs that each adopted one set, which the list keeps beside each run; see
``_flat``). -1 is no reference.

Per event (``_update_events``, which ``run_events`` calls once per event that ends runs):

1. *FireTransitions*: for every state whose step the event takes, probe the index entry
   ``(partition, source state, key)`` of each source of its transition (the key computed on
   the new event); when every probe finds a live heap, ``_extend`` makes one new node
   adopting them. A source compared by an ordered index gives the pieces in range
   (``_in_range``); a chain step whose state carries a key adopts, separately, the runs of
   every live carried value under its probe key (a nested entry: one child entry per
   carried value); an iterated state ``(E AS y)+`` also adopts the previous iterations
   from its loop index (slot ``S + q``), in range of its register if it has one.
2. *UpdateIndices*: each new node that some transition consumes goes into the entry its
   consumer probes (and its loop's, for an iterated state) under its key: a heap
   ``h_union``, or with a compared value an ordered-index ``t_insert``. All transitions
   fire before any index changes, so an event never joins a run it created itself. One
   insertion per event into a tree that no live run reaches through pieces (only flat lists,
   which copy, have read it: ``V_SHARED``) rewrites it in place instead, last
   (``_insert_in_place``).
3. the new nodes of final states are enumerated (``_enumerate``): every run under them
   whose start is in the window, pruning by max-start; each visited heap node yields a
   run, so the delay is linear in the size of each match. Counted (``--count``) with an
   iterated step and no time window, they are counted over the DAG instead
   (``_count_dag``): each shared set once per event, not each of the exponentially many
   runs.

An event is a transaction: the index entries it changes are journaled (``jn``), and when
an array is full mid-event (``FAIL``) the event is undone — its nodes dropped, the entries
restored — and ``run_events`` returns ``NEED_ROOM``; the caller grows the array and calls
again from the same event. Nothing reachable is ever written: nodes are persistent — except
an unshared tree's, which nothing but its index entry reaches; rewritten after every other
change of the event, when nothing can fail any more.

The index is one open-addressing hash table over rows ``(partition, slot, parent entry,
key ids…)`` (``hk``): the ids are the events' values canonicalised by the caller (equal
exactly when ``=`` holds). Entries whose runs left the window stay until a compaction
(``compact``, when the arrays doubled since the last one) rebuilds the table from the live
entries, drops every node no live run reaches and renumbers the rest, so memory follows
the window rather than the log.

Every ``st[BUDGET]`` units of work (events, nodes made, runs visited) ``run_events``
returns ``NEED_YIELD`` — also in the middle of one event's enumeration, which resumes — so
that Python's signal handlers run.

Layout (all owned by ``JoinState``):

* DS_w nodes: ``hi[n] = (position, state, left, right, bit, prod offset, prod count, has a
  time)`` (int64) and ``hm[n] = (max-start, window time)`` (the window-time dtype, int64 or
  float64); ``pr`` the prod references. Tree nodes: ``engine.ordered_kernel``. Bundles:
  ``bi[b] = (offset, count, flat)`` into the piece references ``pc``, ``bm[b]`` their
  max-start. A flat list is a bundle with ``flat`` set (``FLAT_RUNS``, ``FLAT_KIDS``) whose
  ``pc`` range holds its label, the smallest max-start, then ``(position, max-start, the set
  it adopted or NULL)`` per run, in enumeration order.
* The PCEA: per state ``qt[q]`` (``Q_*``), per index slot ``sl[s]`` (``L_*``; slot q holds
  the runs of q as its consumer probes them, slot S + q the loop index of an iterated q),
  per source of a transition ``src[e]`` (``R_*``), and key specifications (``kso[k]`` an
  offset and count into ``kse``: a value column ``c >= 0`` of ``CV``, or ``-1 - i`` the run's
  i-th carried value).
* Per event of the slice: ``act`` (bit mask of the states it may take), ``pos``, ``part``
  (partition id), ``tt``/``hast`` (window time: the position in the partition for EVENTS
  windows), ``CV`` (class values as canonical ids), ``CMPV`` (compared values as float64,
  NaN for none: exact, or ranks in one order, see ``engine.pcea``).
"""

from __future__ import annotations

import numpy as np

from cer_cli.engine.jit import njit, njit_inline, njit_plain
from cer_cli.engine.ordered_kernel import (
    ALONE,
    BUNDLE,
    C_TREE_NODES,  # noqa: F401 - an st slot, read through this module by pcea_state
    FAIL,
    FLAT,
    HEAP,
    MANY,
    NT,
    NULL,
    T_CNT,
    T_KID,
    T_LAB,
    T_LEFT,
    T_MN,
    T_MS,
    T_NMS,
    T_NODE,
    T_POS,
    T_RIGHT,
    TREE,
    t_delete_in,
    t_insert,
    t_insert_in,
    t_pieces,
)

# bundles: ``bi`` columns, and a flat list's head in ``pc`` (then its entries, ``F_W`` cells
# each: the run's position, its max-start, the set it adopted or NULL)
B_OFF, B_CNT, B_FLAT = 0, 1, 2
BI_WIDTH = 3
F_LAB, F_MIN, F_HEAD = 0, 1, 2
F_W = 3
#: ``B_FLAT``: a bundle of pieces; a flat list of whole runs (a first step's: each entry is
#: a run); a flat list whose entries each adopted one set (a run goes on into it)
PIECES, FLAT_RUNS, FLAT_KIDS = 0, 1, 2
#: the most runs a flat list holds: building one costs the probe that many steps (bounded,
#: whatever the window), and saves every enumeration through it the tree's walk
FLAT_MAX = 32
#: ``_flat``'s answer when the runs stay pieces
NO_FLAT = -3

# DS_w node columns
H_POS, H_STATE, H_LEFT, H_RIGHT, H_BIT, H_POFF, H_PCNT, H_HAST = 0, 1, 2, 3, 4, 5, 6, 7
HI_WIDTH = 8
M_MS, M_TIME = 0, 1

# the PCEA's tables
Q_SOFF, Q_SCNT, Q_CARRY, Q_LOOP, Q_LREL, Q_LKEY, Q_LPV, Q_FINAL, Q_SLOTA, Q_SLOTB, Q_LAB, \
    Q_NCAR = range(12)
QT_WIDTH = 12
L_MODE, L_OCOL, L_KEY, L_OWN, L_CAR = range(5)
SL_WIDTH = 5
#: how a slot finds a run's key: the event's columns, built per run (carried values), or
#: that key with the carried values nested under it (a parent entry per probe key)
MODE_COLUMN, MODE_PER_RUN, MODE_NESTED = 0, 1, 2
R_P, R_REL, R_KEY, R_PV = range(4)
SRC_WIDTH = 4

# the index (hash table): key rows and entry fields
K_PART, K_SLOT, K_PARENT, K_IDS = 0, 1, 2, 3
V_USED, V_ROOT, V_HEAD, V_TAIL, V_NEXT, V_SHARED = range(6)
HV_WIDTH = 6
#: ``V_SHARED`` of an entry whose tree no adopted piece references: while the window's low
#: end is above ``V_SHARED`` (the latest max-start of the pieces adopted from it), no live
#: run reaches an old version of the tree, and its updates rewrite it in place
UNSHARED = -(1 << 62) - 1
#: a journal row whose entry was created in the event (undo clears it)
J_NEW = -1

# st slots. 0..14 are saved at each event's start and restored when it is undone.
NH = 0
# NT = 1 (engine.ordered_kernel)
NB, NPC, NPR = 2, 3, 4
C_EXTENDS, C_UNIONS, C_UNION_NODES, C_MAX_UNION = 5, 6, 7, 8
# C_TREE_NODES = 9 (engine.ordered_kernel)
C_PROBES, C_TREE_INSERTS, C_MAX_PIECES, HUSED, C_FLATS = 10, 11, 12, 13, 14
NSNAP = 15
NJ, MATCHES, EVENTS, WORK, BUDGET, PHASE, NF = 15, 16, 17, 18, 19, 20, 21
E_ON, E_F, E_TOP, E_REP, E_OUT0, E_EV0 = 22, 23, 24, 25, 26, 27
N_OUT, N_EV, EV_POS, EV_PART, NEED_WHAT, NEED_SIZE, NEXT_COMPACT, ADDED = (
    28, 29, 30, 31, 32, 33, 34, 35)
LIVE_ENTRIES, COMPACTIONS, C_IN_PLACE = 36, 37, 38
#: set once a time or attribute window's run fed an event without a time: a run may then
#: start at one, so the enumeration checks each run's start on its DS_w node, and no flat
#: list is built (its entries have no node). Before, every start has a time, whose node's
#: max-start is that time (times never decrease): max-start pruning alone is exact, as for
#: an EVENTS window, and the flat lists built then hold only such starts, all earlier than
#: any event without a time
NO_FLATS = 39
SNAP = 40
#: the event ``_update_events`` stopped at
EV_AT = SNAP + NSNAP
#: a count (``emit`` off) counts each event's runs over the DAG (``_count_dag``), not one by
#: one; ``C_STAMP``: the event whose counts ``cm`` holds (one per counted event)
DAG_COUNT, C_STAMP = EV_AT + 1, EV_AT + 2
NSLOTS = EV_AT + 3

PH_UPDATE, PH_ENUM = 0, 1

# what run_events returns for
DONE, NEED_YIELD, NEED_OUT, NEED_ROOM, NEED_COMPACT = 0, 1, 2, 3, 4
#: an event's count over the DAG, or the run's total with it, would pass ``COUNT_MAX``: the
#: caller moves the total into a Python integer, or counts the event exactly (``run_events``)
NEED_BIG = 6
#: ``_update_events``: an event's final nodes are to enumerate (``run_events`` never says it)
U_ENUM = 5
#: NEED_WHAT codes: the array to grow (NEED_ROOM, NEED_OUT)
W_HEAP, W_TREE, W_BUNDLE, W_PIECES, W_PROD, W_TABLE, W_JOURNAL, W_STACK, W_NEW, \
    W_ESTACK, W_TODO, W_PATH, W_OUT = range(13)

# now[...] slots (window-time dtype)
NOW_FTIME, NOW_LO = 0, 1

_M31 = 0x7FFFFFFF


# ---------------------------------------------------------------------------- DS_w nodes


@njit_inline
def ref_ms(hm, tm, bm, ref):
    """The max-start of a referenced set of runs (its latest start)."""
    k = ref & 3
    x = ref >> 2
    if k == HEAP:
        return hm[x, M_MS]
    if k == TREE:
        return tm[x, T_MS]
    return bm[x]  # a bundle or a flat list


@njit_inline
def _hnew(hi, hm, st, pos, state, time, hast, ms, poff, pcnt, left, right, bit):
    """A new DS_w node (FAIL when the arrays are full)."""
    n = st[NH]
    if n >= hi.shape[0]:
        st[NEED_WHAT] = W_HEAP
        return FAIL
    hi[n, H_POS] = pos
    hi[n, H_STATE] = state
    hi[n, H_LEFT] = left
    hi[n, H_RIGHT] = right
    hi[n, H_BIT] = bit
    hi[n, H_POFF] = poff
    hi[n, H_PCNT] = pcnt
    hi[n, H_HAST] = hast
    hm[n, M_MS] = ms
    hm[n, M_TIME] = time
    st[NH] = n + 1
    return n


@njit_inline
def _hcopy(hi, hm, st, x, left, right, bit):
    """The payload of node ``x`` with other union links."""
    return _hnew(hi, hm, st, hi[x, H_POS], hi[x, H_STATE], hm[x, M_TIME], hi[x, H_HAST],
                 hm[x, M_MS], hi[x, H_POFF], hi[x, H_PCNT], left, right, bit)


@njit_inline
def _extend(hi, hm, tm, bm, st, pr, q, pos, t, hast, ft, kids, nk):
    """A fresh node for the runs ending at ``pos`` in ``q`` that adopt one run from each
    set ``kids[:nk]``: its max-start is the smallest of theirs (each one's is its own
    maximum) and of ``ft`` (the event's own)."""
    ms = ft
    for j in range(nk):
        m = ref_ms(hm, tm, bm, kids[j])
        if m < ms:
            ms = m
    off = st[NPR]
    if off + nk > pr.shape[0]:
        st[NEED_WHAT] = W_PROD
        return FAIL
    for j in range(nk):
        pr[off + j] = kids[j]
    x = _hnew(hi, hm, st, pos, q, t, hast, ms, off, nk, NULL, NULL, 0)
    if x >= 0:
        st[NPR] = off + nk
        st[C_EXTENDS] += 1
    return x


@njit_inline
def h_union(hi, hm, st, h, x, lo):
    """A new heap with the runs of ``h`` and of the fresh node ``x``; ``h`` is unchanged.

    ``lo``: runs starting before it are dead for good (window times never decrease), so a
    dead heap — or a dead sub-heap met on the way down — is replaced, not kept. Order:
    ``(max-start, position)``, largest on top; the smaller payload sinks along the
    direction bits, each node on the path is copied with its bit flipped (Braun-style
    balance). FAIL when the arrays are full (nothing reachable changed)."""
    if h < 0 or hm[h, M_MS] < lo:
        st[C_UNIONS] += 1
        st[C_UNION_NODES] += 1
        if st[C_MAX_UNION] < 1:
            st[C_MAX_UNION] = 1
        return x
    carry = x
    cur = h
    root = NULL
    parent = NULL
    left_side = False
    steps = 0
    while True:
        steps += 1
        dead = cur < 0 or hm[cur, M_MS] < lo
        if dead:
            node = _hcopy(hi, hm, st, carry, NULL, NULL, 0)
        else:
            top = cur
            if hm[carry, M_MS] > hm[cur, M_MS] or (
                    hm[carry, M_MS] == hm[cur, M_MS] and hi[carry, H_POS] > hi[cur, H_POS]):
                top = carry
                carry = cur
            node = _hcopy(hi, hm, st, top, hi[cur, H_LEFT], hi[cur, H_RIGHT], 1 - hi[cur, H_BIT])
        if node < 0:
            return FAIL
        if parent < 0:
            root = node
        elif left_side:
            hi[parent, H_LEFT] = node  # ``parent`` was made by this call: not yet shared
        else:
            hi[parent, H_RIGHT] = node
        if dead:
            break
        parent = node
        left_side = hi[cur, H_BIT] == 0
        cur = hi[cur, H_LEFT] if left_side else hi[cur, H_RIGHT]
    st[C_UNIONS] += 1
    st[C_UNION_NODES] += steps
    if steps > st[C_MAX_UNION]:
        st[C_MAX_UNION] = steps
    return root


@njit_inline
def _adopted(hi, pr, x):
    """What DS_w node ``x``'s payload adopted, as ``T_KID`` says it (NULL, one set, MANY)."""
    c = hi[x, H_PCNT]
    if c == 0:
        return NULL
    if c == 1:
        return pr[hi[x, H_POFF]]
    return MANY


@njit_inline
def _tree_kid(hi, pr, qt, x):
    """``T_KID`` of DS_w node ``x`` in an ordered index: what it adopted (``_adopted``),
    except that an iterated state's whole run is ``ALONE``, not NULL. Its trees mix whole
    runs (first iterations) with runs that adopted a set (the later ones), while the walk
    of a subtree of whole runs (``_enumerate``) trusts a NULL at the subtree's root for
    every node below it."""
    kid = _adopted(hi, pr, x)
    if kid == NULL and qt[hi[x, H_STATE], Q_LOOP]:
        return ALONE
    return kid


@njit_inline
def _flat(hi, hm, ti, tm, bi, bm, pc, pr, st, sk, psc, n, lab, lo):
    """The runs of the pieces ``psc[:n]`` as a flat list (a FLAT reference), in the order
    the enumeration walks the pieces (a subtree: node, right, left), the dead ones left out:
    per run its position, max-start and the one set it adopted — all of them whole runs
    (``FLAT_RUNS``) or all of them adopting one set (``FLAT_KIDS``). NO_FLAT when they are
    more than ``FLAT_MAX``, mixed, or one adopted more than one set (or the scratch stack is
    too short): they stay pieces. FAIL when an array is full.

    Why: the runs in range are enumerated once per match through every run that adopted
    them, and walking a tree costs a cache miss or more per node (and per payload), plus its
    dead nodes; a flat list is read in order. Its cost, at most ``FLAT_MAX`` runs copied, is
    paid once."""
    total = 0
    for j in range(n):
        r = psc[j]
        total += ti[r >> 2, T_CNT] if r & 3 == TREE else 1
    if total > FLAT_MAX:
        return NO_FLAT
    b = st[NB]
    off = st[NPC]
    if b >= bi.shape[0]:
        st[NEED_WHAT] = W_BUNDLE
        return FAIL
    if off + F_HEAD + F_W * total > pc.shape[0]:
        st[NEED_WHAT] = W_PIECES
        return FAIL
    w = off + F_HEAD
    mode = -1  # 0: whole runs, 1: each adopted one set (-1: no live run yet)
    for j in range(n):
        r = psc[j]
        x = r >> 2
        if r & 3 == HEAP:
            if hm[x, M_MS] >= lo:
                kid = _adopted(hi, pr, x)
                has = 1 if kid >= 0 else 0
                if kid == MANY or (mode >= 0 and has != mode):
                    return NO_FLAT
                mode = has
                pc[w] = hi[x, H_POS]
                pc[w + 1] = hm[x, M_MS]
                pc[w + 2] = kid
                w += F_W
            continue
        top = 0
        y = x
        while True:
            if tm[y, T_NMS] >= lo:
                kid = ti[y, T_KID]
                has = 1 if kid >= 0 else 0
                if kid == MANY or (mode >= 0 and has != mode):
                    return NO_FLAT
                mode = has
                pc[w] = ti[y, T_POS]
                pc[w + 1] = tm[y, T_NMS]
                pc[w + 2] = kid
                w += F_W
            for side in range(T_LEFT, T_RIGHT + 1):  # the left child is walked last
                c = ti[y, side]
                if c >= 0 and tm[c, T_MS] >= lo:
                    if top >= sk.shape[0]:
                        return NO_FLAT
                    sk[top, 0] = c
                    top += 1
            if top == 0:
                break
            top -= 1
            y = sk[top, 0]
    cnt = (w - off - F_HEAD) // F_W
    if cnt == 0:
        return NULL
    mx = pc[off + F_HEAD + 1]
    mn = mx
    for e in range(off + F_HEAD + F_W + 1, w, F_W):
        if pc[e] > mx:
            mx = pc[e]
        if pc[e] < mn:
            mn = pc[e]
    pc[off + F_LAB] = lab
    pc[off + F_MIN] = mn
    bi[b, B_OFF] = off
    bi[b, B_CNT] = cnt
    bi[b, B_FLAT] = FLAT_KIDS if mode == 1 else FLAT_RUNS
    bm[b] = mx
    st[NB] = b + 1
    st[NPC] = w
    return (b << 2) | FLAT


@njit_inline
def _in_range(hi, hm, ti, tm, tk, bi, bm, pc, pr, st, sk, psc, ref, rel, v, lo):
    """The runs of the ordered index ``ref`` (a tree) whose key is ``rel v``, as one
    reference: a flat list of them (``_flat``), a piece, or a bundle of the O(log w)
    pieces; NULL if none (FAIL: full)."""
    n = t_pieces(ti, tm, tk, sk, ref >> 2, rel, v, lo, psc)
    if n == FAIL:
        st[NEED_WHAT] = W_STACK
        return FAIL
    if n > st[C_MAX_PIECES]:
        st[C_MAX_PIECES] = n
    if n == 0:
        return NULL
    if (n > 1 or psc[0] & 3 == TREE) and st[NO_FLATS] == 0:
        f = _flat(hi, hm, ti, tm, bi, bm, pc, pr, st, sk, psc, n, ti[ref >> 2, T_LAB], lo)
        if f != NO_FLAT:
            if f >= 0:
                st[C_FLATS] += 1
            return f
    if n == 1:
        return psc[0]
    b = st[NB]
    off = st[NPC]
    if b >= bi.shape[0]:
        st[NEED_WHAT] = W_BUNDLE
        return FAIL
    if off + n > pc.shape[0]:
        st[NEED_WHAT] = W_PIECES
        return FAIL
    ms = ref_ms(hm, tm, bm, psc[0])
    for j in range(n):
        r = psc[j]
        pc[off + j] = r
        m = ref_ms(hm, tm, bm, r)
        if m > ms:
            ms = m
    bi[b, B_OFF] = off
    bi[b, B_CNT] = n
    bi[b, B_FLAT] = PIECES
    bm[b] = ms
    st[NB] = b + 1
    st[NPC] = off + n
    return (b << 2) | BUNDLE


# ---------------------------------------------------------------------------- the index


@njit_inline
def _hash_row(row, kw):
    """A hash of a key row, in 31-bit steps so that plain Python and numba agree (the
    table outlives the switch to compiled code)."""
    h = 0x3C6EF372
    for j in range(kw):
        x = row[j]
        h = ((h ^ (x & _M31)) * 0x01000193) & _M31
        h = h ^ (h >> 15)
        h = ((h ^ ((x >> 31) & _M31)) * 0x01000193) & _M31
        h = h ^ (h >> 15)
        h = ((h ^ ((x >> 62) & 3)) * 0x01000193) & _M31
        h = h ^ (h >> 15)
    h = (((h >> 16) ^ h) * 0x45D9F3B) & _M31
    return h ^ (h >> 16)


@njit_inline
def _cell(hk, hv, row, kw):
    """The table cell holding the entry ``row``, else the empty cell where it would go
    (linear probing from its hash)."""
    mask = hk.shape[0] - 1
    i = _hash_row(row, kw) & mask
    while hv[i, V_USED]:
        same = True
        for j in range(kw):
            if hk[i, j] != row[j]:
                same = False
                break
        if same:
            return i
        i = (i + 1) & mask
    return i


@njit_inline
def _find(hk, hv, row, kw):
    """The table cell of the entry ``row``, or -1."""
    i = _cell(hk, hv, row, kw)
    return i if hv[i, V_USED] else -1


@njit_inline
def _journal(jn, st, cell, field, old):
    """Remember ``hv[cell, field]``'s old value (J_NEW: the entry is new); False if full."""
    j = st[NJ]
    if j >= jn.shape[0]:
        st[NEED_WHAT] = W_JOURNAL
        return False
    jn[j, 0] = cell
    jn[j, 1] = field
    jn[j, 2] = old
    st[NJ] = j + 1
    return True


@njit_inline
def _find_or_add(hk, hv, jn, st, row, kw):
    """The cell of the entry ``row``, made (empty, journaled) if missing; ``st[ADDED]``
    says which. FAIL when the table would be more than 3/4 full, or the journal is."""
    st[ADDED] = 0
    i = _cell(hk, hv, row, kw)
    if hv[i, V_USED]:
        return i
    if 4 * (st[HUSED] + 1) > 3 * hk.shape[0]:
        st[NEED_WHAT] = W_TABLE
        return FAIL
    if not _journal(jn, st, i, J_NEW, 0):
        return FAIL
    for j in range(kw):
        hk[i, j] = row[j]
    hv[i, V_USED] = 1
    hv[i, V_ROOT] = NULL
    hv[i, V_HEAD] = NULL
    hv[i, V_TAIL] = NULL
    hv[i, V_NEXT] = NULL
    hv[i, V_SHARED] = UNSHARED
    st[HUSED] += 1
    st[ADDED] = 1
    return i


@njit_inline
def _set(hv, jn, st, cell, field, value):
    """``hv[cell, field] = value``, journaled (False: the journal is full)."""
    if not _journal(jn, st, cell, field, hv[cell, field]):
        return False
    hv[cell, field] = value
    return True


@njit_inline
def _share(hm, tm, bm, hv, jn, st, cell, ref):
    """Entry ``cell``'s tree is referenced by the adopted pieces ``ref`` (a tree, or a
    bundle) until they leave the window: it stays persistent until then (``V_SHARED``).
    False if the journal is full."""
    k = ref & 3
    if k == TREE or k == BUNDLE:
        ms = ref_ms(hm, tm, bm, ref)
        if ms > hv[cell, V_SHARED]:
            return _set(hv, jn, st, cell, V_SHARED, ms)
    return True


@njit_inline
def _key_row(kr, j, kw, part, slot, parent, kso, kse, spec, CV, r, nwc, ci):
    """Row ``j`` of ``kr``: the entry key ``(part, slot, parent, ids…)`` with the ids of
    key specification ``spec`` on event ``r`` (carried values: new node ``ci``'s)."""
    kr[j, K_PART] = part
    kr[j, K_SLOT] = slot
    kr[j, K_PARENT] = parent
    off = kso[spec, 0]
    cnt = kso[spec, 1]
    for a in range(cnt):
        e = kse[off + a]
        kr[j, K_IDS + a] = CV[e, r] if e >= 0 else nwc[ci, -1 - e]
    for a in range(K_IDS + cnt, kw):
        kr[j, a] = 0


@njit_plain
def undo(hv, jn, st):
    """Undo the current event: restore the entries it changed (newest first), forget the
    entries it made and the nodes it allocated (``st``'s saved slots)."""
    for j in range(st[NJ] - 1, -1, -1):
        cell = jn[j, 0]
        field = jn[j, 1]
        if field == J_NEW:
            hv[cell, V_USED] = 0
        else:
            hv[cell, field] = jn[j, 2]
    st[NJ] = 0
    for k in range(NSNAP):
        st[k] = st[SNAP + k]


# ---------------------------------------------------------------------------- one event


@njit_inline
def _adopt_each(hi, hm, ti, tm, tk, bi, bm, pc, pr, hk, hv, jn, st, sk, psc, kids, nw, nwc,
                nn, parent_cell, q, ncar, rel, v, pos, t, hast, ft, lo):
    """A chain step over a nested entry (one child entry per carried value): one new node
    per live carried value, adopting its runs (with ``rel``, those in range of ``v``),
    carrying the value on. Returns the new count of new nodes (FAIL)."""
    c = hv[parent_cell, V_HEAD]
    while c >= 0:
        st[C_PROBES] += 1
        h = hv[c, V_ROOT]
        if h >= 0 and ref_ms(hm, tm, bm, h) >= lo:
            if rel >= 0:
                h = _in_range(hi, hm, ti, tm, tk, bi, bm, pc, pr, st, sk, psc, h, rel, v, lo)
                if h == FAIL:
                    return FAIL
            if h >= 0:
                if not _share(hm, tm, bm, hv, jn, st, c, h):
                    return FAIL
                if nn >= nw.shape[0]:
                    st[NEED_WHAT] = W_NEW
                    return FAIL
                kids[0] = h
                x = _extend(hi, hm, tm, bm, st, pr, q, pos, t, hast, ft, kids, 1)
                if x < 0:
                    return FAIL
                nw[nn] = x
                for a in range(ncar):
                    nwc[nn, a] = hk[c, K_IDS + a]
                nn += 1
        c = hv[c, V_NEXT]
    return nn


@njit_inline
def _adopt_one(hi, hm, tm, bm, st, pr, kids, nw, nn, q, pos, t, hast, ft, h):
    """One new node adopting the set ``h``; the new count of new nodes (FAIL)."""
    if nn >= nw.shape[0]:
        st[NEED_WHAT] = W_NEW
        return FAIL
    kids[0] = h
    x = _extend(hi, hm, tm, bm, st, pr, q, pos, t, hast, ft, kids, 1)
    if x < 0:
        return FAIL
    nw[nn] = x
    return nn + 1


@njit_plain  # not inlined: a call of more than 30 arguments passes them as one tuple
def _update_events(i, n, S, kw, timed, windowed, bound, neg, act, pos, part, tt, hast, CV,
                   CMPV, qt, sl, src, kso, kse, hi, hm, ti, tm, tk, bi, bm, pc, pr, hk, hv, jn,
                   st, now, sk, sk2, sk3, psc, kids, kr, nw, nwc, fin):
    """FireTransitions then UpdateIndices (see the module docstring) for events ``i:n`` in
    turn, until one has new final nodes to enumerate or the loop must return to Python:
    one call per enumerated event rather than one per event, for its ~45 arguments (an
    array is 7-9 machine words) cost more than the work of an event that ends no run.

    Sets ``st[EV_AT]`` to the event it stopped at and returns: U_ENUM (that event is done,
    its final nodes ``fin[:st[NF]]`` are to enumerate), DONE (``i == n``), NEED_YIELD or
    NEED_COMPACT (before that event), or FAIL (that event is to be undone, ``st[NEED_WHAT]``
    names the array that is full)."""
    while i < n:
        st[EV_AT] = i
        if st[WORK] >= st[BUDGET]:
            st[WORK] = 0
            return NEED_YIELD
        if st[NH] + st[NT] + st[NB] >= st[NEXT_COMPACT] or 4 * st[NH] > 3 * hi.shape[0] \
                or 4 * st[NT] > 3 * ti.shape[0] or 4 * st[NB] > 3 * bi.shape[0] \
                or 4 * st[NPC] > 3 * pc.shape[0] or 4 * st[NPR] > 3 * pr.shape[0] \
                or 2 * st[HUSED] > hk.shape[0]:
            return NEED_COMPACT
        t = tt[i]
        h = hast[i]
        ft = now[NOW_FTIME]
        if timed:
            if h and t > ft:
                ft = t
        else:
            ft = t
        if act[i] == 0:
            now[NOW_FTIME] = ft
            st[EVENTS] += 1
            i += 1
            continue
        lo = neg
        if windowed and ft != neg:
            lo = ft - bound
        for k in range(NSNAP):
            st[SNAP + k] = st[k]
        st[NJ] = 0
        r = i
        mask = act[r]
        p = part[r]
        ps = pos[r]
        nn = 0
        for q in range(S):
            if (mask >> q) & 1 == 0:
                continue
            so = qt[q, Q_SOFF]
            sc = qt[q, Q_SCNT]
            if sc == 0:
                if nn >= nw.shape[0]:
                    st[NEED_WHAT] = W_NEW
                    return FAIL
                x = _hnew(hi, hm, st, ps, q, t, h, ft, 0, 0, NULL, NULL, 0)
                if x < 0:
                    return FAIL
                nw[nn] = x
                nn += 1
            elif qt[q, Q_CARRY]:  # a chain step: one node per live carried value of its source
                _key_row(kr, 0, kw, p, src[so, R_P], NULL, kso, kse, src[so, R_KEY], CV, r, nwc, 0)
                cell = _find(hk, hv, kr[0], kw)
                rel = src[so, R_REL]
                v = CMPV[src[so, R_PV], r] if rel >= 0 else 0.0
                if cell >= 0 and (rel < 0 or v == v):
                    nn = _adopt_each(hi, hm, ti, tm, tk, bi, bm, pc, pr, hk, hv, jn, st, sk,
                                     psc, kids, nw, nwc, nn, cell, q, qt[q, Q_NCAR], rel, v, ps,
                                     t, h, ft, lo)
                    if nn == FAIL:
                        return FAIL
            else:
                st[C_PROBES] += sc
                ok = True
                for j in range(sc):
                    e = so + j
                    _key_row(kr, 0, kw, p, src[e, R_P], NULL, kso, kse, src[e, R_KEY], CV, r,
                             nwc, 0)
                    cell = _find(hk, hv, kr[0], kw)
                    if cell < 0:
                        ok = False
                        break
                    hr = hv[cell, V_ROOT]
                    if hr < 0 or ref_ms(hm, tm, bm, hr) < lo:
                        ok = False
                        break
                    rel = src[e, R_REL]
                    if rel >= 0:  # the ordered index: the runs whose key is in range
                        v = CMPV[src[e, R_PV], r]
                        if v != v:
                            ok = False
                            break
                        hr = _in_range(hi, hm, ti, tm, tk, bi, bm, pc, pr, st, sk, psc, hr,
                                       rel, v, lo)
                        if hr == FAIL:
                            return FAIL
                        if hr < 0:
                            ok = False
                            break
                    if not _share(hm, tm, bm, hv, jn, st, cell, hr):
                        return FAIL
                    kids[j] = hr
                if ok:
                    if nn >= nw.shape[0]:
                        st[NEED_WHAT] = W_NEW
                        return FAIL
                    x = _extend(hi, hm, tm, bm, st, pr, q, ps, t, h, ft, kids, sc)
                    if x < 0:
                        return FAIL
                    nw[nn] = x
                    nn += 1
            if qt[q, Q_LOOP]:
                # ``(E AS y)+``: adopt the runs whose last iteration has this event's key (with a
                # register, only those whose value is in range)
                slot = S + q
                st[C_PROBES] += 1
                _key_row(kr, 0, kw, p, slot, NULL, kso, kse, qt[q, Q_LKEY], CV, r, nwc, 0)
                cell = _find(hk, hv, kr[0], kw)
                lrel = qt[q, Q_LREL]
                lv = CMPV[qt[q, Q_LPV], r] if lrel >= 0 else 0.0
                if cell >= 0 and (lrel < 0 or lv == lv):
                    if sl[slot, L_MODE] == MODE_NESTED:
                        nn = _adopt_each(hi, hm, ti, tm, tk, bi, bm, pc, pr, hk, hv, jn, st,
                                         sk, psc, kids, nw, nwc, nn, cell, q, qt[q, Q_NCAR], lrel,
                                         lv, ps, t, h, ft, lo)
                        if nn == FAIL:
                            return FAIL
                    else:
                        hr = hv[cell, V_ROOT]
                        if hr >= 0 and ref_ms(hm, tm, bm, hr) >= lo:
                            if lrel >= 0:
                                hr = _in_range(hi, hm, ti, tm, tk, bi, bm, pc, pr, st, sk, psc, hr,
                                               lrel, lv, lo)
                                if hr == FAIL:
                                    return FAIL
                            if hr >= 0:
                                if not _share(hm, tm, bm, hv, jn, st, cell, hr):
                                    return FAIL
                                nn = _adopt_one(hi, hm, tm, bm, st, pr, kids, nw, nn, q, ps, t, h,
                                                ft, hr)
                                if nn == FAIL:
                                    return FAIL
        # UpdateIndices: each new node into the entries its consumer and its loop probe
        nf = 0
        dcell = NULL  # one insertion into an unshared tree, done last (``_insert_in_place``)
        dx = NULL
        dv = 0.0
        for m in range(nn):
            x = nw[m]
            q = hi[x, H_STATE]
            if qt[q, Q_FINAL]:
                fin[nf] = x
                nf += 1
            for which in range(2):
                slot = qt[q, Q_SLOTA] if which == 0 else qt[q, Q_SLOTB]
                if slot < 0:
                    continue
                oc = sl[slot, L_OCOL]
                v = 0.0
                if oc >= 0:
                    v = CMPV[oc, r]
                    if v != v:
                        continue  # no value to compare: never adopted through this index
                mode = sl[slot, L_MODE]
                spec = sl[slot, L_KEY] if mode == MODE_COLUMN else sl[slot, L_OWN]
                _key_row(kr, 0, kw, p, slot, NULL, kso, kse, spec, CV, r, nwc, m)
                cell = _find_or_add(hk, hv, jn, st, kr[0], kw)
                if cell == FAIL:
                    return FAIL
                if mode == MODE_NESTED:  # the carried values' entry under the probe key's
                    top = cell
                    _key_row(kr, 1, kw, p, slot, top, kso, kse, sl[slot, L_CAR], CV, r, nwc, m)
                    cell = _find_or_add(hk, hv, jn, st, kr[1], kw)
                    if cell == FAIL:
                        return FAIL
                    if st[ADDED]:
                        tail = hv[top, V_TAIL]
                        if tail < 0:
                            if not _set(hv, jn, st, top, V_HEAD, cell):
                                return FAIL
                        elif not _set(hv, jn, st, tail, V_NEXT, cell):
                            return FAIL
                        if not _set(hv, jn, st, top, V_TAIL, cell):
                            return FAIL
                hr = hv[cell, V_ROOT]
                if oc >= 0:  # the ordered index
                    if dcell < 0 and hv[cell, V_SHARED] < lo:
                        dcell = cell
                        dx = x
                        dv = v
                        continue
                    if cell == dcell:
                        # a second run into the tree whose insertion waits (an iterated state's
                        # first iteration and its continuation, at one key and position): both
                        # now, persistently, in the order the Python objects insert them
                        hr = _tree_insert(hi, hm, ti, tm, tk, pr, qt, st, sk, sk2, sk3, hr, dx,
                                          dv, lo)
                        if hr == FAIL:
                            return FAIL
                        dcell = NULL
                    root = _tree_insert(hi, hm, ti, tm, tk, pr, qt, st, sk, sk2, sk3, hr, x, v, lo)
                    if root == FAIL:
                        return FAIL
                elif hr < 0 or hm[hr >> 2, M_MS] < lo:  # a new heap: one node, the new run's
                    st[C_UNIONS] += 1
                    st[C_UNION_NODES] += 1
                    if st[C_MAX_UNION] < 1:
                        st[C_MAX_UNION] = 1
                    root = x << 2
                else:
                    nh = h_union(hi, hm, st, hr >> 2, x, lo)
                    if nh == FAIL:
                        return FAIL
                    root = nh << 2
                if not _set(hv, jn, st, cell, V_ROOT, root):
                    return FAIL
        if dcell >= 0 and not _insert_in_place(hi, hm, ti, tm, tk, pr, qt, hv, jn, st, sk, sk2,
                                               sk3, dcell, dx, dv, lo):
            return FAIL
        st[WORK] += nn + 1
        now[NOW_FTIME] = ft
        st[EVENTS] += 1
        if nf > 0 and (not timed or h):
            st[NF] = nf
            now[NOW_LO] = lo
            st[EV_POS] = pos[i]
            st[EV_PART] = part[i]
            return U_ENUM
        i += 1
    st[EV_AT] = n
    return DONE


@njit_inline
def _tree_insert(hi, hm, ti, tm, tk, pr, qt, st, sk, sk2, sk3, hr, x, v, lo):
    """The tree ``hr`` (a reference, or NULL) with new node ``x`` at key ``v``, persistently
    (``t_insert``): the new root's reference, or FAIL."""
    st[NEED_WHAT] = W_STACK
    nt = t_insert(ti, tm, tk, st, sk, sk2, sk3, NULL if hr < 0 else hr >> 2, x, hm[x, M_MS],
                  v, hi[x, H_POS], _tree_kid(hi, pr, qt, x), qt[hi[x, H_STATE], Q_LAB], lo)
    if nt == FAIL:
        return FAIL
    st[C_TREE_INSERTS] += 1
    return (nt << 2) | TREE


@njit_inline
def _insert_in_place(hi, hm, ti, tm, tk, pr, qt, hv, jn, st, sk, sk2, sk3, cell, x, v, lo):
    """New node ``x`` into the unshared tree of entry ``cell`` (``V_SHARED``), rewriting it:
    first its runs below ``lo`` are deleted (``t_delete_in``), then ``x`` is inserted
    (``t_insert_in``). Done after every other change of the event, so nothing can fail
    after a rewrite; the deletions alone may be followed by a failure (a persistent
    insertion, when a scratch stack is too short), and stay when the event is undone: the
    runs they drop are dead for good, and the entry's root is written unjournaled. If
    another insertion changed the entry's root in this event, the journal holds the old
    root (undo restores it, and it shares nodes with the new one): then this insertion is
    persistent too. False on FAIL."""
    for j in range(st[NJ]):
        if jn[j, 0] == cell and jn[j, 1] == V_ROOT:
            root = _tree_insert(hi, hm, ti, tm, tk, pr, qt, st, sk, sk2, sk3, hv[cell, V_ROOT],
                                x, v, lo)
            return root != FAIL and _set(hv, jn, st, cell, V_ROOT, root)
    hr = hv[cell, V_ROOT]
    t = NULL if hr < 0 else hr >> 2
    while t >= 0 and tm[t, T_MN] < lo:
        if tm[t, T_MS] < lo:
            t = NULL  # every run left the window
            break
        nt = t_delete_in(ti, tm, sk, sk2, t, lo)
        if nt == FAIL:
            break  # the rest stays: dead runs are skipped wherever they are met
        t = nt
    hv[cell, V_ROOT] = NULL if t < 0 else (t << 2) | TREE
    nt = t_insert_in(ti, tm, tk, st, sk, sk2, t, x, hm[x, M_MS], v, hi[x, H_POS],
                     _tree_kid(hi, pr, qt, x), qt[hi[x, H_STATE], Q_LAB])
    if nt == FAIL:
        root = _tree_insert(hi, hm, ti, tm, tk, pr, qt, st, sk, sk2, sk3, hv[cell, V_ROOT], x,
                            v, lo)
        return root != FAIL and _set(hv, jn, st, cell, V_ROOT, root)
    hv[cell, V_ROOT] = (nt << 2) | TREE
    st[C_TREE_INSERTS] += 1
    st[C_IN_PLACE] += 1
    return True


# ---------------------------------------------------------------------------- enumeration


@njit_inline
def _push_alt(es, top, ref, todo, d, tat, at):
    """An alternative: a reference (a flat list's from its entry ``at``), the sets still to
    expand after it, the path's depth and ``ta``'s top."""
    es[top, 0] = ref
    es[top, 1] = todo
    es[top, 2] = d
    es[top, 3] = tat
    es[top, 4] = at
    return top + 1


@njit_inline
def _emit(ep, d, epos, epart, nm, ne, o_start, o_end, o_part, o_off, o_pos, o_lab):
    """Write the run on the path ``ep[:d]`` (node, position, label), ending at event
    ``epos`` of partition ``epart``, as output ``nm``: its start (the earliest position) and
    its labelled events by position from ``ne``, sorted in place (the path reversed, a
    chain's runs from its end, is in order or nearly). Returns the new ``ne``; output
    ``nm + 1`` starts there."""
    start = ep[d - 1, 1]
    e0 = ne
    for j in range(d - 1, -1, -1):
        p = ep[j, 1]
        if p < start:
            start = p
        lab = ep[j, 2]
        if lab >= 0:
            k = ne - 1
            while k >= e0 and o_pos[k] > p:
                o_pos[k + 1] = o_pos[k]
                o_lab[k + 1] = o_lab[k]
                k -= 1
            o_pos[k + 1] = p
            o_lab[k + 1] = lab
            ne += 1
    o_start[nm] = start
    o_end[nm] = epos
    o_part[nm] = epart
    o_off[nm + 1] = ne
    return ne


@njit_inline
def _runs_of(pc, off, at, cnt, lab, lo, ep, d, epos, epart, nm, ne, work, budget, emit,
             o_start, o_end, o_part, o_off, o_pos, o_lab):
    """The live entries of the flat list at ``pc[off]``, from entry ``at``, each the last
    event of a run on the path ``ep[:d]`` (``ep[d]`` is its row): written as outputs
    ``nm``… (``emit``), else counted. Returns ``(at, nm, ne, work, runs, status)``: ``at``
    the entry to go on from when ``status`` is NEED_YIELD (the budget) or NEED_OUT (the
    outputs are full)."""
    runs = 0
    status = 0
    base = -1  # the first run written: the path's events and its own, sorted
    ib = -1  # where its own event is in them (-1: it has no label)
    pstart = 0  # the path's earliest position
    e = off + F_HEAD + F_W * at
    while at < cnt:
        if pc[e + 1] >= lo:
            if work >= budget:
                status = NEED_YIELD
                break
            if emit and (nm + 1 >= o_start.shape[0] or ne + d + 1 > o_pos.shape[0]):
                status = NEED_OUT
                break
            work += 1
            runs += 1
            if emit:
                p = pc[e]
                if base < 0:
                    ep[d, 0] = NULL
                    ep[d, 1] = p
                    ep[d, 2] = lab
                    e0 = ne
                    ne = _emit(ep, d + 1, epos, epart, nm, ne, o_start, o_end, o_part, o_off,
                               o_pos, o_lab)
                    base = nm
                    pstart = p if d == 0 else ep[0, 1]
                    for j in range(1, d):
                        if ep[j, 1] < pstart:
                            pstart = ep[j, 1]
                    if lab >= 0:
                        for k in range(e0, ne):
                            if o_pos[k] == p:
                                ib = k
                else:
                    # the path is the same for every run of the list: the first run's
                    # events, its own replaced by this run's, in order
                    placed = lab < 0
                    for k in range(o_off[base], o_off[base + 1]):
                        if k != ib:
                            q = o_pos[k]
                            if not placed and p < q:
                                o_pos[ne] = p
                                o_lab[ne] = lab
                                ne += 1
                                placed = True
                            o_pos[ne] = q
                            o_lab[ne] = o_lab[k]
                            ne += 1
                    if not placed:
                        o_pos[ne] = p
                        o_lab[ne] = lab
                        ne += 1
                    o_start[nm] = p if p < pstart or d == 0 else pstart
                    o_end[nm] = epos
                    o_part[nm] = epart
                    o_off[nm + 1] = ne
                nm += 1
        at += 1
        e += F_W
    return at, nm, ne, work, runs, status


@njit_plain  # not inlined: a loop of its own keeps its values in registers
def _flat_runs(pc, off, at, cnt, lab, lo, ep, d, epos, epart, nm, ne, work, budget, emit,
               o_start, o_end, o_part, o_off, o_pos, o_lab):
    """``_runs_of``, called from the general walk."""
    return _runs_of(pc, off, at, cnt, lab, lo, ep, d, epos, epart, nm, ne, work, budget, emit,
                    o_start, o_end, o_part, o_off, o_pos, o_lab)


#: ``_flat_kids``' status when the entry it stopped at adopted something else than a flat
#: list of whole runs: the general walk takes that entry
OTHER = 5


@njit_plain  # not inlined: a loop of its own keeps its values in registers
def _flat_kids(bi, pc, off, at, cnt, lab, lo, ep, d, epos, epart, nm, ne, work, budget, emit,
               o_start, o_end, o_part, o_off, o_pos, o_lab):
    """A flat list of runs that each adopted one set (``FLAT_KIDS``, the chain's B runs),
    from entry ``at``, with nothing left to expand after it, where each live entry's set is
    a flat list of whole runs (the A runs): every run through it, in the general walk's
    order, by two nested loops — without the walk's stack, one push and pop per entry.
    ``ep[d]`` is the entry's row, ``ep[d + 1]`` the run's. Returns ``(at, at2, nm, ne,
    work, runs, status)``: with NEED_YIELD or NEED_OUT, ``at2`` the entry of entry ``at``'s
    set to go on from, or -1 when entry ``at`` was not entered; with OTHER, entry ``at``
    adopted something else, which the general walk takes."""
    runs = 0
    status = 0
    at2 = -1
    e = off + F_HEAD + F_W * at
    while at < cnt:
        if pc[e + 1] >= lo:
            kid = pc[e + 2]
            x = kid >> 2
            if kid & 3 != FLAT or bi[x, B_FLAT] != FLAT_RUNS:
                status = OTHER
                break
            if work >= budget:
                status = NEED_YIELD
                break
            work += 1
            koff = bi[x, B_OFF]
            kcnt = bi[x, B_CNT]
            if not emit and pc[koff + F_MIN] >= lo:
                runs += kcnt  # counting, and none has left the window
            else:
                ep[d, 0] = NULL
                ep[d, 1] = pc[e]
                ep[d, 2] = lab
                got = _runs_of(pc, koff, 0, kcnt, pc[koff + F_LAB], lo, ep, d + 1, epos,
                               epart, nm, ne, work, budget, emit, o_start, o_end, o_part,
                               o_off, o_pos, o_lab)
                nm, ne, work = got[1], got[2], got[3]
                runs += got[4]
                if got[5] != 0:
                    at2 = got[0]
                    status = got[5]
                    break
        at += 1
        e += F_W
    return at, at2, nm, ne, work, runs, status


@njit_inline
def _enumerate(qt, hi, hm, ti, tm, bi, bm, pc, pr, st, fin, es, ta, ep, timed, windowed, lo,
               emit, decide, o_start, o_end, o_part, o_off, o_pos, o_lab):
    """The windowed runs of the event's new final nodes (``fin[:st[NF]]``) as candidate
    matches: a depth-first walk whose stack ``es`` holds the alternatives still to take
    (a reference, the sets still to expand after it — a list of cells in ``ta`` —, the
    path's depth, ``ta``'s top and, for a flat list, the entry to go on from), the path
    ``ep`` the payload nodes chosen so far. A heap node offers its payload then its union
    children; a tree its payload then its subtrees; a bundle its pieces; a flat list its
    live entries, in order (read by a tight loop when nothing is left to expand after them);
    a payload's adopted sets are expanded one after the other. A run is reported when
    nothing is left to expand: its events by position, its start the earliest (which must
    have a time in the window). Each alternative taken yields at least one run (max-start
    pruning), except a tree node whose own run left the window (a way to live ones below
    it: O(log w) such per run) and the rest of a flat list whose entries all left the
    window since (at most ``FLAT_MAX`` read). A flat list's entries have no DS_w node
    (``ep``'s node is -1), so a time window, once it checks each run's start on its node
    (``timed``: an event without a time was fed), builds none (``NO_FLATS``). A tree of whole
    runs (its payloads adopted nothing: ``T_KID`` NULL) met with nothing left to expand, too
    large for a flat list, is walked by a tighter loop in the same order, each live payload
    reported from its tree node (not while ``timed`` either).

    Resumable (the walk stays in ``st`` and the arrays): returns the number of candidates
    once done; -NEED_YIELD when ``st[BUDGET]`` is used up; -NEED_OUT when a scratch or
    output array is full (``st[NEED_WHAT]``). With ``decide`` (the caller post-processes each
    event's candidates together) a full output restarts the event when earlier events'
    outputs can be flushed instead."""
    if st[E_ON] == 0:
        st[E_ON] = 1
        st[E_F] = 0
        st[E_TOP] = 0
        st[E_REP] = 0
        st[E_OUT0] = st[N_OUT]
        st[E_EV0] = st[N_EV]
    nf = st[NF]
    fi = st[E_F]
    top = st[E_TOP]
    rep = st[E_REP]
    nm = st[N_OUT]
    ne = st[N_EV]
    work = st[WORK]
    budget = st[BUDGET]
    epos = st[EV_POS]
    epart = st[EV_PART]
    status = 0
    cur = NULL
    at = 0
    todo = NULL
    d = 0
    tat = 0
    while True:
        if top == 0:
            if fi >= nf:
                break
            root = fin[fi]
            fi += 1
            if hm[root, M_MS] < lo:
                continue
            cur = root << 2
            at = 0
            todo = NULL
            d = 0
            tat = 0
        else:
            top -= 1
            cur = es[top, 0]
            todo = es[top, 1]
            d = es[top, 2]
            tat = es[top, 3]
            at = es[top, 4]
        while True:
            if work >= budget:
                status = NEED_YIELD
                break
            work += 1
            kind = cur & 3
            x = cur >> 2
            if kind == FLAT:
                # a flat list of whole runs: each live entry, from ``at`` on, in order
                off = bi[x, B_OFF]
                cnt = bi[x, B_CNT]
                lab = pc[off + F_LAB]
                if d + 1 > ep.shape[0]:
                    st[NEED_WHAT] = W_PATH
                    status = NEED_OUT
                    break
                runs = bi[x, B_FLAT] == FLAT_RUNS
                if runs and todo < 0:  # nothing to expand after it: each live entry is a run
                    if not emit and at == 0 and pc[off + F_MIN] >= lo:
                        rep += cnt  # counting, and none has left the window
                        break
                    got = _flat_runs(pc, off, at, cnt, lab, lo, ep, d, epos, epart, nm, ne,
                                     work, budget, emit, o_start, o_end, o_part, o_off,
                                     o_pos, o_lab)
                    at, nm, ne, work = got[0], got[1], got[2], got[3]
                    rep += got[4]
                    status = got[5]
                    if status == NEED_OUT:
                        st[NEED_WHAT] = W_OUT
                        st[NEED_SIZE] = d + 1
                    break
                if not runs and todo < 0 and d + 2 <= ep.shape[0] and top + 2 <= es.shape[0]:
                    # each entry's set, and nothing after it: two nested loops, while
                    # those sets are flat lists of whole runs
                    got = _flat_kids(bi, pc, off, at, cnt, lab, lo, ep, d, epos, epart, nm,
                                     ne, work, budget, emit, o_start, o_end, o_part, o_off,
                                     o_pos, o_lab)
                    at, nm, ne, work = got[0], got[2], got[3], got[4]
                    rep += got[5]
                    status = got[6]
                    if status == 0:
                        break
                    if status == OTHER:
                        status = 0  # entry ``at``: the general walk below
                    else:
                        if got[1] >= 0:  # stopped inside entry ``at``'s set
                            if at + 1 < cnt:
                                top = _push_alt(es, top, cur, todo, d, tat, at + 1)
                            e = off + F_HEAD + F_W * at
                            ep[d, 0] = NULL
                            ep[d, 1] = pc[e]
                            ep[d, 2] = lab
                            d += 1
                            cur = pc[e + 2]
                            at = got[1]
                        if status == NEED_OUT:
                            st[NEED_WHAT] = W_OUT
                            st[NEED_SIZE] = d + 1
                        break
                # more to expand after each entry (the set it adopted, or the sets left):
                # its next live entry is taken, the rest is an alternative
                e = off + F_HEAD + F_W * at
                while at < cnt and pc[e + 1] < lo:
                    at += 1
                    e += F_W
                if at >= cnt:
                    break
                if at + 1 < cnt:
                    if top + 2 > es.shape[0]:
                        st[NEED_WHAT] = W_ESTACK
                        status = NEED_OUT
                        break
                    top = _push_alt(es, top, cur, todo, d, tat, at + 1)
                ep[d, 0] = NULL
                ep[d, 1] = pc[e]
                ep[d, 2] = lab
                d += 1
                if runs:
                    cur = ta[todo, 0]
                    todo = ta[todo, 1]
                else:
                    cur = pc[e + 2]
                at = 0
                continue
            if kind == BUNDLE:
                off = bi[x, B_OFF]
                cnt = bi[x, B_CNT]
                if top + cnt + 1 > es.shape[0]:
                    st[NEED_WHAT] = W_ESTACK
                    status = NEED_OUT
                    break
                pend = NULL
                for j in range(cnt - 1, -1, -1):
                    piece = pc[off + j]
                    if ref_ms(hm, tm, bm, piece) >= lo:
                        if pend >= 0:
                            top = _push_alt(es, top, pend, todo, d, tat, 0)
                        pend = piece
                cur = pend
                continue
            if kind == TREE and ti[x, T_KID] == NULL and todo < 0 and not timed \
                    and d + 1 <= ep.shape[0]:
                # a subtree of whole runs (payloads that adopted nothing) and nothing left
                # to expand after them: walked here, in the order of the general walk below,
                # a tree node per step, the rows of ``es`` above ``top`` its stack of nodes;
                # each live payload is a run, reported from the tree node
                lt = top
                y = x  # the next node to walk
                while True:
                    if status == 0:
                        if lt + 3 > es.shape[0]:
                            st[NEED_WHAT] = W_ESTACK
                            status = NEED_OUT
                        elif emit and (nm + 1 >= o_start.shape[0] or ne + d + 1 > o_pos.shape[0]):
                            st[NEED_WHAT] = W_OUT
                            st[NEED_SIZE] = d + 1
                            status = NEED_OUT
                    if status != 0:
                        # the nodes not walked yet become ordinary alternatives (``y``, as
                        # ``cur``, goes back on the stack below)
                        for j in range(top, lt):
                            es[j, 0] = (es[j, 0] << 2) | TREE
                            es[j, 1] = todo
                            es[j, 2] = d
                            es[j, 3] = tat
                            es[j, 4] = 0
                        top = lt
                        cur = (y << 2) | TREE
                        break
                    if not emit and tm[y, T_MN] >= lo:
                        # counting, and no run of the subtree has left the window: all of them
                        rep += ti[y, T_CNT]
                    else:
                        c = ti[y, T_LEFT]
                        if c >= 0 and tm[c, T_MS] >= lo:
                            es[lt, 0] = c
                            lt += 1
                        c = ti[y, T_RIGHT]
                        if c >= 0 and tm[c, T_MS] >= lo:
                            es[lt, 0] = c
                            lt += 1
                        if tm[y, T_NMS] >= lo:
                            rep += 1
                            if emit:
                                ep[d, 0] = ti[y, T_NODE]
                                ep[d, 1] = ti[y, T_POS]
                                ep[d, 2] = ti[y, T_LAB]
                                ne = _emit(ep, d + 1, epos, epart, nm, ne,
                                           o_start, o_end, o_part, o_off, o_pos, o_lab)
                                nm += 1
                    if lt == top:
                        break
                    lt -= 1
                    y = es[lt, 0]
                    if work >= budget:
                        status = NEED_YIELD
                    else:
                        work += 1
                break
            if kind == TREE:
                if top + 3 > es.shape[0]:
                    st[NEED_WHAT] = W_ESTACK
                    status = NEED_OUT
                    break
                c = ti[x, T_LEFT]
                if c >= 0 and tm[c, T_MS] >= lo:
                    top = _push_alt(es, top, (c << 2) | TREE, todo, d, tat, 0)
                c = ti[x, T_RIGHT]
                if c >= 0 and tm[c, T_MS] >= lo:
                    top = _push_alt(es, top, (c << 2) | TREE, todo, d, tat, 0)
                if tm[x, T_NMS] >= lo:
                    kid = ti[x, T_KID]
                    if kid >= 0 and d + 1 <= ep.shape[0]:
                        # its payload adopted one set (and has no union children, as every
                        # payload of a tree): on into that set, without visiting the payload
                        ep[d, 0] = ti[x, T_NODE]
                        ep[d, 1] = ti[x, T_POS]
                        ep[d, 2] = ti[x, T_LAB]
                        d += 1
                        cur = kid
                        at = 0
                        continue
                    cur = ti[x, T_NODE] << 2
                    continue
                break  # only a way to live runs below it
            # a heap node: its union children are alternatives; its payload is taken
            cnt = hi[x, H_PCNT]
            if top + 3 > es.shape[0]:
                st[NEED_WHAT] = W_ESTACK
                status = NEED_OUT
                break
            if d + 1 > ep.shape[0]:
                st[NEED_WHAT] = W_PATH
                status = NEED_OUT
                break
            if tat + cnt > ta.shape[0]:
                st[NEED_WHAT] = W_TODO
                status = NEED_OUT
                break
            if emit and cnt == 0 and todo < 0 and (
                    nm + 1 >= o_start.shape[0] or ne + d + 1 > o_pos.shape[0]):
                st[NEED_WHAT] = W_OUT
                st[NEED_SIZE] = d + 1
                status = NEED_OUT
                break
            c = hi[x, H_LEFT]
            if c >= 0 and hm[c, M_MS] >= lo:
                top = _push_alt(es, top, c << 2, todo, d, tat, 0)
            c = hi[x, H_RIGHT]
            if c >= 0 and hm[c, M_MS] >= lo:
                top = _push_alt(es, top, c << 2, todo, d, tat, 0)
            ep[d, 0] = x
            ep[d, 1] = hi[x, H_POS]
            ep[d, 2] = qt[hi[x, H_STATE], Q_LAB]
            d += 1
            off = hi[x, H_POFF]
            if cnt == 1:  # one adopted set: expanded next, nothing to remember
                cur = pr[off]
                at = 0
                continue
            for j in range(cnt - 1, -1, -1):
                ta[tat, 0] = pr[off + j]
                ta[tat, 1] = todo
                todo = tat
                tat += 1
            if todo >= 0:
                cur = ta[todo, 0]
                todo = ta[todo, 1]
                at = 0
                continue
            # a run: the path's payloads (``ep``: node, position, label); its start is
            # the earliest
            if timed and windowed:
                first = 0
                for j in range(1, d):
                    if ep[j, 1] < ep[first, 1]:
                        first = j
                y = ep[first, 0]  # -1: a flat list's entry, a start with a time (``NO_FLATS``)
                if y >= 0 and (hi[y, H_HAST] == 0 or hm[y, M_TIME] < lo):
                    break  # attribute windows: the start lacks a time, or an inner null hid it
            rep += 1
            if emit:
                ne = _emit(ep, d, epos, epart, nm, ne, o_start, o_end, o_part, o_off, o_pos, o_lab)
                nm += 1
            break
        if status != 0:
            # the reference not walked yet goes back on the stack (a slot was kept free):
            # the path below ``d`` and the cells below ``tat`` are intact
            top = _push_alt(es, top, cur, todo, d, tat, at)
            break
    st[WORK] = work
    if status == NEED_OUT and emit and decide and st[E_OUT0] > 0 and st[NEED_WHAT] == W_OUT:
        # outputs full and the event must leave whole: drop its outputs, the caller
        # flushes the earlier events' and the event is enumerated again
        st[N_OUT] = st[E_OUT0]
        st[N_EV] = st[E_EV0]
        st[E_ON] = 0
        return -NEED_OUT
    st[N_OUT] = nm
    st[N_EV] = ne
    if status != 0:
        st[E_F] = fi
        st[E_TOP] = top
        st[E_REP] = rep
        return -status
    st[E_ON] = 0
    return rep


#: the largest count ``_count_dag`` adds or multiplies in int64 (beyond it: NEED_BIG)
COUNT_MAX = 1 << 62


@njit_inline
def _sum(v, c, exact):
    """``v + c`` for counts (-1: one of them, or the sum, is beyond ``COUNT_MAX``; never
    with ``exact``, over Python integers)."""
    if v < 0 or c < 0 or (not exact and v > COUNT_MAX - c):
        return -1
    return v + c


@njit_inline
def _product(v, c, exact):
    """``v * c`` for counts, as ``_sum``."""
    if v < 0 or c < 0 or (not exact and c != 0 and v > COUNT_MAX // c):
        return -1
    return v * c


@njit_inline
def _take(cm, es, top, stamp, r, v, mul, exact):
    """``v`` with the count of part ``r`` added (``mul``: multiplied), if ``cm`` holds it
    for this event (``stamp``); else ``r`` pushed on ``es``. Returns ``(v, top)``."""
    y, k = _memo_at(r)
    if cm[y, k, 1] != stamp:
        es[top, 0] = r
        return v, top + 1
    c = cm[y, k, 0]
    return (_product(v, c, exact) if mul else _sum(v, c, exact)), top


@njit_inline
def _memo_at(ref):
    """Where ``cm`` keeps reference ``ref``'s count: ``(row, 0 heap / 1 tree / 2 bundle or
    flat list)`` — bundles and flat lists share ``bi``'s ids."""
    kind = ref & 3
    return ref >> 2, (kind if kind < FLAT else BUNDLE)


@njit_plain
def _count_dag(hi, hm, ti, tm, bi, bm, pc, pr, st, fin, es, cm, lo, budget, exact):
    """How many runs ``_enumerate`` would report for the event's final nodes, counted over
    the DAG: a heap node's runs are its payload's (the product of its adopted sets' counts)
    and its live union children's; a tree's, bundle's or flat list's the sum of its live
    parts'. Each reference is counted once per event (``cm[row, kind] = (count, stamp)``),
    by a post-order walk whose stack is ``es`` (column 0: references). The same
    references, and the same liveness tests, as ``_enumerate`` — without a time window's
    check of each run's start, which needs the whole run (the caller counts so only
    without one). Why: an iterated step's runs can be exponentially many (every rising
    subsequence of the window); the walk costs the DAG's live nodes.

    Resumable like ``_enumerate``: the count, or -NEED_YIELD (``budget``), -NEED_OUT
    (``es`` full, ``st[NEED_WHAT]``), -NEED_BIG (a count passed ``COUNT_MAX``; not with
    ``exact``, which plain Python runs over ``cm`` of Python integers)."""
    if st[E_ON] == 0:
        st[E_ON] = 1
        st[E_F] = 0
        st[E_TOP] = 0
        st[E_REP] = 0
        st[C_STAMP] += 1
    stamp = st[C_STAMP]
    nf = st[NF]
    fi = st[E_F]
    top = st[E_TOP]
    rep = 0 if exact else st[E_REP]
    work = st[WORK]
    status = 0
    while True:
        if top == 0:
            if fi >= nf:
                break
            root = fin[fi]
            if hm[root, M_MS] < lo:
                fi += 1
                continue
            es[0, 0] = root << 2
            top = 1
        while top > 0:
            if work >= budget:
                status = NEED_YIELD
                break
            work += 1
            ref = es[top - 1, 0]
            x, k = _memo_at(ref)
            if cm[x, k, 1] == stamp:
                top -= 1
                continue
            kind = ref & 3
            need = 3
            if kind == HEAP:
                need = 2 + hi[x, H_PCNT]
            elif kind != TREE:
                need = bi[x, B_CNT]
            if top + need > es.shape[0]:
                st[NEED_WHAT] = W_ESTACK
                status = NEED_OUT
                break
            # its count from its live parts' (-1: beyond COUNT_MAX); a part not counted yet
            # goes on the stack above it, and it is counted again once they are
            base = top
            v = 0
            if kind == HEAP:
                v = 1
                off = hi[x, H_POFF]
                for j in range(hi[x, H_PCNT]):
                    v, top = _take(cm, es, top, stamp, pr[off + j], v, True, exact)
                for side in range(H_LEFT, H_RIGHT + 1):
                    c = hi[x, side]
                    if c >= 0 and hm[c, M_MS] >= lo:
                        v, top = _take(cm, es, top, stamp, c << 2, v, False, exact)
            elif kind == TREE:
                if ti[x, T_KID] == NULL and tm[x, T_MN] >= lo:
                    v = int(ti[x, T_CNT])  # whole runs, none has left the window
                else:
                    for side in range(T_LEFT, T_RIGHT + 1):
                        c = ti[x, side]
                        if c >= 0 and tm[c, T_MS] >= lo:
                            v, top = _take(cm, es, top, stamp, (c << 2) | TREE, v, False,
                                           exact)
                    if tm[x, T_NMS] >= lo:
                        kid = ti[x, T_KID]
                        if kid == NULL or kid == ALONE:
                            v = _sum(v, 1, exact)
                        else:  # the one set it adopted, or its payload (MANY)
                            r = kid if kid >= 0 else ti[x, T_NODE] << 2
                            v, top = _take(cm, es, top, stamp, r, v, False, exact)
            elif kind == BUNDLE:
                off = bi[x, B_OFF]
                for j in range(bi[x, B_CNT]):
                    r = pc[off + j]
                    if ref_ms(hm, tm, bm, r) >= lo:
                        v, top = _take(cm, es, top, stamp, r, v, False, exact)
            else:
                e = bi[x, B_OFF] + F_HEAD
                runs = bi[x, B_FLAT] == FLAT_RUNS
                if runs and pc[bi[x, B_OFF] + F_MIN] >= lo:
                    v = int(bi[x, B_CNT])
                else:
                    for _j in range(bi[x, B_CNT]):
                        if pc[e + 1] >= lo:
                            if runs:
                                v = _sum(v, 1, exact)
                            else:
                                v, top = _take(cm, es, top, stamp, pc[e + 2], v, False, exact)
                        e += F_W
            if top > base:
                continue
            if v < 0:
                status = NEED_BIG
                break
            cm[x, k, 0] = v
            cm[x, k, 1] = stamp
            top -= 1
        if status != 0:
            break
        # the root's walk is done
        rep = _sum(rep, cm[fin[fi], HEAP, 0], exact)
        if rep < 0:
            status = NEED_BIG
            break
        fi += 1
    st[WORK] = work
    if status != 0:
        st[E_F] = fi
        st[E_TOP] = top
        if not exact:
            st[E_REP] = rep
        return -status
    st[E_ON] = 0
    return rep


# ---------------------------------------------------------------------------- the loop


@njit_plain
def run_events(i, n, S, kw, timed, windowed, bound, neg, emit, decide,
               act, pos, part, tt, hast, CV, CMPV, qt, sl, src, kso, kse,
               hi, hm, ti, tm, tk, bi, bm, pc, pr, hk, hv, jn, st, now,
               sk, sk2, sk3, psc, kids, kr, nw, nwc, fin, es, ta, ep, cm,
               o_start, o_end, o_part, o_off, o_pos, o_lab):
    """Feed events ``i:n`` of the slice. Returns ``(status, next event)``: DONE at the end;
    NEED_YIELD every ``st[BUDGET]`` units of work; NEED_OUT (outputs or an enumeration
    array full, ``st[NEED_WHAT]``; the enumeration resumes); NEED_COMPACT (before an event,
    when the arrays grew past ``st[NEXT_COMPACT]`` or 3/4 of their room); NEED_ROOM (an
    event was undone: grow ``st[NEED_WHAT]`` and call again from it); NEED_BIG (event
    ``i``'s count over the DAG, ``st[DAG_COUNT]``, or ``st[MATCHES]`` with it, is too large
    for int64: the caller moves ``st[MATCHES]`` out and calls again, or when that is 0
    counts the event itself, sets PH_UPDATE and calls again from ``i + 1``). ``cm``:
    ``_count_dag``'s counts, as many rows as the largest of ``hi``, ``ti`` and ``bi``.

    Written as a resumable state machine, like ``engine.kernel.run_events``: it never
    re-binds an array (numba would count references on every rebinding), so it returns
    to Python whenever an array must grow."""
    while True:
        if st[PHASE] == PH_ENUM:
            if not emit and st[DAG_COUNT] != 0:
                got = _count_dag(hi, hm, ti, tm, bi, bm, pc, pr, st, fin, es, cm, now[NOW_LO],
                                 st[BUDGET], False)
            else:
                got = _enumerate(qt, hi, hm, ti, tm, bi, bm, pc, pr, st, fin, es, ta, ep,
                                 timed and st[NO_FLATS] != 0, windowed, now[NOW_LO], emit,
                                 decide, o_start, o_end, o_part, o_off, o_pos, o_lab)
            if got < 0:
                if got == -NEED_YIELD:
                    st[WORK] = 0  # the budget starts again when the walk resumes
                return -got, i
            if st[MATCHES] > COUNT_MAX - got:
                return NEED_BIG, i  # the run's total would pass int64: the caller drains it
            st[MATCHES] += got
            st[PHASE] = PH_UPDATE
            i += 1
        status = _update_events(i, n, S, kw, timed, windowed, bound, neg, act, pos, part, tt,
                                hast, CV, CMPV, qt, sl, src, kso, kse, hi, hm, ti, tm, tk, bi,
                                bm, pc, pr, hk, hv, jn, st, now, sk, sk2, sk3, psc, kids, kr,
                                nw, nwc, fin)
        i = st[EV_AT]
        if status == U_ENUM:
            st[PHASE] = PH_ENUM
            st[E_ON] = 0
            continue
        if status == FAIL:
            undo(hv, jn, st)
            return NEED_ROOM, i
        return status, i


# ---------------------------------------------------------------------------- compaction


@njit
def _push(stack, sp, ref):
    if sp >= stack.shape[0]:
        bigger = np.empty(2 * stack.shape[0], np.int64)
        bigger[:sp] = stack[:sp]
        stack = bigger
    stack[sp] = ref
    return stack, sp + 1


@njit
def _marked(ref, hmark, tmark, bmark):
    k = ref & 3
    x = ref >> 2
    if k == HEAP:
        return hmark[x]
    if k == TREE:
        return tmark[x]
    return bmark[x]


@njit
def _remap(ref, hnew, tnew, bnew):
    k = ref & 3
    x = ref >> 2
    if k == HEAP:
        return hnew[x] << 2
    if k == TREE:
        return (tnew[x] << 2) | TREE
    return (bnew[x] << 2) | k  # a bundle or a flat list


@njit
def _place(nk, nv, row, kw):
    """Insert the key row into a table being rebuilt (known absent); its cell."""
    mask = nk.shape[0] - 1
    i = _hash_row(row, kw) & mask
    while nv[i, V_USED]:
        i = (i + 1) & mask
    for j in range(kw):
        nk[i, j] = row[j]
    nv[i, V_USED] = 1
    nv[i, V_ROOT] = NULL
    nv[i, V_HEAD] = NULL
    nv[i, V_TAIL] = NULL
    nv[i, V_NEXT] = NULL
    nv[i, V_SHARED] = UNSHARED
    return i


@njit
def compact(hi, hm, ti, tm, tk, bi, bm, pc, pr, hk, hv, st, plo, kw, cap):
    """Keep what a live run can still reach, renumbered: the index entries whose runs
    are in their partition's window (``plo``: each partition's lowest live start), every
    node, subtree and bundle reachable from them through live references (a dead child is
    cut: it is skipped wherever it is met), the adopted sets and pieces of those. Returns
    the rebuilt index ``(hk, hv)`` of ``cap`` cells (nested entries keep their order).
    Allocates: it runs once per doubling of the arrays, not per event."""
    nh = st[NH]
    nt = st[NT]
    nb = st[NB]
    hmark = np.zeros(nh, np.bool_)
    tmark = np.zeros(nt, np.bool_)
    bmark = np.zeros(nb, np.bool_)
    stack = np.empty(1024, np.int64)
    ncell = hk.shape[0]
    keep = np.zeros(ncell, np.bool_)
    # whether an entry's runs are live, judged here, before any node moves: a tree rewritten
    # in place keeps its root's id, and another node may be moved onto that row
    live = np.zeros(ncell, np.bool_)
    for c in range(ncell):
        if hv[c, V_USED] == 0 or hv[c, V_ROOT] < 0:
            continue
        lo = plo[hk[c, K_PART]]
        root = hv[c, V_ROOT]
        if ref_ms(hm, tm, bm, root) < lo:
            continue
        keep[c] = True
        live[c] = True
        if hk[c, K_PARENT] >= 0:
            keep[hk[c, K_PARENT]] = True
        sp = 0
        stack, sp = _push(stack, sp, root)
        while sp > 0:
            sp -= 1
            ref = stack[sp]
            k = ref & 3
            x = ref >> 2
            if k == HEAP:
                if hmark[x]:
                    continue
                hmark[x] = True
                y = hi[x, H_LEFT]
                if y >= 0 and hm[y, M_MS] >= lo:
                    stack, sp = _push(stack, sp, y << 2)
                y = hi[x, H_RIGHT]
                if y >= 0 and hm[y, M_MS] >= lo:
                    stack, sp = _push(stack, sp, y << 2)
                off = hi[x, H_POFF]
                for j in range(hi[x, H_PCNT]):
                    stack, sp = _push(stack, sp, pr[off + j])
            elif k == TREE:
                if tmark[x]:
                    continue
                tmark[x] = True
                y = ti[x, T_LEFT]
                if y >= 0 and tm[y, T_MS] >= lo:
                    stack, sp = _push(stack, sp, (y << 2) | TREE)
                y = ti[x, T_RIGHT]
                if y >= 0 and tm[y, T_MS] >= lo:
                    stack, sp = _push(stack, sp, (y << 2) | TREE)
                if tm[x, T_NMS] >= lo and ti[x, T_NODE] >= 0:
                    stack, sp = _push(stack, sp, ti[x, T_NODE] << 2)
            elif k == FLAT:  # its runs are written out, with the sets they adopted
                if bmark[x]:
                    continue
                bmark[x] = True
                if bi[x, B_FLAT] == FLAT_KIDS:
                    off = bi[x, B_OFF] + F_HEAD
                    for j in range(bi[x, B_CNT]):
                        if pc[off + F_W * j + 1] >= lo:
                            stack, sp = _push(stack, sp, pc[off + F_W * j + 2])
            else:
                if bmark[x]:
                    continue
                bmark[x] = True
                off = bi[x, B_OFF]
                for j in range(bi[x, B_CNT]):
                    y = pc[off + j]
                    if ref_ms(hm, tm, bm, y) >= lo:
                        stack, sp = _push(stack, sp, y)
    hnew = np.cumsum(hmark) - 1
    tnew = np.cumsum(tmark) - 1
    bnew = np.cumsum(bmark) - 1
    # the adopted sets of the kept nodes (a range is shared by a node's path copies)
    npr = st[NPR]
    pkeep = np.zeros(npr, np.bool_)
    for x in range(nh):
        if hmark[x]:
            off = hi[x, H_POFF]
            for j in range(hi[x, H_PCNT]):
                pkeep[off + j] = True
    prnew = np.cumsum(pkeep) - 1
    w = 0
    for j in range(npr):
        if pkeep[j]:
            pr[w] = _remap(pr[j], hnew, tnew, bnew)
            w += 1
    st[NPR] = w
    # heap nodes (ids only decrease: copied in place, in order)
    w = 0
    for x in range(nh):
        if not hmark[x]:
            continue
        for f in range(HI_WIDTH):
            hi[w, f] = hi[x, f]
        hm[w, M_MS] = hm[x, M_MS]
        hm[w, M_TIME] = hm[x, M_TIME]
        y = hi[w, H_LEFT]
        hi[w, H_LEFT] = hnew[y] if y >= 0 and hmark[y] else NULL
        y = hi[w, H_RIGHT]
        hi[w, H_RIGHT] = hnew[y] if y >= 0 and hmark[y] else NULL
        hi[w, H_POFF] = prnew[hi[w, H_POFF]] if hi[w, H_PCNT] > 0 else 0
        w += 1
    st[NH] = w
    # tree nodes
    w = 0
    for x in range(nt):
        if not tmark[x]:
            continue
        for f in range(ti.shape[1]):
            ti[w, f] = ti[x, f]
        for f in range(tm.shape[1]):
            tm[w, f] = tm[x, f]
        tk[w] = tk[x]
        y = ti[w, T_LEFT]
        ti[w, T_LEFT] = tnew[y] if y >= 0 and tmark[y] else NULL
        y = ti[w, T_RIGHT]
        ti[w, T_RIGHT] = tnew[y] if y >= 0 and tmark[y] else NULL
        y = ti[w, T_NODE]
        ti[w, T_NODE] = hnew[y] if y >= 0 and hmark[y] else NULL
        y = ti[w, T_KID]
        if y >= 0:  # kept with its live payload; a dead one's is never read again
            ti[w, T_KID] = _remap(y, hnew, tnew, bnew) if _marked(y, hmark, tmark, bmark) \
                else MANY
        w += 1
    st[NT] = w
    # bundles and their live pieces; flat lists as they are (in order: copied down)
    w = 0
    wp = 0
    for x in range(nb):
        if not bmark[x]:
            continue
        off = bi[x, B_OFF]
        cnt = bi[x, B_CNT]
        start = wp
        if bi[x, B_FLAT] != PIECES:
            for j in range(F_HEAD + F_W * cnt):
                pc[wp] = pc[off + j]
                wp += 1
            if bi[x, B_FLAT] == FLAT_KIDS:  # the sets renumbered (a dead entry's: cut)
                for e in range(start + F_HEAD + 2, wp, F_W):
                    y = pc[e]
                    pc[e] = _remap(y, hnew, tnew, bnew) \
                        if y >= 0 and _marked(y, hmark, tmark, bmark) else NULL
        else:
            for j in range(cnt):
                y = pc[off + j]
                if _marked(y, hmark, tmark, bmark):
                    pc[wp] = _remap(y, hnew, tnew, bnew)
                    wp += 1
            cnt = wp - start
        bi[w, B_OFF] = start
        bi[w, B_CNT] = cnt
        bi[w, B_FLAT] = bi[x, B_FLAT]
        bm[w] = bm[x]
        w += 1
    st[NB] = w
    st[NPC] = wp
    # the index, rebuilt: plain and parent entries first, then each parent's children
    nk = np.zeros((cap, kw), np.int64)
    nv = np.zeros((cap, HV_WIDTH), np.int64)
    moved = np.full(ncell, -1, np.int64)
    used = 0
    nlive = 0
    for c in range(ncell):
        if not keep[c] or hk[c, K_PARENT] >= 0:
            continue
        cell = _place(nk, nv, hk[c], kw)
        nv[cell, V_SHARED] = hv[c, V_SHARED]
        moved[c] = cell
        used += 1
        if live[c]:
            nv[cell, V_ROOT] = _remap(hv[c, V_ROOT], hnew, tnew, bnew)
            nlive += 1
    row = np.empty(kw, np.int64)
    for c in range(ncell):
        if moved[c] < 0 or hv[c, V_HEAD] < 0:
            continue
        parent = moved[c]
        y = hv[c, V_HEAD]
        while y >= 0:
            if keep[y]:
                for j in range(kw):
                    row[j] = hk[y, j]
                row[K_PARENT] = parent
                cell = _place(nk, nv, row, kw)
                nv[cell, V_SHARED] = hv[y, V_SHARED]
                used += 1
                nlive += 1
                nv[cell, V_ROOT] = _remap(hv[y, V_ROOT], hnew, tnew, bnew)
                tail = nv[parent, V_TAIL]
                if tail < 0:
                    nv[parent, V_HEAD] = cell
                else:
                    nv[tail, V_NEXT] = cell
                nv[parent, V_TAIL] = cell
            y = hv[y, V_NEXT]
    st[HUSED] = used
    st[LIVE_ENTRIES] = nlive
    st[COMPACTIONS] += 1
    return nk, nv


@njit
def live_entries(hk, hv, hm, tm, bm, plo):
    """Index entries holding live runs (``EngineStats.live_nodes``)."""
    n = 0
    for c in range(hk.shape[0]):
        if hv[c, V_USED] and hv[c, V_ROOT] >= 0 and \
                ref_ms(hm, tm, bm, hv[c, V_ROOT]) >= plo[hk[c, K_PART]]:
            n += 1
    return n
