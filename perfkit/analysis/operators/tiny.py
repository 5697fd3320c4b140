"""Storms of tiny kernels: :func:`tiny_kernels`.

Per rank, how many tasks are shorter than a threshold, how long their runs on one stream
are, the idle time between them, whether that is a storm and the most frequent tiny names
(:func:`_name_counts`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._frames import is_lazy, per_rank
from .._util import empty_frame, group_codes, shared_factorize, table
from .scope import _LANES, _scope, _stream_order

__all__ = ["tiny_kernels", "TINY_COLUMNS"]


TINY_COLUMNS: dict[str, str] = {
    "rank": "Int64", "kernels": "int64", "tiny_kernels": "int64", "tiny_count_share": "float64",
    "tiny_total_us": "float64", "tiny_time_share": "float64", "longest_run": "int64",
    "run_gap_us": "float64", "storm": "boolean", "top_names": "string",
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
    """
    if is_lazy(profile):  # runs of one stream of one rank: computed on that rank's worker
        return per_rank(profile, tiny_kernels, threshold_us, storm_share, min_run,
                        max_gap_us)[list(TINY_COLUMNS)].astype(TINY_COLUMNS)
    kernels = table(profile, "kernels")
    k = _scope(kernels, include_communication=False, columns=_LANES)
    if k.empty:
        return empty_frame(TINY_COLUMNS, "the profile has no device tasks (kernels table)")
    # which names are tiny does not depend on the order: counted before ordering the tasks
    names = _name_counts(k, (k["dur_us"] < threshold_us).to_numpy(bool))
    k = _stream_order(k, ("rank", "stream", "start_us", "dur_us"), kernels)
    start = k["start_us"].to_numpy(np.float64, na_value=np.nan)
    dur = k["dur_us"].to_numpy(np.float64, na_value=np.nan)
    tiny = dur < threshold_us
    after_tiny = np.r_[False, tiny[:-1]]
    # the same stream of the same rank as the task before (a missing rank or stream never is)
    same = _same_as_before(k["rank"]) & _same_as_before(k["stream"])
    # consecutive tiny tasks on one stream: run ids break on a non-tiny task or stream change
    run_id = np.cumsum(~tiny | ~same | ~after_tiny)
    run_len = np.where(tiny, np.bincount(run_id, weights=tiny).astype(np.int64)[run_id], 0)
    gap = np.clip(start - np.r_[np.nan, (start + dur)[:-1]], 0.0, None)
    gap = np.where(tiny & after_tiny & same & (gap < max_gap_us), gap, 0.0)  # NaN: 0
    code, index = group_codes(k, ["rank"])  # few ranks: per-rank sums over the code space
    n_codes = int(code.max()) + 1
    present = np.flatnonzero(np.bincount(code, minlength=n_codes))

    def rank_sum(weights: np.ndarray) -> np.ndarray:
        return np.bincount(code, weights, n_codes)[present]

    longest = np.zeros(n_codes, dtype=np.int64)
    np.maximum.at(longest, code, run_len)
    out = pd.DataFrame({
        "kernels": np.bincount(code, minlength=n_codes)[present],
        "tiny_kernels": rank_sum(tiny.astype(np.float64)).astype(np.int64),
        "tiny_total_us": rank_sum(np.where(tiny, dur, 0.0)),
        "total_us": rank_sum(np.nan_to_num(dur, nan=0.0)),
        "longest_run": longest[present], "run_gap_us": rank_sum(gap)}, index=index)
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
    return out[list(TINY_COLUMNS)].astype(TINY_COLUMNS)


def _same_as_before(col: pd.Series) -> np.ndarray:
    """Whether each row holds the value of the row before (missing values never do)."""
    values = col.to_numpy(np.float64, na_value=np.nan)  # ranks and streams: whole numbers
    return np.r_[False, values[1:] == values[:-1]]


def _name_counts(k: pd.DataFrame, rows: np.ndarray) -> pd.Series:
    """``k[rows].groupby(["rank", "name"], dropna=False).size()``, grouping integer codes.

    The names are coded once (codes other analyses share) and each code is replaced by
    the rank of its text, so that the groups sort as the texts do (missing names last).
    """
    code, uniq = shared_factorize(k["name"], use_na_sentinel=True)
    texts, text_rank = np.unique(np.asarray(uniq, dtype=object).astype(str),
                                 return_inverse=True)
    text_rank = np.append(text_rank.ravel(), len(texts))  # code -1 (missing) sorts last
    pairs = pd.DataFrame({"rank": k["rank"].array[rows], "name": text_rank[code[rows]]})
    try:  # sorted groups, missing ranks last, as the groupby: counted by integer code
        group, index = group_codes(pairs, ["rank", "name"])
        if len(group) and int(group.max()) <= 4 * len(group) + 1024:
            sizes = np.bincount(group)
            sizes = sizes[sizes > 0]  # the codes present, in order: the index's
        else:
            sizes = np.unique(group, return_counts=True)[1]
        counts = pd.Series(sizes, index=index, dtype="int64")
    except OverflowError:
        counts = pairs.groupby(["rank", "name"], dropna=False).size()
    text_of_rank = np.append(texts, None).astype(object)  # the last rank: missing name
    dtype = k["name"].dtype  # the text's dtype, also of names held as a categorical
    if isinstance(dtype, pd.CategoricalDtype):
        dtype = dtype.categories.dtype
    name = pd.array(text_of_rank[counts.index.get_level_values("name").to_numpy(np.int64)],
                    dtype=dtype)
    counts.index = pd.MultiIndex.from_arrays(
        [counts.index.get_level_values("rank"), name], names=["rank", "name"])
    return counts
