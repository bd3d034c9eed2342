"""Reading logs on Spark: Spark loads each LOG (a file or a directory, any path or URI it
can read: CSV with a header, Parquet, NDJSON or a JSON array), says what it saw, and
interprets the log contract's decision on it (``cer_cli.io.contract.decide``; Spark types
enter it through their Arrow types, ``_kind``), as the local reader does: the schema, and
the event frame of local mode (``cer_cli.events``). ROW is the 0-based row in the log (for
a directory: across its files in path order); integers are widened to 64 bits and floats to
doubles as polars reads them. The union is numbered by POS in the local reader's order
(TIME, argument order, ROW) without any task seeing the whole log (``run.Run.rank``); a single
log whose rows are already in time order needs no sort: its POS is its ROW (``event_frame``).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Collection
from dataclasses import dataclass, replace
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING

from cer_cli.events import POS, ROW, STREAM, TIME, TYPE, Schema
from cer_cli.io import contract
from cer_cli.options import option
from cer_cli.spark.errors import SparkError, input_errors, spark_error
from cer_cli.spark.run import MID, Run

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


_ARG = contract.ARG  # ties in time: argument order, then row
_FILE = "__cer_file"
_BLOCK = "__cer_block"
#: Spark SQL type of TIME per ``contract.time_storage``.
_TIME_TYPES = {"int64": "long", "float64": "double"}


def column(name: str):
    """Column ``name`` taken literally (a dot or space in a log's column name is no path)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


@dataclass(frozen=True)
class _Source:
    name: str
    path: str
    format: str


def _source(spec: str, fmt: str | None) -> _Source:
    """``path`` or ``NAME=path`` and its format, as the contract says; a directory without
    a known extension has the format all its files share."""
    name, path = contract.split_log_arg(spec)
    members: list[str] = []
    if fmt is None and os.path.isdir(path):
        members = [p.name for p in Path(path).iterdir() if p.is_file()]
    with input_errors():
        fmt = contract.log_format(path, fmt, members)
    return _Source(contract.stream_name(name, path), path, fmt)


def _load(spark: SparkSession, src: _Source, schema=None) -> DataFrame:
    """The log as Spark reads it; a CSV with the types Spark infers, or ``schema``; a column
    without a name called as the contract calls it (``contract.column_names``)."""
    df = _read(spark, src, schema)
    if "" in df.columns:  # Spark names a CSV's itself, alike
        df = df.toDF(*contract.column_names(df.columns))
    return df


def _read(spark: SparkSession, src: _Source, schema=None) -> DataFrame:
    path = src.path  # as Spark (Hadoop) reads it: a local l[1].csv is that file, no pattern
    if contract.local_path(path) is not None:
        path = re.sub(r"([\\\[\]*?{}])", r"\\\1", path)
    r = spark.read
    if src.format == "csv":
        head = _local_head(src.path)
        sep = _csv_separator(src.path, head)
        # RFC 4180, as polars and Python's csv module read it: a quote inside a quoted
        # field is doubled (``"say ""hi"""``) and a backslash is a backslash. Spark's
        # default escape is the backslash: it kept ``"say ""hi"""`` with its quotes, read
        # two backslashes as one and cut a field where a backslash came before a doubled
        # quote, so a filter on such a text matched locally and not on Spark.
        r = r.options(header=True, sep=sep, escape='"', multiLine=_multi_line(src.path))
    try:
        if src.format == "csv" and schema is not None:
            return r.schema(schema).csv(path)
        if src.format == "csv":
            df = r.options(inferSchema=True).csv(path)
            return _as_local_reader(spark, src, _kinds_as_locally(spark, src, df, head, sep))
        if src.format == "parquet":
            return r.parquet(path)
        r = r.option("allowNonNumericNumbers", False)  # NaN and Infinity are no JSON
        df = r.json(path)
        if src.format == "json" and df.columns == ["_corrupt_record"]:
            df = r.option("multiLine", True).json(path)  # a JSON array, not NDJSON
        elif _CORRUPT in df.columns:
            raise _bad_json_line(src)
        return _as_local_reader(spark, src, df)
    except SparkError:
        raise
    except Exception as e:
        raise spark_error(e, what=f"cannot read {src.path} as {src.format}: ") from None


def _multi_line(path: str) -> bool:
    """Whether Spark must read the CSV at ``path`` with ``multiLine``: a local file some
    of whose quoted fields hold a line break (``io.read.csv_quoted_line_breaks``). Without
    it Spark made two records of one whose quoted text spans two lines (the second a row
    whose type is the text's end, with no time). With it a file is one task, so it is
    asked for only where needed; a directory or a path on another file system is read
    without it."""
    where = contract.local_path(path)
    if where is None or not os.path.isfile(where):
        return False
    return _quoted_line_breaks(where, _stamp(path))


@functools.lru_cache(maxsize=64)
def _quoted_line_breaks(where: str, stamp: tuple | None) -> bool:
    """``io.read.csv_quoted_line_breaks``, once per file version (``_stamp``): a log is
    read more than once (``_kinds_as_locally``, ``_as_local_reader``)."""
    from cer_cli.io import read as local_reader

    with input_errors():
        return local_reader.csv_quoted_line_breaks(where)


#: The column Spark adds to a JSON log with lines it cannot parse (rows of nulls else).
_CORRUPT = "_corrupt_record"


def _bad_json_line(src: _Source) -> SparkError:
    """The local reader's error for an NDJSON log with a line Spark could not parse (it
    would have made it a row of nulls): the line ``contract.json_bad_line_in`` finds in a
    local file, or no line."""
    where = contract.local_path(src.path)
    found = None if where is None else contract.json_bad_line_in(where)
    if found is None:
        return SparkError(f"{src.path}: a line is not a JSON object Spark can read",
                          [contract.JSON_LINE_HINT], input_error=True)
    return SparkError(f"{contract.row_place(src.path, src.format, found[0])}: {found[1]}",
                      [contract.JSON_LINE_HINT], input_error=True)


def _kinds_as_locally(spark: SparkSession, src: _Source, df: DataFrame, head: bytes | None,
                      sep: str) -> DataFrame:
    """A CSV as inferred, except the columns whose first texts both runners do not read
    as the kind Spark inferred (``contract.csv_text_columns``): read as text, as the local
    reader reads them. Spark read `` 5`` and ``+5`` as numbers, ``10:00:00`` as today at
    ten; polars read them as text. The texts are ``head``, the local file's first bytes
    (``_local_head``), as the local reader's; on a remote path, one small job."""
    from pyspark.sql import types as T

    fields = df.schema.fields
    kinds = [_kind(f.dataType) for f in fields]
    if not any(k in contract.CSV_CHECKED_KINDS for k in kinds):
        return df
    if head is not None:
        rows = contract.csv_head_rows(head, sep, len(head) < contract.CSV_HEAD_BYTES)
    else:
        texts = T.StructType([T.StructField(f.name, T.StringType()) for f in fields])
        rows = [list(r) for r in _read(spark, src, texts).limit(contract.CSV_PROBE_ROWS).collect()]
    text = contract.csv_text_columns(kinds, rows)
    if not text:
        return df
    return _read(spark, src, T.StructType([
        T.StructField(f.name, T.StringType()) if i in text else f
        for i, f in enumerate(fields)]))


def _as_local_reader(spark: SparkSession, src: _Source, df: DataFrame) -> DataFrame:
    """``df``, a local CSV or NDJSON file as Spark inferred it (from every row), with the
    kinds the local reader gives its columns (from their first 10,000 rows,
    ``io.read.inferred_kinds``), or refused as that reader refuses it. Where the kinds
    differ, a later value may not fit the local kind: the local reader looks for it
    (``io.read.late_value_refusal``, one pass, only then) and Spark refuses the log with
    its message. Before, Spark read such a column as text (a text at row 20,000 of numbers)
    or floats (a 2.5) and ran: ``b.v > a.v`` compared texts, exit 0, where the local run
    exited 2. Otherwise a CSV column the local reader reads as text (empty in its first
    10,000 rows, numbers later) is read as text here too (1,470 matches against 1,440)."""
    from cer_cli.io import read as local_reader

    where = contract.local_path(src.path)
    if where is None or not os.path.isfile(where) or src.format == "json":
        # a directory, or another file system: no local reader to agree with; a JSON array
        # is read whole by it, which the driver is not to do for a check
        return df
    fields = df.schema.fields
    with input_errors():
        here = local_reader.inferred_kinds(where, src.format)
        if all(_kind(f.dataType) == here.get(f.name) for f in fields):
            return df
        refusal = local_reader.late_value_refusal(where, src.format)
    if refusal is not None:
        raise SparkError(refusal.message, refusal.hints, input_error=True)
    text = {f.name for f in fields if here.get(f.name) == "str" and _kind(f.dataType) != "str"}
    if not text or src.format != "csv":
        return df
    from pyspark.sql import types as T

    return _read(spark, src, T.StructType([  # read again: the texts as written (``007``)
        T.StructField(f.name, T.StringType()) if f.name in text else f for f in fields]))


def _local_head(path: str) -> bytes | None:
    """The first ``contract.CSV_HEAD_BYTES`` of a local file, or of a local directory's
    first data file; None for a path on another file system (``hdfs://``, ``s3a://``), an
    empty directory or a file this process cannot read (Spark reports what it cannot)."""
    if (where := contract.local_path(path)) is None:
        return None
    local = Path(where)
    if local.is_dir():
        files = sorted(p for p in local.iterdir()
                       if p.is_file() and not p.name.startswith((".", "_")))
        if not files:
            return None
        local = files[0]
    try:
        with local.open("rb") as f:
            return f.read(contract.CSV_HEAD_BYTES)
    except OSError:
        return None


def _csv_separator(path: str, head: bytes | None) -> str:
    """The CSV's field separator as the local reader finds it (``contract.csv_dialect``,
    refusing what it refuses), from its first bytes ``head`` (``_local_head``); without
    them, the comma, unchecked."""
    if head is None:
        return ","
    with input_errors():
        return contract.csv_dialect(path, head)


def _kind(dtype) -> str | None:
    """The contract's kind of a Spark type, read off the Arrow type Spark gives it."""
    from pyspark.sql.pandas.types import to_arrow_type

    try:
        return contract.kind_of(to_arrow_type(dtype, timezone="UTC"))
    except Exception:  # types Arrow cannot carry (intervals, variants) are unusable
        return None


@dataclass(frozen=True)
class _Rows:
    """A log's rows as one aggregation saw them (``_row_facts``): so a run checks its rows
    and finds its time span without a pass of its own."""

    no_type: bool = False
    bad_time: bool = False
    low: int | float | None = None
    high: int | float | None = None
    #: A JSON number beyond a 64-bit float (Spark read it as Infinity; polars refuses it).
    infinite: bool = False


@dataclass
class _Log:
    """A loaded log and the contract's decision on it (``contract.LogDecision``), which the
    Spark reader interprets: its frame has the kinds the decision says. ``time_values``: what
    the schema pass (or ``_judge_times``) learnt of its time values, for ``judge_times``."""

    src: _Source
    df: DataFrame
    decision: contract.LogDecision
    time_values: contract.TimeValues | None = None
    #: What the same aggregation learnt of its rows (``_row_facts``): whether one has no
    #: event type or no readable time, and the least and greatest TIME (None: not computed).
    rows: _Rows | None = None

    @property
    def by_files(self) -> bool:
        """Whether ROW counts rows of files (a DataFrame, or an empty log read as nulls, has
        none: its ROW is its rank in partition order)."""
        return self.src.format != FRAME and not self.decision.empty


#: The format of an in-memory log (a user's DataFrame, ``frame_logs``), as in ``io.read``.
FRAME = "frame"


def open_logs(spark, specs: list[str], type_column, log_format, times=None) -> list[_Log]:
    """Load the logs and have the contract decide how each is read (``contract.decide``),
    as the local reader does.

    `cer match --spark` opens the same logs twice (``spark_schema``, then the run): the
    last opening is reused while the application and the local files' sizes and times are
    the same, because a CSV's ``inferSchema`` is a Spark job that reads the whole file."""
    if not specs:
        raise SparkError("no event log given", input_error=True)
    key = (spark.sparkContext.applicationId, tuple(specs), type_column, log_format, times,
           tuple(_stamp(contract.split_log_arg(s)[1]) for s in specs))
    if None not in key[-1] and _opened.get("key") == key:
        return _opened["logs"]
    loaded = []
    for spec in specs:
        src = _source(spec, log_format)
        loaded.append((src, _load(spark, src)))
    logs = _decide(spark, loaded, type_column, times)
    _opened.update(key=key, logs=logs)
    return logs


_opened: dict = {}


def _stamp(path: str) -> tuple | None:
    """Size and modification time of a local file or directory's files (None for a URI or
    a path this process cannot see: never reused then)."""
    if (where := contract.local_path(path)) is None:
        return None
    p = Path(where)
    try:
        files = sorted(p.rglob("*")) if p.is_dir() else [p]
        return tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.is_file())
    except OSError:
        return None


