"""Sanity guards: a figure that cannot be right carries a warning naming the inputs."""

from __future__ import annotations

import math

import pytest

import perfkit as pk
from perfkit.format import ratio_text
from perfkit.guards import (
    MEMORY_RATIO,
    STEP_RATIO,
    WARNING_MARK,
    check_memory,
    check_step,
    check_utilization,
)

GIB = 2**30


def test_utilization_above_one_is_flagged_and_kept() -> None:
    ok = check_utilization(0.42)
    assert ok.ok and ok.value == 0.42 and ok.text() == "42.0 %"
    assert check_utilization(1.0).ok  # exactly the peak is possible
    bad = check_utilization(2.375, "MFU")
    assert not bad.ok and bad.value == 2.375  # the value is never changed
    assert "MFU 237.5 %" in bad.warning and "impossible" in bad.warning
    assert bad.text().startswith("237.5 %") and WARNING_MARK in bad.text()
    assert check_utilization(math.nan).ok  # nothing to judge


@pytest.mark.parametrize("ratio, flagged", [(1.0, False), (MEMORY_RATIO, False),
                                            (MEMORY_RATIO * 1.01, True),
                                            (1 / MEMORY_RATIO, False),
                                            (0.99 / MEMORY_RATIO, True)])
def test_memory_is_flagged_outside_half_to_double(ratio: float, flagged: bool) -> None:
    measured = 10 * GIB
    g = check_memory(ratio * measured, measured)
    assert (not g.ok) is flagged
    if flagged:
        assert f"{ratio_text(ratio)} the measured peak (10.0 GiB)" in g.warning
    assert check_memory(5 * measured, None).ok  # no measurement, no judgement


@pytest.mark.parametrize("ratio, flagged", [(STEP_RATIO, False), (STEP_RATIO * 1.01, True),
                                            (1 / STEP_RATIO, False),
                                            (0.99 / STEP_RATIO, True)])
def test_step_is_flagged_beyond_three_times(ratio: float, flagged: bool) -> None:
    g = check_step(ratio * 2.0, 2.0)
    assert (not g.ok) is flagged


def test_warnings_name_the_disagreeing_inputs() -> None:
    model = pk.ModelSpec(num_layers=2, hidden_size=128, num_attention_heads=4, seq_length=64,
                         vocab_size=256, ffn_hidden_size=384, mlp="gated")
    job = pk.infer_job(_profile(model))
    # the profile shows 2 layers; a config describing 48 disagrees
    full = job.with_overrides(num_layers=48)
    assert full.problems() == ["the job has 48 layers (user) but the profile shows 2 (2 per "
                               "stage)"]
    g = check_utilization(1.5, "MFU", full)
    assert "the job has 48 layers (user) but the profile shows 2" in g.warning
    # without a disagreement the warning lists the inputs and their sources
    g = check_step(job.step_time_s * 10, job.step_time_s, job)
    assert "(profile)" in g.warning and "ascend-910b" in g.warning


def _profile(model: pk.ModelSpec):
    import tempfile

    out = pk.simulate(model, pk.ParallelConfig(), pk.Hardware.preset("ascend-910b"), steps=1,
                      out=tempfile.mkdtemp(prefix="perfkit-guard-"), aic_metrics=None,
                      trace_kernels=False)
    return pk.load(out, cache=False)


def test_a_ratio_far_below_one_is_a_fraction_not_an_exponent() -> None:
    # the MindSpore CPU case: 0.177 µs predicted against 90.4 ms measured
    g = check_step(0.177e-6, 90.4e-3)
    assert "is 1/510,000 of the measured step (90.4 ms)" in g.warning  # 90.4e-3/0.177e-6
    assert "e-0" not in g.warning

