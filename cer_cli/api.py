"""The Python API: compile a query once, then run it over event logs or event frames.

The stages meet here — parse → check → plan (rewrite, compile, choose the executor) — so
the CLI, the Spark job and library users share one path::

    from cer_cli.api import compile_query, read_events

    log = read_events(["samples/fig1.csv"])
    q = compile_query("SELECT * WHERE T AS x ; H AS y FILTER x[tmp > 40]", schema=log.schema)
    for m in q.run(log.batches()):
        print(m.start, m.end, m.events)      # events: ((position, variables), ...)

``compile_query`` raises ``QueryError`` (with line and column) for any mistake in the query
or any mismatch with the schema; running never re-checks. The result is the query's
``Plan`` (``cer_cli.plan``): ``engine()`` gives a fresh executor with ``run``,
``run_batches`` and ``count``.
"""

from __future__ import annotations

from cer_cli.events import Match
from cer_cli.io.read import EventLog, read_events, read_schema
from cer_cli.plan import Plan
from cer_cli.plan.compile import compile_query

__all__ = ["CompiledQuery", "compile_query", "read_events", "read_schema", "EventLog", "Match"]

#: A compiled query is its plan.
CompiledQuery = Plan
