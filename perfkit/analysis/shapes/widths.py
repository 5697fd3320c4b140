"""The FFN and vocabulary widths and the projections' bias, read from the projections.

The projections of the hidden state (:class:`~.operators._Gemm` over the micro-batch's
tokens) map the hidden size ``h`` to the query / key-value / fused QKV widths, the FFN width
``f`` (both ways: ``h → f`` and ``f → h``) and the logits width (one way, before the loss);
whether they take a bias input says which carry one.

Where the micro-batch's tokens are not known (an attention run as 3-D bmm folds the batch
into the heads, and no embedding says the sequence), :func:`_token_projections` takes the
projections over the rows at which the hidden state is both read and written: TimeSformer
runs its temporal attention over ``b·P·T`` rows, its spatial attention over ``b·T·(P + 1)``
and its MLP over ``b·P·T + 1``, and each of them reads ``h`` wide rows and writes ``h`` wide
rows back; its classifier reads one pooled row and writes the classes.
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

def _token_projections(gemms: list[_Gemm], h: int) -> tuple[list[_Gemm], list[_Gemm]]:
    """The forward projections of the hidden state when the tokens are not known.

    A projection of the tokens reads ``h`` wide rows or writes them; every block of a
    transformer both reads the hidden state (its first projection, ``h → w``) and writes
    it back over the same rows (its last, ``w → h``). So rows ``m`` are taken as tokens
    where some forward product reads ``h`` over ``m`` rows and some writes ``h`` over the
    same ``m`` rows, ``m`` being none of the products' widths other than ``h`` (a
    weight's dimension; ``h`` tokens of ``h`` wide rows are a small model's).

    Parameters
    ----------
    gemms : list of _Gemm
        The matrix products (:func:`~.operators._gemms`).
    h : int
        The hidden size.

    Returns
    -------
    (list of _Gemm, list of _Gemm)
        The projections over those rows (with their ``m, k, n`` set), and the other
        forward products that read the hidden state (a head over pooled rows: a
        classifier's ``1 × h → classes``), each once per distinct ``(m, k, n)``.
    """
    fwd = [g for g in gemms if not g.backward and (not g.batched or g.linear)]
    sides = [(g, [c for c in g.cands if h in (c[1], c[2])]) for g in fwd]
    widths = {x for _, cs in sides for _, k, n in cs for x in (k, n)}
    reads = {m for _, cs in sides for m, k, _ in cs if k == h}
    writes = {m for _, cs in sides for m, _, n in cs if n == h}
    rows = (reads & writes) - (widths - {h})
    act = []
    for g, cs in sides:
        mine = sorted({c[0] for c in cs} & rows)
        if mine and (got := g.over(mine[0])) is not None:  # one orientation a product
            act.append(got)
    other: dict[tuple[int, int, int], _Gemm] = {}
    for g, cs in sides:
        for m, k, n in cs:
            if k == h and m not in rows and (m == h or m not in widths):
                other.setdefault((m, k, n), _Gemm(g.rank, g.step, g.start, g.cands, g.bias,
                                                  g.linear, g.batched, g.backward, m, k, n))
    return act, list(other.values())


def _rows_text(act: list[_Gemm]) -> str:
    """The rows of projections taken by :func:`_token_projections`, in words."""
    rows = sorted({g.m for g in act})
    return (f"over {', '.join(str(m) for m in rows[:-1])}{' and ' if len(rows) > 1 else ''}"
            f"{rows[-1]} rows, where the hidden state is read and written (the tokens "
            "themselves are not known)")


def _read_widths(out: ShapeReading, recs: pd.DataFrame, label: pd.Series, shapes: _Shapes,
                 act: list[_Gemm], emb: list[dict], tp: int, where: str, pp: int = 1,
                 rows_said: str = "", pooled: list[_Gemm] | None = None) -> None:
    """Put ``ffn_hidden_size`` and ``vocab_size``. ``rows_said`` (the words of
    :func:`_rows_text`) and ``pooled`` (the other products of the hidden state) are given
    when ``act`` are the projections of :func:`_token_projections`."""
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
        # the logits may be computed over fewer rows than the tokens: an inference step
        # (vLLM) projects only each sequence's last token to the vocabulary
        heads = {g.n for g in pooled or [] if g.k == h}
        vocab, vocab_local, why = vocab_from_table(table_v, h, tp, {*ups, vocab_local, *heads},
                                                   where)
        out.put("vocab_size", vocab, why)
    else:
        once = [w for w in ups if w not in downs]
        if len(once) == 1:
            vocab_local = once[0]
            out.put("vocab_size", vocab_local * tp,
                    f"{where}: the only projection {h} → {vocab_local} with no way back "
                    "(the logits)" + (f"; vocabulary split over tp {tp}" if tp > 1 else ""))
        elif not emb and not once and pp == 1:
            out.put("vocab_size", None, _no_vocabulary(h, vocab_local, pooled or [], where))
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
                                                           else "")
                + (f", {rows_said}" if rows_said else ""))
        out.values["_f_width"] = f
    elif not ffn:
        out.put("ffn_hidden_size", None, f"{where}: no width w with both {h} → w and "
                                         f"w → {h} projections besides attention's")
    else:
        out.put("ffn_hidden_size", None, f"{where}: several MLP-like widths {sorted(ffn)} "
                                         "(MoE or an unusual model): not read")


def _no_vocabulary(h: int, loss_width: int | None, pooled: list[_Gemm], where: str) -> str:
    """Why a one-stage profile without an embedding lookup shows no vocabulary."""
    said = []
    if loss_width:
        said.append(f"the loss's input is {loss_width} wide, but no projection of the tokens "
                    "writes it")
    if pooled:
        heads = ", ".join(f"{g.k} → {g.n} over {g.m} {'row' if g.m == 1 else 'rows'}"
                          for g in sorted(pooled, key=lambda g: (g.m, g.n))[:3])
        said.append(f"the hidden state's other {'product' if len(pooled) == 1 else 'products'}"
                    f" ({heads}) {'runs' if len(pooled) == 1 else 'run'} over rows that are "
                    "not the tokens' (a head over pooled rows)")
    return (f"{where}: no embedding lookup, and no projection of the tokens from {h} to a "
            "width with no way back (logits)" + (f"; {'; '.join(said)}" if said else "")
            + ": the profile shows no vocabulary (a model whose inputs are not token ids, "
            "such as a vision or video model's patches, has none)")


def _read_bias(out: ShapeReading, act: list[_Gemm], where: str, rows_said: str = "") -> None:
    """Put ``bias``: whether the QKV projections and the others take a bias input. With a
    fused QKV projection (``h → q + 2·kv``) the ``h → q`` products are the attention's
    output projections, so they count with the others."""
    h = out.get("hidden_size")
    qw, kvw = out.values.get("_q_width"), out.values.get("_kv_width")
    if not h or not qw or not kvw:
        out.put("bias", None, "the projection widths are unknown")
        return
    if not act:  # widths known (a fused QKV gave them) but not which products are these
        out.put("bias", None, "no projection GEMM over the micro-batch's tokens")
        return
    fused = qw + 2 * kvw
    qkv = {qw, kvw, fused}
    is_qkv = [g.k == h and g.n in qkv for g in act]
    if any(g.k == h and g.n == fused for g in act):
        is_qkv = [g.k == h and g.n == fused for g in act]
    first = [g for g, q in zip(act, is_qkv, strict=True) if q]
    rest = [g for g, q in zip(act, is_qkv, strict=True) if not q]
    if not first:
        out.put("bias", None, "no QKV projection found")
        return
    if not rest:
        out.put("bias", None, f"{where}: only the QKV projections are seen: whether the "
                              "others take a bias is not shown")
        return
    qkv_b = any(g.bias for g in first)
    rest_b = any(g.bias for g in rest)
    kind = "all" if qkv_b and rest_b else "qkv" if qkv_b else "none"
    out.put("bias", kind, f"{where}: QKV projections {'with' if qkv_b else 'without'} a bias "
                          f"input, other projections {'with' if rest_b else 'without'}"
            + (f", {rows_said}" if rows_said else ""))
