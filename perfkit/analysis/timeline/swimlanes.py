"""The timeline frame: one step of one or a few ranks laid out as swimlanes.

:func:`timeline` takes the window (:mod:`~perfkit.analysis.timeline.window`), its events,
lays them out in lanes with their labels, and applies the event cap.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from .._util import typed
from .events import window_events
from .labels import _labels, _labels_of
from .lanes import _free_rows, _lane_keys, _track_sort, pack_sublanes
from .merge import DEFAULT_MAX_EVENTS, merge_tiny_events
from .window import TimelineError, TimelineWindow, _fmt_us, timeline_window

__all__ = ["timeline", "TIMELINE_COLUMNS", "DEFAULT_LABELS", "DEFAULT_HOST_DEPTH", "LANE_MODES"]

DEFAULT_LABELS = 5
"""Longest kernels, and longest collectives, labelled per rank by default."""

DEFAULT_HOST_DEPTH = 3
"""Nesting levels of host operators drawn by default (0 = outermost)."""

LANE_MODES = ("streams", "categories")

# HOST_COMM_PATTERN (host operators that are communication: PyTorch c10d, gloo/NCCL
# annotations, HCCL) is the rule the Kineto loader applies when it splits a CPU-only step
# into computing and communication, so that the lanes of a host-only timeline add up like
# its step table: one definition, in perfkit.io.canonical.categories.

TIMELINE_COLUMNS: dict[str, str | pd.StringDtype] = {
    "rank": "Int64", "lane": TEXT, "track": TEXT, "track_order": "int64",
    "name": TEXT, "label": TEXT, "category": TEXT, "kind": TEXT,
    "start_us": "float64", "end_us": "float64", "dur_us": "float64", "n_events": "int64",
    "labelled": "bool", "clipped": "bool",
}
"""Columns of :func:`timeline`.

