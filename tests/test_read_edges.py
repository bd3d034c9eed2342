"""Exact answers at the edges of reading logs (times, types, units, merges): each
test checks a hand-computed answer that the code before the fix got wrong."""

from __future__ import annotations

import datetime as dt
import io
import json
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

from cer_cli.events import TIME, TYPE
from cer_cli.io.contract import LogError, TimeOptions
from cer_cli.io.read import (
    csv_quoted_line_breaks,
    inferred_kinds,
    late_value_refusal,
    read_events,
    read_schema,
)
from cer_cli.plan import plan
from cer_cli.query.parser import parse
from tests import reference
from tests.builders import events_frame, run

S = 1_000_000_000  # ns per second


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


# --------------------------------------------------------------------------- 1: time units


@pytest.fixture
def epoch(tmp_path: Path) -> str:
    """Epoch seconds 100 apart: read as nanoseconds, they were 100 ns apart."""
    return write(tmp_path / "e.csv", "type,time\nA,1700000000\nB,1700000100\n")


def test_a_duration_over_numbers_without_a_unit_is_refused(epoch: str) -> None:
    r = run("match", "-e", "A ; B WITHIN 1 seconds", epoch, "--count")
    assert r.exit_code == 2, r.output
    assert "time column 'time' holds numbers without a unit" in r.output
    assert "hint: its values look like epoch seconds: pass --time-unit s" in r.output
    ms = write(Path(epoch).with_name("ms.csv"), "type,time\nA,1700000000000\n")
    r = run("check", "-e", "A ; B WITHIN 1 seconds", ms)
    assert "hint: its values look like epoch milliseconds: pass --time-unit ms" in r.output
    small = write(Path(epoch).with_name("small.csv"), "type,time\nA,1\nB,2\n")
    r = run("check", "-e", "A ; B WITHIN 1 seconds", small)
    assert "hint: give their unit since the epoch: --time-unit s (or ms, us, ns)" in r.output
    # an order without unit still serves n EVENTS and attribute windows
    assert run("match", "-e", "A ; B WITHIN 1 EVENTS", epoch, "--count").stdout == "1\n"
    assert run("match", "-e", "A ; B WITHIN 100 [time]", epoch, "--count").stdout == "1\n"


@pytest.mark.parametrize(("window", "unit", "count"), [
    ("1 seconds", "s", 0), ("99 seconds", "s", 0), ("100 seconds", "s", 1),
    ("1 seconds", "ms", 1), ("99 milliseconds", "ms", 0), ("100 milliseconds", "ms", 1),
    ("1 seconds", "e=s", 0), ("2 minutes", "e=s", 1),
])
def test_time_unit(tmp_path: Path, epoch: str, window: str, unit: str, count: int) -> None:
    if unit == "ms":  # the same instants in epoch milliseconds, 100 ms apart
        epoch = write(tmp_path / "e.csv", "type,time\nA,1700000000000\nB,1700000000100\n")
    r = run("match", "-e", f"A ; B WITHIN {window}", epoch, "--count", "--time-unit", unit)
    assert r.exit_code == 0, r.output
    assert r.stdout == f"{count}\n"


def test_a_unit_that_puts_the_times_in_1970_is_refused_naming_the_one_that_fits(
        tmp_path: Path, epoch: str) -> None:
    """Epoch seconds read as ms all fall in January 1970: refused, naming seconds; as
    ``cer check`` says too, and for one log of several (named in the hint)."""
    for command in ("match", "check"):
        r = run(command, "-e", "A ; B WITHIN 1 seconds", epoch, "--time-unit", "ms")
        assert r.exit_code == 2, r.output
        assert r.output.splitlines()[:2] == [
            f"error: {epoch}: --time-unit ms puts the times of column 'time' in 1970-01-20,"
            " but they look like epoch seconds (2023-11-14)",
            "  hint: pass --time-unit s"]
    ns = write(tmp_path / "n.csv", "type,time\nA,1700000000000000000\n")
    r = run("match", "-e", "A", epoch, ns, "--time-unit", "e=s", "--time-unit", "n=s")
    assert r.exit_code == 2 and "look like epoch nanoseconds" in r.output, r.output
    assert "hint: pass --time-unit n=ns" in r.output
    # values that no unit puts in 1990-2100 are taken as given (old data, relative times)
    old = write(tmp_path / "old.csv", "type,time\nA,0\nB,100\n")
    assert run("match", "-e", "A ; B WITHIN 1 minutes", old, "--time-unit", "ms",
               "--count").stdout == "1\n"


def test_time_unit_values_and_explain(tmp_path: Path, epoch: str) -> None:
    frame = read_events([epoch], times=TimeOptions(unit=("s",))).frame()
    assert frame[TIME].to_list() == [1_700_000_000 * S, 1_700_000_100 * S]
    assert frame["time"][0] == dt.datetime(2023, 11, 14, 22, 13, 20)  # shown as the instant
    floats = write(tmp_path / "f.csv", "type,ts\nA,1.5\nB,2.25\n")
    got = read_events([floats], times=TimeOptions(unit=("s",))).frame()[TIME].to_list()
    assert got == [1_500_000_000, 2_250_000_000]
    huge = write(tmp_path / "h.csv", "type,ts\nA,1\nB,10000000000\n")  # 1e10 s > int64 ns
    with pytest.raises(LogError, match="line 3 .*out of range for --time-unit s"):
        read_events([huge], times=TimeOptions(unit=("s",)))
    r = run("explain", "-e", "A ; B WITHIN 2 minutes", epoch, "--time-unit", "s")
    assert r.exit_code == 0, r.output
    assert "time: e: time (numbers, s since the epoch)" in r.stdout
    iso = write(tmp_path / "iso.csv", "type,ts\nA,2024-01-01T00:00:00\n")
    r = run("match", "-e", "A", iso, "--time-unit", "iso=s")  # a datetime needs no unit
    assert r.exit_code == 2 and "is for a numeric time column" in r.output


