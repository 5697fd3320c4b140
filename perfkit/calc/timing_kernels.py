"""The kernels of one layer's passes and their times, for :mod:`perfkit.calc.timing`.

:func:`gemm_seconds` times a GEMM (or a fused attention kernel) on the size curve or at the
memory roofline, :func:`memory_seconds` a memory-bound kernel; :func:`_layer_ops` lists the
kernels of one layer's forward and backward for one micro-batch on one rank (GEMMs split
``tp`` ways, the attention core fused or not, the memory-bound kernels from their bytes),
:func:`_head_ops` those of the embedding and the output head, and :func:`_seconds` sums
their times. The formulas and their sources are in :mod:`perfkit.calc.timing`'s docstring.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache

from ..specs import ModelSpec
from .attention_rate import attention_efficiency, call_lengths, ring_bookkeeping
from .elementwise import backward_kernels, forward_kernels, norm_kernels, weight_casts
from .flops import layer_forward_flops
from .gemm_ceiling import GEMM_EFFICIENCY_DEFAULT
from .gemm_rate import GemmSurface, surface_for
from .rates import Rates

__all__ = ["gemm_seconds", "memory_seconds", "attention_seconds", "fp8_casts",
           "FP8_CAST_BYTES"]


_FLASH_BACKWARD = 2.5  # FlashAttention backward / forward FLOPs (PyTorch flop_counter)


def gemm_seconds(flops: float, nbytes: float, peak: float, bandwidth: float,
                 rates: Rates, attention: bool = False, shape: tuple = (),
                 surface: GemmSurface | None = None) -> float:
    """One GEMM (or fused attention) call: on its measured shape surface, or the size curve
    and the memory roofline.

    With a ``surface`` (:func:`perfkit.calc.gemm_rate.surface_for`) and the call's
    ``shape`` ``(M, N, K)``: :meth:`GemmSurface.seconds
    <perfkit.calc.gemm_rate.GemmSurface.seconds>` with its rate scaled by
    ``gemm_surface_scale`` (1 at the default: as measured); a call without a shape
    there is the square product of its FLOPs. Otherwise the size curve:
    ``(F + F½)/(e·peak) + B/(e_mem·bandwidth)`` (``gemm_memory="max"``: the larger of the
    two) with ``e = gemm_efficiency`` (times ``attention_efficiency`` for attention priced
    as a GEMM; unset: :data:`~perfkit.calc.gemm_ceiling.GEMM_EFFICIENCY_DEFAULT`, no device
    being known here — :meth:`Rates.resolved <perfkit.calc.rates.Rates.resolved>` gives
    the device's own).
    """
    if surface is not None and not attention:
        m, n, k = shape if shape else (max(flops / 2.0, 1.0) ** (1.0 / 3.0),) * 3
        return surface.seconds(m, n, k, peak, bandwidth, rates.gemm_surface_scale)
    e_max = GEMM_EFFICIENCY_DEFAULT if rates.gemm_efficiency is None else rates.gemm_efficiency
    e = e_max * (rates.attention_efficiency if attention else 1.0)
    compute = (flops + rates.gemm_half_flops) / (e * peak)
    memory = nbytes / (rates.memory_efficiency * bandwidth)
    return compute + memory if rates.gemm_memory == "sum" else max(compute, memory)


def attention_seconds(flops: float, shape: tuple, peak: float, rates: Rates,
                      hardware_name: str, multiprocessors: int | None = None) -> float:
    """One fused attention call on its published curve (:mod:`perfkit.calc.attention_rate`).

    ``Σ_parts share·F / (e(L, d, causal, pass, implementation, pairs) ·
    attention_efficiency · peak)``; ``shape`` is ``(parts, head_dim, backward[, pairs])``
    with ``parts`` the ``(share, L_q, L_kv, causal)`` of
    :func:`~perfkit.calc.attention_rate.call_lengths` and ``pairs`` the call's (batch,
    head) pairs (:mod:`perfkit.calc.attention_occupancy`), ``peak`` the 16-bit peak (an
    FP8 run's attention stays 16-bit).
    """
    parts, head_dim, backward = shape[:3]
    pairs = shape[3] if len(shape) > 3 else None
    total = 0.0
    for share, lq, lkv, causal in parts:
        e = _efficiency(lq, lkv, head_dim, causal, backward, rates.attention_implementation,
                        hardware_name, pairs, multiprocessors)
        total += share * flops / (e * rates.attention_efficiency * peak)
    return total


@lru_cache(maxsize=4096)
def _efficiency(lq: float, lkv: float, d: float, causal: bool, backward: bool, impl: str,
                hardware_name: str, pairs: float | None = None,
                multiprocessors: int | None = None) -> float:
    return attention_efficiency(lq, lkv, d, causal, backward, impl, hardware_name, pairs,
                                multiprocessors)


def memory_seconds(nbytes: float, bandwidth: float, rates: Rates) -> float:
    """One memory-bound call: ``(B + B½)/(e_vec·bandwidth)``, ``e_vec`` the rates'
    :attr:`~perfkit.calc.rates.Rates.vector_efficiency` (``memory_efficiency`` unless a
    closed fit set the memory-bound kernels' own)."""
    return (nbytes + rates.memory_half_bytes) / (rates.vector_efficiency * bandwidth)


@dataclass(frozen=True)
class _Op:
    kind: str  # "gemm", "attn" or "vec"
    flops: float
    nbytes: float
    calls: float
    tag: str = ""
    cast_fwd: float = 0.0  # elements of the GEMM's activation input (m·k)
    cast_bwd: float = 0.0  # elements of its output gradient (m·n)
    shape: tuple = ()  # "attn": (call parts, head dim, backward), see attention_seconds
    mnk: tuple = ()  # "gemm": (M, N, K) of one call; () for a batched or unknown product
    grad: str = ""  # a backward GEMM: "input" (dx = dy·W) or "weight" (dW = dyᵀ·x)


def _vec(nbytes: float, tag: str = "", calls: float = 1.0) -> _Op:
    return _Op("vec", 0.0, nbytes, calls, tag)


def _gemm(m: float, k: float, n: float, tag: str = "", calls: float = 1.0) -> _Op:
    """``x (m × k) · Wᵀ (k × n)``: the forward of a linear layer."""
    return _Op("gemm", 2.0 * m * k * n, 2.0 * (m * k + k * n + m * n), calls, tag,
               m * k, m * n, mnk=(m, n, k))


def _gradients(o: _Op) -> list[_Op]:
    """The backward GEMMs of forward product ``o``: the input gradient ``dy (M × N) · W``
    (shape ``(M, K, N)``) and the weight gradient ``dyᵀ · x`` (``(N, K, M)``), each as
    many calls as ``o``; a product without a shape gives one op of twice its calls."""
    if not o.mnk:
        return [dataclasses.replace(o, calls=2 * o.calls, grad="")]
    m, n, k = o.mnk
    return [dataclasses.replace(o, mnk=(m, k, n), grad="input"),
            dataclasses.replace(o, mnk=(n, k, m), grad="weight")]


#: Bytes per element of an FP8 cast: read the 16-bit tensor, write its 8-bit copy; the
#: amax the next scale needs is reduced in the same kernel (Transformer Engine's
#: cast+amax kernels); weights are cast once per step and cached across micro-batches
#: (TE's ``is_first_microbatch``), so only activations and gradients are counted.
FP8_CAST_BYTES = 3.0


def fp8_casts(ops: list[_Op], backward: bool) -> list[_Op]:
    """The cast+amax kernels an FP8 run adds to ``ops``: per GEMM (not the attention
    core, which stays 16-bit) one cast of its activation input in the forward, one of
    its output gradient in the backward (shared by its two gradient GEMMs)."""
    out = []
    for o in ops:
        if o.kind != "gemm" or o.tag == "core":
            continue
        elements, calls = (o.cast_bwd, o.calls / 2) if backward else (o.cast_fwd, o.calls)
        if elements:
            out.append(_Op("vec", 0.0, FP8_CAST_BYTES * elements, calls, o.tag))
    return out


def _layer_ops(model: ModelSpec, b: int, tp: int, sp: bool, cp: int, ep: int, etp: int,
               flash: bool, dropout: bool, norm_bytes: float, moe: bool,
               kernels: str = "library") -> tuple[list[_Op], list[_Op]]:
    """Forward and backward ops of one layer for one micro-batch on one rank; its
    memory-bound kernels as ``kernels`` runs them (:mod:`perfkit.calc.elementwise`)."""
    s_q = model.seq_length / cp
    n = b * s_q
    h = model.hidden_size
    n_sp = n / tp if sp else n
    parts = layer_forward_flops(model, causal=flash, layer="moe" if moe else "dense")
    a_t = model.num_attention_heads / tp
    g_t = max(1.0, model.num_kv_heads / tp)
    d = model.qk_head_dim
    gated = model.mlp == "gated"
    rope = model.position_embedding == "rope"
    shape = dict(rms=model.norm == "rmsnorm", norm_bytes=norm_bytes, gated=gated,
                 dropout=dropout, rope=rope, alibi=model.position_embedding == "alibi",
                 flash=flash)
    vec = forward_kernels(kernels, **shape)
    gemms = 3 if gated else 2
    dense_mlp = (parts["mlp"] - parts["experts"]) * n / tp
    width = dense_mlp / (2.0 * n * h * gemms) if dense_mlp else 0.0
    mlp_in: list[_Op] = []
    mlp_out: list[_Op] = []
    moe_ops: list[_Op] = []
    act_elements = 0.0
    if dense_mlp:
        mlp_in += [_gemm(n, h, width, "mlp_in", calls=gemms - 1)]
        mlp_out += [_gemm(n, width, h, "mlp_out")]
        act_elements += n * width
    if parts["experts"]:
        local = model.num_experts / ep
        per_expert = parts["experts"] * n / tp / local  # FLOPs of one expert's GEMMs
        tokens_e = n * model.moe_top_k * ep / model.num_experts
        width_e = per_expert / (2.0 * tokens_e * h * gemms)
        mlp_in += [_gemm(tokens_e, h, width_e, "mlp_in", calls=local * (gemms - 1))]
        mlp_out += [_gemm(tokens_e, width_e, h, "mlp_out", calls=local)]
        act_elements += local * tokens_e * width_e
        moe_ops = [_gemm(n, h, model.num_experts, "router"),
                   _vec(8.0 * n * model.moe_top_k * h, "permute")]
    scores = b * a_t * s_q * model.seq_length  # elements of the score matrix
    sizes = {"hidden": n_sp * h, "rows": n_sp, "q": n * a_t * d, "k": n * g_t * d,
             "qk": n * (a_t + g_t) * d, "act": act_elements, "scores": scores}

    def ops(found: list) -> list[_Op]:
        return [_vec(k.bytes_per_element * sizes[k.over], k.tag) for k in found]

    core_flops = parts["core"] * n / tp
    if flash:
        call = (call_lengths(model.seq_length, cp, True), float(d), False, float(b * a_t))
        core = [_Op("attn", core_flops, 2.0 * n * (2 * a_t * d + 2 * g_t * d), 1.0, "core",
                    shape=call)]
        ring_fwd, ring_bwd = ring_bookkeeping(n * a_t * d, n * g_t * d, cp)
        core += [_vec(nbytes, "core", calls) for nbytes, calls in ring_fwd]
    else:
        bmm_bytes = 2.0 * (n * a_t * d + b * model.seq_length * a_t * d + scores)
        core = [_Op("gemm", core_flops / 2, bmm_bytes, 1.0, "core"), *ops(vec["softmax"]),
                _Op("gemm", core_flops / 2, bmm_bytes, 1.0, "core")]
    fwd = [*ops(vec["attn_norm"]), _gemm(n, h, parts["qkv"] / (2.0 * h) / tp, "qkv"),
           *ops(vec["rope"]), *core, _gemm(n, parts["projection"] / (2.0 * h) / tp, h, "proj"),
           *ops(vec["add_norm"]), *moe_ops, *mlp_in, *ops(vec["act"]),
           *(dataclasses.replace(o, tag="mlp_out") for o in mlp_out), *ops(vec["residual"])]
    # fp32 weights under autocast: each GEMM's weight cast in the forward, its gradient
    # cast back in the backward (the weight gradient's part: a frozen weight has none)
    per_weight = weight_casts(kernels)
    casts = [_vec(per_weight * o.mnk[1] * o.mnk[2], o.tag, o.calls) for o in fwd
             if per_weight and o.kind == "gemm" and o.tag != "core" and o.mnk]
    # backward: every GEMM twice (input and weight gradients), activation gradients
    bwd: list[_Op] = [dataclasses.replace(c, grad="weight") for c in casts]
    for o in fwd:
        if o.kind == "gemm":
            bwd += _gradients(o)
        elif o.kind == "attn":
            bwd.append(_Op("attn", o.flops * _FLASH_BACKWARD, o.nbytes * 2, o.calls, o.tag,
                           shape=(o.shape[0], o.shape[1], True, *o.shape[3:])))
    if flash:
        bwd += [_vec(nbytes, "core", calls) for nbytes, calls in ring_bwd]
    bwd += ops(backward_kernels(kernels, **shape))
    if parts["experts"]:
        bwd.append(_vec(8.0 * n * model.moe_top_k * h))
    return fwd + casts, bwd


def _head_ops(model: ModelSpec, b: int, tp: int, sp: bool, cp: int, norm_bytes: float,
              kernels: str = "library") -> tuple[list[_Op], list[_Op]]:
    """Embedding (first stage) and output head with loss (last stage), fwd + bwd; the
    backward's ops are tagged ``"backward"`` (the embedding's gradient, the loss's
    gradient, the head's two gradient GEMMs and the final norm's gradient), so that
    :func:`_seconds` can time the two passes at their own rates. Under ``kernels="amp"``
    the output layer's fp32 weight is cast too (:func:`~perfkit.calc.elementwise.
    weight_casts`); the rest is counted alike for every ``kernels``."""
    n = b * model.seq_length / cp
    h, v = model.hidden_size, model.vocab_size / tp
    n_sp = n / tp if sp else n
    emb = [_vec(4.0 * n_sp * h), _vec(4.0 * n_sp * h, "backward")]
    rms = model.norm == "rmsnorm"
    logits = _gemm(n, h, v)
    final_norm = norm_kernels("library", rms, norm_bytes if rms else 2.0)
    head = [*(_vec(k.bytes_per_element * n_sp * h) for k in final_norm), logits,
            _vec(6.0 * n * v), _vec(8.0 * n * v, "backward"),
            *(dataclasses.replace(g, tag="backward") for g in _gradients(logits)),
            _vec(12.0 * n_sp * h, "backward")]
    per_weight = weight_casts(kernels)
    if per_weight:
        head += [_vec(per_weight * h * v), _vec(per_weight * h * v, "backward")]
    return emb, head


def _seconds(ops: list[_Op], peak: float, bandwidth: float, rates: Rates,
             skip: tuple[str, ...] = (), only: tuple[str, ...] = (),
             core_peak: float | None = None, hardware_name: str = "",
             dtype: str | None = None, multiprocessors: int | None = None
             ) -> tuple[float, float]:
    """Total time and kernel count of ``ops`` (filtered by tag); the attention core (fused
    or its batched GEMMs) at ``core_peak`` where given (an FP8 run's 16-bit peak); a fused
    attention call on its published curve for ``hardware_name``
    (:func:`attention_seconds`) unless ``rates.attention_implementation`` is ``"gemm"``;
    GEMMs on ``hardware_name``'s measured surface for ``dtype`` where ``rates.gemm_model``
    gives one (:func:`perfkit.calc.gemm_rate.surface_for`; the 16-bit surface at
    ``core_peak``), else on the size curve. ``multiprocessors``: the device's (the
    attention occupancy's ``S``; None: the datasheet count for ``hardware_name``)."""
    surface = core_surface = None
    if hardware_name and any(o.kind == "gemm" for o in ops):
        surface = surface_for(hardware_name, dtype, rates.gemm_model)
        core_surface = surface_for(hardware_name, None, rates.gemm_model) \
            if core_peak is not None else surface
    total = kernels = 0.0
    for o in ops:
        if (skip and o.tag in skip) or (only and o.tag not in only):
            continue
        if o.kind == "vec":
            t = memory_seconds(o.nbytes, bandwidth, rates)
        else:
            at = core_peak if core_peak is not None and (o.kind == "attn" or o.tag == "core") \
                else peak
            if o.kind == "attn" and o.shape and rates.attention_implementation != "gemm":
                t = attention_seconds(o.flops, o.shape, at, rates, hardware_name,
                                      multiprocessors)
            else:
                t = gemm_seconds(o.flops, o.nbytes, at, bandwidth, rates, o.kind == "attn",
                                 o.mnk, core_surface if at is core_peak else surface)
        total += o.calls * t
        kernels += o.calls
    return total, kernels
