"""Kineto traces without ``ProfilerStep`` that hold two training iterations, or none.

A loop of two iterations has two optimizer updates and one backward pass between them:
nothing to compare it with, so it was read as one step. The backward pass before the first
update (from the trace's start) is now compared with it (:mod:`perfkit.io.kineto.
iterations`). A trace with no optimizer step (inference, a forward-only loop) is one step,
and the note says so plainly; :func:`perfkit.io.preview.steps.kineto_device_steps` gives the
full load's reason where it finds no step.

Expected figures come from the loops written here (:mod:`optimizer_loops`, by arithmetic on
the times written) or from the raw trace (``gzip`` / ``json``, :mod:`raw_kineto`).
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from optimizer_loops import loop_events, true_steps, write_trace
from raw_kineto import Iterations, raw_events
from shared_samples import sample

import perfkit as pk
from perfkit.io.preview import steps as P

RESNET50 = "wild/k_resnet50_nw4/worker0.1623212756351.pt.trace.json.gz"
B200 = "wild/tl_b200_eager/eager_trace.json.gz"
#: A backward pass of a small network (autograd's node names).
NET = ("MseLossBackward0", "AddmmBackward0", "ReluBackward0", "AddmmBackward0",
       "torch::autograd::AccumulateGrad", "torch::autograd::AccumulateGrad")
#: A GAN's two phases (the generator's backward pass goes through both networks).
D_BACKWARD = ("BinaryCrossEntropyBackward0", "SigmoidBackward0", "AddmmBackward0",
              "torch::autograd::AccumulateGrad")
G_BACKWARD = ("BinaryCrossEntropyBackward0", "SigmoidBackward0", "AddmmBackward0",
              "TanhBackward0", "AddmmBackward0", "torch::autograd::AccumulateGrad")
_BACKWARD = re.compile(r"(?:Backward\d*|AccumulateGrad)$")
#: What the full load says of a trace with no ProfilerStep and no optimizer step.
FORWARD_ONLY = ("inference or a forward-only loop: with no training iteration to tell "
                "apart, the whole trace is one step")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("fetch", [False, True])
def test_two_iterations_of_a_training_loop_are_two_steps(tmp_path: Path, fetch: bool) -> None:
    """Two iterations of ``forward; backward; SGD.step`` (500 µs each, from ts 1000): the
    backward pass before each update is the same, so each update ends an iteration. They
    were one step of the whole trace; now the two iterations, each with the loop's device
    window and wall (:func:`optimizer_loops.true_steps`), in the full load and in
    :func:`kineto_device_steps`."""
    events = loop_events(2, [("SGD", NET)], fetch=fetch)
    f = write_trace(tmp_path / "two.json", events)
    want = true_steps(events, per_iteration=1)
    assert sorted(want) == [0, 1]
    p = pk.load(f, cache=False, progress=False)
    assert p.steps["step"].tolist() == [0, 1]
    b = pk.analysis.step_breakdown(p).set_index("step")
    quick = P.kineto_device_steps(f).set_index("step")
    for k, (window, wall) in want.items():
        assert b.loc[k, "step_us"] == pytest.approx(window, abs=1e-3), k
        assert b.loc[k, "step_us"] + b.loc[k, "preparing_us"] == pytest.approx(wall, abs=1e-3)
        assert quick.loc[k, "total_us"] == pytest.approx(window, abs=1e-3), k
        assert quick.loc[k, "total_us"] + quick.loc[k, "preparing_us"] == pytest.approx(
            wall, abs=1e-3), k
    # 3 kernels an iteration (forward, backward, optimizer), each in its launch's iteration
    assert p.kernels["step"].value_counts().sort_index().tolist() == [3, 3]


def _trimmed(doc: dict[str, Any], keep: int) -> dict[str, Any]:
    """``doc`` without ProfilerStep events, and cut after its ``keep``-th ProfilerStep: the
    host events that start before that span's end, the device tasks they launched."""
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    spans = sorted(e["ts"] + e["dur"] for e in events
                   if e["name"].startswith("ProfilerStep#"))
    cut = spans[keep - 1]
    host = [e for e in events if e.get("cat") != "Kernel" and e.get("cat") not in (
        "Memcpy", "Memset") and e["ts"] < cut and not e["name"].startswith("ProfilerStep#")]
    launched = {(e.get("args") or {}).get("correlation") for e in host
                if e.get("cat") == "Runtime"}
    device = [e for e in events if e.get("cat") in ("Kernel", "Memcpy", "Memset")
              and (e.get("args") or {}).get("correlation") in launched]
    return {**doc, "traceEvents": host + device}


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.shared_samples
def test_a_real_two_iteration_trace_without_profiler_steps_is_two_steps(tmp_path: Path
                                                                        ) -> None:
    """PyTorch 1.9 ResNet-50 (kineto's sample), cut after its first two ProfilerSteps (#5,
    #6) and with the ProfilerStep events taken out: two ``Optimizer.step#SGD.step``, the
    same 339 backward functions before each (counted here from the raw JSON). It was one
    step of the whole trace; now two, each holding the device tasks its ProfilerStep
    launched (by the raw spans), with the device time and wall of the raw iterations
    (:class:`raw_kineto.Iterations`, 0.5 µs: µs timestamps of 1.6e15 as float64)."""
    path = sample(RESNET50)
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e["name"].startswith("ProfilerStep#"))[:2]
    marks = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e["name"].startswith("Optimizer.step#") and e["ts"] < spans[1][1])
    assert len(marks) == 2
    back = [(e["ts"], e["name"]) for e in events
            if e.get("cat") == "Operator" and _BACKWARD.search(e["name"])]
    before = Counter(n for t, n in back if t < marks[0][0])
    between = Counter(n for t, n in back if marks[0][1] <= t < marks[1][0])
    assert before == between and sum(before.values()) > 100
    # the device tasks of each ProfilerStep, by their launch
    launch = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") == "Runtime"
              and "correlation" in (e.get("args") or {})}
    tasks = [e for e in events if e.get("cat") in ("Kernel", "Memcpy", "Memset")]
    per_span = [sum(1 for e in tasks if a <= launch.get(e["args"].get("correlation"), -1) < b)
                for a, b in spans]
    copy = tmp_path / "worker0.pt.trace.json.gz"
    with gzip.open(copy, "wt", encoding="utf-8") as fh:
        json.dump(_trimmed(doc, 2), fh)
    it = Iterations(raw_events(copy))
    assert len(it.spans) == 2
    p = pk.load(copy, cache=False, progress=False)
    assert p.steps["step"].tolist() == [0, 1]
    # each iteration holds the device tasks (kernels, memcpy, memset) its ProfilerStep did
    assert [it.step.count(0), it.step.count(1)] == per_span and min(per_span) > 1000
    got = p.kernels["step"].value_counts().sort_index()
    assert got.tolist() == per_span
    quick = P.kineto_device_steps(copy).set_index("step")
    b = pk.analysis.step_breakdown(p).set_index("step")
    for k, (time, wall) in it.walls().items():
        assert b.loc[k, "step_us"] == pytest.approx(float(time), abs=0.5), k
        assert quick.loc[k, "total_us"] == pytest.approx(float(time), abs=0.5), k
        assert quick.loc[k, "total_us"] + quick.loc[k, "preparing_us"] == pytest.approx(
            float(wall), abs=0.5), k
    assert quick["step_mark"].tolist() == ["Optimizer.step#SGD.step"] * 2


