"""A table's header says the basis of its figures, and says nothing that is not a figure.

- :func:`perfkit.tables.table` dropped a column's ``scope`` (what its figures are per)
  whenever the column had a header of its own, which every dashboard table that gave a
  scope also gave: the Collectives' "time (ms)" was summed over ranks and steps, the single
  rank's operators' "device time (ms)" and "calls" were per step, and none said so.
- The Operators tab's AI CPU table showed the analysis' frame whole: ``key`` (the type
  again), ``core`` and ``AI CPU`` (the same on every row, and the title's), the sums over
  ranks and steps beside the per-step figures, all under bare names (``share``, ``per
  step``). It now has the top table's basis and words.

The profiles' figures are read here from the raw files (json, csv).
"""

from __future__ import annotations

import collections
import csv
import json

import pandas as pd
import pytest
from shared_samples import shared_sample
from widget_html import panel_words

from perfkit.tables import table
from perfkit.widgets import tab_panel


def _table_after(text: str, caption: str, first: str) -> tuple[list[str], list[str]]:
    """The header cells and the first row's cells of the table that follows ``caption``,
    whose first row begins with the cell ``first``."""
    cells = [c.strip().removesuffix(" |") for c in
             (text.split(caption, 1)[1] + " ").split(" | ")]
    n = cells.index(first)
    return cells[:n], cells[n:2 * n]


def test_a_header_of_its_own_keeps_the_unit_and_the_scope() -> None:
    frame = pd.DataFrame({"total_us": [2500.0], "count": [3], "share": [0.25],
                          "mean_us": [833.3]})
    shown = table(frame, headers={"total_us": "time", "count": "calls",
                                  "share": "share of x", "mean_us": "mean"},
                  scope={"total_us": "summed over steps", "count": "per step"}).text
    assert list(shown.columns) == ["time (ms, summed over steps)", "calls (per step)",
                                   "share of x (%)", "mean (µs)"]
    # 2500 µs = 2.50 ms, 0.25 = 25.0 %
    assert shown.iloc[0].tolist() == ["2.50", "3", "25.0", "833"]


@pytest.mark.shared_samples
def test_the_collectives_table_says_it_sums_over_ranks_and_steps() -> None:
    root = shared_sample("wild/mi_prof")
    durations = []
    for f in sorted(root.glob("PROF_*/device_*/timeline/msprof_*.json")):
        events = json.loads(f.read_text(encoding="utf-8"))
        hccl = {e["pid"] for e in events if e.get("name") == "process_name"
                and e["args"]["name"] == "HCCL"}
        durations += [float(e["dur"]) for e in events if e.get("ph") == "X"
                      and e["pid"] in hccl and "AllReduce" in e["name"]]
    assert len(durations) == 20  # 2 devices × 10 iterations, one all-reduce each
    text = panel_words(tab_panel("Communication", str(root)))
    heads, row = _table_after(text, "Collectives: time per kind", "allreduce")
    assert heads == ["collective", "calls (summed over ranks and steps)",
                     "time (ms, summed over ranks and steps)", "mean (ms, per call)",
                     "longest (ms)", "ranks"]
    assert row[0] == "allreduce" and int(row[1]) == len(durations)
    assert float(row[2]) == pytest.approx(sum(durations) / 1e3, rel=5e-3)
    assert float(row[3]) == pytest.approx(sum(durations) / len(durations) / 1e3, rel=5e-3)


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
@pytest.mark.shared_samples
def test_the_ai_cpu_table_has_the_top_tables_basis() -> None:
    folder = shared_sample("wild/msa_kernel_details")
    with (folder / "kernel_details.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["Step Id"] for r in rows} == {"1"}  # one step of one rank
    ai_cpu = [r for r in rows if r["Accelerator Core"] == "AI_CPU"]
    assert {r["Type"] for r in ai_cpu} == {"Cast"}
    durs = [float(r["Duration(us)"]) for r in ai_cpu]
    # the share is of the operators' device time, communication tasks (HCCL) left out
    device = sum(float(r["Duration(us)"]) for r in rows if r["Accelerator Core"] != "HCCL")
    example = collections.Counter(r["Name"] for r in ai_cpu).most_common(1)[0][0]
    text = panel_words(tab_panel("Operators", str(folder)))
    heads, row = _table_after(text, "Operators on AI CPU", "Cast")
    assert heads == ["type", "example task", "device time (µs, per rank and step)",
                     "calls (per rank and step)", "mean (µs, per call)", "longest call (µs)",
                     "share of device time (%)"]
    assert row[:2] == ["Cast", example]
    assert float(row[2]) == pytest.approx(sum(durs), rel=5e-3)
    assert int(row[3]) == len(durs) == 7
    assert float(row[4]) == pytest.approx(sum(durs) / len(durs), rel=5e-3)
    assert float(row[5]) == pytest.approx(max(durs), rel=5e-3)
    assert float(row[6]) == round(100 * sum(durs) / device, 1) == 1.6
    # the top table above it says its basis the same way
    top, _ = _table_after(text, "Top 15 by device time", "MatMul")
    assert top == ["type", "category", "device time (ms, per rank and step)",
                   "share of device time (%)", "calls (per rank and step)",
                   "mean (µs, per call)"]
