"""FP8 in the step model: GEMMs at the FP8 peak, attention at the 16-bit peak, plus one
cast+amax kernel per GEMM input (forward) and output gradient (backward)."""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit.calc.rates import Rates
from perfkit.calc.timing import layer_costs

MODEL = pk.ModelSpec.preset("llama2-7b")
FLASH = pk.ActivationModel("tensors", flash_attention=True, dropout=False)


def test_fp8_halves_the_gemms_on_an_h100_and_keeps_attention_at_bf16():
    h100 = pk.Hardware.preset("h100")
    assert h100.peak("fp8") == 2 * h100.peak("bf16")
    # memory so fast that element-wise work and casts cost nothing: only the GEMMs differ
    fast = h100.replace(memory_bandwidth=1e30)
    r = Rates(gemm_half_flops=0.0)
    bf16 = layer_costs(MODEL, fast, r, tp=1, activation_model=FLASH, dtype="bf16")
    fp8 = layer_costs(MODEL, fast, r, tp=1, activation_model=FLASH, dtype="fp8")
    assert fp8.core_fwd == pytest.approx(bf16.core_fwd, rel=1e-9)
    assert fp8.fwd == pytest.approx((bf16.fwd - bf16.core_fwd) / 2 + bf16.core_fwd, rel=1e-6)
    assert fp8.bwd == pytest.approx((bf16.bwd - bf16.core_bwd) / 2 + bf16.core_bwd, rel=1e-6)


def test_fp8_adds_one_cast_per_gemm():
    h100 = pk.Hardware.preset("h100")
    bf16 = layer_costs(MODEL, h100, Rates(), tp=1, activation_model=FLASH, dtype="bf16")
    fp8 = layer_costs(MODEL, h100, Rates(), tp=1, activation_model=FLASH, dtype="fp8")
    # Llama layer GEMM calls: qkv, projection, gate + up, down = 5
    assert fp8.kernels_fwd - bf16.kernels_fwd == 5
    assert fp8.kernels_bwd - bf16.kernels_bwd == 5
