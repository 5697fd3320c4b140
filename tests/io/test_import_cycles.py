"""perfkit.io has no import cycle, counting imports inside functions (DESIGN.md, layering).

The graph is read from the source with :mod:`ast` (every ``import`` / ``from ... import``
statement, wherever it is), so a cycle hidden in a local import is found too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "perfkit"


def _modules() -> dict[str, Path]:
    mods = {}
    for f in PKG.rglob("*.py"):
        parts = list(f.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = f
    return mods


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                name = ".".join(base + ([node.module] if node.module else []))
                targets = [f"{name}.{a.name}" if f"{name}.{a.name}" in mods else name
                           for a in node.names]
            graph[mod].update(t for t in targets if t in mods and t != mod)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
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
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    """:func:`_graph`, read once for the module's tests (it parses every perfkit module)."""
    return _graph()


def test_the_graph_sees_local_imports(graph: dict[str, set[str]]) -> None:
    # the local engine imports msprof-analyze's reader inside load(): that edge must be seen
    # (the parse of a rank names its format's reader through the registry, perfkit.io.readers)
    assert "perfkit.io.ascend.cluster_output" in graph["perfkit.io.engines.local"]
    # detect_paths._single imports ascend_db inside the function (what a path holds: it was
    # perfkit.io.engines.local before the loading was split from the detection)
    assert "perfkit.io.ascend.db" in graph["perfkit.io.detect.paths"]


def test_no_import_cycle_touches_perfkit_io(graph: dict[str, set[str]]) -> None:
    bad = [c for c in _cycles(graph) if any(m.startswith("perfkit.io") for m in c)]
    assert not bad, f"import cycles through perfkit.io: {bad}"


def test_the_two_former_cycles_are_gone(graph: dict[str, set[str]]) -> None:
    assert "perfkit.io.ascend.text" not in graph["perfkit.io.chrome.tables"]
    assert "perfkit.io.engines.local" not in graph["perfkit.io.engines.dask"]


def test_io_does_not_import_analysis_or_ui(graph: dict[str, set[str]]) -> None:
    for mod, targets in graph.items():
        if mod.startswith("perfkit.io"):
            bad = [t for t in targets if t.startswith(("perfkit.analysis", "perfkit.advisor",
                                                       "perfkit.charts", "perfkit.widgets",
                                                       "perfkit.plan"))]
            assert not bad, f"{mod} imports {bad}"
