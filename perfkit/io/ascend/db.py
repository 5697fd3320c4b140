"""Ascend DB export (``export_type=db``): ``ascend_{pytorch,mindspore}_profiler[_{rank}].db``
and ``analysis.db`` (SQLite), read into the same tables as the text export.

Opened read-only (``mode=ro`` URI), so nothing is written next to the files. Times in the
DB are int64 nanoseconds; strings are interned in ``STRING_IDS``. Sources: ``kernels``
TASK + COMPUTE_TASK_INFO (+ COMMUNICATION_OP as HCCL rows, their element count and data
type as input shape and dtype); ``ops`` PYTORCH_API (type op);
``memory`` MEMORY_RECORD + NPU_MODULE_MEM; ``op_memory`` OP_MEMORY; ``steps`` /
``comm_ops`` / ``comm_bandwidth`` / ``comm_matrix`` analysis.db (StepTraceTime,
CommAnalyzerTime, CommAnalyzerBandwidth, CommAnalyzerMatrix). A step whose tasks cover
less than half its busy time in StepTraceTime is marked ``steps.tasks_recorded`` False, as
in the text export (:mod:`perfkit.io.ascend.recorded`).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...errors import ProfileError
from ...format import counted
from ...profile import ProfileMeta
from .._common import note, read_json, with_notes
from ..canonical.categories import category, is_total_op
from ..canonical.validate import plausible_origin
from ..chrome.tables import step_index
from . import rank as ascend_rank
from .db_file import database, query, required_columns, select, table_names, whole_ns
from .recorded import mark_recorded

__all__ = ["rank_dir_of", "rank_of", "parse"]

_DB_RE = re.compile(r"^ascend_(pytorch|mindspore)_profiler(?:_(\d+))?\.db$")


def rank_dir_of(path: Path) -> Path:
    """The rank folder holding a DB file (``.../rank_dir/ASCEND_PROFILER_OUTPUT/x.db``)."""
    parent = path.parent
    return parent.parent if parent.name == ascend_rank.OUTPUT_DIR else parent


def rank_of(path: Path, rank_dir: Path) -> int | None:
    """Rank from the DB file name, else the rank folder's profiler_info, else None."""
    m = _DB_RE.match(path.name)
    if m and m.group(2) is not None:
        return int(m.group(2))
    rid = ascend_rank.read_rank_id(rank_dir) if rank_dir.is_dir() else None
    return rid


@with_notes
def parse(path: Path) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """Read one rank of the DB export (the profiler DB and/or ``analysis.db``).

    Parameters
    ----------
    path : Path
        ``ascend_*_profiler[_{rank}].db`` or ``analysis.db``; its sibling is used too.
    """
    folder = path.parent
    rank_dir = rank_dir_of(path)
    prof_db = path if _DB_RE.match(path.name) else next(
        (f for f in sorted(folder.glob("ascend_*_profiler*.db")) if _DB_RE.match(f.name)), None)
    analysis = folder / "analysis.db" if (folder / "analysis.db").exists() else None
    notes: list[str] = []
    tables: dict[str, pd.DataFrame] = {}
    origin: int | None = None
    groups: dict[str, Any] = {}
    rank = rank_of(prof_db or path, rank_dir)
    framework = None
    files: dict[str, str] = {}
    devices: list[str] = []
    if prof_db is not None:
        framework = "mindspore" if "mindspore" in prof_db.name else "pytorch"
        with database(prof_db, notes) as con:
            origin, groups, rank_db = _read_profiler_db(con, prof_db, tables, notes)
            devices = _npu_names(con)
        files.update({t: str(prof_db) for t in tables})
        if rank is None:
            rank = rank_db
    else:
        notes.append("only analysis.db found: kernels, ops and memory need "
                     "ascend_*_profiler_{rank}.db")
    if analysis is not None:
        with database(analysis, notes) as con:
            _read_analysis_db(con, analysis, tables, origin, notes)
        files.update({t: str(analysis) for t in tables if t not in files})
    else:
        notes.append("analysis.db not found: steps and communication tables unavailable")
    if "steps" in tables and prof_db is not None:
        # a TASK table cut short holds a fragment of each step: the text export's rule
        mark_recorded(tables["steps"], tables.get("kernels"), notes,
                      file=f"{prof_db.name} (TASK table)",
                      step_file="analysis.db (StepTraceTime table)")
    if not tables:
        raise ProfileError(path, "no table perfkit knows in this database; expected TASK, "
                           "COMPUTE_TASK_INFO or StepTraceTime")
    info: dict[str, Any] = {}
    infos = sorted(rank_dir.glob("profiler_info*.json"))
    if infos:
        data = read_json(infos[0], "profiler_info JSON")
        info = data if isinstance(data, dict) else {}
    level = ascend_rank._level(info)
    ranks = {r for g in groups.values() for r in g.get("global_ranks", [])}
    meta = ProfileMeta(
        source_format="ascend_db", framework=framework, rank=rank,
        world_size=max(ranks) + 1 if ranks else None, device_type="npu",
        profiler_level=level, groups=groups, origin_ns=origin, path=str(path),
        notes=notes, extra={"profiler_info": info, "table_files": files, "devices": devices,
                            **ascend_rank.WORLD_FROM_GROUPS})
    return meta, tables


