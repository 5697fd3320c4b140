"""A few whole steps cut from a large Kineto trace, read as :func:`perfkit.load` reads the trace.

A Kineto trace of a gigabyte takes seconds to parse, but each of its steps is a small part
of it. :func:`cut_steps` writes out the events of a few consecutive ``ProfilerStep#N`` s
without parsing the rest, and :func:`read_excerpt` loads that excerpt with the trace's own
reader: its steps' split (computing, communication, free), and the job read from their
operator shapes, are the full load's for those steps, in a fraction of its time.

**What is cut.** Given the host ``ProfilerStep#N`` spans (:func:`perfkit.io.kineto.scan.
kineto_step_spans`, a byte scan), the excerpt holds the steps reported and one step on each
side. A step's wait before its first task and its idle tail are measured against its
neighbours' device work (:func:`perfkit.io.chrome.tables.device_wait_us`, :func:`~perfkit.io.
trace_tables.device_tail`), so a reported step needs both neighbours:

- every host event (operators, annotations, runtime calls, instants) that starts in the
  host window, from the first kept step's start to the last kept step's end;
- every device task (kernel, memcpy, memset) whose launch, same ``correlation``, is among
  those runtime calls, and each task without a correlation that starts in the window;
- the flow events (``ac2g``) of those correlations, the device lane's annotations within
  the kept tasks' time, the metadata events (``ph: "M"``: process and thread names, which
  libkineto writes together before or after the other events), and the document's keys
  other than ``traceEvents`` (``deviceProperties``, ``distributedInfo`` ...).

**How it is found without parsing.** The trace's events are probed at up to
:data:`_PROBES` evenly spaced offsets: at each, the events of the next :data:`_SAMPLE`
bytes are decoded for their earliest and latest ``ts``. libkineto writes the host events
and then the device activity, each in time order (the shared H100 and B200 traces: not one
device task out of order; runtime calls and the tasks they launched interleaved, the tasks
running later, which a probe's sample sees both of), and a trace assembled step by step
keeps each step's events together: either way, the events of a time window lie between the
probes whose times bound it. Only those stretches are decoded, the events kept by the rules
above, and the cut checked: the event halfway between each pair of probes left out must be
out of the window too, and the stretches must be at most :data:`MAX_READ_SHARE` of the
trace (else its events are not in such an order: no excerpt); a kept task ending less than
a step before the end of what was read may have one beyond it, and the read is widened (up
to :data:`WIDEN_TRIES` times) or given up.

The steps reported are the middle ones, as many as :data:`EXCERPT_BYTES` of events allow
(at least one): a trace's first and last steps are where warm-up and the profiler's own
start and stop show.
"""

from __future__ import annotations

import mmap
import os
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from ...errors import PerfkitError
from ..canonical.categories import DEVICE_KINDS, KINETO_KINDS
from ..engines.local import load
from .scan import _object_at

__all__ = ["Excerpt", "cut_steps", "read_excerpt", "middle_steps", "EXCERPT_BYTES",
           "MIN_TRACE_BYTES", "MAX_READ_BYTES", "MAX_READ_SHARE", "WIDEN_TRIES"]

#: About this many bytes of the trace are read for the steps reported (at least one step
#: and its two neighbours are read, however large).
EXCERPT_BYTES = 4 << 20
#: Below this size a trace is loaded whole as fast as an excerpt is cut.
MIN_TRACE_BYTES = 64 << 20
#: An excerpt that would read more than this share of the trace is not cut: its events are
#: not in time order (a shuffled trace), and the load is as quick.
MAX_READ_SHARE = 0.9
#: An excerpt that would read more than this is not cut (steps so large that three of them
#: take seconds to read, as long as the first answer is meant to take in all).
MAX_READ_BYTES = 96 << 20
#: Times the read is widened when a reported step's tasks may run past it.
WIDEN_TRIES = 3
#: Bytes decoded at each probe.
_SAMPLE = 8 << 10
#: Bytes at each end of the event array where metadata events are looked for.
_META_BYTES = 4 << 20
#: Probes of the trace's offsets (fewer in a small trace: one per 16 KiB at most).
_PROBES = 4096

