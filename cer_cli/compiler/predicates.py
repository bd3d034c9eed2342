"""The alphabet of a query: its atomic predicates, their polars expressions, symbol ids.

A CEA reads one event per transition, and its guards only ever ask "does this event
satisfy atomic predicate number i?" (CORE §3.7, "atom predicates"; Foundations of CEP
§5, where transitions carry unary predicates). So each event is summarised once by the
*bit mask* of the atoms it satisfies, and masks are interned to dense *symbol ids*: the
engine's hot loop then looks up ``(det-state, symbol id)`` instead of evaluating
predicates.

The atoms of a query are

* ``TypeTest(E)`` — the event's type is ``E``;
* ``StreamTest(S)`` — the event comes from stream ``S``;
* ``AttrTest(p)`` — an atomic filter predicate (comparison, LIKE, IN ...) with its
  variable *stripped* (every ``AttrRef.var`` set to ``""``), so ``x.tmp > 40`` and
  ``y.tmp > 40`` share one bit.

Boolean structure (AND / OR / NOT) stays in the CEA's guards, not in the atoms.

Evaluation follows docs/language.md: a null, NaN or absent attribute makes the atom false
(even under NOT or OR), integer ``/`` truncates toward zero and ``%`` has the sign of the
dividend (C, as CORE), division by zero gives null (false), LIKE is a regex *search*, and
comparing a string with a number is false. ``predicate_expression`` is the one place that
defines this: the CEA's atoms (one event per row) and the correlation post-filter (one
combination of events per row, ``cer_cli.engine.post_filter``) both build their polars
expressions with it. Cost: one vectorised polars expression per atom per batch, then
``np.unique`` over the packed masks; Python work is per *distinct* mask, never per row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from cer_cli.compiler.cea import GAnd, GAtom, GNot, GOr, GTrue, Guard
from cer_cli.events import STREAM, TYPE
from cer_cli.query import ast
from cer_cli.query.checks import LIKE_SYNTAX_HINT, iso_datetime, like_pattern_error
from cer_cli.query.errors import QueryError
from cer_cli.query.scope import pred_vars, strip_var

# --------------------------------------------------------------------------- atoms


@dataclass(frozen=True)
class TypeTest:
    """The event has type ``name``."""

    name: str


@dataclass(frozen=True)
class StreamTest:
    """The event comes from stream ``name``."""

    name: str


@dataclass(frozen=True)
class AttrTest:
    """An atomic predicate over one event's attributes; every ``AttrRef.var`` is ``""``."""

    predicate: ast.Predicate


Atom = TypeTest | StreamTest | AttrTest

#: The guard that never holds (an empty disjunction).
GFALSE: Guard = GOr(())


# --------------------------------------------------------------------------- polars


def _kind(dtype: pl.DataType) -> str | None:
    if dtype.is_integer():
        return "int"
    if dtype.is_float():
        return "float"
    if dtype == pl.String:
        return "str"
    if isinstance(dtype, pl.Datetime):
        return "datetime"
    return None


#: nanoseconds per unit of a polars datetime
_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000}


