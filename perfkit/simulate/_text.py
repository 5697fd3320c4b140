"""Fast, exact text formatting of large columns (pyarrow compute, no Python loop per row)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["fixed3", "us_to_ns", "join", "write_lines", "overlap", "runs"]


def fixed3(ns: np.ndarray, tab: bool = False) -> pa.Array:
    """Non-negative integer nanoseconds as microsecond text with 3 decimals.

    ``fixed3([1736408883704643212])`` gives ``"1736408883704643.212"``; ``tab`` appends the
    trailing TAB that torch_npu writes after timestamps.
    """
    ns = np.asarray(ns, dtype=np.int64)
    whole, frac = np.divmod(ns, 1000)
    text = pc.binary_join_element_wise(
        pc.cast(pa.array(whole), pa.string()),
        pc.utf8_lpad(pc.cast(pa.array(frac), pa.string()), 3, padding="0"), ".")
    if tab:
        text = pc.binary_join_element_wise(text, pa.scalar("\t"), "")
    return text


def us_to_ns(us: np.ndarray) -> np.ndarray:
    """Microseconds (float) to whole nanoseconds, rounded, clipped at zero."""
    return np.maximum(np.rint(np.asarray(us, dtype=np.float64) * 1000.0), 0).astype(np.int64)


def join(columns: list[pa.Array | str], sep: str = ",") -> pa.Array:
    """Join string columns (or constant strings) element-wise with ``sep``."""
    args = [pa.scalar(c) if isinstance(c, str) else c for c in columns]
    return pc.binary_join_element_wise(*args, sep)


def write_lines(path: Path, header: str, lines: pa.Array, newline: str) -> None:
    """Write ``header`` and the ``lines`` (a string array) with ``newline`` after each."""
    with open(path, "wb") as fh:
        fh.write((header + newline).encode())
        if len(lines):
            body = pc.binary_join_element_wise(lines, pa.scalar(newline), "")
            body = pa.concat_arrays([a for a in pa.chunked_array([body]).chunks]) \
                if isinstance(body, pa.ChunkedArray) else body
            offsets = body.buffers()[1]
            data = body.buffers()[2]
            off = np.frombuffer(offsets, dtype=np.int32, count=len(body) + 1,
                                offset=body.offset * 4)
            fh.write(memoryview(data)[int(off[0]):int(off[-1])])


def overlap(starts_a: np.ndarray, ends_a: np.ndarray, starts_b: np.ndarray,
            ends_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Elementary segments of two interval sets.

    Returns ``(bounds, in_a, in_b)``: segment ``i`` is ``[bounds[i], bounds[i+1])`` and the
    flags say whether any interval of ``a`` / ``b`` covers it.
    """
    bounds = np.unique(np.concatenate([starts_a, ends_a, starts_b, ends_b]))
    if len(bounds) < 2:
        return bounds, np.zeros(0, dtype=bool), np.zeros(0, dtype=bool)

    def cover(s: np.ndarray, e: np.ndarray) -> np.ndarray:
        delta = np.zeros(len(bounds))
        np.add.at(delta, np.searchsorted(bounds, s), 1)
        np.add.at(delta, np.searchsorted(bounds, e), -1)
        return np.cumsum(delta)[:-1] > 0.5

    return bounds, cover(starts_a, ends_a), cover(starts_b, ends_b)


def runs(bounds: np.ndarray, flag: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merged ``(starts, ends)`` of consecutive segments where ``flag`` is true."""
    if not len(flag):
        return np.zeros(0), np.zeros(0)
    f = flag.astype(np.int8)
    edges = np.diff(np.concatenate([[0], f, [0]]))
    begin = np.nonzero(edges == 1)[0]
    stop = np.nonzero(edges == -1)[0]
    return bounds[begin], bounds[stop]
