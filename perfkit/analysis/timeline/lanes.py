"""The lanes of a timeline.

Each event's lane and its sort key, sub-lanes so that no mark hides another
(:func:`pack_sublanes`), the free gaps of a window and the order of the tracks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["pack_sublanes"]

def pack_sublanes(start: np.ndarray, end: np.ndarray, nested: bool = False,
                  tolerance_us: float = 0.0) -> np.ndarray:
    """Sub-lane of each interval so that intervals on one sub-lane never overlap.

    Parameters
    ----------
    start, end : numpy.ndarray
        Intervals of one lane, sorted by start (then longest first).
    nested : bool
        Allow an interval inside another on the same sub-lane (a call stack: what a Chrome
        trace thread can show); only partial overlaps are moved.
    tolerance_us : float
        Overlaps up to this length count as none (timestamps rounded by the profiler).

    Returns
    -------
    numpy.ndarray
        0 for the first sub-lane, 1 for the next, ...; first fit, in order.
    """
    lanes: list[list[float]] = []  # per sub-lane: stack of open ends (one end when disjoint)
    out = np.zeros(len(start), dtype=np.int64)
    for i in range(len(start)):
        s, e = start[i], end[i]
        for j, stack in enumerate(lanes):
            while stack and stack[-1] <= s + tolerance_us:
                stack.pop()
            if not stack or (nested and e <= stack[-1] + tolerance_us):
                stack.append(e)
                out[i] = j
                break
        else:
            lanes.append([e])
            out[i] = len(lanes) - 1
    return out


def _lane_keys(ev: pd.DataFrame, lanes: str, host_only: bool
               ) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Lane name and sort key of each event row of one rank.

    ``host_only``: the rank has no device task in the window, so in ``"categories"`` mode
    its host operators make the computing and communication lanes.
    """
    names: list[str] = []
    keys: list[tuple[Any, ...]] = []
    for src, cat, stream, core, thread, depth in zip(
            ev["source"], ev["category"], ev["stream"], ev["core"], ev["thread"],
            ev["depth"], strict=True):
        if src == "host" and not (lanes == "categories" and host_only):
            t = "?" if pd.isna(thread) else int(thread)
            d = int(depth)
            names.append(f"host thread {t}" + (f" · depth {d}" if d else ""))
            keys.append((3, -1 if t == "?" else t, d))
        elif lanes == "categories":
            comm = cat == "communication"
            names.append("communication" if comm else "computing")
            keys.append((1 if comm else 0, 0, 0))
        elif pd.isna(stream):
            c = "?" if pd.isna(core) else str(core)
            names.append(f"no stream ({c})")
            keys.append((1, c, 0))
        else:
            names.append(f"stream {int(stream)}")
            keys.append((0, int(stream), 0))
    return names, keys


def _free_rows(busy_s: np.ndarray, busy_e: np.ndarray, ws: float, we: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """Gaps of [ws, we] not covered by any busy interval (already clipped to the window)."""
    if not len(busy_s):
        return np.array([ws]), np.array([we])
    order = np.argsort(busy_s, kind="mergesort")
    s, e = busy_s[order], busy_e[order]
    reach = np.maximum.accumulate(e)
    gap_s = np.concatenate([[ws], reach])
    gap_e = np.concatenate([s, [we]])
    keep = gap_e > gap_s
    return gap_s[keep], gap_e[keep]


def _track_sort(t: tuple[int, tuple[Any, ...]]) -> tuple[Any, ...]:
    rk, key = t
    return (rk, *[(0, v) if isinstance(v, (int, np.integer)) else (1, str(v)) for v in key])
