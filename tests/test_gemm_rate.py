"""The GEMM shape surface (perfkit.calc.gemm_rate) against the H100 measurements it was fitted
to and the ones it was not (tests/data/kernel_rates_h100, PROVENANCE.md there)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import perfkit as pk
from perfkit.calc.gemm_rate import (
    H100_PCIE_PUBLISHED_BF16,
    H100_PCIE_SCALE,
    SURFACES,
    GemmSurface,
    fit_surface,
    surface_for,
)
from perfkit.calc.rates import Rates
from perfkit.calc.timing import layer_costs
from perfkit.calc.timing_kernels import gemm_seconds
from perfkit.errors import InvalidArgumentError
from tests.kernel_rates import runs

PEAK, BW = 989.5e12, 3350e9  # the "h100" preset: bf16 dense peak, HBM3 bandwidth
TOOL = Path(__file__).resolve().parents[1] / "tools" / "fit_gemm_surface.py"


def _tool():
    spec = importlib.util.spec_from_file_location("fit_gemm_surface", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_surfaces_are_what_their_measurements_fit():
    fitted = _tool().fit()
    for name in ("hopper-bf16", "hopper-fp8"):
        for field in ("e_max", "m_half", "n_half", "k_half", "fixed_s", "byte_efficiency"):
            assert getattr(SURFACES[name], field) == pytest.approx(
                getattr(fitted[name], field), rel=2e-3), (name, field)


def test_the_surface_times_layer_products_its_shape_was_not_fitted_to():
    """Llama layers' forward, input- and weight-gradient products (576) on two machines;
    the shape was fitted to machine A's grid, only the machines' median entered e_max."""
    held = _tool().held_out()
    assert set(held) == {"A", "B"}
    for m, n, k, t in held.values():
        assert len(t) == 576
        err = np.abs(SURFACES["hopper-bf16"].times(m, n, k, PEAK, BW) / t - 1)
        assert err.mean() < 0.08 and np.percentile(err, 95) < 0.16
        # the size curve at its published defaults (Calculon's A100 table):
        # (F + 0.58e9) / (0.95·peak) + B / (0.9·bandwidth)
        flops, nbytes = 2 * m * n * k, 2 * (m * k + k * n + m * n)
        size = (flops + 0.58e9) / (0.95 * PEAK) + nbytes / (0.9 * BW)
        assert np.abs(size / t - 1).mean() > 1.5 * err.mean()


def test_the_surface_meets_the_median_machine():
    """Surface time / measured time on each machine's layer products, the surface's shape
    before the scale: A is the slowest of the three, and the scale is the middle one."""
    tool = _tool()
    first, second = runs()
    grid = fit_surface(tool.mean_shapes("gemm", first, second), PEAK, BW)
    factors = tool.machine_factors(grid)
    assert factors["A"] < factors["B"] < factors["C"]
    assert SURFACES["hopper-bf16"].e_max == pytest.approx(grid.e_max * factors["B"], rel=2e-3)


def test_large_products_run_at_three_quarters_of_the_peak_not_095():
    """Machine A's largest products ran at 0.68-0.76 of the 989.5 TFLOP/s peak (power-
    limited); the surface, set to the median machine, is a little above A's median and
    under 0.8: far from the size curve's 0.95."""
    first, _ = runs()
    big = [r["tflops"] * 1e12 / PEAK for r in first["gemm"] if min(r["m"], r["n"], r["k"]) >= 8192]
    assert 0.6 < min(big) and max(big) < 0.8
    e = SURFACES["hopper-bf16"].efficiency(16384, 16384, 16384)
    assert np.median(big) < e < 0.8


def test_real_operands_run_like_random_ones():
    """A training step's own operands (machine C) against random normal ones of the same
    shapes: within 15 % product by product (the output head 15 %), 2 % at the median."""
    import gzip
    import json

    from tests.kernel_rates import DATA

    rows = json.loads(gzip.open(DATA / "operands.json.gz").read())["gemms"]
    ratio = np.array([r["randn_ms"] / r["real_ms"] for r in rows])
    assert len(rows) == 18
    assert np.all(np.abs(ratio - 1) < 0.15) and abs(np.median(ratio) - 1) < 0.05


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
                                          ("mi300x", None), ("v100", "volta"),
                                          ("v100-pcie", "volta")])
