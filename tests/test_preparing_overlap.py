"""A torch_npu step's Preparing never counts time the previous step's device tasks hold.

An Ascend step table measures Preparing from the framework's step start to the step's
first device task. Where the host starts a step while the device still runs the previous
one, that tail would be in the previous step's device span and in this step's Preparing.

On the real torch_npu samples (text and database export) each rank holds one step, and
the parts of step_trace_time.csv add up to the wall time from the step's start (the
``ProfilerStep#`` of trace_view.json, the ``STEP_TIME`` row of the database) to the end
of its last device task, read here from the raw files: nothing is counted twice there, and
the step breakdown keeps the profiler's Preparing. A made-up two-step profile whose
second step starts on the host 200 µs before the first one's device tasks end shows the
case: its profiler Preparing counted those 200 µs twice (sum of the steps 2,350 µs for a
2,150 µs wall); the breakdown now cuts it at the first step's device end.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from shared_samples import PT_DB_LEVEL1, PT_LEVEL1, sample

import perfkit as pk

_MARKERS = ("PROFILING_ENABLE", "PROFILING_DISABLE")  # zero-length markers, no work


def _csv_row(rank_dir: Path) -> dict[str, float]:
    with (rank_dir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1  # one step per rank: no step before it to overlap
    return {k: float(v) for k, v in rows[0].items()}


def _parts(row: dict[str, float]) -> float:
    """Preparing + Computing + Communication(Not Overlapped) + Free (CSV headers)."""
    return (row["Preparing"] + row["Computing"] + row["Communication(Not Overlapped)"]
            + row["Free"])


#: analysis.db's StepTraceTime columns under the CSV's headers.
_DB_NAMES = {"preparing": "Preparing", "computing": "Computing",
             "communication_not_overlapped": "Communication(Not Overlapped)", "free": "Free"}


def _trace_view_wall(rank_dir: Path) -> tuple[float, float]:
    """(step start, last device task end) in µs, from trace_view.json."""
    events = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    hardware = {e["pid"] for e in events if e.get("ph") == "M"
                and e.get("name") == "process_name"
                and e["args"]["name"] == "Ascend Hardware"}
    steps = [e for e in events if e.get("ph") == "X"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
    assert len(steps) == 1
    start = float(steps[0]["ts"])
    ends = [float(e["ts"]) + float(e["dur"]) for e in events
            if e.get("ph") == "X" and e["pid"] in hardware and e["name"] not in _MARKERS]
    return start, max(ends)


def _db_wall(rank_dir: Path, rank: int) -> tuple[float, float, float]:
    """(step start, first kernel start, last device task end) in µs, from the database."""
    path = rank_dir / "ASCEND_PROFILER_OUTPUT" / f"ascend_pytorch_profiler_{rank}.db"
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as db:
        steps = db.execute("SELECT startNs, endNs FROM STEP_TIME").fetchall()
        assert len(steps) == 1
        names = dict(db.execute("SELECT id, value FROM STRING_IDS"))
        tasks = [(a, b, names.get(t)) for a, b, t in
                 db.execute("SELECT startNs, endNs, taskType FROM TASK")]
    start = steps[0][0]
    work = [(a, b) for a, b, t in tasks if t not in _MARKERS]
    kernels = [a for a, b, t in tasks if str(t).startswith("KERNEL") and a >= start]
    return 0.0, (min(kernels) - start) / 1e3, (max(b for _, b in work) - start) / 1e3


@pytest.mark.shared_samples
def test_the_real_torch_npu_steps_count_no_time_twice() -> None:
    """Text export: per rank, Preparing + Computing + Communication(Not Overlapped) + Free
    of the CSV is the wall from ProfilerStep#50's start to the last device task's end
    (rank 0: 154,483.5 µs), and the breakdown keeps the profiler's Preparing."""
    profile = sample(PT_LEVEL1)
    b = pk.analysis.step_breakdown(pk.load(profile, cache=False, progress=False))
    for rank in (0, 1):
        d = profile / f"rank{rank}_ascend_pt"
        row = _csv_row(d)
        start, end = _trace_view_wall(d)
        assert _parts(row) == pytest.approx(end - start, abs=1.0), rank
        mine = b[b["rank"] == rank]
        assert len(mine) == 1
        assert mine["preparing_us"].iloc[0] == pytest.approx(row["Preparing"], abs=1e-6)
    walls = [_parts(_csv_row(profile / f"rank{r}_ascend_pt")) for r in (0, 1)]
    assert pk.analysis.measured_step_s(b) * 1e6 == pytest.approx(max(walls), abs=1e-3)


