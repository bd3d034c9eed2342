"""The ordered index over flat arrays (``engine/ordered_kernel.py``) against a brute force.

A random sequence of insertions (key, position, max-start, window bound) is replayed on the
treap; after each, every version made so far must still hold exactly its runs (persistence),
be a search tree on (key, position) and a heap on the priorities with exact aggregates, and
``t_pieces`` must cover exactly the live runs whose key satisfies each relation, each once.
A full array makes an insertion ``FAIL`` without changing any version; the caller grows the
arrays and retries. The in-place updates of an unshared tree must build the persistent
tree's shape. The compiled functions (``jit.compiled``) must build the very same arrays.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cer_cli.engine import jit as J
from cer_cli.engine import ordered_kernel as O

MODULE = "cer_cli.engine.ordered_kernel"
RELS = {"<": lambda k, v: k < v, "<=": lambda k, v: k <= v, ">": lambda k, v: k > v,
        ">=": lambda k, v: k >= v, "=": lambda k, v: k == v, "!=": lambda k, v: k != v}


class Tree:
    """The arrays of one ordered index, grown on ``FAIL`` like the hash join's state."""

    def __init__(self, cap: int, depth: int, dtype=np.int64, fns: dict | None = None):
        self.ti = np.zeros((cap, O.TI_WIDTH), np.int64)
        self.tm = np.zeros((cap, 3), dtype)
        self.tk = np.zeros(cap, np.float64)
        self.st = np.zeros(16, np.int64)
        self.sk, self.sk2, self.sk3 = (np.zeros((depth, 2), np.int64) for _ in range(3))
        self.out = np.zeros(depth, np.int64)
        self.fns = fns or {}
        self.fails = 0

    def fn(self, name):
        return self.fns.get(name, getattr(O, name))

    def grow(self) -> None:
        self.fails += 1
        n = self.ti.shape[0]
        for a in ("ti", "tm"):
            old = getattr(self, a)
            new = np.zeros((2 * n, old.shape[1]), old.dtype)
            new[:n] = old
            setattr(self, a, new)
        self.tk = np.concatenate([self.tk, np.zeros(n)])
        for a in ("sk", "sk2", "sk3"):
            old = getattr(self, a)
            setattr(self, a, np.concatenate([old, np.zeros_like(old)]))
        self.out = np.concatenate([self.out, np.zeros_like(self.out)])

    def insert(self, t, node, nms, key, pos, lo):
        while True:
            before = self.st[O.NT]
            r = self.fn("t_insert")(self.ti, self.tm, self.tk, self.st, self.sk, self.sk2,
                                    self.sk3, t, node, nms, float(key), pos, O.MANY, 0, lo)
            if r != O.FAIL:
                return r
            self.st[O.NT] = before  # the nodes of a failed insertion are unreachable
            self.grow()

    def pieces(self, t, rel, v, lo):
        while True:
            n = self.fn("t_pieces")(self.ti, self.tm, self.tk, self.sk, t, O.REL_CODES[rel],
                                    float(v), lo, self.out)
            if n != O.FAIL:
                return list(self.out[:n])
            self.grow()

    def inorder(self, t) -> list[tuple]:
        """(key, position, payload, payload's max-start) in order; checks the invariants."""
        out: list[tuple] = []
        self._walk(t, out, None)
        return out

    def _walk(self, t, out, parent_prio):
        if t < 0:
            return None
        ti, tm = self.ti, self.tm
        assert t < self.st[O.NT]
        if parent_prio is not None:
            assert ti[t, O.T_PRIO] < parent_prio  # a heap on priorities
        assert ti[t, O.T_PRIO] == O.prio_of(int(ti[t, O.T_POS]))
        agg = [tm[t, O.T_NMS]]
        first = len(out)
        left = self._walk(ti[t, O.T_LEFT], out, ti[t, O.T_PRIO])
        out.append((self.tk[t], int(ti[t, O.T_POS]), int(ti[t, O.T_NODE]), tm[t, O.T_NMS]))
        right = self._walk(ti[t, O.T_RIGHT], out, ti[t, O.T_PRIO])
        for sub in (left, right):
            if sub is not None:
                agg += list(sub)
        assert tm[t, O.T_MS] == max(agg) and tm[t, O.T_MN] == min(agg)
        assert ti[t, O.T_CNT] == len(out) - first  # the subtree's size
        return tm[t, O.T_MS], tm[t, O.T_MN]

    def expand(self, ref, lo) -> list[int]:
        """The live payloads of one piece (what enumeration walks)."""
        kind, x = ref & 3, ref >> 2
        if kind == O.HEAP:
            return [x]
        assert kind == O.TREE
        return [node for _, _, node, nms in self.inorder(x) if nms >= lo]


