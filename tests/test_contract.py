"""The log contract (cer_cli/io/contract.py): its decisions, and that the local reader and
the Spark job, which both go through it, see every log the same way.

The unit tests are fast. The ``spark`` tests read every sample and a set of hostile logs
both ways (``read_schema`` and ``spark_schema``, the local and the Spark event frame) and
require equal schemas, equal TIME values, and the same input errors.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import glob
import itertools
import os
import shutil
from pathlib import Path, PurePosixPath

import polars as pl
import pyarrow as pa
import pytest

from cer_cli.events import POS, ROW, STREAM, TIME, TYPE
from cer_cli.io import contract
from cer_cli.io.contract import LogDecision, LogError, TimeOptions
from cer_cli.io.read import read_events, read_schema
from tests.builders import run as _cli

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted(glob.glob(str(ROOT / "samples" / "*.csv")) + glob.glob(str(ROOT / "samples" / "*.parquet")))


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    "path",
    ["a.csv", ".csv", "x.", "a.tar.CSV", "..csv", "a..csv", "noext", "dir/a.b/c", ".hidden.csv",
     "s3://bucket/logs/x.parquet", "out.parquet/", "a=b.csv"],
)
def test_stream_name_is_the_stem(path: str) -> None:
    assert contract.stream_name("", path) == PurePosixPath(path).stem
    assert contract.stream_name("S", path) == "S"


def test_split_log_arg() -> None:
    assert contract.split_log_arg("S1=logs/a.csv") == ("S1", "logs/a.csv")
    assert contract.split_log_arg("a=b.csv") == ("a", "b.csv")
    assert contract.split_log_arg("logs/a=b.csv") == ("", "logs/a=b.csv")  # not an identifier
    assert contract.split_log_arg("1x=a.csv") == ("", "1x=a.csv")
    assert contract.split_log_arg("S=") == ("", "S=")


@pytest.mark.parametrize("head,sep", [
    (b"type,time,v\nA,1,2\n", ","),
    (b"type;time;v\nA;1;2,5\n", ";"),  # a decimal comma in a value: the header decides
    (b"type\ttime\tv\r\nA\t1\t2\r\n", "\t"),
    (b"type|time|v\n", "|"),
    (b"\xef\xbb\xbftype;time\n", ";"),  # a byte-order mark
    (b'"type,name";"time"\n', ";"),  # a comma inside a quoted name
    (b"type,note;x\n", ","),  # the comma wins
    (b"type\n", ","),
    (b"", ","),
])
def test_csv_separator(head: bytes, sep: str) -> None:
    assert contract.csv_dialect("l.csv", head) == sep


@pytest.mark.parametrize("head,columns", [(b"type,time,type\n", "columns 1 and 3"),
                                          (b'a;"b;c";a\r\n', "columns 1 and 3"),
                                          (b"t\tx\tx\n", "columns 2 and 3")])
def test_a_csv_header_naming_a_column_twice_is_refused(head: bytes, columns: str) -> None:
    with pytest.raises(LogError) as e:
        contract.csv_dialect("l.csv", head)
    assert e.value.message.endswith(f"twice ({columns})")
    contract.csv_dialect("l.csv", b'"a,b",a\n')  # one name holds the other
    assert contract.csv_dialect("l.csv", b"type;time;;\n") == ";"  # a spreadsheet's empty ones


def test_a_column_without_a_name_is_called_by_its_position() -> None:
    """Spark's name for a CSV's unnamed column, for every reader and format."""
    assert contract.csv_header("l.csv", b"type;time;;v;\nA;1;;2;\n") == (
        ";", ["type", "time", "_c2", "v", "_c4"])
    assert contract.csv_header("l.csv", b"type,ti") == (",", None)  # the header not all there
    assert contract.column_names(["", "a", ""]) == ["_c0", "a", "_c2"]
    with pytest.raises(LogError) as e:  # the name it would get is another column's
        contract.csv_header("l.csv", b"type,time,,_c2\n")
    assert e.value.message == ("l.csv: column 3 has no name, and a column without one is called"
                               " by its position from 0, '_c2': the name of column 4")
    assert e.value.hints == ["name column 3"]
    with pytest.raises(LogError, match="column 4 has no name.*the name of column 1"):
        contract.check_columns("l.parquet", ["_c3", "type", "time", "_c3"])


def test_a_csv_header_with_two_separators_and_no_comma_is_refused() -> None:
    with pytest.raises(LogError) as e:
        contract.csv_dialect("l.csv", b"type;time|v\n")
    assert e.value.message == ("l.csv: cannot tell the CSV's field separator: its header line"
                               " holds ';' and '|' but no comma")


def test_check_utf8_names_the_line_of_the_first_byte_that_is_not() -> None:
    with pytest.raises(LogError) as e:
        contract.check_utf8("l.csv", b"type,name\nA,ok\nA,caf\xe9\n", line=1)
    assert e.value.message == "l.csv, line 3: not UTF-8 text: byte 0xe9 after 'A,caf'"
    assert "iconv" in e.value.hints[0]
    with pytest.raises(LogError, match="line 12:"):
        contract.check_utf8("l.csv", b"A,x\nA,\xff\n", line=11)
    contract.check_utf8("l.csv", "A,caf\u00e9".encode()[:-1])  # cut by the sample: no error
    with pytest.raises(LogError, match="line 1:"):
        contract.check_utf8("l.csv", "A,caf\u00e9".encode()[:-1], complete=True)
    with pytest.raises(LogError, match="line 1:"):  # the separator's look at the header
        contract.csv_dialect("l.csv", b"type;caf\xe9\n")


def test_local_path_of_a_log_or_output_argument() -> None:
    assert contract.local_path("logs/a.csv") == "logs/a.csv"
    assert contract.local_path("file:///tmp/a.csv") == "/tmp/a.csv"
    assert contract.local_path("hdfs://nn:8020/logs") is None
    assert contract.local_path("s3a://bucket/a.csv") is None
    assert contract.local_path("NAME=x") == "NAME=x"  # not a URI


def test_log_format() -> None:
    assert contract.log_format("a.CSV") == "csv"
    assert contract.log_format("a.pq") == "parquet"
    assert contract.log_format("a.jsonl") == "ndjson"
    assert contract.log_format("a.tsv") == "csv"
    assert contract.log_format("a.txt", "csv") == "csv"
    with pytest.raises(LogError, match="unsupported log format 'xml'"):
        contract.log_format("a.csv", "xml")
    with pytest.raises(LogError) as e:
        contract.log_format("dir/a.txt")
    assert e.value.message == "unsupported log format '.txt' for dir/a.txt"
    assert any(".parquet" in h for h in e.value.hints)
    with pytest.raises(LogError, match="'\\(no extension\\)'"):
        contract.log_format("logs")
    # a directory: the one format of its files (Spark's part files, _SUCCESS, .crc ignored)
    assert contract.log_format("out", None, ["_SUCCESS", "part-0.parquet", ".part-0.parquet.crc"]) == "parquet"
    with pytest.raises(LogError):
        contract.log_format("out", None, ["a.csv", "b.parquet"])


# --------------------------------------------------------------------------- kinds


ARROW_KINDS = [
    (pa.int8(), "int"), (pa.int64(), "int"), (pa.uint64(), "int"), (pa.float32(), "float"),
    (pa.float64(), "float"), (pa.decimal128(10, 2), "float"), (pa.string(), "str"),
    (pa.large_string(), "str"), (pa.dictionary(pa.int32(), pa.string()), "str"),
    (pa.bool_(), "bool"), (pa.timestamp("us"), "datetime"), (pa.timestamp("ns", "UTC"), "datetime"),
    (pa.date32(), "datetime"), (pa.null(), "null"), (pa.list_(pa.int64()), None),
    (pa.struct([("a", pa.int64())]), None), (pa.binary(), None), (pa.time64("us"), None),
    (pa.duration("s"), None),
]


@pytest.mark.parametrize(("arrow", "kind"), ARROW_KINDS, ids=[str(a) for a, _ in ARROW_KINDS])
def test_kind_of_arrow_types(arrow, kind) -> None:
    assert contract.kind_of(arrow) == kind


POLARS = [pl.Int8, pl.Int32, pl.Int64, pl.UInt32, pl.UInt64, pl.Float32, pl.Float64,
          pl.Decimal(10, 2), pl.String, pl.Categorical, pl.Enum(["a"]), pl.Boolean, pl.Date,
          pl.Datetime("us"), pl.Datetime("ns", "UTC"), pl.Null, pl.List(pl.Int64), pl.Time,
          pl.Binary, pl.Object]


def test_kind_of_polars_dtypes() -> None:
    want = {pl.Int8: "int", pl.Int32: "int", pl.Int64: "int", pl.UInt32: "int", pl.UInt64: "int",
            pl.Float32: "float", pl.Float64: "float", pl.Decimal(10, 2): "float",
            pl.String: "str", pl.Categorical: "str", pl.Enum(["a"]): "str", pl.Boolean: "bool",
            pl.Date: "datetime", pl.Datetime("us"): "datetime",
            pl.Datetime("ns", "UTC"): "datetime", pl.Null: "null"}
    for d in POLARS:
        assert contract.kind_of(d) == want.get(d), d


ALL_POLARS = [*POLARS, pl.Int16, pl.UInt8, pl.UInt16, pl.Int128, pl.UInt128, pl.Float16,
              pl.Decimal, pl.Datetime, pl.Datetime("ms", "Europe/Paris"), pl.Duration("us"),
              pl.Array(pl.Int64, 2), pl.Struct({"a": pl.Int64}), pl.Unknown, pl.Int64(),
              pl.String(), pl.Categorical()]


@pytest.mark.parametrize("dtype", ALL_POLARS, ids=[repr(d) for d in ALL_POLARS])
def test_kind_of_a_polars_dtype_is_the_kind_of_its_arrow_type(dtype) -> None:
    """kind_of maps polars dtypes by name (no pyarrow import, issue #15): the same kinds as
    the dtypes' Arrow types; dtypes without one have no kind (Object), but Int128 is an
    integer (predicates compare it exactly), and a frame's Unknown type is no column's."""
    try:
        arrow = pl.Series("x", [], dtype=dtype).to_arrow().type
    except Exception:
        want = "int" if dtype == pl.Int128 else None
    else:
        want = None if dtype == pl.Unknown else contract.kind_of(arrow)
    assert contract.kind_of(dtype) == want


def test_unify_kinds_is_the_kind_of_polars_supertype() -> None:
    """Across logs a column's kind is its values' common type, as the local frame gets it."""
    dtypes = [pl.Int64, pl.Float64, pl.String, pl.Boolean, pl.Datetime("us"), pl.Null]
    for a, b in itertools.product(dtypes, repeat=2):
        frames = [pl.DataFrame(schema={"x": a}), pl.DataFrame(schema={"x": b})]
        try:
            common = pl.concat(frames, how="diagonal_relaxed").schema["x"]
        except pl.exceptions.PolarsError:
            with pytest.raises(ValueError):
                contract.unify_kinds(contract.kind_of(a), contract.kind_of(b))
            continue
        assert contract.unify_kinds(contract.kind_of(a), contract.kind_of(b)) == contract.kind_of(common), (a, b)


# --------------------------------------------------------------------------- columns


def _log(where: str, columns: dict, type_column: str | None = "type", stream: str = "s") -> LogDecision:
    return LogDecision(where, stream, columns, type_column)


def test_type_column() -> None:
    assert contract.type_column("p", ["type", "a"], None) == "type"
    assert contract.type_column("p", ["a"], None) is None
    assert contract.type_column("p", ["kind", "a"], "kind") == "kind"
    with pytest.raises(LogError) as e:
        contract.type_column("p", ["a", "b"], "kind")
    assert e.value.message == "p: no type column 'kind'" and e.value.hints == ["columns: a, b"]


def test_reserved_columns() -> None:
    contract.check_columns("p", ["a", "_cer_x"])
    with pytest.raises(LogError, match="reserved"):
        contract.check_columns("p", ["a", "__cer_x"])


def test_time_column_detection() -> None:
    dated = _log("p", {"type": "str", "ts": "int", "at": "datetime"})
    assert contract.time_column([dated], None) == "at"  # the only datetime column wins
    two = _log("p", {"type": "str", "a": "datetime", "b": "datetime", "Time": "int"})
    assert contract.time_column([two], None) == "Time"  # else by name, case-insensitive
    order = _log("p", {"type": "str", "timestamp": "str", "ts": "float"})
    assert contract.time_column([order], None) == "ts"  # ts before time before timestamp
    flag = _log("p", {"type": "str", "ts": "bool"})
    assert contract.time_column([flag], None) is None  # a bool is no time
    typed = _log("p", {"ts": "datetime", "v": "int"}, type_column="ts")
    assert contract.time_column([typed], None) is None  # the type column is no time
    assert contract.time_column([flag], "ts") == "ts"  # given: taken as it is


def test_time_column_must_be_in_every_log() -> None:
    a = _log("a.csv", {"type": "str", "ts": "int"})
    b = _log("b.csv", {"type": "str", "v": "int"}, stream="b")
    with pytest.raises(LogError) as e:
        contract.time_column([a, b], None)
    assert e.value.message == "b.csv has no time column, but a.csv has 'ts'"
    assert e.value.hints == ["pass --time-column b=COLUMN to name its time column"]
    with pytest.raises(LogError, match="b.csv has no time column"):
        contract.time_column([a, b], "ts")  # a bare name: b falls back to the rules
    with pytest.raises(LogError) as e:
        contract.time_column([a, b], "at")  # a bare name that no log has is a typo
    assert e.value.message == "a.csv: no time column 'at'"
    with pytest.raises(LogError, match="b.csv: no time column 'ts'"):
        contract.time_column([a, b], ["b=ts"])  # named for b: must be in b


def test_time_column_per_log() -> None:
    """#13 item 8: logs differ in their time columns; each log is detected on its own."""
    a = _log("a.csv", {"type": "str", "ts": "int"}, stream="a")
    b = _log("b.csv", {"type": "str", "at": "datetime", "v": "int"}, stream="b")
    got = contract.time_columns([a, b])
    assert [g.time_column for g in got] == ["ts", "at"]
    c = _log("c.csv", {"type": "str", "when": "int", "ts": "int"}, stream="c")
    got = contract.time_columns([a, c], ["c=when"])
    assert [g.time_column for g in got] == ["ts", "when"]
    got = contract.time_columns([a, c], "when")  # bare: every log that has it
    assert [g.time_column for g in got] == ["ts", "when"]
    with pytest.raises(LogError, match="--time-column x=ts: no log named 'x'"):
        contract.time_columns([a, c], ["x=ts"])


def test_type_column_per_log() -> None:
    """#13 item 8: a bare --type-column applies to the logs that have it; the others fall
    back to the rules (``type``, else the stream name)."""
    logs = [("c.csv", "clicks", ["event_type", "ts"]), ("o.parquet", "Order", ["id", "ts"]),
            ("t.csv", "t", ["type", "ts"])]
    assert contract.type_columns(logs, "event_type") == ["event_type", None, "type"]
    assert contract.type_columns(logs, ["clicks=event_type"]) == ["event_type", None, "type"]
    with pytest.raises(LogError, match="o.parquet: no type column 'event_type'"):
        contract.type_columns(logs, ["Order=event_type"])
    with pytest.raises(LogError, match="c.csv: no type column 'kind'"):
        contract.type_columns(logs, "kind")


def test_time_units() -> None:
    """#13 item 1: --time-unit makes a numeric time an instant; a datetime needs none."""
    a = _log("a.csv", {"type": "str", "ts": "int"}, stream="a")
    b = _log("b.csv", {"type": "str", "ts": "datetime"}, stream="b")
    got = contract.time_columns([a, b], contract.TimeOptions(unit=("ms",)))
    assert [g.time_unit for g in got] == ["ms", None]  # bare: the numeric logs only
    assert contract.time_kind("a", "ts", "int", unit="ms") == "datetime"
    assert contract.column_kinds(got[:1], "ts")["ts"] == "datetime"
    with pytest.raises(LogError, match="b.csv: --time-unit s is for a numeric time column"):
        contract.time_columns([a, b], contract.TimeOptions(unit=("b=s",)))
    with pytest.raises(LogError, match="--time-unit 'sec' is not a unit"):
        contract.time_columns([a], contract.TimeOptions(unit=("sec",)))
    assert contract.unit_bound("s") == (2**63 - 1) // 10**9


def test_time_kinds() -> None:
    assert contract.time_kind("p", "t", "int") == "int"  # integers stay as they are
    assert contract.time_kind("p", "t", "float") == "float"
    assert contract.time_kind("p", "t", "str") == "datetime"  # ISO strings are parsed
    assert contract.time_kind("p", "t", "datetime") == "datetime"
    with pytest.raises(LogError, match="p: time column 't' has unusable type Boolean"):
        contract.time_kind("p", "t", "bool", "Boolean")
    assert contract.time_storage("int") == contract.time_storage("datetime") == "int64"
    assert contract.time_storage("float") == "float64"
    assert contract.common_time_kind("t", [("a", "int"), ("b", "int")]) == "int"
    with pytest.raises(LogError, match="'t' holds int values in a but datetime in b"):
        contract.common_time_kind("t", [("a", "int"), ("c", "int"), ("b", "datetime")])


def test_column_kinds_and_schema() -> None:
    a = _log("a", {"type": "str", "ts": "str", "x": "int", "l": None}, stream="A")
    b = _log("b", {"v": "bool", "ts": "datetime", "x": "float"}, type_column=None, stream="B")
    kinds = contract.column_kinds([a, b], "ts")
    assert kinds == {"ts": "datetime", "x": "float", "l": None, "v": "bool"}
    assert contract.attribute_columns(a, kinds) == ["ts", "x"]
    present = [
        {"T": {"ts": True, "x": False}, "H": {"ts": True, "x": True}, None: {"ts": True, "x": True}},
        {"B": {"v": True, "ts": True, "x": False}},
    ]
    schema = contract.build_schema([a, b], present, kinds, "ts")
    # a column of a log is an attribute of its types; all-null for a type: ``empty``
    assert schema.event_types == {"H": {"ts": "datetime", "x": "float"},
                                  "T": {"ts": "datetime", "x": "float"},
                                  "B": {"v": "bool", "ts": "datetime", "x": "float"}}
    assert schema.empty == {"T": {"x"}, "B": {"x"}}
    assert schema.refused == {"l": "an unsupported type"}
    assert schema.streams == {"A": ("H", "T"), "B": ("B",)}
    assert schema.time_column == "ts"
    with pytest.raises(LogError, match="incompatible columns: 'v' is bool in b but datetime in c"):
        contract.column_kinds([b, _log("c", {"v": "datetime"}, None)], None)


def test_epoch_unit_is_the_one_that_puts_the_values_in_plausible_years() -> None:
    assert contract.epoch_unit(1_700_000_000, 1_700_000_100) == "s"
    assert contract.epoch_unit(1.7e12, 1.8e12) == "ms"
    assert contract.epoch_unit(1.7e15, 1.7e15) == "us"
    assert contract.epoch_unit(1_700_000_000 * 10**9, 4_102_444_800 * 10**9) == "ns"
    assert contract.epoch_unit(0, 100) is None  # no unit: an order, or 1970
    assert contract.epoch_unit(1_700_000_000, 1.7e12) is None  # seconds and ms: no one unit
    assert contract.epoch_unit(None, None) is None


def test_check_times_refuses_a_unit_another_fits_and_names_it() -> None:
    timed = LogDecision("e.csv", "e", {"type": "str", "time": "int"}, "type", "time", "ms")
    seconds = contract.TimeValues(1_700_000_000, 1_700_086_400)
    with pytest.raises(LogError) as e:
        contract.check_times([timed], [seconds])
    assert e.value.message == ("e.csv: --time-unit ms puts the times of column 'time' in"
                               " 1970-01-20, but they look like epoch seconds (2023-11-14 .."
                               " 2023-11-15)")
    assert e.value.hints[0] == "pass --time-unit s"
    other = LogDecision("f.csv", "f", {"type": "str", "time": "int"}, "type", "time", "s")
    with pytest.raises(LogError, match="pass --time-unit e=s"):
        contract.check_times([other, timed], [seconds, seconds])
    # the unit that fits, or none that does: taken as given
    assert contract.check_times([other], [seconds]) == {}
    assert contract.check_times([timed], [contract.TimeValues(0, 10**15)]) == {}
    # without a unit: the unit that fits, for a duration window's hint
    bare = LogDecision("e.csv", "e", {"type": "str", "time": "float"}, "type", "time")
    assert contract.check_times([bare], [seconds]) == {"e": "s"}
    assert contract.check_times([bare], [contract.TimeValues(1, 2)]) == {}


def test_decide_reads_an_empty_text_log_as_columns_without_values() -> None:
    """A CSV without rows has no column types, only the text its reader guesses: its
    columns are of kind null (widening no other log's, not even the time column), and its
    time column is found by name alone."""
    full = LogDecision("full.csv", "full", {"type": "str", "ts": "int", "v": "int"}, format="csv")
    hollow = LogDecision("hollow.csv", "hollow", {"type": "str", "ts": "str", "v": "str"},
                         format="csv", index=1)
    assert contract.untyped("csv", hollow.columns) and not contract.untyped("parquet", hollow.columns)
    assert not contract.untyped("csv", full.columns)
    got = contract.decide([full, dataclasses.replace(hollow, empty=True)])
    assert dict(got[1].columns) == {"type": "null", "ts": "null", "v": "null"}
    assert [g.time_column for g in got] == ["ts", "ts"]
    assert contract.column_kinds(got, "ts") == {"ts": "int", "v": "int"}
    assert contract.event_time_kind(got) == "int"
    with pytest.raises(LogError, match="holds int values in full.csv but datetime in hollow"):
        contract.event_time_kind(contract.decide([full, hollow]))  # what a guess did


def test_decide_takes_a_time_format_named_for_one_of_several_logs() -> None:
    """``--time-format a=FORMAT`` with several logs: each log was checked against its own
    name only, so the other logs failed with "no log named 'a'"."""
    a = LogDecision("a.csv", "a", {"type": "str", "ts": "str"}, format="csv")
    b = LogDecision("b.csv", "b", {"type": "str", "ts": "str"}, format="csv", index=1)
    got = contract.decide([a, b], None, TimeOptions(format=("a=%d/%m/%Y",)))
    assert [g.time_format for g in got] == ["%d/%m/%Y", None]


def test_zoned_times_follow_the_column_over_every_log() -> None:
    a = LogDecision("a", "a", {"t": "str"}, None, "t")
    b = LogDecision("b", "b", {"t": "str"}, None, "t")
    c = LogDecision("c", "c", {"t": "datetime"}, None, "t")
    naive, zoned, typed = (contract.TimeValues(zoned=z) for z in (False, True, None))
    assert contract.zoned_times([a, b], [naive, naive]) == [False, False]
    assert contract.zoned_times([a, b, c], [naive, zoned, typed]) == [True, True, False]
    assert contract.zoned_format("%d/%m/%Y %H:%M%z") and not contract.zoned_format("%d/%m/%Y")


def test_local_reader_honours_iso_offsets(tmp_path: Path) -> None:
    """String times with Z or an offset are instants (the lazy parse used to fail on them)."""
    log = _write(tmp_path / "o.ndjson", '{"type":"A","ts":"2024-01-01T01:00:00+01:00"}\n'
                                        '{"type":"B","ts":"2024-01-01T00:30:00Z"}\n'
                                        '{"type":"C","ts":"2024-01-01T00:45:00-00:00"}\n')
    frame = read_events([log]).frame()
    epoch = dt.datetime(2024, 1, 1, tzinfo=dt.UTC).timestamp()
    minutes = [(t / 1e9 - epoch) / 60 for t in frame[TIME]]
    assert frame[TYPE].to_list() == ["A", "B", "C"] and minutes == [0, 30, 45]
    assert read_schema([log]).event_types["A"] == {"ts": "datetime"}


def test_io_does_not_import_spark_or_upper_layers() -> None:
    """io sits beside query: it imports only events and options (how messages name options;
    and io itself), and signals (``signals.keep_ignored``), never pyspark."""
    import ast as pyast

    for path in (ROOT / "cer_cli" / "io").glob("*.py"):
        tree = pyast.parse(path.read_text())
        for node in pyast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, pyast.Import)
                     else [node.module or ""] if isinstance(node, pyast.ImportFrom) else [])
            for name in names:
                assert not name.startswith("pyspark"), path
                if name.startswith("cer_cli"):
                    assert name.startswith(("cer_cli.events", "cer_cli.options", "cer_cli.io",
                                            "cer_cli.signals")), (path, name)


