"""Separate runs in one folder: told apart before anything is merged.

A folder often collects the traces of several runs (yesterday's and today's, a 1-GPU test
beside the 8-GPU job, two profiler versions). Merged, they read as one job with too many
ranks, steps missing on some and a memory curve spread over days. :func:`group_runs` splits
the rank sources of a folder into :class:`Run` s by what each file says about itself
(:class:`SourceFacts`, read cheaply from its first and last bytes, or from its parsed
``meta`` after loading):

- **the profiler and framework**: a PyTorch (Kineto) trace and an Ascend export are not one
  run, nor are a PyTorch and a MindSpore export;
- **the world size** (``distributedInfo.world_size``): ranks of one job agree on it;
- **time**: the ranks of one job record the same steps, so their traces overlap in time. A
  file that starts after every file of the run before it has ended (or, when the ends are
  not known, :data:`RUN_GAP_S` after the last start) starts a new run. Start times alone
  never join an Ascend folder without a rank id or world size to a run (a MindSpore CPU
  profile writes neither): its end is read from its ``trace_view.json``, and when that is
  not known either, it is a run of its own;
- **ranks**: one run cannot hold one rank twice: a second file claiming a rank the run
  already has starts a new run (in time order). The ranks of one legacy MindSpore folder
  (its ``*_{rank}`` files, written by one job) stay together: the folder joins a run only
  when none of its ranks is already there;
- **step numbering** (after parsing): ranks that recorded steps and share no step number
  with the run's other ranks are another run.

Runs are numbered 0, 1, ... in start order; each has a ``name`` (its start time in UTC,
``20240602-101530``, or its first rank's file or folder, relative to the folder opened,
when the time is unknown) and a ``label`` for people.

Files beside the ranks that are not profiles (a run's ``environment.json``, MindSpore's
``parallel_strategy_{rank}.json``) are no ranks: they are the run's ``side_files``, which
:func:`perfkit.load` leaves out with a note. :func:`perfkit.io.detect.paths.find_runs`
gives each to the runs with ranks in its folder (those holding the rank its name ends with,
when one does), and to none when its folder holds no profile.

The facts are read by :mod:`perfkit.io.detect.run_facts` and the sources grouped by
:mod:`perfkit.io.detect.group_runs`; this module makes the :class:`Run` s, names and labels them,
and picks one (:func:`pick_run`).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .group_runs import (
    RUN_GAP_S,
    group_runs,
)

# what each source says about its run, and the grouping by it: modules of their own, every
# name still importable from here
from .run_facts import (
    SourceFacts,
    facts_from_meta,
    source_facts,
)
from .sources import RankSource

__all__ = ["Run", "SourceFacts", "source_facts", "facts_from_meta", "group_runs",
           "RUN_GAP_S", "pick_run"]


@dataclass(frozen=True)
class Run:
    """One run found in a folder: the ranks of one job, recorded together.

    Attributes
    ----------
    id : int
        Position in start order (0 is the earliest); ``pk.load(path, run=id)``.
    name : str
        Start time in UTC (``20240602-101530``), or the first file's name when unknown;
        ``pk.load(path, run=name)``.
    label : str
        For people: profiler, framework, ranks, world size and start.
    ranks : tuple
        Ranks known before parsing (None where a file does not say), one per entry of
        ``paths``.
    framework, platform : str or None
        ``"pytorch"`` / ``"mindspore"``; ``"kineto"`` / ``"ascend"`` ...
    world_size : int or None
    start_ns, end_ns : int or None
        Absolute epoch nanoseconds of the first event and last event, when known.
    paths : tuple of str
        The file or folder of each of its ranks (one folder holds several ranks of legacy
        MindSpore output).
    side_files : tuple of str
        Files beside its ranks that are not profiles (``environment.json``,
        ``parallel_strategy_{rank}.json``): no ranks; ``load`` leaves them out with a note.
    where : str
        The folder holding its ranks, relative to the folder opened (``""``: that folder;
        ``"ascend/msinsight-pt-level1"`` in a folder of several profiles).
    formats : tuple of str
        The formats of its ranks (``"ascend_text"``, ``"kineto"``, ...).
    """

    id: int
    name: str
    label: str
    ranks: tuple[int | None, ...]
    framework: str | None
    platform: str
    world_size: int | None
    start_ns: int | None
    end_ns: int | None
    paths: tuple[str, ...]
    side_files: tuple[str, ...] = ()
    where: str = ""
    formats: tuple[str, ...] = ()
    sources: tuple[RankSource, ...] = field(default=(), compare=False, repr=False)

    @property
    def start(self) -> _dt.datetime | None:
        """Start as an aware UTC datetime (None when unknown)."""
        return None if self.start_ns is None else _dt.datetime.fromtimestamp(
            self.start_ns / 1e9, tz=_dt.timezone.utc)

    def to_dict(self) -> dict[str, Any]:
        """Plain fields (what a run picker shows), without the rank sources."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name != "sources"}
        out["ranks"] = list(self.ranks)
        out["paths"] = list(self.paths)
        out["side_files"] = list(self.side_files)
        out["formats"] = list(self.formats)
        out["start"] = None if self.start is None else self.start.isoformat()
        return out


