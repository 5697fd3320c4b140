"""Communication volume and the step estimate."""

import dataclasses

import numpy as np
import pytest

import perfkit as pk
from perfkit.calc.layout_rows import layout_columns, stage_rows
from perfkit.calc.timing import step_times


def small_model(**kw):
    base = dict(num_layers=8, hidden_size=1024, num_attention_heads=16, seq_length=2048,
                vocab_size=32000, mlp="gated", ffn_hidden_size=2816)
    return pk.ModelSpec(**{**base, **kw})


def test_dp_allreduce_ring_volume():
    m = small_model()
    par = pk.ParallelConfig(dp=8)
    vol = pk.comm_volume(m, par)
    psi = m.num_parameters() * 2  # fp16 gradients
    assert vol.dp_bytes == pytest.approx(2 * 7 / 8 * psi)
    assert vol.tp_bytes == vol.pp_bytes == vol.ep_bytes == 0
    zero3 = pk.comm_volume(m, par.replace(zero_stage=3))
    assert zero3.dp_bytes == pytest.approx(3 * 7 / 8 * psi)  # ZeRO §7: 3Ψ vs 2Ψ


def test_tp_volume_with_and_without_sp():
    m = small_model()
    b, s, h, t, mb = 2, 2048, 1024, 4, 3
    par = pk.ParallelConfig(tp=t, micro_batch_size=b, num_micro_batches=mb)
    bsh = b * s * h * 2
    per_rank = 4 * 8 * mb * 2 * (t - 1) / t * bsh  # 4 all-reduces per layer per micro-batch
    assert pk.comm_volume(m, par).tp_bytes == pytest.approx(per_rank)
    sp = pk.comm_volume(m, par.replace(sequence_parallel=True))
    assert sp.tp_bytes == pytest.approx(per_rank)  # AG + RS move what the AR moved
    assert set(sp.to_frame()["collective"]) == {"all-gather", "reduce-scatter"}
    full = pk.comm_volume(m, par.replace(recompute="full"))
    assert full.tp_bytes == pytest.approx(per_rank * 6 / 4)  # recompute repeats fwd 2


def test_pp_and_ep_volume():
    m = small_model(num_experts=4, moe_top_k=2)
    b, s, h = 1, 2048, 1024
    par = pk.ParallelConfig(dp=4, pp=2, vpp=2, num_micro_batches=4, ep=4)
    vol = pk.comm_volume(m, par)
    assert vol.pp_bytes == pytest.approx(2 * 4 * 2 * b * s * h * 2)
    assert vol.ep_bytes == pytest.approx(4 * 4 * 4 * 2 * b * s * h * 2 * 3 / 4)
    frame = vol.to_frame()
    assert frame["bytes_per_device"].sum() == pytest.approx(vol.total_bytes)


