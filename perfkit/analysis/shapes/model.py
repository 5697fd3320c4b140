"""Reading the model from the operator shapes: :func:`read_model`.

It reads the shape records of the kernels (or the host operators) of one step per rank
(one whose device tasks were recorded in full where the ``steps`` table says which:
:mod:`perfkit.analysis.recorded`; the host operators of a step cut short are a fragment of
its operators as its kernels are), field by field (:mod:`~perfkit.analysis.shapes.fields`,
:mod:`~perfkit.analysis.shapes.counts`), and fills what GPU kernels leave unknown from the
host operators when both agree.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..._text_dtype import TEXT
from ...format import listed, plural
from .._frames import compute_all, is_lazy_frame
from .._util import table
from ..recorded import RECORDED, recorded_steps_text, unrecorded
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
    # the kernels and the host operators alike: a step whose device tasks were cut short
    # holds a fraction of its host operators too (the profiler stopped within it)
    cut, which = _cut_steps(profile)
    out = _read(profile, recs, source, tp, stage_of, pp, cut, which)
    if source == "kernels" and any(out.get(f) is None for f in _SHAPE):
        # a GPU kernel has shapes only when the trace kept its launch: kernels launched
        # before the trace began (an embedding, the first attention calls) leave gaps that
        # the operators, which all carry their shapes, may fill
        ops, _ = shape_records(profile, wanted_ranks, tables=("ops",))
        if not ops.empty:
            _fill(out, _read(profile, ops, "ops", tp, stage_of, pp, cut, which))
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


def _cut_steps(profile: Any) -> tuple[set[tuple[int, int]], str | None]:
    """The (rank, step) pairs whose device tasks were not recorded in full
    (:func:`perfkit.analysis.recorded.unrecorded`; a rank not recorded is -1), and those
    that were, in words (:func:`~perfkit.analysis.recorded.recorded_steps_text`); an
    empty set and None when the ``steps`` table does not say."""
    steps = table(profile, "steps")
    if RECORDED not in steps.columns:
        return set(), None
    if is_lazy_frame(steps):
        (steps,) = compute_all(steps[[c for c in ("rank", "step", RECORDED)
                                      if c in steps.columns]])
    skip = unrecorded(steps)
    if skip.empty:
        return set(), None
    return set(zip(_codes(skip["rank"]), _codes(skip["step"]), strict=True)), \
        recorded_steps_text(steps)


def _codes(values: pd.Series) -> list[int]:
    """Whole numbers of ``values``, a missing one as -1."""
    return [int(v) for v in pd.to_numeric(values, errors="coerce").astype("Float64")
            .fillna(-1).to_numpy()]


def _read(profile: Any, recs: pd.DataFrame, source: str, tp: int,
          stage_of: dict[int, int], pp: int, cut: set[tuple[int, int]] | None = None,
          which: str | None = None) -> ShapeReading:
    """:func:`read_model` on the shape records of one table.

    ``cut``: the (rank, step) pairs whose device tasks were recorded only in part
    (:func:`_cut_steps`; ``which`` says the others in words). The step read on a rank is
    one recorded in full where the rank has one; a rank that has none is read for the
    shapes (an operator's shapes are its own however few tasks were kept), but its
    kernels are not counted per step (micro-batches, layers, recompute): a fragment of a
    step would give a fraction of its count.
    """
    stage_of = dict(stage_of)
    cut = cut or set()
    in_cut = pd.Series(False, index=recs.index)
    if cut and not recs.empty:
        in_cut = pd.Series([p in cut for p in zip(_codes(recs["rank"]), _codes(recs["step"]),
                                                  strict=True)], index=recs.index)
    recs = _one_step(recs, in_cut)
    cut_ranks = sorted({r for r, s in zip(_codes(recs["rank"]), _codes(recs["step"]),
                                          strict=True) if (r, s) in cut})
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
    texts = recs["input_shapes"].astype(TEXT).fillna("")
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
    if cut_ranks:
        _read_counts_of_recorded(out, recs, label, att, emb, stage_of, pp, ranks, where,
                                 cut_ranks, which)
    else:
        _read_counts(out, recs, label, att, emb, stage_of, pp, ranks, where)
        _say_recorded(out, which)
    _read_mlp(out, recs, label, att, act, where)
    _read_norm_position(out, recs, label, emb, where)
    _read_bias(out, act, where, rows_said)
    _read_activations(out, recs, label, att, where)
    return out


#: The fields :func:`~perfkit.analysis.shapes.counts._read_counts` reads by counting kernels
#: per step.
_COUNTED = ("num_micro_batches", "num_layers", "layers_per_stage", "recompute",
            "recompute_layers")


def _read_counts_of_recorded(out: ShapeReading, recs: pd.DataFrame, label: pd.Series,
                             att: list, emb: list[dict], stage_of: dict[int, int], pp: int,
                             ranks: list[int], where: str, cut_ranks: list[int],
                             which: str | None) -> None:
    """The counts per step of :func:`_read_counts` on the ranks whose step read was
    recorded in full; when no rank has such a step, every count is unknown with the
    reason."""
    full = [r for r in ranks if r not in cut_ranks]
    what = "kernels" if out.source == "kernels" else "host operators"
    why = (f"the {what} of {plural(len(cut_ranks), 'rank')} {listed(cut_ranks)} are not "
           f"counted per step: {plural(len(cut_ranks), 'it has', 'they have')} no step "
           "whose device tasks were recorded in full, and a fragment of a step holds a "
           f"fraction of its {what} (device tasks recorded for {which or 'no step'})")
    if not full:
        for name in _COUNTED:
            out.put(name, None, why)
        return
    keep = recs["rank"].isin(full).to_numpy(bool)
    _read_counts(out, recs[keep].reset_index(drop=True), label[keep].reset_index(drop=True),
                 [a for a in att if a.rank in full], [e for e in emb if e["rank"] in full],
                 stage_of, pp, full, where)
    for name in _COUNTED:
        if out.get(name) is None and name in out.details:
            out.put(name, None, f"{out.details[name]} ({why})")
    _say_recorded(out, which)


def _say_recorded(out: ShapeReading, which: str | None) -> None:
    """Add to each count per step read (:data:`_COUNTED`) that its step was one whose
    device tasks were recorded in full, and which those were (``which``: None when every
    step's were, and nothing is added)."""
    if which is None:
        return
    for name in _COUNTED:
        if out.get(name) is not None and out.details.get(name):
            out.put(name, out.get(name), f"{out.details[name]}, counted in a step whose "
                                         "device tasks were recorded in full (device tasks "
                                         f"recorded for {which})")


_FIELDS = ("micro_batch_size", "seq_length", "hidden_size", "num_attention_heads",
           "num_kv_heads", "head_dim", "ffn_hidden_size", "vocab_size", "mlp", "num_layers",
           "layers_per_stage", "num_micro_batches", "recompute", "recompute_layers", "norm",
           "position_embedding", "bias", "dtype", "moe", "flash_attention", "norm_fp32")
