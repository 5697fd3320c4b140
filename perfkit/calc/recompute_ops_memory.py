"""The activation bytes op-level selective recompute does not keep
(:func:`op_dropped_terms`; the table of tensors and its source are in
:mod:`perfkit.calc.recompute_ops`'s docstring, which re-exports it).

Apart from the time module so that :mod:`perfkit.calc.activation` can read it without
importing the step model.
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..specs import ModelSpec
from .activation_model import ActivationModel

__all__ = ["op_dropped_terms"]


def _check_ops(model: ModelSpec, ops: tuple[str, ...]) -> None:
    if model.mlp != "gated" and {"gate", "up"} & set(ops):
        raise InvalidArgumentError("recompute_ops", "'gate' and 'up' need a gated MLP; "
                                   "name 'fc1' for this model", ops)
    if model.is_mla and {"q", "k", "v"} & set(ops):
        raise InvalidArgumentError("recompute_ops", "'q', 'k', 'v' are not separate GEMMs "
                                   "of an MLA model; name 'qkv'", ops)


def op_dropped_terms(model: ModelSpec, am: ActivationModel, ops: tuple[str, ...]
                     ) -> tuple[float, float]:
    """Bytes per ``s·b·h`` a layer does not keep when ``ops`` rerun: ``(whole, split)``.

    ``whole`` is kept whole by tensor parallelism (``/t`` only with sequence parallel),
    ``split`` is divided by ``t`` (the ``s²`` terms included). See the module docstring.
    """
    _check_ops(model, ops)
    s, h, a = model.seq_length, model.hidden_size, model.num_attention_heads
    if am.accounting == "table":
        e, dropout, nb, gated, f = 1.0, True, 2.0, False, 4.0
        qw = kw = vw = 2.0
        s2 = 5.0 * a * s / h
        rope = unfused = 0.0
    else:
        e = am.element_bytes / 2.0
        dropout = (model.mlp == "gpt") if am.dropout is None else am.dropout
        nb, gated = am.norm_bytes, model.mlp == "gated"
        if model.is_moe:
            f = (model.moe_ffn_hidden_size * model.moe_top_k
                 + model.shared_ffn_hidden_size * model.num_shared_experts) / h
        else:
            f = model.ffn_hidden_size / h
        g, dqk, dv = model.num_kv_heads, model.qk_head_dim, model.value_head_dim
        if not model.is_mla and model.attention_width == h:
            qw, kw, vw = 2.0 * e, 2.0 * e / model.gqa_ratio, 2.0 * e / model.gqa_ratio
        else:
            qw, kw, vw = (2.0 * e * a * dqk / h, 2.0 * e * g * dqk / h, 2.0 * e * g * dv / h)
        if am.flash_attention:
            s2 = 4.0 * a / h
        else:
            s2 = (2.0 * e + ((1.0 + 2.0 * e) if dropout else 0.0)) * a * s / h
        rope = 2.0 * e * (a + g) * dqk / h \
            if am.unfused_rotary and model.position_embedding == "rope" else 0.0
        unfused = am.norm_bytes if am.unfused_norm else 0.0
    mask = 1.0 if dropout else 0.0
    whole = {"attn_norm": 2.0 * e + unfused, "attn_residual": nb + mask,
             "mlp_norm": 2.0 * e + unfused, "mlp_residual": mask}
    mlp_in = (4.0 if gated else 2.0) * f * e
    split = {"q": qw, "k": kw, "v": vw, "qkv": qw + kw + vw, "rope": rope, "core": s2,
             "fc1": mlp_in, "gate": mlp_in / 2, "up": mlp_in / 2,
             "act": (4.0 if gated else 2.0) * f * e}
    return (sum(whole.get(op, 0.0) for op in ops), sum(split.get(op, 0.0) for op in ops))
