"""The training iterations of a large Kineto trace without ``ProfilerStep``, by a byte scan.

:func:`~perfkit.io.kineto.scan.iteration_steps` reads a trace's iterations by decoding every
event (a fifth to a third of the full load's time), so the preview does it only up to
:data:`~perfkit.io.preview.steps.DEVICE_STEPS_MAX_BYTES`. Above it, :func:`iteration_spans` finds
the same iterations without parsing the file. The rules of
:mod:`perfkit.io.kineto.iterations` read three kinds of host events, and each is found by
the bytes of its name:

- the optimizer's annotations, ``"Optimizer.step#`` (one or a few per iteration), and the
  DataLoader's, ``"enumerate(DataLoader)#`` (one per batch): each occurrence is decoded as
  the JSON object around it, as :func:`~perfkit.io.kineto.scan.kineto_step_spans` does for
  ``"ProfilerStep#``;
- the backward functions, whose names end in ``Backward<N>`` or ``AccumulateGrad``
  (hundreds to thousands per iteration: one every 3 to 15 kB of the shared traces): each
  occurrence that ends a JSON string is read by two regular expressions, for the layout
  every Kineto version writes (``"ph"``, ``"cat"``, ``"name"``, ``"pid"``, ``"tid"``,
  ``"ts"``, ``"dur"`` in this order, any spacing): from the name's end on, one that the
  regular-expression engine finds by its first word (:data:`_AFTER`), and from the ``{``
  before it, one that ends at the name's end (:data:`_BEFORE`). An occurrence written
  otherwise is decoded as the JSON object around it.

Each event is kept as the loader keeps it (a complete event, ``ph`` ``"X"``, of a host
category: an operator or an annotation, not the copy on the device lane), with its ``ts`` and
``dur`` read as the loader reads them (float64, then nanoseconds), once however many of its
bytes were found. :func:`~perfkit.io.kineto.iterations.optimizer_spans` then makes the
loader's own windows of them. One thing the scan does not give: the first iteration begins at
the trace's first host event (any operator, annotation or runtime call), which only a pass
over every event finds; so :func:`iteration_spans` leaves the first iteration out, and every
other one is the loader's window exactly (from the end of the previous iteration's last
optimizer step to the end of its own).
"""

from __future__ import annotations

import gzip
import mmap
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...errors import file_boundary
from ..canonical.categories import KINETO_KINDS
from .iterations import optimizer_spans
from .scan import _CHUNK, _CONTEXT, _object_at
from .scan import _scan as _step_scan
from .scan_device import _ns, _num

__all__ = ["step_scan", "iteration_events", "iteration_spans"]

#: What the optimizer's annotation around ``step()`` is named, as bytes of the file.
_OPTIMIZER_KEY = b'"Optimizer.step#'
#: Events decoded whole: the optimizer's annotations and the DataLoader's (few).
_WHOLE_KEYS = (_OPTIMIZER_KEY, b'"enumerate(DataLoader)#')
_NUMBER = rb"(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
_TEXT = rb'"[^"\\]*"'
#: From the end of a backward function's name
#: (:data:`~perfkit.io.kineto.iterations.BACKWARD`) to its event's ``dur``: the name's
#: last word (group 1), then where Kineto's layout follows, the ``tid``, ``ts`` and
#: ``dur`` (groups 2-4; None otherwise). Each starts with a word, which the engine looks
#: for as :meth:`bytes.find` does.
_AFTER = tuple(re.compile(
    word + rb'"(?:\s*,\s*"pid"\s*:\s*(?:-?\d+|' + _TEXT + rb')\s*,\s*"tid"\s*:\s*(-?\d+|'
    + _TEXT + rb')\s*,\s*"ts"\s*:\s*' + _NUMBER + rb'\s*,\s*"dur"\s*:\s*' + _NUMBER
    + rb"\s*[,}])?") for word in (rb"(Backward\d*)", rb"(AccumulateGrad)"))
#: From the ``{`` of an event to the end of its name less the last word: ``ph``, ``cat``
#: and the name's start (groups 1-3), as Kineto writes them.
_BEFORE = re.compile(rb'\{\s*"ph"\s*:\s*"([^"\\]*)"\s*,\s*"cat"\s*:\s*"([^"\\]*)"\s*,'
                     rb'\s*"name"\s*:\s*"([^"\\]*)')
