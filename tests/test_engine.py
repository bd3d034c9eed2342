"""Worked examples from the papers, and engine behaviours (partitions, batches, windows,
consumption, limit, memory). Expected outputs come from the papers (Foundations of CEP,
Figure 1 and its strategies; CORE Figure 3), not from the engine."""

from __future__ import annotations

import polars as pl
import pytest

from cer_cli.compiler.cea import CEA, GAnd, GAtom, GTrue, Transition
from cer_cli.compiler.predicates import Alphabet, AttrTest, TypeTest
from cer_cli.engine.run import Engine
from cer_cli.events import POS, STREAM, TIME, TYPE
from cer_cli.plan import plan
from cer_cli.query import ast
from cer_cli.query.errors import QueryError
from cer_cli.query.parser import parse
from tests.builders import events_frame, letters


def cmp(attr: str, op: str, value) -> AttrTest:
    return AttrTest(ast.Compare(op, ast.AttrRef("", attr), ast.Literal(value)))


def g(*atoms: int):
    return GAnd(tuple(GAtom(i) for i in atoms))


def T(source, guard, labels, target):
    return Transition(source, guard, frozenset(labels), target)


def positions(matches) -> set[frozenset[int]]:
    return {frozenset(p for p, _ in m.events) for m in matches}


# --------------------------------------------------------------------------- Figure 1

FIG1 = [
    ("H", 2, 25), ("T", 0, 45), ("H", 0, 20), ("H", 1, 25), ("T", 1, 40),
    ("T", 0, 42), ("T", 1, 25), ("H", 1, 70), ("H", 0, 18),
]  # fmt: skip
FIG1_EVENTS = [
    {"type": ty, "stream": "S", "id": i, ("tmp" if ty == "T" else "hum"): v} for ty, i, v in FIG1
]
# atoms: 0 T, 1 H, 2 tmp>40, 3 hum<=25, 4 id=0, 5 id=1, 6 hum<30, 7 hum>60
FIG1_ATOMS = (
    TypeTest("T"), TypeTest("H"), cmp("tmp", ">", 40), cmp("hum", "<=", 25),
    cmp("id", "=", 0), cmp("id", "=", 1), cmp("hum", "<", 30), cmp("hum", ">", 60),
)  # fmt: skip

# φ1 = (T AS x ; H AS y) FILTER (x.tmp>40 ∧ y.hum<=25 ∧ x.id=0 ∧ y.id=0)
PHI1 = CEA(3, 0, frozenset({2}), (
    T(0, g(0, 2, 4), {"T", "x"}, 1), T(1, GTrue(), (), 1), T(1, g(1, 3, 4), {"H", "y"}, 2),
))  # fmt: skip
# φ2 = [(T AS x ; H AS y) OR (H AS y ; T AS x)] FILTER (same)
PHI2 = CEA(4, 0, frozenset({2}), PHI1.transitions + (
    T(0, g(1, 3, 4), {"H", "y"}, 3), T(3, GTrue(), (), 3), T(3, g(0, 2, 4), {"T", "x"}, 2),
))  # fmt: skip
# φ3 = [H AS x ; (T AS y FILTER y.id=1)+ ; H AS z] FILTER (x.hum<30 ∧ z.hum>60 ∧ x.id=z.id=1)
PHI3 = CEA(4, 0, frozenset({3}), (
    T(0, g(1, 6, 5), {"H", "x"}, 1), T(1, GTrue(), (), 1), T(1, g(0, 5), {"T", "y"}, 2),
    T(2, GTrue(), (), 2), T(2, g(0, 5), {"T", "y"}, 2), T(2, g(1, 7, 5), {"H", "z"}, 3),
))  # fmt: skip


def fig1(cea: CEA, strategy: str) -> set[frozenset[int]]:
    engine = Engine(cea, Alphabet(FIG1_ATOMS), strategy=strategy)
    return positions(engine.run(events_frame(FIG1_EVENTS)))


