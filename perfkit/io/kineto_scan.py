"""Quick readings of a Kineto trace's steps for :mod:`perfkit.io.preview`, without parsing it.

- :func:`kineto_step_spans`: a byte scan for ``"ProfilerStep#``; each hit is decoded as the
  one JSON event around it (the host span and, where recent PyTorch versions write it, the
  copy on the device lane), the rest of the file never parsed;
- :func:`kineto_device_steps`: each ``ProfilerStep#N`` from the first to the last device
  task it launched and the device's wait before the first, decoding only ``ph``, ``cat``,
  ``ts``, ``dur`` and ``args.correlation`` of each event (:func:`_device_windows`);
- :func:`iteration_steps`: the same for a trace without ``ProfilerStep``, whose steps are
  its optimizer's iterations (:mod:`perfkit.io.kineto.iterations`); :func:`kineto_device_steps`
  gives those too.

What each figure is, and when the preview uses it, is in :mod:`perfkit.io.preview`.
"""

from __future__ import annotations

import gzip
import json
import mmap
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import file_boundary
from ._common import to_ns
from .categories import DEVICE_KINDS, KINETO_KINDS
from .kineto.iterations import (
    BACKWARD,
    FETCH,
    OPTIMIZER_STEP,
    one_step_note,
    optimizer_spans,
)
from .trace_tables import device_tail, device_wait_us, step_index, step_spans

__all__ = ["kineto_step_spans", "kineto_device_steps", "step_events", "first_spans",
           "steps_on_device", "lane_steps", "iteration_steps"]

#: What a Kineto step event is named (``ProfilerStep#12``), as bytes of the file.
_STEP_KEY = b'"ProfilerStep#'
_STEP_RE = re.compile(r"^ProfilerStep#(\d{1,9})$")
#: Bytes read at a time, and the context kept around each hit to decode its event.
_CHUNK = 64 << 20
_CONTEXT = 16 << 10
_DECODER = json.JSONDecoder()
#: Kineto categories whose ProfilerStep copies are not the host's span (the device lane's
#: ``gpu_user_annotation`` copy runs from the step's first to its last kernel).
_NOT_HOST = {c for c, kind in KINETO_KINDS.items()
             if kind in (*DEVICE_KINDS, "gpu_user_annotation")}