@pytest.mark.shared_samples
def test_the_real_torch_npu_database_steps_count_no_time_twice() -> None:
    """Database export: Preparing is STEP_TIME's start to the first kernel, and the parts
    of analysis.db's StepTraceTime end at the last device task (rank 0: 150,289.2 µs)."""
    profile = sample(PT_DB_LEVEL1)
    b = pk.analysis.step_breakdown(pk.load(profile, cache=False, progress=False))
    for rank in (0, 1):
        d = profile / f"rank{rank}_ascend_pt"
        db_path = d / "ASCEND_PROFILER_OUTPUT" / "analysis.db"
        with sqlite3.connect(f"file:{db_path}?mode=ro&immutable=1", uri=True) as db:
            cur = db.execute("SELECT * FROM StepTraceTime")
            rows = cur.fetchall()
            names = [c[0] for c in cur.description]
        assert len(rows) == 1
        row = {_DB_NAMES[k]: float(v) for k, v in zip(names, rows[0], strict=True)
               if k in _DB_NAMES}
        start, first, end = _db_wall(d, rank)
        assert row["Preparing"] == pytest.approx(first - start, abs=1e-3), rank
        assert _parts(row) == pytest.approx(end - start, abs=1e-2), rank
        mine = b[b["rank"] == rank]
        assert mine["preparing_us"].iloc[0] == pytest.approx(row["Preparing"], abs=1e-6)


def _two_steps(preparing2: float) -> SimpleNamespace:
    """One rank, two steps of 1,000 µs of computing: step 1 starts at 0 (its first task at
    100 µs, its last ends at 1,100 µs); step 2's host start is at 900 µs, its first task
    at 1,150 µs, its last ends at 2,150 µs."""
    steps = pd.DataFrame({
        "rank": [0, 0], "step": [1, 2], "computing_us": [1000.0, 1000.0],
        "communication_us": [0.0, 0.0], "comm_not_overlapped_us": [0.0, 0.0],
        "overlapped_us": [0.0, 0.0], "free_us": [0.0, 0.0], "bubble_us": [0.0, 0.0],
        "stage_us": [1000.0, 1000.0], "preparing_us": [100.0, preparing2]})
    kernels = pd.DataFrame({
        "rank": [0, 0, 0, 0], "step": [1, 1, 2, 2], "category": ["compute"] * 4,
        "name": ["MatMul"] * 4, "start_us": [100.0, 600.0, 1150.0, 1650.0],
        "dur_us": [500.0, 500.0, 500.0, 500.0]})
    return SimpleNamespace(steps=steps, kernels=kernels, ops=pd.DataFrame())


def test_a_step_started_before_the_previous_one_ends_counts_its_tail_once() -> None:
    """The profiler's Preparing of step 2 (1,150 − 900 = 250 µs) holds 200 µs of step 1's
    device tasks (900 to 1,100 µs); the steps' walls must add up to the 2,150 µs from
    step 1's start to step 2's last task end, so step 2's Preparing is 50 µs."""
    wall = 2150.0 - 0.0
    b = pk.analysis.step_breakdown(_two_steps(1150.0 - 900.0))
    walls = pk.analysis.step_wall_us(b)
    assert walls.sum() == pytest.approx(wall)
    assert b["preparing_us"].tolist() == pytest.approx([100.0, 1150.0 - 1100.0])
    assert b["preparing_share"].iloc[1] == pytest.approx(50.0 / 1000.0)
    assert any("no time counts in two steps" in n for n in b.attrs.get("notes", []))
    # a step whose host start follows the previous step's device end keeps its Preparing
    kept = pk.analysis.step_breakdown(_two_steps(1150.0 - 1120.0))
    assert kept["preparing_us"].tolist() == pytest.approx([100.0, 30.0])
    assert pk.analysis.step_wall_us(kept).sum() == pytest.approx(wall - 20.0)
