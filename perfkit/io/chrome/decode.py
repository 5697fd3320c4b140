"""Chrome trace-event JSON (Kineto traces, Ascend/MindSpore ``trace_view.json``) to columns.

Decoding goes through msgspec straight into small typed structs holding only the fields
perfkit uses, with Python's garbage collector paused (see reference/performance.md);
``ts`` and ``dur`` may be numbers or strings. Timestamps become exact int64 nanoseconds.

Garbage is refused early and with bounded work: the file's ends and sparse holes are checked
before it is read (:func:`perfkit.io._common.check_file`), large files are decoded block by
block and a block holding a NUL byte (impossible in JSON text) stops the read, and gzip is
inflated in bounded chunks that are checked the same way. The decoded events then pass
:func:`perfkit.io.canonical.validate.clean_events` (implausible timestamps and durations NA, with
notes in :attr:`ChromeTrace.notes`). A UTF-8 BOM is skipped and UTF-16 text converted.

This module reads: the file's bytes, the whole-file decode (typed, else the untyped
:func:`_fallback` that keeps what fits) and the block-by-block decode of large files
(:func:`_read_streaming`). What is decoded — the structs and :class:`ChromeTrace` — is in
:mod:`perfkit.io.chrome.events`; turning the events into columns is
:mod:`perfkit.io.chrome.columns`.
"""

from __future__ import annotations

import math
import re
import zlib
from pathlib import Path
from typing import Any

import msgspec

from ...errors import ProfileError
from ...format import counted
from .._common import check_file, decode_text_bytes, describe_json_error, gc_paused, release_memory
from ..canonical.validate import clean_events
from .columns import _NA_NS, _Builder, _columns
from .events import (
    _NO_RAW,
    ARG_COLUMNS,
    HEADER_KEYS,
    X_COLUMNS,
    ChromeTrace,
    _Args,
    _Dist,
    _Event,
    _Trace,
)

__all__ = ["ChromeTrace", "read_chrome_trace", "ARG_COLUMNS", "X_COLUMNS", "HEADER_KEYS"]


_GZIP_CHUNK = 1 << 24


def _read_bytes(path: Path, what: str) -> tuple[bytes, str]:
    """The file's text as UTF-8 bytes (gunzipped), and the encoding it was converted from
    ("UTF-16", "gzipped UTF-16"; "" when it was UTF-8)."""
    gz = path.name.endswith(".gz")
    head = check_file(path, what, text=not gz, utf16=True, holes=True)
    gz = gz or head[:2] == b"\x1f\x8b"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ProfileError(path, f"cannot read {what}: {exc.strerror or exc}") from None
    if gz:
        raw = _gunzip(path, raw, what)
        if not raw.strip():
            raise ProfileError(path, f"file is empty after decompression; expected {what}")
    utf16 = raw[:2] in (b"\xff\xfe", b"\xfe\xff")
    raw = decode_text_bytes(path, raw, what)
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise ProfileError(path, f"binary data (NUL byte at offset {nul:,}"
                           f"{' of the decompressed text' if gz else ''}): the file is "
                           f"damaged or zero-padded; expected {what} (JSON text)")
    return raw, ("gzipped UTF-16" if gz else "UTF-16") if utf16 else ""


def _gunzip(path: Path, raw: bytes, what: str) -> bytes:
    """Inflate (every member of) a gzip stream in bounded chunks, stopping at a NUL byte."""
    out: list[bytes] = []
    data = raw
    utf16 = False
    try:
        while data:
            d = zlib.decompressobj(31)
            rest = data
            while rest:
                chunk = d.decompress(rest, _GZIP_CHUNK)
                if not out and chunk[:2] in (b"\xff\xfe", b"\xfe\xff"):
                    utf16 = True  # UTF-16 text: its NULs are checked once converted
                if b"\x00" in chunk and not utf16:
                    raise ProfileError(path, "binary data (NUL bytes) in the decompressed "
                                       f"text: the file is damaged; expected {what}")
                out.append(chunk)
                # at the member's end the bytes after it are in unused_data (zlib also
                # leaves them in unconsumed_tail, which another call would never empty)
                rest = b"" if d.eof else d.unconsumed_tail
            if not d.eof:
                raise ProfileError(path, "gzip stream is truncated (ends before its end "
                                   f"marker); expected {what}, gzipped in full")
            data = d.unused_data.lstrip(b"\x00")
            if data and data[:2] != b"\x1f\x8b":
                extra = counted(len(d.unused_data), "byte")
                raise ProfileError(path, f"{extra} after the end of the gzip stream, not gzip "
                                   "data (something was appended to the file after it was "
                                   f"written); expected {what}, gzipped")
    except zlib.error as exc:
        raise ProfileError(path, f"gzip stream is damaged or truncated ({exc}); "
                           f"expected {what}, gzipped") from None
    return b"".join(out)


