"""Every match reaches every output (issue #24 §1): random queries over random logs go
through ``cer match`` in every format and shape (JSONL, CSV, Parquet, the table; long and
wide) and through ``cer_cli.match``; each output is read back and its matches (interval and
``μ``) compared with the engine's own, and their number with ``--count``.

Half the logs hold edge values (``gen_formulas.edge_values``: nulls, NaN, -0.0, integers
around 2^53 and 2^62): every output's values (``v``, ``id``, ``ts`` of each reported event,
and the partition key) are read back too and compared with the log's own, each by the text
rule the README documents for its format (``RULES``), and ``--count --by id`` with the
engine's partitions.

The generator must produce matches that report no event — ``SELECT NONE``, a ``SELECT``
that misses the branch of an OR a match took, a formula of ``NOT(E)`` only — since those
were the matches the writers lost: ``test_the_cases_include_matches_without_reported_events``
proves it does. The Spark side of the same comparison is in ``tests/test_spark.py``.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, Phase, event, example, find, given, settings
from hypothesis import strategies as st

import cer_cli
from cer_cli.api import compile_query, read_events
from cer_cli.events import Match
from cer_cli.io.contract import TimeOptions
from cer_cli.io.read import read_frame
from cer_cli.plan import Plan
from cer_cli.query import ast
from cer_cli.query.errors import QueryError
from cer_cli.query.parser import parse
from cer_cli.query.printer import to_text
from cer_cli.query.scope import wide_variables
from tests.builders import run
from tests.gen_formulas import STREAMS, edge_values, formulas, queries, streams

#: The log files' columns: Parquet keeps the types even in a log without events.
LOG_SCHEMA = {"type": pl.String, "time": pl.Int64, "ts": pl.Int64, "v": pl.Int64, "id": pl.Int64}
TIME = ("--time-column", "time", "--time-unit", "ns")
TIME_OPTIONS = TimeOptions(column=("time",), unit=("ns",))
#: 2024-01-01 in ns since the epoch: the generated times (a few seconds from 0) are shifted
#: there, since epoch ns in January 1970 are refused as a wrong unit (``contract.check_times``).
EPOCH_2024 = 1_704_067_200 * 10**9

_QUERIES = queries(formulas(max_depth=3)) | queries(formulas(max_depth=3, with_absent=True))
#: (query, events, --limit): the suite's random queries (sometimes with ``φ1 ; !ψ ; φ2``)
#: and streams.
CASES = st.tuples(_QUERIES, streams(max_size=8), st.none() | st.integers(0, 3))
#: The same with edge values in ``v`` and ``id`` (``gen_formulas.edge_values``).
EDGE_CASES = st.tuples(_QUERIES, streams(max_size=8).flatmap(edge_values),
                       st.none() | st.integers(0, 3))
#: What the local properties draw: either (Spark's sample draws ``CASES``).
OUTPUT_CASES = CASES | EDGE_CASES
PROPS = settings(max_examples=25, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def log_rows(events: list[dict]) -> list[dict]:
    """The events as log rows, in their order, with times made strictly increasing (one ns
    apart on ties) so that merging the per-stream logs by time keeps that order."""
    return [{"type": e["type"], "time": EPOCH_2024 + e["time"] + i, "ts": e["ts"], "v": e["v"], "id": e["id"],
             "stream": e["stream"]} for i, e in enumerate(events)]


def log_schema(events: list[dict]) -> dict[str, pl.DataType]:
    """The logs' column types, the same in every log: ``LOG_SCHEMA``, with Float64 for an
    attribute that holds a float (``edge_values`` draws floats, NaN and -0.0 among them,
    or integers, per attribute). Explicit: polars cannot infer a column of None, NaN and
    integers from rows (``pl.DataFrame(dicts)`` fails on a NaN after integers)."""
    schema = dict(LOG_SCHEMA)
    for attr in ("v", "id"):
        if any(isinstance(e[attr], float) for e in events):
            schema[attr] = pl.Float64
    return schema


def _frame(rows: list[dict], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """``rows`` as a frame of ``schema``, built column by column with each column's type."""
    return pl.DataFrame([pl.Series(k, [r[k] for r in rows], dtype=d) for k, d in schema.items()])


