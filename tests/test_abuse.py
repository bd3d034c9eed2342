"""Hostile but valid inputs (issue #14 items 11-12): each is exit 2 with a message naming
the problem, or runs in time linear in its size; never an internal error or a traceback.

Runs are subprocesses (the real entry point, its encoding and exit codes), with generous
timeouts instead of timing assertions: the quadratic paths took minutes at these sizes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl


def cer(*args: str, env: dict[str, str] | None = None, timeout: float = 120):
    return subprocess.run(
        [sys.executable, "-m", "cer_cli", *args],
        capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=timeout,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
    )


def _clean(result) -> None:
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr


def test_late_string_in_an_integer_column_names_row_and_column(tmp_path: Path) -> None:
    log = tmp_path / "l.csv"
    log.write_text("type,v\n" + "A,1\n" * 10_000 + "A,abc\n")
    result = cer("match", "-e", "A", str(log), "--format", "jsonl")
    assert result.returncode == 2, result.stderr
    _clean(result)
    assert "line 10002" in result.stderr and "column 'v'" in result.stderr
    assert "'abc' is not an integer" in result.stderr


def test_nested_columns_in_csv_output_are_refused_by_name(tmp_path: Path) -> None:
    """Flat lists are written as JSON arrays (as the wide shape's lists); structs and bytes
    have no CSV form: refused, naming the column."""
    log = tmp_path / "l.parquet"
    pl.DataFrame({"type": ["A"], "tags": [["x", "y"]], "blob": [b"\x00"]}).write_parquet(log)
    result = cer("match", "-e", "A", str(log), "--format", "csv")
    assert result.returncode == 2, result.stderr
    _clean(result)
    assert "column 'blob' holds binary" in result.stderr and "--format jsonl" in result.stderr
    assert cer("match", "-e", "A", str(log), "--format", "jsonl").returncode == 0
    flat = tmp_path / "flat.parquet"
    pl.DataFrame({"type": ["A"], "tags": [["x", "y"]]}).write_parquet(flat)
    result = cer("match", "-e", "A", str(flat), "--format", "csv")
    assert result.returncode == 0, result.stderr
    assert pl.read_csv(result.stdout.encode())["tags"].to_list() == ['["x", "y"]']


def test_ascii_stdout_escapes_instead_of_failing(tmp_path: Path) -> None:
    log = tmp_path / "l.csv"
    log.write_text("type,name\nA,hé𝄞\n", encoding="utf-8")
    ascii_env = {"PYTHONIOENCODING": "ascii"}
    jsonl = cer("match", "-e", "A", str(log), "--format", "jsonl", env=ascii_env)
    assert jsonl.returncode == 0, jsonl.stderr
    assert json.loads(jsonl.stdout)["events"][0]["attrs"]["name"] == "hé𝄞"  # same JSON
    for fmt in ("csv", "table"):
        result = cer("match", "-e", "A", str(log), "--format", fmt, env=ascii_env)
        assert result.returncode == 0, result.stderr
        _clean(result)
        assert "h\\xe9" in result.stdout


def test_ten_thousand_columns_is_linear(tmp_path: Path) -> None:
    """10,000 columns x 5 rows: ~3 s now, 302 s before (EventLookup.add, the event frame and
    the long CSV frame each looked a column up in a list per column: O(columns^2))."""
    n = 10_000
    log = tmp_path / "wide.csv"
    pl.DataFrame({"type": ["A"] * 5, **{f"c{i}": list(range(5)) for i in range(n)}}).write_csv(log)
    result = cer("match", "-e", "A", str(log), "--format", "jsonl", timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 5 and len(json.loads(lines[0])["events"][0]["attrs"]) == n
    result = cer("match", "-e", "A", str(log), "--format", "csv", timeout=60)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 6


def test_a_hundred_thousand_event_types_is_linear(tmp_path: Path) -> None:
    """150,000 rows, each of its own event type: ~3 s now; before, the schema kept each
    stream's types in a list it searched per type (300,000 types ran for over ten minutes),
    and a warning listed every known type (megabytes on stderr per unknown name)."""
    n = 150_000
    log = tmp_path / "types.csv"
    pl.DataFrame({"type": [f"T{i}" for i in range(n)], "time": list(range(n))}).write_csv(log)
    result = cer("match", "-e", "T5 ; T6 WITHIN 5 EVENTS", str(log), "--count", timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "1\n"
    result = cer("match", "-e", "A ; T6 WITHIN 5 EVENTS", str(log), "--count", timeout=60)
    assert result.returncode == 0, result.stderr
    _clean(result)
    assert f"… and {n - 30:,} more" in result.stderr and len(result.stderr) < 2000, \
        result.stderr[:300]


def test_many_small_logs_is_linear(tmp_path: Path) -> None:
    """400 five-row logs: the batched merge filtered every log's buffer per step (1,000 logs
    took 112 s)."""
    specs = []
    for i in range(400):
        path = tmp_path / f"l{i}.csv"
        path.write_text("type,ts\n" + "".join(f"A,{i + k}\n" for k in range(5)))
        specs.append(str(path))
    result = cer("match", "-e", "A", *specs, "--format", "jsonl", timeout=90)
    assert result.returncode == 0, result.stderr
    times = [json.loads(x)["start_time"] for x in result.stdout.splitlines()]
    assert len(times) == 2000 and times == sorted(times)
