"""The Planner's figures as plain DataFrames: calibrate on the open profile, the profiled
layout measured against predicted, and the ranked layouts with their bands and what each
changes from the profiled job.

Pure functions, no widgets: the Planner tab and notebook 02 draw what they return, and
the tests check it against the profile's own step table. The model is
:func:`perfkit.plan.predict` (calibrated by :func:`perfkit.plan.calibrate`); see
``docs/planner.md``. The sentences that go with the figures are
:mod:`perfkit.widgets.planner_words`'s, re-exported here.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .._stats import median
from ..analysis import step_breakdown
from ..analysis._util import has_values
from ..calc.rates import Rates
from ..errors import PerfkitError
from ..format import bytes_text, count_text, counted, plural, share_text, time_text
from ..job import Job
from ..plan import Calibration, Prediction, calibrate, predict, search, to_parallel_config
from ..plan.calibrate import residual_note
from ..specs import ParallelConfig
from .planner_words import (
    comparison_sentence,
    gradient_sentence,
    layout_changes,
    recompute_text,
    scheme_sentence,
    sentence_end,
    why_not,
)

__all__ = ["PlannerFit", "COMPARED_PARTS", "fit_job", "gradient_sentence", "scheme_sentence",
           "predict_layout", "recompute_modes", "recompute_text",
           "RECOMPUTE_COLUMNS", "measured_against_predicted", "comparison_sentence",
           "layout_changes", "ranked_layouts", "best_layouts", "BEST_COLUMNS", "ranking_sentence",
           "band_text", "memory_text", "PREDICTED_MFU"]

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


def fit_job(profile: Any, job: Job) -> PlannerFit:
    """Calibrate on the open profile for the job on show, falling back as little as needed.

    First :func:`perfkit.plan.calibrate` on the profile itself with the job's model, layout
    and hardware (the user's fields win); when the profile cannot be fitted (no step
    breakdown, no device operators) on the job's measured step time; with neither, the
    default rates, said in :attr:`PlannerFit.sentence`. Every path counts static memory
    with the job's scheme (:attr:`perfkit.Job.static_scheme`; :func:`scheme_sentence`
    says which), and the step-time path keeps the job's activations too, as the others.

    A profile that runs no backward pass (:meth:`perfkit.Job.training_step` False: an
    inference or evaluation step) measures a forward pass, and the model predicts a
    training step (forward, backward, optimizer): the calibration's residual is then what
    the profile does not run, not the model's error, so the prediction's band leaves it
    out (it would reach from 0 to more than twice the step) and counts the compute part
    at perfkit's default uncertainty instead of the measured one (the backward's speed
    is not measured): :data:`perfkit.plan.predict.DEFAULT_SIGMA`.

    Parameters
    ----------
    profile : Profile or Cluster
    job : perfkit.Job
        Complete (``job.missing()`` empty).

    Returns
    -------
    PlannerFit
    """
    why = ""
    try:
        cal = calibrate(profile, job.model, job.parallel, job.hardware,
                        static_scheme=job.static_scheme)
    except PerfkitError as exc:
        why = why_not(exc)
    else:
        measured = ", ".join(sorted(cal.measured - {"compute", "overhead"}))
        links = (f", link efficiency of its {measured} traffic from its transfers"
                 if measured else ", links at perfkit's defaults (no transfers measured)")
        forward_only = job.training_step() is False
        gap = residual_note(cal.residual)
        sentence = ("Calibrated on this profile: kernel speeds from its operators, idle time "
                    f"from its steps{links}. Before any closing, the fitted model is "
                    f"{cal.residual:+.1%} off the measured step"
                    + (": the run does something the model does not (see the parts)."
                       if gap and not forward_only else "."))
        sentence += gradient_sentence(cal)
        notes = tuple(n for n in cal.notes if n != gap)
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
            cal = calibrate(float(step), job.model, job.parallel, job.hardware,
                            activation_model=job.activation_model, rates=Rates(
                                gradient_bytes=job.gradient_bytes),
                            static_scheme=job.static_scheme, dtype=job.dtype)
        except PerfkitError as exc:  # pragma: no cover - a complete job calibrates
            why = f"{why}; {exc}"
        else:
            sentence = (f"Calibrated on the measured step time only ({time_text(step * 1e6)}"
                        f"): every compute rate scaled by one factor, links and idle time at "
                        f"perfkit's defaults. The profile itself could not be fitted: "
                        f"{sentence_end(why)}")
            return PlannerFit(cal, predict(cal), "step time", sentence, cal.notes)
    pred = predict_layout(None, job, job.parallel)
    return PlannerFit(None, pred, "uncalibrated",
                      f"Not calibrated: {_UNCALIBRATED}. {sentence_end(why)}".strip())


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
        ``profiled`` (the row of the job's own layout).
    """
    own = job.parallel
    rows = []
    for mode in modes:
        changed = dataclasses.replace(own, recompute=mode, recompute_layers=None)
        rows.append(_mode_row(mode, predict_layout(fit, job, changed), fit.calibrated,
                              changed == own))
    if not any(r["profiled"] for r in rows):
        rows.append(_mode_row(f"{recompute_text(own)} (the profiled layout)",
                              fit.prediction, fit.calibrated, True))
    return pd.DataFrame(rows, columns=list(RECOMPUTE_COLUMNS))


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


