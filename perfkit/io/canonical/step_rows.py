"""One row per step in a rank's ``steps`` table.

A rank's step table has one row per step. Two rows of one step make every per-step figure
wrong without a word: ``step_trace_time.csv`` with its step 50 given twice (files joined,
an export appended to) read as a mean step of 246 ms where the step took 154, and the
report's steps table summed the two to 400 ms. :func:`one_row_per_step` keeps the first
row of each step and says what it left out: rows equal to the first (a copy) or rows that
differ from it (two recordings of one step number, which the profile cannot tell apart).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

import pandas as pd

from ...format import counted
from .validate import table_label

__all__ = ["one_row_per_step"]


def one_row_per_step(tables: MutableMapping[str, pd.DataFrame], files: Mapping[str, Any]
                     | None = None, base: str = "") -> list[str]:
    """Keep the first row of each step of ``tables["steps"]`` (one rank's); return notes.

    Parameters
    ----------
    tables : mutable mapping
        Table name -> frame; ``"steps"`` is replaced when a step has more than one row.
    files, base
        As for :func:`perfkit.io.canonical.validate.clean_tables` (for the notes).

    Returns
    -------
    list of str
        One note for copies of a step's row (dropped) and one for steps given twice with
        different figures (the first read), naming the steps.
    """
    steps = tables.get("steps")
    if steps is None or steps.empty or "step" not in steps.columns:
        return []
    keyed = steps["step"].notna()
    if "rank" in steps.columns:  # a table of several ranks: a step per rank
        key = steps[["rank", "step"]].astype("string").agg("/".join, axis=1)
    else:
        key = steps["step"].astype("string")
    again = keyed & key.duplicated(keep="first")
    if not again.any():
        return []
    copies = keyed & steps.astype("string").fillna("<NA>").duplicated(keep="first")
    differ = again & ~copies
    tables["steps"] = steps[~again].reset_index(drop=True)
    where = table_label("steps", files or {}, base)
    notes = []
    if copies.any():
        notes.append(f"{where}: {_steps_text(steps.loc[copies, 'step'])} given twice, the "
                     f"same row again ({counted(int(copies.sum()), 'row')} copied): the "
                     "copies dropped")
    if differ.any():
        notes.append(f"{where}: {_steps_text(steps.loc[differ, 'step'])} given more than "
                     f"once with different figures ({counted(int(differ.sum()), 'more row')}): the "
                     "first row of each read; the others may be another recording of the "
                     "same step numbers")
    return notes


def _steps_text(values: pd.Series) -> str:
    """``step 50`` / ``steps 50, 51`` (at most 5 named)."""
    uniq = list(dict.fromkeys(values.tolist()))
    shown = ", ".join(str(int(v)) if float(v).is_integer() else str(v) for v in uniq[:5])
    more = f" and {len(uniq) - 5} more" if len(uniq) > 5 else ""
    return f"step{'s' if len(uniq) > 1 else ''} {shown}{more}"
