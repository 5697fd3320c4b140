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

A trace_view.json read without its step file (msprof-analyze's excerpt, a level-1 rank's
trace opened alone) takes its steps from the Overlap Analysis tracks; the time from the
``ProfilerStep#`` start to the first task was in no part of the step (the excerpt's step
11,269.9 µs for a 13,885.110 µs wall). It is now the step's Preparing, as torch_npu
writes it, and a made-up two-step trace shows that no time counts twice or in no step.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from shared_samples import PT_DB_LEVEL1, PT_LEVEL1, TRACE_VIEW_EXCERPT, sample

import perfkit as pk
from perfkit.widgets.headline import step_split

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


def _exact_events(path: Path) -> tuple[dict[str, Decimal], list[dict]]:
    """(ProfilerStep# start per name, Overlap Analysis events) of a trace_view.json, with
    ``ts`` and ``dur`` as exact decimals (an epoch µs time in float64 is off by up to
    0.125 µs)."""
    events = json.loads(path.read_text(), parse_float=Decimal)
    events = events["traceEvents"] if isinstance(events, dict) else events
    (ov_pid,) = {e["pid"] for e in events if e.get("ph") == "M"
                 and e.get("name") == "process_name" and e["args"]["name"] == "Overlap Analysis"}
    starts = {e["name"]: Decimal(str(e["ts"])) for e in events if e.get("ph") == "X"
              and str(e.get("name", "")).startswith("ProfilerStep#")}
    tracks = [{"name": e["name"], "ts": Decimal(str(e["ts"])), "dur": Decimal(str(e["dur"]))}
              for e in events if e.get("ph") == "X" and e["pid"] == ov_pid]
    return starts, tracks


@pytest.mark.shared_samples
def test_a_lone_trace_view_counts_the_wait_before_its_first_task() -> None:
    """msprof-analyze's trace_view.json excerpt, opened alone: ProfilerStep#1 starts at
    ...420289.011 µs, its first Overlap Analysis event at ...422904.204 µs and its last one
    ends at ...434174.121 µs. Its steps come from the Overlap Analysis tracks (11,269.9 µs);
    the 2,615.193 µs before the first task were in no part, so the Overview's step was
    11.27 ms for a 13.885 ms wall. Preparing is now those 2,615.193 µs."""
    path = sample(TRACE_VIEW_EXCERPT)
    starts, tracks = _exact_events(path)
    (start,) = starts.values()
    first = min(e["ts"] for e in tracks)
    last = max(e["ts"] + e["dur"] for e in tracks)
    b = pk.analysis.step_breakdown(pk.load(path, cache=False, progress=False))
    assert len(b) == 1
    assert b["preparing_us"].iloc[0] == pytest.approx(float(first - start), abs=1e-3)
    # the parts and the wait add up to the wall: step start to the last event's end
    wall = float(last - start)  # 13,885.110 µs
    assert pk.analysis.step_wall_us(b).iloc[0] == pytest.approx(wall, abs=1e-2)
    assert pk.analysis.measured_step_s(b) * 1e6 == pytest.approx(wall, abs=1e-2)
    # the Overview's split: the wait is 2,615.193 / 13,885.110 = 18.8 % and all add to 100 %
    split = step_split(b).set_index("part")["share"]
    assert split["preparing_us"] == pytest.approx(float(first - start) / wall, abs=1e-6)
    assert split.sum() == pytest.approx(1.0)


@pytest.mark.shared_samples
def test_a_lone_trace_view_has_the_preparing_of_torch_npus_step_file() -> None:
    """The level-1 ranks' trace_view.json opened alone gives the Preparing that torch_npu
    wrote beside it in step_trace_time.csv (first Computing event less ProfilerStep#50's
    start: rank 1, 1736408883709301.270 − 1736408883688868.080 = 20,433.190 µs exactly;
    the CSV says 20,433.25, torch_npu's float64 arithmetic at epoch microseconds)."""
    profile = sample(PT_LEVEL1)
    for rank in (0, 1):
        d = profile / f"rank{rank}_ascend_pt"
        path = d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
        starts, tracks = _exact_events(path)
        first = min(e["ts"] for e in tracks if e["name"] in ("Computing", "Communication"))
        exact = float(first - starts["ProfilerStep#50"])
        b = pk.analysis.step_breakdown(pk.load(path, cache=False, progress=False))
        assert b["preparing_us"].tolist() == pytest.approx([exact], abs=1e-3), rank
        assert exact == pytest.approx(_csv_row(d)["Preparing"], abs=0.125), rank


def _overlap_trace(step2_host_start: float) -> list[dict]:
    """A made-up torch_npu trace_view.json (µs): ProfilerStep#1 from 0, ProfilerStep#2 from
    ``step2_host_start`` to 2,300; Overlap Analysis: Computing 100-1,100 (step 1) and
    1,150-2,150 (step 2), Free 1,100-1,150."""
    ov = [("Computing", 100.0, 1000.0), ("Free", 1100.0, 50.0), ("Computing", 1150.0, 1000.0)]
    tracks = ("Computing", "Communication", "Communication(Not Overlapped)", "Free")
    return [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "Overlap Analysis"}},
        # the four tracks named, two of them without events (no communication: 0)
        *({"ph": "M", "name": "thread_name", "pid": 2, "tid": tid, "args": {"name": n}}
          for tid, n in enumerate(tracks)),
        {"ph": "X", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": "0.000",
         "dur": step2_host_start, "cat": "cpu_op"},
        {"ph": "X", "name": "ProfilerStep#2", "pid": 1, "tid": 1,
         "ts": f"{step2_host_start:.3f}", "dur": 2300.0 - step2_host_start, "cat": "cpu_op"},
        *({"ph": "X", "name": n, "pid": 2, "tid": tracks.index(n), "ts": f"{t:.3f}",
           "dur": d} for n, t, d in ov)]


@pytest.mark.parametrize(("host_start", "free", "preparing"), [
    # step 2 starts on the host at 900, while step 1's device work runs to 1,100: the
    # Free event (1,100-1,150) lies in step 2's span, before its first task, and the wait
    # runs from 1,100, where step 1's events end, not from 900: 1,150 - 1,100 = 50 µs
    # (counted from 900 it would hold 200 µs of step 1's computing a second time)
    (900.0, [0.0, 0.0], [100.0 - 0.0, 1150.0 - 1100.0]),
    # step 2 starts at 1,120: the device idles 1,100-1,120 while the host is still in
    # step 1 (its free time), then waits 1,120-1,150 for step 2's first task
    (1120.0, [1120.0 - 1100.0, 0.0], [100.0, 1150.0 - 1120.0]),
])
def test_a_lone_trace_views_steps_count_no_time_twice(tmp_path: Path, host_start: float,
                                                       free: list[float],
                                                       preparing: list[float]) -> None:
    """The steps' walls add up to the 2,150 µs from ProfilerStep#1's start to the last
    event's end, with no time in two steps and none in no step."""
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(_overlap_trace(host_start)))
    b = pk.analysis.step_breakdown(pk.load(path, cache=False, progress=False))
    assert b["step"].tolist() == [1, 2]
    assert b["computing_us"].tolist() == pytest.approx([1000.0, 1000.0])
    assert b["free_us"].tolist() == pytest.approx(free)
    assert b["preparing_us"].tolist() == pytest.approx(preparing)
    assert pk.analysis.step_wall_us(b).sum() == pytest.approx(2150.0 - 0.0)
