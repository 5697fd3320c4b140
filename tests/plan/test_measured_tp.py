"""The planner's tensor-parallel split checked against one H100 rank's measured share, on
two models (PROVENANCE.md in each folder): ``small``, tests/data/kineto_llama_tp_h100
(8 layers, hidden 2048, FFN 5632), and ``wide``, tests/data/kineto_llama_wide_tp_h100
(Llama 2 7B's layer: 4 layers, hidden 4096, 32 heads, FFN 11008), whose matrix products
take a larger share of the step (59 % of the kernels' time where the small model's take
46 %).

In each set, layout ``a`` is the model at tp 1; ``h``, ``i``, ``j`` are what one rank of
tp 2, tp 4, and tp 2 with full recompute computes, run without the tensor-parallel
communication (one GPU cannot hold two NCCL ranks). So a share's timed step is the
planner's predicted step less its ``tp_comm`` part, and a share's device computing time
(the union of its device tasks' intervals per step, read here from the raw JSON with
gzip + json) is the predicted computing time (compute, recompute, optimizer). Each set
is calibrated on its own ``a`` (``plan.calibrate(profile, close=True)``), counting the
element-wise work as fused library kernels do (``rates=Rates()``: the figures below were
fixed with that count; without rates, ``calibrate`` now reads the eager autocast count
from these profiles, ``tests/plan/test_elementwise_read.py``).

Numbers of the fixtures (ms), perfkit at this commit; ``one`` the default closing (one
factor on every compute rate but the optimizer's), ``kernels`` ``closing="kernels"``
(the matrix kernels to their share of the profile's kernel time, the forward's and the
backward's memory-bound kernels each to their pass's share of the profile's, read from
autograd's launching thread: 35.6 % of them in the small ``a``'s forward, 35.2 % in the
wide one's: :mod:`perfkit.plan.calibrate`)::

    set   layout tp  timed (run 1 / 2)  step - tp_comm: one / kernels     computing raw: one / kern.
    small a      1   83.81 / 84.00      90.75 (+8.3 %) / 90.75 (+8.3 %)    80.58: 80.58 / 80.58
    small h      2   58.16 / 60.61      56.07 (-3.6 %) / 59.12 (+1.7 %)    50.97: 45.91 / 48.96
    small i      4   41.87 / 41.34      38.73 (-7.5 %) / 43.31 (+3.4 %)    36.22: 28.57 / 33.15
    small j      2+  76.68 / 69.43      74.46 (-2.9 %) / 77.81 (+1.5 %)    63.40: 60.02 / 63.37
    wide  a      1   119.76 / 119.04    119.05 (-0.6 %) / 119.05 (-0.6 %)  117.26: 117.26 / 117.26
    wide  h      2   70.22 / 70.91      66.05 (-5.9 %) / 70.44 (+0.3 %)    68.40: 64.25 / 68.64
    wide  i      4   48.08 / 47.80      39.55 (-17.7 %) / 46.14 (-4.0 %)   44.44: 37.75 / 44.34
    wide  j      2+  87.04 / 87.36      85.11 (-2.2 %) / 90.15 (+3.6 %)    83.66: 82.57 / 87.61

(errors against run 1; ``python benchmarks/bench_predict.py --measured`` prints the
steps.) The kernel closing gets the tp split right on both models and overshoots the
recomputed share ``j`` on the wide one (+4.7 % of computing; the small one's −0.1 %).
The small ``a``'s +8.3 % is
idle time, not the split: both its profiled steps idle 10.2 and 10.6 ms (the profiler's
own host work), the step timed without the profiler leaves 3.2 ms beside the device's
80.6 ms of computing, and the closed model carries the least idle profiled step's idle
at every layout (:func:`test_the_calibrating_layout_s_excess_is_the_profiled_idle`).
That excess also shrinks every ratio to the small ``a``; the computing times are free of
it. The wide ``a``'s profiled steps idle less (1.80, 1.98 ms) than its timed one (2.50):
its -0.6 %.

Tolerance, from each set's own numbers:

* :data:`TP_TOL`, per set, the largest run-to-run spread of a plain tp share's median
  (``environment.json`` against ``environment_rerun.json``, the same script run again at
  once on the same machine), computed from the two files: small ``h`` 58.16 / 60.61 ms,
  4.2 % (``i`` 1.3 %); wide ``h`` 70.22 / 70.91 ms, 0.97 % (``i`` 0.59 %). The small
  ``j``'s 10.4 % is left out of it: its first run had slow steps through its first half
  (PROVENANCE.md); the wide ``j``'s 0.37 % is inside the wide tolerance, so that rule
  changes nothing there (:func:`test_the_recorded_runs_and_shares`). A prediction is held
  to within :data:`TP_TOL` of the span of the two runs' medians (of ``j``'s too), and a
  computing time to within :data:`TP_TOL` of the raw trace's. The prediction's own band
  (``low_s``/``high_s`` less ``tp_comm``) is checked to hold both medians, with no
  tolerance. Misses are marked ``xfail`` with their numbers, never passed by widening the
  tolerance.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import re
import statistics
from pathlib import Path

import pytest
from library_count import library_calibrate as _calibrate
from raw_kineto import raw_device_steps

import perfkit as pk
from perfkit import plan
from perfkit.plan.calibrate import CLOSINGS, MATRIX_CLOSING

DATA = Path(__file__).resolve().parents[1] / "data"
#: The measured sets, by the name the tests' ids use.
FOLDERS = {"small": DATA / "kineto_llama_tp_h100", "wide": DATA / "kineto_llama_wide_tp_h100"}
SETS = tuple(FOLDERS)
SHARES = ("h", "i", "j")
COMPUTING = ("compute", "recompute", "optimizer")
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
PRODUCT_OPS = {"aten::mm", "aten::addmm", "aten::bmm"}


@functools.cache
def _env(name: str, file: str = "environment.json") -> dict:
    return json.loads((FOLDERS[name] / file).read_text())


def _medians_s(name: str, layout: str) -> tuple[float, float]:
    """The step timed without the profiler, median of each run's 20 steps (s)."""
    return tuple(statistics.median(_env(name, f)["layouts"][layout]["timed_steps_ms"]) / 1e3
                 for f in ("environment.json", "environment_rerun.json"))


