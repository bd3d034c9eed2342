"""Start-up (issue #15 item 2): a command imports only what it needs. `cer --help` and
`cer check` load neither numba nor polars; `cer match` on a small log runs the kernel
uncompiled and never imports numba (its import and cache load cost more than the run); a
large run switches to the compiled kernel, and ``CER_JIT`` forces either. The times
themselves are measured by the benchmark (``tests/bench/startup.py``), not here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cer_cli.engine import jit as J

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numba", "polars", "pyarrow", "rich", "lark", "matplotlib")
#: runs `python -m cer_cli ARGS` and, at exit, prints which heavy modules it imported, and
#: whether the garbage collector is on and how many objects it leaves out (``gc.freeze``)
PROBE = (
    "import atexit, gc, runpy, sys\n"
    f"atexit.register(lambda: sys.stderr.write('\\nLOADED ' + ','.join(m for m in {HEAVY!r}"
    " if m in sys.modules) + '\\n'))\n"
    "atexit.register(lambda: sys.stderr.write("
    "f'\\nGC {int(gc.isenabled())} {gc.get_freeze_count()}\\n'))\n"
    "sys.argv = ['cer'] + sys.argv[1:]\n"
    "runpy.run_module('cer_cli', run_name='__main__')\n"
)


def _loaded(args: list[str], **env: str) -> tuple[set[str], subprocess.CompletedProcess]:
    full_env = {k: v for k, v in os.environ.items() if k not in ("CER_JIT", "NUMBA_DISABLE_JIT")}
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**full_env, **env})
    line = [x for x in proc.stderr.splitlines() if x.startswith("LOADED ")][-1]
    return set(filter(None, line[len("LOADED "):].split(","))), proc


def _gc_state(proc: subprocess.CompletedProcess) -> tuple[bool, int]:
    """(collector on at exit, objects frozen) as the probe printed them."""
    line = [x for x in proc.stderr.splitlines() if x.startswith("GC ")][-1]
    on, frozen = line.split()[1:]
    return on == "1", int(frozen)


def test_help_and_check_import_neither_numba_nor_polars():
    loaded, proc = _loaded(["--help"])
    assert proc.returncode == 0 and "match" in proc.stdout
    assert not loaded & {"numba", "polars", "rich", "lark"}, loaded  # click alone
    loaded, proc = _loaded(["match", "--help"])
    assert proc.returncode == 0 and "--count" in proc.stdout
    assert not loaded & {"numba", "polars", "rich", "lark"}, loaded
    loaded, proc = _loaded(["check", "-e", "A ; B FILTER B[x > 1]"])
    assert proc.returncode == 0, proc.stderr
    assert not loaded & {"numba", "polars", "rich"}, loaded  # lark parses


def test_rich_loads_only_to_print_through_it(tmp_path):
    """Diagnostics, progress bars and tables are printed with rich; a run that prints none
    of them does not import it (~16 ms of a small run's start-up, issue #15). The same
    commands with a diagnostic or a table do load it, with the same text as before."""
    log = _log(tmp_path, 3)
    for args in (["match", "-e", "A ; B ; C", str(log)], ["match", "-e", "A ; B ; C", str(log),
                 "--count"], ["match", "-e", "A ; B ; C", str(log), "--format", "csv"]):
        loaded, proc = _loaded(args)
        assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr
        assert "rich" not in loaded, args
    loaded, proc = _loaded(["match", "-e", "A ; B ; C", str(log), "--format", "table"])
    assert proc.returncode == 0 and "match 0" in proc.stdout and "rich" in loaded, proc.stderr
    loaded, proc = _loaded(["check", "-e", "A ; B FILTER"])  # a syntax error
    assert proc.returncode == 2 and "<expr>:1:13: error:" in proc.stderr and "rich" in loaded
    loaded, proc = _loaded(["match", "-e", "A ; B ; C", str(tmp_path / "none.csv")])
    assert proc.returncode == 2 and "error: log file not found" in proc.stderr
    assert "rich" in loaded


def test_the_collector_is_off_during_start_up_and_back_for_the_run(tmp_path):
    """The entry point turns the garbage collector off while cer imports and compiles
    (~45 ms of collections over objects that all live to the end); a run turns it back on,
    with start-up's objects frozen, so a long run collects as before."""
    loaded, proc = _loaded(["match", "-e", "A ; B ; C", str(_log(tmp_path, 3)), "--count"])
    assert proc.returncode == 0, proc.stderr
    on, frozen = _gc_state(proc)
    assert on and frozen > 10_000, (on, frozen)
    loaded, proc = _loaded(["check", "-e", "A ; B"])  # nothing that grows with a log
    assert proc.returncode == 0 and _gc_state(proc) == (False, 0), proc.stderr


def test_the_cer_script_runs_numpy_with_one_blas_thread(tmp_path):
    """OpenBLAS starts its thread pool when numpy is imported (~55 ms of a small run);
    cer does no linear algebra, so the entry point asks for one thread, unless the user
    chose a number."""
    probe = ("import atexit, os, runpy, sys\n"
             "atexit.register(lambda: sys.stderr.write("
             "'\\nBLAS ' + os.environ.get('OPENBLAS_NUM_THREADS', '-') + '\\n'))\n"
             "sys.argv = ['cer'] + sys.argv[1:]\n"
             "runpy.run_module('cer_cli', run_name='__main__')\n")
    args = ["match", "-e", "A ; B ; C", str(_log(tmp_path, 3)), "--count"]
    for env, want in (({}, "1"), ({"OPENBLAS_NUM_THREADS": "2"}, "2")):
        full = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
        proc = subprocess.run([sys.executable, "-c", probe, *args], cwd=ROOT, text=True,
                              capture_output=True, timeout=600, env={**full, **env})
        assert proc.returncode == 0 and proc.stdout.strip() == "1", proc.stderr
        assert proc.stderr.splitlines()[-1] == f"BLAS {want}"


def test_in_process_callers_keep_their_collector(tmp_path):
    """``cli.main`` called from Python (not the `cer` script) leaves ``gc`` as it found it."""
    import gc

    from click.testing import CliRunner

    from cer_cli.cli import cli

    frozen = gc.get_freeze_count()
    result = CliRunner().invoke(cli, ["match", "-e", "A ; B ; C", str(_log(tmp_path, 3)),
                                      "--count"])
    assert result.exit_code == 0, result.output
    assert gc.isenabled() and gc.get_freeze_count() == frozen


def _log(tmp_path: Path, n: int) -> Path:
    path = tmp_path / f"log{n}.csv"
    path.write_text("type,t\n" + "".join(f"{'ABC'[i % 3]},{i}\n" for i in range(n)))
    return path


def test_match_on_a_small_log_runs_uncompiled_without_numba(tmp_path):
    log = _log(tmp_path, 3)
    loaded, proc = _loaded(["match", "-e", "A ; B ; C", str(log), "--count"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1"
    assert "numba" not in loaded
    loaded, proc = _loaded(["match", "-e", "A ; B ; C", str(log)])  # with output
    assert proc.returncode == 0 and '"match": 0' in proc.stdout, proc.stderr
    assert "numba" not in loaded


def test_match_on_a_small_log_does_not_import_pyarrow(tmp_path):
    """polars reads CSV and Parquet and the kinds of its dtypes are mapped by name
    (``contract.kind_of``): only Parquet output (and Spark) import pyarrow, whose import
    is most of a small run's start-up (issue #15 item 2)."""
    import polars as pl

    csv = _log(tmp_path, 3)
    parquet = tmp_path / "log.parquet"
    pl.read_csv(csv).write_parquet(parquet)
    for log, extra in ((csv, []), (csv, ["--count"]), (csv, ["--format", "csv"]),
                       (parquet, []), (f"S={parquet}", ["--count"])):
        loaded, proc = _loaded(["match", "-e", "A ; B ; C", str(log), *extra])
        assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr
        assert "pyarrow" not in loaded, (log, extra)
    out = tmp_path / "out.parquet"  # the Parquet writer does load it
    loaded, proc = _loaded(["match", "-e", "A ; B ; C", str(csv), "-o", str(out)])
    assert proc.returncode == 0 and pl.read_parquet(out).height == 3, proc.stderr
    assert "pyarrow" in loaded


@pytest.mark.skipif(not J.HAVE_NUMBA, reason="needs numba")
def test_cer_jit_forces_the_compiled_kernel(tmp_path):
    loaded, proc = _loaded(["match", "-e", "A ; B ; C", str(_log(tmp_path, 3)), "--count"],
                           CER_JIT="1")
    assert proc.returncode == 0 and proc.stdout.strip() == "1", proc.stderr
    assert "numba" in loaded


def test_a_run_switches_to_the_compiled_kernel_once_large(monkeypatch):
    """Plain until ``JIT_MIN_EVENTS`` events, then compiled, with the same counts; the
    switch is safe because both run over the same numpy arrays."""
    from cer_cli.api import compile_query
    from tests.builders import events_frame

    frame = events_frame([{"type": "ABC"[i % 3], "stream": "S"} for i in range(90)])
    monkeypatch.setenv("CER_JIT", "0")
    plain = compile_query("A ; B ; C WITHIN 5 EVENTS").executor()
    want = [plain.count(frame.slice(0, 30)), plain.count(frame.slice(30))]
    assert plain._k.jit is False and want[0] > 0 and want[1] > 0
    monkeypatch.delenv("CER_JIT")
    monkeypatch.setattr(J, "JIT_MIN_EVENTS", 60)
    ex = compile_query("A ; B ; C WITHIN 5 EVENTS").executor()
    assert ex.count(frame.slice(0, 30)) == want[0]
    assert ex._k.jit is None and ex._k._fns == {}
    assert ex.count(frame.slice(30)) == want[1]
    assert ex._k.jit is True and ex._k._fns is J.compiled()


def test_bench_writes_only_ignored_files(monkeypatch):
    """`make bench` must not modify tracked files: its report and plot go to bench-out/,
    which git ignores (issue #15 item 5)."""
    from tests.bench.run import parse_args

    monkeypatch.delenv("CER_BENCH_ARGS", raising=False)
    args = parse_args([])
    for path in (args.report, args.plot, args.data / "tiny.csv"):
        rel = path.resolve().relative_to(ROOT)
        proc = subprocess.run(["git", "check-ignore", "-q", str(rel)], cwd=ROOT)
        assert proc.returncode == 0, f"{rel} is not ignored by git"


def test_a_large_log_starts_loading_the_compiled_kernel_early(monkeypatch):
    """A run expected to be large (``estimate_events``) starts numba's import in a
    background thread, to overlap the read of the log (issue #15); a small one, or
    ``CER_JIT=0``, does not."""
    started = []
    monkeypatch.setattr(J, "_load_jit", lambda: started.append(True))
    monkeypatch.delenv("CER_JIT", raising=False)
    assert J.warm_up_jit(J.JIT_MIN_EVENTS - 1) is None
    thread = J.warm_up_jit(J.JIT_MIN_EVENTS)
    if J.HAVE_NUMBA:
        thread.join()
        assert started == [True] and thread.daemon
    else:
        assert thread is None
    monkeypatch.setenv("CER_JIT", "0")
    assert J.warm_up_jit(10**9) is None


@pytest.mark.skipif(not J.HAVE_NUMBA, reason="needs numba")
def test_match_on_a_large_log_loads_numba_and_counts_the_same(tmp_path):
    """The whole path: a log past ``JIT_MIN_EVENTS`` runs compiled (warmed up in the
    background) and counts what the uncompiled run counts."""
    log = _log(tmp_path, J.JIT_MIN_EVENTS + 3)
    args = ["match", "-e", "A ; B ; C WITHIN 5 EVENTS", str(log), "--count"]
    loaded, proc = _loaded(args)
    assert proc.returncode == 0 and "numba" in loaded, proc.stderr
    loaded_plain, plain = _loaded(args, CER_JIT="0")
    assert "numba" not in loaded_plain
    assert proc.stdout == plain.stdout and int(proc.stdout) > 0


def test_the_hash_join_loads_only_for_predicates_between_events():
    """The PCEA planner (``compiler.pcea``) and engine are imported only by a query with
    predicates between events, which is what they plan and run."""
    code = ("import sys; from cer_cli.api import compile_query; compile_query(sys.argv[1]); "
            "print(*('cer_cli.compiler.pcea' in sys.modules, 'cer_cli.engine.pcea' in sys.modules))")

    def loaded(query: str) -> str:
        proc = subprocess.run([sys.executable, "-c", code, query], cwd=ROOT, text=True,
                              capture_output=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert loaded("A ; B ; C WITHIN 5 EVENTS") == "False False"
    assert loaded("A AS a ; B AS b FILTER a.v = b.v WITHIN 5 EVENTS").startswith("True")


def test_only_cer_plot_imports_matplotlib(tmp_path):
    """The plotting library (the ``plot`` extra, ~0.3 s to import) is loaded by `cer plot`
    alone: `cer match` in every output format, `--count` and `cer --help` never pay for it."""
    pytest.importorskip("matplotlib")
    log = _log(tmp_path, 3)
    for args in (["--help"], ["plot", "--help"], ["match", "-e", "A ; B ; C", str(log)],
                 ["match", "-e", "A ; B ; C", str(log), "--count"],
                 ["match", "-e", "A ; B ; C", str(log), "--format", "table"],
                 ["match", "-e", "A ; B ; C", str(log), "-o", str(tmp_path / "o.parquet")]):
        loaded, proc = _loaded(args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "matplotlib" not in loaded, args
    loaded, proc = _loaded(["plot", "-e", "A ; B ; C", str(log), "-o", str(tmp_path / "p.svg")])
    assert proc.returncode == 0 and "matplotlib" in loaded, proc.stderr
