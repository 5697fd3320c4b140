"""How much a rank's step phase varies from step to step: the noise a slow rank must beat.

A rank whose computation is 7 % above its peers' median is slow only if that difference
is larger than what the same rank's steps vary among themselves, and large enough to
matter in the step. :func:`step_noise_us` is that spread per rank (a robust standard
deviation over its steps); :data:`NOISE_FACTOR` and :data:`MIN_STEP_SHARE` are the two
bars :func:`perfkit.analysis.slow_ranks` and the advisor's slow-rank findings apply.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["step_noise_us", "NOISE_FACTOR", "MIN_STEP_SHARE", "MAD_SIGMA"]

#: A rank's excess must exceed this many times its step-to-step noise (:func:`step_noise_us`)
#: to be reported: 2 robust standard deviations of one step.
NOISE_FACTOR = 2.0
#: ... and be at least this share of the median step's wall time (2 %): a rank 77 µs
#: slower in a 10 ms step does not hold its peers back in a way worth draining a device.
MIN_STEP_SHARE = 0.02
#: The scale that turns a median absolute deviation into a standard deviation for normal
#: data (1 / Φ⁻¹(3/4) = 1.4826; Rousseeuw & Croux 1993).
MAD_SIGMA = 1.4826


def step_noise_us(steps: pd.DataFrame, metric: str) -> pd.Series:
    """Per rank, the robust step-to-step spread of ``metric`` (µs).

    ``noise = MAD_SIGMA × median(|x_step - median(x)|)`` over the rank's steps: a
    standard deviation that one slow step (a warm-up, a checkpoint) does not inflate. NaN
    for a rank with fewer than 3 steps: its noise is not known.

    Parameters
    ----------
    steps : pandas.DataFrame
        ``step_breakdown`` rows: ``rank`` and ``metric``.
    metric : str
        A ``*_us`` column.

    Returns
    -------
    pandas.Series
        Indexed by rank.
    """
    if metric not in steps.columns or "rank" not in steps.columns:
        return pd.Series(dtype="float64")
    frame = pd.DataFrame({"rank": steps["rank"], "x": steps[metric].astype("float64")})
    frame = frame.dropna()
    by = frame.groupby("rank")["x"]
    # two grouped medians (no Python function per rank): the rank's median, then the
    # median of the absolute deviations from it
    deviation = (frame["x"] - by.transform("median")).abs()
    mad = deviation.groupby(frame["rank"]).median()
    return (MAD_SIGMA * mad).where(by.size() >= 3).astype("float64")
