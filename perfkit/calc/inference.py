"""FLOPs of an inference step (forward only) and its MFU.

An inference (or evaluation) step runs the forward pass once and no backward pass, so its
model FLOPs are one third of a training step's ``3 × forward`` (:mod:`perfkit.calc.flops`).
The count here is per GEMM, 2 FLOPs per multiply-add, forward only, over the tokens the
step takes — packed sequences need no sequence length:

``F = T · L · [2·h·(q + 2·kv) + 2·q·h + MLP] + R · 2·h·V (+ core)``

* ``q = a·d`` query width, ``kv = g·d`` key/value width (QKV projections, output
  projection);
* ``MLP = 2·h·f·(3 if gated else 2)`` for a dense layer; for a mixture of experts only
  the ``k`` experts a token is routed to count, plus the router:
  ``MLP = k · 2·h·f·(3 or 2) + 2·h·E`` (``f`` the expert FFN width);
* ``R`` rows of logits (vLLM computes them for the tokens it samples, not for every token
  of a prompt; 0 where the step runs no output layer);
* the attention core (``Q·Kᵀ`` and ``scores·V``), :func:`attention_core_flops`, needs
  each sequence's length: ``L · 4·n·s²·q`` for ``n`` sequences of ``s`` tokens, the full
  ``s × s`` scores as perfkit's training MFU counts them (Korthikanti et al. 2022, App. A:
  ``4·b·s²·h`` per layer). A packed trace (vLLM) records neither the split into sequences
  nor the keys cached before the step, so there it is left out and MFU is a lower bound;
  :func:`attention_core_bound` is the most it can add when no key comes from the cache:
  the ``T`` tokens as one sequence, ``L · 4·T²·q`` (``Σ s_i² ≤ (Σ s_i)²`` for sequences
  that share the ``T`` tokens). For 888 tokens of gpt-oss-120b (``L = 36``,
  ``q = 64 · 64``) that is 0.465 TFLOP, 5.8 % of the 8.09 TFLOP counted, in every layer as
  full ``888 × 888`` scores (gpt-oss's sliding-window layers attend to fewer keys).

Sources: Megatron-LM ``megatron/training/training.py`` ``num_floating_point_operations``
(HEAD; its ``3 ×`` forward-and-backward factor dropped: the per-GEMM terms ``h·(q + 2kv)``,
``q·h``, ``h·f·(3 or 2)·topk`` and ``h·V``), with the router GEMM ``2·h·E`` counted as
:func:`perfkit.calc.flops.layer_forward_flops` does (``count_router=True``); see
docs/calculators.md. MFU as PaLM (Chowdhery et al. 2022, App. B): model FLOPs / (step
time × devices × peak).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgumentError, check_positive
from ..specs import ModelSpec

__all__ = ["inference_forward_flops", "inference_layer_flops", "attention_core_flops",
           "attention_core_bound", "inference_mfu", "step_forward_flops", "model_fields",
           "STEP_FIELDS"]

#: The model fields :func:`step_forward_flops` needs.
STEP_FIELDS = ("num_layers", "hidden_size", "attention_width", "kv_width", "ffn_hidden_size",
               "vocab_size", "mlp", "num_experts", "moe_top_k")


def _count(name: str, value: int, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidArgumentError(name, f"must be an integer of at least {least}", value)
    return value


def inference_layer_flops(hidden_size: int, attention_width: int, kv_width: int,
                          ffn_hidden_size: int, mlp: str, num_experts: int = 1,
                          moe_top_k: int = 1) -> float:
    """Forward FLOPs of one layer per token, attention core left out (module docstring).

    ``2·h·(q + 2·kv) + 2·q·h + k·2·h·f·(3 if gated else 2) + (2·h·E if E > 1)``.
    """
    h, q, kv, f = (_count(n, v) for n, v in (("hidden_size", hidden_size),
                                              ("attention_width", attention_width),
                                              ("kv_width", kv_width),
                                              ("ffn_hidden_size", ffn_hidden_size)))
    e, k = _count("num_experts", num_experts), _count("moe_top_k", moe_top_k)
    if mlp not in ("gated", "gpt"):
        raise InvalidArgumentError("mlp", "must be 'gated' or 'gpt'", mlp)
    if k > e:
        raise InvalidArgumentError("moe_top_k", f"must be at most num_experts ({e})", k)
    gemms = 3 if mlp == "gated" else 2
    attention = 2.0 * h * (q + 2 * kv) + 2.0 * q * h
    experts = (k if e > 1 else 1) * 2.0 * h * f * gemms
    router = 2.0 * h * e if e > 1 else 0.0
    return attention + experts + router


def inference_forward_flops(tokens: int, num_layers: int, hidden_size: int,
                            attention_width: int, kv_width: int, ffn_hidden_size: int,
                            vocab_size: int, mlp: str, num_experts: int = 1,
                            moe_top_k: int = 1, logits_rows: int | None = None) -> float:
    """Model FLOPs of one inference step's forward pass (module docstring's ``F``).

    Parameters
    ----------
    tokens : int
        Tokens the step takes (``T``, all sequences packed together).
    num_layers, hidden_size, attention_width, kv_width, ffn_hidden_size, vocab_size : int
        ``L``, ``h``, ``q = a·d``, ``kv = g·d``, ``f`` (an expert's FFN width for a MoE)
        and ``V``.
    mlp : str
        ``"gated"`` (three GEMMs) or ``"gpt"`` (two).
    num_experts, moe_top_k : int
        ``E`` and ``k``; 1 and 1 for a dense model.
    logits_rows : int, optional
        ``R``, the rows turned into logits (default: every token; 0: no output layer).

    Returns
    -------
    float
        FLOPs, attention core not counted.
    """
    t, n_layers, v = (_count(n, x) for n, x in (("tokens", tokens), ("num_layers", num_layers),
                                                 ("vocab_size", vocab_size)))
    r = t if logits_rows is None else _count("logits_rows", logits_rows, 0)
    layer = inference_layer_flops(hidden_size, attention_width, kv_width, ffn_hidden_size,
                                  mlp, num_experts, moe_top_k)
    return t * n_layers * layer + r * 2.0 * hidden_size * v


def attention_core_flops(num_layers: int, attention_width: int, sequences: int,
                         seq_length: int) -> float:
    """Forward FLOPs of the attention core, ``L · 4·n·s²·q``: ``Q·Kᵀ`` and ``scores·V``
    (``2·s²·q`` each) for ``n`` sequences of ``s`` tokens, full ``s × s`` scores."""
    n_layers, q = _count("num_layers", num_layers), _count("attention_width", attention_width)
    n, s = _count("sequences", sequences), _count("seq_length", seq_length)
    return n_layers * 4.0 * n * s * s * q


def attention_core_bound(num_layers: int, attention_width: int, tokens: int) -> float:
    """The most FLOPs the attention core of ``tokens`` packed tokens can add when no key is
    cached from an earlier step: the tokens as one sequence, ``L · 4·T²·q`` (full
    ``T × T`` scores; any split into sequences gives ``L · 4·q·Σ s_i² ≤ L · 4·q·T²``).
    Keys cached before the step (a prefix cache, a chunked prompt, decoding) are not
    bounded by the trace: each query token may attend to the model's whole context."""
    return attention_core_flops(num_layers, attention_width, 1, tokens)


def inference_mfu(flops: float, step_time_s: float, devices: int, peak_flops: float) -> float:
    """``MFU = F / (step time × devices × peak)``, a fraction (PaLM App. B)."""
    f = check_positive("flops", flops)
    step = check_positive("step_time_s", step_time_s)
    peak = check_positive("peak_flops", peak_flops)
    return f / (step * _count("devices", devices) * peak)


def step_forward_flops(fields: Mapping[str, Any], tokens: int, logits_rows: int,
                       seq_length: int | None = None) -> tuple[float, int | None]:
    """One inference step's forward FLOPs from the model's :data:`STEP_FIELDS`.

    :func:`inference_forward_flops` over ``tokens`` with ``logits_rows`` rows of logits,
    plus :func:`attention_core_flops` where ``seq_length`` splits the tokens into whole
    sequences. Returns the FLOPs and the number of sequences whose attention core was
    counted (None: not counted). Pass ``seq_length`` only where the trace shows the
    sequences (``(batch, sequence, width)`` inputs), not where it packs the tokens.
    """
    f = fields
    flops = inference_forward_flops(
        int(tokens), f["num_layers"], f["hidden_size"], f["attention_width"], f["kv_width"],
        f["ffn_hidden_size"], f["vocab_size"], f["mlp"], f["num_experts"], f["moe_top_k"],
        int(logits_rows))
    if not seq_length or int(tokens) % int(seq_length):
        return flops, None
    sequences = int(tokens) // int(seq_length)
    return flops + attention_core_flops(f["num_layers"], f["attention_width"], sequences,
                                        int(seq_length)), sequences


def model_fields(model: ModelSpec) -> dict[str, Any] | None:
    """:data:`STEP_FIELDS` of a model, or None for a model this count does not cover
    (multi-latent attention, shared experts, dense first layers of a MoE)."""
    if model.is_mla or (model.is_moe and (model.num_shared_experts
                                          or model.first_dense_layers)):
        return None
    return {"num_layers": model.num_layers, "hidden_size": model.hidden_size,
            "attention_width": model.attention_width, "kv_width": model.kv_width,
            "ffn_hidden_size": model.moe_ffn_hidden_size if model.is_moe
            and model.moe_ffn_hidden_size else model.ffn_hidden_size,
            "vocab_size": model.vocab_size, "mlp": model.mlp,
            "num_experts": model.num_experts, "moe_top_k": model.moe_top_k}
