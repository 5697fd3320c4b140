"""The Planner's calibration on the open profile (:func:`fit_job`) and its prediction of a
layout (:func:`predict_layout`): what :mod:`perfkit.widgets.prediction`'s figures and
:mod:`perfkit.widgets.prediction_ranking`'s ranking predict with (re-exported from
:mod:`perfkit.widgets.prediction`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ..answers.calibration import on_step_time
from ..errors import PerfkitError, check_choice
from ..format import signed_share_text, time_text
from ..job import Job
from ..notes import runs_apart
from ..plan import Calibration, Prediction, calibrate, predict
from ..plan.calibrate import (
    BACKWARD_CLOSING,
    CLOSINGS,
    FORWARD_CLOSING,
    MATRIX_CLOSING,
    NOT_CLOSED_NOTE,
    VECTOR_CLOSING,
    residual_note,
)
from ..specs import ParallelConfig
from .planner_words import gradient_sentence, sentence_end, why_not

__all__ = ["PlannerFit", "fit_job", "predict_layout"]

_UNCALIBRATED = ("uncalibrated: perfkit's default rates (published A100 figures), not fitted "
                 "to this run")


@dataclass(frozen=True)
class PlannerFit:
    """What the Planner predicts with: a calibration on the open profile (or why not).

    Attributes
    ----------
    calibration : Calibration or None
        From :func:`perfkit.plan.calibrate`; None when nothing could be fitted.
    prediction : Prediction
        The profiled layout predicted with it (:func:`perfkit.plan.predict`).
    source : str
        ``"profile"`` (operators, links and idle time of the profile), ``"step time"``
        (the measured step only) or ``"uncalibrated"``.
    sentence : str
        What the figures are calibrated on, in words (uncalibrated figures say so).
    notes : tuple of str
        The calibration's notes the sentence does not already say (its residual before
        closing, :func:`perfkit.plan.calibrate.residual_note`, is in the sentence).
    """

    calibration: Calibration | None
    prediction: Prediction
    source: str
    sentence: str
    notes: tuple[str, ...] = ()

    @property
    def calibrated(self) -> bool:
        """Whether a calibration supplied the rates."""
        return self.calibration is not None

    @property
    def gradient_words(self) -> str:
        """:func:`gradient_sentence` of a calibration on the profile itself (with a leading
        space; ``""`` for the other fits, whose reduction the profile did not inform):
        what the Planner and the Recompute tab both say about the gradients' size."""
        if self.source != "profile" or self.calibration is None:
            return ""
        return gradient_sentence(self.calibration)


