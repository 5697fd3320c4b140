"""Would wave quantisation with one fixed tile improve the H100 GEMM surface? (issue 65)

Refits :data:`perfkit.calc.gemm_rate.SURFACES`' ``hopper-bf16`` shape to the shipped grid
(``tests/data/kernel_rates_h100``) with its efficiency multiplied by the share of the last
wave's multiprocessors a product keeps busy, ``tiles / (ceil(tiles / S) · S)`` with
``tiles = ceil(M / tm) · ceil(N / tn)`` and ``S = 132``, for a few tile sizes, and prints
the relative errors on the grid and on the Llama layer products the shape was not fitted
to (each machine's errors after matching its median, as the shipped surface's ``e_max``
is matched to the median machine)::

    python tools/try_wave_quantisation.py

Result (2026-11-27): every fixed tile is worse than the smooth surface (``tile 0x0``):
cuBLAS picks a tile, split-K or stream-K per shape, which smooths the waves out.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from perfkit.calc import gemm_rate

PEAK, BANDWIDTH, SMS = 989.5e12, 3350e9, 132
TILES = ((0, 0), (128, 128), (128, 256), (64, 128))


def _fit_tool():
    path = Path(__file__).resolve().parent / "fit_gemm_surface.py"
    spec = importlib.util.spec_from_file_location("fit_gemm_surface", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _with_waves(tm: int, tn: int):
    smooth = gemm_rate.GemmSurface.efficiency

    def efficiency(self, m, n, k):
        base = smooth(self, m, n, k)
        if not tm:
            return base
        tiles = np.ceil(np.asarray(m) / tm) * np.ceil(np.asarray(n) / tn)
        return base * tiles / (np.ceil(tiles / SMS) * SMS)
    return efficiency


def main() -> None:
    tool = _fit_tool()
    grid = tool.mean_shapes("gemm", *tool.runs())
    held = tool.held_out()
    smooth = gemm_rate.GemmSurface.efficiency
    try:
        for tm, tn in TILES:
            gemm_rate.GemmSurface.efficiency = _with_waves(tm, tn)
            surface = gemm_rate.fit_surface(grid, PEAK, BANDWIDTH)
            err = np.abs([surface.times(m, n, k, PEAK, BANDWIDTH) / t - 1
                          for m, n, k, t in grid])
            line = [f"tile {tm}x{tn}: grid mean {err.mean():.3f} p95 "
                    f"{np.percentile(err, 95):.3f}"]
            for machine, (m, n, k, t) in held.items():
                ratio = surface.times(m, n, k, PEAK, BANDWIDTH) / t
                e = np.abs(ratio / np.median(ratio) - 1)
                line.append(f"{machine} mean {e.mean():.3f} p95 {np.percentile(e, 95):.3f} "
                            f"max {e.max():.3f}")
            print(" | ".join(line))
    finally:
        gemm_rate.GemmSurface.efficiency = smooth


if __name__ == "__main__":
    main()
