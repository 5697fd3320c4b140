"""A few whole steps cut from a Kineto trace (:mod:`perfkit.io.kineto.excerpt`) and read
ahead of the load (:mod:`perfkit.io.preview.excerpt`): the steps read are the raw trace's,
read independently with ``json`` (exact decimals); a trace whose events are not in time
order, and damaged traces, give no excerpt and raise nothing; nothing is written beside
the trace.

The real traces are the two ResNet-50 traces of the kineto repository's TensorBoard plugin
samples (six ``ProfilerStep``s each, a V100, PyTorch 1.9's format with capitalised
categories), decompressed into the test's folder: a cut needs offsets, which a ``.gz``
has not.
"""

from __future__ import annotations

import gzip
import json
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from raw_kineto import raw_events, raw_walls
from shared_samples import KINETO_TRACES, shared_sample

import perfkit as pk
from perfkit.io.kineto.excerpt import cut_steps, middle_steps, read_excerpt
from perfkit.io.kineto.scan import kineto_step_spans
from perfkit.io.preview import excerpt as preview_excerpt
from perfkit.io.preview.steps import preview

pytestmark = [pytest.mark.shared_samples,
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

_RESNETS = ("k_resnet50_nw0", "k_resnet50_nw4")
_DEVICE = {"kernel", "memcpy", "memset", "gpu_memcpy", "gpu_memset"}
_RUNTIME = {"runtime", "cuda_runtime", "cuda_driver"}


def _plain(name: str, folder: Path) -> Path:
    """The shared trace ``name``, decompressed into ``folder``."""
    out = folder / Path(KINETO_TRACES[name]).name.removesuffix(".gz")
    out.write_bytes(gzip.decompress(shared_sample(KINETO_TRACES[name]).read_bytes()))
    return out


def _raw_step_tasks(path: Path, step: int) -> list[tuple[Decimal, Decimal]]:
    """(start, end) µs of the device tasks whose runtime launch (same correlation) starts
    in the host ``ProfilerStep#step`` span, from the raw events."""
    events = [e for e in raw_events(path) if e.get("ph") == "X"]
    span = next(e for e in events if e.get("name") == f"ProfilerStep#{step}"
                and str(e.get("cat", "")).lower() not in ("gpu_user_annotation",))
    lo, hi = Decimal(span["ts"]), Decimal(span["ts"]) + Decimal(span["dur"])
    launched = {(e.get("args") or {}).get("correlation") for e in events
                if str(e.get("cat", "")).lower() in _RUNTIME and lo <= Decimal(e["ts"]) < hi}
    return [(Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(e.get("dur", 0))) for e in events
            if str(e.get("cat", "")).lower() in _DEVICE
            and (e.get("args") or {}).get("correlation") in launched]


def _union(intervals: list[tuple[Decimal, Decimal]]) -> Decimal:
    total, reach = Decimal(0), None
    for a, b in sorted(intervals):
        if reach is None or a > reach:
            total, reach = total + (b - a), b
        elif b > reach:
            total, reach = total + (b - reach), b
    return total


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.parametrize("name", _RESNETS)
def test_the_steps_read_are_the_raw_traces_steps(name: str, tmp_path: Path) -> None:
    """The middle step of six, cut with its neighbours: its wall time is the raw trace's
    (device window, idle tail, wait before: :func:`raw_kineto.raw_walls`), its computing
    time the union of the raw tasks it launched (no communication in these traces), and
    every task it launched is in the excerpt."""
    trace = _plain(name, tmp_path)
    spans = kineto_step_spans(trace)
    got = read_excerpt(trace, spans, budget=1)  # the least: one step reported
    assert got is not None
    profile, excerpt = got
    assert excerpt.steps == [7] and excerpt.kept == [6, 7, 8]  # steps 5-10 in the trace
    assert excerpt.bytes_read < trace.stat().st_size
    breakdown = pk.analysis.step_breakdown(profile).set_index("step").loc[7]
    wall = Decimal(repr(float(breakdown["step_us"]) + float(breakdown["preparing_us"])))
    assert abs(wall - raw_walls(trace)[7]) < Decimal("0.001")
    tasks = _raw_step_tasks(trace, 7)
    assert abs(Decimal(repr(float(breakdown["computing_us"]))) - _union(tasks)) \
        < Decimal("0.001")
    kernels = profile.kernels
    assert int((kernels["step"] == 7).sum()) == len(tasks)


def test_the_middle_steps_are_as_many_as_the_budget_allows() -> None:
    steps = list(range(10, 20))  # ten steps of 100 bytes each
    assert middle_steps(steps, 1000, budget=1) == [14]
    assert middle_steps(steps, 1000, budget=300) == [13, 14, 15]
    assert middle_steps(steps, 1000, budget=10_000) == list(range(11, 19))  # not the ends
    assert middle_steps([1, 2], 1000) == []


def test_a_trace_whose_events_are_not_in_time_order_gives_no_excerpt(tmp_path: Path) -> None:
    """Shuffled, the events of a window no longer lie between the probes that bound it:
    every probe's sample spans the whole run, so the cut would read the whole trace (no
    quicker than the load), and gives up."""
    trace = _plain("k_resnet50_nw4", tmp_path)
    data = json.loads(trace.read_bytes())
    random.Random(7).shuffle(data["traceEvents"])
    shuffled = tmp_path / "shuffled.json"
    shuffled.write_text(json.dumps(data), encoding="utf-8")
    assert cut_steps(shuffled, kineto_step_spans(shuffled), budget=1) is None


def _damaged(trace: Path, folder: Path) -> dict[str, Path]:
    raw = trace.read_bytes()
    middle = len(raw) // 2
    out = {"truncated": raw[:middle], "garbage in the middle": raw[:middle] + b"\x00{]]"
           + raw[middle + 4:], "no traceEvents": raw.replace(b'"traceEvents"', b'"events"'),
           "empty": b""}
    paths = {}
    for i, (what, data) in enumerate(out.items()):
        p = folder / f"damaged{i}.json"
        p.write_bytes(data)
        paths[what] = p
    return paths


def test_steps_too_large_to_read_quickly_are_not_cut(tmp_path: Path, monkeypatch) -> None:
    """With a limit below what the cut of three steps reads, there is no excerpt (the full
    load would be as quick); with it above, there is."""
    from perfkit.io.kineto import excerpt as kineto_excerpt

    trace = _plain("k_resnet50_nw4", tmp_path)
    spans = kineto_step_spans(trace)
    read = cut_steps(trace, spans, budget=1).bytes_read
    monkeypatch.setattr(kineto_excerpt, "MAX_READ_BYTES", read // 2)
    assert cut_steps(trace, spans, budget=1) is None
    monkeypatch.setattr(kineto_excerpt, "MAX_READ_BYTES", read * 2)
    assert cut_steps(trace, spans, budget=1) is not None


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_damaged_traces_give_no_excerpt_and_raise_nothing(tmp_path: Path) -> None:
    trace = _plain("k_resnet50_nw4", tmp_path)
    spans = kineto_step_spans(trace)
    for what, path in _damaged(trace, tmp_path).items():
        got = read_excerpt(path, spans, budget=1)
        if got is not None:  # a tear outside what is read may still cut: then exactly
            assert what == "garbage in the middle", what
            assert got[1].steps == [7]
            assert float(got[0].steps.set_index("step").loc[7, "computing_us"]) == float(
                pk.analysis.step_breakdown(read_excerpt(trace, spans, 1)[0])
                .set_index("step").loc[7, "computing_us"])


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_first_steps_reads_the_ranks_and_writes_nothing_beside_them(tmp_path: Path,
                                                                    monkeypatch) -> None:
    """The same step of two ranks (the nw4 trace as two ranks of one run: the two shared
    traces are two runs, which perfkit does not merge), read ahead of the load; the folder
    is left as it was (the excerpt goes to a temporary folder, no cache entry)."""
    monkeypatch.setattr(preview_excerpt, "MIN_TRACE_BYTES", 0)
    monkeypatch.setenv("PERFKIT_CACHE", "0")
    folder = tmp_path / "run"
    folder.mkdir()
    trace = _plain("k_resnet50_nw4", tmp_path)
    for rank in (0, 1):
        (folder / f"rank{rank}.pt.trace.json").write_bytes(trace.read_bytes())
    before = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir())
    early = preview(folder, device_steps=False)
    assert preview_excerpt.excerpt_wanted(early)
    first = preview_excerpt.first_steps(early, budget=1)
    assert first is not None and first.steps == [7] and first.total_steps == 6
    assert sorted(first.profile.ranks) == sorted(p.meta.rank for p in early.profile.profiles)
    walls = {p.meta.rank: raw_walls(Path(p.meta.path))[7] for p in early.profile.profiles}
    rows = preview_excerpt.reported_rows(pk.analysis.step_breakdown(first.profile), first)
    assert sorted(rows["step"]) == [7, 7]
    for rank, r in rows.set_index("rank").iterrows():
        assert abs(Decimal(repr(float(r["step_us"]) + float(r["preparing_us"])))
                   - walls[rank]) < Decimal("0.001")
    assert "step 7 of 6, cut from the traces" in first.describe()
    monkeypatch.setattr(preview_excerpt, "MAX_RANKS", 1)  # more ranks than are cut
    assert not preview_excerpt.excerpt_wanted(early)
    after = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir())
    assert after == before


