"""Profile comparison and the NPU/GPU kernel-name mapping."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from shared_samples import HTA, PT_LEVEL1, sample, shared_sample

from perfkit.analysis import compare_profiles, compare_steps, kernel_class
from perfkit.analysis.compare import COMPARE_COLUMNS
from perfkit.errors import InvalidArgumentError
from perfkit.io.engines.local import load
from perfkit.profile import Profile, ProfileMeta

NPU_GPU = [  # (NPU type, NPU name, GPU name, shared category)
    ("MatMulV2", "aclnnMm_MatMulCommon_MatMulV2",
     "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "matmul"),
    ("FlashAttentionScore", "FlashAttentionScore_1", "flash_fwd_kernel<Flash_fwd_traits>",
     "attention"),
    ("RmsNorm", "aclnnRmsNorm_RmsNorm", "void rms_norm_kernel<float>(float*)", "norm"),
    ("SoftmaxV2", "aclnnSoftmax_SoftmaxV2", "void softmax_warp_forward<float>(...)", "softmax"),
    ("Swish", "aclnnSilu_Swish", "void at::native::vectorized_elementwise_kernel<4, "
     "at::native::silu_kernel(at::TensorIteratorBase&)>(int)", "activation"),
    ("Cast", "aclnnCast_Cast", "void at::native::unrolled_elementwise_kernel<cast_op>()", "cast"),
    ("TensorMove", "aclnnInplaceCopy_TensorMove", "Memcpy DtoD (Device -> Device)", "copy"),
    ("hcom_allReduce_", "hcom_allReduce__1_0", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...)",
     "communication"),
]


@pytest.mark.parametrize(("npu_type", "npu_name", "gpu_name", "category"), NPU_GPU)
def test_npu_and_gpu_names_share_a_category(npu_type: str, npu_name: str, gpu_name: str,
                                            category: str) -> None:
    npu = kernel_class(pd.Series([npu_name]), pd.Series([npu_type]))
    gpu = kernel_class(pd.Series([gpu_name]), pd.Series(["kernel"]))
    assert npu.iloc[0] == category
    assert gpu.iloc[0] == category


def test_broadcast_to_is_not_communication_or_cast() -> None:
    assert kernel_class(pd.Series(["BroadcastTo_1"]), pd.Series(["BroadcastTo"])).iloc[0] \
        not in ("communication", "cast")


def _profile(names: list[str], durs: list[float], steps: list[int], types=None,
             rank: int = 0) -> Profile:
    k = pd.DataFrame({"step": steps, "name": names, "type": types or names,
                      "category": "compute", "start_us": range(len(names)), "dur_us": durs})
    return Profile(ProfileMeta("test", rank=rank), {"kernels": k})


def test_compare_by_category_sorted_by_delta_and_per_step() -> None:
    base = _profile(["MatMul", "Softmax", "MatMul", "Softmax"], [100, 10, 100, 10], [1, 1, 2, 2])
    new = _profile(["MatMul", "FlashAttentionScore"], [70, 5], [1, 1])
    out = compare_profiles(base, new)
    assert list(out.columns) == list(COMPARE_COLUMNS)
    rows = out.set_index("key")
    # per step: base has 2 steps -> matmul 100 µs/step; new has 1 step -> 70
    assert rows.loc["matmul", "base_us"] == pytest.approx(100.0)
    assert rows.loc["matmul", "new_us"] == pytest.approx(70.0)
    assert rows.loc["matmul", "delta_us"] == pytest.approx(-30.0)
    assert rows.loc["matmul", "delta_pct"] == pytest.approx(-30.0)
    assert rows.loc["softmax", "new_us"] == 0.0
    assert rows.loc["attention", "base_us"] == 0.0 and pd.isna(rows.loc["attention", "delta_pct"])
    assert list(out["key"]) == ["matmul", "softmax", "attention"]  # |−30| > |−10| > |+5|


def test_compare_by_name_without_normalisation() -> None:
    base = _profile(["a", "b"], [10, 20], [1, 1])
    new = _profile(["a", "b", "b"], [12, 20, 20], [1, 2, 2])
    out = compare_profiles(base, new, by="name", normalize="none").set_index("key")
    assert out.loc["b", "delta_us"] == pytest.approx(20.0)
    assert out.loc["a", "new_count"] == 1


def test_bad_arguments() -> None:
    p = _profile(["a"], [1], [1])
    with pytest.raises(InvalidArgumentError):
        compare_profiles(p, p, by="shape")
    with pytest.raises(InvalidArgumentError):
        compare_profiles(p, p, normalize="per_token")


@pytest.mark.shared_samples
def test_npu_vs_gpu_real_samples() -> None:
    npu = load(sample(PT_LEVEL1), cache=False)
    gpu = load(sample(HTA), cache=False)
    out = compare_profiles(gpu, npu)
    assert {"matmul", "communication", "copy"} <= set(out["key"])
    assert (out["delta_us"].abs().diff().dropna() <= 1e-9).all()
    assert out["base_share"].sum() == pytest.approx(1.0)
    assert out["new_share"].sum() == pytest.approx(1.0)


def test_empty_profiles() -> None:
    empty = Profile(ProfileMeta("test", rank=0), {})
    out = compare_profiles(empty, empty)
    assert out.empty and out.attrs["notes"]


def test_compare_steps_before_after() -> None:
    def prof(computing: float, free: float) -> Profile:
        steps = pd.DataFrame({"step": [1, 2], "computing_us": computing,
                              "communication_us": 30.0, "comm_not_overlapped_us": 20.0,
                              "overlapped_us": 10.0, "free_us": free})
        return Profile(ProfileMeta("test", rank=0), {"steps": steps})
    out = compare_steps(prof(100.0, 40.0), prof(100.0, 10.0)).set_index("part")
    assert out.loc["step_us", "base_us"] == pytest.approx(160.0)
    assert out.loc["step_us", "delta_us"] == pytest.approx(-30.0)
    assert out.loc["free_us", "delta_pct"] == pytest.approx(-75.0)
    assert out.loc["computing_us", "delta_us"] == 0.0
    assert pd.isna(out.loc["bubble_us", "delta_us"])


def _raw_kernels(name: str) -> list[tuple[str, float]]:
    """(name, µs) of every GPU kernel of a shared Kineto trace, read with ``json``."""
    from raw_kineto import raw_events

    trace = next(shared_sample(name).glob("*.json*"))
    return [(str(e["name"]), float(e.get("dur", 0))) for e in raw_events(trace)
            if e.get("ph") == "X" and str(e.get("cat", "")).lower() == "kernel"]


_OPTIMIZER_WORDS = re.compile(r"adam|sgd|multi_tensor|foreach|lamb(?!da)", re.I)


@pytest.mark.shared_samples
@pytest.mark.parametrize("name", ["wild/tl_timesformer_h100", "wild/tl_qwen_h100",
                                  "wild/k_resnet50_nw0", "gpu/hta-trace_filter"])
def test_only_optimizer_kernels_are_optimizer(name: str) -> None:
    """PyTorch's element-wise kernels carry ``{lambda()#1}`` in their names: "lamb" (the
    optimizer) must not claim them. Checked on every kernel of real traces: a kernel is
    classed optimizer only with an optimizer's word in its name."""
    kernels = _raw_kernels(name)
    names = pd.Series([n for n, _ in kernels])
    cls = kernel_class(names, pd.Series("kernel", index=names.index))
    wrong = sorted({n[:90] for n, c in zip(names, cls, strict=True)
                    if c == "optimizer" and not _OPTIMIZER_WORDS.search(n)})
    assert not wrong, wrong


