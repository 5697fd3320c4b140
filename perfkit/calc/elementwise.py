"""A layer's memory-bound kernels by how the framework runs them: fused library kernels,
eager PyTorch operator by operator, or compiled (``Rates.elementwise_kernels``).

The step model (:mod:`perfkit.calc.timing`) times a memory-bound kernel by its bytes
(:func:`perfkit.calc.timing_kernels.memory_seconds`). Between a layer's GEMMs sit the
norms, the rotary embedding, the residual adds, the MLP activation (and, without a fused
attention kernel, the softmax); how many kernels they take and how many bytes those move
depends on how the framework runs them. Each entry below is one kernel: the bytes it
moves per element of the tensor it runs over (``over``: ``"hidden"``, the ``b·s·h``
activation, by ``tp`` under sequence parallelism; ``"q"``/``"k"``, the queries' and
keys' elements on the rank; ``"act"``, the MLP's intermediate elements; ``"scores"``, the
attention scores; ``"rows"``, one value per token), activations in 16 bits.

``"library"`` (default; Megatron-LM, Transformer Engine, apex, MindSpore's fused
operators: the counts the model's studies were built on) — a norm one kernel of 8 bytes
(14 in two kernels where the norm casts to fp32 first, as MindFormers does), rotary 6 per
tensor, a residual add 6 (7 with dropout's mask), the gated activation 4 + 6, a norm's
gradient 12, each residual's gradient 6.

``"eager"`` — PyTorch running a Llama block's reference code operator by operator, as
Hugging Face's ``LlamaRMSNorm`` / ``apply_rotary_pos_emb`` and torchtitan's
``RMSNorm`` write it. RMSNorm computes in fp32: ``x.float()`` (read 2, write 4),
``pow(2)`` (4 + 4), ``mean`` (4), ``x · rstd`` (4 + 4), the cast back (4 + 2), ``· weight``
(2 + 2): 36 bytes in six kernels, and two per row (``+ eps``, ``rsqrt``). Its gradient,
by PyTorch's derivative formulas (``tools/autograd/derivatives.yaml``): through the
weight (4, and 6 + 2 for the weight's gradient), the cast (6), ``x · rstd`` (8, and
12 + 4 for ``rstd``'s), the mean and the square (4, 8, 12), the sum of the two input
gradients (12) and the cast back (6): 84 bytes in twelve kernels. Rotary, per query or
key tensor: ``x · cos`` (4), the negated half (2), ``cat`` (4), ``· sin`` (4), the sum (6):
20 bytes in five kernels; its gradient through both products (4 + 4), the negation (2),
the two slices' gradients (zeros and a copy each: 2 + 2 + 2 + 2) and two sums (6 + 6):
30 bytes in nine. The activation, adds and LayerNorm (``torch.nn.LayerNorm`` is one
native kernel) count as ``"library"``.

``"amp"`` — eager PyTorch under ``torch.autocast`` with fp32 weights (plain automatic
mixed precision: Hugging Face's Trainer with ``bf16=True``, Lightning's ``"bf16-mixed"``,
``torch.autocast`` around a model kept in fp32). Autocast runs the GEMMs in 16 bits and
casts their operands on the way in; the operators it does not list stay in the dtype they
are given. So the embedding's fp32 output makes the residual stream fp32, and each norm,
residual add and the gradients along the stream run in fp32 (``torch.amp`` autocast op
reference: ``linear``/``matmul`` cast to the lower precision; ``add``, ``mul``, ``pow``,
``mean``, ``rsqrt`` run "in the widest input type"). Per layer, forward: RMSNorm on fp32
input, ``pow`` (4 + 4), ``mean`` (4), ``x · rstd`` (4 + 4), ``· weight`` (4 + 4): 28 bytes in
four kernels and two per row (``x.float()`` and the cast back are no-ops on fp32 input);
one cast of the norm's fp32 output to 16 bits (4 + 2) per GEMM group it feeds (the
attention's fused query-key-value projection; the MLP's up and gate projections, each
casting it again: autocast caches the casts of weights, not of activations); each
residual add fp32 + 16-bit → fp32 (4 + 2 + 4). Rotary and the activation run in 16 bits,
as ``"eager"``. Every GEMM's weight is cast fp32 → 16 bits once per forward (4 + 2 per
weight element; again in a recomputed forward). Backward: each residual's gradient cast
to 16 bits for its branch (4 + 2); each cast's gradient back to fp32 (2 + 4), and the two
MLP inputs' gradients summed in fp32 (12); the norm's gradient in fp32 by PyTorch's
derivative formulas, through the weight (8, and 12 + 4 for the weight's gradient),
``x · rstd`` (8, and 12 + 4 for ``rstd``'s), the mean and the square (4, 8, 12) and the sum
of the two input gradients (12): 84 bytes in ten kernels; its sum with the stream's
gradient (12); every weight gradient cast from 16 bits to the fp32 parameter's (2 + 4 per
weight element). LayerNorm (autocast runs ``layer_norm`` in fp32: one kernel of 8 bytes
on fp32) counts as ``"library"``. Gradient accumulation across micro-batches into the fp32
``.grad`` is not counted (Megatron-LM's fused weight-gradient accumulation is not either).

``"compiled"`` — ``torch.compile``'s TorchInductor fuses each chain of point-wise and
reduction ops between two library calls (GEMMs, the attention kernel) into one generated
kernel that reads its inputs once and writes its outputs once (Ansel et al., "PyTorch 2",
ASPLOS 2024, §5): a norm 4, rotary 4 per tensor, the residual add with the next norm 8,
the gated activation 6 (ungated 4), an unfused attention's bias, softmax and dropout one
kernel of 4 (+ 1 for the mask). Backward: a norm's gradient with the residual's 8, the
gated activation's 10 (ungated 6), rotary's 4, the softmax's 6. Norm statistics (one value
per row) are not counted.

The embedding, the output head and the loss are not affected (:mod:`perfkit.calc.
timing_kernels` counts them as before): torchtitan compiles the transformer blocks only.
"""

