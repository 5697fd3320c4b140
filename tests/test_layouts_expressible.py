"""Layouts the step model used to refuse: fewer micro-batches than stages, uneven stages
in estimate_step."""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit.errors import InvalidArgumentError

H100 = pk.Hardware.preset("h100")


def test_fewer_micro_batches_than_stages_is_m_plus_pp_minus_1_slots():
    model = pk.ModelSpec.preset("llama2-7b")
    par = pk.ParallelConfig(tp=8, pp=4, num_micro_batches=2)  # m < pp, plain 1F1B
    est = pk.estimate_step(model, par, H100)
    slot = est.compute_s / 2  # one micro-batch's forward + backward on a stage
    assert est.compute_s + est.bubble_s == pytest.approx((2 + 4 - 1) * slot)
    with pytest.raises(pk.ParallelConfigError):  # interleaving still needs m >= pp
        pk.ParallelConfig(pp=4, vpp=2, num_micro_batches=2)


def test_uneven_stages_126_layers_on_8():
    model = pk.ModelSpec.preset("llama2-7b").replace(num_layers=126)
    par = pk.ParallelConfig(tp=8, pp=8, num_micro_batches=8)
    with pytest.raises(pk.ParallelConfigError):
        pk.estimate_step(model, par, H100)
    split = [15, 15] + [16] * 6
    est = pk.estimate_step(model, par, H100, stage_layers=split)
    # the slowest stage holds 16 layers (the last adds the logits); as a 128-layer model
    # split evenly, whose stages all hold 16
    even = pk.estimate_step(model.replace(num_layers=128), par, H100)
    assert est.compute_s == pytest.approx(even.compute_s, rel=1e-12)
    lighter = pk.estimate_step(model, par, H100, stage_layers=[16] * 6 + [15, 15])
    assert lighter.compute_s < est.compute_s  # the last stage's logits now on 15 layers
    with pytest.raises(InvalidArgumentError):
        pk.estimate_step(model, par, H100, stage_layers=[16] * 8)  # 128, not 126


def test_alibi_adds_no_parameters_and_no_rotary_kernels():
    from perfkit.calc.rates import Rates
    from perfkit.calc.timing import layer_costs

    rope = pk.ModelSpec.preset("llama2-7b")
    alibi = rope.replace(position_embedding="alibi")
    assert alibi.num_parameters() == rope.num_parameters()
    flash = pk.ActivationModel("tensors", flash_attention=True, dropout=False)
    r, a = (layer_costs(m, H100, Rates(), activation_model=flash) for m in (rope, alibi))
    assert r.kernels_fwd - a.kernels_fwd == 2  # the rotary kernels of q and k
    unfused = pk.ActivationModel("tensors", flash_attention=False, dropout=False)
    plain = layer_costs(alibi.replace(position_embedding="none"), H100, Rates(),
                        activation_model=unfused)
    biased = layer_costs(alibi, H100, Rates(), activation_model=unfused)
    assert biased.kernels_fwd - plain.kernels_fwd == 1  # the bias add over the scores
