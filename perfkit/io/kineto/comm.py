"""The ``comm_ops`` table of a Kineto trace: communication kernels or host collectives.

:func:`_kernel_comm_ops` makes one row per communication kernel, with the process group,
collective and message size its args record (PyTorch >= 2.1); :func:`_host_comm_ops` one
row per collective run on the host (a CPU-only run, or gloo with CUDA tensors).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._common.distinct import numeric, per_distinct, text
from ..canonical.categories import host_comm_family
from ..chrome.tables import rel, step_index
from .nesting import _outermost

__all__: list[str] = []  # private to the Kineto reader


_DTYPE_BYTES = {"float": 4, "float32": 4, "float64": 8, "double": 8, "half": 2, "float16": 2,
                "bfloat16": 2, "c10::bfloat16": 2, "c10::half": 2, "int": 4, "int32": 4,
                "int64": 8, "long": 8, "long int": 8, "int8": 1, "uint8": 1,
                "unsigned char": 1, "signed char": 1, "char": 1, "bool": 1, "int16": 2,
                "short": 2, "float8_e4m3fn": 1, "float8_e5m2": 1, "c10::float8_e4m3fn": 1,
                "c10::float8_e5m2": 1}
"""Bytes per element of the ``dtype`` names a collective's args use (lower-cased)."""


def _kernel_comm_ops(dev: pd.DataFrame, kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per communication kernel, with what its args say about the collective."""
    comm = (kernels["category"] == "communication").to_numpy(bool)
    k = kernels[comm]
    out = pd.DataFrame({
        "step": k["step"].to_numpy(), "name": k["name"].to_numpy(),
        "start_us": k["start_us"].to_numpy(), "elapse_us": k["dur_us"].to_numpy(),
        "family": k["family"].array,
    })
    d = dev[comm]
    if "pg_name" in d.columns and d["pg_name"].notna().any():
        out["group"] = text(d["pg_name"]).array
    if "collective" in d.columns and d["collective"].notna().any():
        out["collective"] = text(d["collective"]).array
    if "in_nelems" in d.columns and d["in_nelems"].notna().any():
        size = per_distinct(d["msg_dtype"], lambda u: u.str.lower().map(
            _DTYPE_BYTES.get).astype("Float64")) if "msg_dtype" in d.columns else None
        per = np.nan if size is None else size.astype("float64").to_numpy()
        out["in_msg_bytes"] = d["in_nelems"].to_numpy(np.float64) * per
        if "out_nelems" in d.columns:
            out["out_msg_bytes"] = d["out_nelems"].to_numpy(np.float64) * per
    return out


def _host_comm_ops(cpu: pd.DataFrame, spans: pd.DataFrame, origin: int | None
                   ) -> pd.DataFrame:
    """The collectives of a CPU-only run, one row each, from the host events.

    Each collective is recorded at several levels: the ``c10d::allreduce_`` operator the
    training code called (returning early when the work is async), ``record_param_comms``
    inside it, and the backend's span where the data moves (``gloo:all_reduce`` on one of
    gloo's threads). The backend's spans are taken when the trace has them, else the
    outermost c10d operators (``record_param_comms`` where it stands alone).
    """
    fam = host_comm_family(cpu["name"])
    for family in ("gloo", "c10d", "nccl"):
        sel = fam.eq(family).fillna(False).to_numpy(bool)
        if sel.any():
            break
    else:
        return pd.DataFrame({"step": [], "name": [], "start_us": [], "elapse_us": [],
                             "family": pd.array([], dtype="string"),
                             "thread": pd.array([], dtype="Int64")})
    c = cpu[sel]
    if family == "c10d":
        c = c[_outermost(c)]
    ts = c["ts_ns"].to_numpy()
    return pd.DataFrame({
        "step": step_index(ts, spans),
        "name": text(c["name"]).array,
        "start_us": rel(ts, origin),
        "elapse_us": c["dur_us"].to_numpy(np.float64),
        "family": pd.array([family] * len(c), dtype="string"),
        "thread": pd.array(numeric(c["tid"]).astype(np.float64), dtype="Float64"
                           ).astype("Int64"),
    })