def write_logs(events: list[dict], directory: Path) -> list[str]:
    """``S1.parquet`` and ``S2.parquet`` (both, even without events: FROM and ``S>E`` name
    them)."""
    rows = log_rows(events)
    schema = log_schema(events)
    logs = []
    for name in STREAMS:
        path = directory / f"{name}.parquet"
        _frame([r for r in rows if r["stream"] == name], schema).write_parquet(path)
        logs.append(str(path))
    return logs


def one_frame(events: list[dict]) -> pl.DataFrame:
    """All the events as one user frame (``cer_cli.match`` reads one stream)."""
    return _frame(log_rows(events), log_schema(events))


def compiled_case(query: ast.Query, logs: list[str]) -> tuple[str, Plan, list[Match]] | None:
    """The query's text, its plan against the logs and the engine's own matches; None when
    the query is refused (then the CLI must refuse it too)."""
    text = to_text(query)
    log = read_events(logs, times=TIME_OPTIONS)
    try:
        compiled = compile_query(text, schema=log.schema)
        return text, compiled, list(compiled.run(log.batches()))
    except QueryError:
        return None


# --------------------------------------------------------------------------- read back

Key = tuple[int, int, tuple[tuple[int, tuple[str, ...]], ...]]


def keys(matches: list[Match]) -> list[Key]:
    return [m.key() for m in matches]


def projected(matches: list[Match], names: list[str]) -> list[Key]:
    """``μ`` restricted to the wide shape's variables: what its columns can carry."""
    out = []
    for m in matches:
        events = tuple((p, kept) for p, vs in m.events
                       if (kept := tuple(v for v in vs if v in names)))
        out.append((m.start, m.end, events))
    return out


def numbered(numbers: list[int]) -> None:
    """Matches are numbered 0, 1, 2, ... in output order, each number once."""
    assert numbers == list(range(len(numbers))), numbers


def from_jsonl(text: str) -> list[Key]:
    records = [json.loads(line) for line in text.split("\n") if line]
    numbered([r["match"] for r in records])
    return [(r["start"], r["end"], tuple((e["position"], tuple(e["vars"])) for e in r["events"]))
            for r in records]


def from_long(frame: pl.DataFrame) -> list[Key]:
    """One row per (match, event), and one row with null event columns per match without
    reported events; ``vars`` a list (Parquet, frames) or ``|``-joined text (CSV)."""
    groups: dict[int, list[dict]] = {}
    for row in frame.iter_rows(named=True):
        groups.setdefault(row["match"], []).append(row)
    numbered(list(groups))
    out = []
    for rows in groups.values():
        first = rows[0]
        if any(r["position"] is None for r in rows):  # the row of a match without events
            assert len(rows) == 1 and first["vars"] is None and first["type"] is None, rows
            rows = []
        events = tuple((r["position"], tuple(r["vars"].split("|") if isinstance(r["vars"], str)
                                             else r["vars"])) for r in rows)
        out.append((first["start"], first["end"], events))
    return out


def _cell(value):
    """A wide CSV cell read as text: null, an int, or a JSON list."""
    if value is None or value == "":
        return None
    return json.loads(value)


def from_wide(rows: list[dict], names: list[str], text: bool = False) -> list[Key]:
    """One row per match; ``x.position`` is an int, a list (x under ``+``) or null."""
    numbered([int(r["match"]) for r in rows])
    out = []
    for r in rows:
        by_position: dict[int, set[str]] = {}
        for var in names:
            value = r[f"{var}.position"]
            value = _cell(value) if text else value
            for p in (value if isinstance(value, list) else [] if value is None else [value]):
                by_position.setdefault(p, set()).add(var)
        events = tuple((p, tuple(sorted(vs))) for p, vs in sorted(by_position.items()))
        out.append((int(r["start"]), int(r["end"]), events))
    return out


