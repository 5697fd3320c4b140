"""An inference step's tokens come from its trace, on every page, and its FLOPs say so.

``wild/tl_b200_eager`` is one rank of vLLM running gpt-oss-120b under tensor parallelism 8
on B200s: one forward step whose linear layers take 888 packed tokens (vLLM's MoE layer
``vllm::moe_forward`` takes the hidden states ``(888, 2880)``). With gpt-oss-120b's
published Hugging Face config (``openai/gpt-oss-120b`` on huggingface.co, as in
tests/test_inference_mfu_everywhere.py) perfkit took the config's context,
``max_position_embeddings`` = 131,072 tokens, as the sequence length, so tokens/s per device
read 131,072 / (84.5 ms × 8) = 193,923 against the 888 tokens the trace shows.

The expected figures here are computed from the raw trace (gzip and json,
:mod:`raw_kineto`) and the published config: the tokens from ``vllm::moe_forward``'s input
dims, the step from the device span, the forward FLOPs by hand (2 FLOPs a multiply-add),
the attention core's bound ``L · 4·T²·q`` (Korthikanti et al. 2022, App. A, full scores).
The Qwen trace (``wild/tl_qwen_h100``, 16 sequences of 559 tokens read from ``aten::linear``
input dims ``(16, 559, 1024)``) is the case where the sequences are known.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from raw_kineto import raw_events
from shared_samples import sample
from test_inference_mfu_everywhere import B200_BF16, GPT_OSS  # the published config
from widget_html import panel_words

import perfkit as pk
from perfkit.cli.profile_text import profile_info_text
from perfkit.journal import run_metrics
from perfkit.widgets import tab_panel
from perfkit.widgets.summary import job_summary

pytestmark = pytest.mark.shared_samples

B200, QWEN = "wild/tl_b200_eager", "wild/tl_qwen_h100"


def _ops(raw: list[dict], name: str) -> list[dict]:
    return [e for e in raw if e.get("cat") == "cpu_op" and e.get("name") == name]


@pytest.fixture(scope="module")
def raw() -> list[dict]:
    return raw_events(Path(sample(B200)) / "eager_trace.json.gz")


@pytest.fixture(scope="module")
def tokens(raw: list[dict]) -> int:
    (n,) = {e["args"]["Input Dims"][0][0] for e in _ops(raw, "vllm::moe_forward")}
    return n


@pytest.fixture(scope="module")
def span_s(raw: list[dict]) -> float:
    device = [x for x in raw if x.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    return float(max(x["ts"] + x["dur"] for x in device) - min(x["ts"] for x in device)) / 1e6


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gpt_oss") / "config.json"
    path.write_text(json.dumps(GPT_OSS))
    return path


@pytest.fixture(scope="module")
def loaded(config: Path) -> tuple:
    profile = pk.load(sample(B200), progress=False)
    return profile, pk.infer_job(profile, config=config)


def _forward_flops(tokens: int) -> float:
    """gpt-oss-120b's forward pass over ``tokens`` by hand, attention core left out."""
    h, f, v, n_layers = 2880, 2880, 201088, 36
    q, kv = 64 * 64, 8 * 64
    per_token = 2 * h * (q + 2 * kv) + 2 * q * h + 4 * 3 * 2 * h * f + 2 * h * 128
    return tokens * n_layers * per_token + 1 * 2 * h * v  # logits for the 1 sampled row


def test_the_vllm_steps_tokens_are_the_traces_everywhere(loaded: tuple, config: Path,
                                                          tokens: int, span_s: float) -> None:
    profile, job = loaded
    expected = tokens / (span_s * 8)  # tokens per step / (step × the 8 devices)
    assert tokens == 888 and f"{expected:,.0f}" == "1,314"
    assert job.global_batch_size * job.seq_length == tokens
    assert job.model.seq_length == tokens  # the model the memory and Planner count
    assert job_summary(job).set_index("key").loc["tokens_per_s_per_device", "value"] == \
        pytest.approx(expected, rel=1e-4)
    journal = run_metrics(job).set_index("key")
    assert journal.loc["tokens_per_s_per_device", "value"] == pytest.approx(expected, rel=1e-4)
    assert "packed" in journal.loc["seq_length", "note"]
    info = profile_info_text(profile, n_findings=0, config=config)
    (shown,) = re.findall(r"^  tokens/s per device +(\S+)$", info, flags=re.M)
    assert shown == f"{expected:,.0f}"
    assert f"batch          1 × {tokens} tokens" in info
    words = panel_words(tab_panel("Overview", profile, job=job))
    assert f"throughput {expected:,.0f} tokens/s per device {tokens} tokens per step, " \
           "packed" in words
    for text in (info, words):  # the config's context is no figure of this step
        assert not re.search(r"131,?072", text)


