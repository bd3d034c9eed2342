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
expressions with it; the hash join's keys (``key_expressions``), its ordered index and the
absence bisection (``comparison_pair``, ``join_pair``) take their values from here too.

Column types (``_kind``; README "Attribute types"): every integer type but UInt128 is an
exact integer (int64, or int128 for UInt64 and Int128); decimals compare exactly with
integers, decimals and number literals as written (arithmetic on them is floating point);
floats compare as float64 (an integer or decimal facing a float too, as polars compares);
categoricals and enums are their strings; dates are their midnight (UTC) as an instant,
so they compare with datetimes and ISO literals; booleans compare with booleans and
``TRUE``/``FALSE``. Other types have no kind: ``cer check`` refuses a query reading them
(``io.contract.kind_of``, ``Schema.refused``), and here an atom on them is false. Cost: one vectorised polars expression per atom per batch, then
``np.unique`` over the packed masks; Python work is per *distinct* mask, never per row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

import numpy as np
import polars as pl

from cer_cli.compiler.cea import GAnd, GAtom, GNot, GOr, GTrue, Guard
from cer_cli.events import STREAM, TYPE
from cer_cli.query import ast
from cer_cli.query.checks import LIKE_SYNTAX_HINT, iso_datetime, like_pattern_error
from cer_cli.query.errors import QueryError
from cer_cli.query.printer import shown
from cer_cli.query.scope import bottom_up, is_atom, operands, pred_vars, push_not, strip_var

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


#: Kinds of values that compare with each other: numbers (exactly, unless a float is involved).
_NUMBERS = frozenset({"int", "decimal", "float"})
#: Integer dtypes whose values fit int64; the others (UInt64, Int128) are read as int128.
_NARROW_INTS = (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32)


def _kind(dtype: pl.DataType) -> str | None:
    """The kind of a column's values: int, decimal, float, str, datetime, bool; None for a
    type predicates cannot compare (UInt128, whose comparisons polars gets wrong; lists,
    durations, ...)."""
    if dtype.is_integer():
        return None if dtype == pl.UInt128 else "int"
    if dtype.is_float():
        return "float"
    if dtype.is_decimal():
        return "decimal"
    if dtype == pl.String or isinstance(dtype, (pl.Categorical, pl.Enum)):
        return "str"
    if isinstance(dtype, (pl.Datetime, pl.Date)):
        return "datetime"
    if dtype == pl.Boolean:
        return "bool"
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


def _decimal_literal(value: float) -> tuple[pl.Expr, str]:
    """A number literal facing a decimal: the decimal it was written as (``1.1`` is 1.1,
    not the binary float nearest to it), so a Decimal(10, 2) ``1.10`` equals it. A literal
    beyond polars' 38 digits stays a float (the decimal is then compared as a float)."""
    d = Decimal(repr(value))
    if d.as_tuple().exponent > 0:
        d = d.quantize(Decimal(1))
    digits, exponent = len(d.as_tuple().digits), -d.as_tuple().exponent
    if max(digits, exponent) > 38:
        return pl.lit(value, dtype=pl.Float64), "float"
    return pl.lit(d, dtype=pl.Decimal(38, exponent)), "decimal"


_EPOCH = datetime(1970, 1, 1)
_US = timedelta(microseconds=1)


def _instant(expr: pl.Expr, dtype: pl.Datetime | pl.Date) -> pl.Expr:
    """A datetime compares as its instant, exactly: nanoseconds since the epoch (the
    physical value, UTC for an aware one; a naive one is UTC by definition). Polars refuses
    to compare different zones or naive with aware, and compares different units in the
    coarser one (a nanosecond later would be equal). A date is its midnight, UTC, as a
    date-only ISO literal is (``'2024-02-01'``), so dates and datetimes compare too."""
    if not isinstance(dtype, pl.Datetime):
        return expr.cast(pl.Int32).cast(pl.Int128) * _NS_PER_DAY
    return expr.cast(pl.Int64).cast(pl.Int128) * _NS[dtype.time_unit]


_NS_PER_DAY = 86_400 * 10**9


