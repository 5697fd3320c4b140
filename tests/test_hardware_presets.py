"""Hardware presets: every row cites its source, and device names from real profiles match.

The device names are read here from the raw JSON of the real traces in
``../shared/samples/wild`` (``deviceProperties[].name``, ``totalGlobalMem``), not from
perfkit; the memory of each matched preset is checked against the memory CUDA / HIP
reported for the device.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from shared_samples import shared_sample

import perfkit as pk
from perfkit.analysis import infer_hardware, operator_efficiency
from perfkit.specs.hardware_presets import HARDWARE_PRESETS, preset_for_device

ROOT = Path(__file__).resolve().parents[1]


def _wild(name: str) -> Path:
    """A real profile of ``shared/samples/wild``, found by ``tests/shared_samples.py`` (the
    test is skipped with the reason when the folder is absent, fails under CI)."""
    return shared_sample(f"wild/{name}")


def _device_properties(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return json.load(fh).get("deviceProperties", [])


# (trace, the preset its GPU must match): the names themselves come from the raw JSON
WILD_TRACES = [
    ("tl_qwen_h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", "h100"),
    ("tl_b200_eager/eager_trace.json.gz", "b200"),
    ("tl_ddp_resnet18_mi300/train_resnet18.json.gz", "mi300x"),
    ("ds_train/train.json", "h800"),
    ("k_resnet50_nw0/worker0.1623143089861.pt.trace.json.gz", "v100"),
]


def test_every_preset_cites_a_source_and_has_positive_dense_peaks() -> None:
    for name, row in HARDWARE_PRESETS.items():
        src = row["source"]
        assert len(src) > 80, name  # a sentence naming the datasheet, not a tag
        hw = pk.Hardware.preset(name)
        assert hw.default_dtype in hw.peak_flops
        assert all(v > 0 for v in hw.peak_flops.values())
        assert hw.memory_bandwidth > 0 and hw.intra_node_bandwidth > 0
        # a datasheet-derived row names where; a reported one says it is reported/derived
        assert any(w in src for w in ("datasheet", "reported", "derived", "Hot Chips")), name


def test_the_presets_users_run_are_there() -> None:
    want = {"v100", "a100-40gb", "a100", "a800", "h100", "h100-pcie", "h800", "h20", "h200",
            "b200", "l40s", "mi250x", "mi300x", "mi325x", "ascend-910a", "ascend-910b1",
            "ascend-910b2", "ascend-910b3", "ascend-910b4"}
    assert want <= set(pk.Hardware.presets())


def test_dense_peaks_are_the_datasheets_sparse_figures_halved() -> None:
    # figures as printed (with sparsity) in the NVIDIA datasheets, halved by hand here
    printed_sparse = {("h100", "bf16"): 1979, ("h100", "fp8"): 3958,
                      ("h100-pcie", "bf16"): 1513, ("b200", "bf16"): 36000 / 8}
    for (name, dtype), sparse in printed_sparse.items():
        assert pk.Hardware.preset(name).peak(dtype) == pytest.approx(sparse / 2 * 1e12, rel=1e-3)
    # AMD prints dense figures: MI300X FP16 1307.4, MI250X 383 per OAM (two GCDs)
    assert pk.Hardware.preset("mi300x").peak("bf16") == pytest.approx(1307.4e12)
    assert pk.Hardware.preset("mi250x").peak("bf16") * 2 == pytest.approx(383e12)
    # Ascend: cores x clock x 16^3 multiply-adds x 2 (CANN platform_config)
    assert pk.Hardware.preset("ascend-910b2").peak("fp16") == pytest.approx(
        24 * 1.8e9 * 16**3 * 2, rel=1e-3)
    assert pk.Hardware.preset("ascend-910b4").peak("fp16") == pytest.approx(
        20 * 1.5e9 * 16**3 * 2, rel=1e-3)


@pytest.mark.parametrize("trace,preset", WILD_TRACES)
def test_device_names_of_real_traces_match_their_preset(trace: str, preset: str) -> None:
    props = _device_properties(_wild(trace))
    names = {p["name"] for p in props}
    assert len(names) == 1, names
    (name,) = names
    assert preset_for_device(name) == preset
    hw = pk.Hardware.for_device(name)
    assert hw is not None and hw.name == preset
    # the preset's memory is the device's: CUDA / HIP report it in totalGlobalMem
    reported = props[0]["totalGlobalMem"]
    assert hw.memory_bytes == pytest.approx(reported, rel=0.03), (name, reported)


@pytest.mark.parametrize("trace,preset", WILD_TRACES[:3])
def test_operator_efficiency_and_the_job_name_the_same_device(trace: str, preset: str) -> None:
    path = _wild(trace)
    profile = pk.load(path, cache=False)
    name = _device_properties(path)[0]["name"]
    hw, why = infer_hardware(profile)
    assert hw is not None and hw.name == preset and name in why
    job = pk.infer_job(profile)
    assert job.hardware == hw and job.source("hardware") == "profile"
    assert name in job.detail("hardware")


@pytest.mark.parametrize("name", ["NVIDIA A100-PCIE-40GB", "NVIDIA GeForce RTX 4090",
                                  "NVIDIA H200 NVL", "Ascend910_9392"])
def test_more_names_without_a_preset(name: str) -> None:
    assert preset_for_device(name) is None and pk.Hardware.for_device(name) is None


@pytest.mark.parametrize("name,preset", [
    ("Tesla V100-SXM2-16GB", "v100-16gb"), ("Tesla V100-SXM2-32GB", "v100"),
    ("Tesla V100-PCIE-32GB", "v100-pcie"), ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
    ("NVIDIA A100-SXM4-80GB", "a100"), ("NVIDIA A800-SXM4-80GB", "a800"),
    ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA H20", "h20"), ("NVIDIA H200", "h200"),
    ("NVIDIA L40S", "l40s"), ("AMD Instinct MI250X/MI250", "mi250x"),
    ("AMD Instinct MI325X", "mi325x"), ("Ascend910A", "ascend-910a"),
    ("Ascend910B1", "ascend-910b1"), ("Ascend910B2C", "ascend-910b2"),
    ("Ascend 910B3", "ascend-910b3"), ("Ascend910B4-1", "ascend-910b4")])
def test_device_names_as_drivers_print_them(name: str, preset: str) -> None:
    assert preset_for_device(name) == preset


def _one_kernel_trace(path: Path, device: str) -> Path:
    trace = {"deviceProperties": [{"id": 0, "name": device}],
             "traceEvents": [
                 {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                  "ts": 0, "dur": 50, "args": {"External id": 7,
                                               "Input Dims": [[256, 256], [256, 256]],
                                               "Input type": ["c10::BFloat16",
                                                              "c10::BFloat16"]}},
                 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                  "tid": 1, "ts": 10, "dur": 5, "args": {"External id": 7,
                                                          "correlation": 99}},
                 {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7,
                  "ts": 20, "dur": 30, "args": {"External id": 7, "correlation": 99,
                                                "device": 0, "stream": 7}}]}
    with gzip.open(path, "wt") as fh:
        json.dump(trace, fh)
    return path


def test_a_named_gpu_without_a_preset_is_said_by_its_name(tmp_path: Path) -> None:
    profile = pk.load(_one_kernel_trace(tmp_path / "rank0.pt.trace.json.gz",
                                        "NVIDIA A100-PCIE-40GB"), cache=False)
    hw, why = infer_hardware(profile)
    assert hw is None and "NVIDIA A100-PCIE-40GB" in why and "no preset" in why
    e = operator_efficiency(profile)
    assert len(e) == 1 and e["efficiency"].isna().all()  # no roofline, no crash
    notes = " ".join(e.attrs["notes"])
    assert "NVIDIA A100-PCIE-40GB" in notes and "no GPU model" not in notes
    job = pk.infer_job(profile)
    assert job.hardware is None and "NVIDIA A100-PCIE-40GB" in job.detail("hardware")
    assert any("NVIDIA A100-PCIE-40GB" in m for m in job.missing())
