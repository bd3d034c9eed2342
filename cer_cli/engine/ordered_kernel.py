"""The ordered index of the PCEA join over flat arrays, for numba: ``engine/ordered.py``'s
persistent treap (which the hash join of ``engine/pcea.py`` runs as Python objects), the
same tree, order, priorities' role and pieces, written for the compiled hash join
(``engine/pcea_kernel.py``).

When the transition that adopts runs of state ``p`` relates them to the new event by a
comparison ``key(t') rel probe(t)`` (``<``, ``<=``, ``>``, ``>=``, ``=``, ``!=``; each side an
expression of one event, so linear arithmetic such as ``y.v > x.v * 1.1 + 2`` is the key
``x.v * 1.1 + 2``), the runs of ``p`` (per equality key) are kept in a persistent *treap*:
a binary search tree on the key value whose shape is fixed by a pseudo-random priority
(a hash of the run's position), not by the start times.

* Why not a heap on start times: a tree that is both a search tree on the value and a
  max-start heap is as deep as the longest monotone run of values in time (a steadily
  rising price makes it a list), so a probe could return O(w) pieces. A treap's depth is
  O(log w) expected whatever the order in which the values arrive.
* Each node is augmented with the largest (``T_MS``) and smallest (``T_MN``) max-start of
  the runs in its subtree. ``T_MS`` lets enumeration skip subtrees whose runs all left the
  window, and lets the engine drop a wholly dead tree in O(1); ``T_MN`` lets ``t_insert``
  find and delete the expired runs first, so the tree holds only the window's runs (each
  run is deleted once: amortised O(log w) per insert).
* Because it is a search tree on the key, the runs satisfying ``key rel v`` are the union
  of O(depth) *pieces*: whole subtrees and single payloads along the two search paths
  (``t_pieces``). The adopting node keeps those pieces (a bundle) instead of one heap.
  A payload is a DS_w node without union children (``engine.pcea_kernel``), i.e. a
  one-run heap.
* Everything is persistent (path copying): a node that adopted pieces keeps seeing
  exactly the runs that existed then. Nothing reachable is ever written; a failed
  operation (an array full: ``FAIL``) leaves the tree as it was. The exception is a tree
  whose pieces no live run holds: ``t_delete_in`` and ``t_insert_in`` rewrite it in place
  (see "in place" below).

Layout, in flat arrays that numba compiles over (``engine/jit.py``; the same functions run
as plain Python for small runs): tree node ``n`` is ``ti[n] = (left, right, payload node,
priority, adopted set, position, label, size)`` (int64, ``T_*``), ``tm[n] = (max-start,
min-start, its payload's max-start)`` (the window-time dtype) and ``tk[n]`` its key (float64: the compared value, or
its rank among the values in play, see ``engine.pcea``). ``st[NT]`` nodes are in use.
Iterative throughout (numba compiles no recursion over these arrays), with scratch stacks
``sk*`` (their length bounds a tree's depth: deeper is ``FAIL``, and the caller grows them).

Cost: insertion, deletion of an expired run and probe O(log w) expected, w the runs of
one state and key in the window, for any arrival order of the values. Enumeration of a
piece: the runs still in the window, plus the expired nodes on the paths to them (a piece
is not a heap on start times, so at most O(log w) such nodes per run output; none when it
is enumerated at the event that made it).
"""

from __future__ import annotations

from cer_cli.engine.jit import njit_inline, njit_plain

#: ``ti`` columns: children, the payload (a DS_w node id; -1 once it left the window),
#: priority, what the payload adopted (``T_KID``: ``NULL`` nothing — a whole run by itself —,
#: the reference of its one adopted set, ``MANY``, or ``ALONE``: nothing, in a tree whose
#: other payloads may have adopted a set), the payload's position (ties of the
#: key), its label (``T_LAB``: every run of a tree is of one state), and the subtree's
#: number of nodes (its runs, while none has left the window: a count takes them at once).
#: With ``T_KID`` and ``T_LAB`` the enumeration goes from a tree node to the payload's
#: adopted set, or reports its whole run, without visiting the payload's DS_w node.
T_LEFT, T_RIGHT, T_NODE, T_PRIO, T_KID, T_POS, T_LAB, T_CNT = 0, 1, 2, 3, 4, 5, 6, 7
TI_WIDTH = 8
#: ``T_KID`` of a payload that adopted more than one set
MANY = -3
#: ``T_KID`` of a payload that adopted nothing in a tree whose other payloads may have
#: adopted a set (an iterated state's: ``engine.pcea_kernel._tree_kid``)
ALONE = -4
#: ``tm`` columns: largest and smallest max-start of the subtree, the payload's own
T_MS, T_MN, T_NMS = 0, 1, 2

