"""Static checks on a parsed query: variable scoping, safety, and binding to a log's schema.

Implements the syntactic classes of "Foundations of Complex Event Processing": the variable sets
``var``/``vdef``/``vdef+`` (§3), ``bound`` and well-formedness (§5, relaxed by rule 1 of
docs/language.md "Filters"), safety (§5.1) and the unary / n-ary split of filter atoms; plus the
schema checks that docs/language.md promises (unknown event types, streams and attributes, string
versus number, windows). Every mistake becomes a ``QueryError`` located at the offending text.

Each check is one walk over the AST; the variable-set helpers are recomputed per node, so the whole
check is O(|query|² + |query|·|schema|) — queries are small, schemas are read once.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Iterator
from dataclasses import dataclass

from cer_cli.events import EPOCH_UNIT_NAMES, Schema
from cer_cli.options import option
from cer_cli.query.ast import (
    As,
    AttributeWindow,
    AttrRef,
    BinOp,
    Compare,
    DurationWindow,
    EventsWindow,
    EventType,
    Expr,
    Filter,
    FNot,
    FOr,
    Formula,
    InInterval,
    InRange,
    InSet,
    Like,
    Literal,
    Neg,
    Plus,
    Predicate,
    Query,
    Seq,
    Span,
)
from cer_cli.query.errors import QueryError, suggest
from cer_cli.query.printer import quote_name, to_text
from cer_cli.query.scope import (
    absent_formulas,
    attr_refs,
    bound,
    filter_atoms,
    labels,
    pred_vars,
    subformulas,
    vdef,
    vdef_plus,
    wide_variables,
)

# --------------------------------------------------------------------------- variable sets


def var(formula: Formula) -> frozenset[str]:
    """Every variable mentioned: defined ones, labels, and those filters read (Foundations §3)."""
    read = frozenset().union(
        *(pred_vars(f.predicate) for f in subformulas(formula) if isinstance(f, Filter))
    )
    return vdef(formula) | labels(formula) | read


def variable_event_types(formula: Formula) -> dict[str, frozenset[str]]:
    """For each variable (labels included), the event types of the events it can bind.

    ``(BUY OR SELL) AS x`` gives ``x -> {BUY, SELL}``; a variable defined several times gets
    the union. Filters on ``x`` are checked against these types' attributes.
    """
    out: dict[str, frozenset[str]] = {}
    for node in subformulas(formula):
        if isinstance(node, EventType):
            for name in (node.name, node.label):
                out[name] = out.get(name, frozenset()) | {node.name}
        elif isinstance(node, As):
            out[node.var] = out.get(node.var, frozenset()) | _marked_types(node.formula)
    return out


def _marked_types(formula: Formula) -> frozenset[str]:
    match formula:
        case EventType(name):
            return frozenset({name})
        case FNot():
            return frozenset()
        case As(child, _) | Plus(child) | Filter(child, _):
            return _marked_types(child)
        case Seq(left, right) | FOr(left, right):
            return _marked_types(left) | _marked_types(right)
    raise TypeError(formula)


# --------------------------------------------------------------------------- report


@dataclass(frozen=True)
class AtomInfo:
    """One filter atom and what it reads: ``unary`` (at most one variable; the compiler puts it
    on transitions) or ``correlation`` (two or more: a predicate between events)."""

    atom: Predicate
    variables: frozenset[str]
    kind: str


@dataclass(frozen=True)
class CheckReport:
    """What the checks learnt about a query that passed them.

    ``variables`` maps a kind (``var``, ``vdef``, ``vdef_plus``, ``bound``, ``labels``) to its
    set; ``event_types`` maps each variable to the event types it can bind.
    """

    warnings: tuple[tuple[str, Span | None], ...]
    atoms: tuple[AtomInfo, ...]
    variables: dict[str, frozenset[str]]
    event_types: dict[str, frozenset[str]]


def classify_atoms(formula: Formula) -> tuple[AtomInfo, ...]:
    """Every filter atom of the formula, in source order, as unary or correlation."""
    out = []
    for node in subformulas(formula):
        if isinstance(node, Filter):
            for atom in filter_atoms(node.predicate):
                vs = pred_vars(atom)
                out.append(AtomInfo(atom, vs, "correlation" if len(vs) >= 2 else "unary"))
    return tuple(out)


def check_query(query: Query, schema: Schema | None = None) -> CheckReport:
    """Run every check; raise the first ``QueryError``, or return what was learnt.

    Order: shape (NOT, numbers), schema names, scoping of filters and SELECT, then typing —
    so a misspelt event type is reported as such, not as a missing attribute.
    """
    f = query.formula
    check_not_atoms(f)
    check_absence(query, schema)
    check_sanity(query)
    absent: tuple[tuple[str, Span | None], ...] = ()
    if schema is not None:
        absent = check_schema_names(query, schema)
    check_well_formed(f)
    check_select(query)
    types = variable_event_types(f)
    if schema is not None:
        check_attributes(query, schema, types)
        check_windows_and_partitions(query, schema)
    check_predicate_types(f, schema, types)
    warnings = absent + safety_warnings(f)
    if schema is not None:
        warnings += (stream_warnings(f, schema) + partition_warnings(query, schema)
                     + empty_attribute_warnings(query, schema))
    variables = {
        "var": var(f),
        "vdef": vdef(f),
        "vdef_plus": vdef_plus(f),
        "bound": bound(f),
        "labels": labels(f),
    }
    return CheckReport(warnings, classify_atoms(f), variables, types)


# --------------------------------------------------------------------------- scoping


#: Names a message lists at most: a log may hold 100,000s of event types, and a message
#: that lists them all is a wall of text (300,000 types: megabytes, per unknown name).
LISTED = 30


def _names(names: frozenset[str] | set[str]) -> str:
    """Known names as a query writes them: a type or attribute holding a space, or named
    like a keyword, back-quoted (``quote_name``); the first ``LISTED`` in order, and how
    many more."""
    if not names:
        return "none"
    shown = sorted(names)
    text = ", ".join(quote_name(n) for n in shown[:LISTED])
    more = len(shown) - LISTED
    return text if more <= 0 else f"{text}, … and {more:,} more"


def _unknown_name_hints(name: str, known: frozenset[str] | set[str]) -> list[str]:
    close = suggest(name, known)
    return [f"did you mean {_as_written(close)}?"] if close else []


def _as_written(name: str) -> str:
    """A name in a hint, quoted as text, or back-quoted as the query must write it (a name
    holding a space, or named like a keyword: ``quote_name``) so that it can be pasted."""
    written = quote_name(name)
    return written if written != name else f"'{name}'"


def check_well_formed(formula: Formula) -> None:
    """Filters read only variables they may (docs/language.md "Filters", rules 1–3).

    Walk top-down carrying the union of ``bound`` over the ancestors (the papers' test for
    well-formedness); at ``ρ FILTER f`` an atom may also read anything ``ρ`` defines (rule 1).
    """
    everything = vdef(formula) | labels(formula)

    def walk(node: Formula, outer: frozenset[str]) -> None:
        scope = outer | bound(node, with_labels=True)
        match node:
            case Filter(child, predicate):
                allowed = scope | vdef(child) | labels(child)
                for atom in filter_atoms(predicate):
                    for v in sorted(pred_vars(atom) - allowed):
                        hints = (
                            [
                                f"'{v}' is bound elsewhere, but not on every path around this"
                                " filter; move the filter next to where it is bound"
                            ]
                            if v in everything
                            else _unknown_name_hints(v, everything)
                        )
                        raise QueryError(
                            f"filter on '{v}', which this formula never binds"
                            f" (it binds: {_names(allowed)})",
                            _var_span(atom, v),
                            hints=hints,
                        )
                walk(child, scope)
            case As(child, _) | Plus(child):
                walk(child, scope)
            case Seq(left, right) | FOr(left, right):
                walk(left, scope)
                walk(right, scope)

    walk(formula, frozenset())


def _var_span(atom: Predicate, v: str) -> Span | None:
    """Span of the first reference to ``v`` inside the atom, else the atom's."""
    for ref in attr_refs(atom):
        if ref.var == v and ref.span is not None:
            return ref.span
    return atom.span


