"""The Operators tab's figures per rank and step against the raw files of two real profiles
(read here with csv / json, no perfkit code):

- ``ascend/msinsight-pt-gpt3-old`` (two ranks, one step each): FlashAttentionScore runs on
  rank 0 only. The chart showed the mean over the ranks (10.6 ms) beside a table that
  showed the median over the ranks that run it (21.1 ms, "min over ranks" 21.1 ms too,
  while rank 1 spends nothing on it): one statistic now, the mean, said in both. Its
  kernel lists are cut short against its step trace (``tests/io/test_ascend_partial.py``:
  no step is recorded in full, so the tab shows no figure per step): the copy read here
  leaves step_trace_time.csv out and its Task IDs blank (which show rank 0's list to be
  an excerpt, :mod:`perfkit.io.ascend.excerpt`), so that its tasks are the steps' as far
  as it knows.
- ``wild/mi_run1`` (MindInsight-era MindSpore): the timeline's device operators stop inside
  step 15 of 322; the figures per step were divided by 15 steps, step 15's few tasks
  included, instead of the 14 whose tasks were recorded.
"""

from __future__ import annotations

import csv
import re
import shutil
from collections import defaultdict

import pytest
from raw_ascend import blank_task_ids, csv_rows, task_union_us
from raw_mindspore import mi_run1
from shared_samples import HTA, PT_GPT3_OLD, shared_sample, writable_copy
from widget_html import panel_html

import perfkit as pk
from perfkit.widgets import tab_panel

pytestmark = pytest.mark.shared_samples


def _chart_rows(panel) -> list[dict]:
    """The rows the tab's first chart (the operators' bars) ships to the browser."""
    spec = panel.charts[0].chart.to_dict()
    return spec["datasets"][spec["data"]["name"]]


def _table_cells(html: str, marker: str, key: str) -> dict[str, str]:
    """Header -> cell text of the row of ``key`` in the table whose text has ``marker``."""
    table = next(t for t in re.findall(r"<table.*?</table>", html, flags=re.S) if marker in t)
    heads = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*>.*?</th>", table)]
    row = next(tr for tr in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)
               if f">{key}<" in tr)
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>.*?</td>", row)]
    return dict(zip(heads, cells, strict=True))


def _us(header: str, cell: str) -> float:
    """A table cell in µs (the unit is the header's last word)."""
    unit = {"(µs)": 1.0, "(ms)": 1e3, "(s)": 1e6}[header.rsplit(" ", 1)[1]]
    return float(cell.replace(",", "")) * unit


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_chart_and_table_show_the_same_mean_over_ranks_for_an_operator_some_ranks_run(
        tmp_path):
    folder = writable_copy(shared_sample(PT_GPT3_OLD), tmp_path / "gpt3",
                           ignore=shutil.ignore_patterns("step_trace_time.csv"))
    for rank in (0, 1):  # no Task IDs: nothing tells the list is an excerpt
        blank_task_ids(folder / f"test_rank_{rank}/ASCEND_PROFILER_OUTPUT/kernel_details.csv")
    per_rank: dict[str, dict[int, float]] = defaultdict(dict)
    steps: dict[int, set[str]] = {}
    for rank in (0, 1):
        path = folder / f"test_rank_{rank}/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
        with path.open(newline="", encoding="utf-8") as fh:
            rows = [r for r in csv.DictReader(fh) if r["Accelerator Core"] != "HCCL"]
        steps[rank] = {r["Step Id"] for r in rows}  # the table ranks computation only
        for r in rows:
            per_rank[r["Type"]][rank] = per_rank[r["Type"]].get(rank, 0.0) + \
                float(r["Duration(us)"])
    pairs = sum(len(s) for s in steps.values())
    some = {t: v for t, v in per_rank.items() if len(v) < len(steps)}
    op = max(some, key=lambda t: sum(some[t].values()))
    assert op == "FlashAttentionScore" and set(some[op]) == {0}
    mean = sum(some[op].values()) / pairs  # over every (rank, step) pair: rank 1's is 0
    biggest = max(v / len(steps[r]) for r, v in some[op].items())

    panel = tab_panel("Operators", str(folder))
    chart = next(r for r in _chart_rows(panel) if r["full"] == op)
    assert chart["ms"] * 1e3 == pytest.approx(mean, rel=1e-9)
    html = panel_html(panel)
    cells = _table_cells(html, "over 2 ranks", op)
    head = next(h for h in cells if h.startswith("device time per rank and step"))
    assert _us(head, cells[head]) == pytest.approx(chart["ms"] * 1e3, rel=5e-4)  # one figure
    assert _us(head, cells[head]) == pytest.approx(mean, rel=5e-4)
    # ... and one statistic, named in the chart and in the table
    assert head.startswith("device time per rank and step, mean over ranks")
    spec = panel.charts[0].chart.to_dict()
    assert "mean over ranks" in str(spec["title"])
    assert "mean over ranks" in spec["encoding"]["x"]["title"]
    low = next(h for h in cells if h.startswith("min over ranks"))
    high = next(h for h in cells if h.startswith("max over ranks"))
    assert _us(low, cells[low]) == 0.0  # rank 1 runs none of it
    assert _us(high, cells[high]) == pytest.approx(biggest, rel=5e-4)
    assert cells["slowest rank"] == "0"


