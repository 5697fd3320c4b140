"""An inference step's experts and tokens: what vLLM's fused MoE and its GEMMs show.

:func:`read_fused_moe_fields` puts ``num_experts`` (the router logits' width), the MLP
kind where the fused kernels name a gated activation, and the reasons the expert FFN width
and the experts per token stay unknown (:mod:`perfkit.analysis.shapes.fused_moe`).
:func:`read_step_tokens` keeps, in :attr:`perfkit.Job.observed`, the tokens one forward
step takes (:data:`STEP_TOKENS`) and the rows the output layer turns into logits
(:data:`LOGITS_ROWS`): an inference step's FLOPs need them
(:func:`perfkit.calc.inference.inference_forward_flops`), where a training step's come
from its batch and sequence length.

Where the step packs its tokens (vLLM: its linear layers take ``(tokens, width)`` and its
attention ``(tokens, heads, head size)``, :func:`perfkit.analysis.shapes.fused_moe.
packed_tokens`), the trace shows how many tokens the step takes but not how they split into
sequences. The job's batch is then those tokens as one batch row: sequence length = the
step's tokens, micro-batch 1 (:data:`PACKED_TOKENS` says so), so that every figure that
counts tokens per step (global batch × sequence length: throughput, the memory theory, the
Planner) counts the tokens the trace shows; a Hugging Face config's context
(``max_position_embeddings``, 131,072 tokens for gpt-oss) does not replace them
(:func:`perfkit.job.config.read_job_config` keeps a sequence length the profile gives).
"""

from __future__ import annotations

from typing import Any

from ..analysis._frames import is_lazy
from ..analysis._util import table
from ..analysis.shapes.fused_moe import logits_rows, packed_tokens, read_fused_moe, step_tokens
from ..analysis.shapes.logits import logit_bytes
from .fields import FieldValue, Readings
from .global_batch import read_global_batch

__all__ = ["STEP_TOKENS", "LOGITS_ROWS", "LOGIT_BYTES", "PACKED_TOKENS",
           "read_fused_moe_fields", "read_step_tokens"]

#: Tokens of one forward step (the rows of most of its linear layers), in Job.observed.
STEP_TOKENS = "step_tokens"
#: Rows the output layer turns into logits in one step, in Job.observed.
LOGITS_ROWS = "logits_rows"
#: Bytes held per logit (the output layer's type, + 4 for an fp32 upcast), in Job.observed:
#: what an inference step's memory counts (:mod:`perfkit.analysis.shapes.logits`).
LOGIT_BYTES = "logit_bytes"
#: In Job.observed where the step packs its tokens (no split into sequences recorded): the
#: job's sequence length is then the step's tokens, not the length of a sequence.
PACKED_TOKENS = "packed_tokens"


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


def read_step_tokens(profile: Any, out: Readings, tp: int | None) -> None:
    """Keep :data:`STEP_TOKENS` and :data:`LOGITS_ROWS` where the operators show them
    (the logits need the vocabulary read: its rows per rank are ``vocab / tp``); where the
    tokens come packed and no sequence length was read, put the batch as one row of the
    step's tokens (module docstring) and mark it with :data:`PACKED_TOKENS`."""
    frames = _tables(profile)
    if frames is None:
        return
    ops = frames[0]
    tokens = step_tokens(ops)
    if tokens is None:
        return
    out[STEP_TOKENS] = FieldValue(tokens[0], "profile", tokens[1])
    if packed_tokens(ops) and out.get("seq_length", FieldValue(None, "", "")).value is None:
        n = tokens[0]
        said = (f"the step's {n} tokens, packed into one batch row ({tokens[1]}); "
                + (out["seq_length"].detail if "seq_length" in out else
                   "the linear layers' inputs are (tokens, width): no split into sequences"))
        out.put("seq_length", n, f"{n} tokens per step, not a sequence length: {said}")
        out.put("micro_batch_size", 1, f"1 batch row: {said}")
        out[PACKED_TOKENS] = FieldValue(True, "profile", said)
        read_global_batch(out)
    vocab = out["vocab_size"].value if "vocab_size" in out else None
    if vocab:
        local = vocab // (tp or 1) if vocab % (tp or 1) == 0 else None
        rows = logits_rows(ops, local) if local else None
        width = local if rows else vocab
        rows = rows or logits_rows(ops, vocab)
        if rows is not None:
            out[LOGITS_ROWS] = FieldValue(rows[0], "profile", rows[1])
            size = logit_bytes(ops, width)
            if size is not None:
                out[LOGIT_BYTES] = FieldValue(size[0], "profile", size[1])
