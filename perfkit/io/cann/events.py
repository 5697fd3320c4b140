"""The events of raw CANN timeline files, decoded into one frame.

The one job of this module: decode the Chrome trace-event arrays that ``msprof --export=on``
writes (``msprof_*``, ``task_time_*``, ``hccl_*``, ``step_trace_*``; see
:mod:`perfkit.io.cann.raw`) with :mod:`msgspec`, keeping only the fields the tables use,
resolve each event's process and thread names from the file's metadata events, and
return every file's events as one :class:`pandas.DataFrame` (:func:`_frame`): ``ts_ns``
exact (integer ns, from the text of ``ts``), the numbers as float, the names as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa

from ..._text_dtype import TEXT
from ...errors import ProfileError, file_boundary
from .._common import (
    check_file,
    decode_text_bytes,
    describe_json_error,
    gc_paused,
    int64_series,
    to_ns,
)

__all__: list[str] = []

_V = int | float | str | None


class _Args(msgspec.Struct, gc=False):
    name: _V = None
    task_type: _V = msgspec.field(default=None, name="Task Type")
    stream_id: _V = msgspec.field(default=None, name="Stream Id")
    task_id: _V = msgspec.field(default=None, name="Task Id")
    iteration_id: _V = msgspec.field(default=None, name="Iteration ID")
    data_aug_us: _V = msgspec.field(default=None, name="Data_aug Bound(us)")
    hccl_task: _V = msgspec.field(default=None, name="task type")
    hccl_stream: _V = msgspec.field(default=None, name="stream id")
    src_rank: _V = msgspec.field(default=None, name="src rank")
    dst_rank: _V = msgspec.field(default=None, name="dst rank")
    transport: _V = msgspec.field(default=None, name="transport type")
    link: _V = msgspec.field(default=None, name="link type")
    size: _V = msgspec.field(default=None, name="size(Byte)")


class _Event(msgspec.Struct, gc=False):
    ph: _V = ""
    name: _V = ""
    cat: _V = None
    pid: _V = None
    tid: _V = None
    ts: _V = None
    dur: _V = None
    args: _Args | None = None


class _Wrapped(msgspec.Struct):
    traceEvents: list[_Event] = msgspec.field(default_factory=list)  # noqa: N815


_EMPTY = _Args()
_COLUMNS = ("proc", "thread", "name", "cat", "ph", "ts", "dur", "task_type", "stream_id",
            "task_id", "iteration_id", "data_aug_us", "hccl_task", "hccl_stream", "src_rank",
            "dst_rank", "transport", "link", "size")


def _decode(path: Path) -> list[_Event]:
    what = "CANN timeline JSON (an array of trace events)"
    check_file(path, what, utf16=True)
    try:
        data = decode_text_bytes(path, path.read_bytes(), what)
    except OSError as exc:
        raise ProfileError(path, f"cannot read {what}: {exc.strerror or exc}") from None
    with gc_paused():
        try:
            if data.lstrip()[:1] == b"{":
                return msgspec.json.decode(data, type=_Wrapped).traceEvents
            return msgspec.json.decode(data, type=list[_Event])
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise ProfileError(path, describe_json_error(data, str(exc), what)) from None


def _text(v: Any) -> str | None:
    if v is None:
        return None
    return repr(v) if isinstance(v, float) else str(v)


def _rows(path: Path) -> dict[str, list[Any]]:
    """Columns of one file's events; process and thread names resolved from its metadata."""
    events = _decode(path)
    procs: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for e in events:
        if e.ph == "M" and e.args is not None and e.args.name is not None:
            if e.name == "process_name":
                procs[e.pid] = str(e.args.name)
            elif e.name == "thread_name":
                threads[(e.pid, e.tid)] = str(e.args.name)
    cols: dict[str, list[Any]] = {c: [] for c in _COLUMNS}
    for e in events:
        if e.ph not in ("X", "t", "s", "f"):
            continue
        a = e.args or _EMPTY
        cols["proc"].append(procs.get(e.pid, ""))
        cols["thread"].append(threads.get((e.pid, e.tid), ""))
        cols["name"].append(_text(e.name) or "")
        cols["cat"].append(_text(e.cat))
        cols["ph"].append(_text(e.ph))
        cols["ts"].append(_text(e.ts))
        cols["dur"].append(e.dur)
        for c in _COLUMNS[7:]:
            cols[c].append(getattr(a, c))
    return cols


def _frame(files: Sequence[Path]) -> pd.DataFrame:
    """All events of ``files`` as one frame: ``ts_ns`` exact, numbers as float."""
    parts: dict[str, list[Any]] = {c: [] for c in _COLUMNS}
    source: list[int] = []
    for i, f in enumerate(files):
        with file_boundary(f, "a CANN timeline"):
            cols = _rows(f)
        for c in _COLUMNS:
            parts[c].extend(cols[c])
        source.extend([i] * len(cols["name"]))
    n = len(parts["name"])
    frame = pd.DataFrame({
        "proc": pd.array(parts["proc"], dtype=TEXT),
        "thread": pd.array(parts["thread"], dtype=TEXT),
        "name": pd.array(parts["name"], dtype=TEXT),
        "cat": pd.array(parts["cat"], dtype=TEXT),
        "ph": pd.array(parts["ph"], dtype=TEXT),
        "file": np.asarray(source, dtype=np.int64),
    })
    ts = to_ns(pa.array(parts["ts"], pa.string()), n, label="ts of the CANN timeline")
    frame["ts_ns"] = int64_series(ts)
    frame["dur_us"] = pd.to_numeric(pd.Series(parts["dur"], dtype=object), errors="coerce")
    for c in ("task_type", "hccl_task", "transport", "link"):
        frame[c] = pd.array([_text(v) for v in parts[c]], dtype=TEXT)
    for c in ("stream_id", "task_id", "iteration_id", "data_aug_us", "hccl_stream",
              "src_rank", "dst_rank", "size"):
        frame[c] = pd.to_numeric(pd.Series(parts[c], dtype=object), errors="coerce")
    return frame

