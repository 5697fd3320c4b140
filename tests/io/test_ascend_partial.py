"""An Ascend text export whose files do not all describe the run: checked against the raw
files (read here with csv / json, no perfkit code).

``ascend/msinsight-pt-gpt3-old`` is a hand-assembled fixture (its PROVENANCE: "files are
truncated (e.g. 20 kernel rows) ... npu_module_mem is from a 2024 run"):

- its ``kernel_details.csv`` keeps 21 and 22 tasks of step 2, whose busy time
  (``Computing + Communication(Not Overlapped)`` of ``step_trace_time.csv``) is 221.8 ms and
  226.7 ms: the tasks cover 16.8 % and 5.1 % of it. The loader marks the step
  ``tasks_recorded`` False, so the Operators tab's figures per step and the gaps read as
  idle time leave it out, and the notes say so; a full export (``ascend/msinsight-pt-level1``,
  whose tasks cover the busy time to the microsecond) is left as it is;
- rank 0's ``npu_module_mem.csv`` has samples of 2024-08-26 and rank 1's
  ``operator_memory.csv`` allocations of 2024-01-31, while the tasks are of 2023-09-19 and
  ``profiler_info_{rank}.json`` ends the collection that day: files of other runs, left out
  with a note instead of mixed into the memory peaks (rank 0's APP reserve read 25,750 MiB,
  npu_module_mem's, instead of memory_record's 11,224 MiB).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from shared_samples import PT_GPT3_OLD, PT_LEVEL1, sample
from widget_html import panel_html

import perfkit as pk
from perfkit.io import ascend
from perfkit.widgets import tab_panel

pytestmark = pytest.mark.shared_samples
OLD = sample(PT_GPT3_OLD)
LEVEL1 = sample(PT_LEVEL1)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _union_us(intervals: list[tuple[float, float]]) -> float:
    """Time covered by the intervals (overlaps counted once)."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def _coverage(out: Path) -> dict[int, tuple[float, float]]:
    """Per step: (time covered by the step's tasks in kernel_details.csv, busy time of
    step_trace_time.csv = Computing + Communication(Not Overlapped)), in µs."""
    tasks = _rows(out / "kernel_details.csv")
    got = {}
    for s in _rows(out / "step_trace_time.csv"):
        mine = [(float(r["Start Time(us)"]), float(r["Start Time(us)"]) +
                 float(r["Duration(us)"])) for r in tasks if r["Step Id"] == s["Step"]]
        busy = float(s["Computing"]) + float(s["Communication(Not Overlapped)"])
        got[int(s["Step"])] = (_union_us(mine), busy)
    return got


@pytest.mark.parametrize("rank", [0, 1])
def test_a_step_whose_kernel_list_was_cut_short_is_marked_recorded_in_part(rank):
    out = OLD / f"test_rank_{rank}" / "ASCEND_PROFILER_OUTPUT"
    cover = _coverage(out)
    assert list(cover) == [2]
    covered, busy = cover[2]
    assert covered < 0.2 * busy  # the raw files: 37.2 of 221.8 ms, 11.5 of 226.7 ms
    meta, tables = ascend.parse(out.parent)
    steps = tables["steps"]
    assert steps["tasks_recorded"].tolist() == [False]
    said = [n for n in meta.notes if "tasks_recorded" in n]
    assert len(said) == 1 and "kernel_details.csv" in said[0]
    assert f"{covered / 1000:,.1f} ms of {busy / 1000:,.1f} ms, {covered / busy:.1%}" \
        in said[0]


@pytest.mark.parametrize("rank", [0, 1])
def test_a_full_kernel_list_leaves_its_steps_recorded(rank):
    out = LEVEL1 / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    for covered, busy in _coverage(out).values():
        assert covered == pytest.approx(busy, rel=1e-4)  # the same tasks, to the µs
    meta, tables = ascend.parse(out.parent)
    assert "tasks_recorded" not in tables["steps"].columns
    assert not [n for n in meta.notes if "tasks_recorded" in n]


def test_the_operators_tab_does_not_sum_a_cut_list_as_the_step():
    p = pk.load(OLD, cache=False, progress=False)
    n_tasks = sum(len(_rows(OLD / f"test_rank_{r}" / "ASCEND_PROFILER_OUTPUT" /
                            "kernel_details.csv")) for r in (0, 1))
    top = pk.analysis.top_operators(p, n=None)
    assert top.empty  # no step has its tasks in full: no figure per step
    assert any(f"no step of 1 ({n_tasks} device tasks" in n for n in top.attrs["notes"])
    html = panel_html(tab_panel("Operators", str(OLD)))
    assert "recorded in full" in html and "has no device tasks" not in html
    gaps = pk.analysis.host_bound(p)  # the gaps between 21 tasks are not idle time
    assert gaps.empty