def input_bytes(specs: list[str]) -> int | None:
    """Total size of the logs when they are all local (None when one is not)."""
    total = 0
    for spec in specs:
        stamp = _stamp(contract.split_log_arg(spec)[1])
        if not stamp:
            return None
        total += sum(s for _, s, _ in stamp)
    return total


def frame_logs(frames: dict[str, DataFrame], type_column, times=None) -> list[_Log]:
    """A user's DataFrames as logs named by their keys (``<NAME>`` in messages, as
    ``io.read.read_frames`` names an in-memory log), in that order, with the contract's
    decisions of file logs."""
    loaded = [(_Source(name, f"<{name}>", FRAME), df) for name, df in frames.items()]
    return _decide(next(iter(frames.values())).sparkSession, loaded, type_column, times)


def _seen(index: int, src: _Source, df: DataFrame) -> contract.LogDecision:
    """What the Spark reader sees of a log, for ``contract.decide``: its columns' kinds
    (through their Arrow types) and type names, and, when the kinds may be a guess from no
    value (``contract.untyped``), whether it has a row (one small job)."""
    fields = df.schema.fields
    kinds = {f.name: _kind(f.dataType) for f in fields}
    seen = contract.LogDecision(src.path, src.name, kinds,
                                types={f.name: f.dataType.simpleString() for f in fields},
                                format=src.format, index=index)
    if contract.untyped(src.format, kinds):
        try:
            seen = replace(seen, empty=not df.take(1))
        except Exception as e:
            raise spark_error(e, what=f"cannot read {src.path} as {src.format}: ") from None
    return seen


