"""`cer plot`: the picture of the matches, counted mark by mark.

The PNG is decoded and its marks counted by colour (connected groups of pixels of each
mark's colour, ``cer_cli.io.plot``'s ``*_COLOR``); the HTML is opened in a real headless
Chromium (Debian's package; skipped when it is absent, `.ci/run` installs it), whose DOM and
screenshot are counted the same way. Without the ``plot`` extra the command says how to
install it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import polars as pl
import pytest

pytest.importorskip("matplotlib", reason="cer plot needs the plot extra (matplotlib)")

from cer_cli.io import plot as P  # noqa: E402
from tests import peak  # noqa: E402
from tests.builders import run  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(b)), None)

#: Three partitions with 1, 2 and 3 matches of `A ; B` (10 minutes each, an hour apart):
#: 6 matches, 12 events, 3 rows.
QUERY = "A AS a ; B AS b PARTITION BY [key] WITHIN 15 minutes"
MATCHES, EVENTS, ROWS = 6, 12, 3


def _log(tmp_path: Path) -> Path:
    lines = ["type,key,ts"]
    for key, n in (("k1", 1), ("k2", 2), ("k3", 3)):
        for i in range(n):
            lines.append(f"A,{key},2024-01-01T{i * 2:02d}:{10 * int(key[1]):02d}:00")
            lines.append(f"B,{key},2024-01-01T{i * 2:02d}:{10 * int(key[1]) + 10:02d}:00")
    path = tmp_path / "events.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _rgb(hex_colour: str) -> np.ndarray:
    return np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.int64)


def _mask(image: np.ndarray, *colours: str, tol: int = 16) -> np.ndarray:
    rgb = image[..., :3].astype(np.int64)
    out = np.zeros(rgb.shape[:2], dtype=bool)
    for c in colours:
        out |= (np.abs(rgb - _rgb(c)) <= tol).all(axis=-1)
    return out


def components(mask: np.ndarray, min_pixels: int = 4) -> int:
    """Groups of 8-connected pixels of ``mask`` (of at least ``min_pixels``: anti-aliased
    specks of text are not marks)."""
    seen = np.zeros_like(mask)
    count = 0
    height, width = mask.shape
    for y0, x0 in zip(*np.nonzero(mask), strict=True):
        if seen[y0, x0]:
            continue
        seen[y0, x0] = True
        stack, size = [(y0, x0)], 0
        while stack:
            y, x = stack.pop()
            size += 1
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    v, u = y + dy, x + dx
                    if 0 <= v < height and 0 <= u < width and mask[v, u] and not seen[v, u]:
                        seen[v, u] = True
                        stack.append((v, u))
        count += size >= min_pixels
    return count


def _png(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def _grown(mask: np.ndarray) -> np.ndarray:
    """``mask`` grown by a pixel: a bar and its ticks stay one mark across the seam of
    blended pixels a browser draws between them."""
    out = mask.copy()
    out[1:] |= mask[:-1]
    out[:-1] |= mask[1:]
    out[:, 1:] |= out[:, :-1].copy()
    out[:, :-1] |= out[:, 1:].copy()
    return out


def _marks(image: np.ndarray) -> tuple[int, int, int]:
    """(matches: a bar with its ticks, events: ticks, rows: bars of the matches per row)."""
    return (components(_grown(_mask(image, P.MATCH_COLOR, P.EVENT_COLOR))),
            components(_mask(image, P.EVENT_COLOR)),
            components(_mask(image, P.ROW_COLOR)))


def test_png_renders_one_mark_per_match_event_and_row(tmp_path):
    out = tmp_path / "m.png"
    result = run("plot", "-e", QUERY, str(_log(tmp_path)), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert f"{MATCHES} matches plotted to" in result.output
    image = _png(out)
    assert image.shape[1] == P.WIDTH * P.DPI
    assert _marks(image) == (MATCHES, EVENTS, ROWS)


def test_svg_holds_a_group_and_a_tooltip_per_match(tmp_path):
    out = tmp_path / "m.svg"
    assert run("plot", "-e", QUERY, str(_log(tmp_path)), "-o", str(out)).exit_code == 0
    text = out.read_text()
    root = ET.fromstring(text)  # well-formed XML
    ns = {"s": "http://www.w3.org/2000/svg"}
    groups = [g for g in root.iter(f"{{{ns['s']}}}g") if g.get("id", "").startswith("cer-match-")]
    assert len(groups) == MATCHES
    tips = [g.find("s:title", ns).text for g in groups]
    assert "match 0: 2024-01-01T00:10:00+00:00 → 2024-01-01T00:20:00+00:00 · key=k1" in tips
    events = next(g for g in root.iter(f"{{{ns['s']}}}g") if g.get("id") == "cer-events")
    assert len(events.findall("s:path", ns)) == EVENTS
    assert "key=k3" in text and "ts (UTC)" in text  # text stays text


def _chromium(*args: str) -> subprocess.CompletedProcess:
    """Headless Chromium with every network path closed: the page must need none."""
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--hide-scrollbars", "--proxy-server=127.0.0.1:9",
             f"--user-data-dir={profile}", *args],
            capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install chromium): the"
                    " HTML is not opened in a browser here")
def test_html_renders_in_a_headless_browser_with_its_marks(tmp_path):
    out = tmp_path / "m.html"
    assert run("plot", "-e", QUERY, str(_log(tmp_path)), "-o", str(out)).exit_code == 0
    page = out.read_text()
    assert "<script" not in page and not re.search(r'(src|href)="(?!#)', page)
    url = out.as_uri()
    dom = _chromium("--virtual-time-budget=2000", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert len(re.findall(r'<g id="cer-match-\d+"><title>match \d+: ', html)) == MATCHES
    ticks = re.search(r'<g id="cer-events">(.*?)</g>', html, re.S)
    assert ticks and ticks.group(1).count("<path") == EVENTS
    assert len(re.findall(r'<g id="cer-row-\d+">', html)) == ROWS
    assert "<figcaption><p>Each bar is a match" in html
    shot = tmp_path / "shot.png"
    done = _chromium("--window-size=1300,1200", f"--screenshot={shot}", url)
    assert shot.exists(), done.stderr[-2000:]
    assert _marks(_png(shot)) == (MATCHES, EVENTS, ROWS)


def _many(n: int, partitions: int, seed: int = 0) -> P.Timeline:
    """``n`` matches of an hour at most over a day: 20 partitions with 3,000 each, the rest
    spread over the other ``partitions - 20``."""
    rng = np.random.default_rng(seed)
    top = np.repeat(np.arange(20), 3_000)
    rest = 20 + rng.integers(0, partitions - 20, n - len(top))
    start = rng.integers(0, 86_400, n) * 1_000_000_000 + 1_700_000_000_000_000_000
    dur = rng.integers(0, 3_600, n) * 1_000_000_000
    frame = pl.DataFrame({
        "match": np.arange(n), "row": [f"key=p{r}" for r in np.concatenate([top, rest])],
        "x0": start.astype(np.float64), "x1": (start + dur).astype(np.float64)})
    return P.Timeline(frame, None, "datetime", "ts (UTC)", "partition", None, 2 * n)


def test_100000_matches_are_aggregated_and_the_figure_says_what_it_left_out(tmp_path):
    drawing = P.draw(_many(100_000, 300), "many")
    assert not drawing.detail and not drawing.tips
    notes = " ".join(drawing.notes)
    assert "100,000 matches are aggregated" in notes and "are not drawn" in notes
    assert "the other 280 (40,000 matches) are merged into the row 'others (280)'" in notes
    out = tmp_path / "many.png"
    out.write_bytes(P.render(drawing, "png"))
    image = _png(out)
    assert components(_mask(image, P.EVENT_COLOR)) == 0  # no event tick, no single match
    assert not [a for a in drawing.figure.axes[0].patches if a.get_gid()]
    assert components(_mask(image, P.ROW_COLOR)) == P.MAX_ROWS + 1
    density = [c for c in drawing.figure.axes[0].collections if c.get_gid() == "cer-density"]
    assert len(density) == 1 and density[0].get_array().sum() >= 100_000


def test_overlapping_matches_get_lanes_and_too_many_lanes_become_a_density():
    """Nested matches in one row (all start together) each take a lane; past ``MAX_LANES``
    lanes the row would be unreadable, so the timeline is a density though the matches are
    few."""
    def nested(n):
        frame = pl.DataFrame({"match": np.arange(n), "row": ["s"] * n,
                              "x0": np.zeros(n), "x1": np.arange(1, n + 1, dtype=np.float64)})
        events = pl.DataFrame({"match": np.arange(n), "x": np.zeros(n)})
        return P.Timeline(frame, events, "position", "position", "stream", None, n)

    small = P.draw(nested(10))
    assert small.detail and len(small.tips) == 10
    crowded = P.draw(nested(P.MAX_LANES + 1))
    assert not crowded.detail
    assert f"would need {P.MAX_LANES + 1} lanes" in " ".join(crowded.notes)


def test_rows_are_streams_without_partitions_and_x_is_the_position_without_time(tmp_path):
    clicks = tmp_path / "clicks.csv"
    clicks.write_text("user\n1\n2\n")
    orders = tmp_path / "orders.csv"
    orders.write_text("user\n1\n")
    out = tmp_path / "m.svg"
    result = run("plot", "-e", "Click ; Order", f"Click={clicks}", f"Order={orders}",
                 "-o", str(out))
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "Click + Order" in text and "position in the stream" in text
    assert len(re.findall(r'<g id="cer-match-\d+">', text)) == 2


def test_no_match_still_draws_a_figure_that_says_so(tmp_path):
    out = tmp_path / "m.png"
    result = run("plot", "-e", "A ; A ; A ; A PARTITION BY [key]", str(_log(tmp_path)),
                 "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "0 matches plotted" in result.output
    assert _png(out).shape[1] == P.WIDTH * P.DPI


def test_unknown_output_extension_is_refused_before_running(tmp_path):
    out = tmp_path / "m.pdf"
    result = run("plot", "-e", QUERY, str(_log(tmp_path)), "-o", str(out))
    assert result.exit_code == 2
    assert "error: cannot tell the plot format from" in result.output
    assert "name the file .html, .png or .svg, or give --format html|png|svg" in result.output
    assert "Traceback" not in result.output and not out.exists()
    assert not list(tmp_path.glob(".*.part"))
    # --format decides for any name, and '-' writes to standard output
    result = run("plot", "-e", QUERY, str(_log(tmp_path)), "-o", "-", "--format", "svg")
    assert result.exit_code == 0 and result.output.lstrip().startswith("<?xml"), result.output


def test_output_naming_an_input_is_refused(tmp_path):
    log = _log(tmp_path)
    before = log.read_text()
    result = run("plot", "-e", QUERY, str(log), "-o", str(log), "--format", "png")
    assert result.exit_code == 2 and "it is an input" in result.output
    assert log.read_text() == before


def test_without_matplotlib_it_says_how_to_install_it(tmp_path):
    probe = ("import runpy, sys\n"
             "sys.modules['matplotlib'] = None  # as if the plot extra were not installed\n"
             "sys.argv = ['cer'] + sys.argv[1:]\n"
             "runpy.run_module('cer_cli', run_name='__main__')\n")
    out = tmp_path / "m.png"
    proc = subprocess.run([sys.executable, "-c", probe, "plot", "-e", QUERY,
                           str(_log(tmp_path)), "-o", str(out)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[:2] == [
        "error: cer plot needs matplotlib, which is not installed",
        "  hint: install the plot extra: pip install 'cer-cli[plot]'",
    ]
    assert not out.exists()


def test_time_in_a_zone_and_numeric_time(tmp_path):
    """Times show in the time column's zone (axis label and tooltips); a numeric time column
    without a unit is its own axis and duration unit."""
    import datetime as dt

    zoned = tmp_path / "tz.parquet"
    pl.DataFrame({"type": ["A", "B"], "ts": [dt.datetime(2024, 3, 1, 7), dt.datetime(2024, 3, 1, 8)]}
                 ).with_columns(pl.col("ts").dt.replace_time_zone("Europe/Paris")).write_parquet(zoned)
    out = tmp_path / "tz.svg"
    assert run("plot", "-e", "A ; B", str(zoned), "-o", str(out)).exit_code == 0
    text = out.read_text()
    assert "match 0: 2024-03-01T07:00:00+01:00 → 2024-03-01T08:00:00+01:00 · tz" in text
    assert "ts (Europe/Paris)" in text and "match duration (minutes)" in text
    numeric = tmp_path / "num.csv"
    numeric.write_text("type,t\nA,1\nB,3.5\n")
    out = tmp_path / "num.svg"
    assert run("plot", "-e", "A ; B", str(numeric), "--time-column", "t",
               "-o", str(out)).exit_code == 0
    text = out.read_text()
    assert "match 0: 1 → 3.5 · num" in text and "match duration (t)" in text


def test_ctrl_c_stops_a_plot_and_leaves_the_old_file(tmp_path):
    """`A+ ; B` over 3,000 A's never ends; SIGINT stops it with one line and exit 130, and the
    picture is written only at the end, so an existing file stays as it was."""
    import signal

    pl.DataFrame({"type": ["A"] * 3_000 + ["B"]}).write_csv(tmp_path / "log.csv")
    out = tmp_path / "m.png"
    out.write_bytes(b"old")
    proc = subprocess.Popen([sys.executable, "-m", "cer_cli", "plot", "-e", "A+ ; B", "log.csv",
                             "-o", "m.png"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "NO_COLOR": "1"})
    import threading

    deadline = threading.Timer(240, proc.kill)  # a hang fails the test instead of blocking it
    deadline.start()
    try:
        line = proc.stderr.readline()  # the growth warning: the run is starting
        assert "warning" in line, line + proc.stderr.read()
        proc.stderr.readline()  # its hint
        time.sleep(0.5)  # into the enumeration
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        deadline.cancel()
        proc.kill()
    assert proc.returncode == 130 and err.strip().splitlines()[-1] == "interrupted", err
    assert "Traceback" not in err and out.read_bytes() == b"old"
    assert not list(tmp_path.glob(".*.part"))


#: Feeds ``collect`` N synthetic matches (2 events each, 300 partitions, no time column)
#: with the sample cut to 100,000, then prints its peak RSS (KB).
_COLLECT = peak.SELF_PEAK_DEF + """
import sys
import numpy as np
from cer_cli.events import MatchBatch
from cer_cli.io import plot as P
from cer_cli.io.write import EventLookup

