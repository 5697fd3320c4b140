"""The global batch a profile shows: dp × micro-batch size × micro-batches per step.

Each rank of a data-parallel replica runs ``m`` micro-batches of ``b`` sequences per step
(Megatron-LM's ``global_batch_size = micro_batch_size × num_micro_batches ×
data_parallel_size``, ``megatron/core/num_microbatches_calculator.py``), so the sequences
of one optimizer step are the product of the three factors, each read from the profile
(dp from the layout, b and m from the operator shapes). Where a factor is not known the
global batch is not either, and the reason names exactly the factors that are unknown,
each with its own reason.
"""

from __future__ import annotations

from .fields import Readings

__all__ = ["read_global_batch"]

#: The factors of the global batch: the field and its name in a sentence.
_FACTORS = (("dp", "dp"), ("micro_batch_size", "the micro-batch size"),
            ("num_micro_batches", "the micro-batches per step"))


def read_global_batch(out: Readings) -> None:
    """Put ``global_batch_size`` = dp × micro-batch size × micro-batches per step.

    ``out`` holds the three factors as read so far (``dp``, ``micro_batch_size``,
    ``num_micro_batches``). Where one or more is unknown (None or 0), the global batch is
    None and its detail says which, and why each is unknown (its own detail):
    ``"not computed: the micro-batches per step are not known (…)"``.
    """
    values = {name: out[name].value if name in out else None for name, _ in _FACTORS}
    missing = [(name, words) for name, words in _FACTORS if not values[name]]
    if not missing:
        dp, b, m = (values[name] for name, _ in _FACTORS)
        out.put("global_batch_size", dp * b * m, f"dp × micro-batch × micro-batches = {dp} "
                                                 f"× {b} × {m}")
        return
    said = "; ".join(f"{words} {'is' if name != 'num_micro_batches' else 'are'} not known"
                     + (f" ({out[name].detail})" if name in out and out[name].detail else "")
                     for name, words in missing)
    out.put("global_batch_size", None, f"not computed, as dp × micro-batch size × "
                                       f"micro-batches per step needs all three: {said}")
