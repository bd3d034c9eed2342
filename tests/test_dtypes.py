"""Every column type a log can have is compared exactly or refused at ``cer check`` naming the
column and its type (README, "Attribute types"), locally, in ``cer_cli.match`` and on Spark;
and a column null for every event of a type is an attribute with a warning, not an error.

The property test writes, for each dtype polars can write to Parquet, a small log with a
column ``v`` of that dtype, runs predicates on it (``=``, ``<``, ``!=``, ``IN``, between
events) through the CLI and ``cer_cli.match``, and compares the matches with the same
predicates evaluated on the Python values (``Decimal``, ``date``, aware ``datetime``, ...).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cer_cli
from cer_cli.api import compile_query
from cer_cli.io.read import read_frame
from cer_cli.query.errors import QueryError
from tests.builders import run as _cer

# --------------------------------------------------------------------------- dtypes

_TEXT = st.text(alphabet="abcxyzé'", max_size=3)
_UTC = dt.UTC
_DATES = st.dates(dt.date(1900, 1, 1), dt.date(2200, 12, 31))


def _ms(d: dt.datetime) -> dt.datetime:
    return d.replace(microsecond=d.microsecond // 1000 * 1000)


def _decimals(places: int, whole: int) -> st.SearchStrategy:
    """Decimals with ``places`` fractional digits and at most ``whole`` integer digits."""
    return st.integers(-(10 ** (whole + places)) + 1, 10 ** (whole + places) - 1).map(
        lambda i: Decimal(i).scaleb(-places))


#: dtype -> values it holds (None: null), for every comparable dtype polars writes to Parquet
COMPARED: dict[str, tuple[pl.DataType, st.SearchStrategy]] = {
    "Boolean": (pl.Boolean, st.booleans()),
    "Int8": (pl.Int8, st.integers(-(2**7), 2**7 - 1)),
    "Int16": (pl.Int16, st.integers(-(2**15), 2**15 - 1)),
    "Int32": (pl.Int32, st.integers(-(2**31), 2**31 - 1)),
    "Int64": (pl.Int64, st.integers(-(2**63), 2**63 - 1)),
    "UInt8": (pl.UInt8, st.integers(0, 2**8 - 1)),
    "UInt16": (pl.UInt16, st.integers(0, 2**16 - 1)),
    "UInt32": (pl.UInt32, st.integers(0, 2**32 - 1)),
    "UInt64": (pl.UInt64, st.integers(0, 2**64 - 1) | st.integers(2**63 - 2, 2**63 + 2)),
    "Float16": (pl.Float16, st.sampled_from([0.0, -1.5, 2.25, 65504.0, 0.099975586])),
    "Float32": (pl.Float32, st.floats(width=32, allow_nan=True, allow_infinity=False)),
    "Float64": (pl.Float64, st.floats(allow_nan=True, allow_infinity=False)),
    "Decimal(10,2)": (pl.Decimal(10, 2), _decimals(2, 8)),
    "Decimal(38,10)": (pl.Decimal(38, 10), _decimals(10, 5)),
    "String": (pl.String, _TEXT),
    "Categorical": (pl.Categorical, _TEXT),
    "Enum": (pl.Enum(["z", "a", "é", "b"]), st.sampled_from(["z", "a", "é", "b"])),
    "Date": (pl.Date, _DATES),
    "Datetime(us)": (pl.Datetime("us"), st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1))),
    "Datetime(ms, Europe/Paris)": (
        pl.Datetime("ms", "Europe/Paris"),
        st.datetimes(dt.datetime(1950, 1, 1), dt.datetime(2100, 1, 1)).map(
            lambda d: _ms(d).replace(tzinfo=_UTC))),
}

#: dtype -> (values) for the types predicates cannot compare: refused by name at cer check
REFUSED: dict[str, tuple[pl.DataType, list]] = {
    "Binary": (pl.Binary, [b"a", b"b", None]),
    "Time": (pl.Time, [dt.time(1), dt.time(2), None]),
    "Duration": (pl.Duration("us"), [dt.timedelta(1), dt.timedelta(2), None]),
    "List": (pl.List(pl.Int64), [[1], [2, 3], None]),
    "Array": (pl.Array(pl.Int64, 2), [[1, 2], [3, 4], None]),
    "Struct": (pl.Struct({"a": pl.Int64}), [{"a": 1}, {"a": 2}, None]),
}


def _literal(value) -> str:
    """``value`` as a CEQL literal: what a user writes to compare with it."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dt.date):  # date and datetime: ISO 8601 text
        return "'" + value.isoformat() + "'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def _has(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


