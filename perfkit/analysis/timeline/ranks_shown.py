"""Which ranks a timeline window shows when the caller names none, and why.

The slowest and the fastest rank: the slowest is the one every tab names slow
(:func:`perfkit.analysis.slowest_rank`, which compares each rank with its peers beyond
the noise) when there is one, else the rank with the longest median step; the fastest
has the shortest median step. A profile of one rank shows it; ranks the caller names are
shown as named.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ...format import counted
from ..slowest import slowest_among

__all__ = ["default_ranks"]


def default_ranks(profile: Any, have: list[Any], known: pd.DataFrame, wanted: list[Any] | None,
                  single: bool, parallel: Any = None) -> tuple[list[Any], Any, Any, list[str]]:
    """``(chosen, slowest, fastest, reasons)`` of :func:`~perfkit.analysis.timeline_window`.

    ``have``: the profile's ranks; ``known``: the step rows with a positive step time
    (``rank``, ``step_us``); ``wanted``: the caller's ranks (None: the default);
    ``single``: a Profile, not a Cluster; ``parallel``: the job's layout (its stages).
    ``slowest`` and ``fastest`` are None where no
    rank has a step time (or only ``slowest`` where it is the fastest as well);
    ``reasons`` holds the sentence that says why the default ranks were chosen.
    """
    slowest = fastest = None
    timed = 0
    if len(known) and not single:
        med = known.groupby("rank")["step_us"].median()
        timed = len(med)
        slowest = int(med.sort_values(ascending=False, kind="mergesort").index[0])
        fastest = int(med.sort_values(kind="mergesort").index[0])
    # slow_ranks is worked out only for a default choice among 3 timed ranks or more
    named = slowest_among(profile, med.index, parallel) \
        if wanted is None and timed >= 3 else None
    reasons = []
    if wanted is None:
        if single:
            chosen = [have[0]]
        elif named is not None:  # the rank every tab names slow, and the fastest
            fastest = fastest if fastest != named.rank else None
            slowest = named.rank
            chosen = [slowest] + ([fastest] if fastest is not None else [])
            reasons.append(f"ranks: the slowest ({slowest}, slower than its peers in "
                           f"{named.phase})" + (f" and the fastest ({fastest}) by median "
                                                "step time" if fastest is not None else ""))
        elif slowest is not None:
            chosen = [slowest] if slowest == fastest else [slowest, fastest]
            # among 3 ranks or more, slow_ranks found none: the Overview says no rank is
            # slower than its peers, and this "slowest" must not read as a contradiction
            within = ("; no rank is slower than its peers beyond their step-to-step noise"
                      if timed >= 3 else "")
            reasons.append(f"ranks: the slowest ({slowest}) and the fastest ({fastest}) by "
                           f"median step time{within}" if slowest != fastest else
                           f"rank {slowest}: the only rank" if len(have) == 1 else
                           f"rank {slowest}: the only rank with step times "
                           f"({counted(len(have) - 1, 'other rank')} without)"
                           if timed == 1 else
                           f"rank {slowest}: all ranks have the same median step time")
        else:
            chosen = have[:1]
            reasons.append(f"rank {chosen[0]}: the only rank" if len(have) == 1 else
                           f"rank {chosen[0]}: the first (no step times to rank them)")
    else:
        chosen = [have[0]] if single else wanted
    return chosen, slowest, fastest, reasons
