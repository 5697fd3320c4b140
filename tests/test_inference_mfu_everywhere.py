"""One MFU for an inference step, wherever it is shown.

An inference step's MFU counts one forward pass (:mod:`perfkit.calc.inference`). The
Overview's card, the job's figures (:func:`perfkit.widgets.summary.job_summary`, which the
Planner's table shows), ``perfkit info`` and the journal's record of the run
(:func:`perfkit.journal.run_metrics`) give the same figure, and HFU the same value
(no backward pass, nothing recomputed). Before, ``job_summary`` and ``perfkit info`` gave
a training step's ``3 ×`` forward (74.2 % on the Qwen trace, flagged) beside the
Overview's 16.91 %, and ``perfkit info`` gave no MFU at all for the vLLM trace.

The expected figures are computed here from the raw traces (gzip and json,
:mod:`raw_kineto`) and published data: model FLOPs by hand, over the raw step time, the
devices and the data-sheet peak.

* ``wild/tl_qwen_h100``: TraceLens' Hugging Face Qwen1.5-0.5B-Chat forward on an H100,
  16 sequences of 559 tokens, shapes read from ``aten::linear`` / ``aten::embedding``;
  the step is its one ``ProfilerStep``; H100 SXM dense BF16 = 1,979 / 2 TFLOP/s (NVIDIA
  H100 data sheet, sparse figure halved).
* ``wild/tl_b200_eager``: vLLM gpt-oss-120b, tp 8 on B200s, 888 tokens, 1 row of logits;
  gpt-oss-120b's published config (``openai/gpt-oss-120b`` on huggingface.co, as in
  tests/test_job_vllm_moe.py); the step is the device span; B200 dense BF16 = 36 PFLOPS
  sparse for 8 GPUs (HGX B200 data sheet) / 8 / 2.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from raw_kineto import raw_events, raw_walls
from shared_samples import sample
from widget_html import panel_words

import perfkit as pk
from perfkit.cli.profile_text import profile_info_text
from perfkit.journal import run_metrics
from perfkit.widgets import tab_panel
from perfkit.widgets.overview import step_time_explorer
from perfkit.widgets.summary import job_summary

pytestmark = pytest.mark.shared_samples

QWEN, B200 = "wild/tl_qwen_h100", "wild/tl_b200_eager"
H100_BF16 = 1979e12 / 2
B200_BF16 = 36e15 / 8 / 2
#: gpt-oss-120b's published Hugging Face config (the fields perfkit reads).
GPT_OSS = {"model_type": "gpt_oss", "num_hidden_layers": 36, "num_local_experts": 128,
           "num_experts_per_tok": 4, "vocab_size": 201088, "hidden_size": 2880,
           "intermediate_size": 2880, "head_dim": 64, "num_attention_heads": 64,
           "num_key_value_heads": 8, "max_position_embeddings": 131072,
           "hidden_act": "silu", "rms_norm_eps": 1e-05, "rope_theta": 150000,
           "tie_word_embeddings": False, "attention_bias": True}


def _ops(raw: list[dict], name: str) -> list[dict]:
    return [e for e in raw if e.get("cat") == "cpu_op" and e.get("name") == name]


def _qwen_mfu() -> float:
    """Forward FLOPs of the Qwen trace by hand / (its ProfilerStep × 1 GPU × peak)."""
    trace = next(Path(sample(QWEN)).glob("*.json.gz"))
    raw = raw_events(trace)
    linear = [e["args"]["Input Dims"] for e in _ops(raw, "aten::linear")]
    (batch,) = {tuple(d[0][:2]) for d in linear}
    n, s = batch
    widths = Counter((d[1][1], d[1][0]) for d in linear)  # (in, out) per projection
    layers = widths[(1024, 2816)] // 2  # gate and up, once a layer
    gemm = sum(2 * i * o * c for (i, o), c in widths.items()) * n * s  # 2 FLOPs a MAC
    core = layers * 4 * n * s * s * 1024  # Q·Kᵀ and scores·V, full s × s, q = 1024
    (wall,) = raw_walls(trace).values()
    return (gemm + core) / (float(wall) / 1e6 * 1 * H100_BF16)


def _b200_mfu() -> float:
    """Forward FLOPs of gpt-oss-120b over 888 tokens by hand / (device span × 8 × peak)."""
    raw = raw_events(Path(sample(B200)) / "eager_trace.json.gz")
    (tokens,) = {e["args"]["Input Dims"][0][0] for e in _ops(raw, "vllm::moe_forward")}
    h, f, v, n_layers = 2880, 2880, 201088, 36
    q, kv = 64 * 64, 8 * 64
    per_token = 2 * h * (q + 2 * kv) + 2 * q * h + 4 * 3 * 2 * h * f + 2 * h * 128
    flops = tokens * n_layers * per_token + 1 * 2 * h * v  # logits for 1 sampled row
    device = [x for x in raw if x.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    span_s = float(max(x["ts"] + x["dur"] for x in device) - min(x["ts"] for x in device)) / 1e6
    return flops / (span_s * 8 * B200_BF16)


def _info_figure(text: str, name: str) -> str:
    """The value ``perfkit info`` prints on its ``name`` line of the job's figures."""
    found = re.findall(rf"^  {name} +(\S+ %|–)", text, flags=re.M)
    assert len(found) == 1, (name, text)
    return found[0]


