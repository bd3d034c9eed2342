"""`make bench`: the benchmark suite under pytest. Every test here is marked ``bench``, which
the default ``pytest`` run deselects (see ``addopts`` in pyproject.toml).

Options reach ``run.py`` through ``CER_BENCH_ARGS``, e.g.
``make bench CER_BENCH_ARGS='--size 100000 --groups uniformP3,Pn'``.
"""

from __future__ import annotations

import polars as pl
import pytest

pytestmark = pytest.mark.bench


def test_generators_are_seeded_and_stress_counts_are_exact():
    from tests.bench import generators as gen

    assert gen.uniform(1000).equals(gen.uniform(1000))
    assert gen.stocks(1000).equals(gen.stocks(1000))
    s = gen.stocks(5000)
    assert s["stock_time"].is_sorted() and s["ts"].is_sorted()
    for q, k in (("Q1", 3), ("Q2", 4)):
        df = gen.stress(q, 60)
        types = df["type"].to_list()
        assert types[-1] == gen.STRESS_TRIGGER[q] and types.count(types[-1]) == 1
        want = list("ABCD"[:k])
        brute = _count_subsequences(types, want)
        assert gen.stress_expected(q, df) == brute


def _count_subsequences(types: list[str], pattern: list[str]) -> int:
    counts = [1] + [0] * len(pattern)
    for t in types:
        for i in range(len(pattern), 0, -1):
            if pattern[i - 1] == t:
                counts[i] += counts[i - 1]
    return counts[-1]


def test_benchmark_suite():
    from tests.bench.run import main

    results = main([])
    assert results
    disagree = [r.workload.name for r in results if r.agree() == "NO" and not r.workload.note]
    assert not disagree, f"match counts differ between cer, CORE and the exact count: {disagree}"
    from tests.bench.run import OUT

    head = "## Predicates between events (issue #17)"
    report = (OUT / "report.md").read_text()
    if head in report:
        correlation = report.split(head)[1].split("\n## ")[0]
        assert "| NO |" not in correlation, "a correlation count differs from the brute force"


def test_polars_limit_reads_the_query_columns():
    from tests.bench.workloads import all_workloads

    for w in all_workloads():
        assert "type" in w.columns
        for a in w.atoms:
            assert isinstance(a, pl.Expr)


def test_next_match_brute_force_equals_the_reference():
    """The bench's numpy count of the next-match queries (issue #26) against the reference
    on a small log."""
    from cer_cli.query.parser import parse
    from tests import reference
    from tests.bench import correlation

    df = correlation.next_log(400, seed=7)
    events = df.to_dicts()
    got = correlation.next_brute_counts(df, window=8)
    for name, text in correlation.NEXT_QUERIES.items():
        query = parse(text.replace(f"WITHIN {correlation.NEXT_WINDOW}", "WITHIN 8"))
        assert got[name] == len(reference.reference_matches(query, events)), name


def test_correlation_brute_force_equals_the_reference():
    """The bench's numpy count of issue #17's queries is itself checked against the
    brute-force reference on a small log."""
    from cer_cli.query.parser import parse
    from tests import reference
    from tests.bench import correlation

    df = correlation.log(300, seed=5)
    events = df.to_dicts()
    got = correlation.brute_counts(df, window=6)
    for name, text in correlation.QUERIES.items():
        query = parse(text.replace(f"WITHIN {correlation.WINDOW}", "WITHIN 6"))
        assert got[name] == len(reference.reference_matches(query, events)), name


def test_chain_brute_force_equals_the_reference():
    """The bench's numpy count of the comparison chain and its plain pattern (issue #26)
    against the reference on a small log."""
    from cer_cli.query.parser import parse
    from tests import reference
    from tests.bench import correlation

    df = correlation.next_log(300, seed=3)
    events = df.to_dicts()
    got = correlation.chain_brute_counts(df, window=9)
    for name, text in correlation.CHAIN_QUERIES.items():
        query = parse(text.replace(f"WITHIN {correlation.NEXT_WINDOW}", "WITHIN 9"))
        assert got[name] == len(reference.reference_matches(query, events)), name
        assert got[name] > 0


def test_chain_report_gives_the_ratio_per_match():
    from tests.bench import correlation as c

    figs = [c.Figure("plain", "P", [], 2.0, 1_000_000, 1_000_000, cpu=1.0),
            c.Figure("comparison chain", "Q", [], 3.0, 500_000, 500_000, cpu=1.0)]
    text = "\n".join(c.report_chain(figs))
    assert "| 2.00 | 2.000 | 1.00× | 1.00 | 1.000 | 1.00× |" in text
    assert "| 3.00 | 6.000 | 3.00× | 1.00 | 2.000 | 2.00× |" in text


def test_per_match_ratio_pairs_the_rounds():
    """``engine_per_match``'s ratio is the median of each round's own ratio: a round under
    load slows both queries, and must not count against one of them alone."""
    from tests.bench import correlation as c

    # rounds at loads 1, 2, 1.5: the chain costs 3× the plain pattern per match in each
    cpu = {"plain": [1.0, 2.0, 1.5], "comparison chain": [0.3, 0.6, 0.45]}
    found = {"plain": 1_000_000, "comparison chain": 100_000}
    lines = c.per_match_lines(cpu, found)
    assert "1.00× the plain pattern per match (rounds 1.00–1.00×)" in lines[0]
    assert "0.45 s CPU (median of 3), 4.500 µs/match" in lines[1]
    assert "3.00× the plain pattern per match (rounds 3.00–3.00×)" in lines[1]
    # a round where something slowed the chain alone shows in the range, not the median
    cpu["comparison chain"][1] = 0.9
    assert "3.00× the plain pattern per match (rounds 3.00–4.50×)" in c.per_match_lines(
        cpu, found)[1]