def _spread(name: str, layout: str) -> float:
    lo, hi = sorted(_medians_s(name, layout))
    return hi / lo - 1


#: Per set, the run-to-run spread of the plain tp shares' medians (the module docstring).
TP_TOL = {name: max(_spread(name, "h"), _spread(name, "i")) for name in SETS}


def _trace(name: str, layout: str) -> Path:
    return FOLDERS[name] / f"{layout}.pt.trace.json.gz"


def _events(name: str, layout: str) -> list[dict]:
    with gzip.open(_trace(name, layout), "rt") as fh:
        return json.load(fh)["traceEvents"]


def _step_spans(events: list[dict]) -> list[tuple[int, float, float]]:
    return [(int(e["name"].split("#")[1]), float(e["ts"]), float(e["ts"]) + e["dur"])
            for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
            and str(e.get("name", "")).startswith("ProfilerStep#")]


@functools.cache
def _tasks_by_step(name: str, layout: str) -> dict[int, list[dict]]:
    """Step -> its device tasks: those whose launch lies in the step's host ProfilerStep
    span (gzip + json, no perfkit)."""
    events = _events(name, layout)
    spans = _step_spans(events)
    launch = {e["args"]["correlation"]: float(e["ts"]) for e in events
              if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
              and "correlation" in e.get("args", {})}
    tasks: dict[int, list[dict]] = {s: [] for s, _, _ in spans}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS:
            at = launch.get(e.get("args", {}).get("correlation"), float(e["ts"]))
            step = next((s for s, a, b in spans if a <= at < b), None)
            if step is not None:
                tasks[step].append(e)
    return tasks


@functools.cache
def _computing_s(name: str, layout: str) -> dict[int, float]:
    """Step -> seconds the device computes (the union of its tasks' intervals)."""
    busy = {}
    for step, tasks in _tasks_by_step(name, layout).items():
        total, end = 0.0, float("-inf")
        for lo, hi in sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"]))
                             for e in tasks):
            if hi > end:
                total += hi - max(lo, end)
                end = hi
        busy[step] = total / 1e6
    return busy


def _busy_s(name: str, layout: str) -> float:
    return statistics.mean(_computing_s(name, layout).values())


