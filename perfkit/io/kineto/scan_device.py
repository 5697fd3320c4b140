"""The device step of a Kineto trace's steps, from its events decoded field by field.

Each step's window runs from the first to the last device task it launched, with the
device's wait before it and its idle tail after it, as :func:`perfkit.load` measures them:
:func:`steps_on_device` for the ``ProfilerStep#N`` spans that
:mod:`perfkit.io.kineto.scan` finds by a byte scan, :func:`iteration_steps` for a trace
without ``ProfilerStep``, whose steps are its optimizer's iterations
(:mod:`perfkit.io.kineto.iterations`). Only ``ph``, ``cat``, ``ts``, ``dur`` and
``args.correlation`` of each event are decoded (its ``name`` and ``tid`` too for the
iterations). :func:`perfkit.io.kineto.scan.kineto_device_steps` is the entry point;
:mod:`perfkit.io.kineto.scan` exports every name of this module under its old path.
"""

from __future__ import annotations

import gzip
import mmap
import re
from collections.abc import Iterator
from contextlib import contextmanager
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..._text_dtype import TEXT
from ...errors import file_boundary
from .._common import to_ns
from ..canonical.categories import DEVICE_KINDS, KINETO_KINDS
from ..chrome.tables import device_tail, device_wait_us, step_index, step_spans
from .iterations import BACKWARD, FETCH, OPTIMIZER_STEP, optimizer_spans

__all__ = ["steps_on_device", "iteration_steps"]


class _TaskArgs(msgspec.Struct, gc=False):
    correlation: int | str | None = None


class _Task(msgspec.Struct, gc=False):
    """The fields of an event the device step needs, typed as the loader reads them
    (:mod:`perfkit.io.chrome.decode`), so that every number converts to the same nanosecond."""

    ph: str = ""
    cat: int | str | None = None
    ts: float | str | None = None
    dur: float | str | None = None
    args: _TaskArgs | None = None


class _Tasks(msgspec.Struct):
    traceEvents: list[_Task] = msgspec.field(default_factory=list)  # noqa: N815


_TASKS = msgspec.json.Decoder(_Tasks)
_TASK_LIST = msgspec.json.Decoder(list[_Task])


class _Named(_Task, gc=False):
    """:class:`_Task` with the event's name and thread: a trace without ProfilerStep reads
    its iterations from the names of its host events (:func:`iteration_steps`)."""

    name: int | str | None = None
    tid: int | str | None = None


class _NamedEvents(msgspec.Struct):
    traceEvents: list[_Named] = msgspec.field(default_factory=list)  # noqa: N815


_NAMED = msgspec.json.Decoder(_NamedEvents)
_NAMED_LIST = msgspec.json.Decoder(list[_Named])
_NA_NS = np.iinfo(np.int64).min
#: Lower-cased Kineto categories of device tasks and of runtime (launch) calls.
_DEVICE_CATS = frozenset(c for c, kind in KINETO_KINDS.items() if kind in DEVICE_KINDS)
_RUNTIME_CATS = frozenset(c for c, kind in KINETO_KINDS.items() if kind == "runtime")


def steps_on_device(p: Path, rows: list[tuple[int, float, float]]) -> pd.DataFrame | None:
    """:func:`~perfkit.io.kineto.scan.kineto_device_steps` given the trace's host spans
    (:func:`~perfkit.io.kineto.scan.step_events`)."""
    if not rows:
        return None
    with file_boundary(p, p.name):
        tasks = _decode_tasks(p)
    if tasks is None:
        return None
    return _device_windows(_profiler_spans(rows), tasks)


def _decode_tasks(p: Path) -> list[_Task] | None:
    """Every event of the trace with the fields of :class:`_Task`; None if it does not
    decode (damaged, or fields of unexpected types)."""
    with _trace_bytes(p) as data:
        return None if data is None else _decode_data(data)


