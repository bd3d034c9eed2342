"""A picture of the matches (``cer plot``): a timeline, the matches per row, their durations.

A CER result is a set of intervals over time, per partition; people take in thousands of
them faster as a picture than as JSON lines. The figure has three panels:

* the timeline: x is time (the log's time column, or the position in the stream when the
  log has none), one row per partition (per stream, or set of streams, without
  ``PARTITION BY``); each match is a bar from its first to its last event, with a tick per
  reported event, in lanes so that overlapping matches do not hide each other;
* the number of matches per row, beside it;
* a histogram of match durations.

It stays readable at any size: beyond ``DETAIL_MATCHES`` matches (or ``MAX_LANES`` lanes) the
timeline shows how many matches are in progress per time bin and row (a density) instead of
each match, and beyond ``MAX_ROWS`` rows the rest are merged into one "others" row. The
figure says in its caption what was aggregated or left out.

matplotlib draws it (the ``plot`` extra: ``pip install 'cer-cli[plot]'``): PNG and SVG
natively, and HTML as a page around the inline SVG, with no script and no external resource,
so it opens without a network. matplotlib is imported only here, inside functions: ``cer
match`` never loads it. Memory is bounded: a few numbers per match (its row, start and end)
for at most ``SAMPLE_MATCHES`` matches (past that, a uniform sample of them, and exact counts
per row), plus the events' times while there are at most ``DETAIL_MATCHES`` matches.
"""

from __future__ import annotations

import html
import io
import json
import re
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from cer_cli.events import TIME, Match, MatchBatch, as_batches
from cer_cli.io import contract
from cer_cli.io.encoding import partition_json
from cer_cli.io.files import open_output
from cer_cli.io.lookup import EventLookup, event_columns, match_streams
from cer_cli.io.read import LogError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Output file extension -> plot format.
PLOT_FORMATS = {".html": "html", ".htm": "html", ".png": "png", ".svg": "svg"}
#: More matches than this are drawn as a density, not one by one.
DETAIL_MATCHES = 1_000
#: More lanes than this (over all rows) are drawn as a density: a lane would be too thin.
MAX_LANES = 80
#: Rows shown; the others are merged into one row (when there are more than one of them).
MAX_ROWS = 20
#: Time bins of the density.
DENSITY_BINS = 200
#: Matches kept to draw the timeline and the durations from: past it, a uniform sample of
#: this many (reservoir sampling), so that memory stays bounded however many matches come.
SAMPLE_MATCHES = 1_000_000
#: Colours of the marks (tests count the pixels of each, so no other mark uses them).
MATCH_COLOR = "#4c78a8"
EVENT_COLOR = "#d62728"
ROW_COLOR = "#72b7b2"
HIST_COLOR = "#8c8c8c"
#: Width of the figure in inches (at 100 dpi for PNG: 1,200 pixels).
WIDTH = 12.0
DPI = 100
#: The label of the row that merges the partitions (or streams) beyond ``MAX_ROWS``.
OTHERS = "others"


def plot_format(output: str | Path, fmt: str | None = None) -> str:
    """``html``, ``png`` or ``svg``: ``fmt`` if given, else from the extension of ``output``
    (refused with a hint when it has another one)."""
    if fmt is not None:
        return fmt
    suffix = Path(str(output)).suffix.lower()
    if suffix not in PLOT_FORMATS:
        raise LogError(
            f"cannot tell the plot format from {str(output)!r}",
            ["name the file .html, .png or .svg, or give --format html|png|svg"],
        )
    return PLOT_FORMATS[suffix]


