"""`cer check`: normalised output, diagnostics with line/column/caret, exit codes, no tracebacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from cer_cli import diagnostics
from tests.builders import run


def parse(text: str):
    return pytest.importorskip("cer_cli.query.parser").parse(text)


def test_ok_prints_a_normalised_query_that_means_the_same(tmp_path):
    text = "t AS x ; H AS y FILTER x.tmp > 40 AND y[hum <= 25]".replace("t AS", "T AS")
    result = run("check", "-e", text)
    assert result.exit_code == 0, result.output
    first, printed = result.stdout.split("\n", 1)
    assert first == "ok"
    assert parse(printed) == parse(text)


def test_query_from_file_and_from_stdin(tmp_path):
    path = tmp_path / "q.ceql"
    path.write_text("SELECT * WHERE T AS x -- a comment\nFILTER x[tmp > 1]\n")
    from_file = run("check", str(path))
    from_stdin = run("check", "-", stdin=path.read_text())
    assert from_file.exit_code == from_stdin.exit_code == 0
    assert from_file.stdout == from_stdin.stdout
    assert "comment" not in from_file.stdout


def test_error_shows_file_line_column_and_caret(tmp_path):
    path = tmp_path / "bad.ceql"
    path.write_text("SELECT * FROM S\nWHERE T AS x ; H AS y\nFILTER z.tmp > 40\n")
    result = run("check", str(path))
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"{path}:3:8: error: filter on 'z'")
    assert lines[1] == "  FILTER z.tmp > 40"
    assert lines[2] == "         ^^^^^"
    assert "Traceback" not in result.output


def test_warnings_for_unsafe_sequences_do_not_fail():
    result = run("check", "-e", "T AS x ; T AS x")
    assert result.exit_code == 0
    assert "warning: unsafe ';'" in result.stderr
    assert "<expr>:1:1:" in result.stderr


@pytest.mark.parametrize(
    "garbage", [")))) ;; FILTER", "SELECT", "T AS", "\x00\x01", "T FILTER x[", "'unterminated"]
)
def test_garbage_is_an_input_error_not_a_traceback(garbage):
    result = run("check", "-e", garbage)
    assert result.exit_code == 2, result.output
    assert "error" in result.stderr
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_missing_query_file_is_a_usage_error(tmp_path):
    result = run("check", str(tmp_path / "nope.ceql"))
    assert result.exit_code == 2
    assert "cannot read query file" in result.output


def test_unexpected_failure_is_one_line_unless_debug(monkeypatch):
    import cer_cli.query.checks as checks

    def broken(*_args, **_kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(checks, "check_query", broken)
    result = run("check", "-e", "T")
    assert result.exit_code == 1
    assert "internal error: RuntimeError: boom" in result.stderr
    assert "--debug" in result.stderr
    # the traceback is kept in a file the hint names, for failures --debug may not repeat
    saved = result.stderr.split("the traceback is in ", 1)[1].split(":", 1)[0]
    try:
        text = Path(saved).read_text()
        assert "Traceback" in text and "RuntimeError: boom" in text
        assert "in broken" in text
    finally:
        Path(saved).unlink()
    debug = run("check", "--debug", "-e", "T")
    assert isinstance(debug.exception, RuntimeError)


def test_help_teaches_with_an_example():
    result = run("check", "--help")
    assert result.exit_code == 0
    assert "cer check -e" in result.output


def test_with_a_log_the_schema_is_checked(tmp_path):
    log = tmp_path / "sensors.csv"
    log.write_text("type,id,tmp,hum\nT,0,45,\nH,0,,20\n")
    assert run("check", "-e", "T AS x FILTER x.tmp > 40", str(log)).exit_code == 0
    result = run("check", "-e", "T AS x FILTER x.tmpp > 40", str(log))
    assert result.exit_code == 2
    assert "<expr>:1:15: error:" in result.stderr
    assert "did you mean 'tmp'" in result.stderr
    unknown = run("check", "-e", "T ; Hx", str(log))  # a type the log lacks: a warning
    assert unknown.exit_code == 0, unknown.output
    assert "warning: the log has no event type 'Hx'" in unknown.stderr
    assert "did you mean 'H'?" in unknown.stderr


def test_a_missing_log_is_an_input_error(tmp_path):
    result = run("check", "-e", "T", str(tmp_path / "missing.csv"))
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_rendered_caret_spans_the_offending_text():
    from io import StringIO

    from rich.console import Console

    from cer_cli.query.ast import Span

    out = StringIO()
    source = "T AS x\nFILTER x.tmpp > 1"
    start = source.index("x.tmpp")
    diagnostics.render_diagnostic(
        Console(file=out, width=200), "error", "bad", Span(start, start + 6), source, "q", ["h"]
    )
    assert out.getvalue().splitlines() == [
        "q:2:8: error: bad",
        "  FILTER x.tmpp > 1",
        "         ^^^^^^",
        "  hint: h",
    ]


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("a(?=b)", "look-around"),
        (r"(a)\1", "backreferences"),
        ("(a{1000}){1000}", "size limit"),
    ],
)
def test_like_patterns_polars_rejects_are_caught_by_check_and_match(tmp_path, pattern, problem):
    """Python's re accepts these; polars (which runs LIKE) does not: exit 2 with the span."""
    query = f"T AS x\nFILTER x.site LIKE '{pattern}'"
    checked = run("check", "-e", query)
    assert checked.exit_code == 2, checked.output
    assert "invalid regular expression in LIKE" in checked.output and problem in checked.output
    assert "<expr>:2:8" in checked.output and "Traceback" not in checked.output
    log = tmp_path / "l.csv"
    log.write_text("type,site\nT,ab\n")
    matched = run("match", "-e", query, str(log), "--format", "jsonl")
    assert matched.exit_code == 2, matched.output
    assert problem in matched.output and "internal error" not in matched.output
