"""The Operators tab of a profile none of whose steps has its device tasks in full.

``ascend/msinsight-pt-gpt3-old`` keeps 21 and 22 tasks of step 2 on its two ranks (16.8 %
and 5.1 % of the step's busy time), and msprof-analyze's ``compute_advice_v2`` 25 tasks of
step 19 (2 % of the ids its stream ran). The tab said "No operators: … no step of 1", as
if the profile had no step; it now shows the operators of the tasks recorded, as totals
(no figure per step: a part of a step is not a step's), naming the steps recorded in part.
Every figure is checked against the raw ``kernel_details.csv`` read with ``csv``
(:mod:`raw_ascend`), each task counted once (:func:`raw_ascend.distinct_tasks`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import pytest
from raw_ascend import csv_rows, distinct_tasks
from shared_samples import PT_GPT3_OLD, shared_sample
from widget_html import panel_words

import perfkit as pk
from perfkit.widgets import tab_panel

pytestmark = pytest.mark.shared_samples
ADVICE_V2 = "ascend/msprof-analyze-tests/compute_advice_v2"
_OUT = "ASCEND_PROFILER_OUTPUT"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def _raw(files: list[Path]) -> tuple[dict[str, float], dict[str, int], set[str]]:
    """(µs per Type, tasks per Type, Step Ids) of the files' distinct tasks with a
    duration."""
    us: dict[str, float] = defaultdict(float)
    n: dict[str, int] = defaultdict(int)
    steps = set()
    for f in files:
        for r in distinct_tasks(csv_rows(f)):
            if (r.get("Duration(us)") or "").strip():
                us[r["Type"]] += float(r["Duration(us)"])
                n[r["Type"]] += 1
                steps.add(r["Step Id"].strip())
    return us, n, steps


def _bars(panel) -> dict[str, float]:
    """The Operators chart's bars: operator -> ms."""
    spec = next(c.chart.to_dict() for c in panel.charts if "by operator type"
                in str(c.chart.to_dict().get("title", "")))
    rows = next(rows for rows in spec["datasets"].values() if rows and "full" in rows[0])
    return {r["full"]: r["ms"] for r in rows}


@pytest.mark.parametrize("name, files, said", [
    (PT_GPT3_OLD, [f"test_rank_{r}/{_OUT}/kernel_details.csv" for r in (0, 1)],
     "step {steps} on ranks 0 and 1"),
    (ADVICE_V2, ["kernel_details.csv"], "step {steps}")])
def test_the_tab_shows_the_tasks_recorded_of_a_step_recorded_in_part(name, files, said):
    root = shared_sample(name)
    us, n, steps = _raw([root / f for f in files])
    assert len(steps) == 1  # one step, recorded only in part
    p = pk.load(root, cache=False, progress=False)
    assert pk.analysis.top_operators(p, n=None).empty  # no figure per step, as before
    top = pk.analysis.top_operators(p, n=None, recorded_only=False).set_index("key")
    assert top["per_step_us"].isna().all() and top["calls_per_step"].isna().all()
    for t in top.index:
        assert top.loc[t, "total_us"] == pytest.approx(us[t], rel=1e-9), t
        assert top.loc[t, "count"] == n[t], t
    assert top["share"].sum() == pytest.approx(1.0)
    panel = tab_panel("Operators", str(root))
    words = panel_words(panel)
    assert "no step of" not in words and "No operators" not in words
    which = said.format(steps=steps.pop())
    tasks = sum(len(distinct_tasks(csv_rows(root / f))) for f in files)
    assert (f"The device tasks of {which} were recorded only in part: totals over the "
            f"{tasks} device tasks recorded, theirs included; no figures per step") in words
    assert f"no step's device tasks were recorded in full (those of {which} only in part)" \
        in words
    bars = _bars(panel)
    assert bars and set(bars) <= set(us)
    for t, ms in bars.items():
        assert ms * 1000 == pytest.approx(us[t], rel=1e-9), t
    # a click on a bar lists its task names over the same tasks
    top_type = max(bars, key=bars.get)
    panel._on_pick([{"full": top_type}])
    detail = panel.detail.value
    assert f"Task names of type {top_type}" in detail and "over the tasks recorded" in detail


