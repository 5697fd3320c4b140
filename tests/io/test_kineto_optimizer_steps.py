"""A Kineto trace without ``ProfilerStep#N``: its steps are the optimizer's iterations.

Every expected figure is read from the raw trace here (``gzip`` / ``json`` with exact
decimals): the host ``Optimizer.step#<Class>.step`` annotations, the trace's first host
event, the runtime launch of each device task by its correlation id. The rule
(:mod:`perfkit.io.kineto.iterations`): step ``k`` ends where the ``k``-th optimizer step
ends, the next begins there, the first begins at the trace's first host event; a device
task belongs to the step its launch ran in, as with ProfilerStep spans.
"""

from __future__ import annotations

import gzip
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from optimizer_loops import loop_events, true_steps, write_trace
from raw_kineto import Iterations, raw_device_steps, raw_events, raw_walls
from shared_samples import HTA, sample

import perfkit as pk

MI300 = "wild/tl_ddp_resnet18_mi300/train_resnet18.json.gz"
RESNET50 = "wild/k_resnet50_nw4/worker0.1623212756351.pt.trace.json.gz"
@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.shared_samples
def test_the_steps_of_a_trace_without_profiler_steps_are_its_optimizer_iterations() -> None:
    """AMD MI300 ResNet-18 (TraceLens): 5 Optimizer.step#SGD.step and no ProfilerStep. It
    was read as one step of the whole trace (3.39 s, 5 iterations); now 5 steps, each
    holding the tasks its host iteration launched, with the device window and wall time
    read from the raw file (0.5 µs: an epoch timestamp in µs as float64 keeps about
    0.1 µs)."""
    path = sample(MI300)
    events = raw_events(path)  # exact decimals: no float rounding
    assert not [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    it = Iterations(events)
    assert len(it.spans) == 5
    p = pk.load(path, cache=False, progress=False)
    assert p.steps["step"].tolist() == [0, 1, 2, 3, 4]
    # each device task in the iteration its launch ran in; after the last one: no step
    want = {k: it.step.count(k) for k in range(5)}
    got = p.kernels["step"].value_counts()
    assert {int(k): int(n) for k, n in got.items()} == want
    assert int(p.kernels["step"].isna().sum()) == it.step.count(None) == 1
    # host operators and annotations by their start
    ops = [it.index(e["ts"]) for e in it.host]
    got_ops = p.ops["step"].value_counts()
    assert {int(k): int(n) for k, n in got_ops.items()} == {k: ops.count(k) for k in range(5)}
    # the device window and the wall time of each step
    b = pk.analysis.step_breakdown(p).set_index("step")
    walls = it.walls()
    assert sorted(walls) == list(range(5))
    for k, (window, wall) in walls.items():
        assert b.loc[k, "step_us"] == pytest.approx(float(window), abs=0.5), k
        assert b.loc[k, "step_us"] + b.loc[k, "preparing_us"] == pytest.approx(
            float(wall), abs=0.5), k
    step_s = pk.analysis.measured_step_s(b.reset_index())
    assert step_s == pytest.approx(float(statistics.median(w for _, w in walls.values()))
                                   / 1e6, rel=1e-9)
    # the host's pace agrees: the loop waits for each iteration (loss.item()), so the GPU
    # ends each iteration's work within 50 µs of the end of the host's Optimizer.step;
    # 0.1 % of an iteration (>= 115 ms) leaves room for that and no more
    for k, (a, b_end) in enumerate(it.spans):
        assert float(walls[k][1]) == pytest.approx(float(b_end - a), rel=1e-3), k
    assert any("inferred from the optimizer's annotations (Optimizer.step#SGD.step)" in n
               for n in p.meta.notes)
    assert p.meta.extra["profiler_steps"] == []  # step numbers of its own, not the job's
    assert p.steps["step_mark"].tolist() == ["Optimizer.step#SGD.step"] * 5


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
@pytest.mark.shared_samples
def test_without_its_profiler_steps_a_trace_gets_back_the_same_steps(tmp_path: Path) -> None:
    """PyTorch 1.9 ResNet-50 (categories ``Operator`` / ``Runtime``): the trace has both
    ProfilerStep#5-10 and an Optimizer.step#SGD.step in each. Each ProfilerStep ends
    10-12 µs after its optimizer step and the next begins 65-70 µs later, the first 145
    µs after the trace's first host event. With the ProfilerStep events taken out (a copy
    in tmp_path), each iteration holds the same device tasks as its ProfilerStep: the same
    device time (:func:`raw_kineto.raw_device_steps`: the window, and the device's idle time
    after it while the span lasts) but for the 10-12 µs by which the ProfilerStep outlasts
    the optimizer step (a step whose device ran out of work before the span ended has that
    much more idle tail), and a wall time (the device time and the device's wait before it,
    :func:`raw_kineto.raw_walls`) at most 0.2 ms longer, the wait counted from the
    iteration's earlier start, or those 10-12 µs shorter, in steps of 116 to 182 ms."""
    path = sample(RESNET50)
    events = raw_events(path)  # parsed once for raw_walls and raw_device_steps too
    marked = raw_walls(path)
    windows, on_device = raw_device_steps(path)
    assert sorted(marked) == sorted(windows) == list(range(5, 11)) and on_device

    def unmarked(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e for e in evs if not str(e.get("name", "")).startswith("ProfilerStep#")]

    with gzip.open(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    copy = tmp_path / "worker0.pt.trace.json.gz"
    with gzip.open(copy, "wt", encoding="utf-8") as fh:  # dumps: json's C encoder, not dump's
        fh.write(json.dumps({**doc, "traceEvents": unmarked(doc["traceEvents"])}))
    it = Iterations(unmarked(events))
    assert len(it.spans) == 6
    p = pk.load(copy, cache=False, progress=False)
    b = pk.analysis.step_breakdown(p)
    assert b["step"].tolist() == list(range(6))
    walls = b["step_us"] + b["preparing_us"]
    raw = it.walls()
    for k, step in enumerate(sorted(marked)):
        assert walls[k] == pytest.approx(float(raw[k][1]), abs=0.5), k
        assert b["step_us"][k] == pytest.approx(float(raw[k][0]), abs=0.5), k
        assert -0.5 <= float(windows[step]) - b["step_us"][k] <= 12.5, k
        assert -12.5 <= walls[k] - float(marked[step]) <= 200, k


# ----------------------------------------------------------------- when not to infer

def _trace(tmp_path: Path, marks: list[tuple[str, int, int, int]], name: str = "t.json",
           backward: bool = True) -> Path:
    """A trace of one ``aten::mm`` (with a kernel) every 100 µs from ts 1000, each followed
    at 30 µs by its backward function (on thread 2, unless not ``backward``), and the
    ``marks`` (name, tid, ts, dur) as host annotations."""
    ev: list[dict[str, Any]] = []
    for i in range(6):
        t = 1000 + 100 * i
        if backward:
            ev.append({"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 2, "ts": t + 30,
                       "dur": 5, "name": "autograd::engine::evaluate_function: MmBackward0"})
        ev += [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t,
                "dur": 10},
               {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                "tid": 1, "ts": t + 1, "dur": 2, "args": {"correlation": i + 1}},
               {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7,
                "ts": t + 5, "dur": 20, "args": {"correlation": i + 1, "stream": 7,
                                                 "device": 0}}]
    ev += [{"ph": "X", "cat": "user_annotation", "name": n, "pid": 1, "tid": tid, "ts": ts,
            "dur": dur} for n, tid, ts, dur in marks]
    f = tmp_path / name
    f.write_text(json.dumps({"traceEvents": ev}))
    return f


@pytest.mark.parametrize(("marks", "why"), [
    ([("Optimizer.step#SGD.step", 1, 1050, 20)], "only one optimizer step"),
    ([("Optimizer.step#Adam.step", 1, 1050, 20), ("Optimizer.step#SGD.step", 1, 1250, 20),
      ("Optimizer.step#Adam.step", 1, 1450, 20), ("Optimizer.step#SGD.step", 1, 1550, 20)],
     "several optimizers step (Optimizer.step#Adam.step, Optimizer.step#SGD.step), so "
     "where an iteration ends cannot be told"),
    ([("Optimizer.step#SGD.step", 1, 1050, 20), ("Optimizer.step#SGD.step", 2, 1250, 20)],
     "the optimizer steps on several threads"),
    ([("Optimizer.step#SGD.step", 1, 1050, 20), ("Optimizer.step#SGD.step", 1, 1250, 20)],
     "only two updates, and the backward pass before the first (from the trace's start) is "
     "not the same as the one before the second, so they may be one iteration of two "
     "optimizers stepping in turn, as a GAN's discriminator and generator do, or the trace "
     "begins inside a backward pass"),
    ([("Optimizer.step#SGD.step", 1, 1050, 20), ("Optimizer.step#SGD.step", 1, 1070, 20),
      ("Optimizer.step#SGD.step", 1, 1090, 5)],
     "they all step after one backward pass, in one iteration"),
])
def test_marks_that_tell_no_iteration_leave_one_step(tmp_path: Path, marks: list,
                                                      why: str) -> None:
    """One step over the whole trace, as without any mark, and a note that says why. Two
    updates have one backward pass between them, compared with the one before the first
    (a GAN's discriminator and generator steps, see :func:`test_a_gan_loop_without_a_data_
    loader_stays_one_step`, follow different ones): here one backward function from the
    trace's start (ts 1030) to the first mark (1050), two (1130, 1230) to the second."""
    p = pk.load(_trace(tmp_path, marks), cache=False, progress=False)
    assert len(p.steps) == 1 and p.steps["step"].isna().all()
    assert p.kernels["step"].isna().all()
    assert any(n.endswith(why) and "not used as step boundaries" in n for n in p.meta.notes)


def test_an_optimizer_wrapping_another_marks_each_iteration_once(tmp_path: Path) -> None:
    """``Optimizer.step#Lookahead.step`` around ``Optimizer.step#SGD.step`` (same thread):
    the outer one is the mark. Iterations end at 1060, 1260 and 1460 (two backward
    functions before each but the first): the kernels launched at 1001, 1101 ... are in
    step 0 up to 1060 (one), step 1 up to 1260 (two), step 2 up to 1460 (two), none after
    (one)."""
    marks = [m for t in (1040, 1240, 1440) for m in (
        ("Optimizer.step#Lookahead.step", 1, t, 20), ("Optimizer.step#SGD.step", 1, t + 5, 10))]
    p = pk.load(_trace(tmp_path, marks), cache=False, progress=False)
    launches = [1000 + 100 * i + 1 for i in range(6)]
    ends = [1060, 1260, 1460]
    want = [next((k for k, e in enumerate(ends) if t < e), None) for t in launches]
    assert want == [0, 1, 1, 2, 2, None]
    got = [None if pd.isna(v) else int(v) for v in p.kernels["step"].tolist()]
    assert got == want
    assert p.steps["step"].tolist() == [0, 1, 2]


def test_without_any_backward_pass_the_marks_are_not_trusted(tmp_path: Path) -> None:
    """Three SGD steps but no backward function in the trace: whether each is an iteration
    or one of several optimizers of an iteration cannot be checked. It was split into three
    steps; now it stays one, and the note says why."""
    marks = [("Optimizer.step#SGD.step", 1, t, 20) for t in (1050, 1250, 1450)]
    p = pk.load(_trace(tmp_path, marks, backward=False), cache=False, progress=False)
    assert len(p.steps) == 1 and p.steps["step"].isna().all()
    assert any("no backward pass is recorded in the trace (no host event named "
               "...Backward<N> or ...AccumulateGrad), so whether each optimizer step ends "
               "an iteration cannot be checked" in n for n in p.meta.notes)


# ------------------------------------------- several optimizers of one class per iteration

#: The backward functions of a GAN's two phases: the discriminator's loss on real and
#: fake samples back through the discriminator; the generator's through both networks.
D_BACKWARD = ("BinaryCrossEntropyBackward0", "SigmoidBackward0", "AddmmBackward0",
              "LeakyReluBackward0", "AddmmBackward0", "torch::autograd::AccumulateGrad",
              "torch::autograd::AccumulateGrad")
G_BACKWARD = ("BinaryCrossEntropyBackward0", "SigmoidBackward0", "AddmmBackward0",
              "LeakyReluBackward0", "AddmmBackward0", "TanhBackward0", "AddmmBackward0",
              "ReluBackward0", "AddmmBackward0", "torch::autograd::AccumulateGrad",
              "torch::autograd::AccumulateGrad")
GAN = [("Adam", D_BACKWARD), ("Adam", G_BACKWARD)]


def test_a_gan_loop_steps_once_per_iteration_where_its_data_loader_says(tmp_path: Path
                                                                        ) -> None:
    """A GAN's loop (:mod:`optimizer_loops`): a DataLoader fetch, the discriminator's
    forward, backward and ``Optimizer.step#Adam.step``, then the generator's, 4 times.
    Every Adam step used to end a step: 8 steps of half an iteration each. Now the steps
    are the 4 iterations, each ending with the generator's step; each one's device window
    and wall time are those of the loop written (:func:`optimizer_loops.true_steps`)."""
    events = loop_events(4, GAN, fetch=True)
    p = pk.load(write_trace(tmp_path / "gan.json", events), cache=False, progress=False)
    want = true_steps(events, per_iteration=2)
    assert sorted(want) == [0, 1, 2, 3]
    assert p.steps["step"].tolist() == [0, 1, 2, 3]
    b = pk.analysis.step_breakdown(p).set_index("step")
    for k, (window, wall) in want.items():
        assert b.loc[k, "step_us"] == pytest.approx(window, abs=1e-3), k
        assert b.loc[k, "step_us"] + b.loc[k, "preparing_us"] == pytest.approx(wall,
                                                                               abs=1e-3), k
    # 3 kernels per phase, 6 per iteration, each in the iteration its launch ran in
    assert p.kernels["step"].value_counts().sort_index().tolist() == [6, 6, 6, 6]
    assert p.steps["step_mark"].tolist() == ["Optimizer.step#Adam.step"] * 4
    assert any("the 4 steps are the training iterations" in n for n in p.meta.notes)


def test_a_gan_loop_without_a_data_loader_stays_one_step(tmp_path: Path) -> None:
    """The same loop without DataLoader annotations (the batches made in the loop): the
    Adam steps come in turns of two after different backward passes, but which of the two
    ends an iteration cannot be told. One step over the whole trace, and the note says
    why, rather than 8 wrong steps."""
    events = loop_events(4, GAN, fetch=False)
    p = pk.load(write_trace(tmp_path / "gan.json", events), cache=False, progress=False)
    assert len(p.steps) == 1 and p.steps["step"].isna().all()
    assert any("not used as step boundaries: the updates come in turns of 2, each after a "
               "different backward pass (several optimizers stepping in turn, as a GAN's "
               "discriminator and generator do)" in n for n in p.meta.notes)


def test_a_gan_trace_that_begins_inside_an_iteration_stays_one_step(tmp_path: Path) -> None:
    """The profiler started after the discriminator's first step: the fetches come before
    every 2nd update, but the trace's first update is not an iteration's first, so the
    first step would be half an iteration. One step, as without the fetches."""
    events = loop_events(4, GAN, fetch=True)
    first_d = min(e["ts"] + e["dur"] for e in events if e["name"].startswith("Optimizer."))
    late = [e for e in events if e["ts"] >= first_d]
    p = pk.load(write_trace(tmp_path / "gan.json", late), cache=False, progress=False)
    assert len(p.steps) == 1 and p.steps["step"].isna().all()


def test_optimizers_stepping_on_one_backward_pass_end_one_iteration(tmp_path: Path) -> None:
    """``loss.backward(); opt_a.step(); opt_b.step()`` with two Adam optimizers (3
    iterations, no DataLoader): no backward function between the two steps, so the second
    is in the first one's iteration. It was split into 6 steps; now 3, each ending with
    the second Adam step, with the loop's device windows and walls."""
    events = loop_events(3, [("Adam", D_BACKWARD), ("Adam", ())], fetch=False)
    p = pk.load(write_trace(tmp_path / "two.json", events), cache=False, progress=False)
    want = true_steps(events, per_iteration=2)
    assert sorted(want) == [0, 1, 2]
    b = pk.analysis.step_breakdown(p).set_index("step")
    assert b.index.tolist() == [0, 1, 2]
    for k, (window, wall) in want.items():
        assert b.loc[k, "step_us"] == pytest.approx(window, abs=1e-3), k
        assert b.loc[k, "step_us"] + b.loc[k, "preparing_us"] == pytest.approx(wall,
                                                                               abs=1e-3), k


@pytest.mark.shared_samples
def test_two_optimizers_on_one_backward_pass_are_one_update_on_a_real_trace(tmp_path: Path
                                                                           ) -> None:
    """HTA's sampled rank of a 128-rank job: each of its 2 ProfilerStep spans holds
    ``Optimizer.step#Shampoo.step`` then ``Optimizer.step#EMAOptimizer.step``, with no
    backward function between the two (read here from the raw JSON). With the ProfilerStep
    events taken out, the two classes made the old rule give up ("several optimizers
    step"); now each pair is one update, and the trace stays one step because the backward
    pass before the first update (from the trace's start) is not the one before the second
    (their backward functions, counted here from the raw JSON, differ: the trace's first
    has no loss backward), so the 2 updates are not surely 2 iterations."""
    path = sample(HTA) / "sampled_rank-0.json.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e["name"].startswith("ProfilerStep#"))
    marks = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in events
                   if e["name"].startswith("Optimizer.step#"))
    backward = [e["ts"] for e in events if e["name"].endswith(("Backward0", "AccumulateGrad"))]
    assert len(steps) == 2 and backward
    for a, b in steps:
        inside = [m for m in marks if a <= m[0] < b]
        assert [m[2] for m in inside] == ["Optimizer.step#Shampoo.step",
                                          "Optimizer.step#EMAOptimizer.step"]
        assert not [t for t in backward if inside[0][1] <= t < inside[1][0]]
    named = [(e["ts"], e["name"]) for e in events if e["name"].endswith(
        ("Backward0", "Backward1", "Backward", "AccumulateGrad"))]
    assert Counter(n for t, n in named if t < marks[0][0]) != Counter(
        n for t, n in named if marks[1][1] <= t < marks[2][0])
    copy = tmp_path / "rank0.json.gz"
    with gzip.open(copy, "wt", encoding="utf-8") as fh:  # dumps: json's C encoder, not dump's
        fh.write(json.dumps({**doc, "traceEvents": [e for e in doc["traceEvents"] if not str(
            e.get("name", "")).startswith("ProfilerStep#")]}))
    p = pk.load(copy, cache=False, progress=False)
    assert len(p.steps) == 1 and p.steps["step"].isna().all()
    assert any("not used as step boundaries: only two updates, and the backward pass before "
               "the first (from the trace's start) is not the same as the one before the "
               "second" in n for n in p.meta.notes)
