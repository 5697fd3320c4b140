"""No chart ships more than perfkit.charts.MAX_MARKS data rows to the browser.

Every chart builder is run on every bundled profile the way the dashboard runs it (and on
the raw analysis frames where a builder accepts them), and the rows of the Vega-Lite spec's
data sets are counted.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import pytest

import perfkit as pk
from perfkit import analysis as A
from perfkit import charts as C
from perfkit.widgets import bundled_profiles
from perfkit.widgets.headline import SPLIT_PARTS, with_exposed_comm
from perfkit.widgets.memory_view import default_value, memory_series
from perfkit.widgets.prediction import fit_job, recompute_modes
from perfkit.widgets.summary import memory_breakdown

pytestmark = pytest.mark.slow


def test_chart_marks_counts_the_rows_of_every_data_set() -> None:
    a = pd.DataFrame({"x": range(7), "y": range(7)})
    b = pd.DataFrame({"x": range(3), "y": range(3)})
    chart = alt.layer(alt.Chart(a).mark_point().encode(x="x", y="y"),
                      alt.Chart(b).mark_line().encode(x="x", y="y"))
    assert C.chart_marks(chart) == 10
    assert C.chart_marks(alt.Chart(alt.Data(values=[{"x": 1}, {"x": 2}])).mark_point()
                         .encode(x="x:Q")) == 2


def test_builders_cap_what_they_ship() -> None:
    # 3,000 ranks x 1 step x 3 parts: the slowest ranks are kept under the cap
    steps = pd.DataFrame({"rank": range(3000), "step": 1, "computing_us": 1000.0,
                          "comm_not_overlapped_us": [float(r) for r in range(3000)],
                          "free_us": 1.0})
    chart = C.step_breakdown_chart(steps)
    assert C.chart_marks(chart) <= C.MAX_MARKS
    assert 2999 in set(chart.data["rank"]) and 0 not in set(chart.data["rank"])
    timeline = pd.DataFrame({"rank": 0, "component": "PTA", "ts_us": range(20_000),
                             "reserved_bytes": [float(i % 977) for i in range(20_000)]})
    thin = C.memory_timeline_chart(timeline)
    assert C.chart_marks(thin) <= C.MAX_MARKS
    assert thin.data["B"].max() == 976  # the thinned bins keep their maximum (bytes)


def _charts(name: str) -> dict[str, alt.TopLevelMixin]:
    prof = pk.load(f"sample:{name.rsplit('/', 1)[-1]}")
    job = pk.infer_job(prof)
    out: dict[str, alt.TopLevelMixin] = {}
    steps = A.step_breakdown(prof)
    if not steps.empty:
        out["step_breakdown"] = C.step_breakdown_chart(steps)
        out["step_breakdown (4 parts)"] = C.step_breakdown_chart(
            with_exposed_comm(steps), parts=SPLIT_PARTS, select=True)
    for by in ("type", "name"):
        top = A.top_operators(prof, by=by, n=None)
        if not top.empty:
            out[f"top_operators by {by}"] = C.top_operators_chart(top, label=by, n=40,
                                                                 value="per_step_us")
    findings = C.findings_frame(pk.advise(prof, model=job.model, parallel=job.parallel,
                                          hardware=job.hardware))
    if not findings.empty:
        out["findings"] = C.findings_chart(findings, n=None)
    eff = A.operator_efficiency(prof)
    if not eff.empty and (eff["achieved_tflops"] > 0).any():
        out["roofline"] = C.roofline_chart(eff, bandwidth_gbps=1600)
    timeline = A.memory_timeline(prof, max_points=200)
    if not timeline.empty:
        out["memory_timeline (raw)"] = C.memory_timeline_chart(
            timeline, value=default_value(timeline) or "reserved_bytes")
        value = default_value(timeline)
        if value:
            out["memory_timeline (series)"] = C.memory_timeline_chart(
                memory_series(timeline, value), value=value)
    frame = A.timeline(prof)
    if not frame.empty:
        out["timeline"] = C.timeline_chart(frame)
        out["timeline (categories)"] = C.timeline_chart(A.timeline(prof, lanes="categories"))
    ranks = A.slow_ranks(prof)
    if not ranks.empty:
        out["slow_ranks"] = C.slow_ranks_chart(ranks, select=True)
    if job.model is not None and job.hardware is not None:
        out["memory"] = C.memory_chart(memory_breakdown(job.model, job.hardware,
                                                        job.parallel))
        out["recompute_tradeoff"] = C.recompute_tradeoff_chart(
            recompute_modes(fit_job(prof, job), job))
        par = pk.ParallelConfig(dp=1, pp=2, num_micro_batches=8)
        layers = pk.plan.layers_from_model(job.model, par, job.hardware)
        plan = pk.plan.balance_pipeline(layers, 2, 1, 8, memory_limit=job.hardware.memory_bytes)
        out["pipeline_plan"] = C.pipeline_plan_chart(plan.assignment)
        ranked = pk.plan.search(job.model, job.hardware, job.world_size or 1,
                                job.global_batch_size or 1, include_rejected=True)
        if not ranked.empty:
            out["strategy"] = C.strategy_chart(ranked)
    return out


@pytest.mark.parametrize("name", bundled_profiles())
def test_every_chart_of_every_bundled_profile_stays_under_the_cap(name: str) -> None:
    charts = _charts(name)
    assert charts, name
    for what, chart in charts.items():
        marks = C.chart_marks(chart)
        assert 0 < marks <= C.MAX_MARKS, (name, what, marks)
