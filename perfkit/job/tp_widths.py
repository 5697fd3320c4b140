"""Tensor parallelism read from the widths of the operator shapes.

Megatron's column / row parallel layers split the attention heads and the MLP over the
tp ranks, but not the hidden size: the embedding table (``(vocab, h)``) and the
row-parallel projections' output keep the full ``h``. So where a profile records no tp
group nor setting, a hidden size that is ``k`` times the query width per rank (heads per
rank × head size) shows ``tp = k`` — but only when the MLP agrees: the MLP width per rank
× ``k`` must be the MLP width a model of hidden size ``h`` takes (:func:`standard_ffn`).
Two independent widths agreeing on the same ``k`` is the reading; either alone is not
(a model may narrow its attention, or widen its MLP, without tensor parallelism).
"""

from __future__ import annotations

from ..analysis.shapes import ShapeReading
from ..specs.ffn import llama_ffn_hidden_size
from .fields import Readings

__all__ = ["standard_ffn", "tp_from_widths", "read_tp_from_widths"]

#: The multiples a gated MLP's width is rounded up to (Llama's ``multiple_of``).
GATED_MULTIPLES = (64, 128, 256)


def standard_ffn(hidden_size: int, mlp: str | None) -> dict[int, str]:
    """The MLP widths accepted as standard for a model of ``hidden_size``, with their words.

    A plain MLP (``"gpt"``) takes exactly ``4h``; a gated one (``"gated"``) takes ``8h/3``
    rounded up to a multiple of 64, 128 or 256 (Llama's rule,
    :func:`perfkit.specs.ffn.llama_ffn_hidden_size`). Other widths (Llama 2 70B's 3.5·h,
    say) are not accepted: tp is then left unread rather than guessed.
    """
    if mlp == "gpt":
        return {4 * hidden_size: "4h, the plain MLP's width"}
    if mlp == "gated":
        words = ("8h/3 rounded up to a multiple of 64, 128 or 256 (Llama's rule), the gated "
                 "MLP's width")
        return {llama_ffn_hidden_size(hidden_size, m): words for m in GATED_MULTIPLES}
    return {}


def tp_from_widths(reading: ShapeReading) -> tuple[int, str] | None:
    """``(k, why)`` where the widths of a reading made with tp = 1 show tp = k > 1.

    Parameters
    ----------
    reading : ShapeReading
        :func:`perfkit.analysis.shapes.read_model` with ``tp=1``: its heads, head size and
        FFN width are then per rank.

    Returns
    -------
    tuple of (int, str) or None
        The tp size and the sentence that says which widths show it; None where the hidden
        size is not an exact multiple ``k > 1`` of the query width per rank, or where the
        MLP width per rank × ``k`` is not a standard width for that hidden size, or where a
        width is unknown or the model is a MoE.
    """
    h = reading.get("hidden_size")
    heads, d = reading.get("num_attention_heads"), reading.get("head_dim")
    f, mlp = reading.get("ffn_hidden_size"), reading.get("mlp")
    q = reading.values.get("_q_width") or (heads * d if heads and d else None)
    if not (h and q and f) or reading.get("moe") or h % q or h // q < 2:
        return None
    k = h // q
    accepted = standard_ffn(h, mlp)
    if f * k not in accepted:
        return None
    query = f"{heads} heads × {d}" if heads and d and heads * d == q else "the attention inputs"
    why = (f"the shapes show the attention and the MLP split {k} ways: the hidden size "
           f"{h} is {k} × the query width per rank {q} ({query}), and the MLP width per "
           f"rank {f} × {k} = {f * k} is {accepted[f * k]} for hidden size {h} "
           "(Megatron's column / row parallel layers); no tp group or setting is recorded")
    return k, why


def read_tp_from_widths(reading: ShapeReading, out: Readings) -> int | None:
    """Put ``tp`` (and dp, world size to match) from :func:`tp_from_widths`; return it.

    Only where tp is the placeholder 1 (source ``default``): a tp read from a
    communication group or a recorded parallel strategy is never changed, and a config or
    the user's value wins later as for any field. A recorded world size that ``k × pp ×
    cp`` does not divide leaves tp as it was. Where the world size was only counted from
    the loaded ranks, it grows to ``dp × tp × pp × cp``: the loaded ranks are part of a tp
    group of ``k``.
    """
    tp = out["tp"]
    if tp.source != "default" or tp.value != 1 or out["dp"].source != "default":
        return None
    found = tp_from_widths(reading)
    if found is None:
        return None
    k, why = found
    pp, cp = int(out["pp"].value), int(out["cp"].value)
    rest = k * pp * cp
    world = out["world_size"]
    if world.source != "default" and int(world.value) % rest:
        return None
    out.put("tp", k, why)
    dp = max(1, int(world.value) // rest)
    parts = f"tp {k} × pp {pp}" + (f" × cp {cp}" if cp > 1 else "")
    if world.source == "default" and dp * rest != int(world.value):
        out.put("world_size", dp * rest,
                f"at least {parts} = {dp * rest}: the loaded ranks are part of a tp group "
                f"of {k} read from the widths of the shapes ({world.detail})", "default")
    out.put("dp", dp, f"no dp group recorded: world {out['world_size'].value} / ({parts}) "
                      f"= {dp} assumed", "default")
    return k
