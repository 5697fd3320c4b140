"""One figure for one thing across the dashboard's tabs: the profiled layout's step on the
Planner and the Recompute tab, the Planner's band on a forward-only trace, and the static
memory's convention named after the job's framework.

The shared H100 Kineto trace of Qwen1.5-0.5B (``wild/tl_qwen_h100``) is read here with
json and gzip: its ``ProfilerStep`` span on the GPU (the device step the Planner compares
with) and its host operators (none of autograd's: a forward pass only). The model's
parameters are counted by hand from Qwen1.5-0.5B's published configuration.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import statistics

import pytest
from shared_samples import shared_sample
from widget_html import panel_html

import perfkit as pk
from perfkit.format import time_text
from perfkit.plan.predict import DEFAULT_SIGMA, MEASURED_SIGMA, MODEL_UNCERTAINTY
from perfkit.widgets import bundled_profile, dashboard
from perfkit.widgets.summary import job_summary, memory_breakdown

QWEN = "wild/tl_qwen_h100"
_TAGS = re.compile(r"<[^>]+>")


def _text(panel) -> str:
    html = re.sub(r"<style>.*?</style>", "", panel_html(panel), flags=re.S)
    return re.sub(r"\s+", " ", _TAGS.sub(" ", html)).replace("&#x27;", "'")


def _trace_events() -> list[dict]:
    (path,) = sorted(shared_sample(QWEN).glob("*.json.gz"))
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)["traceEvents"]


@pytest.fixture(scope="module")
def qwen_board():
    board = dashboard(str(shared_sample(QWEN)))
    board.select("Planner")
    board.panels["Planner"].plan_button.click()  # a forward pass: its training plan on request
    board.select("Recompute")
    return board


@pytest.mark.shared_samples
def test_planner_and_recompute_show_one_step_for_the_profiled_layout(qwen_board) -> None:
    events = _trace_events()
    # the device step: the GPU side of each ProfilerStep annotation, median over steps
    spans = [e["dur"] for e in events if e.get("cat") == "gpu_user_annotation"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
    assert spans
    device_step_s = statistics.median(spans) / 1e6
    # a forward pass only: none of autograd's operators among the host operators
    ops = [e["name"] for e in events if e.get("cat") == "cpu_op"]
    assert len(ops) > 50 and not any(re.search(r"Backward|autograd::engine|backward", n)
                                     for n in ops)
    planner, recompute = qwen_board.panels["Planner"], qwen_board.panels["Recompute"]
    predicted = planner.fit.prediction.step_s
    frame = planner.comparison
    assert frame.loc[frame["run"] == "measured", "step_s"].iloc[0] == pytest.approx(
        device_step_s, rel=1e-6)
    # the Recompute tab shows no trade-off of a forward pass (recompute is a training
    # trade-off): it says so, with the reading the job panel gives, and predicts nothing
    words = _text(recompute)
    shown = time_text(predicted * 1e6)
    assert f"Predicted {shown}" in _text(planner)
    assert recompute.tradeoff is None and f"predicts {shown}" not in words
    assert "Recompute does not apply to this profile" in words


@pytest.mark.shared_samples
def test_the_band_of_a_forward_only_trace_leaves_out_what_it_does_not_run(qwen_board) -> None:
    # the residual against a forward pass is the backward and optimizer the trace does not
    # run: the band counts the parts instead, compute at the default uncertainty
    fit = qwen_board.panels["Planner"].fit
    pred = fit.prediction
    step = pred.step_s
    terms = [MODEL_UNCERTAINTY]
    for part, seconds in pred.parts.items():
        sigma = MEASURED_SIGMA if part == "overhead" else DEFAULT_SIGMA
        terms.append(sigma * seconds / step)
    u = math.sqrt(sum(t * t for t in terms))
    assert pred.low_s == pytest.approx(step * (1 - u), rel=1e-9)
    assert pred.high_s == pytest.approx(step * (1 + u), rel=1e-9)
    assert 0 < pred.low_s < step < pred.high_s < 2 * step
    assert "runs no backward pass" in fit.sentence


def _qwen_parameters() -> int:
    """Qwen1.5-0.5B (its config.json): 24 layers, hidden 1024, 16 heads of 64 (as many
    key/value heads), gated MLP of 2816, vocabulary 151936, biases on q, k, v only, RMS
    norms, untied output layer."""
    h, layers, ffn, vocab = 1024, 24, 2816, 151936
    qkv = h * 3 * h + 3 * h
    per_layer = qkv + h * h + 3 * h * ffn + 2 * h
    return layers * per_layer + 2 * vocab * h + h


@pytest.mark.shared_samples
def test_a_pytorch_gpu_job_counts_static_memory_by_megatron_not_mindspore() -> None:
    job = pk.infer_job(pk.load(shared_sample(QWEN)))
    m = job.model
    assert (m.num_layers, m.hidden_size, m.ffn_hidden_size, m.vocab_size) == \
        (24, 1024, 2816, 151936)
    row = job_summary(job).set_index("key").loc["static_gib"]
    assert "MindSpore" not in row["metric"] and "Megatron-LM" in row["metric"]
    # Megatron-LM, one device, no distributed optimizer: 2 + 4 + 12 bytes per parameter
    assert row["value"] * 2**30 == pytest.approx(18 * _qwen_parameters(), rel=1e-12)
    memory = memory_breakdown(job)
    assert memory["bytes"].iloc[:3].sum() == pytest.approx(18 * _qwen_parameters(),
                                                           rel=1e-12)


def test_a_mindspore_job_keeps_the_mindspore_scheme() -> None:
    job = pk.infer_job(pk.load(bundled_profile("mindspore-cpu-tiny-llama")),
                       hardware="ascend-910b")
    m = job.model
    row = job_summary(job).set_index("key").loc["static_gib"]
    assert row["metric"] == "static memory (MindSpore scheme)"
    # the seed's 10 bytes per parameter (no gradient buffer: one micro-batch, no pipeline)
    d = m.head_dim
    per_layer = (m.hidden_size * (m.num_attention_heads + 2 * m.num_kv_heads) * d
                 + m.num_attention_heads * d * m.hidden_size
                 + 3 * m.hidden_size * m.ffn_hidden_size + 2 * m.hidden_size)
    params = m.num_layers * per_layer + 2 * m.vocab_size * m.hidden_size + m.hidden_size
    assert job.parallel.num_micro_batches == 1 and job.parallel.pp == 1
    assert row["value"] * 2**30 == pytest.approx(10 * params, rel=1e-12)


@pytest.mark.shared_samples
def test_the_memory_tab_names_the_theory_it_holds_a_forward_pass_against(qwen_board) -> None:
    """A forward-only trace is held against the inference theory, which says so; no
    training step's static-memory scheme (tests/test_inference_memory.py checks the
    figure against the trace's measured peak)."""
    qwen_board.select("Memory")
    words = _text(qwen_board.panels["Memory"])
    assert "against the inference theory of the job (forward only" in words
    assert re.search(r"inference theory \(forward only\) [\d.]+ GiB \(weights", words)
    assert "Megatron-LM scheme" not in words and "MindSpore" not in words
    assert "counts a training step" not in words


