"""``Rates.param_gather_bytes``: the sharded weights' all-gather moves that many bytes per
parameter (1 for torchao's float8 all-gather under FSDP2).

Checked by hand on one DGX H100 node (8 ranks, NVLink 450 GB/s per direction, the
datasheet's figure that ``Hardware.preset("h100").topology`` cites): a ring all-gather
moves ``(n - 1)/n`` of the message per rank, so halving the bytes per parameter takes
``(7/8) · N · 1 B / (450 GB/s · intra-node efficiency)`` off the step, the latency terms
cancelling (Thakur et al. 2005; nccl-tests' PERFORMANCE.md bus-bandwidth convention).
"""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit import plan
from perfkit.calc import parameters_per_device
from perfkit.calc.rates import Rates
from perfkit.errors import InvalidArgumentError


def test_float8_gathers_take_half_the_gather_off_the_step() -> None:
    model = pk.ModelSpec.preset("llama2-13b")
    par = pk.ParallelConfig(dp=8, micro_batch_size=1, num_micro_batches=1,
                            optimizer_shard=8, zero_stage=3, recompute="full")
    hw = pk.Hardware.preset("h100")
    bf16 = plan.predict(model=model, parallel=par, hardware=hw, static_scheme="megatron")
    fp8 = plan.predict(model=model, parallel=par, hardware=hw, static_scheme="megatron",
                       overrides={"param_gather_bytes": 1})
    n = parameters_per_device(model, par)
    saved = (7 / 8) * n * 1.0 / (450e9 * Rates().intra_node_efficiency)
    assert bf16.parts["dp_comm"] - fp8.parts["dp_comm"] == pytest.approx(saved, rel=1e-6)
    others = [k for k in bf16.parts if k != "dp_comm"]
    assert all(bf16.parts[k] == fp8.parts[k] for k in others)


def test_a_gather_of_no_bytes_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="param_gather_bytes"):
        Rates(param_gather_bytes=0)
