"""`cer match` and `cer explain` through the command line: outputs, formats, errors.

Outputs on the small samples are checked against the brute-force reference evaluator;
every example query in queries/ is also pinned by a golden file (regenerate with
``CER_UPDATE_GOLDEN=1 pytest tests/test_cli_match.py`` and review the diff).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import polars as pl
import pytest

from cer_cli.events import Match
from cer_cli.io.read import read_events
from cer_cli.query.parser import parse
from tests.builders import run as run_cli
from tests.reference import reference_matches

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("CER_UPDATE_GOLDEN") == "1"
QUERIES = sorted((ROOT / "queries").glob("*.cel"))


def run(*args: str):
    """``cer ARGS``, 120 columns wide: the width the golden outputs were written at."""
    return run_cli(*args, columns=120)


def sample_of(query: Path) -> Path:
    for line in query.read_text().splitlines():
        if line.startswith("-- sample:"):
            return ROOT / line.split(":", 1)[1].strip()
    raise AssertionError(f"{query} names no sample")


def as_matches(jsonl: str) -> list[Match]:
    out = []
    for line in jsonl.splitlines():
        rec = json.loads(line)
        events = tuple((e["position"], tuple(e["vars"])) for e in rec["events"])
        out.append(Match(rec["start"], rec["end"], events))
    return out


def events_of(sample: Path) -> list[dict]:
    """The sample as the reference evaluator's list of event dicts."""
    frame = read_events([str(sample)]).frame()
    events = []
    for row in frame.iter_rows(named=True):
        ev = {k: v for k, v in row.items() if not k.startswith("__cer_")}
        ev.update(type=row["__cer_type"], stream=row["__cer_stream"])
        if row["__cer_time"] is not None:
            ev["time"] = row["__cer_time"]
        events.append(ev)
    return events


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE or not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        if not UPDATE:
            pytest.fail(f"golden file {path.name} was missing and has been written; review it")
    assert text == path.read_text(), f"output differs from {path}"


# --------------------------------------------------------------------------- match


@pytest.mark.parametrize("query", [q for q in QUERIES if "fig" in sample_of(q).name], ids=lambda q: q.stem)
def test_small_samples_agree_with_the_reference(query):
    sample = sample_of(query)
    result = run("match", str(query), str(sample), "--format", "jsonl")
    assert result.exit_code == 0, result.output
    got = as_matches(result.stdout)
    expected = reference_matches(parse(query.read_text()), events_of(sample))
    assert sorted(m.key() for m in got) == sorted(m.key() for m in expected)
    assert len({m.key() for m in got}) == len(got), "a match was reported twice"
    assert [m.end for m in got] == sorted(m.end for m in got), "not in order of end position"


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.stem)
def test_every_example_query_matches_its_golden_output(query):
    result = run("match", str(query), str(sample_of(query)), "--format", "jsonl")
    assert result.exit_code == 0, result.output
    golden(f"{query.stem}.jsonl", result.stdout)


def test_jsonl_records_have_exactly_the_documented_keys():
    result = run("match", str(ROOT / "queries/phi1.cel"), str(ROOT / "samples/fig1.csv"), "--format", "jsonl")
    recs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["match"] for r in recs] == list(range(len(recs))) and recs
    for r in recs:
        assert list(r) == ["match", "start", "end", "start_time", "end_time", "partition", "events"]
        for e in r["events"]:
            assert list(e) == ["position", "stream", "row", "type", "vars", "attrs"]
            assert e["stream"] == "fig1"


def test_count_equals_the_number_of_matches_written():
    args = [str(ROOT / "queries/contiguous.cel"), str(ROOT / "samples/stocks.csv")]
    lines = run("match", *args, "--format", "jsonl").stdout.splitlines()
    count = run("match", *args, "--count")
    assert count.exit_code == 0
    assert int(count.stdout) == len(lines) > 0


