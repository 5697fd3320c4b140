"""Unions of time intervals per group: the busy segments of each (rank, step) or stream.

:func:`union_parts` sorts the intervals per group and finds where merged segments begin
(:class:`IntervalUnion`, arrays only); :func:`interval_union` gives the segments as a
frame.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ._order import _group_cummax, stable_order
from ._util import group_changes, take_array, take_rows

__all__ = ["interval_union", "IntervalUnion", "union_parts"]


def interval_union(frame: pd.DataFrame, keys: Sequence[str], start: str = "start_us",
                   end: str = "end_us") -> pd.DataFrame:
    """Merge overlapping intervals per group; return the merged segments.

    Parameters
    ----------
    frame : DataFrame
        One row per interval with ``keys``, ``start`` and ``end`` columns; each interval
        ends at or after its start (callers clip negative durations).
    keys : sequence of str
        Group columns (for example ``["rank", "step"]``); intervals of different groups
        never merge.
    start, end : str
        Column names of the interval bounds.

    Returns
    -------
    DataFrame
        ``keys`` + ``start_us``, ``end_us``, ``length_us`` of each merged segment, sorted.
        Touching intervals (end == next start) are merged.
    """
    keys = list(keys)
    cols = [*keys, "start_us", "end_us", "length_us"]
    u = union_parts(frame, keys, start, end)
    if u is None:
        return pd.DataFrame({c: pd.Series([], dtype=frame[c].dtype if c in frame else "float64")
                             for c in cols})
    out = take_rows(frame[keys], u.rows_at(u.at)).reset_index(drop=True)
    out["start_us"] = u.start[u.at]
    out["end_us"] = u.segment_ends()
    out["length_us"] = out["end_us"] - out["start_us"]
    return out[cols]


@dataclasses.dataclass(frozen=True)
class IntervalUnion:
    """Intervals sorted by group, then start, and where their merged segments begin.

    :func:`union_parts` gives it; the arrays are in the sorted order.

    Attributes
    ----------
    rows : ndarray or None
        Position in the frame given of each sorted interval (None: the frame's own rows,
        already in order and each with both bounds).
    start : ndarray
        Each interval's start.
    reach : ndarray
        The latest end so far within the interval's group (its running maximum).
    first : ndarray
        Positions where each group begins.
    at : ndarray
        Positions where each merged segment begins (a group's first interval, or one that
        starts after every earlier end of its group; touching intervals merge).
    """

    rows: np.ndarray | None
    start: np.ndarray
    reach: np.ndarray
    first: np.ndarray
    at: np.ndarray

    def rows_at(self, positions: np.ndarray) -> np.ndarray:
        """Positions in the frame given of the sorted intervals at ``positions``."""
        return positions if self.rows is None else self.rows[positions]

    def segment_ends(self) -> np.ndarray:
        """The end of each merged segment: the reach of its last interval (intervals end
        at or after their start, so no earlier segment of the group reaches further)."""
        return self.reach[np.r_[self.at[1:], len(self.reach)] - 1]

    def group_ends(self) -> np.ndarray:
        """The latest end of each group (the reach of its last interval)."""
        return self.reach[np.r_[self.first[1:], len(self.reach)] - 1]


def union_parts(frame: pd.DataFrame, keys: Sequence[str], start: str = "start_us",
                end: str = "end_us", ends: np.ndarray | None = None) -> IntervalUnion | None:
    """The intervals of ``frame`` sorted per group (``keys``, missing last) then start, and
    their merged segments (:class:`IntervalUnion`); None when no interval has both bounds.

    ``ends``: the ends as an array the caller hands over (the ``end`` column is then not
    read), which becomes ``reach`` in place when the rows are in order: a million
    intervals in order are merged without a new array of their ends.
    """
    keys = list(keys)
    s = frame[start].to_numpy(np.float64, na_value=np.nan)
    e = frame[end].to_numpy(np.float64, na_value=np.nan) if ends is None else ends
    bounded = ~(np.isnan(s) | np.isnan(e))
    if not bounded.any():
        return None
    rows = None if bounded.all() else np.flatnonzero(bounded)
    key_cols = {k: frame[k] if rows is None else pd.Series(take_array(frame[k].array, rows))
                for k in keys}
    if rows is not None:
        s = s[rows]
        e = e[rows]
    order = stable_order(pd.DataFrame({**key_cols, "_s": s}, copy=False), [*keys, "_s"])
    if order is not None:
        rows = order if rows is None else rows[order]
        key_cols = {k: pd.Series(take_array(c.array, order)) for k, c in key_cols.items()}
        s = s[order]
        e = e[order]
    elif ends is None and rows is None:
        e = e.copy()  # the frame's own column: reach is worked out in place
    # groups are contiguous once sorted: a segment starts at a group's first interval or
    # where an interval starts after every earlier end of its group
    changes = group_changes(*key_cols.values()) if keys else None
    first = np.zeros(1, np.int64) if changes is None else np.r_[0, np.flatnonzero(changes) + 1]
    reach = _group_cummax(e, first)
    new_seg = np.empty(len(s), dtype=bool)
    new_seg[0] = True
    np.greater(s[1:], reach[:-1], out=new_seg[1:])
    new_seg[first] = True
    return IntervalUnion(rows, s, reach, first, np.flatnonzero(new_seg))
