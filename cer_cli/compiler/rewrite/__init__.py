"""Rewrite passes that bring a formula into the shape the CEA construction needs.

Each pass is a pure function ``formula -> formula`` (or ``None``: the formula can never
match) in its own module, applied in the order of ``RULES`` (the sqlglot-optimizer layout),
so ``cer explain`` can show the formula after every pass that changed it:

1. ``split_filters`` — compound predicates mixing variables become separate filters;
2. ``make_safe`` — Theorem 1: drop sequences that define a variable twice;
3. ``lift_outer_filters`` — Theorem 2 / R2: filters on outer variables move to their binder;
4. ``lp_normal_form`` — R1: filters move down onto atoms;
5. ``simplify`` — constants, FALSE branches, merged filter chains.

Decisions about the whole query (predicates between events become PARTITION BY, hash joins
or post-filters) are the planner's (``cer_cli.plan``), made before these passes run.

Cost: linear for the common case; ``make_safe`` and ``lift_outer_filters`` may grow the
formula exponentially, in which case a warning is emitted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cer_cli.compiler.rewrite.lift_outer_filters import lift_outer_filters
from cer_cli.compiler.rewrite.lp_normal_form import lp_normal_form
from cer_cli.compiler.rewrite.make_safe import make_safe
from cer_cli.compiler.rewrite.simplify import simplify
from cer_cli.compiler.rewrite.split_filters import split_filters
from cer_cli.query import ast
from cer_cli.query.scope import size

Pass = Callable[[ast.Formula], "ast.Formula | None"]

RULES: tuple[Pass, ...] = (split_filters, make_safe, lift_outer_filters, lp_normal_form, simplify)

#: Rewriting that multiplies the formula's size by more than this triggers a warning.
GROWTH_WARNING = 4


@dataclass(frozen=True)
class PassResult:
    """The formula after one pass (``None``: unsatisfiable) and whether the pass changed it."""

    name: str
    changed: bool
    formula: ast.Formula | None
    #: What a planning step changed besides the formula (e.g. "PARTITION BY [id]").
    note: str | None = None


def rewrite(formula: ast.Formula, rules: tuple[Pass, ...] = RULES,
            reference: ast.Formula | None = None,
            ) -> tuple[ast.Formula | None, list[PassResult], list[str]]:
    """Apply ``rules`` in order: the final formula (None: it can never match), one
    ``PassResult`` per pass, and warnings. ``reference`` is the formula the growth warning
    compares with (default: ``formula``)."""
    passes, warnings = [], []
    current: ast.Formula | None = formula
    for rule in rules:
        before = current
        current = rule(before)  # type: ignore[arg-type]
        passes.append(PassResult(rule.__name__, current != before, current))
        if current is None:
            warnings.append("the pattern can never match (it needs one event in two places "
                            "or a filter that is always false)")
            break
    reference = formula if reference is None else reference
    if size(current) > GROWTH_WARNING * size(reference):
        warnings.append(f"rewriting grew the pattern from {size(reference)} to "
                        f"{size(current)} nodes; its automaton may be large")
    return current, passes, warnings


__all__ = ["RULES", "PassResult", "rewrite", "split_filters", "make_safe",
           "lift_outer_filters", "lp_normal_form", "simplify"]