``rank`` and ``lane`` (``"stream 2"``, ``"no stream (HCCL)"``, ``"host thread 7"``,
``"computing"``, ``"communication"``, ``"free"``, ``"wait"``: the device's wait before the
step's first task, :attr:`TimelineWindow.wait_us`; `` · 2`` for a sub-lane); ``track``
(``"rank 0 · stream 2"``, what a chart puts on its y axis) and ``track_order`` (its rank
from the top); ``name`` (full) and ``label`` (short, for a text mark); ``category``
(``compute``, ``communication``, ``memory``, ``other`` for device tasks, ``host`` for a
host operator, ``free``, ``wait``, or ``mixed`` for a block of several); ``kind``
(``"event"``, ``"free"``, ``"wait"`` or ``"block"``); ``start_us`` / ``end_us``
relative to the window origin (see :class:`TimelineWindow`), clipped to the window (a
wait lies just before it); ``dur_us`` the time the event ran
inside the window (for a block: the sum over its events, which can be less than
``end_us - start_us``); ``n_events`` (1, or the number of events a block stands for);
``labelled`` (among the longest kernels / collectives of its rank); ``clipped`` (the
event began before or ended after the window).
"""


def timeline(profile: Any, step: int | None = None, ranks: Any = None,
             lanes: str = "streams", max_events: int | None = DEFAULT_MAX_EVENTS,
             n_labels: int = DEFAULT_LABELS, host: bool | str = "auto",
             host_depth: int | None = DEFAULT_HOST_DEPTH, align: str = "common",
             parallel: Any = None) -> pd.DataFrame:
    """The events of one step of one or a few ranks, one row per event, in lanes.

    Parameters
    ----------
    profile : Profile, Cluster or lazy cluster (``load(..., engine="dask")``)
    step : int, optional
        Step to show; default the median-duration step of the slowest rank
        (:func:`timeline_window`).
    ranks : int or list of int, optional
        Ranks to show; default the slowest and the fastest.
    lanes : {"streams", "categories"}
        One lane per device stream (host thread and depth for host operators), or the
        computing / communication / free lanes of the step breakdown.
    max_events : int or None
        Cap on the rows; above it tiny adjacent events are merged into blocks
        (:func:`merge_tiny_events`, time-preserving). None: no cap (every event).
    n_labels : int
        Per rank, the ``n_labels`` longest kernels and the ``n_labels`` longest collectives
        (host operators when the rank has no device task) get ``labelled = True``.
    host : bool or "auto"
        Draw host operators too (:func:`window_events`); ``"auto"``: only for ranks
        without device tasks.
    host_depth : int or None
        Host operators nested deeper than this many levels are left out (their time lies
        inside the operator that contains them, which is drawn); None: all levels.
    align : {"common", "rank"}
        Origin of the times (see :func:`timeline_window`).
    parallel : ParallelConfig, optional
        The job's layout, for the default slowest rank (see :func:`timeline_window`).

    Returns
    -------
    DataFrame
        :data:`TIMELINE_COLUMNS`, sorted by ``track_order`` then ``start_us``. Times are
        µs relative to the window origin (``attrs["timeline"]["origin_us"]``), clipped to
        the rank's window. ``attrs["notes"]`` says which step and ranks and why, and
        whether events were merged; ``attrs["timeline"]`` holds the window
        (:meth:`TimelineWindow.to_dict`), ``lanes``, ``max_events``, ``events`` (events in
        the window before the cap), ``threshold_us``, ``blocks``, ``merged_events``,
        ``omitted_host_events`` (deeper than ``host_depth``).

    Notes
    -----
    In ``lanes="categories"`` a device task goes to *communication* when its category is
    communication and to *computing* otherwise (memory copies included), the rule of
    :func:`~perfkit.analysis.step_breakdown`; *free* holds the gaps of the window where no
    task (no host operator, for a host-only rank) runs, so for a window found from the
    device tasks the free lane adds up to the derived ``free_us`` of that step.
    On a host-only rank, *computing* holds the outermost non-communication host operators
    (less the time their thread spends inside a collective) and *communication* the
    communication ones (:data:`HOST_COMM_PATTERN`) at any depth.
    """
    if lanes not in LANE_MODES:
        raise TimelineError("lanes", f"must be one of {LANE_MODES}", lanes)
    if max_events is not None and (isinstance(max_events, bool)
                                   or not isinstance(max_events, (int, np.integer))
                                   or max_events < 10):
        raise TimelineError("max_events", "must be a whole number >= 10, or None",
                            max_events)
    if isinstance(n_labels, bool) or not isinstance(n_labels, (int, np.integer)) \
            or n_labels < 0:
        raise TimelineError("n_labels", "must be a whole number >= 0", n_labels)
    if host_depth is not None and (isinstance(host_depth, bool)
                                   or not isinstance(host_depth, (int, np.integer))
                                   or host_depth < 1):
        raise TimelineError("host_depth", "must be a whole number >= 1, or None", host_depth)
    window = timeline_window(profile, step=step, ranks=ranks, align=align, parallel=parallel)
    events = window_events(profile, window, host=host)
    notes = [window.reason]
    omitted = 0
    if host_depth is not None and len(events):
        deep = (events["depth"] >= host_depth).fillna(False).to_numpy(bool)
        if lanes == "categories":  # communication host ops stay at any depth
            deep &= (events["category"] != "communication").to_numpy(bool)
        omitted = int(deep.sum())
        events = events[~deep].reset_index(drop=True)
    if omitted:
        notes.append(f"{omitted} host operators nested deeper than {host_depth} levels are "
                     "not drawn (their time lies inside the operator that contains them)")
    if lanes == "categories" and len(events):
        # a host-only rank: computing = the outermost host ops, less the time their
        # thread spends inside a collective (the step table's rule)
        dev_ranks = set(events.loc[events["source"] == "device", "rank"].dropna())
        inner = ((events["source"] == "host") & (events["category"] == "host")
                 & (events["depth"] > 0) & ~events["rank"].isin(dev_ranks))
        events = events[~inner.fillna(False).to_numpy(bool)].reset_index(drop=True)
        events = _cut_by_own_collectives(events, dev_ranks)
    frame = _layout(events, window, lanes, n_labels)
    info: dict[str, Any] = {"threshold_us": math.nan, "blocks": 0, "merged_events": 0,
                            "reached": True}
    n_before = len(frame)
    if max_events is not None:
        frame, info = merge_tiny_events(frame, int(max_events))
    if info["blocks"]:
        notes.append(
            f"{n_before:,} events in the window exceed the cap of {max_events:,}: events of "
            f"{_fmt_us(info['threshold_us'])} or less that follow each other within that "
            f"time on a lane are merged into {info['blocks']:,} blocks standing for "
            f"{info['merged_events']:,} events; a block's duration is the sum of its "
            "events', so no time is dropped")
    if not info["reached"]:
        notes.append(f"the cap of {max_events:,} events could not be reached without merging "
                     "labelled events; the frame has more rows")
    frame.attrs["notes"] = notes
    frame.attrs["timeline"] = {
        **window.to_dict(), "lanes": lanes, "align": align, "max_events": max_events,
        "events": n_before, "threshold_us": info["threshold_us"], "blocks": info["blocks"],
        "merged_events": info["merged_events"], "omitted_host_events": omitted,
    }
    return frame


def _cut_by_own_collectives(events: pd.DataFrame, dev_ranks: set[Any]) -> pd.DataFrame:
    """Host computing bars of host-only ranks with their thread's collectives cut out.

    A thread inside ``c10d::allreduce_`` waits for the collective even when an enclosing
    operator (the backward pass) is open around it: that time is communication, as in
    the step table (:func:`perfkit.io.chrome.tables.host_steps`). A bar cut in two keeps
    its name in both pieces.
    """
    host = (events["source"] == "host").to_numpy(bool) & \
        ~events["rank"].isin(dev_ranks).fillna(False).to_numpy(bool)
    comp = host & (events["category"] == "host").to_numpy(bool)
    comm = host & (events["category"] == "communication").to_numpy(bool)
    if not comp.any() or not comm.any():
        return events
    key = events["rank"].astype(TEXT).fillna("") + "/" + \
        events["thread"].astype(TEXT).fillna("")
    keys = key.to_numpy(dtype=object)
    start = events["start_us"].to_numpy(float)
    end = events["end_us"].to_numpy(float)
    cuts: dict[Any, list[tuple[float, float]]] = {}
    for k, a, b in zip(keys[comm], start[comm], end[comm], strict=True):
        cuts.setdefault(k, []).append((a, b))
    pieces: list[pd.DataFrame] = []
    cut_rows = np.zeros(len(events), dtype=bool)
    for i in np.flatnonzero(comp):
        spans = cuts.get(keys[i])
        if not spans:
            continue
        a, b = start[i], end[i]
        inside = sorted((max(x, a), min(y, b)) for x, y in spans if x < b and y > a)
        if not inside:
            continue
        cut_rows[i] = True
        left = a
        for x, y in inside:
            if x > left:
                pieces.append(events.iloc[[i]].assign(start_us=left, end_us=x, dur_us=x - left))
            left = max(left, y)
        if b > left:
            pieces.append(events.iloc[[i]].assign(start_us=left, end_us=b, dur_us=b - left))
    if not cut_rows.any():
        return events
    out = pd.concat([events[~cut_rows], *pieces], ignore_index=True)
    return out.astype(events.dtypes.to_dict()).sort_values(
        ["rank", "source", "thread", "start_us"], kind="mergesort").reset_index(drop=True)


def _layout(events: pd.DataFrame, window: TimelineWindow, lanes: str, n_labels: int
            ) -> pd.DataFrame:
    """Clip, shift, name lanes, add the free lane, pack sub-lanes and pick the labels."""
    rows = []
    for r in window.ranks:
        ev = events[(events["rank"] == r).fillna(False).to_numpy(bool)] \
            if r is not None else events[events["rank"].isna().to_numpy(bool)]
        ws, we, origin = window.start_us[r], window.end_us[r], window.origin_us[r]
        s = ev["start_us"].to_numpy(float).clip(ws, we)
        e = ev["end_us"].to_numpy(float).clip(ws, we)
        host_only = not (ev["source"] == "device").any()
        names, keys = _lane_keys(ev, lanes, host_only)
        part = pd.DataFrame({
            "rank": pd.array([r if r is not None else pd.NA] * len(ev), dtype="Int64"),
            "lane": names, "_key": keys, "name": ev["name"].to_numpy(object),
            "label": _labels_of(ev),
            "category": ev["category"].to_numpy(object), "kind": "event",
            "start_us": s, "end_us": e, "dur_us": e - s, "n_events": 1,
            "clipped": (ev["start_us"].to_numpy(float) < ws) | (ev["end_us"].to_numpy(float) > we),
            "_src": ev["source"].to_numpy(object),
        })
        part["labelled"] = _labels(part, n_labels)
        wait = window.wait_us.get(r, 0.0)
        if wait > 0:  # the device's wait before the first task: a lane of its own, on top
            part = pd.concat([part, pd.DataFrame({
                "rank": pd.array([r if r is not None else pd.NA], dtype="Int64"),
                "lane": "wait", "_key": [(-1, 0, 0)],
                "name": "the device waits before the step's first task (data, launch)",
                "label": "wait (data, launch)", "category": "wait", "kind": "wait",
                "start_us": [ws - wait], "end_us": [ws], "dur_us": [wait], "n_events": 1,
                "clipped": False, "_src": "wait", "labelled": True})], ignore_index=True)
        if lanes == "categories":
            busy = part[(part["_src"] == "device").to_numpy(bool)]
            if busy.empty:
                busy = part[(part["_src"] != "wait").to_numpy(bool)]
            fs, fe = _free_rows(busy["start_us"].to_numpy(float),
                                busy["end_us"].to_numpy(float), ws, we)
            part = pd.concat([part, pd.DataFrame({
                "rank": pd.array([r if r is not None else pd.NA] * len(fs), dtype="Int64"),
                "lane": "free", "_key": [(2, 0, 0)] * len(fs), "name": "free",
                "label": "free", "category": "free", "kind": "free",
                "start_us": fs, "end_us": fe, "dur_us": fe - fs, "n_events": 1,
                "clipped": False, "_src": "free", "labelled": False})], ignore_index=True)
        part["start_us"] -= origin
        part["end_us"] -= origin
        rows.append(part)
    frame = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=[*TIMELINE_COLUMNS, "_key", "_src"])
    if frame.empty:
        return _typed(frame)
    # sub-lanes: events that overlap on a lane (host depths are already disjoint)
    frame = frame.sort_values(["start_us", "dur_us"], ascending=[True, False], kind="mergesort")
    sub = np.zeros(len(frame), dtype=np.int64)
    lane_id = frame["rank"].astype(str) + "\x00" + frame["lane"]
    for _, idx in frame.groupby(lane_id, sort=False).indices.items():
        sub[idx] = pack_sublanes(frame["start_us"].to_numpy(float)[idx],
                                 frame["end_us"].to_numpy(float)[idx], tolerance_us=1e-3)
    frame["lane"] = [ln if k == 0 else f"{ln} · {k + 1}"
                     for ln, k in zip(frame["lane"], sub, strict=True)]
    frame["_key"] = [(*key, k) for key, k in zip(frame["_key"], sub, strict=True)]
    rank_pos = {r: i for i, r in enumerate(window.ranks)}
    frame["_rk"] = [rank_pos.get(None if pd.isna(r) else int(r), 0) for r in frame["rank"]]
    tracks = frame[["_rk", "_key"]].drop_duplicates()
    tracks = sorted(map(tuple, tracks.itertuples(index=False, name=None)), key=_track_sort)
    order = {t: i for i, t in enumerate(tracks)}
    frame["track_order"] = [order[(a, b)] for a, b in zip(frame["_rk"], frame["_key"],
                                                          strict=True)]
    frame["track"] = [f"rank {'?' if pd.isna(r) else int(r)} · {ln}"
                      for r, ln in zip(frame["rank"], frame["lane"], strict=True)]
    frame = frame.sort_values(["track_order", "start_us", "dur_us"],
                              ascending=[True, True, False], kind="mergesort")
    return _typed(frame.reset_index(drop=True))


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    for c in TIMELINE_COLUMNS:
        if c not in frame.columns:
            frame[c] = pd.Series(dtype=TIMELINE_COLUMNS[c])
    return typed(frame, TIMELINE_COLUMNS)
