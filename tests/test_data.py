"""The bundled data set: every profile in data/ loads, and each scenario shows its fault.

The fault checks use only the canonical tables (what an analysis would see), with rules a
tuning engineer would apply (an outlier against the median of the others, a link far
slower than its group), not numbers copied from the simulator.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from perfkit.io.engines.local import load

DATA = Path(__file__).resolve().parents[1] / "data"
SIM = DATA / "simulated"
SCENARIOS = ["llama2-13b-baseline-dp16", "llama2-13b-tuned-dp8-pp2", "slow-rank", "slow-link",
             "data-stall", "llama2-7b-tp2"]
RANKS = {"llama2-13b-baseline-dp16": 16, "llama2-13b-tuned-dp8-pp2": 16, "slow-rank": 4,
         "slow-link": 4, "data-stall": 4, "llama2-7b-tp2": 2}


@pytest.fixture(scope="module")
def clusters() -> dict[str, object]:
    return {name: load(SIM / name, cache=False) for name in SCENARIOS}


def _step_time(steps: pd.DataFrame) -> pd.Series:
    """Wall time of each step: the slowest rank's span plus its host preparation."""
    return (steps["stage_us"] + steps["bubble_us"] + steps["preparing_us"]).groupby(
        steps["step"]).max()


def test_data_budget_and_readmes() -> None:
    size = sum(f.stat().st_size for f in DATA.rglob("*") if f.is_file())
    assert size <= 30 * 2**20
    assert (DATA / "README.md").is_file()
    for folder in [*DATA.iterdir(), *SIM.iterdir()]:
        if folder.is_dir() and folder.name != "__pycache__":  # data/ is a package (packaging)
            assert (folder / "README.md").is_file(), folder


