"""Communication analyses: per-type summary, bandwidth vs nominal, slow links, overlap."""

from __future__ import annotations

import csv

import numpy as np
import pandas as pd
import pytest
from shared_samples import (
    CLUSTER_OUTPUT,
    HTA,
    MINDINSIGHT,
    PT_GPT3_OLD,
    PT_LEVEL1,
    sample,
    shared_sample,
)

import perfkit as pk
from perfkit.analysis import comm_bandwidth_summary, comm_overlap, comm_summary, slow_links
from perfkit.analysis.communication import COMM_SUMMARY_COLUMNS, comm_op_type, comm_tasks
from perfkit.io.engines.local import load
from perfkit.profile import Cluster, Profile, ProfileMeta


def _profile(rank: int = 0, **tables: pd.DataFrame) -> Profile:
    return Profile(ProfileMeta("test", rank=rank), tables)


def test_op_type_across_vendors() -> None:
    names = pd.Series(["hcom_allReduce__586_0_1", "ncclDevKernel_AllGather_RING_LL",
                       "ReduceScatter-op12", "hcom_receive__1", "hcom_send__2",
                       "ncclKernel_SendRecv_RING_SIMPLE", "hcom_broadcast__483_0", "weird"])
    assert list(comm_op_type(names)) == ["allreduce", "allgather", "reducescatter", "receive",
                                         "send", "sendrecv", "broadcast", "other"]


def test_summary_shares() -> None:
    ops = pd.DataFrame({
        "step": 1, "group": ["g1", "g1", "g2"],
        "name": ["hcom_allReduce__1", "hcom_allReduce__2", "hcom_allGather__3"],
        "elapse_us": [100.0, 300.0, 50.0], "transit_us": [60.0, 100.0, 50.0],
        "wait_us": [30.0, 150.0, 0.0], "sync_us": [10.0, 50.0, 0.0],
        "idle_us": [10.0, 50.0, 0.0]})
    out = comm_summary(_profile(comm_ops=ops))
    assert list(out.columns) == list(COMM_SUMMARY_COLUMNS)
    ar = out.set_index("op_type").loc["allreduce"]
    assert ar["count"] == 2 and ar["total_us"] == pytest.approx(400.0)
    assert ar["transit_share"] == pytest.approx(160 / 400)
    assert ar["wait_share"] == pytest.approx(180 / 400)
    assert out["op_type"].iloc[0] == "allreduce"  # sorted by total


def test_summary_without_split_stays_na() -> None:
    ops = pd.DataFrame({"step": 1, "name": ["ncclKernel_AllReduce_RING"], "elapse_us": [5.0]})
    row = comm_summary(_profile(comm_ops=ops)).iloc[0]
    assert row["total_us"] == 5.0 and np.isnan(row["wait_share"])


def test_bandwidth_against_nominal() -> None:
    bw = pd.DataFrame({"name": ["a", "b", "c", "a"], "transport": ["HCCS", "HCCS", "RDMA", "LOCAL"],
                       "size_bytes": [4e9, 2e9, 1e9, 9e9], "transit_us": [1e5, 1e5, 1e5, 1.0],
                       "bandwidth_gbps": np.nan})
    hw = pk.Hardware.preset("ascend-910b")
    out = comm_bandwidth_summary(_profile(comm_bandwidth=bw), hw).set_index("transport")
    assert "LOCAL" not in out.index
    assert out.loc["HCCS", "bandwidth_gbps"] == pytest.approx(6e9 / 2e5 / 1e3)  # 30 GB/s
    # HCCS is a full mesh of 8 NPUs: a transit time is one link's, held against one of 7
    assert out.loc["HCCS", "nominal_gbps"] == pytest.approx(hw.intra_node_bandwidth / 7 / 1e9)
    assert out.loc["HCCS", "nominal_of"] == "one of 7 HCCS links"
    assert out.loc["RDMA", "efficiency"] == pytest.approx(10.0 / (hw.inter_node_bandwidth / 1e9))
    assert out.loc["RDMA", "nominal_of"] == "per device"
    # NVLink behind NVSwitch: one transfer can use every link, the device's figure
    gpu = comm_bandwidth_summary(_profile(comm_bandwidth=bw.assign(transport="NVLINK")),
                                 pk.Hardware.preset("h100")).set_index("transport")
    assert gpu.loc["NVLINK", "nominal_gbps"] == pytest.approx(450.0)


