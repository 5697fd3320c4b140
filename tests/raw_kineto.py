"""Independent readings of raw Kineto traces (``json`` with exact decimals), shared by the
tests that check perfkit's step figures against them: each step's device time (first to
last device task its host ``ProfilerStep`` launched, and the device's idle time after the
last one while the span lasts: :func:`idle_tails`) and its wall time (that and the
device's wait before it); for a trace without ``ProfilerStep``, its optimizer's iterations
(:class:`Iterations`).

A trace is parsed once per test module (:func:`raw_events` keeps the parsed events of the
larger files, keyed by the file's path, size and modification time; ``tests/conftest.py``
calls :func:`forget` after each module): several tests, and several readings in one test,
check the same shared samples, and parsing one with exact decimals takes seconds. The
events are shared between callers: read them, never change them.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections import OrderedDict
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

__all__ = ["raw_events", "raw_windows", "raw_device_steps", "raw_walls", "raw_outside",
           "idle_tails", "Iterations", "forget"]

_DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
_RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "runtime", "hip_runtime"}


#: Parsed traces kept, least recently used first: (path, size, mtime) -> events. The
#: Kineto traces of the shared samples and the bundled data are 11 (about 450 MB parsed,
#: all together).
_PARSED: OrderedDict[tuple[str, int, int], list[dict]] = OrderedDict()
#: How many parsed traces are kept.
_KEEP = 16
#: Files smaller than this are parsed at each reading (most of the tests' own traces: quick
#: to read, and they would push a shared sample out of the cache).
_SMALL = 100 << 10
#: What :func:`raw_windows` and :func:`raw_outside` found in a kept trace, by the same key.
_WINDOWS: dict[tuple[str, int, int], tuple[dict[int, list], list[tuple], bool]] = {}
_OUTSIDE: dict[tuple[str, int, int], list[tuple[Decimal, Decimal]]] = {}


def forget() -> None:
    """Drop every kept trace (``tests/conftest.py`` does after each test module, so that
    the parsed samples, hundreds of MB, do not stay in the worker for the next files)."""
    _PARSED.clear()
    _WINDOWS.clear()
    _OUTSIDE.clear()


def _key(path: Path) -> tuple[str, int, int] | None:
    """The cache key of ``path`` (its real path, size and modification time), or None for
    a file too small to keep."""
    st = os.stat(path)
    if st.st_size < _SMALL:
        return None
    return str(Path(path).resolve()), st.st_size, st.st_mtime_ns


def raw_events(path: Path) -> list[dict]:
    """The trace's events, parsed with ``json`` (numbers with a fraction as exact
    ``Decimal``); a new list, but the events themselves are shared: never change them."""
    key = _key(path)
    if key is not None and key in _PARSED:
        _PARSED.move_to_end(key)
        return list(_PARSED[key])
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        data = json.load(fh, parse_float=Decimal)  # exact decimals: no float rounding
    events = data["traceEvents"] if isinstance(data, dict) else data
    if key is not None:
        _PARSED[key] = events
        while len(_PARSED) > _KEEP:
            gone, _ = _PARSED.popitem(last=False)
            _WINDOWS.pop(gone, None)
            _OUTSIDE.pop(gone, None)
    return list(events)


def _kept(path: Path, store: dict[tuple[str, int, int], Any],
          work: Callable[[Path], Any]) -> Any:
    """``work(path)``, kept in ``store`` while the trace's events are kept (each use counts
    as a reading of the trace for :data:`_KEEP`)."""
    key = _key(path)
    if key is not None and key in store and key in _PARSED:
        _PARSED.move_to_end(key)
        return store[key]
    found = work(path)  # parses the trace, or finds it kept
    if key is not None and key in _PARSED:
        store[key] = found
    return found


def raw_windows(path: Path) -> tuple[dict[int, list], list[tuple], bool]:
    """Step -> [first device task start, last task end, a task without duration] (µs as
    written), the host ProfilerStep spans (start, end, step) in start order, and whether
    the trace has any device task in a step; read with ``json``.

    A task belongs to the host ProfilerStep#N span its launch (the runtime call with the
    same correlation, the first one) started in; the latest-starting span at or before the
    launch, if the launch is before its end. Without any runtime call, the task's own start.
    Worked out once for a kept trace (:func:`raw_events`); each call gets its own copy.
    """
    windows, spans, on_device = _kept(path, _WINDOWS, _windows)
    return {s: list(w) for s, w in windows.items()}, list(spans), on_device


def _windows(path: Path) -> tuple[dict[int, list], list[tuple], bool]:
    """:func:`raw_windows`, worked out from the events."""
    events = [e for e in raw_events(path) if e.get("ph") == "X"]
    spans = sorted((e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1]))
                   for e in events if str(e.get("name", "")).startswith("ProfilerStep#")
                   and str(e.get("cat", "")).lower() not in ("gpu_user_annotation", "kernel"))
    launch: dict = {}
    tasks = []
    for e in events:
        cat = str(e.get("cat", "")).strip().lower()
        corr = (e.get("args") or {}).get("correlation")
        if cat in _RUNTIME_CATS and corr is not None:
            launch.setdefault(corr, e["ts"])
        elif cat in _DEVICE_CATS:
            tasks.append(e)
    windows: dict[int, list] = {}
    for t in tasks:
        when = launch.get((t.get("args") or {}).get("correlation")) if launch else t["ts"]
        if when is None:
            continue
        before = [s for s in spans if s[0] <= when]
        if not before or when >= before[-1][1]:
            continue
        end = t["ts"] + t.get("dur", 0)
        lo_hi = windows.setdefault(before[-1][2], [t["ts"], end, False])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], t["ts"]), max(lo_hi[1], end)
        lo_hi[2] |= "dur" not in t
    return windows, spans, bool(windows)


def raw_device_steps(path: Path) -> tuple[dict[int, Decimal | None], bool]:
    """Step -> first to last device task and the idle tail after it (:func:`idle_tails`;
    µs, exact; None when a task has no duration), and whether the trace has any device
    task in a step (else the step is its host span, as perfkit says): :func:`raw_windows`."""
    windows, spans, on_device = raw_windows(path)
    if on_device:
        tails = idle_tails(windows, _span_ends(spans), raw_outside(path))
        return {s: None if unknown else Decimal(hi) - Decimal(lo) + tails[s][0]
                for s, (lo, hi, unknown) in windows.items()}, True
    return {s: Decimal(b) - Decimal(a) for a, b, s in reversed(spans)}, False


def _span_ends(spans: list[tuple]) -> dict[int, Decimal]:
    """Step -> the end of its first host span."""
    ends: dict[int, Decimal] = {}
    for _a, b, s in spans:
        ends.setdefault(s, Decimal(b))
    return ends


def idle_tails(windows: dict[int, list], ends: dict[int, Decimal],
               outside: list[tuple[Decimal, Decimal]]) -> dict[int, tuple[Decimal, Decimal]]:
    """Step -> (the device's idle time after the step's last task that its host span
    covers, µs; where the step's device time ends, that tail included).

    The tail runs from the end of the step's device work (or of an earlier step's, when
    later) to the end of the step's span, or to the next step's first task when that is
    sooner, less the time the device ran tasks of no step (``outside``) in that range; none
    when the device was still running at the span's end."""
    order = sorted(windows.items(), key=lambda kv: kv[1][0])
    ends = {s: Decimal(b) for s, b in ends.items()}  # exact, whether given as floats or not
    outside = [(Decimal(a), Decimal(b)) for a, b in outside]
    out, done = {}, None
    for i, (s, window) in enumerate(order):
        hi = window[1]
        done = Decimal(hi) if done is None else max(done, Decimal(hi))
        stop = ends[s] if i + 1 == len(order) else min(ends[s], Decimal(order[i + 1][1][0]))
        if stop > done:
            out[s] = (stop - done - _covered(outside, done, stop), stop)
        else:
            out[s] = (Decimal(0), Decimal(hi))
        done = max(done, out[s][1])
    return out