def test_complete_level1_scenario(clusters: dict) -> None:
    """llama2-7b-tp2 holds what a full Level1 export does, checked against its files."""
    import csv
    import json

    cluster = clusters["llama2-7b-tp2"]
    assert all(p.meta.profiler_level == "Level1" for p in cluster)
    ranks = sorted((SIM / "llama2-7b-tp2").glob("*_ascend_pt"))
    assert len(ranks) == 2
    kernels = []
    for rank in ranks:
        with open(rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
        kernels += rows
        events = json.loads((rank / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
        spans = [e for e in events if e.get("ph") == "X"]
        assert any(e.get("cat") == "cpu_op" for e in spans)  # host operators
        # every kernel is in the timeline too (the other scenarios keep only steps and comm)
        assert {r["Name"] for r in rows} <= {e["name"] for e in spans}
    assert len(cluster.kernels) == len(kernels)
    # PMU counters (aic_metrics=PipeUtilization) on every AI Core kernel
    assert all(r["aic_mac_ratio"] != "" for r in kernels if r["Accelerator Core"] == "AI_CORE")
    k = cluster.kernels
    assert k.loc[k["type"].astype(str).str.startswith("MatMul"), "aic_mac_ratio"].notna().all()
    # two all-reduces per layer and micro-batch, forward and backward (4 layers, 2 mb)
    comm = cluster.comm_ops
    assert (comm.groupby(["rank", "step"]).size() == 4 * 2 * 4).all()


def test_kineto_traces_load() -> None:
    folder = DATA / "kineto-tiny-llama"
    traces = sorted(folder.glob("*.json.gz"))
    assert traces, "run tools/make_kineto_llama.py"
    for trace in traces:
        prof = load(trace, cache=False)
        assert prof.meta.source_format == "kineto"
        ops = prof.ops
        assert len(ops) > 50
        assert ops["name"].str.contains("aten::").any()


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_loads(clusters: dict, name: str) -> None:
    cluster = clusters[name]
    assert cluster.ranks == list(range(RANKS[name]))
    assert not cluster.meta.notes or all("failed" not in n for n in cluster.meta.notes)
    for table in ("kernels", "steps", "comm_ops", "comm_matrix", "memory", "op_memory"):
        assert len(getattr(cluster, table)) > 0, table


def test_slow_rank_is_a_computing_outlier(clusters: dict) -> None:
    steps = clusters["slow-rank"].steps
    per_rank = steps.groupby("rank")["computing_us"].mean()
    slowest = int(per_rank.idxmax())
    others = per_rank.drop(slowest)
    assert slowest == 2
    assert per_rank[slowest] > 1.15 * others.median()
    assert (others / others.median() - 1).abs().max() < 0.03
    # the healthy ranks wait for it inside their collectives
    comm = clusters["slow-rank"].comm_ops
    wait = comm.groupby("rank")["wait_us"].sum()
    assert wait.drop(slowest).min() > 5 * wait[slowest]


def test_slow_link_shows_in_the_matrix(clusters: dict) -> None:
    m = clusters["slow-link"].comm_matrix
    m = m[(m["transport"] != "LOCAL") & m["name"].str.endswith("-total")]
    src = m["src_rank"].fillna(m["src_local"])
    dst = m["dst_rank"].fillna(m["dst_local"])
    slow = m["bandwidth_gbps"] < 0.5 * m["bandwidth_gbps"].median()
    assert slow.any()
    pairs = {frozenset((int(a), int(b))) for a, b in zip(src[slow], dst[slow], strict=True)}
    assert pairs == {frozenset((2, 3))}
    # per rank, the two ends of the link move their gradient data slower than the others
    bw = clusters["slow-link"].comm_bandwidth
    bw = bw[(bw["transport"] == "HCCS") & (bw["size_bytes"] > 0)]
    per_rank = bw.groupby("rank")["bandwidth_gbps"].median()
    assert per_rank[[2, 3]].max() < 0.5 * per_rank[[0, 1]].min()


def test_data_stall_shows_in_preparing(clusters: dict) -> None:
    steps = clusters["data-stall"].steps
    prep = steps.groupby("step")["preparing_us"].min()
    stalled = prep[prep > 50_000].index
    calm = prep[prep < 5_000].index
    assert len(stalled) >= 1 and len(calm) >= 1
    wall = _step_time(steps)
    extra = wall[stalled].mean() - wall[calm].mean()
    assert extra == pytest.approx(prep[stalled].mean() - prep[calm].mean(), rel=0.1)


def test_case_study_configurations(clusters: dict) -> None:
    base, tuned = clusters["llama2-13b-baseline-dp16"], clusters["llama2-13b-tuned-dp8-pp2"]
    # pure data parallel: no pipeline, no bubble; pipeline: every rank waits in receives
    assert (base.steps["bubble_us"] == 0).all()
    assert (tuned.steps["bubble_us"] > 0).all()
    # full recompute runs each layer's attention forward twice per micro-batch; the tuned
    # stage 1 (no fully recomputed layer) runs it once
    k = base.kernels
    fa = k[k["type"] == "FlashAttentionScore"].groupby("rank").size()
    grad = k[k["type"] == "FlashAttentionScoreGrad"].groupby("rank").size()
    assert (fa == 2 * grad).all()
    k = tuned.kernels
    fa = k[k["type"] == "FlashAttentionScore"].groupby("rank").size()
    grad = k[k["type"] == "FlashAttentionScoreGrad"].groupby("rank").size()
    stage1 = [r for r in tuned.ranks if r >= 8]
    assert (fa[stage1] == grad[stage1]).all()
    assert (fa.drop(stage1) > grad.drop(stage1)).all()
    # per device and second the tuned layout runs more tokens (the baseline runs 2
    # sequences per device and step, the tuned one 8 micro-batches of one on two stages)
    base_rate = 16 * 2 * 4096 / (_step_time(base.steps).mean() * 16)
    tuned_rate = 8 * 8 * 4096 / (_step_time(tuned.steps).mean() * 16)
    assert tuned_rate > 1.25 * base_rate
    # the pipeline crosses the nodes, the baseline's gradient reduction does
    assert set(tuned.comm_bandwidth.query("size_bytes > 0")["transport"]) >= {"RDMA", "HCCS"}
