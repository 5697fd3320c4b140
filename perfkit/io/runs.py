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
  not known, :data:`RUN_GAP_S` after the last start) starts a new run;
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
:func:`perfkit.load` leaves out with a note. :func:`perfkit.io.detect.find_runs` gives
each to the runs with ranks in its folder (those holding the rank its name ends with, when
one does), and to none when its folder holds no profile.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._common import json_head
from .sources import RankSource

__all__ = ["Run", "SourceFacts", "source_facts", "facts_from_meta", "group_runs",
           "RUN_GAP_S", "pick_run"]

RUN_GAP_S = 600.0
"""Seconds between two starts that separate runs when the files' ends are not known.

The ranks of one job start their profilers within the same few steps (seconds apart);
separate runs of a tuning session are minutes to days apart."""

_OVERLAP_SLACK_NS = 1_000_000_000
"""A file starting less than this after the run's last end still belongs to it (clocks of
different hosts disagree by up to a fraction of a second)."""

_TAIL_BYTES = 1 << 16
_GZ_TAIL_MAX_BYTES = 64 << 20
"""A gzipped trace is inflated to read its tail only up to this compressed size."""


@dataclass(frozen=True)
class SourceFacts:
    """What one rank source says about the run it belongs to (None: not known)."""

    platform: str
    framework: str | None = None
    rank: int | None = None
    world_size: int | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    steps: tuple[int, ...] = ()
    #: sources with the same value were written by one job and stay in one run (the rank
    #: files of one legacy MindSpore folder: its path); None: told apart on their own
    together: str | None = None


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


# ----------------------------------------------------------------------------- facts

_PLATFORM = {"kineto": "kineto", "ascend_text": "ascend", "ascend_db": "ascend",
             "trace_view": "ascend", "mindspore_legacy": "ascend"}
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
_ASCEND_TS = re.compile(r"_(\d{17})_ascend_(pt|ms)$")


def source_facts(source: RankSource, read: bool = True) -> SourceFacts:
    """The facts of one rank source, before parsing.

    ``read``: open Kineto files (first MiB, last 64 KiB) and a raw CANN device's
    ``start_info`` / ``end_info``; without it only names count.
    """
    platform = _PLATFORM.get(source.fmt, source.fmt)
    if source.fmt == "kineto":
        facts = _kineto_facts(Path(source.path)) if read else {}
        return SourceFacts(platform, "pytorch", source.rank, **facts)
    if source.fmt == "cann_raw":
        from .cann_raw import collection_window  # loaded already by detection

        start, end = collection_window(Path(source.path)) if read else (None, None)
        return SourceFacts(platform, None, source.rank, start_ns=start, end_ns=end)
    framework = None
    start = None
    name = Path(source.path).name
    db = re.match(r"ascend_(pytorch|mindspore)_profiler", name)
    if db:
        framework = db.group(1)
    m = _ASCEND_TS.search(name)
    if m:
        framework = "pytorch" if m.group(2) == "pt" else "mindspore"
        start = _ascend_stamp(m.group(1))
    elif name.endswith("_ascend_pt"):
        framework = "pytorch"
    elif name.endswith("_ascend_ms") or source.fmt == "mindspore_legacy":
        framework = "mindspore"
    together = source.path if source.fmt == "mindspore_legacy" else None
    return SourceFacts(platform, framework, source.rank, start_ns=start, together=together)


def facts_from_meta(meta: Any) -> SourceFacts:
    """The facts of a parsed rank (its :class:`~perfkit.profile.ProfileMeta`).

    A world size worked out from the rank's own communication groups (an Ascend export,
    ``extra["world_size_from"] == "groups"``) is left out: it is only at least the job's,
    and the ranks of one dp × pp job disagree on it.
    """
    extra = meta.extra or {}
    world = None if extra.get("world_size_from") == "groups" else meta.world_size
    return SourceFacts(_PLATFORM.get(meta.source_format, meta.source_format),
                       meta.framework, meta.rank, world, meta.origin_ns,
                       extra.get("end_ns"), tuple(extra.get("profiler_steps") or ()))


def _ascend_stamp(stamp: str) -> int | None:
    """``20240602101530123`` (the Ascend profiler's folder time, local clock) as ns."""
    try:
        t = _dt.datetime.strptime(stamp, "%Y%m%d%H%M%S%f").replace(tzinfo=_dt.timezone.utc)
    except ValueError:
        return None
    return int(t.timestamp() * 1e9)


