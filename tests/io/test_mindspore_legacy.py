"""Legacy MindSpore / MindInsight files (rank suffixes), checked with the csv/json modules."""

from __future__ import annotations

import csv
import json

import pytest
from shared_samples import MINDINSIGHT, sample

import perfkit.io.detect as detect
from perfkit.profile import Cluster, Profile

pytestmark = pytest.mark.shared_samples  # every test reads the real MindInsight outputs
DATA = sample(MINDINSIGHT)
PROPOSE = DATA / "cluster_propose"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def test_cluster_propose_ranks():
    c = detect.load(PROPOSE, cache=False)
    assert isinstance(c, Cluster)
    assert c.ranks == [0, 1, 2, 3]
    assert c.meta.source_format == "mindspore_legacy"


def test_steps_and_comm_rank0():
    c = detect.load(PROPOSE, ranks=[0], cache=False)
    p = c[0]
    with open(PROPOSE / "ascend_cluster_analyse_pipeline-parallel_2_4_0.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(p.steps) == len(rows)
    assert p.steps["computing_us"].sum() == pytest.approx(
        sum(float(r["computation_time"]) for r in rows) * 1000)
    assert p.steps["bubble_us"].sum() == pytest.approx(
        sum(float(r["receive_alone_time"]) for r in rows) * 1000)
    with open(PROPOSE / "step_trace_raw_0_detail_time.csv") as fh:
        trace = [r for r in csv.DictReader(fh) if r["step_num"].isdigit()
                 and int(r["step_num"]) > 0]
    by_step = p.steps.set_index("step")["total_us"]
    assert [by_step[int(r["step_num"])] for r in trace] == pytest.approx(
        [int(r["total"]) / 100 for r in trace])  # 10 ns ticks
    with open(PROPOSE / "hccl_raw_0.csv") as fh:
        hccl = [r for r in csv.DictReader(fh) if r["step_num"].isdigit()]
    cost = sum(v[1] for r in hccl
               for v in json.loads(r["communication_operator_cost"]).values())
    assert p.comm_ops["elapse_us"].sum() == pytest.approx(cost * 1000)
    assert p.meta.origin_ns is None


def test_single_rank_run_with_timeline():
    p = detect.load(DATA / "run_2_normal_run", cache=False)
    assert isinstance(p, Profile) and p.meta.rank == 1
    events = json.loads((DATA / "run_2_normal_run" / "profiler" /
                         "ascend_timeline_display_1.json").read_text())
    assert len(p.kernels) == sum(e.get("ph") == "X" for e in events)
    assert any("computation_time" in n for n in p.meta.notes)


def test_aggregate_only_files_are_recognised(tmp_path):
    import shutil

    src = DATA / "run_2_normal_run" / "profiler"
    user = tmp_path / "profiler"
    user.mkdir()
    for name in ("minddata_pipeline_raw_1.csv", "device_queue_profiling_1.txt",
                 "aicore_intermediate_1_type.csv", "aicore_intermediate_1_detail.csv"):
        shutil.copy(src / name, user)
    p = detect.load(user, cache=False)
    assert isinstance(p, Profile) and p.meta.rank == 1
    assert p.meta.source_format == "mindspore_legacy"
    assert "minddata_pipeline_raw_1.csv" in p.meta.extra["files"]
    assert any("aggregate" in n for n in p.meta.notes)
    assert len(p.kernels) == 0 and len(p.steps) == 0