P.SAMPLE_MATCHES = 100_000
n, size = int(sys.argv[1]), 16_384
keys = {i: (f"k{i}",) for i in range(300)}

def batches():
    for first in range(0, n, size):
        k = min(size, n - first)
        start = np.arange(first, first + k, dtype=np.int64) * 2
        yield MatchBatch(start, start + 1, start % 300, np.arange(k + 1, dtype=np.int64) * 2,
                         np.stack([start, start + 1], 1).ravel(), np.zeros(2 * k, np.int64),
                         (("x",),), keys)

tl = P.collect(batches(), EventLookup(columns=()))
assert tl.total == n and tl.matches.height == min(n, 100_000), tl
assert tl.per_row["n"].sum() == n
print(_self_peak_kb())
"""


def test_memory_stays_bounded_by_the_sample_not_the_matches():
    """Ten times the matches, the same peak memory: past ``SAMPLE_MATCHES`` the timeline
    keeps a uniform sample and exact counts per row, not every match."""
    def peak(n: int) -> int:
        proc = subprocess.run([sys.executable, "-c", _COLLECT, str(n)], capture_output=True,
                              text=True, timeout=600, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
        return int(proc.stdout.split()[-1])

    small, large = peak(400_000), peak(4_000_000)
    assert large / small < 1.25, (small, large)


def test_the_sample_is_uniform_and_the_counts_exact():
    """Past the sample size every match has the same chance to be drawn: the sample's share
    of each half of the matches is about one half, and each row's count is exact."""
    from cer_cli.events import MatchBatch
    from cer_cli.io.write import EventLookup

    n, kept = 200_000, 10_000
    keys = {0: ("a",), 1: ("b",)}
    start = np.arange(n, dtype=np.int64)
    part = (start % 4 == 0).astype(np.int64)  # a quarter in row b
    batch = MatchBatch(start, start, part, np.arange(n + 1, dtype=np.int64), start,
                       np.zeros(n, np.int64), (("x",),), keys)
    tl = P.collect([batch], EventLookup(columns=()), sample=kept)
    assert tl.total == n and tl.matches.height == kept
    assert dict(tl.per_row.select("row", "n").iter_rows()) == {"key0=a": 150_000, "key0=b": 50_000}
    late = (tl.matches["match"] >= n // 2).mean()
    assert 0.45 < late < 0.55, late
    share_b = (tl.matches["row"] == "key0=b").mean()
    assert 0.22 < share_b < 0.28, share_b
    drawing = P.draw(tl)
    assert "estimated from a uniform sample of 10,000 of the 200,000 matches" in " ".join(
        drawing.notes)
