"""One layer's and the stage ends' times per micro-batch (:func:`layer_costs`).

:class:`LayerCosts` holds the times of one layer's passes (forward, backward, each kind of
recompute, the attention core) and of the embedding and the output head, with the message
sizes the collectives are sized from; :func:`layer_costs` computes them from the kernels of
:mod:`perfkit.calc.timing_kernels`, once per distinct key (cached).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..specs import Hardware, ModelSpec
from .activation import ActivationModel
from .power_limit import sustained_peak
from .rates import Rates
from .timing_kernels import _head_ops, _layer_ops, _seconds, fp8_casts

__all__ = ["LayerCosts", "layer_costs"]


@dataclass(frozen=True)
class LayerCosts:
    """Per micro-batch, one rank: times (s) of one layer's passes and of the stage ends.

    ``fwd``/``bwd`` forward and backward compute; ``rec_all``/``rec_needed`` a full
    recompute in either style; ``sel_core``/``sel_act`` the selective recompute of the
    attention core / MLP activation; ``core_fwd``/``core_bwd`` the attention core (what
    context parallelism overlaps); ``emb``/``head`` the first stage's embedding and the
    last stage's output head (forward + backward); ``kernels_*`` kernel counts;
    ``act_bytes`` the ``b·s/cp·h`` 16-bit activation (tensor-parallel collectives and
    pipeline messages are sized from it); ``kv_bytes`` the K and V of the whole
    sequence on one rank (context parallelism); ``a2a_bytes`` one expert all-to-all
    message; ``moe_share`` the share of layers that are MoE; ``wgrad``/``kernels_wgrad``
    the backward's weight-gradient GEMMs (half of each weight GEMM's backward calls; the
    attention core has no weights), what a frozen base skips.
    """

    fwd: float
    bwd: float
    rec_all: float
    rec_needed: float
    sel_core: float
    sel_act: float
    core_fwd: float
    core_bwd: float
    emb: float
    head: float
    kernels_fwd: float
    kernels_bwd: float
    kernels_rec_all: float
    kernels_rec_needed: float
    kernels_head: float
    act_bytes: float
    kv_bytes: float
    a2a_bytes: float
    moe_share: float
    wgrad: float = 0.0
    kernels_wgrad: float = 0.0


def layer_costs(model: ModelSpec, hardware: Hardware, rates: Rates, micro_batch_size: int = 1,
                tp: int = 1, sequence_parallel: bool = False, cp: int = 1, ep: int = 1,
                expert_tp: int | None = None, activation_model: ActivationModel | None = None,
                dtype: str | None = None) -> LayerCosts:
    """Per-layer and per-stage-end times of one micro-batch on one rank (see module doc).

    ``activation_model`` says whether attention is fused (``flash_attention``), whether
    there is dropout and how the norms store their input (``norm_bytes``: 4 means a
    Cast to fp32 before the norm, as MindFormers does); default ``ActivationModel()``:
    a Megatron GPT layer (unfused attention, dropout, 16-bit norms). The backward's
    kernels (and the stage ends' backward ops) are timed at ``rates.backward_rates()``:
    their memory-bound kernels at ``backward_vector_efficiency``, a recompute's forward
    at the forward's.
    """
    am = ActivationModel() if activation_model is None else activation_model
    rates = rates.resolved(hardware.name, dtype)  # the device's size-curve ceiling if unset
    return _layer_costs(model, hardware, rates, int(micro_batch_size), int(tp),
                        bool(sequence_parallel), int(cp), int(ep),
                        int(expert_tp or tp), am, dtype)


@lru_cache(maxsize=4096)
def _layer_costs(model: ModelSpec, hardware: Hardware, rates: Rates, b: int, tp: int,
                 sp: bool, cp: int, ep: int, etp: int, am: ActivationModel,
                 dtype: str | None) -> LayerCosts:
    # compute at what the device sustains under its power limit (datasheet when unset)
    peak, bw = sustained_peak(hardware, dtype), hardware.memory_bandwidth
    fp8 = dtype == "fp8"
    # FP8 runs its GEMMs at the FP8 peak; attention stays 16-bit (Transformer Engine's
    # FP8 recipes: DotProductAttention in bf16), element-wise work is priced by bytes
    core = _half_peak(hardware) if fp8 else None
    # the device the GEMM surface and the fused attention curve (and its occupancy's S:
    # None, the datasheet's count by name) are read for
    device = {"hardware_name": hardware.name, "multiprocessors": hardware.multiprocessors,
              "dtype": dtype}
    dropout = am.dropout if am.dropout is not None else model.mlp != "gated"
    flash = am.flash_attention
    back = rates.backward_rates()  # the backward's memory-bound kernels at their own rate
    kinds = [(False, 1.0)]
    moe_share = 0.0
    if model.is_moe:
        moe_share = 1.0 - model.first_dense_layers / model.num_layers
        kinds = [(True, moe_share), (False, 1.0 - moe_share)]
    totals = dict.fromkeys(("fwd", "bwd", "rec_all", "rec_needed", "sel_core", "sel_act",
                            "core_fwd", "core_bwd", "kf", "kb", "kra", "krn", "wg",
                            "kwg"), 0.0)
    for moe, weight in kinds:
        if weight <= 0:
            continue
        fwd, bwd = _layer_ops(model, b, tp, sp, cp, ep, etp, flash, dropout, am.norm_bytes,
                              moe, rates.elementwise_kernels)
        if fp8:
            fwd, bwd = fwd + fp8_casts(fwd, False), bwd + fp8_casts(bwd, True)
        f, kf = _seconds(fwd, peak, bw, rates, core_peak=core, **device)
        bk, kb = _seconds(bwd, peak, bw, back, core_peak=core, **device)
        rn, krn = _seconds(fwd, peak, bw, rates, skip=("mlp_out", "mlp_residual"), core_peak=core,
                           **device)
        sc, _ = _seconds(fwd, peak, bw, rates, only=("core",), core_peak=core,
                         **device)
        sa, _ = _seconds(fwd, peak, bw, rates, only=("act",))
        cb, _ = _seconds(bwd, peak, bw, back, only=("core",), core_peak=core,
                         **device)
        weights = [o for o in bwd if o.tag != "core" and o.grad == "weight"]
        wg, kwg = _seconds(weights, peak, bw, back, **device)
        for key, value in (("fwd", f), ("bwd", bk), ("rec_all", f), ("rec_needed", rn),
                           ("sel_core", sc), ("sel_act", sa), ("core_fwd", sc),
                           ("core_bwd", cb), ("kf", kf), ("kb", kb), ("kra", kf),
                           ("krn", krn), ("wg", wg), ("kwg", kwg)):
            totals[key] += weight * value
    emb_ops, head_ops = _head_ops(model, b, tp, sp, cp, am.norm_bytes,
                                  rates.elementwise_kernels)
    emb = _seconds(emb_ops, peak, bw, rates, skip=("backward",))[0] \
        + _seconds(emb_ops, peak, bw, back, only=("backward",))[0]
    head, kh = _seconds(head_ops, peak, bw, rates, skip=("backward",), **device)
    head_b, kh_b = _seconds(head_ops, peak, bw, back, only=("backward",), **device)
    head, kh = head + head_b, kh + kh_b
    n = b * model.seq_length / cp
    act_bytes = n * model.hidden_size * 2.0
    kv_bytes = b * model.seq_length * model.num_kv_heads \
        * (model.qk_head_dim + model.value_head_dim) / tp * 2.0
    a2a = model.moe_top_k * act_bytes / (tp if sp else 1) if model.is_moe else 0.0
    return LayerCosts(totals["fwd"], totals["bwd"], totals["rec_all"], totals["rec_needed"],
                      totals["sel_core"], totals["sel_act"], totals["core_fwd"],
                      totals["core_bwd"], emb, head, totals["kf"], totals["kb"],
                      totals["kra"], totals["krn"], kh, act_bytes, kv_bytes, a2a, moe_share,
                      totals["wg"], totals["kwg"])


def _half_peak(hardware: Hardware) -> float:
    """The 16-bit peak an FP8 run's attention runs at: bf16, else fp16, else the
    hardware's default."""
    for dtype in ("bf16", "fp16"):
        if dtype in hardware.peak_flops:
            return sustained_peak(hardware, dtype)
    return sustained_peak(hardware)
