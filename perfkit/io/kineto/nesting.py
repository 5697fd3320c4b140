"""Events nested on one thread: which one encloses which, and the time left to each.

On one thread host events nest (an operator calls the operators it is made of).
:func:`last_open` finds, for each time, the innermost interval still open then;
:func:`_parents` the event directly enclosing each event, :func:`self_times` each event's
duration less that of the events directly inside it, :func:`_outermost` the events no
other encloses, and :func:`_thread_codes` the shared integer codes the threads are
compared by.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT

__all__ = ["last_open", "self_times"]


def _thread_codes(*tids: pd.Series) -> tuple[np.ndarray, ...]:
    """The threads of several frames as shared integer codes (-1 where unknown).

    Threads are compared as text (an int tid and the same number written as text are one
    thread), as ``astype(TEXT)`` equality would.
    """
    # each frame's few distinct threads first, then only those as text: the same codes as
    # factorizing every row's text (numbered by first appearance over the frames in order)
    coded = [pd.factorize(t) for t in tids]
    distinct = [pd.Series(u).astype(TEXT) for _, u in coded]
    shared, _ = pd.factorize(pd.concat(distinct, ignore_index=True)) if distinct else (
        np.zeros(0, dtype=np.intp), None)
    out, at = [], 0
    for (codes, _), d in zip(coded, distinct, strict=True):
        lookup = np.append(shared[at:at + len(d)], -1)  # a missing thread (-1) stays -1
        out.append(lookup[codes])
        at += len(d)
    return tuple(out)


def last_open(starts: np.ndarray, ends: np.ndarray, ts: np.ndarray,
              upto: np.ndarray | None = None, closed_end: bool = False) -> np.ndarray:
    """For each time in ``ts``, the last interval that started at or before it and is open.

    ``starts`` sorted ascending, ``ends`` alongside (int64 ns). Returns, per time ``t``, the
    largest position ``i`` with ``starts[i] <= t`` and ``ends[i] >= t``, or -1. On one
    thread operators nest, so this is the innermost operator open at ``t``.
    ``upto`` (per time): only positions below it are candidates (the events before one
    event, to find the one enclosing it); ``closed_end``: an interval ending exactly at
    ``t`` is not open (``ends[i] > t``).

    The same as walking back from the last interval that started before ``t`` until one
    is still open, but with a sparse table of running maxima of ``ends`` (``levels[k][i]``
    = the largest end among positions ``i - 2**k + 1 .. i``): each time takes at most
    log2(n) vectorised steps instead of a Python loop that can walk the whole thread.
    """
    n = len(starts)
    cur = np.searchsorted(starts, ts, side="right")  # positions < cur started by t
    if upto is not None:
        cur = np.minimum(cur, upto)
    if not n or not len(ts):
        return cur - 1
    levels = [ends]
    while (1 << len(levels)) <= n:
        prev, span = levels[-1], 1 << (len(levels) - 1)
        nxt = prev.copy()
        np.maximum(prev[span:], prev[:-span], out=nxt[span:])
        levels.append(nxt)
    # invariant: every position in cur .. (last started) has ended before t
    for k in range(len(levels) - 1, -1, -1):
        cand = cur - (1 << k)
        ok = cand >= 0
        idx = np.where(ok, cur - 1, 0)
        ok &= (levels[k][idx] <= ts) if closed_end else (levels[k][idx] < ts)
        cur = np.where(ok, cand, cur)
    return cur - 1


def _parents(start_ns: np.ndarray, end_ns: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """Row of the innermost event enclosing each event on its thread (-1: none)."""
    n = len(start_ns)
    out = np.full(n, -1, dtype=np.int64)
    if not n:
        return out
    # per thread, by start, the enclosing event first (longer first at equal starts)
    order = np.lexsort((-end_ns, start_ns, thread))
    th, st, en = thread[order], start_ns[order], end_ns[order]
    bounds = np.flatnonzero(np.r_[True, th[1:] != th[:-1], True])
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        if b - a < 2:
            continue
        pos = last_open(st[a:b], en[a:b], st[a:b], upto=np.arange(b - a), closed_end=True)
        ok = pos >= 0
        out[order[a:b][ok]] = order[a:b][pos[ok]]
    return out


def self_times(start_ns: np.ndarray, end_ns: np.ndarray, thread: np.ndarray,
               dur_us: np.ndarray) -> np.ndarray:
    """Self time (µs) of nested host events: duration minus the durations of the events
    directly inside it on the same thread (never below zero; NA where ``dur_us`` is).

    The events of a thread nest (an operator calls the operators it is made of); the sum
    of the self times of a thread is the union of its events, each microsecond counted once.
    """
    parent = _parents(start_ns, end_ns, thread)
    dur = np.nan_to_num(dur_us.astype(np.float64))
    child = np.zeros(len(dur))
    has = parent >= 0
    np.add.at(child, parent[has], dur[has])
    out = np.maximum(dur - child, 0.0)
    out[np.isnan(dur_us.astype(np.float64))] = np.nan
    return out


def _outermost(c: pd.DataFrame) -> np.ndarray:
    """Events not nested inside another of ``c`` on the same thread."""
    if not len(c):
        return np.zeros(0, dtype=bool)
    start = c["ts_ns"].to_numpy()
    end = start + np.round(np.nan_to_num(c["dur_us"].to_numpy(np.float64)) * 1000
                           ).astype(np.int64)
    (thread,) = _thread_codes(c["tid"])
    parent = _parents(start, end, thread)
    return parent < 0