def test_time_unit_per_log(tmp_path: Path) -> None:
    """Milliseconds in one log, seconds in the other; the time columns differ too."""
    clicks = write(tmp_path / "clicks.csv", "type,ts\nA,1700000000000\n")
    orders = write(tmp_path / "orders.csv", "type,time\nB,1700000001\n")
    args = [clicks, orders, "--count", "--time-unit", "clicks=ms", "--time-unit", "orders=s"]
    assert run("match", "-e", "A ; B WITHIN 1 seconds", *args).stdout == "1\n"
    assert run("match", "-e", "A ; B WITHIN 999 milliseconds", *args).stdout == "0\n"


# --------------------------------------------------------------------------- 10: WITHIN 0


def reported(text: str, events: list[dict]) -> tuple[list, list]:
    query = parse(text)
    got = sorted(tuple(p for p, _ in m.events) for m in plan(query).run(events_frame(events)))
    want = sorted(tuple(p for p, _ in m.events) for m in reference.reference_matches(query, events))
    return got, want


def test_within_0_events_keeps_single_event_matches() -> None:
    events = [{"type": "A"}, {"type": "A"}, {"type": "B"}]
    got, want = reported("SELECT * WHERE (A AS x)+ WITHIN 0 EVENTS", events)
    assert want == [(0,), (1,)] and got == want
    got, want = reported("SELECT * WHERE A ; B WITHIN 0 EVENTS", events)
    assert want == [] and got == want


def test_within_0_seconds_keeps_events_of_equal_time(tmp_path: Path) -> None:
    events = [{"type": "A", "time": 0}, {"type": "A", "time": 5 * S},
              {"type": "B", "time": 5 * S}, {"type": "B", "time": 6 * S}]
    got, want = reported("SELECT * WHERE A ; B WITHIN 0 seconds", events)
    assert want == [(1, 2)] and got == want
    log = write(tmp_path / "t.csv", "type,ts\nA,2024-01-01T00:00:00\nA,2024-01-01T00:00:05\n"
                                    "B,2024-01-01T00:00:05\nB,2024-01-01T00:00:06\n")
    assert run("match", "-e", "A ; B WITHIN 0 seconds", log, "--count").stdout == "1\n"


# --------------------------------------------------------------------------- 8: per-log columns


def test_type_and_time_columns_per_log(tmp_path: Path) -> None:
    clicks = write(tmp_path / "clicks.csv",
                   "event_type,time\nClick,2024-01-01T00:00:00\nView,2024-01-01T00:00:30\n")
    pl.DataFrame({"id": [1], "ts": [dt.datetime(2024, 1, 1, 0, 0, 40)]}).write_parquet(
        tmp_path / "orders.parquet")
    orders = f"Order={tmp_path / 'orders.parquet'}"
    q = ("-e", "Click ; Order WITHIN 1 minutes")
    r = run("match", *q, clicks, orders, "--type-column", "event_type", "--count")
    assert r.exit_code == 0, r.output  # was "orders.parquet: no type column"
    assert r.stdout == "1\n"
    r = run("match", *q, clicks, orders, "--type-column", "clicks=event_type",
            "--time-column", "Order=ts", "--count")
    assert r.exit_code == 0, r.output
    assert r.stdout == "1\n"
    log = read_events([clicks, orders], type_column="event_type")
    assert log.frame()[TYPE].to_list() == ["Click", "View", "Order"]
    r = run("match", *q, clicks, orders, "--type-column", "Order=event_type")
    assert r.exit_code == 2 and "no type column 'event_type'" in r.output


# --------------------------------------------------------------------------- 12: smaller


def test_one_trailing_blank_line_is_accepted(tmp_path: Path) -> None:
    log = write(tmp_path / "b.csv", "type,ts\nA,1\nB,2\n\n")
    assert read_events([log]).n_events == 2
    assert run("match", "-e", "A ; B", log, "--count").stdout == "1\n"
    crlf = write(tmp_path / "c.csv", "type,ts\r\nA,1\r\nB,2\r\n\r\n")
    assert read_events([crlf]).n_events == 2


def test_a_mixed_time_column_blames_the_odd_value(tmp_path: Path) -> None:
    log = write(tmp_path / "m.csv", "type,time\nA,0\nB,soon\n")
    with pytest.raises(LogError) as e:
        read_events([log])
    assert e.value.message == f"{log}: line 3 (data row 1, 0-based): cannot parse time value" \
                              " 'soon' in column 'time'"


@pytest.mark.parametrize("value", ["", "nan", "NaN"])
def test_null_and_nan_times_are_both_missing(tmp_path: Path, value: str) -> None:
    log = write(tmp_path / "n.csv", f"type,ts\nA,1.5\nB,{value}\nC,3\n")
    with pytest.raises(LogError, match=r"line 3 \(data row 1, 0-based\): missing time value"):
        read_events([log])


def test_ambiguous_dates_need_a_time_format(tmp_path: Path) -> None:
    log = write(tmp_path / "d.csv", "type,time\nA,01/02/2024\nB,03/02/2024\n")
    r = run("match", "-e", "A ; B", log, "--count")
    assert r.exit_code == 2  # was read as 1 February without notice
    assert "'01/02/2024'" in r.output and "no clear day/month order" in r.output
    assert "--time-format" in r.output
    day_first = read_events([log], times=TimeOptions(format=("%d/%m/%Y",))).frame()
    assert day_first["time"].to_list() == [dt.datetime(2024, 2, 1), dt.datetime(2024, 2, 3)]
    month_first = read_events([log], times=TimeOptions(format=("d=%m/%d/%Y",))).frame()
    assert month_first["time"].to_list() == [dt.datetime(2024, 1, 2), dt.datetime(2024, 3, 2)]
    r = run("match", "-e", "A ; B WITHIN 1 days", log, "--time-format", "%d/%m/%Y", "--count")
    assert r.stdout == "0\n"  # 1 and 3 February: two days apart
    r = run("match", "-e", "A ; B WITHIN 1 days", log, "--time-format", "%m/%d/%Y", "--count")
    assert r.stdout == "0\n"  # 2 January and 2 March


