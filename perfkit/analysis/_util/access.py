"""Safe table access and notes: a profile's table or an empty frame, the notes an analysis
leaves in ``frame.attrs["notes"]``, and whether a column holds any value.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

import pandas as pd

from ...errors import InvalidArgumentError
from ...io.canonical.schema import TABLE_NAMES

__all__ = ["table", "empty_frame", "add_note", "notes_of", "has_values", "check_profile"]


def check_profile(obj: Any, name: str = "profile") -> None:
    """Refuse what is not a profile: a Profile or Cluster (``meta``), or an object that
    holds canonical tables as attributes. A path or a table passed in its place used to
    give an empty frame, read as "nothing there" (a walk's ``step_breakdown("sample:x")``).

    Raises
    ------
    perfkit.errors.InvalidArgumentError
        Naming ``name`` and what was given; for a path, how to load it.
    """
    if hasattr(obj, "meta") or any(hasattr(obj, t) for t in TABLE_NAMES):
        return
    how = (": load the path first, perfkit.load(PATH)"
           if isinstance(obj, (str, os.PathLike)) else
           ": a table alone is not enough, give the profile it came from"
           if isinstance(obj, (pd.DataFrame, pd.Series)) else "")
    raise InvalidArgumentError(name, f"must be a Profile or Cluster from perfkit.load{how}",
                               type(obj).__name__)


def table(obj: Any, name: str) -> pd.DataFrame:
    """Return canonical table ``name`` of a Profile/Cluster, or an empty frame.

    A provider error (a damaged file) is turned into an empty frame with an explanatory
    note in ``frame.attrs["notes"]`` so that one broken table never stops an analysis.
    What is not a profile at all is refused (:func:`check_profile`).
    """
    check_profile(obj)
    try:
        frame = getattr(obj, name)
    except Exception as exc:  # noqa: BLE001 - a broken table must not stop the analyses
        frame = pd.DataFrame()
        frame.attrs["notes"] = [f"table {name!r} could not be read: {exc}"]
        return frame
    if frame is None:
        return pd.DataFrame()
    return frame


def empty_frame(columns: dict[str, Any] | Sequence[str], note: str | None = None
                ) -> pd.DataFrame:
    """Build an empty frame with the documented ``columns`` (name -> dtype, or names).

    Each set of columns is built once (a frame of a dozen typed columns takes pandas about
    2 ms) and copied from then on.
    """
    spec = tuple(columns.items()) if isinstance(columns, dict) else \
        tuple((c, "float64") for c in columns)
    frame = _empty_of(spec).copy()
    frame.attrs = {}
    if note:
        add_note(frame, note)
    return frame


@functools.lru_cache(maxsize=512)
def _empty_of(spec: tuple[tuple[str, Any], ...]) -> pd.DataFrame:
    """The empty frame of ``spec`` ((name, dtype) pairs); callers copy it."""
    return pd.DataFrame({c: pd.Series([], dtype=d) for c, d in spec})


def add_note(frame: pd.DataFrame, note: str) -> pd.DataFrame:
    """Append ``note`` to ``frame.attrs["notes"]`` (created when absent) and return it."""
    notes = list(frame.attrs.get("notes", []))
    if note not in notes:
        notes.append(note)
    frame.attrs["notes"] = notes
    return frame


def notes_of(frame: pd.DataFrame) -> list[str]:
    """Notes attached by :func:`add_note` (empty list when none)."""
    return list(frame.attrs.get("notes", []))


def has_values(frame: pd.DataFrame, column: str) -> bool:
    """Whether ``column`` exists in ``frame`` and holds at least one non-missing value.

    The first rows are looked at first: a column that has values nearly always has them
    there, and the answer is then known without a missing-value mask of every row (a
    million-row mask per question, some thirty questions per ``pk.advise``).
    """
    if column not in frame.columns:
        return False
    col = frame[column]
    if isinstance(col, pd.Series) and bool(col.iloc[:_HEAD_ROWS].notna().any()):
        return True
    return bool(col.notna().any())


#: Rows :func:`has_values` looks at before the whole column.
_HEAD_ROWS = 64
