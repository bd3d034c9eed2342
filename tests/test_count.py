"""Counting without enumerating (issue #14 item 7): without a window ``Engine.count`` sums
tECS node counts (``kernel._count_event``) instead of walking every complex event, and
finishes counts past int64 with Python ints (``KernelState._big_count``).

``test_uncompiled_count_is_the_same_code`` runs this module again with
``NUMBA_DISABLE_JIT=1``, where ``kernel.BIG`` can be lowered so that the Python-int path runs
on small streams, and where ``kernel._enumerate`` can be replaced to prove it is not called.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cer_cli.engine import jit as J
from cer_cli.engine import kernel as K
from cer_cli.plan import plan
from cer_cli.query import ast
from cer_cli.query.parser import parse
from tests import reference
from tests.builders import events_frame, letters
from tests.gen_formulas import streams
from tests.test_determinize import ceas
from tests.test_engine_props import cea_queries, expected
from tests.test_kernel import _cut, _engine

ROOT = Path(__file__).resolve().parents[1]
UNCOMPILED = os.environ.get("NUMBA_DISABLE_JIT") == "1" or not J.HAVE_NUMBA
EXAMPLES = int(os.environ.get("CER_KERNEL_EXAMPLES", "300"))
PROPS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _no_window(query: ast.Query, strategy: str | None = None) -> ast.Query:
    return ast.Query(**{**vars(query), "within": None, "limit": None,
                        "strategy": strategy or query.strategy})


def _check_counts(cea, query, events, cuts, compact_min) -> None:
    frames = _cut(events_frame(events), cuts)
    runner, counter = _engine(cea, query, compact_min=compact_min), _engine(cea, query, compact_min=compact_min)
    got = [m for f in frames for m in runner.run(f)]
    assert sum(counter.count(f) for f in frames) == len(got) == len(expected(cea, query, events))
    if query.strategy in ("ALL", "ANY") and counter._k is not None and any(m for m in got):
        assert int(counter._k.cst[K.C_COUNTED]) > 0  # the node-count path ran


@given(ceas(), cea_queries(), streams(max_size=12), st.lists(st.integers(0, 12), max_size=3),
       st.sampled_from((1, 4096)), st.sampled_from(("ALL", "ANY", None)))
@PROPS
def test_count_without_window_equals_the_matches(cea, query, events, cuts, compact_min, strategy):
    """Random CEAs, partitions, CONSUME BY, frames and compactions: the summed node counts
    equal the number of matches ``run`` reports and the brute-force reference finds."""
    _check_counts(cea, _no_window(query, strategy), events, cuts, compact_min)


@pytest.mark.skipif(not UNCOMPILED, reason="BIG is a compile-time constant when compiled")
@given(ceas(), cea_queries(), streams(max_size=12), st.lists(st.integers(0, 12), max_size=3),
       st.sampled_from((1, 4096)), st.sampled_from((1, 3)))
@settings(max_examples=min(EXAMPLES, 60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_counts_past_big_are_finished_exactly_in_python(cea, query, events, cuts, compact_min, big):
    """With ``BIG`` lowered to 1 or 3 nearly every count takes the Python-int path (memo
    per node, cleared by compaction): still exact, and CONSUME BY still fires."""
    old = K.BIG
    K.BIG = big
    try:
        _check_counts(cea, _no_window(query, "ALL"), events, cuts, compact_min)
    finally:
        K.BIG = old


def _check_partition_counts(cea, query, events, cuts, compact_min) -> None:
    """``Engine.partition_counts`` after ``count`` (and after ``run``) is the number of
    matches ``run`` reports per partition key (``cer match --count --by KEY``)."""
    frames = _cut(events_frame(events), cuts)
    runner, counter = _engine(cea, query, compact_min=compact_min), _engine(cea, query, compact_min=compact_min)
    got = [m for f in frames for m in runner.run(f)]
    assert sum(counter.count(f) for f in frames) == len(got)
    want = dict(Counter(m.partition for m in got))
    assert counter.partition_counts() == want
    assert runner.partition_counts() == want


@given(ceas(), cea_queries(), streams(max_size=12), st.lists(st.integers(0, 12), max_size=3),
       st.sampled_from((1, 4096)))
@PROPS
def test_partition_counts_are_the_matches_per_key(cea, query, events, cuts, compact_min):
    """Random CEAs, partitions, windows, strategies, LIMIT, CONSUME BY, frames and
    compactions: the kernel's count per partition (or post-processing's) is the number of
    matches per key."""
    _check_partition_counts(cea, query, events, cuts, compact_min)


@pytest.mark.skipif(not UNCOMPILED, reason="BIG is a compile-time constant when compiled")
@given(ceas(), cea_queries(), streams(max_size=12), st.lists(st.integers(0, 12), max_size=3),
       st.sampled_from((1, 3)))
@settings(max_examples=min(EXAMPLES, 60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_partition_counts_past_big_are_exact(cea, query, events, cuts, big):
    """Counts finished with Python ints (``BIG`` lowered) are added to their partition."""
    old = K.BIG
    K.BIG = big
    try:
        _check_partition_counts(cea, _no_window(query, "ALL"), events, cuts, 4096)
    finally:
        K.BIG = old


@pytest.mark.skipif(not UNCOMPILED, reason="a compiled kernel cannot be monkeypatched")
def test_counts_per_partition_do_not_enumerate_without_a_window(monkeypatch):
    """``run_count_by_partition`` counts as ``count`` does: no ``_enumerate`` call, and
    2^n - 1 matches per key exactly."""
    from cer_cli.engine.driver import run_count_by_partition

    events = [{**e, "id": i % 2} for i, e in enumerate(letters("A" * 80 + "BB"))]
    query = plan(parse("SELECT * WHERE A+ ; B PARTITION BY [id]"))

    def boom(*args):
        raise AssertionError("enumerated")

    monkeypatch.setattr(K, "_enumerate", boom)
    assert run_count_by_partition(query.executor(), events_frame(events)) == {
        (0,): 2**40 - 1, (1,): 2**40 - 1}


@pytest.mark.skipif(not UNCOMPILED, reason="a compiled kernel cannot be monkeypatched")
def test_count_does_not_enumerate_without_a_window(monkeypatch):
    """No window: ``_enumerate`` is never called by a count (it is by ``run``)."""
    events = [{**e, "id": i % 2} for i, e in enumerate(letters("AABAABABAB"))]
    query = plan(parse("SELECT * WHERE A+ ; B PARTITION BY [id] CONSUME BY PARTITION"))
    want = len(list(query.executor().run(events_frame(events))))

    def boom(*args):
        raise AssertionError("enumerated")

    monkeypatch.setattr(K, "_enumerate", boom)
    assert want > 0
    assert query.executor().count(events_frame(events)) == want
    with pytest.raises(AssertionError, match="enumerated"):
        list(query.executor().run(events_frame(events)))


def test_count_marks_its_events_counted_and_windows_enumerate():
    """The kernel's ``cst[C_COUNTED]``: without a window every event that changes the table
    is counted by node counts, with one none is (windowed counts still enumerate)."""
    frame = events_frame(letters("AABAAB"))
    plain = plan(parse("SELECT * WHERE A+ ; B")).executor()
    assert plain.count(frame) == 3 + 15
    assert int(plain._k.cst[K.C_COUNTED]) == 6
    query = parse("SELECT * WHERE A+ ; B WITHIN 3 EVENTS")
    windowed = plan(query).executor()
    assert windowed.count(frame) == len(reference.reference_matches(query, letters("AABAAB")))
    assert int(windowed._k.cst[K.C_COUNTED]) == 0


def test_a_plus_b_count_formula_matches_brute_force():
    """``A+ ; B`` over n As then a B has 2^n - 1 matches (every non-empty set of As)."""
    query = parse("SELECT * WHERE A+ ; B")
    events = letters("A" * 10 + "B")
    assert len(reference.reference_matches(query, events)) == 2**10 - 1
    assert plan(query).executor().count(events_frame(events)) == 2**10 - 1


def test_cli_counts_2_to_the_15000_without_enumerating(tmp_path):
    """``cer match --count`` prints the exact big integer 2^15000 - 1 (4,516 digits: more than
    Python prints by default) in seconds (enumerating would never end): hard timeout 60 s,
    compile time included."""
    log = tmp_path / "log.csv"
    log.write_text("type\n" + "A\n" * 15000 + "B\n")
    proc = subprocess.run([sys.executable, "-m", "cer_cli", "match", "-e", "A+ ; B", str(log), "--count"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sys.set_int_max_str_digits(0)
    assert int(proc.stdout.strip()) == 2**15000 - 1


@pytest.mark.skipif(UNCOMPILED, reason="already running uncompiled")
def test_uncompiled_count_is_the_same_code():
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1", "CER_KERNEL_EXAMPLES": "40"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(Path(__file__)),
         "-k", "not uncompiled and not cli"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
