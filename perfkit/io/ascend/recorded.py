"""Whether an Ascend text export's ``kernel_details.csv`` holds each step's device tasks.

``step_trace_time.csv`` and ``kernel_details.csv`` are written by the same analysis from
the same device tasks: a step's ``Computing`` is the time covered by its compute tasks and
``Communication(Not Overlapped)`` the time covered by its communication tasks outside
them, so the union of the step's tasks in ``kernel_details.csv`` covers ``Computing +
Communication(Not Overlapped)`` (the step's busy time). On ``ascend/msinsight-pt-level1``
it does to the microsecond (step 50: 110,837 µs of 110,837 µs on rank 0, 105,236 µs of
105,237 µs on rank 1). A file cut short does not: ``ascend/msinsight-pt-gpt3-old`` (a
fixture whose kernel list was trimmed to 21 and 22 rows) covers 37,216 µs of the
221,789 µs of rank 0's step 2 (16.8 %) and 11,515 µs of 226,726 µs on rank 1 (5.1 %).

The DB export holds the same two records (``analysis.db``'s ``StepTraceTime`` and the
``TASK`` table of ``ascend_pytorch_profiler_{rank}.db``), which cover each other as well
(step 50 of ``ascend/msinsight-pt-db-level1``: 106,975 µs of 106,975 µs on rank 0);
:mod:`perfkit.io.ascend.db` applies the same rule to them.

:func:`mark_recorded` sets the ``steps`` table's ``tasks_recorded`` column
(:mod:`perfkit.analysis.recorded`) from that comparison, so that the figures per step of the
operators, the gaps read as idle time and the Timeline's step leave such steps out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...format import counted, runs_text, share_text

__all__ = ["MIN_COVERED", "OVER_COVERED", "covered_us", "mark_recorded"]

#: A step's tasks are recorded in full when their union covers at least this share of the
#: step's busy time from the step trace. A full export covers it all (100.0 % on both ranks
#: of ``ascend/msinsight-pt-level1``); the trimmed fixture 16.8 % and 5.1 %: half leaves a
#: wide margin on both sides, so that a small disagreement (a task with a damaged row, a
#: rounding) never marks a step.
MIN_COVERED = 0.5
#: Above this many times a step's busy time, the tasks' union cannot be the same step's
#: (the union of the tasks the step trace sums can only equal it): the two are in different
#: units (a step trace divided by 1,000 read 154 µs for a 154 ms step) or runs.
OVER_COVERED = 1.5


def covered_us(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per ``step`` of ``kernels`` (``step``, ``start_us``, ``dur_us``, optionally
    ``category``): ``covered_us``, the time covered by the union of its tasks' intervals
    ``[start_us, start_us + dur_us]``, and ``communication`` (whether one of them is a
    communication task). Rows without a step, start or duration are left out."""
    step = pd.to_numeric(kernels["step"], errors="coerce").to_numpy(np.float64, na_value=np.nan)
    t0 = pd.to_numeric(kernels["start_us"], errors="coerce").to_numpy(np.float64,
                                                                       na_value=np.nan)
    dur = pd.to_numeric(kernels["dur_us"], errors="coerce").to_numpy(np.float64,
                                                                      na_value=np.nan)
    comm = kernels["category"].astype(TEXT).eq("communication").fillna(False) \
        .to_numpy(bool) if "category" in kernels.columns else np.zeros(len(kernels), bool)
    ok = np.isfinite(step) & np.isfinite(t0) & np.isfinite(dur)
    step, t0, t1, comm = step[ok], t0[ok], t0[ok] + np.clip(dur[ok], 0.0, None), comm[ok]
    order = np.lexsort((t0, step))
    step, t0, t1, comm = step[order], t0[order], t1[order], comm[order]
    out = {"step": [], "covered_us": [], "communication": []}
    bounds = np.r_[0, np.flatnonzero(np.diff(step)) + 1, len(step)]  # sorted: one slice a step
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        if lo == hi:
            continue
        s, at = step[lo], slice(lo, hi)
        a, b = t0[at], t1[at]
        reach = np.maximum.accumulate(b)  # the end of the union so far
        new = np.r_[True, a[1:] > reach[:-1]]  # a task that starts a new busy block
        ends = np.r_[reach[np.flatnonzero(new)[1:] - 1], reach[-1]]
        out["step"].append(s)
        out["covered_us"].append(float(np.sum(ends - a[new])))
        out["communication"].append(bool(comm[at].any()))
    return pd.DataFrame(out)


