"""Legacy MindSpore / MindInsight profiler output (MindSpore 1.x - 2.3): one flat ``profiler/``
folder whose files carry the rank as a suffix (``hccl_raw_{rank}.csv``, ...).

What maps to the canonical tables:

- ``steps``: ``ascend_cluster_analyse_{mode}_{stages}_{ranks}_{rank}.csv`` (per-step ms:
  computation, communication alone, stage, receive alone; its ``computation_time`` is
  MindSpore's step less the communication alone, idle time included, so it is
  ``computing_or_free_us`` and ``computing_us`` / ``free_us`` stay unknown) and
  ``step_trace_raw_{rank}_detail_time.csv`` (10 ns counter ticks: iteration span, interval,
  fp+bp, tail - kept as extra ``*_us`` columns);
- ``comm_ops``: ``hccl_raw_{rank}.csv`` (per op and step, in ms, ``[step, cost, wait,
  links]``: MindInsight's ``HcclParser`` sums the link tasks' transfer time into the cost
  and the notify waits outside them into the wait, two parts apart, so ``transit_us`` is the
  cost, ``wait_us`` the wait and ``elapse_us`` their sum);
- ``kernels``: ``ascend_timeline_display_{rank}.json`` (Chrome trace, times relative to the
  start of profiling: the file has no epoch, so ``origin_ns`` stays None). Its pid 10000
  holds the step trace's all-reduce phases (``stream_{id}_parallel_{n}``: from an
  all-reduce's start mark to its end mark on a stream, in every step; MindInsight's
  ``TimelineAnalyser.add_all_reduce_info``): communication of type ``AllReduce``. The
  device operators may stop long before the step trace does: ``steps.tasks_recorded``
  says which steps' device tasks were recorded in full (:func:`_align_steps`).

The other files (``aicore_intermediate``, ``minddata_pipeline_raw``, queue profiling,
``flops``) are listed in ``meta.extra['files']``; they hold aggregates, not events.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...errors import ProfileError, file_boundary
from ...profile import ProfileMeta
from .._common import read_csv, read_json, with_notes
from ..canonical.comm_words import LEGACY_UNRECORDED
from ..chrome.decode import read_chrome_trace
from ..chrome.tables import NA_NS
from .legacy_steps import REDUCE_FIELD, _align_steps, _cluster_analyse, _step_trace

__all__ = ["parse"]

def _files(folder: Path, rank: int) -> dict[str, Path]:
    pats = {
        "step_trace": f"step_trace_raw_{rank}_detail_time.csv",
        "hccl": f"hccl_raw_{rank}.csv",
        "timeline": f"ascend_timeline_display_{rank}.json",
        "info": f"profiler_info_{rank}.json",
    }
    found = {k: folder / v for k, v in pats.items() if (folder / v).is_file()}
    if "timeline" not in found and (folder / f"timeline_display_{rank}.json").is_file():
        # MindSpore 1.x / MindInsight wrote the same timeline without the ascend_ prefix
        found["timeline"] = folder / f"timeline_display_{rank}.json"
    for f in sorted(folder.glob(f"ascend_cluster_analyse_*_{rank}.csv")):
        found["cluster_analyse"] = f
    return found


_CLUSTER_ANALYSE = re.compile(r"^ascend_cluster_analyse_(.+)_(\d+)_(\d+)_(\d+)\.csv$")


def _parallel_info(info: dict[str, Any], files: list[str], rank: int) -> dict[str, Any]:
    """The parallel strategy MindSpore recorded: ``parallel_mode``, ``stage_num`` (pipeline
    stages) and ``rank_size``, from ``profiler_info_{rank}.json`` or the name of
    ``ascend_cluster_analyse_{parallel_mode}_{stage_num}_{rank_size}_{rank}.csv``."""
    out: dict[str, Any] = {}
    stages = info.get("stage_num", info.get("pipeline_stage_num"))
    if info.get("parallel_mode") is not None:
        out["parallel_mode"] = str(info["parallel_mode"])
    if str(stages).isdigit():
        out["stage_num"] = int(stages)
    if str(info.get("rank_size")).isdigit():
        out["rank_size"] = int(info["rank_size"])
    if out:
        out["source"] = f"profiler_info_{rank}.json"
        return out
    for name in files:
        m = _CLUSTER_ANALYSE.match(name)
        if m and int(m.group(4)) == rank:
            return {"parallel_mode": m.group(1), "stage_num": int(m.group(2)),
                    "rank_size": int(m.group(3)), "source": name}
    return out


@with_notes
def parse(folder: Path, rank: int | None) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """Read the files of one rank from a legacy MindSpore profiler folder.

    Each file is its own exception boundary: a failure names the file.
    """
    if rank is None:
        raise ProfileError(folder, "rank unknown; expected files named *_{rank}.csv/json")
    files = _files(folder, rank)
    notes = ["legacy MindSpore/MindInsight output: communication bandwidth/matrix and "
             "memory tables are not produced from these files"]
    tables: dict[str, pd.DataFrame] = {}
    extra: dict[str, Any] = {"files": sorted(p.name for p in folder.glob(f"*_{rank}*"))}
    table_files: dict[str, str] = {}
    steps = None
    if "step_trace" in files:
        with file_boundary(files["step_trace"], "a MindSpore step trace"):
            steps = _step_trace(files["step_trace"], notes)
        table_files["steps"] = str(files["step_trace"])
    if "cluster_analyse" in files:
        with file_boundary(files["cluster_analyse"], "a MindSpore per-step breakdown"):
            steps = _cluster_analyse(files["cluster_analyse"], steps, notes)
        table_files.setdefault("steps", str(files["cluster_analyse"]))
    if steps is not None:
        tables["steps"] = steps
    else:
        notes.append("steps: no step_trace_raw / ascend_cluster_analyse file for this rank")
    if "hccl" in files:
        with file_boundary(files["hccl"], "a MindSpore HCCL summary"):
            tables["comm_ops"] = _hccl(files["hccl"])
        table_files["comm_ops"] = str(files["hccl"])
    else:
        notes.append("comm_ops: no hccl_raw file for this rank")
    if "timeline" in files:
        tl = files["timeline"]
        with file_boundary(tl, "a MindSpore timeline"):
            timeline, trace_notes = _timeline(tl)
        for name, frame in timeline.items():
            if name == "comm_ops" and "comm_ops" in tables:
                continue  # hccl_raw has the per-op cost and wait
            if len(frame) or name == "kernels":
                tables[name] = frame
                table_files[name] = str(tl)
        notes.append(f"kernels: from {tl.name}, with times counted from the start of that "
                     "timeline (legacy MindSpore files record no date or clock time)")
        if "comm_ops" in timeline and table_files.get("comm_ops") == str(tl):
            notes[:] = [n for n in notes if not n.startswith("comm_ops: no hccl_raw")]
            phases = timeline["comm_ops"]["name"].astype(TEXT).str.match(
                REDUCE_FIELD).fillna(False)
            what = ("the step trace's all-reduce phases (pid 10000, stream_{id}_parallel_{n}:"
                    " from an all-reduce's start mark to its end mark on a stream, waits "
                    "included; one per stream and step)" if bool(phases.all()) else
                    "the communication operators")
            notes.append(f"comm_ops: {what} of {tl.name} "
                         f"({LEGACY_UNRECORDED.format(rank=rank)})")
        notes.extend(f"{tl.name}: {n}" for n in trace_notes)
    elif tables:  # a rank with its step files but not its timeline
        notes.append(f"kernels: no ascend_timeline_display_{rank}.json (nor "
                     f"timeline_display_{rank}.json) for this rank: its device tasks, host "
                     "operators and the step trace's all-reduce phases are not read")
        if "comm_ops" not in tables:  # neither file that holds it: not "not recorded"
            notes[:] = [n for n in notes if not n.startswith("comm_ops: no hccl_raw")]
            notes.append(f"comm_ops: neither hccl_raw_{rank}.csv nor the timeline is in the "
                         "folder, so the communication was not read (it may have been "
                         "recorded: copy the files back)")
    _align_steps(folder, rank, tables, notes)
    info: dict[str, Any] = {}
    if "info" in files:
        data = read_json(files["info"], "profiler_info JSON (legacy MindSpore)")
        info = data if isinstance(data, dict) else {}
    extra["table_files"] = table_files
    world = info.get("rank_size")
    if not tables:
        if not extra["files"]:
            raise ProfileError(folder, f"no file for rank {rank}; expected "
                               f"step_trace_raw_{rank}_detail_time.csv, hccl_raw_{rank}.csv or "
                               f"ascend_timeline_display_{rank}.json")
        notes.append("only aggregate files for this rank (" + ", ".join(extra["files"]) +
                     "): per-op averages, data-pipeline queues and FLOPs summaries have no "
                     "canonical table; they are listed in meta.extra['files']")
    extra["profiler_info"] = info
    parallel = _parallel_info(info, extra["files"], rank)
    if parallel:
        extra["parallel"] = parallel
        if world is None:
            world = parallel.get("rank_size")
    meta = ProfileMeta(source_format="mindspore_legacy", framework="mindspore", rank=rank,
                       world_size=int(world) if isinstance(world, (int, str)) and
                       not isinstance(world, bool) and str(world).isdigit() and
                       len(str(world)) < 10 else None, device_type="npu",
                       origin_ns=None, path=str(folder), notes=notes, extra=extra)
    return meta, tables


_OP_RE = re.compile(r"^(?:stream_\d+_\d+_)?(.*)$")


def _hccl(path: Path) -> pd.DataFrame:
    table = read_csv(path, "hccl_raw_{rank}.csv (MindSpore HCCL summary)",
                     required=[("step_num",), ("communication_operator_cost",)],
                     text_cols=["step_num", "communication_operator_cost", "link_info"])
    steps = table.column("step_num").to_pylist()
    costs = table.column("communication_operator_cost").to_pylist()
    rows: list[dict[str, Any]] = []
    for line, (step, cost) in enumerate(zip(steps, costs, strict=True), start=2):
        if step is None or not str(step).strip().isdigit() or not cost:
            continue
        try:
            ops = msgspec.json.decode(cost)
        except msgspec.DecodeError:
            ops = None
        if not isinstance(ops, dict):
            raise ProfileError(path, "expected a JSON object {op: [step, cost, wait, links]}",
                               line=line, field="communication_operator_cost")
        for key, val in ops.items():
            if not isinstance(val, list) or len(val) < 3:
                continue
            rows.append({"step": int(step), "name": _OP_RE.match(key).group(1),
                         "op_key": key, "elapse_us": (_f(val[1]) + _f(val[2])) * 1000.0,
                         "transit_us": _f(val[1]) * 1000.0, "wait_us": _f(val[2]) * 1000.0})
    return pd.DataFrame(rows)


def _f(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return np.nan


_HOST_PIDS = {11000, 12000, 13000}
_AICPU_PID, _COMM_PID, _HOST_OP_PID = 9000, 10000, 11000
_STEP_TIDS = (100000, 100001)
_COMM_NAME = r"AllReduce|AllGather|ReduceScatter|Broadcast|Send|Receive|AllToAll"


def _timeline(path: Path) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """kernels, comm_ops and ops of a legacy timeline (``[ascend_]timeline_display``).

    MindSpore 1.x / 2.0 layout: the device's operators under the pid of the device
    (thread = stream; ``args.fullname`` the scope name, ``args.type`` the operator type),
    AI CPU operators under pid 9000, communication under pid 10000 (one thread per
    stream: MindInsight writes there the step trace's all-reduce phases,
    ``stream_{id}_parallel_{n}``, typed ``AllReduce`` here), host CPU operators under pid
    11000, overlap tracks (12000) and activities (13000) left out, as are the step and
    scope threads (tid 100000, 100001).
    """
    trace = read_chrome_trace(path, "ascend_timeline_display JSON (MindSpore timeline)",
                              ("op_type", "fullname"))
    x = trace.x
    pid = pd.to_numeric(x["pid"], errors="coerce")
    tid = pd.to_numeric(x["tid"], errors="coerce")
    names = x["name"].astype(TEXT)
    full = x["fullname"].astype(TEXT) if "fullname" in x else names
    name = full.where(full.notna() & (full.str.len() > 0), names)
    device = ~pid.isin(_HOST_PIDS) & ~tid.isin(_STEP_TIDS)
    on_comm = (pid == _COMM_PID).fillna(False)
    comm = on_comm | names.str.contains(_COMM_NAME, regex=True).fillna(False)
    aicpu = (pid == _AICPU_PID).fillna(False)
    ts = x["ts_ns"].to_numpy()
    start = np.where(ts == NA_NS, np.nan, ts.astype(np.float64) / 1000.0)
    sel = device.to_numpy(bool)
    typ = x["op_type"].astype(TEXT) if "op_type" in x else \
        pd.Series(pd.NA, index=x.index, dtype=TEXT)
    reduce = on_comm & names.str.match(REDUCE_FIELD).fillna(False)
    typ = typ.mask(reduce.to_numpy(bool), "AllReduce")
    kernels = pd.DataFrame({
        "name": name[sel].to_numpy(), "type": typ[sel].to_numpy(),
        "category": np.where(comm[sel], "communication", "compute"),
        "core": np.where(aicpu[sel], "AI_CPU", np.where(comm[sel], "HCCL", "AI_CORE")),
        "stream": tid[sel].to_numpy(),
        "start_us": start[sel], "dur_us": x["dur_us"].to_numpy()[sel],
    })
    c = on_comm.to_numpy(bool)
    comm_ops = pd.DataFrame({
        "name": names[c].to_numpy(), "start_us": start[c],
        "elapse_us": x["dur_us"].to_numpy()[c], "stream": tid[c].to_numpy(),
    })
    h = (pid == _HOST_OP_PID).fillna(False).to_numpy(bool)
    ops = pd.DataFrame({"name": name[h].to_numpy(), "start_us": start[h],
                        "dur_us": x["dur_us"].to_numpy()[h], "thread": tid[h].to_numpy()})
    return {"kernels": kernels, "comm_ops": comm_ops, "ops": ops}, trace.notes
