"""Import layering of the job modules and no import cycle anywhere in perfkit.

Imports are read from the source (including imports inside functions), so a cycle that
only closes at run time is found too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "perfkit"


def _module(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    mod = _module(path)
    base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                root = base[:len(base) - node.level + 1]
                name = ".".join(root + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            for alias in node.names:
                out.add(f"{name}.{alias.name}")
            out.add(name)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {n for n in out if n.startswith("perfkit")}


MODULES = {_module(p): p for p in PKG.rglob("*.py")}


def _deps(mod: str) -> set[str]:
    return {d for d in _imports(MODULES[mod]) if d in MODULES and d != mod}


def test_job_and_guards_import_no_charts_or_widgets() -> None:
    for mod in ("perfkit.job", "perfkit.guards"):
        bad = {d for d in _imports(MODULES[mod])
               if d.startswith(("perfkit.charts", "perfkit.widgets"))}
        assert not bad, (mod, bad)


def test_analysis_does_not_import_the_job_or_file_formats() -> None:
    formats = ("perfkit.io.ascend.text", "perfkit.io.kineto", "perfkit.io.mindspore.legacy",
               "perfkit.io.ascend.db", "perfkit.io.mindspore.cpu")
    for mod in (m for m in MODULES if m.startswith("perfkit.analysis")):
        bad = {d for d in _imports(MODULES[mod])
               if d.startswith(("perfkit.job", "perfkit.guards", "perfkit.widgets",
                                "perfkit.charts", *formats))}
        assert not bad, (mod, bad)


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_no_import_cycle_in_perfkit() -> None:
    # Every module of the package, imports inside functions and under TYPE_CHECKING included.
    # A module reading its own ancestor package (``from .. import x`` of a parent's name) is
    # not counted: the parent's ``__init__`` runs first by the import system's own order.
    graph = {m: {d for d in _deps(m) if not m.startswith(d + ".")} for m in MODULES}
    seen: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        seen[m] = 1
        for d in sorted(graph[m]):
            assert seen.get(d) != 1, " -> ".join(path + [m, d])
            if d not in seen:
                visit(d, path + [m])
        seen[m] = 2

    for m in sorted(MODULES):
        if m not in seen:
            visit(m, [])