@pytest.mark.shared_samples
def test_a_forward_pass_gap_is_said_once_and_not_blamed_on_the_run(qwen_board) -> None:
    """The Planner's sentence explains the gap of a trace without a backward pass (what it
    does not run); the calibration's note, which blames the run, is not said again."""
    assert not any(str(e.get("name", "")).startswith("autograd::")
                   or "Backward" in str(e.get("name", ""))
                   for e in _trace_events() if e.get("cat") == "cpu_op")
    panel = qwen_board.panels["Planner"]
    text = _text(panel)
    assert any("off the measured step" in n for n in panel.fit.calibration.notes)
    assert text.count("off the measured step") == 1
    assert "so that gap is what the profile does not run" in text
    assert "the run does something the model does not" not in text


@pytest.mark.shared_samples
def test_the_jobs_figures_give_the_reason_of_their_warnings_once(qwen_board) -> None:
    """On a forward-only trace the job's figures on the Planner give MFU and HFU for the
    forward pass (tests/test_inference_mfu_everywhere.py), unflagged, and its memory as the
    forward-only theory (the Memory tab's), leaving out the static and activation memory,
    which count a training step (the reason is said once, above the figures)."""
    text = _text(qwen_board.panels["Planner"])
    start = text.index("The job's figures")
    figures = text[start:text.index("A training step of this model, predicted")]
    reason = "no backward operator (autograd, *Backward) among its"
    assert text[:start].count(reason) == 1 and reason not in figures, figures
    assert "its memory is the forward-only theory the Memory tab holds" in figures
    assert re.search(r"memory \(inference, forward only\) [\d.]+ GiB weights \+ KV cache",
                     figures), figures
    for training in ("static memory", "activation memory", "static + activation"):
        assert training not in figures, (training, figures)
    for flagged in (r"MFU [\d.]+ ?% counts a training step's FLOPs",
                    r"HFU [\d.]+ ?% counts a training step's FLOPs"):
        assert not re.search(flagged, figures), (flagged, figures)
    assert re.search(r"HFU [\d.]+ % an inference step runs no backward pass", figures)


@pytest.mark.shared_samples
def test_the_recompute_tab_says_once_that_a_forward_pass_does_not_compare(qwen_board) -> None:
    """The Recompute tab says once that recompute does not apply to the forward-only trace,
    and gives no predicted training step to compare with it (nor the step guard's
    warning, which said it again)."""
    assert not any("Backward" in str(e.get("name", "")) for e in _trace_events()
                   if e.get("cat") == "cpu_op")
    text = _text(qwen_board.panels["Recompute"])
    assert text.count("Recompute does not apply to this profile") == 1
    assert "models a training step" not in text and "do not compare" not in text
