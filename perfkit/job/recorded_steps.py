"""The job's counts per step over the steps whose device tasks were recorded in full.

A loader marks the steps whose device tasks it did not record in full (``steps.
tasks_recorded``, :mod:`perfkit.analysis.recorded`): a fragment of a step holds a fraction
of its tasks, so a count per step read from it (pipeline sends, all-reduces) is a
fraction of the step's count. The readers of the job that count per step read only the
other steps, through :func:`recorded_steps_table` (which steps) and
:func:`recorded_view` (a profile with only their rows), and say so in their evidence
with :func:`over_recorded` (``"(over steps 1–2 of 5, whose device tasks were recorded in
full)"``). The model's counts (layers, micro-batches, recompute) do the same in
:func:`perfkit.analysis.shapes.read_model`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..analysis._frames import compute_all, is_lazy, is_lazy_frame
from ..analysis._util import table
from ..analysis.recorded import RECORDED, recorded_pairs, recorded_steps_text, recorded_tasks
from ..profile import Cluster, Profile

__all__ = ["recorded_steps_table", "recorded_view", "over_recorded", "none_recorded"]


def recorded_steps_table(profile: Any) -> pd.DataFrame | None:
    """The ``rank``, ``step`` and ``tasks_recorded`` of the profile's ``steps`` table (a
    lazy cluster's computed: one row per rank and step); None when the table does not
    mark any step (every step counts as recorded in full)."""
    steps = table(profile, "steps")
    if RECORDED not in steps.columns:
        return None
    cols = [c for c in ("rank", "step", RECORDED) if c in steps.columns]
    if is_lazy_frame(steps):
        (steps,) = compute_all(steps[cols])
    steps = steps[cols]
    return steps if recorded_steps_text(steps) is not None else None


def over_recorded(steps: pd.DataFrame | None) -> str:
    """``" (over steps 1–2 of 5, whose device tasks were recorded in full)"``, to follow
    what was counted, or ``""`` when every step's were (``steps`` None)."""
    which = None if steps is None else recorded_steps_text(steps)
    return "" if which is None else \
        f" (over {which}, whose device tasks were recorded in full)"


def none_recorded(steps: pd.DataFrame | None) -> bool:
    """Whether ``steps`` marks every (rank, step) pair as not recorded in full."""
    return steps is not None and recorded_pairs(steps) == 0


def recorded_view(profile: Any, names: Sequence[str]) -> Any:
    """``profile`` whose tables ``names`` hold only the rows of the steps recorded in full
    (:func:`perfkit.analysis.recorded.recorded_tasks`, rank by rank; a row of no step is
    kept); its other tables are the profile's own. ``profile`` itself where every step
    was recorded, and for a lazy cluster (whose readers here read nothing)."""
    if is_lazy(profile) or recorded_steps_table(profile) is None:
        return profile
    if isinstance(profile, Cluster):
        return Cluster([recorded_view(p, names) for p in profile], profile.meta,
                       profile.failed)
    if not isinstance(profile, Profile):
        return profile
    steps = table(profile, "steps")

    def tables(name: str) -> pd.DataFrame:
        frame = table(profile, name)
        if name not in names:
            return frame
        return recorded_tasks(frame, steps)[0]

    return Profile(profile.meta, tables)
