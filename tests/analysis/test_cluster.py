"""Cluster analyses: slow ranks, pipeline stages, data loading, host-bound launch, syncs."""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from shared_samples import (
    CLUSTER_OUTPUT,
    MINDINSIGHT,
    PT_DB_LEVEL1,
    PT_LEVEL1,
    TRACE_VIEW_EXCERPT,
    sample,
    shared_sample,
)

import perfkit as pk
from perfkit.analysis import (
    data_loading,
    host_bound,
    slow_ranks,
    stage_balance,
    stage_imbalance_us,
    sync_points,
)
from perfkit.io.engines.local import load
from perfkit.profile import Cluster, Profile, ProfileMeta


def _steps(computing: float, cno: float = 20.0, free: float = 10.0, steps: int = 2,
           **extra: float) -> pd.DataFrame:
    return pd.DataFrame({"step": list(range(1, steps + 1)), "computing_us": computing,
                         "communication_us": cno + 5.0, "comm_not_overlapped_us": cno,
                         "overlapped_us": 5.0, "free_us": free, **extra})


def _cluster(frames: list[pd.DataFrame], table: str = "steps") -> Cluster:
    profs = [Profile(ProfileMeta("test", rank=r), {table: f}) for r, f in enumerate(frames)]
    return Cluster(profs, ProfileMeta("cluster"))


def test_rank_with_30_percent_more_computing_is_slow() -> None:
    c = _cluster([_steps(100.0), _steps(100.0), _steps(130.0)])
    out = slow_ranks(c)
    slow = out[out["slow"]]
    assert list(slow["rank"]) == [2]
    assert list(slow["metric"]) == ["computing_us"]
    row = slow.iloc[0]
    assert row["excess_pct"] == pytest.approx(30.0)
    assert row["check_order"] == 2
    assert np.isinf(row["z"])  # the other ranks are identical: MAD = 0


def test_slow_rank_with_noise_uses_mad() -> None:
    values = [100.0, 102.0, 98.0, 101.0, 130.0]
    c = _cluster([_steps(v) for v in values])
    out = slow_ranks(c)
    comp = out[out["metric"] == "computing_us"].set_index("rank")
    med = np.median(values)
    mad = np.median(np.abs(np.array(values) - med))
    assert comp.loc[4, "z"] == pytest.approx((130.0 - med) / (1.4826 * mad))
    assert list(out.loc[out["slow"], "rank"]) == [4]


def test_small_differences_are_not_slow() -> None:
    c = _cluster([_steps(100.0), _steps(100.0), _steps(103.0)])  # +3 % < min_excess 5 %
    assert not slow_ranks(c)["slow"].any()


def test_checks_follow_the_seed_order() -> None:
    c = _cluster([_steps(100.0, free=10.0), _steps(100.0, free=10.0), _steps(100.0, free=40.0)])
    out = slow_ranks(c)
    assert list(out["check_order"]) == sorted(out["check_order"])
    assert out.loc[out["slow"], "metric"].tolist() == ["free_us"]


def test_two_ranks_note() -> None:
    out = slow_ranks(_cluster([_steps(100.0), _steps(200.0)]))
    assert not out["slow"].any() and out.attrs["notes"]


def test_slow_ranks_compared_within_their_stage() -> None:
    # stage 1 (ranks 4..7) computes 50 % more by design; rank 6 is slow inside it
    values = [100.0, 101.0, 99.0, 100.0, 150.0, 151.0, 195.0, 149.0]
    c = _cluster([_steps(v) for v in values])
    flat = slow_ranks(c)
    by_stage = slow_ranks(c, stages=[[0, 1, 2, 3], [4, 5, 6, 7]])
    assert set(flat.loc[flat["slow"], "rank"]) == set()       # bimodal: nothing stands out
    comp = by_stage[by_stage["metric"] == "computing_us"].set_index("rank")
    assert list(by_stage.loc[by_stage["slow"], "rank"]) == [6]
    assert comp.loc[6, "median_us"] == pytest.approx(np.median([150.0, 151.0, 195.0, 149.0]))


