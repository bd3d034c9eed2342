"""Datetimes as text, exactly: ``io.output``'s rule (the text of Python's ``isoformat``) as
polars expressions, carried on to nanoseconds.

A Python ``datetime`` holds microseconds, so a log's nanosecond datetimes (pandas writes
them by default) lost their last three digits wherever a value went through Python (the
table, a partition key, the wide JSON lines): two events 10 ns apart printed the same time,
and two partition keys 10 ns apart were one partition. A zoned one is a clock and a zone
there, and the two instants of the hour that a DST change repeats compared equal: two keys,
one partition. Such values become their text here, in polars, before anything turns them
into Python objects: the same digits as ``isoformat`` (seconds; six digits of microseconds
when they are not zero; the zone's offset), and nine digits when the value has nanoseconds
beyond its microseconds.
"""

from __future__ import annotations

from fractions import Fraction

import polars as pl

from cer_cli.io.output import DATE_TEXT, FRACTION_DIGITS, SECONDS_TEXT

#: digits of a fraction that has nanoseconds beyond its microseconds
NANO_DIGITS = 9


def iso_text(e: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """The text of a date or datetime expression of ``dtype`` whose years have four digits
    (every nanosecond datetime's: 1677-2262); null stays null. A zoned value's clock and
    offset both come from polars' time-zone database: Python's differs on some zones'
    history (Europe/Amsterdam before 1940 is +00:20 there, +00:00 in polars), and a value
    that polars turned into a Python ``datetime`` printed polars' clock with Python's offset,
    an instant 20 minutes off."""
    if dtype == pl.Date:
        return e.dt.strftime(DATE_TEXT)
    zone = getattr(dtype, "time_zone", None)
    wall = e.dt.replace_time_zone(None) if zone else e  # the clock in its zone
    ns = wall.dt.nanosecond()  # of the second
    fraction = (
        pl.when(ns % 1000 != 0).then(pl.lit(".") + ns.cast(pl.String).str.zfill(NANO_DIGITS))
        .when(ns != 0).then(pl.lit(".") + (ns // 1000).cast(pl.String).str.zfill(FRACTION_DIGITS))
        .otherwise(pl.lit(""))
    )
    parts = [wall.dt.strftime(SECONDS_TEXT), fraction]
    if zone:
        offset = e.dt.strftime("%::z")  # +01:00:00; isoformat leaves out zero seconds
        parts.append(pl.when(offset.str.ends_with(":00")).then(offset.str.head(-3))
                     .otherwise(offset))
    return pl.concat_str(parts)


def inexact_in_python(dtype: pl.DataType) -> bool:
    """A datetime that a Python ``datetime`` does not hold as it is (or a list of them): one
    of nanoseconds, or one in a zone — two instants of the hour a DST change repeats have
    one clock there, and Python compares them equal (``fold`` aside), so two such partition
    keys were one partition. A duration of nanoseconds (a ``timedelta`` holds microseconds:
    a latency of 1,500 ns printed as 1e-06 seconds)."""
    if isinstance(dtype, pl.List | pl.Array):
        return inexact_in_python(dtype.inner)
    return (isinstance(dtype, pl.Datetime) and (dtype.time_unit == "ns"
                                                or dtype.time_zone is not None)
            or isinstance(dtype, pl.Duration) and dtype.time_unit == "ns")


def exact_text(e: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """``e`` with its values that Python holds inexactly (``inexact_in_python``; a list's
    items too) as the outputs write them: a datetime its ``iso_text``, a duration its
    seconds (the text rule's number); other values as they are."""
    if isinstance(dtype, pl.Array) and inexact_in_python(dtype):
        return exact_text(e.cast(pl.List(dtype.inner)), pl.List(dtype.inner))
    if isinstance(dtype, pl.List) and inexact_in_python(dtype):
        return e.list.eval(exact_text(pl.element(), dtype.inner))
    if isinstance(dtype, pl.Duration) and inexact_in_python(dtype):
        return e.dt.total_nanoseconds().map_batches(_seconds, return_dtype=pl.Float64)
    return iso_text(e, dtype) if inexact_in_python(dtype) else e


def _seconds(ns: pl.Series) -> pl.Series:
    """Nanoseconds as seconds, the float nearest each (Python's ``int / int``; a float
    division in polars would round twice past 2**53 ns)."""
    return pl.Series(ns.name, [None if v is None else v / 10**9 for v in ns.to_list()],
                     dtype=pl.Float64)


def exact_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with each column that Python would hold inexactly as text (``exact_text``):
    what the writers that go through Python values (``iter_rows``, ``row``) are given."""
    cols = [exact_text(pl.col(c), d).alias(c) for c, d in frame.schema.items()
            if inexact_in_python(d)]
    return frame.with_columns(cols) if cols else frame


def exact_series(s: pl.Series) -> pl.Series:
    """``s`` as ``exact_frame`` gives it."""
    return exact_frame(s.to_frame()).to_series() if inexact_in_python(s.dtype) else s


def from_text(values: pl.Series, dtype: pl.DataType) -> pl.Series:
    """``exact_text``'s values of ``dtype`` back in it: a datetime's text (if one cannot be
    read, an offset with seconds from a zone's history, they all stay text), a duration's
    seconds (the nearest nanosecond: exact below 2**52 ns, 52 days)."""
    if isinstance(dtype, pl.Duration):
        ns = [None if v is None else round(Fraction(v) * 10**9) for v in values.to_list()]
        return pl.Series(values.name, ns, dtype=pl.Int64).cast(dtype)
    zone = getattr(dtype, "time_zone", None)
    fmt = SECONDS_TEXT + "%.f" + ("%:z" if zone else "")
    got = values.str.to_datetime(fmt, time_unit=dtype.time_unit, strict=False,  # type: ignore[attr-defined]
                                 time_zone="UTC" if zone else None)
    if zone:
        got = got.dt.convert_time_zone(zone)
    return got if got.null_count() == values.null_count() else values
