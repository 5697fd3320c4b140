"""The steps of legacy MindSpore / MindInsight output (:mod:`perfkit.io.mindspore.legacy`):
``step_trace_raw_{rank}_detail_time.csv`` (10 ns counter ticks), the per-step breakdown
of ``ascend_cluster_analyse_*.csv``, and the alignment of the steps with the timeline's
events (``min_cycle_counter_{rank}.txt`` or ``output_timeline_data_{rank}.txt``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...format import runs_text, time_text
from .._common import find_col, read_csv, read_header, to_float

__all__: list[str] = []  # private to the legacy reader

TICK_US = 0.01  # step_trace_raw values are 10 ns system-counter ticks
#: The name of an all-reduce phase of the step trace (a column of step_trace_raw, an event of
#: pid 10000 in the timeline): ``stream_{stream id}_parallel_{n}``.
REDUCE_FIELD = r"^stream_\d+_parallel_\d+$"


#: The step trace's columns perfkit reads (any letter case in the file's header).
_STEP_COLUMNS = ("step_num", "start_point", "end_point", "total", "iteration_interval",
                 "fp_and_bp", "tail")


def _step_trace(path: Path, notes: list[str]) -> pd.DataFrame:
    """The step trace's rows (steps > 0), times in µs, the tick columns kept for
    :func:`_align_steps`; a value that is not a number is NA and a note names its line,
    and so is one a spreadsheet rounded (:func:`_coarse_ticks`). Column names match in
    any letter case, as the header check does (``Total`` is ``total``)."""
    table = read_csv(path, "step_trace_raw_{rank}_detail_time.csv (MindSpore step trace)",
                     required=[("step_num",), ("total",), ("iteration_interval",)],
                     text_cols=_STEP_COLUMNS)  # as written: a rounded tick count is told
    found = {find_col(table.column_names, c): c for c in _STEP_COLUMNS
             if find_col(table.column_names, c)}
    df = table.select(list(found)).rename_columns(list(found.values())).to_pandas()
    step = pd.to_numeric(df["step_num"], errors="coerce")
    keep = (step.notna() & (step > 0)).to_numpy()  # '-' is the average row; 0 a placeholder
    _note_not_numbers(path, df["step_num"].where(df["step_num"].astype(str).str.strip() != "-"),
                      step, np.ones(len(df), dtype=bool), "step_num", notes)
    out = pd.DataFrame({"step": step[keep].to_numpy()})
    for col in ("total", "iteration_interval", "fp_and_bp", "tail", "start_point",
                "end_point"):
        if col not in df:
            continue
        vals = pd.to_numeric(df[col].astype(str).str.strip(' \t"'), errors="coerce")
        _note_not_numbers(path, df[col], vals, keep, col, notes)
        vals = _coarse_ticks(path, df[col], vals, keep, col, notes)
        vals = vals.to_numpy(np.float64)[keep]
        # ticks: the start and end are turned into times by _align_steps
        out[f"_{col}" if col.endswith("_point") else f"{col}_us"] = \
            vals if col.endswith("_point") else vals * TICK_US
    return out


#: A number in scientific notation: its decimals and exponent.
_SCIENTIFIC = r"^\s*[-+]?\d+(?:\.(\d*))?[eE]([-+]?\d+)\s*$"


def _coarse_ticks(path: Path, raw: pd.Series, vals: pd.Series, keep: np.ndarray, col: str,
                  notes: list[str]) -> pd.Series:
    """``vals`` with NA where ``raw`` is a tick count in scientific notation rounded to
    more than one tick (a spreadsheet saves ``43806812345`` as ``4.38068E+10``: 100,000
    ticks, 1 ms, off), and a note naming the lines; those exact to one tick are kept.
    The legacy loader's ``kernel_details.csv`` counterpart reads such times as NA too
    (:func:`perfkit.io._common.numeric.to_ns`)."""
    parts = raw.astype(str).str.extract(_SCIENTIFIC)
    written = parts[1].notna().to_numpy()
    if not written.any():
        return vals
    decimals = parts[0].fillna("").str.len().to_numpy()
    exponent = pd.to_numeric(parts[1], errors="coerce").fillna(0).to_numpy()
    # a value out of int64 nanoseconds' range (1e25) is garbled, not rounded: the
    # plausibility check (perfkit.io.canonical.validate) says so
    in_range = (np.abs(vals.to_numpy(np.float64)) * (TICK_US * 1000) < 2.0 ** 63)
    coarse = written & (exponent - decimals >= 1) & keep & in_range
    if not coarse.any():
        return vals
    lines = np.flatnonzero(coarse)
    shown = ", ".join(f"line {i + 2} ({str(raw.iloc[i]).strip()!r})" for i in lines[:3])
    more = f" and {len(lines) - 3} more" if len(lines) > 3 else ""
    worst = 10.0 ** float((exponent - decimals)[coarse].max()) * TICK_US
    notes.append(f"steps: {path.name}: {col} is written in scientific notation on {shown}"
                 f"{more}, rounded to {time_text(worst)} or more (a spreadsheet program "
                 "saves large numbers so): too coarse to place the step, so read as NA "
                 "(export the file again from the profiler)")
    return vals.mask(coarse)


def _note_not_numbers(path: Path, raw: pd.Series, vals: pd.Series, keep: np.ndarray,
                      col: str, notes: list[str]) -> None:
    """A note naming the lines of ``path`` whose ``col`` is given but is not a number (the
    step's value is then unknown, and a start or end leaves its tasks in no step)."""
    given = raw.notna() & (raw.astype(str).str.strip() != "")
    bad = np.flatnonzero(keep & given.to_numpy() & vals.isna().to_numpy())
    if not len(bad):
        return
    shown = ", ".join(f"line {i + 2} ({str(raw.iloc[i])[:20]!r})" for i in bad[:3])
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    if col == "step_num":
        notes.append(f"steps: {path.name}: step_num is not a number on {shown}{more}: those "
                     "rows are left out")
        return
    notes.append(f"steps: {path.name}: {col} is not a number on {shown}{more}: those steps' "
                 f"{col} is unknown" + (" and their device tasks keep no step"
                                        if col.endswith("_point") else ""))


def _align_steps(folder: Path, rank: int, tables: dict[str, pd.DataFrame],
                 notes: list[str]) -> None:
    """Step of each timeline event, from the step trace's tick windows.

    ``min_cycle_counter_{rank}.txt`` (MindSpore 1.x) holds the counter value (10 ns ticks)
    at time 0 of the timeline, so a step spans ``(start_point - min_cycle) * 0.01`` to
    ``(end_point - min_cycle) * 0.01`` µs of the timeline. Without it the steps stay
    unaligned (events keep no step).
    """
    steps = tables.get("steps")
    if steps is None or "_start_point" not in steps:
        return
    ticks = steps[["_start_point", "_end_point"]].to_numpy(np.float64) \
        if "_end_point" in steps else None
    for col in ("_start_point", "_end_point"):
        steps.pop(col) if col in steps else None
    if ticks is None or "kernels" not in tables:  # no timeline to align the steps with
        return
    counter = folder / f"min_cycle_counter_{rank}.txt"
    if counter.is_file():
        try:
            zero = float(counter.read_text(encoding="utf-8", errors="replace").split()[0])
        except (OSError, ValueError, IndexError):
            notes.append(f"steps: {counter.name} is not a number; events keep no step")
            return
        how = f"{counter.name} (the counter at time 0 of the timeline)"
    else:
        data = folder / f"output_timeline_data_{rank}.txt"
        zero_us = _timeline_zero_us(data, tables.get("kernels"))
        if zero_us is None:
            return
        zero = zero_us / TICK_US
        how = (f"{data.name} (its operators' start times in ms on the counter's clock, "
               "matched with the same operators in the timeline)")
    start = (ticks[:, 0] - zero) * TICK_US
    end = (ticks[:, 1] - zero) * TICK_US
    steps["step_start_us"] = start
    order = np.argsort(start, kind="stable")
    s_sorted, e_sorted = start[order], end[order]
    ids = steps["step"].to_numpy(np.float64)[order]
    for name in ("kernels", "comm_ops", "ops"):
        frame = tables.get(name)
        if frame is None or not len(frame) or "start_us" not in frame:
            continue
        t = frame["start_us"].to_numpy(np.float64)
        idx = np.searchsorted(s_sorted, t, side="right") - 1
        ok = (idx >= 0) & np.isfinite(t)
        idx_c = np.clip(idx, 0, max(len(s_sorted) - 1, 0))
        ok &= t < e_sorted[idx_c]
        frame["step"] = np.where(ok, ids[idx_c], np.nan)
    notes.append(f"steps: aligned with the timeline through {how}; events outside every "
                 "step keep no step")
    _mark_recorded(steps, tables.get("kernels"), start, end, notes)


def _timeline_zero_us(path: Path, kernels: pd.DataFrame | None,
                      tolerance_us: float = 1.0) -> float | None:
    """Time 0 of the timeline on the step trace's clock (µs), from ``output_timeline_data``.

    Without ``min_cycle_counter_{rank}.txt`` (MindInsight's later layouts), the timeline
    file still lists each device operator's start in ms on the system counter's clock
    (``op_name, stream_id, start_time(ms), duration(ms)``; 1 ms = 1e5 ticks of 10 ns, the
    unit of ``step_trace_raw``): on ``wild/mi_run1``, where both exist, the first
    operator's start is the counter at time 0 exactly. The k-th run of an operator in this
    file and in the timeline's ``kernels`` are the same task, so each pair gives the shift
    from the timeline's times to the counter's; their median is used when at least 90 % of
    the pairs agree with it within ``tolerance_us``, else None (the steps stay unaligned).
    """
    if kernels is None or not len(kernels) or not path.is_file():
        return None
    try:
        data = pd.read_csv(path, skipinitialspace=True)
    except (OSError, ValueError, pd.errors.ParserError):
        return None
    if data.shape[1] < 3 or data.empty:
        return None
    name = data.iloc[:, 0].astype(TEXT).str.strip()
    ms = pd.to_numeric(data.iloc[:, 2], errors="coerce")
    absolute = pd.DataFrame({"name": name, "t": ms * 1000.0}).dropna()
    relative = pd.DataFrame({"name": kernels["name"].astype(TEXT),
                             "t": pd.to_numeric(kernels["start_us"], errors="coerce")}) \
        .dropna()
    pairs = []
    for frame in (absolute, relative):
        frame = frame.sort_values("t", kind="stable")
        frame["k"] = frame.groupby("name").cumcount()
        pairs.append(frame)
    both = pairs[0].merge(pairs[1], on=["name", "k"], suffixes=("_abs", "_rel"))
    if both.empty:
        return None
    shift = (both["t_abs"] - both["t_rel"]).to_numpy(np.float64)
    zero = float(np.median(shift))
    if np.mean(np.abs(shift - zero) <= tolerance_us) < 0.9:
        return None
    return zero


def _mark_recorded(steps: pd.DataFrame, kernels: pd.DataFrame | None, start: np.ndarray,
                   end: np.ndarray, notes: list[str]) -> None:
    """``steps.tasks_recorded``: whether the timeline holds each step's device tasks in full.

    The step trace covers every step, but the timeline's device operators (every event but
    the step trace's all-reduce phases, which MindInsight writes for every step) can stop
    long before: on ``wild/mi_run1`` they end inside step 15 of 322. A step is recorded
    when it has device tasks and the record of device tasks spans its whole window (the
    first step may start after the record, the last end after it). The gaps between the
    all-reduce phases of another step are not the device idling.
    """
    if kernels is None or not len(kernels) or "start_us" not in kernels or not len(start):
        return
    task = ~kernels["name"].astype(TEXT).str.match(REDUCE_FIELD).fillna(False) \
        .to_numpy(bool)
    t0 = kernels["start_us"].to_numpy(np.float64)[task]
    t1 = t0 + np.clip(kernels["dur_us"].to_numpy(np.float64)[task], 0.0, None)
    ok = np.isfinite(t0) & np.isfinite(t1)
    ids = steps["step"].to_numpy(np.float64)
    if not ok.any() or not np.isfinite(start).any() or not np.isfinite(end).any():
        recorded = np.zeros(len(ids), dtype=bool)  # no task, or no step placed in time
    else:
        first, last = float(t0[ok].min()), float(t1[ok].max())
        stepped = kernels["step"].to_numpy(np.float64)[task] if "step" in kernels \
            else np.full(int(task.sum()), np.nan)
        has = np.isin(ids, stepped[np.isfinite(stepped)])
        recorded = has & ((start >= first) | (start == np.nanmin(start))) \
            & ((end <= last) | (end == np.nanmax(end)))
    steps["tasks_recorded"] = recorded
    if recorded.all():
        return
    done = [int(s) for s in ids[recorded]]
    which = (f"steps {runs_text(done)}" if len(done) > 1 else
             f"step {done[0]}" if done else "no step")
    none = " (most hold only the step trace's all-reduce phases)" if not task.all() else ""
    notes.append(f"steps: device tasks recorded for {which} of {len(ids)} (steps."
                 "tasks_recorded): the timeline's device operators cover no more; the other "
                 f"steps hold part of their device tasks or none{none}, so their gaps are not "
                 "idle time")


def _cluster_analyse(path: Path, steps: pd.DataFrame | None,
                     notes: list[str]) -> pd.DataFrame:
    header = read_header(path, "ascend_cluster_analyse_*.csv (MindSpore per-step breakdown)")
    if "computation_time" not in header:
        notes.append(f"steps: {path.name} has no computation_time column (MindSpore 1.x "
                     "layout); computing/communication per step unknown")
        return steps if steps is not None else pd.DataFrame()
    table = read_csv(path, "ascend_cluster_analyse_*.csv (MindSpore per-step breakdown)",
                     required=[("computation_time",), ("communication_alone_time",)])
    rows = table.num_rows
    h = table.column_names
    # MindSpore writes one row per step and, after more than one, their mean as a last row
    # (_write_cluster_metrices): that row is no step
    n = rows - 1 if rows > 1 else rows
    if n < rows:
        notes.append(f"steps: the last row of {path.name} is MindSpore's mean over the steps "
                     "above it, not a step: left out")

    def ms(name: str) -> np.ndarray:
        if name not in h:
            return np.full(n, np.nan)
        return to_float(table.column(name), rows, label=f"{path.name} {name}")[:n] * 1000.0

    # computation_time is MindSpore's step (its timeline's step span) less the communication
    # that runs alone (its timeline generators append the step's duration minus
    # comm_alone_time[step]): computing and the device's idle time, which these files do
    # not tell apart
    notes.append(f"steps: computation_time of {path.name} is the step less the "
                 "communication that runs alone, the device's idle time included: read as "
                 "computing or free (computing_or_free_us), computing and free time each "
                 "unknown")
    frame = pd.DataFrame({
        "computing_us": np.full(n, np.nan),
        "computing_or_free_us": ms("computation_time"),
        "comm_not_overlapped_us": ms("communication_alone_time"),
        "stage_us": ms("stage_time"),
        "bubble_us": ms("receive_alone_time"),
        "comm_not_overlapped_excl_receive_us": ms("collective_communication_alone_time"),
    })
    if steps is not None and len(steps) == n:
        return pd.concat([steps.reset_index(drop=True), frame], axis=1)
    frame.insert(0, "step", np.arange(1, n + 1, dtype=float))
    if steps is not None:
        notes.append(f"steps: {path.name} has {n} rows but the step trace {len(steps)} steps; "
                     "rows numbered 1..n and joined to the step trace by step number")
        frame = frame.merge(steps, on="step", how="left")
    return frame
