"""Progressive opening in the dashboard: the steps first, every tab waiting with a progress
bar, then the whole profile; a failed or superseded background load; the Overview's
findings as the advisor finds them.

The background load is held on an event, so that what the page shows meanwhile is checked
at leisure (no timing is asserted). Step times are checked against the raw files read with
the csv and json modules.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import statistics
import threading
from pathlib import Path

import pytest
from raw_kineto import Iterations, raw_events, raw_walls
from shared_samples import HTA, PT_LEVEL1, shared_sample
from widget_html import panel_html

import perfkit as pk
from perfkit.errors import ProfileError
from perfkit.format import time_text
from perfkit.widgets import bundled_profile
from perfkit.widgets.dashboard import Dashboard
from perfkit.widgets.job import JobPanel
from perfkit.widgets.tabs import Context, OverviewTab
from perfkit.widgets.tabs.base import WAITING_CLASS

# the whole dashboard, every tab x profile, or Dask against pandas: the slow group (README)
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def _html(panel) -> str:
    """Every HTML value in the tab's body (nested boxes included)."""
    return panel_html(panel)


def _card(html: str, name: str) -> str | None:
    m = re.search(rf"<div class='pk-k'>{re.escape(name)}</div><div class='pk-v'>([^<]*)<",
                  html)
    return m.group(1) if m else None


def _bars(panel) -> list:
    def walk(widgets):
        for w in widgets:
            if type(w).__name__ == "FloatProgress":
                yield w
            yield from walk(getattr(w, "children", ()) or ())
    return list(walk(panel.body.children))


def _held(board: Dashboard) -> threading.Event:
    """Hold the board's background load until the returned event is set."""
    go = threading.Event()
    real = board._load

    def held(source, run, progress):
        assert go.wait(120), "the test never released the load"
        return real(source, run, progress)
    board._load = held  # type: ignore[method-assign]
    return go


