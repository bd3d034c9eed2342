"""Hand-checked answers at the edges of the semantics (strategies, windows, NOT, +), each through the product
(``plan(query).run``) and through the independent reference evaluator."""

from __future__ import annotations

import json

import polars as pl
import pytest

from cer_cli.plan import plan
from cer_cli.query.parser import parse
from tests import reference
from tests.builders import events_frame
from tests.builders import run as _cer


def reported(text: str, events: list[dict]) -> tuple[list, list]:
    """Reported positions of each match: (engine, reference), sorted."""
    query = parse(text)
    got = sorted(tuple(p for p, _ in m.events) for m in plan(query).run(events_frame(events)))
    want = sorted(tuple(p for p, _ in m.events) for m in reference.reference_matches(query, events))
    return got, want


A12 = [{"type": "A", "v": 1}, {"type": "A", "v": 2}]
B3a0a = [{"type": "B", "v": 3, "s": "a"}, {"type": "B", "v": 0, "s": "a"}]
C3B = [{"type": "C", "v": 3}, {"type": "B", "v": -1}]


@pytest.mark.parametrize("text, events, answer", [
    # f1 OR f2 is the union of the two filtered formulas: each x[...] holds for every x event.
    ("(A AS x)+ FILTER x[v > 1] OR x[v < 2]", A12, [(0,), (1,)]),
    ("(A AS x)+ FILTER x.v > 1 OR x.v < 2", A12, [(0,), (1,)]),
    # one x[...] group is one atom, tested per event
    ("(A AS x)+ FILTER x[v > 1 OR v < 2]", A12, [(0,), (0, 1), (1,)]),
    ("((B ; B) AS y) FILTER (y.v > 2 OR (y.s = 'a' AND y.v <= 2))", B3a0a, []),
    ("((B ; B) AS y) FILTER y[v > 2 OR (s = 'a' AND v <= 2)]", B3a0a, [(0, 1)]),
    # a constant conjunct is a filter of its own: adding a conjunct never creates a match
    ("(B OR C) FILTER (C.v < 3 AND FALSE)", C3B, []),
    ("(B OR C) FILTER (C.v < 3 AND 1 = 2)", C3B, []),
    ("(B OR C) FILTER NOT (C.v < 3 OR TRUE)", C3B, []),
    ("(B OR C) FILTER (C.v < 3 OR 1 = 1)", C3B, [(0,), (1,)]),
    ("(B OR C) FILTER C.v < 3", C3B, [(1,)]),
    # NOT x[p] is x[NOT p]: every event of x fails p (an empty x passes)
    ("(A AS x)+ FILTER NOT x[v > 1]", A12, [(0,)]),
    ("(A AS x)+ FILTER NOT x[v > 1 AND v < 2]", A12, [(0,), (0, 1), (1,)]),
    ("(A AS x)+ FILTER NOT (x.v > 1 AND x.v < 5)", A12, [(0,)]),
])
def test_filter_atoms_hand_checked(text, events, answer):
    got, want = reported("SELECT * WHERE " + text, events)
    assert want == answer, "the reference disagrees with the hand-checked answer"
    assert got == answer


def test_output_order_is_by_last_event_and_limit_keeps_latest_starts():
    # README: matches come in the order of their last event; among those ending at one event
    # the order is unspecified (the engine gives starts 1, 0, 1, 0 here); LIMIT keeps the
    # latest starts. Hand-checked on C C A A C (A C): [1,4] and [0,4], each through A@2 and A@3.
    from tests.builders import letters

    events = letters("CCAACAC")
    got = list(plan(parse("SELECT * WHERE C ; A ; C")).run(events_frame(events)))
    ends = [m.end for m in got]
    assert ends == sorted(ends)
    assert sorted((m.start, m.end) for m in got if m.end == 4) == [(0, 4), (0, 4), (1, 4), (1, 4)]
    limited = list(plan(parse("SELECT * WHERE C ; A ; C LIMIT 2")).run(events_frame(events)))
    # at 6: one match starts at 4 (C4 A5 C6), the next latest start is 1 (ties: any one)
    assert sorted((m.start, m.end) for m in limited) == [(1, 4), (1, 4), (1, 6), (4, 6)]


