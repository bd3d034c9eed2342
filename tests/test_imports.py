"""The package's layering (issue #12): no import cycle, and imports only run down the layers
events < query, io < compiler < engine < plan < spark < api, explain < cli.

Every import counts, including those inside functions and ``if TYPE_CHECKING:`` blocks: a
lazy import still couples the modules. Each failure lists every offending import as
file:line."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "cer_cli"

#: Rank of each top-level "folder" (``cer_cli/x.py`` or ``cer_cli/x/...``): a module may
#: import its own folder or a strictly lower rank.
#: ``signals`` (the entry point's signal handling) imports nothing from cer_cli: rank 0.
#: ``frames`` (the DataFrame API) runs queries through ``api``: just above it, below the CLI.
#: ``diagnostics`` (what the CLI prints for a failure, and its exit code) is the CLI's own.
RANK = {"events": 0, "signals": 0, "options": 0, "query": 1, "io": 1, "compiler": 2, "engine": 3, "plan": 4,
        "spark": 5, "api": 6, "explain": 6, "frames": 6.5, "diagnostics": 6.8, "cli": 7,
        "__init__": 8}
#: ``options`` (how a message names an option, per front end) imports nothing from cer_cli.
#: io reads logs and writes matches: it may import only events and options (not the query
#: language), and signals (the reader keeps an ignored SIGINT ignored once polars is
#: imported: ``signals.keep_ignored``).
ONLY = {"io": {"events", "options", "signals", "io"}}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def folder(module: str) -> str:
    """``cer_cli.x`` and ``cer_cli.x.y`` belong to folder x; ``__main__`` is the CLI's entry."""
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else "__init__"
    return "cli" if name == "__main__" else name


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """The cer_cli modules an ``import``/``from … import`` statement loads."""
    if node.level:
        base = module.split(".")
        base = base[: len(base) - node.level + (1 if is_package else 0)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    out = []
    for alias in node.names:  # ``from cer_cli.query import ast`` imports a module
        if f"{target}.{alias.name}" in MODULES:
            out.append(f"{target}.{alias.name}")
        elif target in MODULES:
            out.append(target)
    return out


def imports() -> list[tuple[str, str, str]]:
    """``(importer, imported, "file:line")`` for every import of a cer_cli module."""
    edges = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
                targets = [t if t in MODULES else t.rsplit(".", 1)[0] for t in targets]
            elif isinstance(node, ast.ImportFrom):
                targets = _resolve(module, path.name == "__init__.py", node)
            else:
                continue
            where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
            edges += [(module, t, where) for t in targets if t in MODULES and t != module]
    return edges


def cycles(edges: list[tuple[str, str, str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each a cycle."""
    graph: dict[str, set[str]] = {}
    for a, b, _ in edges:
        graph.setdefault(a, set()).add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _report(title: str, lines: list[str]) -> str:
    return title + ":\n  " + "\n  ".join(lines)


def _cycle_report(edges, comps) -> list[str]:
    lines = []
    for comp in comps:
        inside = set(comp)
        lines.append("cycle among " + ", ".join(comp))
        lines += [f"  {w}: {a} -> {b}" for a, b, w in edges if a in inside and b in inside]
    return lines


def test_every_module_is_ranked():
    assert {folder(m) for m in MODULES} <= set(RANK), set(map(folder, MODULES)) - set(RANK)


def test_no_import_cycle():
    edges = imports()
    comps = cycles(edges)
    assert not comps, _report("import cycles", _cycle_report(edges, comps))


def test_no_import_cycle_inside_a_folder():
    edges = [e for e in imports() if folder(e[0]) == folder(e[1])]
    comps = cycles(edges)
    assert not comps, _report("import cycles inside a folder", _cycle_report(edges, comps))


def test_imports_run_down_the_layers():
    bad = []
    for a, b, where in imports():
        fa, fb = folder(a), folder(b)
        if fa == fb or b == "cer_cli":
            continue  # Python runs cer_cli/__init__ before any submodule anyway
        if fb == "cli":
            bad.append(f"{where}: {a} imports {b} (nothing imports the CLI)")
        elif fa in ONLY and fb not in ONLY[fa]:
            bad.append(f"{where}: {a} imports {b} ({fa} may import only {sorted(ONLY[fa])})")
        elif fa not in RANK or fb not in RANK:
            bad.append(f"{where}: {a} imports {b} (a folder without a rank)")
        elif RANK[fb] >= RANK[fa]:
            bad.append(f"{where}: {a} ({fa}, rank {RANK[fa]}) imports {b} "
                       f"({fb}, rank {RANK[fb]})")
    assert not bad, _report("imports that run up or across the layers", bad)


def test_the_graph_sees_lazy_and_relative_imports():
    """The checker itself: a function-level import, a TYPE_CHECKING import and a relative
    import all become edges (else the layering tests could pass vacuously)."""
    src = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cer_cli.engine import kernel\n"
           "def f():\n    from . import ast\n    import cer_cli.events\n")
    tree = ast.parse(src)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found += _resolve("cer_cli.query.scope", False, node)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names]
    assert sorted(found) == ["cer_cli.engine.kernel", "cer_cli.events", "cer_cli.query.ast"]
    edges = imports()
    assert any(a == "cer_cli.query.checks" and b == "cer_cli.events" for a, b, _ in edges)


def test_cycles_are_found_with_their_imports():
    edges = [("a", "b", "a.py:1"), ("b", "c", "b.py:2"), ("c", "a", "c.py:3"), ("c", "d", "c.py:4")]
    comps = cycles(edges)
    assert comps == [["a", "b", "c"]]
    assert "  c.py:3: c -> a" in _cycle_report(edges, comps) and not cycles(edges[:2])


def private_names(module: str, is_package: bool, tree: ast.Module) -> list[tuple[int, str, str]]:
    """``(line, name, source)`` for every ``_``-prefixed name ``module`` imports from another
    cer_cli module."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        targets = _resolve(module, is_package, node)
        source = targets[0] if targets else node.module or ""
        if source.startswith("cer_cli") and source != module:
            out += [(node.lineno, a.name, source) for a in node.names if a.name.startswith("_")]
    return out


def test_spark_imports_no_private_name_of_another_folder():
    """spark/ runs what io/, plan/ and the engine decide through their public surface: a
    private name it borrows is a rule it relies on without its owner knowing. Its own
    modules meet through public names too (``spark.frames`` borrowed seven of the job's)."""
    bad = [f"{path.relative_to(PACKAGE.parent)}:{line}: {name} from {source}"
           for module, path in MODULES.items() if folder(module) == "spark"
           for line, name, source in private_names(module, path.name == "__init__.py",
                                                    ast.parse(path.read_text(), str(path)))]
    assert not bad, _report("private names imported by spark/", bad)


def test_the_private_import_check_sees_them():
    """The checker itself: private names from other modules are found (lazily and relatively
    imported too), public ones are not."""
    tree = ast.parse("from cer_cli.io.read import _scan, read_events\n"
                     "from cer_cli.spark.run import _number, Run\n"
                     "def f():\n    from ..io import _hidden\n")
    found = private_names("cer_cli.spark.read", False, tree)
    assert [(name, source) for _, name, source in found] == [
        ("_scan", "cer_cli.io.read"), ("_number", "cer_cli.spark.run"), ("_hidden", "cer_cli.io")]