TITLE = re.compile(r"match (\d+)  positions (\d+)\.\.(\d+)")


def from_table(text: str, wide: bool) -> list[Key]:
    """The table: a title per match, then its events (long: ``pos │ stream │ type │ vars``;
    wide: ``var │ pos │ type``), or the line saying it reports none."""
    out: list[tuple[int, int, dict]] = []
    numbers = []
    for line in text.splitlines():
        title = TITLE.match(line)
        if title:
            numbers.append(int(title[1]))
            out.append((int(title[2]), int(title[3]), {}))
            continue
        if "│" not in line:
            continue
        cells = [c.strip() for c in line.split("│")]
        found = out[-1][2]
        if wide:
            positions = json.loads(cells[1]) if cells[1].startswith("[") else [int(cells[1])]
            for p in positions:
                found.setdefault(p, set()).add(cells[0])
        else:
            found.setdefault(int(cells[0]), set()).update(cells[3].split(","))
    numbered(numbers)
    summary = re.search(r"^(\d+) match", text, re.M)
    assert summary and int(summary[1]) == len(out)
    return [(s, e, tuple((p, tuple(sorted(vs))) for p, vs in sorted(found.items())))
            for s, e, found in out]


# --------------------------------------------------------------------------- values read back

#: The attributes whose values are compared (``time`` is printed as a datetime).
VALUE_ATTRS = ("ts", "v", "id")
#: What one match of an output holds: its partition key, and its cells ``{(position,
#: attribute): value}`` (long shapes) or ``{(variable, attribute): value}`` (wide shapes).
Cells = tuple[object, dict[tuple, object]]


def _nan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)


def _json(x):
    """The JSON text rule: NaN is null, other values are themselves."""
    if isinstance(x, list):
        return [_json(y) for y in x]
    return None if _nan(x) else x


def _csv(x):
    """A CSV cell as text (None: the empty cell): a null empty, NaN ``NaN`` (read back as
    NaN), an integer its exact digits, a float its shortest text (``-0.0`` keeps its sign);
    a list (the wide shape under ``+``) is its JSON array."""
    if isinstance(x, list):
        return _json(x)
    return None if x is None else "NaN" if _nan(x) else repr(x)


def _table(x):
    """The table's text (None: left out, as a null is): NaN is shown as a null is; a list
    ``[a, ∅]``, left out when no item has a value."""
    if isinstance(x, list):
        texts = [_table(y) for y in x]
        return None if all(t is None for t in texts) else \
            "[" + ", ".join("∅" if t is None else t for t in texts) + "]"
    return None if x is None or _nan(x) else repr(x)


#: Each format's text rule for a log value: Parquet and the frames keep it as it is.
RULES = {"typed": lambda x: x, "json": _json, "csv": _csv, "table": _table}


def expected_cells(matches: list[Match], rows: list[dict], rule: str, names: list[str],
                   shape: str, wide: list[tuple[str, bool]]) -> list[Cells]:
    """What each match of an output must hold, from the log's own rows (``rows[p]`` is the
    event at position ``p``) and the engine's partition keys (``names``: their names; the
    ``partition`` column is JSON text in every format, the table prints its own text)."""
    to = RULES[rule]
    key = _table if rule == "table" else _json
    out = []
    for m in matches:
        part = None if m.partition is None else dict(zip(names, map(key, m.partition),
                                                         strict=True))
        cells: dict[tuple, object] = {}
        if shape == "long":
            for p, _ in m.events:
                for a in VALUE_ATTRS:
                    cells[(p, a)] = to(rows[p][a])
        else:
            for var, many in wide:
                where = [p for p, vs in m.events if var in vs]
                if not where:
                    continue  # a variable the match does not bind: its columns are null
                for a in VALUE_ATTRS:
                    cells[(var, a)] = to([rows[p][a] for p in where] if many else rows[where[0]][a])
        if rule == "table":
            cells = {k: v for k, v in cells.items() if v is not None}
        out.append((part, cells))
    return out


