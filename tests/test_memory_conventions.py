"""Static and activation memory conventions against the tools' own published outputs.

* DeepSpeed: the example tables printed in ``docs/code-docs/source/memory.rst``
  (deepspeedai/DeepSpeed) for ``estimate_zero2/3_model_states_mem_needs_all_cold``.
* Megatron-LM: ``megatron/training/theoretical_memory_usage.py`` (d98e8a64) — the expected
  bytes are the function's arithmetic written out; the same numbers came out of running
  ``compute_weight_and_optimizer_memory`` / ``compute_activation_memory[_without_sp]`` on
  these arguments (values quoted in the comments).
* Korthikanti et al. 2022, Fig. 1 (GPT-3 175B, t = 8, p = 8, v = 3).
* llm-analysis 0.2.2 (PyPI): ``LLMAnalysis.training()`` run on its ``megatron-lm-175b``
  model config; the summary values are quoted in the comments.
"""

import pytest

import perfkit as pk
from perfkit.calc.deepspeed import estimate_zero2_model_states, estimate_zero3_model_states

GIB = 2**30


# --- DeepSpeed ------------------------------------------------------------------------

# memory.rst, estimate_zero3_model_states_mem_needs_all_cold(total_params=2851e6,
# largest_layer_params=32e6, num_gpus_per_node=8, num_nodes=1):
#   per CPU  |  per GPU |   Options
#    71.69GB |   0.12GB | offload_param=cpu , offload_optimizer=cpu , zero_init=1
#   127.45GB |   0.12GB | offload_param=cpu , offload_optimizer=cpu , zero_init=0
#    63.72GB |   0.78GB | offload_param=none, offload_optimizer=cpu , zero_init=1
#   127.45GB |   0.78GB | offload_param=none, offload_optimizer=cpu , zero_init=0
#     1.43GB |   6.09GB | offload_param=none, offload_optimizer=none, zero_init=1
#   127.45GB |   6.09GB | offload_param=none, offload_optimizer=none, zero_init=0
ZERO3_DOCS = [((True, True, True), 71.69, 0.12), ((True, True, False), 127.45, 0.12),
              ((True, False, True), 63.72, 0.78), ((True, False, False), 127.45, 0.78),
              ((False, False, True), 1.43, 6.09), ((False, False, False), 127.45, 6.09)]


@pytest.mark.parametrize("options,cpu_gb,gpu_gb", ZERO3_DOCS)
def test_deepspeed_zero3_docs_table(options, cpu_gb, gpu_gb):
    offload_opt, offload_param, zero_init = options
    P, LL, gpn = 2851e6, 32e6, 8
    # the formulas of stage3.py, written out (the "GB" printed is bytes / 2**30)
    if offload_opt and offload_param:
        cpu = P * 18 * 1.5 if zero_init else P * max(4 * gpn, 18) * 1.5
        gpu = 4 * LL
    elif offload_opt:
        cpu = P * 16 * 1.5 if zero_init else P * max(4 * gpn, 16) * 1.5
        gpu = 4 * LL + 2 * P / gpn
    else:
        cpu = LL * 4 * gpn * 1.5 if zero_init else P * 4 * gpn * 1.5
        gpu = 4 * LL + 18 * P / gpn
    assert round(cpu / GIB, 2) == cpu_gb and round(gpu / GIB, 2) == gpu_gb
    est = estimate_zero3_model_states(P, LL, gpn, 1, offload_opt, offload_param, zero_init)
    assert est.host_bytes_per_node == pytest.approx(cpu) and est.device_bytes == \
        pytest.approx(gpu)
    got = pk.static_memory(P, pk.ParallelConfig(dp=8, zero_stage=3), "deepspeed",
                           largest_layer_params=LL, offload_optimizer=offload_opt,
                           offload_params=offload_param, zero_init=zero_init)
    assert got.total_bytes == pytest.approx(gpu) and got.host_bytes_per_node == \
        pytest.approx(cpu)
    assert got.buffer_bytes == 4 * LL


