"""The operator fit: the GEMM size curve, attention, memory-bound kernels and the optimizer
from a profile's operator rows, and the recompute style its MLP projection calls show."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...calc.attention_rate import (
    attention_efficiency,
    call_lengths,
    resolve_implementation,
)
from ...calc.layout_rows import stage_params
from ...calc.power_limit import sustained_peak
from ...calc.rates import RECOMPUTE_STYLE_MIN_SHARE, Rates
from ...format import counted
from .result import CalibratedJob

__all__: list[str] = []  # private parts of perfkit.plan.calibrate


_VECTOR_KINDS = ("elementwise", "norm", "reduction", "activation", "softmax")


def _shape_dims(text: Any) -> list[tuple[int, ...]]:
    if not isinstance(text, str):
        return []
    return [tuple(int(x) for x in re.findall(r"\d+", part)) for part in text.split(";")]


def _fit_line(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float] | None:
    """Weighted least squares ``y = a·x + c`` with ``a > 0``, ``c >= 0``; None if degenerate."""
    if len(x) < 2 or x.max() < 1.5 * x.min():
        return None
    sw = w.sum()
    mx, my = (w * x).sum() / sw, (w * y).sum() / sw
    var = (w * (x - mx) ** 2).sum()
    if var <= 0:
        return None
    a = (w * (x - mx) * (y - my)).sum() / var
    c = my - a * mx
    if a <= 0:
        return None
    if c < 0:  # through the origin; times below their traffic's can still make it < 0
        a, c = (w * x * y).sum() / (w * x * x).sum(), 0.0
    return (a, c) if a > 0 else None


_BACKWARD = re.compile(r"bwd|backward|grad", re.IGNORECASE)


def _curve_seconds(att: pd.DataFrame, job: CalibratedJob, implementation: str) -> np.ndarray:
    """Each attention row's time on the published curve at attention_efficiency 1
    (:func:`perfkit.calc.attention_rate.attention_efficiency`): the job's sequence after
    its context-parallel split, its head dimension, causal, the pass read from the
    kernel's name (``flash_bwd``, ``FlashAttentionScoreGrad``, ``..._backward``)."""
    hw, model = job.hardware, job.model
    peak = next((sustained_peak(hw, d) for d in ("bf16", "fp16") if d in hw.peak_flops),
                sustained_peak(hw))
    parts = call_lengths(model.seq_length, int(job.parallel.cp), True)
    # the micro-batch times the rank's heads: the pairs a call holds (occupancy)
    pairs = float(job.parallel.micro_batch_size * model.num_attention_heads
                  / job.parallel.tp)
    out = []
    for name, flops in zip(att["name"].astype(str), att["flops"].astype(float), strict=True):
        backward = bool(_BACKWARD.search(name))
        out.append(sum(share * flops / (peak * attention_efficiency(
            lq, lkv, model.qk_head_dim, causal, backward, implementation, hw.name, pairs,
            hw.multiprocessors))
            for share, lq, lkv, causal in parts))
    return np.array(out)


