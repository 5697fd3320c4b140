"""Advice that fits the job: on three real profiles users bring, no rule advises on what
the job does not do, and fp32 matrix work on a device with a faster reduced-precision path
is told to use mixed precision first.

- ``ascend/msinsight-pt-level1``: a torch_npu CNN (Conv2D, MaxPool, MatMulV2) in fp32 on a
  910B, training: no transformer fused operators (``npu_rms_norm``, ``npu_swiglu``,
  ``npu_fusion_attention``), and mixed precision, without a figure (Huawei publishes no
  fp32 peak);
- ``wild/tl_qwen_h100``: an inference step (no autograd operator): no fused optimizers, no
  loss to stop printing, and the training-only recompute rule not run, with the reason said;
- ``wild/k_resnet50_nw0``: a ResNet-50 trained in fp32 on a V100 (PyTorch 1.9): no padding
  for tensor cores as the first advice, and mixed precision priced from the V100's peaks.

What the profiles hold is read here from the raw files (csv, gzip + json).
"""

from __future__ import annotations

import csv
import gzip
import json
import re

import pandas as pd
import pytest
from shared_samples import KINETO_TRACES, PT_LEVEL1, sample

import perfkit as pk
from perfkit.advisor.registry import registered

pytestmark = pytest.mark.shared_samples

#: NVIDIA Tesla V100 datasheet, SXM2 column: 15.7 fp32 TFLOP/s, 125 tensor (fp16) TFLOP/s.
V100_FP32, V100_FP16 = 15.7e12, 125e12
#: The V100's matrix kernels in the 2021 trace: cuDNN convolutions and cuBLAS sgemm.
MATRIX_KERNEL = re.compile(r"sgemm|scudnn|convolve|dgrad_engine|wgrad_alg|winograd")
BACKWARD = re.compile(r"Backward|autograd::")


def _words(findings) -> str:
    return " ".join(f"{f.title} {f.evidence} {f.recommendation}" for f in findings)


def _kineto(name: str) -> list[dict]:
    with gzip.open(sample(KINETO_TRACES[name]), "rt", encoding="utf-8") as fh:
        return json.load(fh)["traceEvents"]


def test_the_rule_registry_declares_workloads() -> None:
    rules = {r.name: r for r in registered()}
    assert rules["recompute"].phases == ("training",)
    assert rules["precision"].precisions == ("fp32",)
    # a rule without a declaration applies to every workload
    assert rules["host_bound"].phases == ("training", "inference")
    with pytest.raises(ValueError, match="unknown phase"):
        pk.advisor.registry.rule("host", order=1, phases=("serving",))


def test_an_fp32_cnn_on_a_910b_is_told_mixed_precision_not_llm_fusions() -> None:
    # the raw export: convolutions and matmuls with FLOAT operands, no attention
    kernels = sample(PT_LEVEL1) / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    with kernels.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    matrix = [r for r in rows if re.search(r"Conv|MatMul", r["Type"])]
    # (Conv2DBackpropInput's first input is the INT32 size of its output)
    assert matrix and all(set(r["Input Data Types"].split(";")) <= {"FLOAT", "INT32"}
                          and "FLOAT" in r["Input Data Types"] for r in matrix)
    assert not any(re.search(r"(?i)attention", r["Type"]) for r in rows)

    found = pk.advise(pk.load(sample(PT_LEVEL1), progress=False))
    words = _words(found)
    for fused in ("npu_rms_norm", "npu_swiglu", "npu_fusion_attention", "npu_add_rms_norm"):
        assert fused not in words
    (mp,) = [f for f in found if f.rule == "fp32_matrix_work"]
    assert "mixed precision" in mp.recommendation and "autocast('npu'" in mp.recommendation
    # no fp32 peak is published for the 910B: no figure at stake, and the evidence says why
    assert not mp.measured and "no fp32 peak is published" in mp.evidence


