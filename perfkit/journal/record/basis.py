"""The one step a run's breakdown is of: the job's step (the device span and the wait
before the first device task), for runs recorded now and runs read from older journals.

A run recorded by this perfkit keeps *one* step, the job's (:func:`job_step_parts`):
``wall_us``, the step time of the run's metrics (:func:`perfkit.analysis.measured_step_s`:
the device span and the wait before the first device task), split as the Overview splits
it (the shares of every rank's and step's wall time), so that computing, communication not
overlapped, free and the wait (``preparing_us``) add up to it and their shares to 1; the
device span ``step_us`` is the step less the wait.

A journal written before kept each part's median over every (rank, step) and shares of the
median device span (``step_us``) alone, so a wait before the first device task came out as
a share *of the device span* and the shares added up to more than 100 %. Such a run (it has
no ``wall_us`` row) is read with the sum of its parts as its step, :func:`rebased`:
``wall = computing + comm_not_overlapped + free + preparing`` (medians; the device span
``step_us`` + ``preparing_us`` where a base part is missing), the basis
:func:`perfkit.widgets.headline.split_step_us` gives the Overview's shares, so its shares
add up to 100 % too; :data:`OLD_BASIS` says so beside it.
"""

from __future__ import annotations

import math

import pandas as pd

from ...analysis.steps import measured_step_s, step_wall_us
from ...format import time_text

__all__ = ["WALL", "MEAN_WALL", "BASE_PARTS", "OLD_BASIS", "UNEVEN_STEPS", "job_step_parts",
           "rebased", "basis_of", "uneven_steps_note"]

#: The breakdown row of the job's step (device span + wait before the first device task).
WALL = "wall_us"
#: The breakdown row of the mean wall time over every (rank, step): the step the shares
#: are of (not a part; runs recorded before it was kept lack it).
MEAN_WALL = "mean_wall_us"
#: The parts that add up to the job's step.
BASE_PARTS = ("computing_us", "comm_not_overlapped_us", "free_us", "preparing_us")
#: ``breakdown.attrs["basis"]`` of a run recorded before the journal kept the job's step.
OLD_BASIS = ("recorded before the journal kept the job's step: its step is the sum of its "
             "median parts (device span and the wait before it)")


def job_step_parts(steps: pd.DataFrame, parts: tuple[str, ...]) -> dict[str, float]:
    """The job's step and its parts, in µs, from a step breakdown.

    Parameters
    ----------
    steps : pandas.DataFrame
        :func:`perfkit.analysis.step_breakdown` (``step``, ``step_us``, the parts).
    parts : tuple of str
        The columns to give (those the breakdown has).

    Returns
    -------
    dict
        ``{WALL: T, part: us, ...}``. ``T`` is the job's step,
        :func:`perfkit.analysis.measured_step_s` × 10⁶ (per step the slowest rank's wall
        time, the device span and the wait before it; the median over the steps): the
        step time of the run's metrics. Each part is that step's share of it, ``us =
        share × T``, with ``share = Σ part / Σ (computing + comm_not_overlapped + free +
        preparing)`` over every (rank, step) whose three base parts are known (the wait
        counted 0 where missing; the wall time :func:`perfkit.analysis.step_wall_us` where
        a base column is missing): the split of the Overview's headline
        (:func:`perfkit.widgets.headline.step_split`), a time-weighted mean over the ranks
        and steps, so that computing, communication not overlapped, free and the wait add
        up to ``T``. A part no row has is left out. Empty when no row has a step time.
        ``MEAN_WALL``: the mean of those rows' wall times, the step the shares are of:
        where it is far from ``T`` (a few long steps), a part steady from step to step
        is not its share × ``T`` (:func:`perfkit.journal.compare.breakdown_diff` says so).
    """
    known = steps.dropna(subset=["step_us"])
    if known.empty:
        return {}
    step = measured_step_s(known) * 1e6
    base = [p for p in BASE_PARTS[:3] if p in known.columns]
    if len(base) == 3:
        known = known.dropna(subset=base)
        whole = known[base].astype("float64").sum(axis=1)
        if "preparing_us" in known.columns:
            whole = whole + known["preparing_us"].astype("float64").fillna(0.0)
    else:
        whole = step_wall_us(known)
    total = float(whole.sum())
    out = {WALL: step}
    if not total > 0 or math.isnan(step):
        return out
    for part in parts:
        if part in known.columns and known[part].notna().any():
            share = float(known[part].astype("float64").fillna(0.0).sum()) / total
            out[part] = share * step
    out[MEAN_WALL] = total / len(whole)
    return out


def basis_of(breakdown: pd.DataFrame) -> str | None:
    """None for a run whose shares are of the job's step as recorded; :data:`OLD_BASIS`
    for an older run whose step the reader had to take as the sum of its parts."""
    return breakdown.attrs.get("basis")


def rebased(breakdown: pd.DataFrame) -> pd.DataFrame:
    """A stored breakdown (``part``, ``us``, ``share``) with its step as the job's step.

    A run with a ``wall_us`` row is returned as it is. An older one gets a ``wall_us`` row
    first, ``us`` = computing + comm_not_overlapped + free + preparing (preparing 0 when
    missing; ``step_us`` + preparing when a base part is missing), every ``share`` = ``us``
    / that step, and ``attrs["basis"]`` = :data:`OLD_BASIS` (its step is not the step time
    of its metrics, which is the slowest rank's).
    """
    if breakdown.empty or WALL in set(breakdown["part"]):
        return breakdown
    us = breakdown.set_index("part")["us"].astype("float64")
    if "step_us" not in us.index and not all(p in us.index for p in BASE_PARTS[:3]):
        return breakdown
    prep = float(us.get("preparing_us", 0.0))
    prep = 0.0 if math.isnan(prep) else prep
    if all(p in us.index and not math.isnan(us[p]) for p in BASE_PARTS[:3]):
        wall = float(sum(us[p] for p in BASE_PARTS[:3])) + prep
    else:
        wall = float(us.get("step_us", math.nan)) + prep
    out = pd.concat([pd.DataFrame({"part": [WALL], "us": [wall], "share": [math.nan]}),
                     breakdown], ignore_index=True)
    out["share"] = out["us"] / wall if wall > 0 else math.nan
    out.attrs["basis"] = OLD_BASIS  # not the metrics' step (the slowest rank's)
    return out


#: How far the mean wall time may be from the job's (median) step before the parts, its
#: shares × that step, are said not to be a steady part's time per step.
UNEVEN_STEPS = 0.05


def uneven_steps_note(breakdown: pd.DataFrame, label: str) -> str:
    """Why a part of a run whose steps differ much reads other than its time per step: its
    ``us`` is its share of all the steps' time × the median step (``wall_us``), and the
    shares are of the mean (``mean_wall_us``; a run recorded by an older perfkit lacks
    it); empty where the two are within :data:`UNEVEN_STEPS` or the mean is not kept."""
    us = breakdown.set_index("part")["us"] if not breakdown.empty else pd.Series(dtype=float)
    median, mean = float(us.get(WALL, math.nan)), float(us.get(MEAN_WALL, math.nan))
    if not (median > 0 and mean > 0) or abs(mean / median - 1) <= UNEVEN_STEPS:
        return ""
    return (f"Run '{label}': its steps differ (median {time_text(median)}, mean "
            f"{time_text(mean)} over ranks and steps): each part here is its share of all "
            "the steps' time × the median step, so a part that is the same in every step "
            f"reads {'smaller' if mean > median else 'larger'} than it is; perfkit compare "
            "gives each part's median per step.")
