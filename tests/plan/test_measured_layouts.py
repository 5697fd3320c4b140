"""The planner's predictions checked against measured steps: one Llama trained on one H100
at seven layouts, in two sets each recorded in one process on one machine
(tests/data/kineto_llama_layouts_h100 and kineto_llama_shapes_h100; PROVENANCE.md there).

Calibrated on each set's layout ``a`` (8 layers, sequence 2,048, micro-batch 4, no
recompute), the model predicts the set's other layouts: ``b`` full recompute, ``c``
micro-batch 8, ``d`` micro-batch 8 and full recompute; ``e`` 16 layers, ``f`` sequence
4,096 at micro-batch 2, ``g`` micro-batch 2. The reference is the recording script's own
record, ``environment.json``: per layout the median of 20 steps timed with CUDA events with
the profiler off. The profiled step (each trace's device step, first to last device task
its ProfilerStep launched and the idle tail, median of its two steps) and the device's
computing time (the union of its device tasks' intervals per step) are read here from the
raw JSON.

Numbers of the fixtures (ms), recorded 2026-11-26, perfkit at this commit::

    layout  timed   profiled  unclosed (vs timed)  closed (vs timed)
    a        83.77    87.75    60.14 (-28.2 %)      85.23 (+1.7 %)
    b       107.73   120.68    77.71 (-27.9 %)     110.57 (+2.7 %)
    c       152.80   153.97   108.28 (-29.1 %)     157.76 (+3.2 %)
    d       190.39   190.82   140.89 (-26.0 %)     205.93 (+8.2 %)
    a        83.02    95.21    59.07 (-28.9 %)      84.14 (+1.3 %)
    e       153.36   155.09   110.43 (-28.0 %)     157.41 (+2.6 %)
    f        86.45    90.22    61.05 (-29.4 %)      87.07 (+0.7 %)
    g        50.90    63.59    35.04 (-31.2 %)      47.87 (-5.9 %)

(``python benchmarks/bench_predict.py --measured`` prints them.)

Every calibration here counts the element-wise work as fused library kernels do
(``rates=Rates()``, the count these figures were fixed with; without rates,
``calibrate`` now reads the eager autocast count from the profile,
``tests/plan/test_elementwise_read.py``, which closes most of the unclosed gap below).

Unclosed (``plan.calibrate(profile)``, close=False) the model misses the run's unfused
RMSNorm and rotary embedding (element-wise kernels its memory-bound work does not count:
33.5 ms of element-wise and 4.6 ms of reduction kernels per step of ``a``), but its ratios
to ``a`` are right. Closed (what the Planner does), every compute rate but the optimizer's
is scaled so that the model's computing time is the measured one (80.3 ms in both sets:
the device's work does not change under the profiler), and the idle time is that of the
least idle step (the profiler's own host stalls add idle time to the others: 3.8 and 25.9
ms in the two steps of the second set's ``a``), so the closed model gives ``a`` its timed
step within 2 % although its profiled steps are 4.8 % and 14.7 % longer.

Tolerances, from the fixtures' own numbers:

* :data:`RATIO_TOL` = 8 %, the run-to-run spread of the timed steps themselves (b's 20
  timed steps range 101.43 to 109.52 ms, 7.5 % of their median): a prediction that
  changes one knob of the calibrating layout is held to it, against the timed step and
  as a ratio to ``a``; ``d`` changes two knobs, each held to it: (1 + 8 %)² − 1.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import statistics
from pathlib import Path

import pytest
from library_count import library_calibrate as _calibrate
from raw_kineto import raw_computing_s, raw_device_steps

import perfkit as pk
from perfkit import plan
from perfkit.format import time_text
from perfkit.plan.calibrate import (
    BACKWARD_CLOSING,
    CLOSINGS,
    FORWARD_CLOSING,
    MATRIX_CLOSING,
    NOT_CLOSED_NOTE,
    VECTOR_CLOSING,
)
from perfkit.plan.predict import STYLE_NOTE, band_residual
from perfkit.widgets.prediction_fit import _closing_words, fit_job, predict_layout

DATA = Path(__file__).resolve().parents[1] / "data"
SETS = {"kineto_llama_layouts_h100": ("b", "c", "d"),
        "kineto_llama_shapes_h100": ("e", "f", "g")}
#: the same Llama's layouts a and c on an H200 (PROVENANCE.md there)
H200 = "kineto_llama_h200"
#: the timed steps' own run-to-run spread (see the module docstring)
RATIO_TOL = 0.08
#: layouts two knobs away from ``a``
TWO_KNOBS = {"d"}
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def _env(folder: str) -> dict:
    return json.loads((DATA / folder / "environment.json").read_text())


def _trace(folder: str, layout: str) -> Path:
    return DATA / folder / f"{layout}.pt.trace.json.gz"


def _timed_s(folder: str, layout: str) -> float:
    """The step timed without the profiler: median of the recorded 20 (environment.json)."""
    return statistics.median(_env(folder)["layouts"][layout]["timed_steps_ms"]) / 1e3


def _profiled_s(folder: str, layout: str) -> float:
    """The trace's device step, median over its steps, from the raw JSON."""
    steps, on_device = raw_device_steps(_trace(folder, layout))
    assert on_device
    return float(statistics.median(steps.values())) / 1e6