def test_the_attention_core_is_left_out_with_its_bound(loaded: tuple, tokens: int,
                                                      span_s: float) -> None:
    _, job = loaded
    flops = _forward_flops(tokens)
    bound = 36 * 4 * tokens ** 2 * (64 * 64)  # the 888 tokens as one sequence, full scores
    mfu = flops / (span_s * 8 * B200_BF16)
    note = job_summary(job).set_index("key").loc["mfu", "note"]
    assert job_summary(job).set_index("key").loc["mfu", "value"] == pytest.approx(mfu, rel=1e-4)
    assert "the attention scores are not counted" in note
    assert f"at most {bound / 1e12:.3f} TFLOP" in note
    assert f"{100 * bound / flops:.1f} % of the FLOPs counted" in note
    assert f"MFU at most {100 * mfu * (flops + bound) / flops:.2f} %" in note


def test_the_journals_flops_rows_are_the_forward_pass(loaded: tuple, tokens: int) -> None:
    _, job = loaded
    rows = run_metrics(job).set_index("key")
    assert rows.loc["model_flops_per_step", "value"] == pytest.approx(_forward_flops(tokens),
                                                                      rel=1e-9)
    assert "inference step" in rows.loc["model_flops_per_step", "note"]
    assert rows.loc["recompute_flops_per_step", "value"] == 0.0


def test_the_qwen_forward_pass_counts_its_sequences_core() -> None:
    """Sequences the trace shows: the journal's model FLOPs are the forward pass's, with the
    attention core of the 16 sequences of 559 tokens (not the training step's 3 ×)."""
    trace = next(Path(sample(QWEN)).glob("*.json.gz"))
    linear = [e["args"]["Input Dims"] for e in _ops(raw_events(trace), "aten::linear")]
    ((n, s),) = {tuple(d[0][:2]) for d in linear}
    widths = Counter((d[1][1], d[1][0]) for d in linear)  # (in, out) per projection
    layers = widths[(1024, 2816)] // 2  # gate and up, once a layer
    gemm = sum(2 * i * o * c for (i, o), c in widths.items()) * n * s
    core = layers * 4 * n * s * s * 1024
    rows = run_metrics(pk.infer_job(pk.load(sample(QWEN), progress=False))).set_index("key")
    assert rows.loc["model_flops_per_step", "value"] == pytest.approx(gemm + core, rel=1e-6)
    assert rows.loc["recompute_flops_per_step", "value"] == 0.0


def test_the_old_import_path_still_gives_the_figure() -> None:
    from perfkit.job import inference_mfu as moved
    from perfkit.widgets import inference_mfu as old

    assert old.inference_mfu_figure is moved.inference_mfu_figure
    assert old.INFERENCE_HFU_NOTE is moved.INFERENCE_HFU_NOTE


def test_the_advisors_mfu_is_the_overviews(loaded: tuple, tokens: int, span_s: float) -> None:
    """The advisor's finding counts the same forward pass, without the attention core of
    the packed tokens (the job's sequence length is the step's tokens, no sequence's)."""
    profile, job = loaded
    flops = _forward_flops(tokens)
    found = pk.advise(profile, model=job.model, parallel=job.parallel, hardware=job.hardware)
    (finding,) = [f for f in found if f.rule == "mfu_inference"]
    # 8.09 TFLOP, not 8.55 with the 888 tokens' core as one sequence
    assert f"{flops / 1e12:.3g} TFLOP" in finding.evidence
    assert "without the attention core" in finding.evidence
    assert f"{100 * flops / (span_s * 8 * B200_BF16):.1f} %" in finding.title
