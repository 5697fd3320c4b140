"""The one slowest rank of a job: what every tab names when it names a slow rank.

The Overview's step table can say, per step, which rank *ended last*; the findings and the
Communication tab say which rank is *slower than its peers*. In a synchronous job these are
different questions: peers that wait for a slow rank inside a collective end with it, so
the rank that ends a step last is often a healthy one, by a few microseconds. This module
answers the second question once, from :func:`perfkit.analysis.slow_ranks` with the job's
pipeline stages, so that every place that names a slow rank names the same one:

* the slow ranks are the rows of ``slow_ranks`` marked ``slow`` (robust z ≥ 3.5 among the
  rank's stage peers, ≥ 5 % and ≥ 2 % of the median step above the median rank, above
  twice the step-to-step noise: see that function);
* the slowest is the one whose excess over the median rank is the largest (µs per step):
  it holds its peers back longest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..format import time_text
from .cluster import MIN_EXCESS, slow_ranks
from .rank_noise import MIN_STEP_SHARE, NOISE_FACTOR

__all__ = ["SlowestRank", "slowest_rank", "slowest_rank_of", "slowest_among"]


@dataclass(frozen=True)
class SlowestRank:
    """The slowest rank of a job, or why none is named.

    Attributes
    ----------
    rank : int or None
        The rank; None when no rank is slower than its peers beyond the noise, or when
        fewer than 3 ranks can be compared.
    phase : str
        The step phase in which it is slow (``slow_ranks``' ``phase``); "" when none.
    excess_us : float
        Its excess over the median rank, µs per step (NaN when none).
    excess_pct : float
        The same excess in % of the median rank's value (NaN when none).
    compared : int
        How many ranks were compared.
    sentence : str
        One sentence that says it, for every page that shows a slow rank.
    """

    rank: int | None
    phase: str
    excess_us: float
    excess_pct: float
    compared: int
    sentence: str


def slowest_rank(profile: Any, parallel: Any = None) -> SlowestRank:
    """The slowest rank of ``profile`` by :func:`perfkit.analysis.slow_ranks`.

    Parameters
    ----------
    profile : Profile or Cluster
        The run.
    parallel : Parallel, optional
        The job's layout: with ``pp`` > 1, ranks are compared with their own stage's
        ranks (as the advisor's slow-rank findings compare them).

    Returns
    -------
    SlowestRank
    """
    return slowest_rank_of(slow_ranks(profile, parallel=parallel))


def slowest_rank_of(ranks: pd.DataFrame) -> SlowestRank:
    """:class:`SlowestRank` from a :func:`perfkit.analysis.slow_ranks` table already made
    (the Communication tab draws that table and names the rank from the same one)."""
    compared = int(ranks["rank"].nunique()) if "rank" in ranks.columns else 0
    if compared == 0:  # no rank could be compared at all: say why, not "0 ranks loaded"
        why = "; ".join(str(n) for n in ranks.attrs.get("notes") or []) or \
            "no rank has step figures to compare"
        return SlowestRank(None, "", float("nan"), float("nan"), 0,
                           f"No slowest rank is named: no rank could be compared ({why}).")
    if compared < 3:
        return SlowestRank(None, "", float("nan"), float("nan"), compared,
                           f"No slowest rank is named: {compared} rank"
                           f"{'' if compared == 1 else 's'} loaded, and comparing a rank "
                           "with its peers needs at least 3.")
    slow = ranks[ranks["slow"].fillna(False).astype(bool)]
    if slow.empty:
        return SlowestRank(None, "", float("nan"), float("nan"), compared,
                           f"No rank is slower than its peers among the {compared} ranks "
                           f"(slow: {100 * MIN_EXCESS:g} % or more above the median rank, by more "
                           f"than {NOISE_FACTOR:g} times its step-to-step noise and "
                           f"{100 * MIN_STEP_SHARE:g} % of the step).")
    worst = slow.sort_values(["excess_us", "rank"], ascending=[False, True],
                             kind="mergesort").iloc[0]
    rank, excess = int(worst["rank"]), float(worst["excess_us"])
    pct = float(worst["excess_pct"])
    how = f"+{time_text(excess)} per step" + (f", {pct:.0f} % over the median rank"
                                                if np.isfinite(pct) else "")
    others = sorted(int(r) for r in pd.unique(slow["rank"]) if int(r) != rank)
    also = (f" (also slow: rank{'s' if len(others) > 1 else ''} "
            f"{', '.join(str(r) for r in others)})" if others else "")
    return SlowestRank(rank, str(worst["phase"]), excess, pct, compared,
                       f"Slowest rank: rank {rank}, in {worst['phase']} ({how}){also}.")


def slowest_among(profile: Any, ranks: Any, parallel: Any = None) -> SlowestRank | None:
    """:func:`slowest_rank` (with the job's ``parallel``) when it names one of ``ranks``
    (the ranks with step times: the timeline's default picks it); None with fewer than 3
    of them or no rank named."""
    ranks = set(ranks)
    if len(ranks) < 3:
        return None
    named = slowest_rank(profile, parallel)
    return named if named.rank is not None and named.rank in ranks else None
