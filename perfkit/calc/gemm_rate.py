"""A matrix multiply's time by its shape (M, N, K) and type, on a surface measured per GPU
family.

The size curve of :mod:`perfkit.calc.rates` prices a GEMM by its FLOPs alone. Two GEMMs of
the same FLOPs can differ by a factor of two: a product with few rows (a small micro-batch's
tokens, ``M``), few output columns (a tensor-parallel share, ``N``) or a short inner
dimension (``K``: the attention output's ``hidden / tp``) leaves tiles idle, or spends its
time filling and draining the pipeline of each tile. The surface prices each call as

    ``t = t0 + max(F / (e(M, N, K) · peak), B / (e_B · bandwidth))``

    ``e(M, N, K) = e_max · M / (M + M½) · N / (N + N½) · K / (K + K½)``

with ``F = 2·M·N·K`` and ``B`` the operands' and result's bytes (``2·(M·K + K·N + M·N)`` in
16-bit, one byte per FP8 input element). ``e_max`` is the share of the peak a very large
product reaches, each ``½`` the size of a dimension at which it halves the rate, ``t0`` the
fixed time of a call (launch, prologue, epilogue, the gap to the next kernel) and ``e_B``
the share of the memory bandwidth a skinny product's operands move at. The product form
says that each dimension limits the rate on its own: rows and output columns by the tiles
there are to spread over the multiprocessors, the inner dimension by how long each tile's
main loop runs against its fixed prologue and epilogue.

Measured surfaces
-----------------
:data:`SURFACES` holds one surface per GPU family and type, each fitted by
:func:`fit_surface` (least squares on the relative error) to measurements made for perfkit
with ``tools/measure_kernel_rates.py`` on one NVIDIA H100 80GB HBM3 (PyTorch 2.11.0 + CUDA
13.0, cuBLAS; ``tests/data/kernel_rates_h100/PROVENANCE.md``):

* ``"hopper-bf16"``: its shape fitted to 1,152 forward products (``x·wᵀ``, bf16) of M in
  256-32,768 and N, K in 256-16,384, each the geometric mean of two runs on one machine
  (A). The lent H100s differ: three of them timed Llama layers' products (A and B the same
  576, C 18 of them), and the surface's time over theirs has medians 0.976, 1.037 and
  1.071; ``e_max`` is scaled to meet the median machine (× 1.037). On the 576 layer
  products (forward, input-gradient and weight-gradient products, tensor-parallel shares
  down to 256 columns, N and K up to 57,344), which the shape was not fitted to, it is
  within 6.7 % (A) and 5.9 % (B) on average, 13.8 % and 13.5 % at the 95th percentile;
  A's two runs differ from each other by 2.7 % and 8.8 %.
* ``"hopper-fp8"``: 48 products of ``torch._scaled_mm`` on float8 e4m3 operands (M 1,024-
  16,384, N and K 1,024-14,336) on machine A, as a share of the FP8 peak. Its rows and
  columns keep the bf16 surface's ``M½``, ``N½`` and ``e_B`` (48 products do not fix them);
  ``e_max`` (scaled as the bf16 one), ``K½`` and ``t0`` are its own.

Operands: a product on a training step's own operands (the wide Llama's, captured after
ten steps) runs 2 % faster than on random normal ones of the same shapes (machine C), so
random operands stand for training. The GEMM kernels of the H100 Llama runs recorded for
perfkit (``tests/data/kineto_llama_*h100``, other machines) run 7 % faster than this
surface (time-weighted over 222 kernel shapes; 9 % at the median): within the spread of
the lent machines, above its median.

Which GPUs run on them: the H100 surfaces apply to the full Hopper parts (H100 SXM and
PCIe, H800, H200, GH200: the same multiprocessor and tensor core; the H200's larger
bandwidth enters through ``B``). On a lent H200 the 576 layer products ran 5 % slower than
the surface at the median, 7.0 % mean error (``duty_h200.json.gz``).

* ``"volta-fp16"`` (V100 SXM2 and PCIe, fp16 on the tensor cores): from a published
  measurement, not one made here: five square ``torch.matmul`` products (n = 1,024 to
  10,240) on a Tesla V100-SXM2-16GB (:data:`VOLTA_PUBLISHED_FP16`). Square products
  cannot separate the three halves, so ``M½``, ``N½``, ``t0`` and ``e_B`` are Hopper's
  and only ``e_max`` (0.82) and ``K½`` are fitted: within 4.0 % of the five on average
  (8.2 % at most, n = 10,240, which ran slower than n = 8,192). A second V100-SXM2-16GB
  of the same project (issue #52, PyTorch 2.8.0) reached 94.84 TFLOP/s at best, where
  the surface's best of the five sizes is 96.7 (+2 %). The size curve put these products
  at 0.93-0.95 of the peak; the measured best is 0.78. Volta's fp32 products run on the
  CUDA cores, not the tensor cores: they stay on the size curve.

* ``"hopper-pcie-bf16"`` and ``"hopper-pcie-fp8"`` (the H100 PCIe): the H100 surfaces with
  ``e_max`` × :data:`H100_PCIE_SCALE` (0.861), fitted to a published table of square bf16
  products on an H100 PCIe (:data:`H100_PCIE_PUBLISHED_BF16`): the 350 W part is power
  limited, and the SXM surface scaled by its datasheet peak alone was 11-23 % too fast.
  Checked on an H800 PCIe's table of the same project (issue #112), which it was not
  fitted to: 4.5 % mean error, −10.5 % at worst (n = 2,048).

No other family has a measured surface in perfkit yet (the A100 and the H20's cut-down
chip included): there GEMMs stay on the size curve of :mod:`perfkit.calc.rates`
(Calculon's A100 table, topped at the device's best measured matmul where one is
published: :mod:`perfkit.calc.gemm_ceiling`), which is what ``Rates.gemm_model``'s
``"auto"`` chooses.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np

from ..errors import InvalidArgumentError

__all__ = ["GemmSurface", "SURFACES", "GEMM_MODELS", "surface_for", "fit_surface",
           "gemm_bytes", "VOLTA_PUBLISHED_FP16", "H100_PCIE_PUBLISHED_BF16",
           "H100_PCIE_SCALE"]

#: ``Rates.gemm_model`` values: ``"auto"`` (a measured surface where the hardware's family
#: has one, else the size curve), ``"shape"`` (the surface; an error where there is none)
#: and ``"size"`` (the FLOPs size curve of :mod:`perfkit.calc.rates`).
GEMM_MODELS = ("auto", "shape", "size")


@dataclass(frozen=True)
class GemmSurface:
    """One GPU family's GEMM time by shape (see the module docstring for the formula).

    Parameters
    ----------
    name : str
        ``"<family>-<type>"``, e.g. ``"hopper-bf16"``.
    e_max : float
        Share of the peak a very large product reaches.
    m_half, n_half, k_half : float
        Rows, output columns and inner dimension at which each halves the rate.
    fixed_s : float
        Fixed time per call, seconds.
    byte_efficiency : float
        Share of the memory bandwidth the operands move at (the memory-bound limit).
    input_bytes : float
        Bytes per input element (2 for 16-bit types, 1 for FP8); results are 16-bit.
    source : str
        Where the figures come from.
    basis : str
        What the surface was fitted to, in a few words (the Planner's assumptions table
        says it); empty for a surface :func:`fit_surface` made.
    """

    name: str
    e_max: float
    m_half: float
    n_half: float
    k_half: float
    fixed_s: float
    byte_efficiency: float
    input_bytes: float = 2.0
    source: str = ""
    basis: str = ""

    def efficiency(self, m: float, n: float, k: float) -> float:
        """``e(M, N, K)``: the share of the peak the call's arithmetic runs at."""
        return (self.e_max * m / (m + self.m_half) * n / (n + self.n_half)
                * k / (k + self.k_half))

    def seconds(self, m: float, n: float, k: float, peak: float, bandwidth: float,
                scale: float = 1.0) -> float:
        """One call of an ``M × K`` by ``K × N`` product: ``t0 + max(compute, memory)``.

        ``scale`` multiplies the arithmetic rate (a calibration's factor over the
        measured surface; 1: as measured); the efficiency stays at most 1.
        """
        compute = 2.0 * m * n * k / (min(1.0, self.efficiency(m, n, k) * scale) * peak)
        memory = gemm_bytes(m, n, k, self.input_bytes) / (self.byte_efficiency * bandwidth)
        return self.fixed_s + max(compute, memory)

    def times(self, m: np.ndarray, n: np.ndarray, k: np.ndarray, peak: float,
              bandwidth: float) -> np.ndarray:
        """:meth:`seconds` for arrays of shapes."""
        m, n, k = (np.asarray(x, dtype=float) for x in (m, n, k))
        compute = 2.0 * m * n * k / (self.efficiency(m, n, k) * peak)
        memory = gemm_bytes(m, n, k, self.input_bytes) / (self.byte_efficiency * bandwidth)
        return self.fixed_s + np.maximum(compute, memory)


