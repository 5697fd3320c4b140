"""The operator rules count the tasks of the steps only, as the Operators tab does.

TraceLens' Qwen trace (``wild/tl_qwen_h100``: one ``ProfilerStep#6``, forward only) holds
509 device tasks launched before the trace began: their runtime call is not in the file,
so they belong to no step, and the step breakdown and the Operators tab leave them out.
The expected figures are read here from the raw gzip JSON (``json`` / ``gzip`` only): a
device task is in the step when the runtime call with its correlation id starts inside
the step's host span. The synthetic profiles check the other rules by hand arithmetic:
tasks of no step (``step`` missing) beside tasks of step 1 add nothing.
"""

from __future__ import annotations

import gzip
import json
import re
from functools import cache
from typing import Any

import pandas as pd
import pytest
from shared_samples import shared_sample

import perfkit as pk
from perfkit import analysis as A
from perfkit.advisor import ASSUMPTIONS, advise
from perfkit.advisor.context import Context
from perfkit.profile import Profile, ProfileMeta

HW = pk.Hardware.preset("ascend-910b")
DEVICE = {"kernel", "gpu_memcpy", "gpu_memset"}
RUNTIME = {"cuda_runtime", "cuda_driver"}
#: The CUDA copy kernels, as PyTorch names them (``direct_copy_kernel_cuda``,
#: ``bfloat16_copy_kernel_cuda``, ``.contiguous()``): the copies the redundant-copies
#: rule counts.
COPY = re.compile(r"copy_kernel|contiguous", re.IGNORECASE)
NO_STEP = re.compile(r"(\d+) device tasks of no step")


@cache
def _qwen() -> tuple[list[dict[str, Any]], list[dict[str, Any]], Any]:
    """(device tasks in ProfilerStep#6, device tasks of no step, the loaded profile)."""
    folder = shared_sample("wild/tl_qwen_h100")
    (path,) = folder.glob("*.json.gz")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    (step,) = [e for e in events if e.get("name") == "ProfilerStep#6"
               and e.get("cat") == "user_annotation"]
    lo, hi = float(step["ts"]), float(step["ts"]) + float(step["dur"])
    launch = {e["args"]["correlation"]: float(e["ts"]) for e in events
              if e.get("cat") in RUNTIME and "correlation" in e.get("args", {})}
    inside, outside = [], []
    for e in events:
        if e.get("cat") not in DEVICE:
            continue
        ts = launch.get(e["args"].get("correlation"))
        (inside if ts is not None and lo <= ts < hi else outside).append(e)
    return inside, outside, pk.load(folder, cache=False, progress=False)


@pytest.mark.shared_samples
def test_copies_are_the_copy_kernels_launched_inside_the_step() -> None:
    """197 copy kernels (5.10 ms) are launched inside ProfilerStep#6; the 83 launched
    before the trace (2.17 ms more) belong to no step."""
    inside, outside, prof = _qwen()
    copies = [e for e in inside if COPY.search(e["name"])]
    before = [e for e in outside if COPY.search(e["name"])]
    assert copies and before  # both kinds are there: the test can tell them apart
    want_ms = sum(float(e["dur"]) for e in copies) / 1e3  # one step, one rank
    (f,) = [f for f in advise(prof) if f.rule == "redundant_copies"]
    assert f.ms_per_step == pytest.approx(want_ms, rel=1e-6)
    # one rank: its copies are counted over its steps, not "over ranks and steps"
    assert f.evidence.startswith(f"{len(copies)} copy tasks over steps,")
    assert int(NO_STEP.search(f.evidence).group(1)) == len(outside)
    # the Operators tab's unfused table: the same copies
    uf = A.unfused_patterns(prof).set_index("pattern")
    assert int(uf.loc["copies", "occurrences"]) == len(copies)
    assert any(NO_STEP.search(n) for n in uf.attrs["notes"])


