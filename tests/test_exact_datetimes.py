"""Nanosecond datetimes (pandas writes them by default) and durations keep every digit: in
each text output and shape, and as PARTITION BY and ``--count --by`` keys. A Python ``datetime`` holds
microseconds, so before, two events 10 ns apart printed the same time wherever a value went
through Python, and two partition keys 10 ns apart were one partition (their events matched
each other). Zoned datetimes likewise: Python compares the two instants of the hour a DST
change repeats equal, so such keys were one partition, and one count.

The text rule (``io.texts.iso_text``) is also checked against Python's ``isoformat``, which
it must equal on every value Python can hold.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from itertools import product
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cer_cli
from cer_cli.io.texts import iso_text
from tests.builders import run as _cer

BASE = 1_704_067_200_000_000_000  # 2024-01-01T00:00:00 in ns
NAIVE = pl.Datetime("ns")
PARIS = pl.Datetime("ns", "Europe/Paris")


def _ns(values: list[int], dtype: pl.DataType = NAIVE) -> pl.Series:
    s = pl.Series(values, dtype=pl.Int64).cast(pl.Datetime("ns"))
    return s.dt.replace_time_zone("UTC").dt.convert_time_zone(dtype.time_zone) \
        if dtype.time_zone else s


def _log(tmp_path: Path) -> str:
    path = tmp_path / "ns.parquet"
    pl.DataFrame({
        "type": ["A", "B"],
        "ts": _ns([BASE, BASE + 10]),
        "zoned": _ns([BASE + 123_456_789, BASE + 5], PARIS),
        "lat": pl.Series([1_500, 2_000_000_001]).cast(pl.Duration("ns")),
        "v": [1, 2],
    }).write_parquet(path)
    return str(path)


#: the texts every output must show for the log of ``_log`` (the match's times are ``ts``)
TS = ["2024-01-01T00:00:00", "2024-01-01T00:00:00.000000010"]
ZONED = ["2024-01-01T01:00:00.123456789+01:00", "2024-01-01T01:00:00.000000005+01:00"]
#: nanosecond durations as seconds (a ``timedelta`` of microseconds gave 1e-06 and 2.0)
LAT = [1.5e-06, 2.000000001]


@pytest.mark.parametrize("fmt,shape", list(product(["jsonl", "csv", "table"], ["long", "wide"])))
def test_every_text_output_keeps_nanoseconds(tmp_path, fmt, shape) -> None:
    got = _cer("match", "-e", "A ; B WITHIN 1 seconds", _log(tmp_path), "--format", fmt,
               "--shape", shape, "--time-column", "ts")
    assert got.exit_code == 0, got.output
    text = got.output
    for value in TS + ZONED + [repr(x) for x in LAT]:
        assert value in text, (value, text)
    if fmt == "jsonl" and shape == "long":
        rec = json.loads(text.splitlines()[0])
        assert (rec["start_time"], rec["end_time"]) == tuple(TS)
        assert [e["attrs"]["ts"] for e in rec["events"]] == TS
        assert [e["attrs"]["zoned"] for e in rec["events"]] == ZONED
        assert [e["attrs"]["lat"] for e in rec["events"]] == LAT
    if fmt == "csv" and shape == "long":
        rows = list(csv.DictReader(io.StringIO(text)))
        assert [r["ts"] for r in rows] == TS
        assert [r["zoned"] for r in rows] == ZONED
        assert [float(r["lat"]) for r in rows] == LAT
        assert {r["end_time"] for r in rows} == {TS[1]}


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_variables_list_keeps_nanoseconds(tmp_path, fmt) -> None:
    """The wide shape's list of a ``+`` variable's values (CSV: a JSON array in a cell)."""
    got = _cer("match", "-e", "A ; B+ WITHIN 2 EVENTS", _log(tmp_path), "--format", fmt,
               "--shape", "wide", "--time-column", "ts")
    assert got.exit_code == 0, got.output
    if fmt == "jsonl":
        rec = json.loads(got.output.splitlines()[0])
    else:
        rec = next(csv.DictReader(io.StringIO(got.output)))
        rec = {k: json.loads(rec[k]) for k in ("B.ts", "B.zoned", "B.lat")}
    assert (rec["B.ts"], rec["B.zoned"], rec["B.lat"]) == ([TS[1]], [ZONED[1]], [LAT[1]])


def test_parquet_output_keeps_the_nanosecond_type(tmp_path) -> None:
    out = tmp_path / "out.parquet"
    got = _cer("match", "-e", "A ; B", _log(tmp_path), "-o", str(out))
    assert got.exit_code == 0, got.output
    back = pl.read_parquet(out)
    assert back.schema["ts"] == NAIVE
    assert back["ts"].dt.epoch("ns").to_list() == [BASE, BASE + 10]
    assert back["lat"].dt.total_nanoseconds().to_list() == [1_500, 2_000_000_001]


def test_count_by_a_nanosecond_duration(tmp_path) -> None:
    frame = pl.read_parquet(_log(tmp_path))
    got = _cer("match", "-e", "A ; B", _log(tmp_path), "--count", "--by", "B.lat",
               "--format", "jsonl")
    assert got.exit_code == 0, got.output
    assert [json.loads(x) for x in got.output.splitlines()] == [{"B.lat": LAT[1], "matches": 1}]
    counts = cer_cli.count(frame, "A ; B", by="B.lat", time_column="ts")
    assert counts.schema["B.lat"] == pl.Duration("ns")
    assert counts["B.lat"].dt.total_nanoseconds().to_list() == [2_000_000_001]


# --------------------------------------------------------------------------- keys


def _keyed(tmp_path: Path) -> tuple[str, pl.DataFrame]:
    """Two keys 10 ns apart, each with an A before a B: one match per key."""
    frame = pl.DataFrame({
        "type": ["A", "A", "B", "B", "C", "C"],
        "k": _ns([BASE, BASE + 10, BASE, BASE + 10, BASE, BASE + 10]),
        "v": [1, 2, 3, 4, 5, 6],
    })
    path = tmp_path / "keys.parquet"
    frame.write_parquet(path)
    return str(path), frame


@pytest.mark.parametrize("query", [
    "A ; B PARTITION BY [k]",                                   # the CEA kernel
    "A AS a ; B AS b FILTER a.k = b.k",                         # the join as a partition
    "A AS a ; B AS b FILTER a.v < b.v PARTITION BY [k]",        # the hash join
    "A AS a ; B AS b FILTER a.v < b.v PARTITION BY [k] WITHIN 3 EVENTS",
    "A AS a ;> B AS b FILTER b.v > a.v PARTITION BY [k] WITHIN 5 EVENTS",  # next match
    "A ; !C ; B PARTITION BY [k]",                              # absence between
    "SELECT LAST * WHERE A ; B PARTITION BY [k] WITHIN 5 EVENTS",
])
def test_keys_nanoseconds_apart_are_two_partitions(tmp_path, query) -> None:
    log, frame = _keyed(tmp_path)
    got = _cer("match", "-e", query, log, "--format", "jsonl")
    assert got.exit_code == 0, got.output
    recs = [json.loads(line) for line in got.output.splitlines()]
    assert len(recs) == 2, got.output  # not 3: A of one key with B of the other
    for rec in recs:
        keys = {e["attrs"]["k"] for e in rec["events"]}
        assert len(keys) == 1
        if rec["partition"] is not None:
            assert set(rec["partition"].values()) == keys
    assert {k for rec in recs for e in rec["events"] for k in [e["attrs"]["k"]]} == set(TS)
    assert cer_cli.count(frame, query) == 2


def test_count_by_a_nanosecond_key_counts_each_key(tmp_path) -> None:
    log, _ = _keyed(tmp_path)
    got = _cer("match", "-e", "A ; B PARTITION BY [k]", log, "--count", "--by", "k",
               "--format", "jsonl")
    assert got.exit_code == 0, got.output
    assert sorted((json.loads(x)["k"], json.loads(x)["matches"])
                  for x in got.output.splitlines()) == [(TS[0], 1), (TS[1], 1)]


# --------------------------------------------------------------------------- the rule


def _text(values: list, dtype: pl.DataType) -> list[str | None]:
    return pl.select(iso_text(pl.lit(pl.Series(values, dtype=dtype)), dtype)).to_series().to_list()


_INSTANTS = st.datetimes(dt.datetime(1678, 1, 1), dt.datetime(2261, 12, 31))
_ZONES = st.sampled_from(["UTC", "Europe/Paris", "Asia/Kolkata", "America/St_Johns",
                          "Europe/Amsterdam", "Pacific/Chatham"])


@settings(max_examples=200, deadline=None)
@given(st.lists(_INSTANTS, min_size=1, max_size=8), _ZONES, st.sampled_from(["us", "ns"]))
def test_the_rule_is_isoformat_on_what_python_holds(values, zone, unit) -> None:
    """Naive values and dates: ``isoformat``'s text. Zoned ones: the same instant, on the
    clock of polars' time-zone database and with its offset, written as ``isoformat`` writes
    one (Python's database may name another offset for a zone's history)."""
    naive = pl.Datetime(unit)
    assert _text(values, naive) == [v.isoformat() for v in values]
    dates = [v.date() for v in values]
    assert _text(dates, pl.Date) == [d.isoformat() for d in dates]
    zoned = pl.Datetime(unit, zone)
    series = pl.Series(values, dtype=naive).dt.replace_time_zone("UTC").dt.convert_time_zone(zone)
    texts = pl.select(iso_text(pl.lit(series), zoned)).to_series().to_list()
    clocks = series.dt.replace_time_zone(None).to_list()
    for text, value, clock in zip(texts, values, clocks, strict=True):
        back = dt.datetime.fromisoformat(text)
        assert back.astimezone(dt.UTC).replace(tzinfo=None) == value  # the instant
        assert back.replace(tzinfo=None) == clock
        assert text == back.isoformat()  # written as isoformat writes it


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**63) + 1, 2**63 - 1))
def test_the_rule_adds_nanoseconds_to_isoformat(ns) -> None:
    (text,) = pl.select(iso_text(pl.lit(pl.Series([ns]).cast(NAIVE)), NAIVE)).to_series().to_list()
    micro, rest = divmod(ns, 1000)
    as_python = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micro)
    if rest == 0:
        assert text == as_python.isoformat()
    else:
        seconds = as_python.replace(microsecond=0).isoformat()
        assert text == f"{seconds}.{as_python.microsecond * 1000 + rest:09d}"


# --------------------------------------------------------------------------- DST


def _folded(tmp_path: Path) -> tuple[str, pl.DataFrame]:
    """Keys at the two instants that Europe/Paris shows as 02:30 on 2024-10-27 (CEST, then
    CET), each with an A then a B; ``t`` orders the events."""
    first = 1_729_989_000_000_000  # 2024-10-27T00:30:00Z in us: 02:30 CEST
    k = pl.Series([first, first + 3_600_000_000] * 2).cast(pl.Datetime("us")) \
        .dt.replace_time_zone("UTC").dt.convert_time_zone("Europe/Paris")
    frame = pl.DataFrame({"type": ["A", "A", "B", "B"], "t": [0, 1, 2, 3], "k": k})
    path = tmp_path / "fold.parquet"
    frame.write_parquet(path)
    return str(path), frame


FOLDED = ["2024-10-27T02:30:00+02:00", "2024-10-27T02:30:00+01:00"]


@pytest.mark.parametrize("query", [
    "A ; B PARTITION BY [k] WITHIN 5 [t]",
    "A AS a ; B AS b FILTER a.k = b.k WITHIN 5 [t]",
    "A AS a ; B AS b FILTER a.t < b.t PARTITION BY [k] WITHIN 5 [t]",
])
def test_keys_a_dst_change_apart_are_two_partitions(tmp_path, query) -> None:
    log, frame = _folded(tmp_path)
    got = _cer("match", "-e", query, log, "--format", "jsonl", "--time-column", "t")
    assert got.exit_code == 0, got.output
    recs = [json.loads(line) for line in got.output.splitlines()]
    assert sorted([e["attrs"]["k"] for e in r["events"]] for r in recs) == sorted(
        [[k, k] for k in FOLDED])
    assert cer_cli.count(frame, query, time_column="t") == 2


def test_count_by_a_zoned_value_counts_each_instant(tmp_path) -> None:
    log, frame = _folded(tmp_path)
    got = _cer("match", "-e", "A ; B WITHIN 5 [t]", log, "--count", "--by", "A.k",
               "--format", "jsonl", "--time-column", "t")
    assert got.exit_code == 0, got.output
    # each A with each B: two matches per instant (ties in the order of their text)
    assert [json.loads(x) for x in got.output.splitlines()] == [
        {"A.k": FOLDED[1], "matches": 2}, {"A.k": FOLDED[0], "matches": 2}]
    counts = cer_cli.count(frame, "A ; B WITHIN 5 [t]", by="A.k", time_column="t")
    assert counts.schema["A.k"] == frame.schema["k"]  # the column's type, not text
    assert counts["A.k"].dt.epoch("us").to_list() == frame["k"][1::-1].dt.epoch("us").to_list()
    assert counts["matches"].to_list() == [2, 2]
