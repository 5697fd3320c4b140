"""The kind of every event of a Kineto trace, as masks.

:class:`_Kinds` works out once per distinct category which kind
(:data:`perfkit.io.canonical.categories.KINETO_KINDS`) each event is, and hands out masks of the
events of some kinds; :func:`_bool` turns a nullable boolean column into a numpy mask.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from .._common.distinct import codes
from ..canonical.categories import kineto_kind

__all__: list[str] = []  # private to the Kineto reader


class _Kinds:
    """The kind (:data:`perfkit.io.canonical.categories.KINETO_KINDS`) of every event, as masks.

    Worked out once per distinct category (a Categorical column already holds them).
    """

    def __init__(self, cat: pd.Series) -> None:
        code, uniques = codes(cat)
        self._code = code
        self._kind = kineto_kind(pd.Series(uniques, dtype=TEXT)).fillna("").to_numpy(
            dtype=object)

    def mask(self, *kinds: str) -> np.ndarray:
        """Events of any of ``kinds``."""
        wanted = np.flatnonzero(np.isin(self._kind, list(kinds)))
        return np.isin(self._code, wanted)

    def of(self, sel: np.ndarray) -> np.ndarray:
        """The kind of the selected events (object array of text)."""
        c = self._code[sel]
        lut = np.append(self._kind, "")  # code -1 (no category) has no kind
        return lut[np.where(c < 0, len(self._kind), c)]


def _bool(mask: pd.Series) -> np.ndarray:
    """A nullable boolean column as a numpy mask (NA is False)."""
    return mask.fillna(False).to_numpy(dtype=bool)
