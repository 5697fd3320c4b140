"""Legacy MindSpore / MindInsight profiler output (MindSpore 1.x - 2.3): one flat ``profiler/``
folder whose files carry the rank as a suffix (``hccl_raw_{rank}.csv``, ...).

What maps to the canonical tables:

- ``steps``: ``ascend_cluster_analyse_{mode}_{stages}_{ranks}_{rank}.csv`` (per-step ms:
  computation, communication alone, stage, receive alone) and
  ``step_trace_raw_{rank}_detail_time.csv`` (10 ns counter ticks: iteration span, interval,
  fp+bp, tail - kept as extra ``*_us`` columns);
- ``comm_ops``: ``hccl_raw_{rank}.csv`` (per-op cost and wait in ms per step);
- ``kernels``: ``ascend_timeline_display_{rank}.json`` (Chrome trace, times relative to the
  start of profiling: the file has no epoch, so ``origin_ns`` stays None).

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

from ..errors import ProfileError, file_boundary
from ..profile import ProfileMeta
from ._common import read_csv, read_header, read_json, to_float, with_notes
from .chrome import read_chrome_trace
from .trace_tables import NA_NS

__all__ = ["parse"]

_TICK_US = 0.01  # step_trace_raw values are 10 ns system-counter ticks


def _files(folder: Path, rank: int) -> dict[str, Path]:
    pats = {
        "step_trace": f"step_trace_raw_{rank}_detail_time.csv",
        "hccl": f"hccl_raw_{rank}.csv",
        "timeline": f"ascend_timeline_display_{rank}.json",
        "info": f"profiler_info_{rank}.json",
    }
    found = {k: folder / v for k, v in pats.items() if (folder / v).is_file()}
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
    notes = ["legacy MindSpore/MindInsight output: communication bandwidth/matrix, ops and "
             "memory tables are not produced from these files"]
    tables: dict[str, pd.DataFrame] = {}
    extra: dict[str, Any] = {"files": sorted(p.name for p in folder.glob(f"*_{rank}*"))}
    table_files: dict[str, str] = {}
    steps = None
    if "step_trace" in files:
        with file_boundary(files["step_trace"], "a MindSpore step trace"):
            steps = _step_trace(files["step_trace"])
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
        with file_boundary(files["timeline"], "a MindSpore timeline"):
            tables["kernels"], trace_notes = _timeline(files["timeline"])
        table_files["kernels"] = str(files["timeline"])
        notes.append("kernels: from ascend_timeline_display (times relative to the start of "
                     "the timeline; no absolute epoch in legacy files, origin_ns is None)")
        notes.extend(f"{files['timeline'].name}: {n}" for n in trace_notes)
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


def _step_trace(path: Path) -> pd.DataFrame:
    table = read_csv(path, "step_trace_raw_{rank}_detail_time.csv (MindSpore step trace)",
                     required=[("step_num",), ("total",), ("iteration_interval",)],
                     text_cols=["step_num"])
    df = table.select([c for c in ("step_num", "total", "iteration_interval", "fp_and_bp",
                                   "tail") if c in table.column_names]).to_pandas()
    step = pd.to_numeric(df["step_num"], errors="coerce")
    keep = step.notna() & (step > 0)  # '-' is the average row; 0 a placeholder
    n = len(df)
    out = pd.DataFrame({"step": step[keep].to_numpy()})
    for col in ("total", "iteration_interval", "fp_and_bp", "tail"):
        if col in df:
            vals = pd.to_numeric(df[col], errors="coerce").to_numpy(np.float64)
            out[f"{col}_us"] = vals[keep.to_numpy()] * _TICK_US
    del n
    return out


def _cluster_analyse(path: Path, steps: pd.DataFrame | None,
                     notes: list[str]) -> pd.DataFrame:
    header = read_header(path, "ascend_cluster_analyse_*.csv (MindSpore per-step breakdown)")
    if "computation_time" not in header:
        notes.append(f"steps: {path.name} has no computation_time column (MindSpore 1.x "
                     "layout); computing/communication per step unknown")
        return steps if steps is not None else pd.DataFrame()
    table = read_csv(path, "ascend_cluster_analyse_*.csv (MindSpore per-step breakdown)",
                     required=[("computation_time",), ("communication_alone_time",)])
    n = table.num_rows
    h = table.column_names

    def ms(name: str) -> np.ndarray:
        if name not in h:
            return np.full(n, np.nan)
        return to_float(table.column(name), n, label=f"{path.name} {name}") * 1000.0

    frame = pd.DataFrame({
        "computing_us": ms("computation_time"),
        "comm_not_overlapped_us": ms("communication_alone_time"),
        "stage_us": ms("stage_time"),
        "bubble_us": ms("receive_alone_time"),
        "comm_not_overlapped_excl_receive_us": ms("collective_communication_alone_time"),
    })
    if steps is not None and len(steps) == n:
        return pd.concat([steps.reset_index(drop=True), frame], axis=1)
    frame.insert(0, "step", np.arange(1, n + 1, dtype=float))
    if steps is not None:
        notes.append(f"steps: {path.name} has {n} rows but the step trace {len(steps)} steps; "
                     "rows numbered 1..n and joined to the step trace by step number")
        frame = frame.merge(steps, on="step", how="left")
    return frame


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
                         "op_key": key, "elapse_us": _f(val[1]) * 1000.0,
                         "wait_us": _f(val[2]) * 1000.0})
    return pd.DataFrame(rows)


def _f(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return np.nan


_HOST_PIDS = {11000, 12000, 13000}


def _timeline(path: Path) -> tuple[pd.DataFrame, list[str]]:
    trace = read_chrome_trace(path, "ascend_timeline_display JSON (MindSpore timeline)",
                              ("op_type",))
    x = trace.x
    pid = pd.to_numeric(x["pid"], errors="coerce")
    tid = pd.to_numeric(x["tid"], errors="coerce")
    dev = x[~pid.isin(_HOST_PIDS) & ~tid.isin([100000, 100001])]
    ts = dev["ts_ns"].to_numpy()
    start = np.where(ts == NA_NS, np.nan, ts.astype(np.float64) / 1000.0)
    name = dev["name"].astype("string")
    comm = (pd.to_numeric(dev["pid"], errors="coerce") == 10000).to_numpy() | name.str.contains(
        r"AllReduce|AllGather|ReduceScatter|Broadcast|Send|Receive|AllToAll",
        regex=True).fillna(False).to_numpy()
    aicpu = (pd.to_numeric(dev["pid"], errors="coerce") == 9000).to_numpy()
    return pd.DataFrame({
        "name": name.to_numpy(), "type": dev["op_type"].to_numpy(),
        "category": np.where(comm, "communication", "compute"),
        "core": np.where(aicpu, "AI_CPU", np.where(comm, "HCCL", "AI_CORE")),
        "stream": pd.to_numeric(dev["tid"], errors="coerce").to_numpy(),
        "start_us": start, "dur_us": dev["dur_us"].to_numpy(),
    }), trace.notes
