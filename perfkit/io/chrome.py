"""Chrome trace-event JSON (Kineto traces, Ascend/MindSpore ``trace_view.json``) to columns.

Decoding goes through msgspec straight into small typed structs holding only the fields
perfkit uses, with Python's garbage collector paused (see reference/performance.md);
``ts`` and ``dur`` may be numbers or strings. Timestamps become exact int64 nanoseconds.

Garbage is refused early and with bounded work: the file's ends and sparse holes are checked
before it is read (:func:`perfkit.io._common.check_file`), large files are decoded block by
block and a block holding a NUL byte (impossible in JSON text) stops the read, and gzip is
inflated in bounded chunks that are checked the same way. The decoded events then pass
:func:`perfkit.io.validate.clean_events` (implausible timestamps and durations NA, with
notes in :attr:`ChromeTrace.notes`). A UTF-8 BOM is skipped and UTF-16 text converted.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ProfileError
from ._common import (
    check_file,
    decode_text_bytes,
    describe_json_error,
    gc_paused,
    release_memory,
    to_ns,
)
from .validate import clean_events

__all__ = ["ChromeTrace", "read_chrome_trace", "ARG_COLUMNS", "X_COLUMNS", "HEADER_KEYS"]

_IntStr = int | str | None
_FloatStr = float | str | None
_Scalar = int | float | str | None
_NO_RAW = msgspec.Raw(b"")


class _Args(msgspec.Struct, gc=False):
    name: _IntStr = None
    labels: _IntStr = None
    external_id: _IntStr = msgspec.field(default=None, name="External id")
    # PyTorch 1.8-1.9 Kineto wrote the operator link of device events in lower case
    external_id_old: _IntStr = msgspec.field(default=None, name="external id")
    correlation: _IntStr = None
    stream: _IntStr = None
    device: _IntStr = None
    task_type: _IntStr = msgspec.field(default=None, name="Task Type")
    op_type: _IntStr = msgspec.field(default=None, name="type")
    fullname: _IntStr = None  # MindSpore's scope name of an operator (legacy timelines)
    total_allocated: _FloatStr = msgspec.field(default=None, name="Total Allocated")
    total_reserved: _FloatStr = msgspec.field(default=None, name="Total Reserved")
    mem_bytes: _FloatStr = msgspec.field(default=None, name="Bytes")
    device_id: _IntStr = msgspec.field(default=None, name="Device Id")
    device_type: _IntStr = msgspec.field(default=None, name="Device Type")
    # what a collective's kernel (and record_param_comms) says about it (PyTorch >= 2.1)
    pg_name: _IntStr = msgspec.field(default=None, name="Process Group Name")
    collective: _IntStr = msgspec.field(default=None, name="Collective name")
    in_nelems: _FloatStr = msgspec.field(default=None, name="In msg nelems")
    out_nelems: _FloatStr = msgspec.field(default=None, name="Out msg nelems")
    msg_dtype: _IntStr = msgspec.field(default=None, name="dtype")
    # operator arguments of a Kineto cpu_op (record_shapes=True), kept as raw JSON text
    input_dims: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input type")
    concrete_inputs: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Concrete Inputs")


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    name: _IntStr = ""
    cat: _IntStr = None
    pid: _IntStr = None
    tid: _IntStr = None
    ts: _FloatStr = None
    dur: _FloatStr = None
    id: _IntStr = None
    args: _Args | None = None


class _Dist(msgspec.Struct, gc=False):
    rank: _IntStr = None
    world_size: _IntStr = None
    backend: _IntStr = None
    pg_config: msgspec.Raw = _NO_RAW


class _Trace(msgspec.Struct):
    traceEvents: list[_Event] = msgspec.field(default_factory=list)  # noqa: N815
    distributedInfo: _Dist | None = None  # noqa: N815
    baseTimeNanoseconds: int | None = None  # noqa: N815
    deviceProperties: msgspec.Raw = _NO_RAW  # noqa: N815
    # what recorded the trace (kept in ChromeTrace.header)
    schemaVersion: _Scalar = None  # noqa: N815
    trace_id: _Scalar = None
    cupti_version: _Scalar = None
    cuda_runtime_version: _Scalar = None
    roctracer_version: _Scalar = None
    hip_runtime_version: _Scalar = None


HEADER_KEYS = ("schemaVersion", "trace_id", "cupti_version", "cuda_runtime_version",
               "roctracer_version", "hip_runtime_version")
"""Top-level keys of a Kineto trace kept in :attr:`ChromeTrace.header` (when present)."""


_BASE = (("name", "name", "str"), ("cat", "cat", "str"), ("pid", "pid", "id"),
         ("tid", "tid", "id"), ("ts_ns", "ts", "ts"), ("dur_us", "dur", "num"))
"""(column, event field, kind) of every kind of event (read in :meth:`_Columns.add`)."""
_FLOW_ONLY = (("id", "id", "str"), ("ph", "ph", "str"))
ARG_COLUMNS: dict[str, tuple[str, str]] = {
    "external_id": ("external_id", "id"), "correlation": ("correlation", "id"),
    "stream": ("stream", "id"), "device": ("device", "id"), "task_type": ("task_type", "str"),
    "op_type": ("op_type", "str"), "fullname": ("fullname", "str"),
    "total_allocated": ("total_allocated", "num"),
    "total_reserved": ("total_reserved", "num"), "bytes": ("mem_bytes", "num"),
    "device_id": ("device_id", "id"), "device_type": ("device_type", "id"),
    "input_dims": ("input_dims", "raw"),
    "input_type": ("input_type", "raw"), "concrete_inputs": ("concrete_inputs", "raw"),
    "pg_name": ("pg_name", "str"), "collective": ("collective", "str"),
    "in_nelems": ("in_nelems", "num"), "out_nelems": ("out_nelems", "num"),
    "msg_dtype": ("msg_dtype", "str")}
"""Columns that can be read from ``args``: column -> (field of :class:`_Args`, kind)."""
X_COLUMNS = ("external_id", "correlation", "stream", "device", "task_type", "op_type",
             "input_dims", "input_type", "concrete_inputs")
"""``args`` columns kept for complete (``X``) events unless the reader asks for fewer."""
_MEMORY = ("total_allocated", "total_reserved", "bytes", "device_id", "device_type")
_SPARSE = ("pg_name", "collective", "in_nelems", "out_nelems", "msg_dtype")
"""``args`` a collective's kernel (and ``record_param_comms``) carries, keyed on
``Collective name``: read only from the events that have it."""
_RAW_FIELDS = ("input_dims", "input_type", "concrete_inputs")
_EMPTY_ARGS = _Args()


@dataclass
class ChromeTrace:
    """Columns of a decoded trace.

    Attributes
    ----------
    x : DataFrame
        Complete events (``ph == "X"``): name, cat, pid, tid, ts_ns (int64 absolute), dur_us,
        and the ``args`` columns asked for (default :data:`X_COLUMNS`: external_id,
        correlation, stream, device, task_type, op_type, and the raw JSON text of the operator
        arguments ``input_dims``, ``input_type``, ``concrete_inputs``, which are left out
        when no event has them; Kineto ``record_shapes=True``).
    flows : DataFrame
        Flow events (``ph`` in s/f/t): ph, cat, name, id, pid, tid, ts_ns.
    instants : DataFrame
        Instant events (``ph`` in i/I) with the memory args (``total_allocated``,
        ``total_reserved``, ``bytes``, ``device_id``; left out when no event has them).
    processes : dict
        pid -> process name; ``labels`` pid -> process label (CPU/NPU).
    threads : dict
        (pid, tid) -> thread name.
    rank, world_size : int or None
        From ``distributedInfo`` when present.
    device_names : list of str
        ``name`` of each entry of Kineto's ``deviceProperties`` (GPU model), when present.
    is_object : bool
        The file was ``{"traceEvents": ...}`` rather than a bare array.
    notes : list of str
        What the plausibility checks set to NA (:func:`perfkit.io.validate.clean_events`).
    process_groups : list of dict
        ``distributedInfo.pg_config`` (PyTorch 2.x): one dict per process group with
        ``pg_name``, ``pg_desc``, ``pg_size``, ``ranks`` (global ranks) and
        ``backend_config``; empty when the trace has none.
    device_properties : list of dict
        ``deviceProperties`` (one dict per GPU: ``id``, ``name``, memory, SM count ...);
        empty when the trace lists none (CPU-only runs).
    header : dict
        The top-level keys of :data:`HEADER_KEYS` the file has (profiler schema, trace id,
        CUPTI / CUDA runtime or roctracer / HIP runtime versions).
    """

    x: pd.DataFrame
    flows: pd.DataFrame
    instants: pd.DataFrame
    processes: dict[Any, str] = field(default_factory=dict)
    labels: dict[Any, str] = field(default_factory=dict)
    threads: dict[tuple[Any, Any], str] = field(default_factory=dict)
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None
    is_object: bool = False
    n_events: int = 0
    notes: list[str] = field(default_factory=list)
    process_groups: list[dict[str, Any]] = field(default_factory=list)
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    header: dict[str, Any] = field(default_factory=dict)

    @property
    def device_names(self) -> list[str]:
        """``name`` of each entry of ``device_properties`` (the GPU models)."""
        return [str(d["name"]) for d in self.device_properties if d.get("name")]


_GZIP_CHUNK = 1 << 24


def _read_bytes(path: Path, what: str) -> bytes:
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
    raw = decode_text_bytes(path, raw, what)
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise ProfileError(path, f"binary data (NUL byte at offset {nul:,}"
                           f"{' of the decompressed text' if gz else ''}): the file is "
                           f"damaged or zero-padded; expected {what} (JSON text)")
    return raw


def _gunzip(path: Path, raw: bytes, what: str) -> bytes:
    """Inflate (every member of) a gzip stream in bounded chunks, stopping at a NUL byte."""
    out: list[bytes] = []
    data = raw
    try:
        while data:
            d = zlib.decompressobj(31)
            rest = data
            while rest:
                chunk = d.decompress(rest, _GZIP_CHUNK)
                if b"\x00" in chunk:
                    raise ProfileError(path, "binary data (NUL bytes) in the decompressed "
                                       f"text: the file is damaged; expected {what}")
                out.append(chunk)
                rest = d.unconsumed_tail
            if not d.eof:
                raise ProfileError(path, "gzip stream is truncated (ends before its end "
                                   f"marker); expected a complete gzipped {what}")
            data = d.unused_data.lstrip(b"\x00") if d.unused_data.strip(b"\x00") else b""
    except zlib.error as exc:
        raise ProfileError(path, f"gzip stream is damaged or truncated ({exc}); "
                           f"expected a gzipped {what}") from None
    return b"".join(out)


def _int_or_none(v: Any) -> int | None:
    """A rank or world size: a whole number in [0, 10**9), else None."""
    if isinstance(v, bool) or isinstance(v, float) and not v.is_integer():
        return None
    try:
        out = int(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return out if 0 <= out < 10**9 else None


_CHUNK = 1 << 18
_NA_NS = np.iinfo(np.int64).min


def _pa_str(values: list[Any]) -> pa.Array:
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return _pa_str_of(values)


def _pa_str_of(values: list[Any]) -> pa.Array:
    """Text of each value (``str(v)``), null for None."""
    if None in values:
        return pa.array([None if v is None else str(v) for v in values], pa.string())
    return pa.array(list(map(str, values)), pa.string())


def _pa_str_of_few(values: list[Any]) -> pa.Array:
    """:func:`_pa_str_of` for values that are only ``int``, ``str`` or None.

    Ids such as ``pid`` / ``tid`` take few distinct values: each distinct one is turned
    into text once and the column is built by code. (Only for ints and strings: a float
    equal to an int would share its dictionary slot and lose its own text.)
    """
    slots = {v: i for i, v in enumerate(dict.fromkeys(values))}
    if 4 * len(slots) > len(values):
        return _pa_str_of(values)
    codes = np.fromiter(map(slots.__getitem__, values), np.int64, len(values))
    texts = pa.array([None if v is None else str(v) for v in slots], pa.string())
    return texts.take(pa.array(codes))


def _pa_id(values: list[Any]) -> pa.Array:
    """int64 when every value is an integer, else text."""
    try:
        return pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return _pa_str(values)


def _pa_raw(values: list[Any]) -> pa.Array:
    """JSON text of raw argument values (``Input Dims``), null where absent or ``null``.

    The raw values are joined into one buffer and cut by their lengths into an Arrow
    column (no Python object per value); text that is not UTF-8 has its bad bytes replaced,
    as ``bytes.decode(errors="replace")`` does.
    """
    data = b"".join(values)
    n = len(values)
    if not data:
        return pa.nulls(n, pa.string())
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, values), np.int64, n), out=offsets[1:])
    arr = pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets),
                                                      pa.py_buffer(data)])
    gone = pc.or_(pc.equal(pc.binary_length(arr), 0), pc.equal(arr, _NULL_JSON))
    arr = pc.if_else(gone, pa.scalar(None, pa.large_binary()), arr)
    try:
        return arr.cast(pa.large_string()).cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8
        return pa.array([None if v is None else v.decode("utf-8", "replace")
                         for v in arr.to_pylist()], pa.string())


_NULL_JSON = pa.scalar(b"null", pa.large_binary())


def _pa_num(values: list[Any]) -> pa.Array:
    try:
        return pa.array(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        num = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")
        return pa.array(num.to_numpy(np.float64), pa.float64(), from_pandas=True)


def _pa_ts(values: list[Any], base_ns: int) -> pa.Array:
    try:
        arr = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        arr = _pa_str(values)
    ns = to_ns(arr, len(values))
    if base_ns:
        ns = pc.add(ns, pa.scalar(base_ns, pa.int64()))
    return pc.fill_null(ns, pa.scalar(_NA_NS, pa.int64()))


def _to_pandas(chunks: list[pa.Array], kind: str, categorical: bool = False) -> Any:
    """One pandas column from per-chunk arrow arrays (``kind``: str, id, num, ts).

    ``categorical``: a text column becomes a pandas Categorical (the chunks may already be
    dictionary-encoded), holding each distinct text once.
    """
    text = kind == "str" or kind == "id" and any(
        pa.types.is_string(c.type) or pa.types.is_dictionary(c.type) for c in chunks)
    if categorical and text:
        parts = [c if pa.types.is_dictionary(c.type) else pc.dictionary_encode(
            c if c.type == pa.string() else pc.cast(c, pa.string())) for c in chunks]
        col = pa.chunked_array(parts).unify_dictionaries()
        arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        return pd.Series(arr.to_pandas())
    if kind == "id" and any(pa.types.is_string(c.type) for c in chunks):
        chunks = [c if pa.types.is_string(c.type) else pc.cast(c, pa.string()) for c in chunks]
        kind = "str"
    if kind == "str":
        chunks = [c if c.type == pa.string() else pc.cast(c, pa.string()) for c in chunks]
        col = pa.chunked_array(chunks, pa.string())
        if col.num_chunks > 1 and col.nbytes < 1 << 30:
            # one contiguous array: the many takes of the tables are much faster on it
            col = pa.chunked_array([col.combine_chunks()])
        return pd.Series(pd.arrays.ArrowStringArray(col), dtype="string")
    arr = pa.chunked_array(chunks).combine_chunks() if len(chunks) > 1 else chunks[0]
    if kind == "id":
        if pa.types.is_null(arr.type):
            arr = pa.nulls(len(arr), pa.int64())
        return pd.Series(arr.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get))
    if kind == "num":
        if pa.types.is_null(arr.type):
            return np.full(len(arr), np.nan)
        return arr.to_numpy(zero_copy_only=False).astype(np.float64)
    return arr.to_numpy(zero_copy_only=False).astype(np.int64)


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
            return _checked(out)
    raw = _read_bytes(path, what)
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
    _release_after(out)
    return _checked(out)


def _release_after(trace: ChromeTrace) -> None:
    """After a large decode, give the freed memory back (see :func:`release_memory`)."""
    if trace.n_events >= _RELEASE_EVENTS:
        release_memory()


_RELEASE_EVENTS = 100_000


def _checked(trace: ChromeTrace) -> ChromeTrace:
    trace.notes.extend(clean_events(trace.x, trace.flows, trace.instants))
    return trace


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
             "out_nelems": "Out msg nelems", "msg_dtype": "dtype"}

_RAW_ARG_KEYS = {"input_dims": "Input Dims", "input_type": "Input type",
                 "concrete_inputs": "Concrete Inputs"}


def _raw_json(value: Any) -> msgspec.Raw:
    """An operator argument kept as raw JSON text, as the fast decoder keeps it."""
    return _NO_RAW if value is None else msgspec.Raw(msgspec.json.encode(value))


class _Columns:
    """Arrow column chunks of one kind of event, filled batch by batch.

    Each column is read from the structs with its own list comprehension (the cheapest way
    to read one attribute of many objects) and handed to Arrow at once.
    """

    def __init__(self, args: tuple[str, ...] | None, typed: bool = True,
                 categorical: tuple[str, ...] = ()) -> None:
        # typed: the events come from the typed decoder (ids are int, str or None only)
        self.text_of = _pa_str_of_few if typed else _pa_str_of
        # text columns kept dictionary-encoded, block by block (see read_chrome_trace)
        self.categorical = frozenset(categorical)
        self.flows = args is None
        base = _BASE + _FLOW_ONLY if self.flows else _BASE
        self.args = tuple((c, *ARG_COLUMNS[c]) for c in (args or ()) if c not in _SPARSE)
        # what a collective says about itself: on a few events only, read sparsely
        self.sparse = tuple(c for c in (args or ()) if c in _SPARSE)
        self.kinds = {c: k for c, _, k in base} | {c: k for c, _, k in self.args}
        self.chunks: dict[str, list[Any]] = {k: [] for k in self.kinds}
        if self.sparse:
            self.chunks["_sparse"] = []
        self.n = 0
        self.mixed: set[str] = set()  # columns already seen holding a value of another type

    def add(self, evs: list[_Event]) -> None:
        """Convert ``evs`` (in slices, so temporary lists stay small)."""
        for lo in range(0, len(evs), _CHUNK):
            part = evs[lo:lo + _CHUNK] if lo or len(evs) > _CHUNK else evs
            self.n += len(part)
            c = self.chunks
            c["name"].append(self._str("name", [e.name for e in part]))
            c["cat"].append(self._str("cat", [e.cat for e in part]))
            c["pid"].append(self._id("pid", [e.pid for e in part]))
            c["tid"].append(self._id("tid", [e.tid for e in part]))
            c["ts_ns"].append(_pa_ts([e.ts for e in part], 0))
            c["dur_us"].append(_pa_num([e.dur for e in part]))
            if self.flows:
                c["id"].append(self._str("id", [e.id for e in part]))
                c["ph"].append(self._str("ph", [e.ph for e in part]))
            if self.args:
                args = [e.args for e in part]
                if None in args:
                    args = [_EMPTY_ARGS if a is None else a for a in args]
                for col, attr, kind in self.args:
                    values = list(map(attrgetter(attr), args))
                    if col == "external_id" and None in values:
                        # PyTorch 1.8-1.9 wrote a device task's link as "external id"
                        old = list(map(attrgetter("external_id_old"), args))
                        if old.count(None) != len(old):
                            values = [v if v is not None else o
                                      for v, o in zip(values, old, strict=True)]
                    c[col].append(self._convert(col, kind, values))
                if self.sparse:
                    hits = [i for i, a in enumerate(args) if a.collective is not None]
                    c["_sparse"].append((len(part), hits, {
                        col: [getattr(args[i], ARG_COLUMNS[col][0]) for i in hits]
                        for col in self.sparse}))
            for col in self.categorical:
                if col in c and c[col][-1].type == pa.string():
                    c[col][-1] = pc.dictionary_encode(c[col][-1])

    def _convert(self, col: str, kind: str, values: list[Any]) -> pa.Array:
        if kind == "str":
            return self._str(col, values)
        if kind == "id":
            return self._id(col, values)
        if kind == "num":
            return _pa_num(values)
        if kind == "ts":
            return _pa_ts(values, 0)
        return _pa_raw(values)

    def _str(self, key: str, values: list[Any]) -> pa.Array:
        """Text column chunk (see :func:`_pa_str`); remembers columns that need ``str()``."""
        if key in self.mixed:
            return self.text_of(values)
        try:
            return pa.array(values, pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            self.mixed.add(key)
            return self.text_of(values)

    def _id(self, key: str, values: list[Any]) -> pa.Array:
        """Id column chunk (see :func:`_pa_id`): int64, or text once a value was not an int.

        A column that was text in an earlier chunk goes straight to text: the chunks are
        made one type (text) by :func:`_to_pandas` anyway.
        """
        if key not in self.mixed:
            try:
                return pa.array(values, pa.int64())
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                self.mixed.add(key)
        return self.text_of(values)

    def frame(self, base_ns: int) -> pd.DataFrame:
        if not self.n:
            cols = ["name", "cat", "pid", "tid", "ts_ns", "dur_us", "id"]
            return pd.DataFrame({c: [] for c in cols})
        out = {}
        for k, kind in self.kinds.items():  # each column's chunks are let go once converted
            out[k] = _to_pandas(self.chunks.pop(k), "str" if kind == "raw" else kind,
                                k in self.categorical)
        if self.sparse:
            out.update(self._sparse_columns(self.chunks.pop("_sparse")))
        if base_ns:
            ts = out["ts_ns"]
            out["ts_ns"] = np.where(ts == _NA_NS, ts, ts + np.int64(base_ns))
        if "total_allocated" in out and all(pd.isna(out[c]).all()
                                            for c in ("total_allocated", "bytes")):
            for c in _MEMORY:
                del out[c]
        for c in _RAW_FIELDS:
            if c in out and out[c].isna().all():
                del out[c]
        self.chunks = {}
        return pd.DataFrame(out)


    def _sparse_columns(self, chunks: list[Any]) -> dict[str, Any]:
        """Full-length columns of the sparse args (NA where an event has none): numbers as
        float64, texts as Categoricals (few distinct values)."""
        pos: list[int] = []
        vals: dict[str, list[Any]] = {c: [] for c in self.sparse}
        offset = 0
        for length, hits, values in chunks:
            pos.extend(offset + h for h in hits)
            for c in self.sparse:
                vals[c].extend(values[c])
            offset += length
        where = np.asarray(pos, dtype=np.int64)
        out: dict[str, Any] = {}
        for c in self.sparse:
            if ARG_COLUMNS[c][1] == "num":
                col = np.full(self.n, np.nan)
                col[where] = pd.to_numeric(pd.Series(vals[c], dtype=object),
                                           errors="coerce").to_numpy(np.float64)
                out[c] = col
                continue
            text = pd.Series([None if v is None else str(v) for v in vals[c]], dtype=object)
            code, cats = pd.factorize(text, use_na_sentinel=True)
            full = np.full(self.n, -1, dtype=np.int64)
            full[where] = code
            out[c] = pd.Series(pd.Categorical.from_codes(full, categories=pd.Index(
                cats, dtype="string")))
        return out


class _Builder:
    """Collects decoded events batch by batch into columns; the structs are then dropped."""

    def __init__(self, columns: tuple[str, ...] = X_COLUMNS, typed: bool = True,
                 categorical: tuple[str, ...] = ()) -> None:
        self.x = _Columns(columns, typed, categorical)
        self.flows = _Columns(None, typed)
        self.inst = _Columns(_MEMORY, typed)
        self.processes: dict[Any, str] = {}
        self.labels: dict[Any, str] = {}
        self.threads: dict[tuple[Any, Any], str] = {}
        self.n_events = 0

    def add(self, events: list[_Event]) -> None:
        """Take one batch of events (the list is emptied)."""
        xs: list[_Event] = []
        flows: list[_Event] = []
        inst: list[_Event] = []
        for e in events:
            ph = e.ph
            if ph == "X":
                xs.append(e)
            elif ph in ("s", "f", "t"):
                flows.append(e)
            elif ph in ("i", "I"):
                inst.append(e)
            elif ph == "M" and e.args is not None:
                if e.name == "process_name":
                    self.processes[e.pid] = str(e.args.name)
                elif e.name == "process_labels":
                    self.labels[e.pid] = str(e.args.labels)
                elif e.name == "thread_name":
                    self.threads[(e.pid, e.tid)] = str(e.args.name)
        self.n_events += len(events)
        events.clear()
        self.x.add(xs)
        self.flows.add(flows)
        self.inst.add(inst)

    def finish(self, trace: _Trace | None, is_object: bool) -> ChromeTrace:
        base_ns = int(trace.baseTimeNanoseconds or 0) if trace is not None else 0
        notes = []
        if not -(1 << 62) < base_ns < (1 << 62):  # cannot be a time: would overflow int64
            notes.append(f"baseTimeNanoseconds {base_ns} is out of range: ignored")
            base_ns = 0
        rank = world = backend = None
        if trace is not None and trace.distributedInfo is not None:
            rank = _int_or_none(trace.distributedInfo.rank)
            world = _int_or_none(trace.distributedInfo.world_size)
            backend = trace.distributedInfo.backend
        groups: list[dict[str, Any]] = []
        props: list[dict[str, Any]] = []
        header: dict[str, Any] = {}
        if trace is not None:
            if trace.distributedInfo is not None:
                groups = _dict_list(trace.distributedInfo.pg_config)
            props = _dict_list(trace.deviceProperties)
            header = {k: getattr(trace, k) for k in HEADER_KEYS
                      if getattr(trace, k) is not None}
        return ChromeTrace(
            x=self.x.frame(base_ns), flows=self.flows.frame(base_ns),
            instants=self.inst.frame(base_ns), processes=self.processes, labels=self.labels,
            threads=self.threads, rank=rank, world_size=world,
            backend=None if backend is None else str(backend), is_object=is_object,
            n_events=self.n_events, notes=notes, process_groups=groups,
            device_properties=props, header=header)


def _dict_list(raw: msgspec.Raw) -> list[dict[str, Any]]:
    """The dicts of a raw JSON list (``pg_config``, ``deviceProperties``); [] otherwise."""
    if not bytes(raw):
        return []
    try:
        value = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _columns(path: Path, events: list[_Event], trace: _Trace | None,
             is_object: bool, columns: tuple[str, ...] = X_COLUMNS,
             typed: bool = True, categorical: tuple[str, ...] = ()) -> ChromeTrace:
    """Columns of an already decoded event list (the whole-file path).

    ``typed``: the events come from the typed decoder, not from :func:`_fallback`.
    """
    builder = _Builder(columns, typed, categorical)
    while events:  # from the end, in slices, releasing each slice once converted
        part = events[-_CHUNK:]
        del events[-_CHUNK:]
        builder.add(part)
    # batches were taken from the end: put the chunks back in file order
    for cols in (builder.x, builder.flows, builder.inst):
        cols.chunks = {k: v[::-1] for k, v in cols.chunks.items()}
    return builder.finish(trace, is_object)
