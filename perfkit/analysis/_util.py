"""Helpers shared by the analyses: safe table access, notes, interval unions, robust scores.

Nothing here knows a file format; everything works on the canonical tables of
:mod:`perfkit.io.schema`.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .. import _text_codes
from ._frames import distinct, is_lazy_frame
from ._order import _group_cummax, group_code16, group_median, order_by_group, stable_order

__all__ = ["table", "empty_frame", "add_note", "notes_of", "has_values", "interval_union",
           "robust_z", "MAD_TO_SIGMA", "n_step_pairs", "one_value", "shared_results", "shared",
           "value_changes", "group_changes", "group_codes", "tasks_in_scope", "scope_rows",
           "scope_lanes", "Lanes", "categorical_of", "nan_as_zero",
           "take_rows", "with_columns", "typed", "take_array", "PMU_RATIOS", "PMU_COMPUTE",
           "PMU_MEMORY", "pmu_maxima", "shared_factorize", "text_matches",
           "union_parts", "IntervalUnion", "stable_order", "group_median"]

#: Whether pandas copies data shared between frames only when one of them is written
#: (always from pandas 3 on).
_COPY_ON_WRITE = int(pd.__version__.split(".")[0]) >= 3
#: Scale that turns a median absolute deviation into a standard deviation (normal data).
MAD_TO_SIGMA = 1.4826


class _Memo:
    """The results of one :func:`shared_results` block, each computed once.

    The advisor computes some analyses ahead on a second thread, so two threads may ask
    for the same result: each result has its own lock, and a thread that asks for a
    result another one is computing waits for it instead of computing it again. Results
    nest (the tasks in scope are taken inside the operator costs), and two threads could
    only wait on each other in a circle if some result needed itself, which would recurse
    forever on one thread too.
    """

    def __init__(self) -> None:
        self.results: dict[tuple[Any, ...], tuple[tuple[Any, ...], Any]] = {}
        self._locks: dict[tuple[Any, ...], threading.RLock] = {}
        self._guard = threading.Lock()

    def lock(self, key: tuple[Any, ...]) -> threading.RLock:
        """The lock of one result (made the first time it is asked for)."""
        with self._guard:
            found = self._locks.get(key)
            if found is None:
                found = self._locks[key] = threading.RLock()
            return found


_SHARED: ContextVar[_Memo | None] = ContextVar("perfkit_shared_results", default=None)


@contextmanager
def shared_results() -> Iterator[None]:
    """Within this block, intermediate tables the analyses share are computed once.

    The advisor runs a dozen analyses over the same profile; several of them start from
    the same intermediate table (the device tasks in scope, the priced operator calls).
    Inside the block each is computed the first time and served from memory afterwards;
    outside it nothing is kept (results are the same either way). A thread started
    inside the block shares it when it runs in a copy of the block's context
    (``contextvars.copy_context().run``); the block must outlive such threads.
    """
    token = _SHARED.set(_Memo())
    try:
        yield
    finally:
        _SHARED.reset(token)


def shared(name: str, inputs: tuple[Any, ...], params: tuple[Any, ...],
           compute: Callable[[], Any]) -> Any:
    """``compute()``, or its result for the same ``inputs`` within :func:`shared_results`.

    ``inputs`` are the objects (profiles, tables) the result is derived from, matched by
    identity and kept alive with the result; ``params`` are compared by value. The same
    object is handed to every caller: callers must not change it in place (``assign``
    makes a new frame). Safe to call from several threads of one block.
    """
    memo = _SHARED.get()
    if memo is None:
        return compute()
    key = (name, tuple(id(o) for o in inputs), params)
    with memo.lock(key):
        hit = memo.results.get(key)
        if hit is None or any(a is not b for a, b in zip(hit[0], inputs, strict=True)):
            hit = (inputs, compute())
            memo.results[key] = hit
    return hit[1]


def shared_factorize(values: pd.Series | Any, use_na_sentinel: bool = True
                     ) -> tuple[np.ndarray, Any]:
    """``pd.factorize(values, use_na_sentinel=...)``, once per Arrow column in a block.

    Within :func:`shared_results`, an Arrow-backed column that several analyses code
    (the type and name of the tasks in scope) is hashed once: Arrow data cannot change,
    and the same data object survives column selection, ``assign``, ``reset_index`` and
    ``astype`` to its own dtype. A column whose row ids are known (a table read from the
    cache, and the rows selected from it: :mod:`perfkit._text_codes`) is coded from them
    instead of from its text, to the same result. Callers must not change the returned
    arrays in place.
    """
    arr = values.array if isinstance(values, pd.Series) else values
    if isinstance(arr, pd.Categorical) and pd.api.types.is_string_dtype(
            arr.categories.dtype):
        return _factorize_coded(values, arr, use_na_sentinel)
    data = getattr(arr, "_pa_array", None)
    if data is None:
        return pd.factorize(values, use_na_sentinel=use_na_sentinel)

    def code() -> tuple[np.ndarray, Any]:
        ids = _text_codes.ids_of(data)  # the row ids a cached table was stored with
        if ids is None:
            return pd.factorize(values, use_na_sentinel=False)
        return _text_codes.factorize(values, ids)

    codes, uniques = shared("factorize", (data,), (type(values), str(values.dtype)), code)
    if not use_na_sentinel or data.null_count == 0:
        return codes, uniques
    return _missing_as_sentinel(codes, uniques)


def _missing_as_sentinel(codes: np.ndarray, uniques: Any) -> tuple[np.ndarray, Any]:
    """``pd.factorize(use_na_sentinel=False)``'s result as with ``True``: the missing
    value's code becomes -1 and the codes after it close the gap (unchanged when no
    value is missing)."""
    missing = np.flatnonzero(pd.isna(np.asarray(uniques, dtype=object)))
    if not len(missing):
        return codes, uniques
    at = int(missing[0])
    return np.where(codes == at, -1, codes - (codes > at)), uniques.delete(at)


def _factorize_coded(values: pd.Series | Any, cat: pd.Categorical, use_na_sentinel: bool
                     ) -> tuple[np.ndarray, Any]:
    """:func:`shared_factorize` of text held as a categorical (:func:`tasks_in_scope`'s
    ``coded``): what ``pd.factorize`` gives for the same text as a text column."""
    def code() -> tuple[np.ndarray, Any]:
        n = len(cat.categories)
        raw = cat.codes
        ids = np.where(raw < 0, n, raw).astype(np.int64) if (raw < 0).any() else raw
        codes, first = _text_codes.first_appearance(ids)
        head = pd.array(cat.take(first), dtype=cat.categories.dtype)
        if isinstance(values, pd.Series):
            head = pd.Series(head)
        return codes, pd.factorize(head, use_na_sentinel=False)[1]

    # the categorical's own codes array identifies it (pandas keeps it as ``_ndarray``;
    # without it the column is coded again by each caller, to the same result)
    key = getattr(cat, "_ndarray", None)
    codes, uniques = shared("factorize", (key,), (type(values),), code) if key is not None \
        else code()
    return _missing_as_sentinel(codes, uniques) if use_na_sentinel else (codes, uniques)


def text_matches(values: pd.Series, pattern: str) -> pd.Series:
    """``values.astype("string").str.contains(pattern, regex=True)``, missing as False.

    The regex runs once per distinct value (a profile repeats a few hundred operator names
    over hundreds of thousands of rows) and the answers are spread back by code. A lazy
    (Dask) column is matched row by row.
    """
    text = values.astype("string")
    if is_lazy_frame(text):
        return text.str.contains(pattern, regex=True).fillna(False).astype(bool)
    codes, uniq = shared_factorize(text, use_na_sentinel=False)
    hit = pd.Series(uniq, dtype="string").str.contains(pattern, regex=True)
    return pd.Series(hit.fillna(False).to_numpy(bool)[codes], index=values.index)


def nan_as_zero(values: np.ndarray) -> np.ndarray:
    """``values`` with NaN as 0 for a sum that leaves missing values out (``nansum``, a
    groupby's ``sum``); infinities kept. The array itself when nothing is NaN."""
    missing = np.isnan(values)
    return np.where(missing, 0.0, values) if missing.any() else values


def typed(frame: pd.DataFrame, columns: Mapping[str, Any]) -> pd.DataFrame:
    """``frame[list(columns)].astype(columns)``, converting only the columns whose dtype
    differs from the one named.

    An analysis's result table is mostly of its documented types already; pandas'
    ``astype`` with a mapping converts every column it names all the same (about 1 ms per
    small table, a dozen tables per ``pk.advise``, all of it holding the interpreter lock).
    Here the dtypes are read once, a frame already in that column order is not selected
    again, and the columns that change are replaced one by one: about 0.05 ms where none
    changes. The result is the same either way: a new frame of ``columns`` in their order
    and types.
    """
    dtypes = dict(zip(frame.columns, frame.dtypes, strict=True))
    change = {c: d for c, d in columns.items() if dtypes[c] != _dtype(d)}
    # a frame of its own: pandas 3 copies shared data on write, pandas 2 must copy it now
    out = frame.copy(deep=not _COPY_ON_WRITE) if list(frame.columns) == list(columns) \
        else frame[list(columns)]
    return out.assign(**{c: out[c].astype(d) for c, d in change.items()}) if change else out


@functools.lru_cache(maxsize=256)
def _dtype(name: Any) -> Any:
    """``pandas_dtype(name)``, looked up once per name (``"Int64"``, ``"string"``)."""
    return pd.api.types.pandas_dtype(name)


def with_columns(frame: pd.DataFrame, **columns: Any) -> pd.DataFrame:
    """``frame.assign(**columns)``, each new numpy array kept as it is rather than copied.

    pandas 3 copies a numpy array handed to ``assign``; on a million rows each copy is
    8 MB of memory touched for the first time (page faults cost more than the copy). The
    arrays are wrapped as Series over the frame's index instead (``copy=False``): the
    caller hands over a fresh array and does not change it afterwards, nor puts the same
    array in two columns. Other values (Series, scalars, extension arrays) go to
    ``assign`` unchanged.
    """
    wrapped = {name: pd.Series(value, index=frame.index, copy=False)
               if isinstance(value, np.ndarray) and value.ndim == 1
               and len(value) == len(frame) else value
               for name, value in columns.items()}
    return frame.assign(**wrapped)


def take_rows(frame: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """``frame[rows]`` (boolean mask) or ``frame.take(rows)`` (positions), column by column.

    Gives the same frame (values, dtypes, index, attrs) as pandas' own indexing, faster
    on Arrow-backed text columns: pandas turns a mask into positions and checks them
    before Arrow's ``take``, which costs several times Arrow's own ``filter`` or
    ``take`` on a million rows; here each Arrow column is handed to Arrow directly.
    """
    rows = np.asarray(rows)
    is_mask = rows.dtype == bool
    if is_mask and len(rows) != len(frame):
        raise ValueError(f"mask of {len(rows)} rows for a frame of {len(frame)}")
    if not frame.columns.is_unique:
        return frame[rows] if is_mask else frame.take(rows)
    columns = {}
    for name in frame.columns:
        arr = frame[name].array
        if is_mask:
            columns[name] = _carried(arr, arr[rows], rows)
        else:
            columns[name] = take_array(arr, rows)
    index = frame.index[rows] if is_mask else frame.index.take(rows)
    return _frame_of(columns, index, frame.columns, frame.attrs)


def take_array(arr: Any, positions: np.ndarray) -> Any:
    """``arr.take(positions)`` (non-negative positions), straight to Arrow for Arrow arrays.

    pandas checks and converts the positions before calling Arrow's ``take``; on a million
    positions that costs several times the take itself. A few positions out of a column
    in several chunks (one per Parquet row group) are taken chunk by chunk: Arrow joins
    the chunks of a text column into one before each take.
    """
    positions = np.asarray(positions)
    if isinstance(arr, pd.arrays.ArrowExtensionArray) and len(positions) and \
            positions.min() >= 0:
        data = arr.__arrow_array__()
        if data.num_chunks > 1 and 8 * len(positions) < len(data) and \
                positions.max() < len(data):
            taken = type(arr)(pa.chunked_array([_take_by_chunk(data, positions)], data.type))
        else:
            taken = type(arr)(pc.take(data, positions))
        if taken.dtype == arr.dtype:
            return _carried(arr, taken, positions)
    return _carried(arr, arr.take(positions), positions)


def _carried(source: Any, taken: Any, rows: np.ndarray) -> Any:
    """``taken`` (``source`` at ``rows``), with the row ids of its text carried over."""
    data = getattr(source, "_pa_array", None)
    if data is not None:
        _text_codes.carry(data, getattr(taken, "_pa_array", None), rows)
    return taken


def _take_by_chunk(data: pa.ChunkedArray, positions: np.ndarray) -> pa.Array:
    """``data.take(positions)`` as one array, taking from each chunk the rows it holds."""
    lengths = np.fromiter((len(c) for c in data.chunks), np.int64, data.num_chunks)
    starts = np.r_[0, np.cumsum(lengths)[:-1]]
    chunk = np.searchsorted(starts, positions, side="right") - 1
    by_chunk = np.argsort(chunk, kind="stable")
    sorted_chunk = chunk[by_chunk]
    bounds = np.flatnonzero(np.r_[True, sorted_chunk[1:] != sorted_chunk[:-1], True])
    parts = [data.chunk(int(sorted_chunk[a])).take(
        pa.array(positions[by_chunk[a:b]] - starts[sorted_chunk[a]]))
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    back = np.empty_like(by_chunk)
    back[by_chunk] = np.arange(len(by_chunk))  # from chunk order back to the asked order
    return pa.concat_arrays(parts).take(pa.array(back))


def _frame_of(arrays: dict[Any, Any], index: pd.Index, columns: pd.Index,
              attrs: dict[str, Any]) -> pd.DataFrame:
    """A frame of ``arrays`` (dtypes kept, nothing copied) with ``columns`` and ``attrs``."""
    out = pd.DataFrame({name: pd.Series(values, index=index, dtype=values.dtype, copy=False)
                        for name, values in arrays.items()}, index=index, copy=False)
    out.columns = columns
    out.attrs = copy.deepcopy(attrs)
    return out


def table(obj: Any, name: str) -> pd.DataFrame:
    """Return canonical table ``name`` of a Profile/Cluster, or an empty frame.

    A provider error (a damaged file) is turned into an empty frame with an explanatory
    note in ``frame.attrs["notes"]`` so that one broken table never stops an analysis.
    """
    try:
        frame = getattr(obj, name)
    except Exception as exc:  # noqa: BLE001 - a broken table must not stop the analyses
        frame = pd.DataFrame()
        frame.attrs["notes"] = [f"table {name!r} could not be read: {exc}"]
        return frame
    if frame is None:
        return pd.DataFrame()
    return frame


def empty_frame(columns: dict[str, str] | Sequence[str], note: str | None = None
                ) -> pd.DataFrame:
    """Build an empty frame with the documented ``columns`` (name -> dtype, or names).

    Each set of columns is built once (a frame of a dozen typed columns takes pandas about
    2 ms) and copied from then on.
    """
    spec = tuple(columns.items()) if isinstance(columns, dict) else \
        tuple((c, "float64") for c in columns)
    frame = _empty_of(spec).copy()
    frame.attrs = {}
    if note:
        add_note(frame, note)
    return frame


@functools.lru_cache(maxsize=512)
def _empty_of(spec: tuple[tuple[str, Any], ...]) -> pd.DataFrame:
    """The empty frame of ``spec`` ((name, dtype) pairs); callers copy it."""
    return pd.DataFrame({c: pd.Series([], dtype=d) for c, d in spec})


def add_note(frame: pd.DataFrame, note: str) -> pd.DataFrame:
    """Append ``note`` to ``frame.attrs["notes"]`` (created when absent) and return it."""
    notes = list(frame.attrs.get("notes", []))
    if note not in notes:
        notes.append(note)
    frame.attrs["notes"] = notes
    return frame


def notes_of(frame: pd.DataFrame) -> list[str]:
    """Notes attached by :func:`add_note` (empty list when none)."""
    return list(frame.attrs.get("notes", []))


def has_values(frame: pd.DataFrame, column: str) -> bool:
    """Whether ``column`` exists in ``frame`` and holds at least one non-missing value.

    The first rows are looked at first: a column that has values nearly always has them
    there, and the answer is then known without a missing-value mask of every row (a
    million-row mask per question, some thirty questions per ``pk.advise``).
    """
    if column not in frame.columns:
        return False
    col = frame[column]
    if isinstance(col, pd.Series) and bool(col.iloc[:_HEAD_ROWS].notna().any()):
        return True
    return bool(col.notna().any())


#: Rows :func:`has_values` looks at before the whole column.
_HEAD_ROWS = 64


def interval_union(frame: pd.DataFrame, keys: Sequence[str], start: str = "start_us",
                   end: str = "end_us") -> pd.DataFrame:
    """Merge overlapping intervals per group; return the merged segments.

    Parameters
    ----------
    frame : DataFrame
        One row per interval with ``keys``, ``start`` and ``end`` columns; each interval
        ends at or after its start (callers clip negative durations).
    keys : sequence of str
        Group columns (for example ``["rank", "step"]``); intervals of different groups
        never merge.
    start, end : str
        Column names of the interval bounds.

    Returns
    -------
    DataFrame
        ``keys`` + ``start_us``, ``end_us``, ``length_us`` of each merged segment, sorted.
        Touching intervals (end == next start) are merged.
    """
    keys = list(keys)
    cols = [*keys, "start_us", "end_us", "length_us"]
    u = union_parts(frame, keys, start, end)
    if u is None:
        return pd.DataFrame({c: pd.Series([], dtype=frame[c].dtype if c in frame else "float64")
                             for c in cols})
    out = take_rows(frame[keys], u.rows_at(u.at)).reset_index(drop=True)
    out["start_us"] = u.start[u.at]
    out["end_us"] = u.segment_ends()
    out["length_us"] = out["end_us"] - out["start_us"]
    return out[cols]


@dataclasses.dataclass(frozen=True)
class IntervalUnion:
    """Intervals sorted by group, then start, and where their merged segments begin.

    :func:`union_parts` gives it; the arrays are in the sorted order.

    Attributes
    ----------
    rows : ndarray or None
        Position in the frame given of each sorted interval (None: the frame's own rows,
        already in order and each with both bounds).
    start : ndarray
        Each interval's start.
    reach : ndarray
        The latest end so far within the interval's group (its running maximum).
    first : ndarray
        Positions where each group begins.
    at : ndarray
        Positions where each merged segment begins (a group's first interval, or one that
        starts after every earlier end of its group; touching intervals merge).
    """

    rows: np.ndarray | None
    start: np.ndarray
    reach: np.ndarray
    first: np.ndarray
    at: np.ndarray

    def rows_at(self, positions: np.ndarray) -> np.ndarray:
        """Positions in the frame given of the sorted intervals at ``positions``."""
        return positions if self.rows is None else self.rows[positions]

    def segment_ends(self) -> np.ndarray:
        """The end of each merged segment: the reach of its last interval (intervals end
        at or after their start, so no earlier segment of the group reaches further)."""
        return self.reach[np.r_[self.at[1:], len(self.reach)] - 1]

    def group_ends(self) -> np.ndarray:
        """The latest end of each group (the reach of its last interval)."""
        return self.reach[np.r_[self.first[1:], len(self.reach)] - 1]


def union_parts(frame: pd.DataFrame, keys: Sequence[str], start: str = "start_us",
                end: str = "end_us", ends: np.ndarray | None = None) -> IntervalUnion | None:
    """The intervals of ``frame`` sorted per group (``keys``, missing last) then start, and
    their merged segments (:class:`IntervalUnion`); None when no interval has both bounds.

    ``ends``: the ends as an array the caller hands over (the ``end`` column is then not
    read), which becomes ``reach`` in place when the rows are in order: a million
    intervals in order are merged without a new array of their ends.
    """
    keys = list(keys)
    s = frame[start].to_numpy(np.float64, na_value=np.nan)
    e = frame[end].to_numpy(np.float64, na_value=np.nan) if ends is None else ends
    bounded = ~(np.isnan(s) | np.isnan(e))
    if not bounded.any():
        return None
    rows = None if bounded.all() else np.flatnonzero(bounded)
    key_cols = {k: frame[k] if rows is None else pd.Series(take_array(frame[k].array, rows))
                for k in keys}
    if rows is not None:
        s = s[rows]
        e = e[rows]
    order = stable_order(pd.DataFrame({**key_cols, "_s": s}, copy=False), [*keys, "_s"])
    if order is not None:
        rows = order if rows is None else rows[order]
        key_cols = {k: pd.Series(take_array(c.array, order)) for k, c in key_cols.items()}
        s = s[order]
        e = e[order]
    elif ends is None and rows is None:
        e = e.copy()  # the frame's own column: reach is worked out in place
    # groups are contiguous once sorted: a segment starts at a group's first interval or
    # where an interval starts after every earlier end of its group
    changes = group_changes(*key_cols.values()) if keys else None
    first = np.zeros(1, np.int64) if changes is None else np.r_[0, np.flatnonzero(changes) + 1]
    reach = _group_cummax(e, first)
    new_seg = np.empty(len(s), dtype=bool)
    new_seg[0] = True
    np.greater(s[1:], reach[:-1], out=new_seg[1:])
    new_seg[first] = True
    return IntervalUnion(rows, s, reach, first, np.flatnonzero(new_seg))


def group_changes(*columns: pd.Series) -> np.ndarray:
    """Whether row ``i + 1`` differs from row ``i`` in any of ``columns`` (length n - 1).

    Missing values equal each other and differ from every value, as in
    ``groupby(dropna=False)``; values are compared as they are (not as text).
    """
    n = len(columns[0]) if columns else 0
    out = np.zeros(max(n - 1, 0), dtype=bool)
    for col in columns:
        if pd.api.types.is_integer_dtype(col.dtype):  # values and missing marks as arrays
            mask = col.isna().to_numpy(bool)
            data = col.to_numpy(np.int64, na_value=0)
            out |= (mask[1:] != mask[:-1]) | (~mask[1:] & (data[1:] != data[:-1]))
        else:
            codes, _ = shared_factorize(col, use_na_sentinel=True)
            out |= codes[1:] != codes[:-1]
    return out


def group_codes(frame: pd.DataFrame, keys: Sequence[str]) -> tuple[np.ndarray, pd.Index]:
    """One integer per row for its ``keys`` group, and the groups' index.

    ``frame.groupby(codes).agg(...)`` followed by ``.set_axis(index)`` gives what
    ``frame.groupby(keys, dropna=False).agg(...)`` gives (groups sorted by key, missing
    values last, key dtypes kept), without hashing several nullable columns per row.

    Returns
    -------
    codes : ndarray of int64
        Group of each row; codes sort as the groups do.
    index : Index or MultiIndex
        The groups present, in code order (named by ``keys``).
    """
    keys = list(keys)
    code = np.zeros(len(frame), dtype=np.int64)
    levels = []
    span = 1
    for k in keys:
        part, uniq = _sorted_codes(frame[k])
        size = len(uniq) + 1  # the last slot is the missing value
        span *= size
        if span >= 2**62:
            raise OverflowError("too many key combinations to code")
        code *= size  # in place: no new array per key
        missing = part < 0
        code += np.where(missing, size - 1, part) if missing.any() else part
        levels.append((uniq, size))
    # the codes present, in order: counted when the code space is small, else sorted
    present = np.flatnonzero(np.bincount(code, minlength=1)) if span <= 4 * len(code) + 1024 \
        else np.unique(code)
    arrays, rest = [], present
    for uniq, size in reversed(levels):
        pos = rest % size
        rest = rest // size
        # ExtensionArray.take fills -1 with the dtype's missing value on every pandas 2 and
        # 3; Index.take(fill_value=None) does not fill on pandas 2 (it takes the last value)
        arrays.append(pd.Index(pd.Index(uniq).array.take(np.where(pos == size - 1, -1, pos),
                                                         allow_fill=True)))
    arrays.reverse()
    if len(keys) == 1:
        index = arrays[0].rename(keys[0])
    else:
        index = pd.MultiIndex.from_arrays(arrays, names=keys)
    return code, index


def _sorted_codes(col: pd.Series) -> tuple[np.ndarray, Any]:
    """``pd.factorize(col, sort=True)``; small integer ranges are coded by offset instead.

    Rank and step numbers span a few values: ``value - min`` codes them without hashing
    (values absent from the column keep their slot; :func:`group_codes` drops them).
    """
    if pd.api.types.is_integer_dtype(col.dtype) and len(col):
        missing = col.isna().to_numpy(bool)
        values = col.to_numpy(np.int64, na_value=0)  # no copy where nothing is missing
        any_missing = bool(missing.any())
        present = values[~missing] if any_missing else values
        if present.size and int(present.max()) - int(present.min()) < 4 * len(col) + 1024:
            low, high = int(present.min()), int(present.max())
            part = values - low  # the one new array of a million rows
            if any_missing:
                part[missing] = -1
            uniq = pd.array(np.arange(low, high + 1), dtype=col.dtype)
            return part, uniq
    return pd.factorize(col, sort=True, use_na_sentinel=True)


def robust_z(values: pd.Series, groups: pd.Series | None = None) -> pd.DataFrame:
    """Robust z-scores: ``(x - median) / sigma`` with sigma from the MAD.

    sigma is ``1.4826 * MAD``. When the MAD is zero (at least half the values are equal)
    the values equal to the median score 0 and every other value scores ±inf: it differs
    from the bulk of the group, however little (callers add a minimum relative excess).
    A mean-deviation fallback is deliberately not used: it would be inflated by the very
    outlier it is meant to expose.

    Returns
    -------
    DataFrame
        Columns ``median``, ``mad``, ``sigma``, ``z`` aligned with ``values``.
    """
    x = values.astype("float64")
    if groups is None:
        groups = pd.Series(0, index=x.index)
    g = x.groupby(groups, dropna=False)
    median = g.transform("median")
    dev = (x - median).abs()
    mad = dev.groupby(groups, dropna=False).transform("median")
    sigma = MAD_TO_SIGMA * mad
    diff = x - median
    with np.errstate(divide="ignore", invalid="ignore"):
        z = diff / sigma
    z = z.where(sigma > 0, np.where(diff == 0, 0.0, np.sign(diff) * np.inf))
    z = z.where(x.notna())
    return pd.DataFrame({"median": median, "mad": mad, "sigma": sigma, "z": z})


def n_step_pairs(kernels: Any) -> int:
    """Number of distinct (rank, step) pairs in a kernels-like table (at least 1).

    ``kernels`` may be a lazy (Dask) table: each partition is deduplicated where it lies.
    """
    cols = [c for c in ("rank", "step") if c in kernels.columns]
    if not cols:
        return 1
    if is_lazy_frame(kernels):
        return max(1, len(distinct(kernels, cols)))
    if kernels.empty:
        return 1
    # a key of one value throughout (one rank, one step) does not divide the pairs
    cols = [c for c in cols if not one_value(kernels[c])]
    if not cols:
        return 1
    try:
        return max(1, len(group_codes(kernels, cols)[1]))
    except OverflowError:
        return max(1, int(kernels[cols].drop_duplicates().shape[0]))


def one_value(col: pd.Series) -> bool:
    """Whether an integer column holds one value in every row (none missing).

    Read from its minimum and maximum, without coding the rows.
    """
    if not pd.api.types.is_integer_dtype(col.dtype) or col.isna().any():
        return False
    values = col.to_numpy(np.int64)  # no copy: nothing is missing
    return bool(values.min() == values.max())


def value_changes(*columns: pd.Series) -> np.ndarray:
    """Whether row ``i + 1`` differs from row ``i`` in any of ``columns`` (length n - 1).

    Values are compared as their text (``astype("string")``, missing as ``""``), as the
    lane labels ``"rank/stream"`` were, but by integer code: no string per row is built.
    """
    n = len(columns[0]) if columns else 0
    out = np.zeros(max(n - 1, 0), dtype=bool)
    for col in columns:
        if pd.api.types.is_integer_dtype(col.dtype):  # one text per integer: compared as is
            out |= group_changes(col)
            continue
        codes, _ = shared_factorize(col.astype("string").fillna(""), use_na_sentinel=True)
        out |= codes[1:] != codes[:-1]
    return out


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
    """Device tasks with a duration (and not communication, unless included).

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
    """Mask of the tasks in scope; None when every task is."""
    keep = kernels["dur_us"].notna().to_numpy(bool) if "dur_us" in kernels.columns else \
        np.ones(len(kernels), dtype=bool)
    if not include_communication and "category" in kernels.columns:
        keep = keep & kernels["category"].ne("communication").fillna(True).to_numpy(bool)
    return None if keep.all() else keep
