"""Algorithm 1 of CORE (§4.3): one event's update of the det-state → union-list table.

The table ``T`` maps det-states to union-lists of tECS nodes; a plain ``dict`` keeps its
keys in first-insertion order, which is the paper's ``ordered-keys``. For event ``j`` the
initial det-state is stepped first with a fresh bottom (a run may start at every event,
CORE-style), then the old det-states in insertion order. That order visits union-lists in
non-increasing max-start, which is what makes every union-list ``insert`` legal and keeps
each list at most ``|Q|`` long (App. B.3).

Windows prune before stepping, as CORE's C++ evaluator does: a det-state whose list head
started before ``tau = time(j) − bound`` is dropped (the head holds the latest start), and
otherwise out-of-window list entries are removed.

Cost per event: O(active det-states × (moves + list length)) tECS operations, each O(1) —
constant for a fixed query, independent of the window and the number of partial matches.
"""

from __future__ import annotations

from cer_cli.compiler.determinize import LazyDFA
from cer_cli.engine.tecs import NO_WINDOW, TECS

Table = dict[int, list[int]]


def advance(
    t: TECS,
    dfa: LazyDFA,
    table: Table,
    sym: int,
    pos: int,
    time: float | None,
    local: int,
    tau: float,
) -> Table:
    """The table after reading the event at ``pos`` (symbol ``sym``); no run starts at an
    event whose window time is ``None``."""
    new: Table = {}
    move = dfa.step(dfa.initial, sym)
    if time is not None and (move[0] >= 0 or move[1]):
        _exec(t, move, [t.new_bottom(pos, time, local)], pos, new)
    mt = t.mt
    for p, ul in table.items():
        if tau != NO_WINDOW:
            if mt[ul[0]] < tau:
                continue
            if mt[ul[-1]] < tau:
                ul = [n for n in ul if mt[n] >= tau]
        _exec(t, dfa.step(p, sym), ul, pos, new)
    return new


def _exec(t: TECS, move: tuple, ul: list[int], pos: int, new: Table) -> None:
    """EXECTRANS: extend along every marking move, reuse the list along the unmarked one."""
    unmarked, marks = move
    n = -1
    if marks:
        n = t.merge(ul)
        for q, lab in marks:
            o = t.extend(n, pos, lab)
            dest = new.get(q)
            if dest is None:
                new[q] = [o]
            else:
                t.insert(dest, o)
    if unmarked >= 0:
        dest = new.get(unmarked)
        if dest is None:
            new[unmarked] = ul
        else:
            t.insert(dest, n if n >= 0 else t.merge(ul))
