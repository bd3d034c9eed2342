"""Matches counted per value of a key: which keys a query has, and how they are counted.

``cer match --count --by KEY`` and ``cer_cli.count(..., by=KEY)`` take a KEY that is

* a PARTITION BY key (any name of one of its groups): counted by the engine, without
  enumerating where ``--count`` does not (``engine.driver.run_count_by_partition``);
* a variable's column, as the wide shape names it (``a.carrier``, ``a.type``,
  ``a.log.position``): the matches are enumerated, since each needs its event's value;
  the variable must be reported (SELECT) and bind at most one event per match;
* ``stream``: the streams a match draws from (``Click + Order``), also by enumerating.

A PARTITION BY key named ``stream`` is that key. ``count_keys`` decides (``QueryError``
naming the keys otherwise), ``count_by`` counts (``io.counts`` holds the values and their
text).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import polars as pl

from cer_cli.engine.driver import Progress, run_batches, run_count_by_partition
from cer_cli.events import first_matches
from cer_cli.io.counts import CountKey, by_partition, count_values, tally_partitions
from cer_cli.io.lookup import EventLookup
from cer_cli.io.output import OutputSpec
from cer_cli.options import option
from cer_cli.plan import Plan
from cer_cli.query.errors import QueryError, suggest
from cer_cli.query.scope import wide_variables

#: The key of the streams a match draws from.
STREAM_KEY = "stream"


def count_keys(plan: Plan, names: Sequence[str], columns: Sequence[str]) -> tuple[CountKey, ...]:
    """The keys ``names`` (each once, in order) of ``plan``'s query over a log with the
    attribute columns ``columns`` (``EventLog.columns``); a name that is no key raises a
    ``QueryError`` that lists them."""
    if isinstance(names, str):
        names = [names]
    names = list(dict.fromkeys(names))
    if not names:
        raise QueryError(f"{option('by')} needs at least one key", hints=[_keys_text(plan, columns)])
    return tuple(_key(plan, name, columns) for name in names)


def _key(plan: Plan, name: str, columns: Sequence[str]) -> CountKey:
    if not isinstance(name, str):
        raise TypeError(f"a key is a string, got {name!r}")
    for i, group in enumerate(plan.query.partition_by):
        if name in group:
            return CountKey(name, "partition", source=name, group=i)
    if name == STREAM_KEY:
        return CountKey(name, "stream")
    every = dict(wide_variables(replace(plan.query, select=None)))
    reported = dict(wide_variables(plan.query))
    var, dot, column = name.partition(".")
    if not dot or var not in every:
        hints = [f"did you mean {near}?"] if (near := suggest(name, _names(plan, columns))) else []
        raise QueryError(f"{option('by', name)}: this query has no key {name!r}",
                         hints=hints + [_keys_text(plan, columns)])
    if var not in reported:
        raise QueryError(f"{option('by', name)}: variable {var!r} is not reported (SELECT),"
                         " so its events are not known per match",
                         hints=[f"add {var} to SELECT, or count by another key",
                                _keys_text(plan, columns)])
    if reported[var]:
        raise QueryError(f"{option('by', name)}: variable {var!r} may bind several events in"
                         " one match (under +, or a label used twice), so a match has no one"
                         f" value of {name}",
                         hints=["count by a variable that binds one event, or by a PARTITION"
                                " BY key", _keys_text(plan, columns)])
    spec = OutputSpec("wide", tuple(columns), variables=((var, False),))
    found = {c.name: c for c in spec.columns() if c.variable == var}
    if name not in found:
        near = suggest(name, found)
        raise QueryError(f"{option('by', name)}: the events of {var!r} have no column"
                         f" {column!r}",
                         hints=([f"did you mean {near}?"] if near else [])
                         + [f"{var}'s columns: " + ", ".join(found)])
    return CountKey(name, "event", source=found[name].source, variable=var)


def _names(plan: Plan, columns: Sequence[str]) -> list[str]:
    """Every key, for a did-you-mean."""
    reported = [v for v, many in wide_variables(plan.query) if not many]
    spec = OutputSpec("wide", tuple(columns), variables=tuple((v, False) for v in reported))
    groups = [n for g in plan.query.partition_by for n in g]
    return [*groups, STREAM_KEY, *(c.name for c in spec.columns() if c.variable is not None)]


def _keys_text(plan: Plan, columns: Sequence[str]) -> str:
    """The keys of the query, for a hint."""
    parts = []
    groups = [n for g in plan.query.partition_by for n in g]
    if groups:
        parts.append("PARTITION BY " + ", ".join(groups))
    single = [v for v, many in wide_variables(plan.query) if not many]
    if single:
        example = f"{single[0]}.{columns[0]}" if columns else f"{single[0]}.type"
        parts.append(f"a variable's column ({', '.join(single)}: e.g. {example})")
    parts.append(STREAM_KEY)
    return "keys: " + "; ".join(parts)


def count_by(plan: Plan, keys: Sequence[CountKey], frames: pl.DataFrame | Iterable[pl.DataFrame],
             lookup: EventLookup | None = None, *, open_ends: bool = False,
             limit: int | None = None, progress: Progress | None = None) -> dict[tuple, int]:
    """The number of matches of ``plan`` over ``frames`` per value of ``keys``: from the
    engine's counts per partition for partition keys (no ``limit``), else by enumerating
    the matches (the first ``limit``), whose events ``lookup`` (fed the frames here) finds.
    ``open_ends``: a trailing absence's open matches count too (``--open-absence report``)."""
    executor = plan.executor(open_ends=open_ends)
    if by_partition(keys) and limit is None:
        return tally_partitions(run_count_by_partition(executor, frames, progress), keys)
    if lookup is not None:
        frames = lookup.tap([frames] if isinstance(frames, pl.DataFrame) else frames)
    matches = run_batches(executor, frames, progress)
    return count_values(matches if limit is None else first_matches(matches, limit), lookup,
                        keys)
