"""Find the events a match reports, by their position in the stream, for the writers.

The engine reports positions; the writers need the events' rows. ``EventLookup`` keeps the
event frames the engine read (all of them, or those a window says a match can still reach)
and gathers columns of many positions in one go per frame (``gather``).
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from cer_cli.events import POS, ROW, STREAM, TIME, TYPE, MatchBatch, as_batches
from cer_cli.io.contract import TIME_UNIT, LogError
from cer_cli.io.texts import exact_frame, exact_series, inexact_in_python

if TYPE_CHECKING:
    from cer_cli.io.read import EventLog


#: Matches ``EventLookup.follow`` packs into one batch (the engine's batches are as large).
FOLLOW_MATCHES = 16_384
_LOC = "__cer_lookup_loc"  # an event's index in its key's stream
_N = "__cer_lookup_n"  # events per key (with a horizon per key: its latest value)
_T = "__cer_lookup_t"  # an event's value of the horizon's column (``KeyWindow.horizon``)


@dataclass(frozen=True)
class EventRow:
    """One event of the log, as writers show it."""

    position: int
    stream: str
    row: int
    type: str
    attrs: dict[str, Any]


@dataclass
class EventLookup:
    """Finds an event's row by its stream position.

    Feed it the event frames the engine reads (``tap``). ``window=None`` keeps every frame:
    exact, but memory grows with the log (fine for in-memory logs, which are held anyway).
    With ``window=n`` it keeps the current frame plus at least the ``n`` events before it,
    dropping older frames: memory stays bounded for batched logs, but a match reaching back
    further than ``n`` events cannot be written (``get`` raises ``LogError``). A window at
    least the query's event window (``WITHIN n EVENTS``) is always enough. For a time window,
    ``horizon=(column, bound)`` drops frames whose last value of ``column`` is more than
    ``bound`` before the first value of the newest frame: no match ending in the newest frame
    can reach them, because a match spans at most ``bound`` of that time (``lagged``: before
    the last value of the frame before the newest, for a trailing absence, whose match ends
    at the first event past its deadline and began within ``bound`` before the event that
    preceded it). For ``PARTITION BY
    … WITHIN n EVENTS``, ``per_key`` (``plan.KeyWindow``): a match spans at most n events of
    its key, which may lie anywhere in the log (a key seen once an hour). Each frame's events
    get their index in their key's stream; once every match still to come ends at or after
    a position (``written``), a frame before it keeps, as *pinned* rows, only the events
    among the last n + 1 of their key before that position, and leaves. Memory: the frames
    at hand plus about n + 1 events per key, where keeping every frame grew with the log
    (10M events, 100 keys, ``-o``: 1.3 GB).

    ``time_columns`` are the logs' time columns (``OutputSpec.time_columns``): a match's
    times are its events' TIME in their common type (``time_dtype``, ``times_at``).

    Mutable on purpose: it follows the stream as the engine advances.
    """

    columns: tuple[str, ...]
    time_columns: tuple[str, ...] = ()
    window: int | None = None
    horizon: tuple[str, float] | None = None
    dtypes: dict[str, pl.DataType] = field(default_factory=dict)
    n_seen: int = 0
    per_key: Any = None  # plan.KeyWindow: ``count`` and ``keyed(frame)``
    #: ``horizon`` from the last value before the newest frame (``plan.OutputWindow.lagged``)
    lagged: bool = False
    _frames: deque = field(default_factory=deque, repr=False)
    #: ``per_key``: per kept frame (by its first position) its events' keys and indices in
    #: their key's stream (``_LOC``), and the events per key before it; the events per key
    #: so far; the rows kept of frames that left (event columns, keys, ``_LOC``), by
    #: position; the position every match still to come ends at or after.
    _locs: dict = field(default_factory=dict, repr=False)
    _before: dict = field(default_factory=dict, repr=False)
    _counts: pl.DataFrame | None = field(default=None, repr=False)
    _pinned: pl.DataFrame | None = field(default=None, repr=False)
    _mark: int = field(default=-1, repr=False)
    #: per kept frame (by its first position): the frame and its times as outputs show them
    _rendered: dict = field(default_factory=dict, repr=False)

    @classmethod
    def for_log(
        cls, log: EventLog, window: int | None = None, horizon: tuple[str, float] | None = None,
        per_key: Any = None, lagged: bool = False,
    ) -> EventLookup:
        return cls(log.columns, log.time_columns, window, horizon, per_key=per_key,
                   lagged=lagged)

    def add(self, frame: pl.DataFrame) -> None:
        if frame.height == 0:
            return
        schema = frame.schema  # once: each ``frame.schema`` / ``.columns`` is O(columns)
        for c in self.columns:
            if c not in self.dtypes and c in schema:
                self.dtypes[c] = schema[c]
        base = frame[POS][0]
        before = self._frames[-1][1] if self._frames else None
        self._frames.append((base, frame))
        self.n_seen += frame.height
        if self.per_key is not None:
            self._locs[base], counts = self._key_locs(frame)
            self._before[base], self._counts = self._counts, counts
            self._retire()
        if self.window is not None:
            while len(self._frames) > 1:
                older = sum(f.height for _, f in list(self._frames)[1:-1])
                if older < self.window:
                    break
                self._frames.popleft()
        if self.horizon is not None and self.horizon[0] in frame.columns:
            column, bound = self.horizon
            # from the newest frame's first value, or (lagged) its predecessor's last
            if not self.lagged:
                values = frame[column].drop_nulls().head(1)
            elif before is not None and column in before.columns:
                values = before[column].drop_nulls().tail(1)
            else:
                values = frame[column].clear()
            if values.len():
                oldest_needed = values[0] - bound
                while len(self._frames) > 1:
                    last = self._frames[0][1][column].drop_nulls()
                    if not last.len() or last[-1] >= oldest_needed:
                        break
                    self._frames.popleft()

    def tap(self, frames: Iterable[pl.DataFrame]) -> Iterator[pl.DataFrame]:
        """Pass frames through (to the engine), remembering each one first. The engine asks
        for a frame once every match ending before it was taken (and written): each one
        marks its first position ``written``."""
        for frame in frames:
            if frame.height:
                self.written(frame[POS][0])
            self.add(frame)
            yield frame

    def follow(self, frames: Iterable[pl.DataFrame], matches: Iterable) -> Iterator[MatchBatch]:
        """``matches`` (``Match`` or ``MatchBatch``, in order of end) found apart from the
        frames — by the local pool's tasks, or by Spark from its own read of the log — with
        this lookup fed ``frames`` (the log's, in order) as far as each match reaches, and no
        further: the writers then hold what the window says, not the whole log."""
        import numpy as np

        frames = iter(frames)
        # Packed here (a writer that packed ``Match`` objects itself would hold some while
        # the frames added meanwhile drop what they reach), and each batch cut where the
        # next frame is needed: a frame is added once the matches before it are written,
        # as the engine's driver reads its next frame (``tap``).
        for batch in as_batches(matches, FOLLOW_MATCHES):
            at = 0
            while at < len(batch):
                k = int(np.searchsorted(batch.end, self.n_seen, side="left"))
                if k > at:  # these end in the frames added so far
                    yield batch if at == 0 and k == len(batch) else batch.slice(at, k)
                    at = k
                    continue
                self.written(int(batch.end[at]))
                frame = next(frames, None)
                if frame is None:  # positions never read: the writers' lookup says so
                    yield batch.slice(at, len(batch))
                    break
                self.add(frame)

    def written(self, position: int) -> None:
        """Every match still to come ends at ``position`` or after (matches come in order
        of end): with ``per_key``, the frames before it keep only what such a match can
        reach, at the next ``add``."""
        self._mark = max(self._mark, int(position))

    # ------------------------------------------------------------------ per key

    def _key_locs(self, frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame | None]:
        """The frame's events in partitions (position, key, index in the key's stream:
        ``KeyWindow.keyed``, as the executors key them) and the events per key up to its
        end."""
        own = self.per_key.keyed(frame)
        keys = [c for c in own.columns if c != POS]
        own = own.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over(keys).alias(_LOC))
        if self.per_key.horizon is not None:
            column = self.per_key.horizon[0]
            own = own.join(frame.select(POS, pl.col(column).alias(_T)), on=POS, how="left",
                           maintain_order="left")
        if not own.height:
            return own, self._counts
        if self._counts is not None:
            own = (own.join(self._counts, on=keys, how="left", maintain_order="left")
                   .with_columns(pl.col(_LOC) + pl.col(_N).fill_null(0)).drop(_N))
        new = own.group_by(keys).agg((pl.col(_LOC).max() + 1).alias(_N))
        if self._counts is None:
            return own, new
        counts = pl.concat([self._counts, new], how="vertical_relaxed")
        return own, counts.group_by(keys).agg(pl.col(_N).max())

    def _retire(self) -> None:
        """Frames before the one holding ``_mark`` leave, their rows that a match ending at
        the mark or later can reach pinned: those among the last ``count`` + 1 events of
        their key before the mark (one more than a match spans: no off-by-one can bite), or
        with a ``horizon`` those within its bound of their key's latest value before it."""
        bases = [b for b, _ in self._frames]
        i = bisect.bisect_right(bases, self._mark) - 1
        if i <= 0:
            return
        keys = [c for c in self._locs[bases[i]].columns if c not in (POS, _LOC, _T)]
        at = self._locs[bases[i]].filter(pl.col(POS) < self._mark)
        if self.per_key.horizon is None:
            # each key's events before the mark, counted
            counts = at.group_by(keys).agg((pl.col(_LOC).max() + 1).alias(_N))
            if self._before[bases[i]] is not None:
                counts = (pl.concat([self._before[bases[i]], counts], how="vertical_relaxed")
                          .group_by(keys).agg(pl.col(_N).max()))
            reach, ordinal = self.per_key.count + 1, _LOC
        else:
            # each key's latest value before the mark, among the frames leaving and the
            # holding frame's rows before the mark (a key without one there keeps its pinned
            # rows: they were within the bound of its latest then, which it still is)
            seen = [r.select(*keys, _T) for r in (*(self._locs[b] for b in bases[:i]), at)
                    if r.height]
            counts = (pl.concat(seen, how="vertical_relaxed").group_by(keys)
                      .agg(pl.col(_T).max().alias(_N)) if seen else at.select(*keys, _T).clear())
            reach, ordinal = self.per_key.horizon[1], _T

        def reachable(rows: pl.DataFrame) -> pl.DataFrame:
            if not rows.height or not counts.height:
                return rows
            return (rows.join(counts, on=keys, how="left", maintain_order="left")
                    .filter(pl.col(_N).is_null() | pl.col(ordinal).is_null()
                            | (pl.col(ordinal) >= pl.col(_N) - reach)).drop(_N))

        kept = [] if self._pinned is None else [reachable(self._pinned)]
        for _ in range(i):
            base, frame = self._frames.popleft()
            locs = reachable(self._locs.pop(base))
            self._before.pop(base)
            if locs.height:
                kept.append(frame.join(locs, on=POS, how="inner", maintain_order="left"))
        kept = [k for k in kept if k.height]
        self._pinned = pl.concat(kept, how="diagonal_relaxed") if kept else None

    def _pinned_rows(self, pos: Any) -> Any:
        """Rows of ``_pinned`` holding positions ``pos`` (numpy), -1 where none does."""
        import numpy as np

        if self._pinned is None:
            return np.full(len(pos), -1, np.int64)
        have = self._pinned[POS].to_numpy()
        at = np.minimum(np.searchsorted(have, pos), len(have) - 1)
        return np.where(have[at] == pos, at, -1)

    def get(self, position: int) -> EventRow:
        found = None
        for base, frame in reversed(self._frames):
            if base <= position < base + frame.height:
                found = frame, position - base
                break
        else:
            if self._frames and position < self._frames[0][0]:
                import numpy as np

                row = int(self._pinned_rows(np.array([position], np.int64))[0])
                if row >= 0:
                    found = self._pinned, row
        if found is not None:
            frame, r = found
            rec = frame.row(r, named=True)
            exact = [c for c in self.columns
                     if c in frame.schema and inexact_in_python(frame.schema[c])]
            if exact:  # nanoseconds, or a zone: as their exact text (``io.texts``)
                rec.update(exact_frame(frame.select(exact).slice(r, 1)).row(0, named=True))
            return EventRow(
                position=position,
                stream=rec[STREAM],
                row=rec[ROW],
                type=rec[TYPE],
                attrs={c: rec.get(c) for c in self.columns},
            )
        if self._frames and position < self._frames[0][0]:
            kept = ("the events" if self.window is None and self.per_key is None
                    else f"the {self.window} events" if self.per_key is None
                    else f"the last {self.per_key.count + 1} events of each key"
                    if self.per_key.count is not None
                    else f"each key's events within {self.per_key.horizon[1]} of its latest")
            raise LogError(
                f"event {position} is older than {kept} kept for output",
                ["read the log without batches, or keep a larger window of events"],
            )
        raise LogError(f"no event at position {position} has been read")

    def time_of(self, position: int) -> Any:
        """A match's time at ``position``, as outputs show it (``times_at``), one value:
        each kept frame's times are rendered once, for the writers that take one match at
        a time."""
        dtype = self.time_dtype()
        if dtype is None or position >= self.n_seen:
            return None
        for base, frame in reversed(self._frames):
            if base <= position < base + frame.height:
                if self._rendered.get(base) is None or self._rendered[base][0] is not frame:
                    self._rendered = {b: r for b, r in self._rendered.items()
                                      if any(b == k for k, _ in self._frames)}
                    self._rendered[base] = (frame, exact_series(render_time(frame[TIME], dtype)))
                return self._rendered[base][1][position - base]
        self.get(position)  # a pinned row, or not kept: raises the LogError that says why
        import numpy as np

        row = int(self._pinned_rows(np.array([position], np.int64))[0])
        return exact_series(render_time(self._pinned[TIME].slice(row, 1), dtype))[0]

    def time_dtype(self) -> pl.DataType | None:
        """The type of a match's times: the common type of the logs' time columns (their
        own when they share one; UTC instants when they have none, as a naive and an aware
        datetime); ``None`` without a time column or before any frame."""
        dtypes = [self.dtypes[c] for c in self.time_columns if c in self.dtypes]
        if len(set(dtypes)) <= 1:
            return dtypes[0] if dtypes else None
        empty = pl.DataFrame([pl.Series(str(i), [], d) for i, d in enumerate(dtypes)])
        try:
            return empty.select(pl.coalesce(pl.all())).dtypes[0]
        except pl.exceptions.PolarsError:
            return pl.Datetime(TIME_UNIT, "UTC")


