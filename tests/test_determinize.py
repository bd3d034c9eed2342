"""Lazy I/O-determinisation: det-runs accept exactly what the CEA accepts, once each."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cer_cli.compiler.cea import CEA, GAtom, GNot, GTrue, Transition
from cer_cli.compiler.determinize import LazyDFA

LABELS = (frozenset(), frozenset(), frozenset({"x"}), frozenset({"y"}), frozenset({"x", "y"}))
GUARDS = (GTrue(), GAtom(0), GAtom(1), GAtom(2), GNot(GAtom(0)))


@st.composite
def ceas(draw, max_states: int = 5) -> CEA:
    """A random CEA over atoms 0..2 (one per event type): no transition enters state 0."""
    n = draw(st.integers(2, max_states))
    transitions = draw(
        st.lists(
            st.builds(
                Transition,
                st.integers(0, n - 1),
                st.sampled_from(GUARDS),
                st.sampled_from(LABELS),
                st.integers(1, n - 1),
            ),
            min_size=1,
            max_size=3 * n,
        )
    )
    finals = draw(st.sets(st.integers(1, n - 1), min_size=1))
    return CEA(n, 0, frozenset(finals), tuple(dict.fromkeys(transitions)))


def nfa_outputs(cea: CEA, masks: list[int]) -> set[tuple]:
    """Label sequences ``((pos, labels), ...)`` of accepting runs from 0 to the end (brute force)."""
    from cer_cli.compiler.cea import holds

    configs = {(cea.initial, ())}
    for j, mask in enumerate(masks):
        configs = {
            (t.target, marks + (((j, tuple(sorted(t.labels))),) if t.labels else ()))
            for q, marks in configs
            for t in cea.outgoing(q)
            if holds(t.guard, mask)
        }
    return {marks for q, marks in configs if q in cea.finals}


def dfa_outputs(dfa: LazyDFA, masks: list[int]) -> list[tuple]:
    """Label sequences of det-runs ending in a final det-state, as a list (duplicates kept)."""
    runs = [(dfa.initial, ())]
    for j, mask in enumerate(masks):
        sym = dfa.symbol(mask)
        nxt = []
        for s, marks in runs:
            unmarked, marked = dfa.step(s, sym)
            if unmarked >= 0:
                nxt.append((unmarked, marks))
            for target, lab in marked:
                nxt.append((target, marks + ((j, dfa.labelsets[lab]),)))
        runs = nxt
    return [marks for s, marks in runs if dfa.is_final(s)]


@given(ceas(), st.lists(st.sampled_from((1, 2, 4)), max_size=6), st.integers(1, 8))
@settings(max_examples=300, deadline=None)
def test_det_runs_accept_what_the_cea_accepts_once(cea, masks, cache_limit):
    dfa = LazyDFA(cea, cache_limit=cache_limit)
    got = dfa_outputs(dfa, masks)
    assert len(got) == len(set(got)), "two det-runs produce the same output"
    assert set(got) == nfa_outputs(cea, masks)


def test_moves_group_marking_transitions_by_label_set():
    cea = CEA(
        4,
        0,
        frozenset({3}),
        (
            Transition(0, GAtom(0), frozenset({"x"}), 1),
            Transition(0, GTrue(), frozenset({"x"}), 2),
            Transition(0, GAtom(0), frozenset({"y"}), 3),
            Transition(0, GTrue(), frozenset(), 1),
            Transition(0, GAtom(1), frozenset(), 2),
        ),
    )
    dfa = LazyDFA(cea)
    a, b = dfa.symbol(0b01), dfa.symbol(0b10)
    unmarked, marked = dfa.step(dfa.initial, a)
    assert dfa.states[unmarked] == {1}
    got = {dfa.labelsets[lab]: dfa.states[q] for q, lab in marked}
    assert got == {("x",): {1, 2}, ("y",): {3}}
    assert [dfa.is_final(q) for q, _ in marked] == [False, True]
    unmarked, marked = dfa.step(dfa.initial, b)
    assert dfa.states[unmarked] == {1, 2}
    assert {dfa.labelsets[lab]: dfa.states[q] for q, lab in marked} == {("x",): {2}}
    assert dfa.step(dfa.initial, a) == dfa.step(dfa.initial, a)
    assert dfa.stats.cache_hits == 2 and dfa.stats.transitions_computed == 2


def test_bounded_cache_resets_but_keeps_state_ids():
    cea = CEA(2, 0, frozenset({1}), (Transition(0, GAtom(0), frozenset({"x"}), 1),))
    dfa = LazyDFA(cea, cache_limit=1)
    syms = [dfa.symbol(m) for m in (0, 1, 2, 3)]
    first = [dfa.step(dfa.initial, s) for s in syms]
    assert dfa.stats.resets == 3
    assert [dfa.step(dfa.initial, s) for s in syms] == first
    assert dfa.stats.states == 2
