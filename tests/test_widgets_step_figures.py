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
import re

import pytest
from shared_samples import shared_sample
from widget_html import panel_html

import perfkit as pk
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
    board.select("Recompute")
    return board


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
def test_the_memory_tab_names_the_jobs_convention(qwen_board) -> None:
    qwen_board.select("Memory")
    words = _text(qwen_board.panels["Memory"])
    assert "Megatron-LM scheme" in words and "MindSpore" not in words