@pytest.fixture(scope="module")
def calibrations() -> dict[str, dict[str, plan.Calibration]]:
    out = {}
    for name in SETS:
        profile = pk.load(_trace(name, "a"), cache=False)
        out[name] = {c: _calibrate(profile, close=True, closing=c) for c in CLOSINGS}
    return out


def _predict(cal: plan.Calibration, name: str, layout: str) -> plan.Prediction:
    rec = _env(name)["layouts"][layout]
    parallel = dataclasses.replace(cal.job.parallel, tp=rec.get("tp_share", 1),
                                   micro_batch_size=rec["micro_batch"],
                                   recompute=rec["recompute"])
    return plan.predict(cal, parallel=parallel, global_batch_size=rec["micro_batch"],
                        seq_length=rec["seq"])


def _share_step_s(cal: plan.Calibration, name: str, layout: str) -> float:
    """The predicted step of a tp rank without its tensor-parallel communication."""
    p = _predict(cal, name, layout)
    return p.step_s - p.parts["tp_comm"]


def _computing_pred_s(cal: plan.Calibration, name: str, layout: str) -> float:
    p = _predict(cal, name, layout)
    return sum(p.parts[k] for k in COMPUTING)


def _off_span(value: float, span: tuple[float, float]) -> float:
    """How far ``value`` lies outside ``[min, max]`` of ``span``, as a share (0 inside)."""
    lo, hi = sorted(span)
    return value / hi - 1 if value > hi else (value / lo - 1 if value < lo else 0.0)


def _marked(cases: list[tuple], misses: dict[tuple, str]) -> list:
    return [pytest.param(*c, marks=pytest.mark.xfail(reason=misses[c], strict=True))
            if c in misses else c for c in cases]


#: Every (set, closing, share) the predictions are checked at.
CASES = [(n, c, s) for n in SETS for c in CLOSINGS for s in SHARES]


@pytest.mark.parametrize("name", SETS)
def test_the_recorded_runs_and_shares(name):
    """Both runs' records: 20 timed steps per layout, the medians as recorded (3 decimals,
    ms), the same layouts and tp shares, and the tolerance they give (small 4.2 %, wide
    0.97 %: ``h``'s). The small set's ``j`` is left out of it (10.4 %); the wide set's
    ``j`` (0.37 %) would not change it."""
    first, rerun = _env(name), _env(name, "environment_rerun.json")
    assert first["layouts"].keys() == rerun["layouts"].keys() == {"a", "h", "i", "j"}
    for layout in first["layouts"]:
        for rec in (first["layouts"][layout], rerun["layouts"][layout]):
            assert len(rec["timed_steps_ms"]) == 20
            assert statistics.median(rec["timed_steps_ms"]) == pytest.approx(
                rec["timed_step_median_ms"], abs=1e-3)
        assert first["layouts"][layout].get("tp_share", 1) \
            == rerun["layouts"][layout].get("tp_share", 1)
    assert {k: v.get("tp_share", 1) for k, v in first["layouts"].items()} \
        == {"a": 1, "h": 2, "i": 4, "j": 2}
    h_runs = {"small": (58.161, 60.61), "wide": (70.224, 70.908)}[name]
    assert TP_TOL[name] == pytest.approx(h_runs[1] / h_runs[0] - 1, abs=2e-4)
    if name == "small":
        assert _spread(name, "j") > 2 * TP_TOL[name]
    else:
        assert _spread(name, "j") < TP_TOL[name]


