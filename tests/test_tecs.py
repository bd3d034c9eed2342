"""tECS invariants of the kernel's node arrays (cer_cli/engine/kernel.py): union gadgets
(a)–(d), union-lists, windowed enumeration (Algorithm 2), compaction.

The kernel functions run here on small arrays, compiled (or as plain Python under
``NUMBA_DISABLE_JIT=1``, see test_kernel.py); ``semantics`` is the set a node stands for,
by plain recursion, against which every operation is checked."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cer_cli.engine import kernel as K
from cer_cli.engine.kernel import BOTTOM, KIND, LAB, MX, NPOS, OUTPUT, UNION, A, B

NO_WINDOW = None


class Tecs:
    """Node arrays plus the kernel's node operations, for tests."""

    def __init__(self, cap: int = 4096) -> None:
        self.nodes = np.zeros((cap, 6), np.int64)
        self.mt = np.zeros(cap, np.int64)
        self.st = np.zeros(K.NSLOTS, np.int64)

    def __len__(self) -> int:
        return int(self.st[K.NN])

    def kind(self, n):
        return int(self.nodes[n, KIND])

    def bottom(self, pos: int, time: int, local: int) -> int:
        return K._add(self.nodes, self.mt, self.st, BOTTOM, pos, pos, time, -1, local, -1)

    def extend(self, n: int, pos: int, lab: int) -> int:
        nodes = self.nodes
        return K._add(nodes, self.mt, self.st, OUTPUT, pos, nodes[n, MX], self.mt[n], n, -1, lab)

    def union(self, n1: int, n2: int) -> int:
        return K._union(self.nodes, self.mt, self.st, n1, n2)

    def merge(self, ul: list[int]) -> int:
        return K._merge(self.nodes, self.mt, self.st, np.array(ul, np.int64), len(ul))

    def insert(self, ul: list[int], n: int) -> list[int]:
        nul = np.zeros((1, len(ul) + 1), np.int64)
        nul[0, : len(ul)] = ul
        nulen = np.array([len(ul)], np.int64)
        K._insert(self.nodes, self.mt, self.st, nul, nulen, 0, n)
        return nul[0, : nulen[0]].tolist()

    def enumerate(self, roots: list[int], tau, pos: int = 99, local: int = 99):
        """Every complex event below ``roots`` with start time ``>= tau``, as the kernel's
        enumeration outputs them: ``(start, start_local, ((pos, lab), ...))``."""
        final = np.ones(1, np.bool_)
        tstate = np.zeros((1, 1), np.int64)
        ul = np.array([[roots or [0]]], np.int64)
        ulen = np.array([[len(roots)]], np.int64)
        out = {k: np.zeros(1 << 14, np.int64) for k in ("start", "end", "part", "sloc", "eloc", "pos", "lab")}
        off = np.zeros((1 << 14) + 1, np.int64)
        stacks = [np.zeros(1 << 12, np.int64) for _ in range(4)]
        self.st[K.N_OUT] = self.st[K.N_EV] = 0
        found = K._enumerate(
            self.nodes, self.mt, self.st, tstate, ulen, ul, final, 0, 1, pos, local,
            tau is not None, 0 if tau is None else tau, True, *stacks,
            out["start"], out["end"], out["part"], out["sloc"], out["eloc"], off, out["pos"], out["lab"],
        )
        assert found == self.st[K.N_OUT]
        assert (out["end"][:found] == pos).all() and (out["eloc"][:found] == local).all()
        return [
            (int(out["start"][m]), int(out["sloc"][m]),
             tuple(zip(out["pos"][off[m]:off[m + 1]].tolist(), out["lab"][off[m]:off[m + 1]].tolist(), strict=True)))
            for m in range(found)
        ]


