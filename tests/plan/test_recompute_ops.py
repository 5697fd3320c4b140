"""Op-level selective recompute (``ParallelConfig.recompute_ops``) and every-k-th-layer
full recompute: time and memory against independent arithmetic (issue 65, point 6)."""

import dataclasses
import json

import pytest

import perfkit as pk
from perfkit import plan
from perfkit.calc import ActivationModel, activation_memory
from perfkit.calc.gemm_rate import SURFACES
from perfkit.calc.rates import Rates
from perfkit.errors import InvalidArgumentError

H100 = pk.Hardware.preset("h100")
LLAMA3 = pk.ModelSpec.preset("llama3-8b")  # h 4096, a 32, g 8, ffn 14336, s 8192
#: torchtitan's Llama 3 runs SDPA (flash), no dropout, 16-bit RMSNorm inputs
AM = ActivationModel("tensors", flash_attention=True, dropout=False)
M = 4  # micro-batches


def _layout(**kw):
    return pk.ParallelConfig(dp=8, micro_batch_size=1, num_micro_batches=M, **kw)


def _predict(par):
    return plan.predict(None, LLAMA3, par, H100, activation_model=AM, dtype="bf16")


def _gemm(m, k, n, r, peak, bw):
    """One forward GEMM ``x (m × k) · Wᵀ`` on an H100 at the default rates: the measured
    Hopper bf16 surface, ``t0 + max(2mnk / (e·peak), B / (e_B·bw))`` with
    ``e = e_max · m/(m + m½) · n/(n + n½) · k/(k + k½)`` and ``B = 2(mk + kn + mn)``."""
    s = SURFACES["hopper-bf16"]
    e = s.e_max * m / (m + s.m_half) * n / (n + s.n_half) * k / (k + s.k_half)
    nbytes = 2.0 * (m * k + k * n + m * n)
    assert r.gemm_surface_scale == 1.0  # the surface as measured
    return s.fixed_s + max(2.0 * m * k * n / (e * peak), nbytes / (s.byte_efficiency * bw))


def _vec(nbytes, r, bw):
    return (nbytes + r.memory_half_bytes) / (r.vector_efficiency * bw)


def test_time_added_is_the_forward_of_exactly_those_ops():
    r = Rates()
    peak, bw = H100.peak("bf16"), H100.memory_bandwidth
    n, h, f = 8192.0, 4096.0, 14336.0  # tokens of one micro-batch, hidden, MLP width
    qkv_width = 32 * 128 + 2 * 8 * 128  # Q plus K and V of 8 KV heads
    t_norm = _vec(8.0 * n * h, r, bw)  # a 16-bit RMSNorm: 8 bytes per element moved
    t_qkv = _gemm(n, h, qkv_width, r, peak, bw)
    t_act = _vec(4.0 * n * f, r, bw) + _vec(6.0 * n * f, r, bw)  # SiLU, then the product
    per_layer = t_norm + t_qkv + t_act
    got = _predict(_layout(recompute="selective", recompute_ops=("attn_norm", "qkv", "act")))
    assert got.parts["recompute"] == pytest.approx(M * LLAMA3.num_layers * per_layer,
                                                   rel=1e-9)
    # q, k, v one by one are three GEMMs (torchtitan's wq, wk, wv), each on its own size
    split = _predict(_layout(recompute="selective", recompute_ops=("q", "k", "v")))
    three = _gemm(n, h, 4096, r, peak, bw) + 2 * _gemm(n, h, 1024, r, peak, bw)
    assert split.parts["recompute"] == pytest.approx(M * LLAMA3.num_layers * three, rel=1e-9)
    # the ops' reruns are not the model's compute: that stays the no-recompute one
    assert got.parts["compute"] == pytest.approx(
        _predict(_layout(recompute="none")).parts["compute"], rel=1e-12)


def test_memory_saved_is_the_bytes_of_the_dropped_tensors():
    """Korthikanti et al. 2022 §4.1 terms: Q 2sbh, K and V 2sbh·g/a each, the SiLU output
    and the product 2sbf each (16-bit)."""
    s, b, h, f, a, g = 8192, 1, 4096, 14336, 32, 8
    base = activation_memory(LLAMA3, _layout(recompute="none"), activation_model=AM)
    ops = activation_memory(LLAMA3, _layout(recompute="selective",
                                            recompute_ops=("qkv", "act")),
                            activation_model=AM)
    dropped = 2 * s * b * h + 2 * (2 * s * b * h * g / a) + 2 * (2 * s * b * f)
    assert base.per_layer_bytes - ops.per_layer_bytes == pytest.approx(dropped, rel=1e-12)
    # the whole Llama 3 layer by hand: norms' inputs and outputs 4·2, Q 2, K+V 1,
    # projection input 2, gate/up/SiLU/product 4·2f/h, softmax statistics 4a/h (fp32)
    sbh = s * b * h
    assert base.per_layer_bytes == pytest.approx(sbh * (8 + 2 + 1 + 2 + 8 * f / h + 4 * a / h))
    # one micro-batch in flight (pp = 1): the stage holds its 32 layers once
    assert ops.total_bytes == pytest.approx(32 * (base.per_layer_bytes - dropped))


