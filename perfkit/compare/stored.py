"""The verdict of :func:`perfkit.compare` for two runs of a tuning journal, from what the
journal stores (no profile loaded): the dashboard's History tab and the journal notebook
show it beside the journal's comparison.

A journal keeps one step time per run (the median over its steps), not the steps, so the
noise cannot be estimated: the verdict's band is the threshold
(:data:`~perfkit.compare.verdict.DEFAULT_THRESHOLD_PCT`), as :func:`perfkit.compare` does
for two one-step profiles. ``pk.compare(a, b, journal=...)`` loads the two profiles where
they are at hand and measures the noise from their steps.
"""

from __future__ import annotations

import math
from typing import Any

from .verdict import Verdict, step_verdict

__all__ = ["stored_verdict"]


def stored_verdict(comparison: Any, threshold_pct: float | None = None) -> Verdict:
    """The verdict on two stored runs.

    Parameters
    ----------
    comparison : perfkit.journal.RunComparison
        What :meth:`perfkit.Journal.compare` returns; its ``metrics`` rows ``step_time_s``,
        ``global_batch_size``, ``seq_length`` and ``devices`` are read.
    threshold_pct : float, optional
        As for :func:`~perfkit.compare.verdict.step_verdict`.

    Returns
    -------
    Verdict
        :func:`~perfkit.compare.verdict.step_verdict` of the two stored step times, per
        token per device where the runs' work per step (global batch × sequence / devices)
        differs.
    """
    m = comparison.metrics.set_index("key")

    def value(key: str, side: str) -> float:
        try:
            v = float(m.loc[key, side])
        except (KeyError, TypeError, ValueError):
            return math.nan
        return v

    def work(side: str) -> float:
        return (value("global_batch_size", side) * value("seq_length", side)
                / value("devices", side))

    scale = work("base") / work("new")
    if not math.isfinite(scale) or scale <= 0 or math.isclose(scale, 1.0, rel_tol=1e-9):
        scale = 1.0
    return step_verdict([value("step_time_s", "base") * 1e3],
                        [value("step_time_s", "new") * 1e3], scale, threshold_pct)
