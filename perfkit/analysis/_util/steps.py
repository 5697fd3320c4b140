"""Which device tasks are in a step: the (rank, step) pairs, the rows of the steps, and the
note that counts the tasks of no step (per rank where ranks differ).
"""

from __future__ import annotations

import copy
import re
from typing import Any

import numpy as np
import pandas as pd

from ...format import runs_text
from .._frames import distinct, is_lazy_frame
from .._shared import shared
from .access import add_note, has_values, notes_of
from .groups import group_codes, one_value

__all__ = ["in_steps", "step_rows", "no_step_note", "noted_no_step", "steps_anywhere",
           "with_steps_elsewhere", "STEPS_ELSEWHERE", "ranks_noted_no_step",
           "without_no_step_note", "n_step_pairs"]


def n_step_pairs(kernels: Any) -> int:
    """Number of distinct (rank, step) pairs in a kernels-like table (at least 1).

    A row without a step (a task launched before the trace began) is not a step of its
    own when other rows have one (:func:`in_steps`). ``kernels`` may be a lazy (Dask)
    table: each partition is deduplicated where it lies.
    """
    cols = [c for c in ("rank", "step") if c in kernels.columns]
    if not cols:
        return 1
    if is_lazy_frame(kernels):
        pairs = distinct(kernels, cols)
        if "step" in cols and pairs["step"].notna().any():  # as below: no step of its own
            pairs = pairs[pairs["step"].notna()]
        return max(1, len(pairs))
    if kernels.empty:
        return 1
    if "step" in cols:
        stepped = kernels["step"].notna().to_numpy(bool)
        if stepped.any() and not stepped.all():
            kernels = kernels[stepped]
    # a key of one value throughout (one rank, one step) does not divide the pairs
    cols = [c for c in cols if not one_value(kernels[c])]
    if not cols:
        return 1
    try:
        return max(1, len(group_codes(kernels, cols)[1]))
    except OverflowError:
        return max(1, int(kernels[cols].drop_duplicates().shape[0]))


def in_steps(kernels: pd.DataFrame) -> pd.DataFrame:
    """The tasks of the recorded steps, for figures per step.

    A task without a step (launched before the trace began, or outside every step span:
    the Kineto reader's note counts them) belongs to no step: where other tasks have one,
    it is left out, with a note (:func:`no_step_note`), so that a per-step figure is over
    the steps' own tasks as the step breakdown is. ``kernels`` is returned as it is when
    every task, or none, has a step. A lazy table keeps each rank's tasks with a step
    where it lies, under the same rule over the whole cluster (:func:`steps_anywhere`: a
    rank with no step at all is left out where another rank has steps), without a note:
    :func:`no_step_note` counts them when asked.
    """
    if is_lazy_frame(kernels):
        return kernels.map_partitions(_stepped_part, steps_anywhere(kernels),
                                      meta=kernels._meta)
    stepped = step_rows(kernels)
    if stepped is None:
        return kernels
    out = kernels[stepped]
    out.attrs = {k: copy.copy(v) for k, v in kernels.attrs.items()}
    return add_note(out, no_step_note(kernels))


def _stepped_part(kernels: pd.DataFrame, anywhere: bool = False) -> pd.DataFrame:
    """The tasks with a step of one rank's partition of a lazy table (all, where every
    task has one, or none has and no rank of the cluster has one: ``anywhere``)."""
    stepped = step_rows(with_steps_elsewhere(kernels, anywhere))
    return kernels if stepped is None else kernels[stepped]


#: The key of ``DataFrame.attrs`` that says a table is one rank of a cluster where some
#: rank's tasks have a step (:func:`with_steps_elsewhere`).
STEPS_ELSEWHERE = "perfkit_steps_elsewhere"


def with_steps_elsewhere(kernels: pd.DataFrame, anywhere: bool) -> pd.DataFrame:
    """``kernels`` (one rank's tasks) marked as part of a cluster where a task has a step
    (``anywhere``: :func:`steps_anywhere` of the cluster), so that :func:`step_rows`
    leaves all of them out when none of them has a step, as :func:`in_steps` does on the
    whole table of an eager cluster. A shallow copy: a rank's table may be shared.
    """
    if not anywhere or kernels.attrs.get(STEPS_ELSEWHERE):
        return kernels
    out = kernels.copy(deep=False)
    out.attrs = {**kernels.attrs, STEPS_ELSEWHERE: True}
    return out


#: :func:`steps_anywhere` of the lazy tables already asked, by their Dask name.
_ANYWHERE: dict[str, bool] = {}


def steps_anywhere(kernels: Any) -> bool:
    """Whether some task of ``kernels`` has a step: the rule :func:`in_steps` applies to
    the whole table (tasks of no step are left out where a task has one).

    A lazy (Dask) table is asked once (one small reduction of its ``step`` column on the
    workers), then remembered by its name, so that every rank-by-rank analysis of a lazy
    cluster decides as the eager cluster does, not each rank alone.
    """
    if kernels is None or "step" not in kernels.columns:
        return False
    if not is_lazy_frame(kernels):
        return has_values(kernels, "step")
    name = str(getattr(kernels, "_name", ""))
    if name not in _ANYWHERE:
        if len(_ANYWHERE) > 256:
            _ANYWHERE.clear()
        _ANYWHERE[name] = bool(kernels["step"].notnull().any().compute())
    return _ANYWHERE[name]


