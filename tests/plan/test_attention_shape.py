"""The fused attention kernel priced by its shape (perfkit.calc.attention_rate) and wired into
the step model: published figures, monotony, the causal mask, a 128k context-parallel layout.

Published figures quoted here are typed from Shah et al. 2024, "FlashAttention-3" (arXiv
2407.08608), Fig. 5 (forward) and Fig. 6 (backward), H100 80GB SXM5, BF16, TFLOPs/s printed
on the bars; they are divided by the H100 SXM5 dense BF16 peak, 989.5 TFLOP/s (NVIDIA
datasheet).
"""

from __future__ import annotations

import gzip
import json
import math
import statistics
from pathlib import Path

import pytest

import perfkit as pk
from perfkit.calc.activation_model import ActivationModel
from perfkit.calc.attention_occupancy import TILE_HALF
from perfkit.calc.attention_rate import (
    A100_FLASH2_BEST,
    FA3_PAPER_H100,
    FA3_SEQ_LENGTHS,
    attention_efficiency,
    call_lengths,
    is_hopper,
    resolve_implementation,
)
from perfkit.calc.behaviour import Behaviour
from perfkit.calc.rates import Rates
from perfkit.calc.timing_layer import layer_costs

PEAK = 989.5e12

#: (implementation, backward, head dim, causal, sequence length, TFLOPs/s, where).
PUBLISHED = [
    ("flash3", False, 128, False, 16384, 648, "Fig. 5b, FA3, 16k"),
    ("flash3", False, 128, True, 512, 292, "Fig. 5e, FA3, 512"),
    ("flash3", False, 256, False, 2048, 707, "Fig. 5c, FA3, 2k"),
    ("flash3", False, 64, True, 4096, 420, "Fig. 5d, FA3, 4k"),
    ("flash3", True, 128, False, 1024, 424, "Fig. 6b, FA3, 1k"),
    ("flash2", False, 128, False, 8192, 370, "Fig. 5b, FA2, 8k"),
    ("flash2", False, 128, True, 2048, 298, "Fig. 5e, FA2, 2k"),
    ("flash2", True, 64, False, 1024, 238, "Fig. 6a, FA2, 1k"),
    ("cudnn", False, 256, True, 8192, 497, "Fig. 5f, cuDNN, 8k"),
    ("cudnn", True, 128, False, 4096, 499, "Fig. 6b, cuDNN, 4k"),
]

#: Tolerance on the share of the peak, relative. The curve has two parameters per series
#: for six bars; the bars are printed to 1 TFLOP/s (0.2-0.5 %); the series bend more
#: sharply between 512 and 2k than the hyperbola (the largest misfit, 5.5 %, is FA3 at 1k,
#: head dim 64, causal) and cuDNN's head-dim-128 forward falls past 2k, which a rising
#: curve cannot follow. 6 % covers the worst point of the 142 fitted.
TOLERANCE = 0.06


@pytest.mark.parametrize("impl, backward, d, causal, length, tflops, where", PUBLISHED)
def test_the_curve_meets_the_published_figure(impl, backward, d, causal, length, tflops,
                                              where):
    e = attention_efficiency(length, length, d, causal, backward, impl, "h100")
    assert e == pytest.approx(tflops * 1e12 / PEAK, rel=TOLERANCE), where


def test_residuals_of_the_fit_over_every_published_bar():
    """Every bar of the recorded table within TOLERANCE; the mean absolute residual is
    the fit's quality (2 parameters, 6 points per series)."""
    residuals = []
    for (impl, pass_, d, causal), bars in FA3_PAPER_H100.items():
        for length, tflops in zip(FA3_SEQ_LENGTHS, bars, strict=True):
            if tflops is None:
                continue
            e = attention_efficiency(length, length, d, causal, pass_ == "bwd", impl, "h100")
            residuals.append(e / (tflops * 1e12 / PEAK) - 1.0)
    assert len(residuals) == 142
    assert max(abs(r) for r in residuals) < TOLERANCE
    assert sum(abs(r) for r in residuals) / len(residuals) < 0.02


