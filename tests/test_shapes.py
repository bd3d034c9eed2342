"""The output shapes through the CLI: the wide shape (checked against an independent pivot
of the long shape) and the match-level columns and time zones of every format, on every
example query and its sample. The DataFrame API is tested in ``test_frames``."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import polars as pl
import pytest

import cer_cli
from tests.test_cli_match import QUERIES, ROOT, run, sample_of  # noqa: E402


def user_frame(sample: Path) -> pl.DataFrame:
    """The sample as a notebook user loads it: polars' own readers, default options."""
    return pl.read_csv(sample) if sample.suffix == ".csv" else pl.read_parquet(sample)


def cli_frame(tmp_path: Path, query: Path, sample: Path, shape: str, ext: str = "parquet",
              log: Path | None = None) -> Path:
    out = tmp_path / f"{query.stem}-{shape}.{ext}"
    result = run("match", str(query), str(log or sample), "--shape", shape, "-o", str(out),
                 "--allow-unbounded")
    assert result.exit_code == 0, result.output
    return out


def iso(v):
    """A value as JSONL prints it (datetimes as ``isoformat``)."""
    if isinstance(v, dt.datetime | dt.date):
        return v.isoformat()
    if isinstance(v, list):
        return [iso(x) for x in v]
    return v


def pivot(long: pl.DataFrame, variables: list[tuple[str, bool]], attrs: list[str]) -> list[dict]:
    """The wide rows, computed row by row from the long rows (the definition)."""
    rows: dict[int, list[dict]] = {}
    for r in long.iter_rows(named=True):
        rows.setdefault(r["match"], []).append(r)
    out = []
    for _, events in sorted(rows.items()):
        first = events[0]
        wide = {c: first[c] for c in ("match", "start", "end", "start_time", "end_time", "partition")}
        for var, many in variables:
            mine = [e for e in events if var in (e["vars"] or ())]  # null: no event
            for c in ("position", "stream", "row", "type", *attrs):
                values = [e[c] for e in mine]
                wide[f"{var}.{c}"] = (values or None) if many else (values[0] if values else None)
        out.append(wide)
    return out


def wide_variables_of(wide: pl.DataFrame) -> list[tuple[str, bool]]:
    return [(c[: -len(".position")], isinstance(d, pl.List))
            for c, d in wide.schema.items() if c.endswith(".position")]


# --------------------------------------------------------------------------- wide shape


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.stem)
def test_wide_shape_is_the_long_shape_pivoted(tmp_path, query):
    sample = sample_of(query)
    long = pl.read_parquet(cli_frame(tmp_path, query, sample, "long"))
    wide = pl.read_parquet(cli_frame(tmp_path, query, sample, "wide"))
    variables = wide_variables_of(wide)
    attrs = [c for c in long.columns[11:]]
    assert wide.height == long["match"].n_unique()
    assert wide.to_dicts() == pivot(long, variables, attrs)
    # every AS variable gets columns; only event-type labels named by AS may be left out
    types = set(long["type"].to_list())
    named = {v for v, _ in variables}
    assert {v for vs in long["vars"].to_list() for v in vs} - named <= types
    # the same rows in JSONL (datetimes as isoformat, partition as its object) and CSV
    lines = Path(cli_frame(tmp_path, query, sample, "wide", "jsonl")).read_text().splitlines()
    want = [{k: (json.loads(v) if k == "partition" and v else iso(v)) for k, v in r.items()}
            for r in wide.to_dicts()]
    assert [json.loads(line) for line in lines] == want
    csv = pl.read_csv(cli_frame(tmp_path, query, sample, "wide", "csv"), infer_schema=False)
    assert csv.columns == wide.columns
    assert csv["match"].cast(pl.Int64).to_list() == wide["match"].to_list()
    for c, d in wide.schema.items():
        if isinstance(d, pl.Datetime):
            assert csv[c].to_list() == [iso(v) for v in wide[c].to_list()]


