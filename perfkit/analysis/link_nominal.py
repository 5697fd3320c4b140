"""The nominal bandwidth a transport's achieved bandwidth is held against.

Ascend's ``communication.json`` gives each operator's bytes and *transit time* per
transport, the transit time being the sum of the durations of its copy tasks (msprof's
"Transit Time"; checked on ``ascend/msinsight-pt-level1``: rank 0's
``hcom_allReduce__586_0_1`` moves 28.6 MB in 14 SDMA tasks to 7 peers whose durations sum
to its 1.817 ms). Bytes over that sum is the rate of *one* link, whichever way the tasks
overlap. Inside an HCCS full mesh (and AMD's Infinity Fabric mesh) each peer has its own
link, a ``1 / (devices per node − 1)`` share of the device's aggregate
(``intra_node_bandwidth``: 7 × 28 GB/s = 196 GB/s per direction on a 910B): the rate of
one link is held against one link's nominal. Held against the aggregate, that allreduce
read 7.9 % of nominal where its tasks, run side by side, move 107 GB/s, 55 % of the
device's 196 GB/s. Behind a switch (NVLink with NVSwitch) one transfer can use every link,
and RDMA is one port per device: their nominal is the device's figure.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NOMINAL_TRANSPORT", "LATENCY_BOUND_BYTES", "transport_nominal"]

#: Below this many bytes an operator's time is mostly its fixed cost (latency), not its
#: bytes over the link: its rate is no measure of the link (``slow_links``' ``min_bytes``).
LATENCY_BOUND_BYTES = 1e6

#: Which Hardware field is the nominal bandwidth of a transport. PCIe is not the
#: intra-node fabric (HCCS, NVLink) and has no field of its own: it gets no nominal, rather
#: than the fabric's (a PCIe copy at 14 GB/s is not "7 % of HCCS").
NOMINAL_TRANSPORT = {"HCCS": "intra_node_bandwidth", "SIO": "intra_node_bandwidth",
                     "PCIE": "pcie_bandwidth", "NVLINK": "intra_node_bandwidth",
                     "RDMA": "inter_node_bandwidth", "ROCE": "inter_node_bandwidth",
                     "IB": "inter_node_bandwidth"}


def transport_nominal(hardware: Any, transport: str) -> tuple[float, str]:
    """The nominal bandwidth (GB/s, 10^9 B/s) ``transport``'s achieved bandwidth is held
    against on ``hardware``, and what it is the bandwidth of.

    Parameters
    ----------
    hardware : perfkit.Hardware
    transport : str
        As Ascend writes it (``HCCS``, ``RDMA``, ``SIO``, ``PCIE``); upper case.

    Returns
    -------
    (float, str)
        NaN and ``""`` for a transport without a nominal. HCCS inside a full-mesh node:
        the device's ``intra_node_bandwidth`` over its ``devices_per_node − 1`` links and
        ``"one of 7 HCCS links"``; otherwise the field's value and ``"per device"``.
    """
    field = NOMINAL_TRANSPORT.get(transport)
    value = getattr(hardware, field, None) if field else None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return float("nan"), ""
    node = getattr(hardware, "topology", None)
    if transport == "HCCS" and getattr(node, "mesh", False):
        links = node.devices_per_node - 1
        return node.bandwidth_among(2) / 1e9, f"one of {links} {transport} links"
    return value / 1e9, "per device"
