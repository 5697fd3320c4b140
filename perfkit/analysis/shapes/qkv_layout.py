"""Which layout an Ascend attention kernel's query, key and value are in.

Ascend's fused attention (``FlashAttentionScore``, torch_npu ``npu_fusion_attention``, the
inference kernels ``PromptFlashAttention`` / ``FusedInferAttentionScore``) takes its
``input_layout`` as an argument — BSH, SBH, BSND, BNSD or TND — and neither
kernel_details.csv nor the operator tables record it. A 3-D query ``(x, y, w)`` is
(batch, sequence, width) in BSH but (sequence, batch, width) in SBH, the order Megatron and
MindSpeed use; a 4-D query ``(b, x, y, d)`` is (batch, heads, sequence, head size) in BNSD
but (batch, sequence, heads, head size) in BSND. Other tensors of the same profile tell
them apart:

* the softmax statistics (``softmax_max`` / ``softmax_sum``: outputs of the forward kernel,
  inputs of the backward one) are ``(B, N, S, 8)`` in every layout but TND, where they are
  ``(T, N, 8)`` (T tokens of packed sequences);
* the attention mask (or position bias) ends in ``(S, S)``: ``(S, S)``, ``(1, 1, S, S)``,
  ``(B, 1, S, S)`` or ``(B, N, S, S)``; sparse modes 2 to 4 pass a compressed
  ``2048 × 2048`` mask, which then fits neither reading and says nothing;
* the embedding lookup's token ids are ``(B, S)``.

A tensor is a cue when exactly one reading fits it. :func:`kernel_cues` finds those of one
kernel, :func:`embedding_cue` the token ids', :func:`settle` picks the profile's layout:
the one every cue names; with no cue, or cues that disagree, the reading perfkit always
made (BSH; BNSD), and a sentence saying it was assumed. :func:`sizes` reads the kernel in
the layout settled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ...format import listed

__all__ = ["LAYOUT_ARGUMENT", "DEFAULT", "AXES", "Cue", "batch_seq", "kernel_cues",
           "embedding_cue", "settle", "sizes", "shape_text"]

#: Attention operators whose input layout is an argument the profile does not record.
LAYOUT_ARGUMENT = re.compile(r"(?i)^(?:FlashAttentionScore(?:Grad)?"
                             r"|npu::npu_fusion_attention(?:_grad)?"
                             r"|PromptFlashAttention\w*|FusedInferAttentionScore\w*)$")
#: The reading of a query of each rank when nothing tells: what perfkit always read.
DEFAULT = {3: "BSH", 4: "BNSD"}
#: The other reading a cue can choose (TND is told only by its own statistics).
_OTHER = {3: "SBH", 4: "BSND"}
#: What each layout's dimensions are, in words.
AXES = {"BSH": "batch, sequence, width", "SBH": "sequence, batch, width",
        "TND": "tokens, heads, head size", "BNSD": "batch, heads, sequence, head size",
        "BSND": "batch, sequence, heads, head size"}
#: The last dimension of the softmax statistics (eight copies of each row's value).
_STATS_LAST = 8


@dataclass(frozen=True)
class Cue:
    """A tensor that fits one reading only: the layout it names, what it is (``kind``:
    ``"statistics"``, ``"mask"``, ``"token ids"``) and the words for it."""

    layout: str
    kind: str
    what: str


def shape_text(shape: tuple[int, ...]) -> str:
    """A shape as the evidence writes it: ``(2, 4, 4096, 8)``."""
    return "(" + ", ".join(str(d) for d in shape) + ")"


def batch_seq(layout: str, q: tuple[int, ...]) -> tuple[int | None, int | None]:
    """The batch and sequence of query ``q`` read in ``layout`` (None, None for TND)."""
    if layout == "BSH":
        return q[0], q[1]
    if layout == "SBH":
        return q[1], q[0]
    if layout == "BNSD":
        return q[0], q[2]
    if layout == "BSND":
        return q[0], q[1]
    return None, None


def _ambiguous(q: tuple[int, ...]) -> bool:
    """Whether the two readings of ``q`` give different batch and sequence."""
    return len(q) in DEFAULT and batch_seq(DEFAULT[len(q)], q) != batch_seq(_OTHER[len(q)], q)


def _fits(q: tuple[int, ...], test: Any) -> list[str]:
    """The readings of ``q`` (default and other) whose batch and sequence pass ``test``."""
    return [lay for lay in (DEFAULT[len(q)], _OTHER[len(q)]) if test(*batch_seq(lay, q))]


def kernel_cues(q: tuple[int, ...], others: list[tuple[int, ...]]) -> list[Cue]:
    """The cues among one kernel's other tensors (inputs after q, k, v; outputs).

    Parameters
    ----------
    q : tuple of int
        The query's shape (3-D or 4-D).
    others : list of tuple of int
        The kernel's other input and output shapes (empty ones allowed).

    Returns
    -------
    list of Cue
        One per tensor that fits exactly one reading.
    """
    if not _ambiguous(q):
        return []
    out = []
    for sh in others:
        if not sh or sh == q:  # the output, the output gradient: q's own shape
            continue
        if len(sh) == 4 and sh[3] == _STATS_LAST:
            fits = _fits(q, lambda b, s, sh=sh: (b, s) == (sh[0], sh[2]))
            kind, what = "statistics", f"the softmax statistics {shape_text(sh)} = (B, N, S, 8)"
        elif len(q) == 3 and len(sh) == 3 and sh[2] == _STATS_LAST and sh[:2] == q[:2]:
            out.append(Cue("TND", "statistics",
                           f"the softmax statistics {shape_text(sh)} = (T, N, 8)"))
            continue
        elif len(sh) in (2, 4) and sh[-1] == sh[-2]:
            fits = _fits(q, lambda b, s, sh=sh: s == sh[-1])
            kind, what = "mask", f"the attention mask {shape_text(sh)} = (…, S, S)"
        else:
            continue
        if len(fits) == 1:
            out.append(Cue(fits[0], kind, what))
    return out


def embedding_cue(q: tuple[int, ...], ids: tuple[int, ...]) -> Cue | None:
    """The embedding lookup's token ids ``(B, S)`` as a cue for query ``q``, if they fit
    exactly one reading."""
    if not _ambiguous(q) or len(ids) != 2:
        return None
    fits = _fits(q, lambda b, s: (b, s) == tuple(ids))
    if len(fits) != 1:
        return None
    return Cue(fits[0], "token ids",
               f"the embedding lookup's token ids {shape_text(tuple(ids))} = (B, S)")


def settle(q: tuple[int, ...], cues: list[Cue], where: str) -> tuple[str, str]:
    """The layout of the profile's queries of ``q``'s rank, and the sentence saying why.

    Parameters
    ----------
    q : tuple of int
        A typical query shape (the sentence names it).
    cues : list of Cue
        Every cue of the profile's kernels of that rank, and the embedding's.
    where : str
        The file the shapes come from.

    Returns
    -------
    (str, str)
        The layout, and the sentence ("" when both readings give the same batch and
        sequence, as for ``(4096, 4096, w)``).
    """
    default = DEFAULT[len(q)]
    if not _ambiguous(q):
        return default, ""
    named = sorted({c.layout for c in cues})
    text = f"the query {shape_text(q)}"
    if len(named) == 1:
        lay = named[0]
        whats = list({c.kind: c.what for c in reversed(cues)}.values())[::-1]  # one a kind
        return lay, (f"{text} read as {lay} ({AXES[lay]}): {listed(whats)} "
                     f"fit{'s' if len(whats) == 1 else ''} only that reading")
    other = _OTHER[len(q)]
    unknown = (f"{text} read as {default} ({AXES[default]}), assumed: {where} does not "
               "record the input layout")
    if not named:
        return default, (f"{unknown}, and nothing in the profile (softmax statistics, "
                         f"attention mask, embedding token ids) tells it from {other} "
                         f"({AXES[other]})")
    said = "; ".join(f"{c.what} fits {c.layout}" for c in
                     {(c.layout, c.kind): c for c in cues}.values())
    return default, f"{unknown}, and the profile's cues disagree ({said})"


def sizes(layout: str, q: tuple[int, ...], k: tuple[int, ...],
          others: list[tuple[int, ...]]) -> dict[str, Any]:
    """Batch, sequence, heads, key/value heads, head size and widths of one kernel read in
    ``layout``; ``heads_from`` names the softmax statistics when they gave the heads of a
    3-D query (its width alone does not show them)."""
    b, s = batch_seq(layout, q)
    out: dict[str, Any] = {"b": b, "s": s, "heads": None, "kv_heads": None, "d": None,
                           "heads_from": ""}
    if layout == "TND":
        out.update(heads=q[1], kv_heads=k[1], d=q[2], q_width=q[1] * q[2],
                   kv_width=k[1] * k[2])
        return out
    if len(q) == 4:
        n, g = (q[1], k[1]) if layout == "BNSD" else (q[2], k[2])
        out.update(heads=n, kv_heads=g, d=q[3], q_width=n * q[3], kv_width=g * k[3])
        return out
    out.update(q_width=q[2], kv_width=k[2])
    for sh in others:
        if len(sh) == 4 and sh[3] == _STATS_LAST and (sh[0], sh[2]) == (b, s) and sh != q \
                and sh[1] and q[2] % sh[1] == 0:
            d = q[2] // sh[1]
            out.update(heads=sh[1], d=d, kv_heads=k[2] // d if k[2] % d == 0 else None,
                       heads_from=f"its softmax statistics {shape_text(sh)} = (B, N, S, 8)")
            break
    return out