def test_core_alone_is_korthikantis_selective_row_of_table_2():
    """Under the printed table, recomputing the attention core drops 5as/h: the
    "tensor parallel + selective" row sbh·(10 + 24/t) (t = 2 here)."""
    model = pk.ModelSpec(num_layers=4, hidden_size=2048, num_attention_heads=16,
                         seq_length=1024, vocab_size=32000)
    par = pk.ParallelConfig(tp=2, recompute="selective", recompute_ops="megatron-selective")
    got = activation_memory(model, par)
    assert got.per_layer_bytes == pytest.approx(1024 * 2048 * (10 + 24 / 2))


def test_torchtitan_op_sac_lies_between_selective_and_full():
    rows = {name: _predict(_layout(**kw)) for name, kw in (
        ("selective", dict(recompute="selective")),
        ("op-sac", dict(recompute="selective", recompute_ops="torchtitan-op-sac")),
        ("full", dict(recompute="full")))}
    step = {k: v.step_s for k, v in rows.items()}
    act = {k: v.activation_bytes for k, v in rows.items()}
    assert step["selective"] < step["op-sac"] < step["full"]
    assert act["full"] < act["op-sac"] < act["selective"]
    # op-SAC keeps Q, V (wq, wv), the SDPA output and statistics, gate (w1), the layer
    # input: 2 + 0.5 + 2 + 4a/h + 7 + 2 sbh, the rest of 41 + 4a/h sbh is recomputed
    sbh = 8192 * 4096
    op = activation_memory(LLAMA3, _layout(recompute="selective",
                                           recompute_ops="torchtitan-op-sac"),
                           activation_model=AM)
    assert op.per_layer_bytes == pytest.approx(sbh * (2 + 0.5 + 2 + 4 * 32 / 4096 + 7 + 2))


def test_unknown_ops_are_refused_naming_them_and_the_allowed_ones():
    with pytest.raises(InvalidArgumentError) as err:
        _layout(recompute="selective", recompute_ops=("qkv", "softmaxx"))
    assert "'softmaxx'" in str(err.value) and "attn_norm" in str(err.value)
    with pytest.raises(InvalidArgumentError, match="torchtitan-op-sac"):
        _layout(recompute="selective", recompute_ops="titan")
    with pytest.raises(InvalidArgumentError, match="recompute='selective'"):
        _layout(recompute="none", recompute_ops=("core",))
    with pytest.raises(InvalidArgumentError, match="fused GEMM"):
        _layout(recompute="selective", recompute_ops=("qkv", "k"))
    gpt = pk.ModelSpec(num_layers=4, hidden_size=1024, num_attention_heads=16,
                       seq_length=512, vocab_size=32000)
    with pytest.raises(InvalidArgumentError, match="gated MLP"):
        activation_memory(gpt, pk.ParallelConfig(recompute="selective", recompute_ops=("up",)))


def test_aliases_and_presets_resolve_to_layer_order():
    par = _layout(recompute="selective", recompute_ops=("mlp", "layernorm", "core_attn"))
    assert par.recompute_ops == ("attn_norm", "core", "mlp_norm", "fc1", "act", "fc2")
    assert _layout(recompute="selective",
                   recompute_ops="mindformers-select-recompute").recompute_ops == ("act",)


def test_layout_round_trips_through_a_dict_and_json():
    par = _layout(recompute="selective", recompute_ops="torchtitan-op-sac",
                  recompute_layers=2)
    back = pk.ParallelConfig(**json.loads(json.dumps(dataclasses.asdict(par))))
    assert back == par and back.replace(tp=1) == par


