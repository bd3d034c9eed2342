"""The `cer` command line: parse options, call one function per command, render.

Exit codes: 0 ok, 1 runtime failure, 2 usage or input error, 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP.
Input mistakes (query or log) are rendered as diagnostics (``cer_cli/diagnostics.py``), never
as tracebacks; an unexpected exception becomes a one-line message unless ``--debug`` asks for
the traceback. A match runs through the driver (``engine/driver.py``).
"""

from __future__ import annotations

import functools
import gc
import sys
from typing import TYPE_CHECKING

import click

from cer_cli import __version__, signals
from cer_cli.diagnostics import Diagnostic, report_warnings, user_errors
from cer_cli.diagnostics import error_line as _error_line
from cer_cli.diagnostics import stderr as _stderr
from cer_cli.diagnostics import stdout as _stdout
from cer_cli.diagnostics import table_console as _table_console
from cer_cli.io.files import OutputError, ReaderGone, output_descriptor
from cer_cli.query.errors import QueryError

if TYPE_CHECKING:
    from cer_cli.io.contract import TimeOptions
    from cer_cli.query.ast import Query
    from cer_cli.query.checks import CheckReport


#: Set by the ``cer`` entry point (``__main__``), which starts with the garbage collector
#: off: start-up allocates ~1M objects that all live to the end (modules, the compiled
#: query), and collecting while importing them costs ~45 ms of a 0.4 s run (issue #15).
#: ``_resume_gc`` turns it back on before any work that grows with the log.
_GC_PAUSED = False


def _resume_gc() -> None:
    """Collect again from here on, leaving what start-up built (``gc.freeze``) out of every
    later collection. Only when the entry point paused it: in-process callers of ``main``
    keep their own collector settings."""
    global _GC_PAUSED
    if _GC_PAUSED:
        _GC_PAUSED = False
        gc.freeze()
        gc.enable()


def read_query_text(path: str | None, expr: str | None) -> tuple[str, str]:
    """The query text and the name to report it under (a path, ``<stdin>`` or ``<expr>``).
    A leading UTF-8 byte-order mark, which some editors write, is not part of the query."""
    if expr is not None:
        return expr.removeprefix("\ufeff"), "<expr>"
    if path is None:
        raise click.UsageError("give a query file, '-' for stdin, or -e/--expr TEXT")
    if path == "-":
        return sys.stdin.read().removeprefix("\ufeff"), "<stdin>"
    try:
        with open(path, encoding="utf-8-sig") as f:
            return f.read(), path
    except (OSError, UnicodeDecodeError) as e:
        raise click.BadParameter(
            f"cannot read query file {path!r}: {e}", param_hint="QUERY"
        ) from None


def parse_and_check(
    text: str,
    filename: str,
    logs: tuple[str, ...],
    type_column: tuple[str, ...] | None,
    times: TimeOptions | None,
) -> tuple[Query, CheckReport]:
    """Parse ``text``, bind it to the logs' schema when logs are given, run the static checks."""
    from cer_cli.query.checks import check_query
    from cer_cli.query.parser import parse

    try:
        query = parse(text, filename=filename)
        schema = None
        if logs:
            from cer_cli.io.read import read_schema

            schema = read_schema(list(logs), type_column=type_column, times=times)
        report = check_query(query, schema)
    except QueryError as e:
        raise e.with_source(text, filename) from None
    return query, report


_debug_option = click.option(
    "--debug", is_flag=True, help="Show the Python traceback of an unexpected failure."
)

#: ``CER_STRICT`` values (case-insensitive) and what they mean; anything else is refused.
_STRICT_VALUES = {"1": True, "true": True, "yes": True, "on": True,
                  "0": False, "false": False, "no": False, "off": False, "": False}


def _strict_setting(ctx, param, value: bool | None) -> bool:
    """``--strict`` / ``--no-strict``, else ``CER_STRICT`` (a value that is not clearly on or
    off is refused, exit 2)."""
    if value is not None:
        return value
    import os

    raw = os.environ.get("CER_STRICT", "")
    if raw.strip().lower() not in _STRICT_VALUES:
        raise click.BadParameter(f"{raw!r} is neither on nor off; use CER_STRICT=1 or"
                                 " CER_STRICT=0", param_hint="CER_STRICT")
    return _STRICT_VALUES[raw.strip().lower()]


