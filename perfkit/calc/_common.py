"""Small helpers shared by the calculators (argument coercion, nothing else)."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InvalidArgumentError, check_non_negative, check_positive
from ..specs import Hardware, ModelSpec

__all__ = ["as_model", "as_param_count", "peak_of", "full_layer_count"]


def as_model(model: object, parameter: str = "model") -> ModelSpec:
    """Return ``model`` if it is a ModelSpec, else raise a clear error."""
    if not isinstance(model, ModelSpec):
        raise InvalidArgumentError(parameter, "must be a ModelSpec (this calculator needs the "
                                   "model's shape, not only its parameter count)",
                                   type(model).__name__)
    return model


def as_param_count(model: object, parameter: str = "model") -> float:
    """Parameter count of a ModelSpec, or ``model`` itself when it is a positive number."""
    if isinstance(model, ModelSpec):
        return float(model.num_parameters())
    return float(check_positive(parameter, model))


def peak_of(peak_flops: float | Hardware, dtype: str | None = None) -> float:
    """Peak FLOP/s from a number or a :class:`Hardware` (its ``dtype`` or default dtype)."""
    if isinstance(peak_flops, Hardware):
        return peak_flops.peak(dtype)
    return float(check_positive("peak_flops", peak_flops))


def full_layer_count(model: ModelSpec, recompute: str,
                     full_recompute_layers: int | Sequence[int] | None) -> int:
    """Number of fully recomputed layers in the whole model.

    ``full_recompute_layers`` is a model total (int) or a per-stage list (summed); ``None`` means
    every layer when ``recompute == "full"`` and none otherwise.
    """
    if full_recompute_layers is None:
        return model.num_layers if recompute == "full" else 0
    values = full_recompute_layers if isinstance(full_recompute_layers, Sequence) \
        and not isinstance(full_recompute_layers, str) else [full_recompute_layers]
    total = 0
    for n in values:
        if check_non_negative("full_recompute_layers", n) != int(n):
            raise InvalidArgumentError("full_recompute_layers", "must be whole numbers",
                                       full_recompute_layers)
        total += int(n)
    if total > model.num_layers:
        raise InvalidArgumentError("full_recompute_layers",
                                   f"more layers than the model has ({model.num_layers})",
                                   full_recompute_layers)
    return total
