"""``cer match --spark`` gives exactly local mode's matches (cer_cli/spark).

One SparkSession (local[2], 4 shuffle partitions) serves the module. Equivalence is checked
on every sample x example query that runs locally, on random queries over random logs
(through the real CSV readers on both sides), on a time-range split whose matches straddle
the ranges, and on a real standalone cluster (master + worker started from pyspark's jars).
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cer_cli.api import compile_query, read_events
from cer_cli.io.read import read_frame
from cer_cli.io.write import EventLookup, write_matches
from cer_cli.query.errors import QueryError
from cer_cli.query.parser import parse
from cer_cli.query.scope import wide_variables
from tests import test_outputs as outputs
from tests.gen_formulas import formulas, queries, schema_of, streams

pytestmark = pytest.mark.spark
pyspark = pytest.importorskip("pyspark")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs Java", allow_module_level=True)

from cer_cli.io.contract import LogError  # noqa: E402
from cer_cli.plan.fanout import PARTITION, RANGES, SINGLE  # noqa: E402
from cer_cli.spark import (  # noqa: E402
    SparkError,
    spark_match,
    spark_session,
    spark_write,
)
from cer_cli.spark.job import spark_count  # noqa: E402
from tests.builders import run as _cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted(glob.glob(str(ROOT / "samples" / "*.csv")) + glob.glob(str(ROOT / "samples" / "*.parquet")))
QUERIES = sorted(glob.glob(str(ROOT / "queries" / "*.cel")))
CONF = {"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4"}


@pytest.fixture
def spark():
    """The shared ``local[2]`` session: ``spark_session`` returns the active one, or starts
    it again when a test ran the CLI on another master (which stops the active session)."""
    return spark_session("local[2]", CONF)


def local_matches(compiled, logs: list[str]) -> list:
    return list(compiled.run(read_events(logs).batches()))


def _pairs():
    """(sample, query) pairs whose query compiles against the sample's schema."""
    out = []
    for sample in SAMPLES:
        schema = read_events([sample]).schema
        for q in QUERIES:
            try:
                compile_query(Path(q).read_text(), schema=schema)
            except QueryError:
                continue
            out.append(pytest.param(sample, q, id=f"{Path(q).stem}-{Path(sample).stem}"))
    return out


# --------------------------------------------------------------------------- plans


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("A ; B PARTITION BY [id] WITHIN 3 EVENTS", PARTITION),
        ("A ; B PARTITION BY [id] CONSUME BY PARTITION", PARTITION),
        ("A ; B PARTITION BY [id] CONSUME BY ANY", SINGLE),
        ("A ; B WITHIN 3 EVENTS", RANGES),
        ("A ; B WITHIN 2 seconds", RANGES),
        ("A ; B WITHIN 2 seconds CONSUME BY ANY", SINGLE),
        ("A ; B", SINGLE),
        ("A ; !B WITHIN 2 seconds", SINGLE),
        ("A ; !B PARTITION BY [id] WITHIN 3 EVENTS", PARTITION),
        ("A AS a ; !(B AS b FILTER b.v < a.v) ; C WITHIN 3 EVENTS", RANGES),
        ("A AS a ; !(B AS b FILTER b.v < a.v) ; C PARTITION BY [id]", PARTITION),
    ],
)
def test_plan_kinds(text, kind):
    plan = compile_query("SELECT * WHERE " + text).fanout
    assert plan.kind == kind
    assert "why:" in plan.describe()


# --------------------------------------------------------------------------- equivalence


@pytest.mark.parametrize(("sample", "query"), _pairs())
def test_samples_and_example_queries(spark, sample, query):
    compiled = compile_query(Path(query).read_text(), schema=read_events([sample]).schema)
    try:
        expected = local_matches(compiled, [sample])
    except QueryError:
        pytest.skip("fails locally")
    assert list(spark_match(compiled, [sample])) == expected
    if compiled.fanout.kind == RANGES:
        assert list(spark_match(compiled, [sample], ranges=5)) == expected
        assert spark_count(compiled, [sample], ranges=5) == len(expected)