def _computing_s(folder: str, layout: str) -> dict[int, float]:
    """Step -> seconds the device computes (:func:`raw_kineto.raw_computing_s`)."""
    return raw_computing_s(_trace(folder, layout))


def _layout(cal_job: object, env: dict, layout: str) -> tuple[pk.ModelSpec,
                                                               pk.ParallelConfig]:
    rec = env["layouts"][layout]
    model = dataclasses.replace(cal_job.model, num_layers=rec.get("layers", 8),
                                seq_length=rec.get("seq", 2048))
    parallel = dataclasses.replace(cal_job.parallel, micro_batch_size=rec["micro_batch"],
                                   recompute=rec["recompute"])
    return model, parallel


def _predict(cal: plan.Calibration, folder: str, layout: str) -> float:
    env = _env(folder)
    model, parallel = _layout(cal.job, env, layout)
    return plan.predict(cal, model=model, parallel=parallel,
                        global_batch_size=env["layouts"][layout]["micro_batch"],
                        seq_length=model.seq_length).step_s


def _tolerance(layout: str) -> float:
    return (1 + RATIO_TOL) ** 2 - 1 if layout in TWO_KNOBS else RATIO_TOL


@pytest.fixture(scope="module", params=sorted(SETS))
def measured_set(request) -> tuple[str, pk.Profile]:
    return request.param, pk.load(_trace(request.param, "a"), cache=False)


def test_the_recorded_medians_are_the_timed_steps():
    """environment.json's medians and steps are each rounded to 3 decimals (ms): within 1 µs."""
    for folder in (*SETS, H200):
        for layout, rec in _env(folder)["layouts"].items():
            assert len(rec["timed_steps_ms"]) == 20
            assert _timed_s(folder, layout) * 1e3 == pytest.approx(
                rec["timed_step_median_ms"], abs=1e-3)


def test_the_two_sets_time_layout_a_alike():
    """The same layout on two machines of one kind: within 1 % (83.77 and 83.02 ms)."""
    a = [_timed_s(folder, "a") for folder in SETS]
    assert a[0] == pytest.approx(a[1], rel=0.01)


@pytest.mark.parametrize("close", [False, True])
def test_ratios_to_the_calibrating_layout_are_the_timed_ones(measured_set, close):
    folder, profile = measured_set
    cal = _calibrate(profile, close=close)
    base = _predict(cal, folder, "a")
    for layout in SETS[folder]:
        want = _timed_s(folder, layout) / _timed_s(folder, "a")
        assert _predict(cal, folder, layout) / base == pytest.approx(
            want, rel=_tolerance(layout)), layout


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_closing_reproduces_the_measured_computing_time(measured_set):
    """The closed model computes for as long as the device did (mean over the steps,
    read from the raw JSON), and idles as long as the least idle step (its profiled step
    less its computing time)."""
    folder, profile = measured_set
    cal = _calibrate(profile, close=True)
    assert cal.closed
    busy = _computing_s(folder, "a")
    steps, _ = raw_device_steps(_trace(folder, "a"))
    computing = sum(cal.parts[p] for p in ("compute", "recompute", "optimizer"))
    # (within 0.1 µs: the raw reading adds float microseconds, perfkit whole nanoseconds)
    assert computing == pytest.approx(statistics.mean(busy.values()), abs=1e-7)
    least_idle = min(float(steps[s]) / 1e6 - busy[s] for s in busy)
    assert cal.parts["overhead"] == pytest.approx(least_idle, abs=1e-7)
    # the optimizer keeps the time its kernels were measured at
    raw = _calibrate(profile, close=False)
    assert cal.parts["optimizer"] == pytest.approx(raw.parts["optimizer"], rel=1e-9)


