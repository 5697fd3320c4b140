"""The layout of the dashboard's tabs: one module per tab, each registered under its title,
and the shared base importing no tab."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

from perfkit.widgets import TAB_TITLES, tabs

TABS = Path(tabs.__file__).parent


def test_every_tab_module_registers_its_tab_under_its_title() -> None:
    modules = {m.name for m in pkgutil.iter_modules(tabs.__path__)} - {"base"}
    assert {cls.__module__ for cls in tabs.TAB_CLASSES.values()} == {
        f"{tabs.__name__}.{name}" for name in modules}
    assert set(tabs.TAB_CLASSES) == set(TAB_TITLES)
    for title, cls in tabs.TAB_CLASSES.items():
        assert cls.title == title and issubclass(cls, tabs.Tab)


def test_the_base_imports_no_tab_and_no_tab_imports_another() -> None:
    names = {m.name for m in pkgutil.iter_modules(tabs.__path__)}
    for name in names:
        tree = ast.parse((TABS / f"{name}.py").read_text(encoding="utf-8"))
        local = {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}
        local |= {a.name for node in ast.walk(tree)
                  if isinstance(node, ast.ImportFrom) and node.level == 1 and not node.module
                  for a in node.names}
        assert local <= ({"base"} if name != "base" else set()), (name, local)