# --------------------------------------------------------------------------- hostile logs


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def hostile_logs(d: Path) -> dict[str, tuple[list[str], dict]]:
    """Logs that are easy to read differently: name -> (LOG arguments, reader options)."""
    w = lambda name, text: _write(d / name, text)  # noqa: E731
    logs: dict[str, tuple[list[str], dict]] = {}
    logs["int ts"] = ([w("S.csv", "type,id,ts\nA,1,1\nB,2,3\nB,1,4\nC,1,7\nC,2,20\n")], {})
    logs["int time"] = ([w("t1.csv", "type,v,time\nA,1,10\nB,2,11\n")], {})
    logs["int Timestamp"] = ([w("t2.csv", "type,v,Timestamp\nA,1,10\nB,2,11\n")], {})
    logs["float time"] = ([w("f.csv", "type,v,time\nA,1,0.5\nB,2,1.25\n")], {})
    logs["iso Z"] = ([w("z.csv", "type,v,timestamp\nA,1,2024-01-01T00:00:00Z\nB,2,2024-01-01T00:00:01.5Z\n")], {})
    logs["iso offset"] = ([w("o.csv", "type,v,ts\nA,1,2024-01-01T01:00:00+01:00\nB,2,2024-01-01T00:30:00+00:00\n")], {})
    logs["iso ndjson offset"] = ([w("o.ndjson", '{"type":"A","ts":"2024-01-01T01:00:00+01:00","v":1}\n'
                                   '{"type":"B","ts":"2024-01-01T00:30:00+00:00","v":null}\n')], {})
    df = pl.DataFrame({"type": ["A", "B"], "t": [dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2)], "v": [1, 2]})
    df.write_parquet(d / "dt.parquet")
    logs["datetime parquet"] = ([str(d / "dt.parquet")], {})
    utc = df.with_columns(pl.col("t").dt.replace_time_zone("UTC"), pl.col("v").cast(pl.UInt32),
                          pl.col("v").cast(pl.Decimal(10, 2)).alias("dec"),
                          pl.Series("cat", ["x", "y"], dtype=pl.Categorical),
                          pl.col("v").cast(pl.Int8).alias("i8"), pl.Series("l", [[1], [2]]))
    utc.write_parquet(d / "utc.parquet")
    logs["typed parquet"] = ([str(d / "utc.parquet")], {})
    # RFC 4180 texts: doubled quotes, backslashes, a quoted separator and line break
    logs["csv quoted texts"] = ([w("qt.csv", QUOTED_CSV)], {})
    # empty in its first 10,000 rows, numbers later: text locally, numbers on Spark before
    logs["csv numbers after an empty head"] = ([w("eh.csv", _late("type,ts,v\n", "A,{i},\n", "A,{i},7\n"))], {})
    logs["no type column"] = ([w("sensor.csv", "id,val,ts\n1,2.5,1\n2,3,2\n")], {})
    logs["no type column, named"] = ([f"S9={d / 'sensor.csv'}"], {})
    logs["wide with nulls"] = ([w("wide.csv", "type,id,tmp,hum,note\nH,2,,25,\nT,0,45,,hot\nH,0,,20,\n")], {})
    logs["mixed int float"] = ([w("mix.csv", "type,x,y\nA,1,\nB,2.5,3\nA,,4\n")], {})
    logs["booleans"] = ([w("b.csv", "type,flag,Flag2,n\nA,true,True,1\nB,false,FALSE,\n")], {})
    logs["unusual names"] = ([w("names.csv", "type,a b,a.b,x-y,température,TS\nA,1,2,3,4,5\nB,1,,3,4,6\n")], {})
    logs["int type values"] = ([w("it.csv", "type,v,ts\n1,1,1\n2,2,2\n")], {})
    logs["json array"] = ([w("arr.json", '[{"type":"A","v":1,"ts":1},{"type":"B","v":2.5,"ts":2}]')], {})
    logs["explicit columns"] = ([w("k.csv", "kind,at,v\nA,5,1\nB,6,2\n")], {"type_column": "kind", "times": "at"})
    a = w("la.csv", "type,id,ts,x\nA,1,1,1\nB,2,2,2\n")
    b = w("lb.csv", "type,ts,y,x\nC,1,a,1.5\nA,3,b,\n")
    c = w("lc.csv", "ts,z\n2,true\n")
    logs["several logs"] = ([f"L1={a}", f"L2={b}", f"L3={c}"], {})
    # issue #13: units, formats, per-log columns, a trailing blank line
    logs["time unit s"] = ([w("e.csv", "type,time\nA,1700000000\nB,1700000100\n")],
                           {"times": TimeOptions(unit=("s",))})
    logs["time unit ms, floats"] = ([w("fm.csv", "type,ts\nA,1.5\nB,2.25\n")],
                                    {"times": TimeOptions(unit=("fm=ms",))})
    logs["time format"] = ([w("dm.csv", "type,time\nA,01/02/2024\nB,03/02/2024\n")],
                           {"times": TimeOptions(format=("%d/%m/%Y",))})
    clicks = w("clicks.csv", "event_type,time\nClick,2024-01-01T00:00:00\nView,2024-01-01T00:00:30\n")
    orders = w("orders.csv", "id,at\n1,2024-01-01T00:00:10\n")
    logs["per-log columns"] = ([clicks, f"Order={orders}"],
                               {"type_column": ("event_type",),
                                "times": TimeOptions(column=("Order=at",))})
    logs["trailing blank line"] = ([w("blank.csv", "type,ts\nA,1\nB,2\n\n")], {})
    # issue #24: offsets make a column of instants (Spark types the first as TIMESTAMP, the
    # second as strings); epoch numbers without a unit are named by the unit that fits them
    logs["iso some offsets"] = ([w("so.csv", "type,v,time\nA,1,2024-01-01T10:00:00+01:00\n"
                                             "B,2,2024-01-01T09:30:00\n")], {})
    logs["iso +HHMM offsets"] = ([w("hm.csv", "type,v,time\nA,1,2024-01-01T10:00+0100\n"
                                              "B,2,2024-01-01T10:30+0100\n")], {})
    logs["epoch ms without unit"] = ([w("em.csv", "type,time\nA,1700000000000\nB,1700000000100\n")],
                                     {})
    # a header-only CSV (its reader types every column as text) widens no other log's column,
    # not even the time column; a --time-format named for one log of several
    logs["header-only log beside"] = ([w("full.csv", "type,ts,v\nA,0,1\nB,1,2\n"),
                                       w("hollow.csv", "type,ts,v,u\n")], {})
    logs["time format of one log"] = ([w("fa.csv", "type,ts\nA,01/02/2024 10:00\n"),
                                       w("fb.csv", "type,ts\nB,2024-01-02T11:00\n")],
                                      {"times": TimeOptions(format=("fa=%d/%m/%Y %H:%M",))})
    # texts that one CSV reader took for dates or numbers and the other for text: only what
    # both read alike keeps its kind (``contract.csv_kind_holds``)
    pairs = [("2024-01-13", "2024-01-14"), ("2024-01-13T10:00", "2024-01-14 10:00:05.5"),
             ("2024-01-13T10:00:05Z", "2024-01-14T10:00:05+0200"), ("2024-01-13T10:00Z", "2024-01-14T10:00Z"),
             ("02/02/2024", "13/01/2024"), ("2024/02/02", "2024/01/13"), ("13.01.2024", "14.01.2024"),
             ("2024-1-3", "2024-1-4"), ("10:00:00", "11:00:00"), ("2024-01-13", "2024-01-14T10:00"),
             ("2024-01-13T10:00", "2024-01-14T10:00Z"), ("2024-01-13T10:00:00.123456789", ""),
             (" 5", " 10"), ("+5", "+10"), ("inf", "-inf"), ("1e3", "NaN"), ("-7", "007"),
             ("True", "false"), ("yes", "no")]
    header = ",".join(f"c{i}" for i in range(len(pairs)))
    rows = [",".join(p[k] for p in pairs) for k in (0, 1)]
    logs["quoted empty fields"] = ([w("qe.csv", 'type,time,v,w\nA,1,"",x\nB,2,5,""\nA,3,,y\n')], {})
    logs["csv kinds one reader guessed"] = ([w("guess.csv", f"type,time,{header}\nA,1,{rows[0]}\n"
                                               f"B,2,{rows[1]}\n")], {})
    return logs