def times_at(lookup: EventLookup, pos: Any) -> pl.Series:
    """The times of the events at positions ``pos`` as outputs show a match's times: their
    TIME (``OutputSpec.time_columns``) in ``lookup.time_dtype()``; null at ``lookup.n_seen``
    and after, the end of the log, which a trailing absence's open match ends at
    (docs/language.md), and null throughout without a time column."""
    import numpy as np

    pos = np.asarray(pos, dtype=np.int64)
    dtype = lookup.time_dtype()
    if dtype is None or not len(pos):
        return pl.Series([None] * len(pos), dtype=dtype or pl.String)
    past = pos >= lookup.n_seen
    times = gather(lookup, np.where(past, pos.min(), pos), [TIME])[TIME]
    if past.any():
        times = pl.select(pl.when(pl.Series(past)).then(None).otherwise(times)).to_series()
    return render_time(times, dtype)


def render_time(times: pl.Series, dtype: pl.DataType) -> pl.Series:
    """TIME values in ``dtype``: int64 ns since the epoch as that datetime (in its zone) or
    date; a number without a unit as that number type."""
    if isinstance(dtype, pl.Datetime) or dtype == pl.Date:
        instants = times.cast(pl.Datetime(TIME_UNIT))
        zone = getattr(dtype, "time_zone", None)
        if zone is not None:
            instants = instants.dt.replace_time_zone("UTC").dt.convert_time_zone(zone)
        return instants.cast(dtype)
    return times.cast(dtype)