def _mid_backward(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The loop's events from its first backward pass's third function on: the profiler
    started inside the first iteration's backward pass."""
    start = sorted(e["ts"] for e in events if _BACKWARD.search(e["name"]))[2]
    return [e for e in events if e["ts"] >= start]


@pytest.mark.parametrize(("events", "why"), [
    # one GAN iteration: the discriminator's update, then the generator's
    (loop_events(1, [("Adam", D_BACKWARD), ("Adam", G_BACKWARD)], fetch=False),
     "only two updates, and the backward pass before the first (from the trace's start) is "
     "not the same as the one before the second, so they may be one iteration of two "
     "optimizers stepping in turn, as a GAN's discriminator and generator do, or the trace "
     "begins inside a backward pass"),
    (loop_events(1, [("Adam", D_BACKWARD), ("Adam", G_BACKWARD)], fetch=True),
     "only two updates, and the backward pass before the first"),
    # two optimizers in turn after the same backward functions: the batch is fetched once
    (loop_events(1, [("SGD", NET), ("SGD", NET)], fetch=True),
     "only two updates, and the loop's DataLoader does not fetch a batch before each, so "
     "they may be one iteration of two optimizers stepping in turn"),
    (loop_events(1, [("Adam", NET), ("SGD", NET)], fetch=False),
     "only two updates, of different optimizers (Optimizer.step#Adam.step, then "
     "Optimizer.step#SGD.step), so they may be one iteration of optimizers stepping in turn"),
    # two iterations, but the first backward pass is only partly in the trace
    (_mid_backward(loop_events(2, [("SGD", NET)], fetch=False)),
     "only two updates, and the backward pass before the first (from the trace's start) is "
     "not the same as the one before the second"),
], ids=["gan", "gan-fetched", "fetched-once", "two-classes", "mid-backward"])
def test_two_updates_that_may_be_one_iteration_stay_one_step(
        tmp_path: Path, events: list[dict[str, Any]], why: str) -> None:
    """Two updates that are not surely two iterations: one step of the whole trace, and the
    same reason in the full load's notes and in :func:`kineto_device_steps`'."""
    assert sum(e["name"].startswith("Optimizer.step#") for e in events) == 2
    f = write_trace(tmp_path / "t.json", events)
    p = pk.load(f, cache=False, progress=False)
    assert len(p.steps) == 1 and p.steps["step"].isna().all()
    rule = [n for n in p.meta.notes if "not used as step boundaries: " + why in n]
    assert len(rule) == 1
    notes: list[str] = []
    assert P.kineto_device_steps(f, notes) is None
    assert notes[0] == rule[0]
    assert set(notes) <= set(p.meta.notes) and len(notes) == 2


def _forward_only(iterations: int) -> list[dict[str, Any]]:
    """An inference loop: each 100 µs from ts 1000 an ``aten::linear`` launching a 40 µs
    kernel; no backward pass, no optimizer."""
    ev: list[dict[str, Any]] = []
    for i in range(iterations):
        t = 1000 + 100 * i
        ev += [{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1,
                "ts": t, "dur": 10},
               {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                "tid": 1, "ts": t + 2, "dur": 3, "args": {"correlation": i + 1}},
               {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7,
                "ts": t + 6, "dur": 40, "args": {"correlation": i + 1, "stream": 7,
                                                 "device": 0}}]
    return ev


def test_a_forward_only_trace_is_one_step_and_says_so(tmp_path: Path) -> None:
    """Five forward passes, no optimizer and no backward pass: one step, the device busy
    from the first kernel (ts 1006) to the last one's end (1406 + 40); the note says
    plainly that with no training iteration the whole trace is one step, and
    :func:`kineto_device_steps` gives None with that note (it gave None and no reason)."""
    f = write_trace(tmp_path / "infer.json", _forward_only(5))
    p = pk.load(f, cache=False, progress=False)
    assert len(p.steps) == 1 and p.steps["step"].isna().all()
    b = pk.analysis.step_breakdown(p)
    assert b["step_us"].iloc[0] == pytest.approx(1406 + 40 - 1006)
    said = [n for n in p.meta.notes if FORWARD_ONLY in n]
    assert len(said) == 1 and not [n for n in p.meta.notes if "profile without schedule" in n]
    notes: list[str] = []
    assert P.kineto_device_steps(f, notes) is None
    assert notes == said


@pytest.mark.shared_samples
def test_a_real_inference_trace_says_why_it_is_one_step() -> None:
    """TraceLens's B200 eager trace: no ProfilerStep, no optimizer step and no backward
    function (counted here from the raw JSON). :func:`kineto_device_steps` gave None and no
    reason; now the full load's note, which says the trace is forward-only work."""
    path = sample(B200)
    names = [str(e.get("name", "")) for e in raw_events(path)]
    assert names and not [n for n in names if n.startswith(("ProfilerStep#",
                                                             "Optimizer.step#"))]
    assert not [n for n in names if _BACKWARD.search(n)]
    notes: list[str] = []
    assert P.kineto_device_steps(path, notes) is None
    p = pk.load(path, cache=False, progress=False)
    assert len(p.steps) == 1
    assert len(notes) == 1 and FORWARD_ONLY in notes[0] and notes[0] in p.meta.notes


def test_device_steps_give_the_loaders_reason_for_a_gan_loop(tmp_path: Path) -> None:
    """Four GAN iterations with no DataLoader: where an iteration begins cannot be told.
    :func:`kineto_device_steps` gave None and no reason; now the full load's notes: the
    optimizer rule's reason and that the trace is then one step."""
    events = loop_events(4, [("Adam", D_BACKWARD), ("Adam", G_BACKWARD)], fetch=False)
    f = write_trace(tmp_path / "gan.json", events)
    notes: list[str] = []
    assert P.kineto_device_steps(f, notes) is None
    p = pk.load(f, cache=False, progress=False)
    assert len(p.steps) == 1
    assert len(notes) == 2 and set(notes) <= set(p.meta.notes)
    assert "the updates come in turns of 2" in notes[0]
    assert "one step over the whole trace" in notes[1]


#: Why a trace with optimizer steps but no backward function stays one step.
NO_BACKWARD = ("no backward pass is recorded in the trace (no host event named ...Backward<N> "
               "or ...AccumulateGrad), so whether each optimizer step ends an iteration "
               "cannot be checked: optimizers stepping in turn in one iteration (a GAN's "
               "discriminator and generator, even each after its own DataLoader batch) "
               "look the same as iterations, and the other host events between "
               "optimizer steps are not always the same from one iteration to the next")


@pytest.mark.shared_samples
def test_a_real_trace_without_backward_functions_says_why_it_is_one_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The MI300 trace (5 Optimizer.step#SGD.step, counted from the raw JSON) with its
    backward functions taken out: which optimizer steps end an iteration cannot be
    checked, so it stays one step. The note said only that; it now says why (optimizers
    stepping in turn look the same, and the other host events between updates are not a
    pattern to trust: on this trace 905 before the first update, 907 between the others,
    counted here), and the full load, kineto_device_steps and the preview above the limit
    (its byte scan) give the same reason."""
    with gzip.open(sample("wild/tl_ddp_resnet18_mi300/train_resnet18.json.gz"), "rt",
                   encoding="utf-8") as fh:
        doc = json.load(fh)
    events = [e for e in doc["traceEvents"] if not _BACKWARD.search(str(e.get("name", "")))]
    x = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op",
                                                                      "user_annotation")]
    marks = sorted((e["ts"], e["ts"] + e["dur"]) for e in x
                   if e["name"].startswith("Optimizer.step#"))
    assert len(marks) == 5
    ops = [e["ts"] for e in x if not e["name"].startswith("Optimizer.step#")]
    before = sum(1 for t in ops if t < marks[0][0])
    between = [sum(1 for t in ops if a[1] <= t < b[0])
               for a, b in zip(marks[:-1], marks[1:], strict=True)]
    assert (before, between) == (905, [907] * 4)
    trace = tmp_path / "train_resnet18.json"
    trace.write_text(json.dumps({**doc, "traceEvents": events}))
    p = pk.load(trace, cache=False, progress=False)
    assert len(p.steps) == 1 and p.steps["step"].isna().all()
    said = [n for n in p.meta.notes if NO_BACKWARD in n]
    assert len(said) == 1
    notes: list[str] = []
    assert P.kineto_device_steps(trace, notes) is None and notes[0] == said[0]
    monkeypatch.setattr(P, "DEVICE_STEPS_MAX_BYTES", 0)
    early = P.preview(trace)
    assert early.profile is None and NO_BACKWARD in early.notes[0]
