"""Static and activation memory against the seed's tables and published figures."""

import pytest

import perfkit as pk

GB = 1e9
GIB = 2**30


def test_seed_7b_static_memory_example():
    # Seed, "Static Memory": N = 7e9, t = 8 -> 70 GB, 8.75 GB, 22.75 GB.
    n, t = 7e9, 8
    no_parallel = pk.static_memory(n, pk.ParallelConfig(dp=8))
    optimizer_parallel = pk.static_memory(n, pk.ParallelConfig(dp=8, optimizer_shard=8))
    with_accumulation = pk.static_memory(n, pk.ParallelConfig(dp=8, optimizer_shard=8,
                                                              num_micro_batches=4))
    assert no_parallel.total_bytes == (2 + 4 + 4) * n == 70 * GB
    assert optimizer_parallel.total_bytes == 10 * n / t == 8.75 * GB
    assert with_accumulation.total_bytes == 10 * n / t + 2 * n == 22.75 * GB
    assert with_accumulation.gradients_bytes == 2 * n
    # Pipeline parallelism also brings the gradient buffer (the seed's "GA or PP").
    pp = pk.static_memory(n, pk.ParallelConfig(dp=8, pp=2, num_micro_batches=2,
                                               optimizer_shard=8))
    assert pp.gradients_bytes == 2 * n / 2


def test_megatron_and_zero_schemes():
    n, dp = 1e9, 8
    plain = pk.static_memory(n, pk.ParallelConfig(dp=dp), "megatron")
    assert plain.total_bytes == 18 * n
    dist = pk.static_memory(n, pk.ParallelConfig(dp=dp, optimizer_shard=dp), "megatron")
    assert dist.total_bytes == pytest.approx((6 + 12 / dp) * n)
    expected = {0: 16 * n, 1: 4 * n + 12 * n / dp, 2: 2 * n + 14 * n / dp, 3: 16 * n / dp}
    for stage, total in expected.items():
        got = pk.static_memory(n, pk.ParallelConfig(dp=dp, zero_stage=stage), "zero")
        assert got.total_bytes == pytest.approx(total)
    frame = dist.to_frame().set_index("component")
    assert frame.loc["total", "GB"] == pytest.approx(dist.total_bytes / GB)


def test_static_memory_conventions_are_parameters():
    n = 1e9
    fp32_grads = pk.static_memory(n, pk.ParallelConfig(num_micro_batches=2), "mindspore",
                                  gradient_bytes=4)
    assert fp32_grads.gradients_bytes == 4 * n
    forced = pk.static_memory(n, pk.ParallelConfig(), "mindspore", gradient_buffer=True)
    assert forced.total_bytes == 12 * n


def test_parameters_per_device_split():
    m = pk.ModelSpec.preset("llama2-7b")
    b = m.parameter_breakdown()
    assert pk.parameters_per_device(m, pk.ParallelConfig()) == m.num_parameters()
    tp = pk.parameters_per_device(m, pk.ParallelConfig(tp=8))
    h = 4096
    per_layer = (4 * h * h + 3 * h * 11008) / 8 + 2 * h
    assert tp == pytest.approx(32 * per_layer + 2 * 32000 * h / 8 + h)
    pp = pk.parameters_per_device(m, pk.ParallelConfig(pp=4, num_micro_batches=4))
    # first stage: 8 layers + embedding; last: 8 layers + output head + final norm (fuller)
    assert pp == 8 * b["layer"] + b["output"] + b["final_norm"]
    assert pk.parameters_per_device(7e9, pk.ParallelConfig(tp=2, pp=2, num_micro_batches=2)) \
        == 7e9 / 4


# The seed's dynamic-memory table, written out here as printed (bytes per layer).
def seed_row(row, s, b, h, a, t):
    sbh = s * b * h
    return {
        "no parallelism": sbh * (34 + 5 * a * s / h),
        "tensor parallel": sbh * (10 + (24 + 5 * a * s / h) / t),
        "tensor + sequence parallel": sbh * (34 + 5 * a * s / h) / t,
        "tensor parallel + selective recompute": sbh * (10 + 24 / t),
        "tensor + sequence parallel + selective recompute": sbh * 34 / t,
        "full recompute": sbh * 2,
    }[row]