_DEVICE_CATS = frozenset(c for c, k in KINETO_KINDS.items() if k in DEVICE_KINDS)
_RUNTIME_CATS = frozenset(c for c, k in KINETO_KINDS.items() if k == "runtime")
_LANE_CATS = frozenset(c for c, k in KINETO_KINDS.items() if k == "gpu_user_annotation")
_PH_KEY = re.compile(rb'"ph"\s*:\s*')


class _Args(msgspec.Struct, gc=False):
    correlation: Any = None


class _Event(msgspec.Struct, gc=False):
    """The fields that decide whether an event is kept."""

    ph: Any = None
    cat: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: _Args | None = None


class _Time(msgspec.Struct, gc=False):
    ts: Any = None


_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_TIMES = msgspec.json.Decoder(list[_Time])
_EVENT = msgspec.json.Decoder(_Event)


@dataclass
class Excerpt:
    """Steps cut from a Kineto trace (:func:`cut_steps`).

    Attributes
    ----------
    text : bytes
        The excerpt: a Kineto trace of its own.
    steps : list of int
        The steps reported: each is whole, with its neighbours, in ``text``.
    kept : list of int
        Every ``ProfilerStep`` whose host span is in ``text`` (``steps`` and one on each
        side).
    events : int
        Events in ``text``.
    bytes_read : int
        Bytes of the trace decoded to cut it.
    trace_bytes : int
        Size of the trace.
    seconds : float
        How long the cut took.
    """

    text: bytes
    steps: list[int]
    kept: list[int]
    events: int
    bytes_read: int
    trace_bytes: int
    seconds: float