def test_iso_times_in_every_accepted_form(tmp_path: Path) -> None:
    log = write(tmp_path / "i.csv", "type,ts\nA,2024-01-02\nA,2024-01-02 10:00\n"
                                    "A,2024-01-02T10:00:05.5\nA,2024-01-02T10:00:06Z\n"
                                    "A,2024-01-02T12:00:07+02:00\nA,2024-01-02T12:00+0200\n")
    got = read_events([log]).frame().sort("__cer_row")[TIME].to_list()  # file order
    base = int(dt.datetime(2024, 1, 2, tzinfo=dt.UTC).timestamp()) * S
    hour = 3600 * S
    assert got == [base, base + 10 * hour, base + 10 * hour + 5 * S + S // 2,
                   base + 10 * hour + 6 * S, base + 10 * hour + 7 * S, base + 10 * hour]


# --------------------------------------------------------------------------- 9: unknown types


def test_an_event_type_the_log_lacks_warns_and_runs(tmp_path: Path) -> None:
    log = write(tmp_path / "daily.csv", "type,amount,ts\nSale,1,1\nSale,3,2\nReturn,2,3\n")
    r = run("match", "-e", "Sale AS s ; (Return OR Refund) AS r", log, "--count")
    assert r.exit_code == 0, r.output
    assert r.stdout == "2\n"  # both from Return; the Refund branch adds nothing
    assert "the log has no event type 'Refund'" in r.stderr
    r = run("match", "-e", "Sale ; Retrun", log, "--count")
    assert r.exit_code == 0 and r.stdout == "0\n"
    assert "did you mean 'Return'?" in r.stderr
    r = run("match", "-e", "Sale ; Refund AS r FILTER r[amout > 1]", log, "--count")
    assert r.exit_code == 2 and "no event of the log has attribute 'amout'" in r.output


# --------------------------------------------------------------------------- ISO offsets


def _csv_rows(text: str) -> list[dict]:
    import csv
    import io

    return list(csv.DictReader(io.StringIO(text)))


def test_iso_times_with_offsets_print_as_the_utc_instant(tmp_path: Path) -> None:
    """``10:00+01:00`` is the instant 09:00 UTC: printed ``09:00:00+00:00`` (it printed
    ``09:00:00``, which reads as a local time). A value of the same column without an
    offset is UTC, and printed so too; a column without any offset stays as written."""
    zoned = write(tmp_path / "z.csv", "type,time\nA,2024-01-01T10:00+01:00\nB,2024-01-01 09:30:00\n")
    r = run("match", "-e", "A ; B", zoned, "--format", "csv")
    assert r.exit_code == 0, r.output
    rows = _csv_rows(r.stdout)
    assert [row["time"] for row in rows] == ["2024-01-01T09:00:00+00:00",
                                             "2024-01-01T09:30:00+00:00"]
    assert (rows[0]["start_time"], rows[0]["end_time"]) == ("2024-01-01T09:00:00+00:00",
                                                            "2024-01-01T09:30:00+00:00")
    events = run("match", "-e", "A ; B", zoned, "--format", "jsonl").stdout
    assert '"time": "2024-01-01T09:00:00+00:00"' in events
    naive = write(tmp_path / "n.csv", "type,time\nA,2024-01-01T10:00\nB,2024-01-01T10:30\n")
    rows = _csv_rows(run("match", "-e", "A ; B", naive, "--format", "csv").stdout)
    assert [row["time"] for row in rows] == ["2024-01-01T10:00:00", "2024-01-01T10:30:00"]
    # two logs, one with offsets: the column is one of instants in both
    rows = _csv_rows(run("match", "-e", "A ; B", zoned, naive, "--format", "csv").stdout)
    assert rows and all(row["time"].endswith("+00:00") for row in rows)
    # a --time-format with %z reads offsets too
    fmt = write(tmp_path / "f.csv", "type,time\nA,01/01/2024 10:00 +0100\nB,01/01/2024 10:30 +0100\n")
    r = run("match", "-e", "A ; B", fmt, "--format", "csv", "--time-format", "%d/%m/%Y %H:%M %z")
    assert [row["time"] for row in _csv_rows(r.stdout)] == ["2024-01-01T09:00:00+00:00",
                                                            "2024-01-01T09:30:00+00:00"]
    # the polars API: a UTC datetime column
    import cer_cli

    got = cer_cli.match(pl.read_csv(zoned, infer_schema=False), "A ; B", time_column="time")
    assert got.schema["time"] == pl.Datetime("ns", "UTC")
    assert got["time"][0] == dt.datetime(2024, 1, 1, 9, tzinfo=dt.UTC)


@pytest.mark.parametrize("read_once", [True, False])
def test_the_schema_pass_is_the_time_check(tmp_path: Path, monkeypatch, read_once: bool) -> None:
    """A log with a time column is parsed once before its events: one pass gives the schema,
    the row count and the order (a CSV was parsed twice before, by the grouped query and by
    a time-column scan beside it). Its time error still comes after the schema's own: a late
    value that does not fit its column wins over an earlier unreadable time."""
    from cer_cli.io import read

    if not read_once:  # the scan itself, not a frame read into memory
        monkeypatch.setattr(read, "READ_ONCE_BYTES", 0)
    log = tmp_path / "l.csv"
    log.write_text("type,time,v\n" + "".join(f"{'AB'[i % 2]},{i // 3},{i}\n" for i in range(3000)))
    monkeypatch.setattr(read, "_PASS_ROWS", 1000)  # folded over three chunks
    passes = []

    def counted(name):
        real = getattr(pl.LazyFrame, name)

        def call(self, *args, **kwargs):
            passes.append(name)
            return real(self, *args, **kwargs)
        return call

    with monkeypatch.context() as m:
        for name in ("collect", "collect_batches"):
            m.setattr(pl.LazyFrame, name, counted(name))
        got = read_events([str(log)], batch_size=500)
    # the file is parsed once: by that pass, or by the read into memory before it
    assert passes == (["collect", "collect_batches"] if read_once else ["collect_batches"])
    assert got.n_events == 3000 and got.sorted_input
    assert set(got.schema.event_types) == {"A", "B"}
    shuffled = tmp_path / "s.csv"
    shuffled.write_text("type,time\n" + "".join(f"A,{(i * 7) % 3000}\n" for i in range(3000)))
    assert not read_events([str(shuffled)]).sorted_input
    bad = tmp_path / "bad.csv"
    bad.write_text("type,time\nA,1\nA,x\n")
    with pytest.raises(LogError, match="line 3"):
        read_events([str(bad)])
    late = tmp_path / "late.csv"  # an unreadable time on line 3, a text among numbers later
    late.write_text("type,time,v\nA,1,1\nA,x,2\n" + "A,3,3\n" * 12_000 + "A,4,oops\n")
    with pytest.raises(LogError, match="oops") as e:
        read_events([str(late)], times="time")
    assert "line 12004" in str(e.value), e.value


