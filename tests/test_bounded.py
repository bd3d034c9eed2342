"""Memory bounded around the engine — the Parquet reader, the Parquet writer's row groups,
``--limit``'s buffer — and the progress bar during a long enumeration.

Memory is measured as the peak RSS of a subprocess (``tests.peak``: its own) at two sizes
of the same workload: bounded means the peak barely moves while the log or the output
grows several times (never a timing). The CLI runs stay under ``jit.JIT_MIN_EVENTS``
events with ``CER_JIT=0``, so that numba is never loaded or compiled in them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cer_cli.cli import cli
from cer_cli.engine import driver
from cer_cli.events import Match, as_batches, batch_of
from cer_cli.io import read as read_module
from cer_cli.io import write as write_module
from cer_cli.io.read import LogError, read_events
from tests import peak
from tests.builders import with_traceback
from tests.test_jobs import small_pieces

ROOT = Path(__file__).resolve().parent.parent


def peak_mb(code: str, *args: str) -> int:
    """Peak RSS (MB) of a child Python running ``code`` with ``args`` as ``sys.argv[1:]``,
    measured alone (``tests.peak``)."""
    env = dict(os.environ, CER_JIT="0", NO_COLOR="1")
    got = peak.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env)
    assert got.rc == 0, with_traceback(got.stderr + got.stdout)
    return int(got.peak_mb)


CER = "import sys; from cer_cli.cli import main; sys.argv[0] = 'cer'; main()"


# --------------------------------------------------------------------------- Parquet reader


def compressible_parquet(path: Path, rows: int, group: int = 1 << 16) -> Path:
    """``type`` alternating A/B, ``t`` = 0, 1, 2, ... and ``v`` = 0, in row groups of
    ``group`` rows: a few bytes a row on disk, ~40 in memory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = pa.array(["A", "B"] * (group // 2))
    zeros = pa.array(np.zeros(group, dtype=np.int64))
    schema = pa.schema([("type", pa.string()), ("t", pa.int64()), ("v", pa.int64())])
    with pq.ParquetWriter(path, schema, compression="snappy", use_dictionary=["type"],
                          column_encoding={"t": "DELTA_BINARY_PACKED", "v": "DELTA_BINARY_PACKED"}) as w:
        for lo in range(0, rows, group):
            t = pa.array(np.arange(lo, lo + group, dtype=np.int64))
            w.write_table(pa.table({"type": types, "t": t, "v": zeros}, schema=schema))
    return path


READ_ALL = """
import sys
from cer_cli.cli import BATCH_ROWS
from cer_cli.io.read import read_events
log = read_events([sys.argv[1]], times="t", batch_size=BATCH_ROWS)
assert log.sorted_input and sum(f.height for f in log.batches()) == log.n_events
"""


def test_parquet_reader_memory_is_flat_in_the_rows(tmp_path):
    """A compressible Parquet was read whole when its *file* was at most 64 MiB: 8M rows
    (24 MB on disk) took ~2x the peak of 2M rows. Streaming is now decided from the row
    count in the file's metadata, and the time check streams too (its ``diff`` over the
    whole column held the column in memory)."""
    small = compressible_parquet(tmp_path / "small.parquet", 1 << 21)
    large = compressible_parquet(tmp_path / "large.parquet", 1 << 23)
    assert large.stat().st_size < read_module.READ_ONCE_BYTES  # the old rule read it once
    a, b = peak_mb(READ_ALL, str(small)), peak_mb(READ_ALL, str(large))
    assert b < 1.4 * a, f"peak RSS {a} MB for 2M rows, {b} MB for 8M rows"


def test_parquet_read_once_is_decided_by_rows_not_file_bytes(tmp_path):
    path = compressible_parquet(tmp_path / "p.parquet", 1 << 16, group=1 << 14)
    logs = read_module._open([str(path)], None, None)
    assert read_module._loaded_bytes(logs) == (1 << 16) * 3 * read_module._CELL_BYTES
    assert read_module._loaded_bytes(logs) > path.stat().st_size


def test_time_check_carries_order_and_rows_across_chunks(tmp_path, monkeypatch):
    """The time check runs chunk by chunk: a decrease at a chunk's first row is caught, and
    a missing time in a later chunk is named by its row in the file."""
    monkeypatch.setattr(read_module, "_PASS_ROWS", 2)
    ordered = tmp_path / "o.parquet"
    pl.DataFrame({"type": ["A"] * 6, "t": [1, 2, 3, 4, 5, 6]}).write_parquet(ordered)
    log = read_events([str(ordered)], times="t", batch_size=4)
    assert log.sorted_input and log.n_events == 6
    back = tmp_path / "b.parquet"  # 2 < 3 across the boundary of chunks [1, 3] and [2, 4]
    pl.DataFrame({"type": ["A"] * 6, "t": [1, 3, 2, 4, 5, 6]}).write_parquet(back)
    log = read_events([str(back)], times="t", batch_size=4)
    assert not log.sorted_input and log.frame()["t"].to_list() == [1, 2, 3, 4, 5, 6]
    hole = tmp_path / "h.parquet"
    pl.DataFrame({"type": ["A"] * 6, "t": [1, 2, 3, 4, None, 6]}).write_parquet(hole)
    with pytest.raises(LogError, match="data row 4 "):
        read_events([str(hole)], times="t", batch_size=4)


# --------------------------------------------------------------------------- writers


def blocks_csv(path: Path, blocks: int, width: int, text: int = 0) -> Path:
    """``width - 1`` A events then a B, ``blocks`` times; column ``i`` (the row) and, with
    ``text``, a column ``s`` of that many characters."""
    lines = ["type,i" + (",s" if text else "")]
    for i in range(blocks * width):
        kind = "B" if i % width == width - 1 else "A"
        lines.append(f"{kind},{i}" + (f",{chr(97 + i % 26) * text}" if text else ""))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_wide_parquet_row_groups_are_bounded_by_bytes(tmp_path):
    """``A+ ; B --shape wide -o w.parquet``: each row holds lists of every event of the
    match; 512k-row groups held all of them (100k matches of ~3 KB: 2.1x the peak of 10k
    matches). Row groups are now cut at ``ROW_GROUP_BYTES``."""
    query = "A+ ; B WITHIN 10 EVENTS"  # 511 matches per B, ~5.5 events each
    peaks = []
    for blocks in (60, 360):  # both past the first row group, which the smaller run fills
        log = blocks_csv(tmp_path / f"w{blocks}.csv", blocks, 10, text=500)
        out = tmp_path / f"w{blocks}.parquet"
        peaks.append(peak_mb(CER, "match", "-e", query, str(log), "--shape", "wide",
                             "-o", str(out)))
        assert pl.scan_parquet(out).select(pl.len()).collect().item() == 511 * blocks
    a, b = peaks
    assert b < 1.4 * a, f"peak RSS {a} MB for 30,660 wide rows, {b} MB for 183,960"


def test_parquet_writer_cuts_row_groups_by_bytes(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    log = blocks_csv(tmp_path / "w.csv", 40, 10, text=100)  # 20,440 rows: several batches
    query = "A+ ; B WITHIN 10 EVENTS"
    whole = tmp_path / "whole.parquet"
    assert CliRunner().invoke(cli, ["match", "-e", query, str(log), "--shape", "wide",
                                    "-o", str(whole)]).exit_code == 0
    monkeypatch.setattr(write_module, "ROW_GROUP_BYTES", 1)  # a group per frame
    cut = tmp_path / "cut.parquet"
    assert CliRunner().invoke(cli, ["match", "-e", query, str(log), "--shape", "wide",
                                    "-o", str(cut)]).exit_code == 0
    assert pq.ParquetFile(whole).metadata.num_row_groups == 1
    assert pq.ParquetFile(cut).metadata.num_row_groups > 1
    assert pl.read_parquet(cut).equals(pl.read_parquet(whole))


def test_as_batches_packs_matches_up_to_an_event_bound():
    """``Match`` objects (Spark, the hash join) are packed by events too, not only by count."""
    from cer_cli.events import BATCH_EVENTS
    big = [Match(i, i + 999, tuple((i + j, ("x",)) for j in range(1000))) for i in range(600)]
    batches = list(as_batches(big, 50_000))
    assert len(batches) > 1
    assert all(len(b.pos) <= BATCH_EVENTS for b in batches)
    assert [m for b in batches for m in b.matches()] == big
    huge = Match(0, 0, tuple((j, ("x",)) for j in range(BATCH_EVENTS + 5)))
    assert [len(b) for b in as_batches([huge, big[0]], 10)] == [1, 1]


# --------------------------------------------------------------------------- --limit


def test_limit_buffer_is_bounded_by_the_matches_size(tmp_path):
    """``--limit N -o l.parquet`` packed 50,000 ``Match`` objects however large each was:
    10x the limit on matches of ~90 events took 1.9x the peak. It now cuts the engine's
    own batches."""
    log = blocks_csv(tmp_path / "l.csv", 2, 100)
    query = "A+ ; B WITHIN 100 EVENTS"  # 2^99 - 1 matches at the first B
    peaks, rows = [], []
    for n in (1_000, 10_000):
        out = tmp_path / f"l{n}.parquet"
        peaks.append(peak_mb(CER, "match", "-e", query, str(log), "--limit", str(n),
                             "-o", str(out)))
        rows.append(pl.read_parquet(out, columns=["match"])["match"].n_unique())
    assert rows == [1_000, 10_000]
    a, b = peaks
    assert b < 1.4 * a, f"peak RSS {a} MB for --limit 1000, {b} MB for --limit 10000"


def test_limit_output_is_the_head_of_the_full_output(tmp_path):
    """The limit cuts one of the engine's batches: what is written is exactly the first N
    matches of the full run, in both shapes, and ``--count --limit N`` counts them."""
    log = blocks_csv(tmp_path / "l.csv", 2, 14)  # 8,191 matches per B: two batches
    query = ["match", "-e", "A+ ; B WITHIN 14 EVENTS", str(log)]
    for shape in ("long", "wide"):
        jsonl = [*query, "--format", "jsonl", "--shape", shape]
        full = CliRunner().invoke(cli, jsonl).output.splitlines()
        assert len(full) == 2 * 8_191
        # 8,000 cuts the first batch, 9,000 the second
        for n in (0, 1, 8_000, 9_000, 20_000) if shape == "long" else (9_000,):
            got = CliRunner().invoke(cli, [*jsonl, "--limit", str(n)]).output.splitlines()
            assert got == full[:n]
    for n in (9_000, 20_000):
        count = CliRunner().invoke(cli, [*query, "--count", "--limit", str(n)])
        assert count.output.strip() == str(min(n, 2 * 8_191))


def test_first_matches_cuts_the_batch_that_reaches_the_limit():
    from cer_cli.events import first_matches

    ms = [Match(i, i, ((i, ("x",)),)) for i in range(10)]
    batches = [batch_of(ms[:4]), batch_of(ms[4:4]), batch_of(ms[4:10])]
    for n in range(12):
        got = [m for b in first_matches(iter(batches), n) for m in b.matches()]
        assert got == ms[:n]


# --------------------------------------------------------------------------- progress bar


def test_progress_bar_advances_during_one_slices_enumeration(tmp_path, monkeypatch):
    """One slice of the log (fewer than ``SLICE_ROWS`` events) whose enumeration yields many
    of the engine's batches: the bar moves with each batch — matches written and the event
    being enumerated — instead of staying at 0 until the slice ends."""
    from rich.progress import Progress

    updates: list[tuple[int, int]] = []
    real = Progress.update

    def update(self, task, **fields):
        if "matches" in fields:
            updates.append((fields["completed"], fields["matches"]))
        return real(self, task, **fields)

    monkeypatch.setattr(Progress, "update", update)
    log = blocks_csv(tmp_path / "p.csv", 10, 14)  # 140 events, 8,191 matches per B
    assert 140 < driver.SLICE_ROWS
    out = CliRunner().invoke(cli, ["match", "-e", "A+ ; B WITHIN 14 EVENTS", str(log),
                                   "--format", "jsonl", "-o", str(tmp_path / "o.jsonl"),
                                   "--progress"])
    assert out.exit_code == 0, out.output
    during = [(e, m) for e, m in updates if 0 < m < 81_910]
    assert len(during) >= 5, updates
    assert any(e < 140 for e, _ in during), updates  # events advance within the slice
    assert [m for _, m in updates] == sorted(m for _, m in updates)
    assert [e for e, _ in updates] == sorted(e for e, _ in updates)
    assert updates[-1] == (140, 81_910)
    assert sum(1 for _ in open(tmp_path / "o.jsonl")) == 81_910
    assert json.loads(open(tmp_path / "o.jsonl").readline())["end"] == 13
    updates.clear()  # with --limit, the bar counts the matches written, not the batch's
    out = CliRunner().invoke(cli, ["match", "-e", "A+ ; B WITHIN 14 EVENTS", str(log),
                                   "--format", "jsonl", "--limit", "100", "--progress"])
    assert out.exit_code == 0 and max(m for _, m in updates) == 100, updates


@pytest.mark.parametrize("query, events, horizon, per_key", [
    ("A ; B WITHIN 5 EVENTS", 5, None, None),
    ("A ; B PARTITION BY [id] WITHIN 5 EVENTS", None, None, (5, None, (("id",),))),
    ("SELECT * FROM S, T WHERE A ; B PARTITION BY [id, j] WITHIN 2 EVENTS", None, None,
     (2, frozenset("ST"), (("id", "j"),))),
    ("A ; B WITHIN 2 seconds", None, ("__cer_time", 2_000_000_000), None),
    ("A ; B WITHIN 3 [v]", None, ("v", 3), None),
    ("SELECT * FROM S WHERE A ; B WITHIN 2 EVENTS", None, None, (2, frozenset("S"), ())),
    # a trailing absence reports its match at the first event past the deadline: one more
    # event back, or the time window back from the event before the newest frame
    ("A ; !B WITHIN 5 EVENTS", 6, None, None),
    ("A ; !B PARTITION BY [id] WITHIN 5 EVENTS", None, None, (6, None, (("id",),))),
    ("A ; !B WITHIN 2 seconds", None, ("__cer_time", 2_000_000_000), None),
    # a key (or FROM's streams) may have seen its latest event anywhere back: per key
    ("A ; !B PARTITION BY [id] WITHIN 2 seconds", None, None,
     (None, None, (("id",),), ("__cer_time", 2_000_000_000))),
    ("SELECT * FROM S WHERE A ; !B WITHIN 3 [ts]", None, None,
     (None, frozenset("S"), (), ("ts", 3))),
    ("A ; B", None, None, None),
])
def test_the_plan_says_how_much_of_the_log_the_output_keeps(query, events, horizon, per_key):
    """``Plan.output_window``: the writers' lookup keeps what the window bounds (with
    PARTITION BY or FROM, an EVENTS window counts the events of a key, or of the streams),
    and every event when nothing does."""
    from cer_cli.api import compile_query
    from cer_cli.events import TIME

    window = compile_query(query).output_window
    assert window.events == events
    got = window.per_key
    if got is not None and got.horizon is not None:
        got_key = (got.count, got.streams, got.partition_by,
                   (TIME if got.horizon[0] == TIME else got.horizon[0], got.horizon[1]))
        assert got_key == (per_key[:3] + ((TIME if per_key[3][0] == "__cer_time"
                                           else per_key[3][0], per_key[3][1]),))
    else:
        assert (None if got is None else (got.count, got.streams, got.partition_by)) == per_key
    assert window.horizon == (None if horizon is None else
                              (TIME if horizon[0] == "__cer_time" else horizon[0], horizon[1]))
    assert window.lagged == ("!" in query and horizon is not None)


# --------------------------------------------------------------------------- lookup per key


def _keyed_log(path: Path, keys: list[str], types: list[str]) -> Path:
    pl.DataFrame({"type": types, "k": keys, "ts": range(len(keys))}).write_csv(path)
    return path


@given(data=st.data(), n=st.integers(1, 4), rows=st.sampled_from([1, 3, 7]),
       join=st.sampled_from([1, 10_000]),
       query=st.sampled_from(["A AS a ; B AS b PARTITION BY [k] WITHIN {n} EVENTS",
                              "A ; B+ ; C PARTITION BY [k] WITHIN {n} EVENTS",
                              "SELECT b WHERE A AS a ; B AS b PARTITION BY [k] WITHIN {n} EVENTS",
                              "A ; B+ WITHIN {n} EVENTS"]))
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_the_lookup_keeps_each_keys_last_events_and_finds_every_matchs(tmp_path_factory, data,
                                                                       n, rows, join, query):
    """``PARTITION BY … WITHIN n EVENTS``: the writers' lookup (``per_key``) drops the frames
    before the matches still to come and keeps only each key's last events of them. Every
    event of every match is still found (as a lookup of the whole log finds it), by one
    driver and by the pool, and what the lookup holds stays within the frames at hand plus
    n + 2 events per key, however rare a key (here ``z``) and however long the log. The same
    for ``WITHIN n EVENTS`` alone (the last n events and the slice run), also when the pool
    joins matches of many frames into one batch (``join``): ``EventLookup.follow`` cuts it."""
    from cer_cli.api import compile_query
    from cer_cli.cli import _lookup_bounds
    from cer_cli.io.lookup import EventLookup
    from cer_cli.plan import pool

    size = data.draw(st.integers(1, 90))
    keys = data.draw(st.lists(st.sampled_from("xxxyyz"), min_size=size, max_size=size))
    types = data.draw(st.lists(st.sampled_from("ABCD"), min_size=size, max_size=size))
    log = _keyed_log(tmp_path_factory.mktemp("k") / "log.csv", keys, types)
    whole = read_events([str(log)], batch_size=None)
    compiled = compile_query(query.format(n=n), schema=whole.schema)
    everything = EventLookup.for_log(whole)
    for frame in whole.batches():
        everything.add(frame)
    for jobs in (1, 2):
        events = read_events([str(log)], batch_size=rows)
        window, horizon, per_key, _ = _lookup_bounds(compiled)
        assert (per_key is None) == ("PARTITION" not in query)
        if per_key is None:  # the events window plus the slice the engine runs (here: rows)
            window = n + rows
        lookup = EventLookup.for_log(events, window, horizon, per_key)
        with small_pieces(rows), mock.patch.object(pool, "JOIN_MATCHES", join):
            # each batch is looked up as it comes, as writers do
            if jobs == 1:
                batches = driver.run_batches(compiled.executor(), lookup.tap(events.batches()))
            else:
                batches = pool.run_batches(compiled, events.batches(), 2, None, lookup.follow)
            # with one driver: the frame being run and the one before it, or as many as the
            # events window needs besides
            _look_up(batches, lookup, everything, 2 * rows + (window or 0) if jobs == 1 else None,
                     3 * (n + 2))


@given(data=st.data(), n=st.integers(1, 4), rows=st.sampled_from([1, 3, 7]),
       query=st.sampled_from(["A ; B ; !C WITHIN {n} EVENTS",
                              "A AS a ; !C PARTITION BY [k] WITHIN {n} EVENTS",
                              "A ; B+ ; !(C AS c FILTER c.k = 'z') WITHIN {n} [ts]",
                              "A AS a ; B ; !C PARTITION BY [k] WITHIN {n} [ts]",
                              "SELECT * FROM S WHERE A ; !C WITHIN {n} [ts]",
                              "SELECT * FROM S WHERE A ; B+ WITHIN {n} EVENTS",
                              "SELECT * FROM S WHERE A ; !C WITHIN {n} EVENTS"]))
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_the_lookup_finds_trailing_absences_and_streams_matches(tmp_path_factory, data, n, rows,
                                                                query):
    """A trailing absence's match ends at the first event past its deadline, however long
    after its window (time with gaps here), and ``FROM S`` counts only S's events in a
    window: the writers' lookup still finds every event of every match as a lookup of the
    whole log finds it, by one driver and by the pool, and one driver's holds a few frames
    for the EVENTS windows and per key (a time window without PARTITION BY or FROM keeps
    the frames its span covers, following the gaps)."""
    from cer_cli.api import compile_query
    from cer_cli.cli import _lookup_bounds
    from cer_cli.io.lookup import EventLookup
    from cer_cli.plan import pool

    size = data.draw(st.integers(1, 90))
    draw = lambda values: data.draw(st.lists(st.sampled_from(values), min_size=size,  # noqa: E731
                                              max_size=size))
    gaps = data.draw(st.lists(st.sampled_from([0, 1, 1, 2, 9]), min_size=size, max_size=size))
    log = pl.DataFrame({"type": draw("ABCD"), "k": draw("xxxyyz"), "ts": np.cumsum(gaps),
                        "s": draw("SST")})
    where = tmp_path_factory.mktemp("s")
    paths = []
    for name in "ST":
        paths.append(str(where / f"{name}.csv"))
        log.filter(pl.col("s") == name).drop("s").write_csv(paths[-1])
    whole = read_events(paths, batch_size=None)
    compiled = compile_query(query.format(n=n), schema=whole.schema)
    everything = EventLookup.for_log(whole)
    for frame in whole.batches():
        everything.add(frame)
    from cer_cli.plan.fanout import PARTITION, RANGES

    widest = max(f.height for f in read_events(paths, batch_size=rows).batches())
    for jobs in (1, 2) if compiled.fanout.kind in (PARTITION, RANGES) else (1,):
        events = read_events(paths, batch_size=rows)
        window, horizon, per_key, lagged = _lookup_bounds(compiled)
        assert lagged == (horizon is not None)
        if window is not None:  # the events window plus the slice the engine runs (here: rows)
            window = window - driver.SLICE_ROWS + rows
        lookup = EventLookup.for_log(events, window, horizon, per_key, lagged)
        with small_pieces(rows):
            if jobs == 1:
                batches = driver.run_batches(compiled.executor(), lookup.tap(events.batches()))
            else:
                batches = pool.run_batches(compiled, events.batches(), 2, None, lookup.follow)
            # frames of both logs: up to 2 × rows; per key by time, events of one time are
            # as many as the log draws
            bounded = jobs == 1 and horizon is None
            timed = per_key is not None and per_key.horizon is not None
            _look_up(batches, lookup, everything, 2 * widest + (window or 0) if bounded else None,
                     size if timed else 3 * (n + 3))


def test_a_trailing_absences_match_after_a_gap_in_time_is_written(tmp_path):
    """``A ; !B WITHIN 5 [ts]``: an A at 0, then nothing until 100, which reports it (the
    first event past its deadline). In frames of one event the lookup must keep the A
    across the gap (its horizon counts back from the event before the newest frame, not
    from the newest frame), and still drops what no match can reach."""
    pl.DataFrame({"type": ["C", "A", "C", "C", "C", "C"], "ts": [0, 0, 100, 101, 102, 103]}
                 ).write_csv(tmp_path / "log.csv")
    for args in ([], ["--jobs", "2"]):
        out = CliRunner().invoke(cli, ["match", "-e", "A ; !B WITHIN 5 [ts]",
                                       str(tmp_path / "log.csv"), "--format", "jsonl", *args])
        assert out.exit_code == 0, out.output
        assert [json.loads(line)["end"] for line in out.output.splitlines()] == [2]
    from cer_cli.api import compile_query
    from cer_cli.cli import _lookup_bounds
    from cer_cli.io.lookup import EventLookup

    log = read_events([str(tmp_path / "log.csv")], batch_size=1)
    compiled = compile_query("A ; !B WITHIN 5 [ts]", schema=log.schema)
    lookup = EventLookup.for_log(log, *_lookup_bounds(compiled))
    ends = []
    for batch in driver.run_batches(compiled.executor(), lookup.tap(log.batches())):
        ends += batch.end.tolist()
        assert lookup.get(1).type == "A"
    assert ends == [2]
    assert lookup._frames[0][0] == 2  # the events at 0 left once 101 and 102 came


def _look_up(batches, lookup, everything, held_at_most: int | None, pinned_at_most: int) -> None:
    from cer_cli.events import POS, TIME, TYPE
    from cer_cli.io.lookup import gather

    for batch in batches:
        cols = [POS, TYPE, "k", TIME]
        assert gather(lookup, batch.pos, cols).equals(gather(everything, batch.pos, cols))
        for p in batch.pos.tolist():
            assert lookup.get(p) == everything.get(p)
            assert lookup.time_of(p) == everything.time_of(p)
        held = sum(f.height for _, f in lookup._frames)
        pinned = 0 if lookup._pinned is None else lookup._pinned.height
        if held_at_most is not None:
            assert held <= held_at_most and pinned <= pinned_at_most, (held, pinned)


@pytest.mark.parametrize("query", ["A ; B PARTITION BY [k] WITHIN 2 EVENTS",
                                   "A ; !B WITHIN 20 [ts]",
                                   "A ; !B PARTITION BY [k] WITHIN 20 [ts]"])
def test_an_output_run_keeps_memory_flat_as_the_log_grows(tmp_path, query):
    """``-o`` over a log read in batches of 2,000 events with a 600-byte text per event:
    the lookup used to keep every frame for a partitioned EVENTS window (10M events, 100
    keys: 1.3 GB), now each key's last events; and for a trailing absence (whose match is
    reported after its window), now the window before the latest event read (of each key,
    under PARTITION BY). Peak RSS at
    20,000 and 180,000 events: the same, where the frames alone are ~100 MB."""
    code = ("import sys; from cer_cli.io import read; read.READ_ONCE_BYTES = 0;"
            " import cer_cli.cli as c; c.BATCH_ROWS = 2000; sys.argv[0] = 'cer'; c.main()")
    rng = np.random.default_rng(3)
    peaks = []
    for size in (20_000, 180_000):
        log = tmp_path / f"log{size}.parquet"
        types = np.where(rng.random(size) < 0.01, "B", np.array(list("ACD"))[rng.integers(0, 3, size)])
        pl.DataFrame({"type": types, "ts": np.arange(size), "k": rng.integers(0, 10, size),
                      "text": [f"{i:0600d}" for i in range(size)]}).write_parquet(
            log, row_group_size=2000)  # the reader holds a row group
        out = tmp_path / f"out{size}.jsonl"
        peaks.append(peak_mb(code, "match", "-e", query, str(log), "-o", str(out), "--jobs", "1"))
        assert out.stat().st_size > 0
    a, b = peaks
    assert b < a + 40, f"peak RSS {a} MB at 20,000 events, {b} MB at 180,000"


@pytest.mark.parametrize("query, window", [
    ("A ; B PARTITION BY [k] WITHIN 2 EVENTS", None),
    ("A ; B+ WITHIN 3 EVENTS", 3),
    ("A ; B WITHIN 4 [ts]", None),
    ("A ; !B WITHIN 4 [ts]", None),  # reported after its window: the horizon lags a frame
    ("A ; !B PARTITION BY [k] WITHIN 4 [ts]", None),  # per key, by time
])
@pytest.mark.parametrize("as_objects", [True, False])
def test_the_lookup_follows_matches_found_elsewhere(tmp_path, query, window, as_objects):
    """``EventLookup.follow`` (``--spark`` printing: Spark finds the matches, the driver
    reads the log only to print their events): fed the log in frames of 5 as far as the
    matches reach, it finds every event of every match, given as ``Match`` objects or as
    batches, and holds a few frames, not the log."""
    from cer_cli.api import compile_query
    from cer_cli.cli import _lookup_bounds
    from cer_cli.events import POS, TYPE, as_matches
    from cer_cli.io.lookup import EventLookup, gather

    rng = np.random.default_rng(5)
    n = 400
    types = np.where(rng.random(n) < 0.05, "B", np.array(list("ACD"))[rng.integers(0, 3, n)])
    log = _keyed_log(tmp_path / "log.csv", list(np.array(list("xxyz"))[rng.integers(0, 4, n)]),
                     list(types))
    whole = read_events([str(log)])
    compiled = compile_query(query, schema=whole.schema)
    everything = EventLookup.for_log(whole)
    everything.add(whole.frame())
    found = list(driver.run_batches(compiled.executor(), whole.frame()))
    matches = list(as_matches(found)) if as_objects else found
    events = read_events([str(log)], batch_size=5)
    bounds = _lookup_bounds(compiled)
    lookup = EventLookup.for_log(events, window, *bounds[1:])
    seen = held = 0
    for batch in lookup.follow(events.batches(), matches):
        cols = [POS, TYPE, "k"]
        assert gather(lookup, batch.pos, cols).equals(gather(everything, batch.pos, cols))
        seen += len(batch)
        held = max(held, sum(f.height for _, f in lookup._frames))
    assert seen == sum(len(b) for b in found) > 10
    assert held <= 15, held
