"""Pipeline bubble and in-flight micro-batches.

Sources: Narayanan et al. 2021 §2.2 (1F1B bubble ``(p−1)/m``; interleaved
``(p−1)/(v·m)``); Llama 3 paper §3.3.2; MindFormers SAPP ``compute_activation_nums``
(toolkit/pipeline_balance, r1.6.0) for the in-flight counts; Megatron-LM
``theoretical_memory_usage.py`` for the interleaving memory penalty; torchtitan
``generate_llm_fqn_per_model_part`` for the split of layers that do not divide evenly.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError, check_positive_int

__all__ = [
    "bubble_fraction",
    "bubble_idle_share",
    "in_flight_micro_batches",
    "interleave_memory_penalty",
    "split_layers",
    "split_when_uneven",
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


def split_layers(num_layers: int, pp: int, vpp: int = 1, first_weight: int = 1,
                 last_weight: int = 1) -> tuple[int, ...]:
    """Layers per pipeline rank when ``num_layers`` need not divide by ``pp · vpp``.

    torchtitan's automatic split (``torchtitan/distributed/pipeline_parallel.py``,
    ``generate_llm_fqn_per_model_part``, defaults ``pipeline_parallel_first_stage_less_layers
    = pipeline_parallel_last_stage_less_layers = 1``): the embedding counts as
    ``first_weight`` layers and the output head as ``last_weight``; the ``L + first + last``
    effective layers go ``⌊E/S⌋`` to each of the ``S = pp · vpp`` virtual stages and one
    more to each of the first ``E mod S``; the first virtual stage holds ``first_weight``
    fewer decoder layers, the last ``last_weight`` fewer. Rank ``r`` holds virtual stages
    ``r, r + pp, …`` (the looped schedules), so the result is per rank. Llama 3.1 405B's
    126 layers on 8 ranks: ``(15, 16, 16, 16, 16, 16, 16, 15)``, with or without
    ``vpp = 2``.

    Parameters
    ----------
    num_layers, pp, vpp : int
        Decoder layers, pipeline ranks and virtual stages per rank.
    first_weight, last_weight : int
        Layers the embedding and the output head count as (0: none).

    Returns
    -------
    tuple of int
        Decoder layers of each pipeline rank, in rank order; they add up to ``num_layers``.
    """
    layers = check_positive_int("num_layers", num_layers)
    p, v = check_positive_int("pp", pp), check_positive_int("vpp", vpp)
    for name, value in (("first_weight", first_weight), ("last_weight", last_weight)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgumentError(name, "must be a whole number >= 0", value)
    stages = p * v
    if stages == 1:
        return (layers,)
    effective = layers + first_weight + last_weight
    base, extra = divmod(effective, stages)
    said = f"pp × vpp = {p} × {v} = {stages}" if v > 1 else f"{stages}"
    if base < max(first_weight, last_weight, 1):
        raise InvalidArgumentError("pp", f"{said} stages leave a stage without a decoder "
                                   f"layer ({layers} layers, the embedding and head counted "
                                   f"as {first_weight} and {last_weight})", pp)
    per_stage = [base + (1 if s < extra else 0) for s in range(stages)]
    per_stage[0] -= first_weight
    per_stage[-1] -= last_weight
    # the last stage takes what is left (the weights may not fill it exactly)
    per_stage[-1] = layers - sum(per_stage[:-1])
    if per_stage[-1] < 1:
        raise InvalidArgumentError("pp", f"{said} stages leave the last without a decoder "
                                   f"layer ({layers} layers, the embedding and head counted "
                                   f"as {first_weight} and {last_weight})", pp)
    return tuple(sum(per_stage[r::p]) for r in range(p))


def split_when_uneven(num_layers: int, pp: int, vpp: int = 1) -> tuple[tuple[int, ...], str] | None:
    """:func:`split_layers` where ``num_layers`` does not divide by ``pp · vpp``, with the
    sentence that says what was assumed; None where the even split holds."""
    stages = check_positive_int("pp", pp) * check_positive_int("vpp", vpp)
    if check_positive_int("num_layers", num_layers) % stages == 0:
        return None
    layers = split_layers(num_layers, pp, vpp)
    return layers, (f"{num_layers} layers do not divide over pp·vpp = {stages} stages: "
                    "split as torchtitan does, the embedding and the output head each "
                    f"counted as one layer, {', '.join(map(str, layers))} layers per "
                    "pipeline rank (pass stage_layers for another split)")
