"""Fit the measured GEMM surfaces of :mod:`perfkit.calc.gemm_rate` from their measurements.

Reads the two runs of ``tools/measure_kernel_rates.py`` shipped in
``tests/data/kernel_rates_h100`` and prints, per surface, the fitted figures that
``perfkit.calc.gemm_rate.SURFACES`` holds and the errors on the products the fit did not
see (the ``gemm_layouts`` section)::

    python tools/fit_gemm_surface.py

Each product's time is the geometric mean of the two runs. ``hopper-bf16`` is fitted to the
``gemm`` grid; ``hopper-fp8`` to the ``gemm_fp8`` products with the rows' and columns'
halves and the byte efficiency held at the bf16 surface's.
"""

from __future__ import annotations

import gzip
import json
import sys
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


def fit() -> dict:
    first, second = runs()
    bf16 = fit_surface(mean_shapes("gemm", first, second), PEAK_BF16, BANDWIDTH,
                       name="hopper-bf16")
    fp8 = fit_surface(mean_shapes("gemm_fp8", first, second), PEAK_FP8, BANDWIDTH,
                      name="hopper-fp8", input_bytes=1.0, start=bf16,
                      fixed=("m_half", "n_half", "byte_efficiency"))
    return {"hopper-bf16": bf16, "hopper-fp8": fp8}


def main() -> int:
    first, second = runs()
    surfaces = fit()
    held_out = mean_shapes("gemm_layouts", first, second, layout_shape)
    for name, s in surfaces.items():
        print(f"{name}: e_max={s.e_max:.4g} m_half={s.m_half:.4g} n_half={s.n_half:.4g} "
              f"k_half={s.k_half:.4g} fixed_s={s.fixed_s:.4g} "
              f"byte_efficiency={s.byte_efficiency:.4g}")
    m, n, k, t = np.array(held_out).T
    err = np.abs(surfaces["hopper-bf16"].times(m, n, k, PEAK_BF16, BANDWIDTH) / t - 1) * 100
    pairs = zip(first["gemm_layouts"], second["gemm_layouts"], strict=True)
    noise = np.abs(np.array([a["ms"] / b["ms"] - 1 for a, b in pairs])) * 100
    print(f"hopper-bf16 on the {len(t)} layout products it did not see: "
          f"mean {err.mean():.1f} %, p95 {np.percentile(err, 95):.1f} %, "
          f"worst {err.max():.1f} %; the two runs differ by {noise.mean():.1f} % / "
          f"{np.percentile(noise, 95):.1f} % / {noise.max():.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