def gather(lookup: EventLookup, pos: Any, cols: Sequence[str]) -> pl.DataFrame:
    """Columns ``cols`` of the events at positions ``pos`` (in that order), gathered from the
    looked-up frames in one go per frame; a position not kept raises ``LogError``."""
    import numpy as np

    frames = list(lookup._frames)
    if len(pos) and not frames:
        lookup.get(int(pos.min()))  # raises the LogError that explains why
    bases = np.array([b for b, _ in frames], dtype=np.int64)
    which = np.searchsorted(bases, pos, side="right") - 1
    parts, order = [], []
    if len(pos) and which.min() < 0:  # before the frames at hand: pinned rows (``per_key``)
        sel = np.flatnonzero(which < 0)
        rows = lookup._pinned_rows(pos[sel])
        if rows.min() < 0:
            lookup.get(int(pos[sel][rows.argmin()]))  # not kept: raises
        have = set(lookup._pinned.columns)
        parts.append(lookup._pinned.select([c for c in cols if c in have])[rows])
        order.append(sel)
    for f in np.unique(which[which >= 0]).tolist():
        base, frame = frames[f]
        sel = np.flatnonzero(which == f)
        rows = pos[sel] - base
        if rows.max() >= frame.height:
            lookup.get(int(pos[sel][rows.argmax()]))  # a position never read: raises
        have = set(frame.columns)
        parts.append(frame.select([c for c in cols if c in have])[rows])
        order.append(sel)
    if not parts:  # no position (matches that report no event): the columns, no rows
        if not frames:
            return pl.DataFrame()
        have = set(frames[-1][1].columns)
        return frames[-1][1].select([c for c in cols if c in have]).clear()
    events = pl.concat(parts, how="diagonal_relaxed")
    if len(order) > 1:
        events = events[np.argsort(np.concatenate(order), kind="stable")]
    return events