def error_logs(d: Path) -> dict[str, tuple[list[str], dict]]:
    """Logs that are input errors, the same on both sides."""
    w = lambda name, text: _write(d / name, text)  # noqa: E731
    ok = w("ok.csv", "type,v,ts\nA,1,1\n")
    return {
        "missing type column": ([ok], {"type_column": "kind"}),
        "missing time column": ([ok], {"times": "at"}),
        "detected time missing": ([ok, w("nots.csv", "type,v\nA,1\n")], {}),
        "reserved name": ([w("res.csv", "type,__cer_x\nA,1\n")], {}),
        "unknown extension": ([w("log.txt", "type\nA\n")], {}),
        "unknown format": ([ok], {"log_format": "xml"}),
        "time unit ms on epoch seconds": ([w("es.csv", "type,time\nA,1700000000\nB,1700000100.5\n")],
                                          {"times": TimeOptions(unit=("ms",))}),
        "bool and datetime": ([w("bo.csv", "type,v,ts\nA,true,1\n"),
                               w("bd.csv", "type,v,ts\nA,2024-01-01T00:00:00,2\n")], {}),
        # NDJSON lines polars refused naming no line, and Spark read: NaN and a number
        # beyond a float as numbers, a broken line as a row of nulls
        "json NaN": ([w("nan.ndjson", '{"type":"A","ts":1,"v":2.5}\n{"type":"B","ts":2,"v":NaN}\n')], {}),
        "json beyond float": ([w("inf.ndjson", '{"type":"A","ts":1,"v":2.5,"w":1}\n'
                                                '{"type":"B","ts":2,"v":1e309,"w":2}\n')], {}),
        "json broken line": ([w("cut.ndjson", '{"type":"A","ts":1}\n{"type":"B","ts":2\n'
                                               '{"type":"A","ts":3}\n')], {}),
        # a value after the first 10,000 rows that does not fit the kind they give the
        # column: the local reader refused it, Spark (which infers from every row) read the
        # column as text, or as floats, and ran
        "csv text late in numbers": ([w("lt.csv", _late("type,ts,v\n", "A,{i},{i}\n", "A,{i},x7\n"))], {}),
        "csv float late in integers": ([w("lf.csv", _late("type,ts,v\n", "A,{i},{i}\n", "A,{i},2.5\n"))], {}),
        "json text late in numbers": ([w("lt.ndjson", _late("", '{{"type":"A","ts":{i},"v":{i}}}\n',
                                                            '{{"type":"A","ts":{i},"v":"x7"}}\n'))], {}),
    }


