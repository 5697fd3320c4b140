"""A sharded-data-parallel layout (``zero_stage`` 2 or 3) counts its static memory sharded.

The step model prices ``zero_stage=3`` as FSDP (parameter all-gathers); its static memory
was counted by the job's scheme, which shards only the optimizer: an 8-GPU FSDP run of a
30B model came out at 210 GiB per device. Checked against the published bytes per
parameter: Megatron-LM's distributed optimizer ``6 + 12/d`` (bf16; its
``compute_weight_and_optimizer_memory``), ZeRO's ``(2 + 2 + 12)/N_d`` at stage 3 and
``2 + (2 + 12)/N_d`` at stage 2 (Rajbhandari et al. 2020, "ZeRO", §5, K = 12).
"""

from __future__ import annotations

import pytest

import perfkit as pk
from perfkit import plan
from perfkit.calc import parameters_per_device


def _static(zero_stage: int, scheme: str) -> tuple[float, float, tuple[str, ...]]:
    model = pk.ModelSpec.preset("llama2-13b")
    par = pk.ParallelConfig(dp=8, micro_batch_size=1, num_micro_batches=4,
                            optimizer_shard=8, zero_stage=zero_stage, recompute="full")
    p = plan.predict(model=model, parallel=par, hardware=pk.Hardware.preset("a100"),
                     static_scheme=scheme, dtype="bf16")
    return p.static_bytes, parameters_per_device(model, par), p.notes


def test_full_shard_counts_sixteen_bytes_per_parameter_over_the_ranks() -> None:
    static, n, notes = _static(3, "megatron")
    assert static == pytest.approx(16 * n / 8, rel=1e-9)
    assert any("zero_stage 3" in s and "'zero'" in s and "weights too)" in s for s in notes)


def test_mindspores_optimizer_parallel_levels_shard_its_own_bytes() -> None:
    """Under MindSpore's scheme (2 / 2 / 8 bytes per parameter, the seed's ``10N/t + 2N``
    with a gradient buffer for 4 micro-batches) a ZeRO stage is its optimizer parallel's
    level: weights and optimizer state over the 8 ranks from stage 1, the gradient buffer
    too from stage 2. Counted as "zero" (16 / 8), stage 3 read 2 bytes per parameter where
    MindSpore holds 1.5, and stage 2 held more than stage 1."""
    by_stage = {z: _static(z, "mindspore") for z in (1, 2, 3)}
    n = by_stage[1][1]
    assert by_stage[1][0] == pytest.approx((2 / 8 + 2 + 8 / 8) * n, rel=1e-9)
    for z in (2, 3):
        assert by_stage[z][0] == pytest.approx((2 + 2 + 8) / 8 * n, rel=1e-9)
        assert not any("'zero'" in s for s in by_stage[z][2])


def test_gradient_sharding_keeps_the_weights_whole() -> None:
    static, n, notes = _static(2, "megatron")
    assert static == pytest.approx((2 + 14 / 8) * n, rel=1e-9)
    assert any("weights not)" in s for s in notes)


def test_the_distributed_optimizer_alone_is_megatrons_table() -> None:
    static, n, notes = _static(1, "megatron")
    assert static == pytest.approx((6 + 12 / 8) * n, rel=1e-9)
    assert not any("zero_stage" in s for s in notes)


def test_every_page_counts_a_zero_stage_as_predict_does() -> None:
    """The calculator panel's figures and memory bars (widgets.metrics_summary,
    widgets.memory_breakdown) and estimate_step count a ZeRO-3 layout's static memory as
    predict does: 16 bytes per parameter over the 8 ranks."""
    from perfkit.widgets import memory_breakdown, metrics_summary

    model = pk.ModelSpec.preset("llama2-13b")
    hw = pk.Hardware.preset("a100")
    par = pk.ParallelConfig(dp=8, micro_batch_size=1, num_micro_batches=4,
                            optimizer_shard=8, zero_stage=3, recompute="full")
    n = parameters_per_device(model, par)
    bars = memory_breakdown(model, hw, par, static_scheme="megatron", dtype="bf16")
    static = bars[bars["component"] != "activations"]["bytes"].sum()
    assert static == pytest.approx(16 * n / 8, rel=1e-9)
    est = pk.estimate_step(model, par, hw, static_scheme="megatron", dtype="bf16")
    assert est.static_bytes == pytest.approx(16 * n / 8, rel=1e-9)
    assert any("zero_stage 3" in a for a in est.assumptions)
    figures = metrics_summary(model, hw, par, 10.0, dtype="bf16",
                              static_scheme="megatron").set_index("key")
    assert figures.at["static_gib", "value"] * 2**30 == pytest.approx(16 * n / 8, rel=1e-9)


@pytest.mark.slow  # loads a 16-rank bundled profile
def test_the_memory_analysis_theory_counts_a_zero_stage_too() -> None:
    from perfkit.analysis import memory_vs_theory

    profile = pk.load("sample:llama2-13b-baseline-dp16", progress=False)
    job = pk.infer_job(profile)
    par = job.parallel.replace(zero_stage=3)
    frame = memory_vs_theory(profile, job.model, par, scheme="megatron")
    theory = frame[frame["item"] == "theory_static"]
    n = parameters_per_device(job.model, par)
    assert theory["bytes"].to_numpy() == pytest.approx(16 * n / (par.dp * par.cp), rel=1e-9)
    assert theory["explanation"].str.contains("zero accounting").all()