@pytest.fixture(scope="module")
def gpt_oss_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gpt_oss") / "config.json"
    path.write_text(json.dumps(GPT_OSS))
    return path


def _check_everywhere(profile: Any, job: pk.Job, info: str, expected: float) -> None:
    shown = f"{100 * expected:.2f} %"
    words = panel_words(tab_panel("Overview", profile, job=job))
    assert f"MFU {shown}" in words
    figures = job_summary(job).set_index("key")
    for key in ("mfu", "hfu"):
        assert figures.loc[key, "value"] == pytest.approx(expected, rel=1e-4), key
        assert figures.loc[key, "text"] == shown
    assert "forward-only model FLOPs of an inference step" in figures.loc["mfu", "note"]
    assert "HFU equals MFU" in figures.loc["hfu", "note"]
    assert "not an inference figure" in figures.loc["predicted_mfu", "note"]
    assert _info_figure(info, "MFU") == _info_figure(info, "HFU") == shown
    journal = run_metrics(job).set_index("key")  # what the journal keeps of the run
    for key in ("mfu", "hfu"):
        assert journal.loc[key, "value"] == pytest.approx(expected, rel=1e-4), key
        assert journal.loc[key, "text"] == shown
    assert "forward-only model FLOPs of an inference step" in info


def test_the_qwen_forward_pass_has_one_mfu(grammar: Any) -> None:
    expected = _qwen_mfu()
    assert f"{100 * expected:.2f} %" == "16.91 %"  # not the training count's 74.2 %
    profile = pk.load(sample(QWEN), progress=False)
    job = pk.infer_job(profile)
    info = profile_info_text(profile, n_findings=0)
    _check_everywhere(profile, job, info, expected)
    job_section = info[info.index("The job"):info.index("Steps:")]
    assert grammar(" ".join(job_section.split())) == []
    # the step-time slider's table: the same count over the slider's step (twice the
    # measured one: half the MFU)
    explorer = step_time_explorer(job)
    explorer.slider.value = 2 * job.step_time_s
    slid = explorer.summary.set_index("key")
    assert slid.loc["mfu", "value"] == pytest.approx(expected / 2, rel=1e-4)
    assert slid.loc["hfu", "value"] == slid.loc["mfu", "value"]


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_vllm_step_has_one_mfu(gpt_oss_config: Path) -> None:
    expected = _b200_mfu()
    assert f"{100 * expected:.2f} %" == "0.53 %"
    profile = pk.load(sample(B200), progress=False)
    job = pk.infer_job(profile, config=gpt_oss_config)
    info = profile_info_text(profile, n_findings=0, config=gpt_oss_config)
    _check_everywhere(profile, job, info, expected)
    # the FFN width and top-k given in Python instead: the Overview's figure is the same
    known = pk.infer_job(profile).with_overrides(ffn_hidden_size=2880, moe_top_k=4)
    words = panel_words(tab_panel("Overview", profile, job=known))
    assert f"MFU {100 * expected:.2f} %" in words


def test_without_top_k_info_says_what_the_overview_says() -> None:
    """Without the FFN width and top-k neither view gives a figure, and both say why."""
    profile = pk.load(sample(B200), progress=False)
    info = profile_info_text(profile, n_findings=0)
    words = panel_words(tab_panel("Overview", profile, job=pk.infer_job(profile)))
    why = ("not computed for this inference step: the FFN size and the experts per token "
           "are not known")
    assert f"MFU – {why}" in words
    assert _info_figure(info, "MFU") == "–"
    assert why in " ".join(info.split())