@pytest.mark.shared_samples
def test_convolutions_and_batch_norm_of_a_resnet_are_classed() -> None:
    """ResNet-50 on a V100 (PyTorch 1.9): its cuDNN convolutions (scudnn, winograd,
    wgrad / dgrad engines) are GEMM-like and its batch norms are norms, so that little of
    its device time is left as "other" (the raw kernels' time, summed here)."""
    kernels = _raw_kernels("wild/k_resnet50_nw0")
    names = pd.Series([n for n, _ in kernels])
    dur = pd.Series([d for _, d in kernels])
    cls = kernel_class(names, pd.Series("kernel", index=names.index))
    conv = names.str.contains(r"scudnn|winograd|wgrad_alg|dgrad_engine|implicit_convolve",
                              case=False)
    bn = names.str.contains(r"cudnn::bn_(?:fw|bw)", case=False)
    assert conv.sum() > 0 and bn.sum() > 0
    assert set(cls[conv]) == {"matmul"}
    assert set(cls[bn]) == {"norm"}
    assert dur[cls == "other"].sum() < 0.05 * dur.sum()


def test_nocast_and_without_cast_are_not_casts() -> None:
    """``gpu_kernel_impl_nocast`` and ``LoadWithoutCast`` say the kernel does *not* cast."""
    names = pd.Series([
        "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
        "at::native::neg_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}>(int)",
        "void at::native::unrolled_elementwise_kernel<at::native::CUDAFunctor_add<float>, "
        "at::native::memory::LoadWithoutCast, at::native::memory::StoreWithoutCast>(int)",
        "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda("
        "at::TensorIteratorBase&)::{lambda()#3}, at::native::memory::LoadWithCast<1>, "
        "at::native::memory::StoreWithCast<1> >(int)"])
    cls = kernel_class(names, pd.Series("kernel", index=names.index)).tolist()
    assert cls == ["elementwise", "elementwise", "cast"]


@pytest.mark.shared_samples
def test_a_gemm_librarys_transpose_is_a_copy() -> None:
    """DeepSeek's trace: ``dpsk::grouped_gemm::cuda::utils::transpose<...>`` (64 calls)
    was classed matmul by its namespace's "gemm"; the function's own name decides. Its
    grouped GEMM kernels (the same namespace) stay matmul."""
    names = pd.Series(sorted({n for n, _ in _raw_kernels("wild/ds_train")
                              if "grouped_gemm" in n}))
    cls = kernel_class(names, pd.Series("kernel", index=names.index))
    transpose = names.str.contains(r"::transpose<", regex=True)
    assert transpose.any() and (~transpose).any()
    assert set(cls[transpose]) == {"copy"}
    assert set(cls[~transpose]) == {"matmul"}
