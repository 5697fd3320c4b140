"""The vocabulary read from the embedding table's rows, under tensor parallelism.

Megatron's word embedding and output layer are vocab-parallel: under tensor parallelism
``tp`` each rank holds ``vocab / tp`` rows of the table, and the logits GEMM writes
``h → vocab / tp``. The table's rows alone do not show whether the table is split or whole
(a replicated table), but the logits beside it do:

- the logits width equals the rows: both are the rank's slice, the vocabulary is
  ``rows × tp``;
- the logits width × ``tp`` equals the rows: the table is whole (replicated), the
  vocabulary is its rows;
- no logits width on the loaded ranks (a first pipeline stage, say): the rows are taken
  as the vocabulary, and the sentence says what they would mean if the table were split.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["vocab_from_table"]


def vocab_from_table(rows: int, hidden: int, tp: int, logits: Iterable[int],
                     where: str) -> tuple[int, int | None, str]:
    """The vocabulary an embedding table of ``rows`` rows shows, with ``tp`` ranks.

    Parameters
    ----------
    rows : int
        The rows of the token embedding table (``GatherV2`` / ``aten::embedding`` weight).
    hidden : int
        Its width (the hidden size), for the sentence.
    tp : int
        Tensor-parallel size, from any source (a group, a setting, the widths).
    logits : iterable of int
        Widths the logits may have on a rank: the output widths of the projections of the
        hidden state, and the loss's input width.
    where : str
        Where the shapes were read, to open the sentence.

    Returns
    -------
    tuple of (int, int or None, str)
        The vocabulary, its width per rank (None where unknown) and the sentence that says
        how they were read.
    """
    table = f"{where}: embedding table ({rows}, {hidden})"
    if tp <= 1:
        return rows, rows, table
    widths = set(logits)
    if rows in widths:
        return rows * tp, rows, (
            f"{table} and the logits GEMM {hidden} → {rows} show the same slice of the "
            f"vocabulary on each rank, so the vocabulary is {rows} × tp {tp} = {rows * tp} "
            "(the embedding and the output layer are split over the tp ranks, as "
            "Megatron's vocab-parallel layers are)")
    if rows % tp == 0 and rows // tp in widths:
        return rows, rows // tp, (
            f"{table} holds the whole vocabulary: the logits GEMM {hidden} → {rows // tp} "
            f"is its slice over tp {tp}")
    return rows, rows // tp if rows % tp == 0 else None, (
        f"{table}; no logits GEMM on the loaded ranks shows whether the table is split "
        f"over tp {tp} (then the vocabulary would be {rows} × {tp} = {rows * tp}), so its "
        "rows are taken as the whole vocabulary")