def require_matplotlib() -> None:
    """Refuse (``LogError``: exit 2) when the ``plot`` extra is not installed, before any
    work is done."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise LogError(
            "cer plot needs matplotlib, which is not installed",
            ["install the plot extra: pip install 'cer-cli[plot]'"],
        ) from None


# --------------------------------------------------------------------------- the matches


@dataclass(frozen=True)
class Timeline:
    """The matches as the figure needs them.

    ``matches``: one row per match drawn, ``match`` (output number), ``row`` (its
    partition's or streams' label), ``x0``/``x1`` (the time of its first and last event):
    every match, or a uniform sample of ``SAMPLE_MATCHES`` of the ``total``. ``per_row``:
    the exact count of every row (``row``, ``n``, ``first`` match), ``None`` to count
    ``matches``. ``events``: one row per reported event, ``match`` and ``x``; ``None`` when
    there were more than ``DETAIL_MATCHES`` matches (the figure then draws a density and
    needs none). ``x_kind`` says what x is: ``datetime`` (nanoseconds since the epoch, UTC;
    shown in ``time_zone`` when the column has one), ``number`` (a numeric time column, no
    unit) or ``position`` (the position in the stream: the log has no time column)."""

    matches: pl.DataFrame
    events: pl.DataFrame | None
    x_kind: str
    x_label: str
    rows_are: str
    time_zone: str | None = None
    n_events: int = 0
    total: int | None = None
    per_row: pl.DataFrame | None = None


@dataclass
class _Reservoir:
    """A uniform sample of ``size`` of the matches seen (Vitter's algorithm R, seeded: the
    same matches give the same picture), kept as columns; exact counts per row beside it."""

    size: int
    rng: Any = None
    match: Any = None
    row: Any = None
    x0: Any = None
    x1: Any = None
    seen: int = 0
    codes: dict = field(default_factory=dict)  # row label -> code
    counts: list = field(default_factory=list)  # per code: matches
    first: list = field(default_factory=list)  # per code: its first match

    def add(self, frame: pl.DataFrame) -> None:
        import numpy as np

        if self.match is None:
            self.rng = np.random.default_rng(0)
            self.match = np.empty(self.size, np.int64)
            self.row = np.empty(self.size, np.int32)
            self.x0 = np.empty(self.size, np.float64)
            self.x1 = np.empty(self.size, np.float64)
        labels = frame["row"]
        for label, n, first in (frame.group_by("row", maintain_order=True)
                                .agg(pl.len(), pl.col("match").min()).iter_rows()):
            code = self.codes.setdefault(label, len(self.codes))
            if code == len(self.counts):
                self.counts.append(0)
                self.first.append(first)
            self.counts[code] += n
        code = labels.replace_strict(self.codes, return_dtype=pl.Int32).to_numpy()
        cols = (frame["match"].to_numpy(), code, frame["x0"].to_numpy(), frame["x1"].to_numpy())
        k = frame.height
        fill = max(0, min(k, self.size - self.seen))  # the reservoir's first fill
        for dst, src in zip((self.match, self.row, self.x0, self.x1), cols, strict=True):
            dst[self.seen:self.seen + fill] = src[:fill]
        if fill < k:  # then the t-th match replaces a random slot with probability size/t
            t = np.arange(self.seen + fill, self.seen + k, dtype=np.int64) + 1
            slot = (self.rng.random(len(t)) * t).astype(np.int64)
            keep = np.flatnonzero(slot < self.size)
            # the last of several replacements of one slot wins, as in the sequential algorithm
            last = len(keep) - 1 - np.unique(slot[keep][::-1], return_index=True)[1]
            keep = keep[last]
            for dst, src in zip((self.match, self.row, self.x0, self.x1), cols, strict=True):
                dst[slot[keep]] = src[fill:][keep]
        self.seen += k

    def frames(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The sample (in output order) and the counts per row."""
        labels = list(self.codes)
        if not labels:
            empty = pl.DataFrame(schema={"match": pl.Int64, "row": pl.String,
                                         "x0": pl.Float64, "x1": pl.Float64})
            return empty, pl.DataFrame(schema={"row": pl.String, "n": pl.Int64,
                                               "first": pl.Int64})
        kept = min(self.seen, self.size)
        order = self.match[:kept].argsort(kind="stable")
        sample = pl.DataFrame({
            "match": self.match[:kept][order],
            "row": pl.Series(labels, dtype=pl.String)[self.row[:kept][order]],
            "x0": self.x0[:kept][order], "x1": self.x1[:kept][order]})
        per_row = pl.DataFrame({"row": labels, "n": self.counts, "first": self.first},
                               schema={"row": pl.String, "n": pl.Int64, "first": pl.Int64})
        return sample, per_row


