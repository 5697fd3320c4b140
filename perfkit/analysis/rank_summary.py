"""Per-rank summaries of a cluster that work the same on eager and lazy (Dask) clusters.

These are the first cluster-level analyses written for ``load(..., engine="dask")``; they
show the two ways an analysis can consume lazy tables (see :mod:`perfkit.analysis._frames`)
and give the same pandas frame, to the last bit, whichever engine loaded the cluster:

- :func:`rank_step_breakdown` is :func:`~perfkit.analysis.steps.step_breakdown`, which
  on a lazy cluster runs on each rank where its data lies (per-rank pattern) and
  concatenates the small results;
- :func:`rank_step_summary` averages that breakdown over the steps of each rank;
- :func:`rank_comm_summary` sums the communication time split of ``comm_ops`` per rank
  (and collective kind) with one Dask groupby-aggregation (aggregate pattern).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._text_dtype import TEXT
from ..errors import InvalidArgumentError
from ._frames import aggregate, is_lazy_frame, table_columns
from ._util import add_note, empty_frame, typed
from .collectives import comm_op_type
from .steps import step_breakdown

__all__ = ["rank_step_breakdown", "rank_step_summary", "rank_comm_summary",
           "RANK_STEP_COLUMNS", "RANK_COMM_COLUMNS"]

_PARTS = ("computing", "comm_not_overlapped", "free", "overlapped", "bubble", "preparing")

#: Columns of :func:`rank_step_summary`.
RANK_STEP_COLUMNS: dict[str, str] = {
    "rank": "Int64", "steps": "int64", "step_us": "float64",
    **{f"{p}_us": "float64" for p in _PARTS},
    **{f"{p}_share": "float64" for p in _PARTS},
}

_SPLIT = ("transit", "wait", "sync", "idle")

#: Columns of :func:`rank_comm_summary` (``op_type`` only with ``by_op_type=True``).
RANK_COMM_COLUMNS: dict[str, str | pd.StringDtype] = {
    "rank": "Int64", "op_type": TEXT, "ops": "int64", "total_us": "float64",
    "mean_us": "float64", "max_us": "float64",
    **{f"{p}_us": "float64" for p in _SPLIT},
    **{f"{p}_share": "float64" for p in _SPLIT},
}


def rank_step_breakdown(obj: Any, derive: str = "auto") -> pd.DataFrame:
    """:func:`~perfkit.analysis.steps.step_breakdown` of a Profile or Cluster, lazy or not.

    Parameters
    ----------
    obj : Profile, Cluster or DaskCluster
    derive : {"auto", "always", "never"}
        As in ``step_breakdown``. For a lazy cluster the ``"auto"`` choice (profiler step
        table or device tasks) is made once for the whole cluster, as for an eager one.

    Returns
    -------
    DataFrame
        One row per (rank, step): the columns of
        :data:`~perfkit.analysis.steps.STEP_COLUMNS`. For a lazy cluster each rank is
        computed where its cache entry is read and only these rows travel; the result is
        kept (per cluster object and ``derive``) for the next call (see
        :func:`~perfkit.analysis.steps.step_breakdown`).
    """
    if derive not in ("auto", "always", "never"):
        raise InvalidArgumentError("derive", "must be one of ('auto', 'always', 'never')",
                                   derive)
    return step_breakdown(obj, derive=derive)


def rank_step_summary(obj: Any, derive: str = "auto") -> pd.DataFrame:
    """Mean step breakdown of every rank (the first table to read for a cluster).

    Parameters
    ----------
    obj : Profile, Cluster or DaskCluster
    derive : {"auto", "always", "never"}
        Passed to :func:`rank_step_breakdown`.

    Returns
    -------
    DataFrame
        :data:`RANK_STEP_COLUMNS`, one row per rank: ``steps`` (rows of the breakdown),
        the mean of ``step_us`` and of each part over the rank's steps, and
        ``<part>_share`` = mean part / mean step time (NA when a part is unknown).
    """
    s = rank_step_breakdown(obj, derive=derive)
    if s.empty:
        out = empty_frame(RANK_STEP_COLUMNS)
        for n in s.attrs.get("notes", []):
            add_note(out, n)
        return out
    g = s.groupby("rank", sort=True)
    out = g.agg(steps=("step_us", "size"), step_us=("step_us", "mean"),
                **{f"{p}_us": (f"{p}_us", "mean") for p in _PARTS}).reset_index()
    step = out["step_us"].where(out["step_us"] > 0)
    for p in _PARTS:
        out[f"{p}_share"] = out[f"{p}_us"] / step
    out = typed(out, RANK_STEP_COLUMNS)
    for n in s.attrs.get("notes", []):
        add_note(out, n)
    return out


def _with_op_type(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(op_type=comm_op_type(frame["name"]).astype(TEXT))


def rank_comm_summary(obj: Any, by_op_type: bool = False) -> pd.DataFrame:
    """Communication time of every rank (and collective kind), with its time split.

    One groupby-aggregation over ``comm_ops``; for a lazy cluster Dask runs it per rank
    partition and only the per-rank sums travel.

    Parameters
    ----------
    obj : Profile, Cluster or DaskCluster
    by_op_type : bool
        Also split by collective kind (``allreduce``, ``send``, ...; see
        :func:`~perfkit.analysis.communication.comm_op_type`).

    Returns
    -------
    DataFrame
        :data:`RANK_COMM_COLUMNS` (without ``op_type`` unless ``by_op_type``), sorted by
        rank (and kind): ``ops`` operators with an elapse time, ``total_us`` their summed
        ``elapse_us``, ``mean_us`` = total / ops, ``max_us``; ``transit/wait/sync/idle_us``
        sums of those parts (NA when the source records none, e.g. Kineto);
        ``<part>_share`` = part / total. The seed reads a high ``wait_share`` as a slow
        peer (or a slow rank itself), a high ``transit_share`` with low bandwidth as a
        link problem.
    """
    cols = dict(RANK_COMM_COLUMNS)
    if not by_op_type:
        del cols["op_type"]
    present = table_columns(obj, "comm_ops")
    if "elapse_us" not in present or "rank" not in present:
        return empty_frame(cols, "no communication operators (comm_ops)")
    c = obj.comm_ops
    parts = [f"{p}_us" for p in _SPLIT if f"{p}_us" in present]
    c = c[["rank", "name", "elapse_us", *parts]]
    keys = ["rank"]
    if by_op_type:
        if is_lazy_frame(c):
            meta = _with_op_type(c._meta)
            c = c.map_partitions(_with_op_type, meta=meta)
        else:
            c = _with_op_type(c)
        keys.append("op_type")
    spec = {"elapse_us": ["count", "sum", "max"], **{p: ["count", "sum"] for p in parts}}
    agg = aggregate(c, keys, spec)
    agg = agg[agg["elapse_us_count"] > 0]
    if agg.empty:
        return empty_frame(cols, "no communication operator has an elapse time")
    out = agg[keys].copy()
    out["ops"] = agg["elapse_us_count"]
    out["total_us"] = agg["elapse_us_sum"]
    out["mean_us"] = out["total_us"] / out["ops"]
    out["max_us"] = agg["elapse_us_max"]
    total = out["total_us"].where(out["total_us"] > 0)
    for p in _SPLIT:
        col = f"{p}_us"
        if col in parts:
            out[col] = agg[f"{col}_sum"].where(agg[f"{col}_count"] > 0)
        else:
            out[col] = np.nan
        out[f"{p}_share"] = out[col] / total
    return typed(out, cols).reset_index(drop=True)
