"""Rules of memory and recompute: memory close to (or above) the device, recompute to spare.

Recompute trades time for memory: it is worth turning down only where the measured peak
leaves room (:func:`recompute`), and memory close to its limit is a risk only while no
stall it causes is already reported (:func:`memory`, after the host's long gaps).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .._stats import median
from ..analysis._util import has_values
from ..calc.flops import hardware_flops, model_flops
from ..format import counted
from .context import Context
from .finding import Finding, measured, unmeasured
from .registry import rule
from .words import PYTORCH_ACCELERATED, fmt_bytes, fmt_time, pct, say

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["recompute", "memory"]


@rule("memory_recompute", order=190, needs=("memory",), inputs=("hardware",),
      after=("long_gaps",), frameworks=PYTORCH_ACCELERATED, ahead=("memory_frac",))
def memory(ctx: Context) -> list[Finding]:
    """A measured peak above the device, or close to it with no stall reported (not on a
    CPU-only run: no device memory)."""
    if ctx.fw not in PYTORCH_ACCELERATED:
        return []
    used, cap, frac = ctx.memory_frac
    if not np.isfinite(frac):
        return []
    hw = ctx.hardware
    stalls = [f for f in ctx.findings("long_gaps") if f.rule == "memory_stalls"]
    out = []
    if frac > 1.0:
        out.append(unmeasured(
            "memory_over_capacity", "memory",
            "The measured memory peak is larger than the device: the hardware does not match "
            "the profile, or the job could not have run",
            f"peak {fmt_bytes(used)} = {pct(frac)} of the {fmt_bytes(cap)} of "
            f"{hw.name} ({ctx.hardware_why})",
            "Pass the hardware that ran the job (perfkit.Hardware.preset(...) or .replace("
            "memory_bytes=...)); if it is right, the profile is not from a run that fit: "
            "check the memory settings before trusting the memory figures.",
            details=f"peak reserved {fmt_bytes(used)}"))
    elif frac >= 0.9 and not stalls:
        out.append(unmeasured(
            "memory_pressure", "memory", "Device memory is close to its limit",
            f"peak {fmt_bytes(used)} = {pct(frac)} of {fmt_bytes(cap)} "
            f"({hw.name}); no stall that it causes is visible in this profile",
            say(ctx.fw, {"mindspore": "Keep headroom for peaks: selective recompute or "
                                      "optimizer sharding (parallel_optimizer) before "
                                      "raising the batch.",
                         "any": "Keep headroom for peaks: selective recompute or optimizer "
                                "sharding before raising the batch; watch for "
                                "out-of-memory on longer sequences."})))
    return out


@rule("memory_recompute", order=160, ahead=("recompute",), phases=("training",))
def recompute(ctx: Context) -> list[Finding]:
    """Recomputation seen (the ``recompute_`` scopes of a MindSpore profile's names, which
    time it; else the forward / backward attention count) or configured."""
    seen = ctx.recompute_evidence()
    doing = seen[seen["recompute"] != "none"] if not seen.empty else seen
    if doing.empty:
        return _scoped_recompute(ctx) or _configured_recompute(ctx, seen)
    if ctx.fw == "mindspore":
        # MindSpore names the recomputed cells (recompute_ scopes): their own forward
        # tasks are the recomputation, timed, where the attention count only estimates it
        scoped = _scoped_recompute(ctx)
        if scoped:
            return scoped
    share = median(doing["recompute_share"])
    mode = str(doing["recompute"].mode().iloc[0])
    s = ctx.steps
    comp = median(ctx.rank_median("computing_us")) if has_values(
        s, "computing_us") else float("nan")
    us = share * comp
    used, cap, frac = ctx.memory_frac
    ev = (f"attention forward / backward tasks = {median(doing['ratio']):.2f} (1 without "
          f"recompute, 2 with full recompute): about {pct(share)} of the computation, "
          f"{fmt_time(us)} per step, is recomputation")
    rec = say(ctx.fw, {
        "mindspore": "With memory to spare, recompute fewer layers: MindFormers recompute_config"
                     " (recompute: false, select_recompute, or a per-stage layer count) until "
                     "memory is about 85-90 % used.",
        "torch_npu": "With memory to spare, recompute fewer layers: --recompute-granularity "
                     "selective, --recompute-num-layers, or no recompute, until memory is "
                     "about 85-90 % used.",
        "pytorch_gpu": "With memory to spare, checkpoint fewer layers (selective activation "
                       "checkpointing, --recompute-num-layers) until memory is about 85-90 % "
                       "used."})
    planned = _planned_saving_us(ctx)
    if planned is not None:  # the one figure of this change, as the Recompute tab says
        ev = (f"attention forward / backward tasks = {median(doing['ratio']):.2f} (1 without "
              f"recompute, 2 with full recompute): about {pct(share)} of the computation is "
              "recomputation; the Planner's model, calibrated on this profile, predicts "
              f"that turning it off saves {fmt_time(planned)} per step (the Recompute tab's "
              "figure)")
        us = planned
    if np.isfinite(frac) and frac <= 0.75:
        return [measured(ctx, "recompute_headroom", "recompute", us,
                         f"The {mode} recompute costs time while memory has room to spare",
                         ev + f"; peak memory {pct(frac)} of {fmt_bytes(cap)}", rec)]
    why = (f"peak memory {pct(frac)} of the device" if np.isfinite(frac)
           else "memory use unknown")
    return [unmeasured(
        "recompute", "recompute", f"The {mode} recompute costs {fmt_time(us)} per step",
        ev + f"; {why}: whether it can be turned off depends on the memory it frees",
        rec, severity="info")]


def _planned_saving_us(ctx: Context) -> float | None:
    """What turning recompute off saves per step by the Planner's model, µs: the saving of
    :func:`perfkit.plan.layout_saving_s` from the profiled layout to
    :func:`perfkit.plan.recompute_off`, with the calibration ``advise(..., planner=)``
    gives (the dashboard's, which its Recompute tab predicts with); None without one."""
    if ctx.planner is None or ctx.parallel is None or ctx.parallel.recompute == "none" \
            and not ctx.parallel.recompute_layers:
        return None
    calibration = ctx.planner()
    if calibration is None:
        return None
    from ..plan.changes import layout_saving_s, recompute_off
    return 1e6 * layout_saving_s(calibration, ctx.parallel, recompute_off(ctx.parallel))


def _scoped_recompute(ctx: Context) -> list[Finding]:
    """Recompute seen in MindSpore's operator names (``recompute_`` scopes), without IR."""
    sc = ctx.recompute_scopes()
    on = sc[sc["recompute"] != "none"] if not sc.empty else sc
    if on.empty:
        return []
    us = median(on["forward_scoped_us"])
    share = median(on["forward_scoped_share"])
    layers = str(on["scoped_layers"].iloc[0])
    where = (f"{'layers' if ',' in layers else 'layer'} {layers} of "
             f"{on['layers'].iloc[0]}" if layers else
             "cells of the model (the names carry no layer number)")
    used, cap, frac = ctx.memory_frac
    tasks = counted(int(median(on['forward_scoped_tasks'])), 'forward task')
    ev = (f"{tasks} per rank run under a "
          f"recompute_ scope (Cell.recompute() on {where}): {fmt_time(us)} per step, "
          f"{pct(share)} of the computation; recomputing them costs about that time again "
          f"per micro-batch")
    rec = say(ctx.fw, {
        "mindspore": "With memory to spare, recompute fewer layers: MindFormers recompute_config"
                     " (recompute: false, a per-stage layer count, or select_recompute of the "
                     "activations only) until memory is about 85-90 % used.",
        "any": "With memory to spare, recompute fewer layers until memory is about 85-90 % "
               "used."})
    if np.isfinite(frac) and frac <= 0.75:
        return [measured(ctx, "recompute_headroom", "recompute", us,
                         "Recompute costs time while memory has room to spare",
                         ev + f"; peak memory {pct(frac)} of {cap / 2**30:.0f} GiB", rec)]
    why = (f"peak memory {pct(frac)} of the device" if np.isfinite(frac)
           else "memory use unknown")
    return [unmeasured(
        "recompute", "recompute", f"Recompute is on ({where}), about {fmt_time(us)} per step",
        ev + f"; {why}: whether it can be turned off depends on the memory it frees",
        rec, severity="info")]


def _configured_recompute(ctx: Context, seen: pd.DataFrame) -> list[Finding]:
    """Recompute the configuration asks for but the profile does not show.

    The mode is the configured one (:class:`~perfkit.ParallelConfig`: ``recompute`` and the
    per-stage fully recomputed layers ``recompute_layers``, as MindFormers'
    ``recompute_config`` or Megatron-LM's ``--recompute-granularity`` give them): full
    recompute of every layer costs one more forward of each layer, a share of the
    computation that :func:`perfkit.calc.flops.hardware_flops` counts, and its advice is
    to recompute less than every layer; selective recompute costs little, and its advice
    is to turn it off only with memory to spare.

    ``seen`` is :func:`~perfkit.analysis.recompute_evidence`: empty when the profile has no
    attention tasks of both directions to count. When it counts them and finds no second
    forward, a configuration that recomputes layers in full is not what the profile ran
    (a full recompute reruns each recomputed layer's attention forward), and the evidence
    says so; selective recompute reruns no attention kernel of its own, so it cannot show.
    """
    par, model = ctx.parallel, ctx.model
    if par is None or model is None:
        return []
    full_layers = _full_layers(par, model)
    mode = par.recompute
    if mode == "none" and not full_layers:
        return []
    every = full_layers >= model.num_layers
    extra = hardware_flops(model, 1.0, recompute="full" if every else (
        "selective" if mode == "selective" else "none"),
        full_recompute_layers=None if every else full_layers) / model_flops(model, 1.0) - 1.0
    share = extra / (1.0 + extra)
    used, cap, frac = ctx.memory_frac
    mem = f"; peak memory {pct(frac)} of the device" if np.isfinite(frac) else ""
    s = ctx.steps
    comp = median(ctx.rank_median("computing_us")) if has_values(
        s, "computing_us") else float("nan")
    cost = (f", about {fmt_time(share * comp)} of the {fmt_time(comp)} of computation per "
            "step" if np.isfinite(comp) and comp > 0 else "")
    what, title, rec = _configured_words(ctx, mode, every, full_layers, model.num_layers,
                                         extra)
    return [unmeasured(
        "recompute", "recompute", title,
        f"configured {what}: about {pct(share)} of the computation is recomputation by "
        f"the calculator{cost} ({_what_the_profile_shows(seen, full_layers)}){mem}",
        rec, severity="info")]


def _what_the_profile_shows(seen: pd.DataFrame, full_layers: int) -> str:
    """Why the profile does not confirm the configured recompute (``seen``:
    :func:`~perfkit.analysis.recompute_evidence`)."""
    if seen.empty:
        return "the profile shows no attention kernels to count"
    ratio = f"attention forward / backward tasks = {median(seen['ratio']):.2f}"
    if full_layers:
        return (f"but the profile's {ratio}, as without recompute (2 with full recompute of "
                "every layer): check that this configuration is the one the profiled run "
                "used")
    return (f"the profile's {ratio}: selective recompute reruns no attention kernel, so "
            "the profile cannot show it")


def _full_layers(par: Any, model: Any) -> int:
    """Layers of the whole model the configuration recomputes in full."""
    return int(sum(par.full_recompute_layers_per_stage(model)))


def _configured_words(ctx: Context, mode: str, every: bool, full_layers: int,
                      layers: int, extra: float) -> tuple[str, str, str]:
    """What is configured, the finding's title and its advice, in the framework's terms
    (``extra``: the recomputed work over the model's own)."""
    more = f"Full recompute adds {pct(extra)} to the computation: with memory to spare, "
    if every:
        return ("full recompute of every layer (one more forward of each layer)",
                "The configuration recomputes every layer in full",
                more + say(ctx.fw, {
                    "mindspore": "recompute only what is needed (MindFormers recompute_config: "
                                 "recompute as a per-stage layer count, or recompute: False "
                                 "with select_recompute of the activations) until memory is "
                                 "about 85-90 % used.",
                    "torch_npu": "use --recompute-granularity selective, or "
                                 "--recompute-method block with fewer --recompute-num-layers, "
                                 "until memory is about 85-90 % used.",
                    "pytorch_gpu": "checkpoint fewer layers (--recompute-num-layers) or "
                                   "selectively (--recompute-granularity selective) until "
                                   "memory is about 85-90 % used.",
                    "any": "recompute fewer layers, or selectively, until memory is about "
                           "85-90 % used."}))
    if full_layers:
        rest = "selective recompute" if mode == "selective" else "no recompute"
        return (f"full recompute of {counted(full_layers, 'layer')} of {layers}, {rest} of "
                "the others",
                f"The configuration recomputes {counted(full_layers, 'layer')} in full",
                "With memory to spare, recompute fewer layers in full, stage by stage, "
                "until memory is about 85-90 % used.")
    return ("selective recompute (only cheap operators with large outputs are recomputed)",
            "The configuration recomputes selectively",
            "Selective recompute costs little; turn it off only with memory to spare (about "
            "85-90 % used at most), and check that its patterns recompute anything at all.")
