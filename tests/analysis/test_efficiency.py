"""Operator efficiency from shapes: FLOPs and bytes per kind, the roofline, PMU agreement.

Every expected FLOP and byte count below is written out by hand from the shapes (no call
into perfkit's formulas); the Kineto trace's counts are compared with PyTorch's own
``FlopCounterMode`` (recorded by ``tools/flop_counts_kineto_llama.py`` into
``kineto_tiny_llama_flops.json`` beside this file).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from shared_samples import HTA, PT_LEVEL1, shared_sample

import perfkit as pk
from perfkit.analysis.efficiency import cost_of, infer_hardware, operator_efficiency
from perfkit.profile import Profile, ProfileMeta

ROOT = Path(__file__).resolve().parents[2]
KINETO = ROOT / "data" / "kineto-tiny-llama"
FLOPS = json.loads((Path(__file__).with_name("kineto_tiny_llama_flops.json")).read_text())
A100 = pk.Hardware.preset("a100")


# ---------------------------------------------------------------- one call per kind

def _cost(*args, **kw):
    got = cost_of(*args, **kw)
    assert got is not None, args
    return got[0]


def test_gemm_torch_mm() -> None:
    c = _cost("aten::mm", "256,64;64,192", "float;float")
    assert c.kind == "gemm"
    assert c.flops == 2 * 256 * 64 * 192
    assert c.bytes == (256 * 64 + 64 * 192 + 256 * 192) * 4


def test_gemm_addmm_skips_the_bias() -> None:
    c = _cost("aten::addmm", "192;256,64;64,192;;", "float;float;float;Scalar;Scalar")
    assert c.flops == 2 * 256 * 64 * 192


def test_gemm_bmm_bf16() -> None:
    c = _cost("aten::bmm", "8,128,64;8,64,256", "c10::BFloat16;c10::BFloat16")
    assert c.flops == 2 * 8 * 128 * 256 * 64
    assert c.bytes == (8 * 128 * 64 + 8 * 64 * 256 + 8 * 128 * 256) * 2


def test_gemm_ascend_transposed_operand_from_the_output_shape() -> None:
    # the real sample's weight gradient: (32, 4096)^T x (32, 9216) -> (4096, 9216), k = 32
    c = _cost("MatMulV3", "32,4096;32,9216", "FLOAT;FLOAT", "4096,9216", "FLOAT")
    assert c.flops == 2 * 4096 * 9216 * 32
    assert c.bytes == (32 * 4096 + 32 * 9216 + 4096 * 9216) * 4


def test_gemm_ascend_with_bias_and_transposed_weight() -> None:
    c = _cost("MatMulV2", "32,9216;4096,9216;4096", "FLOAT;FLOAT;FLOAT", "32,4096", "FLOAT")
    assert c.flops == 2 * 32 * 4096 * 9216


def test_flash_attention_ascend_bsh_gqa_assumed_causal() -> None:
    b, s, hq, hkv = 1, 4096, 4096, 1024
    fwd = _cost("FlashAttentionScore", f"{b},{s},{hq};{b},{s},{hkv};{b},{s},{hkv}",
                "DT_BF16;DT_BF16;DT_BF16")
    # QK^T and P.V over the lower triangle: 4 b s^2 (heads x head_dim) / 2
    assert fwd.kind == "attention" and fwd.flops == 4 * b * s * s * hq / 2
    assert fwd.bytes == (2 * b * s * hq + 2 * b * s * hkv) * 2  # q, o and k, v
    full = _cost("FlashAttentionScore", f"{b},{s},{hq};{b},{s},{hkv};{b},{s},{hkv}",
                 "DT_BF16;DT_BF16;DT_BF16", causal=False)
    assert full.flops == 4 * b * s * s * hq
    bwd = _cost("FlashAttentionScoreGrad", f"{b},{s},{hq};{b},{s},{hkv};{b},{s},{hkv}",
                "DT_BF16;DT_BF16;DT_BF16")
    assert bwd.flops == 2.5 * fwd.flops


def test_flash_attention_torch_causal_from_the_profile() -> None:
    shapes = "2,8,512,64;2,8,512,64;2,8,512,64;;;;"
    causal = cost_of("aten::_scaled_dot_product_flash_attention", shapes,
                     "c10::Half;c10::Half;c10::Half;Scalar;Scalar;;",
                     concrete_inputs=";;;0.;True;False;", causal=False)
    assert causal is not None and causal[1] == "yes (profile)"
    assert causal[0].flops == 4 * 2 * 8 * 512 * 512 * 64 / 2
    plain = cost_of("aten::_scaled_dot_product_flash_attention", shapes,
                    "c10::Half;c10::Half;c10::Half;Scalar;Scalar;;",
                    concrete_inputs=";;;0.;False;False;", causal=True)
    assert plain is not None and plain[1] == "no (profile)"
    assert plain[0].flops == 4 * 2 * 8 * 512 * 512 * 64


def test_convolution_torch_nchw_with_stride_and_padding() -> None:
    # 8 x 3 x 32 x 32 input, 16 filters 3 x 3, stride 1, padding 1 -> 8 x 16 x 32 x 32
    c = _cost("aten::convolution", "8,3,32,32;16,3,3,3;16;;;;;;", "float;float;float",
              concrete_inputs=";;;[1, 1];[1, 1];[1, 1];False;[0, 0];1")
    assert c.kind == "conv"
    assert c.flops == 2 * (8 * 32 * 32) * (16 * 3 * 3 * 3)
    assert c.bytes == (8 * 3 * 32 * 32 + 16 * 3 * 3 * 3 + 8 * 16 * 32 * 32) * 4


def test_convolution_ascend_5hd() -> None:
    # the real sample's first Conv2D: NC1HWC0 input (C padded to 8), FRACTAL_Z weight,
    # output 32 x (8 x 8 = 64 channels) x 55 x 55
    c = _cost("Conv2D", "32,1,224,224,8;121,4,16,8;64", "FLOAT;FLOAT;FLOAT",
              "32,8,55,55,8", "FLOAT", "NC1HWC0")
    assert c.flops == 2 * (32 * 55 * 55) * (121 * 4 * 16 * 8)
    # the weight gradient of a later layer: dy has 24 x 8 = 192 channels
    dw = _cost("Conv2DBackpropFilter", "32,8,27,27,8;4;32,24,27,27,8", "FLOAT;INT32;FLOAT",
               "200,12,16,8", "FLOAT", "FRACTAL_Z")
    assert dw.flops == 2 * (32 * 27 * 27) * (200 * 12 * 16 * 8)


def test_elementwise_binary_broadcast_and_copy() -> None:
    mul = _cost("Mul", "4096,11008;4096,11008", "DT_BF16;DT_BF16", "4096,11008", "DT_BF16")
    assert mul.kind == "elementwise" and mul.flops == 4096 * 11008
    assert mul.bytes == 3 * 4096 * 11008 * 2
    bc = _cost("aten::mul", "4,64,64;64", "float;float")
    assert bc.flops == 4 * 64 * 64
    assert bc.bytes == (4 * 64 * 64 + 64 + 4 * 64 * 64) * 4
    copy = _cost("aten::copy_", "4,64;4,64", "float;c10::BFloat16")
    assert copy.flops == 0  # data movement
    assert copy.bytes == 4 * 64 * 2 + 4 * 64 * 4  # reads the source, writes the destination


def test_normalisation_and_reduction() -> None:
    rms = _cost("RmsNorm", "4096,4096;4096", "DT_BF16;FLOAT")
    assert rms.kind == "norm" and rms.flops == 4 * 4096 * 4096
    assert rms.bytes == 2 * 4096 * 4096 * 2 + 4096 * 4
    grad = _cost("RmsNormGrad", "4096,4096;4096,4096", "DT_BF16;DT_BF16")
    assert grad.flops == 2 * 4 * 4096 * 4096
    ln = _cost("aten::native_layer_norm", "8,512,1024;;1024;1024;", "float;;float;float;")
    assert ln.flops == 7 * 8 * 512 * 1024
    sm = _cost("aten::_softmax", "8,16,128,128;;", "c10::Half;Scalar;Scalar")
    n = 8 * 16 * 128 * 128
    assert sm.kind == "reduction" and sm.flops == n and sm.bytes == 2 * n * 2


def test_unknown_operator_and_bad_shapes_are_not_priced() -> None:
    assert cost_of("ForeachAddList", "64;64", "FLOAT;FLOAT") is None
    assert cost_of("aten::mm", "", "") is None
    assert cost_of("aten::mm", "256,64;32,7", "float;float") is None  # no common k


# ---------------------------------------------------------------- roofline arithmetic

def _profile(rows: list[dict], device_type: str | None = None) -> Profile:
    k = pd.DataFrame(rows)
    k["category"] = "compute"
    k["step"] = 1
    k["stream"] = 7
    return Profile(ProfileMeta("test", rank=0, device_type=device_type), {"kernels": k})


def test_roofline_of_a_compute_and_a_memory_bound_kernel() -> None:
    n = 4096
    prof = _profile([
        {"name": "mm", "type": "MatMulV3", "input_shapes": f"{n},{n};{n},{n}",
         "input_dtypes": "DT_BF16;DT_BF16", "output_shapes": f"{n},{n}",
         "output_dtypes": "DT_BF16", "start_us": 0.0, "dur_us": 1000.0},
        {"name": "add", "type": "Add", "input_shapes": "1000000;1000000",
         "input_dtypes": "DT_BF16;DT_BF16", "output_shapes": "1000000",
         "output_dtypes": "DT_BF16", "start_us": 1000.0, "dur_us": 5.0},
    ])
    e = operator_efficiency(prof, hardware=A100).set_index("key")
    mm, add = e.loc["MatMulV3"], e.loc["Add"]
    flops, nbytes = 2.0 * n ** 3, 3.0 * n * n * 2
    assert mm["achieved_tflops"] == pytest.approx(flops / 1e-3 / 1e12)
    assert mm["intensity"] == pytest.approx(flops / nbytes)
    # intensity 1365 FLOP/B is right of the A100's ridge (312e12 / 2039e9 = 153)
    assert mm["bound"] == "compute"
    assert mm["efficiency"] == pytest.approx(flops / 1e-3 / 312e12)
    assert mm["ideal_us"] == pytest.approx(flops / 312e12 * 1e6)
    assert add["bound"] == "memory"
    # memory-bound: efficiency is the achieved bandwidth over the device's
    assert add["achieved_gbps"] == pytest.approx(6e6 / 5e-6 / 1e9)
    assert add["efficiency"] == pytest.approx(6e6 / 5e-6 / 2039e9)
    assert add["ideal_us"] == pytest.approx(6e6 / 2039e9 * 1e6)
    assert e.attrs["hardware"] == "a100"


# ---------------------------------------------------------------- hardware

def test_hardware_is_taken_from_the_profile_where_known(tmp_path: Path) -> None:
    npu = _profile([{"name": "x", "type": "Add", "input_shapes": "8;8",
                     "input_dtypes": "FLOAT;FLOAT", "start_us": 0.0, "dur_us": 1.0}], "npu")
    hw, why = infer_hardware(npu)
    assert hw is not None and hw.name == "ascend-910b" and "SKU" in why
    trace = {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
             "traceEvents": [
                 {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                  "ts": 0, "dur": 50, "args": {"External id": 7,
                                               "Input Dims": [[4096, 4096], [4096, 4096]],
                                               "Input type": ["c10::BFloat16",
                                                              "c10::BFloat16"]}},
                 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                  "tid": 1, "ts": 10, "dur": 5, "args": {"External id": 7,
                                                          "correlation": 99}},
                 {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16", "pid": 0,
                  "tid": 7, "ts": 20, "dur": 300,
                  "args": {"External id": 7, "correlation": 99, "device": 0,
                           "stream": 7}}]}
    path = tmp_path / "rank0.pt.trace.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump(trace, fh)
    gpu = pk.load(path, cache=False)
    k = gpu.kernels
    # the kernel carries the shapes of the operator that launched it
    assert k["op_name"].tolist() == ["aten::mm"]
    assert k["input_shapes"].tolist() == ["4096,4096;4096,4096"]
    e = operator_efficiency(gpu)
    assert e.attrs["hardware"] == "h100"
    row = e.iloc[0]
    assert row["kind"] == "gemm" and row["bound"] == "compute"
    assert row["achieved_tflops"] == pytest.approx(2 * 4096 ** 3 / 300e-6 / 1e12)
    assert row["efficiency"] == pytest.approx(2 * 4096 ** 3 / 300e-6 / 989.5e12)


# ---------------------------------------------------------------- PyTorch's own count

@pytest.fixture(scope="module", params=[0, 1])
def kineto_rank(request: pytest.FixtureRequest) -> Profile:
    return pk.load(KINETO / f"rank{request.param}.pt.trace.json.gz", cache=False)


def test_gemm_flops_equal_flop_counter_mode(kineto_rank: Profile) -> None:
    """aten::mm FLOPs per step, from the trace's shapes, equal FlopCounterMode's."""
    e = operator_efficiency(kineto_rank)
    steps = kineto_rank.ops["step"].dropna().nunique()
    assert steps == 2  # ProfilerStep#2 and #3
    mm = e[e["key"] == "aten::mm"]
    assert mm["total_flops"].sum() / steps == FLOPS["flop_counter_mode_per_step"]["aten.mm"]
    # no other operator of the step does GEMM work (FlopCounterMode counted only aten.mm)
    assert set(e.loc[e["kind"] == "gemm", "key"]) == {"aten::mm"}


def test_attention_flops_against_torch_formulas(kineto_rank: Profile) -> None:
    """Causal attention does half of torch's full-matrix count, forward and backward."""
    e = operator_efficiency(kineto_rank).set_index("key")
    ref = FLOPS["attention_formulas"]
    fwd = e.loc["aten::_scaled_dot_product_flash_attention_for_cpu"]
    bwd = e.loc["aten::_scaled_dot_product_flash_attention_for_cpu_backward"]
    assert fwd["causal"] == "yes (profile)"
    assert fwd["flops"] == ref["forward_per_call"] / 2
    assert bwd["flops"] == ref["backward_per_call"] / 2
    assert fwd["count"] == ref["calls_per_step"] * 2  # two profiled steps
    # shapes (batch 4, heads 4, seq 64, head 16): 4 b h s^2 d / 2, written out
    assert fwd["flops"] == 4 * 4 * 4 * 64 * 64 * 16 / 2


