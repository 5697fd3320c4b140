"""The host operators of a CPU-only run, as the tasks the operator analyses read.

On a run without device tasks the host computes: :func:`host_tasks` turns the ``ops``
table into a ``kernels``-like table, each operator counted by its self time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...io.canonical.categories import host_comm_family
from .._frames import is_lazy
from .._util import has_values, table

__all__ = ["host_tasks"]


def host_tasks(profile: Any, kernels: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """The host operators of a CPU-only run as a ``kernels``-like table, else None.

    A CPU-only run (``meta.device_type == "cpu"``, no device task: PyTorch with gloo, a
    MindSpore CPU profile) computes on the host: its operators are the ``ops`` table's,
    each counted by its *self time* (``self_us``: its duration less that of the operators
    nested inside it on the same thread), so that nested operators (``aten::linear`` >
    ``aten::matmul`` > ``aten::mm``) are not counted twice and the times add up to the
    threads' busy time. The type is the profiler's operator type where it gives one
    (MindSpore's ``MatMul``), else the name. Operators outside every step are left out
    when the profile has steps. Host collectives (``gloo:*``, ``c10d::*``,
    ``record_param_comms``) are ``communication``.
    """
    meta = getattr(profile, "meta", None)
    if meta is None or getattr(meta, "device_type", None) != "cpu":
        return None
    if kernels is None:
        kernels = table(profile, "kernels")
    if is_lazy(kernels) or len(kernels):
        return None
    ops = table(profile, "ops")
    if is_lazy(ops) or ops.empty or "self_us" not in ops.columns \
            or not has_values(ops, "self_us"):
        return None
    if "step" in ops.columns and ops["step"].notna().any():
        # per rank and step: operators outside every step (a partial graph run before
        # the first whole one, the profiler's own setup) would count in no step
        ops = ops[ops["step"].notna()]
    comm = host_comm_family(ops["name"]).notna().to_numpy(bool)
    names = ops["name"].astype(TEXT)
    # an operator's type where the profiler gives one (MindSpore: MatMul for
    # Default/MatMul-op10); a PyTorch operator's name is its type (aten::mm)
    kind = (ops["type"].astype(TEXT).replace("", pd.NA).fillna(names)
            if "type" in ops.columns else names)
    out = pd.DataFrame({
        "rank": ops["rank"].to_numpy() if "rank" in ops.columns else pd.NA,
        "step": ops["step"].array,
        "name": names.array,
        "type": kind.array,
        "category": pd.array(np.where(comm, "communication", "compute"), dtype=TEXT),
        "start_us": ops["start_us"].to_numpy(np.float64),
        "dur_us": ops["self_us"].to_numpy(np.float64),
    })
    if "input_shapes" in ops.columns:
        out["input_shapes"] = ops["input_shapes"].astype(TEXT).array
    return out