S = frozenset
FIG1_EXPECTED = {  # Foundations of CEP, Figure 1 and Section 5
    "PHI1": {
        "ALL": {S({1, 2}), S({1, 8}), S({5, 8})},
        "STRICT": {S({1, 2})},
        "NEXT": {S({1, 2}), S({1, 8})},
        "LAST": {S({1, 2}), S({5, 8})},
        "MAX": {S({1, 2}), S({1, 8}), S({5, 8})},
    },
    "PHI2": {
        "ALL": {S({1, 2}), S({2, 5}), S({1, 8}), S({5, 8})},
        "STRICT": {S({1, 2})},
        "NEXT": {S({1, 2}), S({2, 5}), S({1, 8})},
        "LAST": {S({1, 2}), S({2, 5}), S({5, 8})},
        "MAX": {S({1, 2}), S({2, 5}), S({1, 8}), S({5, 8})},
    },
    "PHI3": {
        "ALL": {S({3, 4, 7}), S({3, 6, 7}), S({3, 4, 6, 7})},
        "STRICT": set(),
        "NEXT": {S({3, 4, 6, 7})},
        "LAST": {S({3, 4, 6, 7})},
        "MAX": {S({3, 4, 6, 7})},
    },
}


@pytest.mark.parametrize("name", ["PHI1", "PHI2", "PHI3"])
@pytest.mark.parametrize("strategy", ["ALL", "STRICT", "NEXT", "LAST", "MAX"])
def test_foundations_figure_1(name, strategy):
    cea = {"PHI1": PHI1, "PHI2": PHI2, "PHI3": PHI3}[name]
    assert fig1(cea, strategy) == FIG1_EXPECTED[name][strategy]


def test_figure_1_bindings_and_intervals():
    matches = sorted(Engine(PHI1, Alphabet(FIG1_ATOMS)).run(events_frame(FIG1_EVENTS)), key=lambda m: (m.end, m.start))
    assert [(m.start, m.end, m.events) for m in matches] == [
        (1, 2, ((1, ("T", "x")), (2, ("H", "y")))),
        (1, 8, ((1, ("T", "x")), (8, ("H", "y")))),
        (5, 8, ((5, ("T", "x")), (8, ("H", "y")))),
    ]


# --------------------------------------------------------------------------- CORE Figure 3

CORE_FIG3 = [("SELL", "MSFT", 101), ("SELL", "MSFT", 102), ("SELL", "INTL", 80), ("BUY", "INTL", 80),
             ("SELL", "AMZN", 1900), ("SELL", "INTL", 81), ("SELL", "AMZN", 1920)]  # fmt: skip
# atoms: 0 SELL, 1 name=MSFT, 2 price>100, 3 name=INTL, 4 name=AMZN, 5 price<2000
Q1_ATOMS = (TypeTest("SELL"), cmp("name", "=", "MSFT"), cmp("price", ">", 100),
            cmp("name", "=", "INTL"), cmp("name", "=", "AMZN"), cmp("price", "<", 2000))  # fmt: skip
Q1 = CEA(4, 0, frozenset({3}), (
    T(0, g(0, 1, 2), {"SELL", "msft"}, 1), T(1, GTrue(), (), 1),
    T(1, g(0, 3), {"SELL", "intel"}, 2), T(2, GTrue(), (), 2),
    T(2, g(0, 4, 5), {"SELL", "amzn"}, 3),
))  # fmt: skip


def core_frame() -> pl.DataFrame:
    return events_frame([{"type": t, "stream": "Stock", "name": n, "price": p} for t, n, p in CORE_FIG3])


def test_core_figure_3_q1():
    matches = list(Engine(Q1, Alphabet(Q1_ATOMS)).run(core_frame()))
    assert {(m.start, m.end, frozenset(p for p, _ in m.events)) for m in matches} == {
        (0, 4, S({0, 2, 4})), (1, 4, S({1, 2, 4})),
        (0, 6, S({0, 2, 6})), (1, 6, S({1, 2, 6})), (0, 6, S({0, 5, 6})), (1, 6, S({1, 5, 6})),
    }  # fmt: skip
    assert len(matches) == 6
    # Matches come out at their triggering event, latest start first within an event.
    assert [m.end for m in matches] == [4, 4, 6, 6, 6, 6]
    assert [m.start for m in matches[:2]] == [1, 0]


def test_limit_takes_latest_starts_and_consume_forgets():
    got = list(Engine(Q1, Alphabet(Q1_ATOMS), limit=1).run(core_frame()))
    assert [(m.start, m.end) for m in got] == [(1, 4), (1, 6)]
    got = list(Engine(Q1, Alphabet(Q1_ATOMS), consume="ANY").run(core_frame()))
    assert [(m.start, m.end) for m in got] == [(1, 4), (0, 4)]  # runs are forgotten after 4
    assert list(Engine(Q1, Alphabet(Q1_ATOMS), limit=0).run(core_frame())) == []


