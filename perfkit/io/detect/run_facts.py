"""What each rank source says about the run it belongs to (:class:`SourceFacts`).

Read cheaply before parsing (:func:`source_facts`: a name, a folder's time stamp, a Kineto
trace's first MiB and last 64 KiB, a raw CANN device's ``start_info`` / ``end_info``), or
from a parsed rank's meta (:func:`facts_from_meta`). :mod:`perfkit.io.detect.group_runs` groups the
sources into runs by these facts; :mod:`perfkit.io.detect.runs` says how, and exports every name of
this module under its old path.
"""

from __future__ import annotations

import datetime as _dt
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._common import json_head
from .sources import RankSource

__all__ = ["SourceFacts", "source_facts", "facts_from_meta"]

_TAIL_BYTES = 1 << 16
_GZ_TAIL_MAX_BYTES = 64 << 20
"""A gzipped trace is inflated to read its tail only up to this compressed size."""


@dataclass(frozen=True)
class SourceFacts:
    """What one rank source says about the run it belongs to (None: not known)."""

    platform: str
    framework: str | None = None
    rank: int | None = None
    world_size: int | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    steps: tuple[int, ...] = ()
    #: sources with the same value were written by one job and stay in one run (the rank
    #: files of one legacy MindSpore folder: its path); None: told apart on their own
    together: str | None = None


#: The platform of each source format (the rest are named by their format).
_PLATFORM = {"kineto": "kineto", "ascend_text": "ascend", "ascend_db": "ascend",
             "trace_view": "ascend", "mindspore_legacy": "ascend"}
_ASCEND_TS = re.compile(r"_(\d{17})_ascend_(pt|ms)$")


def source_facts(source: RankSource, read: bool = True) -> SourceFacts:
    """The facts of one rank source, before parsing.

    ``read``: open Kineto files (first MiB, last 64 KiB) and a raw CANN device's
    ``start_info`` / ``end_info``; without it only names count.
    """
    platform = _PLATFORM.get(source.fmt, source.fmt)
    if source.fmt == "kineto":
        facts = _kineto_facts(Path(source.path)) if read else {}
        return SourceFacts(platform, "pytorch", source.rank, **facts)
    if source.fmt == "cann_raw":
        from ..cann.paths import collection_window

        start, end = collection_window(Path(source.path)) if read else (None, None)
        return SourceFacts(platform, None, source.rank, start_ns=start, end_ns=end)
    framework = None
    start = None
    name = Path(source.path).name
    db = re.match(r"ascend_(pytorch|mindspore)_profiler", name)
    if db:
        framework = db.group(1)
    m = _ASCEND_TS.search(name)
    if m:
        framework = "pytorch" if m.group(2) == "pt" else "mindspore"
        start = _ascend_stamp(m.group(1))
    elif name.endswith("_ascend_pt"):
        framework = "pytorch"
    elif name.endswith("_ascend_ms") or source.fmt == "mindspore_legacy":
        framework = "mindspore"
    together = source.path if source.fmt == "mindspore_legacy" else None
    end = None
    if read and start is not None and source.rank is None and source.fmt == "ascend_text":
        span = _trace_view_span_ns(Path(source.path) / "ASCEND_PROFILER_OUTPUT"
                                   / "trace_view.json")
        end = None if span is None else start + span
    return SourceFacts(platform, framework, source.rank, start_ns=start, end_ns=end,
                       together=together)


_TV_TS = re.compile(rb'"ts"\s*:\s*"?(\d{1,20}(?:\.\d*)?)"?\s*,\s*"dur"\s*:\s*"?'
                    rb'(\d{1,20}(?:\.\d*)?)')


def _trace_view_span_ns(path: Path) -> int | None:
    """How long a rank's ``trace_view.json`` lasts (ns), from its first MiB and last 64 KiB:
    the latest ``ts + dur`` of its tail less the earliest ``ts`` of its head (µs, one
    clock). None when the file is missing or says no times.

    A rank without a rank id (a MindSpore CPU profile writes none) is told apart from
    another run's only by its time span: its folder's time stamp says when it started,
    this says when it ended (:mod:`perfkit.io.detect.group_runs`).
    """
    if not path.is_file():
        return None
    try:
        head, whole = _head(path)
    except OSError:
        return None
    tail = head if whole else _tail(path, need_base=False)
    first = [float(t) for t, _ in _TV_TS.findall(head)]
    last = [float(t) + float(d) for t, d in _TV_TS.findall(tail)]
    if not first or not last:
        return None
    span = max(last) - min(first)
    return int(round(span * 1000)) if span >= 0 else None


def facts_from_meta(meta: Any) -> SourceFacts:
    """The facts of a parsed rank (its :class:`~perfkit.profile.ProfileMeta`).

    A world size worked out from the rank's own communication groups (an Ascend export,
    ``extra["world_size_from"] == "groups"``) is left out: it is only at least the job's,
    and the ranks of one dp × pp job disagree on it.
    """
    extra = meta.extra or {}
    world = None if extra.get("world_size_from") == "groups" else meta.world_size
    return SourceFacts(_PLATFORM.get(meta.source_format, meta.source_format),
                       meta.framework, meta.rank, world, meta.origin_ns,
                       extra.get("end_ns"), tuple(extra.get("profiler_steps") or ()))


