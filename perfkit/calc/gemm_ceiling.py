"""The size curve's ceiling per device: the share of the peak the best matrix product runs at.

The GEMM size curve of :mod:`perfkit.calc.rates` reaches ``e_max`` of the peak on very
large products. Its default used to be one figure for every device, 0.95, the top of
Calculon's A100 efficiency table (calculon-ai/calculon ``systems/a100_80g.json``) — a
modelling assumption, not a measurement. Measured, no product on an A100 runs that fast:
a brute-force search over matmul shapes finds the best one at 0.869 of the A100 SXM's
peak (below). So where a device's best product has been measured, the curve's ``e_max``
defaults to that share: the largest products price at what the fastest measured product
ran, and nothing on the curve runs faster. Elsewhere it stays 0.95.

Source: stas00/ml-engineering, ``compute/accelerator/README.md``, "Maximum Achievable
Matmul FLOPS comparison table" (MAMF: the mean of 100 runs, after 50 warm-up runs, of
``torch.matmul`` at the best shape a brute-force search of a shape sub-space found; BF16
and FP8 inputs, no sparsity). :data:`MAMF` copies its figures with each shape and
software. Shares are MAMF over the table's own "Theory" column, the figure the table
measures against.

Which devices: the patterns of :data:`_FAMILIES` match a hardware preset's name (or a
custom one's, by its prefix): the A100 and A800 (SXM; ``a100-pcie`` for the PCIe part),
the Hopper parts (H100 and H800 SXM, H200, GH200; the H200's BF16 is the H100's row, of
which the table says "H200 is the same", its FP8 its own row), the B200, the MI300X and
the MI325X. On Hopper and Volta the products run on a measured shape surface under
``Rates.gemm_model="auto"`` (:mod:`perfkit.calc.gemm_rate`); the ceiling there applies
only to ``gemm_model="size"`` and to attention priced as a GEMM. No figure is published for the
H100 PCIe, H20, L40S, MI250X, V100 or the Ascend parts: they keep 0.95 (on the H20 a
published square-product table agrees with it, ``docs/planner.md``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["GEMM_EFFICIENCY_DEFAULT", "MAMF", "Mamf", "size_curve_e_max", "ceiling_source"]

#: The size curve's ``e_max`` where no device figure is published: the top of Calculon's
#: A100 table (0.6 at 1 GFLOP, 0.9 at 16, 0.95 at 128).
GEMM_EFFICIENCY_DEFAULT = 0.95

_SOURCE = ("stas00/ml-engineering compute/accelerator/README.md, Maximum Achievable Matmul "
           "FLOPS comparison table")


@dataclass(frozen=True)
class Mamf:
    """One row of the published table: the best shape's TFLOP/s against the table's peak.

    Parameters
    ----------
    device : str
        The device as the table names it.
    tflops, theory : float
        The measured mean at the best shape and the peak the table divides by, TFLOP/s.
    shape : tuple of int
        The best shape found, (M, N, K).
    software : str
        The PyTorch build it was measured with.
    """

    device: str
    tflops: float
    theory: float
    shape: tuple[int, int, int]
    software: str

    @property
    def share(self) -> float:
        """The share of the peak the best product ran at, ``tflops / theory``."""
        return self.tflops / self.theory


#: The published maximum achievable matmul rates, by (family, type): ``"16"`` for BF16
#: (and FP16, the same tensor cores), ``"fp8"`` for float8 e4m3.
MAMF: dict[tuple[str, str], Mamf] = {
    ("a100", "16"): Mamf("NVIDIA A100 SXM", 271.2, 312, (1024, 10240, 5120), "2.6.0+cu126"),
    ("a100-pcie", "16"): Mamf("NVIDIA A100 PCIe", 252.9, 312, (2048, 5120, 6144),
                              "2.5.1+cu124"),
    ("hopper", "16"): Mamf("NVIDIA H100 SXM", 794.5, 989, (2048, 2048, 13312), "2.7.0+cu126"),
    ("hopper", "fp8"): Mamf("NVIDIA H100 SXM", 1402.6, 1979, (1024, 9216, 14336),
                            "2.7.0+cu126"),
    ("h200", "fp8"): Mamf("NVIDIA H200 SXM", 1453.4, 1979, (1280, 4096, 12032), "2.7.1+cu128"),
    ("gh200", "16"): Mamf("NVIDIA GH200 SXM", 828.6, 989, (1024, 15360, 4096), "2.6.0+cu126"),
    ("gh200", "fp8"): Mamf("NVIDIA GH200 SXM", 1535.0, 1979, (1024, 14336, 14336),
                           "2.6.0+cu126"),
    ("b200", "16"): Mamf("NVIDIA B200 SXM", 1745.0, 2250, (1792, 16128, 3072), "2.7.1+cu128"),
    ("b200", "fp8"): Mamf("NVIDIA B200 SXM", 3432.5, 4500, (15360, 4096, 3072),
                          "2.7.1+cu128"),
    ("mi300x", "16"): Mamf("AMD MI300X", 668.4, 1300, (10240, 15360, 8192),
                           "2.5.1+6.3.42131"),
    ("mi325x", "16"): Mamf("AMD MI325X", 784.9, 1300, (13312, 10240, 8192), "2.6.0+6.2.4"),
}

MAMF[("h200", "16")] = MAMF[("hopper", "16")]  # the table: "H200 is the same"

#: Name patterns, most specific first (a PCIe part before its SXM family).
_FAMILIES = (
    (re.compile(r"^a100[-_ ]pcie(\b|[-_ ])", re.IGNORECASE), "a100-pcie"),
    (re.compile(r"^(a100|a800)(\b|[-_ ])", re.IGNORECASE), "a100"),
    (re.compile(r"^h100[-_ ]pcie(\b|[-_ ])", re.IGNORECASE), None),
    (re.compile(r"^gh200(\b|[-_ ])", re.IGNORECASE), "gh200"),
    (re.compile(r"^h200(\b|[-_ ])", re.IGNORECASE), "h200"),
    (re.compile(r"^(h100|h800)(\b|[-_ ])", re.IGNORECASE), "hopper"),
    (re.compile(r"^b200(\b|[-_ ])", re.IGNORECASE), "b200"),
    (re.compile(r"^mi300x(\b|[-_ ])", re.IGNORECASE), "mi300x"),
    (re.compile(r"^mi325x(\b|[-_ ])", re.IGNORECASE), "mi325x"),
)


def _row(hardware_name: str | None, dtype: str | None) -> Mamf | None:
    name = str(hardware_name or "").strip()
    family = next((f for pattern, f in _FAMILIES if pattern.match(name)), None)
    if family is None or dtype in ("fp32", "tf32", "int8"):
        return None
    return MAMF.get((family, "fp8" if dtype == "fp8" else "16"))


def size_curve_e_max(hardware_name: str | None, dtype: str | None = None) -> float:
    """The size curve's default ``e_max`` on a device: its published best share, else 0.95.

    Parameters
    ----------
    hardware_name : str or None
        A hardware preset's (or custom part's) name; None or unknown: the default.
    dtype : str, optional
        The products' type: ``"fp8"`` reads the FP8 row where there is one (else the
        device keeps the default); fp32, tf32 and int8 products keep the default (the
        table measures BF16 and FP8); anything else the BF16 row.

    Returns
    -------
    float
        ``MAMF / theory`` of the device's row (rounded to three decimals, as the table
        prints it), or :data:`GEMM_EFFICIENCY_DEFAULT`.

    Examples
    --------
    >>> size_curve_e_max("a100"), size_curve_e_max("ascend-910b"), size_curve_e_max(None)
    (0.869, 0.95, 0.95)
    """
    row = _row(hardware_name, dtype)
    return round(row.share, 3) if row is not None else GEMM_EFFICIENCY_DEFAULT


def ceiling_source(hardware_name: str | None, dtype: str | None = None) -> str:
    """Where :func:`size_curve_e_max`'s figure comes from, in a sentence."""
    row = _row(hardware_name, dtype)
    if row is None:
        return "Calculon's A100 table (no measured best matmul published for this device)"
    m, n, k = row.shape
    return (f"{row.device}'s best measured matmul, {row.tflops:g} of {row.theory:g} TFLOP/s "
            f"at {m}x{n}x{k}, torch {row.software} ({_SOURCE})")
