"""What a profile measured: the step time and the framework allocator's peak memory."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ..analysis.memory import framework_component, memory_peaks
from ..analysis.steps import measured_step_s, step_breakdown
from ..errors import PerfkitError

__all__ = ["read_step_time", "read_memory"]


def read_step_time(profile: Any, put: Any) -> None:
    """Put ``step_time_s``: the median over steps of the slowest rank's step time."""
    try:
        steps = step_breakdown(profile)
        step = measured_step_s(steps)
    except PerfkitError as exc:
        steps, step = pd.DataFrame(), math.nan
        why = str(exc)
    else:
        why = "; ".join(steps.attrs.get("notes", [])) or "no step with a duration"
    if math.isfinite(step) and step > 0:
        src = ", ".join(sorted({str(s) for s in steps.get("source", []) if pd.notna(s)}))
        known = steps.dropna(subset=["step_us"])["step"].nunique() \
            if "step_us" in steps.columns else 0
        over = f"median over {known} step{'s' if known != 1 else ''}" if known else \
            "the one span without step numbers (no ProfilerStep marks in the profile)"
        put("step_time_s", step, f"{over} of the slowest rank's step time ({src} step "
                                 "figures)")
    else:
        put("step_time_s", None, f"no measured step: {why}")


def read_memory(profile: Any, put: Any) -> None:
    """Put ``peak_memory_bytes``: the framework allocator's peak on the most loaded rank."""
    try:
        peaks = memory_peaks(profile)
        comp = framework_component(profile)
    except PerfkitError as exc:
        put("peak_memory_bytes", None, f"memory could not be read: {exc}")
        return
    if peaks.empty or comp is None:
        put("peak_memory_bytes", None, "no framework allocator samples (profile_memory off, "
                                       "or the source records none)")
        return
    fw = peaks[peaks["component"] == comp].dropna(subset=["peak_allocated_bytes"])
    if fw.empty:
        put("peak_memory_bytes", None, f"component {comp} has no allocated samples")
        return
    row = fw.loc[fw["peak_allocated_bytes"].idxmax()]
    put("peak_memory_bytes", float(row["peak_allocated_bytes"]),
        f"peak allocated of the framework allocator ({comp}), rank {row['rank']} "
        "(the most loaded)")