def test_estimate_step_parts_add_up_and_follow_inputs():
    """The step model's parts add up to the step; at a what-if's round numbers
    (every matrix product at 50 % of the A100's 312 TFLOP/s, every link at 80 %) the
    layers' compute is at least their matrix products' FLOPs at that rate (the memory-bound
    kernels come on top), and the sharded reduction moves what ZeRO-1 moves."""
    m = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("a100")
    par = pk.ParallelConfig(dp=8, micro_batch_size=1, num_micro_batches=4, optimizer_shard=8,
                            recompute="full")
    est = pk.estimate_step(m, par, hw, efficiency=0.5, comm_efficiency=0.8)
    assert est.step_s == pytest.approx(sum(est.parts.values()), rel=1e-12)
    assert est.step_s == pytest.approx(est.compute_s + est.recompute_s + est.bubble_s
                                       + est.exposed_comm_s + est.optimizer_s
                                       + est.overhead_s, rel=1e-12)
    # 4 sequences per replica, the model's FLOPs plus one more forward of every layer
    tokens = 4 * 4096
    hw_flops = pk.model_flops(m, tokens) + tokens * 32 * (
        8 * 4096**2 + 4 * 4096 * 4096 + 6 * 4096 * 11008)
    matmuls = hw_flops / (312e12 * 0.5)
    assert matmuls < est.compute_s + est.recompute_s < 1.2 * matmuls
    assert est.bubble_s == 0
    # ZeRO-1: reduce-scatter the 2-byte gradients, all-gather the 2-byte weights, 7/8 each
    n = m.num_parameters()
    assert est.dp_comm_s == pytest.approx(2 * 7 / 8 * n * 2 / (300e9 * 0.8), rel=1e-3)
    assert est.tokens_per_second_per_device == pytest.approx(32 * 4096 / (est.step_s * 8))
    assert est.mfu == pytest.approx(pk.mfu(m, est.tokens_per_second_per_device, hw))
    assert est.hfu > est.mfu
    assert est.fits and est.memory_bytes < est.memory_limit_bytes
    assert any("every matrix product at 50 %" in a for a in est.assumptions)
    hidden = pk.estimate_step(m, par, hw, efficiency=0.5, comm_efficiency=0.8,
                              dp_overlap=1.0)
    # hidden, the traffic still slows the compute beside it by the published 18.9 %
    assert hidden.step_s == pytest.approx(est.step_s - (1 - 0.189) * est.parts["dp_comm"])
    slowed = pk.estimate_step(m, par, hw, efficiency=0.5, comm_efficiency=0.8,
                              overhead_s=0.25)
    assert slowed.step_s == pytest.approx(est.step_s + 0.25) and slowed.overhead_s == 0.25
    tight = pk.estimate_step(m, par, hw, memory_limit_bytes=1e9)
    assert not tight.fits
    frame = est.to_frame()
    assert list(frame["part"]) == list(pk.calc.timing.PART_NAMES)
    assert frame["share"].sum() == pytest.approx(1.0)


def test_estimate_step_is_predicts_uncalibrated_step():
    """One step model: estimate_step at its defaults is ``predict(None, ...)``, parts,
    memory and MFU, for a dense and a MoE layout, uneven stages included."""
    h100 = pk.Hardware.preset("h100")
    cases = [(pk.ModelSpec.preset("llama2-13b"),
              pk.ParallelConfig(dp=2, tp=4, pp=2, num_micro_batches=8, recompute="selective",
                                sequence_parallel=True, optimizer_shard=2)),
             (pk.ModelSpec.preset("mixtral-8x7b"),
              pk.ParallelConfig(dp=4, tp=2, ep=4, pp=2, num_micro_batches=8)),
             (pk.ModelSpec.preset("llama2-13b", num_layers=38),
              pk.ParallelConfig(dp=2, pp=4, num_micro_batches=8))]
    for model, par in cases:
        est = pk.estimate_step(model, par, h100, static_scheme="megatron")
        pred = pk.plan.predict(None, model, par, h100, static_scheme="megatron")
        assert est.step_s == pytest.approx(pred.step_s, rel=1e-12)
        assert dict(est.parts) == pytest.approx(dict(pred.parts), rel=1e-12)
        assert est.memory_bytes == pytest.approx(pred.memory_bytes, rel=1e-12)
        assert est.mfu == pytest.approx(pred.mfu, rel=1e-12)
        assert est.fits == pred.fits


def test_estimate_step_uses_inter_node_bandwidth_across_nodes():
    m = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("h100")
    intra = pk.estimate_step(m, pk.ParallelConfig(dp=8), hw, comm_efficiency=0.8)
    inter = pk.estimate_step(m, pk.ParallelConfig(dp=16), hw, comm_efficiency=0.8)
    assert intra.dp_comm_s == pytest.approx(2 * 7 / 8 * m.num_parameters() * 2 / (450e9 * .8),
                                            rel=1e-3)
    # dp 16 = 8 ranks in each of two DGX H100: hierarchical (reduce-scatter and
    # all-gather over NVLink, each rank's 1/8 shard all-reduced across the two nodes)
    grads = m.num_parameters() * 2
    assert inter.dp_comm_s == pytest.approx(2 * 7 / 8 * grads / (450e9 * .8)
                                            + 2 * 1 / 2 * grads / 8 / (50e9 * .8), rel=1e-3)
    # one flat ring paced by the network: every byte at a GPU's NIC share
    flat = pk.estimate_step(m, pk.ParallelConfig(dp=16), hw, comm_efficiency=0.8,
                            collective_algorithm="flat")
    assert flat.dp_comm_s == pytest.approx(2 * 15 / 16 * grads / (50e9 * .8), rel=1e-3)
    # without a what-if, each tier at its own default efficiency (0.65 inside, 0.9 across)
    tiers = pk.estimate_step(m, pk.ParallelConfig(dp=16), hw)
    assert tiers.dp_comm_s == pytest.approx(2 * 7 / 8 * grads / (450e9 * .65)
                                            + 2 * 1 / 2 * grads / 8 / (50e9 * .9), rel=1e-3)


