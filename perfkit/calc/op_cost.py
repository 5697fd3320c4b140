"""Per-operator performance models: FLOPs and bytes moved from shapes and dtypes.

One small model per kind of operator, in the manner of AMD's TraceLens perf models and
msprof-analyze's operator-MFU recipe: pure functions of the operator's dimensions and
element sizes, no profile and no hardware. :mod:`perfkit.analysis.efficiency` reads the
shapes of a profile, calls these and puts the result on the hardware's roofline.

Conventions (each one a parameter where it matters):

* A multiply-add is **2 FLOPs**. FLOPs are what the kernel's arithmetic must do for the
  logical shapes (padding of hardware layouts is left to the caller).
* **Bytes** are the minimum traffic to device memory: every input read once and every
  output written once (``elements x bytes per element``). Real kernels re-read tiles
  (GEMM) or spill (attention), so achieved GB/s from these bytes is a lower bound.
* **GEMM** ``C[b, m, n] = A[b, m, k] @ B[b, k, n]``: ``2·b·m·n·k`` FLOPs (the bias of
  ``addmm`` is counted neither in FLOPs, as ``torch.utils.flop_counter`` does, nor in
  bytes: ``n`` elements against ``m·k + k·n + m·n``). Source: any BLAS text;
  torch ``flop_counter.mm_flop`` / ``bmm_flop``.
* **Attention** (scaled dot product, flash / memory-efficient kernels):
  forward ``4·b·h_q·s_q·s_k·d`` (``QKᵀ`` then ``P·V``, with ``d_v = d``), halved when
  ``causal`` (only the lower triangle is computed); backward ``backward_factor`` times the
  forward: 2.5, the five matrix products of FlashAttention-2's backward, which recomputes
  ``QKᵀ`` (Dao 2023), against two forward; ``torch.utils.flop_counter``'s
  ``sdpa_backward_flop_count`` counts the same five, but never halves for causal masks.
  2.0 counts the four products of a backward that keeps the scores. Bytes: Q, K, V, O
  (+ dO, dQ, dK, dV backward); the ``s×s`` score matrix never reaches memory.
* **Convolution** (any number of spatial dims, groups included): ``2·N·spatial_out·W``
  FLOPs where ``W`` is the number of weight elements ``C_out·C_in/groups·k_1·…``;
  backward (input and weight gradients) is twice that. Bytes: input, weight, output.
* **Element-wise** (unary, binary, activations, casts, copies): ``flops_per_element``
  FLOPs (default 1) per output element; bytes: every tensor input plus the output.
* **Normalisation** (RMSNorm, LayerNorm, BatchNorm): forward ``flops_per_element`` per
  element (4 for RMSNorm: square, sum, scale by the reciprocal root, multiply by the
  weight; 7 for LayerNorm: mean, subtract, square, sum, scale, weight, bias; 7 for a
  training BatchNorm, the same steps with the statistics per channel instead of per row),
  backward twice that.
  Bytes forward: input, weight, output; backward: input, output gradient, weight, input
  gradient, weight gradient.
* **Reduction** (sum, mean, softmax, ...): one FLOP per input element (``flops_per_element``
  per element), bytes in plus out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InvalidArgumentError

__all__ = ["OpCost", "gemm_cost", "attention_cost", "conv_cost", "elementwise_cost",
           "norm_cost", "reduction_cost", "numel", "KINDS", "NORM_FLOPS_PER_ELEMENT"]

#: Operator kinds with a model, in the order :mod:`perfkit.analysis.efficiency` tries them.
KINDS = ("gemm", "attention", "conv", "norm", "elementwise", "reduction")

#: Forward FLOPs per element of the normalisations (see the module docstring).
NORM_FLOPS_PER_ELEMENT = {"rms": 4.0, "layer": 7.0, "batch": 7.0}


@dataclass(frozen=True)
class OpCost:
    """FLOPs and bytes of one call of one operator.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    flops : float
        Arithmetic operations (a multiply-add is 2).
    bytes : float
        Minimum bytes read plus written in device memory.
    """

    kind: str
    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte (NaN when no byte moves)."""
        return self.flops / self.bytes if self.bytes > 0 else float("nan")


