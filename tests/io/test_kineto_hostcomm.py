"""Collectives of a Kineto trace named and sized by their host events (issue 67, point 1).

The kernel's name does not always say which collective it runs (RCCL >= 2.22 launches
``ncclDevKernel_Generic`` for every kind; an all-to-all runs as ``ncclKernel_SendRecv``),
while the host records it: ``nccl:all_to_all`` inside ``record_param_comms`` inside
``c10d::alltoall_base_``, on the thread whose runtime call launched the kernel. Expected
kinds, counts and sizes come from a plain ``json`` reading of the raw files here, never
from perfkit's output; bandwidths from nccl-tests' formulas
(https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md).
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from shared_samples import HTA, KINETO_TRACES, sample

import perfkit as pk
from perfkit import analysis as A
from perfkit.analysis.collectives import comm_op_type

HTA_RANKS = [sample(f"{HTA}/sampled_rank-{r}.json.gz") for r in (0, 1)]
B200 = sample(KINETO_TRACES["tl_b200_eager"])


def _events(path: Path) -> list[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh)["traceEvents"]


def _raw_host_names(path: Path) -> tuple[Counter, Counter]:
    """(host names, kernel names) of the NCCL kernels, read from the raw events: the
    launch by correlation id, then the innermost ``nccl:*`` annotation open on the
    launching thread at the launch."""
    ev = _events(path)
    launch = {e["args"]["correlation"]: e for e in ev
              if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    notes = [e for e in ev if e.get("cat") == "user_annotation"
             and str(e.get("name", "")).startswith("nccl:")]
    hosts, kernels = Counter(), Counter()
    for k in ev:
        if k.get("cat") != "kernel" or "nccl" not in k["name"].lower():
            continue
        r = launch[k["args"]["correlation"]]
        open_ = [n for n in notes if n["tid"] == r["tid"]
                 and n["ts"] <= r["ts"] <= n["ts"] + n["dur"]]
        hosts[max(open_, key=lambda n: n["ts"])["name"]] += 1
        kernels[k["name"].split("(")[0]] += 1
    return hosts, kernels


@pytest.mark.shared_samples
@pytest.mark.parametrize("path", HTA_RANKS, ids=["hta_rank0", "hta_rank1"])
def test_hta_all_to_all_is_named_by_the_host(path: Path) -> None:
    hosts, kernels = _raw_host_names(path)
    # the point of the test: the kernels alone say send/recv for every all-to-all
    assert set(kernels) == {"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"}
    assert hosts["nccl:all_to_all"] >= 2
    c = pk.load(path).comm_ops
    assert Counter(c["name"].astype(str)) == hosts
    assert set(c["named_by"]) == {"host"}
    kinds = Counter(comm_op_type(c["name"]))
    assert kinds["alltoall"] == hosts["nccl:all_to_all"]
    assert kinds["allreduce"] == hosts["nccl:all_reduce"]
    assert "sendrecv" not in kinds
    summary = A.comm_summary(pk.load(path))
    assert summary.iloc[0]["op_type"] == "alltoall"  # most time: the embedding exchange


@pytest.mark.shared_samples
def test_b200_size_group_and_bus_bandwidth() -> None:
    ev = _events(B200)
    rpc = [e for e in ev if e.get("name") == "record_param_comms"]
    assert len(rpc) == 1
    a = rpc[0]["args"]
    kernel = [e for e in ev if e.get("cat") == "kernel"
              and e["name"].startswith("ncclDevKernel_AllGather")]
    assert len(kernel) == 1
    size = a["Out msg nelems"] * 2  # BFloat16: 2 bytes; all-gather: the output buffer
    n = a["Group size"]
    algbw = size / kernel[0]["dur"] / 1e3
    p = pk.load(B200)
    c = p.comm_ops
    row = c[c["named_by"] == "host"]
    assert len(row) == 1
    assert row["name"].iloc[0] == "nccl:_all_gather_base"
    assert row["size_bytes"].iloc[0] == size
    assert row["group_size"].iloc[0] == n == len(json.loads(a["Process Group Ranks"]))
    assert row["group"].iloc[0] == a["Process Group Name"]
    bw = A.collective_bandwidth(p)
    assert len(bw) == 1
    assert bw["algbw_gbps"].iloc[0] == pytest.approx(algbw, rel=1e-6)
    assert bw["busbw_gbps"].iloc[0] == pytest.approx(algbw * (n - 1) / n, rel=1e-6)
    summary = A.collective_bandwidth_summary(p)
    assert summary["op_type"].tolist() == ["allgather"]


def _generic_trace(tmp_path: Path, launches: bool = True) -> Path:
    """An MI300X-like trace (RCCL 2.22): every collective runs ``ncclDevKernel_Generic``;
    the host annotations say 3 all-reduces (8 ranks, 1 Mi float32) and 2 broadcasts."""
    ev: list[dict] = [{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1,
                       "tid": 1, "ts": 0, "dur": 10_000}]
    corr = 100
    for i, kind in enumerate(["all_reduce", "broadcast", "all_reduce", "broadcast",
                              "all_reduce"]):
        t0 = 100 + i * 1000
        c10d = "c10d::allreduce_" if kind == "all_reduce" else "c10d::broadcast_"
        ev.append({"ph": "X", "cat": "cpu_op", "name": c10d, "pid": 1, "tid": 1, "ts": t0,
                   "dur": 100})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1,
                   "tid": 1, "ts": t0 + 5, "dur": 90, "args": {
                       "Collective name": "allreduce" if kind == "all_reduce" else "broadcast",
                       "dtype": "Float", "In msg nelems": 1 << 20, "Out msg nelems": 1 << 20,
                       "Group size": 8, "Process Group Name": "0",
                       "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"}})
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"nccl:{kind}", "pid": 1,
                   "tid": 1, "ts": t0 + 10, "dur": 80})
        if launches:
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "hipExtLaunchKernel",
                       "pid": 1, "tid": 1, "ts": t0 + 20, "dur": 5,
                       "args": {"correlation": corr}})
        ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_Generic(ncclDevComm*)",
                   "pid": 2, "tid": 7, "ts": t0 + (30 if launches else 40), "dur": 400,
                   "args": {"correlation": corr, "stream": 7, "device": 2}})
        corr += 1
    path = tmp_path / "mi300x_rank0.json"
    path.write_text(json.dumps({"traceEvents": ev, "deviceProperties": [
        {"id": 2, "name": "AMD Instinct MI300X", "totalGlobalMem": 206141652992}]}))
    return path


@pytest.mark.parametrize("launches", [True, False], ids=["by_launch", "by_time"])
def test_generic_kernels_take_the_host_kind(tmp_path: Path, launches: bool) -> None:
    p = pk.load(_generic_trace(tmp_path, launches))
    c = p.comm_ops
    assert Counter(comm_op_type(c["name"])) == {"allreduce": 3, "broadcast": 2}
    assert set(c["kernel"].str.startswith("ncclDevKernel_Generic")) == {True}
    assert (c["size_bytes"] == 4 * (1 << 20)).all()
    assert set(c["linked_by"]) == {"launch" if launches else "time"}
    bw = A.collective_bandwidth(p)
    alg = 4 * (1 << 20) / 400 / 1e3
    ar = bw[bw["op_type"] == "allreduce"]
    bc = bw[bw["op_type"] == "broadcast"]
    assert ar["busbw_gbps"].tolist() == pytest.approx([alg * 2 * 7 / 8] * 3)
    assert bc["busbw_gbps"].tolist() == pytest.approx([alg] * 2)
    summary = A.comm_summary(p)
    assert summary.iloc[0]["op_type"] == "allreduce"
    assert int(summary.iloc[0]["count"]) == 3
    note = next(n for n in p.meta.notes if n.startswith("comm_ops"))
    assert "5 of 5 kernels named by the host" in note
    assert "comm_bandwidth and comm_matrix are not" not in note


def test_kernel_without_host_event_keeps_its_name(tmp_path: Path) -> None:
    ev = [{"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float",
           "pid": 2, "tid": 7, "ts": 10, "dur": 5, "args": {"correlation": 1}},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0,
           "dur": 20}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    c = pk.load(path).comm_ops
    assert c["name"].tolist() == ["ncclKernel_AllReduce_RING_LL_Sum_float"]
    assert c["named_by"].tolist() == ["kernel"]
    assert A.collective_bandwidth(pk.load(path)).empty


@pytest.mark.shared_samples
def test_exposed_all_to_all_is_advised_as_an_exchange_not_buckets() -> None:
    hosts, _ = _raw_host_names(HTA_RANKS[0])
    found = [f for f in pk.advise(pk.load(HTA_RANKS[0]))
             if f.title.startswith("Communication is not hidden")]
    assert len(found) == 1
    f = found[0]
    assert f"largest: alltoall x{hosts['nccl:all_to_all']}" in f.evidence
    assert "embedding" in f.recommendation
    assert "bucket_cap_mb" not in f.recommendation
