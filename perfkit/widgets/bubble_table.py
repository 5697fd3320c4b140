"""The pipeline bubble over a few layouts, as a table a page writes (notebook 02)."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import product

import pandas as pd

from ..calc.pipeline import bubble_fraction

__all__ = ["bubble_table"]


def bubble_table(pp: int | Iterable[int], num_micro_batches: int | Iterable[int],
                 vpp: int | Iterable[int] = 1) -> pd.DataFrame:
    """:func:`perfkit.bubble_fraction` for every combination of the values given.

    Parameters
    ----------
    pp, num_micro_batches, vpp : int or iterable of int
        Pipeline stages, micro-batches per step and virtual stages per device.

    Returns
    -------
    pandas.DataFrame
        One row per combination, in the order given: ``pp``, ``vpp``,
        ``num_micro_batches`` and ``bubble_share`` (``(pp − 1) / (vpp · m)``, relative
        to the ideal compute time), for :func:`perfkit.tables.table` to write in %.
    """
    def values(x: int | Iterable[int]) -> list[int]:
        return [int(x)] if isinstance(x, int) else [int(v) for v in x]

    rows = [{"pp": p, "vpp": v, "num_micro_batches": m,
             "bubble_share": bubble_fraction(p, m, v)}
            for p, v, m in product(values(pp), values(vpp), values(num_micro_batches))]
    return pd.DataFrame(rows, columns=["pp", "vpp", "num_micro_batches", "bubble_share"])