_strict_option = click.option(
    "--strict/--no-strict", default=None, callback=_strict_setting,
    help="Treat every warning as an error: print it and exit 2 before the query runs or"
    " anything is written (for scripts and CI jobs) [default: CER_STRICT=1 in the environment,"
    " else off].",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cer")
def cli() -> None:
    """Complex event recognition over event logs.

    Write a pattern query in CEQL, point it at a CSV / Parquet / NDJSON log,
    and get every complex event that matches.

    \b
    Examples:
      cer match queries/phi1.cel samples/fig1.csv     # every match, as a table
      cer match -e "SELL AS s ; BUY AS b WITHIN 10 EVENTS" stocks.csv --count
      cer check -e "T AS x ; H AS y FILTER x[tmp > 40]"
      cer explain queries/phi1.cel --format dot | dot -Tpng > phi1.png
      cer plot queries/phi1.cel samples/fig1.csv -o phi1.html   # a timeline of the matches

    The language is described in docs/language.md; `cer COMMAND --help` explains each command.
    """


_log_options = [
    click.option(
        "--type-column", multiple=True, metavar="[LOG=]COLUMN",
        help="Column holding the event type (default: 'type' if present, else the stream"
        " name). LOG=COLUMN for one log (by stream name); repeatable.",
    ),
    click.option(
        "--time-column", multiple=True, metavar="[LOG=]COLUMN",
        help="Column holding the event time (default: detected per log). LOG=COLUMN for one"
        " log; repeatable.",
    ),
    click.option(
        "--time-unit", multiple=True, metavar="[LOG=]s|ms|us|ns",
        help="A numeric time column counts this unit since the epoch (needed for duration"
        " windows). LOG=UNIT for one log; repeatable.",
    ),
    click.option(
        "--time-format", multiple=True, metavar="[LOG=]FORMAT",
        help="strftime pattern of a text time column that is not ISO 8601 (e.g. '%d/%m/%Y')."
        " LOG=FORMAT for one log; repeatable.",
    ),
]


def _with_log_options(f):
    """Add the log options; the command receives ``type_column`` (the values given) and
    ``times`` (``contract.TimeOptions``: column, unit and format), which the readers
    (local and Spark) take as they are."""

    @functools.wraps(f)
    def wrapper(*args, type_column=(), time_column=(), time_unit=(), time_format=(), **kwargs):
        from cer_cli.io.contract import TimeOptions

        times = TimeOptions(tuple(time_column), tuple(time_unit), tuple(time_format))
        return f(*args, type_column=tuple(type_column) or None,
                 times=times if times != TimeOptions() else None, **kwargs)

    for option in reversed(_log_options):
        wrapper = option(wrapper)
    return wrapper


@cli.command("check")
@click.argument("args", nargs=-1, metavar="QUERY [LOG]...")
@click.option("-e", "--expr", help="Query text given inline instead of a QUERY file.")
@_with_log_options
@_strict_option
@_debug_option
def check_command(
    args: tuple[str, ...],
    expr: str | None,
    type_column: tuple[str, ...] | None,
    times: TimeOptions | None,
    strict: bool,
    debug: bool,
) -> None:
    """Check a query without running it.

    QUERY is a file (or '-' for stdin; or use -e TEXT). Prints 'ok' and the query in
    canonical, fully parenthesised form, then any warnings. With LOG files, also checks that
    event types, streams and attributes exist in them and that values have the right types.

    \b
    Examples:
      cer check -e "T AS x ; H AS y FILTER x[tmp > 40]"
      cer check alert.ceql sensors.csv --time-column ts

    Exit code 0 when the query is fine (also with warnings, unless --strict), 2 when it has
    a mistake (printed with its line, column and a caret under it).
    """
    with user_errors(debug):
        path, logs = (None, args) if expr is not None else (args[0] if args else None, args[1:])
        text, filename = read_query_text(path, expr)
        query, report = parse_and_check(text, filename, logs, type_column, times)
        from cer_cli.query.printer import to_text

        warnings = [Diagnostic(message, span) for message, span in report.warnings]
        if strict:  # nothing on standard output: the query is not fine
            report_warnings(_stderr, warnings, text, filename, strict)
        click.echo("ok")
        click.echo(to_text(query))
        if not strict:
            report_warnings(_stderr, warnings, text, filename, strict)


def _split_args(args: tuple[str, ...], expr: str | None) -> tuple[str | None, tuple[str, ...]]:
    """QUERY [LOG]... or, with -e, just LOG..."""
    if expr is not None:
        return None, args
    return (args[0] if args else None), args[1:]


@cli.command("explain")
@click.argument("args", nargs=-1, metavar="QUERY [LOG]...")
@click.option("-e", "--expr", help="Query text given inline instead of a QUERY file.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "dot", "mermaid"]),
    default="text",
    show_default=True,
    help="text for a terminal, json for tools, dot for Graphviz, mermaid for Markdown.",
)
@_with_log_options
@click.option("--jobs", type=click.IntRange(min=1), metavar="N",
              help="Show the runner `cer match --jobs N` would use [default: the machine's cores].")
@click.option("--spark", is_flag=True, help="Also show how `cer match --spark` spreads the query over Spark tasks.")
@_debug_option
def explain_command(
    args: tuple[str, ...],
    expr: str | None,
    fmt: str,
    type_column: tuple[str, ...] | None,
    times: TimeOptions | None,
    jobs: int | None,
    spark: bool,
    debug: bool,
) -> None:
    """Show how a query is compiled and evaluated.

    Prints the parsed query, each rewrite pass that changed it, the atomic predicates,
    the complex event automaton (states, transitions, marks), and the evaluation plan
    (window, partitions, strategy, consumption, limit, and what they cost). Given LOG
    files, also runs the query over them and reports how many deterministic states the
    lazy determinisation explored.

    \b
    Examples:
      cer explain queries/phi1.cel
      cer explain queries/phi1.cel samples/fig1.csv --format json
      cer explain queries/core_q1.cel --format dot | dot -Tpng > q1.png
    """
    from cer_cli.explain import explanation, render

    with user_errors(debug):
        path, logs = _split_args(args, expr)
        text, filename = read_query_text(path, expr)
        compiled, log = _compile(text, filename, logs, type_column, times)
        _resume_gc()  # explaining with logs runs the query over them
        data = explanation(compiled, log, jobs)
        if spark:
            data["plan"]["spark"] = compiled.fanout.describe(None if log is None else log.n_events)
        render(data, fmt, _stdout())


def _compile(text, filename, logs, type_column, times, batch_size=None, warm_up=False,
             count=False):
    """Read the logs' schema (if any), then parse, check and compile the query; with
    ``warm_up``, a large log's compiled kernel starts loading while the log is read;
    ``count``: the run outputs no event, so the schema pass looks only at the attributes
    the query reads (``read_events``'s ``columns``)."""
    from cer_cli.api import compile_query
    from cer_cli.io.read import read_events

    if warm_up and logs:  # after cer's imports: numba's import does not run beside them
        _warm_up(logs)    # (threads importing the same modules can see one half made)
    log = None
    if logs:
        log = read_events(
            list(logs), type_column=type_column, times=times, batch_size=batch_size,
            columns=_read_attributes(text) if count else None,
        )
    compiled = compile_query(text, schema=None if log is None else log.schema, filename=filename)
    return compiled, log


OUTPUT_BY_EXTENSION = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv",
                       ".parquet": "parquet"}
