"""FlashAttention 1 and FlashAttention in Triton, priced against FlashAttention-2 by the
ratios the FlashAttention-2 paper measured, and the validation rows that state them.

The ratios are typed here from Dao 2023, "FlashAttention-2" (arXiv 2307.08691), §4.1,
measured on one A100 80GB SXM4: FlashAttention-2 is "around 2×" faster than FlashAttention,
"around 1.3-1.5×" faster than FlashAttention in Triton in the forward pass (1.4, the middle)
and "around 2×" in the backward pass.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import perfkit as pk
from perfkit.calc.activation_model import ActivationModel
from perfkit.calc.attention_rate import attention_efficiency
from perfkit.calc.behaviour import Behaviour
from perfkit.calc.rates import Rates
from perfkit.calc.timing_layer import layer_costs

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.validation.rows import map_row, read_rows  # noqa: E402

#: implementation: (forward, backward) times slower than FlashAttention-2, from the paper.
PAPER = {"flash1": (2.0, 2.0), "flash-triton": (1.4, 2.0)}


@pytest.mark.parametrize("impl", sorted(PAPER))
@pytest.mark.parametrize("hardware", ["a100", "h100", "910b"])
@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("length, head_dim, causal, pairs",
                         [(512, 64, True, None), (16384, 128, False, None),
                          (65536, 112, True, 16)])
def test_older_kernels_run_flash2_slower_by_the_papers_ratio(impl, hardware, backward, length,
                                                             head_dim, causal, pairs):
    fast = attention_efficiency(length, length, head_dim, causal, backward, "flash2",
                                hardware, pairs)
    slow = attention_efficiency(length, length, head_dim, causal, backward, impl, hardware,
                                pairs)
    assert slow == pytest.approx(fast / PAPER[impl][int(backward)], rel=1e-12)


def test_the_older_kernels_are_options_of_rates_and_behaviour():
    assert Rates(attention_implementation="flash-triton").attention_implementation \
        == "flash-triton"
    assert Behaviour(attention_implementation="flash1").overrides()[
        "attention_implementation"] == "flash1"
    with pytest.raises(pk.PerfkitError):
        Rates(attention_implementation="flash4")


def test_a_layers_attention_core_takes_the_ratio_and_nothing_else_moves():
    """Through the step model's layer pricing: the core's forward and backward times grow
    by the paper's ratios, the layer's other kernels are unchanged."""
    model = pk.ModelSpec.preset("llama2-7b").replace(seq_length=8192)
    hw = pk.Hardware.preset("a100")
    am = ActivationModel("tensors", flash_attention=True, dropout=False)
    base = layer_costs(model, hw, Rates(attention_implementation="flash2"), 1,
                       activation_model=am, dtype="bf16")
    old = layer_costs(model, hw, Rates(attention_implementation="flash-triton"), 1,
                      activation_model=am, dtype="bf16")
    assert old.core_fwd == pytest.approx(1.4 * base.core_fwd, rel=1e-9)
    assert old.core_bwd == pytest.approx(2.0 * base.core_bwd, rel=1e-9)
    assert old.fwd - old.core_fwd == pytest.approx(base.fwd - base.core_fwd, rel=1e-9)
    assert old.bwd - old.core_bwd == pytest.approx(base.bwd - base.core_bwd, rel=1e-9)


def test_mosaic_rows_are_priced_with_the_triton_kernel_their_benchmark_ran():
    """llm-foundry's benchmark script sets ``attn_impl`` to its ``--attn_impl`` argument,
    default ``triton``, and its sweep passes none (SOURCES.md): every Mosaic row says so,
    maps to ``"flash-triton"``, and both calibrate and predict receive it."""
    rows = [r for r in read_rows() if r["source_id"] == "mosaic-llm-foundry"]
    assert len(rows) == 120
    mapped = [map_row(r) for r in rows]
    assert {m.attention_implementation for m in mapped} == {"flash-triton"}
    others = [map_row(r) for r in read_rows() if r["source_id"] != "mosaic-llm-foundry"
              and "d4c86e3758a8" not in r["reference"]]
    assert {m.attention_implementation for m in others if hasattr(m, "kwargs")} == {"auto"}
    m = next(m for m in mapped if m.row["seq_length"] == 65536)
    kw = m.kwargs()
    assert kw["rates"].attention_implementation == "flash-triton"
    assert kw["overrides"] == {"attention_implementation": "flash-triton",
                               "elementwise_kernels": "eager"}  # amendment 11
    plain = {k: v for k, v in kw.items() if k not in ("rates", "overrides")}
    slow = pk.plan.predict(None, m.model, m.parallel, m.hardware,
                           overrides=kw["overrides"], **plain)
    fast = pk.plan.predict(None, m.model, m.parallel, m.hardware,
                           overrides={"attention_implementation": "flash2"}, **plain)
    assert slow.step_s > 1.3 * fast.step_s  # attention is most of a 65k-token step
    cal = pk.plan.calibrate(m.step_s, m.model, m.parallel, m.hardware, rates=kw["rates"],
                            **plain)
    assert cal.rates.attention_implementation == "flash-triton"


def test_torchtitans_december_2024_rows_run_flash2_and_its_august_rows_auto():
    """torchtitan restricts SDPA to the flash and memory-efficient backends under context
    parallelism (``torchtitan/utils.py`` at 9dec370ad26b), and SDPA chose flash on H100 in
    the PyTorch of December 2024 (SOURCES.md): every row of that table is FlashAttention-2,
    the context-parallel ones included; the August 2024 rows name no PyTorch."""
    rows = [r for r in read_rows() if r["source_id"] == "torchtitan-performance"]
    december = [r for r in rows if "d4c86e3758a8" in r["reference"]]
    assert len(december) == 18
    assert sum((r["cp"] or 1) > 1 for r in december) == 6  # cp 2, 4, 8 on 8B and 405B
    assert {map_row(r).attention_implementation for r in december} == {"flash2"}
    assert {map_row(r).attention_implementation for r in rows if r not in december} \
        == {"auto"}


def test_bloom_rows_compute_attention_apart_with_dropout():
    """BigScience's 2022 search ran Megatron-DeepSpeed's baddbmm + fused softmax + bmm with
    its default dropout (SOURCES.md, PROTOCOL.md amendment 3): Megatron's GPT layer."""
    from perfkit.calc import ActivationModel

    rows = [r for r in read_rows() if r["source_id"] == "bigscience-bloom-prequel"]
    assert rows and {map_row(r).activation_model for r in rows} == {ActivationModel()}
    assert not ActivationModel().flash_attention
    others = {map_row(r).activation_model.flash_attention for r in read_rows()
              if r["source_id"] in ("mosaic-llm-foundry", "torchtitan-performance")}
    assert others == {True}