from __future__ import annotations

from dataclasses import dataclass

from .activation_model import ActivationModel

__all__ = ["ELEMENTWISE_KERNELS", "Kernel", "forward_kernels", "backward_kernels",
           "norm_kernels", "weight_casts", "kernels_from_activations",
           "EAGER_RMSNORM", "EAGER_RMSNORM_GRAD", "EAGER_ROPE", "EAGER_ROPE_GRAD",
           "AMP_RMSNORM", "AMP_RMSNORM_GRAD", "AMP_CAST", "AMP_ADD", "AMP_SUM",
           "COMPILED_BYTES"]

#: The choices of ``Rates.elementwise_kernels`` (module docstring).
ELEMENTWISE_KERNELS = ("library", "eager", "amp", "compiled")

#: Eager RMSNorm in fp32: bytes per element of each of its six kernels (module docstring),
#: and of its gradient's twelve.
EAGER_RMSNORM = (6.0, 8.0, 4.0, 8.0, 6.0, 4.0)
EAGER_RMSNORM_GRAD = (4.0, 6.0, 2.0, 6.0, 8.0, 12.0, 4.0, 4.0, 8.0, 12.0, 12.0, 6.0)
#: RMSNorm on fp32 input under autocast (``"amp"``, module docstring), forward and backward.
AMP_RMSNORM = (8.0, 4.0, 8.0, 8.0)
AMP_RMSNORM_GRAD = (8.0, 12.0, 4.0, 8.0, 12.0, 4.0, 4.0, 8.0, 12.0, 12.0)
#: ``"amp"``: a cast of an fp32 tensor to 16 bits or back (4 + 2 bytes per element), a
#: residual add fp32 + 16-bit into fp32 (4 + 2 + 4), a sum of two fp32 tensors (12).
AMP_CAST, AMP_ADD, AMP_SUM = 6.0, 10.0, 12.0
#: Eager rotary embedding of one tensor (queries or keys), forward and backward.
EAGER_ROPE = (4.0, 2.0, 4.0, 4.0, 6.0)
EAGER_ROPE_GRAD = (4.0, 4.0, 2.0, 2.0, 2.0, 2.0, 2.0, 6.0, 6.0)

