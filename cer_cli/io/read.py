"""Read event logs (CSV, Parquet, NDJSON/JSON) into schemas and time-ordered event frames.

A LOG argument is ``path`` or ``NAME=path``; the stream name defaults to the file stem.
``read_schema`` looks at column types plus one grouped pass over the type column (the
attributes an event type has are the columns non-null for at least one of its events), so
it never materialises the log. ``read_events`` builds the *event frame* (see
``cer_cli.events``): the same pass validates the time column (O(n) time, O(1) memory) and tells
whether the logs are already ordered; ordered logs are then streamed in batches of about
``batch_size`` rows and merged (memory O(batch_size x logs)), unordered ones are loaded
and stably sorted (memory O(n)). Logs estimated to take at most ``READ_ONCE_BYTES`` in memory
(Parquet by its row count, not its compressed size) are parsed once into memory and every
pass runs on that frame. Every input mistake raises ``LogError``.
"""

from __future__ import annotations

import csv
import heapq
import json
import os
import re
import stat
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from pathlib import Path

import polars as pl

from cer_cli.events import POS, ROW, STREAM, TIME, TYPE, Schema
from cer_cli.io import contract
from cer_cli.io.contract import LogError
from cer_cli.signals import keep_ignored

# Importing polars installed its SIGINT handler over one the parent ignored (a background
# job): ignore it again before any query, or a SIGINT cancels a pass over the log silently.
keep_ignored()

__all__ = ["EventLog", "LogError", "LogSpec", "csv_quoted_line_breaks", "inferred_kinds",
           "late_value_refusal", "parse_log_spec", "read_events", "read_frame", "read_frames",
           "read_schema"]

_ARG = contract.ARG  # ties in time: argument order, then row
#: polars dtype of TIME per ``contract.time_storage``.
_TIME_DTYPES = {"int64": pl.Int64, "float64": pl.Float64}


@dataclass(frozen=True)
class LogSpec:
    """One LOG argument resolved: stream name, path, format (one of ``FORMATS``)."""

    name: str
    path: Path
    format: str
    #: An in-memory log (``read_frame``): read instead of ``path``.
    frame: pl.LazyFrame | None = field(default=None, compare=False, repr=False)


def parse_log_spec(spec: str, fmt: str | None = None) -> LogSpec:
    """Resolve ``path`` or ``NAME=path`` (``contract.split_log_arg``); ``fmt`` overrides the
    format given by the extension. The file must exist and be readable."""
    name, text = contract.split_log_arg(spec)
    path = Path(text)
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise LogError(f"log file not found: {path}", [f"current directory: {Path.cwd()}"]) from None
    except OSError as e:  # e.g. a directory on the way that the user may not enter
        raise LogError(f"cannot read {path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise LogError(f"not a file: {path}")
    try:
        with path.open("rb"):
            pass
    except OSError as e:
        raise LogError(f"cannot read {path}: {e.strerror}") from None
    fmt = contract.log_format(str(path), fmt)
    return LogSpec(contract.stream_name(name, str(path)), path, fmt)


def inferred_kinds(path: str, fmt: str) -> dict[str, str | None]:
    """The kinds this reader gives the columns of the CSV or NDJSON/JSON file at ``path``
    (format ``fmt``), by name: polars' inference from the first 10,000 rows or lines (for a
    CSV as ``_scan_csv`` adjusts it). Spark infers from every row: ``--spark`` compares
    (``spark.read``), so that a column of numbers with a text at row 20,000, text there and
    refused here, is refused by both."""
    spec = LogSpec("", Path(path), fmt)
    return {c: contract.kind_of(d) for c, d in _scan(spec).collect_schema().items()}


def late_value_refusal(path: str, fmt: str) -> LogError | None:
    """This reader's refusal of the file at ``path`` (format ``fmt``) for a value that does
    not fit its column's type inferred from the first 10,000 rows (``inferred_kinds``),
    naming its row; None when every value fits. One pass parsing every column: ``--spark``
    runs it only when the kinds it inferred from the whole file differ."""
    spec = LogSpec("", Path(path), fmt)
    try:
        _scan(spec).select(pl.all().null_count()).collect()
    except pl.exceptions.PolarsError as e:
        return _read_error(spec, e)
    return None


def csv_quoted_line_breaks(path: str) -> bool:
    """Whether a quoted field of the CSV file at ``path`` holds a line break: polars, which
    reads quotes, counts fewer records than the file has lines. Spark reads such a record
    whole only with ``multiLine`` (one task per file), and without it made two records of
    it: ``--spark`` asks (``spark.read``)."""
    p = Path(path)
    records = (pl.scan_csv(p, infer_schema=False, **_csv_options(p)).select(pl.len())
               .collect().item())
    lines, last = 0, b"\n"
    with p.open("rb") as f:
        while chunk := f.read(1 << 20):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    if last != b"\n":
        lines += 1  # the last line has no line break
    return records < lines - 1  # less the header


# --------------------------------------------------------------------------- scanning


def _scan(spec: LogSpec, text_columns: tuple[str, ...] = ()) -> pl.LazyFrame:
    """A lazy frame over the file, with dates in CSV parsed when every value parses (except
    ``text_columns``, read as text: a time column is parsed by the contract's rules, not by
    polars' guess, which reads ``01/02/2024`` as 1 February). Blank lines at the end of a
    CSV file are no rows (polars reads each as a row of nulls)."""
    try:
        if spec.frame is not None:
            lf = spec.frame
        elif spec.format == "csv":
            lf = _scan_csv(spec.path, text_columns)
            blank = _trailing_blank_lines(spec.path)
            if blank:
                n = (pl.scan_csv(spec.path, infer_schema=False, **_csv_options(spec.path))
                     .select(pl.len()).collect().item())
                lf = lf.head(max(0, n - blank))
        elif spec.format == "parquet":
            lf = pl.scan_parquet(spec.path, glob=False)
        elif spec.format == "ndjson":
            _no_pattern(spec)
            lf = pl.scan_ndjson(spec.path, infer_schema_length=10_000)
        else:
            text = spec.path.read_text(encoding="utf-8").lstrip()
            if text.startswith("["):
                lf = pl.read_json(spec.path, infer_schema_length=10_000).lazy()
            else:
                _no_pattern(spec)
                lf = pl.scan_ndjson(spec.path, infer_schema_length=10_000)
        columns = lf.collect_schema().names()
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError, ValueError) as e:
        _refuse_non_utf8(spec, e)
        if spec.format in ("ndjson", "json") and _JSON_SYNTAX.search(str(e)):
            raise _ndjson_bad_line(spec, e) from None
        raise LogError(f"cannot read {spec.path} as {spec.format}: {_first_line(e)}") from None
    if "" in columns:  # a Parquet or JSON column without a name (a CSV's: ``_scan_csv``)
        lf = lf.rename(dict(zip(columns, contract.column_names(columns), strict=True)))
    contract.check_columns(str(spec.path), lf.collect_schema())
    return lf


