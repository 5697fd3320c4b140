"""Canonical tables of an Ascend ``trace_view.json`` (torch_npu, MindSpore >= 2.4).

The host operators (with the device time of the tasks each launched, from the
``async_npu`` flows), the device tasks of the "Ascend Hardware" process where the rank
has no ``kernel_details.csv``, and the step table from the "Overlap Analysis" tracks where
it has no ``step_trace_time.csv``. Shared by the rank-folder reader and the reader of a
lone ``trace_view.json`` (:mod:`perfkit.io.ascend.text`).
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from .._common.distinct import per_distinct, str_array, text
from ..canonical.categories import category
from ..chrome.decode import ChromeTrace
from ..chrome.tables import NA_NS, STEP_NAME, device_wait_us, rel, step_index, step_spans

#: After every timestamp (ns): a step without a task, an event with no span end.
_NEVER = np.iinfo(np.int64).max

__all__ = ["from_ascend_trace"]


def _ops(trace: ChromeTrace, spans: pd.DataFrame, origin: int | None,
         device: pd.DataFrame) -> pd.DataFrame:
    x = trace.x
    host = (x["cat"] == "cpu_op").fillna(False).to_numpy(bool)
    if not host.any():
        cpu_pids = {p for p, lab in trace.labels.items() if str(lab).upper().startswith("CPU")}
        names = trace.processes
        host = x["pid"].isin([p for p in cpu_pids if names.get(p) != "CANN"]).to_numpy(bool)
    is_step = per_distinct(x["name"], lambda u: u.str.match(STEP_NAME.pattern))
    ops = x.loc[host & ~is_step.fillna(False).to_numpy(bool),
                ["name", "ts_ns", "dur_us", "tid", "cat"]]
    ts = ops["ts_ns"].to_numpy()
    cat = ops["cat"]
    frame = pd.DataFrame({
        "step": step_index(ts, spans),
        "name": text(ops["name"]).array,
        "start_us": rel(ts, origin),
        "dur_us": ops["dur_us"].to_numpy(),
        "thread": ops["tid"].to_numpy(),
        # the dtype a list of Python strings gets ("str"); object when all are missing
        "cat": str_array(cat) if cat.notna().any() else cat.to_numpy(),
    })
    frame["device_dur_us"] = _device_time(trace, ops, device)
    return frame


def _device_time(trace: ChromeTrace, ops: pd.DataFrame, device: pd.DataFrame) -> np.ndarray:
    """Sum of device time of the tasks each host op launched (``async_npu`` flows)."""
    flows = trace.flows
    out = np.full(len(ops), np.nan)
    if not len(flows) or not len(device):
        return out
    f = flows[flows["cat"] == "async_npu"]
    start = f[f["ph"] == "s"][["id", "tid", "ts_ns"]]
    finish = f[f["ph"] == "f"][["id", "pid", "tid", "ts_ns"]]
    if not len(start) or not len(finish):
        return out
    # only tasks a flow can finish at: the same dedup and join, on far fewer rows
    dev = device[["pid", "tid", "ts_ns", "dur_us"]]
    dev = dev[np.isin(dev["ts_ns"].to_numpy(), finish["ts_ns"].to_numpy())]
    dev = dev.drop_duplicates(["pid", "tid", "ts_ns"])
    link = finish.merge(dev, on=["pid", "tid", "ts_ns"], how="inner")
    link = link.groupby("id", sort=False)["dur_us"].sum().reset_index()
    host = start.merge(link, on="id", how="inner")
    per_op = host.groupby(["tid", "ts_ns"], sort=False)["dur_us"].sum()
    keys = pd.MultiIndex.from_arrays([ops["tid"].to_numpy(), ops["ts_ns"].to_numpy()],
                                     names=["tid", "ts_ns"])
    vals = per_op.reindex(keys).to_numpy(np.float64)
    # ops that launched nothing on the device have zero device time (known from the flows)
    return np.where(np.isnan(vals), 0.0, vals)


def from_ascend_trace(trace: ChromeTrace, origin: int | None, kernels: bool = True,
                      steps: bool = True) -> dict[str, pd.DataFrame]:
    """ops, kernels (fallback), steps (fallback) and step windows from ``trace_view.json``.

    ``kernels`` / ``steps``: build those tables (a rank with ``kernel_details.csv`` /
    ``step_trace_time.csv`` does not need them; they are then empty).
    """
    x = trace.x
    spans = step_spans(x)
    out_kernels = pd.DataFrame()
    if kernels:
        hw = [p for p, n in trace.processes.items() if n == "Ascend Hardware"]
        device = x[x["pid"].isin(hw)]
        ts = device["ts_ns"].to_numpy()
        ttype = device["task_type"].astype(TEXT)
        out_kernels = pd.DataFrame({
            "step": np.nan,
            "name": device["name"].to_numpy(),
            "core": ttype.to_numpy(),
            "stream": device["tid"].to_numpy(),
            "start_us": rel(ts, origin),
            "dur_us": device["dur_us"].to_numpy(),
        })
        out_kernels["category"] = category(
            out_kernels["core"].astype(TEXT),
            pd.Series(pd.NA, index=out_kernels.index, dtype=TEXT),
            out_kernels["name"].astype(TEXT)).to_numpy()
    overlap_pid = [p for p, n in trace.processes.items() if n == "Overlap Analysis"]
    out_steps = pd.DataFrame()
    if overlap_pid and steps:
        ov = x[x["pid"].isin(overlap_pid)]
        declared = {name for (pid, _tid), name in trace.threads.items() if pid in overlap_pid}
        out_steps = _overlap_steps(ov, spans, declared)
    return {"ops": _ops(trace, spans, origin, x), "kernels": out_kernels, "steps": out_steps,
            "step_spans": spans}


def _overlap_steps(ov: pd.DataFrame, spans: pd.DataFrame, declared: Collection[str] = ()
                   ) -> pd.DataFrame:
    """Sum the Overlap Analysis tracks per step (one row with step NA without steps).

    A track with events elsewhere but none in a step, or one the file names
    (``declared``: its ``thread_name`` metadata) without any event, counts 0 in the step
    (a run whose communication all overlaps has an empty "Communication(Not Overlapped)"
    track); a track the file does not have is NA.

    An event is in the step whose ``ProfilerStep#N`` span holds its start. The parts
    cover the step's device span, from its first task ("Computing" or "Communication"
    event) on, and ``preparing_us`` the wait before it (:func:`_waits`): a "Free" event's
    time in the step's span before its first task is that wait, and its time after the
    span's end is the next step's, so that the step's parts and its wait are its wall
    time and no time counts in two steps.
    """
    ts = ov["ts_ns"].to_numpy(np.int64)
    dur = ov["dur_us"].to_numpy(np.float64)
    if len(spans) == 1:
        step = np.full(len(ov), float(spans["step"].iloc[0]))
    else:
        step = step_index(ts, spans)
    step = np.where(np.isnan(step), -1.0, step)
    track = ov["name"].fillna("").to_numpy(object)
    dur, waits = _waits(ts, dur, step, track, spans)
    frame = pd.DataFrame({"step": step, "track": track, "dur": dur})
    wide = frame.pivot_table(index="step", columns="track", values="dur", aggfunc="sum")
    out = pd.DataFrame({"step": wide.index.to_numpy()})
    for canon, track_name in (("computing_us", "Computing"),
                              ("communication_us", "Communication"),
                              ("comm_not_overlapped_us", "Communication(Not Overlapped)"),
                              ("free_us", "Free")):
        if track_name in wide:
            out[canon] = wide[track_name].fillna(0.0).to_numpy()
        else:
            out[canon] = 0.0 if track_name in declared else np.nan
    out["overlapped_us"] = out["communication_us"] - out["comm_not_overlapped_us"]
    out["preparing_us"] = out["step"].map(waits)
    out["step"] = out["step"].where(out["step"] >= 0)
    return out


def _waits(ts: np.ndarray, dur: np.ndarray, step: np.ndarray, track: np.ndarray,
           spans: pd.DataFrame) -> tuple[np.ndarray, pd.Series]:
    """The events' durations in their step's device span, and each step's wait before it.

    torch_npu's Preparing (``TraceStepTimeParser``) is the step's first "Computing" or
    "Communication" event less its ``ProfilerStep#N`` start. A "Free" event is cut to the
    part from the step's first task to the end of its span (with several spans): the rest
    is idle time before the step's device span (its wait) or after its span (the next
    step's). Each step's wait runs from its span's start, or from where the earlier steps'
    events end when that is later (the host started the step while the device still ran
    the previous one), to its first task
    (:func:`~perfkit.io.chrome.tables.device_wait_us`); NaN for a step without a span of
    its own or without a task.

    ``ts`` (ns) and ``dur`` (µs) of each event, ``step`` (-1: none) and ``track`` its
    name. Returns the durations (µs; a Free event's cut to its part in the span) and the
    waits (µs) per step.
    """
    known = (ts != NA_NS) & np.isfinite(dur) & (step >= 0)
    end = np.where(known, ts + np.round(np.where(known, dur, 0.0) * 1000).astype(np.int64), ts)
    task = known & np.isin(track, ("Computing", "Communication"))
    keys, at = np.unique(step, return_inverse=True)
    first = np.full(len(keys), _NEVER, dtype=np.int64)
    np.minimum.at(first, at[task], ts[task])
    start = first[at]  # each event's step's first task (_NEVER: the step has none)
    hi = np.full(len(ts), _NEVER, dtype=np.int64)
    if len(spans) > 1:
        span_end = spans.drop_duplicates("step").set_index("step")["end_ns"]
        where = pd.Index(span_end.index).get_indexer(keys)
        hi = np.where(where >= 0, span_end.to_numpy(np.int64)[np.maximum(where, 0)],
                      _NEVER)[at]
    free = known & (track == "Free") & (start < _NEVER)
    lo, up = np.maximum(ts, start), np.minimum(end, hi)
    cut = free & ((lo > ts) | (up < end))
    out = dur.copy()
    out[cut] = np.clip(up[cut] - lo[cut], 0, None) / 1000.0
    counted = task | (free & (out > 0))  # the events the step's device span holds
    if not len(spans) or not task.any():
        return out, pd.Series(dtype="float64")
    win = pd.DataFrame({"step": step[counted], "start_ns": np.where(task, ts, _NEVER)[counted],
                        "end_ns": np.where(cut, up, end)[counted]})
    win = win.groupby("step").agg(start_ns=("start_ns", "min"), end_ns=("end_ns", "max"))
    win = win.reset_index().sort_values("start_ns", kind="mergesort").reset_index(drop=True)
    return out, device_wait_us(win, spans)
