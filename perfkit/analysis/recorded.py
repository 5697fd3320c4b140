"""Steps whose device tasks were recorded: where the gaps between tasks are idle time.

A profiler can record the steps of a run (its step trace) for longer than it records the
device tasks inside them. MindInsight-era MindSpore output does: its step trace covers
every step, while its timeline's device operators may stop after the first few; the steps
after that hold only the step trace's all-reduce phases. The gaps between those phases
are not the device idling, they are tasks that were not recorded.

A loader that knows marks each step in the optional ``tasks_recorded`` column of the
``steps`` table (False: the step's device tasks were not recorded, or only in part). The
analyses that read gaps between device tasks as idle time
(:func:`perfkit.analysis.host_bound`), the Timeline's representative step
(:func:`perfkit.analysis.timeline_window`) and the figures per step of the operators
(:func:`perfkit.analysis.top_operators`, through :func:`recorded_tasks`) use only the
other steps, and say so with :func:`recorded_text`. The analyses of task sequences
(element-wise chains, fusion patterns, attention chains, the roofline table) are given
:func:`recorded_profile`, the profile with only those steps' tasks, by the advisor. A
profile without the column has every step recorded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..format import listed, runs_text, share_text
from ..profile import Cluster, Profile
from ._frames import compute_all, is_lazy, is_lazy_frame
from ._util import add_note, table

__all__ = ["RECORDED", "COVERED", "recorded_mask", "unrecorded", "unrecorded_text",
           "recorded_steps_text",
           "recorded_text", "recorded_tasks", "covered_text", "recorded_pairs", "recorded_profile",
           "fragment_text", "withhold_fragments", "withheld_text"]

#: The optional ``steps`` column: whether the step's device tasks were recorded in full.
RECORDED = "tasks_recorded"
#: The optional ``steps`` column a loader may add beside :data:`RECORDED`: the share of the
#: step's busy time (from the step trace) that its recorded tasks cover.
COVERED = "tasks_covered"
#: How :func:`recorded_tasks`' note begins (the steps in words follow).
_ONLY = "figures per step over the steps whose device tasks were recorded in full: "


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


def unrecorded_text(steps: pd.DataFrame) -> str | None:
    """The steps whose device tasks were recorded only in part, in words: ``"step 2 on
    ranks 0 and 1"``, ``"step 19"`` (one rank), ``"steps 2–3 on rank 0; step 5 on rank
    1"``; None when the table marks none (:func:`unrecorded`)."""
    skip = unrecorded(steps).dropna(subset=["step"])
    if skip.empty:
        return None
    ranks_in = pd.unique(steps["rank"].dropna()) if "rank" in steps.columns else []
    by_steps: dict[str, list[int]] = {}
    for rank, part in skip.groupby("rank", dropna=False, sort=True):
        ids = sorted({int(x) for x in part["step"]})
        text = f"{'step' if len(ids) == 1 else 'steps'} {runs_text(ids)}"
        by_steps.setdefault(text, []).extend([] if pd.isna(rank) else [int(rank)])
    if len(ranks_in) <= 1:
        return "; ".join(by_steps)
    return "; ".join(f"{text} on rank{'s' if len(ranks) > 1 else ''} {listed(ranks)}"
                     if ranks else text for text, ranks in by_steps.items())


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