def _product_flops(name: str, layout: str) -> dict[int, float]:
    """Step -> floating-point operations of the step's cuBLAS products, from the shapes the
    profiler recorded (``Input Dims`` of ``aten::mm``/``addmm``/``bmm``: 2·m·k·n)."""
    events = _events(name, layout)
    spans = _step_spans(events)
    flops = {s: 0.0 for s, _, _ in spans}
    for e in events:
        if e.get("cat") != "cpu_op" or e.get("name") not in PRODUCT_OPS:
            continue
        step = next((s for s, a, b in spans if a <= float(e["ts"]) < b), None)
        if step is None:
            continue
        dims = e["args"]["Input Dims"]
        x, w = dims[1:3] if e["name"] == "aten::addmm" else dims[:2]
        assert x[-1] == w[-2], (name, layout, dims)
        batch = x[0] if e["name"] == "aten::bmm" else 1
        flops[step] += 2.0 * batch * x[-2] * x[-1] * w[-1]
    return flops


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.parametrize("name", SETS)
def test_the_shares_products_are_1_over_tp_of_the_model_s(name):
    """Independent arithmetic from the raw shapes: every profiled step's products do
    2·tokens·(k·layers·(4·h² + 3·h·ffn) + 3·h·vocab)/tp operations (k = 3: forward and
    two backward products; 4 with full recompute, which reruns the layers' forward, not
    the head's), with h, ffn, vocab from environment.json and tokens the micro-batch's:
    so each share does exactly 1/tp of ``a``'s products (wide ``a``: 46.2 TFLOP a step;
    small 23.4)."""
    model = _env(name)["model"]
    h, ffn, vocab = model["hidden"], model["ffn"], model["vocab"]
    for layout, rec in _env(name)["layouts"].items():
        k = 4 if rec["recompute"] == "full" else 3
        tokens = rec["micro_batch"] * rec["seq"]
        expected = 2.0 * tokens * (k * rec["layers"] * (4 * h * h + 3 * h * ffn)
                                   + 3 * h * vocab) / rec.get("tp_share", 1)
        flops = _product_flops(name, layout)
        assert len(flops) == 2
        for step, value in flops.items():
            assert value == pytest.approx(expected, rel=1e-12), (layout, step)


_PRODUCTS = {"small": (123, "0.517 at tp 2, 0.273 at tp 4", "0.745 and 0.620"),
             "wide": (63, "0.504 at tp 2, 0.254 at tp 4", "0.721 and 0.592")}


@pytest.mark.parametrize("name", SETS)
def test_the_shares_split_the_products_by_tp(name):
    """An independent reading of the raw traces: each share launches the same cuBLAS
    products (``nvjet`` kernels) per step as ``a`` (small 123, wide 63), and they take
    1/tp of ``a``'s time or up to 10 % more (smaller products reach a lower share of the
    peak: small 0.517 at tp 2, 0.273 at tp 4; wide 0.504, 0.254), where the other kernels
    (neither a product, attention nor the optimizer) keep small 0.745 and 0.620 of
    theirs, wide 0.721 and 0.592: work that tensor parallelism without sequence
    parallelism does not divide."""
    def per_step(layout: str) -> dict[str, float]:
        tasks = _tasks_by_step(name, layout)
        out = {"products": 0.0, "count": 0.0, "other": 0.0}
        for step_tasks in tasks.values():
            for e in step_tasks:
                kernel = str(e["name"])
                if kernel.startswith("nvjet"):
                    out["products"] += float(e["dur"])
                    out["count"] += 1
                elif not ("sdpa" in kernel or "cudnn" in kernel or "Adam" in kernel):
                    out["other"] += float(e["dur"])
        return {k: v / len(tasks) for k, v in out.items()}

    a = per_step("a")
    assert a["count"] == _PRODUCTS[name][0]
    for layout, tp in (("h", 2), ("i", 4)):
        share = per_step(layout)
        assert share["count"] == a["count"]
        assert 1 / tp <= share["products"] / a["products"] <= 1.1 / tp
        assert share["other"] / a["other"] > 1.2 / tp  # far from divided by tp


@pytest.mark.parametrize("name", SETS)
def test_the_kernel_closing_reads_the_traces_matrix_share(calibrations, name):
    """The share the kernel closing gives the matrix kernels is the raw trace's: cuBLAS
    products (``nvjet``) and cuDNN's attention kernels (``sdpa`` and its ``cudnn::``
    helpers) over every kernel but the fused AdamW's, both profiled steps (small 46.1 %,
    perfkit 46.3 %; wide 59.1 %, perfkit 59.2 %: it adds the products' memsets to their
    operators)."""
    cal = calibrations[name]["kernels"]
    (how,) = [h for t, _, h in cal.terms if t == MATRIX_CLOSING]
    matrix = other = 0.0
    for tasks in _tasks_by_step(name, "a").values():
        for e in tasks:
            kernel = str(e["name"])
            if "FusedAdam" in kernel:
                continue
            if kernel.startswith("nvjet") or "sdpa" in kernel or "cudnn" in kernel:
                matrix += float(e["dur"])
            else:
                other += float(e["dur"])
    said = float(re.search(r"take ([\d.]+) % of the measured computing time", how).group(1))
    assert said / 100 == pytest.approx(matrix / (matrix + other), abs=0.003)


