"""Helpers shared by the analyses: safe table access, notes, typed results, row selection,
group codes and robust scores.

Nothing here knows a file format; everything works on the canonical tables of
:mod:`perfkit.io.schema`. Results shared within a block are in :mod:`._shared`, interval
unions in :mod:`._intervals`, the device tasks in scope in :mod:`._tasks`.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .. import _text_codes
from ..format import runs_text
from ._frames import distinct, is_lazy_frame
from ._shared import shared, shared_factorize

__all__ = ["table", "in_steps", "step_rows", "no_step_note", "noted_no_step",
           "steps_anywhere", "with_steps_elsewhere", "STEPS_ELSEWHERE",
           "ranks_noted_no_step", "without_no_step_note", "empty_frame", "add_note",
           "notes_of", "has_values",
           "robust_z", "MAD_TO_SIGMA", "n_step_pairs", "one_value", "value_changes",
           "group_changes", "group_codes", "nan_as_zero", "take_rows", "with_columns",
           "typed", "take_array", "text_matches"]

#: Whether pandas copies data shared between frames only when one of them is written
#: (always from pandas 3 on).
_COPY_ON_WRITE = int(pd.__version__.split(".")[0]) >= 3
#: Scale that turns a median absolute deviation into a standard deviation (normal data).
MAD_TO_SIGMA = 1.4826


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

    A row without a step (a task launched before the trace began) is not a step of its
    own when other rows have one (:func:`in_steps`). ``kernels`` may be a lazy (Dask)
    table: each partition is deduplicated where it lies.
    """
    cols = [c for c in ("rank", "step") if c in kernels.columns]
    if not cols:
        return 1
    if is_lazy_frame(kernels):
        pairs = distinct(kernels, cols)
        if "step" in cols and pairs["step"].notna().any():  # as below: no step of its own
            pairs = pairs[pairs["step"].notna()]
        return max(1, len(pairs))
    if kernels.empty:
        return 1
    if "step" in cols:
        stepped = kernels["step"].notna().to_numpy(bool)
        if stepped.any() and not stepped.all():
            kernels = kernels[stepped]
    # a key of one value throughout (one rank, one step) does not divide the pairs
    cols = [c for c in cols if not one_value(kernels[c])]
    if not cols:
        return 1
    try:
        return max(1, len(group_codes(kernels, cols)[1]))
    except OverflowError:
        return max(1, int(kernels[cols].drop_duplicates().shape[0]))


def in_steps(kernels: pd.DataFrame) -> pd.DataFrame:
    """The tasks of the recorded steps, for figures per step.

    A task without a step (launched before the trace began, or outside every step span:
    the Kineto reader's note counts them) belongs to no step: where other tasks have one,
    it is left out, with a note (:func:`no_step_note`), so that a per-step figure is over
    the steps' own tasks as the step breakdown is. ``kernels`` is returned as it is when
    every task, or none, has a step. A lazy table keeps each rank's tasks with a step
    where it lies, under the same rule over the whole cluster (:func:`steps_anywhere`: a
    rank with no step at all is left out where another rank has steps), without a note:
    :func:`no_step_note` counts them when asked.
    """
    if is_lazy_frame(kernels):
        return kernels.map_partitions(_stepped_part, steps_anywhere(kernels),
                                      meta=kernels._meta)
    stepped = step_rows(kernels)
    if stepped is None:
        return kernels
    out = kernels[stepped]
    out.attrs = {k: copy.copy(v) for k, v in kernels.attrs.items()}
    return add_note(out, no_step_note(kernels))


def _stepped_part(kernels: pd.DataFrame, anywhere: bool = False) -> pd.DataFrame:
    """The tasks with a step of one rank's partition of a lazy table (all, where every
    task has one, or none has and no rank of the cluster has one: ``anywhere``)."""
    stepped = step_rows(with_steps_elsewhere(kernels, anywhere))
    return kernels if stepped is None else kernels[stepped]


