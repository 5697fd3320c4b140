"""Node: the server a device sits in — devices, the link among them, the NICs out.

A :class:`~perfkit.specs.Hardware` describes one device; a :class:`Node` the topology the
step model prices collectives on (:mod:`perfkit.calc.topology`): how many devices share
a node, the per-device bandwidth of the intra-node link (NVLink, HCCS, Infinity Fabric)
and the node's NICs across nodes. Published nodes, each with its source, are in
:mod:`~perfkit.specs.node_presets`; ``Hardware.preset("h100").topology`` is a DGX H100.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, check_positive, check_positive_int
from .node_presets import NODE_PRESETS

__all__ = ["Node", "INTRA_LINKS", "MESH_LINKS"]

#: Kinds of intra-node link.
INTRA_LINKS = ("nvlink", "hccs", "infinity-fabric", "pcie", "unknown")
#: Intra-node links that are a full mesh of point-to-point links, one per pair of devices
#: (an Ascend 910B server's HCCS: 7 links of 28 GB/s per direction per NPU; AMD MI300X's
#: Infinity Fabric: 7 of 64 GB/s), rather than ports into a switch (NVLink with NVSwitch).
MESH_LINKS = ("hccs", "infinity-fabric")


@dataclass(frozen=True)
class Node:
    """One server: devices, intra-node link, NICs (bandwidths in bytes/s per direction).

    Parameters
    ----------
    name : str
    devices_per_node : int
    intra_link : {"nvlink", "hccs", "infinity-fabric", "pcie", "unknown"}
        ``"hccs"`` and ``"infinity-fabric"`` are full meshes (:data:`MESH_LINKS`): a
        device reaches each peer over its own link, ``intra_bandwidth / (devices − 1)``
        (:meth:`bandwidth_among`).
    intra_bandwidth : float
        Per-device bandwidth to the other devices of the node, all its links together
        (NVLink 900 GB/s bidirectional on an H100 = 450e9).
    nics_per_node : int
        NICs of the compute fabric (storage NICs not counted).
    nic_bandwidth : float
        Per-NIC bandwidth (a 400 Gb/s ConnectX-7 = 50e9).
    source : str
        Where the figures come from.
    """

    name: str
    devices_per_node: int
    intra_link: str
    intra_bandwidth: float
    nics_per_node: int
    nic_bandwidth: float
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("devices_per_node", "nics_per_node"):
            check_positive_int(name, getattr(self, name))
        for name in ("intra_bandwidth", "nic_bandwidth"):
            check_positive(name, getattr(self, name))
        if self.intra_link not in INTRA_LINKS:
            raise InvalidArgumentError("intra_link", f"must be one of {', '.join(INTRA_LINKS)}",
                                       self.intra_link)

    @property
    def nic_bandwidth_per_device(self) -> float:
        """The node's NIC bandwidth shared by its devices: ``nics · nic_bw / devices``
        (every device of the node communicates at once, as the groups of a layout do)."""
        return self.nics_per_node * self.nic_bandwidth / self.devices_per_node

    @property
    def mesh(self) -> bool:
        """Whether the intra-node link is a full mesh of point-to-point links
        (:data:`MESH_LINKS`)."""
        return self.intra_link in MESH_LINKS and self.devices_per_node > 2

    def bandwidth_among(self, ranks: Any) -> Any:
        """A device's intra-node bandwidth to the other ``ranks − 1`` members of its group
        inside the node (bytes/s, per direction; scalar or array).

        Behind a switch every device reaches any peer at its full ``intra_bandwidth``. In a
        full mesh (:attr:`mesh`) each peer is one link of ``intra_bandwidth / (D − 1)``:
        a group of ``r`` ranks in the node has ``r − 1`` of them, ``intra_bandwidth ·
        (r − 1) / (D − 1)``, as HCCL's mesh algorithm inside a 910B server uses them (a
        group of 8 gets the 196 GB/s; of 2, one 28 GB/s link; a point-to-point send, one
        link). ``ranks`` below 2 gets ``intra_bandwidth`` (no traffic inside the node).
        """
        if not self.mesh:
            return self.intra_bandwidth * np.ones_like(np.asarray(ranks, dtype=float)) \
                if np.ndim(ranks) else self.intra_bandwidth
        r = np.clip(np.asarray(ranks, dtype=float), 1.0, float(self.devices_per_node))
        links = np.where(r >= 2, r - 1.0, self.devices_per_node - 1.0)
        out = self.intra_bandwidth * links / (self.devices_per_node - 1)
        return out if np.ndim(ranks) else float(out)

    @property
    def node_nic_bandwidth(self) -> float:
        """All the node's NICs together, ``nics · nic_bw``."""
        return self.nics_per_node * self.nic_bandwidth

    def replace(self, **changes: Any) -> Node:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def presets(cls) -> list[str]:
        """Names accepted by :meth:`preset`."""
        return sorted(NODE_PRESETS)

    @classmethod
    def preset(cls, name: str) -> Node:
        """A published node, e.g. ``Node.preset("dgx-h100")`` (rows of
        :data:`~perfkit.specs.node_presets.NODE_PRESETS`, each with its ``source``)."""
        key = str(name).lower()
        if key not in NODE_PRESETS:
            raise InvalidArgumentError("name", f"unknown node preset; known: "
                                       f"{', '.join(cls.presets())}", name)
        return cls(**NODE_PRESETS[key])

    @classmethod
    def from_hardware(cls, hardware: Any) -> Node:
        """The node a :class:`Hardware` implies when none is attached: its
        ``devices_per_node``, ``intra_node_bandwidth`` and one NIC per device of
        ``inter_node_bandwidth`` (the convention of the hardware presets)."""
        return cls(name=f"{hardware.name} node", devices_per_node=hardware.devices_per_node,
                   intra_link="unknown", intra_bandwidth=hardware.intra_node_bandwidth,
                   nics_per_node=hardware.devices_per_node,
                   nic_bandwidth=hardware.inter_node_bandwidth,
                   source="derived from the Hardware's own link fields")
