"""Raw CANN profiler output: the ``PROF_*`` folders msprof and the Ascend profilers write.

Layouts read
------------
``PROF_*/device_{id}/timeline/{name}_{device}_{model}_{iteration}.json``
    What ``msprof --export=on`` writes up to CANN 6.x, one set of files per exported
    iteration (Chrome trace-event arrays): ``task_time_*`` — the device tasks (process
    "Ascend Hardware", one thread per stream, ``args`` "Task Type", "Stream Id", "Task Id");
    ``hccl_*`` — process "HCCL": the whole communication operators on the thread
    "Communication Kernel" (no ``args``) and their tasks on the "Plane N" threads (``args``
    "task type", "src rank", "dst rank", "transport type", "link type", "size(Byte)");
    ``step_trace_*`` — the iteration marks ("Iteration N", "FP_BP Time N", "Iteration
    Refresh N", "Data_aug Bound N"), every iteration in every file; ``msprof_*`` — all of
    these for one iteration plus the "Overlap Analysis" tracks (Computing, Communication,
    Communication(Not Overlapped), Free) and the host's CANN API calls. ``info.json.{id}``
    holds the rank (``rank_id``) and the device; ``start_info.{id}`` ties the timeline's
    clock (CLOCK_MONOTONIC_RAW, µs) to the epoch (``collectionTimeBegin``, µs).
``PROF_*/mindstudio_profiler_output/msprof_*.json`` (+ ``step_trace_*.json``)
    The same timeline as one file per PROF folder (CANN 7 and later, from the CANN
    documentation; timestamps already on the epoch). Read when the PROF folder holds one
    device.

What becomes which table
------------------------
``kernels``
    Device tasks (process "Ascend Hardware" with a "Task Type"), with their step (the
    iteration whose window holds their start). Tasks on a stream that HCCL uses (the
    "stream id" of its plane tasks) are ``communication``; the operator type of a MindSpore
    task is the last scope segment of its name without ``-opN``.
``steps``
    One row per iteration: ``preparing_us`` and ``iteration_interval_us`` (Data_aug Bound:
    the device waiting for data from the previous iteration's end, before the iteration's
    first task), ``fp_and_bp_us``, ``tail_us`` (Iteration Refresh), ``total_us`` (the
    Iteration Time, which starts after the wait: the step time adds the two, as
    MindSpore's step trace counts its step interval in its step) and, from the Overlap
    Analysis tracks inside the iteration, ``computing_us``, ``communication_us``,
    ``comm_not_overlapped_us`` and ``free_us`` (the Free track and the idle time between
    the iteration's start and its first task, and between its last task and its end, so
    that the parts add up to the Iteration Time).
``comm_ops``
    The whole communication operators: name, start, ``elapse_us``.
``comm_bandwidth`` / ``comm_matrix``
    From the plane tasks that move data, as msprof's communication parser counts them:
    ``Memcpy`` / ``Reduce_Inline`` tasks over SDMA between two different ranks (on-chip
    copies left out), attributed to the operator whose window holds their end; the
    bandwidth class is the link type (HCCS, PCIE, SIO) and ``SDMA`` their sum.

Refused, with a note naming the command that writes a readable export: framework
operators (``ops``: the timeline's host events are CANN API calls, not operators), the
wait / synchronisation / idle split of communication operators and their transit time
(msprof takes them from the master stream, which the exported timeline does not mark),
RDMA bandwidth (msprof groups payload and notify tasks that the exported timeline does
not tie together) and memory. A PROF folder holding only raw binary data (``data/``) is
refused as a whole with the export command.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa

from ..errors import ProfileError, file_boundary
from ..format import counted, listed, plural, runs_text
from ..profile import ProfileMeta
from ._common import (
    check_file,
    decode_text_bytes,
    describe_json_error,
    gc_paused,
    int64_series,
    to_ns,
    with_notes,
)
from .categories import category
from .comm_words import CANN_UNRECORDED
from .trace_tables import step_index

__all__ = ["EXPORT_HINT", "TIMELINE_KINDS", "is_prof_dir", "is_device_dir", "sources_of",
           "sniff_timeline", "parse", "device_rank", "collection_window"]

EXPORT_HINT = (
    "export it first: `msprof --export=on --output=<PROF_ folder>` (CANN's msprof; it "
    "writes device_<id>/timeline/ up to CANN 6.x, mindstudio_profiler_output/ from CANN 7), "
    "or, for a torch_npu / MindSpore run, analyse the whole *_ascend_pt / *_ascend_ms "
    "folder (`torch_npu.profiler.profiler.analyse(<folder>)`, "
    "`mindspore.profiler.profiler.analyse(<folder>)`) and load that folder")
"""How to turn raw CANN data into files perfkit reads (quoted in error messages)."""

TIMELINE_KINDS = ("msprof", "task_time", "hccl", "step_trace")
"""Timeline JSON files read (by name prefix); other exported timelines are not."""

_OUTPUT_DIR = "mindstudio_profiler_output"
_DEVICE_RE = re.compile(r"^device_(\d+)$")
_KIND_RE = re.compile(r"^(msprof|task_time|hccl|step_trace)_(.+)\.json$")
_OP_TYPE_RE = re.compile(r"([A-Za-z][\w.]*)-op\d+$")
_STEP_CATS = {"Iteration Time": "total_us", "FP_BP Time": "fp_and_bp_us",
              "Iteration Refresh": "tail_us"}
_TRACKS = {"Computing": "computing_us", "Communication": "communication_us",
           "Communication(Not Overlapped)": "comm_not_overlapped_us", "Free": "free_us"}
_TRANSIT_TASKS = ("Memcpy", "Reduce_Inline")
_LINK_CLASSES = {"HCCS": "HCCS", "HCCS_SW": "HCCS", "PCIE": "PCIE", "SIO": "SIO"}
_EPOCH_US = 1e14  # timestamps above this (1973 in µs) are on the epoch already


# ----------------------------------------------------------------------------- finding

def is_prof_dir(path: Path) -> bool:
    """A CANN ``PROF_*`` folder (name and a ``device_*``, ``host`` or output folder)."""
    if not path.name.startswith("PROF_") or not path.is_dir():
        return False
    try:
        names = {p.name for p in path.iterdir() if p.is_dir()}
    except OSError:
        return False
    return bool(names & {"host", _OUTPUT_DIR, "timeline"}) or any(
        _DEVICE_RE.match(n) for n in names)


def is_device_dir(path: Path) -> bool:
    """A ``device_{id}`` folder of a PROF folder (it holds ``info.json.{id}`` or data)."""
    m = _DEVICE_RE.match(path.name)
    if not m or not path.is_dir():
        return False
    return (path / f"info.json.{m.group(1)}").exists() or (path / "timeline").is_dir() \
        or (path / "data").is_dir()


def _timeline_files(folder: Path) -> list[Path]:
    try:
        return sorted(f for f in folder.iterdir() if f.is_file() and _KIND_RE.match(f.name))
    except OSError:
        return []


def device_rank(device_dir: Path) -> tuple[int | None, int | None]:
    """(rank, device id) of a ``device_{id}`` folder: ``rank_id`` of ``info.json.{id}``."""
    m = _DEVICE_RE.match(device_dir.name)
    dev = int(m.group(1)) if m else None
    info = _info(device_dir)
    return _rank_of(info), dev


def collection_window(folder: Path) -> tuple[int | None, int | None]:
    """(start, end) of a device's collection, epoch ns, from ``start_info.{id}``
    (``collectionTimeBegin``) and ``end_info.{id}`` (``collectionTimeEnd``, µs) of a
    ``device_{id}`` folder (or of the one device of a PROF folder); None where not known.

    Cheap (two small files): how the runs of a folder are told apart before parsing.
    """
    devices = [folder] if _DEVICE_RE.match(folder.name) else \
        sorted(d for d in folder.glob("device_*") if d.is_dir())
    if len(devices) != 1:
        return None, None
    out: list[int | None] = []
    for kind, key in (("start_info", "collectionTimeBegin"), ("end_info", "collectionTimeEnd")):
        found = [f for f in sorted(devices[0].glob(f"{kind}.*")) if not f.name.endswith(".done")]
        value = str(_small_json(found[0]).get(key, "")).strip() if found else ""
        out.append(int(value) * 1000 if value.isdigit() and len(value) < 19 else None)
    start, end = out
    if start is None or (end is not None and end < start):
        return start, None
    return start, end


def _rank_of(info: dict[str, Any]) -> int | None:
    rid = info.get("rank_id")
    if isinstance(rid, bool) or not isinstance(rid, (int, str)):
        return None
    text = str(rid).strip()
    return int(text) if text.isdigit() and len(text) < 10 else None


def _small_json(path: Path) -> dict[str, Any]:
    """A small JSON object file (info, start_info), ``{}`` when absent or unreadable."""
    try:
        if path.stat().st_size > 1 << 22:
            return {}
        data = json.loads(path.read_bytes().decode("utf-8", errors="replace"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _info(device_dir: Path) -> dict[str, Any]:
    found = sorted(device_dir.glob("info.json.*"))
    found = [f for f in found if not f.name.endswith(".done")]
    return _small_json(found[0]) if found else {}


def sources_of(path: Path) -> list[tuple[str, int | None, tuple[str, ...], str]]:
    """The ranks a PROF folder (or one of its device folders) holds.

    Returns
    -------
    list of (folder, rank, files, error)
        One entry per device: the device folder (or the PROF folder for the one-file
        layout), its rank when ``info.json`` gives one, the files read and, for a device
        with nothing exported, the error saying how to export it (files then empty).
    """
    if _DEVICE_RE.match(path.name):
        prof, devices = path.parent, [path]
    else:
        prof = path
        devices = sorted((d for d in prof.iterdir() if is_device_dir(d)),
                         key=lambda d: int(_DEVICE_RE.match(d.name).group(1)))
    out: list[tuple[str, int | None, tuple[str, ...], str]] = []
    merged = _timeline_files(prof / _OUTPUT_DIR)
    if merged and len(devices) <= 1 and not any(_timeline_files(d / "timeline")
                                                for d in devices):
        rank = device_rank(devices[0])[0] if devices else None
        extra = [str(f) for d in devices for f in _meta_files(d)]
        return [(str(prof), rank, tuple(str(f) for f in merged) + tuple(extra), "")]
    for d in devices:
        files = _timeline_files(d / "timeline")
        rank = device_rank(d)[0]
        if files:
            out.append((str(d), rank, tuple(str(f) for f in [*files, *_meta_files(d)]), ""))
        else:
            why = (f"raw CANN data without an exported timeline ({d.name} has no "
                   f"timeline/ folder with msprof_/task_time_/hccl_/step_trace_ JSON files)")
            if merged:
                why = (f"{prof.name}/{_OUTPUT_DIR}/ holds the timeline of {len(devices)} "
                       "devices in one file; perfkit reads one device per PROF folder")
            out.append((str(d), rank, (), f"{why}; {EXPORT_HINT}"))
    if not out:
        out.append((str(prof), None, (), "a PROF folder without device data or an exported "
                    f"timeline; {EXPORT_HINT}"))
    return out


def _meta_files(device_dir: Path) -> list[Path]:
    return [f for f in sorted(device_dir.glob("*info*")) if f.is_file()
            and not f.name.endswith(".done")]


def sniff_timeline(head: bytes) -> bool:
    """Whether the start of a JSON file is a CANN timeline (not a Kineto trace).

    A CANN timeline is a JSON array of trace events whose processes are CANN's ("Ascend
    Hardware", "HCCL", "Overlap Analysis", "Step Trace", "CANN") or whose events carry
    CANN's ``args`` ("Task Type", "Iteration ID"), with no framework operator of
    torch_npu's ``trace_view.json`` (``cpu_op``, ``async_npu`` flows).
    """
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text.startswith(b"["):
        return False
    if b'"cpu_op"' in text or b'"async_npu"' in text or b'"python_function"' in text:
        return False
    return any(m in text for m in (b'"Ascend Hardware"', b'"Overlap Analysis"',
                                   b'"Task Type"', b'"Iteration ID"', b'"Step Trace',
                                   b'"Communication Kernel"', b'"transport type"'))


# ----------------------------------------------------------------------------- decoding

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
        "proc": pd.array(parts["proc"], dtype="string"),
        "thread": pd.array(parts["thread"], dtype="string"),
        "name": pd.array(parts["name"], dtype="string"),
        "cat": pd.array(parts["cat"], dtype="string"),
        "ph": pd.array(parts["ph"], dtype="string"),
        "file": np.asarray(source, dtype=np.int64),
    })
    ts = to_ns(pa.array(parts["ts"], pa.string()), n, label="ts of the CANN timeline")
    frame["ts_ns"] = int64_series(ts)
    frame["dur_us"] = pd.to_numeric(pd.Series(parts["dur"], dtype=object), errors="coerce")
    for c in ("task_type", "hccl_task", "transport", "link"):
        frame[c] = pd.array([_text(v) for v in parts[c]], dtype="string")
    for c in ("stream_id", "task_id", "iteration_id", "data_aug_us", "hccl_stream",
              "src_rank", "dst_rank", "size"):
        frame[c] = pd.to_numeric(pd.Series(parts[c], dtype=object), errors="coerce")
    return frame


# ----------------------------------------------------------------------------- tables

def _steps(ev: pd.DataFrame, notes: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(steps, windows): one row per iteration and its [start, end) window in ns."""
    marks = ev[ev["cat"].isin(list(_STEP_CATS)) & (ev["ph"] == "X")
               & ev["iteration_id"].notna() & ev["ts_ns"].notna()]
    marks = marks.drop_duplicates(["cat", "iteration_id"])
    it = marks[marks["cat"] == "Iteration Time"]
    if it.empty:
        notes.append("steps: no iteration marks (step_trace / Step Trace) in the timeline")
        return pd.DataFrame(), pd.DataFrame(columns=["step", "start_ns", "end_ns"])
    start = it["ts_ns"].astype(np.int64).to_numpy()
    windows = pd.DataFrame({
        "step": it["iteration_id"].astype(np.int64).to_numpy(),
        "start_ns": start,
        "end_ns": start + np.round(it["dur_us"].to_numpy(np.float64) * 1000).astype(np.int64),
    }).sort_values("start_ns", kind="stable").reset_index(drop=True)
    steps = windows[["step"]].copy()
    steps["step_start_ns"] = windows["start_ns"]
    for cat, col in _STEP_CATS.items():
        part = marks[marks["cat"] == cat].set_index("iteration_id")["dur_us"]
        steps[col] = steps["step"].map(part).astype(np.float64)
    aug = ev[(ev["ph"] == "t") & ev["data_aug_us"].notna()]
    if len(aug):
        ids = pd.to_numeric(aug["name"].str.extract(r"(\d+)$", expand=False),
                            errors="coerce")
        bound = pd.Series(aug["data_aug_us"].to_numpy(), index=ids.to_numpy())
        bound = bound[~bound.index.duplicated()]
        steps["iteration_interval_us"] = steps["step"].map(bound).astype(np.float64)
    ov = ev[(ev["proc"] == "Overlap Analysis") & (ev["ph"] == "X") & ev["ts_ns"].notna()]
    ov = ov.drop_duplicates(["name", "ts_ns", "dur_us"])
    if len(ov):
        step = step_index(ov["ts_ns"].astype(np.int64).to_numpy(), windows)
        sums = pd.DataFrame({"step": step, "track": ov["name"].to_numpy(),
                             "dur": ov["dur_us"].to_numpy(np.float64)}).dropna(subset=["step"])
        wide = sums.pivot_table(index="step", columns="track", values="dur", aggfunc="sum")
        have = steps["step"].isin(wide.index)
        for track, col in _TRACKS.items():
            vals = steps["step"].map(wide[track]) if track in wide else np.nan
            # an iteration with Overlap Analysis events but none of this track: 0, not NA
            steps[col] = pd.Series(vals, index=steps.index, dtype=np.float64).where(
                ~have, pd.Series(vals, index=steps.index, dtype=np.float64).fillna(0.0))
        steps["overlapped_us"] = steps["communication_us"] - steps["comm_not_overlapped_us"]
        # the tracks run from the iteration's first task to its last, a few µs inside the
        # Iteration Time: the device's idle time at either end is free time as well, so
        # that the parts cover the iteration and the step time counts all of it
        edges = (steps["total_us"] - steps["computing_us"] - steps["comm_not_overlapped_us"]
                 - steps["free_us"])
        steps["free_us"] = steps["free_us"] + edges.where(edges > 0, 0.0)
        missing = int((~have).sum())
        if missing:  # which ones, by number: the page says it once, in this note
            lacking = [int(i) for i in steps.loc[~have, "step"].dropna()]
            notes.append(f"steps: {plural(missing, 'iteration', 'iterations')} "
                         f"{runs_text(lacking)} of {len(steps)} "
                         f"{plural(missing, 'has', 'have')} no Overlap "
                         f"Analysis events ({plural(missing, 'its', 'their')} msprof_ file "
                         f"is absent): computing / communication / free unknown for "
                         f"{plural(missing, 'it', 'them')}")
    else:
        notes.append("steps: no Overlap Analysis tracks (msprof_*.json): computing / "
                     "communication / free per step unknown; total_us is the iteration time")
    if "iteration_interval_us" in steps:
        _count_the_interval(steps, windows, notes)
    return steps, windows