def kineto_step_spans(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The host ``ProfilerStep#N`` spans of a Kineto trace, by a byte scan of the file.

    Each occurrence of ``"ProfilerStep#`` is decoded as the one JSON object around it
    (the innermost ``{`` before it whose object reaches past it); the events kept are
    complete events (``ph`` ``"X"``) of a host category: the copy Kineto draws on the
    device lane (``gpu_user_annotation``) is left out, as :mod:`perfkit.io.kineto` does.
    The file is read in chunks (a ``.gz`` decompressed as it is read) and never parsed
    whole.

    Parameters
    ----------
    path : str or path-like
        A Kineto ``.json`` or ``.json.gz`` trace.

    Returns
    -------
    pandas.DataFrame
        ``step`` (int), ``ts_us`` (the event's ``ts`` as written, µs), ``dur_us``; one row
        per step number (its first span), sorted by ``ts_us``. Empty when there is none.

    Raises
    ------
    ProfileError
        The file cannot be read.
    """
    return first_spans(_host_spans(Path(path)))


def first_spans(rows: list[tuple[int, float, float]]) -> pd.DataFrame:
    """:func:`kineto_step_spans`' frame from every span found: each step's first."""
    first: dict[int, tuple[float, float]] = {}
    for step, ts, dur in rows:
        first.setdefault(step, (ts, dur))
    out = pd.DataFrame([(s, ts, dur) for s, (ts, dur) in first.items()],
                       columns=["step", "ts_us", "dur_us"])
    out["step"] = out["step"].astype("int64")
    return out.sort_values("ts_us", kind="stable").reset_index(drop=True)


def _host_spans(p: Path) -> list[tuple[int, float, float]]:
    """Every host ProfilerStep span of the trace (step, ts, dur), in file order."""
    return step_events(p)[0]


def step_events(p: Path) -> tuple[list[tuple[int, float, float]],
                                    list[tuple[int, float, float]]]:
    """The trace's ProfilerStep events (step, ts, dur) in file order: the host spans, and
    the copies on the device lane (``gpu_user_annotation``); one byte scan."""
    found: list[tuple[int, float, float, bool]] = []
    with file_boundary(p, p.name):
        if p.name.lower().endswith(".gz"):
            _scan_stream(p, found)
        elif p.stat().st_size:
            with open(p, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                _scan(mm, 0, len(mm), found)
    return ([r[:3] for r in found if not r[3]],  # type: ignore[misc]
            [r[:3] for r in found if r[3]])  # type: ignore[misc]


def lane_steps(lane: list[tuple[int, float, float]], spans: pd.DataFrame
                ) -> pd.DataFrame | None:
    """Each host step's range on the device lane (``step``, ``total_us``: the earliest
    start to the latest end of its copies, and the idle tail after it that the host span
    still covers, :func:`~perfkit.io.trace_tables.device_tail`; ``preparing_us``: the
    device's wait before it, :func:`~perfkit.io.trace_tables.device_wait_us`); None when
    no step has one."""
    known = set(spans["step"].tolist())
    copies: dict[int, list[tuple[float, float]]] = {}
    for step, ts, dur in lane:
        if step in known:
            copies.setdefault(step, []).append((ts, dur))
    if not copies:
        return None
    order = [s for s in spans["step"].tolist() if s in copies]
    total, first = [], []
    for s in order:
        # measured from the first start (ts - lo is exact), not as end - start of two
        # epoch-sized numbers, whose float sum would round the µs fraction
        lo = min(ts for ts, _ in copies[s])
        first.append(lo)
        total.append(max((ts - lo) + dur for ts, dur in copies[s]))
    # the idle tail after each range within its host span, and the wait before it, as the
    # loader measures them around each device window
    start = _ns(first)
    win = pd.DataFrame({"step": order, "start_ns": start,
                        "end_ns": start + np.round(np.asarray(total) * 1000).astype(np.int64)})
    win = win.sort_values("start_ns", kind="stable").reset_index(drop=True)
    host_start = _ns(spans["ts_us"].tolist())
    host = pd.DataFrame({"step": spans["step"], "start_ns": host_start,
                         "end_ns": host_start + np.round(
                             spans["dur_us"].to_numpy(np.float64) * 1000).astype(np.int64)})
    tail = device_tail(win, host)
    idle = pd.Series(tail["idle_us"].to_numpy(), index=tail["step"].to_numpy())
    out = pd.DataFrame({"step": order, "total_us": np.asarray(total) + idle.reindex(
        order).to_numpy(np.float64)})
    wait = device_wait_us(win.assign(end_ns=tail["end_ns"].to_numpy()), host)
    out["preparing_us"] = out["step"].map(wait).to_numpy(np.float64)
    return out


def _scan(buf: Any, pos: int, limit: int, rows: list[Any], key: bytes = _STEP_KEY,
          read: Callable[[dict[str, Any]], Any] | None = None) -> int:
    """Decode the events (``read``, by default :func:`_step_event`) whose ``key`` starts in
    ``buf[pos:limit]`` (bytes or mmap) into ``rows``; return where the scan stopped."""
    read = read or _step_event
    while (hit := buf.find(key, pos)) >= 0 and hit < limit:
        event = _event_at(buf, hit, read)
        if event is not None:
            rows.append(event)
        pos = hit + len(key)
    return limit


def _scan_stream(p: Path, rows: list[tuple[int, float, float, bool]]) -> None:
    """:func:`_scan` over a compressed file, decompressed chunk by chunk."""
    with gzip.open(p, "rb") as fh:
        carry, base, done = b"", 0, 0  # base: file offset of buf[0]; done: hits handled
        while True:
            chunk = fh.read(_CHUNK)
            buf = carry + chunk
            limit = len(buf) if not chunk else max(len(buf) - _CONTEXT, 0)
            done = base + _scan(buf, max(done - base, 0), limit, rows)
            if not chunk:
                return
            carry = buf[-2 * _CONTEXT:]
            base += len(buf) - len(carry)


def _event_at(buf: Any, hit: int, read: Callable[[dict[str, Any]], Any]) -> Any:
    """What ``read`` (:func:`_step_event`: step, ts, dur, on the device lane) makes of the
    event around ``buf[hit]``, or None."""
    found = _object_at(buf, hit)
    return None if found is None else read(found[1])


def _object_at(buf: Any, hit: int) -> tuple[int, Any] | None:
    """The innermost JSON object around ``buf[hit]`` (its offset in ``buf``, decoded), or
    None: the nearest ``{`` before the hit whose object reaches past it."""
    lo = max(0, hit - _CONTEXT)
    upper = hit
    for _ in range(64):
        start = buf.rfind(b"{", lo, upper)
        if start < 0:
            return None
        upper = start
        text = buf[start:hit + _CONTEXT].decode("utf-8", "replace")
        try:
            obj, end = _DECODER.raw_decode(text)
        except ValueError:
            continue
        if end <= hit - start or not isinstance(obj, dict):
            continue  # an object that ends before the hit: an earlier one encloses it
        return start, obj
    return None


def _step_event(obj: dict[str, Any]) -> tuple[int, float, float, bool] | None:
    name = obj.get("name")
    m = _STEP_RE.match(name) if isinstance(name, str) else None
    if m is None or obj.get("ph") != "X":
        return None
    cat = str(obj.get("cat", "")).strip().lower()
    on_lane = KINETO_KINDS.get(cat) == "gpu_user_annotation"
    if cat in _NOT_HOST and not on_lane:
        return None
    try:  # a number as the loader's decoder reads it (msgspec: float64, ints included)
        ts, dur = float(obj["ts"]), float(obj["dur"])
    except (KeyError, TypeError, ValueError):
        return None
    if not (np.isfinite(ts) and np.isfinite(dur)) or dur < 0:
        return None
    return int(m.group(1)), ts, dur, on_lane


# ---- the device step: the tasks each ProfilerStep launched ---------------------------

class _TaskArgs(msgspec.Struct, gc=False):
    correlation: int | str | None = None


class _Task(msgspec.Struct, gc=False):
    """The fields of an event the device step needs, typed as the loader reads them
    (:mod:`perfkit.io.chrome`), so that every number converts to the same nanosecond."""

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


def kineto_device_steps(path: str | os.PathLike[str], notes: list[str] | None = None
                        ) -> pd.DataFrame | None:
    """The device step of each step of a Kineto trace, as :func:`perfkit.load` measures it:
    each ``ProfilerStep#N``, or in a trace without ``ProfilerStep``, each training
    iteration inferred from the optimizer's annotations.

    The definition is :mod:`perfkit.io.kineto`'s: a step's device tasks (kernels, memcpy,
    memset) are those whose runtime launch (the ``cuda_runtime`` / ``cuda_driver`` ...
    call with the same ``correlation``) started inside its host ``ProfilerStep#N`` span
    (each task by its own start where the trace records no launch at all); the step runs
    from its first task's start to its last task's end, in the loader's exact nanoseconds.
    A step holding a task without a duration has no known time (NaN), as in the loader.
    Where the trace has no ``ProfilerStep``, the host spans are its training iterations,
    by the loader's rules (:mod:`perfkit.io.kineto.iterations`: each ends where the
    iteration's last ``Optimizer.step#<Class>.step`` ends, checked against the backward
    pass before each); the frame then has a ``step_mark`` column naming that annotation,
    as the loader's ``steps`` table does (:data:`perfkit.analysis.steps.STEP_MARK`).

    Only the fields this needs are decoded (``ph``, ``cat``, ``ts``, ``dur`` and
    ``args.correlation`` of every event, the rest of each event skipped by msgspec; the
    ``name`` and ``tid`` too in a trace without ``ProfilerStep``):
    three to five times faster than :func:`perfkit.load`, which builds every table, but
    still a pass over the whole file (``benchmarks/README.md`` has the figures). The loader's
    plausibility rules (:mod:`perfkit.io.validate`) are not applied: on a trace with
    garbled timestamps the two may differ.

    Parameters
    ----------
    path : str or path-like
        A Kineto ``.json`` or ``.json.gz`` trace.
    notes : list of str, optional
        Where to say why the answer is None: the note :func:`perfkit.load` writes in
        ``meta.notes`` for the same trace (why the optimizer's annotations tell no
        iteration; or, where the trace has neither ``ProfilerStep`` nor any optimizer step,
        that with no training iteration to tell apart, as in inference or a forward-only
        loop, the whole trace is one step), or that its events cannot be decoded this way.

    Returns
    -------
    pandas.DataFrame or None
        ``step`` (int), ``total_us`` (last task end minus first task start, and the
        device's idle time after the last task that the step's span still covers:
        :func:`~perfkit.io.trace_tables.device_tail`; µs) and
        ``preparing_us`` (the device's wait before the first task, as the loader measures
        it: :func:`~perfkit.io.trace_tables.device_wait_us`), sorted by the step's first
        task, and ``step_mark`` (str) where the steps are inferred iterations; an empty
        frame when the trace has steps but no device task launched in any (the loader then
        takes the host span as the step); None when the trace has neither ProfilerStep
        spans nor iterations its optimizer's annotations tell (the full load then makes one
        step of the whole trace), or its events cannot be decoded this way (the full load
        will say what is wrong): ``notes`` then says which, and why.

    Raises
    ------
    ProfileError
        The file cannot be read.
    """
    p = Path(path)
    said: list[str] = []
    rows = _host_spans(p)
    if rows:
        found = steps_on_device(p, rows)
        if found is None:
            said.append(_UNDECODED)
    else:
        got, marked = _iteration_scan(p, said)
        if got is None:
            if marked and not said:  # annotations, but events this reading cannot decode
                said.append(_UNDECODED)
            else:  # the full load's notes: why no iteration (where it has annotations)
                said.append(one_step_note(marked))
            found = None
        else:
            found, _spans, mark = got
            found = found.assign(step_mark=pd.array([mark] * len(found), dtype="string"))
    if notes is not None:
        notes.extend(said)
    return found


#: Why :func:`kineto_device_steps` gives None for a trace its decoder cannot read.
_UNDECODED = ("steps: the trace's events cannot be decoded by this quick reading (an "
              "event field of an unexpected type, or a damaged file); perfkit.load reads "
              "it and says what is wrong")


def steps_on_device(p: Path, rows: list[tuple[int, float, float]]) -> pd.DataFrame | None:
    """:func:`kineto_device_steps` given the trace's host spans (:func:`_host_spans`)."""
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
    the loader makes them (:func:`~perfkit.io.trace_tables.step_spans`)."""
    host = pd.DataFrame({"name": [f"ProfilerStep#{s}" for s, _, _ in rows],
                         "ts_ns": _ns([ts for _, ts, _ in rows]),
                         "dur_us": np.array([d for _, _, d in rows], np.float64)})
    return step_spans(host)


def _device_windows(spans: pd.DataFrame, tasks: list[_Task]) -> pd.DataFrame:
    """Per step, first task start to last task end and the idle tail after it (see
    :func:`kineto_device_steps`), of
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
#: Kinds (:data:`~perfkit.io.categories.KINETO_KINDS`) of the host events the loader
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
    cpu = pd.DataFrame({"name": pd.array([t.name for t in host], dtype="string"),
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
