"""Device tasks (and host operators) written twice, by any loader.

A stream runs one task at a time: two device tasks of one stream with the same start,
duration and name are one task recorded twice (a trace whose events were written twice,
a database table copied into itself). Counted twice, every operator figure doubles (the
HolisticTraceAnalysis sample with its events twice: its all-to-all 364.8 ms where the
trace holds 182.4; a DB export's TASK table copied into itself: 378 kernels for 189).
Host operators repeat the same way in a Kineto trace, where each has its own
``External id``: two with the same thread, start, duration, name and id are one.
:func:`drop_exact_repeats` keeps the first and says how many it dropped. Ascend's
``kernel_details.csv`` has its own rule by task id (:mod:`perfkit.io.ascend.repeated_tasks`),
which runs first.

The check costs little: the start times alone are compared first (sorted, which a trace
nearly is), and only the rows whose start repeats are compared in full.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .validate import table_label

__all__ = ["drop_exact_repeats", "exact_repeats", "KEYS"]

#: Per table, the columns that together name one record (every one must be present), and
#: the words for its rows.
KEYS: dict[str, tuple[tuple[str, ...], str]] = {
    "kernels": (("stream", "start_us", "dur_us", "name"), "device tasks"),
    "ops": (("thread", "start_us", "dur_us", "name", "external_id"), "host operators"),
}


def exact_repeats(frame: pd.DataFrame, key: Sequence[str], times: np.ndarray,
                  eligible: np.ndarray | None = None, as_text: bool = True) -> np.ndarray:
    """Rows of ``frame`` equal on ``key`` to an earlier row (a boolean mask).

    Only rows whose time (``times``: float with NaN where missing, or int) repeats another
    row's are compared in full, so the cost is a sort of ``times`` (fast on a nearly sorted
    trace) when nothing repeats. ``eligible`` limits the rows that may count as repeats (and
    repeated); ``as_text`` compares the key's cells as text (columns of mixed types), else
    as they are (hashable columns: numbers, categoricals).
    """
    out = np.zeros(len(frame), dtype=bool)
    where = np.flatnonzero(np.isfinite(times) if eligible is None
                           else eligible & np.isfinite(times))
    if len(where) < 2:
        return out
    t = times[where]
    order = np.argsort(t, kind="stable")  # fast: a trace is nearly in time order
    same = np.flatnonzero(t[order][1:] == t[order][:-1])
    if not len(same):
        return out
    rows = where[np.unique(order[np.r_[same, same + 1]])]  # a time another row has too
    part = frame.iloc[rows][list(key)]
    if part.isna().all(axis=None):
        return out
    if as_text:
        part = part.astype("string").fillna("<NA>")
    out[rows[part.duplicated(keep="first").to_numpy()]] = True
    return out


def _repeats(frame: pd.DataFrame, key: tuple[str, ...]) -> np.ndarray:
    """Rows of ``frame`` equal on ``key`` to an earlier row, compared after their starts."""
    start = pd.to_numeric(frame["start_us"], errors="coerce").to_numpy(np.float64,
                                                                        na_value=np.nan)
    return exact_repeats(frame, key, start)


def drop_exact_repeats(tables: MutableMapping[str, pd.DataFrame],
                       files: Mapping[str, Any] | None = None, base: str = "") -> list[str]:
    """Drop the rows of ``kernels`` and ``ops`` that repeat an earlier row's record
    (:data:`KEYS`); return one note per table that had any. A table without every column of
    its key is left as it is."""
    notes = []
    for name, (key, words) in KEYS.items():
        frame = tables.get(name)
        if frame is None or len(frame) < 2 or not set(key) <= set(frame.columns):
            continue
        again = _repeats(frame, key)
        if not again.any():
            continue
        tables[name] = frame.loc[~again].reset_index(drop=True)
        notes.append(f"{table_label(name, files or {}, base)}: {int(again.sum()):,} of "
                     f"{len(frame):,} {words} repeat an earlier one exactly (same "
                     f"{', '.join(k.replace('_us', '') for k in key)}): recorded twice, the "
                     "copies dropped")
    return notes