def check_not_atoms(formula: Formula) -> None:
    """``NOT(…)`` wraps one event type, optionally filtered on that event only (CORE §3.5)."""
    for node in subformulas(formula):
        if not isinstance(node, FNot):
            continue
        inner = node.atom
        predicates = []
        while isinstance(inner, Filter):
            predicates.append(inner.predicate)
            inner = inner.formula
        if not isinstance(inner, EventType):
            raise QueryError(
                "NOT(…) takes a single event type, optionally with a FILTER",
                node.span,
                hints=["write NOT(E) or NOT(E FILTER E[attr > 1])"],
            )
        own = {inner.name, inner.label}
        for predicate in predicates:
            for atom in filter_atoms(predicate):
                for v in sorted(pred_vars(atom) - own):
                    raise QueryError(
                        f"a filter inside NOT({inner.label}) may only read '{inner.label}', not '{v}'",
                        _var_span(atom, v),
                        hints=["NOT(…) tests one event on its own; filter other variables outside"],
                    )


def _absence_sites(formula: Formula) -> Iterator[tuple[Formula, frozenset[str], Formula]]:
    """``(ψ, variables ψ may compare with, side formula)`` of every ``φ1 ; !ψ ; φ2``."""
    for n in subformulas(formula):
        if isinstance(n, Seq) and n.absent is not None:
            yield n.absent, bound(n.left, True) | bound(n.right, True), Seq(n.left, n.right)