def _datetime_literal(text: str) -> pl.Expr | None:
    """A string literal compared with a datetime attribute is that date-time (UTC), as
    the attribute's value is compared (``_instant``)."""
    value = iso_datetime(text)
    if value is None:
        return None
    return pl.lit((value - _EPOCH) // _US * 1_000, dtype=pl.Int128)


_EPOCH = datetime(1970, 1, 1)
_US = timedelta(microseconds=1)


def _instant(expr: pl.Expr, dtype: pl.Datetime) -> pl.Expr:
    """A datetime compares as its instant, exactly: nanoseconds since the epoch (the
    physical value, UTC for an aware one; a naive one is UTC by definition). Polars refuses
    to compare different zones or naive with aware, and compares different units in the
    coarser one (a nanosecond later would be equal)."""
    return expr.cast(pl.Int64).cast(pl.Int128) * _NS[dtype.time_unit]


#: Maps an attribute reference to the name of the frame column holding its value.
Column = Callable[[ast.AttrRef], str]


def _unqualified(ref: ast.AttrRef) -> str:
    return ref.attr


def _value(node: ast.Expr, schema: Mapping[str, pl.DataType],
           column: Column) -> tuple[pl.Expr, str] | None:
    """A polars expression and its kind ('int', 'float', 'str'), or None if it cannot be
    computed on this frame (absent attribute, unsupported type) — the atom is then false.
    A NaN (read or computed) is null: it has no value to compare."""
    if isinstance(node, ast.Literal):
        v = node.value
        if isinstance(v, bool):
            return None
        if isinstance(v, int):
            return pl.lit(v, dtype=pl.Int64), "int"
        if isinstance(v, float):
            return pl.lit(v, dtype=pl.Float64), "float"
        return pl.lit(v, dtype=pl.String), "str"
    if isinstance(node, ast.AttrRef):
        name = column(node)
        if name not in schema:
            return None
        kind = _kind(schema[name])
        if kind is None:
            return None
        if kind == "float":
            return pl.col(name).cast(pl.Float64).fill_nan(None), kind
        if kind == "datetime":
            return _instant(pl.col(name), schema[name]), kind
        return pl.col(name).cast(pl.Int64 if kind == "int" else pl.String), kind
    if isinstance(node, ast.Neg):
        inner = _value(node.operand, schema, column)
        if inner is None or inner[1] in ("str", "datetime"):
            return None
        if inner[1] == "int":  # polars has no Int128 negate
            return pl.lit(0, dtype=pl.Int128) - _wide(*inner), "int"
        return -inner[0], inner[1]
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left, schema, column), _value(node.right, schema, column)
        if left is None or right is None or {"str", "datetime"} & {left[1], right[1]}:
            return None
        (a, ka), (b, kb) = left, right
        kind = "int" if ka == kb == "int" else "float"
        if kind == "int":
            _check_width(node, schema, column)  # int operands: every attribute inside is int
        a, b = _wide(a, ka), _wide(b, kb)
        if kind == "float":
            a, b = a.cast(pl.Float64), b.cast(pl.Float64)
        if node.op == "+":
            out = a + b
        elif node.op == "-":
            out = a - b
        elif node.op == "*":
            out = a * b
        else:
            safe_b = pl.when(b != 0).then(b)  # division by zero -> null -> atom false
            if kind == "int":
                # polars `//` floors; truncation differs when the quotient is negative and inexact.
                floor_q = a // safe_b
                inexact = (a % safe_b) != 0
                trunc_q = pl.when(inexact & ((a < 0) != (b < 0))).then(floor_q + 1).otherwise(floor_q)
            else:
                q = a / safe_b
                trunc_q = pl.when(q >= 0).then(q.floor()).otherwise(q.ceil())
            if node.op == "/":
                out = trunc_q if kind == "int" else a / safe_b
            elif node.op == "%":
                out = a - b * trunc_q
            else:
                raise TypeError(f"not an arithmetic operator: {node.op!r}")
        return (out.fill_nan(None) if kind == "float" else out), kind
    raise TypeError(f"not a value expression: {node!r}")


def value_expression(node: ast.Expr, schema: Mapping[str, pl.DataType]) -> tuple[pl.Expr, str] | None:
    """The value of ``node`` on one event per row (attributes read by bare name, whatever
    variable they name) and its kind, or None where it can never be computed: the same
    values ``predicate_expression`` compares (the PCEA's ordered index keys on them)."""
    return _value(node, schema, _unqualified)


def comparable(kind: str, other: str) -> bool:
    """Values of these kinds compare (numbers with numbers, strings with strings, ...)."""
    return _compatible(kind, other)


def _wide(expr: pl.Expr, kind: str) -> pl.Expr:
    """Integer arithmetic runs in 128 bits: exact for 64-bit operands, where int64 would
    wrap around silently (``_check_width`` refuses what could exceed 128 bits)."""
    return expr.cast(pl.Int128) if kind == "int" else expr


_INT_BOUND = {pl.Int8: 2**7, pl.Int16: 2**15, pl.Int32: 2**31, pl.UInt8: 2**8,
              pl.UInt16: 2**16, pl.UInt32: 2**32}

#: Integers in predicates are 64-bit; arithmetic on them is exact below this magnitude.
_WIDE_LIMIT = 2**127


