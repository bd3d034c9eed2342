"""The Python API: compile a query once, then run it over event logs or event frames.

``compile_query`` chains the stages — parse → check → plan (rewrite, compile, choose the
executor) — for the CLI, the DataFrame API and library users::

    from cer_cli.api import compile_query, read_events

    log = read_events(["samples/fig1.csv"])
    q = compile_query("SELECT * WHERE T AS x ; H AS y FILTER x[tmp > 40]", schema=log.schema)
    for m in q.run(log.batches()):
        print(m.start, m.end, m.events)      # events: ((position, variables), ...)

``compile_query`` raises ``QueryError`` (with line and column) for any mistake in the query
or any mismatch with the schema; running never re-checks. The result is the query's
``Plan`` (``cer_cli.plan``): ``executor()`` gives a fresh executor with ``run``,
``run_batches`` and ``count``. Reading a log raises ``LogError`` for what it cannot read.
"""

from __future__ import annotations

from cer_cli.events import Match
from cer_cli.io.contract import LogError
from cer_cli.io.read import EventLog, read_events, read_schema
from cer_cli.plan import Plan
from cer_cli.plan.compile import compile_query
from cer_cli.query.errors import QueryError

__all__ = ["Plan", "compile_query", "read_events", "read_schema", "EventLog", "Match",
           "QueryError", "LogError"]
