"""Rules of the job as a whole: the settings it ran with, and its model FLOPs utilisation."""

from __future__ import annotations

import numpy as np

from ..analysis._util import has_values, table
from ..analysis.shapes.fused_moe import logits_rows, packed_tokens, step_tokens
from ..analysis.steps import measured_step_s
from ..calc import flops as _flops
from ..calc.inference import inference_mfu, model_fields, step_forward_flops
from ..calc.throughput import tokens_per_second_per_device
from ..format import WARNING_MARK, counted, plural
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
    if trains is False:
        forward = _inference_mfu(ctx, step / 1e6)
        if forward is not None:  # one forward pass, as the Overview counts it
            share, said = forward
            return [unmeasured(
                "mfu_inference", "metrics",
                f"Model FLOPs utilisation of this inference step is {pct(share)}",
                f"{why}; {said}",
                "Work down the measured findings in order: an inference step's MFU counts "
                "its forward pass only, and MFU of a training step needs a training profile.",
                severity="info")]
        # no forward count: the Overview's guard (perfkit.guards.check_utilization)
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
        f"step {fmt_time(step)}, {tps:,.0f} tokens/s per device, peak "
        f"{hw.peak() / 1e12:.0f} TFLOP/s ({hw.name})",
        "Work down the measured findings in order; if none is large, revisit the parallel "
        "strategy (perfkit.plan.search) and the micro-batch size.", severity="info")]


def _inference_mfu(ctx: Context, step_s: float) -> tuple[float, str] | None:
    """The forward-only MFU of an inference step, as the Overview's headline counts it
    (:func:`perfkit.calc.inference.step_forward_flops` over the tokens of the step's
    linear layers, :func:`perfkit.analysis.shapes.fused_moe.step_tokens`; the attention
    core only where the trace splits them into sequences,
    :func:`~perfkit.analysis.shapes.fused_moe.packed_tokens`), with what it counts; None
    where the model or the tokens do not allow it."""
    m, par, hw = ctx.model, ctx.parallel, ctx.hardware
    fields = model_fields(m)
    ops = table(ctx.profile, "ops")
    tokens = step_tokens(ops) if fields is not None else None
    if tokens is None:
        return None
    tp = max(par.tp, 1)
    rows = (logits_rows(ops, m.vocab_size // tp) if m.vocab_size % tp == 0 else None) \
        or logits_rows(ops, m.vocab_size)
    # packed tokens (vLLM) show no sequences: the model's sequence length is then the
    # step's tokens (perfkit.job.inference), and the attention core is left out as the
    # Overview leaves it out
    seq = None if packed_tokens(ops) else m.seq_length
    flops, sequences = step_forward_flops(fields, tokens[0], rows[0] if rows else 0, seq)
    devices = par.tp * par.pp
    value = inference_mfu(flops, step_s, devices, hw.peak())
    core = "with" if sequences else "without"
    return value, (f"one forward pass over {tokens[0]:,} tokens, {core} the attention core, "
                   f"makes {flops / 1e12:.3g} TFLOP in the measured step of "
                   f"{fmt_time(step_s * 1e6)} on {counted(devices, 'device')} (tp × pp) at "
                   f"{hw.peak() / 1e12:,.0f} TFLOP/s ({hw.name}), the MFU the Overview shows")
