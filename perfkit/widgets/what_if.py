"""The step time a what-if calculator starts from (:func:`starting_step`).

The metrics panel turns a step time into throughput, MFU and HFU for the model and split
in its controls. A step measured on one job and put under another — the ResNet-50 trace's
177 ms under the stand-in Llama2-13B, or a profile of 8 layers under the full 40-layer
model that ``02_parallel_strategy`` plans for — gives an MFU far above 100 % (1,609.9 %
and 147.5 % on ``shared/samples/wild/k_resnet50_nw0``). So the panel starts from the
profile's measured step only when the profile ran the very configuration in the controls;
otherwise from the uncalibrated step estimate of that configuration (the panel's own row,
:func:`perfkit.widgets.summary.metrics_summary`'s ``predicted_step_s``), and says which.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import PerfkitError
from ..format import time_text
from ..job import Job
from ..specs import Hardware, ModelSpec, ParallelConfig
from .summary import metrics_summary, resolve_hardware, resolve_model

__all__ = ["StartingStep", "starting_step", "FALLBACK_STEP_S"]

#: The step a panel starts from when its configuration is not valid (nothing is computed
#: then: the panel shows the broken rule), seconds.
FALLBACK_STEP_S = 12.8
#: The fields of a split that change the step time (the device count and batch follow).
_SPLIT_FIELDS = ("dp", "tp", "pp", "vpp", "micro_batch_size", "num_micro_batches",
                 "recompute")


@dataclass(frozen=True)
class StartingStep:
    """The step time a what-if starts from, and why.

    Attributes
    ----------
    step_s : float
        Seconds.
    measured : bool
        True when it is the profile's measured step (the profile ran this configuration).
    sentence : str
        What the step is, for the panel's header (one or two sentences).
    """

    step_s: float
    measured: bool
    sentence: str


def _same_model(a: ModelSpec, b: ModelSpec) -> bool:
    return dataclasses.replace(a, name=None) == dataclasses.replace(b, name=None)


def _differences(job: Job, model: ModelSpec, hardware: Hardware,
                 parallel: ParallelConfig) -> list[str]:
    """Why ``job``'s measured step is not the step of this configuration ([] if it is)."""
    why = []
    if job.model is None:
        why.append("the profile does not give the model")
    elif not _same_model(job.model, model):
        why.append(f"the profile ran {job.model.name or 'another model'} "
                   f"({job.model.num_layers} layers), not {model.name or 'this model'} "
                   f"({model.num_layers} layers)")
    if job.hardware is not None and job.hardware.name != hardware.name:
        why.append(f"it ran on {job.hardware.name}, not {hardware.name}")
    split = [f"{name} {getattr(job.parallel, name)} (here {getattr(parallel, name)})"
             for name in _SPLIT_FIELDS
             if getattr(job.parallel, name) != getattr(parallel, name)]
    if split:
        why.append("its split differs: " + ", ".join(split))
    return why


def starting_step(model: ModelSpec | str, hardware: Hardware | str,
                  parallel: ParallelConfig, job: Job | None = None,
                  dtype: str | None = None) -> StartingStep:
    """The step time a what-if of ``model`` on ``hardware`` split as ``parallel`` starts from.

    Parameters
    ----------
    model : ModelSpec or str
        The model in the panel's control (a preset name, or the job's own model).
    hardware : Hardware or str
    parallel : ParallelConfig
    job : perfkit.Job, optional
        The job a profile recorded (:func:`perfkit.infer_job`).
    dtype : str, optional
        The peak the estimate computes at (the panel's precision; default the device's
        ``default_dtype``).

    Returns
    -------
    StartingStep
        The job's measured step when the job ran this model (its fields, whatever its
        name), on this device (or an unnamed one) and with this split (dp, tp, pp, vpp,
        micro-batch size and count, recompute); otherwise the uncalibrated step estimate
        of the configuration, :func:`perfkit.plan.predict`'s step model at perfkit's
        default rates as the panel's row computes it, so that MFU starts at that
        estimate's, never at another job's step. An
        invalid configuration starts at :data:`FALLBACK_STEP_S` (the panel shows the
        broken rule instead of figures).
    """
    try:
        spec, device = resolve_model(model), resolve_hardware(hardware)
    except PerfkitError:
        return StartingStep(FALLBACK_STEP_S, False, "")
    why = ["the profile has no measured step"] if job is not None and not job.step_time_s \
        else [] if job is None else _differences(job, spec, device, parallel)
    if job is not None and not why:
        step = float(job.step_time_s)
        return StartingStep(step, True, f"The step time starts at the profile's measured "
                            f"step, {time_text(step * 1e6)}: it ran this model, device "
                            "and split.")
    try:
        rows = metrics_summary(spec, device, parallel, 1.0, dtype).set_index("key")["value"]
    except PerfkitError:
        return StartingStep(FALLBACK_STEP_S, False, "")
    step = float(rows["predicted_step_s"])
    sentence = (f"The step time starts at the uncalibrated estimate for this configuration, "
                f"{time_text(step * 1e6)}, not a measurement")
    if job is not None and job.step_time_s:
        sentence += (f": the profile's measured {time_text(job.step_time_s * 1e6)} is of "
                     f"another job ({'; '.join(why)})")
    return StartingStep(step, False, sentence + ". Type a measured step time to read "
                        "its throughput and MFU.")