#: The key of ``DataFrame.attrs`` that says a table is one rank of a cluster where some
#: rank's tasks have a step (:func:`with_steps_elsewhere`).
STEPS_ELSEWHERE = "perfkit_steps_elsewhere"


def with_steps_elsewhere(kernels: pd.DataFrame, anywhere: bool) -> pd.DataFrame:
    """``kernels`` (one rank's tasks) marked as part of a cluster where a task has a step
    (``anywhere``: :func:`steps_anywhere` of the cluster), so that :func:`step_rows`
    leaves all of them out when none of them has a step, as :func:`in_steps` does on the
    whole table of an eager cluster. A shallow copy: a rank's table may be shared.
    """
    if not anywhere or kernels.attrs.get(STEPS_ELSEWHERE):
        return kernels
    out = kernels.copy(deep=False)
    out.attrs = {**kernels.attrs, STEPS_ELSEWHERE: True}
    return out


#: :func:`steps_anywhere` of the lazy tables already asked, by their Dask name.
_ANYWHERE: dict[str, bool] = {}


def steps_anywhere(kernels: Any) -> bool:
    """Whether some task of ``kernels`` has a step: the rule :func:`in_steps` applies to
    the whole table (tasks of no step are left out where a task has one).

    A lazy (Dask) table is asked once (one small reduction of its ``step`` column on the
    workers), then remembered by its name, so that every rank-by-rank analysis of a lazy
    cluster decides as the eager cluster does, not each rank alone.
    """
    if kernels is None or "step" not in kernels.columns:
        return False
    if not is_lazy_frame(kernels):
        return has_values(kernels, "step")
    name = str(getattr(kernels, "_name", ""))
    if name not in _ANYWHERE:
        if len(_ANYWHERE) > 256:
            _ANYWHERE.clear()
        _ANYWHERE[name] = bool(kernels["step"].notnull().any().compute())
    return _ANYWHERE[name]


def step_rows(kernels: pd.DataFrame) -> np.ndarray | None:
    """Mask of the tasks :func:`in_steps` keeps: those with a step; None when it keeps
    every task (every task, or none, has a step; no ``step`` column; a lazy table).

    A rank of a lazy cluster marked by :func:`with_steps_elsewhere` keeps none of its
    tasks when none has a step (another rank has steps). Once per
    :func:`~._shared.shared_results` block. A step column with no missing
    value (every task of a fully recorded run) is told from its missing count alone:
    no mask of a million tasks is built.
    """
    if is_lazy_frame(kernels) or "step" not in kernels.columns or kernels.empty:
        return None

    def compute() -> np.ndarray | None:
        step = kernels["step"]
        if not _has_missing(step):
            return None
        stepped = step.notna().to_numpy(bool)
        return stepped if stepped.any() or kernels.attrs.get(STEPS_ELSEWHERE) else None

    return shared("step_rows", (kernels,), (), compute)


def _has_missing(values: pd.Series) -> bool:
    """Whether a column holds a missing value; an Arrow column's null count, a masked
    column's mask, else ``hasnans``."""
    arr = values.array
    data = getattr(arr, "_pa_array", None)
    if data is not None:
        return bool(data.null_count)
    mask = getattr(arr, "_mask", None)
    if isinstance(mask, np.ndarray):
        return bool(mask.any())
    return bool(values.hasnans)


