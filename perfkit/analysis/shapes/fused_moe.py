"""What an inference step's operators show of its experts and its tokens.

vLLM runs a mixture-of-experts layer as one host operator, ``vllm::moe_forward``, whose
inputs are the hidden states ``(tokens, hidden)`` and the router's logits ``(tokens, E)``:
one column per expert, all ``E`` of them on every rank (vLLM's router is a replicated
linear layer, not split over tp). Inside it, FlashInfer's TensorRT-LLM kernels run the
experts (the ``bmm_...`` batched GEMMs, the routing and ``moe::dev::finalize`` kernels).
Those kernels record no input shapes, so:

* the **expert count** ``E`` is the width of the router's logits (checked against the
  router GEMM ``h → E`` on the same tokens where the trace has it);
* the **experts per token** (top-k) are not recorded. The finalize kernel's template
  argument says only which multiple it is built for: FlashInfer's ``LAUNCH_TOPK_EXPW``
  (``include/flashinfer/trtllm/fused_moe/DevKernel.h``) compiles it with 4 when
  ``top_k % 4 == 0``, 2 when ``top_k % 2 == 0``, else 1. That is said, not used as a value;
* the **expert FFN width** is inside the batched GEMMs, whose names give only the tile
  (``t128x16x256``); their operand is padded (the layer's input has more columns than the
  hidden size), so no width is read;
* the MLP is **gated** when the first batched GEMM fuses a gated activation
  (``_swiGlu_`` / ``_geGlu_`` in its name).

:func:`step_tokens` reads the tokens of one forward step (the rows of most of its matrix
products), :func:`packed_tokens` whether those inputs split them into sequences
(``(batch, sequence, width)``) or pack them (``(tokens, width)``, as vLLM does), and
:func:`logits_rows` the rows the output layer turns into logits (vLLM
computes them for the tokens it samples only, not for every token of a prompt).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from math import prod

import pandas as pd

from ..._text_dtype import TEXT
from ...format import counted
from .records import parse_shapes

__all__ = ["FusedMoe", "read_fused_moe", "step_tokens", "packed_tokens", "logits_rows",
           "MOE_OPERATOR"]

#: vLLM's fused MoE host operators (``moe_forward``, ``moe_forward_shared``).
MOE_OPERATOR = re.compile(r"^vllm::moe_forward")
_FINALIZE = re.compile(r"moe::dev::finalize::KernelParams<[^<>,]+,[^<>,]+,\s*(\d+)\s*,")
_GATED = re.compile(r"_(swiglu|geglu)", re.I)
_BATCHED_GEMM = re.compile(r"^bmm_")
_TILE = re.compile(r"_t(\d+x\d+x\d+)")
_GEMMS = ("aten::linear", "aten::addmm", "aten::mm", "aten::matmul")


@dataclass(frozen=True)
class FusedMoe:
    """What vLLM's fused MoE operators show (see the module docstring).

    ``experts`` is None where no router logits were seen; ``top_k`` and ``ffn`` are never
    read from the kernels (their ``*_detail`` says what was seen); ``gated`` is None
    where no batched GEMM names an activation.
    """

    layers: int
    tokens: int
    experts: int | None
    experts_detail: str
    top_k_detail: str
    gated: bool | None
    gated_detail: str
    ffn_detail: str


def _rank0(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty or "rank" not in frame.columns:
        return frame
    ranks = frame["rank"].dropna()
    return frame[frame["rank"] == ranks.min()] if len(ranks) else frame


def _names(frame: pd.DataFrame, column: str = "name") -> pd.Series:
    return frame[column].astype(TEXT).fillna("")


def read_fused_moe(ops: pd.DataFrame, kernels: pd.DataFrame,
                   hidden_size: int | None = None) -> FusedMoe | None:
    """Read the experts from vLLM's fused MoE operators of one rank (the lowest).

    Parameters
    ----------
    ops, kernels : pandas.DataFrame
        The canonical ``ops`` and ``kernels`` tables (``name``, ``input_shapes``; the
        kernels' ``op_name`` links them to the operator that launched them).
    hidden_size : int, optional
        The hidden size read elsewhere (the embedding table), to say how the layer's input
        is padded.

    Returns
    -------
    FusedMoe or None
        None where no ``vllm::moe_forward`` operator with shapes is in the profile.
    """
    if ops.empty or "input_shapes" not in ops.columns:
        return None
    ops = _rank0(ops)
    calls = ops[_names(ops).str.contains(MOE_OPERATOR)]
    shapes = [parse_shapes(t) for t in calls["input_shapes"]]
    shapes = [s for s in shapes if len(s) >= 2 and len(s[0]) == 2 and len(s[1]) == 2]
    if not shapes:
        return None
    n = len(shapes)
    hidden_states, logits = Counter((s[0], s[1]) for s in shapes).most_common(1)[0][0]
    tokens, width = hidden_states
    rows, experts = logits
    where = f"vllm::moe_forward ({counted(n, 'call')})"
    if rows != tokens:
        exp, exp_detail = None, (f"{where} takes {tokens} hidden states but {rows} rows of "
                                 "router logits: the expert count is not read")
    else:
        exp = experts
        exp_detail = (f"{where} takes the router's logits as ({rows}, {experts}), one column "
                      f"per expert: {experts} experts (vLLM's router is not split over tp)")
        router = _router_width(ops, tokens, experts)
        if router:
            exp_detail += f"; the router GEMM {router} → {experts} over the same {tokens} tokens"
    k = _rank0(kernels) if not kernels.empty else kernels
    inside = k[_names(k, "op_name").str.contains(MOE_OPERATOR)] if "op_name" in k.columns \
        else k.iloc[0:0]
    names = _names(inside).unique().tolist()
    built = sorted({int(m[1]) for m in map(_FINALIZE.search, names) if m})
    if built:
        top_k = (f"not recorded: the kernels inside {where} take no shapes, and their finalize "
                 f"kernel is built for a top-k that is a multiple of {built[-1]} (FlashInfer "
                 "DevKernel.h LAUNCH_TOPK_EXPW), which does not say which")
    else:
        top_k = f"not recorded: the kernels inside {where} take no shapes"
    gemms = [s for s in names if _BATCHED_GEMM.search(s)]
    acts = sorted({m[1].lower() for m in map(_GATED.search, gemms) if m})
    if acts:
        gated, gated_detail = True, (f"the fused MoE's first batched GEMM applies a gated "
                                     f"activation ({acts[0]} in its kernel name): gated")
    else:
        gated, gated_detail = None, f"no batched GEMM inside {where} names its activation"
    tiles = sorted({m[1] for m in map(_TILE.search, gemms) if m})
    padded = (f"; the layer's input has {width} columns for the hidden size {hidden_size} "
              "(padded)" if hidden_size and width != hidden_size else "")
    ffn = ("the experts' FFN runs inside vllm::moe_forward's batched GEMMs"
           + (f" (tile {', '.join(tiles)})" if tiles else "")
           + ", which record no shapes" + padded + ": the expert FFN width is not read")
    return FusedMoe(layers=n, tokens=tokens, experts=exp, experts_detail=exp_detail,
                    top_k_detail=top_k, gated=gated, gated_detail=gated_detail,
                    ffn_detail=ffn)


def _gemm_shapes(ops: pd.DataFrame) -> list[list[tuple[int, ...]]]:
    """The input shapes of the host matrix products (``aten::linear`` / ``addmm`` / ...)."""
    rows = ops[_names(ops).isin(_GEMMS)]
    return [parse_shapes(t) for t in rows["input_shapes"]]


def _router_width(ops: pd.DataFrame, tokens: int, experts: int) -> int | None:
    """The input width of a linear layer ``(tokens, h) → experts``, or None."""
    for s in _gemm_shapes(ops):
        if len(s) >= 2 and len(s[0]) == 2 and len(s[1]) == 2 and s[0][0] == tokens \
                and s[1][0] == experts and s[1][1] == s[0][1]:
            return s[0][1]
    return None


def step_tokens(ops: pd.DataFrame) -> tuple[int, str] | None:
    """The tokens of one forward step: the rows most of the host ``aten::linear`` products
    of one rank (the lowest) take, with the sentence that says so; None without any."""
    if ops.empty or "input_shapes" not in ops.columns:
        return None
    ops = _rank0(ops)
    linear = [s for s in (parse_shapes(t) for t in
                          ops.loc[_names(ops) == "aten::linear", "input_shapes"]) if s and s[0]]
    if not linear:
        return None
    rows = Counter(prod(s[0][:-1]) for s in linear)
    (n, hits), = rows.most_common(1)
    return n, (f"{hits} of the {counted(len(linear), 'linear layer')} (aten::linear) take "
               f"{n} rows: {n} tokens per step")


def packed_tokens(ops: pd.DataFrame) -> bool | None:
    """Whether the step's tokens come packed: True where most host ``aten::linear``
    products of one rank (the lowest) take a 2-D input ``(tokens, width)`` (vLLM packs
    its requests' tokens together, so the trace shows no split into sequences), False
    where they take ``(batch, sequence, width)``; None without any."""
    if ops.empty or "input_shapes" not in ops.columns:
        return None
    ops = _rank0(ops)
    ranks = Counter(len(s[0]) for s in (parse_shapes(t) for t in
                                        ops.loc[_names(ops) == "aten::linear", "input_shapes"])
                    if s and s[0])
    if not ranks:
        return None
    return ranks.most_common(1)[0][0] == 2


def logits_rows(ops: pd.DataFrame, vocab_rows: int) -> tuple[int, str] | None:
    """The rows the output layer turns into logits: those of the ``aten::linear`` whose
    weight holds ``vocab_rows`` rows (the vocabulary, or one tp rank's slice of it), on
    one rank (the lowest); None where no such product is seen."""
    if ops.empty or "input_shapes" not in ops.columns:
        return None
    ops = _rank0(ops)
    for s in (parse_shapes(t) for t in ops.loc[_names(ops) == "aten::linear",
                                               "input_shapes"]):
        if len(s) >= 2 and len(s[1]) == 2 and s[1][0] == vocab_rows and s[0]:
            n = prod(s[0][:-1])
            return n, (f"the output layer (aten::linear, weight ({vocab_rows}, {s[1][1]})) "
                       f"takes {counted(n, 'row')}: logits for {counted(n, 'token')}")
    return None
