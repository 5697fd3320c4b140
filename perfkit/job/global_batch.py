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

from ..format import listed
from .fields import Readings

__all__ = ["read_global_batch"]

#: The factors of the global batch: the field and its name in a sentence.
_FACTORS = (("dp", "dp"), ("micro_batch_size", "the micro-batch size"),
            ("num_micro_batches", "the micro-batches per step"))


def read_global_batch(out: Readings) -> None:
    """Put ``global_batch_size`` = dp × micro-batch size × micro-batches per step.

    ``out`` holds the three factors as read so far (``dp``, ``micro_batch_size``,
    ``num_micro_batches``). Where one or more is unknown (None or 0), the global batch is
    None and its detail says which, and why each is unknown (its own detail; factors unknown
    for one reason are named together):
    ``"not computed: the micro-batches per step are not known (…)"``.
    """
    values = {name: out[name].value if name in out else None for name, _ in _FACTORS}
    missing = [(name, words) for name, words in _FACTORS if not values[name]]
    if not missing:
        dp, b, m = (values[name] for name, _ in _FACTORS)
        out.put("global_batch_size", dp * b * m, f"dp × micro-batch × micro-batches = {dp} "
                                                 f"× {b} × {m}")
        return
    by_reason: dict[str, list[tuple[str, str]]] = {}
    for name, words in missing:  # factors unknown for one reason are named together
        by_reason.setdefault(out[name].detail if name in out else "", []).append((name, words))
    said = "; ".join(f"{listed([w for _, w in group])} {_verb(group)} not known"
                     + (f" ({why})" if why else "") for why, group in by_reason.items())
    out.put("global_batch_size", None, f"not computed, as dp × micro-batch size × "
                                       f"micro-batches per step needs all three: {said}")


def _verb(group: list[tuple[str, str]]) -> str:
    """``"is"`` for one singular factor, ``"are"`` for the micro-batches or several."""
    return "is" if len(group) == 1 and group[0][0] != "num_micro_batches" else "are"
