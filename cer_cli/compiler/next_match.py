"""Skip-till-next-match with predicates between events: the sequences a run can follow
event by event (SASE's "next match", Siddhi's ``every a -> b -> c``, Flink's ``followedBy``).

A query whose rewritten formula is a ``;`` sequence of single events ``s0 ; !ψ0 ; s1 ; !ψ1 ;
… ; sn`` with an absence in *every* gap has few runs: a run that has taken ``s0 … sk`` may
take, as ``s(k+1)``, only the events after its last one up to the first event that satisfies
ψk (which closes the gap; docs/language.md, "Absence"). When ψk is what ``s(k+1)`` asks for
(``A AS a ;> B AS b FILTER b.v > a.v``, written ``A AS a ; !(B AS b0 FILTER b0.v > a.v) ; B
AS b``), that is one event: the first that satisfies it, and each first event starts at
most one match. So the runs can be followed one by one through the log (``engine.next_match``
scans each gap of each run once), instead of enumerating the relaxed pattern's candidates
and testing their gaps (the post-filter), whose number grows with the window's events to the
power of the sequence's length.

``plan_next_match`` recognises the next-match form (every ψ is what the next step asks for:
a run takes at most one event per step; ``engine.next_match`` also follows runs that take
several, but the planner leaves those queries to the post-filter, as before) from the
correlation rules' outcome: every
predicate between events left in the query (``correlation.Site``) and every comparison of a
correlated ψ with the match (``correlation.AbsenceSite``) must be a comparison ``e1 op e2``
(``op`` any of ``< <= > >= = !=``) whose sides each read one variable, each variable bound by
exactly one step, checked when the later of the two is taken (a ψ compares with steps at or
before its gap). Uncorrelated ψs (kept in the formula's ``Seq.absent``) close their gaps as
they are. Strategies ALL and ANY, no CONSUME BY; SELECT, FROM, PARTITION BY, WITHIN and LIMIT
apply as for the other executors.
"""

from __future__ import annotations

from dataclasses import dataclass

from cer_cli.compiler.comparisons import FLIP
from cer_cli.compiler.correlation import PSI, AbsenceSite, Site
from cer_cli.compiler.pcea import Step, _Unsupported, branches
from cer_cli.query import ast
from cer_cli.query.printer import to_text
from cer_cli.query.scope import conjuncts, pred_vars, prev_refs, strip_var


@dataclass(frozen=True)
class Compare:
    """``key rel probe``: ``key`` read on the run's event of step ``src``, ``probe`` on the
    event scanned (a candidate for the next step, or a ψ event); ``text`` as written."""

    src: int
    key: ast.Expr
    rel: str
    probe: ast.Expr
    text: str


@dataclass(frozen=True)
class Gap:
    """The absence between step k and k + 1: ``psi`` is ψ's event type with its own filters
    (what an event must be to close the gap), ``compares`` its comparisons with the run."""

    psi: ast.Formula
    compares: tuple[Compare, ...]
    text: str


@dataclass(frozen=True)
class NextMatch:
    """A sequence of single-event ``steps`` with a ``Gap`` between each two; ``joins[k]``:
    the predicates between events checked when a run takes step k (empty for step 0)."""

    steps: tuple[Step, ...]
    gaps: tuple[Gap, ...]
    joins: tuple[tuple[Compare, ...], ...]
    select: frozenset[str] | None
    predicates: tuple[str, ...]

    @property
    def compares(self) -> tuple[Compare, ...]:
        """Every comparison: the joins of each step, then the gaps' (the executor's order)."""
        return tuple(c for j in self.joins for c in j) + tuple(c for g in self.gaps
                                                                 for c in g.compares)

    @property
    def deterministic(self) -> bool:
        """Every gap's ψ is exactly what the next step asks for: each run takes at most one
        event per step, so each first event starts at most one match."""
        return all(_shape(g.psi, g.compares) == _shape(step_formula(s), j)
                   for g, s, j in zip(self.gaps, self.steps[1:], self.joins[1:], strict=True))

    def describe(self) -> str:
        parts = [self.steps[0].text()]
        for gap, step, joins in zip(self.gaps, self.steps[1:], self.joins[1:], strict=True):
            on = f" [{', '.join(c.text for c in joins)}]" if joins else ""
            parts.append(f"─{gap.text}→ {step.text()}{on}")
        return "sequence " + " ".join(parts)


def step_formula(s: Step) -> ast.Formula:
    """A step as the formula of one event: its type (and stream) under its own filters."""
    out: ast.Formula = ast.EventType(s.name, s.stream)
    for p in sorted(s.filters, key=to_text):
        out = ast.Filter(out, p)
    return out


def _shape(psi: ast.Formula, compares) -> tuple:
    """What an event must satisfy, comparable between a ψ and a step: type, stream, own
    filters and comparisons, with the variables erased."""
    filters, atom = [], psi
    while isinstance(atom, (ast.As, ast.Filter)):
        if isinstance(atom, ast.Filter):
            filters += [to_text(strip_var(c)) for c in conjuncts(atom.predicate)]
        atom = atom.formula
    return (atom.name, atom.stream, frozenset(filters), frozenset(
        (c.src, to_text(strip_var(ast.Compare(c.rel, c.key, c.probe)))) for c in compares))


