"""Op-level selective recompute: the time its reruns cost and the bytes it does not keep.

``ParallelConfig.recompute_ops`` (:mod:`perfkit.specs.recompute_ops`) names the ops of a
layer whose forward reruns in the backward. :func:`op_recompute_seconds` prices that rerun
from the same kernels as the layer's forward (:mod:`perfkit.calc.timing_kernels`);
:func:`op_dropped_terms` gives the activation bytes those ops no longer keep, from the
per-tensor terms of Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models", §4.1 and Table 2 (per layer, in bytes per ``s·b·h``; ``e`` the
element bytes / 2, ``q`` the GQA ratio, ``f = ffn/h``, ``n_b`` the norm bytes):

==================  ==========================================  ================
op                  tensor it makes that a backward reads       bytes / ``sbh``
==================  ==========================================  ================
``attn_norm``       its output, the QKV GEMM's input             ``2e`` (kept whole)
``q``/``k``/``v``   Q, K, V (``qkv``: all three)                 ``2e``, ``2e/q``, ``2e/q``
``rope``            rotated Q and K when rotary is unfused       ``2e(a+g)d/h``
``core``            softmax, dropout mask and output (``s²``)    ``(2e + 1 + 2e)·as/h``
                    or, fused, the softmax statistics            ``4a/h``
``attn_residual``   the MLP norm's input, the dropout mask       ``n_b + 1`` (whole)
``mlp_norm``        its output, the MLP input                    ``2e`` (whole)
``fc1``             gate and up (GPT: the activation input)      ``4fe`` (GPT ``2fe``)
``act``             SiLU output and product (GPT: GeLU output)   ``4fe`` (GPT ``2fe``)
``mlp_residual``    the MLP dropout mask                         ``1`` (whole)
==================  ==========================================  ================

``out_proj``, ``fc2``, ``router`` and ``permute`` make no tensor the table counts (their
outputs feed a residual add, which keeps nothing): recomputing them costs time and saves
no memory. A recomputed op's own inputs stay kept unless another recomputed op makes
them (torch's op-level selective checkpointing: an op either keeps its outputs or reruns;
MindSpore's ``select_recompute`` and Megatron's ``CheckpointWithoutOutput`` alike). The
layer's input (the first norm's) and the attention core's output (the projection input,
``2e·a·d_v/h``) are always kept: every framework policy keeps them (torchtitan saves the
SDPA output, Megatron's ``core_attn`` checkpoint returns it, Korthikanti's selective
recompute keeps it). Under the printed table (``accounting="table"``) the same terms are
taken for its GPT layer (``e = 1``, ``q = 1``, ``f = 4``, dropout, ``n_b = 2``): they add
up to ``34 + 5as/h`` with the layer input's 2 and the projection input's 2.

The time is the forward of exactly those ops (their kernels timed as the forward's, the
FP8 casts of their GEMMs included), per layer and micro-batch; the tensor-parallel
collectives they end or start repeat too (:func:`op_recompute_tp_halves`), the
context-parallel K/V ring with ``core`` and the expert all-to-alls with ``permute``
(:func:`perfkit.calc.timing.step_times`, as for a full recompute). ``q``, ``k``,
``v`` and ``gate``, ``up`` are timed as separate GEMMs, as torchtitan runs them.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

from ..specs import Hardware, ModelSpec
from .activation_model import ActivationModel
from .power_limit import sustained_peak
from .rates import Rates
from .recompute_ops_memory import _check_ops, op_dropped_terms
from .timing_kernels import _gemm, _layer_ops, _Op, _seconds, fp8_casts
from .timing_layer import _half_peak

__all__ = ["OP_TAGS", "op_dropped_terms", "op_recompute_seconds", "op_recompute_tp_halves",
           "op_recompute_tp_gathers"]

#: The kernel model's tag of each op name (:func:`perfkit.calc.timing_kernels._layer_ops`).
OP_TAGS = {"attn_norm": "attn_norm", "qkv": "qkv", "rope": "rope", "core": "core",
           "out_proj": "proj", "attn_residual": "add", "mlp_norm": "mlp_norm",
           "router": "router", "permute": "permute", "fc1": "mlp_in", "act": "act",
           "fc2": "mlp_out", "mlp_residual": "mlp_residual"}


def op_recompute_tp_halves(ops: tuple[str, ...], tp: int, sequence_parallel: bool) -> float:
    """Tensor-parallel collective halves (all-gather or reduce-scatter, the unit of
    :func:`perfkit.calc.timing.step_times`) the rerun repeats, per layer and micro-batch.

    ``out_proj`` and ``fc2`` end in an all-reduce (2 halves) or, with sequence
    parallelism, a reduce-scatter (1); with sequence parallelism the Q/K/V and the MLP
    input GEMMs start with an all-gather (1 each). 0 without tensor parallelism.
    """
    if tp <= 1:
        return 0.0
    chosen = set(ops)
    ends = sum(1 for op in ("out_proj", "fc2") if op in chosen) * (1.0 if sequence_parallel
                                                                   else 2.0)
    return ends + op_recompute_tp_gathers(ops, tp, sequence_parallel)


def op_recompute_tp_gathers(ops: tuple[str, ...], tp: int, sequence_parallel: bool) -> float:
    """Of :func:`op_recompute_tp_halves`, the all-gathers: with sequence parallelism, one
    before the Q/K/V GEMMs and one before the MLP input GEMMs, where the rerun holds
    them; 0 otherwise."""
    if tp <= 1 or not sequence_parallel:
        return 0.0
    chosen = set(ops)
    return float(bool(chosen & {"qkv", "q", "k", "v"})) \
        + float(bool(chosen & {"fc1", "gate", "up"}))


def _selected(fwd: list[_Op], model: ModelSpec, b: int, tp: int, cp: int,
              ops: tuple[str, ...]) -> list[_Op]:
    """The forward ops of ``ops`` (``q``/``k``/``v`` as their own GEMMs, ``gate``/``up``
    as half of the MLP input GEMMs' calls each)."""
    tags = {OP_TAGS[op] for op in ops if op in OP_TAGS}
    # a fused kernel's tag names each op it holds ("add+mlp_norm"): it reruns when one does
    out = [o for o in fwd if tags.intersection(o.tag.split("+"))]
    n = b * model.seq_length / cp
    h = model.hidden_size
    heads = {"q": model.num_attention_heads / tp * model.qk_head_dim,
             "k": max(1.0, model.num_kv_heads / tp) * model.qk_head_dim,
             "v": max(1.0, model.num_kv_heads / tp) * model.value_head_dim}
    out += [_gemm(n, h, heads[op], "qkv") for op in ("q", "k", "v") if op in ops]
    for part in ("gate", "up"):
        if part in ops:
            out += [dataclasses.replace(o, calls=o.calls / 2) for o in fwd
                    if o.tag == "mlp_in"]
    return out


def op_recompute_seconds(model: ModelSpec, hardware: Hardware, rates: Rates,
                         ops: tuple[str, ...], micro_batch_size: int = 1, tp: int = 1,
                         sequence_parallel: bool = False, cp: int = 1, ep: int = 1,
                         expert_tp: int | None = None,
                         activation_model: ActivationModel | None = None,
                         dtype: str | None = None) -> tuple[float, float]:
    """Seconds and kernels of rerunning ``ops``' forward, one layer and micro-batch.

    ``Σ_ops calls·t(op)`` over the layer's forward kernels of those ops (the GEMM size
    curve or roofline, fused attention on its curve, memory-bound kernels by bytes:
    :func:`perfkit.calc.timing_kernels._seconds`, at the forward's rates), weighted by
    the share of MoE and dense layers as :func:`perfkit.calc.timing_layer.layer_costs`.
    """
    am = ActivationModel() if activation_model is None else activation_model
    _check_ops(model, tuple(ops))
    rates = rates.resolved(hardware.name, dtype)
    return _op_seconds(model, hardware, rates, tuple(ops), int(micro_batch_size), int(tp),
                       bool(sequence_parallel), int(cp), int(ep), int(expert_tp or tp), am,
                       dtype)


@lru_cache(maxsize=1024)
def _op_seconds(model: ModelSpec, hardware: Hardware, rates: Rates, ops: tuple[str, ...],
                b: int, tp: int, sp: bool, cp: int, ep: int, etp: int, am: ActivationModel,
                dtype: str | None) -> tuple[float, float]:
    peak, bw = sustained_peak(hardware, dtype), hardware.memory_bandwidth
    core = _half_peak(hardware) if dtype == "fp8" else None
    dropout = am.dropout if am.dropout is not None else model.mlp != "gated"
    kinds = [(False, 1.0)]
    if model.is_moe:
        share = 1.0 - model.first_dense_layers / model.num_layers
        kinds = [(True, share), (False, 1.0 - share)]
    total = kernels = 0.0
    for moe, weight in kinds:
        if weight <= 0:
            continue
        fwd, _ = _layer_ops(model, b, tp, sp, cp, ep, etp, am.flash_attention, dropout,
                            am.norm_bytes, moe, rates.elementwise_kernels)
        chosen = _selected(fwd, model, b, tp, cp, ops)
        if dtype == "fp8":
            chosen = chosen + fp8_casts(chosen, False)
        t, k = _seconds(chosen, peak, bw, rates, core_peak=core, hardware_name=hardware.name,
                        dtype=dtype)
        total += weight * t
        kernels += weight * k
    return total, kernels
