"""The median of a column, quiet where it has no value.

``Series.median`` skips missing values and gives NaN when none is left. With pandas
before 3 (2.2 is perfkit's lowest supported version), numpy also warns "Mean of empty
slice" (a ``RuntimeWarning``). The warning then reaches the user's notebook or terminal
whenever a profile lacks a step part (no bubble, no communication), though nothing is
wrong. :func:`median` gives the same number without the warning.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

__all__ = ["median"]


def median(values: Any) -> float:
    """Median of the non-missing values of ``values`` (a Series or anything a Series takes).

    Parameters
    ----------
    values : Series or array-like
        Numbers; missing values (NaN, NA, None) are left out, as ``Series.median`` does.

    Returns
    -------
    float
        The middle value, or the mean of the two middle ones; NaN when no value is left.
    """
    col = values if isinstance(values, pd.Series) else pd.Series(values)
    col = col.dropna()
    return float(col.median()) if len(col) else float("nan")
