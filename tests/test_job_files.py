"""infer_job on real profiles: the inferred fields equal what the files say.

Every expected value is read here from the files themselves (csv / json / gzip), not from
perfkit's tables: the real torch_npu export (a CNN: no transformer to read), the real
Kineto traces of a tiny Llama trained with 2-rank DDP, the HTA sample of a 128-rank job,
the legacy MindInsight pipeline sample (those of other projects are read from
shared/samples: tests/shared_samples.py), and the MindSpore 2.10 CPU profile recorded here.
"""

from __future__ import annotations

import csv
import gzip
import json
import statistics
from pathlib import Path

import pytest
from raw_kineto import Iterations, raw_events
from shared_samples import HTA as HTA_SAMPLE
from shared_samples import MINDINSIGHT, PT_LEVEL1, sample

import perfkit as pk
from perfkit.analysis.steps import step_basis

ROOT = Path(__file__).resolve().parents[1]
ASCEND = sample(PT_LEVEL1)
TINY = ROOT / "data" / "kineto-tiny-llama"
HTA = sample(HTA_SAMPLE)
MS_CPU = ROOT / "data" / "mindspore-cpu-tiny-llama"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


# ----------------------------------------------------------------------------- Ascend

def _kernel_rows(folder: Path) -> list[dict[str, str]]:
    rows = []
    for path in sorted(folder.rglob("kernel_details.csv")):
        with path.open(newline="", encoding="utf-8") as fh:
            rows += list(csv.DictReader(fh))
    return rows


