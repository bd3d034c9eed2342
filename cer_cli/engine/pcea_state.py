"""The compiled hash join's state: the arrays of ``engine/pcea_kernel.py`` across slices.

``JoinState`` owns everything the kernel reads and writes — the PCEA's tables, DS_w's
nodes, the ordered indexes' trees, the hash table of index entries, the scratch and output
arrays — and answers what ``pcea_kernel.run_events`` returns for: it grows an array when
the kernel says one is full (the kernel undoes the event, or resumes the enumeration),
compacts when the arrays doubled since the last compaction (so memory follows the window,
not the log), hands the outputs over as ``MatchBatch`` es, and runs Python's signal
handlers every budget of work (so Ctrl-C acts within a second, even inside one event's
enumeration).

What the kernel supports (``unsupported`` says why not, and ``HashJoinEngine`` then runs
its Python objects): every PCEA — carried keys, iterated steps ``(E AS y)+`` and their
registers included — under no window, a ``WITHIN n EVENTS`` window or a time or
attribute window over integer times, whose compared values are numbers (compared as
float64: integers beyond 2^53 in the first frame choose the Python objects; in a later
frame they are refused, exit 2, rather than rounded).

Events are given as the per-event columns the kernel reads: the bit mask of the states an
event may take, its position, partition id and window time, its equality keys as
canonical ids (``CV``: one id per distinct value of a class, equal exactly when ``=``
holds) and its compared values (``CMPV``, NaN for none).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from cer_cli import signals
from cer_cli.compiler.pcea import PCEA
from cer_cli.compiler.predicates import comparison_pair, value_expression
from cer_cli.engine import jit as loader
from cer_cli.engine import ordered_kernel as O
from cer_cli.engine import pcea_kernel as K
from cer_cli.engine.kernel_state import handed_over
from cer_cli.events import MatchBatch
from cer_cli.query.errors import QueryError
from cer_cli.query.printer import shown

MODULES = ("cer_cli.engine.pcea_kernel", "cer_cli.engine.ordered_kernel")

#: work units (events, nodes made, runs visited) between two returns to Python: ~10 ms
#: compiled, a few ms in plain Python (where each unit costs far more)
BUDGET_COMPILED = 1 << 20
BUDGET_PLAIN = 1 << 11

#: the lowest window time (no window, or none seen yet): below every real one
NEG = -(1 << 62)

#: a compaction is not worth it below this many nodes
MIN_COMPACT = 1 << 16

#: the arrays' first sizes (rows): they double when full; tests make them tiny to take
#: every growth path
ROOM = 1024
#: matches per output batch at first (they double when one event's candidates need more)
OUTPUT = 16384

#: integers that float64 holds exactly (the compared values' type in the kernel)
EXACT = 1 << 53


def unsupported(pcea: PCEA) -> str | None:
    """Why the array kernel cannot run this hash join (None: it can). Checked once, on the
    PCEA; the compared values' and the window times' types are checked on the first frame."""
    if len(pcea.states) > 62:
        return "more than 62 states"
    consumed = {p for t in pcea.transitions for p in t.sources}
    if any(q not in consumed and q not in pcea.finals for q in range(len(pcea.states))):
        return "a state no transition consumes"
    return None


class Tables:
    """The PCEA as the kernel's tables (``pcea_kernel``'s layout), and which column of ``CV``
    / ``CMPV`` each key and compared value is: ``cv`` lists ``(state, class)`` per ``CV``
    column, ``cmp`` ``(transition, source, side)`` per ``CMPV`` column (side 0: the key on
    the adopted event, 1: the probe on the new one)."""

    def __init__(self, pcea: PCEA, labels: list[tuple[str, ...]]) -> None:
        S = len(pcea.states)
        #: the distinct non-empty label sets (``MatchBatch.labelsets``); ``labels[q]``: state q's
        self.labelsets = sorted(set(labels) - {()})
        self.S = S
        self.cv: list[tuple[int, int]] = []
        self.cmp: list[tuple[int, int, int]] = []
        specs: list[tuple[int, ...]] = [()]
        spec_of: dict[tuple, int] = {(): 0}

        def column(s: int, cls: int) -> int:
            if (s, cls) not in self.cv:
                self.cv.append((s, cls))
            return self.cv.index((s, cls))

        def spec(s: int, classes: tuple[int, ...], carried: bool = False) -> int:
            """The key of ``classes`` on state s's event; ``carried``: on its run, whose
            carried classes come from the run's carried values (``-1 - i``: the i-th)."""
            slot = {c: i for i, (c, _) in enumerate(pcea.states[s].carried)} if carried else {}
            cols = tuple(-1 - slot[c] if c in slot else column(s, c) for c in classes)
            if cols not in spec_of:
                spec_of[cols] = len(specs)
                specs.append(cols)
            return spec_of[cols]

        # carried keys (``State.carried``): the runs a carrying transition adopts wait in a
        # nested entry, one child per carried value (``MODE_NESTED``); a state whose runs
        # carry a value builds its key per run (``MODE_PER_RUN``)
        nest = [False] * S
        for t in pcea.transitions:
            if t.carried:
                for p in t.sources:
                    nest[p] = True

        qt = np.zeros((S, K.QT_WIDTH), np.int64)
        sl = np.zeros((2 * S, K.SL_WIDTH), np.int64)
        sl[:, K.L_OCOL] = -1
        rows = []
        for q, t in enumerate(pcea.transitions):
            qt[q, K.Q_SOFF] = len(rows)
            qt[q, K.Q_SCNT] = len(t.sources)
            for j, (p, k) in enumerate(zip(t.sources, t.keys, strict=True)):
                c = t.compare(j)
                rel, pv = -1, 0
                if c is not None:
                    rel = O.REL_CODES[c.rel]
                    sl[p, K.L_OCOL] = len(self.cmp)
                    self.cmp.append((q, j, 0))
                    pv = len(self.cmp)
                    self.cmp.append((q, j, 1))
                rows.append((p, rel, spec(q, k), pv))
                if nest[p] or pcea.states[p].carried:
                    sl[p, K.L_MODE] = K.MODE_NESTED if nest[p] else K.MODE_PER_RUN
                    sl[p, K.L_OWN] = spec(p, k, carried=True)
                    sl[p, K.L_CAR] = spec(p, t.carried[j] if t.carried else (), carried=True)
                else:
                    sl[p, K.L_MODE] = K.MODE_COLUMN
                    sl[p, K.L_KEY] = spec(p, k)
            qt[q, K.Q_CARRY] = int(bool(t.carried))
            qt[q, K.Q_NCAR] = len(pcea.states[q].carried)
        for q in range(S):
            qt[q, K.Q_LREL] = -1
            qt[q, K.Q_FINAL] = int(q in pcea.finals)
            qt[q, K.Q_SLOTA] = -1 if q in pcea.finals else q
            qt[q, K.Q_SLOTB] = -1
            qt[q, K.Q_LAB] = self.labelsets.index(labels[q]) if labels[q] else -1
        for q, state in enumerate(pcea.states):
            if not state.step.loop:
                continue
            # ``(E AS y)+``: the loop index (slot S + q) holds q's runs under all of q's
            # classes, probed with the new event's; a register compares through an ordered
            # index (``cmp`` entries ``(q, -1, side)``)
            own = spec(q, tuple(c for c, _ in state.classes))
            qt[q, K.Q_LOOP] = 1
            qt[q, K.Q_LKEY] = own
            qt[q, K.Q_SLOTB] = S + q
            if state.carried:  # the carried values nested under the event's own key
                sl[S + q, K.L_MODE] = K.MODE_NESTED
                sl[S + q, K.L_OWN] = own
                sl[S + q, K.L_CAR] = spec(q, tuple(c for c, _ in state.carried), carried=True)
            else:
                sl[S + q, K.L_MODE] = K.MODE_COLUMN
                sl[S + q, K.L_KEY] = own
            c = pcea.register(q)
            if c is not None:
                qt[q, K.Q_LREL] = O.REL_CODES[c.rel]
                sl[S + q, K.L_OCOL] = len(self.cmp)
                self.cmp.append((q, -1, 0))
                qt[q, K.Q_LPV] = len(self.cmp)
                self.cmp.append((q, -1, 1))
        self.qt = qt
        self.sl = sl
        self.src = np.array(rows or [(0, -1, 0, 0)], np.int64).reshape(-1, K.SRC_WIDTH)
        self.kso = np.zeros((len(specs), 2), np.int64)
        kse = []
        for i, cols in enumerate(specs):
            self.kso[i] = (len(kse), len(cols))
            kse += cols
        self.kse = np.array(kse or [0], np.int64)
        self.kw = K.K_IDS + max(len(c) for c in specs)
        self.max_sources = max([len(t.sources) for t in pcea.transitions] + [1])
        #: the most values a run carries (``nwc``'s width)
        self.max_carried = max([len(st.carried) for st in pcea.states] + [1])


