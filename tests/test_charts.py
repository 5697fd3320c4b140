"""Chart builders: their specs encode what the analyses computed, row for row."""

from __future__ import annotations

import re
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
import pytest

import perfkit as pk
from perfkit import analysis as A
from perfkit import charts as C
from perfkit.errors import InvalidArgumentError

__all__: list[str] = []

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def slow_rank() -> object:
    return pk.load(DATA / "simulated" / "slow-rank")


def _encoding(chart: alt.TopLevelMixin, layer: int | None = None) -> dict:
    spec = chart.to_dict()
    if layer is not None:
        spec = spec["layer"][layer]
    return spec["encoding"]


def _data(chart: alt.TopLevelMixin, layer: int | None = None) -> pd.DataFrame:
    data = chart.layer[layer].data if layer is not None else chart.data
    if layer is not None and not isinstance(data, pd.DataFrame):
        data = chart.data  # a layer drawing its parent's data
    assert isinstance(data, pd.DataFrame)
    return data


def _svg(chart: alt.TopLevelMixin) -> str:
    svg = C.chart_to_svg(chart)
    assert svg.lstrip().startswith("<svg")
    for cdn in ("cdn.jsdelivr", "unpkg", "cdnjs", "<script"):
        assert cdn not in svg
    return svg


# ----------------------------------------------------------------------------- steps

def test_step_breakdown_chart_draws_every_part_of_every_rank(slow_rank: object) -> None:
    frame = A.step_breakdown(slow_rank)
    chart = C.step_breakdown_chart(frame, title="steps")
    enc = _encoding(chart, layer=0)
    assert enc["x"]["field"] == "rank" and enc["xOffset"]["field"] == "step"
    assert enc["y"]["field"] == "ms" and enc["y"]["stack"] == "zero"
    assert enc["color"]["field"] == "part"
    assert enc["color"]["scale"]["domain"] == list(C.STEP_PARTS.values())
    data = _data(chart)
    assert len(data) == len(frame) * len(C.STEP_PARTS)
    for column, part in C.STEP_PARTS.items():
        for _, row in frame.iterrows():
            got = data[(data["rank"] == int(row["rank"])) & (data["step"] == str(row["step"]))
                       & (data["part"] == part)]["ms"]
            assert got.tolist() == pytest.approx([row[column] / 1000.0])
    # per rank and step, the stacked parts add up to the step
    total = data.groupby(["rank", "step"])["ms"].sum()
    expected = frame.set_index([frame["rank"].astype(int), frame["step"].astype(str)])["step_us"]
    assert total.sort_index().to_numpy() == pytest.approx(
        expected.sort_index().to_numpy() / 1000.0, rel=1e-9)
    # each part's share of its bar, from the frame's own shares
    merged = data[data["part"] == C.STEP_PARTS["computing_us"]]
    shares = frame.set_index([frame["rank"].astype(int),
                              frame["step"].astype(str)])["computing_share"]
    keys = list(zip(merged["rank"], merged["step"], strict=True))
    assert merged["share"].to_numpy() == pytest.approx(shares.loc[keys].to_numpy(), rel=1e-6)
    assert enc["x"]["type"] == "ordinal" and enc["x"]["axis"]["labelAngle"] == 0
    _svg(chart)


def test_step_breakdown_chart_numbers_the_bars_of_a_rank_with_several_steps() -> None:
    two = pd.DataFrame({"rank": [0, 0, 1, 1], "step": [2, 3, 2, 3],
                        "computing_us": [900.0, 950.0, 800.0, 700.0],
                        "comm_not_overlapped_us": [100.0, 50.0, 0.0, 25.0],
                        "free_us": [10.0, 20.0, 30.0, 40.0]})
    chart = C.step_breakdown_chart(two)
    spec = chart.to_dict()
    assert len(spec["layer"]) == 2
    label = spec["layer"][1]
    assert label["mark"]["type"] == "text" and label["encoding"]["text"]["field"] == "step"
    assert label["encoding"]["xOffset"]["field"] == "step"
    # the label sits on the bar's total: the sum of its parts (ms), per rank and step
    assert label["transform"][0]["aggregate"] == [{"op": "sum", "field": "ms", "as": "total"}]
    assert label["encoding"]["y"]["field"] == "total"
    assert "one bar per step" in spec["layer"][0]["encoding"]["x"]["axis"]["title"]
    svg = _svg(chart)
    for step in ("2", "3"):  # each step number is drawn, once per rank
        assert svg.count(f">{step}</text>") >= 2
    # one step per rank: nothing to tell apart, no labels
    one = C.step_breakdown_chart(two[two["step"] == 2])
    assert len(one.to_dict()["layer"]) == 1
    assert one.to_dict()["layer"][0]["encoding"]["x"]["axis"]["title"] == "rank"


