"""Attention computed as batched products: ``q·kᵀ`` bmm, softmax, ``·v`` bmm.

Eager PyTorch attention (HuggingFace's TimeSformer, ViT, GPT-2 ``eager``) folds the batch
and the heads into one dimension ``N = b·a`` and runs ``scores = bmm(q (N, S, d),
kᵀ (N, d, S))`` (``(N, S, S)``), a softmax of the scores over their last dimension, then
``bmm(p (N, S, S), v (N, S, d))``. MindSpore (its ``BatchMatMul`` on the CPU, and graphs
on Ascend) keeps the batch and the heads apart: ``q (b, a, S, d) x kᵀ (b, a, d, S)``, the
scores ``(b, a, S, S)``. A batched product alone says nothing (MoE experts and other
batched GEMMs take the same kinds of operands), so :func:`bmm_attention_triples` takes a
product for ``q·kᵀ`` only inside the whole chain, on one lane (stream or host thread), in
order, with the next softmax or matrix product after each member being the next member:

* ``q·kᵀ``: ``aten::bmm`` / ``aten::baddbmm`` (its bias first) or a ``BatchMatMul`` with
  operands ``(B…, S, d) x (B…, d, S)``, ``B…`` the batch dimensions (``N``, or ``b, a``),
  ``N`` their product;
* a softmax (``aten::softmax`` / ``aten::_softmax`` / ``aten::_safe_softmax``,
  ``Softmax``, Ascend's fused scale-mask-softmax ``ScaledMaskedSoftmax``) of ``N·S·S``
  elements whose last dimension is ``S`` (the scores, or their ``(b, a, S, S)`` view).
  Its ``dim`` argument is not read: the tables it is read from keep the shapes, not the
  arguments;
* ``·v``: a product with operands ``(B…, S, S) x (B…, S, d)``, the same ``N``, ``S``, ``d``.

Its backward (autograd's ``BmmBackward0`` and ``SoftmaxBackward0``; on Ascend the
``BatchMatMul`` gradients and ``SoftmaxGrad`` / ``ScaledMaskedSoftmaxGrad``; MindSpore's
``SoftmaxBackward`` expanded into element-wise operators under a ``_SoftmaxBackward``
scope) is five members on the lane, matched alike (``backward`` set):

* the ``·v`` product's two gradients, in either order: ``grad_v = pᵀ (N, S, S) ·
  grad (N, S, d)`` and ``grad_p = grad (N, S, d) · vᵀ (N, d, S)``;
* the softmax's backward, of ``N·S·S`` elements whose last dimension is ``S``;
* the ``q·kᵀ`` product's two gradients, in either order: ``grad_kᵀ = qᵀ (N, d, S) ·
  grad (N, S, S)`` (or ``grad_k = gradᵀ (N, S, S) · q (N, S, d)``) and ``grad_q =
  grad (N, S, S) · k (N, S, d)``;

all of the same ``N``, ``S``, ``d``. With ``interleaved``, other matrix products may run
between the backward members (a graph schedules the projections' gradients among them:
MindSpore's CPU profile); batched products and softmaxes may not.

A chain's own rows (:func:`foreign_rows` names the others), what a fused attention kernel
does in one pass and what a chain is timed by: its batched products of its ``N``, ``S``,
``d``, and the rows between them that work on the scores or their gradient (an input of
``N·S·S`` elements: the scale, the mask, the softmax, a dropout, the softmax's backward).
Not its own: another matrix product, and the layout work on ``q``, ``k``, ``v`` and on
their gradients that a graph schedules between the members (MindSpore's CPU profile runs
the transposes of the next attention's ``q``, ``k``, ``v`` between a softmax and its
``·v`` product: they feed that attention, not this one), which runs before and after the
chain wherever it is not scheduled inside it. A row whose shapes are not recorded is
counted (nothing says it is not the chain's).

A product is read from its shapes as recorded, the views it multiplies: its operands
must multiply as they are (``(…, M, K) x (…, K, N)``). An Ascend ``BatchMatMul`` may be
recorded with an operand untransposed (its ``adj_x`` / ``adj_y`` flags are not in the
profile): such a product does not multiply as recorded, and its shapes do not say what it
computes (:func:`judged_by_shapes`).

Consecutive rows of one operator (its kernels, or a softmax nested in another, as host
traces record ``aten::softmax`` around ``aten::_softmax``; the element-wise rows of an
expanded softmax backward) count as one member. Rows that are neither products nor
softmaxes may come between the members (copies, a scale, a mask, a dropout: torch_npu runs
``Mul``, ``ScaledMaskedSoftmax``, ``DropOutDoMask`` and an ``AsStrided`` copy between its
two ``BatchMatMul``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from .records import (
    _BATCH_MATMUL,
    _GEMM,
    _SOFTMAX,
    _SOFTMAX_BACKWARD,
    ATTENTION_PATTERNS,
    EXPANDED_SOFTMAX_BACKWARD,
    parse_shapes,
    shape_records,
)

__all__ = ["BmmAttention", "bmm_attention_triples", "bmm_attention", "record_triples",
           "foreign_rows",
           "has_qk_product", "judged_by_shapes", "is_batched"]

_BMM = re.compile(r"(?i)^aten::(?:bmm|baddbmm)$")
#: The labels that end the search for the next member: products, softmaxes, attention.
_STOPS = (_GEMM, _BATCH_MATMUL, _SOFTMAX, _SOFTMAX_BACKWARD,
          *(re.compile(p) for p in ATTENTION_PATTERNS.values()))

Shape = tuple[int, ...]
#: What a product's shapes give: ``(N, S, d)`` when they are of one kind, else None.
_Sizes = Callable[[str, Sequence[Shape]], "tuple[int, int, int] | None"]


@dataclass(frozen=True)
class BmmAttention:
    """One attention found as ``q·kᵀ`` bmm, softmax, ``·v`` bmm, or its backward.

    Attributes
    ----------
    qk, softmax, pv : int
        The first row of each member (``qk`` and ``pv`` may span several rows: ``qk_end``
        is the ``q·kᵀ`` product's last row, ``pv_end`` the ``·v`` product's). Of a
        backward chain: the first row of the ``·v`` product's two gradients, of the
        softmax's backward, and of the ``q·kᵀ`` product's two gradients.
    qk_end, pv_end : int
        The last row of the first and of the second product (of a backward chain: of the
        first pair of products and of the second).
    n : int
        Batch × heads ``N`` (the bmm's batch dimension: the two are folded together).
    s : int
        The sequence ``S`` (queries = keys).
    d : int
        The head size.
    backward : bool
        Whether this is the backward chain (``·v`` gradients, softmax backward, ``q·kᵀ``
        gradients).
    batch : tuple of int
        The first product's batch dimensions: ``(N,)`` of 3-D products, ``(b, a)`` of 4-D
        ones (batch and heads apart).
    """

    qk: int
    qk_end: int
    softmax: int
    pv: int
    pv_end: int
    n: int
    s: int
    d: int
    backward: bool = False
    batch: tuple[int, ...] = ()


def _operands(label: str, shapes: Sequence[Shape]) -> tuple[Shape, Shape] | None:
    """The two operands of a batched product (``baddbmm``: after its bias): both 3-D or
    both 4-D, with the same batch dimensions, multiplying as recorded (``(…, M, K) x
    (…, K, N)``); None otherwise."""
    ins = [s for s in shapes if s]
    if label.lower() == "aten::baddbmm":
        ins = ins[1:]
    if len(ins) < 2:
        return None
    a, b = ins[0], ins[1]
    if len(a) not in (3, 4) or len(b) != len(a) or a[:-2] != b[:-2] or a[-1] != b[-2]:
        return None
    return a, b


def _batch(label: str, shapes: Sequence[Shape]) -> tuple[int, ...]:
    """The batch dimensions of a batched product's operands (``()`` when unreadable)."""
    ops = _operands(label, shapes)
    return tuple(ops[0][:-2]) if ops is not None else ()


def _mkn(label: str, shapes: Sequence[Shape]) -> tuple[int, int, int, int] | None:
    """``(N, M, K, N_out)`` of a batched product (``N`` the product of its batch
    dimensions), else None."""
    ops = _operands(label, shapes)
    if ops is None:
        return None
    a, b = ops
    return int(np.prod(a[:-2], dtype=np.int64)), a[-2], a[-1], b[-1]


def _qk(label: str, shapes: Sequence[Shape]) -> tuple[int, int, int] | None:
    """``(N, S, d)`` of a ``q (…, S, d) x kᵀ (…, d, S)`` product, else None."""
    got = _mkn(label, shapes)
    if got is None:
        return None
    n, m, k, out = got
    return (n, m, k) if m == out else None


def _pv(label: str, shapes: Sequence[Shape]) -> tuple[int, int, int] | None:
    """``(N, S, d)`` of a ``p (…, S, S) x v (…, S, d)`` product, else None."""
    if label.lower() == "aten::baddbmm":
        return None
    got = _mkn(label, shapes)
    if got is None:
        return None
    n, m, k, out = got
    return (n, m, out) if m == k else None


def _kt(label: str, shapes: Sequence[Shape]) -> tuple[int, int, int] | None:
    """``(N, S, d)`` of a ``qᵀ (…, d, S) x grad (…, S, S)`` product (the gradient of
    ``kᵀ``), else None."""
    if label.lower() == "aten::baddbmm":
        return None
    got = _mkn(label, shapes)
    if got is None:
        return None
    n, m, k, out = got
    return (n, k, m) if k == out else None


def _k_grad(label: str, shapes: Sequence[Shape]) -> tuple[int, int, int] | None:
    """``(N, S, d)`` of the gradient of ``q·kᵀ``'s second operand: ``grad_kᵀ``
    (:func:`_kt`), or ``grad_k = gradᵀ (…, S, S) x q (…, S, d)`` (:func:`_pv`'s shapes)."""
    return _kt(label, shapes) or _pv(label, shapes)


def _pair(labels: Sequence[str], shapes: Sequence[Sequence[Shape]], a: int, b: int,
          first: _Sizes, second: _Sizes) -> tuple[int, int, int] | None:
    """``(N, S, d)`` where the products at rows ``a`` and ``b`` are, in either order, one
    of the kind ``first`` and one of the kind ``second`` of the same sizes."""
    if not all(is_batched(labels[r]) for r in (a, b)):
        return None
    for x, y in ((a, b), (b, a)):
        got = first(labels[x], shapes[x])
        if got is not None and second(labels[y], shapes[y]) == got:
            return got
    return None


def judged_by_shapes(label: str, shapes: Sequence[Shape]) -> bool:
    """Whether a matrix product's shapes say whether it begins an attention chain: a
    batched product (``aten::bmm`` / ``aten::baddbmm``, a ``BatchMatMul``) of two 3-D or
    two 4-D operands that multiply as recorded (the views it takes, a transposed ``kᵀ`` as
    ``(…, d, S)``). It begins one only as the ``q·kᵀ`` product of a chain of
    :func:`bmm_attention_triples`. A ``BatchMatMul`` whose operands do not multiply as
    recorded (one kept untransposed, its transpose flag not in the profile) is not judged:
    its shapes do not say what it computes."""
    return is_batched(label) and _operands(label, shapes) is not None


def _scores(shapes: Sequence[Shape], n: int, s: int) -> bool:
    """Whether a softmax's input is ``N·S·S`` elements with ``S`` last."""
    ins = [x for x in shapes if x]
    return bool(ins) and len(ins[0]) >= 2 and ins[0][-1] == s and \
        int(np.prod(ins[0], dtype=np.int64)) == n * s * s


def is_batched(label: str) -> bool:
    """Whether an operator label is a batched product (``aten::bmm`` / ``aten::baddbmm``,
    a ``BatchMatMul``): what :func:`has_qk_product` tests the shapes of."""
    return bool(_BMM.search(label) or _BATCH_MATMUL.search(label))


def has_qk_product(labels: pd.Series, shapes: pd.Series) -> bool:
    """Whether any row is a ``q (…, S, d) x kᵀ (…, d, S)`` batched product.

    The first member of every chain of :func:`bmm_attention_triples`, so False rules the
    search out. Each distinct label and each distinct (label, shapes) pair of the batched
    products is tested once: a million-task profile costs two factorisations.
    """
    codes, uniq = pd.factorize(labels, use_na_sentinel=True)
    batched = np.array([is_batched(str(u)) for u in uniq.tolist()], dtype=bool)
    if not batched.any():
        return False
    pick = (codes >= 0) & batched[np.where(codes >= 0, codes, 0)]
    pairs = pd.DataFrame({"label": np.asarray(labels, dtype=object)[pick],
                          "shapes": np.asarray(shapes, dtype=object)[pick]}) \
        .drop_duplicates()
    return any(_qk(str(lab), parse_shapes("" if pd.isna(shp) else str(shp))) is not None
               for lab, shp in zip(pairs["label"], pairs["shapes"], strict=True))


def bmm_attention_triples(labels: Sequence[str], shapes: Sequence[Sequence[Shape]],
                          lane: np.ndarray, interleaved: bool = False) -> list[BmmAttention]:
    """The ``q·kᵀ`` bmm, softmax, ``·v`` bmm chains among rows in execution order.

    Parameters
    ----------
    labels : sequence of str
        Each row's operator (``aten::bmm``, ``aten::_softmax``, ...).
    shapes : sequence of list of tuple
        Each row's parsed input shapes (:func:`~perfkit.analysis.shapes.parse_shapes`).
    lane : ndarray
        Each row's lane (rank and stream or host thread, coded): rows of one lane are in
        start order.
    interleaved : bool
        Whether matrix products that are not batched may run between the members of a
        backward chain (a graph's scheduling; a chain's rows from its first to its last
        then hold those products too: :func:`foreign_rows` names them).

    Returns
    -------
    list of BmmAttention
        In order of their first rows, forward and backward chains; see the module's text
        for the rules.
    """
    lane = np.asarray(lane)
    code_of, uniq = pd.factorize(np.asarray(labels, dtype=object), use_na_sentinel=False)
    texts = [str(u) for u in uniq.tolist()]
    stop = np.array([any(rx.search(u) for rx in _STOPS) for u in texts], dtype=bool)
    plain = np.array([bool(_GEMM.search(u)) and not is_batched(u) for u in texts],
                     dtype=bool)  # a matrix product that is not batched
    rows = np.flatnonzero(stop[code_of]) if len(uniq) else np.zeros(0, dtype=int)
    out: list[BmmAttention] = []
    for code in dict.fromkeys(lane[rows].tolist()):
        members = _members(rows[lane[rows] == code], labels, shapes)
        out.extend(_backward([m for m in members if not plain[code_of[m[0]]]]
                             if interleaved else members, labels, shapes))
        for j in range(len(members) - 2):
            (a, a_end), (b, _), (c, c_end) = members[j], members[j + 1], members[j + 2]
            if not is_batched(labels[a]):
                continue
            got = _qk(labels[a], shapes[a])
            if got is None or not _SOFTMAX.search(labels[b]) or \
                    not _scores(shapes[b], got[0], got[1]):
                continue
            if is_batched(labels[c]) and _pv(labels[c], shapes[c]) == got:
                out.append(BmmAttention(a, a_end, b, c, c_end, *got,
                                        batch=_batch(labels[a], shapes[a])))
    return sorted(out, key=lambda t: t.qk)


def _backward(members: list[tuple[int, int]], labels: Sequence[str],
              shapes: Sequence[Sequence[Shape]]) -> list[BmmAttention]:
    """The backward chains among one lane's members (see the module's text): the ``·v``
    product's two gradients, the softmax's backward, the ``q·kᵀ`` product's two."""
    out = []
    for j in range(2, len(members) - 2):
        (b, _) = members[j]
        if not _SOFTMAX_BACKWARD.search(labels[b]):
            continue
        (p1, _), (p2, p2_end) = members[j - 2], members[j - 1]
        (g1, _), (g2, g2_end) = members[j + 1], members[j + 2]
        got = _pair(labels, shapes, p1, p2, _qk, _pv)
        if got is None or not _scores(shapes[b], got[0], got[1]) or \
                _pair(labels, shapes, g1, g2, _k_grad, _pv) != got:
            continue
        out.append(BmmAttention(p1, p2_end, b, g1, g2_end, *got, backward=True,
                                batch=_batch(labels[p1], shapes[p1])))
    return out


def foreign_rows(chains: Sequence[BmmAttention], labels: Sequence[str],
                 shapes: Sequence[Sequence[Shape]]) -> np.ndarray:
    """The rows inside the chains (from a chain's ``qk`` to its ``pv_end``) that are the
    own rows of none of them (see the module's text): other matrix products, the layout
    work on ``q``, ``k``, ``v`` a graph schedules between the members. Each distinct
    (label, shapes, sizes) is judged once."""
    inside: set[int] = set()
    own: set[int] = set()
    judged: dict[tuple[str, tuple[Shape, ...], int, int, int], bool] = {}
    for t in chains:
        for r in range(t.qk, t.pv_end + 1):
            inside.add(r)
            key = (labels[r], tuple(shapes[r]), t.n, t.s, t.d)
            if key not in judged:
                judged[key] = _own_row(key[0], key[1], t.n, t.s, t.d)
            if judged[key]:
                own.add(r)
    return np.array(sorted(inside - own), dtype=np.int64)


def _own_row(label: str, shapes: Sequence[Shape], n: int, s: int, d: int) -> bool:
    """Whether a row inside a chain of sizes ``(n, s, d)`` is the chain's own: one of its
    batched products, or work on its ``n·s·s`` scores; a row whose shapes are not recorded
    is."""
    if is_batched(label):
        return (n, s, d) in (_qk(label, shapes), _pv(label, shapes), _kt(label, shapes))
    if _GEMM.search(label):
        return False
    if not shapes:
        return True
    ins = [x for x in shapes if x]
    return bool(ins) and int(np.prod(ins[0], dtype=np.int64)) == n * s * s


def _members(rows: np.ndarray, labels: Sequence[str], shapes: Sequence[Sequence[Shape]]
             ) -> list[tuple[int, int]]:
    """Runs of one lane's rows that are one operator: ``(first, last)`` row of each run of
    consecutive rows with the same shapes and the same label, or both softmaxes; and the
    rows of one expanded softmax backward (:data:`~.records.EXPANDED_SOFTMAX_BACKWARD`),
    whatever their shapes."""
    out: list[tuple[int, int]] = []
    for r in rows.tolist():
        if out:
            p = out[-1][1]
            same = list(shapes[p]) == list(shapes[r]) and (
                labels[p] == labels[r]
                or (_SOFTMAX.search(labels[p]) is not None
                    and _SOFTMAX.search(labels[r]) is not None))
            if same or labels[p] == labels[r] == EXPANDED_SOFTMAX_BACKWARD:
                out[-1] = (out[-1][0], r)
                continue
        out.append((r, r))
    return out


def record_triples(recs: pd.DataFrame, shapes: Sequence[Sequence[Shape]]
                   ) -> list[BmmAttention]:
    """:func:`bmm_attention_triples` of shape records (:func:`~.records.shape_records`:
    sorted by rank and start), each (rank, ``lane``) a lane; the chains are counted, not
    timed, so other matrix products may run between a backward chain's members."""
    lane = recs["lane"] if "lane" in recs.columns else pd.Series(pd.NA, index=recs.index)
    key = pd.MultiIndex.from_arrays([recs["rank"].astype("Int64").fillna(-1).to_numpy(),
                                     lane.astype(TEXT).fillna("").to_numpy()])
    code, _ = pd.factorize(key)
    return bmm_attention_triples(recs["label"].astype(str).tolist(), shapes, code,
                                 interleaved=True)


def bmm_attention(profile: Any) -> pd.DataFrame:
    """The attentions a profile runs as batched products, softmax, batched products
    (:func:`bmm_attention_triples`).

    Read from the shape records (:func:`~.records.shape_records`: the kernels' launching
    operators, else the host operators).

    Returns
    -------
    DataFrame
        One row per attention, forward or backward, in rank and start order: ``rank``,
        ``step``, ``start_us`` (of the ``q·kᵀ`` product), ``backward``, ``batch_heads``
        (``N``, batch × heads), ``seq`` (``S``), ``head_dim`` (``d``), ``qk_shapes``,
        ``softmax_shapes``, ``pv_shapes`` (the members' input shapes as the profile writes
        them; of a backward chain, the first rows of its first pair of products, of the
        softmax's backward and of its second pair).
    """
    recs, _ = shape_records(profile)
    cols = ["rank", "step", "start_us", "backward", "batch_heads", "seq", "head_dim",
            "qk_shapes", "softmax_shapes", "pv_shapes"]
    if recs.empty:
        return pd.DataFrame(columns=cols)
    texts = recs["input_shapes"].astype(TEXT).fillna("")
    parsed = {t: parse_shapes(t) for t in texts.unique()}
    found = record_triples(recs, [parsed[t] for t in texts])
    at = [t.qk for t in found]
    return pd.DataFrame({
        "rank": recs["rank"].to_numpy()[at], "step": recs["step"].to_numpy()[at],
        "start_us": recs["start_us"].to_numpy(np.float64)[at],
        "backward": recs["backward"].to_numpy(bool)[at] | np.array(
            [t.backward for t in found], dtype=bool),
        "batch_heads": [t.n for t in found], "seq": [t.s for t in found],
        "head_dim": [t.d for t in found], "qk_shapes": texts.to_numpy()[at],
        "softmax_shapes": texts.to_numpy()[[t.softmax for t in found]],
        "pv_shapes": texts.to_numpy()[[t.pv for t in found]]}, columns=cols)