#: Compiled (fused) kernels' bytes per element (module docstring).
COMPILED_BYTES = {"norm": 4.0, "rope": 4.0, "add_norm": 8.0, "act_gated": 6.0, "act": 4.0,
                  "softmax": 4.0, "norm_grad": 8.0, "act_gated_grad": 10.0,
                  "act_grad": 6.0, "rope_grad": 4.0, "softmax_grad": 6.0}


@dataclass(frozen=True)
class Kernel:
    """One memory-bound kernel: ``bytes_per_element`` over the tensor ``over`` names
    (module docstring), and the op tag the recompute selection reads
    (:data:`perfkit.calc.recompute_ops.OP_TAGS`; ``"a+b"``: a fused kernel of both)."""

    bytes_per_element: float
    over: str
    tag: str = ""


def norm_kernels(kind: str, rms: bool, norm_bytes: float, tag: str = "") -> list[Kernel]:
    """A norm's forward kernels: ``"compiled"`` one of 4 bytes; ``"eager"`` RMSNorm's
    six and two per row (:data:`EAGER_RMSNORM`); otherwise (and for LayerNorm, eager)
    one of 8, or a cast to fp32 (6) and the norm (8) where ``norm_bytes`` > 2 (MindFormers'
    RmsNorm)."""
    if kind == "compiled":
        return [Kernel(COMPILED_BYTES["norm"], "hidden", tag)]
    if kind in ("eager", "amp") and rms:
        chain = EAGER_RMSNORM if kind == "eager" else AMP_RMSNORM
        return [*(Kernel(b, "hidden", tag) for b in chain),
                Kernel(8.0, "rows", tag), Kernel(8.0, "rows", tag)]
    if rms and norm_bytes > 2:
        return [Kernel(6.0, "hidden", tag), Kernel(8.0, "hidden", tag)]
    return [Kernel(8.0, "hidden", tag)]


def _rope(kind: str) -> list[Kernel]:
    if kind == "compiled":
        return [Kernel(COMPILED_BYTES["rope"], "qk", "rope")]
    if kind in ("eager", "amp"):
        return [Kernel(b, t, "rope") for t in ("q", "k") for b in EAGER_ROPE]
    return [Kernel(6.0, "q", "rope"), Kernel(6.0, "k", "rope")]


def forward_kernels(kind: str, rms: bool, norm_bytes: float, gated: bool, dropout: bool,
                    rope: bool, alibi: bool, flash: bool) -> dict[str, list[Kernel]]:
    """The forward's memory-bound kernels of one layer, by place: ``"attn_norm"``,
    ``"rope"``, ``"softmax"`` (unfused attention only), ``"add_norm"`` (the residual add
    and the MLP's norm), ``"act"``, ``"residual"`` (after the MLP)."""
    drop = float(dropout)
    add = AMP_ADD if kind == "amp" else 6.0  # a residual add (fp32 stream under "amp")
    out: dict[str, list[Kernel]] = {"attn_norm": norm_kernels(kind, rms, norm_bytes,
                                                              "attn_norm"),
                                    "rope": _rope(kind) if rope else [], "softmax": []}
    if not flash:
        if kind == "compiled":
            out["softmax"] = [Kernel(COMPILED_BYTES["softmax"] + drop, "scores", "core")]
        else:
            out["softmax"] = [Kernel(4.0, "scores", "core")] \
                + ([Kernel(4.0, "scores", "core")] if alibi else []) \
                + ([Kernel(5.0, "scores", "core")] if dropout else [])
    if kind == "compiled":
        out["add_norm"] = [Kernel(COMPILED_BYTES["add_norm"] + drop, "hidden",
                                  "add+mlp_norm")]
        out["act"] = [Kernel(COMPILED_BYTES["act_gated" if gated else "act"], "act", "act")]
    else:
        out["add_norm"] = [Kernel(add + drop, "hidden", "add"),
                           *norm_kernels(kind, rms, norm_bytes, "mlp_norm")]
        out["act"] = [Kernel(4.0, "act", "act"), Kernel(6.0, "act", "act")] if gated \
            else [Kernel(4.0, "act", "act")]
    if kind == "amp":  # the fp32 norm outputs cast for the GEMMs they feed
        out["attn_norm"].append(Kernel(AMP_CAST, "hidden", "attn_norm"))
        out["add_norm"] += [Kernel(AMP_CAST, "hidden", "mlp_norm")] * (2 if gated else 1)
    out["residual"] = [Kernel(add + drop, "hidden", "mlp_residual")]
    return out


