"""The correlation post-filter: keep a candidate match iff its predicates between events hold.

``cer_cli.compiler.correlation.relax_correlation`` removes the filter conjuncts that read
several variables (the *sites*) from the automaton; the engine enumerates the candidates
of the relaxed automaton and keeps those for which every site holds (docs/language.md,
"Correlation"):

* a site is skipped for a match when one of its ``guards`` is unbound in it (the match did
  not go through the OR branch holding the filter);
* ``NOT`` is pushed down to the atoms (De Morgan), so it never turns "for all" into
  "there exists";
* an atom (or negated atom) holds iff it holds for every combination of the events bound
  to its variables — an unbound variable has no events and passes — and a combination
  lacking a value the atom reads (absent, null or NaN attribute, division by zero) fails;
* ``AND`` / ``OR`` combine the atoms' per-match truth values;
* an atom reading ``PREV(y).a`` (a register of y's ``+``, which binds y to one event per
  iteration: ``compiler.correlation`` checks it) holds iff it holds for every pair of
  consecutive events of y in the match, the later as ``y`` and the earlier as ``PREV(y)``;
  the first iteration has no previous one and passes.

A correlated absence (``compiler.correlation.AbsenceSite``, docs/language.md "Absence")
rejects a candidate when some event strictly between its gap's bounds (the hidden variables
``gapK.left`` / ``gapK.right``), in its partition, satisfies ψ with the candidate's single
events of the variables ψ reads. ``bisect``: ψ's events (type and unary filters) are sorted
by (partition, value of ψ.a, position), and each candidate looks up the first one after its
left bound with its value (an as-of join: O(log n) per candidate, n the retained events);
``scan``: ψ's events are sorted by (partition, position), each candidate bisects to the
slice of its gap, and the (candidate, ψ event) pairs of the gaps — only those — are tested
``SCAN_PAIRS`` at a time (O(events in the gap) per candidate, which the window bounds, and
memory bounded by the cap, never candidates × events).

Each atom is one ``cer_cli.compiler.predicates.predicate_expression`` — the same code, hence
the same semantics, as the automaton's unary atoms — evaluated by polars over one row per
(match, combination of events). Cost: linear in the number of such rows per atom (the
product over the atom's variables of their events in each match), plus a join of the
batch's (match, variable, event) rows with the attributes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import polars as pl

from cer_cli import signals
from cer_cli.compiler.correlation import PSI, AbsenceSite, Site, shown
from cer_cli.compiler.predicates import join_pair, predicate_expression, value_expression
from cer_cli.events import KEY, POS, STREAM, TYPE, MatchBatch
from cer_cli.query import ast
from cer_cli.query.scope import attr_refs, is_atom, pred_vars, prev_refs, push_not

_MATCH = "__cer_match"
MATCH_ID = _MATCH  #: the candidate id column of ``gap_hits``
_VAR = "__cer_var"


def _column(ref: ast.AttrRef) -> str:
    if isinstance(ref, ast.PrevRef):
        return f"PREV({ref.var}).{ref.attr}"
    return f"{ref.var}.{ref.attr}"


@dataclass(frozen=True)
class PostFilter:
    """The removed conjuncts, tested on each candidate valuation by the engine."""

    sites: tuple[Site, ...]
    select: frozenset[str] | None  # the real SELECT (None: every variable)
    absences: tuple[AbsenceSite, ...] = ()

    @property
    def hidden(self) -> frozenset[str]:
        """The gap bounds' variables: read here, never reported."""
        return frozenset(v for a in self.absences for v in a.bounds)

    @property
    def variables(self) -> frozenset[str]:
        """Variables whose events the sites read or whose presence guards a site."""
        out: frozenset[str] = self.hidden
        for s in self.sites:
            out |= pred_vars(s.predicate) | set(s.guards)
        for a in self.absences:
            out |= a.match_vars
        return out

    @property
    def columns(self) -> tuple[str, ...]:
        """Attribute names the predicates read (the engine keeps them for ``keep``), and
        for an absence the type, stream and partition columns of the events in a gap."""
        names = {r.attr for s in self.sites for r in attr_refs(s.predicate)}
        for a in self.absences:
            names |= {r.attr for p in (a.unary, a.correlated) if p is not None
                      for r in attr_refs(p)} | {TYPE, STREAM, KEY}
        return tuple(sorted(names))

    def describe(self) -> list[str]:
        return [shown(s.predicate) + (f" (when {', '.join(s.guards)} is bound)" if s.guards else "")
                for s in self.sites] + [
                    f"no {a.etype.label} with {shown(a.predicate)} between {' and '.join(a.bounds)}"
                    for a in self.absences]

    def keep(self, batch: MatchBatch, rows: pl.DataFrame) -> np.ndarray:
        """One bool per match of ``batch``: every site holds on its valuation.

        ``rows`` has column ``POS`` and the attributes of ``columns`` that the log has, for
        at least every position in the batch (a position it lacks has no attributes), in
        position order: only the slice between the batch's first and last position is read,
        so a batch costs its own span, not every event kept.
        """
        n = len(batch)
        out = np.ones(n, dtype=bool)
        if n == 0 or not (self.sites or self.absences):
            return out
        span = np.asarray(batch.pos, dtype=np.int64)[int(batch.off[0]):int(batch.off[-1])]
        if len(span) and rows.height:
            kept = rows[POS].to_numpy()
            first = int(np.searchsorted(kept, span.min(), side="left"))
            rows = rows.slice(first, int(np.searchsorted(kept, span.max(), side="right")) - first)
        bound = self._bound(batch, rows)
        for a in self.absences:
            out &= ~_blocked(a, batch, bound, rows)
        cache: dict[ast.Predicate, np.ndarray] = {}
        single: dict[str, np.ndarray | None] = {}  # per variable, for every atom reading it
        for site in self.sites:
            active = np.ones(n, dtype=bool)
            for g in site.guards:
                active &= self._present(bound, g, n)
            if not active.any():
                continue
            holds = self._truth(site.predicate, bound, n, cache, single)
            out &= ~active | holds
        return out

    # -- internals

    def _bound(self, batch: MatchBatch, rows: pl.DataFrame) -> pl.DataFrame:
        """(match, variable, attributes) rows: one per event bound to a variable we read."""
        off = np.asarray(batch.off, dtype=np.int64)
        first, last = int(off[0]), int(off[-1])
        match = np.repeat(np.arange(len(batch), dtype=np.int64), np.diff(off))
        events = pl.DataFrame({
            _MATCH: match,
            POS: np.asarray(batch.pos, dtype=np.int64)[first:last],
            "__cer_lab": np.asarray(batch.lab, dtype=np.int64)[first:last],
        })
        wanted = self.variables
        pairs = [(i, v) for i, vs in enumerate(batch.labelsets) for v in vs if v in wanted]
        labels = pl.DataFrame({"__cer_lab": [i for i, _ in pairs], _VAR: [v for _, v in pairs]},
                              schema={"__cer_lab": pl.Int64, _VAR: pl.String})
        attrs = [c for c in self.columns if c in rows.columns]
        table = rows.select(pl.col(POS).cast(pl.Int64), *attrs)
        return (events.join(labels, on="__cer_lab")
                .join(table, on=POS, how="left")
                .drop("__cer_lab"))

    @staticmethod
    def _present(bound: pl.DataFrame, var: str, n: int) -> np.ndarray:
        has = np.zeros(n, dtype=bool)
        has[bound.filter(pl.col(_VAR) == var)[_MATCH].to_numpy()] = True
        return has

    def _truth(self, p: ast.Predicate, bound: pl.DataFrame, n: int,
               cache: dict[ast.Predicate, np.ndarray],
               single: dict[str, np.ndarray | None]) -> np.ndarray:
        if is_atom(p):
            if p not in cache:
                cache[p] = self._atom(p, bound, n, single)
            return cache[p]
        if isinstance(p, ast.And | ast.Or):
            left = self._truth(p.left, bound, n, cache, single)
            right = self._truth(p.right, bound, n, cache, single)
            return left & right if isinstance(p, ast.And) else left | right
        assert isinstance(p, ast.Not)
        return self._truth(push_not(p.operand), bound, n, cache, single)

    @staticmethod
    def _atom(p: ast.Predicate, bound: pl.DataFrame, n: int,
              single: dict[str, np.ndarray | None] | None = None) -> np.ndarray:
        """For all combinations of the events of ``p``'s variables, per match (an empty
        product passes): a per-match cross join, then ``all`` over each match's rows — or,
        when each variable binds at most one event per match, one gathered row per match
        (``_single_atom``). ``single``: the batch's memo of ``_single_row``; None: the join."""
        if prev_refs(p):
            return PostFilter._register_atom(p, bound, n)
        names = sorted(pred_vars(p))
        if not names:  # a constant: one (empty) combination
            single = pl.DataFrame({_MATCH: [0]})
            return np.full(n, single.select(predicate_expression(p, {}, _column)).item())
        refs = {(r.var, r.attr) for r in attr_refs(p)}
        if single is not None:
            rows = {v: PostFilter._single_row(bound, v, n, single) for v in names}
            if all(r is not None for r in rows.values()):
                return PostFilter._single_atom(p, bound, refs, rows, n)
        combos: pl.DataFrame | None = None
        for v in names:
            cols = [pl.col(a).alias(f"{v}.{a}") for a in sorted({a for w, a in refs if w == v})
                    if a in bound.columns]
            events = bound.filter(pl.col(_VAR) == v).select(_MATCH, *cols)
            combos = events if combos is None else combos.join(events, on=_MATCH)
        assert combos is not None
        verdict = combos.group_by(_MATCH).agg(
            predicate_expression(p, combos.schema, _column).all().alias("ok"))
        holds = np.ones(n, dtype=bool)
        holds[verdict[_MATCH].to_numpy()] = verdict["ok"].to_numpy()
        return holds

    @staticmethod
    def _single_row(bound: pl.DataFrame, v: str, n: int,
                    memo: dict[str, np.ndarray | None]) -> np.ndarray | None:
        """The row of ``bound`` holding ``v``'s event in each match (-1: the match has none),
        when every match binds ``v`` at most once — the usual case (no ``+``); None
        otherwise. Found once per batch (``memo``), whatever the atoms reading ``v``."""
        if v not in memo:
            at = np.flatnonzero((bound[_VAR] == v).to_numpy())
            of = bound[_MATCH].to_numpy()[at]
            row = None
            if not len(of) or np.bincount(of, minlength=n).max() <= 1:
                row = np.full(n, -1, dtype=np.int64)
                row[of] = at
            memo[v] = row
        return memo[v]

    @staticmethod
    def _single_atom(p: ast.Predicate, bound: pl.DataFrame, refs: set[tuple[str, str]],
                     rows: dict[str, np.ndarray], n: int) -> np.ndarray:
        """``_atom`` when each variable has at most one event per match (``_single_row``):
        the one combination of a match is its row, gathered by index — no join, no group.
        The same verdicts: a match lacking a variable passes (an empty product), and the
        predicate on the row decides the others (``all`` of one value)."""
        present = np.ones(n, dtype=bool)
        for row in rows.values():
            present &= row >= 0
        at = np.flatnonzero(present)
        cols = {_MATCH: at}
        for v, a in sorted(refs):
            if a in bound.columns:
                cols[f"{v}.{a}"] = bound[a].gather(rows[v][at])
        combos = pl.DataFrame(cols)
        ok = combos.with_columns(predicate_expression(p, combos.schema, _column).alias("__cer_ok"))
        holds = np.ones(n, dtype=bool)
        holds[at] = ok["__cer_ok"].to_numpy()  # never null (``predicate_expression``)
        return holds

    @staticmethod
    def _register_atom(p: ast.Predicate, bound: pl.DataFrame, n: int) -> np.ndarray:
        """``p`` reads y and ``PREV(y)``: one row per consecutive pair of y's events in a
        match (by position), then ``all`` per match; a match with one event of y passes."""
        (y,) = pred_vars(p)
        attrs = sorted({r.attr for r in attr_refs(p)} & set(bound.columns))
        events = bound.filter(pl.col(_VAR) == y).sort(_MATCH, POS)
        pairs = events.select(
            _MATCH,
            *(pl.col(a).alias(f"{y}.{a}") for a in attrs),
            *(pl.col(a).shift(1).over(_MATCH).alias(f"PREV({y}).{a}") for a in attrs),
            (pl.int_range(pl.len()).over(_MATCH) > 0).alias("__cer_has_prev"),
        ).filter(pl.col("__cer_has_prev"))
        verdict = pairs.group_by(_MATCH).agg(
            predicate_expression(p, pairs.schema, _column).all().alias("ok"))
        holds = np.ones(n, dtype=bool)
        holds[verdict[_MATCH].to_numpy()] = verdict["ok"].to_numpy()
        return holds