@contextmanager
def _trace_bytes(p: Path) -> Iterator[Any]:
    """The trace's bytes: a ``.gz`` decompressed whole, else the file mapped (closed on
    exit); None for an empty file."""
    if p.name.lower().endswith(".gz"):
        with gzip.open(p, "rb") as fh:
            data: Any = fh.read()
        yield data
        return
    if not p.stat().st_size:
        yield None
        return
    with open(p, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        yield mm


def _decode_data(data: Any, named: bool = False) -> list[Any] | None:
    """:func:`_decode_tasks` of the trace's bytes (:func:`_trace_bytes`): :class:`_Task`
    events, or (``named``) :class:`_Named` ones."""
    head = bytes(data[:4096]).lstrip()
    if head[:3] == b"\xef\xbb\xbf":
        return None  # the loader re-encodes these; rare enough to wait for it
    whole, bare = (_NAMED, _NAMED_LIST) if named else (_TASKS, _TASK_LIST)
    try:
        if head[:1] == b"[":
            return bare.decode(data)
        return whole.decode(data).traceEvents
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return None


def _ns(values: list[Any]) -> np.ndarray:
    """Absolute int64 nanoseconds of ``ts`` values, as the loader converts them."""
    try:
        arr = pa.array(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        arr = pa.array([None if v is None else str(v) for v in values], pa.string())
    ns = to_ns(arr, len(values))
    return pc.fill_null(ns, pa.scalar(_NA_NS, pa.int64())).to_numpy(zero_copy_only=False)


def _num(values: list[Any]) -> np.ndarray:
    """float64 of ``dur`` values (NaN where missing or not a number)."""
    try:
        return pa.array(values, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(
            np.float64)


def _profiler_spans(rows: list[tuple[int, float, float]]) -> pd.DataFrame:
    """The step windows (``step``, ``start_ns``, ``end_ns``) of host ProfilerStep spans, as
    the loader makes them (:func:`~perfkit.io.chrome.tables.step_spans`)."""
    host = pd.DataFrame({"name": [f"ProfilerStep#{s}" for s, _, _ in rows],
                         "ts_ns": _ns([ts for _, ts, _ in rows]),
                         "dur_us": np.array([d for _, _, d in rows], np.float64)})
    return step_spans(host)


def _device_windows(spans: pd.DataFrame, tasks: list[_Task]) -> pd.DataFrame:
    """Per step, first task start to last task end and the idle tail after it (see
    :func:`~perfkit.io.kineto.scan.kineto_device_steps`), of
    the step windows ``spans`` (``step``, ``start_ns``, ``end_ns``, sorted by start)."""
    none = pd.DataFrame({"step": pd.Series([], dtype="int64"), "total_us": [],
                         "preparing_us": []})
    # each distinct category worked out once: 1 a device task, 2 a runtime call, 0 other
    cats = list(map(attrgetter("cat"), tasks))
    lut = {c: _cat_code(c) for c in set(cats)}
    code = np.fromiter(map(lut.__getitem__, cats), np.int8, len(cats))
    del cats
    picked = np.flatnonzero(code)
    complete = np.fromiter(map("X".__eq__, map(attrgetter("ph"), _pick(tasks, picked))),
                           bool, len(picked))  # complete events only, as the loader
    is_dev = np.zeros(len(tasks), bool)
    is_rt = np.zeros(len(tasks), bool)
    is_dev[picked[complete]] = code[picked[complete]] == 1
    is_rt[picked[complete]] = code[picked[complete]] == 2
    dev = _pick(tasks, is_dev)
    if not dev:
        return none
    start = _ns(list(map(attrgetter("ts"), dev)))
    dur = _num(list(map(attrgetter("dur"), dev)))
    rt = _pick(tasks, is_rt)
    rt_corr = _corrs(rt)
    has = ~np.isnan(rt_corr)
    if has.any():
        launch = pd.Series(_ns([t.ts for t, ok in zip(rt, has, strict=True) if ok]),
                           index=rt_corr[has])
        launch = launch[~launch.index.duplicated()]  # a correlation's first runtime call
        at = launch.index.get_indexer(_corrs(dev))  # -1: no runtime call in the trace
        when = np.where(at >= 0, launch.to_numpy(np.int64)[np.maximum(at, 0)], _NA_NS)
    else:  # no runtime call recorded: each task by its own start
        when = start
    step = step_index(when, spans)
    known = ~np.isnan(step) & (start != _NA_NS)
    if not known.any():
        return none
    end = start + np.round(np.nan_to_num(dur) * 1000).astype(np.int64)
    frame = pd.DataFrame({"step": step[known].astype(np.int64), "s": start[known],
                          "e": end[known], "missing": np.isnan(dur[known])})
    win = frame.groupby("step").agg(s=("s", "min"), e=("e", "max"), missing=("missing", "any"))
    win = win.sort_values("s", kind="stable")
    e = np.maximum(win["e"].to_numpy(), win["s"].to_numpy() + 1)
    steps = win.index.to_numpy(np.int64)
    # tasks of no step (launched before the trace, or outside every span) keep the device
    # busy: not a wait, as the loader counts it
    other = ~known & (start != _NA_NS)
    busy = (start[other], start[other] + np.round(np.nan_to_num(dur[other]) * 1000).astype(
        np.int64))
    windows = pd.DataFrame({"step": steps, "start_ns": win["s"].to_numpy(), "end_ns": e})
    # the device's idle time after the last task, within the step's span, is the step's
    # (free time in the loader's split), as the loader counts it
    tail = device_tail(windows, spans, busy)
    total = (e - win["s"].to_numpy()) / 1000.0 + tail["idle_us"].to_numpy()
    total[win["missing"].to_numpy()] = np.nan
    wait = device_wait_us(windows.assign(end_ns=tail["end_ns"].to_numpy()), spans, busy)
    return pd.DataFrame({"step": steps, "total_us": total,
                         "preparing_us": wait.to_numpy(np.float64)})


def _cat_code(cat: Any) -> int:
    """1 for a device task's category, 2 for a runtime call's, else 0."""
    if not isinstance(cat, str):
        return 0
    low = cat.strip().lower()
    return 1 if low in _DEVICE_CATS else 2 if low in _RUNTIME_CATS else 0


def _pick(tasks: list[_Task], where: np.ndarray) -> list[_Task]:
    """The events at ``where`` (a mask, or indices), in file order."""
    idx = np.flatnonzero(where) if where.dtype == bool else where
    if not len(idx):
        return []
    if len(idx) == 1:
        return [tasks[int(idx[0])]]
    return list(itemgetter(*idx.tolist())(tasks))


def _corrs(tasks: list[_Task]) -> np.ndarray:
    """The ``args.correlation`` of each event as float64 (NaN where it has none)."""
    values = [None if a is None else a.correlation for a in map(attrgetter("args"), tasks)]
    try:
        return pa.array(values, pa.int64()).to_numpy(zero_copy_only=False).astype(np.float64)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(
            np.float64)


# ---- a trace without ProfilerStep: its optimizer's iterations ------------------------

#: What marks a training iteration where no ProfilerStep does, as bytes of the file.
_OPTIMIZER_KEY = b'"Optimizer.step#'
#: Kinds (:data:`~perfkit.io.canonical.categories.KINETO_KINDS`) of the host events the loader
#: reads the optimizer's annotations from, and of those whose first start begins the
#: first iteration (with the runtime calls).
_HOST_KINDS = ("cpu_op", "user_annotation")
_FIRST_KINDS = (*_HOST_KINDS, "runtime")
#: The host events :func:`~perfkit.io.kineto.iterations.optimizer_spans` reads: the
#: optimizer's annotations, the backward functions and the DataLoader's fetches.
_ITERATION_NAMES = re.compile("|".join(f"(?:{r.pattern})" for r in (
    OPTIMIZER_STEP, BACKWARD, FETCH)))


def iteration_steps(p: Path, notes: list[str]
                     ) -> tuple[pd.DataFrame, pd.DataFrame, str] | None:
    """(the device step of each iteration, as :func:`_device_windows` gives it; the
    iteration windows ``step``, ``start_ns``, ``end_ns``; the name of the annotation that
    ends each) of a trace without ``ProfilerStep``, or None: no optimizer annotation (a
    byte scan for ``"Optimizer.step#`` finds none), events that do not decode, or the rules
    of :mod:`perfkit.io.kineto.iterations` do not hold (it adds the reason to ``notes``).

    The iteration windows are the loader's own (:func:`~perfkit.io.kineto.iterations.
    optimizer_spans`), given the host events it reads (the optimizer's annotations, the
    backward functions, the DataLoader's fetches: each event decoded with its name and
    thread) and the start of every host operator, annotation and runtime call (the first
    of which begins the first iteration)."""
    return _iteration_scan(p, notes)[0]


def _iteration_scan(p: Path, notes: list[str]
                    ) -> tuple[tuple[pd.DataFrame, pd.DataFrame, str] | None, bool]:
    """:func:`iteration_steps`, and whether the trace has an optimizer annotation (a byte
    scan for ``"Optimizer.step#``)."""
    with file_boundary(p, p.name), _trace_bytes(p) as data:  # one read for both
        marked = data is not None and data.find(_OPTIMIZER_KEY) >= 0
        tasks = _decode_data(data, named=True) if marked else None
    if tasks is None:
        return None, marked
    cats = list(map(attrgetter("cat"), tasks))
    lut = {c: isinstance(c, str) and KINETO_KINDS.get(c.strip().lower()) in _HOST_KINDS
           for c in set(cats)}
    names = list(map(attrgetter("name"), tasks))
    read = {n: isinstance(n, str) and _ITERATION_NAMES.search(n) is not None
            for n in set(names)}
    host = [t for t, c, n in zip(tasks, cats, names, strict=True)
            if lut[c] and read[n] and t.ph == "X"]
    cpu = pd.DataFrame({"name": pd.array([t.name for t in host], dtype=TEXT),
                        "tid": pd.Series([t.tid for t in host], dtype=object),
                        "ts_ns": _ns([t.ts for t in host]),
                        "dur_us": _num([t.dur for t in host])})
    first = pd.DataFrame({"ts_ns": _host_ns(tasks)})
    spans, mark = optimizer_spans(cpu, first, notes)
    if mark is None:
        return None, marked
    return (_device_windows(spans, tasks), spans, mark), marked


def _host_ns(tasks: list[_Task]) -> np.ndarray:
    """Start (ns, as the loader converts it) of every complete host operator, annotation
    and runtime call of the trace (:data:`_FIRST_KINDS`)."""
    cats = list(map(attrgetter("cat"), tasks))
    lut = {c: isinstance(c, str) and KINETO_KINDS.get(c.strip().lower()) in _FIRST_KINDS
           for c in set(cats)}
    host = _pick(tasks, np.fromiter(map(lut.__getitem__, cats), bool, len(cats)))
    return _ns([t.ts for t in host if t.ph == "X"])