_OPS = {"=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b}


def _holds(op: str, a, b) -> bool:
    return _has(a) and _has(b) and _OPS[op](a, b)


def _events(draw, values: st.SearchStrategy, n: int) -> list[tuple[str, object]]:
    return draw(st.lists(st.tuples(st.sampled_from("ABC"), st.none() | values), min_size=1,
                         max_size=n))


def _frame(events, dtype: pl.DataType) -> pl.DataFrame:
    return pl.DataFrame({
        "type": [t for t, _ in events],
        "ts": list(range(len(events))),
        "v": pl.Series([v for _, v in events], dtype=dtype),
    })


def _cli_starts(query: str, log: str) -> list[tuple[int, ...]]:
    """The reported positions of each match, through the CLI (JSONL)."""
    r = _cer("match", "-e", query, log, "--time-column", "ts", "--format", "jsonl",
             "--allow-unbounded")
    assert r.exit_code == 0, r.output
    return sorted(tuple(e["position"] for e in json.loads(line)["events"])
                  for line in r.stdout.splitlines())


def _api_starts(query: str, frame: pl.DataFrame) -> list[tuple[int, ...]]:
    out = cer_cli.match(frame, query, time_column="ts", shape="long")
    if out.height == 0:
        return []
    groups = out.group_by("match", maintain_order=True).agg(pl.col("position").sort())
    return sorted(tuple(p) for p in groups["position"].to_list())


def _expected(events, query_kind: str, op: str, lits) -> list[tuple[int, ...]]:
    if query_kind == "unary":
        return sorted((i,) for i, (t, v) in enumerate(events)
                      if t == "A" and _holds(op, v, lits[0]))
    if query_kind == "in":
        return sorted((i,) for i, (t, v) in enumerate(events)
                      if t == "A" and any(_holds("=", v, x) for x in lits))
    if query_kind == "absence":  # A AS a ; !(B AS b FILTER b.v = a.v) ; C
        out = []
        for i, (t, v) in enumerate(events):
            for j in range(i + 1, len(events)):
                if t == "A" and events[j][0] == "C" and not any(
                        events[k][0] == "B" and _holds("=", events[k][1], v)
                        for k in range(i + 1, j)):
                    out.append((i, j))
        return sorted(out)
    # between: A AS x ; B AS y FILTER x.v op y.v
    return sorted((i, j) for i, (t, v) in enumerate(events) for j in range(i + 1, len(events))
                  if t == "A" and events[j][0] == "B" and _holds(op, v, events[j][1]))


QUERIES = {
    "unary": "A FILTER A[v {op} {lit}]",
    "in": "A FILTER A[v IN {{{lits}}}]",
    # the hash join's keys (=) or its ordered index (<, <=, !=)
    "between": "A AS x ; B AS y FILTER x.v {op} y.v",
    # the post-filter (OR between events)
    "post": "A AS x ; B AS y FILTER x.v {op} y.v OR FALSE AND x.v = y.v",
    # the absence bisection (equality)
    "absence": "A AS a ; !(B AS b FILTER b.v = a.v) ; C WITHIN 100 EVENTS",
}


@st.composite
def _case(draw, names: list[str], n: int = 8):
    name = draw(st.sampled_from(names))
    dtype, values = COMPARED[name]
    events = _events(draw, values, n)
    present = [v for _, v in events if _has(v)]
    pick = st.sampled_from(present) | values if present else values
    lits = [draw(pick.filter(_has)) for _ in range(2)]
    kind = draw(st.sampled_from(sorted(QUERIES)))
    op = draw(st.sampled_from(sorted(_OPS)))
    if name.startswith("Float16"):  # its literal is the float16 value itself
        lits = [float(pl.Series([x], dtype=pl.Float16).cast(pl.Float64)[0]) for x in lits]
        events = [(t, None if v is None else float(pl.Series([v], dtype=pl.Float16)
                                                   .cast(pl.Float64)[0])) for t, v in events]
    return name, dtype, events, kind, op, lits


def _check_case(tmp_path: Path, case) -> None:
    name, dtype, events, kind, op, lits = case
    frame = _frame(events, dtype)
    log = tmp_path / "log.parquet"
    frame.write_parquet(log)
    query = QUERIES[kind].format(op=op, lit=_literal(lits[0]),
                                 lits=", ".join(_literal(x) for x in lits))
    if kind == "absence":
        op = "="
    want = _expected(events, "between" if kind == "post" else kind, op, lits)
    assert _cli_starts(query, str(log)) == want, (name, query, events)
    assert _api_starts(query, pl.read_parquet(log)) == want, (name, query, events)


_SETTINGS = settings(max_examples=60, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture,
                                            HealthCheck.too_slow])


