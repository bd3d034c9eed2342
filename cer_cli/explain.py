"""`cer explain`: every step from query text to the automaton the engine runs.

``explanation()`` gathers one JSON-serialisable dict — the parsed query, each rewrite pass
that changed it, the atomic predicates (the alphabet), the CEA, the evaluation plan, and,
when a log is given, what lazy determinisation explored on it. The renderers turn that dict
into text for a terminal (rich), JSON for tools, Graphviz DOT, or a Mermaid diagram.
Keeping one dict as the source means every format shows the same facts.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from cer_cli.compiler.construct import describe
from cer_cli.compiler.predicates import describe_atom
from cer_cli.engine.driver import run_count
from cer_cli.io.read import EventLog
from cer_cli.plan import Plan
from cer_cli.plan.correlation import Method
from cer_cli.query.printer import groups_text, quote_name, shown, to_text

FORMATS = ("text", "json", "dot", "mermaid")


def explanation(compiled: Plan, log: EventLog | None = None,
                jobs: int | None = None) -> dict[str, Any]:
    """The facts `cer explain` shows, as plain data; ``jobs``: `cer match --jobs`'s, for
    the runner (``Fanout.runner``)."""
    q = compiled.query
    out: dict[str, Any] = {
        "query": to_text(q),
        "rewrites": [
            {"pass": p.name, "formula": None if p.formula is None else to_text(p.formula)}
            | ({"note": p.note} if p.note else {})
            for p in compiled.rewritten.passes
            if p.changed
        ],
        "warnings": [m for m, _ in compiled.report.warnings] + list(compiled.rewritten.warnings),
        "atoms": [describe_atom(a) for a in compiled.alphabet.atoms],
        "cea": beside_the_automaton(compiled, describe(compiled.cea, compiled.alphabet)),
        "plan": {
            "select": "*" if q.select is None else [i.var for i in q.select],
            "strategy": q.strategy,
            "streams": list(q.streams) if q.streams is not None else None,
            "partition_by": [list(g) for g in q.partition_by],
            "within": None if q.within is None else to_text(q.within),
            "consume": q.consume,
            "limit": q.limit,
            "engine": compiled.executor().describe(),
            "correlation": correlation_plan(compiled),
            "memory": memory_entry(compiled),
            "runner": compiled.fanout.runner(
                jobs, None if log is None else log.n_events).reason,
        },
    }
    if compiled.output_growth is not None:  # only then: the usual plan stays as it was
        out["plan"]["output_growth"] = compiled.output_growth
    if compiled.choice_cost is not None:
        out["plan"]["choice_cost"] = compiled.choice_cost
    if log is not None:
        executor = compiled.executor()
        matches = run_count(executor, log.batches())
        s = executor.stats
        out["plan"]["time"] = log.time_texts()  # per log: its time column and unit
        out["run"] = {
            "events": s.events,
            "matches": matches,
            "partitions": s.partitions,
            "det_states": s.det_states,
            "det_transitions_computed": s.det_transitions,
            "det_cache_hits": s.det_cache_hits,
            "det_cache_resets": s.det_cache_resets,
            "peak_tecs_nodes": s.peak_live_nodes,
            "tecs_compactions": s.compactions,
        }
    return out


def beside_the_automaton(compiled: Plan, cea: dict[str, Any]) -> dict[str, Any]:
    """``cea`` plus what the engine checks beside it, for the graphs to draw with it (facts
    of the plan only): ``absences``, each ``!ψ`` the automaton does not test — between two
    marked events (``between``: the post-filter's ``AbsenceSite``, from the states after
    φ1's last event to those after φ2's first) or ``trailing`` (from each final state, until
    the window closes) — and, in ``runs_instead``, what the engine runs instead of the CEA:
    the hash join's PCEA (a step per state, an edge per join with its keys) or the
    next-match scan's sequence (an edge per gap: its ``!ψ``, the next step's comparisons)."""
    absences = []
    for site in compiled.post_filter.absences if compiled.post_filter is not None else ():
        left, right = site.bounds
        label = f"!{shown(site.etype)} FILTER {shown(site.predicate)}"
        if site.unary is not None:
            label += " AND " + shown(site.unary).replace("`!ψ`", "ψ")
        absences.append({"kind": "between", "label": label,
                         "from": sorted({t["to"] for t in cea["transitions"] if left in t["marks"]}),
                         "to": sorted({t["to"] for t in cea["transitions"] if right in t["marks"]})})
    q = compiled.query
    if q.trailing is not None:
        absences.append({"kind": "trailing", "from": list(cea["finals"]), "to": [],
                         "label": f"!{to_text(q.trailing)} WITHIN {to_text(q.within)}"})
    out = {**cea, "absences": absences}
    pcea, nm = compiled.rewritten.pcea, compiled.rewritten.next_match
    if Method.HASH_JOIN in compiled.correlation and pcea is not None:
        out["runs_instead"] = {
            "method": Method.HASH_JOIN.title,
            "steps": [s.step.text() for s in pcea.states],
            "edges": [{"from": child, "to": q, "label": pcea.edge_text(child, q)}
                      for q, t in enumerate(pcea.transitions) for child in t.sources],
        }
    elif Method.NEXT_MATCH in compiled.correlation and nm is not None:
        out["runs_instead"] = {  # each gap's !ψ, then the next step's joins
            "method": Method.NEXT_MATCH.title,
            "steps": [s.text() for s in nm.steps],
            "edges": [{"from": k, "to": k + 1, "label": ", ".join(
                [gap.text, *(c.text for c in joins)])}
                for k, (gap, joins) in enumerate(zip(nm.gaps, nm.joins[1:], strict=True))],
        }
    return out


# --------------------------------------------------------------------------- cost and memory


def correlation_plan(compiled: Plan) -> dict[str, Any] | None:
    """The planner's correlation decision (``Plan.correlation``) as data: each method the
    query uses (``steps``: what it evaluates, how, what it costs), then each predicate's
    method (``methods``). ``method``, ``predicates``, ``detail``, ``cost`` and ``bounded``
    sum the steps up (one step: its own)."""
    corr = compiled.correlation
    if not corr:
        return None
    steps = [{"method": s.method.title, "predicates": list(s.predicates), "detail": s.detail,
              "cost": s.cost, "bounded": s.bounded} for s in corr.steps]
    one = len(steps) == 1

    def summed(key: str) -> str:
        return steps[0][key] if one else "; ".join(f"{s['method']}: {s[key]}" for s in steps)

    return {
        "method": " + ".join(s["method"] for s in steps),
        "predicates": [p for s in steps for p in s["predicates"]],
        "detail": summed("detail"),
        "cost": summed("cost"),
        "bounded": all(s["bounded"] for s in steps),
        "steps": steps,
        "methods": [{"predicate": m.predicate, "method": m.label, "cost": m.cost,
                     "reason": m.reason} for m in corr.predicates],
    }


def memory_entry(compiled: Plan) -> dict[str, Any]:
    """What memory grows with (``Plan.memory``, cer_cli/plan/memory/): the ``cer match``
    verdict, and under ``modes`` the ``--count`` one (and a distinct projection's when
    SELECT names attributes), each with the conditions of Theorem 1 / 2."""
    out = compiled.memory("match").as_dict()
    out["modes"] = {"count": compiled.memory("count").as_dict()}
    if any(i.attrs for i in compiled.query.select or ()):
        out["modes"]["distinct"] = compiled.memory("distinct").as_dict()
    return out


# --------------------------------------------------------------------------- renderers


def _mark(marks: list[str]) -> str:
    return "•{" + ", ".join(marks) + "}" if marks else "∘"


def to_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False)


def to_dot(data: dict[str, Any]) -> str:
    cea = data["cea"]
    lines = ["digraph CEA {", "  rankdir=LR;", '  node [shape=circle, fontname="Helvetica"];']
    lines.append('  start [shape=point, label=""];')
    for s in range(cea["states"]):
        shape = "doublecircle" if s in cea["finals"] else "circle"
        lines.append(f'  q{s} [shape={shape}, label="q{s}"];')
    lines.append(f"  start -> q{cea['initial']};")
    for t in cea["transitions"]:
        label = _dot_text(f"{t['guard']} / {_mark(t['marks'])}")
        lines.append(f'  q{t["from"]} -> q{t["to"]} [label="{label}"];')
    for i, a in enumerate(cea.get("absences", ())):
        label = _dot_text(a["label"])
        targets = [f"q{t}" for t in a["to"]]
        if a["kind"] == "trailing":  # the match is reported once its window closes without ψ
            lines.append(f'  closed{i} [shape=box, style=rounded, label="window closed"];')
            targets = [f"closed{i}"]
        for f in a["from"]:
            for t in targets:
                lines.append(f'  q{f} -> {t} [style=dashed, color=red, fontcolor=red,'
                             f' label="{label}"];')
    runs = cea.get("runs_instead")
    if runs is not None:
        lines.append("  subgraph cluster_runs {")
        lines.append(f'    label="{runs["method"]}: the engine runs this"; style=dashed;')
        for i, step in enumerate(runs["steps"]):
            lines.append(f'    p{i} [shape=box, label="{_dot_text(step)}"];')
        for e in runs["edges"]:
            lines.append(f'    p{e["from"]} -> p{e["to"]} [label="{_dot_text(e["label"])}"];')
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _mermaid_text(text: str) -> str:
    return text.replace(":", "꞉").replace(";", "；")


def to_mermaid(data: dict[str, Any]) -> str:
    cea = data["cea"]
    lines = ["stateDiagram-v2", f"  [*] --> q{cea['initial']}"]
    for t in cea["transitions"]:
        label = _mermaid_text(f"{t['guard']} / {_mark(t['marks'])}")
        lines.append(f"  q{t['from']} --> q{t['to']}: {label}")
    for f in cea["finals"]:
        lines.append(f"  q{f} --> [*]")
    for i, a in enumerate(cea.get("absences", ())):  # mermaid's state diagrams draw no dashes
        label = _mermaid_text(a["label"])
        targets = [f"q{t}" for t in a["to"]]
        if a["kind"] == "trailing":
            lines.append(f"  state \"window closed\" as closed{i}")
            targets = [f"closed{i}"]
        for f in a["from"]:
            for t in targets:
                lines.append(f"  q{f} --> {t}: {label}")
    runs = cea.get("runs_instead")
    if runs is not None:
        lines.append(f"  state \"{_mermaid_text(runs['method'])} – the engine runs this\" as runs {{")
        for i, step in enumerate(runs["steps"]):
            lines.append(f"    state \"{_mermaid_text(step)}\" as p{i}")
        for e in runs["edges"]:
            lines.append(f"    p{e['from']} --> p{e['to']}: {_mermaid_text(e['label'])}")
        lines.append("  }")
    return "\n".join(lines) + "\n"


def _memory_lines(mem: dict[str, Any]) -> list[str]:
    """``memory: …`` for `cer match`, then one line per other output mode, each with the
    conditions of Theorem 1 / 2 and, when it keeps more, what this engine keeps."""
    out = []
    for label, m in [("memory", mem)] + [(f"memory ({'--count' if k == 'count' else k})", v)
                                         for k, v in mem.get("modes", {}).items()]:
        out.append(f"{label}: {m['verdict']} — {m['reason']}")
        if m.get("conditions"):
            out.append("  conditions: " + " · ".join(
                f"{c['condition']} {'holds' if c['holds'] else 'fails'}" for c in m["conditions"]))
        if m.get("engine"):
            out.append(f"  this engine: {m['engine']['verdict']} — {m['engine']['reason']}")
    return out


def render_text(data: dict[str, Any], console: Console) -> None:
    """A readable rendering for terminals: one titled block per stage."""
    console.rule("[bold]query", align="left")
    console.print(Text(data["query"]))
    console.rule("[bold]rewrites", align="left")
    if data["rewrites"]:
        for r in data["rewrites"]:
            formula = "never matches" if r["formula"] is None else r["formula"]
            note = f" · {r['note']}" if r.get("note") else ""
            console.print(f"  [cyan]{r['pass']}[/]: {escape(formula + note)}")
    else:
        console.print("none needed")
    for w in data["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(w)}")
    atoms = Table(title="atomic predicates", title_justify="left", show_edge=False)
    atoms.add_column("bit", justify="right")
    atoms.add_column("predicate")
    for i, a in enumerate(data["atoms"]):
        atoms.add_row(str(i), escape(a))  # a name or value [/] is text, not markup
    console.print(atoms)
    cea = data["cea"]
    trans = Table(
        title=f"CEA: {cea['states']} states, initial q{cea['initial']}, final "
        + (", ".join(f"q{f}" for f in cea["finals"]) or "none"),
        title_justify="left",
        show_edge=False,
    )
    for col in ("from", "guard", "mark", "to"):
        trans.add_column(col)
    for t in cea["transitions"]:
        trans.add_row(f"q{t['from']}", escape(t["guard"]), escape(_mark(t["marks"])),
                      f"q{t['to']}")
    console.print(trans)
    plan = data["plan"]
    lines = [
        f"select {plan['select'] if plan['select'] == '*' else ', '.join(plan['select']) or 'NONE'}"
        f" · strategy {plan['strategy']} · consume by {plan['consume']}"
        f" · limit {plan['limit'] if plan['limit'] is not None else 'none'}",
        f"within {plan['within'] or '(no window)'}"
        + (f" · partition by {groups_text(plan['partition_by'], quote_name)}"
           if plan["partition_by"] else ""),
        plan["engine"],
    ]
    corr = plan.get("correlation")
    if corr is not None:
        for step in corr["steps"]:
            lines.append(f"correlation: {step['method']} of " + "; ".join(step["predicates"]))
            lines.append(f"  {step['detail']}")
            lines.append(f"  cost: {step['cost']}")
        for m in corr["methods"]:
            lines.append(f"  {m['predicate']}: {m['method']} — {m['reason']}; cost: {m['cost']}")
    if plan.get("output_growth"):
        lines.append(f"output: exponential — {plan['output_growth']}")
    if plan.get("choice_cost"):
        lines.append(f"cost: grows with the log — {plan['choice_cost']}")
    mem = plan.get("memory")
    if mem is not None:
        lines += _memory_lines(mem)
    if plan.get("runner"):
        lines.append(f"runner: {plan['runner']}")
    if plan.get("spark"):
        lines.append(plan["spark"])
    console.rule("[bold]plan", align="left")
    for line in lines:
        console.print(Text(line))
    for line in data["plan"].get("time", []):
        console.print(Text(f"time: {line}"))
    if "run" in data:
        run = Table(title="run over the log", title_justify="left", show_edge=False)
        run.add_column("measure")
        run.add_column("value", justify="right")
        for k, v in data["run"].items():
            run.add_row(k.replace("_", " "), f"{v:,}")
        console.print(run)


def render(data: dict[str, Any], fmt: str, console: Console) -> None:
    if fmt == "text":
        render_text(data, console)
    elif fmt == "json":
        console.print(to_json(data), markup=False, highlight=False, soft_wrap=True)
    elif fmt == "dot":
        console.print(to_dot(data), markup=False, highlight=False, soft_wrap=True, end="")
    elif fmt == "mermaid":
        console.print(to_mermaid(data), markup=False, highlight=False, soft_wrap=True, end="")
    else:
        raise ValueError(fmt)
