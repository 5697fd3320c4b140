"""The planner's tensor-parallel split checked against one H100 rank's measured share
(tests/data/kineto_llama_tp_h100, PROVENANCE.md there).

Layout ``a`` is the small Llama of ``kineto_llama_layouts_h100`` at tp 1; ``h``, ``i``,
``j`` are what one rank of tp 2, tp 4, and tp 2 with full recompute computes, run without
the tensor-parallel communication (one GPU cannot hold two NCCL ranks). So a share's
timed step is the planner's predicted step less its ``tp_comm`` part, and a share's
device computing time (the union of its device tasks' intervals per step, read here
from the raw JSON with gzip + json) is the predicted computing time (compute,
recompute, optimizer). Calibrated on ``a`` (``plan.calibrate(profile, close=True)``).

Numbers of the fixture (ms), perfkit at this commit; ``one`` the default closing (one
factor on every compute rate but the optimizer's), ``kernels`` ``closing="kernels"``
(the matrix kernels to their share of the profile's kernel time, the memory-bound
kernels to the rest: :mod:`perfkit.plan.calibrate`)::

    layout tp  timed (run 1 / 2)  step - tp_comm: one / kernels  computing raw: one / kernels
    a      1   83.81 / 84.00      90.75 (+8.3 %) / 90.75 (+8.3 %)  80.58: 80.58 / 80.58
    h      2   58.16 / 60.61      56.07 (-3.6 %) / 59.26 (+1.9 %)  50.97: 45.91 / 49.10
    i      4   41.87 / 41.34      38.73 (-7.5 %) / 43.52 (+3.9 %)  36.22: 28.57 / 33.35
    j      2+  76.68 / 69.43      74.46 (-2.9 %) / 79.93 (+4.2 %)  63.40: 60.02 / 65.48

(``python benchmarks/bench_predict.py --measured`` prints the steps.) ``a``'s +8.3 % is
idle time, not the split: both its profiled steps idle 10.2 and 10.6 ms (the profiler's
own host work), the step timed without the profiler leaves 3.2 ms beside the device's
80.6 ms of computing, and the closed model carries the least idle profiled step's idle
at every layout (:func:`test_the_calibrating_layout_s_excess_is_the_profiler_s_idle`).
That excess also shrinks every ratio to ``a``; the computing times are free of it.

Tolerance, from the fixture's own numbers:

* :data:`TP_TOL`, the largest run-to-run spread of a plain tp share's median
  (``environment.json`` against ``environment_rerun.json``, the same script run again at
  once on the same machine: ``h`` 58.16 / 60.61 ms, 4.2 %; ``i`` 1.3 %), computed from
  the two files. ``j``'s 10.4 % is left out of it: its first run had slow steps through
  its first half (PROVENANCE.md). A prediction is held to within :data:`TP_TOL` of the
  span of the two runs' medians (of ``j``'s too), and a computing time to within
  :data:`TP_TOL` of the raw trace's. Misses are marked ``xfail`` with their numbers,
  never passed by widening the tolerance.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import statistics
from pathlib import Path

import pytest
from raw_kineto import raw_device_steps

import perfkit as pk
from perfkit import plan
from perfkit.plan.calibrate import CLOSINGS, MATRIX_CLOSING

FOLDER = Path(__file__).resolve().parents[1] / "data" / "kineto_llama_tp_h100"
SHARES = ("h", "i", "j")
COMPUTING = ("compute", "recompute", "optimizer")
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def _env(name: str = "environment.json") -> dict:
    return json.loads((FOLDER / name).read_text())


def _medians_s(layout: str) -> tuple[float, float]:
    """The step timed without the profiler, median of each run's 20 steps (s)."""
    return tuple(statistics.median(_env(f)["layouts"][layout]["timed_steps_ms"]) / 1e3
                 for f in ("environment.json", "environment_rerun.json"))


def _spread(layout: str) -> float:
    lo, hi = sorted(_medians_s(layout))
    return hi / lo - 1


#: the run-to-run spread of the plain tp shares' medians (see the module docstring)
TP_TOL = max(_spread("h"), _spread("i"))


def _trace(layout: str) -> Path:
    return FOLDER / f"{layout}.pt.trace.json.gz"


def _events(layout: str) -> list[dict]:
    with gzip.open(_trace(layout), "rt") as fh:
        return json.load(fh)["traceEvents"]


def _tasks_by_step(layout: str) -> dict[int, list[dict]]:
    """Step -> its device tasks: those whose launch lies in the step's host ProfilerStep
    span (gzip + json, no perfkit)."""
    events = _events(layout)
    spans = [(int(e["name"].split("#")[1]), float(e["ts"]), float(e["ts"]) + e["dur"])
             for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
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


def _computing_s(layout: str) -> dict[int, float]:
    """Step -> seconds the device computes (the union of its tasks' intervals)."""
    busy = {}
    for step, tasks in _tasks_by_step(layout).items():
        total, end = 0.0, float("-inf")
        for lo, hi in sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"]))
                             for e in tasks):
            if hi > end:
                total += hi - max(lo, end)
                end = hi
        busy[step] = total / 1e6
    return busy


