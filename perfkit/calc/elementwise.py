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

__all__ = ["ELEMENTWISE_KERNELS", "Kernel", "forward_kernels", "backward_kernels",
           "norm_kernels",
           "EAGER_RMSNORM", "EAGER_RMSNORM_GRAD", "EAGER_ROPE", "EAGER_ROPE_GRAD",
           "COMPILED_BYTES"]

#: The choices of ``Rates.elementwise_kernels`` (module docstring).
ELEMENTWISE_KERNELS = ("library", "eager", "compiled")

#: Eager RMSNorm in fp32: bytes per element of each of its six kernels (module docstring),
#: and of its gradient's twelve.
EAGER_RMSNORM = (6.0, 8.0, 4.0, 8.0, 6.0, 4.0)
EAGER_RMSNORM_GRAD = (4.0, 6.0, 2.0, 6.0, 8.0, 12.0, 4.0, 4.0, 8.0, 12.0, 12.0, 6.0)
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
    if kind == "eager" and rms:
        return [*(Kernel(b, "hidden", tag) for b in EAGER_RMSNORM),
                Kernel(8.0, "rows", tag), Kernel(8.0, "rows", tag)]
    if rms and norm_bytes > 2:
        return [Kernel(6.0, "hidden", tag), Kernel(8.0, "hidden", tag)]
    return [Kernel(8.0, "hidden", tag)]


def _rope(kind: str) -> list[Kernel]:
    if kind == "compiled":
        return [Kernel(COMPILED_BYTES["rope"], "qk", "rope")]
    if kind == "eager":
        return [Kernel(b, t, "rope") for t in ("q", "k") for b in EAGER_ROPE]
    return [Kernel(6.0, "q", "rope"), Kernel(6.0, "k", "rope")]


def forward_kernels(kind: str, rms: bool, norm_bytes: float, gated: bool, dropout: bool,
                    rope: bool, alibi: bool, flash: bool) -> dict[str, list[Kernel]]:
    """The forward's memory-bound kernels of one layer, by place: ``"attn_norm"``,
    ``"rope"``, ``"softmax"`` (unfused attention only), ``"add_norm"`` (the residual add
    and the MLP's norm), ``"act"``, ``"residual"`` (after the MLP)."""
    drop = float(dropout)
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
        out["add_norm"] = [Kernel(6.0 + drop, "hidden", "add"),
                           *norm_kernels(kind, rms, norm_bytes, "mlp_norm")]
        out["act"] = [Kernel(4.0, "act", "act"), Kernel(6.0, "act", "act")] if gated \
            else [Kernel(4.0, "act", "act")]
    out["residual"] = [Kernel(6.0 + drop, "hidden", "mlp_residual")]
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
    norm_grad = [Kernel(b, "hidden") for b in EAGER_RMSNORM_GRAD] \
        if kind == "eager" and rms else [Kernel(12.0, "hidden")]
    out += [Kernel(6.0, "hidden"), *norm_grad, Kernel(6.0, "hidden"), *norm_grad,
            Kernel(6.0, "hidden")]
    if rope:
        out += [Kernel(b, t) for t in ("q", "k") for b in EAGER_ROPE_GRAD] \
            if kind == "eager" else [Kernel(6.0, "q"), Kernel(6.0, "k")]
    if dropout:
        out += [Kernel(5.0, "hidden"), Kernel(5.0, "hidden")]
    return out
