"""The device's wait before a step's first device task, in the other steps than the one a
timeline draws (:func:`longest_other_wait`): where the drawn step has none, its caption says
how long the others wait and why it is not drawn."""

from __future__ import annotations

from typing import Any

import pandas as pd

__all__ = ["longest_other_wait"]


def longest_other_wait(known: pd.DataFrame, rank: Any, step: Any, single: bool
                  ) -> tuple[float, int, bool] | None:
    """The longest wait before the first device task of ``rank``'s steps other than
    ``step``: the larger of ``preparing_us`` and the step trace's interval, as
    :func:`perfkit.analysis.data_loading` counts the wait.

    Parameters
    ----------
    known : pandas.DataFrame
        The steps of :func:`~perfkit.analysis.timeline.timeline_window`: ``rank``,
        ``step``, ``wait_us`` (``preparing_us``), ``interval_us``
        (``iteration_interval_us``) and ``recorded`` (the step's device tasks recorded).
    rank : int or None
        The rank drawn (all rows are its own where ``single``).
    step : int or None
        The step drawn (None: no step, no other step either).
    single : bool
        ``known`` is one profile's, whose rows may not carry its rank.

    Returns
    -------
    tuple or None
        (µs, its step, whether that step's device tasks were recorded); None where no
        other step waits.
    """
    if not len(known) or step is None:
        return None
    mine = known if single else known[(known["rank"] == rank).fillna(False).to_numpy(bool)]
    mine = mine[(mine["step"] != step).fillna(False).to_numpy(bool)]
    waits = mine[["wait_us", "interval_us"]].max(axis=1, skipna=True)
    if not len(waits) or not bool(waits.fillna(0.0).gt(0).any()):
        return None
    at = waits.idxmax()
    return float(waits[at]), int(mine.at[at, "step"]), bool(mine.at[at, "recorded"])
