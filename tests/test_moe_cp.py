"""MoE presets against published parameter counts; expert and context parallelism in the
specs, memory, communication and step calculators (expected values written out here)."""

import math

import pytest

import perfkit as pk

GIB = 2**30


# --- presets ------------------------------------------------------------------------------

def test_deepseek_v3_671b_total_37b_active():
    # config.json of deepseek-ai/DeepSeek-V3; DeepSeek-V3 report: "671B total parameters,
    # 37B activated for each token" (rounded figures; the HF files' 685B add the 14B MTP
    # module, not part of the main model).
    h, L, dense, V = 7168, 61, 3, 129280
    a, dn, dr, dv, rq, rkv = 128, 128, 64, 128, 1536, 512
    attention = (h * rq + rq + rq * a * (dn + dr)  # q_a_proj, q_a_layernorm, q_b_proj
                 + h * (rkv + dr) + rkv + rkv * a * (dn + dv)  # kv_a_proj, norm, kv_b_proj
                 + a * dv * h)  # o_proj
    expert = 3 * h * 2048
    dense_layer = attention + 3 * h * 18432 + 2 * h
    moe_layer = attention + 256 * expert + expert + h * 256 + 2 * h
    total = dense * dense_layer + (L - dense) * moe_layer + 2 * V * h + h
    active = (dense * dense_layer + (L - dense) * (moe_layer - 248 * expert) + 2 * V * h + h)
    m = pk.ModelSpec.preset("deepseek-v3")
    assert m.num_parameters() == total == 671_026_404_352
    assert m.num_active_parameters() == active
    assert round(total / 1e9) == 671
    # 37.55B counting the input embedding and the output head; 36.63B without the input
    # embedding (a lookup): "37B" either way.
    assert math.floor(active / 1e9) == 37 and round((active - V * h) / 1e9) == 37
    assert m.parameter_breakdown()["dense_layers"] == 3


def test_mixtral_46_7b_total_12_9b_active():
    # mistralai/Mixtral-8x7B-v0.1 model card: 46.7B parameters, 12.9B used per token.
    h, f, L, V = 4096, 14336, 32, 32000
    attention = 2 * h * h + 2 * h * 1024
    expert = 3 * h * f
    layer_norms_router = 2 * h + h * 8
    total = L * (attention + 8 * expert + layer_norms_router) + 2 * V * h + h
    active = L * (attention + 2 * expert + layer_norms_router) + 2 * V * h + h
    m = pk.ModelSpec.preset("mixtral-8x7b")
    assert (m.num_parameters(), m.num_active_parameters()) == (total, active)
    assert (round(total / 1e8) / 10, round(active / 1e8) / 10) == (46.7, 12.9)


@pytest.mark.parametrize("name,layers,h,heads,expert_f,index_bytes,card", [
    # HF model.safetensors.index.json "total_size" (bf16 bytes = 2 x parameters) and the
    # model cards: 30.5B total / 3.3B activated / 29.9B non-embedding;
    # 235B / 22B / 234B.
    ("qwen3-30b-a3b", 48, 2048, 32, 768, 61_064_245_248, (30.5, 3.3, 29.9)),
    ("qwen3-235b-a22b", 94, 4096, 64, 1536, 470_187_269_120, (235, 22, 234)),
])
def test_qwen3_moe_exact_counts(name, layers, h, heads, expert_f, index_bytes, card):
    V, d, kv = 151936, 128, 4
    attention = h * heads * d + 2 * h * kv * d + heads * d * h + 2 * d  # q/k RMSNorm
    expert = 3 * h * expert_f
    per_layer = attention + 128 * expert + h * 128 + 2 * h
    total = layers * per_layer + 2 * V * h + h
    active = layers * (per_layer - 120 * expert) + 2 * V * h + h
    m = pk.ModelSpec.preset(name)
    assert m.num_parameters() == total == index_bytes // 2
    assert m.num_active_parameters() == active
    # the cards' figures are rounded (or cut: 3.35B active is printed 3.3B)
    tol = 0.06 if card[0] < 100 else 0.6
    assert abs(total / 1e9 - card[0]) < tol
    assert abs(active / 1e9 - card[1]) < tol
    assert abs((total - 2 * V * h) / 1e9 - card[2]) < tol