def _decide(spark, loaded: list[tuple[_Source, DataFrame]], type_column, times) -> list[_Log]:
    """The contract's decisions on loaded logs (files or a DataFrame), each log's frame made
    to have the kinds decided: an empty log's columns null, a time column of texts that
    Spark's CSV inference typed as timestamps read again as text."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    with input_errors():
        seen = [_seen(i, src, df) for i, (src, df) in enumerate(loaded)]
        decided = contract.decide(seen, type_column, times)
    logs = []
    for (src, df), d in zip(loaded, decided, strict=True):
        if d.empty:
            df = df.select(*(F.lit(None).alias(c) for c in df.columns))
        elif d.time_kind == "str" and not isinstance(df.schema[d.time_column].dataType,
                                                     T.StringType):
            fields = [T.StructField(f.name, T.StringType()) if f.name == d.time_column else f
                      for f in df.schema.fields]
            df = _load(spark, src, T.StructType(fields))
        logs.append(_Log(src, df, d))
    return logs


def _with_rows(spark, df: DataFrame) -> DataFrame:
    """ROW: the row's rank in the log, files in path order, rows in file order."""
    return _numbered_rows(spark, df)[0]


def _numbered_rows(spark, df: DataFrame, time=None) -> tuple[DataFrame, int, bool]:
    """``df`` with ROW, its number of rows, and (given its ``time``, TIME's expression)
    whether its rows are already in time order, ROW by ROW.

    Rows of one file block are read consecutively by one task, so the rank is the block's
    offset (rows of earlier blocks) plus the row's distance from the block's first row. The
    same aggregation gives each block's least and greatest time; whether the rows within
    each block are in order is one more look at the time column (``_runs_in_order``)."""
    from pyspark.sql import functions as F

    df = df.select(
        "*",
        F.col("_metadata.file_path").alias(_FILE),
        F.col("_metadata.file_block_start").alias(_BLOCK),
        F.monotonically_increasing_id().alias(MID),
    )
    spans = [] if time is None else [F.min(time), F.max(time)]
    blocks = sorted(df.groupBy(_FILE, _BLOCK).agg(F.min(MID), F.count("*"), *spans).collect())
    offsets = list(accumulate((b[3] for b in blocks), initial=0))
    base = spark.createDataFrame(
        [(b[0], b[1], off - b[2]) for b, off in zip(blocks, offsets, strict=False)],
        f"{_FILE} string, {_BLOCK} long, base long",
    )
    joined = df.join(F.broadcast(base), [_FILE, _BLOCK])
    numbered = joined.withColumn(ROW, F.col(MID) + F.col("base")).drop(_FILE, _BLOCK, MID, "base")
    ordered = time is not None and all(
        b[4] is not None and b[5] is not None and (i == 0 or blocks[i - 1][5] <= b[4])
        for i, b in enumerate(blocks)
    ) and all(r[0] for r in df.select(_BLOCK, time.alias("t"))
              .mapInArrow(_runs_in_order, "ordered boolean").collect())
    return numbered, offsets[-1], ordered