def test_windows_on_core_figure_3():
    def ends(window):
        return sorted((m.start, m.end) for m in Engine(Q1, Alphabet(Q1_ATOMS), window=window).run(core_frame()))

    assert ends(ast.EventsWindow(4)) == [(0, 4), (1, 4)]
    assert ends(ast.EventsWindow(3)) == [(1, 4)]
    assert ends(ast.EventsWindow(5)) == [(0, 4), (1, 4), (1, 6), (1, 6)]


# --------------------------------------------------------------------------- engine behaviours

AB = CEA(3, 0, frozenset({2}), (T(0, GAtom(0), {"A"}, 1), T(1, GTrue(), (), 1), T(1, GAtom(1), {"B"}, 2)))
AB_ALPHABET = (TypeTest("A"), TypeTest("B"))


def test_partitions_use_alternative_attributes_and_local_event_windows():
    events = [
        {"type": "A", "stream": "S", "k": 1}, {"type": "A", "stream": "S", "j": 2},
        {"type": "B", "stream": "S"}, {"type": "B", "stream": "S", "j": 2},
        {"type": "A", "stream": "S", "k": 2}, {"type": "B", "stream": "S", "k": 1},
    ]  # fmt: skip
    engine = Engine(AB, Alphabet(AB_ALPHABET), partition_by=(("k", "j"),), window=ast.EventsWindow(1))
    got = sorted((m.start, m.end, m.partition) for m in engine.run(events_frame(events)))
    # Event 2 has no key and is skipped; in partition 1 the pair (0, 5) is adjacent.
    assert got == [(0, 5, (1,)), (1, 3, (2,))]
    assert engine.stats.partitions == 2


def test_batches_continue_state():
    events = letters("ABAABBAB")
    frame = events_frame(events)
    whole = list(Engine(AB, Alphabet(AB_ALPHABET)).run(frame))
    engine = Engine(AB, Alphabet(AB_ALPHABET))
    parts = [m for lo in range(0, 8, 3) for m in engine.run(frame.slice(lo, 3))]
    assert parts == whole and len(whole) == 1 + 3 + 3 + 4


def test_attribute_window_skips_missing_times_and_rejects_disorder():
    events = [{"type": "A", "stream": "S", "ts": 1}, {"type": "A", "stream": "S"}, {"type": "B", "stream": "S", "ts": 2}]
    got = list(Engine(AB, Alphabet(AB_ALPHABET), window=ast.AttributeWindow(5, "ts")).run(events_frame(events)))
    assert [(m.start, m.end) for m in got] == [(0, 2)]  # event 1 has no time: it cannot start a match
    bad = events_frame([{"type": "A", "stream": "S", "ts": 3}, {"type": "B", "stream": "S", "ts": 2}])
    with pytest.raises(QueryError):
        list(Engine(AB, Alphabet(AB_ALPHABET), window=ast.AttributeWindow(5, "ts")).run(bad))


def test_attribute_window_treats_nan_times_as_missing():
    """A NaN window time can neither start nor end a match, and does not switch off the
    order check for later events (NaN compares false with everything)."""
    from tests import reference

    nan = float("nan")
    events = [{"type": "A", "stream": "S", "ts": 1.0}, {"type": "A", "stream": "S", "ts": nan},
              {"type": "B", "stream": "S", "ts": 2.0}, {"type": "B", "stream": "S", "ts": nan}]
    query = parse("SELECT * WHERE A ; B WITHIN 5 [ts]")
    engine = Engine(AB, Alphabet(AB_ALPHABET), window=query.within)
    got = list(engine.run(events_frame(events)))
    assert [(m.start, m.end) for m in got] == [(0, 2)]
    reference.assert_same_matches(got, reference.reference_matches(query, events))
    later = events_frame([{"type": "A", "stream": "S", "ts": 0.5}])  # before 2.0: disorder
    with pytest.raises(QueryError, match="ordered") as info:
        list(engine.run(later))
    # the earlier event is named, though it was in the frame before
    assert info.value.message.endswith("stream 'S', data row 0 (0-based) has ts 0.5, below 2.0"
                                       " of stream 'S', data row 2")