def check_absence(query: Query, schema: Schema | None = None) -> None:
    """``!ψ`` names one event type, maybe with AS and FILTERs; a filter may also compare ψ's
    event with a variable of the match (correlated absence, docs/language.md "Absence"):
    one bound on either side of the ``;`` (for a trailing ψ, by φ) to exactly one event in
    every match — not under ``+``, not only in one branch of an OR — so that "ψ with these
    bindings" names one test per event. How the engine evaluates the comparison (implied by
    a PARTITION BY key, else checked per candidate or, trailing, at the deadline) is the planner's decision
    (``compiler.correlation.implied_absence``, ``relax_absence``). ψ's own names, attributes and types are
    checked as a filter's are.
    """
    sites = list(_absence_sites(query.formula))
    if query.trailing is not None:
        check_trailing(query, schema)
        sites.append((query.trailing, bound(query.formula, True), query.formula))
    for psi, outer, side in sites:
        atom, own, predicates = psi, set(), []
        while isinstance(atom, (As, Filter)):
            if isinstance(atom, As):
                own.add(atom.var)
            else:
                predicates.append(atom.predicate)
            atom = atom.formula
        if not isinstance(atom, EventType):
            raise QueryError("'!' takes a single event type, optionally named with AS and "
                             "filtered", psi.span,
                             hints=["write A ; !B ; C or A ; !(B AS b FILTER b.x > 1) ; C"])
        own |= {atom.name, atom.label}
        counts = dict(wide_variables(Query(formula=side)))
        for predicate in predicates:
            for a in filter_atoms(predicate):
                for v in sorted(pred_vars(a) - own):
                    if v not in outer or counts.get(v, True):
                        raise QueryError(
                            f"a filter inside !({atom.label}) reads '{v}', which is not bound to"
                            " exactly one event in every match by the two sides of the ';'"
                            " (or by φ, for a trailing '!')", _var_span(a, v),
                            hints=["compare the absent event with a variable named once with AS"
                                   " outside '+' and OR, e.g. A AS a ; !(B AS b FILTER b.user ="
                                   " a.user) ; C"])
        if schema is not None:
            sub = Query(formula=psi, streams=query.streams)
            check_schema_names(sub, schema)
            types = variable_event_types(psi)
            check_attributes(sub, schema, types)
            own_preds = [p for p in predicates
                         if all(pred_vars(a) <= own for a in filter_atoms(p))]
            if own_preds == predicates:
                check_predicate_types(psi, schema, types)


def check_trailing(query: Query, schema: Schema | None = None) -> None:
    """A trailing absence ``φ ; !ψ`` needs the window that says how long to wait for ψ: a
    ``WITHIN`` in events or time, or ``n [attr]`` with ``attr`` the log's time column (every
    event has it, in order). Another attribute is refused: an event without it would have
    no deadline. Without a schema the time column is not known yet: the executor checks it
    on the events (``engine.absence``). ``CONSUME BY`` is refused: a φ match would forget
    partial matches before its own absence is known."""
    span = query.trailing_span or query.trailing.span
    w = query.within
    if w is None:
        raise QueryError("a trailing absence ('φ ; !ψ' last) needs a WITHIN window: it means"
                         " 'no ψ within the window after φ'", span,
                         hints=["add e.g. WITHIN 30 minutes or WITHIN 100 EVENTS after the"
                                " formula", "for 'ψ never follows', use a window as long as the log"])
    if (isinstance(w, AttributeWindow) and schema is not None and w.attr != schema.time_column
            and w.attr in schema.all_attributes()):  # an unknown one: check_windows_and_partitions
        tc = schema.time_column
        raise QueryError(
            f"a trailing absence with an attribute window needs the log's time column, and"
            f" '{w.attr}' is not it (WITHIN {w.amount} [{w.attr}]): an event without"
            f" '{w.attr}' would have no deadline", w.span or span,
            hints=[f"use WITHIN n [{tc}], a duration, or WITHIN n EVENTS" if tc is not None
                   else f"make it the time column: {option('time-column', w.attr)}"])
    if query.consume != "NONE":
        raise QueryError(f"CONSUME BY {query.consume} with a trailing absence is not supported:"
                         " a match of φ would forget partial matches before its absence is known",
                         span, hints=["drop CONSUME BY (the default is NONE)"])


