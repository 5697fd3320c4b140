"""The bundled sample profiles: list them, and open one by name from anywhere.

(The module is ``bundled_samples`` so that its main function can be ``perfkit.samples``.)

The samples are the folders of perfkit's bundled data (:func:`perfkit.resources.data_dir`,
``data/`` in the repository) that hold a profile and a ``README.md`` saying what it is and
where it came from. Each has a full name, its folder relative to the data
(``"simulated/slow-rank"``), and a short name, the folder's own name (``"slow-rank"``);
both work wherever perfkit takes a path when written ``"sample:NAME"``::

    pk.samples()                       # name, short name, origin, description, path
    pk.load("sample:slow-rank")        # = pk.load("sample:simulated/slow-rank")
    perfkit info sample:slow-rank

Folders that are not profiles (``ir/``, MindSpore IR dumps for
:func:`perfkit.widgets.bundled_ir`; ``journals/``, tuning journals for
:meth:`perfkit.Journal.bundled`) and index folders whose sub-folders carry their own
README (``simulated/``) are not samples.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .errors import InvalidArgumentError
from .resources import ResourceError, data_dir

__all__ = ["SAMPLE_PREFIX", "NOT_PROFILES", "Sample", "UnknownSampleError", "samples",
           "sample_list", "sample_names", "sample_path", "sample_named", "is_sample_spec",
           "resolve_sample",
           "path_not_found", "sample_hint"]

#: How a sample is named where a path is expected: ``"sample:slow-rank"``.
SAMPLE_PREFIX = "sample:"
#: Folders of the bundled data that hold no profile (IR dumps; tuning journals).
NOT_PROFILES = ("ir", "journals")
#: Top folder of the simulated samples (their README says so; see ``data/README.md``).
SIMULATED = "simulated"


class UnknownSampleError(InvalidArgumentError):
    """No bundled sample has that name; the message lists the names there are."""


@dataclass(frozen=True)
class Sample:
    """One bundled sample profile.

    Attributes
    ----------
    name : str
        Its folder relative to the bundled data, e.g. ``"simulated/slow-rank"``.
    short_name : str
        The folder's own name, e.g. ``"slow-rank"``.
    origin : str
        ``"simulated"`` (written by :func:`perfkit.simulate`, a model of a run) or
        ``"real"`` (recorded by a profiler), as ``data/README.md`` sorts them.
    description : str
        The first heading of its README, on one line.
    path : pathlib.Path
        The folder, to pass to :func:`perfkit.load`.
    """

    name: str
    short_name: str
    origin: str
    description: str
    path: Path

    @property
    def spec(self) -> str:
        """The spelling :func:`perfkit.load` takes: ``"sample:<short name>"``."""
        return SAMPLE_PREFIX + self.short_name


def _description(readme: Path) -> str:
    """The README's first Markdown heading (or first non-empty line), on one line."""
    for line in readme.read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if text:
            return " ".join(text.lstrip("#").split())
    return ""


def sample_list() -> list[Sample]:
    """The bundled samples, sorted by name.

    A sample is a folder of the bundled data with a ``README.md`` and no sub-folder that has
    one (those are index folders), outside :data:`NOT_PROFILES`.

    Raises
    ------
    perfkit.resources.ResourceError
        This installation lacks the bundled data.
    """
    root = data_dir()
    readmes = sorted(root.rglob("README.md"))
    folders = {r.parent for r in readmes} - {root}
    out = []
    for folder in sorted(folders):
        rel = folder.relative_to(root)
        if rel.parts[0] in NOT_PROFILES or any(folder in f.parents for f in folders):
            continue
        out.append(Sample(name=rel.as_posix(), short_name=folder.name,
                          origin=SIMULATED if rel.parts[0] == SIMULATED else "real",
                          description=_description(folder / "README.md"), path=folder))
    return out