def raw_outside(path: Path) -> list[tuple[Decimal, Decimal]]:
    """(start, end) µs of the device tasks of no step: launched before the trace began
    (no runtime call with their correlation) or outside every host ProfilerStep span, as
    :func:`raw_windows` leaves them out. Worked out once for a kept trace (:func:`raw_events`);
    each call gets its own list."""
    return list(_kept(path, _OUTSIDE, _outside))


def _outside(path: Path) -> list[tuple[Decimal, Decimal]]:
    """:func:`raw_outside`, worked out from the events."""
    events = [e for e in raw_events(path) if e.get("ph") == "X"]
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if str(e.get("name", "")).startswith("ProfilerStep#")
                   and str(e.get("cat", "")).lower() not in ("gpu_user_annotation", "kernel"))
    launch: dict = {}
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if str(e.get("cat", "")).strip().lower() in _RUNTIME_CATS and corr is not None:
            launch.setdefault(corr, e["ts"])
    out = []
    for t in events:
        if str(t.get("cat", "")).strip().lower() not in _DEVICE_CATS:
            continue
        when = launch.get((t.get("args") or {}).get("correlation")) if launch else t["ts"]
        in_step = when is not None and any(a <= when < b for a, b in spans)
        if not in_step:
            out.append((Decimal(t["ts"]), Decimal(t["ts"]) + Decimal(t.get("dur", 0))))
    return out