@pytest.mark.parametrize("name", SETS)
@pytest.mark.parametrize("closing", CLOSINGS)
def test_both_closings_compute_for_as_long_as_a_did(calibrations, name, closing):
    """Either closing makes the model's computing time the device's (raw JSON, mean over
    the two steps) and keeps the optimizer's measured time."""
    cal = calibrations[name][closing]
    assert sum(cal.parts[p] for p in COMPUTING) == pytest.approx(_busy_s(name, "a"),
                                                                 abs=1e-7)
    assert cal.parts["optimizer"] == pytest.approx(
        calibrations[name]["one"].parts["optimizer"], rel=1e-9)


def _forward_share_raw(name: str, layout: str) -> float:
    """The forward's share of a trace's memory-bound kernel time, from the raw JSON: a
    kernel (``cat`` kernel, launched in a ProfilerStep span) is the backward's when its
    launch (``cuda_runtime``/``cuda_driver``, same ``correlation``) ran on a thread that
    carries ``autograd::engine::evaluate_function`` operators, the forward's otherwise;
    cuBLAS products (``nvjet``), cuDNN's attention kernels (``sdpa``, ``cudnn``) and the
    fused AdamW's left out."""
    events = _events(name, layout)
    backward = {e["tid"] for e in events if e.get("cat") == "cpu_op"
                and str(e.get("name", "")).startswith("autograd::engine::evaluate_function")}
    thread = {e["args"]["correlation"]: e["tid"] for e in events
              if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
              and "correlation" in e.get("args", {})}
    fwd = bwd = 0.0
    for tasks in _tasks_by_step(name, layout).values():
        for e in tasks:
            kernel = str(e["name"])
            if e.get("cat") != "kernel" or "FusedAdam" in kernel or kernel.startswith(
                    "nvjet") or "sdpa" in kernel or "cudnn" in kernel:
                continue
            if thread[e["args"]["correlation"]] in backward:
                bwd += float(e["dur"])
            else:
                fwd += float(e["dur"])
    return fwd / (fwd + bwd)


def _pass_seconds(cal: plan.Calibration) -> tuple[float, float]:
    """The closed model's forward and backward memory-bound seconds at the calibrating
    layout: halving one pass's efficiency adds that pass's time once (the other pass's
    is set on its own, the GEMMs' byte term and the optimizer run at
    ``memory_efficiency``)."""
    def computing(**kw: float) -> float:
        return sum(plan.predict(cal, overrides=kw).parts[p] for p in COMPUTING)

    r, base = cal.rates, computing()
    forward = computing(elementwise_efficiency=r.elementwise_efficiency / 2) - base
    backward = computing(
        backward_elementwise_efficiency=r.backward_elementwise_efficiency / 2) - base
    return forward, backward


@pytest.mark.parametrize("name", SETS)
def test_the_kernel_closing_reads_the_traces_forward_share(calibrations, name):
    """The kernel closing gives the model's forward memory-bound kernels the raw trace's
    forward share of its memory-bound kernel time (small 14.01 of 39.35 ms, 35.6 %; wide
    14.94 of 42.40, 35.2 %), where the model at one memory-bound efficiency (one factor's)
    puts 43.6 % and 43.8 % there: the model puts more of its memory-bound work in the
    forward than the run does, so a recomputed forward at one efficiency gets too long."""
    raw = _forward_share_raw(name, "a")
    assert 0.30 < raw < 0.40
    forward, backward = _pass_seconds(calibrations[name]["kernels"])
    assert forward / (forward + backward) == pytest.approx(raw, abs=1e-3)
    one = calibrations[name]["one"]
    r = one.rates
    # one efficiency for both passes: the model's own forward share
    base = sum(plan.predict(one).parts[p] for p in COMPUTING)
    both = sum(plan.predict(one, overrides={"elementwise_efficiency": r.vector_efficiency
                                            / 2}).parts[p] for p in COMPUTING) - base
    back = sum(plan.predict(one, overrides={"backward_elementwise_efficiency":
                                            r.vector_efficiency / 2}).parts[p]
               for p in COMPUTING) - base
    assert (both - back) / both > raw + 0.05


