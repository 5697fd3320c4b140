"""What the dashboard shows, in-process: the headline, clicks on charts, the sample picker,
the Memory tab's defaults, the folded job panel, the spinner and the Timeline (numbers for
people on every tab of every profile: tests/test_widgets_dashboard.py).

A click on a chart mark is simulated the way the browser reports it: the JupyterChart's
``_vl_selections`` trait receives the Vega signal of the point selection, and Altair turns
it into ``chart.selections.pick``, which the tab observes.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
from pathlib import Path

import pytest
from shared_samples import PT_LEVEL1, shared_sample

import perfkit as pk
from perfkit.charts import SELECTION
from perfkit.widgets import TAB_TITLES, bundled_profile, dashboard
from perfkit.widgets.headline import finding_tab, headline, split_bar_html, step_split
from perfkit.widgets.memory_view import component_family, default_value, memory_series


def _walk(widgets):
    for w in widgets:
        yield w
        yield from _walk(getattr(w, "children", ()) or ())


def _html(panel) -> str:
    return "".join(w.value for w in _walk(panel.body.children) if type(w).__name__ == "HTML")


def _click(chart, **point) -> None:
    """What the browser sends when a mark is clicked (an empty point clears)."""
    value = {"vlPoint": {"or": [point]}} if point else None
    chart._vl_selections = {SELECTION: {"value": value, "store": []}}


DEFAULT = "simulated/llama2-13b-baseline-dp16"


@pytest.fixture(scope="module")
def board():
    return dashboard()


def _step_rows(folder: Path) -> list[dict[str, float]]:
    rows = []
    for path in folder.rglob("step_trace_time.csv"):
        with path.open(newline="", encoding="utf-8") as fh:
            rows += [{k: float(v) for k, v in r.items() if v not in ("", None)}
                     for r in csv.DictReader(fh)]
    return rows


# ----------------------------------------------------------------------------- headline

@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_step_split_adds_up_and_matches_the_step_trace_files() -> None:
    name = "simulated/llama2-13b-tuned-dp8-pp2"  # pipeline parallel: it has a bubble
    rows = _step_rows(bundled_profile(name))
    comp = sum(r["Computing"] for r in rows)
    exposed = sum(r["Communication(Not Overlapped)"] for r in rows)
    bubble = sum(r["Bubble"] for r in rows)
    free = sum(r["Free"] for r in rows)
    wait = sum(r["Preparing"] for r in rows)  # before the device span, in the step's wall
    total = comp + exposed + free + wait
    assert bubble > 0 and wait > 0
    split = step_split(pk.analysis.step_breakdown(pk.load(bundled_profile(name))))
    shares = dict(zip(split["part"], split["share"], strict=True))
    assert shares["computing_us"] == pytest.approx(comp / total, rel=1e-9)
    assert shares["comm_exposed_us"] == pytest.approx((exposed - bubble) / total, rel=1e-9)
    assert shares["bubble_us"] == pytest.approx(bubble / total, rel=1e-9)
    assert shares["free_us"] == pytest.approx(free / total, rel=1e-9)
    assert shares["preparing_us"] == pytest.approx(wait / total, rel=1e-9)
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-12)


def test_a_data_stall_is_a_part_of_the_step_split_and_of_the_step_time() -> None:
    """The bundled data-stall run waits about 120 ms for data before every other step
    (its raw step_trace_time.csv, read here): the headline's step time counts the wait,
    and the split shows it as its own part, so that the shares still add up to 100 %."""
    import statistics

    name = "simulated/data-stall"
    rows = _step_rows(bundled_profile(name))
    wall: dict[int, float] = {}
    for r in rows:
        us = r["Computing"] + r["Communication(Not Overlapped)"] + r["Free"] + r["Preparing"]
        wall[int(r["Step"])] = max(wall.get(int(r["Step"]), 0.0), us)
    assert max(r["Preparing"] for r in rows) > 100e3  # the stall: over 100 ms
    prof = pk.load(bundled_profile(name))
    breakdown = pk.analysis.step_breakdown(prof)
    head = headline(prof, breakdown, None)
    (step,) = [f.text for f in head.figures if f.name == "step time"]
    assert step == pk.format.time_text(statistics.median(wall.values()))
    shares = dict(zip(head.split["part"], head.split["share"], strict=True))
    wait = sum(r["Preparing"] for r in rows)
    total = sum(r["Computing"] + r["Communication(Not Overlapped)"] + r["Free"]
                + r["Preparing"] for r in rows)
    assert shares["preparing_us"] == pytest.approx(wait / total, rel=1e-9)
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-12)
    assert "before the first device task (data, launch) <b>" in split_bar_html(head.split)


def test_a_trace_without_step_marks_shows_its_optimizer_iterations() -> None:
    """The AMD DDP trace has no ProfilerStep (read with gzip and json) and 5 host
    ``Optimizer.step#SGD.step`` annotations: the step time card counts 5 steps and says
    they are the iterations inferred from them (it was the one span of the trace, 5
    iterations long), and the split is over those 5 steps, not "over 0 steps"."""
    path = shared_sample("wild/tl_ddp_resnet18_mi300")
    (trace,) = path.glob("*.json.gz")
    with gzip.open(trace, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    assert not [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    marks = {e["name"] for e in events if e.get("ph") == "X"
             and e.get("cat") == "user_annotation" and e["name"].startswith("Optimizer.step#")}
    n = sum(e.get("ph") == "X" and e.get("cat") == "user_annotation" and e["name"] in marks
            for e in events)
    assert (n, marks) == (5, {"Optimizer.step#SGD.step"})
    prof = pk.load(path, cache=False, progress=False)
    breakdown = pk.analysis.step_breakdown(prof)
    (note,) = [f.note for f in headline(prof, breakdown, None).figures if f.name == "step time"]
    assert f"median over {n} steps" in note and "0 steps" not in note
    assert "iterations inferred from the optimizer's Optimizer.step#SGD.step annotations" \
        in note
    split = step_split(breakdown)
    assert split.attrs["steps"] == n and split.attrs["ranks"] == 1
    assert f"1 rank × {n} steps;" in split_bar_html(split)


def test_the_overview_headline_of_the_default_sample(board) -> None:
    html = _html(board.panels["Overview"])
    job = board.job.job
    rows = _step_rows(bundled_profile("simulated/llama2-13b-baseline-dp16"))
    step_us = max(r["Computing"] + r["Communication(Not Overlapped)"] + r["Free"]
                  + r["Preparing"] for r in rows)  # one step: the slowest rank's wall
    assert f"{step_us / 1e6:.2f} s</div>" in html
    tps = 32 * 4096 / (step_us / 1e6 * 16)  # global batch x seq / (step x devices)
    assert f"{tps:,.0f} tokens/s per device" in html
    assert re.search(r"<div class='pk-k'>MFU</div><div class='pk-v'>\d+\.\d %</div>", html)
    assert job.global_batch_size == 32 and job.seq_length == 4096  # dp 16 x 2 sequences
    # the split: computing 88.9 %, exposed communication, free; no bubble without pp
    assert "computing <b>" in html and "exposed communication <b>" in html
    assert "pipeline bubble" not in html.split("Top findings")[0]
    assert "summed over 16 ranks × 1 step; the parts add up to 100 %" in html


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_top_findings_name_their_cost_and_open_their_tab(board) -> None:
    overview = board.select("Overview")
    findings = [f for f in board.context.findings(board.profile) if f.measured][:3]
    buttons = [w for w in _walk(overview.body.children) if type(w).__name__ == "Button"]
    assert len(buttons) == 3
    html = _html(overview)
    for f, button in zip(findings, buttons, strict=True):
        assert f.title[:30] in html
        tab = finding_tab(f.area, TAB_TITLES)
        assert button.description == f"Evidence: {tab} ›"
        button.click()
        assert TAB_TITLES[board.tabs.selected_index] == tab
        assert not board.panels[tab].stale
    assert finding_tab("memory") == "Memory" and finding_tab("cluster") == "Communication"
    assert finding_tab("host", TAB_TITLES) == "Timeline"  # the step drawn in time
    board.select("Overview")


# ----------------------------------------------------------------------------- clicks

def test_clicking_a_rank_shows_its_steps(board) -> None:
    overview = board.select("Overview")
    chart = overview.charts[0]
    _click(chart, rank=5)
    assert overview.rank.value == 5
    assert "Steps of rank 5" in overview.steps_table.value
    _click(chart)  # a double click clears the selection
    assert overview.rank.value == -1 and "over the ranks" in overview.steps_table.value


def test_clicking_an_operator_type_lists_its_task_names(board) -> None:
    panel = board.select("Operators")
    chart = panel.charts[0]
    _click(chart, full="MatMulV3")
    names = pk.analysis.top_operators(board.profile, by="name", n=None)
    expected = names.loc[names["type"] == "MatMulV3", "name"].astype(str)
    assert "Task names of type MatMulV3" in panel.detail.value
    for name in expected.head(5):
        assert name[:20] in panel.detail.value
    assert "aclnnMul_Mul_Mul" not in panel.detail.value  # another type's task
    _click(chart)
    assert "Click a bar" in panel.detail.value


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_clicking_a_rank_of_the_peers_chart_filters_the_links() -> None:
    board = dashboard("simulated/slow-link")
    panel = board.select("Communication")
    _click(panel.charts[0], rank=3)
    text = panel.rank_detail.value
    assert "Links of rank 3" in text
    links = pk.analysis.slow_links(board.profile)
    mine = links[(links["src_rank"] == 3) | (links["dst_rank"] == 3)]
    assert text.count("<tr") == min(len(mine), 20) + 1  # header + the rank's links
    _click(panel.charts[0])
    assert "Links, slowest first" in panel.rank_detail.value


@pytest.mark.shared_samples
def test_clicking_a_rank_lists_the_links_it_recorded_where_only_local_ranks_are_known() -> None:
    """gpt3-old's matrices know only group-local ranks and no group's rank list. The chart's
    ranks are global, so a click on rank 0 compared global rank 0 with local ranks: it
    listed rank 1's links too (RDMA local 0 -> 1 of rank 1's group 368314942532213303, HCCS
    local 1 -> 0 of the 8-rank group). It now lists the links in rank 0's own
    communication_matrix.json (read here: not LOCAL, not "Total Op Info", 1 MB or more
    summed over the operations), each with its group, and says so."""
    from perfkit.widgets import tab_panel

    folder = shared_sample("ascend/msinsight-pt-gpt3-old")
    sizes: dict[tuple[str, str, int, int], float] = {}
    path = folder / "test_rank_0/ASCEND_PROFILER_OUTPUT/communication_matrix.json"
    for step in json.loads(path.read_text(encoding="utf-8")).values():
        for ops in step.values():
            for key, op in ops.items():
                for link, v in op.items() if key != "Total Op Info" else ():
                    if v["Transport Type"] != "LOCAL" and v["Transit Time(ms)"] > 0:
                        src, dst = (int(x) for x in link.split("-"))
                        k = (v["Transport Type"], key.split("@")[1], src, dst)
                        sizes[k] = sizes.get(k, 0.0) + v["Transit Size(MB)"]
    own = sorted(k for k, mb in sizes.items() if mb >= 1.0)
    assert ("RDMA", "10471851537367425459", 0, 1) in own and len(own) == 9
    panel = tab_panel("Communication", str(folder))
    _click(panel.charts[0], rank=0)
    rows = [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>.*?</td>", tr)]
            for tr in re.findall(r"<tr>(.*?)</tr>", panel.rank_detail.value, flags=re.S)]
    heads = [re.sub(r"<[^>]+>", "", h)
             for h in re.findall(r"<th[^>]*>.*?</th>", panel.rank_detail.value)]
    shown = [dict(zip(heads, r, strict=True)) for r in rows if r]
    groups = {k[1] for k in own}
    assert all(len(g) <= 28 for g in groups)  # shown whole
    assert sorted((r["transport"], r["communication group"], int(r["from rank in group"]),
                   int(r["to rank in group"])) for r in shown) == own
    assert {r["recorded by rank"] for r in shown} == {"0"}
    assert "the links rank 0 recorded itself" in panel.rank_detail.value


def test_clicking_a_finding_shows_it_alone_with_a_way_to_its_evidence(board) -> None:
    panel = board.select("Advice")
    findings = board.context.findings(board.profile)
    first = next(f for f in findings if f.measured)
    _click(panel.charts[0], title=first.title)
    assert panel.table.value.count("<tr>") == 2  # header + the finding
    assert first.rule in panel.table.value  # the rule id stays in the details column
    (button,) = panel.goto.children
    assert button.description == f"Evidence: {finding_tab(first.area, TAB_TITLES)} ›"
    _click(panel.charts[0])
    assert panel.table.value.count("<tr>") == len(findings) + 1


def test_clicking_a_memory_series_filters_the_peaks() -> None:
    board = dashboard(str(shared_sample(PT_LEVEL1)))  # the real export's CANN modules
    panel = board.select("Memory")
    _click(panel.charts[0], series="PTA, max over 2 ranks")
    assert "Peak memory of PTA" in panel.peaks.value
    assert "HCCL" not in panel.peaks.value


# ----------------------------------------------------------------------------- memory

def test_memory_defaults_to_a_series_with_data_on_kineto() -> None:
    board = dashboard("kineto-tiny-llama")
    panel = board.select("Memory")
    # Kineto reports reserved memory as zeros: the tab starts on allocated; a CPU-only run's
    # samples are all the host allocator's (component "host"), the family it starts on
    memory = board.profile.memory
    assert set(memory["component"].astype(str)) == {"host"}
    assert (memory["reserved_bytes"].fillna(0) == 0).all()
    assert memory["allocated_bytes"].max() > 0
    assert (panel.family.value, panel.value.value) == ("host allocator", "allocated_bytes")
    data = panel.charts[0].chart.data
    assert data.iloc[:, -1].max() > 0
    # the peak is the allocator's largest sample (MiB for a CPU run)
    assert f"{memory['allocated_bytes'].max() / 2**20:.2f}" in panel.peaks.value


def test_memory_groups_components_and_hides_empty_series() -> None:
    prof = pk.load(shared_sample(PT_LEVEL1))
    timeline = pk.analysis.memory_timeline(prof, max_points=200)
    assert timeline["component"].nunique() > 70  # every CANN module of the export
    held = {c for c, g in timeline.groupby("component")
            if g[["allocated_bytes", "reserved_bytes"]].fillna(0).to_numpy().max() > 0}
    framework = memory_series(timeline, "allocated_bytes", family="framework")
    assert set(framework["component"]) == {c for c in held if component_family(c) ==
                                           "framework"} & {"PTA", "PTA+GE", "GE"}
    runtime = memory_series(timeline, "reserved_bytes", family="runtime / HCCL")
    assert set(runtime["component"]) == {"HCCL", "RUNTIME"}
    # largest first
    peaks = runtime.groupby("component", sort=False)["reserved_bytes"].max()
    assert list(peaks) == sorted(peaks, reverse=True)
    assert default_value(timeline, "application") == "reserved_bytes"  # APP: reserved only
    # folded over the 2 ranks: each bin keeps the largest of the ranks
    one = memory_series(timeline, "reserved_bytes", family="application", bins=1)
    assert one["reserved_bytes"].max() == timeline.loc[timeline["component"] == "APP",
                                                       "reserved_bytes"].max()


def test_memory_shows_the_measured_peak_next_to_the_theory(board) -> None:
    html = _html(board.select("Memory"))
    job = board.job.job
    assert f"<b>Measured peak</b> {job.peak_memory_bytes / 2**30:.2f} GiB" in html
    assert "<b>theory</b>" in html and "theory / measured" in html


# ----------------------------------------------------------------------------- state

@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_the_sample_picker_always_shows_what_is_open(tmp_path: Path) -> None:
    board = dashboard()
    assert board.samples.value == "simulated/llama2-13b-baseline-dp16"
    board.samples.value = "simulated/slow-rank"
    assert board.source == "simulated/slow-rank"
    assert board.load_profile(str(bundled_profile("simulated/slow-link")))
    label = dict((v, k) for k, v in board.samples.options)[board.samples.value]
    assert "slow-link" in label and "path" in label  # not the last sample any more
    assert not board.load_profile(str(tmp_path / "missing"))
    label = dict((v, k) for k, v in board.samples.options)[board.samples.value]
    assert "slow-link" in label  # still what is on show
    board.load_profile("sample:slow-rank")
    assert board.samples.value == "simulated/slow-rank"


def test_the_job_panel_is_folded_to_one_line() -> None:
    board = dashboard("simulated/slow-rank")
    job = board.job
    assert job.editor.layout.display == "none" and job.toggle.value is False
    assert job.job.describe() in job.summary.value and "values from: profile" in \
        job.summary.value
    job.unfold()
    assert job.editor.layout.display == "flex" and job.toggle.description == "Fold the job"
    job.unfold(False)
    assert job.editor.layout.display == "none"


def test_a_tab_shows_a_spinner_while_it_computes(board, monkeypatch) -> None:
    panel = board.panels["Recompute"]
    seen = []
    build = type(panel).build

    def spy(self, profile):
        seen.append(self.message.value)
        return build(self, profile)

    monkeypatch.setattr(type(panel), "build", spy)
    panel.refresh()
    assert seen and "pk-busy" in seen[0] and "Computing the Recompute tab" in seen[0]
    assert panel.message.value == "" and "pk-ready" in panel._dom_classes


def test_long_labels_are_not_truncated(board) -> None:
    recompute, planner = board.panels["Recompute"], board.panels["Planner"]
    for widget in (recompute.patterns, recompute.ir_path, planner.devices, planner.batch,
                   board.samples, board.path):
        width = widget.style.description_width
        assert width == "initial" or int(width.removesuffix("px")) >= 8 * len(
            widget.description), widget.description


# ----------------------------------------------------------------------------- timeline

def _rows(chart) -> list[dict]:
    """The rows a chart ships to the browser (its top-level data set)."""
    spec = chart.chart.to_dict()
    return spec["datasets"][spec["data"]["name"]]


def test_the_timeline_draws_the_chosen_step_and_ranks_and_exports_them(board) -> None:
    import gzip
    import json

    panel = board.select("Timeline")
    (chart,) = panel.charts
    assert chart.embed_options["renderer"] == "canvas"  # thousands of rects zoom smoothly
    frame = pk.analysis.timeline(board.profile)
    assert len(_rows(chart)) == len(frame)  # one rect per row of the analysis
    # the step drawn and why: its rank's median-duration step, or its only one
    assert re.search(r"step \d+: the (median-duration|only) step of the slowest rank \d+, "
                     r"[\d.]+ m?s long", _html(panel))
    # two ranks picked in the rank list: their lanes only
    panel.ranks.value = (0, 3)
    (chart,) = panel.charts
    ranks = {int(re.match(r"rank (\d+)", r["track"]).group(1)) for r in _rows(chart)}
    assert ranks == {0, 3}
    path = panel.export_trace()
    assert path is not None and path.is_file() and path.name.endswith(".json.gz")
    assert not path.resolve().is_relative_to(bundled_profile(DEFAULT).resolve())
    trace = json.loads(gzip.decompress(path.read_bytes()))
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    assert {e["pid"] for e in events} == {0, 3}
    # every kernel of step 1 of rank 0 is in the file (the export is not capped)
    window = trace["otherData"]
    kernels = board.profile[0].kernels
    assert window["step"] == 1
    assert sum(e["pid"] == 0 and e.get("cat") != "host" for e in events) >= \
        int((kernels["step"] == 1).sum())
    assert "Download it" in panel.exported.value and str(path) in panel.exported.value
    panel.ranks.value = ()
    assert len(panel.charts) == 1


def test_the_timeline_of_a_cpu_run_draws_host_lanes() -> None:
    board = dashboard("kineto-tiny-llama")
    panel = board.select("Timeline")
    assert panel.charts and "pk-error" not in panel.message.value
    tracks = {r["track"] for r in _rows(panel.charts[0])}
    assert any("host thread" in t for t in tracks)  # no device task on a CPU run
