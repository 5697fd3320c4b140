"""The tasks the operator analyses read: in scope, typed, in stream order.

:func:`_scope` takes the tasks with a duration (and, unless asked, not communication) with
only the columns an analysis reads (:data:`_USED`, or :data:`_LANES` for the analyses of
task sequences); :func:`_lanes` puts them in (rank, stream, start) order and says where
each lane begins; :func:`_effective_type` is each task's operator type, the shared
kernel class for GPU tasks of the generic type ``kernel``. Each is worked out once per
:func:`~perfkit.analysis._shared.shared_results` block.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from .._shared import shared
from .._tasks import Lanes, scope_lanes, tasks_in_scope
from .._util import group_codes, nan_as_zero, one_value
from ..compare import kernel_class

__all__: list[str] = []  # private to the operator analyses


_GENERIC_TYPES = ("kernel", "gpu_memcpy", "gpu_memset", "")

#: The operator type of the GPU's copies and fills (Kineto ``gpu_memcpy`` / ``gpu_memset``,
#: of either schema): their own groups, of category ``memory``, apart from the copy
#: *kernels* (``direct_copy_kernel``, ``CatArrayBatchedCopy``, a HIP transpose) that the
#: shared class ``copy`` holds, of category ``compute``.
_MEMORY_TYPES = {"gpu_memcpy": "memcpy", "gpu_memset": "memset"}

_USED = ("rank", "step", "name", "type", "category", "core", "stream", "start_us", "dur_us",
         "input_shapes")

#: What the analyses of task sequences read (tiny kernels, unfused patterns, attention
#: directions): no core, shapes or PMU ratios, which a million tasks would copy for nothing.
_LANES = ("rank", "step", "name", "type", "category", "stream", "start_us", "dur_us")


def _scope(kernels: pd.DataFrame, include_communication: bool,
           columns: tuple[str, ...] = _USED) -> pd.DataFrame:
    """The tasks in scope, with only the columns the analyses read.

    Tasks with a duration (and, unless ``include_communication``, not communication),
    taken out in one pass (:func:`tasks_in_scope`); the PMU ratios too, except with
    ``columns`` :data:`_LANES`, whose readers read the names and categories by code or
    compare them with one value (categoricals where the table's row ids are known). The
    same frame for the same columns within a block.
    """
    lanes = columns == _LANES
    return shared("scope", (kernels,), (include_communication, columns),
                  lambda: tasks_in_scope(kernels, include_communication, columns,
                                         pmu=not lanes,
                                         coded=("name", "category") if lanes else ()))


class _ByRank:
    """Per-rank counts, sums and maxima over the rows of a frame with a ``rank`` column.

    The ranks present in the order ``frame.groupby("rank", dropna=False)`` gives them
    (:func:`~perfkit.analysis._util.group_codes`, a missing rank last) are ``index``; a
    reduction returns one value per rank in that order. A frame of one rank (every rank's
    own table) is reduced directly, without a code per row.
    """

    def __init__(self, frame: pd.DataFrame, order: np.ndarray | None = None) -> None:
        rank = frame["rank"]
        self.n_rows = len(frame)
        if one_value(rank):
            self.code = None
            self.index = pd.Index(rank.array[:1], name="rank")
            return
        self.code, self.index = group_codes(frame, ["rank"])
        self.n_codes = int(self.code.max()) + 1 if len(self.code) else 0
        self.present = np.flatnonzero(np.bincount(self.code, minlength=self.n_codes))
        if order is not None:  # rows counted by their place in that order
            self.code = self.code[order]

    def _codes(self, rows: np.ndarray | None) -> np.ndarray:
        return self.code if rows is None else self.code[rows]

    def count(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Rows per rank (``rows``: positions or a mask of the rows counted)."""
        if self.code is None:
            n = self.n_rows if rows is None else (
                int(np.count_nonzero(rows)) if rows.dtype == bool else len(rows))
            return np.array([n], dtype=np.int64)
        return np.bincount(self._codes(rows), minlength=self.n_codes)[self.present]

    def sum(self, values: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Sum of ``values`` (one per row counted) per rank, NaN left out."""
        if self.code is None:
            return np.array([np.nansum(values)], dtype=np.float64)
        return np.bincount(self._codes(rows), nan_as_zero(values),
                           self.n_codes)[self.present]

    def max(self, values: np.ndarray, rows: np.ndarray | None = None, initial: int = 0
            ) -> np.ndarray:
        """Largest of ``values`` per rank (integers), ``initial`` for a rank without any."""
        if self.code is None:
            return np.array([max(initial, int(values.max()) if len(values) else initial)],
                            dtype=np.int64)
        out = np.full(self.n_codes, initial, dtype=np.int64)
        np.maximum.at(out, self._codes(rows), values)
        return out[self.present]


def _by_rank(frame: pd.DataFrame, lanes: Lanes | None = None) -> _ByRank:
    """:class:`_ByRank` of ``frame``, once per :func:`shared_results` block; with
    ``lanes`` (of ``frame``'s rows), of its rows in lane order."""
    order = None if lanes is None else lanes.positions
    return shared("by_rank", (frame,), (order is not None,),
                  lambda: _ByRank(frame, order))


def _lanes(kernels: pd.DataFrame) -> Lanes:
    """The lanes of the tasks in scope of ``kernels``, communication left out
    (:func:`~perfkit.analysis._tasks.scope_lanes`)."""
    return scope_lanes(kernels, include_communication=False)


def _effective_type(k: pd.DataFrame) -> pd.Series:
    """Operator type; GPU kernels (generic type ``kernel``) get their shared class, GPU
    copies and fills their own type (:data:`_MEMORY_TYPES`).

    A group of one type then holds tasks of one category: were a ``Memcpy DtoD`` classed
    ``copy`` with the copy kernels, the group's category would be whichever task came
    first in the trace (``memory`` on one trace, ``compute`` on the next).
    """
    typ = k["type"].astype(TEXT) if "type" in k.columns else \
        pd.Series(pd.NA, index=k.index, dtype=TEXT)
    low = typ.str.lower()
    generic = typ.isna() | low.isin(list(_GENERIC_TYPES)).fillna(True)
    if not generic.any():
        return typ
    cls = shared("kernel_class", (k,), (), lambda: kernel_class(
        k["name"], None, k.get("category"))).astype(TEXT)
    comm = k["category"].eq("communication").fillna(False).to_numpy(bool) \
        if "category" in k.columns else np.zeros(len(k), dtype=bool)
    memory = low.map(_MEMORY_TYPES, na_action="ignore").astype(TEXT)
    # a communication task stays ``communication`` whatever its kind
    cls = memory.where(memory.notna() & ~comm, cls)
    has_type = typ.notna() & ~generic
    # Ascend tasks without a type (trace_view) keep their name; GPU tasks get a class
    fallback = cls.where(typ.notna(), k["name"].astype(TEXT))
    return typ.where(has_type, fallback)
