"""Device kernels of one transformer layer pass, with durations from FLOPs and bytes.

A pass (forward, backward, recompute) of one layer for one micro-batch is a fixed list of
kernels, following the model's shape: a gated MLP (``mlp="gated"``: w1 and w3 GEMMs, SiLU
(``Swish``) and Mul) or a plain one (``mlp="gpt"``: one up and one down GEMM around
``FastGelu``), RMSNorm or LayerNorm kernels, rotary kernels only with rotary positions, and
a bias input on the GEMMs of the layers that have biases (``bias="qkv"`` or ``"all"``).
Kernels are timed by the calibrated step model's own functions
(:func:`perfkit.calc.timing.gemm_seconds` and :func:`~perfkit.calc.timing.memory_seconds`):
matrix products (MatMul) on the hardware's measured GEMM surface by their (M, N, K) where
perfkit has one (:func:`perfkit.calc.gemm_rate.surface_for`: Hopper, V100), as
``perfkit.plan.predict`` prices them, else on the GEMM size curve plus their operands'
memory traffic; the fused attention kernel (FlashAttentionScore) on the published curve of
its sequence length, head dimension, mask and pass for the hardware, as
``perfkit.plan.predict`` prices it (:func:`perfkit.calc.timing_kernels.attention_seconds`,
``attention_implementation="auto"``); element-wise kernels from their bytes at the memory
rate, each with its fixed cost per call. :func:`perfkit.calc.timing.layer_costs` lays out
the same kernels.
Tensor-parallel all-reduces are marked as communication and timed from the message size
and the group's bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..calc.gemm_rate import GemmSurface
from ..calc.rates import Rates
from ..calc.timing import gemm_seconds, memory_seconds
from ..calc.timing_kernels import attention_seconds
from ..specs import ModelSpec, ParallelConfig

__all__ = ["Kernel", "KernelCosts", "Pass", "layer_pass", "embedding_pass", "head_pass",
           "optimizer_kernel", "collective_op", "wire_share"]

CUBE, VEC, TP_COMM = "cube", "vec", "tp"


@dataclass(frozen=True)
class Kernel:
    """One device kernel of a pass template (shapes as the profiler writes them)."""

    name: str
    type: str
    core: str
    work: str  # CUBE (FLOPs), VEC (bytes) or TP_COMM (message bytes)
    amount: float
    in_shapes: str = ""
    in_dtypes: str = ""
    in_formats: str = ""
    out_shapes: str = ""
    out_dtypes: str = ""
    out_formats: str = ""
    block: int = 20
    nbytes: float = 0.0  # CUBE kernels: operand and result bytes (the memory term)
    mnk: tuple[int, int, int] | tuple[()] = ()  # a matrix product's (M, N, K)
    # a fused attention call's (parts, head dim, backward, pairs), as the step model's
    # (perfkit.calc.timing_kernels.attention_seconds); () for every other kernel
    attn: tuple = ()

    @property
    def attention(self) -> bool:
        """Whether this is the fused attention kernel (it carries its call's shape)."""
        return bool(self.attn)


@dataclass(frozen=True)
class KernelCosts:
    """Conversion of work into time with the step model's functions.

    ``efficiency`` and ``memory_efficiency`` are the asymptotic shares of the peak and
    of the HBM bandwidth; ``cube_fixed_us`` and ``vec_fixed_us`` the fixed cost of a call,
    i.e. the size curves' half-work ``W½ = fixed · e · rate``
    (:mod:`perfkit.calc.rates`). With a ``surface`` (the hardware's measured GEMM surface),
    matrix products run on it by their shape, its rates scaled so that a very large
    product reaches ``efficiency`` of the peak (``scale = efficiency / e_max``), with the
    surface's own fixed time per call. With a ``hardware_name``, the fused attention
    kernels run on the published curve for that hardware
    (:mod:`perfkit.calc.attention_rate`; ``multiprocessors`` its occupancy's SM count,
    None: the datasheet's), unscaled: ``efficiency`` is the GEMMs'. Without one, they are
    GEMMs of their FLOPs on the size curve.
    """

    peak_flops: float
    efficiency: float
    memory_bandwidth: float
    memory_efficiency: float
    cube_fixed_us: float = 4.0
    vec_fixed_us: float = 2.0
    surface: GemmSurface | None = None
    hardware_name: str = ""
    multiprocessors: int | None = None

    @property
    def rates(self) -> Rates:
        """The same costs as step-model rates (fused attention on its published curve
        with a ``hardware_name``, else on the GEMM size curve:
        ``attention_implementation="gemm"``)."""
        return Rates(gemm_efficiency=self.efficiency,
                     attention_implementation="auto" if self.hardware_name else "gemm",
                     gemm_half_flops=self.cube_fixed_us * 1e-6 * self.efficiency
                     * self.peak_flops,
                     memory_efficiency=self.memory_efficiency,
                     memory_half_bytes=self.vec_fixed_us * 1e-6 * self.memory_efficiency
                     * self.memory_bandwidth)

    def duration_us(self, kernels: list[Kernel], tp_seconds_per_byte: float) -> np.ndarray:
        """Nominal duration of each kernel in microseconds."""
        rates = self.rates
        out = np.empty(len(kernels))
        for i, k in enumerate(kernels):
            if k.work == CUBE and self.surface is not None and k.mnk and not k.attention:
                out[i] = self.surface.seconds(*k.mnk, self.peak_flops, self.memory_bandwidth,
                                              self.efficiency / self.surface.e_max) * 1e6
            elif k.work == CUBE and k.attention and self.hardware_name:
                out[i] = attention_seconds(k.amount, k.attn, self.peak_flops, rates,
                                           self.hardware_name, self.multiprocessors) * 1e6
            elif k.work == CUBE:
                out[i] = gemm_seconds(k.amount, k.nbytes, self.peak_flops,
                                      self.memory_bandwidth, rates, k.attention) * 1e6
            elif k.work == VEC:
                out[i] = memory_seconds(k.amount, self.memory_bandwidth, rates) * 1e6
            else:
                out[i] = k.amount * wire_share(k) * tp_seconds_per_byte * 1e6 + 8.0
        return out


@dataclass(frozen=True)
class Pass:
    """A named list of kernels."""

    name: str
    kernels: tuple[Kernel, ...]


def _mm(tag: str, m: int, k: int, n: int, dtype: str = "DT_BF16", bias: bool = False
        ) -> Kernel:
    """A MatMul ``(m,k) x (k,n)``; with ``bias`` an ``aclnnAddmm`` whose third input is the
    bias ``(n)``."""
    nbytes = 2.0 * (m * k + k * n + m * n)
    if bias:
        return Kernel(f"aclnnAddmm_{tag}_MatMulV3", "MatMulV3", "AI_CORE", CUBE,
                      2.0 * m * k * n, f'"{m},{k};{k},{n};{n}"', f"{dtype};{dtype};{dtype}",
                      "ND;ND;ND", f'"{m},{n}"', dtype, "ND", 24, nbytes, mnk=(m, n, k))
    return Kernel(f"aclnnMm_{tag}_MatMulV3", "MatMulV3", "AI_CORE", CUBE, 2.0 * m * k * n,
                  f'"{m},{k};{k},{n}"', f"{dtype};{dtype}", "ND;ND", f'"{m},{n}"', dtype, "ND",
                  24, nbytes, mnk=(m, n, k))


def _vec(name: str, type_: str, shape: str, nbytes: float, dtypes: str = "DT_BF16",
         n_in: int = 1, out_dtype: str | None = None) -> Kernel:
    ins = ";".join([shape] * n_in)
    return Kernel(name, type_, "AI_VECTOR_CORE", VEC, nbytes, f'"{ins}"',
                  ";".join([dtypes] * n_in), ";".join(["ND"] * n_in), f'"{shape}"',
                  out_dtype or dtypes, "ND", 40)


def _collective(op: str, nbytes: float) -> Kernel:
    """A tensor-parallel collective (``allReduce``, ``allGather``, ``reduceScatter``) of a
    tensor of ``nbytes`` (the whole tensor, gathered)."""
    return Kernel(f"hcom_{op}_", f"hcom_{op}_", "HCCL", TP_COMM, nbytes)


#: Ring passes over the whole tensor of each tensor-parallel collective: an all-reduce is
#: a reduce-scatter then an all-gather, each ``(t − 1)/t`` of the tensor per member.
_HALVES = {"allReduce": 2, "allGather": 1, "reduceScatter": 1}


def collective_op(kernel: Kernel) -> str:
    """The collective a tensor-parallel kernel runs (``allReduce``, ``allGather``,
    ``reduceScatter``), as ``hcom_{op}_`` names it."""
    return kernel.name.removeprefix("hcom_").removesuffix("_")


def wire_share(kernel: Kernel) -> float:
    """A tensor-parallel kernel's time on the links relative to an all-reduce of its tensor
    (1 for an all-reduce, 1/2 for an all-gather or a reduce-scatter)."""
    return _HALVES[collective_op(kernel)] / 2


def _dims(model: ModelSpec, parallel: ParallelConfig) -> dict[str, int]:
    t = parallel.tp
    return {"n": parallel.micro_batch_size * model.seq_length, "h": model.hidden_size,
            "b": parallel.micro_batch_size, "s": model.seq_length,
            "a": model.num_attention_heads // t, "g": max(1, model.num_kv_heads // t),
            "d": model.head_dim, "f": model.ffn_hidden_size // t, "v": model.vocab_size // t,
            "t": t, "layernorm": model.norm == "layernorm"}


def _row_dims(dm: dict[str, int], parallel: ParallelConfig) -> dict[str, int]:
    """``dm`` for the kernels that see each token on its own (norms, residual adds, the
    embedding): under sequence parallelism, ``1/t`` of the tokens."""
    if dm["t"] > 1 and parallel.sequence_parallel:
        return {**dm, "n": dm["n"] // dm["t"]}
    return dm


def _norm(dm: dict[str, int], unfused: bool, grad: bool, tag: str) -> list[Kernel]:
    n, h = dm["n"], dm["h"]
    shape = f"{n},{h}"
    if dm["layernorm"]:
        if grad:
            return [_vec(f"aclnnLayerNormBackward_{tag}_LayerNormGrad", "LayerNormGrad",
                         shape, n * h * 12.0, n_in=2)]
        return [_vec(f"aclnnLayerNorm_{tag}_LayerNormV4", "LayerNormV4", shape, n * h * 8.0)]
    if not unfused:
        if grad:
            return [_vec(f"aclnnRmsNormGrad_{tag}_RmsNormGrad", "RmsNormGrad", shape,
                         n * h * 12.0, "FLOAT", n_in=2)]
        return [_vec(f"aclnnCast_{tag}_Cast", "Cast", shape, n * h * 6.0, out_dtype="FLOAT"),
                _vec(f"aclnnRmsNorm_{tag}_RmsNorm", "RmsNorm", shape, n * h * 8.0, "FLOAT")]
    names = (["Mul", "Mul", "ReduceSum", "Mul", "Sub", "Mul"] if grad
             else ["Cast", "Pow", "ReduceMean", "Add", "Rsqrt", "Mul", "Mul"])
    return [_vec(f"aclnn{op}_{tag}_{op}", op, shape, n * h * 8.0, "FLOAT") for op in names]


def _rotary(dm: dict[str, int], unfused: bool, grad: bool) -> list[Kernel]:
    n, d = dm["n"], dm["d"]
    out = []
    for heads, tag in ((dm["a"], "q"), (dm["g"], "k")):
        shape = f"{dm['b']},{dm['s']},{heads},{d}"
        size = n * heads * d * 2.0
        if not unfused:
            name = "RotaryMulGrad" if grad else "RotaryMul"
            out.append(_vec(f"aclnnRotaryPositionEmbedding_{name}_{name}", name, shape,
                            size * 3, n_in=3))
        else:
            for op in ("StridedSliceD", "Neg", "ConcatD", "Mul", "Mul", "Add"):
                out.append(_vec(f"aclnn{op}_rotary_{tag}_{op}", op, shape, size * 2))
    return out


def _act(dm: dict[str, int], unfused: bool, grad: bool) -> list[Kernel]:
    n, f = dm["n"], dm["f"]
    shape = f"{n},{f}"
    size = n * f * 2.0
    if grad:
        base = [_vec("aclnnMul_MulGrad_Mul", "Mul", shape, size * 3, n_in=2),
                _vec("aclnnMul_MulGrad_Mul", "Mul", shape, size * 3, n_in=2)]
        if unfused:
            return base + [_vec("aclnnSigmoid_SigmoidGrad_Sigmoid", "Sigmoid", shape, size * 2),
                           _vec("aclnnMul_SiluGrad_Mul", "Mul", shape, size * 3, n_in=2),
                           _vec("aclnnMul_SiluGrad_Mul", "Mul", shape, size * 3, n_in=2)]
        return base + [_vec("aclnnSiluBackward_SwishGrad_SwishGrad", "SwishGrad", shape,
                            size * 3, n_in=2)]
    if unfused:
        silu = [_vec("aclnnSigmoid_Sigmoid_Sigmoid", "Sigmoid", shape, size * 2),
                _vec("aclnnMul_Silu_Mul", "Mul", shape, size * 3, n_in=2)]
    else:
        silu = [_vec("aclnnSilu_Swish_Swish", "Swish", shape, size * 2)]
    return silu + [_vec("aclnnMul_Mul_Mul", "Mul", shape, size * 3, n_in=2)]


def _gelu(dm: dict[str, int], grad: bool) -> list[Kernel]:
    """The plain MLP's activation (torch_npu ``npu_fast_gelu``) or its gradient."""
    n, f = dm["n"], dm["f"]
    size = n * f * 2.0
    if grad:
        return [_vec("aclnnFastGeluBackward_FastGeluGrad_FastGeluGrad", "FastGeluGrad",
                     f"{n},{f}", size * 3, n_in=2)]
    return [_vec("aclnnFastGelu_FastGelu_FastGelu", "FastGelu", f"{n},{f}", size * 2)]


def _attention(dm: dict[str, int], grad: bool, causal_factor: float = 0.5) -> Kernel:
    b, s, a, g, d = dm["b"], dm["s"], dm["a"], dm["g"], dm["d"]
    flops = 4.0 * b * s * s * a * d * causal_factor * (2.5 if grad else 1.0)
    name = "FlashAttentionScoreGrad" if grad else "FlashAttentionScore"
    shapes = f'"{b},{s},{a * d};{b},{s},{g * d};{b},{s},{g * d}"'
    nbytes = 2.0 * b * s * (2 * a * d + 2 * g * d) * (2.0 if grad else 1.0)
    call = (((1.0, float(s), float(s), causal_factor < 1.0),), float(d), grad, float(b * a))
    return Kernel(f"aclnnFlashAttentionScore{'Grad' if grad else ''}_{name}_{name}", name,
                  "MIX_AIC", CUBE, flops, shapes, "DT_BF16;DT_BF16;DT_BF16", "ND;ND;ND",
                  f'"{b},{s},{a * d}"', "DT_BF16", "ND", 24, nbytes, attn=call)


def layer_pass(model: ModelSpec, parallel: ParallelConfig, kind: str,
               unfused: tuple[str, ...] = ()) -> Pass:
    """Kernels of one layer for one micro-batch.

    ``kind`` is ``"fwd"``, ``"bwd"``, ``"recompute_full"`` (the forward again, before the
    backward), ``"recompute_needed"`` (the forward without the MLP output projection, its
    all-reduce and the last residual add, whose outputs the backward never reads: a
    graph-mode framework's full recompute, :data:`perfkit.calc.rates.RECOMPUTE_STYLES`)
    or ``"recompute_selective"`` (the activation function's outputs again).

    Tensor parallelism all-reduces the output of each row-parallel matrix multiply (the
    attention output and MLP down projections) in the forward, and the input gradient of
    each column-parallel block in the backward. With sequence parallelism (Korthikanti et
    al. 2022, §4.2.2) the norms and residual adds run on ``1/t`` of the tokens: each
    all-reduce becomes a reduce-scatter, and an all-gather brings the whole sequence in
    front of each column-parallel block (forward; in the backward, the gradient arriving at
    each block is gathered and the input gradient reduce-scattered). The backward gathers
    each column-parallel input once more for its weight gradient (Megatron-LM does not keep
    it gathered: ``Rates.sp_ag_redo``, which :mod:`perfkit.calc.timing` charges the same).
    """
    dm = _dims(model, parallel)
    n, h, a, g, d, f = dm["n"], dm["h"], dm["a"], dm["g"], dm["d"], dm["f"]
    tp = dm["t"] > 1
    sp = tp and parallel.sequence_parallel
    msg = n * h * 2.0
    un_norm, un_rot, un_act = ("rms_norm" in unfused, "rotary" in unfused, "swiglu" in unfused)
    gated = model.mlp == "gated"
    rope = model.position_embedding == "rope"
    qkv_bias, bias = model.bias in ("qkv", "all"), model.bias == "all"
    qkv = (a + 2 * g) * d
    row_dm = _row_dims(dm, parallel)  # norms and residual adds: the sequence shard
    rows = row_dm["n"]
    add = _vec("aclnnAdd_Add_Add", "Add", f"{rows},{h}", rows * h * 6.0, n_in=2)
    gather = [_collective("allGather", msg)] if sp else []
    reduce = [_collective("reduceScatter" if sp else "allReduce", msg)] if tp else []

    def act(grad: bool) -> list[Kernel]:
        return _act(dm, un_act, grad) if gated else _gelu(dm, grad)

    def rotary(grad: bool) -> list[Kernel]:
        return _rotary(dm, un_rot, grad) if rope else []

    if kind in ("fwd", "recompute_full", "recompute_needed"):
        ks: list[Kernel] = [*_norm(row_dm, un_norm, False, "attention_norm"), *gather,
                            _mm("qkv", n, h, qkv, bias=qkv_bias), *rotary(False),
                            _attention(dm, False), _mm("wo", n, a * d, h, bias=bias), *reduce,
                            add, *_norm(row_dm, un_norm, False, "ffn_norm"), *gather,
                            _mm("w1", n, h, f, bias=bias)]
        if gated:
            ks.append(_mm("w3", n, h, f))
        ks += [*act(False)]
        if kind == "recompute_needed":
            return Pass(kind, tuple(ks))
        ks += [_mm("w2", n, f, h, bias=bias), *reduce, add]
        return Pass(kind, tuple(ks))
    if kind == "recompute_selective":
        return Pass(kind, tuple(act(False)))
    # the backward: the gradient is gathered in front of each block (sp), the block's
    # input is gathered again for the weight gradients (sp), the input gradient reduced
    ks = [*gather, _mm("w2_dx", n, h, f), _mm("w2_dw", f, n, h), *act(True), *gather]
    if gated:
        ks += [_mm("w3_dx", n, f, h), _mm("w3_dw", h, n, f)]
    ks += [_mm("w1_dx", n, f, h), _mm("w1_dw", h, n, f), add, *reduce,
           *_norm(row_dm, un_norm, True, "ffn_norm"), add, *gather, _mm("wo_dx", n, h, a * d),
           _mm("wo_dw", a * d, n, h), _attention(dm, True), *rotary(True), *gather,
           _mm("qkv_dx", n, qkv, h), _mm("qkv_dw", h, n, qkv), *reduce,
           *_norm(row_dm, un_norm, True, "attention_norm"), add]
    return Pass(kind, tuple(ks))


def embedding_pass(model: ModelSpec, parallel: ParallelConfig, backward: bool) -> Pass:
    """Token embedding lookup (forward) or its gradient (backward) on the first stage."""
    dm = _row_dims(_dims(model, parallel), parallel)
    n, h = dm["n"], dm["h"]
    if backward:
        k = _vec("aclnnEmbeddingDenseBackward_EmbeddingDenseGrad_EmbeddingDenseGrad",
                 "EmbeddingDenseGrad", f"{n},{h}", n * h * 4.0)
    else:
        k = _vec("aclnnEmbedding_GatherV2_GatherV2", "GatherV2", f"{n},{h}", n * h * 4.0)
    return Pass("embedding_bwd" if backward else "embedding_fwd", (k,))


def head_pass(model: ModelSpec, parallel: ParallelConfig, backward: bool) -> Pass:
    """Final norm, output projection and loss on the last stage."""
    dm = _dims(model, parallel)
    n, h, v = dm["n"], dm["h"], dm["v"]
    row_dm = _row_dims(dm, parallel)
    loss = _vec("aclnnCrossEntropyLoss_SoftmaxCrossEntropyWithLogits_"
                "SoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits", f"{n},{v}",
                n * v * 8.0, "FLOAT")
    if backward:
        ks = [_mm("lm_head_dx", n, v, h), _mm("lm_head_dw", h, n, v),
              *_norm(row_dm, False, True, "final_norm")]
        return Pass("head_bwd", tuple(ks))
    ks = [*_norm(row_dm, False, False, "final_norm"), _mm("lm_head", n, h, v),
          _vec("aclnnCast_Cast_Cast", "Cast", f"{n},{v}", n * v * 6.0, out_dtype="FLOAT"), loss]
    return Pass("head_fwd", tuple(ks))


def optimizer_kernel(params: float, optimizer_shard: int) -> Kernel:
    """One fused AdamW update over the device's share of the parameters."""
    n = int(params / optimizer_shard)
    return Kernel("aclnnApplyAdamWV2_ApplyAdamWV2_ApplyAdamWV2", "ApplyAdamWV2",
                  "AI_VECTOR_CORE", VEC, n * 24.0, f'"{n};{n};{n};{n}"',
                  "DT_BF16;FLOAT;FLOAT;DT_BF16", "ND;ND;ND;ND", f'"{n}"', "DT_BF16", "ND", 40)
