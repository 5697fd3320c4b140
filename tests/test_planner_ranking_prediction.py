"""The Planner's ranking and its prediction agree: every layout its table shows has the step
time, memory and fit that :func:`~perfkit.widgets.prediction.predict_layout` gives for that
layout, calibrated on the profile or not, so the page cannot rank layout A above B while
predicting B faster.

Checked on the bundled simulated Llama2-13B profile and the shared H100 Kineto trace of
Qwen1.5-0.5B (``wild/tl_qwen_h100``). Without a calibration the Planner falls back to
perfkit's default rates (what :func:`~perfkit.widgets.prediction.fit_job` does when the
profile and its step time both fail to calibrate: here the job without its measured step
and no profile to fit). Each shown row is predicted one layout at a time with
``predict_layout`` (one layout, one call of :func:`perfkit.plan.predict`), independently of
the vectorised search that ranked it; the order of the shown rows is then checked against
those predictions, pair by pair.
"""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from shared_samples import shared_sample

import perfkit as pk
from perfkit.plan import to_parallel_config
from perfkit.widgets.prediction import (
    PlannerFit,
    best_layouts,
    fit_job,
    predict_layout,
    ranked_layouts,
)

QWEN = "wild/tl_qwen_h100"
BASELINE = "sample:simulated/llama2-13b-baseline-dp16"


def _job(path: str):
    profile = pk.load(path, progress=False)
    job = pk.infer_job(profile)
    assert not job.missing()
    return profile, job


def _uncalibrated(job):
    """The Planner's fit when neither a profile nor a step time calibrates: the job
    without its measured step, and no profile to fit."""
    bare = dataclasses.replace(job, step_time_s=None)
    fit = fit_job(object(), bare)
    assert not fit.calibrated and fit.source == "uncalibrated"
    return bare, fit


def _check_shown(job, fit: PlannerFit) -> None:
    ranked = ranked_layouts(job, fit)
    best = best_layouts(ranked, fit, job.parallel)
    assert len(best) >= 5
    predicted = []
    for _, row in best.iterrows():
        if row["profiled"]:
            pred = predict_layout(fit, job, job.parallel)
        else:
            found = ranked[ranked["fits"].astype(bool) & (ranked["step_s"] == row["step_s"])
                           & (ranked["memory_bytes"] == row["memory_bytes"])]
            pred = predict_layout(fit, job, to_parallel_config(found.iloc[0]))
        assert row["step_s"] == pytest.approx(pred.step_s, rel=1e-9)
        assert row["memory_bytes"] == pytest.approx(pred.memory_bytes, rel=1e-9)
        assert bool(row["fits"]) == pred.fits
        assert row["mfu"] == pytest.approx(pred.mfu, rel=1e-9)
        if fit.calibrated:
            assert row["high_s"] == pytest.approx(pred.high_s, rel=1e-9)
        else:  # no band where nothing was fitted, on any row
            assert pd.isna(row["low_s"]) and pd.isna(row["high_s"])
        predicted.append(pred.step_s)
    # ranked above means predicted no slower, for every pair the table shows
    for i, faster in enumerate(predicted):
        assert all(faster <= slower * (1 + 1e-12) for slower in predicted[i + 1:])


@pytest.fixture(scope="module")
def baseline():
    return _job(BASELINE)


@pytest.fixture(scope="module")
def qwen():
    return _job(str(shared_sample(QWEN)))


def test_bundled_sample_calibrated(baseline):
    profile, job = baseline
    fit = fit_job(profile, job)
    assert fit.calibrated
    _check_shown(job, fit)


def test_bundled_sample_uncalibrated(baseline):
    _check_shown(*_uncalibrated(baseline[1]))


@pytest.mark.shared_samples
def test_real_profile_calibrated(qwen):
    profile, job = qwen
    fit = fit_job(profile, job)
    assert fit.calibrated
    _check_shown(job, fit)


@pytest.mark.shared_samples
def test_real_profile_uncalibrated_every_candidate(qwen):
    """Every layout of the search that fits, not only those shown (24 candidates)."""
    job, fit = _uncalibrated(qwen[1])
    _check_shown(job, fit)
    ranked = ranked_layouts(job, fit)
    for _, row in ranked[ranked["fits"].astype(bool)].iterrows():
        pred = predict_layout(fit, job, to_parallel_config(row))
        assert row["step_s"] == pytest.approx(pred.step_s, rel=1e-9)
        assert row["memory_bytes"] == pytest.approx(pred.memory_bytes, rel=1e-9)