@pytest.mark.parametrize("name", SETS)
def test_the_calibrating_layout_s_excess_is_the_profiled_idle(calibrations, name):
    """``a``'s closed step is off its timed one by idle time alone: the closed model
    carries the least idle profiled step's idle (profiled step less computing, raw JSON),
    so its step less the timed one is that idle less the timed idle. The small set's
    steps idle 10.2 and 10.6 ms, at least three times the 3.2 ms its timed step leaves
    beside the same computing (its +8.3 %); the wide set's 1.80 and 1.98 ms, less than
    its timed 2.50 (its -0.6 %)."""
    steps, on_device = raw_device_steps(_trace(name, "a"))
    assert on_device
    busy = _computing_s(name, "a")
    idle = {s: float(steps[s]) / 1e6 - busy[s] for s in busy}
    timed_idle = _medians_s(name, "a")[0] - _busy_s(name, "a")
    assert timed_idle > 0
    if name == "small":
        assert min(idle.values()) > 3 * timed_idle
    else:
        assert max(idle.values()) < timed_idle
    for cal in calibrations[name].values():
        assert cal.parts["overhead"] == pytest.approx(min(idle.values()), abs=1e-7)
        assert _share_step_s(cal, name, "a") - _medians_s(name, "a")[0] == pytest.approx(
            min(idle.values()) - timed_idle, abs=1e-6)


_COMPUTING_MISS = {
    ("small", "one", "h"): "one factor: the share computes 46.2 ms, the trace 51.0 (-9.4 %)",
    ("small", "one", "i"): "one factor: the share computes 29.0 ms, the trace 36.2 (-20 %)",
    ("small", "one", "j"): "one factor: the share computes 60.0 ms, the trace 63.4 (-5.3 %)",
    ("wide", "one", "h"): "one factor: the share computes 64.33 ms, the trace 68.40 (-5.9 %)",
    ("wide", "one", "i"): "one factor: the share computes 37.87 ms, the trace 44.44 (-15 %)",
    ("wide", "one", "j"): "one factor: the share computes 82.40 ms, the trace 83.66 (-1.5 %, "
                          "the tolerance 0.97 %)",
    ("small", "kernels", "i"): "kernel closing: the share computes 33.08 ms, the trace 36.22 "
                               "(-8.7 %): the run's element-wise kernels split less than "
                               "the model's",
    ("wide", "kernels", "j"): "kernel closing: the share computes 87.60 ms, the trace 83.66 "
                              "(+4.7 %, the tolerance 0.97 %): the recomputed forward's "
                              "memory-bound work overshoots",
}


@pytest.mark.parametrize(("name", "closing", "layout"), _marked(CASES, _COMPUTING_MISS))
def test_a_shares_computing_time(calibrations, name, closing, layout):
    """The predicted computing time of a tp rank's share against its trace's."""
    pred = _computing_pred_s(calibrations[name][closing], name, layout)
    assert pred == pytest.approx(_busy_s(name, layout), rel=TP_TOL[name])


_NEARER_MISS = {
    ("wide", "j"): "recompute: the kernel closing computes +4.7 % (87.60 ms against the "
                   "trace's 83.66), one factor -1.5 % (82.40)",
}


@pytest.mark.parametrize(("name", "layout"), _marked(
    [(n, s) for n in SETS for s in SHARES], _NEARER_MISS))
def test_the_kernel_closing_is_nearer_a_shares_computing(calibrations, name, layout):
    """Where one factor spreads the missing element-wise time over the GEMMs, which tp
    divides, the kernel closing keeps it on the memory-bound kernels: a share's computing
    time is nearer the trace's (on both models at tp 2 and 4; with full recompute on the
    small one only)."""
    busy = _busy_s(name, layout)
    errors = {c: abs(_computing_pred_s(cal, name, layout) / busy - 1)
              for c, cal in calibrations[name].items()}
    assert errors["kernels"] < errors["one"]