def test_from_hf_config_reads_moe_and_mla_keys():
    deepseek = {"model_type": "deepseek_v3", "hidden_act": "silu", "hidden_size": 7168,
                "intermediate_size": 18432, "moe_intermediate_size": 2048,
                "num_hidden_layers": 61, "num_attention_heads": 128,
                "num_key_value_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256,
                "num_experts_per_tok": 8, "first_k_dense_replace": 3, "q_lora_rank": 1536,
                "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                "v_head_dim": 128, "vocab_size": 129280, "max_position_embeddings": 163840,
                "tie_word_embeddings": False}
    m = pk.ModelSpec.from_hf_config(deepseek, seq_length=4096)
    assert m.num_parameters() == pk.ModelSpec.preset("deepseek-v3").num_parameters()
    assert (m.first_dense_layers, m.num_shared_experts, m.is_mla) == (3, 1, True)
    qwen3 = {"model_type": "qwen3_moe", "hidden_act": "silu", "hidden_size": 2048,
             "intermediate_size": 6144, "moe_intermediate_size": 768, "num_hidden_layers": 48,
             "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
             "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936,
             "max_position_embeddings": 40960, "tie_word_embeddings": False}
    q = pk.ModelSpec.from_hf_config(qwen3, seq_length=4096)
    assert q.num_parameters() == 30_532_122_624 and q.qk_norm
    # Qwen2-MoE: one shared expert of shared_expert_intermediate_size
    qwen2 = {"model_type": "qwen2_moe", "hidden_act": "silu", "hidden_size": 64,
             "intermediate_size": 128, "moe_intermediate_size": 32,
             "shared_expert_intermediate_size": 96, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_experts": 4, "num_experts_per_tok": 2,
             "vocab_size": 100, "max_position_embeddings": 64}
    q2 = pk.ModelSpec.from_hf_config(qwen2, seq_length=64)
    assert (q2.num_shared_experts, q2.shared_ffn_hidden_size) == (1, 96)
    assert q2.parameter_breakdown()["shared_mlp"] == 3 * 64 * 96


def test_model_spec_moe_field_rules():
    base = dict(num_layers=4, hidden_size=64, num_attention_heads=4, seq_length=32,
                vocab_size=100, mlp="gated")
    for kwargs, param in (({"num_shared_experts": 1}, "num_shared_experts"),
                          ({"first_dense_layers": 1}, "first_dense_layers"),
                          ({"num_experts": 4, "first_dense_layers": 4}, "first_dense_layers"),
                          ({"q_lora_rank": 16}, "q_lora_rank"),
                          ({"kv_lora_rank": 16, "num_kv_heads": 2}, "num_kv_heads"),
                          ({"num_experts": 4, "num_shared_experts": -1}, "num_shared_experts")):
        with pytest.raises(pk.InvalidArgumentError) as err:
            pk.ModelSpec(**base, **kwargs)
        assert err.value.parameter == param


# --- ParallelConfig -----------------------------------------------------------------------

def test_parallel_config_cp_ep_expert_tp():
    par = pk.ParallelConfig(dp=4, tp=2, pp=2, cp=2, ep=8, num_micro_batches=4)
    assert par.world_size == 4 * 2 * 2 * 2
    assert par.global_batch_size == 4 * 4  # cp ranks share the same sequences
    # Megatron's expert grid: ep (x expert_tp) divides tp·cp·dp = 16
    assert par.expert_tp_size == 2 and par.expert_dp == 2 * 2 * 4 / (8 * 2)
    assert pk.ParallelConfig(dp=4, cp=2, ep=8).expert_dp == 1
    with pytest.raises(pk.ParallelConfigError, match="dp\\*cp=4"):
        pk.ParallelConfig(dp=2, cp=2, ep=8)
    with pytest.raises(pk.ParallelConfigError, match="ep\\*expert_tp=16"):
        pk.ParallelConfig(dp=4, tp=2, ep=4, expert_tp=4)
    assert pk.ParallelConfig(dp=2, tp=4, ep=8, expert_tp=1).expert_dp == 1
    mx = pk.ModelSpec.preset("mixtral-8x7b")
    assert pk.ParallelConfig(dp=16, ep=16).problems(mx) == ["ep: must divide num_experts=8"]
    dense = pk.ModelSpec.preset("llama2-7b")
    assert pk.ParallelConfig(dp=2, ep=2).problems(dense) == ["ep: must divide num_experts=1"]
    assert pk.ParallelConfig(cp=3).problems(dense) == [
        "cp: seq_length=4096 must be a multiple of 2*cp=6"]
    assert pk.ParallelConfig(dp=2, cp=4).problems(dense, num_devices=16) == [
        "dp: dp*tp*pp*cp=8 must equal num_devices=16"]
    with pytest.raises(pk.ParallelConfigError):
        pk.ParallelConfig(cp=0)


