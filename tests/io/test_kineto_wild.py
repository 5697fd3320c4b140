"""Real PyTorch profiler traces from other projects (../shared/samples), read right.

Every expected number comes from an independent reading of the raw file in this module
(``json`` / ``gzip`` and plain Python: the event categories of both Kineto schemas, the
runtime launch of each device task by its correlation id, the ProfilerStep spans, else
the optimizer's iterations, the ``[memory]`` events by device type), never from perfkit's
own output. The traces:

- ``k_resnet50_nw0`` / ``nw4``: PyTorch 1.9 on V100 (old categories ``Kernel``,
  ``Operator``, ``Runtime``, ``Memcpy``, ``Memset``; lower-case ``external id``; memory
  events with sizes only);
- ``ds_train``: a DeepSeek DeepEP MoE training step on H800 (rank 0 of 64);
- ``tl_ddp_resnet18_mi300``: AMD MI300X, ROCm (``hipLaunchKernel`` ...), no ProfilerStep
  (its steps are the iterations between the ends of its 5 ``Optimizer.step#SGD.step``),
  host memory samples only;
- ``tl_qwen_h100`` (a file name ending in a job id, ``__1016005``), ``tl_b200_eager`` (NCCL
  and symmetric-memory all-reduce kernels), ``tl_timesformer_h100``: TraceLens test traces;
- ``gpu/hta-trace_filter``: HolisticTraceAnalysis's 2-rank NCCL sample;
- and the project's own CPU gloo DDP recording, ``data/kineto-tiny-llama``.

They are read where they lie (never copied into the project), through
``tests/shared_samples.py``: the tests that need them are marked ``shared_samples`` and
skip, saying why, when ``../shared/samples`` (or ``$PERFKIT_SHARED_SAMPLES``) is not there.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from raw_kineto import idle_tails
from shared_samples import HTA, KINETO_TRACES, sample, samples_dir

import perfkit as pk
import perfkit.io.engines.local as detect
from perfkit.advisor.words import DEVICE_TERMS
from perfkit.io._common import rank_from_name

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "data" / "kineto-tiny-llama"
WILD = KINETO_TRACES
#: The tests that read other projects' traces (skipped without ../shared/samples).
needs_samples = pytest.mark.shared_samples


def _path(name: str) -> Path:
    if name.startswith("tiny"):
        return TINY / f"rank{name[-1]}.pt.trace.json.gz"
    return sample(WILD[name])


# ----------------------------------------------------------------- independent reading

DEVICE = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
HOST_OPS = {"cpu_op", "Operator"}
RUNTIME = {"cuda_runtime", "cuda_driver", "Runtime"}
#: communication kernels by library, as this test reads their names
COMM = {"nccl": r"^nccl", "deepep": r"dpsk::ep::inter(?:node|node_ll)::|deep_ep::",
        "symm_mem": r"multimem_all_reduce"}
HOST_COMM = r"^(?:gloo:|c10d::|record_param_comms|nccl:)"


class Raw:
    """What a trace says, read with the standard library only."""

    def __init__(self, path: Path) -> None:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt") as fh:
            doc = json.load(fh)
        self.doc = doc if isinstance(doc, dict) else {"traceEvents": doc}
        ev = self.doc["traceEvents"]
        self.x = [e for e in ev if e.get("ph") == "X"]
        self.device = [e for e in self.x if e.get("cat") in DEVICE]
        is_step = [str(e.get("name", "")).startswith("ProfilerStep#") for e in self.x]
        self.steps = sorted(
            (int(e["name"].split("#")[1]), float(e["ts"]), float(e["ts"]) + float(e["dur"]))
            for e, s in zip(self.x, is_step, strict=True)
            if s and e.get("cat") in HOST_OPS | {"user_annotation"})
        self.host = [e for e, s in zip(self.x, is_step, strict=True)
                     if not s and e.get("cat") in HOST_OPS | {"user_annotation"}]
        if not self.steps:  # the optimizer's iterations (test_kineto_optimizer_steps.py)
            ends = sorted(float(e["ts"]) + float(e["dur"]) for e in self.host
                          if re.match(r"^Optimizer\.step#\w+\.step$", e["name"]))
            if len(ends) >= 2:
                first = min(float(e["ts"]) for e, s in zip(self.x, is_step, strict=True)
                            if not s and e.get("cat") in HOST_OPS | RUNTIME
                            | {"user_annotation"})
                bounds = [first, *ends]
                self.steps = [(k, a, b) for k, (a, b) in enumerate(
                    zip(bounds[:-1], bounds[1:], strict=True))]
        self.launch = {e["args"]["correlation"]: float(e["ts"]) for e in self.x
                       if e.get("cat") in RUNTIME and "correlation" in e.get("args", {})}
        self.runtime_names = {e["name"] for e in self.x if e.get("cat") in RUNTIME}
        self.memory = [e for e in ev if e.get("ph") in ("i", "I")
                       and e.get("name") == "[memory]"]

    def step_of(self, task: dict[str, Any]) -> int | None:
        """The ProfilerStep whose host span holds the task's runtime launch."""
        ts = self.launch.get(task.get("args", {}).get("correlation"))
        if ts is None:
            return None
        return next((s for s, a, b in self.steps if a <= ts < b), None)

    def comm(self, family: str | None = None) -> list[dict[str, Any]]:
        pats = [COMM[family]] if family else list(COMM.values())
        return [e for e in self.device if any(re.search(p, e["name"]) for p in pats)]

    @property
    def dist(self) -> dict[str, Any]:
        return self.doc.get("distributedInfo") or {}

    def device_peak(self) -> float | None:
        """Largest allocated bytes of a device: ``Total Allocated``, or the running sum of
        ``Bytes`` per device when the trace has no totals (PyTorch <= 1.9)."""
        dev = [e for e in self.memory
               if e["args"].get("Device Type", 1) != 0 and e["args"].get("Device Id", 0) >= 0]
        if not dev:
            return None
        if any("Total Allocated" in e["args"] for e in dev):
            return max(float(e["args"]["Total Allocated"]) for e in dev)
        run: dict[int, float] = defaultdict(float)
        peak = -np.inf
        for e in sorted(dev, key=lambda e: float(e["ts"])):
            run[e["args"]["Device Id"]] += float(e["args"]["Bytes"])
            peak = max(peak, run[e["args"]["Device Id"]])
        return peak


