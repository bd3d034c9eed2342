"""Exit codes and messages at the edges of the process: closed pipes, closed standard
streams, an output that cannot be written (one rule: exit 1, one line naming it), logs the
user may not read, and query texts that used to end in "internal error".

Each case runs `python -m cer_cli` in a subprocess (with a hard timeout), because what is
tested is the process: its descriptors, its exit code, what reaches stderr. Cases that need
a permission to be missing run as `nobody` through setpriv when the tests run as root.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CSV = "type,id,tmp,hum\nH,2,,25\nT,0,45,\nH,0,,20\nH,1,,25\nT,1,40,\nT,0,42,\nT,1,25,\nH,1,,70\nH,0,,18\n"
ENV = {**os.environ, "NO_COLOR": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def cer(*args: str, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.run([sys.executable, "-m", "cer_cli", *args], env=ENV, timeout=300, **kw)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "s.csv"
    path.write_text(CSV)
    return path


# --------------------------------------------------------------------------- messages


@pytest.mark.parametrize("source", ["file", "stdin", "expr"])
def test_a_byte_order_mark_before_the_query_is_skipped(tmp_path: Path, log: Path, source) -> None:
    text = "\ufeffH ; T\n"
    if source == "file":
        (tmp_path / "q.cel").write_text(text, encoding="utf-8")
        result = cer("check", str(tmp_path / "q.cel"), str(log))
    elif source == "stdin":
        result = cer("check", "-", str(log), input=text.encode())
    else:
        result = cer("check", "-e", text, str(log))
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().splitlines()[-1] == "WHERE (H ; T)"


def test_a_huge_integer_literal_is_exit_2_with_its_position(log: Path) -> None:
    result = cer("match", "-e", "H ; T FILTER T[tmp > " + "9" * 5000 + "]", str(log))
    assert result.returncode == 2
    err = result.stderr.decode()
    assert err.startswith("<expr>:1:22: error: integer too large: 99999999999999999999…(5,000 digits)")
    assert "internal error" not in err and len(err) < 2000
