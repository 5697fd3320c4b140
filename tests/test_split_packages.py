"""The packages split out of the former big modules keep the layering and have no cycle.

``perfkit.charts``, ``perfkit.analysis.efficiency``, ``perfkit.analysis.timeline``,
``perfkit.analysis.shapes``, ``perfkit.analysis.operators``, ``perfkit.specs``,
``perfkit.job``, ``perfkit.io._common``, ``perfkit.io.kineto``, ``perfkit.lab.questions``,
``perfkit.analysis._util``, ``perfkit.analysis.recompute``, ``perfkit.journal.record``,
``perfkit.plan.calibrate``, ``perfkit.plan.balance``, ``perfkit.tables`` and ``perfkit.report``
were single modules; each is now a package of small modules (``perfkit.journal`` is checked
whole: its store gave the file and the profile paths to ``connection`` and ``profiles``).
``perfkit.calc.timing``, ``perfkit.widgets.prediction``, ``perfkit.widgets.dashboard``,
``perfkit.simulate._engine`` and ``perfkit.simulate._write`` kept their modules and gave jobs
to sibling modules named after them (``timing_layer``, ``prediction_fit``,
``prediction_ranking``, ``_engine_layout``, ``_write_trace``, ...): they stay small too, and
every name the code (perfkit, tests, benchmarks, tools) takes from such a module,
monkeypatches included, is still there.
Imports are read from the source (function-level imports included; imports under
``if TYPE_CHECKING:`` are for type checkers only and left out), so a cycle that only closes at
run time is found too.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "perfkit"
SPLIT = ("perfkit.charts", "perfkit.analysis.efficiency", "perfkit.analysis.timeline",
         "perfkit.plan.calibrate",
         "perfkit.analysis.shapes", "perfkit.specs", "perfkit.job", "perfkit.io._common",
         "perfkit.lab.questions", "perfkit.io.kineto", "perfkit.analysis.operators",
         "perfkit.analysis._util", "perfkit.analysis.recompute", "perfkit.journal",
         "perfkit.tables", "perfkit.plan.balance", "perfkit.report")
"""The loaders' packages (``perfkit.io.ascend``, ``perfkit.io.detect``, ...) are checked by
tests/io/test_io_layout.py."""
SIBLINGS = ("perfkit.simulate._engine", "perfkit.simulate._write",
            "perfkit.widgets.prediction", "perfkit.calc.timing", "perfkit.widgets.dashboard")
"""Modules split into sibling modules ``<name>_<job>`` (their old path is still a module)."""


def _module(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in PKG.rglob("*.py")}


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:``."""
    out: list[ast.AST] = []

    def walk(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                walk(child)
            return
        out.append(node)
        for child in ast.iter_child_nodes(node):
            walk(child)

    walk(tree)
    return out


def _imports(mod: str) -> set[str]:
    """perfkit modules that ``mod`` imports at run time."""
    path = MODULES[mod]
    base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            root = base[:len(base) - node.level + 1] if node.level else []
            name = ".".join(root + ([node.module] if node.module else []))
            found.add(name)
            found.update(f"{name}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {n for n in found if n in MODULES and n != mod}


def _members(package: str) -> list[str]:
    return [m for m in MODULES if m == package or m.startswith(package + ".")]


@pytest.mark.parametrize("package", SPLIT)
def test_no_import_cycle_inside_the_package(package: str) -> None:
    mods = _members(package)
    graph = {m: {d for d in _imports(m) if d in mods and d != package} for m in mods}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            assert state.get(d) != 1, " -> ".join(path + [m, d])
            if d not in state:
                visit(d, path + [m])
        state[m] = 2

    for m in mods:
        if m not in state:
            visit(m, [])


ALLOWED = {
    # specs feed every calculator: they know nothing of profiles, analyses or views
    "perfkit.specs": ("perfkit.specs", "perfkit.errors", "perfkit._values"),
    # charts draw DataFrames: no analysis, no loader, no job
    # (and perfkit._text_dtype, the dtype of every text column, which imports only pandas)
    "perfkit.charts": ("perfkit.charts", "perfkit.errors", "perfkit.format", "perfkit.tables",
                       "perfkit._text_dtype"),
    # the loaders' shared reading helpers: below every loader, they know no file format
    "perfkit.io._common": ("perfkit.io._common", "perfkit.errors", "perfkit.format",
                           "perfkit._text_dtype"),
}
FORBIDDEN = {
    "perfkit.job": ("perfkit.charts", "perfkit.widgets", "perfkit.advisor", "perfkit.plan",
                    "perfkit.cli"),
    "perfkit.analysis.efficiency": ("perfkit.charts", "perfkit.widgets", "perfkit.job",
                                    "perfkit.io", "perfkit.advisor"),
    # the timeline reads the canonical tables: no view, no job, and of perfkit.io only the
    # rule that says which host operators are communication (perfkit.io.canonical.categories)
    "perfkit.analysis.timeline": ("perfkit.charts", "perfkit.widgets", "perfkit.job",
                                  "perfkit.advisor", "perfkit.io.ascend.text", "perfkit.io.kineto",
                                  "perfkit.io.chrome.decode", "perfkit.io.engines.local"),
    # the model read from the shapes: the canonical tables only, never a loader or a view
    "perfkit.analysis.shapes": ("perfkit.charts", "perfkit.widgets", "perfkit.job",
                                "perfkit.io", "perfkit.advisor"),
    # the operator analyses read the canonical tables: no view, no job, and of perfkit.io
    # only the rule that says which host operators are communication
    # (perfkit.io.canonical.categories)
    "perfkit.analysis.operators": ("perfkit.charts", "perfkit.widgets", "perfkit.job",
                                   "perfkit.advisor", "perfkit.io.ascend.text", "perfkit.io.kineto",
                                   "perfkit.io.chrome.decode", "perfkit.io.engines.local"),
    # a loader: never an analysis, a view, a job or the advice
    "perfkit.io.kineto": ("perfkit.analysis", "perfkit.advisor", "perfkit.charts",
                          "perfkit.widgets", "perfkit.plan", "perfkit.job"),
}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_the_layers_below(package: str) -> None:
    for mod in _members(package):
        bad = {d for d in _imports(mod) if not d.startswith(ALLOWED[package])}
        assert not bad, (mod, bad)


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_does_not_import_the_layers_above(package: str) -> None:
    for mod in _members(package):
        bad = {d for d in _imports(mod) if d.startswith(FORBIDDEN[package])}
        assert not bad, (mod, bad)


@pytest.mark.parametrize("package", SPLIT)
def test_every_public_name_is_defined_inside_the_package(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__all__
    for name in module.__all__:
        obj = getattr(module, name)
        home = getattr(obj, "__module__", None)
        if callable(obj) and home is not None:
            assert home.startswith(package), (name, home)


def _siblings(module: str) -> list[str]:
    return [m for m in MODULES if m == module or m.startswith(module + "_")]


def test_modules_stay_small() -> None:
    for mod in [m for p in SPLIT for m in _members(p)] + [m for s in SIBLINGS
                                                         for m in _siblings(s)]:
        lines = MODULES[mod].read_text(encoding="utf-8").count("\n")
        assert lines < 500, (mod, lines)


@pytest.mark.parametrize("module", SIBLINGS)
def test_split_modules_kept_their_siblings(module: str) -> None:
    assert len(_siblings(module)) > 1, module


ROOT = PKG.parent
USERS = [p for d in ("perfkit", "tests", "benchmarks", "tools") for p in (ROOT / d).rglob("*.py")]
"""The code that may import a split module's names: the package, its tests, benchmarks, tools."""


@functools.cache
def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@functools.cache
def _tree(path: Path) -> ast.AST:
    return ast.parse(_text(path))


def _used_names(path: Path, module: str) -> set[str]:
    """Names ``path`` takes from ``module``: ``from module import a``, ``alias.a`` where
    ``alias`` is bound to the module, and ``setattr(alias, "a", ...)`` (a monkeypatch)."""
    leaf = re.escape(module.rpartition(".")[2])
    # only files with an import line naming the module are parsed (the scan stays cheap)
    if not re.search(rf"^\s*(?:from|import)\s[^\n]*\b{leaf}\b"
                     rf"|^\s+{leaf}(?:\s+as\s+\w+)?,?\s*\)?\s*$",
                     _text(path), re.M):
        return set()
    tree = _tree(path)
    own = _module(path) if path.is_relative_to(PKG) else ""
    base = own.split(".")[:-1] if path.name != "__init__.py" else own.split(".")
    parent, _, leaf = module.rpartition(".")
    aliases: set[str] = set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            root = base[:len(base) - node.level + 1] if node.level else []
            name = ".".join(root + ([node.module] if node.module else []))
            if name == module:
                names.update(a.name for a in node.names if a.name != "*")
            elif name == parent:
                aliases.update(a.asname or a.name for a in node.names if a.name == leaf)
        elif isinstance(node, ast.Import):
            aliases.update(a.asname for a in node.names if a.name == module and a.asname)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in aliases:
            names.add(node.attr)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
                node.func, "id", None)) == "setattr" and len(node.args) >= 2 \
                and isinstance(node.args[0], ast.Name) and node.args[0].id in aliases \
                and isinstance(node.args[1], ast.Constant):
            names.add(str(node.args[1].value))
    return names


@pytest.mark.parametrize("module", SIBLINGS)
def test_every_name_taken_from_a_split_module_is_still_there(module: str) -> None:
    # the jobs went to siblings, the names stay where the code takes them from
    found = importlib.import_module(module)
    used = {(str(p.relative_to(ROOT)), n) for p in USERS for n in _used_names(p, module)}
    assert used, module  # the scan finds the module's users: the check can fail
    missing = sorted((f, n) for f, n in used if not hasattr(found, n))
    assert not missing, missing
