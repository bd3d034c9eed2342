"""Typed abstract syntax of CEQL queries and CEL formulas.

Every node is a frozen dataclass, so ASTs are hashable values that rewrite passes can
rebuild freely. Each node keeps the ``span`` of source text it came from; spans are
excluded from equality and hashing so that ``parse(print(ast)) == ast`` holds even though
the printed text has different offsets.

Three layers, mirroring the language:

* value expressions (``Literal``, ``AttrRef``, ``BinOp``, ``Neg``) — numbers and strings
  computed from event attributes;
* predicates (``Compare``, ``Like``, ``InSet``, ``InInterval``, ``InRange``, combined with
  ``And``/``Or``/``Not`` and ``BoolConst``) — what ``FILTER`` tests.  Every attribute
  reference is qualified by the variable it reads, whatever the surface syntax was
  (CORE's ``x[price > 5]`` and CEL's ``x.price > 5`` give the same tree);
* formulas (``EventType``, ``As``, ``Seq``, ``Or``, ``Plus``, ``Filter``, ``Not``) — the
  patterns of Complex Event Logic.

A ``Query`` wraps a formula with the CEQL clauses.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Span:
    """Half-open character range ``[start, end)`` in the query text."""

    start: int
    end: int


def _span() -> Span | None:
    return field(default=None, compare=False, hash=False, repr=False)  # type: ignore[return-value]


# --------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Literal:
    """A number, string or boolean constant. Integers stay ``int``; decimals are ``float``;
    ``TRUE``/``FALSE`` beside a comparison operator or in ``IN {…}`` are ``bool``."""

    value: bool | int | float | str
    span: Span | None = _span()


@dataclass(frozen=True)
class AttrRef:
    """Attribute ``attr`` of the event(s) bound to variable ``var`` (``x.price``)."""

    var: str
    attr: str
    span: Span | None = _span()


@dataclass(frozen=True)
class PrevRef(AttrRef):
    """``PREV(y).attr``: attribute ``attr`` of the event bound to ``y`` by the *previous*
    iteration of the ``+`` whose body binds ``y`` (docs/language.md, "Registers"). It reads
    variable ``var`` (``scope.pred_vars``), but a different event of it: an atom holding one
    is a predicate between events (``scope.prev_refs``)."""


ARITH_OPS = ("+", "-", "*", "/", "%")


@dataclass(frozen=True)
class BinOp:
    """Arithmetic ``left op right`` with ``op`` in ``ARITH_OPS``."""

    op: str
    left: Expr
    right: Expr
    span: Span | None = _span()


@dataclass(frozen=True)
class Neg:
    """Unary minus."""

    operand: Expr
    span: Span | None = _span()


Expr = Literal | AttrRef | BinOp | Neg

# --------------------------------------------------------------------------- predicates

#: Canonical comparison operators (``==`` is read as ``=``, ``<>`` as ``!=``).
COMPARE_OPS = ("<", "<=", ">", ">=", "=", "!=")


@dataclass(frozen=True)
class Compare:
    op: str
    left: Expr
    right: Expr
    span: Span | None = _span()


@dataclass(frozen=True)
class Like:
    """``operand LIKE 'regex'``: regular-expression search (CORE's meaning, not SQL's)."""

    operand: Expr
    pattern: str
    span: Span | None = _span()


@dataclass(frozen=True)
class InSet:
    """``operand [NOT] IN {v1, v2, ...}``."""

    operand: Expr
    values: tuple[Literal, ...]
    negated: bool = False
    span: Span | None = _span()


@dataclass(frozen=True)
class InInterval:
    """``operand [NOT] IN {lo..hi}`` (either bound may be open, i.e. ``None``); inclusive."""

    operand: Expr
    low: Literal | None
    high: Literal | None
    negated: bool = False
    span: Span | None = _span()


@dataclass(frozen=True)
class InRange:
    """``operand IN RANGE (low, high)``: ``low <= operand <= high``, bounds are expressions."""

    operand: Expr
    low: Expr
    high: Expr
    span: Span | None = _span()


@dataclass(frozen=True)
class And:
    left: Predicate
    right: Predicate
    span: Span | None = _span()
    #: Inside one ``x[...]``: part of one atom, tested per event (docs/language.md, "Filters").
    scoped: bool = False


@dataclass(frozen=True)
class Or:
    left: Predicate
    right: Predicate
    span: Span | None = _span()
    #: Inside one ``x[...]``: part of one atom, tested per event (docs/language.md, "Filters").
    scoped: bool = False


@dataclass(frozen=True)
class Not:
    operand: Predicate
    span: Span | None = _span()
    #: Inside one ``x[...]``: part of one atom, tested per event (docs/language.md, "Filters").
    scoped: bool = False


@dataclass(frozen=True)
class BoolConst:
    """``TRUE`` / ``FALSE``; produced by rewrites (LP-normal form), also accepted in text."""

    value: bool
    span: Span | None = _span()


Predicate = Compare | Like | InSet | InInterval | InRange | And | Or | Not | BoolConst

# --------------------------------------------------------------------------- formulas


@dataclass(frozen=True)
class EventType:
    """An event-type atom ``E``, or ``S>E`` restricted to stream ``S``.

    It binds the event to the implicit variable ``E`` (and ``S>E`` when qualified).
    """

    name: str
    stream: str | None = None
    span: Span | None = _span()

    @property
    def label(self) -> str:
        """The variable name this atom binds (``E`` or ``S>E``)."""
        return self.name if self.stream is None else f"{self.stream}>{self.name}"


@dataclass(frozen=True)
class As:
    """``formula AS var``: ``var`` gets every event that ``formula`` marks."""

    formula: Formula
    var: str
    span: Span | None = _span()


@dataclass(frozen=True)
class Seq:
    """``left ; right`` (skip anything in between) or ``left : right`` (``contiguous``).

    ``absent`` is ψ of ``left ; !ψ ; right``: no event satisfying ψ strictly between the two
    sides (docs/language.md, "Absence"). It is a field, not a child: ψ binds nothing the
    match reports, so the walkers of ``scope`` and the rewrite passes leave it alone, and
    rebuilding a ``Seq`` with ``dataclasses.replace`` keeps it.
    """

    left: Formula
    right: Formula
    contiguous: bool = False
    span: Span | None = _span()
    absent: Formula | None = None
    #: Set by ``compiler.correlation.relax_absence`` when ψ compares with the match and no
    #: partition key makes that hold: the gap is free in the automaton, which marks its
    #: bounds with the hidden variables ``<gap>.left`` / ``<gap>.right`` for the post-filter.
    gap: str | None = None


@dataclass(frozen=True)
class FOr:
    """``left OR right`` between formulas (``Or`` is the predicate connective)."""

    left: Formula
    right: Formula
    span: Span | None = _span()


@dataclass(frozen=True)
class Plus:
    """``body+`` (iterations may skip events) or ``body:+`` (``contiguous``)."""

    body: Formula
    contiguous: bool = False
    span: Span | None = _span()


@dataclass(frozen=True)
class Filter:
    """``formula FILTER predicate``."""

    formula: Formula
    predicate: Predicate
    span: Span | None = _span()


@dataclass(frozen=True)
class FNot:
    """``NOT(atom)``: consumes one event that does *not* satisfy the atom; marks nothing.

    ``atom`` is an ``EventType`` optionally wrapped in ``Filter`` nodes.
    """

    atom: Formula
    span: Span | None = _span()


Formula = EventType | As | Seq | FOr | Plus | Filter | FNot

# --------------------------------------------------------------------------- query

STRATEGIES = ("ALL", "ANY", "NEXT", "LAST", "MAX", "STRICT")
CONSUME_POLICIES = ("NONE", "ANY", "PARTITION")

#: Duration units, canonical name -> nanoseconds.
DURATION_UNITS = {
    "millisecond": 1_000_000,
    "second": 1_000_000_000,
    "minute": 60 * 1_000_000_000,
    "hour": 3600 * 1_000_000_000,
    "day": 86400 * 1_000_000_000,
}


@dataclass(frozen=True)
class SelectItem:
    """A projected variable, optionally restricted to some attributes (``x[price, name]``)."""

    var: str
    attrs: tuple[str, ...] | None = None
    span: Span | None = _span()


@dataclass(frozen=True)
class EventsWindow:
    """``WITHIN n EVENTS``: ``end - start <= n`` in positions."""

    count: int
    span: Span | None = _span()


@dataclass(frozen=True)
class DurationWindow:
    """``WITHIN 1 hour 30 minutes``: the parts add up; needs a time column.

    ``parts`` keeps the amounts as written (canonical unit names) so the printer round-trips.
    """

    parts: tuple[tuple[int | float, str], ...]
    span: Span | None = _span()

    @property
    def nanoseconds(self) -> int:
        from fractions import Fraction

        total = sum(Fraction(str(amount)) * DURATION_UNITS[unit] for amount, unit in self.parts)
        return int(total)


@dataclass(frozen=True)
class AttributeWindow:
    """``WITHIN n [attr]``: the numeric attribute ``attr`` is the time."""

    amount: int | float
    attr: str
    span: Span | None = _span()


Window = EventsWindow | DurationWindow | AttributeWindow


@dataclass(frozen=True)
class Query:
    """A whole CEQL query. A bare formula parses to ``Query(formula=...)`` with defaults.

    ``select`` is ``None`` for ``*`` and ``()`` for ``NONE``. ``streams`` is ``None`` when
    there is no FROM clause. ``partition_by`` lists bracket groups; each group lists
    alternative attribute names (an event uses the first one its type has).
    """

    formula: Formula
    strategy: str = "ALL"
    select: tuple[SelectItem, ...] | None = None
    streams: tuple[str, ...] | None = None
    partition_by: tuple[tuple[str, ...], ...] = ()
    within: Window | None = None
    consume: str = "NONE"
    limit: int | None = None
    span: Span | None = _span()
    #: ψ of a trailing absence ``φ ; !ψ`` (``formula`` is φ): no ψ event after φ within the
    #: window (docs/language.md, "Absence"). A query field, not a formula node: it may only
    #: end the whole formula, and the passes that rewrite φ never see it.
    trailing: Formula | None = None
    trailing_span: Span | None = field(default=None, compare=False, hash=False, repr=False)
    #: Where each FROM name and each PARTITION BY name was written (parallel to ``streams`` and
    #: ``partition_by``; empty when unknown). Only diagnostics read them.
    stream_spans: tuple[Span | None, ...] = field(default=(), compare=False, hash=False, repr=False)
    partition_spans: tuple[tuple[Span | None, ...], ...] = field(
        default=(), compare=False, hash=False, repr=False
    )


Node = Query | Formula | Predicate | Expr | SelectItem | Window