def collect(
    matches: Iterable[Match] | Iterable[MatchBatch],
    lookup: EventLookup,
    partition_names: Sequence[str] = (),
    sample: int | None = None,
) -> Timeline:
    """Reduce a stream of matches (as the writers take them) to a ``Timeline``, batch by
    batch: the events' rows are not kept, only their times; past ``sample`` matches
    (``SAMPLE_MATCHES``) a uniform sample of them, and the exact count per row."""
    timed = bool(lookup.time_columns)
    reservoir = _Reservoir(SAMPLE_MATCHES if sample is None else sample)
    per_event: list[pl.DataFrame] | None = []
    n = 0
    rows_are = "stream"
    for batch in as_batches(matches, 16_384):
        if not len(batch):
            continue
        if any(k is not None for k in batch.partitions.values()):
            rows_are = "partition"
        frame, events = _reduce(batch, lookup, n, partition_names, timed)
        reservoir.add(frame)
        n += len(batch)
        if per_event is not None and n <= DETAIL_MATCHES:
            per_event.append(events)
        else:  # a density needs no event: stop keeping them
            per_event = None
    dtype = lookup.time_dtype()  # the type outputs show a match's times in
    names = " / ".join(lookup.time_columns)
    if not timed:
        x_kind, x_label, zone = "position", "position in the stream", None
    elif contract.kind_of(dtype) == "datetime":
        zone = getattr(dtype, "time_zone", None)
        x_kind, x_label = "datetime", f"{names} ({zone or 'UTC'})"
    else:
        x_kind, x_label, zone = "number", names, None
    frame, per_row = reservoir.frames()
    events = None
    if per_event is not None:
        events = (pl.concat(per_event) if per_event
                  else pl.DataFrame(schema={"match": pl.Int64, "x": pl.Float64}))
    return Timeline(frame, events, x_kind, x_label, rows_are, zone, lookup.n_seen, n, per_row)