def test_wide_table_shows_one_row_per_match():
    query, sample = ROOT / "queries/phi3.cel", ROOT / "samples/fig1.csv"
    n = len(run("match", str(query), str(sample), "--format", "jsonl").stdout.splitlines())
    result = run("match", str(query), str(sample), "--shape", "wide", "--format", "table")
    assert result.exit_code == 0, result.output
    assert [line.split()[0] for line in result.stdout.splitlines() if line[:2] in ("x ", "y ", "z ")] == ["x", "y", "z"] * n
    assert f"{n} matches" in result.stdout


def test_wide_table_knows_the_variables_from_the_query_not_the_column_names(tmp_path):
    """A log column named ``position`` is ``x.log.position`` in the wide shape; the table
    took every column ending in ``.position`` for a variable and showed ``x.log`` as one."""
    log = tmp_path / "p.csv"
    log.write_text("type,position,ts\nA,5,1\nB,7,2\n")
    result = run("match", "-e", "A AS x ; B AS y", str(log), "--shape", "wide", "--format", "table")
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines() if line[:2] in ("x ", "y ")]
    assert [r[0] for r in rows] == ["x", "y"], result.stdout
    assert "log.position=5" in result.stdout and "x.log" not in result.stdout


@pytest.mark.parametrize("shape", ["long", "wide"])
def test_the_table_prints_values_literally_and_nested_ones_as_json(tmp_path, shape):
    """rich reads ``[...]`` as markup: a log value ``[/]`` failed the table (internal error,
    exit 1) and ``[red]`` vanished; a column or key named so too. Lists and structs print
    as JSONL writes them (Python's ``{'p': 1}`` before), an empty list included, and the
    wide table told a list value from a variable's list by the variable, not the value."""
    log = tmp_path / "l.parquet"
    pl.DataFrame({"type": ["A", "B"], "time": [1, 2], "s": ["[/]", "[red]x"], "[k]": ["[b]", "[b]"],
                  "lst": [["a", "b"], []], "st": [{"p": 1, "q": "y"}, None]}).write_parquet(log)
    r = run("match", "-e", "SELECT * WHERE A ; B PARTITION BY [`[k]`]", str(log),
            "--format", "table", "--shape", shape)
    assert r.exit_code == 0, r.output
    for text in ("s=[/]", "s=[red]x", "[k]=[b]", 'lst=["a", "b"]', "lst=[]",
                 'st={"p": 1, "q": "y"}'):
        assert text in r.stdout, (text, r.stdout)


def test_the_wide_table_leaves_out_nan_as_the_long_one_does(tmp_path):
    """A float NaN (or infinity) is no value, and JSON writes it as null: the long table
    leaves such an attribute out, as it leaves out a null. The wide table printed it as
    ``f=∅`` (and a list of NaN only as ``[∅]``), so the two shapes disagreed."""
    log = tmp_path / "l.parquet"
    pl.DataFrame({"type": ["A", "B", "B"], "time": [1, 2, 3],
                  "f": pl.Series([float("nan"), float("inf"), -0.0], dtype=pl.Float64),
                  "n": pl.Series([None, 2**53 + 1, None], dtype=pl.Int64)}).write_parquet(log)
    lines = {}
    for shape, query in [("long", "A AS x ; B AS y ; B AS z"), ("wide", "A AS x ; B AS y ; B AS z"),
                         ("wide", "A AS x ; B AS y ; (B AS z)+")]:
        r = run("match", "-e", query, str(log), "--format", "table", "--shape", shape)
        assert r.exit_code == 0, r.output
        rows = [[c.strip() for c in line.split("│")] for line in r.stdout.splitlines()
                if "│" in line]
        lines[shape, "+" in query] = [row[-1] for row in rows]
    want = ["time=1", "time=2  n=9007199254740993", "time=3  f=-0.0"]
    assert lines["long", False] == lines["wide", False] == want
    assert lines["wide", True] == want[:2] + ["time=[3]  f=[-0.0]"]
    r = run("match", "-e", "A AS x ; (B AS y)+", str(log), "--format", "table", "--shape", "wide",
            "--limit", "1")
    rows = [[c.strip() for c in line.split("│")] for line in r.stdout.splitlines() if "│" in line]
    assert rows[-1] == ["y", "[1]", "[B]", "time=[2]  n=[9007199254740993]"], r.stdout  # f=[inf]


