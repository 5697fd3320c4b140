"""llm-analysis's training activation memory, for a ModelSpec and ParallelConfig.

Source: the ``llm-analysis`` package on PyPI, release 0.2.2 (``pip install llm-analysis``;
``llm_analysis/analysis.py``: ``get_activation_memory_per_layer_attn``,
``get_activation_memory_per_layer_mlp``, ``get_activation_memory_per_layernorm``,
``get_activation_memory_output_embedding``, ``get_activation_memory_per_layer`` and
``LLMAnalysis.training``). The GitHub head (cli99/llm-analysis d841e40) differs: it adds
the input embedding and keeps the final norm under full recompute, splits MoE differently
and has more recompute kinds; perfkit follows the release users install.

Per layer, with 2-byte activations, ``sp = tp`` under sequence parallelism (else 1), the
defaults ``flash_attn=True``, ``softmax_dropout=False``, ``layernorm_dtype_bytes=4``::

    attention = 2·(sbh/sp + 4·sbh/tp) + sbh/sp                      (+ attention dropout mask)
                + 2·(2·sbh + 4·a·s·b)/tp      flash attention, no recompute
                + 2·2·a·s²·b/tp (+ a·s²·b/tp with softmax dropout)   without flash
                + 0                            selective recompute (ATTN_COMPUTE)
    mlp       = k·(E/ep)·(2·sbh/sp + 4·(f/h)·sbh/tp)                (f: the expert width;
                                                                      k·E/ep = 1 when dense)
    norms     = 2 · layernorm_dtype_bytes · sbh/sp
    full recompute: 2·sbh/tp per layer

and for the whole job (``LLMAnalysis.training``, "the first stage must store p × L/p = L
layers worth of activations"): ``L × per layer + 2·s·b·V/tp`` (the logits) ``+`` one more
norm (not under full recompute). There is no pipeline in-flight count, no ``m`` cap, no
interleaving term. A gated MLP is costed like a two-GEMM one of the same width. With
context parallelism perfkit uses the local ``s/cp`` tokens (queries) against ``s`` keys
(llm-analysis has no ``cp``).
"""

from __future__ import annotations

from ..specs import ModelSpec

__all__ = ["llm_analysis_activation_per_layer", "llm_analysis_activation_extra"]


def llm_analysis_activation_per_layer(model: ModelSpec, micro_batch_size: int, tp: int,
                                      sequence_parallel: bool, recompute: str,
                                      flash_attention: bool = True,
                                      softmax_dropout: bool = False,
                                      layernorm_bytes: float = 4.0, ep: int = 1,
                                      cp: int = 1) -> float:
    """``get_activation_memory_per_layer`` (training) of llm-analysis 0.2.2, in bytes.

    ``recompute``: ``"none"`` (NONE), ``"selective"`` (SELECTIVE: no attention-core
    tensors) or ``"full"`` (FULL).
    """
    s_keys = model.seq_length
    s = s_keys / cp
    b, h, a = micro_batch_size, model.hidden_size, model.num_attention_heads
    sp = tp if sequence_parallel else 1
    sbh = s * b * h
    if recompute == "full":
        return sbh * 2 / tp
    if recompute == "selective":
        core = 0.0
    elif flash_attention:
        core = (2 * sbh + 4 * a * s * b) * 2 / tp
    else:
        core = 2 * a * s * s_keys * b * 2 / tp
        if softmax_dropout:
            core += a * s * s_keys * b / tp
    attention = (sbh / sp + 4 * sbh / tp) * 2 + core + sbh / sp
    if model.is_moe:
        width, routed = model.moe_ffn_hidden_size, model.moe_top_k * model.num_experts / ep
    else:
        width, routed = model.ffn_hidden_size, 1
    ratio = width / h
    mlp = 2 * sbh * routed / sp + (2 + 2) * ratio * sbh * routed / tp
    norms = 2 * sbh / sp * layernorm_bytes
    return attention + mlp + norms


def llm_analysis_activation_extra(model: ModelSpec, micro_batch_size: int, tp: int,
                                  sequence_parallel: bool, recompute: str,
                                  layernorm_bytes: float = 4.0, cp: int = 1) -> float:
    """What ``LLMAnalysis.training`` adds to ``L ×`` the per-layer bytes: the logits
    ``2·s·b·V/tp`` and the final norm ``layernorm_bytes·s·b·h/sp`` (0 under full
    recompute)."""
    s = model.seq_length / cp
    b, h = micro_batch_size, model.hidden_size
    sp = tp if sequence_parallel else 1
    logits = model.vocab_size * b * s * 2 / tp
    norm = 0.0 if recompute == "full" else s * b * h / sp * layernorm_bytes
    return logits + norm
