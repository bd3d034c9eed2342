"""How values become text: JSON (JSONL records and the ``partition`` column) and CSV cells,
computed per value (``json_value``, ``match_record``) or column-wise in polars
(``json_texts``, ``jsonl_lines``), the two giving the same text; and standard streams that
cannot encode a character.
"""

from __future__ import annotations

import codecs
import datetime as dt
import json
import math
import secrets
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, TextIO

import polars as pl

from cer_cli.events import ROW, STREAM, TYPE, Match, MatchBatch
from cer_cli.io.contract import LogError
from cer_cli.io.lookup import EventLookup, gather, times_at
from cer_cli.io.texts import exact_text, inexact_in_python, iso_text

#: Marks a decimal's exact digits in ``json.dumps``'s text (``json_value``), which then
#: become a bare number (``json_dumps``); random, so that no text of the data can hold it.
_EXACT = "\ue000" + secrets.token_hex(8)


def json_value(v: Any) -> Any:
    """``v`` as ``json.dumps`` can write it, by the ``io.output`` text rules: datetimes as
    ``isoformat``, durations as seconds, NaN and infinities as null, decimals as their exact
    digits (marked; ``json_dumps`` writes them as numbers)."""
    if isinstance(v, dt.datetime | dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, Decimal):
        return f"{_EXACT}{v:f}{_EXACT}" if v.is_finite() else None
    if isinstance(v, list | tuple):
        return [json_value(x) for x in v]
    if isinstance(v, dict):
        return {k: json_value(x) for k, x in v.items()}
    return v


def json_dumps(value: Any) -> str:
    """The JSON text of ``json_value(value)``: ``json.dumps`` with decimals as bare numbers
    of their exact digits (``1.50``; a float would round a long one)."""
    text = json.dumps(json_value(value), ensure_ascii=False, default=str)
    if _EXACT in text:
        text = text.replace('"' + _EXACT, "").replace(_EXACT + '"', "")
    return text


def json_loads(text: str) -> Any:
    """``json.loads`` for writing the value again with ``json_dumps``: each number with a
    fraction keeps its text (as ``json_value`` marks a decimal), so nothing is rounded."""
    return json.loads(text, parse_float=lambda t: _EXACT + t + _EXACT)


def plain_text(v: Any) -> str | None:
    """A value as the table shows it: ``json_value``'s, a string without quotes, a decimal
    its exact digits, a list or struct as its JSON text (as JSONL writes it, not Python's
    ``{'p': 1}``); ``None`` for null."""
    v = json_value(v)
    if isinstance(v, dict | list):
        return json_dumps(v)
    return None if v is None else str(v).replace(_EXACT, "")


def table_cell(v: Any) -> str:
    """A value in a cell of the terminal table: ``plain_text``, ``∅`` for null."""
    text = plain_text(v)
    return "∅" if text is None else text


def partition_object(match: Match, names: Sequence[str]) -> dict[str, Any] | None:
    if match.partition is None:
        return None
    keys = list(names) if len(names) == len(match.partition) else []
    keys = keys or [f"key{i}" for i in range(len(match.partition))]
    return {k: json_value(v) for k, v in zip(keys, match.partition, strict=True)}


def partition_json(key: tuple | None, names: Sequence[str]) -> str | None:
    """The ``partition`` column of CSV/Parquet output: the JSON text of the JSONL record's
    ``partition`` object (None without PARTITION BY). Spark's writer uses it too."""
    value = None if key is None else partition_object(Match(0, 0, (), key), names)
    return None if value is None else json_dumps(value)


def match_record(
    n: int, match: Match, lookup: EventLookup, partition_names: Sequence[str] = ()
) -> dict[str, Any]:
    """The JSON object of the ``n``-th match (0-based, output order); ``json_dumps`` writes
    it. Its times are those outputs show (``EventLookup.time_of``)."""
    events = []
    for position, variables in match.events:
        ev = lookup.get(position)
        events.append(
            {
                "position": position,
                "stream": ev.stream,
                "row": ev.row,
                "type": ev.type,
                "vars": list(variables),
                "attrs": {k: json_value(v) for k, v in ev.attrs.items()},
            }
        )
    return {
        "match": n,
        "start": match.start,
        "end": match.end,
        "start_time": json_value(lookup.time_of(match.start)),
        "end_time": json_value(lookup.time_of(match.end)),
        "partition": partition_object(match, partition_names),
        "events": events,
    }


