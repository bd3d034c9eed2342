"""The DataFrame API (``cer_cli.match`` / ``cer_cli.count``), checked against the CLI's own
output on every example query and its sample."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import polars as pl
import pytest

import cer_cli
from tests.test_cli_match import QUERIES, ROOT, run, sample_of
from tests.test_shapes import cli_frame, user_frame

# --------------------------------------------------------------------------- DataFrame API


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.stem)
def test_match_on_a_frame_equals_the_cli_parquet_output(tmp_path, query):
    sample = sample_of(query)
    df = user_frame(sample)
    for shape in ("long", "wide"):
        want = pl.read_parquet(cli_frame(tmp_path, query, sample, shape))
        got = cer_cli.match(df, query.read_text(), shape=shape, stream=sample.stem)
        assert got.schema == want.schema
        assert got.equals(want), shape
    lazy = cer_cli.match(df.lazy(), query.read_text(), stream=sample.stem)
    assert lazy.equals(df.cer.match(query.read_text(), stream=sample.stem))
    cli_count = run("match", str(query), str(sample), "--count", "--allow-unbounded")
    assert cer_cli.count(df, query.read_text(), stream=sample.stem) == int(cli_count.stdout)


def test_frame_options_reach_the_reader():
    df = pl.DataFrame({"kind": ["A", "B"], "t": [1_700_000_000, 1_700_000_060], "v": [1, 2]})
    got = cer_cli.match(df, "A AS a ; B AS b WITHIN 2 minutes", type_column="kind",
                        time_column="t", time_unit="s", shape="wide")
    assert got["start_time"].to_list() == [dt.datetime(2023, 11, 14, 22, 13, 20)]
    assert got["b.t"].to_list() == [dt.datetime(2023, 11, 14, 22, 14, 20)]
    with pytest.raises(ValueError, match="shape"):
        cer_cli.match(df, "A", type_column="kind", shape="tall")
    with pytest.raises(TypeError):
        cer_cli.match({"type": ["A"]}, "A")


def test_import_cer_cli_stays_cheap():
    code = ("import sys, cer_cli; assert 'polars' not in sys.modules, 'polars loaded';"
            " import cer_cli.frames as f; assert cer_cli.match is f.match and cer_cli.count is f.count")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_python_api_exports_the_plan_and_the_errors_it_raises():
    """README, "Python API": users read the ``Plan`` and catch ``QueryError`` and
    ``LogError``, all from ``cer_cli.api``; the executor has one name, ``executor()``
    (``engine()``, its former name, still works and warns)."""
    from cer_cli import api

    assert {"Plan", "QueryError", "LogError", "compile_query"} <= set(api.__all__)
    assert all(hasattr(api, name) for name in api.__all__)
    assert not hasattr(api, "CompiledQuery")
    q = api.compile_query("A ; B WITHIN 2 EVENTS")
    assert isinstance(q, api.Plan)
    with pytest.raises(api.QueryError):
        api.compile_query("A ;")
    with pytest.raises(api.LogError):
        api.read_events(["missing.csv"])
    with pytest.warns(DeprecationWarning, match="executor"):
        old = q.engine()
    assert type(old) is type(q.executor())