@_SETTINGS
@given(case=_case(sorted(COMPARED)))
def test_every_comparable_dtype_compares_as_its_python_values(tmp_path, case) -> None:
    _check_case(tmp_path, case)


@pytest.mark.slow
@settings(_SETTINGS, max_examples=1500)
@given(case=_case(sorted(COMPARED), n=16))
def test_every_comparable_dtype_compares_as_its_python_values_long(tmp_path, case) -> None:
    _check_case(tmp_path, case)


@pytest.mark.parametrize("name", sorted(COMPARED))
def test_each_comparable_dtype_survives_parquet_and_meets_its_literals(tmp_path, name) -> None:
    """One deterministic case per dtype (the property test samples them at random)."""
    dtype = COMPARED[name][0]
    example = {
        "Boolean": [True, False], "Int8": [-3, 5], "Int16": [-3, 5], "Int32": [-3, 5],
        "Int64": [-3, 5], "UInt8": [3, 5], "UInt16": [3, 5], "UInt32": [3, 5],
        "UInt64": [2**63, 2**64 - 1], "Float16": [-1.5, 2.25], "Float32": [-1.5, 2.25],
        "Float64": [-1.5, 2.25], "Decimal(10,2)": [Decimal("1.10"), Decimal("2.50")],
        "Decimal(38,10)": [Decimal("-0.0000000001"), Decimal("12345.6789012345")],
        "String": ["a", "b"], "Categorical": ["a", "b"], "Enum": ["z", "a"],
        "Date": [dt.date(2024, 2, 1), dt.date(2024, 2, 2)],
        "Datetime(us)": [dt.datetime(2024, 2, 1, 10), dt.datetime(2024, 2, 1, 11)],
        "Datetime(ms, Europe/Paris)": [dt.datetime(2024, 2, 1, 10, tzinfo=_UTC),
                                       dt.datetime(2024, 2, 1, 11, tzinfo=_UTC)],
    }[name]
    events = [("A", example[0]), ("B", example[1]), ("A", example[1]), ("B", example[0]),
              ("C", None)]
    for kind in QUERIES:
        for op in ("=", "<", "!="):
            _check_case(tmp_path, (name, dtype, events, kind, op, list(example)))


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_other_dtypes_are_refused_at_check_naming_column_and_type(tmp_path, name) -> None:
    dtype, values = REFUSED[name]
    frame = pl.DataFrame({"type": ["A", "B", "A"], "v": pl.Series(values, dtype=dtype),
                          "n": [1, 2, 3]})
    log = tmp_path / "log.parquet"
    frame.write_parquet(log)
    shown = str(pl.read_parquet(log).schema["v"])
    for command in ("check", "match"):
        r = _cer(command, "-e", "A AS x ; B FILTER x.v = x.v", str(log))
        assert r.exit_code == 2, r.output
        assert f"column 'v' (read for 'x') has type {shown}, which cer cannot compare" in r.output
        assert "Traceback" not in r.output
    with pytest.raises(QueryError) as info:
        cer_cli.match(frame, "A AS x ; B FILTER x.v = x.v")
    assert f"has type {str(frame.schema['v'])}" in info.value.message
    # a refused column the query does not read is no error
    r = _cer("match", "-e", "A FILTER A[n > 1]", str(log), "--count")
    assert r.exit_code == 0 and r.stdout.strip() == "1", r.output
    # nor as a PARTITION BY key or window attribute, where it is named too
    r = _cer("check", "-e", "A ; B PARTITION BY v", str(log))
    assert r.exit_code == 2 and f"column 'v' (a PARTITION BY key) has type {shown}" in r.output


# --------------------------------------------------------------------------- issue cases


def _parquet(tmp_path: Path, name: str, **columns) -> str:
    path = tmp_path / name
    pl.DataFrame(columns).write_parquet(path)
    return str(path)