def test_compressed_small_or_cached_traces_are_not_cut(tmp_path: Path) -> None:
    folder = shared_sample(KINETO_TRACES["k_resnet50_nw4"]).parent  # a .gz
    assert not preview_excerpt.excerpt_wanted(preview(folder, device_steps=False))
    trace = _plain("k_resnet50_nw4", tmp_path)  # 35 MB: below the size worth cutting
    assert not preview_excerpt.excerpt_wanted(preview(trace, device_steps=False))
    assert preview_excerpt.first_steps(preview(trace, device_steps=False)) is None


def _opened_with_steps_read_first(trace: Path, monkeypatch) -> tuple[Any, Any, str]:
    """``trace`` opened in a dashboard as a large trace (the limits of the device step and
    of the excerpt lowered, perfkit's cache off), its full load held: the board, the event
    that releases the load, and the Overview's HTML once the steps read first show."""
    import threading
    import time

    from widget_html import panel_html

    from perfkit.io.preview import steps as P
    from perfkit.widgets.dashboard import Dashboard

    monkeypatch.setattr(P, "DEVICE_STEPS_MAX_BYTES", 0)
    monkeypatch.setattr(preview_excerpt, "MIN_TRACE_BYTES", 0)
    monkeypatch.setenv("PERFKIT_CACHE", "0")
    board = Dashboard(background_bytes=0)
    go, real = threading.Event(), board._load

    def held(source, run, progress):
        assert go.wait(120), "the test never released the load"
        return real(source, run, progress)
    board._load = held  # type: ignore[method-assign]
    assert board.load_profile(str(trace))
    deadline = time.monotonic() + 120
    while "cut from the trace" not in (html := panel_html(board.panels["Overview"])):
        assert time.monotonic() < deadline, "the steps read first never showed"
        time.sleep(0.05)
    return board, go, html


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_the_overview_shows_the_split_of_the_steps_read_first(tmp_path: Path,
                                                              monkeypatch) -> None:
    """Opened in the dashboard (as a trace above the sizes that get the device step and an
    excerpt: both limits lowered), the trace shows its host step span at once, then the
    step time and split of its middle step, cut and read while the rest loads (held here),
    saying which step: the step time is the raw step's wall, and the computing share the
    raw union of the step's tasks over that wall. The whole profile's replace them."""
    import re

    from widget_html import panel_html

    from perfkit.format import time_text

    trace = _plain("k_resnet50_nw4", tmp_path)
    board, go, html = _opened_with_steps_read_first(trace, monkeypatch)
    assert "The split above is that of step 7 of 6, cut from the trace" in html
    assert "host step span" in html  # the host's pace over all steps, read first
    step = re.search(r"<div class='pk-k'>step time</div><div class='pk-v'>([^<]*)<", html)
    assert step is not None and step.group(1) == time_text(float(raw_walls(trace)[7]))
    assert "from step 7 of 6, read first" in html
    shown = re.search(r"computing\s+([0-9.]+)\s*%", re.sub(r"<[^>]+>", " ", html))
    assert shown is not None
    share = _union(_raw_step_tasks(trace, 7)) / raw_walls(trace)[7] * 100
    assert abs(Decimal(shown.group(1)) - share) <= Decimal("0.1")
    go.set()
    assert board.wait(120) and board.error is None
    final = panel_html(board.panels["Overview"])
    assert "cut from the trace" not in final and "× 6 steps" in final
    assert "the whole profile's follows" not in final


