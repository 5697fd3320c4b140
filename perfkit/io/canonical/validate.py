"""Which times perfkit trusts: the plausibility rules for timestamps and durations, in one place.

Every loader runs its times through this module, so the rules are the same for every format
(``docs/errors.md`` explains them):

**Timestamps** (absolute nanoseconds while reading, then ``*_us`` instants relative to
``origin_ns``) are implausible when they are not finite, negative (absolute), or lie more
than :data:`WINDOW_NS` (7 days) from the *median* timestamp of the profile. A profiler
capture lasts seconds to hours, so a week on either side of its bulk is a generous bound;
what it rejects are garbled values: a timestamp cut short (``17364088`` instead of
``1736408883704643.212`` is off by 1.7e15 µs), a negative number, ``1e300``. The median
comes from the data itself, so the rule holds for epoch clocks and for clocks that start at
zero alike, and one bad value cannot move it.

**The origin** (``meta.origin_ns``) is the earliest *plausible* timestamp
(:func:`plausible_origin`); an implausible one never shifts the tables.

**Durations** are implausible when they are not finite, negative (below -1 ns, the
profilers' resolution, so float rounding of a derived ``0`` is not flagged), or longer than
``max(2 × span, 1 hour)`` (:func:`duration_bound_us`), ``span`` being the spread of the
profile's plausible timestamps. An event recorded in a capture started inside it; one that
lasts twice the whole capture would have had to run while almost nothing else was recorded.
The one-hour floor keeps real stalls of short captures (a hang at the end of a 2 s trace),
since below it a garbled number cannot be told from a real stall; the 1e18–1e30 µs values
a garbled field gives are far above it. Without any timestamp the bound is 7 days.

Implausible values become NA (never 0), and a note in ``meta.notes`` says how many, of which
column, from which file. Everything here is vectorised (numpy), so the checks cost a few
passes over each column.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...format import counted, plural

__all__ = ["WINDOW_NS", "MIN_DURATION_BOUND_US", "NEGATIVE_TOLERANCE_US", "INSTANT_COLUMNS",
           "DURATION_COLUMNS", "plausible_origin", "duration_bound_us", "clean_events",
           "clean_tables", "files_of_tables", "table_label"]

WINDOW_NS = 7 * 24 * 3600 * 10**9
"""Half-width of the plausible window around the median timestamp (7 days, in ns)."""

MIN_DURATION_BOUND_US = 3600e6
"""Floor of the duration bound (1 hour, in µs): no duration below it is called implausible."""

NEGATIVE_TOLERANCE_US = 1e-3
"""A duration below ``-NEGATIVE_TOLERANCE_US`` (-1 ns) is negative; above it, rounding."""

INSTANT_COLUMNS = ("start_us", "ts_us", "alloc_us", "release_us")
"""Columns of the canonical tables that hold instants (relative to ``origin_ns``)."""

DURATION_COLUMNS: dict[str, tuple[str, ...]] = {
    "kernels": ("dur_us", "wait_us"),
    "ops": ("dur_us", "device_dur_us"),
    "steps": ("computing_us", "communication_us", "comm_not_overlapped_us", "overlapped_us",
              "free_us", "bubble_us", "stage_us", "preparing_us",
              # legacy MindSpore: ascend_cluster_analyse's computation_time (computing and
              # idle together), and the step trace (step_trace_raw_{rank}_detail_time.csv)
              "computing_or_free_us", "total_us", "iteration_interval_us", "fp_and_bp_us",
              "tail_us"),
    "comm_ops": ("elapse_us", "transit_us", "wait_us", "sync_us", "idle_us"),
    "comm_bandwidth": ("transit_us",),
    "comm_matrix": ("time_us",),
    "op_memory": ("duration_us",),
}
"""Duration columns (µs) of each canonical table: never negative, never longer than the
bound."""

_NA_NS = np.iinfo(np.int64).min
_SAMPLE = 65536  # values per array used for the median (strided: spread over the file)
_WINDOW_US = WINDOW_NS / 1000.0


def _valid_ns(values: Any) -> np.ndarray:
    """Non-missing int64 nanoseconds of ``values`` (pyarrow, pandas or numpy)."""
    if values is None:
        return np.zeros(0, dtype=np.int64)
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
        if pa.types.is_integer(values.type):
            return pc.drop_null(values).to_numpy(zero_copy_only=False).astype(np.int64,
                                                                                copy=False)
        values = values.to_numpy(zero_copy_only=False)
    if isinstance(values, pd.Series):
        if values.dtype.kind in "iu":  # numpy or nullable (Int64) integers: exact
            return values.dropna().to_numpy(np.int64)
        values = pd.to_numeric(values, errors="coerce").to_numpy(np.float64, na_value=np.nan)
    arr = np.asarray(values)
    if arr.dtype.kind in "iu":
        arr = arr.astype(np.int64, copy=False)
        return arr[arr != _NA_NS]
    arr = arr.astype(np.float64, copy=False)
    arr = arr[np.isfinite(arr) & (np.abs(arr) < 9.2e18)]
    return arr.astype(np.int64)


def _median(parts: Iterable[np.ndarray]) -> float | None:
    sample = [p[:: max(1, len(p) // _SAMPLE)] for p in parts if len(p)]
    if not sample:
        return None
    return float(np.median(np.concatenate(sample)))


def plausible_origin(*arrays: Any) -> int | None:
    """Earliest plausible timestamp (int ns) over ``arrays``, or None when there is none.

    Parameters
    ----------
    *arrays : pyarrow, pandas or numpy arrays of int64 ns
        Absolute timestamps; nulls, NaN and the int64-min sentinel count as missing.

    Notes
    -----
    Plausible: ``>= 0`` and within :data:`WINDOW_NS` of the median of all the timestamps
    (see the module docstring).
    """
    parts = [_valid_ns(a) for a in arrays]
    parts = [p for p in parts if len(p)]
    med = _median(parts)
    if med is None:
        return None
    lo, hi = max(0.0, med - WINDOW_NS), med + WINDOW_NS
    best: int | None = None
    for p in parts:
        ok = p[(p >= lo) & (p <= hi)]
        if len(ok):
            m = int(ok.min())
            best = m if best is None else min(best, m)
    return best


def duration_bound_us(span_us: float | None) -> float:
    """Longest plausible duration (µs) in a profile whose timestamps spread over ``span_us``.

    ``max(2 × span, 1 hour)``; 7 days when the span is unknown.
    """
    if span_us is None or not np.isfinite(span_us):
        return _WINDOW_US
    return max(2.0 * float(span_us), MIN_DURATION_BOUND_US)


def _bad_durations(v: np.ndarray, bound: float) -> tuple[np.ndarray, np.ndarray]:
    """(negative or infinite, implausibly long) masks of a float array."""
    with np.errstate(invalid="ignore"):
        neg = (v < -NEGATIVE_TOLERANCE_US) | np.isneginf(v)
        big = (v > bound) | np.isposinf(v)
    return neg, big


def clean_events(x: pd.DataFrame, *extra_ts: pd.DataFrame) -> list[str]:
    """Validate the decoded events of a Chrome trace in place; return notes.

    ``x`` has ``ts_ns`` (int64, :data:`_NA_NS` when missing) and ``dur_us`` (float);
    ``extra_ts`` are the trace's other event frames (flows, instants) whose ``ts_ns`` are
    checked against the same window. Implausible timestamps become the missing sentinel,
    implausible durations NaN; missing durations are counted in a note.
    """
    notes: list[str] = []
    if not len(x) or "ts_ns" not in x:
        return notes
    frames = [f for f in (x, *extra_ts) if len(f) and "ts_ns" in f]
    ts_all = [f["ts_ns"].to_numpy() for f in frames]
    unread = int((ts_all[0] == _NA_NS).sum())  # x: missing, or not a number
    med = _median([t[t != _NA_NS] for t in ts_all])
    bad_ts = 0
    lo = hi = None
    if med is not None:
        lo, hi = max(0.0, med - WINDOW_NS), med + WINDOW_NS
        for f, t in zip(frames, ts_all, strict=True):
            bad = (t != _NA_NS) & ((t < lo) | (t > hi))
            n = int(bad.sum())
            if n:
                f["ts_ns"] = np.where(bad, _NA_NS, t)
                bad_ts += n
    if bad_ts:
        notes.append(f"{counted(bad_ts, 'event timestamp')} far outside the trace's time "
                     "window "
                     "(more than 7 days from its median, or negative) set to NA")
    if unread:
        notes.append(f"{counted(unread, 'complete event')} (ph 'X') without a readable "
                     "timestamp (ts): "
                     "kept with start NA")
    if "dur_us" not in x:
        return notes
    ts = x["ts_ns"].to_numpy()
    valid = ts[ts != _NA_NS]
    span = (float(valid.max() - valid.min()) / 1000.0) if len(valid) else None
    dur = x["dur_us"].to_numpy(np.float64)
    neg, big = _bad_durations(dur, duration_bound_us(span))
    n_neg, n_big = int(neg.sum()), int(big.sum())
    if n_neg or n_big:
        x["dur_us"] = np.where(neg | big, np.nan, dur)
        notes.append(_dur_note("events", n_neg, n_big, duration_bound_us(span)))
    missing = int(np.isnan(dur).sum())
    if missing:
        notes.append(f"{counted(missing, 'complete event')} (ph 'X') without a duration "
                     "(dur): "
                     "kept with duration NA")
    return notes


def _dur_note(what: str, n_neg: int, n_big: int, bound: float) -> str:
    parts = []
    if n_neg:
        parts.append(f"{n_neg} negative")
    if n_big:
        parts.append(f"{n_big} implausibly long (> {bound / 1e6:,.0f} s, twice the "
                     "profile's time span or 1 hour)")
    return f"{' and '.join(parts)} {what} {plural(n_neg + n_big, 'duration')} set to NA"


def _float(frame: pd.DataFrame, col: str) -> np.ndarray:
    s = frame[col]
    if s.dtype.kind == "f":
        return s.to_numpy(np.float64)
    return pd.to_numeric(s, errors="coerce").to_numpy(np.float64, na_value=np.nan)


def files_of_tables(files: Mapping[str, Any] | None, base: str = "") -> dict[str, list[str]]:
    """The file or files each table was read from, as the notes name them.

    Parameters
    ----------
    files : mapping, optional
        Table name -> the file (or list of files) a loader read it from
        (``meta.extra["table_files"]`` as the loader wrote it).
    base : str, optional
        Folder the files are shown relative to (the profile's path); a file outside it
        keeps its whole path.

    Returns
    -------
    dict of str to list of str
        ``{"memory": ["ASCEND_PROFILER_OUTPUT/memory_record.csv"], ...}``, JSON-able, for
        ``meta.extra["table_files"]``: a note led by a file's name (``"memory_record.csv
        Timestamp(us): …"``) is then known to be about the tables that file fed.
    """
    out: dict[str, list[str]] = {}
    for table, f in (files or {}).items():
        if not f:
            continue
        shown = []
        for one in [f] if isinstance(f, (str, os.PathLike)) else list(f):
            text = str(one)
            if base:
                try:
                    rel = os.path.relpath(text, base)
                except ValueError:
                    rel = text
                text = text if rel.startswith("..") or rel == "." else rel
            shown.append(text)
        out[str(table)] = shown
    return out


def table_label(table: str, files: Mapping[str, Any], base: str) -> str:
    """How a note names ``table``: ``"kernels (path/of/its/file)"`` (relative to ``base``),
    or the table's name alone when its file is not known; the loaders' checks share it."""
    shown = files_of_tables({table: files.get(table)}, base).get(table)
    return f"{table} ({' and '.join(shown)})" if shown else table


def _where(frame: pd.DataFrame, bad: np.ndarray, limit: int = 3) -> str:
    """`` (step 3, 7)`` for a table with a step column and few bad rows, else ``""``."""
    n = int(bad.sum())
    if "step" not in frame.columns or not 0 < n <= limit:
        return ""
    steps = pd.to_numeric(frame["step"], errors="coerce").to_numpy(np.float64,
                                                                   na_value=np.nan)[bad]
    shown = ", ".join("?" if not np.isfinite(x) else f"{x:g}" for x in steps)
    return f" (step {shown})"


def _names(frame: pd.DataFrame, bad: np.ndarray, limit: int = 3) -> str:
    """`` of 'MatMul_1', 'Add_2'`` (the rows' names, when few), else ``""``."""
    n = int(bad.sum())
    if "name" not in frame.columns or not 0 < n <= limit:
        return ""
    return " of " + ", ".join(repr(str(x)[:60]) for x in frame["name"].to_numpy()[bad])


def clean_tables(tables: Mapping[str, pd.DataFrame | None], files: Mapping[str, Any] | None = None,
                 base: str = "") -> list[str]:
    """Set implausible instants and durations of one rank's tables to NA; return notes.

    Parameters
    ----------
    tables : mapping
        Table name -> frame as a loader built it (columns are replaced, rows kept).
    files : mapping, optional
        Table name -> the file (or list of files) it was read from, for the notes.
    base : str, optional
        Folder the file names in the notes are shown relative to (the profile's path).

    Returns
    -------
    list of str
        One note per table with any value set to NA: counts, column and file.
    """
    files = files or {}
    frames = {k: v for k, v in tables.items() if v is not None and len(v)}
    inst: dict[tuple[str, str], np.ndarray] = {}
    for name, frame in frames.items():
        for col in INSTANT_COLUMNS:
            if col in frame.columns:
                inst[(name, col)] = _float(frame, col)
    finite = [v[np.isfinite(v)] for v in inst.values()]
    med = _median(finite)
    found: dict[str, list[str]] = {}
    missing: dict[str, list[str]] = {}
    span = None
    if med is not None:
        lo, hi = med - _WINDOW_US, med + _WINDOW_US
        t_min, t_max = np.inf, -np.inf
        for (name, col), v in inst.items():
            with np.errstate(invalid="ignore"):
                bad = np.isinf(v) | (v < lo) | (v > hi)
            n = int(bad.sum())
            if n:
                v = np.where(bad, np.nan, v)
                frames[name][col] = v
                found.setdefault(name, []).append(
                    f"{n} {col} far outside the profile's time window (more than 7 days "
                    "from its median)")
            ok = v[np.isfinite(v)]
            if len(ok):
                t_min, t_max = min(t_min, float(ok.min())), max(t_max, float(ok.max()))
        if np.isfinite(t_min):
            span = t_max - t_min
    bound = duration_bound_us(span)
    for name, cols in DURATION_COLUMNS.items():
        frame = frames.get(name)
        if frame is None:
            continue
        for col in cols:
            if col not in frame.columns:
                continue
            v = _float(frame, col)
            neg, big = _bad_durations(v, bound)
            n_neg, n_big = int(neg.sum()), int(big.sum())
            if (name, col) in MISSING_SAID:
                gone = np.isnan(v)
                if gone.any():  # a device task always lasts: an empty cell is damage
                    missing.setdefault(name, []).append(
                        f"{int(gone.sum())} missing {col}{_where(frame, gone)}"
                        + _names(frame, gone))
            if n_neg or n_big:
                frame[col] = np.where(neg | big, np.nan, v)
                if n_neg:
                    found.setdefault(name, []).append(
                        f"{n_neg} negative {col}{_where(frame, neg)}")
                if n_big:
                    found.setdefault(name, []).append(
                        f"{n_big} implausibly long {col}{_where(frame, big)} (> "
                        f"{bound / 1e6:,.0f} s: twice the profile's time span or 1 hour)")
    zeroed = _all_zero_durations(frames.get("kernels"))
    return [f"{table_label(name, files, base)}: {', '.join(parts)} set to NA"
            for name, parts in found.items()] + [
        f"{table_label(name, files, base)}: {', '.join(parts)} (empty or unreadable): left NA"
        for name, parts in missing.items()] + (
        [f"{table_label('kernels', files, base)}: {zeroed}"] if zeroed else [])


#: Device tasks below which a table of zero durations is not said (a tiny excerpt).
_ZEROED_MIN = 10


def _all_zero_durations(kernels: pd.DataFrame | None) -> str:
    """Words for a device-task table whose every duration is 0 (at least
    :data:`_ZEROED_MIN` tasks): a device task always lasts, so such a file lost its
    durations (written as 0 by a converter, zeroed by hand), and every figure built on
    them (computing 0, the step all idle) is not measured; else ``""``."""
    if kernels is None or "dur_us" not in kernels.columns:
        return ""
    v = _float(kernels, "dur_us")
    v = v[np.isfinite(v)]
    if len(v) < _ZEROED_MIN or np.any(v != 0):
        return ""
    return (f"every one of its {len(v):,} device tasks lasts 0 µs, which no task does: "
            "the durations are lost, and the computing, communication and idle figures "
            "built on them are not measured")


MISSING_SAID = {("kernels", "dur_us")}
"""Duration columns whose missing values are said in a note: a device task always has a
duration, so an empty cell there is a damaged file (host operators may lack one)."""