def test_stage_balance_and_theoretical_bubble() -> None:
    frames = [_steps(100.0, bubble_us=40.0, stage_us=120.0),
              _steps(100.0, bubble_us=40.0, stage_us=120.0),
              _steps(150.0, bubble_us=5.0, stage_us=180.0),
              _steps(150.0, bubble_us=5.0, stage_us=180.0)]
    par = pk.ParallelConfig(dp=2, pp=2, num_micro_batches=8)
    out = stage_balance(_cluster(frames), parallel=par).set_index("stage")
    assert out.loc[0, "ranks"] == "0,1" and out.loc[1, "ranks"] == "2,3"
    assert out.loc[1, "imbalance"] == pytest.approx(180.0 / 120.0 - 1.0)
    assert out.loc[0, "bubble_ratio"] == pytest.approx(40.0 / 120.0)
    assert out.loc[0, "theoretical_bubble"] == pytest.approx((2 - 1) / 8)
    by_list = stage_balance(_cluster(frames), stages=[[0, 1], [2, 3]])
    assert by_list["stage_us"].tolist() == out["stage_us"].tolist()
    # the wait beyond the schedule's bubble, (2 - 1) / 8 of each stage's own work
    assert out.loc[0, "schedule_bubble_us"] == pytest.approx(120.0 / 8)
    assert out.loc[0, "excess_wait_us"] == pytest.approx(40.0 - 120.0 / 8)
    assert out.loc[1, "excess_wait_us"] == 0.0  # 5 µs of wait, 22.5 µs of bubble
    # the imbalance's cost: that wait, at most the spread of own work (180 - 120)
    assert stage_imbalance_us(out) == pytest.approx(40.0 - 120.0 / 8)
    two = stage_balance(_cluster(frames), parallel=pk.ParallelConfig(dp=2, pp=2,
                                                                      num_micro_batches=2))
    assert two["excess_wait_us"].tolist() == [0.0, 0.0]  # 40 < 60, 5 < 90: the schedule's
    assert stage_imbalance_us(two) == 0.0
    # without the schedule the whole wait counts, still at most the spread
    assert stage_imbalance_us(by_list) == pytest.approx(40.0)


def test_stage_balance_unknown_stages() -> None:
    out = stage_balance(_cluster([_steps(1.0)] * 3))
    assert out.empty and out.attrs["notes"]


@pytest.mark.shared_samples
def test_legacy_pipeline_sample_shows_imbalance() -> None:
    """MindInsight's 2-stage sample: the first stage waits on receives far longer. Its
    files give no computing time (their computation_time holds the idle time too)."""
    c = load(sample(MINDINSIGHT) / "cluster_propose", cache=False)
    out = stage_balance(c, stages=[[0, 1], [2, 3]]).set_index("stage")
    assert out["computing_us"].isna().all()
    assert out.loc[1, "imbalance"] > 0.3
    assert out.loc[0, "bubble_us"] > out.loc[1, "bubble_us"]


def test_data_loading_from_host_ops() -> None:
    k = pd.DataFrame({"step": [1, 1], "name": ["a", "b"], "category": "compute",
                      "start_us": [100.0, 150.0], "dur_us": [50.0, 50.0]})
    ops = pd.DataFrame({"step": [1, 1], "name": ["enumerate(DataLoader)#_next", "aten::mm"],
                        "start_us": [0.0, 90.0], "dur_us": [80.0, 5.0]})
    p = Profile(ProfileMeta("test", rank=0), {"kernels": k, "ops": ops})
    row = data_loading(p).iloc[0]
    assert row["dataloader_us"] == pytest.approx(80.0)
    assert row["preparing_us"] == pytest.approx(100.0)   # first task 100 - first op 0
    assert row["step_us"] == pytest.approx(100.0)          # device span 100..200
    assert row["stall_share"] == pytest.approx(100.0 / (100.0 + 100.0))
    assert bool(row["stall"])