@pytest.mark.parametrize("hardware", ["h100", "a100", "ascend-910b"])
@pytest.mark.parametrize("impl", ["flash2", "flash3", "cudnn"])
def test_efficiency_rises_with_the_sequence_length(hardware, impl):
    lengths = [256, 512, 1024, 2048, 4096, 8192, 16384, 65536, 262144]
    for d in (64, 96, 128, 192, 256):
        for causal in (False, True):
            for backward in (False, True):
                es = [attention_efficiency(n, n, d, causal, backward, impl, hardware)
                      for n in lengths]
                pairs = zip(es[:-1], es[1:], strict=True)
                assert all(b > a for a, b in pairs), (d, causal, backward)
                assert 0 < es[0] and es[-1] < 1


@pytest.mark.parametrize("impl", ["flash2", "flash3", "cudnn"])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_the_causal_mask_is_slower_per_useful_flop_at_short_lengths(impl, d):
    for length in (512, 1024):
        masked = attention_efficiency(length, length, d, True, False, impl, "h100")
        open_ = attention_efficiency(length, length, d, False, False, impl, "h100")
        assert masked < 0.9 * open_
        # the published bars say the same (Fig. 5: masked / unmasked at the same length)
        bars = FA3_PAPER_H100
        i = FA3_SEQ_LENGTHS.index(length)
        if bars[(impl, "fwd", d, False)][i] is not None:
            assert bars[(impl, "fwd", d, True)][i] < 0.9 * bars[(impl, "fwd", d, False)][i]


def test_off_hopper_flash2_reaches_the_a100_figure_and_flash3_falls_back():
    # FlashAttention-2 abstract: up to 73 % of the A100's peak; the best case (forward,
    # head dim 128, no mask) tends to it with the sequence length
    best = attention_efficiency(1 << 22, 1 << 22, 128, False, False, "flash2", "a100")
    assert best == pytest.approx(A100_FLASH2_BEST, rel=1e-3)
    assert attention_efficiency(4096, 4096, 128, True, True, "flash3", "a100") \
        == attention_efficiency(4096, 4096, 128, True, True, "flash2", "a100")
    assert is_hopper("h100") and is_hopper("h800") and is_hopper("h200")
    assert not is_hopper("a100") and not is_hopper("ascend-910b") and not is_hopper("b200")


def test_context_parallel_calls_split_the_work():
    parts = call_lengths(131072, 8, True)
    assert sum(p[0] for p in parts) == pytest.approx(1.0)
    assert parts[0] == (1 / 8, 16384, 16384, True)
    assert parts[1] == (7 / 8, 16384, 8192, False)
    assert call_lengths(4096, 1, True) == ((1.0, 4096, 4096, True),)


def _llama(seq: int) -> pk.ModelSpec:
    return pk.ModelSpec(name="llama-like", num_layers=32, hidden_size=4096,
                        num_attention_heads=32, num_kv_heads=8, ffn_hidden_size=14336,
                        vocab_size=128256, seq_length=seq, mlp="gated", norm="rmsnorm",
                        position_embedding="rope")


