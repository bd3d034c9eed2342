"""The hash join: Algorithm 1 of the PCEA paper (Pinto & Riveros, Section 5, Appendix C)
over the PCEA that ``cer_cli.compiler.pcea`` builds from equalities between events.

Runs are kept factorised in DS_w, a DAG of nodes. A node stands for a set of runs: its
*payload* (state, position, window time, ``prod`` = the union-heaps of the runs it adopted,
one per source state) gives the runs ending at its own event, and its *union* children
(``left``, ``right``) hold more runs of the same state and key. ``ms`` (max-start) is the
latest start time of any run in the node's payload; union children never have a larger one
(heap order), so ``ms`` is also the latest start in the whole heap: a heap whose ``ms`` is
before the window holds no live run and is dropped in O(1), at insertion and at enumeration.

Per event (``HashJoinEngine._loop``):

1. *FireTransitions*: for every state whose step the event takes, probe ``H[p][key]`` for
   each source state ``p`` of its transition (the key computed on the new event); when every
   probe finds a live heap, ``extend`` makes one new node adopting those heaps;
2. *UpdateIndices*: each new node that some transition consumes is inserted into the heap
   ``H[p][key]`` (key computed on the event as the adopted run's last event) with
   ``union`` — a fully persistent, path-copying Braun-heap insert, so nodes that adopted
   the old heap keep seeing exactly the runs that existed before;
3. the new nodes of final states are enumerated: every run under them whose start is in
   the window, pruning sub-heaps by max-start. Each visited heap node yields at least one
   run, so the delay is linear in the size of each match.

A transition whose edge to a source carries a comparison (``compiler.comparisons``) keeps
that source's runs in an ordered index instead (``engine.ordered``: per join key, a search
tree on the compared value, balanced whatever the order the values arrive in); the probe
returns the O(log w) subtrees and payloads holding exactly the runs in range, adopted
together as a ``Bundle``.

All transitions fire before any index changes, so an event never joins a run it created
itself. ``H`` is keyed by (state, key): each state has one consuming transition. Entries
whose heap left the window are forgotten through a FIFO of updates, so memory follows the
window rather than the log. Update cost: O(|P|) probes and extends plus one heap insert of
depth O(log(runs of that key in the window)) per new run — independent of the number of
partial matches. Without a window nothing expires and the heaps grow with the partial
matches per key (still logarithmic depth).
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from cer_cli.compiler.pcea import PCEA, pcea_cost
from cer_cli.compiler.predicates import (
    AttrTest,
    atom_expression,
    comparison_pair,
    key_expressions,
    predicate_expression,
    value_expression,
)
from cer_cli.engine import jit
from cer_cli.engine import pcea_kernel as _K
from cer_cli.engine.executor import EngineStats, prepare_frame, window_bound, window_text
from cer_cli.engine.ordered import Bundle, TNode, insert, pieces
from cer_cli.engine.strategies import report
from cer_cli.events import (
    POS,
    STREAM,
    TYPE,
    Match,
    MatchBatch,
    as_batches,
    as_matches,
)
from cer_cli.query import ast
from cer_cli.query.errors import QueryError
from cer_cli.query.printer import groups_text
from cer_cli.query.scope import strip_var

#: ``_count_dag`` counts in int64 up to 2^62 (``pcea_kernel.COUNT_MAX``)
DAG_COUNT_BITS = 62
NO_LOWER = -math.inf
_KEY = "__cer_hj_key"
#: key dtypes that are their own canonical id in the array kernel (``_kernel_inputs``)
_OWN_ID = (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32)
#: window-time dtypes the array kernel runs (``_window_times``): integers exact in int64
_KERNEL_TIMES = _OWN_ID + (pl.Null,)
#: how far a window time may lie above the run's first one in the array kernel (int64 room
#: for ``time - bound``; ``engine.pcea_state.NEG`` stays below every time)
_TIME_SPAN = 1 << 62
_WTIME = "__cer_hj_time"
_ACT = "__cer_hj_act"


# --------------------------------------------------------------------------- DS_w


class Node:
    """A DS_w node. Payload: ``state``, ``pos`` (global position), ``time`` (window time:
    local position for EVENTS windows, None when the event has none), ``prod`` (adopted
    heaps) and ``ms`` (max-start); union-heap links ``left``/``right`` and the direction
    bit ``bit`` (which side the next insert goes down). Never mutated once reachable."""

    __slots__ = ("ms", "pos", "state", "time", "prod", "left", "right", "bit")

    def __init__(self, ms, pos, state, time, prod=(), left=None, right=None, bit=0):
        self.ms = ms
        self.pos = pos
        self.state = state
        self.time = time
        self.prod = prod
        self.left = left
        self.right = right
        self.bit = bit

    def __repr__(self) -> str:
        return f"Node(state={self.state}, pos={self.pos}, ms={self.ms})"


@dataclass
class Ops:
    """Work counters (not time): what the complexity bounds are about."""

    extends: int = 0
    unions: int = 0
    union_nodes: int = 0  # heap nodes copied or created by unions
    max_union_nodes: int = 0  # the most any single union touched
    probes: int = 0
    tree_inserts: int = 0  # runs inserted into ordered indexes
    tree_nodes: int = 0  # ordered-index nodes made by them (path copies, splits, deletions)

    def new_heap(self) -> None:
        """A union that starts a heap: one node, the new run's."""
        self.unions += 1
        self.union_nodes += 1
        if not self.max_union_nodes:
            self.max_union_nodes = 1


def extend(state: int, pos: int, time, start_time, prod: tuple) -> Node:
    """A fresh node for the runs ending at ``pos`` in ``state`` that adopt one run from
    each heap of ``prod``: its max-start is the smallest of the children's (the heap order
    makes each child's ``ms`` its own maximum) and of ``start_time`` (the event's own)."""
    ms = start_time
    for h in prod:
        if h.ms < ms:
            ms = h.ms
    return Node(ms, pos, state, time, prod)


