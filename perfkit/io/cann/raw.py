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

This module's one job is assembling a device: which files to read, the clock's origin and
the device's facts; finding the files is :mod:`perfkit.io.cann.paths`, decoding their
events :mod:`perfkit.io.cann.events`, and the tables :mod:`perfkit.io.cann.tables`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...errors import ProfileError
from ...format import counted, listed
from ...profile import ProfileMeta
from .._common import with_notes

# the files found, the events decoded and the tables made: modules of their own, every
# name still importable from here
from .events import _frame
from .paths import (
    _DEVICE_RE,
    _KIND_RE,
    _OUTPUT_DIR,
    EXPORT_HINT,
    TIMELINE_KINDS,
    _info,
    _rank_of,
    _small_json,
    _timeline_files,
    collection_window,
    device_rank,
    is_device_dir,
    is_prof_dir,
    sniff_timeline,
    sources_of,
)
from .tables import (
    _hccl,
    _kernels,
    _mark_recorded,
    _steps,
)

__all__ = ["EXPORT_HINT", "TIMELINE_KINDS", "is_prof_dir", "is_device_dir", "sources_of",
           "sniff_timeline", "parse", "device_rank", "collection_window"]

_EPOCH_US = 1e14  # timestamps above this (1973 in µs) are on the epoch already


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
    comp = kernels.loc[kernels["category"] == "compute", "name"].astype(TEXT)
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
    skipped = len(timeline) - len(chosen)
    notes.insert(0, "raw CANN output (PROF_ folder, exported timeline): "
                 f"{len(chosen)} of {counted(len(timeline), 'timeline file')} read"
                 + (f"; the other {skipped} hold the same events (an iteration's msprof_ "
                    "file holds its task_time_, hccl_ and step_trace_ events; one "
                    "step_trace_ file gives every iteration's marks)" if skipped else ""))
    if path.is_file():
        notes.append(f"one CANN timeline file ({path.name}) read alone: the other files of "
                     "its PROF_ folder (other iterations, the step trace) are not in it")
    steps, windows = _steps(ev, notes)
    comm_ops, bw, links, comm_streams = _hccl(ev, windows, notes)
    kernels = _kernels(ev, windows, comm_streams, notes)
    _mark_recorded(steps, kernels, notes)
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