def _count_the_interval(steps: pd.DataFrame, windows: pd.DataFrame, notes: list[str]) -> None:
    """Each iteration's Data_aug Bound as the device's wait before it (``preparing_us``).

    msprof's Iteration Time of iteration N starts at its FP start; its Data_aug Bound is
    the time before, from the end of iteration N-1, while the device waits for the next
    batch: the wait before the step's first device task, which is what ``preparing_us``
    is for every format. MindSpore's step trace counts that step interval in the step
    (interval + FP/BP + tail = total), and the job steps at that pace: the step time
    (``step_us + preparing_us``, :func:`perfkit.analysis.step_wall_us`) counts it too; the
    Overview splits it off as the wait before the first device task, and the Timeline
    draws it before the iteration's tasks. The bound is capped at the gap to the iteration
    before (it is measured to the FP start, a few µs inside the Iteration Time), so that
    no time is counted twice.
    """
    bound = steps["iteration_interval_us"].to_numpy(np.float64)
    order = windows.sort_values("start_ns", kind="stable")
    gap = (order["start_ns"] - order["end_ns"].shift()).to_numpy(np.float64) / 1000.0
    gap_of = dict(zip(order["step"].to_numpy(), gap, strict=True))
    before = steps["step"].map(gap_of).to_numpy(np.float64)
    counted = np.where(np.isnan(bound), 0.0, np.clip(bound, 0.0, None))
    counted = np.where(np.isfinite(before), np.minimum(counted, np.clip(before, 0.0, None)),
                       counted)
    steps["iteration_interval_us"] = np.where(np.isnan(bound), np.nan, counted)
    steps["preparing_us"] = steps["iteration_interval_us"]
    if counted.any():
        notes.append("steps: each step's Data_aug Bound (the device idle from the previous "
                     "iteration's end to its FP start) is its preparing_us, the device's wait "
                     "before its first task; the step time adds it to the iteration, as "
                     "MindSpore's step trace counts its step interval")


