"""Tests of perfkit.simulate: layout, headers, arithmetic of the written files, faults.

Expected values come from the written files (parsed with the csv/json modules) and from
independent arithmetic, never from the simulator's own return values.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import perfkit as pk
from perfkit.errors import InvalidArgumentError
from perfkit.io.engines.local import load
from perfkit.simulate import (
    DataLoadingStall,
    FullRecompute,
    HostBound,
    MemoryPressure,
    NoOverlap,
    OutOfMemoryWarning,
    SlowLink,
    SlowRank,
    UnbalancedStage,
    UnfusedOperators,
    simulate,
)

TINY = pk.ModelSpec(num_layers=4, hidden_size=512, num_attention_heads=8, seq_length=256,
                    vocab_size=2048, mlp="gated", name="tiny-llama")
HW = pk.Hardware.preset("ascend-910b")
#: The same device behind a switch (every peer at the NPU's full 196 GB/s): for the tests
#: of the schedule, whose pipeline transfers over one HCCS link of a full-mesh node (28 GB/s)
#: would add their own receive waits to the bubble.
SWITCHED = HW.replace(node=HW.topology.replace(intra_link="unknown"))
DP2PP2 = pk.ParallelConfig(dp=2, pp=2, num_micro_batches=4)
FILES = ["kernel_details.csv", "step_trace_time.csv", "communication.json",
         "communication_matrix.json", "trace_view.json", "memory_record.csv",
         "operator_memory.csv", "op_statistic.csv"]


def _rank_dirs(root: Path) -> dict[int, Path]:
    out = {}
    for d in root.iterdir():
        infos = list(d.glob("profiler_info_*.json"))
        assert len(infos) == 1, d
        out[int(infos[0].stem.rsplit("_", 1)[1])] = d
    return out


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _steps(root: Path) -> dict[int, list[dict[str, float]]]:
    return {r: [{k: float(v) for k, v in row.items()}
                for row in _csv(d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")]
            for r, d in _rank_dirs(root).items()}


def _sim(tmp_path: Path, name: str, parallel: pk.ParallelConfig = DP2PP2, **kw) -> Path:
    kw.setdefault("steps", 2)
    return simulate(TINY, parallel, HW, out=tmp_path / name, **kw)


# ----------------------------------------------------------------------------- layout

def test_layout_and_current_torch_npu_headers(tmp_path: Path) -> None:
    root = _sim(tmp_path, "a")
    dirs = _rank_dirs(root)
    assert sorted(dirs) == [0, 1, 2, 3]
    for rank, d in dirs.items():
        assert d.name.endswith("_ascend_pt")
        out = d / "ASCEND_PROFILER_OUTPUT"
        for f in FILES:
            assert (out / f).is_file(), f
        info = json.loads((d / f"profiler_info_{rank}.json").read_text())
        assert info["rank_id"] == rank
        assert info["config"]["experimental_config"]["_profiler_level"] == "Level1"
        groups = json.loads((d / "profiler_metadata.json").read_text())["parallel_group_info"]
        names = sorted(g["group_name"] for g in groups.values())
        assert names == ["dp", "pp"]
        for g in groups.values():
            assert g["global_ranks"][g["group_rank"]] == rank
    out = dirs[0] / "ASCEND_PROFILER_OUTPUT"
    with open(out / "kernel_details.csv", newline="") as fh:
        header = next(csv.reader(fh))
    # torch_npu >= v2.7.1-26.0.0: "Step Id" + renamed CANN op_summary columns
    assert header[:12] == ["Step Id", "Device_id", "Model ID", "Task ID", "Stream ID", "Name",
                           "Type", "OP State", "Accelerator Core", "Start Time(us)",
                           "Duration(us)", "Wait Time(us)"]
    assert header[12:14] == ["Block Num", "Mix Block Num"]
    assert header[-1] == "cube_utilization(%)"
    assert (out / "step_trace_time.csv").read_bytes().startswith(
        b"Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,Communication,"
        b"Free,Stage,Bubble,Communication(Not Overlapped and Exclude Receive),Preparing\r\n")
    assert (out / "memory_record.csv").read_text().splitlines()[0] == (
        "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),"
        "Stream Ptr,Device Type")
    assert (out / "op_statistic.csv").read_text().splitlines()[0] == (
        "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),"
        "Max Time(us),Ratio(%)")
    assert len((out / "operator_memory.csv").read_text().splitlines()[0].split(",")) == 15
    row = (out / "kernel_details.csv").read_text().splitlines()[1]
    assert '\t,' in row  # the trailing TAB torch_npu puts after timestamps
    trace = json.loads((out / "trace_view.json").read_text())
    assert isinstance(trace, list)
    procs = {e["args"]["name"] for e in trace if e.get("name") == "process_name"}
    assert {"Python", "Ascend Hardware", "HCCL", "Overlap Analysis"} <= procs
    assert all(isinstance(e["ts"], str) for e in trace if e.get("ph") == "X")


def test_mindspore_layout(tmp_path: Path) -> None:
    root = _sim(tmp_path, "ms", framework="mindspore", aic_metrics=None)
    d = _rank_dirs(root)[1]
    assert d.name.endswith("_ascend_ms")
    info = json.loads((d / "profiler_info_1.json").read_text())
    assert info["ms_profiler_info"]["rank_id"] == 1
    out = d / "ASCEND_PROFILER_OUTPUT"
    assert (out / "kernel_details.csv").read_text().startswith("Step ID,Model ID,")
    assert (out / "step_trace_time.csv").read_text().startswith("Step,Computing,")
    prof = load(root, cache=False)
    assert prof.meta.framework == "mindspore"
    assert len(prof.steps) == 8


def test_deterministic_for_a_seed(tmp_path: Path) -> None:
    a = _sim(tmp_path, "a", seed=7)
    b = _sim(tmp_path, "b", seed=7)
    c = _sim(tmp_path, "c", seed=8)
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files_a == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert len(files_a) == 4 * 10
    for rel in files_a:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    kd = [rel for rel in files_a if rel.name == "kernel_details.csv"][0]
    assert (a / kd).read_bytes() != (c / kd).read_bytes()


# ----------------------------------------------------------------------------- arithmetic

def test_step_trace_identities(tmp_path: Path) -> None:
    root = _sim(tmp_path, "a", steps=3)
    for rows in _steps(root).values():
        assert len(rows) == 3
        for r in rows:
            span = r["Stage"] + r["Bubble"]
            assert r["Computing"] + r["Communication(Not Overlapped)"] + r["Free"] == \
                pytest.approx(span, rel=1e-9, abs=1e-3)
            assert r["Overlapped"] == pytest.approx(
                r["Communication"] - r["Communication(Not Overlapped)"], abs=1e-6)
            assert r["Communication(Not Overlapped and Exclude Receive)"] == pytest.approx(
                max(r["Communication(Not Overlapped)"] - r["Bubble"], 0.0), abs=1e-6)
            assert r["Preparing"] > 0


def test_overlap_tracks_agree_with_step_trace(tmp_path: Path) -> None:
    root = _sim(tmp_path, "a", steps=1)
    for rank, d in _rank_dirs(root).items():
        trace = json.loads((d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
        pid = next(e["pid"] for e in trace if e.get("name") == "process_name"
                   and e["args"]["name"] == "Overlap Analysis")
        tracks = {e["tid"]: e["args"]["name"] for e in trace
                  if e.get("name") == "thread_name" and e["pid"] == pid}
        sums: dict[str, float] = {}
        for e in trace:
            if e.get("ph") == "X" and e["pid"] == pid:
                sums[tracks[e["tid"]]] = sums.get(tracks[e["tid"]], 0.0) + e["dur"]
        row = _steps(root)[rank][0]
        for name in ("Computing", "Communication", "Communication(Not Overlapped)", "Free"):
            assert sums.get(name, 0.0) == pytest.approx(row[name], rel=1e-6, abs=0.05)


def test_bubble_is_the_sum_of_receives(tmp_path: Path) -> None:
    root = _sim(tmp_path, "a")
    for rank, d in _rank_dirs(root).items():
        recv: dict[int, float] = {}
        for row in _csv(d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"):
            if row["Name"].startswith("hcom_receive"):
                step = int(row["Step Id"])
                recv[step] = recv.get(step, 0.0) + float(row["Duration(us)"])
        for r in _steps(root)[rank]:
            assert r["Bubble"] == pytest.approx(recv[int(r["Step"])], abs=0.01 * 20)
            assert r["Bubble"] > 0


def test_matmul_duration_follows_flops(tmp_path: Path) -> None:
    """FLOPs at the efficiency, a 4 µs fixed cost, and the operands' traffic at the memory
    efficiency (the step model's GEMM time, perfkit.calc.timing.gemm_seconds)."""
    root = _sim(tmp_path, "a", efficiency=0.5, memory_efficiency=0.7, noise=0.0)
    d = _rank_dirs(root)[0]
    peak, bw = HW.peak(), HW.memory_bandwidth
    checked = 0
    for row in _csv(d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"):
        if row["Type"] != "MatMulV3":
            continue
        a, b = row["Input Shapes"].strip('"').split(";")
        m, k = (int(x) for x in a.split(","))
        k2, n = (int(x) for x in b.split(","))
        assert k == k2
        expected_us = 2.0 * m * k * n / (0.5 * peak) * 1e6 + 4.0 \
            + 2.0 * (m * k + k * n + m * n) / (0.7 * bw) * 1e6
        assert float(row["Duration(us)"]) == pytest.approx(expected_us, rel=1e-3, abs=2e-3)
        checked += 1
    assert checked > 20


def test_pipeline_bubble_tracks_the_1f1b_formula(tmp_path: Path) -> None:
    # a small vocabulary keeps the two stages nearly equal (backward = 2 x forward)
    model = pk.ModelSpec.preset("llama2-7b").replace(num_layers=4, vocab_size=64)
    for m in (4, 16):
        par = pk.ParallelConfig(dp=1, pp=2, num_micro_batches=m)
        root = simulate(model, par, SWITCHED, steps=1, noise=0.0, out=tmp_path / f"m{m}")
        steps = _steps(root)
        # stage 0 spans the whole step: it idles (p - 1)(F + B), the classic 1F1B bubble,
        # which is (p - 1) / m of its compute — plus the transfer of each gradient it
        # receives (its receive blocks for the message)
        first = steps[0][0]
        assert first["Bubble"] / first["Computing"] == pytest.approx((2 - 1) / m, rel=0.2)
        # the last stage only waits for the first forward: F / (m (F + B)) = 1 / (3m)
        last = steps[1][0]
        assert last["Bubble"] / last["Computing"] == pytest.approx(1 / (3 * m), rel=0.25)


def test_interleaved_schedule_divides_the_bubble_by_vpp(tmp_path: Path) -> None:
    model = pk.ModelSpec.preset("llama2-7b").replace(num_layers=8, vocab_size=64)
    ratios = {}
    for v in (1, 2):
        par = pk.ParallelConfig(pp=2, vpp=v, num_micro_batches=4)
        root = simulate(model, par, SWITCHED, steps=1, noise=0.0, out=tmp_path / f"v{v}")
        first = _steps(root)[0][0]
        ratios[v] = first["Bubble"] / first["Computing"]
    # Narayanan et al. 2021: (p - 1) / (v m)
    assert ratios[1] == pytest.approx(1 / 4, rel=0.15)
    assert ratios[2] == pytest.approx(1 / 8, rel=0.15)


def test_dp_gradient_volume(tmp_path: Path) -> None:
    par = pk.ParallelConfig(dp=4, num_micro_batches=2)
    root = simulate(TINY, par, HW, steps=1, out=tmp_path / "dp")
    n = TINY.num_parameters()
    expected_mb = 2 * (4 - 1) / 4 * n * 2 / 1e6  # ring all-reduce of bf16 gradients
    for d in _rank_dirs(root).values():
        comm = json.loads((d / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
        ops = comm["step1"]["collective"]
        sent = sum(v["Communication Bandwidth Info"]["HCCS"]["Transit Size(MB)"]
                   for k, v in ops.items() if k.startswith("hcom_allReduce"))
        assert sent == pytest.approx(expected_mb, rel=1e-6)



def _dp_transit_mb(root: Path, op: str) -> dict[int, float]:
    """Megabytes each rank's ``op`` collectives send over device links (HCCS, RDMA) in
    step 1, read from communication.json."""
    out = {}
    for rank, d in _rank_dirs(root).items():
        comm = json.loads((d / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
        out[rank] = sum(info["Transit Size(MB)"]
                        for name, v in comm["step1"]["collective"].items()
                        if name.startswith(f"hcom_{op}_")
                        for tr, info in v["Communication Bandwidth Info"].items()
                        if tr in ("HCCS", "RDMA"))
    return out


def _tiny_stage_parameters(tp: int = 1) -> float:
    """Parameters a device of TINY's most loaded stage holds when pp=2, counted by hand:
    two layers (q, k, v and output projections 4h², gated MLP 3·h·ffn) and the untied
    output head (the last stage; the first has only the embedding), split ``tp`` ways,
    plus the RMSNorm weights (two a layer and the final one), which every tensor-parallel
    rank keeps whole."""
    h, ffn, vocab = TINY.hidden_size, 1536, TINY.vocab_size
    matrices = 2 * (4 * h * h + 3 * h * ffn) + vocab * h
    return matrices / tp + 5 * h


@pytest.mark.parametrize(("scheme", "grad_bytes"),
                         [("megatron", 4), ("mindspore", 2), ("zero", 2)])
def test_dp_gradients_sized_by_the_static_scheme(tmp_path: Path, scheme: str,
                                                 grad_bytes: int) -> None:
    """Megatron-LM reduces fp32 gradients in a bf16 run (``arguments.py`` sets
    ``accumulate_allreduce_grads_in_fp32`` for bf16): the simulated all-reduce moves 4 bytes
    per gradient under that scheme, 2 under MindSpore's and ZeRO's — as estimate_step."""
    hw = pk.Hardware.preset("h100")
    dp = 4
    par = pk.ParallelConfig(dp=dp, pp=2, num_micro_batches=4)
    root = simulate(TINY, par, hw, steps=1, out=tmp_path / scheme, static_scheme=scheme,
                    aic_metrics=None, trace_kernels=False, comm_efficiency=0.8)
    ring = 2 * (dp - 1) / dp  # ring all-reduce: reduce-scatter + all-gather
    expected = ring * _tiny_stage_parameters() * grad_bytes
    sent = _dp_transit_mb(root, "allReduce")
    assert len(sent) == dp * 2
    for mb in sent.values():
        assert mb * 1e6 == pytest.approx(expected, rel=1e-6)
    # estimate_step sizes the same reduction alike: its time is those bytes over the
    # node's links at the same efficiency
    est = pk.calc.estimate_step(TINY, par, hw, static_scheme=scheme, comm_efficiency=0.8,
                                rates=pk.Rates(link_latency_s=0.0))
    assert est.dp_comm_s * hw.intra_node_bandwidth * 0.8 == pytest.approx(expected, rel=1e-6)


def test_sharded_dp_scatters_fp32_gradients_and_gathers_bf16_weights(tmp_path: Path) -> None:
    """Megatron-LM's distributed optimizer reduce-scatters its fp32 gradient buffer and
    all-gathers the updated bf16 weights: 4 and 2 bytes per parameter of the device
    (tensor parallelism halves them), each over a ring of ``(d-1)/d``."""
    hw = pk.Hardware.preset("h100")
    dp, tp = 2, 2
    par = pk.ParallelConfig(dp=dp, tp=tp, pp=2, num_micro_batches=4, optimizer_shard=dp)
    root = simulate(TINY, par, hw, steps=1, out=tmp_path / "zero1", static_scheme="megatron",
                    aic_metrics=None, trace_kernels=False)
    per_device = _tiny_stage_parameters(tp)
    ring = (dp - 1) / dp
    for mb in _dp_transit_mb(root, "reduceScatter").values():
        assert mb * 1e6 == pytest.approx(ring * per_device * 4, rel=1e-6)
    for mb in _dp_transit_mb(root, "allGather").values():
        assert mb * 1e6 == pytest.approx(ring * per_device * 2, rel=1e-6)


def test_links_carry_their_own_transport(tmp_path: Path) -> None:
    """HCCS inside a node, RDMA across nodes (the seeds' terms): each link of the matrix
    by its two ends, and a collective whose group crosses nodes by its slowest link."""
    hw = HW.replace(devices_per_node=2)  # dp 4 over two nodes: ranks 0, 1 | 2, 3
    root = simulate(TINY, pk.ParallelConfig(dp=4, num_micro_batches=2), hw, steps=1,
                    out=tmp_path / "nodes")
    seen = set()
    for rank, d in _rank_dirs(root).items():
        out = d / "ASCEND_PROFILER_OUTPUT"
        matrix = json.loads((out / "communication_matrix.json").read_text())
        for links in matrix["step1"]["collective"].values():
            for link, info in links.items():
                src, dst = (int(x) for x in link.split("-"))
                want = "LOCAL" if src == dst else "HCCS" if src // 2 == dst // 2 else "RDMA"
                assert info["Transport Type"] == want, (rank, link)
                seen.add(want)
        comm = json.loads((out / "communication.json").read_text())
        for name, op in comm["step1"]["collective"].items():
            if name.startswith("hcom_allReduce"):
                sizes = {t: v["Transit Size(MB)"]
                         for t, v in op["Communication Bandwidth Info"].items()}
                assert sizes["RDMA"] > 0 and sizes["HCCS"] == 0, (rank, name)
    assert seen == {"LOCAL", "HCCS", "RDMA"}
    # each transport is compared with its own nominal bandwidth: never above it
    bw = pk.analysis.comm_bandwidth_summary(load(root, cache=False), hw)
    assert list(bw["transport"]) == ["RDMA"]
    assert bw["nominal_gbps"].iloc[0] == hw.inter_node_bandwidth / 1e9
    assert 0.5 < bw["efficiency"].iloc[0] <= 1.0


def test_tensor_parallel_allreduces(tmp_path: Path) -> None:
    par = pk.ParallelConfig(dp=1, tp=2, num_micro_batches=2)
    root = simulate(TINY, par, HW, steps=1, out=tmp_path / "tp")
    for d in _rank_dirs(root).values():
        comm = json.loads((d / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
        ops = [k for k in comm["step1"]["collective"] if k.startswith("hcom_allReduce")]
        # 2 forward + 2 backward per layer and micro-batch
        assert len(ops) == 4 * TINY.num_layers * 2


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_sequence_parallel_gathers_and_scatters(tmp_path: Path) -> None:
    """Under sequence parallelism each all-reduce of a layer becomes a reduce-scatter, an
    all-gather brings the sequence in front of each block (and again for the weight
    gradients: Megatron's redo), and the norms run on 1/t of the tokens; the tensor group
    then moves 10 ring passes per layer and micro-batch instead of 8."""
    par = pk.ParallelConfig(dp=1, tp=2, num_micro_batches=2, sequence_parallel=True)
    root = simulate(TINY, par, HW, steps=1, out=tmp_path / "sp")
    plain = simulate(TINY, par.replace(sequence_parallel=False), HW, steps=1,
                     out=tmp_path / "plain")
    units = TINY.num_layers * 2  # layers x micro-batches
    tokens = TINY.seq_length  # one sequence per micro-batch
    for want, got_root in ((False, plain), (True, root)):
        for d in _rank_dirs(got_root).values():
            out = d / "ASCEND_PROFILER_OUTPUT"
            comm = json.loads((out / "communication.json").read_text())["step1"]["collective"]
            count = {op: sum(k.startswith(f"hcom_{op}_") for k in comm)
                     for op in ("allReduce", "allGather", "reduceScatter")}
            sent = sum(v["Communication Bandwidth Info"]["HCCS"]["Transit Size(MB)"]
                       for k, v in comm.items() if k.startswith("hcom_"))  # not the total
            # 2 ring passes of (t - 1)/t of the layer's activation per all-reduce, 1 per
            # gather or scatter; the activation: tokens x hidden x 2 bytes
            act_mb = tokens * TINY.hidden_size * 2 / 1e6
            if want:
                assert count == {"allReduce": 0, "allGather": 6 * units,
                                 "reduceScatter": 4 * units}
                assert sent == pytest.approx(10 * units * act_mb / 2)
            else:
                assert count == {"allReduce": 4 * units, "allGather": 0, "reduceScatter": 0}
                assert sent == pytest.approx(8 * units * act_mb / 2)
            norms = [row["Input Shapes"] for row in _csv(out / "kernel_details.csv")
                     if row["Type"] in ("RmsNorm", "RmsNormGrad")
                     and "final_norm" not in row["Name"]]  # the layers' norms
            rows = tokens // 2 if want else tokens
            assert norms and all(s.strip('"').startswith(f"{rows},") for s in norms)
        assert pk.infer_job(load(got_root, cache=False)).parallel.sequence_parallel is want


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_loads_in_perfkit(tmp_path: Path) -> None:
    root = _sim(tmp_path, "a")
    cluster = load(root, cache=False)
    assert cluster.ranks == [0, 1, 2, 3]
    steps = cluster.steps
    assert len(steps) == 8
    assert cluster.meta.source_format == "ascend_text"
    written = _steps(root)
    for rank, rows in written.items():
        got = steps[steps["rank"] == rank].sort_values("step")
        assert got["computing_us"].tolist() == pytest.approx([r["Computing"] for r in rows])
    kernels = cluster.kernels
    assert set(kernels["category"]) >= {"compute", "communication"}
    assert len(cluster.comm_ops) > 0 and len(cluster.comm_matrix) > 0
    assert len(cluster.memory) > 0 and len(cluster.op_memory) > 0


# ----------------------------------------------------------------------------- faults

def _computing(root: Path) -> dict[int, float]:
    return {r: sum(x["Computing"] for x in rows) for r, rows in _steps(root).items()}


def test_slow_rank(tmp_path: Path) -> None:
    par = pk.ParallelConfig(dp=4, num_micro_batches=2)
    base = _computing(simulate(TINY, par, HW, steps=2, out=tmp_path / "b"))
    slow = simulate(TINY, par, HW, steps=2, faults=(SlowRank(2, 1.5),), out=tmp_path / "s")
    comp = _computing(slow)
    assert comp[2] / base[2] == pytest.approx(1.5, rel=0.05)
    for r in (0, 1, 3):
        assert comp[r] == pytest.approx(base[r], rel=0.05)
    # peers wait for the slow rank inside the gradient all-reduce
    waits = {}
    for r, d in _rank_dirs(slow).items():
        comm = json.loads((d / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
        waits[r] = sum(v["Communication Time Info"]["Wait Time(ms)"]
                       for s in comm.values() for k, v in s["collective"].items()
                       if k != "Total Op Info")
    assert waits[0] > 5 * waits[2]


def test_slow_link(tmp_path: Path) -> None:
    par = pk.ParallelConfig(dp=4, num_micro_batches=2)
    root = simulate(TINY, par, HW, steps=1, faults=(SlowLink(1, 2, 0.1),), out=tmp_path / "l")
    d = _rank_dirs(root)[1]
    matrix = json.loads((d / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json").read_text())
    links = matrix["step1"]["collective"]
    total = next(v for k, v in links.items() if k.startswith("allreduce-total"))
    bw = {k: v["Bandwidth(GB/s)"] for k, v in total.items() if v["Transport Type"] != "LOCAL"}
    assert bw["1-2"] == pytest.approx(0.1 * bw["1-0"], rel=1e-3)
    assert bw["1-3"] == pytest.approx(bw["1-0"], rel=1e-3)


def test_data_loading_stall(tmp_path: Path) -> None:
    root = _sim(tmp_path, "a", steps=3, faults=(DataLoadingStall(40_000.0, every=2),))
    for rows in _steps(root).values():
        prep = [r["Preparing"] for r in rows]
        assert prep[0] > 40_000 and prep[2] > 40_000
        assert prep[1] < 2_000


def test_host_bound_adds_free_time(tmp_path: Path) -> None:
    base = _steps(_sim(tmp_path, "b"))
    hb = _steps(_sim(tmp_path, "h", faults=(HostBound(200.0),)))
    for r in base:
        assert hb[r][0]["Free"] > 5 * base[r][0]["Free"]


def test_no_overlap(tmp_path: Path) -> None:
    par = pk.ParallelConfig(dp=4, num_micro_batches=2)
    base = _steps(simulate(TINY, par, HW, steps=1, out=tmp_path / "b"))
    no = _steps(simulate(TINY, par, HW, steps=1, faults=(NoOverlap(),), out=tmp_path / "n"))
    for r in base:
        assert base[r][0]["Overlapped"] > 0.3 * base[r][0]["Communication"]
        assert no[r][0]["Overlapped"] < 0.01 * no[r][0]["Communication"]


@pytest.mark.parametrize("fraction", [0.5, 0.96, 1.0])
def test_memory_pressure(tmp_path: Path, fraction: float) -> None:
    """The device peak the profile reports is ``fraction`` of the device (within 1 %).

    torch_npu's ``APP`` component is the whole device (framework pool plus runtime); it is
    what the profile says the device held, so that is what MemoryPressure sets.
    """
    root = _sim(tmp_path, "m", faults=(MemoryPressure(fraction),))
    for d in _rank_dirs(root).values():
        rows = _csv(d / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv")
        app = max(float(r["Total Reserved(MB)"]) for r in rows if r["Component"] == "APP")
        pta = max(float(r["Total Reserved(MB)"]) for r in rows if r["Component"] == "PTA")
        assert app * 2**20 / HW.memory_bytes == pytest.approx(fraction, abs=0.01)
        assert app * 2**20 <= HW.memory_bytes
        assert pta < app  # the framework's pool is part of the device's memory


def test_memory_pressure_mindspore(tmp_path: Path) -> None:
    root = _sim(tmp_path, "ms", faults=(MemoryPressure(0.9),), framework="mindspore")
    for d in _rank_dirs(root).values():
        rows = _csv(d / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv")
        peak = max(float(r["Total Reserved(MB)"]) for r in rows)
        assert peak * 1024 * 1000 / HW.memory_bytes == pytest.approx(0.9, abs=0.01)


def test_job_that_does_not_fit_is_refused(tmp_path: Path) -> None:
    """Llama2-7B on one 64 GiB NPU without sharding: its static memory alone fills it."""
    model = pk.ModelSpec.preset("llama2-7b", num_layers=32)
    par = pk.ParallelConfig(dp=1)
    static = pk.static_memory(model, par).total_bytes
    # independent of the simulator: weights, gradients and optimizer states take 98 % of
    # the device before a single activation
    assert static > 0.95 * HW.memory_bytes
    with pytest.raises(pk.PerfkitError, match=r"cannot run.*allow_oom=True"):
        simulate(model, par, HW, steps=1, out=tmp_path / "no", aic_metrics=None,
                 trace_kernels=False)
    assert not (tmp_path / "no").exists()
    with pytest.warns(OutOfMemoryWarning, match="cannot run"):
        root = simulate(model, par, HW, steps=1, out=tmp_path / "yes", aic_metrics=None,
                        trace_kernels=False, allow_oom=True)
    meta = json.loads(next(root.glob("*/profiler_metadata.json")).read_text())
    fit = meta["perfkit_simulation"]["does_not_fit"]
    assert fit["peak_bytes"] > fit["memory_bytes"] == HW.memory_bytes


def test_full_recompute_repeats_forward_kernels(tmp_path: Path) -> None:
    def count(root: Path) -> int:
        d = _rank_dirs(root)[0]
        return sum(1 for r in _csv(d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
                   if r["Type"] == "FlashAttentionScore")

    base = count(_sim(tmp_path, "b", steps=1))
    full = count(_sim(tmp_path, "f", steps=1, faults=(FullRecompute(),)))
    assert base == 4 * 2  # micro-batches x layers on stage 0
    assert full == 2 * base


def test_unbalanced_stage(tmp_path: Path) -> None:
    base = _steps(_sim(tmp_path, "b"))
    unb = _steps(_sim(tmp_path, "u", faults=(UnbalancedStage(1, 2.0),)))
    # stage 0 (ranks 0, 1) now waits for stage 1 in hcom_receive
    assert unb[0][0]["Bubble"] > 2 * base[0][0]["Bubble"]


def test_unfused_operators(tmp_path: Path) -> None:
    root = _sim(tmp_path, "u", faults=(UnfusedOperators(),))
    d = _rank_dirs(root)[0]
    types = {r["OP Type"] for r in _csv(d / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv")}
    assert {"Rsqrt", "ReduceMean", "Neg", "Sigmoid"} <= types
    assert "RmsNorm" not in types


def test_op_statistic_matches_kernels(tmp_path: Path) -> None:
    root = _sim(tmp_path, "a")
    d = _rank_dirs(root)[2]
    totals: dict[str, float] = {}
    for r in _csv(d / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"):
        if r["Accelerator Core"] != "HCCL":
            totals[r["Type"]] = totals.get(r["Type"], 0.0) + float(r["Duration(us)"])
    stat = {r["OP Type"]: float(r["Total Time(us)"])
            for r in _csv(d / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv")}
    assert set(stat) == set(totals)
    for k, v in totals.items():
        assert stat[k] == pytest.approx(v, rel=1e-4, abs=0.01)


@pytest.mark.parametrize("bad", [
    dict(steps=0), dict(framework="tf"), dict(efficiency=1.5),
    dict(faults=(SlowRank(99),)), dict(faults=("slow",)),
])
def test_invalid_arguments(tmp_path: Path, bad: dict) -> None:
    with pytest.raises(InvalidArgumentError):
        _sim(tmp_path, "x", **bad)


def test_fault_validation() -> None:
    with pytest.raises(InvalidArgumentError):
        SlowLink(1, 1)
    with pytest.raises(InvalidArgumentError):
        MemoryPressure(1.5)
    with pytest.raises(InvalidArgumentError):
        UnfusedOperators(("softmax",))
    with pytest.raises(InvalidArgumentError):
        SlowRank(0, factor=0)


def test_mesh_transit_sums_the_links_as_cann_does_and_calibration_reads_it_back(
        tmp_path: Path) -> None:
    """On a 910B server (an HCCS full mesh), CANN's per-transport transit time sums an
    operation's copy tasks, one per link (``ascend/msinsight-pt-level1``: 14 tasks to 7
    peers, 1.817 ms where the time info says 0.239). The simulator writes it so: a tensor-
    parallel pair's HCCS transit is its time on one link, a data-parallel group of 4's is
    three links' worth; each link moves at 0.8 × 28 GB/s, and calibration recovers 0.8 for
    both groups."""
    model = pk.ModelSpec.preset("llama2-7b").replace(num_layers=2, vocab_size=64)  # MBs
    par = pk.ParallelConfig(dp=4, tp=2, num_micro_batches=2)
    root = simulate(model, par, HW, steps=1, noise=0.0, out=tmp_path / "mesh",
                    aic_metrics=None, trace_kernels=False, comm_efficiency=0.8)
    seen = set()
    for d in _rank_dirs(root).values():
        comm = json.loads((d / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
        for name, op in comm["step1"]["collective"].items():
            hccs = op["Communication Bandwidth Info"]["HCCS"]
            wall = op["Communication Time Info"]["Transit Time(ms)"]
            if name == "Total Op Info" or not hccs["Transit Size(MB)"]:
                continue
            per_link = hccs["Transit Size(MB)"] / 1e3 / (hccs["Transit Time(ms)"] / 1e3)
            assert per_link <= 0.8 * 28 + 1e-6, name
            ratio = hccs["Transit Time(ms)"] / wall
            assert ratio == pytest.approx(round(ratio)), name
            seen.add(round(ratio))
    assert seen == {1, 3}  # the tp pair's one link, the dp group's three
    fitted = pk.plan.calibrate(pk.load(root, cache=False), model, par, HW)
    eff = dict(fitted.rates.link_efficiency)
    assert eff["tp"] == pytest.approx(0.8, abs=0.03) and eff["dp"] == pytest.approx(0.8, abs=0.03)
