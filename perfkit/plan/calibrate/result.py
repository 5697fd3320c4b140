"""What a calibration returns: the run it was fitted to and the fitted rates."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ...calc import ActivationModel
from ...calc.rates import Rates
from ...specs import Hardware, ModelSpec, ParallelConfig

__all__ = ["CalibratedJob", "Calibration"]


@dataclass(frozen=True)
class CalibratedJob:
    """The run a calibration was fitted to (what :func:`perfkit.plan.predict` starts from).

    ``dtype`` is the type whose peak the step model computes at (None: the hardware's
    default); ``tensor_dtype`` the run's own type where the hardware lists no peak for it
    (:func:`perfkit.plan.run_types`), None otherwise; :attr:`run_dtype` is the
    type static memory and the gradients follow.
    """

    model: ModelSpec
    parallel: ParallelConfig
    hardware: Hardware
    global_batch_size: int
    seq_length: int
    activation_model: ActivationModel = field(default_factory=ActivationModel)
    static_scheme: str = "mindspore"
    dtype: str | None = None
    stage_layers: tuple[int, ...] | None = None
    selective_layers: tuple[int, ...] | None = None
    comm_layers: tuple[int, ...] | None = None
    tensor_dtype: str | None = None

    @property
    def run_dtype(self) -> str | None:
        """The type the run's tensors keep: :attr:`tensor_dtype` where the hardware has no
        peak for it (:attr:`dtype`, the peak's type, is then None), else :attr:`dtype`.
        Static memory and the gradients' default size follow it, so an fp32 run on an
        Ascend NPU (no fp32 peak) keeps fp32 weights and gradients in the Planner as on its
        Memory tab."""
        return self.tensor_dtype or self.dtype


@dataclass(frozen=True)
class Calibration:
    """Fitted rates and how well they reproduce the measured run.

    Attributes
    ----------
    rates : Rates
        The fitted rates (what :func:`perfkit.plan.predict` and
        :func:`perfkit.plan.search` run at).
    job : CalibratedJob
        The calibrating run's model, layout, hardware and conventions.
    source : str
        ``"profile"``, ``"steps"`` or ``"step time"``.
    measured_step_s : float
        The measured step (slowest rank, median over steps; of a profile, the device span
        without the wait before it).
    predicted_step_s : float
        The model's step for the calibrating run with the fitted rates, before closing.
    residual : float
        ``predicted_step_s / measured_step_s − 1``.
    estimated_step_s : float
        The model's step for the calibrating run with the final rates (equal to the
        measurement when the fit was closed).
    closed : bool
        Whether the compute rates were finally scaled to reproduce the measurement: False
        where closing was not asked, and where the peak stopped it short (the measured run
        is faster than the model allows at its highest rates; a note says so).
    measured : frozenset of str
        Which rates come from the run (``"compute"``, ``"overhead"``, and the groups
        ``"tp"``, ``"dp"``, ``"pp"``, ``"ep"``, ``"cp"`` whose traffic was measured); the
        others are perfkit's defaults. :func:`perfkit.plan.predict` widens its band for
        parts at default rates.
    terms : tuple of (term, value, how)
        What was fitted, with its value and from what (:meth:`to_frame`).
    parts : dict of str to float
        The calibrating run's predicted parts (seconds) with the final rates.
    notes : tuple of str
    """

    rates: Rates
    job: CalibratedJob
    source: str
    measured_step_s: float
    predicted_step_s: float
    residual: float
    estimated_step_s: float
    closed: bool
    measured: frozenset[str]
    terms: tuple[tuple[str, float, str], ...]
    parts: dict[str, float]
    notes: tuple[str, ...]

    @property
    def error(self) -> float:
        """The residual (kept under its former name)."""
        return self.residual

    @property
    def efficiency(self) -> float:
        """Fitted GEMM efficiency ``e_max``."""
        return self.rates.gemm_efficiency

    @property
    def overhead_s(self) -> float:
        """Fixed time per step plus the launch gaps of the calibrating run."""
        return self.parts.get("overhead", self.rates.overhead_s)

    def to_frame(self) -> pd.DataFrame:
        """One row per fitted term: ``term``, ``value``, ``how``."""
        return pd.DataFrame(list(self.terms), columns=["term", "value", "how"])
