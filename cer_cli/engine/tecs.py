"""Timed enumerable compact sets (tECS) and union-lists (CORE, §4.1–4.2 and App. B).

A tECS is a DAG that stores, compactly, every partial match a det-state carries:

* a **bottom** node is where a run started (its position, its time);
* an **output** node marks one event with a label set and points to the rest (``next``);
* a **union** node stands for the union of its ``left`` and ``right`` children.

A full path from a node to a bottom is one open complex event. Every node stores its
**max-start** (the latest start below it), as a position (``mx``, the order the algorithm
relies on) and as a time (``mt``, what windows compare). Unions are only built through the
paper's gadgets (a)–(d) and union-lists, which keep the structure *time-ordered*
(``max(left) >= max(right)``) and *3-bounded* (at most 3 unions down any left spine), so
windowed enumeration has output-linear delay (see ``enumerate.py``).

Storage is a struct of arrays — parallel ``list``s of ints indexed by node id — rather than
one object per node: appending a node is O(1), and the layout maps directly onto typed
arrays for a compiled hot loop. Fields per node: ``kind``, ``pos`` (event position; for a
bottom the start), ``mx``, ``mt``, ``a`` (``next`` or ``left``), ``b`` (``right``; for a
bottom, the start's index in its partition's stream, which STRICT needs), ``lab`` (label-set
id of an output node).

Nodes are immutable once created and children always have smaller ids than their parents.
That makes **compaction** a single mark pass from the live roots plus one ascending sweep
that copies survivors and renumbers them. The mark pass drops what a window makes useless:
a root whose max-start time is out of the window goes, and a union whose right child is out
of the window is replaced by its left child (this only shortens spines, so the invariants
hold). Compacting when the arrays have doubled since the last compaction makes the cost
amortised O(1) per allocated node.
"""

from __future__ import annotations

BOTTOM, OUTPUT, UNION = 0, 1, 2
NO_WINDOW = float("-inf")


class TECS:
    """The node arrays of one engine (shared by all its partitions, which never share nodes)."""

    def __init__(self) -> None:
        self.kind: list[int] = []
        self.pos: list[int] = []
        self.mx: list[int] = []
        self.mt: list[float] = []
        self.a: list[int] = []
        self.b: list[int] = []
        self.lab: list[int] = []
        self.allocated = 0
        self.compactions = 0

    def __len__(self) -> int:
        return len(self.kind)

    def _add(self, kind: int, pos: int, mx: int, mt: float, a: int, b: int, lab: int) -> int:
        self.kind.append(kind)
        self.pos.append(pos)
        self.mx.append(mx)
        self.mt.append(mt)
        self.a.append(a)
        self.b.append(b)
        self.lab.append(lab)
        self.allocated += 1
        return len(self.kind) - 1

    # ------------------------------------------------------------------ operations

    def new_bottom(self, pos: int, time: float, local: int) -> int:
        """A run starting at ``pos`` (time ``time``, index ``local`` in its partition)."""
        return self._add(BOTTOM, pos, pos, time, -1, local, -1)

    def extend(self, n: int, pos: int, lab: int) -> int:
        """Mark event ``pos`` with label set ``lab`` on top of the partial matches ``n``."""
        return self._add(OUTPUT, pos, self.mx[n], self.mt[n], n, -1, lab)

    def _node(self, left: int, right: int) -> int:
        return self._add(UNION, -1, self.mx[left], self.mt[left], left, right, -1)

    def union(self, n1: int, n2: int) -> int:
        """``⟦n1⟧ ∪ ⟦n2⟧`` for safe nodes of equal max-start; the result is safe (Fig. 5)."""
        kind, a, b, mx = self.kind, self.a, self.b, self.mx
        if kind[n1] != UNION:  # (a)
            return self._node(n1, n2)
        if kind[n2] != UNION:  # (b)
            return self._node(n2, n1)
        r1, r2 = b[n1], b[n2]
        u2 = self._node(r1, r2) if mx[r1] >= mx[r2] else self._node(r2, r1)  # (c) / (d)
        return self._node(a[n1], self._node(a[n2], u2))

    # ------------------------------------------------------------------ union-lists

    def insert(self, ul: list[int], n: int) -> None:
        """Add safe node ``n`` (``max(n) <= max(ul[0])``) keeping max-starts strictly
        decreasing from index 1: equal max-starts are merged with ``union``."""
        mx = self.mx
        m = mx[n]
        for i in range(1, len(ul)):
            mi = mx[ul[i]]
            if mi == m:
                ul[i] = self.union(ul[i], n)
                return
            if mi < m:
                ul.insert(i, n)
                return
        ul.append(n)

    def merge(self, ul: list[int]) -> int:
        """One safe node for the whole list: the right comb ``∨(n0, ∨(n1, … nk))``."""
        n = ul[-1]
        for i in range(len(ul) - 2, -1, -1):
            n = self._node(ul[i], n)
        return n

    # ------------------------------------------------------------------ memory

    def compact(self, groups: list[tuple[float, list[list[int]]]]) -> None:
        """Keep only what the union-lists in ``groups`` can still enumerate.

        Each group is ``(tau, lists)``: a window lower bound on start times (``NO_WINDOW``
        for none) and union-lists that are rewritten in place (renumbered, out-of-window
        entries removed; a list may become empty).
        """
        kind, a, b, mt = self.kind, self.a, self.b, self.mt
        flag = bytearray(len(kind))  # 0 dead, 1 keep, 2 union replaced by its left child
        for tau, lists in groups:
            stack = [n for ul in lists for n in ul if mt[n] >= tau]
            while stack:
                n = stack.pop()
                if flag[n]:
                    continue
                k = kind[n]
                if k == UNION:
                    stack.append(a[n])
                    if mt[b[n]] >= tau:
                        flag[n] = 1
                        stack.append(b[n])
                    else:
                        flag[n] = 2
                else:
                    flag[n] = 1
                    if k == OUTPUT:
                        stack.append(a[n])
        new = TECS()
        new.allocated, new.compactions = self.allocated, self.compactions + 1
        remap = [-1] * len(kind)
        for n, f in enumerate(flag):
            if f == 1:
                k = kind[n]
                na = a[n] if k == BOTTOM else remap[a[n]]
                nb = remap[b[n]] if k == UNION else b[n]
                remap[n] = len(new.kind)
                new.kind.append(k)
                new.pos.append(self.pos[n])
                new.mx.append(self.mx[n])
                new.mt.append(mt[n])
                new.a.append(na)
                new.b.append(nb)
                new.lab.append(self.lab[n])
            elif f == 2:
                remap[n] = remap[a[n]]
        for tau, lists in groups:
            for ul in lists:
                ul[:] = [remap[n] for n in ul if mt[n] >= tau]
        self.__dict__.update(new.__dict__)
