"""Shared vocabulary of the pipeline: schemas of event logs, the event frame, matches.

This module sits below every stage (query checks, io, engine, spark) and imports none
of them, so each stage can speak about events without depending on another.

The *event frame* is a polars DataFrame, already ordered by time, that the reader hands
to the engine. Besides the log's own columns it carries reserved columns (prefixed with
``__cer_`` so they never clash with user attributes):

* ``TYPE`` — event type name (str);
* ``STREAM`` — stream name (str), the file stem or the ``NAME=`` given on the command line;
* ``TIME`` — the event time: int64 nanoseconds since the epoch for datetimes (and numbers
  with a ``--time-unit``), the raw value for other numeric time columns (int64, or float64
  for a float column: ``io.contract.time_storage``), null when the log has no time column;
* ``ROW`` — 0-based data row in its file;
* ``POS`` — 0-based position in the merged, time-ordered stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TYPE = "__cer_type"
STREAM = "__cer_stream"
TIME = "__cer_time"
ROW = "__cer_row"
POS = "__cer_pos"
#: The engine's partition key id (one per PARTITION BY key, as ``MatchBatch.part``).
KEY = "__cer_engine_key"
RESERVED = (TYPE, STREAM, TIME, ROW, POS)

#: Attribute types a schema knows. Predicates are type-checked against these; ``null`` is a
#: column typed as holding no value (it compares with nothing).
ATTR_TYPES = ("int", "float", "str", "bool", "datetime", "null")
#: The units of a numeric time counted from the epoch (``--time-unit``), in words.
EPOCH_UNIT_NAMES = {"s": "seconds", "ms": "milliseconds", "us": "microseconds",
                    "ns": "nanoseconds"}


@dataclass(frozen=True)
class Schema:
    """What a log contains: its streams, and per event type the attributes and their types.

    ``event_types`` maps an event type to ``{attribute: type}`` (types from ``ATTR_TYPES``),
    ``streams`` maps a stream name to the event types it contains. ``time_column`` names
    the column used as time (``None`` when there is none: time is then the position).
    ``epoch_units`` maps a stream whose time is numbers without a unit to the unit that,
    counted from the epoch, puts them in plausible years (``io.contract.check_times``): what
    a duration window's error suggests. ``empty`` maps an event type to its attributes that
    are null for every one of its events in these logs; ``refused`` maps a column predicates
    cannot compare (a list, a duration, ...) to the name of its type.
    """

    event_types: dict[str, dict[str, str]]
    streams: dict[str, tuple[str, ...]] = field(default_factory=dict)
    time_column: str | None = None
    epoch_units: dict[str, str] = field(default_factory=dict)
    empty: dict[str, frozenset[str]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)

    def attributes(self, event_type: str) -> dict[str, str]:
        return self.event_types.get(event_type, {})

    def all_attributes(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for attrs in self.event_types.values():
            for name, typ in attrs.items():
                out.setdefault(name, typ)
        return out


@dataclass(frozen=True)
class Match:
    """One complex event: interval ``[start, end]`` and the events it reports.

    ``events`` lists ``(position, variables)`` in stream order; ``variables`` is the sorted
    tuple of variables (after SELECT projection) that bind the event. Positions are global
    positions in the merged stream (``POS``). ``partition`` is the PARTITION BY key, if any.
    """

    start: int
    end: int
    events: tuple[tuple[int, tuple[str, ...]], ...]
    partition: tuple | None = None

    def key(self) -> tuple:
        """Identity of the match, for set comparisons in tests."""
        return (self.start, self.end, self.events)


@dataclass(frozen=True)
class MatchBatch:
    """Consecutive complex events in columns: what the compiled engine produces, so that
    writers can build their output column-wise instead of one Python object per match.

    Match ``m`` spans ``[start[m], end[m]]``; its events are ``pos[off[m]:off[m+1]]`` with
    variable sets ``labelsets[lab[j]]``; its partition is ``partitions[part[m]]`` (``None``
    for no partition). The arrays are numpy int64 arrays.

    ``start_local``/``end_local`` (the CEA executor's, else ``None``) are the indices of
    start and end in their partition's stream: STRICT compares them with the match's size.
    """

    start: object
    end: object
    part: object
    off: object
    pos: object
    lab: object
    labelsets: tuple[tuple[str, ...], ...]
    partitions: dict = field(default_factory=dict)
    start_local: object = None
    end_local: object = None

    def __len__(self) -> int:
        return len(self.start)

    def take(self, idx) -> MatchBatch:
        """The matches ``idx`` (an int array), in that order."""
        import numpy as np

        idx = np.asarray(idx, dtype=np.int64)
        lo = self.off[idx]
        sizes = self.off[idx + 1] - lo
        off = np.zeros(len(idx) + 1, np.int64)
        np.cumsum(sizes, out=off[1:])
        ev = np.repeat(lo - off[:-1], sizes) + np.arange(off[-1], dtype=np.int64)
        local = (None, None) if self.start_local is None else (self.start_local[idx], self.end_local[idx])
        return MatchBatch(self.start[idx], self.end[idx], self.part[idx], off, self.pos[ev],
                          self.lab[ev], self.labelsets, self.partitions, *local)

    def slice(self, lo: int, hi: int) -> MatchBatch:
        """The matches ``lo … hi - 1``: views of this batch's arrays, but the offsets (the
        local pool's merge cuts a task's batch where another task's matches come between)."""
        a, b = int(self.off[lo]), int(self.off[hi])
        local = ((None, None) if self.start_local is None
                 else (self.start_local[lo:hi], self.end_local[lo:hi]))
        return MatchBatch(self.start[lo:hi], self.end[lo:hi], self.part[lo:hi],
                          self.off[lo:hi + 1] - a, self.pos[a:b], self.lab[a:b],
                          self.labelsets, self.partitions, *local)

    def partition_counts(self) -> dict:
        """How many of these matches each partition has, by the key a match reports
        (``None``: no PARTITION BY)."""
        import numpy as np

        ids, counts = np.unique(np.asarray(self.part, dtype=np.int64), return_counts=True)
        out: dict = {}
        for p, n in zip(ids.tolist(), counts.tolist(), strict=True):
            key = self.partitions.get(p)
            out[key] = out.get(key, 0) + n
        return out

    def matches(self):
        """The same complex events as ``Match`` objects."""
        starts, ends, parts, offs = (a.tolist() for a in (self.start, self.end, self.part, self.off))
        evpos = self.pos.tolist()
        evlab = [self.labelsets[x] for x in self.lab.tolist()]
        key = self.partitions.get
        for m, s in enumerate(starts):
            a, b = offs[m], offs[m + 1]
            yield Match(s, ends[m], tuple(zip(evpos[a:b], evlab[a:b], strict=True)), key(parts[m]))


def join_batches(batches) -> MatchBatch:
    """The matches of ``batches`` (a non-empty sequence) in one batch, in order.

    Each executor numbers its partitions and label sets its own way (the local pool's tasks
    run one each), so batches that do not share them are renumbered by value: a partition's
    key and a label set are what a writer reads, never their ids."""
    import numpy as np

    if len(batches) == 1:
        return batches[0]
    first = batches[0]
    labelsets, partitions = first.labelsets, first.partitions
    lab = [b.lab for b in batches]
    if any(b.labelsets != labelsets for b in batches):
        index: dict[tuple[str, ...], int] = {}
        lab = [np.array([index.setdefault(x, len(index)) for x in b.labelsets] or [0],
                        np.int64)[b.lab] for b in batches]
        labelsets = tuple(index)
    part = [b.part for b in batches]
    if any(b.partitions is not partitions for b in batches):
        ids: dict = {}
        sharing: dict[int, list[int]] = {}  # the batches of each numbering
        for n, b in enumerate(batches):
            sharing.setdefault(id(b.partitions), []).append(n)
        for members in sharing.values():
            keys = batches[members[0]].partitions
            used = np.unique(np.concatenate([np.asarray(part[n], dtype=np.int64) for n in members]))
            lut = np.zeros(int(used[-1]) + 1 if len(used) else 1, np.int64)
            for p in used.tolist():
                lut[p] = ids.setdefault(keys.get(p), len(ids))
            for n in members:
                part[n] = lut[part[n]]
        partitions = {i: key for key, i in ids.items()}
    sizes = np.cumsum([0] + [len(b.pos) for b in batches[:-1]])
    off = np.concatenate([np.zeros(1, np.int64)]
                         + [b.off[1:] - b.off[0] + n for b, n in zip(batches, sizes, strict=True)])
    local = (None, None)
    if all(b.start_local is not None for b in batches):
        local = (np.concatenate([b.start_local for b in batches]),
                 np.concatenate([b.end_local for b in batches]))
    return MatchBatch(np.concatenate([b.start for b in batches]),
                      np.concatenate([b.end for b in batches]), np.concatenate(part), off,
                      np.concatenate([b.pos for b in batches]), np.concatenate(lab), labelsets,
                      partitions, *local)


def batch_of(matches) -> MatchBatch:
    """Pack ``Match`` objects into one ``MatchBatch`` (for engines without a columnar path)."""
    import numpy as np

    labelsets: dict[tuple[str, ...], int] = {}
    partitions: dict[tuple | None, int] = {}
    start, end, part, off, pos, lab = [], [], [], [0], [], []
    for m in matches:
        start.append(m.start)
        end.append(m.end)
        part.append(partitions.setdefault(m.partition, len(partitions)))
        for p, v in m.events:
            pos.append(p)
            lab.append(labelsets.setdefault(v, len(labelsets)))
        off.append(len(pos))
    arr = [np.asarray(x, dtype=np.int64) for x in (start, end, part, off, pos, lab)]
    return MatchBatch(*arr, tuple(labelsets), {i: k for k, i in partitions.items()})


#: The most events ``as_batches`` packs into one ``MatchBatch``: a count of matches alone
#: bounds nothing when each match reports thousands of events (``A+ ; B``), and the writers
#: build a batch's rows at once.
BATCH_EVENTS = 1 << 18


def as_batches(items, size: int, events: int = BATCH_EVENTS, whole: bool = False):
    """``items`` (``Match`` objects, ``MatchBatch``es, or both) as ``MatchBatch``es, packing
    ``Match`` objects ``size`` at a time, or fewer so as to report at most ``events``
    events (a larger match is a batch of its own). ``MatchBatch``es pass as they are. With
    ``whole``, the items are groups of ``Match`` objects (one triggering event's
    candidates), and a group is never split between two batches."""
    pending: list[Match] = []
    held = 0
    for x in items:
        if isinstance(x, MatchBatch):
            if pending:
                yield batch_of(pending)
                pending, held = [], 0
            yield x
            continue
        group = list(x) if whole else (x,)
        n = sum(len(m.events) for m in group)
        if pending and held + n > events:
            yield batch_of(pending)
            pending, held = [], 0
        pending.extend(group)
        held += n
        if len(pending) >= size or held >= events:
            yield batch_of(pending)
            pending, held = [], 0
    if pending:
        yield batch_of(pending)


def first_matches(batches, n: int):
    """The first ``n`` matches of ``batches`` (``MatchBatch``es), the batch that reaches
    ``n`` cut with ``take``: ``--limit`` without one ``Match`` object per match, so what it
    holds is bounded by the engine's batches, not by ``n`` times the matches' size."""
    import numpy as np

    if n <= 0:
        return
    for batch in batches:
        if len(batch) >= n:
            yield batch if len(batch) == n else batch.take(np.arange(n, dtype=np.int64))
            return
        n -= len(batch)
        yield batch


def as_matches(items):
    """``items`` (``Match`` objects, ``MatchBatch``es, or both) as ``Match`` objects."""
    for x in items:
        if isinstance(x, MatchBatch):
            yield from x.matches()
        else:
            yield x
