"""Steps from profiles without device tasks: Kineto CPU traces and MindSpore CPU profiles."""

from __future__ import annotations

import gzip
import json
import math
import statistics
from pathlib import Path

import msgspec
import pytest

import perfkit as pk
from perfkit.io import chrome

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "data" / "kineto-tiny-llama"
MS_CPU = ROOT / "data" / "mindspore-cpu-tiny-llama"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def test_kineto_cpu_trace_has_its_profiler_steps() -> None:
    prof = pk.load(TINY, cache=False)
    assert prof.meta.device_type == "cpu"
    steps = pk.analysis.step_breakdown(prof)
    spans = {}
    for path in sorted(TINY.glob("*.json.gz")):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        rank = doc["distributedInfo"]["rank"]
        for e in doc["traceEvents"]:
            if str(e.get("name", "")).startswith("ProfilerStep#"):
                spans[(rank, int(e["name"].split("#")[1]))] = e["dur"]
    got = {(int(r.rank), int(r.step)): r.step_us for r in steps.itertuples()}
    assert got.keys() == spans.keys()
    for key, dur in spans.items():
        assert got[key] == pytest.approx(dur, abs=1e-3)
    # the parts add up to the step; the host computes on a CPU run
    parts = steps["computing_us"] + steps["comm_not_overlapped_us"] + steps["free_us"]
    assert (parts - steps["step_us"]).abs().max() < 1e-6 * steps["step_us"].max()
    assert (steps["computing_share"] > 0.5).all()
    assert (prof.steps["device_us"].isna()).all()  # no device task was recorded
    by_step = {}
    for (_, step), dur in spans.items():
        by_step[step] = max(by_step.get(step, 0.0), dur)
    assert pk.analysis.measured_step_s(steps) == pytest.approx(
        statistics.median(by_step.values()) / 1e6)


def test_kineto_shapes_and_groups_decode_without_the_slow_path(monkeypatch) -> None:
    # deviceProperties (a list) and Input Dims (nested lists) used to fail msgspec's
    # typed decode and fall back to the slow path; they decode directly now
    raw = gzip.decompress((TINY / "rank0.pt.trace.json.gz").read_bytes())
    msgspec.json.decode(raw, type=chrome._Trace)
    called = []
    monkeypatch.setattr(chrome, "_fallback", lambda *a, **k: called.append(1))
    prof = pk.load(TINY / "rank0.pt.trace.json.gz", cache=False)
    assert not called
    assert prof.meta.groups["0"]["global_ranks"] == [0, 1]
    lin = prof.ops[prof.ops["name"] == "aten::linear"]
    doc = json.loads(raw)
    first = next(e for e in doc["traceEvents"] if e.get("name") == "aten::linear")
    dims = ";".join(",".join(map(str, d)) for d in first["args"]["Input Dims"])
    assert lin["input_shapes"].iloc[0] == dims
    assert lin["input_dtypes"].iloc[0] == ";".join(first["args"]["Input type"])


def test_mindspore_cpu_profile_is_a_cpu_profile_with_steps() -> None:
    prof = pk.load(MS_CPU, cache=False)
    assert prof.meta.device_type == "cpu" and prof.meta.framework == "mindspore"
    assert not any("kernel_details.csv not found" in n for n in prof.meta.notes)
    # operators in launch order, read from the CPU profiler's own timestamp file
    (stamps,) = MS_CPU.rglob("cpu_op_execute_timestamp_*.txt")
    launches = []
    for line in stamps.read_text().splitlines():
        name, _kind, rest = line.split(";")
        for item in rest.split():
            start_ns, dur_ms, _ = item.split(",")
            launches.append((int(start_ns), float(dur_ms), name))
    launches.sort()
    names = [n for _, _, n in launches]
    nodes = len(set(names))
    # a graph run ends with the optimizer update: runs start after the last Adam node
    ends = [i + 1 for i in range(len(names) - 1)
            if "AdamWeightDecay" in names[i] and "AdamWeightDecay" not in names[i + 1]]
    first = ends[0] % nodes
    runs = [(k, launches[k:k + nodes]) for k in range(first, len(names) - nodes + 1, nodes)]
    assert len(runs) == 2 and all(len({n for _, _, n in r}) == nodes for _, r in runs)
    steps = pk.analysis.step_breakdown(prof)
    assert list(steps["step"]) == [1, 2]
    for (_, run), got in zip(runs, steps["step_us"], strict=True):
        start = run[0][0]
        end = max(s + d * 1e6 for s, d, _ in run)
        # trace_view.json (what perfkit reads) and this file differ by a fraction of a µs
        assert got == pytest.approx((end - start) / 1e3, abs=1.0)
    assert not math.isnan(pk.analysis.measured_step_s(steps))
    # shapes come from cpu_framework_*.txt, line i for launch i
    mm = prof.ops[prof.ops["type"] == "BatchMatMul"]
    assert mm["input_shapes"].str.match(r"^2,4,\d+,\d+;2,4,\d+,\d+;").all()
    assert len(prof.memory) and (prof.memory["component"] == "MindSpore").all()