NULL, FAIL = -1, -2
#: ``rel`` codes (``compiler.comparisons``' relations)
REL_CODES = {"<": 0, "<=": 1, ">": 2, ">=": 3, "=": 4, "!=": 5}
#: references (``engine.pcea_kernel``): ``id << 2 | kind``
HEAP, TREE, BUNDLE, FLAT = 0, 1, 2, 3

# ``st`` slots of the trees (shared with ``engine.pcea_kernel``, which owns the array)
NT = 1  # tree nodes in use
C_TREE_NODES = 9  # tree nodes made by updates (``Ops.tree_nodes``)

_M31 = 0x7FFFFFFF


@njit_inline
def prio_of(pos):
    """A pseudo-random 62-bit priority from a position: deterministic, so the tree shape,
    and hence the order in which matches are enumerated, is reproducible. Computed in
    31-bit pieces, so plain Python and numba's int64 agree (nothing overflows)."""
    a = (pos ^ (pos >> 31) ^ (pos >> 62)) & _M31
    b = ((pos >> 20) ^ (pos >> 51) ^ 0x2545F491) & _M31
    a = (((a >> 16) ^ a) * 0x45D9F3B) & _M31
    a = (((a >> 16) ^ a) * 0x45D9F3B) & _M31
    b = (((b >> 15) ^ b ^ a) * 0x2C1B3C6) & _M31
    b = (((b >> 16) ^ b) * 0x45D9F3B) & _M31
    return (a << 31) | ((b >> 16) ^ b)


@njit_inline
def _t_fix(ti, tm, x):
    """Node ``x``'s aggregates again, from its payload and its children's."""
    ms = tm[x, T_NMS]
    mn = ms
    cnt = 1
    for side in range(T_LEFT, T_RIGHT + 1):
        c = ti[x, side]
        if c >= 0:
            cnt += ti[c, T_CNT]
            if tm[c, T_MS] > ms:
                ms = tm[c, T_MS]
            if tm[c, T_MN] < mn:
                mn = tm[c, T_MN]
    tm[x, T_MS] = ms
    tm[x, T_MN] = mn
    ti[x, T_CNT] = cnt


@njit_inline
def t_make(ti, tm, tk, st, node, nms, key, prio, kid, pos, lab, left, right):
    """A new tree node (FAIL when the arrays are full); its aggregates from its children."""
    n = st[NT]
    if n >= ti.shape[0]:
        return FAIL
    ti[n, T_LEFT] = left
    ti[n, T_RIGHT] = right
    ti[n, T_NODE] = node
    ti[n, T_PRIO] = prio
    ti[n, T_KID] = kid
    ti[n, T_POS] = pos
    ti[n, T_LAB] = lab
    tm[n, T_NMS] = nms
    _t_fix(ti, tm, n)
    tk[n] = key
    st[NT] = n + 1
    st[C_TREE_NODES] += 1
    return n


@njit_inline
def t_copy(ti, tm, tk, st, x, left, right):
    """Node ``x`` with other children."""
    return t_make(ti, tm, tk, st, ti[x, T_NODE], tm[x, T_NMS], tk[x], ti[x, T_PRIO],
                  ti[x, T_KID], ti[x, T_POS], ti[x, T_LAB], left, right)


@njit_inline
def _before(tk, ti, x, key, pos):
    """Is node ``x`` before ``(key, pos)`` in (key, position) order?"""
    k = tk[x]
    return k < key or (k == key and ti[x, T_POS] < pos)


@njit_inline
def _split_path(ti, tk, sk, t, key, pos):
    """The search path of ``(key, pos)`` from ``t`` into ``sk``: each node, and 1 if it is
    before ``(key, pos)`` (it goes to the split's first part) else 0. Its length, or FAIL
    when ``sk`` is too short."""
    d = 0
    cur = t
    while cur >= 0:
        if d >= sk.shape[0]:
            return FAIL
        sk[d, 0] = cur
        if _before(tk, ti, cur, key, pos):
            sk[d, 1] = 1
            cur = ti[cur, T_RIGHT]
        else:
            sk[d, 1] = 0
            cur = ti[cur, T_LEFT]
        d += 1
    return d