def test_step_breakdown_chart_averages_steps_when_there_are_many_bars() -> None:
    # 3 ranks x 40 steps: more bars than max_bars, so one bar per rank, the mean per part
    rows = [{"rank": r, "step": s, "computing_us": 1000.0 * (r + 1) + s,
             "comm_not_overlapped_us": 100.0, "free_us": 10.0 * s}
            for r in range(3) for s in range(40)]
    frame = pd.DataFrame(rows)
    data = _data(C.step_breakdown_chart(frame, max_bars=50))
    assert len(data) == 3 * 3
    comp = data[data["part"] == C.STEP_PARTS["computing_us"]].set_index("rank")["ms"]
    # mean over steps 0..39 of 1000 (r + 1) + s is 1000 (r + 1) + 19.5
    assert comp.to_dict() == pytest.approx({r: (1000.0 * (r + 1) + 19.5) / 1e3
                                            for r in range(3)})
    assert set(data["step"]) == {"mean of 40"}


def test_step_breakdown_chart_leaves_missing_parts_out() -> None:
    frame = pd.DataFrame({"rank": [0, 1], "step": [1, 1], "computing_us": [900.0, 800.0],
                          "comm_not_overlapped_us": [pd.NA, 50.0], "free_us": [10.0, 20.0]})
    data = _data(C.step_breakdown_chart(frame))
    assert len(data) == 5
    assert not ((data["rank"] == 0) & (data["part"] == C.STEP_PARTS[
        "comm_not_overlapped_us"])).any()


