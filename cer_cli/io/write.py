"""Write streams of matches as JSONL, CSV or Parquet, or as a terminal table, in the long
shape (one row per match x event) or the wide shape (one row per match, ``SHAPES``).

Writers consume an iterator of ``Match`` or of ``MatchBatch`` (the engine's column-wise
batches) and never hold it whole: the table writes one match at a time, JSONL each
``MatchBatch`` column-wise as it arrives (and each ``Match`` on its own), CSV and Parquet
batch by batch, at most ``buffer_rows`` rows at once. Cost: O(reported events)
time, O(buffer_rows) memory on top of the ``EventLookup``. Files are written atomically
(``io.files.open_output``): a temporary file next to the target is renamed over it at the
end, and removed if anything (even Ctrl-C or SIGTERM) interrupts the run; devices, FIFOs and
descriptors are written directly.

The writers only write: the events come from ``io.lookup``, the shapes' frames from
``io.shapes``, the text of values from ``io.encoding``, the files from ``io.files``.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import polars as pl

if TYPE_CHECKING:  # only the table format loads rich (start-up, issue #15)
    from rich.console import Console

from cer_cli.events import POS, ROW, STREAM, TYPE, Match, MatchBatch, as_matches
from cer_cli.io.contract import LogError
from cer_cli.io.encoding import (
    csv_ready,
    encodable,
    json_dumps,
    json_loads,
    jsonl_lines,
    match_record,
    parquet_ready,
    plain_text,
    refuse_for_csv,
    table_cell,
)
from cer_cli.io.files import (
    SequentialStream,
    open_output,
    output_descriptor,
    refuse_input_as_output,
)
from cer_cli.io.lookup import EventLookup
from cer_cli.io.output import VARS_SEPARATOR
from cer_cli.io.shapes import (
    SHAPES,
    empty_frame,
    match_frame,
    match_frames,
    output_spec,
    spec_frames,
)
from cer_cli.io.texts import exact_frame

__all__ = ["OUTPUT_FORMATS", "SHAPES", "EventLookup", "match_frame", "render_table",
           "render_wide_table", "refuse_input_as_output", "write_csv", "write_jsonl", "write_matches", "write_parquet",
           "write_wide_jsonl"]

OUTPUT_FORMATS = ("table", "jsonl", "csv", "parquet")


# --------------------------------------------------------------------------- writers


def write_jsonl(
    matches: Iterable[Match] | Iterable[MatchBatch],
    lookup: EventLookup,
    out: TextIO,
    partition_names: Sequence[str] = (),
) -> int:
    """One JSON object per line; returns the number of matches.

    A ``MatchBatch`` is written column-wise (``jsonl_lines``: the same text as
    ``json.dumps(match_record(...))``, built in polars instead of one dict per event); a
    ``Match`` is written on its own, as it arrives."""
    n = 0
    for item in matches:
        if isinstance(item, MatchBatch):
            if len(item):
                out.write(jsonl_lines(item, lookup, n, partition_names))
                n += len(item)
            continue
        record = match_record(n, item, lookup, partition_names)
        out.write(json_dumps(record) + "\n")
        n += 1
    return n


def write_csv(
    matches: Iterable[Match] | Iterable[MatchBatch], lookup: EventLookup, out: TextIO,
    buffer_rows: int = 10_000, *, shape: str = "long",
    variables: Sequence[tuple[str, bool]] | None = None, partition_names: Sequence[str] = (),
) -> int:
    """One row per (match, event) in the long shape (one with empty event columns for a
    match without reported events), ``vars`` joined with ``|``; one row per match in the
    wide shape, list columns as JSON arrays. Dates and times are written as
    JSONL writes them (``isoformat``, zone kept). Returns rows."""
    total = 0
    for frame in match_frames(matches, lookup, shape, variables, partition_names, buffer_rows):
        if shape == "long":
            frame = frame.with_columns(pl.col("vars").list.join(VARS_SEPARATOR))
        frame = csv_ready(frame)
        if total == 0:
            refuse_for_csv(frame.schema)
        if frame.height:
            out.write(frame.write_csv(include_header=total == 0))
            total += frame.height
    if total == 0:
        out.write(",".join(empty_frame(lookup, shape, variables).columns) + "\n")
    return total


#: Rows per Parquet row group, at most (see ``write_parquet``).
ROW_GROUP_ROWS = 1 << 19
#: Bytes (Arrow, in memory) per Parquet row group, at most: a wide row of a match under
#: ``A+`` holds lists of every event it reports, so rows alone bound nothing.
ROW_GROUP_BYTES = 32 * 2**20


def write_parquet(
    matches: Iterable[Match] | Iterable[MatchBatch], lookup: EventLookup, path: str | Path | Any,
    buffer_rows: int = 50_000, *, shape: str = "long",
    variables: Sequence[tuple[str, bool]] | None = None, partition_names: Sequence[str] = (),
) -> int:
    """Row groups of ``ROW_GROUP_ROWS`` rows or ``ROW_GROUP_BYTES`` bytes, whichever comes
    first, in ``shape``; ``vars`` and the wide shape's variables under ``+`` are lists.
    ``path`` may be a binary stream instead of a path. Returns rows. Large row groups on
    purpose: a Parquet writer keeps every row group's metadata until it writes the footer,
    so small groups make memory grow with the output; the byte bound keeps a group of
    large matches from growing with them."""
    import pyarrow as pa  # only Parquet output needs pyarrow: imported here, not at start-up
    import pyarrow.parquet as pq

    writer: pq.ParquetWriter | None = None
    pending: list[pa.Table] = []
    total = 0
    rows = nbytes = 0  # held in ``pending``

    def flush() -> None:
        if pending:
            writer.write_table(pa.concat_tables(pending))
            pending.clear()

    try:
        for frame in match_frames(matches, lookup, shape, variables, partition_names, buffer_rows):
            if not frame.height:
                continue
            table = parquet_ready(frame).to_arrow()
            if writer is None:
                sink = str(path) if isinstance(path, str | Path) else path
                writer = pq.ParquetWriter(sink, table.schema)
            table = table.cast(writer.schema)
            pending.append(table)
            total += frame.height
            rows += table.num_rows
            nbytes += table.nbytes
            if rows >= ROW_GROUP_ROWS or nbytes >= ROW_GROUP_BYTES:
                flush()
                rows = nbytes = 0
        if writer is None:  # through pyarrow too: polars would write to the descriptor itself,
            # bypassing the stream that names the output in a failure
            empty = parquet_ready(empty_frame(lookup, shape, variables)).to_arrow()
            writer = pq.ParquetWriter(str(path) if isinstance(path, str | Path) else path,
                                      empty.schema)
        flush()
    finally:
        if writer is not None:
            writer.close()
    return total


def write_wide_jsonl(
    matches: Iterable[Match] | Iterable[MatchBatch], lookup: EventLookup, out: TextIO,
    variables: Sequence[tuple[str, bool]] | None = None, partition_names: Sequence[str] = (),
) -> int:
    """The wide shape as JSON lines: one object per match, keyed by the wide columns
    (``partition`` as the object it names). Returns matches."""
    n = 0
    for frame in match_frames(matches, lookup, "wide", variables, partition_names):
        for row in exact_frame(frame).iter_rows(named=True):
            if row["partition"] is not None:
                row["partition"] = json_loads(row["partition"])
            out.write(json_dumps(row) + "\n")
            n += 1
    return n


def render_wide_table(
    matches: Iterable[Match] | Iterable[MatchBatch], lookup: EventLookup, console: Console,
    variables: Sequence[tuple[str, bool]] | None = None, partition_names: Sequence[str] = (),
    started: float | None = None,
) -> int:
    """The wide shape on a terminal: per match a title line, then one table row per variable
    (its position(s), type(s) and non-null attributes), then the summary line."""
    from rich.table import Table

    started = time.perf_counter() if started is None else started
    n = 0
    wanted = output_spec(lookup, "wide", variables, partition_names)
    for spec, frame in spec_frames(matches, lookup, wanted):  # with the variables known
        names = [var for var, _ in spec.variables or ()]
        shown = {var: [(c.name, c.name[len(var) + 1:], c.many) for c in spec.columns()
                       if c.variable == var and c.source not in (POS, STREAM, ROW, TYPE)]
                 for var in names}
        for row in exact_frame(frame).iter_rows(named=True):
            title = f"[bold]match {row['match']}[/]  positions {row['start']}..{row['end']}"
            if row["start_time"] is not None:
                title += f"  time {_cell(row['start_time'])} → {_cell(row['end_time'])}"
            if row["partition"] is not None:
                part = json_loads(row["partition"])
                title += "  " + " ".join(f"{_safe(k)}={_cell(v)}" for k, v in part.items())
            console.print(title)
            n += 1
            if all(row[f"{var}.position"] is None for var in names):
                console.print(NO_EVENTS_LINE)
                console.print()
                continue
            table = Table(show_edge=False, pad_edge=False)
            for col in ("var", "pos", "type", "attributes"):
                table.add_column(col, style="cyan" if col == "var" else None)
            for var in names:
                if row[f"{var}.position"] is None:
                    continue
                attrs = "  ".join(
                    f"{_safe(label)}={_cells(row[name]) if many else _cell(row[name])}"
                    for name, label, many in shown[var]
                    if _has_value(row[name])
                    and (not many or any(_has_value(x) for x in row[name])))
                table.add_row(_safe(var), _cells(row[f"{var}.position"]),
                              _cells(row[f"{var}.type"]), attrs)
            console.print(table)
            console.print()
    elapsed = max(time.perf_counter() - started, 1e-9)
    console.print(
        f"[bold]{n}[/] match{'es' if n != 1 else ''} · {lookup.n_seen:,} events read · "
        f"{lookup.n_seen / elapsed:,.0f} events/s"
    )
    return n


#: The table's line for a match that reports no event (SELECT NONE, NOT(E), a selected
#: variable it does not bind): the match is shown, with nothing under it.
NO_EVENTS_LINE = "[dim](no reported events)[/]"


def _safe(text: str) -> str:
    """Text from the data (a value, a column or stream or type name) as the table prints it
    literally: rich reads ``[...]`` as markup, so a log value ``[/]`` failed the run
    (MarkupError) and ``[red]`` vanished, restyling the rest."""
    from rich.markup import escape

    return escape(text)


def _has_value(v: Any) -> bool:
    """Whether the table shows attribute value ``v``: not a null, nor a float NaN or
    infinity, which JSON writes as null (``encoding.json_value``). The long table leaves
    them out through ``match_record``; the wide one, which reads the frame's values, printed
    a NaN as ``v=∅`` where the long one left it out, as it leaves out a null."""
    return plain_text(v) is not None


def _cell(v: Any) -> str:
    """A value in the table (``table_cell``: null as ∅), printed literally."""
    return _safe(table_cell(v))


def _cells(v: Any) -> str:
    """A cell of the wide table: a list (a variable under ``+``) as ``[a, b]``."""
    if isinstance(v, list):
        return _safe("[" + ", ".join(map(table_cell, v)) + "]")
    return _cell(v)


def render_table(
    matches: Iterable[Match] | Iterable[MatchBatch],
    lookup: EventLookup,
    console: Console,
    partition_names: Sequence[str] = (),
    started: float | None = None,
) -> int:
    """Print each match as a small table as it arrives, then a summary line."""
    from rich.table import Table

    started = time.perf_counter() if started is None else started
    n = 0
    for n, match in enumerate(as_matches(matches), start=1):
        rec = match_record(n - 1, match, lookup, partition_names)
        title = f"[bold]match {n - 1}[/]  positions {match.start}..{match.end}"
        if rec["start_time"] is not None:
            title += f"  time {rec['start_time']} → {rec['end_time']}"
        if rec["partition"]:
            title += "  " + " ".join(f"{_safe(k)}={_cell(v)}"
                                     for k, v in rec["partition"].items())
        console.print(title)
        if not rec["events"]:
            console.print(NO_EVENTS_LINE)
            console.print()
            continue
        table = Table(show_edge=False, pad_edge=False)
        for col in ("pos", "stream", "type", "vars", "attributes"):
            table.add_column(col, style="cyan" if col == "vars" else None)
        for ev in rec["events"]:
            attrs = "  ".join(f"{_safe(k)}={_cell(v)}" for k, v in ev["attrs"].items()
                              if v is not None)
            table.add_row(str(ev["position"]), _safe(ev["stream"]), _safe(ev["type"]),
                          _safe(",".join(ev["vars"])), attrs)
        console.print(table)
        console.print()
    elapsed = max(time.perf_counter() - started, 1e-9)
    rate = lookup.n_seen / elapsed
    console.print(
        f"[bold]{n}[/] match{'es' if n != 1 else ''} · {lookup.n_seen:,} events read · "
        f"{rate:,.0f} events/s"
    )
    return n


def write_matches(
    matches: Iterable[Match] | Iterable[MatchBatch],
    lookup: EventLookup,
    fmt: str,
    output: str | Path | None = None,
    *,
    console: Console | None = None,
    stdout: TextIO | None = None,
    partition_names: Sequence[str] = (),
    started: float | None = None,
    shape: str = "long",
    variables: Sequence[tuple[str, bool]] | None = None,
) -> int:
    """Write ``matches`` in ``fmt`` to ``output`` (a file, through ``open_output``) or to
    standard output (``None``, ``-`` or ``/dev/stdout``), in ``shape`` (``SHAPES``; ``variables`` are the
    wide shape's ``(name, many)``, see ``match_frames``).

    ``table`` always goes to ``console`` (an ``output`` with it is refused, not ignored);
    ``parquet`` needs a file. A failure to write (disk full, a failed rename) raises
    ``OutputError``; on standard output, a reader that left raises ``ReaderGone``. Returns
    the number of matches for jsonl/table and of rows for csv/parquet.
    """
    if fmt not in OUTPUT_FORMATS:
        raise LogError(f"unknown output format {fmt!r}", ["formats: " + ", ".join(OUTPUT_FORMATS)])
    if shape not in SHAPES:
        raise LogError(f"unknown shape {shape!r}", ["shapes: " + ", ".join(SHAPES)])
    wide = shape == "wide"
    shaped = {"shape": shape, "variables": variables, "partition_names": partition_names}
    to_stdout = output is None or str(output) == "-" or output_descriptor(output) == 1
    if fmt == "table":
        if not to_stdout:
            raise LogError("the table format is for the terminal and cannot be written to a file",
                           ["use --format jsonl, csv or parquet with -o"])
        if console is None:
            from rich.console import Console

            console = Console()
        encodable(console.file, fmt)
        if wide:
            return render_wide_table(matches, lookup, console, variables, partition_names, started)
        return render_table(matches, lookup, console, partition_names, started)
    if fmt == "parquet" and to_stdout:
        raise LogError("parquet output needs a file", ["give an output path (-o FILE)"])
    if to_stdout:
        out = encodable(stdout or sys.stdout, fmt)
        n = _write_text(matches, lookup, fmt, out, shaped)
        out.flush()
        return n
    with open_output(output) as raw:  # type: ignore[arg-type]
        if fmt == "parquet":
            return write_parquet(matches, lookup, raw if raw.seekable() else SequentialStream(raw),
                                 **shaped)
        with io.TextIOWrapper(raw, encoding="utf-8", newline="") as f:
            return _write_text(matches, lookup, fmt, f, shaped)


def _write_text(matches, lookup: EventLookup, fmt: str, out: TextIO, shaped: dict) -> int:
    if fmt == "jsonl" and shaped["shape"] == "wide":
        return write_wide_jsonl(matches, lookup, out, shaped["variables"], shaped["partition_names"])
    if fmt == "jsonl":
        return write_jsonl(matches, lookup, out, shaped["partition_names"])
    return write_csv(matches, lookup, out, **shaped)