# --------------------------------------------------------------------------- separators


SEPARATED = [("type", "time", "name", "v"), ("A", "1", "x y", "2.5"), ("B", "2", "z", "3"),
             ("A", "4", "", "1"), ("C", "5", "w", "0.5")]


@pytest.mark.parametrize("sep,suffix", [(";", "csv"), ("\t", "tsv"), ("|", "csv")])
def test_a_csv_separated_otherwise_reads_as_the_comma_one(tmp_path: Path, sep: str,
                                                         suffix: str) -> None:
    """A ``;``-, tab- or ``|``-separated log (spreadsheet exports, ``.tsv``) has the columns
    and matches of the same log with commas; it used to be one column named after its
    header line, and every query matched nothing."""
    comma = write(tmp_path / "c.csv", "".join(",".join(r) + "\n" for r in SEPARATED))
    other = write(tmp_path / f"o.{suffix}", "".join(sep.join(r) + "\n" for r in SEPARATED))
    want, got = read_events([f"L={comma}"]).frame(), read_events([f"L={other}"]).frame()
    assert got.columns == want.columns and got.equals(want)
    query = "SELECT * WHERE A AS a ; C AS c FILTER a[v > 1] AND c[name = 'w']"
    answers = [run("match", "-e", query, f"L={log}", "--format", "jsonl") for log in (comma, other)]
    assert answers[0].exit_code == answers[1].exit_code == 0, answers[1].output
    assert answers[1].stdout == answers[0].stdout and answers[0].stdout.count("\n") == 1


def test_a_semicolon_csvs_bad_value_and_blank_end_are_read_as_with_commas(
        tmp_path: Path) -> None:
    """The passes that read a CSV again use its separator too: naming a value that does not
    fit its column's type, and counting the rows before trailing blank lines."""
    rows = ["type;time"] + [f"A;{i}" for i in range(10_001)] + ["A;x"]
    bad = write(tmp_path / "bad.csv", "\n".join(rows) + "\n")
    with pytest.raises(LogError, match="'x' is not an integer"):
        read_events([bad]).frame()
    blank = write(tmp_path / "blank.csv", "type;time\nA;1\nB;2\n\n")
    assert read_events([blank]).frame()[TYPE].to_list() == ["A", "B"]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_log_that_is_not_utf8_names_the_line_of_its_first_bad_byte(tmp_path: Path,
                                                                      jobs: str) -> None:
    """A byte that is not UTF-8 (a WINDOWS-1252 export) is refused naming its line and how to
    convert the file, whether it is among the first bytes or 70,000 lines further (polars
    named no row), and the first of several."""
    early = tmp_path / "early.csv"
    early.write_bytes(b"type,time,name\nA,1,ok\nB,2,caf\xe9\n")
    late = tmp_path / "late.csv"
    late.write_bytes(b"type,time,name\n" + b"".join(b"A,%d,abc\n" % i for i in range(70_000))
                     + b"B,70000,caf\xe9\nB,70001,\xff\n")
    for log, line, before in ((early, 3, "B,2,caf"), (late, 70_002, "B,70000,caf")):
        r = run("match", "-e", "A ; B", str(log), "--count", "--jobs", jobs)
        assert r.exit_code == 2, r.output
        assert r.output.splitlines()[0] == (f"error: {log}, line {line}: not UTF-8 text:"
                                            f" byte 0xe9 after {before!r}")
        assert "iconv" in r.output and "Traceback" not in r.output
    ndjson = tmp_path / "l.jsonl"  # read by another path: polars fails on opening it
    ndjson.write_bytes(b'{"type": "A", "time": 1}\n{"type": "B", "time": 2, "n": "caf\xe9"}\n')
    r = run("match", "-e", "A ; B", str(ndjson), "--count", "--jobs", jobs)
    assert r.exit_code == 2 and f"{ndjson}, line 2: not UTF-8 text: byte 0xe9" in r.output


def test_a_csv_naming_a_column_twice_is_refused(tmp_path: Path) -> None:
    """polars renamed the second ``type`` to ``type_duplicated_0`` (Spark: ``type2``):
    refused instead, naming both columns."""
    log = write(tmp_path / "l.csv", "type,time,type\nA,1,B\n")
    r = run("match", "-e", "A", log, "--count")
    assert r.exit_code == 2
    assert r.output.splitlines()[0] == (f"error: {log}: the header names column 'type' twice"
                                        " (columns 1 and 3)")
    # empty names, as a spreadsheet's trailing separators make, name no column: read
    trailing = write(tmp_path / "t.csv", "type,time,,\nA,1,,\nB,2,,\n")
    assert run("match", "-e", "A ; B", trailing, "--count").stdout == "1\n"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_columns_without_a_name_are_called_by_their_position(tmp_path: Path, jobs) -> None:
    """A CSV header's empty names and a Parquet column named "" are ``_c`` and the column's
    position from 0 (Spark's names), in every shape: polars called them "" and
    ``_duplicated_0``, and the long shape failed on "" with an internal error. A query can
    read them by that name."""
    csv_log = write(tmp_path / "t.csv", "type,time,,v,\nA,1,,5,x\nB,2,,6,y\n")
    parquet = tmp_path / "p.parquet"
    pl.DataFrame({"type": ["A", "B"], "time": [1, 2], "": [7, 8]}).write_parquet(parquet)
    for log, columns in ((csv_log, ["_c2", "_c4"]), (str(parquet), ["_c2"])):
        for shape in ("long", "wide"):
            r = run("match", "-e", "SELECT * WHERE A ; B", log, "--format", "csv",
                    "--shape", shape, "--jobs", jobs)
            assert r.exit_code == 0, r.output
            got = pl.read_csv(io.StringIO(r.stdout))
            names = [c.split(".")[-1] for c in got.columns]
            assert all(c in names for c in columns) and "" not in names, got.columns
            assert "_duplicated_0" not in " ".join(got.columns)
    r = run("match", "-e", "A ; B FILTER B[_c4 = 'y']", csv_log, "--count", "--jobs", jobs)
    assert r.stdout == "1\n", r.output
    r = run("match", "-e", "A ; B FILTER B[_c2 = 8]", str(parquet), "--count", "--jobs", jobs)
    assert r.stdout == "1\n", r.output