def test_decimal_price_is_compared_exactly(tmp_path) -> None:
    """A ; B FILTER A[price > 1] over a Decimal(10,2) price counted 0."""
    log = _parquet(tmp_path, "d.parquet", type=["A", "B", "A", "B"],
                   price=pl.Series([Decimal("1.50"), Decimal("0.50"), Decimal("0.99"),
                                    Decimal("1.00")], dtype=pl.Decimal(10, 2)))
    r = _cer("match", "-e", "A ; B FILTER A[price > 1]", log, "--count")
    assert r.exit_code == 0 and r.stdout.strip() == "2", r.output
    # the literal is the decimal written: 1.10 is 1.1 (not the float nearest to 1.1)
    r = _cer("match", "-e", "A FILTER A[price = 1.5 OR price = 0.99]", log, "--count")
    assert r.stdout.strip() == "2", r.output
    # a decimal equals an integer exactly, also as a hash-join key against an int column
    frame = pl.DataFrame({"type": ["A", "B", "B"],
                          "p": pl.Series([Decimal("2.00"), None, None], dtype=pl.Decimal(10, 2)),
                          "i": [None, 2, 3]})
    assert cer_cli.count(frame, "A AS a ; B AS b FILTER a.p = b.i") == 1
    assert cer_cli.count(frame, "A AS a ; B AS b FILTER a.p < b.i") == 1
    # and in the absence bisection, joined on the exact text of each value (2.00 is 2)
    gap = pl.concat([frame, pl.DataFrame({"type": ["C"], "p": [None], "i": [None]})],
                    how="diagonal_relaxed")
    query = "A AS a ; !(B AS b FILTER b.i = a.p) ; C WITHIN 9 EVENTS"
    methods = compile_query(query, schema=read_frame(gap).schema).correlation.predicates
    assert [m.label for m in methods] == ["post-filter (bisect on B.i)"]
    assert cer_cli.count(gap, query) == 0
    assert cer_cli.count(gap.with_columns(pl.col("i").replace(2, 4)), query) == 1


def test_categorical_in_a_correlated_absence_blocks(tmp_path) -> None:
    """!(B AS b FILTER b.name = a.name) over a Categorical name blocked nothing."""
    frame = pl.DataFrame({"type": ["A", "B", "C", "A", "B", "C"],
                          "name": pl.Series(["x", "y", "x", "x", "x", "x"], dtype=pl.Categorical)})
    log = tmp_path / "c.parquet"
    frame.write_parquet(log)
    query = "A AS a ; !(B AS b FILTER b.name = a.name) ; C AS c WITHIN 10 EVENTS"
    # A0..C2 (B1 is y: not blocked), A0..C5 blocked by B4, A3..C5 blocked by B4
    r = _cer("match", "-e", query, str(log), "--format", "jsonl")
    assert r.exit_code == 0, r.output
    assert [json.loads(x)["start"] for x in r.stdout.splitlines()] == [0]
    assert cer_cli.count(frame, query) == 1
    enum = frame.with_columns(pl.col("name").cast(pl.Enum(["y", "x"])))
    assert cer_cli.count(enum, query) == 1
    # and in a unary filter and a hash join
    assert cer_cli.count(enum, "A AS a ; C AS c FILTER a.name = c.name AND a[name = 'x']") == 3


def test_unsigned_and_128_bit_integers_compare_exactly(tmp_path) -> None:
    """UInt64 values >= 2^63 ended in "internal error"; Int128 was "has no attribute"."""
    big = [2**63, 2**64 - 1, 2**63 + 1]
    log = _parquet(tmp_path, "u.parquet", type=["A", "B", "B"],
                   u=pl.Series(big, dtype=pl.UInt64))
    for query, want in [("B FILTER B[u > 9223372036854775808]", "2"),
                        ("A AS a ; B AS b FILTER a.u < b.u", "2"),
                        ("A AS a ; B AS b FILTER b.u = a.u + 1", "1"),
                        ("A AS a ; B AS b FILTER a.u = b.u", "0")]:
        r = _cer("match", "-e", query, log, "--count")
        assert r.exit_code == 0 and r.stdout.strip() == want, (query, r.output)
    frame = pl.DataFrame({"type": ["A", "B", "B"],
                          "q": pl.Series([2**100, 2**100, -(2**120)], dtype=pl.Int128)})
    assert cer_cli.count(frame, "A AS a ; B AS b FILTER a.q = b.q") == 1
    assert cer_cli.count(frame, "B FILTER B[q < -1329227995784915872903807060280344575]") == 1
    assert cer_cli.count(frame, "A FILTER A[q = 1267650600228229401496703205376]") == 1
    # UInt128 is refused by name: polars compares it wrongly
    u128 = frame.with_columns(pl.col("q").abs().cast(pl.UInt128))
    with pytest.raises(QueryError, match="column 'q' .*has type UInt128"):
        cer_cli.count(u128, "A FILTER A[q > 1]")