#: dtypes whose JSON text polars writes exactly as ``json.dumps`` does.
_POLARS_JSON = (pl.String, pl.Categorical, pl.Enum)


def json_texts(s: pl.Series) -> pl.Series:
    """The ``json_dumps(v)`` text of every value of ``s``, computed in polars for the common
    dtypes and per value only for the others."""
    dtype = s.dtype
    if dtype.is_integer() or isinstance(dtype, pl.Decimal):  # a decimal's text: plain digits
        return s.cast(pl.String).fill_null("null")
    if dtype == pl.Boolean:
        return pl.select(
            pl.when(s).then(pl.lit("true")).when(s.not_()).then(pl.lit("false"))
            .otherwise(pl.lit("null"))
        ).to_series()
    if isinstance(dtype, _POLARS_JSON) or dtype in _POLARS_JSON:
        enc = pl.DataFrame({"v": s.cast(pl.String)}).select(
            pl.struct("v").struct.json_encode().str.slice(5).str.head(-1)
        ).to_series()
        return enc
    if isinstance(dtype, pl.Duration | pl.List | pl.Array) and inexact_in_python(dtype):
        # nanosecond durations (seconds, exactly), lists of them or of such datetimes
        return json_texts(pl.select(exact_text(_lit(s), dtype)).to_series())
    if _iso_in_polars(s):
        return pl.select(
            (pl.lit('"') + iso_text(_lit(s), dtype) + pl.lit('"')).fill_null(pl.lit("null"))
        ).to_series()
    if dtype.is_float():
        # polars writes a float64 as Python's repr does, except in exponent notation
        # (|x| < 1e-4 or >= 1e16): those few values take repr. float32 is widened first,
        # as Python sees it.
        x = s.cast(pl.Float64)
        text = x.cast(pl.String)
        finite = x.is_finite()
        plain = (x == 0) | ((x.abs() >= 1e-4) & (x.abs() < 1e16))
        odd = (finite & ~plain).fill_null(False)
        if odd.any():
            idx = odd.arg_true()
            text = text.scatter(idx, [repr(v) for v in x.gather(idx).to_list()])
        return pl.select(
            pl.when(_lit(finite)).then(_lit(text)).otherwise(pl.lit("null"))
        ).to_series()
    return pl.Series([json_dumps(v) for v in s.to_list()], dtype=pl.String)


def _lit(s: pl.Series) -> pl.Expr:
    """A series as an expression (``pl.lit`` keeps its values and length)."""
    return pl.lit(s)


def _iso_in_polars(s: pl.Series) -> bool:
    """Whether ``texts.iso_text`` gives the text of Python's ``isoformat`` for every value:
    dates and datetimes with four-digit years (other years take the per-value path; no
    nanosecond datetime has them)."""
    dtype = s.dtype
    if dtype != pl.Date and not isinstance(dtype, pl.Datetime):
        return False
    years = s.dt.year().drop_nulls()
    return not years.len() or (years.min() >= 1000 and years.max() <= 9999)  # type: ignore[operator]


