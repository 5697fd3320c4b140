"""A table written for people (:class:`Table`) and its HTML (:func:`table_html`).

The HTML escapes all text, right-aligns numbers and left-aligns text; a shortened cell
carries its whole text in its ``title`` (the browser's tooltip). :data:`TABLE_CSS` is the
one ``<style>`` element these tables use. Folded rows sit in the same table (same column
widths), shown by a label that ticks a hidden checkbox: no script, so the dashboard, a
notebook and a saved report page behave alike.
"""

from __future__ import annotations

import html
import itertools
from dataclasses import dataclass, field

import pandas as pd

from ..format import WARNING_MARK
from .columns import Column

__all__ = ["TABLE_CSS", "Table", "table_html"]

#: Ids of the checkboxes that unfold tables: unique within a page.
_UNFOLD_IDS = itertools.count(1)


#: Style of :func:`table_html` tables (one ``<style>`` element; class ``pk-table``).
TABLE_CSS = (
    "<style>"
    ".pk-table{margin:4px 0 10px 0;max-width:100%;overflow-x:auto}"
    ".pk-table table{border-collapse:collapse;font-size:12px;line-height:1.35}"
    ".pk-table caption{text-align:left;font-weight:600;padding:6px 0 3px 0;"
    "white-space:normal}"
    ".pk-table th{text-align:right;padding:2px 8px;border-bottom:2px solid #bbb;"
    "vertical-align:bottom;font-weight:600;white-space:normal;max-width:14em}"
    ".pk-table td{text-align:right;padding:2px 8px;border-bottom:1px solid #e3e3e3;"
    "white-space:nowrap;font-variant-numeric:tabular-nums}"
    ".pk-table td.pk-text,.pk-table th.pk-text{text-align:left}"
    ".pk-table td.pk-wrap{white-space:normal;min-width:16em;max-width:38em}"
    ".pk-table tr.pk-hot td{background:#fdf2e9}"
    ".pk-table .pk-more{color:#555;font-size:12px;margin:2px 0}"
    ".pk-table .pk-unfold,.pk-table tbody.pk-folded{display:none}"
    ".pk-table .pk-unfold:checked~table tbody.pk-folded{display:table-row-group}"
    ".pk-table label.pk-more{cursor:pointer;color:#1a5fb4;display:inline-block}"
    ".pk-table .pk-unfold:checked~label .pk-open,"
    ".pk-table .pk-unfold:not(:checked)~label .pk-close{display:none}"
    ".pk-warn{color:#8a6d3b;background:#fcf8e3;border:1px solid #faebcc;padding:4px 8px;"
    "border-radius:4px;font-size:12px;margin:4px 0}"
    "</style>")


@dataclass
class Table:
    """A frame written for people (:func:`~perfkit.tables.table`); shows as HTML in notebooks.

    Attributes
    ----------
    text : pandas.DataFrame
        The cells as strings, headers with their units.
    full : pandas.DataFrame
        The whole text of each cell (same shape): the tooltip of a shortened cell.
    columns : list of Column
    caption : str or None
    hidden_rows : int
        Rows of the frame left out (after ``max_rows`` and ``folded_rows``).
    hot : list of bool
        Rows to highlight (e.g. the worst rank), one per row of ``text``.
    warnings : tuple of str
        Figures of the frame that cannot be right (``frame.attrs["warnings"]``, set by
        the analyses): shown above the table, never dropped.
    notes : tuple of str
        What the analysis says about the frame (``frame.attrs["notes"]``): an empty table
        says the first one, so that "nothing" comes with its reason.
    folded_rows : int
        The last rows of ``text``, shown folded under "N more rows" (``folded_rows`` of
        :func:`~perfkit.tables.table`).
    """

    text: pd.DataFrame
    full: pd.DataFrame
    columns: list[Column]
    caption: str | None = None
    hidden_rows: int = 0
    hot: list[bool] = field(default_factory=list)
    wrap: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    folded_rows: int = 0

    def html(self) -> str:
        """The table as HTML (text escaped; a shortened cell carries its whole text in
        its ``title``); a note when it is empty."""
        return table_html(self)

    def _repr_html_(self) -> str:
        return TABLE_CSS + self.html()

    def __repr__(self) -> str:
        return self.text.to_string(index=False)


def table_html(tab: Table) -> str:
    """HTML of a :class:`Table`: text escaped, numbers right-aligned, text left-aligned.

    A shortened cell carries its whole text in a ``title`` attribute (the browser shows it
    on hover). Use with :data:`TABLE_CSS`.
    """
    caption = f"<caption>{html.escape(tab.caption)}</caption>" if tab.caption else ""
    if tab.text.empty:
        title = f"<b>{html.escape(tab.caption)}</b>: " if tab.caption else ""
        if tab.notes:
            return (f"<p class='pk-note'>{title}nothing to show "
                    f"({html.escape(tab.notes[0].rstrip('.'))}).</p>")
        return f"<p class='pk-note'>{title}nothing in this profile.</p>"
    kinds = {c.header: c for c in tab.columns}

    def cls(header: str) -> str:
        col = kinds[header]
        if col.kind == "text":
            return " class='pk-text pk-wrap'" if col.name in tab.wrap else " class='pk-text'"
        return ""

    head = "".join(f"<th{cls(h)}>{html.escape(h)}</th>" for h in tab.text.columns)
    rows = []
    for i in range(len(tab.text)):
        cells = []
        for h in tab.text.columns:
            shown, whole = tab.text.iloc[i][h], tab.full.iloc[i][h]
            title = f" title='{html.escape(whole, quote=True)}'" if shown != whole else ""
            cells.append(f"<td{cls(h)}{title}>{html.escape(shown)}</td>")
        hot = " class='pk-hot'" if tab.hot and tab.hot[i] else ""
        rows.append(f"<tr{hot}>{''.join(cells)}</tr>")
    cut = len(rows) - tab.folded_rows
    box = label = folded = ""
    if tab.folded_rows:
        box_id = f"pk-unfold-{next(_UNFOLD_IDS)}"
        box = f"<input type='checkbox' class='pk-unfold' id='{box_id}'>"
        folded = f"<tbody class='pk-folded'>{''.join(rows[cut:])}</tbody>"
        rows_word = "row" if tab.folded_rows == 1 else "rows"
        label = (f"<label class='pk-more' for='{box_id}'><span class='pk-open'>▸ show "
                 f"{tab.folded_rows:,} more {rows_word}</span><span class='pk-close'>▾ show "
                 f"the first {cut:,} only</span></label>")
    more = (f"<p class='pk-more'>{tab.hidden_rows:,} more rows not shown.</p>"
            if tab.hidden_rows else "")
    flagged = "".join(f"<p class='pk-warn'>{WARNING_MARK} {html.escape(w)}</p>"
                      for w in tab.warnings)
    return (f"{flagged}<div class='pk-table'>{box}<table>{caption}<thead><tr>{head}</tr>"
            f"</thead><tbody>{''.join(rows[:cut])}</tbody>{folded}</table>{label}{more}</div>")
