"""Write the small sample logs in samples/ (and, on request, larger generated stock logs).

    python samples/make_samples.py                          # the committed samples
    python samples/make_samples.py --events 1000000 --out /tmp/stocks.parquet

Everything is deterministic (seeded), so rerunning reproduces the committed files.
Cost: linear in the number of generated events.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent

# Figure 1 of "Foundations of Complex Event Processing": 9 sensor events (no time column,
# positions are the order). T events carry the temperature as both `tmp` and `temp` (the
# paper's formulas use both spellings), H events carry `hum`.
FIG1 = [("H", 2, 25), ("T", 0, 45), ("H", 0, 20), ("H", 1, 25), ("T", 1, 40),
        ("T", 0, 42), ("T", 1, 25), ("H", 1, 70), ("H", 0, 18)]  # fmt: skip

# The example stream of Figure 3 of the CORE paper (type, name, price). The figure gives
# no volume or time: `volume` is made up and `ts` is one event every 10 seconds.
CORE_FIG3 = [("SELL", "MSFT", 101), ("SELL", "MSFT", 102), ("SELL", "INTL", 80),
             ("BUY", "INTL", 80), ("SELL", "AMZN", 1900), ("SELL", "INTL", 81),
             ("SELL", "AMZN", 1920)]  # fmt: skip
CORE_VOLUMES = [100, 200, 100, 300, 100, 200, 100]

# Tickers of the CORE benchmarks first, then made-up ones up to 100 names.
TICKERS = ["MSFT", "ORCL", "CSCO", "AMAT", "INTC", "RIMM", "QQQ", "IPIX", "YHOO", "DELL",
           "AMZN", "AAPL", "GOOG", "IBM", "NVDA"]  # fmt: skip


def fig1() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "type": [t for t, _, _ in FIG1],
            "id": [i for _, i, _ in FIG1],
            "tmp": [v if t == "T" else None for t, _, v in FIG1],
            "temp": [v if t == "T" else None for t, _, v in FIG1],
            "hum": [v if t == "H" else None for t, _, v in FIG1],
        }
    )


def core_fig3() -> pl.DataFrame:
    start = dt.datetime(2022, 6, 1, 9, 30)
    return pl.DataFrame(
        {
            "type": [t for t, _, _ in CORE_FIG3],
            "name": [n for _, n, _ in CORE_FIG3],
            "price": [p for _, _, p in CORE_FIG3],
            "volume": CORE_VOLUMES,
            "ts": [start + dt.timedelta(seconds=10 * i) for i in range(len(CORE_FIG3))],
        }
    )


def stocks(n_events: int, n_names: int = 100, seed: int = 13) -> pl.DataFrame:
    """BUY/SELL events: random-walk prices per name, round-lot volumes (four sizes), 0-3 s apart.

    `stock_time` is seconds since the first event (for `WITHIN n [stock_time]`).
    """
    rng = random.Random(seed)
    names = TICKERS + [f"S{i:03d}" for i in range(n_names - len(TICKERS))]
    names = names[:n_names]
    price = {n: rng.uniform(5, 150) for n in names}
    price["AMZN"] = 1900.0
    start = dt.datetime(2022, 6, 1, 9, 30)
    seconds = 0
    rows = []
    for _ in range(n_events):
        seconds += rng.choice((0, 1, 1, 2, 3))
        name = rng.choice(names)
        price[name] = max(1.0, price[name] * (1 + rng.gauss(0, 0.01)))
        rows.append(
            (
                rng.choice(("BUY", "SELL")),
                name,
                round(price[name], 2),
                100 * rng.choice((1, 2, 5, 10)),  # few volumes: PARTITION BY [volume] finds groups
                start + dt.timedelta(seconds=seconds),
                seconds,
            )
        )
    return pl.DataFrame(
        rows,
        schema=["type", "name", "price", "volume", "ts", "stock_time"],
        orient="row",
    )


def write(df: pl.DataFrame, path: Path) -> None:
    if path.suffix == ".parquet":
        df.write_parquet(path)
    elif path.suffix in (".ndjson", ".jsonl"):
        df.write_ndjson(path)
    else:
        df.write_csv(path)
    print(f"wrote {path} ({df.height} events)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, help="generate a stock log of this many events")
    parser.add_argument("--names", type=int, default=100, help="stock names (default 100)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--out", type=Path, help="output file (.csv, .parquet, .ndjson)")
    args = parser.parse_args()
    if args.events is not None:
        write(stocks(args.events, args.names, args.seed), args.out or HERE / "stocks_large.parquet")
        return
    write(fig1(), HERE / "fig1.csv")
    write(core_fig3(), HERE / "core_fig3.csv")
    write(stocks(2000, 100, 13), HERE / "stocks.csv")


if __name__ == "__main__":
    main()
