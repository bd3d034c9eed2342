"""Seeded, column-wise generators of the benchmark logs (numpy + polars, written as Parquet).

Logs (every one has a ``type`` column, sorted by time, one row per event):

* **stocks** — ``type`` (BUY/SELL), ``id``, ``name`` (100 names: the ten tickers of the
  CORE benchmark queries, 3 % of the events each, then ``S000``..``S089`` sharing the rest),
  ``volume`` (multiples of 100, 100..10,000), ``price`` (a random walk per name),
  ``stock_time`` (integer, strictly increasing, gaps uniform in 1..199: about 100 events per
  10,000 time units, the window ``T`` of the CORE workloads) and ``ts`` (a datetime, one
  millisecond per ``stock_time`` unit, so ``ts`` orders the log like ``stock_time``).
* **uniform** — ``type`` uniform over A, B, C, D and ``time`` = position (integer), so an
  attribute window ``WITHIN n [time]`` spans exactly n + 1 events.
* **stress** — the "Foundations of CEP" stress streams: ``length - 1`` events uniform over
  {A, B, C, D, E} minus the trigger type, then one trigger event (C for Q1, D for Q2).

Run as a script to write them: ``python tests/bench/generators.py --size 1000000 --out DIR``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import polars as pl

#: The names of CORE's App. D stock queries (T1..T12; T13..T24 repeat them).
CORE_NAMES = ["INTC", "RIMM", "QQQ", "IPIX", "AMAT", "CSCO", "YHOO", "DELL", "ORCL", "MSFT",
              "INTC", "RIMM"]
TICKERS = list(dict.fromkeys(CORE_NAMES))  # the 10 distinct ones
TICKER_SHARE = 0.03  # of all events, per ticker
N_OTHER = 90
STOCK_GAP = (1, 200)  # stock_time gap, uniform in [1, 200): mean 100
STOCK_T = 10_000  # the window T of the CORE workloads, in stock_time units (about 100 events)
UNIFORM_TYPES = ["A", "B", "C", "D"]
STRESS_TYPES = ["A", "B", "C", "D", "E"]
STRESS_TRIGGER = {"Q1": "C", "Q2": "D"}
DEFAULT_SIZE = 1_000_000
DEFAULT_SEED = 20220601


def _cat(codes: np.ndarray, labels: list[str]) -> pl.Series:
    """Strings from integer codes, built column-wise."""
    return pl.Series(codes, dtype=pl.UInt32).replace_strict(
        list(range(len(labels))), labels, return_dtype=pl.String
    )


def stocks(n: int = DEFAULT_SIZE, seed: int = DEFAULT_SEED) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    names = TICKERS + [f"S{i:03d}" for i in range(N_OTHER)]
    weights = np.array(
        [TICKER_SHARE] * len(TICKERS) + [(1 - TICKER_SHARE * len(TICKERS)) / N_OTHER] * N_OTHER
    )
    name_codes = rng.choice(len(names), size=n, p=weights / weights.sum())
    type_codes = rng.integers(0, 2, size=n)  # 0 BUY, 1 SELL
    volume = rng.integers(1, 101, size=n, dtype=np.int64) * 100
    # Random walk per name: the log-return of each event accumulates within its name.
    start = rng.uniform(5, 150, size=len(names))
    steps = rng.normal(0.0, 0.002, size=n)
    df = pl.DataFrame({"code": name_codes.astype(np.int64), "step": steps})
    walk = df.select(pl.col("step").cum_sum().over("code")).to_series().to_numpy()
    price = np.round(start[name_codes] * np.exp(walk), 2)
    stock_time = np.cumsum(rng.integers(*STOCK_GAP, size=n, dtype=np.int64))
    base = np.datetime64("2022-06-01T09:30:00", "ms")
    return pl.DataFrame(
        {
            "type": _cat(type_codes, ["BUY", "SELL"]),
            "id": np.arange(n, dtype=np.int64),
            "name": _cat(name_codes, names),
            "volume": volume,
            "price": price,
            "stock_time": stock_time,
            "ts": pl.Series(base + stock_time.astype("timedelta64[ms]")).cast(pl.Datetime("ms")),
        }
    )


def uniform(n: int = DEFAULT_SIZE, seed: int = DEFAULT_SEED) -> pl.DataFrame:
    rng = np.random.default_rng(seed + 1)
    codes = rng.integers(0, len(UNIFORM_TYPES), size=n)
    return pl.DataFrame(
        {"type": _cat(codes, UNIFORM_TYPES), "time": np.arange(n, dtype=np.int64)}
    )


def stress(query: str, length: int, seed: int = DEFAULT_SEED) -> pl.DataFrame:
    """``length - 1`` random events over {A..E} minus the trigger, then the trigger."""
    trigger = STRESS_TRIGGER[query]
    others = [t for t in STRESS_TYPES if t != trigger]
    rng = np.random.default_rng(seed + length + (0 if query == "Q1" else 7))
    codes = rng.integers(0, len(others), size=length - 1)
    types = [others[c] for c in codes] + [trigger]
    return pl.DataFrame({"type": types, "time": np.arange(length, dtype=np.int64)})


def stress_expected(query: str, df: pl.DataFrame) -> int:
    """Exact number of matches of the stress query (every match ends at the trigger)."""
    types = df["type"].to_list()[:-1]
    if query == "Q1":  # A ; B ; C: pairs A before B
        a = pairs = 0
        for t in types:
            if t == "A":
                a += 1
            elif t == "B":
                pairs += a
        return pairs
    a = ab = abc = 0  # A ; B ; C ; D
    for t in types:
        if t == "A":
            a += 1
        elif t == "B":
            ab += a
        elif t == "C":
            abc += ab
    return abc


def write(df: pl.DataFrame, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    df.write_parquet(tmp)
    tmp.replace(path)
    return path


def ensure(kind: str, out: Path, n: int, seed: int = DEFAULT_SEED) -> Path:
    """Write the log ``kind`` (stocks/uniform) of ``n`` events under ``out`` unless present."""
    path = out / f"{kind}_{n}_{seed}.parquet"
    if not path.exists():
        write({"stocks": stocks, "uniform": uniform}[kind](n, seed), path)
    return path


def ensure_stress(query: str, length: int, out: Path, seed: int = DEFAULT_SEED) -> Path:
    path = out / f"stress_{query}_{length}_{seed}.parquet"
    if not path.exists():
        write(stress(query, length, seed), path)
    return path


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=DEFAULT_SIZE)
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "data")
    a = p.parse_args(argv)
    for kind in ("stocks", "uniform"):
        print(ensure(kind, a.out, a.size, a.seed))
    for q in STRESS_TRIGGER:
        for length in range(200, 2001, 200):
            ensure_stress(q, length, a.out, a.seed)
    print(f"stress streams under {a.out}")


if __name__ == "__main__":
    main()