def check_select(query: Query) -> None:
    """Every SELECT item names a variable the formula binds (``S>E`` only if written so)."""
    known = vdef(query.formula) | labels(query.formula)
    for item in query.select or ():
        if item.var in known:
            continue
        hints = _unknown_name_hints(item.var, known)
        if ">" in item.var and item.var.split(">", 1)[1] in known:
            hints.append(
                f"the pattern matches '{item.var.split('>', 1)[1]}' without a stream;"
                f" write {item.var} in the pattern to select it"
            )
        raise QueryError(
            f"SELECT names '{item.var}', which the query never binds (it binds: {_names(known)})",
            item.span,
            hints=hints,
        )


def safety_warnings(formula: Formula) -> tuple[tuple[str, Span | None], ...]:
    """Every ``;``/``:`` whose sides both define a variable outside ``+`` (Foundations §5.1).

    Not an error: such a sequence discards the combinations that would bind the variable twice,
    and the compiler rewrites it to a safe equivalent; but it is often a mistake.
    """
    out = []
    for node in subformulas(formula):
        if isinstance(node, Seq):
            both = vdef_plus(node.left) & vdef_plus(node.right)
            if both:
                op = ":" if node.contiguous else ";"
                out.append(
                    (
                        f"unsafe '{op}': {_names(both)} defined on both sides outside any '+';"
                        " a match binds such a variable to one event, so these combinations never match",
                        node.span,
                    )
                )
    return tuple(out)


# --------------------------------------------------------------------------- numbers


def check_sanity(query: Query) -> None:
    """LIMIT and window amounts are not negative. A window of 0 is meaningful, as windows
    are inclusive: ``WITHIN 0 EVENTS`` keeps single-event matches, ``WITHIN 0 seconds``
    matches of events with equal times."""
    if query.limit is not None and query.limit < 0:
        raise QueryError(f"LIMIT must be 0 or more, not {query.limit}", query.span)
    w = query.within
    if isinstance(w, EventsWindow) and w.count < 0:
        raise QueryError(f"WITHIN {w.count} EVENTS: the window must be 0 or more", w.span)
    if isinstance(w, AttributeWindow) and w.amount < 0:
        raise QueryError(f"WITHIN {w.amount} [{w.attr}]: the window must be 0 or more", w.span)
    amount = w.count if isinstance(w, EventsWindow) else getattr(w, "amount", 0)
    if isinstance(amount, int) and amount >= 2**63:  # positions and times are 64-bit
        raise QueryError(f"WITHIN: {amount} is above {2**63 - 1}, the largest window",
                         w.span, hints=["omit WITHIN for no window"])
    if isinstance(w, DurationWindow):
        for amount, unit in w.parts:
            if amount < 0:
                raise QueryError(f"WITHIN: '{amount} {unit}' must be 0 or more", w.span)
        if w.nanoseconds >= 2**63:  # times are int64 nanoseconds
            raise QueryError("WITHIN: the window is longer than 292 years, the longest time"
                             " that 64-bit nanoseconds hold", w.span,
                             hints=["omit WITHIN for no window"])
    if query.limit is not None and query.limit > _LIMIT_MAX:
        raise QueryError(f"LIMIT {query.limit} is above {_LIMIT_MAX}", query.span,
                         hints=["omit LIMIT to report every match"])


#: The largest LIMIT (the engine counts matches per event in 64 bits).
_LIMIT_MAX = 2**62


# --------------------------------------------------------------------------- schema


def _known(kind: str, names: list[str] | set[str]) -> str:
    return f"known {kind}: {_names(set(names))}"