def jsonl_lines(
    batch: MatchBatch, lookup: EventLookup, first: int, partition_names: Sequence[str]
) -> str:
    """The JSONL text of ``batch`` (matches numbered from ``first``), byte for byte what
    ``match_record`` + ``json_dumps`` give, but built column-wise: one string column per
    event, joined per match, so the cost per event is polars', not a Python dict's."""
    import numpy as np

    pos = np.asarray(batch.pos, dtype=np.int64)
    counts = np.diff(np.asarray(batch.off, dtype=np.int64))
    cols = [STREAM, ROW, TYPE, *lookup.columns]
    events = gather(lookup, pos, cols)
    lit = pl.lit
    ev_parts: list[pl.Expr | pl.Series] = [
        lit('{"position": '), pl.Series(pos).cast(pl.String),
        lit(', "stream": '), json_texts(events[STREAM]),
        lit(', "row": '), json_texts(events[ROW]),
        lit(', "type": '), json_texts(events[TYPE]),
        lit(', "vars": '),
    ]
    vars_text = pl.Series([json.dumps(list(v), ensure_ascii=False) for v in batch.labelsets],
                          dtype=pl.String)
    lab = np.asarray(batch.lab, dtype=np.int64)
    ev_parts.append(vars_text[lab] if len(lab) else pl.Series([], dtype=pl.String))
    ev_parts.append(lit(', "attrs": {'))
    have = set(events.columns)  # once: ``events.columns`` is O(columns)
    for i, c in enumerate(lookup.columns):
        key = json.dumps(c, ensure_ascii=False)
        ev_parts.append(lit(("" if i == 0 else ", ") + key + ": "))
        if c in have:
            ev_parts.append(json_texts(events[c]))
        else:
            ev_parts.append(lit("null"))
    ev_parts.append(lit("}}"))
    match_ids = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    ev_text = pl.DataFrame({"m": match_ids}).with_columns(
        pl.concat_str(ev_parts).alias("ev")
    )
    if (counts == 1).all():  # the common case needs no grouping
        per_match = ev_text["ev"]
    else:
        joined = ev_text.group_by("m", maintain_order=True).agg(pl.col("ev").str.join(", "))
        # a match without events (SELECT NONE, NOT(E)) has no group: its list stays empty
        per_match = pl.repeat("", len(counts), dtype=pl.String, eager=True).scatter(
            joined["m"], joined["ev"])
    start = np.asarray(batch.start, dtype=np.int64)
    end = np.asarray(batch.end, dtype=np.int64)
    times = json_texts(times_at(lookup, np.concatenate([start, end])))
    start_time, end_time = times[: len(start)], times[len(start):]
    part_text: dict[int, str] = {}
    for k in np.unique(np.asarray(batch.part, dtype=np.int64)).tolist():
        key = batch.partitions.get(k)
        value = None if key is None else partition_object(Match(0, 0, (), key), partition_names)
        part_text[k] = json_dumps(value)
    parts = pl.Series(np.asarray(batch.part, dtype=np.int64)).replace_strict(
        part_text, return_dtype=pl.String
    )
    lines = pl.select(
        pl.concat_str(
            lit('{"match": '), pl.Series(np.arange(first, first + len(start), dtype=np.int64)).cast(pl.String),
            lit(', "start": '), pl.Series(start).cast(pl.String),
            lit(', "end": '), pl.Series(end).cast(pl.String),
            lit(', "start_time": '), start_time,
            lit(', "end_time": '), end_time,
            lit(', "partition": '), parts,
            lit(', "events": ['), per_match, lit("]}\n"),
        )
    ).to_series()
    return lines.str.join("").item()


def _csv_cells(s: pl.Series, unquote: bool = False) -> pl.Series:
    """The JSONL text of each value as a CSV cell (``unquote``: a JSON string's content);
    a null stays an empty cell."""
    text = json_texts(s)
    cell = _lit(text).str.slice(1).str.head(-1) if unquote else _lit(text)
    return pl.select(pl.when(_lit(text) == "null").then(None).otherwise(cell)
                     ).to_series().alias(s.name)


def csv_ready(frame: pl.DataFrame) -> pl.DataFrame:
    """The cells CSV writes as JSONL does (``io.output``'s text rules): dates and datetimes
    (``isoformat``, zone kept), durations (seconds), the wide shape's lists (JSON arrays)."""
    out = []
    for name, dtype in frame.schema.items():
        if dtype in (pl.Date,) or isinstance(dtype, pl.Datetime):
            out.append(_csv_cells(frame[name], unquote=True))
        elif isinstance(dtype, pl.Duration) or (
                isinstance(dtype, pl.List) and not isinstance(dtype.inner, pl.List | pl.Struct)):
            out.append(_csv_cells(frame[name]))
    return frame.with_columns(out) if out else frame


