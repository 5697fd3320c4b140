"""A folder of several profiles: which rank sources can be ranks of one job, and which
profiles lie deeper than a parent folder's scan reaches.

:func:`perfkit.io.engines.local.load` merges the ranks it finds up to two levels below a folder.
A folder that collects unrelated profiles (a samples folder, a project's test fixtures)
must not be merged into one job, nor be read as the one profile the scan happens to reach.
Two rules, applied before the facts of :mod:`perfkit.io.detect.runs` tell runs apart:

- **One layout.** The ranks of one job are written the same way at the same place: one
  format (all Ascend text exports, all Kineto traces, ...) held at one depth below the
  folder (``job/rank0_ascend_pt`` and ``job/rank1_ascend_pt``; or ``job/node0/rank0...``
  and ``job/node1/rank8...``). Sources of different formats, or held at different depths,
  are separate profiles (:func:`layout_parts`). A bare ``kernel_details.csv`` folder whose
  rank nothing records (not its files, not its name) records no time either, so nothing
  ties it to another: it is a profile of its own.
- **Nothing left below.** A folder whose sub-folders hold profiles deeper than the scan
  reaches (three levels or more) is a folder of profiles, not a job: those profiles are
  listed too (:func:`frontier`), so a load never silently takes the few the scan reached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...errors import ProfileError
from .._common.files import loops_back
from ..ascend import rank as ascend
from ..cann import paths as cann_paths
from .runs import SourceFacts
from .sources import RankSource

__all__ = ["layout_parts", "frontier", "place_of", "deeper_members", "start_key", "Members",
           "cluster_outputs"]

#: The files that make a folder msprof-analyze output (``cluster_analysis_output/``).
_CLUSTER_FILES = ("cluster_step_trace_time.csv", "cluster_communication.json")

#: Runs as their rank sources and the facts of each (what :func:`perfkit.io.detect.runs.make_runs`
#: turns into runs).
Members = list[tuple[list[RankSource], list[SourceFacts]]]

#: Sources that are no rank of a profile (they follow the runs of their folder).
_ASIDE = ("not_a_trace", "unreadable")


def place_of(source: RankSource) -> Path:
    """The folder that holds a source's rank: the folder of a trace file, the parent of an
    Ascend rank folder (or of a raw CANN ``PROF_*`` folder), a legacy MindSpore folder
    itself (its files are the ranks)."""
    path = Path(source.path)
    if source.fmt == "mindspore_legacy":
        return path
    if source.fmt == "ascend_db":  # {rank}/ASCEND_PROFILER_OUTPUT/x.db
        rank_dir = path.parent.parent if path.parent.name == ascend.OUTPUT_DIR else path.parent
        return rank_dir.parent
    if source.fmt == "cann_raw" and path.is_dir() and cann_paths.is_device_dir(path) \
            and cann_paths.is_prof_dir(path.parent):
        return path.parent.parent
    return path.parent


def _depth(root: Path, folder: Path) -> int:
    try:
        return len(folder.relative_to(root).parts)
    except ValueError:
        return -1


def _alone(source: RankSource) -> bool:
    """A bare Ascend output (``kernel_details.csv`` outside any rank folder) whose rank
    neither its files nor its name record: nothing says which job it belongs to."""
    return source.fmt == "ascend_text" and source.rank is None and \
        ascend.is_bare_output(Path(source.path))


def layout_parts(root: Path, sources: Sequence[RankSource]) -> list[list[int]]:
    """Positions of ``sources`` (ranks, before their unknown ranks are numbered) split by
    layout: one part per format and depth of the folder holding each rank; a bare
    Ascend output of unknown rank is a part of its own. Parts in order of first position.
    """
    parts: dict[tuple[object, ...], list[int]] = {}
    for i, s in enumerate(sources):
        key: tuple[object, ...] = ("alone", s.path) if _alone(s) else (
            s.fmt, _depth(root, place_of(s)))
        parts.setdefault(key, []).append(i)
    return list(parts.values())


def frontier(root: Path, is_profile: Callable[[Path], bool], depth: int = 2) -> list[Path]:
    """Folders ``depth`` levels below ``root`` that a parent-folder scan does not enter
    (neither they nor the folders above them are a profile), which hold a profile below.

    ``is_profile``: whether a folder is one profile by itself (a rank folder, a legacy
    MindSpore folder, ...). Hidden folders and ``cluster_analysis_output`` are skipped, as
    the scan skips them.
    """
    level = [root]
    for _ in range(depth):
        nxt: list[Path] = []
        for folder in level:
            nxt.extend(c for c in _subfolders(folder) if not is_profile(c))
        level = nxt
    return [f for f in level if _holds_profile(f, is_profile, 4, set())]


def _subfolders(folder: Path) -> list[Path]:
    try:
        children = sorted(folder.iterdir())
    except OSError:
        return []
    out = []
    for c in children:
        try:
            if not c.name.startswith(".") and c.name != "cluster_analysis_output" \
                    and c.is_dir() and not loops_back(c):
                out.append(c)
        except OSError:
            continue
    return out


def _holds_profile(folder: Path, is_profile: Callable[[Path], bool], levels: int,
                   seen: set[Path]) -> bool:
    """Whether ``folder`` or a folder up to ``levels`` below it holds a profile (a trace
    file, msprof-analyze output, or a folder that is a profile)."""
    try:
        real = folder.resolve()
    except OSError:
        return False
    if real in seen:  # a link back up the tree
        return False
    seen.add(real)
    if is_profile(folder) or (folder / "cluster_analysis_output").is_dir():
        return True
    try:
        names = [c.name.lower() for c in folder.iterdir() if c.is_file()]
    except OSError:
        return False
    if any(n.endswith((".json", ".json.gz")) or n in _CLUSTER_FILES for n in names):
        return True
    return levels > 0 and any(_holds_profile(c, is_profile, levels - 1, seen)
                              for c in _subfolders(folder))


def start_key(member: tuple[Sequence[RankSource], Sequence[SourceFacts]]) -> tuple[int, int]:
    """Sort key of a run: earliest first, those whose start is not known last."""
    starts = [f.start_ns for f in member[1] if f.start_ns is not None]
    return (0, min(starts)) if starts else (1, 0)


def deeper_members(root: Path, find: Callable[[Path], tuple[str, Path, Members]],
                   is_profile: Callable[[Path], bool], levels: int
                   ) -> list[tuple[str, Path, Members]]:
    """The profiles below ``root`` deeper than its scan reaches (:func:`frontier`), as
    ``find`` of each folder holding them: ``(kind, folder, runs)``. A folder that cannot
    be read is an ``unreadable`` run that says why (never dropped in silence); one that
    holds nothing known after all is left out. ``levels``: folders of profiles within
    folders of profiles still looked into (0: none).
    """
    if levels <= 0:
        return []
    out: list[Any] = []
    for folder in frontier(root, is_profile):
        try:
            out.append(find(folder))
        except ProfileError as exc:
            if exc.problem.startswith("no profile found"):
                continue
            bad = RankSource("unreadable", str(folder), error=exc.problem)
            out.append(("cluster", folder, [([bad], [SourceFacts("unreadable")])]))
    return out


def cluster_outputs(root: Path, sources: Sequence[RankSource]
                    ) -> list[tuple[str, Path, Members]]:
    """msprof-analyze outputs in the sub-folders of ``root`` that hold no rank found
    (``sub/cluster_analysis_output/``, or ``sub/`` holding its files), as ``(kind, folder,
    runs)``: a profile of their own, which the scan of ``root`` does not read (it leaves a
    ``cluster_analysis_output`` beside ranks to them)."""
    out: list[Path] = []
    for sub in _subfolders(root):
        if any(Path(s.path) == sub or sub in Path(s.path).parents for s in sources):
            continue
        if any((sub / f).is_file() for f in _CLUSTER_FILES):
            out.append(sub)
        elif (sub / "cluster_analysis_output").is_dir():
            out.append(sub / "cluster_analysis_output")
    kind = "cluster_analysis_output"
    return [(kind, o, [([RankSource(kind, str(o))], [SourceFacts(kind)])]) for o in out]
