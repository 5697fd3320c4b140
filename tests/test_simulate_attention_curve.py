"""The simulator times its fused attention kernels as the step model does (issue 65, point 7:
one model): on the published curve of the call's length, head dimension, mask and pass for
the hardware (:mod:`perfkit.calc.attention_rate`), not as a GEMM of the same FLOPs.

The simulated durations are read from the written ``kernel_details.csv`` with the csv
module; their FLOPs are checked against the shapes the same rows record
(``4·b·s²·a·d``, halved with the causal mask, the backward 2.5 times the forward), and
their times against the step model's own layer pricing
(:func:`perfkit.calc.timing_layer.layer_costs`, ``core_fwd`` / ``core_bwd``).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

import perfkit as pk
from perfkit.calc import ActivationModel
from perfkit.calc.attention_rate import attention_efficiency
from perfkit.calc.rates import Rates
from perfkit.calc.timing_layer import layer_costs
from perfkit.simulate import simulate

MODEL = pk.ModelSpec.preset("llama2-7b").replace(num_layers=2, seq_length=2048)
PAR = pk.ParallelConfig(tp=2, micro_batch_size=2, num_micro_batches=1)


def _attention_rows(root: Path) -> dict[str, tuple[str, float]]:
    """Kernel type -> (its input shapes, its duration µs), one rank's first of each."""
    path = next(root.glob("*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))
    out: dict[str, tuple[str, float]] = {}
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row["Type"].startswith("FlashAttentionScore"):
                out.setdefault(row["Type"], (row["Input Shapes"].strip('"'),
                                             float(row["Duration(us)"])))
    return out


@pytest.mark.parametrize("hardware", ["ascend-910b", "h100"])
def test_simulated_attention_lasts_what_the_step_model_prices(tmp_path, hardware):
    hw = pk.Hardware.preset(hardware)
    root = simulate(MODEL, PAR, hw, steps=1, out=tmp_path / "run", noise=0.0,
                    aic_metrics=None)
    rows = _attention_rows(root)
    assert set(rows) == {"FlashAttentionScore", "FlashAttentionScoreGrad"}
    q = [int(x) for x in rows["FlashAttentionScore"][0].split(";")[0].split(",")]
    b, s, width = q  # (batch, sequence, heads·head dim of this tp rank)
    assert (b, s, width) == (2, 2048, MODEL.hidden_size // 2)
    layer = layer_costs(MODEL, hw, Rates(), PAR.micro_batch_size, tp=PAR.tp,
                        activation_model=ActivationModel("tensors", flash_attention=True,
                                                         dropout=False), dtype="bf16")
    assert rows["FlashAttentionScore"][1] == pytest.approx(layer.core_fwd * 1e6, rel=1e-4)
    assert rows["FlashAttentionScoreGrad"][1] == pytest.approx(layer.core_bwd * 1e6,
                                                               rel=1e-4)
    # and that is the curve: the forward's FLOPs from its shapes over its efficiency
    heads = MODEL.num_attention_heads // PAR.tp
    flops = 4.0 * b * s * s * width / 2
    e = attention_efficiency(s, s, width / heads, True, False, "auto", hw.name,
                             float(b * heads), hw.multiprocessors)
    assert rows["FlashAttentionScore"][1] == pytest.approx(flops / (e * hw.peak()) * 1e6,
                                                           rel=1e-4)
    # backward: 2.5 times the forward's FLOPs, on the backward's curve
    e_b = attention_efficiency(s, s, width / heads, True, True, "auto", hw.name,
                               float(b * heads), hw.multiprocessors)
    assert rows["FlashAttentionScoreGrad"][1] == pytest.approx(
        2.5 * flops / (e_b * hw.peak()) * 1e6, rel=1e-4)
