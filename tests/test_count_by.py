"""Counts by key (``cer match --count --by KEY``, ``cer_cli.count(..., by=...)``), checked
against the matches themselves grouped by hand, and the DataFrame API's options (several
named logs, pandas / pyarrow frames, ``time_format``, ``open_absence``, the errors)."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter

import polars as pl
import pytest

import cer_cli
from tests.test_cli_match import ROOT, run

FLIGHTS = ROOT / "samples/flights.parquet"
THRICE = ROOT / "queries/flights_delayed_thrice.cel"
STOCKS = ROOT / "samples/stocks.csv"
PAIR = "SELECT * WHERE SELL AS s ; BUY AS b FILTER s[price > 100] WITHIN 10 EVENTS"


def _wide(query: str, sample) -> list[dict]:
    result = run("match", query if not str(query).endswith(".cel") else str(query),
                 str(sample), "--shape", "wide", "--format", "jsonl", "--allow-unbounded")
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def _csv_counts(*args: str) -> dict[tuple, int]:
    result = run("match", *args, "--count", "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.reader(io.StringIO(result.stdout)))
    return {tuple(r[:-1]): int(r[-1]) for r in rows[1:]}


def test_count_by_a_partition_key_is_the_matches_per_key():
    """``--by tailnum`` (counted by the engine) gives the number of matches of each key
    the matches themselves report, most first."""
    want = Counter(m["partition"]["tailnum"] for m in _wide(THRICE, FLIGHTS))
    got = _csv_counts(str(THRICE), str(FLIGHTS), "--by", "tailnum")
    assert got == {(k,): n for k, n in want.items()}
    result = run("match", str(THRICE), str(FLIGHTS), "--count", "--by", "tailnum",
                 "--format", "jsonl")
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["matches"] for r in rows] == sorted((r["matches"] for r in rows), reverse=True)
    assert sum(r["matches"] for r in rows) == int(run("match", str(THRICE), str(FLIGHTS),
                                                      "--count").stdout)


def test_count_by_a_variables_column_and_by_stream():
    """``--by d1.carrier`` (the event the variable binds) and ``--by stream`` enumerate
    the matches: the same figures as grouping the wide shape."""
    wide = _wide(THRICE, FLIGHTS)
    got = _csv_counts(str(THRICE), str(FLIGHTS), "--by", "d1.carrier", "--by", "stream")
    assert got == {(k, "flights"): n for k, n in Counter(m["d1.carrier"] for m in wide).items()}
    # as a table on the terminal too
    table = run("match", str(THRICE), str(FLIGHTS), "--count", "--by", "d1.carrier")
    assert table.exit_code == 0, table.output
    assert "d1.carrier" in table.stdout and "matches" in table.stdout


def test_count_by_prints_values_literally_and_refuses_nested_keys(tmp_path):
    """The counts' table prints a value ``[/]`` as text (rich read it as markup: an internal
    error); a list or struct column cannot key a count: exit 2 saying so (it was an
    internal error from polars)."""
    log = tmp_path / "l.parquet"
    pl.DataFrame({"type": ["A", "B"], "time": [1, 2], "s": ["[/]", "x"], "lst": [["a"], []],
                  "st": [{"p": 1}, None]}).write_parquet(log)
    table = run("match", "-e", "A AS a ; B", str(log), "--count", "--by", "a.s", "--format",
                "table")
    assert table.exit_code == 0 and "[/]" in table.stdout, table.output
    for key, what in (("a.lst", "lists"), ("a.st", "structs")):
        r = run("match", "-e", "A AS a ; B", str(log), "--count", "--by", key)
        assert r.exit_code == 2, r.output
        assert r.output.startswith(f"error: --by {key}: its values are {what}, which cannot"
                                   " key a count"), r.output


def test_count_by_prints_exact_big_integers():
    """Without a window a partition has 2^n - 1 matches: counted, not enumerated, and
    printed exactly."""
    rows = "type,id\n" + "".join(f"A,{i % 2}\n" for i in range(140)) + "B,0\nB,1\n"
    result = CliRunnerFile(rows).run("-e", "SELECT * WHERE A+ ; B PARTITION BY [id]",
                                     "--count", "--by", "id", "--format", "csv",
                                     "--allow-unbounded")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1:] == [f"0,{2**70 - 1}", f"1,{2**70 - 1}"]


class CliRunnerFile:
    """``cer match`` over a CSV log written from text."""

    def __init__(self, text: str) -> None:
        import tempfile

        self.dir = tempfile.mkdtemp()
        self.path = f"{self.dir}/log.csv"
        with open(self.path, "w") as f:
            f.write(text)

    def run(self, *args: str):
        return run("match", *args[:2], self.path, *args[2:])


@pytest.mark.parametrize("args, message", [
    (["--by", "tailnm"], "no key 'tailnm'"),
    (["--by", "d1.carier"], "have no column"),
    (["--by", "x.carrier"], "no key 'x.carrier'"),
])
def test_a_wrong_key_is_refused_naming_the_keys(args, message):
    result = run("match", str(THRICE), str(FLIGHTS), "--count", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    if args[1] == "tailnm":
        assert "did you mean tailnum" in result.output and "PARTITION BY tailnum" in result.output


def test_by_goes_with_count_and_printed_formats():
    assert run("match", str(THRICE), str(FLIGHTS), "--by", "tailnum").exit_code == 2
    result = run("match", str(THRICE), str(FLIGHTS), "--count", "--by", "tailnum",
                 "--format", "parquet")
    assert result.exit_code == 2 and "table, jsonl or csv" in result.output


def test_api_count_by_returns_a_polars_frame():
    """``cer_cli.count(..., by=...)``: the rows ``--count --by`` prints, typed as the
    columns they read."""
    df = pl.read_parquet(FLIGHTS)
    query = THRICE.read_text()
    got = cer_cli.count(df, query, by="tailnum", stream="flights")
    assert isinstance(got, pl.DataFrame) and got.columns == ["tailnum", "matches"]
    cli = _csv_counts(str(THRICE), str(FLIGHTS), "--by", "tailnum")
    assert {(k,): n for k, n in got.iter_rows()} == cli
    by_delay = cer_cli.count(df, query, by=["d1.delay"], stream="flights")
    assert by_delay.schema["d1.delay"] == pl.Int64
    wide = cer_cli.match(df, query, shape="wide", stream="flights")
    want = wide.group_by("d1.delay").len("matches")
    assert dict(by_delay.iter_rows()) == dict(want.iter_rows())
    with pytest.raises(cer_cli.QueryError, match="by='nope'"):
        cer_cli.count(df, query, by="nope", stream="flights")


# --------------------------------------------------------------------------- the APIs' options


def test_text_dates_hint_names_the_option_of_the_front_end(tmp_path):
    """The ambiguous-date hint says ``time_format=`` to an API user, ``--time-format`` on
    the command line; with it the API reads the dates."""
    df = pl.DataFrame({"type": ["A", "B"], "t": ["01/02/2024", "03/02/2024"]})
    with pytest.raises(cer_cli.LogError) as e:
        cer_cli.count(df, "A ; B", time_column="t")
    assert "time_format='%d/%m/%Y'" in str(e.value) and "--time-format" not in str(e.value)
    df.write_csv(tmp_path / "d.csv")
    cli = run("match", "-e", "A ; B", str(tmp_path / "d.csv"), "--time-column", "t")
    assert cli.exit_code == 2 and "--time-format '%d/%m/%Y'" in cli.output
    got = cer_cli.match(df, "A ; B WITHIN 3 days", time_column="t", time_format="%d/%m/%Y",
                        shape="wide")
    assert got.height == 1
    assert cer_cli.count(df, "A ; B WITHIN 1 day", time_column="t",
                         time_format="%d/%m/%Y") == 0


def test_named_logs_are_the_clis_name_path_arguments(tmp_path):
    """``logs={"W": w, "F": f}`` with per-log options = ``cer match q W=w.csv F=f.csv``."""
    w = pl.DataFrame({"kind": ["HOT", "HOT"], "at": [0, 100], "temp": [30, 31]})
    f = pl.DataFrame({"type": ["LATE", "LATE"], "ts": [50_000, 150_000], "delay": [20, 40]})
    w.write_csv(tmp_path / "w.csv")
    f.write_csv(tmp_path / "f.csv")
    query = "SELECT * WHERE W>HOT AS h ; F>LATE AS l WITHIN 2 minutes"
    cli = run("match", "-e", query, f"W={tmp_path / 'w.csv'}", f"F={tmp_path / 'f.csv'}",
              "--type-column", "W=kind", "--time-column", "W=at", "--time-column", "F=ts",
              "--time-unit", "W=s", "--time-unit", "F=ms", "--count")
    assert cli.exit_code == 0, cli.output
    options = {"type_column": {"W": "kind"}, "time_column": {"W": "at", "F": "ts"},
               "time_unit": {"W": "s", "F": "ms"}}
    got = cer_cli.count(query=query, logs={"W": w, "F": f}, **options)
    assert got == int(cli.stdout) == 2  # (0 s, 50 s), (100 s, 150 s)
    wide = cer_cli.match(query=query, logs={"W": w, "F": f}, shape="wide", **options)
    assert wide.height == 2
    assert cer_cli.count(query=query, logs={"W": w, "F": f}, by="stream", **options
                         ).rows() == [("F + W", 2)]
    with pytest.raises(cer_cli.LogError, match=r"time_unit=\{'X': 's'\}: no log named 'X'"):
        cer_cli.count(query=query, logs={"W": w, "F": f}, time_unit={"X": "s"})


def test_pandas_and_pyarrow_frames_give_the_polars_answers():
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    df = pl.read_csv(STOCKS)
    want = cer_cli.match(df, PAIR, shape="wide")
    assert want.height > 0
    assert cer_cli.match(df.to_pandas(), PAIR, shape="wide").equals(want)
    assert cer_cli.match(df.to_arrow(), PAIR, shape="wide").equals(want)
    assert cer_cli.count(df.to_pandas(), PAIR) == want.height
    mixed = pd.DataFrame({"type": ["A", "B"], "v": [1, "x"]})
    with pytest.raises(cer_cli.LogError, match="<events>: cannot convert"):
        cer_cli.count(mixed, "A ; B")
    with pytest.raises(TypeError, match="pyarrow Table"):
        cer_cli.count([{"type": "A"}], "A")
    assert isinstance(pa.table({"type": ["A"]}), pa.Table)
    # a named DatetimeIndex is a column: the time column a WITHIN measures
    timed = pd.DataFrame({"type": ["A", "B", "B"]}, index=pd.DatetimeIndex(
        ["2024-01-01 10:00", "2024-01-01 10:30", "2024-01-01 12:00"], name="ts"))
    assert cer_cli.count(timed, "A ; B WITHIN 1 hour") == 1


def test_open_absence_report_is_the_clis():
    query = "SELECT * WHERE A AS a ; !B WITHIN 5 EVENTS"
    df = pl.DataFrame({"type": ["A", "C", "A", "C"]})
    assert cer_cli.count(df, query) == 0
    assert cer_cli.count(df, query, open_absence="report") == 2
    with pytest.raises(ValueError, match="open_absence"):
        cer_cli.count(df, query, open_absence="yes")


def test_errors_are_exported_from_cer_cli_and_cer_cli_api():
    from cer_cli import api

    assert cer_cli.QueryError is api.QueryError and cer_cli.LogError is api.LogError
    with pytest.raises(cer_cli.QueryError):
        cer_cli.count(pl.DataFrame({"type": ["A"]}), "A ;")


# --------------------------------------------------------------------------- memory


def _peak_mb(args: list[str]) -> float:
    """Peak RSS in MB of ``cer match ARGS`` in a child of its own (``tests.peak``)."""
    from tests import peak

    return peak.cer_match([*args, "--no-progress"], cwd=ROOT).peak_mb


def test_counting_by_a_variables_column_is_bounded_by_the_window(tmp_path):
    """``--by x.v`` enumerates the matches, but batch by batch with a count per value: from
    5k to 50k events it grows no more than ``--count`` of the same query (the log read
    whole) plus a margin, although the matches grow tenfold."""
    from tests.test_memory_growth import MARGIN, _log

    query = "SELECT * WHERE A AS x ; B AS y WITHIN 10 EVENTS"
    small, big = (_log(tmp_path / f"log-{n}.csv", n) for n in (5_000, 50_000))
    _peak_mb(["-e", query, small, "--count"])  # compiles the kernel once, outside the measure
    count = [_peak_mb(["-e", query, log, "--count"]) for log in (small, big)]
    by = [_peak_mb(["-e", query, log, "--count", "--by", "x.v", "--format", "csv"])
          for log in (small, big)]
    assert by[1] - by[0] <= count[1] - count[0] + MARGIN, (count, by)