@pytest.mark.shared_samples
def test_step_breakdown_chart_draws_the_legacy_step_trace_phases() -> None:
    """A legacy MindSpore profile has no computing / communication / free split, but its
    step trace has the phases the seed guide reads first; the chart stacks those, summing
    to the step (read here from step_trace_raw_1_detail_time.csv: 10 ns ticks)."""
    import csv

    from shared_samples import shared_sample

    folder = shared_sample("wild/mi_run1")
    with open(folder / "profiler" / "step_trace_raw_1_detail_time.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["step_num"] not in ("-", "0")]
    steps = A.step_breakdown(pk.load(folder, cache=False, progress=False))
    assert steps["computing_us"].isna().all()  # nothing to split the step by
    data = _data(C.step_breakdown_chart(steps, max_bars=len(rows)))
    assert set(data["part"]) == set(C.TRACE_PHASES.values())
    drawn = data.groupby("step")["ms"].sum()
    for r in rows:
        phases = sum(int(r[c]) for c in ("iteration_interval", "fp_and_bp", "tail"))
        assert phases == int(r["total"])  # the phases add up to the step total
        assert drawn[r["step_num"]] == pytest.approx(phases * 0.01 / 1e3, rel=1e-9)
    # and a step table without any part is drawn whole
    whole = _data(C.step_breakdown_chart(steps[["rank", "step", "step_us"]]))
    assert set(whole["part"]) == set(C.WHOLE_STEP.values())


def test_step_breakdown_chart_renders_an_empty_frame_and_rejects_a_wrong_one() -> None:
    empty = pd.DataFrame(columns=["rank", "step", *C.STEP_PARTS])
    assert _data(C.step_breakdown_chart(empty)).empty
    _svg(C.step_breakdown_chart(empty))
    with pytest.raises(InvalidArgumentError, match="free_us"):
        C.step_breakdown_chart(empty.drop(columns="free_us"))
    with pytest.raises(InvalidArgumentError):
        C.step_breakdown_chart([1, 2, 3])  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- operators

def test_top_operators_chart_keeps_the_longest_in_order(slow_rank: object) -> None:
    frame = A.top_operators(slow_rank, n=None)
    chart = C.top_operators_chart(frame, n=5)
    data = _data(chart)
    expected = frame.sort_values("total_us", ascending=False).head(5)
    assert data["full"].tolist() == expected["key"].astype(str).tolist()
    assert data["ms"].to_numpy() == pytest.approx(expected["total_us"].to_numpy() / 1e3)
    assert data["share"].to_numpy() == pytest.approx(expected["share"].to_numpy())
    enc = _encoding(chart)
    assert enc["y"]["field"] == "label" and enc["y"]["sort"] == data["label"].tolist()
    assert enc["x"]["field"] == "ms" and enc["color"]["field"] == "category"
    _svg(chart)
    assert data["count"].tolist() == expected["count"].tolist()  # summed, as the bars
    chart = C.top_operators_chart(frame, n=5, value="per_step_us")
    per_step = _data(chart)
    expected = frame.sort_values("per_step_us", ascending=False).head(5)
    assert per_step["ms"].to_numpy() == pytest.approx(expected["per_step_us"].to_numpy() / 1e3)
    # the calls are on the bars' basis (per rank and step), so bar = calls x mean per call
    assert per_step["count"].to_numpy() * expected["mean_us"].to_numpy() / 1e3 == \
        pytest.approx(per_step["ms"].to_numpy())
    titles = {t["field"]: t.get("title") for t in _encoding(chart)["tooltip"]}
    assert titles["ms"] == "device time per rank and step (ms)"
    assert titles["count"] == "calls per rank and step"


def test_top_operators_chart_shortens_long_names_and_keeps_them_whole() -> None:
    long = "aclnnFlashAttentionScoreGrad_" + "x" * 80 + "_FlashAttentionScoreGrad"
    frame = pd.DataFrame({"key": [long, long + "2", "Add"], "total_us": [30.0, 20.0, 10.0],
                          "share": [0.5, 0.3, 0.2], "category": ["compute"] * 3})
    data = _data(C.top_operators_chart(frame, label_limit=40))
    assert data["full"].tolist() == [long, long + "2", "Add"]
    assert all(len(label) <= 45 for label in data["label"])
    assert data["label"].iloc[0].startswith("aclnnFlash") and "…" in data["label"].iloc[0]
    assert data["label"].nunique() == 3  # shortened labels stay distinct


def test_top_operators_chart_by_another_label() -> None:
    frame = pd.DataFrame({"type": ["A", "B"], "total_us": [10.0, 30.0], "share": [0.25, 0.75],
                          "category": ["compute", "communication"]})
    data = _data(C.top_operators_chart(frame, label="type", n=None))
    assert data["label"].tolist() == ["B", "A"]
    assert data["full"].tolist() == ["B", "A"]
    with pytest.raises(InvalidArgumentError, match="key"):
        C.top_operators_chart(frame)


# ----------------------------------------------------------------------------- findings

def test_findings_frame_chart_and_table(slow_rank: object) -> None:
    findings = pk.advise(slow_rank)
    assert findings, "the slow-rank scenario has findings"
    frame = C.findings_frame(findings)
    assert list(frame.columns) == list(C.FINDING_COLUMNS)
    assert frame["title"].tolist() == [f.title for f in findings]
    assert frame["score"].tolist() == [f.score for f in findings]
    chart = C.findings_chart(frame, n=3)
    data = _data(chart)
    measured = [f for f in findings if f.measured]
    assert data["title"].tolist() == [f.title for f in measured[:3]]
    assert data["ms_per_step"].tolist() == [f.ms_per_step for f in measured[:3]]
    assert _encoding(chart)["y"]["field"] == "label"
    enc = _encoding(chart)
    assert enc["x"]["field"] == "ms_per_step" and enc["color"]["field"] == "severity"
    # the legend lists the severities of the three bars drawn, in the severity order
    shown = {f.severity for f in measured[:3]}
    assert enc["color"]["scale"]["domain"] == [s for s in C.SEVERITY_ORDER if s in shown]
    _svg(chart)
    table = C.findings_html(frame, n=2)
    assert table.count("<tr>") == 3  # header + two findings
    assert findings[0].title.split(":")[0] in table
    top = findings[0]
    # three significant digits, all integer digits kept from 100 ms on
    digits = 0 if top.ms_per_step >= 100 else 1 if top.ms_per_step >= 10 else 2
    assert f"{top.ms_per_step:,.{digits}f} ms ({100 * top.score:.1f} %)" in table
    assert "rule slow_ranks" in table  # the rule id is in the details column


def test_the_findings_legend_lists_the_severities_drawn() -> None:
    """The legend listed all five severities whatever the findings; it lists those of the
    bars drawn (a finding not measured has no bar), each in the colour it has among all."""
    rows = [("a", "info", True), ("b", "high", True), ("c", "medium", False)]
    frame = pd.DataFrame({"title": [r[0] for r in rows], "severity": [r[1] for r in rows],
                          "area": "steps", "score": [0.2, 0.1, 0.05],
                          "ms_per_step": [2.0, 1.0, float("nan")],
                          "measured": [r[2] for r in rows]})
    scale = _encoding(C.findings_chart(frame))["color"]["scale"]
    assert scale["domain"] == ["high", "info"]  # "medium" is not measured: no bar
    every = pd.DataFrame({"title": list("vwxyz"), "severity": list(C.SEVERITY_ORDER),
                          "area": "steps", "score": 0.1, "ms_per_step": 1.0,
                          "measured": True})
    full = _encoding(C.findings_chart(every))["color"]["scale"]
    assert full["domain"] == list(C.SEVERITY_ORDER)
    colour = dict(zip(full["domain"], full["range"], strict=True))
    assert scale["range"] == [colour["high"], colour["info"]]


def test_roofline_chart_log_log_one_point_per_group(slow_rank: object) -> None:
    eff = pk.analysis.operator_efficiency(slow_rank)
    hw = pk.Hardware.preset("ascend-910b")
    chart = C.roofline_chart(eff, bandwidth_gbps=hw.memory_bandwidth / 1e9, n=30,
                             title="roofline")
    roof, points = _data(chart, 0), _data(chart, 1)
    placed = eff[(eff["intensity"] > 0) & (eff["achieved_tflops"] > 0)]
    top = placed.sort_values("total_us", ascending=False).head(30)
    assert points["key"].tolist() == top["key"].tolist()
    # time per rank and step, as the Operators tab's tables give it (a walk: the
    # roofline's legend ran to 3,000 ms of time summed over ranks and steps)
    assert points["total_ms"].tolist() == pytest.approx((top["per_step_us"] / 1e3).tolist())
    assert top["per_step_us"].sum() < top["total_us"].sum()
    spec = chart.to_dict()
    layer = spec["layer"][1]["encoding"]
    assert layer["x"]["scale"]["type"] == "log" and layer["y"]["scale"]["type"] == "log"
    assert layer["size"]["field"] == "total_ms"
    assert layer["size"]["title"] == "time, per rank and step (ms)"
    # the roof: bandwidth x intensity up to the ridge, then flat at the peak
    ridge = 320e12 / 1600e9
    assert roof["roof_tflops"].tolist() == pytest.approx(
        [roof["intensity"].iloc[0] * 1600 / 1e3, 320.0, 320.0])
    assert roof["intensity"].iloc[1] == pytest.approx(ridge)
    _svg(chart)


def test_findings_html_escapes_and_handles_no_finding() -> None:
    frame = pd.DataFrame([{c: "<b>x</b>" for c in C.FINDING_COLUMNS}])
    table = C.findings_html(frame)
    assert "<b>" not in table and "&lt;b&gt;" in table
    assert "No finding" in C.findings_html(C.findings_frame([]))


# ----------------------------------------------------------------------------- planning

@pytest.fixture(scope="module")
def search() -> pd.DataFrame:
    model = pk.ModelSpec.preset("llama2-13b")
    return pk.plan.search(model, pk.Hardware.preset("ascend-910b"), num_devices=16,
                          global_batch_size=1024, include_rejected=True)


def test_strategy_chart_plots_each_candidate(search: pd.DataFrame) -> None:
    chart = C.strategy_chart(search, n=50)
    # search's default model (plan.predict's) gives each candidate a band: a rule from
    # low_s to high_s under each point (layer 0), then the points, then the memory limit
    marks = [layer["mark"]["type"] for layer in chart.to_dict()["layer"]]
    assert marks[:3] == ["rule", "point", "rule"], marks
    points = _data(chart, 1)
    fastest = search.sort_values("step_s", kind="stable").head(50)
    assert len(points) == 50
    assert points["step_s"].to_numpy() == pytest.approx(fastest["step_s"].to_numpy())
    assert points["memory_GiB"].to_numpy() == pytest.approx(
        fastest["memory_bytes"].to_numpy() / 2**30)
    assert (points["fits"] == "fits").sum() == int(fastest["fits"].sum())
    enc = _encoding(chart, 1)
    assert enc["x"]["field"] == "memory_GiB" and enc["y"]["field"] == "step_s"
    assert enc["color"]["field"] == "fits"
    band = _encoding(chart, 0)
    assert (band["y"]["field"], band["y2"]["field"]) == ("low_s", "high_s")
    assert points["low_s"].to_numpy() == pytest.approx(fastest["low_s"].to_numpy())
    assert points["high_s"].to_numpy() == pytest.approx(fastest["high_s"].to_numpy())
    assert (points["low_s"] < points["step_s"]).all()
    assert (points["step_s"] < points["high_s"]).all()
    limit = _data(chart, 2)["limit_GiB"].iloc[0]
    assert limit == pytest.approx(search["memory_limit_bytes"].max() / 2**30)
    assert len(_data(C.strategy_chart(search, n=None), 1)) == len(search)
    assert {False, True} <= set(search["fits"])  # the test data has both kinds
    _svg(chart)


def test_pipeline_plan_chart_shows_the_balancer_assignment() -> None:
    model = pk.ModelSpec.preset("llama2-13b")
    par = pk.ParallelConfig(dp=8, pp=2, num_micro_batches=128)
    layers = pk.plan.layers_from_model(model, par, pk.Hardware.preset("ascend-910b"),
                                       static_bytes_per_param=10 / 8 + 2,
                                       activation_model=pk.ActivationModel.mindformers())
    free = pk.plan.balance_pipeline(layers, 2, 1, 128, memory_limit=1e9)
    plan = pk.plan.balance_pipeline(layers, 2, 1, 128,
                                    memory_limit=float(np.mean(free.stage_memory)))
    chart = C.pipeline_plan_chart(plan.assignment)
    data = _data(chart, 0)
    assert len(data) == len(plan.assignment)
    assert data["layers"].sum() == model.num_layers
    per_stage = data.groupby("stage")["layers"].sum()
    assert per_stage.tolist() == plan.layers[0].tolist()
    enc = _encoding(chart, 0)
    assert enc["x"]["field"] == "stage" and enc["y"]["field"] == "row"
    assert enc["color"]["field"] == "layers"
    assert _encoding(chart, 1)["text"]["field"] == "layers"
    _svg(chart)


def test_pipeline_plan_chart_labels_chunks_when_interleaved() -> None:
    frame = pd.DataFrame({"stage": [0, 0, 1, 1], "chunk": [0, 1, 0, 1],
                          "recompute": ["none", "full", "none", "none"],
                          "layers": [2, 1, 2, 2]})
    data = _data(C.pipeline_plan_chart(frame), 0)
    assert sorted(data["row"].unique()) == ["full / chunk 1", "none / chunk 0", "none / chunk 1"]


def test_memory_chart_still_works() -> None:
    frame = pd.DataFrame({"component": ["weights", "activations"], "GiB": [20.0, 10.0],
                          "device_GiB": [64.0, 64.0]})
    _svg(C.memory_chart(frame, title="memory"))


# ----------------------------------------------------------------------------- memory, cluster

def test_memory_timeline_chart_draws_each_series(slow_rank: object) -> None:
    frame = A.memory_timeline(slow_rank, max_points=50)
    chart = C.memory_timeline_chart(frame, value="reserved_bytes")
    data = _data(chart)
    known = frame.dropna(subset=["reserved_bytes"])
    assert len(data) == len(known)
    assert data["GiB"].to_numpy() == pytest.approx(
        known["reserved_bytes"].to_numpy() / 2**30)
    assert data["ms"].to_numpy() == pytest.approx(known["ts_us"].to_numpy() / 1e3)
    assert data["series"].nunique() == len(known.groupby(["rank", "component"]))
    enc = chart.to_dict()["encoding"]
    assert (enc["x"]["field"], enc["y"]["field"], enc["color"]["field"]) == (
        "ms", "GiB", "series")
    _svg(chart)


def test_memory_timeline_axis_spans_the_samples_not_a_rounded_out_range() -> None:
    # a sample 20 µs before the profile's start: the axis must not open at -20 ms (Vega's
    # "nice" rounding does that, -1,000 ms on a long run)
    frame = pd.DataFrame({"series": "a", "ts_us": [-20.0, 100_000.0, 244_000.0],
                          "allocated_bytes": [1.0, 2.0, 3.0]})
    chart = C.memory_timeline_chart(frame, value="allocated_bytes")
    scale = chart.to_dict()["encoding"]["x"]["scale"]
    assert scale == {"nice": False, "zero": False}
    svg = _svg(chart)
    assert ">-20</text>" not in svg and ">−20</text>" not in svg
    assert ">0</text>" in svg and ">240</text>" in svg


def test_slow_ranks_chart_marks_the_slow_rank(slow_rank: object) -> None:
    frame = A.slow_ranks(slow_rank)
    chart = C.slow_ranks_chart(frame)
    data = chart.data
    assert len(data) == len(frame)
    assert set(data.loc[data["slow"] == "slow", "rank"]) == {
        int(r) for r in frame.loc[frame["slow"], "rank"]}
    assert 2 in set(data.loc[data["slow"] == "slow", "rank"])  # the planted fault
    spec = chart.to_dict()
    assert spec["facet"]["column"]["field"] == "metric"
    first = frame.sort_values("check_order")["metric"].iloc[0]
    assert first == "free_us"  # the seed's first check: the step interval
    assert spec["facet"]["column"]["sort"][0] == "free time (device idle)"
    assert "free_us" not in set(data["metric"])  # panels are named in words
    assert spec["spec"]["encoding"]["y"]["field"] == "excess_pct"
    _svg(chart)


def test_recompute_tradeoff_chart_places_each_mode() -> None:
    from perfkit.widgets.prediction import fit_job, recompute_modes

    prof = pk.load("sample:llama2-7b-tp2")
    job = pk.infer_job(prof)
    fit = fit_job(prof, job)
    frame = recompute_modes(fit, job)
    limit = fit.prediction.memory_limit_bytes / 2**30
    chart = C.recompute_tradeoff_chart(frame, memory_limit_GiB=limit)
    points = _data(chart, 0)
    assert list(points["recompute"]) == list(frame["recompute"])
    assert list(points["recompute"])[:3] == ["none", "selective", "full"]
    assert points["memory_GiB"].to_numpy() == pytest.approx(frame["memory_GiB"].to_numpy())
    assert points["step_s"].to_numpy() == pytest.approx(frame["step_s"].to_numpy())
    # full recompute keeps the least activation memory and takes the longest step
    assert points["memory_GiB"].idxmin() == 2 and points["step_s"].idxmax() == 2
    assert _data(chart, 1)["limit_GiB"].iloc[0] == pytest.approx(limit)
    # the modes are named by the colour's legend, once each, not printed beside the points
    assert _encoding(chart, 0)["color"]["field"] == "recompute"
    # the one text layer is the limit's words: a line at 57.6 GiB read as the device's size
    assert [layer["encoding"]["text"]["field"] for layer in chart.to_dict()["layer"]
            if layer["mark"]["type"] == "text"] == ["caption"]
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", _svg(chart))
    for mode in frame["recompute"]:
        assert texts.count(mode) == 1, (mode, texts)
    assert f"usable {limit:,.1f} GiB" in texts
    with pytest.raises(pk.PerfkitError, match="step_s"):
        C.recompute_tradeoff_chart(frame.drop(columns="step_s"))


def test_recompute_tradeoff_names_close_modes_apart_and_whole() -> None:
    """The bundled tuned pipeline's Recompute tab: selective (9.15 GiB, 1.726 s) and its
    own layout, selective with one fully recomputed layer on stage 0 (8.03 GiB, 1.726 s),
    lie a few pixels apart; their names, printed beside the points, covered each other.
    The legend names each once, whole."""
    own = "selective + 1 full layer on stage 0 (the profiled layout)"
    frame = pd.DataFrame({"recompute": ["none", "selective", "full", own],
                          "memory_GiB": [10.8, 9.15, 4.65, 8.03],
                          "step_s": [1.708, 1.726, 2.212, 1.726]})
    svg = _svg(C.recompute_tradeoff_chart(frame, memory_limit_GiB=57.6))
    boxes = [b for b in _text_boxes(svg) if b[0] in set(frame["recompute"])]
    assert sorted(b[0] for b in boxes) == sorted(frame["recompute"])  # each once, whole
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            apart = a[3] <= b[1] or b[3] <= a[1] or a[4] <= b[2] or b[4] <= a[2]
            assert apart, (a, b)


def _text_boxes(svg: str) -> list[tuple[str, float, float, float, float]]:
    """Each text of an SVG anchored at its start, with a lower bound of its box on the
    page, (text, left, top, right, bottom): the translations of its groups added up, the
    font size its height and half the font size per character its width."""
    import xml.etree.ElementTree as ET

    out = []

    def shift(node) -> tuple[float, float]:
        found = re.search(r"translate\(([-\d.e]+)[ ,]([-\d.e]+)\)",
                          node.get("transform", ""))
        return (float(found.group(1)), float(found.group(2))) if found else (0.0, 0.0)

    def walk(node, x0: float, y0: float) -> None:
        dx, dy = shift(node)
        x, y = x0 + dx, y0 + dy
        if node.tag.endswith("text") and node.text and \
                node.get("text-anchor", "start") == "start":
            size = float(re.sub(r"[^\d.]", "", node.get("font-size", "11")) or 11)
            out.append((node.text, x, y - size, x + 0.5 * size * len(node.text), y))
        for child in node:
            walk(child, x, y)

    walk(ET.fromstring(svg), 0.0, 0.0)
    return out


def test_step_breakdown_chart_orders_the_steps_by_number() -> None:
    # step labels are text to the chart: without an explicit order, Vega sorts "10" before
    # "5" (k_resnet50_nw0's steps 5..10 were drawn 10, 5, 6, ...)
    steps = [5, 6, 7, 8, 9, 10]
    frame = pd.DataFrame({"rank": 0, "step": steps, "computing_us": 1000.0,
                          "comm_not_overlapped_us": 0.0, "free_us": 10.0})
    chart = C.step_breakdown_chart(frame)
    want = [str(s) for s in sorted(steps)]
    spec = chart.to_dict()
    for layer in spec["layer"]:
        assert layer["encoding"]["xOffset"]["sort"] == want
    assert list(dict.fromkeys(_data(chart)["step"])) == want
    # a missing step number ("NA") after the numbers
    na = C.step_breakdown_chart(frame.assign(step=pd.array([1, 10, 2, None, 3, 20],
                                                           dtype="Int64")))
    assert na.to_dict()["layer"][0]["encoding"]["xOffset"]["sort"] == \
        ["1", "2", "3", "10", "20", "NA"]



@pytest.mark.shared_samples
def test_the_real_steps_are_drawn_in_their_numeric_order() -> None:
    import gzip
    import json
    import re

    from shared_samples import sample

    path = sample("wild/k_resnet50_nw0")
    (trace,) = path.glob("*.pt.trace.json.gz")
    with gzip.open(trace, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    steps = sorted({int(m.group(1)) for e in events
                    if (m := re.fullmatch(r"ProfilerStep#(\d+)", str(e.get("name", ""))))})
    assert steps[-1] >= 10 > steps[0]  # text order would differ from numeric order
    chart = C.step_breakdown_chart(A.step_breakdown(pk.load(path, progress=False)))
    assert chart.to_dict()["layer"][0]["encoding"]["xOffset"]["sort"] == \
        [str(s) for s in steps]


def test_a_step_part_has_one_colour_in_the_split_bar_and_the_step_chart() -> None:
    """A walk: the legacy step interval was yellow in the Overview's split bar (the wait
    before the step) and grey in its per-rank chart, where grey is idle time."""
    from perfkit.charts.overview import _PART_COLORS
    from perfkit.widgets.headline import _SPLIT_COLORS

    shared = set(_PART_COLORS) & set(_SPLIT_COLORS)
    assert "iteration_interval_us" in shared and "preparing_us" in shared
    assert {p: _PART_COLORS[p] for p in shared} == {p: _SPLIT_COLORS[p] for p in shared}


def test_strategy_chart_axis_keeps_the_points_apart_when_bands_reach_zero(
        search: pd.DataFrame) -> None:
    # a calibration far from the edited job gives bands from 0 to ten times the step:
    # the axis spans the points and the one band end near them, not 0 nor 10 × the step,
    # and a band that does not fit on it gets no bar (the subtitle counts them)
    frame = search.sort_values("step_s", kind="stable").head(20).copy()
    steps = frame["step_s"].to_numpy()
    frame["low_s"], frame["high_s"] = 0.0, steps * 10
    near = steps[0] - 0.5 * (steps.max() - steps.min())  # within one span of the points
    frame.iloc[0, frame.columns.get_loc("low_s")] = near
    chart = C.strategy_chart(frame, n=None, title="t")
    marks = [layer["mark"]["type"] for layer in chart.to_dict()["layer"]]
    assert marks[0] == "point"                                   # no band bar at all
    lo, hi = _encoding(chart, 0)["y"]["scale"]["domain"]
    span = steps.max() - near
    assert lo == pytest.approx(near - 0.05 * span)               # the near band end kept
    assert hi == pytest.approx(steps.max() + 0.05 * span)        # 10 × the step left out
    # every band beyond: the order of the points is not to be trusted, and it says so
    assert chart.to_dict()["title"]["subtitle"].startswith("every band reaches beyond")
    assert "within the model's uncertainty" in chart.to_dict()["title"]["subtitle"]
    frame.iloc[1, frame.columns.get_loc("high_s")] = steps[1] * 1.01
    frame.iloc[1, frame.columns.get_loc("low_s")] = steps[1] * 0.99
    some = C.strategy_chart(frame, n=None, title="t").to_dict()["title"]["subtitle"]
    assert some.startswith("19 bands reaching beyond the axis")
    # bands near their points widen the axis to hold them whole, each with its bar
    frame["low_s"], frame["high_s"] = steps * 0.98, steps * 1.02
    chart = C.strategy_chart(frame, n=None)
    lo, hi = _encoding(chart, 1)["y"]["scale"]["domain"]
    span = steps.max() * 1.02 - steps.min() * 0.98
    assert (lo, hi) == pytest.approx((steps.min() * 0.98 - 0.05 * span,
                                      steps.max() * 1.02 + 0.05 * span))
    assert len(_data(chart, 0)) == 20 and "title" not in chart.to_dict()


def test_strategy_chart_tooltip_names_fields_in_words(search: pd.DataFrame) -> None:
    # a walk read raw field names (micro_batch_size) and could not tell two rows apart
    # that differ only in their optimizer sharding
    tips = {t["field"]: t.get("title") for t in _encoding(C.strategy_chart(search, n=20),
                                                          1)["tooltip"]}
    assert tips["micro_batch_size"] == "micro-batch"
    assert tips["num_micro_batches"] == "micro-batches"
    assert tips["optimizer_shard"] == "optimizer shard"
