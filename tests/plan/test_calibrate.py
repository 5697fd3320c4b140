"""Calibration against a measured step breakdown."""

import pandas as pd
import pytest

import perfkit as pk
from perfkit import plan


def measured_steps(model, par, hw, efficiency, comm_efficiency, free_s, ranks=8, steps=3):
    """A steps table as a profiler would report it for a job running at these rates."""
    truth = pk.estimate_step(model, par, hw, efficiency=efficiency,
                             comm_efficiency=comm_efficiency)
    rows = [{"rank": r, "step": s, "computing_us": truth.compute_s * 1e6,
             "comm_not_overlapped_us": truth.exposed_comm_s * 1e6,
             "free_us": free_s * 1e6, "bubble_us": 0.0}
            for r in range(ranks) for s in range(steps)]
    return pd.DataFrame(rows), truth


def test_recovers_the_rates_that_made_the_profile():
    model = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("a100")
    par = pk.ParallelConfig(dp=8, num_micro_batches=4, optimizer_shard=8)
    steps, truth = measured_steps(model, par, hw, 0.42, 0.6, 0.3)
    cal = plan.calibrate(steps, model, par, hw)
    assert cal.efficiency == pytest.approx(0.42)
    assert cal.comm_efficiency == pytest.approx(0.6)
    assert cal.overhead_s == pytest.approx(0.3)
    assert cal.measured_step_s == pytest.approx(truth.compute_s + truth.exposed_comm_s + 0.3)
    assert abs(cal.error) < 0.05


def test_bubble_and_receive_waits_are_kept_apart():
    model = pk.ModelSpec.preset("llama2-13b")
    hw = pk.Hardware.preset("ascend-910b")
    par = pk.ParallelConfig(dp=4, pp=2, num_micro_batches=16, optimizer_shard=4)
    truth = pk.estimate_step(model, par, hw, efficiency=0.5, comm_efficiency=0.7)
    # receive waits (the pipeline bubble) show up as not-overlapped communication
    steps = pd.DataFrame([{"rank": r, "step": 1, "computing_us": truth.compute_s * 1e6,
                           "comm_not_overlapped_us": (truth.exposed_comm_s + truth.bubble_s)
                           * 1e6, "bubble_us": truth.bubble_s * 1e6, "free_us": 0.0}
                          for r in range(8)])
    cal = plan.calibrate(steps, model, par, hw)
    assert cal.efficiency == pytest.approx(0.5)
    assert cal.comm_efficiency == pytest.approx(0.7)
    assert abs(cal.error) < 1e-9


def test_calibration_errors_name_the_problem():
    model = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("a100")
    par = pk.ParallelConfig(dp=8)
    with pytest.raises(pk.InvalidArgumentError, match="free_us"):
        plan.calibrate(pd.DataFrame({"computing_us": [1.0], "comm_not_overlapped_us": [1.0]}),
                       model, par, hw)
    with pytest.raises(pk.InvalidArgumentError, match="steps"):
        plan.calibrate(object(), model, par, hw)
    too_fast = pd.DataFrame({"computing_us": [1.0], "comm_not_overlapped_us": [0.0],
                             "free_us": [0.0]})
    cal = plan.calibrate(too_fast, model, par, hw)
    assert cal.efficiency == 1.0 and any("faster than the peak" in n for n in cal.notes)


def test_calibrates_on_a_loaded_profile():
    """calibrate() reads a real loaded Cluster's steps table.

    The real torch_npu sample is a CNN, so the model below is only a stand-in: the test
    checks the measured side (from the CSV files, read here with the csv module) and that
    the fitted estimate reproduces that step within 5 %.
    """
    import csv

    from shared_samples import PT_LEVEL1, shared_sample

    root = shared_sample(PT_LEVEL1)
    steps = []
    for f in sorted(root.glob("*/ASCEND_PROFILER_OUTPUT/step_trace_time.csv")):
        with f.open() as fh:
            row = next(csv.DictReader(fh))
        steps.append(float(row["Computing"]) + float(row["Communication(Not Overlapped)"])
                     + float(row["Free"]))
    profile = pk.load(root, cache=False)
    model = pk.ModelSpec(num_layers=4, hidden_size=1024, num_attention_heads=16,
                         seq_length=1024, vocab_size=32000, mlp="gated")
    par = pk.ParallelConfig(dp=2)
    cal = plan.calibrate(profile, model, par, pk.Hardware.preset("ascend-910b"))
    assert cal.measured_step_s == pytest.approx(max(steps) / 1e6)
    assert abs(cal.error) < 0.05
    assert 0 < cal.efficiency <= 1 and 0 < cal.comm_efficiency <= 1
