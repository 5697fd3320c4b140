"""How a column of a table is written: its kind, its unit and its header, from its name.

perfkit's frames carry their units in their column names (``total_us``, ``peak_bytes``,
``computing_share``, ``bandwidth_gbps``; see ``docs/schema.md``). :func:`column_format`
reads the suffix of a name (and the column's dtype) into a :class:`Column`: a time column
gets the one unit that fits its median (:func:`perfkit.format.time_unit`), bytes the one of
KiB/MiB/GiB that fits (:func:`perfkit.format.bytes_unit`), shares are percentages. Also
:func:`shorten`, which cuts a long text cell (a kernel name) in its middle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..format import bytes_unit, time_unit

__all__ = ["Column", "column_format", "shorten"]


_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("_us", "time"), ("_ms", "time_ms"), ("_s", "time_s"), ("_share", "share"),
    ("_fraction", "share"), ("_pct", "pct"), ("_bytes", "bytes"), ("_gib", "gib"),
    ("_GiB", "gib"), ("_gbps", "gbps"), ("_tflops", "tflops"),
)
_SHARES = {"share", "mfu", "hfu", "efficiency", "fraction", "overlap_share",
           "exposed_share", "recompute_share", "score"}
_COUNTS = {"count", "samples", "ranks", "steps", "occurrences", "kernels", "forward",
           "backward", "rank", "src_rank", "dst_rank", "worst_rank", "step", "layers",
           "devices", "dp", "tp", "pp", "vpp", "micro_batch_size", "num_micro_batches",
           "stage", "chunk", "check_order", "calls", "chains", "tasks"}
_LABELS = {"gbps": "GB/s", "tflops": "TFLOP/s", "gib": "GiB", "pct": "%"}


def shorten(text: Any, limit: int = 48) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis in the middle (both ends of a
    kernel name say most about it)."""
    s = "" if text is None else str(text)
    if limit < 5 or len(s) <= limit:
        return s
    keep = limit - 1
    head = (keep + 1) // 2
    return s[:head] + "…" + s[len(s) - (keep - head):]


@dataclass(frozen=True)
class Column:
    """How one column of :func:`~perfkit.tables.table` is written.

    Attributes
    ----------
    name : str
        The column of the frame.
    header : str
        Its header, unit included (``"total (ms)"``).
    kind : str
        ``time``, ``share``, ``bytes``, ``count``, ``number``, ``text`` or ``bool``.
    unit : str
        The unit every cell of the column is written in (``"ms"``, ``"GiB"``, ``"%"``),
        empty for counts, text and plain numbers.
    """

    name: str
    header: str
    kind: str
    unit: str = ""


def _kind(name: str, series: pd.Series) -> tuple[str, str]:
    """(kind, stem) of a column from its name and dtype."""
    base = name
    for suffix, kind in _SUFFIXES:
        if base.endswith(suffix) and len(base) > len(suffix):
            return kind, base[: -len(suffix)]
    if base in _SHARES:
        return "share", base
    if pd.api.types.is_bool_dtype(series.dtype):
        return "bool", base
    if pd.api.types.is_integer_dtype(series.dtype) or base in _COUNTS \
            or _is_count_rate(base):
        if pd.api.types.is_numeric_dtype(series.dtype):
            return "count", base
    if pd.api.types.is_numeric_dtype(series.dtype):
        return "number", base
    return "text", base


def _is_count_rate(name: str) -> bool:
    """A count per step or per rank (``calls_per_step``): whole numbers are written without
    decimals (``"4"``, not ``"4.00"``), a fraction with 3 significant digits."""
    stem, sep, per = name.rpartition("_per_")
    return bool(sep) and per in ("step", "rank") and stem in _COUNTS


_ACRONYMS = {"mfu": "MFU", "hfu": "HFU", "ai": "AI", "cpu": "CPU", "npu": "NPU",
             "gpu": "GPU", "dp": "dp", "id": "ID"}


def _words(stem: str) -> str:
    return " ".join(_ACRONYMS.get(w, w) for w in stem.replace("_", " ").split())


def column_format(frame: pd.DataFrame, name: str, scope: str | None = None,
                  unit: str | None = None) -> Column:
    """The :class:`Column` for ``frame[name]``: kind from the name's suffix, one unit fitted
    to the column (its median), the unit and ``scope`` in the header.

    Parameters
    ----------
    frame : pandas.DataFrame
    name : str
    scope : str, optional
        What the figures are per (``"per step, per rank"``), appended to the header.
    unit : str, optional
        Force the unit of a time or bytes column.
    """
    series = frame[name]
    kind, stem = _kind(name, series)
    words = _words(stem)
    extra = f", {scope}" if scope else ""
    if kind in ("time", "time_ms", "time_s"):
        factor = {"time": 1.0, "time_ms": 1e3, "time_s": 1e6}[kind]
        fitted = unit or time_unit(series.astype("float64") * factor)[0]
        return Column(name, f"{words} ({fitted}{extra})", "time", fitted)
    if kind == "bytes":
        fitted = unit or bytes_unit(series.astype("float64"))[0]
        return Column(name, f"{words} ({fitted}{extra})", "bytes", fitted)
    if kind == "share":
        return Column(name, f"{words} (%{extra})", "share", "%")
    if kind in _LABELS:
        return Column(name, f"{words} ({_LABELS[kind]}{extra})", kind, _LABELS[kind])
    header = f"{words} ({scope})" if scope else words
    return Column(name, header, kind)
