"""Remove the remaining predicates between events from the pattern (query pass).

The automaton then accepts the *relaxation* (a superset of the matches, with the same
bindings); the removed conjuncts come back as post-filters that the engine tests on each
candidate before SELECT, the strategy, LIMIT and CONSUME BY
(``cer_cli.compiler.correlation``). A predicate whose events a match cannot determine (in
one OR branch whose variables the other branch binds too, or comparing two variables
repeated by the same ``+``) is a QueryError. Cost: linear; the run-time cost is per
candidate, possibly exponentially more candidates than matches.
"""

from __future__ import annotations

from cer_cli.query import ast


def relax_correlation(query: ast.Query):
    from cer_cli.compiler.correlation import relax_correlation as rule

    return rule(query)


relax_correlation.query_level = True  # type: ignore[attr-defined]
