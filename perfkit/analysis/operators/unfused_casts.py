"""The cast checks of :func:`~.unfused.unfused_patterns`: which runs of casts undo each other.

A run of consecutive casts on a stream is a ``cast_chain`` only where its casts convert one
tensor and give back a dtype an earlier cast took (:func:`_undoing_casts`), and a
``cast_run`` where the profile records too little to tell (:func:`_unrecorded_casts`); both
read each cast's dtypes and shapes (:func:`_cast_fields`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT

__all__: list[str] = []

#: Patterns whose matches are then checked on the tasks' dtypes and shapes: a run of casts
#: is a ``cast_chain`` only where its casts undo each other (:func:`_undoing_casts`), and
#: a ``cast_run`` where the profile records too little to tell (:func:`_unrecorded_casts`).
_CAST_CHECKS = frozenset({"cast_chain", "cast_run"})

#: What the cast checks read of each cast, in this order.
_CAST_FIELDS = ("input_dtypes", "output_dtypes", "input_shapes", "output_shapes")

#: Spellings of one dtype that profilers use (upper case, ``DT_`` prefix dropped first).
_DTYPE_ALIASES = {"FLOAT32": "FLOAT", "FP32": "FLOAT", "HALF": "FLOAT16", "FP16": "FLOAT16",
                  "BF16": "BFLOAT16", "DOUBLE": "FLOAT64"}


def _cast_fields(kernels: pd.DataFrame, scoped: pd.DataFrame, pos: np.ndarray | None,
                 rows: np.ndarray) -> list[np.ndarray]:
    """The dtypes and shapes (:data:`_CAST_FIELDS`) of the tasks at ``rows`` (lane order),
    as normalised text: upper case, quotes and blanks dropped, one spelling per dtype;
    None where the profile records none (a missing or empty value)."""
    at = kernels.index.get_indexer(scoped.index[rows if pos is None else pos[rows]])
    out = []
    for c in _CAST_FIELDS:
        if c not in kernels.columns:
            out.append(np.full(len(rows), None, dtype=object))
            continue
        text = pd.Series(kernels[c].array[at], dtype=TEXT).str.replace(
            r'["\s]', "", regex=True).str.upper()
        if "dtypes" in c:
            text = text.str.removeprefix("DT_").replace(_DTYPE_ALIASES)
        out.append(text.replace("", pd.NA).to_numpy(dtype=object, na_value=None))
    return out


def _cast_runs(first: np.ndarray, counts: np.ndarray) -> list[tuple[int, int, int]]:
    """Each run of casts as ``(first row, length, offset of its fields)``, the fields
    holding the runs' rows one run after another."""
    offsets = np.cumsum(counts) - counts
    return [(int(f), int(n), int(o)) for f, n, o in zip(first, counts, offsets, strict=True)]


def _recorded(fields: list[np.ndarray], o: int, n: int) -> bool:
    """Whether every cast of a run records its dtypes and shapes."""
    return all(v is not None for f in fields for v in f[o:o + n])


def _undoing_casts(first: np.ndarray, counts: np.ndarray, fields: list[np.ndarray]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The chains, within runs of consecutive casts, whose casts undo each other.

    Casts follow one another (``i`` then ``i + 1`` on a stream) as one tensor's
    conversions when the second takes the dtype and shape the first gave; such a chain
    undoes itself at the first cast that gives back a dtype an earlier cast of the chain
    took, on the same shape (``FLOAT16 -> FLOAT -> FLOAT16``). The profile records no
    tensor identity: matching dtype and shape on consecutive casts of one stream is taken
    as the same tensor. Runs where any cast lacks its dtypes or shapes are left to
    :func:`_unrecorded_casts`. Returns the chains' first rows and lengths.
    """
    in_d, out_d, in_s, out_s = fields
    firsts: list[int] = []
    lengths: list[int] = []
    for f, n, o in _cast_runs(first, counts):
        if not _recorded(fields, o, n):
            continue
        start, took = 0, {in_d[o]}  # the chain so far and the dtypes its casts took
        for j in range(1, n):
            a, b = o + j - 1, o + j
            if j == start or in_d[b] != out_d[a] or in_s[b] != out_s[a]:
                start, took = j, {in_d[b]}  # not the previous cast's output: a new chain
            elif out_d[b] in took:  # back to a dtype an earlier cast took: undone
                firsts.append(f + start)
                lengths.append(j - start + 1)
                start = j + 1  # the next cast begins a chain of its own
            else:
                took.add(in_d[b])
    return np.asarray(firsts, dtype=int), np.asarray(lengths, dtype=int)


def _unrecorded_casts(first: np.ndarray, counts: np.ndarray, fields: list[np.ndarray]
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The runs of consecutive casts in which some cast records no dtype or shape: whether
    they undo each other cannot be told (first rows and lengths)."""
    kept = [(f, n) for f, n, o in _cast_runs(first, counts)
            if not _recorded(fields, o, n)]
    return (np.asarray([f for f, _ in kept], dtype=int),
            np.asarray([n for _, n in kept], dtype=int))
