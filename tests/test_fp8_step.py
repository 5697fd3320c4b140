"""FP8 in the step model: GEMMs at the FP8 peak, attention at the 16-bit peak, plus one
cast+amax kernel per GEMM input (forward) and output gradient (backward)."""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit.calc.gemm_rate import SURFACES
from perfkit.calc.rates import Rates
from perfkit.calc.timing import layer_costs

MODEL = pk.ModelSpec.preset("llama2-7b")
FLASH = pk.ActivationModel("tensors", flash_attention=True, dropout=False)


def test_fp8_halves_the_gemms_on_an_h100_and_keeps_attention_at_bf16():
    h100 = pk.Hardware.preset("h100")
    assert h100.peak("fp8") == 2 * h100.peak("bf16")
    # memory so fast that element-wise work and casts cost nothing: only the GEMMs differ
    fast = h100.replace(memory_bandwidth=1e30)
    # every GEMM at 0.95 of its peak (set: the devices' own ceilings differ by type)
    r = Rates(gemm_half_flops=0.0, gemm_model="size", gemm_efficiency=0.95)
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


def test_fp8_gemms_run_on_the_measured_fp8_surface_on_an_h100():
    """By default an H100's FP8 GEMMs take the measured FP8 surface's time, bf16 ones the
    bf16 surface's: the difference of the two runs' forward is, GEMM by GEMM, the
    difference of the two surfaces' times (memory so fast that only GEMMs differ)."""
    fast = pk.Hardware.preset("h100").replace(memory_bandwidth=1e30)
    bf16 = layer_costs(MODEL, fast, Rates(), tp=1, activation_model=FLASH, dtype="bf16")
    fp8 = layer_costs(MODEL, fast, Rates(), tp=1, activation_model=FLASH, dtype="fp8")
    n, h, f = MODEL.seq_length, MODEL.hidden_size, MODEL.ffn_hidden_size
    # llama2-7b's forward GEMMs (M, N, K): fused qkv, projection, gate and up, down
    shapes = [(n, 3 * h, h), (n, h, h), (n, f, h), (n, f, h), (n, h, f)]

    def t(m, nn, k, peak, s):
        e = s.e_max * m / (m + s.m_half) * nn / (nn + s.n_half) * k / (k + s.k_half)
        return s.fixed_s + 2.0 * m * nn * k / (e * peak)

    expected = sum(t(*shape, 989.5e12, SURFACES["hopper-bf16"])
                   - t(*shape, 1979e12, SURFACES["hopper-fp8"]) for shape in shapes)
    assert bf16.fwd - fp8.fwd == pytest.approx(expected, rel=1e-6)