def _magnitude(node: ast.Expr, schema: Mapping[str, pl.DataType], column: Column) -> int:
    """An upper bound on the absolute value of an integer expression (64-bit attributes)."""
    if isinstance(node, ast.Literal):
        return abs(node.value) if isinstance(node.value, int) else 0
    if isinstance(node, ast.AttrRef):
        return _INT_BOUND.get(schema.get(column(node)), 2**63)
    if isinstance(node, ast.Neg):
        return _magnitude(node.operand, schema, column)
    left, right = _magnitude(node.left, schema, column), _magnitude(node.right, schema, column)
    if node.op in ("+", "-"):
        return left + right
    if node.op == "*":
        return left * right
    return left if node.op == "/" else min(left, right)


def _check_width(node: ast.Expr, schema: Mapping[str, pl.DataType], column: Column) -> None:
    """Refuse integer arithmetic that could leave 128 bits (it would not be exact)."""
    if _magnitude(node, schema, column) >= _WIDE_LIMIT:
        raise QueryError(
            f"integer arithmetic '{describe_expr(node)}' may exceed 128 bits, where it would"
            " not be exact", node.span,
            hints=["split the product, or make one operand a float (e.g. 2.0) to compute"
                   " approximately"])


def _compatible(k1: str, k2: str) -> bool:
    return (k1 == "str") == (k2 == "str") and (k1 == "datetime") == (k2 == "datetime")


_COMPARE = {
    "<": pl.Expr.__lt__,
    "<=": pl.Expr.__le__,
    ">": pl.Expr.__gt__,
    ">=": pl.Expr.__ge__,
    "=": pl.Expr.__eq__,
    "!=": pl.Expr.__ne__,
}


def _atom_expr(pred: ast.Predicate, schema: Mapping[str, pl.DataType],
               column: Column) -> pl.Expr | None:
    """Boolean expression for one atomic predicate (nulls allowed), or None for 'always false'."""
    def value(node: ast.Expr) -> tuple[pl.Expr, str] | None:
        return _value(node, schema, column)

    def against(node: ast.Expr, other: ast.Expr) -> tuple[pl.Expr, str] | None:
        """``node``'s value; a string literal facing a datetime attribute is a datetime."""
        if (isinstance(node, ast.Literal) and isinstance(node.value, str)
                and isinstance(other, ast.AttrRef) and column(other) in schema
                and _kind(schema[column(other)]) == "datetime"):
            lit = _datetime_literal(node.value)
            return None if lit is None else (lit, "datetime")
        return value(node)

    if isinstance(pred, ast.Compare):
        left, right = against(pred.left, pred.right), against(pred.right, pred.left)
        if left is None or right is None or not _compatible(left[1], right[1]):
            return None
        return _COMPARE[pred.op](left[0], right[0])
    if isinstance(pred, ast.Like):
        operand = value(pred.operand)
        if operand is None or operand[1] != "str":
            return None
        return operand[0].str.contains(pred.pattern)
    if isinstance(pred, ast.InSet):
        operand = value(pred.operand)
        if operand is None:
            return None
        options = [operand[0] == v[0] for v in (against(lit, pred.operand) for lit in pred.values)
                   if v is not None and _compatible(operand[1], v[1])]
        # null operand -> null (-> false), whether IN or NOT IN
        member = pl.any_horizontal(options) if options else pl.when(operand[0].is_not_null()).then(False)
        return ~member if pred.negated else member
    if isinstance(pred, (ast.InInterval, ast.InRange)):
        operand = value(pred.operand)
        if operand is None:
            return None
        test = pl.when(operand[0].is_not_null()).then(True)  # null operand stays null
        for bound, op in ((pred.low, ">="), (pred.high, "<=")):
            if bound is None:
                continue
            b = value(bound)
            if b is None or not _compatible(operand[1], b[1]):
                return None
            test = test & _COMPARE[op](operand[0], b[0])
        negated = isinstance(pred, ast.InInterval) and pred.negated
        return ~test if negated else test
    raise TypeError(f"not an atomic predicate: {pred!r}")