def fit_job(profile: Any, job: Job, closing: str = "one") -> PlannerFit:
    """Calibrate on the open profile for the job on show, falling back as little as needed.

    First :func:`perfkit.plan.calibrate` on the profile itself with the job's model, layout
    and hardware (the user's fields win), closed (``close=True``): the fitted model is
    first said against the measured step (its residual, in :attr:`PlannerFit.sentence`),
    then every compute rate is scaled by one factor so that it reproduces the measured
    step. Work the model does not count (unfused element-wise kernels: RMSNorm, rotary) is
    then carried in proportion to the compute at the other layouts instead of dropped: on
    one Llama measured at four layouts on an H100 (``tests/plan/test_measured_layouts.py``,
    ``docs/planner.md``) the unclosed model is 35 % low on the profiled layout and 28-32 %
    low on the others, the closed one 4.5-11 % high. When the profile cannot be fitted (no step
    breakdown, no device operators) on the job's measured step time; with neither, the
    default rates, said in :attr:`PlannerFit.sentence`. Every path counts static memory
    with the job's scheme (:attr:`perfkit.Job.static_scheme`; :func:`scheme_sentence`
    says which), and the step-time path keeps the job's activations too, as the others.

    A profile that runs no backward pass (:meth:`perfkit.Job.training_step` False: an
    inference or evaluation step) measures a forward pass, and the model predicts a
    training step (forward, backward, optimizer): the calibration's residual is then what
    the profile does not run, not the model's error, so the fit is not closed (closing
    would squeeze the training step into the forward pass's time), the prediction's band leaves it
    out (it would reach from 0 to more than twice the step) and counts the compute part
    at perfkit's default uncertainty instead of the measured one (the backward's speed
    is not measured): :data:`perfkit.plan.predict.DEFAULT_SIGMA`.

    Parameters
    ----------
    profile : Profile or Cluster
    job : perfkit.Job
        Complete (``job.missing()`` empty).
    closing : {"one", "kernels"}
        How the profile's fit is closed (:func:`perfkit.plan.calibrate`'s ``closing``):
        ``"one"`` (default) one factor on every compute rate but the optimizer's, as above;
        ``"kernels"`` by kernel kind and pass, which predicted a tensor-parallel or
        recompute change better on the measured H100 Llama sets and a move to an H200
        worse (the table of :mod:`perfkit.plan.calibrate`, ``docs/planner.md``). The
        step-time fit is always closed with one factor (its sentence says so when
        ``"kernels"`` was asked); an unclosed fit (no backward pass) ignores it.

    Returns
    -------
    PlannerFit
    """
    check_choice("closing", closing, CLOSINGS)
    why = ""
    forward_only = job.training_step() is False
    try:
        cal = calibrate(profile, job.model, job.parallel, job.hardware,
                        static_scheme=job.static_scheme, close=not forward_only,
                        closing=closing)
    except PerfkitError as exc:
        why = why_not(exc)
    else:
        measured = ", ".join(sorted(cal.measured - {"compute", "overhead"}))
        links = (f", link efficiency of its {measured} traffic from its transfers"
                 if measured else ", links at perfkit's defaults (no transfers measured)")
        gap = residual_note(cal.residual)
        sentence = ("Calibrated on this profile: kernel speeds from its operators, idle time "
                    f"from its steps{links}. "
                    + ("The fitted model is" if forward_only
                       else "Before closing, the fitted model was")
                    + f" {signed_share_text(cal.residual)} off the measured step"
                    + (": the run does something the model does not (see the parts)"
                       if gap and not forward_only else "")
                    + (_closing_words(cal) if not forward_only else "."))
        sentence += gradient_sentence(cal)
        apart = runs_apart(profile)  # the page's warning, where the fit is read too
        sentence = f"⚠ {apart} " + sentence if apart else sentence
        notes = tuple(n for n in cal.notes if n not in (gap, NOT_CLOSED_NOTE))
        if forward_only:
            sentence += (" The profile runs no backward pass: it measures a forward pass and "
                         "the model predicts a training step (forward, backward, optimizer), "
                         "so that gap is what the profile does not run, not the model's "
                         "error; the band leaves it out and counts the compute at perfkit's "
                         "default uncertainty (the backward's speed is not measured).")
            cal = dataclasses.replace(cal, residual=0.0, measured=cal.measured - {"compute"})
        return PlannerFit(cal, predict(cal), "profile", sentence, notes)
    step = job.step_time_s
    if step and math.isfinite(step) and step > 0:
        try:
            cal = on_step_time(job)
        except PerfkitError as exc:  # pragma: no cover - a complete job calibrates
            why = f"{why}; {exc}"
        else:
            sentence = (f"Calibrated on the measured step time only ({time_text(step * 1e6)}"
                        f"): every compute rate scaled by one factor, links and idle time at "
                        f"perfkit's defaults. The profile itself could not be fitted: "
                        f"{sentence_end(why)}")
            if closing != "one":
                sentence += (" Closing by kernel kind and pass needs the profile's kernels: "
                             "with the step time alone it is one factor.")
            return PlannerFit(cal, predict(cal), "step time", sentence, cal.notes)
    pred = predict_layout(None, job, job.parallel)
    return PlannerFit(None, pred, "uncalibrated",
                      f"Not calibrated: {_UNCALIBRATED}. {sentence_end(why)}".strip())


def _closing_words(cal: Calibration) -> str:
    """How the closed fit reproduces the measured step: the one factor every compute rate
    was scaled by (the calibration's ``closing scale`` term), or, closed by kernels
    (``closing="kernels"``), the three factors of the matrix kernels and of the forward's
    and the backward's memory-bound kernels (the terms ``MATRIX_CLOSING``,
    ``FORWARD_CLOSING`` and ``BACKWARD_CLOSING`` of :mod:`perfkit.plan.calibrate`), or
    the two of the matrix and the memory-bound kernels where the profile's passes cannot
    be told apart (``MATRIX_CLOSING`` and ``VECTOR_CLOSING``), or that none was needed,
    or that the peak capped it (with a leading ``"; "`` or ``"."``, ending the
    sentence)."""
    found = {t: v for t, v, _ in cal.terms}
    factor = found.get("closing scale")
    passes = (found.get(MATRIX_CLOSING), found.get(FORWARD_CLOSING),
              found.get(BACKWARD_CLOSING))
    split = (found.get(MATRIX_CLOSING), found.get(VECTOR_CLOSING))
    if factor is None and None not in passes:
        split = passes
    if factor is None and None in split:
        return "."
    if cal.source == "profile":
        return _profile_closing_words(cal, factor, split)
    step = time_text(cal.measured_step_s * 1e6)
    if abs(cal.estimated_step_s / cal.measured_step_s - 1) > 1e-6:
        return (f"; every compute rate (the kernels' efficiencies) was then scaled by one "
                f"factor, ×{factor:.3g}, toward the measured step ({step}), as far as the "
                f"model's highest rates allow: the model still predicts "
                f"{time_text(cal.estimated_step_s * 1e6)}.")
    return (f"; every compute rate (the kernels' efficiencies) was then scaled by one factor, "
            f"×{factor:.3g}, so that the model reproduces the measured step ({step}).")


