"""``Rates.elementwise_kernels``: a layer's memory-bound bytes and kernels as fused
library kernels, eager PyTorch and ``torch.compile`` run them, checked against the byte
counts of each kernel written out here by hand (16-bit activations), and the eager count
against a recorded eager PyTorch profile."""

from __future__ import annotations

from pathlib import Path

import pytest

import perfkit as pk
from perfkit.calc.activation import ActivationModel
from perfkit.calc.behaviour import Behaviour
from perfkit.calc.rates import Rates
from perfkit.calc.recompute_ops import op_recompute_seconds
from perfkit.calc.timing_layer import layer_costs
from perfkit.plan.assumed import calibrated_behaviour
from perfkit.specs import Hardware, ModelSpec, ParallelConfig

DATA = Path(__file__).resolve().parents[1] / "data"

H100 = Hardware.preset("h100")
E = 0.9  # Rates' memory_efficiency; memory_half_bytes=0 makes a kernel bytes / (E · bw)


def _llama(seq: int = 4096) -> ModelSpec:
    return ModelSpec(num_layers=4, hidden_size=2048, num_attention_heads=16, num_kv_heads=4,
                     seq_length=seq, vocab_size=32000, ffn_hidden_size=5632, mlp="gated",
                     norm="rmsnorm", position_embedding="rope")


def _costs(model: ModelSpec, fused: bool | str, am: ActivationModel, b: int = 2):
    kind = fused if isinstance(fused, str) else "compiled" if fused else "library"
    rates = Rates(memory_half_bytes=0.0, elementwise_kernels=kind)
    return layer_costs(model, H100, rates, micro_batch_size=b, activation_model=am,
                       dtype="bf16")


def test_a_llama_layer_fused_saves_the_bytes_counted_by_hand():
    m, b = _llama(), 2
    am = ActivationModel(flash_attention=True, dropout=False)
    eager, fused = _costs(m, False, am, b), _costs(m, True, am, b)
    n, h, w = b * m.seq_length, m.hidden_size, m.ffn_hidden_size
    qk = (16 + 4) * 128  # query and key widths rotary touches
    # forward, eager: two norms 8 B, rotary 6 B on q and k, residual add 6 B, the gated
    # activation 4 + 6 B, the MLP's residual 6 B; fused: norm 4, rotary 4, add+norm 8,
    # activation 6, residual 6
    eager_fwd = n * h * (8 + 8 + 6 + 6) + 6 * n * qk + 10 * n * w
    fused_fwd = n * h * (4 + 8 + 6) + 4 * n * qk + 6 * n * w
    assert eager.fwd - fused.fwd == pytest.approx(
        (eager_fwd - fused_fwd) / (E * H100.memory_bandwidth), rel=1e-9)
    assert eager.kernels_fwd - fused.kernels_fwd == 8 - 5
    # backward, eager: activation 3 × 6 B, residuals 3 × 6 B and two norm gradients
    # 12 B, rotary 6 B; fused: activation 10 B, two norm+residual gradients 8 B, rotary 4
    eager_bwd = 18 * n * w + 42 * n * h + 6 * n * qk
    fused_bwd = 10 * n * w + 16 * n * h + 4 * n * qk
    assert eager.bwd - fused.bwd == pytest.approx(
        (eager_bwd - fused_bwd) / (E * H100.memory_bandwidth), rel=1e-9)
    assert eager.kernels_bwd - fused.kernels_bwd == 10 - 4
    # the GEMMs and the attention kernel do not move
    assert fused.core_fwd == eager.core_fwd and fused.wgrad == eager.wgrad


def test_an_unfused_attention_softmax_takes_its_bias_and_dropout_into_one_kernel():
    m = ModelSpec(num_layers=2, hidden_size=1024, num_attention_heads=16, seq_length=2048,
                  vocab_size=32000, mlp="gpt", norm="layernorm",
                  position_embedding="alibi")
    am = ActivationModel(flash_attention=False, dropout=True)
    eager, fused = _costs(m, False, am, 1), _costs(m, True, am, 1)
    scores = 16 * 2048 * 2048
    # eager: softmax 4 B, the ALiBi bias 4 B, dropout 5 B; fused: 4 B and the 1-byte mask
    assert eager.core_fwd - fused.core_fwd == pytest.approx(
        ((4 + 4 + 5) - (4 + 1)) * scores / (E * H100.memory_bandwidth), rel=1e-9)