@pytest.mark.shared_samples
def test_real_ascend_export() -> None:
    folder = ASCEND
    job = pk.infer_job(pk.load(folder, cache=False))
    # the communication matrix numbers the all-reduce group's members 0..7
    members = set()
    kinds = set()
    for path in folder.rglob("communication_matrix.json"):
        for step in json.loads(path.read_text()).values():
            for kind, ops in step.items():
                for op, links in ops.items():
                    kinds.add((kind, op.split("-")[0]))
                    for link in links:
                        members.update(int(x) for x in link.split("-"))
    assert kinds == {("collective", "allreduce")}  # one all-reduce group, no p2p
    assert job.world_size == max(members) + 1 == 8
    assert (job.parallel.dp, job.parallel.tp, job.parallel.pp) == (8, 1, 1)
    # one unnamed group of all 8 ranks: the data-parallel group, or as well a tp group of
    # 8, so tp = 1 and dp = 8 are assumed, not read (tests/test_job_unnamed_world.py)
    assert job.source("dp") == job.source("tp") == "default"
    assert "communication_matrix" in job.detail("dp") and "assumed" in job.detail("dp")
    rows = _kernel_rows(folder)
    # matrix products take FLOAT inputs: fp32
    types = {t for r in rows if "MatMul" in r["Type"] for t in r["Input Data Types"].split(";")}
    assert types == {"FLOAT"} and job.dtype == "fp32"
    # tasks on AI_VECTOR_CORE exist from the 910B generation on
    assert "AI_VECTOR_CORE" in {r["Accelerator Core"] for r in rows}
    assert job.hardware == pk.Hardware.preset("ascend-910b")
    # a CNN: no attention kernel, so no transformer model, and the evidence says why
    assert not any("Attention" in r["Type"] for r in rows)
    assert job.model is None and "no attention kernel" in job.detail("num_layers")
    # ParallelConfig needs a number: its default, said as such
    assert job.value("micro_batch_size") == 1 and job.source("micro_batch_size") == "default"
    assert "ParallelConfig's default 1" in job.detail("micro_batch_size")
    # the measured step: the slowest rank's step_trace_time.csv total (one step), the
    # device span and the Preparing before it
    totals = []
    for path in folder.rglob("step_trace_time.csv"):
        with path.open(newline="", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                totals.append(float(r["Computing"]) + float(r["Communication(Not Overlapped)"])
                              + float(r["Free"]) + float(r["Preparing"]))
    assert job.step_time_s == pytest.approx(max(totals) / 1e6)


# ----------------------------------------------------------------------------- Kineto

def _events(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def test_real_kineto_tiny_llama() -> None:
    job = pk.infer_job(pk.load(TINY, cache=False))
    docs = [_events(p) for p in sorted(TINY.glob("*.json.gz"))]
    info = docs[0]["distributedInfo"]
    assert job.world_size == info["world_size"] == 2
    (group,) = info["pg_config"]
    assert group["pg_desc"] == "default_pg" and job.parallel.dp == group["pg_size"] == 2
    assert (job.parallel.tp, job.parallel.pp) == (1, 1)
    ev = docs[0]["traceEvents"]
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    steps = [e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")]
    # attention inputs (batch, heads, sequence, head size)
    b, a, s, d = next(e["args"]["Input Dims"][0] for e in ops
                      if e["name"] == "aten::scaled_dot_product_attention")
    vocab, hidden = next(e["args"]["Input Dims"][0] for e in ops
                         if e["name"] == "aten::embedding")
    outs = [e["args"]["Input Dims"][1][0] for e in ops if e["name"] == "aten::linear"]
    qkv = next(o for o in outs if o not in (hidden, vocab) and o < 4 * hidden and
               (o - a * d) % (2 * d) == 0)
    kv = (qkv - a * d) // (2 * d)
    ffn = max((o for o in outs if o != qkv), key=outs.count)
    # layers: backward attention kernels in one step, one per layer and micro-batch
    first = steps[0]
    inside = [e for e in ops if first["ts"] <= e["ts"] < first["ts"] + first["dur"]]
    layers = sum(e["name"].endswith("_attention_for_cpu_backward") for e in inside)
    micro = sum(e["name"] == "aten::embedding" for e in inside)
    assert micro == 1
    expected = pk.ModelSpec(num_layers=layers, hidden_size=hidden, num_attention_heads=a,
                            num_kv_heads=kv, seq_length=s, vocab_size=vocab,
                            ffn_hidden_size=ffn, mlp="gated")
    assert (layers, hidden, a, kv, s, vocab, ffn) == (2, 64, 4, 4, 64, 256, 256)
    assert job.model == expected
    assert (job.parallel.micro_batch_size, job.parallel.num_micro_batches) == (b, micro)
    assert job.global_batch_size == 2 * b * micro
    types = {t for e in ops if e["name"] == "aten::linear" for t in e["args"]["Input type"] if t}
    assert types == {"float"} and job.dtype == "fp32"
    # a CPU run: no device, no hardware preset, and the evidence says so
    assert all(doc["deviceProperties"] == [] for doc in docs)
    assert job.hardware is None and "CPU" in job.detail("hardware")
    # the measured step: per step the slowest rank's ProfilerStep span, median over steps
    spans: dict[str, list[float]] = {}
    for doc in docs:
        for e in doc["traceEvents"]:
            if str(e.get("name", "")).startswith("ProfilerStep#"):
                spans.setdefault(e["name"], []).append(e["dur"])
    want = statistics.median(max(v) for v in spans.values()) / 1e6
    assert job.step_time_s == pytest.approx(want, rel=1e-6)
    # of the two ranks' spans, the slowest's per step, as the evidence says
    assert len(docs) == 2 and all(len(v) == 2 for v in spans.values())
    assert job.detail("step_time_s").startswith(
        f"median over {len(spans)} steps of the slowest rank's step time")


@pytest.mark.shared_samples
def test_a_trace_without_profiler_steps_says_its_steps_were_inferred() -> None:
    """AMD MI300 ResNet-18 (TraceLens): no ProfilerStep#N, 5 host Optimizer.step#SGD.step
    annotations (read with gzip and json). The job's step time is the median wall of its 5
    training iterations (:class:`raw_kineto.Iterations`), and its evidence says that they
    were inferred from the optimizer's annotations, in the words of the step time's basis
    (:func:`perfkit.analysis.steps.step_basis`): it said "median over 5 steps" as if the
    profiler had marked them."""
    path = sample("wild/tl_ddp_resnet18_mi300/train_resnet18.json.gz")
    events = raw_events(path)
    assert not [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    marks = [e["name"] for e in events if e.get("ph") == "X" and e.get("cat") ==
             "user_annotation" and e["name"].startswith("Optimizer.step#")]
    assert marks == ["Optimizer.step#SGD.step"] * 5
    walls = Iterations(events).walls()
    assert len(walls) == 5
    profile = pk.load(path, cache=False, progress=False)
    job = pk.infer_job(profile)
    assert job.step_time_s == pytest.approx(
        float(statistics.median(w for _, w in walls.values())) / 1e6, rel=1e-9)
    detail = job.detail("step_time_s")
    # one trace file, one rank: its step, not the "slowest rank's" of one
    assert detail.startswith("median over 5 steps of the one rank's step time")
    said = ("the steps are iterations inferred from the optimizer's Optimizer.step#SGD.step "
            "annotations, as the trace has no ProfilerStep marks")
    assert detail.endswith("; " + said)
    assert step_basis(pk.analysis.step_breakdown(profile)).endswith("; " + said)
    # a trace with ProfilerStep marks says nothing of the kind
    marked = pk.infer_job(pk.load(TINY, cache=False, progress=False))
    assert "inferred" not in marked.detail("step_time_s")


@pytest.mark.shared_samples
def test_real_kineto_hta_sample() -> None:
    job = pk.infer_job(pk.load(HTA, cache=False))
    doc = _events(HTA / "sampled_rank-0.json.gz")
    assert job.world_size == doc["distributedInfo"]["world_size"] == 128
    assert "pg_config" not in doc["distributedInfo"]
    # no process-group table: the layout is a stated default, not a reading
    assert job.parallel.dp == 128 and job.source("dp") == "default"
    assert "deviceProperties" not in doc and job.hardware is None
    names = {e["name"] for e in doc["traceEvents"] if e.get("cat") == "cpu_op"}
    assert not any("attention" in n for n in names)  # not a transformer
    assert job.model is None


# ----------------------------------------------------------------------------- MindSpore

def test_real_mindspore_cpu_profile() -> None:
    job = pk.infer_job(pk.load(MS_CPU, cache=False))
    (framework,) = MS_CPU.rglob("cpu_framework_*.txt")
    lines = [ln.split(";") for ln in framework.read_text().splitlines()]

    def dims(fields: list[str]) -> list[list[int]]:
        out = []
        for f in fields:
            if f.startswith("input_") and "[" in f:
                inner = f.split("[", 1)[1].rstrip("]")
                out.append([int(x) for x in inner.split(",") if x.strip()])
        return out

    qk = [dims(ln[3:]) for ln in lines if ln[0] == "BatchMatMul"]
    b, a, s, d = next(x[0] for x in qk if x[0][2] == x[1][3] and x[0][3] == x[1][2])
    (vocab, hidden), _ = next(dims(ln[3:]) for ln in lines if ln[0] == "Gather")
    weights = [dims(ln[3:])[1] for ln in lines if ln[0] == "MatMul"]
    widths = {w[0] for w in weights if len(w) == 2 and w[1] == hidden}
    kv = min(w for w in widths if w < a * d) // d
    ffn = max(w for w in widths if w not in (vocab,))
    assert (b, a, s, d, vocab, hidden, kv, ffn) == (2, 4, 24, 16, 96, 64, 2, 160)
    m = job.model
    assert (m.hidden_size, m.num_attention_heads, m.num_kv_heads, m.head_dim, m.seq_length,
            m.vocab_size, m.ffn_hidden_size, m.mlp, m.num_layers) == \
        (hidden, a, kv, d, s, vocab, ffn, "gated", 2)
    assert job.parallel.micro_batch_size == b
    # MindSpore's CPU profile records no data types and no device
    assert not any("Type" in ln[0] for ln in lines) and job.dtype is None
    assert job.hardware is None


# ----------------------------------------------------------------------------- configs

BASELINE = ROOT / "data" / "simulated" / "llama2-13b-baseline-dp16"
CONFIGS = ROOT / "tests" / "data" / "configs"
LOGS = ROOT / "tests" / "data" / "logs"


@pytest.fixture(scope="module")
def baseline_profile() -> pk.Cluster:
    return pk.load(BASELINE, cache=False)


@pytest.fixture(scope="module")
def baseline(baseline_profile) -> pk.Job:
    return pk.infer_job(baseline_profile)


def test_the_bundled_13b_profile_describes_what_was_profiled(baseline: pk.Job) -> None:
    # 8 of Llama2-13B's 40 layers were simulated: the job has 8
    assert baseline.model.num_layers == 8 and baseline.model.name == "llama2-13b"
    assert "8 of its 40 layers" in baseline.detail("name")
    assert baseline.problems() == []


def test_a_mindformers_yaml_wins_and_the_guard_names_the_layers(baseline: pk.Job,
                                                               baseline_profile) -> None:
    from perfkit.widgets.summary import job_summary

    path = CONFIGS / "llama2_13b_full.yaml"
    import yaml

    doc = yaml.safe_load(path.read_text())
    job = baseline.with_config(path)
    assert job.model.num_layers == doc["model"]["model_config"]["num_layers"] == 40
    assert job.source("num_layers") == "config" and path.name in job.detail("num_layers")
    assert job.parallel.dp == doc["parallel_config"]["data_parallel"]
    assert job.observed["num_layers"][0] == 8
    assert "the job has 40 layers (config) but the profile shows 8 (8 per stage)" in \
        job.problems()
    summary = job_summary(job).set_index("key")
    assert summary.loc["mfu", "value"] > 1.0  # 40 layers in the time of 8
    assert "⚠" in summary.loc["mfu", "text"]
    assert "40 layers" in summary.loc["mfu", "warning"]
    # the same through infer_job(config=...)
    again = pk.infer_job(baseline_profile, config=path)
    assert again.model == job.model and again.source("num_layers") == "config"


def test_a_hugging_face_config_and_a_training_log(baseline_profile, tmp_path: Path) -> None:
    hf = {"model_type": "llama", "hidden_size": 5120, "num_hidden_layers": 40,
          "num_attention_heads": 40, "num_key_value_heads": 40, "intermediate_size": 13824,
          "vocab_size": 32000, "max_position_embeddings": 4096, "hidden_act": "silu"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(hf))
    log = LOGS / "mf_old_sink.log"
    times = []
    gbs = None
    for line in log.read_text().splitlines():
        if "per_step_time:" in line:
            times.append(int(line.split("per_step_time:")[1].split("ms")[0]))
        if "global_batch_size:" in line and gbs is None:
            gbs = int(line.split("global_batch_size:")[1])
    job = pk.infer_job(baseline_profile, config=[path, log])
    assert job.model.num_layers == 40 and job.source("hidden_size") == "config"
    assert job.seq_length == 4096 and job.source("seq_length") == "profile"
    assert job.step_time_s == pytest.approx(statistics.median(times[1:]) / 1e3)
    assert job.source("step_time_s") == "config" and log.name in job.detail("step_time_s")
    assert job.global_batch_size == gbs == 32
    # the bundled baseline also runs 32 sequences per step (dp 16 x 2): no disagreement
    assert not any("global batch" in p for p in job.problems())


def test_user_values_win_and_can_be_cleared(baseline: pk.Job) -> None:
    job = baseline.with_overrides(num_layers=40, dp="8", hardware="h100", step_time_s=2.5)
    assert job.model.num_layers == 40 and job.parallel.dp == 8
    assert job.hardware.name == "h100" and job.step_time_s == 2.5
    assert {job.source(n) for n in ("num_layers", "dp", "hardware", "step_time_s")} == {"user"}
    back = job.with_overrides(num_layers=None, dp=None)
    assert back.model.num_layers == 8 and back.source("num_layers") == "profile"
    assert back.parallel.dp == 16 and back.hardware.name == "h100"
    assert job.reset() == baseline
    with pytest.raises(pk.InvalidArgumentError, match="num_layers"):
        baseline.with_overrides(num_layers="many")
    with pytest.raises(pk.InvalidArgumentError, match="field"):
        baseline.with_overrides(layers=40)
    with pytest.raises(pk.PerfkitError, match="tp"):
        baseline.with_overrides(tp=3)  # 40 heads do not split 3 ways
    with pytest.raises(pk.ConfigFileError, match="no such file"):
        baseline.with_config("/no/such/config.yaml")


def test_evidence_has_one_row_per_field_with_a_known_source(baseline: pk.Job) -> None:
    from perfkit.job import JOB_FIELDS, SOURCES

    ev = baseline.evidence
    assert list(ev.columns) == ["field", "value", "source", "detail"]
    assert list(ev["field"]) == list(JOB_FIELDS)
    assert set(ev["source"]) <= set(SOURCES)
    assert ev["detail"].str.len().min() > 0


# ----------------------------------------------------------------------------- MindSpore strategy

LEGACY = sample(MINDINSIGHT) / "cluster_propose"


@pytest.mark.shared_samples
def test_legacy_mindspore_strategy_gives_the_stages_and_world() -> None:
    job = pk.infer_job(pk.load(LEGACY, cache=False))
    # MindInsight names its per-rank analysis ascend_cluster_analyse_{mode}_{stages}_{ranks}
    (name, *_) = sorted(p.name for p in LEGACY.glob("ascend_cluster_analyse_*_0.csv"))
    mode, stages, ranks, _ = name.removeprefix("ascend_cluster_analyse_")\
        .removesuffix(".csv").rsplit("_", 3)
    assert (mode, int(stages), int(ranks)) == ("pipeline-parallel", 2, 4)
    assert job.parallel.pp == int(stages) and job.source("pp") == "profile"
    assert job.world_size == int(ranks)
    # the mode does not say how the rest splits: dp = ranks / stages, said to be a default
    assert job.parallel.dp == 2 and job.source("dp") == "default"


def test_an_hccl_rank_table_gives_the_world_size(tmp_path: Path) -> None:
    table = {"version": "1.0", "server_count": "2", "status": "completed",
             "server_list": [{"server_id": f"s{s}", "device": [
                 {"device_id": str(d), "device_ip": f"10.0.{s}.{d}", "rank_id": str(8 * s + d)}
                 for d in range(8)]} for s in range(2)]}
    path = tmp_path / "rank_table_16.json"
    path.write_text(json.dumps(table))
    job = pk.infer_job(pk.load(ROOT / "data" / "simulated" / "slow-rank", cache=False),
                       config=path)
    assert job.world_size == 16 and job.source("world_size") == "config"
    assert "16 devices on 2 servers" in job.detail("world_size")
    # the profile holds 4 ranks: the guards will say so
    assert "the job has world size 16 (config) but the profile shows 4" in job.problems()


@pytest.mark.parametrize("name, preset", [("NVIDIA H100 80GB HBM3", "h100"),
                                          ("NVIDIA A100-SXM4-80GB", "a100"),
                                          ("NVIDIA H200", "h200"),
                                          ("NVIDIA GeForce RTX 4090", None)])
def test_gpu_hardware_comes_from_the_device_name(tmp_path: Path, name: str, preset) -> None:
    trace = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": name}],
             "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
             "traceEvents": [
                 {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                  "ts": 990, "dur": 20, "args": {}},
                 {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7,
                  "ts": 1000, "dur": 5, "args": {"device": 0, "stream": 7}}]}
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(trace))
    job = pk.infer_job(pk.load(path, cache=False))
    assert name in job.detail("hardware")
    if preset is None:
        assert job.hardware is None and "no preset" in job.detail("hardware")
    else:
        assert job.hardware == pk.Hardware.preset(preset)
        assert job.source("hardware") == "profile"
