"""Attention as batched products (bmm, softmax, bmm) among the priced rows: whether a
profile may hold one, and the runs found on each lane, with their rows' parsed shapes.

Split from :mod:`~.chains` (which searches these runs with the element-wise chains) to keep
each module to one job.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from .._frames import is_lazy
from .._shared import shared_factorize
from .._util import take_rows
from .costs import first_rows, narrow_costs

__all__ = ["may_hold_bmm_attention"]


def may_hold_bmm_attention(profile: Any) -> bool:
    """Whether the priced rows hold a ``q·kᵀ`` batched product, the first member of an
    attention run as bmm, softmax, bmm
    (:func:`~perfkit.analysis.shapes.bmm_attention.has_qk_product`); False rules out the
    search by shapes of :func:`attention_chains`, which orders two more columns. A lazy
    cluster may: each rank is searched on its worker (its priced rows are not here)."""
    from ..shapes.bmm_attention import has_qk_product

    if is_lazy(profile):  # searched rank by rank on the workers (attention_chains)
        return True
    rows = narrow_costs(profile)
    if rows.empty or "label" not in rows.columns or "input_shapes" not in rows.columns:
        return False
    if "_call" in rows.columns:  # one row per distinct call (label, shapes, ...) is enough
        rows = take_rows(rows[["label", "input_shapes"]],
                         first_rows(rows["_call"].to_numpy(np.int64)))
    return has_qk_product(rows["label"], rows["input_shapes"])


class _ParsedShapes:
    """Each row's parsed input shapes, parsed once per distinct text when looked up."""

    def __init__(self, texts: pd.Series) -> None:
        from ..shapes.records import parse_shapes

        self.codes, uniq = shared_factorize(texts.astype(TEXT).fillna(""),
                                            use_na_sentinel=False)
        self.text = pd.Series(uniq, dtype=TEXT).fillna("").tolist()
        self.parse = parse_shapes
        self.done: dict[int, list[tuple[int, ...]]] = {}

    def __getitem__(self, i: int) -> list[tuple[int, ...]]:
        c = int(self.codes[i])
        if c not in self.done:
            self.done[c] = self.parse(self.text[c])
        return self.done[c]


def _bmm_triples(rows: pd.DataFrame, new_lane: np.ndarray) -> tuple[list[Any], np.ndarray]:
    """The attentions of batched products among the ordered rows, each lane on its own
    (:func:`~perfkit.analysis.shapes.bmm_attention.bmm_attention_triples`, other matrix
    products allowed between a backward's members: a graph's schedule), and the rows
    inside them that are not their own
    (:func:`~perfkit.analysis.shapes.bmm_attention.foreign_rows`). The rows of a softmax
    backward that MindSpore expands are one softmax backward."""
    from ..shapes.bmm_attention import bmm_attention_triples, foreign_rows
    from ..shapes.records import with_expanded_softmax_backward

    if "label" not in rows.columns or "input_shapes" not in rows.columns:
        return [], np.zeros(0, dtype=np.int64)
    label = rows["label"].astype(TEXT)
    if "name" in rows.columns:
        label = with_expanded_softmax_backward(label, rows["name"])
    labels = label.fillna("").to_numpy(dtype=object)
    shapes = _ParsedShapes(rows["input_shapes"])
    found = bmm_attention_triples(labels, shapes, np.cumsum(new_lane), interleaved=True)
    return found, foreign_rows(found, labels, shapes)


def _parsed(text: Any) -> list[tuple[int, ...]]:
    """:func:`~perfkit.analysis.shapes.parse_shapes` of a shapes text (NA: none)."""
    from ..shapes.records import parse_shapes

    return parse_shapes("" if pd.isna(text) else str(text))
