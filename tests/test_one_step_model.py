"""One layout, one predicted step: the job's figures (the Overview, ``perfkit info``, the
report's notebooks), the Planner tab's ranking and :func:`perfkit.plan.search` by default
all time a layout with the step model of :func:`perfkit.plan.predict` at perfkit's default
rates, so each reads the step ``predict`` gives for that layout with the job's
conventions (its activation accounting, static-memory scheme, type and gradients' size).

Expected figures are ``perfkit.plan.predict(None, ...)`` called here with the job's fields,
not any of the entry points' own output; the first-order model (``estimate_step``) prices
the same layout differently, which the checks tell apart. The lab names its planner as the
first-order model on its page (it teaches it as a first approximation).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import perfkit as pk
from perfkit.cli import profile_info_text
from perfkit.format import time_text
from perfkit.widgets.prediction import PlannerFit, predict_layout, ranked_layouts
from perfkit.widgets.summary import job_summary

ROOT = Path(__file__).resolve().parents[1]
#: An H100 Kineto trace (Megatron-LM scheme, its gradients' size read from its reductions)
#: and the bundled simulated Ascend profile (MindSpore scheme).
PROFILES = {"kineto": ROOT / "tests" / "data" / "kineto_llama_h100",
            "bundled": ROOT / "data" / "simulated" / "llama2-13b-baseline-dp16"}
_LAYOUT = ("dp", "tp", "pp", "cp", "vpp", "micro_batch_size", "num_micro_batches",
           "optimizer_shard", "recompute", "sequence_parallel")


@pytest.fixture(scope="module", params=sorted(PROFILES))
def case(request):
    path = PROFILES[request.param]
    job = pk.infer_job(pk.load(path))
    assert not job.missing(), job.missing()
    expected = pk.plan.predict(None, job.model, job.parallel, job.hardware, dtype=job.dtype,
                               activation_model=job.activation_model,
                               static_scheme=job.static_scheme,
                               overrides={"gradient_bytes": job.gradient_bytes})
    return path, job, expected


def _own_row(frame, parallel):
    """The rows of a search whose layout is ``parallel``."""
    keep = frame["fits"].notna()
    for name in _LAYOUT:
        value = getattr(parallel, name)
        keep &= (frame[name].astype(str) == value) if name == "recompute" \
            else (frame[name] == value)
    near = frame[keep]
    return near[[pk.plan.to_parallel_config(r) == parallel for _, r in near.iterrows()]]


def test_the_job_figures_show_predicts_step(case) -> None:
    _path, job, expected = case
    figures = job_summary(job).set_index("key")
    assert figures.at["predicted_step_s", "value"] == pytest.approx(expected.step_s,
                                                                    rel=1e-9)
    assert figures.at["predicted_mfu", "value"] == pytest.approx(expected.mfu, rel=1e-9)
    assert predict_layout(None, job, job.parallel).step_s == pytest.approx(expected.step_s,
                                                                           rel=1e-9)
    first_order = pk.estimate_step(job.model, job.parallel, job.hardware,
                                   static_scheme=job.static_scheme)
    assert abs(first_order.step_s / expected.step_s - 1) > 0.01  # the two models differ


def test_perfkit_info_prints_predicts_step(case) -> None:
    path, _job, expected = case
    text = profile_info_text(str(path), n_findings=0)
    shown = re.search(r"uncalibrated step estimate\s+(.+)", text).group(1).split(" ⚠")[0]
    assert shown.strip() == time_text(expected.step_s * 1e6)


def test_the_search_and_the_planner_rank_with_predicts_step(case) -> None:
    _path, job, expected = case
    frame = pk.plan.search(job.model, job.hardware, job.world_size, job.global_batch_size,
                           dtype=job.dtype, activation_model=job.activation_model,
                           static_scheme=job.static_scheme, gradient_bytes=job.gradient_bytes,
                           include_rejected=True)
    row = _own_row(frame, job.parallel)
    assert len(row) == 1
    assert float(row["step_s"].iloc[0]) == pytest.approx(expected.step_s, rel=1e-9)
    fit = PlannerFit(None, expected, "uncalibrated", "")
    planner = _own_row(ranked_layouts(job, fit), job.parallel)
    assert float(planner["step_s"].iloc[0]) == pytest.approx(expected.step_s, rel=1e-9)


def test_the_lab_names_its_first_order_planner() -> None:
    """The lab teaches the first-order model: its planner's page and both planning
    questions' hints say which model it is, and the planner runs it by name."""
    from perfkit.lab import evidence
    from perfkit.lab.questions.planning import PlannerLayout, PlannerStep

    words = getattr(evidence, "FIRST_ORDER_WORDS", "")
    assert "first-order model" in words and "first approximation" in words
    for question in (PlannerLayout, PlannerStep):
        assert "first-order model" in question.hint, question.id