def _strict(pred: ast.Predicate, schema: Mapping[str, pl.DataType],
            column: Column) -> pl.Expr | None:
    """Kleene value of a (compound) predicate; None when some part can never be computed."""
    if isinstance(pred, ast.BoolConst):
        return pl.lit(pred.value)
    if isinstance(pred, (ast.And, ast.Or)):
        left, right = _strict(pred.left, schema, column), _strict(pred.right, schema, column)
        if left is None or right is None:
            return None
        return left & right if isinstance(pred, ast.And) else left | right
    if isinstance(pred, ast.Not):
        inner = _strict(pred.operand, schema, column)
        return None if inner is None else ~inner
    return _atom_expr(pred, schema, column)


def _operands(pred: ast.Predicate) -> list[ast.Expr]:
    """The value expressions inside a predicate; it is undefined if any of them is null."""
    if isinstance(pred, (ast.And, ast.Or)):
        return _operands(pred.left) + _operands(pred.right)
    if isinstance(pred, ast.Not):
        return _operands(pred.operand)
    if isinstance(pred, ast.Compare):
        return [pred.left, pred.right]
    if isinstance(pred, ast.InRange):
        return [pred.operand, pred.low, pred.high]
    if isinstance(pred, (ast.Like, ast.InSet, ast.InInterval)):
        return [pred.operand]
    return []


def _never_null(expr: pl.Expr | None) -> pl.Expr:
    rows = pl.repeat(True, pl.len(), dtype=pl.Boolean)  # one value per row, even for constants
    return rows & False if expr is None else rows & expr.fill_null(False)


def predicate_expression(pred: ast.Predicate, schema: Mapping[str, pl.DataType],
                         column: Column = _unqualified) -> pl.Expr:
    """The boolean polars expression of ``pred``, evaluated as ONE atom, on a frame where
    ``column(ref)`` names the column holding attribute reference ``ref`` (``schema`` gives
    the frame's column types).

    Never null. False on a row where any part cannot be computed (absent, null or NaN
    attribute, division by zero), even under NOT or OR: a test of one event reads the
    event's attributes by bare name (the default ``column``); a test between events reads
    one combination of events per row, e.g. ``column=lambda r: f"{r.var}.{r.attr}"``.
    """
    expr = _strict(pred, schema, column)
    values = [_value(e, schema, column) for e in _operands(pred)]
    if expr is None or any(v is None for v in values):
        return _never_null(None)
    for v in values:
        expr = expr & v[0].is_not_null()  # type: ignore[index]
    return _never_null(expr)


def atom_expression(atom: Atom, schema: Mapping[str, pl.DataType]) -> pl.Expr:
    """The boolean polars expression of ``atom`` over an event frame with this schema.

    Never null; an attribute test is ``predicate_expression`` of its predicate (whose
    variables are stripped, so attributes are read by bare name).
    """
    if isinstance(atom, TypeTest):
        return _never_null(pl.col(TYPE) == atom.name if TYPE in schema else None)
    if isinstance(atom, StreamTest):
        return _never_null(pl.col(STREAM) == atom.name if STREAM in schema else None)
    return predicate_expression(atom.predicate, schema)


def check_atom(atom: Atom) -> None:
    """Reject what polars would only reject mid-stream (a LIKE regex its Rust engine refuses:
    look-around, backreferences, too large), judged by polars itself, as ``cer check`` does."""
    if isinstance(atom, AttrTest) and isinstance(atom.predicate, ast.Like):
        pattern = atom.predicate.pattern
        problem = like_pattern_error(pattern)
        if problem is not None:
            raise QueryError(f"invalid regular expression in LIKE {pattern!r}: {problem}",
                             atom.predicate.span, hints=[LIKE_SYNTAX_HINT])


# --------------------------------------------------------------------------- alphabet