def test_every_kth_layer_is_the_count_form_in_time_and_memory():
    k, layers = 4, LLAMA3.num_layers
    kth = pk.ParallelConfig.every_kth_layer(k, layers, dp=8, micro_batch_size=1,
                                            num_micro_batches=M)
    assert kth.recompute_layers == layers // k == 8
    got, full, none = (_predict(p) for p in (kth, _layout(recompute="full"),
                                              _layout(recompute="none")))
    # time: 8 of 32 layers rerun their forward, a quarter of full recompute's rerun
    assert got.parts["recompute"] == pytest.approx(full.parts["recompute"] * 8 / 32,
                                                   rel=1e-9)
    # memory by hand: 24 layers keep 41 + 4a/h sbh, 8 keep their 16-bit input, 2 sbh
    sbh = 8192 * 4096
    per = sbh * (41 + 4 * 32 / 4096)
    mem = activation_memory(LLAMA3, kth, activation_model=AM).total_bytes
    assert mem == pytest.approx(24 * per + 8 * 2 * sbh)
    assert got.activation_bytes == pytest.approx(mem) and none.activation_bytes > mem
    with pytest.raises(InvalidArgumentError):
        pk.ParallelConfig.every_kth_layer(0, layers)


def test_search_prices_recompute_ops_as_predict_does():
    model = pk.ModelSpec.preset("llama3-8b", num_layers=4, seq_length=2048)
    space = plan.SearchSpace(recompute=("selective",), full_layer_fractions=(),
                             vpp=(1,), micro_batch_size=(1,),
                             recompute_ops="torchtitan-op-sac")
    frame = plan.search(model, H100, 8, 16, space=space, activation_model=AM,
                        dtype="bf16", include_rejected=True)
    assert len(frame) and set(frame["recompute_ops"]) == {",".join(
        pk.ParallelConfig(recompute="selective", recompute_ops="torchtitan-op-sac")
        .recompute_ops)}
    for _, row in frame.head(5).iterrows():
        par = plan.to_parallel_config(row)
        assert par.recompute_ops[0] == "attn_norm"
        pred = plan.predict(None, model, par, H100, activation_model=AM, dtype="bf16")
        assert row["step_s"] == pytest.approx(pred.step_s, rel=1e-9)
        assert row["activation_bytes"] == pytest.approx(pred.activation_bytes, rel=1e-9)
        plain = plan.predict(None, model, par.replace(recompute_ops=None), H100,
                             activation_model=AM, dtype="bf16")
        assert plain.activation_bytes > pred.activation_bytes  # the ops were priced
    # estimate_step prices op-level recompute with the same model
    par = plan.to_parallel_config(frame.iloc[0])
    est = pk.estimate_step(model, par, H100, activation_model=AM, dtype="bf16")
    assert est.step_s == pytest.approx(frame.iloc[0]["step_s"], rel=1e-9)
    assert est.recompute_s > 0


def test_lab_key_dict_round_trips_and_the_simulator_refuses_what_it_cannot_run():
    from perfkit.lab.scenario import parallel_to_dict
    from perfkit.simulate import simulate

    par = _layout(recompute="selective", recompute_ops=("core", "act"))
    d = json.loads(json.dumps(parallel_to_dict(par)))
    assert d["recompute_ops"] == ["core", "act"] and pk.ParallelConfig(**d) == par
    small = pk.ModelSpec.preset("llama3-8b", num_layers=2, seq_length=512)
    with pytest.raises(InvalidArgumentError, match="recompute_ops"):
        simulate(small, pk.ParallelConfig(recompute="selective", recompute_ops=("act",)),
                 H100, steps=1)


def test_words_and_conventions():
    from perfkit.widgets.planner_words import recompute_text

    par = _layout(recompute="selective", recompute_ops="torchtitan-op-sac", recompute_layers=2)
    assert recompute_text(par) == "selective (torchtitan-op-sac) + 2 full layers per stage"
    assert recompute_text(_layout(recompute="selective", recompute_ops=("core", "act"))) \
        == "selective (core, act)"
    with pytest.raises(InvalidArgumentError, match="per-op terms"):
        activation_memory(LLAMA3, par, convention="megatron")


def test_rerunning_the_core_repeats_the_context_parallel_ring_as_full_recompute_does():
    # a core too short to hide the ring (the float32 merges around its calls hide it too)
    model = pk.ModelSpec.preset("llama3-8b", seq_length=256)

    def cp_comm(**kw):
        par = pk.ParallelConfig(dp=4, cp=2, micro_batch_size=1, num_micro_batches=M, **kw)
        return plan.predict(None, model, par, H100, activation_model=AM,
                            dtype="bf16").parts["cp_comm"]

    none = cp_comm(recompute="none")
    full = cp_comm(recompute="full")
    assert full > none  # the ring is not hidden under the forward's core entirely
    assert cp_comm(recompute="selective", recompute_ops=("core",)) == pytest.approx(full)
    assert cp_comm(recompute="selective", recompute_ops=("act",)) == pytest.approx(none)
