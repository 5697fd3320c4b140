"""Write a :class:`~perfkit.simulate._engine.Simulation` as an Ascend text export.

One folder per rank, named like torch_npu's ``{worker}_{YYYYmmddHHMMSSfff}_ascend_pt``
(MindSpore: ``_ascend_ms``), holding ``profiler_info_{rank}.json``,
``profiler_metadata.json`` and ``ASCEND_PROFILER_OUTPUT/``. Headers are those of a current
torch_npu (``v2.7.1-26.0.0`` line and later) or MindSpore 2.9 export; see
``reference/formats.md`` and docs/simulate.md.

This module writes the info files and drives the writing (:func:`write`); each file of
``ASCEND_PROFILER_OUTPUT/`` is written by a sibling: :mod:`~perfkit.simulate._write_tasks`,
:mod:`~perfkit.simulate._write_comm`, :mod:`~perfkit.simulate._write_trace` and
:mod:`~perfkit.simulate._write_memory`; the headers they share are
:mod:`~perfkit.simulate._write_headers`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ._engine import EPOCH_NS, RankResult, Simulation
from ._write_comm import (  # noqa: F401 - re-exported: _write was their home
    _bw_info,
    _communication,
    _ring_factor,
    _time_info,
)
from ._write_headers import (  # noqa: F401 - re-exported: _write was their home
    _BASE,
    _SHAPES,
    APP_RUNTIME_BYTES,
    COMPUTE_STREAM,
    KERNEL_HEADER_MS,
    KERNEL_HEADER_PT,
    LOCAL_GBPS,
    MEM_HEADER_MS,
    MEM_HEADER_PT,
    MODEL_ID,
    OPMEM_HEADER,
    OPSTAT_HEADER,
    OUT,
    PMU,
    STEP_COLS,
    STEP_HEADER_PT,
    TRANSPORTS,
    _abs_ns,
    _abs_us_float,
    _fmt,
    _write_csv,
    double_hash,
)
from ._write_memory import (  # noqa: F401 - re-exported: _write was their home
    _memory,
    _op_memory,
    _op_statistic,
)
from ._write_tasks import (  # noqa: F401 - re-exported: _write was their home
    _PMU_AIC,
    _PMU_AIV,
    _comm_name,
    _kernel_file,
    _pmu_columns,
    _q,
    _static_parts,
    _step_rows,
)
from ._write_trace import (  # noqa: F401 - re-exported: _write was their home
    _ATEN,
    _host_ops,
    _trace_view,
)

__all__ = ["write", "double_hash", "KERNEL_HEADER_PT", "STEP_HEADER_PT"]


def _profiler_info(res: RankResult, framework: str, level: str, aic: str, steps: int,
                   end_us: float) -> dict[str, Any]:
    end_ns = int(_abs_ns(end_us)[0])
    if framework == "mindspore":
        return {"profiler_parameters": {
            "is_set_schedule": True, "activities": ["ProfilerActivity.CPU",
                                                   "ProfilerActivity.NPU"],
            "profiler_level": level, "aic_metrics": aic,
            "schedule": {"wait": 0, "active": steps, "warmup": 1, "repeat": 1, "skip_first": 0},
            "with_stack": False, "profile_memory": True, "export_type": ["text"],
            "host_sys": []},
            "ms_profiler_info": {"rank_id": res.rank, "device_id": str(res.rank % 8)},
            "cann_profiler_info": {}, "analysis_cost_time": {}, "ms_version": "2.9.0",
            "cann_version": "8.5.0", "jit_level": "O0"}
    return {"config": {"common_config": {
        "activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
        "schedule": {"wait": 0, "active": steps, "warmup": 1, "repeat": 1, "skip_first": 0},
        "record_shapes": True, "profile_memory": True, "with_stack": False,
        "with_flops": False, "with_modules": False},
        "experimental_config": {"_profiler_level": level, "_aic_metrics": aic, "_l2_cache": False,
                                "_msprof_tx": False, "_data_simplification": True,
                                "record_op_args": False, "_export_type": ["text"],
                                "_op_attr": False, "_gc_detect_threshold": None}},
        "start_info": {"syscnt_enable": True, "freq": 100, "start_cnt": 17238197612056,
                       "start_monotonic": 172163581670080},
        "end_info": {"collectionTimeEnd": end_ns, "MonotonicTimeEnd": 172164265133640},
        "torch_npu_version": "2.7.1.post1", "cann_version": "8.5.0", "rank_id": res.rank}


def _metadata(sim: Simulation, res: RankResult, summary: dict[str, Any]) -> dict[str, Any]:
    groups = {}
    for gid, g in sim.groups.items():
        ranks = list(g["global_ranks"])  # type: ignore[arg-type]
        if res.rank in ranks:
            groups[gid] = {"group_name": g["group_name"], "group_rank": ranks.index(res.rank),
                           "global_ranks": ranks}
    env = {k: "" for k in ("ASCEND_GLOBAL_LOG_LEVEL", "HCCL_RDMA_TC", "HCCL_RDMA_SL",
                           "ACLNN_CACHE_LIMIT", "HOST_CACHE_CAPACITY", "ASCEND_ENHANCE_ENABLE",
                           "PYTORCH_NPU_ALLOC_CONF", "ASCEND_LAUNCH_BLOCKING", "HCCL_ALGO")}
    return {"ENV_VARIABLES": env, "parallel_group_info": groups,
            "perfkit_simulation": summary}


# ----------------------------------------------------------------------------- driver

def rank_dir_name(rank: int, framework: str, devices_per_node: int) -> str:
    """``{hostname}_{pid}_{timestamp}_ascend_pt`` (torch_npu's naming)."""
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(EPOCH_NS // 10**9 + 60))
    suffix = "ascend_pt" if framework == "pytorch" else "ascend_ms"
    return f"node{rank // devices_per_node}_{200000 + rank}_{stamp}{rank % 1000:03d}_{suffix}"


def write(sim: Simulation, out: Path, framework: str = "pytorch", level: str = "Level1",
          aic_metrics: str | None = "PipeUtilization", trace_kernels: bool = True,
          summary: dict[str, Any] | None = None, overlap_merge_us: float = 0.0) -> list[Path]:
    """Write every rank of ``sim`` under ``out``; returns the rank folders."""
    out.mkdir(parents=True, exist_ok=True)
    hashes = {gid: str(double_hash(gid)) for gid in sim.groups}
    aic_name = "ACL_AICORE_NONE" if aic_metrics is None else \
        "ACL_AICORE_" + {"PipeUtilization": "PIPE_UTILIZATION"}.get(aic_metrics, aic_metrics)
    dirs = []
    steps = len(sim.ranks[0].host_steps) if sim.ranks else 0
    for res in sim.ranks:
        device_id = res.rank % sim.hardware.devices_per_node
        rdir = out / rank_dir_name(res.rank, framework, sim.hardware.devices_per_node)
        odir = rdir / OUT
        odir.mkdir(parents=True, exist_ok=True)
        dirs.append(rdir)
        res.comm.sort(key=lambda c: c.start)
        counters: dict[tuple[str, str], int] = {}
        names = []
        for c in res.comm:
            key = (c.group, c.op)
            i = counters.get(key, 0)
            counters[key] = i + 1
            names.append(_comm_name(c, hashes[c.group], i))
        kern = _kernel_file(odir / "kernel_details.csv", sim, res, names, framework, device_id,
                            aic_metrics is not None)
        rows, events = _step_rows(res, overlap_merge_us)
        header = STEP_HEADER_PT if framework == "pytorch" else STEP_COLS
        _write_csv(odir / "step_trace_time.csv", header,
                   [([device_id] if framework == "pytorch" else [])
                    + [r[c] for c in STEP_COLS] for r in rows], "\r\n")
        comm_json, matrix = _communication(sim, res, names, hashes)
        (odir / "communication.json").write_text(json.dumps(comm_json))
        (odir / "communication_matrix.json").write_text(json.dumps(matrix))
        _trace_view(odir / "trace_view.json", sim, res, names, hashes, events, device_id,
                    framework, trace_kernels)
        mem_rows, t, alloc, reserved = _memory(res, device_id, framework,
                                               sim.reserved_peak[res.rank])
        _write_csv(odir / "memory_record.csv",
                   MEM_HEADER_PT if framework == "pytorch" else MEM_HEADER_MS, mem_rows, "\r\n")
        _write_csv(odir / "operator_memory.csv", OPMEM_HEADER,
                   _op_memory(res, t, alloc, reserved, device_id), "\r\n")
        stat_header = OPSTAT_HEADER if framework == "pytorch" else OPSTAT_HEADER[1:]
        _write_csv(odir / "op_statistic.csv", stat_header,
                   _op_statistic(kern, device_id, framework), "\n")
        end_us = res.host_steps[-1][2] if res.host_steps else 0.0
        info = _profiler_info(res, framework, level, aic_name, steps, end_us)
        (rdir / f"profiler_info_{res.rank}.json").write_text(json.dumps(info, indent=4))
        (rdir / "profiler_metadata.json").write_text(
            json.dumps(_metadata(sim, res, summary or {}), indent=4))
    return dirs