def test_which_hardware_runs_on_a_measured_surface(name, family):
    got = surface_for(name, "bf16")
    assert (got.name.split("-")[0] if got else None) == family
    assert surface_for(name, "bf16", "size") is None
    if family == "hopper":
        part = "hopper-pcie" if name == "h100-pcie" else "hopper"
        assert surface_for(name, "fp8") is SURFACES[f"{part}-fp8"]
        assert surface_for(name, "bf16", "shape") is SURFACES[f"{part}-bf16"]
    elif family == "volta":
        assert surface_for(name, "fp16", "shape") is SURFACES["volta-fp16"]
        assert surface_for(name, "fp32") is None  # CUDA cores: the size curve
        with pytest.raises(InvalidArgumentError, match="in fp32"):
            surface_for(name, "fp32", "shape")
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


def test_shape_asked_for_is_auto_on_hopper_and_refused_elsewhere():
    model = pk.ModelSpec.preset("llama2-7b")
    h100, a100 = pk.Hardware.preset("h100"), pk.Hardware.preset("a100")
    shape = layer_costs(model, h100, Rates(gemm_model="shape"), tp=2)
    assert shape == layer_costs(model, h100, Rates(), tp=2)
    with pytest.raises(InvalidArgumentError, match="needs a measured GEMM surface"):
        layer_costs(model, a100, Rates(gemm_model="shape"), tp=2)


def test_the_h100_surface_holds_on_an_h200():
    """The 576 layer products timed on a lent H200 (same GH100 multiprocessors, more
    bandwidth): the surface, at the H200 preset's 4.8 TB/s, is within the H100 machines'
    own spread (the H200 ran 5 % slower than the surface at the median, the slowest H100
    2 % slower): 7 % mean error, 15 % at the 95th percentile."""
    import gzip
    import json

    from tests.kernel_rates import DATA

    rows = json.loads(gzip.open(DATA / "duty_h200.json.gz").read())["gemm_duty"]
    assert "H200" in json.loads(gzip.open(DATA / "duty_h200.json.gz").read())[
        "environment"]["gpu"]
    tool = _tool()
    m, n, k = np.array([tool.layout_shape(r) for r in rows], dtype=float).T
    t = np.array([1e-3 * r["alone_ms"] for r in rows])
    h200 = pk.Hardware.preset("h200")
    err = SURFACES["hopper-bf16"].times(m, n, k, h200.peak("bf16"), h200.memory_bandwidth) / t - 1
    assert len(rows) == 576
    assert np.abs(err).mean() < 0.08 and np.percentile(np.abs(err), 95) < 0.16
    assert -0.08 < np.median(err) < 0.0


def test_a_step_time_calibration_moves_the_surface_up_to_the_peak():
    """A measured step 15 % under the default H100 prediction closes by scaling the surface
    (beyond the 5 % gemm_efficiency would allow); one 30 % under cannot close, every
    shape's efficiency capped at 1, and says so."""
    from perfkit import plan
    from perfkit.plan.calibrate import NOT_CLOSED_NOTE

    model, par = pk.ModelSpec.preset("llama2-7b"), pk.ParallelConfig(dp=8, num_micro_batches=4)
    base = plan.predict(None, model, par, "h100", dtype="bf16").step_s
    fast = plan.calibrate(0.85 * base, model=model, parallel=par, hardware="h100",
                          dtype="bf16")
    assert fast.rates.gemm_surface_scale > 1.1
    assert plan.predict(fast, model, par, "h100", dtype="bf16").step_s == pytest.approx(
        0.85 * base, rel=1e-6)
    too_fast = plan.calibrate(0.7 * base, model=model, parallel=par, hardware="h100",
                              dtype="bf16")
    assert plan.predict(too_fast, model, par, "h100", dtype="bf16").step_s > 0.7 * base
    assert any("highest rates" in n for n in too_fast.notes)
    assert NOT_CLOSED_NOTE.endswith("(every kernel's efficiency at most 1)")
    with pytest.raises(InvalidArgumentError, match="gemm_surface_scale"):
        Rates(gemm_surface_scale=3.0)


#: OpenXLA's published H100 (sm_90) matmul rates, BF16 x BF16 -> BF16, FLOP/s, the entries
#: with ``b: 1`` and at least 8 GFLOP: ``kDefaultMatmulPTable`` of
#: ``xla/service/gpu/model/matmul_interpolator_data.h`` (the copy in tensorflow/tensorflow
#: ``third_party/xla/...`` at commit 372d578bb861cc5804e56d37d93aec931a59762c). Measured by
#: the XLA team, not for perfkit: a source the surface was not fitted to.
XLA_SM90_BF16 = {  # (M, N, K): FLOP/s
    (2048, 2048, 2048): 631_984_593_290_170,
    (4096, 4096, 4096): 783_328_793_548_203,
    (4096, 4096, 256): 392_162_828_341_855,
    (4096, 2048, 512): 447_019_910_074_937,
    (2048, 1024, 2048): 523_265_996_101_364,
    (1024, 2048, 2048): 524_288_000_000_000,
}