def _blocked(site: AbsenceSite, batch: MatchBatch, bound: pl.DataFrame,
             rows: pl.DataFrame) -> np.ndarray:
    """One bool per match: an event of its gap (same partition) satisfies ψ with its
    bindings. A match without the gap's bounds (another OR branch) is not blocked."""
    n = len(batch)
    left, right = site.bounds
    cands = (bound.filter(pl.col(_VAR) == left).select(_MATCH, pl.col(POS).alias("__l"))
             .join(bound.filter(pl.col(_VAR) == right).select(_MATCH, pl.col(POS).alias("__r")),
                   on=_MATCH))
    if cands.height == 0:
        return np.zeros(n, dtype=bool)
    keyed = KEY in rows.columns  # else one partition: the kernel's part is 0
    part = (np.asarray(batch.part, dtype=np.int64)[cands[_MATCH].to_numpy()] if keyed
            else np.zeros(cands.height, dtype=np.int64))
    cands = cands.with_columns(pl.Series("__part", part, dtype=pl.Int64))
    for v in sorted(site.match_vars):
        attrs = sorted({r.attr for r in attr_refs(site.correlated) if r.var == v}
                       & set(bound.columns))
        cands = cands.join(bound.filter(pl.col(_VAR) == v)
                           .select(_MATCH, *(pl.col(c).alias(f"{v}.{c}") for c in attrs)),
                           on=_MATCH, how="left")
    out = np.zeros(n, dtype=bool)
    out[gap_hits(site, cands, rows)] = True
    return out


