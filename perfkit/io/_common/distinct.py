"""Column functions evaluated once per distinct value.

A profile repeats the same few thousand operator names, argument lists and thread ids over
millions of events. Text work (regular expressions, parsing numbers) done on every row
costs seconds; done on the distinct values and spread back by code it costs milliseconds,
with the same result row for row. A pandas Categorical column (how the Kineto reader keeps
repeated texts) already is (codes, distinct values), so it is not factorized again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT

__all__ = ["codes", "per_distinct", "numeric", "text", "str_array"]

#: pandas 3 and later: ``astype("str")`` gives the string dtype, missing kept as NaN.
_PANDAS_3 = int(pd.__version__.split(".")[0]) >= 3


def codes(values: pd.Series) -> tuple[np.ndarray, Any]:
    """(code per row, distinct texts) of a text column; the code is -1 where missing.

    A Categorical already is that; any other column is factorized as text.
    """
    if isinstance(values.dtype, pd.CategoricalDtype):
        return values.cat.codes.to_numpy(np.int64), values.cat.categories
    return pd.factorize(values.astype(TEXT), use_na_sentinel=True)


def text(values: pd.Series) -> pd.Series:
    """A text column (Categorical or not) in perfkit's text dtype (Arrow-stored ``string``).

    A Categorical's few distinct texts are converted and then taken by code (one array
    take), not every row's text converted on its own: the same column, row for row.
    """
    if not isinstance(values.dtype, pd.CategoricalDtype) or \
            values.cat.categories.inferred_type != "string":
        return values.astype(TEXT)  # (numbers as categories print as the column does)
    distinct = pd.Series(values.cat.categories).astype(TEXT).array
    out = distinct.take(values.cat.codes.to_numpy(np.int64), allow_fill=True)
    return pd.Series(out, index=values.index, name=values.name)


def str_array(values: pd.Series) -> Any:
    """``values.astype("str").array`` with a missing value kept missing on every pandas.

    pandas 3 gives its ``str`` dtype (NaN where missing). pandas 2 has no such dtype: its
    ``astype("str")`` writes ``str(x)`` of every value, so a missing shape became the text
    ``"<NA>"`` (then counted as a recorded shape by ``perfkit check``); there the result is
    an object array of the texts with NaN where missing.
    """
    if _PANDAS_3:
        return values.astype("str").array
    return values.astype(object).where(values.notna(), np.nan).array


def per_distinct(values: pd.Series, func: Callable[[pd.Series], pd.Series]) -> pd.Series:
    """``func(values.astype(TEXT))`` computed once per distinct value (NA gives NA).

    ``func`` maps a string Series to a Series of the same length (text, bool, ...). The
    result has ``values``' index and the nullable dtype ``func`` returns.
    """
    code, uniques = codes(values)
    mapped = func(pd.Series(uniques, dtype=TEXT))
    out = mapped.array.take(code, allow_fill=True)  # code -1 (NA) gives NA
    return pd.Series(out, index=values.index)


def numeric(values: pd.Series) -> np.ndarray:
    """``pd.to_numeric(values, errors="coerce").to_numpy()``, once per distinct text.

    Thread and process ids written as text repeat a few values over millions of rows; a
    Categorical column is read as its text. Columns that are not text, or that have
    missing values (whose result dtype depends on them), take the direct route.
    """
    is_text = isinstance(values.dtype, (pd.StringDtype, pd.CategoricalDtype))
    if is_text and len(values) and not values.hasnans:
        code, uniques = codes(values)
        return pd.to_numeric(pd.Series(uniques, dtype=TEXT),
                             errors="coerce").to_numpy()[code]
    if isinstance(values.dtype, pd.CategoricalDtype):
        values = text(values)
    return pd.to_numeric(values, errors="coerce").to_numpy()