def _op_type(names: pd.Series) -> pd.Series:
    """Operator type from a MindSpore task name (``.../MatMul-op12`` -> ``MatMul``)."""
    return names.str.extract(_OP_TYPE_RE, expand=False).astype("string")


def _kernels(ev: pd.DataFrame, windows: pd.DataFrame, comm_streams: set[int]) -> pd.DataFrame:
    dev = ev[(ev["proc"] == "Ascend Hardware") & (ev["ph"] == "X") & ev["task_type"].notna()
             & ev["ts_ns"].notna()]
    stream = dev["stream_id"].where(dev["stream_id"].notna(),
                                    pd.to_numeric(dev["thread"].str.extract(
                                        r"Stream (\d+)", expand=False), errors="coerce"))
    dev = dev.assign(stream=stream)
    dev = dev.drop_duplicates(["stream", "task_id", "ts_ns", "name"])
    dev = dev.sort_values("ts_ns", kind="stable")
    names = dev["name"].astype("string")
    frame = pd.DataFrame({
        "name": names.to_numpy(), "type": _op_type(names).to_numpy(),
        "core": dev["task_type"].to_numpy(), "stream": dev["stream"].to_numpy(),
        "task_id": dev["task_id"].to_numpy(), "dur_us": dev["dur_us"].to_numpy(np.float64),
    })
    frame["start__ns"] = dev["ts_ns"].to_numpy()
    cat = category(frame["core"].astype("string"), frame["type"].astype("string"),
                   frame["name"].astype("string"))
    on_comm = frame["stream"].isin(list(comm_streams)).to_numpy(bool)
    frame["category"] = cat.where(~on_comm, "communication")
    frame["step"] = step_index(pd.to_numeric(frame["start__ns"]).to_numpy(np.int64), windows) \
        if len(windows) else np.nan
    return frame