@pytest.mark.parametrize("closing", CLOSINGS)
def test_closed_calibration_predicts_the_timed_steps(measured_set, closing):
    """Both closings predict every layout within the tolerance (kernels: ``d`` +7.4 %,
    ``g`` −6.6 %; first and second set, 2026-11-26)."""
    folder, profile = measured_set
    cal = _calibrate(profile, close=True, closing=closing)
    for layout in ("a", *SETS[folder]):
        assert _predict(cal, folder, layout) == pytest.approx(
            _timed_s(folder, layout), rel=_tolerance(layout)), layout


def test_the_closed_band_holds_the_timed_step_one_knob_away(measured_set):
    """The band of a profile's closed fit counts how far the closed model's step is from
    the profiled one (not the residual the closing took out: that made ±33 % bands), and
    still holds every timed step one knob away (``d``, two knobs, +8.2 %, falls just out
    of its ±6.6 %)."""
    folder, profile = measured_set
    cal = _calibrate(profile, close=True)
    r = cal.estimated_step_s / _profiled_s(folder, "a") - 1
    assert band_residual(cal) == pytest.approx(r, abs=1e-6)
    env = _env(folder)
    for layout in ("a", *SETS[folder]):
        if layout in TWO_KNOBS:
            continue
        model, parallel = _layout(cal.job, env, layout)
        pred = plan.predict(cal, model=model, parallel=parallel,
                            global_batch_size=env["layouts"][layout]["micro_batch"],
                            seq_length=model.seq_length)
        assert abs(r) <= pred.band <= abs(r) + 0.2
        assert pred.low_s <= _timed_s(folder, layout) <= pred.high_s, layout


def test_closing_brings_every_layout_nearer_the_timed_step(measured_set):
    """The unclosed model misses the same unfused element-wise work at every layout, so
    its predictions are all low by about its residual; closing removes that."""
    folder, profile = measured_set
    raw = _calibrate(profile, close=False)
    closed = _calibrate(profile, close=True)
    assert raw.residual == pytest.approx(raw.predicted_step_s / _profiled_s(folder, "a") - 1,
                                         rel=1e-6)
    for layout in ("a", *SETS[folder]):
        t = _timed_s(folder, layout)
        assert abs(_predict(closed, folder, layout) / t - 1) \
            < abs(_predict(raw, folder, layout) / t - 1), layout


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_planner_predicts_the_timed_steps(measured_set):
    """What the Planner shows (``fit_job`` then ``predict_layout``), calibrated on the open
    profile of ``a``, and the words it says of its calibration."""
    folder, profile = measured_set
    job = pk.infer_job(profile)
    fit = fit_job(profile, job)
    assert fit.source == "profile"
    assert fit.calibration.closed
    env = _env(folder)
    assert fit.prediction.step_s == pytest.approx(_timed_s(folder, "a"), rel=RATIO_TOL)
    for layout in SETS[folder]:
        model, parallel = _layout(job, env, layout)
        if model != job.model:  # the Planner changes the layout, not the model (e, f)
            continue
        step = predict_layout(fit, job, parallel).step_s
        assert step == pytest.approx(_timed_s(folder, layout), rel=_tolerance(layout)), \
            layout
    # the sentence: how far the model was before closing (the unclosed model against the
    # profiled step read here), the measured computing time it was closed on, and the
    # closed model's step for this layout against the profiled one (the Planner counts
    # the element-wise work as the profile shows it, as calibrate does given no rates)
    unclosed = plan.calibrate(profile, close=False).predicted_step_s
    profiled = _profiled_s(folder, "a")
    gap = unclosed / profiled - 1  # said as a signed share with a minus sign (format.py)
    assert f"Before closing, the fitted model was {'+' if gap > 0 else '−'}" \
        f"{abs(gap) * 100:.1f} % off the measured step" in fit.sentence
    busy = statistics.mean(_computing_s(folder, "a").values())
    assert f"the model's computing time is the busiest rank's measured one " \
        f"({time_text(busy * 1e6)} per step; the parts below are the slowest rank's)" \
        in fit.sentence
    off = fit.prediction.step_s / profiled - 1
    assert f"against the measured {time_text(profiled * 1e6)} " \
        f"({'+' if off > 0 else '−'}{abs(off) * 100:.1f} %" in fit.sentence


