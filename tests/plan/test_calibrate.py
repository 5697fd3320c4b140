"""Calibration: from a step time, a steps table and a loaded profile.

The profile checks read the truth independently: the simulator's inputs from
``profiler_metadata.json`` (``perfkit_simulation``) and the measured steps from
``step_trace_time.csv`` with the csv module.
"""

import csv
import json
import statistics
from pathlib import Path

import pandas as pd
import pytest

import perfkit as pk
from perfkit import plan
from perfkit.calc.rates import Rates

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "data" / "simulated"


def _gpt_530b():
    """Korthikanti et al. 2022 Table 3/5: MT-NLG 530B, t 8, p 35, v 3, batch 280."""
    model = pk.ModelSpec(num_layers=105, hidden_size=20480, num_attention_heads=128,
                         seq_length=2048, vocab_size=51200)
    par = pk.ParallelConfig(tp=8, pp=35, vpp=3, num_micro_batches=280, recompute="full")
    return model, par, pk.Hardware.preset("a100")


def test_a_measured_step_is_never_reestimated_with_bubble_on_top():
    """Korthikanti Table 5: 530B full recompute, 49.05 s. A one-row steps table whose
    communication column holds the receive waits (no bubble_us) must give 49.05 s back,
    not 49.05 s plus a modelled bubble and communication (the old calibrate said 61.2 s)."""
    model, par, hw = _gpt_530b()
    one_row = pd.DataFrame({"computing_us": [42.0e6], "comm_not_overlapped_us": [6.5e6],
                            "free_us": [0.55e6]})
    cal = plan.calibrate(one_row, model, par, hw)
    assert cal.measured_step_s == pytest.approx(49.05)
    assert cal.estimated_step_s == pytest.approx(49.05, rel=1e-6)
    assert plan.predict(cal).step_s == pytest.approx(49.05, rel=1e-6)
    assert any("bubble" in n for n in cal.notes)  # says how it split the waits
    for source in (49.05, one_row):
        assert plan.predict(plan.calibrate(source, model, par, hw)).step_s \
            == pytest.approx(49.05, rel=1e-6)


def test_a_step_time_closes_with_one_factor_whatever_the_closing():
    """``closing="kernels"`` needs a profile's kernels: a step time has none, so it closes
    with one factor either way; an unknown closing is refused by name."""
    model, par, hw = _gpt_530b()
    one = plan.calibrate(49.05, model, par, hw)
    asked = plan.calibrate(49.05, model, par, hw, closing="kernels")
    assert asked.rates == one.rates and asked.terms == one.terms
    assert asked.rates.elementwise_efficiency is None
    with pytest.raises(pk.PerfkitError, match="closing"):
        plan.calibrate(49.05, model, par, hw, closing="two")