def _runs_in_order(batches):
    """The ``mapInArrow`` function of ``_numbered_rows``: whether, in a task's rows of
    (block, time), the times of every run of one block are in order (a block's rows are
    one such run, or part of one: a stricter check, never a looser one)."""
    import numpy as np
    import pyarrow as pa

    ok, last = True, None
    for b in batches:
        if not ok or not b.num_rows:
            continue
        if b.column(1).null_count:
            ok = False
            continue
        block = b.column(0).to_numpy(zero_copy_only=False)
        t = b.column(1).to_numpy(zero_copy_only=False)
        if last is not None:
            block, t = np.concatenate([[last[0]], block]), np.concatenate([[last[1]], t])
        ok = not np.any((block[1:] == block[:-1]) & (t[1:] < t[:-1]))
        last = (block[-1], t[-1])
    yield pa.RecordBatch.from_pydict({"ordered": [ok]})


def _time_expr(d: contract.LogDecision):
    """TIME of a log as its decision ``d`` says (``contract.time_kind``): numbers as they
    are, or with a unit as ns since the epoch (null beyond int64, as locally); datetimes
    (texts parsed by ``_parse_time``) as ns since the epoch (Spark keeps microseconds). NaN
    is null."""
    from pyspark.sql import functions as F

    col = column(d.time_column)
    kind = d.time_kind
    if kind in ("int", "float"):
        ok = col.isNotNull()
        if kind == "float":
            ok = ok & ~F.isnan(col) & (F.abs(col) != float("inf"))
        if d.time_unit is None:
            return F.when(ok, col)
        ok = ok & (F.abs(col) <= contract.unit_bound(d.time_unit))
        factor = F.lit(contract.TIME_UNITS[d.time_unit]).cast("long")
        if kind == "int":  # try_: ANSI mode may evaluate the product even where not ok
            return F.when(ok, F.try_multiply(col.cast("long"), factor))
        decimal = d.types.get(d.time_column, "").startswith("decimal")
        return F.when(ok, _exact_ns(col, d.time_unit, decimal))
    if kind == "str":
        col = _parse_time(col, d.time_format)
    # try_: a timestamp beyond nanoseconds' range (after 2262) is no time, as locally
    return F.try_multiply(F.unix_micros(col.cast("timestamp_ltz")), F.lit(1000).cast("long"))


def _exact_ns(col, unit: str, decimal: bool):
    """Nanoseconds since the epoch of a float or decimal time in ``unit``, as the local
    reader computes them (``io.read._exact_ns``): a decimal by its digits, a double by its
    shortest text (Java's ``Double.toString``, the same as polars' below 1e16, which covers
    every unit's range but nanoseconds'), rounded half away from zero once; a double from
    2^53 on (nanoseconds, microseconds near their bound) as the whole number it is. It was
    a double product, 256 ns apart at 1.7e18: times 1.13 s apart were more than
    ``WITHIN 1130 milliseconds`` apart, as locally before."""
    from pyspark.sql import functions as F

    factor, digits = contract.TIME_UNITS[unit], contract.unit_digits(unit)
    # the text's value to 1e-9 ns (rounded half up, as polars' cast), then to ns: one rounding
    fine = col.cast("string").try_cast(f"decimal(38,{digits + 9})")
    ns = (F.round(fine, digits) * F.lit(factor).cast(f"decimal({digits + 1},0)")).try_cast("long")
    if decimal:
        return ns
    whole = F.try_multiply(col.try_cast("long"), F.lit(factor).cast("long"))
    return F.when(F.abs(col) >= F.lit(contract.FLOAT_WHOLE), whole).otherwise(ns)


def _time_value(d: contract.LogDecision, time):
    """The log's time column as the event frame shows it when the decision reads it as
    datetimes: parsed texts (UTC instants when ``time_zoned``), or numbers with a unit as the
    timestamps of ``time``, the log's TIME in ns."""
    from pyspark.sql import functions as F

    if d.time_kind == "str":
        return _parse_time(column(d.time_column), d.time_format, d.time_zoned)
    return F.timestamp_micros(F.floor(time / 1000)).cast("timestamp_ntz")


#: strftime directive -> Java DateTimeFormatter pattern, for --time-format on Spark.
_JAVA_PATTERN = {"Y": "yyyy", "y": "yy", "m": "MM", "d": "dd", "H": "HH", "M": "mm",
                 "S": "ss", "f": "SSSSSS", "z": "xx", "b": "MMM", "B": "MMMM", "I": "hh",
                 "p": "a", "j": "DDD", "%": "%"}


