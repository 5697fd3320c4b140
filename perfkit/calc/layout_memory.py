"""The memory of one layout's most loaded device, as the step model's callers count it.

:func:`layout_memory` is what :func:`perfkit.calc.estimate_step` and
:func:`perfkit.plan.predict` report beside the step: static memory
(:func:`perfkit.calc.memory.static_memory`, with the ``zero_stage`` rule of
:func:`perfkit.calc.memory.zero_stage_scheme`) plus the activations of the fullest stage
(:func:`perfkit.calc.activation.activation_memory`), held to a limit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidArgumentError, ParallelConfigError
from ..specs import Hardware, ModelSpec, ParallelConfig
from .activation import ActivationModel, activation_memory
from .memory import static_memory, zero_stage_scheme
from .usable_memory import MEMORY_RESERVE, usable_memory_bytes

__all__ = ["LayoutMemory", "layout_memory", "uneven_activation"]


@dataclass(frozen=True)
class LayoutMemory:
    """Bytes of the most loaded device and the limit they are held to; ``notes`` say what
    was assumed (the ``zero_stage`` rule, an uneven split's activations not computed)."""

    static_bytes: float
    activation_bytes: float
    limit_bytes: float
    notes: tuple[str, ...] = ()

    @property
    def total_bytes(self) -> float:
        """Static + activation bytes."""
        return self.static_bytes + self.activation_bytes

    @property
    def fits(self) -> bool:
        """Whether the total fits the limit (True where the activations are unknown)."""
        if not np.isfinite(self.activation_bytes):
            return True
        return bool(self.total_bytes <= self.limit_bytes)


def layout_memory(model: ModelSpec, parallel: ParallelConfig, hardware: Hardware,
                  static_scheme: str, *, dtype: str | None = None,
                  gradient_bytes: float | None = None,
                  activation_model: ActivationModel | None = None,
                  activation_convention: str = "seed", uneven: bool = False,
                  memory_limit_bytes: float | None = None,
                  memory_reserve: float = MEMORY_RESERVE) -> LayoutMemory:
    """Static and activation memory of a layout's most loaded device, and its limit.

    Parameters
    ----------
    model, parallel, hardware
        The layout.
    static_scheme : {"mindspore", "megatron", "zero", "deepspeed"}
        The job's static-memory scheme; with ``parallel.zero_stage`` 2 or 3 the gradients
        (and at 3 the weights) are counted sharded: ``"zero"``
        (:func:`~perfkit.calc.memory.zero_stage_scheme`; a note says so).
    dtype : str, optional
        The type of the run's tensors (:func:`~perfkit.calc.memory.static_memory`'s).
    gradient_bytes : float, optional
        Bytes per gradient element kept (None: the scheme's); not used under
        ``"deepspeed"``, whose scheme fixes them.
    activation_model, activation_convention
        See :func:`~perfkit.calc.activation.activation_memory`.
    uneven : bool
        The stages are split unevenly: the activations are those of a first stage holding
        ``⌈L / (pp·vpp)⌉`` layers per chunk (NaN, with a note, where that split is not
        valid).
    memory_limit_bytes : float, optional
        Usable bytes; default ``hardware.memory_bytes · (1 − memory_reserve)``
        (:func:`~perfkit.calc.usable_memory.usable_memory_bytes`).
    memory_reserve : float
        Share of device memory kept back when ``memory_limit_bytes`` is not given
        (default :data:`~perfkit.calc.usable_memory.MEMORY_RESERVE`).
    """
    notes: list[str] = []
    scheme = zero_stage_scheme(static_scheme, parallel.zero_stage)
    if scheme != static_scheme:  # the job's scheme shards the optimizer state only
        weights = "too" if parallel.zero_stage >= 3 else "not"
        notes.append(f"zero_stage {parallel.zero_stage}: static memory counted as "
                     f"static_scheme='zero', not {static_scheme!r} (gradients and optimizer "
                     f"state sharded over dp × cp, weights {weights})")
    static = static_memory(model, parallel, scheme, dtype=dtype,
                           gradient_bytes=None if scheme == "deepspeed"
                           else gradient_bytes).total_bytes
    am = activation_model
    if uneven:
        act = uneven_activation(model, parallel, am, activation_convention)
    else:
        act = activation_memory(model, parallel, activation_model=am,
                                convention=activation_convention).total_bytes
    limit = float(memory_limit_bytes) if memory_limit_bytes is not None \
        else usable_memory_bytes(hardware, memory_reserve)
    out = LayoutMemory(static, act, limit)
    if not np.isfinite(act):
        notes.append("activation memory of this uneven stage split is not computed")
    elif not out.fits:
        notes.append(f"does not fit: {out.total_bytes / 2**30:.1f} GiB of "
                     f"{limit / 2**30:.1f} GiB")
    return LayoutMemory(static, act, limit, tuple(notes))


def uneven_activation(model: ModelSpec, parallel: ParallelConfig,
                      am: ActivationModel | None, convention: str = "seed") -> float:
    """Activation bytes of the first stage of an uneven split, as if every stage held
    ``⌈L / (pp·vpp)⌉`` layers per chunk (the first stage keeps the most micro-batches in
    flight); NaN where that even model of the split is not a valid layout."""
    even = model.replace(num_layers=parallel.pp * parallel.vpp
                         * -(-model.num_layers // (parallel.pp * parallel.vpp)))
    par = parallel.replace(recompute_layers=None) if parallel.recompute != "selective" \
        else parallel
    try:
        return activation_memory(even, par, activation_model=am,
                                 convention=convention).total_bytes
    except (InvalidArgumentError, ParallelConfigError):
        return float("nan")
