"""The next-match scan: the executor of ``compiler.next_match.NextMatch`` — a sequence of
single events with an absence in every gap, and predicates between events.

A *run* is a prefix ``s0 … sk`` of a match (its events' positions, and the values its
events give the comparisons that read them). Each event taking ``s0`` starts one; a run at
step k scans the events of its partition after its last one, in order: each event that
takes ``s(k+1)`` (type, own filters, and the predicates between events that compare it with
the run) continues it — as a match when ``s(k+1)`` is the last step, else as a run at k + 1
—, and the first event that satisfies the gap's ψ with the run's bindings ends the scan
(a later candidate would have it in its gap), as does the first event past the window. So
every match is found once, from its first event, exactly as the absence defines it
(docs/language.md, "Absence"); in the next-match form (ψ is what the next step asks for)
each run takes one event per step.

Cost: per run, the events of its partition it scans — from its last event to the event
closing the gap, at most the window's —, plus the matches. Memory: the runs still
scanning (a run whose partition has no more events in the frame waits for the next one),
at most those started within the window; without a window they may wait for ever.

A frame is taken ``SLICE_ROWS`` events at a time; each slice's events become flat arrays
(step and ψ masks, the comparisons' values: float64 when exact, else dense ranks of the
values in one order, the waiting runs' included) and ``_scan`` — numba-compiled for large
runs, as ``engine.kernel`` — follows the runs. It returns every ``BUDGET`` scanned events, so
a signal acts between two calls, and resumes where it stopped (runs are independent).
Matches come out in the order of their last event (then of their first, then of the
others'), whatever the slices.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import numpy as np
import polars as pl

from cer_cli import signals
from cer_cli.compiler.next_match import NextMatch, step_formula
from cer_cli.compiler.predicates import comparison_pair, value_expression
from cer_cli.engine.absence import psi_expression
from cer_cli.engine.executor import (
    EngineStats,
    prepare_frame,
    window_bound,
    window_low,
    window_text,
)
from cer_cli.engine.strategies import report
from cer_cli.events import POS, Match, MatchBatch, as_matches
from cer_cli.query import ast
from cer_cli.query.printer import groups_text

_KEY = "__cer_nm_key"
_WTIME = "__cer_nm_time"
#: Events of a frame handled at once (their masks and values are arrays of this length).
SLICE_ROWS = 1 << 16
#: Scanned events between two returns of ``_scan`` to Python (where a signal acts).
BUDGET = 1 << 22
#: ``rel`` codes of ``_holds``.
RELS = {"<": 0, "<=": 1, ">": 2, ">=": 3, "=": 4, "!=": 5}
#: Integers whose magnitude stays below this are exact as float64.
EXACT = 2 ** 53

# run columns (int64): step, partition, start's local index, where to scan next (-2: the
# partition's first event of the next slice), then S positions, then C value sources
STEP, PART, SLOC, NEXT, CHAIN = 0, 1, 2, 3, 4


def _holds(a, rel, b):
    """``a rel b`` on two values (NaN: no value, relates to nothing)."""
    if a != a or b != b:
        return False
    if rel == 0:
        return a < b
    if rel == 1:
        return a <= b
    if rel == 2:
        return a > b
    if rel == 3:
        return a >= b
    if rel == 4:
        return a == b
    return a != b


def _grown(a, n):
    """``a`` with room for more rows than ``n`` (doubled; the first ``n`` rows kept)."""
    shape = (max(64, 2 * n),) + a.shape[1:]
    out = np.empty(shape, dtype=a.dtype)
    out[:n] = a[:n]
    return out


def _scan(S, M, PS, pos, part, loc, tau, hastau, NX, FIRST, windowed, by_events, bound,
          ckind, cat, csrc, crel, KEY, PROBE, base,
          ri, rt, rk, nrun, j0, budget,
          oi, no, pi, pt, pk, npend):
    """Follow the runs of one slice (see the module docstring). ``ri/rt/rk[:nrun]`` is the
    stack of runs to follow (waiting runs first), ``j0`` the next event that may start a
    run. Matches go to ``oi`` (rows: the S positions, start local, end local, partition),
    runs that reach the slice's end to ``pi/pt/pk``. Returns after about ``budget`` scanned
    events with work left (``j`` < n or runs on the stack), or when done."""
    n = pos.shape[0]
    C = ckind.shape[0]
    W = ri.shape[1]
    row = np.empty(W, dtype=np.int64)  # the run being followed
    kv = np.empty(C, dtype=np.float64)
    work = 0
    j = j0
    while True:
        if nrun > 0:
            nrun -= 1
            for x in range(W):
                row[x] = ri[nrun, x]
            for c in range(C):
                kv[c] = rk[nrun, c]
            start = rt[nrun]
        else:
            if j >= n or work >= budget:
                break
            e = j
            j += 1
            if not M[0, e] or (windowed and not by_events and not hastau[e]):
                continue
            for x in range(W):
                row[x] = -1
            row[STEP] = 0
            row[PART] = part[e]
            row[SLOC] = loc[e]
            row[NEXT] = NX[0, e]
            row[CHAIN] = pos[e]
            for c in range(C):
                if csrc[c] == 0:
                    kv[c] = KEY[c, e]
                    row[CHAIN + S + c] = base + e
                else:
                    kv[c] = np.nan
            start = tau[e]
        k = row[STEP]
        i = row[NEXT]
        if i == -2:
            i = FIRST[k, row[PART]] if row[PART] < FIRST.shape[1] else -1
        sloc = row[SLOC]
        dead = False
        while i != -1:
            work += 1
            if windowed:
                if by_events:
                    if loc[i] - sloc > bound:
                        dead = True
                        break
                elif hastau[i] and tau[i] - start > bound:
                    dead = True
                    break
            if M[k + 1, i]:
                ok = True
                for c in range(C):
                    if ckind[c] == 0 and cat[c] == k + 1 and not _holds(kv[c], crel[c], PROBE[c, i]):
                        ok = False
                        break
                if ok and k + 1 == S - 1:
                    if not windowed or by_events or hastau[i]:
                        if no == oi.shape[0]:
                            oi = _grown(oi, no)
                        for x in range(S - 1):
                            oi[no, x] = row[CHAIN + x]
                        oi[no, S - 1] = pos[i]
                        oi[no, S] = sloc
                        oi[no, S + 1] = loc[i]
                        oi[no, S + 2] = row[PART]
                        no += 1
                elif ok:
                    if nrun == ri.shape[0]:
                        ri = _grown(ri, nrun)
                        rt = _grown(rt, nrun)
                        rk = _grown(rk, nrun)
                    for x in range(W):
                        ri[nrun, x] = row[x]
                    ri[nrun, STEP] = k + 1
                    ri[nrun, NEXT] = NX[k + 1, i]
                    ri[nrun, CHAIN + k + 1] = pos[i]
                    for c in range(C):
                        if csrc[c] == k + 1:
                            rk[nrun, c] = KEY[c, i]
                            ri[nrun, CHAIN + S + c] = base + i
                        else:
                            rk[nrun, c] = kv[c]
                    rt[nrun] = start
                    nrun += 1
            if PS[k, i]:
                blocked = True
                for c in range(C):
                    if ckind[c] == 1 and cat[c] == k and not _holds(kv[c], crel[c], PROBE[c, i]):
                        blocked = False
                        break
                if blocked:
                    dead = True
                    break
            i = NX[k, i]
        if not dead:
            if npend == pi.shape[0]:
                pi = _grown(pi, npend)
                pt = _grown(pt, npend)
                pk = _grown(pk, npend)
            for x in range(W):
                pi[npend, x] = row[x]
            pi[npend, NEXT] = -2
            for c in range(C):
                pk[npend, c] = kv[c]
            pt[npend] = start
            npend += 1
        if work >= budget and nrun > 0:
            break
    return j, ri, rt, rk, nrun, oi, no, pi, pt, pk, npend


_compiled = None
_lock = threading.Lock()


def _scanner(events: int):
    """``_scan``, numba-compiled (cached) once a run is large, as ``engine.kernel`` decides
    (``CER_JIT``, ``jit.JIT_MIN_EVENTS``); plain Python otherwise or without numba."""
    global _compiled
    from cer_cli.engine import jit

    forced = jit.jit_forced()
    want = forced if forced is not None else events >= jit.JIT_MIN_EVENTS
    if not want or not jit.HAVE_NUMBA or os.environ.get(
            "NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        return _scan
    with _lock:
        if _compiled is None:
            import numba

            opts = {"cache": True, "nogil": True}
            g = {"np": np, "STEP": STEP, "PART": PART, "SLOC": SLOC, "NEXT": NEXT,
                 "CHAIN": CHAIN}
            g["_holds"] = numba.njit(inline="always", **opts)(_holds)
            g["_grown"] = numba.njit(**opts)(_copy(_grown, g))
            _compiled = numba.njit(**opts)(_copy(_scan, g))
    return _compiled


def _copy(f, g: dict):
    import types

    out = types.FunctionType(f.__code__, g, f.__name__, f.__defaults__, f.__closure__)
    out.__qualname__, out.__module__ = f.__qualname__, __name__
    return out


def _relevant(M: np.ndarray, PS: np.ndarray, part: np.ndarray, order: np.ndarray,
              groups: int) -> tuple[np.ndarray, np.ndarray]:
    """What a run at step k scans: ``NX[k, i]``, the next event after ``i`` in its
    partition that takes step k + 1 or satisfies ψk's type and own filters (-1: none in the
    slice), and ``FIRST[k, p]``, partition p's first such event. Other events cannot end
    or continue a gap: skipping them is exact (the window is judged on the next one)."""
    n = len(part)
    sp = part[order]
    NX = np.full((len(PS), n), -1, dtype=np.int64)
    FIRST = np.full((len(PS), groups), -1, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, sp[1:] != sp[:-1]]) if n else np.zeros(0, np.int64)
    for k in range(len(PS)):
        wanted = (M[k + 1] | PS[k])[order]
        idx = np.where(wanted, np.arange(n), n)
        later = np.minimum.accumulate(idx[::-1])[::-1]  # first wanted at t or after
        after = np.r_[later[1:], n]
        ok = after < n
        ok[ok] = sp[after[ok]] == sp[ok]
        NX[k, order[ok]] = order[after[ok]]
        head = later[starts]
        ok = head < n
        ok[ok] = sp[head[ok]] == sp[starts][ok]
        FIRST[k, sp[starts][ok]] = order[head[ok]]
    return NX, FIRST


class NextMatchScan:
    """Evaluate a ``NextMatch`` over event frames (an ``engine.executor.Executor``): frames
    are consecutive, the waiting runs carry over, so feeding them one by one equals feeding
    their concatenation."""

    def __init__(self, nm: NextMatch, window: ast.Window | None = None,
                 partition_by: tuple[tuple[str, ...], ...] = (), limit: int | None = None,
                 streams: tuple[str, ...] | None = None, strategy: str = "ALL",
                 budget: int | None = None) -> None:
        self.nm = nm
        self.window = window
        self.partition_by = partition_by
        self.limit = limit
        self.streams = streams
        self.strategy = strategy
        self._budget = BUDGET if budget is None else budget
        self._bound = window_bound(window)
        self._by_events = isinstance(window, ast.EventsWindow)
        self._timed = isinstance(window, ast.DurationWindow | ast.AttributeWindow)
        self._float = isinstance(self._bound, float) and not self._bound.is_integer()
        self._last_time = None  # the last timed event (executor.Earlier)
        self._newest = None  # the latest window time read (time windows)
        self._S = len(nm.steps)
        self._compares = nm.compares
        C = len(self._compares)
        self._ckind = np.array([0] * sum(len(j) for j in nm.joins)
                               + [1] * sum(len(g.compares) for g in nm.gaps), dtype=np.int64)
        self._cat = np.array([k for k, j in enumerate(nm.joins) for _ in j]
                             + [k for k, g in enumerate(nm.gaps) for _ in g.compares],
                             dtype=np.int64)
        self._csrc = np.array([c.src for c in self._compares], dtype=np.int64)
        self._crel = np.array([RELS[c.rel] for c in self._compares], dtype=np.int64)
        width = CHAIN + self._S + C
        # the waiting runs: columns as ``_scan``'s, window times, compared values (float64)
        # and, per comparison, the value its key has (original dtype) for the next slice
        self._wi = np.empty((0, width), dtype=np.int64)
        self._wt = np.empty(0, dtype=np.float64 if self._float else np.int64)
        self._raw: list[pl.Series | None] = [None] * C
        self._keys: dict[tuple, int] = {}
        self._counts = np.zeros(0, dtype=np.int64)  # events seen per partition
        sel = nm.select
        self._labels = [tuple(sorted(s.labels if sel is None else s.labels & sel))
                        for s in nm.steps]
        self._shown = [k for k, lab in enumerate(self._labels) if lab]
        # SELECT may drop every variable of a step between the first and the last: two runs
        # that differ only there report one match
        self._dedupe = any(not self._labels[k] for k in range(1, self._S - 1))
        self._events = self._matches = self._runs = self._peak = 0

    # ------------------------------------------------------------------ description

    def describe(self) -> str:
        nm = self.nm
        per = ("one event per step (each gap's ψ is what the next step asks for: the first"
               " such event)" if nm.deterministic else
               "every event that takes the next step before the gap's ψ closes it")
        return "\n".join([
            "engine: next-match scan: one run per event taking the first step; a run follows"
            f" its partition's events, taking {per}, until the window closes",
            "  cost: per run, the events of its partition scanned in its gaps (at most the"
            " window's), plus the matches; compiled (numba) for large logs",
            "  " + nm.describe(),
            f"  {window_text(self.window, 'runs still scanning')}; "
            + ("one scan per key of PARTITION BY "
               + groups_text(self.partition_by)
               if self.partition_by else "a single stream"),
            f"  strategy {self.strategy}: every match; limit "
            + (f"{self.limit} per triggering event, latest start first" if self.limit is not None
               else "none"),
        ])

    @property
    def stats(self) -> EngineStats:
        """``live_nodes`` / ``peak_live_nodes``: runs waiting between slices now / at most;
        ``allocated_nodes``: runs started."""
        return EngineStats(self._events, self._matches, max(1, len(self._keys)),
                           len(self._wi), self._runs, 0, max(self._peak, len(self._wi)),
                           0, 0, 0, 0)

    # ------------------------------------------------------------------ running

    def run(self, frame: pl.DataFrame) -> Iterator[Match]:
        yield from as_matches(self.run_batches(frame))

    def count(self, frame: pl.DataFrame) -> int:
        return sum(len(b) for b in self.run_batches(frame))

    def finish(self) -> Iterator[MatchBatch]:
        """Nothing: every match is reported at the event that ends it."""
        return iter(())

    def run_batches(self, frame: pl.DataFrame, size: int = 10_000) -> Iterator[MatchBatch]:
        """The matches of ``frame``'s events in order of their last event, a slice of
        ``SLICE_ROWS`` events at a time."""
        for first in range(0, frame.height, SLICE_ROWS):
            signals.check()
            batch = self._slice(frame.slice(first, SLICE_ROWS))
            if batch is not None and len(batch):
                yield batch

    def _slice(self, frame: pl.DataFrame) -> MatchBatch | None:
        frame, self._last_time = prepare_frame(frame, self.streams, self.partition_by,
                                               self.window, self._last_time, _KEY, _WTIME)
        n = frame.height
        if n == 0:
            return None
        self._events += n
        part, loc, order = self._partitions(frame)
        tau, hastau = self._times(frame, loc)
        schema = frame.schema
        nm = self.nm
        M = np.empty((self._S, n), dtype=np.bool_)
        PS = np.empty((self._S - 1, n), dtype=np.bool_)
        # an event takes a step, or closes a gap, as it satisfies a ψ (type, stream, filters)
        exprs = [psi_expression(step_formula(s), schema).fill_null(False).alias(f"m{k}")
                 for k, s in enumerate(nm.steps)]
        exprs += [psi_expression(g.psi, schema).fill_null(False).alias(f"p{k}")
                  for k, g in enumerate(nm.gaps)]
        masks = frame.select(exprs)
        for k in range(self._S):
            M[k] = masks[f"m{k}"].to_numpy()
        for k in range(self._S - 1):
            PS[k] = masks[f"p{k}"].to_numpy()
        NX, FIRST = _relevant(M, PS, part, order, len(self._keys) or 1)
        P0 = len(self._wi)
        KEY, PROBE, pending, keycols = self._values(frame, P0)
        ri = self._wi.copy()
        rt = self._wt.astype(tau.dtype, copy=True)
        rk = pending
        C = len(self._compares)
        width = CHAIN + self._S + C
        oi = np.empty((64, self._S + 3), dtype=np.int64)
        pi = np.empty((64, width), dtype=np.int64)
        pt = np.empty(64, dtype=tau.dtype)
        pk = np.empty((64, C), dtype=np.float64)
        no = npend = 0
        nrun, j = len(ri), 0
        if nrun == 0:
            ri = np.empty((64, width), dtype=np.int64)
            rt = np.empty(64, dtype=tau.dtype)
            rk = np.empty((64, C), dtype=np.float64)
        scan = _scanner(self._events)
        bound = 0 if self._bound is None else (
            float(self._bound) if tau.dtype == np.float64 else int(self._bound))
        pos = frame[POS].cast(pl.Int64).to_numpy()
        self._runs += int(M[0].sum())
        while True:
            j, ri, rt, rk, nrun, oi, no, pi, pt, pk, npend = scan(
                self._S, M, PS, pos, part, loc, tau, hastau, NX, FIRST,
                self._bound is not None, self._by_events, bound, self._ckind, self._cat,
                self._csrc, self._crel, KEY, PROBE, P0, ri, rt, rk, nrun, j, self._budget,
                oi, no, pi, pt, pk, npend)
            if j >= n and nrun == 0:
                break
            signals.check()
        self._keep(pi[:npend], pt[:npend], pk[:npend], keycols, P0)
        return self._batch(oi[:no])


    # ------------------------------------------------------------------ column-wise work

    def _partitions(self, frame: pl.DataFrame):
        """Per event: its partition id (stable across frames) and its index in the
        partition's stream; and the events in order of (partition, position)."""
        n = frame.height
        if self.partition_by:
            names = [f"{_KEY}{i}" for i in range(len(self.partition_by))]
            uniq = frame.select(names).unique(maintain_order=True)
            ids = [self._keys.setdefault(k, len(self._keys)) for k in uniq.rows()]
            uniq = uniq.with_columns(pl.Series("__cer_nm_id", ids, dtype=pl.Int64))
            part = frame.select(names).join(uniq, on=names, how="left", maintain_order="left")[
                "__cer_nm_id"].to_numpy().astype(np.int64)
            groups = len(self._keys)
        else:
            part = np.zeros(n, dtype=np.int64)
            groups = 1
        if len(self._counts) < groups:
            self._counts = np.concatenate([self._counts,
                                           np.zeros(groups - len(self._counts), np.int64)])
        order = np.argsort(part, kind="stable")
        sp = part[order]
        starts = np.flatnonzero(np.r_[True, sp[1:] != sp[:-1]])
        rank = np.arange(n, dtype=np.int64) - np.repeat(starts, np.diff(np.r_[starts, n]))
        loc = np.empty(n, dtype=np.int64)
        loc[order] = rank + self._counts[sp]
        self._counts += np.bincount(part, minlength=groups)
        return part, loc, order

    def _times(self, frame: pl.DataFrame, loc: np.ndarray):
        """The window time of each event (its local index for WITHIN n EVENTS) and whether
        it has one (an attribute window's event may lack it)."""
        n = frame.height
        if not self._timed:
            return (loc if self._by_events else np.zeros(n, dtype=np.int64)), np.ones(n, np.bool_)
        col = frame[_WTIME]
        if col.dtype.is_float():
            self._float = True
        hastau = col.is_not_null().to_numpy()
        tau = col.fill_null(0).cast(pl.Float64 if self._float else pl.Int64).to_numpy()
        if hastau.any():
            newest = tau[hastau].max()
            self._newest = newest if self._newest is None else max(self._newest, newest)
        return tau, hastau

    def _values(self, frame: pl.DataFrame, P0: int):
        """Per comparison: its key and probe on each event of the slice and its key on each
        waiting run, as float64 in one order (NaN: no value) — the values themselves when
        float64 holds them exactly, else their dense ranks among all three; and the slice's
        key values as they are (what a run that waits past the slice keeps)."""
        schema = frame.schema
        n, C = frame.height, len(self._compares)
        KEY = np.full((C, n), np.nan)
        PROBE = np.full((C, n), np.nan)
        pending = np.full((P0, C), np.nan)
        keycols: list[pl.Series | None] = [None] * C
        for c, cmp in enumerate(self._compares):
            pair = comparison_pair(value_expression(cmp.key, schema),
                                   value_expression(cmp.probe, schema))
            if pair is None:
                continue
            got = frame.select(pair[0].alias("v"), pair[1].alias("w"))
            ks, ps = got["v"], got["w"].alias("v")
            raw = self._raw[c]
            if raw is None or len(raw) != P0:
                raw = pl.Series("v", [None] * P0, dtype=ks.dtype)
            keycols[c] = ks
            parts = [raw.alias("v"), ks, ps]
            if all(s.dtype.is_float() for s in parts):
                vals = [s.fill_nan(None).to_numpy().astype(np.float64) for s in parts]
            elif all(s.dtype.is_integer() for s in parts) and all(
                    s.null_count() == len(s) or max(abs(s.min()), abs(s.max())) < EXACT
                    for s in parts):
                vals = [s.cast(pl.Float64).to_numpy() for s in parts]
            else:
                joined = pl.concat([s.to_frame("v") for s in parts], how="vertical_relaxed")["v"]
                if joined.dtype.is_float():
                    joined = joined.fill_nan(None)
                ranks = joined.rank("dense").cast(pl.Float64).to_numpy()
                vals = [ranks[:P0], ranks[P0:P0 + n], ranks[P0 + n:]]
            pending[:, c], KEY[c], PROBE[c] = vals
        return KEY, PROBE, pending, keycols

    def _keep(self, pi: np.ndarray, pt: np.ndarray, pk: np.ndarray, keycols, P0: int) -> None:
        """The runs that reached the slice's end wait for the next one, with the values of
        their compared keys; under a time window those whose window closed are dropped."""
        if self._timed and self._newest is not None and len(pt):
            alive = pt >= window_low(self._newest, self._bound)
            pi, pt = pi[alive], pt[alive]
        elif self._by_events and len(pt):  # its partition went past the window already
            alive = self._counts[pi[:, PART]] - 1 - pi[:, SLOC] <= self._bound
            pi, pt = pi[alive], pt[alive]
        S = self._S
        raw: list[pl.Series | None] = []
        for c in range(len(self._compares)):
            src = pi[:, CHAIN + S + c].copy()
            old, new = self._raw[c], keycols[c]
            if new is None:
                raw.append(None)
                continue
            if old is None or len(old) != P0:
                old = pl.Series("v", [None] * P0, dtype=new.dtype)
            both = pl.concat([old.to_frame("v"), new.to_frame("v")], how="vertical_relaxed")["v"]
            idx = pl.Series(np.where(src >= 0, src, 0), dtype=pl.Int64)
            vals = both.gather(idx)
            raw.append(vals.set(pl.Series(src < 0), None) if (src < 0).any() else vals)
            pi[:, CHAIN + S + c] = np.where(src >= 0, np.arange(len(src)), -1)
        self._wi, self._wt, self._raw = pi.copy(), pt.copy(), raw
        self._peak = max(self._peak, len(pi))

    def _batch(self, o: np.ndarray) -> MatchBatch | None:
        """The matches (rows: positions of the steps, start and end local indices,
        partition) in order of their last event, after the strategies' report step
        (de-duplication when a middle step is not reported, LIMIT), as every executor."""
        if len(o) == 0:
            return None
        S = self._S
        # by end, then start, then the other steps' positions: a total order, so the
        # matches LIMIT keeps among equal starts do not depend on how the log was sliced
        o = o[np.lexsort((*(o[:, k] for k in range(S - 2, 0, -1)), o[:, 0], o[:, S - 1]))]
        m = len(o)
        shown = self._shown
        r = len(shown)
        labelsets = tuple(self._labels[k] for k in shown)
        partitions = ({i: k for k, i in self._keys.items()} if self.partition_by else {})
        batch = report(MatchBatch(
            o[:, 0].copy(), o[:, S - 1].copy(), o[:, S + 2].copy(),
            np.arange(m + 1, dtype=np.int64) * r,
            o[:, shown].reshape(-1).copy(), np.tile(np.arange(r, dtype=np.int64), m),
            labelsets, partitions, o[:, S].copy(), o[:, S + 1].copy()),
            self.strategy, self.limit, distinct=self._dedupe)
        self._matches += len(batch)
        return batch