def _hccl(ev: pd.DataFrame, windows: pd.DataFrame, notes: list[str]
          ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, set[int]]:
    """comm_ops, comm_bandwidth, comm_matrix and the streams HCCL uses."""
    h = ev[(ev["proc"] == "HCCL") & (ev["ph"] == "X") & ev["ts_ns"].notna()]
    h = h.drop_duplicates(["thread", "name", "ts_ns", "dur_us"])
    tasks = h[h["hccl_task"].notna()]
    ops = h[h["hccl_task"].isna()].sort_values("ts_ns", kind="stable")
    streams = {int(s) for s in tasks["hccl_stream"].dropna().unique()}
    start = ops["ts_ns"].astype(np.int64).to_numpy()
    end = start + np.round(ops["dur_us"].to_numpy(np.float64) * 1000).astype(np.int64)
    group = ops["thread"].str.extract(r"^Group (.+?) Communication$", expand=False)
    comm_ops = pd.DataFrame({
        "step": step_index(start, windows) if len(windows) else np.nan,
        "group": group.astype("string").to_numpy(),
        "name": ops["name"].to_numpy(),
        "op_type": ops["name"].str.rsplit("/", n=1).str[-1].str.extract(
            r"^(?:hcom_)?([A-Za-z]+)", expand=False).to_numpy(),
        "elapse_us": ops["dur_us"].to_numpy(np.float64),
    })
    comm_ops["start__ns"] = start
    if not len(ops):
        return comm_ops, pd.DataFrame(), pd.DataFrame(), streams
    t_end = tasks["ts_ns"].astype(np.int64).to_numpy() + np.round(
        tasks["dur_us"].to_numpy(np.float64) * 1000).astype(np.int64)
    # the operator whose window holds the task's end (msprof's rule); ops sorted by start
    idx = np.searchsorted(start, t_end, side="left") - 1
    ok = idx >= 0
    ok[ok] &= t_end[ok] <= end[idx[ok]]
    owner = np.where(ok, idx, -1)
    link = tasks["link"].fillna("").to_numpy(dtype=object)
    transit = (tasks["name"].isin(list(_TRANSIT_TASKS)).to_numpy(bool)
               & (tasks["transport"] == "SDMA").fillna(False).to_numpy(bool)
               & (link != "ON_CHIP")
               & (tasks["src_rank"] != tasks["dst_rank"]).fillna(False).to_numpy(bool)
               & (owner >= 0))
    sel = tasks[transit]
    own = owner[transit]
    kind = pd.Series([_LINK_CLASSES.get(str(x), "SDMA") for x in link[transit]],
                     dtype="string")
    moved = pd.DataFrame({
        "op": own, "transport": kind.to_numpy(),
        "size_bytes": sel["size"].to_numpy(np.float64),
        "transit_us": sel["dur_us"].to_numpy(np.float64),
        "src_local": sel["src_rank"].to_numpy(np.float64),
        "dst_local": sel["dst_rank"].to_numpy(np.float64),
    })
    names = comm_ops["name"].to_numpy()
    per = moved.groupby(["op", "transport"], sort=True).agg(
        size_bytes=("size_bytes", "sum"), transit_us=("transit_us", "sum")).reset_index()
    sdma = moved.groupby("op", sort=True).agg(size_bytes=("size_bytes", "sum"),
                                              transit_us=("transit_us", "sum")).reset_index()
    sdma = sdma.assign(transport="SDMA")
    per = per[per["transport"] != "SDMA"]
    bw = pd.concat([per, sdma[per.columns]], ignore_index=True).sort_values(
        ["op", "transport"], kind="stable")
    bw.insert(0, "name", names[bw["op"].to_numpy(np.int64)] if len(bw) else [])
    bw.insert(0, "step", comm_ops["step"].to_numpy()[bw["op"].to_numpy(np.int64)]
              if len(bw) else [])
    bw["bandwidth_gbps"] = (bw["size_bytes"] / 1e9) / (bw["transit_us"] / 1e6).where(
        bw["transit_us"] > 0)
    bw = bw.drop(columns=["op"]).reset_index(drop=True)
    links = moved.groupby(["op", "src_local", "dst_local", "transport"], sort=True).agg(
        size_bytes=("size_bytes", "sum"), time_us=("transit_us", "sum")).reset_index()
    links.insert(0, "name", names[links["op"].to_numpy(np.int64)] if len(links) else [])
    links.insert(0, "step", comm_ops["step"].to_numpy()[links["op"].to_numpy(np.int64)]
                 if len(links) else [])
    links["group"] = comm_ops["group"].to_numpy()[links["op"].to_numpy(np.int64)] \
        if len(links) else []
    links["bandwidth_gbps"] = (links["size_bytes"] / 1e9) / (links["time_us"] / 1e6).where(
        links["time_us"] > 0)
    links["src_rank"] = np.nan
    links["dst_rank"] = np.nan
    links = links.drop(columns=["op"]).reset_index(drop=True)
    if (tasks["transport"] == "RDMA").any():
        notes.append("comm_bandwidth: RDMA transfers not counted (msprof groups RDMA payload "
                     "and notify tasks, which the exported timeline does not tie together); "
                     "use the analysed export for them")
    if len(comm_ops):  # what the collectives found lack (none found: nothing to say)
        notes.append("comm_ops: " + CANN_UNRECORDED)
    if len(links):
        notes.append("comm_matrix: src_local / dst_local are the HCCL ranks of the tasks "
                     "(local to their communication group, which the timeline does not "
                     "name); src_rank / dst_rank left NA")
    return comm_ops, bw, links, streams