def java_pattern(fmt: str) -> str:
    """``--time-format`` (strftime) as a Java pattern: literal text quoted, directives
    translated; a directive without a translation is an input error, not a guess."""
    out, i = [], 0
    while i < len(fmt):
        ch = fmt[i]
        if ch == "%" and i + 1 < len(fmt):
            d = fmt[i + 1]
            if d not in _JAVA_PATTERN:
                raise SparkError(f"{option('time-format', fmt, quoted=True)}: %{d} is not"
                                 " supported on Spark",
                                 ["supported: " + " ".join("%" + k for k in _JAVA_PATTERN)],
                                 input_error=True)
            out.append(_JAVA_PATTERN[d] if d != "%" else "'%'")
            i += 2
            continue
        out.append("''" if ch == "'" else (f"'{ch}'" if ch.isalpha() else ch))
        i += 1
    return "".join(out)


def _parse_time(col, fmt: str | None = None, zoned: bool = False):
    """Time texts as naive timestamps, or ``zoned`` as UTC instants (Spark's TIMESTAMP),
    null when unreadable, as the local reader parses them: with ``fmt`` by it, else only
    ``contract.ISO_TIME`` values; an offset or Z is honoured, a naive value is UTC (the
    session's zone)."""
    from pyspark.sql import functions as F

    kind = "timestamp_ltz" if zoned else "timestamp_ntz"
    if fmt is not None:
        return F.try_to_timestamp(col, F.lit(java_pattern(fmt))).cast(kind)
    text = F.trim(col)
    # Spark's cast reads neither +0100 (ISO's basic form) nor HH:MM before an offset, which
    # polars reads: written as +01:00 and HH:MM:00 first
    seconds = F.regexp_replace(text, r"^(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2})(Z|[+-].*)$",
                               "$1:00$2")
    inside = (text >= F.lit(contract.ISO_RANGE[0])) & (text < F.lit(contract.ISO_RANGE[1]))
    iso = F.when(text.rlike(contract.ISO_TIME) & inside,
                 F.regexp_replace(seconds, r"([+-]\d{2})(\d{2})$", "$1:$2"))
    return iso.try_cast("timestamp_ltz").cast(kind)


@dataclass
class Events:
    """The event frame on Spark: ``frame`` (columns of the logs + RESERVED, ordered
    partitions), the log's own ``columns``, the ``time_column``, ``n`` events."""

    frame: DataFrame
    columns: list[str]
    time_column: str | None
    n: int | None  # None for a lazy run: counted only when a ``ranges`` plan needs it
    logs: list[_Log]
    #: Whether ``frame``'s partitions hold the events in POS order (after a sort by it);
    #: a log already in time order keeps its files' partitions (``event_frame``).
    partitions_in_order: bool = True

    @property
    def time_columns(self) -> tuple[str, ...]:
        """The logs' time columns, each once (``OutputSpec.time_columns``)."""
        return contract.time_columns_of([g.decision for g in self.logs])


def _fail_on_bad_rows(frame: DataFrame, logs: list[_Log], tc: str | None) -> DataFrame:
    """The lazy run's check of ``Run.event_frame``: an event without a type, or without a
    readable time when the logs have a time column, fails the job that computes it."""
    from pyspark.sql import functions as F

    def where(what: str):
        paths = F.array(*(F.lit(g.src.path) for g in logs))
        path = F.element_at(paths, (F.col(_ARG) + 1).cast("int"))
        return F.concat(path, F.lit(": data row "), F.col(ROW).cast("string"),
                        F.lit(f" (0-based): {what}"))

    cols = {}
    types = ", ".join(repr(g.decision.type_column) for g in logs if g.decision.type_column) or "none"
    cols[TYPE] = F.when(F.col(TYPE).isNull(),
                        F.raise_error(where(f"no event type in column {types}"))
                        ).otherwise(F.col(TYPE))
    if tc is not None:
        cols[TIME] = F.when(F.col(TIME).isNull(),
                            F.raise_error(where(f"no readable time in column {tc!r}"))
                            ).otherwise(F.col(TIME))
    return frame.withColumns(cols)


def _time_error(spark, g: _Log) -> SparkError:
    """The contract's error for the log's first unreadable time (for texts: the value the
    contract blames, so ``0,soon`` blames ``soon``), worded as the local reader words it."""
    from pyspark.sql import functions as F

    d = g.decision
    raw = column(d.time_column).cast("string")
    numbered = (_with_rows(spark, g.df) if g.by_files
                else Run(spark, lazy=True).index(g.df, ROW)[0])  # nothing persisted
    rows = (numbered.filter(_time_expr(d).isNull())
            .select(F.col(ROW), raw.alias("raw")).orderBy(ROW).limit(10_000).collect())
    bad = rows[0][0]
    if d.time_kind == "str" and d.time_format is None:
        bad = contract.blame_time((r[0], r[1]) for r in rows) or bad
    value = next(r[1] for r in rows if r[0] == bad)
    e = contract.bad_time(contract.row_place(g.src.path, g.src.format, bad), d.time_column, value,
                          d.time_format, d.time_unit)
    return SparkError(e.message, e.hints, input_error=True)


def refuse_rounded_integers(spark, logs: list[_Log], kinds: dict[str, str | None],
                            keep: Collection[str] | None = None) -> None:
    """Refuse, as the local reader does (``contract.rounded_integer``), an integer that the
    union would round: a column of integers in one log and of floats in another is double
    in the event frame, exact only up to 2^53; Spark wrote 2^53 + 1 as 2^53 with exit 0
    where local mode refuses the log. The first log (argument order) holding one, its first
    row, that row's first such column. Only where a column meets both kinds (``keep``: the
    columns read): one small job per such log, and the lookup only then."""
    from pyspark.sql import functions as F

    for g in logs:
        d = g.decision
        cols = [c for c in d.data_columns if d.columns.get(c) == "int"
                and kinds.get(c) == "float" and (keep is None or c in keep)]
        if not cols:
            continue
        bad = functools.reduce(lambda a, b: a | b, map(_rounds, cols))
        if not g.df.select(F.max(bad.cast("int"))).first()[0]:
            continue
        numbered = (_with_rows(spark, g.df) if g.by_files
                    else Run(spark, lazy=True).index(g.df, ROW)[0])  # nothing persisted
        row = numbered.filter(bad).orderBy(ROW).select(ROW, *map(column, cols)).first()
        c, value = next((c, v) for c, v in zip(cols, row[1:], strict=True)
                        if v is not None and int(float(v)) != int(v))
        e = contract.rounded_integer(contract.row_place(g.src.path, g.src.format, row[0]), c,
                                     int(value))
        raise SparkError(e.message, e.hints, input_error=True)


