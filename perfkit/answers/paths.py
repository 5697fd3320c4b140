"""The profile an answer is of: a path or ``sample:NAME``, loaded with the advice a
command line or a tool can follow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import PathNotFoundError, PerfkitError, RunsFound

__all__ = ["load_path"]


def load_path(text: str, run: int | str | None = None, command: str = "info") -> Any:
    """Load the profile a command names (a path or ``sample:NAME``).

    Raises
    ------
    PerfkitError
        The path does not exist, or it holds several runs and ``run`` is None (the
        message names ``--run``).
    """
    from ..bundled_samples import path_not_found, resolve_sample
    from ..io.engines.local import load

    path = resolve_sample(text)
    if not Path(path).expanduser().exists():
        raise PathNotFoundError(text, path_not_found(text))
    try:
        return load(path, run=run)
    except RunsFound as exc:  # the API's advice, in the command's words
        how = ("give the tool's run argument" if command == "mcp"
               else f"on the command line: perfkit {command} PATH --run ID")
        raise PerfkitError(f"{exc}; {how}") from exc