ops = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 3), st.integers(0, 4)),
               min_size=1, max_size=40)


def replay(tree: Tree, seq) -> None:
    """Insert ``seq`` (key, max-start step, bound step) and check every version."""
    versions: list[tuple[int, list[tuple]]] = []  # (root, its runs as the brute force sees)
    runs: list[tuple] = []
    root, ms, lo = O.NULL, 0, 0
    for pos, (key, dms, dlo) in enumerate(seq):
        ms += dms
        lo = min(lo + dlo, ms)  # the bound follows the latest start: a fresh run is live
        node = 1000 + pos
        root = tree.insert(root, node, ms, key, pos, lo)
        runs = sorted([r for r in runs if r[3] >= lo] + [(float(key), pos, node, ms)])
        versions.append((root, runs))
        for old, want in versions:  # persistence: no version ever changes
            assert tree.inorder(old) == [tuple(r) for r in want]
        for rel, holds in RELS.items():
            for v in (-1, 0, 3, 6, 7):
                for plo in (lo, ms):
                    got = [p for ref in tree.pieces(root, rel, v, plo)
                           for p in tree.expand(ref, plo)]
                    want = [r[2] for r in runs if holds(r[0], v) and r[3] >= plo]
                    assert sorted(got) == sorted(want), (rel, v, plo)
                    assert len(set(got)) == len(got)  # each run in one piece


@settings(max_examples=60, deadline=None)
@given(ops)
def test_ordered_kernel_equals_brute_force(seq) -> None:
    replay(Tree(256, 64), seq)


@settings(max_examples=30, deadline=None)
@given(ops)
def test_full_arrays_fail_without_changing_any_version(seq) -> None:
    """Arrays of 2 nodes and stacks of depth 1: insertions and probes FAIL, are retried on
    grown arrays, and the result is the brute force's."""
    tree = Tree(2, 1)
    replay(tree, seq)
    if len(seq) > 2:
        assert tree.fails > 0


def shape(tree: Tree, t) -> tuple | None:
    """The tree's structure by (key, position): equal shapes hold the runs alike."""
    if t < 0:
        return None
    ti = tree.ti
    return (shape(tree, ti[t, O.T_LEFT]), (tree.tk[t], int(ti[t, O.T_POS])),
            shape(tree, ti[t, O.T_RIGHT]))


def insert_in_place(tree: Tree, t, node, nms, key, pos, lo):
    """``pcea_kernel._insert_in_place``'s use of the in-place functions: delete the runs
    below ``lo`` one at a time, then insert; on FAIL (stacks or arrays too short) grow and
    go on from the tree as it is (each call left it whole)."""
    while t >= 0 and tree.tm[t, O.T_MN] < lo:
        if tree.tm[t, O.T_MS] < lo:
            t = O.NULL
            break
        r = tree.fn("t_delete_in")(tree.ti, tree.tm, tree.sk, tree.sk2, t, lo)
        if r == O.FAIL:
            tree.grow()
            continue
        t = r
    while True:
        r = tree.fn("t_insert_in")(tree.ti, tree.tm, tree.tk, tree.st, tree.sk, tree.sk2, t,
                                   node, nms, float(key), pos, O.MANY, 0)
        if r != O.FAIL:
            return r
        tree.grow()