@cache
def raw(name: str) -> Raw:
    return Raw(_path(name))


@cache
def loaded(name: str) -> Any:
    return pk.load(_path(name), cache=False, progress=False)


SINGLE = ["k_resnet50_nw0", "k_resnet50_nw4", "ds_train", "tl_ddp_resnet18_mi300",
          "tl_qwen_h100", "tl_b200_eager", "tl_timesformer_h100", "hta_rank0", "hta_rank1"]


# ----------------------------------------------------------------- every trace

@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@needs_samples
@pytest.mark.parametrize("name", SINGLE)
def test_every_device_task_and_host_operator_is_read(name: str) -> None:
    r, p = raw(name), loaded(name)
    k = p.kernels
    assert len(k) == len(r.device) > 0
    assert k["dur_us"].sum() == pytest.approx(sum(float(e["dur"]) for e in r.device), rel=1e-9)
    # old (Kernel, Memcpy ...) and new (kernel, gpu_memcpy ...) categories alike
    mem = [e for e in r.device if e["cat"] not in ("kernel", "Kernel")]
    assert (k["category"] == "memory").sum() == len(mem)
    assert set(k["type"].dropna()) <= {"kernel", "gpu_memcpy", "gpu_memset"}
    assert len(p.ops) == len(r.host) > 0
    assert (p.ops["cat"] == "cpu_op").sum() == sum(e["cat"] in HOST_OPS for e in r.host)