def _profile_closing_words(cal: Calibration, factor: float | None,
                           split: tuple[float | None, ...]) -> str:
    """How a profile's fit is closed (:func:`perfkit.plan.calibrate`): the matrix kernels'
    efficiency scaled to their measured share of the computing time and the forward's
    and the backward's memory-bound kernels' each to their pass's measured share of the
    rest (``split`` those three factors; two, the memory-bound kernels of both passes
    together, where the profile's passes cannot be told apart), or one factor on every
    compute rate but the optimizer's (the default closing, and where the profile's
    kernels do not split), so that the model's computing time is the measured one;
    and the step the closed model then gives this layout beside the measured step, with
    what each is made of (they differ where the slowest rank's communication or idle time
    is not the median rank's or the least idle step's)."""
    computing = sum(cal.parts[p] for p in ("compute", "recompute", "optimizer"))
    capped = NOT_CLOSED_NOTE in cal.notes
    peak = "as far as the model's highest rates allow, " if capped else ""
    if factor is not None:
        said = (f"; every compute rate but the optimizer's (the kernels' efficiencies) was "
                f"then scaled by one factor, ×{factor:.3g}, {peak}")
    elif len(split) == 3:
        matrix, forward, backward = split
        said = (f"; the matrix kernels' efficiency (GEMMs and attention) was then scaled by "
                f"×{matrix:.3g}, toward their share of the profile's kernel time, and the "
                f"memory-bound kernels' by ×{forward:.3g} in the forward pass and "
                f"×{backward:.3g} in the backward, toward each pass's share of the "
                f"profile's memory-bound kernel time, {peak}")
    else:
        matrix, vector = split
        said = (f"; the matrix kernels' efficiency (GEMMs and attention) was then scaled by "
                f"×{matrix:.3g}, toward their share of the profile's kernel time, and the "
                f"memory-bound kernels' by ×{vector:.3g}, {peak}")
    said += (f"so that the model's computing time is the busiest rank's measured one "
             f"({time_text(computing * 1e6)} per step; the parts below are the slowest "
             "rank's)")
    step, model = cal.measured_step_s, cal.estimated_step_s
    if abs(model / step - 1) < 0.005:
        return said + f", and the model reproduces the measured step ({time_text(step * 1e6)})."
    return (said + f"; it gives this layout {time_text(model * 1e6)} against the measured "
            f"{time_text(step * 1e6)} ({signed_share_text(model / step - 1)}), having the "
            "busiest rank's "
            "computing time, the median rank's exposed communication and the idle time of "
            "each rank's least idle step (a profiler's own host stalls lengthen the others), "
            "where the measured step is the slowest rank's (the parts below).")


def predict_layout(fit: PlannerFit | None, job: Job, parallel: ParallelConfig) -> Prediction:
    """Another layout of the job predicted by the fit's model: its calibration
    (:func:`perfkit.plan.predict`), or, uncalibrated, the default rates with the job's
    activation accounting, static-memory convention, type and gradients' size
    (:attr:`perfkit.Job.gradient_bytes`), as :func:`fit_job` predicts the profiled layout
    and the Memory tab counts its memory. With ``parallel = job.parallel`` this is
    :attr:`PlannerFit.prediction`.
    """
    if fit is not None and fit.calibration is not None:
        return predict(fit.calibration, parallel=parallel)
    return predict(None, job.model, parallel, job.hardware, dtype=job.dtype,
                   activation_model=job.activation_model, static_scheme=job.static_scheme,
                   overrides={"gradient_bytes": job.gradient_bytes})
