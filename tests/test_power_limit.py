"""A power limit below the rated one (perfkit.calc.power_limit): the measured evidence
that it binds, the share of compute a capped Hopper keeps, and where the step model uses
it (compute, not memory-bound work, not the MFU's datasheet peak)."""

from __future__ import annotations

import gzip
import json

import pytest

import perfkit as pk
from perfkit.calc.power_limit import (
    HOPPER_POWER_POINTS,
    compute_scale,
    rated_power,
    sustained_peak,
)
from perfkit.plan.assumed import assumptions
from tests.kernel_rates import DATA


def _draw(name: str = "power_draw.json.gz") -> dict:
    return json.loads(gzip.open(DATA / name).read())


def test_every_compute_kind_of_a_step_runs_at_the_h100s_power_limit():
    """The measured file: attention, bf16 and FP8 GEMMs draw the 700 W limit (and run
    below the 1,980 MHz clock), a copy draws well under it at the full clock. So a lower
    limit slows compute and, above the copy's draw, leaves memory-bound work alone."""
    data = _draw()
    assert data["environment"]["gpu"] == "NVIDIA H100 80GB HBM3"
    assert "700.00 W" in data["environment"]["nvidia_smi"]
    kinds = data["kinds"]
    for name in ("flash2_fwd_bwd_32k_x_16k", "gemm_bf16_8192", "gemm_fp8_8192"):
        assert kinds[name]["power_w"]["median"] > 0.98 * 700, name
        assert kinds[name]["sm_clock_mhz"]["median"] < 0.95 * 1980, name
        assert kinds[name]["power_w"]["n"] >= 40
    assert kinds["copy_1gib"]["power_w"]["p90"] < 0.6 * 700
    assert kinds["copy_1gib"]["sm_clock_mhz"]["median"] == 1980
    # the throughputs are the device's: a bf16 GEMM at 0.6-0.85 of the 989.5 TFLOP/s peak
    assert 0.6 < kinds["gemm_bf16_8192"]["per_second"] / 989.5e12 < 0.85


def test_an_h200_draws_near_its_limit_on_compute_too():
    """The H200 (same GH100 compute, HBM3e): the GEMMs at the 700 W limit, attention just
    under it (at full clock), the copy far under."""
    data = _draw("power_draw_h200.json.gz")
    assert data["environment"]["gpu"] == "NVIDIA H200"
    kinds = data["kinds"]
    for name in ("gemm_bf16_8192", "gemm_fp8_8192"):
        assert kinds[name]["power_w"]["median"] > 0.98 * 700, name
    assert 0.9 * 700 < kinds["flash2_fwd_bwd_32k_x_16k"]["power_w"]["median"] < 700
    # at a 500 W limit every compute kind would be held back and the copy would not
    assert kinds["copy_1gib"]["power_w"]["p90"] < 500
    assert min(v["power_w"]["median"] for k, v in kinds.items() if k != "copy_1gib") > 600


def test_the_line_runs_through_the_two_published_hopper_matmuls():
    (w0, s0, t0), (w1, s1, t1) = HOPPER_POWER_POINTS
    # the PCIe part's best square product (n = 4,096) and the SXM part's best matmul
    assert (w0, s0, t0) == (350.0, 114, 495.93)
    assert (w1, s1, t1) == (700.0, 132, 794.5)


def test_a_500_w_h100_keeps_what_the_line_gives():
    # by hand: TFLOP/s per multiprocessor at watts per multiprocessor, linear between the
    # PCIe part (495.93 / 114 at 350 / 114) and the SXM part (794.5 / 132 at 700 / 132)
    x0, y0, x1, y1 = 350 / 114, 495.93 / 114, 700 / 132, 794.5 / 132
    at_500 = y0 + (y1 - y0) * (500 / 132 - x0) / (x1 - x0)
    assert compute_scale("h100", 500) == pytest.approx(at_500 / y1, rel=1e-12)
    assert 0.80 < compute_scale("h100", 500) < 0.82
    # the PCIe part capped at 300 W, on the same line below its own point
    at_300 = y0 + (y1 - y0) * (300 / 114 - x0) / (x1 - x0)
    assert compute_scale("h100-pcie", 300) == pytest.approx(at_300 / y0, rel=1e-12)


def test_no_limit_or_one_at_the_rated_power_changes_nothing():
    assert compute_scale("h100", None) == 1.0
    assert compute_scale("h100", 700) == 1.0 and compute_scale("h200", 800) == 1.0
    assert compute_scale("h100-pcie", 350) == 1.0
    assert rated_power("h800") == (700.0, 132) and rated_power("h100-pcie") == (350.0, 114)
    assert rated_power("a100") is None


def test_a_limit_on_a_family_without_measurements_is_refused_by_name():
    with pytest.raises(pk.PerfkitError, match="'a100'.*Hopper"):
        compute_scale("a100", 300)
    with pytest.raises(pk.PerfkitError, match="power_limit_w"):
        pk.Hardware.preset("h100").replace(power_limit_w=-5)


def test_the_step_model_slows_compute_and_keeps_the_datasheet_mfu():
    model = pk.ModelSpec.preset("llama2-7b")
    par = pk.ParallelConfig(dp=8, micro_batch_size=2, num_micro_batches=4)
    full = pk.Hardware.preset("h100")
    capped = full.replace(power_limit_w=500)
    scale = compute_scale("h100", 500)
    assert sustained_peak(capped, "bf16") == pytest.approx(989.5e12 * scale)
    assert capped.peak("bf16") == full.peak("bf16") == 989.5e12
    a = pk.plan.predict(None, model, par, full, dtype="bf16")
    b = pk.plan.predict(None, model, par, capped, dtype="bf16")
    # compute slows by at most 1/scale (memory-bound kernels keep their speed) and by more
    # than half of it (a 7B layer's time is mostly matrix products)
    ratio = b.parts["compute"] / a.parts["compute"]
    assert 1 + 0.5 * (1 / scale - 1) < ratio <= 1 / scale + 1e-9
    assert b.parts["optimizer"] == pytest.approx(a.parts["optimizer"])
    # MFU on the datasheet peak: lower by exactly the step's ratio
    assert b.mfu == pytest.approx(a.mfu * a.step_s / b.step_s)


def test_the_planner_says_the_limit_it_priced():
    par = pk.ParallelConfig(dp=8, micro_batch_size=1, num_micro_batches=4)
    table = assumptions(None, par, pk.Hardware.preset("h100").replace(power_limit_w=500)).table
    row = table[table["name"] == "power_limit_w"].iloc[0]
    assert row["value"] == 500 and row["origin"] == "you"
    assert row["text"] == "500 W (700 rated): compute × 0.81"
    table = assumptions(None, par, pk.Hardware.preset("h100")).table
    assert "rated power" in table[table["name"] == "power_limit_w"].iloc[0]["text"]