BATCH_ROWS = 262_144


@cli.command("match")
@click.argument("args", nargs=-1, metavar="QUERY LOG...")
@click.option("-e", "--expr", help="Query text given inline instead of a QUERY file.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write matches to this file (format from its extension).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "jsonl", "csv", "parquet"]),
    help="Output format [default: table on a terminal, else jsonl; with -o, from the extension].",
)
@click.option(
    "--shape",
    type=click.Choice(["long", "wide"]),
    default="long",
    show_default=True,
    help="long: one row per match and event; wide: one row per match, columns x.position,"
    " x.price... per variable (lists for variables under +).",
)
@_with_log_options
@click.option("--limit", type=click.IntRange(min=0, max=2**62), help="Stop after N matches in total.")
@click.option("--count", is_flag=True, help="Print only the number of matches.")
@click.option(
    "--by", multiple=True, metavar="KEY",
    help="With --count: a row per value of KEY with its number of matches. KEY is a PARTITION"
    " BY key (counted without enumerating, as --count), a variable's column as the wide shape"
    " names it (a.carrier, a.type) or stream (both enumerate the matches). Repeatable.",
)
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr [default: on a terminal].")
@click.option(
    "--allow-unbounded",
    is_flag=True,
    help="Run a query with predicates between events and no WITHIN window although its cost "
    "and memory grow with the log.",
)
@click.option(
    "--open-absence",
    type=click.Choice(["drop", "report"]),
    default="drop",
    show_default=True,
    help="A trailing absence (φ ; !ψ WITHIN W) whose window outlives the log is unknown: drop"
    " such matches, or report them at the end, with end one past the last position and no"
    " end_time.",
)
@click.option("--jobs", type=click.IntRange(min=1), metavar="N",
              help="Threads of the local pool that runs the query's fan-out (by PARTITION BY"
              " key, or by time ranges under WITHIN) [default: the machine's cores].")