def test_the_closing_words_say_what_the_closing_did(measured_set):
    """The Planner's words on a closed fit: the factor, capped at the peak, or no factor
    needed; closed by kernel kind and pass (``closing="kernels"``), its three factors (the
    two-factor words of a profile whose passes cannot be told apart:
    ``tests/plan/test_calibrate.py``)."""
    _, profile = measured_set
    cal = _calibrate(profile, close=True)
    (factor,) = [v for t, v, _ in cal.terms if t == "closing scale"]
    assert f"scaled by one factor, ×{factor:.3g}, so that the model's computing time" \
        in _closing_words(cal)
    capped = dataclasses.replace(cal, notes=(*cal.notes, NOT_CLOSED_NOTE))
    assert "as far as the model's highest rates allow" in _closing_words(capped)
    unscaled = dataclasses.replace(cal, terms=tuple(t for t in cal.terms
                                                    if t[0] != "closing scale"))
    assert _closing_words(unscaled) == "."
    split = _calibrate(profile, close=True, closing="kernels")
    found = {t: v for t, v, _ in split.terms}
    assert "closing scale" not in found and VECTOR_CLOSING not in found
    assert f"scaled by ×{found[MATRIX_CLOSING]:.3g}, toward their share of the profile's " \
        f"kernel time, and the memory-bound kernels' by ×{found[FORWARD_CLOSING]:.3g} in " \
        f"the forward pass and ×{found[BACKWARD_CLOSING]:.3g} in the backward, toward " \
        "each pass's share of the profile's memory-bound kernel time, so that the " \
        "model's computing time" in _closing_words(split)


@pytest.mark.parametrize("closing", ["one", "kernels"])
def test_an_h100_calibration_predicts_the_h200_steps(measured_set, closing, request):
    """The same Llama moved to an H200 (tests/data/kineto_llama_h200): calibrated on an H100
    profile of layout ``a``, ``plan.predict(..., hardware="h200")`` gives the H200's timed
    steps of ``a`` and ``c`` within the one-knob tolerance and inside the band (measured
    2026-11-27, the attention core on cuDNN's published curve, what PyTorch SDPA runs on
    these H100s: from the first set 73.3 and 136.2 ms, −1.7 % and −2.0 %; from the second
    72.2 and 135.1 ms, −3.2 % and −2.8 %; timed 74.54 and 138.94 ms. With attention priced
    as a GEMM: −2.6 / −2.9 % and −4.0 / −3.7 %; since the attention kernels' occupancy is
    priced, 73.7 and 136.1 ms, −1.2 / −2.0 %, and 72.6 and 135.1 ms, −2.6 / −2.8 %). The
    H200 profile is read as an H200 (its deviceProperties)."""
    if closing == "kernels" and measured_set[0] == "kineto_llama_layouts_h100":
        request.applymarker(pytest.mark.xfail(strict=True, reason=(
            "kernel closing from the first set: a −6.5 % (band 65.1-74.3 ms against 74.54 "
            "timed) and c −7.2 %; from the second −7.9 % and −8.0 %, inside the bands: the "
            "run's small kernels gain less from the H200's bandwidth than the model's")))
    assert pk.infer_job(pk.load(_trace(H200, "a"), cache=False)).hardware.name == "h200"
    _, profile = measured_set
    cal = _calibrate(profile, close=True, closing=closing)
    env = _env(H200)
    for layout in ("a", "c"):
        parallel = dataclasses.replace(cal.job.parallel,
                                       micro_batch_size=env["layouts"][layout]["micro_batch"])
        pred = plan.predict(cal, parallel=parallel, hardware="h200",
                            global_batch_size=env["layouts"][layout]["micro_batch"])
        timed = _timed_s(H200, layout)
        tol = RATIO_TOL if layout == "a" else (1 + RATIO_TOL) ** 2 - 1  # c: two knobs
        assert pred.step_s == pytest.approx(timed, rel=tol), layout
        assert pred.low_s <= timed <= pred.high_s, layout


