"""Copy the guided notebooks into a working folder (``perfkit notebooks DIR``).

The notebooks ship inside the package (:func:`perfkit.resources.guided_notebooks`), where
edits would be lost on the next upgrade and may not be allowed at all; the user works on
copies. A copy the user has changed is never replaced unless asked (``force``): only missing
notebooks are written, identical ones are left as they are, and a differing one is reported
as kept.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InvalidArgumentError
from .resources import guided_notebooks, notebook_dir

__all__ = ["DEFAULT_FOLDER", "NotebookCopy", "copy_notebooks"]

#: Where ``perfkit notebooks`` copies to when no folder is given (in the current folder).
DEFAULT_FOLDER = "perfkit-notebooks"


@dataclass
class NotebookCopy:
    """What :func:`copy_notebooks` did, file names per outcome.

    Attributes
    ----------
    folder : pathlib.Path
        The working folder (absolute).
    copied : list of str
        Notebooks that were missing and are now there.
    unchanged : list of str
        Notebooks already there with the same content as perfkit's.
    kept : list of str
        Notebooks already there with other content (the user's edits, or perfkit's
        notebook from another version), left as they were.
    replaced : list of str
        Notebooks with other content overwritten because ``force`` was given.
    """

    folder: Path
    copied: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)


def _same_bytes(a: Path, b: Path) -> bool:
    return a.stat().st_size == b.stat().st_size and a.read_bytes() == b.read_bytes()


def _reason(exc: OSError) -> str:
    """The system's words for ``exc`` ("Not a directory"), without the path it repeats."""
    return exc.strerror or type(exc).__name__


def _copy(source: Path, dest: Path, folder: str | os.PathLike[str]) -> None:
    """Copy one notebook; a refusal of the system names the file and its reason."""
    try:
        shutil.copyfile(source, dest)
    except OSError as exc:
        raise InvalidArgumentError("DIR", f"{dest.name} cannot be written there "
                                   f"({_reason(exc)})", str(folder)) from None


def copy_notebooks(folder: str | os.PathLike[str] = DEFAULT_FOLDER, *,
                   force: bool = False) -> NotebookCopy:
    """Copy perfkit's guided notebooks into ``folder``, keeping the user's edited copies.

    Parameters
    ----------
    folder : path
        The working folder; created (with its parents) when missing.
    force : bool
        Overwrite notebooks whose content differs from perfkit's (the user's edits are
        lost). Without it they are kept and listed in :attr:`NotebookCopy.kept`.

    Returns
    -------
    NotebookCopy

    Raises
    ------
    perfkit.errors.InvalidArgumentError
        ``folder`` is a file, is perfkit's own notebook folder, or cannot be made or
        written (a path under a file, no permission): the system's reason is given.
    perfkit.resources.ResourceError
        This installation lacks its notebooks.
    """
    target = Path(folder).expanduser().resolve()
    if target.exists() and not target.is_dir():
        raise InvalidArgumentError("DIR", "is a file; give a folder for the notebooks",
                                   str(folder))
    source_dir = notebook_dir()
    if target == source_dir.resolve():
        raise InvalidArgumentError("DIR", "is perfkit's own notebook folder; give a working "
                                   "folder of yours", str(folder))
    sources = guided_notebooks()
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a parent is a file, a read-only or missing place
        raise InvalidArgumentError("DIR", f"cannot be made a folder ({_reason(exc)})",
                                   str(folder)) from None
    result = NotebookCopy(folder=target)
    for source in sources:
        dest = target / source.name
        if dest.exists() and not dest.is_file():
            raise InvalidArgumentError("DIR", f"holds a folder named {source.name}; move it "
                                       "away or choose another folder", str(folder))
        if not dest.exists():
            _copy(source, dest, folder)
            result.copied.append(source.name)
        elif _same_bytes(source, dest):
            result.unchanged.append(source.name)
        elif force:
            _copy(source, dest, folder)
            result.replaced.append(source.name)
        else:
            result.kept.append(source.name)
    return result