def test_the_fused_add_and_norm_reruns_when_either_op_is_recomputed():
    m, b = _llama(), 1
    am = ActivationModel(flash_attention=True, dropout=False)
    n, h = b * m.seq_length, m.hidden_size
    fused = Rates(memory_half_bytes=0.0, elementwise_kernels="compiled")
    one_kernel = 8 * n * h / (E * H100.memory_bandwidth)
    for op in ("mlp_norm", "attn_residual"):
        t, k = op_recompute_seconds(m, H100, fused, (op,), micro_batch_size=b,
                                    activation_model=am, dtype="bf16")
        assert (t, k) == (pytest.approx(one_kernel, rel=1e-9), 1)
    both, k = op_recompute_seconds(m, H100, fused, ("mlp_norm", "attn_residual"),
                                   micro_batch_size=b, activation_model=am, dtype="bf16")
    assert both == pytest.approx(one_kernel, rel=1e-9) and k == 1


def test_eager_pytorch_counts_rmsnorm_and_rotary_operator_by_operator():
    m, b = _llama(), 2
    am = ActivationModel(flash_attention=True, dropout=False)
    library, eager = _costs(m, "library", am, b), _costs(m, "eager", am, b)
    n, h = b * m.seq_length, m.hidden_size
    q, k = 16 * 128 * n, 4 * 128 * n
    bw = E * H100.memory_bandwidth
    # forward, per norm: x.float() 2+4, pow 4+4, mean 4, x·rstd 4+4, cast 4+2, ·w 2+2 = 36
    # bytes in six kernels and two per row (+eps, rsqrt: 4+4 each), where the library's
    # norm is one kernel of 8; rotary per tensor: x·cos 2+2, -half 1+1, cat 2+2, ·sin 2+2,
    # sum 2+2+2 = 20 in five kernels where the library's is one of 6
    rows = n
    extra_fwd = 2 * ((36 - 8) * n * h + 2 * 8 * rows) + (20 - 6) * (q + k)
    assert eager.fwd - library.fwd == pytest.approx(extra_fwd / bw, rel=1e-9)
    assert eager.kernels_fwd - library.kernels_fwd == 2 * (8 - 1) + 2 * (5 - 1)
    # backward, per norm gradient: 4, 6 + 2, 6, 8, 12 + 4, 4, 8, 12, 12, 6 = 84 bytes in
    # twelve kernels (the library's: one of 12); rotary's per tensor: 4 + 4, 2, 2 + 2 + 2
    # + 2, 6 + 6 = 30 in nine (one of 6)
    extra_bwd = 2 * (84 - 12) * n * h + (30 - 6) * (q + k)
    assert eager.bwd - library.bwd == pytest.approx(extra_bwd / bw, rel=1e-9)
    assert eager.kernels_bwd - library.kernels_bwd == 2 * (12 - 1) + 2 * (9 - 1)


def test_a_layernorm_gpt_runs_eager_as_the_library_counts_it():
    """``torch.nn.LayerNorm`` is one native kernel, a GELU MLP one: eager adds nothing."""
    m = ModelSpec(num_layers=2, hidden_size=1024, num_attention_heads=16, seq_length=2048,
                  vocab_size=32000, mlp="gpt", norm="layernorm", position_embedding="alibi")
    am = ActivationModel(flash_attention=True, dropout=False)
    library, eager = _costs(m, "library", am, 1), _costs(m, "eager", am, 1)
    assert (eager.fwd, eager.bwd, eager.kernels_fwd) == \
        (library.fwd, library.bwd, library.kernels_fwd)


