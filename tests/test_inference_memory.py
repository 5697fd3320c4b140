"""The memory theory of a forward-only step against a measured peak, by independent
arithmetic.

The sample is AMD-AGI/TraceLens' ``tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz``
(``shared/samples/wild/tl_qwen_h100``, provenance in its README): a Hugging Face
Qwen1.5-0.5B-Chat forward pass in bf16 under ``torch.inference_mode`` on one H100, with
``profile_memory=True``. The model's published configuration (Qwen/Qwen1.5-0.5B-Chat
``config.json``, as mirrored at
https://huggingface.co/Xenova/Qwen1.5-0.5B-Chat/blob/59d179b9a48f44cddd73760e2f65ef56b827d94b/config.json):
``hidden_size`` 1024, ``num_hidden_layers`` 24, ``num_attention_heads`` 16,
``num_key_value_heads`` 16, ``intermediate_size`` 2816, ``vocab_size`` 151936,
``tie_word_embeddings`` true, ``use_cache`` true; Qwen2's attention has a bias on q, k and v
only, its norms are RMSNorms with one weight vector.

What the test reads of the trace, with gzip and json (no perfkit code): the batch and the
sequence length from ``aten::_flash_attention_forward``'s ``Input Dims``; the allocator's
``[memory]`` events of the GPU (``Device Type`` 1): its peak ``Total Allocated`` and what it
held before the step's first allocation (``Total Allocated - Bytes`` of the first event).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest
from shared_samples import shared_sample

import perfkit as pk
from perfkit.analysis._util import table
from perfkit.analysis.shapes.logits import logit_bytes
from perfkit.calc.inference_memory import (
    inference_memory,
    kv_cache_bytes,
    layer_working_bytes,
    logits_working_bytes,
)
from perfkit.errors import InvalidArgumentError
from perfkit.guards import check_memory
from perfkit.widgets.summary import job_summary, memory_breakdown

# Qwen1.5-0.5B-Chat's published config.json (module docstring)
H, LAYERS, HEADS, KV_HEADS, FFN, VOCAB = 1024, 24, 16, 16, 2816, 151936
HEAD_DIM = H // HEADS
BF16 = 2


def _trace() -> dict:
    (path,) = shared_sample("wild/tl_qwen_h100").glob("*.json.gz")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def raw() -> dict:
    """What the test reads of the raw trace: batch, sequence, the allocator's peak and what
    it held before the step."""
    events = _trace()["traceEvents"]
    flash = [e["args"]["Input Dims"] for e in events if e.get("cat") == "cpu_op"
             and e["name"] == "aten::_flash_attention_forward"]
    # (batch, sequence, heads, head size) of q, k and v, the same in every layer
    assert len(flash) == LAYERS and all(d[:3] == flash[0][:3] for d in flash)
    batch, seq, heads, head = flash[0][0]
    assert (heads, head) == (HEADS, HEAD_DIM)
    gpu = sorted((e for e in events if e.get("name") == "[memory]"
                  and e["args"].get("Device Type") == 1), key=lambda e: e["ts"])
    first = gpu[0]["args"]
    return {"batch": batch, "seq": seq,
            "peak": max(e["args"]["Total Allocated"] for e in gpu),
            "before": first["Total Allocated"] - first["Bytes"]}


def _model(seq: int) -> pk.ModelSpec:
    return pk.ModelSpec(num_layers=LAYERS, hidden_size=H, num_attention_heads=HEADS,
                        num_kv_heads=KV_HEADS, ffn_hidden_size=FFN, vocab_size=VOCAB,
                        seq_length=seq, mlp="gated", norm="rmsnorm", bias="qkv",
                        tied_embeddings=True)


def _weights() -> int:
    """Qwen1.5-0.5B's parameters, the output head tied to the embedding."""
    attention = 3 * (H * H + H) + H * H          # q, k, v with bias; o without
    mlp = 3 * H * FFN                            # gate, up, down
    layer = attention + mlp + 2 * H              # two RMSNorm weights
    return VOCAB * H + LAYERS * layer + H        # embedding, layers, final norm