def test_matches_reach_the_driver_as_arrow_not_a_row_each(spark, tmp_path, monkeypatch):
    # a Row per match (pickled by the JVM, unpickled by the driver) was most of the time of
    # printing 700,778 matches of 1M events; Arrow batches carry them now
    import pyspark.sql.types as types

    log = tmp_path / "log.csv"
    pl.DataFrame({"type": ["A", "B", "C"] * 400, "t": range(1200),
                  "k": [i // 3 % 3 for i in range(1200)]}).write_csv(log)
    compiled = compile_query("SELECT * WHERE A ; B ; C PARTITION BY [k] WITHIN 30 [t]",
                             schema=read_events([str(log)]).schema)
    expected = local_matches(compiled, [str(log)])
    made = []
    real = types._create_row
    monkeypatch.setattr(types, "_create_row", lambda *a: made.append(1) or real(*a))
    assert list(spark_match(compiled, [str(log)])) == expected
    assert len(expected) > 1000 and len(made) < 100


def test_a_task_joins_sparks_arrow_batches_into_larger_frames_in_order():
    # every frame costs the engines a dozen polars queries: Spark's 10,000-row batches were
    # 5 s of a 13 s task on 10M events; a task now joins them (cer_cli.spark.tasks._frames)
    import pyarrow as pa

    from cer_cli.spark.tasks import _frames

    table = pa.table({"i": list(range(31))})
    frames = list(_frames(table.to_batches(max_chunksize=3), 7))
    assert [f.height for f in frames] == [9, 9, 9, 4]
    assert pl.concat(frames)["i"].to_list() == list(range(31))
    assert list(_frames([], 7)) == []


@pytest.mark.parametrize(("query", "ranges"), [
    ("SELECT * WHERE A AS a ; B AS b ; C AS c PARTITION BY [k] WITHIN 12 EVENTS", None),
    ("SELECT * WHERE A ; B+ ; C WITHIN 9 [t]", 3),
])
def test_tasks_fed_small_arrow_batches_equal_local(spark, tmp_path, monkeypatch, query, ranges):
    # frames joined from many batches (3 rows each, up to 5 rows a frame) cross groups and
    # ranges mid-frame: the matches and counts stay local mode's
    from cer_cli.spark import tasks

    log = tmp_path / "log.csv"
    pl.DataFrame({"type": (["A", "B", "C", "D", "B"] * 60), "t": range(300),
                  "k": [i * 7 % 4 for i in range(300)]}).write_csv(log)
    compiled = compile_query(query, schema=read_events([str(log)]).schema)
    expected = local_matches(compiled, [str(log)])
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    monkeypatch.setattr(tasks, "TASK_ROWS", 5)
    spark.conf.set(key, "3")
    try:
        assert list(spark_match(compiled, [str(log)], ranges=ranges)) == expected
        assert spark_count(compiled, [str(log)], ranges=ranges) == len(expected) > 50
    finally:
        spark.conf.set(key, old)


@pytest.mark.parametrize("disorder", ["none", "within a block", "across blocks"])
def test_a_log_in_time_order_is_numbered_without_a_sort(spark, tmp_path, disorder):
    # POS is ROW when the rows are already in time order: the global sort by TIME (a
    # sampling job, a shuffle of the whole log, a count) was a third of printing 1M events
    from cer_cli.spark.read import event_frame, open_logs
    from cer_cli.spark.run import Run

    n = 3000
    t = list(range(n))
    if disorder == "within a block":
        t[5], t[6] = t[6], t[5]
    elif disorder == "across blocks":
        t[-1] = 10
    log = tmp_path / "log.csv"
    pl.DataFrame({"type": ["A", "B", "C", "D"] * (n // 4), "ts": t,
                  "k": [i // 4 % 5 for i in range(n)]}).write_csv(log)
    compiled = compile_query("SELECT * WHERE A ; B ; C PARTITION BY [k] WITHIN 40 [ts]",
                             schema=read_events([str(log)]).schema)
    key = "spark.sql.files.maxPartitionBytes"
    before = spark.conf.get(key)
    spark.conf.set(key, "4096")  # the log read in blocks of 4 KB
    try:
        run = Run(spark)
        try:
            ev = event_frame(run, open_logs(spark, [str(log)], None, None, None))
            plan = ev.frame._jdf.queryExecution().executedPlan().toString().lower()
            assert ("rangepartitioning" in plan) == (disorder != "none")
            assert ev.n == n
        finally:
            run.close()
        assert list(spark_match(compiled, [str(log)])) == local_matches(compiled, [str(log)])
        # FROM with ranges numbers the query's stream by POS, whatever the partitions' order
        among = compile_query("SELECT * FROM log WHERE A ; B ; C WITHIN 9 EVENTS",
                              schema=read_events([str(log)]).schema)
        assert (list(spark_match(among, [str(log)], ranges=3))
                == local_matches(among, [str(log)]))
    finally:
        spark.conf.set(key, before)


def test_float_and_decimal_times_with_a_unit_are_local_modes_nanoseconds(spark, tmp_path):
    """A float or decimal time with ``--time-unit``: the same nanoseconds as the local
    reader's (``io.read._exact_ns``: the shortest text, or the digits, rounded half away
    from zero once; from 2^53 on the float's whole number), for every unit, CSV and Parquet.
    Spark's was a double product, 256 ns apart at 1.7e18 (1700000001.13 s became
    ...1.129999872), so ``WITHIN 1130 milliseconds`` missed events 1.13 s apart."""
    import random
    from decimal import Decimal

    from cer_cli.events import ROW, TIME
    from cer_cli.io.contract import TimeOptions
    from cer_cli.spark.read import event_frame, open_logs
    from cer_cli.spark.run import Run

    rng = random.Random(26)
    cases = {  # unit: float times, each range of the unit's plausible epoch times
        "s": [1700000000.0, 1700000001.13, -1.5, 2.5e-10, -2.5e-10, 0.0000000015,
              *(round(1.7e9 + rng.random() * 1e8, rng.randint(0, 9)) for _ in range(300))],
        "ms": [1700000000000.5, 1.5e-6, *(1.7e12 + rng.random() * 1e11 for _ in range(300))],
        "us": [1.7e15 + 0.5, 2.0**53 + 2, 9.1e15, *(1.7e15 + rng.random() * 1e14
                                                       for _ in range(300))],
        "ns": [1.7e18, 1700000000123456768.0, 2.0**53 - 0.5, 2.0**53, 5.0618987205794704e16,
               *(1.7e18 + rng.random() * 1e17 for _ in range(300))],
    }
    for unit, times in cases.items():
        logs = []
        frame = pl.DataFrame({"type": ["A"] * len(times), "time": times})
        for fmt in ("csv", "parquet"):
            logs.append(tmp_path / f"{unit}.{fmt}")
            getattr(frame, f"write_{fmt}")(logs[-1])
        if unit == "s":  # a decimal, by its digits
            logs.append(tmp_path / "dec.parquet")
            pl.DataFrame({"type": ["A", "B", "C"], "time": pl.Series(
                [Decimal("1700000000.123456789"), Decimal("-0.0000000005"),
                 Decimal("1700000000.1234567895")], dtype=pl.Decimal(38, 10))}
            ).write_parquet(logs[-1])
        if unit == "ns":  # a decimal beyond 2^53 is still read by its digits, not truncated
            logs.append(tmp_path / "dec-ns.parquet")
            pl.DataFrame({"type": ["A", "B"], "time": pl.Series(
                [Decimal("1700000000123456789.5"), Decimal("-9007199254740993.5")],
                dtype=pl.Decimal(38, 1))}).write_parquet(logs[-1])
        options = TimeOptions(unit=(unit,))
        for log in logs:
            want = read_events([str(log)], times=options).frame().sort(ROW)[TIME].to_list()
            run = Run(spark)
            try:
                ev = event_frame(run, open_logs(spark, [str(log)], None, None, options))
                got = [r[0] for r in ev.frame.orderBy(ROW).select(TIME).collect()]
            finally:
                run.close()
            assert got == want, (log.name, [(a, b) for a, b in zip(got, want, strict=True)
                                            if a != b][:5])


def _write_streams(events: list[dict], directory: Path) -> list[str]:
    """One CSV per stream (stream name = file stem), columns type, time, ts, v, id."""
    logs = []
    for name in sorted({e["stream"] for e in events}):
        rows = [{k: e[k] for k in ("type", "time", "ts", "v", "id")} for e in events
                if e["stream"] == name]
        path = directory / f"{name}.csv"
        pl.DataFrame(rows).write_csv(path)
        logs.append(str(path))
    return logs


@given(
    query=queries(formulas(max_depth=3)),
    events=streams(min_size=1, max_size=14),
    ranges=st.sampled_from([1, 2, 3]),
)
@settings(max_examples=24, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
def test_random_queries_equal_local(spark, tmp_path_factory, query, events, ranges):
    from cer_cli.query.printer import to_text

    text = to_text(query)
    try:
        compiled = compile_query(text, schema=schema_of(events))
    except QueryError:
        return
    logs = _write_streams(events, tmp_path_factory.mktemp("logs"))
    try:
        expected = local_matches(compiled, logs)
    except QueryError as e:  # refused while running: Spark refuses it in the same words
        with pytest.raises(QueryError) as got:
            list(spark_match(compiled, logs, ranges=ranges))
        assert got.value.message == e.message, text
        return
    assert list(spark_match(compiled, logs, ranges=ranges)) == expected, text
    # --count: unnumbered events, shuffled once, counted by each task
    assert spark_count(compiled, logs, ranges=ranges) == len(expected), text


def _spark_written(out: Path, fmt: str, shape: str) -> tuple[pl.DataFrame, object]:
    """A directory Spark wrote with ``-o``: its rows in output order (by match, then
    position) with the columns that place them (Parquet, CSV: typed), and its cells as read
    back (Parquet: the same frame; CSV: every cell as text; JSON: the cells by match)."""
    if fmt == "jsonl":
        rows = [json.loads(line) for f in sorted(out.glob("*.json"))
                for line in f.read_text().splitlines()]
        rows.sort(key=lambda r: (r["match"], -1 if r.get("position") is None else r["position"]))
        # every key in every row, a null too (Spark's JSON writer left nulls out)
        assert all(r.keys() == rows[0].keys() for r in rows), rows
        placed = pl.DataFrame([{k: r[k] for k in ("match", "start", "end", "position", "type",
                                                  "vars")} for r in rows],
                              schema={"match": pl.Int64, "start": pl.Int64, "end": pl.Int64,
                                      "position": pl.Int64, "type": pl.String,
                                      "vars": pl.List(pl.String)})
        cells: dict = {}
        for r in rows:
            cell = cells.setdefault(r["match"], (outputs._partition(r["partition"]), {}))[1]
            if r["position"] is not None:
                cell.update({(r["position"], a): r[a] for a in outputs.VALUE_ATTRS})
        return placed, list(cells.values())
    if fmt == "parquet":
        typed = texts = pl.read_parquet(str(out / "*.parquet"))
    else:
        typed = pl.read_csv(str(out / "*.csv"), schema_overrides={"vars": pl.String})
        texts = pl.read_csv(str(out / "*.csv"), infer_schema=False)
    order = ["match", "position"] if shape == "long" else ["match"]
    index = typed.select(order).with_row_index("__i").sort(order, nulls_last=False)["__i"]
    return typed[index], texts[index]


#: What ``--spark -o DIR`` writes in the outputs property: (shape, format).
SPARK_WRITES = [("long", "parquet"), ("long", "csv"), ("long", "jsonl"), ("wide", "parquet"),
                ("wide", "csv")]


@given(case=outputs.OUTPUT_CASES)
@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@example(case=outputs.EMPTY[0]).via("SELECT NONE")
@example(case=outputs.EMPTY[2]).via("an OR branch without the selected variable")
@example(case=(parse("A+ ; B AS y PARTITION BY [id]"), outputs.EDGE, None)).via(
    "edge values: a -0.0 and 0.0 key, lists of NaN, nulls, 2^53 + 1")
def test_random_queries_reach_every_spark_output(spark, tmp_path_factory, case):
    """A sample of ``tests/test_outputs.py``'s property through ``--spark``, edge values
    (``gen_formulas.edge_values``) included: the matches printed (``--format jsonl``),
    written by Spark (``-o DIR``: long Parquet, CSV and JSON; wide Parquet and CSV) and
    returned by ``cer_cli.spark.match`` (long and wide) are the engine's own, as many as
    ``--count`` says, a match without reported events included (one long row, event
    columns null); and every value (``ts``, ``v``, ``id`` of each reported event, the
    partition key) is the log's, by its format's rule (``outputs.RULES``: Parquet and the
    frames keep NaN and -0.0, CSV writes ``NaN``, JSON null), as local mode writes it;
    ``--count --by id`` counts the engine's partitions."""
    from cer_cli.spark import match

    query, events, _ = case
    directory = tmp_path_factory.mktemp("spark-outputs")
    logs = outputs.write_logs(events, directory)
    found = outputs.compiled_case(query, logs)
    if found is None:
        return
    text, compiled, matches = found
    wide = wide_variables(compiled.query)
    names = [v for v, _ in wide]
    parts = [g[0] for g in compiled.query.partition_by]
    rows = outputs.log_rows(events)

    def values(rule: str, shape: str, of=matches) -> list:
        return outputs.expected_cells(of, rows, rule, parts, shape, wide)

    base = ["match", "-e", text, *logs, *outputs.TIME, "--allow-unbounded", "--spark",
            "--master", "local[2]"]
    count = _cli(*base, "--count")
    assert count.exit_code == 0, count.output
    assert int(count.stdout) == len(matches), text
    printed = _cli(*base, "--format", "jsonl")
    assert printed.exit_code == 0, printed.output
    assert outputs.from_jsonl(printed.stdout) == outputs.keys(matches), text
    outputs.same_values(outputs.cells_of_jsonl(printed.stdout), values("json", "long"),
                        (text, "printed jsonl"))
    if parts:
        outputs.check_counts_by(base, query, matches)
    for shape, fmt in SPARK_WRITES:
        out = directory / f"{shape}.{fmt}"
        result = _cli(*base, "--shape", shape, "-o", str(out))
        assert result.exit_code == 0, result.output
        written, cells = _spark_written(out, fmt, shape)
        rule = {"jsonl": "json", "csv": "csv", "parquet": "typed"}[fmt]
        where = (text, fmt, shape)
        if shape == "long":
            assert outputs.from_long(written) == outputs.keys(matches), where
            got = cells if fmt == "jsonl" else outputs.cells_of_long(cells)
        else:
            records = (cells if fmt == "csv" else written).to_dicts()
            assert outputs.from_wide(records, names, text=fmt == "csv") \
                == outputs.projected(matches, names), where
            got = outputs.cells_of_wide(records, wide, text=fmt == "csv")
        outputs.same_values(got, values(rule, shape), where)
    frame = outputs.one_frame(events)
    frame.write_parquet(directory / "all.parquet")
    local = read_frame(frame, "S1", None, outputs.TIME_OPTIONS)
    want = list(compiled.run(local.batches()))
    options = {"time_column": "time", "time_unit": "ns", "stream": "S1"}
    df = spark.read.parquet(str(directory / "all.parquet"))
    long = pl.from_arrow(match(df, compiled, **options).toArrow())
    assert outputs.from_long(long) == outputs.keys(want), text
    outputs.same_values(outputs.cells_of_long(long), values("typed", "long", want),
                        (text, "cer_cli.spark.match"))
    shaped = pl.from_arrow(match(df, compiled, shape="wide", **options).toArrow())
    assert outputs.from_wide(shaped.to_dicts(), names) == outputs.projected(want, names), text
    outputs.same_values(outputs.cells_of_wide(shaped.to_dicts(), wide),
                        values("typed", "wide", want), (text, "cer_cli.spark.match wide"))


# --------------------------------------------------------------------------- range split


@pytest.fixture(scope="module")
def hundred(tmp_path_factory) -> str:
    """100 events A/B/C, one second apart (times repeat in pairs), attribute n = position."""
    path = tmp_path_factory.mktemp("hundred") / "s.csv"
    types = ("A", "B", "C", "B", "A", "C", "C")
    rows = [{"type": types[i % 7], "time": f"2024-01-01T00:00:{i // 2:02d}Z", "n": i}
            for i in range(100)]  # ISO times: a duration window needs no --time-unit
    pl.DataFrame(rows).write_csv(path)
    return str(path)


@pytest.mark.parametrize(
    "window", ["WITHIN 9 EVENTS", "WITHIN 4 seconds", "WITHIN 9 [n]", "WITHIN 30 EVENTS"]
)
def test_range_split_keeps_straddling_matches(spark, hundred, window):
    compiled = compile_query(f"SELECT * WHERE A ; B+ ; C {window}", schema=read_events([hundred]).schema)
    assert compiled.fanout.kind == RANGES
    expected = local_matches(compiled, [hundred])
    got = list(spark_match(compiled, [hundred], ranges=5))
    assert got == expected
    assert len({m.key() for m in got}) == len(got)
    straddling = [m for m in got if m.start // 20 != m.end // 20]
    assert straddling, "the test should have matches across range boundaries"


# --------------------------------------------------------------------------- output


def test_spark_write_equals_local_long_format(spark, tmp_path):
    sample = str(ROOT / "samples" / "stocks.csv")
    log = read_events([sample])
    compiled = compile_query((ROOT / "queries" / "contiguous.cel").read_text(), schema=log.schema)
    local = tmp_path / "local.parquet"
    lookup = EventLookup.for_log(log)
    write_matches(compiled.run(lookup.tap(log.batches())), lookup, "parquet", local,
                  partition_names=[g[0] for g in compiled.query.partition_by])  # as cer match
    n = spark_write(compiled, [sample], str(tmp_path / "out"), "parquet")
    got = pl.read_parquet(tmp_path / "out" / "*.parquet")
    want = pl.read_parquet(local)
    assert n == want["match"].n_unique()
    assert got.columns == want.columns
    assert got.sort("match", "position").equals(want.cast(got.schema))


# --------------------------------------------------------------------------- DataFrames


def _user_frame(spark, sample: str):
    """The sample as a Spark user loads it: Spark's own readers (CSV with a header and
    inferred types, as ``--spark`` reads it; Parquet)."""
    if sample.endswith(".csv"):
        return spark.read.csv(sample, header=True, inferSchema=True)
    return spark.read.parquet(sample)


def _cli_long(tmp_path: Path, query: str, sample: str) -> pl.DataFrame:
    """What ``cer match QUERY SAMPLE -o out.parquet`` writes (local mode, long shape)."""
    out = tmp_path / "cli.parquet"
    result = _cli("match", query, sample, "-o", str(out), "--allow-unbounded")
    assert result.exit_code == 0, result.output
    return pl.read_parquet(out)


@pytest.mark.parametrize(("sample", "query"), _pairs())
def test_spark_frames_equal_cli_output(spark, tmp_path, sample, query):
    """``cer_cli.spark.match`` on a Spark DataFrame gives the CLI's long output (the stream
    named as the CLI names the file), every example query on its sample."""
    from cer_cli.spark import match

    want = _cli_long(tmp_path, query, sample)
    result = match(_user_frame(spark, sample), Path(query).read_text(), stream=Path(sample).stem)
    got = pl.from_arrow(result.toArrow())
    assert got.columns == want.columns
    assert got.equals(want.cast(got.schema).sort("match", "position"))
    assert got.schema == want.cast(got.schema).schema
    assert got.schema["vars"] == want.schema["vars"] and got.schema["row"] == want.schema["row"]


def test_spark_frames_equal_local_frames(spark):
    """The same rows as a polars frame through ``cer_cli.match`` and as a Spark frame through
    ``cer_cli.spark.match`` give the same matches, with a type and time column named."""
    import cer_cli
    from cer_cli.spark import match

    sample = str(ROOT / "samples" / "stocks.csv")
    query = "SELECT * WHERE SELL AS s ; BUY AS b FILTER b[price > 100] WITHIN 5 EVENTS"
    want = cer_cli.match(pl.read_csv(sample), query, type_column="type", time_column="ts")
    assert want.height > 0
    got = pl.from_arrow(match(_user_frame(spark, sample), query, type_column="type",
                              time_column="ts").toArrow())
    assert got.columns == want.columns
    assert got.equals(want.cast(got.schema))


def test_spark_decimal_date_boolean_columns_compare_as_locally(spark):
    """A Spark Decimal, Date or Boolean column compares as the local polars one (they
    compared false everywhere: every atom on them was false)."""
    import datetime as dt
    from decimal import Decimal

    from pyspark.sql import types as T

    import cer_cli
    from cer_cli.spark import match

    rows = [("A", 0, Decimal("1.50"), dt.date(2024, 2, 1), True),
            ("B", 1, Decimal("0.50"), dt.date(2024, 2, 2), False),
            ("A", 2, Decimal("0.99"), dt.date(2024, 1, 1), None),
            ("B", 3, Decimal("1.00"), None, True),
            ("C", 4, None, None, None)]
    names = ["type", "ts", "price", "day", "ok"]
    sdf = spark.createDataFrame(rows, T.StructType([
        T.StructField("type", T.StringType()), T.StructField("ts", T.LongType()),
        T.StructField("price", T.DecimalType(10, 2)), T.StructField("day", T.DateType()),
        T.StructField("ok", T.BooleanType())]))
    local = pl.DataFrame(rows, schema=dict(zip(names, [pl.String, pl.Int64, pl.Decimal(10, 2),
                                                       pl.Date, pl.Boolean], strict=True)),
                         orient="row")
    for query, n in [("A ; B FILTER A[price > 1]", 2), ("A FILTER A[price = 1.5]", 1),
                     ("A FILTER A[day = '2024-02-01']", 1), ("B FILTER B[ok = FALSE]", 1),
                     ("A AS a ; B AS b FILTER a.price < b.price", 1),
                     ("A AS a ; B AS b FILTER a.ok = b.ok", 1),
                     ("A AS a ; !(B AS b FILTER b.price = a.price - 1) ; C WITHIN 9 EVENTS", 1)]:
        want = cer_cli.match(local, query, time_column="ts")
        got = pl.from_arrow(match(sdf, query, time_column="ts").toArrow())
        assert want["match"].n_unique() == n, query
        assert got.select("match", "position").equals(want.select("match", "position")), query


def test_a_nan_partition_key_is_no_key_as_locally(spark, tmp_path):
    """Spark's dropna drops an event whose key is NaN, where the local run made NaN a key
    of its own; and Spark's coalesce took NaN as the group's value where the next name had
    one. Both now read NaN as no value (``tests/test_semantics_edges.py``)."""
    from tests.test_semantics_edges import NAN_KEYS

    log = tmp_path / "log.parquet"
    pl.DataFrame(NAN_KEYS).write_parquet(log)
    compiled = compile_query("A ; B PARTITION BY [k, j]", schema=read_events([str(log)]).schema)
    got = sorted((m.start, m.end) for m in spark_match(compiled, [str(log)], master="local[2]",
                                                        conf=CONF))
    assert got == sorted((m.start, m.end) for m in local_matches(compiled, [str(log)]))
    assert got == [(0, 1), (2, 3), (4, 5)]


@pytest.mark.parametrize("case", ["out of order between keys", "out of order twice",
                                  "infinite twice", "out of order, then infinite"])
def test_a_refused_window_time_is_local_modes_error_word_for_word(spark, tmp_path, case):
    """A window time refused while running (``tests/test_exits.py``'s cases): the same
    message, caret and hints as local mode, naming the same event, in every way of running.
    Before: a task's error came back as one line prefixed ``error: query: error:``, without
    its hints; each task named its own first refused time (whichever failed first); and a
    window attribute out of order between the keys of ``PARTITION BY`` (each key in order)
    was never seen by a task, so Spark gave matches where local mode refuses."""
    from tests.test_exits import REFUSED_FIRST, REFUSED_TIMES

    query, columns = REFUSED_TIMES[case]
    log = tmp_path / "log.parquet"
    pl.DataFrame(columns).write_parquet(log)
    for mode in (["--count"], ["--format", "jsonl"], ["-o", str(tmp_path / "out.parquet")]):
        want = _cli("match", "-e", query, str(log), *mode)
        assert want.exit_code == 2 and REFUSED_FIRST[case] in want.output, want.output
        assert "hint:" in want.output and "^" in want.output
        for ranges in (["--ranges", "3"], []):
            got = _cli("match", "-e", query, str(log), *mode, "--spark", "--master",
                       "local[2]", *ranges)
            assert (got.exit_code, got.output) == (2, want.output), (mode, ranges)
        assert not (tmp_path / "out.parquet").exists()


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_an_integer_that_another_logs_floats_would_round_is_refused_as_locally(spark, tmp_path,
                                                                              fmt):
    """A column of integers in one log and of floats in another: local mode refuses the
    first integer float64 would round (``tests/test_read_edges.py``); Spark's union widened
    it to double and wrote 2^53 + 1 as 2^53, exit 0. The same first row (row 1, in ``w``:
    ``v`` rounds from row 2, which a count reading only ``v`` names), column and words now,
    however it runs; exact integers (2^53, 2^62) still run."""
    big = 2**53 + 1
    ints = pl.DataFrame({"type": ["A"] * 4, "t": [0, 1, 2, 3],
                         "v": pl.Series([2**53, 2**62, big, 1], dtype=pl.Int64),
                         "w": pl.Series([1, big, big, big], dtype=pl.Int64)})
    floats = pl.DataFrame({"type": ["B"], "t": [4], "v": [1.5], "w": [2.5]})
    for name, frame in [("i", ints), ("f", floats)]:
        getattr(frame, f"write_{fmt}")(tmp_path / f"{name}.{fmt}")
    logs = [str(tmp_path / f"i.{fmt}"), str(tmp_path / f"f.{fmt}")]
    query = "A AS a ; B AS b FILTER a.v > b.v"
    spark_args = ["--spark", "--master", "local[2]"]
    for mode in (["--count"], ["--format", "jsonl"], ["-o", str(tmp_path / "out.parquet")]):
        want = _cli("match", "-e", query, *logs, *mode)
        # --count reads only the query's columns (v, from row 2), the others every column
        first = "column 'v'" if mode == ["--count"] else "column 'w'"
        assert want.exit_code == 2 and f"{first}: the integer 9007199254740993" in want.output
        got = _cli("match", "-e", query, *logs, *mode, *spark_args)
        assert (got.exit_code, got.output) == (2, want.output), mode
    assert not (tmp_path / "out.parquet").exists()
    exact = ints.head(2).with_columns(w=pl.Series([1, 2], dtype=pl.Int64))  # 2^53, 2^62
    getattr(exact, f"write_{fmt}")(tmp_path / f"i.{fmt}")
    want = _cli("match", "-e", query, *logs, "--format", "jsonl")
    assert want.exit_code == 0 and want.stdout.count("\n") == 2, want.output
    assert _cli("match", "-e", query, *logs, "--format", "jsonl", *spark_args).stdout \
        == want.stdout


def test_spark_match_is_lazy(spark):
    """No Spark job runs before an action on the result (with a compiled Plan and a plan
    that needs no ranges); the action then runs jobs in the same group."""
    from cer_cli.spark import match

    sample = str(ROOT / "samples" / "stocks.csv")
    compiled = compile_query((ROOT / "queries" / "core_q2.cel").read_text(),
                             schema=read_events([sample]).schema)
    assert compiled.fanout.kind != RANGES
    df = _user_frame(spark, sample)  # inferSchema reads the file: before the group
    sc, tracker = spark.sparkContext, spark.sparkContext.statusTracker()
    sc.setJobGroup("cer-lazy", "cer_cli.spark.match laziness")
    try:
        result = match(df, compiled, stream="stocks")
        assert list(tracker.getJobIdsForGroup("cer-lazy")) == []
        n = len(result.collect())
        assert list(tracker.getJobIdsForGroup("cer-lazy")) != []
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert n > 0


WIDE_QUERIES = [
    "SELECT * WHERE SELL AS s ; BUY AS b FILTER b[price > 100] WITHIN 5 EVENTS",
    "SELECT * WHERE SELL AS s ; (BUY AS b)+ WITHIN 3 EVENTS",  # b: list columns
    "SELECT s WHERE SELL AS s ; !BUY WITHIN 2 EVENTS",  # trailing absence: single task
    # correlated absence without partition (post-filter): ranges, the gap inside the match
    "SELECT * WHERE BUY AS b ; !(SELL AS x FILTER x.name = b.name) ; SELL AS s WITHIN 4 EVENTS",
    # correlated trailing absence: one task without PARTITION BY, by key with it
    "SELECT s WHERE SELL AS s ; !(BUY AS x FILTER x.name = s.name) WITHIN 3 EVENTS",
    "SELECT * WHERE SELL AS s ; !(BUY AS x FILTER x.price > s.price) PARTITION BY name"
    " WITHIN 3 EVENTS",
    # next match with a comparison (the next-match scan): ranges
    "SELECT * WHERE BUY AS b ;> SELL AS s FILTER s.price > b.price WITHIN 4 EVENTS",
]


@pytest.mark.parametrize("query", WIDE_QUERIES)
def test_spark_wide_frames_equal_local_wide_frames(spark, query):
    import cer_cli
    from cer_cli.spark import match

    sample = str(ROOT / "samples" / "stocks.csv")
    want = cer_cli.match(pl.read_csv(sample), query, type_column="type", time_column="ts",
                         shape="wide")
    assert want.height > 0
    got = pl.from_arrow(match(_user_frame(spark, sample), query, type_column="type",
                              time_column="ts", shape="wide").toArrow())
    assert got.columns == want.columns
    assert got.equals(want.cast(got.schema))


@pytest.mark.parametrize("query", [WIDE_QUERIES[1], WIDE_QUERIES[2],
                                   "SELECT * WHERE SELL AS s OR BUY AS b"])
def test_spark_struct_shape_nests_each_variable_of_the_wide_shape(spark, query):
    """``shape="struct"``: the wide rows, a struct column per variable (a list of structs
    for a variable binding several events, null where the match binds none), so
    ``F.col("s.price")`` reads what the flat ``s.price`` column holds."""
    from pyspark.sql import functions as F

    from cer_cli.spark import match

    df = _user_frame(spark, str(ROOT / "samples" / "stocks.csv"))
    options = {"type_column": "type", "time_column": "ts"}
    wide = match(df, query, shape="wide", **options)
    nested = match(df, query, shape="struct", **options)
    variables = [v for v, _ in wide_variables(compile_query(query).query)]
    assert nested.columns == [c for c in wide.columns if "." not in c] + variables
    for c in wide.columns:
        flat = wide.select(F.col(f"`{c}`")).collect()
        assert nested.select(F.col(c)).collect() == flat, c
    assert nested.count() > 0


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_cli_spark_writes_the_wide_shape_as_local_mode(spark, tmp_path, fmt):
    args = ["-e", WIDE_QUERIES[1], str(ROOT / "samples" / "stocks.csv"), "--shape", "wide"]
    local = _cli("match", *args, "-o", str(tmp_path / f"local.{fmt}"))
    on_spark = _cli("match", *args, "-o", str(tmp_path / f"spark.{fmt}"), "--spark",
                    "--master", "local[2]")
    assert local.exit_code == on_spark.exit_code == 0, on_spark.output
    if fmt == "parquet":
        want = pl.read_parquet(tmp_path / "local.parquet")
        got = pl.read_parquet(str(tmp_path / "spark.parquet" / "*.parquet"))
        assert got.columns == want.columns and want.height > 0
        assert got.sort("match").equals(want.cast(got.schema))
    else:  # the same text, cell for cell (times as local CSV writes them)
        want = pl.read_csv(tmp_path / "local.csv", infer_schema=False)
        got = pl.read_csv(str(tmp_path / "spark.csv" / "*.csv"), infer_schema=False)
        assert got.columns == want.columns and want.height > 0
        assert got.sort(pl.col("match").cast(pl.Int64)).equals(want)


#: Times local output writes in several ways: whole seconds, fractions, offsets in the time
#: column (UTC instants after reading), and a column of aware times that is not the time column.
ZONED_LOG = """type,time,v,at
A,2024-01-01T10:00:00+02:00,5,2024-01-01T10:00:00.25+02:00
B,2024-01-01T10:00:01.5+02:00,9,2024-01-01T10:00:00+02:00
A,2024-01-01T09:00:02Z,1,2024-01-02T00:00:00Z
B,2024-01-01T09:00:03.000123Z,2,2024-01-02T00:00:00.000001Z
"""


@pytest.mark.parametrize("shape", ["long", "wide"])
def test_spark_text_output_writes_times_as_local_mode(spark, tmp_path, shape):
    """Spark's CSV and JSON writers print datetimes their own way (``.000``, ``Z``); cer's
    Spark output writes them as local output does (Python's isoformat)."""
    log = tmp_path / "zoned.csv"
    log.write_text(ZONED_LOG)
    query = "SELECT * WHERE A AS x ; B+ AS y WITHIN 10 seconds" if shape == "wide" else "A ; B"
    args = ["-e", query, str(log), "--shape", shape]
    assert _cli("match", *args, "-o", str(tmp_path / "local.csv")).exit_code == 0
    for fmt in ("csv", "jsonl"):
        out = tmp_path / f"spark-{fmt}"
        result = _cli("match", *args, "-o", str(out), "--format", fmt, "--spark",
                      "--master", "local[2]")
        assert result.exit_code == 0, result.output
    want = pl.read_csv(tmp_path / "local.csv", infer_schema=False)
    got = pl.read_csv(str(tmp_path / "spark-csv" / "*.csv"), infer_schema=False)
    order = [pl.col("match").cast(pl.Int64)] + (["position"] if shape == "long" else [])
    assert want.height > 1 and got.sort(order).equals(want)
    rows = [json.loads(line) for f in sorted(glob.glob(str(tmp_path / "spark-jsonl" / "*.json")))
            for line in Path(f).read_text().splitlines()]
    times = [c for c in want.columns if c.endswith(("time", "at")) and "[" not in c]
    for row, cells in zip(sorted(rows, key=lambda r: (r["match"], r.get("position", 0))),
                          want.iter_rows(named=True), strict=True):
        assert {c: row[c] for c in times if not isinstance(row[c], list)} == {
            c: cells[c] for c in times if not (cells[c] or "").startswith("[")}


def test_spark_match_times_are_each_events_own_time(spark, tmp_path):
    """Two logs whose time columns have different names: Spark writes each match's
    start_time/end_time from its first and last event's own time column, as local mode
    does (both read the first log's column for every event: end_time was null)."""
    (tmp_path / "a.csv").write_text("type,ts,v\nA,2024-01-01T10:00:00,1\nA,2024-01-01T10:07:00,3\n")
    (tmp_path / "b.csv").write_text("type,when,w\nB,2024-01-01T10:05:00.5,2\n")
    args = ["-e", "A ; B", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"),
            "--time-column", "a=ts", "--time-column", "b=when"]
    assert _cli("match", *args, "-o", str(tmp_path / "local.csv")).exit_code == 0
    result = _cli("match", *args, "-o", str(tmp_path / "spark"), "--format", "csv", "--spark",
                  "--master", "local[2]")
    assert result.exit_code == 0, result.output
    want = pl.read_csv(tmp_path / "local.csv", infer_schema=False)
    got = pl.read_csv(str(tmp_path / "spark" / "*.csv"), infer_schema=False)
    assert want.select("start_time", "end_time").unique().rows() == [
        ("2024-01-01T10:00:00", "2024-01-01T10:05:00.500000")]
    assert got.sort("match", "position").equals(want)


def test_spark_json_writes_decimals_exactly_as_local_output(spark, tmp_path):
    """Decimals are JSON numbers with their exact digits: Spark's JSON writer and local
    output agree on every digit (local JSONL wrote a float, losing them)."""
    from decimal import Decimal

    long = Decimal("12345678901234567.123456789012345678")
    pl.DataFrame({"type": ["A", "B"], "ts": [1, 2],
                  "d": pl.Series([long, Decimal("1.5")], dtype=pl.Decimal(38, 18))}
                 ).write_parquet(tmp_path / "d.parquet")
    args = ["-e", "A ; B", str(tmp_path / "d.parquet")]
    local = _cli("match", *args, "--format", "jsonl")
    assert local.exit_code == 0, local.output
    events = json.loads(local.stdout, parse_float=Decimal)["events"]
    assert [e["attrs"]["d"] for e in events] == [long, Decimal("1.5")]
    result = _cli("match", *args, "-o", str(tmp_path / "spark"), "--format", "jsonl", "--spark",
                  "--master", "local[2]")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line, parse_float=Decimal)
            for f in sorted(glob.glob(str(tmp_path / "spark" / "*.json")))
            for line in Path(f).read_text().splitlines()]
    assert sorted(r["d"] for r in rows) == sorted(e["attrs"]["d"] for e in events)


def test_spark_frames_judge_the_time_values_without_a_schema(spark):
    """Given a compiled Plan, ``cer_cli.spark.match`` computes no schema, and reaches the
    local reader's verdicts on the time values all the same: a unit that puts the times in
    1970 while another fits is refused; a column of texts with an offset holds instants."""
    import cer_cli
    from cer_cli.spark import match

    compiled = compile_query("SELECT * WHERE A ; B")
    epoch = spark.createDataFrame([("A", 1_700_000_000), ("B", 1_700_000_100)],
                                  "type string, time long")
    with pytest.raises(LogError, match="look like epoch seconds") as e:
        match(epoch, compiled, time_unit="ms")
    assert e.value.hints[0] == "pass time_unit='s'"  # the API's keyword, not --time-unit
    rows = [("A", "2024-01-01T10:00+01:00"), ("B", "2024-01-01 09:30:00")]
    got = pl.from_arrow(match(spark.createDataFrame(rows, "type string, time string"),
                              compiled).toArrow())
    want = cer_cli.match(pl.DataFrame(rows, schema=["type", "time"], orient="row"), compiled)
    assert got.schema["time"].time_zone == want.schema["time"].time_zone == "UTC"
    assert got.equals(want.cast(got.schema)) and got.height == 2


def test_spark_match_takes_the_options_of_cer_cli_match(spark):
    """``logs=`` with per-log options and ``time_format``: the matches ``cer_cli.match``
    gives for the same polars frames; a log mistake is ``LogError`` naming the keyword;
    ``open_absence="report"`` is refused as ``--spark`` refuses it."""
    import cer_cli
    from cer_cli.spark import match

    w = [("HOT", "01/01/2024 10:00"), ("HOT", "01/01/2024 10:20")]
    f = [("LATE", "2024-01-01T10:05:00"), ("LATE", "2024-01-01T10:40:00")]
    query = "SELECT * WHERE W>HOT AS h ; F>LATE AS l WITHIN 30 minutes"
    options = {"type_column": {"W": "kind"}, "time_column": {"W": "at", "F": "ts"},
               "time_format": {"W": "%d/%m/%Y %H:%M"}, "shape": "wide"}
    want = cer_cli.match(query=query, logs={
        "W": pl.DataFrame(w, schema=["kind", "at"], orient="row"),
        "F": pl.DataFrame(f, schema=["type", "ts"], orient="row")}, **options)
    assert want.height == 2
    frames = {"W": spark.createDataFrame(w, "kind string, at string"),
              "F": spark.createDataFrame(f, "type string, ts string")}
    got = pl.from_arrow(match(query=query, logs=frames, **options).toArrow())
    assert got.select("h.at", "l.ts").rows() == want.select("h.at", "l.ts").rows()
    with pytest.raises(LogError, match=r"time_unit=\{'X': 's'\}: no log named 'X'"):
        match(query=query, logs=frames, time_unit={"X": "s"})
    with pytest.raises(ValueError, match="not available on Spark"):
        match(frames["F"], "SELECT * WHERE LATE ; !LATE WITHIN 5 EVENTS", open_absence="report")


def test_cli_spark_count_by_equals_local_mode():
    """``--spark --count --by`` a partition key and a variable's column: local mode's rows."""
    from tests.test_cli_match import run

    args = ["match", str(ROOT / "queries/flights_delayed_thrice.cel"),
            str(ROOT / "samples/flights.parquet"), "--count", "--by", "tailnum", "--by",
            "d1.carrier", "--format", "csv"]
    local, spark = run(*args), run(*args, "--spark", "--master", "local[2]")
    assert local.exit_code == spark.exit_code == 0, spark.output
    assert spark.stdout == local.stdout and len(local.stdout.splitlines()) > 10


def test_spark_match_refuses_unknown_shapes_and_non_frames(spark):
    from cer_cli.spark import match

    df = _user_frame(spark, str(ROOT / "samples" / "stocks.csv"))
    with pytest.raises(ValueError, match="shapes: long, wide, struct"):
        match(df, "SELECT * WHERE SELL ; BUY", shape="tall")
    with pytest.raises(TypeError):
        match(pl.DataFrame({"type": ["A"]}), "SELECT * WHERE A")


# --------------------------------------------------------------------------- errors


def test_unreadable_log_is_an_input_error(spark, tmp_path):
    compiled = compile_query("SELECT * WHERE A ; B")
    with pytest.raises(SparkError) as info:
        list(spark_match(compiled, [str(tmp_path / "missing.csv")]))
    assert info.value.input_error and info.value.exit_code == 2


@pytest.mark.parametrize(("said", "what"), [
    ("java.lang.OutOfMemoryError: Java heap space", "out of memory"),
    ("java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.",
     "Spark stopped"),
    ("org.apache.spark.SparkException: Job aborted due to stage failure: ExecutorLostFailure"
     " (executor 1 exited caused by one of the running tasks)", "lost an executor"),
    # what a 10M-event -o run on local[2] said when a task's JVM ran out of heap
    ('java.lang.NullPointerException: Cannot invoke "org.apache.spark.scheduler.DAGScheduler.'
     'cleanupQueryJobs(long)" because the return value of "org.apache.spark.SparkContext.'
     'dagScheduler()" is null', "Spark stopped"),
])
def test_sparks_own_failures_are_one_line_with_the_setting_that_helps(said, what):
    """Spark's own failure (not the input's): one line saying what happened, the setting
    that gives Spark memory as a hint, exit 1; the Java stack only for ``--debug``."""
    from cer_cli.spark.errors import spark_error

    error = spark_error(RuntimeError(f"An error occurred while calling o42.collect.\n: {said}"
                                     "\n\tat org.apache.spark.SparkContext.runJob(x.scala:1)"))
    assert what in error.message and "\n" not in error.message and "at org." not in error.message
    assert error.exit_code == 1 and not error.input_error
    assert any("spark.driver.memory=" in h for h in error.hints)
    assert "at org.apache.spark" in error.detail


def test_persisted_frames_are_cached_in_small_batches(spark):
    # 10,000-row cached batches of match rows ran a 10M-event -o out of the default heap
    assert spark.conf.get("spark.sql.inMemoryColumnarStorage.batchSize") == "1000"


def test_any_failure_once_the_context_stopped_says_spark_stopped(monkeypatch):
    """A task's JVM out of heap stops the context; the action waiting on it fails with what
    it met on the way (here Spark's INTERNAL_ERROR, which blames a bug in Spark): the
    message says Spark stopped, with the memory settings, whatever the text."""
    from cer_cli.spark import errors

    said = RuntimeError('An error occurred while calling o297.collectToPython.\n: '
                        'org.apache.spark.SparkException: [INTERNAL_ERROR] The "collectToPython"'
                        ' action failed. You hit a bug in Spark or the Spark plugins you use.')
    monkeypatch.setattr(errors, "context_stopped", lambda: False)
    assert "You hit a bug" in errors.spark_error(said).message
    monkeypatch.setattr(errors, "context_stopped", lambda: True)
    error = errors.spark_error(said, what="cannot write out.parquet: ")
    assert error.message.startswith("cannot write out.parquet: Spark stopped")
    assert error.exit_code == 1 and any("spark.driver.memory=" in h for h in error.hints)


def test_a_context_is_stopped_when_it_says_so_or_its_jvm_does_not_answer(monkeypatch):
    from pyspark import SparkContext

    from cer_cli.spark.errors import context_stopped

    class Context:
        def __init__(self, answer):
            self._jsc = self
            self.answer = answer

        def sc(self):
            if isinstance(self.answer, Exception):
                raise self.answer
            return self

        def isStopped(self):  # noqa: N802 - the JVM's name
            return self.answer

    for context, stopped in ((None, False), (Context(False), False), (Context(True), True),
                             (Context(ConnectionError("Answer from Java side is empty")), True)):
        monkeypatch.setattr(SparkContext, "_active_spark_context", context)
        assert context_stopped() is stopped


def test_a_spark_failure_under_the_cli_is_one_line_and_the_stack_is_for_debug(spark, monkeypatch):
    """A Spark context stopped under a run, as the 10M-event run's driver JVM did: exit 1,
    no "internal error", no Java stack; ``--debug`` prints the stack."""
    import cer_cli.spark.job as job

    def stopped(*args, **kwargs):
        raise RuntimeError("An error occurred while calling o7.collectToPython.\n"
                           ": java.lang.IllegalStateException: Cannot call methods on a stopped"
                           " SparkContext.\n\tat org.apache.spark.SparkContext.assertNotStopped")

    monkeypatch.setattr(job, "count_matches", stopped)
    args = ["match", "-e", "SELECT * WHERE SELL ; BUY", str(ROOT / "samples" / "stocks.csv"),
            "--spark", "--master", "local[2]", "--count"]
    result = _cli(*args)
    assert result.exit_code == 1, result.output
    assert "internal error" not in result.output and "at org.apache" not in result.output
    assert "Spark stopped" in result.output and "spark.driver.memory=4g" in result.output
    assert "at org.apache.spark.SparkContext" in _cli(*args, "--debug").output


def test_an_unreadable_text_time_is_refused_before_any_job_as_locally(spark, tmp_path):
    """A text time column that cannot be read: Spark refuses it up front with the local
    reader's message (not as a failed task when an action runs), by the CLI and by
    ``cer_cli.spark.match`` on a DataFrame."""
    from cer_cli.spark import match

    log = tmp_path / "log.csv"
    log.write_text("type,time\nA,2024-01-01 10:00:00\nB,2024-01-01 10:00:01\n"
                   "B,not a time\nB,2024-01-01 10:00:03\n")
    args = ["match", "-e", "SELECT * WHERE A ; B WITHIN 1 hours", str(log)]
    local = _cli(*args, "--count")
    assert local.exit_code == 2 and "data row 2" in local.output, local.output
    for extra in ([], ["--count"]):
        on_spark = _cli(*args, *extra, "--spark", "--master", "local[2]")
        assert on_spark.exit_code == 2, on_spark.output
        assert on_spark.output.splitlines()[0] == local.output.splitlines()[0]
        assert "USER_RAISED_EXCEPTION" not in on_spark.output
    rows = [("A", "2024-01-01 10:00:00"), ("B", "not a time")]
    with pytest.raises(LogError, match="data row 1"):  # as cer_cli.match raises it
        match(spark.createDataFrame(rows, "type string, time string"),
              compile_query("SELECT * WHERE A ; B"))  # no action: refused all the same


@pytest.mark.parametrize("kind", ["text", "timestamp"])
def test_a_time_beyond_nanoseconds_range_is_refused_as_locally(spark, tmp_path, kind):
    """Spark's timestamps reach further than nanoseconds since 1970: a time after 2262 was a
    failed job (ARITHMETIC_OVERFLOW, exit 1) where local mode refuses it naming its row."""
    if kind == "text":
        log = tmp_path / "far.csv"
        log.write_text("type,time\nA,2024-01-01T00:00:00\nB,3000-01-01T00:00:00\n")
    else:
        log = tmp_path / "far.parquet"
        pl.DataFrame({"type": ["A", "B"], "time": [dt.datetime(2024, 1, 1),
                                                   dt.datetime(3000, 1, 1)]}).write_parquet(log)
    args = ["match", "-e", "A ; B", str(log), "--count"]
    local = _cli(*args)
    on_spark = _cli(*args, "--spark", "--master", "local[2]")
    assert local.exit_code == on_spark.exit_code == 2, on_spark.output
    for got in (local, on_spark):
        assert "data row 1" in got.output, got.output
        assert "time value '3000-01-01" in got.output and "is out of range" in got.output
    assert "ARITHMETIC_OVERFLOW" not in on_spark.output


def test_unknown_format_is_an_input_error(spark, tmp_path):
    with pytest.raises(SparkError) as info:
        list(spark_match(compile_query("A"), [str(tmp_path / "log.txt")]))
    assert info.value.exit_code == 2


# --------------------------------------------------------------------------- cluster


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CLUSTER_SCRIPT = """
import json, sys
from cer_cli.api import compile_query, read_events
from cer_cli.spark import spark_match
query, sample, master = sys.argv[1:4]
compiled = compile_query(open(query).read(), schema=read_events([sample]).schema)
conf = {"spark.pyspark.python": sys.executable, "spark.executor.memory": "512m",
        "spark.sql.shuffle.partitions": "4"}
out = [[m.start, m.end, m.events, m.partition] for m in spark_match(compiled, [sample], master=master, conf=conf)]
print("RESULT " + json.dumps(out))
"""


@pytest.mark.spark_cluster
def test_standalone_cluster(tmp_path):
    """A standalone master and one two-core worker on 127.0.0.1 (the bench's set-up) give
    local mode's matches, and the executors run this very cer_cli, unzipped."""
    from tests.bench.spark import standalone_cluster

    with standalone_cluster(tmp_path, workers=1, cores=2, memory="1g") as url:
        query, sample = ROOT / "queries" / "core_q2.cel", ROOT / "samples" / "stocks.csv"
        done = subprocess.run(
            [sys.executable, "-c", CLUSTER_SCRIPT, str(query), str(sample), url],
            capture_output=True, text=True, cwd=tmp_path, timeout=240,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable})
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
        assert lines, done.stderr[-4000:]
        got = json.loads(lines[0][len("RESULT "):])
        compiled = compile_query(query.read_text(), schema=read_events([str(sample)]).schema)
        expected = [[m.start, m.end, m.events, m.partition]
                    for m in local_matches(compiled, [str(sample)])]
        assert got == json.loads(json.dumps(expected))
        assert expected
        # the executors' Python imports this very cer_cli: no zip, whose new directory per
        # application made numba recompile the kernel in every executor on every run
        assert not list((tmp_path / "work0").rglob("cer_cli.zip"))


def test_the_zip_is_shipped_unless_the_executors_have_these_sources():
    from cer_cli.spark.ship import executors_have, package_digest

    class Sc:
        defaultParallelism = 2

        def __init__(self, found):
            self.found = found

        def parallelize(self, data, n):
            return self

        def map(self, f):
            return self

        def distinct(self):
            return self

        def collect(self):
            if isinstance(self.found, Exception):
                raise self.found
            return self.found

    here = package_digest()
    assert executors_have(Sc([here]), here)
    assert not executors_have(Sc(["another version"]), here)
    assert not executors_have(Sc([here, "another version"]), here)
    assert not executors_have(Sc(RuntimeError("No module named 'cer_cli'")), here)


# --------------------------------------------------------------------------- command line


@pytest.mark.parametrize("query", [
    (str(ROOT / "queries" / "core_q2.cel"),),
    ("-e", "SELECT * WHERE BUY AS b ; SELL+ AS s PARTITION BY [name] WITHIN 3 EVENTS")])
def test_cli_spark_prints_what_local_mode_prints(spark, monkeypatch, query):
    """Printed from Spark's matches, the driver reads the log in frames (here of 50 events)
    as far as the matches reach (``EventLookup.follow``), not the whole log at once."""
    import cer_cli.cli as cli_module
    from cer_cli.io.lookup import EventLookup

    monkeypatch.setattr(cli_module, "BATCH_ROWS", 50)
    args = [*query, str(ROOT / "samples" / "stocks.csv")]
    local = _cli("match", *args, "--format", "jsonl")
    added = []
    real = EventLookup.add
    monkeypatch.setattr(EventLookup, "add", lambda self, f: (added.append(f.height), real(self, f)))
    on_spark = _cli("match", *args, "--format", "jsonl", "--spark", "--master", "local[2]",
                    "--spark-conf", "spark.sql.shuffle.partitions=4")
    assert local.exit_code == on_spark.exit_code == 0, on_spark.output
    assert on_spark.stdout == local.stdout and local.stdout
    assert len(added) > 1 and max(added) <= 50, added
    count = _cli("match", *args, "--count", "--spark", "--master", "local[2]")
    assert int(count.stdout) == len(local.stdout.splitlines())


@pytest.mark.parametrize("sep,suffix", [(";", "csv"), ("\t", "tsv")])
def test_cli_spark_reads_a_csv_separated_otherwise_as_local_mode(spark, tmp_path, sep, suffix):
    """The contract's separator (``contract.csv_dialect``) on Spark too: a ``;``- or
    tab-separated copy of stocks.csv gives local mode's matches."""
    lines = (ROOT / "samples" / "stocks.csv").read_text().splitlines()
    log = tmp_path / f"stocks.{suffix}"
    log.write_text("".join(line.replace(",", sep) + "\n" for line in lines))
    args = ["-e", "SELECT * WHERE BUY AS b ; SELL AS s PARTITION BY [name] WITHIN 3 EVENTS",
            f"stocks={log}", "--format", "jsonl"]
    local = _cli("match", *args)
    on_spark = _cli("match", *args, "--spark", "--master", "local[2]")
    assert local.exit_code == on_spark.exit_code == 0, on_spark.output
    assert on_spark.stdout == local.stdout and local.stdout


def test_cli_spark_reads_csv_dates_and_numbers_as_local_mode(spark, tmp_path):
    """Only ISO texts of one kind are dates, on both runners (``contract.iso_dates``):
    polars read 02/02/2024 day first where Spark kept it text (``b.d > a.d``: 0 matches
    locally, 1 on Spark), and Spark read 10:00:00 as today at ten and a column of dates
    and datetimes as datetimes, where polars kept them text; so were `` 5`` and ``+5``
    (numbers on Spark) and ``inf`` (a number locally) (``contract.csv_kind_holds``)."""
    from tests.test_read_edges import GUESSES, NUMBERS

    dates, numbers = tmp_path / "d.csv", tmp_path / "n.csv"
    dates.write_text(GUESSES)
    numbers.write_text(NUMBERS)
    for q, log in (("A AS a ; B AS b FILTER b.d > a.d", dates),
                   ("A AS a ; B AS b FILTER b.s < a.s", dates),
                   ("A AS a ; B AS b FILTER a.k = '10:00:00' AND b.m > a.m", dates),
                   ("A AS a ; B AS b FILTER b.iso > a.iso", dates),
                   ("A AS a ; B AS b FILTER b.sp < a.sp AND b.plus < a.plus WITHIN 5 EVENTS", numbers),
                   ("A AS a ; B AS b FILTER b.inf < a.inf AND b.n > a.n WITHIN 5 EVENTS", numbers)):
        for extra in (["--format", "jsonl"], ["--count"]):
            local = _cli("match", "-e", q, str(log), *extra)
            on_spark = _cli("match", "-e", q, str(log), *extra, "--spark", "--master", "local[2]")
            assert local.exit_code == on_spark.exit_code == 0, (q, on_spark.output)
            assert on_spark.stdout == local.stdout and local.stdout.strip() not in ("", "0"), q


@pytest.mark.parametrize("shape", ["long", "wide"])
def test_cli_spark_names_columns_without_a_name_as_local_mode(spark, tmp_path, shape):
    """A CSV header's empty names (a spreadsheet's trailing separators) and a Parquet
    column named "": ``_c`` and the column's position on both runners (polars called them
    "" and ``_duplicated_0``, and the long shape failed on them)."""
    csv_log = tmp_path / "l.csv"
    csv_log.write_text("type,time,,v,\nA,1,,5,x\nB,2,,6,\n")
    parquet = tmp_path / "l.parquet"
    pl.DataFrame({"type": ["A", "B"], "time": [1, 2], "": [7, 8]}).write_parquet(parquet)
    for log, columns in ((csv_log, ["_c2", "_c4"]), (parquet, ["_c2"])):
        args = ["-e", "SELECT * WHERE A ; B", str(log), "--format", "csv", "--shape", shape]
        local = _cli("match", *args)
        on_spark = _cli("match", *args, "--spark", "--master", "local[2]")
        assert local.exit_code == on_spark.exit_code == 0, (local.output, on_spark.output)
        assert on_spark.stdout == local.stdout
        header = local.stdout.splitlines()[0].split(",")
        assert all(any(h.endswith(c) for h in header) for c in columns), header


def test_cli_spark_reads_a_dotted_column_and_output_named_columns_as_local_mode(spark, tmp_path):
    """A log column named ``a.b`` failed every Spark run ("cannot resolve `a`.`b`": PySpark's
    ``mapInArrow`` takes its input columns by ``df[name]``); columns named like output
    columns (``match``, ``vars``) keep their values. Printed, written with ``-o``, counted,
    filtered and partitioned by it: local mode's results."""
    log = tmp_path / "l.parquet"
    pl.DataFrame({"type": ["A", "B", "A", "B"], "time": [1, 2, 3, 4], "a.b": [1, 1, 2, 2],
                  "match": ["x", "y", "z", "w"], "vars": [5, 6, 7, 8]}).write_parquet(log)
    for q in ("SELECT * WHERE A ; B FILTER B[`a.b` > 1]",
              "SELECT * WHERE A ; B PARTITION BY [`a.b`]"):
        for extra in (["--format", "csv", "--shape", "wide"], ["--count"]):
            local = _cli("match", "-e", q, str(log), *extra)
            on_spark = _cli("match", "-e", q, str(log), *extra, "--spark", "--master", "local[2]")
            assert local.exit_code == on_spark.exit_code == 0, on_spark.output
            assert on_spark.stdout == local.stdout and local.stdout
    out = tmp_path / "out.parquet"
    q = "SELECT * WHERE A ; B PARTITION BY [`a.b`]"
    written = _cli("match", "-e", q, str(log), "-o", str(out), "--spark", "--master", "local[2]")
    assert written.exit_code == 0, written.output
    got = pl.read_parquet(str(out / "*.parquet")).sort("match", "position")
    assert got["a.b"].to_list() == [1, 1, 2, 2]  # the long shape: a row per match and event
    assert got["log.match"].to_list() == ["x", "y", "z", "w"]
    assert got["log.vars"].to_list() == [5, 6, 7, 8]


def test_cli_spark_tells_columns_apart_by_case_as_local_mode(spark, tmp_path):
    """Column names are case-sensitive, as in polars and queries: Spark (case-insensitive by
    default) refused a log with columns ``v`` and ``V`` ("the column `v` already exists")."""
    log = tmp_path / "l.csv"
    log.write_text("type,time,v,V,größe\nA,1,1,5,x\nB,2,1,6,y\nA,3,2,7,z\nB,4,2,8,w\n")
    for q in ("SELECT * WHERE A ; B FILTER B[V > 6] PARTITION BY [v]",
              "SELECT * WHERE A ; B FILTER B[größe = 'w']"):
        for extra in (["--format", "jsonl"], ["--count"]):
            local = _cli("match", "-e", q, str(log), *extra)
            on_spark = _cli("match", "-e", q, str(log), *extra, "--spark", "--master", "local[2]")
            assert local.exit_code == on_spark.exit_code == 0, on_spark.output
            assert on_spark.stdout == local.stdout and local.stdout.strip() not in ("", "0")


def test_cli_spark_unifies_a_column_over_logs_as_local_mode(spark, tmp_path):
    """A column of integers in one log and of texts in another is text in both (integers
    and floats: floats), as polars concatenates them: Spark's union cast the texts to
    integers and failed ("'1.5' cannot be cast to BIGINT", exit 1)."""
    ints = tmp_path / "ints.csv"
    ints.write_text("type,time,v\nA,1,1\nB,3,2\n")
    texts = tmp_path / "texts.csv"
    texts.write_text("type,time,v\nA,2,1.5\nB,4,x\n")
    floats = tmp_path / "floats.csv"
    floats.write_text("type,time,v\nA,2,1.5\nB,4,2.5\n")
    for other, q in ((texts, "SELECT * WHERE A ; B FILTER B[v = '2']"),
                     (floats, "SELECT * WHERE A ; B FILTER B[v > 1]")):
        for extra in (["--format", "jsonl"], ["--count"]):
            args = ["-e", q, str(ints), str(other), *extra]
            local = _cli("match", *args)
            on_spark = _cli("match", *args, "--spark", "--master", "local[2]")
            assert local.exit_code == on_spark.exit_code == 0, on_spark.output
            assert on_spark.stdout == local.stdout and local.stdout.strip() not in ("", "0")


def test_cli_spark_refuses_a_csv_that_is_not_utf8_as_local_mode(spark, tmp_path):
    """Spark reads a byte that is not UTF-8 as U+FFFD; among the first 64 KiB it is refused
    before Spark starts, with local mode's message; so is a header naming a column twice."""
    log = tmp_path / "l.csv"
    log.write_bytes(b"type,time,name\nA,1,ok\nB,2,caf\xe9\n")
    local = _cli("match", "-e", "A ; B", str(log), "--count")
    on_spark = _cli("match", "-e", "A ; B", str(log), "--count", "--spark", "--master", "local[2]")
    assert local.exit_code == on_spark.exit_code == 2, on_spark.output
    assert on_spark.output.splitlines()[:2] == local.output.splitlines()[:2]
    assert "line 3: not UTF-8 text" in local.output
    twice = tmp_path / "twice.csv"  # Spark would have renamed the second 'type' to 'type2'
    twice.write_text("type,time,type\nA,1,B\n")
    local = _cli("match", "-e", "A", str(twice), "--count")
    on_spark = _cli("match", "-e", "A", str(twice), "--count", "--spark", "--master", "local[2]")
    assert local.exit_code == on_spark.exit_code == 2, on_spark.output
    assert on_spark.output.splitlines()[0] == local.output.splitlines()[0]
    assert "names column 'type' twice" in local.output


def test_cli_spark_writes_a_directory(spark, tmp_path):
    out = tmp_path / "out.parquet"
    args = [str(ROOT / "queries" / "phi2.cel"), str(ROOT / "samples" / "fig1.csv")]
    result = _cli("match", *args, "--spark", "--master", "local[2]", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert out.is_dir()
    local = _cli("match", *args, "--format", "jsonl").stdout.splitlines()
    written = pl.read_parquet(str(out / "*.parquet"))
    assert written["match"].n_unique() == len(local) > 0


def test_cli_spark_errors_are_clear(spark, tmp_path):
    missing = _cli("match", "-e", "A", str(tmp_path / "nope.csv"), "--spark", "--master", "local[2]")
    assert missing.exit_code == 2 and "Traceback" not in missing.output
    bad_conf = _cli("match", "-e", "A", str(ROOT / "samples" / "fig1.csv"), "--spark", "--spark-conf", "novalue")
    assert bad_conf.exit_code == 2 and "KEY=VALUE" in bad_conf.output
    no_spark = _cli("match", "-e", "T", str(ROOT / "samples" / "fig1.csv"), "--master", "local[2]")
    assert no_spark.exit_code == 2 and "--spark" in no_spark.output


def test_explain_spark_shows_the_plan():
    result = _cli("explain", str(ROOT / "queries" / "core_q2.cel"), "--spark", "--format", "json")
    assert result.exit_code == 0, result.output
    assert "spark plan" in json.loads(result.stdout)["plan"]["spark"]
    single = _cli("explain", "-e", "A ; B", "--spark")
    assert "why" in single.stdout


# --------------------------------------------------------------------------- pre-flight
# These fail before any SparkSession starts (no JVM): about a second each.


@pytest.mark.parametrize("master", ["bogus://x", "local[two]", "spark://host-without-port"])
def test_bad_master_url_is_one_line_before_spark_starts(master):
    result = _cli("match", "-e", "T", str(ROOT / "samples" / "fig1.csv"), "--spark", "--master", master)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == f"error: bad Spark master URL {master!r}" or (
        "expected spark://HOST:PORT" in result.stderr)
    assert "JAVA_HOME" not in result.stderr and "local[N]" in result.stderr
    assert len(result.stderr.splitlines()) == 2  # the error and its hint


def test_unreachable_master_fails_fast():
    started = time.monotonic()
    result = _cli("match", "-e", "T", str(ROOT / "samples" / "fig1.csv"), "--spark",
                  "--master", "spark://nohost.invalid:7077")
    assert result.exit_code == 2 and time.monotonic() - started < 10, result.output
    assert "unknown host 'nohost.invalid'" in result.stderr
    refused = _cli("match", "-e", "T", str(ROOT / "samples" / "fig1.csv"), "--spark",
                   "--master", f"spark://127.0.0.1:{_free_port()}")
    assert refused.exit_code == 2 and "cannot connect" in refused.stderr


def test_existing_output_is_refused_before_spark_starts(tmp_path):
    (tmp_path / "taken.parquet").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "part-0").write_text("x")
    for target in ("taken.parquet", "full"):
        started = time.monotonic()
        result = _cli("match", "-e", "T", str(ROOT / "samples" / "fig1.csv"), "--spark",
                      "--master", "spark://nohost.invalid:7077", "-o", str(tmp_path / target),
                      "--format", "parquet")
        assert result.exit_code == 2 and "unknown host" not in result.stderr, result.output
        assert ("an existing file, and the matches are written as a new directory"
                in result.stderr if target == "taken.parquet" else "is a directory" in result.stderr)
        assert time.monotonic() - started < 10


def test_the_output_directory_follows_the_output_rules_before_spark_starts(tmp_path):
    """``--spark -o`` writes a directory, under the local output rules that apply to one
    (io.files.directory_output), checked before Spark starts (an unreachable master here):
    a directory that cannot be created is exit 1 ("cannot write the output"), a symlink
    planted in a shared directory (sticky, world-writable) by another user is refused,
    exit 2. Both went on to start Spark (here: "unknown host")."""
    (tmp_path / "file").write_text("x")
    args = ["match", "-e", "T", str(ROOT / "samples" / "fig1.csv"), "--spark", "--master",
            "spark://nohost.invalid:7077", "--format", "parquet", "-o"]
    result = _cli(*args, str(tmp_path / "file" / "out"))
    assert result.exit_code == 1 and "unknown host" not in result.stderr, result.output
    assert f"cannot write {tmp_path / 'file' / 'out'}: {tmp_path / 'file'} is not a directory" \
        in result.stderr
    if os.geteuid() != 0:
        return  # the planted link below needs another owner: root only
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (shared / "dir").symlink_to(elsewhere)
    os.lchown(shared / "dir", 4242, 4242)
    result = _cli(*args, str(shared / "dir" / "out"))
    assert result.exit_code == 2 and "unknown host" not in result.stderr, result.output
    assert f"{shared / 'dir'} is a symlink in the shared directory {shared}" in result.stderr
    assert list(elsewhere.iterdir()) == []


def test_spark_errors_while_writing_are_the_outputs():
    """A failure while Spark writes ``-o`` is "cannot write the output" (exit 1), as for a
    local ``-o``, although the same Java exception while reading a log is the input's
    (exit 2); a query error an engine raised in a task stays the input's."""
    from cer_cli.spark.errors import spark_error

    denied = RuntimeError("An error occurred while calling o99.save.\n"
                          ": java.nio.file.AccessDeniedException: /out/part-0")
    assert spark_error(denied).exit_code == 2
    written = spark_error(denied, what="cannot write /out: ", writing=True)
    assert written.exit_code == 1 and written.message.startswith("cannot write /out: ")
    task = RuntimeError("PythonException: ... QueryError: WITHIN needs events ordered by time")
    assert spark_error(task, writing=True).exit_code == 2


def test_spark_writes_to_a_device_as_local_mode_does(spark, tmp_path):
    """``-o /dev/null`` (a device: written as it is, as locally) with --spark: the matches
    are computed by Spark and written to it by the local writer (it was refused as "an
    existing file", since Spark writes a directory)."""
    args = ["-e", "SELL ; BUY", str(ROOT / "samples" / "stocks.csv"), "--allow-unbounded"]
    result = _cli("match", *args, "-o", "/dev/null", "--format", "csv", "--spark",
                  "--master", "local[2]")
    assert result.exit_code == 0, result.output


def test_unknown_spark_conf_key_warns():
    result = _cli("match", "-e", "T", str(ROOT / "samples" / "fig1.csv"), "--spark", "--master",
                  "bogus://x", "--spark-conf", "spark.exector.memory=1g",
                  "--spark-conf", "spark.executor.memory=1g", "--spark-conf", "spark.sql.x=1")
    assert result.exit_code == 2
    assert "--spark-conf spark.exector.memory" in result.stderr
    assert "spark.executor.memory" not in result.stderr and "spark.sql.x" not in result.stderr


def test_garbage_parquet_is_an_input_error(spark, tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    result = _cli("match", "-e", "A", str(bad), "--spark", "--master", "local[2]")
    assert result.exit_code == 2, result.output
    assert "Could not read footer" in result.stderr and "o3" not in result.stderr
    assert len(result.stderr.splitlines()) == 2


def test_shipped_package_is_removed_at_exit(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "cer_cli", "match", "-e", "T",
                           str(ROOT / "samples" / "fig1.csv"), "--spark", "--master", "local[1]",
                           "--format", "jsonl"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(done.stdout.splitlines()) == 4
    assert not list(tmp_path.glob("cer-spark-*"))


def _session(sid: int) -> list[tuple[int, str, float]]:
    """(pid, command line, CPU seconds) of the live processes of session ``sid`` (Linux
    ``/proc``)."""
    found = []
    tick = os.sysconf("SC_CLK_TCK")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
            cmd = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) == sid and fields[0] not in "ZX":
            found.append((int(name), cmd, (int(fields[11]) + int(fields[12])) / tick))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("signum, code, line, phase, output", [
    (signal.SIGINT, 130, "interrupted", "task", "file"),
    (signal.SIGTERM, 143, "terminated", "task", "directory"),
    (signal.SIGINT, 130, "interrupted", "jvm", "stdout"),
], ids=["sigint-task-file", "sigterm-task-directory", "sigint-jvm-starting"])
def test_a_signal_stops_a_spark_run_with_one_line(tmp_path, signum, code, line, phase, output):
    """A Spark run ends like a local one: within a second or so of the signal, with one line
    and 128 + the signal, no partial output (``-o`` through a temporary file with
    ``--limit``, Spark's own directory without), and no process left computing: not the
    JVM, not the Python worker in its endless task (``A+ ; B``), whose parent dies first;
    no scratch file of the JVM; and nothing printed after the signal but that line.
    The signal comes while the task runs (in a py4j call that a signal does not end) or
    while the JVM starts."""
    log = tmp_path / "a.csv"
    log.write_text("type\n" + "A\n" * 3000 + "B\n")
    out = tmp_path / "out.csv"
    args = {"file": ["--limit", "1000000000", "--format", "csv", "-o", str(out)],
            "directory": ["--format", "csv", "-o", str(out)], "stdout": ["--format", "jsonl"]}
    # stderr goes to a file and cer's own exit is awaited: a process below cer inherits the
    # stream. Its own session finds every process of the run, even once cer is gone. The
    # JVM's scratch files go to cer's directory in TMPDIR.
    err_path = tmp_path / "err.txt"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with open(err_path, "w") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cer_cli", "match", "--spark", "--master", "local[1]",
             "-e", "A+ ; B", str(log), *args[output]],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err_file, start_new_session=True,
            env={**os.environ, "TMPDIR": str(scratch)},
        )
        try:
            # The endless task: a Python worker that has computed for 2 s. The JVM starting:
            # spark-submit has started java.
            wanted, cpu = ("pyspark.daemon", 2.0) if phase == "task" else ("java", 0.0)
            deadline = time.monotonic() + 240
            while not any(wanted in cmd and used >= cpu for _, cmd, used in _session(proc.pid)):
                assert proc.poll() is None, err_path.read_text()[-2000:]
                assert time.monotonic() < deadline, "the run never got there"
                time.sleep(0.1)
            time.sleep(0.5)
            assert proc.poll() is None, err_path.read_text()[-2000:]
            before = err_path.stat().st_size
            sent = time.monotonic()
            proc.send_signal(signum)
            proc.wait(timeout=30)
            took = time.monotonic() - sent
            time.sleep(2)
            left = _session(proc.pid)
        finally:
            proc.kill()
            for pid, _, _ in _session(proc.pid):  # should the test fail: the JVM, workers
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
    err = err_path.read_text()
    assert proc.returncode == code, err[-2000:]
    assert took < 5, (took, err[-2000:])  # 1 s, with room for a loaded machine
    lines = [x.strip() for x in err.strip().splitlines()]
    assert lines[-1] == line and lines.count(line) == 1 and "Traceback" not in err, err[-2000:]
    if phase == "task":  # nothing else after the signal: no Java or Python stack trace
        assert err_path.read_bytes()[before:].decode() == line + "\n", err[-2000:]
    assert left == [], left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "err.txt", "tmp"]
    assert not list(scratch.glob("cer-spark-*"))  # nor the JVM's scratch files


def test_the_spark_session_is_created_off_the_main_thread():
    """pyspark installs its SIGINT handler only when SparkContext is created in the main
    thread: cer creates it in another, so its own handlers are never replaced, even for the
    moment before signals.reclaim. A fake builder records where getOrCreate runs and that
    errors come back to the caller."""
    import threading

    from cer_cli.spark import session

    class Builder:
        def __init__(self, fail=False):
            self.fail, self.main = fail, None

        def getOrCreate(self):  # noqa: N802 (pyspark's name)
            self.main = threading.current_thread() is threading.main_thread()
            if self.fail:
                raise RuntimeError("no JVM")
            return "session"

    b = Builder()
    assert session._create(b) == "session" and b.main is False
    with pytest.raises(RuntimeError, match="no JVM"):
        session._create(Builder(fail=True))


def test_a_signal_stops_every_process_below_cer():
    """What a signal does to a Spark run's processes (the JVM, pyspark's daemon, its
    workers), on a child and a grandchild: both end, the grandchild too although its parent
    dies first (it moves to init, and is still found). Run in a subprocess: pytest's own
    children (the shared Spark session's JVM) must not be touched."""
    code = (
        "import os, subprocess, sys, time\n"
        "from cer_cli.spark import processes\n"
        "grand = 'import time; time.sleep(60)'\n"
        "kid = subprocess.Popen([sys.executable, '-c', 'import subprocess, sys, time; '\n"
        "    f'p = subprocess.Popen([sys.executable, \"-c\", {grand!r}]); print(p.pid, flush=True);'\n"
        "    'time.sleep(60)'], stdout=subprocess.PIPE, text=True)\n"
        "grandchild = int(kid.stdout.readline())\n"
        "t = time.monotonic()\n"
        "processes.stop_processes()\n"
        "processes.end_run()\n"
        "print(kid.wait(timeout=10), round(time.monotonic() - t, 1))\n"
        "for _ in range(100):\n"
        "    if (processes._stat(grandchild) or ['Z'])[0] in 'ZX':  # gone, or dead and not reaped\n"
        "        print('gone'); break\n"
        "    time.sleep(0.05)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    status, took, gone = out.stdout.split()
    assert int(status) in (-signal.SIGTERM, -signal.SIGKILL) and float(took) < 2 and gone == "gone"


# --------------------------------------------------------------------------- overheads


def test_explain_says_when_spark_does_not_pay():
    from cer_cli.plan.fanout import SPARK_MIN_EVENTS

    plan = compile_query("SELECT * WHERE A ; B PARTITION BY [id] WITHIN 3 EVENTS").fanout
    assert "local mode is faster" in plan.describe()
    small = plan.describe(3000)
    assert "this log has 3,000 events" in small and "without --spark is faster" in small
    assert "cost:" not in plan.describe(SPARK_MIN_EVENTS)
    assert "only adds its start-up" in compile_query("SELECT * WHERE A ; B").fanout.describe(10**9)


def test_logs_are_opened_once_per_run_and_again_when_they_change(spark, tmp_path):
    from cer_cli.spark.read import input_bytes, open_logs

    log = tmp_path / "a.csv"
    log.write_text("type,v\nA,1\n")
    first = open_logs(spark, [str(log)], None, None)
    assert open_logs(spark, [str(log)], None, None) is first
    assert input_bytes([str(log)]) == log.stat().st_size
    assert input_bytes(["hdfs://nn/logs", str(log)]) is None
    log.write_text("type,v,w\nA,1,2\n")
    again = open_logs(spark, [str(log)], None, None)
    assert again is not first and "w" in again[0].df.columns


def test_local_executors_import_the_installed_package():
    """No zip for local workers that import this very cer_cli (its numba cache is warm)."""
    from cer_cli.spark.ship import workers_import_this

    assert workers_import_this()


def test_cli_spark_reads_a_log_whose_name_holds_pattern_characters(spark, tmp_path):
    """Spark (Hadoop) read a local ``l[1].csv`` as a pattern and found no file (exit 2);
    its characters are escaped, so it is that file, as locally."""
    csv_log = tmp_path / "l[1].csv"  # and ';'-separated: the separator is read from it too
    csv_log.write_text("type;time\nA;1\nB;2\nB;3\n")
    parquet = tmp_path / "l{1}.parquet"
    pl.DataFrame({"type": ["A", "B"], "time": [1, 2]}).write_parquet(parquet)
    for log in (csv_log, parquet):
        local = _cli("match", "-e", "A ; B", str(log), "--count")
        on_spark = _cli("match", "-e", "A ; B", str(log), "--count", "--spark", "--master",
                        "local[1]")
        assert local.exit_code == on_spark.exit_code == 0, on_spark.output
        assert on_spark.stdout == local.stdout and local.stdout.strip() != "0"