def _no_pattern(spec: LogSpec) -> None:
    """Refuse an NDJSON log whose path holds ``*``, ``?`` or ``[``: polars reads such a path
    as a pattern (it has no option not to, as it has for CSV and Parquet) and finds no file
    (or other files)."""
    if any(c in str(spec.path) for c in "*?["):
        raise LogError(f"cannot read {spec.path}: polars reads an NDJSON path holding *, ? or"
                       " [ as a pattern", ["rename the file, or give it a .json name if it holds"
                                           " one JSON array"])


def _scan_csv(path: Path, text_columns: tuple[str, ...] = ()) -> pl.LazyFrame:
    """``pl.scan_csv(path, try_parse_dates=True, infer_schema_length=10_000)`` (with
    ``text_columns`` read as text), made cheaper where it cannot find a date, and with the
    kinds both runners infer alike: a column whose first texts are not numbers, booleans
    or ISO dates as both read them is text (``contract.csv_text_columns``).

    polars' date inference tries its patterns on every text value of the first 10,000 rows
    (~45 ms), and a scan under it reads the file 3-4x slower than a scan given the same
    schema (1M rows: 0.16 s against 0.04 s, polars 2.1), on every pass over a large log.
    Every date pattern polars infers starts with a digit, and one value that is not a date
    leaves the column text: so when each text column has a value starting with something
    else among the first rows (``contract.csv_head_rows``), no column can be a date, the
    schema inferred without dates is the one inferred with them, and the scan is given it.
    The field separator and the names of unnamed columns are the contract's
    (``contract.csv_header``)."""
    overrides = dict.fromkeys(text_columns, pl.String)
    sample = _csv_sample(path)
    opts = _csv_options(path, sample)
    plain = pl.scan_csv(path, infer_schema_length=10_000, schema_overrides=overrides, **opts)
    schema = dict(plain.collect_schema())
    names = list(schema)
    rows = contract.csv_head_rows(sample, opts["separator"], len(sample) < contract.CSV_HEAD_BYTES)
    for i in contract.csv_text_columns([_kind(schema[c]) for c in names], rows):
        if names[i] not in overrides:
            schema[names[i]] = overrides[names[i]] = pl.String
    texts = [i for i, c in enumerate(names) if schema[c] == pl.String and c not in overrides]
    if texts and not all(any(v is not None and not _DIGIT.match(v.strip())
                             for v in contract.csv_cells(rows, i)) for i in texts):
        lf = pl.scan_csv(path, try_parse_dates=True, infer_schema_length=10_000,
                         schema_overrides=overrides, **opts)
        dates = [_kind(d) == "datetime" and c not in overrides
                 for c, d in lf.collect_schema().items()]
        guessed = contract.csv_text_columns(["datetime" if d else None for d in dates], rows)
        if len(guessed) < sum(dates):
            return lf if not guessed else pl.scan_csv(
                path, try_parse_dates=True, infer_schema_length=10_000,
                schema_overrides={**overrides, **{names[i]: pl.String for i in guessed}}, **opts)
    return pl.scan_csv(path, schema=schema, **opts)


_DIGIT = re.compile(r"[0-9]")


def _kind(dtype: pl.DataType) -> str | None:
    """The contract's kind of a dtype polars inferred from a CSV, a clock alone (``Time``)
    counting as a datetime: ``csv_text_columns`` judges it by its texts."""
    return "datetime" if dtype.is_temporal() else contract.kind_of(dtype)


def _csv_sample(path: Path) -> bytes:
    """The CSV's first ``contract.CSV_HEAD_BYTES``: what ``contract.csv_header`` decides
    the separator from, and the rows ``contract.csv_head_rows`` reads."""
    with path.open("rb") as f:
        return f.read(contract.CSV_HEAD_BYTES)


def _csv_options(path: Path, sample: bytes | None = None) -> dict:
    """How polars reads the CSV at ``path`` (first bytes ``sample``), for every scan of it:
    the contract's separator and names of unnamed columns (``contract.csv_header``, which
    refuses a head it cannot read alike everywhere; polars' own names were "" and
    ``_duplicated_0``), the path as a file, not a pattern (``l[1].csv``), and an empty
    field a missing value, quoted (``""``) or not, as Spark reads it (polars read ``""`` as
    an empty text, and a column of numbers holding one as text)."""
    sep, names = contract.csv_header(str(path), _csv_sample(path) if sample is None else sample)
    opts: dict = {"separator": sep, "glob": False, "null_values": [""]}
    if names is not None and any(n == contract.UNNAMED.format(i) for i, n in enumerate(names)):
        opts["new_columns"] = names
    return opts