def measured_against_predicted(profile: Any, fit: PlannerFit) -> pd.DataFrame:
    """The profiled layout: its measured step and parts next to the prediction.

    Measured: per step the slowest rank (a synchronous job steps at its pace), then the
    median over steps of its device span (``step_us``, what the step model predicts) and
    of each part of :func:`perfkit.analysis.step_breakdown`; ``wait_s`` on the measured
    rows is the median of the device's wait before the span (``preparing_us``: data,
    launch), which the job's step time counts and the model has no part for. Predicted:
    :attr:`PlannerFit.prediction`, its parts grouped as :data:`COMPARED_PARTS`, with its
    band.

    Returns
    -------
    pandas.DataFrame
        Columns ``run`` (``"measured"``, ``"predicted"``), ``part``, ``seconds``,
        ``step_s``, ``low_s``, ``high_s`` (NaN on the measured rows), ``wait_s`` (NaN on
        the predicted rows, and where the profile measures no wait). A profile without a
        step breakdown gives one measured row of part ``"step"`` (its parts unknown), or
        none when it shows no step time at all.
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
    pred = fit.prediction
    for part, (_column, parts) in COMPARED_PARTS.items():
        rows.append({"run": "predicted", "part": part,
                     "seconds": float(sum(pred.parts[p] for p in parts)),
                     "step_s": pred.step_s, "low_s": pred.low_s, "high_s": pred.high_s})
    return pd.DataFrame(rows, columns=["run", "part", "seconds", "step_s", "low_s", "high_s",
                                       "wait_s"])


def ranked_layouts(job: Job, fit: PlannerFit, num_devices: int | None = None,
                   global_batch_size: int | None = None) -> pd.DataFrame:
    """Every layout of the job ranked by :func:`perfkit.plan.search` with the model of
    :func:`predict_layout`: each row's step time and memory are what ``predict_layout``
    gives for its layout.

    Parameters
    ----------
    job : perfkit.Job
        Complete; its model and hardware, and by default its devices and global batch.
    fit : PlannerFit
        From :func:`fit_job`: its calibration, or none: the step model at perfkit's
        default rates (``search(..., rates=Rates(gradient_bytes=job.gradient_bytes))``)
        with the job's activation accounting, static-memory scheme and type, as
        :func:`predict_layout` predicts uncalibrated.
    num_devices, global_batch_size : int, optional

    Returns
    -------
    pandas.DataFrame
        :func:`perfkit.plan.search` with ``include_rejected=True``, with ``low_s`` and
        ``high_s``, the band of :func:`perfkit.plan.predict` (uncalibrated, its default
        uncertainty only).
    """
    devices = int(num_devices or job.world_size)
    batch = int(global_batch_size or job.global_batch_size)
    cal = fit.calibration
    kwargs: dict[str, Any] = {"include_rejected": True}
    if cal is not None:
        kwargs.update(calibration=cal, static_scheme=cal.job.static_scheme,
                      dtype=cal.job.dtype)
    else:  # predict_layout's uncalibrated model: default rates, the job's conventions
        kwargs.update(rates=Rates(gradient_bytes=job.gradient_bytes),
                      static_scheme=job.static_scheme, dtype=job.dtype,
                      activation_model=job.activation_model)
    return search(job.model, job.hardware, devices, batch, **kwargs)


#: Columns of :func:`best_layouts`.
BEST_COLUMNS = ("rank", "changes", "step_s", "low_s", "high_s", "step_band",
                "tokens_per_second_per_device", "mfu", "memory_bytes", "memory_limit_bytes",
                "memory_fit", "fits", "profiled")

#: The fields of a search row that make its layout (:func:`perfkit.plan.to_parallel_config`).
_LAYOUT_FIELDS = ("dp", "tp", "pp", "cp", "vpp", "micro_batch_size", "num_micro_batches")


def _other_layouts(ranked: pd.DataFrame, parallel: ParallelConfig) -> pd.DataFrame:
    """The layouts of the search that fit, in its order (fastest first), without the
    profiled layout itself when the search holds it (the prediction stands for it)."""
    fits = ranked[ranked["fits"].astype(bool)].sort_values("rank", kind="stable")
    near = np.ones(len(fits), dtype=bool)
    for name in _LAYOUT_FIELDS:
        near &= fits[name].to_numpy() == getattr(parallel, name)
    same = [i for i, row in fits[near].iterrows()
            if layout_changes(parallel, to_parallel_config(row)) == "the profiled layout"]
    return fits.drop(index=same)


def _same_job(ranked: pd.DataFrame, parallel: ParallelConfig) -> bool:
    """Whether the search splits the profiled job's global batch over its devices (only
    then do its step times compare with the profiled layout's)."""
    if ranked.empty:
        return True
    devices = ranked["dp"] * ranked["tp"] * ranked["pp"] * ranked["cp"]
    batch = ranked["dp"] * ranked["micro_batch_size"] * ranked["num_micro_batches"]
    return bool((devices == parallel.world_size).all()
                and (batch == parallel.global_batch_size).all())


