"""Integer ids of text columns known without hashing their text, and coding by them.

A table read back from the cache comes from Parquet, which stores a text column as a
dictionary of its distinct values and, for each row, an index into it. Those indices are
an integer id per row, equal exactly where the text is equal (missing values share an id
of their own). :mod:`perfkit.io.cache.parquet_text` tells :func:`remember_lazily` where to
read them, beside the column's Arrow data, the first time an analysis asks; a selection of
rows (the tasks in scope, rows put in stream order) hands the selected ids on with
:func:`carry`. Coding such a column (``pd.factorize``, which the
analyses do a dozen times per ``advise`` on the same million-row columns) then reads
small integers instead of hashing strings (:func:`factorize`): about 3 ms instead of 16-20
ms per million rows on the benchmark rank (benchmarks/README.md, "advise").

The ids are kept by the identity of the Arrow data (a ``pyarrow.ChunkedArray``, which
pandas keeps through column selection, ``assign`` and ``astype`` to the same dtype) for
as long as that data lives, and never change what any function returns: :func:`factorize`
gives exactly what ``pd.factorize(values, use_na_sentinel=False)`` gives.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["remember", "remember_lazily", "ids_of", "values_of", "carry", "id_dtype",
           "factorize", "first_appearance", "first_rows"]

#: Loads (row ids, text of each id) when first asked for; None when they cannot be had.
Loader = Callable[[], "tuple[np.ndarray, Any] | None"]


class _Entry:
    """The ids of one column's data, or how to load them when first asked for."""

    __slots__ = ("ref", "ids", "values", "load", "loading")

    def __init__(self, ref: weakref.ref[Any], ids: np.ndarray | None, values: Any,
                 load: Loader | None) -> None:
        self.ref, self.ids, self.values, self.load = ref, ids, values, load
        # one thread loads, another asking for the same column meanwhile waits for it
        # (columns load in parallel: pyarrow reads without the GIL)
        self.loading = threading.Lock() if load is not None else None


#: id(Arrow data) -> its entry
_IDS: dict[int, _Entry] = {}


def remember(data: Any, ids: np.ndarray, values: Any = None) -> None:
    """Keep ``ids`` (one non-negative integer per row) for the Arrow ``data`` of a column.

    ``ids`` must be equal exactly where the rows' values are equal, missing values
    included; ``values``, when given, is the text of each id (a pandas array of the
    column's dtype, missing where the id is the missing value's). Both are dropped when
    ``data`` is.
    """
    if len(ids) != len(data):
        raise ValueError(f"{len(ids)} ids for a column of {len(data)} rows")
    _keep(data, _Entry(weakref.ref(data), ids, values, None))


def remember_lazily(data: Any, load: Loader) -> None:
    """Keep how to load ``data``'s ids and their text: ``load()`` runs the first time they
    are asked for (:func:`ids_of`), once; when it gives None or fails, there are none."""
    _keep(data, _Entry(weakref.ref(data), None, None, load))


def _keep(data: Any, entry: _Entry) -> None:
    key = id(data)
    _IDS[key] = entry
    weakref.finalize(data, _forget, key, entry)


def _forget(key: int, entry: _Entry) -> None:
    if _IDS.get(key) is entry:
        del _IDS[key]


def _hit(data: Any) -> _Entry | None:
    entry = _IDS.get(id(data))
    if entry is None or entry.ref() is not data:
        return None
    if entry.load is not None and entry.loading is not None:
        with entry.loading:
            if entry.load is not None:
                try:
                    got = entry.load()
                except Exception:  # noqa: BLE001 - no ids: the column is coded by its text
                    got = None
                if got is not None and len(got[0]) == len(data):
                    entry.ids, entry.values = got
                entry.load = None
    return entry if entry.ids is not None else None


def ids_of(data: Any) -> np.ndarray | None:
    """The ids kept for ``data`` (loaded now if need be; None when there are none)."""
    entry = _hit(data)
    return None if entry is None else entry.ids


def values_of(data: Any) -> Any:
    """The text of each id of ``data`` (None when not kept)."""
    entry = _hit(data)
    return None if entry is None else entry.values


def carry(source: Any, taken: Any, rows: np.ndarray) -> None:
    """``taken`` is ``source`` at ``rows`` (a boolean mask or positions): carry its ids
    (loading them if need be)."""
    if taken is None or taken is source:
        return
    entry = _hit(source)
    if entry is not None:
        remember(taken, entry.ids[np.asarray(rows)], entry.values)


def id_dtype(n_values: int) -> type[np.integer[Any]]:
    """The smallest unsigned integer type for ids of ``n_values`` distinct values and the
    missing value's (``n_values``): 1 byte per row for up to 254 values."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if n_values < np.iinfo(dtype).max:
            return dtype
    return np.int64



def first_rows(codes: np.ndarray) -> np.ndarray:
    """First row of each code, for codes numbered in order of first appearance (factorize).

    Such a code first appears where it exceeds every code before it. The rows are read
    block by block from the top and the search stops once the largest code has appeared:
    a profile's distinct calls all appear in its first steps.
    """
    n = len(codes)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    last = int(codes.max())
    found, top, start, block = [], -1, 0, 1 << 12
    while top < last and start < n:
        part = codes[start:start + block]
        before = np.maximum.accumulate(np.r_[top, part[:-1]])
        found.append(np.flatnonzero(part > before) + start)
        top = max(top, int(part.max()))
        start += block
        block *= 4
    return np.concatenate(found).astype(np.int64, copy=False)


def first_appearance(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(ids)[0]`` and the first row of each code, for small non-negative ids.

    The ids' first appearances are found block by block from the top (a profile's first
    step holds nearly every distinct value), and each id is mapped to its rank among them:
    no hashing of every row.
    """
    n = len(ids)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    counts = np.bincount(ids)
    present = int(np.count_nonzero(counts))
    seen = np.zeros(len(counts), dtype=bool)
    order_parts, first_parts = [], []
    found, start, block = 0, 0, 1 << 12
    while found < present and start < n:
        part = ids[start:start + block]
        codes, uniq = pd.factorize(part)
        first = first_rows(codes)
        new = ~seen[uniq]
        order_parts.append(uniq[new])
        first_parts.append(first[new] + start)
        seen[uniq] = True
        found += int(new.sum())
        start += block
        block *= 4
    order = np.concatenate(order_parts).astype(np.int64)
    rank = np.zeros(len(counts), dtype=np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    return rank[ids], np.concatenate(first_parts).astype(np.int64, copy=False)


def factorize(values: pd.Series | Any, ids: np.ndarray) -> tuple[np.ndarray, Any]:
    """``pd.factorize(values, use_na_sentinel=False)``, read from ``values``' row ids.

    The codes number the distinct values in order of first appearance
    (:func:`first_appearance`); the uniques are ``pd.factorize`` of the few rows where
    each value first appears, so their type and missing value are the ones
    ``pd.factorize`` gives for ``values``.
    """
    if len(ids) == 0:
        return pd.factorize(values, use_na_sentinel=False)
    codes, first = first_appearance(ids)
    head = values.iloc[first] if isinstance(values, pd.Series) else values.take(first)
    _, uniques = pd.factorize(head, use_na_sentinel=False)
    return codes, uniques
