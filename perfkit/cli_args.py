"""Argument checks shared by the ``perfkit`` subcommands (``info``, ``report``, ``journal``).

Kept apart from :mod:`perfkit.cli` so that subcommands defined in their own packages
(:mod:`perfkit.journal.cli`) use them without importing the command itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .errors import PerfkitError

__all__ = ["config_paths"]


def config_paths(configs: Sequence[str] | None) -> list[str] | None:
    """Absolute paths of the ``--config`` files, None when none was given.

    Raises
    ------
    PerfkitError
        A file does not exist (the CLI prints it as a one-line error).
    """
    if not configs:
        return None
    out = []
    for text in configs:
        path = Path(text).expanduser()
        if not path.exists():
            raise PerfkitError(f"config not found: {text}")
        out.append(str(path.resolve()))
    return out
