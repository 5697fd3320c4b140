"""Shared reading helpers of the loaders: CSV through pyarrow, JSON, timestamps, errors.

Every failure becomes a :class:`perfkit.errors.ProfileError` naming the file, and where
known the field, what was expected and what was found. Nothing here writes to disk.
"""

from __future__ import annotations

import csv
import gc
import io
import os
import re
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ..errors import ProfileError

__all__ = [
    "NULLS",
    "hccl_group_hash",
    "gc_paused",
    "read_header",
    "read_csv",
    "find_col",
    "to_float",
    "to_ns",
    "rel_us",
    "min_ns",
    "read_json",
    "describe_json_error",
    "check_nonempty",
    "rank_from_name",
]

NULLS = ["", "N/A", "NA", "n/a", "nan", "NaN", "None", "null", "-"]
"""Cell values read as missing."""

_NUMERIC = r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$"


@contextmanager
def gc_paused():
    """Switch Python's garbage collector off for a bulk parse (many small objects)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def check_nonempty(path: Path, what: str) -> None:
    """Raise ProfileError when ``path`` is missing or empty."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ProfileError(path, f"cannot read {what}: {exc.strerror or exc}") from None
    if size == 0:
        raise ProfileError(path, f"file is empty; expected {what}")


def read_header(path: Path, what: str) -> list[str]:
    """Return the column names of a CSV file, checking it is UTF-8 text."""
    check_nonempty(path, what)
    with open(path, "rb") as fh:
        first = fh.readline(1 << 16)
    if b"\x00" in first:
        raise ProfileError(path, f"binary data where {what} (a CSV text file) was expected",
                           line=1)
    try:
        text = first.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ProfileError(path, f"header is not UTF-8 text (byte {exc.start}); "
                           f"expected {what}", line=1) from None
    row = next(csv.reader(io.StringIO(text)), [])
    return [c.strip() for c in row]


def find_col(header: Sequence[str], *names: str) -> str | None:
    """Return the first of ``names`` present in ``header`` (case-insensitive), else None."""
    lower = {h.lower(): h for h in header}
    for n in names:
        hit = lower.get(n.lower())
        if hit is not None:
            return hit
    return None


def read_csv(path: Path, what: str, required: Iterable[Sequence[str]] = (),
             text_cols: Iterable[str] = ()) -> pa.Table:
    """Read a CSV into a pyarrow Table after checking its header.

    Parameters
    ----------
    path : Path
        The file.
    what : str
        Words for the message ("kernel_details.csv of torch_npu").
    required : iterable of name groups
        Each group lists alternative spellings; one of each must be in the header.
    text_cols : iterable of str
        Columns forced to text (timestamps with a trailing TAB, shapes).

    Returns
    -------
    pyarrow.Table
        Column names stripped of whitespace.
    """
    header = read_header(path, what)
    missing = [alts[0] for alts in required if find_col(header, *alts) is None]
    if missing:
        shown = ",".join(header[:12]) + (",..." if len(header) > 12 else "")
        raise ProfileError(path, f"expected a header with column(s) {', '.join(missing)} "
                           f"({what}); found '{shown}'", line=1)
    present = {c for c in text_cols if c in header}
    types = {c: pa.string() for c in present}
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=1 << 24),
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types=types, null_values=NULLS, strings_can_be_null=True,
                quoted_strings_can_be_null=True),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError, OSError) as exc:
        msg = str(exc).splitlines()[0][:300]
        if "columns, got" in msg:
            table = _read_ragged(path, what, header, msg)
        elif "utf8" in msg.lower().replace("-", ""):
            raise ProfileError(path, f"not UTF-8 text ({msg}); expected {what} as UTF-8 "
                               "CSV") from None
        else:
            raise ProfileError(path, f"cannot be parsed ({msg}); expected {what} as "
                               "comma-separated text") from None
    return table.rename_columns([c.strip() for c in table.column_names])


