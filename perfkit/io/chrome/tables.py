"""Canonical tables derived from a decoded Chrome trace (shared by the Ascend and Kineto readers);
those of an Ascend ``trace_view.json`` are built in :mod:`perfkit.io.ascend.trace`.

All work is vectorised: steps are assigned with ``numpy.searchsorted`` on step boundaries,
host-to-device links are pandas merges, busy time is an interval union over sorted arrays.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ..canonical.categories import HOST_COMM_PATTERN

__all__ = ["NA_NS", "STEP_NAME", "step_spans", "step_index", "assign_steps", "union_us",
           "overlap_breakdown", "grouped_breakdown", "device_wait_us", "device_tail", "rel",
           "host_steps", "HOST_COMM_PATTERN"]

NA_NS = np.iinfo(np.int64).min
"""Sentinel for a missing int64 timestamp in :class:`~perfkit.io.chrome.decode.ChromeTrace`
frames."""

#: A step span's name (``ProfilerStep#N``, ``Step N``), the step number its group.
STEP_NAME = re.compile(r"^(?:ProfilerStep#|Step\s*#?)(\d{1,9})$")


def rel(ts_ns: np.ndarray, origin: int | None) -> np.ndarray:
    """Microseconds relative to ``origin`` (NaN where missing)."""
    ts_ns = np.asarray(ts_ns)
    if origin is None:
        return np.full(len(ts_ns), np.nan)
    out = (ts_ns - np.int64(origin)).astype(np.float64) / 1000.0
    out[ts_ns == NA_NS] = np.nan
    return out


def step_spans(x: pd.DataFrame) -> pd.DataFrame:
    """Step windows from ``ProfilerStep#N`` host events: step, start_ns, end_ns (sorted)."""
    names = x["name"].astype(TEXT).fillna("")
    cand = names.str.startswith(("ProfilerStep#", "Step")).to_numpy(dtype=bool)
    m = pd.Series(pd.NA, index=names.index, dtype=TEXT)
    m[cand] = names[cand].str.extract(STEP_NAME, expand=False)
    dur = x["dur_us"].to_numpy(np.float64)
    # a step span without a (plausible) duration or start has no known window: left out
    sel = m.notna().to_numpy() & np.isfinite(dur) & (x["ts_ns"].to_numpy() != NA_NS)
    spans = pd.DataFrame({
        "step": pd.to_numeric(m[sel]).astype("int64").to_numpy(),
        "start_ns": x["ts_ns"].to_numpy()[sel],
        "end_ns": x["ts_ns"].to_numpy()[sel]
        + np.round(x["dur_us"].to_numpy()[sel] * 1000).astype(np.int64),
    })
    return spans.sort_values("start_ns", kind="stable").reset_index(drop=True)


def step_index(ts_ns: np.ndarray, spans: pd.DataFrame) -> np.ndarray:
    """Step number of each timestamp (NaN outside every step window)."""
    ts_ns = np.asarray(ts_ns)
    if not len(spans):
        return np.full(len(ts_ns), np.nan)
    starts = spans["start_ns"].to_numpy()
    ends = spans["end_ns"].to_numpy()
    idx = np.searchsorted(starts, ts_ns, side="right") - 1
    ok = (idx >= 0) & (ts_ns != NA_NS)
    idx_c = np.clip(idx, 0, len(starts) - 1)
    ok &= ts_ns < ends[idx_c]
    out = spans["step"].to_numpy().astype(np.float64)[idx_c]
    out[~ok] = np.nan
    return out


def assign_steps(frame: pd.DataFrame, spans: pd.DataFrame, origin: int | None = None) -> None:
    """Fill ``frame['step']`` in place from its ``start_us`` and step windows (absolute ns)."""
    if "start_us" not in frame or origin is None:
        return
    ts = np.round(frame["start_us"].to_numpy(np.float64) * 1000).astype(np.int64) + origin
    frame["step"] = step_index(ts, spans)


