"""Whether the profiled step trains: MFU, the memory theory and the planner count a
training step, so a profile of an inference or evaluation step must say it is not one.

Three of the TraceLens traces in ``shared/samples/wild`` are Hugging Face models run
forward only; the Kineto ResNet-50 sample trains. Each is read here with gzip and json
(no perfkit code) for its PyTorch operators and autograd's backward operators.
"""

from __future__ import annotations

import gzip
import json
import re

import pytest
from shared_samples import shared_sample

import perfkit as pk
from perfkit.guards import check_memory, check_step, check_utilization
from perfkit.widgets.summary import job_summary

pytestmark = pytest.mark.shared_samples

BACKWARD = re.compile(r"Backward|autograd::engine|backward")


def _operators(name: str) -> tuple[int, int]:
    """(PyTorch operators, backward operators) of the trace's host operator events."""
    (trace,) = shared_sample(f"wild/{name}").glob("*.json*")
    opener = gzip.open if trace.name.endswith(".gz") else open
    with opener(trace, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    # host operators: "cpu_op" events; "Operator" in the 2021 schema of PyTorch 1.9
    ops = [e["name"] for e in events if e.get("ph") == "X"
           and e.get("cat") in ("cpu_op", "Operator")]
    return (sum(n.startswith("aten::") for n in ops),
            sum(bool(BACKWARD.search(n)) for n in ops))


@pytest.mark.parametrize("name", ["tl_qwen_h100", "tl_b200_eager", "tl_timesformer_h100"])
def test_a_forward_only_trace_is_not_a_training_step(name: str) -> None:
    aten, backward = _operators(name)
    assert aten >= 50 and backward == 0
    job = pk.infer_job(pk.load(shared_sample(f"wild/{name}"), progress=False))
    assert job.training_step() is False
    first = job.problems()[0]
    assert first.startswith("the profile is not a training step")
    assert f"{aten:,} PyTorch operators" in first
    # no figure that counts a training step is shown as a plain number
    assert not check_utilization(0.3, "MFU", job).ok
    assert not check_step(0.1, job.step_time_s, job).ok
    assert not check_memory(2.0**30, 2.0**30, job).ok
    if job.model is not None and job.global_batch_size:
        figures = job_summary(job).set_index("key")
        # MFU and HFU count the forward pass (tests/test_inference_mfu_everywhere.py); what
        # still models a training step (memory, the predicted step) is flagged
        assert "forward-only model FLOPs" in figures.loc["mfu", "note"]
        row = figures.loc["predicted_step_s"]
        assert "not a training step" in row["warning"] and "not plausible" in row["text"]
        # the memory is the forward-only theory (tests/calc/test_inference_memory.py), not
        # flagged for counting a training step
        memory = figures.loc["memory_gib"]
        assert memory["metric"] == "memory (inference, forward only)"
        assert "not a training step" not in str(memory["warning"])


def test_a_training_trace_is_a_training_step() -> None:
    aten, backward = _operators("k_resnet50_nw0")
    assert aten >= 50 and backward > 0
    job = pk.infer_job(pk.load(shared_sample("wild/k_resnet50_nw0"), progress=False))
    assert job.training_step() is True
    assert f"{backward:,} backward operators" in job.observed["training_step"][1]
    assert not any("not a training step" in p for p in job.problems())
    assert check_utilization(0.3, "MFU", job).ok


def test_a_profile_without_pytorch_operators_cannot_tell() -> None:
    job = pk.infer_job(pk.load("sample:slow-rank", progress=False))
    assert job.training_step() is None
    assert check_utilization(0.3, "MFU", job).ok


def test_a_band_wider_than_the_step_stops_at_zero() -> None:
    """Calibrated on a forward-only trace, the training-step model misses by more than the
    step itself: its band's low end is 0, never a negative time."""
    prof = pk.load(shared_sample("wild/tl_qwen_h100"), progress=False)
    job = pk.infer_job(prof)
    cal = pk.plan.calibrate(prof, job.model, job.parallel, job.hardware)
    pred = pk.plan.predict(cal, job.model, job.parallel, job.hardware,
                           job.global_batch_size, job.seq_length)
    assert pred.band > 1.0  # u > 1: step · (1 - u) would be negative
    assert pred.low_s == 0.0 and pred.high_s == pytest.approx(pred.step_s * (1 + pred.band))


def test_the_planner_does_not_compare_a_forward_pass_with_a_training_step() -> None:
    from perfkit.widgets.prediction import (
        comparison_sentence,
        fit_job,
        measured_against_predicted,
    )

    prof = pk.load(shared_sample("wild/tl_qwen_h100"), progress=False)
    job = pk.infer_job(prof)
    fit = fit_job(prof, job)
    frame = measured_against_predicted(prof, fit)
    assert "is not a training step" in comparison_sentence(frame, fit, job)
    assert "is not a training step" not in comparison_sentence(frame, fit)
    # a forward pass is not squeezed into a training step: the fit is left unclosed, and
    # the sentence says no closing
    assert not fit.calibration.closed
    assert "closing" not in fit.sentence and "scaled by one factor" not in fit.sentence


def _step_span_ms(name: str) -> float:
    """The device span of the trace's one ProfilerStep, in ms: first start to last end of
    the device tasks whose runtime call (same correlation id) starts inside the step."""
    (trace,) = shared_sample(f"wild/{name}").glob("*.json.gz")
    with gzip.open(trace, "rt", encoding="utf-8") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    (step,) = [e for e in events if e.get("cat") == "user_annotation"
               and e.get("name", "").startswith("ProfilerStep#")]
    lo, hi = float(step["ts"]), float(step["ts"]) + float(step["dur"])
    launch = {e["args"]["correlation"]: float(e["ts"]) for e in events
              if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and "correlation" in e.get("args", {})}
    tasks = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
             and lo <= launch.get(e["args"].get("correlation"), -1.0) < hi]
    return (max(float(e["ts"]) + float(e["dur"]) for e in tasks)
            - min(float(e["ts"]) for e in tasks)) / 1e3


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_the_planner_headline_of_a_forward_pass_says_the_two_do_not_compare() -> None:
    """Qwen's trace runs no backward pass (no "Backward" / autograd name among its
    operators, read here): the Planner's headline gives the prediction of a training step
    and the measured step (the step's device span, 34.9 ms, read here from the trace) and
    says they do not compare. It said "+137.4%, outside the band", then that the two do
    not compare: a headline that contradicted its own explanation. The training step is
    predicted only once asked for (the tab's training-plan button): until then the tab
    predicts nothing of this run."""
    from widget_html import panel_html

    from perfkit.format import time_text
    from perfkit.widgets import dashboard

    aten, backward = _operators("tl_qwen_h100")
    assert aten >= 50 and backward == 0
    board = dashboard(str(shared_sample("wild/tl_qwen_h100")))
    panel = board.select("Planner")
    assert board.panels["Planner"].fit is None and "Predicted " not in panel_html(panel)
    board.panels["Planner"].plan_button.click()
    job, fit = board.panels["Planner"].current, board.panels["Planner"].fit
    assert job.training_step() is False and fit is not None
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", panel_html(panel)))
    text = text.replace("&#x27;", "'").replace("&amp;", "&")
    start = text.index(f"Predicted {time_text(fit.prediction.step_s * 1e6)}")
    headline = text[start:text.index(". ", start) + 1]  # its first sentence
    measured = f"a measured {time_text(_step_span_ms('tl_qwen_h100') * 1e3)}"
    assert measured in headline, headline
    assert "do not compare" in headline and "no backward pass" in headline
    assert "training step" in headline
    # nothing that compares them: no difference, no "inside" or "outside the band"
    assert "the band" not in headline and "%" not in headline, headline
