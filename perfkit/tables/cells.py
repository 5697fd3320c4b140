"""One cell of a table as text, in the unit its column's header states.

:func:`_cell` writes a value with :mod:`perfkit.format` in the unit of its
:class:`~perfkit.tables.columns.Column`; :func:`_in_own_units` gives a column whose cells
cannot share one unit (64 B among GiB) each cell its own unit and no unit in its header.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..format import (
    MISSING,
    bytes_text,
    bytes_unit,
    count_text,
    is_missing,
    number_text,
    share_text,
    sig,
    time_text,
    time_unit,
)
from .columns import Column

__all__: list[str] = []


def _in_unit(in_column: str, own: str, other_unit: bool) -> str:
    """A cell's number in its column's unit (the unit is in the header), or, for a value
    a thousand times too small for that unit (64 B in a GiB column: ``0.0000000596``),
    the value with its own unit (``64 B``)."""
    number = in_column.rsplit(" ", 1)[0]
    try:
        tiny = other_unit and 0 < abs(float(number.replace(",", ""))) < 1e-3
    except ValueError:
        tiny = False
    return own if tiny else number


def _in_own_units(col: Column, cells: list[str]) -> Column:
    """``col``, or, where one of its ``cells`` keeps its own unit (``64 B`` in a GiB
    column, :func:`_in_unit`), the column with every cell in its own unit and no unit in
    its header: a header's unit is the unit of every cell under it."""
    if col.kind not in ("time", "bytes") or not col.unit or not any(" " in c for c in cells):
        return col
    header = col.header.replace(f" ({col.unit})", "").replace(f" ({col.unit}, ", " (")
    return Column(col.name, header, col.kind, "")


def _cell(value: Any, col: Column) -> str:
    if col.kind == "text":
        if isinstance(value, (list, tuple, np.ndarray)):  # one value per stage, say
            return "[" + ", ".join(str(v) for v in value) + "]"
        return MISSING if value is None or (not isinstance(value, str) and is_missing(value)) \
            else str(value)
    if col.kind == "bool":
        if value is None or value is pd.NA or (isinstance(value, float) and value != value):
            return MISSING
        return "yes" if bool(value) else "no"
    if is_missing(value):
        return MISSING
    v = float(value)
    if col.kind == "time":
        factor = 1.0
        if col.name.endswith("_ms"):
            factor = 1e3
        elif col.name.endswith("_s"):
            factor = 1e6
        if not col.unit:  # each cell in its own unit (:func:`_in_own_units`)
            return time_text(v * factor)
        return _in_unit(time_text(v * factor, col.unit), time_text(v * factor),
                        time_unit([abs(v * factor)])[0] != col.unit)
    if col.kind == "bytes":
        if not col.unit:
            return bytes_text(v)
        return _in_unit(bytes_text(v, col.unit), bytes_text(v),
                        bytes_unit([abs(v)])[0] != col.unit)
    if col.kind == "share":
        return share_text(v).removesuffix(" %")
    if col.kind == "pct":
        return f"{v:,.1f}"
    if col.kind == "gib":
        return sig(v)
    if col.kind == "count":
        return count_text(v) if float(v).is_integer() else sig(v)
    return number_text(v)
