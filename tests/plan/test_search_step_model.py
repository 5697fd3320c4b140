"""search ranks with predict's step model: by default (given neither rates nor a
calibration) and at ``rates=Rates()`` at perfkit's default rates, or at a calibration's, and
each row is then
what :func:`perfkit.plan.predict` gives for the same layout — its step, band, memory and
MFU — including a run type the hardware has no peak for and a calibration on an fp8 run
searched without ``dtype`` (its peak is the calibrating run's, as predict takes it)."""

import dataclasses

import numpy as np
import pytest

import perfkit as pk
from perfkit import plan
from perfkit.calc.rates import Rates

LLAMA = pk.ModelSpec.preset("llama2-13b")
NPU = pk.Hardware.preset("ascend-910b")
H100 = pk.Hardware.preset("h100")


def _check_rows(frame, predict_row, count, rng):
    for i in rng.choice(len(frame), min(count, len(frame)), replace=False):
        row = frame.iloc[int(i)]
        pred = predict_row(plan.to_parallel_config(row))
        assert row["step_s"] == pytest.approx(pred.step_s, rel=1e-9)
        assert row["low_s"] == pytest.approx(pred.low_s, rel=1e-9)
        assert row["high_s"] == pytest.approx(pred.high_s, rel=1e-9)
        assert row["memory_bytes"] == pytest.approx(pred.memory_bytes, rel=1e-9)
        assert row["mfu"] == pytest.approx(pred.mfu, rel=1e-9)
        assert bool(row["fits"]) == pred.fits


@pytest.mark.parametrize("dtype", [None, "fp32"])  # fp32: the 910B lists no fp32 peak
def test_uncalibrated_rows_equal_predict_at_the_same_rates(dtype):
    rates = Rates(gradient_bytes=4.0)
    am = pk.ActivationModel.mindformers()
    frame = plan.search(LLAMA, NPU, 16, 256, rates=rates, dtype=dtype, activation_model=am,
                        static_scheme="megatron", include_rejected=True)
    assert {"low_s", "high_s", "recompute_s", "optimizer_s"} <= set(frame.columns)
    _check_rows(frame, lambda par: plan.predict(
        None, LLAMA, par, NPU, dtype=dtype, activation_model=am, static_scheme="megatron",
        overrides={"gradient_bytes": 4.0}), 12, np.random.default_rng(1))
    # the order is predict's: ranked rows that fit come fastest first
    fits = frame[frame["fits"].astype(bool)]
    assert (np.diff(fits["step_s"].to_numpy()) >= 0).all()


def test_uncalibrated_moe_rows_equal_predict():
    mixtral = pk.ModelSpec.preset("mixtral-8x7b")
    frame = plan.search(mixtral, H100, 32, 256, rates=Rates(), include_rejected=True,
                        space=plan.SearchSpace(expert_tp=(None, 1)))
    _check_rows(frame, lambda par: plan.predict(None, mixtral, par, H100), 8,
                np.random.default_rng(2))


def test_uneven_stage_rows_equal_predict():
    """Llama 3 405B's 126 layers on 8 and 16 stages, interleaved or not: predict splits
    such stages as torchtitan does, and so does the search."""
    llama = pk.ModelSpec.preset("llama3-405b")
    space = plan.SearchSpace(tp=(8,), pp=(8, 16), cp=(1,), micro_batch_size=(1,),
                             vpp=(1, 2))
    frame = plan.search(llama, H100, 1024, 512, space=space, include_rejected=True)
    assert (126 % (frame["pp"] * frame["vpp"]) != 0).all()
    _check_rows(frame, lambda par: plan.predict(None, llama, par, H100), 14,
                np.random.default_rng(3))


