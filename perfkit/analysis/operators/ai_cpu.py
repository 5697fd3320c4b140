"""Operators that ran on the Ascend AI CPU: :func:`ai_cpu_operators`.

The :func:`~perfkit.analysis.operators.top.top_operators` rows of the types with AI CPU
tasks, counted and timed on those tasks only (:func:`_ai_cpu_only`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._frames import any_values, compute_all, is_lazy
from .._util import add_note, empty_frame, table
from .scope import _effective_type, _scope
from .top import TOP_COLUMNS, top_operators

__all__ = ["ai_cpu_operators"]


def ai_cpu_operators(profile: Any) -> pd.DataFrame:
    """Operators that ran on the Ascend AI CPU, by type, with their share of device time.

    AI CPU operators run on the device's general-purpose cores, typically ten times slower
    than an AI Core implementation, and often stall the stream. Returns the
    :func:`top_operators` columns for those types only; empty (with a note) when the
    profile records no accelerator core (GPU traces) or has no AI CPU task.
    """
    kernels = table(profile, "kernels")
    if not any_values(kernels, "core"):
        return empty_frame(TOP_COLUMNS, "no accelerator core recorded (not an Ascend profile)")
    (ai_cpu,) = compute_all(kernels["core"].eq("AI_CPU").any())
    if not ai_cpu:  # no AI CPU task anywhere: nothing to rank, the full table is not built
        return empty_frame(TOP_COLUMNS, "no AI CPU operator in this profile")
    top = top_operators(profile, by="type", n=None)
    out = top[top["ai_cpu"].fillna(False)].reset_index(drop=True)
    if out.empty:
        add_note(out, "no AI CPU operator in this profile")
    else:  # a lazy table: its AI CPU tasks are few, read them whole
        (cpu_tasks,) = compute_all(kernels[kernels["core"].eq("AI_CPU")]) \
            if is_lazy(kernels) else (kernels,)
        out = _ai_cpu_only(out, cpu_tasks)
    return out


def _ai_cpu_only(out: pd.DataFrame, kernels: pd.DataFrame) -> pd.DataFrame:
    """Count and time of each type's AI CPU tasks only (a type such as Cast may run most
    of its tasks on the AI Core and a few on the AI CPU); per-step figures and shares are
    scaled with the time, so they keep the denominators of :func:`top_operators`."""
    k = _scope(kernels, include_communication=False)
    k = k[k["core"].astype("string").eq("AI_CPU").fillna(False).to_numpy(bool)]
    typ = _effective_type(k).fillna("")
    g = k["dur_us"].groupby(typ.to_numpy()).agg(["size", "sum", "mean", "max", "min"])
    key = out["type"].astype("string").fillna("").to_numpy()
    g = g.reindex(key)
    scale = (g["sum"].to_numpy() / out["total_us"].to_numpy(np.float64))
    out = out.copy()
    out["count"] = g["size"].fillna(0).to_numpy(np.int64)
    for col, agg in (("total_us", "sum"), ("mean_us", "mean"), ("max_us", "max"),
                     ("min_us", "min")):
        out[col] = g[agg].to_numpy(np.float64)
    for col in ("share", "per_step_us"):
        out[col] = out[col].to_numpy(np.float64) * scale
    # the column keeps its text dtype: a bare string would make it object under pandas 2
    out["core"] = pd.Series(["AI_CPU"] * len(out), index=out.index, dtype=out["core"].dtype)
    return out.sort_values("total_us", ascending=False, kind="mergesort").reset_index(
        drop=True)
