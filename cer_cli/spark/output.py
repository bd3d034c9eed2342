"""Spark's output: the matches in the output spec's shape (``cer_cli.io.output``), the
columns, names and values local mode writes, built in Spark SQL; the text rules
interpreted for Spark's CSV and JSON writers; and the ``-o`` directory Spark writes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cer_cli.events import POS, TIME
from cer_cli.io.contract import local_path
from cer_cli.io.files import OutputError, directory_output
from cer_cli.io.output import (
    FRACTION_DIGITS,
    LIST_SEPARATOR,
    MATCH_COLUMNS,
    SECONDS_TEXT,
    UTC_OFFSET,
    VARS_SEPARATOR,
    OutputSpec,
)
from cer_cli.spark.errors import SparkError, decode_query_error, spark_error
from cer_cli.spark.processes import writing
from cer_cli.spark.read import Events, column, java_pattern
from cer_cli.spark.run import Run

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


#: The formats Spark writes an ``-o`` directory in (``jsonl`` is written as ``json``).
WRITE_FORMATS = ("parquet", "csv", "json")


def check_output_dir(output: str) -> tuple[str, str]:
    """Where ``spark_write`` writes ``output`` (a directory) and Spark's save mode, checked
    before Spark starts by ``io.files.directory_output``'s rules for a local directory (the
    symlink rule; an existing file or non-empty directory refused, exit 2; a directory that
    cannot be written, exit 1): the resolved path, and "overwrite" for an existing empty
    directory, which Spark would otherwise refuse. A URI other than file: is left to Spark."""
    if (where := local_path(output)) is None:
        return output, "errorifexists"
    try:
        path, existing = directory_output(where)
    except OutputError as e:
        raise SparkError(e.message, e.hints, input_error=e.exit_code == 2) from None
    return path, "overwrite" if existing else "errorifexists"


def output_spec(ev: Events, shape: str = "long", variables=()) -> OutputSpec:
    """The ``OutputSpec`` of matches over the event frame ``ev`` (``variables``: the wide
    shape's, ``query.scope.wide_variables``'s)."""
    return OutputSpec(shape, tuple(ev.columns), ev.time_columns).with_variables(variables)


def shaped(run: Run, matches: DataFrame, ev: Events, spec: OutputSpec, csv: bool = False
            ) -> tuple[DataFrame, int | None]:
    """The matches in ``spec``'s shape as local mode writes them (``OutputSpec.columns``),
    ordered by (match, position) in the long shape, by match in the wide one; and the match
    count (None for a lazy run). ``csv``: vars joined with ``VARS_SEPARATOR``, the wide
    shape's lists as JSON text, as the local CSV writer writes them."""
    numbered, total = _numbered(run, matches, ev)
    columns = spec.columns()
    # POS first, also when no column shows it (a wide shape without variables): the join key
    sources = list(dict.fromkeys([POS, *(c.source for c in columns if c.of == "event")]))
    alias = {src: f"__cer_e{i}" for i, src in enumerate(sources)}  # names free of clashes
    events = ev.frame.select(*(column(src).alias(alias[src]) for src in sources))
    if spec.shape == "long":
        return _long(numbered, events, columns, alias, csv), total
    return _wide(numbered, events, columns, alias, spec, csv), total


def _long(numbered: DataFrame, events: DataFrame, columns, alias, csv: bool) -> DataFrame:
    """One row per match x event; a match without reported events keeps one row with null
    event columns, as locally (``io.shapes``)."""
    from pyspark.sql import functions as F

    rows = numbered.select(*(F.col(c) for c in MATCH_COLUMNS if c != "partition"),
                           F.col("partition_json").alias("partition"),
                           F.explode_outer("events").alias("__cer_ev"))
    rows = rows.select("*", F.col("__cer_ev.position").alias(alias[POS]),
                       F.col("__cer_ev.vars").alias("__cer_vars"))
    joined = rows.join(events, alias[POS], "left")
    out = []
    for c in columns:
        if c.of == "match":
            out.append(F.col(c.source).alias(c.name))
        elif c.of == "vars":
            v = F.col("__cer_vars")
            out.append((F.array_join(v, VARS_SEPARATOR) if csv else v).alias(c.name))
        else:
            out.append(F.col(alias[c.source]).alias(c.name))
    position = next(c.name for c in columns if c.of == "event" and c.source == POS)
    return joined.select(*out).orderBy("match", position)


