"""The Planner shows the measured model FLOPs utilisation, and on an inference profile
predicts no training step as if it were the run's.

The ``mfu`` and ``mfu_inference`` findings point to the Planner, which showed only a
predicted training step's MFU: the measured figure was on the Overview's card alone. And
on an inference profile (vLLM's gpt-oss-120b step, TraceLens' Qwen forward pass) the
Planner's first figure was a predicted *training* step of 82.8 ms beside a measured
34.9 ms forward pass, with a ranking of training layouts below, as if about the run.

Here every figure is computed from the raw traces and published data:

* ``tests/data/kineto_llama_h100`` (training, bundled): the model of its PROVENANCE.md
  (hidden 1,024, 16 heads, 4 layers, SwiGLU 2,816, vocabulary 32,000, sequence 1,024,
  micro-batch 4, 2 data-parallel ranks); its step is, per ProfilerStep, the slowest rank's
  wall (:func:`raw_kineto.raw_walls`), the median over steps; the H100 SXM dense BF16 peak
  is 1,979 / 2 TFLOP/s (NVIDIA H100 data sheet, sparse figure halved). MFU = 3 × forward
  FLOPs per token (exact GEMMs, full s × s attention scores, logits) × tokens/s per
  device / peak.
* ``wild/tl_qwen_h100`` and ``wild/tl_b200_eager`` (inference): the forward-only MFU of
  :mod:`test_inference_mfu_everywhere` (FLOPs by hand from the raw operator shapes, over
  the raw step time, the devices and the data-sheet peak).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from statistics import median
from typing import Any

import pytest
from raw_kineto import raw_walls
from shared_samples import shared_sample
from test_inference_mfu_everywhere import B200, GPT_OSS, QWEN, _b200_mfu, _qwen_mfu
from test_job_training_step import _step_span_ms
from widget_html import panel_words

import perfkit as pk
from perfkit.format import time_text
from perfkit.widgets import tab_panel
from perfkit.widgets.planner_measured import INFERENCE_MFU_LABEL, MFU_LABEL
from perfkit.widgets.summary import job_summary

H100_LLAMA = Path(__file__).parent / "data" / "kineto_llama_h100"
H100_BF16 = 1979e12 / 2


def _llama_h100_mfu() -> float:
    """MFU of the bundled H100 training trace, by hand (see the module docstring)."""
    h, heads, layers, f, vocab, seq = 1024, 16, 4, 2816, 32000, 1024
    assert h % heads == 0
    per_layer = 2 * 4 * h * h + 2 * 3 * h * f + 2 * 2 * seq * h  # q,k,v,o; SwiGLU; scores
    forward = layers * per_layer + 2 * h * vocab  # per token, with the logits
    walls = [raw_walls(t) for t in sorted(H100_LLAMA.glob("*.pt.trace.json.gz"))]
    steps = set.intersection(*(set(w) for w in walls))
    assert len(walls) == 2 and len(steps) == 2
    step_s = median(max(float(w[s]) for w in walls) for s in steps) / 1e6
    tokens_per_s_per_device = 2 * 4 * seq / (step_s * 2)  # dp 2 × micro-batch 4 sequences
    return 3 * forward * tokens_per_s_per_device / H100_BF16


def _finding(profile: Any, job: pk.Job, rule: str) -> Any:
    (found,) = [f for f in pk.advise(profile, model=job.model, parallel=job.parallel,
                                     hardware=job.hardware) if f.rule == rule]
    return found


def _shown(words: str, label: str) -> str:
    found = re.findall(rf"{re.escape(label)}: ([\d.,]+ %)", words)
    assert len(found) == 1, words
    return found[0]


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_planner_shows_the_measured_mfu_of_a_training_step() -> None:
    expected = _llama_h100_mfu()
    profile = pk.load(str(H100_LLAMA), progress=False)
    job = pk.infer_job(profile)
    assert job.training_step() is True
    planner = panel_words(tab_panel("Planner", profile, job=job))
    shown = _shown(planner, MFU_LABEL)
    assert shown == f"{100 * expected:.1f} %"
    assert f"MFU {shown}" in panel_words(tab_panel("Overview", profile, job=job))
    assert _finding(profile, job, "mfu").title == f"Model FLOPs utilisation is {shown}"
    # the one value behind the three texts, to more than their one decimal
    figures = job_summary(job).set_index("key")
    assert figures.loc["mfu", "value"] == pytest.approx(expected, rel=1e-6)
    # the training Planner still predicts its step and ranks its layouts
    assert "Predicted " in planner and "MFU of a predicted training step" in planner


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.shared_samples
def test_an_inference_planner_shows_the_measured_step_not_a_training_prediction() -> None:
    expected = _qwen_mfu()
    profile = pk.load(shared_sample(QWEN), progress=False)
    job = pk.infer_job(profile)
    panel = tab_panel("Planner", profile, job=job)
    words = panel_words(panel)
    shown = _shown(words, INFERENCE_MFU_LABEL)
    assert shown == f"{100 * expected:.2f} %" == "16.91 %"
    assert f"MFU {shown}" in panel_words(tab_panel("Overview", profile, job=job))
    finding = _finding(profile, job, "mfu_inference")
    assert finding.title == f"{INFERENCE_MFU_LABEL} is {100 * expected:.1f} %"
    # the measured step: its device span read from the raw trace, and the step MFU divides by
    assert f"The device's span: {time_text(_step_span_ms('tl_qwen_h100') * 1e3)}" in words
    assert f"Step time: {time_text(job.step_time_s * 1e6)}" in words
    assert f"by {time_text(job.step_time_s * 1e6)} × 1 device" in words
    # says the step model is for training, and predicts nothing of this run
    assert "the Planner's step model is for training" in words
    assert "no backward pass" in words
    assert panel.fit is None and panel.charts == []
    for training in ("Predicted ", "MFU of a predicted training step", "static memory"):
        assert training not in words, training
    # on request, a training step of the model, said not to be this run, and no chart that
    # sets the predicted training step beside the measured forward pass
    panel.plan_button.click()
    words = panel_words(panel)
    assert panel.fit is not None
    assert "A training step of this model, predicted (not this inference run)" in words
    assert "for a training step (forward, backward, optimizer)" in words
    assert "do not compare" in words
    assert "Per part of the predicted training step (not this inference run)" in words
    titles = [str(c.chart.to_dict().get("title", "")) for c in panel.charts]
    assert not any("Step of the profiled layout" in t for t in titles), titles
    assert _shown(words, INFERENCE_MFU_LABEL) == shown  # the measured figure stays


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.shared_samples
def test_the_vllm_planner_shows_the_overviews_mfu(tmp_path: Path) -> None:
    expected = _b200_mfu()
    config = tmp_path / "config.json"
    config.write_text(json.dumps(GPT_OSS))
    profile = pk.load(shared_sample(B200), progress=False)
    job = pk.infer_job(profile, config=config)
    words = panel_words(tab_panel("Planner", profile, job=job))
    shown = _shown(words, INFERENCE_MFU_LABEL)
    assert shown == f"{100 * expected:.2f} %" == "0.53 %"
    assert f"MFU {shown}" in panel_words(tab_panel("Overview", profile, job=job))
    assert _finding(profile, job, "mfu_inference").title == \
        f"{INFERENCE_MFU_LABEL} is {100 * expected:.1f} %"
    # where the MFU cannot be computed (no FFN width, no top-k) the Planner says why
    bare = panel_words(tab_panel("Planner", profile, job=pk.infer_job(profile)))
    assert (f"{INFERENCE_MFU_LABEL}: not computed for this inference step: the FFN size and "
            "the experts per token are not known") in bare
