"""CUDA / HIP graph replay in a Kineto trace: the kernels a ``cudaGraphLaunch`` replays
carry that launch's correlation id (libkineto draws the launch as their flow start,
``RuntimeActivity::flowStart`` in ``CuptiActivity.cpp``), so each is placed in the step
and under the operator of its launch, even when it runs after the step's host span; a
kernel whose launch is not in the trace belongs to no step, and the notes say both."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import perfkit as pk

GRAPH_KERNEL_US = 80.0  # each replayed kernel's duration, as written below


def _graph_trace(path: Path, launch: str) -> Path:
    """Two steps; in each an eager GEMM (step 1 only) and a graph of 3 kernels replayed by
    one ``launch`` inside a ``replay`` annotation; the last kernel of step 2 ends after
    the step's host span; one kernel of a graph launched before the trace began."""
    ev: list[dict] = []

    def x(cat: str, name: str, ts: float, dur: float, **args: object) -> None:
        dev = cat == "kernel"
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": 0 if dev else 1,
                   "tid": 7 if dev else 1, "ts": ts, "dur": dur, "args": args})

    x("kernel", "graph_kernel_before", 900.0, 50.0, correlation=5, stream=7, device=0)
    for step, t0 in ((1, 1000.0), (2, 2000.0)):
        x("user_annotation", f"ProfilerStep#{step}", t0, 1000.0)
        if step == 1:
            x("cpu_op", "aten::mm", t0 + 10, 20.0, **{"External id": 1})
            x("cuda_runtime", "cudaLaunchKernel", t0 + 12, 5.0, correlation=10,
              **{"External id": 1})
            x("kernel", "gemm_eager", t0 + 30, 100.0, correlation=10, stream=7, device=0,
              **{"External id": 1})
        ext, corr = 10 + step, 20 + step
        x("user_annotation", "replay", t0 + 100, 30.0, **{"External id": ext})
        x("cuda_runtime", launch, t0 + 105, 10.0, correlation=corr, **{"External id": ext})
        starts = (t0 + 200, t0 + 400, t0 + 950) if step == 2 else (t0 + 200, t0 + 300,
                                                                    t0 + 400)
        for node, start in enumerate(starts, 1):
            x("kernel", f"graph_kernel_{node}", start, GRAPH_KERNEL_US, correlation=corr,
              stream=7, device=0, **{"External id": ext, "graph node id": node})
    path.mkdir()
    (path / "rank0.pt.trace.json").write_text(json.dumps({
        "schemaVersion": 1, "traceEvents": ev,
        "deviceProperties": [{"id": 0, "name": "test GPU"}],
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}}))
    return path


@pytest.mark.parametrize("launch", ["cudaGraphLaunch", "hipGraphLaunch"])
def test_graph_replay_kernels_in_their_launch_step_and_operator(tmp_path: Path,
                                                                launch: str) -> None:
    p = pk.load(_graph_trace(tmp_path / "trace", launch), cache=False)
    k = p.kernels.set_index("name")
    steps = {n: k.at[n, "step"] for n in k.index.unique()}
    assert pd.isna(steps["graph_kernel_before"])
    assert steps["gemm_eager"] == 1
    graph = p.kernels[p.kernels["name"].str.startswith("graph_kernel_")
                      & (p.kernels["name"] != "graph_kernel_before")]
    # three kernels per step, in the step of their launch: step 2's last one starts at
    # 2,950 µs and ends at 3,030 µs, after the step's host span (2,000-3,000 µs)
    assert graph.groupby("step").size().to_dict() == {1: 3, 2: 3}
    ops = p.ops[p.ops["name"] == "replay"]
    assert ops["device_dur_us"].tolist() == pytest.approx([3 * GRAPH_KERNEL_US] * 2)
    notes = " ".join(p.meta.notes)
    assert f"6 GPU tasks replayed by 2 graph launches ({launch})" in notes
    assert "launching operator gets all of its graph's device time" in notes
    assert "1 GPU task was launched before the trace began" in notes

