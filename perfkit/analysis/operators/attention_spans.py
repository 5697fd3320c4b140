"""Unfused attention chains among tasks in execution order: one rule for every reader.

The Operators tab's ``softmax_dropout_matmul`` pattern
(:func:`~perfkit.analysis.operators.unfused_patterns`) and the advisor's chains
(:func:`~perfkit.analysis.efficiency.attention_chains`) take their chains from
:func:`attention_spans`, each on its own rows in execution order:

* where the rows carry shapes, the ``q·kᵀ``, softmax, ``·v`` chains of batched products
  of :func:`~perfkit.analysis.shapes.bmm_attention.bmm_attention_triples` (3-D or 4-D;
  the products' and the softmax's shapes checked, copies between them allowed), each
  from the first product's first row to the second's last;
* the letter pattern's matches (a matrix product, a softmax, a matrix product: the
  kernels' names only), except where shapes tell otherwise: a match that overlaps a chain
  above is that chain, and a match whose first product is a batched product
  (``aten::bmm`` / ``aten::baddbmm``, a ``BatchMatMul``) of two 3-D or two 4-D operands
  that multiply as recorded is attention only as such a chain (a MoE's expert products
  around a router's softmax are not). Other products (rows without shapes, a
  ``BatchMatMul`` whose operands do not multiply as recorded: one kept untransposed, its
  transpose flag not in the profile) are judged by the letters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from .._shared import shared_factorize
from .._tasks import scope_rows, tasks_in_scope
from .._util import take_rows
from ..shapes.bmm_attention import BmmAttention, judged_by_shapes

__all__ = ["attention_spans", "attention_rows"]

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
            continue  # a batched product whose shapes make no attention
        out.append((int(a), int(b)))
    return sorted(out)


def attention_rows(kernels: pd.DataFrame, lanes: Any, new_block: np.ndarray,
                   first: np.ndarray, last: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first and last rows (in lane order) of the unfused attention chains:
    :func:`~.attention_spans.attention_spans` of the letter pattern's matches
    (``first``, ``last``) and, where a ``q·kᵀ`` product is among the tasks, of the
    chains of batched products found by their shapes, as
    :func:`~perfkit.analysis.efficiency.attention_chains` finds them on the priced rows
    (other matrix products allowed between a backward's members; the rows of a softmax
    backward that MindSpore expands one softmax backward); and the rows inside those
    chains that are not their own, which the chains' time leaves out
    (:func:`~perfkit.analysis.shapes.bmm_attention.foreign_rows`).

    The tasks' operator is labelled as the pricing labels it (its launching operator,
    else its type, else its name). The labels of every task are read only where a
    batched product's shapes are those of ``q·kᵀ`` (each distinct one tested once); the
    letter matches' first rows are read one by one. Without shapes the matches stand.
    """
    from ..efficiency.costs import _label
    from ..efficiency.tensors import parse_shapes
    from ..shapes.bmm_attention import (
        bmm_attention_triples,
        foreign_rows,
        has_qk_product,
        is_batched,
    )
    from ..shapes.records import with_expanded_softmax_backward

    none = np.zeros(0, dtype=np.int64)
    if "input_shapes" not in kernels.columns:
        return first, last, none
    # the columns the tokens read, as they took them out (the shapes: row by row)
    scoped = tasks_in_scope(kernels, False, ("op_name", "type", "name"), pmu=False,
                            coded=("name",))
    keep = scope_rows(kernels, False)
    shape_col = kernels["input_shapes"]
    pos = lanes.positions
    in_scope = None if keep is None else np.flatnonzero(keep)  # the scope's table rows

    def in_table(r: Any) -> np.ndarray:  # rows of lane order -> of the scope's table order
        return np.asarray(r) if pos is None else pos[np.asarray(r)]

    def to_kernels(r: Any) -> np.ndarray:  # rows of the scope -> of the kernels table
        return np.asarray(r) if in_scope is None else in_scope[np.asarray(r)]

    parsed: dict[str, list[tuple[int, ...]]] = {}

    def shapes_at(r: int) -> list[tuple[int, ...]]:  # r: a row of the scope's table order
        text = shape_col.iloc[int(to_kernels(r))]
        text = "" if pd.isna(text) else str(text)
        if text not in parsed:
            parsed[text] = parse_shapes(text)
        return parsed[text]

    def labels_at(rows: np.ndarray) -> pd.Series:
        return _label(take_rows(scoped, rows))

    batched = np.flatnonzero(_batched_rows(scoped, is_batched))
    triples, foreign = [], none
    if len(batched) and has_qk_product(labels_at(batched),
                                       shape_col.iloc[to_kernels(batched)]):
        every = in_table(np.arange(len(scoped)))  # each row of lane order in the scope
        label = labels_at(every)
        if "name" in scoped.columns:
            label = with_expanded_softmax_backward(
                label, pd.Series(take_rows(scoped[["name"]], every)["name"].array,
                                 index=label.index))
        label_text = label.to_numpy(dtype=object)
        code, uniq = pd.factorize(shape_col.to_numpy(dtype=object)[to_kernels(every)],
                                  use_na_sentinel=False)
        texts = ["" if pd.isna(t) else str(t) for t in uniq.tolist()]
        by_code: dict[int, list[tuple[int, ...]]] = {}

        def lane_shapes(i: int) -> list[tuple[int, ...]]:  # parsed once per distinct text
            c = int(code[i])
            if c not in by_code:
                by_code[c] = parse_shapes(texts[c])
            return by_code[c]

        triples = bmm_attention_triples(label_text, _Lookup(lane_shapes),
                                        np.cumsum(new_block), interleaved=True)
        foreign = foreign_rows(triples, label_text, _Lookup(lane_shapes))
    starts = in_table(first)
    letter_labels = labels_at(starts).to_numpy(dtype=object)
    at = {int(a): j for j, a in enumerate(first.tolist())}
    spans = attention_spans(list(zip(first.tolist(), last.tolist(), strict=True)), triples,
                            lambda i: letter_labels[at[int(i)]],
                            lambda i: shapes_at(starts[at[int(i)]]))
    out = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    return out[:, 0], out[:, 1], foreign


