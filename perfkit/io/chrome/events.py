"""What perfkit reads of a Chrome trace-event file, and the columns it becomes.

The msgspec structs the decoders fill (``_Args``, ``_Event``, ``_Dist``, ``_Trace``: only the
fields perfkit uses, ``ts`` and ``dur`` numbers or strings), the ``args`` columns that can be
asked for (:data:`ARG_COLUMNS`, :data:`X_COLUMNS`), the top-level keys kept
(:data:`HEADER_KEYS`) and :class:`ChromeTrace`, the decoded trace. The structs are shared by
the reader (:mod:`perfkit.io.chrome.decode`) and the column builder
(:mod:`perfkit.io.chrome.columns`) only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
import pandas as pd

__all__ = ["ChromeTrace", "ARG_COLUMNS", "X_COLUMNS", "HEADER_KEYS"]

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
    # the CUDA / HIP graph a replayed kernel belongs to (CUPTI graphId; newer Kineto)
    graph_id: _IntStr = msgspec.field(default=None, name="graph id")
    group_size: _FloatStr = msgspec.field(default=None, name="Group size")
    pg_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")  # text or list
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
    "msg_dtype": ("msg_dtype", "str"), "graph_id": ("graph_id", "id"),
    "group_size": ("group_size", "num"), "pg_ranks": ("pg_ranks", "str")}
"""Columns that can be read from ``args``: column -> (field of :class:`_Args`, kind)."""
X_COLUMNS = ("external_id", "correlation", "stream", "device", "task_type", "op_type",
             "input_dims", "input_type", "concrete_inputs")
"""``args`` columns kept for complete (``X``) events unless the reader asks for fewer."""
_MEMORY = ("total_allocated", "total_reserved", "bytes", "device_id", "device_type")
_SPARSE = ("pg_name", "collective", "in_nelems", "out_nelems", "msg_dtype", "group_size",
           "pg_ranks")
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
        What the plausibility checks set to NA (:func:`perfkit.io.canonical.validate.clean_events`).
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
    unread_ts : list
        The raw ``ts`` of the first complete event whose timestamp could not be read (not a
        number, or out of int64 nanoseconds' range), as one item; empty when every one was.
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
    unread_ts: list[Any] = field(default_factory=list)

    @property
    def device_names(self) -> list[str]:
        """``name`` of each entry of ``device_properties`` (the GPU models)."""
        return [str(d["name"]) for d in self.device_properties if d.get("name")]
