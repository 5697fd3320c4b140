"""The steps of a profile in a fraction of its load: what the dashboard shows first.

A profile of a gigabyte takes seconds to parse whole, but its step table comes from small
files, or from a few hundred events of its trace. :func:`preview` reads only that:

- an **Ascend text export** (``*_ascend_pt`` / ``*_ascend_ms``): ``step_trace_time.csv``,
  the same reader and the same table as :func:`perfkit.load` (computing, communication,
  overlap, free, bubble per step);
- an **msprof-analyze** ``cluster_analysis_output/``: the rank rows of
  ``cluster_step_trace_time.csv``, as :func:`perfkit.load` reads them;
- a **PyTorch Kineto trace** (``.json`` / ``.json.gz``): the step time :func:`perfkit.load`
  gives, each ``ProfilerStep#N`` from the first to the last device task it launched and
  the device's wait before the first (:func:`kineto_device_steps`: the tasks whose
  runtime launch, same ``correlation``, ran in the host span), read by decoding only
  ``ph``, ``cat``, ``ts``, ``dur`` and ``args.correlation`` of each event; the split
  (computing, communication, free) needs the tasks' names and stays NA. That is a pass
  over the whole file, a fifth to a third of the full load's time
  (``benchmarks/README.md``), so it is the default up to
  :data:`DEVICE_STEPS_MAX_BYTES` of traces (256 MiB). Above it (or with
  ``device_steps=False``) the step figure is the host ``ProfilerStep#N`` span
  (:func:`kineto_step_spans`, a byte scan: each occurrence of ``"ProfilerStep#`` decoded
  as the one JSON event around it, the rest never parsed), which is the host's pace, not
  the step time (up to 14 % apart in a step on the shared samples): :attr:`Preview.host_spans` is
  then True and the page must say which it shows. Where the trace also holds the copy of
  each ``ProfilerStep#N`` range Kineto draws on the device lane (``gpu_user_annotation``,
  written by recent PyTorch versions), that copy is the step figure above the limit
  instead (:attr:`Preview.device_lane`): the device's pace, read by the same byte scan. A trace
  without any device task in its steps (a CPU-only run) has its host spans as step times,
  as in the full load. A rank already in perfkit's cache gives the steps table of its
  cache entry, the split included. The copy of a range Kineto draws on the device lane
  (``gpu_user_annotation``) is not used: it can leave out kernels launched inside the range
  under a nested range with a copy of its own (on the shared B200 trace an outer range's
  copy lasts 84.04 ms, the kernels launched in it 84.49 ms, the last one an all-gather
  under ``nccl:_all_gather_base``); on the two shared traces with a ``ProfilerStep`` copy
  it matches the device step within 2 ns. So it is used only above the limit, where the
  alternative is the host span, and labelled as the device lane's range.
  A trace **without** ``ProfilerStep#N`` has its training iterations as steps, as in the
  full load: the windows are the loader's own (:func:`perfkit.io.kineto.iterations.
  optimizer_spans`: each ends where a host ``Optimizer.step#<Class>.step`` ends, the first
  begins at the trace's first host event), given the annotations (a byte scan for
  ``"Optimizer.step#``) and the start of every host event (the same pass as the device
  step), each iteration's step measured as a ProfilerStep's, with a ``step_mark`` column
  naming the annotation (so the step's basis says the steps were inferred). That needs
  the pass over the whole file, so it is read with the device steps only (up to
  :data:`DEVICE_STEPS_MAX_BYTES`); above it such a trace has no quick reading.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..bundled_samples import resolve_sample
from ..errors import ProfileError, RunsFound, file_boundary
from ..format import counted
from ..profile import Cluster, Profile, ProfileMeta
from . import ascend, cache
from ._common import collecting_notes, to_ns
from .categories import DEVICE_KINDS, KINETO_KINDS
from .detect import _key, find_runs
from .kineto.iterations import FROM_OPTIMIZER, OPTIMIZER_STEP, optimizer_spans
from .runs import pick_run
from .sources import RankSource, cluster_meta, input_bytes
from .trace_tables import device_wait_us, step_index, step_spans

__all__ = ["Preview", "preview", "kineto_step_spans", "kineto_device_steps", "describe",
           "DEVICE_STEPS_MAX_BYTES", "FINAL_STEPS"]

#: ``meta.extra`` key of a rank's steps-only Profile whose steps are the full load's table
#: (not an approximation): :attr:`Preview.steps_final` holds when every rank has it.
FINAL_STEPS = "preview_steps_final"

#: Up to this many bytes of Kineto traces, :func:`preview` reads the device step by default
#: (:func:`kineto_device_steps`, a fifth to a third of the full load's time: see
#: benchmarks/README.md);
#: above it, the host ProfilerStep spans (a byte scan, a few hundred events decoded),
#: labelled as such.
DEVICE_STEPS_MAX_BYTES = 256 << 20
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
    host_spans : bool
        The step times are Kineto host ``ProfilerStep`` spans, not the step time the full
        load reports (first to last device task of each step): the page must say so.
        False when every step time read is the full load's.
    device_lane : bool
        The step times (of some ranks at least) are the ``ProfilerStep#N`` ranges Kineto
        draws on the device lane (``gpu_user_annotation``): the device's pace, read above
        :data:`DEVICE_STEPS_MAX_BYTES` instead of the host span. Kineto extends such a
        range only over the kernels launched directly under it, so a nested range with a
        device-lane copy of its own can end it early: close to, not always equal to, the
        full load's step time (equal within 2 ns on the two shared traces that have it).
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
    host_spans: bool = False
    device_lane: bool = False


def preview(path: str | os.PathLike[str], run: Any = None, *, read_steps: bool = True,
            device_steps: bool | None = None) -> Preview:
    """The step table of the profile at ``path``, without loading the rest.

    Parameters
    ----------
    path : str or path-like
        What :func:`perfkit.load` accepts (``"sample:NAME"`` too).
    run : int, str or Run, optional
        Which run of a folder of several runs, as for :func:`perfkit.load`.
    read_steps : bool
        False: only find the ranks and the size of their files (no file is read).
    device_steps : bool, optional
        For a Kineto trace, True reads each step's device tasks (:func:`kineto_device_steps`,
        a pass over the whole file) to give the step time the full load gives; False only
        the host ``ProfilerStep`` spans (a byte scan), labelled as such
        (:attr:`Preview.host_spans`). Default: True when the run's files add up to at most
        :data:`DEVICE_STEPS_MAX_BYTES`, whose pass stays within about a second.

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
    if device_steps is None:
        device_steps = size <= DEVICE_STEPS_MAX_BYTES
    if read_steps:
        profiles, froms = [], set()
        for s in sources:
            why: list[str] = []
            got = _cached_steps(s) if cached else None
            got = got or _rank_steps(s, device_steps, why)
            if got is None:
                out.notes.append(f"{Path(s.path).name}: " + (why[0] if why else _NO_STEPS.get(
                    s.fmt, f"no quick step reading for its format ({s.fmt})")))
                continue
            profiles.append(got[0])
            froms.add(got[1])
        bases = {p.meta.extra.get("preview_steps") for p in profiles}
        if "host" in bases and bases - {"host", None}:
            # one figure over the ranks: every Kineto rank's host span, none mixed in
            profiles, froms = _host_spans_only(sources, profiles, froms)
            bases = {p.meta.extra.get("preview_steps") for p in profiles}
        out.host_spans = "host" in bases
        out.device_lane = "device_lane" in bases
        if profiles:
            out.profile = profiles[0] if kind == "profile" and len(sources) == 1 else \
                Cluster(profiles, cluster_meta(root, profiles, {}))
            out.steps_from = " and ".join(sorted(froms))
            out.steps_final = len(profiles) == len(sources) and all(
                p.meta.extra.get(FINAL_STEPS) for p in profiles)
    out.seconds = time.perf_counter() - t0
    return out