def no_step_note(kernels: Any) -> str:
    """The note of the tasks :func:`in_steps` leaves out of ``kernels`` ("" when none):
    how many, and why they belong to no step.

    Where ``kernels`` holds several ranks, the ranks whose tasks are left out are named
    (``"1018 device tasks of no step on ranks 0–1 (...)"``). A lazy (Dask) table is
    counted rank by rank where each rank lies, under the cluster's rule
    (:func:`steps_anywhere`), as the lazy analyses leave each rank's tasks of no step out
    (:func:`~._tasks.scope_rows` on its partition): a lazy cluster gets the note the
    eager one gets.
    """
    counts = _no_step_by_rank(kernels)
    n_out = int(counts.sum())
    if not n_out:
        return ""
    ranks = [int(r) for r in counts.index if not pd.isna(r)]
    several = (kernels.npartitions > 1 if is_lazy_frame(kernels)
               else "rank" in kernels.columns and not one_value(kernels["rank"]))
    where = ""
    if several and ranks:
        where = f" on rank{'s' if len(ranks) != 1 else ''} {runs_text(ranks)}"
    return (f"{n_out} device task{'s' if n_out != 1 else ''} of no step{where} (launched "
            "before the trace began or outside every step) left out of the figures per step")


def _no_step_by_rank(kernels: Any) -> pd.Series:
    """How many tasks of ``kernels`` :func:`in_steps` leaves out, per rank (index: the
    rank, NA for a task without one; empty when none is left out)."""
    if is_lazy_frame(kernels):
        if "step" not in kernels.columns:
            return pd.Series(dtype="int64")
        cols = [c for c in ("rank", "step") if c in kernels.columns]
        meta = _partition_no_step(kernels._meta[cols])
        found = kernels[cols].map_partitions(_partition_no_step, steps_anywhere(kernels),
                                             meta=meta).compute()
        return found.groupby(level=0, dropna=False, sort=True).sum()
    return _partition_no_step(kernels)


def _partition_no_step(kernels: pd.DataFrame, anywhere: bool = False) -> pd.Series:
    """:func:`_no_step_by_rank` of a table in memory (one rank's partition, or all;
    ``anywhere``: a task of the partition's cluster has a step)."""
    stepped = step_rows(with_steps_elsewhere(kernels, anywhere))
    if stepped is None:
        return pd.Series(dtype="int64")
    if "rank" not in kernels.columns:
        return pd.Series([len(stepped) - int(np.count_nonzero(stepped))], index=[pd.NA],
                         dtype="int64")
    left = kernels["rank"].to_numpy(np.float64, na_value=np.nan)[~stepped]
    return pd.Series(left).value_counts(dropna=False, sort=False).sort_index().astype("int64")


#: The start of every note :func:`no_step_note` writes (whatever the count and ranks).
_NO_STEP = re.compile(r"\d+ device tasks? of no step\b")


def noted_no_step(frame: pd.DataFrame, kernels: Any) -> pd.DataFrame:
    """``frame`` with :func:`no_step_note` of ``kernels`` added, where tasks were left out
    (an analysis over the tasks in scope, :func:`~._tasks.scope_rows`)."""
    note = no_step_note(kernels)
    return add_note(frame, note) if note else frame


def ranks_noted_no_step(frame: pd.DataFrame, kernels: Any) -> pd.DataFrame:
    """A lazy cluster's analysis put together from its ranks' results
    (:func:`~._frames.per_rank`), with the cluster's note of the tasks of no step.

    Each rank's result notes its own tasks of no step (:func:`noted_no_step` on that rank
    alone); put together they would say one rank's count. Those notes give way to
    :func:`no_step_note` of the cluster's ``kernels``: every rank's tasks counted and the
    ranks named, as the eager analysis of the cluster writes it. A frame without such a
    note (no rank left a task out) is returned as it is.
    """
    notes = notes_of(frame)
    if not any(_NO_STEP.match(n) for n in notes):
        return frame
    frame.attrs["notes"] = [n for n in notes if not _NO_STEP.match(n)]
    return noted_no_step(frame, kernels)


def without_no_step_note(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` without the notes of tasks of no step its ranks wrote (a lazy cluster's
    analysis that found nothing, whose eager counterpart notes none)."""
    frame.attrs["notes"] = [n for n in notes_of(frame) if not _NO_STEP.match(n)]
    return frame


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