def _wide(numbered: DataFrame, events: DataFrame, columns, alias, spec: OutputSpec, csv: bool
          ) -> DataFrame:
    """One row per match; a variable that may bind several events has array columns in
    stream order (``csv``: JSON text, as the local CSV writer writes lists)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    out = numbered.select(*(F.col(c) for c in MATCH_COLUMNS if c != "partition"),
                          F.col("partition_json").alias("partition"))
    fields = list(alias.values())  # POS first: sorting the structs sorts by position
    bound = (numbered.select("match", F.explode("events").alias("__cer_ev"))
             .select("match", F.col("__cer_ev.position").alias(alias[POS]),
                     F.explode("__cer_ev.vars").alias("__cer_var"))
             .join(events, alias[POS]))
    kinds = dict(zip(events.columns, (f.dataType for f in events.schema.fields), strict=True))
    for var, many in spec.variables or ():
        mine = [c for c in columns if c.variable == var]
        sub = bound.filter(F.col("__cer_var") == var)
        if many:
            sub = sub.groupBy("match").agg(
                F.sort_array(F.collect_list(F.struct(*fields))).alias("__cer_s"))
            cols = [F.col("__cer_s").getField(alias[c.source]) for c in mine]
            if csv:
                cols = [_json_list(_iso(x, T.ArrayType(kinds[alias[c.source]])))
                        for x, c in zip(cols, mine, strict=True)]
        else:
            cols = [F.col(alias[c.source]) for c in mine]
        sub = sub.select("match", *(x.alias(c.name) for x, c in zip(cols, mine, strict=True)))
        out = out.join(sub, "match", "left")
    return out.select(*(column(c.name) for c in columns)).orderBy("match")


def _numbered(run: Run, matches: DataFrame, ev: Events) -> tuple[DataFrame, int | None]:
    """One row per match, numbered in local mode's order (end, then the engine's), with
    start_time / end_time: the TIME of its first and last event in the common type of the
    logs' time columns (``OutputSpec.time_columns``), as local outputs show them."""
    from pyspark.sql import functions as F

    numbered, total = run.rank(matches, "match", "end", "seq")
    dtype = _time_type(ev)
    for side in ("start", "end"):
        if dtype is None:
            numbered = numbered.withColumn(f"{side}_time", F.lit(None).cast("string"))
            continue
        when = ev.frame.select(F.col(POS).alias(side),
                               _match_time(F.col(TIME), dtype).alias(f"{side}_time"))
        numbered = numbered.join(when, side, "left")
    return numbered, total


def _time_type(ev: Events):
    """The common Spark type of the logs' time columns (None without any): what Spark
    makes of ``coalesce`` over them, as ``EventLookup.time_dtype`` does locally."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    cols = [column(c) for c in ev.time_columns if c in ev.frame.columns]
    if not cols:
        return None
    try:
        return ev.frame.select(F.coalesce(*cols)).schema.fields[0].dataType
    except Exception:  # no common type: UTC instants
        return T.TimestampType()


def _match_time(time, dtype):
    """TIME (ns since the epoch for datetimes, else a number) as a value of ``dtype``."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(dtype, T.TimestampType | T.TimestampNTZType | T.DateType):
        return F.timestamp_micros(F.floor(time / 1000)).cast(dtype)
    return time.cast(dtype)


def local_text(df: DataFrame) -> DataFrame:
    """``df`` with its datetimes (also inside arrays) as the text local CSV and JSONL write,
    for Spark's text writers, which print ``.000`` and a zone of their own."""
    return df.select(*(_iso(column(f.name), f.dataType).alias(f.name) for f in df.schema.fields))


def _iso(col, dtype):
    """A datetime column as the ``io.output`` text rule says (Python's ``isoformat``):
    seconds, then microseconds only when not zero; Spark's zoned TIMESTAMP (UTC in cer's
    sessions) ends in ``UTC_OFFSET``. Other columns as they are."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(dtype, T.ArrayType):
        if isinstance(dtype.elementType, (T.TimestampType, T.TimestampNTZType)):
            return F.transform(col, lambda x: _iso(x, dtype.elementType))
        return col
    if not isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return col
    seconds = F.date_format(col, java_pattern(SECONDS_TEXT))
    micros = F.date_format(col, "S" * FRACTION_DIGITS)
    text = F.when(micros == "0" * FRACTION_DIGITS, seconds).otherwise(
        F.concat(seconds, F.lit("."), micros))
    return F.concat(text, F.lit(UTC_OFFSET)) if isinstance(dtype, T.TimestampType) else text


def _json_list(col):
    """An array column as the JSON text local CSV writes (``io.output``: items as JSON,
    ``LIST_SEPARATOR`` between them)."""
    from pyspark.sql import functions as F

    items = F.transform(col, lambda x: F.regexp_extract(F.to_json(F.array(x)), r"^\[(.*)\]$", 1))
    return F.when(col.isNotNull(),
                  F.concat(F.lit("["), F.array_join(items, LIST_SEPARATOR), F.lit("]")))


def write_directory(run: Run, matches: DataFrame, ev: Events, spec: OutputSpec, output: str,
                    output_format: str, mode: str) -> int | None:
    """Have Spark write ``matches`` in ``spec``'s shape as a ``parquet``, ``csv`` or ``json``
    directory ``output`` (Spark's save ``mode``); a signal meanwhile removes what it wrote.
    Returns the match count."""
    frame, total = shaped(run, matches, ev, spec, output_format == "csv")
    if output_format in ("csv", "json"):
        frame = local_text(frame)
    writer = frame.write.mode(mode)
    if output_format == "csv":  # quotes doubled inside quoted fields (RFC 4180), as local CSV
        writer = writer.option("header", True).option("escape", '"')
    if output_format == "json":  # every key in every line, a null too, as local JSONL
        writer = writer.option("ignoreNullFields", False)
    with writing(output, mode):
        try:
            writer.format(output_format).save(output)
        except Exception as e:  # the output's failure (exit 1), unless a task's query error
            if decode_query_error(str(e)) is not None:
                raise  # the caller's to render (``job._failures``)
            raise spark_error(e, what=f"cannot write {output}: ", writing=True) from None
    return total