def _cached_steps(source: RankSource) -> tuple[Profile, str] | None:
    """The steps table of a Kineto rank's cache entry (what the full load will read back),
    or None where it cannot be read."""
    if source.fmt != "kineto":
        return None
    f = cache.entry_path(_key(source)) / "steps.parquet"
    try:
        steps = cache.read_table_file(f)
    except Exception:  # noqa: BLE001 - a missing or damaged entry: the full load rebuilds it
        return None
    meta = ProfileMeta("kineto", framework="pytorch", rank=source.rank, device_type="gpu",
                       path=str(source.path), notes=["preview: steps of perfkit's cache"],
                       extra={"preview_steps": "cached"})
    return Profile(meta, {"steps": steps}), _FROM_CACHE


def _host_spans_only(sources: list[RankSource], profiles: list[Profile], froms: set[str]
                     ) -> tuple[list[Profile], set[str]]:
    """The ranks again, every Kineto rank by its host spans (see :func:`preview`)."""
    by_path = {str(Path(s.path)): s for s in sources}
    out, where = [], froms - {*_KINETO_FROM.values(), _FROM_CACHE}
    for p in profiles:
        if p.meta.extra.get("preview_steps") in ("device", "host_is_step", "cached",
                                                  "device_lane"):
            got = _kineto_rank_steps(by_path[p.meta.path], device=False, lane=False)
            if got is not None:
                p = got[0]
        out.append(p)
        if p.meta.source_format == "kineto":
            where.add(_KINETO_FROM[p.meta.extra.get("preview_steps", "host")])
    return out, where


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


