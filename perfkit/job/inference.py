"""An inference step's experts and tokens: what vLLM's fused MoE and its GEMMs show.

:func:`read_fused_moe_fields` puts ``num_experts`` (the router logits' width), the MLP
kind where the fused kernels name a gated activation, and the reasons the expert FFN width
and the experts per token stay unknown (:mod:`perfkit.analysis.shapes.fused_moe`).
:func:`read_step_tokens` keeps, in :attr:`perfkit.Job.observed`, the tokens one forward
step takes (:data:`STEP_TOKENS`) and the rows the output layer turns into logits
(:data:`LOGITS_ROWS`): an inference step's FLOPs need them
(:func:`perfkit.calc.inference.inference_forward_flops`), where a training step's come
from its batch and sequence length.
"""

from __future__ import annotations

from typing import Any

from ..analysis._frames import is_lazy
from ..analysis._util import table
from ..analysis.shapes.fused_moe import logits_rows, read_fused_moe, step_tokens
from .fields import FieldValue, Readings

__all__ = ["STEP_TOKENS", "LOGITS_ROWS", "read_fused_moe_fields", "read_step_tokens"]

#: Tokens of one forward step (the rows of most of its linear layers), in Job.observed.
STEP_TOKENS = "step_tokens"
#: Rows the output layer turns into logits in one step, in Job.observed.
LOGITS_ROWS = "logits_rows"


def _tables(profile: Any) -> tuple[Any, Any] | None:
    if is_lazy(profile):
        return None
    return table(profile, "ops"), table(profile, "kernels")


def read_fused_moe_fields(profile: Any, out: Readings) -> None:
    """Put the expert count, the MLP kind and the reasons for what stays unknown where the
    profile runs vLLM's fused MoE layer (nothing otherwise)."""
    frames = _tables(profile)
    if frames is None:
        return
    moe = read_fused_moe(*frames, hidden_size=out["hidden_size"].value
                         if "hidden_size" in out else None)
    if moe is None:
        return
    out.put("num_experts", moe.experts, moe.experts_detail)
    out.put("moe_top_k", None, moe.top_k_detail)
    if out.get("ffn_hidden_size", FieldValue(None, "", "")).value is None:
        out.put("ffn_hidden_size", None, moe.ffn_detail)
    if out.get("mlp", FieldValue(None, "", "")).value is None and moe.gated is not None:
        out.put("mlp", "gated" if moe.gated else "gpt", moe.gated_detail)


def read_step_tokens(profile: Any, out: dict[str, FieldValue], tp: int | None) -> None:
    """Keep :data:`STEP_TOKENS` and :data:`LOGITS_ROWS` where the operators show them
    (the logits need the vocabulary read: its rows per rank are ``vocab / tp``)."""
    frames = _tables(profile)
    if frames is None:
        return
    ops = frames[0]
    tokens = step_tokens(ops)
    if tokens is None:
        return
    out[STEP_TOKENS] = FieldValue(tokens[0], "profile", tokens[1])
    vocab = out["vocab_size"].value if "vocab_size" in out else None
    if vocab:
        rows = logits_rows(ops, vocab // (tp or 1)) if vocab % (tp or 1) == 0 else None
        rows = rows or logits_rows(ops, vocab)
        if rows is not None:
            out[LOGITS_ROWS] = FieldValue(rows[0], "profile", rows[1])
