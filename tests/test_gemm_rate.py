"""The GEMM shape surface (perfkit.calc.gemm_rate) against the H100 measurements it was fitted
to and the ones it was not (tests/data/kernel_rates_h100, PROVENANCE.md there)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import perfkit as pk
from perfkit.calc.gemm_rate import SURFACES, GemmSurface, fit_surface, surface_for
from perfkit.calc.rates import Rates
from perfkit.calc.timing import layer_costs
from perfkit.errors import InvalidArgumentError
from tests.kernel_rates import runs

PEAK, BW = 989.5e12, 3350e9  # the "h100" preset: bf16 dense peak, HBM3 bandwidth
TOOL = Path(__file__).resolve().parents[1] / "tools" / "fit_gemm_surface.py"


def _tool():
    spec = importlib.util.spec_from_file_location("fit_gemm_surface", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _held_out() -> tuple[np.ndarray, ...]:
    """(M, N, K, seconds) of the layout products, each the geometric mean of the two runs;
    a row gives the forward's m, n, k: the input gradient is (m, k, n), the weight's
    (n, k, m)."""
    first, second = runs()
    rows = []
    for a, b in zip(first["gemm_layouts"], second["gemm_layouts"], strict=True):
        m, n, k = a["m"], a["n"], a["k"]
        shape = {"fwd_nt": (m, n, k), "dgrad_nn": (m, k, n), "wgrad_tn": (n, k, m)}[a["layout"]]
        rows.append((*shape, 1e-3 * (a["ms"] * b["ms"]) ** 0.5))
    return tuple(np.array(rows, dtype=float).T)


def test_the_shipped_surfaces_are_what_their_measurements_fit():
    fitted = _tool().fit()
    for name in ("hopper-bf16", "hopper-fp8"):
        for field in ("e_max", "m_half", "n_half", "k_half", "fixed_s", "byte_efficiency"):
            assert getattr(SURFACES[name], field) == pytest.approx(
                getattr(fitted[name], field), rel=2e-3), (name, field)


def test_the_surface_times_products_it_did_not_see_better_than_the_size_curve():
    m, n, k, t = _held_out()
    assert len(t) == 576
    surface = SURFACES["hopper-bf16"].times(m, n, k, PEAK, BW)
    err = np.abs(surface / t - 1)
    assert err.mean() < 0.06 and np.percentile(err, 95) < 0.15
    # the size curve at its published defaults (Calculon's A100 table):
    # (F + 0.58e9) / (0.95·peak) + B / (0.9·bandwidth)
    flops, nbytes = 2 * m * n * k, 2 * (m * k + k * n + m * n)
    size = (flops + 0.58e9) / (0.95 * PEAK) + nbytes / (0.9 * BW)
    assert np.abs(size / t - 1).mean() > 2 * err.mean()


def test_large_products_reach_the_measured_share_of_the_peak():
    """The largest products of the grid ran at 0.68-0.76 of the 989.5 TFLOP/s peak: the
    surface's e_max, not the size curve's 0.95."""
    first, _ = runs()
    big = [r["tflops"] * 1e12 / PEAK for r in first["gemm"] if min(r["m"], r["n"], r["k"]) >= 8192]
    assert 0.6 < min(big) and max(big) < 0.8
    assert SURFACES["hopper-bf16"].efficiency(16384, 16384, 16384) == pytest.approx(
        np.median(big), abs=0.05)


def test_fit_surface_recovers_a_known_surface():
    true = dict(e_max=0.7, m_half=30.0, n_half=60.0, k_half=200.0, fixed_s=4e-6,
                byte_efficiency=0.8)
    rows = []
    for m in (128, 512, 2048, 8192):
        for n in (256, 1024, 4096):
            for k in (64, 256, 1024, 8192):
                e = true["e_max"] * m / (m + 30) * n / (n + 60) * k / (k + 200)
                t = 4e-6 + max(2 * m * n * k / (e * PEAK),
                               2 * (m * k + k * n + m * n) / (0.8 * BW))
                rows.append((m, n, k, t))
    got = fit_surface(rows, PEAK, BW)
    for name, value in true.items():
        assert getattr(got, name) == pytest.approx(value, rel=1e-3), name
    held = fit_surface(rows, PEAK, BW, start=GemmSurface("s", 0.5, 30.0, 60.0, 10.0, 1e-6, 0.8),
                       fixed=("m_half", "n_half", "byte_efficiency"))
    assert (held.m_half, held.n_half) == (30.0, 60.0)
    assert held.k_half == pytest.approx(200.0, rel=1e-3)


@pytest.mark.parametrize("rows, why", [([(1, 1, 1, 1e-6)] * 2, "at least three"),
                                       ([(1, 1, 0, 1e-6)] * 3, "positive")])
def test_fit_surface_refuses_what_it_cannot_fit(rows, why):
    with pytest.raises(InvalidArgumentError, match=why):
        fit_surface(rows, PEAK, BW)


@pytest.mark.parametrize("name, family", [("h100", "hopper"), ("h200", "hopper"),
                                          ("h800", "hopper"), ("gh200", "hopper"),
                                          ("h100-pcie", "hopper"), ("a100", None),
                                          ("h20", None), ("ascend-910b", None),
                                          ("mi300x", None)])
def test_which_hardware_runs_on_a_measured_surface(name, family):
    got = surface_for(name, "bf16")
    assert (got.name.split("-")[0] if got else None) == family
    assert surface_for(name, "bf16", "size") is None
    if family:
        assert surface_for(name, "fp8") is SURFACES["hopper-fp8"]
        assert surface_for(name, "bf16", "shape") is SURFACES["hopper-bf16"]
    else:
        with pytest.raises(InvalidArgumentError, match="needs a measured GEMM surface"):
            surface_for(name, "bf16", "shape")


def test_rates_refuse_an_unknown_gemm_model():
    with pytest.raises(InvalidArgumentError, match="gemm_model"):
        Rates(gemm_model="table")


def test_off_hopper_auto_is_the_size_curve_and_on_hopper_it_is_not():
    model = pk.ModelSpec.preset("llama2-7b")
    for name, same in (("a100", True), ("h100", False)):
        hw = pk.Hardware.preset(name)
        auto = layer_costs(model, hw, Rates(), tp=2)
        size = layer_costs(model, hw, Rates(gemm_model="size"), tp=2)
        assert (auto.fwd == pytest.approx(size.fwd, rel=1e-12)) is same


def test_a_calibration_factor_scales_the_surface():
    """gemm_efficiency / 0.95 multiplies every shape's arithmetic rate."""
    s = SURFACES["hopper-bf16"]
    m, n, k = 4096.0, 4096.0, 4096.0
    compute = 2 * m * n * k / (s.efficiency(m, n, k) * PEAK)
    assert s.seconds(m, n, k, PEAK, BW, scale=0.5) == pytest.approx(s.fixed_s + 2 * compute)
