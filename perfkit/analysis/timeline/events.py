"""The events of a timeline window, whole, on the profile's clock.

:func:`window_events`: every device task that overlaps the window and, where asked, every
host operator with its nesting depth on its thread.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...io.canonical.categories import HOST_COMM_PATTERN
from .window import TimelineError, TimelineWindow, _rank_tables, _timed

__all__ = ["window_events", "EVENT_COLUMNS"]

EVENT_COLUMNS: dict[str, str | pd.StringDtype] = {
    "rank": "Int64", "source": TEXT, "name": TEXT, "type": TEXT,
    "category": TEXT, "stream": "Int64", "core": TEXT, "thread": "Int64",
    "depth": "Int64", "start_us": "float64", "end_us": "float64", "dur_us": "float64",
}
"""Columns of :func:`window_events`: whole events on the profile's clock (not clipped)."""


def _depths(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Nesting depth of each interval among those of one thread (sorted by start, -dur)."""
    depth = np.zeros(len(start), dtype=np.int64)
    stack: list[float] = []
    for i in range(len(start)):
        s = start[i]
        while stack and stack[-1] <= s:
            stack.pop()
        depth[i] = len(stack)
        stack.append(end[i])
    return depth


def window_events(profile: Any, window: TimelineWindow, host: bool | str = "auto"
                  ) -> pd.DataFrame:
    """Every event that overlaps the window, whole (not clipped), on the profile's clock.

    Parameters
    ----------
    profile : Profile, Cluster or lazy cluster
    window : TimelineWindow
        From :func:`timeline_window`.
    host : bool or "auto"
        Include host operators (``ops``). ``"auto"``: only for a rank without device tasks
        in the window (a CPU-only trace), where they are the whole timeline.

    Returns
    -------
    DataFrame
        :data:`EVENT_COLUMNS`, sorted by rank (in window order), source (device first),
        stream / thread, start. ``source`` is ``"device"`` or ``"host"``; ``depth`` is the
        nesting level of a host operator on its thread (0 = outermost; NA for device
        tasks). An event overlaps the window when it ends after the window starts and
        starts before it ends; an instantaneous event counts when it lies inside.
    """
    if host not in (True, False, "auto"):
        raise TimelineError("host", "must be True, False or 'auto'", host)
    parts = []
    for order, r in enumerate(window.ranks):
        tables = _rank_tables(profile, r)
        ws, we = window.start_us[r], window.end_us[r]
        dev = _overlapping(_timed(tables["kernels"]), ws, we)
        rows = []
        if len(dev):
            rows.append(pd.DataFrame({
                "source": "device", "name": _col(dev, "name"), "type": _col(dev, "type"),
                "category": _col(dev, "category").fillna("other"),
                "stream": _col(dev, "stream", "Int64"), "core": _col(dev, "core"),
                "thread": pd.array([pd.NA] * len(dev), dtype="Int64"),
                "depth": pd.array([pd.NA] * len(dev), dtype="Int64"),
                "start_us": dev["start_us"].to_numpy(float),
                "end_us": (dev["start_us"] + dev["dur_us"]).to_numpy(float),
                "dur_us": dev["dur_us"].to_numpy(float)}))
        if host is True or (host == "auto" and not len(dev)):
            # an operator's ancestors contain it, so they overlap the window too: the
            # nesting depth can be computed among the overlapping operators alone
            ops = _overlapping(_timed(tables["ops"]), ws, we)
            ops = ops.assign(_end=ops["start_us"] + ops["dur_us"])
            thread = _col(ops, "thread", "Int64")
            ops = ops.assign(_thread=thread.fillna(-1).to_numpy())
            ops = ops.sort_values(["_thread", "start_us", "dur_us"],
                                  ascending=[True, True, False], kind="mergesort")
            depth = np.zeros(len(ops), dtype=np.int64)
            th = ops["_thread"].to_numpy()
            st, en = ops["start_us"].to_numpy(float), ops["_end"].to_numpy(float)
            for t in np.unique(th):
                sel = th == t
                depth[sel] = _depths(st[sel], en[sel])
            ops = ops.assign(_depth=depth).reset_index(drop=True)
            if len(ops):
                name = _col(ops, "name")
                comm = name.str.contains(HOST_COMM_PATTERN, regex=True).fillna(False)
                rows.append(pd.DataFrame({
                    "source": "host", "name": name,
                    "type": pd.array([pd.NA] * len(ops), dtype=TEXT),
                    "category": np.where(comm.to_numpy(bool), "communication", "host"),
                    "stream": pd.array([pd.NA] * len(ops), dtype="Int64"),
                    "core": pd.array([pd.NA] * len(ops), dtype=TEXT),
                    "thread": _col(ops, "thread", "Int64"),
                    "depth": ops["_depth"].to_numpy(np.int64),
                    "start_us": ops["start_us"].to_numpy(float),
                    "end_us": ops["_end"].to_numpy(float),
                    "dur_us": ops["dur_us"].to_numpy(float)}))
        for f in rows:
            f.insert(0, "rank", pd.array([r if r is not None else pd.NA] * len(f),
                                         dtype="Int64"))
            f["_order"] = order
            parts.append(f)
    if not parts:
        return pd.DataFrame({c: pd.Series([], dtype=d) for c, d in EVENT_COLUMNS.items()})
    out = pd.concat(parts, ignore_index=True)
    out["_src"] = (out["source"] == "host").astype(int)
    out = out.sort_values(["_order", "_src", "stream", "core", "thread", "start_us"],
                          kind="mergesort", na_position="last")
    out = out.drop(columns=["_order", "_src"]).reset_index(drop=True)
    return out.astype(EVENT_COLUMNS)[list(EVENT_COLUMNS)]


def _col(frame: pd.DataFrame, name: str, dtype: Any = TEXT) -> pd.Series:
    if name in frame.columns:
        return frame[name].astype(dtype).reset_index(drop=True)
    return pd.Series(pd.array([pd.NA] * len(frame), dtype=dtype))


def _overlapping(frame: pd.DataFrame, ws: float, we: float) -> pd.DataFrame:
    if frame.empty:
        return frame
    s = frame["start_us"].to_numpy(float)
    e = s + frame["dur_us"].to_numpy(float)
    hit = ((e > ws) & (s < we)) | ((e == s) & (s >= ws) & (s <= we))
    return frame[hit].reset_index(drop=True)