# --------------------------------------------------------------------------- long columns


@pytest.mark.parametrize("query", ["hash_join", "phi4", "core_q2"])
def test_csv_and_parquet_long_outputs_carry_the_jsonl_match_columns(tmp_path, query):
    query_path = ROOT / "queries" / f"{query}.cel"
    sample = sample_of(query_path)
    records = [json.loads(x) for x in
               cli_frame(tmp_path, query_path, sample, "long", "jsonl").read_text().splitlines()]
    assert records, "the query should match on its sample"
    per_event = [(r["start_time"], r["end_time"], r["partition"]) for r in records
                 for _ in r["events"]]
    parquet = pl.read_parquet(cli_frame(tmp_path, query_path, sample, "long"))
    assert [(iso(a), iso(b), p and json.loads(p)) for a, b, p in
            parquet.select("start_time", "end_time", "partition").iter_rows()] == per_event
    csv = pl.read_csv(cli_frame(tmp_path, query_path, sample, "long", "csv"), infer_schema=False)
    assert [(a, b, p and json.loads(p)) for a, b, p in
            csv.select("start_time", "end_time", "partition").iter_rows()] == per_event


def test_timestamps_keep_their_zone_in_every_format(tmp_path):
    paris = dt.timezone(dt.timedelta(hours=1))
    log = tmp_path / "z.parquet"
    pl.DataFrame({
        "type": ["A", "B", "A", "B"],
        "ts": pl.Series([dt.datetime(2024, 1, 1, 10, i, tzinfo=dt.UTC) for i in range(4)])
              .dt.convert_time_zone("Europe/Paris"),
        "v": [1, 2, 3, 4],
    }).write_parquet(log)
    query = tmp_path / "q.cel"
    query.write_text("SELECT * WHERE A AS a ; B AS b WITHIN 1 minutes\n")
    want = [dt.datetime(2024, 1, 1, 11, 0, tzinfo=paris).isoformat(),
            dt.datetime(2024, 1, 1, 11, 1, tzinfo=paris).isoformat()]
    assert want[0] == "2024-01-01T11:00:00+01:00"
    records = [json.loads(x) for x in
               cli_frame(tmp_path, query, log, "long", "jsonl", log=log).read_text().splitlines()]
    assert [records[0]["start_time"], records[0]["end_time"]] == want
    for shape in ("long", "wide"):
        frame = pl.read_parquet(cli_frame(tmp_path, query, log, shape, log=log))
        assert frame.schema["start_time"].time_zone == "Europe/Paris"
        assert [iso(frame["start_time"][0]), iso(frame["end_time"][0])] == want
        csv = pl.read_csv(cli_frame(tmp_path, query, log, shape, "csv", log=log), infer_schema=False)
        assert [csv["start_time"][0], csv["end_time"][0]] == want
        api = cer_cli.match(pl.read_parquet(log), query.read_text(), shape=shape, stream="z")
        assert api.equals(frame)
    wide = pl.read_parquet(cli_frame(tmp_path, query, log, "wide", log=log))
    assert wide.schema["a.ts"].time_zone == "Europe/Paris"


@pytest.mark.spark
def test_spark_prints_the_same_wide_shape_as_local_mode():
    pytest.importorskip("pyspark")
    query, sample = ROOT / "queries/phi3.cel", ROOT / "samples/fig1.csv"
    args = ["match", str(query), str(sample), "--shape", "wide", "--format", "jsonl"]
    local = run(*args)
    spark = run(*args, "--spark", "--master", "local[2]")
    assert spark.exit_code == 0, spark.output
    assert spark.stdout.splitlines() == local.stdout.splitlines()