def compared_columns(pcea: PCEA, tables: Tables, schema) -> list[tuple] | str:
    """Per ``tables.cmp`` column that some comparison fills: ``(column, expression, kind,
    node, value)``: the expression of the compared value of each event as float64 (NaN: none)
    and of the value itself (``_beyond_exact`` reads it); or
    why the kernel cannot compare them (not numbers). Built once per schema: a run's frames
    share theirs."""
    out = []
    for i in range(0, len(tables.cmp), 2):
        q, j, _ = tables.cmp[i]
        c = pcea.register(q) if j < 0 else pcea.transitions[q].compare(j)
        key, probe = value_expression(c.key, schema), value_expression(c.probe, schema)
        pair = comparison_pair(key, probe)
        if pair is None:
            continue  # never comparable: never inserted, never found
        if key[1] not in ("int", "float") or probe[1] not in ("int", "float"):
            return f"compared values of kind {key[1]} and {probe[1]} (not numbers)"
        for side, kind, node in ((0, key[1], c.key), (1, probe[1], c.probe)):
            expr = pair[side].cast(pl.Float64).fill_null(float("nan")).alias(f"__cer_cmp{i + side}")
            out.append((i + side, expr, kind, node, pair[side]))
    return out


def _beyond_exact(frame, col: np.ndarray, value) -> bool:
    """Whether an integer compared value of ``frame`` (``value``, its expression; ``col``, the
    same as float64) is beyond 2^53, where float64 rounds. Decided on the integers: 2^53 + 1
    rounds to 2^53, so the floats alone cannot tell it from 2^53 (exact). The floats only
    say when to look: no integer under 2^53 becomes a float of 2^53 or more."""
    if not col.size or not max(-np.fmin.reduce(col), np.fmax.reduce(col)) >= EXACT:
        return False
    lo, hi = frame.select(value.min().alias("lo"), value.max().alias("hi")).row(0)
    return max(abs(lo or 0), abs(hi or 0)) > EXACT