def _rank_steps(source: RankSource, device: bool = True, why: list[str] | None = None
                ) -> tuple[Profile, str] | None:
    """One rank's steps-only Profile and where its steps came from, or None (``why``
    then says why, where more than the format's :data:`_NO_STEPS` can be said)."""
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
        return _kineto_rank_steps(source, device, why=why)
    return None


def _kineto_rank_steps(source: RankSource, device: bool, lane: bool = True,
                       why: list[str] | None = None) -> tuple[Profile, str] | None:
    """A Kineto rank's steps: the device steps where they can be read, else (``lane``) the
    device-lane copies of the steps, else the host spans (``meta.extra["preview_steps"]``
    says which, see :attr:`Preview.host_spans` and :attr:`Preview.device_lane`). A trace
    without ``ProfilerStep`` has its optimizer's iterations as steps, with the device steps
    only (:func:`_iteration_rank_steps`); None otherwise, and ``why`` says why."""
    f = Path(source.path)
    rows, lane_rows = _step_events(f)
    spans = _first_spans(rows)
    if spans.empty:
        rule: list[str] = []
        got = _iteration_rank_steps(source, f, rule) if device else None
        if got is None and why is not None:
            why.append(_no_iterations(rule, device))
        return got
    found = _device_steps(f, rows) if device else None
    on_lane = _lane_steps(lane_rows, spans) if lane and found is None else None
    if on_lane is not None:
        steps = _measured_steps(on_lane)
        basis, note = "device_lane", (
            "preview: step time = the ProfilerStep range Kineto draws on the device lane "
            "(gpu_user_annotation), the device's pace, and the device's wait before it; the "
            "full load's step (first to last device task the step launched, and the wait "
            "before) and the split follow")
    elif found is not None and len(found):
        steps = _measured_steps(found)
        basis, note = "device", ("preview: step time = first to last device task of each "
                                 "ProfilerStep and the device's wait before the first, as "
                                 "the full load; the split needs the device tasks' names, "
                                 "read by the full load")
    else:
        steps = pd.DataFrame({"step": spans["step"].to_numpy(),
                              "total_us": spans["dur_us"].to_numpy(np.float64),
                              "computing_us": np.nan})
        if found is not None:  # spans but no device task in any: the loader's step too
            basis, note = "host_is_step", ("preview: step time = the ProfilerStep span (no "
                                           "device task in the trace's steps), as the full "
                                           "load")
        else:
            basis, note = "host", ("preview: the host ProfilerStep span, not the step time "
                                   "(first to last device task), which comes with the full "
                                   "load; the split too")
    meta = ProfileMeta("kineto", framework="pytorch", rank=source.rank,
                       device_type="gpu", path=str(f), notes=[note],
                       extra={"preview_steps": basis})
    return Profile(meta, {"steps": steps}), _KINETO_FROM[basis]


def _measured_steps(found: pd.DataFrame) -> pd.DataFrame:
    """The preview's steps table of measured steps (``step``, ``total_us``,
    ``preparing_us``): the split (``computing_us``) needs the device tasks' names, read by
    the full load."""
    return pd.DataFrame({"step": found["step"].to_numpy(np.int64),
                         "total_us": found["total_us"].to_numpy(np.float64),
                         "computing_us": np.nan,
                         "preparing_us": found["preparing_us"].to_numpy(np.float64)})


def _no_iterations(rule: list[str], device: bool) -> str:
    """Why a trace without ``ProfilerStep`` has no preview: ``rule`` holds the note of
    :func:`~perfkit.io.kineto.iterations.optimizer_spans` where its annotations tell no
    iteration; ``device``: whether they were looked for."""
    if rule:
        why = "; " + rule[0].removeprefix("steps: ")
    elif device:
        why = " nor optimizer iterations (Optimizer.step#<Class>.step annotations)"
    else:
        why = ("; the optimizer's iterations are read only with the device steps "
               f"(device_steps, by default up to {DEVICE_STEPS_MAX_BYTES >> 20} MiB of "
               "traces)")
    return f"no ProfilerStep#N event{why}; its steps come with the full load"


