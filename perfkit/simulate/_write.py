"""Write a :class:`~perfkit.simulate._engine.Simulation` as an Ascend text export.

One folder per rank, named like torch_npu's ``{worker}_{YYYYmmddHHMMSSfff}_ascend_pt``
(MindSpore: ``_ascend_ms``), holding ``profiler_info_{rank}.json``,
``profiler_metadata.json`` and ``ASCEND_PROFILER_OUTPUT/``. Headers are those of a current
torch_npu (``v2.7.1-26.0.0`` line and later) or MindSpore 2.9 export; see
``reference/formats.md`` and docs/simulate.md.
"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..io._common import hccl_group_hash
from . import _kernels as K
from ._engine import EPOCH_NS, CommOp, RankResult, Simulation, link_transport
from ._text import fixed3, join, overlap, runs, us_to_ns, write_lines

__all__ = ["write", "double_hash", "KERNEL_HEADER_PT", "STEP_HEADER_PT"]

OUT = "ASCEND_PROFILER_OUTPUT"
MODEL_ID = "4294967295"
PMU = ["aicore_time(us)", "aic_total_cycles", "aic_mac_time(us)", "aic_mac_ratio",
       "aic_scalar_time(us)", "aic_scalar_ratio", "aic_mte1_time(us)", "aic_mte1_ratio",
       "aic_mte2_time(us)", "aic_mte2_ratio", "aic_fixpipe_time(us)", "aic_fixpipe_ratio",
       "aic_icache_miss_rate", "aiv_time(us)", "aiv_total_cycles", "aiv_vec_time(us)",
       "aiv_vec_ratio", "aiv_scalar_time(us)", "aiv_scalar_ratio", "aiv_mte2_time(us)",
       "aiv_mte2_ratio", "aiv_mte3_time(us)", "aiv_mte3_ratio", "aiv_icache_miss_rate",
       "cube_utilization(%)"]
_BASE = ["Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State", "Accelerator Core",
         "Start Time(us)", "Duration(us)", "Wait Time(us)"]
_SHAPES = ["Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
           "Output Data Types", "Output Formats", "Context ID"]
KERNEL_HEADER_PT = ["Step Id", "Device_id", *_BASE, "Block Num", "Mix Block Num",
                    "HF32 Eligible", *_SHAPES]
KERNEL_HEADER_MS = ["Step ID", *_BASE, "Block Dim", "Mix Block Dim", "HF32 Eligible", *_SHAPES]
STEP_COLS = ["Step", "Computing", "Communication(Not Overlapped)", "Overlapped",
             "Communication", "Free", "Stage", "Bubble",
             "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
STEP_HEADER_PT = ["Device_id", *STEP_COLS]
MEM_HEADER_PT = ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)",
                 "Total Active(MB)", "Stream Ptr", "Device Type"]
MEM_HEADER_MS = ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)",
                 "Total Active(MB)", "Device Type"]
OPMEM_HEADER = ["Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)",
                "Active Release Time(us)", "Duration(us)", "Active Duration(us)",
                "Allocation Total Allocated(MB)", "Allocation Total Reserved(MB)",
                "Allocation Total Active(MB)", "Release Total Allocated(MB)",
                "Release Total Reserved(MB)", "Release Total Active(MB)", "Stream Ptr",
                "Device Type"]
OPSTAT_HEADER = ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)",
                 "Min Time(us)", "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")
COMPUTE_STREAM = 2
APP_RUNTIME_BYTES = 2.4 * 2**30
LOCAL_GBPS = 420.0


def double_hash(text: str) -> int:
    """The 64-bit group hash HCCL writes after ``@`` (see ``perfkit.io._common``)."""
    return int(hccl_group_hash(text))


def _abs_ns(us: np.ndarray | float) -> np.ndarray:
    return EPOCH_NS + us_to_ns(np.atleast_1d(us))


def _abs_us_float(us: float) -> float:
    return round(EPOCH_NS / 1000.0 + us, 3)


def _fmt(x: float) -> str:
    return repr(float(x))


# ----------------------------------------------------------------------------- kernel rows

_PMU_AIC = (0.74, 0.08, 0.31, 0.45, 0.09)
_PMU_AIV = (0.52, 0.11, 0.58, 0.29)


def _static_parts(catalog: list[K.Kernel], framework: str) -> tuple[list[str], list[str]]:
    a, b = [], []
    for k in catalog:
        a.append(f"{COMPUTE_STREAM},{k.name},{k.type},dynamic,{k.core}")
        hf32 = "NO" if k.work == K.VEC else "YES" if k.type.startswith("MatMul") else "NO"
        mix = "20" if k.core.startswith("MIX") else "0"
        b.append(f"{k.block},{mix},{hf32},{k.in_shapes and _q(k.in_shapes)},{k.in_dtypes},"
                 f"{k.in_formats},{k.out_shapes and _q(k.out_shapes)},{k.out_dtypes},"
                 f"{k.out_formats},N/A")
    return a, b


def _q(shape: str) -> str:
    """CSV-quote a shape that carries its own quotes, as torch_npu writes it."""
    return '"' + shape.replace('"', '""') + '"'


def _pmu_columns(catalog: list[K.Kernel], cat: np.ndarray, dur: np.ndarray) -> pa.Array:
    """PipeUtilization counters consistent with each kernel's duration."""
    cores = np.array([k.core for k in catalog])[cat]
    aic = (cores == "AI_CORE") | (cores == "MIX_AIC")
    aiv = (cores == "AI_VECTOR_CORE") | (cores == "MIX_AIC")
    busy = dur * 0.97
    zero_t, zero_c = pa.scalar("0.0"), pa.scalar("0")

    def t(x: np.ndarray, mask: np.ndarray) -> pa.Array:
        return pc.if_else(pa.array(mask), fixed3(us_to_ns(x)), zero_t)

    def c(x: np.ndarray, mask: np.ndarray) -> pa.Array:
        return pc.if_else(pa.array(mask), pc.cast(pa.array(np.rint(x).astype(np.int64)),
                                                  pa.string()), zero_c)

    def r(value: float, mask: np.ndarray) -> pa.Array:
        return pc.if_else(pa.array(mask), pa.scalar(f"{value:.3f}"), zero_t)

    cols: list[pa.Array | str] = [t(busy, aic), c(busy * 1800, aic)]
    for ratio in _PMU_AIC:
        cols += [t(busy * ratio, aic), r(ratio, aic)]
    cols += [r(0.002, aic), t(busy, aiv), c(busy * 1800, aiv)]
    for ratio in _PMU_AIV:
        cols += [t(busy * ratio, aiv), r(ratio, aiv)]
    cols += [r(0.001, aiv), pc.if_else(pa.array(aic), pa.scalar("71.204"), pa.scalar("0"))]
    return join(cols)