def test_slow_link_flagged_from_matrix() -> None:
    src = [0, 1, 2, 3, 4, 5, 6, 7]
    dst = [1, 2, 3, 4, 5, 6, 7, 0]
    bw = [20.0, 20.5, 19.5, 20.2, 19.8, 20.1, 6.0, 20.0]     # link 6 -> 7 at 30 %
    size = 1e8
    m = pd.DataFrame({"group": "g", "name": "allreduce-total", "src_rank": src,
                      "dst_rank": dst, "transport": "HCCS", "size_bytes": size,
                      "time_us": [size / (b * 1e3) for b in bw], "bandwidth_gbps": bw})
    out = slow_links(_profile(comm_matrix=m))
    slow = out[out["slow"]]
    assert list(zip(slow["src_rank"], slow["dst_rank"], strict=True)) == [(6, 7)]
    assert slow["bandwidth_gbps"].iloc[0] == pytest.approx(6.0)
    assert slow["median_gbps"].iloc[0] == pytest.approx(np.median(bw))


def test_small_links_are_not_bandwidth() -> None:
    m = pd.DataFrame({"group": "g", "name": "x-total", "src_rank": [0, 1, 2],
                      "dst_rank": [1, 2, 0], "transport": "HCCS", "size_bytes": 100.0,
                      "time_us": [1.0, 1.0, 100.0], "bandwidth_gbps": np.nan})
    out = slow_links(_profile(comm_matrix=m))
    assert out.empty and out.attrs["notes"]


def test_overlap_per_rank() -> None:
    def steps(cno: float) -> pd.DataFrame:
        return pd.DataFrame({"step": [1], "computing_us": [70.0], "communication_us": [40.0],
                             "comm_not_overlapped_us": [cno], "overlapped_us": [40.0 - cno],
                             "free_us": [30.0 - cno]})
    c = Cluster([_profile(0, steps=steps(10.0)), _profile(1, steps=steps(20.0))],
                ProfileMeta("cluster"))
    out = comm_overlap(c).set_index("rank")
    assert out.loc[0, "overlap_share"] == pytest.approx(30 / 40)
    assert out.loc[1, "exposed_share"] == pytest.approx(20 / 100)


def test_the_exposed_communication_leaves_the_pipeline_bubble_out() -> None:
    """A later pipeline stage's receive wait (the bubble) is part of the profiler's
    not-overlapped communication; the exposed figure is the rest, as on the Overview."""
    steps = pd.DataFrame({"step": [1, 2], "computing_us": [70.0, 70.0],
                          "communication_us": [60.0, 60.0],
                          "comm_not_overlapped_us": [50.0, 40.0],
                          "overlapped_us": [10.0, 20.0], "free_us": [30.0, 40.0],
                          "bubble_us": [35.0, 25.0]})
    out = comm_overlap(_profile(0, steps=steps)).set_index("rank")
    assert out.loc[0, "comm_not_overlapped_us"] == pytest.approx(45.0)  # kept, as read
    assert out.loc[0, "bubble_us"] == pytest.approx(30.0)
    assert out.loc[0, "comm_exposed_us"] == pytest.approx(15.0)
    assert out.loc[0, "exposed_share"] == pytest.approx(15.0 / 150.0)
    assert out.loc[0, "bubble_share"] == pytest.approx(30.0 / 150.0)
    # no bubble recorded (a Kineto trace): nothing is taken out
    out = comm_overlap(_profile(0, steps=steps.drop(columns="bubble_us"))).set_index("rank")
    assert out.loc[0, "comm_exposed_us"] == pytest.approx(45.0)
    assert np.isnan(out.loc[0, "bubble_us"])


