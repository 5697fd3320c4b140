"""The knobs of a simulation that are not part of the model, the parallel layout or the
hardware: kernel and communication efficiencies, noise, launch and step gaps, the
data-parallel buckets, the recompute style, the static-memory scheme and the activation
model (:class:`Settings`, read by :mod:`perfkit.simulate._engine` and
:mod:`perfkit.simulate._engine_tasks`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..calc.memory import ActivationModel

__all__ = ["Settings"]


@dataclass(frozen=True)
class Settings:
    """Knobs of the simulation that are not part of the model or the parallel layout."""

    efficiency: float = 0.62
    memory_efficiency: float = 0.7
    comm_efficiency: float = 0.8
    noise: float = 0.03
    launch_gap_us: tuple[float, float] = (0.5, 2.5)
    preparing_us: float = 300.0
    step_gap_us: float = 800.0
    dp_buckets: int = 4
    recompute_style: str = field(default="all", metadata={"omit_when_default": True})
    static_scheme: str = "mindspore"
    activation_model: ActivationModel = field(default_factory=ActivationModel.mindformers)
    first_step: int = 1
