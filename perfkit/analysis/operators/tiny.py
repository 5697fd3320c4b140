"""Storms of tiny kernels: :func:`tiny_kernels`.

Per rank, how many tasks are shorter than a threshold, how long their runs on one stream
are, the idle time between them, whether that is a storm and the most frequent tiny names
(:func:`_name_counts`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...errors import check_fraction, check_non_negative, check_positive, check_positive_int
from .._cluster_steps import per_rank_in_steps
from .._frames import is_lazy
from .._shared import shared_factorize
from .._util import empty_frame, noted_no_step, ranks_noted_no_step, table, typed
from .scope import _LANES, _by_rank, _lanes, _scope

__all__ = ["tiny_kernels", "TINY_COLUMNS"]


TINY_COLUMNS: dict[str, str | pd.StringDtype] = {
    "rank": "Int64", "kernels": "int64", "tiny_kernels": "int64", "tiny_count_share": "float64",
    "tiny_total_us": "float64", "tiny_time_share": "float64", "longest_run": "int64",
    "run_gap_us": "float64", "storm": "boolean", "top_names": TEXT,
}


def tiny_kernels(profile: Any, threshold_us: float = 10.0, storm_share: float = 0.5,
                 min_run: int = 50, max_gap_us: float = 1000.0) -> pd.DataFrame:
    """Storms of tiny kernels: many very short tasks whose launch cost dominates.

    Parameters
    ----------
    threshold_us : float
        A task shorter than this is *tiny*.
    storm_share : float
        A rank has a storm when at least this share of its tasks is tiny ...
    min_run : int
        ... or when at least ``min_run`` tiny tasks run back to back on one stream.
    max_gap_us : float
        Gaps between tiny tasks longer than this are not launch overhead (the stream waits
        for something else) and are left out of ``run_gap_us``.

    Returns
    -------
    DataFrame
        One row per rank (:data:`TINY_COLUMNS`): task counts, tiny count and time
        shares, ``longest_run`` (most consecutive tiny tasks on one stream),
        ``run_gap_us`` (device idle time between consecutive tiny tasks of a stream, the
        launch overhead they expose), ``storm`` and the five most frequent tiny names.
        A task of no step (launched before the trace began) is left out where other
        tasks have one (:func:`~perfkit.analysis._tasks.scope_rows`), with a note.
    """
    check_positive("threshold_us", threshold_us)
    check_fraction("storm_share", storm_share, allow_zero=False)
    check_positive_int("min_run", min_run)
    check_non_negative("max_gap_us", max_gap_us)
    if is_lazy(profile):  # runs of one stream of one rank: computed on that rank's worker
        # the tasks of no step left out as the whole cluster leaves them out
        return ranks_noted_no_step(typed(per_rank_in_steps(profile, tiny_kernels, threshold_us,
                                                           storm_share, min_run, max_gap_us,
                                                           noted=True),
                                         TINY_COLUMNS), table(profile, "kernels"))
    kernels = table(profile, "kernels")
    k = _scope(kernels, include_communication=False, columns=_LANES)
    if k.empty:
        return empty_frame(TINY_COLUMNS, "the profile has no device tasks (kernels table)")
    # which names are tiny does not depend on the order: counted before ordering the tasks
    dur = k["dur_us"].to_numpy(np.float64, na_value=np.nan)
    names = _name_counts(k, dur < threshold_us)
    # the tasks of each (rank, stream) in start order
    lanes = _lanes(kernels)
    start = lanes.take(k["start_us"].to_numpy(np.float64, na_value=np.nan))
    dur = lanes.take(dur)
    tiny = dur < threshold_us
    # the same stream of the same rank as the task before (a missing rank or stream never is)
    same = lanes.continues(len(dur))
    # runs of consecutive tiny tasks on one stream: a tiny task after a tiny task of its
    # stream carries its run on; the others start one (first) or end one (last)
    carried = tiny & same & np.r_[False, tiny[:-1]]
    first = np.flatnonzero(tiny & ~carried)
    last = np.flatnonzero(tiny & ~np.r_[carried[1:], False])
    by_rank = _by_rank(k, lanes)
    # the idle time before each tiny task that carries a run on (launch overhead), where
    # shorter than max_gap_us (NaN: none)
    at = np.flatnonzero(carried)
    gap = np.clip(start[at] - (start[at - 1] + dur[at - 1]), 0.0, None)
    gap = np.where(gap < max_gap_us, gap, 0.0)
    tiny_rows = np.flatnonzero(tiny)
    out = pd.DataFrame({
        "kernels": by_rank.count(), "tiny_kernels": by_rank.count(tiny_rows),
        "tiny_total_us": by_rank.sum(dur[tiny_rows], tiny_rows),
        "total_us": by_rank.sum(dur),
        "longest_run": by_rank.max(last - first + 1, first),
        "run_gap_us": by_rank.sum(gap, at)}, index=by_rank.index)
    out["tiny_count_share"] = out["tiny_kernels"] / out["kernels"]
    out["tiny_time_share"] = out["tiny_total_us"] / out["total_us"].where(out["total_us"] > 0)
    out["storm"] = (out["tiny_count_share"] >= storm_share) | (out["longest_run"] >= min_run)
    # stable: equal counts keep name order, so a rank alone gives the same five names
    names = names.sort_values(ascending=False, kind="mergesort").groupby(
        level=0, dropna=False).head(5)
    top = names.reset_index().groupby("rank", dropna=False)["name"].agg(
        lambda s: ", ".join(s.astype(str)))
    out["top_names"] = top.reindex(out.index)
    out = out.reset_index()
    return noted_no_step(typed(out, TINY_COLUMNS), kernels)


def _name_counts(k: pd.DataFrame, rows: np.ndarray) -> pd.Series:
    """``k[rows].groupby(["rank", "name"], dropna=False).size()``, counting integer codes.

    The names are coded once (codes other analyses share) and each code is replaced by
    the rank of its text, so that the groups sort as the texts do (missing names last);
    each (rank, name) pair is one integer, counted.
    """
    code, uniq = shared_factorize(k["name"], use_na_sentinel=True)
    texts, text_rank = np.unique(np.asarray(uniq, dtype=object).astype(str),
                                 return_inverse=True)
    text_rank = np.append(text_rank.ravel(), len(texts))  # code -1 (missing) sorts last
    n_names = len(texts) + 1
    by_rank = _by_rank(k)
    picked = np.flatnonzero(rows)
    pair = text_rank[code[picked]]
    if by_rank.code is not None:  # the rank's place among the ranks present, first
        pair = pair + np.searchsorted(by_rank.present, by_rank.code[picked]) * n_names
    sizes = np.bincount(pair, minlength=1)
    keys = np.flatnonzero(sizes)
    text_of_rank = np.append(texts, None).astype(object)  # the last rank: missing name
    dtype = k["name"].dtype  # the text's dtype, also of names held as a categorical
    if isinstance(dtype, pd.CategoricalDtype):
        dtype = dtype.categories.dtype
    index = pd.MultiIndex.from_arrays(
        [by_rank.index.take(keys // n_names),
         pd.array(text_of_rank[keys % n_names], dtype=dtype)], names=["rank", "name"])
    return pd.Series(sizes[keys], index=index, dtype="int64")