# ----------------------------------------------------------------------------- words

#: How a label names a platform that is not a plain word (the rest are named as they are).
_PLATFORM_WORDS = {"cann_raw": "raw CANN output",
                   "cluster_analysis_output": "msprof-analyze cluster output"}
#: How a label names the format of a run found below the folder opened.
_FORMAT_WORDS = {"ascend_text": "Ascend text export", "ascend_db": "Ascend DB export",
                 "trace_view": "trace_view.json", "mindspore_legacy": "legacy MindSpore files",
                 "kineto": "Kineto traces", "cann_raw": "raw CANN output",
                 "cluster_analysis_output": "msprof-analyze cluster output"}
#: Formats of sources that are not ranks with a profile: a run never takes its platform
#: from them, and its label never names them.
_NOT_PROFILES = ("not_a_trace", "unreadable")


# ----------------------------------------------------------------------------- runs

def make_runs(members: Sequence[tuple[Sequence[RankSource], Sequence[SourceFacts]]],
              root: str | Path | None = None) -> list[Run]:
    """:class:`Run` s from each run's sources and their facts, in the order given.

    A run's sources that are not profiles (``fmt="not_a_trace"``) are its ``side_files``,
    not ranks. ``root``: the folder opened; a run whose start is unknown is named after
    its first rank's path relative to it (else after that path's last part).
    """
    runs: list[Run] = []
    names: set[str] = set()
    for k, (srcs, fs) in enumerate(members):
        pairs = [(s, f) for s, f in zip(srcs, fs, strict=True) if s.fmt != "not_a_trace"]
        side = [s for s in srcs if s.fmt == "not_a_trace"]
        rank_srcs = [s for s, _ in pairs]
        rank_fs = [f for _, f in pairs]
        starts = [f.start_ns for f in rank_fs if f.start_ns is not None]
        ends = [f.end_ns for f in rank_fs if f.end_ns is not None]
        start = min(starts) if starts else None
        worlds = sorted({f.world_size for f in rank_fs if f.world_size})
        frameworks = sorted({f.framework for f in rank_fs if f.framework})
        first = rank_srcs[0].path if rank_srcs else (side[0].path if side else str(k))
        name = base = _name(start, first, root)
        n = 1
        while name in names:
            n += 1
            name = f"{base}-{n}"
        names.add(name)
        ranks = tuple(s.rank for s in rank_srcs)
        platform = next((f.platform for f in rank_fs if f.platform not in _NOT_PROFILES),
                        rank_fs[0].platform if rank_fs else "")
        formats = tuple(dict.fromkeys(s.fmt for s in rank_srcs))
        where = _where([s.path for s in rank_srcs], root)
        label = _label(k, platform, frameworks, ranks, worlds, start)
        words = ", ".join(_FORMAT_WORDS.get(f, f) for f in formats)
        if where:  # a run below the folder opened: where, and in which format
            label += f", in {where}" + (f" ({words})" if words and words not in label else "")
        runs.append(Run(
            id=k, name=name, label=label,
            ranks=ranks, framework=frameworks[0] if len(frameworks) == 1 else None,
            platform=platform, world_size=worlds[0] if len(worlds) == 1 else None,
            start_ns=start,
            end_ns=max(ends) if ends and len(ends) == len(rank_fs) else None,
            paths=tuple(s.path for s in rank_srcs), side_files=tuple(s.path for s in side),
            where=where, formats=formats, sources=(*rank_srcs, *side)))
    return runs