def check_schema_names(query: Query, schema: Schema) -> tuple[tuple[str, Span | None], ...]:
    """Streams the query names exist in the log (else an error). An event type the log does
    not contain is a warning, not an error: a daily log without refunds is no mistake, the
    branch naming them just never matches ("did you mean" names a close known type)."""
    warned: list[tuple[str, Span | None]] = []
    for i, stream in enumerate(query.streams or ()):
        if stream not in schema.streams:
            span = query.stream_spans[i] if i < len(query.stream_spans) else query.span
            raise QueryError(
                f"unknown stream '{stream}' in FROM",
                span,
                hints=_unknown_name_hints(stream, set(schema.streams))
                + [_known("streams", set(schema.streams))],
            )
    for node in subformulas(query.formula):
        if not isinstance(node, EventType):
            continue
        if node.stream is not None and node.stream not in schema.streams:
            raise QueryError(
                f"unknown stream '{node.stream}' in '{node.label}'",
                node.span,
                hints=_unknown_name_hints(node.stream, set(schema.streams))
                + [_known("streams", set(schema.streams))],
            )
        if node.name not in schema.event_types:
            close = suggest(node.name, set(schema.event_types))
            warned.append((
                f"the log has no event type '{node.name}', so '{node.label}' never matches"
                + (f" (did you mean {_as_written(close)}?)" if close else "")
                + f"; {_known('event types', set(schema.event_types))}",
                node.span,
            ))
    return tuple(dict.fromkeys(warned))


def partition_warnings(query: Query, schema: Schema) -> tuple[tuple[str, Span | None], ...]:
    """A bracket group lists *alternative* names (CORE): with names that every event type
    has, only the first is ever used, which is likely a composite key written as one group.
    (An attribute null for every event of a type is no value of it: the next name is used.)"""
    out = []
    for i, group in enumerate(query.partition_by):
        types = schema.event_types
        if len(group) > 1 and types and all(
                set(group) <= set(schema.attributes(t)) - schema.empty.get(t, frozenset())
                for t in types):
            spans = query.partition_spans[i] if i < len(query.partition_spans) else ()
            out.append((
                f"PARTITION BY [{', '.join(group)}] partitions by '{group[0]}' wherever it has"
                " a value: a bracket group lists alternative names, the next one read only where"
                f" '{group[0]}' is empty or NaN, and every event type has '{group[0]}'; did you"
                f" mean a composite key? write PARTITION BY {', '.join(group)}",
                spans[0] if spans else query.span))
    return tuple(out)


def stream_warnings(formula: Formula, schema: Schema) -> tuple[tuple[str, Span | None], ...]:
    """``S>E`` where stream ``S`` has no ``E`` events: legal, but it can never match."""
    out = []
    for node in subformulas(formula):
        if (
            isinstance(node, EventType)
            and node.stream in schema.streams
            and node.name not in schema.streams[node.stream]
        ):
            out.append(
                (
                    f"stream '{node.stream}' has no '{node.name}' events; '{node.label}' never matches",
                    node.span,
                )
            )
    return tuple(out)


def check_attributes(query: Query, schema: Schema, types: dict[str, frozenset[str]]) -> None:
    """Each attribute read for ``x`` (in filters and ``SELECT x[…]``) exists on one of x's types."""
    for node in subformulas(query.formula):
        if isinstance(node, Filter):
            for atom in filter_atoms(node.predicate):
                for ref in attr_refs(atom):
                    _check_attribute(ref.var, ref.attr, ref.span, schema, types,
                                     _compared_with(atom, ref))
    for item in query.select or ():
        for attr in item.attrs or ():
            _check_attribute(item.var, attr, item.span, schema, types)


def _compared_with(atom: Predicate, ref: AttrRef) -> AttrRef | None:
    """The attribute ``ref`` is compared with in ``atom`` (``x[origin = JFK]``), if any: an
    unknown name there is more likely a text written without quotes (SQL's habit)."""
    if isinstance(atom, Compare):
        for mine, other in ((atom.left, atom.right), (atom.right, atom.left)):
            if mine is ref and isinstance(other, AttrRef):
                return other
    return None


def _check_attribute(
    v: str, attr: str, span: Span | None, schema: Schema, types: dict[str, frozenset[str]],
    compared: AttrRef | None = None,
) -> None:
    event_types = sorted(types.get(v, ()))
    if not event_types:
        return
    known = {a for t in event_types for a in schema.attributes(t)}
    if attr in known:
        return
    if attr in schema.refused:
        raise refused_column(attr, schema, span, f" (read for '{v}')")
    if not any(t in schema.event_types for t in event_types):
        # types absent from the log (a warning): only a column no event has is a mistake
        known = set(schema.all_attributes())
        if attr in known:
            return
        raise QueryError(
            f"no event of the log has attribute '{attr}' (read for '{v}')",
            span,
            hints=_unknown_name_hints(attr, known) + [_known("attributes", known)],
        )
    if len(event_types) == 1:
        message = f"event type '{event_types[0]}' (bound to '{v}') has no attribute '{attr}'"
    else:
        message = (
            f"none of the event types of '{v}' ({', '.join(event_types)}) has attribute '{attr}'"
        )
    quote = [] if compared is None or compared.attr not in known else [
        f"for the text {attr}, quote it: {compared.attr} = '{attr}'"]
    raise QueryError(
        message,
        span,
        hints=quote + _unknown_name_hints(attr, known) + [f"attributes of '{v}': {_names(known)}"],
    )