def _rounds(c: str):
    """Whether column ``c``'s integer changes as a double, in exact integer arithmetic: a
    double and a long compare as doubles (rounded alike), and a double cast to a decimal
    goes through its shortest text (2^62 became 4611686018427387900). Below 2^63 the double
    is cast back to a long (exact for a whole double; null, so rounded, at 2^63); from 2^63
    (an unsigned 64-bit column, a decimal here) both are taken 2^63 down first, which is
    exact for the double too (a multiple of 2^11 below 2^64)."""
    from pyspark.sql import functions as F

    x = column(c)
    top = F.lit(str(2**63)).cast("decimal(20,0)")
    edge = F.lit(2.0**63)  # a double at it casts to the greatest long, not null

    def differs(d, i):
        return F.coalesce((d >= edge) | (d.try_cast("long") != i.try_cast("long")), F.lit(True))

    low = differs(x.cast("double"), x)
    high = differs(x.cast("double") - edge, x.cast("decimal(20,0)") - top)
    return x.isNotNull() & F.when(x.cast("decimal(20,0)") < top, low).otherwise(high)


def _type_error(spark, g: _Log) -> SparkError:
    """The local reader's error for the log's first row without an event type."""
    from pyspark.sql import functions as F

    numbered = (_with_rows(spark, g.df) if g.by_files
                else Run(spark, lazy=True).index(g.df, ROW)[0])  # nothing persisted
    bad = (numbered.filter(column(g.decision.type_column).isNull())
           .agg(F.min(ROW)).first()[0])
    return SparkError(f"{contract.row_place(g.src.path, g.src.format, bad)}: no event type in"
                      f" column {g.decision.type_column!r}", input_error=True)


def logs_schema(opened: list[_Log], columns: Collection[str] | None = None) -> Schema:
    """The ``Schema`` of opened logs: one small aggregation (a row per event type), which
    also learns the logs' ``time_values`` (and so the contract's verdicts on them) and
    their ``_Rows`` (then ``check_rows``: a bad row is refused before any job runs).
    ``columns``: the attributes a query reads (``plan.read_attributes``), the only ones
    whose values are looked at (Parquet reads no other column); the others count as
    holding values, which only a query reading them could tell."""
    from pyspark.sql import functions as F

    decisions = [g.decision for g in opened]
    with input_errors():
        tc = next(iter(contract.time_columns_of(decisions)), None)
        kinds = contract.column_kinds(decisions, tc)
    present = []
    try:
        for g in opened:
            usable = contract.attribute_columns(g.decision, kinds)
            looked = [c for c in usable if columns is None or c in columns]
            flags = [F.max(column(c).isNotNull().cast("int")).alias(f"c{i}")
                     for i, c in enumerate(looked)]
            etype = F.lit(g.src.name) if g.decision.type_column is None else column(g.decision.type_column)
            # a log of types only has no attribute to flag (agg needs one expression)
            flags = (flags + _time_facts(g) + _row_facts(g, False)) or [F.lit(0).alias("none")]
            rows = g.df.groupBy(etype.cast("string").alias(TYPE)).agg(*flags).collect()
            assumed = {c: True for c in usable if c not in looked}
            present.append({r[TYPE]: {**assumed, **{c: bool(r[f"c{i}"]) for i, c in
                                                    enumerate(looked)}} for r in rows})
            g.time_values = _time_values(g, rows)
            g.rows = _rows(g, rows, no_type=any(r[TYPE] is None for r in rows))
    except SparkError:
        raise
    except Exception as e:
        raise spark_error(e) from None
    with input_errors():
        fits = _judge(opened)
        schema = contract.build_schema([g.decision for g in opened], present, kinds, tc, fits)
    check_rows(opened)
    return schema


_NO_TYPE, _BAD_TIME, _INFINITE = "__cer_no_type", "__cer_bad_time", "__cer_infinite"
_TIME_MIN, _TIME_MAX = "__cer_time_min", "__cer_time_max"


def _row_facts(g: _Log, typed: bool = True) -> list:
    """Aggregations for ``_Rows``: whether a row has no readable time (``_time_expr`` is
    null: the local reader refuses the log at once, so the Spark reader does too instead of
    failing the job that reaches it), the least and greatest TIME, and (``typed``: not
    grouped by type, whose null group says it) whether a row has no event type."""
    from pyspark.sql import functions as F

    d = g.decision
    facts = []
    if typed and d.type_column is not None:
        facts.append(F.max(column(d.type_column).isNull().cast("int")).alias(_NO_TYPE))
    if d.time_column is not None and d.time_kind in contract.TIME_KINDS:  # else refused
        t = _time_expr(d)
        facts += [F.max(t.isNull().cast("int")).alias(_BAD_TIME), F.min(t).alias(_TIME_MIN),
                  F.max(t).alias(_TIME_MAX)]
    if g.src.format in ("ndjson", "json"):
        floats = [column(f.name) for f in g.df.schema.fields if f.dataType.typeName() == "double"]
        if floats:
            inf = [(F.abs(c) == float("inf")).cast("int") for c in floats]
            facts.append(F.max(F.greatest(*inf) if len(inf) > 1 else inf[0]).alias(_INFINITE))
    return facts


