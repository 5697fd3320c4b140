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

import json
from pathlib import Path

import pytest
from raw_ascend import csv_rows, union_us
from shared_samples import PT_GPT3_OLD, PT_LEVEL1, sample
from widget_html import panel_html

import perfkit as pk
from perfkit.io.ascend import text as ascend
from perfkit.widgets import tab_panel

pytestmark = pytest.mark.shared_samples
OLD = sample(PT_GPT3_OLD)
LEVEL1 = sample(PT_LEVEL1)
_WEEK_US = 7 * 24 * 3600 * 1e6


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))




def _coverage(out: Path) -> dict[int, tuple[float, float]]:
    """Per step: (time covered by the step's tasks in kernel_details.csv, busy time of
    step_trace_time.csv = Computing + Communication(Not Overlapped)), in µs."""
    tasks = csv_rows(out / "kernel_details.csv")
    got = {}
    for s in csv_rows(out / "step_trace_time.csv"):
        mine = [(float(r["Start Time(us)"]), float(r["Start Time(us)"]) +
                 float(r["Duration(us)"])) for r in tasks if r["Step Id"] == s["Step"]]
        busy = float(s["Computing"]) + float(s["Communication(Not Overlapped)"])
        got[int(s["Step"])] = (union_us(mine), busy)
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
    assert f"{covered / 1000:,.1f} ms of {busy / 1000:,.1f} ms, {100 * covered / busy:.1f} %" \
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
    n_tasks = sum(len(csv_rows(OLD / f"test_rank_{r}" / "ASCEND_PROFILER_OUTPUT" /
                            "kernel_details.csv")) for r in (0, 1))
    top = pk.analysis.top_operators(p, n=None)
    assert top.empty  # no step has its tasks in full: no figure per step
    assert any(f"no step of 1 ({n_tasks} device tasks" in n for n in top.attrs["notes"])
    html = panel_html(tab_panel("Operators", str(OLD)))
    assert "recorded in full" in html and "has no device tasks" not in html
    gaps = pk.analysis.host_bound(p)  # the gaps between 21 tasks are not idle time
    assert gaps.empty


def _epoch_us(info: Path) -> float:
    return json.loads(info.read_text())["end_info"]["collectionTimeEnd"] / 1000.0


def test_a_memory_file_of_another_run_is_left_out_with_a_note():
    rank0 = OLD / "test_rank_0"
    end = _epoch_us(rank0 / "profiler_info_0.json")
    module = csv_rows(rank0 / "ASCEND_PROFILER_OUTPUT" / "npu_module_mem.csv")
    starts = [float(r["Start Time(us)"]) for r in
              csv_rows(rank0 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")]
    assert max(starts) <= end  # the tasks are of the collection
    assert min(float(r["Timestamp(us)"]) for r in module) > end + 300 * 24 * 3600e6
    record = csv_rows(rank0 / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv")

    meta, tables = ascend.parse(rank0)
    memory = tables["memory"]
    assert set(memory["source"]) == {"memory_record"}
    assert len(memory) == len(record)
    app = max(float(r["Total Reserved(MB)"]) for r in record if r["Component"] == "APP")
    peaks = pk.analysis.memory_peaks(pk.load(rank0, cache=False, progress=False))
    got = peaks.loc[peaks["component"] == "APP", "peak_reserved_bytes"].tolist()
    assert got == [pytest.approx(app * 1024 * 1024)]  # 11,224 MiB, not npu_module_mem's
    assert [c for c in ("HCCL", "RUNTIME", "ROS") if c in set(peaks["component"])] == []
    said = [n for n in meta.notes if "npu_module_mem.csv left out" in n]
    assert len(said) == 1 and "another run" in said[0] and "2024-08-26" in said[0]


def test_an_operator_memory_file_of_another_run_is_left_out():
    rank1 = OLD / "test_rank_1"
    end = _epoch_us(rank1 / "profiler_info_1.json")
    allocs = [float(r["Allocation Time(us)"]) for r in
              csv_rows(rank1 / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv")]
    assert allocs and min(allocs) > end + _WEEK_US  # every allocation is of 2024-01-31
    meta, tables = ascend.parse(rank1)
    assert "op_memory" not in tables
    assert any("operator_memory.csv left out" in n and "2024-01-31" in n for n in meta.notes)
    # rank 0's operator_memory.csv is of the run: kept, row for row
    rank0 = OLD / "test_rank_0" / "ASCEND_PROFILER_OUTPUT"
    _, tables0 = ascend.parse(rank0.parent)
    assert len(tables0["op_memory"]) == len(csv_rows(rank0 / "operator_memory.csv"))


def test_covered_time_is_the_union_of_each_steps_tasks() -> None:
    """Two steps, tasks out of order and overlapping: step 1's [0, 10] and [5, 12] cover
    12 µs, its [20, 21] one more; step 2's [100, 104] inside [100, 110] cover 10 µs."""
    import pandas as pd

    from perfkit.io.ascend.recorded import covered_us

    k = pd.DataFrame({"step": [2, 1, 1, 2, 1], "start_us": [100.0, 20.0, 0.0, 100.0, 5.0],
                      "dur_us": [4.0, 1.0, 10.0, 10.0, 7.0],
                      "category": ["compute", "compute", "communication", "compute",
                                   "compute"]})
    got = covered_us(k).set_index("step")
    assert got["covered_us"].to_dict() == {1.0: 13.0, 2.0: 10.0}
    assert got["communication"].to_dict() == {1.0: True, 2.0: False}