#: What Parquet holds a 128-bit integer as: no Parquet (nor Arrow) integer type has 128
#: bits, a decimal of 38 digits is the standard type that holds the most of them.
PARQUET_INT128 = pl.Decimal(38, 0)


def _parquet_dtype(dtype: pl.DataType) -> pl.DataType:
    """``dtype`` with each 128-bit integer type in it (a list's items, a struct's fields
    too) as ``PARQUET_INT128``."""
    if dtype in (pl.Int128, pl.UInt128):
        return PARQUET_INT128
    if isinstance(dtype, pl.List):
        return pl.List(_parquet_dtype(dtype.inner))
    if isinstance(dtype, pl.Array):
        return pl.Array(_parquet_dtype(dtype.inner), dtype.shape)
    if isinstance(dtype, pl.Struct):
        return pl.Struct({f.name: _parquet_dtype(f.dtype) for f in dtype.fields})
    return dtype


def parquet_ready(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` as Parquet can hold it: 128-bit integers (an NDJSON log's integers beyond
    int64, or a column of Int64 in one log and UInt64 in another, whose common type is
    Int128) as decimals of 38 digits, every digit kept. Neither Arrow nor Parquet has a
    128-bit integer: the Parquet writer failed on such a column (``ArrowInvalid: ...
    '_pli128'``, an internal error). An integer of 39 digits, which no Parquet number holds
    exactly, is refused naming its column."""
    cast = {name: to for name, dtype in frame.schema.items()
            if (to := _parquet_dtype(dtype)) != dtype}
    out = []
    for name, to in cast.items():
        try:
            out.append(frame[name].cast(to))
        except pl.exceptions.InvalidOperationError:
            raise LogError(f"column {name!r} holds an integer of more than 38 digits, which"
                           " Parquet cannot hold",
                           ["use --format jsonl or --format csv (both write its digits)"],
                           ) from None
    return frame.with_columns(out) if out else frame


def refuse_for_csv(schema: pl.Schema) -> None:
    """CSV has no lists, structs, bytes or Python objects (``io.output.CSV_REFUSED``; polars
    fails mid-write): name the column instead."""
    for name, dtype in schema.items():
        what = ("lists" if isinstance(dtype, pl.List | pl.Array) else
                "structs" if isinstance(dtype, pl.Struct) else
                "binary values" if dtype == pl.Binary else
                "Python objects" if dtype == pl.Object else None)
        if what is not None:
            raise LogError(
                f"column {name!r} holds {what}, which the CSV output cannot hold",
                ["use --format jsonl or --format parquet (both keep nested values)"],
            )


def _json_escape(exc: UnicodeError) -> tuple[str, int]:
    """Codec error handler: a character the stream cannot encode as its JSON ``\\uXXXX``
    escape (a surrogate pair beyond the BMP), the same string to any JSON reader."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = []
    for ch in exc.object[exc.start:exc.end]:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            out.append(f"\\u{0xD800 | (cp >> 10):04x}\\u{0xDC00 | (cp & 0x3FF):04x}")
        else:
            out.append(f"\\u{cp:04x}")
    return "".join(out), exc.end


codecs.register_error("cer-json-escape", _json_escape)


def encodable(out: TextIO, fmt: str) -> TextIO:
    """``out``, set not to fail on characters its encoding lacks (``PYTHONIOENCODING=ascii``,
    a C locale): JSONL escapes them as ``\\uXXXX`` (still the same JSON), CSV and the table
    as ``\\xe9``-style backslash escapes (readable, and better than an internal error)."""
    encoding = getattr(out, "encoding", None)
    if not encoding or not hasattr(out, "reconfigure"):
        return out
    try:
        if codecs.lookup(encoding).name in ("utf-8", "utf-16", "utf-32", "gb18030"):
            return out
        out.reconfigure(errors="cer-json-escape" if fmt == "jsonl" else "backslashreplace")
    except (LookupError, ValueError, OSError, AttributeError):
        pass
    return out