@pytest.mark.parametrize("kwargs,param", [
    ({"efficiency": 0}, "efficiency"),
    ({"efficiency": 1.5}, "efficiency"),
    ({"comm_efficiency": -0.1}, "comm_efficiency"),
    ({"dp_overlap": 2}, "dp_overlap"),
    ({"memory_reserve": -1}, "memory_reserve"),
    ({"memory_limit_bytes": 0}, "memory_limit_bytes"),
    ({"overhead_s": -1}, "overhead_s"),
    ({"static_scheme": "x"}, "scheme"),
    ({"behaviour": "x"}, "name"),
    ({"rates": 0.5}, "rates"),
])
def test_estimate_step_bad_input(kwargs, param):
    m = pk.ModelSpec.preset("llama2-7b")
    with pytest.raises(pk.InvalidArgumentError) as err:
        pk.estimate_step(m, pk.ParallelConfig(), pk.Hardware.preset("a100"), **kwargs)
    assert err.value.parameter == param


def test_estimate_step_rejects_wrong_types_and_rules():
    m = pk.ModelSpec.preset("llama2-7b")
    with pytest.raises(pk.InvalidArgumentError, match="hardware"):
        pk.estimate_step(m, pk.ParallelConfig(), "a100")
    with pytest.raises(pk.ParallelConfigError, match="tp"):
        pk.estimate_step(m, pk.ParallelConfig(tp=5), pk.Hardware.preset("a100"))


def test_pipeline_links_cross_nodes_once_the_job_does():
    """dp=8, pp=2 on 8-device nodes: the last stage (ranks 8-15, the slowest: it runs the
    output head) receives each micro-batch's activations from another node; dp=4, pp=2
    keeps both stages in one node."""
    m = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("h100")
    message = 1 * 4096 * 4096 * 2  # b·s·h in 16 bits
    across = pk.estimate_step(m, pk.ParallelConfig(dp=8, pp=2, num_micro_batches=8), hw,
                              comm_efficiency=0.8)
    latency = 10e-6  # per message
    assert across.pp_comm_s == pytest.approx(8 * (message / (50e9 * 0.8) + latency))
    inside = pk.estimate_step(m, pk.ParallelConfig(dp=4, pp=2, num_micro_batches=8), hw,
                              comm_efficiency=0.8)
    assert inside.pp_comm_s == pytest.approx(8 * (message / (450e9 * 0.8) + latency))
    assert across.pp_comm_s > 5 * inside.pp_comm_s


def test_zero3_gathers_weights_in_their_own_dtype():
    m = small_model()
    par = pk.ParallelConfig(dp=4, zero_stage=3)
    vol = pk.comm_volume(m, par, dtype_bytes=2, gradient_bytes=4).to_frame()
    gather = vol[vol["collective"].str.startswith("all-gather")].iloc[0]
    assert gather["message_bytes"] == m.num_parameters() * 2
    scatter = vol[vol["collective"].str.startswith("reduce-scatter")].iloc[0]
    assert scatter["message_bytes"] == m.num_parameters() * 4


