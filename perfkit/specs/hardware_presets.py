"""Published accelerators: one row per device, with the source of its figures.

Each row holds the :class:`~perfkit.specs.Hardware` fields (``name``, ``peak_flops`` per
dtype — dense, never sparse —, ``memory_bytes``, ``memory_bandwidth``,
``intra_node_bandwidth`` and ``inter_node_bandwidth`` per device and direction,
``devices_per_node``, ``default_dtype``), plus:

* ``source`` — where every figure comes from (datasheet and column, or why a figure is a
  reported or derived one), shown to whoever asks where a number came from;
* ``aliases`` — other names :meth:`Hardware.preset <perfkit.specs.Hardware.preset>` accepts;
* ``unpublished`` — dtypes whose peak the vendor does not publish, with what was searched
  (:func:`unpublished_peak`), so a figure that needs that peak says why it has none;
* ``device_names`` — regular expressions (case-insensitive, ``re.search``) on the name a
  profile gives the device (Kineto ``deviceProperties[].name`` such as ``"NVIDIA H100 80GB
  HBM3"`` or ``"AMD Instinct MI300X"``, an Ascend SoC name such as ``"Ascend910B2"``):
  :func:`preset_for_device` is the one matcher every reader of a profile uses.

A new device is one row here. Bandwidths are per direction: a datasheet's bidirectional
NVLink, Infinity Fabric or HCCS total is halved. NVIDIA datasheets print Tensor Core
figures "with sparsity": the dense figure is half. Inter-node bandwidth is the NIC the
vendor's reference node gives each device (set yours with ``.replace()``).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["HARDWARE_PRESETS", "ALIASES", "GB", "TB", "GIB", "preset_fields", "preset_source",
           "preset_for_device", "unpublished_peak"]

GB = 1e9
TB = 1e12
GIB = 2**30

# NVIDIA: the product datasheets (nvidia.com/en-us/data-center/<product>/, PDF "Datasheet"),
# AMD: the Instinct product briefs/datasheets (amd.com/en/products/accelerators/instinct/),
# Huawei: CANN's platform_config/<SoC>.ini (core count, cube clock, memory size) with the
# 16x16x16 cube (4096 FP16 multiply-adds per core and cycle), else reported figures.
#: Why an Ascend preset lists no fp32 peak (said where a figure needs one: the job's MFU).
_ASCEND_NO_FP32 = (
    "Huawei publishes no FP32 peak for its Ascend NPUs: the Ascend 910 launch and Hot Chips "
    "31 figures give FP16 and INT8 only, the 910B's reported figures FP16/BF16 and INT8, "
    "and neither CANN's platform_config nor a datasheet we could find gives an FP32 matrix "
    "rate (searched 2026-11; third-party benchmarks report measured FP32 GEMM speeds, not "
    "a peak)")

_ROWS: tuple[dict[str, Any], ...] = (
    dict(name="v100",
         peak_flops={"fp16": 125 * TB, "fp32": 15.7 * TB},
         memory_bytes=32 * GIB, memory_bandwidth=900 * GB,
         intra_node_bandwidth=150 * GB, inter_node_bandwidth=6.25 * GB,
         default_dtype="fp16",
         aliases=("v100-sxm2", "v100-sxm2-32gb"),
         device_names=(r"V100-(SXM2|DGXS)-32GB",),
         source="NVIDIA Tesla V100 GPU datasheet (2020, nvidia.com/en-us/data-center/v100/; "
                "V100 SXM2 column): Tensor 125 TFLOPS (FP16 inputs), FP32 15.7, FP64 7.8 "
                "TFLOPS; 32 GB HBM2 at 900 GB/s; NVLink 300 GB/s total = 150 GB/s per "
                "direction. No BF16/TF32 on Volta. DGX-1 datasheet: 4 x 100 Gb/s EDR "
                "InfiniBand for 8 GPUs = 6.25 GB/s per GPU and direction. The DGX Station's "
                "V100-DGXS-32GB is the same NVLink module (DGX Station datasheet: 4 GPUs, "
                "500 TFLOPS)."),
    dict(name="v100-16gb",
         peak_flops={"fp16": 125 * TB, "fp32": 15.7 * TB},
         memory_bytes=16 * GIB, memory_bandwidth=900 * GB,
         intra_node_bandwidth=150 * GB, inter_node_bandwidth=6.25 * GB,
         default_dtype="fp16",
         aliases=("v100-sxm2-16gb",),
         device_names=(r"V100-(SXM2|DGXS)-16GB",),
         source="NVIDIA Tesla V100 GPU datasheet (V100 SXM2 column, 16 GB model): as the "
                "32 GB V100 SXM2 (Tensor 125, FP32 15.7 TFLOPS, 900 GB/s, NVLink 300 GB/s "
                "total) with 16 GB HBM2; DGX-1: 6.25 GB/s per GPU across nodes."),
    dict(name="v100-pcie",
         peak_flops={"fp16": 112 * TB, "fp32": 14 * TB},
         memory_bytes=32 * GIB, memory_bandwidth=900 * GB,
         intra_node_bandwidth=16 * GB, inter_node_bandwidth=6.25 * GB,
         default_dtype="fp16",
         aliases=("v100-pcie-32gb",),
         device_names=(r"V100-PCIE-32GB",),
         source="NVIDIA Tesla V100 GPU datasheet (V100 PCIe column): Tensor 112 TFLOPS, "
                "FP32 14 TFLOPS; 32 GB HBM2 at 900 GB/s; PCIe Gen3 x16 32 GB/s total = 16 "
                "GB/s per direction (no NVLink); inter-node as DGX-1, 6.25 GB/s."),
    dict(name="a100-40gb",
         peak_flops={"bf16": 312 * TB, "fp16": 312 * TB, "tf32": 156 * TB,
                     "fp32": 19.5 * TB, "int8": 624 * TB},
         memory_bytes=40 * GIB, memory_bandwidth=1555 * GB,
         intra_node_bandwidth=300 * GB, inter_node_bandwidth=25 * GB,
         aliases=("a100-sxm-40gb",),
         device_names=(r"A100-SXM4?-40GB",),
         source="NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100/; "
                "A100 40GB SXM column), dense: TF32 156, BF16/FP16 312 TFLOPS, INT8 624 TOPS, "
                "FP32 19.5; 40GB HBM2 at 1,555 GB/s; NVLink 3 600 GB/s total = 300 GB/s per "
                "direction. DGX A100 user guide: 8 x 200 Gb/s HDR InfiniBand, one per GPU = "
                "25 GB/s per direction."),
    dict(name="a100",
         peak_flops={"bf16": 312 * TB, "fp16": 312 * TB, "tf32": 156 * TB,
                     "fp32": 19.5 * TB, "int8": 624 * TB},
         memory_bytes=80 * GIB, memory_bandwidth=2039 * GB,
         intra_node_bandwidth=300 * GB, inter_node_bandwidth=25 * GB,
         aliases=("a100-sxm", "a100-80gb"),
         device_names=(r"A100-SXM4?-80GB",),
         source="NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100/; "
                "SXM4 80GB column), dense (no sparsity): FP64 9.7, FP64 Tensor 19.5, FP32 "
                "19.5, TF32 156, BF16/FP16 312 TFLOPS, INT8 624 TOPS; 80GB HBM2e at 2,039 "
                "GB/s; NVLink 3 600 GB/s total = 300 GB/s per direction. DGX A100 user guide: "
                "8 x 200 Gb/s HDR InfiniBand, one per GPU = 25 GB/s per direction."),
    dict(name="a800",
         peak_flops={"bf16": 312 * TB, "fp16": 312 * TB, "tf32": 156 * TB,
                     "fp32": 19.5 * TB, "int8": 624 * TB},
         memory_bytes=80 * GIB, memory_bandwidth=2039 * GB,
         intra_node_bandwidth=200 * GB, inter_node_bandwidth=25 * GB,
         aliases=("a800-sxm", "a800-80gb"),
         device_names=(r"A800-SXM4?-80GB",),
         source="NVIDIA A800 Tensor Core GPU datasheet (nvidia.cn, A800 80GB SXM column), "
                "dense: the A100's compute (TF32 156, BF16/FP16 312 TFLOPS, INT8 624 TOPS, "
                "FP32 19.5) and 80GB HBM2e at 2,039 GB/s, NVLink limited to 400 GB/s total "
                "= 200 GB/s per direction; inter-node as DGX A100, 25 GB/s per GPU."),
    dict(name="h100",
         peak_flops={"bf16": 989.5 * TB, "fp16": 989.5 * TB, "tf32": 494.5 * TB,
                     "fp8": 1979 * TB, "fp32": 67 * TB, "int8": 1979 * TB},
         memory_bytes=80 * GIB, memory_bandwidth=3350 * GB,
         intra_node_bandwidth=450 * GB, inter_node_bandwidth=50 * GB,
         aliases=("h100-sxm",),
         device_names=(r"H100 80GB HBM3", r"H100[- ]SXM"),
         source="NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100/; "
                "SXM5 column; the datasheet prints sparse figures, dense = half): BF16/FP16 "
                "989.5, TF32 494.5, FP8 1979, INT8 1979, FP32 67 TFLOPS; 80GB HBM3 at 3.35 "
                "TB/s; NVLink 4 900 GB/s total = 450 GB/s per direction. DGX H100: 8 x 400 "
                "Gb/s NDR ConnectX-7, one per GPU = 50 GB/s per direction."),
    dict(name="h100-pcie",
         peak_flops={"bf16": 756 * TB, "fp16": 756 * TB, "tf32": 378 * TB,
                     "fp8": 1513 * TB, "fp32": 51 * TB, "int8": 1513 * TB},
         memory_bytes=80 * GIB, memory_bandwidth=2000 * GB,
         intra_node_bandwidth=64 * GB, inter_node_bandwidth=25 * GB,
         aliases=(),
         device_names=(r"H100 PCIe",),
         source="NVIDIA H100 Tensor Core GPU datasheet (2022 edition, H100 PCIe column; "
                "sparse figures halved): BF16/FP16 756, TF32 378, FP8 1513, INT8 1513, FP32 "
                "51 TFLOPS; 80GB HBM2e at 2 TB/s; PCIe Gen5 128 GB/s total = 64 GB/s per "
                "direction (the NVLink bridge's 600 GB/s joins pairs of cards only); one 200 "
                "Gb/s NIC per GPU assumed across nodes (25 GB/s)."),
    dict(name="h800",
         peak_flops={"bf16": 989.5 * TB, "fp16": 989.5 * TB, "tf32": 494.5 * TB,
                     "fp8": 1979 * TB, "fp32": 67 * TB, "int8": 1979 * TB},
         memory_bytes=80 * GIB, memory_bandwidth=3350 * GB,
         intra_node_bandwidth=200 * GB, inter_node_bandwidth=50 * GB,
         aliases=("h800-sxm",),
         device_names=(r"H800(?!.*PCIe)",),
         source="NVIDIA H800 Tensor Core GPU datasheet (nvidia.cn, H800 SXM column; sparse "
                "figures halved): the H100 SXM's Tensor Core peaks (BF16/FP16 989.5, TF32 "
                "494.5, FP8 1979 TFLOPS), FP32 67, FP64 cut to 1 TFLOPS; 80GB HBM3 at 3.35 "
                "TB/s; NVLink 400 GB/s total = 200 GB/s per direction. DeepSeek-V3 technical "
                "report (arXiv 2412.19437, sec. 3.2.2): 400 Gb/s InfiniBand per GPU = 50 GB/s "
                "(it measures ~160 GB/s achievable over NVLink)."),
    dict(name="h20",
         peak_flops={"bf16": 148 * TB, "fp16": 148 * TB, "tf32": 74 * TB, "fp8": 296 * TB,
                     "fp32": 44 * TB, "int8": 296 * TB},
         memory_bytes=96 * GIB, memory_bandwidth=4000 * GB,
         intra_node_bandwidth=450 * GB, inter_node_bandwidth=50 * GB,
         aliases=(),
         device_names=(r"\bH20\b",),
         source="NVIDIA H20 (Hopper for the China market). NVIDIA publishes no datasheet page "
                "for it; the figures are the OEM spec sheets' as widely reported (dense): "
                "BF16/FP16 148, TF32 74, FP8 296, INT8 296, FP32 44 TFLOPS; 96 GB HBM3 at 4.0 "
                "TB/s; NVLink 900 GB/s total = 450 GB/s per direction; one 400 Gb/s NIC per "
                "GPU assumed across nodes (50 GB/s). Check against your vendor's sheet."),
    dict(name="h200",
         peak_flops={"bf16": 989.5 * TB, "fp16": 989.5 * TB, "tf32": 494.5 * TB,
                     "fp8": 1979 * TB, "fp32": 67 * TB, "int8": 1979 * TB},
         memory_bytes=141 * GIB, memory_bandwidth=4800 * GB,
         intra_node_bandwidth=450 * GB, inter_node_bandwidth=50 * GB,
         aliases=("h200-sxm",),
         device_names=(r"H200(?!.*NVL)",),
         source="NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200/; "
                "SXM column): same Hopper compute as H100 SXM (dense BF16/FP16 989.5, TF32 "
                "494.5, FP8 1979 TFLOPS), 141 GB HBM3e at 4.8 TB/s, NVLink 900 GB/s total "
                "(the capacity read in GiB, as the H100's 80 GB is: NVIDIA's GB of HBM is "
                "binary; 141e9 bytes, 131 GiB, is 9 GiB short of what the GPU reports); "
                "HGX H200 nodes pair each GPU with a 400 Gb/s NDR NIC = 50 GB/s per "
                "direction."),
    dict(name="b200",
         peak_flops={"bf16": 2250 * TB, "fp16": 2250 * TB, "tf32": 1125 * TB,
                     "fp8": 4500 * TB, "fp32": 75 * TB, "int8": 4500 * TB},
         memory_bytes=180 * GIB, memory_bandwidth=8000 * GB,
         intra_node_bandwidth=900 * GB, inter_node_bandwidth=50 * GB,
         aliases=("b200-sxm", "hgx-b200"),
         device_names=(r"\bB200\b",),
         source="NVIDIA HGX B200 / DGX B200 datasheets (nvidia.com/en-us/data-center/hgx/, "
                "dgx-b200/), 8-GPU totals divided by 8, sparse Tensor Core figures halved: "
                "FP16/BF16 36 PFLOPS sparse -> 2.25 PFLOPS dense per GPU, TF32 18 -> 1.125, "
                "FP8 and INT8 72 -> 4.5, FP32 600 TFLOPS -> 75; 1,440 GB HBM3e at 64 TB/s -> "
                "180 GB at 8 TB/s per GPU; NVLink 5 1.8 TB/s total = 900 GB/s per direction; "
                "DGX B200: 8 x 400 Gb/s ConnectX-7 = 50 GB/s per GPU."),
    dict(name="l40s",
         peak_flops={"bf16": 362.05 * TB, "fp16": 362.05 * TB, "tf32": 183 * TB,
                     "fp8": 733 * TB, "fp32": 91.6 * TB, "int8": 733 * TB},
         memory_bytes=48 * GIB, memory_bandwidth=864 * GB,
         intra_node_bandwidth=32 * GB, inter_node_bandwidth=25 * GB,
         aliases=(),
         device_names=(r"L40S",),
         source="NVIDIA L40S GPU datasheet (nvidia.com/en-us/data-center/l40s/; dense column, "
                "the sparse figures are twice these): BF16/FP16 362.05, TF32 183, FP8 733, "
                "INT8 733 TOPS, FP32 91.6 TFLOPS; 48 GB GDDR6 at 864 GB/s; no NVLink: PCIe "
                "Gen4 x16 64 GB/s total = 32 GB/s per direction; one 200 Gb/s NIC per GPU "
                "assumed across nodes (25 GB/s)."),
    dict(name="mi250x",
         peak_flops={"bf16": 191.5 * TB, "fp16": 191.5 * TB, "fp32": 47.85 * TB,
                     "int8": 191.5 * TB},
         memory_bytes=64 * GIB, memory_bandwidth=1638.4 * GB,
         intra_node_bandwidth=200 * GB, inter_node_bandwidth=12.5 * GB,
         aliases=("mi250x-gcd",),
         device_names=(r"MI250X",),
         source="AMD Instinct MI250X datasheet (amd.com/en/products/accelerators/instinct/"
                "mi200/mi250x.html), per OAM: FP16/BF16 383, INT8 383, FP32 matrix 95.7 "
                "TFLOPS; 128 GB HBM2e at 3.2768 TB/s; Infinity Fabric 800 GB/s aggregate over "
                "8 links. PyTorch sees each of the two GCDs as a device, so every figure here "
                "is half the OAM's (FP16/BF16 191.5, FP32 47.85, 64 GB at 1.6384 TB/s, 200 "
                "GB/s per direction). ROCm names MI250 and MI250X alike (\"MI250X/MI250\"): an "
                "MI250 (362.1 TFLOPS per OAM) gets these 5 % higher peaks. Frontier nodes: 4 "
                "x 25 GB/s Slingshot NICs for 8 GCDs = 12.5 GB/s per GCD."),
    dict(name="mi300x",
         peak_flops={"bf16": 1307.4 * TB, "fp16": 1307.4 * TB, "tf32": 653.7 * TB,
                     "fp8": 2614.9 * TB, "fp32": 163.4 * TB, "int8": 2614.9 * TB},
         memory_bytes=192 * GIB, memory_bandwidth=5300 * GB,
         intra_node_bandwidth=448 * GB, inter_node_bandwidth=50 * GB,
         aliases=(),
         device_names=(r"MI300X",),
         source="AMD Instinct MI300X datasheet (amd.com/en/products/accelerators/instinct/"
                "mi300/mi300x.html), dense (the sparse figures are twice these): FP16/BF16 "
                "1307.4, FP8 2614.9, INT8 2614.9, TF32 653.7, FP32 163.4 TFLOPS; 192 GB HBM3 "
                "at 5.3 TB/s; 7 Infinity Fabric links of 128 GB/s (bidirectional) = 448 GB/s "
                "per direction; one 400 Gb/s NIC per GPU assumed across nodes (50 GB/s)."),
    dict(name="mi325x",
         peak_flops={"bf16": 1307.4 * TB, "fp16": 1307.4 * TB, "tf32": 653.7 * TB,
                     "fp8": 2614.9 * TB, "fp32": 163.4 * TB, "int8": 2614.9 * TB},
         memory_bytes=256 * GIB, memory_bandwidth=6000 * GB,
         intra_node_bandwidth=448 * GB, inter_node_bandwidth=50 * GB,
         aliases=(),
         device_names=(r"MI325X",),
         source="AMD Instinct MI325X datasheet (amd.com/en/products/accelerators/instinct/"
                "mi300/mi325x.html), dense: the MI300X's compute (FP16/BF16 1307.4, FP8 "
                "2614.9, TF32 653.7, FP32 163.4 TFLOPS) with 256 GB HBM3E at 6 TB/s; 7 "
                "Infinity Fabric links of 128 GB/s = 448 GB/s per direction; one 400 Gb/s "
                "NIC per GPU assumed across nodes (50 GB/s)."),
    dict(name="ascend-910a",
         peak_flops={"fp16": 256 * TB, "int8": 512 * TB},
         memory_bytes=32 * GIB, memory_bandwidth=1200 * GB,
         intra_node_bandwidth=90 * GB, inter_node_bandwidth=12.5 * GB,
         default_dtype="fp16",
         unpublished={"fp32": _ASCEND_NO_FP32},
         aliases=("910a", "ascend910a", "ascend-910"),
         device_names=(r"Ascend\s?910(A|ProA|PremiumA)?\b(?![B-Z0-9])",),
         source="Huawei Ascend 910 (2019; Hot Chips 31, \"DaVinci: A Scalable Architecture "
                "for Neural Network Computing\", and the Ascend 910 launch figures): FP16 256 "
                "TFLOPS, INT8 512 TOPS (no BF16), 32 GB HBM2 (4 stacks) at 1.2 TB/s; HCCS "
                "30 GB/s per link, 3 links to the other NPUs of its group of 4 (Atlas 800 "
                "model 9000) = 90 GB/s per direction (reported); one 100GE RoCE port per NPU "
                "= 12.5 GB/s across nodes."),
    dict(name="ascend-910b1",
         peak_flops={"bf16": 353.9 * TB, "fp16": 353.9 * TB, "int8": 707.8 * TB},
         memory_bytes=64 * GIB, memory_bandwidth=1600 * GB,
         intra_node_bandwidth=196 * GB, inter_node_bandwidth=25 * GB,
         default_dtype="fp16",
         unpublished={"fp32": _ASCEND_NO_FP32},
         aliases=("910b1", "ascend910b1"),
         device_names=(r"Ascend\s?910B1\b",),
         source="Ascend 910B1, derived: CANN platform_config/Ascend910B1.ini lists 24 AI "
                "(cube) cores and 64 GiB; the 16x16x16 cube does 4096 FP16/BF16 "
                "multiply-adds per core and cycle; the cube clock of the B1 is in no source "
                "we could read, so the 910B2's 1800 MHz is used: 24 x 1.8 GHz x 8192 = 353.9 "
                "TFLOPS (INT8 twice; third-party summaries report a higher B1 peak: set "
                "yours). HBM ~1.6 TB/s, HCCS 7 links x 56 GB/s bidirectional = 196 GB/s per "
                "direction, one 200 GbE RoCE port per NPU = 25 GB/s (reported, Atlas 800T "
                "A2)."),
    dict(name="ascend-910b2",
         peak_flops={"bf16": 353.9 * TB, "fp16": 353.9 * TB, "int8": 707.8 * TB},
         memory_bytes=64 * GIB, memory_bandwidth=1600 * GB,
         intra_node_bandwidth=196 * GB, inter_node_bandwidth=25 * GB,
         default_dtype="fp16",
         unpublished={"fp32": _ASCEND_NO_FP32},
         aliases=("910b2", "ascend910b2"),
         device_names=(r"Ascend\s?910B2C?\b",),
         source="Ascend 910B2, derived from CANN platform_config/Ascend910B2.ini "
                "(ai_core_cnt=24, cube_freq=1800, cube_m/n/k_size=16, memory_size=64 GiB): "
                "24 cores x 1.8 GHz x 4096 multiply-adds x 2 = 353.9 TFLOPS FP16/BF16, INT8 "
                "twice (DtypeMKN DT_INT8=16,32,16). HBM ~1.6 TB/s, HCCS 7 links x 56 GB/s "
                "bidirectional = 196 GB/s per direction, one 200 GbE RoCE port per NPU = 25 "
                "GB/s (reported, Atlas 800T A2). 910B2C: same preset."),
    dict(name="ascend-910b3",
         peak_flops={"bf16": 294.9 * TB, "fp16": 294.9 * TB, "int8": 589.8 * TB},
         memory_bytes=64 * GIB, memory_bandwidth=1600 * GB,
         intra_node_bandwidth=196 * GB, inter_node_bandwidth=25 * GB,
         default_dtype="fp16",
         unpublished={"fp32": _ASCEND_NO_FP32},
         aliases=("910b3", "ascend910b3"),
         device_names=(r"Ascend\s?910B3\b",),
         source="Ascend 910B3, derived: 20 AI (cube) cores (CANN platform_config/"
                "Ascend910B3.ini, as the HAMi ascend-device-plugin's vNPU table lists them) "
                "at the 910B generation's 1800 MHz cube clock x 8192 FLOPs per cycle = 294.9 "
                "TFLOPS FP16/BF16, INT8 twice; 64 GiB HBM at ~1.6 TB/s, HCCS 196 GB/s per "
                "direction, 25 GB/s RoCE per NPU (reported)."),
    dict(name="ascend-910b4",
         peak_flops={"bf16": 245.8 * TB, "fp16": 245.8 * TB, "int8": 491.5 * TB},
         memory_bytes=32 * GIB, memory_bandwidth=800 * GB,
         intra_node_bandwidth=196 * GB, inter_node_bandwidth=25 * GB,
         default_dtype="fp16",
         unpublished={"fp32": _ASCEND_NO_FP32},
         aliases=("910b4", "ascend910b4"),
         device_names=(r"Ascend\s?910B4(-1)?\b",),
         source="Ascend 910B4, derived from CANN platform_config/Ascend910B4.ini "
                "(ai_core_cnt=20, cube_freq=1500, memory_size=32 GiB): 20 x 1.5 GHz x 8192 = "
                "245.8 TFLOPS FP16/BF16, INT8 twice; HBM ~0.8 TB/s (reported; the ini's "
                "ddr_rate of 32 B per core and cycle gives 0.96 TB/s), HCCS as the 64 GB "
                "parts (196 GB/s per direction, not confirmed for the B4), 25 GB/s RoCE."),
    dict(name="ascend-910b",
         peak_flops={"bf16": 320 * TB, "fp16": 320 * TB, "int8": 640 * TB},
         memory_bytes=64 * GIB, memory_bandwidth=1600 * GB,
         intra_node_bandwidth=196 * GB, inter_node_bandwidth=25 * GB,
         default_dtype="fp16",
         unpublished={"fp32": _ASCEND_NO_FP32},
         aliases=("910b", "ascend910b"),
         device_names=(r"Ascend\s?910B$",),
         source="Ascend 910B (Atlas 800T A2 class) when the SKU is not known: a profile's "
                "task types show the generation, not the chip. Huawei publishes no per-SKU "
                "datasheet we could cite; the figures are the commonly reported ones and "
                "differ between 910B1..B4 (see the ascend-910b1..b4 presets, derived from "
                "CANN's platform_config): FP16/BF16 ~320 TFLOPS, INT8 ~640 TOPS (third-party "
                "spec summaries, 2024-2025); 64 GB HBM2e per NPU (the seed guide's "
                "MS_MEMORY_STATISTIC log shows \"Device HBM memory size: 62432M\" usable); "
                "HBM bandwidth ~1.6 TB/s (reported); HCCS full mesh inside an 8-NPU node, "
                "commonly reported as 7 links x 56 GB/s bidirectional, i.e. ~196 GB/s per "
                "direction; one 200 GbE RoCE port per NPU = 25 GB/s per direction across "
                "nodes (reported; measure yours with hccl_test). The seed's Llama2-13B case "
                "(2562 tokens/s/p at MFU 55.4 %) implies ~400 TFLOP/s (see "
                "tests/test_seed_cases.py): pass your own SKU's peak via .replace()."),
)

#: Every published device by name: the Hardware fields plus ``source``, ``aliases`` and
#: ``device_names``.
HARDWARE_PRESETS: dict[str, dict[str, Any]] = {row["name"]: row for row in _ROWS}

#: Other accepted names -> preset name.
ALIASES: dict[str, str] = {alias: row["name"] for row in _ROWS for alias in row["aliases"]}

_EXTRA = ("source", "aliases", "device_names", "unpublished")

_DEVICE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(rx, re.IGNORECASE), row["name"]) for row in _ROWS for rx in row["device_names"])


def preset_fields(row: dict[str, Any]) -> dict[str, Any]:
    """The :class:`~perfkit.specs.Hardware` keywords of a preset row."""
    return {k: v for k, v in row.items() if k not in _EXTRA}


def preset_source(name: str) -> str:
    """Where the figures of preset ``name`` (or an alias) come from.

    Raises KeyError for an unknown name.
    """
    key = str(name).lower()
    return HARDWARE_PRESETS[ALIASES.get(key, key)]["source"]


def unpublished_peak(name: str, dtype: str) -> str | None:
    """Why preset ``name`` (or an alias) lists no ``dtype`` peak: the vendor publishes none
    (what was searched), or None where the preset does not say so (or is no preset)."""
    key = str(name).lower()
    row = HARDWARE_PRESETS.get(ALIASES.get(key, key))
    return None if row is None else row.get("unpublished", {}).get(str(dtype))


def preset_for_device(device_name: Any) -> str | None:
    """The preset of a device as a profile names it, or None when no preset fits.

    ``"NVIDIA H100 80GB HBM3"`` -> ``"h100"``, ``"AMD Instinct MI300X"`` -> ``"mi300x"``,
    ``"Tesla V100-SXM2-16GB"`` -> ``"v100-16gb"``, ``"Ascend910B2"`` -> ``"ascend-910b2"``;
    ``"NVIDIA A100-PCIE-40GB"`` -> None (no preset for that form factor). The rows'
    ``device_names`` patterns decide; a name that two rows match takes the first row's.
    """
    text = str(device_name or "").strip()
    if not text:
        return None
    for rx, name in _DEVICE_PATTERNS:
        if rx.search(text):
            return name
    return None