@click.option("--spark", is_flag=True, help="Run on Spark (install cer-cli[spark]): Spark reads, partitions and sorts the logs; every task runs the same compiled query.")
@click.option("--master", help="With --spark: the master URL [default: spark-submit's, spark-defaults', else local[*]].")
@click.option("--spark-conf", "spark_conf", multiple=True, metavar="KEY=VALUE", help="With --spark: a Spark setting (repeatable).")
@click.option("--ranges", type=click.IntRange(min=1), help="With --spark: how many time ranges a windowed query without PARTITION BY is split into.")
@_strict_option
@_debug_option
def match_command(
    args: tuple[str, ...],
    expr: str | None,
    output: str | None,
    fmt: str | None,
    shape: str,
    type_column: tuple[str, ...] | None,
    times: TimeOptions | None,
    limit: int | None,
    count: bool,
    by: tuple[str, ...],
    progress: bool | None,
    allow_unbounded: bool,
    open_absence: str,
    jobs: int | None,
    spark: bool,
    master: str | None,
    spark_conf: tuple[str, ...],
    ranges: int | None,
    strict: bool,
    debug: bool,
) -> None:
    """Find every complex event of a query in event logs.

    QUERY is a query file ('-' for stdin, or -e TEXT). Each LOG is a CSV (UTF-8; separated
    by commas, or by ';', tabs or '|' when its header holds no comma), Parquet or NDJSON
    file, optionally named as NAME=path (the stream name FROM and S>E refer to; default:
    the file stem). Several logs are merged into one stream ordered by time.

    Matches are written as they are found, in order of the event that completes them.

    \b
    Examples:
      cer match queries/phi1.cel samples/fig1.csv
      cer match -e "SELL ; BUY FILTER SELL[price > 100]" stocks.parquet --count
      cer match queries/flights_delayed_thrice.cel samples/flights.parquet --count --by tailnum
      cer match q.cel clicks=clicks.csv orders=orders.parquet -o out.parquet
      cer match --spark --master spark://host:7077 q.cel hdfs:///logs/ -o out.parquet

    -o writes a regular file atomically (a temporary file renamed at the end: an interrupted
    or failed run leaves the old file as it was), keeping its mode and following symlinks
    (not one planted by another user in a shared directory such as /tmp); devices, FIFOs,
    /dev/stdout, /dev/stderr and /dev/fd/N are written directly. -o is refused with --count,
    --format table, or when it names an input (a log or the query file).

    Exit codes: 0 ok (also with no match, or when the reader of standard output stops
    reading), 1 runtime failure (e.g. disk full: any output that cannot be written), 2
    mistake in the query, the logs or the options, 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP (no
    partial output file is left).
    """
    from cer_cli.io.read import LogError

    with user_errors(debug):
        path, logs = _split_args(args, expr)
        if not logs:
            raise click.UsageError("give at least one LOG after the query")
        text, filename = read_query_text(path, expr)
        descriptor = None if output in (None, "-") else output_descriptor(output)
        if descriptor == 1:
            output = "-"  # /dev/stdout is standard output, exactly as -o -
        _check_output(output, fmt, count, path, logs)
        _check_by(by, count, fmt)
        if fmt is None:
            if output is not None and output != "-":
                from pathlib import Path

                fmt = OUTPUT_BY_EXTENSION.get(Path(output).suffix.lower())
                if fmt is None and descriptor is not None:
                    fmt = "jsonl"  # /dev/stderr, /dev/fd/N: as standard output, not a terminal
                if fmt is None:
                    raise LogError(
                        f"cannot tell the output format from {output!r}",
                        ["use --format table|jsonl|csv|parquet, or a .jsonl/.csv/.parquet name"],
                    )
            else:
                fmt = "table" if sys.stdout.isatty() else "jsonl"
        if spark:
            if jobs is not None:
                raise click.UsageError("--jobs is for local runs; on Spark the master's cores"
                                       " run the tasks (--master local[N])")
            if open_absence == "report":
                raise click.UsageError(
                    "--open-absence report is not available with --spark (a task cannot tell"
                    " the end of the whole log); run it locally")
            spark_options = {
                "master": master,
                "conf": _spark_conf(spark_conf),
                "type_column": type_column,
                "times": times,
            }
            _run_spark(text, filename, list(logs), spark_options, ranges, fmt, output, limit,
                       count, allow_unbounded, shape=shape, strict=strict, by=by)
            return
        if master or spark_conf or ranges:
            raise click.UsageError("--master, --spark-conf and --ranges go with --spark")
        compiled, log = _compile(text, filename, logs, type_column, times, BATCH_ROWS,
                                 warm_up=True, count=count and not by)
        if not allow_unbounded:
            _refuse_unbounded(compiled)
        if by:
            _run_count_by(compiled, log, by, fmt, limit, progress,
                          open_ends=open_absence == "report", strict=strict)
            return
        _run_match(compiled, log, fmt, output, limit, count, progress, shape=shape,
                   open_ends=open_absence == "report", strict=strict, jobs=jobs)


def _check_by(by: tuple[str, ...], count: bool, fmt: str | None) -> None:
    """``--by`` goes with ``--count``, and its rows are printed (no parquet)."""
    if by and not count:
        raise click.UsageError("--by counts the matches per key: add --count")
    if by and fmt == "parquet":
        raise click.UsageError("--count --by prints a row per value: use --format table,"
                               " jsonl or csv")


def _warm_up(logs) -> None:
    """A log large enough for the compiled kernel: start loading it now, while the log is
    read (``engine.jit.warm_up_jit``)."""
    from cer_cli.engine.jit import warm_up_jit
    from cer_cli.io.read import estimate_events

    warm_up_jit(estimate_events(list(logs)))


def _check_output(output, fmt, count, query_path, logs) -> None:
    """Refuse (exit 2) an -o that would be ignored (--count, --format table) or would destroy
    an input: a log (also as NAME=path, through a symlink or a hard link) or the query file."""
    if output is None:
        return
    if count:
        raise click.UsageError("-o/--output cannot be combined with --count (which prints only"
                               " the number of matches); drop one of them")
    if fmt == "table" and output != "-":
        raise click.UsageError("--format table is for the terminal and cannot be written with"
                               " -o; use --format jsonl, csv or parquet")
    from cer_cli.io.write import refuse_input_as_output

    inputs = [query_path] if query_path is not None else []
    for spec in logs:  # NAME=path or a path containing '=': both candidates are inputs
        inputs.append(spec)
        if "=" in spec:
            inputs.append(spec.partition("=")[2])
    refuse_input_as_output(output, inputs)


