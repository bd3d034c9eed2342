"""``cer_cli.spark.match``: a query over a Spark DataFrame, the matches as a Spark DataFrame.

::

    from cer_cli.spark import match, spark_session

    spark = spark_session()
    df = spark.read.csv("samples/stocks.csv", header=True, inferSchema=True)
    matches = match(df, "SELECT * WHERE SELL AS s ; BUY AS b WITHIN 10 EVENTS")
    matches.groupBy("type").count().show()       # composes with the rest of a job

The DataFrame goes through the code of ``cer match --spark``: the log contract's decisions
on type and time columns and the event frame (``read``), the plan's fan-out with
``Plan.executor()`` in ``mapInArrow`` tasks (``tasks``), and the shapes ``spark_write``
writes (``output``). It is the frame
``cer_cli.match`` returns for the same rows as a polars frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from cer_cli.io.contract import LogError, api_options, named_logs
from cer_cli.options import spelling
from cer_cli.plan import Plan
from cer_cli.plan.compile import compile_query
from cer_cli.query.scope import wide_variables
from cer_cli.spark.errors import SparkError
from cer_cli.spark.output import output_spec, shaped
from cer_cli.spark.read import event_frame, frame_logs, logs_schema
from cer_cli.spark.run import Run
from cer_cli.spark.ship import ship_package
from cer_cli.spark.tasks import find_matches

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["match"]

#: A log option: one value for every log, or values by log name (``{"W": "ts"}``).
LogOption = str | Mapping[str, str] | None


def match(
    df: DataFrame | Mapping[str, DataFrame] | None = None,
    query: str | Plan | None = None,
    *,
    logs: Mapping[str, DataFrame] | None = None,
    type_column: LogOption = None,
    time_column: LogOption = None,
    time_unit: LogOption = None,
    time_format: LogOption = None,
    open_absence: str = "drop",
    shape: str = "long",
    stream: str = "events",
    ranges: int | None = None,
) -> DataFrame:
    """The matches of ``query`` (CEQL text or a compiled ``Plan``) over ``df`` as a lazy
    Spark DataFrame in the long shape (one row per match x event, ordered by (match,
    position)) or the wide shape: what ``cer match --spark -o DIR`` writes, and what ``cer_cli.match`` returns
    for the same rows. ``stream`` names the log (``FROM``, ``S>E``); several logs are
    ``logs={"W": weather, "F": flights}``. The options are ``cer_cli.match``'s (one value
    for every log, or a dict by log name); ``open_absence="report"`` is refused, as
    ``--spark`` refuses it. ``ranges`` is the
    number of tasks of a ``ranges`` fan-out (default: Spark's default parallelism).

    Lazy: Spark runs nothing until an action on the result, except small aggregations
    the driver needs to build it: the schema for a query given as text (one row per event
    type; pass a ``Plan`` compiled against the schema to skip it; it also learns the time
    column's range and offsets, else one row computes them when the time is numbers or
    texts) and, for a ``ranges`` fan-out, the event count and the time window's reach. ROW is a row's rank in ``df``'s
    partition order, so ``df`` should have a stable order (a file read, or a cached frame).
    Nothing is persisted (there is no end of job at which to release it): cache the result
    if several actions use it, since each action re-runs the engines. A row without an
    event type or a readable time is refused here with the local reader's message when the
    time column holds numbers or texts (one aggregation looks); otherwise the action that
    computes it fails. The session should carry
    ``job.SESSION_DEFAULTS`` (``spark_session()`` sets them: UTC, naive timestamps).

    Raises ``LogError`` for a frame the contract refuses, ``QueryError`` for a query
    mistake (options named as keywords, as ``cer_cli.match`` names them), ``SparkError``
    for Spark's own failures. ``shape="wide"``: one row per match, as
    ``cer_cli.match(..., shape="wide")`` (ordered by match), a flat column ``v.attr`` per
    variable and attribute (back-quote it in Spark expressions); ``shape="struct"``: the same
    rows, a struct column per variable (``as_structs``), so ``F.col("v.attr")`` works."""
    from pyspark.sql import DataFrame as SparkFrame

    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; shapes: {', '.join(SHAPES)}")
    if open_absence not in ("drop", "report"):
        raise ValueError(f"unknown open_absence {open_absence!r}; choices: drop, report")
    if open_absence == "report":
        raise ValueError("open_absence='report' is not available on Spark (a task cannot tell"
                         " the end of the whole log); use cer_cli.match")
    with spelling("api"):
        frames = named_logs(df, logs, stream)
        for name, frame in frames.items():
            if not isinstance(frame, SparkFrame):
                raise TypeError(f"expected a pyspark DataFrame for log {name!r}, got"
                                f" {type(frame).__name__}")
        types, times = api_options(type_column, time_column, time_unit, time_format)
        try:
            opened = frame_logs(frames, types, times)
            compiled = query if isinstance(query, Plan) else compile_query(
                _query(query), logs_schema(opened))
            session = next(iter(frames.values())).sparkSession
            ship_package(session)  # the executors import cer_cli
            run = Run(session, lazy=True)
            ev = event_frame(run, opened)  # judges the time values
            found = find_matches(run, compiled, ev, ranges)
        except SparkError as e:
            if e.input_error:  # the contract refused a frame: the error cer_cli.match raises
                raise LogError(e.message, e.hints) from None
            raise
    variables = wide_variables(compiled.query) if shape != "long" else ()
    frame = shaped(run, found, ev, output_spec(ev, "long" if shape == "long" else "wide",
                                             variables))[0]
    return as_structs(frame, variables) if shape == "struct" else frame


def _query(query: str | None) -> str:
    if query is None:
        raise TypeError("give the query: match(df, query) or match(query=..., logs=...)")
    return query


#: ``match``'s shapes: ``long`` and ``wide`` as locally; ``struct``, the wide shape with a
#: struct column per variable (Spark's own way to nest).
SHAPES = ("long", "wide", "struct")


def as_structs(wide: DataFrame, variables) -> DataFrame:
    """The wide shape with each variable's flat ``v.attr`` columns as one column ``v``: a
    struct of the attributes, or for a variable that binds several events (``many``) a list
    of such structs, one per event; null where the match binds none. So
    ``F.col("v.attr")`` reads an attribute without back-quotes (``v.attr`` of a list
    variable: the list of its events' values). The flat wide shape stays polars' and the
    files'; this is only a view of it."""
    from pyspark.sql import functions as F

    def flat(v: str, field: str):
        return F.col(f"`{v}.{field}`")

    fields = {v: [c[len(v) + 1:] for c in wide.columns if c.startswith(f"{v}.")]
              for v, _ in variables}
    nested = {}
    for v, many in variables:
        first = fields[v][0]  # position: set whenever the match binds the variable
        if many:
            nested[v] = F.transform(flat(v, first), _each_event(v, fields[v]))
        else:
            nested[v] = F.when(flat(v, first).isNotNull(),
                               F.struct(*(flat(v, f).alias(f) for f in fields[v])))
    out, placed = [], set()  # each variable where its first flat column was
    for c in wide.columns:
        v = next((v for v, _ in variables if c.startswith(f"{v}.")), None)
        if v is None:
            out.append(F.col(f"`{c}`"))
        elif v not in placed:
            placed.add(v)
            out.append(nested[v].alias(v))
    return wide.select(*out)


def _each_event(v: str, fields: list[str]):
    """The ``transform`` function of a list variable ``v``: its i-th event as a struct of
    the i-th values of its flat list columns."""
    from pyspark.sql import functions as F

    return lambda _, i: F.struct(*(F.col(f"`{v}.{f}`")[i].alias(f) for f in fields))