def compared_values(pcea: PCEA, tables: Tables, frame, schema, first: bool = False,
                    columns: list[tuple] | None = None, got=None) -> np.ndarray | str:
    """``CMPV``: per ``tables.cmp`` column, the compared value of each event as float64 (NaN:
    none), or why the kernel cannot compare them: not numbers, or (``first``: the run's
    first frame, which still chooses the Python objects) integers beyond 2^53, which float64
    would round. A later frame with such an integer is refused (exit 2): the run's runs are
    in the arrays by then. ``columns`` (``compared_columns``) and ``got`` (the frame's
    selection of their expressions) when the caller has them already."""
    if columns is None:
        columns = compared_columns(pcea, tables, schema)
        if isinstance(columns, str):
            return columns
    if got is None:
        got = frame.select(c[1] for c in columns) if columns else None
    out = np.full((max(1, len(tables.cmp)), frame.height), np.nan)
    for i, expr, kind, node, value in columns:
        col = got[expr.meta.output_name()].to_numpy()
        if kind == "int" and _beyond_exact(frame, col, value):
            if first:
                return "compared integers beyond 2^53 (float64 would round them)"
            raise QueryError(
                f"the log has an integer beyond 2^53 in {shown(node)}, which the compiled hash"
                " join would compare inexactly (as float64)",
                hints=["run with CER_HJ_KERNEL=0: the hash join as Python objects, exact"])
        out[i] = col
    return out