def _column(name: str, dtype: pl.DataType) -> tuple[pl.Expr, str] | None:
    """The value of column ``name`` and its kind (``_kind``), or None: exact integers
    (int128 where int64 would not hold them), floats with NaN as null, decimals as they
    are, strings (categoricals and enums too), instants, booleans."""
    kind = _kind(dtype)
    col = pl.col(name)
    if kind == "int":
        return col.cast(pl.Int64 if dtype in _NARROW_INTS else pl.Int128), kind
    if kind == "float":
        return col.cast(pl.Float64).fill_nan(None), kind
    if kind == "str":
        return col.cast(pl.String), kind
    if kind == "datetime":
        return _instant(col, dtype), kind
    return None if kind is None else (col, kind)


#: Maps an attribute reference to the name of the frame column holding its value.
Column = Callable[[ast.AttrRef], str]


def _unqualified(ref: ast.AttrRef) -> str:
    return ref.attr


def _value(node: ast.Expr, schema: Mapping[str, pl.DataType],
           column: Column) -> tuple[pl.Expr, str] | None:
    """A polars expression and its kind (``_kind``), or None if it cannot be computed on
    this frame (absent attribute, unsupported type) — the atom is then false.
    A NaN (read or computed) is null: it has no value to compare. Arithmetic is over
    numbers; with a decimal or float operand it is floating point."""
    if isinstance(node, ast.Literal):
        v = node.value
        if isinstance(v, bool):
            return pl.lit(v, dtype=pl.Boolean), "bool"
        if isinstance(v, int):
            return pl.lit(v, dtype=pl.Int64 if -(2**63) <= v < 2**63 else pl.Int128), "int"
        if isinstance(v, float):
            return pl.lit(v, dtype=pl.Float64), "float"
        return pl.lit(v, dtype=pl.String), "str"
    if isinstance(node, ast.AttrRef):
        name = column(node)
        return _column(name, schema[name]) if name in schema else None
    if isinstance(node, ast.Neg):
        inner = _value(node.operand, schema, column)
        if inner is None or inner[1] not in _NUMBERS:
            return None
        if inner[1] == "int":  # polars has no Int128 negate
            return pl.lit(0, dtype=pl.Int128) - _wide(*inner), "int"
        return -inner[0], inner[1]
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left, schema, column), _value(node.right, schema, column)
        if left is None or right is None or not {left[1], right[1]} <= _NUMBERS:
            return None
        (a, ka), (b, kb) = (_floating(*left), _floating(*right))
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
            elif node.op == "%" and kind == "int":
                out = a - b * trunc_q
            elif node.op == "%":  # C's fmod, exact: a - b * trunc(a / b) rounds with a / b
                out = pl.map_batches([a.cast(pl.Float64), safe_b.cast(pl.Float64)], _fmod,
                                     return_dtype=pl.Float64, is_elementwise=True)
            else:
                raise TypeError(f"not an arithmetic operator: {node.op!r}")
        return (out.fill_nan(None) if kind == "float" else out), kind
    raise TypeError(f"not a value expression: {node!r}")


def _fmod(s: list[pl.Series]) -> pl.Series:
    """The remainder of floats as C's ``fmod`` (the sign of the dividend), exactly: polars'
    ``a - b * trunc(a / b)`` gave ``1 % 0.2`` as 0 where it is 0.19999999999999996 (a / b
    rounds to 5), so ``1 % 0.2 <= 0`` held for polars and not for the reference. A null
    (or a zero divisor, made null) is NaN here, and null again after."""
    import numpy as np

    return pl.Series(np.fmod(s[0].to_numpy(), s[1].to_numpy()), dtype=pl.Float64)


def value_expression(node: ast.Expr, schema: Mapping[str, pl.DataType]) -> tuple[pl.Expr, str] | None:
    """The value of ``node`` on one event per row (attributes read by bare name, whatever
    variable they name) and its kind, or None where it can never be computed: the same
    values ``predicate_expression`` compares (the PCEA's ordered index keys on them)."""
    return _value(node, schema, _unqualified)


