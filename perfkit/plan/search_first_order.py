"""The search's first-order step model: :func:`perfkit.calc.estimate_step`'s, evaluated with
numpy over all candidates at once (tests check that every row equals ``estimate_step`` for
the same configuration).

One efficiency for every GEMM, one for every link, each group's overlap a fixed share.
:func:`perfkit.plan.search` uses it with ``step_model="first-order"`` only, the first
approximation the lab teaches; by default the search, the Planner tab and the job's figures
all time a layout with the step model (:mod:`perfkit.plan.search_step`), the one
:func:`perfkit.plan.predict` uses.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..calc import ActivationModel, flops_per_token, layer_forward_flops
from ..calc.memory import full_precision, scheme_gradient_bytes
from ..calc.topology import effective_bandwidth, layout_groups
from ..specs import Hardware, ModelSpec
from .predict import run_types
from .search_parts import activation_bytes, max_stage_params, ranked, static_bytes

__all__ = ["evaluate_first_order"]


def evaluate_first_order(model: ModelSpec, hw: Hardware, c: dict[str, np.ndarray],
                         eff: float, ceff: float, overlaps: dict[str, float], overhead: float,
                         dtype: str | None, scheme: str, limit: float,
                         activation_model: ActivationModel | None, convention: str,
                         causal: bool, include_rejected: bool,
                         gradient_bytes: float | None = None) -> pd.DataFrame:
    """Every candidate of ``c`` (:func:`~perfkit.plan.candidates.candidate_columns`)
    through the first-order model, ranked (:func:`~perfkit.plan.search_parts.ranked`).

    ``step = compute + bubble + Σ_g comm_g · (1 − overlap_g) + overhead``, with compute
    the slowest stage's FLOPs over ``peak · eff``, the bubble ``(pp − 1)/(vpp · m)`` of
    it and each group's traffic (:func:`perfkit.calc.comm_volume`'s formulas) over its
    link's bandwidth times ``ceff``: :func:`perfkit.calc.estimate_step`'s terms; the
    arguments are :func:`perfkit.plan.search`'s.
    """
    # the run's type sizes memory and traffic; its peak, or the default one where the
    # hardware lists none for it (as plan.predict and plan.calibrate resolve it)
    run_dtype = dtype
    dtype, _tensor, _said = run_types(dtype, hw)
    peak = hw.peak(dtype)
    s, h, L = model.seq_length, model.hidden_size, model.num_layers
    num = {name: c[name].astype(float) for name in
           ("dp", "tp", "pp", "cp", "ep", "expert_tp", "vpp", "micro_batch_size",
            "num_micro_batches", "full_layers_per_stage")}
    dp, tp, pp, cp, ep = num["dp"], num["tp"], num["pp"], num["cp"], num["ep"]
    etp = np.where(num["expert_tp"] == 0, tp, num["expert_tp"])
    v, mbs, m, k = num["vpp"], num["micro_batch_size"], num["num_micro_batches"], \
        num["full_layers_per_stage"]
    sp = c["sequence_parallel"]
    rec = c["recompute"]
    n = L / pp
    am = ActivationModel() if activation_model is None else activation_model
    # as estimate_step: only attention-core selective recompute costs GEMM FLOPs
    recomputes_core = am.recomputes_attention_core
    selective = np.where(rec == 1, n - k, 0.0)
    tokens = mbs * m * s / cp  # tokens each rank runs per step
    compute = _compute_seconds(model, causal, n, k, selective, tp, tokens,
                               recomputes_core) / (peak * eff)
    bubble = (pp - 1) / (v * m) * compute
    # communication volumes (calc.comm_volume's formulas) and links (calc.estimate_step's)
    params = max_stage_params(model, c)
    dense_params, expert_params = params["dense"], params["experts"]
    fp32 = full_precision(run_dtype)  # as estimate_step: 4-byte activations and gradients
    bsh = mbs * (s / cp) * h * (4.0 if fp32 else 2.0)
    # the reduction's size as the profile records it, else the scheme's (estimate_step's)
    grad_bytes = float(gradient_bytes) if gradient_bytes is not None \
        else scheme_gradient_bytes(scheme, run_dtype)
    group = dp * cp
    expert_group = tp * cp * dp / (ep * etp)
    # an all-reduce of the gradients, or (optimizer sharding) their reduce-scatter and the
    # all-gather of the updated weights in their own size
    per_param = np.where(c["optimizer_shard"] > 1, grad_bytes + (4.0 if fp32 else 2.0),
                         2 * grad_bytes)
    dp_bytes = np.where(group > 1, (group - 1) / group * dense_params * per_param, 0.0)
    edp_bytes = np.where(expert_group > 1, (expert_group - 1) / np.maximum(expert_group, 1)
                         * expert_params * per_param, 0.0)
    tp_bytes = np.where(tp > 1, m * (4 * n + 2 * k) * bsh * 2 * (tp - 1) / tp, 0.0)
    pp_bytes = np.where(pp > 1, 2 * m * v * bsh / tp, 0.0)  # scatter/gather over tp
    if model.is_moe:
        moe0 = n - np.minimum(model.first_dense_layers, n)
        ep_count = (4 * moe0 + 2 * np.minimum(k, moe0)) * m
        ep_bytes = np.where(ep > 1, ep_count * model.moe_top_k * bsh / np.where(sp, tp, 1.0)
                            * (ep - 1) / ep, 0.0)
    else:
        ep_bytes = np.zeros(len(dp))
    kv_width = model.num_kv_heads * (model.qk_head_dim + model.value_head_dim)
    kv_bytes = mbs * s * kv_width / tp * 2.0
    cp_bytes = np.where(cp > 1, (3 * n + k) * m * kv_bytes * (cp - 1) / cp, 0.0)
    # every group at its shape on the node topology (calc.topology), as estimate_step
    node = hw.topology
    shapes = layout_groups({"dp": dp, "tp": tp, "pp": pp, "cp": cp, "ep": ep,
                            "expert_tp": etp}, node.devices_per_node, stage="interior")

    def link(group: str, collective: str) -> np.ndarray:
        n, r = shapes[group]
        return effective_bandwidth(collective, n, r, node.intra_bandwidth * ceff,
                                   node.nic_bandwidth_per_device * ceff)

    times = {"tp": tp_bytes / link("tp", "all-gather"),
             "dp": dp_bytes / link("dp", "all-gather")
             + edp_bytes / link("edp", "all-gather"),
             "pp": pp_bytes / link("pp", "p2p"), "ep": ep_bytes / link("ep", "all-to-all"),
             "cp": cp_bytes / link("cp", "all-gather")}
    exposed = sum(times[key] * (1 - overlaps[key]) for key in times)
    step = compute + bubble + exposed + overhead
    static = static_bytes(model, c, scheme, m, pp, run_dtype, gradient_bytes)
    activation = activation_bytes(model, c, activation_model, convention, n, k, v)
    per_device = dp * mbs * m * s / (step * dp * tp * pp * cp)
    results = {"compute_s": compute, "bubble_s": bubble, "tp_comm_s": times["tp"],
               "dp_comm_s": times["dp"], "pp_comm_s": times["pp"], "ep_comm_s": times["ep"],
               "cp_comm_s": times["cp"], "exposed_comm_s": exposed,
               "overhead_s": np.full(len(dp), overhead), "step_s": step,
               "tokens_per_second_per_device": per_device,
               "mfu": flops_per_token(model, causal) * per_device / peak}
    return ranked(c, results, static, activation, limit, include_rejected)


def _compute_seconds(model: ModelSpec, causal: bool, n: np.ndarray, k: np.ndarray,
                     selective: np.ndarray, tp: np.ndarray, tokens: np.ndarray,
                     recomputes_core: bool) -> np.ndarray:
    """Per-device FLOPs of the slowest stage (estimate_step's ``_stage_flops``)."""
    logits = 2.0 * model.hidden_size * model.vocab_size
    if not model.is_moe or not model.first_dense_layers:
        parts = layer_forward_flops(model, causal)
        core = parts["core"] if recomputes_core else 0.0
        per_token = 3 * n * parts["total"] + k * parts["total"] + selective * core + 3 * logits
        return tokens * per_token / tp
    dense = layer_forward_flops(model, causal, layer="dense")
    moe = layer_forward_flops(model, causal, layer="moe")
    fd, L = model.first_dense_layers, model.num_layers

    def stage(nd: np.ndarray, last: np.ndarray) -> np.ndarray:
        nm = n - nd
        work = nd * dense["total"] + nm * moe["total"]
        core = (nd * dense["core"] + nm * moe["core"]) / n if recomputes_core else 0.0
        per_token = (3 + k / n) * work + selective * core + np.where(last, 3 * logits, 0.0)
        return tokens * per_token / tp

    first = stage(np.minimum(fd, n), n == L)
    last = stage(np.maximum(0.0, fd - (L - n)), np.ones(len(n), dtype=bool))
    return np.maximum(first, last)