def _trailing_blank_lines(path: Path) -> int:
    """How many empty lines end a text file (``a\\n\\n`` ends with one)."""
    with path.open("rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - 4096))
        tail = f.read()
    lines = tail.replace(b"\r\n", b"\n").split(b"\n")
    if len(lines) < 3 or lines[-1] != b"":
        return 0
    n = 0
    for line in reversed(lines[1:-1]):
        if line.strip():
            break
        n += 1
    return min(n, len(lines) - 3) if n else 0


def _refuse_non_utf8(spec: LogSpec, e: BaseException) -> None:
    """When polars failed on a text log that is not UTF-8 ("invalid utf-8 sequence", no row
    named), raise ``contract.check_utf8``'s error for the first such byte of the file, found
    by one pass over it in blocks (only on this error)."""
    if spec.frame is not None or spec.format == "parquet" or "utf-8" not in str(e).lower():
        return
    line, carry = 1, b""
    try:
        with spec.path.open("rb") as f:
            while block := f.read(_UTF8_BLOCK):
                data = carry + block
                cut = data.rfind(b"\n") + 1  # whole lines only: no sequence cut in two
                if not cut and len(data) > 64 * _UTF8_BLOCK:
                    return  # a line of 64 MiB: the generic message
                contract.check_utf8(str(spec.path), data[:cut], line)
                line += data.count(b"\n", 0, cut)
                carry = data[cut:]
            contract.check_utf8(str(spec.path), carry, line, complete=True)
    except OSError:
        return


#: Bytes per read of ``_refuse_non_utf8``'s pass.
_UTF8_BLOCK = 1 << 20


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


_BAD_VALUE = re.compile(r"could not parse `(.*)` as dtype `([^`]+)` at column '(.*)' \(column number")
_KIND_WORDS = {"int": "an integer", "float": "a number", "bool": "a boolean"}


def _read_error(spec: LogSpec, e: BaseException) -> LogError:
    """The ``LogError`` for a polars failure while reading ``spec``.

    polars infers a CSV column's type from its first 10,000 rows and fails mid-stream on a
    later value that does not fit (``could not parse `abc` as dtype `i64```): that value's
    row is found (one more pass, reading the column as text) and named."""
    _refuse_non_utf8(spec, e)
    if spec.format == "csv" and _MORE_FIELDS in str(e):
        return _csv_long_record(spec, e)
    if spec.format == "csv" and (_MALFORMED in str(e) or '"' in _unparsed(e)):
        if (quoted := _csv_bad_quote(spec)) is not None:
            return quoted
    if spec.format == "ndjson" and (m := _BAD_JSON_VALUE.search(str(e))):
        return _ndjson_bad_value(spec, m.group(1), m.group(2), m.group(3), e)
    if spec.format in ("ndjson", "json") and _JSON_SYNTAX.search(str(e)):
        return _ndjson_bad_line(spec, e)
    m = _BAD_VALUE.search(str(e))
    if m is None or spec.format != "csv":
        return LogError(f"cannot read {spec.path}: {_first_line(e)}")
    value, column = m.group(1), m.group(3)
    where = f"{spec.path}"
    try:
        opts = _csv_options(spec.path)
        lf = pl.scan_csv(spec.path, try_parse_dates=True, infer_schema_length=10_000, **opts)
        dtype = lf.collect_schema()[column]
        raw = pl.scan_csv(
            spec.path, try_parse_dates=True, infer_schema_length=10_000,
            schema_overrides={column: pl.String}, **opts,
        )
        bad = (
            raw.with_row_index("__row")
            .filter(pl.col(column).is_not_null()
                    & pl.col(column).str.strip_chars().cast(dtype, strict=False).is_null())
            .select("__row", column)
            .first()
            .collect()
        )
        if bad.height:
            where = _where(spec, bad["__row"][0])
            value = bad[column][0]
        word = _KIND_WORDS.get(contract.kind_of(dtype), f"a {dtype}")
    except (pl.exceptions.PolarsError, KeyError, OSError):
        word = f"a {m.group(2)}"
    return LogError(
        f"{where}, column {column!r}: {value!r} is not {word} (the column's type, inferred"
        " from its first 10,000 rows)",
        ["fix the value; or, if the column is text, put a text value among its first 10,000"
         " rows (or convert the log to Parquet with explicit types)"],
    )


#: polars' failure on a CSV record with more fields than the header; it names no record
_MORE_FIELDS = "found more fields than defined in 'Schema'"
#: polars' failure on a CSV whose quotes it cannot pair (``ab"cd``); it names a chunk
_MALFORMED = "CSV malformed"
_UNPARSED = re.compile(r"could not parse `(.*?)` as dtype", re.S)


def _unparsed(e: BaseException) -> str:
    """The value polars could not read (``"q" tail`` as a text; a quote never closed, the
    rest of the file), or ""."""
    m = _UNPARSED.search(str(e))
    return "" if m is None else m.group(1)


def _csv_bad_quote(spec: LogSpec) -> LogError | None:
    """The ``LogError`` naming the first CSV record quoted as RFC 4180 does not allow
    (``contract.csv_bad_quote``), or None. polars said ``CSV malformed: expected 0 rows,
    actual 2 rows, in chunk starting at row_offset 0``, or that ``"q" tail`` is ``not a
    str``."""
    try:
        sep = _csv_options(spec.path)["separator"]
        found = contract.csv_bad_quote(spec.path, sep)
        if found is None:
            return None
        row, line, field, what, text = found
        names = list(_scan_csv(spec.path).collect_schema())
    except (OSError, LogError, pl.exceptions.PolarsError):
        return None
    column = f", column {names[field]!r}" if field < len(names) else ""
    return LogError(
        f"{spec.path}: line {line} (data row {row}, 0-based){column}: {what}: {text!r}",
        ["quote the whole field and double each quote in it (ab\"cd is written \"ab\"\"cd\"),"
         " as RFC 4180 writes a CSV"])


def _csv_long_record(spec: LogSpec, e: BaseException) -> LogError:
    """The ``LogError`` naming the first CSV record with more fields than the header (polars
    names none): one pass of Python's CSV reader with the log's separator. A blank line is
    a data row, as polars reads it (a row of nulls), so the row is the one every other
    message names for that record."""
    try:
        sep = _csv_options(spec.path)["separator"]
        with spec.path.open(newline="", encoding="utf-8", errors="replace") as f:
            reader = csv.reader(f, delimiter=sep)
            width, row = len(next(reader, [])), 0
            while True:
                line = reader.line_num + 1  # where the record starts (quoted breaks counted)
                record = next(reader, None)
                if record is None:
                    break
                if len(record) > width:
                    return LogError(
                        f"{spec.path}: line {line} (data row {row}, 0-based): {len(record)}"
                        f" fields, but the header names {width} columns",
                        ["remove the extra fields, or name their columns in the header"])
                row += 1
    except (OSError, csv.Error, LogError):
        pass
    return LogError(f"cannot read {spec.path}: {_first_line(e)}")


#: polars' NDJSON failure on a line it cannot parse (simd-json's, by its byte in the line)
_JSON_SYNTAX = re.compile(r"\bat character \d+ \(")


def _ndjson_bad_line(spec: LogSpec, e: BaseException) -> LogError:
    """The ``LogError`` naming the first NDJSON line no runner reads alike
    (``contract.json_bad_line_in``; polars names only a byte in some line)."""
    found = contract.json_bad_line_in(spec.path)
    if found is None:
        return LogError(f"cannot read {spec.path}: {_first_line(e)}")
    return LogError(f"{_where(spec, found[0])}: {found[1]}", [contract.JSON_LINE_HINT])


#: polars' NDJSON failure on a value that does not fit the column's inferred type; it names
#: no column and no line (``_ndjson_bad_value`` finds them).
_BAD_JSON_VALUE = re.compile(r"cannot parse '(.*)' \((\w+)\) as (\w+)")
_JSON_KINDS = {"string": str, "f64": float, "i64": int, "bool": bool}


def _ndjson_bad_value(spec: LogSpec, value: str, found: str, dtype: str,
                      e: BaseException) -> LogError:
    """The ``LogError`` naming the line and column of an NDJSON value that does not fit its
    column's type (inferred from the first 10,000 lines), as for a CSV: the first line
    holding ``value`` (a JSON ``found``, polars' name) under a key whose column is of
    ``dtype``. One pass, each line parsed only when its text holds the value."""
    try:
        columns = {c: d for c, d in _scan(spec).collect_schema().items() if str(d) == dtype}
        kind = _JSON_KINDS.get(found)
        needle = (json.dumps(value) if kind is str else value).encode()
        with spec.path.open("rb") as f:
            for row, line in enumerate(f):
                if needle not in line:
                    continue
                record = json.loads(line)
                for column, v in record.items() if isinstance(record, dict) else ():
                    if (column in columns and (kind is None or type(v) is kind)
                            and value in (str(v), json.dumps(v))):
                        word = _KIND_WORDS.get(contract.kind_of(columns[column]), f"a {dtype}")
                        return LogError(
                            f"{_where(spec, row)}, column {column!r}: {v!r} is not {word} (the"
                            " column's type, inferred from its first 10,000 lines)",
                            ["fix the value; or put a value of the column's real type among its"
                             " first 10,000 lines (or convert the log to Parquet with explicit"
                             " types)"])
    except (OSError, ValueError, pl.exceptions.PolarsError, LogError):
        pass
    return LogError(f"cannot read {spec.path}: {_first_line(e)}")


@dataclass(frozen=True)
class _Log:
    """A scanned log and the contract's decision on it (``contract.LogDecision``), which
    the polars reader interprets: its frame has the kinds the decision says."""

    spec: LogSpec
    lf: pl.LazyFrame
    decision: contract.LogDecision

    @property
    def columns(self) -> dict[str, pl.DataType]:
        return dict(self.lf.collect_schema())


def _seen(index: int, spec: LogSpec, lf: pl.LazyFrame) -> contract.LogDecision:
    """What the polars reader sees of a log, for ``contract.decide``: its columns' kinds and
    dtypes, and, when the kinds may be a guess from no value (``contract.untyped``), whether
    it has a row."""
    dtypes = lf.collect_schema()
    kinds = {c: contract.kind_of(d) for c, d in dtypes.items()}
    seen = contract.LogDecision(str(spec.path), spec.name, kinds,
                                types={c: str(d) for c, d in dtypes.items()},
                                format=spec.format, index=index)
    if contract.untyped(spec.format, kinds):
        try:
            seen = replace(seen, empty=lf.head(1).collect().height == 0)
        except pl.exceptions.PolarsError as e:
            raise _read_error(spec, e) from None
    return seen


def _interpret(spec: LogSpec, lf: pl.LazyFrame, d: contract.LogDecision) -> _Log:
    """The log read as decided: an empty log's columns with the Null dtype (kind ``null``),
    a time column of texts that polars typed as dates read again as text."""
    dtypes = lf.collect_schema()
    if d.empty:
        lf = pl.LazyFrame(schema=dict.fromkeys(dtypes, pl.Null))
    elif d.time_kind == "str" and dtypes[d.time_column] != pl.String:
        lf = _scan(spec, (d.time_column,))
    return _Log(spec, lf, d)


def _open(specs: list[str], type_column, times, log_format=None) -> list[_Log]:
    """Scan the logs and have the contract decide how each is read (``contract.decide``);
    ``times``: ``--time-column`` & co. (``contract.time_options``)."""
    if not specs:
        raise LogError("no event log given")
    resolved = [s if isinstance(s, LogSpec) else parse_log_spec(s, log_format) for s in specs]
    scans = [_scan(s) for s in resolved]
    seen = [_seen(i, s, lf) for i, (s, lf) in enumerate(zip(resolved, scans, strict=True))]
    decided = contract.decide(seen, type_column, times)
    return [_interpret(s, lf, d) for s, lf, d in zip(resolved, scans, decided, strict=True)]


def _time_expr(d: contract.LogDecision, dtype: pl.DataType) -> pl.Expr:
    """TIME as the log's decision ``d`` says (``dtype``: its time column's) (``contract.time_kind``): numbers as they are, or with
    a unit as int64 ns since the epoch (values beyond int64 ns become null); datetimes (and
    texts parsed as ``_parse_datetime``) as int64 ns since the epoch.

    Unreadable values (and NaN) become null; callers compare with the raw nulls to find them.
    """
    col = pl.col(d.time_column)
    kind = d.time_kind
    if kind == "datetime":
        if dtype == pl.Date:  # through microseconds: a date beyond nanoseconds' range is null
            col = col.cast(pl.Datetime("us"))
        return col.dt.epoch(contract.TIME_UNIT).cast(pl.Int64)
    if kind in ("int", "float"):
        # an integer beyond int64 (an Int128 or UInt64 column: a CSV's 2^63) is no time,
        # refused naming its row; a strict cast failed naming none
        x = col.cast(pl.Int64 if kind == "int" else pl.Float64, strict=False)
        ok = x.is_not_null() if kind == "int" else x.is_finite()
        if d.time_unit is None:
            return pl.when(ok).then(x)
        ok = ok & (x.abs() <= contract.unit_bound(d.time_unit))
        if kind == "int":
            return pl.when(ok).then(x * contract.TIME_UNITS[d.time_unit])
        return pl.when(ok).then(_exact_ns(col, dtype, d.time_unit))
    if kind == "str":
        return _parse_datetime(col, d.time_format).dt.epoch(contract.TIME_UNIT).cast(pl.Int64)
    return pl.lit(None, dtype=pl.Int64)


def _exact_ns(col: pl.Expr, dtype: pl.DataType, unit: str) -> pl.Expr:
    """Nanoseconds since the epoch of a float or decimal time in ``unit``, exactly: a
    decimal by its digits, a float as the shortest decimal that writes it (``repr``: the
    text a CSV held), rounded half away from zero. A float product (``x * 1e9``) is a
    float too, 256 ns apart at 1.7e18: ``1700000001.13`` s became ...1.129999872 (a
    decimal went through that float as well), so times 1.13 s apart were more than
    ``WITHIN 1130 milliseconds`` apart. From 2^53 on a float is a whole number, taken as it
    is: its shortest text has invented digits there (1.7000000001234568e+18 for
    1700000000123456768), and Java's, which Spark's reader has (``spark.read._time_expr``),
    is not the shortest (below 1e16 both are). Out of range (refused by the caller): null."""
    factor, digits = contract.TIME_UNITS[unit], contract.unit_digits(unit)
    text = col if dtype.is_decimal() else col.cast(pl.String)  # polars: the shortest text
    # the time in 1e-9 ns (an Int128), so that rounding it to ns rounds once
    fine = text.cast(pl.Decimal(38, digits + 9), strict=False).to_physical()
    ns = ((fine.abs() + 500_000_000) // 1_000_000_000 * fine.sign()).cast(pl.Int64)
    if dtype.is_decimal():
        return ns
    whole = col.cast(pl.Int64, strict=False) * factor
    return pl.when(col.abs() >= contract.FLOAT_WHOLE).then(whole).otherwise(ns)


def _parse_datetime(col: pl.Expr, fmt: str | None = None, zoned: bool = False) -> pl.Expr:
    """Time texts as naive UTC datetimes, or ``zoned`` as UTC ones (``contract.zoned_times``):
    with ``fmt`` (``--time-format``, strftime) by it, else only ``contract.ISO_TIME`` values
    (anything else, e.g. ``01/02/2024``, is null and then refused). An offset or Z is
    honoured, a value without one is taken as UTC."""
    if zoned:
        return _parse_datetime(col, fmt).dt.replace_time_zone("UTC")
    unit = contract.TIME_UNIT
    if fmt is not None:
        def by_format(u: str) -> pl.Expr:
            parsed = col.str.strptime(pl.Datetime(u), fmt, strict=False)
            if contract.zoned_format(fmt):
                parsed = parsed.dt.convert_time_zone("UTC").dt.replace_time_zone(None)
            return parsed
        # polars wraps a time beyond nanoseconds' range (3000-01-01 became 1830-11-23):
        # such a value must stay unreadable, so it is read in microseconds too (one more
        # parse, on this slower path only)
        fits = by_format("us").cast(pl.Datetime(unit), strict=False).is_not_null()
        return pl.when(fits).then(by_format(unit))
    text = col.str.strip_chars().str.replace(" ", "T", literal=True)
    # polars wraps a time beyond nanoseconds' range (3000-01-01 became 1830-11-23,
    # silently): an ISO text is compared as text with the range, a day inside it so that no
    # offset (+14:00 at most) can carry a value out (``contract.ISO_RANGE``)
    inside = (text >= contract.ISO_RANGE[0]) & (text < contract.ISO_RANGE[1])
    return pl.when(col.str.strip_chars().str.contains(contract.ISO_TIME) & inside).then(
        text.map_batches(_iso_texts, return_dtype=pl.Datetime(unit), is_elementwise=True))


def _iso_pattern(pattern: str) -> Callable[[pl.Series], pl.Series]:
    """A reader of the ISO texts written in one of ``contract.ISO_FORMATS`` or
    ``ISO_ZONED_FORMATS`` (``T`` between date and clock): naive UTC datetimes, null where
    the text is in another shape."""
    unit = contract.TIME_UNIT
    if pattern in contract.ISO_ZONED_FORMATS:
        return lambda s: s.str.strptime(pl.Datetime(unit, "UTC"), pattern,
                                        strict=False).dt.replace_time_zone(None)
    return lambda s: s.str.strptime(pl.Datetime(unit), pattern, strict=False)


_ISO_READERS = tuple(_iso_pattern(f) for f in contract.ISO_FORMATS + contract.ISO_ZONED_FORMATS)


def _iso_texts(text: pl.Series) -> pl.Series:
    """ISO time texts (``T`` between date and clock) as naive UTC datetimes, null where
    no shape reads them. Each pattern is a pass over the whole chunk (all five cost 2M
    events ~1.4 s) and the shapes exclude each other, while a log nearly always writes one
    shape: the chunk is read by its first value's shape, and only the values that shape
    left unread (usually none) are tried with every shape."""
    first = text.drop_nulls().head(1)
    read = next((r for r in _ISO_READERS if r(first).null_count() == 0), None)
    if read is None or not len(first):
        return _every_shape(text)
    out = read(text)
    left = out.is_null() & text.is_not_null()
    if not left.any():
        return out
    return out.scatter(left.arg_true(), _every_shape(text.filter(left)))


def _every_shape(text: pl.Series) -> pl.Series:
    out = _ISO_READERS[0](text)
    for read in _ISO_READERS[1:]:
        out = out.fill_null(read(text))
    return out


def _where(spec: LogSpec, row: int) -> str:
    """Human location of 0-based data row ``row`` (``contract.row_place``)."""
    return contract.row_place(spec.path, spec.format, row)


# --------------------------------------------------------------------------- schema


def read_schema(
    specs: list[str],
    type_column: str | None = None,
    times: str | contract.TimeOptions | None = None,
    log_format: str | None = None,
) -> Schema:
    """The schema of the logs, from column types and one grouped pass (nothing materialised).

    ``type_column=None`` uses a column named ``type`` when the log has one, and otherwise
    the stream name as the event type; an explicit name must exist in every log. An event
    type's attributes are its log's columns (``contract.build_schema``); the grouped pass
    finds those null for every event of a type (``Schema.empty``). Columns predicates
    cannot use (lists, structs, ...) are ``Schema.refused``. ``times``: the logs' time
    columns, units and formats (``--time-column`` & co.), a column name or
    ``contract.TimeOptions`` (``contract.time_options``); ``None`` detects each log's.
    """
    return _schema(_open(specs, type_column, times, log_format))


def _schema(logs: list[_Log]) -> Schema:
    return _schema_and_times(logs)[0]


def _schema_and_times(logs: list[_Log], columns: Collection[str] | None = None,
                      check: bool = False) -> tuple[Schema, list[_Log], Callable[[], list]]:
    """The schema, and the logs with the contract's verdict on what the same pass learnt of
    their time values (``contract.judge_times``). ``columns``: the attributes a query reads
    (``plan.read_attributes``), the only ones whose values are looked at, as Spark's schema
    pass does (``spark.read.logs_schema``): the others count as holding values, which only a
    query reading them could tell, and the pass neither converts nor groups them.

    With ``check``, the same pass over each log is its time check too (``_Pass``), and the
    third result gives each log's ``(rows, ordered)``, or raises the first log's time error:
    the caller asks for it after the schema's own verdicts, so those still come first."""
    _unified_dtypes(logs)  # columns polars cannot concatenate are an error here already
    decisions = [g.decision for g in logs]
    tc = next(iter(contract.time_columns_of(decisions)), None)
    kinds = contract.column_kinds(decisions, tc)
    present_per_log, times, passes = [], [], []
    for g in logs:
        usable = contract.attribute_columns(g.decision, kinds)
        looked = [c for c in usable if columns is None or c in columns]
        one = _Pass(g, looked, check)
        rows = one.run()
        passes.append(one)
        times.append(contract.time_values(g.decision, [{k: r.pop(k, None) for k in _FACTS}
                                                        for r in rows]))
        assumed = {c: True for c in usable if c not in looked}
        present_per_log.append({r.pop(TYPE): {**assumed, **r} for r in rows})
    decisions, fits = contract.judge_times(decisions, times)
    schema = contract.build_schema(decisions, present_per_log, kinds, tc, fits)
    logs = [replace(g, decision=d) for g, d in zip(logs, decisions, strict=True)]
    return schema, logs, lambda: [one.verdict() for one in passes]


_LOW, _HIGH, _ZONED = contract.TIME_LOW, contract.TIME_HIGH, contract.TIME_ZONED
_FACTS = (_LOW, _HIGH, _ZONED)


def _time_facts(g: _Log) -> list[pl.Expr]:
    """Aggregations for ``contract.TimeValues``: the least and greatest finite value of a
    numeric time column, whether a time column of ISO texts holds one with an offset."""
    d = g.decision
    tc, kind = d.time_column, d.time_kind
    if kind in ("int", "float"):
        x = pl.col(tc) if kind == "int" else pl.col(tc).cast(pl.Float64)
        if kind == "float":
            x = x.filter(x.is_finite())
        return [x.min().alias(_LOW), x.max().alias(_HIGH)]
    if kind == "str" and d.time_format is None:
        zoned = pl.col(tc).str.strip_chars().str.contains(contract.ISO_ZONED_TIME).any()
        return [zoned.alias(_ZONED)]
    return []


# --------------------------------------------------------------------------- events


@dataclass(frozen=True)
class EventLog:
    """The logs as one time-ordered stream of event frames.

    ``batches()`` yields event frames with identical columns whose POS continues from one
    to the next; it yields a single frame unless the logs were opened with a ``batch_size``
    and were already ordered. ``columns`` are the log's own columns (union over the logs,
    first-seen order) without the type column; every frame also has the RESERVED columns.
    """

    schema: Schema
    columns: tuple[str, ...]
    n_events: int
    sorted_input: bool
    _logs: tuple[_Log, ...] = field(repr=False)
    _dtypes: dict[str, pl.DataType] = field(repr=False)
    _batch_size: int | None = field(repr=False)

    def batches(self) -> Iterator[pl.DataFrame]:
        if self._batch_size is None or not self.sorted_input:
            yield self._all()
            return
        per_log = [_iter_log(g, self._batch_size, self._dtypes) for g in self._logs]
        frames = chain(*per_log) if self.schema.time_column is None else _merge(per_log)
        pos = 0
        for frame in frames:
            yield frame.with_columns(
                pl.int_range(pos, pos + frame.height, dtype=pl.Int64).alias(POS)
            ).drop(_ARG)
            pos += frame.height

    def reading(self, columns: Iterable[str]) -> EventLog:
        """This log with only ``columns`` of its own read (and each log's type and time
        columns): a run that outputs no event needs no other (``Plan.columns_read``), and
        Parquet then skips the rest while CSV does not convert it."""
        logs = [_projected(g, set(columns)) for g in self._logs]
        kept = {c for g in logs for c in g.columns}
        reserved = {TYPE, STREAM, TIME, ROW, _ARG}
        return replace(self, columns=tuple(c for c in self.columns if c in kept),
                       _logs=tuple(logs),
                       _dtypes={c: t for c, t in self._dtypes.items() if c in kept or c in reserved})

    @property
    def time_columns(self) -> tuple[str, ...]:
        """The logs' time columns, each once, in argument order (``OutputSpec.time_columns``)."""
        return contract.time_columns_of([g.decision for g in self._logs])

    def time_texts(self) -> list[str]:
        """Per log, its time column and how it is read (unit, format), for ``cer explain``."""
        return [t for g in self._logs if (t := g.decision.time_text()) is not None]

    def frame(self) -> pl.DataFrame:
        """The whole event frame in memory."""
        frames = list(self.batches())
        return frames[0] if len(frames) == 1 else pl.concat(frames)

    def _all(self) -> pl.DataFrame:
        frames = []
        for g in self._logs:
            try:
                frames.append(_event_frame(g.lf.collect(), g, 0, self._dtypes))
            except pl.exceptions.PolarsError as e:
                raise _read_error(g.spec, e) from None
        frame = pl.concat(frames)
        if self.schema.time_column is not None and (len(frames) > 1 or not self.sorted_input):
            frame = frame.sort([TIME, _ARG, ROW], maintain_order=True)
        return frame.with_columns(pl.int_range(0, frame.height, dtype=pl.Int64).alias(POS)).drop(
            _ARG
        )


def _projected(g: _Log, keep: Collection[str]) -> _Log:
    """``g`` reading only ``keep`` of its columns, besides its type and time columns. A log
    with neither, whose columns the query reads none of, keeps its first column: a polars
    frame of no columns has no rows, so ``--count`` of such a log counted 0 events."""
    d = g.decision
    own = [c for c in g.columns if c in keep or c in (d.type_column, d.time_column)]
    own = own or list(g.columns)[:1]
    return g if len(own) == len(g.columns) else replace(g, lf=g.lf.select(own))


def read_events(
    specs: list[str],
    type_column: str | None = None,
    times: str | contract.TimeOptions | None = None,
    batch_size: int | None = None,
    log_format: str | None = None,
    columns: Collection[str] | None = None,
) -> EventLog:
    """Open the logs as one stream ordered by time (ties: argument order, then row).

    First validates every time value (in the schema's pass over each log): a missing or unparsable
    time raises ``LogError`` naming the file and the row. With ``batch_size`` and ordered
    input, ``batches()`` streams; otherwise it yields one stably sorted frame. ``times``:
    the logs' time columns, units and formats, as for ``read_schema``. ``columns``: for a
    run that reads no other attribute (``--count``), the attributes the query reads: the
    only ones read (``EventLog.reading``) and looked at by the schema pass
    (``_schema_and_times``).
    """
    if batch_size is not None and batch_size < 1:
        raise LogError(f"batch size must be positive, got {batch_size}")
    logs = _open(specs, type_column, times, log_format)
    if columns is not None:
        logs = [_projected(g, columns) for g in logs]
    if batch_size is not None and _loaded_bytes(logs) <= READ_ONCE_BYTES:
        _unified_dtypes(logs)  # incompatible columns are reported before any value
        logs = [_materialised(g) for g in logs]
    schema, logs, checked = _schema_and_times(logs, columns, check=True)
    contract.event_time_kind([g.decision for g in logs])  # comparable times, or refused
    total, ordered = 0, True
    for n, in_order in checked():
        total += n
        ordered = ordered and in_order
    dtypes = _unified_dtypes(logs)
    columns = tuple(dict.fromkeys(c for g in logs for c in g.columns if c != g.decision.type_column))
    return EventLog(schema, columns, total, ordered, tuple(logs), dtypes, batch_size)


#: Logs whose frame in memory is estimated at most this many bytes (``_loaded_bytes``) are
#: read into memory once, and the schema pass, the time check and the batches work on that
#: frame: three reads of the file (each parsing every row) become one. Larger logs are
#: scanned per pass and streamed, so memory stays O(batch_size x logs) however large the log.
READ_ONCE_BYTES = 64 * 2**20
#: Estimated bytes of one Parquet cell in memory: a number is 8, a string's view 16.
_CELL_BYTES = 16


def _loaded_bytes(logs: list[_Log]) -> float:
    """About how large the logs are once in memory. A text log: its file size (a parsed
    cell is a small multiple of its text). A Parquet log: rows (the file's metadata) x
    columns x ``_CELL_BYTES``, never its file size: a highly compressible Parquet of 100M
    rows takes 217 KB on disk and 1.9 GB in memory. In-memory logs (``read_frame``) count
    as unbounded: they are never copied."""
    total = 0.0
    for g in logs:
        if g.spec.frame is not None:
            return float("inf")
        try:
            if g.spec.format == "parquet":
                rows = g.lf.select(pl.len()).collect().item()  # the footer's row counts
                total += rows * len(g.columns) * _CELL_BYTES
            else:
                total += g.spec.path.stat().st_size
        except (OSError, pl.exceptions.PolarsError):
            return float("inf")
    return total


def _materialised(g: _Log) -> _Log:
    """``g`` with its scan replaced by the collected frame (same columns, rows, errors)."""
    try:
        df = g.lf.collect()
    except pl.exceptions.PolarsError as e:
        raise _read_error(g.spec, e) from None
    return replace(g, lf=df.lazy())


#: Bytes ``estimate_events`` samples at the start of a text log to learn its row length.
_SAMPLE_BYTES = 1 << 16


def estimate_events(specs: list[str]) -> int:
    """About how many events the logs hold, without reading them: Parquet's row counts
    (file metadata), else file size over the mean line length of the first 64 KiB. For
    deciding early whether a run will be long (the CLI starts loading the compiled kernel
    while it reads a large log); 0 for anything it cannot tell, never an error."""
    total = 0
    for spec in specs:
        try:
            path = Path(contract.split_log_arg(spec)[1])
            fmt = contract.log_format(str(path))
            if fmt == "parquet":
                total += pl.scan_parquet(path, glob=False).select(pl.len()).collect().item()
                continue
            with path.open("rb") as f:
                sample = f.read(_SAMPLE_BYTES)
                size = os.fstat(f.fileno()).st_size
            lines = sample.count(b"\n")
            total += size * lines // len(sample) if lines else 0
        except Exception:  # noqa: BLE001 - an estimate; read_events reports the errors
            continue
    return total


def read_frame(
    frame: pl.DataFrame | pl.LazyFrame,
    name: str = "events",
    type_column: str | None = None,
    times: str | contract.TimeOptions | None = None,
) -> EventLog:
    """An in-memory polars frame as one log named ``name``, read by the same contract as a
    file (type and time columns, time parsing, ordering), so that a frame gives the events
    ``read_events`` gives for the file it was read from (``times``: as for ``read_events``)."""
    return read_frames({name: frame}, type_column, times)


def read_frames(
    frames: dict[str, pl.DataFrame | pl.LazyFrame],
    type_column: str | Sequence[str] | None = None,
    times: str | contract.TimeOptions | None = None,
) -> EventLog:
    """In-memory polars frames as logs named by their keys, merged as ``read_events``
    merges files given in that order (``NAME=path`` each); a log is named ``<NAME>`` in
    messages (``times``: as for ``read_events``)."""
    specs = [LogSpec(name, Path(f"<{name}>"), "frame", frame.lazy())
             for name, frame in frames.items()]
    return read_events(specs, type_column, times)  # type: ignore[arg-type]


def _unified_dtypes(logs: list[_Log]) -> dict[str, pl.DataType]:
    """Column -> dtype common to all logs (supertypes; parsed time), reserved columns last."""
    empties = []
    for g in logs:
        schema = dict(g.columns)
        if g.decision.reads_time_as_datetime:
            zone = "UTC" if g.decision.time_zoned else None
            schema[g.decision.time_column] = pl.Datetime(contract.TIME_UNIT, zone)
        empties.append(pl.DataFrame(schema=schema))
    try:
        merged = pl.concat(empties, how="diagonal_relaxed").schema
    except pl.exceptions.PolarsError as e:
        raise LogError(f"the logs have incompatible columns: {_first_line(e)}") from None
    time_kinds = {g.decision.time_kind for g in logs
                  if g.decision.time_column and g.decision.time_unit is None}
    time_dtype = _TIME_DTYPES[contract.time_storage("float" if "float" in time_kinds else "int")]
    return {
        **merged,
        TYPE: pl.String,
        STREAM: pl.String,
        TIME: time_dtype,
        ROW: pl.Int64,
        _ARG: pl.Int64,
    }


_ROWS = "__cer_rows"  # the grouped query's row count per event type
_HAS = "__cer_has_"  # + a column: whether the row holds a value in it

#: Rows per chunk of a log's pass (``_Pass``): the type and time columns of 256K rows, a
#: flag per looked-at column (~10 MB with a text time). polars reads a few chunks ahead:
#: at 2^17 / 2^18 / 2^19 rows the 10M-event Parquet query peaked 30 / 45 / 65 MB above
#: the grouped query's.
_PASS_ROWS = 1 << 18


class _Pass:
    """One streaming pass over a log: per event type, which looked-at columns hold a value
    and the time facts (``_time_facts``), and the number of rows. With ``check`` and a time
    column, it is the time check too: chunk by chunk (``_PASS_ROWS``), the facts folded
    over the chunks (``_fold``), it finds whether time never decreases and the first row
    whose time is missing or cannot be read; that failure waits in ``verdict``. Otherwise
    it is one grouped query, which polars streams faster than chunks.

    One pass rather than a grouped query beside a time-column scan: each parsed the log
    (a CSV of 10M rows with a time column: 0.48 s and 0.94 s of CPU for both, 0.33 s and
    0.60 s for the one), and polars streams neither a grouping after a ``shift`` nor a
    whole-column ``diff`` (memory grew with the log)."""

    def __init__(self, g: _Log, looked: list[str], check: bool) -> None:
        self.g, self.looked, self.check = g, looked, check
        self.n, self.unsorted, self.bad, self.last = 0, False, None, None
        self.error: LogError | None = None

    def run(self) -> list[dict]:
        """The pass; returns one row per event type (``TYPE``, the looked-at columns'
        presence, the time facts)."""
        g, d = self.g, self.g.decision
        tc = d.time_column
        aggs = [*([pl.col(self.looked).is_not_null().any()] if self.looked else []),
                *_time_facts(g)]
        typed = d.type_column is not None
        timed = self.check and tc is not None and d.time_kind != "null"
        by = pl.col(d.type_column).cast(pl.String).alias(TYPE) if typed else None
        folded: dict = {}
        try:
            if not timed:  # one grouped query, which polars streams best, counting the rows
                q = (g.lf.group_by(by).agg(*aggs, pl.len().alias(_ROWS)) if typed
                     else g.lf.select(*aggs, pl.len().alias(_ROWS)))
                for r in q.collect().iter_rows(named=True):
                    self.n += r.pop(_ROWS)
                    folded[r.pop(TYPE, None)] = r
            else:
                # a chunk holds the type, the time and whether each looked-at column holds
                # a value, never the values: its memory does not grow with long texts
                has = [pl.col(c).is_not_null().alias(_HAS + c) for c in self.looked]
                raw = [*dict.fromkeys(c for c in (d.type_column, tc) if c)]
                folds = [*(pl.col(_HAS + c).any().alias(c) for c in self.looked),
                         *_time_facts(g)]
                t = _time_expr(d, g.columns[tc])
                for chunk in g.lf.select(*raw, *has).collect_batches(chunk_size=_PASS_ROWS,
                                                                     lazy=True):
                    self._times(chunk, t)
                    self.n += chunk.height
                    rows = (chunk.group_by(by).agg(*folds).iter_rows(named=True) if typed
                            else [chunk.select(*folds).row(0, named=True)] if folds else [{}])
                    for r in rows:
                        _fold(folded, r.pop(TYPE, None), r)
        except pl.exceptions.PolarsError as e:
            raise _read_error(g.spec, e) from None
        if not typed:  # one event type, also in an empty log
            if None not in folded:
                folded[None] = g.lf.head(0).select(*aggs).collect().row(0, named=True) if aggs else {}
            return [{**folded[None], TYPE: g.spec.name}]
        return [{TYPE: k, **v} for k, v in folded.items()]

    def _times(self, chunk: pl.DataFrame, t: pl.Expr) -> None:
        """The time check over one chunk, carrying the last time across: until the first
        missing or unreadable time (``bad``), or a read error of the time column alone."""
        if self.bad is not None or self.error is not None:
            return
        try:
            times = chunk.select(t.alias(TIME))[TIME]
        except pl.exceptions.PolarsError as e:
            self.error = _read_error(self.g.spec, e)
            return
        if times.null_count():
            self.bad = self.n + int(times.is_null().arg_true()[0])
            return
        if times.len() and not self.unsorted:
            self.unsorted = bool((self.last is not None and times[0] < self.last)
                                 or (times < times.shift(1)).any())  # diff() wraps
            self.last = times[-1]

    def verdict(self) -> tuple[int, bool]:
        """``(rows, ordered)``; raises ``LogError`` at the first row whose time is missing
        or unparsable."""
        if self.error is not None:
            raise self.error
        if self.bad is not None:
            raise _bad_time(self.g, self.bad)
        return self.n, not self.unsorted


def _fold(folded: dict, key, row: dict) -> None:
    """Fold one chunk's row of event type ``key`` into ``folded``: presence is any chunk's,
    the least and greatest time the chunks' least and greatest, an offset any chunk's."""
    old = folded.get(key)
    if old is None:
        folded[key] = row
        return
    for k, v in row.items():
        if v is None:
            continue
        o = old.get(k)
        if o is None:
            old[k] = v
        elif k == _LOW:
            old[k] = min(o, v)
        elif k == _HIGH:
            old[k] = max(o, v)
        else:
            old[k] = o or v


def _bad_time(g: _Log, bad: int) -> LogError:
    """The error for data row ``bad``, whose time is missing or cannot be read: for texts
    read without a format, the row that is the odd one out (``contract.blame_time``)."""
    d = g.decision
    tc = d.time_column
    t = _time_expr(d, g.columns[tc])
    try:
        if d.time_format is None and d.time_kind == "str":  # blame the odd one out
            unread = (g.lf.with_row_index(ROW).filter(t.is_null())
                      .select(ROW, pl.col(tc)).head(10_000).collect())
            bad = contract.blame_time(unread.iter_rows()) or bad
        raw = g.lf.slice(bad, 1).select(pl.col(tc).cast(pl.String)).collect().item()
    except pl.exceptions.PolarsError as e:
        return _read_error(g.spec, e)
    return contract.bad_time(_where(g.spec, bad), tc, raw, d.time_format, d.time_unit)


def _event_frame(
    df: pl.DataFrame, g: _Log, row0: int, dtypes: dict[str, pl.DataType]
) -> pl.DataFrame:
    """Rows ``row0..`` of a log as an event frame (plus the argument index), columns aligned;
    the time column shown as the decision reads it (parsed texts, numbers with a unit)."""
    d = g.decision
    tc = d.time_column
    if d.time_kind == "str":  # parsed once: TIME is the shown column's instant
        df = df.with_columns(_parse_datetime(pl.col(tc), d.time_format, d.time_zoned))
        time = pl.col(tc).dt.epoch(contract.TIME_UNIT).cast(pl.Int64)
    else:
        time = None if tc is None else _time_expr(d, df.schema[tc])
    extra = [
        pl.int_range(row0, row0 + df.height, dtype=pl.Int64).alias(ROW),
        pl.lit(g.spec.name, dtype=pl.String).alias(STREAM),
        pl.lit(g.decision.index, dtype=pl.Int64).alias(_ARG),
        (
            pl.lit(g.spec.name, dtype=pl.String)
            if g.decision.type_column is None
            else pl.col(g.decision.type_column).cast(pl.String)
        ).alias(TYPE),
        (pl.lit(None) if time is None else time).alias(TIME),
    ]
    out = df.with_columns(extra)
    if d.reads_time_as_datetime and d.time_kind != "str":  # a number with a unit: the column shows the instant too
        out = out.with_columns(pl.col(TIME).cast(pl.Datetime(contract.TIME_UNIT)).alias(tc))
    if g.decision.type_column is not None and out[TYPE].null_count():  # the count is O(1)
        missing = out.filter(pl.col(TYPE).is_null())
        if missing.height:
            raise LogError(
                f"{_where(g.spec, missing[ROW][0])}: no event type in column {g.decision.type_column!r}"
            )
    have = set(out.columns)  # once: ``out.columns`` is O(columns) per call
    _refuse_rounded_integers(out, g, dtypes)
    return out.select(
        pl.col(c).cast(d) if c in have else pl.lit(None, dtype=d).alias(c)
        for c, d in dtypes.items()
    )


def _refuse_rounded_integers(frame: pl.DataFrame, g: _Log, dtypes: dict[str, pl.DataType]
                             ) -> None:
    """Refuse an integer that its column's common type would round: a column of integers
    in this log and of floats in another is float64 in the event frame (polars' supertype),
    which holds integers exactly only up to 2^53. 2^53 + 1 became 2^53 without a word: it
    printed as ``9007199254740992.0`` in every output, and compared equal to 2^53. The
    frame's first row holding such a value is refused (``contract.rounded_integer``: its
    first such column), as Spark's reader refuses it; integers that float64 holds exactly
    (every one up to 2^53, 2^62) are read as before."""
    floats = [c for c, d in dtypes.items() if d.is_float()]
    schema = frame.schema if floats else {}  # once: ``frame.schema`` is O(columns)
    found = []  # (row index, column order, column)
    for i, c in enumerate(floats):
        src = schema.get(c)
        if src is None or not src.is_integer():
            continue
        x = pl.col(c)
        bad = frame.select(pl.arg_where(
            x.is_not_null() & (x.cast(pl.Float64).cast(src, strict=False) != x).fill_null(True)
        ).first()).item()
        if bad is not None:
            found.append((bad, i, c))
    if found:
        bad, _, c = min(found)
        raise contract.rounded_integer(_where(g.spec, frame[ROW][bad]), c, frame[c][bad])


def _iter_log(g: _Log, batch_size: int, dtypes: dict[str, pl.DataType]) -> Iterator[pl.DataFrame]:
    row0 = 0
    try:
        for chunk in g.lf.collect_batches(chunk_size=batch_size, lazy=True):
            if chunk.height:
                yield _event_frame(chunk, g, row0, dtypes)
                row0 += chunk.height
    except pl.exceptions.PolarsError as e:
        raise _read_error(g.spec, e) from None


def _merge(streams: list[Iterator[pl.DataFrame]]) -> Iterator[pl.DataFrame]:
    """Merge per-log time-ordered batch streams into ordered batches (ties: log, then row).

    One buffer per log. A row earlier than the latest buffered time of every log that still
    has input cannot be preceded by an unread row, so it is emitted; when no row qualifies,
    the log holding the smallest latest time is read further. Two heaps (latest time of each
    live log, earliest time of each buffer) make each step touch only the logs it reads or
    emits from: O(batches x log(logs)), not O(batches x logs), so a thousand small logs stay
    fast. Memory: about one batch per log (more only while a run of equal times spans
    batches).
    """
    if len(streams) == 1:
        yield from streams[0]
        return
    k = len(streams)
    buffers: list[pl.DataFrame | None] = [None] * k
    live = [True] * k
    last: list = [None] * k
    lasts: list = []  # (latest buffered time, log) of live logs; stale entries skipped
    firsts: list = []  # (earliest buffered time, log): one entry per non-empty buffer

    def pull(i: int) -> None:
        while True:
            nxt = next(streams[i], None)
            if nxt is None:
                live[i] = False
                return
            if nxt.height:
                break
        if buffers[i] is None:
            buffers[i] = nxt
            heapq.heappush(firsts, (nxt[TIME][0], i))
        else:
            buffers[i] = pl.concat([buffers[i], nxt])
        last[i] = nxt[TIME][-1]
        heapq.heappush(lasts, (last[i], i))

    order = [TIME, _ARG, ROW]
    for i in range(k):
        pull(i)
    while True:
        while lasts and (not live[lasts[0][1]] or lasts[0][0] != last[lasts[0][1]]):
            heapq.heappop(lasts)
        if not lasts:
            break
        mark, slowest = lasts[0]
        ready_logs = []
        while firsts and firsts[0][0] < mark:
            ready_logs.append(heapq.heappop(firsts)[1])
        if not ready_logs:
            pull(slowest)
            continue
        ready, refill = [], []
        for i in ready_logs:
            b = buffers[i]
            assert b is not None
            times = b[TIME]
            cut = int(times.search_sorted(mark, side="left"))
            ready.append(b[:cut])
            if cut < b.height:
                buffers[i] = b[cut:]
                heapq.heappush(firsts, (times[cut], i))
            else:
                buffers[i] = None
                if live[i]:
                    refill.append(i)
        yield pl.concat(ready).sort(order, maintain_order=True)
        for i in refill:
            pull(i)
    rest = [b for b in buffers if b is not None]
    if rest:
        yield pl.concat(rest).sort(order, maintain_order=True)
