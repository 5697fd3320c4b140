"""``Rates.fuse_elementwise`` (torch.compile's fused element-wise kernels): a layer's
memory-bound bytes and kernels, eager against fused, checked against the byte counts of
each kernel written out here by hand (read once, write once, 16-bit)."""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit.calc.activation import ActivationModel
from perfkit.calc.behaviour import Behaviour
from perfkit.calc.rates import Rates
from perfkit.calc.recompute_ops import op_recompute_seconds
from perfkit.calc.timing_layer import layer_costs
from perfkit.plan.assumed import calibrated_behaviour
from perfkit.specs import Hardware, ModelSpec, ParallelConfig

H100 = Hardware.preset("h100")
E = 0.9  # Rates' memory_efficiency; memory_half_bytes=0 makes a kernel bytes / (E · bw)


def _llama(seq: int = 4096) -> ModelSpec:
    return ModelSpec(num_layers=4, hidden_size=2048, num_attention_heads=16, num_kv_heads=4,
                     seq_length=seq, vocab_size=32000, ffn_hidden_size=5632, mlp="gated",
                     norm="rmsnorm", position_embedding="rope")


def _costs(model: ModelSpec, fused: bool, am: ActivationModel, b: int = 2):
    rates = Rates(memory_half_bytes=0.0, fuse_elementwise=fused)
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
    fused = Rates(memory_half_bytes=0.0, fuse_elementwise=True)
    one_kernel = 8 * n * h / (E * H100.memory_bandwidth)
    for op in ("mlp_norm", "attn_residual"):
        t, k = op_recompute_seconds(m, H100, fused, (op,), micro_batch_size=b,
                                    activation_model=am, dtype="bf16")
        assert (t, k) == (pytest.approx(one_kernel, rel=1e-9), 1)
    both, k = op_recompute_seconds(m, H100, fused, ("mlp_norm", "attn_residual"),
                                   micro_batch_size=b, activation_model=am, dtype="bf16")
    assert both == pytest.approx(one_kernel, rel=1e-9) and k == 1


def test_the_option_travels_from_behaviour_to_the_step_and_back():
    b = Behaviour.preset("fsdp", fuse_elementwise=True)
    assert b.overrides()["fuse_elementwise"] is True
    assert Behaviour.preset("fsdp").overrides()["fuse_elementwise"] is False
    assert calibrated_behaviour(Rates(fuse_elementwise=True)).fuse_elementwise is True
    model, parallel = _llama(), ParallelConfig(dp=8, micro_batch_size=2, num_micro_batches=1)
    eager = pk.plan.predict(None, model, parallel, H100, behaviour="fsdp", dtype="bf16")
    compiled = pk.plan.predict(None, model, parallel, H100, behaviour=b, dtype="bf16")
    assert compiled.step_s < eager.step_s
    assert compiled.parts["compute"] < eager.parts["compute"]