# ----------------------------------------------------------------------------- parsing

def _pick_files(files: Sequence[Path]) -> tuple[list[Path], list[str]]:
    """The files to read: per exported iteration the ``msprof_`` file when there is one
    (it holds the others' events), else its ``task_time_`` / ``hccl_`` / ``step_trace_``."""
    by_suffix: dict[str, dict[str, Path]] = {}
    other: list[Path] = []
    for f in files:
        m = _KIND_RE.match(f.name)
        if m:
            by_suffix.setdefault(m.group(2), {})[m.group(1)] = f
        else:
            other.append(f)
    chosen: list[Path] = []
    for suffix in sorted(by_suffix):
        kinds = by_suffix[suffix]
        if "msprof" in kinds:
            chosen.append(kinds["msprof"])
        else:
            chosen.extend(kinds[k] for k in TIMELINE_KINDS if k in kinds)
    # step_trace files repeat every iteration: one of them is enough with msprof_ files
    marks = [by_suffix[s]["step_trace"] for s in sorted(by_suffix)
             if "step_trace" in by_suffix[s]]
    if marks and marks[0] not in chosen:
        chosen.append(marks[0])
    models = sorted({s.split("_")[1] for s in by_suffix if s.count("_") == 2})
    notes = [f"timeline of models {listed(models)}"] if len(models) > 1 else []
    return chosen + other, notes