@needs_samples
@pytest.mark.parametrize("name", SINGLE)
def test_a_step_holds_the_tasks_launched_inside_its_profiler_step(name: str) -> None:
    r, p = raw(name), loaded(name)
    k, s = p.kernels, p.steps
    want: dict[int | None, int] = defaultdict(int)
    for e in r.device:
        want[r.step_of(e)] += 1
    got = k["step"].value_counts(dropna=False)
    assert int(k["step"].isna().sum()) == want.pop(None, 0)
    assert {int(i): int(n) for i, n in got.items() if pd.notna(i)} == dict(want)
    if not r.steps:  # no step marks: one step over the whole trace, said so
        assert len(s) == 1 and s["step"].isna().all()
        assert any("no ProfilerStep" in n for n in p.meta.notes)
        return
    assert sorted(s["step"]) == sorted(want)
    windows = {}
    for step in want:
        tasks = [e for e in r.device if r.step_of(e) == step]
        windows[step] = [min(float(e["ts"]) for e in tasks),
                         max(float(e["ts"]) + float(e["dur"]) for e in tasks)]
    ends = {st: b for st, _a, b in reversed(r.steps)}  # each step's first span
    outside = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in r.device
               if r.step_of(e) is None]
    tails = idle_tails(windows, ends, outside)
    for step, n in want.items():
        a, b = windows[step]
        row = s[s["step"] == step].iloc[0]
        # computing + exposed communication + free = first to last task of the step, and
        # the device's idle time after it while the step's span lasts
        total = row["computing_us"] + row["comm_not_overlapped_us"] + row["free_us"]
        assert total == pytest.approx(b - a + float(tails[step][0]), rel=1e-6), (step, n)


@needs_samples
@pytest.mark.parametrize("name", SINGLE)
def test_preparing_is_the_devices_wait_before_each_steps_first_task(name: str) -> None:
    """Per step: from the ProfilerStep span's start (or the end of the earlier steps'
    device work, if later) to the first task the step launched, less the time the device
    runs tasks of no step in between (Qwen: kernels launched before the trace began);
    read from the raw trace."""
    r, p = raw(name), loaded(name)
    s = p.steps
    if not r.steps:
        assert s["preparing_us"].isna().all()
        return
    windows = {}
    for step, start, _ in r.steps:
        tasks = [e for e in r.device if r.step_of(e) == step]
        if tasks:
            windows[step] = (start, min(float(e["ts"]) for e in tasks),
                             max(float(e["ts"]) + float(e["dur"]) for e in tasks))
    busy = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in r.device
                  if r.step_of(e) is None)

    def busy_between(lo: float, hi: float) -> float:  # the union of ``busy`` in [lo, hi]
        total, reach = 0.0, lo
        for a, b in busy:
            a, b = max(a, reach), min(b, hi)
            if b > a:
                total, reach = total + b - a, b
        return total

    done = -np.inf  # end of the device work of the steps before, in start order
    want = {}
    for step, (host, first, last) in sorted(windows.items(), key=lambda kv: kv[1][1]):
        lo = max(host, done)
        want[step] = max(0.0, first - lo - busy_between(lo, first))
        done = max(done, last)
    got = dict(zip(s["step"].astype(int), s["preparing_us"], strict=True))
    assert got.keys() == want.keys()
    for step, value in want.items():
        # 0.5 µs: epoch timestamps in µs do not keep every ns as float64 ns (about 0.1 µs)
        assert got[step] == pytest.approx(value, abs=0.5), step


@needs_samples
def test_a_data_loader_wait_is_counted_once_in_the_step_basis() -> None:
    """PyTorch 1.9 ResNet-50 without loader workers: the batch is fetched at the start of
    each ProfilerStep (about 57 ms of 176), before the step's first kernel. The shares of
    the findings are of the device window plus that wait, which is then close to the
    ProfilerStep span itself (the host's view of the step), not of the window alone."""
    r, p = raw("k_resnet50_nw0"), loaded("k_resnet50_nw0")
    host_mean = float(np.mean([b - a for _, a, b in r.steps]))
    found = pk.advise(p)
    stall = next(f for f in found if f.rule == "data_loading")
    assert stall.step_ms * 1e3 == pytest.approx(host_mean, rel=0.03)
    s = p.steps
    device_mean = float((s["computing_us"] + s["comm_not_overlapped_us"] + s["free_us"]).mean())
    assert device_mean < 0.7 * host_mean  # the window alone leaves the wait out
    assert 0 < stall.ms_per_step < stall.step_ms  # a share of the step, under 100 %