def numel(shape: Sequence[int]) -> int:
    """Number of elements of a tensor of ``shape`` (1 for a scalar ``()``)."""
    return int(math.prod(int(d) for d in shape))


def _check(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise InvalidArgumentError(name, "must be a number >= 0", value)
    return float(value)


def gemm_cost(m: int, n: int, k: int, batch: int = 1, a_bytes: float = 2.0,
              b_bytes: float | None = None, out_bytes: float | None = None,
              b_batched: bool = True) -> OpCost:
    """GEMM ``C[batch, m, n] = A[batch, m, k] @ B[batch, k, n]``.

    ``flops = 2·batch·m·n·k``; ``bytes = batch·m·k·a + (batch if b_batched else 1)·k·n·b +
    batch·m·n·c`` with ``a``, ``b``, ``c`` the element sizes (``b`` and ``c`` default to
    ``a``). ``b_batched=False`` is a weight shared by the batch (``matmul`` of a 3-D input
    with a 2-D weight).
    """
    for name, v in (("m", m), ("n", n), ("k", k), ("batch", batch), ("a_bytes", a_bytes)):
        _check(name, v)
    b_bytes = a_bytes if b_bytes is None else _check("b_bytes", b_bytes)
    out_bytes = a_bytes if out_bytes is None else _check("out_bytes", out_bytes)
    flops = 2.0 * batch * m * n * k
    nbytes = (batch * m * k * a_bytes + (batch if b_batched else 1) * k * n * b_bytes
              + batch * m * n * out_bytes)
    return OpCost("gemm", flops, float(nbytes))


def attention_cost(batch: int, heads: int, seq_q: int, seq_k: int, head_dim: int,
                   kv_heads: int | None = None, head_dim_v: int | None = None,
                   causal: bool = False, backward: bool = False,
                   backward_factor: float = 2.5, elem_bytes: float = 2.0) -> OpCost:
    """Fused scaled-dot-product attention (FlashAttention), forward or backward.

    Forward ``flops = 2·b·h·s_q·s_k·d + 2·b·h·s_q·s_k·d_v`` (``QKᵀ`` and ``P·V``; with
    ``d_v = d`` that is ``4·b·h·s_q·s_k·d``), times 0.5 when ``causal``; backward
    ``backward_factor`` times the forward (2.5: FlashAttention-2 recomputes ``QKᵀ``, as
    ``torch.utils.flop_counter`` counts too; 2.0: a backward that keeps the scores).
    Bytes forward ``(Q + K + V + O)·elem_bytes`` with
    ``Q = O = b·h·s_q·d`` and ``K = V = b·kv_heads·s_k·d``; backward reads Q, K, V, O, dO and
    writes dQ, dK, dV. Grouped-query attention (``kv_heads < heads``) changes the bytes, not
    the FLOPs.
    """
    for name, v in (("batch", batch), ("heads", heads), ("seq_q", seq_q), ("seq_k", seq_k),
                    ("head_dim", head_dim), ("backward_factor", backward_factor),
                    ("elem_bytes", elem_bytes)):
        _check(name, v)
    kv = heads if kv_heads is None else int(_check("kv_heads", kv_heads))
    dv = head_dim if head_dim_v is None else int(_check("head_dim_v", head_dim_v))
    fwd = 2.0 * batch * heads * seq_q * seq_k * (head_dim + dv) * (0.5 if causal else 1.0)
    q = batch * heads * seq_q * head_dim
    o = batch * heads * seq_q * dv
    k_ = batch * kv * seq_k * head_dim
    v_ = batch * kv * seq_k * dv
    if backward:
        return OpCost("attention", fwd * backward_factor,
                      float((2 * (q + k_ + v_) + 2 * o) * elem_bytes))
    return OpCost("attention", fwd, float((q + k_ + v_ + o) * elem_bytes))


def conv_cost(batch_spatial_out: int, weight_elements: int, input_elements: int,
              output_elements: int, elem_bytes: float = 2.0, backward: bool = False
              ) -> OpCost:
    """Convolution of any dimensionality.

    ``flops = 2·N·spatial_out·W`` with ``batch_spatial_out = N·∏(output spatial dims)`` and
    ``W = C_out·C_in/groups·∏(kernel dims)`` the weight's elements (each output element is
    a dot product of length ``W / C_out``, and there are ``N·spatial_out·C_out`` of them);
    backward (input gradient and weight gradient) is twice that. Bytes: input, weight and
    output once (backward also the output gradient and both gradients).
    """
    for name, v in (("batch_spatial_out", batch_spatial_out),
                    ("weight_elements", weight_elements), ("input_elements", input_elements),
                    ("output_elements", output_elements), ("elem_bytes", elem_bytes)):
        _check(name, v)
    flops = 2.0 * batch_spatial_out * weight_elements
    moved = input_elements + weight_elements + output_elements
    if backward:
        return OpCost("conv", 2.0 * flops, float(2 * moved * elem_bytes))
    return OpCost("conv", flops, float(moved * elem_bytes))


def elementwise_cost(output_elements: int, input_bytes: float, output_bytes: float,
                     flops_per_element: float = 1.0) -> OpCost:
    """Element-wise operator: ``flops = output_elements · flops_per_element``.

    ``input_bytes`` is the sum over tensor inputs of elements x element size (a broadcast
    operand counts its own, smaller, size); ``output_bytes`` the output's.
    """
    _check("output_elements", output_elements)
    return OpCost("elementwise", output_elements * _check("flops_per_element",
                                                         flops_per_element),
                  _check("input_bytes", input_bytes) + _check("output_bytes", output_bytes))


def norm_cost(elements: int, hidden: int, elem_bytes: float = 2.0, kind: str = "rms",
              backward: bool = False, flops_per_element: float | None = None,
              weight_bytes: float = 4.0) -> OpCost:
    """RMSNorm / LayerNorm over the last dimension ``hidden`` of ``elements`` elements
    (BatchNorm: ``hidden`` the channels, its statistics per channel).

    Forward ``flops = elements · f`` (``f`` from :data:`NORM_FLOPS_PER_ELEMENT` unless
    given); backward ``2·elements·f``. Bytes forward: input and output
    (``2·elements·elem_bytes``) plus the weight (``hidden·weight_bytes``, twice for
    LayerNorm's bias); backward: input, output gradient, input gradient
    (``3·elements·elem_bytes``) plus weight and weight gradient.
    """
    if kind not in NORM_FLOPS_PER_ELEMENT:
        raise InvalidArgumentError("kind", f"must be one of {tuple(NORM_FLOPS_PER_ELEMENT)}",
                                   kind)
    _check("elements", elements)
    _check("hidden", hidden)
    f = NORM_FLOPS_PER_ELEMENT[kind] if flops_per_element is None else \
        _check("flops_per_element", flops_per_element)
    params = hidden * weight_bytes * (1 if kind == "rms" else 2)  # weight (and bias)
    if backward:
        return OpCost("norm", 2.0 * elements * f, 3.0 * elements * elem_bytes + 2 * params)
    return OpCost("norm", elements * f, 2.0 * elements * elem_bytes + params)


def reduction_cost(input_elements: int, output_elements: int, input_bytes: float,
                   output_bytes: float, flops_per_element: float = 1.0) -> OpCost:
    """Reduction or softmax: ``flops = input_elements · flops_per_element``, bytes in + out."""
    _check("input_elements", input_elements)
    _check("output_elements", output_elements)
    return OpCost("reduction", input_elements * _check("flops_per_element", flops_per_element),
                  _check("input_bytes", input_bytes) + _check("output_bytes", output_bytes))