def _small_parameters() -> float:
    """small_model's parameters counted by hand: the embedding and the untied head (V·h
    each), per layer q, k, v and output projections (4h²), the gated MLP (3·h·ffn) and
    two RMSNorm weights, and the final norm."""
    h, ffn, vocab, layers = 1024, 2816, 32000, 8
    return 2 * vocab * h + layers * (4 * h * h + 3 * h * ffn + 2 * h) + h


def _step_model_dp(model, par, hw, dtype=None):
    """The calibrated step model's data-parallel time (default rates) and its link."""
    rates = pk.calc.Rates()
    params = {"dense": np.array([_small_parameters()]), "experts": np.array([0.0])}
    out = step_times(model, hw, rates, layout_columns(par), stage_rows(model, par),
                     params=params, dtype=dtype,
                     static_scheme="megatron")
    return float(out["dp_comm_raw_s"][0]), hw.intra_node_bandwidth * rates.link("dp", True), \
        rates.link_latency_s


@pytest.mark.parametrize(("dtype", "grad_bytes"),
                         [("bf16", 4), (None, 4), ("fp16", 2), ("fp32", 4)])
def test_megatron_gradient_size_follows_the_run_type(dtype, grad_bytes):
    """Megatron-LM's gradient buffer is fp32 only with accumulate_allreduce_grads_in_fp32,
    off by default and turned on by arguments.py for bf16 alone: an fp16 run all-reduces
    fp16 gradients. estimate_step and the step model both move n·g·2(d−1)/d bytes."""
    m, hw, dp = small_model(), pk.Hardware.preset("h100"), 8
    par = pk.ParallelConfig(dp=dp)
    expected = _small_parameters() * grad_bytes * 2 * (dp - 1) / dp
    est = pk.estimate_step(m, par, hw, static_scheme="megatron", dtype=dtype,
                           comm_efficiency=0.8)
    assert est.dp_comm_s == pytest.approx(expected / (hw.intra_node_bandwidth * 0.8)
                                          + 10e-6)  # one collective's latency
    raw, bw, latency = _step_model_dp(m, par, hw, dtype)
    assert raw == pytest.approx(expected / bw + latency)


def test_sharded_megatron_scatters_fp32_gradients_and_gathers_16bit_weights():
    """Megatron-LM's distributed optimizer reduce-scatters its fp32 gradient buffer and
    all-gathers the bf16 parameter buffer: (4 + 2)·n·(d−1)/d bytes, not 2·4·n·(d−1)/d."""
    m, hw, dp = small_model(), pk.Hardware.preset("h100"), 8
    par = pk.ParallelConfig(dp=dp, optimizer_shard=dp)
    n, ring = _small_parameters(), (dp - 1) / dp
    frame = pk.comm_volume(m, par, gradient_bytes=4).to_frame().set_index("collective")
    assert frame.loc["reduce-scatter (gradients)", "message_bytes"] == n * 4
    assert frame.loc["all-gather (parameters)", "message_bytes"] == n * 2
    est = pk.estimate_step(m, par, hw, static_scheme="megatron", comm_efficiency=0.8)
    assert est.dp_comm_s == pytest.approx(n * (4 + 2) * ring / (hw.intra_node_bandwidth * 0.8)
                                          + 2 * 10e-6)  # two collectives' latency
    raw, bw, latency = _step_model_dp(m, par, hw)
    assert raw == pytest.approx(n * (4 + 2) * ring / bw + 2 * latency)