def event_columns(lookup: EventLookup, pos: Any, cols: Sequence[str]) -> pl.DataFrame:
    """Columns ``cols`` (the event frame's, reserved ones included) of the events at
    positions ``pos``, in that order: for outputs built beside these writers (the plot)."""
    import numpy as np

    return gather(lookup, np.asarray(pos, dtype=np.int64), cols)




#: Between the streams of a match that draws from several (``match_streams``).
STREAMS_SEPARATOR = " + "


def match_streams(batch: MatchBatch, lookup: EventLookup) -> pl.Series:
    """Per match of ``batch``, the streams it draws from: those of its first and last
    event and of the events it reports, sorted and joined by ``STREAMS_SEPARATOR``
    (``Click + Order``); a position past the log (an open trailing absence's end) has
    none. ``cer plot``'s rows without PARTITION BY and ``--count --by stream``."""
    import numpy as np

    k = len(batch)
    counts = np.diff(np.asarray(batch.off, dtype=np.int64))
    at = np.concatenate([np.asarray(batch.start, dtype=np.int64),
                         np.asarray(batch.end, dtype=np.int64),
                         np.asarray(batch.pos, dtype=np.int64)])
    owner = np.concatenate([np.arange(k), np.arange(k), np.repeat(np.arange(k), counts)])
    read = at < lookup.n_seen
    streams = gather(lookup, at[read], [STREAM])[STREAM] if read.any() else pl.Series([], dtype=pl.String)
    return (pl.DataFrame({"m": owner[read], "s": streams})
            .unique().sort("m", "s")
            .group_by("m", maintain_order=True).agg(pl.col("s").str.join(STREAMS_SEPARATOR))
            .join(pl.DataFrame({"m": np.arange(k)}), on="m", how="right", maintain_order="right")["s"])