def best_layouts(ranked: pd.DataFrame, fit: PlannerFit, parallel: ParallelConfig,
                 n: int = 8) -> pd.DataFrame:
    """The ``n`` fastest layouts that fit and the profiled layout, in one ranking by
    predicted step.

    The profiled layout is the fit's prediction (:attr:`PlannerFit.prediction`); where
    the search holds it too, that row is left out, so it shows once. It takes its place
    among the layouts that fit: its rank is 1 + the others predicted faster (ties go to
    it), and those it passes move one place down. It is in the table wherever it ranks,
    after the first ``n`` when it ranks below them. A search over another device count or
    global batch (its step times do not compare) ranks its own layouts only, and the
    profiled layout comes last without a rank.

    Parameters
    ----------
    ranked : pandas.DataFrame
        :func:`ranked_layouts` (or :func:`perfkit.plan.search` with ``include_rejected``).
    fit : PlannerFit
        Its prediction of the profiled layout makes the profiled row.
    parallel : ParallelConfig
        The profiled layout (what ``changes`` is counted from).
    n : int
        How many other layouts to show.

    Returns
    -------
    pandas.DataFrame
        :data:`BEST_COLUMNS`, in the order of ``rank`` (nullable integer; missing on the
        profiled row when the search is of another job size): the search's figures,
        ``changes`` (:func:`layout_changes`; ``"the profiled layout"`` on the profiled
        row), ``step_band`` (``"1.21 s (1.15 s – 1.27 s)"``; the step alone without a
        calibration), ``memory_fit`` (``"2.3 GiB of 57.6 GiB (4 %)"``), ``profiled``.
    """
    others = _other_layouts(ranked, parallel)
    pred = fit.prediction
    same = _same_job(ranked, parallel)
    faster = int((others["step_s"] < pred.step_s).sum()) if same else len(others)
    hidden = () if fit.calibrated else ("low_s", "high_s")  # a band only when calibrated
    rows = [{**{c: np.nan if c in hidden else row.get(c, np.nan) for c in BEST_COLUMNS},
             "changes": layout_changes(parallel, to_parallel_config(row)), "profiled": False,
             "rank": i + 1 + (i >= faster)}
            for i, (_, row) in enumerate(others.head(n).iterrows())]
    own = {"changes": "the profiled layout", "step_s": pred.step_s,
           "low_s": pred.low_s if fit.calibrated else np.nan,
           "high_s": pred.high_s if fit.calibrated else np.nan,
           "tokens_per_second_per_device": pred.tokens_per_second_per_device,
           "mfu": pred.mfu, "memory_bytes": pred.memory_bytes,
           "memory_limit_bytes": pred.memory_limit_bytes, "fits": pred.fits,
           "profiled": True, "rank": faster + 1 if same else pd.NA}  # apart: not ranked
    rows.insert(min(faster, len(rows)), own)
    out = pd.DataFrame(rows, columns=list(BEST_COLUMNS))
    out["rank"] = pd.array(out["rank"].tolist(), dtype="Int64")
    out["profiled"] = out["profiled"].astype(bool)
    out["step_band"] = [band_text(r) for _, r in out.iterrows()]
    out["memory_fit"] = [memory_text(r) for _, r in out.iterrows()]
    return out


