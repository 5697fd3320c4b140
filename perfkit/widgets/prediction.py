"""The Planner's figures as plain DataFrames: calibrate on the open profile, the profiled
layout measured against predicted, and the ranked layouts with their bands and what each
changes from the profiled job.

This module gives the profiled layout measured against predicted and the recompute modes;
its siblings the calibration (:mod:`perfkit.widgets.prediction_fit`) and the ranking
(:mod:`perfkit.widgets.prediction_ranking`), whose names it re-exports.

Pure functions, no widgets: the Planner tab and notebook 02 draw what they return, and
the tests check it against the profile's own step table. The model is
:func:`perfkit.plan.predict` (calibrated by :func:`perfkit.plan.calibrate`); see
``docs/planner.md``. The sentences that go with the figures are
:mod:`perfkit.widgets.planner_words`'s, re-exported here.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pandas as pd

from .._stats import median
from ..analysis import step_breakdown
from ..analysis._util import has_values
from ..job import Job
from ..plan import Prediction
from ..plan.predict import STYLE_NOTE
from .planner_words import (
    comparison_sentence,
    gradient_sentence,
    layout_changes,
    planned_job_sentence,
    recompute_text,
    scheme_sentence,
)
from .prediction_fit import PlannerFit, fit_job, predict_layout
from .prediction_ranking import (
    BEST_COLUMNS,
    band_text,
    batch_text,
    best_layouts,
    memory_text,
    packed_step_tokens,
    ranked_layouts,
    ranking_sentence,
)

__all__ = ["PlannerFit", "COMPARED_PARTS", "fit_job", "gradient_sentence", "scheme_sentence",
           "predict_layout", "recompute_modes", "recompute_text", "RECOMPUTE_COLUMNS",
           "measured_step", "measured_against_predicted", "comparison_sentence",
           "layout_changes", "ranked_layouts", "best_layouts", "BEST_COLUMNS", "ranking_sentence",
           "band_text", "memory_text", "batch_text", "packed_step_tokens", "PREDICTED_MFU",
           "planned_job_sentence"]


#: The header of the MFU of a predicted step (the Recompute and Planner tables): the
#: Overview's MFU is the measured step's, so a page that shows both says which is which.
PREDICTED_MFU = "MFU of a predicted training step"

#: The parts of a step a profile measures, and the predicted parts
#: (:data:`perfkit.calc.timing.PART_NAMES`) each one holds. A profile's "communication
#: not overlapped" includes the pipeline's receive waits, so the bubble goes there.
COMPARED_PARTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "compute": ("computing_us", ("compute", "recompute", "optimizer")),
    "exposed communication and pipeline waits": (
        "comm_not_overlapped_us", ("tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm",
                                   "bubble")),
    "idle": ("free_us", ("overhead",)),
}


#: Columns of :func:`recompute_modes`.
RECOMPUTE_COLUMNS = ("recompute", "activation_GiB", "memory_GiB", "fits", "compute_s",
                     "step_s", "low_s", "high_s", "tokens_per_s_per_device", "mfu",
                     "profiled")


def recompute_modes(fit: PlannerFit, job: Job,
                    modes: tuple[str, ...] = ("none", "selective", "full")) -> pd.DataFrame:
    """Memory against time for each recompute mode, predicted by the Planner's model.

    Each row is :func:`predict_layout` of the job's layout with ``recompute`` changed
    (``recompute_layers`` dropped, so the mode applies to every layer): the same model,
    calibration and conventions (activations, static memory) as the Planner's prediction
    of the profiled layout, so the mode the job runs shows the Planner's step figure. A
    job whose layout is none of the rows (some layers fully recomputed) gets one more row,
    the profiled layout itself (:attr:`PlannerFit.prediction`).

    Parameters
    ----------
    fit : PlannerFit
        From :func:`fit_job` on the profile and ``job``.
    job : perfkit.Job
        Complete (model, hardware, layout).
    modes : tuple of str
        Values of ``ParallelConfig.recompute`` to compare.

    Returns
    -------
    pandas.DataFrame
        :data:`RECOMPUTE_COLUMNS`: ``activation_GiB`` (peak stage) and ``memory_GiB``
        (static + activations) per device, ``fits``, ``compute_s`` (the predicted compute
        and recompute parts), ``step_s`` with its band ``low_s`` – ``high_s`` (NaN
        uncalibrated), ``tokens_per_s_per_device``, ``mfu`` (at the predicted step) and
        ``profiled`` (the row of the job's own layout). ``attrs["notes"]``: what a row
        assumed that no run measured (a full recompute's style, :func:`perfkit.plan.
        predict`'s note, with the step the other style gives).
    """
    own = job.parallel
    rows, notes = [], []
    for mode in modes:
        changed = dataclasses.replace(own, recompute=mode, recompute_layers=None)
        pred = predict_layout(fit, job, changed)
        rows.append(_mode_row(mode, pred, fit.calibrated, changed == own))
        notes += [n for n in pred.notes if n.startswith(STYLE_NOTE) and n not in notes]
    if not any(r["profiled"] for r in rows):
        rows.append(_mode_row(f"{recompute_text(own)} (the profiled layout)",
                              fit.prediction, fit.calibrated, True))
    out = pd.DataFrame(rows, columns=list(RECOMPUTE_COLUMNS))
    out.attrs["notes"] = notes
    return out


def _mode_row(mode: str, pred: Prediction, calibrated: bool, profiled: bool) -> dict[str, Any]:
    return {"recompute": mode, "activation_GiB": pred.activation_bytes / 2**30,
            "memory_GiB": pred.memory_bytes / 2**30, "fits": pred.fits,
            "compute_s": pred.parts["compute"] + pred.parts["recompute"],
            "step_s": pred.step_s, "low_s": pred.low_s if calibrated else math.nan,
            "high_s": pred.high_s if calibrated else math.nan,
            "tokens_per_s_per_device": pred.tokens_per_second_per_device, "mfu": pred.mfu,
            "profiled": profiled}


def _slowest_rows(profile: Any) -> pd.DataFrame:
    """Per step, the row of its slowest rank (what the step time counts)."""
    steps = step_breakdown(profile).dropna(subset=["step_us"])
    if steps.empty:
        return steps
    return steps.loc[steps.groupby("step", dropna=False)["step_us"].idxmax()]


def measured_step(profile: Any) -> pd.DataFrame:
    """The profiled step as measured, in the parts the step model predicts.

    Per step the slowest rank (a synchronous job steps at its pace), then the median over
    steps of its device span (``step_us``, what the step model predicts) and of each part
    of :func:`perfkit.analysis.step_breakdown` (:data:`COMPARED_PARTS`); ``wait_s`` is the
    median of the device's wait before the span (``preparing_us``: data, launch), which
    the job's step time counts and the model has no part for.

    Returns
    -------
    pandas.DataFrame
        Columns ``run`` (``"measured"``), ``part``, ``seconds``, ``step_s``, ``wait_s``
        (NaN where the profile measures no wait). A profile without a step breakdown
        gives one row of part ``"step"`` (its parts unknown), or none when it shows no step
        time at all.
    """
    rows: list[dict[str, Any]] = []
    slowest = _slowest_rows(profile)
    if not slowest.empty:
        step_s = median(slowest["step_us"]) / 1e6
        wait_s = median(slowest["preparing_us"].fillna(0.0)) / 1e6 \
            if has_values(slowest, "preparing_us") else math.nan
        columns = [c for c, _parts in COMPARED_PARTS.values()]
        if all(c in slowest.columns and slowest[c].notna().all() for c in columns):
            for part, (column, _parts) in COMPARED_PARTS.items():
                rows.append({"run": "measured", "part": part,
                             "seconds": median(slowest[column]) / 1e6,
                             "step_s": step_s, "wait_s": wait_s})
        else:
            rows.append({"run": "measured", "part": "step", "seconds": step_s,
                         "step_s": step_s, "wait_s": wait_s})
    return pd.DataFrame(rows, columns=["run", "part", "seconds", "step_s", "wait_s"])


def measured_against_predicted(profile: Any, fit: PlannerFit) -> pd.DataFrame:
    """The profiled layout: its measured step and parts next to the prediction.

    Measured: :func:`measured_step` (per step the slowest rank, the median over steps of
    its device span and of each part, and ``wait_s``, the device's wait before the span).
    Predicted: :attr:`PlannerFit.prediction`, its parts grouped as :data:`COMPARED_PARTS`,
    with its band.

    Returns
    -------
    pandas.DataFrame
        Columns ``run`` (``"measured"``, ``"predicted"``), ``part``, ``seconds``,
        ``step_s``, ``low_s``, ``high_s`` (NaN on the measured rows), ``wait_s`` (NaN on
        the predicted rows, and where the profile measures no wait). A profile without a
        step breakdown gives one measured row of part ``"step"`` (its parts unknown), or
        none when it shows no step time at all.
    """
    rows = measured_step(profile).to_dict("records")
    pred = fit.prediction
    for part, (_column, parts) in COMPARED_PARTS.items():
        rows.append({"run": "predicted", "part": part,
                     "seconds": float(sum(pred.parts[p] for p in parts)),
                     "step_s": pred.step_s, "low_s": pred.low_s, "high_s": pred.high_s})
    return pd.DataFrame(rows, columns=["run", "part", "seconds", "step_s", "low_s", "high_s",
                                       "wait_s"])