def union_us(start_ns: np.ndarray, end_ns: np.ndarray) -> float:
    """Length in µs of the union of intervals (vectorised)."""
    if len(start_ns) == 0:
        return 0.0
    order = np.argsort(start_ns, kind="stable")
    s = start_ns[order]
    e = np.maximum.accumulate(end_ns[order])
    prev_end = np.concatenate(([s[0]], e[:-1]))
    # each interval contributes the part that extends past everything before it
    contrib = np.maximum(e - np.maximum(s, prev_end), 0)
    contrib[0] = e[0] - s[0]
    return float(contrib.sum()) / 1000.0


def _merge(start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted intervals covering the same points."""
    if len(start_ns) == 0:
        return start_ns, end_ns
    order = np.argsort(start_ns, kind="stable")
    s = start_ns[order]
    e = np.maximum.accumulate(end_ns[order])
    new = np.concatenate(([True], s[1:] > e[:-1]))
    group = np.cumsum(new) - 1
    ms = s[new]
    me = np.zeros(len(ms), dtype=e.dtype)
    np.maximum.at(me, group, e)
    return ms, me


def _intersect_us(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """µs covered by both unions (both already merged)."""
    if not len(a[0]) or not len(b[0]):
        return 0.0
    pts_s = np.concatenate([a[0], b[0]])
    pts_e = np.concatenate([a[1], b[1]])
    return (union_us(a[0], a[1]) + union_us(b[0], b[1]) - union_us(pts_s, pts_e))


def overlap_breakdown(start_ns: np.ndarray, end_ns: np.ndarray, category: np.ndarray,
                      spans: pd.DataFrame) -> pd.DataFrame:
    """Per-step computing / communication / overlap / free from device intervals.

    Same definitions as Ascend's Overlap Analysis: computing = union of compute (and memory)
    kernels, communication = union of communication kernels, not-overlapped = communication
    minus the part under computing, free = step span minus the union of all kernels.
    The step span is the window from the first to the last device interval of the step.
    """
    rows = []
    step_of = step_index(start_ns, spans)
    for step in spans["step"].to_numpy():
        sel = step_of == step
        if not sel.any():
            continue
        s, e, c = start_ns[sel], end_ns[sel], category[sel]
        comm = c == "communication"
        comp = ~comm
        comp_u = _merge(s[comp], e[comp])
        comm_u = _merge(s[comm], e[comm])
        computing = union_us(*comp_u)
        communication = union_us(*comm_u)
        overlapped = _intersect_us(comp_u, comm_u)
        busy = union_us(s, e)
        span = (e.max() - s.min()) / 1000.0
        rows.append({"step": int(step), "computing_us": computing,
                     "communication_us": communication,
                     "comm_not_overlapped_us": communication - overlapped,
                     "overlapped_us": overlapped, "free_us": span - busy})
    return pd.DataFrame(rows)


def grouped_breakdown(start_ns: np.ndarray, end_ns: np.ndarray, is_comm: np.ndarray,
                      step: np.ndarray, windows: pd.DataFrame) -> pd.DataFrame | None:
    """:func:`overlap_breakdown` of every step at once, each step its own window.

    ``step`` (float) says which step each device interval belongs to and ``windows``
    (``step``, ``start_ns``, ``end_ns``; one row per step, in output order) is each step's
    window, as the per-step loop gives them. The unions are computed for all steps in one
    sorted sweep (steps are moved apart on the time axis so their intervals never touch);
    every sum is an exact integer of nanoseconds, so the figures equal the loop's.

    Returns None when the sweep cannot be used (a missing start, or times so far apart
    that moving the steps apart would overflow int64): the caller then loops.
    """
    n_win = len(windows)
    if not len(start_ns) or not n_win or (start_ns == NA_NS).any():
        return None
    slot = pd.Index(windows["step"].to_numpy(np.float64)).get_indexer(step)
    if (slot < 0).any():
        return None
    w_start = windows["start_ns"].to_numpy(np.int64)
    w_end = windows["end_ns"].to_numpy(np.int64)
    # as overlap_breakdown's step_index: a start inside [window start, window end)
    keep = (start_ns >= w_start[slot]) & (start_ns < w_end[slot])
    s, e, comm, slot = start_ns[keep], end_ns[keep], is_comm[keep], slot[keep]
    if not len(s):
        return None
    lo = int(s.min())
    width = int(max(int(e.max()), int(s.max())) - lo) + 1
    if width <= 0 or (n_win + 1) * width >= 1 << 62:
        return None
    shift = slot.astype(np.int64) * np.int64(width) - np.int64(lo)

    def union(sel: np.ndarray) -> np.ndarray:
        ss, ee, gg = s[sel] + shift[sel], e[sel] + shift[sel], slot[sel]
        order = np.argsort(ss, kind="stable")
        ss, ee, gg = ss[order], ee[order], gg[order]
        run = np.maximum.accumulate(ee)
        prev = np.concatenate(([ss[0]], run[:-1])) if len(ss) else run
        contrib = np.maximum(run - np.maximum(ss, prev), 0)
        return _group_sum(contrib, gg, n_win)

    busy = union(np.ones(len(s), dtype=bool))
    computing = union(~comm)
    communication = union(comm)
    present = np.bincount(slot, minlength=n_win) > 0
    first = np.full(n_win, np.iinfo(np.int64).max)
    last = np.full(n_win, np.iinfo(np.int64).min)
    np.minimum.at(first, slot, s)
    np.maximum.at(last, slot, e)
    comp_us = computing.astype(np.float64) / 1000.0
    comm_us = communication.astype(np.float64) / 1000.0
    busy_us = busy.astype(np.float64) / 1000.0
    # as _intersect_us: computing + communication - their union (0.0 when one is empty)
    overlapped = comp_us + comm_us - busy_us
    span = (last - first) / 1000.0
    out = pd.DataFrame({
        "step": windows["step"].to_numpy(np.int64), "computing_us": comp_us,
        "communication_us": comm_us, "comm_not_overlapped_us": comm_us - overlapped,
        "overlapped_us": overlapped, "free_us": span - busy_us})
    return out[present].reset_index(drop=True)


def _group_sum(values: np.ndarray, group: np.ndarray, n: int) -> np.ndarray:
    """Exact int64 sum of ``values`` per group id (0 .. n-1)."""
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, group, values)
    return out


def host_steps(start_ns: np.ndarray, end_ns: np.ndarray, is_comm: np.ndarray,
               spans: pd.DataFrame, host_computes: bool,
               thread: np.ndarray | None = None) -> pd.DataFrame:
    """Per-step wall time and host/device split of a profile without device tasks.

    The step's wall time is its span (``ProfilerStep#N``, or the window the reader built for
    a graph run). ``host_us`` is the union of the host events inside the span; no device
    task was recorded, so ``device_us`` is NA. When the host is the device that computes
    (``host_computes``: a CPU-only training run), the span splits like a device step:
    ``computing_us`` = union of the non-communication host events, ``communication_us`` =
    union of the communication events (:data:`HOST_COMM_PATTERN`),
    ``comm_not_overlapped_us`` = the part of it outside computing, ``free_us`` = span −
    ``host_us``; the three parts add up to the span. Otherwise (an accelerator job whose
    device activity was not recorded) those parts are NA and only the span and
    ``host_us`` are known.

    With ``thread``, a thread's time inside a communication event is not computing on that
    thread, even when an enclosing operator (the backward pass, the optimizer) is open
    around it: computing is the union over threads of each thread's non-communication
    events minus its own communication events. A collective that runs on another thread
    (gloo's) while this one computes stays overlapped.

    Parameters
    ----------
    start_ns, end_ns : numpy.ndarray
        Host event intervals (absolute ns).
    is_comm : numpy.ndarray of bool
        Which events are communication.
    spans : DataFrame
        ``step``, ``start_ns``, ``end_ns`` (from :func:`step_spans`).
    host_computes : bool
    thread : numpy.ndarray, optional
        Thread code of each event (see above).

    Returns
    -------
    DataFrame
        ``step``, ``total_us``, ``host_us``, ``device_us``, ``computing_us``,
        ``communication_us``, ``comm_not_overlapped_us``, ``overlapped_us``, ``free_us``,
        ``step_start_ns``; one row per span.
    """
    rows = []
    for step, a, b in spans[["step", "start_ns", "end_ns"]].itertuples(index=False):
        s = np.clip(start_ns, a, b)
        e = np.clip(end_ns, a, b)
        sel = e > s
        s, e, c = s[sel], e[sel], is_comm[sel]
        total = (b - a) / 1000.0
        host = union_us(s, e)
        row = {"step": int(step), "total_us": total, "host_us": host, "device_us": np.nan,
               "step_start_ns": int(a)}
        if host_computes:
            comm_u = _merge(s[c], e[c])
            if thread is None:
                comp_u = _merge(s[~c], e[~c])
            else:
                comp_u = _computing(s, e, c, thread[sel])
            comm = union_us(*comm_u)
            overlapped = _intersect_us(comp_u, comm_u)
            row.update(computing_us=union_us(*comp_u), communication_us=comm,
                       comm_not_overlapped_us=max(comm - overlapped, 0.0),
                       overlapped_us=overlapped, free_us=max(total - host, 0.0))
        else:
            row.update(computing_us=np.nan, communication_us=np.nan,
                       comm_not_overlapped_us=np.nan, overlapped_us=np.nan, free_us=np.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def _computing(s: np.ndarray, e: np.ndarray, is_comm: np.ndarray, thread: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """Union over threads of each thread's non-communication intervals minus its own
    communication intervals (merged, disjoint)."""
    parts_s, parts_e = [], []
    for t in np.unique(thread):
        mine = thread == t
        comp = _merge(s[mine & ~is_comm], e[mine & ~is_comm])
        comm = _merge(s[mine & is_comm], e[mine & is_comm])
        a, b = _subtract(comp, comm)
        parts_s.append(a)
        parts_e.append(b)
    if not parts_s:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return _merge(np.concatenate(parts_s), np.concatenate(parts_e))


def _subtract(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
              ) -> tuple[np.ndarray, np.ndarray]:
    """The parts of the merged intervals ``a`` outside the merged intervals ``b``."""
    if not len(a[0]) or not len(b[0]):
        return a
    # cut points: every boundary; keep the pieces inside a and outside b
    pts = np.unique(np.concatenate([a[0], a[1], b[0], b[1]]))
    lo, hi = pts[:-1], pts[1:]  # each piece [lo, hi) lies wholly inside or outside each

    def inside(iv: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        i = np.searchsorted(iv[0], lo, side="right") - 1
        ok = i >= 0
        return ok & (lo < iv[1][np.clip(i, 0, None)])

    keep = inside(a) & ~inside(b)
    return _merge(lo[keep], hi[keep])


def device_wait_us(win: pd.DataFrame, spans: pd.DataFrame,
                   busy: tuple[np.ndarray, np.ndarray] | None = None) -> pd.Series:
    """Per step, the device's idle time before its first task (µs): from the step's host
    start (its ``ProfilerStep`` span), or from the end of the previous step's device work
    when that is later, to the first task the step launched; 0 when the device never
    waited. What Ascend's ``Preparing`` measures (framework step start to first device
    task): the time the host spent before it launched anything, e.g. fetching the batch.
    The previous step's tail is left out because it is already in that step's window (a
    GPU runs behind the host), so that no device time is counted in two steps: the window
    and the wait before it are the step's wall time (:func:`perfkit.analysis.measured_step_s`).

    ``win``: the steps' device windows (``step``, ``start_ns``, ``end_ns``), sorted by
    start; ``spans``: the host ``ProfilerStep`` spans (``step``, ``start_ns``); ``busy``:
    (start, end) in ns of the device tasks of no step (launched before the trace began, or
    outside every span): the device runs them, so their time in that range is not a wait.
    Used by the Kineto reader and by the preview (:mod:`perfkit.io.preview.steps`), which must
    agree."""
    # in int64 nanoseconds throughout: an epoch timestamp in float64 is off by up to 128 ns
    host = spans.drop_duplicates("step").set_index("step")["start_ns"]
    w_start = win["start_ns"].to_numpy(np.int64)  # windows sorted by start
    w_end = np.maximum.accumulate(win["end_ns"].to_numpy(np.int64))
    at = pd.Index(host.index).get_indexer(win["step"].to_numpy())
    own = at >= 0  # a step without a span of its own has no known wait (NaN)
    host_start = np.where(own, host.to_numpy(np.int64)[np.maximum(at, 0)], NA_NS)
    before = np.r_[NA_NS, w_end[:-1]]  # NA_NS: no previous window
    lo = np.maximum(host_start, before)
    idle = (w_start - lo).astype(np.float64)
    if busy is not None and len(busy[0]):
        covered = _busy_time(busy[0], busy[1])
        idle -= np.where(w_start > lo, covered(w_start) - covered(lo), 0)
    return pd.Series(np.where(own, np.clip(idle / 1000.0, 0.0, None), np.nan),
                     index=win["step"].to_numpy())


def device_tail(win: pd.DataFrame, spans: pd.DataFrame,
                busy: tuple[np.ndarray, np.ndarray] | None = None) -> pd.DataFrame:
    """Per step, the device's idle time after its last task that the step's own span covers.

    From the end of the step's device work (or of an earlier step's, when that is later) to
    the end of its host span (``ProfilerStep#N``, or the iteration an optimizer marks), or
    to the start of the next step's device work when that is sooner; less the time the
    device ran tasks of no step in that range. The host is still in the step then (its
    optimizer, a synchronisation, logging) while the device waits for it: that idle time is
    the step's free time, and the step's wall time (:func:`perfkit.analysis.measured_step_s`)
    covers its span as the interval between iterations does, instead of leaving it in no
    step. 0 where the device ran past the span's end (a GPU behind the host, the usual
    case) and for a step without a span of its own.

    ``win`` and ``busy`` are those of :func:`device_wait_us` (windows sorted by start);
    ``spans`` has ``step`` and ``end_ns``. Returns ``step``, ``end_ns`` (where the step's
    device time ends, its idle tail included: the next step's wait is measured from there,
    so that no time counts in two steps) and ``idle_us``, in the order of ``win``. Used by
    the Kineto reader and by the preview (:mod:`perfkit.io.kineto.scan`), which must agree.
    """
    ends = spans.drop_duplicates("step").set_index("step")["end_ns"]
    steps = win["step"].to_numpy()
    w_start = win["start_ns"].to_numpy(np.int64)
    w_end = win["end_ns"].to_numpy(np.int64)
    done = np.maximum.accumulate(w_end)  # the device work of this step and the earlier ones
    at = pd.Index(ends.index).get_indexer(steps)
    own = at >= 0
    span_end = np.where(own, ends.to_numpy(np.int64)[np.maximum(at, 0)], NA_NS)
    hi = np.minimum(span_end, np.r_[w_start[1:], np.iinfo(np.int64).max])
    tail = own & (hi > done)
    idle = np.where(tail, hi - done, 0)
    if busy is not None and len(busy[0]) and tail.any():
        covered = _busy_time(busy[0], busy[1])
        idle = idle - np.where(tail, covered(hi) - covered(done), 0)
    return pd.DataFrame({"step": steps, "end_ns": np.where(tail, hi, w_end),
                         "idle_us": np.clip(idle, 0, None) / 1000.0})


def _busy_time(start: np.ndarray, end: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """A function ``t -> ns`` of the union of the intervals ``[start, end)`` before ``t``
    (overlapping intervals counted once)."""
    order = np.argsort(start, kind="stable")
    s = start[order].astype(np.int64)
    e = np.maximum.accumulate(end[order].astype(np.int64))
    # merged runs: a new one starts where an interval begins after every earlier end
    new = np.r_[True, s[1:] > e[:-1]]
    run_s = s[new]
    run_e = np.r_[e[np.flatnonzero(new)[1:] - 1], e[-1]]
    before = np.r_[0, np.cumsum(run_e - run_s)]  # union length before each run

    def covered(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(run_s, t, side="right") - 1
        inside = np.clip(t - run_s[np.maximum(i, 0)], 0, (run_e - run_s)[np.maximum(i, 0)])
        return np.where(i >= 0, before[np.maximum(i, 0)] + inside, 0)

    return covered
