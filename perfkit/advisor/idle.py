"""The device idle with no device tasks to say why: a profile of step figures only.

msprof-analyze's ``cluster_analysis_output`` (and any profile without its device tasks)
gives each rank's step split (computing, communication, free) but no kernel: the rules
that split the idle time into launch gaps and stalls (``host_bound``, ``long_gaps``) need
the tasks and do not run, and the advisor said nothing of a device idle 65 % of its step
(the 8-rank sample: 1,121 ms of free time in a 1,714 ms step, where msprof-analyze's own
slow-rank rule flags the ranks' 596 ms spread of it). :func:`device_idle` says it, with
the rank that idles most, and what would show the cause.
"""

from __future__ import annotations

import numpy as np

from .._stats import median
from ..format import counted, share_text
from .context import Context
from .finding import Finding, measured
from .registry import rule
from .words import fmt_time, say

__all__ = ["device_idle", "IDLE_SHARE"]

#: Share of the step below which idle time without tasks is not a finding.
IDLE_SHARE = 0.05


def _on_cpu(ctx: Context) -> bool:
    """Whether the run had no accelerator (a CPU-only MindSpore or PyTorch run): its "free"
    time is no device's idle time."""
    return any(str(getattr(m, "device_type", "") or "").lower() == "cpu"
               for m in ctx.rank_metas() if m is not None)


@rule("host", order=65, needs=("steps",))
def device_idle(ctx: Context) -> list[Finding]:
    """Free (idle) time in the step of a profile that records no device task: the median
    over ranks of each rank's mean free time per step, when it is at least
    :data:`IDLE_SHARE` of the step; the gap rules say more where the tasks are."""
    if ctx.has_table("kernels") or _on_cpu(ctx):
        return []
    s = ctx.steps
    if "free_us" not in s.columns or not s["free_us"].notna().any():
        return []
    per_rank = s.groupby("rank", dropna=False)["free_us"].mean().dropna()
    free = median(per_rank)
    step = ctx.step_us
    if not np.isfinite(free) or not np.isfinite(step) or step <= 0 or free < IDLE_SHARE * step:
        return []
    whose = ("the rank's mean free time per step" if len(per_rank) == 1 else
             f"the median over {counted(len(per_rank), 'rank')} of each rank's mean free time")
    ev = (f"the device is idle {fmt_time(free)} per step ({share_text(free / step)} of the "
          f"step), {whose}")
    if len(per_rank) > 1:
        most, least = per_rank.idxmax(), per_rank.idxmin()
        ev += (f"; rank {most} idles most ({fmt_time(float(per_rank[most]))}), rank "
               f"{least} least ({fmt_time(float(per_rank[least]))})")
    ev += "; this profile records no device task, so the gaps cannot be told apart"
    rec = say(ctx.fw, {
        "mindspore": "Load the ranks' own profiler folders (with their device tasks) to "
                     "see whether the idle time is launch gaps, a slow dataset or a "
                     "synchronisation; then the host findings say which.",
        "torch_npu": "Load the ranks' own profiler folders (ASCEND_PROFILER_OUTPUT, with "
                     "kernel_details.csv or the DB) to see whether the idle time is launch "
                     "gaps, the data loader or a synchronisation; then the host findings "
                     "say which.",
        "pytorch_gpu": "Record the trace with its GPU kernels to see whether the idle time "
                       "is launch gaps, the data loader or a synchronisation."})
    return [measured(ctx, "device_idle", "host", free,
                     "The device is idle part of the step, and the profile cannot say why",
                     ev, rec)]