#: Kineto categories (lower-cased) of the host events the loader reads the rules' events from.
_HOST_CATS = frozenset(c for c, kind in KINETO_KINDS.items()
                       if kind in ("cpu_op", "user_annotation"))

#: A ``ProfilerStep#N`` event as :func:`~perfkit.io.kineto.scan.step_events` gives it:
#: (step, ts, dur).
Span = tuple[int, float, float]
#: An event decoded whole: (name, tid, ts, dur), ``ts`` and ``dur`` as decoded; None for
#: one the loader does not read as a host event.
Row = tuple[str, Any, Any, Any] | None


def step_scan(path: str | Path, iterations: bool = True
              ) -> tuple[list[Span], list[Span], pd.DataFrame | None]:
    """A Kineto trace's steps by one byte scan: its ``ProfilerStep#N`` events (step, ts,
    dur), host spans and copies on the device lane apart, as
    :func:`~perfkit.io.kineto.scan.step_events` gives them; and where it has none, the host
    events the iteration rules read (:func:`iteration_events`; None when there is no
    ``"Optimizer.step#`` either).

    The ``ProfilerStep#N`` events are looked for first; the iteration events only in the
    part of the file read before one is found (none of a mapped file, which is looked at
    whole; the chunks before it of a ``.gz``, which is decompressed once for both), so a
    trace with steps costs about what :func:`~perfkit.io.kineto.scan.step_events` does.
    ``iterations=False``: the ``ProfilerStep#N`` events only (the third item is None).

    Raises
    ------
    ProfileError
        The file cannot be read.
    """
    p = Path(path)
    steps: list[tuple[int, float, float, bool]] = []
    found = _Found()
    with file_boundary(p, p.name):
        for buf, base, pos, limit in _windows(p):
            _step_scan(buf, pos, limit, steps)
            if iterations and not steps:
                _scan(buf, base, pos, limit, found)
    host: list[Span] = [(n, ts, dur) for n, ts, dur, on_lane in steps if not on_lane]
    lane: list[Span] = [(n, ts, dur) for n, ts, dur, on_lane in steps if on_lane]
    return host, lane, (found.frame() if found.marked and not steps else None)


def iteration_events(path: str | Path) -> pd.DataFrame | None:
    """The host events the iteration rules read (``name``, ``tid``, ``ts_ns``, ``dur_us``),
    found by a byte scan (see the module); None when the file holds no
    ``"Optimizer.step#`` at all.

    Raises
    ------
    ProfileError
        The file cannot be read.
    """
    p = Path(path)
    found = _Found()
    with file_boundary(p, p.name):
        for buf, base, pos, limit in _windows(p):
            _scan(buf, base, pos, limit, found)
    return found.frame() if found.marked else None


def iteration_spans(cpu: pd.DataFrame, notes: list[str]) -> tuple[pd.DataFrame, str] | None:
    """The iteration windows the full load makes of a trace without ``ProfilerStep``
    (``step``, ``start_ns``, ``end_ns``: :func:`~perfkit.io.kineto.iterations.
    optimizer_spans`) of its events the iteration rules read (``cpu``:
    :func:`iteration_events`), less the first, whose start needs every event (see the
    module), and the name of the annotation that ends each; None when they tell no
    iteration (``notes`` then says why, as the full load's notes do)."""
    runtime = pd.DataFrame({"ts_ns": np.array([], np.int64)})
    spans, mark = optimizer_spans(cpu, runtime, notes)
    if mark is None:
        return None
    return spans[spans["step"] > 0].reset_index(drop=True), mark