def union(h: Node | None, x: Node, lo, ops: Ops | None = None) -> Node:
    """A new heap with the runs of ``h`` and of the fresh node ``x``; ``h`` is unchanged.

    ``lo``: runs starting before it are dead for good (window times never decrease), so a
    dead heap — or a dead sub-heap met on the way down — is replaced, not kept. Order:
    ``(ms, pos)``, largest on top; the smaller payload sinks along the direction bits, each
    node on the path is copied with its bit flipped (Braun-style balance)."""
    if h is None or h.ms < lo:
        if ops is not None:
            ops.new_heap()
        return x
    carry, cur = x, h
    root = parent = None
    left_side = False
    steps = 0
    while True:
        steps += 1
        if cur is None or cur.ms < lo:
            node = Node(carry.ms, carry.pos, carry.state, carry.time, carry.prod)
        else:
            if carry.ms > cur.ms or (carry.ms == cur.ms and carry.pos > cur.pos):
                top, carry = carry, cur
            else:
                top = cur
            node = Node(top.ms, top.pos, top.state, top.time, top.prod, cur.left, cur.right,
                        1 - cur.bit)
        if parent is None:
            root = node
        elif left_side:
            parent.left = node  # ``parent`` was created by this call: not yet shared
        else:
            parent.right = node
        if cur is None or cur.ms < lo:
            break
        parent = node
        left_side = cur.bit == 0
        cur = cur.left if left_side else cur.right
    if ops is not None:
        ops.unions += 1
        ops.union_nodes += steps
        if steps > ops.max_union_nodes:
            ops.max_union_nodes = steps
    return root


def heap_nodes(h: Node | None) -> Iterator[Node]:
    """Every node of a union-heap (not entering ``prod``), for tests and statistics."""
    stack = [h] if h is not None else []
    while stack:
        m = stack.pop()
        yield m
        if m.left is not None:
            stack.append(m.left)
        if m.right is not None:
            stack.append(m.right)


def depth(h: Node | None) -> int:
    """Height of a union-heap (0 for the empty heap)."""
    if h is None:
        return 0
    best, stack = 0, [(h, 1)]
    while stack:
        m, d = stack.pop()
        best = max(best, d)
        for c in (m.left, m.right):
            if c is not None:
                stack.append((c, d + 1))
    return best


def runs(h: Node, lo) -> Iterator[tuple[Node, ...]]:
    """Every run represented by the heap ``h`` whose max-start is at least ``lo``, as a
    tuple of payload nodes (adopted runs before their adopter). Sub-heaps with ``ms < lo``
    are skipped: heap order makes them wholly dead. Every visited node yields a run,
    because an adopted heap's ``ms`` is at least its adopter's."""
    stack = [h]
    pop, push = stack.pop, stack.append
    while stack:
        m = pop()
        c = m.left
        if c is not None and c.ms >= lo:
            push(c)
        c = m.right
        if c is not None and c.ms >= lo:
            push(c)
        prod = m.prod
        if not prod:
            yield (m,)
        elif len(prod) == 1:
            for sub in adopted(prod[0], lo):
                yield sub + (m,)
        else:
            for sub in _product(prod, 0, lo):
                yield sub + (m,)


def adopted(h, lo) -> Iterator[tuple[Node, ...]]:
    """The runs of one adopted heap or ordered-index subtree, or of every live piece of a
    ``Bundle``."""
    if type(h) is Bundle:
        for piece in h.pieces:
            if piece.ms >= lo:
                if type(piece) is TNode:
                    yield from tree_runs(piece, lo)
                else:
                    yield from runs(piece, lo)
    elif type(h) is TNode:
        yield from tree_runs(h, lo)
    else:
        yield from runs(h, lo)


def tree_runs(t: TNode, lo) -> Iterator[tuple[Node, ...]]:
    """The runs of an ordered-index subtree whose max-start is at least ``lo``. Subtrees
    with ``ms < lo`` are skipped; a visited node whose own run expired is only a way to a
    live one below it (the tree is ordered by value, not by start)."""
    stack = [t]
    pop, push = stack.pop, stack.append
    while stack:
        m = pop()
        c = m.left
        if c is not None and c.ms >= lo:
            push(c)
        c = m.right
        if c is not None and c.ms >= lo:
            push(c)
        x = m.node
        if x.ms >= lo:
            yield from runs(x, lo)


def count_runs(h, lo, memo: dict) -> int:
    """``len(list(adopted(h, lo)))``, counted over the DAG: a heap node's runs are the
    product of its adopted sets' counts, and a set adopted by several nodes is counted once
    per ``memo`` (one event: one ``lo``; keyed by identity, the objects outlive it). So
    ``--count`` does not pay per match, as the CEA's count does not."""
    got = memo.get(id(h))
    if got is not None:
        return got
    n = 0
    if type(h) is Bundle:
        for piece in h.pieces:
            if piece.ms >= lo:
                n += count_runs(piece, lo, memo)
    elif type(h) is TNode:  # as ``tree_runs``
        for m in _live(h, lo):
            if m.node.ms >= lo:
                n += count_runs(m.node, lo, memo)
    else:  # as ``runs``
        for m in _live(h, lo):
            k = 1
            for sub in m.prod:
                k *= count_runs(sub, lo, memo)
                if not k:
                    break
            n += k
    memo[id(h)] = n
    return n


def _live(h, lo) -> Iterator:
    """The nodes of the heap or ordered-index subtree ``h`` whose subtree's max-start is at
    least ``lo`` (the walk of ``runs`` and ``tree_runs``, which inline it: they are the
    enumeration's hot loop; counting visits each shared set once per event)."""
    stack = [h]
    while stack:
        m = stack.pop()
        c = m.left
        if c is not None and c.ms >= lo:
            stack.append(c)
        c = m.right
        if c is not None and c.ms >= lo:
            stack.append(c)
        yield m


def _in_range(h, rel: str, v, lo):
    """The runs of the ordered index ``h`` whose key is ``rel v`` (``engine.ordered.pieces``:
    O(log w) subtrees and payloads), adopted together as one ``Bundle``; None if none."""
    found = pieces(h, rel, v, lo)
    if not found:
        return None
    return found[0] if len(found) == 1 else Bundle(max(x.ms for x in found), found)


def _probe(srcs: tuple, rels: tuple, right: list, probe: list, r: int, lo, index: list[dict]
           ) -> tuple | None:
    """The heaps (or ordered-index ranges) of the live runs a transition adopts from each
    source ``srcs`` for event ``r``, or None when one source has none."""
    kids = []
    for j, p in enumerate(srcs):
        h = index[p].get(right[j][r])
        if h is None or h.ms < lo:
            return None
        if rels[j] is not None:  # the ordered index: the runs whose key is in range
            v = probe[j][r]
            h = None if v is None else _in_range(h, rels[j], v, lo)
            if h is None:
                return None
        kids.append(h)
    return tuple(kids)


