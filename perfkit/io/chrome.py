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
    to_ns,
)
from .validate import clean_events

__all__ = ["ChromeTrace", "read_chrome_trace"]

_IntStr = int | str | None
_FloatStr = float | str | None
_NO_RAW = msgspec.Raw(b"")


class _Args(msgspec.Struct, gc=False):
    name: _IntStr = None
    labels: _IntStr = None
    external_id: _IntStr = msgspec.field(default=None, name="External id")
    correlation: _IntStr = None
    stream: _IntStr = None
    device: _IntStr = None
    task_type: _IntStr = msgspec.field(default=None, name="Task Type")
    op_type: _IntStr = msgspec.field(default=None, name="type")
    total_allocated: _FloatStr = msgspec.field(default=None, name="Total Allocated")
    total_reserved: _FloatStr = msgspec.field(default=None, name="Total Reserved")
    mem_bytes: _FloatStr = msgspec.field(default=None, name="Bytes")
    device_id: _IntStr = msgspec.field(default=None, name="Device Id")
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


@dataclass
class ChromeTrace:
    """Columns of a decoded trace.

    Attributes
    ----------
    x : DataFrame
        Complete events (``ph == "X"``): name, cat, pid, tid, ts_ns (int64 absolute), dur_us,
        external_id, correlation, stream, device, task_type, and the raw JSON text of the
        operator arguments ``input_dims``, ``input_type``, ``concrete_inputs`` (Kineto
        ``record_shapes=True``; NA elsewhere).
    flows : DataFrame
        Flow events (``ph`` in s/f/t): ph, cat, name, id, pid, tid, ts_ns.
    instants : DataFrame
        Instant events (``ph`` in i/I) with the memory args.
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
        return pa.array([None if v is None else str(v) for v in values], pa.string())


def _pa_id(values: list[Any]) -> pa.Array:
    """int64 when every value is an integer, else text."""
    try:
        return pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return _pa_str(values)


def _pa_raw(values: tuple[Any, ...]) -> pa.Array:
    """JSON text of raw argument values (``Input Dims``), null where absent."""
    texts = [bytes(v) for v in values]
    if not any(texts):
        return pa.nulls(len(values), pa.string())
    return pa.array([t.decode("utf-8", "replace") if t and t != b"null" else None
                     for t in texts], pa.string())


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


def _to_pandas(chunks: list[pa.Array], kind: str) -> Any:
    """One pandas column from per-chunk arrow arrays (``kind``: str, id, num, ts)."""
    if kind == "id" and any(pa.types.is_string(c.type) for c in chunks):
        chunks = [c if pa.types.is_string(c.type) else pc.cast(c, pa.string()) for c in chunks]
        kind = "str"
    if kind == "str":
        chunks = [c if c.type == pa.string() else pc.cast(c, pa.string()) for c in chunks]
        return pd.Series(pd.arrays.ArrowStringArray(pa.chunked_array(chunks, pa.string())),
                         dtype="string")
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


def read_chrome_trace(path: Path, what: str = "a Chrome trace (JSON)") -> ChromeTrace:
    """Decode a Chrome trace file (``.json`` or ``.json.gz``) into columns.

    Raises
    ------
    ProfileError
        Empty, truncated, binary, non-UTF-8, not JSON, or JSON of another shape.
    """
    if not path.name.endswith(".gz"):
        streamed = _read_streaming(path, what)
        if streamed is not None:
            builder, trace, is_object = streamed
            with gc_paused():
                return _checked(builder.finish(trace, is_object))
    raw = _read_bytes(path, what)
    head = raw[:64].lstrip()
    if head[:3] == b"\xef\xbb\xbf":
        raw = raw.lstrip()[3:]
        head = raw[:64].lstrip()
    if head[:1] not in (b"[", b"{"):
        raise ProfileError(path, describe_json_error(raw, "does not start with [ or {",
                                                     what + " (JSON array or object)"))
    is_object = head[:1] == b"{"
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
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise ProfileError(path, describe_json_error(raw, str(exc), what)) from None
        del raw
        return _checked(_columns(path, events, trace, is_object))


def _checked(trace: ChromeTrace) -> ChromeTrace:
    trace.notes.extend(clean_events(trace.x, trace.flows, trace.instants))
    return trace


STREAM_MIN_BYTES = 64 << 20
"""Files at least this large are decoded block by block (see :func:`_read_streaming`)."""
BLOCK_BYTES = 32 << 20
MAX_EVENT_BYTES = 64 << 20
"""More bytes than this without a ``},{`` between two events cannot be a trace."""


def _block(path: Path, fh: Any, offset: int, what: str) -> bytes:
    """The next block of a streamed file; a NUL byte in it ends the read."""
    data = fh.read(BLOCK_BYTES)
    nul = data.find(b"\x00")
    if nul >= 0:
        raise ProfileError(path, f"binary data (NUL byte at offset {offset + nul:,}): the "
                           f"file is damaged or zero-padded; expected {what} (JSON text)")
    return data
_SPLIT = re.compile(rb"\}\s*,\s*\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


def _decode_events(piece: bytes) -> list[_Event] | None:
    try:
        return msgspec.json.decode(b"[" + piece + b"]", type=list[_Event])
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return None


def _read_streaming(path: Path, what: str = "a Chrome trace (JSON)"
                    ) -> tuple[_Builder, _Trace | None, bool] | None:
    """Decode a large plain-JSON trace block by block, so the whole file is never held.

    The event array is cut at ``},{`` boundaries; a cut that falls inside a string or a
    nested object makes that piece fail to decode, and an earlier cut is tried instead.
    Returns None (the caller then decodes the whole file, which also produces the precise
    error message) for small files or anything unexpected. A block holding a NUL byte, or
    more than :data:`MAX_EVENT_BYTES` without an event boundary, stops the read with a
    ProfileError: neither can be part of a trace.
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
    events = _Builder()
    offset = 0
    with open(path, "rb") as fh, gc_paused():
        buf = _block(path, fh, offset, what)
        offset += len(buf)
        lead = buf[:64].lstrip()
        if lead[:1] == b"[":
            is_object = False
            header = b""
            buf = buf[buf.index(b"[") + 1:]
        elif lead[:1] == b"{":
            m = _EVENTS_KEY.search(buf)
            if m is None:
                return None
            is_object = True
            header = buf[:m.start()].rstrip()
            buf = buf[m.end():]
        else:
            return None
        eof = False
        while True:
            if not eof:
                more = _block(path, fh, offset, what)
                offset += len(more)
                eof = not more
                buf += more
            if eof:
                break
            if len(buf) > MAX_EVENT_BYTES + BLOCK_BYTES:
                raise ProfileError(path, f"no event boundary in {len(buf) >> 20} MB before "
                                   f"offset {offset:,}: the file is damaged; expected {what}")
            # only the last few cut points are needed: look near the end first
            window = 1 << 20
            cuts = [m.start() for m in _SPLIT.finditer(buf, max(0, len(buf) - window))]
            if not cuts:
                cuts = [m.start() for m in _SPLIT.finditer(buf, max(0, len(buf) - BLOCK_BYTES))]
            for cut in reversed(cuts[-8:]):
                got = _decode_events(buf[:cut + 1])
                if got is not None:
                    events.add(got)
                    buf = buf[buf.index(b"{", cut + 1):]
                    break
        # the rest: last events, "]" and (for an object) the remaining keys
        end = len(buf)
        for _ in range(16):
            end = buf.rfind(b"]", 0, end)
            if end < 0:
                return None
            got = _decode_events(buf[:end])
            if got is not None:
                events.add(got)
                tail = buf[end + 1:].strip()
                break
        else:
            return None
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
            if isinstance(props, list) else _NO_RAW)
    return events, trace