@pytest.mark.shared_samples
def test_the_forward_only_theory_is_the_arithmetic_of_the_published_config(raw) -> None:
    b, s = raw["batch"], raw["seq"]
    tokens = b * s
    weights = _weights() * BF16
    assert _weights() == 463_987_712  # "0.5B": 464 M with the tied head counted once
    cache = 2 * LAYERS * tokens * KV_HEADS * HEAD_DIM * BF16
    attention = tokens * (2 * H + 2 * HEADS * HEAD_DIM) * BF16
    mlp = tokens * (3 * H + 3 * FFN) * BF16       # input, residual, norm; act, up, product
    mem = inference_memory(_model(s), pk.ParallelConfig(micro_batch_size=b), dtype="bf16")
    assert mem.weights_bytes == weights
    assert mem.kv_cache_bytes == cache == kv_cache_bytes(_model(s), b, s, BF16)
    assert layer_working_bytes(_model(s), b, s, BF16) == (attention, mlp)
    assert mem.logits_bytes == 0  # the step runs no output layer
    assert mem.total_bytes == weights + cache + max(attention, mlp)


@pytest.mark.shared_samples
def test_the_theory_meets_the_allocators_peak_of_a_qwen_forward_pass(raw) -> None:
    """The measured peak is 1.945 GiB; the theory 1.875 GiB (96 %). What it leaves out is
    in the trace: before the step's first allocation the allocator already held 54 MiB
    beyond the weights (among them cuBLAS's workspace, which PyTorch allocates through its
    caching allocator, and what the warm-up steps left allocated), and Qwen2Model's forward
    keeps the embedding output (``inputs_embeds``, one ``b·s·h`` bf16 tensor) to its end. The CUDA
    context is outside the allocator, in neither figure."""
    b, s = raw["batch"], raw["seq"]
    assert (b, s) == (16, 559)
    mem = inference_memory(_model(s), pk.ParallelConfig(micro_batch_size=b), dtype="bf16")
    theory, peak = mem.total_bytes, raw["peak"]
    assert 0.95 < theory / peak < 1.0
    held_before = raw["before"] - _weights() * BF16
    assert 50 * 2**20 < held_before < 60 * 2**20
    embeddings = b * s * H * BF16
    # what is left is less than 1 MiB (position ids, rotary tables, the mask)
    assert 0 <= peak - theory - held_before - embeddings < 2**20


@pytest.mark.shared_samples
def test_the_training_theory_was_eleven_times_the_peak(raw) -> None:
    """Why the Memory tab needs this theory: a training step's (weights, gradients,
    optimizer state and saved activations) is more than 5× the forward pass's peak."""
    profile = pk.load(shared_sample("wild/tl_qwen_h100"), progress=False)
    job = pk.infer_job(profile)
    training = float(memory_breakdown(job)["bytes"].sum())
    assert training / raw["peak"] > 5
    rows = job_summary(job).set_index("key")
    row = rows.loc["memory_gib"]
    mem = inference_memory(_model(raw["seq"]), pk.ParallelConfig(micro_batch_size=raw["batch"]),
                           dtype="bf16")
    # the job's inferred model (vocabulary, widths read from the operators) gives the same
    assert row["value"] * 2**30 == pytest.approx(mem.total_bytes)
    assert pd.isna(row["warning"]) or not row["warning"]  # within 2× of the peak: plausible


def test_logits_replace_a_layers_working_set_when_larger() -> None:
    model = _model(2048)
    rows = 4 * 2048
    # bf16 logits and their fp32 copy (2 + 4 bytes each) and the head's bf16 input
    logits = logits_working_bytes(model, rows, 6.0, BF16)
    assert logits == rows * (VOCAB * 6 + H * BF16)
    mem = inference_memory(model, pk.ParallelConfig(micro_batch_size=4), dtype="bf16",
                           logits_rows=rows, logit_bytes=6.0)
    assert mem.logits_bytes == logits > mem.layer_bytes
    assert mem.total_bytes == mem.weights_bytes + mem.kv_cache_bytes + logits
    assert list(mem.to_frame()["component"]) == ["weights", "KV cache", "logits"]


def test_bad_arguments_are_named() -> None:
    with pytest.raises(InvalidArgumentError, match="dtype"):
        inference_memory(_model(8), pk.ParallelConfig(), dtype="int3")
    with pytest.raises(InvalidArgumentError, match="batch"):
        kv_cache_bytes(_model(8), 0, 8)


