"""Pipeline bubble and in-flight micro-batches.

Sources: Narayanan et al. 2021 §2.2 (1F1B bubble ``(p−1)/m``; interleaved
``(p−1)/(v·m)``); Llama 3 paper §3.3.2; MindFormers SAPP ``compute_activation_nums``
(toolkit/pipeline_balance, r1.6.0) for the in-flight counts; Megatron-LM
``theoretical_memory_usage.py`` for the interleaving memory penalty.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError, check_positive_int

__all__ = [
    "bubble_fraction",
    "bubble_idle_share",
    "in_flight_micro_batches",
    "interleave_memory_penalty",
]


def _check(pp: int, num_micro_batches: int, vpp: int) -> tuple[int, int, int]:
    p = check_positive_int("pp", pp)
    m = check_positive_int("num_micro_batches", num_micro_batches)
    v = check_positive_int("vpp", vpp)
    if v > 1 and p == 1:
        raise InvalidArgumentError("vpp", "virtual stages need pp > 1", vpp)
    return p, m, v


def bubble_fraction(pp: int, num_micro_batches: int, vpp: int = 1) -> float:
    """Bubble time **relative to the ideal compute time**: ``(p − 1) / (v · m)``.

    The ideal compute time is ``m`` micro-batches of forward + backward with no
    pipeline; the bubble is ``(p − 1)`` chunk-times at warm-up and cool-down, each chunk
    being ``1/v`` of a stage. 1F1B is ``vpp=1``. Published ideal values (SAPP tests):
    (p, v, m) = (16, 1, 16) → 0.9375; (4, 2, 8) → 0.1875; (8, 3, 16) → 0.1458.
    For the share of an iteration spent idle use :func:`bubble_idle_share`.

    With fewer micro-batches than stages (``m < p``, plain 1F1B) the formula still holds
    as an absolute time: the step is ``m + p − 1`` stage slots with only ``m`` busy, so
    the bubble is ``(p − 1)`` slots, ``(p − 1)/m`` of the compute — above 1, and not
    the "share of the ideal time" it is usually read as.
    """
    p, m, v = _check(pp, num_micro_batches, vpp)
    return (p - 1) / (v * m)


def bubble_idle_share(pp: int, num_micro_batches: int, vpp: int = 1) -> float:
    """Share of the iteration time a stage is idle: ``(p − 1) / (v·m + p − 1)``.

    The iteration lasts ``(v·m + p − 1)`` chunk-times, of which ``p − 1`` are bubble;
    equivalently ``f / (1 + f)`` with ``f = bubble_fraction(...)``.
    """
    f = bubble_fraction(pp, num_micro_batches, vpp)
    return f / (1.0 + f)


def in_flight_micro_batches(pp: int, num_micro_batches: int, vpp: int = 1,
                            less_memory: bool = False) -> np.ndarray:
    """Micro-batches whose activations each (chunk, stage) holds at its peak.

    Returns an integer array of shape ``(vpp, pp)``, the rules of MindFormers SAPP
    ``compute_activation_nums``:

    * 1F1B (``vpp=1``): stage ``s`` holds ``p − s``;
    * interleaved: chunk 0 holds ``p + max(0, p − 2s − 1)``, the last chunk
      ``p + min(0, p − 2s − 1)``, middle chunks ``p``;
    * ``less_memory=True`` (SAPP's less-memory schedule): every chunk ``p`` except the
      last, ``p − s``;

    all capped at ``num_micro_batches``. For stage 0 and ``m >= 2p − 1`` the sum over
    chunks divided by ``v`` equals Megatron's ``p · (1 + (p − 1)/(p·v))``.
    """
    p, m, v = _check(pp, num_micro_batches, vpp)
    s = np.arange(p)
    counts = np.full((v, p), p, dtype=np.int64)
    if v == 1:
        counts[0] = p - s
    elif less_memory:
        counts[-1] = p - s
    else:
        counts[0] = p + np.maximum(0, p - 2 * s - 1)
        counts[-1] = p + np.minimum(0, p - 2 * s - 1)
    return np.minimum(counts, m)


def interleave_memory_penalty(pp: int, vpp: int = 1) -> float:
    """Megatron's activation-memory factor for interleaving: ``1 + (p − 1)/(p · v)``.

    Applies to the first stage when ``vpp > 1`` (``theoretical_memory_usage.py``); it is
    1 for ``vpp = 1``.
    """
    p = check_positive_int("pp", pp)
    v = check_positive_int("vpp", vpp)
    return 1.0 if v == 1 else 1.0 + (p - 1) / (p * v)