def _reduce(
    batch: MatchBatch, lookup: EventLookup, first: int, partition_names: Sequence[str],
    timed: bool,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``batch`` as the timeline's rows: per match (number, row label, x0, x1), per event
    (match number, x). x is the engine's TIME (ns for datetimes) or the position."""
    import numpy as np

    k = len(batch)
    start = np.asarray(batch.start, dtype=np.int64)
    end = np.asarray(batch.end, dtype=np.int64)
    pos = np.asarray(batch.pos, dtype=np.int64)
    counts = np.diff(np.asarray(batch.off, dtype=np.int64))
    number = np.arange(first, first + k, dtype=np.int64)
    keys = batch.partitions
    partitioned = any(v is not None for v in keys.values())
    cols = [TIME] if timed else []
    at = np.concatenate([start, end, pos])
    got = event_columns(lookup, at, cols) if cols else pl.DataFrame()
    x = (got[TIME].cast(pl.Float64) if timed
         else pl.Series(at, dtype=pl.Float64))
    if partitioned:
        labels = {p: _partition_label(keys.get(p), partition_names)
                  for p in np.unique(np.asarray(batch.part, dtype=np.int64)).tolist()}
        row = pl.Series(np.asarray(batch.part, dtype=np.int64)).replace_strict(
            labels, return_dtype=pl.String)
    else:
        row = match_streams(batch, lookup)
    matches = pl.DataFrame({"match": number, "row": row, "x0": x[:k], "x1": x[k:2 * k]})
    events = pl.DataFrame({"match": np.repeat(number, counts), "x": x[2 * k:]})
    return matches, events


def _partition_label(key: tuple | None, names: Sequence[str]) -> str:
    """The key as the JSONL ``partition`` object says it: ``name=MSFT, volume=100``."""
    text = partition_json(key, names)
    if text is None:
        return "(no partition)"
    return ", ".join(f"{k}={v}" for k, v in json.loads(text).items())


# --------------------------------------------------------------------------- the figure


@dataclass(frozen=True)
class Drawing:
    """A drawn figure, what it left out (``notes``, also in its caption) and, in detail
    mode, a tooltip text per match (``tips``: the SVG's ``cer-match-N`` groups)."""

    figure: Figure
    notes: tuple[str, ...]
    detail: bool
    tips: dict[int, str]


def draw(timeline: Timeline, title: str = "") -> Drawing:
    """The figure of ``timeline``, titled ``title``."""
    import numpy as np
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import MaxNLocator

    m = timeline.matches
    n = m.height if timeline.total is None else timeline.total
    weight = n / max(m.height, 1)  # each match drawn stands for this many (a sample: > 1)
    subtitle = f"{n:,} match{'' if n == 1 else 'es'}"
    if n == 0:
        fig = Figure(figsize=(WIDTH, 2.4), layout="constrained")
        fig.suptitle(_heading(title, subtitle + f" · {timeline.n_events:,} events"),
                     x=0.01, ha="left")
        ax = fig.add_subplot()
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no match", ha="center", va="center", fontsize=14)
        return Drawing(fig, ("The query found no match.",), False, {})
    per_row = timeline.per_row
    if per_row is None:
        per_row = m.group_by("row", maintain_order=True).agg(
            pl.len().alias("n"), pl.col("match").min().alias("first"))
    rows, notes = _rows(per_row, timeline.rows_are)
    order = rows.unique("shown", maintain_order=True)["shown"].to_list()
    row_of = {r: i for i, r in enumerate(order)}
    index = {r: row_of[v] for r, v in zip(rows["row"].to_list(), rows["shown"].to_list(),
                                          strict=True)}
    ridx = m["row"].replace_strict(index, return_dtype=pl.Int32).to_numpy()
    x0 = _x(timeline, m["x0"].to_numpy())
    x1 = _x(timeline, m["x1"].to_numpy())
    lo, hi = float(x0.min()), float(x1.max())
    if hi <= lo:
        pad = (1 / 1440) if timeline.x_kind == "datetime" else 1.0  # a minute, or 1
        lo, hi = lo - pad, hi + pad
    span = hi - lo
    min_w = span / 500  # ~2 pixels: a match of one instant stays visible
    detail = timeline.events is not None and n <= DETAIL_MATCHES and weight == 1
    lanes, row_lanes = _lanes(ridx, x0, x1, len(order), min_w) if detail else (None, None)
    detail = detail and int(row_lanes.sum()) <= MAX_LANES
    heights = row_lanes if detail else np.ones(len(order), dtype=np.int64)
    total = int(heights.sum())
    tl_h = min(max((0.16 if detail else 0.24) * total + 0.8, 1.8), 12.0)
    fig = Figure(figsize=(WIDTH, tl_h + 2.6 + 0.2 * len(notes)), layout="constrained")
    grid = fig.add_gridspec(2, 2, width_ratios=(5, 1), height_ratios=(tl_h, 2.0))
    ax = fig.add_subplot(grid[0, 0])
    side = fig.add_subplot(grid[0, 1], sharey=ax)
    hist = fig.add_subplot(grid[1, :])
    row_top = np.concatenate([[0], np.cumsum(heights)[:-1]])
    centres = row_top + (heights - 1) / 2
    tips: dict[int, str] = {}
    if detail:
        y = row_top[ridx] + lanes
        numbers = m["match"].to_list()
        for i, mnum in enumerate(numbers):
            a, b = x0[i], x1[i]
            if b - a < min_w:
                a, b = (a + b - min_w) / 2, (a + b + min_w) / 2
            ax.add_patch(Rectangle((a, y[i] - 0.22), b - a, 0.44, facecolor=MATCH_COLOR,
                                   edgecolor="none", gid=f"cer-match-{mnum}"))
            tips[mnum] = _tip(timeline, mnum, m.row(i, named=True))
        ev = timeline.events
        assert ev is not None
        lane_of = dict(zip(numbers, y.tolist(), strict=True))
        ey = np.asarray([lane_of[k] for k in ev["match"].to_list()], dtype=np.float64)
        ex = _x(timeline, ev["x"].to_numpy())
        segments = np.stack([np.stack([ex, ey - 0.38], 1), np.stack([ex, ey + 0.38], 1)], 1)
        ax.add_collection(LineCollection(segments, colors=EVENT_COLOR, linewidths=1.5,
                                         gid="cer-events"))
        notes.insert(0, "Each bar is a match, from its first to its last event; a tick marks"
                        " each event it reports. Overlapping matches get lanes of their own.")
    else:
        edges = np.linspace(lo, hi, DENSITY_BINS + 1)
        density = _density(ridx, x0, x1, len(order), edges) * weight
        mesh = ax.pcolormesh(edges, np.arange(len(order) + 1) - 0.5, _masked(density),
                             cmap="Blues", norm=_norm(density), gid="cer-density",
                             rasterized=True)  # an image in SVG, not a path per cell
        fig.colorbar(mesh, ax=ax, pad=0.01, fraction=0.04,
                     label="matches in progress" + (" (estimated)" if weight > 1 else ""))
        width = _duration_text(timeline, span / DENSITY_BINS)
        why = (f"more than {DETAIL_MATCHES:,} to draw one by one" if row_lanes is None
               else f"they would need {int(row_lanes.sum()):,} lanes (at most {MAX_LANES})")
        notes.insert(0, f"{n:,} matches are aggregated ({why}): the timeline shows how many"
                        f" are in progress in each of {DENSITY_BINS} bins of {width} per row;"
                        " single matches and their events are not drawn.")
        if weight > 1:
            notes.insert(1, f"The timeline and the durations are estimated from a uniform"
                            f" sample of {m.height:,} of the {n:,} matches; the matches per"
                            f" {timeline.rows_are} are counted exactly.")
    for top in row_top[1:]:
        ax.axhline(top - 0.5, color="#dddddd", linewidth=0.8)
    ax.set_ylim(total - 0.5, -0.5)
    ax.set_yticks(centres, [_short(r) for r in order])
    ax.set_xlim(lo - span * 0.01, hi + span * 0.01)
    ax.set_xlabel(timeline.x_label)
    ax.set_title("matches over time", loc="left", fontsize=10)
    _x_axis(ax, timeline)
    sums = dict(rows.group_by("shown").agg(pl.col("n").sum()).iter_rows())
    values = [int(sums[r]) for r in order]
    bars = side.barh(centres, values, height=np.maximum(heights * 0.8, 0.6), color=ROW_COLOR)
    for i, bar in enumerate(bars):
        bar.set_gid(f"cer-row-{i}")
    for c, v in zip(centres, values, strict=True):
        side.text(v, c, f" {v:,}", va="center", fontsize=8)
    side.set_xlim(0, max(values) * 1.3)
    side.tick_params(labelleft=False)
    side.set_xlabel("matches")
    side.set_title(f"matches per {timeline.rows_are}", loc="left", fontsize=10)
    durations = x1 - x0 if timeline.x_kind != "datetime" else (m["x1"] - m["x0"]).to_numpy()
    scale, unit = _duration_unit(timeline, float(np.max(durations)))
    hist.hist(durations / scale, bins=_bins(durations / scale), color=HIST_COLOR,
              weights=np.full(len(durations), weight))
    hist.ticklabel_format(axis="x", useOffset=False, style="plain")
    hist.set_xlabel(f"match duration ({unit})")
    hist.set_ylabel("matches")
    hist.yaxis.set_major_locator(MaxNLocator(integer=True))
    hist.set_title("durations", loc="left", fontsize=10)
    n_rows = rows["row"].n_unique()
    subtitle += (f" · {n_rows:,} {timeline.rows_are}{'' if n_rows == 1 else 's'}"
                 f" · {timeline.n_events:,} events")
    fig.suptitle(_heading(title, subtitle), x=0.01, ha="left")
    caption = "\n".join(textwrap.fill(t, 170) for t in notes)
    fig.supxlabel(caption, x=0.01, ha="left", fontsize=8.5, color="#444444")
    return Drawing(fig, tuple(notes), detail, tips)


def _heading(title: str, subtitle: str) -> str:
    return f"{title}\n{subtitle}" if title else subtitle


def _rows(per_row: pl.DataFrame, rows_are: str) -> tuple[pl.DataFrame, list[str]]:
    """Each row label (``row``, with its ``n`` matches and ``first`` match) with the row it is
    shown in (``shown``): the ``MAX_ROWS`` with the most matches (ties: first match first),
    the rest merged into ``OTHERS``; and a note saying so."""
    counts = per_row.with_columns(pl.col("row").cast(pl.String)).sort(
        ["n", "first"], descending=[True, False])
    notes: list[str] = []
    if counts.height > MAX_ROWS + 1:
        rest = counts.slice(MAX_ROWS)
        label = f"{OTHERS} ({rest.height:,})"
        counts = counts.with_columns(
            pl.when(pl.int_range(pl.len()) < MAX_ROWS).then(pl.col("row"))
            .otherwise(pl.lit(label)).alias("shown"))
        notes.append(f"Rows: the {MAX_ROWS} {rows_are}s with the most matches; the other"
                     f" {rest.height:,} ({int(rest['n'].sum()):,} matches) are merged into"
                     f" the row '{label}'.")
    else:
        counts = counts.with_columns(pl.col("row").alias("shown"))
    return counts, notes


def _lanes(ridx: Any, x0: Any, x1: Any, n_rows: int, gap: float) -> tuple[Any, Any]:
    """A lane per match inside its row, such that matches of one lane are at least ``gap``
    apart (greedy by start: the fewest lanes an interval graph needs); and lanes per row."""
    import heapq

    import numpy as np

    lanes = np.zeros(len(ridx), dtype=np.int64)
    row_lanes = np.ones(n_rows, dtype=np.int64)
    order = np.lexsort((x1, x0, ridx))
    free: list[tuple[float, int]] = []  # (end, lane) of the current row's lanes
    current, used = -1, 0
    for i in order.tolist():
        r = int(ridx[i])
        if r != current:
            if current >= 0:
                row_lanes[current] = max(used, 1)
            current, used, free = r, 0, []
        a, b = float(x0[i]), max(float(x1[i]), float(x0[i]) + gap)
        if free and free[0][0] + gap < a:
            _, lane = heapq.heappop(free)
        else:
            lane, used = used, used + 1
        lanes[i] = lane
        heapq.heappush(free, (b, lane))
    if current >= 0:
        row_lanes[current] = max(used, 1)
    return lanes, row_lanes


def _density(ridx: Any, x0: Any, x1: Any, n_rows: int, edges: Any) -> Any:
    """Matches in progress per (row, bin): a match counts in every bin its interval meets
    (a difference array per row, so O(matches + bins))."""
    import numpy as np

    bins = len(edges) - 1
    width = (edges[-1] - edges[0]) / bins
    b0 = np.clip(((x0 - edges[0]) // width).astype(np.int64), 0, bins - 1)
    b1 = np.clip(((x1 - edges[0]) // width).astype(np.int64), 0, bins - 1)
    diff = np.zeros((n_rows, bins + 1), dtype=np.int64)
    np.add.at(diff, (ridx, b0), 1)
    np.add.at(diff, (ridx, b1 + 1), -1)
    return np.cumsum(diff, axis=1)[:, :bins]


def _masked(density: Any) -> Any:
    import numpy as np

    return np.ma.masked_equal(density, 0)  # empty bins stay white


def _norm(density: Any) -> Any:
    """Logarithmic colours when counts span more than two orders of magnitude."""
    from matplotlib.colors import LogNorm, Normalize

    top = int(density.max()) if density.size else 1
    return LogNorm(1, max(top, 2)) if top > 100 else Normalize(0, max(top, 1))


def _x(timeline: Timeline, values: Any) -> Any:
    """Plot coordinates of x values: matplotlib's day numbers for datetimes (wall time in
    the column's zone), the values themselves otherwise."""
    import numpy as np

    values = np.asarray(values, dtype=np.float64)
    if timeline.x_kind != "datetime":
        return values
    from matplotlib.dates import date2num

    ns = pl.Series(values).cast(pl.Int64).cast(pl.Datetime("ns", "UTC"))
    if timeline.time_zone:
        ns = ns.dt.convert_time_zone(timeline.time_zone)
    return np.asarray(date2num(ns.dt.replace_time_zone(None).to_numpy()), dtype=np.float64)


def _x_axis(ax: Any, timeline: Timeline) -> None:
    if timeline.x_kind == "datetime":
        from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

        locator = AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))


#: Units a duration is shown in: (nanoseconds, name), largest first.
_UNITS = ((86_400e9, "days"), (3_600e9, "hours"), (60e9, "minutes"), (1e9, "seconds"),
          (1e6, "ms"), (1e3, "µs"), (1.0, "ns"))


def _duration_unit(timeline: Timeline, longest: float) -> tuple[float, str]:
    """(divisor, unit name) for durations up to ``longest`` (in x units; ns for datetimes)."""
    if timeline.x_kind == "position":
        return 1.0, "positions, last − first"
    if timeline.x_kind == "number":
        return 1.0, timeline.x_label
    for ns, name in _UNITS:  # 90 seconds rather than 1.5 minutes; 1 second, not 1,000 ms
        if longest >= (2 * ns if ns > 1e9 else ns):
            return ns, name
    return 1e9, "seconds"


def _bins(values: Any) -> Any:
    """A bar per value when the values are a few whole numbers (positions), else up to 40."""
    import numpy as np

    lo, hi = float(values.min()), float(values.max())
    if hi - lo <= 40 and np.array_equal(values, np.round(values)):
        return np.arange(lo - 0.5, hi + 1.5)
    return min(40, max(1, len(np.unique(values))))


def _duration_text(timeline: Timeline, width: float) -> str:
    """A bin width given in plot coordinates (days for datetimes), as text."""
    if timeline.x_kind != "datetime":
        unit = "positions" if timeline.x_kind == "position" else timeline.x_label
        return f"{width:,.4g} {unit}"
    ns = width * 86_400e9
    for size, name in _UNITS:
        if ns >= size:
            return f"{ns / size:,.3g} {name}"
    return f"{ns:.3g} ns"


def _tip(timeline: Timeline, number: int, rec: dict[str, Any]) -> str:
    """A match's tooltip (HTML and SVG): its number, first and last event time, its row."""
    a, b = _x_text(timeline, rec["x0"]), _x_text(timeline, rec["x1"])
    return f"match {number}: {a} → {b} · {rec['row']}"


def _x_text(timeline: Timeline, x: float) -> str:
    if timeline.x_kind == "datetime":
        t = pl.Series([int(x)]).cast(pl.Datetime("ns", "UTC"))
        if timeline.time_zone:
            t = t.dt.convert_time_zone(timeline.time_zone)
        return t[0].isoformat()
    if timeline.x_kind == "position":
        return f"position {int(x)}"
    return f"{x:g}"


def _short(label: str, size: int = 32) -> str:
    return label if len(label) <= size else label[: size - 1] + "…"


# --------------------------------------------------------------------------- files


def render(drawing: Drawing, fmt: str, title: str = "") -> bytes:
    """The figure as a PNG, SVG or HTML file's bytes."""
    import matplotlib

    buffer = io.BytesIO()
    if fmt == "html":  # the page shows the notes as text under the picture instead
        drawing.figure.supxlabel("")
    # Text stays text in SVG (searchable; the page's fonts draw it); no date or random ids,
    # so the same matches give the same file.
    style = {"svg.fonttype": "none", "svg.hashsalt": "cer"}
    with matplotlib.rc_context(style):
        drawing.figure.savefig(buffer, format="png" if fmt == "png" else "svg", dpi=DPI,
                               metadata={"Date": None} if fmt != "png" else None)
    if fmt == "png":
        return buffer.getvalue()
    svg = _with_tips(buffer.getvalue().decode("utf-8"), drawing.tips)
    if fmt == "svg":
        return svg.encode("utf-8")
    return _page(svg[svg.index("<svg"):], drawing.notes, title).encode("utf-8")


def _with_tips(svg: str, tips: dict[int, str]) -> str:
    """Give each match's group (``cer-match-N``) a ``<title>``: the browser's tooltip."""
    if not tips:
        return svg

    def tip(m: re.Match) -> str:
        text = tips.get(int(m.group(1)))
        return m.group(0) if text is None else f"{m.group(0)}<title>{html.escape(text)}</title>"

    return re.sub(r'<g id="cer-match-(\d+)">', tip, svg)


def _page(svg: str, notes: Sequence[str], title: str) -> str:
    """A page around the inline SVG: no script, no external resource."""
    name = html.escape(title or "cer plot")
    caption = "".join(f"<p>{html.escape(t)}</p>" for t in notes)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{name}</title>\n"
        "<style>body{font-family:'DejaVu Sans',sans-serif;margin:1em}"
        "svg{max-width:100%;height:auto}figcaption{color:#444;font-size:.85em}"
        "figcaption p{margin:.3em 0;max-width:80em}</style>\n</head>\n<body>\n"
        f"<figure>\n{svg}\n<figcaption>{caption}</figcaption>\n</figure>\n</body>\n</html>\n"
    )


def write_plot(
    matches: Iterable[Match] | Iterable[MatchBatch],
    lookup: EventLookup,
    output: str | Path,
    fmt: str | None = None,
    *,
    partition_names: Sequence[str] = (),
    title: str = "",
) -> int:
    """Draw ``matches`` and write the figure to ``output`` (atomically, as the match writers
    do; ``-`` is standard output) in ``fmt`` (default: from the extension). Returns the
    number of matches."""
    fmt = plot_format(output, fmt)
    timeline = collect(matches, lookup, partition_names)
    data = render(draw(timeline, title), fmt, title)
    if str(output) == "-":
        import sys

        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return timeline.matches.height
    with open_output(output) as f:  # write failures raise OutputError, naming the file
        f.write(data)
    return timeline.matches.height