def _adopt_each(sub: dict, rel, v, q: int, pos: int, t, ft, lo, new: list, carried: list) -> None:
    """A chain step over a nested index ``sub`` (carried values -> heap): one new node per
    live carried value, adopting its runs (with ``rel``, those in range of ``v``)."""
    for ck, h in sub.items():
        if h.ms >= lo:
            if rel is not None:
                h = _in_range(h, rel, v, lo)
                if h is None:
                    continue
            new.append(extend(q, pos, t, ft, (h,)))
            carried.append(ck)


#: How ``_update`` finds a run's key in an index slot: the event's key column, a key built
#: per run (carried values), or that key nested under the probe key
_KEY_COLUMN, _KEY_PER_RUN, _KEY_NESTED = 0, 1, 2


def _product(prod: tuple, k: int, lo) -> Iterator[tuple[Node, ...]]:
    if k == len(prod) - 1:
        yield from adopted(prod[k], lo)
        return
    for a in adopted(prod[k], lo):
        for b in _product(prod, k + 1, lo):
            yield a + b


# --------------------------------------------------------------------------- the engine

def _key_builder(own: tuple, car: tuple):
    """``(row, carried values) -> (probe key, carried key)`` of a run in a state with carried
    keys: each class from the run's carried values (``(slot, None)``) or from the event's
    column (``(None, column)``). The one-class cases are the common ones: spelled out."""
    if len(own) == 1 and not car:
        (i, col), = own
        if col is None:
            return lambda r, ck: (ck[i], ())
        return lambda r, ck: (col[r], ())
    if not own and len(car) == 1 and car[0][1] is not None:
        col = car[0][1]
        return lambda r, ck: ((), (col[r],))

    def build(r: int, ck: tuple):
        vals = tuple(ck[i] if col is None else col[r] for i, col in own)
        return (vals[0] if len(vals) == 1 else vals,
                tuple(ck[i] if col is None else col[r] for i, col in car))

    return build



@dataclass
class _Partition:
    """Algorithm-1 state of one PARTITION BY sub-stream: ``index[p]`` is ``H[p]`` (key ->
    heap of the runs ending in ``p``, as ``p``'s parent probes it), ``index[n + p]`` the
    loop index of an iterated state (keyed by all its classes), ``count`` its events so far
    (EVENTS windows)."""

    key: tuple | None
    index: list[dict]
    count: int = 0
    fifo: deque = field(default_factory=deque)


