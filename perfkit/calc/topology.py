"""Rank placement and collectives priced at their shape on a node topology.

Where a group's ranks sit
-------------------------
Ranks are numbered along a placement order, innermost first — by default Megatron-LM's
``tp-cp-ep-dp-pp`` (``RankGenerator`` in ``megatron/core/parallel_state.py``): tensor
parallel ranks are consecutive, then context, expert, data and pipeline parallel. A
dimension ``d`` of size ``n_d`` whose inner dimensions multiply to ``P_d`` (its stride)
keeps ``min(n_d, max(1, D / P_d))`` distinct coordinates inside a node of ``D`` devices
(sizes and ``D`` powers of two, as every layout a framework accepts in practice; other
sizes are rounded down). A group over a set of dimensions holds the product of those in
a node (``r``, ranks per node) and spans ``N = ⌈n / r⌉`` nodes (:func:`group_shape`).

What a collective costs at that shape
-------------------------------------
Time of one operation on a message of ``M`` bytes (the full, gathered size), with
``B_in`` the per-device intra-node bandwidth and ``B_nic`` a device's share of the
node's NICs (``nics · nic_bw / D``: every device of a node communicates at once, as all
the groups of a layout do), both already times their achieved efficiency:

* inside one node (``N = 1``), ring: all-reduce ``2(r−1)/r · M / B_in``, all-gather and
  reduce-scatter ``(r−1)/r · M / B_in``, all-to-all ``(r−1)/r · M / B_in``;
* one rank per node (``r = 1``), ring over the NICs: the same with ``N`` and ``B_nic``;
* across nodes with ``r > 1`` ranks in each, hierarchically (NCCL's tree/NVLS-SHARP and
  HCCL's hierarchical algorithms, Megatron/MindSpore's hierarchical all-reduce):
  reduce-scatter inside the node, the inter-node collective on each rank's ``M/r``
  shard over all the node's NICs, all-gather inside. All-reduce
  ``2(r−1)/r · M/B_in + 2(N−1)/N · (M/r)/B_nic``; reduce-scatter and all-gather
  ``(r−1)/r · M/B_in + (N−1)/N · (M/r)/B_nic``; all-to-all sends ``(r−1)/n · M`` inside
  and ``(n−r)/n · M`` across at once: ``max((r−1)/n · M/B_in, (n−r)/n · M/B_nic)``;
* point-to-point (pipeline, the context-parallel ring): ``M / B`` on the link it crosses.

In a full-mesh node (an Ascend 910B server's HCCS, MI300X's Infinity Fabric) ``B_in`` is
the bandwidth to the group's own peers, ``r − 1`` of the device's ``D − 1`` links
(:meth:`perfkit.specs.Node.bandwidth_among`; HCCL's mesh algorithm sends to all of them at
once): a group of 8 gets the device's 196 GB/s, a pair one 28 GB/s link.

Each tier a collective uses (inside the node, across nodes) adds ``latency`` once.
These are the nccl-tests bus-bandwidth conventions
(https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md): a collective's
bus bandwidth ``busbw = algbw · f`` with ``f = 2(n−1)/n`` for all-reduce and ``(n−1)/n``
for all-gather, reduce-scatter and all-to-all (:func:`bus_factor`), so a ring inside a
node runs at ``busbw = B_in``. Example: a tensor-parallel group of 16 on two DGX H100
(``B_in`` 450 GB/s, 8 × 400 Gb/s NICs, ``B_nic`` 50 GB/s) all-reduces ``M`` in
``1.75·M/450e9 + 0.125·M/50e9`` = ``6.39e-12·M`` s, where pricing every byte at one
device's inter-node share (``1.875·M/50e9``) takes ``3.75e-11·M``: 5.9 times longer.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from ..specs import ParallelConfig

__all__ = ["PLACEMENT_ORDER", "COLLECTIVES", "bus_factor", "parse_order", "group_shape",
           "collective_seconds", "layout_group", "group_bandwidth",
           "GROUP_COLLECTIVE", "ALGORITHMS", "layout_groups", "effective_bandwidth"]

#: How a collective across nodes is priced: ``"hierarchical"`` (module docstring) or
#: ``"flat"``: one ring over all ``n`` ranks paced by its slowest link, every byte at a
#: device's NIC share (``f·M/B_nic``), what a profile whose node-spanning collectives
#: moved all their bytes over the network shows (:func:`perfkit.plan.calibrate`).
ALGORITHMS = ("hierarchical", "flat")

#: The collective each group's traffic mostly is (what :func:`group_bandwidth` assumes).
GROUP_COLLECTIVE = {"tp": "all-gather", "cp": "all-gather", "dp": "all-reduce",
                    "ep": "all-to-all", "pp": "p2p"}

#: Default rank placement, innermost first (Megatron-LM's ``order="tp-cp-ep-dp-pp"``).
PLACEMENT_ORDER = ("tp", "cp", "ep", "dp", "pp")
#: Collectives :func:`collective_seconds` prices.
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "p2p")


def bus_factor(collective: str, n: int | float) -> float:
    """nccl-tests' ``busbw / algbw``: ``2(n−1)/n`` (all-reduce), ``(n−1)/n`` (all-gather,
    reduce-scatter, all-to-all), 1 (point-to-point); NVIDIA nccl-tests
    ``doc/PERFORMANCE.md``."""
    if collective not in COLLECTIVES:
        raise InvalidArgumentError("collective", f"must be one of {', '.join(COLLECTIVES)}",
                                   collective)
    if collective == "p2p":
        return 1.0
    ring = (n - 1) / n
    return 2.0 * ring if collective == "all-reduce" else ring


def parse_order(order: str | tuple[str, ...] | None) -> tuple[str, ...]:
    """A placement order as a tuple of the five dimensions, innermost first
    (``"tp-cp-ep-dp-pp"`` or a tuple); None: :data:`PLACEMENT_ORDER`."""
    if order is None:
        return PLACEMENT_ORDER
    dims = tuple(order.split("-")) if isinstance(order, str) else tuple(order)
    if sorted(dims) != sorted(PLACEMENT_ORDER):
        raise InvalidArgumentError("rank_order", "must name tp, cp, ep, dp and pp once each, "
                                   "innermost first (e.g. 'tp-cp-ep-dp-pp')", order)
    return dims


def group_shape(sizes: dict[str, np.ndarray | int], dims: tuple[str, ...],
                devices_per_node: int, order: tuple[str, ...] = PLACEMENT_ORDER
                ) -> tuple[np.ndarray, np.ndarray]:
    """Ranks per node ``r`` and nodes ``N`` of the group over ``dims`` (module docstring).

    ``sizes`` gives every dimension of ``order`` (scalars or arrays, one per layout); the
    group has ``n = Π_{d ∈ dims} n_d`` ranks.
    """
    stride = np.ones(1)
    per_node = np.ones(1)
    count = np.ones(1)
    node = float(devices_per_node)
    for d in order:
        n_d = np.asarray(sizes[d], dtype=float)
        if d in dims:
            inside = np.clip(np.floor(node / stride), 1.0, n_d)
            per_node = per_node * inside
            count = count * n_d
        stride = stride * n_d
    return per_node, np.ceil(count / per_node)


def collective_seconds(collective: str, message_bytes: np.ndarray | float,
                       n: np.ndarray | float, per_node: np.ndarray | float,
                       intra_bw: np.ndarray | float, nic_bw: np.ndarray | float,
                       latency: float = 0.0, algorithm: str = "hierarchical") -> np.ndarray:
    """Seconds of one ``collective`` of ``message_bytes`` over ``n`` ranks, ``per_node`` of
    them in each node (module docstring); bandwidths already times their efficiency.

    0 where ``n <= 1``. For ``"p2p"``, ``per_node == n`` means the two ends share a node.
    ``algorithm="flat"`` prices a node-spanning collective as one ring at the NIC share
    (:data:`ALGORITHMS`).
    """
    if algorithm not in ALGORITHMS:
        raise InvalidArgumentError("algorithm", f"must be one of {', '.join(ALGORITHMS)}",
                                   algorithm)
    if collective not in COLLECTIVES:
        raise InvalidArgumentError("collective", f"must be one of {', '.join(COLLECTIVES)}",
                                   collective)
    m = np.asarray(message_bytes, dtype=float)
    n = np.asarray(n, dtype=float)
    r = np.minimum(np.asarray(per_node, dtype=float), n)
    nodes = np.ceil(n / np.maximum(r, 1.0))
    b_in, b_nic = np.asarray(intra_bw, dtype=float), np.asarray(nic_bw, dtype=float)
    active = n > 1
    if collective == "p2p":
        t = m / np.where(nodes > 1, b_nic, b_in) + latency
        return np.where(active, t, 0.0)
    if collective == "all-to-all" and algorithm == "flat":
        t = (n - 1) / n * m / np.where(nodes > 1, b_nic, b_in) + latency
        return np.where(active, t, 0.0)
    if collective == "all-to-all":
        inside = (r - 1) / n * m / b_in
        across = (n - r) / n * m / b_nic
        t = np.maximum(inside, across) + latency
        return np.where(active, t, 0.0)
    f = 2.0 if collective == "all-reduce" else 1.0
    if algorithm == "flat":
        ring = f * (n - 1) / np.maximum(n, 1.0) * m
        t = np.where(nodes > 1, ring / b_nic, ring / b_in) + latency
        return np.where(active, t, 0.0)
    r_ring = np.where(r > 1, (r - 1) / np.maximum(r, 1.0), 0.0)
    n_ring = np.where(nodes > 1, (nodes - 1) / nodes, 0.0)
    inside = f * r_ring * m / b_in + np.where(r > 1, latency, 0.0)
    across = f * n_ring * (m / np.maximum(r, 1.0)) / b_nic + np.where(nodes > 1, latency, 0.0)
    return np.where(active, inside + across, 0.0)


def layout_group(parallel: ParallelConfig, group: str, devices_per_node: int,
                 order: str | tuple[str, ...] | None = None) -> tuple[float, float]:
    """``(n, r)`` of one group of a layout: its ranks and those in one node.

    ``group``: ``"tp"``, ``"cp"``, ``"dp"`` (the ``dp·cp`` ranks that reduce the dense
    gradients), ``"edp"`` (the expert data-parallel ranks), ``"ep"`` (on Megatron's
    expert grid ``expert_tp × ep × expert_dp``) or ``"pp"`` (``n = 2``: a message's two
    ends, ``stride`` ranks apart — the product of the dimensions inside ``pp`` —, in one
    node (``r = 2``) when ``2·stride <= D``, as the first and last stages' neighbours are,
    else ``r = 1``; the first and last stages are the ones :func:`perfkit.calc.timing.
    step_times` times).
    ``order`` defaults to ``parallel.rank_order``.
    """
    p = parallel
    dims_order = parse_order(order if order is not None else p.rank_order)
    dense = {"tp": p.tp, "cp": p.cp, "ep": 1, "dp": p.dp, "pp": p.pp}
    expert = {"tp": p.expert_tp_size, "cp": 1, "ep": p.ep, "dp": p.expert_dp, "pp": p.pp}
    sizes, dims = {"tp": (dense, ("tp",)), "cp": (dense, ("cp",)), "dp": (dense, ("cp", "dp")),
                   "edp": (expert, ("dp",)), "ep": (expert, ("ep",)),
                   "pp": (dense, ("pp",))}[group]
    r, _ = group_shape(sizes, dims, devices_per_node, dims_order)
    n = float(np.prod([sizes[d] for d in dims]))
    if group == "pp":
        stride = float(np.prod([dense[d] for d in dims_order[:dims_order.index("pp")]]))
        return 2.0, (1.0 if 2 * stride > devices_per_node else 2.0)
    return n, float(r[0])


def group_bandwidth(collective: str, n: float, per_node: float, intra_bw: float,
                    nic_bw: float, algorithm: str = "hierarchical") -> float:
    """The bandwidth a group's ring volume moves at under this model: ``f·M / t(M)`` with
    ``f`` the :func:`bus_factor` (``1/t(1)`` for all-to-all and point-to-point sends of
    ``(n−1)/n·M`` and ``M``) and ``t`` :func:`collective_seconds` without latency. Inside a
    node it is ``intra_bw``; one rank per node, ``nic_bw``; hierarchical, in between.
    Calibration divides a measured group's achieved bandwidth by it."""
    if n <= 1:
        return float(intra_bw)
    t = float(collective_seconds(collective, 1.0, n, per_node, intra_bw, nic_bw,
                                 algorithm=algorithm))
    volume = bus_factor(collective, n)
    return volume / t


