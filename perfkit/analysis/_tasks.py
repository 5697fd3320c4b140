"""The device tasks the operator analyses read: in scope, their columns, in lane order.

:func:`scope_rows` says which tasks are in scope (with a duration, not communication
unless asked, and in a step where other tasks have one); :func:`tasks_in_scope` takes
their columns out once per :func:`~perfkit.analysis._shared.shared_results` block;
:func:`scope_lanes` puts them in (rank, stream, start) order (:class:`Lanes`);
:func:`pmu_maxima` reads the Ascend PMU pipe ratios.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .. import _text_codes
from ._order import group_code16, order_by_group
from ._shared import shared
from ._util import _carried, _frame_of, group_codes, step_rows

__all__ = ["tasks_in_scope", "scope_rows", "scope_lanes", "Lanes", "categorical_of",
           "PMU_RATIOS", "PMU_COMPUTE", "PMU_MEMORY", "pmu_maxima"]


#: The Ascend PMU ratios of the compute pipes (cube MAC, vector) and of the data-movement
#: pipes (MTE1-3), as the operator analyses read them.
PMU_COMPUTE = ("aic_mac_ratio", "aiv_vec_ratio")
PMU_MEMORY = ("aic_mte1_ratio", "aic_mte2_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio")
#: Every PMU pipe ratio the operator analyses read.
PMU_RATIOS = frozenset(PMU_COMPUTE + PMU_MEMORY)


def pmu_maxima(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
    """Per row, the largest compute-pipe ratio and the largest data-movement-pipe ratio.

    NaN only where every column of the kind is; None when the frame lacks either kind.
    """
    comp = [c for c in PMU_COMPUTE if c in frame.columns]
    mem = [c for c in PMU_MEMORY if c in frame.columns]
    if not comp or not mem:
        return None

    def row_max(cols: list[str]) -> np.ndarray:  # column by column into one new array
        out = frame[cols[0]].to_numpy(np.float64, na_value=np.nan).copy()
        for c in cols[1:]:
            np.fmax(out, frame[c].to_numpy(np.float64, na_value=np.nan), out=out)
        return out

    return row_max(comp), row_max(mem)


def tasks_in_scope(kernels: pd.DataFrame, include_communication: bool,
                   columns: Sequence[str] | frozenset[str], pmu: bool = True,
                   coded: Collection[str] = ()) -> pd.DataFrame:
    """Device tasks with a duration (and not communication, unless included), in a step
    where other tasks have one (:func:`scope_rows`).

    Only ``columns`` and (``pmu``) the :data:`PMU_RATIOS` present are returned, in table
    order. Within :func:`shared_results` the rows in scope are found once and each column
    is taken out once, when a caller first asks for it. A text column of ``coded`` whose
    row ids are known (a table read from the cache) comes out as a categorical over the
    column's distinct values, for callers that read it by code (:func:`shared_factorize`)
    or per distinct value: one or two bytes per task instead of its text.
    """
    wanted = [c for c in kernels.columns if c in columns or (pmu and c in PMU_RATIOS)]
    keep = scope_rows(kernels, include_communication)
    if keep is None:
        return kernels[wanted]
    index = shared("scope_index", (kernels,), (include_communication,),
                   lambda: kernels.index[keep])

    def take(c: str) -> Any:
        arr = kernels[c].array
        if c in coded:
            cat = shared("scope_coded", (kernels,), (include_communication, c),
                         lambda: _coded_rows(arr, keep))
            if cat is not None:
                return cat
        return shared("scope_column", (kernels,), (include_communication, c),
                      lambda: _carried(arr, arr[keep], keep))

    arrays = {c: take(c) for c in wanted}
    return _frame_of(arrays, index, kernels.columns[kernels.columns.isin(wanted)],
                     kernels.attrs)


def _coded_rows(arr: Any, rows: np.ndarray) -> pd.Categorical | None:
    """The text column ``arr`` at ``rows`` as a categorical, from its known row ids and the
    text of each id (None when they are not known)."""
    data = getattr(arr, "_pa_array", None)
    ids = _text_codes.ids_of(data) if data is not None else None
    values = _text_codes.values_of(data) if data is not None else None
    if ids is None or values is None:
        return None
    return categorical_of(ids[rows], pd.Series(values, dtype=arr.dtype))


def categorical_of(codes: np.ndarray, uniq: pd.Series) -> pd.Categorical:
    """The text ``uniq[codes]`` as a categorical over ``uniq``'s values (a missing one as
    the missing code), its codes in the smallest integer type."""
    missing = uniq.isna().to_numpy(bool)
    mapping = np.cumsum(~missing) - 1  # each distinct value's category
    mapping[missing] = -1
    small = np.int8 if len(uniq) < 127 else np.int16 if len(uniq) < 32_000 else np.int32
    return pd.Categorical.from_codes(mapping.astype(small)[codes], dtype=pd.CategoricalDtype(
        pd.Index(uniq[~missing].array, dtype=uniq.dtype)))


@dataclasses.dataclass(frozen=True)
class Lanes:
    """The tasks in scope in (rank, stream, start) order, and where each lane begins.

    :func:`scope_lanes` gives it, once per :func:`shared_results` block, for every analysis
    of task sequences (tiny kernels, unfused patterns, element-wise chains): they read the
    columns they need in this order (:meth:`take`) instead of a frame of them.

    Attributes
    ----------
    positions : ndarray or None
        The scope's rows in that order (stable: ties keep table order; a missing rank,
        stream or start last); None when the rows are in that order already.
    starts : ndarray
        Where each (rank, stream) lane begins, in that order (the first is 0). Tasks of
        one rank without a stream make one lane, as ``groupby(dropna=False)`` has it.
    unknown : ndarray or None
        The rows (in that order) without a rank or a stream; None when every row has both.
    """

    positions: np.ndarray | None
    starts: np.ndarray
    unknown: np.ndarray | None

    def take(self, values: Any) -> Any:
        """``values`` (one per scope row, in table order) in lane order."""
        return values if self.positions is None else values[self.positions]

    def lane_start(self, n: int) -> np.ndarray:
        """Whether each of the ``n`` rows begins a lane."""
        out = np.zeros(n, dtype=bool)
        out[self.starts] = True
        return out

    def continues(self, n: int) -> np.ndarray:
        """Whether each row is on the lane of the row before, both with a known rank and
        stream (a task without a stream never continues another)."""
        out = ~self.lane_start(n)
        if self.unknown is not None:  # the row before is then unknown too, or another lane
            out &= ~self.unknown
        return out


def scope_lanes(kernels: pd.DataFrame, include_communication: bool = False) -> Lanes:
    """:class:`Lanes` of :func:`tasks_in_scope`'s rows, once per :func:`shared_results`
    block.

    The rank and stream of each task are one 16-bit code where they span few values
    (:func:`~perfkit.analysis._order.group_code16`), sorted with the start times by one
    stable radix sort (:func:`~perfkit.analysis._order.order_by_group`): the order of
    ``sort_values(["rank", "stream", "start_us"], kind="mergesort")``.
    """
    def lanes() -> Lanes:
        k = tasks_in_scope(kernels, include_communication, ("rank", "stream", "start_us"),
                           pmu=False)
        keys = [c for c in ("rank", "stream") if c in k.columns]
        code = group_code16(k, keys) if keys else np.zeros(len(k), dtype=np.uint16)
        if code is None:  # too many ranks and streams for 16 bits
            code = group_codes(k, keys)[0]
        start = k["start_us"].to_numpy(np.float64, na_value=np.nan)
        order = order_by_group(code, start)
        grouped = code if order is None else code[order]
        starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]]) if len(grouped) \
            else np.zeros(0, dtype=np.int64)
        unknown = np.ones(len(k), dtype=bool) if "stream" not in k.columns else None
        for c in keys:
            missing = k[c].isna().to_numpy(bool)
            if missing.any():
                unknown = missing if unknown is None else unknown | missing
        if unknown is not None and order is not None:
            unknown = unknown[order]
        return Lanes(order, starts, unknown)

    return shared("scope_lanes", (kernels,), (include_communication,), lanes)


def scope_rows(kernels: pd.DataFrame, include_communication: bool) -> np.ndarray | None:
    """The mask of :func:`tasks_in_scope`'s rows (None: every task), once per block."""
    return shared("scope_rows", (kernels,), (include_communication,),
                  lambda: _scope_rows(kernels, include_communication))


def _scope_rows(kernels: pd.DataFrame, include_communication: bool) -> np.ndarray | None:
    """Mask of the tasks in scope; None when every task is.

    In scope: a duration, not communication (unless included), and a step where other
    tasks have one (:func:`~._util.step_rows`, the tasks :func:`~._util.in_steps` keeps):
    the operator analyses' figures are summed over the steps, and a task launched before
    the trace began belongs to none.
    """
    keep = kernels["dur_us"].notna().to_numpy(bool) if "dur_us" in kernels.columns else \
        np.ones(len(kernels), dtype=bool)
    if not include_communication and "category" in kernels.columns:
        keep = keep & kernels["category"].ne("communication").fillna(True).to_numpy(bool)
    stepped = step_rows(kernels)
    if stepped is not None:
        keep = keep & stepped
    return None if keep.all() else keep