def _origin(folder: Path, ts: np.ndarray) -> tuple[int | None, int, str | None]:
    """(origin_ns, shift_ns, note): ``ts + shift`` is on the epoch; origin is its minimum."""
    if not len(ts):
        return None, 0, None
    first = int(ts.min())
    if first / 1000.0 > _EPOCH_US:
        return first, 0, None
    device_dirs = [folder] if _DEVICE_RE.match(folder.name) else \
        sorted(d for d in folder.glob("device_*") if d.is_dir())
    for d in device_dirs:
        starts = [f for f in sorted(d.glob("start_info.*")) if not f.name.endswith(".done")]
        info = _small_json(starts[0]) if starts else {}
        try:
            begin_us = int(str(info["collectionTimeBegin"]).strip())
            mono_ns = int(str(info["clockMonotonicRaw"]).strip())
        except (KeyError, ValueError):
            continue
        shift = begin_us * 1000 - mono_ns
        return first + shift, shift, None
    return None, -first, ("no start_info with collectionTimeBegin / clockMonotonicRaw: times "
                          "are counted from the first event and ranks cannot be aligned")


def _device_folder(path: Path) -> Path:
    """The device (or PROF) folder a timeline file or folder belongs to."""
    p = path if path.is_dir() else path.parent
    if p.name in ("timeline", _OUTPUT_DIR):
        p = p.parent
    return p