_BASE = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d{1,20})')
_WORLD = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"world_size"\s*:\s*(\d{1,9})')
_TS = re.compile(rb'"ts"\s*:\s*"?(\d{1,20}(?:\.\d*)?)')
_EPOCH_US = 1e14
"""A Kineto ``ts`` above this many µs (1973) is already epoch time (PyTorch < 2.0)."""


def _kineto_facts(path: Path) -> dict[str, Any]:
    """World size, start and end (absolute ns) of a Kineto trace from its two ends."""
    head, whole = _head(path)
    events = head.find(b'"traceEvents"')
    first = [float(t) for t in _TS.findall(head[max(events, 0):][:1 << 16])]
    # the head tells the start when the trace has its time base there, or epoch times
    need_base = _BASE.search(head) is None and not (first and min(first) >= _EPOCH_US)
    tail = head if whole else _tail(path, need_base=need_base)
    out: dict[str, Any] = {}
    m = _WORLD.search(head) or (_WORLD.search(tail) if tail else None)
    if m:
        out["world_size"] = int(m.group(1))
    b = _BASE.search(head) or (_BASE.search(tail) if tail else None)
    base = int(b.group(1)) if b else 0
    last = [float(t) for t in _TS.findall(tail)] if tail else []
    if first:
        out["start_ns"] = _abs_ns(min(first), base)
    if last:
        out["end_ns"] = _abs_ns(max(last), base)
    if (out.get("start_ns") is None) != (out.get("end_ns") is None):
        out.pop("end_ns", None)  # one end on another clock than the other: not used
    return out


def _abs_ns(ts_us: float, base_ns: int) -> int | None:
    """Absolute epoch ns of a Kineto ``ts`` (µs), or None when its epoch is not known."""
    if ts_us >= _EPOCH_US:
        return int(round(ts_us * 1000))
    if base_ns:
        return int(round(ts_us * 1000)) + base_ns
    return None


def _head(path: Path) -> tuple[bytes, bool]:
    return json_head(path)


def _tail(path: Path, need_base: bool) -> bytes:
    """The last 64 KiB of the (decompressed) file; b"" when too costly or unreadable.

    A gzipped file must be inflated whole to reach its end: done only when its head does
    not tell the start (some writers put ``baseTimeNanoseconds`` last) and the file is not
    larger than :data:`_GZ_TAIL_MAX_BYTES`; otherwise its end is not known and runs are
    told apart by their starts (:data:`RUN_GAP_S`).
    """
    try:
        with open(path, "rb") as fh:
            magic = fh.read(2)
            size = fh.seek(0, 2)
            if magic != b"\x1f\x8b":
                fh.seek(max(0, size - _TAIL_BYTES))
                return fh.read(_TAIL_BYTES)
            if size > _GZ_TAIL_MAX_BYTES or not need_base:
                return b""
            fh.seek(0)
            inflate = zlib.decompressobj(31)
            keep = b""
            while True:
                chunk = fh.read(1 << 20)
                if not chunk:
                    break
                out = inflate.decompress(chunk)
                keep = (keep + out)[-_TAIL_BYTES:]
                while inflate.eof and inflate.unused_data:  # a next gzip member
                    rest = inflate.unused_data
                    inflate = zlib.decompressobj(31)
                    keep = (keep + inflate.decompress(rest))[-_TAIL_BYTES:]
            return keep
    except (OSError, zlib.error):
        return b""


# ----------------------------------------------------------------------------- grouping

def group_runs(facts: Sequence[SourceFacts]) -> list[list[int]]:
    """Positions of ``facts`` grouped into runs, the runs in start order.

    See the module docstring for the rules. Positions keep their order inside a run.
    """
    keys: dict[tuple[Any, ...], list[int]] = {}
    for i, f in enumerate(facts):
        keys.setdefault((f.platform, f.framework), []).append(i)
    flat: list[list[int]] = []
    for members in keys.values():
        for same_world in _by_world(members, facts):
            for in_time in _by_time(same_world, facts):
                for distinct_ranks in _by_rank(in_time, facts):
                    flat.extend(g for g in _by_steps(distinct_ranks, facts) if g)

    def first(g: list[int]) -> tuple[int, int, int]:
        starts = [facts[i].start_ns for i in g if facts[i].start_ns is not None]
        return (0 if starts else 1, min(starts) if starts else 0, min(g))
    return sorted((sorted(g) for g in flat), key=first)


