"""The model's widths and kinds read from the sized operators, into a :class:`ShapeReading`.

Data type, batch and sequence, hidden size, heads and head size, MLP kind, norm and
position embedding: each value with the sentence that says where it came from, or why it
could not be read (the FFN and vocabulary widths and the bias:
:mod:`~perfkit.analysis.shapes.widths`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ...format import counted
from .folded_batch import _unfold
from .operators import _Attn, _folded_heads, _Gemm, _mode, _Shapes
from .records import (
    _EMBED,
    _GEMM,
    _LAYERNORM,
    _LOSS,
    _RMSNORM,
    _ROTARY,
    ATTENTION_PATTERNS,
    DTYPE_NAMES,
    FUSED_ATTENTION,
)

__all__ = ["ShapeReading"]

@dataclass
class ShapeReading:
    """What the shapes say: each value with its evidence, or the reason it is missing.

    Attributes
    ----------
    values : dict
        Field name -> value (local widths are already multiplied by ``tp``).
    details : dict
        Field name -> the sentence saying what was read, or why nothing could be.
    source : str
        The table the shapes came from.
    """

    values: dict[str, Any] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    source: str = ""

    def put(self, name: str, value: Any, detail: str) -> None:
        """Record ``value`` (None: unknown) and its evidence or reason."""
        self.values[name] = value
        self.details[name] = detail

    def get(self, name: str) -> Any:
        """The value of ``name`` (None when unknown or never read)."""
        return self.values.get(name)


def _first_dtypes(rows: pd.DataFrame) -> list[str]:
    """The calculators' name of each row's first input type (rows without one left out)."""
    types = rows["input_dtypes"].dropna().astype(str)
    names = [DTYPE_NAMES.get(t.split(";")[0].strip().lower()) for t in types]
    return [n for n in names if n]


def _read_dtype(out: ShapeReading, recs: pd.DataFrame, label: pd.Series, where: str) -> None:
    """The matrix multiplications' input type; without one (a profile cut short, or kept
    to a few kernels), the attention kernels' query type, then the embedding table's."""
    gemm = recs[label.str.contains(_GEMM).to_numpy(bool)]
    none = ("the matrix multiplications carry no data type (MindSpore's CPU profile "
            "records none)" if len(gemm) else "no matrix multiplication with shapes in the "
                                              "profile")
    attn = (label.str.contains(ATTENTION_PATTERNS["fwd"])
            | label.str.contains(ATTENTION_PATTERNS["bwd"])).to_numpy(bool)
    tried = (("matrix multiplications", "inputs", gemm),
             ("attention kernels", "queries", recs[attn]),
             ("embedding lookups", "tables", recs[label.str.contains(_EMBED).to_numpy(bool)]))
    for what, inputs, rows in tried:
        names = _first_dtypes(rows)
        if not names:
            continue
        counts = Counter(names)
        name, k = counts.most_common(1)[0]
        text = f"{where}: {k} of {len(names)} {what} take {name} {inputs} ({dict(counts)})"
        out.put("dtype", name, text if rows is gemm else f"{text}; {none}")
        return
    out.put("dtype", None, f"{where}: {none}" if len(gemm) else none)


def _read_batch(out: ShapeReading, att: list[_Attn], gemms: list[_Gemm], emb: list[dict],
                where: str) -> None:
    fwd = [a for a in att if not a.backward and a.b and a.s]
    if fwd:
        b, s = _mode([(a.b, a.s) for a in fwd])
        ex = next(a for a in fwd if (a.b, a.s) == (b, s))
        text = (f"{where}: {ex.what} inputs give batch {b}, sequence {s} "
                f"({counted(len(fwd), 'kernel')})" + (f"; {ex.note}" if ex.note else ""))
        out.put("micro_batch_size", b, text)
        out.put("seq_length", s, text)
        return
    packed = [a for a in att if not a.backward and a.layout == "TND"]
    folded = [a for a in att if not a.backward and a.bh]
    if packed:
        why = (f"{where}: {packed[0].what} takes packed sequences ({packed[0].note}): it "
               "shows the tokens, not how they split into sequences")
    elif folded and (got := _unfold(folded, gemms, emb)) is not None:
        b, s, said = got
        text = (f"{where}: {folded[0].what}: {said}, so batch {b}, sequence {s} "
                f"({counted(len(folded), 'attention')})")
        out.put("micro_batch_size", b, text)
        out.put("seq_length", s, text)
        return
    elif folded:
        pairs = sorted({(a.bh, a.s) for a in folded})
        why = (f"{where}: {folded[0].what}: batch × heads and sequence "
               + ", ".join(f"{n} and {s_}" for n, s_ in pairs[:3])
               + " (3-D products fold the batch into the heads: the batch cannot be read)")
    else:
        why = ("no attention kernel (FlashAttentionScore, scaled_dot_product_attention, "
               "batched q·kᵀ MatMul) with shapes: the batch and sequence cannot be read (not "
               "a transformer, or an attention the reader does not know)")
    out.put("micro_batch_size", None, why)
    out.put("seq_length", None, why)


def _read_hidden(out: ShapeReading, act: list[_Gemm], emb: list[dict], where: str) -> None:
    tables = [tuple(e["table"]) for e in emb if e["table"]]
    if tables:
        v, h = _mode(tables)
        out.put("hidden_size", h, f"{where}: embedding table ({v}, {h})")
        out.values["_embedding_vocab"] = v
        return
    toks = [tuple(e["tokens_h"]) for e in emb if e["tokens_h"]]
    if toks:
        h = _mode([t[1] for t in toks])
        out.put("hidden_size", h, f"{where}: embedding lookup output (tokens, {h})")
        return
    if not act:
        out.put("hidden_size", None, "no projection GEMM over the micro-batch's tokens")
        return
    sides = Counter()
    for g in act:
        sides.update({g.k, g.n})  # a square projection (h → h) counts once
    h, k = sides.most_common(1)[0]
    out.put("hidden_size", h, f"{where}: the width on one side of {k} of the {len(act)} "
                              "projection GEMMs (every projection reads or writes the "
                              "hidden state)")


def _read_heads(out: ShapeReading, recs: pd.DataFrame, label: pd.Series, shapes: _Shapes,
                att: list[_Attn], act: list[_Gemm], tp: int, where: str,
                gemms: list[_Gemm] | None = None) -> None:
    fwd = [a for a in att if not a.backward]
    h = out.get("hidden_size")
    d = _mode([a.d for a in fwd if a.d])
    heads = _mode([a.heads for a in fwd if a.heads])
    kv = _mode([a.kv_heads for a in fwd if a.kv_heads and a.kv_width])
    q_width = _mode([a.q_width for a in fwd if a.q_width])
    kv_width = _mode([a.kv_width for a in fwd if a.kv_width])
    # the widths alone already tell the projections apart, even when the heads are not
    # known (a 3-D BSH / SBH query without softmax statistics or rotary kernels)
    if q_width:
        out.values["_q_width"] = q_width
    if kv_width:
        out.values["_kv_width"] = kv_width
    how = fwd[0].what if fwd else ""
    told = [a for a in fwd if a.heads_from]
    if told:
        how = f"{told[0].what} and {told[0].heads_from}"
    rot = label.str.contains(_ROTARY).to_numpy(bool) & ~recs["backward"].to_numpy(bool)
    b, s = out.get("micro_batch_size"), out.get("seq_length")
    rot_heads = []
    for i in np.nonzero(rot)[0]:
        for sh in shapes[i]:
            if len(sh) == 4 and b and s and sh[0] == b and sh[1] == s:
                rot_heads.append((sh[2], sh[3]))
            elif len(sh) == 4 and b and s and sh[0] == b and sh[2] == s:
                rot_heads.append((sh[1], sh[3]))
    if rot_heads and d is None:
        widths = sorted({hd for hd, _ in rot_heads})
        d = _mode([dd for _, dd in rot_heads])
        if q_width and d and q_width % d == 0:
            heads = q_width // d
        else:
            heads = widths[-1]
        if kv_width and d and kv_width % d == 0:
            kv = kv_width // d
        elif len(widths) > 1:
            kv = widths[0]
        how = f"{how} and rotary kernels ({', '.join(f'{w}×{d}' for w in widths)})"
    if not fwd:
        why = "no forward attention kernel with shapes"
        for name in ("num_attention_heads", "num_kv_heads", "head_dim"):
            out.put(name, None, why)
        return
    if d is not None and heads is None and q_width is None and any(a.bh for a in fwd):
        # batch × heads folded: the projections beside the products split them
        got = _folded_heads(fwd, gemms or [])
        if got is None:
            out.put("head_dim", d, f"{where}: {how}: head size {d}")
            why = (f"{where}: {how}: head size {d}, the heads folded with the batch into "
                   "one dimension (batch × heads), and no projection beside them shows how "
                   "many heads: the heads cannot be read")
            out.put("num_attention_heads", None, why)
            out.put("num_kv_heads", None, why)
            return
        heads, fused, proj, width = got
        kv = heads if fused else None
        how = f"{how} and {proj}"
        if fused and h is None:
            # no embedding, and the batch folded (no tokens to pick the projections by):
            # the fused QKV projection reads the hidden state
            h = width
            out.put("hidden_size", h, f"{where}: {how}: the fused QKV projection reads "
                                      f"the hidden state, {h} wide")
    if d is None or heads is None:
        why = (f"{where}: {how} shows query width {q_width} but not how it splits into "
               "heads (a 3-D query, B,S,H or S,B,H, without softmax statistics or rotary "
               "kernels)")
        for name in ("num_attention_heads", "num_kv_heads", "head_dim"):
            out.put(name, None, why)
        return
    out.put("head_dim", d, f"{where}: {how}: head size {d}")
    out.put("num_attention_heads", heads * tp,
            f"{where}: {how}: {counted(heads, 'query head')} per rank"
            + (f" × tp {tp}" if tp > 1 else ""))
    out.values["_q_width"] = heads * d
    # key/value heads: a fused attention kernel takes keys and values unrepeated; SDPA and
    # an unfused q·kᵀ often get them already repeated to every query head, and then the
    # projections (separate k/v, or a fused QKV output) show the real count
    native = any(("flash" in a.what.lower() or "fusion" in a.what.lower()) for a in fwd)
    how_kv = ""
    if kv is not None and (native or kv < heads):
        how_kv = how
    else:
        outs = Counter(g.n for g in act if g.k == h) if h else Counter()
        qw = heads * d
        other = {_loss_width(recs, label, shapes), out.values.get("_embedding_vocab")}
        fused = [w for w in outs if qw < w <= 3 * qw and (w - qw) % (2 * d) == 0
                 and heads % ((w - qw) // (2 * d)) == 0 and w not in other]
        narrow = [w for w in outs if w < qw and w % d == 0 and heads % (w // d) == 0]
        if narrow:
            w = max(narrow, key=lambda x: outs[x])
            kv = w // d
            how_kv = f"key/value projections {h} → {w} = {kv}·{d}"
        elif fused:
            w = max(fused, key=lambda x: outs[x])
            kv = (w - qw) // (2 * d)
            how_kv = f"fused QKV projection {h} → {w} = ({heads} + 2·{kv})·{d}"
        elif kv is not None:
            how_kv = how
        elif qw in outs:
            kv = heads
            how_kv = f"query, key and value projections all {h} → {qw}"
    if kv is None:
        out.put("num_kv_heads", None, f"{where}: neither the attention inputs nor the "
                                      "projections show the key/value width")
        return
    # worded as the query heads are: the count per rank, then × tp
    out.put("num_kv_heads", kv * tp, f"{where}: {how_kv}: {counted(kv, 'key/value head')} "
            "per rank" + (f" × tp {tp}" if tp > 1 else ""))
    out.values["_kv_width"] = kv * d


def _loss_width(recs: pd.DataFrame, label: pd.Series, shapes: _Shapes) -> int | None:
    """The last dimension of the loss kernel's logits input (the local vocabulary)."""
    widths = []
    lmask = label.str.contains(_LOSS).to_numpy(bool) & ~recs["backward"].to_numpy(bool)
    for i in np.nonzero(lmask)[0]:
        sh = [s for s in shapes[i] if s]
        if sh and len(sh[0]) >= 2:
            widths.append(sh[0][-1])
    return _mode(widths)


