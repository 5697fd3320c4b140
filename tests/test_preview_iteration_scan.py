"""The preview of a large Kineto trace without ``ProfilerStep``: its training iterations,
found by a byte scan (:mod:`perfkit.io.kineto.marks`).

Above :data:`perfkit.io.preview.steps.DEVICE_STEPS_MAX_BYTES` such a trace had no preview step at
all ("its steps come with the full load"): the byte scan found the optimizer's annotations
but not the backward functions that tell which of them end an iteration. It now finds those
too, and the preview shows each iteration's host span but the first.

Expected figures come from the raw traces read with ``json`` (exact decimals:
:mod:`raw_kineto`) or from the loops written here (:mod:`optimizer_loops`: each iteration
500 µs long, its optimizer step ending 390 µs into it).
"""

from __future__ import annotations

import functools
import gzip
import json
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from optimizer_loops import loop_events, write_trace
from raw_kineto import HOST, STEP_MARK, Iterations, raw_events
from shared_samples import sample

from perfkit.io.kineto import marks as K
from perfkit.io.preview import steps as P
from perfkit.io.preview.steps import preview

MI300 = "wild/tl_ddp_resnet18_mi300/train_resnet18.json.gz"
RESNET50 = "wild/k_resnet50_nw4/worker0.1623212756351.pt.trace.json.gz"
HTA0 = "gpu/hta-trace_filter/sampled_rank-0.json.gz"
#: The names the iteration rules read: optimizer steps, backward functions, DataLoader
#: fetches (as the rules of perfkit.io.kineto.iterations say, written out again here).
RULES = re.compile(r"^Optimizer\.step#[^#]+\.step$|(?:Backward\d*|AccumulateGrad)$"
                   r"|^enumerate\(DataLoader\)#[^#]+\.__next__$")
NET = ("MseLossBackward0", "AddmmBackward0", "ReluBackward0", "AddmmBackward0",
       "torch::autograd::AccumulateGrad", "torch::autograd::AccumulateGrad")
FIRST_LEFT_OUT = "the first iteration (it begins at the trace's first host event"


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFKIT_CACHE", "0")


@functools.cache
def _raw_rule_events(path: Path) -> Counter[tuple[str, int, Decimal]]:
    """(name, ts in ns, dur) of each host event the rules read, from the raw JSON."""
    return Counter((e["name"], int(Decimal(e["ts"]) * 1000), Decimal(e["dur"]))
                   for e in raw_events(path) if e.get("ph") == "X" and e.get("cat") in HOST
                   and RULES.search(e["name"]))


def _scanned(frame: Any) -> Counter[tuple[str, int, Decimal]]:
    return Counter(zip(frame["name"].astype(str), frame["ts_ns"].tolist(),
                       [Decimal(repr(d)) for d in frame["dur_us"]], strict=True))


