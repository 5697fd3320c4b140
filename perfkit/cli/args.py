"""What the ``perfkit`` commands share in their arguments: the ``--config`` check and the
layout of their help text."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

from ..errors import PerfkitError

__all__ = ["config_paths", "paragraph", "run_id"]


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


def paragraph(text: str) -> str:
    """``text`` filled to 88 columns: a command's description in its ``--help``."""
    return textwrap.fill(text, 88)


def run_id(text: str) -> int | str:
    """``--run``: a run's id (a whole number) or its name."""
    return int(text) if text.strip().isdigit() else text
