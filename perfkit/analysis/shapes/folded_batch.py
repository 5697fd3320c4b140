"""Batch and sequence of an attention run as 3-D bmm, softmax, bmm: :func:`_unfold`.

The products fold the batch into the heads (``N = b·a``), so their ``S`` alone may be any
axis the model attends over: TimeSformer's ``S`` is the frames of one attention and the
patches of the next, not the model's sequence. ``S`` is read as the sequence, and ``b`` as
the micro-batch, only where evidence independent of the products agrees:

* every forward attention's softmax views its scores as ``(b, a, S, S)`` with ``b·a = N``,
  one ``(b, S)`` for them all (the view names the batch);
* a forward projection runs over ``b·S`` tokens (the model's tokens are ``b`` sequences of
  ``S``);
* and the embeddings say ``S`` too: a lookup takes ``(b, S)`` token ids, or a second
  embedding table (the learned positions) has ``S`` rows.
"""

from __future__ import annotations

from .operators import _Attn, _Gemm

__all__: list[str] = []  # private to the shape readers


def _unfold(folded: list[_Attn], gemms: list[_Gemm], emb: list[dict]
            ) -> tuple[int, int, str] | None:
    """``(b, S, evidence)`` of forward attentions run as 3-D bmm, softmax, bmm.

    Parameters
    ----------
    folded : list of _Attn
        The forward attentions whose batch is folded into the heads (``bh`` set).
    gemms : list of _Gemm
        The matrix products (:func:`~.operators._gemms`).
    emb : list of dict
        The embedding lookups (:func:`~.operators._embeddings`).

    Returns
    -------
    tuple or None
        The batch, the sequence and the sentence naming the evidence; None when the
        evidence is missing or does not agree (see the module's text).
    """
    views = {(a.bh, a.s, a.scores) for a in folded}
    found = set()
    for bh, s, view in views:
        if not view or len(view) != 4 or view[2:] != (s, s) or view[0] * view[1] != bh:
            return None
        found.add((view[0], s, view))
    if len({(b, s) for b, s, _ in found}) != 1:
        return None
    (b, s, view), *_ = sorted(found)
    tokens = b * s
    proj = [g for g in gemms if not g.backward and (not g.batched or g.linear)
            and any(m == tokens for m, _, _ in g.cands)]
    if not proj:
        return None
    ids = [e for e in emb if e.get("bs") and tuple(e["bs"]) == (b, s)]
    tables = sorted({tuple(e["table"]) for e in emb if e.get("table")})
    positions = [t for t in tables if len(tables) > 1 and t[0] == s]
    said = []
    if ids:
        said.append(f"the embedding lookups take ({b}, {s}) ids")
    if positions:
        said.append(f"the position table {positions[0]} has {s} rows")
    if not said:
        return None
    text = (f"the softmax views the scores of batch × heads {view[0] * view[1]} as {view}, "
            f"the projections run over {tokens} = {b}·{s} tokens, " + " and ".join(said))
    return b, s, text
