"""How much of its published rate a fused attention call keeps with few (batch, head) pairs.

A fused attention kernel gives each multiprocessor tiles of 128 queries (forward) or
128 keys (backward) of one (batch, head) pair. The published curves
(:mod:`perfkit.calc.attention_rate`) were measured with 16k tokens per call: at length
``L`` and head dimension ``d``, ``(2048 / d) · 16384 / L`` pairs (hidden 2048). A call with
fewer pairs, as a tensor-parallel rank's share of the heads or a micro-batch of one gives,
has fewer tiles than the GPU has multiprocessors and runs below the curve. With
``T = pairs · ⌈L / 128⌉`` tiles on ``S`` multiprocessors the share kept is

    ``g(T) / g(T_published)``,   ``g(T) = T / (T + κ·S)``

a hyperbola in the tiles whose half point ``κ·S`` is a fraction of the multiprocessors:
one tile per multiprocessor fills the GPU when the tiles are equal (no mask: ``κ`` about
0.5), the causal mask's unequal tiles need about twice as many (``κ`` about 1), and
FlashAttention-2's forward splits the keys of a short call over more blocks
(``flash_fwd_splitkv``), which halves its ``κ``.

:data:`TILE_HALF` holds ``κ`` per implementation, pass and mask, fitted by
:func:`fit_tile_half` to 144 calls per pass timed for perfkit on an H100 by their kernels'
device time (``tools/measure_attention_occupancy.py``, two runs, 0.5 % apart at the
median; ``tests/data/kernel_rates_h100``): PyTorch SDPA's FlashAttention-2 and cuDNN
kernels, head dimension 128, sequence 1k-8k, 1-256 pairs. With the factor the published
curves are within 12.6 % of those kernels on average (13.6 % with each sequence length
left out of the fit in turn), against 134 % without it. FlashAttention-3 has no
measurement: it takes cuDNN's ``κ`` (both are Hopper's warp-specialised kernels).

:data:`MULTIPROCESSORS` gives ``S`` per GPU from the vendors' datasheets; a GPU not in it
(Ascend, AMD) keeps the published curve (factor 1).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from ..errors import InvalidArgumentError

__all__ = ["TILE_HALF", "MULTIPROCESSORS", "TILE", "multiprocessors", "published_pairs",
           "occupancy", "fit_tile_half"]

#: Queries (forward) or keys (backward) per tile of the fused kernels on Hopper and Ampere.
TILE = 128

#: ``κ``: the tiles at which a call reaches half its saturated rate, per multiprocessor,
#: by (implementation, pass, causal); fitted by :func:`fit_tile_half` (module docstring).
TILE_HALF: dict[tuple[str, str, bool], float] = {
    ("cudnn", "fwd", False): 0.6063, ("cudnn", "fwd", True): 1.200,
    ("cudnn", "bwd", False): 0.4859, ("cudnn", "bwd", True): 0.9852,
    ("flash2", "fwd", False): 0.2992, ("flash2", "fwd", True): 0.7357,
    ("flash2", "bwd", False): 0.6092, ("flash2", "bwd", True): 1.216,
}

#: Streaming multiprocessors per GPU (NVIDIA's Hopper, Ampere and Volta architecture
#: whitepapers: H100 SXM5 132, H100 PCIe 114, A100 108, V100 80; the H800, H200 and GH200
#: carry the H100 SXM5's GH100 configuration; the H20 78, as PyTorch's
#: ``multi_processor_count`` reports it). The H100's 132 is what the lent H100 reported.
MULTIPROCESSORS: dict[str, int] = {
    "h100": 132, "h100-pcie": 114, "h800": 132, "h200": 132, "gh200": 132, "h20": 78,
    "a100": 108, "a100-40gb": 108, "a800": 108, "v100": 80, "v100-16gb": 80,
    "v100-pcie": 80,
}


def multiprocessors(hardware_name: str) -> int | None:
    """``S`` of a hardware preset (its name or a name that starts with it), or None."""
    name = str(hardware_name).strip().lower()
    for key in sorted(MULTIPROCESSORS, key=len, reverse=True):
        if re.match(rf"^{re.escape(key)}(\b|[-_ ]|$)", name):
            return MULTIPROCESSORS[key]
    return None


def published_pairs(length: float, head_dim: float) -> float:
    """(batch, head) pairs of the published measurements at ``length``: 16k tokens per
    call, hidden 2048 (Shah et al. 2024, Fig. 5-6)."""
    return (2048.0 / float(head_dim)) * 16384.0 / float(length)


def _g(tiles: float, half: float) -> float:
    return tiles / (tiles + half)


def occupancy(pairs: float, length: float, head_dim: float, causal: bool, backward: bool,
              implementation: str, multiprocessor_count: int | None,
              kappa: float | None = None) -> float:
    """The share of its published rate a call of ``pairs`` (batch, head) pairs keeps.

    ``g(T) / g(T_published)`` with ``T = pairs · ⌈length / 128⌉`` (module docstring);
    1 where the multiprocessors are unknown or the implementation has no ``κ``.
    ``kappa`` overrides :data:`TILE_HALF`'s.
    """
    if not multiprocessor_count or pairs <= 0:
        return 1.0
    impl = "cudnn" if implementation == "flash3" else implementation
    if kappa is None:
        kappa = TILE_HALF.get((impl, "bwd" if backward else "fwd", bool(causal)))
    if kappa is None:
        return 1.0
    per_pair = math.ceil(max(float(length), 1.0) / TILE)
    half = kappa * multiprocessor_count
    return _g(pairs * per_pair, half) / _g(published_pairs(length, head_dim) * per_pair, half)


def fit_tile_half(calls: Iterable[tuple[float, float, float, float]],
                  multiprocessor_count: int) -> float:
    """``κ`` that best fits measured calls: least squares of ``log(published · factor /
    measured)``, by golden-section search on ``log κ`` in [0.01, 20].

    Parameters
    ----------
    calls : iterable of (pairs, length, head_dim, measured / published)
        Each call's pairs, length, head dimension and its measured efficiency over the
        published curve's at that length.
    multiprocessor_count : int
        ``S`` of the GPU they ran on.
    """
    rows = [tuple(float(x) for x in c) for c in calls]
    if len(rows) < 2 or any(r[3] <= 0 or r[0] <= 0 for r in rows):
        raise InvalidArgumentError("calls", "needs two or more (pairs, length, head_dim, "
                                   "ratio) rows with positive pairs and ratios")

    def cost(log_kappa: float) -> float:
        half = math.exp(log_kappa) * multiprocessor_count
        total = 0.0
        for pairs, length, d, ratio in rows:
            per_pair = math.ceil(length / TILE)
            factor = _g(pairs * per_pair, half) / _g(published_pairs(length, d) * per_pair,
                                                     half)
            total += math.log(factor / ratio) ** 2
        return total

    lo, hi = math.log(0.01), math.log(20.0)
    golden = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = hi - golden * (hi - lo), lo + golden * (hi - lo)
    fa, fb = cost(a), cost(b)
    for _ in range(80):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - golden * (hi - lo)
            fa = cost(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + golden * (hi - lo)
            fb = cost(b)
    return math.exp((lo + hi) / 2.0)