@dataclass(frozen=True)
class Alphabet:
    """The atomic predicates of one query, numbered; bit ``i`` of a mask is atom ``i``.

    ``symbols`` interns masks to dense symbol ids. The interning table lives in the
    instance and only grows, so a mask keeps its id across batches: the determiniser may
    cache transitions per ``(det-state, symbol id)`` for the whole run.
    """

    atoms: tuple[Atom, ...]
    _ids: dict[int, int] = field(default_factory=dict, compare=False, repr=False)
    _masks: list[int] = field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        for atom in self.atoms:
            check_atom(atom)
        object.__setattr__(self, "_index", {atom: i for i, atom in enumerate(self.atoms)})

    @staticmethod
    def from_formula(formula: ast.Formula | None) -> Alphabet:
        """Collect the atoms a formula's CEA needs, in first-occurrence order."""
        atoms: dict[Atom, None] = {}
        if formula is not None:
            _collect(formula, atoms)
        return Alphabet(tuple(atoms))

    def index(self, atom: Atom) -> int:
        try:
            return self._index[atom]  # type: ignore[attr-defined]
        except KeyError:
            raise ValueError(f"{atom} is not in this alphabet: build it with "
                             "Alphabet.from_formula on the formula being compiled") from None

    def guard(self, predicate: ast.Predicate) -> Guard:
        """The guard testing a filter predicate on one event (its variable ignored).

        A predicate over one variable is one atom, evaluated as a whole: it fails when
        any attribute it reads is absent or null (docs/language.md, "Filters").
        """
        if isinstance(predicate, ast.BoolConst):
            return GTrue() if predicate.value else GFALSE
        return GAtom(self.index(AttrTest(strip_var(predicate))))

    def expressions(self, schema: Mapping[str, pl.DataType]) -> list[pl.Expr]:
        """One boolean expression per atom (aliased ``__cer_atom_i``) for a frame schema."""
        return [atom_expression(a, schema).alias(f"__cer_atom_{i}") for i, a in enumerate(self.atoms)]

    def symbols(self, frame: pl.DataFrame) -> tuple[np.ndarray, list[int]]:
        """Summarise each event of ``frame`` (an event frame, see events.py).

        Returns ``(ids, masks)``: ``ids`` is an int32 array with one symbol id per row, and
        ``masks[s]`` is the bit mask of the atoms satisfied by symbol ``s`` (bit ``i`` set iff
        atom ``i`` holds; test a guard with ``cea.holds(guard, masks[s])``). ``masks`` covers
        every id handed out so far, by this and earlier calls; ids are dense, start at 0 and
        never change meaning, so per-symbol caches stay valid across batches.
        """
        n = frame.height
        if not self.atoms:
            return np.zeros(n, dtype=np.int32), self._intern_all([0])[1]
        if len(self.atoms) < 64:  # the mask as one integer column, built by polars
            exprs = self.expressions(frame.schema)
            word = pl.sum_horizontal(
                [e.fill_null(False).cast(pl.UInt64) * pl.lit(1 << i, dtype=pl.UInt64)
                 for i, e in enumerate(exprs)]
            )
            words = frame.select(word.alias("w")).to_series()
            distinct = words.unique().to_list()
            local_ids, masks = self._intern_all(distinct)
            w = words.to_numpy()
            top = max(distinct) if distinct else 0
            if top < 1 << 22:  # dense lookup table: no sort
                lut = np.zeros(top + 1, dtype=np.int32)
                lut[np.asarray(distinct, dtype=np.int64)] = local_ids
                return lut[w], masks
            order = np.argsort(np.asarray(distinct, dtype=np.uint64))
            keys = np.asarray(distinct, dtype=np.uint64)[order]
            ids = np.asarray(local_ids, dtype=np.int32)[order][np.searchsorted(keys, w)]
            return ids, masks
        bits = frame.select(self.expressions(frame.schema)).to_numpy().astype(bool, copy=False)
        packed = np.packbits(bits.reshape(n, len(self.atoms)), axis=1, bitorder="little")
        width = -(-packed.shape[1] // 8) * 8
        packed = np.pad(packed, ((0, 0), (0, width - packed.shape[1])))
        words = np.ascontiguousarray(packed).view("<u8")
        if words.shape[1] == 1:
            uniq, inverse = np.unique(words[:, 0], return_inverse=True)
            distinct = [int(w) for w in uniq]
        else:
            uniq, inverse = np.unique(words, axis=0, return_inverse=True)
            distinct = [int.from_bytes(row.tobytes(), "little") for row in uniq]
        local_ids, masks = self._intern_all(distinct)
        ids = np.asarray(local_ids, dtype=np.int32)[inverse.reshape(-1)] if n else np.zeros(0, np.int32)
        return ids.astype(np.int32, copy=False), masks

    def _intern_all(self, distinct: list[int]) -> tuple[list[int], list[int]]:
        out = []
        for mask in distinct:
            if mask not in self._ids:
                self._ids[mask] = len(self._masks)
                self._masks.append(mask)
            out.append(self._ids[mask])
        return out, list(self._masks)

    def describe_guard(self, guard: Guard) -> str:
        """Readable text of a guard, for ``cer explain``."""
        if isinstance(guard, GTrue):
            return "TRUE"
        if isinstance(guard, GAtom):
            return describe_atom(self.atoms[guard.index])
        if isinstance(guard, GNot):
            return f"NOT {self.describe_guard(guard.operand)}"
        parts = [self.describe_guard(g) for g in guard.operands]
        if isinstance(guard, GAnd):
            return " AND ".join(f"({p})" if " OR " in p else p for p in parts) or "TRUE"
        return " OR ".join(parts) or "FALSE"


def _collect(formula: ast.Formula, atoms: dict[Atom, None]) -> None:
    if isinstance(formula, ast.EventType):
        atoms[TypeTest(formula.name)] = None
        if formula.stream is not None:
            atoms[StreamTest(formula.stream)] = None
        return
    if isinstance(formula, ast.Filter):
        _collect(formula.formula, atoms)
        if len(pred_vars(formula.predicate)) <= 1 and not isinstance(formula.predicate, ast.BoolConst):
            atoms[AttrTest(strip_var(formula.predicate))] = None
        return
    for child in vars(formula).values():
        if isinstance(child, (ast.EventType, ast.As, ast.Seq, ast.FOr, ast.Plus, ast.Filter, ast.FNot)):
            _collect(child, atoms)


# --------------------------------------------------------------------------- text


def describe_expr(node: ast.Expr) -> str:
    if isinstance(node, ast.Literal):
        return repr(node.value) if isinstance(node.value, str) else str(node.value)
    if isinstance(node, ast.AttrRef):
        return node.attr if not node.var else f"{node.var}.{node.attr}"
    if isinstance(node, ast.Neg):
        return f"-{describe_expr(node.operand)}"
    return f"({describe_expr(node.left)} {node.op} {describe_expr(node.right)})"


def describe_predicate(pred: ast.Predicate) -> str:
    if isinstance(pred, ast.BoolConst):
        return "TRUE" if pred.value else "FALSE"
    if isinstance(pred, ast.And):
        return f"({describe_predicate(pred.left)} AND {describe_predicate(pred.right)})"
    if isinstance(pred, ast.Or):
        return f"({describe_predicate(pred.left)} OR {describe_predicate(pred.right)})"
    if isinstance(pred, ast.Not):
        return f"NOT {describe_predicate(pred.operand)}"
    if isinstance(pred, ast.Compare):
        return f"{describe_expr(pred.left)} {pred.op} {describe_expr(pred.right)}"
    if isinstance(pred, ast.Like):
        return f"{describe_expr(pred.operand)} LIKE {pred.pattern!r}"
    neg = "NOT " if getattr(pred, "negated", False) else ""
    if isinstance(pred, ast.InSet):
        values = ", ".join(describe_expr(v) for v in pred.values)
        return f"{describe_expr(pred.operand)} {neg}IN {{{values}}}"
    if isinstance(pred, ast.InInterval):
        lo = "" if pred.low is None else describe_expr(pred.low)
        hi = "" if pred.high is None else describe_expr(pred.high)
        return f"{describe_expr(pred.operand)} {neg}IN {{{lo}..{hi}}}"
    return (f"{describe_expr(pred.operand)} IN RANGE "
            f"({describe_expr(pred.low)}, {describe_expr(pred.high)})")


def describe_atom(atom: Atom) -> str:
    if isinstance(atom, TypeTest):
        return f"type = {atom.name}"
    if isinstance(atom, StreamTest):
        return f"stream = {atom.name}"
    return describe_predicate(atom.predicate)
