"""Shares that split a whole, rounded so that what is shown adds up to 100 %.

Each share of a split rounded on its own to one decimal of a percent can add up to 99.9 %
or 100.1 % (three parts of 33.33 %). :func:`rounded_split` rounds them by the largest
remainder method (Hamilton's): every share is cut down to the shown precision, and the
units of precision still missing to the whole go to the shares that lost the most, so
the shown shares add up to the whole exactly and none moves by more than one unit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["rounded_split"]


def rounded_split(shares: pd.DataFrame, decimals: int = 1) -> pd.DataFrame:
    """Each row's shares (fractions of 1) rounded to ``decimals`` of a percent, adding up
    to the row's own sum rounded to that precision (1.000 for a full split).

    Parameters
    ----------
    shares : pandas.DataFrame
        One column per part, one row per whole; fractions (0.25 = 25 %). A missing share
        stays missing and takes no part in the rounding.
    decimals : int
        Decimals of the percentage shown (1: 0.1 % = 0.001 of the whole).

    Returns
    -------
    pandas.DataFrame
        The same shape: per row, with ``u = 10 ** -(decimals + 2)``, each share is
        ``floor(share / u) * u`` plus ``u`` for the ``k`` shares of largest remainder,
        ``k = round(sum(shares) / u) - sum(floor(share / u))``.
    """
    unit = 10.0 ** -(decimals + 2)
    values: Any = shares.to_numpy(dtype="float64", na_value=np.nan)
    scaled = values / unit
    # a share at a whole unit but for float noise (0.30000000000000004) is that unit
    scaled = np.where(np.isclose(scaled, np.round(scaled), rtol=0.0, atol=1e-6),
                      np.round(scaled), scaled)
    floor = np.floor(scaled)
    out = floor.copy()
    for i in range(values.shape[0]):
        known = np.isfinite(scaled[i])
        if not known.any():
            continue
        missing = int(round(float(np.nansum(scaled[i]))) - float(np.nansum(floor[i])))
        remainder = np.where(known, scaled[i] - floor[i], -1.0)
        for j in np.argsort(-remainder, kind="stable")[:max(missing, 0)]:
            out[i, j] += 1.0
    return pd.DataFrame(out * unit, index=shares.index, columns=shares.columns)
