"""Typed results and row selection: columns of a fixed dtype, rows and arrays taken by
position (text codes and attrs carried along), regex matches over distinct values.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ... import _text_codes
from ..._text_dtype import TEXT
from .._frames import is_lazy_frame
from .._shared import shared, shared_factorize

__all__ = ["nan_as_zero", "take_rows", "with_columns", "typed", "take_array", "text_matches",
           "distinct_values"]


#: Whether pandas copies data shared between frames only when one of them is written
#: (always from pandas 3 on).
_COPY_ON_WRITE = int(pd.__version__.split(".")[0]) >= 3


def text_matches(values: pd.Series, pattern: str) -> pd.Series:
    """``values.astype(TEXT).str.contains(pattern, regex=True)``, missing as False.

    The regex runs once per distinct value (a profile repeats a few hundred operator names
    over hundreds of thousands of rows) and the answers are spread back by code. A lazy
    (Dask) column is matched row by row.
    """
    text = values.astype(TEXT)
    if is_lazy_frame(text):
        return text.str.contains(pattern, regex=True).fillna(False).astype(bool)
    codes, uniq = shared_factorize(text, use_na_sentinel=False)
    return pd.Series(_distinct_matches(uniq, pattern)[codes], index=values.index)


def _distinct_matches(uniq: Any, pattern: str) -> np.ndarray:
    """Whether ``pattern`` is found in each distinct text (a missing one: False).

    ASCII texts are searched with :mod:`re`, one call per value: pandas' own search on
    text held in Python (``string[python]``), and for a few hundred names a fraction of
    a millisecond, where Arrow's search first compiles the pattern (about 5 ms for the
    advisor's synchronisation pattern, holding the interpreter lock). Other texts, or a
    pattern :mod:`re` does not read, go to pandas' search of the column's own storage;
    where that is Arrow's RE2, which pandas 2 uses for any pattern and which reads no
    look-behind, :mod:`re` searches them all.
    """
    texts = pd.Series(uniq, dtype=TEXT)
    values = texts.tolist()
    try:
        search = _compiled(pattern).search
    except re.error:
        search = None
    if search is not None and all(isinstance(v, str) and v.isascii() or v is pd.NA
                                  for v in values):
        return _searched(values, search)
    try:
        return texts.str.contains(pattern, regex=True).fillna(False).to_numpy(bool)
    except ValueError:  # pyarrow's ArrowInvalid: RE2 does not read the pattern
        if search is None:
            raise
        return _searched(values, search)


def _searched(values: list[Any], search: Any) -> np.ndarray:
    """Whether ``search`` finds a match in each value (a missing one: False)."""
    return np.fromiter((v is not pd.NA and search(v) is not None for v in values),
                       dtype=bool, count=len(values))


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str]:
    """``re.compile(pattern)``, once per pattern."""
    return re.compile(pattern)


def distinct_values(frame: pd.DataFrame, column: str) -> Any:
    """``frame[column].unique()`` (a missing value included), once per
    :func:`~perfkit.analysis._shared.shared_results` block for the same table: the
    device's generation (:func:`perfkit.analysis.infer_hardware`) and the AI CPU check
    both read the distinct cores of a million tasks. Callers must not change it."""
    return shared("distinct_values", (frame,), (column,), lambda: frame[column].unique())


def nan_as_zero(values: np.ndarray) -> np.ndarray:
    """``values`` with NaN as 0 for a sum that leaves missing values out (``nansum``, a
    groupby's ``sum``); infinities kept. The array itself when nothing is NaN."""
    missing = np.isnan(values)
    return np.where(missing, 0.0, values) if missing.any() else values


def typed(frame: pd.DataFrame, columns: Mapping[str, Any]) -> pd.DataFrame:
    """``frame[list(columns)].astype(columns)``, converting only the columns whose dtype
    differs from the one named.

    An analysis's result table is mostly of its documented types already; pandas'
    ``astype`` with a mapping converts every column it names all the same (about 1 ms per
    small table, a dozen tables per ``pk.advise``, all of it holding the interpreter lock).
    Here the dtypes are read once, a frame already in that column order is not selected
    again, and the columns that change are replaced one by one: about 0.05 ms where none
    changes. The result is the same either way: a new frame of ``columns`` in their order
    and types.
    """
    dtypes = dict(zip(frame.columns, frame.dtypes, strict=True))
    change = {c: d for c, d in columns.items() if dtypes[c] != _dtype(d)}
    # a frame of its own: pandas 3 copies shared data on write, pandas 2 must copy it now
    out = frame.copy(deep=not _COPY_ON_WRITE) if list(frame.columns) == list(columns) \
        else frame[list(columns)]
    return out.assign(**{c: out[c].astype(d) for c, d in change.items()}) if change else out


@functools.lru_cache(maxsize=256)
def _dtype(name: Any) -> Any:
    """``pandas_dtype(name)``, looked up once per name (``"Int64"``, ``"string"``)."""
    return pd.api.types.pandas_dtype(name)


def with_columns(frame: pd.DataFrame, **columns: Any) -> pd.DataFrame:
    """``frame.assign(**columns)``, each new numpy array kept as it is rather than copied.

    pandas 3 copies a numpy array handed to ``assign``; on a million rows each copy is
    8 MB of memory touched for the first time (page faults cost more than the copy). The
    arrays are wrapped as Series over the frame's index instead (``copy=False``): the
    caller hands over a fresh array and does not change it afterwards, nor puts the same
    array in two columns. Other values (Series, scalars, extension arrays) go to
    ``assign`` unchanged.
    """
    wrapped = {name: pd.Series(value, index=frame.index, copy=False)
               if isinstance(value, np.ndarray) and value.ndim == 1
               and len(value) == len(frame) else value
               for name, value in columns.items()}
    return frame.assign(**wrapped)


def take_rows(frame: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """``frame[rows]`` (boolean mask) or ``frame.take(rows)`` (positions), column by column.

    Gives the same frame (values, dtypes, index, attrs) as pandas' own indexing, faster
    on Arrow-backed text columns: pandas turns a mask into positions and checks them
    before Arrow's ``take``, which costs several times Arrow's own ``filter`` or
    ``take`` on a million rows; here each Arrow column is handed to Arrow directly.
    """
    rows = np.asarray(rows)
    is_mask = rows.dtype == bool
    if is_mask and len(rows) != len(frame):
        raise ValueError(f"mask of {len(rows)} rows for a frame of {len(frame)}")
    if not frame.columns.is_unique:
        return frame[rows] if is_mask else frame.take(rows)
    columns = {}
    for name in frame.columns:
        arr = frame[name].array
        if is_mask:
            columns[name] = _carried(arr, arr[rows], rows)
        else:
            columns[name] = take_array(arr, rows)
    index = frame.index[rows] if is_mask else frame.index.take(rows)
    return _frame_of(columns, index, frame.columns, frame.attrs)


def take_array(arr: Any, positions: np.ndarray) -> Any:
    """``arr.take(positions)`` (non-negative positions), straight to Arrow for Arrow arrays.

    pandas checks and converts the positions before calling Arrow's ``take``; on a million
    positions that costs several times the take itself. A few positions out of a column
    in several chunks (one per Parquet row group) are taken chunk by chunk: Arrow joins
    the chunks of a text column into one before each take.
    """
    positions = np.asarray(positions)
    if isinstance(arr, pd.arrays.ArrowExtensionArray) and len(positions) and \
            positions.min() >= 0:
        data = arr.__arrow_array__()
        if data.num_chunks > 1 and 8 * len(positions) < len(data) and \
                positions.max() < len(data):
            taken = type(arr)(pa.chunked_array([_take_by_chunk(data, positions)], data.type))
        else:
            taken = type(arr)(pc.take(data, positions))
        if taken.dtype == arr.dtype:
            return _carried(arr, taken, positions)
    return _carried(arr, arr.take(positions), positions)


def _carried(source: Any, taken: Any, rows: np.ndarray) -> Any:
    """``taken`` (``source`` at ``rows``), with the row ids of its text carried over."""
    data = getattr(source, "_pa_array", None)
    if data is not None:
        _text_codes.carry(data, getattr(taken, "_pa_array", None), rows)
    return taken


def _take_by_chunk(data: pa.ChunkedArray, positions: np.ndarray) -> pa.Array:
    """``data.take(positions)`` as one array, taking from each chunk the rows it holds."""
    lengths = np.fromiter((len(c) for c in data.chunks), np.int64, data.num_chunks)
    starts = np.r_[0, np.cumsum(lengths)[:-1]]
    chunk = np.searchsorted(starts, positions, side="right") - 1
    by_chunk = np.argsort(chunk, kind="stable")
    sorted_chunk = chunk[by_chunk]
    bounds = np.flatnonzero(np.r_[True, sorted_chunk[1:] != sorted_chunk[:-1], True])
    parts = [data.chunk(int(sorted_chunk[a])).take(
        pa.array(positions[by_chunk[a:b]] - starts[sorted_chunk[a]]))
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    back = np.empty_like(by_chunk)
    back[by_chunk] = np.arange(len(by_chunk))  # from chunk order back to the asked order
    return pa.concat_arrays(parts).take(pa.array(back))


def _frame_of(arrays: dict[Any, Any], index: pd.Index, columns: pd.Index,
              attrs: dict[str, Any]) -> pd.DataFrame:
    """A frame of ``arrays`` (dtypes kept, nothing copied) with ``columns`` and ``attrs``."""
    out = pd.DataFrame({name: pd.Series(values, index=index, dtype=values.dtype, copy=False)
                        for name, values in arrays.items()}, index=index, copy=False)
    out.columns = columns
    out.attrs = copy.deepcopy(attrs)
    return out
