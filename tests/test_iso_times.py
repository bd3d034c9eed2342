"""ISO time texts are read by their shape: each chunk by its first value's pattern, the
values it leaves unread by every pattern (``io.read._iso_texts``). Checked against a
reader written from the ISO rules in plain Python, on chunks that mix the shapes in any
order, so a value of a shape other than its chunk's first is never lost."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from cer_cli.events import TIME
from cer_cli.io.contract import TimeOptions
from cer_cli.io.read import _parse_datetime, read_events

_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?"
                  r"(Z|[+-]\d{2}:?\d{2})?)?")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def expected_ns(value: str | None) -> int | None:
    """Nanoseconds since 1970 (UTC) of an ISO text, None when it is none."""
    m = None if value is None else _ISO.fullmatch(value.strip())
    if m is None:
        return None
    y, mo, d, h, mi, s, frac, off = m.groups()
    try:
        t = dt.datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0),
                        tzinfo=dt.UTC)
    except ValueError:
        return None
    ns = (t - _EPOCH) // dt.timedelta(microseconds=1) * 1000 + int((frac or "").ljust(9, "0"))
    if off and off != "Z":
        sign = 1 if off[0] == "+" else -1
        ns -= sign * (int(off[1:3]) * 3600 + int(off[-2:]) * 60) * 1_000_000_000
    return ns


@st.composite
def iso_text(draw: st.DrawFn) -> str | None:
    kind = draw(st.sampled_from(["date", "minutes", "seconds", "fraction", "junk", "null"]))
    if kind == "null":
        return None
    if kind == "junk":
        return draw(st.sampled_from(["x", "2024-13-01", "2024-02-30", "01/02/2024", "",
                                     "2024-01-01T10", "2024-01-01T25:00"]))
    y, mo, d = draw(st.integers(1970, 2200)), draw(st.integers(1, 12)), draw(st.integers(1, 28))
    text = f"{y:04d}-{mo:02d}-{d:02d}"
    if kind != "date":
        text += draw(st.sampled_from("T ")) + f"{draw(st.integers(0, 23)):02d}:{draw(st.integers(0, 59)):02d}"
        if kind in ("seconds", "fraction"):
            text += f":{draw(st.integers(0, 59)):02d}"
        if kind == "fraction":
            text += "." + draw(st.text("0123456789", min_size=1, max_size=9))
        text += draw(st.sampled_from(["", "", "Z", "+02:00", "-0530", "+14:00"]))
    return draw(st.sampled_from(["", " "])) + text


@settings(max_examples=200, deadline=None)
@given(st.lists(iso_text(), min_size=1, max_size=30))
def test_each_shape_reads_as_the_iso_rules_say(values: list[str | None]) -> None:
    got = (pl.DataFrame({"t": values}, schema={"t": pl.String})
           .select(_parse_datetime(pl.col("t")).dt.epoch("ns")).to_series().to_list())
    assert got == [expected_ns(v) for v in values]


def test_a_log_whose_shapes_change_between_and_within_batches(tmp_path: Path) -> None:
    """Read in batches of 3 rows: each batch starts with another shape, and holds others."""
    times = ["2024-01-01", "2024-01-01T00:00:01Z", "2024-01-01 00:00:02.5",
             "2024-01-01T00:00:03+00:00", "2024-01-01T00:01", "2024-01-01T00:01:00.000000001",
             "2024-01-01T02:01:00.1+02:00", "2024-01-02", "2024-01-02T00:00:01.25-0100"]
    log = tmp_path / "mixed.csv"
    log.write_text("type,time\n" + "".join(f"A,{t}\n" for t in times))
    events = read_events([str(log)], times=TimeOptions(), batch_size=3)
    got = [t for f in events.batches() for t in f[TIME].to_list()]
    assert got == [expected_ns(t) for t in times]
    assert got == sorted(got)
