"""Quick readings of a Kineto trace's steps for :mod:`perfkit.io.preview.steps`, without parsing it.

- :func:`kineto_step_spans`: a byte scan for ``"ProfilerStep#``; each hit is decoded as the
  one JSON event around it (the host span and, where recent PyTorch versions write it, the
  copy on the device lane), the rest of the file never parsed;
- :func:`kineto_device_steps`: each ``ProfilerStep#N`` from the first to the last device
  task it launched and the device's wait before the first, decoding only ``ph``, ``cat``,
  ``ts``, ``dur`` and ``args.correlation`` of each event (the decoding and the windows are
  :mod:`perfkit.io.kineto.scan_device`'s, whose names are exported here too);
- :func:`iteration_steps`: the same for a trace without ``ProfilerStep``, whose steps are
  its optimizer's iterations (:mod:`perfkit.io.kineto.iterations`); :func:`kineto_device_steps`
  gives those too.

What each figure is, and when the preview uses it, is in :mod:`perfkit.io.preview.steps`.
"""

from __future__ import annotations

import gzip
import json
import mmap
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...errors import file_boundary
from ..canonical.categories import DEVICE_KINDS, KINETO_KINDS
from ..chrome.tables import device_tail, device_wait_us
from .iterations import one_step_note

# decoding the events for the device step: a module of its own, every name still importable
# from here
from .scan_device import (
    _iteration_scan,
    _ns,
    iteration_steps,
    steps_on_device,
)

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
    still covers, :func:`~perfkit.io.chrome.tables.device_tail`; ``preparing_us``: the
    device's wait before it, :func:`~perfkit.io.chrome.tables.device_wait_us`); None when
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
    plausibility rules (:mod:`perfkit.io.canonical.validate`) are not applied: on a trace with
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
        :func:`~perfkit.io.chrome.tables.device_tail`; µs) and
        ``preparing_us`` (the device's wait before the first task, as the loader measures
        it: :func:`~perfkit.io.chrome.tables.device_wait_us`), sorted by the step's first
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
            found = found.assign(step_mark=pd.array([mark] * len(found), dtype=TEXT))
    if notes is not None:
        notes.extend(said)
    return found


#: Why :func:`kineto_device_steps` gives None for a trace its decoder cannot read.
_UNDECODED = ("steps: the trace's events cannot be decoded by this quick reading (an "
              "event field of an unexpected type, or a damaged file); perfkit.load reads "
              "it and says what is wrong")
