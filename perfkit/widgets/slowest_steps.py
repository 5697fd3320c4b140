"""Each step as ``perfkit info`` lists it: its slowest rank, its wall time and the shares
of its split, for the text and the ``info`` answer alike (:func:`slowest_steps`)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .._shares import rounded_split
from ..analysis.steps import has_wait, step_wall_us
from .headline import split_step_us, undivided_split, with_exposed_comm

__all__ = ["StepRows", "slowest_steps"]


@dataclass(frozen=True)
class StepRows:
    """The steps' rows and how their split is told.

    Attributes
    ----------
    rows : pandas.DataFrame
        One row per step (its slowest rank's), in step order: ``step``, ``rank``,
        ``wall_us`` (the device span and the wait before it,
        :func:`perfkit.analysis.step_wall_us`) and the share of each part of its split
        (of :func:`~perfkit.widgets.headline.split_step_us`, rounded to 0.1 % so that a
        step's shares add up to 100.0 % as printed), :attr:`parts` and those no step has.
    parts : tuple of str
        The parts shared out, in the columns' order: ``computing_us`` (or
        ``computing_or_free_us`` where the profile gives computing and free time only
        together), ``comm_exposed_us``, ``bubble_us`` where some step has one,
        ``free_us``, and the wait before the step where some step has one
        (``preparing_us``, or legacy MindSpore's ``iteration_interval_us``).
    together : bool
        Computing and free time are given only together (legacy MindSpore).
    """

    rows: pd.DataFrame
    parts: tuple[str, ...]
    together: bool


def slowest_steps(breakdown: pd.DataFrame, rounded: bool = True) -> StepRows:
    """The slowest rank of each step with a step time, and its split into shares.

    Parameters
    ----------
    breakdown : pandas.DataFrame
        :func:`perfkit.analysis.step_breakdown` (rows without ``step_us`` are left out).
    rounded : bool
        Round the shares to 0.1 % so that a step's add up to 100.0 % as printed (the
        text); False keeps them exact (the JSON answer).

    Returns
    -------
    StepRows
    """
    known = with_exposed_comm(breakdown.dropna(subset=["step_us"]))
    known = known.assign(wall_us=step_wall_us(known))
    together = undivided_split(known)
    wait = ("iteration_interval_us" if together and "iteration_interval_us" in known.columns
            and bool(known["iteration_interval_us"].fillna(0).gt(0).any())
            else "preparing_us")
    waits = has_wait(known) or wait != "preparing_us"
    has_bubble = bool(known["bubble_us"].fillna(0).gt(0).any())
    first = "computing_or_free_us" if together else "computing_us"
    # every part is rounded together (a bubble or wait of 0 too), so that the shares shown
    # add up to 100.0 %; the parts no step has are not shown
    split = [c for c in (first, "comm_exposed_us", "bubble_us",
                         *(() if together else ("free_us",)), wait) if c in known.columns]
    parts = tuple(c for c in split if (c != "bubble_us" or has_bubble)
                  and (c != wait or waits))
    if known.empty:
        return StepRows(pd.DataFrame(columns=["step", "rank", "wall_us", *split]), parts,
                        together)
    slowest = known.loc[known.groupby("step", dropna=False)["wall_us"].idxmax()]
    whole = split_step_us(slowest)
    whole = whole.where(whole > 0)
    shares = pd.DataFrame({c: slowest[c].astype("float64") / whole for c in split})
    shares = rounded_split(shares) if rounded else shares
    rows = pd.concat([slowest[["step", "rank", "wall_us"]], shares], axis=1)
    return StepRows(rows, parts, together)
