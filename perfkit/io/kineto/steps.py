"""The ``steps`` table of a Kineto trace: each step's device or host breakdown.

:func:`_steps` splits each step's device window (first to last task it launched) into
computing, communication and their overlap, adds to its free time the device's idle time
after the last task that the step's span still covers
(:func:`~perfkit.io.chrome.tables.device_tail`), and measures the device's wait before the
window (:func:`~perfkit.io.chrome.tables.device_wait_us`); :func:`_unknown_where_durations_missing`
makes the breakdown of a step holding a task without a duration unknown. A trace without
device activity is split from its host events (:func:`_host_steps`), over the whole
trace when it has no ``ProfilerStep`` (:func:`_whole_trace_span`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...format import counted, plural
from .._common.distinct import per_distinct
from ..canonical.categories import HOST_COMM_PATTERN
from ..chrome.tables import (
    NA_NS,
    device_tail,
    device_wait_us,
    grouped_breakdown,
    host_steps,
    overlap_breakdown,
    rel,
    step_index,
)
from .kinds import _bool
from .nesting import _thread_codes

__all__: list[str] = []  # private to the Kineto reader


def _steps(dev: pd.DataFrame, kernels: pd.DataFrame, spans: pd.DataFrame) -> pd.DataFrame:
    """Each step's device window and its split (one row over the trace without spans)."""
    if not len(dev):
        return pd.DataFrame()
    start = dev["ts_ns"].to_numpy()
    placed = start != NA_NS  # a task without a readable start is in no window (below)
    end = np.where(placed, start + np.round(np.nan_to_num(dev["dur_us"].to_numpy()) * 1000
                                            ).astype(np.int64), NA_NS)
    step = kernels["step"].to_numpy()
    if not placed.any():
        return pd.DataFrame()
    if not len(spans):
        whole = pd.DataFrame({"step": [0], "start_ns": [start[placed].min()],
                              "end_ns": [end[placed].max() + 1]})
        out = overlap_breakdown(start[placed], end[placed],
                                kernels["category"].to_numpy()[placed], whole)
        out["step"] = np.nan
        return out
    # windows follow the device: from the first to the last kernel launched in each step;
    # a task without a readable start cannot be placed in one (its step is made unknown
    # by _unknown_where_durations_missing)
    start, end, step = start[placed], end[placed], step[placed]
    kernels = kernels.loc[placed]
    known = ~np.isnan(step)
    frame = pd.DataFrame({"step": step[known], "s": start[known], "e": end[known]})
    win = frame.groupby("step").agg(start_ns=("s", "min"), end_ns=("e", "max")).reset_index()
    win = win.sort_values("start_ns").reset_index(drop=True)
    win["end_ns"] = np.maximum(win["end_ns"].to_numpy(), win["start_ns"].to_numpy() + 1)
    win["step"] = win["step"].astype(np.int64)
    cat = kernels["category"].to_numpy()
    out = grouped_breakdown(start[known], end[known], cat[known] == "communication",
                            step[known], win)
    if out is None:
        rows = []
        for st in win["step"].to_numpy():
            sel = step == st
            one = win[win["step"] == st]
            rows.append(overlap_breakdown(start[sel], end[sel], cat[sel], one))
        out = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    if len(out):
        busy = (start[~known], end[~known])  # tasks of no step: the device is not waiting
        # the device's idle time after a step's last task, while the host is still in the
        # step's span, is the step's free time; the next step's wait starts after it
        tail = device_tail(win, spans, busy)
        idle = pd.Series(tail["idle_us"].to_numpy(), index=tail["step"].to_numpy())
        out["free_us"] = out["free_us"] + out["step"].map(idle).to_numpy(np.float64)
        ended = win.assign(end_ns=tail["end_ns"].to_numpy())
        out["preparing_us"] = out["step"].map(device_wait_us(ended, spans, busy)).astype(
            "float64")
    return out


