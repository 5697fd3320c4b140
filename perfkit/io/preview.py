"""The steps of a profile in a fraction of its load: what the dashboard shows first.

A profile of a gigabyte takes seconds to parse whole, but its step table comes from small
files, or from a few hundred events of its trace. :func:`preview` reads only that:

- an **Ascend text export** (``*_ascend_pt`` / ``*_ascend_ms``): ``step_trace_time.csv``,
  the same reader and the same table as :func:`perfkit.load` (computing, communication,
  overlap, free, bubble per step);
- an **msprof-analyze** ``cluster_analysis_output/``: the rank rows of
  ``cluster_step_trace_time.csv``, as :func:`perfkit.load` reads them;
- a **PyTorch Kineto trace** (``.json`` / ``.json.gz``): the host ``ProfilerStep#N``
  spans (:func:`kineto_step_spans`), found by a byte scan of the file: each occurrence
  of ``"ProfilerStep#`` is decoded as the one JSON event around it, the rest of the file
  is never parsed. The step time is then the span's duration (``total_us``); the full
  load counts a step from its first to its last device task, a little shorter, and only
  it gives the split (computing, communication, free), which stays NA here.

Other formats (Ascend DB, legacy MindSpore, raw CANN, a standalone ``trace_view.json``)
have no quick step reading: their preview has no profile, only the size to read.

The preview's :attr:`Preview.profile` is a :class:`~perfkit.Profile` (or
:class:`~perfkit.Cluster`) whose only table is ``steps``: every analysis of the steps
(:func:`perfkit.analysis.step_breakdown`, :func:`perfkit.analysis.measured_step_s`) works
on it as on the full profile. Nothing is written anywhere (no cache entry either).
"""

from __future__ import annotations

import gzip
import json
import mmap
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..bundled_samples import resolve_sample
from ..errors import ProfileError, RunsFound, file_boundary
from ..format import counted
from ..profile import Cluster, Profile, ProfileMeta
from . import ascend, cache
from ._common import collecting_notes
from .categories import DEVICE_KINDS, KINETO_KINDS
from .detect import _key, find_runs
from .runs import pick_run
from .sources import RankSource, cluster_meta, input_bytes

__all__ = ["Preview", "preview", "kineto_step_spans", "describe", "FINAL_STEPS"]

#: ``meta.extra`` key of a rank's steps-only Profile whose steps are the full load's table
#: (not an approximation): :attr:`Preview.steps_final` holds when every rank has it.
FINAL_STEPS = "preview_steps_final"

#: What a Kineto step event is named (``ProfilerStep#12``), as bytes of the file.
_STEP_KEY = b'"ProfilerStep#'
_STEP_RE = re.compile(r"^ProfilerStep#(\d{1,9})$")
#: Bytes read at a time, and the context kept around each hit to decode its event.
_CHUNK = 64 << 20
_CONTEXT = 16 << 10
_DECODER = json.JSONDecoder()
#: Kineto categories whose ProfilerStep copies are not the host's span (the device lane's
#: ``gpu_user_annotation`` copy runs from the step's first to its last kernel).
_NOT_HOST = {c for c, kind in KINETO_KINDS.items()
             if kind in (*DEVICE_KINDS, "gpu_user_annotation")}


@dataclass
class Preview:
    """What :func:`preview` read.

    Attributes
    ----------
    path : str
        The path opened.
    kind : str
        ``"profile"``, ``"cluster"`` or ``"cluster_analysis_output"`` (:func:`perfkit.io.
        detect.detect`).
    profile : Profile, Cluster or None
        The ranks' ``steps`` tables (no other table); None when no rank has a quick step
        reading.
    input_bytes : int
        Size of the files the full load reads.
    cached : bool
        Every rank has a parsed copy in perfkit's cache (the full load will be fast).
    steps_from : str
        Where the steps were read (one phrase for people), empty without a profile.
    seconds : float
        How long the preview took.
    notes : list of str
        Ranks without a quick step reading, and why.
    steps_final : bool
        Every rank's steps were read, each one as the full load reads it (the same reader
        on the same file), so ``profile.steps`` is the full load's table (less the rows of
        a rank that then fails to load). False for an approximation (a Kineto trace's host
        ``ProfilerStep`` spans) or when some rank has no quick reading.
        ``perfkit.load(..., wait=False)`` serves ``steps`` early only when it is True.
    """

    path: str
    kind: str
    profile: Profile | Cluster | None
    input_bytes: int
    cached: bool = False
    steps_from: str = ""
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    steps_final: bool = False