def _npu_names(con: sqlite3.Connection) -> list[str]:
    """The chip names the export's ``NPU_INFO`` table records (``id, name``), distinct.

    ``"Ascend910B"`` in the torch_npu exports we have; the hardware reading
    (:func:`perfkit.analysis.efficiency.hardware.read_device`) turns it into a preset. An
    export without the table, or with another layout, names no device.
    """
    if "NPU_INFO" not in table_names(con):
        return []
    try:
        rows = con.execute("select name from NPU_INFO").fetchall()
    except sqlite3.Error:  # another layout: the device is then read from the tasks
        return []
    return list(dict.fromkeys(str(r[0]).strip() for r in rows
                              if r[0] is not None and str(r[0]).strip()))


def _strings(con: sqlite3.Connection) -> pd.Series:
    s = pd.read_sql_query("select id, value from STRING_IDS", con)
    return pd.Series(s["value"].to_numpy(), index=s["id"].to_numpy())


def _map(ids: pd.Series, strings: pd.Series, label: str | None = None) -> pd.Series:
    """The strings of interned ids; an id not in ``STRING_IDS`` is NA, counted in a note
    under ``label`` (``"COMPUTE_TASK_INFO.name"``)."""
    out = pd.Series(strings.reindex(ids.to_numpy()).to_numpy(), index=ids.index,
                    dtype=TEXT)
    if label is not None:
        lost = int((out.isna() & ids.notna()).sum())
        if lost:
            note(f"{label}: {lost} of {counted(len(ids), 'id')} not in STRING_IDS (the string "
                 "table is incomplete): read as NA")
    return out


def _pmu_ratios(con: sqlite3.Connection, path: Path, strings: pd.Series) -> pd.DataFrame | None:
    """The PMU pipe ratios of each task (``TASK_PMU_INFO``: one row per task and metric,
    the metric's name interned in ``STRING_IDS``), one column per ``*_ratio`` metric
    (``aic_mac_ratio``, ``aic_mte2_ratio``, ...: the names kernel_details.csv gives the
    same counters), indexed by ``globalTaskId``; None when the table holds no ratio.

    The export writes this table when the run recorded ``aic_metrics``; which metrics it
    holds follows the setting (PipeUtilization: the pipes' ratios). The ``*_time`` metrics
    are left out: the table does not state their unit. Only the ratios' rows are read
    (their name ids picked from ``STRING_IDS`` first), and they are laid out by position,
    not by ``pivot_table``: a table of one row per task and metric is tens of millions of
    rows on a long run (300,000 tasks × 14 ratios: 0.8 s, where ``pivot_table`` took
    2.0 s, measured once on a 2-core VM), and a task given a metric twice keeps its first
    value (the table's order)."""
    ratio_ids = [int(i) for i, name in strings.items() if str(name).endswith("_ratio")]
    if not ratio_ids:
        return None
    try:
        pmu = query(con, path, "select globalTaskId, name, value from TASK_PMU_INFO "
                                f"where name in ({', '.join(map(str, ratio_ids))}) "
                                "order by rowid")
    except ProfileError as exc:  # extra counters: the kernels stand without them
        note(f"{path.name}: TASK_PMU_INFO could not be read ({exc.problem}); the kernels "
             "have no PMU ratios")
        return None
    if pmu.empty:
        return None
    tasks, task_ids = pd.factorize(pmu["globalTaskId"])
    metrics, metric_ids = pd.factorize(pmu["name"])
    values = pd.to_numeric(pmu["value"], errors="coerce").to_numpy(np.float64)
    wide = np.full((len(task_ids), len(metric_ids)), np.nan)
    first = ~pd.Series(tasks * len(metric_ids) + metrics).duplicated().to_numpy()
    wide[tasks[first], metrics[first]] = values[first]  # a repeated cell: the table's first
    names = [str(strings.get(i, i)) for i in metric_ids]
    return pd.DataFrame(wide, index=pd.Index(task_ids, name="globalTaskId"), columns=names)


