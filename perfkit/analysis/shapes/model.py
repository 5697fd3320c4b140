"""Reading the model from the operator shapes: :func:`read_model`.

It reads the shape records of the kernels (or the host operators) of one step per rank,
field by field (:mod:`~perfkit.analysis.shapes.fields`, :mod:`~perfkit.analysis.shapes.counts`),
and fills what GPU kernels leave unknown from the host operators when both agree.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .counts import _read_counts
from .fields import (
    ShapeReading,
    _read_activations,
    _read_batch,
    _read_dtype,
    _read_heads,
    _read_hidden,
    _read_mlp,
    _read_norm_position,
)
from .operators import _attention, _embeddings, _gemms, _one_step, _where
from .records import _MOE, parse_shapes, shape_records
from .widths import _read_bias, _read_widths, _rows_text, _token_projections

__all__ = ["read_model"]

def read_model(profile: Any, tp: int = 1, stage_of: dict[int, int] | None = None,
               pp: int = 1) -> ShapeReading:
    """Read the model shape, micro-batching and recompute from the operator shapes.

    Parameters
    ----------
    profile : Profile or Cluster
    tp : int
        Tensor-parallel size: local widths (heads, FFN, vocabulary) are multiplied by it.
    stage_of : dict, optional
        Pipeline stage of each rank (:func:`~perfkit.analysis.layout.stage_of_ranks`);
        without it every rank counts as stage 0 of a one-stage pipeline.
    pp : int
        Pipeline stages (to know whether every stage was loaded).

    Returns
    -------
    ShapeReading
        Values (None when unknown, with the reason in ``details``) for ``micro_batch_size``,
        ``seq_length``, ``hidden_size``, ``num_attention_heads``, ``num_kv_heads``,
        ``head_dim``, ``ffn_hidden_size``, ``vocab_size``, ``mlp``, ``num_layers``,
        ``layers_per_stage`` (tuple), ``num_micro_batches``, ``recompute``,
        ``recompute_layers``, ``norm``, ``position_embedding``, ``bias``, ``dtype``,
        ``moe``.
    """
    stage_of = dict(stage_of or {})
    wanted_ranks = None
    loaded = list(getattr(profile, "ranks", None) or [profile.meta.rank])
    if stage_of and len(loaded) > 2 * pp:
        # one rank per stage is enough (and keeps a big cluster cheap)
        pick: dict[int, int] = {}
        for r in sorted(loaded):
            st = stage_of.get(r)
            if st is not None and st not in pick:
                pick[st] = r
        wanted_ranks = sorted(pick.values()) or None
    recs, source = shape_records(profile, wanted_ranks)
    out = _read(profile, recs, source, tp, stage_of, pp)
    if source == "kernels" and any(out.get(f) is None for f in _SHAPE):
        # a GPU kernel has shapes only when the trace kept its launch: kernels launched
        # before the trace began (an embedding, the first attention calls) leave gaps that
        # the operators, which all carry their shapes, may fill
        ops, _ = shape_records(profile, wanted_ranks, tables=("ops",))
        if not ops.empty:
            _fill(out, _read(profile, ops, "ops", tp, stage_of, pp))
    return out


#: The model's shape: when the kernels leave one of these unknown, the operators are read
#: too (not for fields that are often unknown on any profile, such as recompute_layers or
#: position_embedding, which would read every GPU profile twice).
_SHAPE = ("micro_batch_size", "seq_length", "hidden_size", "num_attention_heads",
          "ffn_hidden_size", "vocab_size", "num_layers", "num_micro_batches")
#: Fields a reading of the operators may fill when the kernels left them unknown.
_FILLABLE = ("micro_batch_size", "seq_length", "hidden_size", "num_attention_heads",
             "num_kv_heads", "head_dim", "ffn_hidden_size", "vocab_size", "mlp", "num_layers",
             "layers_per_stage", "num_micro_batches", "recompute", "recompute_layers", "norm",
             "position_embedding", "bias", "flash_attention", "norm_fp32")
#: Fields both readings must agree on before one fills the other.
_AGREE = ("micro_batch_size", "seq_length", "hidden_size", "num_attention_heads",
          "head_dim", "ffn_hidden_size")


def _fill(out: ShapeReading, other: ShapeReading) -> None:
    """Fill ``out``'s unknown fields from ``other`` when no field both know disagrees."""
    for name in _AGREE:
        mine, theirs = out.get(name), other.get(name)
        if mine is not None and theirs is not None and mine != theirs:
            return
    for name in _FILLABLE:
        if out.get(name) is not None or name not in other.details:
            continue
        if other.get(name) is not None:
            out.put(name, other.get(name), other.details[name] + " (the kernels' shapes "
                    "left it unknown; read from the host operators)")
        else:  # unknown both ways: the fuller reading's reason
            out.put(name, None, other.details[name])