_STEP_MISS = {
    ("small", "one", "i"): "one factor: 39.11 ms against 41.34-41.87 timed (-5.4 %)",
    ("wide", "one", "h"): "one factor: 66.13 ms against 70.22-70.91 timed (-5.8 %)",
    ("wide", "one", "i"): "one factor: 39.67 ms against 47.80-48.08 timed (-17 %)",
    ("wide", "one", "j"): "one factor: 84.94 ms against 87.04-87.36 timed (-2.4 %)",
    ("wide", "kernels", "i"): "kernel closing: 46.33 ms against 47.80-48.08 timed (-3.1 %): its "
                              "computing is the trace's (+0.2 %), the timed step idles 3.6 ms "
                              "where the model carries a's 1.8",
    ("wide", "kernels", "j"): "kernel closing: 90.14 ms against 87.04-87.36 timed (+3.2 %): "
                              "recompute's computing +4.7 %",
}


@pytest.mark.parametrize(("name", "closing", "layout"), _marked(CASES, _STEP_MISS))
def test_a_shares_timed_step(calibrations, name, closing, layout):
    """The predicted step less ``tp_comm`` against the share's two timed medians."""
    step = _share_step_s(calibrations[name][closing], name, layout)
    assert abs(_off_span(step, _medians_s(name, layout))) <= TP_TOL[name]


_RATIO_MISS = {
    ("small", "one", "h"): "one factor: 0.621 of a against 0.694-0.722 timed (-11 %)",
    ("small", "one", "i"): "one factor: 0.431 of a against 0.492-0.500 timed (-12 %)",
    ("wide", "one", "h"): "one factor: 0.555 of a against 0.586-0.596 timed (-5.3 %)",
    ("wide", "one", "i"): "one factor: 0.333 of a against 0.401-0.402 timed (-17 %)",
    ("wide", "one", "j"): "one factor: 0.713 of a against 0.727-0.734 timed (-1.8 %)",
    ("small", "kernels", "h"): "kernel closing: 0.651 of a against 0.694-0.722 timed (-6.2 %): "
                               "a's idle excess (+8.0 %) is in the denominator",
    ("wide", "kernels", "i"): "kernel closing: 0.389 of a against 0.401-0.402 timed (-3.1 %)",
    ("wide", "kernels", "j"): "kernel closing: 0.757 of a against 0.727-0.734 timed (+3.2 %)",
}


@pytest.mark.parametrize(("name", "closing", "layout"), _marked(CASES, _RATIO_MISS))
def test_a_shares_ratio_to_a(calibrations, name, closing, layout):
    """The predicted share's step (less ``tp_comm``) over ``a``'s, against the timed
    ratio of each run."""
    cal = calibrations[name][closing]
    ratio = _share_step_s(cal, name, layout) / _share_step_s(cal, name, "a")
    timed = tuple(s / a for s, a in zip(_medians_s(name, layout), _medians_s(name, "a"),
                                        strict=True))
    assert abs(_off_span(ratio, timed)) <= TP_TOL[name]


_BAND_MISS = {
    ("small", "one", "a"): "band 85.50-95.99 ms against 83.81-84.00 timed: a's idle excess",
    ("small", "one", "h"): "one factor: band 52.86-59.79 ms against 58.16-60.61 timed",
    ("small", "one", "j"): "one factor: band 70.14-78.82 ms against 69.43-76.68 timed",
    ("wide", "one", "h"): "one factor: band 61.94-70.32 ms against 70.22-70.91 timed",
    ("wide", "one", "i"): "one factor: band 36.75-42.59 ms against 47.80-48.08 timed",
    ("small", "kernels", "a"): "band 85.50-95.99 ms against 83.81-84.00 timed: a's idle "
                               "excess",
    ("small", "kernels", "j"): "kernel closing: band 73.03-82.04 ms against 69.43-76.68 timed "
                               "(the first run's slow steps)",
}


@pytest.mark.parametrize(("name", "closing", "layout"), _marked(
    [(n, c, s) for n in SETS for c in CLOSINGS for s in ("a", *SHARES)],
    _BAND_MISS))
def test_a_shares_band_holds_its_timed_steps(calibrations, name, closing, layout):
    """The prediction's band (``low_s``/``high_s``, less ``tp_comm``) holds both runs'
    timed medians, with no tolerance added."""
    p = _predict(calibrations[name][closing], name, layout)
    low, high = p.low_s - p.parts["tp_comm"], p.high_s - p.parts["tp_comm"]
    for timed in _medians_s(name, layout):
        assert low <= timed <= high, (low, timed, high)