def samples() -> pd.DataFrame:
    """The bundled sample profiles, one row each, to choose one for :func:`perfkit.load`.

    Returns
    -------
    pandas.DataFrame
        Columns ``name`` (``"simulated/slow-rank"``), ``short_name`` (``"slow-rank"``),
        ``origin`` (``"real"`` or ``"simulated"``), ``description`` (one line, from the
        folder's README), ``spec`` (what to pass: ``"sample:slow-rank"``) and ``path``
        (the folder, as a string).

    Raises
    ------
    perfkit.resources.ResourceError
        This installation lacks the bundled data.
    """
    rows = [{"name": s.name, "short_name": s.short_name, "origin": s.origin,
             "description": s.description, "spec": s.spec, "path": str(s.path)}
            for s in sample_list()]
    return pd.DataFrame(rows, columns=["name", "short_name", "origin", "description", "spec",
                                       "path"])


def sample_names() -> list[str]:
    """The full names of the bundled samples (empty when the data is missing)."""
    try:
        return [s.name for s in sample_list()]
    except ResourceError:
        return []


def _key(name: object) -> str:
    """A sample's name as given, without ``"sample:"``, spaces or slashes at its ends."""
    text = str(name).strip()
    key = text[len(SAMPLE_PREFIX):].strip() if text.startswith(SAMPLE_PREFIX) else text
    return key.strip("/")


def _matches(key: str, found: list[Sample]) -> list[Sample]:
    """The sample whose full name is ``key``, else those whose short name is."""
    exact = [s for s in found if key == s.name]
    return exact or [s for s in found if key == s.short_name]


def sample_named(name: object) -> str | None:
    """The full name (``"simulated/slow-rank"``) of the one bundled sample ``name`` names
    (full or short, with ``"sample:"`` or without), as :func:`sample_path` finds it; None
    where none does, several share a short name, or the data is missing."""
    try:
        matches = _matches(_key(name), sample_list())
    except ResourceError:
        return None
    return matches[0].name if len(matches) == 1 else None


def is_sample_spec(value: object) -> bool:
    """Whether ``value`` is a string of the form ``"sample:NAME"``."""
    return isinstance(value, str) and value.strip().startswith(SAMPLE_PREFIX)


def sample_path(name: str) -> Path:
    """The folder of a bundled sample.

    Parameters
    ----------
    name : str
        Full name (``"simulated/slow-rank"``), short name (``"slow-rank"``), either with
        the ``"sample:"`` prefix or without.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    UnknownSampleError
        No sample has that name, or a short name is shared by two samples; the message
        lists the names there are.
    perfkit.resources.ResourceError
        This installation lacks the bundled data.
    """
    key = _key(name)
    found = sample_list()
    matches = _matches(key, found)
    if len(matches) == 1:
        return matches[0].path
    if matches:
        raise UnknownSampleError("sample", f"{key!r} is the short name of several samples; "
                                 "give the full one: " + ", ".join(s.name for s in matches))
    listed = ", ".join(f"{s.short_name} ({s.name})" if s.short_name != s.name else s.name
                       for s in found) or "none"
    raise UnknownSampleError("sample", f"no bundled sample is called {key!r}; the samples "
                             f"are: {listed} (listed by perfkit.samples())")


def resolve_sample(path: str | os.PathLike[str]) -> str | os.PathLike[str] | Path:
    """``"sample:NAME"`` -> the sample's folder; anything else is returned unchanged.

    The few lines every entry point that takes a profile path runs first
    (:func:`perfkit.load`, ``perfkit info``, ``perfkit report``, ``perfkit serve``).

    Raises
    ------
    UnknownSampleError
        ``"sample:"`` followed by a name no sample has.
    """
    if is_sample_spec(path):
        return sample_path(str(path))
    return path


def sample_hint(text: str | os.PathLike[str]) -> str:
    """Where ``text`` is a bundled sample's name written without ``sample:``
    (``slow-rank``, ``simulated/slow-rank``: the names the dashboard's list and
    :func:`samples` show), the clause that says how to open it; ``""`` otherwise."""
    name = str(text).strip()
    try:
        known = sample_list()
    except ResourceError:  # no bundled data: no hint
        return ""
    match = next((smp for smp in known if name in (smp.name, smp.short_name)), None)
    return (f" (the bundled sample of that name is opened as {SAMPLE_PREFIX}"
            f"{match.short_name})" if match is not None else "")


def path_not_found(text: str | os.PathLike[str]) -> str:
    """The message of a profile path that does not exist, as every command says it:
    ``"profile path not found: slow-rank"`` and :func:`sample_hint`'s clause."""
    return f"profile path not found: {text}{sample_hint(text)}"
