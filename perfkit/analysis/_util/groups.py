"""Group codes and robust scores: where rows change group, integer codes per key, the
robust z-score (median and MAD) and whether a column holds one value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from .._shared import shared_factorize

__all__ = ["robust_z", "MAD_TO_SIGMA", "one_value", "count_distinct", "value_changes",
           "group_changes", "group_codes", "distinct_rows"]


#: Scale that turns a median absolute deviation into a standard deviation (normal data).
MAD_TO_SIGMA = 1.4826


def group_changes(*columns: pd.Series) -> np.ndarray:
    """Whether row ``i + 1`` differs from row ``i`` in any of ``columns`` (length n - 1).

    Missing values equal each other and differ from every value, as in
    ``groupby(dropna=False)``; values are compared as they are (not as text).
    """
    n = len(columns[0]) if columns else 0
    out = np.zeros(max(n - 1, 0), dtype=bool)
    for col in columns:
        if pd.api.types.is_integer_dtype(col.dtype):  # values and missing marks as arrays
            mask = col.isna().to_numpy(bool)
            data = col.to_numpy(np.int64, na_value=0)
            out |= (mask[1:] != mask[:-1]) | (~mask[1:] & (data[1:] != data[:-1]))
        else:
            codes, _ = shared_factorize(col, use_na_sentinel=True)
            out |= codes[1:] != codes[:-1]
    return out


def group_codes(frame: pd.DataFrame, keys: Sequence[str]) -> tuple[np.ndarray, pd.Index]:
    """One integer per row for its ``keys`` group, and the groups' index.

    ``frame.groupby(codes).agg(...)`` followed by ``.set_axis(index)`` gives what
    ``frame.groupby(keys, dropna=False).agg(...)`` gives (groups sorted by key, missing
    values last, key dtypes kept), without hashing several nullable columns per row.

    Returns
    -------
    codes : ndarray of int64
        Group of each row; codes sort as the groups do.
    index : Index or MultiIndex
        The groups present, in code order (named by ``keys``).
    """
    keys = list(keys)
    code = np.zeros(len(frame), dtype=np.int64)
    levels = []
    span = 1
    for k in keys:
        part, uniq = _sorted_codes(frame[k])
        size = len(uniq) + 1  # the last slot is the missing value
        span *= size
        if span >= 2**62:
            raise OverflowError("too many key combinations to code")
        code *= size  # in place: no new array per key
        missing = part < 0
        code += np.where(missing, size - 1, part) if missing.any() else part
        levels.append((uniq, size))
    # the codes present, in order: counted when the code space is small, else sorted
    present = np.flatnonzero(np.bincount(code, minlength=1)) if span <= 4 * len(code) + 1024 \
        else np.unique(code)
    arrays, rest = [], present
    for uniq, size in reversed(levels):
        pos = rest % size
        rest = rest // size
        # ExtensionArray.take fills -1 with the dtype's missing value on every pandas 2 and
        # 3; Index.take(fill_value=None) does not fill on pandas 2 (it takes the last value)
        arrays.append(pd.Index(pd.Index(uniq).array.take(np.where(pos == size - 1, -1, pos),
                                                         allow_fill=True)))
    arrays.reverse()
    if len(keys) == 1:
        index = arrays[0].rename(keys[0])
    else:
        index = pd.MultiIndex.from_arrays(arrays, names=keys)
    return code, index


def distinct_rows(frame: pd.DataFrame, columns: Sequence[str]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Which distinct combination of ``columns`` each row holds, and one row of each.

    A text-valued rule (a label, whether a row is kept) that depends only on a few columns
    is worked out on ``frame[columns].take(first)``, a few hundred rows for a profile that
    repeats a few hundred operator names over a million rows, and spread back with
    ``result[inverse]`` (or ``array.take(inverse)``). Missing values equal each other.

    Returns
    -------
    inverse : ndarray of int64
        For each row, its combination's position in ``first`` (0 .. k-1).
    first : ndarray of int64
        The position of the first row of each combination, in order of their codes.
    """
    key = np.zeros(len(frame), dtype=np.int64)
    span = 1
    for col in columns:
        codes, uniq = shared_factorize(frame[col], use_na_sentinel=True)
        span *= len(uniq) + 1
        if span >= 2**62:
            raise OverflowError("too many value combinations to code")
        key = key * (len(uniq) + 1) + (codes + 1)  # missing: 0
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64, copy=False), first.astype(np.int64)