def test_mlp_selective_recompute_adds_no_gemm_flops():
    """SiLU/Mul recompute (MindFormers' select_recompute) reruns element-wise work only;
    Korthikanti's selective recompute reruns the attention core: with flash attention and
    every matrix product at 50 % of the 910B's peak, ``4·s·h`` FLOPs per token per layer,
    halved by the causal mask."""
    m = pk.ModelSpec.preset("llama2-13b")
    hw = pk.Hardware.preset("ascend-910b")
    par = pk.ParallelConfig(dp=8, pp=2, num_micro_batches=16, recompute="selective")
    mlp_am = pk.ActivationModel.mindformers()  # flash attention, SiLU/Mul recomputed
    core_am = dataclasses.replace(mlp_am, selective=("attention_core",))
    plain = pk.estimate_step(m, par.replace(recompute="none"), hw, efficiency=0.5,
                             activation_model=core_am)
    mlp_sel = pk.estimate_step(m, par, hw, efficiency=0.5, activation_model=mlp_am)
    core_sel = pk.estimate_step(m, par, hw, efficiency=0.5, activation_model=core_am)
    assert mlp_sel.compute_s == pytest.approx(plain.compute_s)
    assert 0 < mlp_sel.recompute_s < 0.02 * mlp_sel.compute_s  # element-wise reruns only
    assert mlp_sel.hfu == pytest.approx(mlp_sel.mfu)
    tokens = 16 * 4096
    core = 4 * 4096 * 5120  # attention core forward per token
    assert core_sel.recompute_s == pytest.approx(tokens * 20 * core / 2 / (320e12 * 0.5))


def test_gradient_bytes_reach_static_memory_too():
    m = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("a100")
    par = pk.ParallelConfig(dp=8, num_micro_batches=2)
    two = pk.estimate_step(m, par, hw)
    four = pk.estimate_step(m, par, hw, gradient_bytes=4)
    assert four.static_bytes - two.static_bytes == pytest.approx(2 * m.num_parameters())


def test_an_fp32_run_sends_and_keeps_four_bytes():
    """dtype="fp32" (no mixed precision): 4-byte gradients in the data-parallel reduction,
    4-byte activations in the tensor-parallel collectives, and fp32 static memory."""
    m = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("a100")
    par = pk.ParallelConfig(dp=4, tp=2, num_micro_batches=2, optimizer_shard=4)
    half = pk.estimate_step(m, par, hw, dtype="bf16")
    full = pk.estimate_step(m, par, hw, dtype="fp32")
    assert full.dp_comm_s == pytest.approx(2 * half.dp_comm_s, rel=1e-3)
    # twice the bytes; the latency (10 µs for each of 32 layers x 2 micro-batches x 8
    # all-reduce halves) is paid once
    assert full.tp_comm_s == pytest.approx(2 * half.tp_comm_s - 32 * 2 * 8 * 10e-6)
    n = m.num_parameters() / 2  # tp = 2 halves the (tp-split) parameters on each device
    assert full.static_bytes == pytest.approx(
        pk.static_memory(m, par, dtype="fp32").total_bytes)
    # MindSpore scheme, fp32: 12N/t + 4N (gradient buffer: accumulating) on the device
    per_device = pk.calc.memory.parameters_per_device(m, par)
    assert per_device == pytest.approx(n, rel=0.01)
    assert full.static_bytes == pytest.approx(12 * per_device / 4 + 4 * per_device)
    assert half.static_bytes == pytest.approx(10 * per_device / 4 + 2 * per_device)


def test_float8_weight_gathers_move_one_byte_per_parameter():
    """torchao's float8 all-gather under FSDP2 (``Rates.param_gather_bytes=1``): the
    weights come back in one byte each, in the volume and in the step model."""
    m = small_model()
    par = pk.ParallelConfig(dp=4, zero_stage=3, optimizer_shard=4)
    n = _small_parameters()
    frame = pk.comm_volume(m, par, param_gather_bytes=1).to_frame().set_index("collective")
    assert frame.loc["all-gather (parameters, fwd and bwd)", "message_bytes"] == n * 1
    assert frame.loc["reduce-scatter (gradients)", "message_bytes"] == n * 2
    hw = pk.Hardware.preset("h100")
    terms = {"comm_efficiency": 0.8, "rates": pk.Rates(link_latency_s=0.0)}
    two = pk.estimate_step(m, par, hw, **terms)
    float8 = pk.estimate_step(m, par, hw, comm_efficiency=0.8,
                              rates=pk.Rates(link_latency_s=0.0, param_gather_bytes=1.0))
    ring = 3 / 4 / (450e9 * 0.8)
    assert two.dp_comm_s == pytest.approx(n * (2 + 2) * ring)  # 2-byte grads + weights
    assert float8.dp_comm_s == pytest.approx(n * (2 + 1) * ring)