@pytest.mark.shared_samples
def test_the_priced_operators_are_the_tasks_launched_inside_the_step() -> None:
    """The operator efficiency table (the roofline of the Operators tab, read by the
    GEMM rule) sums the device tasks of ProfilerStep#6: 31.9 ms, not the 45.6 ms of every
    task in the file; as much as the Operators tab's top operators."""
    inside, outside, prof = _qwen()
    want_us = sum(float(e["dur"]) for e in inside if not e["name"].startswith("nccl"))
    every_us = want_us + sum(float(e["dur"]) for e in outside)
    assert every_us > 1.2 * want_us
    eff = A.operator_efficiency(prof)
    assert float(eff["total_us"].sum()) == pytest.approx(want_us, rel=1e-6)
    assert float(eff["per_step_us"].sum()) == pytest.approx(want_us, rel=1e-6)
    assert any(int(m.group(1)) == len(outside)
               for m in map(NO_STEP.search, eff.attrs["notes"]) if m)
    top = A.top_operators(prof, n=None)
    assert float(top["total_us"].sum()) == pytest.approx(want_us, rel=1e-6)


def _kernels(rows: list[tuple[Any, ...]]) -> Profile:
    """Back-to-back tasks on one stream: (step or None, type, input shapes, dtypes,
    output shapes, µs); a task of step None was launched before the trace began."""
    recs, t = [], 0.0
    for step, typ, shapes, dtypes, out, dur in rows:
        recs.append({"name": f"aclnn{typ}", "type": typ, "category": "compute",
                     "core": "AI_CORE", "stream": 1, "step": step, "start_us": t,
                     "dur_us": dur, "input_shapes": shapes, "input_dtypes": dtypes,
                     "output_shapes": out, "output_dtypes": dtypes.split(";")[0]})
        t += dur
    frame = pd.DataFrame(recs).astype({"step": "Int64"})
    return Profile(ProfileMeta("test", framework="pytorch", rank=0, device_type="npu"),
                   {"kernels": frame})


def test_a_gemm_of_no_step_is_not_priced_in_the_step() -> None:
    """Two thin GEMMs of 500 µs launched before the trace, one in step 1: the saving is
    the step's one, ``500 - ideal / kernel_efficiency`` on the 910B roofline."""
    m, k, n = 4095, 4095, 33
    thin = ("MatMulV3", f"{m},{k};{k},{n}", "DT_BF16;DT_BF16", f"{m},{n}", 500.0)
    prof = _kernels([(None, *thin), (None, *thin), (1, *thin)])
    (gemm,) = [f for f in advise(prof, hardware=HW) if f.rule == "gemm_below_roofline"]
    flops = 2.0 * m * n * k
    nbytes = (m * k + k * n + m * n) * 2.0
    ideal_us = max(flops / 320e12, nbytes / 1600e9) * 1e6
    assert gemm.ms_per_step == pytest.approx(
        (500.0 - ideal_us / ASSUMPTIONS["kernel_efficiency"]) / 1e3)
    assert "2 device tasks of no step" in gemm.evidence


def test_an_elementwise_chain_of_no_step_saves_nothing_in_the_step() -> None:
    """Add, Mul, Cast (110 µs) three times, the first run launched before the trace: two
    chains of step 1 count, each saving 110 µs less one fused kernel moving the largest
    member's data (Add: two bf16 inputs and one output of 4096 × 4096)."""
    shape = "4096,4096"
    chain = [("Add", f"{shape};{shape}", "DT_BF16;DT_BF16", shape, 40.0),
             ("Mul", f"{shape};{shape}", "DT_BF16;DT_BF16", shape, 40.0),
             ("Cast", shape, "DT_BF16", shape, 30.0),
             ("MatMulV3", "4096,4096;4096,4096", "DT_BF16;DT_BF16", shape,
              2.0 * 4096 ** 3 / (0.6 * 320e12) * 1e6)]
    prof = _kernels([(None, *r) for r in chain] + [(1, *r) for r in chain * 2])
    (f,) = [f for f in advise(prof, hardware=HW) if f.rule == "elementwise_chains"]
    fused_us = 3 * 4096 * 4096 * 2.0 / (ASSUMPTIONS["kernel_efficiency"] * 1600e9) * 1e6
    assert f.ms_per_step == pytest.approx(2 * (110.0 - fused_us) / 1e3)
    assert f.evidence.startswith("2 chains of 3 or more kernels")


