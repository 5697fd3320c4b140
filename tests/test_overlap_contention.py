"""Communication hidden under compute slows that compute (perfkit.calc.contention).

The share is Lee et al.'s published average (arXiv:2507.03114: 18.9 % on A100, H100,
MI250 and MI210); each expectation is the model's own exposed traffic (overlap off)
times that share, or the documented Ascend default of 0.
"""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit import plan
from perfkit.calc.contention import GPU_OVERLAP_CONTENTION, overlap_contention
from perfkit.calc.rates import Rates
from perfkit.errors import InvalidArgumentError

MODEL = pk.ModelSpec.preset("llama2-7b")
#: one gradient bucket and no overlap recipe: the data-parallel part is its raw traffic
PAR = pk.ParallelConfig(dp=8, tp=1, num_micro_batches=4, optimizer_shard=8)


def test_the_published_share_is_the_gpus_default_and_ascend_has_none():
    assert GPU_OVERLAP_CONTENTION == pytest.approx(0.189)
    assert overlap_contention("h100") == overlap_contention("mi300x") == 0.189
    assert overlap_contention("ascend-910b") == 0.0


@pytest.mark.parametrize("share", [None, 0.0, 0.4])
def test_hidden_gradient_traffic_costs_its_share(share: float | None) -> None:
    exposed = plan.predict(None, MODEL, PAR, "h100").parts["dp_comm"]
    assert exposed > 0
    over = {"overlap": {"dp": 1.0}}
    if share is not None:
        over["overlap_contention"] = share
    hidden = plan.predict(None, MODEL, PAR, "h100", overrides=over).parts["dp_comm"]
    expected = GPU_OVERLAP_CONTENTION if share is None else share
    assert hidden == pytest.approx(expected * exposed, rel=1e-9)


def test_half_hidden_traffic_pays_on_the_hidden_half_only():
    exposed = plan.predict(None, MODEL, PAR, "h100").parts["dp_comm"]
    half = plan.predict(None, MODEL, PAR, "h100",
                        overrides={"overlap": {"dp": 0.5}}).parts["dp_comm"]
    assert half == pytest.approx(0.5 * exposed * (1 + GPU_OVERLAP_CONTENTION), rel=1e-9)


def test_on_ascend_hidden_traffic_stays_free():
    hw = "ascend-910b"
    hidden = plan.predict(None, MODEL, PAR, hw, overrides={"overlap": {"dp": 1.0}})
    assert hidden.parts["dp_comm"] == 0.0


def test_the_share_is_a_fraction():
    with pytest.raises(InvalidArgumentError):
        Rates(overlap_contention=1.5)
    with pytest.raises(InvalidArgumentError):
        Rates(overlap_contention=-0.1)


def test_the_planner_panel_shows_the_share_and_an_edit_applies():
    from perfkit.calc.behaviour import Behaviour
    from perfkit.plan.assumed import assumptions, predict_assumed

    model = MODEL
    a = assumptions(None, PAR, pk.Hardware.preset("h100"), preset="fsdp")
    row = a.table.set_index("name").loc["overlap_contention"]
    assert row["value"] == pytest.approx(0.189) and row["origin"] == "default"
    assert "arXiv:2507.03114" in row["source"]
    npu = assumptions(None, PAR, pk.Hardware.preset("ascend-910b"), preset="mindspore")
    assert npu.table.set_index("name").loc["overlap_contention", "value"] == 0.0
    off = assumptions(None, PAR, pk.Hardware.preset("h100"), preset="fsdp",
                      edits={"overlap_contention": 0.0})
    assert off.table.set_index("name").loc["overlap_contention", "origin"] == "you"
    # FSDP's prefetch hides all the data-parallel traffic: with the share at 0 it is free
    assert predict_assumed(None, off, model=model).parts["dp_comm"] == 0.0
    assert predict_assumed(None, a, model=model).parts["dp_comm"] > 0.0
    with pytest.raises(InvalidArgumentError):
        Behaviour(overlap_contention=2.0)
