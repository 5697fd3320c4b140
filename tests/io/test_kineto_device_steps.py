"""Steps follow Kineto's device-side step markers (issue 67, point 6).

A trace built here, shaped like a T4 run whose GPU runs behind its host: each host step
lasts 5 ms, each GPU step 9 ms; every step first launches a copy on its own stream, which
runs at once, inside the previous step's device time. Kineto draws each ``ProfilerStep#N``
on the GPU's lane too (``gpu_user_annotation``). The expected step times are the markers'
durations, read from the written events here; a step must be within 1 % of its marker.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import perfkit as pk
from perfkit.analysis import step_breakdown, step_wall_us

HOST_US, GPU_US = 5_000, 9_000


def _trace(tmp_path: Path, markers: bool = True) -> tuple[Path, dict[int, float]]:
    ev: list[dict] = []
    corr = 1
    gpu_free = 5_200  # the compute stream's first free time
    marks: dict[int, float] = {}
    for k in (1, 2, 3):
        t0 = k * HOST_US
        ev.append({"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{k}", "pid": 1, "tid": 1,
                   "ts": t0, "dur": HOST_US})
        # the step's copy: launched first, on stream 2, runs at once
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1,
                   "tid": 1, "ts": t0 + 10, "dur": 5, "args": {"correlation": corr}})
        ev.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 2,
                   "ts": t0 + 20, "dur": 50,
                   "args": {"correlation": corr, "stream": 2, "device": 0}})
        corr += 1
        start = gpu_free
        for i in range(3):  # three 3 ms kernels on stream 7, behind the previous step's
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                       "tid": 1, "ts": t0 + 100 + i * 10, "dur": 5,
                       "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": f"gemm_{i}", "pid": 0, "tid": 7,
                       "ts": gpu_free, "dur": GPU_US // 3,
                       "args": {"correlation": corr, "stream": 7, "device": 0}})
            gpu_free += GPU_US // 3
            corr += 1
        lo = t0 + 20 if k == 1 else start  # step 1's copy is its first device task
        marks[k] = gpu_free - lo
        if markers:
            ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{k}",
                       "pid": 0, "tid": 7, "ts": lo, "dur": gpu_free - lo})
    path = tmp_path / ("marked.json" if markers else "unmarked.json")
    path.write_text(json.dumps({"traceEvents": ev}))
    # the markers as written, read back with json
    raw = {int(e["name"].split("#")[1]): float(e["dur"])
           for e in json.loads(path.read_text())["traceEvents"]
           if e["cat"] == "gpu_user_annotation"}
    return path, raw


def _walls(path: Path) -> dict[int, float]:
    s = step_breakdown(pk.load(path, cache=False))
    return dict(zip(s["step"].astype(int), step_wall_us(s), strict=True))


def test_steps_are_within_one_percent_of_the_device_markers(tmp_path: Path) -> None:
    path, raw = _trace(tmp_path)
    assert raw[2] == GPU_US and raw[3] == GPU_US
    walls = _walls(path)
    for k, dur in raw.items():
        assert walls[k] == pytest.approx(dur, rel=0.01), (k, walls[k], dur)
    notes = pk.load(path, cache=False).meta.notes
    assert any("2 device tasks launched in one step ran inside the device-side" in n
               for n in notes)


def test_without_markers_the_copy_stretches_its_step(tmp_path: Path) -> None:
    # the same trace without the device markers: the copy of step 2, launched at 10.02 ms,
    # opens step 2's window 4.18 ms before its kernels (14.2 ms), as the launch rule says
    path, _ = _trace(tmp_path, markers=False)
    walls = _walls(path)
    assert walls[2] == pytest.approx(GPU_US + (14_200 - 10_020), rel=0.01)