def test_a_log_path_holding_pattern_characters_is_that_file(tmp_path: Path) -> None:
    """polars reads a path holding ``[``, ``*`` or ``?`` as a pattern: ``l[1].csv`` found
    no file ("expanded paths were empty", exit 2). CSV and Parquet are read as named;
    NDJSON, which polars cannot read so, is refused saying why."""
    csv_log = write(tmp_path / "l[1].csv", "type,time\nA,1\nB,2\n")
    parquet = tmp_path / "l[1].parquet"
    pl.DataFrame({"type": ["A", "B"], "time": [1, 2]}).write_parquet(parquet)
    for log in (csv_log, str(parquet)):
        r = run("match", "-e", "A ; B", log, "--count")
        assert r.exit_code == 0 and r.stdout == "1\n", r.output
    ndjson = write(tmp_path / "l[1].ndjson", '{"type": "A", "time": 1}\n')
    r = run("match", "-e", "A ; B", ndjson, "--count")
    assert r.exit_code == 2 and "as a pattern" in r.output, r.output


@pytest.mark.parametrize("sep", [",", ";"])
def test_a_record_with_more_fields_than_the_header_is_named(tmp_path: Path, sep: str) -> None:
    """polars names no record ("found more fields than defined in 'Schema'"): the first one
    is found, after a quoted field spanning lines and a blank line, and named by the line
    it is on (line 4 before: one line a record, the blank line skipped) and by the data row
    every other message gives it (polars reads the blank line as a row of nulls: data row
    2 before, where a bad time in the same record said 3)."""
    rows = ["type,time,v", 'A,1,"two\nlines"', "", "B,2,3", "C,3,4,5", "D,4,5,6,7"]
    log = tmp_path / "ragged.csv"
    log.write_text("\n".join(r.replace(",", sep) for r in rows) + "\n")
    got = run("match", "-e", "A ; B", str(log))
    assert got.exit_code == 2, got.output
    assert "ragged.csv: line 6 (data row 3, 0-based): 4 fields, but the header names 3" \
        in got.output
    assert "Traceback" not in got.output
    rows[4] = "C,x,4"  # the same record with a time that cannot be read instead
    log.write_text("\n".join(r.replace(",", sep) for r in rows[:5]) + "\n")
    got = run("match", "-e", "A ; B", str(log), "--time-column", "time")
    assert got.exit_code == 2, got.output
    assert "ragged.csv: line 6 (data row 3, 0-based): cannot parse time value 'x'" \
        in got.output


def _far_logs(tmp_path: Path) -> dict[str, tuple[str, list[str]]]:
    """A time beyond nanoseconds' range (1677-09-21 to 2262-04-11) in data row 1 of each
    kind of time column: the log and the options that read it."""
    logs = {}
    for name, text in (("after", "3000-01-01T00:00:00"), ("before", "1600-05-01 12:00"),
                       ("zoned", "2262-12-31T23:00:00+01:00"),
                       ("edge", "2262-04-11T01:00:00")):  # texts keep a day from the edge
        path = write(tmp_path / f"{name}.csv", f"type,time\nA,2024-01-01T00:00:00\nB,{text}\n")
        logs[name] = (path, [])
    logs["format"] = (write(tmp_path / "format.csv", "type,time\nA,01/01/2024\nB,01/01/3000\n"),
                      ["--time-format", "%d/%m/%Y"])
    for name, value in (("datetime", dt.datetime(3000, 1, 1)), ("date", dt.date(3000, 1, 1))):
        path = tmp_path / f"{name}.parquet"
        pl.DataFrame({"type": ["A", "B"], "time": [value.replace(year=2024), value]}
                     ).write_parquet(path)
        logs[name] = (str(path), [])
    return logs


@pytest.mark.parametrize("kind", ["after", "before", "zoned", "edge", "format", "datetime",
                                  "date"])
def test_a_time_beyond_nanoseconds_range_is_refused_naming_its_row(tmp_path: Path,
                                                                   kind: str) -> None:
    """polars wrapped such a text time silently (3000-01-01 became 1830-11-23, and A ; B
    found no match), read a datetime's as a missing time, and failed to cast a date."""
    log, options = _far_logs(tmp_path)[kind]
    got = run("match", "-e", "A ; B", log, *options, "--count")
    assert got.exit_code == 2, got.output
    assert "data row 1" in got.output and "is out of range" in got.output, got.output
    assert "1677-09-21 to 2262-04-11" in got.output


def test_a_text_that_is_no_date_is_not_called_out_of_range(tmp_path: Path) -> None:
    log = write(tmp_path / "word.csv", "type,time\nA,2024-01-01T00:00:00\nB,event 0042\n")
    got = run("match", "-e", "A ; B", log, "--count")
    assert got.exit_code == 2, got.output
    assert "cannot parse time value 'event 0042'" in got.output
    assert "out of range" not in got.output


def test_times_just_inside_nanoseconds_range_are_read(tmp_path: Path) -> None:
    log = write(tmp_path / "edges.csv",
                "type,time\nA,1677-09-22T00:00:00\nB,2262-04-10T00:00:00+01:00\n")
    got = run("match", "-e", "A ; B", log, "--format", "csv")
    assert got.exit_code == 0, got.output
    assert "1677-09-22T00:00:00+00:00,2262-04-09T23:00:00+00:00" in got.output


# --------------------------------------------------------------------------- CSV dates

#: Texts a CSV reader could take for dates: day first, year first with slashes, a clock
#: alone, dates and datetimes mixed; then an ISO column that stays datetimes.
GUESSES = ("type,time,d,s,k,m,iso\n"
           "A,1,02/02/2024,2024/02/02,10:00:00,2024-01-13,2024-01-13T10:00:00\n"
           "B,2,13/01/2024,2024/01/13,09:00:00,2024-01-14T10:00:00,2024-01-14T10:00:00\n")