def _busy_s(layout: str) -> float:
    return statistics.mean(_computing_s(layout).values())


@pytest.fixture(scope="module")
def calibrations() -> dict[str, plan.Calibration]:
    profile = pk.load(_trace("a"), cache=False)
    return {c: plan.calibrate(profile, close=True, closing=c) for c in CLOSINGS}


def _predict(cal: plan.Calibration, layout: str) -> plan.Prediction:
    rec = _env()["layouts"][layout]
    parallel = dataclasses.replace(cal.job.parallel, tp=rec.get("tp_share", 1),
                                   micro_batch_size=rec["micro_batch"],
                                   recompute=rec["recompute"])
    return plan.predict(cal, parallel=parallel, global_batch_size=rec["micro_batch"],
                        seq_length=rec["seq"])


def _share_step_s(cal: plan.Calibration, layout: str) -> float:
    """The predicted step of a tp rank without its tensor-parallel communication."""
    p = _predict(cal, layout)
    return p.step_s - p.parts["tp_comm"]


def _computing_pred_s(cal: plan.Calibration, layout: str) -> float:
    p = _predict(cal, layout)
    return sum(p.parts[k] for k in COMPUTING)


def _off_span(value: float, span: tuple[float, float]) -> float:
    """How far ``value`` lies outside ``[min, max]`` of ``span``, as a share (0 inside)."""
    lo, hi = sorted(span)
    return value / hi - 1 if value > hi else (value / lo - 1 if value < lo else 0.0)


def test_the_recorded_runs_and_shares():
    """Both runs' records: 20 timed steps per layout, the medians as recorded (3 decimals,
    ms), the same layouts and tp shares, and the tolerance they give (4.2 %)."""
    first, rerun = _env(), _env("environment_rerun.json")
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
    assert TP_TOL == pytest.approx(60.61 / 58.161 - 1, abs=2e-4)


def test_the_shares_split_the_products_by_tp():
    """An independent reading of the raw traces: each share launches the same 123 cuBLAS
    products (``nvjet`` kernels) per step as ``a``, and they take 1/tp of ``a``'s time
    or up to 10 % more (smaller products reach a lower share of the peak: 0.517 at tp 2,
    0.273 at tp 4), where the other kernels (neither a product, attention nor the
    optimizer) keep 0.745 and 0.620 of theirs: work that tensor parallelism without
    sequence parallelism does not divide."""
    def per_step(layout: str) -> dict[str, float]:
        tasks = _tasks_by_step(layout)
        out = {"products": 0.0, "count": 0.0, "other": 0.0}
        for step_tasks in tasks.values():
            for e in step_tasks:
                name = str(e["name"])
                if name.startswith("nvjet"):
                    out["products"] += float(e["dur"])
                    out["count"] += 1
                elif not ("sdpa" in name or "cudnn" in name or "Adam" in name):
                    out["other"] += float(e["dur"])
        return {k: v / len(tasks) for k, v in out.items()}

    a = per_step("a")
    for layout, tp in (("h", 2), ("i", 4)):
        share = per_step(layout)
        assert share["count"] == a["count"]
        assert 1 / tp <= share["products"] / a["products"] <= 1.1 / tp
        assert share["other"] / a["other"] > 1.2 / tp  # far from divided by tp


def test_the_kernel_closing_reads_the_traces_matrix_share(calibrations):
    """The share the kernel closing gives the matrix kernels is the raw trace's: cuBLAS
    products (``nvjet``) and cuDNN's attention kernels (``sdpa`` and its ``cudnn::``
    helpers) over every kernel but the fused AdamW's, both profiled steps (46.1 %;
    perfkit counts 46.3 %: it adds the products' memsets, 0.11 ms a step, to their
    operators)."""
    cal = calibrations["kernels"]
    (how,) = [h for t, _, h in cal.terms if t == MATRIX_CLOSING]
    matrix = other = 0.0
    for tasks in _tasks_by_step("a").values():
        for e in tasks:
            name = str(e["name"])
            if "FusedAdam" in name:
                continue
            if name.startswith("nvjet") or "sdpa" in name or "cudnn" in name:
                matrix += float(e["dur"])
            else:
                other += float(e["dur"])
    said = float(re.search(r"take ([\d.]+)% of the measured computing time", how).group(1))
    assert said / 100 == pytest.approx(matrix / (matrix + other), abs=0.003)


@pytest.mark.parametrize("closing", ["one", "kernels"])
def test_both_closings_compute_for_as_long_as_a_did(calibrations, closing):
    """Either closing makes the model's computing time the device's (raw JSON, mean over
    the two steps) and keeps the optimizer's measured time."""
    cal = calibrations[closing]
    assert sum(cal.parts[p] for p in COMPUTING) == pytest.approx(_busy_s("a"), abs=1e-7)
    assert cal.parts["optimizer"] == pytest.approx(
        calibrations["one"].parts["optimizer"], rel=1e-9)