def semantics(t: Tecs, n: int) -> Counter:
    """Every full path below ``n`` as (start, start time, sorted marks), by plain recursion."""
    nodes = t.nodes
    k = t.kind(n)
    if k == BOTTOM:
        return Counter({(int(nodes[n, NPOS]), int(t.mt[n]), ()): 1})
    if k == OUTPUT:
        mark = (int(nodes[n, NPOS]), int(nodes[n, LAB]))
        return Counter({(s, tm, tuple(sorted(ev + (mark,)))): c for (s, tm, ev), c in semantics(t, nodes[n, A]).items()})
    return semantics(t, nodes[n, A]) + semantics(t, nodes[n, B])


def walk(found) -> Counter:
    return Counter((start, tuple(sorted(ev))) for start, _, ev in found)


def odepth(t: Tecs, n: int) -> int:
    return odepth(t, t.nodes[n, A]) + 1 if t.kind(n) == UNION else 0


def safe(t: Tecs, n: int) -> bool:
    return t.kind(n) != UNION or (odepth(t, n) == 1 and odepth(t, t.nodes[n, B]) <= 2)


def check_invariants(t: Tecs) -> None:
    nodes = t.nodes
    for n in range(len(t)):
        if t.kind(n) == UNION:
            left, right = nodes[n, A], nodes[n, B]
            assert left < n and right < n
            assert nodes[left, MX] >= nodes[right, MX], "not time-ordered"
            assert nodes[n, MX] == nodes[left, MX] and t.mt[n] == t.mt[left]
        elif t.kind(n) == OUTPUT:
            assert nodes[n, A] < n and nodes[n, MX] == nodes[nodes[n, A], MX]
        assert odepth(t, n) <= 3, "not 3-bounded"


def build_pool(rng: random.Random, t: Tecs, steps: int) -> list[int]:
    """Random safe nodes built only with the tECS operations, respecting their preconditions."""
    pool: list[int] = []
    pos = 0
    for _ in range(steps):
        op = rng.random()
        if op < 0.3 or not pool:
            pool.append(t.bottom(pos, pos * 10, pos))
            pos += 1
        elif op < 0.6:
            n = rng.choice(pool)
            pool.append(t.extend(n, pos, rng.randrange(3)))
            pos += 1
        else:
            n1 = rng.choice(pool)
            same = [n for n in pool if t.nodes[n, MX] == t.nodes[n1, MX]]
            n2 = rng.choice(same)
            u = t.union(n1, n2)
            assert safe(t, u)
            assert semantics(t, u) == semantics(t, n1) + semantics(t, n2)
            pool.append(u)
    return pool


@given(st.randoms(use_true_random=False), st.integers(5, 60))
@settings(max_examples=150, deadline=None)
def test_union_gadgets_keep_nodes_safe_time_ordered_and_3_bounded(rng, steps):
    t = Tecs()
    build_pool(rng, t, steps)
    check_invariants(t)
    assert t.st[K.ALLOC] == len(t)


def test_union_gadget_d_orders_right_children():
    t = Tecs()
    b0, b1, b2 = (t.bottom(i, i, i) for i in range(3))
    top = t.extend(b2, 5, 0)
    n1 = t.union(top, t.extend(b0, 6, 0))  # right max-start 0
    n2 = t.union(t.extend(b2, 7, 0), t.extend(b1, 8, 0))  # right max-start 1 > 0: case (d)
    u = t.union(n1, n2)
    check_invariants(t)
    assert safe(t, u)
    u2 = t.nodes[t.nodes[u, B], B]
    assert t.nodes[t.nodes[u2, A], MX] == 1 and t.nodes[t.nodes[u2, B], MX] == 0
    assert semantics(t, u) == semantics(t, n1) + semantics(t, n2)


def test_union_gadget_c():
    t = Tecs()
    b0, b1, b2 = (t.bottom(i, i, i) for i in range(3))
    n1 = t.union(t.extend(b2, 5, 0), t.extend(b1, 6, 0))
    n2 = t.union(t.extend(b2, 7, 0), t.extend(b0, 8, 0))
    u = t.union(n1, n2)
    check_invariants(t)
    u2 = t.nodes[t.nodes[u, B], B]
    assert t.nodes[t.nodes[u2, A], MX] == 1 and t.nodes[t.nodes[u2, B], MX] == 0


