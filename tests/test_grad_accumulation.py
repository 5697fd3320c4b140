"""Gradients added up across micro-batches outside the GEMMs (perfkit.calc.grad_accumulation).

Each expectation is independent arithmetic: Llama 2 7B's parameter count from its shape
(32 layers of 4·h² attention and 3·h·ffn MLP weights and two norms, untied 32,000-token
embedding and output layer, a final norm: 6,738,415,616, the count Meta publishes as
"7B"), the byte counts read from the frameworks' code (DeepSpeed's bf16 optimizer casts
and adds: 2 + 4 + 4 + 4 + 4 bytes; autograd adds in place: three gradient sizes), and the
H100's HBM bandwidth at the optimizer's 90 %.
"""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit import plan
from perfkit.calc.behaviour import Behaviour
from perfkit.errors import InvalidArgumentError
from perfkit.plan.assumed import assumptions, predict_assumed
from perfkit.widgets.planner_assumed import AssumedPanel

MODEL = pk.ModelSpec.preset("llama2-7b")
H100 = pk.Hardware.preset("h100")
LAYER = 4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096
PARAMS = 32 * LAYER + 2 * 32000 * 4096 + 4096  # 6,738,415,616
RATE = 0.9 * H100.memory_bandwidth  # the optimizer's memory-bound pass (Rates default)


def _optimizer(par: pk.ParallelConfig, kind: str, dtype: str | None = None) -> float:
    over = {"grad_accumulation": kind, "gradient_bytes": 4.0}
    return plan.predict(None, MODEL, par, H100, dtype=dtype, overrides=over).parts["optimizer"]


def test_the_parameter_count_is_llama2_7bs() -> None:
    assert PARAMS == 6_738_415_616


@pytest.mark.parametrize("m", [1, 4])
def test_deepspeeds_bf16_optimizer_moves_18_bytes_per_parameter_every_micro_batch(m) -> None:
    par = pk.ParallelConfig(dp=8, num_micro_batches=m, optimizer_shard=8)
    added = _optimizer(par, "fp32-copy") - _optimizer(par, "fused")
    assert added == pytest.approx(18 * m * PARAMS / RATE, rel=1e-6)


def test_autograd_adds_three_gradient_sizes_from_the_second_micro_batch() -> None:
    one = pk.ParallelConfig(dp=8, num_micro_batches=1)
    assert _optimizer(one, "autograd") == pytest.approx(_optimizer(one, "fused"), rel=1e-12)
    four = one.replace(num_micro_batches=4)
    added = _optimizer(four, "autograd") - _optimizer(four, "fused")
    assert added == pytest.approx(3 * 4 * 3 * PARAMS / RATE, rel=1e-6)


def test_a_sharded_gradient_accumulates_only_its_shard() -> None:
    fsdp = pk.ParallelConfig(dp=8, num_micro_batches=4, optimizer_shard=8, zero_stage=3)
    added = _optimizer(fsdp, "autograd") - _optimizer(fsdp, "fused")
    assert added == pytest.approx(3 * 4 * 3 * PARAMS / 8 / RATE, rel=1e-6)


def test_an_fp16_deepspeed_run_accumulates_as_autograd_does() -> None:
    par = pk.ParallelConfig(dp=8, num_micro_batches=4)
    assert _optimizer(par, "fp32-copy", "fp16") == pytest.approx(
        _optimizer(par, "autograd", "fp16"), rel=1e-12)


def test_the_presets_say_where_their_framework_accumulates() -> None:
    said = {n: Behaviour.preset(n).grad_accumulation for n in Behaviour.presets()}
    assert said == {"ddp": "autograd", "deepspeed": "fp32-copy", "fsdp": "autograd",
                    "megatron": "fused", "mindspore": "fused", "nemo": "fused"}
    with pytest.raises(InvalidArgumentError):
        Behaviour(grad_accumulation="bf16")
    with pytest.raises(InvalidArgumentError):
        pk.calc.rates.Rates(grad_accumulation="bf16")


def test_the_panel_shows_it_and_an_edit_prices_it() -> None:
    par = pk.ParallelConfig(dp=8, num_micro_batches=8)
    table = assumptions(None, par, H100, preset="deepspeed").table.set_index("name")
    row = table.loc["grad_accumulation"]
    assert row["value"] == "fp32-copy" and row["origin"] == "preset"
    assert "18 B/param" in row["text"]
    panel = AssumedPanel(None, par, H100)
    assert panel.accumulation.value == "fused"
    before = predict_assumed(None, panel.assumed, model=MODEL)
    panel.accumulation.value = "fp32-copy"
    after = predict_assumed(None, panel.assumed, model=MODEL)
    assert "grad_accumulation" in panel.assumed.changed
    assert after.parts["optimizer"] - before.parts["optimizer"] == pytest.approx(
        18 * 8 * PARAMS / RATE, rel=1e-6)


@pytest.mark.parametrize("kind", ["fp32-copy", "autograd"])
def test_the_search_prices_it_as_predict_does(kind) -> None:
    rates = pk.calc.rates.Rates(grad_accumulation=kind)
    found = plan.search(MODEL, H100, 16, 64, rates=rates, static_scheme="megatron")
    rows = found[(found["fits"] == True) & (found["num_micro_batches"] > 1)]  # noqa: E712
    assert len(rows)
    for _, row in rows.head(5).iterrows():
        par = plan.to_parallel_config(row)
        alone = plan.predict(None, MODEL, par, H100, global_batch_size=64,
                             static_scheme="megatron", overrides={"grad_accumulation": kind})
        assert row["step_s"] == pytest.approx(alone.step_s, rel=1e-9)