def test_static_memory_of_an_fp32_run():
    """No mixed precision: fp32 weights (the optimizer's own copy), fp32 gradients and
    Adam's two fp32 moments, 4 + 4 + 8 bytes per parameter, sharded as each scheme shards."""
    n, t, dp = 7e9, 8, 8
    plain = pk.static_memory(n, pk.ParallelConfig(dp=dp), dtype="fp32")
    assert plain.total_bytes == (4 + 4 + 4) * n  # no gradient buffer: weights + m + v
    # the seed's 10N/t + 2N becomes 12N/t + 4N: 10.5 GB + 28 GB
    acc = pk.static_memory(n, pk.ParallelConfig(dp=dp, optimizer_shard=t, num_micro_batches=4),
                           dtype="tf32")
    assert acc.total_bytes == pytest.approx(12 * n / t + 4 * n) and acc.gradients_bytes == 4 * n
    assert acc.total_bytes == pytest.approx(38.5 * GB)
    # Megatron's 18 bytes (bf16 weight, fp32 grad, main param, m, v) become 16, no main param
    mega = pk.static_memory(n, pk.ParallelConfig(dp=dp, optimizer_shard=dp), "megatron",
                            dtype="fp32")
    assert mega.total_bytes == pytest.approx((4 + 4 + 8 / dp) * n)
    # ZeRO's 2 + 2 + K with K = 12 becomes 4 + 4 + 8
    expected = {0: 16 * n, 1: 8 * n + 8 * n / dp, 2: 4 * n + 12 * n / dp, 3: 16 * n / dp}
    for stage, total in expected.items():
        got = pk.static_memory(n, pk.ParallelConfig(dp=dp, zero_stage=stage), "zero",
                               dtype="fp32")
        assert got.total_bytes == pytest.approx(total)
    # 16-bit types keep the mixed-precision bytes; explicit bytes still win
    for dtype in (None, "bf16", "fp16", "fp8"):
        assert pk.static_memory(n, pk.ParallelConfig(dp=dp), dtype=dtype).total_bytes == 10 * n
    assert pk.static_memory(n, pk.ParallelConfig(dp=dp), dtype="fp32",
                            weight_bytes=2).total_bytes == (2 + 4 + 4) * n
    with pytest.raises(pk.PerfkitError, match="dtype"):
        pk.static_memory(pk.ModelSpec.preset("llama2-7b"), pk.ParallelConfig(dp=dp),
                         "deepspeed", dtype="fp32")


@pytest.mark.parametrize("row,tp,sp,recompute", [
    ("no parallelism", 1, False, "none"),
    ("tensor parallel", 4, False, "none"),
    ("tensor + sequence parallel", 4, True, "none"),
    ("tensor parallel + selective recompute", 4, False, "selective"),
    ("tensor + sequence parallel + selective recompute", 4, True, "selective"),
    ("full recompute", 4, False, "full"),
])
def test_dynamic_memory_table_rows(row, tp, sp, recompute):
    m = pk.ModelSpec.preset("gpt3-175b")
    b = 2
    got, name = pk.activation_per_layer(m, b, tp, sp, recompute)
    assert name == row
    assert got == pytest.approx(seed_row(row, m.seq_length, b, m.hidden_size,
                                         m.num_attention_heads, tp))


