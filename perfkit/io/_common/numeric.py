"""Numbers and times of the files as columns.

Text or numbers to float64 (:func:`to_float`) or to exact int64 nanoseconds
(:func:`to_ns`), exact ``Int64`` series (:func:`int64_series`), JSON numbers
(:func:`json_number`); what could not be read is counted in a
:func:`~perfkit.io._common.notes.note`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...format import counted, time_text
from .notes import note

__all__ = ["int64_series", "to_float", "json_number", "counting_numbers", "to_ns", "rel_us",
           "min_ns"]

_NUMERIC = r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$"
_UNREAD: ContextVar[dict[str, int] | None] = ContextVar("perfkit_io_unread", default=None)
_NUMBER_RE = re.compile(_NUMERIC)


def int64_series(arr: pa.Array | pa.ChunkedArray) -> pd.arrays.IntegerArray:
    """A pandas ``Int64`` array of int64 values with nulls, exactly.

    (``pd.array(arr.to_pandas(), dtype="Int64")`` goes through float64 when there is a
    null, which rounds epoch nanoseconds to 256 ns.)
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    arr = pc.cast(arr, pa.int64())
    values = pc.fill_null(arr, 0).to_numpy(zero_copy_only=False)
    mask = pc.is_null(arr).to_numpy(zero_copy_only=False)
    return pd.arrays.IntegerArray(values.astype(np.int64, copy=False), mask.astype(bool))


def _present(col: Any) -> int:
    """Cells holding a value (not null; the CSV reader reads empty cells as null)."""
    if col is None or pa.types.is_null(col.type):
        return 0
    return len(col) - col.null_count


def _note_unreadable(label: str | None, col: Any, missing_after: int, n: int) -> None:
    if label is None or col is None:
        return
    lost = missing_after - (n - _present(col))
    if lost > 0:
        note(f"{label}: {counted(lost, 'value')} not readable as a number (garbled, or out of "
             "range) "
             "read as NA")


def to_float(col: pa.ChunkedArray | pa.Array | None, n: int,
             label: str | None = None) -> np.ndarray:
    """Return a float64 numpy array (NaN where missing or not a number).

    With ``label`` (``"kernel_details.csv Duration(us)"``), cells that hold text but no
    number are counted in a :func:`note`.
    """
    out = _to_float(col, n)
    if label is not None:
        _note_unreadable(label, col, int(np.isnan(out).sum()), n)
    return out