#: Texts written as RFC 4180 has them. Spark (escaping by backslash, no ``multiLine``) kept
#: the doubled quotes, read two backslashes as one, cut the last field, and made a row of
#: the quoted line break's second line.
QUOTED_CSV = ('type,time,name\nA,1,"two\nlines"\nB,2,plain\nA,3,"say ""hi"""\n'
              'B,4,"back\\\\slash"\nA,5,"x,y"\nB,6,"a\\\\"",b"\n')


def _late(head: str, row: str, odd: str, rows: int = 10_500, at: int = 10_200) -> str:
    """``head``, then ``rows`` rows written as ``row`` (``{i}``: the row), the one at
    ``at`` written as ``odd``."""
    return head + "".join((odd if i == at else row).format(i=i) for i in range(rows))


def event_errors(d: Path) -> dict[str, tuple[list[str], dict]]:
    """Logs whose schema reads but whose events are input errors."""
    w = lambda name, text: _write(d / name, text)  # noqa: E731
    return {
        "mixed time kinds": ([w("ti.csv", "type,ts\nA,1\n"), w("td.csv", "type,ts\nA,2024-01-01T00:00:00\n")], {}),
        "bool time": ([w("bt.csv", "type,v\nA,true\n")], {"times": "v"}),
        "ambiguous date": ([w("am.csv", "type,time\nA,01/02/2024\n")], {}),
        "mixed time texts": ([w("mx.csv", "type,time\nA,0\nB,soon\n")], {}),
        "nan time": ([w("nt.csv", "type,ts\nA,1.5\nB,nan\n")], {}),
        "unit out of range": ([w("big.csv", "type,ts\nA,1\nB,10000000000\n")],
                              {"times": TimeOptions(unit=("s",))}),
        # its line counts the quoted line break before it (line 5, not 4), on both runners
        "bad time after a quoted line break": ([w("qb.csv", 'type,time,v\nA,1,"two\nlines"\n'
                                                             "B,2,3\nA,x,4\n")], {}),
    }


