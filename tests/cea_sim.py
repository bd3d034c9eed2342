"""Brute-force simulator of a (non-deterministic) CEA on a short stream, for tests.

A run starts at every position from the initial state (no skip loop there), follows every
transition whose guard holds on the event's atom mask, and reports ``(start, end, events)``
whenever it is in a final state right after event ``end`` — the same key as
``Match.key()``. Exponential in the worst case; meant for streams of about ten events.
"""

from __future__ import annotations

from cer_cli.compiler.cea import CEA, holds


def simulate(cea: CEA, masks: list[int]) -> set[tuple]:
    """All matches of ``cea`` over events summarised by ``masks`` (one atom mask per event)."""
    found = set()
    for start in range(len(masks)):
        configs = {(cea.initial, ())}
        for pos in range(start, len(masks)):
            step = set()
            for state, marked in configs:
                for t in cea.outgoing(state):
                    if holds(t.guard, masks[pos]):
                        events = marked + ((pos, tuple(sorted(t.labels))),) if t.labels else marked
                        step.add((t.target, events))
            configs = step
            found.update((start, pos, events) for state, events in configs if state in cea.finals)
            if not configs:
                break
    return found
