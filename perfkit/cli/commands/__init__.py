"""The ``perfkit`` commands, one module each.

A command is a module of this package with

* ``add_parser(subparsers) -> argparse.ArgumentParser``: its subparser (name, help,
  arguments), added to ``perfkit``'s;
* ``run(args) -> int``: what it does with the parsed arguments; its exit status. Errors
  perfkit can explain are raised as :class:`~perfkit.errors.PerfkitError`: ``perfkit``
  prints them as one line (:func:`perfkit.cli.main`).

A new command is its module and its name in :data:`COMMANDS`.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["COMMANDS", "command_modules"]

#: The commands, by module name, in the order ``perfkit --help`` lists them.
COMMANDS: tuple[str, ...] = ("serve", "info", "advise", "check", "plan", "report", "compare",
                             "simulate", "notebooks", "journal", "lab", "mcp")


def command_modules(only: str | None = None) -> list[ModuleType]:
    """The modules of :data:`COMMANDS`, in their order (``only``: that command's alone)."""
    names = [only] if only in COMMANDS else COMMANDS
    return [importlib.import_module(f"{__name__}.{name}") for name in names]