def test_a_128k_context_parallel_layout_costs_what_the_curve_says():
    """128k tokens, cp 8, tp 8 on H100 with FlashAttention-3: the attention core's time is
    FLOPs / (peak × curve) per call, and more than the former GEMM pricing gave."""
    s, cp, tp = 131072, 8, 8
    model, hw = _llama(s), pk.Hardware.preset("h100")
    am = ActivationModel("tensors", flash_attention=True, dropout=False)
    rates = Rates(attention_implementation="flash3")
    lc = layer_costs(model, hw, rates, 1, tp=tp, sequence_parallel=True, cp=cp,
                     activation_model=am)
    # independent arithmetic: forward FLOPs of the rank's attention, causal halved
    heads, d = 32 / tp, 128
    flops = 4.0 * (s / cp) * s * heads * d / 2.0
    chunk = s / cp
    e_diag = attention_efficiency(chunk, chunk, d, True, False, "flash3", "h100")
    e_ring = attention_efficiency(chunk, chunk / 2, d, False, False, "flash3", "h100")
    eb_diag = attention_efficiency(chunk, chunk, d, True, True, "flash3", "h100")
    eb_ring = attention_efficiency(chunk, chunk / 2, d, False, True, "flash3", "h100")

    # occupancy: 1 × 4 (batch, head) pairs per call, tiles of 128 queries (forward) or
    # keys (backward) on the H100's 132 multiprocessors, g(T) = T / (T + κ·132), against
    # the published measurements' 16 heads × 16384 / L pairs; FlashAttention-3 takes
    # cuDNN's κ
    def occ(tiled, causal, backward):
        kappa = TILE_HALF[("cudnn", "bwd" if backward else "fwd", causal)]
        tiles, published = 4 * math.ceil(tiled / 128), 16 * 16384 / tiled * math.ceil(
            tiled / 128)
        return (tiles / (tiles + 132 * kappa)) / (published / (published + 132 * kappa))

    # the ring's float32 bookkeeping, memory-bound kernels at the default rates: forward,
    # the first block converted and the result cast back (6 bytes per query element each)
    # and cp − 1 merges (38); backward, the three gradients converted and cast back (6 per
    # element of q, k and v) and cp − 1 accumulations (10 per element of q and of k)
    q_el, kv_el = chunk * heads * d, chunk * (8 / tp) * d
    rates_default = Rates()

    def vec(nbytes, kernels):
        return kernels * (nbytes + rates_default.memory_half_bytes) / (
            rates_default.vector_efficiency * hw.memory_bandwidth)

    ring_f = vec(6 * q_el, 2) + vec(38 * q_el, cp - 1)
    ring_b = vec(6 * (q_el + 2 * kv_el), 2) + vec(10 * (q_el + kv_el), cp - 1)
    expected = flops / cp / (PEAK * e_diag * occ(chunk, True, False)) \
        + flops * (cp - 1) / cp / (PEAK * e_ring * occ(chunk, False, False))
    assert lc.core_fwd == pytest.approx(expected + ring_f, rel=1e-9)
    expected_b = 2.5 * flops * (1 / cp / (PEAK * eb_diag * occ(chunk, True, True))
                                + (cp - 1) / cp / (PEAK * eb_ring * occ(chunk / 2, False, True)))
    assert lc.core_bwd == pytest.approx(expected_b + ring_b, rel=1e-9)
    # the curve values themselves near the published 8k-16k bars (Fig. 5e/5b, Fig. 6b)
    assert e_diag == pytest.approx(616e12 / PEAK, rel=TOLERANCE)
    assert e_ring == pytest.approx(math.sqrt(646 * 648) * 1e12 / PEAK, rel=TOLERANCE)
    # the former pricing: a GEMM on the size curve (e 0.95, W½ 0.58 GFLOP) plus its bytes
    old = layer_costs(model, hw, Rates(attention_implementation="gemm", gemm_efficiency=0.95),
                      1, tp=tp,
                      sequence_parallel=True, cp=cp, activation_model=am)
    n = chunk
    nbytes = 2.0 * n * (2 * heads * d + 2 * (8 / tp) * d)
    gemm = (flops + 0.58e9) / (0.95 * PEAK) + nbytes / (0.9 * hw.memory_bandwidth)
    assert old.core_fwd == pytest.approx(gemm + ring_f, rel=1e-9)
    assert lc.core_fwd > 1.3 * old.core_fwd
    assert lc.core_bwd > 1.4 * old.core_bwd


def test_unfused_attention_keeps_its_gemm_and_softmax_pricing():
    model, hw = _llama(4096), pk.Hardware.preset("h100")
    am = ActivationModel()  # unfused (flash_attention False)
    costs = [layer_costs(model, hw, Rates(attention_implementation=impl), 1, tp=2,
                         activation_model=am).core_fwd for impl in ("flash2", "gemm")]
    assert costs[0] == costs[1]