def _rows(g: _Log, rows, no_type: bool = False) -> _Rows:
    """The log's ``_Rows`` from rows carrying ``_row_facts`` (per event type, or one)."""
    facts = [r.asDict() for r in rows]
    lows = [f[_TIME_MIN] for f in facts if f.get(_TIME_MIN) is not None]
    highs = [f[_TIME_MAX] for f in facts if f.get(_TIME_MAX) is not None]
    return _Rows(no_type or any(f.get(_NO_TYPE) for f in facts),
                 any(f.get(_BAD_TIME) for f in facts),
                 min(lows, default=None), max(highs, default=None),
                 any(f.get(_INFINITE) for f in facts))


def check_rows(logs: list[_Log]) -> None:
    """Refuse logs whose ``_Rows`` say a row has no readable time or no event type, with
    the local reader's message (the first such row, times first as locally): looked up
    only then. A JSON number beyond a 64-bit float first: the local reader refuses it on
    opening the log."""
    for g in logs:
        if g.rows is not None and g.rows.infinite:
            raise _bad_json_line(g.src)
    for g in logs:
        if g.rows is not None and g.rows.bad_time:
            raise _time_error(g.df.sparkSession, g)
    for g in logs:
        if g.rows is not None and g.rows.no_type:
            raise _type_error(g.df.sparkSession, g)


_LOW, _HIGH, _ZONED = contract.TIME_LOW, contract.TIME_HIGH, contract.TIME_ZONED


def _time_facts(g: _Log) -> list:
    """Aggregations for ``contract.TimeValues``, as the local reader's ``_time_facts``: the
    least and greatest finite value of a numeric time column (Spark orders NaN above
    every number, polars skips it: both skip it here), whether a time column of ISO texts
    holds one with an offset."""
    from pyspark.sql import functions as F

    d = g.decision
    if d.time_column is None:
        return []
    col, kind = column(d.time_column), d.time_kind
    if kind in ("int", "float"):
        x = col if kind == "int" else F.when(~F.isnan(col) & (F.abs(col) != float("inf")), col)
        return [F.min(x).alias(_LOW), F.max(x).alias(_HIGH)]
    if kind == "str" and d.time_format is None:
        return [F.max(F.trim(col).rlike(contract.ISO_ZONED_TIME).cast("int")).alias(_ZONED)]
    return []


def _time_values(g: _Log, rows) -> contract.TimeValues:
    """The log's ``TimeValues`` from rows carrying ``_time_facts`` (per event type)."""
    return contract.time_values(g.decision, [r.asDict() for r in rows])


def _judge(logs: list[_Log]) -> dict[str, str]:
    """``contract.judge_times`` on the logs' ``time_values``: their decisions updated, the
    epoch units that fit returned."""
    decisions, fits = contract.judge_times([g.decision for g in logs],
                                           [g.time_values for g in logs])
    for g, d in zip(logs, decisions, strict=True):
        g.decision = d
    return fits


def _judge_times(logs: list[_Log]) -> None:
    """The time values' verdicts and ``_Rows`` for logs whose schema Spark did not compute
    (``logs_schema`` learns them): one row per log, only for a log whose time column says
    more than its type (numbers, texts); then ``check_rows``."""
    if all(g.time_values is not None for g in logs):
        return
    try:
        for g in logs:
            if g.time_values is None:
                facts = _time_facts(g)
                row = [g.df.agg(*facts, *_row_facts(g)).first()] if facts else []
                g.time_values = _time_values(g, row)
                g.rows = _rows(g, row) if row else None
    except Exception as e:
        raise spark_error(e) from None
    with input_errors():
        _judge(logs)
    check_rows(logs)


def events(run: Run, specs: list[str], type_column, times, log_format) -> Events:
    """The event frame of the logs ``specs`` (``open_logs``), the run's shuffles sized to
    them."""
    run.size_shuffles(input_bytes(specs))
    return event_frame(run, open_logs(run.spark, specs, type_column, log_format, times))


def event_frame(run: Run, logs: list[_Log]) -> Events:
    """The event frame of opened logs (files or a DataFrame): TYPE, STREAM, TIME, ROW
    and the widened columns, numbered by POS in the local reader's order: by a sort, unless
    the logs are one file log whose rows are in time order (``_numbered_rows`` tells, from
    the block counts ROW needs anyway and one look at the time column), or have no time."""
    from pyspark.sql import functions as F

    tc = next(iter(contract.time_columns_of([g.decision for g in logs])), None)
    _judge_times(logs)
    if not run.lazy:
        _ensure_rows(logs)
    time_type, kinds = _time_type(logs), _kinds(logs)
    refuse_rounded_integers(run.spark, logs, kinds)
    frames, columns = [], []
    if not run.lazy and len(logs) == 1 and logs[0].by_files:
        g = logs[0]
        d = g.decision
        timed = d.time_column is not None and d.time_kind in contract.TIME_KINDS
        df, n, ordered = _numbered_rows(run.spark, g.df, _time_expr(d) if timed else None)
        if ordered or d.time_column is None:  # POS is ROW: no sort
            frame = df.select(*_event_columns(g, None, time_type, columns, kinds), F.col(ROW))
            return Events(frame.withColumn(POS, F.col(ROW)).drop(_ARG), columns, tc, n, logs,
                          partitions_in_order=False)
        frames.append(df.select(*_event_columns(g, None, time_type, columns, kinds), F.col(ROW)))
    for g in logs if not frames else ():
        # a DataFrame has no files: ROW is its rank in the frame's partition order
        df = _with_rows(run.spark, g.df) if g.by_files else run.index(g.df, ROW)[0]
        frames.append(df.select(*_event_columns(g, None, time_type, columns, kinds), F.col(ROW)))
    frame, n = run.rank(_union(frames), POS, F.col(TIME).asc_nulls_first(), _ARG, ROW)
    if run.lazy:
        return Events(_fail_on_bad_rows(frame, logs, tc).drop(_ARG), columns, tc, n, logs)
    return Events(frame.drop(_ARG), columns, tc, n, logs)