# --------------------------------------------------------------------------- both ways


CONF = {"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4"}


@pytest.fixture
def spark():
    """The active ``local[2]`` session (started again if a test stopped it)."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java")
    from cer_cli.spark.job import spark_session

    return spark_session("local[2]", CONF)


def _spark_events(spark, logs: list[str], options: dict, *columns: str) -> pl.DataFrame:
    """The Spark event frame's reserved columns (and ``columns``), in POS order."""
    from cer_cli.spark.read import events
    from cer_cli.spark.run import Run

    run = Run(spark)
    try:
        ev = events(run, logs, options.get("type_column"), options.get("times"),
                    options.get("log_format"))
        picked = ev.frame.select(POS, TYPE, STREAM, ROW, TIME, *(f"`{c}`" for c in columns))
        return pl.from_arrow(picked.toArrow()).sort(POS)
    finally:
        run.close()


@pytest.mark.spark
def test_local_and_spark_read_every_log_alike(spark, tmp_path: Path) -> None:
    from cer_cli.spark.job import SparkError, spark_schema

    cases = {Path(s).name: ([s], {}) for s in SAMPLES} | hostile_logs(tmp_path)
    for name, (logs, options) in cases.items():
        local = read_schema(logs, **options)
        remote = spark_schema(logs, master="local[2]", conf=CONF, **options)
        assert remote.event_types == local.event_types, name
        assert remote.streams == local.streams, name
        assert remote.time_column == local.time_column, name
        assert remote.epoch_units == local.epoch_units, name
        # all-null attributes alike; unusable columns alike (each reader names its own type)
        assert remote.empty == local.empty, name
        assert remote.refused.keys() == local.refused.keys(), name
        # the event frame: same order, types, streams, rows and TIME values, and the time
        # column's values, naive or UTC instants alike
        tc = [local.time_column] if local.time_column else []
        want = read_events(logs, **options).frame().select(POS, TYPE, STREAM, ROW, TIME, *tc)
        got = _spark_events(spark, logs, options, *tc)
        if tc and want.schema[tc[0]].is_temporal():
            zones = [getattr(f.schema[tc[0]], "time_zone", None) for f in (got, want)]
            assert zones[0] == zones[1], name
        got = got.cast(want.schema)
        assert got.equals(want), f"{name}\n{got}\n{want}"

    for name, (logs, options) in error_logs(tmp_path).items():
        with pytest.raises(LogError) as local_error:
            read_schema(logs, **options)
        with pytest.raises(SparkError) as spark_error:
            spark_schema(logs, master="local[2]", conf=CONF, **options)
        assert spark_error.value.input_error, name
        if name == "bool and datetime":  # polars words the detail; the fact is the same
            prefix = "the logs have incompatible columns"
            assert local_error.value.message.startswith(prefix), name
            assert spark_error.value.message.startswith(prefix), name
        else:
            assert spark_error.value.message == local_error.value.message, name
            assert spark_error.value.hints == local_error.value.hints, name

    for name, (logs, options) in event_errors(tmp_path).items():
        local_schema = read_schema(logs, **options)
        with pytest.raises(LogError) as local_error:
            read_events(logs, **options)
        # Spark refuses a bad row up front, in its schema pass, or when reading the events
        errors = []
        try:
            assert local_schema == spark_schema(logs, master="local[2]", conf=CONF, **options)
        except SparkError as e:
            errors.append(e)
        with pytest.raises(SparkError) as spark_error:
            _spark_events(spark, logs, options)
        for error in [*errors, spark_error.value]:
            assert error.input_error, name
            # the dtype is each reader's own word for a bool ("Boolean", "boolean")
            cut = " has unusable type "
            assert error.message.split(cut)[0] == local_error.value.message.split(cut)[0], name
            assert error.hints == local_error.value.hints, name


