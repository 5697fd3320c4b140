"""Op-level selective recompute: the vocabulary of a layer's ops and the frameworks' presets.

``ParallelConfig(recompute="selective", recompute_ops=...)`` names the ops of a
transformer layer whose forward is rerun in the backward (their outputs are not stored).
The names are those of the kernel model (:mod:`perfkit.calc.timing_kernels`), in the order
a pre-norm layer runs them:

==================  =============================================================
``attn_norm``       the norm before attention (Megatron ``input_layernorm``)
``qkv``             the fused Q, K, V projection; or ``q``, ``k``, ``v`` one by one
``rope``            rotary embedding of Q and K
``core``            the attention core (scores, softmax, dropout, times V; fused or not)
``out_proj``        the attention output projection
``attn_residual``   the residual add (and dropout) after attention
``mlp_norm``        the norm before the MLP (Megatron ``pre_mlp_layernorm``)
``router``          the MoE router GEMM;  ``permute`` the token permutation
``fc1``             the MLP input GEMM(s); ``gate`` and ``up`` one by one (gated MLPs)
``act``             the activation (SiLU and the product, or GeLU)
``fc2``             the MLP output GEMM (``down``)
``mlp_residual``    the residual add (and dropout) after the MLP
==================  =============================================================

Aliases: ``attention``/``core_attn`` → ``core``; ``input_layernorm`` → ``attn_norm``;
``pre_mlp_layernorm`` → ``mlp_norm``; ``proj`` → ``out_proj``; ``down`` → ``fc2``;
Megatron's module names ``layernorm`` → both norms, ``mlp`` → ``fc1, act, fc2``,
``moe_act`` → ``act``.

Presets (a string instead of a tuple):

* ``"torchtitan-op-sac"`` — torchtitan's ``activation_checkpoint.mode = "selective"``,
  ``selective_ac_option = "op"`` (``_apply_ac_to_transformer_block``,
  ``torchtitan/models/llama3/infra/parallelize.py``): its ``_save_list`` keeps the
  flash/efficient SDPA output and every *other* ``aten.mm`` (a counter per layer: the
  1st, 3rd, ... are saved), everything else is recomputed. A Llama layer's ``mm`` run
  ``wq, wk, wv, wo, w1, w3, w2``: ``wq, wv, w1, w2`` are kept, so ``k``, ``out_proj``
  (``wo``) and ``up`` (``w3``) are recomputed, with the norms, rotary embedding, residual
  add and activation: ``attn_norm, k, rope, out_proj, attn_residual, mlp_norm, up, act``
  (the last residual add makes the layer's output, which the next layer keeps).
* ``"megatron-selective"`` — Megatron-LM ``--recompute-granularity selective`` with the
  default ``--recompute-modules core_attn`` (``megatron/training/arguments.py``):
  ``core``. Other module lists are the Megatron names above, e.g.
  ``("core_attn", "layernorm")``.
* ``"mindformers-select-recompute"`` — MindFormers' default ``select_recompute``
  patterns ``feed_forward\\.mul`` and ``feed_forward\\.w1\\.activation\\.silu``
  (``LayerSetting`` in ``mindformers/models/utils.py``): ``act``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InvalidArgumentError

__all__ = ["LAYER_OPS", "RECOMPUTE_OP_ALIASES", "RECOMPUTE_OP_PRESETS",
           "resolve_recompute_ops", "recompute_ops_text"]

#: The ops of one transformer layer that ``recompute_ops`` may name, in forward order.
LAYER_OPS = ("attn_norm", "qkv", "q", "k", "v", "rope", "core", "out_proj",
             "attn_residual", "mlp_norm", "router", "permute", "fc1", "gate", "up", "act",
             "fc2", "mlp_residual")

#: Other names of the ops (one name may stand for several ops: Megatron's modules).
RECOMPUTE_OP_ALIASES: dict[str, tuple[str, ...]] = {
    "attention": ("core",), "core_attn": ("core",), "input_layernorm": ("attn_norm",),
    "pre_mlp_layernorm": ("mlp_norm",), "proj": ("out_proj",), "down": ("fc2",),
    "layernorm": ("attn_norm", "mlp_norm"), "mlp": ("fc1", "act", "fc2"),
    "moe_act": ("act",),
}

#: Framework policies by name (see the module docstring for their sources).
RECOMPUTE_OP_PRESETS: dict[str, tuple[str, ...]] = {
    "torchtitan-op-sac": ("attn_norm", "k", "rope", "out_proj", "attn_residual",
                          "mlp_norm", "up", "act"),
    "megatron-selective": ("core",),
    "mindformers-select-recompute": ("act",),
}

#: Names that may not be given together (the fused GEMM and its parts).
_OVERLAPS = (("qkv", ("q", "k", "v")), ("fc1", ("gate", "up")))


def resolve_recompute_ops(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """The canonical op names of ``value``, in :data:`LAYER_OPS` order (None stays None).

    ``value`` is a preset name (:data:`RECOMPUTE_OP_PRESETS`) or a sequence of op names
    and aliases. Raises :class:`~perfkit.errors.InvalidArgumentError` naming an unknown
    name with the allowed ones, an empty list, or a fused GEMM given with its parts.
    """
    if value is None:
        return None
    if isinstance(value, str):
        if value in RECOMPUTE_OP_PRESETS:
            return RECOMPUTE_OP_PRESETS[value]
        raise InvalidArgumentError(
            "recompute_ops", f"unknown preset {value!r}; presets: "
            f"{', '.join(RECOMPUTE_OP_PRESETS)} (or a tuple of op names)", value)
    if not isinstance(value, Sequence) or not value:
        raise InvalidArgumentError("recompute_ops", "must be a preset name or a non-empty "
                                   "sequence of op names", value)
    names: set[str] = set()
    unknown = []
    for name in value:
        if name in LAYER_OPS:
            names.add(name)
        elif name in RECOMPUTE_OP_ALIASES:
            names.update(RECOMPUTE_OP_ALIASES[name])
        else:
            unknown.append(repr(name))
    if unknown:
        raise InvalidArgumentError(
            "recompute_ops", f"unknown op {', '.join(unknown)}; allowed: "
            f"{', '.join(LAYER_OPS)} (aliases: {', '.join(RECOMPUTE_OP_ALIASES)})", value)
    for whole, parts in _OVERLAPS:
        if whole in names and names.intersection(parts):
            raise InvalidArgumentError(
                "recompute_ops", f"{whole!r} is the fused GEMM of {', '.join(parts)}: "
                "name either it or its parts", value)
    return tuple(op for op in LAYER_OPS if op in names)


def recompute_ops_text(ops: Sequence[str] | None) -> str:
    """The op list in words for a page (``"core, act"``), or the preset's name."""
    if not ops:
        return ""
    for name, preset in RECOMPUTE_OP_PRESETS.items():
        if tuple(ops) == preset:
            return name
    return ", ".join(ops)