# The table's tensors in an fp32 run: its 16-bit tensors (32·sbh and 4·as²b of the 34·sbh
# and 5·as²b) at 4 bytes per element, the dropout masks (2·sbh, as²b) still 1 byte.
@pytest.mark.parametrize("tp,sp,recompute,want", [
    (1, False, "none", lambda s, b, h, a, t: s * b * h * (64 + 2 + (8 + 1) * a * s / h)),
    (4, True, "none", lambda s, b, h, a, t: s * b * h * (66 + 9 * a * s / h) / t),
    (4, False, "selective", lambda s, b, h, a, t: s * b * h * (16 + 2 + 48 / t)),
    (4, False, "full", lambda s, b, h, a, t: s * b * h * 4),
])
def test_activations_of_an_fp32_run(tp, sp, recompute, want):
    m = pk.ModelSpec.preset("gpt3-175b")
    b = 2
    # "tensors" with the GPT layer's dropout equals the table at 2 bytes (norm inputs 2)...
    sixteen = pk.ActivationModel("tensors", dropout=True)
    got16, _ = pk.activation_per_layer(m, b, tp, sp, recompute, sixteen)
    row = {("none", False): "tensor parallel", ("none", True): "tensor + sequence parallel",
           ("selective", False): "tensor parallel + selective recompute",
           ("full", False): "full recompute"}[(recompute, sp)]
    if tp == 1:
        row = "no parallelism"
    assert got16 == pytest.approx(seed_row(row, m.seq_length, b, m.hidden_size,
                                           m.num_attention_heads, tp))
    # ... and at 4 bytes per element (norm inputs fp32 too) every 16-bit tensor doubles
    fp32 = pk.ActivationModel("tensors", dropout=True, norm_bytes=4.0, element_bytes=4.0)
    got32, _ = pk.activation_per_layer(m, b, tp, sp, recompute, fp32)
    assert got32 == pytest.approx(want(m.seq_length, b, m.hidden_size,
                                       m.num_attention_heads, tp))


def test_the_printed_table_is_16_bit_only():
    with pytest.raises(pk.PerfkitError, match="element_bytes"):
        pk.ActivationModel(element_bytes=4.0)
    with pytest.raises(pk.PerfkitError, match="element_bytes"):
        pk.ActivationModel("tensors", element_bytes=0.0)


def test_korthikanti_figure1_175b():
    # GPT-3 175B, t=8, p=8, v=3, b=1: 66.84375 GiB without recompute, 12.3515625 GiB
    # with sequence parallel + selective recompute (calculators.md §3, Megatron penalty).
    m = pk.ModelSpec.preset("gpt3-175b")
    base = dict(dp=1, tp=8, pp=8, vpp=3, micro_batch_size=1, num_micro_batches=64)
    none = pk.activation_memory(m, pk.ParallelConfig(**base))
    sel = pk.activation_memory(m, pk.ParallelConfig(**base, sequence_parallel=True,
                                                    recompute="selective"))
    assert none.stage == 0 and none.total_bytes / GIB == pytest.approx(66.84375)
    assert sel.total_bytes / GIB == pytest.approx(12.3515625)
    assert none.in_flight == pytest.approx(8 * (1 + 7 / 24))


def test_pipeline_in_flight_and_cap():
    m = pk.ModelSpec.preset("llama2-13b")
    per_layer, _ = pk.activation_per_layer(m, 1, 1, False, "none")
    act = pk.activation_memory(m, pk.ParallelConfig(pp=4, num_micro_batches=8))
    # 1F1B: stage s holds p - s micro-batches of 10 layers
    assert act.per_stage_bytes == pytest.approx(tuple((4 - s) * 10 * per_layer
                                                      for s in range(4)))
    capped = pk.activation_memory(m, pk.ParallelConfig(pp=4, num_micro_batches=4),
                                  stage=0)
    assert capped.total_bytes == pytest.approx(4 * 10 * per_layer)


def test_partial_full_recompute_per_stage():
    # The seed's final Llama2-13B configuration: pp=2, 4 layers fully recomputed on stage 0.
    m = pk.ModelSpec.preset("llama2-13b")
    par = pk.ParallelConfig(dp=8, pp=2, num_micro_batches=128, recompute="selective",
                            recompute_layers=[4, 0])
    act = pk.activation_memory(m, par)
    sbh = 4096 * 5120
    sel, full = 34 * sbh, 2 * sbh
    assert act.per_stage_bytes[0] == pytest.approx(2 * (16 * sel + 4 * full))
    assert act.per_stage_bytes[1] == pytest.approx(1 * 20 * sel)
    assert act.full_recompute_layers == 4


