"""Host operators that synchronise with the device: :func:`sync_points`.

Each synchronisation (``.item()``, a stream synchronise, ...) stops the host from running
ahead of the device. :func:`sync_points` finds them by name (:data:`SYNC_PATTERN`), keeps
the outermost call of each nest on a thread (:func:`_outermost_calls`) and counts them per
rank and name.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._text_dtype import TEXT
from ._frames import is_lazy, per_rank
from ._order import _group_cummax
from ._util import (
    add_note,
    count_distinct,
    empty_frame,
    one_value,
    table,
    take_rows,
    text_matches,
    typed,
)

__all__ = ["sync_points", "SYNC_PATTERN"]

#: Host operators that block until the device is done.
SYNC_PATTERN = (r"(?i)synchroni[sz]e|aten::item\b|_local_scalar_dense|\.item\(|"
                r"aclrtsynchronize|cudastreamsynchronize|cudadevicesynchronize|"
                r"cudaeventsynchronize|aten::nonzero\b|tensor\.tolist|aten::tolist|"
                r"asnumpy|aten::equal\b")


def sync_points(profile: Any) -> pd.DataFrame:
    """Host operators that synchronise with the device (``.item()``, stream synchronise, ...).

    Each one stops the host from running ahead of the device, so the device idles while the
    host catches up (the seeds' checklist: turn off stream synchronisation, avoid
    ``.item()`` / ``asnumpy`` inside the step).

    Each synchronisation is counted once: a synchronising operator inside another on the
    same thread (``aten::_local_scalar_dense`` inside ``aten::item``) is part of the outer
    call and left out, so that its time is not counted twice.

    Returns
    -------
    DataFrame
        Per ``rank`` and operator ``name``: ``count``, ``host_us`` (host time spent in it),
        ``per_step`` (count / number of steps), of the outermost synchronising calls. Empty
        with a note when the profile has no host operators.
    """
    cols = {"rank": "Int64", "name": TEXT, "count": "int64", "host_us": "float64",
            "per_step": "float64"}
    if is_lazy(profile):  # per (rank, name) on each rank's worker, then one global order
        out = per_rank(profile, sync_points)
        notes = list(out.attrs.get("notes", [])) if out.empty else []
        out = typed(out, cols).sort_values("host_us", ascending=False,
                                                       kind="mergesort")
        out = out.reset_index(drop=True)
        out.attrs["notes"] = notes  # as eagerly: notes only explain an empty answer
        return out
    ops = table(profile, "ops")
    if ops.empty or "name" not in ops.columns:
        return empty_frame(cols, "no host operators (ops table) in this profile")
    match = text_matches(ops["name"], SYNC_PATTERN).to_numpy(bool)
    if not match.any():
        return add_note(empty_frame(cols), "no synchronising host operator found")
    # the columns read below only: a few thousand rows of five columns taken, not of all
    sel = take_rows(ops[[c for c in ops.columns if c in _SYNC_READ]], np.flatnonzero(match))
    sel = sel[_outermost_calls(sel)]
    if one_value(ops["rank"]):  # one rank: its steps counted without a groupby
        n_steps = 1 if one_value(ops["step"]) else max(count_distinct(ops["step"]), 1)
        steps = pd.Series([n_steps], index=pd.Index(ops["rank"].iloc[:1].array, name="rank"))
    else:
        steps = ops.groupby("rank", dropna=False)["step"].nunique().clip(lower=1)
    out = _per_rank_and_name(sel)
    out["per_step"] = out["count"] / out["rank"].map(steps).astype("float64")
    out = out.sort_values("host_us", ascending=False, kind="mergesort")
    return typed(out, cols).reset_index(drop=True)


#: The columns of the host operators that :func:`sync_points` reads of the calls it keeps.
_SYNC_READ = frozenset({"rank", "name", "thread", "start_us", "dur_us"})


def _per_rank_and_name(sel: pd.DataFrame) -> pd.DataFrame:
    """``sel.groupby(["rank", "name"], dropna=False).agg(count=("dur_us", "size"),
    host_us=("dur_us", "sum")).reset_index()``, grouped by one integer per (rank, name).

    Each key is coded in sorted order, missing last (``pd.factorize(sort=True)``), so the
    pairs' integers sort as the groupby's keys do; the sums are pandas' own (a groupby of
    the durations by that integer), only the text is not hashed again per group.
    """
    rank_code, ranks = pd.factorize(sel["rank"], sort=True, use_na_sentinel=False)
    name_code, names = pd.factorize(sel["name"], sort=True, use_na_sentinel=False)
    pair = rank_code.astype(np.int64) * len(names) + name_code
    dur = pd.Series(sel["dur_us"].to_numpy(np.float64, na_value=np.nan))
    by = dur.groupby(pair, sort=True)
    keys = by.size().index.to_numpy(np.int64)
    return pd.DataFrame({"rank": ranks.take(keys // len(names)),
                         "name": names.take(keys % len(names)),
                         "count": by.size().to_numpy(np.int64),
                         "host_us": by.sum().to_numpy(np.float64)})


def _outermost_calls(sel: pd.DataFrame) -> np.ndarray:
    """Which of the synchronising calls ``sel`` no other of them encloses on the same rank
    and thread (a call whose thread is not known is kept: it may run beside the other).

    Sorted per (rank, thread) by start, the longer first at equal starts, a call is nested
    when it ends no later than a call before it (the running maximum of the ends); a
    thousandth of a microsecond is allowed for rounding of the exported times.
    """
    keep = np.ones(len(sel), dtype=bool)
    if "thread" not in sel.columns or "start_us" not in sel.columns:
        return keep
    keys = ["rank", "thread"] if "rank" in sel.columns else ["thread"]
    start = sel["start_us"].to_numpy(np.float64, na_value=np.nan)
    end = start + np.nan_to_num(sel["dur_us"].to_numpy(np.float64, na_value=np.nan))
    rows = np.flatnonzero(sel["thread"].notna().to_numpy(bool) & np.isfinite(start))
    if len(rows) < 2:
        return keep
    # one integer per (rank, thread), a missing rank a value of its own
    group = np.zeros(len(rows), dtype=np.int64)
    for k in keys:
        code, uniq = pd.factorize(sel[k], use_na_sentinel=False)
        group = group * max(len(uniq), 1) + code[rows]
    start, end = start[rows], end[rows]
    order = np.lexsort((-end, start, group))  # stable: ties keep table order
    group, ends = group[order], end[order]
    firsts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    running = _group_cummax(ends.copy(), firsts)
    before = np.r_[np.nan, running[:-1]]
    before[firsts] = np.nan  # the first call of a (rank, thread) follows none
    nested = ends <= before + 1e-3
    keep[rows[order[nested]]] = False
    return keep
