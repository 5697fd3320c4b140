"""FLOPs, MFU and HFU against the seed guide's tables and published identities.

Every expected value is computed here from the GEMM shapes (2·m·n·p) or from the printed
closed forms, independently of perfkit's code.
"""

import pytest

import perfkit as pk


def gemm(m, n, p):
    """FLOPs of A(m, n) @ B(n, p)."""
    return 2 * m * n * p


def gpt_model(q=1, b_layers=4):
    # A GPT layer in the seed's notation: h = 1024, a = 16, GQA ratio q.
    a = 16
    return pk.ModelSpec(num_layers=b_layers, hidden_size=1024, num_attention_heads=a,
                        num_kv_heads=a // q, seq_length=512, vocab_size=5000, mlp="gpt")


@pytest.mark.parametrize("q", [1, 2, 8])
def test_gpt_table_term_by_term(q):
    m = gpt_model(q)
    b, s, h, v, a = 2, m.seq_length, m.hidden_size, m.vocab_size, m.num_attention_heads
    d = h // a
    table = pk.flops_table(m, micro_batch_size=b).set_index("module")["forward_flops"]
    # Query, key, value MatMul: [b, s, h] x [h, h + 2h/q]  -> (2 + 4/q)·b·s·h²
    qkv = gemm(b * s, h, h) + 2 * gemm(b * s, h, h // q)
    assert table["query, key, value"] == qkv == pytest.approx((2 + 4 / q) * b * s * h * h)
    # QK BatchMatMul [b, a, s, h/a] x [b, a, h/a, s] -> 2·b·s²·h
    assert table["QK^T"] == b * a * gemm(s, d, s) == 2 * b * s * s * h
    # score·V [b, a, s, s] x [b, a, s, h/a] -> 2·b·s²·h
    assert table["score·V"] == b * a * gemm(s, s, d) == 2 * b * s * s * h
    # attention projection [b, s, h] x [h, h] -> 2·b·s·h²
    assert table["attention projection"] == gemm(b * s, h, h) == 2 * b * s * h * h
    # MLP mapping [b, s, h] x [h, 4h] and projection [b, s, 4h] x [4h, h] -> 8·b·s·h² each
    assert table["MLP mapping"] == gemm(b * s, h, 4 * h) == 8 * b * s * h * h
    assert table["MLP projection"] == gemm(b * s, 4 * h, h) == 8 * b * s * h * h
    # lmHead [b, s, h] x [h, v] -> 2·b·s·h·v
    assert table["lmHead projection"] == gemm(b * s, h, v) == 2 * b * s * h * v
    # GPT layer total: (20 + 4/q)·b·s·h² + 4·b·s²·h
    layer = table.drop("lmHead projection").sum()
    assert layer == pytest.approx((20 + 4 / q) * b * s * h * h + 4 * b * s * s * h)


def test_llama_table_term_by_term():
    m = pk.ModelSpec.preset("llama2-13b")
    b, s, h, f = 1, m.seq_length, m.hidden_size, m.ffn_hidden_size
    table = pk.flops_table(m, micro_batch_size=b).set_index("module")["forward_flops"]
    for module in ("MLP mapping", "MLP gate"):
        assert table[module] == gemm(b * s, h, f) == 2 * b * s * h * f
    assert table["MLP projection"] == gemm(b * s, f, h)
    mlp = table[["MLP mapping", "MLP gate", "MLP projection"]].sum()
    assert mlp == 6 * b * s * h * f
    # Llama layer total: (4 + 4/q)·b·s·h² + 4·b·s²·h + 6·b·s·h·ĥ, q = 1 for 13B
    layer = table.drop("lmHead projection").sum()
    assert layer == pytest.approx((4 + 4) * b * s * h * h + 4 * b * s * s * h + 6 * b * s * h * f)


def seed_closed_form(b, L, s, h, v, q, recompute="none"):
    """The seed's three rows: 72·b·L·s·h²·[...]."""
    corr = (60 + 12 / q) / 72
    if recompute == "none":
        bracket = corr + s / (6 * h) + v / (12 * h * L)
    elif recompute == "selective":
        bracket = corr + 4 / 3 * s / (6 * h) + v / (12 * h * L)
    else:
        bracket = 4 / 3 * corr + 4 / 3 * s / (6 * h) + v / (12 * h * L)
    return 72 * b * L * s * h * h * bracket


@pytest.mark.parametrize("q", [1, 4])
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_seed_closed_forms_for_gpt(q, recompute):
    m = gpt_model(q, b_layers=6)
    b = 3
    tokens = b * m.seq_length
    expected = seed_closed_form(b, m.num_layers, m.seq_length, m.hidden_size, m.vocab_size, q,
                                recompute)
    got = pk.hardware_flops(m, tokens, recompute=recompute)
    assert got == pytest.approx(expected, rel=1e-12)
    if recompute == "none":
        assert pk.model_flops(m, tokens) == pytest.approx(expected, rel=1e-12)


def test_seed_convention_for_llama_uses_gpt_mlp():
    m = pk.ModelSpec.preset("llama2-7b")
    L, s, h, v = m.num_layers, m.seq_length, m.hidden_size, m.vocab_size
    seed = seed_closed_form(1, L, s, h, v, 1) / s
    assert pk.flops_per_token(m, convention="seed") == pytest.approx(seed, rel=1e-12)
    # calculators.md: seed formula 4.5884e10 vs exact gated 4.6085e10 per token
    assert seed == pytest.approx(4.5884e10, rel=1e-4)
    exact = 3 * (L * (8 * h * h + 4 * s * h + 6 * h * m.ffn_hidden_size) + 2 * h * v)
    assert pk.flops_per_token(m) == exact == pytest.approx(4.6085e10, rel=1e-4)


def test_published_identities():
    # GPT-3 175B, one 2048-token sequence, with Megatron's vocabulary padded to 51200:
    # 72·s·L·h²·(1 + s/(6h) + V/(12hL)) = 2.204555e15 (calculators.md §1).
    g = pk.ModelSpec.preset("gpt3-175b", vocab_size=51200)
    s, L, h, V = 2048, 96, 12288, 51200
    narayanan = 72 * s * L * h * h * (1 + s / (6 * h) + V / (12 * h * L))
    assert pk.model_flops(g, s) == pytest.approx(narayanan, rel=1e-12)
    assert narayanan == pytest.approx(2.204555e15, rel=1e-6)
    # Megatron HEAD halves the s² term (causal): 2.174868e15 (-1.35 %)
    assert pk.model_flops(g, s, causal=True) == pytest.approx(2.174868e15, rel=1e-6)
    # Llama2-7B per token, causal: 4.2864e10
    assert pk.flops_per_token(pk.ModelSpec.preset("llama2-7b"), causal=True) == \
        pytest.approx(4.2864e10, rel=1e-4)


def test_moe_counts_top_k_experts_and_router():
    dense = pk.ModelSpec(num_layers=2, hidden_size=256, num_attention_heads=4, seq_length=64,
                         vocab_size=1000, ffn_hidden_size=512, mlp="gated")
    moe = dense.replace(num_experts=8, moe_top_k=2)
    h, f, s, E = 256, 512, 64, 8
    per_token_delta = 3 * 2 * (6 * h * f * 2 - 6 * h * f + 2 * h * E)  # 3x fwd, 2 layers
    assert pk.flops_per_token(moe) - pk.flops_per_token(dense) == pytest.approx(per_token_delta)
    assert pk.model_flops(moe, s) == pytest.approx(s * pk.flops_per_token(moe))


def test_selective_modes_and_partial_full_recompute():
    m = pk.ModelSpec.preset("gpt3-175b")
    s, h, L = m.seq_length, m.hidden_size, m.num_layers
    base = pk.model_flops(m, s)
    strict = pk.hardware_flops(m, s, "selective", "strict")
    kor = pk.hardware_flops(m, s, "selective", "korthikanti")
    assert strict - base == pytest.approx(L * 4 * s * s * h)  # one more attention core fwd
    assert kor - base == pytest.approx(L * 12 * s * s * h)  # Korthikanti Table 5 accounting
    # Korthikanti Table 5 quotes HFU/MFU for 175B with selective recompute: 52.8 % / 51.4 %;
    # the ratio (1 + s/(3h) + ...)/(1 + s/(6h) + ...) is reproduced by the korthikanti mode.
    V = m.vocab_size
    ratio = (1 + s / (3 * h) + V / (12 * h * L)) / (1 + s / (6 * h) + V / (12 * h * L))
    assert kor / base == pytest.approx(ratio, rel=1e-9)
    layer_fwd = 24 * h * h * s + 4 * s * s * h  # one GPT layer forward for s tokens
    partial = pk.hardware_flops(m, s, "full", full_recompute_layers=[4, 0])
    assert partial - base == pytest.approx(4 * layer_fwd)
    mixed = pk.hardware_flops(m, s, "selective", full_recompute_layers=10)
    assert mixed - base == pytest.approx(10 * layer_fwd + (L - 10) * 4 * s * s * h)


def test_selective_recompute_without_the_attention_core_adds_no_matrix_flops():
    """SiLU/Mul selective recompute re-runs element-wise work only: just the fully
    recomputed layers add a forward."""
    m = pk.ModelSpec.preset("gpt3-175b")
    s, h = m.seq_length, m.hidden_size
    base = pk.model_flops(m, s)
    layer_fwd = 24 * h * h * s + 4 * s * s * h  # one GPT layer forward for s tokens
    for mode in ("strict", "korthikanti"):
        assert pk.hardware_flops(m, s, "selective", mode, selective_core=False) == base
        mixed = pk.hardware_flops(m, s, "selective", mode, full_recompute_layers=10,
                                  selective_core=False)
        assert mixed - base == pytest.approx(10 * layer_fwd)
    # full recompute is the same whatever selective recompute would have re-run
    assert pk.hardware_flops(m, s, "full", selective_core=False) == \
        pk.hardware_flops(m, s, "full")
    hw = pk.Hardware.preset("a100")
    assert pk.hfu(m, 100.0, hw, "selective", selective_core=False) == \
        pytest.approx(pk.mfu(m, 100.0, hw))
    # which a job's activation accounting is
    assert pk.ActivationModel().recomputes_attention_core
    assert not pk.ActivationModel.mindformers().recomputes_attention_core  # SiLU/Mul
    # a fused attention's core is re-run too (Megatron-LM checkpoints the core attention
    # and runs the fused kernel again): its FLOPs count, as the step model times them
    assert pk.ActivationModel("tensors", flash_attention=True).recomputes_attention_core
    assert not pk.ActivationModel("tensors", flash_attention=True,
                                  selective=("mlp_activation",)).recomputes_attention_core
    assert pk.ActivationModel("tensors", selective=("attention_core", "mlp_activation")
                              ).recomputes_attention_core


def test_mfu_hfu_definitions():
    m = pk.ModelSpec.preset("llama2-7b")
    tps, peak = 4695.0, 400e12
    assert pk.mfu(m, tps, peak) == pytest.approx(pk.flops_per_token(m) * tps / peak)
    hw = pk.Hardware.preset("a100")
    assert pk.mfu(m, tps, hw) == pytest.approx(pk.flops_per_token(m) * tps / 312e12)
    full = pk.hfu(m, tps, peak, recompute="full")
    L, h, s, f = 32, 4096, 4096, 11008
    layer_fwd = 8 * h * h + 4 * s * h + 6 * h * f
    assert full == pytest.approx((pk.flops_per_token(m) + L * layer_fwd) * tps / peak)
    assert pk.hfu(m, tps, peak) == pytest.approx(pk.mfu(m, tps, peak))


@pytest.mark.parametrize("call", [
    lambda m: pk.model_flops(m, 0),
    lambda m: pk.model_flops(m, -5),
    lambda m: pk.mfu(m, 100, 0),
    lambda m: pk.mfu(m, -1, 1e12),
    lambda m: pk.hardware_flops(m, 10, recompute="some"),
    lambda m: pk.hardware_flops(m, 10, selective_mode="lenient"),
    lambda m: pk.hardware_flops(m, 10, "full", full_recompute_layers=99),
    lambda m: pk.model_flops(7e9, 10),
    lambda m: pk.model_flops(m, 10, convention="paper"),
])
def test_flops_bad_input(call):
    with pytest.raises(pk.InvalidArgumentError) as err:
        call(pk.ModelSpec.preset("llama2-7b"))
    assert isinstance(err.value, ValueError) and err.value.parameter


def test_fractional_recompute_layers_rejected():
    with pytest.raises(pk.InvalidArgumentError, match="whole"):
        pk.hardware_flops(pk.ModelSpec.preset("llama2-7b"), 10, "full",
                          full_recompute_layers=2.5)