def test_dates_compare_as_dates_and_with_iso_literals(tmp_path) -> None:
    log = _parquet(tmp_path, "d.parquet", type=["A", "A", "B"], n=[0, 1, 2],
                   day=[dt.date(2024, 2, 1), dt.date(2024, 2, 2), dt.date(2024, 2, 2)])
    for query, want in [("A FILTER A[day = '2024-02-01']", "1"),
                        ("A FILTER A[day >= '2024-02-01T12:00:00Z']", "1"),
                        ("A FILTER A[day IN {'2024-02-02', '2020-01-01'}]", "1"),
                        ("A AS a ; B AS b FILTER a.day = b.day", "1")]:
        r = _cer("match", "-e", query, log, "--count", "--time-column", "n")
        assert r.exit_code == 0 and r.stdout.strip() == want, (query, r.output)
    r = _cer("check", "-e", "A FILTER A[day = 'soon']", log, "--time-column", "n")
    assert r.exit_code == 2 and "not an ISO 8601 date-time" in r.output


def test_booleans_compare_with_true_and_false(tmp_path) -> None:
    log = tmp_path / "b.csv"
    log.write_text("type,ok\nA,true\nA,false\nA,\nB,true\n")
    for query, want in [("A FILTER A[ok = TRUE]", "1"), ("A FILTER A[ok != TRUE]", "1"),
                        ("A FILTER A[ok = FALSE OR TRUE = ok]", "2"),
                        ("A FILTER A[ok IN {FALSE}]", "1"),
                        ("A AS a ; B AS b FILTER a.ok = b.ok", "1")]:
        r = _cer("match", "-e", query, str(log), "--count")
        assert r.exit_code == 0 and r.stdout.strip() == want, (query, r.output)
    r = _cer("check", "-e", "A FILTER A[ok = 1]", str(log))
    assert r.exit_code == 2 and "cannot compare A.ok (a bool) with 1 (a number)" in r.output
    assert "TRUE or FALSE" in r.output
    r = _cer("check", "-e", "A FILTER A.ok = TRUE", str(log))
    assert r.exit_code == 0 and "A[(ok = TRUE)]" in r.output, r.output


# --------------------------------------------------------------------------- all-null columns


def test_a_column_null_for_every_event_of_a_type_is_an_attribute_with_a_warning(tmp_path):
    """A calm day's wind_gust: exit 2 ("no attribute") broke a daily job."""
    log = tmp_path / "calm.csv"
    log.write_text("type,wind,wind_gust\nREADING,3,\nREADING,4,\nALERT,9,12\n")
    query = "READING AS r FILTER r.wind_gust > 20"
    for command in ("check", "match"):
        r = _cer(command, "-e", query, str(log))
        assert r.exit_code == 0, r.output
        assert ("warning: 'wind_gust' is null for every 'READING' event of the log, so a"
                " filter reading r.wind_gust is false for them") in r.output
    r = _cer("match", "-e", query, str(log), "--count")
    assert r.stdout.strip() == "0"
    # a column no event has: null-typed in Parquet (an all-null column written without a type)
    pq = _parquet(tmp_path, "calm.parquet", type=["READING", "READING"], wind=[3, 4],
                  wind_gust=pl.Series([None, None], dtype=pl.Null))
    r = _cer("match", "-e", query, pq, "--count")
    assert r.exit_code == 0 and r.stdout.strip() == "0" and "is null for every" in r.output
    # an attribute no column of the log has stays an error, naming the known ones
    r = _cer("check", "-e", "READING AS r FILTER r.gust > 20", str(log))
    assert r.exit_code == 2 and "no attribute 'gust'" in r.output and "wind_gust" in r.output
    frame = pl.read_csv(log)
    assert cer_cli.count(frame, query) == 0
    schema = read_frame(frame).schema
    assert compile_query(query, schema=schema).report.warnings


def test_other_logs_columns_are_not_a_types_attributes(tmp_path) -> None:
    """A column of one log is not an attribute of another log's types: still a mistake."""
    a = tmp_path / "clicks.csv"
    a.write_text("user,page\n1,home\n")
    b = tmp_path / "orders.csv"
    b.write_text("user,amount\n1,9.5\n")
    r = _cer("check", "-e", "Order FILTER Order[page = 'home']", str(a), f"Order={b}")
    assert r.exit_code == 2 and "has no attribute 'page'" in r.output
