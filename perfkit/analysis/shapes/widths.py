"""The FFN and vocabulary widths and the projections' bias, read from the projections.

The projections of the hidden state (:class:`~.operators._Gemm` over the micro-batch's
tokens) map the hidden size ``h`` to the query / key-value / fused QKV widths, the FFN width
``f`` (both ways: ``h → f`` and ``f → h``) and the logits width (one way, before the loss);
whether they take a bias input says which carry one.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from .fields import ShapeReading, _loss_width
from .operators import _Gemm, _mode, _Shapes
from .records import _LOSS
from .vocab import vocab_from_table

__all__: list[str] = []  # private to read_model

def _read_widths(out: ShapeReading, recs: pd.DataFrame, label: pd.Series, shapes: _Shapes,
                 act: list[_Gemm], emb: list[dict], tp: int, where: str) -> None:
    h = out.get("hidden_size")
    if not h or not act:
        why = "the hidden size or the projection GEMMs are unknown"
        out.put("ffn_hidden_size", None, why)
        out.put("vocab_size", None, why)
        return
    qw, kvw = out.values.get("_q_width"), out.values.get("_kv_width")
    attn_widths = {w for w in (qw, kvw) if w}
    if qw and kvw:
        attn_widths |= {qw + 2 * kvw, qw + kvw, 2 * kvw}
    ups = Counter(g.n for g in act if g.k == h and g.n not in attn_widths and g.n != h)
    downs = Counter(g.k for g in act if g.n == h and g.k not in attn_widths and g.k != h)
    # the logits: the loss's input width, or the embedding table (vocab-parallel over tp)
    lmask = label.str.contains(_LOSS).to_numpy(bool) & ~recs["backward"].to_numpy(bool)
    vocab_local = _loss_width(recs, label, shapes)
    table_v = out.values.get("_embedding_vocab")
    if vocab_local and vocab_local in ups:
        out.put("vocab_size", vocab_local * tp,
                f"{where}: the logits GEMM {h} → {vocab_local} feeds the loss "
                f"({_mode([label.iat[i] for i in np.nonzero(lmask)[0]])})"
                + (f"; vocabulary split over tp {tp}" if tp > 1 else ""))
    elif table_v:
        vocab, vocab_local, why = vocab_from_table(table_v, h, tp, {*ups, vocab_local}, where)
        out.put("vocab_size", vocab, why)
    else:
        once = [w for w in ups if w not in downs]
        if len(once) == 1:
            vocab_local = once[0]
            out.put("vocab_size", vocab_local * tp,
                    f"{where}: the only projection {h} → {vocab_local} with no way back "
                    "(the logits)" + (f"; vocabulary split over tp {tp}" if tp > 1 else ""))
        else:
            out.put("vocab_size", None, "no loss kernel, embedding table or single logits "
                                        "GEMM on the loaded ranks (the last pipeline stage "
                                        "holds the logits)")
    forward_only = all(g.linear for g in act)
    # with forward GEMMs only, the logits have no way back; with backward ones their
    # input-gradient GEMM is a down-projection too, so the vocabulary width is set aside
    ffn = [w for w in ups if w in downs and (forward_only or w != vocab_local)]
    if len(ffn) == 1:
        f = ffn[0]
        out.put("ffn_hidden_size", f * tp, f"{where}: projections {h} → {f} and {f} → {h} "
                                            "(the MLP)" + (f" per rank × tp {tp}" if tp > 1
                                                           else ""))
        out.values["_f_width"] = f
    elif not ffn:
        out.put("ffn_hidden_size", None, f"{where}: no width w with both {h} → w and "
                                         f"w → {h} projections besides attention's")
    else:
        out.put("ffn_hidden_size", None, f"{where}: several MLP-like widths {sorted(ffn)} "
                                         "(MoE or an unusual model): not read")


def _read_bias(out: ShapeReading, act: list[_Gemm], where: str) -> None:
    h = out.get("hidden_size")
    qw, kvw = out.values.get("_q_width"), out.values.get("_kv_width")
    if not h or not qw or not kvw:
        out.put("bias", None, "the projection widths are unknown")
        return
    if not act:  # widths known (a fused QKV gave them) but not which products are these
        out.put("bias", None, "no projection GEMM over the micro-batch's tokens")
        return
    qkv = {qw, kvw, qw + 2 * kvw}
    first = [g for g in act if g.k == h and g.n in qkv]
    rest = [g for g in act if not (g.k == h and g.n in qkv)]
    if not first:
        out.put("bias", None, "no QKV projection found")
        return
    qkv_b = any(g.bias for g in first)
    rest_b = any(g.bias for g in rest)
    kind = "all" if qkv_b and rest_b else "qkv" if qkv_b else "none"
    out.put("bias", kind, f"{where}: QKV projections {'with' if qkv_b else 'without'} a bias "
                          f"input, other projections {'with' if rest_b else 'without'}")