def test_the_surface_times_xla_s_published_h100_products_within_10_percent():
    """Products of 8-137 GFLOP: the surface's time within 10 % of the time XLA's rate
    gives (``2MNK / rate``). Smaller products are not held to it: XLA's table gives
    them 2-6 µs more than the surface (its timing includes more of a call's fixed cost
    than the device time the surface was fitted to; docs/planner.md)."""
    surface = surface_for("h100", "bf16", "shape")
    for (m, n, k), rate in XLA_SM90_BF16.items():
        assert 2 * m * n * k >= 8e9
        published = 2 * m * n * k / rate
        assert surface.seconds(m, n, k, PEAK, BW) == pytest.approx(published, rel=0.10), \
            (m, n, k)


#: Maximum Achievable Matmul FLOPS (MAMF, mean of 100 iterations at the best shape a
#: brute-force search found), TFLOP/s: stas00/ml-engineering, compute/accelerator/README.md,
#: "Maximum Achievable Matmul FLOPS comparison table" (torch 2.7.0+cu126 / 2.7.1+cu128).
MAMF = [  # (preset, dtype, (M, N, K), TFLOP/s)
    ("h100", "bf16", (2048, 2048, 13312), 794.5),
    ("h100", "fp8", (1024, 9216, 14336), 1402.6),
    ("h200", "fp8", (1280, 4096, 12032), 1453.4),
]


@pytest.mark.parametrize("preset,dtype,shape,tflops", MAMF,
                         ids=[f"{p}-{d}" for p, d, _, _ in MAMF])
def test_the_hopper_surfaces_at_the_published_best_shapes(preset, dtype, shape, tflops):
    """At each published best shape, the surface's rate is within 8 % of the MAMF figure
    (the lent H100s alone spread by 10 %, docs/planner.md): bf16 −7.0 %, FP8 −0.0 %, the
    H200's FP8 −5.5 % when this was written. The surface is the slower side, as a search
    for the best shape and its best run should be."""
    hw = pk.Hardware.preset(preset)
    m, n, k = shape
    seconds = surface_for(preset, dtype, "shape").seconds(m, n, k, hw.peak(dtype),
                                                          hw.memory_bandwidth)
    rate = 2 * m * n * k / seconds / 1e12
    assert rate == pytest.approx(tflops, rel=0.08)
    assert rate <= tflops * 1.001


#: A third published table: square bf16 ``torch.matmul`` on an NVIDIA H100 80GB HBM3 (SXM),
#: PyTorch 2.7.0+cu128, TFLOP/s by n (zzc0721/torch-performance-test-data, issue #79), and
#: on an H100 PCIe (PyTorch 2.9.0+cu128, issue #95).
PUBLISHED_SQUARE_BF16 = {
    "h100": {1024: 176.62, 2048: 676.59, 4096: 788.72, 8192: 797.51, 10240: 719.72},
    "h100-pcie": {1024: 217.70, 2048: 449.09, 4096: 495.93, 8192: 492.84, 10240: 471.79},
}


def test_the_surface_on_a_third_published_h100_table():
    """n = 2,048-10,240 on the SXM part: within 8 % each (−6.4, −7.6, −5.5, +5.3 % when
    this was written). n = 1,024 (2 GFLOP) is not held to it: host-timed benchmarks give
    small products more fixed cost than the device time the surface was fitted to (XLA's
    table above). On the power-limited 350 W PCIe part the surface, which scales with the
    part's datasheet peak, is 11-23 % faster than published from n = 2,048 up: its largest
    products reach 0.66 of that peak, where the SXM's reach 0.81 (docs/planner.md); the
    PCIe part has its own level for that (the next test)."""
    def ratios(surface, name, table):
        hw = pk.Hardware.preset(name)
        return {n: 2 * n ** 3 / surface.seconds(n, n, n, hw.peak("bf16"),
                                                hw.memory_bandwidth) / 1e12 / t
                for n, t in table.items() if n >= 2048}

    sxm = surface_for("h100", "bf16", "shape")
    on_sxm = ratios(sxm, "h100", PUBLISHED_SQUARE_BF16["h100"])
    assert all(abs(r - 1) < 0.08 for r in on_sxm.values()), on_sxm
    pcie_on_sxm = ratios(sxm, "h100-pcie", PUBLISHED_SQUARE_BF16["h100-pcie"])
    assert all(1.05 < r < 1.3 for r in pcie_on_sxm.values()), pcie_on_sxm


