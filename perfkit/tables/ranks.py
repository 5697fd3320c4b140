"""Ranks folded into one row per key (:func:`over_ranks`), and the columns that hold a value.

:func:`over_ranks` is the default view of a per-rank frame: one row per key with the
median, the smallest and the largest value over the ranks and the rank that has the largest
(the worst rank), instead of the same row repeated once per rank. :func:`with_values` names
the columns that hold a value in some row, so that a page can leave out a column of dashes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from ..errors import InvalidArgumentError

__all__ = ["SPREAD_STATS", "over_ranks", "with_values"]


#: What :func:`over_ranks` writes for each value column, in order.
SPREAD_STATS = ("median", "min", "max")


_UNIT_SUFFIX = re.compile(r"_(?:us|ms|s|bytes|share|pct|gbps|tflops)$")


def _split_unit(name: str) -> tuple[str, str]:
    """``"step_us"`` → ``("step", "_us")``; a name without a unit suffix → ``(name, "")``."""
    m = _UNIT_SUFFIX.search(name)
    return (name[: m.start()], m.group(0)) if m else (name, "")


def with_values(frame: pd.DataFrame, columns: Iterable[str] | None = None) -> list[str]:
    """The ``columns`` of ``frame`` (default: all) that hold a value in some row.

    A page leaves the others out and says once what the profile does not record, rather
    than show a column of dashes. All of them when the frame has no row (its empty table
    says so itself).
    """
    names = list(frame.columns if columns is None else columns)
    if frame.empty:
        return names
    return [c for c in names if bool(frame[c].notna().any())]


def over_ranks(frame: pd.DataFrame, by: Sequence[str], values: Sequence[str],
               keep: Mapping[str, str] | None = None, rank: str = "rank",
               worst: str = "max", sort: bool = True) -> pd.DataFrame:
    """One row per key instead of one per (key, rank): median, min and max over the ranks
    and the rank with the worst value.

    Parameters
    ----------
    frame : pandas.DataFrame
        A per-rank frame (e.g. :func:`perfkit.analysis.step_breakdown`,
        :func:`~perfkit.analysis.unfused_patterns`, :func:`~perfkit.analysis.memory_peaks`)
        with a ``rank`` column.
    by : sequence of str
        The key columns (``["step"]``, ``["pattern"]``, ``["component"]``); empty for one
        row over all ranks.
    values : sequence of str
        Numeric columns to spread. Several rows of one (key, rank) are summed first. The
        first value column decides the worst rank and the order.
    keep : mapping, optional
        Other columns and how to reduce them over the ranks: ``"first"``, ``"median"``,
        ``"sum"``, ``"max"`` or ``"min"``.
    rank : str
        The rank column (a frame without one counts as one rank, 0).
    worst : {"max", "min"}
        Whether the worst rank has the largest value of the first value column (a time, the
        default) or the smallest (a bandwidth).
    sort : bool
        Sort by the median of the first value column, worst first.

    Returns
    -------
    pandas.DataFrame
        The ``by`` columns, then for each value ``v`` with unit suffix ``_u`` (e.g.
        ``step_us``): ``v_median_u``, ``v_min_u``, ``v_max_u`` (``step_median_us`` ...),
        then ``worst_rank`` and ``ranks`` (how many ranks have the key), then the ``keep``
        columns. ``attrs`` keeps ``frame``'s warnings and notes.
    """
    by, values, keep = list(by), list(values), dict(keep or {})
    if worst not in ("max", "min"):
        raise InvalidArgumentError("worst", "must be 'max' or 'min'", worst)
    if not values:
        raise InvalidArgumentError("values", "needs at least one column")
    for c in [*by, *values, *keep]:
        if c not in frame.columns:
            raise InvalidArgumentError("frame", f"has no column {c}")
    for how in keep.values():
        if how not in ("first", "median", "sum", "max", "min"):
            raise InvalidArgumentError("keep", "ways are first, median, sum, max, min", how)
    data = frame.assign(**{rank: 0}) if rank not in frame.columns else \
        frame[frame[rank].notna()]
    keys = by or ["_all"]
    data = data.assign(_all=0) if not by else data
    per_rank = data.groupby([*keys, rank], dropna=False, sort=False, as_index=False)[
        values].sum(min_count=1)
    groups = per_rank.groupby(keys, dropna=False, sort=False)
    out = pd.DataFrame(index=groups.size().index)
    for v in values:
        stem, suffix = _split_unit(v)
        for stat in SPREAD_STATS:
            out[f"{stem}_{stat}{suffix}"] = getattr(groups[v], stat)()
    first = per_rank[values[0]]
    order = first.fillna(-float("inf") if worst == "max" else float("inf"))
    pick = per_rank.loc[(order.groupby([per_rank[k] for k in keys], dropna=False, sort=False)
                         .idxmax() if worst == "max" else
                         order.groupby([per_rank[k] for k in keys], dropna=False, sort=False)
                         .idxmin()).to_numpy()]
    has_value = first.notna().groupby([per_rank[k] for k in keys], dropna=False,
                                      sort=False).any()
    worst_rank = pd.Series(pick[rank].to_numpy(), index=out.index).astype("Int64")
    out["worst_rank"] = worst_rank.where(has_value.reindex(out.index).to_numpy())
    out["ranks"] = groups[rank].nunique()
    kept = data.groupby(keys, dropna=False, sort=False)
    for c, how in keep.items():
        out[c] = getattr(kept[c], how)()
    out = out.reset_index()
    if not by:
        out = out.drop(columns="_all")
    if sort and len(out):
        stem, suffix = _split_unit(values[0])
        out = out.sort_values(f"{stem}_median{suffix}", ascending=(worst == "min"),
                              kind="mergesort", na_position="last")
    return _with_said(out.reset_index(drop=True), frame)


def _with_said(out: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """``out`` with ``frame``'s warnings and notes (why a table is empty, what cannot be
    right), which a page shows with the folded table as with the frame."""
    for key in ("warnings", "notes"):
        if frame.attrs.get(key):
            out.attrs[key] = list(frame.attrs[key])
    return out