def test_the_kernel_closing_of_the_bundled_baseline():
    """``closing="kernels"`` on the bundled 16-rank baseline (simulated, Ascend CSVs): the
    matrix share it reads is its kernel_details.csv's (read here with ``csv``: MatMulV3
    and FlashAttention kernels over every kernel but the collectives and ApplyAdamW:
    90.6 %, the RmsNormGrad kernels of its ``attention_norm`` scope counted as norms);
    the model then computes for as long as the busiest rank did, its matrix kernels take
    that share of the computing time less the optimizer's and the memory-bound kernels
    the rest (their time read off the model's linearity in ``1/e_vec``: halving it adds
    it once)."""
    from perfkit.widgets import bundled_profile

    folder = bundled_profile("simulated/llama2-13b-baseline-dp16")
    matrix = other = 0.0
    for path in folder.rglob("kernel_details.csv"):
        with path.open(newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                kind, us = row["Type"], float(row["Duration(us)"])
                if kind.startswith("hcom_") or kind.startswith("ApplyAdamW"):
                    continue
                if kind == "MatMulV3" or kind.startswith("FlashAttentionScore"):
                    matrix += us
                else:
                    other += us
    share = matrix / (matrix + other)
    assert share == pytest.approx(0.906, abs=1e-3)
    profile = pk.load(folder)
    cal = plan.calibrate(profile, close=True, closing="kernels")
    (how,) = [h for t, _, h in cal.terms if t == "closing scale, matrix kernels"]
    assert f"take {100 * share:.1f} % of the measured computing time" in how
    busiest = profile.steps.groupby("rank")["computing_us"].mean().max() / 1e6
    computing = sum(cal.parts[p] for p in ("compute", "recompute", "optimizer"))
    assert computing == pytest.approx(busiest, rel=1e-6)

    def computing_at(e_vec: float) -> float:
        p = plan.predict(cal, overrides={"elementwise_efficiency": e_vec})
        return sum(p.parts[k] for k in ("compute", "recompute", "optimizer"))

    vector = computing_at(cal.rates.elementwise_efficiency / 2) - computing
    rest = busiest - cal.parts["optimizer"]
    assert computing - vector - cal.parts["optimizer"] == pytest.approx(share * rest,
                                                                        rel=1e-6)
    assert vector == pytest.approx((1 - share) * rest, rel=1e-5)
    # the simulated run is near the model: both factors just under 1, the GEMMs' not at
    # the peak's cap (its efficiency moved, down)
    factors = {t: v for t, v, _ in cal.terms if t.startswith("closing scale")}
    assert set(factors) == {"closing scale, matrix kernels",
                            "closing scale, memory-bound kernels"}
    assert all(0.95 < v < 1 for v in factors.values())
    assert "capped" not in how


def test_step_time_calibration_scales_the_compute_rates_only():
    model, par, hw = _gpt_530b()
    cal = plan.calibrate(49.05, model, par, hw)
    assert cal.source == "step time" and cal.closed and cal.residual == 0.0
    assert cal.measured == {"compute"}
    start = Rates().resolved(hw.name)
    factor = cal.rates.gemm_efficiency / start.gemm_efficiency
    assert cal.rates.memory_efficiency == pytest.approx(start.memory_efficiency * factor)
    assert dict(cal.rates.link_efficiency) == {}  # links keep their defaults
    assert sum(cal.parts.values()) == pytest.approx(49.05, rel=1e-6)


def test_a_step_faster_than_the_compute_allows_scales_the_links_then_says_so():
    # Llama2-13B, dp 16 over two 8-device nodes: the gradient traffic crosses RDMA
    model, hw = pk.ModelSpec.preset("llama2-13b"), pk.Hardware.preset("ascend-910b")
    par = pk.ParallelConfig(dp=16, micro_batch_size=2, optimizer_shard=16, recompute="full")
    peak = {"gemm_efficiency": 1.0, "memory_efficiency": 1.0}
    capped = plan.predict(None, model, par, hw, overrides=peak).step_s
    ideal = plan.predict(None, model, par, hw, overrides={**peak, "link_efficiency": 1.0}).step_s
    assert ideal < capped
    # between the two: compute at its cap, the links make up the rest, and the fit closes
    target = (capped + ideal) / 2
    cal = plan.calibrate(target, model, par, hw)
    assert cal.estimated_step_s == pytest.approx(target, rel=1e-6)
    assert abs(cal.residual) < 1e-6
    # the dp group (8 ranks in each of 2 nodes) is priced hierarchically, both tiers at one
    # calibrated efficiency: its reduction got faster than at the default links
    default_dp = plan.predict(None, model, par, hw, overrides=peak).parts["dp_comm"]
    assert cal.rates.gemm_efficiency == 1.0 and cal.parts["dp_comm"] < default_dp
    assert any("link efficiencies were scaled" in n for n in cal.notes)
    # faster than even that: the residual says how far off, never a closed-looking 0
    cal = plan.calibrate(0.9 * ideal, model, par, hw)
    assert cal.residual == pytest.approx(cal.estimated_step_s / (0.9 * ideal) - 1, rel=1e-9)
    assert cal.residual > 0.1 and any("stays slower" in n for n in cal.notes)


def test_steps_table_splits_compute_communication_and_idle():
    """A table made of known parts gives the parts back (and the measured total)."""
    model = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("a100")
    par = pk.ParallelConfig(dp=8, tp=2, num_micro_batches=4, optimizer_shard=8)
    truth = plan.predict(None, model, par, hw)
    p = truth.parts
    computing = p["compute"] + p["recompute"] + p["optimizer"]
    exposed = sum(v for k, v in p.items() if k.endswith("_comm"))
    rows = [{"rank": r, "step": s, "computing_us": computing * 1.25e6,
             "comm_not_overlapped_us": exposed * 2e6, "free_us": 0.05e6, "bubble_us": 0.0}
            for r in range(4) for s in range(3)]
    cal = plan.calibrate(pd.DataFrame(rows), model, par, hw)
    assert cal.measured_step_s == pytest.approx(computing * 1.25 + exposed * 2 + 0.05)
    assert abs(cal.residual) < 0.02
    got = cal.parts
    assert got["compute"] + got["recompute"] + got["optimizer"] == pytest.approx(
        computing * 1.25, rel=0.02)
    assert sum(v for k, v in got.items() if k.endswith("_comm")) == pytest.approx(
        exposed * 2, rel=0.05)
    assert got["overhead"] == pytest.approx(0.05, rel=0.05)


def test_calibration_errors_name_the_problem():
    model = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("a100")
    par = pk.ParallelConfig(dp=8)
    with pytest.raises(pk.InvalidArgumentError, match="free_us"):
        plan.calibrate(pd.DataFrame({"computing_us": [1.0], "comm_not_overlapped_us": [1.0]}),
                       model, par, hw)
    with pytest.raises(pk.InvalidArgumentError, match="source"):
        plan.calibrate(object(), model, par, hw)
    with pytest.raises(pk.InvalidArgumentError, match="model"):
        plan.calibrate(2.5)
    with pytest.raises(pk.InvalidArgumentError, match="positive"):
        plan.calibrate(-1.0, model, par, hw)
    too_fast = plan.calibrate(1e-4, model, par, hw)
    assert any("faster than the model allows" in n for n in too_fast.notes)


def _simulation_inputs(folder: Path) -> dict:
    meta = next(folder.glob("*/profiler_metadata.json"))
    return json.loads(meta.read_text())["perfkit_simulation"]


def _measured_step_s(folder: Path) -> float:
    """Slowest rank's Computing + Communication(Not Overlapped) + Free, from the CSVs."""
    worst = 0.0
    for f in folder.glob("*/ASCEND_PROFILER_OUTPUT/step_trace_time.csv"):
        with f.open() as fh:
            for row in csv.DictReader(fh):
                worst = max(worst, float(row["Computing"])
                            + float(row["Communication(Not Overlapped)"]) + float(row["Free"]))
    return worst / 1e6


@pytest.fixture(scope="module")
def baseline_calibration():
    return plan.calibrate(pk.load(SIM / "llama2-13b-baseline-dp16", cache=False))


def test_profile_calibration_recovers_what_made_the_profile(baseline_calibration):
    cal = baseline_calibration
    inputs = _simulation_inputs(SIM / "llama2-13b-baseline-dp16")
    settings = inputs["settings"]
    assert cal.source == "profile" and not cal.closed
    assert cal.measured >= {"compute", "dp", "overhead"}
    assert cal.rates.gemm_efficiency == pytest.approx(settings["efficiency"], rel=0.02)
    assert cal.rates.memory_efficiency == pytest.approx(settings["memory_efficiency"],
                                                        rel=0.03)
    assert cal.rates.link_efficiency["dp"] == pytest.approx(settings["comm_efficiency"],
                                                            rel=0.02)
    assert cal.rates.dp_buckets == settings["dp_buckets"]
    assert cal.rates.recompute_style == settings["recompute_style"] == "needed"
    assert cal.job.activation_model.flash_attention
    assert cal.measured_step_s == pytest.approx(_measured_step_s(SIM / "llama2-13b-baseline-dp16"))


def test_bundled_baseline_predicts_its_own_layout_within_the_band(baseline_calibration):
    """The Planner's first check: the profiled layout, predicted, lands on the measurement."""
    cal = baseline_calibration
    measured = _measured_step_s(SIM / "llama2-13b-baseline-dp16")
    pred = plan.predict(cal)
    assert pred.low_s <= measured <= pred.high_s
    assert abs(cal.residual) < 0.03
    assert pred.changes == ()


def test_bundled_baseline_predicts_the_tuned_layout(baseline_calibration):
    """Calibrated on the baseline only, the tuned layout's step (its own profile, not used
    for fitting) falls in the band; so does the pipelined step the journal recorded."""
    tuned = SIM / "llama2-13b-tuned-dp8-pp2"
    layout = _simulation_inputs(tuned)["parallel"]
    par = pk.ParallelConfig(dp=layout["dp"], pp=layout["pp"],
                            num_micro_batches=layout["num_micro_batches"],
                            optimizer_shard=layout["optimizer_shard"],
                            recompute=layout["recompute"],
                            recompute_layers=tuple(layout["recompute_layers"]))
    pred = plan.predict(baseline_calibration, parallel=par)
    measured = _measured_step_s(tuned)
    assert pred.low_s <= measured <= pred.high_s
    assert pred.step_s == pytest.approx(measured, rel=0.01)
    assert "pp 1 → 2" in pred.changes
    runs = pk.Journal.bundled().runs().set_index("label")
    pred = plan.predict(baseline_calibration, parallel=par.replace(
        recompute="full", recompute_layers=None))
    assert pred.step_s == pytest.approx(runs.loc["pipelined", "step_time_s"], rel=0.01)


@pytest.mark.shared_samples
def test_calibrates_on_a_real_loaded_profile():
    """A real torch_npu profile (a CNN, so the model is a stand-in): the measured side comes
    from its CSV files, and closing the fit reproduces it part by part, as a steps table's
    closing does: the busiest rank's computing time, the median rank's exposed
    communication (no bubble: one stage) and the median rank's free time (one step per
    rank, so the least idle step is the step). Those aggregates of two ranks are 1.9 % short
    of the slowest rank's step (rank 0's communication is the longer)."""
    from shared_samples import PT_LEVEL1, shared_sample

    root = shared_sample(PT_LEVEL1)
    rows = []
    for f in sorted(root.glob("*/ASCEND_PROFILER_OUTPUT/step_trace_time.csv")):
        with f.open() as fh:
            rows.append({k: float(v) for k, v in next(csv.DictReader(fh)).items()})
    steps = [r["Computing"] + r["Communication(Not Overlapped)"] + r["Free"] for r in rows]
    profile = pk.load(root, cache=False)
    model = pk.ModelSpec(num_layers=4, hidden_size=1024, num_attention_heads=16,
                         seq_length=1024, vocab_size=32000, mlp="gated")
    cal = plan.calibrate(profile, model, pk.ParallelConfig(dp=2),
                         pk.Hardware.preset("ascend-910b"), close=True)
    assert cal.measured_step_s == pytest.approx(max(steps) / 1e6)
    parts = cal.parts
    assert parts["compute"] + parts["recompute"] + parts["optimizer"] == pytest.approx(
        max(r["Computing"] for r in rows) / 1e6, rel=1e-6)
    # (within 1 %: the links' one factor is the ratio of the model's time to the measured,
    # and the model's per-transfer latency does not move with a link's efficiency)
    assert parts["dp_comm"] == pytest.approx(statistics.median(
        r["Communication(Not Overlapped)"] - r["Bubble"] for r in rows) / 1e6, rel=0.01)
    assert parts["overhead"] == pytest.approx(statistics.median(r["Free"] for r in rows)
                                              / 1e6, rel=1e-6)
    assert cal.estimated_step_s == pytest.approx(cal.measured_step_s, rel=0.02)
    assert 0 < cal.rates.gemm_efficiency <= 1
    assert cal.to_frame().columns.tolist() == ["term", "value", "how"]


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_sequence_parallelism_moves_a_simulated_step_as_predicted(tmp_path):
    """A measured pair (simulated): calibrated on the plain tensor-parallel run, the step
    model moves to sequence parallelism (norms on 1/t of the tokens, a gather and a
    scatter for each all-reduce, the backward's second gather) as the simulated run does.
    The two steps are read from their CSVs; the calibrating run's own residual cancels in
    the ratio."""
    from perfkit.simulate import simulate

    model = pk.ModelSpec.preset("llama2-7b").replace(num_layers=2)
    hw = pk.Hardware.preset("ascend-910b2")
    plain = pk.ParallelConfig(tp=4, num_micro_batches=2, recompute="selective")
    sp = plain.replace(sequence_parallel=True)
    a = simulate(model, plain, hw, steps=2, out=tmp_path / "plain")
    b = simulate(model, sp, hw, steps=2, out=tmp_path / "sp")
    cal = plan.calibrate(pk.load(a, cache=False, progress=False), model=model, hardware=hw)
    assert cal.job.parallel.sequence_parallel is False
    assert pk.infer_job(pk.load(b, cache=False, progress=False)).parallel.sequence_parallel
    predicted = plan.predict(cal, parallel=sp)
    assert predicted.changes == ("sequence_parallel False → True",)
    measured = _measured_step_s(b) / _measured_step_s(a)
    assert measured < 0.99  # the shorter norms outweigh the redone gathers here
    assert predicted.step_s / plan.predict(cal).step_s == pytest.approx(measured, abs=0.01)


@pytest.mark.parametrize("tp", [1, 4])
def test_a_simulated_run_calibrates_to_the_rates_that_made_it(tmp_path, tp):
    """The simulator times its kernels with the step model's functions, so a calibration
    on its profile must close (residual under 1 %) and give back the settings (read from
    ``profiler_metadata.json``): the kernels' written shapes and dtypes must say the bytes
    they were timed by."""
    from perfkit.simulate import simulate

    model = pk.ModelSpec.preset("llama2-7b").replace(num_layers=2)
    hw = pk.Hardware.preset("ascend-910b2")
    root = simulate(model, pk.ParallelConfig(tp=tp, num_micro_batches=2,
                                             recompute="selective"),
                    hw, steps=2, out=tmp_path / "run", noise=0.0)
    cal = plan.calibrate(pk.load(root, cache=False, progress=False), model=model, hardware=hw)
    settings = _simulation_inputs(root)["settings"]
    assert abs(cal.residual) < 0.01
    assert cal.rates.gemm_efficiency == pytest.approx(settings["efficiency"], rel=0.02)
    assert cal.rates.memory_efficiency == pytest.approx(settings["memory_efficiency"],
                                                        rel=0.03)
    assert plan.predict(cal).step_s == pytest.approx(_measured_step_s(root), rel=0.01)


def test_the_kernel_closing_falls_back_to_kernel_kind_without_an_autograd_thread():
    """The bundled baseline (simulated, Ascend CSVs) has no host operators that say which
    kernels the backward launched: ``closing="kernels"`` closes it by kernel kind alone,
    two factors (the matrix kernels, the memory-bound kernels of both passes at one
    efficiency), says why in the notes, and the Planner's words name those two factors."""
    from perfkit.plan.calibrate import (
        BACKWARD_CLOSING,
        FORWARD_CLOSING,
        MATRIX_CLOSING,
        VECTOR_CLOSING,
    )
    from perfkit.widgets import bundled_profile
    from perfkit.widgets.prediction_fit import _closing_words

    profile = pk.load(bundled_profile("simulated/llama2-13b-baseline-dp16"))
    cal = plan.calibrate(profile, close=True, closing="kernels")
    assert any("not by pass" in n and "no autograd thread" in n for n in cal.notes)
    found = {t: v for t, v, _ in cal.terms}
    assert MATRIX_CLOSING in found and VECTOR_CLOSING in found
    assert FORWARD_CLOSING not in found and BACKWARD_CLOSING not in found
    assert cal.rates.backward_elementwise_efficiency is None
    assert cal.rates.backward_vector_efficiency == cal.rates.elementwise_efficiency
    assert f"scaled by ×{found[MATRIX_CLOSING]:.3g}, toward their share of the profile's " \
        f"kernel time, and the memory-bound kernels' by ×{found[VECTOR_CLOSING]:.3g}, so " \
        "that the model's computing time" in _closing_words(cal)
