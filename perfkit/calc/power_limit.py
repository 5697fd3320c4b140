"""What a power limit below the rated one does to a GPU's compute: the share of its
unlimited throughput a capped device keeps.

A GPU enforces its power limit by lowering its clock. On an H100 SXM every compute kind
of a training step already runs at its 700 W limit: measured for perfkit on a lent H100
80GB HBM3 (``tests/data/kernel_rates_h100/power_draw.json.gz``,
``tools/measure_power_draw.py``), FlashAttention-2 forward + backward drew a median 697 W
at 1,800 MHz, a bf16 GEMM of 8192³ 697 W at 1,380 MHz, an FP8 one 698 W at 1,275 MHz,
while a 1 GiB copy drew 396 W at the full 1,980 MHz. An H200 drew 692-693 W on the
GEMMs, 667 W on attention and 461 W on the copy (``power_draw_h200.json.gz``). So any
limit much below 650 W slows the matrix and attention kernels, and one above about
400-460 W leaves the memory-bound ones alone.

How much, per Hopper chip: throughput per multiprocessor is taken as linear in the power
per multiprocessor between two measured parts of the same GH100 silicon,

* the H100 SXM5, 700 W, 132 multiprocessors: 794.5 TFLOP/s, its best measured bf16
  matmul (stas00/ml-engineering "Maximum Achievable Matmul FLOPS",
  :mod:`perfkit.calc.gemm_ceiling`): 6.02 TFLOP/s per multiprocessor at 5.30 W;
* the H100 PCIe, 350 W, 114 multiprocessors: 495.93 TFLOP/s, its best square bf16
  product in a published table (zzc0721/torch-performance-test-data issue #95,
  :data:`perfkit.calc.gemm_rate.H100_PCIE_PUBLISHED_BF16`): 4.35 at 3.07 W,

(the two ways of measuring agree: the same project's H100 SXM entries, square products
at the same five sizes, are 783.7-797.5 TFLOP/s (its ``database.md`` and issue #79),
within 1.4 % of the first point's 794.5),
so a device capped at ``P`` watts keeps ``t(P / S) / t(P_rated / S)`` of its compute
(:func:`compute_scale`; ``S`` its multiprocessors), held at 1 at or above the rated power
and extended on the same line below the PCIe part's 3.07 W. A 500 W H100 SXM keeps 0.81.
The line is an assumption between two points (clock and voltage do not scale linearly);
FP8 and attention are assumed to follow the bf16 products, as both run at the limit.
No other family has two such points here: a limit on one raises a
:class:`~perfkit.errors.PerfkitError` that says so.

This is what the step model prices compute at (:func:`sustained_peak`); the MFU that
perfkit reports stays on the datasheet peak, the convention every peer uses.
"""

from __future__ import annotations

import re

from ..errors import InvalidArgumentError
from ..specs import Hardware
from .gemm_ceiling import MAMF
from .gemm_rate import H100_PCIE_PUBLISHED_BF16

__all__ = ["HOPPER_POWER_POINTS", "RATED_POWER_W", "rated_power", "compute_scale",
           "sustained_peak"]

#: ``(watts, multiprocessors, best bf16 TFLOP/s)`` of the two measured Hopper parts the
#: line of :func:`compute_scale` runs through (module docstring), read from the tables
#: that hold them.
HOPPER_POWER_POINTS = ((350.0, 114, max(H100_PCIE_PUBLISHED_BF16.values())),
                       (700.0, 132, MAMF[("hopper", "16")].tflops))

#: Rated board power, W, and multiprocessors of the parts :func:`compute_scale` covers, by
#: name pattern (NVIDIA's H100, H800 and H200 datasheets: SXM "up to 700 W", PCIe 350 W,
#: NVL 400 W; multiprocessors as :mod:`perfkit.calc.attention_occupancy`).
RATED_POWER_W: tuple[tuple[re.Pattern[str], float, int], ...] = (
    (re.compile(r"^h(100|800)[-_ ]pcie(\b|[-_ ])", re.IGNORECASE), 350.0, 114),
    (re.compile(r"^h100[-_ ]nvl(\b|[-_ ])", re.IGNORECASE), 400.0, 132),
    (re.compile(r"^h(100|800|200)(\b|[-_ ]|$)", re.IGNORECASE), 700.0, 132),
)


def rated_power(hardware_name: str) -> tuple[float, int] | None:
    """``(rated watts, multiprocessors)`` of a covered Hopper part, else None."""
    for pattern, watts, sms in RATED_POWER_W:
        if pattern.match(hardware_name):
            return watts, sms
    return None


def _per_sm(watts_per_sm: float) -> float:
    (w0, s0, t0), (w1, s1, t1) = HOPPER_POWER_POINTS
    x0, y0, x1, y1 = w0 / s0, t0 / s0, w1 / s1, t1 / s1
    return y0 + (y1 - y0) * (watts_per_sm - x0) / (x1 - x0)


def compute_scale(hardware_name: str, power_limit_w: float | None,
                  multiprocessors: int | None = None) -> float:
    """The share of its compute a device keeps under ``power_limit_w`` (module docstring).

    Parameters
    ----------
    hardware_name : str
        The device, e.g. ``"h100"``.
    power_limit_w : float or None
        The enforced board power limit, W. None: the rated one (factor 1).
    multiprocessors : int, optional
        The device's; None: the datasheet count of :data:`RATED_POWER_W`.

    Returns
    -------
    float
        1 at or above the rated power; ``t(P/S) / t(P_rated/S)`` below it, ``t`` the line
        through :data:`HOPPER_POWER_POINTS` (0.81 for a 500 W H100 SXM).
    """
    if power_limit_w is None:
        return 1.0
    rated = rated_power(hardware_name)
    if rated is None:
        raise InvalidArgumentError(
            "power_limit_w", f"perfkit has no measured relation between power and compute "
            f"for {hardware_name!r}, only for Hopper parts (H100, H800, H200: SXM, PCIe, "
            "NVL); leave the limit unset and calibrate on a run of the capped device",
            power_limit_w)
    watts, sms = rated
    sms = multiprocessors or sms
    if power_limit_w >= watts:
        return 1.0
    return max(0.0, _per_sm(power_limit_w / sms)) / _per_sm(watts / sms)


def sustained_peak(hardware: Hardware, dtype: str | None = None) -> float:
    """The peak FLOP/s the step model prices compute at: ``hardware.peak(dtype)`` times
    :func:`compute_scale` of its ``power_limit_w``."""
    return hardware.peak(dtype) * compute_scale(hardware.name, hardware.power_limit_w,
                                                hardware.multiprocessors)
