"""One layout, one predicted step: the job's figures (the Overview, ``perfkit info``, the
report's notebooks), the Planner tab's ranking and :func:`perfkit.plan.search` by default
all time a layout with the step model of :func:`perfkit.plan.predict` at perfkit's default
rates, so each reads the step ``predict`` gives for that layout with the job's
conventions (its activation accounting, static-memory scheme, type and gradients' size).

Expected figures are ``perfkit.plan.predict(None, ...)`` called here with the job's fields,
not any of the entry points' own output; ``estimate_step`` gives the same step (the
first-order model it used to be is retired). The lab's planner runs the same model at two
round numbers and says so on its page.
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
    est = pk.estimate_step(job.model, job.parallel, job.hardware, dtype=job.dtype,
                           activation_model=job.activation_model,
                           static_scheme=job.static_scheme, gradient_bytes=job.gradient_bytes)
    assert est.step_s == pytest.approx(expected.step_s, rel=1e-9)
    assert est.memory_bytes == pytest.approx(expected.memory_bytes, rel=1e-9)


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


def test_the_lab_names_its_planners_round_numbers() -> None:
    """The lab's planner is the step model at two round numbers: its page and both
    planning questions' hints say so (tests/lab/test_key.py re-derives its rows with
    ``estimate_step`` at those numbers)."""
    from perfkit.lab import evidence
    from perfkit.lab.questions.planning import PlannerLayout, PlannerStep

    words = evidence.PLANNER_WORDS
    assert "step model at two round numbers" in words and "80 %" in words
    assert evidence.PLANNER_LINK_EFFICIENCY == 0.8
    for question in (PlannerLayout, PlannerStep):
        assert "efficiency" in question.hint and "first-order" not in question.hint
