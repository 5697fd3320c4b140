"""Opening a profile for the dashboard: a bundled sample's name or a path
(:func:`open_profile`), and the warning shown when its ranks look like separate runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..bundled_samples import sample_hint
from ..errors import InvalidArgumentError, ProfileError
from ..io.engines.local import load
from ..notes import runs_apart
from .markup import warning_html
from .overview import bundled_profile, bundled_profiles

__all__ = ["open_profile", "apart_warning"]


def open_profile(source: str | os.PathLike[str], run: Any = None,
                 progress: bool | None = None) -> Any:
    """Load a profile for the dashboard: a bundled sample's name or a path.

    Parameters
    ----------
    source : str or path
        A name of :func:`~perfkit.widgets.bundled_profiles` (``"simulated/slow-rank"``)
        or a folder or file on this machine (``~`` is expanded).
    run : int or str, optional
        Which of the separate runs a folder holds (an id or a name of :func:`perfkit.runs`);
        a folder of several runs raises :class:`perfkit.RunsFound` without it.
    progress : bool, optional
        As for :func:`perfkit.load` (the dashboard's background opening passes False).

    Returns
    -------
    Profile or Cluster
        From :func:`perfkit.load`.

    Raises
    ------
    perfkit.errors.ProfileError
        The path does not exist or cannot be read as a profile.
    """
    text = str(source).strip()
    if not text:
        raise InvalidArgumentError("path", "is empty: type the folder of a profile", text)
    if text in bundled_profiles() or text.startswith("sample:"):
        return load(bundled_profile(text), progress=progress)
    path = Path(text).expanduser()
    if not path.exists():
        hint = sample_hint(text)  # a sample's name: how to spell it
        raise ProfileError(path, "no such file or folder on the machine that runs the "
                                 f"dashboard{hint}")
    return load(path, run=run, progress=progress)


def apart_warning(profile: Any) -> str:
    """A warning when the opened ranks look like separate runs (no common step number or
    time: :func:`perfkit.load`'s note, ``meta.extra["apart"]``), else ``""``: the figures
    of such a page mix runs, which the notes at the bottom of the Overview alone would
    hide."""
    said = runs_apart(profile)
    return warning_html(said) if said else ""