def layout_groups(cols: dict[str, np.ndarray], devices_per_node: int,
                  order: tuple[str, ...] = PLACEMENT_ORDER
                  ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """:func:`layout_group` for many layouts at once: ``{group: (n, r)}`` arrays for
    ``tp``, ``cp``, ``ep``, ``dp``, ``edp`` and ``pp``, from columns ``dp, tp, pp, cp, ep,
    expert_tp`` (``expert_tp`` already resolved to ``tp`` where not given)."""
    c = {k: np.asarray(cols[k], dtype=float) for k in ("dp", "tp", "pp", "cp", "ep",
                                                        "expert_tp")}
    one = np.ones_like(c["tp"])
    dense = {"tp": c["tp"], "cp": c["cp"], "ep": one, "dp": c["dp"], "pp": c["pp"]}
    edp = c["tp"] * c["cp"] * c["dp"] / np.maximum(c["ep"] * c["expert_tp"], 1)
    expert = {"tp": c["expert_tp"], "cp": one, "ep": c["ep"], "dp": edp, "pp": c["pp"]}
    shapes = {"tp": (dense, ("tp",)), "cp": (dense, ("cp",)), "ep": (expert, ("ep",)),
              "dp": (dense, ("cp", "dp")), "edp": (expert, ("dp",))}
    out = {}
    for name, (sizes, dims) in shapes.items():
        per_node, _ = group_shape(sizes, dims, devices_per_node, order)
        n = np.ones_like(c["tp"])
        for d in dims:
            n = n * sizes[d]
        out[name] = (n, per_node * one)
    stride = np.ones_like(c["tp"])
    for d in order[:order.index("pp")]:
        stride = stride * dense[d]
    out["pp"] = (2.0 * one, np.where(2 * stride > devices_per_node, 1.0, 2.0))
    return out


def effective_bandwidth(collective: str, n: np.ndarray, per_node: np.ndarray,
                        intra_bw: float, nic_bw: float,
                        algorithm: str = "hierarchical") -> np.ndarray:
    """:func:`group_bandwidth` for arrays of groups (``intra_bw`` where ``n <= 1``)."""
    n = np.asarray(n, dtype=float)
    t = collective_seconds(collective, 1.0, n, per_node, intra_bw, nic_bw,
                           algorithm=algorithm)
    volume = np.where(n > 1, 2.0 * (n - 1) / np.maximum(n, 1.0), 0.0) \
        if collective == "all-reduce" else np.where(n > 1, (n - 1) / np.maximum(n, 1.0), 0.0)
    if collective == "p2p":
        volume = np.ones_like(n)
    return np.where(n > 1, volume / np.where(t > 0, t, 1.0), intra_bw)