def read_chrome_trace(path: Path, what: str = "a Chrome trace (JSON)",
                      columns: tuple[str, ...] = X_COLUMNS,
                      categorical: tuple[str, ...] = ()) -> ChromeTrace:
    """Decode a Chrome trace file (``.json`` or ``.json.gz``) into columns.

    Parameters
    ----------
    path : Path
    what : str
        What the file should be, for error messages.
    columns : tuple of str
        The ``args`` columns (:data:`ARG_COLUMNS`) to keep for complete events; a reader
        asks only for those it uses (each costs a pass over millions of events).
    categorical : tuple of str
        Text columns of complete events to keep as pandas Categoricals (each distinct
        text held once, encoded block by block as the file is read): names, categories and
        operator arguments repeat over millions of events.

    Raises
    ------
    ProfileError
        Empty, truncated, binary, non-UTF-8, not JSON, or JSON of another shape.
    """
    if not path.name.endswith(".gz"):
        streamed = _read_streaming(path, what, columns, categorical)
        if streamed is not None:
            builder, trace, is_object = streamed
            with gc_paused():
                out = builder.finish(trace, is_object)
            del builder
            _release_after(out)
            return _checked(path, out, what)
    raw, converted = _read_bytes(path, what)
    head = raw[:64].lstrip()
    if head[:3] == b"\xef\xbb\xbf":
        raw = raw.lstrip()[3:]
        head = raw[:64].lstrip()
    if head[:1] not in (b"[", b"{"):
        raise ProfileError(path, describe_json_error(raw, "does not start with [ or {",
                                                     what + " (JSON array or object)"))
    is_object = head[:1] == b"{"
    typed = True
    with gc_paused():
        try:
            if is_object:
                trace = msgspec.json.decode(raw, type=_Trace)
                events = trace.traceEvents
            else:
                trace = None
                events = msgspec.json.decode(raw, type=list[_Event])
        except msgspec.ValidationError as exc:
            events, trace = _fallback(path, raw, is_object, what, str(exc))
            typed = False
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise ProfileError(path, describe_json_error(raw, str(exc), what)) from None
        del raw
        out = _columns(path, events, trace, is_object, columns, typed, categorical)
    del events
    if converted:
        out.notes.append(f"{path.name}: {converted} text, converted to UTF-8 (every event "
                         "read as in the UTF-8 file)")
    _release_after(out)
    return _checked(path, out, what)


def _release_after(trace: ChromeTrace) -> None:
    """After a large decode, give the freed memory back (see :func:`release_memory`)."""
    if trace.n_events >= _RELEASE_EVENTS:
        release_memory()


_RELEASE_EVENTS = 100_000


def _checked(path: Path, trace: ChromeTrace, what: str) -> ChromeTrace:
    """The trace after the plausibility checks; refused when no complete event has a time."""
    trace.notes.extend(clean_events(trace.x, trace.flows, trace.instants))
    if trace.unread_ts and bool((trace.x["ts_ns"].to_numpy() == _NA_NS).all()):
        raise ProfileError(path, _no_timestamp(len(trace.x), trace.unread_ts[0], what))
    return trace


_MAX_US = (1 << 63) / 1000
"""Largest ``ts`` (µs) whose nanoseconds fit int64: about 292 years from 1970."""


def _no_timestamp(n: int, first: Any, what: str) -> str:
    """Why a trace none of whose complete events has a readable ``ts`` is refused.

    The Chrome trace format's ``ts`` and ``dur`` are microseconds whatever
    ``displayTimeUnit`` says (Perfetto and chrome://tracing read them so); a writer that
    puts nanoseconds since 1970 there gives values no time can have.
    """
    lead = f"{counted(n, 'complete event')} (ph 'X'), and none with a readable timestamp (ts)"
    try:
        value = float(first)
    except (TypeError, ValueError, OverflowError):
        value = math.nan
    if math.isfinite(value) and abs(value) >= _MAX_US:
        years = value / 1e6 / (365.25 * 86400)
        return (f"{lead}: the first is {value:.6g}, which as microseconds (the trace "
                f"format's unit for ts and dur) is {years:,.0f} years from 1970; the file "
                "seems to hold nanoseconds: write ts and dur in microseconds (divide them "
                f"by 1,000) and open it again; expected {what}")
    shown = "missing" if first is None else repr(first)[:40]
    return f"{lead} (the first: {shown}); expected {what}, each event's ts a number of µs"


