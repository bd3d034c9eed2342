"""Complex event automata (CEA): the data type the compiler produces and the engine runs.

A CEA ``(Q, Δ, q0, F)`` reads one event per transition. A transition ``p --guard/L--> q``
fires on an event whose symbol satisfies ``guard`` and either *marks* the event with the
variables ``L`` (``•``, when ``L`` is non-empty) or consumes it silently (``∘``, ``L`` empty).
This is CORE's "valuation CEA": marks carry variable sets, so every match reports which
variable binds which event, and projection is just intersecting labels.

Runs may start at any position (the engine starts one at every event, CORE §4), and no
transition enters ``q0``. A run that is in a final state right after event ``j`` yields a
match ending at ``j`` whose interval starts where the run left ``q0``.

Guards are boolean formulas over the query's *atomic predicates* (indices into the
alphabet, see ``predicates.py``). An event is summarised by the bit mask of the atoms it
satisfies, so evaluating a guard is a few bit tests.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GTrue:
    """Always true (skip loops)."""


@dataclass(frozen=True)
class GAtom:
    """Atomic predicate number ``index`` holds."""

    index: int


@dataclass(frozen=True)
class GNot:
    operand: Guard


@dataclass(frozen=True)
class GAnd:
    operands: tuple[Guard, ...]


@dataclass(frozen=True)
class GOr:
    operands: tuple[Guard, ...]


Guard = GTrue | GAtom | GNot | GAnd | GOr


def holds(guard: Guard, mask: int) -> bool:
    """Evaluate ``guard`` on an event whose satisfied atoms are the bits of ``mask``."""
    if isinstance(guard, GTrue):
        return True
    if isinstance(guard, GAtom):
        return (mask >> guard.index) & 1 == 1
    if isinstance(guard, GNot):
        return not holds(guard.operand, mask)
    if isinstance(guard, GAnd):
        return all(holds(g, mask) for g in guard.operands)
    if isinstance(guard, GOr):
        return any(holds(g, mask) for g in guard.operands)
    raise TypeError(guard)


@dataclass(frozen=True)
class Transition:
    source: int
    guard: Guard
    labels: frozenset[str]  # empty: unmarked (∘); otherwise marking (•) with these variables
    target: int

    @property
    def marking(self) -> bool:
        return bool(self.labels)


@dataclass(frozen=True)
class CEA:
    """A complex event automaton over states ``0 .. n_states-1``."""

    n_states: int
    initial: int
    finals: frozenset[int]
    transitions: tuple[Transition, ...]

    def outgoing(self, state: int) -> tuple[Transition, ...]:
        return tuple(t for t in self.transitions if t.source == state)
