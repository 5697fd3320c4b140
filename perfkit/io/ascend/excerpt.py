"""Whether a ``kernel_details.csv`` read without its step trace is an excerpt of its steps.

Without ``step_trace_time.csv`` a step is known only from its tasks: its time is the span
from its first task to its last, and the gaps between them count as idle. That reading
holds when the file keeps every task of the step; an excerpt of the file (the rows a test
or a bug report keeps) makes a long step of a few tasks, nearly all idle:
``ascend/msprof-analyze-tests/compute_advice_v2`` keeps 29 rows (25 distinct tasks) of
step 19, which read as a 2.86 s step 99.7 % idle.

The tasks' own ids tell. The runtime numbers the tasks of a stream one after another
(``Task ID``, 16 bits, so it wraps at 65,536): between two tasks of a stream that the file
keeps, the difference of their ids is the number of tasks the stream ran from one to the
other. The file keeps most of them when it is whole: 558 rows of the 707 ids their
stream ran on ``wild/msa_kernel_details`` (78.9 %), 185 of 217 on each rank of
``ascend/msinsight-pt-level1`` (85.3 %), the other tasks being those ``kernel_details.csv``
does not list (event records and waits). ``compute_advice_v2``'s 25 distinct tasks of
stream 2 cover 1,238 ids (2.0 %). An id lower than the one before is not counted (a wrap
or a graph run again: the tasks between are unknown), so the count of ids run is never
too high.

:func:`mark_excerpt` gives the ``steps`` table that says so (``tasks_recorded``,
:mod:`perfkit.analysis.recorded`), with a note; the step breakdown derived from the tasks
then withholds the step's time and parts (:func:`perfkit.analysis.steps.step_breakdown`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...format import counted, runs_text, share_text

__all__ = ["MAX_KEPT", "MIN_IDS", "ids_run", "mark_excerpt"]

#: A step's tasks are an excerpt when the file keeps less than this share of the tasks
#: its streams ran between the first and the last task kept: whole files keep 78.9 % and
#: 85.3 % (module docstring), ``compute_advice_v2`` 2.0 %; a tenth leaves a wide margin
#: on both sides.
MAX_KEPT = 0.1
#: Fewer ids run than this: too few tasks to tell (a step of a handful of tasks).
MIN_IDS = 100


def ids_run(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per ``step`` of ``kernels`` (``step``, ``stream``, ``task_id``, ``start_us``):
    ``kept``, its distinct tasks (stream, id and start: a row repeated counts once), and
    ``run``, the tasks its streams ran from the first of them to the last: per stream, in
    the order of their starts, 1 plus the sum of the rises of the id from one task to the
    next (a fall, a wrap or a graph run again, adds nothing; a stream of one task adds 1).
    Rows without a step, stream, id or start are left out."""
    cols = ["step", "stream", "task_id", "start_us"]
    if not set(cols) <= set(kernels.columns):
        return pd.DataFrame({"step": [], "kept": [], "run": []})
    k = pd.DataFrame({c: pd.to_numeric(kernels[c], errors="coerce").astype("Float64")
                      .to_numpy(np.float64, na_value=np.nan) for c in cols}).dropna()
    k = k.drop_duplicates().sort_values(["step", "stream", "start_us", "task_id"],
                                        kind="mergesort")
    rise = k.groupby(["step", "stream"], sort=False)["task_id"].diff()
    k["rise"] = rise.where(rise > 0, 0.0).fillna(0.0)
    per = k.groupby(["step", "stream"], sort=True).agg(kept=("task_id", "size"),
                                                       rise=("rise", "sum"))
    per["run"] = per["rise"] + 1
    out = per.groupby(level="step").agg(kept=("kept", "sum"), run=("run", "sum"))
    return out.reset_index()


def mark_excerpt(kernels: pd.DataFrame | None, notes: list[str],
                 file: str = "kernel_details.csv") -> pd.DataFrame | None:
    """The ``steps`` table (``step``, ``tasks_recorded``) of a ``kernels`` table read
    without a step trace, when the tasks of some step are an excerpt: it keeps less than
    :data:`MAX_KEPT` of the tasks its streams ran (:func:`ids_run`, over at least
    :data:`MIN_IDS` ids); with a note giving the figures. None (and no note) otherwise."""
    if kernels is None or not len(kernels):
        return None
    counts = ids_run(kernels)
    if counts.empty:
        return None
    short = (counts["run"] >= MIN_IDS) & (counts["kept"] < MAX_KEPT * counts["run"])
    if not short.any():
        return None
    steps = pd.DataFrame({"step": counts["step"].astype(np.int64),
                          "tasks_recorded": pd.array(~short.to_numpy(bool), dtype="boolean")})
    bad = counts[short]
    ids = [int(s) for s in bad["step"]]
    one = len(ids) == 1
    which = (f"the only step ({ids[0]})" if len(counts) == 1 else
             f"{'step' if one else 'steps'} {runs_text(ids)} of {len(counts)}")
    shown = "; ".join(f"step {int(r.step)}: {counted(int(r.kept), 'task')} of the "
                      f"{int(r.run):,} its streams ran from the first to the last, "
                      f"{share_text(r.kept / r.run)}" for r in bad.head(3).itertuples())
    notes.append(f"kernels: {file} is an excerpt of {which} (steps.tasks_recorded): its "
                 f"rows keep a few of the tasks, by their Task IDs ({shown}); with no step "
                 "trace the step is known only from them, so its time, its idle share and "
                 "its figures per step are not given")
    return steps