#: An H800 PCIe (350 W, the H100 PCIe's datasheet peak: 756 TFLOP/s bf16, 2 TB/s), square
#: bf16 products, PyTorch 2.8.0+cu128 (zzc0721/torch-performance-test-data, issue #112).
H800_PCIE_BF16 = {2048: 483.89, 4096: 503.83, 8192: 499.46, 10240: 487.22}


def test_the_pcie_surface_is_what_its_table_fits_and_holds_on_another_pcie_part():
    """The H100 PCIe's surfaces are the SXM's with e_max × H100_PCIE_SCALE, fitted here
    (e_max alone) to the PCIe table; held out, an H800 PCIe's table: within 11 % each,
    under 6 % on average."""
    table = PUBLISHED_SQUARE_BF16["h100-pcie"]
    assert H100_PCIE_PUBLISHED_BF16 == {n: t for n, t in table.items() if n >= 2048}
    peak, bw = 756e12, 2000e9
    rows = [(n, n, n, 2 * n ** 3 / (t * 1e12)) for n, t in H100_PCIE_PUBLISHED_BF16.items()]
    fitted = fit_surface(rows, peak, bw, start=SURFACES["hopper-bf16"],
                         fixed=("m_half", "n_half", "k_half", "fixed_s", "byte_efficiency"))
    assert H100_PCIE_SCALE == pytest.approx(fitted.e_max / SURFACES["hopper-bf16"].e_max,
                                            rel=1e-3)
    pcie = surface_for("h100-pcie", "bf16")
    assert pcie.e_max == pytest.approx(fitted.e_max, rel=1e-3)
    assert surface_for("h100-pcie", "fp8").e_max == pytest.approx(
        SURFACES["hopper-fp8"].e_max * H100_PCIE_SCALE, rel=1e-3)
    errors = [2 * n ** 3 / pcie.seconds(n, n, n, peak, bw) / 1e12 / t - 1
              for n, t in H800_PCIE_BF16.items()]
    assert max(abs(e) for e in errors) < 0.11
    assert sum(abs(e) for e in errors) / len(errors) < 0.06


#: Square bf16 ``torch.matmul`` on an NVIDIA H20, PyTorch 2.7.0+cu128, TFLOP/s by n
#: (zzc0721/torch-performance-test-data, issue #77).
H20_BF16 = {1024: 95.12, 2048: 120.27, 4096: 133.41, 8192: 138.60, 10240: 142.25}


#: Square bf16 ``torch.matmul`` on an Ascend 910B2 (torch_npu, PyTorch 2.5.1), TFLOP/s by n
#: (zzc0721/torch-performance-test-data, issue #109).
ASCEND_910B2_BF16 = {1024: 99.86, 2048: 248.30, 4096: 315.36, 8192: 301.23, 10240: 300.94}


def test_the_size_curve_holds_on_an_ascend_910b2_from_2048():
    """Ascend keeps the size curve; on a published 910B2 table it is within 10 % from
    n = 2,048 up (−1.6, −9.3, +2.8, +4.5 % when this was written). n = 1,024 ran at
    100 TFLOP/s, 21 µs a call: host dispatch, which a host-timed benchmark counts and the
    device-time curve does not (the H100's n = 1,024 likewise)."""
    hw = pk.Hardware.preset("ascend-910b2")
    assert surface_for("ascend-910b2", "bf16") is None
    for n, published in ASCEND_910B2_BF16.items():
        flops = 2.0 * n ** 3
        rate = flops / gemm_seconds(flops, 6.0 * n * n, hw.peak("bf16"), hw.memory_bandwidth,
                                    Rates()) / 1e12
        if n >= 2048:
            assert rate == pytest.approx(published, rel=0.10), n
        else:
            assert rate > 1.5 * published


def test_the_size_curve_holds_on_the_h20_which_has_no_surface():
    """The H20 (Hopper's chip cut to 148 TFLOP/s bf16) keeps the size curve, and a published
    table says that is right: its products reach 0.96 of that peak, and the curve at its
    defaults (Calculon's A100 table) is within 8 % at every size (+6.8 % at n = 1,024)."""
    hw = pk.Hardware.preset("h20")
    assert surface_for("h20", "bf16") is None
    for n, published in H20_BF16.items():
        flops = 2.0 * n ** 3
        seconds = gemm_seconds(flops, 6.0 * n * n, hw.peak("bf16"), hw.memory_bandwidth,
                               Rates())
        assert flops / seconds / 1e12 == pytest.approx(published, rel=0.08), n
