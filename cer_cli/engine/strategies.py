"""Selection strategies, consumption and LIMIT (Foundations of CEP §5; CORE §2 and §3.4).

A strategy picks among the complex events that end at the same event, after projection and
the window (docs/language.md). We apply it by *enumerate-then-filter*: the engine
enumerates every windowed complex event ending at the current event and the strategy
filters that batch. This is exact for every strategy under windows, projection and
partitions — the papers' linear-time NEXT/LAST automata keep one run per state and are
wrong once a window can discard the preferred run — but a strategy's cost per event is
the size of the batch, not the size of what it keeps:

* ``NEXT`` / ``LAST``: one pass, O(m·s) for m complex events of size ≤ s;
* ``MAX``: pairwise subset tests between distinct position sets, O(m²·s);
* ``STRICT``: O(m) (a count per complex event).

Position sets are compared as sets of positions (variables and intervals do not matter);
every complex event whose set is selected is kept, so equal sets with different bindings
or intervals all survive.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cer_cli.engine.enumerate import Cons

#: A candidate complex event: (start position, start index in its partition, marked events).
Candidate = tuple[int, int, Cons]

STRATEGY_COST = {
    "ALL": "every complex event; no extra cost",
    "ANY": "every complex event; no extra cost",
    "NEXT": "enumerate the events ending at each event, keep the <=next-greatest: O(m·s)",
    "LAST": "enumerate the events ending at each event, keep the <=last-greatest: O(m·s)",
    "MAX": "enumerate the events ending at each event, keep the ⊆-maximal: O(m²·s)",
    "STRICT": "enumerate the events ending at each event, keep the gap-free: O(m)",
}


def positions(p: Cons) -> tuple[int, ...]:
    """Marked positions of a cons list, increasing."""
    out = []
    while p is not None:
        out.append(p[0])
        p = p[2]
    return tuple(out)


def _next_key(ps: tuple[int, ...]) -> tuple[int, ...]:
    # The earliest differing position wins: compare ascending with positions negated;
    # a proper prefix loses (the other set holds the earliest differing position).
    return tuple(-x for x in ps)


def _last_key(ps: tuple[int, ...]) -> tuple[int, ...]:
    # The latest differing position wins: compare descending; a proper prefix loses.
    return ps[::-1]


def _keep_greatest(batch: Sequence[Candidate], key: Callable) -> list[Candidate]:
    keyed = [(key(positions(c[2])), c) for c in batch]
    best = max(k for k, _ in keyed)
    return [c for k, c in keyed if k == best]


def _keep_maximal(batch: Sequence[Candidate]) -> list[Candidate]:
    sets = {positions(c[2]) for c in batch}
    frozen = [(ps, frozenset(ps)) for ps in sets]
    maximal = {ps for ps, s in frozen if not any(len(o) > len(s) and s < o for _, o in frozen)}
    return [c for c in batch if positions(c[2]) in maximal]


def select(strategy: str, batch: Sequence[Candidate], end_local: int) -> Sequence[Candidate]:
    """The complex events of ``batch`` (all ending at the event with partition index
    ``end_local``) that ``strategy`` keeps."""
    if strategy in ("ALL", "ANY") or not batch:
        return batch
    if strategy == "NEXT":
        return _keep_greatest(batch, _next_key)
    if strategy == "LAST":
        return _keep_greatest(batch, _last_key)
    if strategy == "MAX":
        return _keep_maximal(batch)
    if strategy == "STRICT":
        return [c for c in batch if len(positions(c[2])) == end_local - c[1] + 1]
    raise ValueError(f"unknown selection strategy {strategy!r}")