# --- memory -------------------------------------------------------------------------------

def test_parameters_per_device_splits_experts_ep_times_expert_tp():
    mx = pk.ModelSpec.preset("mixtral-8x7b")
    b = mx.parameter_breakdown()
    h, V = 4096, 32000
    par = pk.ParallelConfig(dp=4, tp=2, ep=4, expert_tp=1)
    per_layer = b["attention"] / 2 + b["mlp"] / (4 * 1) + b["router"] + b["norms"]
    assert pk.parameters_per_device(mx, par) == pytest.approx(32 * per_layer + 2 * V * h / 2
                                                               + h)
    # static memory (mindspore scheme, no sharding, no gradient buffer): 10 B/param
    assert pk.static_memory(mx, par).total_bytes == pytest.approx(
        10 * (32 * per_layer + 2 * V * h / 2 + h))


def test_deepseek_stages_with_dense_first_layers():
    # 61 layers on 4 stages: 16, 15, 15, 15 (remainder first); stage 0 holds the 3 dense
    # layers, so with experts on 8 ranks a middle stage can be the fullest.
    m = pk.ModelSpec.preset("deepseek-v3")
    b = m.parameter_breakdown()
    par = pk.ParallelConfig(dp=8, pp=4, ep=8, num_micro_batches=4)
    moe = b["attention"] + b["shared_mlp"] + b["router"] + b["norms"] + b["mlp"] / 8
    dense = b["attention"] + b["dense_mlp"] + b["norms"]
    stage0 = 3 * dense + 13 * moe + b["embedding"]
    stage1 = 15 * moe
    stage3 = 15 * moe + b["final_norm"] + b["output"]
    stages = pk.calc.memory.stage_parameters(m, par)
    assert [s["total"] for s in stages] == pytest.approx([stage0, stage1, stage1, stage3])
    assert pk.parameters_per_device(m, par) == pytest.approx(max(stage0, stage1, stage3))


def test_zero_scheme_shards_experts_over_expert_data_parallel():
    mx = pk.ModelSpec.preset("mixtral-8x7b")
    par = pk.ParallelConfig(dp=8, ep=4, zero_stage=3)
    n = pk.parameters_per_device(mx, par)
    experts = 32 * mx.parameter_breakdown()["mlp"] / 4
    dense = n - experts
    got = pk.static_memory(mx, par, "zero")
    # dense sharded over dp·cp = 8, experts over tp·cp·dp/(ep·expert_tp) = 2
    assert got.total_bytes == pytest.approx(16 * dense / 8 + 16 * experts / 2)


def test_activation_memory_with_context_parallelism():
    # Each rank keeps s/cp tokens; attention scores of those queries against all s keys.
    g = pk.ModelSpec.preset("gpt3-175b")
    s, h, a, cp, t = 2048, 12288, 96, 4, 8
    per_layer, _ = pk.activation_per_layer(g, 1, t, False, "none", cp=cp)
    sbh = (s / cp) * h
    assert per_layer == pytest.approx(sbh * (10 + (24 + 5 * a * s / h) / t))
    par = pk.ParallelConfig(tp=8, pp=8, cp=4, num_micro_batches=8)
    act = pk.activation_memory(g, par)
    assert act.total_bytes == pytest.approx(8 * 12 * per_layer)
    # Megatron's and llm-analysis' conventions use s/cp too
    base = pk.activation_memory(g, par.replace(cp=1), convention="megatron").total_bytes
    assert pk.activation_memory(g, par, convention="megatron").total_bytes == \
        pytest.approx(base / 4)