def _read_mlp(out: ShapeReading, recs: pd.DataFrame, label: pd.Series, att: list[_Attn],
              act: list[_Gemm], where: str) -> None:
    h, f = out.get("hidden_size"), out.values.get("_f_width")
    if not h or not f:
        out.put("mlp", None, "the FFN width is unknown")
        return
    ups = []
    for rank in sorted({a.rank for a in att}):
        starts = np.sort([a.start for a in att if a.rank == rank])
        fwd_starts = [a.start for a in att if a.rank == rank and not a.backward]
        lst = sorted((g for g in act if g.rank == rank), key=lambda g: g.start)
        g_start = np.array([g.start for g in lst])
        for start in fwd_starts:
            j = int(np.searchsorted(starts, start, side="right"))
            end = starts[j] if j < len(starts) else np.inf
            lo = int(np.searchsorted(g_start, start, side="right"))
            hi = int(np.searchsorted(g_start, end, side="left"))
            count = 0
            for g in lst[lo:hi]:
                if g.k == f and g.n == h:  # the down projection closes the MLP
                    break
                if g.k == h and g.n == f:
                    count += 1
            if count:
                ups.append(count)
    if not ups:
        out.put("mlp", None, f"{where}: no up-projection {h} → {f} after a forward "
                             "attention kernel")
        return
    k = _mode(ups)
    kind = "gated" if k == 2 else "gpt" if k == 1 else None
    if kind is None:
        out.put("mlp", None, f"{where}: {k} up-projections {h} → {f} per layer: neither a "
                             "plain (1) nor a gated (2) MLP")
        return
    out.put("mlp", kind, f"{where}: {counted(k, 'up-projection')} {h} → {f} before the down-"
                         f"projection in each forward layer ({'gated' if k == 2 else 'plain'}"
                         " MLP)")