def test_limit_stops_after_n_matches():
    args = [str(ROOT / "queries/contiguous.cel"), str(ROOT / "samples/stocks.csv"), "--format", "jsonl"]
    full = run("match", *args).stdout.splitlines()
    limited = run("match", *args, "--limit", "5").stdout.splitlines()
    assert limited == full[:5]


@pytest.mark.parametrize("ext", ["csv", "parquet", "jsonl"])
def test_file_outputs_pick_the_format_from_the_extension(tmp_path, ext):
    out = tmp_path / f"out.{ext}"
    query, sample = ROOT / "queries/phi2.cel", ROOT / "samples/fig1.csv"
    result = run("match", str(query), str(sample), "-o", str(out))
    assert result.exit_code == 0, result.output
    expected = as_matches(run("match", str(query), str(sample), "--format", "jsonl").stdout)
    n_rows = sum(len(m.events) for m in expected)
    if ext == "jsonl":
        assert as_matches(out.read_text()) == expected
        return
    frame = pl.read_csv(out) if ext == "csv" else pl.read_parquet(out)
    assert frame.height == n_rows
    assert frame.columns[:8] == ["match", "start", "end", "position", "stream", "row", "type", "vars"]
    assert sorted(set(frame["match"].to_list())) == list(range(len(expected)))


def test_table_output_has_a_summary_line():
    result = run("match", str(ROOT / "queries/phi1.cel"), str(ROOT / "samples/fig1.csv"), "--format", "table")
    assert result.exit_code == 0
    assert "3 matches · 9 events read" in result.stdout
    assert "match 0" in result.stdout


def test_several_logs_merge_by_time_and_name_streams(tmp_path):
    a = tmp_path / "a.csv"
    b = tmp_path / "b.csv"
    a.write_text("kind,t\nX,1\nX,5\n")
    b.write_text("kind,t\nY,3\n")
    result = run(
        "match", "-e", "SELECT * FROM left, right WHERE left>X ; right>Y ; X",
        f"left={a}", f"right={b}", "--type-column", "kind", "--time-column", "t", "--format", "jsonl",
    )
    assert result.exit_code == 0, result.output
    (rec,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(e["position"], e["stream"], e["row"]) for e in rec["events"]] == [
        (0, "left", 0), (1, "right", 0), (2, "left", 1)
    ]


#: Issue #24's log: SELL, SELL, SELL, BUY (three SELL ; BUY matches).
SELLS = "type,name,price,time\nSELL,MSFT,101,0\nSELL,MSFT,102,1\nSELL,INTL,80,2\nBUY,INTL,80,3\n"


@pytest.mark.parametrize("query", ["SELECT NONE WHERE SELL ; BUY", "NOT(BUY)",
                                   "SELECT s WHERE (SELL AS s OR SELL) ; BUY"])
def test_matches_without_reported_events_reach_every_output(tmp_path, query):
    """A match whose μ is empty after projection is a match: it reaches every format and
    shape (JSONL with ``events: []``, a long row with null event columns, a wide row)."""
    import cer_cli

    log = tmp_path / "s.csv"
    log.write_text(SELLS)
    args = ["match", "-e", query, str(log), "--time-column", "time"]
    count = run(*args, "--count")
    assert count.exit_code == 0, count.output
    n = int(count.stdout)
    assert n >= 3
    records = [json.loads(x) for x in run(*args, "--format", "jsonl").stdout.splitlines()]
    assert len(records) == n and any(r["events"] == [] for r in records)
    assert [r["match"] for r in records] == list(range(n))
    empty = [r["match"] for r in records if not r["events"]]
    for shape in ("long", "wide"):
        for ext in ("csv", "parquet", "jsonl"):
            out = tmp_path / f"out-{shape}.{ext}"
            result = run(*args, "--shape", shape, "-o", str(out))
            assert result.exit_code == 0, result.output
            if ext == "jsonl":
                got = [json.loads(x) for x in out.read_text().splitlines()]
                assert [r["match"] for r in got] == list(range(n))
                continue
            frame = pl.read_csv(out) if ext == "csv" else pl.read_parquet(out)
            assert frame["match"].n_unique() == n, (shape, ext)
            if shape == "long":  # one row with null event columns per empty match
                nulls = frame.filter(pl.col("position").is_null())
                assert nulls["match"].to_list() == empty
                assert nulls.select("stream", "row", "type", "vars", "name", "price")\
                    .null_count().row(0) == (len(empty),) * 6
                assert nulls["start"].to_list() == [records[m]["start"] for m in empty]
        table = run(*args, "--shape", shape, "--format", "table")
        assert f"{n} matches" in table.stdout
        assert table.stdout.count("no reported events") == len(empty)
    frame = pl.read_csv(log)
    long = cer_cli.match(frame, query, time_column="time")
    wide = cer_cli.match(frame, query, time_column="time", shape="wide")
    assert long["match"].n_unique() == wide.height == n
    assert long.filter(pl.col("position").is_null())["match"].to_list() == empty