def _partition(value):
    """A ``partition`` column's JSON text (null or empty without PARTITION BY), or JSONL's
    object."""
    return json.loads(value) if isinstance(value, str) and value else value or None


def cells_of_jsonl(text: str) -> list[Cells]:
    out = []
    for r in (json.loads(line) for line in text.split("\n") if line):
        out.append((r["partition"], {(e["position"], a): e["attrs"][a]
                                     for e in r["events"] for a in VALUE_ATTRS}))
    return out


def cells_of_long(frame: pl.DataFrame) -> list[Cells]:
    """The long shape's rows (CSV read as text: positions are texts there)."""
    groups: dict[object, list[dict]] = {}
    for row in frame.iter_rows(named=True):
        groups.setdefault(row["match"], []).append(row)
    return [(_partition(rows[0]["partition"]),
             {(int(r["position"]), a): r[a] for r in rows if r["position"] is not None
              for a in VALUE_ATTRS}) for rows in groups.values()]


def cells_of_wide(rows: list[dict], wide: list[tuple[str, bool]], text: bool = False
                  ) -> list[Cells]:
    """The wide shape's rows (``text``: a CSV's cells, lists as JSON arrays)."""
    out = []
    for r in rows:
        cells = {}
        for var, many in wide:
            if r[f"{var}.position"] in (None, ""):
                continue
            for a in VALUE_ATTRS:
                value = r[f"{var}.{a}"]
                cells[(var, a)] = _cell(value) if text and many else value
        out.append((_partition(r["partition"]), cells))
    return out


def cells_of_table(text: str, wide: bool) -> list[Cells]:
    """The table: each title's partition (``id=1``), each row's ``attributes`` cell
    (``ts=0  v=1``), by position (long) or by variable (wide)."""
    out: list[Cells] = []
    for line in text.splitlines():
        if TITLE.match(line):
            parts = line.split("  ")[2:]
            keys = [p for p in parts if not p.startswith("time ")]
            part = dict(kv.split("=", 1) for kv in keys[0].split(" ")) if keys else None
            out.append((part, {}))
            continue
        if "│" not in line:
            continue
        cells = [c.strip() for c in line.split("│")]
        attrs = dict(kv.split("=", 1) for kv in cells[-1].split("  ") if kv)
        who = cells[0] if wide else int(cells[0])
        out[-1][1].update({(who, a): v for a, v in attrs.items() if a in VALUE_ATTRS})
    return out


def same_values(got: list[Cells], want: list[Cells], where: tuple) -> None:
    """Equal as their ``repr``: an integer is not its float (2^53 + 1 is not 2^53, nor
    ``9007199254740993.0``), -0.0 is not 0.0, NaN is NaN."""
    assert len(got) == len(want), where
    for n, (g, w) in enumerate(zip(got, want, strict=True)):
        assert repr(g) == repr(w), (where, f"match {n}", g, w)


def check_counts_by(base: list[str], query: ast.Query, matches: list[Match]) -> None:
    """``--count --by id`` of a PARTITION BY [id] query: a row per partition key, as the
    engine's matches name them, with their numbers (JSONL: the JSON rule)."""
    got = run(*base, "--count", "--by", "id", "--format", "jsonl")
    assert got.exit_code == 0, got.output
    rows = [json.loads(line) for line in got.stdout.splitlines()]
    want = Counter(repr(_json(m.partition[0])) for m in matches)
    assert Counter({repr(r["id"]): r["matches"] for r in rows}) == want, (to_text(query), rows)
    assert len(rows) == len(want)


# --------------------------------------------------------------------------- the property