def _comm_name(op: CommOp, group_hash: str, index: int) -> str:
    return f"hcom_{op.op}__{group_hash[-3:]}_{index}_1"


def _kernel_file(path: Path, sim: Simulation, res: RankResult, comm_names: list[str],
                 framework: str, device_id: int, pmu: bool) -> pd.DataFrame:
    arr = res.arrays()
    n = len(arr["start"])
    a_parts, b_parts = _static_parts(sim.catalog, framework)
    cat = arr["cat"].astype(np.int64)
    start_ns = _abs_ns(arr["start"])
    comm = res.comm
    c_start = np.array([c.start for c in comm]) if comm else np.zeros(0)
    c_ns = _abs_ns(c_start) if comm else np.zeros(0, dtype=np.int64)
    # Task IDs: one running counter over compute tasks in start order
    task = pc.cast(pa.array(np.arange(n, dtype=np.int64) + 1000), pa.string())
    step_txt = pc.cast(pa.array(arr["step"].astype(np.int64)), pa.string())
    lead = [step_txt, str(device_id), MODEL_ID] if framework == "pytorch" \
        else [step_txt, MODEL_ID]
    cols: list[pa.Array | str] = [*lead, task,
                                  pc.take(pa.array(a_parts), pa.array(cat)),
                                  fixed3(start_ns - 0, tab=True),
                                  fixed3(us_to_ns(arr["dur"])),
                                  fixed3(us_to_ns(arr["wait"])),
                                  pc.take(pa.array(b_parts), pa.array(cat))]
    if pmu:
        cols.append(_pmu_columns(sim.catalog, cat, arr["dur"]))
    lines = join(cols) if n else pa.array([], pa.string())
    # HCCL rows
    na_tail = ",".join(["N/A"] * (len(_SHAPES) + 2 + (len(PMU) if pmu else 0)))
    c_lines = []
    for c, name, ns in zip(comm, comm_names, c_ns, strict=True):
        lead_txt = f"{c.step},{device_id},{MODEL_ID}" if framework == "pytorch" \
            else f"{c.step},{MODEL_ID}"
        c_lines.append(f"{lead_txt},N/A,N/A,{name},hcom_{c.op}_,N/A,HCCL,"
                       f"{ns // 1000}.{ns % 1000:03d}\t,{c.elapse:.3f},0,0,{na_tail}")
    all_lines = pa.concat_arrays([lines, pa.array(c_lines, pa.string())])
    order = np.argsort(np.concatenate([start_ns, c_ns]), kind="stable")
    all_lines = pc.take(all_lines, pa.array(order))
    header = KERNEL_HEADER_PT if framework == "pytorch" else KERNEL_HEADER_MS
    if pmu:
        header = header + PMU
    write_lines(path, ",".join(header), all_lines, "\r\n")
    types = np.array([k.type for k in sim.catalog])[cat]
    cores = np.array([k.core for k in sim.catalog])[cat]
    return pd.DataFrame({"type": types, "core": cores, "dur": arr["dur"]})


