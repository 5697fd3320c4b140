"""FLOPs conventions against published figures: PaLM's MFU, GPT-3's training compute, 8N
with full recompute, Megatron's MoE count without the router, shared experts and MLA.

Expected values are written out here from the published formulas and numbers.
"""

import pytest

import perfkit as pk


def palm_540b():
    # PaLM 540B (Chowdhery et al. 2022, Table 1): 118 layers, d_model 18432, 48 heads of
    # 256 (multi-query: one K/V head), SwiGLU with d_ff = 4·d_model, vocabulary 256k,
    # sequence length 2048, shared input/output embeddings.
    return pk.ModelSpec(num_layers=118, hidden_size=18432, num_attention_heads=48,
                        head_dim=256, num_kv_heads=1, seq_length=2048, vocab_size=256000,
                        ffn_hidden_size=4 * 18432, mlp="gated", tied_embeddings=True,
                        name="palm-540b")


def test_palm_540b_mfu_46_2_percent():
    # PaLM App. B and Table 3: 238.3K tokens/s on 6144 TPU v4 chips (275 TFLOP/s bf16 peak
    # each), model FLOPs per token 6N + 12·L·H·Q·T with N = 540.35B -> MFU 46.2 %.
    N, L, H, Q, T = 540.35e9, 118, 48, 256, 2048
    per_token = 6 * N + 12 * L * H * Q * T
    tps_per_chip = 238.3e3 / 6144
    expected = per_token * tps_per_chip / 275e12
    assert round(expected, 3) == 0.462
    m = palm_540b()
    assert pk.flops_per_token(m, convention="palm", num_parameters=N) == pytest.approx(
        per_token, rel=1e-12)
    got = pk.mfu(m, tps_per_chip, 275e12, convention="palm", num_parameters=N)
    assert got == pytest.approx(expected, rel=1e-12)
    # without num_parameters the exact count of this ModelSpec is used (PaLM's 540.35B is
    # within 0.02 % of it); the plain 6N convention drops the attention term
    assert m.num_parameters() == pytest.approx(N, rel=2e-4)
    assert pk.flops_per_token(m, convention="6N", num_parameters=N) == 6 * N


def test_gpt3_training_compute_6nd():
    # Brown et al. 2020, Table D.1: GPT-3 175B trained on 300B tokens, 3.14E+23 FLOPs
    # ("6·N·D", attention ignored), N = 174.6B.
    m = pk.ModelSpec.preset("gpt3-175b")
    total = pk.model_flops(m, 300e9, convention="6N")
    assert total == 6 * m.num_parameters() * 300e9
    assert f"{total:.2E}" == "3.14E+23"


def test_full_recompute_turns_6n_into_8n():
    # Transformer Math 101 (EleutherAI 2023): activation checkpointing adds a forward, 8N.
    m = pk.ModelSpec.preset("llama2-7b")
    N = m.num_parameters()
    assert pk.hardware_flops(m, 1, "full", convention="6N") == pytest.approx(8 * N)
    # half the layers fully recomputed: 6N + N
    half = pk.hardware_flops(m, 1, "selective", convention="6N", full_recompute_layers=16)
    assert half == pytest.approx(7 * N)
    # PaLM's attention term is recomputed too: 8N + 16·L·H·Q·T, and selective recompute
    # (strict) adds one attention-core forward, 4·L·H·Q·T
    L, a, d, s = 32, 32, 128, 4096
    assert pk.hardware_flops(m, 1, "full", convention="palm") == pytest.approx(
        8 * N + 16 * L * a * d * s)
    assert pk.hardware_flops(m, 1, "selective", convention="palm") == pytest.approx(
        6 * N + 12 * L * a * d * s + 4 * L * a * d * s)
    # causal halves PaLM's attention term
    assert pk.flops_per_token(m, causal=True, convention="palm") == pytest.approx(
        6 * N + 6 * L * a * d * s)


def test_moe_parameter_conventions_use_active_parameters():
    mx = pk.ModelSpec.preset("mixtral-8x7b")
    assert pk.flops_per_token(mx, convention="6N") == 6 * 12_879_925_248


def test_mixtral_matches_megatron_num_floating_point_operations_without_router():
    # Megatron-LM training.py num_floating_point_operations (d98e8a64), one sequence of
    # s tokens, MoE without a router GEMM, causal attention core:
    #   tokens·6·[h·f·k·3·L + (h·(q + kv + kv) + q·h)·L + h·V] + s²·6·q·L
    mx = pk.ModelSpec.preset("mixtral-8x7b")
    L, h, f, k, V, s = 32, 4096, 14336, 2, 32000, 4096
    q, kv = 32 * 128, 8 * 128
    megatron = (s * 6 * (h * f * k * 3 * L + (h * (q + 2 * kv) + q * h) * L + h * V)
                + s * s * 6 * q * L)
    assert pk.model_flops(mx, s, causal=True, count_router=False) == pytest.approx(
        megatron, rel=1e-12)
    # the router adds 3·2·h·E per token and layer
    with_router = pk.model_flops(mx, s, causal=True)
    assert with_router - megatron == pytest.approx(s * 3 * 2 * h * 8 * L, rel=1e-9)
    table = pk.flops_table(mx, count_router=False)
    assert "router" not in set(table["module"])


def test_deepseek_v3_per_token_flops_by_hand():
    # DeepSeek-V3: 3 dense layers (FFN 18432), 58 MoE layers of 8 routed + 1 shared experts
    # of 2048, MLA (q rank 1536, kv rank 512, heads 128, d 128 + rope 64, v 128).
    m = pk.ModelSpec.preset("deepseek-v3")
    h, a, dn, dr, dv, rq, rkv, s, V = 7168, 128, 128, 64, 128, 1536, 512, 4096, 129280
    q_w = h * rq + rq * a * (dn + dr)
    kv_w = h * (rkv + dr) + rkv * a * (dn + dv)
    attention = 2 * (q_w + kv_w) + 2 * s * a * (dn + dr) + 2 * s * a * dv + 2 * a * dv * h
    dense_mlp = 2 * 3 * h * 18432
    moe_mlp = 2 * 3 * h * 2048 * (8 + 1) + 2 * h * 256
    forward = 3 * (attention + dense_mlp) + 58 * (attention + moe_mlp) + 2 * h * V
    assert pk.forward_flops(m, 1) == pytest.approx(forward, rel=1e-12)
    avg = pk.layer_forward_flops(m)
    assert avg["total"] * 61 == pytest.approx(forward - 2 * h * V, rel=1e-12)
    assert pk.layer_forward_flops(m, layer="dense")["mlp"] == dense_mlp
    assert pk.layer_forward_flops(m, layer="moe")["experts"] == 2 * 3 * h * 2048 * 8
    # the module table lists the shared experts and the dense layers' MLP separately
    table = pk.flops_table(m)
    assert set(table["per"]) == {"layer", "MoE layer", "dense layer", "model"}
    shared = table[table["module"].str.startswith("shared experts")]["forward_flops"].sum()
    assert shared == 2 * 3 * s * h * 2048


def test_parameter_conventions_have_no_layer_parts_and_num_parameters_needs_them():
    m = pk.ModelSpec.preset("llama2-7b")
    with pytest.raises(pk.InvalidArgumentError, match="per-layer"):
        pk.layer_forward_flops(m, convention="6N")
    with pytest.raises(pk.InvalidArgumentError) as err:
        pk.model_flops(m, 10, num_parameters=7e9)
    assert err.value.parameter == "num_parameters"
    with pytest.raises(pk.InvalidArgumentError):
        pk.mfu(m, 100, 1e12, convention="6N", num_parameters=-1)
