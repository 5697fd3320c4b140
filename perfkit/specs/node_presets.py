"""Published nodes (servers): devices, the link inside, the NICs across, with sources.

One row per reference platform. Bandwidths are bytes/s **per direction**: a datasheet's
bidirectional NVLink / HCCS / Infinity Fabric total is halved, a NIC's line rate in Gb/s
is divided by 8. ``HARDWARE_NODES`` names the node a :class:`~perfkit.specs.Hardware`
preset gets by default (its vendor's reference server); every figure here agrees with the
device preset's ``intra_node_bandwidth`` and ``inter_node_bandwidth`` (the NIC share of
one device), which tests check.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NODE_PRESETS", "HARDWARE_NODES"]

_GB = 1e9
_GBIT = 1e9 / 8

_ROWS: tuple[dict[str, Any], ...] = (
    dict(name="dgx-a100", devices_per_node=8, intra_link="nvlink",
         intra_bandwidth=300 * _GB, nics_per_node=8, nic_bandwidth=200 * _GBIT,
         source="NVIDIA DGX A100 datasheet (nvidia.com/en-us/data-center/dgx-a100/): 8 x "
                "A100 SXM4, NVLink 3 600 GB/s bidirectional per GPU through 6 NVSwitches = "
                "300 GB/s per direction; 8 x single-port ConnectX-6 HDR 200 Gb/s InfiniBand "
                "for the compute fabric (the two storage ports not counted)."),
    dict(name="dgx-h100", devices_per_node=8, intra_link="nvlink",
         intra_bandwidth=450 * _GB, nics_per_node=8, nic_bandwidth=400 * _GBIT,
         source="NVIDIA DGX H100 datasheet (nvidia.com/en-us/data-center/dgx-h100/): 8 x "
                "H100 SXM5, NVLink 4 900 GB/s bidirectional per GPU (4 NVSwitches) = 450 "
                "GB/s per direction; 8 x ConnectX-7 400 Gb/s NDR InfiniBand/Ethernet (in 4 "
                "OSFP ports) for the compute fabric."),
    dict(name="dgx-h200", devices_per_node=8, intra_link="nvlink",
         intra_bandwidth=450 * _GB, nics_per_node=8, nic_bandwidth=400 * _GBIT,
         source="NVIDIA DGX H200 datasheet (nvidia.com/en-us/data-center/dgx-h200/): 8 x "
                "H200 SXM, NVLink 4 900 GB/s per GPU = 450 GB/s per direction; 8 x "
                "ConnectX-7 400 Gb/s (as DGX H100)."),
    dict(name="dgx-b200", devices_per_node=8, intra_link="nvlink",
         intra_bandwidth=900 * _GB, nics_per_node=8, nic_bandwidth=400 * _GBIT,
         source="NVIDIA DGX B200 datasheet (nvidia.com/en-us/data-center/dgx-b200/): 8 x "
                "B200, NVLink 5 1.8 TB/s bidirectional per GPU (2 NVSwitch chips) = 900 "
                "GB/s per direction; 8 x single-port ConnectX-7 VPI 400 Gb/s for the "
                "compute fabric (the BlueField-3 DPUs serve storage)."),
    dict(name="atlas-800t-a2", devices_per_node=8, intra_link="hccs",
         intra_bandwidth=196 * _GB, nics_per_node=8, nic_bandwidth=200 * _GBIT,
         source="Huawei Atlas 800T A2 training server (Ascend 910B): 8 NPUs in an HCCS full "
                "mesh, 7 links x 56 GB/s bidirectional per NPU = 392 GB/s, 196 GB/s per "
                "direction (the 910B figures commonly reported, see the ascend-910b preset); "
                "one integrated 200 GE RoCE port per NPU, 8 per server (Atlas 800T A2 "
                "technical white paper, network section)."),
    dict(name="atlas-900-a2-pod", devices_per_node=8, intra_link="hccs",
         intra_bandwidth=196 * _GB, nics_per_node=8, nic_bandwidth=200 * _GBIT,
         source="Huawei Atlas 900 A2 PoD: a cluster of Atlas 800T A2-class nodes (8 x 910B, "
                "HCCS mesh 7 x 56 GB/s per NPU) joined by a non-blocking 200 GE RoCE "
                "parameter-plane network, one 200 Gb/s port per NPU (Atlas 900 A2 PoD "
                "product page; MindCluster's affinity guide schedules whole 8-NPU nodes)."),
    dict(name="mi300x-platform", devices_per_node=8, intra_link="infinity-fabric",
         intra_bandwidth=448 * _GB, nics_per_node=8, nic_bandwidth=400 * _GBIT,
         source="AMD Instinct MI300X Platform datasheet (amd.com/en/products/accelerators/"
                "instinct/mi300/platform.html): 8 x MI300X OAM on a universal baseboard, "
                "fully connected by 7 Infinity Fabric links of 128 GB/s bidirectional per "
                "GPU = 896 GB/s, 448 GB/s per direction; NICs belong to the server: 8 x 400 "
                "Gb/s per node (one per GPU) as in Microsoft Azure ND MI300X v5 (8 x "
                "ConnectX-7 400 Gb/s InfiniBand) and AMD's reference cluster designs."),
)

#: Every published node by name: :class:`~perfkit.specs.Node` fields plus ``source``.
NODE_PRESETS: dict[str, dict[str, Any]] = {row["name"]: row for row in _ROWS}

#: The node each :class:`~perfkit.specs.Hardware` preset attaches to by default.
HARDWARE_NODES: dict[str, str] = {
    "a100": "dgx-a100", "a100-40gb": "dgx-a100", "h100": "dgx-h100", "h200": "dgx-h200",
    "b200": "dgx-b200", "mi300x": "mi300x-platform", "ascend-910b": "atlas-800t-a2",
    "ascend-910b1": "atlas-800t-a2", "ascend-910b2": "atlas-800t-a2",
    "ascend-910b3": "atlas-800t-a2", "ascend-910b4": "atlas-800t-a2",
}