def _rank_rows(path) -> dict[int, dict[str, float]]:
    """The rank rows of msprof-analyze's cluster_step_trace_time.csv, read here."""
    with open(path, newline="", encoding="utf-8") as fh:
        return {int(r["Index"]): {k: float(v) for k, v in r.items()
                                  if k not in ("Step", "Type", "Index")}
                for r in csv.DictReader(fh) if r["Type"] == "rank"}


@pytest.mark.shared_samples
def test_the_cluster_outputs_exposed_communication_is_msprof_analyzes_exclude_receive() -> None:
    """msprof-analyze writes the exposed communication without the receive wait in its own
    column, "Communication(Not Overlapped and Exclude Receive)": comm_overlap's figure is
    that column on every rank (rank 11: 36.2 ms, not the 231.7 ms that hold its 195.5 ms
    bubble), and its share is of the step Computing + Communication(Not Overlapped) +
    Free."""
    folder = sample(CLUSTER_OUTPUT) / "cluster_analysis_output"
    raw = _rank_rows(folder / "cluster_step_trace_time.csv")
    out = comm_overlap(load(folder, cache=False)).set_index("rank")
    assert sorted(out.index) == sorted(raw)
    for rank, r in raw.items():
        step = r["Computing"] + r["Communication(Not Overlapped)"] + r["Free"]
        exposed = r["Communication(Not Overlapped and Exclude Receive)"]
        assert out.loc[rank, "comm_exposed_us"] == pytest.approx(exposed, rel=1e-9)
        assert out.loc[rank, "bubble_us"] == pytest.approx(r["Bubble"], rel=1e-9)
        assert out.loc[rank, "comm_not_overlapped_us"] == pytest.approx(
            r["Communication(Not Overlapped)"], rel=1e-9)
        assert out.loc[rank, "exposed_share"] == pytest.approx(exposed / step, rel=1e-9)
    assert out.loc[11, "comm_exposed_us"] == pytest.approx(36_199.92, abs=0.01)
    assert out["comm_exposed_us"].idxmin() == 12  # the advisor's rank that waits for no one


@pytest.mark.shared_samples
def test_a_mindinsight_pipeline_runs_exposed_communication_is_its_collective_alone_time() -> None:
    """Legacy MindSpore records no total communication, only the time communication runs
    alone, split into the receive wait and collectives: the overlap is not measured, the
    exposed communication is the collectives' alone time (mean over each rank's steps),
    never "not measured" for collectives that the step table does count."""
    folder = sample(MINDINSIGHT) / "cluster_propose"
    out = comm_overlap(load(folder, cache=False)).set_index("rank")
    assert not out.empty
    for rank in out.index:
        path = folder / f"ascend_cluster_analyse_pipeline-parallel_2_4_{rank}.csv"
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))[:-1]  # the last row is MindSpore's mean
        alone = np.mean([float(r["collective_communication_alone_time"]) for r in rows])
        receive = np.mean([float(r["receive_alone_time"]) for r in rows])
        assert out.loc[rank, "comm_exposed_us"] == pytest.approx(alone * 1e3, rel=1e-6)
        assert out.loc[rank, "bubble_us"] == pytest.approx(receive * 1e3, rel=1e-6)
    assert out["overlap_share"].isna().all()  # no total communication: not measured


def test_the_exposed_share_is_of_the_step_time_the_headline_shows() -> None:
    """A rank that waits 25 µs for data before the first of its two 100 µs device spans:
    its steps last 125 and 100 µs, and its 20 µs of exposed communication per step is a
    share of their mean, 112.5 µs (the headline's split counts the same wait as a part
    of the step)."""
    steps = pd.DataFrame({"step": [1, 2], "computing_us": [70.0, 70.0],
                          "communication_us": [40.0, 40.0],
                          "comm_not_overlapped_us": [20.0, 20.0],
                          "overlapped_us": [20.0, 20.0], "free_us": [10.0, 10.0],
                          "preparing_us": [25.0, np.nan]})  # NaN: no wait measured
    out = comm_overlap(_profile(0, steps=steps)).set_index("rank")
    assert out.loc[0, "step_wall_us"] == pytest.approx((125 + 100) / 2)
    assert out.loc[0, "exposed_share"] == pytest.approx(20 / 112.5)