def preview(path: str | os.PathLike[str], run: Any = None, *, read_steps: bool = True
            ) -> Preview:
    """The step table of the profile at ``path``, without loading the rest.

    Parameters
    ----------
    path : str or path-like
        What :func:`perfkit.load` accepts (``"sample:NAME"`` too).
    run : int, str or Run, optional
        Which run of a folder of several runs, as for :func:`perfkit.load`.
    read_steps : bool
        False: only find the ranks and the size of their files (no file is read).

    Returns
    -------
    Preview

    Raises
    ------
    RunsFound
        The folder holds several runs and ``run`` picks none (as :func:`perfkit.load`).
    ProfileError
        The path holds no profile, or a step file exists but cannot be read.
    """
    t0 = time.perf_counter()
    path = resolve_sample(path)
    root = Path(path).expanduser()
    kind, found = find_runs(path)
    if kind == "cluster_analysis_output":
        folder = Path(found[0].sources[0].path)
        size = _folder_bytes(folder)
        profile = _cluster_output_steps(folder) if read_steps else None
        return Preview(str(root), kind, profile, size, steps_from=(
            "cluster_step_trace_time.csv" if profile is not None else ""),
            seconds=time.perf_counter() - t0, steps_final=profile is not None)
    if len(found) > 1 and run is None:
        raise RunsFound(root, found)
    chosen = found[0] if run is None else pick_run(found, run, root, ProfileError)
    sources = [s for s in chosen.sources if s.fmt not in ("not_a_trace", "unreadable")]
    size = input_bytes(sources)
    cached = bool(sources) and cache.usable_for(root) and all(
        cache.entry_path(_key(s)).is_dir() for s in sources)
    out = Preview(str(root), kind, None, size, cached=cached)
    if read_steps:
        profiles, froms = [], set()
        for s in sources:
            got = _rank_steps(s)
            if got is None:
                out.notes.append(f"{Path(s.path).name}: " + _NO_STEPS.get(
                    s.fmt, f"no quick step reading for its format ({s.fmt})"))
                continue
            profiles.append(got[0])
            froms.add(got[1])
        if profiles:
            out.profile = profiles[0] if kind == "profile" and len(sources) == 1 else \
                Cluster(profiles, cluster_meta(root, profiles, {}))
            out.steps_from = " and ".join(sorted(froms))
            out.steps_final = len(profiles) == len(sources) and all(
                p.meta.extra.get(FINAL_STEPS) for p in profiles)
    out.seconds = time.perf_counter() - t0
    return out


_NO_STEPS = {"kineto": "no ProfilerStep#N event: its steps come with the full load",
             "ascend_text": "no step_trace_time.csv: its steps come with the full load"}


def _folder_bytes(folder: Path) -> int:
    total = 0
    for f in folder.rglob("*"):
        try:
            total += f.stat().st_size if f.is_file() else 0
        except OSError:
            continue
    return total


def _rank_steps(source: RankSource) -> tuple[Profile, str] | None:
    """One rank's steps-only Profile and where its steps came from, or None."""
    if source.fmt == "ascend_text":
        rank_dir = ascend.rank_dir_of(Path(source.path))
        out = rank_dir / ascend.OUTPUT_DIR
        if not out.is_dir():
            out = Path(source.path)
        f = out / "step_trace_time.csv"
        if not f.is_file():
            return None
        with file_boundary(f, "step_trace_time.csv"):
            steps = ascend.read_step_trace(f)
        meta = ProfileMeta("ascend_text", rank=source.rank, device_type="npu",
                           path=str(rank_dir), notes=[f"preview: steps of {f.name} only"],
                           extra={FINAL_STEPS: True})  # the full load's reader and file
        return Profile(meta, {"steps": steps}), "step_trace_time.csv"
    if source.fmt == "kineto":
        f = Path(source.path)
        spans = kineto_step_spans(f)
        if spans.empty:
            return None
        steps = pd.DataFrame({"step": spans["step"].to_numpy(),
                              "total_us": spans["dur_us"].to_numpy(np.float64),
                              "computing_us": np.nan})
        meta = ProfileMeta("kineto", framework="pytorch", rank=source.rank,
                           device_type="gpu", path=str(f),
                           notes=["preview: step time = the host ProfilerStep span; the split "
                                  "needs the device tasks of the full load"])
        return Profile(meta, {"steps": steps}), "the ProfilerStep spans"
    return None


def _cluster_output_steps(folder: Path) -> Cluster | None:
    """The rank steps of an msprof-analyze output (``cluster_step_trace_time.csv``)."""
    from . import cluster_output

    f = folder / "cluster_step_trace_time.csv"
    if not f.is_file():
        return None
    with collecting_notes(), file_boundary(f, "cluster_step_trace_time.csv of msprof-analyze"):
        steps, _stages = cluster_output._steps(f)
    profiles = []
    for rank, part in steps.groupby("rank", sort=True):
        meta = ProfileMeta("cluster_analysis_output", rank=int(rank), device_type="npu",
                           path=str(folder), notes=["preview: steps only"])
        profiles.append(Profile(meta, {"steps": part.drop(columns="rank")}))
    if not profiles:
        return None
    return Cluster(profiles, cluster_meta(folder, profiles, {}))