@given(st.randoms(use_true_random=False), st.integers(1, 30))
@settings(max_examples=150, deadline=None)
def test_union_list_insert_and_merge(rng, inserts):
    t = Tecs()
    pool = build_pool(rng, t, 40)
    top = max(int(t.nodes[n, MX]) for n in pool)
    head = t.extend(t.bottom(top + 1, (top + 1) * 10, top + 1), top + 2, 0)
    ul = [head]
    expected = semantics(t, head)
    mx = t.nodes[:, MX]
    for _ in range(inserts):
        n = rng.choice(pool)
        ul = t.insert(ul, n)
        expected += semantics(t, n)
        assert t.kind(ul[0]) != UNION
        assert all(mx[ul[0]] >= mx[m] for m in ul)
        assert all(mx[ul[i]] > mx[ul[i + 1]] for i in range(1, len(ul) - 1))
        assert all(safe(t, m) for m in ul)
    merged = t.merge(ul)
    assert safe(t, merged)
    assert semantics(t, merged) == expected
    check_invariants(t)


@given(st.randoms(use_true_random=False), st.integers(0, 80))
@settings(max_examples=150, deadline=None)
def test_windowed_enumeration_is_exact(rng, tau):
    t = Tecs()
    pool = build_pool(rng, t, 50)
    roots = rng.sample(pool, min(4, len(pool)))
    for root in roots:
        want = Counter({(s, ev): c for (s, tm, ev), c in semantics(t, root).items() if tm >= tau})
        found = t.enumerate([root], tau)
        assert walk(found) == want
        assert all(sloc == start for start, sloc, _ in found)  # a bottom's B: its local index
        assert all([p for p, _ in ev] == sorted(p for p, _ in ev) for _, _, ev in found)
    # several roots at once: the union of each one's
    assert walk(t.enumerate(roots, tau)) == sum((walk(t.enumerate([r], tau)) for r in roots), Counter())


def test_enumeration_of_duplicate_free_node_has_no_duplicates():
    t = Tecs()
    bottoms = [t.bottom(i, i, i) for i in range(4)]
    ul = [t.extend(bottoms[3], 9, 0)]
    for b in reversed(bottoms[:3]):
        ul = t.insert(ul, t.extend(b, 9, 1))
    found = walk(t.enumerate([t.merge(ul)], NO_WINDOW))
    assert set(found.values()) == {1} and len(found) == 4


@given(st.randoms(use_true_random=False), st.integers(0, 60))
@settings(max_examples=100, deadline=None)
def test_compaction_keeps_windowed_enumerations(rng, tau):
    t = Tecs()
    pool = build_pool(rng, t, 60)
    top = max(int(t.nodes[n, MX]) for n in pool)
    lists = []
    for _ in range(3):
        ul = [t.bottom(top + 1, (top + 1) * 10, top + 1)]
        for n in rng.sample(pool, min(5, len(pool))):
            ul = t.insert(ul, n)
        lists.append(ul)
    before = [walk(t.enumerate([n], tau)) for ul in lists for n in ul]
    before = [c for c in before if c]
    size = len(t)
    # one partition whose table holds the three lists
    width = max(len(ul) for ul in lists)
    tstate = np.arange(3, dtype=np.int64)[None, :]
    tlen = np.array([3], np.int64)
    ulen = np.array([[len(ul) for ul in lists]], np.int64)
    arr = np.zeros((1, 3, width), np.int64)
    for k, ul in enumerate(lists):
        arr[0, k, : len(ul)] = ul
    K._compact(t.nodes, t.mt, t.st, tstate, tlen, ulen, arr, np.array([tau], np.int64), np.ones(1, np.bool_))
    check_invariants(t)
    after_lists = [arr[0, k, : ulen[0, k]].tolist() for k in range(tlen[0])]
    after = [walk(t.enumerate([n], tau)) for ul in after_lists for n in ul]
    assert after == before
    assert len(t) <= size and t.st[K.COMPACTIONS] == 1
    assert all(t.mt[n] >= tau for ul in after_lists for n in ul)
    assert all(ul for ul in after_lists)  # emptied entries are dropped