@pytest.fixture
def iso_log(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("type,ts,v\nA,2024-05-01T08:00:00Z,1\nB,2024-05-01T08:10:00Z,2\n"
                    "B,2024-05-01T08:01:00Z,3\n")
    return str(path)


@pytest.mark.parametrize("literal, rows", [
    ("'2024-05-01T08:05:00Z'", [1]),       # only the B at 08:10 is later
    ("'2024-05-01T10:05:00+02:00'", [1]),  # the same instant, written with an offset
    ("'2024-05-01T08:00:30'", [2, 1]),     # no offset: UTC, as in the logs (by time)
])
def test_iso_string_against_datetime_attribute_is_a_datetime(iso_log, literal, rows):
    result = _cer("match", "-e", f"A ; B AS v FILTER v[ts > {literal}]", iso_log)
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["events"][1]["row"] for line in result.stdout.splitlines()] == rows


@pytest.mark.parametrize("text, message", [
    ("A ; B AS v FILTER v[ts > 5]", "cannot compare v.ts (a datetime) with 5 (a number)"),
    ("A ; B AS v FILTER v[ts > 'yesterday']", "not an ISO 8601 date-time"),
    ("A AS a ; B AS v FILTER v.ts - a.ts > 5", "needs numbers"),  # durations: not supported
])
def test_datetime_type_errors_at_check_time(iso_log, text, message):
    result = _cer("check", "-e", text, iso_log)
    assert result.exit_code == 2
    assert message in result.output and ":1:" in result.output


def test_integer_arithmetic_is_exact_not_wrapped(tmp_path):
    # x.v * 2**62 with v = 2 is 2**63: positive, though int64 wraps it to -2**63
    log = tmp_path / "log.csv"
    log.write_text("type,v\nA,2\nB,0\nA,-3\n")
    result = _cer("match", "-e", "A AS x ; B FILTER x.v * 4611686018427387904 > 0", str(log))
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["start"] for line in result.stdout.splitlines()] == [0]
    result = _cer("match", "-e", "A FILTER -A.v > 9223372036854775807 - 9223372036854775807 + 2",
                  str(log))
    assert [json.loads(line)["start"] for line in result.stdout.splitlines()] == [2]


@pytest.mark.parametrize("text, message", [
    ("A FILTER A.v > 999999999999999999999999999999999999999", "integer too large"),
    ("A WITHIN 99999999999999999999 EVENTS", "the largest window"),
    ("A ; A WITHIN 99999999999999999999 [v]", "the largest window"),
    ("A LIMIT 99999999999999999999", "is above"),
    ("A LIMIT 9223372036854775807", "LIMIT 9223372036854775807 is above"),
    ("A ; A WITHIN 9223372036854775807 hours", "longer than 292 years"),
    ("A FILTER A.v * A.v * A.v > 0", "may exceed 128 bits"),
])
def test_numbers_beyond_their_range_are_refused(tmp_path, text, message):
    log = tmp_path / "log.csv"
    log.write_text("type,v\nA,2\n")
    result = _cer("match", "-e", text, str(log))
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_partition_by_sql_form_is_a_composite_key():
    # A(1,1) A(1,2) B(1,1): by (user_id, item_id) only A0..B2 share a key; by [user_id, item_id]
    # (alternatives, CORE) the key is user_id and both A's pair with B.
    events = [{"type": "A", "user_id": 1, "item_id": 1}, {"type": "A", "user_id": 1, "item_id": 2},
              {"type": "B", "user_id": 1, "item_id": 1}]
    composite = parse("A ; B PARTITION BY user_id, item_id")
    assert composite.partition_by == (("user_id",), ("item_id",))
    assert composite == parse("A ; B PARTITION BY [user_id], [item_id]")
    got = sorted(m.start for m in plan(composite).run(events_frame(events)))
    assert got == [0]
    alternatives = parse("A ; B PARTITION BY [user_id, item_id]")
    assert sorted(m.start for m in plan(alternatives).run(events_frame(events))) == [0, 1]