def _fit_operators(eff: pd.DataFrame, job: CalibratedJob, rates: Rates,
                   terms: list[tuple[str, float, str]], notes: list[str]) -> Rates:
    """GEMM curve, attention, memory-bound and optimizer rates from operator rows."""
    hw = job.hardware
    peak, bw = sustained_peak(hw, job.dtype), hw.memory_bandwidth
    kinds = eff["kind"].astype(TEXT).fillna("")
    mean_s = eff["mean_us"].astype(float) * 1e-6
    weight = eff["total_us"].astype(float)
    changes: dict[str, Any] = {}
    vec = eff[kinds.isin(_VECTOR_KINDS) & (eff["bytes"].astype(float) > 0)]
    if len(vec):
        fit = _fit_line(vec["bytes"].to_numpy(float), mean_s[vec.index].to_numpy(),
                        weight[vec.index].to_numpy())
        if fit is not None:
            a, c = fit
            changes["memory_efficiency"] = min(1.0, 1.0 / (a * bw))
            changes["memory_half_bytes"] = c / a
        else:
            total_b = (vec["bytes"] * vec["count"]).sum() + rates.memory_half_bytes \
                * vec["count"].sum()
            changes["memory_efficiency"] = min(1.0, total_b / bw / (
                (mean_s[vec.index] * vec["count"]).sum()))
        terms.append(("memory_efficiency", changes["memory_efficiency"],
                      f"{len(vec)} memory-bound operator shapes"))
    e_mem = changes.get("memory_efficiency", rates.memory_efficiency)
    gemm = eff[(kinds == "gemm") & (eff["flops"].astype(float) > 0)]
    if len(gemm):
        flops = gemm["flops"].to_numpy(float)
        memory = gemm["bytes"].to_numpy(float) / (e_mem * bw) if rates.gemm_memory == "sum" \
            else 0.0
        t = mean_s[gemm.index].to_numpy() - memory
        fit = _fit_line(flops, t, weight[gemm.index].to_numpy())
        if fit is not None:
            a, c = fit
            changes["gemm_efficiency"] = min(1.0, 1.0 / (a * peak))
            changes["gemm_half_flops"] = c / a
            how = f"size curve fitted to {len(gemm)} GEMM shapes"
        else:
            count = gemm["count"].to_numpy(float)
            work = ((flops + rates.gemm_half_flops) * count).sum()
            spent = (t * count).sum()
            how = (f"{counted(len(gemm), 'GEMM shape')} of similar size: e fitted, F½ kept at "
                   f"{rates.gemm_half_flops / 1e9:.3g} GFLOP")
            if spent > 0:
                changes["gemm_efficiency"] = min(1.0, work / peak / spent)
            else:  # the kernels take less than their traffic alone on this device
                notes.append(f"the profile's {counted(len(gemm), 'GEMM shape')} take less "
                             "time than their operands' traffic at the memory rate its "
                             f"memory-bound operators show on {hw.name}: no GEMM rate can be "
                             "fitted (was the run on other hardware?); the GEMM rates keep "
                             "their defaults")
        if "gemm_efficiency" in changes:
            # the run's own GEMM kernels give the curve: measured, not the family's surface
            changes["gemm_model"] = "size"
            terms.append(("gemm_efficiency", changes["gemm_efficiency"], how))
        if "gemm_half_flops" in changes:
            terms.append(("gemm_half_flops", changes["gemm_half_flops"], how))
    e_gemm = changes.get("gemm_efficiency", rates.gemm_efficiency)
    half = changes.get("gemm_half_flops", rates.gemm_half_flops)
    att = eff[(kinds == "attention") & (eff["flops"].astype(float) > 0)]
    if len(att):
        count = att["count"].to_numpy(float)
        memory = att["bytes"].to_numpy(float) / (e_mem * bw) if rates.gemm_memory == "sum" \
            else 0.0
        if rates.attention_implementation == "gemm":
            spent = ((mean_s[att.index].to_numpy() - memory) * count).sum()
            ideal = ((att["flops"].to_numpy(float) + half) / (e_gemm * peak) * count).sum()
            against = "the GEMM curve"
        else:
            spent = (mean_s[att.index].to_numpy() * count).sum()
            ideal = (_curve_seconds(att, job, rates.attention_implementation) * count).sum()
            impl = resolve_implementation(rates.attention_implementation, job.hardware.name)
            against = f"the published {impl} curve"
        changes["attention_efficiency"] = float(np.clip(ideal / spent, 0.05, 2.0))
        terms.append(("attention_efficiency", changes["attention_efficiency"],
                      f"{len(att)} attention operator shapes against {against}"))
    adam = eff[eff["name"].astype(TEXT).str.contains("adam", case=False, na=False)]
    if len(adam):
        params = stage_params(job.model, job.parallel, job.stage_layers)
        updated = float(params["dense"][0] + params["experts"][0]) \
            / max(job.parallel.optimizer_shard, 1)
        seconds = float(adam["per_step_us"].sum()) * 1e-6
        per_param = (seconds * e_mem * bw - changes.get("memory_half_bytes",
                                                         rates.memory_half_bytes)) / updated
        if per_param > 0:
            changes["optimizer_bytes_per_param"] = per_param
            terms.append(("optimizer_bytes_per_param", per_param,
                          f"optimizer kernels: {seconds * 1e3:.3g} ms per step"))
    if not changes:
        notes.append("the profile has no operator rows with FLOPs or bytes: compute rates "
                     "kept at their defaults")
    return rates.replace(**changes)


def _infer_recompute(eff: pd.DataFrame, job: CalibratedJob, rates: Rates,
                     notes: list[str]) -> Rates:
    """The recompute style a fully recomputed run shows in its MLP projection calls.

    Only the matrix products count (``kind == "gemm"`` where the table has kinds): the
    element-wise copies of the projection weights (an autocast run's bf16 casts, one per
    weight and forward, again in a recomputed forward) carry the same two shapes and
    would read as projection calls. On the H100 Llama with ``torch.utils.checkpoint``
    (``tests/data/kineto_llama_layouts_h100``, layout ``b``) the casts made the ratio 1.12
    ("all"); its products alone give 48 / 80 = 0.6, "needed", which its kernels show: a
    recomputed layer reruns 5 of its 6 forward products and attention kernels, not the
    MLP down projection (non-reentrant checkpoint stops once the backward's tensors are
    recomputed)."""
    full = sum(job.parallel.full_recompute_layers_per_stage(job.model))
    share = full / job.model.num_layers
    if share >= RECOMPUTE_STYLE_MIN_SHARE:
        tp = job.parallel.tp
        h = job.model.hidden_size
        f = (job.model.moe_ffn_hidden_size if job.model.is_moe else job.model.ffn_hidden_size)
        f_t = f // tp
        if "kind" in eff.columns:
            eff = eff[eff["kind"].astype(TEXT).fillna("gemm") == "gemm"]
        out_n = in_n = 0.0
        for dims, count in zip(eff["input_shapes"].map(_shape_dims), eff["count"],
                               strict=True):
            if len(dims) >= 2 and len(dims[0]) == 2 and len(dims[1]) == 2:
                k, n = dims[1]
                if (k, n) == (f_t, h):
                    out_n += count
                elif (k, n) == (h, f_t):
                    in_n += count
        g = 3 if job.model.mlp == "gated" else 2
        if in_n > 0 and out_n > 0:
            ratio = out_n / in_n
            # out = g + share·a, in = g + (g−1)·share per layer and micro-batch
            a = (ratio * (g + (g - 1) * share) - g) / share
            style = "all" if a > 0.5 else "needed"
            if style != rates.recompute_style:
                rates = rates.replace(recompute_style=style)
            what = "the whole forward" if style == "all" else "only what the backward needs"
            notes.append(f"full recompute reruns {what} (MLP output/input projection calls "
                         f"{ratio:.2f})")
    return rates