def _covered(intervals: list[tuple[Decimal, Decimal]], lo: Decimal, hi: Decimal) -> Decimal:
    """Length of the union of ``intervals`` inside ``[lo, hi]``."""
    parts = sorted((max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi)
    total, reach = Decimal(0), lo
    for a, b in parts:
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


def raw_walls(path: Path) -> dict[int, Decimal]:
    """Step -> its wall time (µs, exact): the device window, the idle tail after it
    (:func:`idle_tails`) and the device's wait before it, from the step's host start or
    the end of the previous steps' device time (their tails included) when later to the
    window's first task (0 when the device never waited), less the time the device ran
    tasks of no step in that range (:func:`raw_outside`); steps with device tasks only,
    each window with every task's duration."""
    windows, spans, _ = raw_windows(path)
    outside = raw_outside(path)
    tails = idle_tails(windows, _span_ends(spans), outside)
    host = {}
    for a, _b, s in spans:
        host.setdefault(s, a)  # a step's first span
    walls, end = {}, None
    for s, (lo, hi, unknown) in sorted(windows.items(), key=lambda kv: kv[1][0]):
        start = Decimal(host[s]) if end is None else max(Decimal(host[s]), end)
        wait = max(Decimal(lo) - start, Decimal(0))
        if wait > 0:
            wait -= _covered(outside, start, Decimal(lo))
        if not unknown:
            walls[s] = Decimal(hi) - Decimal(lo) + tails[s][0] + wait
        end = tails[s][1] if end is None else max(end, tails[s][1])
    return walls


# ---- a trace without ProfilerStep: the optimizer's iterations --------------------------

#: Host categories of both Kineto schemas (PyTorch 1.8-1.9 and >= 1.10).
HOST = {"cpu_op", "user_annotation", "Operator"}
RUNTIME = {"cuda_runtime", "cuda_driver", "Runtime"}
DEVICE = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
STEP_MARK = re.compile(r"^Optimizer\.step#\w+\.step$")


class Iterations:
    """The optimizer's iterations of a raw trace (events of :func:`raw_events`), by the rule
    of :mod:`perfkit.io.kineto.iterations`: iteration ``k`` ends where the ``k``-th host
    ``Optimizer.step#<Class>.step`` ends, the next begins there, the first begins at the
    trace's first host event (operator, annotation or runtime call); a device task belongs
    to the iteration its launch (first runtime call with its correlation) ran in."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        x = [e for e in events if e.get("ph") == "X"]
        marks = sorted(e["ts"] + e["dur"] for e in x
                       if e.get("cat") in HOST and STEP_MARK.match(e["name"]))
        first = min(e["ts"] for e in x if e.get("cat") in HOST | RUNTIME
                    and not e["name"].startswith("ProfilerStep#"))
        bounds = [first, *marks]
        self.spans = list(zip(bounds[:-1], bounds[1:], strict=True))
        launch: dict[Any, Decimal] = {}
        for e in x:
            corr = (e.get("args") or {}).get("correlation")
            if e.get("cat") in RUNTIME and corr is not None:
                launch.setdefault(corr, e["ts"])
        self.tasks = [e for e in x if e.get("cat") in DEVICE]
        self.step = [self.index(launch.get(e["args"].get("correlation")))
                     for e in self.tasks]
        self.host = [e for e in x if e.get("cat") in HOST
                     and not e["name"].startswith("ProfilerStep#")]

    def index(self, ts: Decimal | None) -> int | None:
        """The iteration whose span holds ``ts`` (None: in none)."""
        if ts is None:
            return None
        return next((k for k, (a, b) in enumerate(self.spans) if a <= ts < b), None)

    def walls(self) -> dict[int, tuple[Decimal, Decimal]]:
        """Iteration -> (device time: first task start to last task end, and the idle tail
        after it within the iteration, :func:`idle_tails`; wall: that and the device's
        wait before it, from the iteration's start or the end of the earlier iterations'
        device time when later), µs; the tasks of no step are checked apart."""
        win: dict[int, list[Decimal]] = {}
        for e, k in zip(self.tasks, self.step, strict=True):
            if k is not None:
                lo_hi = win.setdefault(k, [e["ts"], e["ts"] + e["dur"]])
                lo_hi[0], lo_hi[1] = min(lo_hi[0], e["ts"]), max(lo_hi[1], e["ts"] + e["dur"])
        outside = [(e["ts"], e["ts"] + e["dur"]) for e, k in zip(self.tasks, self.step,
                                                                 strict=True) if k is None]
        tails = idle_tails(win, {k: Decimal(b) for k, (_a, b) in enumerate(self.spans)},
                           outside)
        out, done = {}, None
        for k, (lo, hi) in sorted(win.items(), key=lambda kv: kv[1][0]):
            start = self.spans[k][0] if done is None else max(self.spans[k][0], done)
            time = hi - lo + tails[k][0]
            out[k] = (time, time + max(lo - start, Decimal(0)))
            done = tails[k][1] if done is None else max(done, tails[k][1])
        return out


def raw_computing_s(path: Path) -> dict[int, float]:
    """Step -> seconds the device computes: the union of the intervals of the device tasks
    (kernels, memcpy, memset) whose launch (``cuda_runtime``/``cuda_driver``, same
    ``correlation``) lies in the step's host ``ProfilerStep#N`` span (gzip + json, no
    perfkit)."""
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    spans = [(int(e["name"].split("#")[1]), float(e["ts"]), float(e["ts"]) + e["dur"])
             for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
    launch = {e["args"]["correlation"]: float(e["ts"]) for e in events
              if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
              and "correlation" in e.get("args", {})}
    tasks: dict[int, list[tuple[float, float]]] = {s: [] for s, _, _ in spans}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            at = launch.get(e.get("args", {}).get("correlation"), float(e["ts"]))
            step = next((s for s, a, b in spans if a <= at < b), None)
            if step is not None:
                tasks[step].append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
    busy = {}
    for step, intervals in tasks.items():
        total, end = 0.0, float("-inf")
        for lo, hi in sorted(intervals):
            if hi > end:
                total += hi - max(lo, end)
                end = hi
        busy[step] = total / 1e6
    return busy