def test_deepspeed_zero3_t5_large_gpu_cases():
    # memory.rst "case1/2/3 gpu memory" for t5-large on 4 GPUs: 3291, 125, 477 MB (>> 20).
    # t5-large: 737,668,096 parameters (printed 737.67M), largest layer the shared
    # 32128 x 1024 embedding = 32,899,072 (printed 32.90M).
    P, LL = 737_668_096, 32128 * 1024
    par = pk.ParallelConfig(dp=4, zero_stage=3)
    cases = {"case1": dict(), "case2": dict(offload_optimizer=True, offload_params=True),
             "case3": dict(offload_optimizer=True)}
    expected = {"case1": 4 * LL + int(18 * P / 4), "case2": 4 * LL,
                "case3": 4 * LL + int(2 * P / 4)}
    printed = {"case1": 3291, "case2": 125, "case3": 477}
    for name, kw in cases.items():
        got = pk.static_memory(P, par, "deepspeed", largest_layer_params=LL, **kw)
        assert int(expected[name]) >> 20 == printed[name]
        assert got.total_bytes == pytest.approx(expected[name], abs=1)


def test_deepspeed_zero2_docs_and_code_differ():
    # memory.rst estimate_zero2_model_states_mem_needs_all_cold(2851e6, 8 GPUs, 1 node):
    #   127.45GB |   5.31GB | offload_optimizer=cpu
    #   127.45GB |  15.93GB | offload_optimizer=none
    # The offload row is the code's 2·P and P·max(4·N, 16)·1.5. Without offload the docs
    # print 4·P + 16·P/N = 15.93 GB; stage_1_and_2.py computes 2·P + 18·P/N = 11.28 GB.
    P, N = 2851e6, 8
    par = pk.ParallelConfig(dp=N, zero_stage=2)
    off = pk.static_memory(P, par, "deepspeed", offload_optimizer=True)
    assert round(off.total_bytes / GIB, 2) == 5.31 == round(2 * P / GIB, 2)
    assert round(off.host_bytes_per_node / GIB, 2) == 127.45 == round(P * 32 * 1.5 / GIB, 2)
    on = pk.static_memory(P, par, "deepspeed")
    assert on.total_bytes == pytest.approx(2 * P + 18 * P / N)
    assert round(on.total_bytes / GIB, 2) == 11.28
    assert round((4 * P + 16 * P / N) / GIB, 2) == 15.93  # the docs' older formula
    assert estimate_zero2_model_states(P, N, 1, False).device_bytes == on.total_bytes
    assert (on.weights_bytes, on.gradients_bytes, on.optimizer_bytes) == pytest.approx(
        (2 * P, 6 * P / N, 12 * P / N))


def test_deepspeed_scheme_rules():
    par = pk.ParallelConfig(dp=8, zero_stage=1)
    with pytest.raises(pk.InvalidArgumentError, match="ZeRO-2 and ZeRO-3"):
        pk.static_memory(7e9, par, "deepspeed")
    with pytest.raises(pk.InvalidArgumentError, match="largest_layer_params"):
        pk.static_memory(7e9, par.replace(zero_stage=3), "deepspeed")
    with pytest.raises(pk.InvalidArgumentError, match="offload_params"):
        pk.static_memory(7e9, par.replace(zero_stage=2), "deepspeed", offload_params=True)
    with pytest.raises(pk.InvalidArgumentError, match="gradient_bytes"):
        pk.static_memory(7e9, par.replace(zero_stage=2), "deepspeed", gradient_bytes=4)
    with pytest.raises(pk.InvalidArgumentError, match="deepspeed"):
        pk.static_memory(7e9, par, "zero", offload_optimizer=True)
    # a ModelSpec brings its own largest layer: the 32000 x 4096 embedding for Llama2-7B
    m = pk.ModelSpec.preset("llama2-7b")
    z3 = pk.static_memory(m, pk.ParallelConfig(dp=8, zero_stage=3), "deepspeed")
    assert z3.buffer_bytes == 4 * 32000 * 4096
    frame = z3.to_frame().set_index("component")
    assert frame.loc["host per node", "bytes"] == z3.host_bytes_per_node
    assert frame.loc["gather buffer", "bytes"] == z3.buffer_bytes