class JoinState:
    """The compiled hash join's arrays across the slices of one run (see the module
    docstring). ``jit``: compiled if True, plain Python if False, ``None``: plain until
    ``JIT_MIN_EVENTS`` events were seen (both run on the same arrays)."""

    def __init__(self, pcea: PCEA, labels: list[tuple[str, ...]], bound: int | None,
                 jit: bool | None = None, budget: int | None = None,
                 timed: bool = False) -> None:
        """``labels[q]``: the labels a match reports for state q's event (projected).
        ``timed``: a time or attribute window, over integer times (``feed``'s ``tt``) that
        some events lack (its ``hast``) and one window for all partitions; its bound is
        then floored, exact for integer times (``t >= ft - b`` iff ``t >= ft - floor(b)``)."""
        self.tables = T = Tables(pcea, labels)
        self.labelsets = tuple(T.labelsets)
        self.windowed = bound is not None
        self.timed = timed
        self.bound = 0 if bound is None else math.floor(bound)
        self.jit = loader.jit_forced() if jit is None else jit
        self._fns = self._load() if self.jit else {}
        self._budget = budget
        i64 = np.int64
        R, r = ROOM, max(4, ROOM // 16)
        self.hi = np.zeros((R, K.HI_WIDTH), i64)
        self.hm = np.zeros((R, 2), i64)
        self.ti = np.zeros((R, O.TI_WIDTH), i64)
        self.tm = np.zeros((R, 3), i64)
        self.tk = np.zeros(R, np.float64)
        self.bi = np.zeros((R // 4, K.BI_WIDTH), i64)
        self.bm = np.zeros(R // 4, i64)
        self.pc = np.zeros(R, i64)
        self.pr = np.zeros(R, i64)
        self.hk = np.zeros((_pow2(R), T.kw), i64)
        self.hv = np.zeros((_pow2(R), K.HV_WIDTH), i64)
        self.jn = np.zeros((R // 4, 3), i64)
        self.st = np.zeros(K.NSLOTS, i64)
        self.st[K.NEXT_COMPACT] = MIN_COMPACT
        self.now = np.array([NEG, NEG], i64)
        self.sk, self.sk2, self.sk3 = (np.zeros((r, 2), i64) for _ in range(3))
        self.psc = np.zeros(r, i64)
        self.kids = np.zeros(T.max_sources, i64)
        self.kr = np.zeros((2, T.kw), i64)
        self.nw = np.zeros(r, i64)
        self.nwc = np.zeros((r, T.max_carried), i64)
        self.fin = np.zeros(r, i64)
        self.es = np.zeros((R // 4, 5), i64)
        self.ta = np.zeros((R // 4, 2), i64)
        self.ep = np.zeros((r, 3), i64)
        #: ``_count_dag``'s counts per reference (count, stamp): grown with ``hi``/``ti``/``bi``
        self.cm = np.zeros((1, 3, 2), i64)
        #: the matches of events whose count passed int64 (``NEED_BIG``), counted exactly here
        self.big_matches = 0
        self._cm_exact = np.zeros((0, 3, 2), object)  # ``cm`` in Python integers
        self._outputs(OUTPUT, 4 * OUTPUT)
        #: per partition id: the latest window time fed (what compaction keeps runs for)
        self.last = np.full(16, NEG, i64)
        self._room_fails = (-1, 0)

    def _load(self) -> dict:
        """The compiled kernel; the CLI's notice first when loading it means compiling."""
        return loader.compiled_for_run(*MODULES)

    def _fn(self, name: str):
        return self._fns.get(name) or getattr(K, name)

    @property
    def compiled(self) -> bool:
        """Whether the kernel runs numba-compiled now."""
        return bool(self._fns)

    def _outputs(self, matches: int, events: int) -> None:
        """Output arrays with room for ``matches`` and ``events`` (not zeroed: the kernel
        writes every cell it reports, and ``o_off[0]``)."""
        i64 = np.int64
        self.o_start = np.empty(matches, i64)
        self.o_end = np.empty(matches, i64)
        self.o_part = np.empty(matches, i64)
        self.o_off = np.empty(matches + 1, i64)
        self.o_off[0] = 0
        self.o_pos = np.empty(events, i64)
        self.o_lab = np.empty(events, i64)

    # ------------------------------------------------------------------ feeding

    def feed(self, act, pos, part, tt, CV, CMPV, emit: bool, decide: bool, partitions: dict,
             hast=None):
        """Feed one slice's events; yields a ``MatchBatch`` of candidates whenever the
        outputs are full and at the end (``emit``; with ``decide`` each event's candidates
        stay in one batch). Without ``emit`` nothing is yielded: ``st[MATCHES]`` counts.
        ``tt``: each event's window time (its position in its partition for an EVENTS
        window); ``hast``: whether it has one (a timed window; else every event has)."""
        n = len(act)
        if self.jit is None and int(self.st[K.EVENTS]) + n >= loader.JIT_MIN_EVENTS:
            self.jit = True
            self._fns = self._load()
        self.st[K.BUDGET] = self._budget or (BUDGET_COMPILED if self._fns else BUDGET_PLAIN)
        if part.size and part.max() >= len(self.last):
            grown = np.full(max(2 * len(self.last), int(part.max()) + 1), NEG, np.int64)
            grown[:len(self.last)] = self.last
            self.last = grown
        if hast is None:
            hast = np.ones(n, np.int64)
        elif not self.st[K.NO_FLATS] and n and not hast.all():
            # from this slice on, runs may start at events without a time: checked per run
            self.st[K.NO_FLATS] = 1
        act, pos, part, tt, hast, CV, CMPV = loader.readonly(act, pos, part, tt, hast, CV, CMPV)
        T = self.tables
        i = 0
        self._noted = 0
        while True:
            if not emit and self.st[K.DAG_COUNT]:
                self._memo_room()
            run = self._fn("run_events")
            status, i = run(
                i, n, T.S, T.kw, self.timed, self.windowed, self.bound, NEG, emit, decide,
                act, pos, part, tt, hast, CV, CMPV, T.qt, T.sl, T.src, T.kso, T.kse,
                self.hi, self.hm, self.ti, self.tm, self.tk, self.bi, self.bm, self.pc, self.pr,
                self.hk, self.hv, self.jn, self.st, self.now,
                self.sk, self.sk2, self.sk3, self.psc, self.kids, self.kr, self.nw, self.nwc,
                self.fin, self.es, self.ta, self.ep, self.cm,
                self.o_start, self.o_end, self.o_part, self.o_off, self.o_pos, self.o_lab)
            if status == K.DONE:
                break
            if status == K.NEED_YIELD:
                signals.check()
                continue
            if status == K.NEED_BIG:
                self.st[K.E_ON] = 0
                if self.st[K.MATCHES]:  # the count so far moves here; the event again
                    self.big_matches += int(self.st[K.MATCHES])
                    self.st[K.MATCHES] = 0
                    continue
                self.big_matches += self._exact_count()
                self.st[K.PHASE] = K.PH_UPDATE
                i += 1
                continue
            if status == K.NEED_COMPACT:
                self._note_times(part, tt, i)
                self._compact()
                continue
            what = int(self.st[K.NEED_WHAT])
            if status == K.NEED_ROOM:
                self._note_times(part, tt, i)
                self._grow(what, i)
                continue
            # NEED_OUT: an enumeration array, or the outputs (flushed when they hold whole
            # events, else grown)
            if what == K.W_OUT and self.st[K.N_OUT] > 0 and (not decide or self.st[K.E_ON] == 0):
                yield self._flush(partitions)
                continue
            self._grow(what, i)
        self._note_times(part, tt, n)
        if emit and self.st[K.N_OUT] > 0:
            yield self._flush(partitions)

    def _memo_room(self) -> None:
        """``cm`` with a row per node id of ``hi``, ``ti`` and ``bi`` (its counts kept: an
        event's count may be under way)."""
        rows = max(len(self.hi), len(self.ti), len(self.bi))
        if len(self.cm) < rows:
            cm = np.zeros((rows, 3, 2), np.int64)
            cm[:len(self.cm)] = self.cm
            self.cm = cm

    def _exact_count(self) -> int:
        """The event's count over the DAG (``_count_dag``) in Python integers, when the
        kernel's passed int64: the plain function over counts of Python integers (a
        register over a rising log has 2^w runs per event). Exact at any size; plain Python
        costs ~80x compiled (6.6 against 0.08 ms per event on a rising log within 61 events),
        and only such events take it: ``HashJoinEngine._objects_count`` keeps the queries
        whose events may pass int64 on the Python objects."""
        count_dag = loader.plain("_count_dag", K.__name__)
        if len(self._cm_exact) < len(self.cm):  # kept: its stamps tell the events apart
            self._cm_exact = np.zeros(self.cm.shape, object)
        cm = self._cm_exact
        es = self.es
        while True:
            self.st[K.E_ON] = 0
            got = count_dag(self.hi, self.hm, self.ti, self.tm, self.bi, self.bm, self.pc,
                            self.pr, self.st, self.fin, es, cm, self.now[K.NOW_LO], math.inf,
                            True)
            if got != -K.NEED_OUT:
                break
            es = _doubled(es)
        self.st[K.E_ON] = 0
        self.st[K.WORK] = 0
        return got

    def _note_times(self, part, tt, i: int) -> None:
        """Remember each partition's latest window time among the events fed before ``i``
        (what ``_compact`` keeps runs for; a timed window has one for all, ``now``)."""
        if i > self._noted and not self.timed:
            np.maximum.at(self.last, part[self._noted:i], tt[self._noted:i])
            self._noted = i

    def _flush(self, partitions: dict) -> MatchBatch:
        nm, ne = int(self.st[K.N_OUT]), int(self.st[K.N_EV])
        out = (self.o_start[:nm], self.o_end[:nm], self.o_part[:nm], self.o_off[:nm + 1],
               self.o_pos[:ne], self.o_lab[:ne])
        if handed_over(nm, len(self.o_start)):  # as the CEA kernel's outputs
            self._outputs(len(self.o_start), len(self.o_pos))
        else:
            out = tuple(a.copy() for a in out)
        batch = MatchBatch(*out, self.labelsets, partitions)
        self.st[K.N_OUT] = 0
        self.st[K.N_EV] = 0
        self.st[K.E_OUT0] = 0
        self.st[K.E_EV0] = 0
        return batch

    # ------------------------------------------------------------------ room

    def _grow(self, what: int, i: int) -> None:
        """Double the array the kernel found full (``W_*``)."""
        W = K
        if what == W.W_HEAP:
            self.hi, self.hm = _doubled(self.hi), _doubled(self.hm)
        elif what == W.W_TREE:
            self.ti, self.tm, self.tk = _doubled(self.ti), _doubled(self.tm), _doubled(self.tk)
        elif what == W.W_BUNDLE:
            self.bi, self.bm = _doubled(self.bi), _doubled(self.bm)
        elif what == W.W_PIECES:
            self.pc = _doubled(self.pc)
        elif what == W.W_PROD:
            self.pr = _doubled(self.pr)
        elif what == W.W_TABLE:
            self._compact(2 * self.hk.shape[0])
        elif what == W.W_JOURNAL:
            self.jn = _doubled(self.jn)
        elif what == W.W_STACK:
            # a scratch stack, or the tree arrays (``t_insert`` says FAIL for both): the
            # stacks first; the trees too when half full or failing again at this event
            again = self._room_fails[0] == i
            self._room_fails = (i, self._room_fails[1] + 1 if again else 1)
            self.sk, self.sk2, self.sk3 = _doubled(self.sk), _doubled(self.sk2), _doubled(self.sk3)
            self.psc = _doubled(self.psc)
            if again or 2 * self.st[O.NT] >= self.ti.shape[0]:
                self.ti, self.tm, self.tk = _doubled(self.ti), _doubled(self.tm), _doubled(self.tk)
        elif what == W.W_NEW:
            self.nw, self.nwc, self.fin = _doubled(self.nw), _doubled(self.nwc), _doubled(self.fin)
        elif what == W.W_ESTACK:
            self.es = _doubled(self.es)
        elif what == W.W_TODO:
            self.ta = _doubled(self.ta)
        elif what == W.W_PATH:
            self.ep = _doubled(self.ep)
        elif what == W.W_OUT:
            m = self.o_start.shape[0]
            ne = max(2 * self.o_pos.shape[0], int(self.st[K.N_EV]) + int(self.st[K.NEED_SIZE]) + 1)
            old = (self.o_start, self.o_end, self.o_part, self.o_off, self.o_pos, self.o_lab)
            self._outputs(2 * m, ne)
            for new, o in zip((self.o_start, self.o_end, self.o_part, self.o_off, self.o_pos,
                               self.o_lab), old, strict=True):
                new[:len(o)] = o
        else:  # pragma: no cover - a code the kernel does not return
            raise AssertionError(f"pcea_kernel asked for room of unknown kind {what}")

    def _lows(self) -> np.ndarray:
        """Per partition id, the lowest start a live run can have: its latest window time
        less the bound (NEG: no event yet, or no window); a timed window's is one for all."""
        if not self.windowed:
            return np.full_like(self.last, NEG)
        if self.timed:
            ft = int(self.now[K.NOW_FTIME])
            return np.full_like(self.last, NEG if ft == NEG else ft - self.bound)
        return np.where(self.last == NEG, NEG, self.last - self.bound)

    def _compact(self, cap: int | None = None) -> None:
        """Drop what no live run reaches (``pcea_kernel.compact``), then leave room: the
        next compaction when the arrays doubled again (``NEXT_COMPACT``), no array more
        than a quarter full, and an array that filled up before that doubled — so that
        compactions, each costing what it keeps, come once per as many allocations
        rather than every few events of a small window."""
        plo = self._lows()
        st = self.st
        groups = ((K.NH, ("hi", "hm")), (O.NT, ("ti", "tm", "tk")), (K.NB, ("bi", "bm")),
                  (K.NPC, ("pc",)), (K.NPR, ("pr",)))
        full = [4 * st[used] > 3 * getattr(self, names[0]).shape[0] for used, names in groups]
        cap = cap or self.hk.shape[0]
        compact = self._fn("compact")
        while True:
            self.hk, self.hv = compact(self.hi, self.hm, self.ti, self.tm, self.tk, self.bi,
                                       self.bm, self.pc, self.pr, self.hk, self.hv, st,
                                       plo, self.tables.kw, cap)
            if 4 * st[K.HUSED] <= cap:
                break
            cap *= 2
        for (used, names), filled in zip(groups, full, strict=True):
            while filled or 4 * st[used] > getattr(self, names[0]).shape[0]:
                filled = False
                for a in names:
                    setattr(self, a, _doubled(getattr(self, a)))
        st[K.NEXT_COMPACT] = max(MIN_COMPACT, 2 * (st[K.NH] + st[O.NT] + st[K.NB]))

    # ------------------------------------------------------------------ statistics

    def counters(self) -> dict:
        st = self.st
        return {"extends": int(st[K.C_EXTENDS]), "unions": int(st[K.C_UNIONS]),
                "union_nodes": int(st[K.C_UNION_NODES]), "tree_nodes": int(st[K.C_TREE_NODES]),
                "probes": int(st[K.C_PROBES]), "tree_inserts": int(st[K.C_TREE_INSERTS]),
                "flat_lists": int(st[K.C_FLATS]), "in_place": int(st[K.C_IN_PLACE]),
                "compactions": int(st[K.COMPACTIONS]), "events": int(st[K.EVENTS]),
                "matches": int(st[K.MATCHES]) + self.big_matches}

    def key_ids_held(self) -> np.ndarray:
        """Every canonical key id an entry of the index holds (live or not yet compacted
        away): the ids a dictionary of key values must keep."""
        return np.unique(self.hk[self.hv[:, K.V_USED] != 0, K.K_IDS:])

    def live_entries(self) -> int:
        plo = self._lows()
        return int(self._fn("live_entries")(self.hk, self.hv, self.hm, self.tm, self.bm, plo))


def _pow2(n: int) -> int:
    """The least power of two at least ``n`` (the hash table's size)."""
    return 1 << max(2, (n - 1).bit_length())


def _doubled(a: np.ndarray) -> np.ndarray:
    out = np.zeros((2 * a.shape[0],) + a.shape[1:], a.dtype)
    out[:a.shape[0]] = a
    return out