def test_the_logits_type_is_read_where_they_are_used() -> None:
    """perfkit's own H100 recording of a bf16 Llama under autocast (tests/data/
    kineto_llama_h100, its PROVENANCE.md): its output layer records fp32 inputs (autocast
    casts inside it), but the logits it writes are bf16, which the next operator takes,
    and an aten::_to_copy upcasts them to fp32 (2 + 4 bytes a logit at that moment)."""
    folder = Path(__file__).parent / "data" / "kineto_llama_h100"
    with gzip.open(folder / "rank0.pt.trace.json.gz", "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    ops = sorted((e for e in events if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    head = next(e for e in ops if e["name"] == "aten::linear"
                and e["args"]["Input Dims"][1][:1] == [32000])
    assert head["args"]["Input type"][0] == "float"  # what the linear itself records
    after = [e for e in ops if e["ts"] >= head["ts"] and e["args"].get("Input Dims")
             and e["args"]["Input Dims"][0][-1:] == [32000]]
    upcasts = [e for e in after if e["name"] == "aten::_to_copy"
               and e["args"]["Input type"][0] == "c10::BFloat16"]
    assert upcasts  # the bf16 logits copied (to fp32: the cross-entropy then takes floats)
    profile = pk.load(folder, progress=False)
    frame = table(profile, "ops")
    size, said = logit_bytes(frame[frame["rank"] == 0], 32000)
    assert size == 2 + 4
    assert "logits in bf16" in said and "upcasts them to fp32" in said


@pytest.mark.shared_samples
def test_the_guard_compares_a_forward_only_theory_with_the_peak(raw) -> None:
    """On a profile without a backward pass a training theory is flagged whatever its
    value; the forward-only one is compared with the measured peak like any other."""
    job = pk.infer_job(pk.load(shared_sample("wild/tl_qwen_h100"), progress=False))
    peak = raw["peak"]
    assert not check_memory(peak, peak, job).ok  # a training theory: flagged
    assert check_memory(0.96 * peak, peak, job, forward_only=True).ok
    far = check_memory(3 * peak, peak, job, forward_only=True)
    assert not far.ok and "the measured peak" in far.warning
    assert "counts a training step" not in far.warning


@pytest.mark.shared_samples
def test_the_configuration_explorer_draws_the_theory_its_table_gives(raw) -> None:
    """The explorer started on an inference job: its memory row is the forward-only
    theory, and so is its chart (weights, KV cache and the working set, adding up to the
    published config's arithmetic), not a training step's breakdown."""
    from perfkit.widgets import metrics_panel

    profile = pk.load(shared_sample("wild/tl_qwen_h100"), progress=False)
    panel = metrics_panel(job=pk.infer_job(profile))
    assert panel.error is None
    mem = inference_memory(_model(raw["seq"]), pk.ParallelConfig(micro_batch_size=raw["batch"]),
                           dtype="bf16")
    row = panel.summary.set_index("key").loc["memory_gib"]
    assert row["value"] * 2**30 == pytest.approx(mem.total_bytes)
    chart = panel.chart.value
    assert "inference theory" in chart and "KV cache" in chart and "optimizer" not in chart


@pytest.mark.shared_samples
def test_the_memory_notebook_holds_a_forward_pass_against_its_own_theory(raw) -> None:
    """``05_memory``'s sentence on an inference profile: the measured peak against the
    forward-only theory (the published config's arithmetic), no training theory and no
    'check your model' warning (it was 11×)."""
    import re

    from perfkit.widgets.inference_memory import inference_against_peak

    profile = pk.load(shared_sample("wild/tl_qwen_h100"), progress=False)
    text = inference_against_peak(pk.infer_job(profile))
    assert text.startswith("The profile runs no backward pass") and "⚠" not in text
    mem = inference_memory(_model(raw["seq"]), pk.ParallelConfig(micro_batch_size=raw["batch"]),
                           dtype="bf16")
    (ratio,) = re.findall(r"theory / measured ([\d.]+)×", text)
    assert float(ratio) == pytest.approx(mem.total_bytes / raw["peak"], abs=0.005)
    assert "gradients, optimizer state nor saved activations" in text