def _read_profiler_db(con: sqlite3.Connection, path: Path, tables: dict[str, pd.DataFrame],
                      notes: list[str]) -> tuple[int | None, dict[str, Any], int | None]:
    have = table_names(con)
    if "TASK" not in have and "PYTORCH_API" not in have and "MEMORY_RECORD" not in have:
        raise ProfileError(path, "expected tables TASK / PYTORCH_API / MEMORY_RECORD of the "
                           f"Ascend DB export; found {sorted(have)[:10]}")
    if "STRING_IDS" not in have:
        raise ProfileError(path, "has no STRING_IDS table, the string table every Ascend DB "
                           "export writes: kernel, operator and memory names cannot be read "
                           "(the export is incomplete or damaged; export the profile again)")
    strings = _strings(con)
    starts: list[Any] = []
    kern = None
    if "TASK" in have and "COMPUTE_TASK_INFO" in have:
        required_columns(con, path, "TASK", ["startNs", "endNs", "globalTaskId"])
        required_columns(con, path, "COMPUTE_TASK_INFO", ["globalTaskId", "name"])
        t_cols = select(con, "TASK", "t", ["startNs", "endNs", "streamId", "taskId",
                                             "modelId", "connectionId", "globalTaskId"])
        c_cols = select(con, "COMPUTE_TASK_INFO", "c", [
            "name", "opType", "taskType", "blockDim", "mixBlockDim", "inputShapes",
            "inputDataTypes", "outputShapes", "waitNs"])
        kern = query(con, path, (
            f"select {t_cols}, {c_cols} from TASK t join COMPUTE_TASK_INFO c "
            "on c.globalTaskId = t.globalTaskId"))
        kern = whole_ns(kern, ["startNs", "endNs"], f"{path.name} TASK")
        for col in ("name", "opType", "taskType", "inputShapes", "inputDataTypes",
                    "outputShapes"):
            kern[col] = _map(kern[col], strings, f"{path.name} COMPUTE_TASK_INFO.{col}")
        for col in ("inputShapes", "outputShapes"):
            kern[col] = kern[col].str.strip('"')
        pmu = _pmu_ratios(con, path, strings) if "TASK_PMU_INFO" in have else None
        if pmu is not None:
            kern = kern.join(pmu, on="globalTaskId")
        if "COMMUNICATION_OP" in have:
            cols = select(con, "COMMUNICATION_OP", "o", ["opName", "startNs", "endNs",
                                                          "connectionId", "opType", "waitNs",
                                                          "dataType", "count"])
            comm = query(con, path, f"select {cols} from COMMUNICATION_OP o")
            # the collective's input: ``count`` elements of ``dataType`` (an id into
            # ENUM_HCCL_DATA_TYPE: FP32, BFP16, ...), kept as the row's input shape and dtype
            hccl_types = dict(con.execute("select id, name from ENUM_HCCL_DATA_TYPE")
                              .fetchall()) if "ENUM_HCCL_DATA_TYPE" in have else {}
            counts = pd.to_numeric(comm["count"], errors="coerce")
            comm = pd.DataFrame({"startNs": comm["startNs"], "endNs": comm["endNs"],
                                 "connectionId": comm["connectionId"],
                                 "name": _map(comm["opName"], strings,
                                              f"{path.name} COMMUNICATION_OP.opName"),
                                 "opType": _map(comm["opType"], strings,
                                                f"{path.name} COMMUNICATION_OP.opType"),
                                 "taskType": pd.Series(["HCCL"] * len(comm), dtype=TEXT),
                                 "inputShapes": pd.Series(
                                     [str(int(c)) if c == c and c > 0 else pd.NA
                                      for c in counts], dtype=TEXT),
                                 "inputDataTypes": comm["dataType"].map(hccl_types).astype(
                                     TEXT).replace({"N/A": pd.NA, "INVALID_TYPE": pd.NA}),
                                 "waitNs": comm["waitNs"]})
            kern = pd.concat([kern, comm], ignore_index=True)
        starts.append(kern["startNs"])
    else:
        notes.append("kernels: TASK/COMPUTE_TASK_INFO tables missing")
    ops = None
    if "PYTORCH_API" in have:
        required_columns(con, path, "PYTORCH_API", ["startNs", "endNs", "name", "type"])
        ops = query(con, path, "select startNs, endNs, globalTid, connectionId, name, type "
                    "from PYTORCH_API")
        ops = whole_ns(ops, ["startNs", "endNs"], f"{path.name} PYTORCH_API")
        enum = {}
        if "ENUM_API_TYPE" in have:
            enum = dict(con.execute("select id, name from ENUM_API_TYPE").fetchall())
        op_ids = [k for k, v in enum.items() if v == "op"]
        if op_ids:
            ops = ops[ops["type"].isin(op_ids)].reset_index(drop=True)
        ops["startNs"] = pd.to_numeric(ops["startNs"]).astype("int64")
        ops["endNs"] = pd.to_numeric(ops["endNs"]).astype("int64")
        ops["name"] = _map(ops["name"], strings, f"{path.name} PYTORCH_API.name")
        ops = ops[~ops["name"].fillna("").str.startswith("ProfilerStep#")].reset_index(drop=True)
        starts.append(ops["startNs"])
    mem_parts = []
    if "MEMORY_RECORD" in have:
        m = query(con, path, "select component, timestamp, totalAllocated, totalReserved, "
                   "totalActive from MEMORY_RECORD")
        mem_parts.append(pd.DataFrame({
            "component": _map(m["component"], strings, f"{path.name} MEMORY_RECORD.component"),
            "ts_ns": m["timestamp"],
            "allocated_bytes": m["totalAllocated"].astype(float),
            "reserved_bytes": m["totalReserved"].astype(float),
            "active_bytes": m["totalActive"].astype(float), "source": "memory_record"}))
    if "NPU_MODULE_MEM" in have:
        m = query(con, path, "select moduleId, timestampNs, totalReserved from NPU_MODULE_MEM")
        enum = dict(con.execute("select id, name from ENUM_MODULE").fetchall()) \
            if "ENUM_MODULE" in have else {}
        res = m["totalReserved"].astype(float)
        mem_parts.append(pd.DataFrame({
            "component": pd.Series([enum.get(i, str(i)) for i in m["moduleId"]], dtype=TEXT),
            "ts_ns": m["timestampNs"], "reserved_bytes": res.where(res >= 0),
            "source": "npu_module_mem"}))
    starts.extend(part["ts_ns"] for part in mem_parts)
    opm = None
    if "OP_MEMORY" in have:
        opm = query(con, path, "select name, size, allocationTime, releaseTime, duration "
                     "from OP_MEMORY")
        opm["name"] = _map(opm["name"], strings, f"{path.name} OP_MEMORY.name")
        starts.append(opm["allocationTime"])
    origin = plausible_origin(*starts)
    spans = pd.DataFrame(columns=["step", "start_ns", "end_ns"])
    if "STEP_TIME" in have:
        st = query(con, path, "select id, startNs, endNs from STEP_TIME order by startNs")
        spans = pd.DataFrame({"step": st["id"].astype("int64"), "start_ns": st["startNs"],
                              "end_ns": st["endNs"]})
    elif kern is not None and len(kern):  # the profiler writes it with the tasks
        notes.append(f"{path.name} has no STEP_TIME table: the device tasks and operators "
                     "have no step (their figures per step, and the steps' split from them, "
                     "cannot be made)")

    def us(ns: pd.Series) -> np.ndarray:
        v = pd.to_numeric(ns, errors="coerce")
        return ((v - origin) / 1000.0).to_numpy(np.float64) if origin is not None else \
            np.full(len(v), np.nan)

    if kern is not None:
        tables["kernels"] = pd.DataFrame({
            "step": step_index(kern["startNs"].to_numpy(np.int64), spans),
            "name": kern["name"], "type": kern["opType"], "core": kern["taskType"],
            "category": category(kern["taskType"], kern["opType"], kern["name"]),
            "stream": kern.get("streamId"), "start_us": us(kern["startNs"]),
            "dur_us": (kern["endNs"] - kern["startNs"]).to_numpy(np.float64) / 1000.0,
            "wait_us": pd.to_numeric(kern["waitNs"], errors="coerce").to_numpy(np.float64)
            / 1000.0,
            "input_shapes": kern.get("inputShapes"), "input_dtypes": kern.get("inputDataTypes"),
            "output_shapes": kern.get("outputShapes"), "task_id": kern.get("taskId"),
            "block_dim": kern.get("blockDim"), "mix_block_dim": kern.get("mixBlockDim"),
            **{c: kern[c].to_numpy(np.float64, na_value=np.nan)
               for c in kern.columns if c.endswith("_ratio")},
        })
    if ops is not None:
        device = np.full(len(ops), np.nan)
        if kern is not None and "CONNECTION_IDS" in have:
            conn = query(con, path, "select id, connectionId from CONNECTION_IDS")
            k = pd.DataFrame({"connectionId": kern["connectionId"],
                              "dur": (kern["endNs"] - kern["startNs"]) / 1000.0})
            link = conn.merge(k, on="connectionId").groupby("id")["dur"].sum()
            device = link.reindex(ops["connectionId"].to_numpy()).to_numpy(np.float64)
            device = np.where(np.isnan(device), 0.0, device)
        tables["ops"] = pd.DataFrame({
            "step": step_index(ops["startNs"].to_numpy(np.int64), spans),
            "name": ops["name"], "start_us": us(ops["startNs"]),
            "dur_us": (ops["endNs"] - ops["startNs"]).to_numpy(np.float64) / 1000.0,
            "thread": (ops["globalTid"].astype("int64") % (1 << 32)).to_numpy(),
            "device_dur_us": device})
    if mem_parts:
        mem = pd.concat(mem_parts, ignore_index=True)
        mem["ts_us"] = us(mem.pop("ts_ns"))
        tables["memory"] = mem
    if opm is not None:
        tables["op_memory"] = pd.DataFrame({
            "name": opm["name"], "size_bytes": opm["size"].astype(float),
            "alloc_us": us(opm["allocationTime"]), "release_us": us(opm["releaseTime"]),
            "duration_us": pd.to_numeric(opm["duration"], errors="coerce").to_numpy(
                np.float64) / 1000.0})
    groups: dict[str, Any] = {}
    if "META_DATA" in have:
        md = dict(con.execute("select name, value from META_DATA").fetchall())
        if "parallel_group_info" in md:
            try:
                groups = ascend_rank._groups({"parallel_group_info": msgspec.json.decode(
                    md["parallel_group_info"])})
            except msgspec.DecodeError:
                notes.append("META_DATA.parallel_group_info is not valid JSON; groups unknown")
    rank_db = None
    if "RANK_DEVICE_MAP" in have:
        row = con.execute("select rankId from RANK_DEVICE_MAP limit 1").fetchone()
        if row is not None and row[0] is not None and int(row[0]) >= 0:
            rank_db = int(row[0])
    return origin, groups, rank_db


