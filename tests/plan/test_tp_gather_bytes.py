"""``Rates.tp_gather_bytes``: torchao's float8 tensor parallelism all-gathers float8.

Checked by hand for one DGX H100 node (8 ranks, NVLink 450 GB/s per direction at the
default intra-node efficiency, no latency): under sequence parallelism each layer runs,
per micro-batch, 8 collective halves of the ``b·s·h`` activation — forward an all-gather
before the attention's and the MLP's column-parallel GEMMs and a reduce-scatter after
their row-parallel ones, backward the reverse (Korthikanti et al. 2022, §4.2.2) — plus
Megatron's two all-gathers again in the backward (``Rates.sp_ag_redo``). A ring moves
``(n − 1)/n`` of the message per rank. With ``tp_gather_bytes=1`` the 6 all-gathers move
1 byte per element instead of 2 and the 4 reduce-scatters keep 2.
"""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit import plan
from perfkit.calc.rates import Rates
from perfkit.errors import InvalidArgumentError

MODEL = pk.ModelSpec.preset("llama2-13b")
H100 = pk.Hardware.preset("h100")


def _tp_seconds(parallel: pk.ParallelConfig, **rates) -> float:
    priced = Rates(link_latency_s=0.0, **rates)
    return pk.estimate_step(MODEL, parallel, H100, rates=priced).parts["tp_comm"]


def test_float8_gathers_halve_the_all_gathers_only() -> None:
    m, tp = 4, 8
    par = pk.ParallelConfig(dp=1, tp=tp, sequence_parallel=True, num_micro_batches=m)
    link = 450e9 * Rates().intra_node_efficiency
    element = 1 * MODEL.seq_length * MODEL.hidden_size  # b·s·h, micro-batch 1
    ring = (tp - 1) / tp
    layers = MODEL.num_layers * m
    bf16 = layers * 10 * ring * element * 2 / link
    fp8 = layers * (6 * ring * element * 1 + 4 * ring * element * 2) / link
    assert _tp_seconds(par) == pytest.approx(bf16, rel=1e-9)
    assert _tp_seconds(par, tp_gather_bytes=1.0) == pytest.approx(fp8, rel=1e-9)


def test_without_sequence_parallelism_the_all_reduces_stay_16_bit() -> None:
    par = pk.ParallelConfig(dp=1, tp=8, num_micro_batches=4)
    assert _tp_seconds(par, tp_gather_bytes=1.0) == pytest.approx(_tp_seconds(par), rel=1e-12)


def test_a_full_recompute_repeats_its_forward_gathers_in_float8() -> None:
    """A fully recomputed layer reruns its forward: 2 all-gathers and 2 reduce-scatters
    more per micro-batch (``recompute_style="all"``)."""
    m, tp = 2, 8
    par = pk.ParallelConfig(dp=1, tp=tp, sequence_parallel=True, num_micro_batches=m,
                            recompute="full")
    link = 450e9 * Rates().intra_node_efficiency
    element = MODEL.seq_length * MODEL.hidden_size
    ring = (tp - 1) / tp
    per_layer = (6 + 2) * element * 1 + (4 + 2) * element * 2
    expected = MODEL.num_layers * m * ring * per_layer / link
    assert _tp_seconds(par, tp_gather_bytes=1.0) == pytest.approx(expected, rel=1e-9)


def test_a_gather_of_no_bytes_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="tp_gather_bytes"):
        Rates(tp_gather_bytes=0)


def test_predict_takes_it_as_an_override() -> None:
    par = pk.ParallelConfig(dp=2, tp=8, sequence_parallel=True, num_micro_batches=4)
    plain = plan.predict(None, MODEL, par, H100)
    fp8 = plan.predict(None, MODEL, par, H100, overrides={"tp_gather_bytes": 1})
    assert fp8.parts["tp_comm"] < plain.parts["tp_comm"]
    assert {k: v for k, v in fp8.parts.items() if k != "tp_comm"} == pytest.approx(
        {k: v for k, v in plain.parts.items() if k != "tp_comm"}, rel=1e-12)