_FROM_CACHE = "perfkit's cache"
#: Where a Kineto rank's preview steps come from, by basis (``meta.extra["preview_steps"]``).
_KINETO_FROM = {"device": "the device tasks of each ProfilerStep",
                "device_lane": "the ProfilerStep ranges on the device lane",
                "host_is_step": "the ProfilerStep spans",
                "host": "the host ProfilerStep spans",
                "iterations": "the device tasks of each training iteration, inferred from "
                              + FROM_OPTIMIZER,
                "iteration_spans": "the training iterations' spans, inferred from "
                                   + FROM_OPTIMIZER}


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
    return _first_spans(_host_spans(Path(path)))


def _first_spans(rows: list[tuple[int, float, float]]) -> pd.DataFrame:
    """:func:`kineto_step_spans`' frame from every span found: each step's first."""
    first: dict[int, tuple[float, float]] = {}
    for step, ts, dur in rows:
        first.setdefault(step, (ts, dur))
    out = pd.DataFrame([(s, ts, dur) for s, (ts, dur) in first.items()],
                       columns=["step", "ts_us", "dur_us"])
    out["step"] = out["step"].astype("int64")
    return out.sort_values("ts_us", kind="stable").reset_index(drop=True)


def _host_spans(p: Path) -> list[tuple[int, float, float]]:
    """Every host ProfilerStep span of the trace (step, ts, dur), in file order."""
    return _step_events(p)[0]