def _read_norm_position(out: ShapeReading, recs: pd.DataFrame, label: pd.Series,
                        emb: list[dict], where: str) -> None:
    if label.str.contains(_LAYERNORM).any():
        out.put("norm", "layernorm", f"{where}: LayerNorm kernels")
    elif label.str.contains(_RMSNORM).any():
        out.put("norm", "rmsnorm", f"{where}: RMSNorm kernels (or the rsqrt of an "
                                   "unfused RMSNorm) and no LayerNorm")
    else:
        out.put("norm", None, "no normalisation kernel seen")
    rot = label.str.contains(_ROTARY).any()
    tables = {tuple(e["table"]) for e in emb if e["table"]}
    if rot:
        out.put("position_embedding", "rope", f"{where}: rotary-embedding kernels")
    elif len(tables) > 1:
        out.put("position_embedding", "learned",
                f"{where}: a second embedding table {sorted(tables)[0]} (positions)")
    else:
        out.put("position_embedding", None, "no rotary kernel and no position table: the "
                                            "profile does not show how positions are "
                                            "encoded (an unfused rotary embedding is "
                                            "plain element-wise work)")


def _read_activations(out: ShapeReading, recs: pd.DataFrame, label: pd.Series,
                      att: list[_Attn], where: str) -> None:
    """Put ``flash_attention`` (the attention scores are not kept) and ``norm_fp32`` (the
    norms take fp32 inputs): how the activation memory of a layer is counted."""
    fwd = label[label.str.contains(ATTENTION_PATTERNS["fwd"]).to_numpy(bool)]
    fused = sorted({str(n) for n in fwd.unique() if FUSED_ATTENTION.search(str(n))})
    if fused:
        out.put("flash_attention", True, f"{where}: {', '.join(fused[:2])}: fused attention, "
                                         "the s × s scores are not kept")
    elif any(not a.backward for a in att):
        what = next(a.what for a in att if not a.backward)
        out.put("flash_attention", False, f"{where}: {what}: the attention scores are "
                                          "computed apart and kept")
    else:
        out.put("flash_attention", None, "no forward attention kernel with shapes")
    norms = recs[(label.str.contains(_LAYERNORM) | label.str.contains(_RMSNORM)).to_numpy(bool)
                 & ~recs["backward"].to_numpy(bool)]
    types = [DTYPE_NAMES.get(str(t).split(";")[0].strip().lower())
             for t in norms["input_dtypes"].dropna()]
    types = [t for t in types if t]
    if not types:
        out.put("norm_fp32", None, "no forward normalisation kernel with a data type")
        return
    kind = Counter(types).most_common(1)[0][0]
    cast = kind == "fp32" and out.get("dtype") not in (None, "fp32")
    out.put("norm_fp32", kind == "fp32", f"{where}: the norms take {kind} inputs"
            + (f" (cast up from the {out.get('dtype')} activations)" if cast else ""))
