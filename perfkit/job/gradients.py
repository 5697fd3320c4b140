"""The element size of the job's gradient reduction, as the profile's collectives record it.

Static memory keeps the gradients the data-parallel reduction moves
(:mod:`perfkit.calc.precision`), and a profile often records what its reductions moved
(:func:`perfkit.analysis.reduced_dtype.reduced_gradient_bytes`). The job keeps that
reading once, so that the Memory tab, the job's figures and the Planner's calibration
(:func:`perfkit.plan.calibrate`) count the same gradients.
"""

from __future__ import annotations

from typing import Any

from ..analysis.reduced_dtype import reduced_gradient_bytes
from .fields import FieldValue

__all__ = ["REDUCED_GRADIENT", "read_reduced_gradient"]

#: Where :func:`read_reduced_gradient` puts its reading (in :attr:`perfkit.Job.observed`):
#: a :class:`~perfkit.analysis.reduced_dtype.ReducedGradient`.
REDUCED_GRADIENT = "reduced_gradient"


def read_reduced_gradient(profile: Any, out: dict[str, Any]) -> None:
    """Put :data:`REDUCED_GRADIENT`: the data type the profile's all-reduces and
    reduce-scatters move most bytes in, with the sentence saying what was read. Nothing
    where no reduction records its type and size. A lazy cluster is read too (only its
    rows named ``reduce`` are computed), so that it calibrates as the eager one.
    Whether those reductions are the gradients' depends on the layout
    (:func:`~perfkit.analysis.reduced_dtype.reductions_are_gradients`), which
    :attr:`perfkit.Job.gradient_bytes` checks on the job's own layout."""
    reading = reduced_gradient_bytes(profile)
    if reading is not None:
        out[REDUCED_GRADIENT] = FieldValue(reading, "profile", reading.evidence)