STREAM_MIN_BYTES = 16 << 20
"""Files at least this large are decoded block by block (see :func:`_read_streaming`)."""
BLOCK_BYTES = 8 << 20
"""Bytes decoded at a time: small enough that a block's Python objects are still in the
CPU caches while they are turned into columns (2-8 MB measured fastest)."""
MAX_EVENT_BYTES = 64 << 20
"""More bytes than this without a ``},{`` between two events cannot be a trace."""


def _fill(path: Path, fh: Any, buf: bytearray, chunk: bytearray, offset: int,
          what: str) -> int:
    """Append the next block of a streamed file to ``buf``; a NUL byte in it ends the read.

    ``chunk`` is one reusable block-sized buffer (read into, then copied once onto the end
    of ``buf``), so no fresh memory is taken block after block. Returns the bytes read.
    """
    n = fh.readinto(chunk)
    nul = chunk.find(b"\x00", 0, n)
    if nul >= 0:
        raise ProfileError(path, f"binary data (NUL byte at offset {offset + nul:,}): the "
                           f"file is damaged or zero-padded; expected {what} (JSON text)")
    with memoryview(chunk) as view:
        buf += view[:n]
    return n


_SPLIT = re.compile(rb"\}\s*,\s*\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_EVENT_LIST = msgspec.json.Decoder(list[_Event])


def _decode_span(buf: bytearray, start: int, stop: int) -> list[_Event] | None:
    """Decode the events of ``buf[start + 1:stop]`` in place (no copy of the bytes).

    ``buf[start]`` (the array's ``[`` or the separator before an event) is set to ``[`` and
    ``buf[stop]`` (the separator after the last event, or the array's ``]``) to ``]``;
    ``buf[stop]`` is put back when the span does not decode, so an earlier cut can be tried.
    The events may hold views of ``buf`` (raw arguments): they must be converted and
    dropped before ``buf`` is resized.
    """
    keep = buf[stop]
    buf[start] = 0x5B  # [
    buf[stop] = 0x5D  # ]
    view = memoryview(buf)[start:stop + 1]
    try:
        return _EVENT_LIST.decode(view)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        buf[stop] = keep
        return None
    finally:
        del view


def _read_streaming(path: Path, what: str = "a Chrome trace (JSON)",
                    columns: tuple[str, ...] = X_COLUMNS, categorical: tuple[str, ...] = ()
                    ) -> tuple[_Builder, _Trace | None, bool] | None:
    """Decode a large plain-JSON trace block by block, so the whole file is never held.

    The event array is cut at ``},{`` boundaries; a cut that falls inside a string or a
    nested object makes that piece fail to decode, and an earlier cut is tried instead.
    Returns None (the caller then decodes the whole file, which also produces the precise
    error message) for small files or anything unexpected. A block holding a NUL byte, or
    more than :data:`MAX_EVENT_BYTES` without an event boundary, stops the read with a
    ProfileError: neither can be part of a trace.

    The bytes live in one ``bytearray``: blocks are appended to it, each decoded piece is
    read in place (:func:`_decode_span`) and its bytes are then dropped from the front.
    """
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size < STREAM_MIN_BYTES:
        return None
    head = check_file(path, what, utf16=True)
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") or head[:3] == b"\xef\xbb\xbf":
        return None  # re-encoded whole by the caller
    events = _Builder(columns, categorical=categorical)
    buf = bytearray()
    chunk = bytearray(BLOCK_BYTES)
    with open(path, "rb") as fh, gc_paused():
        offset = _fill(path, fh, buf, chunk, 0, what)
        lead = bytes(buf[:64]).lstrip()
        if lead[:1] == b"[":
            is_object = False
            header = b""
            start = buf.index(b"[")  # buf[start] may be overwritten: the next event follows
        elif lead[:1] == b"{":
            m = _EVENTS_KEY.search(buf)
            if m is None:
                return None
            is_object = True
            header = bytes(buf[:m.start()]).rstrip()
            start = m.end() - 1
        else:
            return None
        eof = False
        while True:
            if not eof:
                del buf[:start]  # the decoded events and the separator before the next one
                start = 0
                n = _fill(path, fh, buf, chunk, offset, what)
                offset += n
                eof = not n
            if eof:
                break
            if len(buf) - start > MAX_EVENT_BYTES + BLOCK_BYTES:
                raise ProfileError(path, f"no event boundary in {len(buf) >> 20} MB before "
                                   f"offset {offset:,}: the file is damaged; expected {what}")
            # only the last few cut points are needed: look near the end first
            window = 1 << 20
            cuts = [m.start() for m in _SPLIT.finditer(buf, max(start, len(buf) - window))]
            if not cuts:
                cuts = [m.start() for m in _SPLIT.finditer(
                    buf, max(start, len(buf) - BLOCK_BYTES))]
            for cut in reversed(cuts[-8:]):
                got = _decode_span(buf, start, cut + 1)
                if got is not None:
                    events.add(got)
                    del got
                    start = buf.index(b"{", cut + 1) - 1
                    break
        # the rest: last events, "]" and (for an object) the remaining keys
        end = len(buf)
        for _ in range(16):
            end = buf.rfind(b"]", start + 1, end)
            if end < 0:
                return None
            got = _decode_span(buf, start, end)
            if got is not None:
                events.add(got)
                del got
                tail = bytes(buf[end + 1:]).strip()
                break
        else:
            return None
        del buf, chunk
    if not is_object:
        return (events, None, False) if not tail else None
    head = header[:-1] if header.endswith(b",") else header
    rest = tail[1:].strip() if tail.startswith(b",") else tail
    doc = head + (b", " if head.strip() != b"{" and rest not in (b"}", b"") else b"") + rest
    try:
        trace = msgspec.json.decode(doc, type=_Trace)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return None
    return events, trace, True


def _fallback(path: Path, raw: bytes, is_object: bool, what: str, why: str):
    """Slow path for traces whose fields have unexpected types: keep what fits."""
    try:
        data = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise ProfileError(path, describe_json_error(raw, str(exc), what)) from None
    if is_object:
        if not isinstance(data, dict) or not isinstance(data.get("traceEvents", []), list):
            raise ProfileError(path, f"expected {what} with a traceEvents list", field=why)
        items = data.get("traceEvents", [])
    else:
        items = data
    events = []
    scalar = (int, float, str, type(None))
    for e in items:
        if not isinstance(e, dict):
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        a = _Args(**{f: (v if isinstance(v, scalar) and not isinstance(v, bool) else None)
                     for f, v in ((n, args.get(k)) for n, k in _ARG_KEYS.items())},
                  **{f: _raw_json(args.get(k)) for f, k in _RAW_ARG_KEYS.items()})
        events.append(_Event(
            ph=str(e.get("ph", "")),
            **{k: (e.get(k) if isinstance(e.get(k), scalar) and not isinstance(e.get(k), bool)
                   else None) for k in ("name", "cat", "pid", "tid", "ts", "dur", "id")},
            args=a))
    trace = None
    if is_object:
        d = data.get("distributedInfo") if isinstance(data.get("distributedInfo"), dict) else {}
        base = data.get("baseTimeNanoseconds")
        pgs, props = d.get("pg_config"), data.get("deviceProperties")
        trace = _Trace(traceEvents=[], distributedInfo=_Dist(
            rank=d.get("rank"), world_size=d.get("world_size"), backend=d.get("backend"),
            pg_config=msgspec.Raw(msgspec.json.encode(pgs)) if isinstance(pgs, list)
            else _NO_RAW),
            baseTimeNanoseconds=base if isinstance(base, int) else None,
            deviceProperties=msgspec.Raw(msgspec.json.encode(props))
            if isinstance(props, list) else _NO_RAW,
            **{k: data[k] for k in HEADER_KEYS
               if isinstance(data.get(k), (int, float, str)) and not isinstance(data[k], bool)})
    return events, trace


_ARG_KEYS = {"name": "name", "labels": "labels", "external_id": "External id",
             "correlation": "correlation", "stream": "stream", "device": "device",
             "task_type": "Task Type", "op_type": "type", "fullname": "fullname",
             "total_allocated": "Total Allocated",
             "total_reserved": "Total Reserved", "mem_bytes": "Bytes",
             "device_id": "Device Id", "device_type": "Device Type",
             "external_id_old": "external id", "pg_name": "Process Group Name",
             "collective": "Collective name", "in_nelems": "In msg nelems",
             "out_nelems": "Out msg nelems", "msg_dtype": "dtype", "graph_id": "graph id",
             "group_size": "Group size", "pg_ranks": "Process Group Ranks"}

_RAW_ARG_KEYS = {"input_dims": "Input Dims", "input_type": "Input type",
                 "concrete_inputs": "Concrete Inputs"}


def _raw_json(value: Any) -> msgspec.Raw:
    """An operator argument kept as raw JSON text, as the fast decoder keeps it."""
    return _NO_RAW if value is None else msgspec.Raw(msgspec.json.encode(value))


