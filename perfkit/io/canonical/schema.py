"""The canonical tables: their columns, dtypes and how a loader's frame is made to fit.

Every loader produces plain pandas DataFrames; :func:`conform` turns them into the
canonical shape of DESIGN.md: the key columns first, in a fixed order and dtype, then
any optional (source-specific) columns the loader kept. A key column the source does not
provide is filled with NA (never with zero). Units are in the column names: ``_us`` is
microseconds relative to ``meta.origin_ns``, ``_bytes`` bytes, ``_gbps`` GB/s (10^9 B/s).

Whether the values are plausible (times and durations: NA with a note when not) is checked
once, for every format, by :mod:`perfkit.io.canonical.validate` before the tables reach here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT

__all__ = ["TABLES", "TABLE_NAMES", "STRING", "WHOLE_EXTRAS", "conform", "empty"]

STRING = TEXT
"""dtype of text columns: pandas' nullable string dtype, stored in Arrow on every pandas
(:data:`perfkit._text_dtype.TEXT`; it prints as ``string``)."""

_I = "Int64"   # nullable integer
_F = "float64"  # NaN is the missing value
_S = STRING

TABLES: dict[str, dict[str, str | pd.StringDtype]] = {
    "kernels": {
        "rank": _I, "step": _I, "name": _S, "type": _S, "category": _S, "core": _S,
        "stream": _I, "start_us": _F, "dur_us": _F, "wait_us": _F,
        "input_shapes": _S, "input_dtypes": _S, "output_shapes": _S,
    },
    "ops": {
        "rank": _I, "step": _I, "name": _S, "start_us": _F, "dur_us": _F, "thread": _I,
        "device_dur_us": _F,
    },
    "steps": {
        "rank": _I, "step": _I, "computing_us": _F, "communication_us": _F,
        "comm_not_overlapped_us": _F, "overlapped_us": _F, "free_us": _F, "bubble_us": _F,
        "stage_us": _F, "preparing_us": _F,
    },
    "comm_ops": {
        "rank": _I, "step": _I, "group": _S, "name": _S, "start_us": _F, "elapse_us": _F,
        "transit_us": _F, "wait_us": _F, "sync_us": _F, "idle_us": _F,
    },
    "comm_bandwidth": {
        "rank": _I, "name": _S, "transport": _S, "size_bytes": _F, "transit_us": _F,
        "bandwidth_gbps": _F,
    },
    "comm_matrix": {
        "rank": _I, "group": _S, "name": _S, "src_rank": _I, "dst_rank": _I, "transport": _S,
        "size_bytes": _F, "time_us": _F, "bandwidth_gbps": _F,
    },
    "memory": {
        "rank": _I, "component": _S, "ts_us": _F, "allocated_bytes": _F, "reserved_bytes": _F,
        "active_bytes": _F,
    },
    "op_memory": {
        "rank": _I, "name": _S, "size_bytes": _F, "alloc_us": _F, "release_us": _F,
        "duration_us": _F,
    },
}
"""Key columns and dtypes of each canonical table, in order."""

TABLE_NAMES: tuple[str, ...] = tuple(TABLES)


def _is(dtype: Any, want: str | pd.StringDtype) -> bool:
    """Whether ``dtype`` is ``want``; a text column must be Arrow-stored too (pandas 2 also
    names its Python-stored string dtype ``string``)."""
    return str(dtype) == str(want) and (want is not TEXT or dtype == TEXT)


def _text_kept_in_python(dtype: Any) -> bool:
    """Whether ``dtype`` holds text as Python objects (``object``, pandas 2's ``string``)."""
    return (isinstance(dtype, np.dtype) and dtype.kind == "O") or \
        (isinstance(dtype, pd.StringDtype) and dtype.storage == "python")


#: Optional columns that hold whole numbers wherever a loader keeps them (a step, a
#: rank local to its group, a stream): nullable integers, as the key columns' ``step``,
#: not floats that print ``50.0``.
WHOLE_EXTRAS = frozenset({"step", "src_local", "dst_local", "stream"})


def _extra_dtype(name: str, dtype: Any) -> str | pd.StringDtype | None:
    """The dtype an optional column is cast to, or None to keep it: text in any storage
    becomes :data:`STRING` (``pd.NA`` where missing, as the key columns' text; pandas 3's
    ``str`` has NaN), a column of :data:`WHOLE_EXTRAS` nullable integers."""
    if _text_kept_in_python(dtype) or (isinstance(dtype, pd.StringDtype) and dtype != _S):
        return _S
    if name in WHOLE_EXTRAS and not _is(dtype, _I) and (
            isinstance(dtype, np.dtype) and dtype.kind in "iuf"):
        return _I
    return None


def _cast(series: pd.Series, dtype: str | pd.StringDtype) -> pd.Series:
    if _is(series.dtype, dtype):
        return series
    if dtype == _I:
        values = pd.to_numeric(series, errors="coerce")
        if values.dtype.kind not in "iuf" and not isinstance(values.dtype, pd.Int64Dtype):
            values = pd.to_numeric(values.astype(object), errors="coerce").astype("float64")
        if values.dtype.kind == "u":
            values = values.astype("float64")
        if values.dtype.kind == "f":
            # not whole, or beyond int64: missing rather than a wrapped-around number
            whole = values.isna() | ((values == np.floor(values)) & (values.abs() < 2.0**63))
            values = values.where(whole)
        return values.astype(_I)
    if dtype == _F:
        return pd.to_numeric(series, errors="coerce").astype(_F)
    if dtype == _S:
        return series.astype(_S)
    return series.astype(dtype)


def empty(table: str) -> pd.DataFrame:
    """Return an empty frame with the key columns of ``table``."""
    cols = TABLES[table]
    return pd.DataFrame({c: pd.Series([], dtype=d) for c, d in cols.items()})


def _conformed(frame: pd.DataFrame, cols: dict[str, str | pd.StringDtype],
               rank: int | None) -> bool:
    """Whether :func:`conform` would give ``frame`` back unchanged (then it is not rebuilt).

    The key columns come first, in order and in their dtypes; no other column holds text
    as Python objects; the index is 0..n-1; and the rank column already holds ``rank``.
    """
    names = list(frame.columns)
    if names[:len(cols)] != list(cols) or len(set(names)) != len(names):
        return False
    if not isinstance(frame.index, pd.RangeIndex) or frame.index.start != 0 \
            or frame.index.step != 1:
        return False
    dtypes = frame.dtypes
    if not all(_is(dtypes.iloc[i], d) for i, d in enumerate(cols.values())):
        return False
    if any(_extra_dtype(names[i], dtypes.iloc[i]) is not None
           for i in range(len(cols), len(names))):
        return False
    if rank is not None and len(frame):
        col = frame["rank"]
        if col.hasnans or not bool((col == rank).all()):
            return False
    return True


def conform(frame: pd.DataFrame | None, table: str, rank: int | None = None) -> pd.DataFrame:
    """Return ``frame`` with the key columns of ``table`` first, cast to their dtypes.

    Parameters
    ----------
    frame : DataFrame or None
        What a loader built; extra columns are kept after the key columns.
        ``None`` gives an empty table.
    table : str
        One of :data:`TABLE_NAMES`.
    rank : int, optional
        Global rank written into the ``rank`` column when given.

    Returns
    -------
    DataFrame
        Key columns missing from ``frame`` are added, filled with NA.
    """
    if frame is None:
        frame = empty(table)
    cols = TABLES[table]
    if _conformed(frame, cols, rank):
        return frame.copy(deep=False)  # already in shape (a table read from the cache)
    n = len(frame)
    out: dict[str, pd.Series] = {}
    index = pd.RangeIndex(n)
    for name, dtype in cols.items():
        if name == "rank" and rank is not None:
            out[name] = pd.Series(np.full(n, rank, dtype=np.int64), index=index).astype(_I)
        elif name in frame.columns:
            out[name] = _cast(frame[name].reset_index(drop=True), dtype)
        else:
            out[name] = pd.Series(np.nan if dtype == _F else pd.NA, index=index, dtype=dtype)
    for name in frame.columns:
        if name not in cols:
            col = frame[name].reset_index(drop=True)
            cast = _extra_dtype(name, col.dtype)
            out[name] = col if cast is None else _cast(col, cast)
    return pd.DataFrame(out, index=index, copy=False)  # columns as built, not copied into blocks
