"""PyTorch Kineto traces: real HTA sample traces, both file shapes, rank sources."""

from __future__ import annotations

import gzip
import json

import pytest
from shared_samples import HTA, sample

import perfkit.io.engines.local as detect
from perfkit.profile import Cluster, Profile

DATA = sample(HTA)
RANK0 = DATA / "sampled_rank-0.json.gz"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def raw() -> dict:
    return json.loads(gzip.decompress(RANK0.read_bytes()))


@pytest.fixture(scope="module")
def prof() -> Profile:
    return detect.load(RANK0, cache=False)


@pytest.mark.shared_samples
def test_meta(prof, raw):
    assert prof.meta.source_format == "kineto"
    assert prof.meta.rank == raw["distributedInfo"]["rank"] == 0
    assert prof.meta.world_size == 128
    assert prof.meta.device_type == "gpu"
    xs = [e for e in raw["traceEvents"] if e.get("ph") == "X"]
    assert prof.meta.origin_ns == min(int(e["ts"]) for e in xs) * 1000


@pytest.mark.shared_samples
def test_kernels(prof, raw):
    dev = [e for e in raw["traceEvents"]
           if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    k = prof.kernels
    assert len(k) == len(dev)
    assert k["dur_us"].sum() == pytest.approx(sum(e["dur"] for e in dev))
    nccl = [e for e in dev if e["name"].startswith("nccl")]
    assert (k["category"] == "communication").sum() == len(nccl)
    mem = [e for e in dev if e["cat"] != "kernel"]
    assert (k["category"] == "memory").sum() == len(mem)
    assert k["wait_us"].isna().all()  # Kineto has no wait time: NA, not zero
    assert set(k["step"].dropna()) == {551, 552}


@pytest.mark.shared_samples
def test_ops_and_steps(prof, raw):
    # host operators and host annotations (ProfilerStep#N is the step, not an op)
    cpu = [e for e in raw["traceEvents"] if e.get("ph") == "X"
           and e.get("cat") in ("cpu_op", "user_annotation")
           and not e["name"].startswith("ProfilerStep#")]
    assert len(prof.ops) == len(cpu)
    assert (prof.ops["cat"] == "cpu_op").sum() == sum(e["cat"] == "cpu_op" for e in cpu)
    steps = prof.steps
    assert sorted(steps["step"]) == [551, 552]
    assert steps["bubble_us"].isna().all()  # Ascend-only
    # the device's wait before each step's first task (checked against the raw trace in
    # test_kineto_wild.py::test_preparing_is_the_devices_wait_before_each_steps_first_task)
    assert (steps["preparing_us"] >= 0).all()
    # computing + communication(not overlapped) + free is the device span of the step and
    # the device's idle time after it while the host's ProfilerStep span lasts (the spans
    # from the raw trace, on the profile's clock; no task of no step in this trace)
    k = prof.kernels
    assert k["step"].notna().all()
    origin_us = prof.meta.origin_ns / 1000.0
    ends = {int(e["name"].split("#")[1]): float(e["ts"]) + float(e["dur"]) - origin_us
            for e in raw["traceEvents"] if e.get("ph") == "X"
            and e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")}
    first = k.groupby("step")["start_us"].min()
    for _, row in steps.iterrows():
        sel = k[k["step"] == row["step"]]
        last = (sel["start_us"] + sel["dur_us"]).max()
        later = first[first > sel["start_us"].min()]
        stop = min(ends[int(row["step"])], later.min() if len(later) else float("inf"))
        span = max(last, stop) - sel["start_us"].min()
        total = row["computing_us"] + row["comm_not_overlapped_us"] + row["free_us"]
        assert total == pytest.approx(span, rel=1e-9)
    nccl = k[k["category"] == "communication"]
    assert prof.comm_ops["elapse_us"].sum() == pytest.approx(nccl["dur_us"].sum())
    assert len(prof.comm_matrix) == 0
    assert any("comm_matrix" in n for n in prof.meta.notes)


@pytest.mark.shared_samples
def test_bare_array_and_rank_from_name(tmp_path, raw):
    f = tmp_path / "worker_rank5.json"
    f.write_text(json.dumps(raw["traceEvents"]))
    p = detect.load(f, cache=False)
    assert p.meta.rank == 5
    assert any("file name" in n for n in p.meta.notes)
    assert len(p.kernels) == len(detect.load(RANK0, cache=False).kernels)


@pytest.mark.shared_samples
def test_folder_of_traces_is_cluster():
    c = detect.load(DATA, cache=False)
    assert isinstance(c, Cluster)
    assert c.ranks == [0, 1]
    assert set(c.kernels["rank"]) == {0, 1}
    sub = detect.load(DATA, ranks=[1], cache=False)
    assert sub.ranks == [1]


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.shared_samples
def test_block_decoding_equals_whole_file(tmp_path, raw, monkeypatch):
    """Large files are decoded block by block; force that path on a small trace."""
    from perfkit.io.chrome import decode as chrome

    obj = tmp_path / "rank0.json"
    # keys after traceEvents too, as some writers put them there
    doc = {k: v for k, v in raw.items() if k != "traceEvents"}
    text = json.dumps(doc)[:-1] + ', "traceEvents": ' + json.dumps(raw["traceEvents"]) \
        + ', "traceName": "x"}'
    obj.write_text(text)
    arr = tmp_path / "bare_rank0.json"
    arr.write_text(json.dumps(raw["traceEvents"], indent=1))
    whole_obj = detect.load(obj, cache=False)
    whole_arr = detect.load(arr, cache=False)
    monkeypatch.setattr(chrome, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(chrome, "BLOCK_BYTES", 4096)
    assert chrome._read_streaming(obj) is not None
    assert chrome._read_streaming(arr) is not None
    for whole, path in ((whole_obj, obj), (whole_arr, arr)):
        streamed = detect.load(path, cache=False)
        assert streamed.meta.rank == whole.meta.rank == 0
        for name in ("kernels", "ops", "steps", "comm_ops"):
            import pandas as pd

            pd.testing.assert_frame_equal(getattr(streamed, name), getattr(whole, name))
    # a truncated large file still gives the precise error of the whole-file path
    obj.write_text(text[: len(text) // 2])
    with pytest.raises(Exception, match="truncated"):
        detect.load(obj, cache=False)


def test_memory_events(tmp_path):
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1,
         "ts": 1000, "dur": 5, "args": {"External id": 1}},
        {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1,
         "tid": 1, "ts": 1002, "args": {"Device Type": 1, "Device Id": 0, "Addr": 7,
                                        "Bytes": 512, "Total Allocated": 2048,
                                        "Total Reserved": 4096}},
        {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1,
         "tid": 1, "ts": 1004, "args": {"Device Type": 1, "Device Id": 0, "Addr": 7,
                                        "Bytes": -512, "Total Allocated": 1536,
                                        "Total Reserved": 4096}},
    ]
    f = tmp_path / "rank0.json"
    f.write_text(json.dumps({"traceEvents": events, "baseTimeNanoseconds": 10**18}))
    p = detect.load(f, cache=False)
    mem = p.memory
    assert mem["allocated_bytes"].tolist() == [2048, 1536]
    assert mem["reserved_bytes"].tolist() == [4096, 4096]
    assert mem["ts_us"].tolist() == [2.0, 4.0]
    assert mem["active_bytes"].isna().all()
    assert p.meta.origin_ns == 10**18 + 1000 * 1000
    assert len(p.kernels) == 0
    # no ProfilerStep: one step over the whole trace (the one operator), number NA
    assert len(p.steps) == 1 and p.steps["step"].isna().all()
    assert p.steps["total_us"].iloc[0] == 5.0
    assert any("no ProfilerStep" in n for n in p.meta.notes)