@needs_samples
def test_tasks_launched_before_the_trace_belong_to_no_step() -> None:
    """TraceLens' Qwen trace: 509 tasks launched before the trace began run in the first
    14 ms of ProfilerStep#6; counted in, the 34.9 ms step would read 49.3 ms."""
    r, p = raw("tl_qwen_h100"), loaded("tl_qwen_h100")
    before = [e for e in r.device if e["args"].get("correlation") not in r.launch]
    assert len(before) == 509 == int(p.kernels["step"].isna().sum())
    mine = [e for e in r.device if r.step_of(e) == 6]
    span = (max(float(e["ts"]) + float(e["dur"]) for e in mine)
            - min(float(e["ts"]) for e in mine))
    row = p.steps.iloc[0]
    step_us = row["computing_us"] + row["comm_not_overlapped_us"] + row["free_us"]
    assert step_us == pytest.approx(span, rel=1e-6)
    gpu_lane = next(e for e in r.x if e.get("cat") == "gpu_user_annotation")
    assert step_us == pytest.approx(float(gpu_lane["dur"]), rel=0.01)  # Kineto's own 34.9 ms
    assert any("509 GPU tasks were launched before the trace began" in n
               for n in p.meta.notes)


@needs_samples
def test_the_qwen_model_is_read_from_its_kernels_and_the_operators_before_the_trace() -> None:
    """TraceLens' Qwen trace (inference, one forward pass). Its flash-attention kernels are
    launched by ``aten::_flash_attention_forward``, whose q, k, v are (batch, sequence,
    heads, head size); its embedding kernel is launched by ``aten::index_select`` (inside
    ``aten::embedding``), so the kernels alone do not show the vocabulary, the layer count
    or the micro-batches: the host operators, which all carry their shapes, fill them. The
    model read is Qwen1.5-0.5B as its published config.json gives it (Hugging Face
    ``Qwen/Qwen1.5-0.5B-Chat``: 24 layers, hidden 1024, 16 heads and 16 key/value heads,
    intermediate 2816, vocabulary 151,936, bias on q/k/v only)."""
    r = raw("tl_qwen_h100")
    flash = [e for e in r.host if e["name"] == "aten::_flash_attention_forward"]
    b, seq, heads, d = flash[0]["args"]["Input Dims"][0]  # (b, s, h, d)
    embedding = [e for e in r.host if e["name"] == "aten::embedding"]
    vocab, hidden = embedding[0]["args"]["Input Dims"][0]
    gather = [e for e in r.device if "indexSelect" in e["name"]]
    assert len(gather) == 1 and not [e for e in r.device if "embedding" in e["name"].lower()]
    job = pk.infer_job(loaded("tl_qwen_h100"))
    m = job.model
    assert m is not None
    assert (m.num_layers, m.hidden_size, m.num_attention_heads, m.num_kv_heads,
            m.ffn_hidden_size, m.vocab_size, m.bias) == (24, 1024, 16, 16, 2816, 151936,
                                                          "qkv")
    assert len(flash) == m.num_layers  # one attention call per layer, one forward pass
    assert (heads, d, seq, vocab, hidden) == (m.num_attention_heads, m.head_dim,
                                              m.seq_length, m.vocab_size, m.hidden_size)
    assert b == job.parallel.micro_batch_size == 16


@needs_samples
@pytest.mark.parametrize(("name", "families"), [
    ("ds_train", {"deepep": 32}), ("tl_b200_eager", {"nccl": 1, "symm_mem": 73}),
    ("hta_rank0", {"nccl": 10}), ("hta_rank1", {"nccl": 10}),
    ("k_resnet50_nw0", {}), ("tl_qwen_h100", {})])
def test_communication_of_every_family_is_communication(name: str,
                                                        families: dict[str, int]) -> None:
    r, p = raw(name), loaded(name)
    for fam, n in families.items():
        assert len(r.comm(fam)) == n  # the independent reading agrees with the table
    comm = r.comm()
    k = p.kernels
    assert (k["category"] == "communication").sum() == len(comm) == sum(families.values())
    co = p.comm_ops
    assert len(co) == len(comm)
    assert co["elapse_us"].sum() == pytest.approx(sum(float(e["dur"]) for e in comm),
                                                  rel=1e-9)
    assert dict(co["family"].value_counts()) == families if families else len(co) == 0