def test_the_stall_is_the_devices_wait_not_the_loaders_time() -> None:
    """The loader runs 80 µs from 0, but the device still works on the previous step
    until 50 µs: it waits 50 µs (until its first task at 100), and that is what a faster
    loader wins back."""
    k = pd.DataFrame({"step": [1, 2], "name": ["a", "b"], "category": "compute",
                      "start_us": [-100.0, 100.0], "dur_us": [150.0, 100.0]})
    ops = pd.DataFrame({"step": [1, 2, 2], "name": ["aten::mm", "enumerate(DataLoader)#_next",
                                                    "aten::mm"],
                        "start_us": [-120.0, 0.0, 90.0], "dur_us": [5.0, 80.0, 5.0]})
    p = Profile(ProfileMeta("test", rank=0), {"kernels": k, "ops": ops})
    row = data_loading(p).set_index("step").loc[2]
    assert row["dataloader_us"] == pytest.approx(80.0)
    assert row["preparing_us"] == pytest.approx(100.0 - 50.0)
    assert row["stall_us"] == pytest.approx(50.0)


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
@pytest.mark.shared_samples
def test_the_data_loading_finding_is_the_wait_read_from_the_raw_trace() -> None:
    """PyTorch 1.9's ResNet-50 with num_workers=0: the finding's milliseconds per step are
    the mean over steps of the device's wait before each step's first kernel, read from
    the raw JSON (raw_kineto), not the loader operators' longer host time."""
    from raw_kineto import raw_walls, raw_windows

    import perfkit as pk

    path = shared_sample("wild/k_resnet50_nw0/worker0.1623143089861.pt.trace.json.gz")
    walls = raw_walls(path)
    windows, _spans, _ = raw_windows(path)
    waits = [float(walls[s]) - (float(hi) - float(lo)) for s, (lo, hi, _u) in windows.items()]
    (found,) = [f for f in pk.advise(pk.load(path, cache=False, progress=False))
                if f.rule == "data_loading"]
    assert found.ms_per_step == pytest.approx(np.mean(waits) / 1e3, rel=1e-6)


def test_host_bound_short_gaps() -> None:
    starts = np.arange(0.0, 200.0, 10.0)          # 20 tasks of 2 µs every 10 µs
    k = pd.DataFrame({"step": 1, "name": "Mul", "category": "compute", "start_us": starts,
                      "dur_us": 2.0})
    k = pd.concat([k, pd.DataFrame({"step": [1], "name": ["MatMul"], "category": ["compute"],
                                    "start_us": [5000.0], "dur_us": [100.0]})])
    row = host_bound(Profile(ProfileMeta("test", rank=0), {"kernels": k})).iloc[0]
    span = 5100.0
    assert row["gaps"] == 20
    assert row["launch_gap_us"] == pytest.approx(19 * 8.0)
    assert row["long_gap_us"] == pytest.approx(5000.0 - 192.0)
    assert row["launch_gap_share"] == pytest.approx(19 * 8.0 / span)
    assert not bool(row["host_bound"])


def test_sync_points() -> None:
    ops = pd.DataFrame({"step": [1, 1, 2, 2], "name": ["aten::item", "aten::mm", "aten::item",
                                                     "cudaStreamSynchronize"],
                        "start_us": [0.0, 1.0, 2.0, 3.0], "dur_us": [5.0, 1.0, 7.0, 2.0]})
    out = sync_points(Profile(ProfileMeta("test", rank=0), {"ops": ops})).set_index("name")
    assert out.loc["aten::item", "count"] == 2 and out.loc["aten::item", "host_us"] == 12.0
    assert out.loc["aten::item", "per_step"] == pytest.approx(1.0)
    assert "aten::mm" not in out.index
    # one rank's one step (counted without grouping): every call is in that step
    one = Profile(ProfileMeta("test", rank=0), {"ops": ops.assign(step=3)})
    got = sync_points(one).set_index("name")
    assert got.loc["aten::item", "per_step"] == pytest.approx(2.0)
    assert got.loc["cudaStreamSynchronize", "per_step"] == pytest.approx(1.0)