def test_attention_share_of_compute_advice_v2_counts_60763_once():
    """Its one renamed copy (``…_varlen``) counted twice made 5 forward passes of 4."""
    root = shared_sample(ADVICE_V2)
    rows = csv_rows(root / "kernel_details.csv")
    fa = [r for r in distinct_tasks(rows) if r["Type"] == "FlashAttentionScore"]
    top = pk.analysis.top_operators(pk.load(root, cache=False, progress=False), n=None,
                                    recorded_only=False).set_index("key")
    assert top.loc["FlashAttentionScore", "count"] == len(fa) == 4
    assert top.loc["FlashAttentionScore", "total_us"] == pytest.approx(
        math.fsum(float(r["Duration(us)"]) for r in fa), rel=1e-12)


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_a_lazy_cluster_gives_the_same_totals(dask_client):
    root = shared_sample(PT_GPT3_OLD)
    us, n, _steps = _raw([root / f"test_rank_{r}" / _OUT / "kernel_details.csv"
                          for r in (0, 1)])
    lazy = pk.load(root, engine="dask", client=dask_client, progress=False)
    assert lazy.lazy
    top = pk.analysis.top_operators(lazy, n=None, recorded_only=False).set_index("key")
    assert len(top) and top["per_step_us"].isna().all()
    for t in top.index:
        assert top.loc[t, "total_us"] == pytest.approx(us[t], rel=1e-9), t
        assert top.loc[t, "count"] == n[t], t
    assert any(s.startswith("the device tasks of step 2 on ranks 0 and 1 were recorded "
                            "only in part: totals over the device tasks recorded")
               for s in top.attrs["notes"]), top.attrs["notes"]


def test_ai_cpu_tasks_of_the_step_recorded_in_part_are_counted_with_the_others():
    root = shared_sample(PT_GPT3_OLD)
    cpu = [r for rank in (0, 1) for r in distinct_tasks(csv_rows(
        root / f"test_rank_{rank}" / _OUT / "kernel_details.csv"))
        if r["Accelerator Core"] == "AI_CPU"]
    assert len(cpu) == 2 and {r["Type"] for r in cpu} == {"Cast"}
    p = pk.load(root, cache=False, progress=False)
    assert pk.analysis.ai_cpu_operators(p).empty  # no step recorded in full, as before
    got = pk.analysis.ai_cpu_operators(p, recorded_only=False)
    (row,) = got.itertuples()
    assert (row.type, row.count) == ("Cast", 2) and math.isnan(row.per_step_us)
    assert row.total_us == pytest.approx(math.fsum(float(r["Duration(us)"]) for r in cpu),
                                         rel=1e-12)
    words = panel_words(tab_panel("Operators", str(root)))
    assert ("Operators on AI CPU type | example task | device time (µs, over the tasks "
            "recorded) | calls (over the tasks recorded)") in words
    assert f"| Cast | {cpu[0]['Name']} |" in words and "AI CPU tasks are left out" not in words


@pytest.mark.shared_samples
def test_a_profile_without_operators_shows_no_controls() -> None:
    """A walk: the legacy cluster (no device task table: its ascend_cluster_analyse and
    step trace files only) showed "No operators" under a group-by, a top-N slider and a
    ranks picker that could change nothing; the Timeline and Memory tabs hide theirs."""
    from shared_samples import sample

    from perfkit.widgets import tab_panel

    folder = sample("ascend/mindinsight-legacy/cluster_propose")
    assert not list(folder.glob("*timeline_display*"))  # no device tasks to read
    panel = tab_panel("Operators", str(folder))
    assert panel.controls.layout.display == "none"
    assert tab_panel("Operators", "sample:slow-rank").controls.layout.display == ""