@needs_samples
def test_deepep_dispatch_and_combine_are_the_steps_communication() -> None:
    """About 113 ms of the 129 ms DeepEP step is dispatch / combine: communication."""
    r, p = raw("ds_train"), loaded("ds_train")
    comm_ms = sum(float(e["dur"]) for e in r.comm("deepep")) / 1e3
    assert comm_ms == pytest.approx(113.0, abs=0.5)
    row = p.steps.iloc[0]
    # the union of the communication kernels (they do not overlap each other here)
    assert row["communication_us"] / 1e3 == pytest.approx(comm_ms, rel=0.01)
    kinds = pk.analysis.comm_summary(p)
    assert kinds.iloc[0]["op_type"] == "alltoall"
    found = pk.advise(p)
    exposed = next(f for f in found if f.rule == "exposed_communication")
    assert "dispatch and combine" in exposed.recommendation


@needs_samples
@pytest.mark.parametrize("name", SINGLE)
def test_rank_world_size_and_device(name: str) -> None:
    r, p = raw(name), loaded(name)
    m = p.meta
    if "rank" in r.dist:
        assert m.rank == r.dist["rank"] and m.world_size == r.dist["world_size"]
        assert any("from distributedInfo.rank" in n for n in m.notes)
    else:
        assert m.world_size is None
        explicit = re.search(r"(?:rank|worker)[-_]?(\d+)", _path(name).name)
        assert m.rank == (int(explicit.group(1)) if explicit else 0)
        assert m.rank != 1016005  # a job id in the name is not a rank
        how = "the file name" if explicit else "its position"
        assert any(n.startswith("rank:") and how in n for n in m.notes), m.notes
    names = [d["name"] for d in r.doc.get("deviceProperties", [])]
    assert m.extra["devices"] == names
    amd = "roctracer_version" in r.doc or any(n.startswith("hip") for n in r.runtime_names)
    assert m.extra["vendor"] == ("amd" if amd else "nvidia")
    assert m.device_type == "gpu"


@needs_samples
@pytest.mark.parametrize("name", SINGLE)
def test_device_memory_only_from_device_memory_events(name: str) -> None:
    r, p = raw(name), loaded(name)
    peaks = pk.analysis.memory_peaks(p)
    dev = peaks[peaks["component"] == "allocator"]
    want = r.device_peak()
    job = pk.infer_job(p)  # no crash under pandas 2 or 3, whatever the memory events
    if want is None:
        assert dev.empty
        assert job.peak_memory_bytes is None  # host samples are not the device's peak
    else:
        assert float(dev["peak_allocated_bytes"].max()) == pytest.approx(want, rel=0.01)
        assert job.peak_memory_bytes == pytest.approx(want, rel=0.01)
    host = [e for e in r.memory if e["args"].get("Device Type") == 0]
    assert int((p.memory["component"] == "host").sum()) == len(host)


@needs_samples
def test_old_schema_links_device_tasks_to_their_operators() -> None:
    """PyTorch 1.9 writes the operator link of a device task as ``external id``."""
    r, p = raw("k_resnet50_nw0"), loaded("k_resnet50_nw0")
    ids = {e["args"]["External id"] for e in r.host if e["cat"] == "Operator"}
    linked = sum(float(e["dur"]) for e in r.device if e["args"].get("external id") in ids)
    assert linked > 0
    assert p.ops["device_dur_us"].sum() == pytest.approx(linked, rel=1e-9)


@needs_samples
def test_rocm_trace_reads_hip_launches() -> None:
    r, p = raw("tl_ddp_resnet18_mi300"), loaded("tl_ddp_resnet18_mi300")
    assert {n for n in r.runtime_names if n.startswith("hip")} >= {
        "hipLaunchKernel", "hipExtModuleLaunchKernel"}
    launched = [e for e in r.device if e["args"].get("correlation") in r.launch]
    assert len(launched) == len(r.device)
    # each kernel knows the operator that launched it
    assert p.kernels["op_name"].notna().mean() > 0.99
    for f in pk.advise(p):
        assert not re.search(r"CUDA|NVLink|nvidia", " ".join(
            (f.title, f.evidence, f.recommendation))), f.rule


@needs_samples
@pytest.mark.parametrize("name", SINGLE)
def test_advice_has_no_nan_nor_empty_step_counts(name: str) -> None:
    p = loaded(name)
    text = " ".join(" ".join((f.title, f.evidence, f.recommendation)) for f in pk.advise(p))
    assert not re.search(r"\bnan\b|over 0 step", text)
    ev = pk.infer_job(p).evidence
    assert not ev.astype(str).apply(lambda c: c.str.contains("over 0 step")).any().any()