def comparable(kind: str, other: str) -> bool:
    """Values of these kinds compare (numbers with numbers, strings with strings, ...)."""
    return _compatible(kind, other)


def _floating(expr: pl.Expr, kind: str) -> tuple[pl.Expr, str]:
    """A decimal operand of arithmetic as a float: polars' decimal arithmetic rounds to
    the operands' scale (1.1⁵ gives 1.61) and fails on overflow mid-stream."""
    return (expr.cast(pl.Float64), "float") if kind == "decimal" else (expr, kind)


def comparison_pair(left: tuple[pl.Expr, str] | None,
                    right: tuple[pl.Expr, str] | None) -> tuple[pl.Expr, pl.Expr] | None:
    """Two values (as ``_value`` gives them) as the expressions a comparison compares, or
    None when they never compare. A float facing an integer or a decimal makes both
    float64 (as polars compares them); integers and decimals compare exactly. Python's
    comparison of the two sides' listed values (``to_list``) then agrees with the
    predicate, which the hash join's ordered index relies on."""
    if left is None or right is None or not _compatible(left[1], right[1]):
        return None
    (a, ka), (b, kb) = left, right
    if ka != kb and "float" in (ka, kb):
        return a.cast(pl.Float64), b.cast(pl.Float64)
    return a, b


def join_pair(left: tuple[pl.Expr, str] | None,
              right: tuple[pl.Expr, str] | None) -> tuple[pl.Expr, pl.Expr] | None:
    """``comparison_pair`` with both sides of one dtype, for a polars join on equal values:
    integers as int128, a decimal facing another decimal of another scale or an integer
    as its canonical text (``_decimal_text``: exact, where a common decimal type could
    overflow)."""
    pair = comparison_pair(left, right)
    if pair is None:
        return None
    (a, b), kinds = pair, {left[1], right[1]}  # type: ignore[index]
    if kinds == {"int"}:
        return a.cast(pl.Int128), b.cast(pl.Int128)
    if "decimal" in kinds and "float" not in kinds:
        return _decimal_text(a), _decimal_text(b)
    return a, b


def _decimal_text(expr: pl.Expr) -> pl.Expr:
    """An integer or decimal as its shortest exact text (``1.10`` and ``1.1`` are ``1.1``,
    ``2.00`` is ``2``, ``-0.00`` is ``0``): equal texts iff equal values."""
    text = expr.cast(pl.String)
    return (text.str.replace(r"(\.\d*?)0+$", "${1}").str.replace(r"\.$", "")
            .str.replace(r"^-0$", "0"))


def key_expressions(columns: list[str], schema: Mapping[str, pl.DataType]) -> list[pl.Expr | None]:
    """The values of ``columns`` (the attributes of one equality class of a hash join) as
    ``value_expression`` reads them, as expressions whose Python values (``to_list``) are
    equal, and hash equal, exactly when ``=`` holds between them (``comparison_pair``):
    exact integers and decimals (Python's ``Decimal`` equals and hashes as the integer it
    equals), all as float64 when the class also holds floats, instants as integers of
    nanoseconds. In a class that mixes kinds ``=`` never relates (a boolean and an integer,
    an instant and a number), each value that is not a number becomes text tagged with its
    kind: Python would equal ``True`` with ``1`` and an instant with its integer. None for a
    column the frame lacks or cannot compare (its key is null: it joins nothing)."""
    values = [value_expression(ast.AttrRef("", c), schema) for c in columns]
    kinds = {v[1] for v in values if v is not None}
    floats = "float" in kinds and len(kinds & _NUMBERS) > 1
    mixed = len({"number" if k in _NUMBERS else k for k in kinds}) > 1

    def key(expr: pl.Expr, kind: str) -> pl.Expr:
        if kind in _NUMBERS:
            return expr.cast(pl.Float64) if floats else expr
        return pl.concat_str(pl.lit(f"{kind}:"), expr.cast(pl.String)) if mixed else expr

    return [None if v is None else key(*v) for v in values]