@njit_plain
def t_split(ti, tm, tk, st, sk, t, key, pos):
    """``(nodes before (key, pos), the others)`` of ``t``, persistently: the search path's
    nodes are copied bottom-up. Returns ``(a, b)``, or ``(FAIL, FAIL)``."""
    d = _split_path(ti, tk, sk, t, key, pos)
    if d == FAIL:
        return FAIL, FAIL
    a = NULL
    b = NULL
    for j in range(d - 1, -1, -1):
        x = sk[j, 0]
        if sk[j, 1] == 1:
            a = t_copy(ti, tm, tk, st, x, ti[x, T_LEFT], a)
            if a == FAIL:
                return FAIL, FAIL
        else:
            b = t_copy(ti, tm, tk, st, x, b, ti[x, T_RIGHT])
            if b == FAIL:
                return FAIL, FAIL
    return a, b


@njit_inline
def _merge_path(ti, sk, a, b):
    """The merge of ``a`` and ``b`` (every key of ``a`` before every key of ``b``), read-only:
    the nodes whose child it changes into ``sk`` (each node and that child's side: an ``a``
    node's right, a ``b`` node's left), top down, and the subtree that ends it. Returns
    ``(length, subtree)``, or ``(FAIL, NULL)`` when ``sk`` is too short."""
    d = 0
    while a >= 0 and b >= 0:
        if d >= sk.shape[0]:
            return FAIL, NULL
        if ti[a, T_PRIO] > ti[b, T_PRIO]:
            sk[d, 0] = a
            sk[d, 1] = T_RIGHT
            a = ti[a, T_RIGHT]
        else:
            sk[d, 0] = b
            sk[d, 1] = T_LEFT
            b = ti[b, T_LEFT]
        d += 1
    return d, (a if a >= 0 else b)


@njit_plain
def t_merge(ti, tm, tk, st, sk, a, b):
    """The union of two trees, every key of ``a`` before every key of ``b`` (FAIL)."""
    d, out = _merge_path(ti, sk, a, b)
    if d == FAIL:
        return FAIL
    for j in range(d - 1, -1, -1):
        x = sk[j, 0]
        if sk[j, 1] == T_RIGHT:
            out = t_copy(ti, tm, tk, st, x, ti[x, T_LEFT], out)
        else:
            out = t_copy(ti, tm, tk, st, x, out, ti[x, T_RIGHT])
        if out == FAIL:
            return FAIL
    return out


@njit_plain
def t_purge(ti, tm, tk, st, sk, sk2, sk3, t, lo):
    """``t`` without the runs whose max-start is below ``lo`` (FAIL). Only subtrees
    holding such a run are entered (``T_MN``), so the work is O(depth) per run deleted:
    a post-order walk, ``sk`` its stack (node, stage), ``sk2`` the results, ``sk3`` the
    merges' scratch."""
    if t < 0 or tm[t, T_MN] >= lo:
        return t
    if tm[t, T_MS] < lo:
        return NULL
    nres = 0
    sk[0, 0] = t
    sk[0, 1] = 0
    top = 1
    while top > 0:
        x = sk[top - 1, 0]
        stage = sk[top - 1, 1]
        if stage < 2:
            sk[top - 1, 1] = stage + 1
            c = ti[x, T_LEFT] if stage == 0 else ti[x, T_RIGHT]
            if c < 0 or tm[c, T_MN] >= lo:
                if nres >= sk2.shape[0]:
                    return FAIL
                sk2[nres, 0] = c
                nres += 1
            elif tm[c, T_MS] < lo:
                if nres >= sk2.shape[0]:
                    return FAIL
                sk2[nres, 0] = NULL
                nres += 1
            else:
                if top >= sk.shape[0]:
                    return FAIL
                sk[top, 0] = c
                sk[top, 1] = 0
                top += 1
            continue
        top -= 1
        right = sk2[nres - 1, 0]
        left = sk2[nres - 2, 0]
        nres -= 2
        if tm[x, T_NMS] < lo:
            out = t_merge(ti, tm, tk, st, sk3, left, right)
        else:
            out = t_copy(ti, tm, tk, st, x, left, right)
        if out == FAIL:
            return FAIL
        sk2[nres, 0] = out
        nres += 1
    return sk2[0, 0]


@njit_inline
def _insert_path(ti, tk, sk, t, key, pos, prio):
    """Where a run of priority ``prio`` goes in ``t``: the path down to it into ``sk`` (each
    node and the side taken, ``T_LEFT``/``T_RIGHT``), and the subtree it will head.
    Returns ``(length, subtree)``, or ``(FAIL, NULL)`` when ``sk`` is too short."""
    d = 0
    cur = t
    while cur >= 0 and not prio > ti[cur, T_PRIO]:
        if d >= sk.shape[0]:
            return FAIL, NULL
        sk[d, 0] = cur
        if key < tk[cur] or (key == tk[cur] and pos < ti[cur, T_POS]):
            sk[d, 1] = T_LEFT
            cur = ti[cur, T_LEFT]
        else:
            sk[d, 1] = T_RIGHT
            cur = ti[cur, T_RIGHT]
        d += 1
    return d, cur


