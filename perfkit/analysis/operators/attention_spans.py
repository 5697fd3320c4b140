"""Unfused attention chains among tasks in execution order: one rule for every reader.

The Operators tab's ``softmax_dropout_matmul`` pattern
(:func:`~perfkit.analysis.operators.unfused_patterns`) and the advisor's chains
(:func:`~perfkit.analysis.efficiency.attention_chains`) take their chains from
:func:`attention_spans`, each on its own rows in execution order:

* where the rows carry shapes, the 3-D ``q·kᵀ`` bmm, softmax, ``·v`` bmm chains of
  :func:`~perfkit.analysis.shapes.bmm_attention.bmm_attention_triples` (the products'
  and the softmax's shapes checked, copies between them allowed), each from the first
  product's first row to the second's last;
* the letter pattern's matches (a matrix product, a softmax, a matrix product: the
  kernels' names only), except where shapes tell otherwise: a match that overlaps a chain
  above is that chain, and a match whose first product is a PyTorch ``aten::bmm`` /
  ``aten::baddbmm`` of two readable 3-D operands is attention only as such a chain (a MoE
  router's softmax between two batched GEMMs is not). Other products (an Ascend
  ``BatchMatMul`` whose shapes do not say which operand is transposed, 4-D products,
  rows without shapes) are judged by the letters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..shapes.bmm_attention import BmmAttention, judged_by_shapes

__all__ = ["attention_spans"]

Span = tuple[int, int]


def attention_spans(letter: Sequence[Span], triples: Sequence[BmmAttention],
                    label_of: Any, shapes_of: Any) -> list[Span]:
    """The attention chains, as ``(first row, last row)`` of each, in row order.

    Parameters
    ----------
    letter : sequence of (int, int)
        The letter pattern's matches (first and last row).
    triples : sequence of BmmAttention
        The chains found by shapes on the same rows (empty where the rows carry none).
    label_of, shapes_of : callable
        A row's operator label and its parsed input shapes (read for the first row of
        each letter match only).

    Returns
    -------
    list of (int, int)
        Every chain of ``triples`` (``qk`` to ``pv_end``), and the letter matches that
        overlap none of them and whose first product the shapes do not judge (see the
        module's text).
    """
    chains = sorted((t.qk, t.pv_end) for t in triples)
    starts = np.asarray([a for a, _ in chains], dtype=np.int64)
    # the furthest end of the chains begun so far
    reach = np.maximum.accumulate(np.asarray([b for _, b in chains], dtype=np.int64)) \
        if chains else np.zeros(0, dtype=np.int64)
    out = list(chains)
    for a, b in letter:
        j = int(np.searchsorted(starts, b, side="right")) - 1  # the last begun by its end
        if j >= 0 and reach[j] >= a:
            continue  # that chain, found by its shapes
        if judged_by_shapes(str(label_of(a)), shapes_of(a)):
            continue  # a 3-D bmm whose shapes make no attention
        out.append((int(a), int(b)))
    return sorted(out)