def test_cpu_trace_needs_hardware_for_the_roofline(kineto_rank: Profile) -> None:
    e = operator_efficiency(kineto_rank)
    assert e["bound"].isna().all() and e["efficiency"].isna().all()
    assert any("pass hardware=" in n for n in e.attrs["notes"])
    assert e.attrs["hardware"] is None
    assert any("host operators" in n for n in e.attrs["notes"])


# ---------------------------------------------------------------- PMU agreement

def test_roofline_agrees_with_the_pmu_counters() -> None:
    """The real torch_npu sample (AlexNet, fp32, PipeUtilization counters)."""
    e = operator_efficiency(pk.load(shared_sample(PT_LEVEL1), cache=False))
    assert e.attrs["hardware"] == "ascend-910b"
    both = e[e["bound"].notna() & e["pmu_bound"].isin(["compute", "memory"])]
    assert len(both) >= 60
    agree = (both["bound"] == both["pmu_bound"]).mean()
    # where the busiest compute pipe and the busiest data-movement pipe differ by 20
    # points or more, the PMU verdict is clear and the roofline matches it
    clear = both[(both["pmu_compute_ratio"] - both["pmu_memory_ratio"]).abs() >= 0.2]
    clear_agree = (clear["bound"] == clear["pmu_bound"]).mean()
    assert agree >= 0.8, agree
    assert len(clear) >= 50 and clear_agree >= 0.95, clear_agree
    # the PMU ratios are kept beside the roofline, duration-weighted, within [0, 1]
    r = e[["pmu_compute_ratio", "pmu_memory_ratio"]].dropna()
    assert ((r >= 0) & (r <= 1)).all().all()
    # the largest GEMM (32 x 9216 x 4096: intensity ~16 FLOP/B) is fp32, for which the
    # 910B has no published peak: no roofline, so no bound (not the fp16 roof's)
    gemms = e[e["kind"] == "gemm"]
    top = gemms.sort_values("total_us").iloc[-1]
    assert pd.isna(top["bound"]) and pd.isna(top["peak_tflops"])
    # (the bias of 4,096 floats is neither in the FLOPs nor in the bytes)
    assert top["intensity"] == pytest.approx(
        2 * 32 * 9216 * 4096 / ((32 * 9216 + 4096 * 9216 + 32 * 4096) * 4))


def test_gpu_sample_has_bound_with_hardware() -> None:
    """HTA's real GPU trace: kernels get their operator's shapes; GEMMs get a bound."""
    hta = pk.load(shared_sample(HTA), cache=False)
    e = operator_efficiency(hta, hardware=A100)
    gemm = e[e["kind"] == "gemm"]
    assert len(gemm) >= 10 and gemm["bound"].notna().all()
    # every GEMM has an efficiency, or the reason its measured rate cannot be one
    assert (np.isfinite(gemm["efficiency"]) | gemm["problem"].notna()).all()
    assert (e["efficiency"].dropna() <= 1).all()
    # fp32 products above A100's fp32 peak (19.5 TFLOP/s) ran as TF32, and say so
    over = gemm[gemm["problem"].notna()]
    assert len(over) and (over["achieved_tflops"] > 19.5).all()
    assert over["problem"].str.contains("TF32").all()
