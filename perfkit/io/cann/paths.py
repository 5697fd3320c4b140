"""What a raw CANN ``PROF_*`` folder holds: its devices, their ranks and timeline files.

The one job of this module is finding, before anything is parsed: whether a folder is a
PROF folder or one of its ``device_{id}`` folders (:func:`is_prof_dir`,
:func:`is_device_dir`), which exported timeline files each device has
(:func:`sources_of`), the rank ``info.json.{id}`` gives (:func:`device_rank`), the
collection window of ``start_info`` / ``end_info`` (:func:`collection_window`) and whether
a JSON file's head is a CANN timeline (:func:`sniff_timeline`). The layouts are described
in :mod:`perfkit.io.cann.raw`, which parses what is found here and re-exports these names.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

__all__ = ["EXPORT_HINT", "TIMELINE_KINDS", "is_prof_dir", "is_device_dir", "sources_of",
           "sniff_timeline", "device_rank", "collection_window"]

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
