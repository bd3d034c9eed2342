"""Run a compiled query on Spark: read the logs, number the events, fan out, merge.

1. **Read** (``read``): Spark reads every LOG and builds the event frame of local mode, as
   the log contract decides (``cer_cli.io.contract``), the local reader's decisions.
2. **Number** (``run``): the union is sorted by (TIME, argument order, ROW), the order of
   the local reader, and POS is the rank in that order: a distributed sort, then
   per-partition counts turned into offsets, so no single task sees the whole log; one
   log already in time order needs no sort (POS is ROW, ``read.event_frame``).
3. **Fan out** (``tasks``) as the plan's ``fanout`` says, a fresh executor per task.
4. **Merge and write** (``output``): matches sorted by (end, rank within the task) are local
   mode's order; written in the output spec's shape (``cer_cli.io.output``), or streamed
   to the driver as Arrow batches (``tasks.in_arrow``).

The session and its pre-flight checks are ``session``'s, what a signal does ``processes``',
shipping ``cer_cli`` to the executors ``ship``'s (so they only need Python with polars,
pyarrow and numpy). Spark and input failures become ``SparkError`` (``errors``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

from cer_cli.events import POS, Match, Schema
from cer_cli.io import contract
from cer_cli.plan import Plan
from cer_cli.plan.fanout import RANGES
from cer_cli.query.errors import QueryError
from cer_cli.spark.errors import SparkError, decode_query_error, spark_error
from cer_cli.spark.output import WRITE_FORMATS, output_spec, write_directory
from cer_cli.spark.read import (
    Events,
    event_frame,
    input_bytes,
    logs_schema,
    open_logs,
    stream_frame,
)
from cer_cli.spark.run import Run
from cer_cli.spark.session import spark_session
from cer_cli.spark.tasks import (
    IPC_SCHEMA,
    checks_time_order,
    count_matches,
    find_matches,
    first_refused_time,
    in_arrow,
    matches_of,
    time_ranges,
)

__all__ = ["SparkError", "spark_count", "spark_match", "spark_schema", "spark_session",
           "spark_write"]


def spark_schema(
    logs: list[str],
    *,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    type_column: str | None = None,
    times: str | contract.TimeOptions | None = None,
    log_format: str | None = None,
    columns: Collection[str] | None = None,
) -> Schema:
    """The logs' ``Schema`` computed by Spark (for logs the driver cannot read locally),
    as ``contract.build_schema`` defines it; ``columns``: the attributes the query reads
    (``plan.read_attributes``), the only ones whose values Spark looks at; ``times``: the
    logs' time columns, units and formats, as for ``io.read.read_schema``. A row
    without an event type or a readable time is refused here (``read.check_rows``)."""
    spark = spark_session(master, conf)
    return logs_schema(open_logs(spark, logs, type_column, log_format, times), columns)


def _opened(run: Run, logs: list[str], type_column, times, log_format) -> list:
    """The logs opened (``open_logs``), the run's shuffles sized to them."""
    run.size_shuffles(input_bytes(logs))
    return open_logs(run.spark, logs, type_column, log_format, times)


#: Matches per Spark partition when they are streamed back to the driver in order: the
#: driver holds one partition at a time (``toLocalIterator``).
STREAM_MATCHES = 100_000


@contextmanager
def _failures(run: Run, compiled: Plan, numbered: Callable[[], Events],
              ranges: int | None, what: str = "") -> Iterator[None]:
    """A failed run as the user should see it: a query error a task met (``tasks``
    encodes it) as a ``QueryError``, so the CLI renders it as local mode does, caret and
    hints; one about an event (a refused window time) replaced by the first such event's
    (``first_refused_time`` over ``numbered()`` events), whichever task failed first;
    anything else as ``spark_error`` says (``what`` leads its message)."""
    try:
        yield
    except SparkError:
        raise
    except Exception as e:
        error = e if isinstance(e, QueryError) else decode_query_error(str(e))
        if error is None:
            raise spark_error(e, what=what) from None
        if error.position is not None:
            error = first_refused_time(run, compiled, numbered(), ranges) or error
        raise error from None


def _check_time_order(run: Run, compiled: Plan, ev: Callable[[], Events],
                      ranges: int | None) -> None:
    """Refuse, before the run, a window time out of order between the keys of a
    ``partition`` fan-out (``tasks.checks_time_order``), as local mode does."""
    if checks_time_order(compiled, ev()):
        error = first_refused_time(run, compiled, ev(), ranges)
        if error is not None:
            raise error


