"""Which guided notebook the report runs, and its parameters (papermill's convention).

:func:`locate_notebook` finds a notebook that ships with perfkit by name (or takes a path);
:func:`inject_parameters` inserts the cell tagged ``injected-parameters`` after the cell
tagged ``parameters``, as papermill does. :class:`ReportError` is what every step of the
report raises when it cannot be made.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import PerfkitError
from ..resources import NOTEBOOK_PACKAGE, resource_path

__all__ = ["ReportError", "NOTEBOOK_DIR", "DEFAULT_NOTEBOOK", "locate_notebook",
           "parameters_index", "takes_parameter", "inject_parameters"]


#: The guided notebooks that ship with perfkit (``notebooks/`` of the repository, installed
#: as ``perfkit/_notebooks``), found with importlib.resources (:mod:`perfkit.resources`).
NOTEBOOK_DIR = resource_path(NOTEBOOK_PACKAGE)
#: The notebook ``perfkit report`` runs unless told otherwise.
DEFAULT_NOTEBOOK = "00_start_here"


class ReportError(PerfkitError):
    """The report cannot be made: missing notebook or profile, bad output path, failing cell."""


def locate_notebook(notebook: str | os.PathLike[str] = DEFAULT_NOTEBOOK) -> Path:
    """The notebook file for a name (``00_start_here``, ``00_start_here.ipynb``), a part of
    one guided notebook's name that no other shares (``05``, ``memory``), or a path.

    Raises
    ------
    ReportError
        No such notebook, or a part several names share; the message lists the guided
        notebooks available.
    """
    given = Path(notebook).expanduser()
    candidates = [given] if given.suffix == ".ipynb" else []
    names = sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb") if p.stem != "dashboard")
    if len(given.parts) == 1:
        stem = given.name[:-6] if given.name.endswith(".ipynb") else given.name
        candidates.append(NOTEBOOK_DIR / f"{stem}.ipynb")
        candidates += [NOTEBOOK_DIR / f"{n}.ipynb" for n in _named_by_part(stem, names)]
    for path in candidates:
        if path.is_file():
            return path
    shared = _named_by_part(str(notebook), names, unique=False)
    if len(shared) > 1:
        raise ReportError(f"notebook {notebook!r} could be any of {', '.join(shared)}: "
                          "give more of its name")
    known = (f"the guided notebooks in {NOTEBOOK_DIR} are: {', '.join(names)}" if names else
             f"no notebooks found in {NOTEBOOK_DIR} (this perfkit installation lacks its "
             "notebooks; reinstall it from its wheel, or with 'pip install -e .' in a "
             "checkout)")
    raise ReportError(f"notebook not found: {notebook}; {known}")


def _named_by_part(part: str, names: list[str], unique: bool = True) -> list[str]:
    """The names that start with ``part`` (``05``) or hold it as a word after the number
    (``memory`` in ``05_memory``); with ``unique``, only when exactly one does."""
    low = part.strip().lower()
    if not low:
        return []
    found = [n for n in names if n.lower().startswith(low)
             or low in n.lower().split("_", 1)[-1].split("_")
             or n.lower().split("_", 1)[-1].startswith(low)]
    return found if not unique or len(found) == 1 else []


def parameters_index(nb: Any) -> int | None:
    """Index of the first cell tagged ``parameters``, or None."""
    for i, cell in enumerate(nb.cells):
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            return i
    return None


def takes_parameter(nb: Any, name: str) -> bool:
    """Whether the notebook's ``parameters`` cell assigns ``name`` (``RUN = None``, say):
    a parameter it does not define would be injected and never read."""
    import ast

    where = parameters_index(nb)
    if where is None:
        return False
    try:
        tree = ast.parse(nb.cells[where].source)
    except SyntaxError:
        return False
    return any(isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
               and node.id == name for node in ast.walk(tree))


def inject_parameters(nb: Any, params: Mapping[str, Any] | None = None, /,
                      **more: Any) -> int:
    """Insert a papermill-style ``injected-parameters`` cell after the parameters cell.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        Changed in place.
    params : mapping, optional
        Names and values; ``**more`` adds to them. Each value is written with ``repr``, so
        it must be a literal (str, number, bool, None, list, tuple, dict of those).

    Returns
    -------
    int
        Index of the new cell.

    Raises
    ------
    ReportError
        The notebook has no cell tagged ``parameters``.
    """
    import nbformat

    values = {**(params or {}), **more}
    where = parameters_index(nb)
    if where is None:
        raise ReportError("the notebook has no cell tagged 'parameters' to override")
    for name in values:
        if not name.isidentifier():
            raise ReportError(f"parameter name {name!r} is not a Python identifier")
    source = "# Parameters injected by perfkit\n" + "".join(
        f"{name} = {value!r}\n" for name, value in values.items())
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(where + 1, cell)
    return where + 1