def test_csv_dates_written_otherwise_than_iso_stay_text(tmp_path: Path) -> None:
    """polars read 02/02/2024 as 2 February (day first, a guess) and 10:00:00 as a clock,
    where Spark keeps them as text: ``b.d > a.d`` compared 13 January with 2 February and
    found nothing, on Spark one match. Only ISO texts of one kind are dates now."""
    log = write(tmp_path / "d.csv", GUESSES)
    attrs = read_schema([log], times="time").attributes("A")
    assert {c: attrs[c] for c in "dskm"} == dict.fromkeys("dskm", "str")
    assert attrs["iso"] == "datetime"
    r = run("match", "-e", "A AS a ; B AS b FILTER b.d > a.d", log, "--count")
    assert (r.exit_code, r.output.strip()) == (0, "1"), r.output
    r = run("match", "-e", "A AS a ; B AS b FILTER b.iso > a.iso AND a.k = '10:00:00'", log,
            "--format", "jsonl")
    assert r.exit_code == 0, r.output
    first = json.loads(r.output.splitlines()[0])["events"][0]["attrs"]
    assert (first["d"], first["s"], first["m"]) == ("02/02/2024", "2024/02/02", "2024-01-13")


#: Numbers written as only one of the CSV readers reads them: padded, signed, infinite;
#: then a plain one.
NUMBERS = "type,time,sp,plus,inf,n\nA,1, 5,+5,inf,5\nB,2, 10,+10,-inf,10\n"


def test_csv_numbers_written_as_one_reader_reads_them_stay_text(tmp_path: Path) -> None:
    """Spark read `` 5`` and ``+5`` as numbers where polars kept them text (``b.sp <
    a.sp``: 1 match locally, 0 on Spark), and polars read ``inf`` as a number where Spark
    kept it text. Only what both read as a number is one (``contract.csv_kind_holds``)."""
    log = write(tmp_path / "n.csv", NUMBERS)
    attrs = read_schema([log], times="time").attributes("A")
    assert [attrs[c] for c in ("sp", "plus", "inf", "n")] == ["str", "str", "str", "int"]
    r = run("match", "-e", "A AS a ; B AS b FILTER b.sp < a.sp AND b.n > a.n WITHIN 5 EVENTS", log,
            "--count")
    assert (r.exit_code, r.output.strip()) == (0, "1"), r.output


# --------------------------------------------------------------------------- NDJSON lines


@pytest.mark.parametrize("line,said", [
    ('{"type":"B","ts":2,"v":NaN}', "NaN is not a JSON number"),
    ('{"type":"B","ts":2,"v":-1e400}', "the number -1e400 is beyond a 64-bit float's range"),
    ('{"type":"B","ts":2', "not valid JSON: Expecting ',' delimiter at column 19"),
])
def test_an_ndjson_line_no_reader_reads_alike_is_named(tmp_path: Path, line: str, said: str) -> None:
    """polars said only ``InvalidNumber at character 23`` (of some line); Spark read NaN
    and a number beyond a float as numbers. The line is named, on both runners."""
    log = write(tmp_path / "l.ndjson", '{"type":"A","ts":1,"v":2.5}\n' + line + "\n")
    r = run("match", "-e", "A ; B", log, "--count")
    assert r.exit_code == 2, r.output
    assert f"error: {log}: line 2 (data row 1, 0-based): {said}" in r.output, r.output


def test_a_quoted_empty_csv_field_is_a_missing_value(tmp_path: Path) -> None:
    """polars read ``""`` as an empty text, so a column of numbers holding one was text
    locally and numbers on Spark (which reads it as missing): ``a.v < b.v`` compared ``""``
    with ``"5"``. An empty field, quoted or not, is missing on both runners."""
    log = write(tmp_path / "q.csv", 'type,time,v,w\nA,1,"",x\nB,2,5,""\nA,3,2,y\nB,4,5,z\n')
    attrs = read_schema([log]).attributes("B")
    assert (attrs["v"], attrs["w"]) == ("int", "str")
    frame = read_events([log]).frame()
    assert frame["v"].to_list() == [None, 5, 2, 5] and frame["w"].to_list() == ["x", None, "y", "z"]
    r = run("match", "-e", "A AS a ; B AS b FILTER a.v < b.v WITHIN 3 EVENTS", log, "--count")
    assert (r.exit_code, r.output.strip().splitlines()[-1]) == (0, "1"), r.output


# --------------------------------------------------------------------------- what --spark compares


@pytest.mark.parametrize("fmt,row,odd", [
    ("csv", "A,{i},{i}\n", "A,{i},x7\n"),
    ("ndjson", '{{"type":"A","ts":{i},"v":{i}}}\n', '{{"type":"A","ts":{i},"v":"x7"}}\n'),
])
def test_inferred_kinds_and_the_late_refusal_are_the_readers_own(tmp_path: Path, fmt: str,
                                                                  row: str, odd: str) -> None:
    """What ``--spark`` holds a local CSV or NDJSON file to (``spark.read``): the kinds the
    first 10,000 rows give its columns, and this reader's own refusal of a later value
    that does not fit them, message and hints alike; none when every value fits."""
    head = "type,ts,v\n" if fmt == "csv" else ""
    good, bad = tmp_path / f"good.{fmt}", tmp_path / f"bad.{fmt}"
    good.write_text(head + "".join(row.format(i=i) for i in range(10_500)))
    bad.write_text(head + "".join((odd if i == 10_200 else row).format(i=i) for i in range(10_500)))
    for log in (good, bad):
        assert inferred_kinds(str(log), fmt) == {"type": "str", "ts": "int", "v": "int"}
    assert late_value_refusal(str(good), fmt) is None
    with pytest.raises(LogError) as refused:
        read_schema([str(bad)])
    got = late_value_refusal(str(bad), fmt)
    assert got is not None and "row 10200" in got.message
    assert (got.message, got.hints) == (refused.value.message, refused.value.hints)


