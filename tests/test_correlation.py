"""Predicates between events: the PARTITION BY rewrite, the post-filtered relaxation, the
cost refusal of `cer match`, and the memory verdict of `cer explain` — all against the
brute-force reference (tests/reference.py), which evaluates predicates between events
directly from docs/language.md."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cer_cli.api import compile_query, read_events
from cer_cli.compiler.correlation import has_correlation, partition_plan
from cer_cli.plan import plan
from cer_cli.plan.memory import LOG
from cer_cli.query import ast
from cer_cli.query.errors import QueryError
from cer_cli.query.parser import parse
from tests import reference
from tests.builders import ev, events_frame
from tests.builders import run as cli
from tests.gen_formulas import formulas, queries, streams

FIG1 = "samples/fig1.csv"
PHI4 = open("queries/phi4.cel").read()


def engine_matches(query: ast.Query, events: list[dict]) -> list:
    return list(plan(query).executor().run(events_frame(events)))


def check(query: ast.Query, events: list[dict]) -> None:
    got = engine_matches(query, events)
    if query.limit is None:
        reference.assert_same_matches(got, reference.reference_matches(query, events))
    else:
        reference.check_limited(got, query, events)


def run_text(text: str, path: str = FIG1):
    log = read_events([path])
    q = compile_query(text, schema=log.schema)
    return q, [m for frame in log.batches() for m in q.run(frame)]


def position_sets(matches) -> set[frozenset[int]]:
    return {frozenset(p for p, _ in m.events) for m in matches}


# --------------------------------------------------------------------------- φ4 (Foundations)


def test_phi4_on_fig1_is_rewritten_to_partition_and_gives_the_papers_matches():
    q, got = run_text(PHI4)
    assert q.correlation.methods == ("partition",)
    assert q.rewritten.query.partition_by == (("id",),)
    assert position_sets(got) == {frozenset({3, 4, 7}), frozenset({3, 6, 7}), frozenset({3, 4, 6, 7})}
    assert all(m.partition is None for m in got)  # the added group is not reported


def test_phi4_equals_the_query_written_with_partition_by():
    explicit = (
        "SELECT * WHERE (H AS x ; (T AS y)+ ; H AS z) FILTER x.hum < 30 AND z.hum > 60"
        " PARTITION BY [id]"
    )
    _, got = run_text(PHI4)
    _, want = run_text(explicit)
    assert {m.key() for m in got} == {m.key() for m in want}
    assert len(got) == len(want)


def test_phi4_equals_the_reference():
    log = read_events([FIG1])
    events = [
        {k: v for k, v in row.items() if not k.startswith("__cer") and v is not None}
        | {"type": row["__cer_type"], "stream": "S"}
        for frame in log.batches()
        for row in frame.to_dicts()
    ]
    query = parse(PHI4)
    reference.assert_same_matches(engine_matches(query, events), reference.reference_matches(query, events))


def test_partition_rewrite_is_a_visible_pass():
    result = plan(parse(PHI4)).rewritten
    (p,) = [p for p in result.passes if p.name == "equality_to_partition"]
    assert p.changed and p.note == "PARTITION BY [id]"
    assert not result.post_filters


@pytest.mark.parametrize(
    "text, why",
    [
        ("H AS x ; T AS y ; H AS z FILTER x.id = z.id", "not tied"),  # y is free
        ("H AS x : H AS z FILTER x.id = z.id", "':'"),
        ("H AS x ; NOT(T) ; H AS z FILTER x.id = z.id", "NOT"),
        ("SELECT * WHERE H AS x ; H AS z FILTER x.id = z.id WITHIN 3 EVENTS", "EVENTS"),
        ("SELECT STRICT * WHERE H AS x ; H AS z FILTER x.id = z.id", "STRICT"),
        ("H AS x ; H AS z FILTER x.id = z.id CONSUME BY PARTITION", "CONSUME"),
        ("H AS x ; H AS z FILTER x.hum = z.id", "not an equality of one attribute"),
        ("H AS x ; H AS z FILTER x.id = z.id OR x.hum = z.hum", "not an equality"),
    ],
)
def test_partition_rewrite_is_refused_where_positions_or_ties_differ(text, why):
    attr, message = partition_plan(parse(text))
    assert attr is None and why in message


def test_explicit_partition_by_is_combined():
    q = parse("SELECT * WHERE H AS x ; H AS z FILTER x.id = z.id PARTITION BY [type]")
    result = plan(q).rewritten
    assert result.query.partition_by == (("type",), ("id",))


# --------------------------------------------------------------------------- property tests


def _partition_queries():
    return queries(formulas(max_depth=3, binary=True, filter_probability=0.35)).filter(
        lambda q: has_correlation(q.formula))


@given(_partition_queries(), streams(max_size=7))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.filter_too_much])
def test_engine_equals_reference_with_predicates_between_events(query, events):
    try:
        plan(query).executor()
    except QueryError:
        assume(False)
    check(query, events)


@st.composite
def _tied_queries(draw):
    """Queries whose formula ties its variables by ``id`` equalities, so that the partition
    rewrite often applies."""
    f = draw(formulas(max_depth=3, with_not=False, filter_probability=0.2))
    names = sorted(reference.vdef(f))
    assume(len(names) >= 2)
    if draw(st.booleans()):  # tie every variable: the partition rewrite may apply
        picks = draw(st.permutations(names))
    else:
        picks = draw(st.lists(st.sampled_from(names), min_size=2, max_size=4))
    preds = [ast.Compare("=", ast.AttrRef(a, "id"), ast.AttrRef(b, "id"))
             for a, b in zip(picks, picks[1:], strict=False) if a != b]
    assume(preds)
    pred = preds[0]
    for p in preds[1:]:
        pred = ast.And(pred, p)
    q = draw(queries(st.just(ast.Filter(f, pred))))
    return q


@given(_tied_queries(), streams(max_size=7))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.filter_too_much])
def test_partition_rewrite_equals_reference(query, events):
    try:
        plan(query).executor()
    except QueryError:
        assume(False)
    check(query, events)


# --------------------------------------------------------------------------- papers' examples


B_STREAM = ev("H:id=1 T:id=1 H:id=2 T:id=2 H:id=1")


@pytest.mark.parametrize(
    "text, events, expected, method",
    [
        # B1: chain with an equality on a prefix (y is tied, z is not): hash join
        ("H AS x ; T AS y ; H AS z FILTER x.id = y.id", B_STREAM,
         {(0, 1, 2), (0, 1, 4), (2, 3, 4)}, "hash join"),
        # B2: x.id carried through the unconstrained y: hash join
        ("H AS x ; T AS y ; H AS z FILTER x.id = z.id", B_STREAM, {(0, 1, 4), (0, 3, 4)},
         "hash join"),
        # B3: ordered chain over a non-hierarchical join graph
        ("R AS r ; S AS s ; T AS t FILTER r.x = s.x AND s.y = t.y",
         ev("R:x=1 S:x=1,y=2 T:y=2 S:x=1,y=3 T:y=3 T:y=2"),
         {(0, 1, 2), (0, 3, 4), (0, 1, 5)}, "hash join"),
        # A2: CCEA C0 of the PCEA paper
        ("T AS t ; S AS s ; R AS r FILTER t.a = s.a AND s.a = r.a AND s.b = r.b",
         ev("S:a=2,b=11 T:a=2 R:a=1,b=10 S:a=2,b=11 T:a=1 R:a=2,b=11 S:a=4,b=13 T:a=1"),
         {(1, 3, 5)}, "hash join"),
        # D1: the bounded-memory paper's worked example, positions as order
        ("U AS u ; T AS t ; S AS s FILTER t.B > 0 AND t.B < 5 AND s.A > t.B",
         ev("S:A=42 T:B=7 U:C=1 T:B=2 U:C=3 T:B=1 S:A=42 T:B=3"),
         {(2, 3, 6), (2, 5, 6), (4, 5, 6)}, "hash join"),  # s.A > t.B: an ordered index
        # every event tied by id: partition rewrite
        ("H AS x ; T AS y ; H AS z FILTER x.id = y.id AND y.id = z.id", B_STREAM,
         {(0, 1, 4)}, "partition"),
    ],
)
def test_papers_examples(text, events, expected, method):
    query = parse(text)
    got = engine_matches(query, events)
    assert {tuple(p for p, _ in m.events) for m in got} == expected
    reference.assert_same_matches(got, reference.reference_matches(query, events))
    assert compile_query(text).correlation.methods == (method,)


def test_post_filter_runs_before_projection_strategy_and_limit():
    # The relaxation has a candidate ending at 4 with an earlier start ({0,3,4} is not a
    # match since 1 != 2... ) : LIMIT and NEXT must choose among true matches only.
    for extra in ("SELECT NEXT z", "SELECT LAST x", "SELECT MAX *", "SELECT y"):
        query = parse(f"{extra} WHERE H AS x ; T AS y ; H AS z FILTER x.id = z.id LIMIT 1")
        check(query, B_STREAM)
    query = parse("SELECT z WHERE H AS x ; T AS y ; H AS z FILTER x.id = z.id CONSUME BY ANY")
    check(query, B_STREAM + ev("T:id=9 H:id=1"))


def test_across_batches_the_post_filter_remembers_earlier_events():
    query = parse("H AS x ; T AS y ; H AS z FILTER x.id = z.id")
    engine = plan(query).executor()
    frame = events_frame(B_STREAM)
    got = [m for i in range(frame.height) for m in engine.run(frame.slice(i, 1))]
    reference.assert_same_matches(got, reference.reference_matches(query, B_STREAM))


def test_window_prunes_remembered_attributes():
    # A difference keeps the post-filter (an equality here would run as a hash join, a
    # comparison x.id <= z.id through the ordered index).
    query = parse("SELECT * WHERE H AS x ; H AS z FILTER x.id - z.id <= 0 WITHIN 2 EVENTS")
    events = ev(" ".join(f"H:id={i % 3}" for i in range(60)))
    engine = plan(replace(query)).executor()
    engine._compact_min = engine._next_prune = 4
    got = list(engine.run(events_frame(events)))
    reference.assert_same_matches(got, reference.reference_matches(query, events))
    assert len(engine._rows) <= 10


@pytest.mark.parametrize(
    "text, words",
    [
        ("(H AS x ; T AS y FILTER x.id = y.id) OR (H AS x ; T AS y)", "other branch binds"),
        ("(H AS x ; H AS y FILTER x.id = y.id)+", "repetition"),
        ("H AS x ; (T AS y FILTER x.id = y.id OR y.tmp > 1)+ ; H AS z", "several tests"),
    ],
)
def test_undecidable_shapes_are_rejected_naming_the_predicate(text, words):
    with pytest.raises(QueryError) as e:
        plan(parse(text)).executor()
    assert "between events" in e.value.message and words in e.value.message
    assert "id" in e.value.message


# --------------------------------------------------------------------------- CLI and explain


def test_match_refuses_unbounded_post_filtered_queries():
    text = "H AS x ; T AS y FILTER x.id - y.id < 0"  # a difference: post-filtered
    refused = cli("match", "-e", text, FIG1, "--format", "jsonl", "--no-progress")
    assert refused.exit_code == 2
    assert "x.id - y.id < 0" in refused.output and "--allow-unbounded" in refused.output
    allowed = cli("match", "-e", text, FIG1, "--format", "jsonl", "--no-progress", "--allow-unbounded")
    assert allowed.exit_code == 0 and allowed.output.strip()
    windowed = cli("match", "-e", f"SELECT * WHERE {text} WITHIN 5 EVENTS", FIG1, "--format",
                   "jsonl", "--no-progress")
    assert windowed.exit_code == 0
    partition = cli("match", "-e", "H AS x ; H AS z FILTER x.id = z.id", FIG1, "--format",
                    "jsonl", "--no-progress")
    assert partition.exit_code == 0  # rewritten to PARTITION BY: not refused


def test_match_refuses_unbounded_carried_keys():
    """A carried key without a window keeps every value seen live (cost grows with the
    log, as the post-filter it replaces): refused unless --allow-unbounded; fine with WITHIN."""
    text = "H AS x ; T AS y ; H AS z FILTER x.id = z.id"
    assert compile_query(text).rewritten.pcea.carries
    refused = cli("match", "-e", text, FIG1, "--count")
    assert refused.exit_code == 2 and "'T AS y' carries x.id" in refused.output
    assert "--allow-unbounded" in refused.output
    allowed = cli("match", "-e", text, FIG1, "--count", "--allow-unbounded")
    windowed = cli("match", "-e", f"SELECT * WHERE {text} WITHIN 5 EVENTS", FIG1, "--count")
    assert allowed.exit_code == 0 and windowed.exit_code == 0
    adjacent = cli("match", "-e", "H AS x ; T AS y ; H AS z FILTER x.id = y.id", FIG1, "--count")
    assert adjacent.exit_code == 0  # no carried key: the hash join runs without a window


def plan_of(text: str) -> dict:
    from cer_cli.explain import explanation

    return explanation(compile_query(text))["plan"]


# The memory verdicts of `cer explain` are tested in tests/test_memory.py.


def test_explain_names_the_method_and_its_cost():
    post = plan_of("H AS x ; T AS y ; H AS z FILTER x.id = z.id OR x.k = z.k")["correlation"]
    assert post["method"] == "post-filtered relaxation" and "exponentially" in post["cost"]
    assert not post["bounded"] and "--allow-unbounded" in post["cost"]
    part = plan_of(PHI4)["correlation"]
    assert part["method"] == "partition rewrite" and "PARTITION BY [id]" in part["detail"]
    assert plan_of("H AS x ; T AS y")["correlation"] is None
    join = plan_of("H AS x ; T AS y ; H AS z FILTER x.id = y.id")["correlation"]
    assert join["method"] == "hash join (PCEA)" and "x.id = y.id" in join["detail"]
    assert "|P| = " in join["cost"] and "output-linear delay" in join["cost"]
    assert not join["bounded"] and "partial matches per join key" in join["cost"]
    text = cli("explain", "-e", "H AS x ; T AS y ; H AS z FILTER x.id = z.id OR x.k = z.k").output
    assert "post-filtered relaxation" in text and "memory: grows with the log length" in text


def test_partition_rewrite_is_refused_when_a_tied_variable_may_be_absent():
    """Found by hypothesis: in the branch without ``q`` the equality holds vacuously, so the
    event needs no ``k``; partitioning by ``k`` dropped it."""
    query = parse("SELECT * WHERE (A OR (A ; (A AS q FILTER q.id < 0))) FILTER A.k = q.k")
    attr, why = partition_plan(query)
    assert attr is None and "'q' may be absent" in why
    events = [{"type": "A", "stream": "S1", "time": 0, "ts": None, "v": 0, "id": 0}]
    reference.assert_same_matches(engine_matches(query, events),
                                  reference.reference_matches(query, events))


@pytest.mark.parametrize(
    "text, methods, words",
    [
        ("H AS x ; T AS y ; H AS z FILTER x.id = z.id",
         ["hash join"], ["y carries x.id"]),
        ("H AS x ; T AS y ; H AS z FILTER x.id = y.id AND y.id = z.id",
         ["partition", "partition"], ["PARTITION BY [id]"]),
        ("H AS x ; T AS y ; H AS z FILTER x.id < y.id AND x.id = z.id",
         ["hash join", "hash join"], ["a comparison between events", "y carries x.id",
                                      "ordered-index probe on the edge x → y"]),
        ("H AS x ; T AS y ; H AS z FILTER x.id < z.id AND x.id = y.id",
         ["post-filter", "post-filter"], ["a comparison between events",
                                          "ordered index (hash join): no", "hash join: no"]),
        ("(T AS y FILTER y.tmp > PREV(y).tmp)+ WITHIN 3 EVENTS",
         ["hash join"], ["previous iteration", "a register: (T AS y)+ keeps its runs"]),
        ("(T AS y FILTER y.tmp - PREV(y).tmp > 1)+ WITHIN 3 EVENTS",
         ["post-filter"], ["previous iteration", "consecutive events"]),
        ("H AS x ; T AS y ; H AS z FILTER x.id = z.id OR x.k = z.k",
         ["post-filter"], ["neither an equality nor a comparison"]),
    ],
)
def test_explain_gives_the_method_of_each_predicate(text, methods, words):
    compiled = compile_query(text)
    got = compiled.correlation.predicates
    assert [m.method for m in got] == methods
    assert {m.method for m in got} == set(compiled.correlation.methods)
    shown = " ".join(f"{m.reason} {m.cost}" for m in got)
    assert all(w in shown for w in words), shown
    corr = plan_of(text)["correlation"]
    assert [m["method"] for m in corr["methods"]] == methods
    out = cli("explain", "-e", text).output
    for m in got:
        assert f"{m.predicate}: {m.method} — " in out


GAP = "!(C AS c FILTER c.id = a.id AND c.v < a.v)"


@pytest.mark.parametrize(
    "text, steps, methods",
    [
        # the equality becomes PARTITION BY; the absence's other comparison is post-filtered
        (f"A AS a ; {GAP} ; B AS b FILTER a.id = b.id WITHIN 5 minutes",
         ["partition rewrite", "post-filtered relaxation"],
         ["partition", "post-filter (scan of the gap)"]),
        (f"(A AS a ; B AS b FILTER a.id = b.id) ; {GAP} WITHIN 5 minutes",
         ["partition rewrite", "trailing absence"],
         ["partition", "trailing absence (scan of the window)"]),
        (f"(A AS a ; {GAP} ; B AS b FILTER a.id = b.id) ; !(D AS d FILTER d.id = b.id AND"
         " d.v = b.v) WITHIN 5 minutes",
         ["partition rewrite", "post-filtered relaxation", "trailing absence"],
         ["partition", "post-filter (scan of the gap)", "trailing absence (bisect on D.v)"]),
        ("A AS a ; B AS b ; !(C AS c FILTER c.v < a.v) WITHIN 5 minutes",
         ["trailing absence"], ["trailing absence (scan of the window)"]),
    ],
)
def test_explain_names_every_method_a_query_mixes(text, steps, methods):
    """A query may use several methods at once: explain shows each one with its own reason
    and cost. It used to name only the post-filter, with the partition rewrite's reason as
    why the hash join did not apply ("no hash join: every event of a match shares 'id'"),
    and to show nothing for a trailing absence alone."""
    compiled = compile_query(text)
    assert [m.title for m in compiled.correlation.methods] == steps
    assert [m.label for m in compiled.correlation.predicates] == methods
    corr = plan_of(text)["correlation"]
    assert [s["method"] for s in corr["steps"]] == steps
    assert corr["method"] == " + ".join(steps)
    assert [m["method"] for m in corr["methods"]] == methods
    assert corr["predicates"] == [p for s in corr["steps"] for p in s["predicates"]]
    assert "no hash join" not in corr["detail"]
    if "partition rewrite" in steps:
        (partition,) = [s for s in corr["steps"] if s["method"] == "partition rewrite"]
        assert partition["predicates"] == ["(a.id = b.id)"]
        assert "every event of a match shares 'id'" in partition["detail"]
    out = cli("explain", "-e", text).output
    assert "no hash join" not in out
    for step in corr["steps"]:
        assert f"correlation: {step['method']} of {'; '.join(step['predicates'])}\n" in out
        assert f"  cost: {step['cost']}\n" in out
    for m in compiled.correlation.predicates:
        assert f"{m.predicate}: {m.label} — {m.reason}" in out


def test_explain_says_where_equalities_implied_by_a_written_partition_went():
    """With ``PARTITION BY [id]`` written, ``a.id = b.id`` holds in every partition and is
    dropped: explain used to say "rewrites: none needed" and show no correlation at all, as
    if the predicate had vanished; it now names the rewrite and the partition step."""
    text = "SELECT * FROM S WHERE A AS a ; B AS b FILTER a.id = b.id PARTITION BY [id] WITHIN 5 minutes"
    compiled = compile_query(text)
    assert [m.label for m in compiled.correlation.predicates] == ["partition"]
    out = cli("explain", "-e", text).output
    assert "none needed" not in out
    assert "implied by PARTITION BY [id] dropped" in out
    assert "correlation: partition rewrite of (a.id = b.id)\n" in out
    assert "the query's PARTITION BY [id] implies the equalities" in out
    assert "partition by [id]\n" in out  # the groups as written, not a Python list


def test_memory_verdict_reads_every_method_a_query_mixes():
    """The equalities of a query that also has a correlated absence run as PARTITION BY;
    its ``--count`` verdict used to be computed as for the post-filter alone and blamed
    the equality (Theorem 1 C2), which PARTITION BY removes: the absence is what grows."""
    text = (f"A AS a ; {GAP} ; B AS b ; C AS c ; D AS d"
            " FILTER a.id = c.id AND b.id = d.id AND a.id = b.id")
    compiled = compile_query(text)
    assert compiled.correlation.methods == ("partition", "post-filter")
    count = compiled.memory("count")
    assert count.verdict == LOG and "the absence '!(C FILTER c.v < a.v)'" in count.reason
    assert "a.id = c.id" not in count.reason
    assert all(c.holds for c in count.conditions)  # per key: C1–C5 hold


def test_issue_17_queries_count_as_the_brute_force():
    """The three queries of issue #17's table (the bench's, ``tests/bench/correlation.py``)
    on a small log of the same kind: counts equal a numpy brute force over position offsets;
    the equality across y runs as a hash join with a carried key."""
    from tests.bench import correlation as bench

    df = bench.log(3000, seed=3)
    expected = bench.brute_counts(df)
    frame = events_frame([dict(e, time=i) for i, e in enumerate(df.to_dicts())])
    for name, text in bench.QUERIES.items():
        compiled = compile_query(text)
        assert compiled.executor().count(frame) == expected[name], name
    assert compile_query(bench.QUERIES["x.v = z.v (y between)"]).correlation.methods == ("hash join",)


# --------------------------------------------------------------------------- datetimes between events


def _zoned_log(path, n=40, seed=4):
    """A log whose datetime attributes hold instants in different zones and units: naive
    (UTC by definition) in ns, Europe/Paris in ns, Asia/Tokyo in us. Values repeat and some
    differ by one nanosecond across columns. Returns the log and each row's instants (ns)."""
    import random

    import polars as pl

    rng = random.Random(seed)
    base = 1_714_550_400_000_000_000  # 2024-05-01T08:00:00Z in ns
    rows = []
    for i in range(n):
        a = base + rng.randrange(6) * 3_600_000_000_000 + rng.choice((0, 0, 1))
        b = base + rng.randrange(6) * 3_600_000_000_000 + rng.choice((0, 0, 1))
        c = base + rng.randrange(6) * 3_600_000_000_000
        rows.append({"type": "ABC"[i % 3] if rng.random() < 0.8 else "AB"[i % 2],
                     "naive": a, "paris": b, "tokyo": c})
    frame = pl.DataFrame(rows).with_columns(
        pl.col("naive").cast(pl.Datetime("ns")),
        pl.col("paris").cast(pl.Datetime("ns", "UTC")).dt.convert_time_zone("Europe/Paris"),
        (pl.col("tokyo") // 1000).cast(pl.Datetime("us", "UTC")).dt.convert_time_zone("Asia/Tokyo"),
    )
    frame.write_parquet(path)
    return rows


_OPS = {">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b,
        "=": lambda a, b: a == b, "!=": lambda a, b: a != b}


@pytest.mark.parametrize(
    "text, method",
    [
        ("A AS x ; B AS y FILTER y.paris > x.naive", "hash join"),  # ordered join
        ("A AS x ; B AS y FILTER y.naive >= x.tokyo", "hash join"),
        ("A AS x ; B AS y FILTER y.naive != x.paris", "hash join"),
        ("A AS x ; B AS y FILTER y.naive = x.paris", "hash join"),  # equality: hash key
        ("A AS x ; C AS z ; B AS y FILTER y.tokyo < x.paris", "post-filter"),  # not adjacent
        ("A AS x ; (B AS y FILTER y.paris > PREV(y).naive)+", "hash join"),  # register
    ],
)
def test_datetime_comparisons_across_zones_compare_instants(tmp_path, text, method):
    """Two datetime attributes in different zones, or naive against aware, compare as
    instants (naive is UTC), exactly to the nanosecond, whichever method runs the
    predicate; the CLI answers without a traceback."""
    import json
    import re

    log = tmp_path / "zoned.parquet"
    rows = _zoned_log(log)
    w = 6
    query = f"SELECT * WHERE {text} WITHIN {w} EVENTS"
    assert compile_query(query).correlation.methods == (method,)
    out = cli("match", "-e", query, str(log), "--format", "jsonl", "--no-progress")
    assert out.exit_code == 0, out.output
    got = {tuple(e["position"] for e in json.loads(line)["events"])
           for line in out.output.splitlines()}
    # brute force over the instants in ns
    lhs, op, rhs = re.search(r"FILTER (\S+) (\S+) ([\w().]+)", text.replace(")+", "")).groups()
    attr = {v.split(".")[-1] for v in (lhs, rhs)}
    assert attr <= {"naive", "paris", "tokyo"}
    a, b = lhs.split(".")[1], rhs.split(".")[1]
    types = [r["type"] for r in rows]
    want = set()
    n = len(rows)
    if "PREV" in text:
        def grow(run):
            if run[-1] - run[0] <= w:
                if len(run) > 1:
                    want.add(run)
                for k in range(run[-1] + 1, min(n, run[0] + w + 1)):
                    if types[k] == "B" and (len(run) == 1 or _OPS[op](rows[k][a], rows[run[-1]][b])):
                        grow(run + (k,))
        for i in range(n):
            if types[i] == "A":
                grow((i,))
    elif "z" in text:
        for i in range(n):
            for j in range(i + 1, min(n, i + w + 1)):
                for k in range(j + 1, min(n, i + w + 1)):
                    if (types[i], types[j], types[k]) == ("A", "C", "B") and _OPS[op](rows[k][a], rows[i][b]):
                        want.add((i, j, k))
    else:
        want = {(i, j) for i in range(n) for j in range(i + 1, min(n, i + w + 1))
                if types[i] == "A" and types[j] == "B" and _OPS[op](rows[j][a], rows[i][b])}
    assert want and got == want


def test_single_event_atoms_agree_with_the_joined_combinations(monkeypatch):
    # The post-filter's fast path (each variable at most once per match: gathered rows, no
    # join) must give the verdicts of the general one (a join per variable, ``all`` per
    # match), with a missing variable (passes), null and NaN values (fail) and an
    # attribute the log lacks.
    import numpy as np
    import polars as pl

    from cer_cli.engine import post_filter as pf

    bound = pl.DataFrame({
        pf._MATCH: [0, 0, 1, 1, 2, 3, 3, 4, 4, 5, 5],
        pf._VAR: ["x", "z", "x", "z", "x", "z", "x", "x", "z", "x", "z"],
        "val": [1.0, 0.5, 2.0, 3.0, 7.0, None, 4.0, float("nan"), 1.0, 5.0, 5.0],
    })
    n = 7  # match 6 binds neither variable
    atoms = [parse(f"A AS x ; C AS z FILTER {text}").formula.predicate for text in (
        "x.val > z.val", "NOT x.val > z.val", "x.val + 1 >= z.val * 2", "x.val = z.val",
        "x.missing < z.val")]
    gathered = []
    real = pf.PostFilter._single_atom
    monkeypatch.setattr(pf.PostFilter, "_single_atom",
                        staticmethod(lambda *a: gathered.append(a[0]) or real(*a)))
    fast = [pf.PostFilter._atom(p, bound, n, {}) for p in atoms]
    assert gathered == atoms  # every one took the fast path
    joined = [pf.PostFilter._atom(p, bound, n) for p in atoms]  # no memo: the join
    assert len(gathered) == len(atoms)
    for p, a, b in zip(atoms, fast, joined, strict=True):
        assert np.array_equal(a, b), p
    assert fast[0].tolist() == [True, False, True, False, False, False, True]


def test_an_iterated_variable_takes_the_joined_combinations():
    import polars as pl

    from cer_cli.engine import post_filter as pf

    bound = pl.DataFrame({pf._MATCH: [0, 0, 0], pf._VAR: ["x", "x", "z"], "val": [1, 5, 3]})
    memo: dict = {}
    assert pf.PostFilter._single_row(bound, "x", 1, memo) is None
    assert pf.PostFilter._single_row(bound, "z", 1, memo).tolist() == [2]
    p = parse("A+ AS x ; C AS z FILTER x.val < z.val").formula.predicate
    assert pf.PostFilter._atom(p, bound, 1, memo).tolist() == [False]  # 5 < 3 fails: for all


@pytest.mark.parametrize("select, dedupes", [("SELECT *", False), ("SELECT x, z", True)])
def test_candidates_are_deduplicated_only_after_a_projection(monkeypatch, select, dedupes):
    # Without a projection each candidate is its own valuation (the CEA is I/O-deterministic),
    # so the per-match dedupe (a Python loop) is skipped; with one it must still run.
    from cer_cli.engine import strategies

    calls = []
    real = strategies.dedupe
    monkeypatch.setattr(strategies, "dedupe", lambda b: calls.append(len(b)) or real(b))
    query = parse(f"{select} WHERE H AS x ; T AS y ; H AS z FILTER x.id = z.id AND y.id > x.id")
    check(query, B_STREAM)
    assert bool(calls) == dedupes