_ARG_KEYS = {"name": "name", "labels": "labels", "external_id": "External id",
             "correlation": "correlation", "stream": "stream", "device": "device",
             "task_type": "Task Type", "op_type": "type", "total_allocated": "Total Allocated",
             "total_reserved": "Total Reserved", "mem_bytes": "Bytes",
             "device_id": "Device Id"}

_RAW_ARG_KEYS = {"input_dims": "Input Dims", "input_type": "Input type",
                 "concrete_inputs": "Concrete Inputs"}


def _raw_json(value: Any) -> msgspec.Raw:
    """An operator argument kept as raw JSON text, as the fast decoder keeps it."""
    return _NO_RAW if value is None else msgspec.Raw(msgspec.json.encode(value))


_KINDS_X = {"name": "str", "cat": "str", "pid": "id", "tid": "id", "ts_ns": "ts",
            "dur_us": "num", "external_id": "id", "correlation": "id", "stream": "id",
            "device": "id", "task_type": "str", "op_type": "str", "total_allocated": "num",
            "total_reserved": "num", "bytes": "num", "device_id": "id", "input_dims": "str",
            "input_type": "str", "concrete_inputs": "str"}
_KINDS_FLOW = {"name": "str", "cat": "str", "pid": "id", "tid": "id", "ts_ns": "ts",
               "dur_us": "num", "id": "str", "ph": "str"}