# ----------------------------------------------------------------------------- step trace

def _step_rows(res: RankResult, merge_us: float = 0.0) -> tuple[list[dict[str, float]],
                                         list[tuple[str, np.ndarray, np.ndarray]]]:
    """Per-step figures computed from the device tasks like torch_npu does, and the
    Overlap Analysis events (gaps shorter than ``merge_us`` closed in those tracks only)."""
    arr = res.arrays()
    rows, events = [], []
    for step, host_start, _ in res.host_steps:
        sel = arr["step"] == step
        cs, ce = arr["start"][sel], arr["start"][sel] + arr["dur"][sel]
        ops = [c for c in res.comm if c.step == step]
        ms = np.array([c.start for c in ops])
        me = ms + np.array([c.elapse for c in ops]) if ops else np.zeros(0)
        bounds, in_c, in_m = overlap(cs, ce, ms, me)
        seg = np.diff(bounds)
        first = min(cs.min() if len(cs) else np.inf, ms.min() if len(ms) else np.inf)
        last = max(ce.max() if len(ce) else -np.inf, me.max() if len(me) else -np.inf)
        span = last - first
        computing = float(seg[in_c].sum())
        communication = float(seg[in_m].sum())
        not_ov = float(seg[in_m & ~in_c].sum())
        busy = float(seg[in_m | in_c].sum())
        bubble = float(sum(c.elapse for c in ops if c.op == "receive"))
        rows.append({"Step": step, "Computing": computing,
                     "Communication(Not Overlapped)": not_ov,
                     "Overlapped": communication - not_ov, "Communication": communication,
                     "Free": span - busy, "Stage": span - bubble, "Bubble": bubble,
                     "Communication(Not Overlapped and Exclude Receive)": max(not_ov - bubble,
                                                                              0.0),
                     "Preparing": float(first - host_start)})
        for track, flag in (("Computing", in_c), ("Communication", in_m),
                            ("Communication(Not Overlapped)", in_m & ~in_c),
                            ("Free", ~(in_m | in_c))):
            b, e = runs(bounds, flag)
            if merge_us > 0 and len(b):
                if track == "Free":
                    keep = (e - b) >= merge_us
                    b, e = b[keep], e[keep]
                else:  # close gaps shorter than merge_us
                    cut = np.concatenate([[True], (b[1:] - e[:-1]) >= merge_us])
                    ends = np.concatenate([e[np.nonzero(cut)[0][1:] - 1], e[-1:]])
                    b, e = b[cut], ends
            events.append((track, b, e - b))
    return rows, events


def _write_csv(path: Path, header: list[str], rows: list[list[Any]], newline: str) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator=newline)
        w.writerow(header)
        w.writerows(rows)


# ----------------------------------------------------------------------------- communication

def _ring_factor(op: str, n: int) -> float:
    if op == "allReduce":
        return 2 * (n - 1) / n
    if op in ("reduceScatter", "allGather"):
        return (n - 1) / n
    return 1.0


