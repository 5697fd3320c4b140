"""The parts of a step breakdown named for people (:func:`step_parts`).

:func:`perfkit.analysis.compare_steps` names its rows by their column in
:func:`perfkit.analysis.step_breakdown` (``step_us``, ``computing_us``, …): keys for code.
``08_case_llama2_13b`` showed them as they are ("step_us", "preparing_us") in its "what
changed, part by part" table; the tuning journal's comparison already named them in words.
Both now use :data:`STEP_PART_LABELS`.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["STEP_PART_LABELS", "step_parts"]

#: The parts of the median step in words. Computing, communication not overlapped and free
#: make up the step; the overlapped communication runs under the computing and the bubble
#: is inside the communication not overlapped, so they are named as parts of those; the
#: wait before the first device task is outside the device's step.
STEP_PART_LABELS = {"step_us": "step", "computing_us": "computing",
                    "comm_not_overlapped_us": "communication (not overlapped)",
                    "overlapped_us": "communication under computing (part of computing)",
                    "free_us": "free",
                    "bubble_us": "pipeline bubble (part of communication not overlapped)",
                    "preparing_us": "before the first device task (data, launch)"}


def step_parts(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its ``part`` column in words (:data:`STEP_PART_LABELS`).

    Parameters
    ----------
    frame : pandas.DataFrame
        With a ``part`` column of step-breakdown keys (:func:`perfkit.analysis.
        compare_steps`); a key not in :data:`STEP_PART_LABELS` is kept as it is.

    Returns
    -------
    pandas.DataFrame
        A copy; the other columns and ``attrs`` (notes, warnings) unchanged.
    """
    out = frame.copy()
    if "part" in out.columns:
        out["part"] = [STEP_PART_LABELS.get(p, p) for p in out["part"]]
    out.attrs = dict(frame.attrs)
    return out
