"""The ``trace_view.json`` of a simulated rank: the device tasks, the overlap-analysis
tracks, and the host operators (``aten::`` names) that launched them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._engine import RankResult, Simulation
from ._text import fixed3, join, us_to_ns
from ._write_headers import COMPUTE_STREAM, _abs_ns

__all__: list[str] = []


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
