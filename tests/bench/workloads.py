"""The benchmark workloads: CEQL text for `cer`, the same query as CORE must be given, and
the atomic predicates the polars "limit" baseline evaluates.

Groups (``Workload.group``):

* ``Pn`` — CORE App. D on the stock log: ``SELL; BUY; BUY`` repeated n times (n = 3, 6, 9,
  12, 24), the i-th event bound to ``x<i>`` with ``name`` = T<i> (INTC, RIMM, QQQ, IPIX, AMAT,
  CSCO, YHOO, DELL, ORCL, MSFT, INTC, RIMM, then again), ``WITHIN 10000 [stock_time]``.
* ``Pn'`` — the same plus a last event that never matches (``name = 'NotExists'``): no output,
  so it measures evaluation alone.
* ``window`` — P'3 with windows T, 2T, 3T, 4T (T = 10000).
* ``coreQ`` — CORE App. G Q1–Q7 on the stock log (OR, iteration, PARTITION BY, CONSUME BY),
  ``WITHIN 30000 [stock_time]``.
* ``uniformP3`` — ``A ; B ; C WITHIN 10 [time]`` on the uniform A–D log (the 10x target).
* ``foundations`` — Q1–Q6 of "Foundations of CEP" (Table 1) on the uniform log, with the paper's
  consumption policy (``CONSUME BY ANY``: without it the outputs grow without bound).
* ``stress`` — Foundations Q1/Q2 (no window, no consumption) on the stress streams.

Translation to CORE (``core_text``): the attribute window is strict in CORE, so ``WITHIN n
[attr]`` becomes ``n + 1`` (integer times); a query without WITHIN gets ``WITHIN <events + 1>
[time]`` because CORE applies a hidden 1-second window otherwise; strategies are not used (CORE
ignores them), FROM is always given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl

from tests.bench.generators import CORE_NAMES, STOCK_T

N_VALUES = (3, 6, 9, 12, 24)
WINDOW_FACTORS = (1, 2, 3, 4)
STRESS_LENGTHS = tuple(range(200, 2001, 200))
UNIFORM_WINDOW = 10
CORE_Q_WINDOW = 30_000


@dataclass(frozen=True)
class Workload:
    name: str
    group: str
    log: str  # "stocks", "uniform" or "stress:Q1:200"
    stream: str  # the stream name FROM uses; logs are passed as NAME=path
    cer: str  # the query as `cer` reads it
    atoms: tuple[pl.Expr, ...] = field(default=(), compare=False)  # for the polars baseline
    x: float | None = None  # n, window factor or stream length (plots)
    core_ok: bool = True  # CORE can run it (same matches expected)
    note: str = ""

    def core_text(self, n_events: int) -> str:
        """The query as CORE must be given to compute the same matches."""
        text = re.sub(r"^SELECT\s+(ALL|ANY|NEXT|LAST|MAX|STRICT)\s+", "SELECT ", self.cer)

        def strict(m: re.Match) -> str:
            return f"WITHIN {int(m.group(1)) + 1} [{m.group(2)}]"

        text, k = re.subn(r"WITHIN\s+(\d+)\s*\[\s*(\w+)\s*\]", strict, text)
        if k == 0 and "WITHIN" not in text.upper():
            # No window in cer = no window; CORE would use 1 s of arrival time.
            window = f"WITHIN {n_events + 1} [time]"
            if "CONSUME BY" in text:
                text = text.replace("CONSUME BY", window + "\nCONSUME BY")
            else:
                text = text.rstrip() + "\n" + window
        return text

    @property
    def columns(self) -> list[str]:
        """The log columns the query reads (for the polars baseline)."""
        cols = {"type"}
        for e in self.atoms:
            cols |= set(e.meta.root_names())
        for m in re.finditer(r"WITHIN\s+\d+\s*\[\s*(\w+)\s*\]", self.cer):
            cols.add(m.group(1))
        for m in re.finditer(r"PARTITION BY\s+(.*)", self.cer):
            cols |= set(re.findall(r"\w+", m.group(1)))
        return sorted(cols)


def _t(*types: str) -> pl.Expr:
    e = pl.col("type") == types[0]
    for t in types[1:]:
        e = e | (pl.col("type") == t)
    return e


def _seq_types(n: int) -> list[str]:
    return ["SELL" if i % 3 == 0 else "BUY" for i in range(n)]


def _names(n: int) -> list[str]:
    return [CORE_NAMES[i % len(CORE_NAMES)] for i in range(n)]


def p_n(n: int, no_output: bool = False, window: int = STOCK_T) -> str:
    types, names = _seq_types(n), _names(n)
    seq = [f"{t} AS x{i + 1}" for i, t in enumerate(types)]
    filt = [f"x{i + 1}[name = '{nm}']" for i, nm in enumerate(names)]
    if no_output:
        seq.append("BUY AS ne")
        filt.append("ne[name = 'NotExists']")
    lines = [
        "SELECT * FROM S",
        "WHERE (" + " ; ".join(seq) + ")",
        "FILTER " + "\n   AND ".join(filt),
        f"WITHIN {window} [stock_time]",
    ]
    return "\n".join(lines)


def _p_atoms(n: int, no_output: bool = False) -> tuple[pl.Expr, ...]:
    atoms = [
        _t(t) & (pl.col("name") == nm) for t, nm in zip(_seq_types(n), _names(n), strict=True)
    ]
    if no_output:
        atoms.append(_t("BUY") & (pl.col("name") == "NotExists"))
    return tuple(atoms)


_Q_NAMES = {"msft": "MSFT", "oracle": "ORCL", "csco": "CSCO", "amat": "AMAT"}
_Q_PRICE = "   AND msft[price > 26.0] AND oracle[price > 11.14] AND amat[price >= 18.92]\n"


def core_q(i: int) -> str:
    mid = "BUY" if i in (1, 2, 3) else "(BUY OR SELL)"
    names = "FILTER " + " AND ".join(f"{v}[name = '{n}']" for v, n in _Q_NAMES.items()) + "\n"
    if i == 7:
        return (
            "SELECT * FROM S\n"
            "WHERE (SELL AS msft ; ((BUY OR SELL) AS qqq)+ ; SELL AS amat)\n"
            "FILTER msft[name = 'MSFT'] AND qqq[name = 'QQQ'] AND qqq[volume = 4000]"
            " AND amat[name = 'AMAT']\n"
            f"WITHIN {CORE_Q_WINDOW} [stock_time]"
        )
    text = (
        "SELECT * FROM S\n"
        f"WHERE (SELL AS msft ; {mid} AS oracle ; {mid} AS csco ; SELL AS amat)\n" + names
    )
    if i in (2, 5):
        text += _Q_PRICE
    if i in (3, 6):
        text += "PARTITION BY [volume]\n"
    text += f"WITHIN {CORE_Q_WINDOW} [stock_time]"
    if i == 3:
        text += "\nCONSUME BY ANY"
    return text


def _core_q_atoms(i: int) -> tuple[pl.Expr, ...]:
    if i == 7:
        return (
            _t("SELL") & (pl.col("name") == "MSFT"),
            _t("BUY", "SELL") & (pl.col("name") == "QQQ") & (pl.col("volume") == 4000),
            _t("SELL") & (pl.col("name") == "AMAT"),
        )
    mid = ("BUY",) if i in (1, 2, 3) else ("BUY", "SELL")
    price = i in (2, 5)
    return (
        _t("SELL") & (pl.col("name") == "MSFT") & ((pl.col("price") > 26.0) if price else True),
        _t(*mid) & (pl.col("name") == "ORCL") & ((pl.col("price") > 11.14) if price else True),
        _t(*mid) & (pl.col("name") == "CSCO"),
        _t("SELL") & (pl.col("name") == "AMAT") & ((pl.col("price") >= 18.92) if price else True),
    )


FOUNDATIONS = {
    "Q1": "A AS x ; B AS y ; C AS z",
    "Q2": "A AS x ; B AS y ; C AS z ; D AS w",
    "Q3": "((A AS x OR B AS y) OR C AS z) ; D AS w",
    "Q4": "(A AS x)+ ; (B AS y)",
    "Q5": "(A AS x)+ ; (B AS y)+ ; C AS z",
    "Q6": "((A AS x)+ ; (B AS y))+ ; C AS z",
}
_F_TYPES = {"Q1": "ABC", "Q2": "ABCD", "Q3": "ABCD", "Q4": "AB", "Q5": "ABC", "Q6": "ABC"}


def foundations(q: str, consume: bool = True) -> str:
    text = f"SELECT * FROM U\nWHERE {FOUNDATIONS[q]}"
    return text + ("\nCONSUME BY ANY" if consume else "")


def all_workloads(stress_lengths=STRESS_LENGTHS) -> list[Workload]:
    w: list[Workload] = []
    for n in N_VALUES:
        w.append(Workload(f"P{n}", "Pn", "stocks", "S", p_n(n), _p_atoms(n), x=n))
    for n in N_VALUES:
        w.append(Workload(f"P'{n}", "Pn'", "stocks", "S", p_n(n, True), _p_atoms(n, True), x=n))
    for f in WINDOW_FACTORS:
        w.append(
            Workload(
                f"P'3 {f}T", "window", "stocks", "S", p_n(3, True, f * STOCK_T),
                _p_atoms(3, True), x=f,
            )
        )
    for i in range(1, 8):
        note = "partitions: CORE and cer may differ (CORE quirk)" if i in (3, 6) else ""
        w.append(Workload(f"CORE Q{i}", "coreQ", "stocks", "S", core_q(i), _core_q_atoms(i),
                          x=i, note=note))
    w.append(
        Workload(
            "uniform P3", "uniformP3", "uniform", "U",
            f"SELECT * FROM U\nWHERE A ; B ; C\nWITHIN {UNIFORM_WINDOW} [time]",
            (_t("A"), _t("B"), _t("C")),
        )
    )
    for q in FOUNDATIONS:
        w.append(
            Workload(
                f"F-{q}", "foundations", "uniform", "U", foundations(q),
                tuple(_t(c) for c in _F_TYPES[q]), x=int(q[1]),
            )
        )
    for q in ("Q1", "Q2"):
        for n in stress_lengths:
            w.append(
                Workload(
                    f"stress {q} {n}", "stress", f"stress:{q}:{n}", "U",
                    foundations(q, consume=False), tuple(_t(c) for c in _F_TYPES[q]), x=n,
                )
            )
    return w


GROUPS = ("Pn", "Pn'", "window", "coreQ", "uniformP3", "foundations", "stress")