@pytest.mark.shared_samples
def test_real_samples() -> None:
    prof = load(sample(PT_LEVEL1), cache=False)
    ops = prof.comm_ops
    out = comm_summary(prof)
    assert out["total_us"].sum() == pytest.approx(ops["elapse_us"].sum())
    assert out["count"].sum() == len(ops)
    assert not comm_bandwidth_summary(prof).empty
    links = slow_links(prof)  # 2 of 8 ranks: only local ranks known
    assert (links["rank_space"] == "local").all() and not links["slow"].any()
    gpu = load(sample(HTA), cache=False)
    assert comm_summary(gpu)["wait_share"].isna().all()  # NCCL kernels carry no split
    assert comm_bandwidth_summary(gpu).empty


def test_absent_tables() -> None:
    p = _profile()
    for fn in (comm_summary, comm_bandwidth_summary, slow_links, comm_overlap):
        out = fn(p)
        assert out.empty and out.attrs["notes"]


@pytest.mark.shared_samples
def test_each_link_is_listed_once_with_the_sum_of_its_operations() -> None:
    """gpt3-old's communication_matrix.json closes each step with a "Total Op Info" entry
    (the sum of the step's operations): read as an operation, rank 1 -> 7 (180 MiB,
    10.6 ms) and every other link were listed twice."""
    import json
    from collections import Counter

    root = sample(PT_GPT3_OLD)
    want: dict[tuple[str, str, int, int], list[float]] = {}
    for rank in (0, 1):
        path = root / f"test_rank_{rank}/ASCEND_PROFILER_OUTPUT/communication_matrix.json"
        for step in json.loads(path.read_text()).values():
            for ops in step.values():
                for key, op in ops.items():
                    if key == "Total Op Info":
                        continue
                    for link, v in op.items():
                        src, dst = (int(x) for x in link.split("-"))
                        if v["Transport Type"] == "LOCAL" or not v["Transit Time(ms)"] > 0:
                            continue
                        got = want.setdefault((v["Transport Type"], key.split("@")[1], src,
                                               dst), [0.0, 0.0])
                        got[0] += v["Transit Size(MB)"] * 1e6
                        got[1] += v["Transit Time(ms)"] * 1000
    want = {k: v for k, v in want.items() if v[0] >= 1e6}  # slow_links' min_bytes
    links = slow_links(load(root, cache=False, progress=False))
    assert len(links) == len(want)
    # a pair of local ranks is listed once per communication group it is a link of (RDMA
    # 0 -> 1 is in two groups here: two different links)
    per_group = Counter(k[:1] + k[2:] for k in want)
    listed = Counter(zip(links["transport"], links["src_rank"].astype(int),
                         links["dst_rank"].astype(int), strict=True))
    assert listed == per_group
    hccs_1_7 = [v for k, v in want.items() if k[0] == "HCCS" and k[2:] == (1, 7)]
    assert len(hccs_1_7) == 1
    row = links[(links["transport"] == "HCCS") & (links["src_rank"] == 1)
                & (links["dst_rank"] == 7)]
    assert len(row) == 1
    assert row["size_bytes"].iloc[0] == pytest.approx(hccs_1_7[0][0])
    assert row["time_us"].iloc[0] == pytest.approx(hccs_1_7[0][1])


