"""Selection strategies, LIMIT, projection and de-duplication over ``MatchBatch``es
(Foundations of CEP §5; CORE §2 and §3.4; docs/language.md).

A strategy picks among the complex events that end at the same event, after projection and
the window. We apply it by *enumerate-then-filter*: the kernel enumerates every windowed
complex event ending at the current event and the strategy filters that group. This is
exact for every strategy under windows, projection and partitions — the papers' linear-time
NEXT/LAST automata keep one run per state and are wrong once a window can discard the
preferred run — but a strategy's cost per event is the size of the group, not the size of
what it keeps:

* ``NEXT`` / ``LAST``: one pass, O(m·s) for m complex events of size ≤ s;
* ``MAX``: pairwise subset tests between distinct position sets, O(m²·s);
* ``STRICT``: O(m) (a size per complex event against its partition-local interval).

Position sets are compared as sets of positions (variables and intervals do not matter);
every complex event whose set is selected is kept, so equal sets with different bindings
or intervals all survive.

A batch holds whole groups: the kernel never splits one triggering event's complex events
across two flushes (``kernel._enumerate``), and matches come in order of their triggering
event, so a group is a run of equal ``end``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cer_cli.events import MatchBatch

STRATEGY_COST = {
    "ALL": "every complex event; no extra cost",
    "ANY": "every complex event; no extra cost",
    "NEXT": "enumerate the events ending at each event, keep the <=next-greatest: O(m·s)",
    "LAST": "enumerate the events ending at each event, keep the <=last-greatest: O(m·s)",
    "MAX": "enumerate the events ending at each event, keep the ⊆-maximal: O(m²·s)",
    "STRICT": "enumerate the events ending at each event, keep the gap-free: O(m)",
}


def groups(batch: MatchBatch) -> np.ndarray:
    """Where each group (run of equal ``end``) starts, plus ``len(batch)`` at the end."""
    cut = np.flatnonzero(np.diff(batch.end)) + 1
    return np.concatenate(([0], cut, [len(batch)])).astype(np.int64)


def _next_key(ps: tuple[int, ...]) -> tuple[int, ...]:
    # The earliest differing position wins: compare ascending with positions negated;
    # a proper prefix loses (the other set holds the earliest differing position).
    return tuple(-x for x in ps)


def _last_key(ps: tuple[int, ...]) -> tuple[int, ...]:
    # The latest differing position wins: compare descending; a proper prefix loses.
    return ps[::-1]


def _keep_greatest(sets: list[tuple[int, ...]], key: Callable) -> list[int]:
    keys = [key(ps) for ps in sets]
    best = max(keys)
    return [i for i, k in enumerate(keys) if k == best]


def _keep_maximal(sets: list[tuple[int, ...]]) -> list[int]:
    frozen = [(ps, frozenset(ps)) for ps in set(sets)]
    maximal = {ps for ps, s in frozen if not any(len(o) > len(s) and s < o for _, o in frozen)}
    return [i for i, ps in enumerate(sets) if ps in maximal]


def select(strategy: str, batch: MatchBatch) -> MatchBatch:
    """The complex events of ``batch`` that ``strategy`` keeps in their group, in order."""
    if strategy in ("ALL", "ANY") or not len(batch):
        return batch
    if strategy == "STRICT":
        # gap-free: one reported event per position of the interval in the partition
        sizes = np.diff(batch.off)
        return batch.take(np.flatnonzero(sizes == batch.end_local - batch.start_local + 1))
    pick = {"NEXT": lambda s: _keep_greatest(s, _next_key), "LAST": lambda s: _keep_greatest(s, _last_key),
            "MAX": _keep_maximal}.get(strategy)
    if pick is None:
        raise ValueError(f"unknown selection strategy {strategy!r}")
    pos, off = batch.pos.tolist(), batch.off.tolist()
    bounds = groups(batch).tolist()
    kept: list[int] = []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        sets = [tuple(pos[off[m]:off[m + 1]]) for m in range(lo, hi)]
        kept.extend(lo + i for i in pick(sets))
    return batch.take(np.asarray(kept, dtype=np.int64))


def report(batch: MatchBatch, strategy: str, limit: int | None,
           distinct: bool = False) -> MatchBatch:
    """What a batch of candidates reports, per triggering event (every executor's last
    step): one match per distinct complex event when candidates may repeat one
    (``distinct``: a post-filter's projection, a hash join's trees), the strategy's choice,
    then LIMIT's latest starts."""
    if distinct:
        batch = dedupe(batch)
    batch = select(strategy, batch)
    if limit is not None:
        batch = limit_latest(batch, limit)
    return batch


def limit_latest(batch: MatchBatch, n: int) -> MatchBatch:
    """LIMIT ``n`` per triggering event: the ``n`` latest starts of each group, latest
    first (ties in enumeration order: a stable sort by start) — the one statement of the
    rule. Under ALL/ANY without post-processing the CEA's kernel finds the same matches in
    the same order best-first (``kernel_state.latest_first``) without enumerating the rest."""
    if not len(batch):
        return batch
    bounds = groups(batch)
    group = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
    order = np.lexsort((-batch.start, group))  # stable: by group, then latest start
    rank = np.arange(len(batch)) - bounds[group[order]]
    return batch.take(order[rank < n])


def project(batch: MatchBatch, keep: frozenset[str]) -> MatchBatch:
    """SELECT ``keep``: drop the other variables, and events left with none."""
    proj = [tuple(x for x in ls if x in keep) for ls in batch.labelsets]
    ids: dict[tuple[str, ...], int] = {}
    remap = np.array([ids.setdefault(p, len(ids)) if p else -1 for p in proj] or [-1], np.int64)
    lab = remap[batch.lab]
    alive = lab >= 0
    match = np.repeat(np.arange(len(batch)), np.diff(batch.off))
    off = np.zeros(len(batch) + 1, np.int64)
    np.cumsum(np.bincount(match[alive], minlength=len(batch)), out=off[1:])
    return MatchBatch(batch.start, batch.end, batch.part, off, batch.pos[alive], lab[alive],
                      tuple(ids), batch.partitions, batch.start_local, batch.end_local)


def dedupe(batch: MatchBatch) -> MatchBatch:
    """One match per distinct (end, start, events): the first occurrence wins."""
    canon: dict[tuple[str, ...], int] = {}
    cid = [canon.setdefault(ls, len(canon)) for ls in batch.labelsets]
    start, end, off = batch.start.tolist(), batch.end.tolist(), batch.off.tolist()
    pos, lab = batch.pos.tolist(), [cid[x] for x in batch.lab.tolist()]
    seen: set = set()
    kept = []
    for m in range(len(start)):
        a, b = off[m], off[m + 1]
        k = (end[m], start[m], tuple(pos[a:b]), tuple(lab[a:b]))
        if k not in seen:
            seen.add(k)
            kept.append(m)
    return batch if len(kept) == len(start) else batch.take(np.asarray(kept, dtype=np.int64))