def kineto_step_spans(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The host ``ProfilerStep#N`` spans of a Kineto trace, by a byte scan of the file.

    Each occurrence of ``"ProfilerStep#`` is decoded as the one JSON object around it
    (the innermost ``{`` before it whose object reaches past it); the events kept are
    complete events (``ph`` ``"X"``) of a host category: the copy Kineto draws on the
    device lane (``gpu_user_annotation``) is left out, as :mod:`perfkit.io.kineto` does.
    The file is read in chunks (a ``.gz`` decompressed as it is read) and never parsed
    whole.

    Parameters
    ----------
    path : str or path-like
        A Kineto ``.json`` or ``.json.gz`` trace.

    Returns
    -------
    pandas.DataFrame
        ``step`` (int), ``ts_us`` (the event's ``ts`` as written, µs), ``dur_us``; one row
        per step number (its first span), sorted by ``ts_us``. Empty when there is none.

    Raises
    ------
    ProfileError
        The file cannot be read.
    """
    p = Path(path)
    rows: dict[int, tuple[float, float]] = {}
    with file_boundary(p, p.name):
        if p.name.lower().endswith(".gz"):
            _scan_stream(p, rows)
        elif p.stat().st_size:
            with open(p, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                _scan(mm, 0, len(mm), rows)
    out = pd.DataFrame([(s, ts, dur) for s, (ts, dur) in rows.items()],
                       columns=["step", "ts_us", "dur_us"])
    out["step"] = out["step"].astype("int64")
    return out.sort_values("ts_us", kind="stable").reset_index(drop=True)


def _scan(buf: Any, pos: int, limit: int, rows: dict[int, tuple[float, float]]) -> int:
    """Decode the step events whose key starts in ``buf[pos:limit]`` (bytes or mmap) into
    ``rows`` (the first span of each step number); return where the scan stopped."""
    while (hit := buf.find(_STEP_KEY, pos)) >= 0 and hit < limit:
        event = _event_at(buf, hit)
        if event is not None:
            rows.setdefault(event[0], event[1:])
        pos = hit + len(_STEP_KEY)
    return limit


def _scan_stream(p: Path, rows: dict[int, tuple[float, float]]) -> None:
    """:func:`_scan` over a compressed file, decompressed chunk by chunk."""
    with gzip.open(p, "rb") as fh:
        carry, base, done = b"", 0, 0  # base: file offset of buf[0]; done: hits handled
        while True:
            chunk = fh.read(_CHUNK)
            buf = carry + chunk
            limit = len(buf) if not chunk else max(len(buf) - _CONTEXT, 0)
            done = base + _scan(buf, max(done - base, 0), limit, rows)
            if not chunk:
                return
            carry = buf[-2 * _CONTEXT:]
            base += len(buf) - len(carry)


def _event_at(buf: Any, hit: int) -> tuple[int, float, float] | None:
    """(step, ts, dur) of the host ProfilerStep event around ``buf[hit]``, or None."""
    lo = max(0, hit - _CONTEXT)
    upper = hit
    for _ in range(64):
        start = buf.rfind(b"{", lo, upper)
        if start < 0:
            return None
        upper = start
        text = buf[start:hit + _CONTEXT].decode("utf-8", "replace")
        try:
            obj, end = _DECODER.raw_decode(text)
        except ValueError:
            continue
        if end <= hit - start or not isinstance(obj, dict):
            continue  # an object that ends before the name: an earlier one encloses it
        return _step_event(obj)
    return None


def _step_event(obj: dict[str, Any]) -> tuple[int, float, float] | None:
    name = obj.get("name")
    m = _STEP_RE.match(name) if isinstance(name, str) else None
    if m is None or obj.get("ph") != "X":
        return None
    if str(obj.get("cat", "")).strip().lower() in _NOT_HOST:
        return None
    try:
        ts, dur = float(obj["ts"]), float(obj["dur"])
    except (KeyError, TypeError, ValueError):
        return None
    if not (np.isfinite(ts) and np.isfinite(dur)) or dur < 0:
        return None
    return int(m.group(1)), ts, dur


def describe(p: Preview) -> str:
    """One sentence for people: what the preview read (used by the dashboard)."""
    if p.profile is None:
        return "no quick step reading for this format"
    ranks = getattr(p.profile, "ranks", None) or [p.profile.meta.rank]
    return (f"steps of {counted(len(ranks), 'rank')} from {p.steps_from} in "
            f"{p.seconds:.1f} s")