def ranking_sentence(ranked: pd.DataFrame, fit: PlannerFit, parallel: ParallelConfig) -> str:
    """Whether any layout that fits is predicted faster than the profiled one, in one
    sentence: how many, and the fastest's gain (or the closest's loss) per step.

    Parameters
    ----------
    ranked : pandas.DataFrame
        :func:`ranked_layouts` (or :func:`perfkit.plan.search` with ``include_rejected``).
    fit : PlannerFit
        Its prediction of the profiled layout is what the layouts are compared with.
    parallel : ParallelConfig
        The profiled layout.

    Returns
    -------
    str
        A search over another device count or global batch says that its step times do
        not compare with the profiled layout's.
    """
    others = _other_layouts(ranked, parallel)
    own = fit.prediction.step_s
    if not _same_job(ranked, parallel):
        first = ranked.iloc[0]
        devices = int(first["dp"] * first["tp"] * first["pp"] * first["cp"])
        batch = int(first["dp"] * first["micro_batch_size"] * first["num_micro_batches"])
        return (f"These layouts run {counted(batch, 'sequence')} per step on "
                f"{counted(devices, 'device')}, the profiled job "
                f"{counted(parallel.global_batch_size, 'sequence')} on "
                f"{counted(parallel.world_size, 'device')}: their step times do not compare "
                "with the profiled layout's, shown last without a rank. Compare the tokens "
                "per second per device instead.")
    if others.empty:
        return (f"No other layout of {counted(parallel.global_batch_size, 'sequence')} on "
                f"{counted(parallel.world_size, 'device')} fits in memory, by the model's "
                "estimate.")
    reference = f"the profiled layout (predicted {time_text(own * 1e6)})"
    faster = int((others["step_s"] < own).sum())
    best = others.iloc[0]
    step = float(best["step_s"])
    change = layout_changes(parallel, to_parallel_config(best))
    gap = abs(own - step)
    by = f"{time_text(gap * 1e6)} ({share_text(gap / own)})"
    if faster == 0:
        head = (f"None of the {count_text(len(others))} other layouts that fit is predicted "
                f"faster than {reference}; the closest" if len(others) > 1 else
                f"The only other layout that fits is not predicted faster than {reference};"
                " it")
        tail = f"{by} slower" if gap > 0 else "as fast"
        return f"{head} ({change}) is predicted at {time_text(step * 1e6)}, {tail}."
    if len(others) == 1:
        head = f"The only other layout that fits is predicted faster than {reference}"
    elif faster == len(others):
        head = (f"All {count_text(faster)} other layouts that fit are predicted faster than "
                f"{reference}")
    else:
        head = (f"{count_text(faster)} of the {count_text(len(others))} other layouts that "
                f"fit {plural(faster, 'is', 'are')} predicted faster than {reference}")
    return (f"{head}; the fastest (rank 1: {change}) is predicted at "
            f"{time_text(step * 1e6)}, {by} faster.")


def band_text(row: Any) -> str:
    """``"1.21 s (1.15 s – 1.27 s)"`` of a ranked row (no band without a calibration)."""
    step = time_text(float(row["step_s"]) * 1e6)
    if "low_s" not in row or pd.isna(row["low_s"]):
        return step
    return f"{step} ({time_text(float(row['low_s']) * 1e6)} – " \
           f"{time_text(float(row['high_s']) * 1e6)})"


def memory_text(row: Any) -> str:
    """``"23.1 GiB of 57.6 GiB (40 %)"`` of a ranked row: memory per device of the usable."""
    used, limit = float(row["memory_bytes"]), float(row["memory_limit_bytes"])
    return f"{bytes_text(used)} of {bytes_text(limit)} ({share_text(used / limit, 0)})"