_ARG_FIELDS = ("external_id", "correlation", "stream", "device", "task_type", "op_type",
               "total_allocated", "total_reserved", "mem_bytes", "device_id")
_RAW_FIELDS = ("input_dims", "input_type", "concrete_inputs")


_EMPTY_ARGS = _Args()


class _Columns:
    """Arrow column chunks of one kind of event, filled batch by batch."""

    def __init__(self, with_args: bool) -> None:
        self.with_args = with_args
        self.kinds = _KINDS_X if with_args else _KINDS_FLOW
        self.chunks: dict[str, list[pa.Array]] = {k: [] for k in self.kinds}
        self.n = 0

    def add(self, evs: list[_Event]) -> None:
        """Convert ``evs`` (in slices, so temporary tuples stay small)."""
        for lo in range(0, len(evs), _CHUNK):
            part = evs[lo:lo + _CHUNK]
            self.n += len(part)
            name, cat, pid, tid, ts, dur, ident, args, ph = zip(
                *map(attrgetter("name", "cat", "pid", "tid", "ts", "dur", "id", "args", "ph"),
                     part), strict=True)
            c = self.chunks
            c["name"].append(_pa_str(list(name)))
            c["cat"].append(_pa_str(list(cat)))
            c["pid"].append(_pa_id(list(pid)))
            c["tid"].append(_pa_id(list(tid)))
            c["ts_ns"].append(_pa_ts(list(ts), 0))
            c["dur_us"].append(_pa_num(list(dur)))
            if not self.with_args:
                c["id"].append(_pa_str(list(ident)))
                c["ph"].append(_pa_str(list(ph)))
                continue
            filled = [a if a is not None else _EMPTY_ARGS for a in args]
            cols = zip(*map(attrgetter(*_ARG_FIELDS), filled), strict=True)
            for key, vals in zip(("external_id", "correlation", "stream", "device",
                                  "task_type", "op_type", "total_allocated",
                                  "total_reserved", "bytes", "device_id"), cols, strict=True):
                kind = self.kinds[key]
                maker = _pa_id if kind == "id" else _pa_str if kind == "str" else _pa_num
                c[key].append(maker(list(vals)))
            raws = zip(*map(attrgetter(*_RAW_FIELDS), filled), strict=True)
            for key, vals in zip(_RAW_FIELDS, raws, strict=True):
                c[key].append(_pa_raw(list(vals)))

    def frame(self, base_ns: int) -> pd.DataFrame:
        if not self.n:
            cols = ["name", "cat", "pid", "tid", "ts_ns", "dur_us", "id"]
            return pd.DataFrame({c: [] for c in cols})
        out = {k: _to_pandas(self.chunks[k], kind)
               for k, kind in self.kinds.items()}
        if base_ns:
            ts = out["ts_ns"]
            out["ts_ns"] = np.where(ts == _NA_NS, ts, ts + np.int64(base_ns))
        if self.with_args and all(pd.isna(out[c]).all() for c in ("total_allocated", "bytes")):
            for c in ("total_allocated", "total_reserved", "bytes", "device_id"):
                del out[c]
        if self.with_args:
            for c in _RAW_FIELDS:
                if out[c].isna().all():
                    del out[c]
        self.chunks = {}
        return pd.DataFrame(out)


class _Builder:
    """Collects decoded events batch by batch into columns; the structs are then dropped."""

    def __init__(self) -> None:
        self.x = _Columns(True)
        self.flows = _Columns(False)
        self.inst = _Columns(True)
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
        if trace is not None:
            if trace.distributedInfo is not None:
                groups = _dict_list(trace.distributedInfo.pg_config)
            props = _dict_list(trace.deviceProperties)
        return ChromeTrace(
            x=self.x.frame(base_ns), flows=self.flows.frame(base_ns),
            instants=self.inst.frame(base_ns), processes=self.processes, labels=self.labels,
            threads=self.threads, rank=rank, world_size=world,
            backend=None if backend is None else str(backend), is_object=is_object,
            n_events=self.n_events, notes=notes, process_groups=groups,
            device_properties=props)


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
             is_object: bool) -> ChromeTrace:
    """Columns of an already decoded event list (the whole-file path)."""
    builder = _Builder()
    while events:  # from the end, in slices, releasing each slice once converted
        part = events[-_CHUNK:]
        del events[-_CHUNK:]
        builder.add(part)
    # batches were taken from the end: put the chunks back in file order
    for cols in (builder.x, builder.flows, builder.inst):
        cols.chunks = {k: v[::-1] for k, v in cols.chunks.items()}
    return builder.finish(trace, is_object)
