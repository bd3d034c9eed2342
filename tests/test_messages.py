"""Messages as a careful user reads them: one name for the query in every diagnostic, and
``--strict`` / ``CER_STRICT`` turning warnings into exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cer_cli.cli import cli

ROOT = Path(__file__).resolve().parent.parent
FIG1 = str(ROOT / "samples" / "fig1.csv")


def run(*args: str, env: dict | None = None):
    return CliRunner().invoke(cli, list(args),
                              env={"NO_COLOR": "1", "COLUMNS": "200", "CER_STRICT": None,
                                   **(env or {})})


@pytest.mark.parametrize("query", [
    "Q AS x",  # the check's warning (an event type the log lacks), with a caret
    "A+ ; B",  # the plan's warning (exponential output), without a span
])
def test_warnings_name_the_query_as_errors_do(tmp_path, query):
    """``-e`` is ``<expr>``, a file is its path: in warnings as in errors (not ``query:``)."""
    result = run("match", "-e", query, FIG1, "--count")
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("<expr>:"), result.stderr
    assert "query:" not in result.stderr
    path = tmp_path / "q.ceql"
    path.write_text(query)
    result = run("match", str(path), FIG1, "--format", "jsonl")
    assert result.stderr.startswith(f"{path}:"), result.stderr
    error = run("match", "-e", query + " ;", FIG1)
    assert error.exit_code == 2 and error.stderr.startswith("<expr>:"), error.stderr


def test_a_misspelt_event_type_warns_and_exits_0_unless_strict(tmp_path):
    out = tmp_path / "m.csv"
    lax = run("match", "-e", "Q AS x", FIG1, "-o", str(out))
    assert lax.exit_code == 0 and "warning: the log has no event type 'Q'" in lax.stderr
    assert out.exists()
    out.unlink()
    for args, env in [(("--strict",), {}), ((), {"CER_STRICT": "1"}), ((), {"CER_STRICT": "On"})]:
        strict = run("match", "-e", "Q AS x", FIG1, "-o", str(out), *args, env=env)
        assert strict.exit_code == 2, strict.output
        assert "error: the log has no event type 'Q'" in strict.stderr
        assert "made an error by --strict" in strict.stderr
        assert strict.stdout == "" and not out.exists()
    # --no-strict wins over the environment; CER_STRICT=0 is off
    assert run("match", "-e", "Q AS x", FIG1, "--no-strict", env={"CER_STRICT": "1"}).exit_code == 0
    assert run("match", "-e", "Q AS x", FIG1, env={"CER_STRICT": "0"}).exit_code == 0


def test_strict_stops_the_plan_warnings_and_a_clean_query_still_runs():
    result = run("match", "-e", "A+ ; B", FIG1, "--strict")
    assert result.exit_code == 2 and "error: " in result.stderr and result.stdout == ""
    ok = run("match", "-e", "T AS x ; H AS y", FIG1, "--strict", "--count")
    assert ok.exit_code == 0 and ok.stderr == "", ok.output


def test_strict_refuses_an_output_with_other_hard_links_before_writing(tmp_path):
    import os

    out, other = tmp_path / "m.csv", tmp_path / "other.csv"
    out.write_text("old\n")
    os.link(out, other)
    result = run("match", "-e", "T AS x ; H AS y", FIG1, "-o", str(out), "--strict")
    assert result.exit_code == 2, result.output
    assert "other hard link(s)" in result.stderr and out.read_text() == "old\n"
    lax = run("match", "-e", "T AS x ; H AS y", FIG1, "-o", str(out))
    assert lax.exit_code == 0 and "warning: " in lax.stderr and out.read_text() != "old\n"


def test_strict_plot_draws_nothing(tmp_path):
    out = tmp_path / "m.html"
    result = run("plot", "-e", "Q AS x", FIG1, "-o", str(out), "--strict")
    assert result.exit_code == 2 and "error: the log has no event type 'Q'" in result.stderr
    assert not out.exists()


def test_strict_check_prints_no_ok():
    result = run("check", "-e", "Q AS x", FIG1, "--strict")
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert result.stderr.startswith("<expr>:1:1: error:")
    assert run("check", "-e", "Q AS x", FIG1).stdout.startswith("ok")


def test_an_unclear_cer_strict_is_refused():
    result = run("match", "-e", "T", FIG1, env={"CER_STRICT": "maybe"})
    assert result.exit_code == 2 and "CER_STRICT" in result.output
    assert "Traceback" not in result.output


# ------------------------------------------------------------ the first compile, announced

def _cer(env: dict, *args: str):
    import os
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "cer_cli", *args], capture_output=True,
                          text=True, env={**os.environ, "NO_COLOR": "1", **env}, check=False)


def test_an_empty_numba_cache_is_a_compile_and_a_used_one_is_not(tmp_path):
    """``jit.will_compile`` reads numba's cache index (no compiling, no timing): an empty
    NUMBA_CACHE_DIR means the first compiled call compiles; after a compiled run with the
    cache in place, the next run loads it and says nothing."""
    import os
    import subprocess
    import sys

    probe = "from cer_cli.engine import jit, kernel; print(jit.will_compile())"
    cold = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}, check=True)
    assert cold.stdout.strip() == "True", cold.stderr
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    runs = [subprocess.run([sys.executable, "-m", "cer_cli", "match", "-e", "T ; H", FIG1,
                            "--count"], capture_output=True, text=True, check=False,
                           env={**env, "CER_JIT": "1", "NO_COLOR": "1"}) for _ in range(2)]
    assert runs[1].returncode == 0, runs[1].stderr
    assert "compiling the matching kernel" not in runs[1].stderr  # warm: no line
    warm = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=env, check=True)
    assert warm.stdout.strip() == "False"


def test_a_compile_is_announced_on_stderr_and_in_the_bar(monkeypatch):
    from cer_cli.engine import jit

    monkeypatch.setattr(jit, "will_compile", lambda: True)
    result = run("match", "-e", "T ; H", FIG1, "--count", "--progress", env={"CER_JIT": "1"})
    assert result.exit_code == 0, result.output
    note = "note: compiling the matching kernel once, ~20 s"
    assert result.stderr.count(note) == 1, result.stderr
    assert jit.compile_notice is None  # the run's notice does not outlive it
    quiet = run("match", "-e", "T ; H", FIG1, "--count", env={"CER_JIT": "0"})
    assert note not in quiet.stderr  # an uncompiled run compiles nothing


def test_the_hash_join_kernels_compile_is_announced_too(monkeypatch):
    from cer_cli.engine import jit, pcea_state

    asked = []
    monkeypatch.setattr(jit, "will_compile", lambda *modules: asked.append(modules) or True)
    result = run("match", "-e", "H AS h ; T AS t FILTER h.temp < t.temp WITHIN 3 EVENTS", FIG1,
                 "--count", env={"CER_JIT": "1"})
    assert result.exit_code == 0, result.output
    assert result.stderr.count("note: compiling the matching kernel once") == 1, result.stderr
    assert asked == [pcea_state.MODULES]


@pytest.mark.slow
def test_a_cold_numba_cache_prints_one_line_then_none(tmp_path):
    """End to end, compiling for real (13-22 s of CPU) into an empty NUMBA_CACHE_DIR."""
    env = {"NUMBA_CACHE_DIR": str(tmp_path), "CER_JIT": "1"}
    first = _cer(env, "match", "-e", "T ; H", FIG1, "--count")
    assert first.returncode == 0 and "compiling the matching kernel once" in first.stderr
    second = _cer(env, "match", "-e", "T ; H", FIG1, "--count")
    assert second.returncode == 0 and second.stderr == "", second.stderr


# ------------------------------------------------------------------------------ explain

def test_explain_text_prints_partition_by_and_windows_as_the_query_writes_them():
    out = run("explain", "-e", "T AS x ; H AS y PARTITION BY [id], [`user id`] WITHIN 2 hours")
    assert out.exit_code == 0, out.output
    assert "within 2 hours · partition by [id], [`user id`]" in out.stdout
    assert "window 2 hours of event time" in out.stdout
    assert "[['" not in out.stdout and " ns " not in out.stdout


@pytest.mark.parametrize("fmt", ["dot", "mermaid"])
@pytest.mark.parametrize(("query", "drawn"), [
    # between, compared with the match: the post-filter's gap, from φ1's state to φ2's
    ("A AS a ; !(B AS b FILTER b.k = a.k) ; C AS c", ["q1 -> q2", "!B FILTER b.k = a.k"]),
    # trailing: from the final state to the window's close
    ("A AS a ; !(B AS b) WITHIN 5 EVENTS", ["q1 -> closed0", "!(B AS b) WITHIN 5 EVENTS",
                                            "window closed"]),
    # the hash join's PCEA and its keys
    ("A AS a ; B AS b ; C AS c FILTER a.k = b.k AND b.j = c.j WITHIN 10 EVENTS",
     ["p0 -> p1", "a.k = b.k", "p1 -> p2", "b.j = c.j", "A AS a", "C AS c", "hash join"]),
    # the next-match scan's sequence, each gap's !ψ on its edge
    ("A AS a ; !(B AS b FILTER b.v > a.v) ; B AS c FILTER c.v > a.v",
     ["next-match scan", "p0 -> p1", "!(B FILTER (b.v > a.v)), (c.v > a.v)", "B AS c"]),
])
def test_explain_graphs_draw_absences_and_the_hash_joins_keys(fmt, query, drawn):
    out = run("explain", "-e", query, "--format", fmt)
    assert out.exit_code == 0, out.output
    text = out.stdout if fmt == "dot" else out.stdout.replace(" --> ", " -> ")
    for piece in drawn:
        assert piece in text, (piece, text)


def test_strict_stops_a_spark_run_on_a_setting_spark_would_ignore_before_spark_starts():
    pytest.importorskip("pyspark")
    result = run("match", "--spark", "--spark-conf", "spark.exectuor.memory=1g", "--strict",
                 "-e", "T", FIG1)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: --spark-conf spark.exectuor.memory: not a Spark")


@pytest.mark.spark
def test_spark_prints_the_checks_warnings_and_strict_ends_the_run():
    """``--spark`` printed none of the check's warnings; now as locally, and ``--strict``
    ends the run (exit 2) before Spark runs the query."""
    pytest.importorskip("pyspark")
    args = ["match", "--spark", "--master", "local[2]", "-e", "Q AS x", FIG1, "--count"]
    lax = _cer({}, *args)
    assert lax.returncode == 0 and lax.stdout.strip() == "0", lax.stderr
    assert "<expr>:1:1: warning: the log has no event type 'Q'" in lax.stderr
    strict = _cer({}, *args, "--strict")
    assert strict.returncode == 2 and strict.stdout == "", strict.stderr
    assert "<expr>:1:1: error: the log has no event type 'Q'" in strict.stderr
