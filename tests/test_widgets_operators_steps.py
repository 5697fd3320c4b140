"""The Operators tab's figures per rank and step against the raw files of real profiles
(read here with csv / json, no perfkit code):

- ``ascend/msinsight-pt-gpt3-old`` (two ranks, one step each): FlashAttentionScore runs on
  rank 0 only. The chart showed the mean over the ranks (10.6 ms) beside a table that
  showed the median over the ranks that run it (21.1 ms, "min over ranks" 21.1 ms too,
  while rank 1 spends nothing on it): one statistic now, the mean, said in both.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict

import pytest
from shared_samples import PT_GPT3_OLD, shared_sample
from widget_html import panel_html

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


def test_chart_and_table_show_the_same_mean_over_ranks_for_an_operator_some_ranks_run():
    folder = shared_sample(PT_GPT3_OLD)
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

