"""Compute-, memory- or latency-bound, from the Ascend PMU pipe ratios.

:func:`operator_bound` gives the verdict per operator type, :func:`_bound_frame` that of
each task and :func:`~perfkit.analysis.operators.top.top_operators` that of each of its
groups: one rule, :func:`bound_labels`, on the duration-weighted ratios (:func:`pipe_ratios`
per task).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ..._text_dtype import TEXT
from .._cluster_steps import in_cluster_steps
from .._frames import aggregate, is_lazy, transform
from .._tasks import PMU_COMPUTE, PMU_MEMORY
from .._util import empty_frame, table
from .scope import _scope

__all__ = ["operator_bound", "bound_labels", "pipe_ratios", "LATENCY_BELOW"]


def _row_max(k: pd.DataFrame, cols: list[str]) -> pd.Series:
    """``k[cols].astype("float64").max(axis=1)`` (NaN only where every value is)."""
    with np.errstate(invalid="ignore"):
        vals = np.fmax.reduce([k[c].to_numpy(np.float64, na_value=np.nan) for c in cols])
    return pd.Series(vals, index=k.index)


#: Below this, on both the busiest compute and the busiest data-movement pipe, a kernel
#: mostly waits (too small, or scalar-bound): "latency".
LATENCY_BELOW = 0.2


def bound_labels(compute: Any, memory: Any, index: Any = None) -> pd.Series:
    """``"memory"`` where the busiest data-movement pipe's ratio exceeds the busiest
    compute pipe's, ``"compute"`` otherwise, ``"latency"`` where both are below
    :data:`LATENCY_BELOW`; NA where either is unknown or both are 0. One rule for a task
    (:func:`_bound_frame`), an operator type (:func:`operator_bound`) and a group of
    :func:`~perfkit.analysis.operators.top.top_operators`, each given its
    duration-weighted ratios."""
    c = np.asarray(compute, dtype=np.float64)
    m = np.asarray(memory, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        code = np.where(m > c, 0, 1)  # memory, compute
        code = np.where((c < LATENCY_BELOW) & (m < LATENCY_BELOW), 2, code)  # latency
        known = ~np.isnan(c) & ~np.isnan(m) & ((c > 0) | (m > 0))
    # the three labels as a dictionary column (no Python string per task)
    arr = pa.DictionaryArray.from_arrays(pa.array(code.astype(np.int8), mask=~known),
                                         pa.array(["memory", "compute", "latency"]))
    return pd.Series(pd.arrays.ArrowStringArray(arr.cast(pa.large_string())),
                     index=index, dtype=TEXT)


def pipe_ratios(k: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each task's busiest compute-pipe and data-movement-pipe ratio (NaN where no PMU
    columns, or where either is unknown)."""
    compute_cols, memory_cols = _pmu_columns(k.columns)
    if not compute_cols or not memory_cols:
        nan = pd.Series(np.nan, index=k.index)
        return nan, nan.copy()
    return _row_max(k, compute_cols), _row_max(k, memory_cols)


def _bound_frame(k: pd.DataFrame) -> pd.Series:
    """Per-task bound label from PMU pipe ratios (NA where no PMU columns)."""
    c, m = pipe_ratios(k)
    return bound_labels(c.to_numpy(), m.to_numpy(), k.index)


def _pmu_columns(columns: Any) -> tuple[list[str], list[str]]:
    """(compute-pipe, data-movement) PMU ratio columns present in ``columns``."""
    return [c for c in PMU_COMPUTE if c in columns], [c for c in PMU_MEMORY if c in columns]


def _bound_weights(kernels: pd.DataFrame) -> pd.DataFrame:
    """Tasks in scope with PMU ratios: ``_type``, ``dur_us``, duration-weighted ratios."""
    k = _scope(kernels, include_communication=False)
    c, m = pipe_ratios(k)  # the per-task ratios every verdict of this module reads
    k = k.assign(_c=c, _m=m)
    k = k[k["_c"].notna() & k["_m"].notna()]
    k = k.assign(_cw=k["_c"] * k["dur_us"], _mw=k["_m"] * k["dur_us"],
                 _type=k["type"].fillna(k["name"]))
    return k[["_type", "dur_us", "_cw", "_mw"]]


def operator_bound(profile: Any) -> pd.DataFrame:
    """Compute- vs memory-bound per operator type from the PMU pipe ratios.

    Uses the Ascend ``aic_mac_ratio`` / ``aiv_vec_ratio`` (compute pipes) against
    ``aic_mte1/2_ratio``, ``aiv_mte2/3_ratio`` (data movement), duration-weighted per
    operator type. ``bound`` is ``"memory"`` when the busiest movement pipe exceeds the
    busiest compute pipe, ``"compute"`` otherwise, ``"latency"`` when both are below 0.2
    (the kernel mostly waits: too small, or scalar-bound): :func:`bound_labels` of the
    weighted ratios, the rule :func:`~perfkit.analysis.operators.top.top_operators` applies
    to its groups.

    Returns
    -------
    DataFrame
        ``type``, ``count``, ``total_us``, ``compute_ratio``, ``memory_ratio``, ``bound``;
        empty with a note when the profile has no PMU columns (for example GPU traces or
        Ascend ``aic_metrics`` other than PipeUtilization).
    """
    cols = {"type": TEXT, "count": "int64", "total_us": "float64",
            "compute_ratio": "float64", "memory_ratio": "float64", "bound": TEXT}
    meta = getattr(profile, "meta", None)
    note = ("no PMU pipe-ratio columns (needs Ascend aic_metrics=PipeUtilization); bound "
            "type unknown" if (getattr(meta, "device_type", None) or "npu") == "npu" else
            "a GPU or CPU trace records no PMU pipe ratios: the bound is read from the "
            "shapes instead (operator_efficiency's roofline)")
    kernels = table(profile, "kernels")
    if is_lazy(kernels):  # weighted sums per type on the workers
        if not _pmu_columns(kernels.columns)[0] or not _pmu_columns(kernels.columns)[1]:
            return empty_frame(cols, note)
        # each rank's tasks in scope as the whole cluster's (its tasks of no step)
        kernels = table(in_cluster_steps(profile), "kernels")
        a = aggregate(transform(kernels, _bound_weights), ["_type"],
                      {"dur_us": ["size", "sum"], "_cw": ["sum"], "_mw": ["sum"]},
                      dropna=False)
        if a.empty:
            return empty_frame(cols, note)
        g = a.set_index("_type").rename(columns={"dur_us_size": "count",
                                                 "dur_us_sum": "total_us",
                                                 "_cw_sum": "_cw", "_mw_sum": "_mw"})
    else:
        k = _scope(kernels, include_communication=False)
        compute_cols, memory_cols = _pmu_columns(k.columns)
        if k.empty or not compute_cols or not memory_cols:
            return empty_frame(cols, note)
        k = _bound_weights(k)
        g = k.groupby("_type", dropna=False).agg(
            count=("dur_us", "size"), total_us=("dur_us", "sum"), _cw=("_cw", "sum"),
            _mw=("_mw", "sum"))
    g["compute_ratio"] = g["_cw"] / g["total_us"].where(g["total_us"] > 0)
    g["memory_ratio"] = g["_mw"] / g["total_us"].where(g["total_us"] > 0)
    g["bound"] = bound_labels(g["compute_ratio"], g["memory_ratio"], g.index)
    g = g.rename_axis("type").reset_index().sort_values("total_us", ascending=False)
    out = g[list(cols)].reset_index(drop=True)
    return out.astype(cols)