def _repeated(src: Path, reps: int, out: Path) -> Path:
    """``src``'s two recorded steps ``reps`` times over, one after the other (each copy's
    times shifted by the trace's span, its step numbers by 2, its correlations and flow ids
    by 10^7), written as libkineto orders a trace: the host events in time order, then the
    device activity (runtime calls, tasks, launch links) in time order, the metadata last."""
    data = json.loads(gzip.decompress(src.read_bytes()))
    events = [e for e in data["traceEvents"] if e.get("ph") != "M"]
    meta = [e for e in data["traceEvents"] if e.get("ph") == "M"]
    t0 = min(float(e["ts"]) for e in events)
    period = max(float(e["ts"]) + float(e.get("dur", 0)) for e in events) - t0 + 1000.0
    host, device = [], []
    for r in range(reps):
        for e in events:
            e2 = dict(e, ts=float(e["ts"]) + r * period)
            name = str(e.get("name", ""))
            if name.startswith("ProfilerStep#"):
                e2["name"] = f"ProfilerStep#{int(name.split('#')[1]) + 2 * r}"
            if "id" in e and e.get("ph") in ("s", "f"):
                e2["id"] = int(e["id"]) + r * 10**7
            if e.get("args"):
                e2["args"] = {k: (v + r * 10**7 if k in ("correlation", "External id")
                                  and isinstance(v, int) else v)
                              for k, v in e["args"].items()}
            cat = str(e.get("cat", "")).lower()
            on_device = cat in _DEVICE or cat in _RUNTIME or cat in ("ac2g",
                                                                     "gpu_user_annotation")
            (device if on_device else host).append(e2)
    ordered = sorted(host, key=lambda e: e["ts"]) + sorted(device, key=lambda e: e["ts"])
    data["traceEvents"] = ordered + meta
    out.write_text(json.dumps(data), encoding="utf-8")
    return out


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_job_read_from_the_steps_read_first_is_the_whole_traces(tmp_path: Path) -> None:
    """A Llama trace recorded here on an H100 (two steps, ``tests/data/kineto_llama_h100``)
    repeated to ten steps in libkineto's order: the job read from the one step cut from it
    (with its neighbours) has the whole trace's batch, sequence, model and layout, so the
    throughput and MFU the Overview shows first are those of the full page's job; the step
    read is the full load's, column for column."""
    src = Path(__file__).resolve().parent / "data" / "kineto_llama_h100" / \
        "rank0.pt.trace.json.gz"
    trace = _repeated(src, 5, tmp_path / "rank0.pt.trace.json")
    spans = kineto_step_spans(trace)
    assert list(spans["step"]) == list(range(3, 13))
    got = read_excerpt(trace, spans, budget=1)
    assert got is not None
    excerpt, cut = got
    assert cut.steps == [7] and cut.bytes_read < trace.stat().st_size / 2
    full = pk.load(trace, cache=False)
    cols = [c for c in full.steps.columns if c.endswith("_us")]
    assert full.steps.set_index("step").loc[[7], cols].equals(
        excerpt.steps.set_index("step").loc[[7], cols])
    whole, first = pk.infer_job(full), pk.infer_job(excerpt)
    assert whole.model is not None and whole.global_batch_size and whole.seq_length
    assert first.model == whole.model
    assert (first.global_batch_size, first.seq_length, first.parallel, first.dtype) == \
        (whole.global_batch_size, whole.seq_length, whole.parallel, whole.dtype)


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_the_overview_shows_the_throughput_of_the_job_read_first(tmp_path: Path,
                                                                 monkeypatch) -> None:
    """The repeated Llama trace opened in the dashboard (limits lowered, the load held):
    the throughput card shows, before the load, the recorded job's tokens (micro-batch 4
    on each of 2 ranks, sequence 1,024: ``tests/data/kineto_llama_h100/PROVENANCE.md``)
    over the raw wall of the step read (7), per device."""
    import re

    src = Path(__file__).resolve().parent / "data" / "kineto_llama_h100" / \
        "rank0.pt.trace.json.gz"
    trace = _repeated(src, 5, tmp_path / "rank0.pt.trace.json")
    board, go, html = _opened_with_steps_read_first(trace, monkeypatch)
    card = re.search(r"<div class='pk-k'>throughput</div><div class='pk-v'>([0-9,]+) "
                     r"tokens/s per device</div><div class='pk-n'>([^<]*)<", html)
    assert card is not None and "from step 7 of 10, read first" in card.group(2)
    expected = 4 * 2 * 1024 / (float(raw_walls(trace)[7]) / 1e6) / 2
    assert abs(int(card.group(1).replace(",", "")) - expected) <= 1
    # the job line says where the Overview's job comes from, not that it comes later
    assert "read first from step 7 of 10; the whole profile&#x27;s follows" \
        in board.job.summary.value
    go.set()
    assert board.wait(120) and board.error is None
    assert "read first" not in board.job.summary.value