def _wide(expr: pl.Expr, kind: str) -> pl.Expr:
    """Integer arithmetic runs in 128 bits: exact for 64-bit operands, where int64 would
    wrap around silently (``_check_width`` refuses what could exceed 128 bits)."""
    return expr.cast(pl.Int128) if kind == "int" else expr


_INT_BOUND = {pl.Int8: 2**7, pl.Int16: 2**15, pl.Int32: 2**31, pl.UInt8: 2**8,
              pl.UInt16: 2**16, pl.UInt32: 2**32, pl.UInt64: 2**64, pl.Int128: 2**127}

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
            f"integer arithmetic '{shown(node)}' may exceed 128 bits, where it would"
            " not be exact", node.span,
            hints=["split the product, or make one operand a float (e.g. 2.0) to compute"
                   " approximately"])


def _compatible(k1: str, k2: str) -> bool:
    return k1 == k2 or {k1, k2} <= _NUMBERS


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
        """``node``'s value; a string literal facing a datetime attribute is a datetime,
        a number literal facing a decimal is that decimal, as written."""
        if isinstance(node, ast.Literal) and isinstance(other, ast.AttrRef):
            kind = _kind(schema[column(other)]) if column(other) in schema else None
            if isinstance(node.value, str) and kind == "datetime":
                lit = _datetime_literal(node.value)
                return None if lit is None else (lit, "datetime")
            if isinstance(node.value, float) and kind == "decimal":
                return _decimal_literal(node.value)
        return value(node)

    def compare(op: str, left: tuple[pl.Expr, str] | None,
                right: tuple[pl.Expr, str] | None) -> pl.Expr | None:
        pair = comparison_pair(left, right)
        return None if pair is None else _COMPARE[op](*pair)

    if isinstance(pred, ast.Compare):
        return compare(pred.op, against(pred.left, pred.right), against(pred.right, pred.left))
    if isinstance(pred, ast.Like):
        operand = value(pred.operand)
        if operand is None or operand[1] != "str":
            return None
        return operand[0].str.contains(pred.pattern)
    if isinstance(pred, ast.InSet):
        operand = value(pred.operand)
        if operand is None:
            return None
        options = [e for e in (compare("=", operand, against(lit, pred.operand))
                               for lit in pred.values) if e is not None]
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
            holds = compare(op, operand, against(bound, pred.operand))
            if holds is None:
                return None
            test = test & holds
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


def _never_null(expr: pl.Expr | None) -> pl.Expr:
    rows = pl.repeat(True, pl.len(), dtype=pl.Boolean)  # one value per row, even for constants
    return rows & False if expr is None else rows & expr.fill_null(False)