# --- Megatron-LM ----------------------------------------------------------------------

def llama7b_megatron_parts(tp, pp):
    h, f, V, L = 4096, 11008, 32000, 32
    attention = 4 * h * h  # self_attn_term: 2·h²·(1 + g/a)·(q/h) with g = a
    mlp = 2 * h * f * 3 / 2  # 2·h·f·(3/2 for SwiGLU)
    norms, final = 2 * h, h  # RMSNorm: norm_size 1, two per layer
    tp_sharded = (L * (attention + mlp) / pp + V * h) / tp
    if pp == 1:
        tp_sharded += V * h / tp  # untied output layer, counted only when pp == 1
    replicated = (L * norms + final) / pp
    return tp_sharded + replicated


def test_megatron_weight_and_optimizer_memory_llama2_7b():
    # tp 2, pp 2, dp 4, distributed optimizer: compute_weight_and_optimizer_memory printed
    # 15162034176 bytes for these arguments.
    m = pk.ModelSpec.preset("llama2-7b")
    par = pk.ParallelConfig(dp=4, tp=2, pp=2, num_micro_batches=8, optimizer_shard=4)
    shard = llama7b_megatron_parts(2, 2)
    expected = shard * (6 + 12 / 4)
    assert expected == 15162034176
    got = pk.static_memory(m, par, "megatron")
    assert got.total_bytes == pytest.approx(expected, rel=1e-12)
    assert got.parameters == pytest.approx(shard, rel=1e-12)
    # without the distributed optimizer, 18 bytes per parameter; tp 4, pp 1: 30326464512
    plain = pk.static_memory(m, pk.ParallelConfig(dp=2, tp=4), "megatron")
    assert plain.total_bytes == pytest.approx(llama7b_megatron_parts(4, 1) * 18, rel=1e-12)
    assert llama7b_megatron_parts(4, 1) * 18 == 30326464512


def test_megatron_experts_use_the_expert_data_parallel_size():
    # Mixtral 8x7B, tp 2, pp 2, dp 8, ep 4, distributed optimizer: Megatron's function
    # printed 36835900416 bytes. Experts are split expert_tp·ep = 8 ways and their
    # optimizer sharded over world/(expert_tp·ep·pp) = 32/16 = 2 ranks.
    mx = pk.ModelSpec.preset("mixtral-8x7b")
    h, f, V, L, E = 4096, 14336, 32000, 32, 8
    attention = 2 * h * h * (1 + 8 / 32)
    tp_part = (L * attention / 2 + V * h) / 2
    replicated = (L * (2 * h + h * E) + h) / 2  # norms and router, final norm
    experts = L * 3 * h * f * E / 2 / (2 * 4)
    expected = (tp_part + replicated) * (6 + 12 / 8) + experts * (6 + 12 / 2)
    assert expected == 36835900416
    par = pk.ParallelConfig(dp=8, tp=2, pp=2, ep=4, num_micro_batches=8, optimizer_shard=8)
    assert pk.static_memory(mx, par, "megatron").total_bytes == pytest.approx(expected,
                                                                            rel=1e-12)