@pytest.mark.parametrize("text,breaks", [
    ('type,time,name\nA,1,"two\nlines"\nB,2,x\n', True),
    ('type,time,name\r\nA,1,"two\r\nlines"\r\n', True),
    ('type,time,name\nA,1,"say ""hi"""\nB,2,"x,y"\n', False),
    ("type,time\nA,1\n\nB,2\n", False),  # a blank line is a row of nulls to polars
    ("type,time\nA,1\nB,2\n\n\n", False),
    ("type,time\nA,1\nB,2", False),  # no final line break
    ("type,time\n", False),
])
def test_quoted_line_breaks_are_told_from_the_lines(tmp_path: Path, text: str, breaks: bool) -> None:
    """When ``--spark`` must read a CSV with ``multiLine`` (``spark.read``): only when a
    quoted field holds a line break, not for blank lines or a missing final break."""
    log = tmp_path / "l.csv"
    log.write_bytes(text.encode())
    assert csv_quoted_line_breaks(str(log)) is breaks


@pytest.mark.parametrize("text,line,row,what", [
    ('type,time,name\nA,1,ab"cd\nB,2,x\n', 2, 0, "a quote in a field that is not quoted"),
    ('type,time,name\nA,1,"q" tail\nB,2,x\n', 2, 0, "text after a quoted field's closing quote"),
    ('type,time,name\nA,1,"two\nlines"\nB,2,"say ""hi"""\nA,3,ab"cd\n', 5, 2,
     "a quote in a field that is not quoted"),
    ('type,time,name\r\nA,1,x\r\n\r\nB,2,"open\r\nC,3,z\r\n', 4, 2,
     "a quoted field that is never closed"),
])
def test_a_badly_quoted_csv_field_is_named(tmp_path: Path, text: str, line: int, row: int,
                                           what: str) -> None:
    """polars refused such a field naming no record (``CSV malformed: expected 0 rows,
    actual 2 rows, in chunk starting at row_offset 0``) or as ``not a str``: the reader
    names its line (a quoted line break and a blank line counted), row and column."""
    log = tmp_path / "l.csv"
    log.write_bytes(text.encode())
    with pytest.raises(LogError) as e:
        read_events([str(log)]).frame()
    assert e.value.message.startswith(f"{log}: line {line} (data row {row}, 0-based), column"
                                      f" 'name': {what}: "), e.value.message
    assert "RFC 4180" in e.value.hints[0]


def test_a_bad_rows_line_counts_the_quoted_line_breaks_before_it(tmp_path: Path) -> None:
    """A message named line ``row + 2``: after a quoted field holding a line break, the line
    before the bad one. The row stays the data row."""
    log = tmp_path / "l.csv"
    log.write_text('type,time,v,s\nA,0,0,"a\nb"\n' + "".join(f"A,{i},{i},x\n" for i in range(1, 10_500))
                   + 'A,10500,zz,"c\nd"\nA,10501,1,x\n')
    with pytest.raises(LogError, match=r"line 10503 \(data row 10500, 0-based\), column 'v'"):
        read_events([str(log)]).frame()
    timed = tmp_path / "t.csv"
    timed.write_text('type,time,v\nA,1,"two\nlines"\nB,2,"x\ny"\nA,x,4\n')
    with pytest.raises(LogError, match=r"line 6 \(data row 2, 0-based\): cannot parse time"):
        read_events([str(timed)])


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_an_integer_that_another_logs_floats_would_round_is_refused(tmp_path: Path, fmt) -> None:
    """A column of integers in one log and of floats in another is float64 in the event
    frame, which holds integers exactly only up to 2^53: 2^53 + 1 printed as
    ``9007199254740992.0`` in every output (exit 0), and compared equal to 2^53. It is
    refused naming its row (exit 2), also through the Python API; integers float64 holds
    exactly are read as before, and a count that never reads the column is not stopped."""
    import cer_cli

    ints = pl.DataFrame({"type": ["A", "A", "A"], "t": [0, 1, 2],
                         "v": pl.Series([2**53, 2**62, 2**53 + 1], dtype=pl.Int64)})
    floats = pl.DataFrame({"type": ["B"], "t": [3], "v": pl.Series([float("nan")])})
    for name, frame in [("i", ints), ("f", floats)]:
        getattr(frame, f"write_{fmt}")(tmp_path / f"{name}.{fmt}")
    logs = [str(tmp_path / f"i.{fmt}"), str(tmp_path / f"f.{fmt}")]
    got = run("match", "-e", "A ; B", *logs, "--format", "jsonl")
    assert got.exit_code == 2, got.output
    line = "line 4 (data row 2, 0-based)" if fmt == "csv" else "data row 2 (0-based)"
    assert f"i.{fmt}: {line}, column 'v': the integer 9007199254740993 would be rounded to" \
           " 9007199254740992" in got.output, got.output
    assert "give 'v' one type in every log" in got.output
    assert "Traceback" not in got.output
    with pytest.raises(LogError, match="the integer 9007199254740993 would be rounded"):
        cer_cli.match(logs={"i": ints, "f": floats}, query="A ; B", time_column="t")
    assert run("match", "-e", "A ; B", *logs, "--count").stdout.strip() == "3"
    # the first row holding one, whichever its column (as Spark's reader names it): was the
    # first column's first, row 2 here
    two = ints.with_columns(w=pl.Series([1, 2**53 + 1, 1], dtype=pl.Int64))
    getattr(two, f"write_{fmt}")(tmp_path / f"i.{fmt}")
    getattr(floats.with_columns(w=pl.lit(0.5)), f"write_{fmt}")(tmp_path / f"f.{fmt}")
    got = run("match", "-e", "A ; B", *logs, "--format", "jsonl")
    line = "line 3 (data row 1, 0-based)" if fmt == "csv" else "data row 1 (0-based)"
    assert got.exit_code == 2 and f"{line}, column 'w'" in got.output, got.output
    getattr(floats, f"write_{fmt}")(tmp_path / f"f.{fmt}")
    getattr(ints, f"write_{fmt}")(tmp_path / f"i.{fmt}")
    getattr(ints.head(2), f"write_{fmt}")(tmp_path / f"i.{fmt}")  # 2^53 and 2^62: exact
    exact = run("match", "-e", "A ; B", *logs, "--format", "jsonl")
    assert exact.exit_code == 0, exact.output
    values = [e["attrs"]["v"] for r in map(json.loads, exact.stdout.splitlines())
              for e in r["events"]]
    assert values == [2.0**62, None, 2.0**53, None]  # latest start first