def _ascend_stamp(stamp: str) -> int | None:
    """``20240602101530123`` (the Ascend profiler's folder time, local clock) as ns."""
    try:
        t = _dt.datetime.strptime(stamp, "%Y%m%d%H%M%S%f").replace(tzinfo=_dt.timezone.utc)
    except ValueError:
        return None
    return int(t.timestamp() * 1e9)


_BASE = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d{1,20})')
_WORLD = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"world_size"\s*:\s*(\d{1,9})')
_TS = re.compile(rb'"ts"\s*:\s*"?(\d{1,20}(?:\.\d*)?)')
_EPOCH_US = 1e14
"""A Kineto ``ts`` above this many µs (1973) is already epoch time (PyTorch < 2.0)."""


def _kineto_facts(path: Path) -> dict[str, Any]:
    """World size, start and end (absolute ns) of a Kineto trace from its two ends."""
    head, whole = _head(path)
    utf16 = _UTF16.get(head[:2])
    if utf16:  # UTF-16 text (the loader converts it): its facts read as UTF-8 bytes
        head = head[2:len(head) - len(head) % 2].decode(utf16, "ignore").encode()
    events = head.find(b'"traceEvents"')
    first = [float(t) for t in _TS.findall(head[max(events, 0):][:1 << 16])]
    # the head tells the start when the trace has its time base there, or epoch times
    need_base = _BASE.search(head) is None and not (first and min(first) >= _EPOCH_US)
    tail = head if whole else _tail(path, need_base=need_base)
    if utf16 and not whole:
        tail = _utf16_tail(path, tail, utf16)
    out: dict[str, Any] = {}
    m = _WORLD.search(head) or (_WORLD.search(tail) if tail else None)
    if m:
        out["world_size"] = int(m.group(1))
    b = _BASE.search(head) or (_BASE.search(tail) if tail else None)
    base = int(b.group(1)) if b else 0
    last = [float(t) for t in _TS.findall(tail)] if tail else []
    if first:
        out["start_ns"] = _abs_ns(min(first), base)
    if last:
        out["end_ns"] = _abs_ns(max(last), base)
    if (out.get("start_ns") is None) != (out.get("end_ns") is None):
        out.pop("end_ns", None)  # one end on another clock than the other: not used
    return out


_UTF16 = {b"\xff\xfe": "utf-16-le", b"\xfe\xff": "utf-16-be"}


def _utf16_tail(path: Path, tail: bytes, encoding: str) -> bytes:
    """The tail of a UTF-16 trace as UTF-8 bytes; b"" for a gzipped one (its tail's
    alignment on the two-byte units is not known)."""
    try:
        size = path.stat().st_size
    except OSError:
        return b""
    if path.name.endswith(".gz") or size % 2:
        return b""
    return tail[len(tail) % 2:].decode(encoding, "ignore").encode()


def _abs_ns(ts_us: float, base_ns: int) -> int | None:
    """Absolute epoch ns of a Kineto ``ts`` (µs), or None when its epoch is not known."""
    if ts_us >= _EPOCH_US:
        return int(round(ts_us * 1000))
    if base_ns:
        return int(round(ts_us * 1000)) + base_ns
    return None


def _head(path: Path) -> tuple[bytes, bool]:
    return json_head(path)


def _tail(path: Path, need_base: bool) -> bytes:
    """The last 64 KiB of the (decompressed) file; b"" when too costly or unreadable.

    A gzipped file must be inflated whole to reach its end: done only when its head does
    not tell the start (some writers put ``baseTimeNanoseconds`` last) and the file is not
    larger than :data:`_GZ_TAIL_MAX_BYTES`; otherwise its end is not known and runs are
    told apart by their starts
    (:data:`~perfkit.io.detect.group_runs.RUN_GAP_S`).
    """
    try:
        with open(path, "rb") as fh:
            magic = fh.read(2)
            size = fh.seek(0, 2)
            if magic != b"\x1f\x8b":
                fh.seek(max(0, size - _TAIL_BYTES))
                return fh.read(_TAIL_BYTES)
            if size > _GZ_TAIL_MAX_BYTES or not need_base:
                return b""
            fh.seek(0)
            inflate = zlib.decompressobj(31)
            keep = b""
            while True:
                chunk = fh.read(1 << 20)
                if not chunk:
                    break
                out = inflate.decompress(chunk)
                keep = (keep + out)[-_TAIL_BYTES:]
                while inflate.eof and inflate.unused_data:  # a next gzip member
                    rest = inflate.unused_data
                    inflate = zlib.decompressobj(31)
                    keep = (keep + inflate.decompress(rest))[-_TAIL_BYTES:]
            return keep
    except (OSError, zlib.error):
        return b""