def _csv_step_s(folder: Path) -> float:
    """The measured step from the raw step_trace_time.csv files: per step, the slowest
    rank's computing + exposed communication + free + preparing (the wait before the
    device span, where the file has it); the median over steps."""
    per_step: dict[int, float] = {}
    for path in folder.glob("*/ASCEND_PROFILER_OUTPUT/step_trace_time.csv"):
        with path.open(newline="", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                us = (float(r["Computing"]) + float(r["Communication(Not Overlapped)"])
                      + float(r["Free"]) + float(r.get("Preparing") or 0.0))
                step = int(r["Step"])
                per_step[step] = max(per_step.get(step, 0.0), us)
    return statistics.median(per_step.values()) / 1e6


@pytest.mark.shared_samples
def test_the_steps_come_first_then_the_whole_profile() -> None:
    folder = shared_sample(PT_LEVEL1)
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*")}
    board = Dashboard(background_bytes=0)
    go = _held(board)
    assert board.load_profile(str(folder))
    assert board.opening is not None
    step = time_text(_csv_step_s(folder) * 1e6)
    overview = board.panels["Overview"]
    html = _html(overview)
    assert _card(html, "step time") == step  # from step_trace_time.csv, before the rest
    assert "read first, from step_trace_time.csv" in html
    assert "computing <b>" in html  # the split is in the step file
    assert _card(html, "throughput") == "…" and _card(html, "MFU") == "…"
    assert len(_bars(overview)) == 1 and "Waiting for the device tasks" in html
    # a tab opened early says what it waits for, with its own progress bar
    operators = board.select("Operators")
    assert WAITING_CLASS in operators._dom_classes
    assert "Waiting for the operator tables" in _html(operators)
    assert len(_bars(operators)) == 1
    assert "being read in the background" in board.status.value
    board.select("Overview")
    go.set()
    assert board.wait(120)
    assert board.opening is None and board.error is None
    html = _html(overview)
    assert _card(html, "step time") == step  # the same figure from the whole profile
    assert "read first" not in html and not _bars(overview)
    assert "Top findings" in html and "still working" not in html
    assert board.job.job is not None and "Opened" in board.status.value
    operators = board.select("Operators")
    assert WAITING_CLASS not in operators._dom_classes and operators.charts
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*")} == before


def _json_span_s(folder: Path) -> float:
    per_step: dict[int, float] = {}
    for path in folder.glob("*.json.gz"):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            events = json.load(fh)["traceEvents"]
        for e in events:
            name = e.get("name", "")
            if name.startswith("ProfilerStep#") and e.get("ph") == "X" and \
                    e.get("cat") != "gpu_user_annotation":
                step = int(name.split("#")[1])
                per_step[step] = max(per_step.get(step, 0.0), float(e["dur"]))
    return statistics.median(per_step.values()) / 1e6


def _json_device_step_s(folder: Path) -> float:
    """The measured step from the raw traces (:func:`raw_kineto.raw_walls`): per step, the
    slowest rank's wall, the first to last device task among those whose runtime launch
    ran in its host ProfilerStep span and the device's wait before it; the median over
    steps."""
    per_step: dict[int, float] = {}
    for path in folder.glob("*.json.gz"):
        for step, us in raw_walls(path).items():
            per_step[step] = max(per_step.get(step, 0.0), float(us))
    return statistics.median(per_step.values()) / 1e6


@pytest.mark.shared_samples
def test_a_kineto_trace_shows_its_device_step_first_and_the_same_after(monkeypatch) -> None:
    monkeypatch.setenv("PERFKIT_CACHE", "0")  # read, not read back from an earlier load
    folder = shared_sample(HTA)
    board = Dashboard(background_bytes=0)
    go = _held(board)
    assert board.load_profile(str(folder))
    html = _html(board.panels["Overview"])
    step = time_text(_json_device_step_s(folder) * 1e6)
    assert _card(html, "step time") == step  # the device's, before the rest is read
    assert _card(html, "host step span") is None
    assert "read first, from the device tasks of each ProfilerStep" in html
    assert "The split (computing, exposed communication, free) comes with" in html
    go.set()
    assert board.wait(120) and board.error is None
    final = _html(board.panels["Overview"])
    assert _card(final, "step time") == step  # the same figure from the whole profile
    assert "read first" not in final


@pytest.mark.shared_samples
def test_a_trace_without_profiler_steps_shows_its_iterations_step_first(monkeypatch) -> None:
    """The AMD MI300 trace has no ProfilerStep#N: its first answer had no step time (the
    preview had none, "its steps come with the full load"). It now shows the median wall
    of its 5 training iterations (:class:`raw_kineto.Iterations`, from the raw gzip JSON),
    says they were inferred from the optimizer's annotations, and the same figure after."""
    monkeypatch.setenv("PERFKIT_CACHE", "0")  # read, not read back from an earlier load
    path = shared_sample("wild/tl_ddp_resnet18_mi300/train_resnet18.json.gz")
    walls = Iterations(raw_events(path)).walls()
    assert len(walls) == 5
    step = time_text(float(statistics.median(w for _, w in walls.values())))
    board = Dashboard(background_bytes=0)
    go = _held(board)
    assert board.load_profile(str(path))
    html = _html(board.panels["Overview"])
    assert _card(html, "step time") == step  # before the rest is read
    assert "read first, from the device tasks of each training iteration" in html
    assert "inferred from the optimizer&#x27;s Optimizer.step#SGD.step annotations" in html
    go.set()
    assert board.wait(120) and board.error is None
    final = _html(board.panels["Overview"])
    assert _card(final, "step time") == step and "read first" not in final


@pytest.mark.shared_samples
def test_a_large_trace_without_profiler_steps_shows_its_iteration_spans_first(monkeypatch
                                                                              ) -> None:
    """The MI300 trace (no ProfilerStep) read as one above the preview's limit: its first
    answer had no step figure at all. It now shows the median host span of its iterations
    1 to 4 (:class:`raw_kineto.Iterations`: from the end of one Optimizer.step#SGD.step to
    the end of the next, raw decimals), named as such, the step time waiting for the
    device tasks, and says that the first iteration comes with the rest."""
    from perfkit.io.preview import steps as P

    monkeypatch.setattr(P, "DEVICE_STEPS_MAX_BYTES", 0)  # as a trace above the limit
    monkeypatch.setenv("PERFKIT_CACHE", "0")
    path = shared_sample("wild/tl_ddp_resnet18_mi300/train_resnet18.json.gz")
    spans = Iterations(raw_events(path)).spans
    median = statistics.median(b - a for a, b in spans[1:])
    board = Dashboard(background_bytes=0)
    go = _held(board)
    assert board.load_profile(str(path))
    html = _html(board.panels["Overview"])
    assert _card(html, "host iteration span") == time_text(float(median))
    assert _card(html, "step time") == "…" and _card(html, "host step span") is None
    # one rank: "the one rank's", as the step time's basis says it for one rank
    assert "the one rank&#x27;s training iteration span" in html
    assert "the first iteration, which begins at the trace&#x27;s first event, comes " in html
    go.set()
    assert board.wait(120) and board.error is None
    assert _card(_html(board.panels["Overview"]), "host iteration span") is None


@pytest.mark.shared_samples
def test_a_trace_without_a_quick_step_reading_says_why_on_the_page(monkeypatch) -> None:
    """TraceLens's B200 trace: no ProfilerStep and no optimizer step (counted here from the
    raw JSON), so no step is read first. The Overview showed its progress bar and nothing
    about the step; it now says plainly that the steps come with the full load, and why."""
    monkeypatch.setenv("PERFKIT_CACHE", "0")
    path = shared_sample("wild/tl_b200_eager/eager_trace.json.gz")
    names = [str(e.get("name", "")) for e in raw_events(path)]
    assert not [n for n in names if n.startswith(("ProfilerStep#", "Optimizer.step#"))]
    board = Dashboard(background_bytes=0)
    go = _held(board)
    assert board.load_profile(str(path))
    html = _html(board.panels["Overview"])
    assert "No step time yet: the steps come with the full load, still being read (" \
           "eager_trace.json.gz: no ProfilerStep#N event nor optimizer iterations" in html
    assert len(_bars(board.panels["Overview"])) == 1
    go.set()
    assert board.wait(120) and board.error is None
    assert "No step time yet" not in _html(board.panels["Overview"])


@pytest.mark.shared_samples
def test_a_large_kineto_trace_shows_its_host_step_span_first(monkeypatch) -> None:
    from perfkit.io.preview import steps as P

    monkeypatch.setattr(P, "DEVICE_STEPS_MAX_BYTES", 0)  # as a trace above the limit
    monkeypatch.setenv("PERFKIT_CACHE", "0")  # not read back from an earlier test's load
    folder = shared_sample(HTA)
    board = Dashboard(background_bytes=0)
    go = _held(board)
    assert board.load_profile(str(folder))
    html = _html(board.panels["Overview"])
    assert _card(html, "host step span") == time_text(_json_span_s(folder) * 1e6)
    assert _card(html, "step time") == "…"  # the device's count needs the device tasks
    assert "comes with the device tasks" in html
    go.set()
    assert board.wait(120) and board.error is None
    final = _html(board.panels["Overview"])
    assert _card(final, "host step span") is None
    expected = pk.analysis.measured_step_s(pk.analysis.step_breakdown(board.profile))
    assert _card(final, "step time") == time_text(expected * 1e6)
    assert _card(final, "step time") == time_text(_json_device_step_s(folder) * 1e6)


def test_while_the_job_is_worked_out_the_overview_shows_the_whole_profiles_steps(
        monkeypatch) -> None:
    """A large trace shows the copy of its ProfilerStep ranges on the device lane first,
    without the split; once its files are read, and while the job is still being worked
    out, the Overview shows the device's step (as the raw JSON gives it) and the split, and
    the same step once the job comes."""
    import time as clock

    from perfkit.io.preview import steps as P
    from perfkit.widgets import background

    monkeypatch.setattr(P, "DEVICE_STEPS_MAX_BYTES", 0)  # as a trace above the limit
    monkeypatch.setenv("PERFKIT_CACHE", "0")
    folder = Path(__file__).resolve().parent / "data" / "kineto_llama_h100"
    job_go = threading.Event()
    real_job = background.stored_infer_job

    def held_job(profile, path, run=None):
        assert job_go.wait(120), "the test never released the job"
        return real_job(profile, path, run)
    monkeypatch.setattr(background, "stored_infer_job", held_job)
    board = Dashboard(background_bytes=0)
    load_go = _held(board)
    assert board.load_profile(str(folder))
    first = _html(board.panels["Overview"])
    assert "on the device lane" in first and "comes with the device tasks" in first
    load_go.set()
    deadline = clock.monotonic() + 120
    while "the whole profile is read" not in _html(board.panels["Overview"]):
        assert clock.monotonic() < deadline, "the whole profile's steps never came"
        clock.sleep(0.05)
    html = _html(board.panels["Overview"])
    step = time_text(_json_device_step_s(folder) * 1e6)
    assert _card(html, "step time") == step and "on the device lane" not in html
    assert "comes with the device tasks" not in html and "computing" in html
    assert _card(html, "throughput") == "…" and "being worked out" in html
    job_go.set()
    assert board.wait(120) and board.error is None
    final = _html(board.panels["Overview"])
    assert _card(final, "step time") == step and "the whole profile is read" not in final


@pytest.mark.shared_samples
def test_a_failed_background_load_shows_why_and_keeps_the_last_profile() -> None:
    board = Dashboard(background_bytes=0)
    assert board.load_profile("simulated/slow-rank")  # bundled: opens at once
    kept, kept_job = board.profile, board.job.job

    def broken(source, run, progress):
        raise ProfileError(source, "damaged beyond reading (a test)")
    board._load = broken  # type: ignore[method-assign]
    assert board.load_profile(str(shared_sample(PT_LEVEL1)))
    assert board.wait(120)
    assert "damaged beyond reading" in board.status.value and board.error
    assert "Still showing simulated/slow-rank" in board.status.value
    assert board.profile is kept and board.job.job is kept_job
    overview = board.panels["Overview"]
    assert WAITING_CLASS not in overview._dom_classes and not _bars(overview)
    assert _card(_html(overview), "step time") not in (None, "…")
    # the dashboard keeps working
    del board._load
    assert board.load_profile("simulated/llama2-13b-baseline-dp16") and board.error is None


@pytest.mark.shared_samples
def test_a_path_typed_then_opened_with_the_button_is_read_once() -> None:
    """The box sends the path when the *Open* button takes the focus (which opens it),
    then the click comes: one opening, one load, not a second one dropping the first."""
    folder = str(shared_sample(PT_LEVEL1))
    board = Dashboard(background_bytes=0)
    go = _held(board)
    held = board._load
    loads: list[str] = []

    def counted(source, run, progress):
        loads.append(str(source))
        return held(source, run, progress)
    board._load = counted  # type: ignore[method-assign]
    board.path.value = folder  # the box loses the focus to the button
    opening = board.opening
    assert opening is not None
    board.open_button.click()
    assert board.opening is opening and not opening.ended
    go.set()
    assert board.wait(120)
    assert loads == [folder] and board.error is None and opening.stage == "done"
    assert f"Opened <code>{folder}</code>" in board.status.value
    # once open, *Open* opens it again (read back from the cache)
    board.open_button.click()
    assert board.wait(120)
    assert loads == [folder, folder] and board.error is None


@pytest.mark.shared_samples
def test_opening_another_profile_meanwhile_drops_the_first() -> None:
    board = Dashboard(background_bytes=0)
    go = _held(board)
    assert board.load_profile(str(shared_sample(PT_LEVEL1)))
    opening = board.opening
    del board._load  # the next open is a bundled sample: at once
    assert board.load_profile("simulated/slow-rank")
    assert board.opening is None and opening.ended
    shown = board.profile
    go.set()
    assert board.wait(120)
    assert board.profile is shown and board.source == "simulated/slow-rank"


def test_the_top_findings_come_as_they_are_found_then_ranked() -> None:
    profile = pk.load(bundled_profile("simulated/slow-rank"))
    panel = JobPanel()
    panel.set_profile(profile)
    ctx = Context(panel)
    overview = OverviewTab(ctx)
    seen: list[tuple[int, bool, str]] = []
    show = overview._show_findings

    def spy(found, done, box=None):
        show(found, done, box)
        html = _html(overview._findings_box)
        seen.append((len(found), done, html))
    overview._show_findings = spy  # type: ignore[method-assign]
    overview.show(profile)
    overview.refresh()
    job = panel.job
    expected = pk.advise(profile, model=job.model, parallel=job.parallel,
                         hardware=job.hardware)
    assert seen[-1][1] and [n for n, done, _ in seen if not done] == list(
        range(1, len(expected) + 1))  # one call per finding, then the final list
    assert all("still working" in html for _, done, html in seen if not done)
    assert "still working" not in seen[-1][2]
    final = ctx.findings(profile)  # kept for the Advice tab: advise's list, in its order
    assert [(f.rule, f.title) for f in final] == [(f.rule, f.title) for f in expected]
    top = [f for f in expected if f.measured][:3]
    for f in top:
        assert f.title[:30].replace("&", "&amp;") in seen[-1][2]


def test_the_rows_on_show_stay_while_the_next_findings_come() -> None:
    """Each finding streamed redraws the list, but a row that shows the same again is
    the same widget (not closed and opened again in the browser); the rows it drops are
    closed."""
    profile = pk.load(bundled_profile("simulated/slow-rank"))
    panel = JobPanel()
    panel.set_profile(profile)
    overview = OverviewTab(Context(panel))
    shows: list[tuple[bool, list]] = []
    show = overview._show_findings

    def spy(found, done, box=None):
        show(found, done, box)
        rows = list(overview._findings_box.children)
        assert all(r.comm is not None for r in rows)  # on show: open
        shows.append((done, rows))
    overview._show_findings = spy  # type: ignore[method-assign]
    overview.show(profile)
    overview.refresh()
    assert len(shows) >= 3 and shows[-1][0]

    def texts(rows):
        return [_html_of(r) for r in rows]
    kept = 0
    for (_, before), (_, after) in zip(shows, shows[1:], strict=False):
        same = dict(zip(texts(before), before, strict=True))
        for text, row in zip(texts(after), after, strict=True):
            if text in same:
                assert row is same[text]
                kept += 1
        gone = [r for r in before if all(r is not a for a in after)]
        assert all(r.comm is None for r in gone)
    assert kept >= 1
    working = [rows[0] for done, rows in shows if not done]
    assert all(w is working[0] for w in working)
    assert f"{len(working)} found so far" in working[-1].value


def _html_of(widget) -> str:
    """The HTML a row shows (an HTML widget, or a box of them and a button)."""
    if hasattr(widget, "children"):
        return "".join(_html_of(c) for c in widget.children)
    return str(getattr(widget, "value", "") or getattr(widget, "description", ""))


def test_the_findings_stop_when_another_profile_is_shown() -> None:
    profile = pk.load(bundled_profile("simulated/slow-rank"))
    other = pk.load(bundled_profile("simulated/llama2-13b-baseline-dp16"))
    panel = JobPanel()
    panel.set_profile(profile)
    ctx = Context(panel)
    overview = OverviewTab(ctx)
    calls = []
    show = overview._show_findings

    def spy(found, done, box=None):
        calls.append(done)
        show(found, done, box)
        overview.show(other)  # a new profile while the advisor still works
    overview._show_findings = spy  # type: ignore[method-assign]
    overview.show(profile)
    overview.refresh()
    assert calls == [False]  # the first finding shown, then no more
    assert overview.message.value == ""  # stopping is no error
    assert ctx.known_findings(profile) is None and overview.stale


@pytest.mark.shared_samples
def test_a_large_recent_kineto_trace_shows_its_device_lane_step_first(monkeypatch) -> None:
    """Above the limit, a trace whose steps Kineto copies onto the device lane (the real
    H100 Qwen trace) shows that copy, with the device's wait before it, as its step time at
    once, said to be read first."""
    from perfkit.io.preview import steps as P

    monkeypatch.setattr(P, "DEVICE_STEPS_MAX_BYTES", 0)  # as a trace above the limit
    monkeypatch.setenv("PERFKIT_CACHE", "0")
    trace = next(shared_sample("wild/tl_qwen_h100").glob("*.json.gz"))
    with gzip.open(trace, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    lane = [e for e in steps if e.get("cat") == "gpu_user_annotation"]
    host = [e for e in steps if e.get("cat") != "gpu_user_annotation" and e.get("ph") == "X"]
    assert len(lane) == 1 and len(host) == 1
    # the range's length and the device's wait before it, from the host step's start
    wait = max(float(lane[0]["ts"]) - float(host[0]["ts"]), 0.0)
    board = Dashboard(background_bytes=0)
    go = _held(board)
    assert board.load_profile(str(trace))
    html = _html(board.panels["Overview"])
    assert _card(html, "step time") == time_text(float(lane[0]["dur"]) + wait)
    assert _card(html, "host step span") is None
    assert "read first, from the ProfilerStep ranges on the device lane" in html
    assert "close to the step the full load gives" in html
    go.set()
    assert board.wait(120) and board.error is None
    final = _html(board.panels["Overview"])
    assert "read first" not in final
    expected = pk.analysis.measured_step_s(pk.analysis.step_breakdown(board.profile))
    assert _card(final, "step time") == time_text(expected * 1e6)


def test_the_seconds_so_far_count_from_open_and_the_time_left_from_the_load(
        monkeypatch) -> None:
    """The preview took 4 s before the background load began: the page says 4 s so far at
    once, and the size estimate (10 s) still has 10 s left."""
    from types import SimpleNamespace

    from perfkit.widgets import opening as O

    clock = [100.0]
    monkeypatch.setattr(O.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(O, "expected_seconds", lambda size, cached: 10.0)
    preview = SimpleNamespace(input_bytes=2 << 30, cached=False, seconds=4.0)
    o = O.Opening("run", preview)
    assert "4 s so far, about 10 s left" in o.sentence("the operators")
    clock[0] += 3.0
    assert "7 s so far, about 7 s left" in o.sentence("the operators")


def test_a_waiting_tab_redrawn_is_never_blank() -> None:
    """A waiting tab redrawn (the Overview, when the steps read first or the whole
    profile's come) keeps its page on show until the next one is built: its body is never
    emptied in between (a blank tab flashed for the time the Overview worked out the
    whole profile's steps), and the page it replaced is closed."""
    folder = Path(__file__).resolve().parents[1] / "data" / "simulated" / \
        "llama2-13b-baseline-dp16"
    board = Dashboard(background_bytes=0)
    go = _held(board)
    assert board.load_profile(str(folder))
    overview = board.panels["Overview"]
    assert WAITING_CLASS in overview._dom_classes and overview.body.children
    before = list(overview.body.children)
    seen: list[int] = []
    overview.body.observe(lambda change: seen.append(len(change["new"])), names="children")
    overview.refresh()
    assert seen and 0 not in seen, seen
    assert overview.body.children and all(w.comm is None for w in before)
    go.set()
    assert board.wait(120) and board.error is None