def test_a_sync_call_inside_another_is_counted_once() -> None:
    # aten::item wraps aten::_local_scalar_dense on its thread: one synchronisation; the
    # same names on another thread, overlapping in time, are another one
    ops = pd.DataFrame({"step": 1, "thread": [1, 1, 2, 2],
                        "name": ["aten::item", "aten::_local_scalar_dense"] * 2,
                        "start_us": [0.0, 2.0, 1.0, 3.0], "dur_us": [10.0, 7.0, 10.0, 7.0]})
    out = sync_points(Profile(ProfileMeta("test", rank=0), {"ops": ops}))
    assert out["name"].tolist() == ["aten::item"]
    assert out["count"].tolist() == [2] and out["host_us"].tolist() == [20.0]


SYNC_NAMES = ("aten::item", "aten::_local_scalar_dense")


def _outermost(calls: list[tuple[int, int, object]]) -> tuple[int, float]:
    """The number and summed duration (µs) of the calls ``(start_ns, end_ns, thread)`` that
    no other call encloses on the same thread."""
    calls = sorted(calls, key=lambda c: (c[0], -c[1]))
    outer: list[tuple[int, int, object]] = []
    for start, end, thread in calls:
        if not any(t == thread and s <= start and end <= e for s, e, t in outer):
            outer.append((start, end, thread))
    assert len(outer) < len(calls)  # the samples nest them
    return len(outer), sum(e - s for s, e, _ in outer) / 1000.0


def _ns(text: object) -> int:
    """Microseconds written as text or a number, as whole nanoseconds (no float rounding:
    the timestamps have 16 digits)."""
    return int(Decimal(str(text)) * 1000)


def _trace_calls(trace: Path) -> list[tuple[int, int, object]]:
    """The synchronising host events of a trace_view.json, read with json alone."""
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    return [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), (e["pid"], e["tid"]))
            for e in events if e.get("ph") == "X" and e.get("name") in SYNC_NAMES]


def _db_calls(db: Path) -> list[tuple[int, int, object]]:
    """The synchronising host calls of a torch_npu database, read with sqlite3 alone."""
    con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        rows = con.execute("SELECT a.startNs, a.endNs, a.globalTid FROM PYTORCH_API a JOIN "
                           "STRING_IDS s ON a.name = s.id WHERE s.value IN (?, ?)",
                           SYNC_NAMES).fetchall()
    finally:
        con.close()
    return [(int(a), int(b), t) for a, b, t in rows]


@pytest.mark.shared_samples
@pytest.mark.parametrize("name", [f"{PT_LEVEL1}/rank0_ascend_pt", f"{PT_LEVEL1}/rank1_ascend_pt",
                                  f"{PT_DB_LEVEL1}/rank1_ascend_pt", TRACE_VIEW_EXCERPT])
def test_sync_points_count_each_real_synchronisation_once(name: str) -> None:
    path = sample(name)
    if path.suffix == ".json":
        calls = _trace_calls(path)
    elif name.startswith(PT_DB_LEVEL1):
        calls = _db_calls(path / "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_1.db")
    else:
        calls = _trace_calls(path / "ASCEND_PROFILER_OUTPUT/trace_view.json")
    count, host_us = _outermost(calls)
    out = sync_points(load(path, cache=False, progress=False))
    assert int(out["count"].sum()) == count  # 27 on each rank of Level1, 45 in the excerpt
    assert float(out["host_us"].sum()) == pytest.approx(host_us, abs=0.01 * count)


