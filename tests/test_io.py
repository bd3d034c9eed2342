"""Reading event logs: specs, formats, schema, time handling, ordering, batches, errors."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cer_cli.events import POS, ROW, STREAM, TIME, TYPE
from cer_cli.io.read import LogError, parse_log_spec, read_events, read_schema

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def _csv(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.fixture
def sensors(tmp_path: Path) -> str:
    return _csv(
        tmp_path / "sensors.csv",
        "type,id,tmp,hum\nH,2,,25\nT,0,45,\nH,0,,20\n",
    )


def test_spec_name_and_stem(sensors: str) -> None:
    assert parse_log_spec(sensors).name == "sensors"
    spec = parse_log_spec(f"S1={sensors}")
    assert (spec.name, spec.format) == ("S1", "csv")


def test_spec_with_equals_in_path_is_a_path(tmp_path: Path) -> None:
    path = _csv(tmp_path / "a=b.csv", "type\nA\n")
    assert parse_log_spec(path).name == "a=b"


def test_missing_file() -> None:
    with pytest.raises(LogError, match="not found: nope.csv"):
        read_events(["nope.csv"])


def test_unsupported_format_lists_supported(tmp_path: Path) -> None:
    path = _csv(tmp_path / "log.xlsx", "x")
    with pytest.raises(LogError) as e:
        read_schema([path])
    assert ".xlsx" in e.value.message
    assert any(".parquet" in h for h in e.value.hints)


def test_format_override(tmp_path: Path) -> None:
    path = _csv(tmp_path / "log.txt", "type,v\nA,1\n")
    assert read_events([path], log_format="csv").frame()[TYPE].to_list() == ["A"]
    with pytest.raises(LogError, match="unsupported log format 'xml'"):
        read_events([path], log_format="xml")


def test_every_format_reads_the_same(tmp_path: Path) -> None:
    df = pl.DataFrame({"type": ["A", "B"], "v": [1, 2], "s": ["x", None]})
    df.write_csv(tmp_path / "l.csv")
    df.write_parquet(tmp_path / "l.parquet")
    df.write_ndjson(tmp_path / "l.ndjson")
    df.write_ndjson(tmp_path / "l.jsonl")
    df.write_json(tmp_path / "l.json")
    for ext in ("csv", "parquet", "ndjson", "jsonl", "json"):
        frame = read_events([str(tmp_path / f"l.{ext}")]).frame()
        assert frame.select("type", "v", "s").rows() == df.rows(), ext
        assert frame[STREAM].to_list() == ["l", "l"]


def test_schema_attributes_per_type(sensors: str) -> None:
    schema = read_schema([sensors])
    # every column is an attribute of every type of the log; null for all of a type's events:
    assert schema.event_types == {
        "H": {"id": "int", "tmp": "int", "hum": "int"},
        "T": {"id": "int", "tmp": "int", "hum": "int"},
    }
    assert schema.empty == {"H": {"tmp"}, "T": {"hum"}}
    assert schema.streams == {"sensors": ("H", "T")}
    assert schema.time_column is None


def test_schema_types(tmp_path: Path) -> None:
    pl.DataFrame(
        {
            "type": ["A"],
            "i": [1],
            "f": [1.5],
            "s": ["x"],
            "b": [True],
            "d": [dt.datetime(2024, 1, 1)],
        }
    ).write_parquet(tmp_path / "t.parquet")
    schema = read_schema([str(tmp_path / "t.parquet")])
    assert schema.event_types["A"] == {
        "i": "int",
        "f": "float",
        "s": "str",
        "b": "bool",
        "d": "datetime",
    }
    assert schema.time_column == "d"


def test_no_type_column_uses_stream_name(tmp_path: Path) -> None:
    a = _csv(tmp_path / "clicks.csv", "user,page\n1,home\n")
    b = _csv(tmp_path / "buys.csv", "user,amount\n1,9.5\n")
    schema = read_schema([a, f"Buy={b}"])
    assert schema.event_types == {
        "clicks": {"user": "int", "page": "str"},
        "Buy": {"user": "int", "amount": "float"},
    }
    frame = read_events([a, f"Buy={b}"]).frame()
    assert frame[TYPE].to_list() == ["clicks", "Buy"]


def test_explicit_type_column(tmp_path: Path) -> None:
    path = _csv(tmp_path / "l.csv", "kind,v\nA,1\nB,2\n")
    assert read_events([path], type_column="kind").frame()[TYPE].to_list() == ["A", "B"]
    with pytest.raises(LogError) as e:
        read_events([path], type_column="event")
    assert "'event'" in e.value.message
    assert "kind, v" in e.value.hints[0]


def test_missing_explicit_time_column_names_columns(sensors: str) -> None:
    with pytest.raises(LogError) as e:
        read_schema([sensors], times="ts")
    assert "'ts'" in e.value.message and "type, id, tmp, hum" in e.value.hints[0]


def test_time_detection_by_name_and_by_type(tmp_path: Path) -> None:
    by_name = _csv(tmp_path / "n.csv", "type,timestamp,v\nA,5,1\n")
    assert read_schema([by_name]).time_column == "timestamp"
    by_type = _csv(tmp_path / "d.csv", "type,at,v\nA,2024-01-01 10:00:00,1\n")
    assert read_schema([by_type]).time_column == "at"
    two_dates = _csv(tmp_path / "dd.csv", "type,a,b\nA,2024-01-01,2024-01-02\n")
    assert read_schema([two_dates]).time_column is None


def test_time_values(tmp_path: Path) -> None:
    dates = _csv(tmp_path / "d.csv", "type,ts\nA,1970-01-01 00:00:01\n")
    assert read_events([dates]).frame()[TIME].to_list() == [1_000_000_000]
    ints = _csv(tmp_path / "i.csv", "type,ts\nA,7\n")
    assert read_events([ints]).frame()[TIME].to_list() == [7]
    floats = _csv(tmp_path / "f.csv", "type,ts\nA,7.5\n")
    frame = read_events([floats]).frame()
    assert frame[TIME].to_list() == [7.5] and frame.schema[TIME] == pl.Float64
    none = _csv(tmp_path / "x.csv", "type,v\nA,1\nB,2\n")
    assert read_events([none]).frame()[TIME].to_list() == [None, None]


def test_string_times_in_ndjson_are_parsed(tmp_path: Path) -> None:
    path = tmp_path / "l.ndjson"
    path.write_text(
        '{"type":"A","ts":"2024-01-01T00:00:02"}\n{"type":"B","ts":"2024-01-01T00:00:01"}\n'
    )
    log = read_events([str(path)])
    assert log.schema.event_types["A"]["ts"] == "datetime"
    frame = log.frame()
    assert frame[TYPE].to_list() == ["B", "A"]
    assert frame.schema["ts"] == pl.Datetime("ns")


def test_unsorted_input_is_sorted_stably(tmp_path: Path) -> None:
    path = _csv(tmp_path / "l.csv", "type,ts\nA,3\nB,1\nC,3\nD,1\nE,2\n")
    log = read_events([path])
    assert not log.sorted_input
    frame = log.frame()
    assert frame[TYPE].to_list() == ["B", "D", "E", "A", "C"]
    assert frame[ROW].to_list() == [1, 3, 4, 0, 2]
    assert frame[POS].to_list() == [0, 1, 2, 3, 4]


def test_ties_by_argument_order_then_row(tmp_path: Path) -> None:
    a = _csv(tmp_path / "a.csv", "type,ts\nA0,1\nA1,2\nA2,2\n")
    b = _csv(tmp_path / "b.csv", "type,ts\nB0,1\nB1,2\n")
    frame = read_events([b, a]).frame()
    assert frame[TYPE].to_list() == ["B0", "A0", "B1", "A1", "A2"]
    assert frame[STREAM].to_list() == ["b", "a", "b", "a", "a"]


def test_no_time_concatenates_in_argument_order(tmp_path: Path) -> None:
    a = _csv(tmp_path / "a.csv", "type\nA0\nA1\n")
    b = _csv(tmp_path / "b.csv", "type\nB0\n")
    for batch_size in (None, 1):
        frames = list(read_events([b, a], batch_size=batch_size).batches())
        assert pl.concat(frames)[TYPE].to_list() == ["B0", "A0", "A1"]
        assert pl.concat(frames)[POS].to_list() == [0, 1, 2]


def test_unparsable_time_names_file_and_line(tmp_path: Path) -> None:
    path = _csv(tmp_path / "l.csv", "type,ts\nA,2024-01-01 10:00:00\nB,soon\n")
    with pytest.raises(LogError) as e:
        read_events([path])
    msg = e.value.message
    assert "l.csv" in msg and "line 3" in msg and "data row 1" in msg and "'soon'" in msg


def test_missing_time_value_is_an_error(tmp_path: Path) -> None:
    path = _csv(tmp_path / "l.csv", "type,ts\nA,1\nB,\n")
    with pytest.raises(LogError, match="line 3.*missing time value"):
        read_events([path])


def test_mixed_time_kinds_across_logs(tmp_path: Path) -> None:
    a = _csv(tmp_path / "a.csv", "type,ts\nA,1\n")
    b = _csv(tmp_path / "b.csv", "type,ts\nB,2024-01-01 10:00:00\n")
    with pytest.raises(LogError, match="int values in .* but datetime"):
        read_events([a, b])


def test_reserved_column_names_rejected(tmp_path: Path) -> None:
    path = _csv(tmp_path / "l.csv", "type,__cer_pos\nA,1\n")
    with pytest.raises(LogError, match="reserved"):
        read_events([path])


def test_missing_type_value_is_an_error(tmp_path: Path) -> None:
    path = _csv(tmp_path / "l.csv", "type,v\nA,1\n,2\n")
    with pytest.raises(LogError, match="line 3.*no event type"):
        read_events([path]).frame()


def test_sorted_input_streams_in_batches(tmp_path: Path) -> None:
    n = 1000
    pl.DataFrame({"type": ["A", "B"] * (n // 2), "ts": list(range(n))}).write_parquet(
        tmp_path / "l.parquet"
    )
    log = read_events([str(tmp_path / "l.parquet")], batch_size=100)
    assert log.sorted_input and log.n_events == n
    frames = list(log.batches())
    assert len(frames) > 1
    assert max(f.height for f in frames) <= 100 * 2
    assert pl.concat(frames)[POS].to_list() == list(range(n))
    assert pl.concat(frames)[ROW].to_list() == list(range(n))


def test_unsorted_input_falls_back_to_one_sorted_frame(tmp_path: Path) -> None:
    path = _csv(tmp_path / "l.csv", "type,ts\nA,2\nB,1\nC,3\n")
    frames = list(read_events([path], batch_size=1).batches())
    assert len(frames) == 1 and frames[0][TYPE].to_list() == ["B", "A", "C"]


@settings(max_examples=40, deadline=None)
@given(
    times=st.lists(
        st.lists(st.integers(0, 6), min_size=0, max_size=12).map(sorted), min_size=1, max_size=6
    ),
    batch_size=st.integers(1, 5),
)
def test_batched_merge_equals_full_sort(tmp_path_factory, times, batch_size) -> None:
    """Merging ordered logs batch by batch gives exactly the fully sorted stream."""
    d = tmp_path_factory.mktemp("merge")
    specs = []
    for i, ts in enumerate(times):
        path = d / f"s{i}.parquet"
        pl.DataFrame(
            {"type": [f"E{i}"] * len(ts), "t": ts}, schema={"type": pl.String, "t": pl.Int64}
        ).write_parquet(path)
        specs.append(str(path))
    cols = [TIME, STREAM, ROW, POS]
    full = read_events(specs, times="t").frame().select(cols)
    batched = pl.concat(
        [
            f.select(cols)
            for f in read_events(specs, times="t", batch_size=batch_size).batches()
        ]
        or [full.clear()]
    )
    assert batched.rows() == full.rows()


def test_committed_samples_read() -> None:
    fig1 = read_events([str(SAMPLES / "fig1.csv")])
    assert fig1.frame()[TYPE].to_list() == list("HTHHTTTHH")
    assert fig1.schema.event_types["T"] == {"id": "int", "tmp": "int", "temp": "int", "hum": "int"}
    assert fig1.schema.empty["T"] == {"hum"}
    stocks = read_schema([str(SAMPLES / "stocks.csv")])
    assert stocks.time_column == "ts" and set(stocks.event_types) == {"BUY", "SELL"}
    flights = read_events([str(SAMPLES / "flights.parquet")], batch_size=20_000)
    assert flights.sorted_input and flights.schema.time_column == "ts"
    assert flights.schema.event_types["DEP"]["delay"] == "int"


def test_merging_many_logs_touches_only_the_logs_it_reads(tmp_path: Path, monkeypatch) -> None:
    """The merge was O(batches x logs) (a filter of every buffer per step: 1,000 five-row
    logs took 112 s); now each step touches only the logs it reads or emits from."""
    n = 150
    specs = []
    for i in range(n):
        path = tmp_path / f"l{i}.csv"
        path.write_text("type,ts\n" + "".join(f"A,{i * 10 + k}\n" for k in range(3)))
        specs.append(str(path))
    log = read_events(specs, batch_size=2)
    calls = 0
    real_filter = pl.DataFrame.filter

    def counting(self, *a, **k):
        nonlocal calls
        calls += 1
        return real_filter(self, *a, **k)

    monkeypatch.setattr(pl.DataFrame, "filter", counting)
    frames = list(log.batches())
    assert pl.concat(frames)[TIME].to_list() == sorted(i * 10 + k for i in range(n) for k in range(3))
    assert calls < 4 * n


def test_a_late_value_of_another_type_names_its_row_and_column(tmp_path: Path) -> None:
    """polars infers the type from the first 10,000 rows, then fails mid-stream: the error
    names the line, the column and the value (it was a bare polars message)."""
    path = tmp_path / "l.csv"
    path.write_text("type,v\n" + "A,1\n" * 10_000 + "A,abc\nA,2\n")
    for read in (lambda: read_schema([str(path)]), lambda: read_events([str(path)]).frame()):
        with pytest.raises(LogError) as e:
            read()
        assert "line 10002" in e.value.message and "column 'v'" in e.value.message
        assert "'abc' is not an integer" in e.value.message and e.value.hints
    # the same in a column without a name (``_c1``): every scan reads it under that name
    unnamed = tmp_path / "u.csv"
    unnamed.write_text("type,\n" + "A,1\n" * 10_000 + "A,abc\n")
    with pytest.raises(LogError) as e:
        read_events([str(unnamed)]).frame()
    assert "line 10002" in e.value.message and "column '_c1'" in e.value.message


@pytest.mark.parametrize("late,said", [('"abc"', "'abc' is not an integer"),
                                       ("1.5", "1.5 is not an integer")])
def test_a_late_ndjson_value_of_another_type_names_its_line_and_column(tmp_path: Path, late,
                                                                        said) -> None:
    """The same for NDJSON, whose polars message named neither line nor column (``cannot
    parse 'abc' (string) as Int64``); on one core and on two."""
    from tests.builders import run

    path = tmp_path / "l.ndjson"
    def line(time: int, v: str, w: str = '"abc"') -> str:
        return f'{{"type": "A", "time": {time}, "w": {w}, "v": {v}}}\n'

    path.write_text("".join(line(i, str(i)) for i in range(10_000)) + line(10_000, late)
                    + line(10_001, "2"))
    with pytest.raises(LogError) as e:
        read_events([str(path)]).frame()
    assert e.value.message == (f"{path}: line 10001 (data row 10000, 0-based), column 'v': {said}"
                               " (the column's type, inferred from its first 10,000 lines)")
    for jobs in ("1", "2"):
        r = run("match", "-e", "SELECT * WHERE A", str(path), "--format", "csv", "--jobs", jobs)
        assert r.exit_code == 2 and f"error: {e.value.message}" in r.output, r.output


# ------------------------------------------------------------ reading CSV fast (issue #15)

CSV_CASES = {
    "no dates": "type,t,v\nA,1,x\nB,2,y\n",
    "a date column": "type,d\nA,2024-01-01\nB,2024-01-02\n",
    "a datetime column": "type,d\nA,2024-01-01T10:00:00\n",
    "a zoned datetime": "type,d\nA,2024-01-01T10:00:00Z\n",
    "a time of day": "type,d\nA,10:00:00\n",
    "day first": "type,d\nA,01/02/2024\n",
    "text among dates": "type,d\nA,2024-01-01\nB,soon\n",
    "dates after a text": "type,d\nA,soon\nB,2024-01-01\n",
    "padded and quoted": 'type,d\nA, 2024-01-01\nB,"2024-01-02"\n',
    "nulls and blanks": "type,d,e\nA,,x\nB,2024-01-01, \n",
    "digits that are numbers": "type,d\nA,20240101\n",
    "only a header": "type,d\n",
    "a late text value": "type,d\n" + "A,2024-01-01\n" * 3000 + "B,soon\n",
    "long lines": "type,d\n" + f"A,{'x' * 70_000}\n" + "B,2024-01-01\n",
    "a quoted line break": 'type,d\nA,"two\nlines"\nB,2024-01-01\n',
    "a byte order mark": "\ufefftype,d\nA,x\n",
}


#: Cases whose dates polars guesses (not ISO 8601 texts of one kind): text for cer.
GUESSED_DATES = {"a time of day", "day first", "padded and quoted"}


@pytest.mark.parametrize("name", sorted(CSV_CASES))
def test_csv_scan_equals_polars_date_inference(tmp_path: Path, name: str) -> None:
    """``_scan_csv`` gives the columns, dtypes and values of polars' own
    ``try_parse_dates`` inference over 10,000 rows, whichever way it gets there, except
    that a column polars reads by a guess is text (``contract.iso_dates``)."""
    from cer_cli.io.read import _scan_csv

    path = Path(_csv(tmp_path / "log.csv", CSV_CASES[name]))
    text = {"d": pl.String} if name in GUESSED_DATES else {}
    want = pl.scan_csv(path, try_parse_dates=True, infer_schema_length=10_000,
                       schema_overrides=text)
    got = _scan_csv(path)
    assert got.collect_schema() == want.collect_schema()
    assert got.collect().equals(want.collect())
    text = _scan_csv(path, ("type",))  # a column read as text stays text
    assert text.collect_schema()["type"] == pl.String


def test_a_csv_without_dates_is_read_with_its_schema_given(tmp_path: Path, monkeypatch) -> None:
    """polars reads a CSV 3-4x slower under its date inference than with the same schema
    given (issue #15): a log that cannot hold a date is read the second way, a log with a
    date column the first. Asserted on the calls, not on time."""
    from cer_cli.io import read

    calls = []
    real = pl.scan_csv

    def scan_csv(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(read.pl, "scan_csv", scan_csv)
    path = Path(_csv(tmp_path / "log.csv", "type,t,v\n" + "A,1,x\n" * 2000 + "B,2,3\n"))
    read._scan_csv(path)
    assert not any(c.get("try_parse_dates") for c in calls) and "schema" in calls[-1]
    calls.clear()
    path.write_text("type,d\nA,2024-01-01\n")
    lf = read._scan_csv(path)
    assert any(c.get("try_parse_dates") for c in calls)
    assert lf.collect_schema()["d"] == pl.Date


def test_estimate_events(tmp_path: Path) -> None:
    """About the number of rows, read from the file's size and first 64 KiB (Parquet: its
    metadata), for deciding before the read whether a run is long; 0, never an error, for
    what it cannot tell."""
    from cer_cli.io.read import estimate_events

    csv = Path(_csv(tmp_path / "big.csv", "type,t\n" + "".join(f"A,{i % 10}\n" for i in range(50_000))))
    assert 45_000 <= estimate_events([str(csv)]) <= 55_000
    parquet = tmp_path / "big.parquet"
    pl.read_csv(csv).write_parquet(parquet)
    assert estimate_events([f"S={parquet}"]) == 50_000
    assert estimate_events([str(csv), str(parquet)]) >= 95_000
    assert estimate_events([str(tmp_path / "missing.csv"), _csv(tmp_path / "e.csv", "")]) == 0


def test_a_header_only_csv_widens_no_other_log(tmp_path: Path) -> None:
    """A CSV log without rows (polars types every column of it as text) merged with another
    log: the other log's columns keep their types (they became text: ``"v": "1"`` in the
    output, and a numeric time column met "datetime values in the empty log")."""
    full = _csv(tmp_path / "full.csv", "type,ts,v\nA,0,1\nB,1,2\n")
    hollow = _csv(tmp_path / "hollow.csv", "type,ts,v,u\n")
    log = read_events([full, hollow])
    assert log.schema.event_types == {"A": {"ts": "int", "v": "int"}, "B": {"ts": "int", "v": "int"}}
    frame = log.frame()
    assert frame.schema["v"] == pl.Int64 and frame.schema["ts"] == pl.Int64
    assert frame["v"].to_list() == [1, 2] and frame[TIME].to_list() == [0, 1]
    assert read_schema([hollow]).streams == {"hollow": ()}


def test_a_time_format_named_for_one_of_several_logs(tmp_path: Path) -> None:
    """``--time-format fa=FORMAT`` with two logs was refused ("no log named 'fa'"): each
    log checked the option against its own name only."""
    from cer_cli.io.contract import TimeOptions

    fa = _csv(tmp_path / "fa.csv", "type,ts\nA,01/02/2024 10:00\n")
    fb = _csv(tmp_path / "fb.csv", "type,ts\nB,2024-01-02T11:00\n")
    log = read_events([fa, fb], times=TimeOptions(format=("fa=%d/%m/%Y %H:%M",)))
    assert log.frame()["ts"].to_list() == [dt.datetime(2024, 1, 2, 11), dt.datetime(2024, 2, 1, 10)]