def test_datetime_window_attribute_is_in_nanoseconds_and_others_are_rejected():
    events = [{"type": t, "stream": "S", "at": s} for t, s in (("A", 1700000000), ("A", 1700000001), ("B", 1700000002))]
    frame = events_frame(events).with_columns(pl.from_epoch("at", time_unit="s"))
    assert frame["at"].dtype == pl.Datetime
    window = ast.AttributeWindow(1_000_000_000, "at")  # one second, in ns
    got = list(Engine(AB, Alphabet(AB_ALPHABET), window=window).run(frame))
    assert [(m.start, m.end) for m in got] == [(1, 2)]
    words = events_frame([{"type": "A", "stream": "S", "at": "noon"}])
    with pytest.raises(QueryError, match="at"):
        list(Engine(AB, Alphabet(AB_ALPHABET), window=ast.AttributeWindow(5, "at")).run(words))


def test_consume_waits_for_what_the_strategy_reports():
    """CONSUME BY forgets partial matches only when the event *reports* a match after the
    strategy. (A ; B) OR (B : D) over A C B D: at 2 the only candidate (0, 2) has a gap, so
    STRICT reports nothing and the run B started at 2 survives to report (2, 3)."""
    cea = CEA(4, 0, frozenset({3}), (
        T(0, GAtom(0), {"A"}, 1), T(1, GTrue(), (), 1), T(1, GAtom(1), {"B"}, 3),
        T(0, GAtom(1), {"B"}, 2), T(2, GAtom(2), {"D"}, 3),
    ))  # fmt: skip
    alphabet = Alphabet((TypeTest("A"), TypeTest("B"), TypeTest("D")))
    frame = events_frame(letters("ACBD"))
    for consume in ("ANY", "PARTITION"):
        engine = Engine(cea, alphabet, strategy="STRICT", consume=consume)
        assert [(m.start, m.end) for m in engine.run(frame)] == [(2, 3)]
        assert engine.stats.matches == 1
        assert Engine(cea, alphabet, strategy="STRICT", consume=consume).count(frame) == 1
    # without a strategy the candidate at 2 is reported and consumes the run from 2
    assert [(m.start, m.end) for m in Engine(cea, alphabet, consume="ANY").run(frame)] == [(0, 2)]
    assert list(Engine(cea, alphabet, limit=0, consume="ANY").run(frame)) == []


def test_strict_counts_positions_in_the_partition():
    """STRICT is gap-free within the sub-stream: other keys' events in between don't count."""
    events = [{"type": "A", "stream": "S", "k": 1}, {"type": "A", "stream": "S", "k": 2},
              {"type": "B", "stream": "S", "k": 1}, {"type": "C", "stream": "S", "k": 1},
              {"type": "B", "stream": "S", "k": 2}]
    engine = Engine(AB, Alphabet(AB_ALPHABET), strategy="STRICT", partition_by=(("k",),))
    got = [(m.start, m.end, m.partition) for m in engine.run(events_frame(events))]
    assert got == [(0, 2, (1,)), (1, 4, (2,))]
    assert engine.stats.matches == 2


def test_duration_window_uses_time_column():
    events = [{"type": t, "stream": "S", "time": s * 1_000_000_000} for t, s in (("A", 0), ("A", 50), ("B", 70))]
    window = ast.DurationWindow(((1, "minute"),))
    got = list(Engine(AB, Alphabet(AB_ALPHABET), window=window).run(events_frame(events)))
    assert [(m.start, m.end) for m in got] == [(1, 2)]


def test_from_filters_streams():
    events = letters("AB", "S1") + letters("B", "S2")
    got = list(Engine(AB, Alphabet(AB_ALPHABET), streams=("S2",)).run(events_frame(events)))
    assert got == []
    got = list(Engine(AB, Alphabet(AB_ALPHABET), streams=("S1", "S2")).run(events_frame(events)))
    assert sorted(m.end for m in got) == [1, 2]


def test_both_executors_implement_the_protocol():
    from cer_cli.engine.executor import Executor

    for text in ("SELECT * WHERE A ; B", "SELECT * WHERE A AS x ; B AS y FILTER x.id = y.id WITHIN 3 EVENTS"):
        ex = plan(parse(text)).executor()
        assert isinstance(ex, Executor)
        batches = list(ex.run_batches(events_frame(letters("ABAB")), size=1))
        assert sum(len(b) for b in batches) == ex.stats.matches


def test_describe_mentions_strategy_cost():
    text = Engine(AB, Alphabet(AB_ALPHABET), strategy="MAX", window=ast.EventsWindow(3)).describe()
    assert "MAX" in text and "O(m²·s)" in text and "3 events" in text