def _device_info(folder: Path) -> tuple[dict[str, Any], int | None, int | None]:
    if _DEVICE_RE.match(folder.name):
        info = _info(folder)
        return info, _rank_of(info), int(_DEVICE_RE.match(folder.name).group(1))
    devs = sorted(d for d in folder.glob("device_*") if d.is_dir())
    if len(devs) == 1:
        return _device_info(devs[0])
    return {}, None, None


def _hardware(info: dict[str, Any], device: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if device is not None:
        out["device_id"] = device
    for d in info.get("DeviceInfo") or []:
        if isinstance(d, dict) and (device is None or d.get("id") == device):
            for key, name in (("ai_core_num", "ai_core_num"), ("aic_frequency", "aic_mhz"),
                              ("aiv_num", "aiv_num"), ("ai_cpu_core_num", "ai_cpu_cores"),
                              ("hwts_frequency", "hwts_mhz")):
                if key in d:
                    try:
                        out[name] = int(str(d[key]))
                    except ValueError:
                        out[name] = d[key]
            break
    for key in ("hostname", "hwtype", "version", "platform_version"):
        if key in info:
            out[key] = info[key]
    return out


def _framework(kernels: pd.DataFrame | None) -> str | None:
    """``"mindspore"`` when most compute tasks carry MindSpore scope names."""
    if kernels is None or not len(kernels):
        return None
    comp = kernels.loc[kernels["category"] == "compute", "name"].astype("string")
    if not len(comp):
        return None
    scoped = comp.str.match(r"^(?:recompute_)?(?:Default|Gradients)/").fillna(False)
    return "mindspore" if float(scoped.mean()) > 0.5 else None


#: ``platform_version`` of ``info.json`` -> the chip, as msprof's ChipManager reads it
#: (``CHIP_V2_1_0`` = "1", its "cloud" chip: the Ascend 910 of the Atlas 800 training
#: servers). Other values are not named here: the profile then names no device.
_PLATFORMS = {"1": "Ascend910"}


def _device_names(info: dict[str, Any]) -> list[str]:
    """The chip ``info.json`` names through its ``platform_version`` (see _PLATFORMS)."""
    name = _PLATFORMS.get(str(info.get("platform_version", "")).strip())
    return [name] if name else []


@with_notes
def parse(path: Path, files: Iterable[str | Path] = ()) -> tuple[ProfileMeta,
                                                                    dict[str, pd.DataFrame]]:
    """Read one device of raw CANN output into the canonical tables.

    Parameters
    ----------
    path : Path
        A ``device_{id}`` folder, a PROF folder (one-file layout) or one timeline file.
    files : iterable of path, optional
        The timeline files to read (default: those of ``path``).

    Returns
    -------
    (ProfileMeta, dict of DataFrame)

    Raises
    ------
    ProfileError
        No timeline to read (the message says how to export one), or a damaged file.
    """
    path = Path(path)
    given = [Path(f) for f in files] or (
        [path] if path.is_file() else _timeline_files(path / "timeline")
        or _timeline_files(path / _OUTPUT_DIR))
    timeline = [f for f in given if _KIND_RE.match(f.name) or f == path]
    if not timeline:
        raise ProfileError(path, f"no exported CANN timeline to read; {EXPORT_HINT}")
    chosen, notes = _pick_files(timeline)
    ev = _frame(chosen)
    folder = _device_folder(path)
    info, rank, device = _device_info(folder)
    notes.insert(0, "raw CANN output (PROF_ folder, exported timeline): "
                 f"{len(chosen)} of {counted(len(timeline), 'timeline file')} read")
    if path.is_file():
        notes.append(f"one CANN timeline file ({path.name}) read alone: the other files of "
                     "its PROF_ folder (other iterations, the step trace) are not in it")
    steps, windows = _steps(ev, notes)
    comm_ops, bw, links, comm_streams = _hccl(ev, windows, notes)
    kernels = _kernels(ev, windows, comm_streams)
    if kernels.empty:
        notes.append("kernels: no device task (process 'Ascend Hardware') in the timeline")
    ts = ev["ts_ns"].dropna().to_numpy(np.int64) if len(ev) else np.zeros(0, np.int64)
    origin, shift, why = _origin(folder, ts)
    if why:
        notes.append(why)
    base = (origin - shift) if origin is not None else (int(ts.min()) if len(ts) else 0)
    tables: dict[str, pd.DataFrame] = {}
    for name, frame, col in (("kernels", kernels, "start__ns"), ("comm_ops", comm_ops,
                                                                 "start__ns")):
        if len(frame):
            frame["start_us"] = (pd.to_numeric(frame.pop(col)).to_numpy(np.float64)
                                 - base) / 1000.0
            tables[name] = frame
    if len(steps):
        steps["step_start_us"] = (steps.pop("step_start_ns").to_numpy(np.float64)
                                  - base) / 1000.0
        tables["steps"] = steps
    if len(bw):
        tables["comm_bandwidth"] = bw
    if len(links):
        tables["comm_matrix"] = links
    if not tables:
        raise ProfileError(path, "the CANN timeline holds no device task, iteration or "
                           "communication event")
    if "kernels" in tables and tables["kernels"]["type"].notna().any():
        notes.append("kernels.type: from the task name (MindSpore scope name without -opN); "
                     "no shapes, dtypes or wait times in the timeline")
    notes.append("ops: the CANN timeline has no framework operators (its host events are "
                 "CANN API calls); memory: not exported in the timeline")
    if rank is None:
        notes.append("rank: info.json has no rank_id")
    files_of = {t: [str(f) for f in chosen] for t in tables}
    framework = _framework(tables.get("kernels"))
    if framework:
        notes.append("framework: mindspore (its scope names, Default/... and Gradients/..., "
                     "name the device tasks)")
    hw = _hardware(info, device)
    meta = ProfileMeta(
        source_format="cann_raw", framework=framework, rank=rank, world_size=None,
        device_type="npu", profiler_level=None, origin_ns=origin, path=str(path),
        notes=notes,
        extra={"device": hw, "devices": _device_names(info),
               "files": [f.name for f in chosen],
               "table_files": files_of})
    return meta, tables
