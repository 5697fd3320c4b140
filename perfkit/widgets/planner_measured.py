"""What the Planner says of the measured step: its model FLOPs utilisation (the Overview's
figure) and, on an inference profile, that the Planner's step model is for training.

The measured MFU is :func:`perfkit.widgets.headline.mfu_figure`'s, the one function the
Overview's card shows, so the Planner, the Overview and the ``mfu`` / ``mfu_inference``
findings give one figure for one job:

* a training step: ``MFU = model FLOPs per token × tokens/s per device / peak``
  (:func:`perfkit.calc.flops.mfu` through :func:`perfkit.widgets.summary.job_summary`);
* an inference step (:meth:`perfkit.Job.training_step` False):
  ``MFU = F / (step time × tp × pp × peak)`` with ``F`` one forward pass's model FLOPs
  (:func:`perfkit.job.inference_mfu.inference_mfu_figure`).

The Planner's step model (:func:`perfkit.plan.predict`) predicts a training step (forward,
backward, optimizer): on an inference profile it predicts no step of the run, and
:func:`inference_step_sentence` says so. Pure functions of a job: the Planner tab draws
them.
"""

from __future__ import annotations

from ..job import Job
from ..job.measured import TRAINING_STEP
from .headline import Figure, mfu_figure
from .planner_words import sentence_end

__all__ = ["MFU_LABEL", "INFERENCE_MFU_LABEL", "measured_mfu", "measured_mfu_sentence",
           "inference_step_sentence", "TRAINING_PLAN_HEADING"]

#: What the Planner calls the measured MFU of a training step (the ``mfu`` finding's words).
MFU_LABEL = "Model FLOPs utilisation of the measured step"

#: What the Planner calls the measured MFU of an inference step (the ``mfu_inference``
#: finding's words).
INFERENCE_MFU_LABEL = "Model FLOPs utilisation of this inference step"

#: The heading of the training plan an inference profile's Planner shows on request.
TRAINING_PLAN_HEADING = ("A training step of this model, predicted (not this inference "
                         "run): the profiled layout and the other layouts that fit")


def measured_mfu(job: Job) -> tuple[str, Figure]:
    """The label and the figure of ``job``'s measured MFU: :data:`INFERENCE_MFU_LABEL` for
    an inference step, else :data:`MFU_LABEL`; the figure is the Overview's
    (:func:`perfkit.widgets.headline.mfu_figure`: its text, how it was counted, the guard's
    warning), "–" with why not where it cannot be computed."""
    label = INFERENCE_MFU_LABEL if job.training_step() is False else MFU_LABEL
    return label, mfu_figure(job)


def measured_mfu_sentence(job: Job) -> str:
    """``job``'s measured MFU in one or two sentences: the label, the Overview's figure
    and how it was counted (or why it is not computed), the guard's warning if any."""
    label, figure = measured_mfu(job)
    if figure.text == "–":
        return f"{label}: {sentence_end(figure.note)}"
    text = f"{label}: {figure.text} (the Overview's figure). How it is counted: " \
        f"{sentence_end(figure.note)}"
    if figure.warning:
        text += f" ⚠ {sentence_end(figure.warning)}"
    return text


def inference_step_sentence(job: Job) -> str:
    """Why the Planner predicts nothing of an inference profile's run: the profile is not
    a training step (what shows it, :func:`perfkit.job.measured.read_training_step`) and
    the step model predicts a training step (forward, backward, optimizer)."""
    detail = job.observed.get(TRAINING_STEP, (None, ""))[1]
    why = f" ({detail})" if detail else ""
    return ("This profile is an inference step, not a training step: it runs no backward "
            f"pass{why}. The Planner's step model (perfkit.plan.predict) is for training: "
            "it predicts a training step (forward, backward and optimizer), which is not "
            "this run, so its prediction and the layouts it ranks say nothing about this "
            "step. What applies to this run is measured: its step and its model FLOPs "
            "utilisation below.")