def test_figures_per_step_are_over_the_steps_whose_device_tasks_were_recorded():
    folder = shared_sample("wild/mi_run1")
    raw = mi_run1(folder)
    recorded = raw["recorded"]
    assert recorded == list(range(1, 15))  # of 322: the operators stop inside step 15
    windows = [raw["windows"][s] for s in recorded]
    per_type: dict[str, list[float]] = defaultdict(list)
    for e in raw["tasks"]:
        if any(lo <= e["ts"] < hi for lo, hi in windows):
            per_type[e["args"]["type"]].append(e["dur"])
    top = pk.analysis.top_operators(pk.load(folder, cache=False, progress=False), n=None)
    for row in top.head(8).itertuples():
        durs = per_type[row.type]
        assert row.per_step_us == pytest.approx(sum(durs) / len(recorded), rel=1e-6), row.type
        assert row.calls_per_step == pytest.approx(len(durs) / len(recorded)), row.type
    assert any("recorded in full: steps 1–14 of 322" in n for n in top.attrs["notes"])

    panel = tab_panel("Operators", str(folder))
    first = top["type"].iloc[0]
    chart = next(r for r in _chart_rows(panel) if r["full"] == first)
    assert chart["ms"] * 1e3 == pytest.approx(sum(per_type[first]) / len(recorded), rel=1e-6)
    assert "recorded in full: steps 1–14 of 322" in panel_html(panel)  # the page says so


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_ai_cpu_table_says_its_tasks_were_in_a_cut_step(tmp_path):
    # rank 1 without its step trace: nothing says its tasks were cut, so they are the
    # tab's; rank 0's list (its two AI CPU Cast tasks among them) covers 16.8 % of its step
    folder = writable_copy(shared_sample(PT_GPT3_OLD), tmp_path / "gpt3")
    (folder / "test_rank_1" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").unlink()
    out0 = folder / "test_rank_0" / "ASCEND_PROFILER_OUTPUT"
    rows = csv_rows(out0 / "kernel_details.csv")
    (step,) = csv_rows(out0 / "step_trace_time.csv")
    assert task_union_us(rows) < 0.5 * (float(step["Computing"])
                                        + float(step["Communication(Not Overlapped)"]))
    n_cpu = sum(r["Accelerator Core"] == "AI_CPU" for r in rows)
    assert n_cpu == 2 and all(r["Step Id"] for r in rows)
    html = panel_html(tab_panel("Operators", str(folder)))
    assert "Operators on AI CPU</b>: nothing to show (no AI CPU operator among the tasks " \
           f"counted: the profile&#x27;s {n_cpu} AI CPU tasks are left out, {n_cpu} in " \
           "steps whose device tasks were recorded only in part)" in html


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_mean_min_and_max_over_ranks_share_one_unit():
    # HTA's two ranks: each column's unit was fitted alone, so "min over ranks" read
    # 37,566 µs beside a mean of 50.2 ms and a max of 62.7 ms for the embedding kernels
    panel = tab_panel("Operators", str(shared_sample(HTA)))
    table = next(t for t in re.findall(r"<table.*?</table>", panel_html(panel), flags=re.S)
                 if "over 2 ranks" in t)
    heads = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*>.*?</th>", table)]
    mean, low, high = (next(h for h in heads if h.startswith(p)) for p in (
        "device time per rank and step, mean over ranks", "min over ranks", "max over ranks"))
    assert {h.rsplit(" ", 1)[1] for h in (mean, low, high)} == {"(ms)"}
    rows = [r for r in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S) if "<td" in r]
    assert len(rows) >= 10
    for row in rows:
        cells = dict(zip(heads, [re.sub(r"<[^>]+>", "", c)
                                 for c in re.findall(r"<td[^>]*>.*?</td>", row)], strict=True))
        lo, mid, hi = (float(cells[h].replace(",", "")) for h in (low, mean, high))
        assert lo <= mid <= hi, cells  # the numbers as written, in the one unit
