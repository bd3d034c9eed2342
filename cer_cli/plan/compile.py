"""A query text to its plan: parse → check → plan, with the text kept for messages.

The one entry for every front end that starts from text: ``cer_cli.api.compile_query``
(the CLI, library users, ``cer_cli.match``) re-exports it, and the Spark DataFrame API,
which may not import ``api`` (it lies above ``spark/``), calls it here.
"""

from __future__ import annotations

from cer_cli.events import Schema
from cer_cli.plan import Plan, plan
from cer_cli.query.checks import check_query
from cer_cli.query.errors import QueryError
from cer_cli.query.parser import parse


def compile_query(text: str, schema: Schema | None = None, filename: str | None = None) -> Plan:
    """Parse, check (against ``schema`` when given) and plan ``text``; a ``QueryError``
    carries the text (and ``filename``) to show where the mistake is."""
    try:
        query = parse(text, filename=filename)
        report = check_query(query, schema)
        return plan(query, schema, report, text, filename)
    except QueryError as e:
        raise e.with_source(text, filename) from None
