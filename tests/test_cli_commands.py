"""The layout of the ``perfkit`` command: one module per command, every one registered and
parsed in order, nothing importing the command's facade back, and a name set on
``perfkit.cli`` reaching the module whose code reads it."""

from __future__ import annotations

import argparse
import ast
import pkgutil
from pathlib import Path

import pytest

from perfkit import cli
from perfkit.cli import commands

PKG = Path(__file__).resolve().parents[1] / "perfkit"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_module_is_registered_and_listed_in_order() -> None:
    on_disk = {m.name for m in pkgutil.iter_modules(commands.__path__)}
    assert on_disk == set(commands.COMMANDS)
    assert list(_subcommands(cli.build_parser())) == list(commands.COMMANDS)


@pytest.mark.parametrize("argv", [["serve"], ["info"], ["report", "p"], ["simulate", "out"],
                                  ["notebooks"], ["journal", "list"]])
def test_each_command_runs_the_run_of_its_own_module(argv: list[str]) -> None:
    args = cli.build_parser().parse_args(argv)
    module = commands.command_modules()[commands.COMMANDS.index(argv[0])]
    assert args.run is module.run


def _imports(path: Path) -> set[str]:
    """What a module of perfkit imports: modules where the name is one, else packages."""
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    package = parts[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                target = f"{name}.{alias.name}"
                as_path = PKG.parent.joinpath(*target.split("."))
                is_module = as_path.with_suffix(".py").is_file() or as_path.is_dir()
                out.add(target if is_module else name)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_nothing_imports_the_command_back() -> None:
    """perfkit.cli's modules import down (never the facade, which imports them), and no
    other module of perfkit imports the command (but ``python -m perfkit``'s script)."""
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG.parent).with_suffix("").as_posix().replace("/", ".")
        found = {t for t in _imports(path) if t == "perfkit.cli" or t.startswith("perfkit.cli.")}
        if rel == "perfkit.__main__":
            assert found == {"perfkit.cli.parser"}, found
        elif not rel.startswith("perfkit.cli"):
            assert not found, f"{rel} imports {found}"
        elif rel not in ("perfkit.cli.__init__", "perfkit.cli.__main__"):
            assert "perfkit.cli" not in found, f"{rel} imports the facade perfkit.cli"

