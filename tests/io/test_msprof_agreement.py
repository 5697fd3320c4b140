"""Agreement with msprof-analyze 26.2.0 `cluster -m all` on the real 2-rank Level1 sample.

The fixture (tests/data/msprof_analyze_level1, see its README.md for the exact command) is
that tool's untouched output on ``shared/samples/ascend/msinsight-pt-level1``, which
perfkit reads here independently, from the same place. Per rank, the
step breakdown and the communication totals must agree within 0.1 %.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from shared_samples import PT_LEVEL1, sample

import perfkit as pk
import perfkit.io.engines.local as detect

pytestmark = pytest.mark.shared_samples  # msprof-analyze's input, read from shared
FIXTURE = Path(__file__).resolve().parents[1] / "data" / "msprof_analyze_level1" / \
    "cluster_analysis_output"
REL = 1e-3


@pytest.fixture(scope="module")
def cluster():
    return detect.load(sample(PT_LEVEL1), cache=False, progress=False)


@pytest.fixture(scope="module")
def peer_comm() -> dict:
    data = json.loads((FIXTURE / "cluster_communication.json").read_text())
    ((_, steps),) = data.items()
    return steps


STEP_COLS = {
    "computing_us": "Computing",
    "comm_not_overlapped_us": "Communication(Not Overlapped)",
    "overlapped_us": "Overlapped",
    "communication_us": "Communication",
    "free_us": "Free",
    "stage_us": "Stage",
    "bubble_us": "Bubble",
    "comm_not_overlapped_excl_receive_us": "Communication(Not Overlapped and Exclude Receive)",
    "preparing_us": "Preparing",
}


def test_step_breakdown(cluster):
    with open(FIXTURE / "cluster_step_trace_time.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["Type"] == "rank"]
    assert sorted(int(r["Index"]) for r in rows) == cluster.ranks
    steps = cluster.steps
    for r in rows:
        mine = steps[(steps["rank"] == int(r["Index"])) & (steps["step"] == int(r["Step"]))]
        assert len(mine) == 1
        for col, peer in STEP_COLS.items():
            assert mine[col].iloc[0] == pytest.approx(float(r[peer]), rel=REL, abs=1e-9), col


def test_communication_time_totals(cluster, peer_comm):
    for step_key, ops in peer_comm.items():
        step = int(step_key.removeprefix("step"))
        (total_key,) = [k for k in ops if k.startswith("Total Op Info")]
        for rank_key, info in ops[total_key].items():
            t = info["Communication Time Info"]
            mine = cluster.comm_ops
            mine = mine[(mine["rank"] == int(rank_key)) & (mine["step"] == step)]
            for col, peer in (("elapse_us", "Elapse Time(ms)"), ("transit_us", "Transit Time(ms)"),
                              ("wait_us", "Wait Time(ms)"),
                              ("sync_us", "Synchronization Time(ms)"),
                              ("idle_us", "Idle Time(ms)")):
                assert mine[col].sum() == pytest.approx(t[peer] * 1000, rel=REL), col
            # per-op values too (elapse of each op on this rank)
            for op_key, per_rank in ops.items():
                if op_key == total_key or rank_key not in per_rank:
                    continue
                name = op_key.split("@")[0]
                row = mine[mine["name"] == name]
                peer_elapse = per_rank[rank_key]["Communication Time Info"]["Elapse Time(ms)"]
                assert row["elapse_us"].iloc[0] == pytest.approx(peer_elapse * 1000, rel=REL)


def test_communication_bandwidth_totals(cluster, peer_comm):
    for step_key, ops in peer_comm.items():
        step = int(step_key.removeprefix("step"))
        (total_key,) = [k for k in ops if k.startswith("Total Op Info")]
        for rank_key, info in ops[total_key].items():
            bw = cluster.comm_bandwidth
            bw = bw[(bw["rank"] == int(rank_key)) & (bw["step"] == step)]
            for transport, v in info["Communication Bandwidth Info"].items():
                sel = bw[bw["transport"] == transport]
                size = sel["size_bytes"].sum()
                time = sel["transit_us"].sum()
                assert size == pytest.approx(v["Transit Size(MB)"] * 1e6, rel=REL, abs=1e-6)
                assert time == pytest.approx(v["Transit Time(ms)"] * 1000, rel=REL, abs=1e-6)
                if time > 0:
                    # GB/s = bytes / µs / 1000
                    assert size / time / 1000 == pytest.approx(v["Bandwidth(GB/s)"], rel=REL)


def test_preparing_lies_before_the_device_span_the_step_parts_cover(cluster):
    """Read from the raw rank files with csv: Computing + Communication(Not Overlapped) +
    Free is the span from the step's first device task to its last (kernel_details.csv),
    and Preparing comes before it, so the data-loading stall is a share of both."""
    for rank in cluster.ranks:
        out = sample(PT_LEVEL1) / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        with open(out / "kernel_details.csv", newline="") as fh:
            tasks = list(csv.DictReader(fh))
        start = [float(t["Start Time(us)"].strip()) for t in tasks]
        end = [s + float(t["Duration(us)"]) for s, t in zip(start, tasks, strict=True)]
        with open(out / "step_trace_time.csv", newline="") as fh:
            (row,) = csv.DictReader(fh)
        span = max(end) - min(start)
        parts = sum(float(row[c]) for c in ("Computing", "Communication(Not Overlapped)",
                                            "Free"))
        assert parts == pytest.approx(span, rel=REL)
        preparing = float(row["Preparing"])
        assert preparing > 0
        dl = pk.analysis.data_loading(cluster[rank])
        assert dl["step_us"].iloc[0] == pytest.approx(span, rel=REL)
        assert dl["stall_share"].iloc[0] == pytest.approx(preparing / (span + preparing),
                                                          rel=REL)
