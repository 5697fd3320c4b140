"""Topology: node presets, rank placement and collectives priced at their shape.

Expected values are written out from the formulas of nccl-tests' PERFORMANCE.md and the
DGX H100 datasheet (8 x H100, NVLink 450 GB/s per direction, 8 x 400 Gb/s NICs), not read
back from the code.
"""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit.calc.topology import (
    bus_factor,
    collective_seconds,
    group_bandwidth,
    group_shape,
    layout_group,
)
from perfkit.errors import InvalidArgumentError, ParallelConfigError
from perfkit.specs import Node
from perfkit.specs.hardware_presets import HARDWARE_PRESETS
from perfkit.specs.node_presets import HARDWARE_NODES, NODE_PRESETS

M = 1e9  # one message, bytes


def test_bus_factors_are_the_nccl_tests_conventions():
    assert bus_factor("all-reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("all-gather", 8) == pytest.approx(7 / 8)
    assert bus_factor("reduce-scatter", 16) == pytest.approx(15 / 16)
    assert bus_factor("all-to-all", 4) == pytest.approx(3 / 4)
    assert bus_factor("p2p", 2) == 1.0
    with pytest.raises(InvalidArgumentError):
        bus_factor("broadcast", 8)


def test_every_node_preset_agrees_with_its_device_preset():
    for hw_name, node_name in HARDWARE_NODES.items():
        row, node = HARDWARE_PRESETS[hw_name], NODE_PRESETS[node_name]
        assert node["source"]
        assert node["intra_bandwidth"] == row["intra_node_bandwidth"]
        per_device = node["nics_per_node"] * node["nic_bandwidth"] / node["devices_per_node"]
        assert per_device == pytest.approx(row["inter_node_bandwidth"])


def test_dgx_h100_figures_from_the_datasheet():
    node = pk.Hardware.preset("h100").topology
    assert node.name == "dgx-h100" and node.devices_per_node == 8
    assert node.intra_bandwidth == 900e9 / 2  # NVLink 4, 900 GB/s both ways
    assert node.nics_per_node == 8 and node.nic_bandwidth == 400e9 / 8  # ConnectX-7
    assert Node.preset("atlas-800t-a2").intra_bandwidth == 7 * 56e9 / 2  # HCCS 7 x 56
    assert Node.preset("dgx-a100").nic_bandwidth == 200e9 / 8


def test_a_hardware_without_a_node_derives_one_and_replace_drops_a_stale_node():
    v100 = pk.Hardware.preset("v100")  # no node preset: one NIC per device
    assert v100.node is None and v100.topology.nic_bandwidth_per_device == 6.25e9
    h100 = pk.Hardware.preset("h100")
    slower = h100.replace(inter_node_bandwidth=25e9)
    assert slower.node is None and slower.topology.nic_bandwidth_per_device == 25e9
    assert h100.replace(name="mine").node == h100.node
    with pytest.raises(InvalidArgumentError):
        h100.replace(node="dgx")


def test_tp_16_over_two_dgx_h100_is_priced_hierarchically():
    per_node, nodes = group_shape({"tp": 16, "cp": 1, "ep": 1, "dp": 1, "pp": 1}, ("tp",), 8)
    assert (per_node[0], nodes[0]) == (8, 2)
    t = float(collective_seconds("all-reduce", M, 16, 8, 450e9, 50e9))
    # reduce-scatter + all-gather inside (2·7/8·M over NVLink), all-reduce across two
    # nodes of each rank's M/8 shard over its NIC share (2·1/2·M/8)
    assert t == pytest.approx(2 * 7 / 8 * M / 450e9 + 2 * 1 / 2 * (M / 8) / 50e9)
    old = 2 * 15 / 16 * M / 50e9  # every byte at one device's inter-node share
    assert 5.5 < old / t < 6.5
    flat = float(collective_seconds("all-reduce", M, 16, 8, 450e9, 50e9, algorithm="flat"))
    assert flat == pytest.approx(old)


def test_collectives_inside_one_node_and_one_rank_per_node_are_rings():
    assert float(collective_seconds("all-gather", M, 8, 8, 450e9, 50e9)) == \
        pytest.approx(7 / 8 * M / 450e9)
    assert float(collective_seconds("reduce-scatter", M, 4, 1, 450e9, 50e9)) == \
        pytest.approx(3 / 4 * M / 50e9)
    # all-to-all over 16 ranks, 8 per node: 7/16 of M inside, 8/16 across, at once
    assert float(collective_seconds("all-to-all", M, 16, 8, 450e9, 50e9)) == \
        pytest.approx(max(7 / 16 * M / 450e9, 8 / 16 * M / 50e9))
    assert float(collective_seconds("p2p", M, 2, 1, 450e9, 50e9, latency=1e-5)) == \
        pytest.approx(M / 50e9 + 1e-5)
    assert float(collective_seconds("all-reduce", M, 1, 1, 450e9, 50e9)) == 0.0
    # the bandwidth a hierarchical group moves its ring volume at lies between the tiers
    bw = group_bandwidth("all-reduce", 16, 8, 450e9, 50e9)
    assert 50e9 < bw < 450e9
    assert bw == pytest.approx(2 * 15 / 16 / (2 * 7 / 8 / 450e9 + 2 * 1 / 2 / 8 / 50e9))


def test_placement_follows_the_rank_order():
    par = pk.ParallelConfig(dp=16, tp=2, pp=2, num_micro_batches=2)
    assert layout_group(par, "tp", 8) == (2, 2)  # innermost: both on one node
    assert layout_group(par, "dp", 8) == (16, 4)  # stride 2: 4 of 16 per node
    assert layout_group(par, "pp", 8)[1] == 1.0  # stride 32: stages on other nodes
    outer_tp = par.replace(rank_order="dp-tp-cp-ep-pp")
    assert layout_group(outer_tp, "dp", 8) == (16, 8)
    assert layout_group(outer_tp, "tp", 8) == (2, 1)  # stride 16: across nodes
    with pytest.raises(ParallelConfigError):
        pk.ParallelConfig(rank_order="tp-dp-pp")


def test_estimate_step_prices_tp_16_by_the_hierarchical_formula():
    model = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("h100")
    m = 4
    est = pk.calc.estimate_step(model, pk.ParallelConfig(tp=16, num_micro_batches=m), hw,
                                comm_efficiency=0.8,
                                rates=pk.Rates(link_latency_s=0.0))  # bandwidth terms only
    message = 1 * model.seq_length * model.hidden_size * 2  # b·s·h bf16
    count = 4 * model.num_layers * m  # 2 all-reduces forward, 2 backward, per layer
    one = 2 * 7 / 8 * message / (450e9 * 0.8) + 2 * 1 / 2 * (message / 8) / (50e9 * 0.8)
    assert est.tp_comm_s == pytest.approx(count * one, rel=1e-9)
    old = count * 2 * 15 / 16 * message / (50e9 * 0.8)
    assert 5.5 < old / est.tp_comm_s < 6.5


def test_a_full_mesh_node_gives_a_group_one_link_per_peer():
    """An Atlas 800T A2 (910B) is an HCCS full mesh: each NPU has 7 links of 28 GB/s per
    direction (196 GB/s in all, the preset's source); a peer is one link. A DGX H100's
    NVLink is behind NVSwitch: any peer at the GPU's 450 GB/s."""
    mesh, switch = Node.preset("atlas-800t-a2"), Node.preset("dgx-h100")
    assert mesh.mesh and not switch.mesh
    for ranks, gbps in ((2, 28.0), (4, 84.0), (8, 196.0), (1, 196.0)):
        assert mesh.bandwidth_among(ranks) == pytest.approx(gbps * 1e9)
    assert switch.bandwidth_among(2) == switch.bandwidth_among(8) == pytest.approx(450e9)


def test_estimate_step_prices_a_tensor_parallel_pair_on_one_hccs_link():
    """tp 2 on a 910B server: the pair all-reduces (4 per layer and micro-batch, as above)
    over the one link between them, 28 GB/s, at the ring's 2(n−1)/n = 1 volume; tp 8 over
    the NPU's 7 links, 196 GB/s. Priced at 196 GB/s for the pair, as before, it came out
    7× too fast."""
    model = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("ascend-910b")
    m = 4
    message = 1 * model.seq_length * model.hidden_size * 2
    count = 4 * model.num_layers * m
    for tp, link_bytes in ((2, 28e9), (8, 196e9)):
        est = pk.calc.estimate_step(model, pk.ParallelConfig(tp=tp, num_micro_batches=m),
                                    hw, comm_efficiency=0.8,
                                    rates=pk.Rates(link_latency_s=0.0))
        one = 2 * (tp - 1) / tp * message / (link_bytes * 0.8)
        assert est.tp_comm_s == pytest.approx(count * one, rel=1e-9), tp
