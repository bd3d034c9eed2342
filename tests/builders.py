"""One place to build ASTs and event frames in tests: short constructors for formulas and
predicates (``T()``, ``cmp("x", "tmp", ">", 40)``, ``seq``, ``conj``) and the event
frame the engines consume (``events_frame``), from dicts, letters (``letters("AAB")``) or
``ev("H:id=1 T:id=1")``."""

from __future__ import annotations

import polars as pl

from cer_cli import events as cer_events
from cer_cli.query import ast

# --------------------------------------------------------------------------- formulas


def E(name: str, stream: str | None = None) -> ast.EventType:
    """An event-type atom, stream-qualified when ``stream`` is given."""
    return ast.EventType(name, stream)


def T() -> ast.EventType:
    """Temperature events of the running example of Foundations of CEP (Figure 1)."""
    return ast.EventType("T")


def H() -> ast.EventType:
    """Humidity events of the same example."""
    return ast.EventType("H")


def seq(*fs: ast.Formula, contiguous: bool = False) -> ast.Formula:
    """``fs[0] ; fs[1] ; …`` (``:`` when ``contiguous``), left-nested as the parser builds it."""
    out = fs[0]
    for f in fs[1:]:
        out = ast.Seq(out, f, contiguous)
    return out


# --------------------------------------------------------------------------- predicates


def ref(var: str, attr: str) -> ast.AttrRef:
    return ast.AttrRef(var, attr)


def cmp(var: str, attr: str, op: str, value) -> ast.Compare:
    """``var.attr op value``; ``value`` is a constant or an expression (e.g. ``ref(...)``)."""
    right = value if isinstance(value, (ast.AttrRef, ast.BinOp, ast.Neg, ast.Literal)) \
        else ast.Literal(value)
    return ast.Compare(op, ast.AttrRef(var, attr), right)


def conj(*ps: ast.Predicate) -> ast.Predicate:
    """``ps[0] AND ps[1] AND …``, left-nested as the parser builds it."""
    out = ps[0]
    for p in ps[1:]:
        out = ast.And(out, p)
    return out


# --------------------------------------------------------------------------- events


def letters(text: str | list[str], stream: str = "S") -> list[dict]:
    """Attribute-less events from type letters (``"AAB"``) or type names, for hand tests."""
    types = text.split() if " " in text else list(text)
    return [{"type": t, "stream": stream} for t in types]


def ev(spec: str) -> list[dict]:
    """``"H:id=1 T:id=1"`` -> events of stream ``S`` with integer attributes."""
    out = []
    for item in spec.split():
        typ, _, attrs = item.partition(":")
        e = {"type": typ, "stream": "S"}
        for kv in filter(None, attrs.split(",")):
            k, v = kv.split("=")
            e[k] = int(v)
        out.append(e)
    return out


def _polars_column(name: str, values: list) -> pl.Series:
    present = [v for v in values if v is not None]
    if all(isinstance(v, bool) for v in present) and present:
        dtype = pl.Boolean
    elif all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        dtype = pl.Int64
    elif all(isinstance(v, (int, float)) for v in present):
        dtype = pl.Float64
    else:
        dtype = pl.Utf8
    return pl.Series(name, values, dtype=dtype)


def events_frame(events: list[dict]) -> pl.DataFrame:
    """The event frame the engine consumes (cer_cli/events.py): reserved columns plus one
    column per attribute (null where an event lacks it). TIME is the "time" value, or the
    position when the events carry none; ROW counts rows per stream (one file per stream)."""
    rows_seen: dict[str, int] = {}
    row = []
    for t in events:
        s = t.get("stream", "S")
        row.append(rows_seen.get(s, 0))
        rows_seen[s] = row[-1] + 1
    attrs = sorted({k for t in events for k in t} - {"type", "stream", "time"})
    columns = [
        pl.Series(cer_events.TYPE, [t["type"] for t in events], dtype=pl.Utf8),
        pl.Series(cer_events.STREAM, [t.get("stream", "S") for t in events], dtype=pl.Utf8),
        pl.Series(cer_events.TIME, [t.get("time", i) for i, t in enumerate(events)], dtype=pl.Int64),
        pl.Series(cer_events.ROW, row, dtype=pl.Int64),
        pl.Series(cer_events.POS, list(range(len(events))), dtype=pl.Int64),
    ]
    columns += [_polars_column(a, [t.get(a) for t in events]) for a in attrs]
    return pl.DataFrame(columns)


# --------------------------------------------------------------------------- the command line


def run(*args: str, stdin: str | None = None, columns: int = 250):
    """``cer ARGS`` in-process through click's runner (the one helper every CLI test uses):
    plain text whatever the terminal (``NO_COLOR``; rich honours ``FORCE_COLOR``, so it is
    unset) and a console wide enough that rich's tables do not wrap (``columns``)."""
    from click.testing import CliRunner

    from cer_cli.cli import cli

    return CliRunner().invoke(cli, list(args), input=stdin,
                              env={"NO_COLOR": "1", "FORCE_COLOR": None, "COLUMNS": str(columns)})


def with_traceback(output: str) -> str:
    """``output`` of a failed ``cer`` child process, followed by the traceback it saved on an
    internal error (``diagnostics.save_traceback``), so that an assertion message shows a
    failure ``--debug`` may not repeat (a race between threads)."""
    import re
    from pathlib import Path

    found = re.search(r"the traceback is in (\S+?): ", output)
    if found is None:
        return output
    try:
        return output + "\n" + Path(found.group(1)).read_text()
    except OSError:
        return output