def test_windowed_query_over_two_million_events_keeps_nodes_bounded():
    n = 2_000_000
    frame = pl.DataFrame(
        {
            POS: pl.int_range(n, eager=True),
            TYPE: pl.Series(["A", "C", "C", "B", "C", "C", "C"]).sample(n, with_replacement=True, seed=7),
            STREAM: pl.repeat("S", n, eager=True),
            TIME: pl.int_range(n, eager=True),
        }
    )
    engine = Engine(AB, Alphabet(AB_ALPHABET), window=ast.EventsWindow(8))
    count = 0
    for lo in range(0, n, 500_000):
        count += sum(1 for _ in engine.run(frame.slice(lo, 500_000)))
    stats = engine.stats
    assert stats.events == n and count == stats.matches > 0
    assert stats.allocated_nodes > 500_000
    assert stats.compactions > 10
    assert stats.peak_live_nodes < 20_000  # bounded by the window, not by the log


# --------------------------------------------------------------------------- from query text

FIG1_TEXT = {
    "PHI1": "(T AS x ; H AS y) FILTER x.tmp > 40 AND y.hum <= 25 AND x.id = 0 AND y.id = 0",
    "PHI2": "((T AS x ; H AS y) OR (H AS y ; T AS x))"
    " FILTER x.tmp > 40 AND y.hum <= 25 AND x.id = 0 AND y.id = 0",
    "PHI3": "[H AS x ; (T AS y FILTER y.id = 1)+ ; H AS z]"
    " FILTER x.hum < 30 AND z.hum > 60 AND x.id = 1 AND z.id = 1",  # x.id = z.id = 1, unary
}


@pytest.mark.parametrize("name", ["PHI1", "PHI2", "PHI3"])
@pytest.mark.parametrize("strategy", ["ALL", "STRICT", "NEXT", "LAST", "MAX"])
def test_foundations_figure_1_from_text(name, strategy):
    query = parse(f"SELECT {strategy} * WHERE {FIG1_TEXT[name]}")
    assert positions(plan(query).run(events_frame(FIG1_EVENTS))) == FIG1_EXPECTED[name][strategy]


def test_core_q1_from_text():
    query = parse(
        "SELECT * FROM Stock WHERE SELL AS msft; SELL AS intel; SELL AS amzn"
        " FILTER msft[name = 'MSFT'] AND msft[price > 100] AND intel[name = 'INTL']"
        " AND amzn[name = 'AMZN'] AND amzn[price < 2000]"
    )
    got = list(plan(query).run(core_frame()))
    assert sorted(m.end for m in got) == [4, 4, 6, 6, 6, 6]
    assert dict(got[0].events) == {1: ("SELL", "msft"), 2: ("SELL", "intel"), 4: ("SELL", "amzn")}


def test_partition_keys_are_numbered_once_across_frames():
    """Each PARTITION BY key is numbered in Python once, when first seen; later frames look
    their keys up in the table of known keys (a join), so a slice of a log with 100,000 keys
    does not walk each key in Python. The matches are those of the whole log in one frame,
    also when a frame brings its keys with another dtype (then numbered key by key)."""
    from unittest import mock

    from cer_cli.api import compile_query
    from cer_cli.io.read import read_frame

    n, keys = 6_000, 499
    log = read_frame(pl.DataFrame({"type": ["A", "B"] * (n // 2),
                                   "k": [(i * 7) % keys for i in range(n)]}))
    frame = log.frame()
    q = "SELECT * WHERE A AS a ; B AS b PARTITION BY k WITHIN 4 EVENTS"
    plan_ = compile_query(q, schema=log.schema)
    whole = sorted((m.start, m.end, m.partition) for m in plan_.executor().run(frame))
    engine = plan_.executor()
    with mock.patch.object(Engine, "_number", autospec=True, side_effect=Engine._number) as spy:
        got = [m for i in range(0, n, 1000) for m in engine.run(frame.slice(i, 1000))]
    assert spy.call_count == keys
    assert sorted((m.start, m.end, m.partition) for m in got) == whole and len(whole) > 1000
    engine = plan_.executor()
    floats = frame.with_columns(pl.col("k").cast(pl.Float64))
    got = [*engine.run(frame.slice(0, 3000)), *engine.run(floats.slice(3000))]
    assert sorted((m.start, m.end, m.partition) for m in got) == whole