def gap_hits(site: AbsenceSite, cands: pl.DataFrame, rows: pl.DataFrame) -> np.ndarray:
    """The ``_MATCH`` ids of ``cands`` (columns ``_MATCH``, ``__l``, ``__r``, ``__part`` and
    ``v.attr`` per variable ψ reads) with an event of ``rows`` (``POS``, ``KEY``: partition,
    type, stream, attributes) strictly between ``__l`` and ``__r`` in partition ``__part``
    that satisfies ψ with the candidate's bindings. Shared with ``engine.absence``."""
    psi = rows.filter(pl.col(TYPE) == site.etype.name) if TYPE in rows.columns else rows.clear()
    if site.etype.stream is not None:
        psi = psi.filter(pl.col(STREAM) == site.etype.stream) if STREAM in psi.columns \
            else psi.clear()
    if site.unary is not None:
        psi = psi.filter(predicate_expression(site.unary, psi.schema, lambda r: r.attr))
    part = pl.col(KEY).cast(pl.Int64) if KEY in psi.columns else pl.lit(0, pl.Int64)
    psi = psi.with_columns(part.alias("__part"), pl.col(POS).cast(pl.Int64))
    if site.method == "bisect":
        hit = _bisect(site, cands, psi)
    else:
        hit = _scan(site, cands, psi)
    return np.asarray(hit, dtype=np.int64)