def _kernels_per_step(folder: str, layout: str) -> dict[str, float]:
    """cuBLAS products (``nvjet`` kernels) and cuDNN attention forwards (``sdpa`` ...
    ``fprop``) per profiled step of a trace, from the raw JSON (gzip + json, no perfkit)."""
    with gzip.open(_trace(folder, layout), "rt") as fh:
        events = json.load(fh)["traceEvents"]
    steps = {e["name"] for e in events if e.get("cat") == "user_annotation"
             and str(e.get("name", "")).startswith("ProfilerStep#")}
    names = [str(e["name"]) for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    return {"products": sum(n.startswith("nvjet") for n in names) / len(steps),
            "attention": sum("sdpa" in n and "fprop" in n for n in names) / len(steps)}


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_the_traces_recompute_only_what_the_backward_needs():
    """``torch.utils.checkpoint(use_reentrant=False)`` stops recomputing once the tensors
    the backward reads are back: in the raw traces a layer's forward runs 5 products (each
    twice more in the backward, the output head's 3 times in all) and a recomputed layer
    reruns 4 of them and its attention: not the MLP down projection, whose output the
    backward never reads. Calibrating on such a profile reads the ``"needed"`` style."""
    folder = "kineto_llama_layouts_h100"
    layers = _env(folder)["model"]["layers"]
    for plain, recomputed in (("a", "b"), ("c", "d")):
        k0, k1 = _kernels_per_step(folder, plain), _kernels_per_step(folder, recomputed)
        forward = (k0["products"] - 3) / (3 * layers)
        assert forward == 5
        assert (k1["products"] - k0["products"]) / layers == forward - 1
        assert (k1["attention"] - k0["attention"]) / layers == 1
        cal = _calibrate(pk.load(_trace(folder, recomputed), cache=False), close=True)
        assert cal.rates.recompute_style == "needed", recomputed


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_the_recompute_style_of_the_traces_brings_b_and_d_nearer():
    """Calibrated on ``a`` (no recompute: its profile cannot show the style, so the default
    ``"all"`` reruns the whole forward), the model's recompute part overshoots what the
    traces add to the device's computing time (b − a and d − c, raw JSON: 19.0 and 36.7
    ms; "all" 23.4 and 46.1 ms). With the style the traces show (``overrides=
    {"recompute_style": "needed"}``: 19.6 and 38.8 ms) the part is within
    :data:`RATIO_TOL` of the added computing and both steps are nearer the timed ones
    (b +2.7 % → −1.0 %, d +8.2 % → +4.2 %, measured 2026-11-26)."""
    folder = "kineto_llama_layouts_h100"  # the set with recomputed layouts
    cal = _calibrate(pk.load(_trace(folder, "a"), cache=False), close=True)
    env = _env(folder)
    busy = {k: statistics.mean(_computing_s(folder, k).values()) for k in "abcd"}
    for plain, layout in (("a", "b"), ("c", "d")):
        model, parallel = _layout(cal.job, env, layout)
        mb = env["layouts"][layout]["micro_batch"]
        preds = {style: plan.predict(cal, model=model, parallel=parallel,
                                     global_batch_size=mb, overrides={"recompute_style": style})
                 for style in ("all", "needed")}
        added = busy[layout] - busy[plain]
        assert preds["needed"].parts["recompute"] == pytest.approx(added, rel=RATIO_TOL)
        timed = _timed_s(folder, layout)
        assert abs(preds["needed"].step_s / timed - 1) < abs(preds["all"].step_s / timed - 1)
        assert preds["all"].step_s == pytest.approx(_predict(cal, folder, layout), rel=1e-12)


def test_an_assumed_recompute_style_is_said_with_the_other_styles_step(measured_set):
    """Calibrated on ``a`` (no recompute), a fully recomputed layout is timed with the
    default style ("all") and the prediction says so, with the step "needed" gives. The
    run's non-reentrant checkpoint reruns what "needed" counts (docs/planner.md), so that
    step is the closer one to the timed ``b``. Calibrated on ``b`` itself, which shows
    its style, or with the style given, nothing is assumed and nothing is said."""
    folder, profile = measured_set
    cal = _calibrate(profile, close=True)
    env = _env(folder)
    if "b" not in env["layouts"]:
        pytest.skip("this set has no recomputed layout")
    model, parallel = _layout(cal.job, env, "b")

    def pred(c: plan.Calibration, **kw: object) -> plan.Prediction:
        return plan.predict(c, model=model, parallel=parallel, global_batch_size=env[
            "layouts"]["b"]["micro_batch"], seq_length=model.seq_length, **kw)

    p = pred(cal)
    said = [n for n in p.notes if n.startswith(STYLE_NOTE)]
    assert len(said) == 1
    alt_ms = float(re.search(r"gives ([\d,.]+) ms", said[0]).group(1).replace(",", ""))
    needed = pred(cal, overrides={"recompute_style": "needed"})
    assert alt_ms == pytest.approx(needed.step_s * 1e3, abs=0.05)
    timed = _timed_s(folder, "b")
    assert abs(alt_ms / 1e3 - timed) < abs(p.step_s - timed)
    assert not any(n.startswith(STYLE_NOTE) for n in needed.notes)
    # calibrated on a run that recomputed in full: the style is read, not assumed
    on_b = _calibrate(pk.load(_trace(folder, "b"), cache=False), close=True)
    assert not any(n.startswith(STYLE_NOTE) for n in pred(on_b).notes)


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_the_kernel_closing_trades_the_h200_for_the_tp_split_and_recompute():
    """What ``closing="kernels"`` gets right and what it does not (docs/planner.md): it
    gives the model's forward memory-bound kernels the forward's measured share of the
    profile's (35.6 %, read from autograd's launching thread), so a recomputed forward
    replays them at the forward's speed: against the traces' added computing (raw JSON,
    b − a and d − c: 18.95 and 36.72 ms) its "needed" recompute part is −0.3 % and
    +2.1 %, nearer than one factor's +1.6 % and +3.7 % (measured 2026-11-27 with the
    attention core on cuDNN's published curve; with attention priced as a GEMM +1.3 /
    +3.8 % against +3.6 / +5.7 %). But it keeps the missing element-wise time on the
    memory-bound kernels, which the model speeds up with the H200's bandwidth more than
    the run's small kernels follow: the H200's timed a and c −6.6 % and −6.9 % where one
    factor is −1.7 % and −2.0 % (first set), which is why it is not the default.
    Calibrated on a recomputed layout (``b``), whose recomputed forward launches from the
    backward's thread, it closes by kernel kind alone and says so."""
    folder = "kineto_llama_layouts_h100"
    profile = pk.load(_trace(folder, "a"), cache=False)
    cals = {c: _calibrate(profile, close=True, closing=c) for c in CLOSINGS}
    env, h200 = _env(folder), _env(H200)
    busy = {k: statistics.mean(_computing_s(folder, k).values()) for k in "abcd"}
    for plain, layout in (("a", "b"), ("c", "d")):
        added = busy[layout] - busy[plain]
        err = {}
        for c, cal in cals.items():
            model, parallel = _layout(cal.job, env, layout)
            p = plan.predict(cal, model=model, parallel=parallel, global_batch_size=env[
                "layouts"][layout]["micro_batch"], overrides={"recompute_style": "needed"})
            err[c] = p.parts["recompute"] / added - 1
        assert abs(err["kernels"]) < err["one"] < RATIO_TOL, layout
    for layout in ("a", "c"):
        err = {}
        for c, cal in cals.items():
            parallel = dataclasses.replace(cal.job.parallel,
                                           micro_batch_size=h200["layouts"][layout]["micro_batch"])
            p = plan.predict(cal, parallel=parallel, hardware="h200",
                             global_batch_size=h200["layouts"][layout]["micro_batch"])
            err[c] = p.step_s / _timed_s(H200, layout) - 1
        assert err["kernels"] < err["one"] < 0 and abs(err["one"]) < 0.05 < abs(err["kernels"])
    on_b = _calibrate(pk.load(_trace(folder, "b"), cache=False), close=True,
                          closing="kernels")
    terms = {t for t, _, _ in on_b.terms}
    assert VECTOR_CLOSING in terms and FORWARD_CLOSING not in terms
    assert any("the run recomputes" in n for n in on_b.notes)
