"""The calibrated step model: its structure against independent arithmetic, every knob, the
band, and search ranking with the same numbers as predict."""

import numpy as np
import pytest

import perfkit as pk
from perfkit import plan
from perfkit.calc.gemm_rate import SURFACES
from perfkit.calc.rates import Rates, size_efficiency
from perfkit.calc.timing import gemm_seconds, layer_costs, memory_seconds

H100 = pk.Hardware.preset("h100")
LLAMA = pk.ModelSpec.preset("llama2-13b")


def test_size_curve_reproduces_calculons_a100_table():
    """calculon-ai/calculon systems/a100_80g.json: GEMM efficiency 0.6 at 1 GFLOP, 0.9 at
    16, 0.95 at 128; memory 0.75 at 10 MB, 0.9 at 100 MB."""
    r = Rates().resolved(None)  # no device: the curve as fitted to the table
    assert r.gemm_efficiency == 0.95
    for gflop, table in ((1, 0.6), (16, 0.9), (128, 0.95)):
        assert size_efficiency(gflop * 1e9, r.gemm_efficiency, r.gemm_half_flops) \
            == pytest.approx(table, abs=0.03)
    for mb, table in ((10, 0.75), (100, 0.9)):
        assert size_efficiency(mb * 1e6, r.memory_efficiency, r.memory_half_bytes) \
            == pytest.approx(table, abs=0.03)


def test_gemm_and_memory_seconds_are_the_documented_formulas():
    r = Rates(gemm_efficiency=0.8, gemm_half_flops=1e9, memory_efficiency=0.7,
              memory_half_bytes=2e6)
    peak, bw = 989.5e12, 3.35e12
    f, b = 2 * 4096 * 5120 * 13824, 2 * (4096 * 5120 + 5120 * 13824 + 4096 * 13824)
    assert gemm_seconds(f, b, peak, bw, r) == pytest.approx((f + 1e9) / (0.8 * peak)
                                                          + b / (0.7 * bw))
    assert gemm_seconds(f, b, peak, bw, r.replace(gemm_memory="max")) \
        == pytest.approx(max((f + 1e9) / (0.8 * peak), b / (0.7 * bw)))
    assert memory_seconds(1e8, bw, r) == pytest.approx((1e8 + 2e6) / (0.7 * bw))
    # wider layers run larger GEMMs: closer to e_max
    small = layer_costs(pk.ModelSpec.preset("llama2-7b").replace(
        hidden_size=1024, ffn_hidden_size=2816, num_attention_heads=8, num_kv_heads=8),
        H100, r)
    assert small.fwd > 0


def test_the_memory_bound_kernels_own_efficiency():
    """``elementwise_efficiency`` times the memory-bound kernels alone: a memory-bound call
    is ``(B + B½)/(e_vec·bw)``, the GEMMs' byte term and the optimizer keep
    ``memory_efficiency``; ``scaled`` scales it with the others (capped at 1); a share
    outside (0, 1] is refused by name."""
    r = Rates(gemm_efficiency=0.8, gemm_half_flops=1e9, memory_efficiency=0.7,
              memory_half_bytes=2e6)
    own = r.replace(elementwise_efficiency=0.2)
    peak, bw = 989.5e12, 3.35e12
    f, b = 2 * 4096 * 5120 * 13824, 2 * (4096 * 5120 + 5120 * 13824 + 4096 * 13824)
    assert memory_seconds(1e8, bw, own) == pytest.approx((1e8 + 2e6) / (0.2 * bw))
    assert gemm_seconds(f, b, peak, bw, own) == pytest.approx(gemm_seconds(f, b, peak, bw, r))
    assert r.vector_efficiency == 0.7 and own.vector_efficiency == 0.2
    assert own.scaled(0.5).elementwise_efficiency == pytest.approx(0.1)
    assert own.scaled(10).elementwise_efficiency == 1.0
    assert r.scaled(0.5).elementwise_efficiency is None
    # the step: only the memory-bound kernels' time moves, the optimizer's does not
    par = pk.ParallelConfig(dp=8, micro_batch_size=1, num_micro_batches=4)
    base = plan.predict(None, LLAMA, par, H100)
    slow = plan.predict(None, LLAMA, par, H100, overrides={"elementwise_efficiency": 0.2})
    assert slow.parts["optimizer"] == pytest.approx(base.parts["optimizer"], rel=1e-12)
    assert slow.parts["compute"] > base.parts["compute"]
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(pk.PerfkitError, match="elementwise_efficiency"):
            Rates(elementwise_efficiency=bad)