def _spark_conf(pairs: tuple[str, ...]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--spark-conf")
        conf[key] = value
    return conf


def _run_spark(text, filename, logs, options, ranges, fmt, output, limit, count, allow_unbounded,
               shape="long", strict=False, by=()):
    """`cer match --spark`: Spark computes the matches; with -o it also writes them (a
    directory in the output's shape), otherwise (or to a descriptor, device or FIFO) they
    are printed here as in local mode."""
    from cer_cli.api import compile_query
    from cer_cli.io.files import writes_in_place
    from cer_cli.spark.job import spark_schema
    from cer_cli.spark.output import check_output_dir
    from cer_cli.spark.session import unknown_conf_keys

    # Pre-flight, before Spark starts (minutes on a cluster): the output directory, the
    # settings; spark_session checks the master URL and reaches a spark:// master.
    writes = (output not in (None, "-") and not count and limit is None and fmt != "table"
              and not writes_in_place(output))  # a descriptor or device: printed to it here
    target, mode = check_output_dir(output) if writes else (output, None)
    _resume_gc()
    console = functools.cache(_stderr)
    report_warnings(console, [Diagnostic(
        f"--spark-conf {key}: not a Spark setting cer knows (Spark ignores unknown keys)", None,
        ("check its spelling; known prefixes are listed in README.md, section Spark",),
        of_query=False) for key in unknown_conf_keys(options["conf"])], None, None, strict)
    compiled = compile_query(text, spark_schema(logs, columns=_read_attributes(text), **options),
                             filename)
    try:
        _run_compiled_on_spark(compiled, logs, options, ranges, fmt, output, limit, count,
                               allow_unbounded, shape, strict, by, console, writes, target, mode)
    except QueryError as e:  # found while running, by a task (an unordered window attribute)
        raise e.with_source(compiled.text, compiled.filename) from None


def _run_compiled_on_spark(compiled, logs, options, ranges, fmt, output, limit, count,
                           allow_unbounded, shape, strict, by, console, writes, target, mode):
    """``_run_spark`` once the query is compiled against the logs' schema."""
    import itertools

    from cer_cli.io.read import read_events
    from cer_cli.io.write import EventLookup, write_matches
    from cer_cli.spark.job import spark_count, spark_match, spark_write

    if not allow_unbounded:
        _refuse_unbounded(compiled)
    # the log's size is Spark's to know: no memory warning
    _warn_before_run(console, compiled, 0, count, limit, "add WITHIN n EVENTS (at most 2^n"
                     " matches per event) or LIMIT n (n per event), --limit N, or --count to"
                     " only count them", strict, output if writes else None)
    if writes:
        n = spark_write(compiled, logs, target, fmt, ranges=ranges, mode=mode, shape=shape,
                        variables=_wide_variables(compiled, shape) or (), **options)
        _stderr().print(f"{n:,} matches written to {output}/ by Spark")
        return
    if by:
        schema = compiled.schema
        keys = _count_keys(compiled, by, [*schema.all_attributes(), *schema.refused])
    if count and limit is None and not by:
        click.echo(spark_count(compiled, logs, ranges=ranges, **options))
        return
    matches = spark_match(compiled, logs, ranges=ranges, **options)
    if limit is not None:
        matches = itertools.islice(matches, limit)
    if by:  # the matches stream back; only a variable's column or stream needs the log here
        from cer_cli.io.counts import by_partition, count_values, ordered, write_counts

        lookup = None
        if not by_partition(keys):
            log = read_events(logs, type_column=options["type_column"],
                              times=options["times"], batch_size=BATCH_ROWS)
            lookup = EventLookup.for_log(log, *_lookup_bounds(compiled))
            matches = lookup.follow(log.batches(), matches)
        write_counts(ordered(count_values(matches, lookup, keys)), keys, fmt,
                     console=_table_console(fmt))
        return
    if count:
        click.echo(sum(1 for _ in matches))
        return
    # the log read here too, in batches, each as the matches (in order of end) reach it
    log = read_events(logs, type_column=options["type_column"], times=options["times"],
                      batch_size=BATCH_ROWS)
    lookup = EventLookup.for_log(log, *_lookup_bounds(compiled))
    matches = lookup.follow(log.batches(), matches)
    write_matches(matches, lookup, fmt, output, console=_table_console(fmt),
                  partition_names=[g[0] for g in compiled.query.partition_by],
                  shape=shape, variables=_wide_variables(compiled, shape))


def _read_attributes(text: str):
    """The attributes the query reads (``plan.read_attributes``), the only ones whose
    values Spark's schema pass, and a local ``--count``'s, looks at; None when it does not
    parse (compiling says why)."""
    from cer_cli.plan import read_attributes
    from cer_cli.query.parser import parse

    try:
        return read_attributes(parse(text))
    except QueryError:
        return None


def _refuse_unbounded(compiled) -> None:
    """Refuse (exit 2) a run whose cost and memory grow with the log (``Plan.unbounded``)."""
    error = compiled.unbounded()
    if error is not None:
        raise error.with_source(compiled.text, compiled.filename)


def _wide_variables(compiled, shape):
    """The wide shape's variables of the query (``query.scope.wide_variables``)."""
    if shape != "wide":
        return None
    from cer_cli.query.scope import wide_variables

    return wide_variables(compiled.query)


def _run_match(compiled, log, fmt, output, limit, count, progress, shape="long",
               open_ends=False, strict=False, jobs=None) -> None:
    """Run the plan over the log with the driver (``engine.driver``), or with the local
    pool when the plan's runner says so (``Fanout.runner``: ``jobs`` threads), and print the
    count or write the matches; a progress bar on stderr unless ``progress`` says otherwise."""
    import time

    from cer_cli.engine.driver import run_count
    from cer_cli.events import first_matches

    if not count:  # the writers load pyarrow: --count does without them
        from cer_cli.io.write import EventLookup, write_matches

    _resume_gc()
    console = functools.cache(_stderr)  # one console; rich loads only if something is printed
    _warn_before_run(console, compiled, log.n_events, count, limit,
                     "add WITHIN n EVENTS (at most 2^n matches per event) or LIMIT n (n per"
                     " event), --limit N, or --count to only count them", strict, output)
    started = time.perf_counter()
    # By default the bar shows only when matches do not stream to the same terminal.
    to_terminal = not count and output is None and sys.stdout.isatty()
    show = (sys.stderr.isatty() and not to_terminal) if progress is None else progress
    if count:  # no event is output: read only the columns evaluation needs
        log = log.reading(compiled.columns_read)
    lookup = None if count else EventLookup.for_log(log, *_lookup_bounds(compiled))
    runner = compiled.fanout.runner(jobs, log.n_events, open_ends)
    bar = _ProgressBar(console(), log.n_events, limit) if show else None
    from cer_cli.engine import jit

    def compiling() -> None:  # a cold numba cache: the first compiled call compiles
        _error_line(console(), "note: ", "bold cyan", COMPILE_NOTICE)
        if bar is not None:
            bar.compiling()

    jit.compile_notice = compiling
    try:
        if count:
            if limit is None and runner.pool:
                from cer_cli.plan import pool

                n = pool.run_count(compiled, log.batches(), runner.tasks, bar)
            elif limit is None:  # the executor counts: no Match objects
                n = run_count(compiled.executor(open_ends=open_ends), log.batches(), bar)
            else:
                n = sum(len(b) for b in first_matches(
                    _matches(compiled, log, runner, None, bar, open_ends), limit))
            if bar is not None:
                bar.stop()
                bar = None
            sys.set_int_max_str_digits(0)  # exact counts of exponential queries have thousands of digits
            click.echo(n)
        else:
            stream = _matches(compiled, log, runner, lookup, bar, open_ends)
            if limit is not None:
                stream = first_matches(stream, limit)
            names = [g[0] for g in compiled.query.partition_by]
            write_matches(stream, lookup, fmt, output, console=_table_console(fmt),
                          partition_names=names, started=started, shape=shape,
                          variables=_wide_variables(compiled, shape))
    except QueryError as e:  # found while running (an unordered window attribute)
        raise e.with_source(compiled.text, compiled.filename) from None
    finally:
        jit.compile_notice = None
        if bar is not None:
            bar.stop()


#: What a run says when its first compiled call compiles the kernel (``jit.will_compile``):
#: otherwise 13-22 s of CPU (minutes on a loaded machine) would pass with nothing on screen.
COMPILE_NOTICE = ("compiling the matching kernel once, ~20 s (later runs load it from numba's"
                  " cache)")


def _count_keys(compiled, by, columns):
    """``--by``'s keys (``plan.count_by.count_keys``); a mistake shows the query's name."""
    from cer_cli.plan.count_by import count_keys

    try:
        return count_keys(compiled, by, columns)
    except QueryError as e:
        raise e.with_source(compiled.text, compiled.filename) from None


def _run_count_by(compiled, log, by, fmt, limit, progress, open_ends=False,
                  strict=False) -> None:
    """``cer match --count --by KEY``: the matches per value of each KEY
    (``plan.count_by``), printed as ``fmt`` (``io.counts.write_counts``)."""
    from cer_cli.io.counts import by_partition, ordered, write_counts
    from cer_cli.io.lookup import EventLookup
    from cer_cli.plan.count_by import count_by

    keys = _count_keys(compiled, by, log.columns)
    enumerates = limit is not None or not by_partition(keys)
    _resume_gc()
    console = functools.cache(_stderr)
    _warn_before_run(console, compiled, log.n_events, not enumerates, limit,
                     "add WITHIN n EVENTS (at most 2^n matches per event) or LIMIT n (n per"
                     " event), --limit N, or count by a PARTITION BY key (not enumerated)", strict)
    show = sys.stderr.isatty() if progress is None else progress
    bar = _ProgressBar(console(), log.n_events, limit) if show else None
    lookup = EventLookup.for_log(log, *_lookup_bounds(compiled)) if enumerates else None
    try:
        counts = count_by(compiled, keys, log.batches(), lookup, open_ends=open_ends,
                          limit=limit, progress=bar)
    except QueryError as e:  # found while running (an unordered window attribute)
        raise e.with_source(compiled.text, compiled.filename) from None
    finally:
        if bar is not None:
            bar.stop()
    write_counts(ordered(counts), keys, fmt, console=_table_console(fmt))


def _matches(compiled, log, runner, lookup, bar, open_ends):
    """Every match of the log in order: by one driver (the lookup taps the frames it
    reads), or by the local pool, which reads ahead, its matches then following the frames
    into the lookup (``EventLookup.follow``)."""
    if runner.pool:
        from cer_cli.plan import pool

        return pool.run_batches(compiled, log.batches(), runner.tasks, bar,
                                None if lookup is None else lookup.follow)
    from cer_cli.engine.driver import run_batches

    frames = log.batches() if lookup is None else lookup.tap(log.batches())
    return run_batches(compiled.executor(open_ends=open_ends), frames, bar)


def _warn_before_run(console, compiled, n_events: int, count: bool, limit: int | None,
                     growth_hint: str, strict: bool = False, output: str | None = None) -> None:
    """The check's and the rewrite's warnings, then memory and output growth for this run,
    all named as the query (``compiled.filename``); under ``--strict`` they end the command
    (exit 2) before it runs. ``open_output``'s own warning (other hard links to ``-o``)
    comes as the file opens; under ``--strict`` it is looked for here, before the run."""
    warnings = [Diagnostic(message, span) for message, span in compiled.report.warnings]
    warnings += [Diagnostic(message) for message in compiled.rewritten.warnings]
    memory = memory_warning(compiled, n_events, count)
    if memory is not None:
        warnings.append(Diagnostic(memory))
    growth = growth_warning(compiled, count, limit)
    if growth is not None:
        warnings.append(Diagnostic(growth, None, (growth_hint,)))
    if compiled.choice_cost is not None:
        warnings.append(Diagnostic(compiled.choice_cost, None, (
            "add a window (WITHIN 100 EVENTS, WITHIN 10 minutes): each event then chooses"
            " among the matches inside it",)))
    if strict and output not in (None, "-"):
        from cer_cli.io.files import shared_links

        links = shared_links(output)
        if links is not None:
            warnings.append(Diagnostic(links, of_query=False))
    report_warnings(console, warnings, compiled.text, compiled.filename, strict)


class _ProgressBar:
    """The bar on stderr: events read of ``total`` and matches so far (with ``--limit``,
    the matches written: at most ``limit``). Called as the driver's ``progress``."""

    def __init__(self, console, total: int, limit: int | None) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.limit = limit
        self.matches = 0
        self.bar = Progress(
            TextColumn("[bold]{task.fields[stage]}"),
            BarColumn(),
            TextColumn("{task.completed:,}/{task.total:,} events · {task.fields[matches]:,} matches"),
            TimeElapsedColumn(),
            console=console,
            transient=console.is_terminal,  # forced on a pipe: one final line
        )
        self.task = self.bar.add_task("match", total=total, matches=0, stage="matching")
        self.bar.start()

    def compiling(self) -> None:
        """The run's next batch compiles the kernel first (until the next ``__call__``)."""
        self.bar.update(self.task, stage="compiling the matching kernel (once)")

    def __call__(self, events: int, matches: int) -> None:
        self.matches += matches
        shown = self.matches if self.limit is None else min(self.matches, self.limit)
        self.bar.update(self.task, completed=events, matches=shown, stage="matching")

    def stop(self) -> None:
        self.bar.stop()


#: `cer match` warns that memory grows (with the log or with keys) only on logs of at least
#: this many events: below it the growth is harmless, and the bundled samples stay quiet.
MEMORY_WARNING_EVENTS = 100_000


def memory_warning(compiled, n_events: int, count: bool) -> str | None:
    """The plan's memory warning (``Plan.memory_warning``) for logs of at least
    ``MEMORY_WARNING_EVENTS`` events."""
    return None if n_events < MEMORY_WARNING_EVENTS else compiled.memory_warning(n_events, count)


def growth_warning(compiled, count: bool, limit: int | None) -> str | None:
    """The plan's warning of exponentially many matches (``Plan.growth_warning``) when they
    are asked for: not with --count (which counts without enumerating) or --limit."""
    return None if count or limit is not None else compiled.growth_warning


def _lookup_bounds(compiled) -> tuple:
    """``EventLookup.for_log``'s bounds from the plan's ``output_window`` (the events
    window plus the slice the engine is fed; the time horizon; the window per key; whether
    the horizon lags a frame)."""
    from cer_cli.engine.driver import SLICE_ROWS

    w = compiled.output_window
    return (None if w.events is None else w.events + SLICE_ROWS), w.horizon, w.per_key, w.lagged


# --------------------------------------------------------------------------- cer plot


@cli.command("plot")
@click.argument("args", nargs=-1, metavar="QUERY LOG...")
@click.option("-e", "--expr", help="Query text given inline instead of a QUERY file.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The picture: FILE.html, FILE.png or FILE.svg ('-' for stdout, with --format).")
@click.option("--format", "fmt", type=click.Choice(["html", "png", "svg"]),
              help="html (self-contained, hover a match for its details), png or svg"
              " [default: from the extension of -o].")
@click.option("--title", help="Title of the figure [default: the query file and the logs].")
@_with_log_options
@click.option(
    "--allow-unbounded",
    is_flag=True,
    help="Run a query with predicates between events and no WITHIN window although its cost "
    "and memory grow with the log.",
)
@_strict_option
@_debug_option
def plot_command(
    args: tuple[str, ...],
    expr: str | None,
    output: str,
    fmt: str | None,
    title: str | None,
    type_column: tuple[str, ...] | None,
    times: TimeOptions | None,
    allow_unbounded: bool,
    strict: bool,
    debug: bool,
) -> None:
    """Draw the matches of a query: a timeline, the matches per partition, their durations.

    QUERY and LOG are as for `cer match`. The timeline has time on the x-axis (the position
    in the stream when the logs have no time column) and a row per partition (per stream
    without PARTITION BY); each match is a bar from its first to its last event, with a tick
    per event. Beyond 1,000 matches it shows how many matches are in progress per time bin
    instead, and beyond 20 rows it merges the rest into one; the caption says what it left
    out. Needs matplotlib: pip install 'cer-cli[plot]'.

    \b
    Examples:
      cer plot queries/flights_delayed_thrice.cel samples/flights.parquet -o late.html
      cer plot -e "SELL AS s ; BUY AS b WITHIN 10 EVENTS" samples/stocks.csv -o m.png
      cer plot queries/phi1.cel samples/fig1.csv --format svg -o - > phi1.svg

    Exit codes as for `cer match`; the file is written atomically.
    """
    with user_errors(debug):
        path, logs = _split_args(args, expr)
        if not logs:
            raise click.UsageError("give at least one LOG after the query")
        text, filename = read_query_text(path, expr)
        from cer_cli.io.plot import plot_format, require_matplotlib, write_plot

        fmt = plot_format(output, fmt)
        _check_output(output, fmt, False, path, logs)
        require_matplotlib()
        compiled, log = _compile(text, filename, logs, type_column, times, BATCH_ROWS,
                                 warm_up=True)
        if not allow_unbounded:
            _refuse_unbounded(compiled)
        _resume_gc()
        # the plot keeps a sample, but every match is enumerated
        _warn_before_run(functools.cache(_stderr), compiled, log.n_events, False, None,
                         "add WITHIN n EVENTS (at most 2^n matches per event) or LIMIT n (n per"
                         " event)", strict, output)
        if title is None:
            query = filename if expr is None else " ".join(text.split())
            query = query if len(query) <= 80 else query[:79] + "…"
            title = f"{query} over {', '.join(logs)}"
        from cer_cli.io.write import EventLookup

        lookup = EventLookup.for_log(log, *_lookup_bounds(compiled))
        from cer_cli.engine.driver import run_batches

        n = write_plot(run_batches(compiled.executor(), lookup.tap(log.batches())), lookup, output, fmt, title=title,
                       partition_names=[g[0] for g in compiled.query.partition_by])
        if output != "-":
            click.echo(f"{n:,} match{'' if n == 1 else 'es'} plotted to {output}", err=True)


def main(gc_paused: bool = False, program: bool = False) -> None:
    """Entry point: click's own error handling, except that a signal ends the run with one
    line and 128 + its number: Ctrl-C 130, SIGTERM 143, SIGHUP 129 (cer_cli/signals.py; the
    `cer` script installs it before importing this module, this call covers other callers).
    ``gc_paused``: the caller turned the garbage collector off for start-up (``_resume_gc``);
    ``program``: the caller is the ``cer`` process itself (``signals.exit_for``)."""
    global _GC_PAUSED
    _GC_PAUSED = gc_paused and not gc.isenabled()
    previous = signals.install()
    try:
        try:
            rv = cli.main(standalone_mode=False)
            signals.check()
            sys.stdout.flush()  # here: at the interpreter's exit a failure is a traceback
        except ReaderGone:
            sys.exit(0)
        except OutputError as e:
            _error_line(_stderr(), "error: ", "bold red", e.message)
            sys.exit(e.exit_code)
        except signals.Interrupted as e:
            signals.exit_for(e, program)
        except (KeyboardInterrupt, click.exceptions.Abort):
            click.echo("interrupted", err=True)
            sys.exit(130)
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        sys.exit(rv if isinstance(rv, int) else 0)
    finally:
        signals.restore(previous)  # for in-process callers; `cer` keeps its own handlers
