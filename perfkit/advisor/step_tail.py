"""The step tail of a MindSpore step trace: what runs after the backward pass.

MindSpore's step trace (MindInsight, a raw CANN ``PROF_`` folder) splits each step into
the step interval (waiting for data), forward and backward, and the **tail**: the
gradients' aggregation across devices and the parameter update. The MindSpore
performance guide reads a long tail so (the seed guide "Performance Tuning Guide",
"Long Step Tail" and the data-parallel cluster check): on one device it is the update
alone and should be very short, so a long one is abnormal (the guide asks for it to be
reported); with data parallelism it is mostly the gradient all-reduce, tuned with
``all_reduce_fusion_config``; one device whose tail is much longer than the others' is a
slow device (the ``slow_ranks`` finding).

The rule reads a step trace that does **not** split the step into computing and
communication (MindInsight's ``step_trace_raw`` of a legacy run, ``wild/mi_run1``): there
the tail is the only view of the gradients' aggregation, and no other finding reports it
(the Overview then stacks the step trace's phases instead of the split). Where the split
is recorded (a raw CANN folder), the ``exposed_comm`` finding counts the communication
and this rule stays silent.

The tail's all-reduce is the union of the communication operators
(``comm_ops``: MindInsight's parallel phases, CANN's HCCL tasks) inside the tail's window,
the last ``tail_us`` of the step (``step_start_us + total_us``: MindInsight's step starts
at its interval and counts it, CANN's starts after it and does not; both end with the
tail). What is at stake is the whole tail; one below :data:`LONG_TAIL` of the step is not
reported.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis._util import has_values, table
from .context import Context
from .finding import Finding, measured
from .registry import rule
from .words import fmt_time, pct

__all__ = ["step_tail", "tail_comm_us", "LONG_TAIL"]

#: The share of the step above which a tail is reported: the guide calls a single
#: device's tail "very short" and never the bottleneck; a tenth of the step is far from
#: that.
LONG_TAIL = 0.10


def tail_comm_us(steps: pd.DataFrame, comm_ops: pd.DataFrame) -> pd.Series:
    """Per row of ``steps``, the time the communication operators of that rank and step
    cover inside its tail (their union, µs); NaN where the step's window or the operators'
    times are not known.

    Parameters
    ----------
    steps : DataFrame
        A step trace: ``rank``, ``step``, ``step_start_us``, ``total_us`` and ``tail_us``
        (the profile's ``steps``).
    comm_ops : DataFrame
        ``rank``, ``step``, ``start_us``, ``elapse_us`` on the same clock.
    """
    out = pd.Series(np.nan, index=steps.index, dtype="float64")
    need = ("step_start_us", "total_us", "tail_us")
    if comm_ops.empty or not all(has_values(steps, c) for c in need) or \
            not all(c in comm_ops for c in ("rank", "step", "start_us", "elapse_us")):
        return out
    hi = steps["step_start_us"].astype(float) + steps["total_us"].astype(float)
    lo = hi - steps["tail_us"].astype(float)
    ops = comm_ops.dropna(subset=["start_us", "elapse_us"])
    by_key = {k: g for k, g in ops.groupby(["rank", "step"], sort=False)}
    for i, (rank, step, a, b) in enumerate(zip(steps["rank"], steps["step"], lo, hi,
                                               strict=True)):
        if not (np.isfinite(a) and np.isfinite(b)):
            continue
        g = by_key.get((rank, step))
        if g is None:
            out.iloc[i] = 0.0
            continue
        begin = g["start_us"].to_numpy(float)
        s = np.clip(begin, a, b)
        e = np.clip(begin + g["elapse_us"].to_numpy(float), a, b)
        order = np.argsort(s, kind="mergesort")
        s, e = s[order], np.maximum.accumulate(e[order])
        # the union: each interval's end beyond the furthest end before its start
        before = np.r_[a, e[:-1]]
        out.iloc[i] = float(np.clip(e - np.maximum(s, before), 0.0, None).sum())
    return out


@rule("communication", order=45, needs=("steps",), frameworks=("mindspore",),
      phases=("training",))
def step_tail(ctx: Context) -> list[Finding]:
    """A long step tail (:data:`LONG_TAIL` of the step or more) of a step trace without a
    computing / communication split: per step the slowest rank's (the longest
    ``total_us``), its all-reduce and its update (the module docstring)."""
    steps = table(ctx.profile, "steps")
    if not has_values(steps, "tail_us") or not has_values(steps, "total_us") or \
            has_values(steps, "comm_not_overlapped_us"):  # split: exposed_comm reads it
        return []
    rows = steps.dropna(subset=["tail_us", "total_us"])
    if "rank" not in rows:
        rows = rows.assign(rank=0)
    slowest = rows.sort_values(["step", "total_us"], ascending=[True, False],
                               kind="mergesort").drop_duplicates("step", keep="first")
    tail = slowest["tail_us"].astype(float)
    step = ctx.step_us  # the step every finding's share is of
    if not (np.isfinite(step) and step > 0):
        step = float(slowest["total_us"].astype(float).mean())
    at_stake = float(tail.mean())
    if not np.isfinite(at_stake) or at_stake < LONG_TAIL * step:
        return []
    reduce = float(tail_comm_us(slowest, table(ctx.profile, "comm_ops")).mean())
    ranks = int(rows["rank"].nunique())
    whose = "of the slowest rank" if ranks > 1 else "of the one rank"  # no slowest of one
    said = (f"after the backward pass each step spends {fmt_time(float(tail.mean()))} in "
            f"its tail, {pct(float(tail.mean()) / step)} of the {fmt_time(step)} step "
            f"(means over the steps {whose})")
    if np.isfinite(reduce) and reduce > 0:
        said += (f": {fmt_time(reduce)} in communication (the all-reduce of the gradients) "
                 f"and {fmt_time(max(0.0, float(tail.mean()) - reduce))} in the update")
    slow = False
    if ranks > 1:
        per_rank = rows.groupby("rank")["tail_us"].mean()
        if float(per_rank.max()) > 1.05 * float(per_rank.min()):
            said += (f"; the ranks' mean tails range {fmt_time(float(per_rank.min()))} to "
                     f"{fmt_time(float(per_rank.max()))}")
        slow = float(per_rank.max()) > 1.5 * float(per_rank.median())
    gradients = bool(np.isfinite(reduce) and reduce > 0)
    several = ranks > 1 or (ctx.parallel is not None and ctx.parallel.world_size > 1)
    if several and not gradients:
        said += "; the profile records no communication operator inside it"
    title = ("The step tail (the gradients' all-reduce and the update) takes a long time"
             if gradients or several else
             "The parameter update after the backward pass takes a long time")
    update = float(tail.mean()) - (reduce if gradients else 0.0)
    advice = []
    if gradients or several:
        advice.append("Fuse the gradients into fewer, larger all-reduces "
                      "(all_reduce_fusion_config, or comm_fusion in the parallel context) "
                      "and let them start during the backward pass, so that the tail keeps "
                      "only the last bucket.")
    if update > LONG_TAIL * step:
        advice.append("The update itself should be very short: look at the tail's "
                      "operators in the timeline (an optimizer split into many small "
                      "Assign / Mul / Add kernels per parameter instead of one fused "
                      "AdamWeightDecay or ApplyMomentum, a loss-scale or gradient-clipping "
                      "pass over every gradient); the MindSpore performance guide asks for "
                      "a long update on one device to be reported to the MindSpore "
                      "community.")
    if slow:
        advice.append("One device's tail is much longer than the others': a slow device "
                      "(see the slow-rank finding).")
    # its evidence is the step trace's phases, drawn on the Overview (area "step_trace")
    return [measured(ctx, "step_tail", "step_trace", at_stake, title, said,
                     " ".join(advice),
                     details=f"reported from a tail of {pct(LONG_TAIL)} of the step")]