def _sorted_codes(col: pd.Series) -> tuple[np.ndarray, Any]:
    """``pd.factorize(col, sort=True)``; small integer ranges are coded by offset instead.

    Rank and step numbers span a few values: ``value - min`` codes them without hashing
    (values absent from the column keep their slot; :func:`group_codes` drops them).
    """
    if pd.api.types.is_integer_dtype(col.dtype) and len(col):
        missing = col.isna().to_numpy(bool)
        values = col.to_numpy(np.int64, na_value=0)  # no copy where nothing is missing
        any_missing = bool(missing.any())
        present = values[~missing] if any_missing else values
        if present.size and int(present.max()) - int(present.min()) < 4 * len(col) + 1024:
            low, high = int(present.min()), int(present.max())
            part = values - low  # the one new array of a million rows
            if any_missing:
                part[missing] = -1
            uniq = pd.array(np.arange(low, high + 1), dtype=col.dtype)
            return part, uniq
    return pd.factorize(col, sort=True, use_na_sentinel=True)


def robust_z(values: pd.Series, groups: pd.Series | None = None) -> pd.DataFrame:
    """Robust z-scores: ``(x - median) / sigma`` with sigma from the MAD.

    sigma is ``1.4826 * MAD``. When the MAD is zero (at least half the values are equal)
    the values equal to the median score 0 and every other value scores ±inf: it differs
    from the bulk of the group, however little (callers add a minimum relative excess).
    A mean-deviation fallback is deliberately not used: it would be inflated by the very
    outlier it is meant to expose.

    Returns
    -------
    DataFrame
        Columns ``median``, ``mad``, ``sigma``, ``z`` aligned with ``values``.
    """
    x = values.astype("float64")
    if groups is None:
        groups = pd.Series(0, index=x.index)
    g = x.groupby(groups, dropna=False)
    median = g.transform("median")
    dev = (x - median).abs()
    mad = dev.groupby(groups, dropna=False).transform("median")
    sigma = MAD_TO_SIGMA * mad
    diff = x - median
    with np.errstate(divide="ignore", invalid="ignore"):
        z = diff / sigma
    z = z.where(sigma > 0, np.where(diff == 0, 0.0, np.sign(diff) * np.inf))
    z = z.where(x.notna())
    return pd.DataFrame({"median": median, "mad": mad, "sigma": sigma, "z": z})


def one_value(col: pd.Series) -> bool:
    """Whether an integer column holds one value in every row (none missing).

    Read from its minimum and maximum, without coding the rows.
    """
    if not pd.api.types.is_integer_dtype(col.dtype) or col.isna().any():
        return False
    values = col.to_numpy(np.int64)  # no copy: nothing is missing
    return bool(values.min() == values.max())


def count_distinct(col: pd.Series) -> int:
    """``col.nunique()``: the distinct values, missing ones left out.

    An integer column whose values span a short range (step numbers) is counted with one
    ``bincount`` of its offsets from the minimum, without hashing its rows; any other
    column by pandas.
    """
    if not pd.api.types.is_integer_dtype(col.dtype) or not len(col):
        return int(col.nunique())
    known = col.notna().to_numpy(bool)
    values = col.to_numpy(np.int64, na_value=0)
    if not known.all():
        values = values[known]
    if not len(values):
        return 0
    low, high = int(values.min()), int(values.max())
    if high - low > 4 * len(values) + 1024:
        return int(col.nunique())
    return int(np.count_nonzero(np.bincount(values - low, minlength=1)))


def value_changes(*columns: pd.Series) -> np.ndarray:
    """Whether row ``i + 1`` differs from row ``i`` in any of ``columns`` (length n - 1).

    Values are compared as their text (``astype(TEXT)``, missing as ``""``), as the
    lane labels ``"rank/stream"`` were, but by integer code: no string per row is built.
    """
    n = len(columns[0]) if columns else 0
    out = np.zeros(max(n - 1, 0), dtype=bool)
    for col in columns:
        if pd.api.types.is_integer_dtype(col.dtype):  # one text per integer: compared as is
            out |= group_changes(col)
            continue
        codes, _ = shared_factorize(col.astype(TEXT).fillna(""), use_na_sentinel=True)
        out |= codes[1:] != codes[:-1]
    return out
