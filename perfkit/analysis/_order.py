"""Row orders and per-group reductions of the analyses, on numpy arrays.

:func:`stable_order` is pandas' stable multi-key sort (``sort_values(kind="mergesort")``)
of numeric keys, found without sorting where the rows are already in order, or by one
radix sort of a small group code where they are in order within their groups;
:func:`group_median` and :func:`_group_cummax` reduce contiguous groups. Each is checked
against the pandas computation it replaces (``tests/analysis/test_fast_paths_advise.py``,
``tests/analysis/test_text_codes.py``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["stable_order", "group_median", "slice_median", "group_code16", "order_by_group"]


def _group_cummax(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Running maximum of ``values`` that restarts at each of ``starts`` (the positions
    where the groups begin, the first 0), worked out in place: ``values`` is returned."""
    if len(starts) <= _FEW_GROUPS and not np.isnan(values).any():
        # a few groups (a rank's steps): numpy's running maximum over each slice
        for a, b in zip(starts.tolist(), [*starts[1:].tolist(), len(values)], strict=True):
            np.maximum.accumulate(values[a:b], out=values[a:b])
        return values
    gid = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(values)]))
    values[:] = pd.Series(values).groupby(gid, sort=False).cummax().to_numpy()
    return values


#: Up to this many groups, per-group numpy calls on contiguous slices beat a groupby.
_FEW_GROUPS = 64


def group_median(values: np.ndarray, group: np.ndarray, n: int) -> np.ndarray:
    """Median of ``values`` per group ``0..n-1``, missing values left out (NaN: none).

    ``pd.Series(values).groupby(group).median()`` spread over the ``n`` groups; a few
    groups in contiguous runs (rows sorted by group) take numpy's median of each slice
    (the same value: the middle one, or the mean of the two middle ones).
    """
    out = np.full(n, np.nan)
    if not len(values):
        return out
    if n <= _FEW_GROUPS and (len(group) < 2 or bool((group[1:] >= group[:-1]).all())):
        return _slice_medians(values, np.searchsorted(group, np.arange(n + 1), side="left"))
    med = pd.Series(values).groupby(group).median()
    out[med.index.to_numpy(np.int64)] = med.to_numpy(np.float64)
    return out


