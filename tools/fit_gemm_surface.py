"""Fit the measured GEMM surfaces of :mod:`perfkit.calc.gemm_rate` from their measurements.

Reads the two runs of ``tools/measure_kernel_rates.py`` shipped in
``tests/data/kernel_rates_h100`` and prints, per surface, the fitted figures that
``perfkit.calc.gemm_rate.SURFACES`` holds and the errors on the products the fit did not
see (the ``gemm_layouts`` section)::

    python tools/fit_gemm_surface.py

Each product's time is the geometric mean of the two runs. ``hopper-bf16`` is fitted to the
``gemm`` grid; ``hopper-fp8`` to the ``gemm_fp8`` products with the rows' and columns'
halves and the byte efficiency held at the bf16 surface's. The grid and the FP8 products
were timed on one lent H100 (machine A); two more (B, C) timed Llama layer products, and
the lent H100s differ: both surfaces' ``e_max`` are scaled so that they meet the median
machine on those products (:func:`machine_factors`).
"""

from __future__ import annotations

import gzip
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from perfkit.calc.gemm_rate import fit_surface

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "kernel_rates_h100"
PEAK_BF16, PEAK_FP8, BANDWIDTH = 989.5e12, 1979e12, 3350e9  # perfkit's "h100" preset


def runs() -> tuple[dict, dict]:
    """The two measurement runs."""
    return tuple(json.loads(gzip.open(DATA / f"run{i}.json.gz").read()) for i in (1, 2))


def layout_shape(row: dict) -> tuple[int, int, int]:
    """(M, N, K) of a ``gemm_layouts`` row's product (the row gives the forward's m, n, k)."""
    m, n, k = row["m"], row["n"], row["k"]
    return {"fwd_nt": (m, n, k), "dgrad_nn": (m, k, n), "wgrad_tn": (n, k, m)}[row["layout"]]


def mean_shapes(section: str, first: dict, second: dict, shape=None) -> list[tuple]:
    """(m, n, k, seconds) per product, the seconds the geometric mean of the two runs."""
    shape = shape or (lambda r: (r["m"], r["n"], r["k"]))
    return [(*shape(a), 1e-3 * float(np.sqrt(a["ms"] * b["ms"])))
            for a, b in zip(first[section], second[section], strict=True)]


def machine_factors(bf16) -> dict[str, float]:
    """Per lent H100, the median of ``surface time / measured time`` over the Llama layer
    products it timed: machine A (``run1``, ``run2``: 576 products each, their mean), B
    (``duty.json.gz``: the same 576, back to back) and C (``operands.json.gz``: 18 of them,
    random normal operands)."""
    first, second = runs()
    duty = json.loads(gzip.open(DATA / "duty.json.gz").read())["gemm_duty"]
    operands = json.loads(gzip.open(DATA / "operands.json.gz").read())["gemms"]

    def factor(rows: list[dict], key: str) -> float:
        return float(np.median([bf16.seconds(*layout_shape(r), PEAK_BF16, BANDWIDTH)
                                / (1e-3 * r[key]) for r in rows]))

    return {"A": (factor(first["gemm_layouts"], "ms") + factor(second["gemm_layouts"], "ms"))
            / 2, "B": factor(duty, "alone_ms"), "C": factor(operands, "randn_ms")}


def held_out() -> dict[str, tuple[np.ndarray, ...]]:
    """(M, N, K, seconds) of the layer products per machine: A's (the two runs' geometric
    mean) and B's, back to back (``duty.json.gz``, ``alone_ms``)."""
    first, second = runs()
    duty = json.loads(gzip.open(DATA / "duty.json.gz").read())["gemm_duty"]
    b = [(*layout_shape(r), 1e-3 * r["alone_ms"]) for r in duty]
    return {"A": tuple(np.array(mean_shapes("gemm_layouts", first, second, layout_shape)).T),
            "B": tuple(np.array(b, dtype=float).T)}


def fit() -> dict:
    """The shipped surfaces: the shape fitted to machine A's grid, ``e_max`` then scaled so
    that the surface meets the median machine (:func:`machine_factors`)."""
    first, second = runs()
    grid = fit_surface(mean_shapes("gemm", first, second), PEAK_BF16, BANDWIDTH,
                       name="hopper-bf16")
    scale = float(np.median(list(machine_factors(grid).values())))
    bf16 = replace(grid, e_max=grid.e_max * scale)
    fp8 = fit_surface(mean_shapes("gemm_fp8", first, second), PEAK_FP8, BANDWIDTH,
                      name="hopper-fp8", input_bytes=1.0, start=grid,
                      fixed=("m_half", "n_half", "byte_efficiency"))
    fp8 = replace(fp8, e_max=fp8.e_max * scale)  # FP8 was measured on machine A only
    return {"hopper-bf16": bf16, "hopper-fp8": fp8}


def main() -> int:
    first, second = runs()
    surfaces = fit()
    grid = fit_surface(mean_shapes("gemm", first, second), PEAK_BF16, BANDWIDTH)
    print("machines, surface / measured on their layer products before the scale: "
          + ", ".join(f"{k} {v:.3f}" for k, v in machine_factors(grid).items()))
    for name, sf in surfaces.items():
        print(f"{name}: e_max={sf.e_max:.4g} m_half={sf.m_half:.4g} n_half={sf.n_half:.4g} "
              f"k_half={sf.k_half:.4g} fixed_s={sf.fixed_s:.4g} "
              f"byte_efficiency={sf.byte_efficiency:.4g}")
    for machine, (m, n, k, t) in held_out().items():
        err = np.abs(surfaces["hopper-bf16"].times(m, n, k, PEAK_BF16, BANDWIDTH) / t - 1) * 100
        print(f"hopper-bf16 on machine {machine}'s {len(t)} layer products: "
              f"mean {err.mean():.1f} %, p95 {np.percentile(err, 95):.1f} %, "
              f"worst {err.max():.1f} %")
    pairs = zip(first["gemm_layouts"], second["gemm_layouts"], strict=True)
    noise = np.abs(np.array([a["ms"] / b["ms"] - 1 for a, b in pairs])) * 100
    print(f"machine A's two runs differ by {noise.mean():.1f} % / "
          f"{np.percentile(noise, 95):.1f} % / {noise.max():.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