def test_limit_reaches_every_format_while_a_window_drops_old_events(tmp_path):
    """With --limit (here 3: all of them), matches reach the writers as soon as they are
    found: CSV, Parquet and the wide shape buffered them while the lookup dropped the frames
    a window (here ``WITHIN 1 [ts]``) no longer needs, then could not write them (exit 2)."""
    schema = {"type": pl.String, "time": pl.Int64, "ts": pl.Int64}
    logs = []
    for name, rows in [("S1", [(0, 0), (1, 0), (7, 2)]), ("S2", [(2, 0), (3, 0), (4, 0), (5, 0),
                                                                  (6, 1)])]:
        path = tmp_path / f"{name}.parquet"
        pl.DataFrame([{"type": "A", "time": t, "ts": ts} for t, ts in rows],
                     schema=schema).write_parquet(path)
        logs.append(str(path))
    args = ["match", "-e", "S1>A WITHIN 1 [ts]", *logs, "--time-column", "time"]
    every = [json.loads(x) for x in run(*args, "--format", "jsonl").stdout.splitlines()]
    assert len(every) == 3
    for shape in ("long", "wide"):
        for ext in ("csv", "parquet", "jsonl"):
            out = tmp_path / f"out-{shape}.{ext}"
            result = run(*args, "--limit", "3", "--shape", shape, "-o", str(out))
            assert result.exit_code == 0, (shape, ext, result.output)
            if ext == "jsonl":
                got = [json.loads(x)["start"] for x in out.read_text().splitlines()]
            else:
                frame = pl.read_csv(out) if ext == "csv" else pl.read_parquet(out)
                got = frame["start"].to_list()
            assert got == [r["start"] for r in every], (shape, ext)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-e", "T", "missing.csv"], "missing.csv"),
        (["-e", "T", "samples/README.md"], "format"),
        (["-e", "T", "samples/fig1.csv", "--type-column", "kind"], "type"),
        (["-e", "T", "samples/fig1.csv", "--time-column", "when"], "when"),
        (["-e", "T AS x FILTER x.pressure > 1", "samples/fig1.csv"], "pressure"),
        (["-e", "T ; H WITHIN 5 minutes", "samples/fig1.csv"], "time column"),
        (["-e", "T ;", "samples/fig1.csv"], "<expr>:1:"),
        (["-e", "T", "samples/fig1.csv", "--limit", "99999999999999999999999"], "--limit"),
        (["-e", "T", "samples/fig1.csv", "-o", "out.unknown"], "output format"),
        (["-e", "T", "samples/fig1.csv", "--format", "parquet"], "parquet output needs a file"),
        (["-e", "T"], "LOG"),
    ],
)
def test_input_mistakes_exit_2_with_a_clear_message(args, message, monkeypatch):
    monkeypatch.chdir(ROOT)
    result = run("match", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_an_output_that_cannot_be_written_exits_1_like_a_full_disk(monkeypatch):
    """One rule for "cannot write the output" (README's exit codes): the system's refusal
    is a runtime failure, exit 1, whichever the reason."""
    monkeypatch.chdir(ROOT)
    result = run("match", "-e", "T", "samples/fig1.csv", "-o", "no/such/dir/out.csv")
    assert result.exit_code == 1, result.output
    assert result.output.startswith("error: cannot write no/such/dir/out.csv: directory ")
    assert "does not exist" in result.output and "Traceback" not in result.output


def test_an_event_type_the_log_lacks_is_a_warning_not_an_error(monkeypatch):
    """A daily log without one of the query's event types is not a mistake (issue #13.9)."""
    monkeypatch.chdir(ROOT)
    result = run("match", "-e", "Q AS x", "samples/fig1.csv", "--count")
    assert result.exit_code == 0, result.output
    assert "'Q'" in result.output and result.output.strip().endswith("0")


def test_unparsable_time_names_the_file_and_row(tmp_path):
    log = tmp_path / "bad.csv"
    log.write_text("type,ts\nA,2024-01-01T00:00:00\nA,not a time\n")
    result = run("match", "-e", "A", str(log), "--time-column", "ts")
    assert result.exit_code == 2
    assert "bad.csv" in result.output and "line 3" in result.output


def test_interrupt_leaves_no_partial_output(tmp_path, monkeypatch):
    from cer_cli import cli as cli_module
    from cer_cli.engine import run as engine_run

    real = engine_run.Engine.run_batches

    def interrupted(self, frame):
        yield from real(self, frame)
        raise KeyboardInterrupt

    monkeypatch.setattr(engine_run.Engine, "run_batches", interrupted)
    out = tmp_path / "out.jsonl"
    argv = ["cer", "match", str(ROOT / "queries/phi1.cel"), str(ROOT / "samples/fig1.csv"), "-o", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_info:
        cli_module.main()
    assert exit_info.value.code == 130
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- explain

EXPLAINED = ["phi1", "core_q1", "flights_delayed_thrice"]


@pytest.mark.parametrize("name", EXPLAINED)
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_explain_matches_its_golden_output(name, fmt):
    result = run("explain", str(ROOT / f"queries/{name}.cel"), "--format", fmt,
                 "--jobs", "2")  # the runner's line, whatever the machine's cores
    assert result.exit_code == 0, result.output
    golden(f"explain_{name}.{'txt' if fmt == 'text' else 'json'}", result.stdout)


def test_explain_json_describes_every_stage():
    result = run("explain", str(ROOT / "queries/phi1.cel"), str(ROOT / "samples/fig1.csv"), "--format", "json")
    data = json.loads(result.stdout)
    assert set(data) == {"query", "rewrites", "warnings", "atoms", "cea", "plan", "run"}
    assert [r["pass"] for r in data["rewrites"]] == ["split_filters", "lp_normal_form", "simplify"]
    assert data["run"]["events"] == 9 and data["run"]["matches"] == 3
    assert data["run"]["det_states"] >= 2
    finals = set(data["cea"]["finals"])
    assert any(t["to"] in finals and t["marks"] for t in data["cea"]["transitions"])


def test_explain_dot_and_mermaid_draw_the_automaton():
    dot = run("explain", str(ROOT / "queries/phi1.cel"), "--format", "dot").stdout
    assert dot.startswith("digraph CEA {") and "doublecircle" in dot and "•{T, x}" in dot
    mermaid = run("explain", str(ROOT / "queries/phi1.cel"), "--format", "mermaid").stdout
    assert mermaid.startswith("stateDiagram-v2") and "[*] --> q0" in mermaid


def test_explain_shows_the_unsafe_rewrite():
    result = run("explain", "-e", "(T AS x OR H AS y) ; T AS x", "--format", "json")
    data = json.loads(result.stdout)
    assert any(r["pass"] == "make_safe" for r in data["rewrites"])
    assert data["warnings"], "the unsafe sequence is reported"


def test_progress_bar_reports_events_and_matches_on_stderr():
    result = run("match", str(ROOT / "queries/phi1.cel"), str(ROOT / "samples/fig1.csv"),
                 "--count", "--progress")
    assert result.exit_code == 0
    assert result.stdout.strip() == "3"
    assert "matching" in result.stderr and "9/9 events" in result.stderr
    quiet = run("match", str(ROOT / "queries/phi1.cel"), str(ROOT / "samples/fig1.csv"), "--count")
    assert quiet.stderr == "", "no bar when stderr is not a terminal"


@pytest.fixture
def five_events(tmp_path) -> str:
    path = tmp_path / "five.csv"
    path.write_text("type,v\nA,1\nA,2\nA,3\nA,4\nB,5\n")
    return str(path)


@pytest.mark.parametrize(("query", "extra", "warns"), [
    ("A+ ; B", (), True),  # 2^4 - 1 matches here, 2.4x10^9 on 100 events
    ("(A ; A):+ ; B", (), True),  # a contiguous iteration that chooses inside
    ("A ; B", (), False),
    ("A:+ ; B", (), False),  # contiguous: one valuation per interval
    ("A+ ; B", ("--count",), False),  # counted, not enumerated
    ("A+ ; B", ("--limit", "3"), False),
    ("SELECT * WHERE (A)+ ; B LIMIT 1", (), False),
    ("SELECT B WHERE A+ ; B", (), False),  # the iterations are not reported
    ("SELECT NEXT * WHERE A+ ; B", (), False),
    ("A+ ; B WITHIN 5 EVENTS", (), False),
])
def test_exponential_output_is_warned_before_the_run_at_any_log_size(five_events, query, extra,
                                                                      warns):
    result = run("match", "-e", query, five_events, "--format", "jsonl", *extra)
    assert result.exit_code == 0, result.output
    assert ("exponentially many matches" in result.stderr) is warns, result.stderr
    if warns:
        assert "hint: add WITHIN" in result.stderr and "LIMIT" in result.stderr


@pytest.mark.parametrize(("query", "warns"), [
    ("SELECT STRICT * WHERE A ; B ; C", True),
    ("SELECT NEXT * WHERE A+ ; B", True),
    ("SELECT MAX * WHERE A ; B", True),
    ("SELECT LAST * WHERE A ; B WITHIN 5 EVENTS", False),  # chooses inside the window
    ("SELECT NEXT * WHERE A : B", False),  # contiguous: one match per event at most
    ("A ; B ; C", False),  # ALL: the cost is the output's
])
def test_a_strategy_without_a_window_is_warned_its_time_grows(five_events, query, warns):
    """SELECT NEXT / LAST / MAX / STRICT enumerate the matches ending at each event to choose
    among them: with no window and a skipping ';' or '+', the time per event grows with the
    log while the output stays small (STRICT A ; B ; C on 60,000 events ran for minutes,
    silently). Warned before the run, counted or not, and shown by cer explain."""
    for extra in ((), ("--count",)):
        result = run("match", "-e", query, five_events, "--format", "jsonl", *extra)
        assert result.exit_code == 0, result.output
        assert ("the time per event grows with the log" in result.stderr) is warns, result.stderr
        assert ("hint: add a window" in result.stderr) is warns
    plan = json.loads(run("explain", "-e", query, "--format", "json").stdout)["plan"]
    assert ("choice_cost" in plan) is warns
    assert ("cost: grows with the log" in run("explain", "-e", query).stdout) is warns


def test_explain_shows_exponential_output():
    data = json.loads(run("explain", "-e", "A+ ; B", "--format", "json").stdout)
    assert "'A+'" in data["plan"]["output_growth"]
    assert "output: exponential" in run("explain", "-e", "A+ ; B").stdout
    assert "output_growth" not in json.loads(run("explain", "-e", "A ; B", "--format", "json").stdout)["plan"]


# --------------------------------------------------------------------------- trailing absence


def test_trailing_absence_on_flights_equals_a_direct_computation():
    """queries/flights_no_recovery.cel against a plain loop over the log: a DEP with delay > 60,
    no DEP with delay <= 0 of its tail number after it up to a day later, reported at the
    tail number's first event past that day."""
    result = run("match", str(ROOT / "queries/flights_no_recovery.cel"),
                 str(ROOT / "samples/flights.parquet"), "--format", "jsonl")
    assert result.exit_code == 0, result.output
    got = sorted((m.start, m.end) for m in as_matches(result.stdout))
    frame = read_events([str(ROOT / "samples/flights.parquet")]).frame()
    by_tail: dict[str, list[tuple[int, int, str, int]]] = {}
    for r in frame.iter_rows(named=True):
        if r["tailnum"] is not None:
            by_tail.setdefault(r["tailnum"], []).append(
                (r["__cer_pos"], r["__cer_time"], r["__cer_type"], r["delay"]))
    day = 86_400 * 10**9
    want = []
    for events in by_tail.values():
        for n, (pos, t, typ, delay) in enumerate(events):
            if typ != "DEP" or delay is None or delay <= 60:
                continue
            later = events[n + 1:]
            if any(ty == "DEP" and d is not None and d <= 0 and tt <= t + day for _, tt, ty, d in later):
                continue
            past = [p for p, tt, _, _ in later if tt > t + day]
            if past:
                want.append((pos, past[0]))
    assert got == sorted(want) and got


def test_open_absence_report_ends_open_matches_at_the_end_of_the_log(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("type,ts\nA,2024-01-01T00:00:00Z\nC,2024-01-01T00:00:02Z\n"
                   "A,2024-01-01T00:00:09Z\nC,2024-01-01T00:00:10Z\n")
    args = ["match", "-e", "A ; !B WITHIN 5 seconds", str(log), "--time-column", "ts", "--format", "jsonl"]
    closed = [json.loads(line) for line in run(*args).stdout.splitlines()]
    # times written with Z are UTC instants, and printed as such
    assert [(r["start"], r["end"], r["end_time"]) for r in closed] == [
        (0, 2, "2024-01-01T00:00:09+00:00")]
    both = run(*args, "--open-absence", "report")
    assert both.exit_code == 0, both.output
    recs = [json.loads(line) for line in both.stdout.splitlines()]
    assert [(r["start"], r["end"], r["end_time"]) for r in recs] == [
        (0, 2, "2024-01-01T00:00:09+00:00"), (2, 4, None)]  # 4: one past the last position
    csv = run(*args[:-2], "--format", "csv", "--open-absence", "report").stdout.splitlines()
    header = csv[0].split(",")
    rows = [dict(zip(header, line.split(","), strict=True)) for line in csv[1:]]
    assert [(r["end"], r["end_time"]) for r in rows] == [("2", "2024-01-01T00:00:09+00:00"),
                                                          ("4", "")]
    assert run(*args, "--open-absence", "report", "--count").stdout.strip() == "2"


@pytest.mark.parametrize("extra, words", [
    ((), "needs a WITHIN window"),
    (("--spark", "--open-absence", "report"), "not available with --spark"),
])
def test_trailing_absence_misuse_exits_2(extra, words):
    result = run("match", "-e", "T ; !H", str(ROOT / "samples/fig1.csv"), *extra)
    assert result.exit_code == 2, result.output
    assert words in result.output
    if not extra:
        assert "<expr>:1:3:" in result.output and "Traceback" not in result.output


def test_correlated_absence_example_equals_its_partition_by_twin():
    """flights_late_again_same_tail.cel says with comparisons what flights_late_again.cel says
    with PARTITION BY: the same complex events."""
    sample = str(ROOT / "samples/flights.parquet")
    outs = [run("match", str(ROOT / "queries" / f"{q}.cel"), sample, "--format", "jsonl")
            for q in ("flights_late_again", "flights_late_again_same_tail")]
    assert all(r.exit_code == 0 for r in outs), outs[1].output
    twin, correlated = (sorted(m.key() for m in as_matches(r.stdout)) for r in outs)
    assert correlated == twin and twin


def test_correlated_absence_without_partition_equals_a_direct_computation():
    """queries/buy_then_large_sell_still_open.cel against a plain loop over the log: a BUY
    and a later SELL (both volume >= 1000) at most 20 s apart, with no SELL of the BUY's
    stock strictly between them; some candidates are lost to such a SELL."""
    result = run("match", str(ROOT / "queries/buy_then_large_sell_still_open.cel"),
                 str(ROOT / "samples/stocks.csv"), "--format", "jsonl")
    assert result.exit_code == 0, result.output
    got = sorted((m.start, m.end) for m in as_matches(result.stdout))
    rows = list(read_events([str(ROOT / "samples/stocks.csv")]).frame().iter_rows(named=True))
    want, lost = [], 0
    for i, b in enumerate(rows):
        if b["__cer_type"] != "BUY" or b["volume"] < 1000:
            continue
        for j in range(i + 1, len(rows)):
            s = rows[j]
            if s["__cer_time"] - b["__cer_time"] > 20 * 10**9:
                break
            if s["__cer_type"] != "SELL" or s["volume"] < 1000:
                continue
            if any(r["__cer_type"] == "SELL" and r["name"] == b["name"] for r in rows[i + 1:j]):
                lost += 1
            else:
                want.append((b["__cer_pos"], s["__cer_pos"]))
    assert got == sorted(want) and got and lost


def test_correlated_absence_cli_example_and_misuse(tmp_path):
    """The issue's example on a hand-checked log: A0(u1) B1(u2) C2(u1) A3(u1) B4(u1) C5(u1)
    gives only [0, 2] (B4 of user 1 blocks A3 and A0; B1 of user 2 blocks nothing)."""
    log = tmp_path / "log.csv"
    log.write_text("type,time,user\nA,1,1\nB,2,2\nC,3,1\nA,4,1\nB,5,1\nC,6,1\n")
    query = "A AS a ; !(B AS b FILTER b.user = a.user) ; C"
    ok = run("match", "-e", query + " WITHIN 10 EVENTS", str(log), "--format", "jsonl")
    assert ok.exit_code == 0, ok.output
    recs = [json.loads(line) for line in ok.stdout.splitlines()]
    assert [(r["start"], r["end"], [e["vars"] for e in r["events"]]) for r in recs] == [
        (0, 2, [["A", "a"], ["C"]])]  # the gap's hidden bounds are not reported
    for shape in ("long", "wide"):
        free = run("match", "-e", query, str(log), "--allow-unbounded", "--format", "csv",
                   "--shape", shape)
        assert free.exit_code == 0 and "gap1" not in free.stdout, free.output
        assert len(free.stdout.splitlines()) == (3 if shape == "long" else 2)
    for text, words in [(query, ["relax_absence:", "bisect on B.user", "O(log n)"]),
                        (query.replace("=", "<"), ["scan of the gap", "O(events in the gap)"])]:
        shown = run("explain", "-e", text + " WITHIN 10 EVENTS", str(log))
        assert shown.exit_code == 0, shown.output
        for w in [*words, "gap1.left", "gap1.right"]:
            assert w in shown.stdout, w
    for text, where, words in [
        (query, "<expr>:1:26:", "no WITHIN window"),
        ("A AS a ; !(B AS b FILTER b.user = d.user) ; C WITHIN 3 EVENTS", "<expr>:1:",
         "'d'"),
        ("(A AS a)+ ; !(B AS b FILTER b.user = a.user) WITHIN 3 EVENTS", "<expr>:1:", "'a'"),
    ]:
        bad = run("match", "-e", text, str(log))
        assert bad.exit_code == 2, bad.output
        assert where in bad.output and words in bad.output and "Traceback" not in bad.output
    # once refused: a trailing absence beside a comparison that cannot become PARTITION BY
    beside = run("match", "-e", "A AS a ; C AS c FILTER a.user < c.user ; !(B AS b FILTER"
                 " b.user = a.user) WITHIN 3 EVENTS", str(log), "--count")
    assert beside.exit_code == 0, beside.output


def test_correlated_trailing_absence_cli_example(tmp_path):
    """Hand-checked: A0(u1) B1(u2) C2(u1) A3(u1) B4(u1) C5(u1) C6(u2), ``A AS a ; !(B AS b
    FILTER b.user = a.user) WITHIN 2 EVENTS``: A0's window holds B1 of user 2 only, so A0 is
    reported at position 3 (the first event past its deadline); B4 of user 1 blocks A3. With
    ``!=`` B1 blocks A0 and nothing blocks A3 (reported at C6); ``--open-absence report``
    adds nothing (no window outlives the log)."""
    log = tmp_path / "log.csv"
    log.write_text("type,time,user,v\nA,1,1,0\nB,2,2,0\nC,3,1,0\nA,4,1,0\nB,5,1,0\nC,6,1,0\n"
                   "C,7,2,0\n")
    for op, want in (("=", [(0, 3)]), ("!=", [(3, 6)])):
        query = f"A AS a ; !(B AS b FILTER b.user {op} a.user) WITHIN 2 EVENTS"
        for extra in ((), ("--open-absence", "report")):
            ok = run("match", "-e", query, str(log), "--format", "jsonl", *extra)
            assert ok.exit_code == 0, ok.output
            recs = [json.loads(line) for line in ok.stdout.splitlines()]
            assert [(r["start"], r["end"]) for r in recs] == want, (op, extra)
            assert all(e["vars"] == ["A", "a"] for r in recs for e in r["events"])
    # SELECT without the variable ψ reads: the CEA marks it, the output drops it
    ok = run("match", "-e", "SELECT c WHERE A AS a ; C AS c ; !(B AS b FILTER b.user = a.user)"
             " WITHIN 3 EVENTS", str(log), "--format", "jsonl")
    assert ok.exit_code == 0, ok.output
    recs = [json.loads(line) for line in ok.stdout.splitlines()]
    # A0 C2: deadline 3, nothing after C2 up to it: reported at B4 (its B is past the
    # deadline); A3 C5: deadline 6, open at the end; A0 C5: outside the window
    assert [(r["start"], r["end"], [e["vars"] for e in r["events"]]) for r in recs] == [
        (0, 4, [["c"]])]
    for text, words in [("A AS a ; !(B AS b FILTER b.user = a.user) WITHIN 2 EVENTS",
                         ["trailing absence compared with the match", "bisect on B.user",
                          "O(log n)"]),
                        ("A AS a ; !(B AS b FILTER b.user < a.user) WITHIN 2 EVENTS",
                         ["scan of the window", "O(ψ events in the window)"])]:
        shown = run("explain", "-e", text, str(log))
        assert shown.exit_code == 0, shown.output
        for w in words:
            assert w in shown.stdout, w


@pytest.mark.parametrize("query, words", [
    ("flights_no_recovery", ["; !(DEP FILTER DEP[(delay <= 0)])", "trailing absence: each match of φ waits"]),
    ("flights_late_again_same_tail", ["implied_absence:", "inside each PARTITION BY key (tailnum)",
                                      "NOT (type = DEP AND delay <= 0)"]),
])
def test_explain_shows_the_absence(query, words):
    result = run("explain", str(ROOT / "queries" / f"{query}.cel"), str(ROOT / "samples/flights.parquet"))
    assert result.exit_code == 0, result.output
    for w in words:
        assert w in result.stdout, w