def test_a_pipeline_bubble_is_not_exposed_communication_of_its_rank() -> None:
    """Ranks of a later stage wait in pipeline receives: that wait is the stage's bubble
    (stage_balance's), not communication of a rank that its peers lack."""
    frames = [_steps(100.0, cno=20.0, bubble_us=0.0) for _ in range(3)]
    frames += [_steps(100.0, cno=220.0, bubble_us=200.0) for _ in range(3)]
    out = slow_ranks(_cluster(frames))
    comm = out[out["metric"] == "comm_exposed_us"]
    assert comm["value_us"].tolist() == pytest.approx([20.0] * 6)
    assert not out["slow"].any()
    assert "comm_not_overlapped_us" not in set(out["metric"])
    # the earlier name still selects the metric
    assert set(slow_ranks(_cluster(frames), metrics=["comm_not_overlapped_us"])["metric"]) \
        == {"comm_exposed_us"}


@pytest.mark.shared_samples
def test_the_peers_exposed_communication_is_msprof_analyzes_exclude_receive() -> None:
    """The cluster output's ranks 8-15 wait 178-195 ms per step in pipeline receives; their
    exposed communication is msprof-analyze's "Communication(Not Overlapped and Exclude
    Receive)", read here from the CSV: 29-38 ms, below ranks 0-7's 143-161 ms."""
    import csv

    path = sample(CLUSTER_OUTPUT) / "cluster_analysis_output" / "cluster_step_trace_time.csv"
    with open(path, newline="", encoding="utf-8") as fh:
        raw = {int(r["Index"]): float(r["Communication(Not Overlapped and Exclude Receive)"])
               for r in csv.DictReader(fh) if r["Type"] == "rank"}
    out = slow_ranks(load(sample(CLUSTER_OUTPUT), cache=False))
    comm = out[out["metric"] == "comm_exposed_us"].set_index("rank")["value_us"]
    assert comm.to_dict() == pytest.approx(raw, rel=1e-9)
    assert comm.idxmax() == max(raw, key=raw.__getitem__) == 7


@pytest.mark.shared_samples
def test_real_samples_run() -> None:
    c = load(sample(CLUSTER_OUTPUT), cache=False)
    out = slow_ranks(c)
    assert set(out["rank"]) == set(range(16))
    p = load(sample(PT_LEVEL1), cache=False)
    dl = data_loading(p)
    assert dl["dataloader_us"].gt(0).all()   # enumerate(DataLoader) host ops in the trace
    hb = host_bound(p)
    assert (hb["busy_us"] + hb["idle_us"]).tolist() == pytest.approx(hb["span_us"].tolist())


@pytest.mark.shared_samples
def test_host_bound_counts_only_the_steps_whose_device_tasks_were_recorded() -> None:
    """mi_run1: the timeline's device operators stop inside step 15 of 322; steps 16-322
    hold only the step trace's 11 all-reduce phases, whose gaps (about 70 ms a step) were
    once counted as the device idling. The gaps are those of steps 1-14 alone, each equal
    to the gaps between the raw events' union in that step (read with json / csv)."""
    from raw_mindspore import mi_run1, union_gaps

    folder = shared_sample("wild/mi_run1")
    raw = mi_run1(folder)
    hb = host_bound(load(folder, cache=False, progress=False))
    assert list(hb["step"]) == raw["recorded"] == list(range(1, 15))
    assert any("device tasks recorded for steps 1–14 of 322" in n
               for n in hb.attrs.get("notes", []))
    events = raw["tasks"] + raw["phases"]
    for row in hb.itertuples():
        gaps = union_gaps(events, *raw["windows"][row.step])
        assert row.launch_gap_us == pytest.approx(sum(g for g in gaps if g < 1000), rel=1e-6)
        assert row.long_gap_us == pytest.approx(sum(g for g in gaps if g >= 1000), abs=1e-6)
    # the steps left out: only phases, with gaps that are no idle time
    lo, hi = raw["windows"][140]
    assert not [e for e in raw["tasks"] if lo <= e["ts"] < hi]
    assert sum(union_gaps(raw["phases"], lo, hi)) > 50e3