def backward_kernels(kind: str, rms: bool, norm_bytes: float, gated: bool, dropout: bool,
                     rope: bool, alibi: bool, flash: bool) -> list[Kernel]:
    """The backward's memory-bound kernels of one layer (the GEMMs' and the attention
    kernel's are :mod:`perfkit.calc.timing_kernels`'): the softmax's (unfused attention),
    the activation's, the norms' and residuals', rotary's, dropout's."""
    drop = float(dropout)
    if kind == "compiled":
        out = [Kernel(COMPILED_BYTES["softmax_grad"] + drop, "scores")] if not flash else []
        out.append(Kernel(COMPILED_BYTES["act_gated_grad" if gated else "act_grad"], "act",
                          "act"))
        out += [Kernel(COMPILED_BYTES["norm_grad"] + drop, "hidden")] * 2
        if rope:
            out.append(Kernel(COMPILED_BYTES["rope_grad"], "qk"))
        return out
    out = [] if flash else [Kernel(6.0, "scores")] + ([Kernel(5.0, "scores")] if dropout
                                                      else [])
    out += [Kernel(6.0, "act", "act")] * (3 if gated else 1)
    if kind == "amp":
        norm_grad = [Kernel(b, "hidden") for b in (AMP_RMSNORM_GRAD if rms else (12.0,))]
        mlp_in = [Kernel(AMP_CAST, "hidden")] * 2 + [Kernel(AMP_SUM, "hidden")] if gated \
            else [Kernel(AMP_CAST, "hidden")]
        out += [Kernel(AMP_CAST, "hidden"), *mlp_in, *norm_grad, Kernel(AMP_SUM, "hidden"),
                Kernel(AMP_CAST, "hidden"), Kernel(AMP_CAST, "hidden"), *norm_grad,
                Kernel(AMP_SUM, "hidden")]
    else:
        norm_grad = [Kernel(b, "hidden") for b in EAGER_RMSNORM_GRAD] \
            if kind == "eager" and rms else [Kernel(12.0, "hidden")]
        out += [Kernel(6.0, "hidden"), *norm_grad, Kernel(6.0, "hidden"), *norm_grad,
                Kernel(6.0, "hidden")]
    if rope:
        out += [Kernel(b, t) for t in ("q", "k") for b in EAGER_ROPE_GRAD] \
            if kind in ("eager", "amp") else [Kernel(6.0, "q"), Kernel(6.0, "k")]
    if dropout:
        out += [Kernel(5.0, "hidden"), Kernel(5.0, "hidden")]
    return out


def weight_casts(kind: str) -> float:
    """Bytes per weight element that each GEMM's weight cast moves per pass: 6 under
    ``"amp"`` (fp32 → 16 bits in the forward, the gradient 16 bits → fp32 in the backward;
    module docstring), else 0 (the weights are 16-bit already, or the library casts them
    once per step)."""
    return AMP_CAST if kind == "amp" else 0.0


def kernels_from_activations(model: ActivationModel) -> tuple[str, str]:
    """The count a profile's operators show, read from the
    :class:`~perfkit.calc.ActivationModel` its job reads
    (:func:`perfkit.job.activations.read_operator_extras`), and why: ``"amp"`` where the
    norm or rotary ran as separate operators on an fp32 residual stream (an fp32
    embedding table in a 16-bit run: the weights are fp32 and autocast casts them),
    ``"eager"`` where they ran as separate operators otherwise, else ``"library"`` (a
    fused norm kernel, or nothing read). ``"compiled"`` is not read (set it)."""
    ops = " and ".join(w for w, on in (("RMSNorm", model.unfused_norm),
                                       ("rotary", model.unfused_rotary)) if on)
    separate = bool(ops)
    if separate and model.input_bytes == 4.0:
        return "amp", (f"{ops} as separate operators on an fp32 residual stream (an fp32 "
                       "embedding table in a 16-bit run: fp32 weights under autocast)")
    if separate:
        return "eager", f"{ops} as separate operators"
    return "library", "no norm or rotary as separate operators"