def test_megatron_activation_without_sp_llama2_7b():
    # compute_activation_memory_without_sp: tp 2, pp 2, 8 micro-batches of 1 x 4096:
    # (sbh·(10 + 24/t)·L + 8·s·b·p + s·b·h·p) · min(1, m/p) · 1.05 = 12437019033.6 bytes.
    m = pk.ModelSpec.preset("llama2-7b")
    s, b, h, L, t, p = 4096, 1, 4096, 32, 2, 2
    expected = (s * b * h * (10 + 24 / t) * L + 8 * s * b * p + s * b * h * p) * 1.05
    assert expected == pytest.approx(12437019033.6)
    par = pk.ParallelConfig(dp=4, tp=2, pp=2, num_micro_batches=8)
    got = pk.activation_memory(m, par, convention="megatron")
    assert got.total_bytes == pytest.approx(expected, rel=1e-12)
    assert got.extra_bytes == pytest.approx((8 * s * b * p + s * b * h * p) * 1.05)
    # the no-SP formula is used even without recompute, and has no s² term
    assert got.per_layer_bytes == s * b * h * (10 + 24 / t)


def test_megatron_activation_with_sp_and_output_layer():
    # compute_activation_memory (SP + selective), tp 4, pp 1: the output layer and CE loss
    # 4·sbh·(1 + V/h) are added because pp == 1; everything / tp. Megatron printed
    # 4010811392 bytes.
    m = pk.ModelSpec.preset("llama2-7b")
    s, b, h, L, t, V, f = 4096, 1, 4096, 32, 4, 32000, 11008
    expected = (s * b * h * (18 + 4 * f / h) * L + 8 * s * b + s * b * h
                + 4 * s * b * h * (1 + V / h)) / t
    assert expected == 4010811392
    par = pk.ParallelConfig(dp=2, tp=4, sequence_parallel=True, recompute="selective")
    assert pk.activation_memory(m, par, convention="megatron").total_bytes == \
        pytest.approx(expected, rel=1e-12)


def test_megatron_sp_path_is_korthikanti_figure1_plus_embedding_terms():
    # GPT-3 175B, t 8, p 8, v 3, SP + selective: Korthikanti Fig. 1 gives 12.3515625 GiB
    # for the layers; Megatron adds (8·s·b·p + s·b·h·p)/t times the interleaving penalty.
    g = pk.ModelSpec.preset("gpt3-175b")
    s, b, h, p, t = 2048, 1, 12288, 8, 8
    penalty = 1 + 7 / 24
    par = pk.ParallelConfig(tp=8, pp=8, vpp=3, num_micro_batches=64, sequence_parallel=True,
                            recompute="selective")
    got = pk.activation_memory(g, par, convention="megatron").total_bytes
    extra = (8 * s * b * p + s * b * h * p) / t * penalty
    assert got == pytest.approx(12.3515625 * GIB + extra, rel=1e-12)


# --- Korthikanti et al. 2022 ------------------------------------------------------------

def test_korthikanti_convention_reproduces_figure1_and_is_not_capped_by_m():
    g = pk.ModelSpec.preset("gpt3-175b")
    par = pk.ParallelConfig(tp=8, pp=8, vpp=3, num_micro_batches=64)
    assert pk.activation_memory(g, par, convention="korthikanti").total_bytes / GIB == \
        pytest.approx(66.84375)
    sel = par.replace(sequence_parallel=True, recompute="selective")
    assert pk.activation_memory(g, sel, convention="korthikanti").total_bytes / GIB == \
        pytest.approx(12.3515625)
    # With as many micro-batches as stages (m = p = 8, v = 3) the first stage cannot hold
    # more than m micro-batches per chunk: the seed convention (SAPP's counts) caps it,
    # the paper's formula does not: 23·sbh per layer, 12 layers on stage 0.
    few = par.replace(num_micro_batches=8)
    sbh = 2048 * 12288
    kor = pk.activation_memory(g, few, convention="korthikanti")
    assert kor.total_bytes == pytest.approx(23 * sbh * 96 * (1 + 7 / 24))
    seed = pk.activation_memory(g, few)
    assert seed.total_bytes == pytest.approx(23 * sbh * 4 * (8 + 8 + 8))  # 3 chunks of 8
    assert seed.total_bytes < kor.total_bytes
    with pytest.raises(pk.InvalidArgumentError, match="first pipeline stage"):
        pk.activation_memory(g, par, stage=1, convention="korthikanti")
    with pytest.raises(pk.InvalidArgumentError, match="activation_model"):
        pk.activation_memory(g, par, convention="megatron",
                             activation_model=pk.ActivationModel("tensors"))