def _read_ragged(path: Path, what: str, header: list[str], msg: str) -> pa.Table:
    """Rows shorter than the header (seen in hand-trimmed exports): pad them with NA.

    Every column comes back as text; the loaders convert what they use.
    """
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=NULLS,
                            encoding="utf-8-sig", names=header, skiprows=1,
                            index_col=False)
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        first = str(exc).splitlines()[0][:200]
        raise ProfileError(path, f"cannot be read as {what}: {msg} ({first})") from None
    return pa.Table.from_pandas(frame.astype(object).where(frame.notna(), None),
                                preserve_index=False)


def to_float(col: pa.ChunkedArray | pa.Array | None, n: int) -> np.ndarray:
    """Return a float64 numpy array (NaN where missing or not a number)."""
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
            np.float64)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pd.to_numeric(pd.Series(col.to_pylist()), errors="coerce").to_numpy(np.float64)


def to_ns(col: pa.ChunkedArray | pa.Array | None, n: int, scale_to_ns: int = 1000) -> pa.Array:
    """Convert microsecond timestamps (text such as ``"1736408883704643.212\\t"`` or numbers)
    to exact int64 nanoseconds (null where missing).

    Text goes through a decimal cast, so no digit is lost to float rounding.
    ``scale_to_ns`` is the number of nanoseconds in one unit of the input.
    """
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
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # > 9 decimals
            return _ns_from_float(pc.cast(col, pa.float64()), scale_to_ns)
        scaled = pc.multiply(dec, pa.scalar(scale_to_ns, pa.decimal128(9, 0)))
        return pc.cast(scaled, pa.int64(), safe=False)
    if pa.types.is_integer(col.type):
        return pc.multiply(pc.cast(col, pa.int64()), scale_to_ns)
    return _ns_from_float(pc.cast(col, pa.float64()), scale_to_ns)


def _ns_from_float(col: pa.Array, scale: int) -> pa.Array:
    vals = col.to_numpy(zero_copy_only=False)
    mask = np.isnan(vals)
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


def read_json(path: Path, what: str) -> Any:
    """Parse a JSON file, turning every failure into a ProfileError."""
    check_nonempty(path, what)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ProfileError(path, f"cannot read {what}: {exc}") from None
    with gc_paused():
        try:
            return msgspec.json.decode(data)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise ProfileError(path, describe_json_error(data, str(exc), what)) from None


def describe_json_error(data: bytes, message: str, what: str) -> str:
    """Words for a JSON decode failure: truncated, binary, non-UTF-8 or malformed."""
    head = data[:4096]
    if b"\x00" in head:
        return f"binary data where {what} (JSON text) was expected"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(data) - 4 or "utf-8" in message.lower():
            return f"not UTF-8 text (bad byte at offset {exc.start}); expected {what} (JSON)"
    stripped = data.rstrip()
    if stripped and stripped[-1:] not in (b"}", b"]"):
        return f"JSON is truncated (ends without closing bracket); expected complete {what}"
    return f"invalid JSON ({message}); expected {what}"


def rank_from_name(name: str) -> int | None:
    """Rank encoded in a file or folder name (``rank3``, ``..._3.json``), or None."""
    stem = os.path.basename(name)
    for suffix in (".gz", ".json", ".db", ".csv", ".pt.trace"):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
    m = re.search(r"rank[-_]?(\d+)", stem, re.IGNORECASE)
    if m:
        return int(m.group(1))
    m = re.search(r"_(\d+)$", stem)
    if m:
        return int(m.group(1))
    return None


def hccl_group_hash(name: str) -> str:
    """The group id HCCL writes after ``@`` in communication keys, for a group ``name``.

    Two 32-bit polynomial hashes of the communicator name (primes 29 and 131) as the high
    and low words of a 64-bit number, in decimal; msprof-analyze computes the same
    (``double_hash``) to match ``parallel_group_info`` entries to communication keys.
    """
    h0 = h1 = 0
    for ch in name:
        h0 = (h0 * 29 + ord(ch)) & 0xFFFFFFFF
        h1 = (h1 * 131 + ord(ch)) & 0xFFFFFFFF
    return str((h0 << 32) | h1)