@pytest.mark.parametrize("name", sorted(KINETO_TRACES))
def test_every_shared_trace_gives_its_own_steps_or_no_excerpt(name: str, tmp_path: Path,
                                                              monkeypatch) -> None:
    """Every real Kineto trace of the shared samples, decompressed and opened as if large
    (the size limit lowered): those with three ``ProfilerStep``s or more (the ResNet-50
    pair) give the steps the full load gives, column for column; the others (one or two
    steps, no ``ProfilerStep`` at all: their training iterations) give none, and nothing
    raises."""
    monkeypatch.setattr(preview_excerpt, "MIN_TRACE_BYTES", 0)
    monkeypatch.setenv("PERFKIT_CACHE", "0")
    src = shared_sample(KINETO_TRACES[name])
    trace = tmp_path / src.name.removesuffix(".gz")
    trace.write_bytes(gzip.decompress(src.read_bytes()) if src.name.endswith(".gz")
                      else src.read_bytes())
    early = preview(trace, device_steps=False)
    first = preview_excerpt.first_steps(early, budget=1)
    spans = kineto_step_spans(trace)
    if len(spans) < 3:
        assert first is None
        return
    assert first is not None
    full = pk.load(trace, cache=False)
    cols = [c for c in full.steps.columns if c.endswith("_us")]
    assert full.steps.set_index("step").loc[first.steps, cols].equals(
        first.profile.steps.set_index("step").loc[first.steps, cols])


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_a_profile_opened_while_the_steps_are_cut_is_never_loaded(tmp_path: Path,
                                                                   monkeypatch) -> None:
    """Another profile opened while the first one's steps are being cut: the first
    one's files are then not loaded at all (a load, once started, cannot be stopped)."""
    import threading

    from perfkit.io.preview import steps as P
    from perfkit.widgets import background
    from perfkit.widgets.dashboard import Dashboard

    monkeypatch.setattr(P, "DEVICE_STEPS_MAX_BYTES", 0)
    monkeypatch.setattr(preview_excerpt, "MIN_TRACE_BYTES", 0)
    monkeypatch.setenv("PERFKIT_CACHE", "0")
    trace = _plain("k_resnet50_nw4", tmp_path)
    cutting, go = threading.Event(), threading.Event()
    real_cut = background.first_steps

    def held_cut(preview):
        cutting.set()
        assert go.wait(120), "the test never released the cut"
        return real_cut(preview)
    monkeypatch.setattr(background, "first_steps", held_cut)
    board = Dashboard(background_bytes=0)
    loads: list[str] = []
    real_load = board._load

    def counted(source, run, progress):
        loads.append(str(source))
        return real_load(source, run, progress)
    board._load = counted  # type: ignore[method-assign]
    assert board.load_profile(str(trace))
    thread = board._thread
    assert cutting.wait(120)
    assert board.load_profile("simulated/slow-rank")  # a bundled sample: opens at once
    go.set()
    thread.join(120)
    assert not thread.is_alive() and str(trace) not in loads
    assert board.source == "simulated/slow-rank" and board.error is None