def _bw_info(c: CommOp, sent: float) -> dict[str, Any]:
    info: dict[str, Any] = {}
    transit_ms = c.transit / 1000.0
    for tr in TRANSPORTS:
        used = tr == c.transport or (tr == "SDMA" and c.transport == "HCCS")
        if used and transit_ms > 0:
            mb = sent / 1e6
            packet = round(min(mb, 8.388608), 6)
            count = max(1, int(np.ceil(mb / packet))) if packet else 0
            info[tr] = {"Transit Size(MB)": mb, "Transit Time(ms)": transit_ms,
                        "Bandwidth(GB/s)": round(mb / 1000.0 / (transit_ms / 1000.0), 4),
                        "Large Packet Ratio": 0.0 if tr == "SDMA" else 1.0,
                        "Size Distribution": {} if tr == "SDMA" else
                        {str(packet): [count, transit_ms]}}
        else:
            info[tr] = {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0,
                        "Large Packet Ratio": 0, "Size Distribution": {}}
    return info


def _time_info(c: CommOp, abs_start: bool = True) -> dict[str, Any]:
    el, tr, wa = c.elapse / 1000.0, c.transit / 1000.0, max(c.wait, 0.0) / 1000.0
    idle = max(el - tr - wa, 0.0)
    info: dict[str, Any] = {}
    if abs_start:
        info["Start Timestamp(us)"] = _abs_us_float(c.start)
    info.update({"Elapse Time(ms)": el, "Transit Time(ms)": tr, "Wait Time(ms)": wa,
                 "Synchronization Time(ms)": wa, "Idle Time(ms)": idle,
                 "Wait Time Ratio": round(wa / (wa + tr), 4) if wa + tr else 0,
                 "Synchronization Time Ratio": round(wa / (wa + tr), 4) if wa + tr else 0})
    return info


