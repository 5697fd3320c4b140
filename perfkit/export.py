"""Write one step of a profile as a Chrome trace that Perfetto UI and chrome://tracing open.

:func:`export_trace` takes the window the timeline shows (one step of one or a few ranks,
:func:`perfkit.analysis.timeline_window`) and writes every event of it, uncapped and
unclipped, in the Trace Event Format (the JSON object form)::

    {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}

- one process per rank (``pid`` = the rank, a ``process_name`` metadata event
  ``"rank 3"`` and a ``process_sort_index``);
- one thread per lane (``tid`` numbered from 1 within the rank, a ``thread_name``
  metadata event: ``"step 12"``, ``"stream 2"``, ``"no stream (HCCL)"``,
  ``"host thread 7"``); host operators nest on their thread (a call stack), while device
  tasks that overlap on a lane (concurrent send and receive, or tasks whose rounded
  timestamps overlap by a nanosecond) go to a numbered extra lane
  (``"no stream (HCCL) · 2"``): a trace viewer nests the slices of one thread, which
  would draw one task as a child of another, or cut it;
- one complete event (``ph: "X"``, ``ts`` and ``dur`` in µs) per device task and host
  operator, with ``cat`` = its category and ``args`` carrying its type, stream or thread,
  and its start on the profile's clock; plus one ``"step N"`` event per rank spanning the
  rank's window, on the first lane, after one :data:`WAIT_NAME` event where the device
  waits before the step's first task (:attr:`perfkit.analysis.timeline.TimelineWindow.wait_us`).

Times are µs from the window origin (the earliest window start of the ranks shown, the
wait before it included),
moved later by ``otherData.ts_offset_us`` when an event that overlaps the window began
before it, so that no timestamp is negative. ``otherData`` records the profile, the step,
the ranks, why they were chosen and ``origin_ns`` (the epoch nanoseconds the profile's
times count from).

perfkit never writes into the profile's own folder (nor next to a profile file), and never
replaces a file unless asked (``overwrite=True``).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .analysis.timeline import (
    TimelineWindow,
    pack_sublanes,
    timeline_window,
    window_events,
)
from .errors import InvalidArgumentError

__all__ = ["export_trace", "chrome_trace", "TraceExportError", "WAIT_NAME"]

#: Name of the event that marks the device's wait before a step's first task (data, launch).
WAIT_NAME = "wait before the first device task (data, launch)"


class TraceExportError(InvalidArgumentError):
    """The trace cannot be written where asked; the message names the path and why."""


def _lane(src: str, stream: Any, core: Any, thread: Any) -> tuple[tuple[Any, ...], str]:
    """Sort key and name of the lane of one event."""
    if src == "host":
        t = "?" if pd.isna(thread) else int(thread)
        return (3, -1 if t == "?" else t), f"host thread {t}"
    if pd.isna(stream):
        c = "?" if pd.isna(core) else str(core)
        return (2, c), f"no stream ({c})"
    return (1, int(stream)), f"stream {int(stream)}"


def _num(x: float) -> float:
    """µs rounded to the nanosecond (Chrome traces accept fractional µs)."""
    return round(float(x), 3)


def _args(row: Any, ws: float) -> dict[str, Any]:
    args: dict[str, Any] = {"start_us_on_profile_clock": _num(row.start_us)}
    if isinstance(row.type, str):
        args["type"] = row.type
    if not pd.isna(row.stream):
        args["stream"] = int(row.stream)
    if isinstance(row.core, str):
        args["core"] = row.core
    if not pd.isna(row.thread):
        args["thread"] = int(row.thread)
    if row.start_us < ws:
        args["began_before_window"] = True
    return args


def chrome_trace(profile: Any, step: int | None = None, ranks: Any = None,
                 host: bool | str = True, align: str = "common",
                 parallel: Any = None) -> dict[str, Any]:
    """The Chrome trace (Trace Event Format) of one step of some ranks, as a dict.

    Parameters
    ----------
    profile : Profile, Cluster or lazy cluster
    step, ranks, align
        As in :func:`perfkit.analysis.timeline_window` (default: the median-duration
        step of the slowest rank; the slowest and the fastest rank).
    host : bool or "auto"
        Include host operators (all nesting levels: a trace viewer nests them); ``"auto"``
        only for ranks without device tasks.
    parallel : ParallelSpec, optional
        The job's layout, as in :func:`perfkit.analysis.timeline_window`: the default
        slowest rank is named among its own pipeline stage's ranks, as every other page
        names it (:func:`perfkit.analysis.slowest_rank`).

    Returns
    -------
    dict
        ``traceEvents`` (metadata events first, then per rank and lane the complete events
        by start, longest first on a tie), ``displayTimeUnit`` ``"ms"`` and ``otherData``.
        Every event that overlaps a rank's window is there whole (the export is not
        capped and not clipped); ``json.dumps`` of it is the file :func:`export_trace`
        writes.
    """
    window = timeline_window(profile, step=step, ranks=ranks, align=align, parallel=parallel)
    events = window_events(profile, window, host=host)
    lead = 0.0
    for r in window.ranks:
        mine = _rows_of(events, r)
        if len(mine):
            lead = max(lead, window.origin_us[r] - float(mine["start_us"].min()))
    meta: list[dict[str, Any]] = []
    slices: list[dict[str, Any]] = []
    for order, r in enumerate(window.ranks):
        pid = 0 if r is None else int(r)
        meta.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                     "args": {"name": f"rank {'?' if r is None else r}"}})
        meta.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                     "args": {"sort_index": order}})
        shift = lead - window.origin_us[r]
        ws, we = window.start_us[r], window.end_us[r]
        marks = [{"ph": "X", "name": (f"step {window.step}" if window.step is not None
                                      else "window"), "cat": "step", "pid": pid,
                  "ts": _num(ws + shift), "dur": _num(we - ws),
                  "args": {"window_source": window.source[r],
                           "step_us": None if math.isnan(window.step_us.get(r, math.nan))
                           else _num(window.step_us[r])}}]
        wait = window.wait_us.get(r, 0.0)
        if wait > 0:  # the device's wait before the step's first task, just before it
            marks.insert(0, {"ph": "X", "name": WAIT_NAME, "cat": "step", "pid": pid,
                             "ts": _num(ws - wait + shift), "dur": _num(wait),
                             "args": {"wait_us": _num(wait)}})
        tracks: list[tuple[tuple[Any, ...], str, list[dict[str, Any]]]] = [
            ((0,), f"step {window.step}" if window.step is not None else "window", marks)]
        tracks += _lane_tracks(_rows_of(events, r), pid, shift, ws)
        tracks.sort(key=lambda t: t[0])
        for tid, (_, name, evs) in enumerate(tracks, start=1):
            meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                         "args": {"name": name}})
            meta.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                         "args": {"sort_index": tid}})
            for e in evs:
                e["tid"] = tid
            slices.extend(evs)
    other = _other_data(profile, window, lead)
    return {"traceEvents": meta + slices, "displayTimeUnit": "ms", "otherData": other}


def _rows_of(events: pd.DataFrame, rank: Any) -> pd.DataFrame:
    if rank is None:
        return events[events["rank"].isna().to_numpy(bool)]
    return events[(events["rank"] == rank).fillna(False).to_numpy(bool)]


def _lane_tracks(ev: pd.DataFrame, pid: int, shift: float, ws: float
                 ) -> list[tuple[tuple[Any, ...], str, list[dict[str, Any]]]]:
    """The lanes of one rank: (sort key, thread name, complete events), nested per lane."""
    if ev.empty:
        return []
    keys, names = zip(*(_lane(s, st, c, t) for s, st, c, t in zip(
        ev["source"], ev["stream"], ev["core"], ev["thread"], strict=True)), strict=True)
    ev = ev.assign(_key=list(keys), _name=list(names))
    out = []
    for (key, name), lane in ev.groupby(["_key", "_name"], sort=False):
        lane = lane.sort_values(["start_us", "dur_us"], ascending=[True, False],
                                kind="mergesort")
        ts = np.round(lane["start_us"].to_numpy(float) + shift, 3)
        end = np.round(lane["end_us"].to_numpy(float) + shift, 3)
        # a host thread is a call stack (nested slices); device tasks of a stream never nest
        sub = pack_sublanes(ts, end, nested=key[0] == 3)
        per_sub: dict[int, list[dict[str, Any]]] = {}
        for i, row in enumerate(lane.itertuples(index=False)):
            per_sub.setdefault(int(sub[i]), []).append({
                "ph": "X", "name": str(row.name), "cat": str(row.category), "pid": pid,
                "ts": float(ts[i]), "dur": _num(end[i] - ts[i]), "args": _args(row, ws)})
        for k, evs in sorted(per_sub.items()):
            out.append(((*key, k), name if k == 0 else f"{name} · {k + 1}", evs))
    return out


def _other_data(profile: Any, window: TimelineWindow, lead: float) -> dict[str, Any]:
    meta = profile.meta
    return {
        "producer": "perfkit", "source": str(meta.path),
        "source_format": meta.source_format, "step": window.step,
        "ranks": [None if r is None else int(r) for r in window.ranks],
        "why": window.reason,
        "origin_ns": None if meta.origin_ns is None else int(meta.origin_ns),
        "ts_offset_us": _num(lead),
        "time_base": ("ts = µs on the profile's clock (relative to origin_ns) minus the "
                      "window origin, plus ts_offset_us"),
        "window_origin_us": {str(r): _num(v) for r, v in window.origin_us.items()},
    }


# ----------------------------------------------------------------------------- writing

def _protected(profile: Any) -> list[Path]:
    """Folders perfkit must not write into: the profile's, and each rank's."""
    paths = [getattr(profile.meta, "path", "")]
    for p in getattr(profile, "profiles", []):
        paths.append(getattr(p.meta, "path", ""))
    out = []
    for p in paths:
        if not p:
            continue
        path = Path(p).expanduser().resolve()
        out.append(path if path.is_dir() else path.parent)
    return out


def _check_path(profile: Any, path: Any, overwrite: bool) -> Path:
    if path is None or isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise TraceExportError("path", "give the file to write, e.g. path='step.json' "
                               "(perfkit never picks a place in your folders)", path)
    target = Path(path).expanduser()
    if not str(target).strip() or target.name in ("", ".", ".."):
        raise TraceExportError("path", "must name a file", path)
    target = target.resolve()
    if target.is_dir():
        raise TraceExportError("path", f"{target} is a folder; name a file in it", path)
    if not target.parent.is_dir():
        raise TraceExportError("path", f"the folder {target.parent} does not exist", path)
    for folder in _protected(profile):
        if target == folder or folder in target.parents:
            raise TraceExportError(
                "path", f"{target} is inside the profile's folder {folder}; perfkit never "
                "writes into a profile's folder: choose another place", path)
    if target.exists() and not overwrite:
        raise TraceExportError("path", f"{target} exists; pass overwrite=True to replace it",
                               path)
    return target


def export_trace(profile: Any, step: int | None = None, ranks: Any = None, *,
                 path: str | os.PathLike[str], overwrite: bool = False,
                 host: bool | str = True, align: str = "common",
                 parallel: Any = None) -> Path:
    """Write the Chrome trace of one step of some ranks, for Perfetto UI or chrome://tracing.

    Parameters
    ----------
    profile : Profile, Cluster or lazy cluster
    step : int, optional
        Step to export; default the median-duration step of the slowest rank (the
        timeline's default).
    ranks : int or list of int, optional
        Ranks to export; default the slowest and the fastest.
    path : str or os.PathLike
        File to write (``.json``; a name ending in ``.gz`` is gzip-compressed, which
        Perfetto also opens). Its folder must exist and must not be the profile's folder
        (or lie inside it).
    overwrite : bool
        Replace an existing file; otherwise an existing ``path`` is refused.
    host : bool or "auto"
        Include host operators (default: yes, the trace viewer nests them).
    align : {"common", "rank"}
        Time origin (see :func:`perfkit.analysis.timeline_window`).
    parallel : ParallelSpec, optional
        The job's layout: with ``ranks`` not given, the slowest rank is named among its own
        pipeline stage's ranks (:func:`chrome_trace`).

    Returns
    -------
    pathlib.Path
        The file written (absolute). It is written to a temporary file in the same folder
        first and then renamed, so a failure never leaves half a trace.

    Raises
    ------
    TraceExportError
        A missing or unusable ``path``, a path in the profile's folder, or an existing
        file without ``overwrite=True``.
    perfkit.analysis.timeline.TimelineError
        A step or rank the profile does not have.
    """
    target = _check_path(profile, path, overwrite)
    trace = chrome_trace(profile, step=step, ranks=ranks, host=host, align=align,
                         parallel=parallel)
    data = json.dumps(trace, ensure_ascii=False, allow_nan=False).encode("utf-8")
    if target.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    fd, tmp = tempfile.mkstemp(prefix=".perfkit-", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