@pytest.mark.parametrize("gradient_bytes", [None, 4.0])
def test_the_default_search_is_predicts_uncalibrated_model(gradient_bytes):
    """Given neither rates nor a calibration, every row is ``predict(None, ...)`` of its
    layout (the step model at perfkit's default rates), as on the Planner tab, and
    ``estimate_step``'s step for it: one model."""
    am = pk.ActivationModel.mindformers()
    frame = plan.search(LLAMA, NPU, 16, 256, activation_model=am, static_scheme="megatron",
                        include_rejected=True, gradient_bytes=gradient_bytes)
    _check_rows(frame, lambda par: plan.predict(
        None, LLAMA, par, NPU, activation_model=am, static_scheme="megatron",
        overrides={"gradient_bytes": gradient_bytes}), 12, np.random.default_rng(4))
    row = frame.iloc[0]
    est = pk.estimate_step(LLAMA, plan.to_parallel_config(row), NPU, activation_model=am,
                           static_scheme="megatron", gradient_bytes=gradient_bytes)
    assert est.step_s == pytest.approx(row["step_s"], rel=1e-9)
    assert est.memory_bytes == pytest.approx(row["memory_bytes"], rel=1e-9)


def test_a_what_ifs_round_numbers_are_the_step_model_at_those_rates():
    """``efficiency``/``comm_efficiency``/overlap/``overhead_s`` change the rates, not the
    model: each row is ``predict`` at ``Rates().with_terms(...)``, and ``estimate_step``
    with the same terms; every GEMM of a layout then runs at exactly that share of the
    peak (its FLOPs over the time the step model gives it)."""
    terms = {"efficiency": 0.4, "comm_efficiency": 0.7, "dp_overlap": 0.5, "overhead_s": 0.2}
    frame = plan.search(LLAMA, NPU, 16, 256, include_rejected=True, **terms)
    rates = Rates().with_terms(0.4, 0.7, {"dp": 0.5}, 0.2)
    _check_rows(frame, lambda par: plan.predict(None, LLAMA, par, NPU, overrides={
        f.name: getattr(rates, f.name) for f in dataclasses.fields(Rates)}), 8,
        np.random.default_rng(5))
    row = frame.iloc[0]
    est = pk.estimate_step(LLAMA, plan.to_parallel_config(row), NPU, **terms)
    assert est.step_s == pytest.approx(row["step_s"], rel=1e-9)
    assert est.overhead_s == pytest.approx(0.2)
    # one GEMM at 40 % of the 910B's peak: 2·M·N·K FLOPs over its time
    m, n, k = 4096, 5120, 13824
    seconds = pk.calc.timing.gemm_seconds(2.0 * m * n * k, 2.0 * (m * k + k * n + m * n),
                                          NPU.peak(), NPU.memory_bandwidth, rates)
    assert 2.0 * m * n * k / seconds == pytest.approx(0.4 * NPU.peak(), rel=1e-9)


def test_a_calibration_on_an_fp8_run_searched_without_dtype_is_priced_as_predict():
    """predict takes the calibrating run's type (fp8: twice the bf16 peak on an H100);
    the search without ``dtype`` must too, not the hardware's default bf16 peak."""
    model = pk.ModelSpec.preset("llama2-7b")
    cal = plan.calibrate(3.0, model, pk.ParallelConfig(dp=4, tp=2, num_micro_batches=8),
                         H100, dtype="fp8")
    assert H100.peak("fp8") == 2 * H100.peak("bf16")
    frame = plan.search(model, H100, 8, 32, calibration=cal, include_rejected=True,
                        space=plan.SearchSpace(cp=(1,)))
    _check_rows(frame, lambda par: plan.predict(cal, parallel=par), 10,
                np.random.default_rng(3))


def test_rates_bad_input():
    model = pk.ModelSpec.preset("llama2-7b")
    cal = plan.calibrate(3.0, model, pk.ParallelConfig(dp=8, num_micro_batches=8), H100)
    with pytest.raises(pk.InvalidArgumentError, match="rates"):
        plan.search(model, H100, 8, 64, calibration=cal, rates=Rates())
    with pytest.raises(pk.InvalidArgumentError, match="rates"):
        plan.search(model, H100, 8, 64, rates={"gemm_efficiency": 0.5})