def slice_median(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """:func:`group_median` of groups in contiguous runs that begin at ``starts`` (sorted,
    the first 0): without a group number per row where the groups are few."""
    n = len(starts)
    if n > _FEW_GROUPS:
        group = np.repeat(np.arange(n), np.diff(np.r_[starts, len(values)]))
        return group_median(values, group, n)
    return _slice_medians(values, np.r_[starts, len(values)])


def _slice_medians(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Median of each ``values[bounds[g]:bounds[g + 1]]``, NaN left out (NaN: none)."""
    n = len(bounds) - 1
    out = np.full(n, np.nan)
    bounds = bounds.tolist()
    with warnings.catch_warnings():  # a group of NaN only is NaN, as in pandas
        warnings.simplefilter("ignore", RuntimeWarning)
        for g in range(n):
            if bounds[g + 1] > bounds[g]:
                out[g] = np.nanmedian(values[bounds[g]:bounds[g + 1]])
    return out


def stable_order(frame: pd.DataFrame, keys: Sequence[str]) -> np.ndarray | None:
    """Positions that sort ``frame`` by ``keys`` (missing last), or None if already sorted.

    ``frame.sort_values(keys, kind="mergesort")`` is stable, so on rows that are already
    in order it changes nothing: profiles are mostly written in time order, and one pass
    over the keys (as numbers) tells, without the sort or the copy of the rows. Text keys
    are not checked (always sorted).
    """
    if len(frame) < 2 or _in_order(frame, keys):
        return None
    if all(_is_number(frame[k]) for k in keys):
        return _numeric_order(frame, keys)
    return frame[list(keys)].reset_index(drop=True).sort_values(
        list(keys), kind="mergesort").index.to_numpy()


def _is_number(col: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(
        col.dtype)


def _numeric_order(frame: pd.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """The stable order of ``frame.sort_values(keys, kind="mergesort")`` on numeric keys.

    Sorted key by key from the last (each sort stable, so earlier keys decide first and
    ties keep table order), on numpy arrays instead of pandas' multi-key sort: each key
    by its values, then by its missing marks (missing last, as pandas puts them).
    """
    grouped = _grouped_order(frame, keys)
    if grouped is not None:
        return grouped
    order = np.arange(len(frame))
    for k in reversed(list(keys)):
        col = frame[k]
        if pd.api.types.is_integer_dtype(col.dtype):
            values = col.to_numpy(np.int64, na_value=0)[order]
            low = int(values.min()) if len(values) else 0
            if len(values) and int(values.max()) - low < 2**16:  # radix-sorted
                values = (values - low).astype(np.uint16)
        else:  # NaN sorts last in numpy too, ties kept in order by the stable sort
            values = col.to_numpy(np.float64, na_value=np.nan)[order]
        order = order[np.argsort(values, kind="stable")]
        missing = col.isna().to_numpy(bool)[order]
        if missing.any():
            order = order[np.argsort(missing, kind="stable")]
    return order


def _grouped_order(frame: pd.DataFrame, keys: Sequence[str]) -> np.ndarray | None:
    """:func:`_numeric_order` in one pass, where the rows are in order within their groups.

    The leading integer keys (rank, stream, step) span few values: coded together into
    one small integer (missing last, :func:`group_code16`), they are put in order by one
    stable radix sort. When the other keys (start times) are then already non-decreasing
    within each group, as a trace written in time order has them, that is the stable order
    of all the keys; otherwise None (the caller sorts key by key).
    """
    keys = list(keys)
    lead = 0
    while lead < len(keys) and pd.api.types.is_integer_dtype(frame[keys[lead]].dtype):
        lead += 1
    if lead == 0:
        return None
    code = group_code16(frame, keys[:lead])
    if code is None:
        return None
    order = np.argsort(code, kind="stable")  # a radix sort of 16-bit keys
    rest = keys[lead:]
    if not rest:
        return order
    grouped = code[order]
    tied = grouped[1:] == grouped[:-1]  # same group as the row before
    for k in rest:
        col = frame[k]
        missing = col.isna().to_numpy(bool)
        values = col.to_numpy(np.int64 if pd.api.types.is_integer_dtype(col.dtype)
                              else np.float64, na_value=0)[order]
        parts = (missing[order], values) if missing.any() else (values,)
        for part in parts:  # missing last, then the value
            if (tied & (part[1:] < part[:-1])).any():
                return None
            tied &= part[1:] == part[:-1]
    return order


def group_code16(frame: pd.DataFrame, keys: Sequence[str]) -> np.ndarray | None:
    """The integer ``keys`` of each row as one 16-bit code that sorts as the keys do (each
    key's missing value after its numbers), or None when their values span 2**16 codes
    or more."""
    # (value - low) wraps correctly once both are cast, the whole code space being under
    # 2**16
    code = np.zeros(len(frame), dtype=np.uint16)
    span = 1
    for k in keys:
        col = frame[k]
        missing = col.isna().to_numpy(bool)
        any_missing = bool(missing.any())
        values = col.to_numpy(np.int64, na_value=0)
        present = values[~missing] if any_missing else values
        low, high = (int(present.min()), int(present.max())) if present.size else (0, 0)
        size = high - low + 2  # the last slot is the missing value
        span *= size
        if span >= 2**16:
            return None
        if high == low and not any_missing:
            continue  # one value throughout (a rank's own tasks): nothing to code
        part = values.astype(np.uint16) - np.uint16(low & 0xFFFF)
        if any_missing:
            part[missing] = size - 1
        code *= np.uint16(size)
        code += part
    return code


def order_by_group(code: np.ndarray, values: np.ndarray) -> np.ndarray | None:
    """Positions that sort rows by ``code``, then ``values`` (NaN last), stably; None when
    the rows are in that order already.

    One stable radix sort of a 16-bit ``code`` where the values are then in order within
    each group (tasks of interleaved streams, each written in time order); else numpy's
    stable ``lexsort``, which puts NaN last as pandas does.
    """
    n = len(code)
    if n < 2:
        return None
    missing = np.isnan(values)
    if bool((code[1:] >= code[:-1]).all()):
        tied = code[1:] == code[:-1]
        if not _tied_out_of_order(tied, missing, values):
            return None
    order = np.argsort(code, kind="stable")
    grouped = code[order]
    tied = grouped[1:] == grouped[:-1]
    if not _tied_out_of_order(tied, missing[order], values[order]):
        return order
    return np.lexsort((values, code))


def _tied_out_of_order(tied: np.ndarray, missing: np.ndarray, values: np.ndarray) -> bool:
    """Whether a row tied with the row before (``tied``) has a smaller value than it
    (a missing value after every number)."""
    if (tied & missing[:-1] & ~missing[1:]).any():
        return True
    both = tied & ~missing[:-1] & ~missing[1:]
    return bool((both & (values[1:] < values[:-1])).any())


def _in_order(frame: pd.DataFrame, keys: Sequence[str]) -> bool:
    """Whether numeric ``keys`` are non-decreasing row to row (missing last), in key order.

    Read block by block from the top, blocks growing fourfold (each overlapping the last
    row of the one before, so that every pair of neighbours is compared): rows out of
    order, such as tasks of two streams interleaved in time, show in the first block,
    without reading every row.
    """
    cols = [frame[k] for k in keys]
    if not all(pd.api.types.is_numeric_dtype(c.dtype) and not pd.api.types.is_bool_dtype(
            c.dtype) for c in cols):
        return False
    n, start, block = len(frame), 0, 1 << 12
    while start < n - 1:
        stop = min(n, start + block + 1)
        if not _rows_in_order([c.iloc[start:stop] for c in cols]):
            return False
        start, block = stop - 1, block * 4
    return True


def _rows_in_order(cols: list[pd.Series]) -> bool:
    """:func:`_in_order` of the rows of ``cols`` (at least two)."""
    tied = np.ones(len(cols[0]) - 1, dtype=bool)  # rows equal to the row before so far
    for col in cols:
        missing = col.isna().to_numpy(bool)
        values = col.to_numpy(np.int64 if pd.api.types.is_integer_dtype(col.dtype)
                              else np.float64, na_value=0)
        for part in (missing, values):  # missing last, then the value
            if (tied & (part[1:] < part[:-1])).any():
                return False
            tied &= part[1:] == part[:-1]
    return True
