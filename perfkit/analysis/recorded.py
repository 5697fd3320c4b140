"""Steps whose device tasks were recorded: where the gaps between tasks are idle time.

A profiler can record the steps of a run (its step trace) for longer than it records the
device tasks inside them. MindInsight-era MindSpore output does: its step trace covers
every step, while its timeline's device operators may stop after the first few; the steps
after that hold only the step trace's all-reduce phases. The gaps between those phases
are not the device idling, they are tasks that were not recorded.

A loader that knows marks each step in the optional ``tasks_recorded`` column of the
``steps`` table (False: the step's device tasks were not recorded, or only in part). The
analyses that read gaps between device tasks as idle time
(:func:`perfkit.analysis.host_bound`) and the Timeline's representative step
(:func:`perfkit.analysis.timeline_window`) use only the other steps, and say so with
:func:`recorded_text`. A profile without the column has every step recorded.
"""

from __future__ import annotations

import pandas as pd

from ..format import runs_text

__all__ = ["RECORDED", "recorded_mask", "unrecorded", "recorded_steps_text", "recorded_text"]

#: The optional ``steps`` column: whether the step's device tasks were recorded in full.
RECORDED = "tasks_recorded"


def recorded_mask(steps: pd.DataFrame) -> pd.Series | None:
    """Per row of a ``steps`` table (or step breakdown): True where the step's device tasks
    were recorded in full; None when the table does not say (no :data:`RECORDED` column
    or no value in it: every step counts as recorded)."""
    if RECORDED not in steps.columns or not steps[RECORDED].notna().any():
        return None
    return steps[RECORDED].astype("boolean").fillna(True).astype(bool)


def unrecorded(steps: pd.DataFrame) -> pd.DataFrame:
    """The ``rank`` and ``step`` of each row whose device tasks were not recorded in full
    (empty when the table does not say)."""
    mask = recorded_mask(steps)
    if mask is None:
        return pd.DataFrame({"rank": pd.array([], dtype="Int64"),
                             "step": pd.array([], dtype="Int64")})
    out = steps.loc[~mask.to_numpy(bool), ["rank", "step"]]
    return out.astype({"rank": "Int64", "step": "Int64"}).reset_index(drop=True)


def recorded_steps_text(steps: pd.DataFrame) -> str | None:
    """The steps whose device tasks were recorded, in words, when not all were:
    ``"steps 1–14 of 322"`` (per rank when the ranks differ: ``"steps 1–14 of 322 on rank
    0; step 3 of 10 on rank 1"``; ``"no step of 322"``); None when every step's were."""
    mask = recorded_mask(steps)
    if mask is None or bool(mask.all()):
        return None
    frame = pd.DataFrame({"rank": steps["rank"].astype("Int64").array,
                          "step": steps["step"].astype("Int64").array,
                          "ok": mask.to_numpy(bool)}).dropna(subset=["step"])
    texts: dict[str, list[str]] = {}
    for rank, part in frame.groupby("rank", dropna=False, sort=True):
        ok = [int(s) for s in part.loc[part["ok"], "step"]]
        total = int(part["step"].nunique())
        text = (f"{'step' if len(ok) == 1 else 'steps'} {runs_text(ok)} of {total}" if ok
                else f"no step of {total}")
        texts.setdefault(text, []).append(str(rank))
    if len(texts) == 1:
        return next(iter(texts))
    return "; ".join(f"{text} on rank{'s' if len(ranks) > 1 else ''} {', '.join(ranks)}"
                     for text, ranks in texts.items())


def recorded_text(steps: pd.DataFrame) -> str | None:
    """``"device tasks recorded for steps 1–14 of 322"`` (:func:`recorded_steps_text`);
    None when every step's device tasks were recorded."""
    which = recorded_steps_text(steps)
    return None if which is None else f"device tasks recorded for {which}"