def test_the_implementation_is_an_option_with_a_checked_value():
    with pytest.raises(pk.PerfkitError, match="attention_implementation"):
        Rates(attention_implementation="flash9")
    with pytest.raises(pk.PerfkitError, match="attention_implementation"):
        Behaviour(attention_implementation="sdpa")
    for name in Behaviour.presets():
        assert Behaviour.preset(name).overrides()["attention_implementation"] == "auto"
    assert resolve_implementation("auto", "h100") == "cudnn"
    assert resolve_implementation("auto", "a100") == "flash2"
    assert resolve_implementation("flash3", "h100") == "flash3"
    assert Behaviour.preset("nemo", attention_implementation="cudnn").overrides()[
        "attention_implementation"] == "cudnn"


def test_attention_efficiency_stays_a_multiplier_on_the_curve():
    model, hw = _llama(8192), pk.Hardware.preset("h100")
    am = ActivationModel("tensors", flash_attention=True, dropout=False)
    one = layer_costs(model, hw, Rates(), 1, tp=4, activation_model=am)
    half = layer_costs(model, hw, Rates(attention_efficiency=0.5), 1, tp=4,
                       activation_model=am)
    assert half.core_fwd == pytest.approx(2 * one.core_fwd, rel=1e-12)
    assert half.core_bwd == pytest.approx(2 * one.core_bwd, rel=1e-12)


DATA = Path(__file__).resolve().parents[1] / "data"


def _raw_kernels(trace: Path) -> dict[str, list[float]]:
    """Durations (µs) of the first rank's cuDNN attention kernels, read from the raw
    Kineto JSON (not through perfkit's loader)."""
    events = json.loads(gzip.open(trace).read())["traceEvents"]
    out: dict[str, list[float]] = {}
    for ev in events:
        if ev.get("cat") != "kernel":
            continue
        for key in ("sdpa_sm90_flash_fprop", "sdpa_sm90_flash_bprop", "compute_dot_do_o",
                    "convert_dq_to_16bits"):
            if key in ev.get("name", ""):
                out.setdefault(key, []).append(float(ev["dur"]))
    return out


#: The bundled H100 Llama runs (PyTorch SDPA, causal, head dim 128), by trace:
#: (batch, heads on the rank, sequence) from each run's environment.json / input shapes.
MEASURED = [
    ("kineto_llama_layouts_h100/a.pt.trace.json.gz", 4, 16, 2048),
    ("kineto_llama_layouts_h100/c.pt.trace.json.gz", 8, 16, 2048),
    ("kineto_llama_shapes_h100/f.pt.trace.json.gz", 2, 16, 4096),
    ("kineto_llama_wide_tp_h100/a.pt.trace.json.gz", 4, 32, 2048),
    ("kineto_llama_wide_tp_h100/h.pt.trace.json.gz", 4, 16, 2048),
]