@njit_plain
def t_insert(ti, tm, tk, st, sk, sk2, sk3, t, node, nms, key, pos, kid, lab, lo):
    """A new tree with the live runs of ``t`` and the fresh run ``node`` (its max-start
    ``nms``, position ``pos``, ``T_KID`` ``kid``, label ``lab``) at ``key``; ``t`` is
    unchanged. Runs whose max-start is below ``lo`` are deleted first. FAIL (nothing
    reachable changed) when full."""
    t = t_purge(ti, tm, tk, st, sk, sk2, sk3, t, lo)
    if t == FAIL:
        return FAIL
    prio = prio_of(pos)
    d, cur = _insert_path(ti, tk, sk, t, key, pos, prio)
    if d == FAIL:
        return FAIL
    # the path stays in sk[:d]; the split uses sk2
    a, b = t_split(ti, tm, tk, st, sk2, cur, key, pos)
    if a == FAIL:
        return FAIL
    out = t_make(ti, tm, tk, st, node, nms, key, prio, kid, pos, lab, a, b)
    if out == FAIL:
        return FAIL
    for j in range(d - 1, -1, -1):
        x = sk[j, 0]
        if sk[j, 1] == T_LEFT:
            out = t_copy(ti, tm, tk, st, x, out, ti[x, T_RIGHT])
        else:
            out = t_copy(ti, tm, tk, st, x, ti[x, T_LEFT], out)
        if out == FAIL:
            return FAIL
    return out


# ------------------------------------------------------------------ in place (unshared trees)
#
# A tree no adopted piece references (only flat lists, which copy its runs, have read it:
# ``engine.pcea_kernel`` tracks this per index entry) has no old version anyone can reach,
# so its updates need not copy paths: they rewrite the nodes, as an ordinary treap does.
# The result is the tree the persistent functions would build (a treap's shape is fixed by
# its keys and priorities), so the enumeration order does not change. Each function first
# walks its path read-only, and changes nothing if a scratch stack is too short (FAIL).


@njit_plain
def t_delete_in(ti, tm, sk, sk2, t, lo):
    """``t`` (unshared) without one of the runs whose max-start is below ``lo`` (``T_MN``
    finds one), rewritten in place: the node is replaced by the merge of its children and
    its ancestors' aggregates are fixed (or, if ``T_MN`` was stale, only those). Returns the
    root, or FAIL (``sk``/``sk2`` too short: nothing changed). Each call leaves a whole,
    valid tree, so a caller may stop between two."""
    d = 0
    y = t
    while tm[y, T_NMS] >= lo:
        if d >= sk.shape[0]:
            return FAIL
        c = ti[y, T_LEFT]
        side = T_LEFT
        if c < 0 or tm[c, T_MN] >= lo:
            c = ti[y, T_RIGHT]
            side = T_RIGHT
            if c < 0 or tm[c, T_MN] >= lo:
                # no dead run below after all: compaction cut a dead subtree and left the
                # aggregates above it (``T_MN`` too low: harmless to the persistent
                # functions); fixed on this path, so that the caller's next call goes on
                _t_fix(ti, tm, y)
                for j in range(d - 1, -1, -1):
                    _t_fix(ti, tm, sk[j, 0])
                return t
        sk[d, 0] = y
        sk[d, 1] = side
        d += 1
        y = c
    # the merge of y's children, its path read first
    k, out = _merge_path(ti, sk2, ti[y, T_LEFT], ti[y, T_RIGHT])
    if k == FAIL:
        return FAIL
    for j in range(k - 1, -1, -1):
        x = sk2[j, 0]
        ti[x, sk2[j, 1]] = out
        _t_fix(ti, tm, x)
        out = x
    if d == 0:
        return out
    ti[sk[d - 1, 0], sk[d - 1, 1]] = out
    for j in range(d - 1, -1, -1):
        _t_fix(ti, tm, sk[j, 0])
    return t