def step_rows(kernels: pd.DataFrame) -> np.ndarray | None:
    """Mask of the tasks :func:`in_steps` keeps: those with a step; None when it keeps
    every task (every task, or none, has a step; no ``step`` column; a lazy table).

    A rank of a lazy cluster marked by :func:`with_steps_elsewhere` keeps none of its
    tasks when none has a step (another rank has steps). Once per
    :func:`~._shared.shared_results` block. A step column with no missing
    value (every task of a fully recorded run) is told from its missing count alone:
    no mask of a million tasks is built.
    """
    if is_lazy_frame(kernels) or "step" not in kernels.columns or kernels.empty:
        return None

    def compute() -> np.ndarray | None:
        step = kernels["step"]
        if not _has_missing(step):
            return None
        stepped = step.notna().to_numpy(bool)
        return stepped if stepped.any() or kernels.attrs.get(STEPS_ELSEWHERE) else None

    return shared("step_rows", (kernels,), (), compute)


def _has_missing(values: pd.Series) -> bool:
    """Whether a column holds a missing value; an Arrow column's null count, a masked
    column's mask, else ``hasnans``."""
    arr = values.array
    data = getattr(arr, "_pa_array", None)
    if data is not None:
        return bool(data.null_count)
    mask = getattr(arr, "_mask", None)
    if isinstance(mask, np.ndarray):
        return bool(mask.any())
    return bool(values.hasnans)


def no_step_note(kernels: Any) -> str:
    """The note of the tasks :func:`in_steps` leaves out of ``kernels`` ("" when none):
    how many, and why they belong to no step.

    Where ``kernels`` holds several ranks, the ranks whose tasks are left out are named
    (``"1018 device tasks of no step on ranks 0–1 (...)"``). A lazy (Dask) table is
    counted rank by rank where each rank lies, under the cluster's rule
    (:func:`steps_anywhere`), as the lazy analyses leave each rank's tasks of no step out
    (:func:`~._tasks.scope_rows` on its partition): a lazy cluster gets the note the
    eager one gets.
    """
    counts = _no_step_by_rank(kernels)
    n_out = int(counts.sum())
    if not n_out:
        return ""
    ranks = [int(r) for r in counts.index if not pd.isna(r)]
    several = (kernels.npartitions > 1 if is_lazy_frame(kernels)
               else "rank" in kernels.columns and not one_value(kernels["rank"]))
    where = ""
    if several and ranks:
        where = f" on rank{'s' if len(ranks) != 1 else ''} {runs_text(ranks)}"
    return (f"{n_out} device task{'s' if n_out != 1 else ''} of no step{where} (launched "
            "before the trace began or outside every step) left out of the figures per step")


def _no_step_by_rank(kernels: Any) -> pd.Series:
    """How many tasks of ``kernels`` :func:`in_steps` leaves out, per rank (index: the
    rank, NA for a task without one; empty when none is left out)."""
    if is_lazy_frame(kernels):
        if "step" not in kernels.columns:
            return pd.Series(dtype="int64")
        cols = [c for c in ("rank", "step") if c in kernels.columns]
        meta = _partition_no_step(kernels._meta[cols])
        found = kernels[cols].map_partitions(_partition_no_step, steps_anywhere(kernels),
                                             meta=meta).compute()
        return found.groupby(level=0, dropna=False, sort=True).sum()
    return _partition_no_step(kernels)


def _partition_no_step(kernels: pd.DataFrame, anywhere: bool = False) -> pd.Series:
    """:func:`_no_step_by_rank` of a table in memory (one rank's partition, or all;
    ``anywhere``: a task of the partition's cluster has a step)."""
    stepped = step_rows(with_steps_elsewhere(kernels, anywhere))
    if stepped is None:
        return pd.Series(dtype="int64")
    if "rank" not in kernels.columns:
        return pd.Series([len(stepped) - int(np.count_nonzero(stepped))], index=[pd.NA],
                         dtype="int64")
    left = kernels["rank"].to_numpy(np.float64, na_value=np.nan)[~stepped]
    return pd.Series(left).value_counts(dropna=False, sort=False).sort_index().astype("int64")


#: The start of every note :func:`no_step_note` writes (whatever the count and ranks).
_NO_STEP = re.compile(r"\d+ device tasks? of no step\b")


def noted_no_step(frame: pd.DataFrame, kernels: Any) -> pd.DataFrame:
    """``frame`` with :func:`no_step_note` of ``kernels`` added, where tasks were left out
    (an analysis over the tasks in scope, :func:`~._tasks.scope_rows`)."""
    note = no_step_note(kernels)
    return add_note(frame, note) if note else frame


def ranks_noted_no_step(frame: pd.DataFrame, kernels: Any) -> pd.DataFrame:
    """A lazy cluster's analysis put together from its ranks' results
    (:func:`~._frames.per_rank`), with the cluster's note of the tasks of no step.

    Each rank's result notes its own tasks of no step (:func:`noted_no_step` on that rank
    alone); put together they would say one rank's count. Those notes give way to
    :func:`no_step_note` of the cluster's ``kernels``: every rank's tasks counted and the
    ranks named, as the eager analysis of the cluster writes it. A frame without such a
    note (no rank left a task out) is returned as it is.
    """
    notes = notes_of(frame)
    if not any(_NO_STEP.match(n) for n in notes):
        return frame
    frame.attrs["notes"] = [n for n in notes if not _NO_STEP.match(n)]
    return noted_no_step(frame, kernels)


def without_no_step_note(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` without the notes of tasks of no step its ranks wrote (a lazy cluster's
    analysis that found nothing, whose eager counterpart notes none)."""
    frame.attrs["notes"] = [n for n in notes_of(frame) if not _NO_STEP.match(n)]
    return frame