def test_an_inference_trace_gets_no_training_advice() -> None:
    ops = [e for e in _kineto("tl_qwen_h100") if e.get("cat") == "cpu_op"]
    assert len(ops) > 1000 and not any(BACKWARD.search(e["name"]) for e in ops)

    found = pk.advise(pk.load(sample(KINETO_TRACES["tl_qwen_h100"]), progress=False))
    words = _words(found)
    assert "fused optimizer" not in words and "loss" not in words
    assert not any(f.rule.startswith("recompute") for f in found)
    (skipped,) = [f for f in found if f.rule == "workload_fit"]
    assert "recompute (training only; this is inference" in skipped.evidence
    assert skipped.severity == "info" and not skipped.measured
    # bf16 matrix work: the fp32 rule neither runs nor is listed as skipped
    assert "fp32_matrix_work" not in {f.rule for f in found}
    assert "precision" not in skipped.evidence


def test_an_inference_trace_with_tp_collectives_gets_the_forwards_words() -> None:
    """A walk: vLLM's eager B200 trace (no autograd operator; all-reduces of a tp group)
    was told Megatron's --tp-comm-overlap and to trade tp for dp: the tensor-parallel
    words of training came before the forward-only ones."""
    ops = [e for e in _kineto("tl_b200_eager") if e.get("cat") == "cpu_op"]
    assert ops and not any(BACKWARD.search(e["name"]) for e in ops)
    found = pk.advise(pk.load(sample(KINETO_TRACES["tl_b200_eager"]), progress=False))
    exposed = [f for f in found if "The profiled step runs no backward pass, so its "
               "collectives are the forward's own" in f.recommendation]
    assert exposed
    assert "--tp-comm-overlap" not in _words(found) and "trade tp for dp" not in _words(found)


def test_fp32_gemms_on_a_v100_are_told_amp_priced_from_the_peak_ratio() -> None:
    events = _kineto("k_resnet50_nw0")
    steps = [e for e in events if e.get("ph") == "X"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
    matrix = [e for e in events if e.get("ph") == "X" and e.get("cat") == "Kernel"
              and MATRIX_KERNEL.search(e["name"])]
    assert all("float" in e["name"] or "sgemm" in e["name"] or "scudnn" in e["name"]
               or "winograd" in e["name"] for e in matrix)  # fp32 kernels only
    matrix_ms = sum(e["dur"] for e in matrix) / len(steps) / 1e3
    expected = matrix_ms * (1 - V100_FP32 / V100_FP16)  # 65.6 ms x 0.874 = 57.4 ms

    found = {f.rule: f for f in pk.advise(pk.load(sample(KINETO_TRACES["k_resnet50_nw0"]),
                                                  progress=False))}
    mp = found["fp32_matrix_work"]
    assert mp.measured and mp.ms_per_step == pytest.approx(expected, rel=0.05)
    assert "automatic mixed precision" in mp.recommendation
    assert "8.0×" in mp.title  # 125 / 15.7
    gemm = found["gemm_below_roofline"].recommendation
    assert gemm.startswith("These GEMMs run in fp32, which the tensor cores do not take")
    assert "for the tensor cores (8 at least" not in gemm
    # it outranks every operator finding below it
    order = list(found)
    assert order.index("fp32_matrix_work") < order.index("gemm_below_roofline")


@pytest.mark.parametrize(("names", "arch"), [
    (["fb::convex_sum", "aten::mm", "aten::add"], None),  # a recommender's fbgemm op
    (["aten::conv2d", "aten::convolution", "aten::add"], "other"),
    (["Conv2DBackpropFilter", "MatMulV2"], "other"),
    (["aten::conv2d", "aten::scaled_dot_product_attention"], "transformer"),
])
def test_the_workload_reads_a_convolution_as_the_job_does(names: list[str], arch) -> None:
    from perfkit.advisor.context import Context
    from perfkit.advisor.workload import axis_of
    from perfkit.profile import Profile, ProfileMeta

    ops = pd.DataFrame({"name": pd.Series(names, dtype="string")})
    ctx = Context(Profile(ProfileMeta("test"), {"ops": ops}), None, None, None, {})
    assert axis_of(ctx, "arch")[0] == arch