def test_the_calibrating_layout_s_excess_is_the_profiler_s_idle(calibrations):
    """``a``'s closed step is above its timed one by idle time alone: both its profiled
    steps idle 10.2 and 10.6 ms (profiled step less computing, raw JSON), at least three
    times the 3.2 ms the timed step leaves beside the same computing; the closed model
    carries the least idle step's idle, so its step less the timed one is that idle less
    the timed idle."""
    steps, on_device = raw_device_steps(_trace("a"))
    assert on_device
    busy = _computing_s("a")
    idle = {s: float(steps[s]) / 1e6 - busy[s] for s in busy}
    timed_idle = _medians_s("a")[0] - _busy_s("a")
    assert min(idle.values()) > 3 * timed_idle > 0
    for cal in calibrations.values():
        assert cal.parts["overhead"] == pytest.approx(min(idle.values()), abs=1e-7)
        assert _share_step_s(cal, "a") - _medians_s("a")[0] == pytest.approx(
            min(idle.values()) - timed_idle, abs=1e-6)


_COMPUTING_MISS = {
    ("one", "h"): "one factor: the share computes 45.9 ms, the trace 51.0 (-9.9 %)",
    ("one", "i"): "one factor: the share computes 28.6 ms, the trace 36.2 (-21 %)",
    ("one", "j"): "one factor: the share computes 60.0 ms, the trace 63.4 (-5.3 %)",
    ("kernels", "i"): "kernel closing: the share computes 33.4 ms, the trace 36.2 (-7.9 %): "
                      "the run's element-wise kernels split less than the model's (0.62 "
                      "of a's at tp 4, the model's 0.55)",
}


def _marked(cases: list[tuple[str, str]], misses: dict[tuple[str, str], str]) -> list:
    return [pytest.param(*c, marks=pytest.mark.xfail(reason=misses[c], strict=True))
            if c in misses else c for c in cases]


@pytest.mark.parametrize(("closing", "layout"), _marked(
    [(c, s) for c in ("one", "kernels") for s in SHARES], _COMPUTING_MISS))
def test_a_shares_computing_time(calibrations, closing, layout):
    """The predicted computing time of a tp rank's share against its trace's."""
    pred = _computing_pred_s(calibrations[closing], layout)
    assert pred == pytest.approx(_busy_s(layout), rel=TP_TOL)


def test_the_kernel_closing_is_nearer_every_shares_computing(calibrations):
    """Where one factor spreads the missing element-wise time over the GEMMs, which tp
    divides, the kernel closing keeps it on the memory-bound kernels: every share's
    computing time is nearer the trace's."""
    for layout in SHARES:
        busy = _busy_s(layout)
        errors = {c: abs(_computing_pred_s(cal, layout) / busy - 1)
                  for c, cal in calibrations.items()}
        assert errors["kernels"] < errors["one"], layout


_STEP_MISS = {
    ("one", "i"): "one factor: 38.73 ms against 41.34-41.87 timed (-6.3 %)",
    ("kernels", "j"): "kernel closing: 79.93 ms against 69.43-76.68 timed (+4.24 %, the "
                      "tolerance 4.21 %): +3.3 % of computing and a's idle excess",
}


@pytest.mark.parametrize(("closing", "layout"), _marked(
    [(c, s) for c in ("one", "kernels") for s in SHARES], _STEP_MISS))
def test_a_shares_timed_step(calibrations, closing, layout):
    """The predicted step less ``tp_comm`` against the share's two timed medians."""
    step = _share_step_s(calibrations[closing], layout)
    assert abs(_off_span(step, _medians_s(layout))) <= TP_TOL


_RATIO_MISS = {
    ("one", "h"): "one factor: 0.618 of a against 0.694-0.722 timed (-11 %)",
    ("one", "i"): "one factor: 0.427 of a against 0.492-0.500 timed (-13 %)",
    ("kernels", "h"): "kernel closing: 0.653 of a against 0.694-0.722 timed (-5.9 %): a's "
                      "idle excess (+8.3 %) is in the denominator",
}


@pytest.mark.parametrize(("closing", "layout"), _marked(
    [(c, s) for c in ("one", "kernels") for s in SHARES], _RATIO_MISS))
def test_a_shares_ratio_to_a(calibrations, closing, layout):
    """The predicted share's step (less ``tp_comm``) over ``a``'s, against the timed
    ratio of each run."""
    cal = calibrations[closing]
    ratio = _share_step_s(cal, layout) / _share_step_s(cal, "a")
    timed = tuple(s / a for s, a in zip(_medians_s(layout), _medians_s("a"), strict=True))
    assert abs(_off_span(ratio, timed)) <= TP_TOL
