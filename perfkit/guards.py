"""Sanity guards where a calculator meets a measurement.

A figure that cannot be right is never shown as a plain number: MFU or HFU above 100 %,
a predicted memory more than 2× or less than 0.5× the measured peak, a predicted step more
than 3× off the measured one, and any of them on a profile that runs no training step (an
inference or evaluation step: no backward pass, :meth:`perfkit.Job.training_step`), which
they all count. Each guard returns the value with a warning that names the
inputs that disagree — first the fields where the job (a config, the user) differs from
what the profile shows (:meth:`perfkit.job.Job.problems`, e.g. "the job has 40 layers but
the profile shows 8 per stage"), else the inputs the figure was computed from, so the
reader knows what to check.

The thresholds are parameters (module constants are their defaults): a 2× memory gap is
far beyond allocator fragmentation and workspaces (tens of percent in the seed's
examples), a 3× step gap beyond any efficiency assumption of an uncalibrated estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .errors import InvalidArgumentError
from .format import WARNING_MARK, bytes_text, ratio_text, share_text, time_text

__all__ = ["Guarded", "check_utilization", "check_memory", "check_step", "job_inputs",
           "MEMORY_RATIO", "STEP_RATIO", "WARNING_MARK"]

#: Predicted / measured memory outside ``[1 / MEMORY_RATIO, MEMORY_RATIO]`` is flagged.
MEMORY_RATIO = 2.0
#: Predicted / measured step time outside ``[1 / STEP_RATIO, STEP_RATIO]`` is flagged.
STEP_RATIO = 3.0

GIB = 2**30


@dataclass(frozen=True)
class Guarded:
    """A figure and, when it cannot be right, why.

    Attributes
    ----------
    value : float
        The figure as computed (never changed by the guard).
    warning : str or None
        None when the figure is plausible; else a sentence naming the inputs that disagree.
    """

    value: float
    warning: str | None = None

    @property
    def ok(self) -> bool:
        """True when no warning was raised."""
        return self.warning is None

    def text(self, decimals: int = 1) -> str:
        """The value for display as a percentage (:func:`perfkit.format.share_text`:
        ``"38.4 %"``), plus :data:`WARNING_MARK` and the words "not plausible" when
        flagged (a flagged figure is never a plain number)."""
        shown = share_text(self.value, decimals) if math.isfinite(self.value) else "–"
        return shown if self.ok else f"{shown} {WARNING_MARK} not plausible"


def job_inputs(job: Any) -> str:
    """The job's inputs to a figure, each with its source, for a warning's second half."""
    if job is None:
        return ""
    parts = []
    model = getattr(job, "model", None)
    if model is not None:
        parts.append(f"{model.num_layers} layers, hidden {model.hidden_size} "
                     f"({job.source('num_layers')})")
    if job.step_time_s:
        parts.append(f"step {time_text(job.step_time_s * 1e6)} ({job.source('step_time_s')})")
    if job.global_batch_size:
        parts.append(f"global batch {job.global_batch_size} × {job.seq_length} "
                     f"({job.source('global_batch_size')})")
    p = job.parallel
    parts.append(f"dp {p.dp} × tp {p.tp} × pp {p.pp} ({job.source('dp')})")
    if job.hardware is not None:
        dtype = job.dtype or job.hardware.default_dtype
        try:
            peak = f"{job.hardware.peak(dtype) / 1e12:,.0f} TFLOP/s"
        except InvalidArgumentError:
            peak = "no peak"
        parts.append(f"{job.hardware.name} {dtype} {peak} ({job.source('hardware')})")
    return "; ".join(parts)


#: How :meth:`perfkit.Job.problems` begins the sentence of a profile with no training step.
_NOT_TRAINING = "the profile is not a training step"


def _not_training(job: Any) -> bool:
    """Whether the job's profile runs no training step (:meth:`perfkit.Job.training_step`),
    which MFU, HFU, the memory theory and the step model all count."""
    step = getattr(job, "training_step", None)
    return callable(step) and step() is False


def _why(job: Any, fallback: str, forward_only: bool = False) -> str:
    problems = job.problems() if job is not None else []
    if forward_only:  # the figure counts the forward pass: that premise is not the reason
        problems = [p for p in problems if not p.startswith(_NOT_TRAINING)]
    if problems:
        return "; ".join(problems)
    inputs = job_inputs(job)
    return f"{fallback}: {inputs}" if inputs else fallback


def check_utilization(value: float, what: str = "MFU", job: Any = None) -> Guarded:
    """MFU or HFU: above 100 % of the peak is impossible.

    Parameters
    ----------
    value : float
        The utilisation as a fraction.
    what : str
        Its name, for the sentence.
    job : perfkit.Job, optional
        The job it was computed for; its disagreements with the profile are named first.

    Returns
    -------
    Guarded
    """
    value = float(value)
    if math.isfinite(value) and _not_training(job):
        return Guarded(value, f"{what} {share_text(value)} counts a training step's FLOPs: "
                              f"{_why(job, '')}")
    if not math.isfinite(value) or value <= 1.0:
        return Guarded(value)
    why = _why(job, "check the inputs it comes from")
    return Guarded(value, f"{what} {share_text(value)} is above 100 % of the peak, which is "
                          f"impossible: {why}")


def _off_by(predicted: float, measured: float | None, ratio: float) -> float | None:
    """``predicted / measured`` when it lies outside ``[1/ratio, ratio]``, else None (also
    when there is no measurement or the prediction is not finite)."""
    if measured is None or not measured or not math.isfinite(predicted):
        return None
    r = predicted / float(measured)
    return None if 1.0 / ratio <= r <= ratio else r


def check_memory(predicted_bytes: float, measured_bytes: float | None, job: Any = None,
                 ratio: float = MEMORY_RATIO, what: str = "the theoretical memory",
                 *, forward_only: bool = False) -> Guarded:
    """Predicted memory against the measured peak: off by more than ``ratio`` is flagged.

    Parameters
    ----------
    predicted_bytes : float
        Static + activation memory from the calculators.
    measured_bytes : float or None
        The framework allocator's measured peak (None: nothing to compare with).
    job : perfkit.Job, optional
    ratio : float
        Flag when predicted / measured is above ``ratio`` or below ``1 / ratio``.
    what : str
        Name of the predicted figure.
    forward_only : bool
        The prediction counts a forward-only step
        (:func:`perfkit.calc.inference_memory.inference_memory`): a profile without a
        backward pass is then compared, not flagged for not training.
    """
    predicted = float(predicted_bytes)
    if _not_training(job) and not forward_only:
        return Guarded(predicted, f"{what} ({bytes_text(predicted)}) counts a training "
                                  f"step's memory: {_why(job, '')}")
    r = _off_by(predicted, measured_bytes, ratio)
    if r is None:
        return Guarded(predicted)
    why = _why(job, "check the model, the batch and the sequence length" if forward_only
               else "check the model, the split and the recompute setting", forward_only)
    return Guarded(predicted, f"{what} ({bytes_text(predicted)}) is {ratio_text(r)} the measured "
                              f"peak ({bytes_text(measured_bytes)}): {why}")


def check_step(predicted_s: float, measured_s: float | None, job: Any = None,
               ratio: float = STEP_RATIO, what: str = "the predicted step") -> Guarded:
    """A predicted step time against the measured one: off by more than ``ratio`` is
    flagged.

    Parameters
    ----------
    predicted_s : float
        From :func:`perfkit.plan.predict` (or :func:`perfkit.estimate_step`).
    measured_s : float or None
        The measured step (None: nothing to compare with).
    job : perfkit.Job, optional
    ratio : float
        Flag when predicted / measured is above ``ratio`` or below ``1 / ratio``.
    what : str
        Name of the predicted figure.
    """
    predicted = float(predicted_s)
    if _not_training(job):
        return Guarded(predicted, f"{what} ({time_text(predicted * 1e6)}) models a training "
                                  f"step: {_why(job, '')}")
    r = _off_by(predicted, measured_s, ratio)
    if r is None:
        return Guarded(predicted)
    why = _why(job, "check the model and the batch it was computed for")
    return Guarded(predicted, f"{what} ({time_text(predicted * 1e6)}) is {ratio_text(r)} the "
                              f"measured step ({time_text(float(measured_s) * 1e6)}): {why}")
