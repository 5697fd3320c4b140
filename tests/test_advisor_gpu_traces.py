"""The advisor on the GPU traces users bring (a walk of them found both):

- gap findings are per profiled step: the tasks of no step are not a step. On TraceLens's
  MI300X DDP trace (5 training iterations, its 5 host ``Optimizer.step#SGD.step``
  annotations counted in the raw trace here) the long-gaps finding said 487 ms per step,
  the five steps' gaps over six rows, the sixth holding the one task launched outside
  every step; its five steps hold 2,920.7 ms of gaps of 1 ms or more: 584 ms per step;
- advice on an AMD GPU says AMD's words (matrix cores, not tensor cores)."""

from __future__ import annotations

import pytest
from raw_kineto import raw_events
from shared_samples import KINETO_TRACES, sample

import perfkit as pk

pytestmark = pytest.mark.shared_samples


def test_gaps_are_averaged_over_the_steps_only() -> None:
    trace = sample(KINETO_TRACES["tl_ddp_resnet18_mi300"])
    steps = [e for e in raw_events(trace)
             if e.get("name") == "Optimizer.step#SGD.step" and e.get("ph") == "X"
             and e.get("cat") == "user_annotation"]  # the host's, not the GPU lane's copy
    profile = pk.load(trace, progress=False)
    gaps = pk.analysis.host_bound(profile)
    in_steps = gaps[gaps["step"].notna()]
    assert len(in_steps) == len(steps) == 5 and gaps["step"].isna().any()
    findings = {f.rule: f for f in pk.advise(profile)}
    assert findings["host_stalls"].ms_per_step == pytest.approx(
        in_steps["long_gap_us"].mean() / 1e3, rel=1e-6)
    assert findings["host_stalls"].ms_per_step == pytest.approx(584, abs=1)
    assert findings["host_bound"].ms_per_step == pytest.approx(
        in_steps["launch_gap_us"].mean() / 1e3, rel=1e-6)


def test_an_amd_trace_is_told_of_matrix_cores_not_tensor_cores() -> None:
    """The MI300X trace (its runtime calls are HIP's, read here in the raw trace): the
    GEMM advice named NVIDIA's tensor cores; AMD calls its units matrix cores."""
    trace = sample(KINETO_TRACES["tl_ddp_resnet18_mi300"])
    assert any(str(e.get("name", "")).startswith("hip") for e in raw_events(trace)
               if e.get("cat") == "cuda_runtime")
    words = " ".join(f.recommendation for f in pk.advise(pk.load(trace, progress=False)))
    assert "matrix cores" in words and "tensor cores" not in words


def test_batch_norm_is_priced_as_a_normalisation() -> None:
    """The MI300X ResNet-18 trace: its largest operator, native_batch_norm_backward, had
    no perf model (kind NA, no roofline). It is a normalisation over the channels now:
    backward 2 × 7 FLOPs per element, and bytes the input, the output gradient and the
    input gradient plus weight and weight gradient (perfkit.calc.op_cost.norm_cost),
    checked here on one shape by hand."""
    profile = pk.load(sample(KINETO_TRACES["tl_ddp_resnet18_mi300"]), progress=False)
    eff = pk.analysis.operator_efficiency(profile)
    rows = eff[eff["name"].astype(str).str.contains("batch_norm_backward")
               & eff["input_shapes"].astype(str).str.startswith("512,64,56,56;512,64,56,56")]
    assert len(rows) >= 1 and set(rows["kind"]) == {"norm"}
    row = rows.iloc[0]
    elements = 512 * 64 * 56 * 56
    elem_bytes = {"c10::BFloat16": 2, "c10::Half": 2, "float": 4}[
        str(row["input_dtypes"]).split(";")[0]]
    assert row["flops"] == pytest.approx(2 * 7 * elements)
    assert row["bytes"] == pytest.approx(3 * elements * elem_bytes + 2 * 64 * 4 * 2)
    assert row["bound"] == "memory" and 0 < row["efficiency"] < 1
