"""The Python API: compile a query once, then run it over event logs or event frames.

This is the one place where the stages meet — parse → check → rewrite → compile → engine —
so the CLI, the Spark job and library users share the same path::

    from cer_cli.api import compile_query, read_events

    log = read_events(["samples/fig1.csv"])
    q = compile_query("SELECT * WHERE T AS x ; H AS y FILTER x[tmp > 40]", schema=log.schema)
    for m in q.run(log.batches()):
        print(m.start, m.end, m.events)      # events: ((position, variables), ...)

``compile_query`` raises ``QueryError`` (with line and column) for any mistake in the query
or any mismatch with the schema; running never re-checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import polars as pl

from cer_cli.compiler.cea import CEA
from cer_cli.compiler.construct import compile_formula
from cer_cli.compiler.predicates import Alphabet
from cer_cli.compiler.rewrite import RewriteResult, rewrite
from cer_cli.engine.pcea import HashJoinEngine
from cer_cli.engine.run import Engine, build_engine, cea_projection, post_filter_of
from cer_cli.events import Match, Schema
from cer_cli.io.read import EventLog, read_events, read_schema
from cer_cli.query import ast
from cer_cli.query.checks import CheckReport, check_query
from cer_cli.query.errors import QueryError
from cer_cli.query.parser import parse

__all__ = ["CompiledQuery", "compile_query", "read_events", "read_schema", "EventLog", "Match"]


@dataclass(frozen=True)
class CompiledQuery:
    """A checked query and its automaton; ``run`` may be called any number of times."""

    text: str
    query: ast.Query
    report: CheckReport
    rewritten: RewriteResult
    alphabet: Alphabet
    cea: CEA
    #: The log schema the query was checked against (None without a log); the memory
    #: verdict reads attribute types from it (a range bounds only integers).
    schema: Schema | None = None

    @property
    def post_filter(self):
        """Predicates between events tested on each candidate (None when there are none)."""
        return post_filter_of(self.query, self.rewritten)

    @property
    def correlation_method(self) -> str | None:
        """How predicates between events are evaluated: "partition", "hash join",
        "post-filter", or None."""
        if self.rewritten.pcea is not None:
            return "hash join"
        if self.post_filter is not None:
            return "post-filter"
        if self.rewritten.query.partition_by != self.query.partition_by:
            return "partition"
        return None

    def engine(self, **options) -> Engine | HashJoinEngine:
        """A fresh engine (its own state) for one pass over a stream, chosen by
        ``build_engine``: the hash join (``HashJoinEngine``) for equalities between events
        in the PCEA fragment, else ``Engine``.

        It runs the *rewritten* query: PARTITION BY may have grown a group (equalities between
        events), which matches do not report; and a post-filter may test candidates."""
        return build_engine(self.query, self.rewritten, self.alphabet, self.cea, **options)

    def run(self, frames: pl.DataFrame | Iterable[pl.DataFrame]) -> Iterator[Match]:
        """Matches over one event frame or a sequence of consecutive frames (batches), in
        order of the event that completes them."""
        engine = self.engine()
        if isinstance(frames, pl.DataFrame):
            frames = (frames,)
        for frame in frames:
            yield from engine.run(frame)


def compile_query(text: str, schema: Schema | None = None, filename: str | None = None) -> CompiledQuery:
    """Parse, check (against ``schema`` when given), rewrite and compile ``text``."""
    try:
        query = parse(text, filename=filename)
        report = check_query(query, schema)
        rewritten = rewrite(query)
        alphabet = Alphabet.from_formula(rewritten.formula)
        projection = cea_projection(query, post_filter_of(query, rewritten))
        cea = compile_formula(rewritten.formula, alphabet, projection)
    except QueryError as e:
        raise e.with_source(text, filename) from None
    return CompiledQuery(text, query, report, rewritten, alphabet, cea, schema)