#: At most this many (candidate, ψ event) pairs are tested at once by the scan: its memory is
#: this cap, not the product of the candidates and the events kept, and a signal is acted on
#: between two groups of pairs.
SCAN_PAIRS = 1 << 18


def _scan(site: AbsenceSite, cands: pl.DataFrame, psi: pl.DataFrame) -> np.ndarray:
    """Matches with a ψ event in their gap that satisfies ψ with their bindings. ψ's events
    are sorted by (partition, position); each candidate bisects to its gap's slice
    ``(l, r)`` of its partition, and only the pairs in the gaps are formed and tested,
    ``SCAN_PAIRS`` at a time: time linear in those pairs, memory bounded by the cap."""
    mine = sorted({r.attr for r in attr_refs(site.correlated) if r.var == PSI}
                  & set(psi.columns))
    psi = psi.sort("__part", POS)
    lo, hi = gap_slices(psi["__part"].to_numpy(), psi[POS].to_numpy(), cands["__part"].to_numpy(),
                        cands["__l"].to_numpy(), cands["__r"].to_numpy())
    theirs = cands.drop("__l", "__r", "__part")  # the id and the bindings ψ reads
    values = psi.select(pl.col(POS).alias("__cer_psi_pos"),  # rows even if ψ reads no column
                        *(pl.col(c).alias(f"{PSI}.{c}") for c in mine))
    hits = [np.zeros(0, dtype=np.int64)]
    for cand, event in gap_pairs(lo, hi, SCAN_PAIRS):
        signals.check()
        pairs = pl.concat([theirs[cand], values[event]], how="horizontal")
        ok = pairs.filter(predicate_expression(site.correlated, pairs.schema, _column))
        hits.append(ok[_MATCH].unique().to_numpy())
    return np.unique(np.concatenate(hits))