def _batched_rows(scoped: pd.DataFrame, test: Any) -> np.ndarray:
    """Whether each task's label (:func:`~perfkit.analysis.efficiency.costs._label`: its
    launching operator, else its type unless generic, else its name) passes ``test``,
    worked out per distinct operator, type and name."""
    def per_value(column: str) -> tuple[np.ndarray, np.ndarray]:
        if column not in scoped.columns:
            return np.full(len(scoped), -1), np.zeros(0, dtype=bool)
        code, uniq = shared_factorize(scoped[column], use_na_sentinel=True)
        text = pd.Series(uniq, dtype=TEXT).fillna("")
        return code, np.array([test(t) for t in text.tolist()], dtype=bool)

    t_code, t_hit = per_value("type")
    n_code, n_hit = per_value("name")
    types = pd.Series(shared_factorize(scoped["type"], use_na_sentinel=True)[1],
                      dtype=TEXT) if "type" in scoped.columns else pd.Series(
                          [], dtype=TEXT)
    generic = types.str.lower().isin(["kernel", "gpu_memcpy", "gpu_memset", ""]).to_numpy(
        bool)
    by_type = np.where(t_code >= 0, ~np.append(generic, True)[t_code], False)
    hit = np.where(by_type, np.append(t_hit, False)[t_code], np.append(n_hit, False)[n_code])
    if "op_name" not in scoped.columns:  # no launching operator: the type or name decides
        return hit
    op_code, op_hit = per_value("op_name")
    return np.where(op_code >= 0, np.append(op_hit, False)[op_code], hit)


class _Lookup:
    """``fn(i)`` as ``lookup[i]``."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __getitem__(self, i: int) -> Any:
        return self.fn(i)