# --- communication ------------------------------------------------------------------------

def test_cp_key_value_exchange_volume():
    # Megatron's CP guide: all-gather K,V in the forward, again in the backward, and
    # reduce-scatter dK,dV: three (cp-1)/cp shares of 2·s·b·g·d elements per layer.
    m = pk.ModelSpec.preset("llama3-8b")  # 8 KV heads of 128
    s, b, g, d, L, cp, m_ = 8192, 1, 8, 128, 32, 4, 2
    par = pk.ParallelConfig(dp=2, cp=cp, num_micro_batches=m_)
    vol = pk.comm_volume(m, par)
    kv = 2 * s * b * g * d * 2  # bytes, K and V in bf16
    assert vol.cp_bytes == pytest.approx(3 * L * m_ * kv * (cp - 1) / cp)
    frame = vol.to_frame()
    assert frame[frame["kind"] == "cp"]["collective"].str.startswith("send/recv").all()
    gathered = pk.comm_volume(m, par, cp_comm="all_gather")
    assert gathered.cp_bytes == vol.cp_bytes
    assert set(gathered.to_frame().query("kind == 'cp'")["collective"]) == {
        "all-gather (K, V), fwd and bwd", "reduce-scatter (dK, dV), bwd"}
    # TP traffic carries the local s/cp tokens; gradients reduce over dp·cp = 8 ranks
    tp_par = par.replace(tp=2)
    assert pk.comm_volume(m, tp_par).tp_bytes == pytest.approx(
        m_ * 4 * L * b * (s / cp) * 4096 * 2 * 2 * (2 - 1) / 2)
    n = pk.parameters_per_device(m, par)
    assert vol.dp_bytes == pytest.approx(2 * 7 / 8 * n * 2)
    # full recompute repeats the forward exchange
    full = pk.comm_volume(m, par.replace(recompute="full"))
    assert full.cp_bytes == pytest.approx(4 * L * m_ * kv * (cp - 1) / cp)


def test_ep_all_to_all_counts_moe_layers_only_and_experts_reduce_over_expert_dp():
    # DeepSeek-V3's shape with 64 layers, so that 4 stages take 16 each (perfkit asks
    # pp to divide the layers); the first 3 are dense.
    m = pk.ModelSpec.preset("deepseek-v3").replace(num_layers=64)
    par = pk.ParallelConfig(dp=8, pp=4, ep=8, num_micro_batches=4)
    vol = pk.comm_volume(m, par)
    s, h, k, mb = 4096, 7168, 8, 4
    moe_on_stage0 = 16 - 3  # 16 layers on stage 0, the first 3 dense
    expected = 4 * moe_on_stage0 * mb * k * s * h * 2 * 7 / 8
    assert vol.ep_bytes == pytest.approx(expected)
    frame = vol.to_frame().set_index("collective")
    stage = max(pk.calc.memory.stage_parameters(m, par), key=lambda x: x["total"])
    # expert_dp = tp·cp·dp/(ep·expert_tp) = 1: expert gradients need no reduction
    assert "all-reduce (expert gradients)" not in frame.index
    assert frame.loc["all-reduce (gradients)", "message_bytes"] == pytest.approx(
        (stage["total"] - stage["experts"]) * 2)


# --- step estimate ------------------------------------------------------------------------

#: Links at 80 % of nominal without their fixed latency: the bandwidth terms alone.
NO_LATENCY = {"comm_efficiency": 0.8, "rates": pk.Rates(link_latency_s=0.0)}


