"""Rewrite passes that bring a formula into the shape the CEA construction needs.

Each pass is a function ``formula -> formula`` (or ``None``: the formula can never match)
in its own module, applied in the order of ``RULES`` (the sqlglot-optimizer layout), so
``cer explain`` can show the formula after every pass that changed it. Passes marked
``query_level`` take and return the whole query (they may change PARTITION BY, and
``relax_correlation`` also returns post-filters for the engine):

0a. ``equality_to_partition`` — equalities tying every event of a match become PARTITION BY;
0b. ``relax_correlation`` — other predicates between events leave the pattern: equalities
    in the PCEA fragment become hash-join keys (``compiler/pcea.py``, planned once the
    passes are done), the rest post-filters;
1. ``split_filters`` — compound predicates mixing variables become separate filters;
2. ``make_safe`` — Theorem 1: drop sequences that define a variable twice;
3. ``lift_outer_filters`` — Theorem 2 / R2: filters on outer variables move to their binder;
4. ``lp_normal_form`` — R1: filters move down onto atoms;
5. ``simplify`` — constants, FALSE branches, merged filter chains.

Cost: linear for the common case; ``make_safe`` and ``lift_outer_filters`` may grow the
formula exponentially, in which case a warning is emitted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from cer_cli.compiler.rewrite.equality_to_partition import equality_to_partition
from cer_cli.compiler.rewrite.lift_outer_filters import lift_outer_filters
from cer_cli.compiler.rewrite.lp_normal_form import lp_normal_form
from cer_cli.compiler.rewrite.make_safe import make_safe
from cer_cli.compiler.rewrite.relax_correlation import relax_correlation
from cer_cli.compiler.rewrite.scope import size
from cer_cli.compiler.rewrite.simplify import simplify
from cer_cli.compiler.rewrite.split_filters import split_filters
from cer_cli.query import ast

Pass = Callable[[ast.Formula], "ast.Formula | None"]

RULES: tuple[Pass, ...] = (equality_to_partition, relax_correlation, split_filters, make_safe,
                           lift_outer_filters, lp_normal_form, simplify)

#: Rewriting that multiplies the formula's size by more than this triggers a warning.
GROWTH_WARNING = 4


@dataclass(frozen=True)
class PassResult:
    """The formula after one pass (``None``: unsatisfiable) and whether the pass changed it."""

    name: str
    changed: bool
    formula: ast.Formula | None
    #: What a query-level pass changed besides the formula (e.g. "PARTITION BY [id]").
    note: str | None = None


@dataclass(frozen=True)
class RewriteResult:
    """The rewritten query; ``formula`` is None (and ``unsatisfiable`` true) when no stream
    can produce a match, in which case ``query`` keeps the original formula."""

    query: ast.Query
    formula: ast.Formula | None
    passes: tuple[PassResult, ...]
    warnings: tuple[str, ...]
    #: Conjuncts with predicates between events that the automaton does not test
    #: (``cer_cli.compiler.correlation.Site``); empty when the pattern has none left.
    #: The engine tests them on each candidate, unless ``pcea`` joins them.
    post_filters: tuple = ()
    #: The PCEA (``cer_cli.compiler.pcea.PCEA``) that evaluates ``post_filters`` as hash
    #: joins, when they and the query are in its fragment; ``pcea_reason`` says why (not).
    pcea: object | None = None
    pcea_reason: str | None = None

    @property
    def unsatisfiable(self) -> bool:
        return self.formula is None


def rewrite(query: ast.Query, rules: tuple[Pass, ...] = RULES) -> RewriteResult:
    original = query
    formula: ast.Formula | None = query.formula
    passes, warnings, post = [], [], ()
    for rule in rules:
        before = formula
        if getattr(rule, "query_level", False):
            out = rule(replace(query, formula=before))  # type: ignore[arg-type]
            if isinstance(out, tuple):
                out, found = out
                post += found
            note = None
            if out.partition_by != query.partition_by:
                note = "PARTITION BY " + ", ".join("[" + ", ".join(g) + "]" for g in out.partition_by)
            elif isinstance(out, ast.Query) and rule.__name__ == "relax_correlation" and post:
                note = f"{len(post)} predicate(s) between events tested on each candidate"
            query, formula = out, out.formula
            passes.append(PassResult(rule.__name__, formula != before or note is not None,
                                     formula, note))
            continue
        formula = rule(before)  # type: ignore[arg-type]
        passes.append(PassResult(rule.__name__, formula != before, formula))
        if formula is None:
            warnings.append("the pattern can never match (it needs one event in two places "
                            "or a filter that is always false)")
            break
    if size(formula) > GROWTH_WARNING * size(original.formula):
        warnings.append(f"rewriting grew the pattern from {size(original.formula)} to "
                        f"{size(formula)} nodes; its automaton may be large")
    rewritten = replace(query, formula=original.formula) if formula is None else replace(
        query, formula=formula)
    pcea = reason = None
    if post:
        # Equalities in the fragment of the PCEA hash join are joined, not post-filtered:
        # say so where the relaxation removed them (cer explain lists the passes).
        from cer_cli.compiler.pcea import plan_pcea

        pcea, reason = plan_pcea(rewritten, formula, post)
        if pcea is not None:
            passes = [
                replace(p, note=f"{len(post)} equalit{'y' if len(post) == 1 else 'ies'} between"
                        " events joined by the hash join (PCEA), not by the automaton")
                if p.name == "relax_correlation" else p
                for p in passes
            ]
    return RewriteResult(rewritten, formula, tuple(passes), tuple(warnings), tuple(post),
                         pcea, reason)


__all__ = ["RULES", "equality_to_partition", "relax_correlation", "PassResult", "RewriteResult", "rewrite", "split_filters", "make_safe",
           "lift_outer_filters", "lp_normal_form", "simplify"]
