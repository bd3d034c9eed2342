"""The ordered index of the PCEA join: runs waiting in a state, found by a comparison.

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
* Each node is augmented with the largest (``ms``) and smallest (``mn``) max-start of the
  runs in its subtree. ``ms`` lets enumeration (``engine.pcea.adopted``) skip subtrees
  whose runs all left the window, and lets the engine drop a wholly dead tree in O(1);
  ``mn`` lets ``insert`` find and delete the expired runs first, so the tree holds only the
  window's runs (each run is deleted once: amortised O(log w) per insert).
* Because it is a search tree on the key, the runs satisfying ``key rel v`` are the union
  of O(depth) *pieces*: whole subtrees and single payloads along the two search paths
  (``pieces``). The adopting node keeps those pieces (a ``Bundle``) instead of one heap.
  A payload is an ``engine.pcea.Node`` without union children, i.e. a one-run heap.
* Everything is persistent (path copying): a node that adopted pieces keeps seeing
  exactly the runs that existed then.

Cost: insertion, deletion of an expired run and probe O(log w) expected, w the runs of
one state and key in the window, for any arrival order of the values. Enumeration of a
piece: the runs still in the window, plus the expired nodes on the paths to them (a piece
is not a heap on start times, so at most O(log w) such nodes per run output; none when it
is enumerated at the event that made it).
"""

from __future__ import annotations

from cer_cli.engine.ordered_kernel import prio_of


def priority(pos: int) -> int:
    """A pseudo-random priority from a position: deterministic, so the tree shape, and
    hence the order in which matches are enumerated, is reproducible. The array kernel's
    (``ordered_kernel.prio_of``), so that both build the same trees and enumerate the
    same matches in the same order."""
    return prio_of(pos)


class TNode:
    """A tree node: the run ``node`` (its payload, a childless ``engine.pcea.Node``) at
    ``key``; ``left`` / ``right`` hold the nodes before / after it in (key, position) order
    (the position breaks ties, so equal values do not make a list), both a smaller
    ``prio``. ``ms`` / ``mn``: largest / smallest max-start in the subtree. Never mutated."""

    __slots__ = ("ms", "mn", "prio", "key", "node", "left", "right")

    def __init__(self, node, key, prio, left, right):
        self.node = node
        self.key = key
        self.prio = prio
        self.left = left
        self.right = right
        ms = mn = node.ms
        if left is not None:
            if left.ms > ms:
                ms = left.ms
            if left.mn < mn:
                mn = left.mn
        if right is not None:
            if right.ms > ms:
                ms = right.ms
            if right.mn < mn:
                mn = right.mn
        self.ms = ms
        self.mn = mn

    def __repr__(self) -> str:
        return f"TNode(pos={self.node.pos}, ms={self.ms}, key={self.key!r})"


class Bundle:
    """The runs a node adopted through the ordered index: the union of ``pieces`` (heaps
    or subtrees). ``ms`` is the largest max-start of its pieces (the latest start in it)."""

    __slots__ = ("ms", "pieces")

    def __init__(self, ms, pieces):
        self.ms = ms
        self.pieces = pieces


class _Count:
    """Tree nodes made by one update (``Ops.tree_nodes`` in the engine)."""

    __slots__ = ("n",)

    def __init__(self):
        self.n = 0


def insert(t: TNode | None, x, key, lo, ops=None) -> TNode:
    """A new tree with the live runs of ``t`` and the fresh run ``x`` (a childless node) at
    ``key``; ``t`` is unchanged. Runs whose max-start is below ``lo`` are deleted first.
    ``ops`` (optional): its ``tree_inserts`` / ``tree_nodes`` count the work."""
    c = _Count()
    t = _purge(t, lo, c)
    t = _insert(t, x, key, priority(x.pos), c)
    if ops is not None:
        ops.tree_inserts += 1
        ops.tree_nodes += c.n
    return t