@pytest.mark.spark
def test_local_and_spark_read_quoted_csv_texts_alike(spark, tmp_path: Path) -> None:
    """The texts themselves, not only the rows: a filter on ``say "hi"`` matched locally
    and not on Spark, which also made a row of a quoted line break's second line."""
    log = _write(tmp_path / "qt.csv", QUOTED_CSV)
    want = read_events([log]).frame().select(POS, ROW, TYPE, "name")
    assert want["name"].to_list() == ["two\nlines", "plain", 'say "hi"', "back\\\\slash", "x,y",
                                      'a\\\\",b']
    got = _spark_events(spark, [log], {}, "name").select(POS, ROW, TYPE, "name")
    assert got.cast(want.schema).equals(want), f"{got}\n{want}"
    query = ("-e", """A AS a FILTER a.name = 'say "hi"' OR a.name = 'x,y'""")
    local = _cli("match", *query, log, "--count")
    on_spark = _cli("match", *query, log, "--count", "--spark", "--master", "local[2]")
    assert local.exit_code == on_spark.exit_code == 0, on_spark.output
    assert local.stdout == on_spark.stdout


@pytest.mark.spark
def test_cli_spark_within_an_integer_time_column(spark, tmp_path: Path) -> None:
    """WITHIN n [ts] on an integer ts: Spark typed ts as datetime and refused the query."""
    log = _write(tmp_path / "S.csv", "type,id,ts\nA,1,1\nB,1,3\nB,1,4\nC,1,7\nA,2,8\nB,2,9\n"
                                     "C,2,13\nC,2,20\n")
    spark_args = ("--spark", "--master", "local[2]", "--spark-conf", "spark.sql.shuffle.partitions=4")
    # and a trailing absence over the time column, whose executor checks that [ts] is it
    for query in (("-e", "A ; B+ ; C WITHIN 6 [ts]"), ("-e", "A ; !C WITHIN 2 [ts]")):
        local = _cli("match", *query, log, "--format", "jsonl")
        on_spark = _cli("match", *query, log, "--format", "jsonl", *spark_args)
        assert local.exit_code == on_spark.exit_code == 0, on_spark.output
        assert on_spark.stdout == local.stdout and local.stdout
    unbounded = _cli("match", "-e", "A ; B+ ; C", log, "--count")
    assert len(local.stdout.splitlines()) < int(unbounded.stdout)  # the window cut some