def gemm_bytes(m: float, n: float, k: float, input_bytes: float = 2.0) -> float:
    """Bytes a product reads and writes once: both inputs at ``input_bytes``, a 16-bit result."""
    return input_bytes * (m * k + k * n) + 2.0 * m * n


_PROVENANCE = ("tools/measure_kernel_rates.py on one NVIDIA H100 80GB HBM3, PyTorch "
               "2.11.0+cu130, 2026-11-27 (tests/data/kernel_rates_h100/PROVENANCE.md); "
               "fitted by perfkit.calc.gemm_rate.fit_surface")

#: The measured surfaces (see the module docstring; ``tests/calc/test_gemm_rate.py`` fits
#: them again from the shipped measurements and checks these figures).
SURFACES: dict[str, GemmSurface] = {
    "hopper-bf16": GemmSurface("hopper-bf16", e_max=0.7791, m_half=10.27, n_half=14.65,
                               k_half=143.4, fixed_s=3.003e-6, byte_efficiency=0.7365,
                               input_bytes=2.0, source=_PROVENANCE,
                               basis="measured on lent H100s"),
    "hopper-fp8": GemmSurface("hopper-fp8", e_max=0.7548, m_half=10.27, n_half=14.65,
                              k_half=573.5, fixed_s=2.334e-6, byte_efficiency=0.7365,
                              input_bytes=1.0, source=_PROVENANCE,
                              basis="measured on lent H100s"),
}

