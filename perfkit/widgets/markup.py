"""The dashboard's small pieces of HTML: style, notes, errors and tables for people.

Tables go through :func:`perfkit.tables.table` (one unit per column, in the header; long
names shortened with the whole text in a tooltip); messages never show a traceback.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ..errors import PerfkitError
from ..tables import TABLE_CSS, table
from .load_notes import plain_words
from .metrics import _TABLE_STYLE

__all__ = ["STYLE", "FOLDED_ROWS", "describe_error", "frame_html", "note", "error",
           "warning_html"]

#: Rows a page's table keeps folded after its first ``max_rows`` (opened by the reader):
#: enough for every operator type of a rank, few enough to keep a page light.
FOLDED_ROWS = 200

#: Style of every dashboard page part (tables, notes, messages).
STYLE = _TABLE_STYLE + TABLE_CSS + (
    "<style>"
    ".pk-note{color:#555;font-size:12px;margin:4px 0}"
    ".pk-ok{color:#2d572c;background:#dff0d8;border:1px solid #d6e9c6;padding:6px;"
    "border-radius:4px}"
    ".pk-job-warn{color:#8a6d3b;background:#fcf8e3;border:1px solid #faebcc;padding:6px;"
    "border-radius:4px;margin:4px 0}"
    ".pk-h{font-weight:600;font-size:14px;margin:10px 0 2px 0}"
    ".pk-finding{font-size:13px;margin:2px 0}"
    ".pk-finding b{white-space:nowrap}"
    "</style>")


def describe_error(exc: BaseException, doing: str, subject: str | None = None) -> str:
    """A one-paragraph message for the page: what failed and why, never a traceback.

    Parameters
    ----------
    exc : BaseException
        What was raised.
    doing : str
        What the dashboard was doing, e.g. ``"the Memory tab"``.
    subject : str, optional
        The path being opened: the message then reads ``Could not open PATH: why``, the
        path said once where the error starts with it too.

    Returns
    -------
    str
        Plain text. A :class:`~perfkit.errors.PerfkitError` carries its own explanation
        (it names the file and the problem); anything else is reported with its type as
        an unexpected error.
    """
    if isinstance(exc, PerfkitError):
        if subject is None:
            return f"Could not finish {doing}: {exc}"
        said = str(exc)
        for lead in (f"{subject}: ", f"{subject.rstrip('/')}: "):
            said = said.removeprefix(lead)
        return f"Could not open {subject}: {said}"
    return (f"Unexpected error while {doing}: {type(exc).__name__}: {exc}. "
            "This is probably a perfkit bug; please report it with the profile's format.")


def frame_html(frame: pd.DataFrame, caption: str | None = None, max_rows: int = 20,
               folded_rows: int = FOLDED_ROWS, columns: Sequence[str] | None = None,
               scope: Mapping[str, str] | None = None,
               headers: Mapping[str, str] | None = None, hot: Sequence[bool] | None = None,
               wrap: Sequence[str] = (), **kwargs: Any) -> str:
    """A table of ``frame`` for people (text escaped), or a note when it is empty.

    Parameters
    ----------
    frame : pandas.DataFrame
        What to show; the index is dropped. Units come from the column names
        (:func:`perfkit.tables.table`).
    caption : str, optional
        Shown above the table.
    max_rows : int
        Rows shown (the first ones).
    folded_rows : int
        Rows after those, shown when the reader opens "N more rows" (default
        :data:`FOLDED_ROWS`); a note says how many are left out beyond.
    columns, scope, headers, hot, wrap
        As for :func:`perfkit.tables.table`.
    **kwargs
        Other options of :func:`perfkit.tables.table` (``units``, ``shorten_text``).

    Returns
    -------
    str
        The names of tables and columns in the note an empty ``frame`` says are in words
        (:func:`~perfkit.widgets.load_notes.plain_words`).
    """
    kwargs.pop("float_format", None)  # the unit of each column decides its digits now
    kwargs.pop("align", None)
    if frame.attrs.get("notes"):  # an empty table says its first note: in words
        frame = frame.copy(deep=False)
        frame.attrs = {**frame.attrs,
                       "notes": [plain_words(str(n)) for n in frame.attrs["notes"]]}
    return table(frame, columns, caption=caption, scope=scope, headers=headers,
                 max_rows=max_rows, folded_rows=folded_rows, hot=hot, wrap=wrap, **kwargs).html()


def note(text: str) -> str:
    """A grey note (text escaped), the names of tables and columns it holds in words
    (:func:`~perfkit.widgets.load_notes.plain_words`)."""
    return f"<p class='pk-note'>{html.escape(plain_words(text))}</p>"


def error(text: str) -> str:
    """A red error box (text escaped), with the style."""
    return f"{STYLE}<div class='pk-error'>{html.escape(text)}</div>"


def warning_html(text: str) -> str:
    """A yellow warning box (text escaped)."""
    return f"<div class='pk-job-warn'>⚠ {html.escape(text)}</div>"