def _to_float(col: pa.ChunkedArray | pa.Array | None, n: int) -> np.ndarray:
    if col is None:
        return np.full(n, np.nan)
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = pc.utf8_trim(col, "\t \"")
        ok = pc.match_substring_regex(col, _NUMERIC)
        col = pc.if_else(ok, col, pa.scalar(None, pa.string()))
    if pa.types.is_null(col.type):
        return np.full(n, np.nan)
    try:
        return pc.cast(col, pa.float64(), safe=False).to_numpy(zero_copy_only=False).astype(
            np.float64, copy=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pd.to_numeric(pd.Series(col.to_pylist()), errors="coerce").to_numpy(np.float64)


def json_number(value: Any, field: str | None = None) -> float:
    """A number of a JSON file as float: NaN when missing (``null`` or absent).

    A number, or text holding one (``"12.5"``), is read. Anything else where a number
    belongs (``"fast"``, ``true``, a list, an object) is NaN, and counted under ``field`` in
    the innermost :func:`counting_numbers` scope, which notes the counts.
    """
    if value is None:
        return np.nan
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and _NUMBER_RE.match(value):
        return float(value)
    counts = _UNREAD.get()
    if counts is not None and field is not None:
        counts[field] = counts.get(field, 0) + 1
    return np.nan


@contextmanager
def counting_numbers(name: str) -> Iterator[dict[str, int]]:
    """Count the :func:`json_number` values of the ``with`` block that are not numbers;
    at its end, one :func:`note` per field: ``"{name} {field}: N values ... read as NA"``.
    """
    counts: dict[str, int] = {}
    token = _UNREAD.set(counts)
    try:
        yield counts
    finally:
        _UNREAD.reset(token)
    for field, n in counts.items():
        note(f"{name} {field}: {counted(n, 'value')} not a number (text, true/false, a list or an "
             "object) read as NA")


def to_ns(col: pa.ChunkedArray | pa.Array | None, n: int, scale_to_ns: int = 1000,
          label: str | None = None) -> pa.Array:
    """Convert microsecond timestamps (text such as ``"1736408883704643.212\\t"`` or numbers)
    to exact int64 nanoseconds (null where missing).

    Text goes through a decimal cast, so no digit is lost to float rounding.
    ``scale_to_ns`` is the number of nanoseconds in one unit of the input. A value that is
    not a number, or whose nanoseconds would overflow int64, is null (never wrapped around);
    with ``label`` their count goes to a :func:`note`.
    """
    out = _to_ns(col, n, scale_to_ns)
    out, coarse = _scientific(col, out, scale_to_ns)
    if label is not None:
        if coarse:
            _note_coarse(label, coarse, n, scale_to_ns)
        _note_unreadable(label, col, out.null_count - len(coarse), n)
    return out


#: A number in scientific notation: its integer digits, decimals and exponent.
_SCIENTIFIC = re.compile(r"^[-+]?(\d+)(?:\.(\d*))?[eE]([-+]?\d+)$")


def _scientific(col: pa.ChunkedArray | pa.Array | None, out: pa.Array, scale_to_ns: int
                ) -> tuple[pa.Array, list[tuple[str, int, int]]]:
    """Times written in scientific notation (``1.69512E+15``), which :func:`_to_ns` leaves
    missing: those exact to one unit of the file (``1.695115378653323E+15`` µs) are read;
    the others are returned as ``(text, significant digits, resolution in units)``, but
    for a value out of int64 nanoseconds' range (``1e300``), which stays unreadable.

    A spreadsheet program saves a large number with six significant digits: a time in µs
    since 1970 is then rounded to ten thousand seconds, which places it nowhere in a run.
    """
    if col is None or not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        return out, []
    text = pc.utf8_trim(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col,
                        "\t \"")
    maybe = pc.and_(pc.is_null(out), pc.match_substring_regex(text, "[eE]"))
    where = np.flatnonzero(maybe.fill_null(False).to_numpy(zero_copy_only=False))
    if not len(where):
        return out, []
    values = out.to_pylist()
    coarse = []
    for i in where.tolist():
        cell = text[i].as_py()
        m = _SCIENTIFIC.match(cell)
        if m is None:
            continue
        whole, frac, exp = m.group(1), m.group(2) or "", int(m.group(3))
        ns = Decimal(cell) * scale_to_ns
        if abs(ns) >= _INT64_LIMIT:  # out of range (1e300): unreadable, not rounded
            continue
        resolution = exp - len(frac)  # the last digit written is worth 10 ** resolution
        if resolution >= 1:  # coarser than one unit: not a time of the run
            digits = len((whole + frac).lstrip("0")) or 1
            coarse.append((cell, digits, 10 ** resolution))
            continue
        values[i] = int(ns)
    return pa.array(values, type=pa.int64()), coarse


def _note_coarse(label: str, coarse: list[tuple[str, int, int]], n: int,
                 scale_to_ns: int) -> None:
    """The note of the times :func:`_scientific` could not read, in words."""
    digits = min(d for _, d, _ in coarse)
    step_us = max(r for _, _, r in coarse) * scale_to_ns / 1000.0
    note(f"{label}: {len(coarse):,} of {n:,} values are written in scientific notation "
         f"with {digits} significant digits ({coarse[0][0]}), which rounds each time to the "
         f"nearest {time_text(step_us)}: too coarse to place in the run, so they are read as "
         "NA and what they time is left off every chart over time (a spreadsheet program "
         "saves large numbers so; export the file again from the profiler)")


def _to_ns(col: pa.ChunkedArray | pa.Array | None, n: int, scale_to_ns: int) -> pa.Array:
    if col is None:
        return pa.nulls(n, pa.int64())
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_null(col.type):
        return pa.nulls(n, pa.int64())
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = pc.utf8_trim(col, "\t \"")
        ok = pc.match_substring_regex(col, r"^-?\d+(\.\d+)?$")
        col = pc.if_else(ok, col, pa.scalar(None, pa.string()))
        try:
            dec = pc.cast(col, pa.decimal128(28, 9))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            # rare: more than 9 decimals (dropped: below 1 fs) or more than 18 integer
            # digits (cannot be a time in int64 ns: missing)
            col = pc.if_else(pc.match_substring_regex(col, r"^-?\d{1,18}(\.\d+)?$"), col,
                             pa.scalar(None, pa.string()))
            col = pc.replace_substring_regex(col, r"^(-?\d+\.\d{9})\d+$", r"\1")
            dec = pc.cast(col, pa.decimal128(28, 9))
        limit = Decimal(_INT64_LIMIT // scale_to_ns)
        low, high = pc.min_max(dec).values()
        if (low.as_py() is not None and low.as_py() <= -limit) or \
                (high.as_py() is not None and high.as_py() >= limit):
            # values whose nanoseconds would not fit in int64 are missing, not wrapped around
            fits = pc.less(pc.abs(dec), pa.scalar(limit, pa.decimal128(28, 9)))
            dec = pc.if_else(fits, dec, pa.scalar(None, dec.type))
        scaled = pc.multiply(dec, pa.scalar(scale_to_ns, pa.decimal128(9, 0)))
        return pc.cast(scaled, pa.int64(), safe=False)
    if pa.types.is_integer(col.type):
        ints = pc.cast(col, pa.int64(), safe=False) if not pa.types.is_uint64(col.type) \
            else _ns_from_float(pc.cast(col, pa.float64()), 1)
        fits = pc.less(pc.abs(ints), _INT64_LIMIT // scale_to_ns)
        return pc.multiply(pc.if_else(fits, ints, pa.scalar(None, pa.int64())), scale_to_ns)
    return _ns_from_float(pc.cast(col, pa.float64()), scale_to_ns)


_INT64_LIMIT = 9_000_000_000_000_000_000  # a little under 2**63: no int64 overflow below it


def _ns_from_float(col: pa.Array, scale: int) -> pa.Array:
    vals = col.to_numpy(zero_copy_only=False).astype(np.float64)
    mask = ~np.isfinite(vals) | (np.abs(vals) >= _INT64_LIMIT / scale)
    vals = np.where(mask, 0.0, vals)
    whole = np.floor(vals)
    # integer part scaled exactly in int64; only the fraction goes through float math
    out = whole.astype(np.int64) * scale + np.round((vals - whole) * scale).astype(np.int64)
    return pa.array(out, mask=mask)


def rel_us(ns: pa.Array, origin_ns: int | None) -> np.ndarray:
    """Microseconds of ``ns`` relative to ``origin_ns`` as float64 (NaN where missing)."""
    if origin_ns is None:
        return np.full(len(ns), np.nan)
    diff = pc.subtract(ns, pa.scalar(int(origin_ns), pa.int64()))
    arr = pc.cast(diff, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    return arr / 1000.0


def min_ns(*arrays: pa.Array) -> int | None:
    """Smallest non-null value over the arrays, or None."""
    best: int | None = None
    for a in arrays:
        if a is None or len(a) == 0:
            continue
        m = pc.min(a).as_py()
        if m is not None and (best is None or m < best):
            best = int(m)
    return best
