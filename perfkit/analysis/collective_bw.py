"""Algorithm and bus bandwidth of each collective, by nccl-tests' conventions.

A collective that moves ``S`` bytes in ``t`` has the *algorithm bandwidth*
``algbw = S / t``. Its *bus bandwidth* corrects for how much each rank of an ``n``-rank
group must send over its links whatever the algorithm, so that it compares with the
hardware's link bandwidth (NVIDIA nccl-tests, ``doc/PERFORMANCE.md``,
https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):

- all-reduce: ``busbw = algbw × 2(n-1)/n``;
- all-gather, reduce-scatter, all-to-all: ``busbw = algbw × (n-1)/n``;
- broadcast, reduce, send / receive: ``busbw = algbw``.

``S`` is nccl-tests' size: the larger of the input and output buffers (all-gather's
output, reduce-scatter's input, the one buffer of the others), which the loaders give as
``comm_ops.size_bytes`` (a Kineto trace's ``record_param_comms`` args). ``t`` is the
collective's whole duration (``elapse_us``): where the profile does not split out the
wait for peers (Kineto), the bandwidth is a lower bound on the links'.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._text_dtype import TEXT
from ._frames import collect, is_lazy_frame
from ._util import empty_frame, table, typed
from .collectives import comm_op_type

__all__ = ["bus_factor", "collective_bandwidth", "collective_bandwidth_summary",
           "COLLECTIVE_BW_COLUMNS", "COLLECTIVE_BW_SUMMARY_COLUMNS"]

COLLECTIVE_BW_COLUMNS: dict[str, str | pd.StringDtype] = {
    "rank": "Int64", "step": "Int64", "name": TEXT, "op_type": TEXT,
    "group": TEXT, "group_size": "Int64", "size_bytes": "float64",
    "elapse_us": "float64", "algbw_gbps": "float64", "busbw_gbps": "float64"}

COLLECTIVE_BW_SUMMARY_COLUMNS: dict[str, str | pd.StringDtype] = {
    "op_type": TEXT, "group": TEXT, "rank": "Int64", "group_size": "Int64",
    "count": "int64", "size_bytes": "float64", "time_us": "float64",
    "algbw_gbps": "float64", "busbw_gbps": "float64"}

_NO_SIZE = ("no collective with a recorded size and group size (comm_ops.size_bytes and "
            "group_size; a Kineto trace has them from PyTorch 2.1's record_param_comms args)")


def bus_factor(op_type: pd.Series, n: pd.Series) -> np.ndarray:
    """nccl-tests' bus-bandwidth factor of each collective kind for groups of ``n`` ranks.

    ``2(n-1)/n`` for ``allreduce``; ``(n-1)/n`` for ``allgather``, ``reducescatter`` and
    ``alltoall``; 1 for ``broadcast``, ``reduce``, ``send``, ``receive`` and ``sendrecv``;
    NaN for other kinds or an unknown ``n``.
    """
    nn = pd.to_numeric(n, errors="coerce").to_numpy(np.float64)
    kind = op_type.astype(str).to_numpy()
    frac = (nn - 1.0) / nn
    return np.select(
        [kind == "allreduce", np.isin(kind, ["allgather", "reducescatter", "alltoall"]),
         np.isin(kind, ["broadcast", "reduce", "send", "receive", "sendrecv"])],
        [2.0 * frac, frac, np.ones(len(kind))], default=np.nan)


def collective_bandwidth(profile: Any) -> pd.DataFrame:
    """Per collective (``comm_ops`` row with a size): its algorithm and bus bandwidth.

    ``algbw_gbps = size_bytes / elapse_us / 1e3`` (bytes per µs is MB/s: / 1e3 gives
    GB/s), ``busbw_gbps = algbw_gbps × bus_factor(op_type, group_size)``
    (:func:`bus_factor`, NaN where the group size is unknown).

    Returns
    -------
    pandas.DataFrame
        :data:`COLLECTIVE_BW_COLUMNS`; empty with the reason in ``attrs["notes"]`` when no
        collective records its size.
    """
    c = table(profile, "comm_ops")
    if is_lazy_frame(c):
        c = collect(c)
    if c.empty or "size_bytes" not in c.columns or not c["size_bytes"].notna().any():
        return empty_frame(COLLECTIVE_BW_COLUMNS, _NO_SIZE)
    c = c[c["size_bytes"].notna().to_numpy(bool)]
    out = pd.DataFrame({
        "rank": c["rank"] if "rank" in c.columns else pd.NA,
        "step": c["step"] if "step" in c.columns else pd.NA,
        "name": c["name"].astype(TEXT), "op_type": comm_op_type(c["name"]),
        "group": c["group"] if "group" in c.columns else pd.NA,
        "group_size": c["group_size"] if "group_size" in c.columns else pd.NA,
        "size_bytes": c["size_bytes"].astype("float64"),
        "elapse_us": c["elapse_us"].astype("float64"),
    })
    t = out["elapse_us"].where(out["elapse_us"] > 0)
    out["algbw_gbps"] = out["size_bytes"] / t / 1e3
    out["busbw_gbps"] = out["algbw_gbps"] * bus_factor(out["op_type"], out["group_size"])
    return typed(out, COLLECTIVE_BW_COLUMNS).reset_index(drop=True)


def collective_bandwidth_summary(profile: Any) -> pd.DataFrame:
    """Bandwidth per collective kind, group and rank, over the sized collectives.

    ``size_bytes`` and ``time_us`` are sums; ``algbw_gbps`` = their ratio / 1e3 (the
    bandwidth of all the calls together, not a mean of ratios); ``busbw_gbps`` = that ×
    :func:`bus_factor` of the group's size.

    Returns
    -------
    pandas.DataFrame
        :data:`COLLECTIVE_BW_SUMMARY_COLUMNS`, most time first; empty (with the reason)
        when no collective records its size.
    """
    per = collective_bandwidth(profile)
    if per.empty:
        return empty_frame(COLLECTIVE_BW_SUMMARY_COLUMNS, _NO_SIZE)
    keys = per.assign(_g=per["group"].astype(TEXT).fillna(""),
                      _n=per["group_size"].astype("Float64").fillna(-1.0),
                      _r=per["rank"].astype("Float64").fillna(-1.0))
    g = keys.groupby(["op_type", "_g", "_r", "_n"], sort=False)
    out = g.agg(count=("size_bytes", "size"), size_bytes=("size_bytes", "sum"),
                time_us=("elapse_us", "sum")).reset_index()
    out["group"] = out["_g"].replace("", pd.NA)
    out["rank"] = out["_r"].where(out["_r"] >= 0)
    out["group_size"] = out["_n"].where(out["_n"] > 0)
    out["algbw_gbps"] = out["size_bytes"] / out["time_us"].where(out["time_us"] > 0) / 1e3
    out["busbw_gbps"] = out["algbw_gbps"] * bus_factor(out["op_type"], out["group_size"])
    out = out.sort_values("time_us", ascending=False, kind="mergesort")
    return typed(out[list(COLLECTIVE_BW_SUMMARY_COLUMNS)],
                 COLLECTIVE_BW_SUMMARY_COLUMNS).reset_index(drop=True)