def _step_events(p: Path) -> tuple[list[tuple[int, float, float]],
                                    list[tuple[int, float, float]]]:
    """The trace's ProfilerStep events (step, ts, dur) in file order: the host spans, and
    the copies on the device lane (``gpu_user_annotation``); one byte scan."""
    found: list[tuple[int, float, float, bool]] = []
    with file_boundary(p, p.name):
        if p.name.lower().endswith(".gz"):
            _scan_stream(p, found)
        elif p.stat().st_size:
            with open(p, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                _scan(mm, 0, len(mm), found)
    return ([r[:3] for r in found if not r[3]],  # type: ignore[misc]
            [r[:3] for r in found if r[3]])  # type: ignore[misc]


def _lane_steps(lane: list[tuple[int, float, float]], spans: pd.DataFrame
                ) -> pd.DataFrame | None:
    """Each host step's range on the device lane (``step``, ``total_us``: the earliest
    start to the latest end of its copies; ``preparing_us``: the device's wait before it,
    :func:`~perfkit.io.trace_tables.device_wait_us`); None when no step has one."""
    known = set(spans["step"].tolist())
    copies: dict[int, list[tuple[float, float]]] = {}
    for step, ts, dur in lane:
        if step in known:
            copies.setdefault(step, []).append((ts, dur))
    if not copies:
        return None
    order = [s for s in spans["step"].tolist() if s in copies]
    total, first = [], []
    for s in order:
        # measured from the first start (ts - lo is exact), not as end - start of two
        # epoch-sized numbers, whose float sum would round the µs fraction
        lo = min(ts for ts, _ in copies[s])
        first.append(lo)
        total.append(max((ts - lo) + dur for ts, dur in copies[s]))
    out = pd.DataFrame({"step": order, "total_us": total})
    # the wait before each range, as the loader measures it before each device window
    start = _ns(first)
    win = pd.DataFrame({"step": order, "start_ns": start,
                        "end_ns": start + np.round(np.asarray(total) * 1000).astype(np.int64)})
    win = win.sort_values("start_ns", kind="stable")
    host = pd.DataFrame({"step": spans["step"], "start_ns": _ns(spans["ts_us"].tolist())})
    wait = device_wait_us(win, host)
    out["preparing_us"] = out["step"].map(wait).to_numpy(np.float64)
    return out


def _scan(buf: Any, pos: int, limit: int, rows: list[Any], key: bytes = _STEP_KEY,
          read: Callable[[dict[str, Any]], Any] | None = None) -> int:
    """Decode the events (``read``, by default :func:`_step_event`) whose ``key`` starts in
    ``buf[pos:limit]`` (bytes or mmap) into ``rows``; return where the scan stopped."""
    read = read or _step_event
    while (hit := buf.find(key, pos)) >= 0 and hit < limit:
        event = _event_at(buf, hit, read)
        if event is not None:
            rows.append(event)
        pos = hit + len(key)
    return limit


def _scan_stream(p: Path, rows: list[tuple[int, float, float, bool]]) -> None:
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


def _event_at(buf: Any, hit: int, read: Callable[[dict[str, Any]], Any]) -> Any:
    """What ``read`` (:func:`_step_event`: step, ts, dur, on the device lane) makes of the
    event around ``buf[hit]``, or None."""
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
        return read(obj)
    return None


def _step_event(obj: dict[str, Any]) -> tuple[int, float, float, bool] | None:
    name = obj.get("name")
    m = _STEP_RE.match(name) if isinstance(name, str) else None
    if m is None or obj.get("ph") != "X":
        return None
    cat = str(obj.get("cat", "")).strip().lower()
    on_lane = KINETO_KINDS.get(cat) == "gpu_user_annotation"
    if cat in _NOT_HOST and not on_lane:
        return None
    try:  # a number as the loader's decoder reads it (msgspec: float64, ints included)
        ts, dur = float(obj["ts"]), float(obj["dur"])
    except (KeyError, TypeError, ValueError):
        return None
    if not (np.isfinite(ts) and np.isfinite(dur)) or dur < 0:
        return None
    return int(m.group(1)), ts, dur, on_lane


# ---- the device step: the tasks each ProfilerStep launched ---------------------------

class _TaskArgs(msgspec.Struct, gc=False):
    correlation: int | str | None = None


class _Task(msgspec.Struct, gc=False):
    """The fields of an event the device step needs, typed as the loader reads them
    (:mod:`perfkit.io.chrome`), so that every number converts to the same nanosecond."""

    ph: str = ""
    cat: int | str | None = None
    ts: float | str | None = None
    dur: float | str | None = None
    args: _TaskArgs | None = None


class _Tasks(msgspec.Struct):
    traceEvents: list[_Task] = msgspec.field(default_factory=list)  # noqa: N815


_TASKS = msgspec.json.Decoder(_Tasks)
_TASK_LIST = msgspec.json.Decoder(list[_Task])
_NA_NS = np.iinfo(np.int64).min
#: Lower-cased Kineto categories of device tasks and of runtime (launch) calls.
_DEVICE_CATS = frozenset(c for c, kind in KINETO_KINDS.items() if kind in DEVICE_KINDS)
_RUNTIME_CATS = frozenset(c for c, kind in KINETO_KINDS.items() if kind == "runtime")


def kineto_device_steps(path: str | os.PathLike[str]) -> pd.DataFrame | None:
    """The device step of each ``ProfilerStep#N`` of a Kineto trace, as :func:`perfkit.load`
    measures it.

    The definition is :mod:`perfkit.io.kineto`'s: a step's device tasks (kernels, memcpy,
    memset) are those whose runtime launch (the ``cuda_runtime`` / ``cuda_driver`` ...
    call with the same ``correlation``) started inside its host ``ProfilerStep#N`` span
    (each task by its own start where the trace records no launch at all); the step runs
    from its first task's start to its last task's end, in the loader's exact nanoseconds.
    A step holding a task without a duration has no known time (NaN), as in the loader.

    Only the fields this needs are decoded (``ph``, ``cat``, ``ts``, ``dur`` and
    ``args.correlation`` of every event, the rest of each event skipped by msgspec):
    three to five times faster than :func:`perfkit.load`, which builds every table, but
    still a pass over the whole file (``benchmarks/README.md`` has the figures). The loader's
    plausibility rules (:mod:`perfkit.io.validate`) are not applied: on a trace with
    garbled timestamps the two may differ.

    Parameters
    ----------
    path : str or path-like
        A Kineto ``.json`` or ``.json.gz`` trace.

    Returns
    -------
    pandas.DataFrame or None
        ``step`` (int), ``total_us`` (last task end minus first task start, µs) and
        ``preparing_us`` (the device's wait before the first task, as the loader measures
        it: :func:`~perfkit.io.trace_tables.device_wait_us`), sorted by the step's first
        task; an empty frame when the trace has ProfilerStep spans but
        no device task launched in any (the loader then takes the host span as the
        step); None when the trace has no ProfilerStep span, or its events cannot be
        decoded this way (the full load will say what is wrong).

    Raises
    ------
    ProfileError
        The file cannot be read.
    """
    p = Path(path)
    return _device_steps(p, _host_spans(p))


def _device_steps(p: Path, rows: list[tuple[int, float, float]]) -> pd.DataFrame | None:
    """:func:`kineto_device_steps` given the trace's host spans (:func:`_host_spans`)."""
    if not rows:
        return None
    with file_boundary(p, p.name):
        tasks = _decode_tasks(p)
    if tasks is None:
        return None
    return _device_windows(_profiler_spans(rows), tasks)


def _decode_tasks(p: Path) -> list[_Task] | None:
    """Every event of the trace with the fields of :class:`_Task`; None if it does not
    decode (damaged, or fields of unexpected types)."""
    with _trace_bytes(p) as data:
        return None if data is None else _decode_data(data)


@contextmanager
def _trace_bytes(p: Path) -> Iterator[Any]:
    """The trace's bytes: a ``.gz`` decompressed whole, else the file mapped (closed on
    exit); None for an empty file."""
    if p.name.lower().endswith(".gz"):
        with gzip.open(p, "rb") as fh:
            data: Any = fh.read()
        yield data
        return
    if not p.stat().st_size:
        yield None
        return
    with open(p, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        yield mm


def _decode_data(data: Any) -> list[_Task] | None:
    """:func:`_decode_tasks` of the trace's bytes (:func:`_trace_bytes`)."""
    head = bytes(data[:4096]).lstrip()
    if head[:3] == b"\xef\xbb\xbf":
        return None  # the loader re-encodes these; rare enough to wait for it
    try:
        if head[:1] == b"[":
            return _TASK_LIST.decode(data)
        return _TASKS.decode(data).traceEvents
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return None


def _ns(values: list[Any]) -> np.ndarray:
    """Absolute int64 nanoseconds of ``ts`` values, as the loader converts them."""
    try:
        arr = pa.array(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        arr = pa.array([None if v is None else str(v) for v in values], pa.string())
    ns = to_ns(arr, len(values))
    return pc.fill_null(ns, pa.scalar(_NA_NS, pa.int64())).to_numpy(zero_copy_only=False)


def _num(values: list[Any]) -> np.ndarray:
    """float64 of ``dur`` values (NaN where missing or not a number)."""
    try:
        return pa.array(values, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(
            np.float64)


def _profiler_spans(rows: list[tuple[int, float, float]]) -> pd.DataFrame:
    """The step windows (``step``, ``start_ns``, ``end_ns``) of host ProfilerStep spans, as
    the loader makes them (:func:`~perfkit.io.trace_tables.step_spans`)."""
    host = pd.DataFrame({"name": [f"ProfilerStep#{s}" for s, _, _ in rows],
                         "ts_ns": _ns([ts for _, ts, _ in rows]),
                         "dur_us": np.array([d for _, _, d in rows], np.float64)})
    return step_spans(host)


def _device_windows(spans: pd.DataFrame, tasks: list[_Task]) -> pd.DataFrame:
    """Per step, first task start to last task end (see :func:`kineto_device_steps`), of
    the step windows ``spans`` (``step``, ``start_ns``, ``end_ns``, sorted by start)."""
    none = pd.DataFrame({"step": pd.Series([], dtype="int64"), "total_us": [],
                         "preparing_us": []})
    # each distinct category worked out once: 1 a device task, 2 a runtime call, 0 other
    cats = list(map(attrgetter("cat"), tasks))
    lut = {c: _cat_code(c) for c in set(cats)}
    code = np.fromiter(map(lut.__getitem__, cats), np.int8, len(cats))
    del cats
    picked = np.flatnonzero(code)
    complete = np.fromiter(map("X".__eq__, map(attrgetter("ph"), _pick(tasks, picked))),
                           bool, len(picked))  # complete events only, as the loader
    is_dev = np.zeros(len(tasks), bool)
    is_rt = np.zeros(len(tasks), bool)
    is_dev[picked[complete]] = code[picked[complete]] == 1
    is_rt[picked[complete]] = code[picked[complete]] == 2
    dev = _pick(tasks, is_dev)
    if not dev:
        return none
    start = _ns(list(map(attrgetter("ts"), dev)))
    dur = _num(list(map(attrgetter("dur"), dev)))
    rt = _pick(tasks, is_rt)
    rt_corr = _corrs(rt)
    has = ~np.isnan(rt_corr)
    if has.any():
        launch = pd.Series(_ns([t.ts for t, ok in zip(rt, has, strict=True) if ok]),
                           index=rt_corr[has])
        launch = launch[~launch.index.duplicated()]  # a correlation's first runtime call
        at = launch.index.get_indexer(_corrs(dev))  # -1: no runtime call in the trace
        when = np.where(at >= 0, launch.to_numpy(np.int64)[np.maximum(at, 0)], _NA_NS)
    else:  # no runtime call recorded: each task by its own start
        when = start
    step = step_index(when, spans)
    known = ~np.isnan(step) & (start != _NA_NS)
    if not known.any():
        return none
    end = start + np.round(np.nan_to_num(dur) * 1000).astype(np.int64)
    frame = pd.DataFrame({"step": step[known].astype(np.int64), "s": start[known],
                          "e": end[known], "missing": np.isnan(dur[known])})
    win = frame.groupby("step").agg(s=("s", "min"), e=("e", "max"), missing=("missing", "any"))
    win = win.sort_values("s", kind="stable")
    e = np.maximum(win["e"].to_numpy(), win["s"].to_numpy() + 1)
    total = (e - win["s"].to_numpy()) / 1000.0
    total[win["missing"].to_numpy()] = np.nan
    steps = win.index.to_numpy(np.int64)
    # tasks of no step (launched before the trace, or outside every span) keep the device
    # busy: not a wait, as the loader counts it
    other = ~known & (start != _NA_NS)
    busy = (start[other], start[other] + np.round(np.nan_to_num(dur[other]) * 1000).astype(
        np.int64))
    wait = device_wait_us(pd.DataFrame({"step": steps, "start_ns": win["s"].to_numpy(),
                                        "end_ns": e}), spans, busy)
    return pd.DataFrame({"step": steps, "total_us": total,
                         "preparing_us": wait.to_numpy(np.float64)})


def _cat_code(cat: Any) -> int:
    """1 for a device task's category, 2 for a runtime call's, else 0."""
    if not isinstance(cat, str):
        return 0
    low = cat.strip().lower()
    return 1 if low in _DEVICE_CATS else 2 if low in _RUNTIME_CATS else 0


def _pick(tasks: list[_Task], where: np.ndarray) -> list[_Task]:
    """The events at ``where`` (a mask, or indices), in file order."""
    idx = np.flatnonzero(where) if where.dtype == bool else where
    if not len(idx):
        return []
    if len(idx) == 1:
        return [tasks[int(idx[0])]]
    return list(itemgetter(*idx.tolist())(tasks))


def _corrs(tasks: list[_Task]) -> np.ndarray:
    """The ``args.correlation`` of each event as float64 (NaN where it has none)."""
    values = [None if a is None else a.correlation for a in map(attrgetter("args"), tasks)]
    try:
        return pa.array(values, pa.int64()).to_numpy(zero_copy_only=False).astype(np.float64)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(
            np.float64)


# ---- a trace without ProfilerStep: its optimizer's iterations ------------------------

#: What marks a training iteration where no ProfilerStep does, as bytes of the file.
_OPTIMIZER_KEY = b'"Optimizer.step#'
#: Kinds (:data:`~perfkit.io.categories.KINETO_KINDS`) of the host events the loader
#: reads the optimizer's annotations from, and of those whose first start begins the
#: first iteration (with the runtime calls).
_HOST_KINDS = ("cpu_op", "user_annotation")
_FIRST_KINDS = (*_HOST_KINDS, "runtime")


def _iteration_rank_steps(source: RankSource, f: Path, notes: list[str]
                          ) -> tuple[Profile, str] | None:
    """The steps of a Kineto trace without ``ProfilerStep``: its training iterations, by
    the full load's rule (:func:`perfkit.io.kineto.iterations.optimizer_spans`), each one's
    device step measured as :func:`kineto_device_steps` measures a ProfilerStep's; where
    no device task was launched in any, the iteration's span, as the full load. The
    ``step_mark`` column (:data:`perfkit.analysis.steps.STEP_MARK`) names the annotation,
    as in the full load's steps table, so that :func:`perfkit.analysis.steps.step_basis`
    says the steps were inferred. None where the rule gives no step (``notes`` then says
    why, where the trace has some annotation)."""
    got = _iteration_steps(f, notes)
    if got is None:
        return None
    found, spans, mark = got
    if len(found):
        steps = _measured_steps(found)
        basis, note = "iterations", (
            "preview: step time = first to last device task of each training iteration "
            f"(no ProfilerStep: the iterations inferred from {FROM_OPTIMIZER}, {mark}, as "
            "the full load) and the device's wait before the first; the split needs the "
            "device tasks' names, read by the full load")
    else:
        steps = pd.DataFrame({"step": spans["step"].to_numpy(np.int64),
                              "total_us": (spans["end_ns"] - spans["start_ns"]).to_numpy(
                                  np.int64) / 1000.0,
                              "computing_us": np.nan})
        basis, note = "iteration_spans", (
            "preview: step time = the span of each training iteration (no ProfilerStep: "
            f"inferred from {FROM_OPTIMIZER}, {mark}; no device task in them), as the full "
            "load")
    # what ends each step (analysis.steps.STEP_MARK), as in the full load's table
    steps["step_mark"] = pd.array([mark] * len(steps), dtype="string")
    meta = ProfileMeta("kineto", framework="pytorch", rank=source.rank,
                       device_type="gpu", path=str(f), notes=[note],
                       extra={"preview_steps": basis})
    return Profile(meta, {"steps": steps}), _KINETO_FROM[basis]


def _iteration_steps(p: Path, notes: list[str]
                     ) -> tuple[pd.DataFrame, pd.DataFrame, str] | None:
    """(the device step of each iteration, as :func:`_device_windows` gives it; the
    iteration windows ``step``, ``start_ns``, ``end_ns``; the annotation's name) of a trace
    without ``ProfilerStep``, or None: no optimizer annotation (a byte scan finds them,
    :func:`_mark_event`), events that do not decode, or the rule of :mod:`perfkit.io.
    kineto.iterations` does not hold (it adds the reason to ``notes``).

    The iteration windows are the loader's own (:func:`~perfkit.io.kineto.iterations.
    optimizer_spans`), given the annotations and the start of every host operator,
    annotation and runtime call (the first of which begins the first iteration)."""
    found: list[tuple[str, Any, float, float]] = []
    with file_boundary(p, p.name), _trace_bytes(p) as data:  # one read for both
        if data is not None:
            _scan(data, 0, len(data), found, _OPTIMIZER_KEY, _mark_event)
        tasks = _decode_data(data) if found else None
    if tasks is None:
        return None
    marks = list(dict.fromkeys(found))  # an event found twice (its name in its args) once
    cpu = pd.DataFrame({"name": pd.array([m[0] for m in marks], dtype="string"),
                        "tid": pd.Series([m[1] for m in marks], dtype=object),
                        "ts_ns": _ns([m[2] for m in marks]),
                        "dur_us": np.array([m[3] for m in marks], np.float64)})
    first = pd.DataFrame({"ts_ns": _host_ns(tasks)})
    spans, mark = optimizer_spans(cpu, first, notes)
    if mark is None:
        return None
    return _device_windows(spans, tasks), spans, mark


def _mark_event(obj: dict[str, Any]) -> tuple[str, Any, float, float] | None:
    """(name, tid, ts, dur) of a host ``Optimizer.step#<Class>.step`` annotation (a
    complete event of a host category, as the loader selects them), or None: another
    event, or the annotation's copy on the device lane (``gpu_user_annotation``)."""
    name = obj.get("name")
    if not isinstance(name, str) or OPTIMIZER_STEP.match(name) is None or \
            obj.get("ph") != "X":
        return None
    if KINETO_KINDS.get(str(obj.get("cat", "")).strip().lower()) not in _HOST_KINDS:
        return None
    try:  # a number as the loader's decoder reads it (msgspec: float64, ints included)
        ts = float(obj["ts"])
    except (KeyError, TypeError, ValueError):
        return None
    try:
        dur = float(obj["dur"])
    except (KeyError, TypeError, ValueError):
        dur = float("nan")  # no known end: the loader leaves it out, as optimizer_spans
    tid = obj.get("tid")
    return name, tid if isinstance(tid, (int, str)) else str(tid), ts, dur


def _host_ns(tasks: list[_Task]) -> np.ndarray:
    """Start (ns, as the loader converts it) of every complete host operator, annotation
    and runtime call of the trace (:data:`_FIRST_KINDS`)."""
    cats = list(map(attrgetter("cat"), tasks))
    lut = {c: isinstance(c, str) and KINETO_KINDS.get(c.strip().lower()) in _FIRST_KINDS
           for c in set(cats)}
    host = _pick(tasks, np.fromiter(map(lut.__getitem__, cats), bool, len(cats)))
    return _ns([t.ts for t in host if t.ph == "X"])


def describe(p: Preview) -> str:
    """One sentence for people: what the preview read (used by the dashboard)."""
    if p.profile is None:
        return "no quick step reading for this format"
    ranks = getattr(p.profile, "ranks", None) or [p.profile.meta.rank]
    return (f"steps of {counted(len(ranks), 'rank')} from {p.steps_from} in "
            f"{p.seconds:.1f} s")