# ----------------------------------------------------------------- CPU gloo run

def _union(iv: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _length(iv: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in _union(iv))


def _minus(a: list[tuple[float, float]], b: list[tuple[float, float]]
           ) -> list[tuple[float, float]]:
    out = []
    for s, e in _union(a):
        cur = s
        for x, y in _union(b):
            if y <= cur or x >= e:
                continue
            if x > cur:
                out.append((cur, x))
            cur = max(cur, y)
        if cur < e:
            out.append((cur, e))
    return out


@pytest.fixture(scope="module")
def tiny() -> Any:
    return pk.load(TINY, cache=False, progress=False)


@pytest.mark.parametrize("rank", [0, 1])
def test_cpu_run_collectives_are_the_gloo_spans(tiny: Any, rank: int) -> None:
    r = raw(f"tiny{rank}")
    gloo = [e for e in r.host if e["name"].startswith("gloo:")]
    co = tiny.comm_ops[tiny.comm_ops["rank"] == rank]
    assert len(co) == len(gloo) == 2
    assert sorted(co["elapse_us"]) == pytest.approx(sorted(float(e["dur"]) for e in gloo),
                                                    abs=1e-3)
    assert set(co["family"]) == {"gloo"}
    # on gloo's own threads, not the training thread
    main = {e["tid"] for e in r.host if e["name"].startswith("aten::")}
    assert not ({e["tid"] for e in gloo} & main)


@pytest.mark.parametrize("rank", [0, 1])
def test_cpu_run_steps_split_from_host_events(tiny: Any, rank: int) -> None:
    """Computing: each thread's non-collective events less its time inside collectives;
    communication: the collectives (c10d on the training thread, gloo on its own)."""
    r = raw(f"tiny{rank}")
    s = tiny.steps[tiny.steps["rank"] == rank].set_index("step")
    for step, a, b in r.steps:
        inside = [(max(float(e["ts"]), a), min(float(e["ts"]) + float(e["dur"]), b), e)
                  for e in r.host if float(e["ts"]) < b and float(e["ts"]) + float(e["dur"]) > a]
        comm = [(x, y) for x, y, e in inside if re.match(HOST_COMM, e["name"])]
        comp: list[tuple[float, float]] = []
        for tid in {e["tid"] for _, _, e in inside}:
            mine = [(x, y) for x, y, e in inside
                    if e["tid"] == tid and not re.match(HOST_COMM, e["name"])]
            own = [(x, y) for x, y, e in inside
                   if e["tid"] == tid and re.match(HOST_COMM, e["name"])]
            comp += _minus(mine, own)
        row = s.loc[step]
        assert row["total_us"] == pytest.approx(b - a, abs=1e-3)
        assert row["communication_us"] == pytest.approx(_length(comm), abs=1e-2)
        assert row["computing_us"] == pytest.approx(_length(comp), abs=1e-2)
        hidden = _length(comm) - _length(_minus(comm, comp))
        assert row["overlapped_us"] == pytest.approx(hidden, abs=1e-2)
        assert row["free_us"] == pytest.approx(b - a - _length(comm + comp), abs=1e-2)


def _self_times(events: list[dict[str, Any]]) -> dict[str, float]:
    """Self time per name: each event's duration less that of the events directly
    inside it on the same thread (a stack walk per thread)."""
    out: dict[str, float] = defaultdict(float)
    by_tid: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        by_tid[e["tid"]].append(e)
    for evs in by_tid.values():
        evs.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
        stack: list[list[Any]] = []  # [end, name, self]
        for e in evs:
            ts, end = float(e["ts"]), float(e["ts"]) + float(e["dur"])
            while stack and stack[-1][0] <= ts:
                done = stack.pop()
                out[done[1]] += max(done[2], 0.0)
            if stack:
                stack[-1][2] -= float(e["dur"])
            stack.append([end, e["name"], float(e["dur"])])
        for done in stack:
            out[done[1]] += max(done[2], 0.0)
    return out


def test_cpu_run_operators_are_host_operators_by_self_time(tiny: Any) -> None:
    top = pk.analysis.top_operators(tiny, n=None)
    assert len(top) and any("CPU-only" in n for n in top.attrs["notes"])
    want: dict[str, float] = defaultdict(float)
    for rank in (0, 1):
        for name, us in _self_times(raw(f"tiny{rank}").host).items():
            want[name] += us
    for name in ("aten::mm", "aten::mul", "aten::addmm"):
        if name in want:
            got = float(top.loc[top["key"] == name, "total_us"].iloc[0])
            assert got == pytest.approx(want[name], rel=0.01), name
    assert "gloo:all_reduce" not in set(top["key"])  # communication is not an operator
    with_comm = pk.analysis.top_operators(tiny, n=None, include_communication=True)
    assert with_comm.loc[with_comm["key"] == "gloo:all_reduce", "category"].iloc[0] == \
        "communication"


def test_cpu_run_timeline_and_advice_see_gloo(tiny: Any) -> None:
    t = pk.analysis.timeline(tiny, max_events=None)
    assert (t["name"] == "gloo:all_reduce").any()
    found = pk.advise(tiny)
    assert any(f.area == "communication" for f in found)
    for f in found:
        assert not DEVICE_TERMS.search(" ".join((f.title, f.evidence, f.recommendation))), \
            f.rule


# ----------------------------------------------------------------- ranks from names

@pytest.mark.parametrize(("name", "rank"), [
    ("rank3.pt.trace.json", 3), ("rank_3.json", 3), ("rank-3.json.gz", 3),
    ("sampled_rank-0.json.gz", 0), ("worker3.pt.trace.json", 3),
    ("worker0.1623143089861.pt.trace.json.gz", 0), ("trace_rank12_step5.json", 12),
    ("Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", None),  # a job id
    ("host_21387.1623143089861.pt.trace.json", None),    # a pid and a timestamp
    ("train.json", None), ("trace_3.pt.trace.json", None)])
def test_rank_only_from_explicit_name_patterns(name: str, rank: int | None) -> None:
    assert rank_from_name(name) == rank


def _bare(path: Path, events: list[dict[str, Any]]) -> None:
    path.write_text(json.dumps(events))


def _tiny_events(t0: float = 1.0e15, dur: float = 100.0) -> list[dict[str, Any]]:
    return [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
             "ts": t0, "dur": dur, "args": {"External id": 1}}]


