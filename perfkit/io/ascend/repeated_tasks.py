"""Rows of ``kernel_details.csv`` that record a device task already recorded.

A stream runs one task at a time, and the runtime numbers its tasks (``Task ID``): two rows
with the same stream, Task ID and start time (and device and ``Context ID``, where the file
has them) are one task written twice. Summed, such a task counts twice in every figure of
the operators (their total time, their share, the advisor's operator rules).
msprof-analyze's ``compute_advice_v2/kernel_details.csv`` (its unit-test input,
``ascend/msprof-analyze-tests``) has 29 rows for 25 tasks: task 13792 four times, the
rows alike in every cell, and task 60763 twice, the second named
``…FlashAttentionScore_varlen`` (same start and duration, other input and output
shapes and one PMU ratio: a copy edited by hand for the tool's tests). The whole exports of
the shared samples (``compute_advice_v1``, ``msinsight-pt-level1``,
``msinsight-pt-gpt3-old``, ``wild/msa_kernel_details``) repeat none.

:func:`drop_repeated` keeps the first row of each task, and says in a note how many rows
were dropped, how many of them differ from the row kept (and in which columns), and the
duration they carried. Rows without a start time are all kept: nothing says they are the
same task; rows without a stream or Task ID (the HCCL tasks of a torch_npu export write
``N/A`` for both) are one task written twice only where they are alike in every cell,
start time included (:func:`_drop_identical_without_id`: a file concatenated to itself).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...format import count_text, counted, listed
from .csv import _KERNEL_COLS, _START

__all__ = ["KEY", "drop_repeated"]

#: The columns that name one device task, in the ``kernels`` table being read (the start
#: as exact ns, ``start__ns``, or relative µs, ``start_us``); ``device_id`` and
#: ``context_id`` take part where the table has them.
KEY = ("stream", "task_id", "start__ns")
_OPTIONAL = ("device_id", "context_id")
#: Columns not compared when saying how a dropped row differs from the one kept.
_DERIVED = frozenset({"category"})
#: The header of ``kernel_details.csv`` (current releases) that the canonical columns come
#: from, for the note; the PMU counters' names are their headers' already (``snake``).
_HEADERS = {**{canon: alts[0] for canon, alts in _KERNEL_COLS.items()},
            **{"start__ns": _START[0], "start_us": _START[0]}}


def drop_repeated(kernels: pd.DataFrame, notes: list[str],
                  file: str = "kernel_details.csv") -> pd.DataFrame:
    """``kernels`` with each device task once: the rows that repeat an earlier row's task
    (:data:`KEY`, and ``device_id`` / ``context_id`` where present) dropped, with a note.

    Parameters
    ----------
    kernels : DataFrame
        The ``kernels`` table as read (``stream``, ``task_id``, and ``start__ns`` or
        ``start_us``); a table without them is returned as it is.
    notes : list of str
        The loader's notes: one is appended when rows are dropped, led by ``kernels:``
        (said on the Operators tab, :mod:`perfkit.widgets.load_notes`).
    file : str
        The file's name, for the note.

    Returns
    -------
    DataFrame
        ``kernels`` itself when no task repeats, else its rows of distinct tasks (first
        kept, order kept, index renumbered from 0).
    """
    start = "start__ns" if "start__ns" in kernels else "start_us"
    key = [c for c in KEY[:2] if c in kernels]
    if len(key) < 2 or start not in kernels or len(kernels) < 2:
        return kernels
    starts = pd.Series(pd.to_numeric(kernels[start], errors="coerce"))
    x = starts.to_numpy()
    if x.dtype.kind in "iu" and bool((x[1:] > x[:-1]).all()):
        return kernels  # the file's order (by start, as the exports write it): no start twice
    # candidates first: a task written twice shares its start (one hash of one column);
    # distinct tasks rarely do, and then the whole key tells
    maybe = starts.duplicated(keep=False).to_numpy() & starts.notna().to_numpy()
    if not maybe.any():
        return kernels
    alike = _drop_identical_without_id(kernels, maybe, notes, file)
    if alike is not kernels:  # rows gone: the candidates again, on the rows kept
        kernels = alike
        starts = pd.Series(pd.to_numeric(kernels[start], errors="coerce"))
        maybe = starts.duplicated(keep=False).to_numpy() & starts.notna().to_numpy()
        if not maybe.any():
            return kernels
    pos = np.flatnonzero(maybe)
    cols = [*key, start, *(c for c in _OPTIONAL if c in kernels)]
    keyed = pd.DataFrame({c: kernels[c].iloc[pos].astype(TEXT).to_numpy()
                          if c in _OPTIONAL else
                          pd.to_numeric(kernels[c].iloc[pos], errors="coerce").to_numpy()
                          for c in cols})
    whole = keyed[[*key, start]].notna().all(axis=1).to_numpy()
    pos, keyed = pos[whole], keyed[whole].reset_index(drop=True)
    group = keyed.groupby(cols, dropna=False, sort=False).ngroup().to_numpy()
    again = pd.Series(group).duplicated(keep="first").to_numpy()
    if not again.any():
        return kernels
    first_of = np.full(group.max() + 1, -1, dtype=np.int64)
    first_of[group[~again]] = pos[~again]  # group -> its first row (once each)
    dropped, kept = pos[again], first_of[group[again]]
    differ: dict[str, int] = {}
    unlike = np.zeros(len(dropped), dtype=bool)
    for c in (c for c in kernels.columns if c not in _DERIVED):
        col = kernels[c]
        a, b = (col.iloc[rows].reset_index(drop=True) for rows in (dropped, kept))
        both_na = (a.isna() & b.isna()).to_numpy(bool)
        same = both_na | a.eq(b).fillna(False).to_numpy(bool)
        if not same.all():
            differ[c] = int((~same).sum())
            unlike |= ~same
    dur = (float(pd.to_numeric(kernels["dur_us"].iloc[dropped], errors="coerce").sum())
           if "dur_us" in kernels else None)
    notes.append(_note(file, len(dropped), len(np.unique(group[again])), int(unlike.sum()),
                       differ, dur))
    keep = np.ones(len(kernels), dtype=bool)
    keep[dropped] = False
    return kernels.iloc[keep].reset_index(drop=True)


def _note(file: str, dropped: int, tasks: int, n_differ: int, differ: dict[str, int],
          dur_us: float | None) -> str:
    """The note of :func:`drop_repeated` (figures in the words of the module docstring)."""
    alike = dropped - n_differ
    how = []
    if alike:
        copies = "is a copy" if alike == 1 else "are copies"
        how.append(f"{count_text(alike)} {copies} of it in every cell")
    if n_differ:
        cols = listed([_HEADERS.get(c, c) for c in differ])
        verb = "differs" if n_differ == 1 else "differ"
        how.append(f"{count_text(n_differ)} {verb} from it in {cols}")
    time = f", {dur_us:,.3f} µs of task time" if dur_us is not None else ""
    return (f"kernels: {file} records {counted(tasks, 'task')} more than once (the same "
            f"stream, Task ID and start time): {counted(dropped, 'row')} dropped{time}, "
            f"each task counted once, its first row kept ({'; '.join(how)})")


def _drop_identical_without_id(kernels: pd.DataFrame, candidates: np.ndarray,
                               notes: list[str], file: str) -> pd.DataFrame:
    """``kernels`` without the rows that have no stream or Task ID and repeat an earlier
    row in every cell (its start time among them), with a note; itself when none does.
    Only the ``candidates`` (rows whose start time another row shares) are looked at."""
    def known(c: str) -> np.ndarray:  # a number ("N/A" as read is none)
        return pd.Series(pd.to_numeric(kernels[c].iloc[pos], errors="coerce")).notna() \
            .to_numpy(bool)

    pos = np.flatnonzero(candidates)
    no_id = np.zeros(len(kernels), dtype=bool)
    no_id[pos] = ~(known("task_id") & known("stream"))
    if no_id.sum() < 2:
        return kernels
    cols = [c for c in kernels.columns if c not in _DERIVED]
    rows = kernels.loc[no_id, cols]
    again = rows.astype(TEXT).duplicated(keep="first").to_numpy(bool)
    if not again.any():
        return kernels
    drop = np.flatnonzero(no_id)[again]
    dur = (float(pd.to_numeric(kernels["dur_us"].iloc[drop], errors="coerce").sum())
           if "dur_us" in kernels else None)
    time = f", {dur:,.3f} µs of task time" if dur is not None else ""
    notes.append(f"kernels: {file} records {counted(len(drop), 'row')} without a stream or "
                 f"Task ID more than once, alike in every cell (the same start time): "
                 f"dropped{time}, each task counted once")
    keep = np.ones(len(kernels), dtype=bool)
    keep[drop] = False
    return kernels.iloc[keep].reset_index(drop=True)
