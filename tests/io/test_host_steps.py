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
from perfkit.io.chrome import decode as chrome

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "data" / "kineto-tiny-llama"
MS_CPU = ROOT / "data" / "mindspore-cpu-tiny-llama"
RECOMPUTE = ROOT / "tests" / "data" / "mindspore_cpu_recompute"


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


def _launches(folder: Path) -> list[tuple[int, float, str]]:
    """(start ns, duration ms, name) of every operator launch, in launch order, read from
    the CPU profiler's own timestamp file."""
    (stamps,) = folder.rglob("cpu_op_execute_timestamp_*.txt")
    launches = []
    for line in stamps.read_text().splitlines():
        name, _kind, rest = line.split(";")
        for item in rest.split():
            start_ns, dur_ms, _ = item.split(",")
            launches.append((int(start_ns), float(dur_ms), name))
    return sorted(launches)


def test_a_step_counter_in_the_optimizers_scope_does_not_end_a_run() -> None:
    """tests/data/mindspore_cpu_recompute recorded 2 steps (schedule active=2): 678 launches
    of a 339-node graph. Its optimizer's step counter, Default/optimizer-AdamWeightDecay/
    AssignAdd-op0, runs third in each step; read as the optimizer's update (by its scope),
    it cut the runs there, so one run fitted (31.87 ms over the step boundary, its 7.7 ms of
    host idle between the steps in it) and 339 launches had no step. The update nodes are
    those named after the optimizer (AdamWeightDecay-opN): each run ends with them, at
    launches 338 and 677, so the steps are launches 0-338 and 339-677."""
    launches = _launches(RECOMPUTE)
    names = [n for _, _, n in launches]
    nodes = len(set(names))
    assert (len(names), nodes) == (678, 339)
    update = [i for i, n in enumerate(names) if "AdamWeightDecay" in n.rsplit("/", 1)[-1]]
    assert update[-1] == len(names) - 1 and update[len(update) // 2 - 1] == nodes - 1
    runs = [launches[:nodes], launches[nodes:]]
    assert all(len({n for _, _, n in r}) == nodes for r in runs)
    steps = pk.analysis.step_breakdown(pk.load(RECOMPUTE, cache=False))
    assert list(steps["step"]) == [1, 2]
    for run, got in zip(runs, steps["step_us"], strict=True):
        start = run[0][0]
        end = max(s + d * 1e6 for s, d, _ in run)
        # trace_view.json (what perfkit reads) and this file differ by a fraction of a µs
        assert got == pytest.approx((end - start) / 1e3, abs=1.0)


def test_mindspore_cpu_profile_is_a_cpu_profile_with_steps() -> None:
    prof = pk.load(MS_CPU, cache=False)
    assert prof.meta.device_type == "cpu" and prof.meta.framework == "mindspore"
    assert not any("kernel_details.csv not found" in n for n in prof.meta.notes)
    # operators in launch order, read from the CPU profiler's own timestamp file
    launches = _launches(MS_CPU)
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