# --------------------------------------------------------------------------- columns read


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_count_of_a_log_without_type_and_time_columns_counts_its_events(tmp_path: Path,
                                                                        fmt: str) -> None:
    """``--count`` reads only the type, time and queried columns: a log with neither, whose
    columns the query did not read, was read as no column, and so (in polars) as no row."""
    frame = pl.DataFrame({"v": [1, 2, 3], "w": ["a", "b", "c"]})
    log = tmp_path / f"S.{fmt}"
    frame.write_csv(log) if fmt == "csv" else frame.write_parquet(log)
    assert run("match", "-e", "S", str(log), "--count").stdout == "3\n"
    assert run("match", "-e", "S ; S", str(log), "--count").stdout == "3\n"
    assert run("match", "-e", "S ; S WITHIN 1 EVENTS", str(log), "--count").stdout == "2\n"
    assert read_events([str(log)], columns=set()).n_events == 3


def test_the_time_column_named_exactly_wins_over_one_differing_in_case(tmp_path: Path) -> None:
    """``type,time,Time``: the last of the columns named time in any case was taken, so the
    events were ordered by ``Time`` (B before A: no match of ``A ; B``, exit 0)."""
    log = write(tmp_path / "l.csv", "type,time,Time\nA,1,5\nB,2,3\n")
    assert read_schema([log]).time_column == "time"
    assert run("match", "-e", "A ; B", log, "--count").stdout == "1\n"
    assert read_schema([write(tmp_path / "o.csv", "type,Time,v\nA,1,5\n")]).time_column == "Time"
    two = write(tmp_path / "t.csv", "type,TIME,Time\nA,1,5\nB,2,3\n")
    r = run("match", "-e", "A ; B", two, "--count")
    assert r.exit_code == 2, r.output
    assert (f"error: {two}: cannot tell the time column: 'TIME' and 'Time' differ only in case,"
            " and none is named 'time'\n  hint: pass --time-column TIME") in r.output
    assert run("match", "-e", "A ; B", two, "--time-column", "Time", "--count").stdout == "0\n"


@pytest.mark.parametrize("value", ["9223372036854775808", "-9223372036854775809"])
def test_an_integer_time_beyond_int64_is_refused_naming_its_row(tmp_path: Path, value: str) -> None:
    """polars reads such a CSV column as Int128 (a Parquet one may be UInt64); casting it
    to int64 failed naming no row (``conversion from `i128` to `i64` failed``)."""
    log = write(tmp_path / "l.csv", f"type,time\nA,1\nB,{value}\nC,3\n")
    r = run("match", "-e", "A ; B", log, "--count")
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: {log}: line 3 (data row 1, 0-based): time value {value}"
                               " in column 'time' is beyond a 64-bit integer's range"), r.output
    unsigned = tmp_path / "u.parquet"
    pl.DataFrame({"type": ["A", "B"], "time": pl.Series([1, 2**63], dtype=pl.UInt64)}
                 ).write_parquet(unsigned)
    with pytest.raises(LogError, match=r"data row 1 \(0-based\): time value 9223372036854775808"
                                       " in column 'time' is beyond a 64-bit"):
        read_events([str(unsigned)])
    edge = write(tmp_path / "e.csv", "type,time\nA,-9223372036854775808\nB,9223372036854775807\n")
    assert run("match", "-e", "A ; B", edge, "--count").stdout == "1\n"


def test_a_float_or_decimal_time_with_a_unit_is_its_exact_nanoseconds(tmp_path: Path) -> None:
    """``x * 1e9`` was a float product, 256 ns apart at 1.7e18: 1700000001.13 s became
    ...1.129999872 or ...1.130000128, so events 1.13 s apart fell outside ``WITHIN 1130
    milliseconds`` (exit 0, no match), and 27% of the pairs of a log 13 ms apart."""
    log = write(tmp_path / "f.csv", "type,time\nA,1700000000.00\nB,1700000001.13\n")
    r = run("match", "-e", "A ; B WITHIN 1130 milliseconds", log, "--time-unit", "s",
            "--format", "jsonl")
    assert [json.loads(line)["end_time"] for line in r.stdout.splitlines()] == \
        ["2023-11-14T22:13:21.130000"], r.output
    steps = write(tmp_path / "s.csv", "type,time\n" + "".join(
        f"{'AB'[i % 2]},{1700000000 + i * 13 / 1000!r}\n" for i in range(200)))
    assert run("match", "-e", "A ; B WITHIN 13 milliseconds", steps, "--time-unit", "s",
               "--count").stdout == "100\n"
    ms = write(tmp_path / "m.csv", "type,time\nA,1700000000000.5\nB,1700000001130.5\n")
    assert read_events([ms], times=TimeOptions(unit=("ms",))).frame()[TIME].to_list() == [
        1_700_000_000_000_500_000, 1_700_000_001_130_500_000]
    # a decimal by its digits: 89 ns apart, one float64 (and so a tie: B, row 0, first)
    dec = tmp_path / "d.parquet"
    pl.DataFrame({"type": ["B", "A"], "time": pl.Series(
        [Decimal("1700000000.123456789"), Decimal("1700000000.123456700")],
        dtype=pl.Decimal(38, 9))}).write_parquet(dec)
    frame = read_events([str(dec)], times=TimeOptions(unit=("s",))).frame()
    assert frame[TIME].to_list() == [1_700_000_000_123_456_700, 1_700_000_000_123_456_789]
    assert frame[TYPE].to_list() == ["A", "B"]
    # from 2^53 on a float is a whole number, taken as it is: its shortest text (what a
    # CSV of it holds) is 1.7000000001234568e+18, 232 ns off
    big = tmp_path / "n.parquet"
    pl.DataFrame({"type": ["A", "B"], "time": [1700000000123456768.0, 2.0**53 + 2]}
                 ).write_parquet(big)
    assert read_events([str(big)], times=TimeOptions(unit=("ns",))).frame()[TIME].to_list() \
        == [2**53 + 2, 1700000000123456768]
