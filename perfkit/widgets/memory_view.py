"""What the Memory tab draws: components grouped as the profilers report them, ranks folded.

The ``memory`` table has one series per (rank, component): on the 16-rank sample that is
32 lines, on a real torch_npu export 79 components per rank (most of them CANN modules
that never reserve a byte). The Memory tab shows one family at a time:

* **framework** — the framework's allocator: torch_npu ``PTA``, ``GE``, ``PTA+GE``,
  MindSpore ``MindSpore`` (``+GE``), Kineto ``allocator`` (allocated, reserved, active);
* **application** — ``APP``, the whole process as the driver sees it (reserved only);
* **runtime / HCCL** — CANN runtime modules that hold device memory: ``HCCL`` (the
  collective library's buffers), ``RUNTIME``, ``HCCP``, ``ROCE``, ``TS`` ...;
* **other** — anything else.

Within a family, series that never hold a byte are hidden and the largest come first; ranks
are folded into one line per component (the maximum over the ranks in each time bin, so a
peak of any rank shows), or one rank is picked. The default quantity is the first of
allocated / reserved / active that has a non-zero sample (a Kineto trace reports
``reserved`` as zeros).

Nothing here computes a metric: the functions regroup and re-bin
:func:`perfkit.analysis.memory_timeline` and :func:`perfkit.analysis.memory_peaks`, and
:func:`theory_at_fullest_rank` keeps the one device of
:func:`perfkit.analysis.memory_vs_theory` that the tab holds against the theory.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .._stats import median
from ..errors import InvalidArgumentError
from ..format import bytes_text, counted

__all__ = ["FAMILIES", "FRAMEWORK", "HOST", "APPLICATION", "RUNTIME", "OTHER", "VALUES",
           "component_family", "families_present", "families_offered", "NPU_ONLY",
           "default_value", "memory_series", "peaks_by_component", "THEORY_ITEMS",
           "theory_at_fullest_rank"]

FRAMEWORK = "framework"
#: The framework's allocator on the host (a Kineto trace's CPU samples, ``component`` "host"):
#: the job's memory on a CPU-only run, never a device's.
HOST = "host allocator"
APPLICATION = "application"
RUNTIME = "runtime / HCCL"
OTHER = "other"
#: Families in the order the tab offers them.
FAMILIES = (FRAMEWORK, HOST, APPLICATION, RUNTIME, OTHER)
#: Quantities of the memory table, in the order the default is looked for.
VALUES = ("allocated_bytes", "reserved_bytes", "active_bytes")

_FRAMEWORK = {"PTA", "GE", "PTA+GE", "MINDSPORE", "MINDSPORE+GE", "ALLOCATOR", "MS"}
_APPLICATION = {"APP"}
_RUNTIME = {"HCCL", "HCCP", "RUNTIME", "ROCE", "TS", "DRV", "DEVMM", "ASCENDCL", "RTC",
            "TSYNC", "FFTS", "CCE", "KERNEL", "OP", "TBE", "FE", "AICPU", "AIVECTOR"}


def component_family(component: object) -> str:
    """The family of a memory component name (:data:`FAMILIES`)."""
    name = str(component).strip().upper()
    if name in _FRAMEWORK:
        return FRAMEWORK
    if name == "HOST":
        return HOST
    if name in _APPLICATION:
        return APPLICATION
    if name in _RUNTIME:
        return RUNTIME
    return OTHER


def _nonzero(frame: pd.DataFrame, value: str) -> pd.Series:
    """Per component: whether it has a sample above zero of ``value``."""
    if value not in frame.columns or frame.empty:
        return pd.Series(dtype=bool)
    return frame[value].fillna(0).gt(0).groupby(frame["component"].astype(str)).any()


def families_present(timeline: pd.DataFrame) -> list[str]:
    """Families with at least one component holding a byte of any quantity, in
    :data:`FAMILIES` order."""
    held = set()
    for value in VALUES:
        s = _nonzero(timeline, value)
        held |= {component_family(c) for c, ok in s.items() if ok}
    return [f for f in FAMILIES if f in held]


#: The families of an Ascend NPU's memory records only: CANN's application and runtime
#: modules (``APP``, ``HCCL``, ...). A GPU's collective library is NCCL, which a Kineto
#: trace's memory events do not name: a GPU profile is never offered them.
NPU_ONLY = (APPLICATION, RUNTIME)


def families_offered(timeline: pd.DataFrame, device_type: str | None) -> list[str]:
    """What the Memory tab's family picker offers: the families that hold data
    (:func:`families_present`), else every family the device can have (no HCCL runtime
    on a GPU or a CPU: only an NPU's records name CANN's modules)."""
    present = families_present(timeline)
    if str(device_type or "").lower() not in ("npu", "ascend", ""):
        present = [f for f in present if f not in NPU_ONLY]
        return present or [f for f in FAMILIES if f not in NPU_ONLY]
    return present or list(FAMILIES)


def default_value(timeline: pd.DataFrame, family: str | None = None) -> str | None:
    """The first of :data:`VALUES` with a non-zero sample in ``family`` (all families when
    None), or None when the profile holds no memory sample above zero."""
    data = timeline
    if family is not None and not data.empty:
        data = data[data["component"].map(component_family) == family]
    for value in VALUES:
        if _nonzero(data, value).any():
            return value
    return None


def memory_series(timeline: pd.DataFrame, value: str, family: str | None = None,
                  rank: int | None = None, bins: int = 200,
                  max_series: int = 12) -> pd.DataFrame:
    """The lines of the Memory chart: one per component of ``family``, ranks folded.

    Parameters
    ----------
    timeline : pandas.DataFrame
        :func:`perfkit.analysis.memory_timeline` (``rank``, ``component``, ``ts_us`` and
        the byte columns).
    value : {"allocated_bytes", "reserved_bytes", "active_bytes"}
    family : str, optional
        Keep the components of this family (:data:`FAMILIES`); None keeps all.
    rank : int, optional
        Keep this rank; None folds the ranks: the samples are put into ``bins`` equal time
        bins over the whole profile and each (component, bin) keeps the maximum over the
        ranks (a peak of any rank is never averaged away).
    bins : int
        Time bins when ranks are folded.
    max_series : int
        Keep the components with the largest peaks (the rest are listed in
        ``attrs["hidden"]``).

    Returns
    -------
    pandas.DataFrame
        ``series`` (the component, with ``", max over N ranks"`` when folded, or
        ``", rank r"``), ``component``, ``ts_us``, ``value``; components that never hold
        a byte are dropped; series ordered by peak, largest first. ``attrs["hidden"]``
        names the components left out (empty or over ``max_series``).
    """
    if value not in VALUES:
        raise InvalidArgumentError("value", f"must be one of {VALUES}", value)
    if bins < 1:
        raise InvalidArgumentError("bins", "must be >= 1", bins)
    cols = ["series", "component", "ts_us", value]
    if timeline.empty or value not in timeline.columns:
        out = pd.DataFrame({c: pd.Series(dtype="float64" if c in ("ts_us", value)
                                         else "object") for c in cols})
        out.attrs["hidden"] = []
        return out
    data = timeline.dropna(subset=["ts_us"]).copy()
    data["component"] = data["component"].astype(str)
    if family is not None:
        data = data[data["component"].map(component_family) == family]
    if rank is not None:
        data = data[data["rank"].astype("Int64") == int(rank)]
    all_components = sorted(data["component"].unique())
    data = data.dropna(subset=[value])
    peaks = data.groupby("component")[value].max()
    peaks = peaks[peaks > 0].sort_values(ascending=False, kind="mergesort")
    kept = list(peaks.index[:max_series])
    hidden = [c for c in all_components if c not in kept]
    data = data[data["component"].isin(kept)]
    n_ranks = data["rank"].nunique() if "rank" in data.columns else 1
    if rank is None and n_ranks > 1 and not data.empty:
        lo, hi = float(data["ts_us"].min()), float(data["ts_us"].max())
        width = (hi - lo) / bins if hi > lo else 1.0
        b = np.floor((data["ts_us"] - lo) / width).clip(upper=bins - 1)
        data = data.assign(_bin=b, _t=lo + b * width)
        data = data.groupby(["component", "_bin"], as_index=False).agg(
            ts_us=("_t", "first"), **{value: (value, "max")})
        label = {c: f"{c}, max over {counted(n_ranks, 'rank')}" for c in kept}
    else:
        label = {c: (f"{c}, rank {int(rank)}" if rank is not None else c) for c in kept}
    data["series"] = data["component"].map(label)
    order = {c: i for i, c in enumerate(kept)}
    data = data.assign(_o=data["component"].map(order)).sort_values(
        ["_o", "ts_us"], kind="mergesort")
    out = data.loc[:, cols].reset_index(drop=True)
    out.attrs["hidden"] = hidden
    return out


def peaks_by_component(peaks: pd.DataFrame) -> pd.DataFrame:
    """Peak memory per component over the ranks, components that hold nothing dropped.

    Parameters
    ----------
    peaks : pandas.DataFrame
        :func:`perfkit.analysis.memory_peaks` (one row per rank and component).

    Returns
    -------
    pandas.DataFrame
        One row per component, in :data:`FAMILIES` order then largest first: ``family``,
        ``component``, ``quantity`` (``allocated`` when the component reports it, else
        ``reserved``), ``peak_median_bytes``, ``peak_min_bytes``, ``peak_max_bytes`` (over
        the ranks), ``worst_rank`` (the rank with the largest peak) and ``ranks``;
        ``attrs`` keeps the notes of ``peaks`` (why it is empty).
    """
    cols = ["family", "component", "quantity", "peak_median_bytes", "peak_min_bytes",
            "peak_max_bytes", "worst_rank", "ranks"]
    if peaks.empty:
        out = pd.DataFrame(columns=cols)
        out.attrs = {k: list(v) for k, v in peaks.attrs.items() if k in ("notes", "warnings")}
        return out
    rows = []
    for component, g in peaks.groupby(peaks["component"].astype(str), sort=False):
        for quantity in ("allocated", "reserved", "active"):
            column = f"peak_{quantity}_bytes"
            if column in g.columns and g[column].fillna(0).gt(0).any():
                v = g[column].astype(float)
                worst = g.loc[v.idxmax(), "rank"]
                rows.append({"family": component_family(component), "component": component,
                             "quantity": quantity, "peak_median_bytes": median(v),
                             "peak_min_bytes": float(v.min()),
                             "peak_max_bytes": float(v.max()),
                             "worst_rank": None if worst is pd.NA or (
                                 isinstance(worst, float) and math.isnan(worst))
                             else int(worst),
                             "ranks": int(g["rank"].nunique())})
                break
    out = pd.DataFrame(rows, columns=cols)
    if out.empty:
        return out
    out["_f"] = out["family"].map({f: i for i, f in enumerate(FAMILIES)})
    out = out.sort_values(["_f", "peak_max_bytes"], ascending=[True, False],
                          kind="mergesort").drop(columns="_f")
    out["worst_rank"] = out["worst_rank"].astype("Int64")
    return out.reset_index(drop=True)


#: The items of :func:`perfkit.analysis.memory_vs_theory` in words, in its order.
THEORY_ITEMS = {
    "theory_static": "theory: weights, gradients, optimizer state",
    "theory_activation": "theory: activations",
    "theory_total": "theory: total",
    "measured_allocated": "measured: peak allocated",
    "gap": "measured - theory",
    "fragmentation": "cached, not in use",
    "outside_framework": "outside the framework",
    "capacity": "device capacity",
    "headroom": "headroom",
}


def theory_at_fullest_rank(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of the rank with the largest measured peak, each item in words.

    The theory is the same on every rank of a layout; the measurement differs. A page
    shows the device the Memory tab holds against the theory (the most loaded one) rather
    than the nine items once per rank.

    Parameters
    ----------
    frame : pandas.DataFrame
        :func:`perfkit.analysis.memory_vs_theory` (one row per rank and item).

    Returns
    -------
    pandas.DataFrame
        Its rows for that rank, ``item`` written with :data:`THEORY_ITEMS`; ``attrs``
        keeps the frame's warnings and notes, and its ``caption`` names the rank, with
        the range of the measured peak over the ranks when there are several (for
        :func:`perfkit.tables.table`'s ``caption``).
    """
    if frame.empty or "rank" not in frame.columns:
        return frame
    measured = frame[frame["item"] == "measured_allocated"]
    if measured.empty or measured["bytes"].isna().all():
        return frame
    top = measured.loc[measured["bytes"].astype(float).idxmax()]
    out = frame[frame["rank"] == top["rank"]].reset_index(drop=True)
    out["item"] = [THEORY_ITEMS.get(str(i), str(i)) for i in out["item"]]
    out.attrs = {k: list(v) for k, v in frame.attrs.items() if k in ("warnings", "notes")}
    ranks = int(measured["rank"].nunique())
    said = f"Rank {int(top['rank'])}"
    if ranks > 1:
        low = float(measured["bytes"].min())
        said += (f", the fullest of {ranks} ranks (their measured peaks {bytes_text(low)} "
                 f"to {bytes_text(float(top['bytes']))})")
    out.attrs["caption"] = said
    return out
