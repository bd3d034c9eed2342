"""Canonical text of CEQL ASTs: the inverse of ``parser.parse`` (docs/language.md).

``to_text(node)`` prints upper-case keywords, one clause per line, and fully parenthesised
formulas, predicates and expressions, so precedence never matters and
``parse(to_text(q)) == q`` for every ``Query`` (spans aside). Predicates over a single variable
print CORE style (``x[price > 5]``); predicates over several variables print CEL style
(``x.id = y.id``); a predicate whose variable was erased (``scope.strip_var``: an atom of the
alphabet) reads its attributes by bare name. Names that are keywords or not plain identifiers
are back-quoted. Cost: linear in the size of the AST.

It is the one printer of the AST: messages and ``cer explain`` quote queries with ``shown``
(the same text without the outer parentheses) and PARTITION BY groups with ``groups_text``.
"""

from __future__ import annotations

import re

from cer_cli.query import ast
from cer_cli.query.parser import KEYWORDS, NAME_PATTERN, qualify_streams
from cer_cli.query.scope import pred_vars, prev_refs

__all__ = ["to_text", "shown", "groups_text", "window_span", "quote_name"]

_PLAIN = re.compile(NAME_PATTERN + r"\Z")



def quote_name(name: str) -> str:
    """``name`` as an identifier: bare when plain and not a keyword, else back-quoted."""
    if _PLAIN.match(name) and name.upper() not in KEYWORDS:
        return name
    return "`" + name.replace("`", "``") + "`"


def _variable(label: str) -> str:
    """A variable: ``S>E`` labels print as written when both parts are plain names."""
    stream, sep, name = label.partition(">")
    if sep and _PLAIN.match(stream) and _PLAIN.match(name) and quote_name(stream) == stream \
            and quote_name(name) == name:
        return label
    return quote_name(label)


def _string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _number(value: int | float) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"not a number: {value!r}")
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{value!r} has no CEQL spelling")
    return repr(value)


def _literal(lit: ast.Literal) -> str:
    if isinstance(lit.value, bool):
        return "TRUE" if lit.value else "FALSE"
    return _string(lit.value) if isinstance(lit.value, str) else _number(lit.value)


# ------------------------------------------------------------------------------ expressions


def _expr(e: ast.Expr, scope: str | None) -> str:
    """``scope`` is the variable of an enclosing ``x[...]``: its attributes print bare."""
    if isinstance(e, ast.Literal):
        return _literal(e)
    if isinstance(e, ast.PrevRef):
        return f"PREV({quote_name(e.var)}).{quote_name(e.attr)}"
    if isinstance(e, ast.AttrRef):
        if e.var == scope or not e.var:
            return quote_name(e.attr)
        return f"{quote_name(e.var)}.{quote_name(e.attr)}"
    if isinstance(e, ast.BinOp):
        return f"({_expr(e.left, scope)} {e.op} {_expr(e.right, scope)})"
    if isinstance(e, ast.Neg):
        return f"-({_expr(e.operand, scope)})"
    raise TypeError(f"not an expression: {e!r}")


# ------------------------------------------------------------------------------ predicates


def _predicate(p: ast.Predicate, scope: str | None = None) -> str:
    if scope is None:
        variables = pred_vars(p)
        # A connective between atoms prints as one; ``x[...]`` is one atom (tested per event).
        between = isinstance(p, (ast.And, ast.Or, ast.Not)) and not p.scoped
        # ... except a single comparison with PREV(y): it reads two events, y.v > PREV(y).v
        register = prev_refs(p) and not isinstance(p, (ast.And, ast.Or, ast.Not))
        if len(variables) == 1 and not between and not register:
            (var,) = variables
            return _predicate(p, var) if not var else f"{_variable(var)}[{_predicate(p, var)}]"
    if isinstance(p, ast.And):
        return f"({_predicate(p.left, scope)} AND {_predicate(p.right, scope)})"
    if isinstance(p, ast.Or):
        return f"({_predicate(p.left, scope)} OR {_predicate(p.right, scope)})"
    if isinstance(p, ast.Not):
        return f"(NOT {_predicate(p.operand, scope)})"
    if isinstance(p, ast.BoolConst):
        return "TRUE" if p.value else "FALSE"
    if isinstance(p, ast.Compare):
        return f"({_expr(p.left, scope)} {p.op} {_expr(p.right, scope)})"
    if isinstance(p, ast.Like):
        return f"({_expr(p.operand, scope)} LIKE {_string(p.pattern)})"
    if isinstance(p, ast.InSet):
        values = ", ".join(_literal(v) for v in p.values)
        return f"({_expr(p.operand, scope)}{' NOT' if p.negated else ''} IN {{{values}}})"
    if isinstance(p, ast.InInterval):
        low = _literal(p.low) if p.low is not None else ""
        high = _literal(p.high) if p.high is not None else ""
        return f"({_expr(p.operand, scope)}{' NOT' if p.negated else ''} IN {{{low}..{high}}})"
    if isinstance(p, ast.InRange):
        return (f"({_expr(p.operand, scope)} IN RANGE ({_expr(p.low, scope)}, "
                f"{_expr(p.high, scope)}))")
    raise TypeError(f"not a predicate: {p!r}")


# ------------------------------------------------------------------------------ formulas


def _event(e: ast.EventType) -> str:
    if e.stream is None:
        return quote_name(e.name)
    return f"{quote_name(e.stream)}>{quote_name(e.name)}"