def spark_match(
    compiled: Plan,
    logs: list[str],
    *,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    type_column: str | None = None,
    times: str | contract.TimeOptions | None = None,
    ranges: int | None = None,
    log_format: str | None = None,
) -> Iterator[Match]:
    """Every match of ``compiled`` over ``logs``, computed on Spark and streamed back to
    the driver in local mode's order (end position, then the engine's order), at most
    ``STREAM_MATCHES`` in the driver's memory at a time.

    ``ranges`` is the number of tasks (default: Spark's default parallelism); ``fmt``
    forces the logs' format. Raises ``SparkError`` (or ``QueryError`` for a window the
    logs cannot serve)."""
    spark = spark_session(master, conf)
    run = Run(spark)
    ev = None
    try:
        with _failures(run, compiled, lambda: ev, ranges):
            ev = event_frame(run, _opened(run, logs, type_column, times, log_format))
            _check_time_order(run, compiled, lambda: ev, ranges)
            found = find_matches(run, compiled, ev, ranges)
            parts = max(1, -(-found.count() // STREAM_MATCHES))
            rows = (found.repartitionByRange(parts, "end", "seq")
                    .sortWithinPartitions("end", "seq")
                    .mapInArrow(in_arrow, IPC_SCHEMA).toLocalIterator())
            keys: dict = {}
            for r in rows:
                yield from matches_of(r[0], keys)
    finally:
        run.close()


def spark_count(
    compiled: Plan,
    logs: list[str],
    *,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    type_column: str | None = None,
    times: str | contract.TimeOptions | None = None,
    ranges: int | None = None,
    log_format: str | None = None,
) -> int:
    """The number of matches ``spark_match`` would stream, counted by Spark in one job:
    the logs read once (only the columns the plan reads), shuffled once by the fan-out's
    key, sorted within each task, counted by each task's engine (``tasks.count_matches``).
    Nothing numbers the events (no POS, no ROW) unless the plan cuts ranges by position
    (a window in events, or on an attribute other than the time), or a task's error names
    a data row (then the count runs again on numbered events, for that message)."""
    spark = spark_session(master, conf)
    run = Run(spark)
    opened, numbered = [], []

    def events() -> Events:  # numbered by POS, once, when a check or a message needs it
        if not numbered:
            numbered.append(event_frame(run, opened))
        return numbered[0]

    try:
        with _failures(run, compiled, events, ranges):
            opened = _opened(run, logs, type_column, times, log_format)
            ev = stream_frame(opened, compiled.read_columns)
            if compiled.fanout.kind == RANGES and not time_ranges(compiled, ev):
                ev = events()
            if checks_time_order(compiled, ev):
                _check_time_order(run, compiled, events, ranges)
            try:
                return count_matches(run, compiled, ev, ranges)
            except Exception as e:
                error = e if isinstance(e, SparkError) else spark_error(e)
                if not error.input_error or POS in ev.frame.columns \
                        or decode_query_error(str(e)) is not None:
                    raise
            return count_matches(run, compiled, events(), ranges)
    finally:
        run.close()


def spark_write(
    compiled: Plan,
    logs: list[str],
    output: str,
    output_format: str = "parquet",
    *,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    type_column: str | None = None,
    times: str | contract.TimeOptions | None = None,
    ranges: int | None = None,
    log_format: str | None = None,
    mode: str = "errorifexists",
    shape: str = "long",
    variables=(),
) -> int:
    """Have Spark write the long shape of local mode (``OutputSpec.columns``) as a
    ``parquet``, ``csv`` (vars joined with ``VARS_SEPARATOR``) or ``json`` directory,
    ordered by (match, position) (``shaped``, shared with ``cer_cli.spark.match``). ``mode``
    is Spark's save mode. ``shape="wide"`` writes the wide shape instead (its
    ``variables`` are ``query.scope.wide_variables``'s). Returns the match count."""
    output_format = "json" if output_format == "jsonl" else output_format
    if output_format not in WRITE_FORMATS:
        raise SparkError(f"Spark cannot write {output_format!r}",
                         ["formats: " + ", ".join(WRITE_FORMATS)], input_error=True)
    spark = spark_session(master, conf)
    run = Run(spark)
    ev = None
    try:
        with _failures(run, compiled, lambda: ev, ranges, what=f"cannot write {output}: "):
            ev = event_frame(run, _opened(run, logs, type_column, times, log_format))
            _check_time_order(run, compiled, lambda: ev, ranges)
            found = find_matches(run, compiled, ev, ranges)
            return write_directory(run, found, ev, output_spec(ev, shape, variables), output,
                                   output_format, mode)
    finally:
        run.close()