def check_every_output(query: ast.Query, events: list[dict], limit: int | None,
                       directory: Path) -> None:
    logs = write_logs(events, directory)
    case = compiled_case(query, logs)
    base = ["match", "-e", to_text(query), *logs, *TIME, "--allow-unbounded"]
    if limit is not None:
        base += ["--limit", str(limit)]
    if case is None:
        refused = run(*base, "--count")
        assert refused.exit_code == 2, refused.output
        return
    text, compiled, matches = case
    want = keys(matches)[:limit]
    event("matches" if want else "no match")
    if any(not e for _, _, e in want):
        event("a match reports no event")
    count = run(*base, "--count")
    assert count.exit_code == 0, count.output
    assert int(count.stdout) == len(want), text
    rows = log_rows(events)
    wide = wide_variables(compiled.query)
    names = [v for v, _ in wide]
    parts = [g[0] for g in compiled.query.partition_by]
    if parts and limit is None:
        check_counts_by(base, query, matches)

    def values(rule: str, shape: str) -> list[Cells]:
        return expected_cells(matches[:limit], rows, rule, parts, shape, wide)

    for shape in ("long", "wide"):
        expected = want if shape == "long" else projected(matches, names)[:limit]
        for fmt in ("jsonl", "csv", "parquet"):
            out = directory / f"out-{shape}.{fmt}"
            result = run(*base, "--shape", shape, "-o", str(out))
            assert result.exit_code == 0, (fmt, shape, result.output)
            if fmt == "jsonl" and shape == "long":
                got = from_jsonl(out.read_text(encoding="utf-8"))
                cells = cells_of_jsonl(out.read_text(encoding="utf-8"))
            elif fmt == "jsonl":
                records = [json.loads(x) for x in out.read_text().splitlines()]
                got, cells = from_wide(records, names), cells_of_wide(records, wide)
            elif shape == "long":
                frame = pl.read_csv(out, schema_overrides={"vars": pl.String}) if fmt == "csv" \
                    else pl.read_parquet(out)
                got = from_long(frame)
                cells = cells_of_long(pl.read_csv(out, infer_schema=False) if fmt == "csv"
                                      else frame)
            elif fmt == "csv":
                records = pl.read_csv(out, infer_schema=False).to_dicts()
                got = from_wide(records, names, text=True)
                cells = cells_of_wide(records, wide, text=True)
            else:
                records = pl.read_parquet(out).to_dicts()
                got, cells = from_wide(records, names), cells_of_wide(records, wide)
            assert got == expected, (text, fmt, shape)
            rule = {"jsonl": "json", "csv": "csv", "parquet": "typed"}[fmt]
            same_values(cells, values(rule, shape), (text, fmt, shape))
        table = run(*base, "--shape", shape, "--format", "table")
        assert table.exit_code == 0, table.output
        assert from_table(table.stdout, wide=shape == "wide") == expected, (text, "table", shape)
        same_values(cells_of_table(table.stdout, wide=shape == "wide"), values("table", shape),
                    (text, "table", shape))
    check_frames(compiled, events)


def check_frames(compiled: Plan, events: list[dict]) -> None:
    """``cer_cli.match`` (long and wide) and ``cer_cli.count`` on one frame of the events,
    against the engine's own matches over the same frame, values included."""
    frame = one_frame(events)
    options = {"time_column": "time", "time_unit": "ns", "stream": "S1"}
    log = read_frame(frame, "S1", None, TIME_OPTIONS)
    try:
        matches = list(compiled.run(log.batches()))
    except QueryError:  # e.g. a window over a column this frame does not order
        return
    wide_vars = wide_variables(compiled.query)
    names = [v for v, _ in wide_vars]
    parts = [g[0] for g in compiled.query.partition_by]
    rows = log_rows(events)
    long = cer_cli.match(frame, compiled, **options)
    assert from_long(long) == keys(matches)
    same_values(cells_of_long(long), expected_cells(matches, rows, "typed", parts, "long",
                                                     wide_vars), "cer_cli.match")
    wide = cer_cli.match(frame, compiled, shape="wide", **options)
    assert from_wide(wide.to_dicts(), names) == projected(matches, names)
    same_values(cells_of_wide(wide.to_dicts(), wide_vars),
                expected_cells(matches, rows, "typed", parts, "wide", wide_vars),
                "cer_cli.match wide")
    assert cer_cli.count(frame, compiled, **options) == len(matches)