#: The published measurement the Volta surface is fitted to: ``torch.matmul`` on square
#: fp16 products (n × n by n × n) on a Tesla V100-SXM2-16GB, PyTorch 2.7.0 + CUDA 12.8,
#: TFLOP/s by n (zzc0721/torch-performance-test-data, issue #140, 2026-02-14).
VOLTA_PUBLISHED_FP16 = {1024: 57.30, 2048: 78.23, 4096: 95.73, 8192: 97.36, 10240: 89.37}
_VOLTA_SOURCE = ("fitted by perfkit.calc.gemm_rate.fit_surface to the published square fp16 "
                 "products of a Tesla V100-SXM2-16GB (zzc0721/torch-performance-test-data "
                 "issue #140, PyTorch 2.7.0+cu128; VOLTA_PUBLISHED_FP16): e_max and K½ "
                 "fitted, M½, N½, t0 and e_B held at the Hopper surface's (square products "
                 "cannot tell them apart)")
SURFACES["volta-fp16"] = GemmSurface(
    "volta-fp16", e_max=0.8194, m_half=10.27, n_half=14.65, k_half=580.1, fixed_s=3.003e-6,
    byte_efficiency=0.7365, input_bytes=2.0, source=_VOLTA_SOURCE,
    basis="fitted to a published V100 table")