def predicate_expression(pred: ast.Predicate, schema: Mapping[str, pl.DataType],
                         column: Column = _unqualified) -> pl.Expr:
    """The boolean polars expression of ``pred`` on a frame where ``column(ref)`` names the
    column holding attribute reference ``ref`` (``schema`` gives the frame's column types):
    a test of one event reads the event's attributes by bare name (the default
    ``column``); a test between events reads one combination of events per row, e.g.
    ``column=lambda r: f"{r.var}.{r.attr}"``.

    Never null. An atom (``scope.is_atom``: a comparison, or one ``x[...]`` group with the
    connectives inside it) is false on a row where any part of it cannot be computed
    (absent, null or NaN attribute, division by zero), even under NOT or OR. Connectives
    between atoms combine the atoms' truth values, NOT moved down to the atoms (De
    Morgan), as for several events (docs/language.md): on ``id`` null and ``v`` 0,
    ``x.id < 0 OR x.v = 0`` holds, ``x[id < 0 OR v = 0]`` does not.
    """
    if isinstance(pred, (ast.And, ast.Or)) and not pred.scoped:
        left = predicate_expression(pred.left, schema, column)
        right = predicate_expression(pred.right, schema, column)
        return left & right if isinstance(pred, ast.And) else left | right
    if not is_atom(pred):  # NOT over connectives between atoms
        assert isinstance(pred, ast.Not)
        return predicate_expression(push_not(pred.operand), schema, column)
    expr = _strict(pred, schema, column)
    values = [_value(e, schema, column) for e in operands(pred)]
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
        codes, distinct = self.summaries(frame)
        local_ids, masks = self._intern_all(distinct)
        return np.asarray(local_ids, dtype=np.int32)[codes], masks

    def summaries(self, frame: pl.DataFrame) -> tuple[np.ndarray, list[int]]:
        """Each event's atom mask, as ``(codes, distinct)``: ``distinct`` the masks present
        in ``frame`` and ``codes`` (int32, one per row) the index of each row's mask in it.
        The engine maps the few distinct masks to its symbols and looks the rows up once
        (``engine.run``), instead of mapping every row through each numbering in turn.

        Up to 16 atoms the masks are 16-bit words and the distinct ones are found by marking
        them in a table of 2^16 (no sort over the rows); up to 63, 64-bit words; beyond,
        rows of packed bits."""
        n = frame.height
        if not self.atoms:
            return np.zeros(n, dtype=np.int32), [0]
        if n == 0:
            return np.zeros(0, dtype=np.int32), []
        exprs = self.expressions(frame.schema)
        if len(self.atoms) < 64:  # the mask as one integer column, built by polars
            dtype = pl.UInt16 if len(self.atoms) <= 16 else pl.UInt64
            word = pl.sum_horizontal(
                [e.fill_null(False).cast(dtype) * pl.lit(1 << i, dtype=dtype)
                 for i, e in enumerate(exprs)]
            )
            w = frame.select(word.alias("w")).to_series().to_numpy()
            if dtype == pl.UInt16:
                seen = np.zeros(1 << 16, dtype=np.bool_)
                seen[w] = True
                keys = np.flatnonzero(seen)
                lut = np.zeros(1 << 16, dtype=np.int32)
                lut[keys] = np.arange(len(keys), dtype=np.int32)
                return lut[w], keys.tolist()
            keys, codes = np.unique(w, return_inverse=True)
            return codes.astype(np.int32, copy=False).reshape(-1), [int(k) for k in keys]
        bits = frame.select(exprs).to_numpy().astype(bool, copy=False)
        packed = np.packbits(bits.reshape(n, len(self.atoms)), axis=1, bitorder="little")
        width = -(-packed.shape[1] // 8) * 8
        packed = np.pad(packed, ((0, 0), (0, width - packed.shape[1])))
        words = np.ascontiguousarray(packed).view("<u8")
        uniq, inverse = np.unique(words, axis=0, return_inverse=True)
        distinct = [int.from_bytes(row.tobytes(), "little") for row in uniq]
        return inverse.reshape(-1).astype(np.int32, copy=False), distinct

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
            inner = self.describe_guard(guard.operand)
            return f"NOT ({inner})" if " AND " in inner or " OR " in inner else f"NOT {inner}"
        parts = [self.describe_guard(g) for g in guard.operands]
        if isinstance(guard, GAnd):
            return " AND ".join(f"({p})" if " OR " in p else p for p in parts) or "TRUE"
        return " OR ".join(parts) or "FALSE"


def _collect(formula: ast.Formula, atoms: dict[Atom, None]) -> None:
    """The atoms of ``formula``'s event types and unary filters, each after those inside it
    (ψ of ``; !ψ ;`` and the atom of ``NOT`` included: the CEA tests them too)."""
    for f in bottom_up(formula):
        if isinstance(f, ast.EventType):
            atoms[TypeTest(f.name)] = None
            if f.stream is not None:
                atoms[StreamTest(f.stream)] = None
        elif (isinstance(f, ast.Filter) and len(pred_vars(f.predicate)) <= 1
              and not isinstance(f.predicate, ast.BoolConst)):
            atoms[AttrTest(strip_var(f.predicate))] = None


# --------------------------------------------------------------------------- text


def describe_atom(atom: Atom) -> str:
    if isinstance(atom, TypeTest):
        return f"type = {atom.name}"
    if isinstance(atom, StreamTest):
        return f"stream = {atom.name}"
    return shown(atom.predicate)