def test_numbered_file_names_are_ranks_only_as_a_set(tmp_path: Path) -> None:
    """``_0`` .. ``_{n-1}`` over a folder's traces are ranks; a set of pids is not."""
    a = tmp_path / "numbered"
    a.mkdir()
    for i in (1, 0):
        _bare(a / f"trace_{i}.pt.trace.json", _tiny_events())
    c = pk.load(a, cache=False, progress=False)
    for prof in c:
        assert Path(prof.meta.path).name == f"trace_{prof.meta.rank}.pt.trace.json"
        assert any("numbered _0 .. _1" in n for n in prof.meta.notes)
    b = tmp_path / "pids"
    b.mkdir()
    for pid in (21387, 21402):
        _bare(b / f"host_{pid}.pt.trace.json", _tiny_events())
    c = pk.load(b, cache=False, progress=False)
    assert c.ranks == [0, 1]
    for prof in c:
        # numbers of their own, in name order: the notes say how they were given
        assert any("from its position (the numbers no other profile uses, in name order)"
                   in n for n in prof.meta.notes), prof.meta.notes


# ----------------------------------------------------------------- separate runs

def _start_ns(r: Raw) -> int:
    base = int(r.doc.get("baseTimeNanoseconds", 0) or 0)
    ts = min(float(e["ts"]) for e in r.x if e.get("cat") != "Trace")
    return int(ts * 1000) + (0 if ts > 1e14 else base)