#: The published measurement the H100 PCIe's level is fitted to: square bf16
#: ``torch.matmul`` on an NVIDIA H100 PCIe, PyTorch 2.9.0 + CUDA 12.8, TFLOP/s by n
#: (zzc0721/torch-performance-test-data, issue #95); n = 1,024 is left out, as on the SXM
#: part (host-timed fixed cost, docs/planner.md).
H100_PCIE_PUBLISHED_BF16 = {2048: 449.09, 4096: 495.93, 8192: 492.84, 10240: 471.79}
#: ``e_max`` of the PCIe surfaces over the SXM ones: fitted (``e_max`` alone, the shape
#: held) to :data:`H100_PCIE_PUBLISHED_BF16`. The 350 W part runs its largest products at
#: 0.66 of its datasheet peak where the 700 W SXM part reaches 0.81; FP8 is assumed to be
#: held back by the power limit alike (no FP8 table of the PCIe part was found).
H100_PCIE_SCALE = 0.8611


def _pcie(sxm: GemmSurface) -> GemmSurface:
    """The H100 PCIe's surface: the SXM one with ``e_max`` × :data:`H100_PCIE_SCALE`."""
    return replace(sxm, name=sxm.name.replace("hopper-", "hopper-pcie-"),
                   e_max=round(sxm.e_max * H100_PCIE_SCALE, 4),
                   source=sxm.source + "; e_max × H100_PCIE_SCALE, fitted to the published "
                   "square products of an H100 PCIe (zzc0721/torch-performance-test-data "
                   "issue #95, H100_PCIE_PUBLISHED_BF16)",
                   basis="measured on lent H100s, its level fitted to a published H100 "
                   "PCIe table")


SURFACES.update({f"hopper-pcie-{t}": _pcie(SURFACES[f"hopper-{t}"]) for t in ("bf16", "fp8")})

_FAMILIES = ((re.compile(r"^h100[-_ ]pcie(\b|[-_ ])", re.IGNORECASE), "hopper-pcie"),
             (re.compile(r"^(gh200|h100|h800|h200)(\b|[-_ ])", re.IGNORECASE), "hopper"),
             (re.compile(r"^v100(\b|[-_ ])", re.IGNORECASE), "volta"))
#: The surface each family's products run on, by type: ``"16"`` for 16-bit types (and,
#: on Hopper, any type but FP8); Volta's fp32 products run on its CUDA cores, not the
#: tensor cores its surface was measured on: the size curve. The published square
#: products of zzc0721/torch-performance-test-data agree: in fp32 an H100 SXM reaches
#: 51.9 of its 67 TFLOP/s (0.77, issue #79: the bf16 surface's level) and a V100 14.5 of
#: its 15.7 (0.92, issue #140: the size curve's).
_SURFACE_OF = {**{(f, kind): f"{f}-{'fp8' if kind == 'fp8' else 'bf16'}"
                  for f in ("hopper", "hopper-pcie") for kind in ("16", "fp8", "fp32")},
               ("volta", "16"): "volta-fp16"}


def surface_for(hardware_name: str, dtype: str | None = None,
                model: str = "auto") -> GemmSurface | None:
    """The measured surface a GEMM of ``dtype`` on ``hardware_name`` runs on, or None.

    Parameters
    ----------
    hardware_name : str
        A perfkit hardware preset's name (``"h100"``, ``"h200"``, ...).
    dtype : str, optional
        The product's type: ``"fp8"`` gives the FP8 surface, anything else 16-bit.
    model : {"auto", "shape", "size"}
        ``Rates.gemm_model``: ``"size"`` gives None (the size curve); ``"auto"`` the
        family's surface or None; ``"shape"`` the family's surface, and an error where
        perfkit has none.
    """
    if model not in GEMM_MODELS:
        raise InvalidArgumentError("gemm_model", f"must be one of {', '.join(GEMM_MODELS)}",
                                   model)
    if model == "size":
        return None
    family = next((f for pattern, f in _FAMILIES if pattern.match(str(hardware_name).strip())),
                  None)
    kind = dtype if dtype in ("fp8", "fp32") else "16"
    name = _SURFACE_OF.get((family, kind)) if family else None
    if name is None:
        if model == "shape":
            raise InvalidArgumentError(
                "gemm_model", f"'shape' needs a measured GEMM surface, and there is none "
                f"for {hardware_name!r} in {dtype or '16-bit'} (perfkit has Hopper's: "
                "H100, H800, H200, GH200, 16-bit and FP8; Volta's V100, 16-bit); use "
                "'size' or 'auto'", model)
        return None
    return SURFACES[name]


