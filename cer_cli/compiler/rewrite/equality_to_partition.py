"""Equalities between events that tie every event of a match -> ``PARTITION BY`` (query pass).

``[H AS x ; (T AS y FILTER y.id = x.id)+ ; H AS z] FILTER x.id = z.id`` reports only events
that share one ``id``, so it equals the pattern without those equalities evaluated per ``id``:
``… PARTITION BY [id]`` (added after any PARTITION BY groups already written). The conditions
(no ``:``, no ``NOT``, no ``WITHIN n EVENTS``, no ``STRICT``, no ``CONSUME BY PARTITION``,
every event tied, equalities where a match's events decide them) are in
``cer_cli.compiler.correlation.partition_plan``. Cost: linear in the formula per equality.
"""

from __future__ import annotations

from cer_cli.query import ast


def equality_to_partition(query: ast.Query) -> ast.Query:
    from cer_cli.compiler.correlation import equality_to_partition as rule

    return rule(query)


equality_to_partition.query_level = True  # type: ignore[attr-defined]