def test_estimate_step_with_context_parallelism():
    m = pk.ModelSpec.preset("llama3-8b")
    hw = pk.Hardware.preset("h100")
    par = pk.ParallelConfig(dp=2, cp=4, num_micro_batches=2)
    est = pk.estimate_step(m, par, hw, efficiency=0.5, **NO_LATENCY)
    # each rank runs s/cp tokens of every sequence, attention against all s keys: the
    # matrix products' FLOPs at 50 % of the peak, the memory-bound kernels on top (the
    # unfused attention's softmax over a·(s/cp)·s elements the largest: 0.4 of it here)
    tokens = 2 * 8192 / 4
    layer = pk.layer_forward_flops(m)["total"]
    per_token = 3 * 32 * layer + 3 * 2 * 4096 * 128256
    matmuls = tokens * per_token / (989.5e12 * 0.5)
    assert matmuls < est.compute_s < 1.5 * matmuls
    # the K/V ring: each layer all-gathers the b·s·(8 KV heads)·(128 + 128)·2-byte keys
    # and values over the 4 cp ranks (one node) twice forward, three times backward
    kv = 1 * 8192 * 8 * (128 + 128) * 2
    assert est.cp_comm_s == pytest.approx(32 * 5 * 2 * 3 / 4 * kv / (450e9 * 0.8))
    assert est.parts["cp_comm"] < est.cp_comm_s  # the attention core hides most of it
    assert est.step_s == pytest.approx(sum(est.parts.values()))
    assert est.tokens_per_second_per_device == pytest.approx(2 * 2 * 8192 / (est.step_s * 8))
    assert "cp 0 %" in est.assumptions[2]


def test_estimate_step_experts_compute_and_expert_tp():
    # Balanced routing: a stage's expert work is shared by all its tp·cp·dp ranks, so each
    # rank computes k experts' worth per local token divided by tp, whatever ep and
    # expert_tp are; expert_tp changes which weights a rank holds and who exchanges tokens.
    mx = pk.ModelSpec.preset("mixtral-8x7b")
    hw = pk.Hardware.preset("h100")
    tokens = 4096  # one micro-batch of one sequence per replica
    matmuls = tokens * pk.flops_per_token(mx) / 2 / (989.5e12 * 0.5)
    computes = [pk.estimate_step(mx, par, hw, efficiency=0.5).compute_s for par in (
        pk.ParallelConfig(dp=4, tp=2), pk.ParallelConfig(dp=4, tp=2, ep=4),
        pk.ParallelConfig(dp=4, tp=2, ep=8, expert_tp=1))]
    assert computes == pytest.approx([computes[0]] * 3, rel=1e-12)
    assert matmuls < computes[0] < 1.3 * matmuls
    # the all-to-all of ep = 8 with expert_tp = 1 spans expert_tp·ep = 8 ranks: one node;
    # with ep = 8 and expert_tp = 2 it spans 16 ranks and crosses nodes
    narrow = pk.ParallelConfig(dp=4, tp=2, ep=8, expert_tp=1)
    wide = pk.ParallelConfig(dp=8, tp=2, ep=8)
    est = pk.estimate_step(mx, narrow, hw, **NO_LATENCY)
    assert est.ep_comm_s == pytest.approx(pk.comm_volume(mx, narrow).ep_bytes / (450e9 * 0.8))
    # wide: 4 of the 8 ep ranks in each node; of the (8-1)/8 of each message a rank sends,
    # the 4/8 bound for the other node go over its NIC (at once with the 3/8 over NVLink)
    wide_bytes = pk.comm_volume(mx, wide).ep_bytes
    est = pk.estimate_step(mx, wide, hw, **NO_LATENCY)
    assert est.ep_comm_s == pytest.approx(wide_bytes / (7 / 8) * (4 / 8) / (50e9 * 0.8))
    # every byte on RDMA
    flat = pk.estimate_step(mx, wide, hw, collective_algorithm="flat", **NO_LATENCY)
    assert flat.ep_comm_s == pytest.approx(wide_bytes / (50e9 * 0.8))
    # experts split ep·expert_tp ways in memory: 8 either way here
    assert pk.parameters_per_device(mx, narrow) == pytest.approx(
        pk.parameters_per_device(mx, pk.ParallelConfig(dp=4, tp=2, ep=4)))
