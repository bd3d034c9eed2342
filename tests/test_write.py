"""Writing matches: JSONL keys, long CSV/Parquet, atomic files, the table, the lookup window."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from cer_cli.events import POS, Match
from cer_cli.io.files import OutputError, open_output
from cer_cli.io.read import LogError, read_events
from cer_cli.io.write import EventLookup, render_table, write_matches

MATCHES = [
    Match(1, 2, ((1, ("T", "x")), (2, ("y",)))),
    Match(1, 8, ((1, ("x",)), (8, ("y",))), partition=(0,)),
]


@pytest.fixture
def lookup(tmp_path: Path) -> EventLookup:
    rows = ["H,2,,25", "T,0,45,", "H,0,,20", "H,1,,25", "T,1,40,", "T,0,42,", "T,1,25,"]
    rows += ["H,1,,70", "H,0,,18"]
    path = tmp_path / "fig1.csv"
    path.write_text("type,id,tmp,hum\n" + "\n".join(rows) + "\n")
    log = read_events([str(path)])
    lk = EventLookup.for_log(log)
    list(lk.tap(log.batches()))
    return lk


def test_jsonl_exact_keys(lookup: EventLookup) -> None:
    out = io.StringIO()
    assert write_matches(MATCHES, lookup, "jsonl", stdout=out, partition_names=["id"]) == 2
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert list(first) == [
        "match", "start", "end", "start_time", "end_time", "partition", "events",
    ]  # fmt: skip
    assert (first["match"], first["start"], first["end"]) == (0, 1, 2)
    assert first["start_time"] is None and first["partition"] is None
    assert first["events"][0] == {
        "position": 1,
        "stream": "fig1",
        "row": 1,
        "type": "T",
        "vars": ["T", "x"],
        "attrs": {"id": 0, "tmp": 45, "hum": None},
    }
    assert second["match"] == 1 and second["partition"] == {"id": 0}


def test_jsonl_times_are_iso(tmp_path: Path) -> None:
    path = tmp_path / "l.csv"
    path.write_text("type,ts\nA,2024-01-01 10:00:00\nB,2024-01-01 10:00:05\n")
    log = read_events([str(path)])
    lk = EventLookup.for_log(log)
    list(lk.tap(log.batches()))
    out = io.StringIO()
    write_matches([Match(0, 1, ((0, ("A",)), (1, ("B",))))], lk, "jsonl", stdout=out)
    rec = json.loads(out.getvalue())
    assert rec["start_time"] == "2024-01-01T10:00:00"
    assert rec["end_time"] == "2024-01-01T10:00:05"
    assert rec["events"][1]["attrs"] == {"ts": "2024-01-01T10:00:05"}


def test_csv_long_format_reads_back(tmp_path: Path, lookup: EventLookup) -> None:
    target = tmp_path / "out.csv"
    assert write_matches(MATCHES, lookup, "csv", target) == 4
    back = pl.read_csv(target)
    assert back.columns == [
        "match", "start", "end", "position", "stream", "row", "type", "vars",
        "start_time", "end_time", "partition", "id", "tmp", "hum",
    ]  # fmt: skip
    assert back["vars"].to_list() == ["T|x", "y", "x", "y"]
    assert back["position"].to_list() == [1, 2, 1, 8]
    assert back["match"].to_list() == [0, 0, 1, 1]


def test_csv_batches_write_one_header(lookup: EventLookup) -> None:
    from cer_cli.io.write import write_csv

    out = io.StringIO()
    assert write_csv(MATCHES * 3, lookup, out, buffer_rows=3) == 12
    assert pl.read_csv(io.StringIO(out.getvalue())).height == 12


def test_parquet_long_format_reads_back(tmp_path: Path, lookup: EventLookup) -> None:
    target = tmp_path / "out.parquet"
    write_matches(MATCHES, lookup, "parquet", target)
    back = pl.read_parquet(target)
    assert back["vars"].to_list() == [["T", "x"], ["y"], ["x"], ["y"]]
    assert back["tmp"].to_list() == [45, None, 45, None]


def test_parquet_row_groups_are_large_whatever_the_batches(tmp_path: Path, lookup) -> None:
    """A Parquet writer keeps each row group's metadata until the footer: batches of 3 rows
    must not become row groups of 3 rows (memory would grow with the output)."""
    import pyarrow.parquet as pq

    from cer_cli.io.write import write_parquet

    target = tmp_path / "out.parquet"
    assert write_parquet(MATCHES * 30, lookup, target, buffer_rows=3) == 120
    meta = pq.ParquetFile(target).metadata
    assert (meta.num_rows, meta.num_row_groups) == (120, 1)


def test_empty_outputs_have_headers(tmp_path: Path, lookup: EventLookup) -> None:
    write_matches([], lookup, "parquet", tmp_path / "e.parquet")
    assert pl.read_parquet(tmp_path / "e.parquet").columns[:3] == ["match", "start", "end"]
    write_matches([], lookup, "csv", tmp_path / "e.csv")
    assert pl.read_csv(tmp_path / "e.csv").columns[-1] == "hum"


def _failing(exc: BaseException) -> Iterator[Match]:
    yield MATCHES[0]
    raise exc


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
@pytest.mark.parametrize("exc", [RuntimeError("engine failed"), KeyboardInterrupt(), MemoryError()])
def test_interrupted_write_leaves_nothing(tmp_path: Path, lookup, fmt, exc) -> None:
    target = tmp_path / f"out.{fmt}"
    with pytest.raises(type(exc)):
        write_matches(
            _failing(exc),
            lookup,
            fmt,
            target,
        )
    assert list(tmp_path.iterdir()) == [tmp_path / "fig1.csv"]


def test_interrupted_write_keeps_existing_file(tmp_path: Path, lookup) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("previous\n")
    with pytest.raises(RuntimeError):
        write_matches(_failing(RuntimeError("x")), lookup, "jsonl", target)
    assert target.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig1.csv", "out.jsonl"]


def test_open_output_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="does not exist"):
        with open_output(tmp_path / "no" / "out.csv"):
            pass


def test_parquet_needs_a_file_and_unknown_format(lookup: EventLookup) -> None:
    with pytest.raises(LogError, match="needs a file"):
        write_matches(MATCHES, lookup, "parquet", None)
    with pytest.raises(LogError, match="unknown output format"):
        write_matches(MATCHES, lookup, "xml", None)


def test_table_renders_matches_and_summary(lookup: EventLookup) -> None:
    console = Console(record=True, width=100)
    assert render_table(iter(MATCHES), lookup, console, partition_names=["id"]) == 2
    text = console.export_text()
    assert "match 0" in text and "positions 1..8" in text and "id=0" in text
    assert "tmp=45" in text and "T,x" in text
    assert "2 matches · 9 events read" in text and "events/s" in text


def test_lookup_window_drops_old_frames(tmp_path: Path) -> None:
    pl.DataFrame({"type": ["A"] * 100, "ts": list(range(100))}).write_parquet(
        tmp_path / "l.parquet"
    )
    log = read_events([str(tmp_path / "l.parquet")], batch_size=10)
    lk = EventLookup.for_log(log, window=20)
    for frame in lk.tap(log.batches()):
        last = frame["__cer_pos"][-1]
        assert lk.get(last).row == last
        assert lk.get(max(0, last - 25)).position == max(0, last - 25)
    assert lk.n_seen == 100
    with pytest.raises(LogError, match="older than the 20 events"):
        lk.get(0)
    with pytest.raises(LogError, match="no event at position 100"):
        lk.get(100)


def test_lookup_time_horizon_keeps_exactly_what_a_time_window_can_reach(tmp_path: Path) -> None:
    # times 0, 3, 6, ...: a window of 20 time units reaches back 7 events at most
    pl.DataFrame({"type": ["A"] * 100, "ts": [3 * i for i in range(100)]}).write_parquet(
        tmp_path / "l.parquet"
    )
    log = read_events([str(tmp_path / "l.parquet")], batch_size=10)
    lk = EventLookup.for_log(log, horizon=("__cer_time", 20))
    for frame in lk.tap(log.batches()):
        first = frame["__cer_pos"][0]
        for back in range(0, 8):  # every event within 20 time units of the frame's first one
            if first - back >= 0:
                assert lk.get(first - back).position == first - back
        assert len(lk._frames) <= 2, "frames beyond the horizon are dropped"
    with pytest.raises(LogError):
        lk.get(0)


# --------------------------------------------------------------------------- column-wise


def _expected_long_rows(matches: list[Match], lookup: EventLookup) -> list[dict]:
    """The long format, one ``lookup.get`` per event (the definition the writers follow)."""
    rows = []
    for n, m in enumerate(matches):
        part = None if m.partition is None else json.dumps(
            {f"key{i}": v for i, v in enumerate(m.partition)})
        for position, variables in m.events:
            ev = lookup.get(position)
            rows.append({"match": n, "start": m.start, "end": m.end, "position": position,
                         "stream": ev.stream, "row": ev.row, "type": ev.type,
                         "vars": list(variables), "start_time": lookup.time_of(m.start),
                         "end_time": lookup.time_of(m.end), "partition": part, **ev.attrs})
        if not m.events:  # a match without reported events: one row, event columns null
            rows.append({"match": n, "start": m.start, "end": m.end, "position": None,
                         "stream": None, "row": None, "type": None, "vars": None,
                         "start_time": lookup.time_of(m.start), "end_time": lookup.time_of(m.end),
                         "partition": part, **dict.fromkeys(lookup.columns)})
    return rows


@st.composite
def _matches_over(draw, n_events: int) -> list[Match]:
    out = []
    for _ in range(draw(st.integers(0, 6))):
        positions = sorted(draw(st.sets(st.integers(0, n_events - 1), min_size=1, max_size=4)))
        labels = [tuple(sorted(draw(st.sets(st.sampled_from("xyz"), max_size=2)))) for _ in positions]
        part = draw(st.sampled_from([None, (0,), ("a", 1)]))
        events = tuple(zip(positions, labels, strict=True))
        if draw(st.integers(0, 3)) == 0:  # SELECT NONE, NOT(E): an interval, no event
            events = ()
        out.append(Match(positions[0], positions[-1], events, part))
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 7), _matches_over(23), st.integers(1, 4))
def test_columnar_long_format_equals_the_per_event_definition(batch_size, matches, cut) -> None:
    """Parquet and CSV built column-wise from MatchBatches (gathered from several frames,
    matches spread over several batches) equal the rows defined event by event."""
    import tempfile

    from cer_cli.events import batch_of

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "l.csv"
        path.write_text("type,v,w\n" + "\n".join(
            f"{'AB'[i % 2]},{i},{'' if i % 5 == 0 else i * 0.5}" for i in range(23)) + "\n")
        log = read_events([str(path)], batch_size=batch_size)
        lk = EventLookup.for_log(log)
        list(lk.tap(log.batches()))
        batches = [batch_of(matches[i:i + cut]) for i in range(0, len(matches), cut)]
        expected = _expected_long_rows(matches, lk)
        out = Path(d) / "out.parquet"
        write_matches(iter(batches), lk, "parquet", out)
        assert pl.read_parquet(out).to_dicts() == expected
        buf = io.StringIO()
        write_matches(iter(batches), lk, "csv", stdout=buf)
        got = pl.read_csv(io.StringIO(buf.getvalue()), schema_overrides={"vars": pl.String})
        assert got.height == len(expected)
        assert got["vars"].fill_null("").to_list() == ["|".join(r["vars"] or ()) for r in expected]
        assert got["position"].to_list() == [r["position"] for r in expected]


def test_columnar_output_names_positions_outside_the_lookup(tmp_path: Path) -> None:
    from cer_cli.events import batch_of

    pl.DataFrame({"type": ["A"] * 100, "ts": list(range(100))}).write_parquet(tmp_path / "l.parquet")
    log = read_events([str(tmp_path / "l.parquet")], batch_size=10)
    lk = EventLookup.for_log(log, window=20)
    list(lk.tap(log.batches()))
    old = batch_of([Match(0, 99, ((0, ("x",)), (99, ("y",))))])
    with pytest.raises(LogError, match="older than the 20 events"):
        write_matches(iter([old]), lk, "parquet", tmp_path / "o.parquet")
    unread = batch_of([Match(99, 120, ((99, ("x",)), (120, ("y",))))])
    with pytest.raises(LogError, match="no event at position 120"):
        write_matches(iter([unread]), lk, "parquet", tmp_path / "o.parquet")
    assert not (tmp_path / "o.parquet").exists()


# --------------------------------------------------------------------------- JSONL column-wise


def _tricky_lookup(tmp_path: Path) -> EventLookup:
    import datetime as dt

    frame = pl.DataFrame(
        {
            "type": ["A", "B", "A", "B"],
            "ts": [dt.datetime(2024, 1, 1, 10, 0, 0), dt.datetime(2024, 1, 1, 10, 0, 0, 5),
                   dt.datetime(2024, 1, 2), dt.datetime(2024, 1, 3, 1, 2, 3)],
            "f": [1e16, 1e-7, float("nan"), None],
            "g": [float("inf"), -0.0, 127.0, 0.1],
            "s": ['q"uo\\te\n\t\x01', "héllo ✓ 𝄞", None, "/</script>\u2028"],
            "b": [True, False, None, True],
            "i": [None, -5, 2**62, 0],
            "l": [[1, 2], None, [], [3]],
            "d": [dt.date(2024, 1, 1), None, dt.date(1999, 12, 31), dt.date(2024, 2, 29)],
            "old": [dt.datetime(999, 1, 1), None, dt.datetime(2020, 5, 5, 0, 0, 0, 1), None],
            "u8": pl.Series([0, 255, None, 7], dtype=pl.UInt8),
            "f32": pl.Series([0.1, 3.3, None, 1e-6], dtype=pl.Float32),
            "dur": [dt.timedelta(seconds=1.5), None, dt.timedelta(days=-1), dt.timedelta(0)],
            "cat": pl.Series(["a", "b", None, "a"], dtype=pl.Categorical),
            "st": [{"a": 1, "b": "x"}, None, {"a": None, "b": "y"}, {"a": 2, "b": None}],
        }
    ).with_columns(
        tz=pl.col("ts").dt.replace_time_zone("UTC"),
        ns=pl.col("ts").cast(pl.Datetime("ns")) + pl.duration(nanoseconds=7),
        dec=pl.Series([1.25, None, -3.5, 0.0]).cast(pl.Decimal(10, 2)),
    )
    frame.write_parquet(tmp_path / "tricky.parquet")
    log = read_events([str(tmp_path / "tricky.parquet")], times="ts")
    lk = EventLookup.for_log(log)
    list(lk.tap(log.batches()))
    return lk


def test_jsonl_batches_write_exactly_what_matches_do(tmp_path: Path) -> None:
    """The column-wise JSONL of a MatchBatch is byte for byte the per-match JSON."""
    from cer_cli.events import batch_of

    lk = _tricky_lookup(tmp_path)
    matches = [
        Match(0, 3, ((0, ("A", "x")), (1, ("B",)), (3, ("B", "y"))), partition=("k", 1)),
        Match(1, 2, ((1, ("B",)), (2, ("A", "é")))),
        Match(2, 2, ((2, ("A",)),), partition=(None,)),
        Match(0, 2, ()),  # reports no event (SELECT NONE, NOT(E)): "events": []
        Match(3, 3, (), partition=("k", 2)),
        Match(1, 3, ((3, ("y",)),)),
        Match(0, 1, ()),
    ]
    per_match, column_wise = io.StringIO(), io.StringIO()
    write_matches(matches, lk, "jsonl", stdout=per_match, partition_names=["p", "q"])
    # the third batch reports no event at all; the last mixes matches with and without
    batches = [batch_of(matches[:1]), batch_of(matches[1:3]), batch_of(matches[3:5]),
               batch_of(matches[5:])]
    n = write_matches(batches, lk, "jsonl", stdout=column_wise, partition_names=["p", "q"])
    assert n == 7
    assert column_wise.getvalue() == per_match.getvalue()
    assert [json.loads(x)["events"] for x in per_match.getvalue().split("\n")[:-1]][3:5] == [[], []]


def test_jsonl_of_a_batch_does_not_build_a_dict_per_event(tmp_path: Path, monkeypatch) -> None:
    """MatchBatches never go through the per-match record (the slow path: 14x Parquet)."""
    from cer_cli.events import batch_of
    from cer_cli.io import write

    lk = _tricky_lookup(tmp_path)
    monkeypatch.setattr(write, "match_record", lambda *a, **k: pytest.fail("per-match path"))
    batch = batch_of([Match(i, i, ((i, ("A",)),)) for i in range(4)])
    assert write_matches([batch], lk, "jsonl", stdout=io.StringIO()) == 4


def test_lookup_add_reads_the_schema_once_per_frame(monkeypatch) -> None:
    """EventLookup.add was O(columns^2): ``frame.schema`` per column (10,000 columns: 300 s)."""
    calls = 0
    real = pl.DataFrame.schema

    def counting(self):
        nonlocal calls
        calls += 1
        return real.fget(self)

    frame = pl.DataFrame({POS: [0, 1], **{f"c{i}": [1, 2] for i in range(300)}})
    lk = EventLookup(tuple(f"c{i}" for i in range(300)))
    monkeypatch.setattr(pl.DataFrame, "schema", property(counting))
    lk.add(frame)
    assert calls <= 3 and len(lk.dtypes) == 300


# --------------------------------------------------------------------------- output rules


def test_match_times_are_each_events_own_time(tmp_path: Path) -> None:
    """Logs whose time columns have different names: ``start_time``/``end_time`` are the time
    of the match's first and last event, each read from its own log's time column, in every
    format and shape (the writers looked up the first log's column for every event, so a
    match ending in the second log had ``end_time`` null)."""
    from cer_cli.events import batch_of
    from cer_cli.io.contract import TimeOptions

    (tmp_path / "a.csv").write_text("type,ts,v\nA,2024-01-01T10:00:00,1\n")
    (tmp_path / "b.csv").write_text("type,when,w\nB,2024-01-01T10:05:00.5,2\n")
    log = read_events([str(tmp_path / "a.csv"), str(tmp_path / "b.csv")],
                      times=TimeOptions(column=("a=ts", "b=when")))
    lk = EventLookup.for_log(log)
    list(lk.tap(log.batches()))
    matches = [Match(0, 1, ((0, ("A",)), (1, ("B",))))]
    want = ["2024-01-01T10:00:00", "2024-01-01T10:05:00.500000"]
    for shown in (matches, [batch_of(matches)]):  # per match and column-wise
        out = io.StringIO()
        write_matches(shown, lk, "jsonl", stdout=out)
        assert [json.loads(out.getvalue())[k] for k in ("start_time", "end_time")] == want
    for shape in ("long", "wide"):
        out = io.StringIO()
        write_matches(matches, lk, "csv", stdout=out, shape=shape)
        back = pl.read_csv(io.StringIO(out.getvalue()), infer_schema=False)
        assert back.select("start_time", "end_time").unique().rows() == [tuple(want)]
        write_matches(matches, lk, "parquet", tmp_path / f"{shape}.parquet", shape=shape)
        back = pl.read_parquet(tmp_path / f"{shape}.parquet")
        assert [v.isoformat() for v in back.select("start_time", "end_time").row(0)] == want


def test_jsonl_writes_decimals_with_their_exact_digits(tmp_path: Path) -> None:
    """A decimal is a JSON number with its own digits (it was a float: a long decimal lost
    digits), per match and column-wise alike, in attributes and partition keys."""
    from decimal import Decimal

    from cer_cli.events import batch_of

    long = Decimal("12345678901234567.123456789012345678")
    frame = pl.DataFrame({"type": ["A", "B"], "ts": [1, 2],
                          "d": pl.Series([long, Decimal("0.000000100")], dtype=pl.Decimal(38, 18))})
    frame.write_parquet(tmp_path / "d.parquet")
    log = read_events([str(tmp_path / "d.parquet")], times="ts")
    lk = EventLookup.for_log(log)
    list(lk.tap(log.batches()))
    matches = [Match(0, 1, ((0, ("A",)), (1, ("B",))), partition=(long,))]
    texts = []
    for shown in (matches, [batch_of(matches)]):
        out = io.StringIO()
        write_matches(shown, lk, "jsonl", stdout=out, partition_names=["d"])
        texts.append(out.getvalue())
    assert texts[0] == texts[1]
    assert '"attrs": {"ts": 1, "d": 12345678901234567.123456789012345678}' in texts[0]
    assert '"d": 0.000000100000000000}' in texts[0]
    rec = json.loads(texts[0], parse_float=Decimal)
    assert rec["partition"] == {"d": long} and rec["events"][0]["attrs"]["d"] == long
    wide = io.StringIO()
    write_matches(matches, lk, "jsonl", stdout=wide, shape="wide", partition_names=["d"])
    assert json.loads(wide.getvalue(), parse_float=Decimal)["partition"] == {"d": long}


def test_csv_writes_durations_as_jsonl_does_and_names_what_it_refuses(tmp_path: Path) -> None:
    """A duration column is written in CSV as JSONL writes it (seconds); it was an internal
    error ("datatype duration cannot be written to CSV"). A Python object column is refused
    naming the column (exit 2), as lists, structs and binary values are."""
    import datetime as dt

    from cer_cli.io.read import read_frame

    frame = pl.DataFrame({"type": ["A", "B"], "ts": [1, 2],
                          "dur": [dt.timedelta(seconds=1.5), None]})
    log = read_frame(frame, "s", times="ts")
    lk = EventLookup.for_log(log)
    list(lk.tap(log.batches()))
    matches = [Match(0, 1, ((0, ("A",)), (1, ("B",))))]
    for shape, column in (("long", "dur"), ("wide", "A.dur")):
        out = io.StringIO()
        write_matches(matches, lk, "csv", stdout=out, shape=shape,
                      variables=[("A", False), ("B", False)])
        back = pl.read_csv(io.StringIO(out.getvalue()), infer_schema=False)
        assert back[column].to_list()[:1] == ["1.5"]
    jsonl = io.StringIO()
    write_matches(matches, lk, "jsonl", stdout=jsonl)
    assert json.loads(jsonl.getvalue())["events"][0]["attrs"]["dur"] == 1.5
    objects = read_frame(frame.with_columns(o=pl.Series([object(), None], dtype=pl.Object)), "s",
                         times="ts")
    lk = EventLookup.for_log(objects)
    list(lk.tap(objects.batches()))
    with pytest.raises(LogError, match="column 'o' holds Python objects, which the CSV output"):
        write_matches(matches, lk, "csv", stdout=io.StringIO())


# --------------------------------------------------------------------------- 128-bit integers


@pytest.mark.parametrize("shape", ["long", "wide"])
def test_parquet_holds_128_bit_integers_with_every_digit(tmp_path: Path, shape) -> None:
    """A column of Int64 in one log and UInt64 in another has the common type Int128 (as
    an NDJSON column of integers beyond int64 has): neither Arrow nor Parquet has such an
    integer, and ``-o out.parquet`` failed with an internal error (``ArrowInvalid: ...
    '_pli128'``, exit 1). It is written as a decimal of 38 digits, every digit kept, the
    same values JSONL prints; a wider integer is refused naming its column (exit 2)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.builders import run

    pl.DataFrame({"type": ["A", "A"], "time": [0, 1],
                  "v": pl.Series([-(2**62), 2**53 + 1], dtype=pl.Int64)}).write_parquet(
        tmp_path / "s.parquet")
    pl.DataFrame({"type": ["B"], "time": [2],
                  "v": pl.Series([2**63 + 1], dtype=pl.UInt64)}).write_parquet(
        tmp_path / "u.parquet")
    logs = [str(tmp_path / "s.parquet"), str(tmp_path / "u.parquet")]
    q = "SELECT * WHERE (A AS x)+ ; B AS y"
    out = tmp_path / "out.parquet"
    got = run("match", "-e", q, *logs, "--shape", shape, "-o", str(out), "--allow-unbounded")
    assert got.exit_code == 0, got.output
    table = pq.read_table(out)
    printed = [json.loads(line) for line in run(
        "match", "-e", q, *logs, "--shape", shape, "--format", "jsonl",
        "--allow-unbounded").stdout.splitlines()]
    if shape == "long":
        assert table.schema.field("v").type == pa.decimal128(38, 0)
        want = [e["attrs"]["v"] for r in printed for e in r["events"]]
        assert [int(x) for x in table.column("v").to_pylist()] == want
    else:
        assert table.schema.field("x.v").type.value_type == pa.decimal128(38, 0)
        assert [[int(x) for x in xs] for xs in table.column("x.v").to_pylist()] == \
            [r["x.v"] for r in printed]
        assert [int(x) for x in table.column("y.v").to_pylist()] == [r["y.v"] for r in printed]
    assert str(2**63 + 1) in json.dumps(printed) and str(2**53 + 1) in json.dumps(printed)
    (tmp_path / "huge.ndjson").write_text('{"type": "A", "v": -1}\n{"type": "B", "v": '
                                          + str(10**38) + "}\n")
    refused = run("match", "-e", "A ; B", str(tmp_path / "huge.ndjson"), "-o",
                  str(tmp_path / "huge.parquet"))
    assert refused.exit_code == 2, refused.output
    assert "column 'v' holds an integer of more than 38 digits" in refused.output
    assert not (tmp_path / "huge.parquet").exists()
