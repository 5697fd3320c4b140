"""The shape records as sized operators, and the counting helpers the readers share.

Attention kernels (:class:`_Attn`: batch, sequence, heads, head size; or batch × heads,
sequence and head size of an attention run as 3-D bmm, softmax, bmm), matrix products
(:class:`_Gemm`: the candidate ``(M, K, N)``) and embedding lookups, read from one step per
rank (:func:`_one_step`); per-step counts (:func:`_per_step`, :func:`_typical`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .bmm_attention import record_triples
from .qkv_layout import (
    LAYOUT_ARGUMENT,
    embedding_cue,
    kernel_cues,
    settle,
    shape_text,
    sizes,
)
from .records import _BSND, _EMBED, _GEMM, ATTENTION_PATTERNS, VLLM_ATTENTION, parse_shapes

__all__: list[str] = []  # private to the shape readers

@dataclass
class _Gemm:
    rank: int
    step: Any
    start: float
    cands: list[tuple[int, int, int]]
    bias: bool
    linear: bool
    batched: tuple[int, ...]
    backward: bool
    m: int = 0
    k: int = 0
    n: int = 0

    def over(self, tokens: int) -> _Gemm | None:
        """This product as a projection of ``tokens`` rows (None when it is not one)."""
        for m, k, n in self.cands:
            if m == tokens and (not self.batched or self.linear):
                return _Gemm(self.rank, self.step, self.start, self.cands, self.bias,
                             self.linear, self.batched, self.backward, m, k, n)
        return None


def _gemm_dims(shapes: list[tuple[int, ...]], label: str
               ) -> tuple[list[tuple[int, int, int]], bool, tuple[int, ...]]:
    """Candidate ``(M, K, N)`` of a matrix product, whether it has a bias, batch dims.

    2-D products may have either operand transposed; every orientation whose inner
    dimensions agree is a candidate. ``aten::linear`` is ``x (.., in) · Wᵀ`` with
    ``W (out, in)``; ``aten::addmm`` puts the bias first.
    """
    low = label.lower()
    ins = [s for s in shapes if s]
    if low == "aten::addmm" and len(ins) >= 3:
        bias, a, b = True, ins[1], ins[2]
    elif len(ins) < 2:
        return [], False, ()
    else:
        a, b = ins[0], ins[1]
        bias = len(ins) >= 3 and len(ins[2]) == 1
    if low == "aten::linear":
        if len(b) != 2 or a[-1] != b[1]:
            return [], False, ()
        rows = int(np.prod(a[:-1]))
        has_bias = len(shapes) >= 3 and len(shapes[2]) == 1
        return [(rows, b[1], b[0])], has_bias, tuple(a[:-1])
    if len(a) > 2 or len(b) > 2:
        if len(a) != len(b) or a[:-2] != b[:-2]:
            return [], False, ()
        batch = tuple(a[:-2])
        a2, b2 = a[-2:], b[-2:]
    else:
        batch, a2, b2 = (), a, b
    if len(a2) != 2 or len(b2) != 2:
        return [], False, ()
    cands = []
    for ma, ka in ((a2[0], a2[1]), (a2[1], a2[0])):
        for kb, nb in ((b2[0], b2[1]), (b2[1], b2[0])):
            if ka == kb and (ma, ka, nb) not in cands:
                cands.append((ma, ka, nb))
    return cands, bias, batch


_Shapes = list[list[tuple[int, ...]]]
"""Parsed input shapes of each record, in record order."""


class _Rows:
    """Plain per-row access to the columns the readers loop over (``iloc`` is slow)."""

    def __init__(self, recs: pd.DataFrame) -> None:
        self.rank = recs["rank"].astype("Int64").fillna(-1).to_numpy(np.int64)
        self.step = recs["step"].to_numpy(object)
        self.start = recs["start_us"].to_numpy(np.float64)
        self.backward = recs["backward"].to_numpy(bool)

    def __call__(self, i: int) -> dict[str, Any]:
        return {"rank": int(self.rank[i]), "step": self.step[i], "start_us": self.start[i],
                "backward": bool(self.backward[i])}


def _one_step(recs: pd.DataFrame, cut: pd.Series | None = None) -> pd.DataFrame:
    """The records of one step per rank (every step of a job runs the same operators):
    the last of the steps with the most records, among the steps recorded in full where
    the rank has one (``cut``: True on the records of a step whose device tasks were
    recorded only in part). Profiles without step numbers keep all."""
    if recs.empty or not recs["step"].notna().any():
        return recs
    counts = recs.dropna(subset=["step"]).groupby(["rank", "step"]).size()
    if cut is not None and cut.any():
        part_cut = cut[recs["step"].notna()].groupby(
            [recs["rank"], recs["step"]]).all()
    else:
        part_cut = pd.Series(False, index=counts.index)
    keep = []
    for rank, part in counts.groupby(level=0):
        whole = part[~part_cut.reindex(part.index, fill_value=False).to_numpy(bool)]
        part = whole if not whole.empty else part
        top = part[part == part.max()]
        keep.append((rank, top.index[-1][1]))
    pick = pd.MultiIndex.from_tuples(keep, names=["rank", "step"])
    key = pd.MultiIndex.from_arrays([recs["rank"], recs["step"]])
    return recs[key.isin(pick)].reset_index(drop=True)


def _mode(values: list[Any]) -> Any:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return Counter(values).most_common(1)[0][0]


def _per_step(rows: pd.DataFrame) -> pd.Series:
    """Rows per (rank, step), steps without a number counted as one step."""
    if rows.empty:
        return pd.Series(dtype="float64")
    if rows["step"].notna().any():
        rows = rows[rows["step"].notna()]
    step = rows["step"].astype("Float64").fillna(-1.0)
    return rows.groupby([rows["rank"].to_numpy(), step.to_numpy()]).size()


def _typical(counts: pd.Series, ranks: list[int] | None = None) -> dict[int, int]:
    """Most common per-step count of each rank."""
    out = {}
    if counts.empty:
        return out
    for rank, part in counts.groupby(level=0):
        if ranks is not None and rank not in ranks:
            continue
        out[int(rank)] = int(part.mode().iloc[0])
    return out


def _where(source: str, fmt: str) -> str:
    """The file the shapes were read from, for the evidence sentences."""
    if fmt == "kineto":  # GPU kernels carry the Input Dims of the operator that launched them
        return "the trace's cpu_op Input Dims"
    if source == "kernels":
        return {"ascend_db": "the COMPUTE_TASK_INFO table of the .db export"}.get(
            fmt, "kernel_details.csv (Input Shapes)")
    return "FRAMEWORK/cpu_framework_*.txt (operator input shapes)"


@dataclass
class _Attn:
    rank: int
    step: Any
    start: float
    backward: bool
    b: int | None
    s: int | None
    heads: int | None
    kv_heads: int | None
    d: int | None
    q_width: int | None
    kv_width: int | None
    what: str
    layout: str = ""      # an Ascend kernel's input layout as settled (qkv_layout)
    note: str = ""        # how that layout was settled, or that it was assumed
    heads_from: str = ""  # what gave the heads of a 3-D query, when something did
    bh: int | None = None  # batch × heads of a 3-D bmm attention (folded together)
    scores: tuple[int, ...] | None = None  # its softmax's input (the scores' view)
    chain: bool = False  # run as batched products, found by their shapes (bmm_attention)


def _attention(recs: pd.DataFrame, label: pd.Series, shapes: _Shapes,
               emb: list[dict] | None = None, where: str = "the profile") -> list[_Attn]:
    """Attention kernels (forward and backward) with the sizes their shapes give.

    Ascend kernels whose layout is an argument (:data:`~.qkv_layout.LAYOUT_ARGUMENT`) are
    read in the layout their other tensors and the embeddings' token ids ``emb``
    (:func:`_embeddings`) settle (:mod:`~perfkit.analysis.shapes.qkv_layout`); ``where``
    (the file the shapes come from) is named when the layout had to be assumed.
    """
    rows = _Rows(recs)
    lab = label.tolist()
    out: list[_Attn | None] = []
    pending: list[tuple[int, tuple[int, ...], tuple[int, ...], list[tuple[int, ...]],
                        dict[str, Any]]] = []
    outputs = recs["output_shapes"] if "output_shapes" in recs.columns else None
    fwd = label.str.contains(re.compile(ATTENTION_PATTERNS["fwd"])).to_numpy(bool).copy()
    bwd = label.str.contains(re.compile(ATTENTION_PATTERNS["bwd"])).to_numpy(bool).copy()
    # Kineto records nested attention ops; count only the outermost name of each kind
    for mask in (fwd, bwd):
        names = label[mask]
        if names.nunique() > 1:
            first = names.value_counts().index
            top = [n for n in first if "scaled_dot_product_attention" in n.lower()
                   or "FlashAttentionScore" in n]
            keep = top[0] if top else first[-1]
            mask &= (label == keep).to_numpy(bool)
    for i in np.nonzero(fwd | bwd)[0]:
        sh = [s for s in shapes[i] if s]
        if len(sh) < 2:
            continue
        q, k = sh[0], sh[1]
        row = rows(i)
        common = dict(rank=int(row["rank"]), step=row["step"], start=float(row["start_us"]),
                      backward=bool(bwd[i]), what=str(lab[i]))
        if LAYOUT_ARGUMENT.match(str(lab[i])) and len(q) == len(k) and (
                (len(q) == 3 and q[:2] == k[:2])
                or (len(q) == 4 and q[0] == k[0] and q[3] == k[3])):
            others = list(sh[3:])
            if outputs is not None:
                others += [s for s in parse_shapes(outputs.iat[i]) if s]
            pending.append((len(out), q, k, others, common))
            out.append(None)  # read once the profile's layout is settled
        elif VLLM_ATTENTION.match(str(lab[i])):  # TND: the batch's tokens packed together
            if len(q) == 3 and len(k) == 3 and q[0] == k[0] and q[2] == k[2]:
                out.append(_Attn(b=None, s=None, heads=q[1], kv_heads=k[1], d=q[2],
                                 q_width=q[1] * q[2], kv_width=k[1] * k[2], layout="TND",
                                 note=f"vLLM's layer passes the query as (tokens, heads, head "
                                      f"size) = {shape_text(q)}", **common))
        elif len(q) == 4 and len(k) == 4 and _BSND.match(str(lab[i])):  # BSND
            if q[0] == k[0] and q[3] == k[3]:
                out.append(_Attn(b=q[0], s=q[1], heads=q[2], kv_heads=k[2], d=q[3],
                                 q_width=q[2] * q[3], kv_width=k[2] * k[3], **common))
        elif len(q) == 3 and len(k) == 3 and q[:2] == k[:2]:  # BSH
            out.append(_Attn(b=q[0], s=q[1], heads=None, kv_heads=None, d=None,
                             q_width=q[2], kv_width=k[2], **common))
        elif len(q) == 4 and len(k) == 4 and q[0] == k[0] and q[3] == k[3]:  # BNSD
            out.append(_Attn(b=q[0], s=q[2], heads=q[1], kv_heads=k[1], d=q[3],
                             q_width=q[1] * q[3], kv_width=k[1] * k[3], **common))
    out.extend(_bmm_attention(recs, label, shapes, rows))
    _settle(out, pending, emb or [], where)
    return [a for a in out if a is not None]


def _bmm_attention(recs: pd.DataFrame, label: pd.Series, shapes: _Shapes, rows: _Rows
                   ) -> list[_Attn]:
    """Unfused attention as batched products, softmax, batched products, judged by their
    shapes (:func:`~.bmm_attention.bmm_attention_triples`). Of 3-D products ``N = b·a`` is
    folded, so neither the batch nor the heads are read here, only ``S``, the head size
    ``d`` and the softmax's input (the scores' view, which :mod:`~.folded_batch` may unfold
    with other evidence); 4-D products (MindSpore's ``BatchMatMul``) keep them apart,
    ``q (b, a, S, d)``."""
    out = []
    for t in record_triples(recs, shapes):
        row = rows(t.qk)
        back = t.backward or bool(row["backward"])
        view = next((tuple(x) for x in shapes[t.softmax] if x), None)
        common = dict(rank=int(row["rank"]), step=row["step"], start=float(row["start_us"]),
                      backward=back, s=t.s, d=t.d, kv_heads=None, kv_width=None, chain=True)
        if len(t.batch) == 2:  # (b, a, S, d): the batch and the heads apart
            b, a = t.batch
            out.append(_Attn(b=b, heads=a, q_width=a * t.d, what="batched q·kᵀ MatMul, "
                             "softmax, MatMul of (b, a, S, d) " + (
                                 "(backward)" if back else "(forward)"), **common))
            continue
        out.append(_Attn(b=None, heads=None, q_width=None, bh=t.n, scores=view,
                         what="batched q·kᵀ bmm, softmax, bmm " + (
                             "(backward)" if back else "(forward)"), **common))
    return out


def _folded_heads(att: list[_Attn], gemms: list[_Gemm]
                  ) -> tuple[int, bool, str, int] | None:
    """The query heads of forward attentions run as 3-D bmm (batch × heads folded into
    ``N``), read from the projections beside them.

    ``h`` heads fit an attention of ``(N, S, d)`` when ``h`` divides ``N`` and a forward
    projection of ``N·S / h`` tokens writes its queries (``h·d`` wide, or ``3·h·d`` for a
    fused QKV) or reads its output (``h·d`` wide). Returns the one ``h`` that fits every
    distinct ``(N, S, d)``, whether a fused QKV projection was among the fits, that
    projection in words and its input width (the hidden size, for a fused QKV); None when
    no single ``h`` fits them all.
    """
    sizes = sorted({(a.bh, a.s, a.d) for a in att if a.bh and a.s and a.d and not a.backward})
    dims = sorted({c for g in gemms if not g.backward and (not g.batched or g.linear)
                   for c in g.cands})
    fits: set[int] | None = None
    proj: dict[int, tuple[int, int, int, int]] = {}
    for bh, s, d in sizes:
        mine = set()
        for m, k, n in dims:
            h = bh * s // m if m > 0 and (bh * s) % m == 0 else 0
            if h and bh % h == 0 and (n in (h * d, 3 * h * d) or k == h * d):
                mine.add(h)
                if n == 3 * h * d or h not in proj:
                    proj[h] = (m, k, n, d)
        fits = mine if fits is None else fits & mine
    if not fits or len(fits) != 1:
        return None
    h = fits.pop()
    m, k, n, d = proj[h]
    fused = n == 3 * h * d
    text = (f"a projection of {m} tokens, {k} → {n}"
            + (f" = 3·{h}·{d} (fused QKV)" if fused else "")
            + f", so batch × heads splits into {h} heads of {d}")
    return h, fused, text, k


def _settle(out: list[_Attn | None], pending: list[tuple[int, tuple[int, ...],
            tuple[int, ...], list[tuple[int, ...]], dict[str, Any]]], emb: list[dict],
            where: str) -> None:
    """Read the kernels whose layout the profile does not record, in the layout settled
    for each rank of query (3-D, 4-D) by all their cues together."""
    ids = _mode([tuple(e["bs"]) for e in emb if e.get("bs")])
    for rank in (3, 4):
        mine = [p for p in pending if len(p[1]) == rank]
        if not mine:
            continue
        q = _mode([p[1] for p in mine if not p[4]["backward"]] or [p[1] for p in mine])
        cues = [c for p in mine for c in kernel_cues(p[1], p[3])]
        cue = embedding_cue(q, ids) if ids else None
        if cue is not None:
            cues.append(cue)
        layout, note = settle(q, cues, where)
        for at, qs, ks, others, common in mine:
            got = sizes(layout, qs, ks, others)
            out[at] = _Attn(b=got["b"], s=got["s"], heads=got["heads"],
                            kv_heads=got["kv_heads"], d=got["d"], q_width=got["q_width"],
                            kv_width=got["kv_width"], layout=layout, note=note,
                            heads_from=got["heads_from"], **common)


def _gemms(recs: pd.DataFrame, label: pd.Series, shapes: _Shapes) -> list[_Gemm]:
    """Matrix products with one orientation each (the activation one when it is clear)."""
    rows = _Rows(recs)
    lab = label.tolist()
    # the label is the kernel's own type where the profile records one (a MemSet that a
    # product's launcher runs is none), else its name
    mask = label.str.contains(_GEMM).to_numpy(bool)
    linear = label.str.lower().eq("aten::linear").to_numpy(bool)
    if (mask & linear).any():  # forward GEMMs with explicit (b, s, in) -> out
        mask = mask & linear
    out = []
    dims: dict[tuple[Any, str], Any] = {}  # a step repeats a few hundred distinct products
    for i in np.nonzero(mask)[0]:
        key = (tuple(shapes[i]), lab[i])
        if key not in dims:
            dims[key] = _gemm_dims(shapes[i], lab[i])
        cands, bias, batch = dims[key]
        if not cands:
            continue
        row = rows(i)
        out.append(_Gemm(int(row["rank"]), row["step"], float(row["start_us"]), cands, bias,
                         bool(linear[i]), batch, bool(row["backward"])))
    return out


def _embeddings(recs: pd.DataFrame, label: pd.Series, shapes: _Shapes) -> list[dict]:
    """Embedding lookups: table ``(V, h)`` when the input is there, indices ``(b, s)``."""
    rows = _Rows(recs)
    out = []
    mask = label.str.contains(_EMBED).to_numpy(bool) & ~recs["backward"].to_numpy(bool)
    for i in np.nonzero(mask)[0]:
        sh = shapes[i]
        row = rows(i)
        e = {"rank": int(row["rank"]), "step": row["step"], "table": None, "bs": None,
             "tokens_h": None}
        ins = [s for s in sh if s]
        if len(ins) >= 2 and len(ins[0]) == 2:
            e["table"] = ins[0]
            if len(ins[1]) == 2:
                e["bs"] = ins[1]
        elif len(ins) == 1 and len(ins[0]) == 2:  # torch_npu GatherV2 as the simulator
            e["tokens_h"] = ins[0]                  # writes it: (tokens, h)
        out.append(e)
    return out