def _tasks(rows: list[tuple[Any, ...]]) -> Profile:
    """Back-to-back Ascend tasks on one stream: (step or None, name, type, core, µs)."""
    recs, t = [], 0.0
    for step, name, typ, core, dur in rows:
        recs.append({"name": name, "type": typ, "category": "compute", "core": core,
                     "stream": 1, "step": step, "start_us": t, "dur_us": dur})
        t += dur
    frame = pd.DataFrame(recs).astype({"step": "Int64"})
    return Profile(ProfileMeta("test", framework="pytorch", rank=0, device_type="npu"),
                   {"kernels": frame})


def test_ai_cpu_and_deterministic_tasks_of_no_step_are_left_out() -> None:
    """An AI CPU GetNext of 500 µs and a deterministic reduction of 300 µs run before
    step 1 (no step); in step 1 a GetNext of 100 µs and a deterministic reduction of
    70 µs: the AI CPU rule counts 1 task and 100 µs, the deterministic rule 1 task."""
    prof = _tasks([(None, "GetNext", "GetNext", "AI_CPU", 500.0),
                   (None, "ReduceSumDeterministic", "ReduceSum", "AI_VECTOR_CORE", 300.0),
                   (1, "GetNext", "GetNext", "AI_CPU", 100.0),
                   (1, "ReduceSumDeterministic", "ReduceSum", "AI_VECTOR_CORE", 70.0),
                   (1, "MatMul", "MatMul", "AI_CORE", 1000.0)])
    found = {f.rule: f for f in advise(prof, hardware=HW)}
    assert found["ai_cpu"].ms_per_step == pytest.approx(100.0 / 1e3)
    assert found["ai_cpu"].evidence.startswith("1 AI CPU task, ")
    assert found["deterministic"].evidence.startswith("1 task with 'deterministic' in the "
                                                      "name, 70")
    for rule in ("ai_cpu", "deterministic"):
        assert "2 device tasks of no step" in found[rule].evidence


def test_the_step_time_of_severity_leaves_the_tasks_of_no_step_out() -> None:
    """No step table: the breakdown is derived from the tasks, back to back on one stream.
    Two thin GEMMs of 500 µs of no step (launched before the trace), then step 1 (one GEMM:
    a span of 500 µs) and step 2 (a GEMM and a Cast of 200 µs: 700 µs). The step time the
    findings are scored against is the mean of the two steps, 600 µs, not of three rows
    with the no-step span of 1000 µs (733.3 µs)."""
    m, k, n = 4095, 4095, 33
    thin = ("MatMulV3", f"{m},{k};{k},{n}", "DT_BF16;DT_BF16", f"{m},{n}", 500.0)
    cast = ("Cast", "4096,4096", "DT_BF16", "4096,4096", 200.0)
    prof = _kernels([(None, *thin), (None, *thin), (1, *thin), (2, *thin), (2, *cast)])
    assert prof.steps.empty  # the breakdown is derived from the device tasks
    rows = A.step_breakdown(prof)
    assert rows["step"].isna().sum() == 1 and rows["step_us"].max() == pytest.approx(1000.0)
    want_us = (500.0 + (500.0 + 200.0)) / 2
    ctx = Context(prof, None, None, HW, dict(ASSUMPTIONS))
    assert ctx.step_us == pytest.approx(want_us)
    (gemm,) = [f for f in advise(prof, hardware=HW) if f.rule == "gemm_below_roofline"]
    assert gemm.step_ms == pytest.approx(want_us / 1e3)
    assert gemm.score == pytest.approx(gemm.ms_per_step / gemm.step_ms)