#: The columns that put the events of ``stream_frame`` in the local reader's order after
#: TIME and the argument index: a log's file (its path; "" for a log of one file), the
#: file block a task reads, and the row's id in the task (``monotonically_increasing_id``,
#: increasing with the row within a block).
FILE, BLOCK = _FILE, _BLOCK
ORDER = (TIME, _ARG, FILE, BLOCK, MID)


def stream_frame(logs: list[_Log], keep: Collection[str]) -> Events:
    """The events of opened logs as the engines read them, without numbering them: TYPE,
    STREAM, TIME, the columns ``keep`` (widened; the others are never read: Parquet's
    column pruning), and ``ORDER``'s columns, which sort them as the local reader does.

    No pass over the logs: no POS and no ROW (``event_frame``'s sort and block counts), so
    for a run whose output needs neither (``--count``), or that numbers only what it
    outputs. The logs' rows are checked first (``check_rows``, by the aggregation that
    judged their times, or one of its own)."""
    from pyspark.sql import functions as F

    tc = next(iter(contract.time_columns_of([g.decision for g in logs])), None)
    _judge_times(logs)
    _ensure_rows(logs)
    time_type, kinds = _time_type(logs), _kinds(logs)
    refuse_rounded_integers(logs[0].df.sparkSession, logs, kinds, keep)
    frames, columns = [], []
    for g in logs:
        if not g.by_files:  # a DataFrame: its partition order
            where = (F.lit(""), F.lit(0).cast("long"))
        else:  # the path only when it tells files apart
            path = F.lit("") if len(g.df.inputFiles()) <= 1 else F.col("_metadata.file_path")
            where = (path, F.col("_metadata.file_block_start"))
        frames.append(g.df.select(*_event_columns(g, keep, time_type, columns, kinds),
                                  where[0].alias(FILE), where[1].alias(BLOCK),
                                  F.monotonically_increasing_id().alias(MID)))
    return Events(_union(frames), columns, tc, None, logs)


def _time_type(logs: list[_Log]) -> str:
    """The Spark type of TIME (``contract.time_storage`` of ``event_time_kind``)."""
    with input_errors():
        time_kind = contract.event_time_kind([g.decision for g in logs])
    return _TIME_TYPES[contract.time_storage(time_kind or "int")]


def _kinds(logs: list[_Log]) -> dict[str, str | None]:
    """Each data column's kind over all the logs (``contract.column_kinds``)."""
    decisions = [g.decision for g in logs]
    with input_errors():
        return contract.column_kinds(decisions, next(iter(contract.time_columns_of(decisions)), None))


def _event_columns(g: _Log, keep: Collection[str] | None, time_type: str,
                   columns: list[str], kinds: dict[str, str | None]) -> list:
    """A log's columns in the event frame: its data columns (those in ``keep``, or all)
    widened as polars reads them — to the kind the column has over all the logs (``kinds``):
    a column of numbers in one log and of texts in another is text in both, where Spark's
    union would cast the texts to numbers and fail (numbers of several types meet in the
    union: a decimal stays exact) — the time column as the decision shows
    it, then TYPE, STREAM, TIME and the argument index. ``columns`` collects the data
    columns' names."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    d = g.decision
    widened = []
    ttime = F.lit(None) if d.time_column is None else _time_expr(d)
    for f in g.df.schema.fields:
        if f.name == d.type_column or (keep is not None and f.name not in keep):
            continue
        c = column(f.name)
        if f.name == d.time_column and d.reads_time_as_datetime:
            c = _time_value(d, ttime)
        elif kinds.get(f.name) == "str" and not isinstance(f.dataType, T.StringType):
            c = c.cast("string")  # numbers meet their union as polars' supertypes are
        elif isinstance(f.dataType, T.ByteType | T.ShortType | T.IntegerType):
            c = c.cast("long")
        elif isinstance(f.dataType, T.FloatType):
            c = c.cast("double")
        widened.append(c.alias(f.name))
        if f.name not in columns:
            columns.append(f.name)
    etype = F.lit(g.src.name) if d.type_column is None else column(d.type_column)
    return [*widened, etype.cast("string").alias(TYPE), F.lit(g.src.name).alias(STREAM),
            ttime.cast(time_type).alias(TIME), F.lit(d.index).cast("long").alias(_ARG)]


def _union(frames: list[DataFrame]) -> DataFrame:
    union = frames[0]
    try:
        for f in frames[1:]:
            union = union.unionByName(f, allowMissingColumns=True)
    except Exception as e:
        raise spark_error(e, what="the logs have incompatible columns: ") from None
    return union


def _ensure_rows(logs: list[_Log]) -> None:
    """``_Rows`` for the logs no aggregation has seen yet (a log whose time is datetimes or
    absent, read without a schema pass): one row per log; then ``check_rows``."""
    try:
        for g in logs:
            if g.rows is None:
                facts = _row_facts(g)
                g.rows = _rows(g, [g.df.agg(*facts).first()]) if facts else _Rows()
    except Exception as e:
        raise spark_error(e) from None
    check_rows(logs)
