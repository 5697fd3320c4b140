"""LoRA / PEFT: a frozen base gets no weight gradients, no gradient reduction and no
optimizer update (``ParallelConfig.trainable_fraction``)."""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit import plan
from perfkit.calc.flops import layer_forward_flops
from perfkit.calc.memory import stage_parameters

MODEL = pk.ModelSpec.preset("llama2-7b")
H100 = pk.Hardware.preset("h100")
PAR = pk.ParallelConfig(dp=8, num_micro_batches=4)


def test_estimate_step_drops_the_frozen_weight_gradients():
    """Every matrix product at 50 % of the peak: freezing all but ``f`` of the weights
    takes ``(1 − f)`` of the layers' weight-gradient GEMMs (one forward's FLOPs of their
    weights per token) off the compute, and ``(1 − f)`` of the gradient reduction."""
    f = 0.01
    terms = {"efficiency": 0.5, "rates": pk.Rates(link_latency_s=0.0)}
    est = pk.estimate_step(MODEL, PAR.replace(trainable_fraction=f), H100, **terms)
    full = pk.estimate_step(MODEL, PAR, H100, **terms)
    parts = layer_forward_flops(MODEL, False)
    tokens = 1 * 4 * MODEL.seq_length
    weight_grads = MODEL.num_layers * tokens * (parts["total"] - parts["core"])
    assert full.compute_s - est.compute_s == pytest.approx(
        (1 - f) * weight_grads / (0.5 * H100.peak()), rel=1e-9)
    assert est.dp_comm_s == pytest.approx(f * full.dp_comm_s, rel=1e-9)


def test_predict_drops_the_frozen_weight_gradient_gemms_reduction_and_update():
    fast = H100.replace(memory_bandwidth=1e30)  # only the GEMMs take time
    # every GEMM at 0.95 of the peak
    over = {"gemm_half_flops": 0.0, "gemm_model": "size", "gemm_efficiency": 0.95}
    f = 0.25
    full = plan.predict(None, MODEL, PAR, fast, overrides=over)
    lora = plan.predict(None, MODEL, PAR.replace(trainable_fraction=f), fast, overrides=over)
    parts = layer_forward_flops(MODEL, False)
    weight_grads = MODEL.num_layers * 4 * MODEL.seq_length * (parts["total"] - parts["core"])
    assert full.parts["compute"] - lora.parts["compute"] == pytest.approx(
        (1 - f) * weight_grads / (0.95 * H100.peak()), rel=1e-6)
    params = max(s["total"] for s in stage_parameters(MODEL, PAR))
    real = plan.predict(None, MODEL, PAR.replace(trainable_fraction=f), H100)
    assert real.parts["optimizer"] == pytest.approx(
        (f * params * 24 + 2e6) / (0.9 * H100.memory_bandwidth), rel=1e-9)
    with pytest.raises(pk.ParallelConfigError):
        pk.ParallelConfig(trainable_fraction=0)