def test_the_eager_count_explains_most_of_a_recorded_eager_profiles_elementwise_time():
    """A recorded eager PyTorch Llama on an H100 (``tests/data/kineto_llama_layouts_h100``,
    PROVENANCE.md there: RMSNorm and rotary as separate operators, bf16 autocast).
    Calibrated kernel kind by kind, the model's forward and backward memory-bound kernels
    are scaled to the time the profile's own take: by the share of it the model's count
    explains at the run's measured memory-bound rate. With the library's fused count
    that share is under a half (forward) and a third (backward); with the eager count,
    written from the operators alone, more than three quarters of both. What is left:
    autocast's casts of each fp32 weight before its GEMM and the fp32 residual stream,
    which the eager count (16-bit weights and activations) leaves out and the ``"amp"``
    count adds: it explains the profile's element-wise time to within a tenth (0.967
    forward, 1.040 backward)."""
    profile = pk.load(DATA / "kineto_llama_layouts_h100" / "a.pt.trace.json.gz",
                      cache=False, progress=False)
    scales = {}
    for kind in ("library", "eager", "amp"):
        cal = pk.plan.calibrate(profile, close=True, closing="kernels",
                                rates=Rates(elementwise_kernels=kind))
        assert cal.rates.elementwise_kernels == kind
        terms = {name: value for name, value, _how in cal.terms}
        scales[kind] = (terms["closing scale, forward memory-bound kernels"],
                        terms["closing scale, backward memory-bound kernels"])
    assert scales["library"][0] < 0.5 and scales["library"][1] < 0.35
    assert all(0.75 < s <= 1.0 for s in scales["eager"]), scales
    assert all(0.9 < s < 1.1 for s in scales["amp"]), scales


def test_the_option_travels_from_behaviour_to_the_step_and_back():
    assert Behaviour.preset("fsdp").elementwise_kernels == "eager"
    assert Behaviour.preset("ddp").elementwise_kernels == "amp"
    assert Behaviour.preset("megatron").elementwise_kernels == "library"
    b = Behaviour.preset("fsdp", elementwise_kernels="compiled")
    assert b.overrides()["elementwise_kernels"] == "compiled"
    assert calibrated_behaviour(Rates(elementwise_kernels="compiled")).elementwise_kernels \
        == "compiled"
    model, parallel = _llama(), ParallelConfig(dp=8, micro_batch_size=2, num_micro_batches=1)
    eager = pk.plan.predict(None, model, parallel, H100, behaviour="fsdp", dtype="bf16")
    compiled = pk.plan.predict(None, model, parallel, H100, behaviour=b, dtype="bf16")
    assert compiled.step_s < eager.step_s
    assert compiled.parts["compute"] < eager.parts["compute"]
    with pytest.raises(pk.PerfkitError, match="elementwise_kernels"):
        Rates(elementwise_kernels="fused")


def test_a_calibration_keeps_the_count_it_was_fitted_with_against_a_preset():
    model, parallel = _llama(), ParallelConfig(dp=8, micro_batch_size=2, num_micro_batches=1)
    cal = pk.plan.calibrate(1.0, model, parallel, H100)
    assert cal.rates.elementwise_kernels == "library"
    kept = pk.plan.predict(cal, behaviour="fsdp")  # the preset says "eager"
    library = Behaviour.preset("fsdp", elementwise_kernels="library")
    assert kept.step_s == pk.plan.predict(cal, behaviour=library).step_s
    asked = pk.plan.predict(cal, behaviour="fsdp",
                            overrides={"elementwise_kernels": "eager"})
    assert asked.step_s > kept.step_s


def test_the_planner_panel_keeps_the_fitted_count_under_a_preset_and_applies_an_edit():
    from perfkit.plan.assumed import assumptions, predict_assumed

    model, parallel = _llama(), ParallelConfig(dp=8, micro_batch_size=2, num_micro_batches=1)
    cal = pk.plan.calibrate(1.0, model, parallel, H100)
    preset = assumptions(cal, preset="fsdp")
    row = preset.table.set_index("name").loc["elementwise_kernels"]
    assert (row["value"], row["origin"]) == ("library", "profile")
    edited = assumptions(cal, preset="fsdp", edits={"elementwise_kernels": "eager"})
    row = edited.table.set_index("name").loc["elementwise_kernels"]
    assert (row["value"], row["origin"]) == ("eager", "you")
    assert predict_assumed(cal, edited).step_s > predict_assumed(cal, preset).step_s
