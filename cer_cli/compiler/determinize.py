"""Lazy I/O-determinisation of a CEA (Foundations of CEP, Prop. 1; CORE §4.4).

A det-state is a set of CEA states. On an event symbol, the CEA transitions that fire from
the set are grouped by their label set: the unmarked ones (empty label) give one target set
(the ``∘`` move), and every distinct non-empty label set gives its own target set (one ``•``
move per label set). This is I/O-determinism per label: a det-run is fixed by where it
started and which label set it used at each event, so every valuation is produced by exactly
one det-run and the engine never reports a complex event twice.

Nothing is built up front: det-states are interned to ``int`` ids when first reached, and
the move of a (det-state, symbol) pair is computed once — O(|Δ| · guard size) — then
cached. The transition cache is bounded: past ``cache_limit`` entries it is cleared (a
"reset"), which only costs recomputation. State ids are never reused or remapped, so ids
held by a running engine stay valid; the state table grows with the number of distinct
reachable subsets, which is bounded by ``2^|Q|`` and small in practice.

Symbols are event summaries (bit masks of the atomic predicates an event satisfies); they
are interned to dense ids by ``symbol(mask)`` so batches that number their symbols
differently share one cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from cer_cli.compiler.cea import CEA, Transition, holds

#: A det-move: unmarked target (or -1) and the marking targets ``((target, labelset), ...)``.
Move = tuple[int, tuple[tuple[int, int], ...]]


@dataclass(frozen=True)
class DFAStats:
    states: int
    transitions_computed: int
    cache_hits: int
    resets: int


class LazyDFA:
    """The I/O-deterministic automaton of ``cea``, built on demand."""

    def __init__(self, cea: CEA, cache_limit: int = 100_000) -> None:
        self.cea = cea
        self.cache_limit = cache_limit
        self._by_source: list[list[Transition]] = [[] for _ in range(cea.n_states)]
        for t in cea.transitions:
            self._by_source[t.source].append(t)
        self.states: list[frozenset[int]] = []
        self._state_ids: dict[frozenset[int], int] = {}
        self._final: list[bool] = []
        self.labelsets: list[tuple[str, ...]] = []
        self._labelset_ids: dict[tuple[str, ...], int] = {}
        self.masks: list[int] = []
        self._symbol_ids: dict[int, int] = {}
        self._cache: list[dict[int, Move]] = []
        self._cached = 0
        self._computed = 0
        self._hits = 0
        self._resets = 0
        self.initial = self._intern(frozenset((cea.initial,)))

    # ----------------------------------------------------------------- interning

    def _intern(self, states: frozenset[int]) -> int:
        sid = self._state_ids.get(states)
        if sid is None:
            sid = len(self.states)
            self._state_ids[states] = sid
            self.states.append(states)
            self._final.append(not states.isdisjoint(self.cea.finals))
            self._cache.append({})
        return sid

    def labelset(self, labels: frozenset[str]) -> int:
        """Id of a (non-empty) label set; ``labelsets[id]`` is its sorted tuple."""
        key = tuple(sorted(labels))
        lid = self._labelset_ids.get(key)
        if lid is None:
            lid = len(self.labelsets)
            self._labelset_ids[key] = lid
            self.labelsets.append(key)
        return lid

    def symbol(self, mask: int) -> int:
        """Dense id of the event summary ``mask``."""
        sid = self._symbol_ids.get(mask)
        if sid is None:
            sid = len(self.masks)
            self._symbol_ids[mask] = sid
            self.masks.append(mask)
        return sid

    # ----------------------------------------------------------------- moves

    def is_final(self, state: int) -> bool:
        return self._final[state]

    def step(self, state: int, symbol: int) -> Move:
        """The det-move of ``state`` on ``symbol`` (cached)."""
        row = self._cache[state]
        move = row.get(symbol)
        if move is not None:
            self._hits += 1
            return move
        move = self._compute(state, self.masks[symbol])
        if self._cached >= self.cache_limit:
            for r in self._cache:
                r.clear()
            self._cached = 0
            self._resets += 1
        row[symbol] = move
        self._cached += 1
        return move

    def _compute(self, state: int, mask: int) -> Move:
        self._computed += 1
        unmarked: set[int] = set()
        marked: dict[frozenset[str], set[int]] = {}
        for p in self.states[state]:
            for t in self._by_source[p]:
                if holds(t.guard, mask):
                    if t.labels:
                        marked.setdefault(t.labels, set()).add(t.target)
                    else:
                        unmarked.add(t.target)
        target = self._intern(frozenset(unmarked)) if unmarked else -1
        # ordered by the label sets themselves, not their ids: ids follow which events came
        # first, so a --jobs or Spark task that saw other events (another key's) would
        # order one event's matches otherwise than one core did
        moves = sorted((tuple(sorted(labels)), qs) for labels, qs in marked.items())
        return target, tuple((self._intern(frozenset(qs)), self.labelset(frozenset(key)))
                             for key, qs in moves)

    @property
    def stats(self) -> DFAStats:
        return DFAStats(len(self.states), self._computed, self._hits, self._resets)