class HashJoinEngine:
    """Evaluate a PCEA over event frames: an ``engine.executor.Executor`` like
    ``engine.run.Engine``, for strategy ALL/ANY without CONSUME BY.

    Frames are consecutive batches: the state persists, so feeding them one by one equals
    feeding their concatenation."""

    def __init__(
        self,
        pcea: PCEA,
        window: ast.Window | None = None,
        partition_by: tuple[tuple[str, ...], ...] = (),
        limit: int | None = None,
        streams: tuple[str, ...] | None = None,
        strategy: str = "ALL",
        kernel: bool | None = None,
    ) -> None:
        self.pcea = pcea
        self.window = window
        self.partition_by = partition_by
        self.limit = limit
        self.streams = streams
        self.strategy = strategy
        self._bound = window_bound(window)
        self._by_events = isinstance(window, ast.EventsWindow)
        self._timed = isinstance(window, ast.DurationWindow | ast.AttributeWindow)
        n = len(pcea.states)
        self._sources = [t.sources for t in pcea.transitions]
        #: per transition, per source: the comparison's relation (None: hash bucket only)
        self._rels = [tuple(None if t.compare(j) is None else t.compare(j).rel
                            for j in range(len(t.sources))) for t in pcea.transitions]
        #: states whose runs wait in an ordered index (their consumer compares)
        self._ordered = [False] * n
        for t in pcea.transitions:
            for j, p in enumerate(t.sources):
                if t.compare(j) is not None:
                    self._ordered[p] = True
        self._final = [q in pcea.finals for q in range(n)]
        sel = pcea.select
        self._labels = [
            tuple(sorted(s.step.labels if sel is None else s.step.labels & sel))
            for s in pcea.states
        ]
        self._sort = [s.family in pcea.tree_families for s in pcea.states]
        # Carried keys (``State.carried``): a transition into q with ``carry[q]`` adopts the
        # runs of every live carried value of its source, whose index is then nested:
        # ``H[p][probe key][carried values] -> heap`` (``nest[p]``). States whose runs carry
        # a value, or index under a nested key, build their key per run (``generic[p]``).
        self._carry = [bool(t.carried) for t in pcea.transitions]
        self._nest = [False] * n
        for t in pcea.transitions:
            if t.carried:
                for p in t.sources:
                    self._nest[p] = True
        self._generic = [bool(s.carried) or self._nest[q] for q, s in enumerate(pcea.states)]
        # Iterated steps ``(E AS y)+``: a loop transition adopts the run of the previous
        # iteration, probing a second index (slot ``n + q``) keyed by all of q's classes.
        self._loops = [s.step.loop for s in pcea.states]
        #: per iterated state, the relation of its register (None: the loop adopts on keys)
        self._lrels = [None if pcea.register(q) is None else pcea.register(q).rel
                       for q in range(n)]
        self._nest += [bool(s.carried) for s in pcea.states]
        self._generic += [bool(s.carried) for s in pcea.states]
        self._slots = [((q,) if q not in pcea.finals else ()) + ((n + q,) if s.step.loop else ())
                       for q, s in enumerate(pcea.states)]
        self._key_mode = [_KEY_COLUMN if not g else _KEY_NESTED if nested else _KEY_PER_RUN
                          for g, nested in zip(self._generic, self._nest, strict=True)]
        self._parts: dict[tuple | None, _Partition] = {}
        self._fifo: deque = deque()  # time windows: one FIFO for all partitions
        self._ftime = NO_LOWER  # latest window time seen (an upper bound for later nulls)
        self._last_time = None  # the last timed event (executor.Earlier)
        self._active: dict[int, tuple[int, ...]] = {}
        self._events = 0
        self._matches = 0
        self._entries = 0
        self._peak = 0
        self._ops = Ops()
        #: what ``_fire`` and ``_update`` read per event, in one attribute each
        self._fire_with = (self._sources, self._carry, self._rels, self._loops, self._active,
                           self._ops)
        self._update_with = (self._final, self._slots, self._key_mode, self._ops)
        # The array kernel (``engine.pcea_state.JoinState``, numba-compiled for large logs)
        # runs the shapes it supports; the others (windows over float times, compared values
        # that are not numbers, and ``count`` of an iterated step whose runs may pass int64
        # or that would run uncompiled: ``_objects_count``) keep these Python objects.
        # ``kernel``: None follows ``CER_HJ_KERNEL`` (``0``: never), False never, True when
        # the shape allows. Decided here and on the first frame, said by ``describe``.
        from cer_cli.engine.pcea_state import unsupported

        if kernel is None:
            kernel = os.environ.get("CER_HJ_KERNEL", "1") != "0"
        self._kernel_why = (unsupported(pcea) if kernel
                            else "the array kernel was turned off (CER_HJ_KERNEL=0)")
        self._state = None  # the JoinState, made on the first frame
        self._input_exprs = None  # (schema, step masks, compared columns): _kernel_inputs
        self._key_ids: dict[int, dict | None] = {}  # per class: value -> id (None: own id)
        self._next_id = 0  # the next id a dictionary gives (ids are never reused)
        self._pruned_at = 0  # the kernel's compactions when the dictionaries were last pruned
        self._pids: dict = {}  # partition key -> id
        self._pcount = np.zeros(0, np.int64)  # events per partition id so far
        self._time0: int | None = None  # the run's first window time (``_window_times``)

    # ------------------------------------------------------------------ description

    def describe(self) -> str:
        w = self.window
        window = window_text(w, "runs")
        parts = (
            "one index per PARTITION BY key " + groups_text(self.partition_by)
            if self.partition_by else "a single index"
        )
        return "\n".join([
            "engine: PCEA Algorithm 1 (hash join): hash index by (state, join key),"
            " persistent max-start heaps (ordered indexes: treaps), windowed enumeration",
            f"  {self.kernel_text()}",
            f"  {pcea_cost(self.pcea, w, short=True)}",
            f"  {window}; {parts}",
            f"  strategy {self.strategy}: every match; limit "
            + (f"{self.limit} per triggering event, latest start first" if self.limit is not None
               else "none"),
        ])

    @property
    def ops(self) -> Ops:
        """The work counters, of whichever implementation runs the join."""
        if self._state is None:
            return self._ops
        c = self._state.st
        return Ops(int(c[_K.C_EXTENDS]), int(c[_K.C_UNIONS]), int(c[_K.C_UNION_NODES]),
                   int(c[_K.C_MAX_UNION]), int(c[_K.C_PROBES]), int(c[_K.C_TREE_INSERTS]),
                   int(c[_K.C_TREE_NODES]))

    def kernel_text(self) -> str:
        """Which implementation runs the join: the array kernel or Python objects, and why."""
        if self._kernel_why is not None:
            return f"runs as Python objects: {self._kernel_why}"
        if self._state is not None and self._state.compiled:
            return "runs on the array kernel (numba-compiled)"
        return ("runs on the array kernel (flat arrays; numba-compiled for large logs;"
                " Python objects if the log's compared values are not numbers within 2^53)")

    @property
    def stats(self) -> EngineStats:
        """``live_nodes`` / ``peak_live_nodes``: index entries (one heap per state and key)
        now / at most; ``allocated_nodes``: DS_w nodes made (extends, union path copies
        and ordered-index nodes). There is no tECS compaction and no determinisation: those counters are 0
        (``ops`` counts the hash join's own work)."""
        if self._state is not None:
            c = self._state.counters()
            live = self._state.live_entries()
            self._peak = max(self._peak, live)
            return EngineStats(c["events"], self._matches, len(self._pids) or 1, live,
                               c["extends"] + c["union_nodes"] + c["tree_nodes"],
                               c["compactions"], self._peak, 0, 0, 0, 0)
        return EngineStats(
            self._events, self._matches, len(self._parts), self._entries,
            self.ops.extends + self.ops.union_nodes + self.ops.tree_nodes, 0,
            max(self._peak, self._entries), 0, 0, 0, 0,
        )

    # ------------------------------------------------------------------ column-wise work

    def _prepare(self, frame: pl.DataFrame) -> pl.DataFrame:
        """FROM, partition keys and the window time, as ``Engine`` prepares them."""
        frame, self._last_time = prepare_frame(
            frame, self.streams, self.partition_by, self.window, self._last_time, _KEY, _WTIME
        )
        return frame

    def _step_mask(self, s: int, schema) -> pl.Expr:
        """The unary predicate U of state ``s``: type, stream, filters, and its equality
        classes: every attribute of a class has a value, equal to the class's other
        attributes of the same event — ``attrs[0] = a`` as any predicate means it (an absent,
        null or NaN attribute fails it, ``attrs[0] = attrs[0]`` included)."""
        step = self.pcea.states[s].step
        expr = pl.col(TYPE) == step.name
        if step.stream is not None:
            expr = expr & (pl.col(STREAM) == step.stream)
        for p in step.filters:
            if isinstance(p, ast.BoolConst):
                expr = expr & pl.lit(p.value)
            else:
                expr = expr & atom_expression(AttrTest(strip_var(p)), schema)
        for _, attrs in self.pcea.states[s].classes:
            first = ast.AttrRef("", attrs[0])
            for a in attrs:
                expr = expr & predicate_expression(ast.Compare("=", first, ast.AttrRef("", a)),
                                                   schema)
        return expr.fill_null(False)

    def _act_expression(self, schema) -> pl.Expr:
        """Per event, the bit mask of the states it may take (Int64)."""
        masks = [
            pl.when(self._step_mask(s, schema)).then(pl.lit(1 << s, pl.Int64)).otherwise(pl.lit(0, pl.Int64))
            for s in range(len(self.pcea.states))
        ]
        return pl.sum_horizontal(masks).alias(_ACT)

    def _act(self, frame: pl.DataFrame) -> pl.Series:
        """Per event, the bit mask of the states it may take (Int64)."""
        # with_columns, not select: when no attribute a step reads is in the frame every
        # mask is a literal, and only with_columns broadcasts it to one value per row
        return frame.with_columns(self._act_expression(frame.schema))[_ACT]

    def _key_values(self, frame: pl.DataFrame) -> dict[tuple[int, int], pl.Series | None]:
        """Per (state, class): the class's key on each event as that state (None: never
        computed). Each class's key as predicates' ``=`` relates it (``key_expressions``):
        Python's == and hash on the listed values then agree with ``=``; an event taking a
        state holds equal values for the state's attributes of a class (``_step_mask``), so
        the first one is the key."""
        pcea, schema = self.pcea, frame.schema
        in_class: dict[int, dict[str, None]] = {}
        for state in pcea.states:
            for cls, attrs in state.classes:
                in_class.setdefault(cls, {}).update(dict.fromkeys(attrs))
        keyed = {cls: dict(zip(attrs, key_expressions(list(attrs), schema), strict=True))
                 for cls, attrs in in_class.items()}
        exprs = {(s, cls): keyed[cls][attrs[0]] for s, state in enumerate(pcea.states)
                 for cls, attrs in state.classes}
        got = frame.select(e.alias(f"k{i}") for i, e in enumerate(exprs.values()) if e is not None)
        return {sc: None if e is None else got[f"k{i}"] for i, (sc, e) in enumerate(exprs.items())}

    def _columns(self, frame: pl.DataFrame):
        """Per-row inputs of the loop: the bit mask of the states an event may take and
        the join keys (left on the adopted event, right on the adopting one)."""
        pcea, schema, n = self.pcea, frame.schema, frame.height
        act = self._act(frame).to_list()
        values: dict[tuple[int, int], list] = {
            sc: [None] * n if col is None else col.to_list()
            for sc, col in self._key_values(frame).items()}
        const = [()] * n

        def keys(s: int, classes: tuple[int, ...]) -> list:
            if not classes:
                return const
            if len(classes) == 1:
                return values[s, classes[0]]
            return list(zip(*(values[s, c] for c in classes), strict=True))

        right, left = [], [None] * len(pcea.states)
        probe, order = [], [None] * len(pcea.states)
        for q, t in enumerate(pcea.transitions):
            right.append([keys(q, k) for k in t.keys])
            for j, (p, k) in enumerate(zip(t.sources, t.keys, strict=True)):
                if not self._generic[p]:
                    left[p] = keys(p, k)
                    continue
                # per run: each class from the event's column or from the carried values
                slot = {c: i for i, (c, _) in enumerate(pcea.states[p].carried)}
                own = tuple((slot[c], None) if c in slot else (None, values[p, c]) for c in k)
                car = tuple((slot[c], None) if c in slot else (None, values[p, c])
                            for c in (t.carried[j] if t.carried else ()))
                left[p] = _key_builder(own, car)
        left += [None] * len(pcea.states)
        rloop = [None] * len(pcea.states)
        for q, state in enumerate(pcea.states):
            if not state.step.loop:
                continue
            own = tuple(c for c, _ in state.classes)
            rloop[q] = keys(q, own)
            if state.carried:
                left[len(pcea.states) + q] = _key_builder(
                    tuple((None, values[q, c]) for c in own),
                    tuple((i, None) for i in range(len(state.carried))))
            else:
                left[len(pcea.states) + q] = rloop[q]
        for q, t in enumerate(pcea.transitions):
            probe.append([None] * len(t.sources))
            for j, p in enumerate(t.sources):
                c = t.compare(j)
                if c is None:
                    continue
                pair = comparison_pair(value_expression(c.key, schema),
                                       value_expression(c.probe, schema))
                if pair is None:
                    probe[q][j] = order[p] = [None] * n  # never computed, or never comparable
                    continue
                got = frame.select(pair[0].alias("k"), pair[1].alias("p"))
                order[p], probe[q][j] = got["k"].to_list(), got["p"].to_list()
        # registers: the loop's key on the event as the previous iteration, probe as the new
        self._lorder, self._lprobe = [None] * len(pcea.states), [None] * len(pcea.states)
        for q, c in pcea.registers:
            pair = comparison_pair(value_expression(c.key, schema),
                                   value_expression(c.probe, schema))
            if pair is None:
                self._lorder[q] = self._lprobe[q] = [None] * n
                continue
            got = frame.select(pair[0].alias("k"), pair[1].alias("p"))
            self._lorder[q], self._lprobe[q] = got["k"].to_list(), got["p"].to_list()
        #: what ``_fire_loop`` reads per event, in one attribute
        self._loop_with = (len(pcea.states), rloop, self._lrels, self._lprobe, self._nest,
                           self._ops)
        # per index slot, the compared values of an ordered index (None: a heap)
        n = len(pcea.states)
        tree_of = [order[s] if self._ordered[s] else None for s in range(n)] + [
            self._lorder[q] if self._lrels[q] is not None else None for q in range(n)]
        return act, right, left, probe, tree_of

    # ------------------------------------------------------------------ the loop

    def run(self, frame: pl.DataFrame) -> Iterator[Match]:
        """Matches of the events of ``frame`` (continuing from earlier frames), in order of
        their triggering event."""
        yield from as_matches(self.run_batches(frame))

    def run_batches(self, frame: pl.DataFrame, size: int = 10_000) -> Iterator[MatchBatch]:
        """``run`` in columns, about ``size`` matches per batch. When candidates may repeat a
        match (``PCEA.dedupe``) or LIMIT keeps some, each event's candidates stay in one
        batch and ``strategies.report`` decides, as for the CEA executor."""
        frame = self._prepare(frame)
        if self._on_kernel(frame):
            yield from self._kernel_batches(frame, emit=True)
            return
        groups = self._candidates(frame)
        if self._streams:  # nothing to decide per event
            batches = as_batches((m for group in groups for m in group), size)
        else:
            batches = (report(b, self.strategy, self.limit, self.pcea.dedupe is not None)
                       for b in as_batches(groups, size, whole=True))
        for batch in batches:
            self._matches += len(batch)
            if len(batch):
                yield batch

    def count(self, frame: pl.DataFrame) -> int:
        """How many matches ``run(frame)`` yields (without building them when nothing is
        decided per event)."""
        if not self._streams:
            return sum(len(b) for b in self.run_batches(frame))
        frame = self._prepare(frame)
        loops = not self._timed and any(self._loops)
        if loops and self._state is None and self._kernel_why is None:
            self._kernel_why = self._objects_count(frame.height)
        if self._on_kernel(frame):
            state = self._state
            # an iterated step's runs may be exponentially many (every rising subsequence
            # of the window): counted over the DAG, as these objects count them. Other
            # runs are counted one by one, which measures 5-15% faster on the comparison
            # chain (flat lists counted whole); so is a time window's (each run's start
            # is checked)
            state.st[_K.DAG_COUNT] = int(loops)
            before, big = int(state.st[_K.MATCHES]), state.big_matches
            for _ in self._kernel_batches(frame, emit=False):
                pass
            n = int(state.st[_K.MATCHES]) - before + state.big_matches - big
            self._matches += n
            return n
        if not self._timed:  # every run is a match: count them without building them
            n = sum(self._candidates(frame, self._count_finals))
        else:
            n = sum(1 for group in self._candidates(frame) for _ in group)
        self._matches += n
        return n

    def _objects_count(self, events: int) -> str | None:
        """Why these objects count an iterated step's runs (``events``: the first slice's),
        or None: the kernel counts them over the DAG as fast or faster, and exactly."""
        if not self._counts_fit():
            return ("counting the runs of an iterated step (E AS y)+ without an EVENTS window"
                    f" of at most {self._fit_events()} events: more than 2^62 per event need"
                    " Python integers")
        if os.environ.get("CER_HJ_KERNEL") != "1" and not jit.compiled_from_start(events):
            return ("counting the runs of an iterated step (E AS y)+ in a log of fewer than"
                    f" {jit.JIT_MIN_EVENTS:,} events: uncompiled, the kernel counts them"
                    " several times slower than these objects (CER_HJ_KERNEL=1 makes it)")
        return None

    def _fit_events(self) -> int:
        """The widest EVENTS window whose runs per event provably fit the kernel's int64
        count: a run ending at an event takes each of the window's ``w + 1`` positions in
        at most one of the ``S`` states, so there are at most ``(S + 1)^(w + 1)`` of them."""
        return int(DAG_COUNT_BITS / math.log2(len(self.pcea.states) + 1)) - 1

    def _counts_fit(self) -> bool:
        """Whether the kernel's int64 count over the DAG never passes 2^62 per event (see
        ``_fit_events``). Otherwise such events would be counted again in Python integers
        by the kernel's plain code, ~10x slower than these objects' count."""
        return self._by_events and self._bound is not None \
            and self._bound <= self._fit_events()

    @property
    def _streams(self) -> bool:
        """Every candidate is a match: no repeat to drop, no LIMIT."""
        return self.pcea.dedupe is None and self.limit is None

    def _candidates(self, frame: pl.DataFrame, emit=None) -> Iterator:
        """Per event of ``frame`` (``_prepare``d) that completes runs, its candidate matches
        (``_loop``; ``emit``: what to yield instead, from the same arguments as ``_emit``)."""
        if frame.height == 0:
            return iter(())
        act, right, left, probe, tree_of = self._columns(frame)
        positions = frame[POS].to_list()
        times = frame[_WTIME].to_list() if self._timed else None
        keys = frame.select([f"{_KEY}{i}" for i in range(len(self.partition_by))]).rows() \
            if self.partition_by else None
        return self._loop(act, right, left, probe, tree_of, positions, times, keys,
                          emit or self._emit)

    def finish(self) -> Iterator[MatchBatch]:
        """Nothing: every match is reported at the event that ends it."""
        return iter(())

    # ------------------------------------------------------------------ the array kernel

    def _on_kernel(self, frame: pl.DataFrame) -> bool:
        """Whether ``frame`` (prepared) runs on the array kernel: decided on the first
        frame with events (the compared values' types), then kept for the whole run."""
        if self._kernel_why is not None or frame.height == 0:
            return self._state is not None
        if self._state is None:
            if self._events:  # pragma: no cover - the Python objects already hold runs
                return False
            from cer_cli.engine.pcea_state import JoinState, Tables, compared_values

            probe = Tables(self.pcea, self._labels)
            why = compared_values(self.pcea, probe, frame, frame.schema, first=True)
            if isinstance(why, str):
                self._kernel_why = why
                return False
            if self._timed and frame[_WTIME].dtype not in _KERNEL_TIMES:
                self._kernel_why = f"a window over {frame[_WTIME].dtype} times (not integers)"
                return False
            self._state = JoinState(self.pcea, self._labels, self._bound, timed=self._timed)
        return True

    def _kernel_inputs(self, frame: pl.DataFrame):
        """The per-event columns ``JoinState.feed`` reads (see ``engine.pcea_state``)."""
        from cer_cli.engine.pcea_state import compared_columns, compared_values

        state, n = self._state, frame.height
        # the step masks and the compared values in one pass over the frame, their
        # expressions built once per schema (every frame of a run has the same)
        schema = frame.schema
        key = tuple(schema.items())
        if self._input_exprs is None or self._input_exprs[0] != key:
            cmp = compared_columns(self.pcea, state.tables, schema)
            if isinstance(cmp, str):  # pragma: no cover - the first frame decided on its types
                raise TypeError(f"the compiled hash join cannot compare {cmp}")
            self._input_exprs = key, self._act_expression(schema), cmp
        _, act_expr, cmp = self._input_exprs
        # with_columns: it broadcasts a mask that is a literal (no attribute in the frame)
        got = frame.with_columns(act_expr, *(c[1] for c in cmp))
        act = got[_ACT].to_numpy().astype(np.int64)
        pos = got[POS].cast(pl.Int64).to_numpy()
        values = self._key_values(frame)
        CV = np.zeros((max(1, len(state.tables.cv)), n), np.int64)
        by_class: dict[int, list[int]] = {}
        for c, (_, cls) in enumerate(state.tables.cv):
            by_class.setdefault(cls, []).append(c)
        for cls, cols in by_class.items():
            # A class whose keys are integers of at most 64 bits is its own id; others get
            # ids from a dictionary of the values seen, pruned to the ids the index still
            # holds after each compaction (``_prune_ids``), so it follows the window. Decided
            # on the first frame, kept for the run: the two kinds of id must not meet in one
            # class.
            keys = [values[state.tables.cv[c]] for c in cols]
            exact = all(k is None or k.dtype in _OWN_ID for k in keys)
            if (self._key_ids.setdefault(cls, None if exact else {}) is None) != exact:
                raise QueryError("the values an equality joins changed type between slices of"
                                 " the log", hints=["run with CER_HJ_KERNEL=0"])
            for c, k in zip(cols, keys, strict=True):
                if k is None:
                    continue
                if exact:
                    CV[c] = k.fill_null(0).cast(pl.Int64).to_numpy()
                else:
                    CV[c] = self._dictionary_ids(self._key_ids[cls], k.to_list())
        CMPV = compared_values(self.pcea, state.tables, frame, schema, columns=cmp, got=got)
        if self.partition_by:
            keys = frame.select([f"{_KEY}{i}" for i in range(len(self.partition_by))]).rows()
            part = np.fromiter((self._pids.setdefault(k, len(self._pids)) for k in keys),
                               np.int64, n)
        else:
            part = np.zeros(n, np.int64)
            self._pids.setdefault(None, 0)
        groups = len(self._pids)
        if len(self._pcount) < groups:
            self._pcount = np.concatenate([self._pcount,
                                           np.zeros(groups - len(self._pcount), np.int64)])
        # each event's index in its partition's stream (the window time of EVENTS windows)
        if self._timed:
            return act, pos, part, *self._window_times(frame), CV, CMPV
        if not self.partition_by:  # one stream: the events in turn (no sort of the frame)
            loc = np.arange(self._pcount[0], self._pcount[0] + n, dtype=np.int64)
            self._pcount[0] += n
            return act, pos, part, loc, None, CV, CMPV
        order = np.argsort(part, kind="stable")
        sp = part[order]
        starts = np.flatnonzero(np.r_[True, sp[1:] != sp[:-1]]) if n else np.zeros(0, np.int64)
        rank = np.arange(n, dtype=np.int64) - np.repeat(starts, np.diff(np.r_[starts, n]))
        loc = np.empty(n, dtype=np.int64)
        loc[order] = rank + self._pcount[sp]
        self._pcount += np.bincount(part, minlength=groups)
        return act, pos, part, loc, None, CV, CMPV

    def _window_times(self, frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """A time or attribute window's times for the kernel, and which events have one:
        int64, as offsets from the run's first time (``_time0``) so that ``time - bound``
        never overflows whatever the values. The log is ordered by them (``_prepare``), so
        no offset is negative; one of 2^62 or more is refused rather than wrapped."""
        col = frame[_WTIME]
        if col.dtype not in _KERNEL_TIMES:
            raise QueryError(f"the window's times changed type between slices of the log, to"
                             f" {col.dtype}", hints=["run with CER_HJ_KERNEL=0"])
        has = col.is_not_null()
        times = col.drop_nulls()
        if times.len() and self._time0 is None:
            self._time0 = int(times[0])
        if times.len() and int(times[-1]) - self._time0 >= _TIME_SPAN:
            raise QueryError(
                f"the window's times span {int(times[-1]) - self._time0} units, more than"
                f" the compiled hash join holds (2^62)", hints=["run with CER_HJ_KERNEL=0"])
        base = self._time0 or 0
        tt = (col.cast(pl.Int64) - base).fill_null(0).to_numpy().astype(np.int64, copy=False)
        return tt, has.to_numpy().astype(np.int64)

    def _kernel_batches(self, frame: pl.DataFrame, emit: bool) -> Iterator[MatchBatch]:
        """The matches of ``frame`` (prepared) from the array kernel, through
        ``strategies.report`` when something is decided per event (each event's candidates
        then come in one batch)."""
        if frame.height == 0:
            return
        act, pos, part, tt, hast, CV, CMPV = self._kernel_inputs(frame)
        partitions = {i: k for k, i in self._pids.items()}
        decide = not self._streams
        for batch in self._state.feed(act, pos, part, tt, CV, CMPV, emit, decide, partitions,
                                      hast):
            if decide:
                batch = report(batch, self.strategy, self.limit, self.pcea.dedupe is not None)
            self._matches += len(batch)
            if len(batch):
                yield batch
        self._prune_ids()

    def _dictionary_ids(self, ids: dict, values: list) -> list[int]:
        """The canonical ids of ``values`` in a class keyed by a dictionary: a value keeps
        its id while the index holds it; a new value gets a fresh one."""
        out = []
        for v in values:
            i = ids.get(v)
            if i is None:
                i = ids[v] = self._next_id
                self._next_id += 1
            out.append(i)
        return out

    def _prune_ids(self) -> None:
        """After a slice in which the kernel compacted its index: forget the values whose
        id no index entry holds any more. Only between slices — the slice's events carry
        their ids already — and only after a compaction, whose cost it follows; a value
        seen again later gets a fresh id, which no entry can confuse with the old one."""
        done = int(self._state.st[_K.COMPACTIONS])
        if done == self._pruned_at or not any(self._key_ids.values()):
            return
        self._pruned_at = done
        held = set(self._state.key_ids_held().tolist())
        for cls, ids in self._key_ids.items():
            if ids:
                self._key_ids[cls] = {v: i for v, i in ids.items() if i in held}

    def _partition(self, key) -> _Partition:
        part = self._parts.get(key)
        if part is None:
            part = self._parts[key] = _Partition(key, [{} for _ in range(2 * len(self.pcea.states))])
        return part

    def _states_of(self, mask: int) -> tuple[int, ...]:
        out = self._active.get(mask)
        if out is None:
            out = self._active[mask] = tuple(s for s in range(len(self.pcea.states)) if mask >> s & 1)
        return out

    def _loop(self, act, right, left, probe, tree_of, positions, times, keys, emit
              ) -> Iterator:
        """Algorithm 1 over the frame's events (``right``/``left``/``probe``/``tree_of``:
        the per-row keys and compared values ``_columns`` computes); per event that
        completes runs, what ``emit`` makes of its new final nodes (``_emit``: the iterator
        of its candidate matches, consumed before the next event)."""
        bound, by_events, timed = self._bound, self._by_events, self._timed
        windowed = bound is not None
        single = self._partition(None) if keys is None else None
        fire, update = self._fire, self._update
        for r, pos in enumerate(positions):
            self._events += 1
            part = single if keys is None else self._partition(keys[r])
            local = part.count
            part.count += 1
            if timed:
                t = times[r]
                if t is not None and t > self._ftime:
                    self._ftime = t
                ft = self._ftime
            else:
                t = ft = local
            a = act[r]
            if not a:
                continue
            lo = ft - bound if windowed else NO_LOWER
            fifo = part.fifo if by_events else self._fifo
            if windowed:
                while fifo and fifo[0][0] < lo:
                    self._evict(fifo.popleft(), lo)
            new, carried = fire(a, r, pos, t, ft, lo, part.index, right, probe)
            finals = update(new, carried, r, ft, lo, part.index, fifo if windowed else None,
                            left, tree_of)
            if finals and (not timed or t is not None):
                yield emit(finals, lo, pos, part.key)

    def _fire(self, mask: int, r: int, pos: int, t, ft, lo, index: list[dict], right, probe
              ) -> tuple[list[Node], list | None]:
        """FireTransitions for event ``r`` in the states of ``mask``: the new nodes (every
        transition reads the indices as they were before this event) and, when some state
        carries keys, each new node's carried values (else None)."""
        sources, carry, rels, loops, active, ops = self._fire_with
        new: list[Node] = []
        carried = None
        for q in active.get(mask) or self._states_of(mask):
            srcs = sources[q]
            if not srcs:
                new.append(Node(ft, pos, q, t))
                if carried is not None:
                    carried.append(())
            elif carry[q]:  # a chain step: one node per live carried value of its source
                if carried is None:
                    carried = [()] * len(new)
                sub, rel = index[srcs[0]].get(right[q][0][r]), rels[q][0]
                v = probe[q][0][r] if rel is not None else None
                if sub and (rel is None or v is not None):
                    _adopt_each(sub, rel, v, q, pos, t, ft, lo, new, carried)
                    ops.probes += len(sub)
            elif len(srcs) == 1 and rels[q][0] is None:  # the common join: one heap
                h = index[srcs[0]].get(right[q][0][r])
                if h is not None and h.ms >= lo:
                    new.append(extend(q, pos, t, ft, (h,)))
                    if carried is not None:
                        carried.append(())
                ops.probes += 1
            else:
                kids = _probe(srcs, rels[q], right[q], probe[q], r, lo, index)
                if kids is not None:
                    new.append(extend(q, pos, t, ft, kids))
                    if carried is not None:
                        carried.append(())
                ops.probes += len(srcs)
            if loops[q]:
                carried = self._fire_loop(q, r, pos, t, ft, lo, index, new, carried)
        ops.extends += len(new)
        return new, carried

    def _fire_loop(self, q: int, r: int, pos: int, t, ft, lo, index: list[dict],
                   new: list[Node], carried: list | None) -> list | None:
        """``(E AS y)+``: the nodes adopting the runs whose last iteration has this event's
        key (with a register, only those whose value is in range); returns ``carried``."""
        n, rloop, lrels, lprobe, nest, ops = self._loop_with
        sub = index[n + q].get(rloop[q][r])
        ops.probes += 1
        lrel = lrels[q]
        lv = None if lrel is None else lprobe[q][r]
        if sub is None or (lrel is not None and lv is None):
            return carried
        if nest[n + q]:
            if carried is None:
                carried = [()] * len(new)
            _adopt_each(sub, lrel, lv, q, pos, t, ft, lo, new, carried)
        elif sub.ms >= lo:
            if lrel is not None:
                sub = _in_range(sub, lrel, lv, lo)
                if sub is None:
                    return carried
            new.append(extend(q, pos, t, ft, (sub,)))
            if carried is not None:
                carried.append(())
        return carried

    def _update(self, new: list[Node], carried: list | None, r: int, ft, lo,
                index: list[dict], fifo: deque | None, left, tree_of) -> list[Node]:
        """UpdateIndices: each new node goes into the index its consumer probes (and the
        loop's for an iterated step) under its key: a heap ``union``, or with a compared
        value (``tree_of[slot]``) an ordered-index ``insert``. Returns the new nodes of
        final states. ``fifo`` (windowed runs) remembers each update for ``_evict``."""
        final, slots, key_mode, ops = self._update_with
        finals = []
        for i, node in enumerate(new):
            q = node.state
            if final[q]:
                finals.append(node)
            for slot in slots[q]:
                col = tree_of[slot]
                v = None if col is None else col[r]
                if col is not None and v is None:
                    continue  # no value to compare: never adopted through this index
                top = d = index[slot]
                pk = None
                if key_mode[slot] == _KEY_COLUMN:
                    k = left[slot][r]
                else:  # a key per run; nested: H[slot][probe key][carried values]
                    k, kc = left[slot](r, carried[i] if carried else ())
                    if key_mode[slot] == _KEY_NESTED:
                        pk, d = k, top.get(k)
                        if d is None:
                            d = top[pk] = {}
                        k = kc
                h = d.get(k)
                if h is None:
                    self._entries += 1
                    self._peak = max(self._peak, self._entries)
                if col is not None:  # the ordered index (a TNode tree)
                    d[k] = insert(h, node, v, lo, ops)
                elif h is None:  # a new heap: ``union`` with the empty heap, without the call
                    d[k] = node
                    ops.new_heap()
                else:
                    d[k] = union(h, node, lo, ops)
                if fifo is not None:
                    fifo.append((ft, top, k, d, pk))
        return finals

    def _evict(self, item, lo) -> None:
        """Forget an index entry whose last update left the window, if its heap is dead
        (an entry updated since is found again later in the FIFO). ``d`` is the dict that
        holds it: ``H[q]``, or for a nested index ``H[q][probe key]`` (emptied ones go too)."""
        _, top, k, d, pk = item
        h = d.get(k)
        if h is not None and h.ms < lo:
            del d[k]
            self._entries -= 1
            if not d and pk is not None and top.get(pk) is d:
                del top[pk]

    def _count_finals(self, finals: list[Node], lo, pos: int, key) -> int:
        """How many matches ``_emit`` yields, without building them: the runs ``runs``
        would walk, counted over the DAG (``count_runs``). Only without a time window:
        there ``_emit``'s check of the start's time never fails (a run's earliest event is
        one of its starts, whose window time is its max-start, at least ``lo``)."""
        memo: dict = {}
        try:
            return sum(count_runs(root, lo, memo) for root in finals if root.ms >= lo)
        except RecursionError:  # runs nested deeper than Python recurses (long iterations)
            return sum(1 for _ in self._emit(finals, lo, pos, key))

    def _emit(self, finals: list[Node], lo, pos: int, key) -> Iterator[Match]:
        """The windowed runs of the new final nodes as candidate matches (projected; a tree's
        runs in position order). Repeats and LIMIT are ``strategies.report``'s."""
        labels, sort = self._labels, self._sort
        windowed = self._bound is not None
        for root in finals:
            if root.ms < lo:
                continue
            tree = sort[root.state]
            for run in runs(root, lo):
                if tree:
                    run = tuple(sorted(run, key=lambda nd: nd.pos))
                first = run[0]
                if windowed and (first.time is None or first.time < lo):
                    continue  # attribute windows: the start lacks a time, or an inner null hid it
                yield Match(first.pos, pos, tuple((nd.pos, labels[nd.state]) for nd in run
                                                  if labels[nd.state]), key)