def mark_recorded(steps: pd.DataFrame, kernels: pd.DataFrame | None, notes: list[str],
                  file: str = "kernel_details.csv",
                  step_file: str = "step_trace_time.csv") -> None:
    """Set ``steps.tasks_recorded``: False for a step whose tasks in ``kernels`` cover less
    than :data:`MIN_COVERED` of its busy time, with a note that gives the figures, and
    ``steps.tasks_covered``, the share of each step's busy time its tasks cover (NaN where
    unknown), which the Timeline writes beside the fragment it draws.

    ``file`` and ``step_file`` name, in the note, where the tasks and the step trace were
    read (the text export's two CSV files; the DB export's ``TASK`` table and
    ``analysis.db``'s ``StepTraceTime``, :mod:`perfkit.io.ascend.db`).

    The busy time is ``computing_us + comm_not_overlapped_us`` of the step trace, or
    ``computing_us`` alone when none of the step's tasks is a communication task (a
    ``kernel_details.csv`` without HCCL rows). A step with no task is not recorded either;
    a step whose busy time is unknown or zero stays NA (counts as recorded). Nothing is
    set when the tasks have no step (no ``Step Id`` column) or every step is recorded.
    """
    if kernels is None or not len(kernels) or "step" not in kernels.columns \
            or not {"start_us", "dur_us"} <= set(kernels.columns) \
            or not {"step", "computing_us"} <= set(steps.columns) or not len(steps):
        return
    cover = covered_us(kernels)
    if cover.empty:
        return
    ids = pd.to_numeric(steps["step"], errors="coerce").to_numpy(np.float64, na_value=np.nan)
    at = pd.Series(np.arange(len(cover)), index=cover["step"].to_numpy())
    row = at.reindex(ids).to_numpy(np.float64, na_value=np.nan)
    has = np.isfinite(row)
    pick = np.where(has, row, 0).astype(np.int64)
    covered = np.where(has, cover["covered_us"].to_numpy(np.float64)[pick], 0.0)
    with_comm = has & cover["communication"].to_numpy(bool)[pick]

    def col(name: str) -> np.ndarray:
        return pd.to_numeric(steps[name], errors="coerce").to_numpy(np.float64,
                                                                      na_value=np.nan) \
            if name in steps.columns else np.full(len(steps), np.nan)

    comm = np.nan_to_num(col("comm_not_overlapped_us"), nan=0.0)
    busy = col("computing_us") + np.where(with_comm, comm, 0.0)
    known = np.isfinite(busy) & (busy > 0) & np.isfinite(ids)
    over = known & (covered > OVER_COVERED * np.where(known, busy, 1.0))
    if over.any() and over.sum() == known.sum():  # every step: the two disagree in scale
        i = int(np.flatnonzero(over)[0])
        notes.append(f"steps: the device tasks of {file} cover more than the busy time "
                     f"{step_file} gives every step ({counted(int(over.sum()), 'step')}; "
                     f"step {ids[i]:g}: {covered[i] / 1000:,.3g} ms of tasks, "
                     f"{busy[i] / 1000:,.3g} ms busy): one of the two is in another unit "
                     "(ms for µs) or from another run; the step figures are the step "
                     "trace's")
    short = known & (covered < MIN_COVERED * np.where(known, busy, 1.0))
    if not short.any():
        return
    steps["tasks_recorded"] = pd.array(np.where(known, ~short, pd.NA), dtype="boolean")
    # the share of each step's busy time its tasks cover, for the views that draw them
    steps["tasks_covered"] = np.where(known, covered / np.where(known, busy, 1.0), np.nan)
    bad = [int(s) for s in ids[short]]
    shown = [f"step {ids[i]:g}: {covered[i] / 1000:,.1f} ms of {busy[i] / 1000:,.1f} ms, "
             f"{share_text(covered[i] / busy[i])}" for i in np.flatnonzero(short)[:3]]
    more = f"; {len(bad) - len(shown)} more" if len(bad) > len(shown) else ""
    one = len(bad) == 1
    which = (f"the only step ({bad[0]})" if len(ids) == 1 else
             f"every step ({runs_text(bad)})" if len(bad) == len(ids) else
             f"{'step' if one else 'steps'} {runs_text(bad)} of {len(ids)}")
    whose = "the step's" if one else "those steps'"
    notes.append(f"steps: device tasks recorded only in part for {which} (steps."
                 f"tasks_recorded): the tasks of {file} cover less than half the busy time "
                 f"(computing + not-overlapped communication) that {step_file} gives "
                 f"{'it' if one else 'them'} ({'; '.join(shown)}{more}): the file holds "
                 "part of the tasks (cut short), or its step ids, start times or durations "
                 f"disagree with {step_file} (renumbered, zeroed, in another unit); its sums "
                 f"are not {whose} times and the gaps between its tasks are not idle time")