def _windows(p: Path) -> Iterator[tuple[Any, int, int, int]]:
    """(buffer, offset of its first byte in the file, where its hits start, where they
    stop) over the trace's bytes: the file mapped whole, or a ``.gz`` decompressed chunk by
    chunk, each after the end of the previous one (an event cut by a chunk's end is whole
    in the next) and its hits stopping :data:`_CONTEXT` before its end (but the last's)."""
    if p.name.lower().endswith(".gz"):
        with gzip.open(p, "rb") as fh:
            carry, base, done = b"", 0, 0
            while True:
                chunk = fh.read(_CHUNK)
                buf = carry + chunk
                limit = len(buf) if not chunk else max(len(buf) - _CONTEXT, 0)
                yield buf, base, max(done - base, 0), limit
                done = base + limit
                if not chunk:
                    return
                carry = buf[-2 * _CONTEXT:]
                base += len(buf) - len(carry)
    elif p.stat().st_size:
        with open(p, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            yield mm, 0, 0, len(mm)


class _Found:
    """The events found: decoded whole (:attr:`whole`, by the file offset of their ``{``,
    each event once however many of its keys were found: name, tid, ts, dur), or read by
    the regular expressions (:attr:`raw`: the bytes of ph, cat, the name less its last
    word, that word, tid, ts, dur; one name's end per event, so each event once too),
    converted together by :meth:`frame`."""

    def __init__(self) -> None:
        self.whole: dict[int, Row] = {}
        self.raw: list[tuple[bytes, ...]] = []
        self.marked = False  # an "Optimizer.step# was found

    def frame(self) -> pd.DataFrame:
        """The events the loader reads as host events (see :func:`iteration_events`): the
        names as categories and the threads as written."""
        whole = [r for r in self.whole.values() if r is not None]
        host = {cat: cat.decode("utf-8", "replace").strip().lower() in _HOST_CATS
                for cat in {r[1] for r in self.raw}}
        raw = [r for r in self.raw if r[0] == b"X" and host[r[1]]]
        texts: dict[str, int] = {}  # each distinct name once, as a category
        split = {key: texts.setdefault((key[0] + key[1]).decode("utf-8", "replace"),
                                       len(texts)) for key in {(r[2], r[3]) for r in raw}}
        codes = [split[r[2], r[3]] for r in raw] + [texts.setdefault(r[0], len(texts))
                                                     for r in whole]
        tids = {t: _tid(t) for t in {r[4] for r in raw}}
        return pd.DataFrame({
            "name": pd.Categorical.from_codes(codes, categories=list(texts)),
            "tid": pd.Series([tids[r[4]] for r in raw] + [r[1] for r in whole],
                             dtype=object),
            # the numbers written as bytes: float64 as the loader reads them (both round
            # the decimal to the nearest float64)
            "ts_ns": _ns([*(float(r[5]) for r in raw), *(r[2] for r in whole)]),
            "dur_us": _num([*(float(r[6]) for r in raw), *(r[3] for r in whole)])})


def _scan(buf: Any, base: int, pos: int, limit: int, found: _Found) -> None:
    """Add the rules' events whose keys start in ``buf[pos:limit]`` to ``found``."""
    for key in _WHOLE_KEYS:
        at = pos
        while 0 <= (hit := buf.find(key, at, limit)):
            found.marked = found.marked or key == _OPTIMIZER_KEY
            at = hit + len(key)
            _decode_at(buf, base, hit, found)
    rfind, before, keep = buf.rfind, _BEFORE.fullmatch, found.raw.append
    for after in _AFTER:
        for m in after.finditer(buf, pos):  # to the buffer's end: a name cut at limit
            hit = m.start()
            if hit >= limit:
                break
            tail = m.groups()
            if tail[1] is not None:
                start = rfind(b"{", hit - _CONTEXT if hit > _CONTEXT else 0, hit)
                head = before(buf, start, hit) if start >= 0 else None
                if head is not None:
                    keep(head.groups() + tail)
                    continue
            _decode_at(buf, base, hit, found)  # another layout, or not an event's name


def _decode_at(buf: Any, base: int, hit: int, found: _Found) -> None:
    """The event around ``buf[hit]``, decoded whole, into ``found`` (None where the loader
    does not read it as a host event)."""
    got = _object_at(buf, hit)
    if got is not None:
        found.whole.setdefault(base + got[0], _host_row(got[1]))


def _tid(raw: bytes) -> Any:
    """A ``tid`` as written: a number, or a text without its quotes."""
    return raw[1:-1].decode("utf-8", "replace") if raw[:1] == b'"' else int(raw)


def _host_row(obj: dict[str, Any]) -> Row | None:
    """(name, tid, ts, dur) of a decoded event the loader reads as a host event (complete,
    of an operator's or annotation's category, a text name), else None."""
    name, cat = obj.get("name"), obj.get("cat")
    if obj.get("ph") != "X" or not isinstance(name, str) or not isinstance(cat, str) or \
            cat.strip().lower() not in _HOST_CATS:
        return None
    return name, obj.get("tid"), obj.get("ts"), obj.get("dur")
