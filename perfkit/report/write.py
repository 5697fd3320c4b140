"""The report itself (:func:`write_report`): run a guided notebook on a profile, write HTML.

Checks the profile and the output path first (never a file inside the profile folder),
injects ``PROFILE``, executes the notebook (:mod:`perfkit.report.execute`) and writes the
page (:mod:`perfkit.report.page`) with the profile's reading notes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from ..bundled_samples import is_sample_spec, path_not_found, resolve_sample
from .execute import DEFAULT_TIMEOUT_S, execute_notebook
from .notebooks import (
    DEFAULT_NOTEBOOK,
    NOTEBOOK_DIR,
    ReportError,
    inject_parameters,
    locate_notebook,
    takes_parameter,
)
from .page import notebook_html

__all__ = ["write_report"]


def _inside(child: Path, parent: Path) -> bool:
    try:
        child.relative_to(parent)
        return True
    except ValueError:
        return False


def _check_output(out: Path, profile: Path) -> Path:
    target = out.expanduser().resolve()
    if target.is_dir():
        raise ReportError(f"output path is a folder: {out} (give a file name, e.g. "
                          f"{Path(out) / 'report.html'})")
    if not target.parent.is_dir():
        raise ReportError(f"output folder does not exist: {target.parent} (create it first)")
    if profile.is_dir() and _inside(target, profile):
        raise ReportError(f"output {out} lies inside the profile folder {profile}; perfkit "
                          "does not write into profile folders, choose another path")
    return target


def _checked_notes(path: Path, progress: bool, run: int | str | None = None) -> list[str]:
    """Read the profile at ``path`` before any kernel starts, as ``perfkit info`` does, and
    return its ``meta.notes`` (repairs, ranks not loaded, missing files), which the notebook
    may not show.

    A profile that cannot be read fails here with the loader's own message, naming the
    file (a :class:`~perfkit.errors.PerfkitError`), instead of half the notebook later.
    The notebook's kernel then reads the loader's cache (unless the cache is off).
    """
    from ..io.engines.local import load
    from ..notes import every_note

    return every_note(load(path, progress=progress, run=run))


def _takers(name: str) -> str:
    """The guided notebooks whose ``parameters`` cell sets ``name``, in words, read off
    the notebooks themselves (for the error that refuses a parameter to another)."""
    import nbformat

    found = [p.stem for p in sorted(NOTEBOOK_DIR.glob("[0-9]*.ipynb"))
             if takes_parameter(nbformat.read(p, as_version=4), name)]
    return (f"{', '.join(found)} take{'s' if len(found) == 1 else ''} it" if found
            else "no guided notebook takes it")


def write_report(profile: str | os.PathLike[str], out: str | os.PathLike[str],
                 notebook: str | os.PathLike[str] = DEFAULT_NOTEBOOK, *,
                 timeout: float = DEFAULT_TIMEOUT_S, progress: bool = True,
                 params: Mapping[str, Any] | None = None, run: int | str | None = None
                 ) -> Path:
    """Run a guided notebook on ``profile`` and write its outputs as a self-contained HTML.

    Parameters
    ----------
    profile : path
        Profile folder or file (anything :func:`perfkit.load` reads), or
        ``"sample:NAME"`` (a bundled sample); injected as the notebook's ``PROFILE``
        parameter, as an absolute path.
    out : path
        HTML file to write (replaced if it exists). Its folder must exist and must not
        lie inside the profile folder.
    notebook : str or path
        A guided notebook name (default ``00_start_here``) or an ``.ipynb`` path.
    timeout : float
        Seconds each cell may run.
    progress : bool
        Progress bar over the cells on stderr.
    params : mapping, optional
        Further parameters to inject (e.g. ``{"N_FINDINGS": 10}``); each must be one the
        notebook's ``parameters`` cell sets (``CONFIG``, ``IR_DUMP``, ...).
    run : int or str, optional
        Which of the separate runs a folder holds (an id or a name, as
        :func:`perfkit.runs` lists them); injected as the notebook's ``RUN`` parameter,
        which the guided notebooks but ``10_tuning_journal`` (two profiles) take.

    Returns
    -------
    Path
        The absolute path of the HTML file.

    Raises
    ------
    ReportError
        Missing profile, notebook or output folder, a failing cell (named, with the
        error's last line), a timeout; ``run`` or a parameter of ``params`` given to a
        notebook that does not set it.
    ProfileError
        ``profile`` holds nothing perfkit recognises.
    RunsFound
        ``profile`` is a folder of several separate runs and ``run`` is not given (its
        ``runs`` list them).
    """
    import nbformat

    from .._version import __version__
    from ..io.engines.local import detect

    path = Path(resolve_sample(profile)).expanduser().resolve()  # "sample:NAME" too
    if not path.exists():
        raise ReportError(path_not_found(profile))
    target = _check_output(Path(out), path)
    detect(path)  # fails early, naming the path, on a folder with no profile in it
    source = locate_notebook(notebook)
    nb = nbformat.read(source, as_version=4)
    if run is not None and not takes_parameter(nb, "RUN"):
        raise ReportError(f"{source.name} has no RUN parameter, so it cannot read one of a "
                          "folder's runs: give that run's files alone as the profile")
    unread = [name for name in (params or {}) if not takes_parameter(nb, name)]
    if unread:  # injected, it would never be read: the page would not be what was asked
        raise ReportError(f"{source.name} has no {' nor '.join(unread)} parameter, so it "
                          f"would not read what was given for it ({unread[0]}: "
                          f"{_takers(unread[0])})")
    notes = _checked_notes(path, progress, run)  # a profile that cannot be read: no kernel
    values = {**(params or {}), "PROFILE": str(path)}
    if run is not None:
        values["RUN"] = run
    try:
        injected = inject_parameters(nb, values)
    except ReportError as exc:
        raise ReportError(f"{source.name}: {exc}") from None
    execute_notebook(nb, timeout=timeout, progress=progress, name=source.name,
                     injected=injected)
    stamp = datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z").strip()
    shown = f"the bundled {str(profile).strip()} ({path})" if is_sample_spec(profile) \
        else str(path)
    if run is not None:
        shown += f", run {run}"
    note = (f"Generated by perfkit {__version__} on {stamp} by running {source.name} on "
            f"{shown}. Code cells are hidden; every table and chart is the output of the "
            "notebook.")
    title = f"perfkit report: {path}" + (f" (run {run})" if run is not None else "")
    page = notebook_html(nb, title=title, note=note,
                         reading_notes=notes)
    target.write_text(page, encoding="utf-8")
    return target
