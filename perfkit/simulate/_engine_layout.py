"""Where the simulated ranks sit: their (stage, data-parallel, tensor-parallel) coordinates,
the communication groups, and the links between two ranks (HCCS inside a node, RDMA between
nodes) with their bandwidth, slowed by :class:`~perfkit.simulate.faults.SlowLink`.

Ranks are laid out Megatron-style, tensor-parallel innermost, then data-parallel, then
pipeline: ``rank = stage·(dp·tp) + dp_index·tp + tp_index``; nodes hold
``hardware.devices_per_node`` consecutive ranks.
"""

from __future__ import annotations

from ..specs import Hardware, ParallelConfig
from .faults import SlowLink

__all__ = ["build_groups", "link_transport", "Links"]


def _rank_of(parallel: ParallelConfig, stage: int, dp_index: int, tp_index: int) -> int:
    return stage * parallel.dp * parallel.tp + dp_index * parallel.tp + tp_index


def _coords(parallel: ParallelConfig, rank: int) -> tuple[int, int, int]:
    stage, rest = divmod(rank, parallel.dp * parallel.tp)
    dp_index, tp_index = divmod(rest, parallel.tp)
    return stage, dp_index, tp_index


def _group_id(kind: str, index: int, ranks: list[int]) -> str:
    """An HCCL communicator name in the style torch_npu records (host IP, port, counter)."""
    return f"192.168.{ranks[0] // 8}.{10 + ranks[0] % 8}%enp189s0f0_{60000 + index}_" \
           f"{len(ranks)}_{kind}"


def build_groups(parallel: ParallelConfig) -> dict[str, dict[str, object]]:
    """Communication groups ``{group_id: {group_name, global_ranks}}`` (dp, tp, pp)."""
    groups: dict[str, dict[str, object]] = {}
    p, d, t = parallel.pp, parallel.dp, parallel.tp
    n = 0
    if d > 1:
        for s in range(p):
            for ti in range(t):
                ranks = [_rank_of(parallel, s, di, ti) for di in range(d)]
                groups[_group_id("dp", n, ranks)] = {"group_name": "dp", "global_ranks": ranks}
                n += 1
    if t > 1:
        for s in range(p):
            for di in range(d):
                ranks = [_rank_of(parallel, s, di, ti) for ti in range(t)]
                groups[_group_id("tp", n, ranks)] = {"group_name": "tp", "global_ranks": ranks}
                n += 1
    if p > 1:
        for di in range(d):
            for ti in range(t):
                ranks = [_rank_of(parallel, s, di, ti) for s in range(p)]
                groups[_group_id("pp", n, ranks)] = {"group_name": "pp", "global_ranks": ranks}
                n += 1
    return groups


def _find_group(groups: dict[str, dict[str, object]], name: str, rank: int) -> str:
    for gid, g in groups.items():
        if g["group_name"] == name and rank in g["global_ranks"]:  # type: ignore[operator]
            return gid
    raise KeyError(name)


# ----------------------------------------------------------------------------- links

def link_transport(hardware: Hardware, a: int, b: int) -> str:
    """The transport between ranks ``a`` and ``b``: LOCAL on one device, HCCS between two
    devices of one node, RDMA between nodes (``hardware.devices_per_node`` per node)."""
    if a == b:
        return "LOCAL"
    per = hardware.devices_per_node
    return "HCCS" if a // per == b // per else "RDMA"


class Links:
    """Bandwidth between two ranks (bytes/s achieved) with slow links applied."""

    def __init__(self, hardware: Hardware, comm_efficiency: float, slow: list[SlowLink]):
        self.hw = hardware
        self.eff = comm_efficiency
        self.slow = slow

    def node(self, rank: int) -> int:
        return rank // self.hw.devices_per_node

    def transport(self, a: int, b: int) -> str:
        """The transport of the link from ``a`` to ``b`` (:func:`link_transport`)."""
        return link_transport(self.hw, a, b)

    def group_transport(self, rank: int, peers: list[int]) -> str:
        """The transport that paces ``rank``'s part of a collective with ``peers``: RDMA
        when any peer sits on another node (its slowest link crosses the network), else
        HCCS."""
        kinds = {self.transport(rank, q) for q in peers if q != rank}
        return "RDMA" if "RDMA" in kinds else ("HCCS" if kinds else "LOCAL")

    def factor(self, a: int, b: int) -> float:
        f = 1.0
        for s in self.slow:
            if s.touches(a, b):
                f *= s.bandwidth_factor
        return f

    @property
    def mesh(self) -> bool:
        """Whether the node is a full mesh, one link per pair of devices
        (:attr:`perfkit.specs.Node.mesh`)."""
        return bool(self.hw.topology.mesh)

    def bandwidth(self, a: int, b: int) -> float:
        """The link from ``a`` to ``b``: inside a full-mesh node one of the device's
        links (:meth:`perfkit.specs.Node.bandwidth_among` of a pair), behind a switch the
        device's intra-node bandwidth, across nodes its inter-node one."""
        base = self.hw.topology.bandwidth_among(2) if self.node(a) == self.node(b) \
            else self.hw.inter_node_bandwidth
        return base * self.eff * self.factor(a, b)

    def _paced(self, slowest: float, ranks: list[int]) -> float:
        """``slowest`` link times the links a full mesh uses at once: a group inside one
        mesh node sends to its ``len(ranks) − 1`` peers side by side."""
        if self.mesh and len({self.node(q) for q in ranks}) == 1:
            return slowest * (len(ranks) - 1)
        return slowest

    def member_bandwidth(self, rank: int, ranks: list[int]) -> float:
        """Slowest link from ``rank`` to the other members of its group (times the links
        used at once inside a mesh node)."""
        slowest = min((self.bandwidth(rank, q) for q in ranks if q != rank),
                      default=float("inf"))
        return self._paced(slowest, ranks)

    def group_bandwidth(self, ranks: list[int]) -> float:
        """A collective runs at the pace of its slowest link (times the links used at
        once inside a mesh node)."""
        if len(ranks) < 2:
            return float("inf")
        return self._paced(min(self.bandwidth(a, b) for a in ranks for b in ranks if a != b),
                           ranks)
