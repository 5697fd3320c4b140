"""A vLLM gpt-oss inference step: its experts as the trace shows them, and its MFU.

``wild/tl_b200_eager`` (TraceLens' B200 test trace, see the samples' README) is one rank of
vLLM running gpt-oss under tensor parallelism 8 on B200 GPUs, one forward step with no
backward pass. gpt-oss-120b's published configuration (``openai/gpt-oss-120b``,
``original/config.json`` on huggingface.co, as mirrored by huggingface.co/witflag/AlphaMind
"Duplicate from openai/gpt-oss-120b"; the same figures in NVIDIA's Megatron-Bridge page
docs.nvidia.com/nemo/megatron-bridge/latest/models/llm/gpt-oss.html) reads::

    {"num_hidden_layers": 36, "num_experts": 128, "experts_per_token": 4,
     "vocab_size": 201088, "hidden_size": 2880, "intermediate_size": 2880,
     "swiglu_limit": 7.0, "head_dim": 64, "num_attention_heads": 64,
     "num_key_value_heads": 8, "sliding_window": 128, ...}

(gpt-oss-20b has 24 layers and 32 experts: the 36 layers and 128 router columns here are
the 120b model's.) What the raw trace shows, read here with ``json`` alone
(:func:`raw_kineto.raw_events`):

* ``vllm::moe_forward`` takes the hidden states and the router's logits ``(888, 128)``,
  one column per expert, once per layer; the router GEMM ``aten::linear`` has a
  ``(128, 2880)`` weight, whole on every rank;
* the experts run in FlashInfer's TensorRT-LLM kernels, which record no shapes: the
  batched GEMMs' launch grid is ``getMaxNumCtasInBatchDim(tokens, top_k, experts, tile)``
  CTAs along the tokens (FlashInfer ``include/flashinfer/trtllm/fused_moe/runner.h``:
  ``min(E, T·k) + (T·k − min(E, T·k)) // tile``), from which top-k 4 follows — but
  perfkit's kernel table keeps no grid, so perfkit leaves top-k unknown, and the FFN
  weights are padded (the second GEMM's ``24 × 128 = 3072`` rows for the hidden 2880), so
  it leaves the FFN width unknown too;
* the output layer turns 1 row into logits (``aten::linear`` ``(1, 2880)`` by the
  ``(25136, 2880)`` slice of the vocabulary): vLLM computes logits for sampled tokens.

Before, perfkit read neither the expert count (``None``: "the expert count is not read")
nor any MFU for an inference step (MFU counted a training step, 3 × forward, and needed a
sequence length that packed sequences do not have).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from raw_kineto import raw_events, raw_walls
from shared_samples import sample
from widget_html import panel_words

import perfkit as pk
from perfkit.calc.inference import inference_forward_flops
from perfkit.widgets import tab_panel

pytestmark = pytest.mark.shared_samples

B200 = "wild/tl_b200_eager"
#: gpt-oss-120b's config.json (module docstring).
CONFIG = {"num_hidden_layers": 36, "num_experts": 128, "experts_per_token": 4,
          "vocab_size": 201088, "hidden_size": 2880, "intermediate_size": 2880,
          "head_dim": 64, "num_attention_heads": 64, "num_key_value_heads": 8}
TP = 8
#: B200 dense BF16: the HGX B200 datasheet's 36 PFLOPS with sparsity for 8 GPUs, halved.
B200_BF16 = 36e15 / 8 / 2


@pytest.fixture(scope="module")
def raw() -> list[dict[str, Any]]:
    return raw_events(Path(sample(B200)) / "eager_trace.json.gz")


@pytest.fixture(scope="module")
def profile() -> Any:
    return pk.load(sample(B200), progress=False)


@pytest.fixture(scope="module")
def job(profile: Any) -> pk.Job:
    return pk.infer_job(profile)


def _ops(raw: list[dict], name: str) -> list[dict]:
    return [e for e in raw if e.get("cat") == "cpu_op" and e.get("name") == name]


def _kernels(raw: list[dict]) -> list[dict]:
    return [e for e in raw if e.get("cat") == "kernel"]


def test_the_expert_count_is_the_router_logits_width(raw: list, job: pk.Job) -> None:
    calls = _ops(raw, "vllm::moe_forward")
    dims = Counter(tuple(map(tuple, e["args"]["Input Dims"][:2])) for e in calls)
    (((tokens, padded), (rows, experts)),) = dims
    assert rows == tokens and len(calls) == CONFIG["num_hidden_layers"]
    routers = [e for e in _ops(raw, "aten::linear")
               if e["args"]["Input Dims"][1] == [experts, CONFIG["hidden_size"]]]
    assert len(routers) == len(calls)  # the router GEMM h → E, whole on this rank
    assert experts == CONFIG["num_experts"] == 128
    assert job.value("num_experts") == experts and job.source("num_experts") == "profile"
    said = job.detail("num_experts")
    assert f"({tokens}, {experts})" in said and f"{experts} experts" in said
    assert padded == 3072 != CONFIG["hidden_size"]


def test_top_k_and_the_ffn_width_stay_unknown_with_what_was_seen(raw: list,
                                                                 job: pk.Job) -> None:
    calls = _ops(raw, "vllm::moe_forward")
    tokens, experts = calls[0]["args"]["Input Dims"][1]
    gemms = [e for e in _kernels(raw) if e["name"].startswith("bmm_")]
    tile = {int(re.search(r"_t\d+x(\d+)x\d+", e["name"])[1]) for e in gemms}
    grid_y = {e["args"]["grid"][1] for e in gemms}
    ((tile,), (grid_y,)) = (tile, grid_y)

    def max_ctas(k: int) -> int:  # FlashInfer runner.h getMaxNumCtasInBatchDim
        filled = min(experts, tokens * k)
        return filled + (tokens * k - filled) // tile

    # the launch grid pins top-k to the config's 4 (which perfkit's tables cannot show)
    assert [k for k in range(1, experts + 1) if max_ctas(k) == grid_y] \
        == [CONFIG["experts_per_token"]]
    finalize = {int(re.search(r"finalize::KernelParams<[^,]+,[^,]+,\s*(\d+)", e["name"])[1])
                for e in _kernels(raw) if "finalize::KernelParams" in e["name"]}
    assert finalize == {4} and CONFIG["experts_per_token"] % 4 == 0  # built for k % 4 == 0
    assert job.value("moe_top_k") is None
    assert "multiple of 4" in job.detail("moe_top_k")
    # the FFN weights are padded: 2 × 512 gate/up rows, not 2 × 2880 / tp = 2 × 360
    rows = {(e["args"]["grid"][0] * 128) for e in gemms}
    assert rows == {2 * 512, 3072} and CONFIG["intermediate_size"] // TP == 360
    assert job.value("ffn_hidden_size") is None
    assert "the expert FFN width is not read" in job.detail("ffn_hidden_size")
    assert "3072 columns for the hidden size 2880" in job.detail("ffn_hidden_size")
    # gpt-oss's experts are SwiGLU (swiglu_limit in its config): the fused GEMM's name says so
    assert any("swiGlu" in e["name"] for e in gemms)
    assert job.value("mlp") == "gated"


def test_the_step_tokens_and_the_logits_rows(raw: list, job: pk.Job) -> None:
    linear = [e["args"]["Input Dims"] for e in _ops(raw, "aten::linear")]
    tokens = Counter(d[0][0] for d in linear).most_common(1)[0][0]
    (query,) = {tuple(e["args"]["Input Dims"][0])
                for e in _ops(raw, "vllm::unified_attention_with_output")}
    assert tokens == query[0] == 888
    vocab_rows = CONFIG["vocab_size"] // TP
    (logits,) = [d for d in linear if d[1][0] == vocab_rows]
    assert logits[0] == [1, CONFIG["hidden_size"]]
    assert job.observed["step_tokens"][0] == tokens
    assert job.observed["logits_rows"][0] == 1


def _gemm_flops(dims: list[list[int]]) -> int:
    """2·m·n·k of ``aten::linear(x (m, k), w (n, k))``."""
    (m, k), (n, _) = dims[0], dims[1]
    return 2 * m * n * k


def test_forward_flops_by_hand_and_from_the_trace_gemms(raw: list) -> None:
    h, f, v = CONFIG["hidden_size"], CONFIG["intermediate_size"], CONFIG["vocab_size"]
    q = CONFIG["num_attention_heads"] * CONFIG["head_dim"]
    kv = CONFIG["num_key_value_heads"] * CONFIG["head_dim"]
    e, k, n_layers, t = CONFIG["num_experts"], CONFIG["experts_per_token"], 36, 888
    got = inference_forward_flops(t, n_layers, h, q, kv, f, v, "gated", e, k, logits_rows=1)
    # by hand: QKV 2880 → 4096 + 2·512, out 4096 → 2880, 4 experts of 3 GEMMs 2880 × 2880,
    # router 2880 → 128, logits for 1 row
    per_layer = 2 * h * (4096 + 1024) + 2 * 4096 * h + 4 * 3 * 2 * h * 2880 + 2 * h * 128
    assert got == t * n_layers * per_layer + 2 * h * v == 8_084_292_894_720 + 1_158_266_880
    # the trace's own GEMMs: QKV, out and logits split over tp 8, the router whole on rank 0
    linear = [x["args"]["Input Dims"] for x in _ops(raw, "aten::linear")]
    split = sum(_gemm_flops(d) for d in linear if d[1][0] != e)
    router = sum(_gemm_flops(d) for d in linear if d[1][0] == e)
    experts = t * n_layers * k * 3 * 2 * h * f
    assert got == TP * split + router + experts
    # only the routed experts count: 4 of 128 cost what 4 of 32 do, but for the router
    fewer = inference_forward_flops(t, n_layers, h, q, kv, f, v, "gated", 32, k, 1)
    assert got - fewer == t * n_layers * 2 * h * (128 - 32)
    # a dense model's MLP runs once per token
    dense = inference_forward_flops(t, n_layers, h, q, kv, f, v, "gated", logits_rows=1)
    assert dense == t * n_layers * (2 * h * 5120 + 2 * 4096 * h + 3 * 2 * h * f) + 2 * h * v


def test_the_overview_shows_the_inference_mfu_and_its_convention(raw: list, profile: Any,
                                                                 job: pk.Job) -> None:
    known = job.with_overrides(ffn_hidden_size=CONFIG["intermediate_size"],
                               moe_top_k=CONFIG["experts_per_token"])
    words = panel_words(tab_panel("Overview", profile, job=known))
    device = [x for x in raw if x.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    # the step: the trace's device span (no step marks: the whole trace is one step)
    span_us = max(x["ts"] + x["dur"] for x in device) - min(x["ts"] for x in device)
    step_s = float(span_us) / 1e6
    assert step_s == pytest.approx(0.084487, abs=1e-6)
    flops = 8_084_292_894_720 + 1_158_266_880  # the test above's arithmetic
    mfu = flops / (step_s * TP * B200_BF16)
    assert 0 < mfu < 1
    assert f"MFU {100 * mfu:.2f} %" in words  # 0.53 %
    # plausible: even over the time the GPU ran kernels it stays well under its peak
    busy_s = float(sum(x["dur"] for x in device if x["cat"] == "kernel")) / 1e6
    assert flops / (busy_s * TP * B200_BF16) < 0.1
    for said in ("forward-only model FLOPs of an inference step (no backward pass)",
                 "888 tokens through 36 layers of exact GEMMs, 4 of the 128 experts per "
                 "token, and logits for 1 row", "the attention scores are not counted",
                 "× 8 devices (tp × pp) × the bf16 peak 2,250 TFLOP/s"):
        assert said in words, said
    assert "counts a training step" not in words


def test_without_the_ffn_width_and_top_k_the_mfu_says_what_it_waits_for(
        profile: Any, job: pk.Job, grammar: Any) -> None:
    words = panel_words(tab_panel("Overview", profile, job=job))
    assert ("MFU – not computed for this inference step: the FFN size and the experts per "
            "token are not known") in words
    assert "the experts per token (top-k) | not recorded" in words
    assert grammar(words) == []


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_an_hf_inference_batch_counts_its_attention_core_and_no_logits() -> None:
    """TraceLens' H100 trace of Qwen1.5-0.5B-Chat (Hugging Face, no backward pass): 16
    sequences of 559 tokens, read here from the raw shapes; its forward runs no output
    layer (no GEMM with the 151,936-row vocabulary), so no logits are counted, and the
    attention core is, over whole sequences (full ``s × s`` scores, 4·n·s²·q a layer)."""
    folder = Path(sample("wild/tl_qwen_h100"))
    raw = raw_events(next(folder.glob("*.json.gz")))
    linear = [e["args"]["Input Dims"] for e in _ops(raw, "aten::linear")]
    (batch,) = {tuple(d[0][:2]) for d in linear}
    n, s = batch
    widths = Counter((d[1][1], d[1][0]) for d in linear)  # (in, out) per projection
    layers = widths[(1024, 2816)] // 2  # gate and up, once a layer
    (emb,) = _ops(raw, "aten::embedding")
    vocab, h = emb["args"]["Input Dims"][0]
    assert (n, s, layers, h, vocab) == (16, 559, 24, 1024, 151936)
    assert not [d for d in linear if d[1][0] == vocab]  # no output layer in the step
    per_layer = sum(2 * i * o * c for (i, o), c in widths.items()) // layers
    assert per_layer == 2 * h * (3 * 1024) + 2 * 1024 * h + 3 * 2 * h * 2816
    flops = n * s * layers * per_layer + layers * 4 * n * s * s * 1024
    (wall,) = raw_walls(next(folder.glob("*.json.gz"))).values()  # its one ProfilerStep
    step_s = float(wall) / 1e6
    mfu = flops / (step_s * 1 * 1979e12 / 2)  # H100 SXM dense BF16: 1,979 sparse, halved
    profile = pk.load(folder, progress=False)
    words = panel_words(tab_panel("Overview", profile))
    assert f"MFU {100 * mfu:.2f} %" in words  # 16.91 %
    assert "no logits (no output layer over the vocabulary in the step)" in words
    assert "the attention scores of 16 sequences of 559 tokens (full 559 × 559 scores) " \
           "are counted" in words
