"""The profile an answer is of: a path or ``sample:NAME``, loaded with the advice a
command line or a tool can follow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import PathNotFoundError, PerfkitError, RunsFound

__all__ = ["load_path"]


def load_path(text: str, run: int | str | None = None, command: str = "info",
              argument: str = "run") -> Any:
    """Load the profile a command names (a path or ``sample:NAME``).

    ``argument``: the name of the tool's argument that picks a run (``command="mcp"``:
    ``run``, or ``run_a`` / ``run_b`` of the compare tool).

    Raises
    ------
    PerfkitError
        The path does not exist, or it holds several runs and ``run`` is None (the
        message names ``--run``, or the tool's ``argument``, which it keeps as its
        ``parameter``).
    """
    from ..bundled_samples import path_not_found, resolve_sample
    from ..io.engines.local import load

    path = resolve_sample(text)
    if not Path(path).expanduser().exists():
        raise PathNotFoundError(text, path_not_found(text))
    try:
        return load(path, run=run)
    except RunsFound as exc:  # the API's advice, in the command's words
        how = (f"give the tool's {argument} argument" if command == "mcp"
               else f"on the command line: perfkit {command} PATH --run ID")
        said = PerfkitError(f"{exc}; {how}")
        said.parameter = argument if command == "mcp" else "--run"
        raise said from exc