def _unknown_where_durations_missing(steps: pd.DataFrame, kernels: pd.DataFrame,
                                     notes: list[str]) -> pd.DataFrame:
    """Steps holding a kernel without a (plausible) duration or start: their breakdown is
    unknown.

    A missing ``dur`` is not a zero-length kernel, and a missing start cannot be placed:
    the step's computing, communication, overlap, free and preparing time are set to NA
    rather than computed without it (with a note).
    """
    no_start = kernels["start_us"].isna().to_numpy()
    no_dur = kernels["dur_us"].isna().to_numpy()
    missing = no_dur | no_start
    if not missing.any() or not len(steps):
        return steps
    cols = [c for c in steps.columns if c.endswith("_us")]
    if steps["step"].isna().all():  # one whole-trace row
        hit = np.ones(len(steps), dtype=bool)
    else:
        bad = set(pd.unique(kernels["step"].to_numpy()[missing]))
        hit = steps["step"].isin(bad).to_numpy()
    if hit.any():
        steps = steps.copy()
        steps.loc[hit, cols] = np.nan
        n = int(missing.sum())
        what = " or ".join(w for w, m in (("duration", no_dur), ("start", no_start))
                           if m.any())
        notes.append(f"steps: {counted(n, 'GPU kernel')} {plural(n, 'has', 'have')} no "
                     f"{what}; the breakdown of {counted(int(hit.sum()), 'step')} holding "
                     f"{plural(n, 'it', 'them')} is unknown (NA)")
    return steps


def _whole_trace_span(cpu: pd.DataFrame, origin: int | None) -> pd.DataFrame:
    """One window over all host events (a CPU-only trace without ProfilerStep)."""
    ts = cpu["ts_ns"].to_numpy()
    ok = ts != NA_NS
    if not ok.any():
        return pd.DataFrame(columns=["step", "start_ns", "end_ns"])
    end = ts[ok] + np.round(np.nan_to_num(cpu["dur_us"].to_numpy(np.float64)[ok]) * 1000
                            ).astype(np.int64)
    return pd.DataFrame({"step": [0], "start_ns": [int(ts[ok].min())],
                         "end_ns": [int(max(end.max(), ts[ok].min() + 1))]})


def _host_intervals(cpu: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                 np.ndarray, np.ndarray]:
    """(start_ns, end_ns, is_comm, is_compute, thread code) of the timed host events.

    Compute: host operators and annotations (``DistributedDataParallel.forward``, the
    optimizer step: the host runs Python there too) that are not communication;
    communication: those that are (:data:`~perfkit.io.canonical.categories.HOST_COMM_PATTERN`).
    """
    is_comm = _bool(per_distinct(cpu["name"], lambda u: u.str.contains(HOST_COMM_PATTERN,
                                                                        regex=True)))
    ts = cpu["ts_ns"].to_numpy()
    ok = ts != NA_NS
    dur = np.nan_to_num(cpu["dur_us"].to_numpy(np.float64))
    start = ts[ok]
    end = start + np.round(dur[ok] * 1000).astype(np.int64)
    (thread,) = _thread_codes(cpu["tid"])
    return start, end, is_comm[ok], ~is_comm[ok], thread[ok]


def _host_steps(cpu: pd.DataFrame, spans: pd.DataFrame, origin: int | None,
                cpu_only: bool) -> pd.DataFrame:
    """Steps of a trace without device activity, from its host events per ProfilerStep."""
    start, end, is_comm, comp, thread = _host_intervals(cpu)
    keep = is_comm | comp
    out = host_steps(start[keep], end[keep], is_comm[keep], spans, host_computes=cpu_only,
                     thread=thread[keep])
    out["step_start_us"] = rel(out.pop("step_start_ns").to_numpy(np.int64), origin)
    return out


def _device_marked_steps(step: np.ndarray, start_ns: np.ndarray, marks: pd.DataFrame,
                         notes: list[str]) -> np.ndarray:
    """Each device task's step, following Kineto's device-side step markers.

    Kineto draws ``ProfilerStep#N`` on the GPU's lane too (``gpu_user_annotation``): the
    device's own step boundaries. When the GPU runs behind the host, a task launched in
    step N can run inside step N-1's device marker (a copy on another stream, started
    while the previous step's kernels still run); counted in step N, it would stretch
    N's window back over N-1's tail. A task whose start lies inside a device marker
    belongs to that marker's step; the others keep the step of their launch, and a task
    launched in no step stays in none. A note says how many moved.
    """
    marked = step_index(start_ns, marks)
    # a task launched in no step (before the trace began) stays in none
    inside = ~np.isnan(marked) & ~np.isnan(step)
    moved = inside & (marked != step)
    if moved.any():
        n = int(moved.sum())
        notes.append(f"steps: {counted(n, 'device task')} launched in one step ran inside "
                     "the device-side ProfilerStep marker (gpu_user_annotation) of another: "
                     f"{plural(n, 'it is', 'they are')} counted in the step whose marker "
                     f"{plural(n, 'it runs', 'they run')} in, so that each step's device window "
                     "follows the device's own step boundaries")
    return np.where(inside, marked, step)