def _pred(par, **kw):
    return plan.predict(None, LLAMA, par, H100, **kw)


def test_parts_add_up_and_the_band_contains_the_step():
    par = pk.ParallelConfig(dp=4, tp=2, pp=2, num_micro_batches=8, recompute="selective",
                            sequence_parallel=True, optimizer_shard=4)
    p = _pred(par)
    assert sum(p.parts.values()) == pytest.approx(p.step_s)
    assert p.low_s < p.step_s < p.high_s
    assert not p.calibrated and any("uncalibrated" in n for n in p.notes)
    frame = p.to_frame()
    assert list(frame["part"])[-3:] == ["step", "low", "high"]
    assert frame.set_index("part").loc["step", "seconds"] == pytest.approx(p.step_s)
    tokens = par.global_batch_size * LLAMA.seq_length
    assert p.tokens_per_second_per_device == pytest.approx(tokens / (p.step_s * 16))


def test_every_knob_moves_the_prediction_the_way_it_should():
    base = pk.ParallelConfig(dp=4, tp=2, pp=2, num_micro_batches=8, optimizer_shard=1)
    p0 = _pred(base)
    # more micro-batches: smaller bubble share
    more = _pred(base.replace(num_micro_batches=32))
    assert more.parts["bubble"] / more.step_s < p0.parts["bubble"] / p0.step_s
    # interleaving: bubble / vpp
    inter = _pred(base.replace(vpp=2))
    assert inter.parts["bubble"] == pytest.approx(p0.parts["bubble"] / 2, rel=0.05)
    # full recompute: a recompute part, slower step
    full = _pred(base.replace(recompute="full"))
    assert full.parts["recompute"] > 0 and full.step_s > p0.step_s
    # per-stage full recompute: the first stage recomputes, it sets the pace
    partial = _pred(base.replace(recompute="full", recompute_layers=(10, 0)))
    assert p0.step_s < partial.step_s < full.step_s
    # optimizer sharding: a quarter of the update per device
    shard = _pred(base.replace(optimizer_shard=4))
    assert shard.parts["optimizer"] < 0.3 * p0.parts["optimizer"]
    # tensor parallelism off: no tp traffic
    assert _pred(base.replace(tp=1, dp=8)).parts["tp_comm"] == 0
    # sequence parallelism: the backward all-gathers again (sp_ag_redo)
    sp = _pred(base.replace(sequence_parallel=True))
    no_redo = _pred(base.replace(sequence_parallel=True), overrides={"sp_ag_redo": False})
    assert sp.parts["tp_comm"] > no_redo.parts["tp_comm"]
    # communication recompute adds all-gathers in the backward
    comm = _pred(base, comm_layers=(20, 20))
    assert comm.parts["tp_comm"] > p0.parts["tp_comm"]
    # global batch and sequence length
    assert _pred(base, global_batch_size=64).parallel.num_micro_batches == 16
    assert _pred(base, seq_length=2048).model.seq_length == 2048
    # uneven stages: the heavier stage sets the pace
    assert _pred(base, stage_layers=(24, 16)).step_s > p0.step_s
    # overlapping the gradient reduction hides part of it
    dp_model = pk.ParallelConfig(dp=16, num_micro_batches=2)
    assert _pred(dp_model, overrides={"dp_buckets": 8}).parts["dp_comm"] \
        < _pred(dp_model).parts["dp_comm"]