# --------------------------------------------------------------------------- CSV kinds


def test_csv_head_rows_are_whole_records_as_texts() -> None:
    """Both runners judge a CSV's kinds by these rows: a record cut by the end of the
    bytes is left out, an empty field is None, a quoted line break stays in its field."""
    head = '\ufefftype,v\nA,"x\ny"\nB,\nC,12'.encode()
    assert contract.csv_head_rows(head, ",", complete=False) == [["A", "x\ny"], ["B", None]]
    assert contract.csv_head_rows(head, ",", complete=True)[-1] == ["C", "12"]


@pytest.mark.parametrize("kind,texts,holds", [
    ("int", ["-12", "007", None], True), ("int", [" 5"], False), ("int", ["+5"], False),
    ("float", ["3.5", ".5", "1e3", "NaN", "-2"], True), ("float", ["inf"], False),
    ("bool", ["true", "FALSE", "True"], True), ("bool", ["yes"], False),
    ("datetime", ["2024-01-13", "2024-02-02"], True),
    ("datetime", ["2024-01-13T10:00", "2024-01-13 10:00:05.5"], True),
    ("datetime", ["2024-01-13T10:00:05Z", "2024-01-13T10:00:05+0200"], True),
    ("datetime", ["2024-01-13", "2024-01-13T10:00"], False),  # dates and datetimes
    ("datetime", ["2024-01-13T10:00", "2024-01-13T10:00:05Z"], False),  # offsets in some
    ("datetime", ["2024-01-13T10:00Z"], False), ("datetime", ["01/02/2024"], False),
    ("datetime", ["10:00:00"], False), ("str", [" 5"], True),
    ("int", ["\u0665"], False), ("datetime", ["\u0662024-01-13"], False),  # other scripts' digits
])
def test_csv_kind_holds_only_for_texts_both_readers_read_so(kind, texts, holds) -> None:
    assert contract.csv_kind_holds(kind, texts) is holds


def test_json_bad_line_in_names_the_first_line_and_leaves_arrays_alone(tmp_path: Path) -> None:
    ndjson = tmp_path / "l.ndjson"
    ndjson.write_text('{"a": 1}\n\n{"a": NaN}\n{"a": 1e999}\n')
    assert contract.json_bad_line_in(ndjson) == (2, "NaN is not a JSON number")
    array = tmp_path / "l.json"
    array.write_text('[\n{"a": NaN}\n]\n')
    assert contract.json_bad_line_in(array) is None
    assert contract.json_bad_line_in(tmp_path / "missing.ndjson") is None