def _sides(p: ast.Predicate) -> tuple[str, ast.Expr, str, str, ast.Expr] | None:
    """``(x, ex, op, y, ey)`` for ``ex op ey`` whose sides read one variable each."""
    if not isinstance(p, ast.Compare) or prev_refs(p):
        return None
    lv, rv = pred_vars(p.left), pred_vars(p.right)
    if len(lv) != 1 or len(rv) != 1 or lv == rv:
        return None
    (x,), (y,) = lv, rv
    return x, p.left, p.op, y, p.right


def _gaps(f: ast.Formula) -> list:
    """The gaps of a pure ``;`` sequence in order: each ``Seq.absent`` / ``Seq.gap`` (None
    for a gap without absence)."""
    if isinstance(f, ast.Seq):
        here = f.absent if f.absent is not None else f.gap
        return _gaps(f.left) + [here] + _gaps(f.right)
    if isinstance(f, (ast.As, ast.Filter)):
        return _gaps(f.formula)
    return []


def plan_next_match(query: ast.Query, formula: ast.Formula | None, sites: tuple[Site, ...],
                    absences: tuple[AbsenceSite, ...], any_gap: bool = False,
                    ) -> tuple[NextMatch | None, str]:
    """The ``NextMatch`` of a rewritten query (``formula``: after the formula passes), or
    ``(None, why not)``. ``any_gap``: also when a gap's ψ is not the next step's condition
    (tests)."""
    if formula is None:
        return None, "the pattern never matches"
    if not sites and not absences:
        return None, "no predicate between events"
    if query.strategy not in ("ALL", "ANY"):
        return None, f"the next-match scan implements strategies ALL and ANY, not {query.strategy}"
    if query.consume != "NONE":
        return None, "the next-match scan does not implement CONSUME BY"
    try:
        chains = branches(formula)
    except _Unsupported as e:
        return None, str(e)
    if len(chains) != 1 or any(s.loop for s in chains[0]):
        return None, "the pattern is not one sequence of single events"
    steps = chains[0]
    gaps = _gaps(formula)
    if len(steps) < 2 or len(gaps) != len(steps) - 1 or any(g is None for g in gaps):
        return None, "a gap of the sequence has no absence ('!'): its runs would not be few"

    def step_of(v: str) -> int | None:
        at = [i for i, s in enumerate(steps) if v in s.labels]
        return at[0] if len(at) == 1 else None

    joins: list[list[Compare]] = [[] for _ in steps]
    keys = {g[0] for g in query.partition_by if len(g) == 1}
    for s in sites:
        p = s.predicate
        if (isinstance(p, ast.Compare) and p.op == "=" and isinstance(p.left, ast.AttrRef)
                and isinstance(p.right, ast.AttrRef) and p.left.attr == p.right.attr
                and p.left.attr in keys and not s.guards):
            continue  # holds inside every key's events (as ``implied_absence`` drops ψ's)
        sides = _sides(s.predicate)
        if s.guards or sides is None:
            return None, (f"'{to_text(s.predicate)}' is not a comparison of two values each"
                          " read from one event")
        x, ex, op, y, ey = sides
        i, j = step_of(x), step_of(y)
        if i is None or j is None:
            return None, f"'{to_text(s.predicate)}' reads a variable that is not one step"
        if i > j:
            i, j, ex, ey, op = j, i, ey, ex, FLIP[op]
        joins[j].append(Compare(i, ex, op, ey, to_text(s.predicate)))
    by_gap = {a.gap: a for a in absences}
    out_gaps = []
    for k, g in enumerate(gaps):
        if isinstance(g, str):
            a = by_gap[g]
            psi: ast.Formula = a.etype if a.unary is None else ast.Filter(a.etype, a.unary)
            compares = []
            for c in conjuncts(a.correlated):
                sides = _sides(c)
                if sides is None:
                    return None, (f"'{to_text(a.predicate)}' is not a conjunction of comparisons"
                                  " of the absent event with one event of the match")
                x, ex, op, y, ey = sides
                if x == PSI:
                    x, ex, op, y, ey = y, ey, FLIP[op], x, ex
                if y != PSI:
                    return None, f"'{to_text(a.predicate)}' compares two events of the match"
                i = step_of(x)
                if i is None or i > k:
                    return None, (f"'{to_text(a.predicate)}' compares the absent event with"
                                  f" {x}, which is not one event before the gap")
                compares.append(Compare(i, ex, op, ey, to_text(c)))
            out_gaps.append(Gap(psi, tuple(compares),
                                f"!({a.etype.label} FILTER {to_text(a.predicate)})"))
        else:
            out_gaps.append(Gap(g, (), "!" + to_text(g)))
    select = None if query.select is None else frozenset(i.var for i in query.select)
    preds = tuple(to_text(s.predicate) for s in sites) + tuple(
        g.text for g in out_gaps if g.compares)
    nm = NextMatch(steps, tuple(out_gaps), tuple(tuple(j) for j in joins), select, preds)
    if not nm.deterministic and not any_gap:
        return None, ("a gap's ψ is not what the next step asks for, so a run could take"
                      " several events there (not the next-match form)")
    return nm, "a sequence of single events, each gap's ψ what the next step asks for"