def _not_atom(f: ast.Formula) -> str:
    """The inside of ``NOT(...)``: an event type with FILTERs, printed without grouping."""
    if isinstance(f, ast.EventType):
        return _event(f)
    if isinstance(f, ast.Filter):
        return f"{_not_atom(f.formula)} FILTER {_predicate(f.predicate)}"
    raise ValueError(f"NOT applies to an event type with optional filters, not {f!r}")


def _formula(f: ast.Formula) -> str:
    if isinstance(f, ast.EventType):
        return _event(f)
    if isinstance(f, ast.As):
        return f"({_formula(f.formula)} AS {quote_name(f.var)})"
    if isinstance(f, ast.Seq):
        if f.absent is not None:
            return f"({_formula(f.left)} ; !{_formula(f.absent)} ; {_formula(f.right)})"
        return f"({_formula(f.left)} {':' if f.contiguous else ';'} {_formula(f.right)})"
    if isinstance(f, ast.FOr):
        return f"({_formula(f.left)} OR {_formula(f.right)})"
    if isinstance(f, ast.Plus):
        return f"({_formula(f.body)}{':+' if f.contiguous else '+'})"
    if isinstance(f, ast.Filter):
        return f"({_formula(f.formula)} FILTER {_predicate(f.predicate)})"
    if isinstance(f, ast.FNot):
        return f"NOT({_not_atom(f.atom)})"
    raise TypeError(f"not a formula: {f!r}")


# ------------------------------------------------------------------------------ query


def _window(w: ast.Window) -> str:
    if isinstance(w, ast.EventsWindow):
        return f"{_number(w.count)} EVENTS"
    if isinstance(w, ast.AttributeWindow):
        return f"{_number(w.amount)} [{quote_name(w.attr)}]"
    if isinstance(w, ast.DurationWindow):
        return " ".join(f"{_number(amount)} {unit}{'' if amount == 1 else 's'}"
                        for amount, unit in w.parts)
    raise TypeError(f"not a window: {w!r}")


def _select_item(item: ast.SelectItem) -> str:
    if item.attrs is None:
        return _variable(item.var)
    return f"{_variable(item.var)}[{', '.join(quote_name(a) for a in item.attrs)}]"


def _query(q: ast.Query) -> str:
    strategy = "" if q.strategy == "ALL" else f"{q.strategy} "
    if q.select is None:
        items = "*"
    elif not q.select:
        items = "NONE"
    else:
        items = ", ".join(_select_item(i) for i in q.select)
    lines = [f"SELECT {strategy}{items}"]
    if q.streams is not None:
        lines.append("FROM " + ", ".join(quote_name(s) for s in q.streams))
    absent = "" if q.trailing is None else f" ; !{_formula(q.trailing)}"
    lines.append(f"WHERE {_formula(q.formula)}{absent}")
    if q.partition_by:
        lines.append(f"PARTITION BY {groups_text(q.partition_by, quote_name)}")
    if q.within is not None:
        lines.append(f"WITHIN {_window(q.within)}")
    if q.consume != "NONE":
        lines.append(f"CONSUME BY {q.consume}")
    if q.limit is not None:
        lines.append(f"LIMIT {_number(q.limit)}")
    return "\n".join(lines)


def to_text(node: ast.Node) -> str:
    """Canonical CEQL text of a query, formula, predicate, expression, select item or window."""
    if isinstance(node, ast.Query):
        return _query(qualify_streams(node))  # as parse reads it, so printing is canonical
    if isinstance(node, ast.SelectItem):
        return _select_item(node)
    if isinstance(node, (ast.EventsWindow, ast.DurationWindow, ast.AttributeWindow)):
        return _window(node)
    if isinstance(node, (ast.EventType, ast.As, ast.Seq, ast.FOr, ast.Plus, ast.Filter, ast.FNot)):
        return _formula(node)
    if isinstance(node, (ast.Literal, ast.AttrRef, ast.BinOp, ast.Neg)):
        return _expr(node, None)
    return _predicate(node)


def shown(node: ast.Node) -> str:
    """``to_text`` without its outer parentheses: a predicate or formula as quoted in
    messages and ``cer explain`` (``x.id = y.id``, ``T AS x ; H AS y``)."""
    text = to_text(node)
    return text[1:-1] if text.startswith("(") and _closes_at_end(text) else text


def _closes_at_end(text: str) -> bool:
    """Whether the parenthesis opening ``text`` closes at its last character (quoted names
    and strings skipped)."""
    depth, quote = 0, None
    for i, ch in enumerate(text):
        if quote is not None:
            quote = None if ch == quote else quote  # a doubled quote reopens at once
        elif ch in "'`":
            quote = ch
        elif ch in "()":
            depth += 1 if ch == "(" else -1
            if depth == 0:
                return i == len(text) - 1
    return False


def window_span(w: ast.Window) -> str:
    """How far the window reaches, in the user's unit (``10 events``, ``2 hours of event
    time``, ``3 of attribute seq``): what executors and the Spark fan-out say."""
    if isinstance(w, ast.EventsWindow):
        return f"{w.count} events"
    if isinstance(w, ast.DurationWindow):
        return f"{_window(w)} of event time"
    return f"{w.amount} of attribute {w.attr}"


def groups_text(groups, name=str) -> str:
    """PARTITION BY groups as written, ``[a, b], [c]`` (``name`` prints each attribute)."""
    return ", ".join("[" + ", ".join(name(a) for a in g) + "]" for g in groups)