def _where(paths: Sequence[str], root: str | Path | None) -> str:
    """The folder holding ``paths`` relative to ``root`` ("" when it is ``root``, or
    ``root`` is not given): their common folder; a lone file's folder."""
    if root is None or not paths:
        return ""
    common = Path(os.path.commonpath([str(p) for p in paths]))
    if len(paths) == 1 and Path(paths[0]).is_file():
        common = common.parent
    try:
        rel = common.relative_to(Path(root)).as_posix()
    except ValueError:
        return ""
    return "" if rel == "." else rel


def _name(start: int | None, first_path: str, root: str | Path | None = None) -> str:
    if start is not None:
        return _dt.datetime.fromtimestamp(start / 1e9, tz=_dt.timezone.utc).strftime(
            "%Y%m%d-%H%M%S")
    path = Path(first_path)
    if root is not None:
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            rel = ""
        if rel not in ("", "."):
            return rel
    return path.name


def _label(k: int, platform: str, frameworks: list[str], ranks: tuple[int | None, ...],
           worlds: list[int], start: int | None) -> str:
    """``run 1: ascend mindspore, 4 ranks (0-3), start unknown``: in words, the count of
    ranks that of those listed (plus those whose rank is not known, said so)."""
    known = sorted(r for r in ranks if r is not None)
    unknown = len(ranks) - len(known)
    if platform == "cluster_analysis_output":  # its ranks are in its tables
        who = "ranks read from its tables"
    elif not ranks:
        who = "no ranks"
    elif len(ranks) == 1:
        who = f"rank {known[0]}" if known else "1 rank (not known)"
    else:
        parts = ([_span(known)] if known else []) + (
            [f"{unknown} not known"] if unknown else [])
        who = f"{len(ranks)} ranks ({', '.join(parts)})"
    world = f", world size {worlds[0]}" if len(worlds) == 1 else ""
    when = (", started " + _dt.datetime.fromtimestamp(start / 1e9, tz=_dt.timezone.utc)
            .strftime("%Y-%m-%d %H:%M:%S UTC")) if start is not None else ", start unknown"
    prof = _PLATFORM_WORDS.get(platform, platform)
    if platform in _NOT_PROFILES or not prof:
        prof = "unreadable output"
    what = f"{prof} {'/'.join(frameworks)}" if frameworks else f"{prof}, framework unknown"
    return f"run {k}: {what}, {who}{world}{when}"


def _span(ranks: list[int]) -> str:
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ", ".join(map(str, ranks))


def pick_run(runs: Sequence[Run], run: Any, where: Any,
             error: Callable[[Any, str], Exception]) -> Run:
    """The run ``run`` names: its id (int), its name, or a path of one of its ranks."""
    if isinstance(run, Run):
        run = run.id
    if isinstance(run, bool):
        raise error(where, f"run={run!r}: expected a run id (0..{len(runs) - 1}) or name")
    if isinstance(run, int) or (isinstance(run, str) and run.isdigit()
                                and not any(r.name == run for r in runs)):
        i = int(run)
        if 0 <= i < len(runs):
            return runs[i]
    else:
        text = str(run)
        for r in runs:
            if text in (r.name, r.label) or any(Path(p).name == text or p == text
                                                for p in r.paths):
                return r
    listing = "; ".join(f"{r.id} = {r.name!r} ({r.label})" for r in runs)
    raise error(where, f"run={run!r} is not among the runs found: {listing}")
