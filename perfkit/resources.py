"""Where perfkit's own files are: the bundled data, the guided notebooks, the dashboard.

The repository keeps them at the top level (``data/``, ``notebooks/``); the build maps
them into the package (``pyproject.toml``, ``[tool.setuptools.package-dir]``) as the
resource packages :data:`DATA_PACKAGE` (``perfkit._data``) and :data:`NOTEBOOK_PACKAGE`
(``perfkit._notebooks``), so a wheel, an sdist and an editable install (``pip install -e
.``) all carry them, and they are found with :func:`importlib.resources.files`, never
through the layout of a checkout.

One case has no installed mapping: a source tree imported without being installed (its
folder on ``PYTHONPATH``), or an editable install made before the mapping existed. There,
and only there, :func:`resource_dir` reads the mapping :data:`SOURCE_FOLDERS` (the same one
``pyproject.toml`` declares; ``tests/test_packaging.py`` checks that they agree), registers
the resource package from the folder next to the ``perfkit`` package, and then asks
:func:`importlib.resources.files` like everywhere else.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import sys
from functools import cache
from pathlib import Path

from .errors import PerfkitError

__all__ = ["DATA_PACKAGE", "NOTEBOOK_PACKAGE", "SOURCE_FOLDERS", "ResourceError",
           "resource_dir", "resource_path", "data_dir", "notebook_dir", "dashboard_notebook",
           "guided_notebooks"]

#: The resource package of the bundled data (``data/`` of the repository).
DATA_PACKAGE = "perfkit._data"
#: The resource package of the notebooks (``notebooks/`` of the repository).
NOTEBOOK_PACKAGE = "perfkit._notebooks"
#: Resource package -> the repository folder it is built from (as in ``pyproject.toml``).
SOURCE_FOLDERS = {DATA_PACKAGE: "data", NOTEBOOK_PACKAGE: "notebooks"}
#: The file name of the Voila dashboard among the notebooks.
DASHBOARD_NAME = "dashboard.ipynb"


class ResourceError(PerfkitError):
    """perfkit's own files (bundled data, notebooks) are missing from this installation."""


def _package_root() -> Path:
    return Path(__file__).resolve().parent


def _register_source_folder(package: str) -> bool:
    """Import ``package`` from the source tree that holds this ``perfkit`` (if it is one).

    A source tree is recognised by its ``pyproject.toml`` and the folder's ``__init__.py``;
    returns False when either is missing (an installation that lost its package data).
    """
    checkout = _package_root().parent
    folder = checkout / SOURCE_FOLDERS[package]
    init = folder / "__init__.py"
    if not ((checkout / "pyproject.toml").is_file() and init.is_file()):
        return False
    spec = importlib.util.spec_from_file_location(package, init,
                                                  submodule_search_locations=[str(folder)])
    if spec is None or spec.loader is None:
        return False
    module = importlib.util.module_from_spec(spec)
    sys.modules[package] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(package, None)
        raise
    return True


@cache
def resource_dir(package: str) -> Path:
    """The folder of one of perfkit's resource packages, found with importlib.resources.

    Parameters
    ----------
    package : str
        :data:`DATA_PACKAGE` or :data:`NOTEBOOK_PACKAGE`.

    Returns
    -------
    pathlib.Path
        A folder on the file system (wheels install unpacked, so it always is one).

    Raises
    ------
    ResourceError
        The package is not part of this installation, or perfkit runs from a zip file
        (the loaders need real folders).
    """
    if package not in SOURCE_FOLDERS:
        raise ResourceError(f"unknown resource package {package!r}; perfkit's are "
                            f"{', '.join(SOURCE_FOLDERS)}")
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError:
        if not _register_source_folder(package):
            raise ResourceError(
                f"{package} is missing from the perfkit installation at {_package_root()} "
                "(its bundled data and notebooks); reinstall perfkit from its wheel, or "
                "with 'pip install -e .' in a checkout") from None
        root = importlib.resources.files(package)
    if not isinstance(root, Path):
        raise ResourceError(f"{package} is not a folder on disk ({root!r}); install perfkit "
                            "unpacked (pip install), not as a zip file")
    return root


def resource_path(package: str) -> Path:
    """Like :func:`resource_dir`, but never raises: where the folder is, or where an
    installation would hold it (``perfkit/_data``), so that callers can say "not found"
    with a path. For module-level constants, which must not fail at import."""
    try:
        return resource_dir(package)
    except ResourceError:
        return _package_root() / package.rpartition(".")[2]


def data_dir() -> Path:
    """The bundled data: real and simulated profiles and MindSpore IR dumps."""
    return resource_dir(DATA_PACKAGE)


def notebook_dir() -> Path:
    """The folder of the guided notebooks and of the dashboard notebook."""
    return resource_dir(NOTEBOOK_PACKAGE)


def dashboard_notebook() -> Path:
    """The Voila dashboard notebook that ``perfkit serve`` runs."""
    return notebook_dir() / DASHBOARD_NAME


def guided_notebooks() -> list[Path]:
    """The guided notebooks (``00_start_here.ipynb`` ...), in name order, without the
    dashboard."""
    return sorted(p for p in notebook_dir().glob("*.ipynb") if p.name != DASHBOARD_NAME)