def _raw_links(root) -> dict[tuple[str, str, int, int], list[float]]:
    """gpt3-old's communication_matrix.json read with json: (transport, group, local source,
    local destination) -> [bytes, µs] summed over the operations (not "Total Op Info",
    not LOCAL, not the links under slow_links' 1 MB)."""
    import json

    out: dict[tuple[str, str, int, int], list[float]] = {}
    for rank in (0, 1):
        path = root / f"test_rank_{rank}/ASCEND_PROFILER_OUTPUT/communication_matrix.json"
        for step in json.loads(path.read_text()).values():
            for ops in step.values():
                for key, op in ops.items():
                    if key == "Total Op Info":
                        continue
                    for link, v in op.items():
                        if v["Transport Type"] == "LOCAL" or not v["Transit Time(ms)"] > 0:
                            continue
                        src, dst = (int(x) for x in link.split("-"))
                        got = out.setdefault((v["Transport Type"], key.split("@")[1], src,
                                              dst), [0.0, 0.0])
                        got[0] += v["Transit Size(MB)"] * 1e6
                        got[1] += v["Transit Time(ms)"] * 1000
    return {k: v for k, v in out.items() if v[0] >= 1e6}


@pytest.mark.shared_samples
def test_a_link_of_local_ranks_names_its_communication_group() -> None:
    """RDMA local 0 -> 1 is a link of two 2-rank groups in gpt3-old's matrices (rank 0's
    file: hcom_allReduce__459_0@10471851537367425459; rank 1's: hcom_allReduce__303_0@
    368314942532213303): two pairs of devices, listed as two rows that looked alike.
    Each row now carries its group, and its sums are those of that group's operations."""
    want = _raw_links(sample(PT_GPT3_OLD))
    rdma = sorted(k[1] for k in want if k[0] == "RDMA" and k[2:] == (0, 1))
    assert len(rdma) == 2  # two groups, two links
    links = slow_links(load(sample(PT_GPT3_OLD), cache=False, progress=False))
    got = {(t, g, int(s), int(d)): [b, us] for t, g, s, d, b, us in zip(
        links["transport"], links["group"], links["src_rank"], links["dst_rank"],
        links["size_bytes"], links["time_us"], strict=True)}
    assert set(got) == set(want)
    for key, (size, time) in want.items():
        assert got[key] == pytest.approx([size, time], rel=1e-9), key


@pytest.mark.shared_samples
def test_a_link_of_local_ranks_names_the_rank_whose_file_recorded_it() -> None:
    """gpt3-old's matrices know only group-local ranks and no group's rank list, so a link
    cannot be put on global ranks; the rank whose communication_matrix.json recorded it is
    known (test_rank_<r>), and it is what ties the link to a global rank: RDMA local 0 -> 1
    of group 368314942532213303 was recorded by rank 1, not rank 0."""
    import json

    root = sample(PT_GPT3_OLD)
    want: dict[tuple[str, str, int, int, int], list[float]] = {}
    for rank in (0, 1):
        path = root / f"test_rank_{rank}/ASCEND_PROFILER_OUTPUT/communication_matrix.json"
        for step in json.loads(path.read_text()).values():
            for ops in step.values():
                for key, op in ops.items():
                    if key == "Total Op Info":
                        continue
                    for link, v in op.items():
                        if v["Transport Type"] == "LOCAL" or not v["Transit Time(ms)"] > 0:
                            continue
                        src, dst = (int(x) for x in link.split("-"))
                        got = want.setdefault((v["Transport Type"], key.split("@")[1], rank,
                                               src, dst), [0.0, 0.0])
                        got[0] += v["Transit Size(MB)"] * 1e6
                        got[1] += v["Transit Time(ms)"] * 1000
    want = {k: v for k, v in want.items() if v[0] >= 1e6}  # slow_links' min_bytes
    assert want[("RDMA", "368314942532213303", 1, 0, 1)][0] == pytest.approx(131072000.0)
    links = slow_links(load(root, cache=False, progress=False))
    assert (links["rank_space"] == "local").all()
    got = {(t, g, int(r), int(s), int(d)): [b, us] for t, g, r, s, d, b, us in zip(
        links["transport"], links["group"], links["recorded_by"], links["src_rank"],
        links["dst_rank"], links["size_bytes"], links["time_us"], strict=True)}
    assert set(got) == set(want)
    for key, (size, time) in want.items():
        assert got[key] == pytest.approx([size, time], rel=1e-9), key


