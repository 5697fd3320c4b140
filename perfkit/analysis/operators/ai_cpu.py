"""Operators that ran on the Ascend AI CPU: :func:`ai_cpu_operators`.

The :func:`~perfkit.analysis.operators.top.top_operators` rows of the types with AI CPU
tasks, described by those tasks only (:func:`_ai_cpu_only`): their count, times, calls
per step, example name and shapes, not those of the type's AI Core tasks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...format import counted, listed
from .._frames import any_values, compute_all, is_lazy
from .._util import distinct_values, empty_frame, step_rows, table, typed
from ..recorded import recorded_tasks
from .top import TOP_COLUMNS, _top_of, top_operators

__all__ = ["ai_cpu_operators"]

#: What :func:`_ai_cpu_only` takes from the AI CPU tasks alone (the rest is rescaled).
_OWN = ("name", "input_shapes", "core", "category", "count", "total_us", "mean_us",
        "max_us", "min_us", "bound")


def ai_cpu_operators(profile: Any, recorded_only: bool = True) -> pd.DataFrame:
    """Operators that ran on the Ascend AI CPU, by type, with their share of device time.

    AI CPU operators run on the device's general-purpose cores, typically ten times slower
    than an AI Core implementation, and often stall the stream. Returns the
    :func:`top_operators` columns for those types only, every figure of the type's AI CPU
    tasks alone (a type such as Cast may run most of its tasks on the AI Core and a few on
    the AI CPU): ``count``, the times, ``calls_per_step``, the example ``name`` and
    ``input_shapes``; ``share``, ``per_step_us`` and ``calls_per_step`` keep the
    denominators of :func:`top_operators` (all device time in scope, every (rank, step)
    pair). Only the AI CPU tasks :func:`top_operators` counts are read: those in a step
    (not of no step where other tasks have one) whose device tasks were recorded in full.
    Empty (with a note) when the profile records no accelerator core (GPU traces) or has
    no AI CPU task; or none of those counted, the note then saying first how many were
    left out and why (``ascend/msinsight-pt-gpt3-old``: "the profile's 2 AI CPU tasks are
    left out, 2 in steps whose device tasks were recorded only in part").
    ``recorded_only`` False counts the tasks of those steps too, as :func:`top_operators`
    does then (no figure per step where a step's tasks were recorded only in part).
    """
    kernels = table(profile, "kernels")
    if not any_values(kernels, "core"):
        return empty_frame(TOP_COLUMNS, "no accelerator core recorded (not an Ascend profile)")
    if is_lazy(kernels):
        (ai_cpu,) = compute_all(kernels["core"].eq("AI_CPU").any())
    else:  # the distinct cores, which the device's generation has read already
        ai_cpu = any(v == "AI_CPU" for v in distinct_values(kernels, "core") if isinstance(v, str))
    if not ai_cpu:  # no AI CPU task anywhere: nothing to rank, the full table is not built
        return empty_frame(TOP_COLUMNS, _NONE)
    top = top_operators(profile, by="type", n=None, recorded_only=recorded_only)
    out = top[top["ai_cpu"].fillna(False)].reset_index(drop=True)
    cpu_tasks, n_all, n_stepped = _cpu_tasks(kernels, table(profile, "steps"),
                                             recorded_only)
    res = out if out.empty else _ai_cpu_only(out, cpu_tasks)
    if res.empty:  # said first: an empty table shows its first note
        why = _none_counted(n_all, n_stepped) if cpu_tasks.empty else _NONE
        res.attrs = {**res.attrs,
                     "notes": [why, *[n for n in res.attrs.get("notes", []) if n != why]]}
    return res


#: The note of a profile with no AI CPU task at all.
_NONE = "no AI CPU operator in this profile"


def _cpu_tasks(kernels: pd.DataFrame, steps: pd.DataFrame, recorded_only: bool = True
               ) -> tuple[pd.DataFrame, int, int]:
    """The AI CPU tasks of ``kernels`` that :func:`top_operators` counts: in a step (a task
    of no step is left out where other tasks have one, as
    :func:`~perfkit.analysis._util.in_steps` leaves it out of the whole table, not rank by
    rank) whose device tasks were recorded in full
    (:func:`~perfkit.analysis.recorded.recorded_tasks`; in any step, ``recorded_only``
    False); with the number of AI CPU tasks of the profile and of those in a step."""
    is_cpu = kernels["core"].eq("AI_CPU").fillna(False)
    if is_lazy(kernels):  # its AI CPU tasks are few: read them whole
        (cpu_all,) = compute_all(kernels[is_cpu])
        stepped = None
        if "step" in cpu_all.columns and any_values(kernels, "step"):
            stepped = cpu_all["step"].notna().to_numpy(bool)
    else:
        cpu_all = kernels[is_cpu.to_numpy(bool)]
        rows = step_rows(kernels)
        stepped = None if rows is None else rows[is_cpu.to_numpy(bool)]
    in_step = cpu_all if stepped is None else cpu_all[stepped]
    kept = recorded_tasks(in_step, steps)[0] if recorded_only else in_step
    return kept, len(cpu_all), len(in_step)


def _none_counted(n_all: int, n_stepped: int) -> str:
    """Why no AI CPU task is counted where the profile has ``n_all`` of them, ``n_stepped``
    of them in a step: the others are of no step, these in steps whose device tasks were
    recorded only in part."""
    parts = []
    if n_all > n_stepped:
        parts.append(f"{n_all - n_stepped:,} of no step (launched before the trace began or "
                     "outside every step)")
    if n_stepped:
        parts.append(f"{n_stepped:,} in steps whose device tasks were recorded only in part")
    return (f"no AI CPU operator among the tasks counted: the profile's "
            f"{counted(n_all, 'AI CPU task')} {'is' if n_all == 1 else 'are'} left out, "
            f"{listed(parts)}")


def _ai_cpu_only(out: pd.DataFrame, cpu_tasks: pd.DataFrame) -> pd.DataFrame:
    """The rows ``out`` of :func:`top_operators` (by type) described by their AI CPU tasks.

    Count, times, the example name and shapes, the category and the bound come from
    ``cpu_tasks`` alone (:func:`~perfkit.analysis.operators.top._top_of` of them; an empty
    name or shapes is NA, not recorded); the share and the per-step time are the type's
    scaled by the AI CPU part of its time, the calls per step by the AI CPU part of its
    count, so that they keep the denominators of :func:`top_operators` (all device time in
    scope, every (rank, step) pair). A row of ``out`` with no task in ``cpu_tasks`` is
    left out.
    """
    mine = _top_of(cpu_tasks.reset_index(drop=True), "type", None, False)
    mine = mine.set_index(mine["key"].astype(TEXT).fillna(""))
    mine = mine.reindex(out["key"].astype(TEXT).fillna("").to_numpy())
    # a type none of whose AI CPU tasks is in ``cpu_tasks`` is not listed
    has = mine["count"].notna().to_numpy(bool)
    out, mine = out[has].reset_index(drop=True), mine[has]
    res = out.copy()
    for col in _OWN:
        res[col] = mine[col].to_numpy()
    for col in ("name", "input_shapes"):  # an empty text records nothing (msprof's "")
        res[col] = res[col].astype(TEXT).replace("", pd.NA)
    time = mine["total_us"].to_numpy(np.float64) / out["total_us"].to_numpy(np.float64)
    calls = mine["count"].to_numpy(np.float64) / out["count"].to_numpy(np.float64)
    res["share"] = out["share"].to_numpy(np.float64) * time
    res["per_step_us"] = out["per_step_us"].to_numpy(np.float64) * time
    res["calls_per_step"] = out["calls_per_step"].to_numpy(np.float64) * calls
    res = res.sort_values("total_us", ascending=False, kind="mergesort")
    return typed(res, TOP_COLUMNS).reset_index(drop=True)