#: What a refused column's message suggests (README, "Attribute types").
_REFUSED_HINT = ("predicates compare integers, floats, decimals, texts (also categoricals and"
                 " enums), booleans, dates and datetimes; convert the column to one of them"
                 " (e.g. a duration to a number of seconds), or leave it out of the query")


def refused_column(name: str, schema: Schema, span: Span | None, what: str = "") -> QueryError:
    """The error for a query reading a column whose type predicates cannot compare."""
    return QueryError(f"column '{name}'{what} has type {schema.refused[name]}, which cer cannot"
                      " compare", span, hints=[_REFUSED_HINT])


def empty_attribute_warnings(query: Query, schema: Schema) -> tuple[tuple[str, Span | None], ...]:
    """An attribute a filter reads that is null for every event of one of its variable's
    types in this log: the filter is false for those events. A warning, not an error: a
    column of the log is an attribute of its types, and a calm day without gusts is data,
    not a mistake in the query."""
    out: list[tuple[str, Span | None]] = []
    trailing = [query.trailing] if query.trailing is not None else []
    for formula in [query.formula, *absent_formulas(query.formula), *trailing]:
        types = variable_event_types(formula)
        for node in subformulas(formula):
            if not isinstance(node, Filter):
                continue
            for atom in filter_atoms(node.predicate):
                for ref in attr_refs(atom):
                    for t in sorted(types.get(ref.var, ())):
                        if ref.attr in schema.empty.get(t, ()):
                            out.append((f"'{ref.attr}' is null for every '{t}' event of the"
                                        f" log, so a filter reading {ref.var}.{ref.attr} is"
                                        f" false for them", ref.span))
    return tuple(dict.fromkeys(out))


def check_windows_and_partitions(query: Query, schema: Schema) -> None:
    """PARTITION BY groups and window attributes exist; a duration window has a time source."""
    everything = schema.all_attributes()
    for i, group in enumerate(query.partition_by):
        if any(name in everything for name in group):
            continue
        spans = query.partition_spans[i] if i < len(query.partition_spans) else ()
        refused = [name for name in group if name in schema.refused]
        if refused:
            raise refused_column(refused[0], schema, spans[0] if spans else query.span,
                                 " (a PARTITION BY key)")
        hints = [] if len(group) > 1 else _unknown_name_hints(group[0], set(everything))
        raise QueryError(
            f"PARTITION BY [{', '.join(group)}]: no event type has "
            + (f"attribute '{group[0]}'" if len(group) == 1 else "any of these attributes"),
            spans[0] if spans else query.span,
            hints=hints + [_known("attributes", set(everything))],
        )
    w = query.within
    if isinstance(w, DurationWindow) and schema.time_column is None:
        raise QueryError(
            f"WITHIN {to_text(w)} needs a time column; this log has none",
            w.span,
            hints=[f"use {option('time-column', 'COLUMN', placeholder=True)}, or count"
                   " events: WITHIN n EVENTS"],
        )
    if isinstance(w, DurationWindow) and schema.time_column is not None:
        tc = schema.time_column
        kinds = {schema.attributes(t).get(tc) for t in schema.event_types} - {None}
        if kinds & {"int", "float"}:  # a number without a unit is an order, not a time
            raise QueryError(
                f"WITHIN {to_text(w)}: time column '{tc}' holds numbers without a unit,"
                " so a duration cannot be measured on it",
                w.span,
                hints=[_epoch_unit_hint(schema),
                       f"or use WITHIN n [{tc}] (in its own numbers), or WITHIN n EVENTS"],
            )
    if isinstance(w, AttributeWindow):
        if w.attr in schema.refused and w.attr not in everything:
            raise refused_column(w.attr, schema, w.span, " (a window attribute)")
        if w.attr not in everything:
            raise QueryError(
                f"WITHIN {w.amount} [{w.attr}]: no event type has attribute '{w.attr}'",
                w.span,
                hints=_unknown_name_hints(w.attr, set(everything))
                + [_known("attributes", set(everything))],
            )
        kinds = {schema.attributes(t).get(w.attr) for t in schema.event_types} - {None}
        if not kinds <= {"int", "float"}:
            instants = w.attr == schema.time_column and kinds == {"datetime"}
            raise QueryError(
                f"WITHIN {w.amount} [{w.attr}]: '{w.attr}' is {_names(kinds)},"
                " but the window attribute must be numeric",
                w.span,
                hints=[f"'{w.attr}' is the time column, read as instants: give the window as a"
                       f" duration, e.g. WITHIN {w.amount} seconds" if instants else
                       "use a numeric attribute, a duration over the time column, or n EVENTS"],
            )


