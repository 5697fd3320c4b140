"""Published accelerators: one row per device, with the source of its figures.

Each row holds the :class:`~perfkit.specs.Hardware` fields (``name``, ``peak_flops`` per
dtype — dense, never sparse —, ``memory_bytes``, ``memory_bandwidth``,
``intra_node_bandwidth`` and ``inter_node_bandwidth`` per device and direction,
``devices_per_node``, ``default_dtype``), plus:

* ``source`` — where every figure comes from (datasheet and column, or why a figure is a
  reported one), shown to whoever asks where a number came from;
* ``aliases`` — other names :meth:`Hardware.preset <perfkit.specs.Hardware.preset>` accepts.

A new device is one row here. Bandwidths are per direction: a datasheet's bidirectional
NVLink or HCCS total is halved.
"""

from __future__ import annotations

from typing import Any

__all__ = ["HARDWARE_PRESETS", "ALIASES", "GB", "TB", "GIB", "preset_fields", "preset_source"]

GB = 1e9
TB = 1e12
GIB = 2**30

_ROWS: tuple[dict[str, Any], ...] = (
    dict(name="a100",
         peak_flops={"bf16": 312 * TB, "fp16": 312 * TB, "tf32": 156 * TB,
                     "fp32": 19.5 * TB, "int8": 624 * TB},
         memory_bytes=80 * GIB, memory_bandwidth=2039 * GB,
         intra_node_bandwidth=300 * GB, inter_node_bandwidth=25 * GB,
         aliases=("a100-sxm", "a100-80gb"),
         source="NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB column), dense (no "
                "sparsity): FP64 9.7, FP64 Tensor 19.5, FP32 19.5, TF32 156, BF16/FP16 312 "
                "TFLOPS, INT8 624 TOPS; 80GB HBM2e at 2,039 GB/s; NVLink 3 600 GB/s total = "
                "300 GB/s per direction. DGX A100 user guide: 8 x 200 Gb/s HDR InfiniBand, "
                "one per GPU = 25 GB/s per direction."),
    dict(name="h100",
         peak_flops={"bf16": 989.5 * TB, "fp16": 989.5 * TB, "tf32": 494.5 * TB,
                     "fp8": 1979 * TB, "fp32": 67 * TB, "int8": 1979 * TB},
         memory_bytes=80 * GIB, memory_bandwidth=3350 * GB,
         intra_node_bandwidth=450 * GB, inter_node_bandwidth=50 * GB,
         aliases=("h100-sxm",),
         source="NVIDIA H100 Tensor Core GPU datasheet (SXM5 column; the datasheet prints "
                "sparse figures, dense = half): BF16/FP16 989.5, TF32 494.5, FP8 1979, INT8 "
                "1979, FP32 67 TFLOPS; 80GB HBM3 at 3.35 TB/s; NVLink 4 900 GB/s total = "
                "450 GB/s per direction. DGX H100: 8 x 400 Gb/s NDR ConnectX-7, one per GPU "
                "= 50 GB/s per direction."),
    dict(name="h200",
         peak_flops={"bf16": 989.5 * TB, "fp16": 989.5 * TB, "tf32": 494.5 * TB,
                     "fp8": 1979 * TB, "fp32": 67 * TB, "int8": 1979 * TB},
         memory_bytes=141 * GB, memory_bandwidth=4800 * GB,
         intra_node_bandwidth=450 * GB, inter_node_bandwidth=50 * GB,
         aliases=("h200-sxm",),
         source="NVIDIA H200 Tensor Core GPU datasheet (SXM column): same Hopper compute as "
                "H100 SXM (dense BF16/FP16 989.5, TF32 494.5, FP8 1979 TFLOPS), 141 GB HBM3e "
                "at 4.8 TB/s, NVLink 900 GB/s total; HGX H200 nodes pair each GPU with a "
                "400 Gb/s NDR NIC = 50 GB/s per direction."),
    dict(name="ascend-910b",
         peak_flops={"bf16": 320 * TB, "fp16": 320 * TB, "int8": 640 * TB},
         memory_bytes=64 * GIB, memory_bandwidth=1600 * GB,
         intra_node_bandwidth=196 * GB, inter_node_bandwidth=25 * GB,
         default_dtype="fp16",
         aliases=("910b", "ascend910b"),
         source="Ascend 910B (Atlas 800T A2 class). Huawei publishes no per-SKU datasheet we "
                "could cite; the figures are the commonly reported ones and differ between "
                "910B1..B4: FP16/BF16 ~320 TFLOPS, INT8 ~640 TOPS (third-party spec "
                "summaries, 2024-2025); 64 GB HBM2e per NPU (the seed guide's "
                "MS_MEMORY_STATISTIC log shows \"Device HBM memory size: 62432M\" usable); "
                "HBM bandwidth ~1.6 TB/s (reported); HCCS full mesh inside an 8-NPU node, "
                "commonly reported as 7 links x 56 GB/s bidirectional, i.e. ~196 GB/s per "
                "direction; one 200 GbE RoCE port per NPU = 25 GB/s per direction across "
                "nodes (reported; measure yours with hccl_test). The seed's Llama2-13B case "
                "(2562 tokens/s/p at MFU 55.4 %) implies ~400 TFLOP/s (see "
                "tests/test_seed_cases.py): pass your own SKU's peak via .replace()."),
)

#: Every published device by name: the Hardware fields plus ``source`` and ``aliases``.
HARDWARE_PRESETS: dict[str, dict[str, Any]] = {row["name"]: row for row in _ROWS}

#: Other accepted names -> preset name.
ALIASES: dict[str, str] = {alias: row["name"] for row in _ROWS for alias in row["aliases"]}

_EXTRA = ("source", "aliases")


def preset_fields(row: dict[str, Any]) -> dict[str, Any]:
    """The :class:`~perfkit.specs.Hardware` keywords of a preset row."""
    return {k: v for k, v in row.items() if k not in _EXTRA}


def preset_source(name: str) -> str:
    """Where the figures of preset ``name`` (or an alias) come from.

    Raises KeyError for an unknown name.
    """
    key = str(name).lower()
    return HARDWARE_PRESETS[ALIASES.get(key, key)]["source"]