def _by_world(members: list[int], facts: Sequence[SourceFacts]) -> list[list[int]]:
    worlds = sorted({facts[i].world_size for i in members if facts[i].world_size})
    if len(worlds) <= 1:
        return [members]
    out = {w: [i for i in members if facts[i].world_size == w] for w in worlds}
    unknown = [i for i in members if not facts[i].world_size]
    # a file that does not say its world size joins the group it overlaps in time, else
    # the first one
    for i in unknown:
        target = next((w for w, g in out.items() if _overlaps(i, g, facts)), worlds[0])
        out[target].append(i)
    return [sorted(g) for g in out.values()]


def _overlaps(i: int, group: list[int], facts: Sequence[SourceFacts]) -> bool:
    f = facts[i]
    if f.start_ns is None:
        return False
    for j in group:
        g = facts[j]
        if g.start_ns is None:
            continue
        a0, a1 = f.start_ns, f.end_ns if f.end_ns is not None else f.start_ns
        b0, b1 = g.start_ns, g.end_ns if g.end_ns is not None else g.start_ns
        if a0 <= b1 + _OVERLAP_SLACK_NS and b0 <= a1 + _OVERLAP_SLACK_NS:
            return True
        if (f.end_ns is None or g.end_ns is None) and abs(a0 - b0) <= RUN_GAP_S * 1e9:
            return True
    return False


def _by_time(members: list[int], facts: Sequence[SourceFacts]) -> list[list[int]]:
    timed = sorted((i for i in members if facts[i].start_ns is not None),
                   key=lambda i: facts[i].start_ns)  # type: ignore[arg-type,return-value]
    untimed = [i for i in members if facts[i].start_ns is None]
    runs: list[list[int]] = []
    last_end: int | None = None
    last_start: int | None = None
    ends_known = True
    for i in timed:
        f = facts[i]
        start = int(f.start_ns)  # type: ignore[arg-type]
        if runs:
            if ends_known and f.end_ns is not None and last_end is not None:
                new = start > last_end + _OVERLAP_SLACK_NS
            else:
                new = last_start is not None and start - last_start > RUN_GAP_S * 1e9
            if new:
                runs.append([])
                last_end, ends_known = None, True
        else:
            runs.append([])
        runs[-1].append(i)
        last_start = start
        if f.end_ns is None:
            ends_known = False
        else:
            last_end = f.end_ns if last_end is None else max(last_end, f.end_ns)
    if untimed:
        if runs:
            runs[0].extend(untimed)  # nothing tells them apart: with the first run
        else:
            runs.append(untimed)
    return runs


def _by_rank(members: list[int], facts: Sequence[SourceFacts]) -> list[list[int]]:
    """A rank seen twice starts another run (files in start order).

    Sources written together (:attr:`SourceFacts.together`: the ranks of one legacy
    folder) move as one: they join the first run that has none of their ranks.
    """
    order = sorted(members, key=lambda i: (facts[i].start_ns is None, facts[i].start_ns or 0,
                                           i))
    units: list[list[int]] = []
    by_key: dict[str, list[int]] = {}
    for i in order:
        key = facts[i].together
        if key is None:
            units.append([i])
        elif key in by_key:
            by_key[key].append(i)
        else:
            by_key[key] = [i]
            units.append(by_key[key])
    runs: list[list[int]] = []
    seen: list[set[int]] = []
    for unit in units:
        mine = {facts[i].rank for i in unit if facts[i].rank is not None}
        for run, ranks in zip(runs, seen, strict=True):
            if not ranks & mine:
                run.extend(unit)
                ranks |= mine
                break
        else:
            runs.append(list(unit))
            seen.append(set(mine))
    return runs


def _by_steps(members: list[int], facts: Sequence[SourceFacts]) -> list[list[int]]:
    """Ranks whose recorded steps share no number with the others' are another run."""
    with_steps = [i for i in members if facts[i].steps]
    if len(with_steps) < 2:
        return [members]
    groups: list[tuple[set[int], list[int]]] = []
    for i in with_steps:
        mine = set(facts[i].steps)
        for steps, g in groups:
            if steps & mine:
                steps |= mine
                g.append(i)
                break
        else:
            groups.append((set(mine), [i]))
    if len(groups) == 1:
        return [members]
    out = [g for _, g in groups]
    out[0].extend(i for i in members if not facts[i].steps)
    return out


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