def _epoch_unit_hint(schema: Schema) -> str:
    """The ``--time-unit`` that fits the numeric time values (``Schema.epoch_units``: the
    unit that puts them in plausible years), else the list of units."""
    fits = schema.epoch_units
    units = set(fits.values())
    if len(units) == 1 and len(fits) == len(schema.streams or fits):
        unit = units.pop()
        return (f"its values look like epoch {EPOCH_UNIT_NAMES[unit]}:"
                f" pass {option('time-unit', unit)}")
    if fits:
        return "; ".join(f"the values of log {s} look like epoch {EPOCH_UNIT_NAMES[u]}:"
                         f" pass {option('time-unit', u, s)}" for s, u in sorted(fits.items()))
    return f"give their unit since the epoch: {option('time-unit', 's')} (or ms, us, ns)"


# --------------------------------------------------------------------------- typing

#: What an attribute type can be compared with: numbers and strings never mix.
_KIND = {
    "int": "number",
    "float": "number",
    "str": "string",
    "bool": "bool",
    "datetime": "datetime",
}


def _expr_kinds(
    expr: Expr, schema: Schema | None, types: dict[str, frozenset[str]]
) -> frozenset[str] | None:
    """The kinds (``number``/``string``/``bool``/``datetime``) an expression may have;
    ``None`` when unknown (no schema). Arithmetic must be over numbers."""
    match expr:
        case Literal(value):
            if isinstance(value, bool):
                return frozenset({"bool"})
            return frozenset({"string" if isinstance(value, str) else "number"})
        case AttrRef(v, attr):
            if schema is None:
                return None
            # a null-typed column holds no value: it compares with anything (and is false)
            kinds = {schema.attributes(t).get(attr) for t in types.get(v, ())} - {None, "null"}
            return frozenset(_KIND[k] for k in kinds) or None
        case Neg(operand):
            _require_number(operand, schema, types, "unary minus")
            return frozenset({"number"})
        case BinOp(op, left, right):
            _require_number(left, schema, types, f"'{op}'")
            _require_number(right, schema, types, f"'{op}'")
            return frozenset({"number"})
    raise TypeError(expr)


def _require_number(
    expr: Expr, schema: Schema | None, types: dict[str, frozenset[str]], what: str
) -> None:
    kinds = _expr_kinds(expr, schema, types)
    if kinds is not None and "number" not in kinds:
        raise QueryError(
            f"{what} needs numbers, but {_describe(expr)} is a {_names(kinds)}", expr.span
        )


def _describe(expr: Expr) -> str:
    match expr:
        case AttrRef(v, attr):
            return f"{v}.{attr}"
        case Literal(value) if isinstance(value, str):
            return repr(value)
        case Literal(value) if isinstance(value, bool):
            return "TRUE" if value else "FALSE"
        case Literal(value):
            return str(value)
    return "this expression"


def _clash(a: frozenset[str] | None, b: frozenset[str] | None) -> bool:
    """Numbers, strings, booleans and datetimes with nothing in common."""
    if a is None or b is None or a & b:
        return False
    kinds = {"number", "string", "datetime", "bool"}
    return bool(a & kinds) and bool(b & kinds)


def iso_datetime(text: str) -> datetime.datetime | None:
    """An ISO 8601 date-time literal as a naive UTC datetime (a value without an offset is
    UTC, as in the logs), or None when ``text`` is not one. A string literal compared with a
    datetime attribute means this date-time (docs/language.md)."""
    try:
        value = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(datetime.UTC).replace(tzinfo=None)
    return value