def _read_analysis_db(con: sqlite3.Connection, path: Path, tables: dict[str, pd.DataFrame],
                      origin: int | None, notes: list[str]) -> None:
    have = table_names(con)
    if "StepTraceTime" in have:
        s = query(con, path, "select * from StepTraceTime")
        tables["steps"] = pd.DataFrame({
            "step": pd.to_numeric(s["step"], errors="coerce"),
            "computing_us": s.get("computing"),
            "comm_not_overlapped_us": s.get("communication_not_overlapped"),
            "overlapped_us": s.get("overlapped"), "communication_us": s.get("communication"),
            "free_us": s.get("free"), "stage_us": s.get("stage"), "bubble_us": s.get("bubble"),
            "comm_not_overlapped_excl_receive_us":
                s.get("communication_not_overlapped_and_exclude_receive"),
            "preparing_us": s.get("preparing")})
    else:
        notes.append("steps: analysis.db has no StepTraceTime table")

    def step_num(col: pd.Series) -> pd.Series:
        return pd.to_numeric(col.astype(str).str.extract(r"(\d+)", expand=False),
                             errors="coerce")

    def ops_only(frame: pd.DataFrame) -> pd.DataFrame:
        """The rows of operations, not a step's ``Total Op Info`` summary (counted twice)."""
        if "hccl_op_name" not in frame.columns:
            return frame
        total = frame["hccl_op_name"].map(is_total_op).astype(bool).to_numpy()
        return frame[~total].reset_index(drop=True) if total.any() else frame

    if "CommAnalyzerTime" in have:
        t = ops_only(query(con, path, "select * from CommAnalyzerTime"))
        start_ns = np.round(pd.to_numeric(t["start_timestamp"]).to_numpy(np.float64) * 1000)
        tables["comm_ops"] = pd.DataFrame({
            "step": step_num(t["step"]), "group": t["group_name"].astype(TEXT),
            "name": t["hccl_op_name"].astype(TEXT),
            "start_us": (start_ns - origin) / 1000.0 if origin is not None else np.nan,
            "elapse_us": t["elapse_time"] * 1000.0, "transit_us": t["transit_time"] * 1000.0,
            "wait_us": t["wait_time"] * 1000.0, "sync_us": t["synchronization_time"] * 1000.0,
            "idle_us": t["idle_time"] * 1000.0, "kind": t.get("type")})
    else:
        notes.append("comm_ops: analysis.db has no CommAnalyzerTime (profiler level below "
                     "Level1?)")
    if "CommAnalyzerBandwidth" in have:
        b = ops_only(query(con, path, "select * from CommAnalyzerBandwidth"))
        # one row per packet size; the op-level figures repeat on each
        b = b.drop_duplicates(["step", "type", "hccl_op_name", "group_name", "transport_type"])
        tables["comm_bandwidth"] = pd.DataFrame({
            "step": step_num(b["step"]), "group": b["group_name"].astype(TEXT),
            "name": b["hccl_op_name"].astype(TEXT),
            "transport": b["transport_type"].astype(TEXT),
            "size_bytes": b["transit_size"] * 1e6, "transit_us": b["transit_time"] * 1000.0,
            "bandwidth_gbps": b["bandwidth"], "large_packet_ratio": b["large_packet_ratio"]})
    if "CommAnalyzerMatrix" in have:
        mx = ops_only(query(con, path, "select * from CommAnalyzerMatrix"))
        tables["comm_matrix"] = pd.DataFrame({
            "step": step_num(mx["step"]), "group": mx["group_name"].astype(TEXT),
            "name": mx["hccl_op_name"].astype(TEXT),
            "src_local": pd.to_numeric(mx["src_rank"], errors="coerce"),
            "dst_local": pd.to_numeric(mx["dst_rank"], errors="coerce"),
            "transport": mx["transport_type"].astype(TEXT),
            "size_bytes": mx["transit_size"] * 1e6, "time_us": mx["transit_time"] * 1000.0,
            "bandwidth_gbps": mx["bandwidth"], "op_name": mx.get("op_name")})
        notes.append("comm_matrix: link ranks are local to their group; src_rank/dst_rank NA "
                     "(src_local/dst_local kept)")