def test_context_and_expert_parallelism():
    mixtral = pk.ModelSpec.preset("mixtral-8x7b")
    par = pk.ParallelConfig(dp=8, tp=2, ep=4, num_micro_batches=4)
    p = plan.predict(None, mixtral, par, H100)
    assert p.parts["ep_comm"] > 0
    long = pk.ModelSpec.preset("llama3-8b").replace(seq_length=32768)
    cp = plan.predict(None, long, pk.ParallelConfig(dp=2, tp=2, cp=4, num_micro_batches=2),
                      H100, activation_model=pk.ActivationModel("tensors", flash_attention=True,
                                                                dropout=False))
    assert cp.parts["cp_comm"] >= 0 and cp.step_s > 0


def test_pipeline_messages_are_scattered_over_tensor_parallel_ranks():
    """Narayanan et al. 2021 §4.1: each of the m·(2v − 1) messages the first stage receives
    is b·s·h/t bytes, with or without sequence parallelism."""
    r = Rates()
    b, s, h, m, t = 1, LLAMA.seq_length, LLAMA.hidden_size, 8, 4
    par = pk.ParallelConfig(dp=1, tp=t, pp=4, num_micro_batches=m)
    # dp·tp·2 = 8 ranks fit in a node: intra-node links
    message = b * s * h * 2 / t / (H100.intra_node_bandwidth * r.intra_node_efficiency) \
        + r.link_latency_s
    for sp in (False, True):
        p = _pred(par.replace(sequence_parallel=sp))
        # the slowest stage is the last (output head): it receives one message per
        # micro-batch forward
        assert p.parts["pp_comm"] == pytest.approx(m * message, rel=1e-9)


def test_optimizer_step_is_memory_bound_arithmetic():
    r = Rates()
    par = pk.ParallelConfig(dp=8, num_micro_batches=2, optimizer_shard=8)
    params = max(st["total"] for st in pk.calc.stage_parameters(LLAMA, par))
    p = _pred(par)
    expected = (params / 8 * r.optimizer_bytes_per_param + r.memory_half_bytes) \
        / (r.memory_efficiency * H100.memory_bandwidth)
    assert p.parts["optimizer"] == pytest.approx(expected)


def test_recompute_styles_differ_by_the_mlp_output_projection():
    """'needed' reruns the forward without the MLP down projection and its add."""
    r = Rates()
    lc = layer_costs(LLAMA, H100, r, tp=1)
    n, hh, f = LLAMA.seq_length, LLAMA.hidden_size, LLAMA.ffn_hidden_size
    # the down projection x (n × f) · Wᵀ on the H100's measured bf16 surface
    sf = SURFACES["hopper-bf16"]
    e = sf.e_max * n / (n + sf.m_half) * hh / (hh + sf.n_half) * f / (f + sf.k_half)
    w2 = sf.fixed_s + max(2 * n * f * hh / (e * H100.peak()), 2 * (n * f + f * hh + n * hh)
                          / (sf.byte_efficiency * H100.memory_bandwidth))
    add = memory_seconds(6 * n * hh, H100.memory_bandwidth, r)
    assert lc.rec_all - lc.rec_needed == pytest.approx(w2 + add)
    assert lc.rec_all == pytest.approx(lc.fwd)