@pytest.mark.shared_samples
@pytest.mark.parametrize("name", [MI300, RESNET50, HTA0])
@pytest.mark.parametrize("chunk", [None, 1 << 20], ids=["whole", "1MiB-chunks"])
def test_the_byte_scan_finds_every_event_the_rules_read(
        name: str, chunk: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three layouts (PyTorch 1.9's ``Operator`` events with text tids, TraceLens' MI300,
    HTA's compact JSON): every host event named as the rules read (counted here from the
    raw JSON: 1335, 2046 and 577), with its exact ts and dur, and nothing else; the same
    when the ``.gz`` is decompressed in chunks of 1 MiB (events cut at a chunk's end)."""
    if chunk is not None:
        monkeypatch.setattr(K, "_CHUNK", chunk)
    path = sample(name)
    raw = _raw_rule_events(path)
    got = K.iteration_events(path)
    assert got is not None and _scanned(got) == raw
    assert sum(raw.values()) == {MI300: 1335, RESNET50: 2046, HTA0: 577}[name]


@pytest.mark.shared_samples
@pytest.mark.parametrize("chunk", [None, 1 << 18], ids=["whole", "256KiB-chunks"])
def test_one_scan_gives_the_profiler_steps_or_else_the_iteration_events(
        chunk: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`step_scan` decompresses a ``.gz`` once for both readings: HTA's trace gives
    its host ProfilerStep spans (#551, #552: step, ts, dur as in the raw JSON) and no
    iteration events, though it has optimizer annotations; the MI300 trace, without
    ProfilerStep, gives no span and the events the rules read (as counted in the raw
    JSON). The same in chunks of 256 KiB."""
    if chunk is not None:
        monkeypatch.setattr(K, "_CHUNK", chunk)
    hta = sample(HTA0)
    raw = sorted((int(e["name"].split("#")[1]), float(e["ts"]), float(e["dur"]))
                 for e in raw_events(hta) if e.get("ph") == "X"
                 and str(e.get("name", "")).startswith("ProfilerStep#"))
    host, lane, events = K.step_scan(hta)
    assert sorted(host) == raw and [s for s, _, _ in raw] == [551, 552]
    assert lane == [] and events is None
    assert _raw_rule_events(hta)  # it has the annotations the rules read, not looked for
    host, lane, events = K.step_scan(sample(MI300))
    assert host == [] and lane == [] and events is not None
    assert _scanned(events) == _raw_rule_events(sample(MI300))


@pytest.mark.shared_samples
def test_above_the_limit_a_trace_without_profiler_steps_gives_its_iteration_spans(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The MI300 trace (no ProfilerStep, 5 Optimizer.step#SGD.step) read as one above the
    limit: it had no preview step; now iterations 1 to 4, each the host span from the end
    of the previous optimizer step to the end of its own (:class:`raw_kineto.Iterations`,
    exact decimals), labelled as host spans; the first iteration, whose start is the
    trace's first host event, is left to the full load, and the note says so."""
    path = sample(MI300)
    spans = Iterations(raw_events(path)).spans
    assert len(spans) == 5
    monkeypatch.setattr(P, "DEVICE_STEPS_MAX_BYTES", 0)
    got = preview(path)
    assert got.profile is not None and got.host_spans and not got.steps_final
    assert got.steps_from == ("the host spans of the training iterations after the first, "
                              "inferred from the optimizer's annotations")
    steps = got.profile.steps
    assert steps["step"].tolist() == [1, 2, 3, 4]
    for k, total in zip(steps["step"], steps["total_us"], strict=True):
        a, b = spans[k]
        assert total == pytest.approx(float(b - a), abs=1e-3), k
    assert steps["step_mark"].tolist() == ["Optimizer.step#SGD.step"] * 4
    assert FIRST_LEFT_OUT in got.profile.meta.notes[0]


@pytest.mark.shared_samples
def test_above_the_scan_limit_the_iterations_are_not_looked_for_and_the_note_says_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same MI300 trace read as one above both limits: the byte scan of its iteration
    events (seconds per GB, and the preview holds the load back) is not run, no backward
    function is looked for (the scan's own function is never called), and the note says
    the steps come with the full load and why."""
    path = sample(MI300)
    calls: list[int] = []
    scan = K._scan

    def counted(*args: Any) -> None:
        calls.append(1)
        scan(*args)

    monkeypatch.setattr(K, "_scan", counted)
    monkeypatch.setattr(P, "DEVICE_STEPS_MAX_BYTES", 0)
    monkeypatch.setattr(P, "ITERATION_SCAN_MAX_BYTES", path.stat().st_size - 1)
    got = preview(path)
    assert got.profile is None and not calls
    assert len(got.notes) == 1 and "no ProfilerStep#N event" in got.notes[0]
    assert "GiB of traces the training iterations are not looked for" in got.notes[0]
    assert got.notes[0].endswith("its steps come with the full load")
    monkeypatch.setattr(P, "ITERATION_SCAN_MAX_BYTES", path.stat().st_size)
    got = preview(path)  # at the limit: scanned, as in the test above
    assert calls and got.profile is not None and got.profile.steps["step"].tolist() == [
        1, 2, 3, 4]


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.shared_samples
def test_a_real_trace_of_six_iterations_is_read_by_its_backward_passes(tmp_path: Path
                                                                       ) -> None:
    """Kineto's ResNet-50 (PyTorch 1.9) with its ProfilerStep events taken out: 6
    Optimizer.step#SGD.step, the same 339 backward functions before each (counted here
    from the raw JSON). Read as above the limit, the preview gives iterations 1 to 5, each
    from the end of one optimizer step to the end of the next (raw decimals)."""
    with gzip.open(sample(RESNET50), "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    events = [e for e in doc["traceEvents"]
              if not str(e.get("name", "")).startswith("ProfilerStep#")]
    trace = write_trace(tmp_path / "worker0.pt.trace.json", events)
    raw = [e for e in events if e.get("ph") == "X"]
    assert all(isinstance(e["ts"], int) for e in raw)  # µs as integers: exact as read
    marks = sorted((Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(e["dur"])) for e in raw
                   if e.get("cat") in HOST and STEP_MARK.match(e["name"]))
    assert len(marks) == 6
    back = [(Decimal(e["ts"]), e["name"]) for e in raw if e.get("cat") in HOST
            and re.search(r"(?:Backward\d*|AccumulateGrad)$", e["name"])]
    between = [Counter(n for t, n in back if marks[i - 1][1] <= t < marks[i][0])
               for i in range(1, 6)]
    assert all(c == between[0] for c in between) and sum(between[0].values()) == 339
    got = preview(trace, device_steps=False)
    assert got.host_spans and got.profile is not None
    steps = got.profile.steps
    assert steps["step"].tolist() == [1, 2, 3, 4, 5]
    for k, total in zip(steps["step"], steps["total_us"], strict=True):
        assert total == pytest.approx(float(marks[k][1] - marks[k - 1][1]), abs=1e-3), k


#: The order Kineto writes an event's keys in.
KINETO_KEYS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args")


def _laid_out(events: list[dict[str, Any]], layout: str) -> list[dict[str, Any]]:
    """The events with their keys in Kineto's order, or (``reordered``) the reverse."""
    keys = KINETO_KEYS if layout == "kineto" else KINETO_KEYS[::-1]
    return [{k: e[k] for k in keys if k in e} for e in events]


@pytest.mark.parametrize("layout", ["kineto", "reordered"])
def test_the_iterations_of_a_loop_whatever_its_layout(tmp_path: Path, layout: str,
                                                      monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    """Four iterations of ``fetch; forward; backward; SGD.step`` (500 µs each): above the
    limit the preview gives iterations 1 to 3, 500 µs each (the optimizer step ending 390
    µs into each). In Kineto's layout the backward functions are read by the regular
    expressions (the JSON decoder runs only for the 4 optimizer steps and 4 fetches); with
    the keys in another order each is decoded whole: the same steps."""
    events = _laid_out(loop_events(4, [("SGD", NET)], fetch=True), layout)
    trace = write_trace(tmp_path / "rank0.json", events)
    decoded: list[int] = []
    real = K._object_at

    def counted(buf: Any, hit: int) -> Any:
        decoded.append(hit)
        return real(buf, hit)
    monkeypatch.setattr(K, "_object_at", counted)
    got = preview(trace, device_steps=False)
    assert got.host_spans and got.profile is not None
    steps = got.profile.steps
    assert steps["step"].tolist() == [1, 2, 3]
    assert steps["total_us"].tolist() == [500.0, 500.0, 500.0]
    assert len(decoded) == (8 if layout == "kineto" else 8 + 4 * len(NET))


def test_only_host_events_named_as_backward_functions_count(tmp_path: Path) -> None:
    """A kernel named ``...Backward0`` and an argument text ``MmBackward0`` in the second
    iteration only: neither is a host backward function. Counted, they would make that
    iteration's backward pass differ from the others' and the loop stay one step; the
    preview gives iterations 1 to 3 of 500 µs."""
    events = _laid_out(loop_events(4, [("SGD", NET)], fetch=False), "kineto")
    events += [{"ph": "X", "cat": "kernel", "name": "fused_MmBackward0", "pid": 0, "tid": 7,
                "ts": 1700, "dur": 5, "args": {"stream": 7}},
               {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1,
                "ts": 1710, "dur": 5, "args": {"note": "MmBackward0"}}]
    trace = write_trace(tmp_path / "rank0.json", events)
    steps = preview(trace, device_steps=False).profile.steps
    assert steps["step"].tolist() == [1, 2, 3]
    assert steps["total_us"].tolist() == [500.0, 500.0, 500.0]


def test_a_loop_the_rules_cannot_split_says_why(tmp_path: Path) -> None:
    """A GAN's loop (two Adam steps an iteration, after different backward passes) with no
    DataLoader fetch: where an iteration begins cannot be told, above the limit as below;
    no preview step, and the note gives the rule's reason."""
    d_back = ("BinaryCrossEntropyBackward0", "AddmmBackward0")
    g_back = ("BinaryCrossEntropyBackward0", "AddmmBackward0", "TanhBackward0")
    events = loop_events(4, [("Adam", d_back), ("Adam", g_back)], fetch=False)
    trace = write_trace(tmp_path / "rank0.json", events)
    got = preview(trace, device_steps=False)
    assert got.profile is None
    assert "the updates come in turns of 2" in got.notes[0]
    assert got.notes[0].endswith("its steps come with the full load")


def test_a_rank_read_by_its_iterations_is_never_mixed_with_host_spans(tmp_path: Path
                                                                       ) -> None:
    """Rank 0 has ProfilerStep#1 (ts 100, 50 µs) but an event the quick decoding refuses,
    so it gives its host span; rank 1 has no ProfilerStep, four loop iterations. Rank 1's
    device steps (first to last kernel of each iteration) were shown beside rank 0's host
    span; now every rank gives its host spans: rank 1 its iterations 1 to 3, 500 µs."""
    odd = {"ph": "X", "cat": "cpu_op", "name": "x", "ts": 1.0, "dur": 1.0, "args": [1, 2]}
    write_trace(tmp_path / "rank0.json", [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 100.0, "dur": 50.0},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 110.0,
         "dur": 2.0, "args": {"correlation": 9}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 140.0, "dur": 30.5,
         "args": {"correlation": 9}}, odd])
    write_trace(tmp_path / "rank1.json", loop_events(4, [("SGD", NET)], fetch=False))
    got = preview(tmp_path, device_steps=True)
    assert got.host_spans
    by_rank = {p.meta.rank: p for p in got.profile.profiles}
    assert {p.meta.extra["preview_steps"] for p in by_rank.values()} <= {"host",
                                                                        "iteration_host"}
    assert by_rank[0].steps["total_us"].tolist() == [50.0]
    assert by_rank[1].steps["step"].tolist() == [1, 2, 3]
    assert by_rank[1].steps["total_us"].tolist() == [500.0, 500.0, 500.0]