def test_links_are_on_global_ranks_where_their_group_is_mapped_and_local_elsewhere() -> None:
    """A cluster whose matrix has one group with a known rank list (ranks 4 and 6 are its
    two members, both loaded) and one without (an 8-rank group of which only two members
    are loaded): the first group's links are on global ranks, the second's on local ranks
    with their group and recording rank. Before, one mapped group made every link count as
    global: the unmapped links, NA ranks, were summed into one link of no ranks."""
    def prof(rank: int, me: int) -> Profile:
        ops = pd.DataFrame({"group": ["pair", "g8"], "name": ["allreduce", "allgather"],
                            "elapse_us": [1.0, 1.0]})
        mx = pd.DataFrame({  # each rank records its links from its own local rank
            "group": ["pair", "g8", "g8"], "name": ["allreduce-top1", "allgather-top1",
                                                    "allgather-top1"],
            "transport": ["HCCS"] * 3, "src_local": [float(me)] * 3,
            "dst_local": [float(1 - me), 5.0, 7.0],
            "size_bytes": [8e6, 4e6 * (me + 1), 2e6], "time_us": [400.0, 100.0, 50.0 + me]})
        return Profile(ProfileMeta("test", rank=rank, origin_ns=0),
                       {"comm_ops": ops, "comm_matrix": mx})

    c = Cluster([prof(4, 0), prof(6, 1)], ProfileMeta("cluster", origin_ns=0))
    links = slow_links(c)
    rows = {(r.rank_space, None if pd.isna(r.group) else r.group,
             None if pd.isna(r.recorded_by) else int(r.recorded_by), int(r.src_rank),
             int(r.dst_rank)): (r.size_bytes, r.time_us) for r in links.itertuples()}
    assert rows == {
        ("global", None, None, 4, 6): (8e6, 400.0),  # rank 4 = local 0 of "pair"
        ("global", None, None, 6, 4): (8e6, 400.0),
        ("local", "g8", 4, 0, 5): (4e6, 100.0),
        ("local", "g8", 4, 0, 7): (2e6, 50.0),
        ("local", "g8", 6, 1, 5): (8e6, 100.0),
        ("local", "g8", 6, 1, 7): (2e6, 51.0),
    }
    assert any("4 of 6 links" in n for n in links.attrs["notes"])


def test_a_profile_without_comm_ops_is_summed_from_its_communication_tasks() -> None:
    """A lone kernel table (no communication.json) still records its collectives as
    device tasks of category ``communication``: they are the collectives, never "none"."""
    kernels = pd.DataFrame({
        "rank": 0, "step": 1, "start_us": [0.0, 10.0, 20.0, 30.0],
        "name": ["hcom_allReduce__1_0", "MatMul1", "hcom_allReduce__1_1",
                 "hcom_broadcast__2_0"],
        "category": ["communication", "compute", "communication", "communication"],
        "dur_us": [5.0, 100.0, 7.0, 50.0]})
    p = _profile(kernels=kernels)
    tasks = comm_tasks(p)
    assert list(tasks["name"]) == ["hcom_allReduce__1_0", "hcom_allReduce__1_1",
                                   "hcom_broadcast__2_0"]
    out = comm_summary(p).set_index("op_type")
    assert list(out.index) == ["broadcast", "allreduce"]  # sorted by total
    assert out.loc["allreduce", "count"] == 2 and out.loc["allreduce", "total_us"] == 12.0
    assert out.loc["allreduce", "max_us"] == 7.0 and out.loc["broadcast", "ranks"] == 1
    assert out["group"].isna().all() and out["wait_share"].isna().all()  # not recorded
    assert out.attrs["source"] == "kernels"
    assert any("3 communication tasks" in n for n in out.attrs["notes"])
    # a profile with communication operators keeps them (no double counting)
    ops = pd.DataFrame({"step": 1, "group": "g", "name": ["hcom_allGather__9"],
                        "elapse_us": [3.0]})
    out = comm_summary(_profile(kernels=kernels, comm_ops=ops))
    assert list(out["op_type"]) == ["allgather"] and "source" not in out.attrs
    # compute tasks alone: nothing, with the reason
    out = comm_summary(_profile(kernels=kernels[kernels["category"] == "compute"]))
    assert out.empty and "no communication task" in out.attrs["notes"][0]


