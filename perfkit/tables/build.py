"""A frame written for people (:func:`table`): one unit per column, stated in the header.

:func:`table` picks the columns, fits one unit to each (the columns of one spread share the
unit of their median), puts the unit and what the figures are per (``scope``) into the
header, writes every cell (:mod:`perfkit.tables.cells`) and shortens long text. Nothing here
computes a metric.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from ..errors import InvalidArgumentError
from .cells import _cell, _in_own_units
from .columns import Column, _kind, column_format, shorten
from .markup import Table

__all__ = ["table"]


_SPREAD = re.compile(r"^(?P<stem>.*)_(?P<stat>median|min|max|mean|total)(?P<suffix>_[A-Za-z]+)?$")


def _with_bracket(words: str, inside: str) -> str:
    """``words (inside)``, one bracket: the words' own becomes a clause after a comma, or
    a colon where it holds a comma (``"free (device idle)"``, ``"%"`` → ``"free, device
    idle (%)"``, not ``"free (device idle) (%)"``)."""
    if not inside:
        return words
    words = re.sub(r"\s*\(([^()]*)\)",
                   lambda m: (": " if "," in m[1] else ", ") + m[1], words)
    return f"{words} ({inside})"


def table(frame: pd.DataFrame, columns: Sequence[str] | None = None, *,
          caption: str | None = None, scope: Mapping[str, str] | None = None,
          headers: Mapping[str, str] | None = None, units: Mapping[str, str] | None = None,
          shorten_text: Mapping[str, int] | int | None = 48, max_rows: int | None = 20,
          folded_rows: int = 0, hot: Iterable[bool] | None = None,
          wrap: Sequence[str] = ()) -> Table:
    """``frame`` written for people: one unit per column, stated in the header.

    A time or size column with a value a thousand times too small for the unit that fits
    the column (64 B among GiB) writes each cell in its own unit instead, and its header
    names no unit.

    Parameters
    ----------
    frame : pandas.DataFrame
        Columns named with perfkit's unit suffixes (``_us``, ``_ms``, ``_s``, ``_bytes``,
        ``_share``, ``_pct``, ``_gbps``, ``_tflops``, ``_GiB``); other numeric columns are
        written with 3 significant digits, integers as counts.
    columns : sequence of str, optional
        Columns to keep, in order (default: all).
    caption : str, optional
    scope : mapping, optional
        Column → what its figures are per (``{"total_us": "summed over ranks"}``).
    headers : mapping, optional
        Column → header to use instead of the one made from its name (the unit is still
        appended for times, bytes and shares, and the column's ``scope`` after it:
        ``"time (ms, summed over steps)"``).
    units : mapping, optional
        Column → unit to force (``{"step_median_us": "ms"}``). Columns of one spread (the
        ``_median``, ``_min`` and ``_max`` columns of :func:`~perfkit.tables.over_ranks`)
        share the unit of their median.
    shorten_text : int or mapping, optional
        Longest text cell (characters) before it is shortened (the whole text stays in the
        cell's tooltip); a mapping per column; None keeps every text whole.
    max_rows : int, optional
        Rows shown (the first ones); the table says how many were left out.
    folded_rows : int
        Rows after ``max_rows`` kept folded: the HTML shows them in the same table when
        the reader clicks "show N more rows" (no script: a label that ticks a hidden
        checkbox, :func:`~perfkit.tables.markup.table_html`). Default 0: left out.
    hot : iterable of bool, optional
        Rows to highlight.
    wrap : sequence of str
        Text columns allowed to wrap over several lines (sentences, not names).

    Returns
    -------
    Table
    """
    if not isinstance(frame, pd.DataFrame):
        raise InvalidArgumentError("frame", "must be a pandas DataFrame", type(frame).__name__)
    names = list(frame.columns if columns is None else columns)
    missing = [c for c in names if c not in frame.columns]
    if missing:
        raise InvalidArgumentError("columns", "not in the frame: " + ", ".join(missing))
    scope = dict(scope or {})
    headers = dict(headers or {})
    forced = dict(units or {})
    # the columns of one spread share the unit fitted to their median
    for name in names:
        m = _SPREAD.match(name)
        if m and m.group("stat") == "median" and name not in forced:
            kind = _kind(name, frame[name])[0]
            if kind in ("time", "bytes"):
                ref = column_format(frame, name).unit
                for stat in ("min", "max", "mean", "total"):
                    sibling = f"{m.group('stem')}_{stat}{m.group('suffix') or ''}"
                    if sibling in frame.columns:
                        forced.setdefault(sibling, ref)
                forced.setdefault(name, ref)
    cols = []
    for name in names:
        col = column_format(frame, name, scope.get(name), forced.get(name))
        if name in headers:  # its own words, then its unit and its scope, as made above
            inside = ", ".join(x for x in (col.unit, scope.get(name)) if x)
            col = Column(name, _with_bracket(headers[name], inside), col.kind, col.unit)
        cols.append(col)
    if folded_rows < 0:
        raise InvalidArgumentError("folded_rows", "must be 0 or more", folded_rows)
    shown = frame if max_rows is None else frame.head(max_rows + folded_rows)
    folded = 0 if max_rows is None else max(0, len(shown) - max_rows)
    cols = [_in_own_units(c, [_cell(v, c) for v in shown[c.name]]) for c in cols]
    full = pd.DataFrame({c.header: [_cell(v, c) for v in shown[c.name]] for c in cols},
                        index=range(len(shown)))
    text = full.copy()
    for c in cols:
        if c.kind != "text" or c.name in wrap:
            continue
        limit = shorten_text.get(c.name) if isinstance(shorten_text, Mapping) else shorten_text
        if limit:
            text[c.header] = [shorten(v, limit) for v in full[c.header]]
    flags = list(hot) if hot is not None else []
    flags = (flags + [False] * len(shown))[: len(shown)]
    hidden = len(frame) - len(shown)
    warnings = tuple(str(w) for w in frame.attrs.get("warnings", ()))
    notes = tuple(str(n) for n in frame.attrs.get("notes", ()) if str(n).strip())
    return Table(text, full, cols, caption, hidden, flags, tuple(wrap), warnings, notes,
                 folded)
