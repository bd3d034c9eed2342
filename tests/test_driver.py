"""The driver (``engine/driver.py``): one pass of one executor over consecutive event frames,
in slices, with a signal checkpoint per slice, progress per batch, and ``finish`` at the end
— the one loop the CLI, the DataFrame API, ``Plan.run`` and the Spark tasks share."""

from __future__ import annotations

import pytest

from cer_cli import signals
from cer_cli.engine.driver import Driver, run_batches, run_count, run_matches
from cer_cli.engine.executor import Executor
from cer_cli.events import as_matches
from cer_cli.plan import plan
from cer_cli.query.parser import parse
from tests.builders import events_frame, letters

QUERIES = {
    "cea": "SELECT * WHERE A AS a ; B AS b WITHIN 4 EVENTS",
    "hash join": "SELECT * WHERE A AS a ; B AS b FILTER a.id = b.id AND a.v < b.v WITHIN 6 EVENTS",
    "trailing absence": "SELECT * WHERE A AS a ; !D WITHIN 3 EVENTS",
}


def _events(n: int = 40) -> list[dict]:
    return [{**e, "id": i % 3, "v": i % 5} for i, e in enumerate(letters(("ABAC" * n)[:n]))]


@pytest.mark.parametrize("name", QUERIES)
def test_every_executor_has_the_whole_protocol(name):
    """``finish`` is part of ``Executor``: the driver calls it on every executor (a no-op for
    those without open matches), never looking it up with ``getattr``."""
    q = plan(parse(QUERIES[name]))
    assert (q.executor_kind == "hash join") == (name == "hash join")
    ex = q.executor()
    assert isinstance(ex, Executor)
    assert list(ex.finish()) == []


@pytest.mark.parametrize("name", QUERIES)
def test_slices_give_the_matches_of_the_whole_frame(name, monkeypatch):
    """Slices of 7 events, frames of 10: the same matches as one call on the whole log, and
    the same count; a signal checkpoint after every slice."""
    frame = events_frame(_events())
    q = plan(parse(QUERIES[name]))
    whole = list(q.executor().run(frame))
    checks = []
    monkeypatch.setattr(signals, "check", lambda: checks.append(1))
    frames = [frame.slice(i, 10) for i in range(0, frame.height, 10)]
    d = Driver(q.executor(), slice_rows=7)
    got = [m for f in frames for b in d.feed(f) for m in b.matches()]
    assert got == whole and whole
    assert len(checks) >= 4 * 2  # each frame of 10 is two slices
    c = Driver(q.executor(), count_slice_rows=7)
    assert sum(c.count(f) for f in frames) + sum(len(b) for b in c.finish()) == len(whole)


def test_finish_ends_the_pass():
    """A trailing absence's open matches (``open_ends``) come from ``finish``, through every
    entry point of the driver."""
    q = plan(parse(QUERIES["trailing absence"]))
    frame = events_frame(letters("ABAB"))
    assert list(run_matches(q.executor(), frame)) == []
    opened = list(run_matches(q.executor(open_ends=True), frame))
    assert [(m.start, m.end) for m in opened] == [(0, 4), (2, 4)]
    assert run_count(q.executor(open_ends=True), frame) == 2
    assert len(list(as_matches(run_batches(q.executor(open_ends=True), [frame])))) == 2


def test_progress_never_goes_back_and_counts_every_match():
    """``progress(events, new matches)``: events read never decrease and end at the log's
    size; the matches add up to all of them, also when only counting."""
    frame = events_frame(_events(60))
    q = plan(parse(QUERIES["cea"]))
    seen: list[tuple[int, int]] = []
    n = sum(len(b) for b in run_batches(q.executor(), [frame.slice(0, 25), frame.slice(25)],
                                        lambda e, m: seen.append((e, m))))
    events = [e for e, _ in seen]
    assert events == sorted(events) and events[-1] == 60
    assert sum(m for _, m in seen) == n > 0
    seen.clear()
    assert run_count(q.executor(), frame, lambda e, m: seen.append((e, m))) == n
    assert seen[-1][0] == 60 and sum(m for _, m in seen) == n