@pytest.mark.shared_samples
def test_a_lone_kernel_details_csv_shows_its_hccl_collectives() -> None:
    """msprof-analyze's kernel_details.csv (one rank, no communication.json) holds 19 HCCL
    tasks, one per collective (broadcast, allReduce, reduceScatter, allGather): the
    summary counts and times each kind as the raw CSV, read here, does."""
    import csv

    folder = shared_sample("wild/msa_kernel_details")
    with (folder / "kernel_details.csv").open(newline="", encoding="utf-8") as fh:
        hccl = [r for r in csv.DictReader(fh) if r["Accelerator Core"] == "HCCL"]
    expected: dict[str, list[float]] = {}
    for r in hccl:  # Type "hcom_allReduce_" -> "allreduce"
        kind = r["Type"].removeprefix("hcom_").strip("_").lower()
        expected.setdefault(kind, []).append(float(r["Duration(us)"]))
    assert len(hccl) == 19 and set(expected) == {"broadcast", "allreduce",
                                                  "reducescatter", "allgather"}
    out = comm_summary(load(folder, cache=False)).set_index("op_type")
    assert set(out.index) == set(expected)
    for kind, durs in expected.items():
        assert out.loc[kind, "count"] == len(durs)
        assert out.loc[kind, "total_us"] == pytest.approx(sum(durs), rel=1e-9)
        assert out.loc[kind, "max_us"] == pytest.approx(max(durs), rel=1e-9)
    assert out["total_us"].sum() == pytest.approx(sum(sum(d) for d in expected.values()))
    assert out["total_us"].sum() == pytest.approx(346398.74)  # ~346 ms


@pytest.mark.shared_samples
def test_hccs_efficiency_is_one_links_rate_against_one_links_nominal() -> None:
    """``ascend/msinsight-pt-level1``: an allreduce's HCCS transit time is the sum of its
    copy tasks to 7 peers (rank 0's first: 28.6 MB in 1.817 ms, i.e. 15.8 GB/s of one
    link). Against the 910B's 196 GB/s aggregate it read 7.9 % of nominal; against one of
    its 7 HCCS links (28 GB/s) it is 56 %. The bytes and times are read from the raw
    ``communication.json`` of both ranks, operator by operator."""
    import json

    from shared_samples import PT_LEVEL1, sample

    root = sample(PT_LEVEL1)
    size = time = 0.0
    paths = sorted(root.glob("*/ASCEND_PROFILER_OUTPUT/communication.json"))
    assert len(paths) == 2
    for path in paths:
        for step in json.loads(path.read_text()).values():
            for ops in step.values():
                for name, op in ops.items():
                    if name == "Total Op Info":
                        continue
                    info = op["Communication Bandwidth Info"]["HCCS"]
                    size += info["Transit Size(MB)"] * 1e6
                    time += info["Transit Time(ms)"] * 1e-3
    hw = pk.Hardware.preset("ascend-910b")
    row = comm_bandwidth_summary(pk.load(root), hw).set_index("transport").loc["HCCS"]
    assert row["bandwidth_gbps"] == pytest.approx(size / time / 1e9, rel=1e-6)
    assert row["efficiency"] == pytest.approx(size / time / (196e9 / 7), rel=1e-6)
    assert 0.5 < row["efficiency"] < 0.6