def test_search_with_a_calibration_ranks_with_predict():
    """Rows of search(calibration=...) equal predict() for the same layout, dense and MoE."""
    cal = plan.calibrate(50.0, LLAMA, pk.ParallelConfig(dp=8, pp=2, num_micro_batches=64),
                         pk.Hardware.preset("ascend-910b"),
                         activation_model=pk.ActivationModel.mindformers())
    frame = plan.search(LLAMA, pk.Hardware.preset("ascend-910b"), 16, 1024, calibration=cal,
                        include_rejected=True)
    assert {"low_s", "high_s", "recompute_s", "optimizer_s"} <= set(frame.columns)
    rng = np.random.default_rng(0)
    for i in rng.choice(len(frame), 12, replace=False):
        row = frame.iloc[int(i)]
        pred = plan.predict(cal, parallel=plan.to_parallel_config(row))
        assert row["step_s"] == pytest.approx(pred.step_s, rel=1e-9)
        assert row["high_s"] == pytest.approx(pred.high_s, rel=1e-9)
        assert row["dp_comm_s"] == pytest.approx(pred.parts["dp_comm"], rel=1e-9, abs=1e-12)
    mixtral = pk.ModelSpec.preset("mixtral-8x7b")
    cal = plan.calibrate(10.0, mixtral, pk.ParallelConfig(dp=8, tp=2, ep=4,
                                                          num_micro_batches=8), H100)
    frame = plan.search(mixtral, H100, 32, 256, calibration=cal, include_rejected=True,
                        space=plan.SearchSpace(expert_tp=(None, 1)))
    for i in rng.choice(len(frame), 8, replace=False):
        row = frame.iloc[int(i)]
        pred = plan.predict(cal, mixtral, plan.to_parallel_config(row), H100)
        assert row["step_s"] == pytest.approx(pred.step_s, rel=1e-9)


def test_predict_needs_a_job():
    with pytest.raises(pk.InvalidArgumentError, match="model"):
        plan.predict()
    with pytest.raises(pk.InvalidArgumentError, match="global_batch_size"):
        _pred(pk.ParallelConfig(dp=4, num_micro_batches=2), global_batch_size=10)
    with pytest.raises(pk.InvalidArgumentError, match="stage_layers"):
        _pred(pk.ParallelConfig(pp=2, num_micro_batches=2), stage_layers=(10, 10))


def test_the_next_run_in_another_type_keeps_its_activations_at_that_size():
    """Calibrated on an fp32 run (4 bytes per element, fp32 norm inputs), a prediction asked
    for bf16 keeps the layer's tensors at 2 bytes (the norm inputs stay fp32); written out
    for Llama2-13B (s 4096, h 5120, 40 heads, f 13824 gated, flash attention, no dropout),
    40 layers, one micro-batch in flight (pp = 1), in bytes per s·b·h."""
    par = pk.ParallelConfig(dp=8, num_micro_batches=4)
    fp32 = pk.ActivationModel("tensors", flash_attention=True, dropout=False, norm_bytes=4.0,
                              element_bytes=4.0)
    cal = plan.calibrate(30.0, LLAMA, par, H100, activation_model=fp32)
    sbh = 4096 * 5120
    f, c = 13824 / 5120, 4 * 40 / 5120  # MLP width over h; flash statistics (fp32)
    as_run = plan.predict(cal).activation_bytes
    # kept whole: attention and MLP inputs, two norm inputs; then Q, K, V and the
    # projection input (2 + 2 + 2 + 2 at 16 bits), the gated MLP's four outputs (8f at
    # 16 bits), the flash statistics
    assert as_run == pytest.approx(40 * sbh * ((4 + 4 + 2 * 4) + 8 * 2 + 8 * f * 2 + c))
    bf16 = plan.predict(cal, dtype="bf16").activation_bytes
    assert bf16 == pytest.approx(40 * sbh * ((2 + 2 + 2 * 4) + 8 + 8 * f + c))
    # an activation model given for the layout is taken as it is
    assert plan.predict(cal, dtype="bf16", activation_model=fp32).activation_bytes == \
        pytest.approx(as_run)
    # the strategy search prices the same layout the same way
    frame = plan.search(LLAMA, H100, 8, 32, calibration=cal, dtype="bf16",
                        include_rejected=True)
    row = frame[(frame["dp"] == 8) & (frame["tp"] == 1) & (frame["pp"] == 1)
                & (frame["micro_batch_size"] == 1) & (frame["recompute"] == "none")]
    assert len(row) >= 1
    assert row["activation_bytes"].iloc[0] == pytest.approx(bf16)
