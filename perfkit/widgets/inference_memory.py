"""The memory of an inference step by component, for the Memory tab's chart and line.

:func:`inference_memory_breakdown` is :func:`perfkit.widgets.summary.memory_breakdown`'s
counterpart for a profile without a backward pass (:meth:`perfkit.Job.training_step`
False): the forward-only theory of :func:`perfkit.job.inference_memory.inference_memory_of`
(weights + KV cache + the larger of one layer's working set and the logits), in the
columns :func:`perfkit.charts.memory_chart` draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..format import bytes_text
from ..guards import Guarded, check_memory
from ..job.inference_memory import (
    INFERENCE_THEORY,
    inference_memory_of,
    inference_memory_words,
)

__all__ = ["inference_memory_breakdown", "inference_against_peak", "why_inference",
           "InferenceTheory", "inference_theory"]


def inference_memory_breakdown(job: Any, parallel: Any = None) -> pd.DataFrame:
    """Memory of ``job``'s forward-only step on the most loaded device, by component.

    Parameters
    ----------
    job : perfkit.Job
        A job whose profile runs no training step.
    parallel : perfkit.ParallelConfig, optional
        Another layout of the same job (a what-if: the configuration explorer's controls);
        default the job's own.

    Returns
    -------
    pandas.DataFrame
        Rows ``weights``, ``KV cache`` and the step's largest transient (``one layer's
        working set`` or ``logits``), columns ``component``, ``bytes``, ``GiB`` and
        ``device_GiB`` (the device capacity, where the job has hardware);
        ``attrs["theory"]`` names the theory (:data:`~perfkit.job.inference_memory.
        INFERENCE_THEORY`) and ``attrs["note"]`` says how every term was counted.

    Raises
    ------
    perfkit.errors.InvalidArgumentError
        Where the job has no model (or a type the calculator does not know).
    """
    memory = inference_memory_of(job, parallel)
    frame = memory.to_frame()
    capacity = job.hardware.memory_bytes if job.hardware is not None else float("nan")
    frame["device_GiB"] = capacity / 2**30
    frame.attrs["theory"] = INFERENCE_THEORY
    frame.attrs["note"] = inference_memory_words(job, memory, parallel)
    return frame


def inference_against_peak(job: Any) -> str:
    """The measured peak against the forward-only theory, in sentences for a report: what
    the Memory tab says of a profile without a backward pass, where a training step's
    theory (weights + gradients + optimizer state + saved activations) would overstate its
    memory many times (``05_memory``).

    The sentences give the measured peak (or say there is none), the theory's total and
    parts, their ratio, how each part was counted, and the guard's warning where the two
    are more than :data:`perfkit.guards.MEMORY_RATIO` apart.
    """
    theory = inference_theory(job)
    head = (f"The profile runs no backward pass ({why_inference(job)}): it is held against "
            f"the {theory.name}, {bytes_text(theory.total)} ({theory.parts}).")
    measured = job.peak_memory_bytes
    if not measured:
        return f"{head} No measured peak to compare with ({job.detail('peak_memory_bytes')})."
    line = (f"{head} Measured peak {bytes_text(measured)} "
            f"({job.detail('peak_memory_bytes')}); theory / measured "
            f"{theory.total / float(measured):,.2f}×. The theory counts "
            f"{theory.memory.attrs['note']}.")
    return line if theory.guard.ok else f"{line}\n⚠ {theory.guard.warning}"


@dataclass(frozen=True)
class InferenceTheory:
    """The forward-only theory of a job, what the report's sentences and the Memory tab
    both word: its components, total, name, parts in words and the guard against the
    measured peak."""

    memory: pd.DataFrame  #: :func:`inference_memory_breakdown`
    total: float  #: bytes, the components' sum
    name: str  #: :data:`~perfkit.job.inference_memory.INFERENCE_THEORY`
    parts: str  #: ``"weights 1.2 GiB, KV cache 300 MiB, logits 40 MiB"``
    guard: Guarded  #: :func:`perfkit.guards.check_memory` against the measured peak


def inference_theory(job: Any) -> InferenceTheory:
    """The forward-only theory of ``job`` (:func:`inference_memory_breakdown`) with its
    total, parts and the guard against ``job.peak_memory_bytes`` (a peak that is not
    measured is not flagged).

    Raises
    ------
    perfkit.errors.InvalidArgumentError
        Where the job has no model (as :func:`inference_memory_breakdown`).
    """
    memory = inference_memory_breakdown(job)
    total = float(memory["bytes"].sum())
    name = memory.attrs["theory"]
    parts = ", ".join(f"{c} {bytes_text(b)}" for c, b in
                      zip(memory["component"], memory["bytes"], strict=True))
    guard = check_memory(total, job.peak_memory_bytes, job, what=f"the {name}",
                         forward_only=True)
    return InferenceTheory(memory, total, name, parts, guard)


def why_inference(job: Any) -> str:
    """What showed that the profile runs no training step
    (:func:`perfkit.job.measured.read_training_step`'s words)."""
    return str(job.observed.get("training_step", (None, "no backward operator"))[1])
