"""The output layer and loss term of the activation accounting (``logits_bytes``), and the
unfused norm / rotary / layer-input fields, by hand arithmetic on a small Llama."""

from __future__ import annotations

import dataclasses

import pytest

import perfkit as pk

MODEL = pk.ModelSpec(num_layers=4, hidden_size=1024, num_attention_heads=8,
                     seq_length=512, vocab_size=1000, ffn_hidden_size=2816, mlp="gated",
                     norm="rmsnorm", position_embedding="rope")
BASE = pk.ActivationModel("tensors", flash_attention=True, dropout=False, norm_bytes=4.0)


def test_the_loss_term_sits_on_the_last_stage_only() -> None:
    par = pk.ParallelConfig(pp=2, num_micro_batches=8, micro_batch_size=2)
    am = dataclasses.replace(BASE, logits_bytes=10.0)
    without = pk.activation_memory(MODEL, par, activation_model=BASE).per_stage_bytes
    got = pk.activation_memory(MODEL, par, activation_model=am)
    s, b, h, v = 512, 2, 1024, 1000
    # final norm input 4 + head input 2 per s·b·h, 10 per logit, one micro-batch
    want = s * b * h * (4 + 2) + s * b * v * 10
    assert got.per_stage_bytes[0] == without[0]
    assert got.per_stage_bytes[1] - without[1] == pytest.approx(want)


def test_tensor_parallelism_splits_the_vocabulary() -> None:
    am = dataclasses.replace(BASE, logits_bytes=10.0, unfused_norm=True)
    par = pk.ParallelConfig(tp=2, micro_batch_size=1)
    got = pk.activation_memory(MODEL, par, activation_model=am).extra_bytes
    s, h, v = 512, 1024, 1000
    assert got == pytest.approx(s * h * (4 + 4 + 2) + s * v * 10 / 2)


def test_unfused_norm_rotary_and_fp32_input() -> None:
    s, h = 512, 1024
    base, _ = pk.activation_per_layer(MODEL, 1, activation_model=BASE)
    norm, _ = pk.activation_per_layer(
        MODEL, 1, activation_model=dataclasses.replace(BASE, unfused_norm=True))
    rope, _ = pk.activation_per_layer(
        MODEL, 1, activation_model=dataclasses.replace(BASE, unfused_rotary=True))
    assert norm - base == pytest.approx(s * h * 2 * 4)  # x·rsqrt of two fp32 norms
    assert rope - base == pytest.approx(s * h * (2 + 2))  # rotated Q and K, bf16 (MHA)
    full, _ = pk.activation_per_layer(MODEL, 1, recompute="full", activation_model=
                                      dataclasses.replace(BASE, input_bytes=4.0))
    assert full == s * h * 4


def test_the_printed_table_takes_none_of_them() -> None:
    with pytest.raises(pk.InvalidArgumentError):
        pk.ActivationModel(logits_bytes=10.0)
    with pytest.raises(pk.InvalidArgumentError):
        pk.ActivationModel("tensors", logits_bytes=-1.0)