@needs_samples
def test_separate_runs_in_one_folder_are_not_merged(tmp_path: Path) -> None:
    names = ["tl_qwen_h100", "k_resnet50_nw4", "ds_train", "k_resnet50_nw0"]
    for n in names:  # links to the shared files: nothing is copied
        (tmp_path / _path(n).name).symlink_to(_path(n))
    with pytest.raises(pk.RunsFound) as err:
        pk.load(tmp_path, cache=False, progress=False)
    runs = err.value.runs
    assert runs == pk.runs(tmp_path)
    order = sorted(names, key=lambda n: _start_ns(raw(n)))
    assert [Path(r.paths[0]).name for r in runs] == [_path(n).name for n in order]
    assert [r.id for r in runs] == list(range(4))
    for r, n in zip(runs, order, strict=True):
        assert r.start_ns == pytest.approx(_start_ns(raw(n)), abs=60e9)  # within a minute
        assert r.world_size == raw(n).dist.get("world_size")
        d = r.to_dict()
        assert {"id", "name", "label", "ranks", "framework", "start"} <= set(d)
        assert d["framework"] == "pytorch"
    # "two profiles claim rank 0" (the two worker0 files) is said, not raised
    assert "two profiles claim rank 0" in str(err.value)
    one = pk.load(tmp_path, run=2, cache=False, progress=False)
    assert [Path(p.meta.path).name for p in one] == [Path(runs[2].paths[0]).name]
    by_name = pk.load(tmp_path, run=runs[3].name, cache=False, progress=False)
    assert [Path(p.meta.path).name for p in by_name] == [Path(runs[3].paths[0]).name]
    with pytest.raises(pk.ProfileError, match="not among the runs found"):
        pk.load(tmp_path, run=7, cache=False)


def _dist_trace(path: Path, rank: int, world: int, t0: float) -> None:
    events = [*_tiny_events(t0), {"ph": "X", "cat": "user_annotation",
                                  "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": t0,
                                  "dur": 200.0, "args": {}}]
    path.write_text(json.dumps({"traceEvents": events, "distributedInfo": {
        "backend": "nccl", "rank": rank, "world_size": world}}))


def test_runs_told_apart_by_world_size_time_and_rank(tmp_path: Path) -> None:
    t0 = 1.7e15  # µs since the epoch (2023)
    _dist_trace(tmp_path / "a_rank0.json", 0, 2, t0)
    _dist_trace(tmp_path / "a_rank1.json", 1, 2, t0 + 50)
    _dist_trace(tmp_path / "b_rank0.json", 0, 4, t0 + 10)        # another world size
    _dist_trace(tmp_path / "c_rank0.json", 0, 2, t0 + 3600e6)    # an hour later
    runs = pk.runs(tmp_path)
    groups = sorted(sorted(Path(p).name for p in r.paths) for r in runs)
    assert groups == [["a_rank0.json", "a_rank1.json"], ["b_rank0.json"], ["c_rank0.json"]]
    two = next(r for r in runs if len(r.paths) == 2)
    c = pk.load(tmp_path, run=two.id, cache=False, progress=False)
    assert c.ranks == [0, 1]


def test_one_run_folders_load_as_before() -> None:
    assert len(pk.runs(TINY)) == 1
    c = pk.load(TINY, cache=False, progress=False)
    assert c.ranks == [0, 1] and not any(n.startswith("run:") for n in c.meta.notes)
    if samples_dir() is not None:
        assert len(pk.runs(sample(HTA))) == 1


def test_detect_lists_every_run(tmp_path: Path) -> None:
    _dist_trace(tmp_path / "x_rank0.json", 0, 2, 1.7e15)
    _dist_trace(tmp_path / "y_rank0.json", 0, 2, 1.7e15 + 7200e6)
    kind, sources = detect.detect(tmp_path)
    assert kind == "cluster" and len(sources) == 2


def test_gpu_job_with_host_collectives_lists_them() -> None:
    """The project's H100 recording ran DDP over gloo: no NCCL kernel, the all-reduces are
    the host's ``gloo:all_reduce`` spans (read from the raw file)."""
    data = ROOT / "tests" / "data" / "kineto_llama_h100"
    c = pk.load(data, cache=False, progress=False)
    for rank in (0, 1):
        r = Raw(data / f"rank{rank}.pt.trace.json.gz")
        gloo = [e for e in r.host if e["name"].startswith("gloo:")]
        co = c.comm_ops[c.comm_ops["rank"] == rank]
        assert len(co) == len(gloo) > 0 and set(co["family"]) == {"gloo"}
        assert co["elapse_us"].sum() == pytest.approx(sum(float(e["dur"]) for e in gloo),
                                                      rel=1e-9)
        assert not r.comm()  # and nothing on the GPU is communication
    assert (c.kernels["category"] != "communication").all()
