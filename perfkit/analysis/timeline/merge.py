"""The event cap of a timeline: runs of tiny events merged into blocks, time kept.

:func:`merge_tiny_events` brings a frame under a cap (:data:`DEFAULT_MAX_EVENTS` by
default) with the smallest duration threshold that reaches it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["merge_tiny_events", "DEFAULT_MAX_EVENTS"]

DEFAULT_MAX_EVENTS = 5000
"""Most rows :func:`timeline` returns before merging tiny events (see docs/timeline.md).

Measured in headless Chromium (``benchmarks/bench_timeline_render.py``) on the chart of
:func:`perfkit.charts.timeline_chart`: at 5,000 rects one wheel-zoom step re-renders in
about 25 ms with the canvas renderer and 85-100 ms with the SVG renderer (about the 100 ms
within which a response feels immediate), against 85 ms and 250 ms at 20,000; first paint
stays under half a second. 5,000 is also the ceiling the dashboard sets for any chart.
"""


def merge_tiny_events(frame: pd.DataFrame, max_events: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Merge runs of tiny events per track into blocks until at most ``max_events`` rows.

    Parameters
    ----------
    frame : DataFrame
        :data:`TIMELINE_COLUMNS` rows (``n_events`` 1), sorted by ``track_order`` then
        ``start_us``.
    max_events : int
        The cap.

    Returns
    -------
    (DataFrame, dict)
        The frame with runs replaced by blocks, and what was done: ``threshold_us`` (the
        duration threshold used, NaN when nothing was merged), ``blocks`` and
        ``merged_events`` (rows replaced by blocks), ``reached`` (False when even merging
        every unlabelled run could not reach the cap).

    Notes
    -----
    With a threshold ``t``, an event is *tiny* when ``dur_us <= t`` and it is not
    labelled; a tiny event joins the tiny event before it on the same track when they have
    the same category and the gap between them (this start minus the previous end) is at
    most ``t``. The number of rows falls as ``t`` grows, so the smallest sufficient ``t``
    among the durations and gaps is found by bisection. Should no ``t`` reach the cap,
    the search is repeated letting runs mix categories (``category`` ``"mixed"``).
    A block keeps ``start_us`` of its first event and the largest ``end_us``; its
    ``dur_us`` is the sum of its events' ``dur_us`` and ``n_events`` their number, so the
    sum of ``dur_us`` per track is unchanged.
    """
    info: dict[str, Any] = {"threshold_us": math.nan, "blocks": 0, "merged_events": 0,
                            "reached": True}
    n = len(frame)
    if n <= max_events:
        return frame, info
    tr = frame["track_order"].to_numpy()
    st = frame["start_us"].to_numpy(float)
    en = frame["end_us"].to_numpy(float)
    du = frame["dur_us"].to_numpy(float)
    cat = frame["category"].astype(str).to_numpy()
    free = frame["kind"].astype(str).to_numpy() != "event"
    protected = frame["labelled"].to_numpy(bool)
    same = np.zeros(n, dtype=bool)
    same[1:] = tr[1:] == tr[:-1]
    gap = np.full(n, np.inf)
    gap[1:] = st[1:] - en[:-1]
    gap = np.where(same, gap, np.inf)
    same_cat = np.zeros(n, dtype=bool)
    same_cat[1:] = cat[1:] == cat[:-1]
    same_kind = np.zeros(n, dtype=bool)
    same_kind[1:] = free[1:] == free[:-1]

    def joins(t: float, mix: bool) -> np.ndarray:
        tiny = (du <= t) & ~protected
        j = np.zeros(n, dtype=bool)
        j[1:] = tiny[1:] & tiny[:-1]
        j &= same & same_kind & (gap <= t)
        if not mix:
            j &= same_cat
        return j

    cands = np.unique(np.concatenate([du[~protected], gap[np.isfinite(gap)].clip(min=0)]))
    mix = False
    if n - int(joins(np.inf, False).sum()) > max_events:
        mix = True
        if n - int(joins(np.inf, True).sum()) > max_events:
            info["reached"] = False
            cands = np.array([np.inf])
    lo, hi = 0, len(cands) - 1
    while lo < hi:  # smallest candidate whose row count is within the cap
        mid = (lo + hi) // 2
        if n - int(joins(cands[mid], mix).sum()) <= max_events:
            hi = mid
        else:
            lo = mid + 1
    t = float(cands[lo])
    j = joins(t, mix)
    group = np.cumsum(~j) - 1
    g = frame.assign(_g=group)
    size = np.bincount(group)
    agg = g.groupby("_g", sort=True).agg(
        start_us=("start_us", "min"), end_us=("end_us", "max"), dur_us=("dur_us", "sum"),
        n_events=("n_events", "sum"), clipped=("clipped", "any"),
        _cats=("category", "nunique"))
    first = g.drop_duplicates("_g").set_index("_g")
    out = first.copy()
    for c in ("start_us", "end_us", "dur_us", "n_events", "clipped"):
        out[c] = agg[c]
    block = size > 1
    out.loc[block & (agg["_cats"].to_numpy() > 1), "category"] = "mixed"
    unit = np.where(first["kind"].to_numpy() == "free", "gaps",
                    np.where(first["category"].to_numpy() == "host", "host ops", "kernels"))
    names = [f"{k} {u}" for k, u in zip(agg["n_events"].to_numpy(), unit, strict=True)]
    out.loc[block, "name"] = np.asarray(names, dtype=object)[block]
    out.loc[block, "label"] = out.loc[block, "name"]
    out.loc[block & (first["kind"].to_numpy() == "event"), "kind"] = "block"
    out.loc[block & (first["kind"].to_numpy() == "free"), "kind"] = "block"
    info.update(threshold_us=t, blocks=int(block.sum()), merged_events=int(size[block].sum()))
    return out.reset_index(drop=True)[list(frame.columns)], info