def _events(types: str) -> list[dict]:
    return [{"type": t, "stream": "S1", "time": i, "ts": i, "v": i % 4, "id": i % 3}
            for i, t in enumerate(types)]


def _edge_events(types: str, v: list, ids: list) -> list[dict]:
    """Events of ``types`` with the given ``v`` and ``id`` values (edge values, hand-picked)."""
    return [{"type": t, "stream": "S1", "time": i, "ts": i, "v": v[i], "id": ids[i]}
            for i, t in enumerate(types)]


#: Every edge value in one log: integers around 2^53 and 2^62 in ``v``, NaN, -0.0 and null
#: among the floats of ``id``.
EDGE = _edge_events("ABABAB", [2**53, 2**53 + 1, -(2**53 + 1), 2**62, None, -1],
                    [-0.0, float("nan"), 0.0, None, 1.5, -0.0])

#: Matches without reported events in each form, always among the property's examples.
EMPTY = [(parse(q), _events("AAB"), limit) for q, limit in [
    ("SELECT NONE WHERE A ; B", None), ("NOT(B)", None), ("SELECT x WHERE (A AS x OR A) ; B", None),
    ("SELECT x WHERE (A AS x OR A) ; B", 3)]]


@given(case=OUTPUT_CASES)
@PROPS
@example(case=EMPTY[0]).via("SELECT NONE")
@example(case=EMPTY[1]).via("NOT only")
@example(case=EMPTY[2]).via("an OR branch without the selected variable")
@example(case=EMPTY[3]).via("the same, --limit")
@example(case=(parse("S1>A WITHIN 1 [ts]"), [
    {"type": "A", "stream": s, "time": 0, "ts": ts, "v": 0, "id": 0}
    for s, ts in [("S1", 0), ("S1", 0), ("S2", 0), ("S2", 0), ("S2", 0), ("S2", 0), ("S2", 1),
                  ("S1", 2)]], 3)).via("--limit while the window's lookup drops old frames")
@example(case=(parse("SELECT A WHERE A AS x FILTER 1 = 1"), _events("A"), None)).via(
    "SELECT names the label of T AS x: the wide shape has its columns")
@example(case=(parse("A AS x ; B AS y"), EDGE, None)).via("edge values in every column")
@example(case=(parse("A+ ; B AS y PARTITION BY [id]"), EDGE, None)).via(
    "a -0.0 and 0.0 key, lists of edge values")
def test_every_match_reaches_every_output(tmp_path_factory, case):
    check_every_output(*case, tmp_path_factory.mktemp("out"))


@pytest.mark.slow
@given(case=OUTPUT_CASES)
@settings(PROPS, max_examples=400)
def test_every_match_reaches_every_output_long(tmp_path_factory, case):
    check_every_output(*case, tmp_path_factory.mktemp("out"))


def _empty_matches(case, kind: str) -> bool:
    """Whether the case's query has a match without reported events, of ``kind``."""
    import tempfile

    query, events, _ = case
    wanted = {"none": query.select == (), "some": bool(query.select),
              "all": query.select is None}[kind]
    if not wanted:
        return False
    with tempfile.TemporaryDirectory() as d:
        compiled = compiled_case(query, write_logs(events, Path(d)))
    return compiled is not None and any(not m.events for m in compiled[2])


@pytest.mark.parametrize("kind", ["none", "some", "all"])
def test_the_cases_include_matches_without_reported_events(kind):
    """The property's cases include matches that report no event: under SELECT NONE, under
    a SELECT whose variables a match does not bind (an OR branch), and under SELECT * (a
    formula of NOT(E) only)."""
    find(CASES, lambda case: _empty_matches(case, kind),
         settings=settings(max_examples=3000, database=None, deadline=None,
                           phases=[Phase.generate]))