def gap_pairs(lo: np.ndarray, hi: np.ndarray, cap: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every (gap, event) pair of the slices ``[lo[i], hi[i])``, in order, as two index
    arrays of at most ``cap`` pairs each (a gap may be split between two groups)."""
    counts = hi - lo
    ends = np.cumsum(counts)
    total = int(ends[-1]) if len(ends) else 0
    for first in range(0, total, cap):
        k = np.arange(first, min(total, first + cap), dtype=np.int64)
        gap = np.searchsorted(ends, k, side="right")  # gap i holds [ends[i] - counts[i], ends[i])
        yield gap, lo[gap] + k - (ends[gap] - counts[gap])


def gap_slices(part: np.ndarray, pos: np.ndarray, cpart: np.ndarray, left: np.ndarray,
               right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For events sorted by (``part``, ``pos``) (positions distinct) and gaps (``cpart``,
    ``left``, ``right``): per gap the index range ``[lo, hi)`` of its partition's events
    strictly between ``left`` and ``right``. Bisection on one sorted int64 key, the
    partition's rank times (n + 1) plus the position's rank: O((n + gaps) log n)."""
    n = len(pos)
    if n == 0:
        zero = np.zeros(len(cpart), dtype=np.int64)
        return zero, zero.copy()
    parts, prank = np.unique(part, return_inverse=True)
    order = np.sort(pos)
    key = prank.astype(np.int64) * (n + 1) + np.searchsorted(order, pos)
    cj = np.searchsorted(parts, cpart)
    known = parts[np.minimum(cj, len(parts) - 1)] == cpart
    base = cj.astype(np.int64) * (n + 1)
    lo = np.searchsorted(key, base + np.searchsorted(order, left, side="right"))
    hi = np.searchsorted(key, base + np.searchsorted(order, right, side="left"))
    hi = np.where(known & (hi > lo), hi, lo)
    return lo.astype(np.int64), hi.astype(np.int64)


def _bisect(site: AbsenceSite, cands: pl.DataFrame, psi: pl.DataFrame) -> np.ndarray:
    """Matches whose first ψ event after ``l`` with the candidate's value of ψ.a lies
    before ``r``: an as-of join by (partition, value) on sorted positions."""
    mine, theirs = site.key
    (v,) = sorted(pred_vars(theirs))
    pair = join_pair(value_expression(theirs, {c.split(".", 1)[1]: t
                                               for c, t in cands.schema.items()
                                               if c.startswith(v + ".")}),
                     value_expression(mine, psi.schema))
    if pair is None:
        return np.zeros(0, dtype=np.int64)
    ce, pe = pair  # one dtype, equal exactly when `=` holds
    plain = cands.rename({c: c.split(".", 1)[1] for c in cands.columns if c.startswith(v + ".")})
    left = (plain.select(_MATCH, "__l", "__r", "__part", ce.alias("__v"))
            .drop_nulls("__v").sort("__l"))
    right = (psi.select("__part", POS, pe.alias("__v")).drop_nulls("__v")
             .sort(POS))
    if left.schema["__v"] != right.schema["__v"]:
        right = right.with_columns(pl.col("__v").cast(left.schema["__v"], strict=False))
    found = left.join_asof(right, left_on="__l", right_on=POS, by=["__part", "__v"],
                           strategy="forward", allow_exact_matches=False, check_sortedness=False)
    return found.filter(pl.col(POS).is_not_null() & (pl.col(POS) < pl.col("__r")))[_MATCH].to_numpy()