def _as_datetime(kinds, lit: Expr, other: frozenset[str] | None, span: Span | None):
    """The kinds of ``lit`` when it faces ``other``: a string literal facing a datetime is
    a datetime if it is ISO 8601 (else an error), otherwise unchanged."""
    if not (isinstance(lit, Literal) and isinstance(lit.value, str) and other == {"datetime"}):
        return kinds(lit)
    if iso_datetime(lit.value) is None:
        raise QueryError(f"{lit.value!r} is compared with a datetime but is not an ISO 8601"
                         " date-time", lit.span or span,
                         hints=["write e.g. '2024-05-01T08:05:00Z' (no offset means UTC)"])
    return frozenset({"datetime"})


LIKE_SYNTAX_HINT = ("LIKE patterns use Rust regex syntax (polars evaluates them): no look-around,"
                    " no backreferences, compiled size at most 10 MB")


@functools.lru_cache(maxsize=256)
def like_pattern_error(pattern: str) -> str | None:
    """Why the engine that runs LIKE (polars, Rust regex syntax) rejects ``pattern``, or None.

    Python's ``re`` is the wrong judge: it accepts look-around and backreferences, which
    polars only rejects mid-stream, as an internal error."""
    import polars as pl

    try:
        pl.Series([""], dtype=pl.String).str.contains(pattern)
    except pl.exceptions.PolarsError as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        detail = next((ln[len("error:"):].strip() for ln in lines if ln.startswith("error:")),
                      None)
        if detail is None:
            detail = lines[0].removeprefix("regex error:").strip() if lines else type(e).__name__
        return detail.rstrip(".")
    return None


def check_predicate_types(
    formula: Formula, schema: Schema | None, types: dict[str, frozenset[str]]
) -> None:
    """Strings and numbers never meet; LIKE reads a string and has a valid regular expression;
    the values of ``IN {…}`` have one kind."""
    for node in subformulas(formula):
        if isinstance(node, Filter):
            for atom in filter_atoms(node.predicate):
                _check_atom_types(atom, schema, types)


def _check_atom_types(
    atom: Predicate, schema: Schema | None, types: dict[str, frozenset[str]]
) -> None:
    def kinds(e: Expr) -> frozenset[str] | None:
        return _expr_kinds(e, schema, types)

    def mismatch(left: Expr, right: Expr, span: Span | None) -> QueryError:
        lk, rk = kinds(left), kinds(right)
        quoted = any(isinstance(e, Literal) and isinstance(e.value, str) for e in (left, right))
        hint = ("compare a boolean with TRUE or FALSE (x.flag = TRUE)"
                if "bool" in (lk or set()) | (rk or set())
                else "the log's column holds numbers: compare it with a number, unquoted"
                " (x.v = 1)" if quoted
                else "quote the value to compare as text (x.name = '1'), or compare a numeric"
                " attribute")
        return QueryError(
            f"cannot compare {_describe(left)} (a {_names(lk or set())}) with"
            f" {_describe(right)} (a {_names(rk or set())})",
            span,
            hints=[hint],
        )

    match atom:
        case Compare(_, left, right):
            lk = _as_datetime(kinds, left, kinds(right), atom.span)
            rk = _as_datetime(kinds, right, kinds(left), atom.span)
            if _clash(lk, rk):
                raise mismatch(left, right, atom.span)
        case Like(operand, pattern):
            k = kinds(operand)
            if k is not None and "string" not in k:
                raise QueryError(
                    f"LIKE needs a string, but {_describe(operand)} is a {_names(k)}",
                    atom.span,
                    hints=["compare numbers with <, =, IN {lo..hi} or IN RANGE (lo, hi)"],
                )
            problem = like_pattern_error(pattern)
            if problem is not None:
                raise QueryError(
                    f"invalid regular expression in LIKE {pattern!r}: {problem}", atom.span,
                    hints=[LIKE_SYNTAX_HINT],
                )
        case InSet(operand, values):
            value_kinds = {k for v in values
                           for k in (_as_datetime(kinds, v, kinds(operand), atom.span) or ())}
            if len(value_kinds) > 1:
                raise QueryError(f"IN {{…}} mixes kinds of values ({_names(value_kinds)})",
                                 atom.span)
            if _clash(kinds(operand), frozenset(value_kinds) or None):
                raise mismatch(operand, values[0], atom.span)
        case InInterval(operand, low, high):
            for bound_value in (low, high):
                if bound_value is not None and _clash(kinds(operand), kinds(bound_value)):
                    raise mismatch(operand, bound_value, atom.span)
        case InRange(operand, low, high):
            for e in (operand, low, high):
                _require_number(e, schema, types, "IN RANGE")
