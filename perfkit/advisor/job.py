"""Rules of the job as a whole: the settings it ran with, and its model FLOPs utilisation."""

from __future__ import annotations

import numpy as np

from ..analysis._util import has_values
from ..analysis.steps import measured_step_s
from ..calc import flops as _flops
from ..calc.throughput import tokens_per_second_per_device
from ..format import WARNING_MARK, plural
from .context import Context
from .finding import Finding, unmeasured
from .registry import rule
from .words import fmt_time, pct

__all__ = ["environment", "mfu"]


#: Environment settings that slow training down, as a profile's metadata records them:
#: (variable, rule, area, what it does).
_SLOW_ENV = (
    ("ASCEND_LAUNCH_BLOCKING", "env_launch_blocking", "host",
     "every operator launch waits for the device (synchronous execution)"),
    ("CUDA_LAUNCH_BLOCKING", "env_launch_blocking", "host",
     "every kernel launch waits for the device (synchronous execution)"),
    ("HCCL_DETERMINISTIC", "env_deterministic", "communication",
     "collectives use the slower deterministic reduction order"),
)


@rule("job", order=150)
def environment(ctx: Context) -> list[Finding]:
    """Seed checklist items that the profiler's record of the environment can show."""
    out = []
    metas = [m for m in ctx.rank_metas() if m is not None]
    for var, rule_id, area, effect in _SLOW_ENV:
        ranks = [m.rank for m in metas
                 if str((m.extra or {}).get("env", {}).get(var, "")).strip().lower()
                 in ("1", "true", "on", "yes")]
        if ranks:
            shown = ", ".join(str(r) for r in ranks[:8]) + (" ..." if len(ranks) > 8 else "")
            out.append(unmeasured(
                rule_id, area, f"{var} is set: {effect}",
                f"the profiler recorded {var}=on for {plural(len(ranks), 'rank')} {shown}",
                "Unset it for training runs; keep it only to locate an error or while "
                "debugging reproducibility."))
    return out


@rule("job", order=170, needs=("steps",), inputs=("model", "parallel", "hardware"))
def mfu(ctx: Context) -> list[Finding]:
    """Model FLOPs utilisation of the measured step (or a job that does not match, or a
    profile that is not a training step: no backward pass, whose MFU is not one)."""
    m, par, hw = ctx.model, ctx.parallel, ctx.hardware
    # the job's measured step (as pk.infer_job, the headline and perfkit info take it), so
    # every page shows one MFU for one job; the device span where there is no step table
    step = measured_step_s(ctx.steps) * 1e6 if has_values(ctx.steps, "step_us") \
        else ctx.step_us
    if not np.isfinite(step) or step <= 0:
        return []
    tps = tokens_per_second_per_device(par.global_batch_size, m.seq_length, step / 1e6,
                                       par.world_size)
    value = float(_flops.mfu(m, tps, hw.peak()))
    trains, why = ctx.training_step()
    if trains is False:  # the Overview's guard (perfkit.guards.check_utilization)
        return [unmeasured(
            "mfu_not_training", "metrics",
            "Model FLOPs utilisation cannot be measured: the profile is not a training step",
            f"{why}; a training step's FLOPs (forward and backward) over its measured step "
            f"of {fmt_time(step)} give an MFU of {pct(value)} {WARNING_MARK} not "
            "plausible, which is not a utilisation",
            "Profile a training step (forward, backward and optimizer) to measure MFU; the "
            "MFU of the Recompute and Planner tables is predicted for a training step, not "
            "measured.",
            severity="info")]
    if not 0 < value <= 1:
        return [unmeasured(
            "mfu_inconsistent", "metrics",
            "The model, parallel layout or hardware given do not match the profile",
            f"they give an MFU of {pct(value)} for the measured step of {fmt_time(step)}",
            "Check the model (layers, sequence length), the global batch and the hardware "
            "passed to the advisor.")]
    return [unmeasured(
        "mfu", "metrics", f"Model FLOPs utilisation is {pct(value)}",
        f"step {fmt_time(step)}, {tps:.0f} tokens/s per device, peak "
        f"{hw.peak() / 1e12:.0f} TFLOP/s ({hw.name})",
        "Work down the measured findings in order; if none is large, revisit the parallel "
        "strategy (perfkit.plan.search) and the micro-batch size.", severity="info")]