def cut_steps(path: str | os.PathLike[str], spans: pd.DataFrame,
              budget: int = EXCERPT_BYTES, report: Sequence[int] | None = None
              ) -> Excerpt | None:
    """Cut the middle steps of an uncompressed Kineto trace (module docstring).

    Parameters
    ----------
    path : path-like
        The trace (``.json``; a compressed trace has no offsets to probe: None).
    spans : DataFrame
        Its host ``ProfilerStep`` spans: ``step``, ``ts_us``, ``dur_us``
        (:func:`perfkit.io.kineto.scan.kineto_step_spans`).
    budget : int
        About how many bytes of events to read for the steps reported.
    report : sequence of int, optional
        The steps to report (default: the middle ones that ``budget`` allows, see
        :func:`middle_steps`); read with the steps just before and after them in the
        trace.

    Returns
    -------
    Excerpt or None
        None when the trace has fewer than three steps, is compressed, a step of
        ``report`` is missing or has no step before or after it, or the events are not in
        an order that lets a window be cut (each reported step's tasks not all found
        within :data:`WIDEN_TRIES` widenings).
    """
    began = time.perf_counter()
    p = Path(path)
    if p.suffix.lower() == ".gz" or spans is None or len(spans) < 3:
        return None
    spans = (spans.dropna(subset=["step", "ts_us", "dur_us"])
             .sort_values("ts_us", kind="mergesort").drop_duplicates("step"))
    if len(spans) < 3:
        return None
    try:
        with open(p, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return _cut(buf, p, spans, budget, report, began)
    except (OSError, ValueError):  # unreadable, or empty (nothing to map)
        return None


def _cut(buf: Any, p: Path, spans: pd.DataFrame, budget: int,
         report: Sequence[int] | None, began: float) -> Excerpt | None:
    """:func:`cut_steps` on the mapped trace ``buf``."""
    bounds = _array_bounds(buf)
    if bounds is None:
        return None
    lo, hi = bounds
    if report is None:
        report = middle_steps(spans["step"], hi - lo, budget)
    at = np.flatnonzero(spans["step"].isin(list(report)).to_numpy())
    if not len(report) or len(at) != len(set(report)) or at[0] < 1 or \
            at[-1] + 1 >= len(spans):
        return None
    first, count = int(at[0]), int(at[-1] - at[0] + 1)
    kept = spans.iloc[first - 1:first + count + 1]
    host = (float(kept["ts_us"].iloc[0]),
            float((kept["ts_us"] + kept["dur_us"]).max()))
    key = _PH_KEY.search(buf, lo, min(hi, lo + (1 << 20)))
    if key is None:
        return None
    key = key.group()  # how this trace spells it: '"ph":' or '"ph": '
    probes = _probe(buf, lo, hi, key)
    longest = float(kept["dur_us"].max())
    widen = longest  # a device seldom runs a step behind its host: widened if it does
    for _ in range(WIDEN_TRIES):
        window = (host[0], host[1] + widen)
        stretches = _stretches(probes, window, hi)
        span = sum(e - s for s, e in stretches)
        if span > MAX_READ_BYTES or span > MAX_READ_SHARE * (hi - lo) or \
                not _order_holds(buf, probes, stretches, window, key):
            return None  # no faster than the whole load, or events out of order
        events, read = _kept_events(buf, stretches, host, window)
        if events is None:
            return None
        last_end = events[1]
        # a reported step's last task ending less than a step before the end of what
        # was read may have a task beyond it: read further
        if last_end is None or last_end + longest <= window[1]:
            break
        widen *= 4.0
    else:
        return None
    meta = _metadata(buf, lo, hi, key, stretches)
    text = b"".join([bytes(buf[:lo + 1]), b"\n", b",\n".join(meta + events[0]), b"\n",
                     bytes(buf[hi:])])
    reported = [int(s) for s in spans["step"].iloc[first:first + count]]
    return Excerpt(text, reported, [int(s) for s in kept["step"]], len(meta) + len(events[0]),
                   read, p.stat().st_size, time.perf_counter() - began)


def middle_steps(steps: Sequence[int] | pd.Series, array_bytes: float,
                 budget: int = EXCERPT_BYTES) -> list[int]:
    """The middle steps of ``steps`` (in time order) that about ``budget`` bytes of a trace
    of ``array_bytes`` of events hold (a step's share of the bytes taken as even), at least
    one; the first and the last are never among them (each reported step is read with its
    neighbours). Empty with fewer than three steps."""
    steps = [int(s) for s in steps]
    if len(steps) < 3:
        return []
    per_step = max(array_bytes / len(steps), 1.0)
    count = int(max(1, min(len(steps) - 2, budget // per_step)))
    first = (len(steps) - count) // 2
    return steps[first:first + count]


def read_excerpt(path: str | os.PathLike[str], spans: pd.DataFrame,
                 budget: int = EXCERPT_BYTES, report: Sequence[int] | None = None
                 ) -> tuple[Any, Excerpt] | None:
    """:func:`cut_steps`, loaded with perfkit's Kineto reader: the profile of the excerpt
    (its ``steps`` table holds the kept steps: use ``Excerpt.steps``) and the excerpt, or
    None (see :func:`cut_steps`). The excerpt is written to a temporary folder, removed
    after (nothing is written beside the trace, nor to perfkit's cache)."""
    excerpt = cut_steps(path, spans, budget, report)
    if excerpt is None:
        return None
    folder = tempfile.mkdtemp(prefix="perfkit-excerpt-")
    try:
        target = Path(folder) / Path(path).name
        target.write_bytes(excerpt.text)
        profile = load(target, cache=False, progress=False)
    except PerfkitError:
        return None  # the full load says what is wrong
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return profile, excerpt


# ---- finding the events without parsing ---------------------------------------------

def _array_bounds(buf: Any) -> tuple[int, int] | None:
    """Offsets of the ``traceEvents`` array's ``[`` and ``]``, or None."""
    key = buf.find(b'"traceEvents"')
    lo = buf.find(b"[", key) if key >= 0 else -1
    if lo < 0:
        return None
    tail_from = max(lo + 1, len(buf) - (1 << 20))
    tail = bytes(buf[tail_from:])
    at = len(tail)
    while (at := tail.rfind(b"]", 0, at)) >= 0:
        rest = tail[at + 1:].decode("utf-8", "replace").strip()
        if rest.startswith(","):
            rest = rest[1:]
        try:  # what follows the array is the rest of the document's keys
            msgspec.json.decode(("{" + rest) if rest != "}" else "{}")
        except msgspec.DecodeError:
            continue
        return lo, tail_from + at
    return None


def _event_from(buf: Any, pos: int, hi: int, key: bytes
                ) -> tuple[int, dict[str, Any]] | None:
    """The first event whose ``"ph"`` key (spelt ``key``) starts at or after ``pos``: its
    start and the event decoded; None when there is none before ``hi``."""
    while (hit := buf.find(key, pos, hi)) >= 0:
        found = _object_at(buf, hit)
        if found is not None:
            return found
        pos = hit + len(key)
    return None


def _probe(buf: Any, lo: int, hi: int, key: bytes) -> list[tuple[int, float, float]]:
    """(start offset, earliest ts, latest ts) of the events at evenly spaced offsets of the
    array, in order of offset: the events of the first :data:`_SAMPLE` bytes from each
    offset, so that a probe sees both series where two are written interleaved (runtime
    calls, and the tasks they launched running later). NaN where none has a numeric
    ``ts`` (metadata)."""
    count = int(min(_PROBES, max(2, (hi - lo) // (16 << 10))))
    out: list[tuple[int, float, float]] = [(lo + 1, np.nan, np.nan)]
    for pos in np.linspace(lo + 1, hi, count, endpoint=False)[1:]:
        found = _event_from(buf, int(pos), hi, key)
        if found is None:
            break
        start, obj = found
        if start <= out[-1][0]:
            continue
        times = _sample_times(buf, start, hi, key)
        first = _number(obj.get("ts"))
        times = [t for t in (*times, first) if np.isfinite(t)]
        out.append((start, min(times), max(times)) if times else (start, np.nan, np.nan))
    out.append((hi, np.nan, np.nan))
    return out


def _sample_times(buf: Any, start: int, hi: int, key: bytes) -> list[float]:
    """The ``ts`` of the whole events in ``buf[start:start + _SAMPLE]`` (``start``: an
    event's start), decoded at once; empty where the bytes do not decode as events (an
    event whose ``ph`` is not its first key)."""
    chunk = bytes(buf[start:min(hi, start + _SAMPLE)])
    last = chunk.rfind(key)
    brace = chunk.rfind(b"{", 0, last) if last > 0 else -1
    if brace <= 0:
        return []
    body = chunk[:brace].rstrip().rstrip(b",")
    try:
        events = _TIMES.decode(b"[" + body + b"]")
    except msgspec.DecodeError:
        return []
    return [_number(e.ts) for e in events]


def _stretches(probes: list[tuple[int, float, float]], window: tuple[float, float],
               hi: int) -> list[tuple[int, int]]:
    """Byte ranges between probes that may hold events of ``window`` (µs): those whose
    bounding probes' times meet it or straddle it, or are unknown, with one range more on
    each side; adjacent ranges merged."""
    starts = np.array([p[0] for p in probes])
    early = np.array([p[1] for p in probes])
    late = np.array([p[2] for p in probes])
    unknown = np.isnan(early[:-1]) | np.isnan(early[1:])
    low, high = np.fmin(early[:-1], early[1:]), np.fmax(late[:-1], late[1:])
    meets = unknown | ((low <= window[1]) & (high >= window[0]))
    near = meets.copy()
    near[1:] |= meets[:-1]
    near[:-1] |= meets[1:]
    out: list[tuple[int, int]] = []
    for i in np.flatnonzero(near):
        s, e = int(starts[i]), int(starts[i + 1])
        if out and out[-1][1] == s:
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _order_holds(buf: Any, probes: list[tuple[int, float, float]], stretches: list[tuple[int, int]],
                 window: tuple[float, float], key: bytes) -> bool:
    """Whether the events between probes that :func:`_stretches` left out are out of
    ``window`` as their bounding probes say: the event halfway between each such pair is
    decoded, and one inside the window means the trace's events are not in the order a cut
    needs (shuffled, or sorted on another key), so that the excerpt would miss events."""
    read = iter(stretches)
    current = next(read, None)
    for (a, *_ta), (b, *_tb) in zip(probes[:-1], probes[1:], strict=True):
        while current is not None and current[1] <= a:
            current = next(read, None)
        if current is not None and current[0] <= a < current[1]:
            continue  # read anyway
        found = _event_from(buf, (a + b) // 2, b, key)
        if found is not None and _inside(found[1].get("ts"), window):
            return False
    return True


def _kept_events(buf: Any, stretches: list[tuple[int, int]], host: tuple[float, float],
                 window: tuple[float, float]
                 ) -> tuple[tuple[list[bytes], float | None] | None, int]:
    """The events of ``stretches`` that the excerpt keeps (module docstring) as raw bytes,
    with the end of the last device task kept (µs, None without any); and the bytes read.
    None (and the bytes) when a stretch does not decode as a run of events."""
    raws: list[msgspec.Raw] = []
    read = 0
    for s, e in stretches:
        chunk = bytes(buf[s:e]).rstrip()
        read += len(chunk)
        if chunk.endswith(b","):
            chunk = chunk[:-1]
        if not chunk:
            continue
        try:
            raws.extend(_RAWS.decode(b"[" + chunk + b"]"))
        except msgspec.DecodeError:
            return None, read
    events: list[tuple[msgspec.Raw, _Event]] = []
    for raw in raws:
        try:
            events.append((raw, _EVENT.decode(raw)))
        except msgspec.DecodeError:
            continue
    launches: set[Any] = set()
    for _raw, ev in events:  # the runtime calls of the host window launch the kept tasks
        if _cat(ev) in _RUNTIME_CATS and ev.args is not None and \
                ev.args.correlation is not None and _inside(ev.ts, host):
            launches.add(_key(ev.args.correlation))
    kept: list[bytes] = []
    lanes: list[tuple[msgspec.Raw, _Event]] = []
    last_end: float | None = None
    first_start: float | None = None
    for raw, ev in events:
        cat = _cat(ev)
        if ev.ph == "M":
            continue  # they come from their own scan (_metadata)
        if cat in _DEVICE_CATS:
            corr = None if ev.args is None else ev.args.correlation
            if (corr is not None and _key(corr) in launches) or \
                    (corr is None and _inside(ev.ts, window)):
                kept.append(bytes(raw))
                start, dur = _number(ev.ts), _number(ev.dur)
                end = start + (dur if np.isfinite(dur) else 0.0)
                if np.isfinite(end):
                    last_end = end if last_end is None else max(last_end, end)
                    first_start = start if first_start is None else min(first_start, start)
        elif cat in _LANE_CATS:
            lanes.append((raw, ev))
        elif ev.ph in ("s", "f", "t") and cat == "ac2g":  # launch -> task, by correlation
            if _key(ev.id) in launches:
                kept.append(bytes(raw))
        elif _inside(ev.ts, host):
            kept.append(bytes(raw))
    if first_start is not None and last_end is not None:
        kept.extend(bytes(raw) for raw, ev in lanes
                    if _inside(ev.ts, (first_start, last_end)))
    return (kept, last_end), read


def _metadata(buf: Any, lo: int, hi: int, key: bytes, stretches: list[tuple[int, int]]
              ) -> list[bytes]:
    """The metadata events (``ph: "M"``, its key spelt ``key``: process and thread names
    and labels) of the array's first and last :data:`_META_BYTES` and of ``stretches``,
    each once, as raw bytes. libkineto writes them all together, before the other events
    or after them."""
    seen: dict[bytes, None] = {}
    key = key + b'"M"'
    ends = [(lo, min(hi, lo + _META_BYTES)), (max(lo, hi - _META_BYTES), hi), *stretches]
    for pos, stop in ends:
        while (hit := buf.find(key, pos, stop)) >= 0:
            pos = hit + len(key)
            found = _object_at(buf, hit)
            if found is not None and found[1].get("ph") == "M":
                seen.setdefault(msgspec.json.encode(found[1]), None)
    return list(seen)


def _cat(ev: _Event) -> str:
    return str(ev.cat).strip().lower() if ev.cat is not None else ""


def _key(value: Any) -> Any:
    """A correlation (or flow id) as one key, whether written as a number or a string."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return np.nan


def _inside(ts: Any, window: tuple[float, float]) -> bool:
    t = _number(ts)
    return bool(window[0] <= t <= window[1])