_FIT_NAMES = ("e_max", "m_half", "n_half", "k_half", "fixed_s", "byte_efficiency")


def fit_surface(shapes: Iterable[tuple[float, float, float, float]], peak: float,
                bandwidth: float, *, name: str = "fitted", input_bytes: float = 2.0,
                start: GemmSurface | None = None, fixed: Iterable[str] = (),
                source: str = "", iterations: int = 200) -> GemmSurface:
    """Fit a surface to measured calls: least squares of ``log(t_model / t_measured)``.

    Parameters
    ----------
    shapes : iterable of (m, n, k, seconds)
        Measured calls.
    peak, bandwidth : float
        The GPU's nominal peak FLOP/s for the type and its memory bandwidth, bytes/s.
    name, input_bytes, source
        As :class:`GemmSurface`.
    start : GemmSurface, optional
        Starting point (default: ``e_max`` 0.8, halves 100, 5 µs, ``e_B`` 0.9); with
        ``fixed``, the values held.
    fixed : iterable of str
        Parameters held at ``start``'s values (e.g. ``("m_half", "n_half")``).
    iterations : int
        Levenberg-Marquardt iterations at most.

    Returns
    -------
    GemmSurface
        The fitted surface. The parameters are fitted in logarithms (all stay positive);
        the method is Levenberg-Marquardt with a numerical Jacobian, deterministic.
    """
    rows = np.asarray(list(shapes), dtype=float)
    if rows.ndim != 2 or rows.shape[1] != 4 or len(rows) < 3:
        raise InvalidArgumentError("shapes", "fit_surface needs at least three "
                                   "(m, n, k, seconds) rows")
    m, n, k, t = rows.T
    if np.any(rows <= 0):
        raise InvalidArgumentError("shapes", "every m, n, k and time must be positive")
    start = start or GemmSurface(name, 0.8, 100.0, 100.0, 100.0, 5e-6, 0.9, input_bytes)
    held = set(fixed)
    unknown = held - set(_FIT_NAMES)
    if unknown:
        raise InvalidArgumentError("fixed", f"parameters are {', '.join(_FIT_NAMES)}",
                                   sorted(unknown))
    free = [p for p in _FIT_NAMES if p not in held]
    x = np.log([getattr(start, p) for p in free])

    def surface(values: np.ndarray) -> GemmSurface:
        return replace(start, name=name, input_bytes=input_bytes, source=source, basis="",
                       **dict(zip(free, np.exp(values).tolist(), strict=True)))

    def residual(values: np.ndarray) -> np.ndarray:
        return np.log(surface(values).times(m, n, k, peak, bandwidth) / t)

    lam = 1e-3
    r = residual(x)
    cost = float(r @ r)
    for _ in range(iterations):
        jac = np.empty((len(r), len(x)))
        for i in range(len(x)):
            step = np.zeros_like(x)
            step[i] = 1e-6
            jac[:, i] = (residual(x + step) - r) / 1e-6
        jtj, jtr = jac.T @ jac, jac.T @ r
        improved = False
        while lam < 1e12:
            delta = np.linalg.solve(jtj + lam * np.diag(np.diag(jtj) + 1e-12), -jtr)
            trial = residual(x + delta)
            trial_cost = float(trial @ trial)
            if trial_cost < cost:
                x, r, lam, improved = x + delta, trial, max(lam / 10, 1e-12), True
                break
            lam *= 10
        if not improved or abs(cost - trial_cost) <= 1e-12 * max(cost, 1e-30):
            cost = min(cost, trial_cost)
            break
        cost = trial_cost
    fitted = surface(x)
    if not all(math.isfinite(getattr(fitted, p)) for p in _FIT_NAMES):
        raise InvalidArgumentError("shapes", "the surface's fit did not converge")
    return fitted