def recorded_tasks(kernels: pd.DataFrame, steps: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """The tasks of ``kernels`` (``rank``, ``step``) in the steps whose device tasks were
    recorded in full, for figures per step, and the note that says so.

    A figure per step is a sum over the steps' tasks divided by the number of steps that
    have tasks (:func:`perfkit.analysis._util.n_step_pairs`): the few tasks recorded in a
    step cut short (``wild/mi_run1``'s step 15) or the all-reduce phases of the steps after
    it would count those steps in the division with a fraction of their tasks in the sum.
    Here the tasks of every (rank, step) that :func:`unrecorded` lists are left out, so
    that both the sum and the division are over the recorded steps only; a task of no step
    is kept (:func:`perfkit.analysis._util.in_steps` decides about it).

    Returns
    -------
    (DataFrame, str or None)
        ``kernels`` itself and None when every step's tasks were recorded (no
        :data:`RECORDED` column, or no task in a step that is not: :func:`covered_text`
        then says which steps the figures cover); otherwise the tasks kept and the note
        ``"figures per step over the steps whose device tasks were recorded in full:
        steps 1–14 of 322 (N device tasks of the other steps left out)"``. A lazy (Dask)
        ``kernels`` is filtered partition by partition, with no count in the note.
    """
    if "step" not in kernels.columns or RECORDED not in steps.columns:
        return kernels, None
    if is_lazy_frame(steps):  # a lazy cluster's: one row per rank and step, read whole
        (steps,) = compute_all(steps[[c for c in ("rank", "step", RECORDED)
                                      if c in steps.columns]])
    skip = unrecorded(steps)
    if skip.empty:
        return kernels, None
    by_rank = "rank" in kernels.columns
    skip_keys = _pair_codes(skip["rank"] if by_rank else None, skip["step"])

    def keep(frame: pd.DataFrame) -> pd.DataFrame:
        codes = _pair_codes(frame["rank"] if by_rank else None, frame["step"])
        return frame[~np.isin(codes, skip_keys)]

    if is_lazy_frame(kernels):
        return kernels.map_partitions(keep, meta=keep(kernels._meta)), _ONLY + str(
            recorded_steps_text(steps))
    out = keep(kernels)
    n_out = len(kernels) - len(out)
    if n_out == 0:
        return kernels, None
    out.attrs = {k: list(v) if isinstance(v, list) else v for k, v in kernels.attrs.items()}
    return out, (f"{_ONLY}{recorded_steps_text(steps)} ({n_out:,} device "
                 f"task{'s' if n_out != 1 else ''} of the other steps left out)")


def covered_text(steps: pd.DataFrame) -> str | None:
    """Which steps figures per step of the device tasks cover, when some steps' tasks were
    not recorded (a raw CANN PROF folder that exported iteration 1's timeline of 10,
    :mod:`perfkit.io.cann.tables`, whose other steps hold no task, so that
    :func:`recorded_tasks` has nothing to leave out and no note), in the Advice tab's basis
    words (:meth:`perfkit.advisor.context.Context.basis_over`): ``"figures per step over
    step 1 of 10, the only step with its device tasks recorded"``; per rank where the
    ranks differ (:func:`recorded_steps_text`). None when every step's were."""
    which = recorded_steps_text(steps)
    if which is None:
        return None
    m = re.fullmatch(r"(steps?) (\S+) of (\d+)", which)
    if m is None:
        return f"figures per step over the steps with their device tasks recorded: {which}"
    if m[1] == "step":
        return f"figures per step over {which}, the only step with its device tasks recorded"
    return f"figures per step over {which}, the steps with their device tasks recorded"


def recorded_pairs(steps: pd.DataFrame) -> int | None:
    """The number of (rank, step) pairs of a ``steps`` table (or step breakdown) whose
    device tasks were recorded in full; None when the table does not say (every pair
    counts). Rows of no step are not pairs."""
    mask = recorded_mask(steps)
    if mask is None:
        return None
    ok = steps.loc[mask.to_numpy(bool) & steps["step"].notna().to_numpy(bool)]
    cols = [c for c in ("rank", "step") if c in ok.columns]
    return int(ok[cols].drop_duplicates().shape[0])


def recorded_profile(profile: Any) -> Any:
    """``profile`` (a :class:`~perfkit.profile.Profile` or a
    :class:`~perfkit.profile.Cluster`) whose ``kernels`` hold only the device tasks of
    the steps recorded in full (:func:`recorded_tasks`, rank by rank); its other tables
    are the profile's own.

    The analyses of task sequences read it: a chain of kernels or a fusion pattern found
    in a fragment of a step's tasks (``ascend/msinsight-pt-gpt3-old`` keeps 21 tasks of a
    221.8 ms step) is not the step's, nor is its time per step. ``profile`` itself is
    returned when every step's tasks were recorded. A lazy (Dask) cluster stays lazy: each
    rank is filtered where it is read, on the workers
    (:meth:`~perfkit.io.engines.dask.DaskCluster.viewed`), in its tables as in what an
    analysis runs rank by rank.
    """
    if is_lazy(profile):
        viewed = getattr(profile, "viewed", None)
        if viewed is None or is_lazy_frame(profile):
            return profile
        _kept, why = recorded_tasks(table(profile, "kernels"), table(profile, "steps"))
        return profile if why is None else viewed(_recorded_rank)
    if isinstance(profile, Cluster):
        ranks = [recorded_profile(p) for p in profile]
        if all(a is b for a, b in zip(ranks, profile, strict=True)):
            return profile
        return Cluster(ranks, profile.meta, profile.failed)
    if not isinstance(profile, Profile):
        return profile
    kept, why = recorded_tasks(table(profile, "kernels"), table(profile, "steps"))
    if why is None:
        return profile
    return Profile(profile.meta, lambda name: kept if name == "kernels" else
                   table(profile, name))


def _recorded_rank(profile: Profile) -> Profile:
    """One rank of a lazy cluster with only the device tasks of its steps recorded in full
    (:func:`recorded_tasks`); nothing is read until a table is asked for."""
    def tables(name: str) -> pd.DataFrame:
        if name != "kernels":
            return table(profile, name)
        return recorded_tasks(table(profile, "kernels"), table(profile, "steps"))[0]

    return Profile(profile.meta, tables)


def fragment_text(steps: pd.DataFrame, step: int | None, ranks: Sequence[Any]) -> str | None:
    """The warning for a view that draws the device tasks of ``step`` on ``ranks`` when
    some of them were recorded only in part; None when all were (or the table does not
    say).

    ``steps`` is a ``steps`` table or step breakdown; a rank None (a profile that does
    not record its rank) matches every row. Where the loader measured it
    (:data:`COVERED`), the share of the step's busy time the drawn tasks cover is given:
    ``ascend/msinsight-pt-gpt3-old``'s step 2 reads "the tasks drawn cover 5.1 % of the
    step's busy time (its computing and communication in the step trace) on rank 1 and
    16.8 % on rank 0".
    """
    mask = recorded_mask(steps)
    if mask is None or step is None:
        return None
    rows = steps[(pd.to_numeric(steps["step"], errors="coerce") == step).fillna(False)
                 .to_numpy(bool) & ~mask.to_numpy(bool)]
    known = [r for r in ranks if r is not None]
    if known and len(known) == len(ranks) and "rank" in rows.columns:
        order = {r: i for i, r in enumerate(known)}
        rows = rows[rows["rank"].isin(known).fillna(False).to_numpy(bool)]
        rows = rows.iloc[np.argsort([order[r] for r in rows["rank"]], kind="stable")]
    if rows.empty:
        return None
    many = "rank" in rows.columns and rows["rank"].notna().all() and len(ranks) > 1
    shares = rows[COVERED].to_numpy(np.float64) if COVERED in rows.columns else \
        np.full(len(rows), np.nan)
    where = [f"rank {int(r)}" for r in rows["rank"]] if many else []
    if np.isfinite(shares).all():
        items = [share_text(v) for v in shares]
        items[0] += " of the step's busy time (its computing and communication in the step " \
            "trace)"
        cover = listed(f"{v} on {w}" for v, w in zip(items, where, strict=True)) if where \
            else listed(items)
        how = f"the tasks drawn cover {cover}"
    else:
        how = "the tasks drawn are " + ("those recorded on " + listed(where) if where
                                        else "those recorded")
    return (f"Only part of step {step}'s device tasks were recorded, so this is a fragment "
            f"of the step, not the whole step: {how}. The gaps between the tasks are tasks "
            "that were not recorded, not idle time.")


def _pair_codes(rank: pd.Series | None, step: pd.Series) -> np.ndarray:
    """One int64 per row for its (rank, step) (a missing value as -1; no rank: rank -1)."""
    s = pd.to_numeric(step, errors="coerce").astype("Float64").fillna(-1) \
        .to_numpy(np.float64).astype(np.int64)
    if rank is None:
        return s + 1
    r = pd.to_numeric(rank, errors="coerce").astype("Float64").fillna(-1) \
        .to_numpy(np.float64).astype(np.int64)
    return (r + 1) * (1 << 32) + (s + 1)


def withhold_fragments(breakdown: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """A step breakdown derived from the device tasks
    (:func:`perfkit.analysis.steps.derive_steps`) with the :data:`RECORDED` mark of the
    ``steps`` table, and the time and parts of each step not recorded in full withheld
    (NA): with no step trace, such a step is known from its tasks only, and the span of a
    few of them, nearly all gaps, is neither its time nor its idle share
    (``ascend/msprof-analyze-tests/compute_advice_v2``'s 25 tasks spread over 2.86 s,
    :mod:`perfkit.io.ascend.excerpt`). ``breakdown`` itself where ``steps`` does not mark
    a step."""
    mask = recorded_mask(steps)
    if mask is None or bool(mask.all()) or breakdown.empty:
        return breakdown
    skip = unrecorded(steps)
    by_rank = "rank" in breakdown.columns and skip["rank"].notna().any()
    codes = _pair_codes(breakdown["rank"] if by_rank else None, breakdown["step"])
    hide = np.isin(codes, _pair_codes(skip["rank"] if by_rank else None, skip["step"]))
    out = breakdown.copy()
    out[RECORDED] = pd.array(~hide, dtype="boolean")
    figures = [c for c in out.columns if c == "step_us" or c.endswith("_share")
               or (c.endswith("_us") and c != "step_start_us")]
    out.loc[hide, figures] = np.nan
    which = runs_text(sorted({int(x) for x in out.loc[hide, "step"].dropna()}))
    one = int(hide.sum()) == 1
    return add_note(out, f"the time and parts of {'step' if one else 'steps'} {which} "
                         f"withheld: {'its' if one else 'their'} device tasks are an excerpt "
                         f"({recorded_text(steps)}), whose span is not a step time")


def withheld_text(breakdown: pd.DataFrame) -> str | None:
    """Why a step breakdown has no step time, when :func:`withhold_fragments` withheld it:
    ``"the time of step 19 is withheld: its device tasks are an excerpt of the step (see
    the notes), whose span is not a step time"``; None when no step with a time is
    missing for that reason (no step was withheld, or some step has a time)."""
    if breakdown.empty or RECORDED not in breakdown.columns or \
            "step_us" not in breakdown.columns or breakdown["step_us"].notna().any():
        return None
    mask = recorded_mask(breakdown)
    if mask is None or bool(mask.all()):
        return None
    ids = sorted({int(x) for x in breakdown.loc[~mask.to_numpy(bool), "step"].dropna()})
    one = len(ids) == 1
    return (f"the time of {'step' if one else 'steps'} {runs_text(ids)} is withheld: "
            f"{'its' if one else 'their'} device tasks are an excerpt of the "
            f"{'step' if one else 'steps'} (see the notes), whose span is not a step time")
