"""Windowed enumeration of the complex events stored below a tECS node (CORE App. B.1).

``enumerate_window`` is Algorithm 2: a depth-first walk that always follows the left child
of a union and pushes the right child only when its max-start time is inside the window
(``mt >= tau``). Because the tECS is time-ordered, the left child of a visited union is
always inside the window too, so every walk ends at a bottom that yields an output: no dead
ends, and with 3-bounded spines the delay between two outputs is linear in the size of the
next output. The marked events collected so far form a persistent cons list, so pushing a
branch is O(1). On a duplicate-free node every complex event comes out once.

``enumerate_latest_first`` visits the same set in non-increasing start order (the order
LIMIT cuts in): a best-first walk whose frontier is a heap keyed on max-start, costing an
extra O(log frontier) per union visited.

Both yield ``(start, start_local, events)`` with ``events`` a cons list
``(pos, labelset, rest) | None`` in increasing position order.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from cer_cli.engine.tecs import BOTTOM, OUTPUT, TECS

Cons = tuple | None
Found = tuple[int, int, Cons]


def enumerate_window(t: TECS, node: int, tau: float) -> Iterator[Found]:
    """Every open complex event below ``node`` whose start time is ``>= tau``."""
    kind, pos, a, b, mt, lab = t.kind, t.pos, t.a, t.b, t.mt, t.lab
    if mt[node] < tau:
        return
    stack: list[tuple[int, Cons]] = [(node, None)]
    while stack:
        n, p = stack.pop()
        while True:
            k = kind[n]
            if k == BOTTOM:
                yield pos[n], b[n], p
                break
            if k == OUTPUT:
                p = (pos[n], lab[n], p)
                n = a[n]
            else:
                r = b[n]
                if mt[r] >= tau:
                    stack.append((r, p))
                n = a[n]


def enumerate_latest_first(t: TECS, roots: list[int], tau: float) -> Iterator[Found]:
    """Like ``enumerate_window`` over several roots, in non-increasing start position."""
    kind, pos, a, b, mt, mx, lab = t.kind, t.pos, t.a, t.b, t.mt, t.mx, t.lab
    heap: list[tuple[int, int, int, Cons]] = []
    seq = 0
    for r in roots:
        if mt[r] >= tau:
            heap.append((-mx[r], seq, r, None))
            seq += 1
    heapq.heapify(heap)
    while heap:
        _, _, n, p = heapq.heappop(heap)
        while True:
            k = kind[n]
            if k == BOTTOM:
                yield pos[n], b[n], p
                break
            if k == OUTPUT:
                p = (pos[n], lab[n], p)
                n = a[n]
            else:
                r = b[n]
                if mt[r] >= tau:
                    heapq.heappush(heap, (-mx[r], seq, r, p))
                    seq += 1
                n = a[n]


def events_of(p: Cons, labelsets: list[tuple[str, ...]]) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """The cons list of marked events as ``((pos, variables), ...)`` in stream order."""
    out = []
    while p is not None:
        out.append((p[0], labelsets[p[1]]))
        p = p[2]
    return tuple(out)