def _communication(sim: Simulation, res: RankResult, names: list[str],
                   hashes: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    comm_json: dict[str, Any] = {}
    matrix: dict[str, Any] = {}
    for step, _, _ in res.host_steps:
        key = f"step{step}"
        kinds: dict[str, dict[str, Any]] = {"p2p": {}, "collective": {}}
        mat: dict[str, dict[str, Any]] = {"p2p": {}, "collective": {}}
        totals: dict[str, dict[str, float]] = {"p2p": {}, "collective": {}}
        by_type: dict[tuple[str, str, str], list[tuple[float, dict[str, Any]]]] = {}
        for c, name in zip(res.comm, names, strict=True):
            if c.step != step:
                continue
            g = hashes[c.group]
            ranks = list(sim.groups[c.group]["global_ranks"])  # type: ignore[arg-type]
            sent = c.size_bytes * _ring_factor(c.op, len(ranks))
            entry = {"Communication Time Info": _time_info(c),
                     "Communication Bandwidth Info": _bw_info(c, sent)}
            kinds[c.kind][f"{name}@{g}"] = entry
            tot = totals[c.kind]
            for f_ in ("elapse", "transit", "wait"):
                tot[f_] = tot.get(f_, 0.0) + getattr(c, f_)
            tot[c.transport] = tot.get(c.transport, 0.0) + sent
            tot[c.transport + "_t"] = tot.get(c.transport + "_t", 0.0) + c.transit
            me = ranks.index(res.rank)
            links: dict[str, Any] = {}
            per_peer = sent / max(len(c.peers), 1)
            for q in c.peers:
                bw = c.link_gbps[q]
                src, dst = (me, ranks.index(q)) if c.op != "receive" else (ranks.index(q), me)
                # each link its own transport: HCCS inside a node, RDMA across nodes
                kind = link_transport(sim.hardware, res.rank, q)
                links[f"{src}-{dst}"] = {"Transport Type": kind,
                                         "Transit Size(MB)": per_peer / 1e6,
                                         "Transit Time(ms)": per_peer / (bw * 1e9) * 1e3,
                                         "Bandwidth(GB/s)": round(bw, 4), "Op Name": name}
            links[f"{me}-{me}"] = {"Transport Type": "LOCAL",
                                   "Transit Size(MB)": per_peer / 1e6,
                                   "Transit Time(ms)": per_peer / (LOCAL_GBPS * 1e9) * 1e3,
                                   "Bandwidth(GB/s)": LOCAL_GBPS, "Op Name": name}
            by_type.setdefault((c.kind, c.op.lower(), g), []).append((c.transit, links))
        for kind in ("p2p", "collective"):
            tot = totals[kind]
            if tot:
                fake = CommOp(step, kind, "", "", 0.0, tot["elapse"], tot["transit"],
                              tot["wait"], 0.0, (), {}, "")
                bw = {}
                for tr in TRANSPORTS:
                    size = tot.get(tr, 0.0) + (tot.get("HCCS", 0.0) if tr == "SDMA" else 0.0)
                    t_ms = (tot.get(tr + "_t", 0.0) + (tot.get("HCCS_t", 0.0) if tr == "SDMA"
                                                       else 0.0)) / 1000.0
                    bw[tr] = {"Transit Time(ms)": t_ms, "Transit Size(MB)": size / 1e6,
                              "Size Distribution": {}}
                kinds[kind]["Total Op Info"] = {
                    "Communication Time Info": _time_info(fake, abs_start=False),
                    "Communication Bandwidth Info": bw}
        for (kind, op, g), inst in by_type.items():
            inst.sort(key=lambda x: x[0])
            picks = {"top1": inst[-1][1], "middle": inst[len(inst) // 2][1],
                     "bottom1": inst[0][1]}
            for label, links in picks.items():
                mat[kind][f"{op}-{label}@{g}"] = links
            total: dict[str, Any] = {}
            for _, links in inst:
                for lk, v in links.items():
                    t_ = total.setdefault(lk, {"Transport Type": v["Transport Type"],
                                               "Transit Size(MB)": 0.0, "Transit Time(ms)": 0.0,
                                               "Bandwidth(GB/s)": 0.0})
                    t_["Transit Size(MB)"] += v["Transit Size(MB)"]
                    t_["Transit Time(ms)"] += v["Transit Time(ms)"]
            for t_ in total.values():
                t_["Bandwidth(GB/s)"] = round(t_["Transit Size(MB)"] / t_["Transit Time(ms)"], 4) \
                    if t_["Transit Time(ms)"] else 0
            mat[kind][f"{op}-total@{g}"] = total
        comm_json[key] = kinds
        matrix[key] = mat
    return comm_json, matrix


# ----------------------------------------------------------------------------- trace view

def _trace_view(path: Path, sim: Simulation, res: RankResult, names: list[str],
                hashes: dict[str, str],
                overlap_events: list[tuple[str, np.ndarray, np.ndarray]],
                device_id: int, framework: str, with_kernels: bool) -> None:
    pid_py = 100_000 + res.rank * 7
    base = 3_170_820_000 + res.rank * 1000
    pid_hw, pid_hccl, pid_ov = base + 512, base + 576, base + 832
    label = f"NPU {device_id}"
    ev: list[dict[str, Any]] = []

    def meta(pid: int, name: str, labels: str, sort: int) -> None:
        ev.extend([{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                    "args": {"name": name}},
                   {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0,
                    "args": {"labels": labels}},
                   {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                    "args": {"sort_index": sort}}])

    def thread(pid: int, tid: int, name: str) -> None:
        ev.extend([{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                    "args": {"name": name}},
                   {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                    "args": {"sort_index": tid}}])

    meta(pid_py, "Python", "CPU", 0)
    thread(pid_py, pid_py, f"Thread {pid_py}")
    meta(pid_hw, "Ascend Hardware", label, 13)
    thread(pid_hw, COMPUTE_STREAM, f"Stream {COMPUTE_STREAM}")
    meta(pid_hccl, "HCCL", label, 15)
    group_tid = {gid: i for i, gid in enumerate(sorted({c.group for c in res.comm}))}
    for tid in group_tid.values():
        thread(pid_hccl, tid, f"Group {tid} Communication")
    meta(pid_ov, "Overlap Analysis", label, 23)
    tracks = {"Computing": 0, "Communication": 1, "Communication(Not Overlapped)": 2, "Free": 3}
    for name, tid in tracks.items():
        thread(pid_ov, tid, name)

    def ts(us: float) -> str:
        ns = int(_abs_ns(us)[0])
        return f"{ns // 1000}.{ns % 1000:03d}"

    for step, a, b in res.host_steps:
        ev.append({"ph": "X", "name": f"ProfilerStep#{step}", "pid": pid_py, "tid": pid_py,
                   "ts": ts(a), "dur": round(b - a, 3), "cat": "cpu_op",
                   "args": {"Sequence number": -1, "Fwd thread id": 0}})
    for c, name in zip(res.comm, names, strict=True):
        ev.append({"name": name, "pid": pid_hccl, "tid": group_tid[c.group], "ts": ts(c.start),
                   "dur": round(c.elapse, 3),
                   "args": {"model id": 4294967295, "data_type": "BF16",
                            "alg_type": "RING" if c.transport == "RDMA" else "MESH",
                            "count": int(c.size_bytes // 2)}, "ph": "X"})
    text = [json.dumps(e) for e in ev]
    chunks = [pa.array(text, pa.string())]
    for track, a, d in overlap_events:
        if len(a):
            chunks.append(join([f'{{"name": "{track}", "pid": {pid_ov}, "tid": {tracks[track]}, '
                                '"ts": "', fixed3(_abs_ns(a)), '", "dur": ',
                                fixed3(us_to_ns(d)), ', "ph": "X"}'], ""))
    if with_kernels:
        arr = res.arrays()
        cat = pa.array(arr["cat"].astype(np.int64))
        pre = pa.array([f'{{"name": "{k.name}", "pid": {pid_hw}, "tid": {COMPUTE_STREAM}, '
                        f'"ts": "' for k in sim.catalog])
        mid = pa.array([f', "args": {{"Model Id": 4294967295, "Task Type": "{k.core}", '
                        f'"Physic Stream Id": {COMPUTE_STREAM}, "Task Id": ' for k in sim.catalog])
        n = len(arr["start"])
        task = pc.cast(pa.array(np.arange(n, dtype=np.int64) + 1000), pa.string())
        lines = join([pc.take(pre, cat), fixed3(_abs_ns(arr["start"])), '", "dur": ',
                      fixed3(us_to_ns(arr["dur"])), pc.take(mid, cat), task,
                      ', "Batch Id": 0, "Subtask Id": 4294967295}, "ph": "X"}'], "")
        chunks.append(lines)
        chunks.append(_host_ops(sim, res, arr, pid_py, pid_hw))
    body = pa.concat_arrays(chunks)
    with open(path, "wb") as fh:
        fh.write(b"[\n")
        write_body = pc.binary_join_element_wise(body, pa.scalar(",\n"), "")
        offs = np.frombuffer(write_body.buffers()[1], dtype=np.int32, count=len(body) + 1,
                             offset=write_body.offset * 4)
        data = memoryview(write_body.buffers()[2])[int(offs[0]):int(offs[-1])]
        fh.write(data[:-2] if len(body) else b"")
        fh.write(b"\n]\n")


_ATEN = {"MatMulV3": "aten::mm", "FlashAttentionScore": "npu::npu_fusion_attention",
         "FlashAttentionScoreGrad": "npu::npu_fusion_attention_grad",
         "RmsNorm": "npu::npu_rms_norm", "RmsNormGrad": "npu::npu_rms_norm_backward",
         "Cast": "aten::to", "Add": "aten::add", "Mul": "aten::mul", "Swish": "aten::silu",
         "SwishGrad": "aten::silu_backward", "RotaryMul": "npu::npu_rotary_mul",
         "RotaryMulGrad": "npu::npu_rotary_mul_backward", "GatherV2": "aten::embedding",
         "EmbeddingDenseGrad": "aten::embedding_dense_backward",
         "SoftmaxCrossEntropyWithLogits": "aten::cross_entropy_loss",
         "ApplyAdamWV2": "npu::npu_apply_adam_w"}


def _host_ops(sim: Simulation, res: RankResult, arr: dict[str, np.ndarray], pid_py: int,
              pid_hw: int) -> pa.Array:
    """One host operator per kernel (the aten/npu op that launched it) and its
    ``async_npu`` flow to the kernel, as torch_npu links them.

    The host runs ahead of the device by a few hundred microseconds and spends 8-25 µs per
    launch; with :class:`~perfkit.simulate.faults.HostBound` it spends ``launch_us`` per
    launch and runs just ahead of the kernel it launches. Host ops never overlap:
    ``h_i = max(k_i - lead_i, h_{i-1} + d_{i-1})``.
    """
    n = len(arr["start"])
    if not n:
        return pa.array([], pa.string())
    rng = np.random.default_rng([sim.seed, res.rank, 7])
    if sim.launch_us is not None:
        dur = np.full(n, sim.launch_us * 0.95)
        lead = np.full(n, sim.launch_us)
    else:
        dur = rng.uniform(8.0, 25.0, n)
        lead = rng.uniform(150.0, 400.0, n)
    want = arr["start"] - lead
    csum = np.cumsum(dur) - dur
    host = csum + np.maximum.accumulate(want - csum)
    names = pa.array([_ATEN.get(k.type, f"aten::{k.type.lower()}") for k in sim.catalog])
    cat = pa.array(arr["cat"].astype(np.int64))
    hts = fixed3(_abs_ns(host))
    kts = fixed3(_abs_ns(arr["start"]))
    fid = pc.cast(pa.array(_abs_ns(arr["start"])), pa.string())
    ops = join(['{"ph": "X", "name": "', pc.take(names, cat),
                f'", "pid": {pid_py}, "tid": {pid_py}, "ts": "', hts, '", "dur": ',
                fixed3(us_to_ns(dur)), ', "cat": "cpu_op", "args": {"Sequence number": -1, '
                '"Fwd thread id": 0}}'], "")
    start = join(['{"ph": "s", "bp": "e", "name": "torch_to_npu", "id": ', fid,
                  f', "pid": {pid_py}, "tid": {pid_py}, "ts": "', hts,
                  '", "cat": "async_npu"}'], "")
    finish = join(['{"ph": "f", "bp": "e", "name": "torch_to_npu", "id": ', fid,
                   f', "pid": {pid_hw}, "tid": {COMPUTE_STREAM}, "ts": "', kts,
                   '", "cat": "async_npu"}'], "")
    return pa.concat_arrays([ops, start, finish])


# ----------------------------------------------------------------------------- memory

def _memory(res: RankResult, device_id: int, framework: str,
            peak: float) -> tuple[list[list[Any]], np.ndarray, np.ndarray, np.ndarray]:
    t = np.concatenate(res.mem_t)
    alloc = np.concatenate(res.mem_alloc)
    order = np.argsort(t, kind="stable")
    t, alloc = t[order], alloc[order]
    scale = peak / max(alloc.max(), 1.0)
    reserved = np.ceil(np.maximum.accumulate(alloc) * 1.03 * scale / 2**21) * 2**21
    reserved = np.maximum(reserved, alloc)
    mb = 2**20 if framework == "pytorch" else 1024.0 * 1000.0
    dev = f"NPU:{device_id}"
    ns = _abs_ns(t)
    rows = []
    for i in range(len(t)):
        stamp = f"{ns[i] // 1000}.{ns[i] % 1000:03d}\t"
        a, r = alloc[i] / mb, reserved[i] / mb
        if framework == "pytorch":
            rows.append(["APP", stamp, "", (reserved[i] + APP_RUNTIME_BYTES) / mb, "", "", dev])
            rows.append(["PTA", stamp, a, r, a, "187651203245152", dev])
        else:
            rows.append(["MindSpore", stamp, a, r, a, dev])
    return rows, t, alloc, reserved


def _op_memory(res: RankResult, t: np.ndarray, alloc: np.ndarray, reserved: np.ndarray,
               device_id: int) -> list[list[Any]]:
    rows = []
    mb = 2**20

    def at(x: float) -> tuple[float, float]:
        i = max(int(np.searchsorted(t, x, side="right")) - 1, 0)
        return alloc[i] / mb, reserved[i] / mb

    def stamp(us: float) -> str:
        ns = int(_abs_ns(us)[0])
        return f"{ns // 1000}.{ns % 1000:03d}\t"

    for name, size, a, b in res.allocs:
        aa, ar = at(a)
        if np.isnan(b):
            rows.append([name, round(size / 1024, 3), stamp(a), "", "", "", "", aa, ar, aa,
                         "", "", "", "187651203245152", f"NPU:{device_id}"])
            continue
        ra, rr = at(b)
        d = f"{b - a:.3f}\t"
        rows.append([name, round(size / 1024, 3), stamp(a), stamp(b), stamp(b), d, d, aa, ar,
                     aa, ra, rr, ra, "187651203245152", f"NPU:{device_id}"])
    return rows


def _op_statistic(kern: pd.DataFrame, device_id: int, framework: str) -> list[list[Any]]:
    g = kern.groupby(["type", "core"], sort=False)["dur"]
    stat = pd.DataFrame({"count": g.size(), "total": g.sum(), "min": g.min(), "avg": g.mean(),
                         "max": g.max()}).reset_index()
    total = stat["total"].sum()
    stat = stat.sort_values("total", ascending=False, kind="stable")
    rows = []
    for r in stat.itertuples(index=False):
        row = [r.type, r.core, int(r.count), round(r.total, 3), round(r.min, 3),
               round(r.avg, 3), round(r.max, 3), round(100 * r.total / total, 3)]
        rows.append(([device_id] if framework == "pytorch" else []) + row)
    return rows


# ----------------------------------------------------------------------------- info files

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
