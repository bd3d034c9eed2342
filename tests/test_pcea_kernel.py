"""Pieces of the hash join's array kernel (``engine/pcea_kernel.py``) against the
interpreted hash join (``engine/pcea.py``).

``h_union`` (the persistent Braun heap of DS_w, ordered by (max-start, position)) must build
the very heap ``pcea.union`` builds, node for node, keep every version it made unchanged and
hold exactly the live runs; a full array makes it ``FAIL`` without changing any version.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cer_cli.engine import pcea as P
from cer_cli.engine import pcea_kernel as K


class Heaps:
    def __init__(self, cap: int):
        self.hi = np.zeros((cap, K.HI_WIDTH), np.int64)
        self.hm = np.zeros((cap, 2), np.int64)
        self.st = np.zeros(K.NSLOTS, np.int64)
        self.fails = 0

    def grow(self) -> None:
        self.fails += 1
        n = self.hi.shape[0]
        for a in ("hi", "hm"):
            old = getattr(self, a)
            new = np.zeros((2 * n, old.shape[1]), old.dtype)
            new[:n] = old
            setattr(self, a, new)

    def fresh(self, pos: int, ms: int) -> int:
        while True:
            x = K._hnew(self.hi, self.hm, self.st, pos, 0, pos, 1, ms, 0, 0, K.NULL, K.NULL, 0)
            if x >= 0:
                return x
            self.grow()

    def union(self, h: int, x: int, lo: int) -> int:
        while True:
            before = self.st[K.NH]
            r = K.h_union(self.hi, self.hm, self.st, h, x, lo)
            if r != K.FAIL:
                return r
            self.st[K.NH] = before  # what a failed union made is unreachable
            self.grow()

    def shape(self, h: int, lo: int):
        """(position, max-start, left, right) of the live heap, as nested tuples."""
        if h < 0 or self.hm[h, K.M_MS] < lo:
            return None
        return (int(self.hi[h, K.H_POS]), int(self.hm[h, K.M_MS]),
                self.shape(int(self.hi[h, K.H_LEFT]), lo),
                self.shape(int(self.hi[h, K.H_RIGHT]), lo))


def py_shape(h, lo):
    if h is None or h.ms < lo:
        return None
    return (h.pos, h.ms, py_shape(h.left, lo), py_shape(h.right, lo))


def runs(shape) -> list[tuple[int, int]]:
    if shape is None:
        return []
    pos, ms, left, right = shape
    for sub in (left, right):
        assert sub is None or (sub[1], sub[0]) < (ms, pos)  # heap order
    return [(pos, ms)] + runs(left) + runs(right)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2)), min_size=1, max_size=60),
       st.sampled_from([2, 64]))
def test_h_union_is_the_interpreted_union(seq, cap) -> None:
    arr = Heaps(cap)
    h, ph = K.NULL, None
    ms = lo = 0
    live: list[tuple[int, int]] = []
    versions = []
    for pos, (dms, dlo) in enumerate(seq):
        ms += dms
        lo = min(lo + dlo, ms)
        x = arr.fresh(pos, ms)
        h = arr.union(h, x, lo)
        ph = P.union(ph, P.Node(ms, pos, 0, pos), lo)
        assert arr.shape(h, lo) == py_shape(ph, lo)
        live = [r for r in live if r[1] >= lo] + [(pos, ms)]
        assert sorted(runs(arr.shape(h, lo))) == sorted(live)
        versions.append((h, lo, arr.shape(h, lo)))
        for old, olo, shape in versions:  # persistence
            assert arr.shape(old, olo) == shape
    if cap == 2 and len(seq) > 2:
        assert arr.fails > 0