@pytest.mark.parametrize("call,param", [
    (lambda m: pk.static_memory(0, pk.ParallelConfig()), "model"),
    (lambda m: pk.static_memory(-7e9, pk.ParallelConfig()), "model"),
    (lambda m: pk.static_memory(m, pk.ParallelConfig(), scheme="guess"), "scheme"),
    (lambda m: pk.static_memory(m, pk.ParallelConfig(), weight_bytes=-2), "weight_bytes"),
    (lambda m: pk.activation_memory(7e9, pk.ParallelConfig()), "model"),
    (lambda m: pk.activation_memory(m, pk.ParallelConfig(tp=3)), "tp"),
    (lambda m: pk.activation_memory(m, pk.ParallelConfig(pp=2, num_micro_batches=2), stage=5),
     "stage"),
])
def test_memory_bad_input(call, param):
    with pytest.raises(pk.InvalidArgumentError) as err:
        call(pk.ModelSpec.preset("llama2-7b"))
    assert err.value.parameter == param


@pytest.mark.parametrize("tp,sp,recompute", [(1, False, "none"), (8, False, "none"),
                                             (8, True, "none"), (8, False, "selective"),
                                             (8, True, "selective"), (8, True, "full")])
def test_tensor_accounting_equals_the_table_for_a_gpt_layer(tp, sp, recompute):
    m = pk.ModelSpec.preset("gpt3-175b")
    table = pk.activation_per_layer(m, 1, tp, sp, recompute)[0]
    tensors = pk.activation_per_layer(m, 1, tp, sp, recompute, pk.ActivationModel("tensors"))
    assert tensors[0] == pytest.approx(table)
    assert "tensor accounting" in tensors[1] or recompute == "full"


def test_tensor_accounting_for_mindformers_llama():
    # Llama2-13B layer, b = 1, flash attention, no dropout, fp32 norm inputs:
    # kept whole: attention input 2 + MLP input 2 + two fp32 norm inputs 4 + 4 = 12 sbh;
    # split by tp: Q 2, K 2, V 2, projection input 2 = 8 sbh; gated MLP: gate, up, SiLU
    # and product outputs 4 x 2·sbf; softmax statistics 4·a·s·b bytes (fp32).
    m = pk.ModelSpec.preset("llama2-13b")
    s, h, f, a = 4096, 5120, 13824, 40
    sbh, sbf = s * h, s * f
    am = pk.ActivationModel.mindformers()
    none = 12 * sbh + 8 * sbh + 8 * sbf + 4 * a * s
    assert pk.activation_per_layer(m, 1, 1, False, "none", am)[0] == pytest.approx(none)
    # the seed's select_recompute of SiLU and Mul drops their two outputs
    sel = pk.activation_per_layer(m, 1, 1, False, "selective", am)[0]
    assert sel == pytest.approx(none - 4 * sbf)
    tp2 = pk.activation_per_layer(m, 1, 2, False, "none", am)[0]
    assert tp2 == pytest.approx(12 * sbh + (8 * sbh + 8 * sbf + 4 * a * s) / 2)


def test_tensor_accounting_gqa_shrinks_k_and_v():
    mha = pk.ModelSpec.preset("llama2-13b")
    gqa = mha.replace(num_kv_heads=5)  # q = 8
    am = pk.ActivationModel("tensors", flash_attention=True)
    diff = (pk.activation_per_layer(mha, 1, 1, False, "none", am)[0]
            - pk.activation_per_layer(gqa, 1, 1, False, "none", am)[0])
    assert diff == pytest.approx((4 - 4 / 8) * 4096 * 5120)  # K and V: 2 + 2 -> 2/8 + 2/8


def test_activation_model_rules():
    with pytest.raises(pk.InvalidArgumentError, match="accounting"):
        pk.ActivationModel("guess")
    with pytest.raises(pk.InvalidArgumentError, match="tensors"):
        pk.ActivationModel(selective=("mlp_activation",))
    with pytest.raises(pk.InvalidArgumentError, match="selective"):
        pk.ActivationModel("tensors", selective=("everything",))