@njit_plain
def t_insert_in(ti, tm, tk, st, sk, sk2, t, node, nms, key, pos, kid, lab):
    """``t_insert`` without the purge, for an unshared tree: the fresh run goes in by
    rewriting the nodes on its path (the split of the subtree it heads, then its ancestors'
    aggregates). Returns the root, or FAIL (a scratch stack or the arrays too short:
    nothing changed)."""
    if st[NT] >= ti.shape[0]:
        return FAIL
    prio = prio_of(pos)
    d, cur = _insert_path(ti, tk, sk, t, key, pos, prio)
    if d == FAIL:
        return FAIL
    e = _split_path(ti, tk, sk2, cur, key, pos)
    if e == FAIL:
        return FAIL
    a = NULL
    b = NULL
    for j in range(e - 1, -1, -1):
        x = sk2[j, 0]
        if sk2[j, 1] == 1:
            ti[x, T_RIGHT] = a
            _t_fix(ti, tm, x)
            a = x
        else:
            ti[x, T_LEFT] = b
            _t_fix(ti, tm, x)
            b = x
    out = t_make(ti, tm, tk, st, node, nms, key, prio, kid, pos, lab, a, b)
    if d == 0:
        return out
    ti[sk[d - 1, 0], sk[d - 1, 1]] = out
    for j in range(d):  # each ancestor gained one run, the fresh one
        x = sk[j, 0]
        ti[x, T_CNT] += 1
        if nms > tm[x, T_MS]:
            tm[x, T_MS] = nms
        if nms < tm[x, T_MN]:
            tm[x, T_MN] = nms
    return t


@njit_inline
def _outside_low(k, blo, v):
    """Is key ``k`` below the range (``blo``: 0 no bound, 1 ``k < v``, 2 ``k <= v``)?"""
    return (blo == 1 and k < v) or (blo == 2 and k <= v)


@njit_inline
def _outside_high(k, bhi, v):
    """Is key ``k`` above the range (``bhi``: 0 no bound, 1 ``k > v``, 2 ``k >= v``)?"""
    return (bhi == 1 and k > v) or (bhi == 2 and k >= v)


@njit_plain
def _collect(ti, tm, tk, sk, t, blo, bhi, v, lo, out, n):
    """Canonical decomposition of the live runs of ``t`` with keys inside the range
    (``_outside_low`` / ``_outside_high``): appends references to ``out[n:]`` — a whole
    subtree (``TREE``), or a single payload (``HEAP``, a one-run heap) — and returns the
    new ``n`` (FAIL: ``out`` or ``sk`` full). At a node inside the range, the smaller keys
    are walked with only the low bound, then the greater ones with only the high bound
    (``sk`` holds the second walks still to do)."""
    top = 0
    while True:
        while t >= 0 and tm[t, T_MS] >= lo:
            if blo == 0 and bhi == 0:
                if n >= out.shape[0]:
                    return FAIL
                if ti[t, T_LEFT] >= 0 or ti[t, T_RIGHT] >= 0:
                    out[n] = (t << 2) | TREE
                else:
                    out[n] = (ti[t, T_NODE] << 2) | HEAP
                n += 1
                break
            k = tk[t]
            if _outside_low(k, blo, v):
                t = ti[t, T_RIGHT]
                continue
            if _outside_high(k, bhi, v):
                t = ti[t, T_LEFT]
                continue
            if tm[t, T_NMS] >= lo:
                if n >= out.shape[0]:
                    return FAIL
                out[n] = (ti[t, T_NODE] << 2) | HEAP
                n += 1
            if top >= sk.shape[0]:
                return FAIL
            sk[top, 0] = ti[t, T_RIGHT]
            sk[top, 1] = bhi
            top += 1
            t = ti[t, T_LEFT]
            bhi = 0
        if top == 0:
            return n
        top -= 1
        t = sk[top, 0]
        bhi = sk[top, 1]
        blo = 0


@njit_plain
def t_pieces(ti, tm, tk, sk, t, rel, v, lo, out):
    """The live runs of ``t`` whose key satisfies ``key rel v`` (``REL_CODES``), as
    O(depth) pieces in ``out``: returns how many (FAIL: a scratch array is full). ``!=``
    is the union of ``<`` and ``>``."""
    if rel == 0:
        return _collect(ti, tm, tk, sk, t, 0, 2, v, lo, out, 0)
    if rel == 1:
        return _collect(ti, tm, tk, sk, t, 0, 1, v, lo, out, 0)
    if rel == 2:
        return _collect(ti, tm, tk, sk, t, 2, 0, v, lo, out, 0)
    if rel == 3:
        return _collect(ti, tm, tk, sk, t, 1, 0, v, lo, out, 0)
    if rel == 4:
        return _collect(ti, tm, tk, sk, t, 1, 1, v, lo, out, 0)
    n = _collect(ti, tm, tk, sk, t, 0, 2, v, lo, out, 0)
    if n == FAIL:
        return FAIL
    return _collect(ti, tm, tk, sk, t, 2, 0, v, lo, out, n)
