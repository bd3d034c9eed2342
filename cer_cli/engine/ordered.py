"""The ordered index of the PCEA join: runs waiting in a state, found by a comparison.

When the transition that adopts runs of state ``p`` relates them to the new event by a
comparison ``key(t') rel probe(t)`` (``<``, ``<=``, ``>``, ``>=``, ``=``, ``!=``; each side an
expression of one event, so linear arithmetic such as ``y.v > x.v * 1.1 + 2`` is the key
``x.v * 1.1 + 2``), the runs of ``p`` (per equality key) are kept in a *priority search
tree*: a binary search tree on the key value that is at the same time a max-start heap
(a treap whose priority is the run's max-start ``ms``, ties broken by position).

* Because it is a max-start heap with the layout of ``engine.pcea.Node`` (payload, ``left``,
  ``right``), every subtree is a union-heap that ``engine.pcea.runs`` enumerates as it is:
  dead subtrees (``ms`` below the window) are pruned, every visited node yields a run, so
  enumeration stays output-linear.
* Because it is a search tree on the key, the runs satisfying ``key rel v`` are the union
  of O(depth) *pieces*: whole subtrees and single payloads along the two search paths
  (``pieces``). The adopting node keeps those pieces (a ``Bundle``) instead of one heap.
* Insertion is persistent (path copying, like the Braun heap's union): a node that adopted
  pieces keeps seeing exactly the runs that existed then. Dead subtrees met on the way are
  cut off, so the tree holds the window's runs (and dead ones hanging below live nodes).

Cost: insertion and probe O(depth). The depth is that of a treap whose priorities are the
start times: O(log w) expected when the compared values arrive in an order unrelated to
time (w: the runs of one state and key in the window), O(w) at worst (values monotone in
time, e.g. a steadily rising attribute). Enumeration: linear in the output, plus one check
per piece whose runs all left the window.
"""

from __future__ import annotations


class TNode:
    """A tree node: the payload of an ``engine.pcea.Node`` (same fields, so the heap walks
    read it alike) with its compared value ``key``. ``left`` holds smaller keys, ``right``
    greater or equal ones; both have a smaller (``ms``, ``pos``). Never mutated."""

    __slots__ = ("ms", "pos", "state", "time", "prod", "left", "right", "key")

    def __init__(self, ms, pos, state, time, prod, left, right, key):
        self.ms = ms
        self.pos = pos
        self.state = state
        self.time = time
        self.prod = prod
        self.left = left
        self.right = right
        self.key = key

    def __repr__(self) -> str:
        return f"TNode(state={self.state}, pos={self.pos}, ms={self.ms}, key={self.key!r})"


class Bundle:
    """The runs a node adopted through the ordered index: the union of ``pieces`` (heaps).
    ``ms`` is the largest max-start of its pieces (the latest start of any run in it)."""

    __slots__ = ("ms", "pieces")

    def __init__(self, ms, pieces):
        self.ms = ms
        self.pieces = pieces


def insert(t: TNode | None, x, key, lo) -> TNode:
    """A new tree with the runs of ``t`` and the fresh node ``x`` at ``key``; ``t`` is
    unchanged. Subtrees whose max-start is below ``lo`` are dead and dropped."""
    ms, pos = x.ms, x.pos
    # walk down while the existing node has the higher priority, copying the path
    path = []
    cur = t
    while cur is not None and cur.ms >= lo and (cur.ms > ms or (cur.ms == ms and cur.pos > pos)):
        path.append(cur)
        cur = cur.left if key < cur.key else cur.right
    if cur is not None and cur.ms < lo:
        cur = None
    small, large = _split(cur, key, lo)
    node = TNode(ms, pos, x.state, x.time, x.prod, small, large, key)
    for p in reversed(path):
        if key < p.key:
            node = TNode(p.ms, p.pos, p.state, p.time, p.prod, node, _live(p.right, lo), p.key)
        else:
            node = TNode(p.ms, p.pos, p.state, p.time, p.prod, _live(p.left, lo), node, p.key)
    return node


def _live(t, lo):
    return t if t is not None and t.ms >= lo else None


def _split(t: TNode | None, key, lo) -> tuple[TNode | None, TNode | None]:
    """(keys < key, keys >= key), persistently, without the dead subtrees."""
    if t is None or t.ms < lo:
        return None, None
    if t.key < key:
        a, b = _split(t.right, key, lo)
        return TNode(t.ms, t.pos, t.state, t.time, t.prod, _live(t.left, lo), a, t.key), b
    a, b = _split(t.left, key, lo)
    return a, TNode(t.ms, t.pos, t.state, t.time, t.prod, b, _live(t.right, lo), t.key)


def _leaf(t: TNode) -> TNode:
    """The payload of ``t`` alone (its own run, without the subtrees)."""
    return TNode(t.ms, t.pos, t.state, t.time, t.prod, None, None, t.key)


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
    """The live runs of ``t`` whose key satisfies ``key rel v``, as O(depth) heaps (whole
    subtrees and single payloads). ``!=`` is the union of ``<`` and ``>``."""
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
            out.append(t)
            return
        k = t.key
        if below is not None and below(k):
            t = t.right  # t and its smaller keys are below the range
            continue
        if above is not None and above(k):
            t = t.left  # t and its greater-or-equal keys are above it
            continue
        out.append(_leaf(t))
        _collect(t.left, below, None, lo, out)  # smaller keys than an inside one: below the top
        t, below = t.right, None  # greater-or-equal keys: above the bottom