NAN_KEYS = [{"type": "A", "k": 0.0, "j": 7}, {"type": "B", "k": -0.0, "j": 8},
            {"type": "A", "k": float("nan"), "j": 5}, {"type": "B", "k": float("nan"), "j": 5},
            {"type": "A", "k": 1.0, "j": 1}, {"type": "B", "k": float("nan"), "j": 1}]


@pytest.mark.parametrize("text, want", [
    # the equality's rewrite into PARTITION BY [k]: NaN = NaN is false, 0.0 = -0.0 true
    ("A AS a ; B AS b FILTER a.k = b.k", [(0, 1)]),
    ("A ; B PARTITION BY [k]", [(0, 1)]),
    # a NaN key is missing: the group's next name gives the key (j = 5; 1.0 and 1 are equal)
    ("A ; B PARTITION BY [k, j]", [(0, 1), (2, 3), (4, 5)]),
    ("A ; B PARTITION BY k, j", []),
])
def test_a_nan_partition_key_is_no_key(tmp_path, text, want):
    """NaN is no value, so a NaN key is missing: an event with one is in no partition (the
    equality a.k = b.k it came from is false for it). It once made a partition of its own,
    so the rewrite of a.k = b.k paired NaN with NaN, and Spark, whose dropna drops NaN,
    found fewer matches than the local run."""
    query = parse(text)
    got = sorted((m.start, m.end) for m in plan(query).run(events_frame(NAN_KEYS)))
    assert got == want
    assert got == sorted((m.start, m.end) for m in reference.reference_matches(query, NAN_KEYS))
    log = tmp_path / "log.parquet"
    pl.DataFrame(NAN_KEYS).write_parquet(log)
    for jobs in ("1", "2"):
        result = _cer("match", "-e", text, str(log), "--count", "--jobs", jobs)
        assert result.exit_code == 0, result.output
        assert result.output.splitlines()[-1] == str(len(want))


def test_bracket_group_of_names_every_type_has_warns():
    from cer_cli.events import Schema
    from cer_cli.query.checks import check_query

    schema = Schema({"A": {"user_id": "int", "item_id": "int"}, "B": {"user_id": "int", "item_id": "int"}})
    report = check_query(parse("A ; B PARTITION BY [user_id, item_id]"), schema)
    assert any("did you mean a composite key" in w for w, _ in report.warnings)
    # not "'user_id' only": where user_id is null or NaN the next name is the key
    assert any("partitions by 'user_id' wherever it has a value" in w
               and "read only where 'user_id' is empty or NaN" in w
               for w, _ in report.warnings)
    for text in ("A ; B PARTITION BY user_id, item_id", "A ; B PARTITION BY [user_id]"):
        assert not any("composite" in w for w, _ in check_query(parse(text), schema).warnings)
    # a wide log: every column is an attribute of every type, but A's user_id is all null
    wide = Schema(schema.event_types, empty={"A": frozenset({"user_id"})})
    report = check_query(parse("A ; B PARTITION BY [user_id, item_id]"), wide)
    assert not any("composite" in w for w, _ in report.warnings)


def test_stream_qualified_labels_in_filters_filter_that_streams_events():
    # CORE: BUY from S1 must be MSFT, BUY from S2 must be INTL; hand-checked: positions 0 and 2
    text = "SELECT * FROM S1, S2 WHERE BUY FILTER S1>BUY[name='MSFT'] AND S2>BUY[name='INTL']"
    events = [{"type": "BUY", "stream": s, "name": n}
              for s, n in [("S1", "MSFT"), ("S1", "INTL"), ("S2", "INTL"), ("S2", "MSFT")]]
    got = sorted(m.start for m in plan(parse(text)).run(events_frame(events)))
    assert got == [0, 2]
    assert sorted(m.start for m in reference.reference_matches(parse(text), events)) == [0, 2]
    result = _cer("check", "-e", text)
    assert result.exit_code == 0, result.output