# --- llm-analysis 0.2.2 -------------------------------------------------------------------

def llm_analysis_layer(s, b, h, a, t, sp, f_ratio, recompute, flash, softmax_dropout,
                       ln_bytes=4):
    sbh = s * b * h
    if recompute == "full":
        return sbh * 2 / t
    core = 0 if recompute == "selective" else (
        (2 * sbh + 4 * a * s * b) * 2 / t if flash
        else 2 * a * s * s * b * 2 / t + (a * s * s * b / t if softmax_dropout else 0))
    attention = (sbh / sp + 4 * sbh / t) * 2 + core + sbh / sp
    mlp = 2 * sbh / sp + 4 * f_ratio * sbh / t
    return attention + mlp + 2 * sbh / sp * ln_bytes


# LLMAnalysis(megatron-lm-175b: 96 layers, 96 heads, h 12288, vocab 50272, ffn 4h) with
# pp 8 and micro-batch size 2, training(seq_len=2048, ...)["activation_memory_per_gpu"]:
LLM_ANALYSIS_B2 = [
    # (recompute, tp, sequence parallel, flash_attn) -> bytes
    (("none", 1, False, True), 199020511232.0),
    (("selective", 8, True, True), 22423896064.0),
    (("full", 8, False, True), 1259438080.0),
    (("none", 8, False, False), 125880598528.0),  # flash off, softmax_dropout on
]


@pytest.mark.parametrize("case,printed", LLM_ANALYSIS_B2)
def test_llm_analysis_training_activation_memory(case, printed):
    recompute, t, sp, flash = case
    s, b, h, a, L, V = 2048, 2, 12288, 96, 96, 50272
    spn = t if sp else 1
    per_layer = llm_analysis_layer(s, b, h, a, t, spn, 4.0, recompute, flash, not flash)
    final_norm = 0 if recompute == "full" else s * b * h / spn * 4
    expected = L * per_layer + V * b * s * 2 / t + final_norm
    assert expected == pytest.approx(printed, rel=1e-12)
    g = pk.ModelSpec.preset("gpt3-175b", vocab_size=V)
    par = pk.ParallelConfig(tp=t, pp=8, micro_batch_size=b, num_micro_batches=8,
                            sequence_parallel=sp, recompute=recompute)
    am = pk.ActivationModel("tensors", flash_attention=flash, dropout=not flash,
                            norm_bytes=4.0)
    got = pk.activation_memory(g, par, activation_model=am, convention="llm-analysis")
    assert got.total_bytes == pytest.approx(printed, rel=1e-12)


def test_llm_analysis_defaults_and_its_micro_batch_one_double_count():
    # With micro-batch size 1, llm-analysis 0.2.2's training() starts from its b = 1 total
    # (which already holds the logits and the final norm) and adds both again:
    # "activation_memory_per_gpu" 99816833024 vs "activation_memory_batch_size_1"
    # 99510255616 (no parallelism, flash attention, pp 8). perfkit gives the latter.
    g = pk.ModelSpec.preset("gpt3-175b", vocab_size=50272)
    par = pk.ParallelConfig(pp=8, num_micro_batches=8)
    got = pk.activation_memory(g, par, convention="llm-analysis")  # its defaults
    s, h, V = 2048, 12288, 50272
    assert got.total_bytes == pytest.approx(99510255616.0, rel=1e-12)
    assert got.total_bytes + V * s * 2 + s * h * 4 == pytest.approx(99816833024.0, rel=1e-12)
    assert got.extra_bytes == V * s * 2 + s * h * 4