def _read(profile: Any, recs: pd.DataFrame, source: str, tp: int,
          stage_of: dict[int, int], pp: int) -> ShapeReading:
    """:func:`read_model` on the shape records of one table."""
    stage_of = dict(stage_of)
    recs = _one_step(recs)
    out = ShapeReading(source=source)
    fmt = str(profile.meta.source_format)
    where = _where(source, fmt)
    if recs.empty:
        why = ("no operator input shapes in this profile (record_shapes=False, or a "
               "profiler level / export without shapes)")
        for name in _FIELDS:
            out.put(name, None, why)
        return out
    ranks = sorted(int(r) for r in recs["rank"].dropna().unique())
    for r in ranks:
        stage_of.setdefault(r, 0)
    label = recs["label"].astype(str)
    texts = recs["input_shapes"].astype("string").fillna("")
    parsed = {t: parse_shapes(t) for t in texts.unique()}
    shapes = [parsed[t] for t in texts]

    _read_dtype(out, recs, label, where)
    moe = label.str.contains(_MOE).any()
    out.put("moe", bool(moe), f"{where}: " + ("MoE routing / grouped-matmul operators "
                                                 "seen" if moe else "no MoE routing operator"))
    emb = _embeddings(recs, label, shapes)
    att = _attention(recs, label, shapes, emb, where)
    gemms = _gemms(recs, label, shapes)
    _read_batch(out, att, gemms, emb, where)
    n_tok = None
    if out.get("micro_batch_size") and out.get("seq_length"):
        n_tok = out.get("micro_batch_size") * out.get("seq_length")
    act = [a for a in (g.over(n_tok) for g in gemms) if a is not None] if n_tok else []
    _read_hidden(out, act, emb, where)
    _read_heads(out, recs, label, shapes, att, act, tp, where, gemms)
    rows_said, pooled = "", None
    if not act and out.get("hidden_size"):
        # the tokens unknown (the batch folded into 3-D bmm attention's heads): the
        # projections are those over the rows where the hidden state is read and written
        act, pooled = _token_projections(gemms, out.get("hidden_size"))
        rows_said = _rows_text(act) if act else ""
    _read_widths(out, recs, label, shapes, act, emb, tp, where, pp, rows_said, pooled)
    _read_counts(out, recs, label, att, emb, stage_of, pp, ranks, where)
    _read_mlp(out, recs, label, att, act, where)
    _read_norm_position(out, recs, label, emb, where)
    _read_bias(out, act, where, rows_said)
    _read_activations(out, recs, label, att, where)
    return out


_FIELDS = ("micro_batch_size", "seq_length", "hidden_size", "num_attention_heads",
           "num_kv_heads", "head_dim", "ffn_hidden_size", "vocab_size", "mlp", "num_layers",
           "layers_per_stage", "num_micro_batches", "recompute", "recompute_layers", "norm",
           "position_embedding", "bias", "dtype", "moe", "flash_attention", "norm_fp32")