@settings(max_examples=60, deadline=None)
@given(ops, st.sampled_from([(256, 64), (2, 1)]))
def test_in_place_updates_build_the_persistent_tree(seq, size) -> None:
    """An unshared tree rewritten in place (``t_delete_in``, ``t_insert_in``) holds the
    same runs as the persistent one after every insertion, in the same shape (so the
    enumeration order does not change), with exact aggregates and pieces; it makes one node
    per insertion. With arrays of 2 nodes and stacks of depth 1 the calls FAIL without
    changing anything, and go on after growth."""
    persistent, in_place = Tree(256, 64), Tree(*size)
    p_root = i_root = O.NULL
    runs: list[tuple] = []
    ms = lo = 0
    for pos, (key, dms, dlo) in enumerate(seq):
        ms += dms
        lo = min(lo + dlo, ms)
        node = 1000 + pos
        p_root = persistent.insert(p_root, node, ms, key, pos, lo)
        i_root = insert_in_place(in_place, i_root, node, ms, key, pos, lo)
        runs = sorted([r for r in runs if r[3] >= lo] + [(float(key), pos, node, ms)])
        assert in_place.inorder(i_root) == [tuple(r) for r in runs]
        assert shape(in_place, i_root) == shape(persistent, p_root)
        for rel, holds in RELS.items():
            for v in (-1, 3, 7):
                got = [p for ref in in_place.pieces(i_root, rel, v, lo)
                       for p in in_place.expand(ref, lo)]
                assert sorted(got) == sorted(r[2] for r in runs if holds(r[0], v))
    assert in_place.st[O.NT] == len(seq)
    if size == (2, 1) and len(seq) > 2:
        assert in_place.fails > 0


def test_in_place_calls_that_fail_change_nothing() -> None:
    """Stacks too short for the path: FAIL, and the arrays are as they were."""
    tree = Tree(64, 32)
    root = O.NULL
    for pos in range(20):
        root = insert_in_place(tree, root, 1000 + pos, pos, (pos * 7) % 11, pos, 0)
    before = (tree.ti.copy(), tree.tm.copy(), tree.st.copy())
    short = np.zeros((1, 2), np.int64)
    assert O.t_insert_in(tree.ti, tree.tm, tree.tk, tree.st, short, short, root, 2000, 30,
                         5.0, 30, O.MANY, 0) == O.FAIL
    assert O.t_delete_in(tree.ti, tree.tm, short, short, root, 15) == O.FAIL
    assert all((a == b).all() for a, b in zip(before, (tree.ti, tree.tm, tree.st), strict=True))


def test_float_window_times() -> None:
    """Time windows over float times keep max-starts as float64."""
    tree = Tree(64, 32, np.float64)
    replay(tree, [(k % 5, k % 2, k % 3) for k in range(25)])


def test_depth_is_logarithmic_for_monotone_values() -> None:
    """A steadily rising value (the case a max-start heap turns into a list) keeps the
    treap shallow: its depth is about 2-3 ln n, far below n."""
    tree = Tree(1 << 14, 128)
    root = O.NULL
    n = 3000
    for pos in range(n):
        root = tree.insert(root, pos, 0, pos, pos, 0)
    depth, stack = 0, [(root, 1)]
    while stack:
        t, d = stack.pop()
        if t >= 0:
            depth = max(depth, d)
            stack += [(tree.ti[t, O.T_LEFT], d + 1), (tree.ti[t, O.T_RIGHT], d + 1)]
    assert depth < 60
    assert len(tree.pieces(root, "<", n // 2, 0)) < 60  # O(depth) pieces


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1" or not J.HAVE_NUMBA,
                    reason="needs numba")
def test_compiled_builds_the_same_arrays() -> None:
    """``jit.compiled`` compiles the ordered index's marked functions; they build exactly
    the arrays the plain ones do (priorities included: computed without overflow)."""
    fns = J.compiled(MODULE)
    assert {"t_insert", "t_pieces", "t_purge", "prio_of"} <= set(fns)
    assert J.compiled() is not fns and "t_insert" not in J.compiled()  # the CEA's own
    seq = [((p * 7) % 11, p % 3, p % 4) for p in range(200)]
    plain, comp = Tree(8, 4), Tree(8, 4, fns=fns)
    replay(plain, seq[:40])
    replay(comp, seq[:40])
    n = plain.st[O.NT]
    assert n == comp.st[O.NT] and plain.fails == comp.fails
    assert (plain.ti[:n] == comp.ti[:n]).all() and (plain.tm[:n] == comp.tm[:n]).all()
    assert (plain.tk[:n] == comp.tk[:n]).all()
    big = 1 << 61
    assert fns["prio_of"](big + 12345) == O.prio_of(big + 12345)
