"""The simulator prices matrix products as the step model does (issue 65, point 7): on the
hardware's measured GEMM surface by their (M, N, K) where perfkit has one, scaled so that a
very large product reaches the simulation's ``efficiency``; elsewhere on the size curve.

The expected durations are computed here from the surface's published formula
(``t = t0 + max(2MNK / (e·peak), B / (e_B·bandwidth))``, ``e = e_max·Π d/(d + d½)``, see
:mod:`perfkit.calc.gemm_rate`) and the shapes the simulated ``kernel_details.csv`` records,
read with the csv module.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

import perfkit as pk
from perfkit.calc.gemm_rate import SURFACES
from perfkit.simulate import simulate

MODEL = pk.ModelSpec.preset("llama2-7b").replace(num_layers=2, seq_length=1024)


def _matmuls(root: Path) -> list[tuple[int, int, int, float]]:
    """(M, N, K, duration µs) of every MatMul of one rank's kernel_details.csv."""
    path = next(root.glob("*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))
    out = []
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if not row["Type"].startswith("MatMul"):
                continue
            a, b = row["Input Shapes"].strip('"').split(";")[:2]
            m, k = (int(x) for x in a.split(","))
            n = int(b.split(",")[1])
            out.append((m, n, k, float(row["Duration(us)"])))
    return out


def _surface_us(m: int, n: int, k: int, efficiency: float, peak: float,
                bandwidth: float) -> float:
    s = SURFACES["hopper-bf16"]
    e = s.e_max * m / (m + s.m_half) * n / (n + s.n_half) * k / (k + s.k_half)
    e *= efficiency / s.e_max  # the largest product at the simulation's efficiency
    compute = 2.0 * m * n * k / (e * peak)
    memory = 2.0 * (m * k + k * n + m * n) / (s.byte_efficiency * bandwidth)
    return (s.fixed_s + max(compute, memory)) * 1e6


@pytest.mark.parametrize("tp", [1, 2])
def test_simulated_h100_products_run_on_the_measured_surface(tmp_path, tp):
    hw = pk.Hardware.preset("h100")
    efficiency = 0.62
    root = simulate(MODEL, pk.ParallelConfig(tp=tp, num_micro_batches=1), hw, steps=1,
                    out=tmp_path / "run", noise=0.0, efficiency=efficiency,
                    aic_metrics=None)
    products = _matmuls(root)
    assert len({(m, n, k) for m, n, k, _ in products}) >= 8  # forward, dx and dw shapes
    for m, n, k, us in products:
        want = _surface_us(m, n, k, efficiency, hw.peak(), hw.memory_bandwidth)
        assert us == pytest.approx(want, rel=2e-3, abs=2e-3), (m, n, k)


def test_products_of_the_same_flops_differ_by_shape_on_h100_not_on_ascend(tmp_path):
    """The weight gradient of the attention output (K = the tokens) and its input gradient
    (K = the hidden size / tp) have the same FLOPs; on the H100 surface their times follow
    their shapes, on the Ascend size curve (no measured surface) they are equal."""
    par = pk.ParallelConfig(tp=2, num_micro_batches=1)
    seen = {}
    for name in ("h100", "ascend-910b"):
        root = simulate(MODEL, par, pk.Hardware.preset(name), steps=1, noise=0.0,
                        out=tmp_path / name, aic_metrics=None)
        by_flops: dict[int, set[float]] = {}
        for m, n, k, us in _matmuls(root):
            by_flops.setdefault(m * n * k, set()).add(round(us, 2))
        seen[name] = max(len(v) for v in by_flops.values())
    assert seen["h100"] > 1
    assert seen["ascend-910b"] == 1