@pytest.mark.parametrize("shape", ["long", "wide"])
def test_log_columns_named_like_output_columns_keep_their_values_and_types(tmp_path, shape):
    """A log's columns named ``match``, ``start``, ``partition`` or ``vars`` (``log.``-
    prefixed where they clash) keep their values and types: their types were looked up by
    name among the fixed columns', so ``match`` of texts was cast to an integer (every
    value null), ``partition`` of integers to text, and ``vars`` failed with an internal
    error."""
    log = tmp_path / "l.parquet"
    pl.DataFrame({"type": ["A", "B"], "time": [1, 2], "match": ["x", "y"], "start": ["p", "q"],
                  "partition": [3, 4], "vars": ["u", "v"], "position": [7.5, 8.5]}
                 ).write_parquet(log)
    out = tmp_path / "out.parquet"
    r = run("match", "-e", "SELECT * WHERE A ; B", str(log), "-o", str(out), "--shape", shape)
    assert r.exit_code == 0, r.output
    got = pl.read_parquet(out)
    prefix = {"long": "log.{}", "wide": "B.{}"}[shape]
    wide_log = {"position"}  # the wide shape's event columns: position, stream, row, type
    expect = {"match": ("y", pl.String), "start": ("q", pl.String), "partition": (4, pl.Int64),
              "vars": ("v", pl.String), "position": (8.5, pl.Float64)}
    for column, (value, dtype) in expect.items():
        name = prefix.format(column) if shape == "long" or column not in wide_log \
            else f"B.log.{column}"
        assert got.schema[name] == dtype, (name, got.schema)
        assert got[name].to_list()[-1] == value, (name, got[name].to_list())
    r = run("match", "-e", "SELECT * WHERE A ; B", str(log), "--format", "csv", "--shape", shape)
    assert r.exit_code == 0, r.output
    row = r.stdout.splitlines()[-1]
    assert all(str(v) in row.split(",") for v, _ in expect.values()), row


def test_explain_prints_names_and_values_literally():
    """``cer explain`` printed atoms, guards and marks through rich's markup: a value or a
    back-quoted name ``[/]`` was an internal error."""
    r = run("explain", "-e", "SELECT * WHERE A ; `[/]` AS `[b]` FILTER `[b]`[v = '[/]']")
    assert r.exit_code == 0, r.output
    assert "type = [/]" in r.stdout and "(v = '[/]')" in r.stdout and "{[/], [b]}" in r.stdout


@pytest.mark.parametrize(("text", "want"), [
    ("A ; A AS x", [("A", True), ("x", False)]),  # A is both events: the second is an A too
    ("A AS y ; A AS x", [("y", False), ("x", False)]),  # every A named: no A column
    ("A ; B AS x", [("A", False), ("x", False)]),
    ("SELECT A, x WHERE A AS y ; A AS x", [("A", True), ("x", False)]),
])
def test_a_label_counts_its_named_events_too(tmp_path, text, want):
    """A label's column holds every event of its type, the ones ``T AS x`` names too (the
    long shape's ``vars``): ``A ; A AS x`` reports A as a list of both events. The wide shape
    took A for one event and refused the query at its first match (found by the ``--jobs``
    output property)."""
    from cer_cli.query.parser import parse
    from cer_cli.query.scope import wide_variables

    assert wide_variables(parse(text)) == want
    log = tmp_path / "aa.csv"
    log.write_text("type,time\nA,1\nA,2\nB,3\n")
    for fmt in ("jsonl", "table"):
        result = run("match", "-e", text, str(log), "--shape", "wide", "--format", fmt)
        assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in run("match", "-e", text, str(log), "--shape", "wide",
                                             "--format", "jsonl").stdout.splitlines()]
    long = [json.loads(line) for line in run("match", "-e", text, str(log), "--format",
                                             "jsonl").stdout.splitlines()]
    assert len(rows) == len(long) > 0
    api = cer_cli.match(pl.read_csv(log), text, shape="wide").to_dicts()  # the Python API
    for row, from_api, match in zip(rows, api, long, strict=True):
        for var, many in want:
            events = [e["position"] for e in match["events"] if var in e["vars"]]
            assert row[f"{var}.position"] == from_api[f"{var}.position"] == (
                events if many else events[0])