def _make(node, key, prio, left, right, c: _Count) -> TNode:
    c.n += 1
    return TNode(node, key, prio, left, right)


def _insert(t, x, key, prio, c):
    if t is None or prio > t.prio:
        small, large = _split(t, key, x.pos, c)
        return _make(x, key, prio, small, large, c)
    if key < t.key or (key == t.key and x.pos < t.node.pos):
        return _make(t.node, t.key, t.prio, _insert(t.left, x, key, prio, c), t.right, c)
    return _make(t.node, t.key, t.prio, t.left, _insert(t.right, x, key, prio, c), c)


def _split(t, key, pos, c):
    """(nodes before (key, pos), the others), persistently."""
    if t is None:
        return None, None
    if t.key < key or (t.key == key and t.node.pos < pos):
        a, b = _split(t.right, key, pos, c)
        return _make(t.node, t.key, t.prio, t.left, a, c), b
    a, b = _split(t.left, key, pos, c)
    return a, _make(t.node, t.key, t.prio, b, t.right, c)


def _merge(a, b, c):
    """The union of two trees, every key of ``a`` at most every key of ``b``."""
    if a is None:
        return b
    if b is None:
        return a
    if a.prio > b.prio:
        return _make(a.node, a.key, a.prio, a.left, _merge(a.right, b, c), c)
    return _make(b.node, b.key, b.prio, _merge(a, b.left, c), b.right, c)


def _purge(t, lo, c):
    """``t`` without the runs whose max-start is below ``lo``. Only subtrees holding such a
    run are entered (``mn``), so the work is O(depth) per run deleted."""
    if t is None or t.mn >= lo:
        return t
    if t.ms < lo:
        return None
    left, right = _purge(t.left, lo, c), _purge(t.right, lo, c)
    if t.node.ms < lo:
        return _merge(left, right, c)
    return _make(t.node, t.key, t.prio, left, right, c)


def size(t: TNode | None) -> int:
    """Nodes of a tree (tests and statistics)."""
    return 0 if t is None else 1 + size(t.left) + size(t.right)


#: ``key rel v`` as (key below the range?, key above the range?) tests.
def _bounds(rel: str, v):
    if rel == "<":
        return None, lambda k: k >= v
    if rel == "<=":
        return None, lambda k: k > v
    if rel == ">":
        return (lambda k: k <= v), None
    if rel == ">=":
        return (lambda k: k < v), None
    if rel == "=":
        return (lambda k: k < v), (lambda k: k > v)
    raise ValueError(rel)


def pieces(t: TNode | None, rel: str, v, lo) -> list:
    """The live runs of ``t`` whose key satisfies ``key rel v``, as O(depth) pieces (whole
    subtrees, and single payloads: one-run heaps). ``!=`` is the union of ``<`` and ``>``."""
    out: list = []
    if rel == "!=":
        _collect(t, None, lambda k: k >= v, lo, out)
        _collect(t, lambda k: k <= v, None, lo, out)
    else:
        below, above = _bounds(rel, v)
        _collect(t, below, above, lo, out)
    return out


def _collect(t, below, above, lo, out) -> None:
    """Canonical decomposition: ``below(k)`` / ``above(k)`` say the key is outside the range
    on that side (None: no bound on that side, or already known to hold in ``t``)."""
    while t is not None and t.ms >= lo:
        if below is None and above is None:
            out.append(t if t.left is not None or t.right is not None else t.node)
            return
        k = t.key
        if below is not None and below(k):
            t = t.right  # t and the keys before it (not greater) are below the range
            continue
        if above is not None and above(k):
            t = t.left  # t and the keys after it (not smaller) are above it
            continue
        if t.node.ms >= lo:
            out.append(t.node)
        _collect(t.left, below, None, lo, out)  # smaller keys than an inside one: below the top
        t, below = t.right, None  # greater-or-equal keys: above the bottom
