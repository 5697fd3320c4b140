"""The steps read first (perfkit.io.preview.steps), checked against the raw files read with the
csv and json modules, never against perfkit's own loader."""

from __future__ import annotations

import csv
import gzip
import json
import os
import statistics
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from raw_kineto import (
    Iterations,
    idle_tails,
    raw_device_steps,
    raw_events,
    raw_walls,
    raw_windows,
)
from shared_samples import HTA, PT_LEVEL1, shared_sample

from perfkit.io.kineto import scan as kineto_scan
from perfkit.io.preview import steps as P
from perfkit.io.preview.steps import kineto_step_spans, preview


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch) -> None:
    """Read the files: a rank in perfkit's cache (another test loaded it) gives its cached
    steps instead (test_the_cached_steps_are_read_back turns the cache back on)."""
    monkeypatch.setenv("PERFKIT_CACHE", "0")


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` with its size and modification time."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*")}


def _csv_steps(rank_dir: Path) -> dict[int, float]:
    """Step -> computing + exposed communication + free, from step_trace_time.csv."""
    path = rank_dir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        return {int(r["Step"]): float(r["Computing"]) + float(r["Communication(Not Overlapped)"])
                + float(r["Free"]) for r in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def full_load() -> Callable[[Path], Any]:
    """``pk.load(path, cache=False)``, the file read once per path for the module's tests:
    several of them compare the preview with the full load of the same shared traces."""
    import perfkit as pk

    loaded: dict[Path, Any] = {}

    def load(path: Path) -> Any:
        if path not in loaded:
            loaded[path] = pk.load(path, cache=False, progress=False)
        return loaded[path]

    return load


def _json_spans(path: Path) -> dict[int, float]:
    """Step -> duration of the host ProfilerStep#N events, from the whole trace (read with
    ``json``: :func:`raw_kineto.raw_events`, whose exact decimals round here to the floats
    that ``json`` reads by default)."""
    out: dict[int, float] = {}
    for e in raw_events(path):
        name = e.get("name", "")
        if name.startswith("ProfilerStep#") and e.get("ph") == "X" and \
                e.get("cat") not in ("gpu_user_annotation", "kernel"):
            out.setdefault(int(name.split("#")[1]), float(e["dur"]))
    return out


@pytest.mark.shared_samples
def test_ascend_steps_are_the_step_trace_rows() -> None:
    folder = shared_sample(PT_LEVEL1)
    before = _snapshot(folder)
    got = preview(folder)
    assert got.steps_from == "step_trace_time.csv"
    steps = got.profile.steps
    for rank_dir in sorted(folder.glob("rank*_ascend_pt")):
        rank = int(rank_dir.name[4:rank_dir.name.index("_")])
        expected = _csv_steps(rank_dir)
        mine = steps[steps["rank"] == rank]
        assert sorted(mine["step"].astype(int)) == sorted(expected)
        for row in mine.itertuples():
            total = row.computing_us + row.comm_not_overlapped_us + row.free_us
            assert total == pytest.approx(expected[int(row.step)], rel=1e-9)
    assert got.input_bytes == sum(
        f.stat().st_size for r in folder.glob("rank*_ascend_pt")
        for f in [*r.glob("ASCEND_PROFILER_OUTPUT/*"), *r.glob("profiler_info*.json"),
                  *r.glob("profiler_metadata.json")] if f.is_file())
    assert _snapshot(folder) == before  # nothing written in the user's folder


@pytest.mark.shared_samples
def test_kineto_steps_are_the_profiler_step_events() -> None:
    folder = shared_sample(HTA)
    for trace in sorted(folder.glob("*.json.gz")):
        expected = _json_spans(trace)
        spans = kineto_step_spans(trace)
        assert dict(zip(spans["step"], spans["dur_us"], strict=True)) == expected
    got = preview(folder, device_steps=False)
    assert got.steps_from == "the host ProfilerStep spans" and got.host_spans
    # what the Overview shows first then: the median over steps of the slowest rank's span
    per_step: dict[int, float] = {}
    for trace in folder.glob("*.json.gz"):
        for step, dur in _json_spans(trace).items():
            per_step[step] = max(per_step.get(step, 0.0), dur)
    from perfkit import analysis as A

    measured = A.measured_step_s(A.step_breakdown(got.profile))
    assert measured == pytest.approx(statistics.median(per_step.values()) / 1e6, rel=1e-9)


def _event(name: str, ts: float, dur: float, cat: str = "user_annotation",
           args_first: bool = False) -> dict:
    event = {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}
    if args_first:
        event = {"args": {"note": "{braces} in a string", "External id": 3}, **event}
    return event


def test_the_byte_scan_keeps_host_steps_only(tmp_path: Path, monkeypatch) -> None:
    filler = [_event("aten::mm", 10.0 * i, 5.0, cat="cpu_op") for i in range(3000)]
    steps = [_event("ProfilerStep#7", 100.0, 40.0, args_first=True),
             _event("ProfilerStep#7", 101.0, 30.0, cat="gpu_user_annotation"),
             _event("ProfilerStep#8", 200.0, 55.5),
             {"ph": "i", "name": "marker", "args": {"label": "ProfilerStep#9"}, "ts": 1},
             _event("ProfilerStep#10", 300.0, 61.25)]
    events = filler[:1000] + steps[:2] + filler[1000:2000] + steps[2:] + filler[2000:]
    plain = tmp_path / "trace.json"
    plain.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    packed = tmp_path / "trace.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    expected = {7: 40.0, 8: 55.5, 10: 61.25}
    assert _json_spans(plain) == expected  # the independent reading agrees on the input
    for path in (plain, packed):
        spans = kineto_step_spans(path)
        assert dict(zip(spans["step"], spans["dur_us"], strict=True)) == expected
    # a compressed file read in chunks smaller than the file: no hit lost or read twice
    monkeypatch.setattr(kineto_scan, "_CHUNK", 4096)
    monkeypatch.setattr(kineto_scan, "_CONTEXT", 1024)
    spans = kineto_step_spans(packed)
    assert dict(zip(spans["step"], spans["dur_us"], strict=True)) == expected


def test_a_trace_without_steps_has_no_preview_and_says_why(tmp_path: Path) -> None:
    trace = tmp_path / "rank0.json"
    trace.write_text(json.dumps({"traceEvents": [_event("aten::mm", 1.0, 2.0, "cpu_op")]}))
    got = preview(trace)
    assert got.profile is None and got.input_bytes == os.path.getsize(trace)
    assert "no ProfilerStep#N event" in got.notes[0]
    assert P.describe(got) == "no quick step reading for this format"


@pytest.mark.shared_samples
def test_msprof_analyze_output_gives_the_rank_rows() -> None:
    folder = shared_sample("ascend/msinsight-cluster-output") / "cluster_analysis_output"
    with (folder / "cluster_step_trace_time.csv").open(newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["Type"].strip().lower() == "rank"]
    got = preview(folder)
    steps = got.profile.steps
    assert len(steps) == len(rows)
    assert sorted(steps["rank"].astype(int)) == sorted(int(r["Index"]) for r in rows)
    assert steps["computing_us"].sum() == pytest.approx(
        sum(float(r["Computing"]) for r in rows), rel=1e-9)


def test_a_missing_path_is_a_profile_error(tmp_path: Path) -> None:
    from perfkit.errors import ProfileError

    with pytest.raises(ProfileError, match="does not exist"):
        preview(tmp_path / "nowhere")


# ---- the device step: equal to the full load's, checked against the raw JSON ----------

#: Every Kineto trace of the shared samples (test_every_kineto_sample_is_listed keeps the
#: list whole) and of the bundled data.
KINETO_SAMPLES = [
    "gpu/hta-trace_filter/sampled_rank-0.json.gz",
    "gpu/hta-trace_filter/sampled_rank-1.json.gz",
    "wild/k_resnet50_nw0/worker0.1623143089861.pt.trace.json.gz",
    "wild/k_resnet50_nw4/worker0.1623212756351.pt.trace.json.gz",
    "wild/ds_train/train.json",
    "wild/tl_qwen_h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "wild/tl_timesformer_h100/timesformer.json.gz",
    "wild/tl_b200_eager/eager_trace.json.gz",
    "wild/tl_ddp_resnet18_mi300/train_resnet18.json.gz",
]
def _kineto_paths() -> list[Path]:
    from perfkit.bundled_samples import resolve_sample

    bundled = sorted(Path(resolve_sample("sample:kineto-tiny-llama")).glob("*.json.gz"))
    return [shared_sample(name) for name in KINETO_SAMPLES] + bundled


@pytest.mark.shared_samples
def test_every_kineto_sample_is_listed(shared_samples: Path) -> None:
    traces = {str(p.relative_to(shared_samples)) for p in shared_samples.rglob("*.json.gz")}
    traces |= {str(p.relative_to(shared_samples)) for p in shared_samples.rglob("*.json")
               if b'"cuda_runtime"' in p.read_bytes()[:4 << 20]}
    assert traces == set(KINETO_SAMPLES)


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
@pytest.mark.shared_samples
def test_the_preview_step_is_the_full_loads_device_step_on_every_kineto_sample(
        full_load: Callable[[Path], Any]) -> None:
    from perfkit import analysis as A

    with_steps = iterations = 0
    for path in _kineto_paths():
        raw, on_device = raw_device_steps(path)
        got = preview(path, device_steps=True)
        if not raw and Iterations(raw_events(path)).spans:  # the optimizer's iterations
            iterations += 1  # (test_a_trace_without_profiler_steps_previews_its_iterations)
            assert got.profile is not None and not got.host_spans, path
            continue
        if not raw:  # no ProfilerStep nor iterations: no quick reading, and the page says why
            assert got.profile is None and "no ProfilerStep#N event" in got.notes[0], path
            continue
        with_steps += 1
        assert not got.host_spans, path  # every step time read is the full load's
        assert got.steps_from == ("the device tasks of each ProfilerStep" if on_device
                                  else "the ProfilerStep spans"), path
        mine = A.step_breakdown(got.profile)
        assert {int(s): v for s, v in zip(mine["step"], mine["step_us"], strict=True)} == \
            pytest.approx({s: float(v) for s, v in raw.items()}, rel=1e-12, abs=1e-6), path
        full = A.step_breakdown(full_load(path))
        full = full.dropna(subset=["step"])
        assert dict(zip(full["step"].astype(int), full["step_us"], strict=True)) == \
            pytest.approx(dict(zip(mine["step"].astype(int), mine["step_us"], strict=True)),
                          rel=1e-12), path
        assert A.measured_step_s(mine) == pytest.approx(A.measured_step_s(full), rel=1e-12)
    assert with_steps == 9  # 7 shared traces with ProfilerStep spans, 2 bundled ranks
    assert iterations == 1  # the MI300 trace (Optimizer.step#SGD.step, no ProfilerStep)


@pytest.mark.shared_samples
def test_a_trace_without_profiler_steps_previews_its_iterations(
        full_load: Callable[[Path], Any]) -> None:
    """AMD MI300 ResNet-18 (TraceLens): no ProfilerStep#N, 5 host Optimizer.step#SGD.step
    annotations. The preview had no step for it ("its steps come with the full load"), so
    the Overview's first answer had no step time. It now reads the full load's steps, the
    5 training iterations (:class:`raw_kineto.Iterations`, from the raw gzip JSON with exact
    decimals): each one's device window and wall time within 0.5 µs of the raw figures (an
    epoch timestamp in µs as float64 keeps about 0.1 µs), equal to the full load's, and a
    step basis that says the steps were inferred from the optimizer."""
    from perfkit import analysis as A

    path = shared_sample("wild/tl_ddp_resnet18_mi300/train_resnet18.json.gz")
    events = raw_events(path)
    assert not [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    walls = Iterations(events).walls()  # iteration -> (device window, wall), µs
    assert sorted(walls) == list(range(5))
    got = preview(path)  # a small trace: the device steps by default
    assert got.profile is not None and not got.host_spans and not got.device_lane
    assert got.steps_from == ("the device tasks of each training iteration, inferred from "
                              "the optimizer's annotations")
    mine = A.step_breakdown(got.profile)
    assert mine["step"].tolist() == list(range(5))
    for k, (window, wall) in walls.items():
        row = mine[mine["step"] == k].iloc[0]
        assert row["step_us"] == pytest.approx(float(window), abs=0.5), k
        assert row["step_us"] + row["preparing_us"] == pytest.approx(float(wall), abs=0.5), k
    expected = float(statistics.median(w for _, w in walls.values())) / 1e6
    assert A.measured_step_s(mine) == pytest.approx(expected, rel=1e-9)
    full = A.step_breakdown(full_load(path))
    for col in ("step", "step_us", "preparing_us"):
        assert mine[col].tolist() == pytest.approx(full[col].tolist(), rel=1e-12), col
    basis = A.steps.step_basis(mine)
    assert basis == A.steps.step_basis(full)
    assert "inferred from the optimizer's Optimizer.step#SGD.step annotations" in basis
    # above the limit the byte scan reads the same iterations, as host spans (but the
    # first): test_preview_iteration_scan.py checks them
    scan = preview(path, device_steps=False)
    assert scan.host_spans and scan.profile.steps["step"].tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize(("marks", "why"), [
    ([], "no ProfilerStep#N event nor optimizer iterations"),
    ([("Optimizer.step#SGD.step", 1, 150.0, 20.0)], "only one optimizer step"),
    ([("Optimizer.step#Adam.step", 1, 150.0, 20.0), ("Optimizer.step#SGD.step", 1, 250.0, 20.0),
      ("Optimizer.step#Adam.step", 1, 350.0, 20.0), ("Optimizer.step#SGD.step", 1, 450.0, 20.0)],
     "several optimizers step"),
    ([("Optimizer.step#SGD.step", 1, 150.0, 20.0), ("Optimizer.step#SGD.step", 2, 250.0, 20.0)],
     "the optimizer steps on several threads"),
])
def test_marks_that_tell_no_iteration_leave_no_preview(tmp_path: Path, marks: list,
                                                       why: str) -> None:
    """Where the full load keeps one step over the whole trace, the preview has none, and
    says why as the full load's note does."""
    events = [_event("aten::mm", 100.0 * i, 5.0, cat="cpu_op") for i in range(6)]
    events += [{**_event("autograd::engine::evaluate_function: MmBackward0", 100.0 * i + 30,
                         5.0, cat="cpu_op"), "tid": 2} for i in range(6)]
    events += [{**_event(n, ts, dur), "tid": tid} for n, tid, ts, dur in marks]
    trace = tmp_path / "rank0.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    got = preview(trace)
    assert got.profile is None and "no ProfilerStep#N event" in got.notes[0]
    assert why in got.notes[0] and got.notes[0].endswith("its steps come with the full load")


def test_the_outermost_optimizer_step_ends_each_previewed_iteration(tmp_path: Path) -> None:
    """``Optimizer.step#Lookahead.step`` around ``Optimizer.step#SGD.step`` three times,
    with a copy of the inner one on the device lane (``gpu_user_annotation``, not a mark),
    and a backward function before each: each iteration ends where an outer annotation
    ends, the first begins at the trace's first host event (the first launch). Kernels
    launched at 101 + 50 k (k = 0..7) run 20 µs from 5 µs after their launch; each
    iteration's step runs from the first to the last kernel launched in it; the last
    launches come after the iterations, in none."""
    events: list[dict] = []
    for k in range(8):
        t = 100.0 + 50 * k
        events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                    "tid": 1, "ts": t + 1, "dur": 2.0, "args": {"correlation": k + 1}},
                   {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7,
                    "ts": t + 6, "dur": 20.0, "args": {"correlation": k + 1}}]
    for outer in (170.0, 270.0, 370.0):
        events += [{**_event("autograd::engine::evaluate_function: MmBackward0", outer - 40,
                             5.0, cat="cpu_op"), "tid": 2},
                   _event("Optimizer.step#Lookahead.step", outer, 20.0),
                   _event("Optimizer.step#SGD.step", outer + 5, 10.0),
                   _event("Optimizer.step#SGD.step", outer + 6, 1.0, cat="gpu_user_annotation")]
    trace = tmp_path / "rank0.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    first = min(e["ts"] for e in events if e["cat"] in ("cuda_runtime", "user_annotation",
                                                        "cpu_op"))
    bounds = [first, *(e["ts"] + e["dur"] for e in events if "Lookahead" in e["name"])]
    launch = {e["args"]["correlation"]: e["ts"] for e in events if e["cat"] == "cuda_runtime"}
    want: dict[int, list[tuple[float, float]]] = {}
    for e in events:
        if e["cat"] == "kernel":
            at = launch[e["args"]["correlation"]]
            k = next((i for i in range(len(bounds) - 1) if bounds[i] <= at < bounds[i + 1]),
                     None)
            if k is not None:
                want.setdefault(k, []).append((e["ts"], e["ts"] + e["dur"]))
    assert sorted(want) == [0, 1, 2] and [len(v) for _, v in sorted(want.items())] == [2, 2, 2]
    got = preview(trace).profile.steps
    assert got["step"].tolist() == [0, 1, 2]
    # each iteration's first to last task, and the device's idle time after it until the
    # iteration ends (the outer optimizer step's end) or the next one's first task
    windows = {k: [min(a for a, _ in v), max(b for _, b in v)] for k, v in want.items()}
    tails = idle_tails(windows, {k: bounds[k + 1] for k in windows}, [])
    assert got["total_us"].tolist() == [b - a + float(tails[k][0])
                                        for k, (a, b) in sorted(windows.items())]
    assert float(tails[0][0]) > 0  # the device waits after iteration 0's last task
    assert got["step_mark"].tolist() == ["Optimizer.step#Lookahead.step"] * 3


@pytest.mark.shared_samples
def test_the_device_steps_of_a_trace_without_profiler_steps_are_its_iterations() -> None:
    """``kineto_device_steps`` on the AMD MI300 ResNet-18 trace (no ProfilerStep#N, 5 host
    ``Optimizer.step#SGD.step``) returned None, while ``perfkit.load`` gives 5 steps. It now
    gives those 5 iterations, each one's device window and the device's wait before it
    within 0.5 µs of the raw figures (:class:`raw_kineto.Iterations`: the raw gzip JSON
    with exact decimals, each iteration ending where an optimizer step's annotation ends),
    and a ``step_mark`` column saying they were inferred from that annotation."""
    path = shared_sample("wild/tl_ddp_resnet18_mi300/train_resnet18.json.gz")
    walls = Iterations(raw_events(path)).walls()  # iteration -> (device window, wall), µs
    assert sorted(walls) == list(range(5))
    got = P.kineto_device_steps(path)
    assert got is not None and got["step"].tolist() == list(range(5))
    for k, (window, wall) in walls.items():
        row = got[got["step"] == k].iloc[0]
        assert row["total_us"] == pytest.approx(float(window), abs=0.5), k
        assert row["total_us"] + row["preparing_us"] == pytest.approx(float(wall), abs=0.5), k
    assert got["step_mark"].tolist() == ["Optimizer.step#SGD.step"] * 5


def test_a_gan_loop_previews_its_iterations_where_its_data_loader_says(tmp_path: Path
                                                                       ) -> None:
    """A GAN's loop (:mod:`optimizer_loops`: per iteration a DataLoader fetch, then the
    discriminator's and the generator's forward, backward and ``Optimizer.step#Adam.step``),
    4 times: the preview and ``kineto_device_steps`` gave 8 steps of half an iteration. Now
    4, with the device windows and walls of the loop written; without the fetches, where
    an iteration ends cannot be told: no step, and the note says why."""
    from optimizer_loops import loop_events, true_steps, write_trace

    from perfkit.io.kineto.iterations import BACKWARD  # the names the loader reads

    phases = [("Adam", ("SigmoidBackward0", "AddmmBackward0", "AddmmBackward0")),
              ("Adam", ("SigmoidBackward0", "AddmmBackward0", "TanhBackward0",
                        "AddmmBackward0"))]
    assert all(BACKWARD.search(n) for _, names in phases for n in names)
    events = loop_events(4, phases, fetch=True)
    trace = write_trace(tmp_path / "gan.json", events)
    want = true_steps(events, per_iteration=2)
    assert sorted(want) == [0, 1, 2, 3]
    for got in (P.kineto_device_steps(trace), preview(trace).profile.steps):
        assert got["step"].tolist() == [0, 1, 2, 3]
        assert got["total_us"].tolist() == pytest.approx([w for w, _ in want.values()])
        assert (got["total_us"] + got["preparing_us"]).tolist() == pytest.approx(
            [w for _, w in want.values()])
        assert got["step_mark"].tolist() == ["Optimizer.step#Adam.step"] * 4
    bare = write_trace(tmp_path / "bare.json", loop_events(4, phases, fetch=False))
    assert P.kineto_device_steps(bare) is None
    got = preview(bare)
    assert got.profile is None
    assert "the updates come in turns of 2, each after a different backward pass" in \
        got.notes[0]


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
@pytest.mark.shared_samples
def test_the_step_time_is_the_wall_of_each_step_on_every_kineto_sample(
        full_load: Callable[[Path], Any]) -> None:
    """The measured step counts the device's wait before each step's first task (a data
    stall, a slow launch), read from the raw trace; the preview gives the same figure."""
    import statistics

    from perfkit import analysis as A

    checked = 0
    for path in _kineto_paths():
        walls = raw_walls(path)
        if not walls:  # no device task in a ProfilerStep: the host span is the step
            continue
        checked += 1
        expected = float(statistics.median(walls.values())) / 1e6
        full = A.step_breakdown(full_load(path))
        assert A.measured_step_s(full) == pytest.approx(expected, rel=1e-9), path
        quick = A.step_breakdown(preview(path, device_steps=True).profile)
        assert A.measured_step_s(quick) == pytest.approx(expected, rel=1e-9), path
    assert checked == 7  # 5 shared traces with device tasks in their steps, 2 bundled ranks


@pytest.mark.shared_samples
def test_a_data_loading_stall_is_in_the_step_time(full_load: Callable[[Path], Any]) -> None:
    """PyTorch 1.9's ResNet-50 with ``num_workers=0`` loads each batch on the training
    thread: the device waits about 57 ms before each step's first kernel. The step time is
    then the pace of the host's ProfilerStep spans (read with ``json``), not the device
    window alone, which is a third shorter."""
    import statistics

    from perfkit import analysis as A

    path = shared_sample("wild/k_resnet50_nw0/worker0.1623143089861.pt.trace.json.gz")
    windows, spans, _ = raw_windows(path)
    host = statistics.median(float(b) - float(a) for a, b, _s in spans)
    window = statistics.median(float(hi) - float(lo) for lo, hi, _u in windows.values())
    steps = A.step_breakdown(full_load(path))
    wall = A.measured_step_s(steps) * 1e6
    assert wall == pytest.approx(host, rel=0.02)  # 177.4 ms against 176.3 ms
    assert window < 0.7 * host  # 118.6 ms: the device span alone
    assert A.measured_step_s(steps, preparing=False) * 1e6 == pytest.approx(window, rel=1e-9)


@pytest.mark.shared_samples
def test_the_host_span_is_labelled_where_the_device_step_is_not_read() -> None:
    folder = shared_sample(HTA)
    got = preview(folder, device_steps=False)
    assert got.host_spans and got.steps_from == "the host ProfilerStep spans"
    expected = {}
    for trace in folder.glob("*.json.gz"):
        expected.update(_json_spans(trace))
    steps = got.profile.steps
    assert dict(zip(steps["step"], steps["total_us"], strict=True)) == expected
    assert all("not the step time" in p.meta.notes[0] for p in got.profile.profiles)
    # by default a small trace gives its device step, a large one its host span
    assert not preview(folder).host_spans
    assert preview(folder, device_steps=None).host_spans is False


def test_a_large_trace_gives_its_host_span_by_default(tmp_path: Path, monkeypatch) -> None:
    events = [_event("ProfilerStep#1", 100.0, 50.0),
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 110.0,
               "dur": 2.0, "args": {"correlation": 9}},
              {"ph": "X", "cat": "kernel", "name": "k", "ts": 140.0, "dur": 30.5,
               "args": {"correlation": 9}}]
    trace = tmp_path / "rank0.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    assert preview(trace).profile.steps["total_us"].tolist() == [30.5]  # the kernel
    monkeypatch.setattr(P, "DEVICE_STEPS_MAX_BYTES", 10)
    got = preview(trace)
    assert got.host_spans and got.profile.steps["total_us"].tolist() == [50.0]


def test_device_steps_follow_the_launch_not_the_task(tmp_path: Path) -> None:
    """A task launched in a step counts in it even when it runs after the span ends; one
    launched between spans, or whose launch is not in the trace, counts nowhere; a step
    holding a task without a duration has no known time."""
    def rt(ts: float, corr: int) -> dict:
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts,
                "dur": 1.0, "args": {"correlation": corr}}

    def task(ts: float, dur: float | None, corr: int, cat: str = "kernel") -> dict:
        e = {"ph": "X", "cat": cat, "name": "k", "ts": ts, "args": {"correlation": corr}}
        return e if dur is None else {**e, "dur": dur}

    events = [_event("ProfilerStep#1", 1000.0, 100.0), _event("ProfilerStep#2", 1100.0, 100.0),
              _event("ProfilerStep#3", 1300.0, 100.0),
              _event("ProfilerStep#1", 1005.0, 80.0, cat="gpu_user_annotation"),
              rt(1010.0, 1), task(1020.0, 5.0, 1),  # step 1 ...
              rt(1090.0, 2), task(1150.0, 40.25, 2, "gpu_memcpy"),  # ... runs into step 2
              rt(1110.0, 3), task(1195.0, 10.0, 3),  # step 2
              rt(1250.0, 4), task(1260.0, 500.0, 4),  # between spans: no step
              task(900.0, 1000.0, 99),  # launched before the trace: no step
              rt(1310.0, 5), task(1320.0, None, 5)]  # step 3: a task without duration
    trace = tmp_path / "rank0.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    raw, on_device = raw_device_steps(trace)
    assert on_device and raw == {1: Decimal("170.25"), 2: Decimal("10.0"), 3: None}
    got = P.kineto_device_steps(trace)
    assert dict(zip(got["step"], got["total_us"], strict=True)) == pytest.approx(
        {1: 170.25, 2: 10.0, 3: float("nan")}, nan_ok=True)
    # a trace of device tasks only: each by its own start
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps([e for e in events if e.get("cat") != "cuda_runtime"]))
    got = P.kineto_device_steps(bare)
    assert dict(zip(got["step"], got["total_us"], strict=True)) == pytest.approx(
        {1: 5.0, 2: 55.0, 3: float("nan")}, nan_ok=True)


def test_the_cached_steps_are_read_back(tmp_path: Path, monkeypatch) -> None:
    import perfkit as pk
    from perfkit import analysis as A

    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PERFKIT_CACHE", raising=False)
    folder = tmp_path / "run"
    folder.mkdir()
    from perfkit.bundled_samples import resolve_sample

    for f in Path(resolve_sample("sample:kineto-tiny-llama")).glob("*.json.gz"):
        (folder / f.name).write_bytes(f.read_bytes())
    full = pk.load(folder)  # writes the cache
    got = preview(folder)
    assert got.cached and got.steps_from == "perfkit's cache" and not got.host_spans
    mine = A.step_breakdown(got.profile)
    theirs = A.step_breakdown(full)
    assert mine["step_us"].tolist() == theirs["step_us"].tolist()
    assert mine["computing_us"].tolist() == theirs["computing_us"].tolist()  # the split too


def test_ranks_are_never_mixed_device_and_host(tmp_path: Path) -> None:
    """One rank whose events do not decode the quick way gives its host span: then every
    rank gives its host span, so that the slowest rank's step compares like with like."""
    def trace(extra: list[dict]) -> dict:
        return {"traceEvents": [
            _event("ProfilerStep#1", 100.0, 50.0),
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 110.0,
             "dur": 2.0, "args": {"correlation": 9}},
            {"ph": "X", "cat": "kernel", "name": "k", "ts": 140.0, "dur": 30.5,
             "args": {"correlation": 9}}, *extra]}

    (tmp_path / "rank0.json").write_text(json.dumps(trace([])))
    odd = {"ph": "X", "cat": "cpu_op", "name": "x", "ts": 1.0, "dur": 1.0, "args": [1, 2]}
    (tmp_path / "rank1.json").write_text(json.dumps(trace([odd])))
    assert P.kineto_device_steps(tmp_path / "rank0.json")["total_us"].tolist() == [30.5]
    assert P.kineto_device_steps(tmp_path / "rank1.json") is None  # args not an object
    got = preview(tmp_path, device_steps=True)
    assert got.host_spans and got.steps_from == "the host ProfilerStep spans"
    assert got.profile.steps["total_us"].tolist() == [50.0, 50.0]


# ---- above the limit: the device lane's copy of each step, where the trace has one -----

def _raw_lane_steps(path: Path) -> dict[int, Decimal]:
    """Step -> earliest start to latest end of its ``gpu_user_annotation`` ProfilerStep
    copies, and the idle tail after that range that the step's host span covers
    (:func:`raw_kineto.idle_tails`; µs, exact), read with ``json``."""
    window: dict[int, list[Decimal]] = {}
    for e in raw_events(path):
        if e.get("ph") == "X" and e.get("cat") == "gpu_user_annotation" and \
                str(e.get("name", "")).startswith("ProfilerStep#"):
            lo, hi = Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(e["dur"])
            w = window.setdefault(int(e["name"].split("#")[1]), [lo, hi])
            w[0], w[1] = min(w[0], lo), max(w[1], hi)
    _, spans, _ = raw_windows(path)
    ends: dict[int, Decimal] = {}
    for _a, b, s in spans:
        ends.setdefault(s, Decimal(b))
    tails = idle_tails(window, ends, [])
    return {s: hi - lo + tails[s][0] for s, (lo, hi) in window.items()}


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
@pytest.mark.shared_samples
def test_above_the_limit_a_trace_with_device_lane_steps_gives_them() -> None:
    """Every shared trace read as one above the limit: its device-lane step copies where it
    has them (the two recent H100 traces), else its host spans, labelled either way."""
    on_lane = 0
    for path in _kineto_paths():
        raw_spans = _json_spans(path)
        if not raw_spans:
            continue
        lane = _raw_lane_steps(path)
        got = preview(path, device_steps=False)
        steps = dict(zip(got.profile.steps["step"].astype(int),
                         got.profile.steps["total_us"], strict=True))
        if lane:
            on_lane += 1
            assert got.device_lane and not got.host_spans, path
            assert got.steps_from == "the ProfilerStep ranges on the device lane", path
            assert steps == pytest.approx({s: float(v) for s, v in lane.items()}, rel=1e-12)
            # on these traces the copy is the device step the full load gives
            raw_device, _ = raw_device_steps(path)
            assert steps == pytest.approx({s: float(v) for s, v in raw_device.items()},
                                          rel=1e-6), path
            assert steps != pytest.approx(raw_spans, rel=1e-3), path  # not the host's pace
        else:
            assert got.host_spans and not got.device_lane, path
            assert steps == pytest.approx(raw_spans, rel=1e-12), path
    assert on_lane == 2


def _two_kinds_of_step(tmp_path: Path) -> tuple[Path, Path]:
    """rank0 with a device-lane copy of its step that a nested range cuts short, rank1
    without one."""
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "args": {"correlation": 1}}
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "dur": 1.0}
    events0 = [_event("ProfilerStep#3", 100.0, 100.0),
               {**launch, "ts": 110.0, "args": {"correlation": 1}},
               {**kernel, "ts": 120.0, "dur": 10.0},
               {**launch, "ts": 150.0, "args": {"correlation": 2}},
               {**kernel, "ts": 160.0, "dur": 30.0, "args": {"correlation": 2}},
               # Kineto's copy spans the kernels launched directly under the step only
               _event("ProfilerStep#3", 120.0, 10.0, cat="gpu_user_annotation")]
    events1 = [_event("ProfilerStep#3", 100.0, 80.0)]
    folder = tmp_path / "run"
    folder.mkdir()
    for rank, events in enumerate((events0, events1)):
        (folder / f"rank{rank}.json").write_text(json.dumps({
            "distributedInfo": {"rank": rank, "world_size": 2}, "traceEvents": events}))
    return folder / "rank0.json", folder


def test_a_lane_copy_is_labelled_as_such_and_never_mixed_with_host_spans(
        tmp_path: Path) -> None:
    rank0, folder = _two_kinds_of_step(tmp_path)
    alone = preview(rank0, device_steps=False)
    # the copy (120-130 µs) and the idle tail after it that the host span (100-200 µs)
    # covers: 200 - 120
    assert alone.device_lane and alone.profile.steps["total_us"].tolist() == [80.0]
    assert "device lane" in alone.profile.meta.notes[0]
    # the full load's step runs from the first to the last kernel launched in the span
    # (120-190 µs) and the device's idle time after it until the span's end (190-200 µs)
    assert preview(rank0, device_steps=True).profile.steps["total_us"].tolist() == [80.0]
    both = preview(folder, device_steps=False)  # rank1 has only its host span
    assert both.host_spans and not both.device_lane
    assert both.steps_from == "the host ProfilerStep spans"
    assert sorted(both.profile.steps["total_us"].tolist()) == [80.0, 100.0]
