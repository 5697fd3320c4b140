"""Layouts the step model used to refuse: fewer micro-batches than stages, uneven stages
in estimate_step."""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit import plan
from perfkit.errors import InvalidArgumentError

H100 = pk.Hardware.preset("h100")


def test_fewer_micro_batches_than_stages_is_m_plus_pp_minus_1_slots():
    model = pk.ModelSpec.preset("llama2-7b")
    par = pk.ParallelConfig(tp=8, pp=4, num_micro_batches=2)  # m < pp, plain 1F1B
    est = pk.estimate_step(model, par, H100)
    # one micro-batch's forward + backward on the slowest stage, with its tp and pp traffic
    per_micro_batch = sum(est.parts[k] for k in ("compute", "recompute", "tp_comm",
                                                 "cp_comm", "ep_comm", "pp_comm"))
    slot = per_micro_batch / 2
    assert per_micro_batch + est.bubble_s == pytest.approx((2 + 4 - 1) * slot)
    with pytest.raises(pk.ParallelConfigError):  # interleaving still needs m >= pp
        pk.ParallelConfig(pp=4, vpp=2, num_micro_batches=2)


def test_uneven_stages_126_layers_on_8():
    model = pk.ModelSpec.preset("llama2-7b").replace(num_layers=126)
    par = pk.ParallelConfig(tp=8, pp=8, num_micro_batches=8)
    # no split given: torchtitan's, embedding and head one layer each: 128 / 8 = 16 per
    # stage, the first and the last one layer less
    default = pk.estimate_step(model, par, H100)
    assert default.step_s == pk.estimate_step(model, par, H100,
                                              stage_layers=[15] + [16] * 6 + [15]).step_s
    assert "15, 16, 16, 16, 16, 16, 16, 15" in default.assumptions[-1]
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


@pytest.mark.parametrize("layers, pp, vpp, expected", [
    # (126 + 2) / 8 = 16 per stage; the first and the last hold one layer less
    (126, 8, 1, (15, 16, 16, 16, 16, 16, 16, 15)),
    # 16 virtual stages of (126 + 2) / 16 = 8: rank 0 holds virtual 0 (7) and 8 (8), rank 7
    # virtual 7 (8) and 15 (7)
    (126, 8, 2, (15, 16, 16, 16, 16, 16, 16, 15)),
    # (61 + 2) / 8 = 7 rest 7: the first seven stages 8, the last 7; then 8-1, 7-1
    (61, 8, 1, (7, 8, 8, 8, 8, 8, 8, 6)),
    (30, 4, 1, (7, 8, 8, 7)),
    (5, 1, 1, (5,)),
])
def test_split_layers_is_torchtitans_split(layers, pp, vpp, expected):
    from perfkit.calc.pipeline import split_layers

    got = split_layers(layers, pp, vpp)
    assert got == expected and sum(got) == layers


def test_split_layers_refuses_stages_without_a_layer():
    from perfkit.calc.pipeline import split_layers

    with pytest.raises(InvalidArgumentError, match="without a decoder layer"):
        split_layers(6, 8)


def test_predict_and_calibrate_split_layers_that_do_not_divide():
    model = pk.ModelSpec.preset("llama2-7b").replace(num_layers=126)
    par = pk.ParallelConfig(tp=8, pp=8, vpp=2, num_micro_batches=16)
    split = (15, 16, 16, 16, 16, 16, 16, 15)
    auto = plan.predict(None, model, par, H100)
    given = plan.predict(None, model, par, H100, stage_layers=split)
    assert auto.step_s == given.step_s
    assert any("split as torchtitan does" in n and "15, 16, 16" in n for n in auto.notes)
    assert not any("torchtitan" in n for n in given.notes)
    cal = plan.calibrate(auto.step_s, model=model, parallel=par, hardware=H100)
    assert any("split as torchtitan does" in n for n in cal.notes)
    assert plan.predict(cal, model, par, H100).step_s == pytest.approx(auto.step_s, rel=1e-6)