@pytest.mark.parametrize("trace, b, heads, s", MEASURED)
def test_measured_cudnn_attention_kernels_meet_the_curve(trace, b, heads, s):
    """What PyTorch SDPA ran on the bundled H100 runs (cuDNN's sm90 flash kernels) against
    the cuDNN curve of the FA3 paper, at 64-128 (batch, head) pairs per call (the paper's
    16k tokens × 16 heads: 128 at 2k): forward within 15 % (the runs' cuDNN is newer than
    the paper's: on layout c, the paper's own shape, 534 TFLOP/s against the bar's 484,
    and the fit is 2.5 % under that bar: +13 %), backward (bprop plus its dO·O and
    dQ-conversion kernels) within 8 % (layout c: +6.3 %). With fewer pairs (tp shares of
    8 or 4 heads, 32 or 16 pairs) the kernels run 10-28 % below the curve, which does not
    model occupancy (docs/planner.md).
    """
    if not (DATA / trace).exists():
        pytest.skip(f"{trace} not bundled")
    k = _raw_kernels(DATA / trace)
    flops = 4.0 * b * s * s * heads * 128 / 2.0  # causal: half
    fwd = statistics.median(k["sdpa_sm90_flash_fprop"]) * 1e-6
    bwd = sum(statistics.median(k[key]) for key in (
        "sdpa_sm90_flash_bprop", "compute_dot_do_o", "convert_dq_to_16bits")) * 1e-6
    e_fwd = flops / fwd / PEAK
    e_bwd = 2.5 * flops / bwd / PEAK
    assert e_fwd == pytest.approx(attention_efficiency(s, s, 128, True, False, "cudnn",
                                                       "h100"), rel=0.15)
    assert e_bwd == pytest.approx(attention_efficiency(s, s, 128, True, True, "cudnn",
                                                       "h100"), rel=0.08)


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_a_profiles_attention_kernels_fit_their_own_factor_against_the_curve():
    """Calibrated on the bundled simulated Ascend run (FlashAttentionScore kernels, 910B: off
    Hopper, so FlashAttention-2's scaled curve), the attention kind gets its own factor:
    the fitted ``attention_efficiency`` times the curve reproduces the attention kernels'
    own time, read from one rank's raw kernel_details.csv (the simulator's 3 % noise and
    the fit's mean over 16 ranks: within 5 %)."""
    import csv

    from perfkit import plan

    sim = Path(__file__).resolve().parents[2] / "data" / "simulated" \
        / "llama2-13b-baseline-dp16"
    cal = plan.calibrate(pk.load(sim, cache=False, progress=False))
    term = next(t for t in cal.terms if t[0] == "attention_efficiency")
    assert "against the published flash2 curve" in term[2]
    att = cal.rates.attention_efficiency
    csv_path = next(sim.glob("node0_*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))
    fwd, bwd = [], []
    with csv_path.open() as fh:
        for row in csv.DictReader(fh):
            if row["Type"] == "FlashAttentionScore":
                fwd.append(float(row["Duration(us)"]) * 1e-6)
            elif row["Type"] == "FlashAttentionScoreGrad":
                bwd.append(float(row["Duration(us)"]) * 1e-6)
    b, s, heads, d, peak = 2, 4096, 40, 128, 320e12  # the run's layout, the 910B's fp16 peak
    flops = 4.0 * b * s * s * heads * d / 2.0
    model = len(fwd) * flops / (peak * att * attention_efficiency(
        s, s, d, True, False, "flash2", "ascend-910b")) + len(bwd) * 2.5 * flops / (
        peak * att * attention_efficiency(s, s, d, True, True, "flash2", "ascend-910b"))
    assert len(fwd) > len(bwd) > 0  # full recompute: the forward runs twice
    assert model == pytest.approx(sum(fwd) + sum(bwd), rel=0.05)


@pytest.mark.parametrize("key", sorted(FA3_PAPER_H100)[:6])
def test_a_series_fit_is_numpys_least_squares_line(key: tuple) -> None:
    """``fit_series`` solves the normal equations itself (exact sums, the same bits on
    every numpy: the simulator's bundled files depend on it); the line is numpy's."""
    import numpy as np

    from perfkit.calc.attention_rate import H100_BF16_PEAK, fit_series

    pts = [(n, t) for n, t in zip(FA3_SEQ_LENGTHS, FA3_PAPER_H100[key], strict=True)
           if t is not None]
    x = np.array([1.0 / n for n, _ in pts])
    y = np.array([H100_BF16_PEAK / (t * 1e12) for _, t in pts])
    slope, intercept = np.polyfit(x, y, 1)
    e_max, half = fit_series(FA3_SEQ_LENGTHS, FA3_PAPER_H100[key])
    if slope <= 0:
        assert half == 0.0 and e_max == pytest.approx(float(np.mean(1.0 / y)), rel=1e-12)
    else:
        assert e_max == pytest.approx(1.0 / intercept, rel=1e-12)
        assert half == pytest.approx(slope / intercept, rel=1e-12)
