"""infer_job on simulated jobs: every field of what was simulated comes back.

Each job is simulated small (two to four layers, one step, no PMU columns) and loaded; the
truth is what was passed to :func:`perfkit.simulate`. The simulator also writes its inputs
under ``perfkit_simulation`` in every ``profiler_metadata.json`` (a teaching scenario's
answer key): the inference must not read it, so one test deletes it and another replaces
it with a wrong answer, and both still recover the truth.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

import perfkit as pk

HW = pk.Hardware.preset("ascend-910b")

#: name -> (model, parallel, simulate() keyword arguments)
JOBS = {
    # dense MHA, gated MLP, a shape no preset has, plain data parallelism
    "dense-gated-dp2": (
        pk.ModelSpec(num_layers=2, hidden_size=256, num_attention_heads=4, seq_length=128,
                     vocab_size=1000, ffn_hidden_size=704, mlp="gated"),
        pk.ParallelConfig(dp=2, micro_batch_size=2, num_micro_batches=1)),
    # grouped-query attention split over tp, full recompute
    "gqa-tp2-full": (
        pk.ModelSpec(num_layers=2, hidden_size=256, num_attention_heads=8, num_kv_heads=2,
                     seq_length=64, vocab_size=1024, ffn_hidden_size=640, mlp="gated"),
        pk.ParallelConfig(dp=2, tp=2, num_micro_batches=2, recompute="full")),
    # plain (GPT-NeoX-like) MLP with LayerNorm, biases and rotary positions; two stages,
    # selective recompute and one fully recomputed layer on the first stage
    "plain-pp2-selective": (
        pk.ModelSpec(num_layers=4, hidden_size=192, num_attention_heads=4, seq_length=96,
                     vocab_size=500, ffn_hidden_size=768, mlp="gpt", norm="layernorm",
                     bias="all", position_embedding="rope"),
        pk.ParallelConfig(pp=2, micro_batch_size=2, num_micro_batches=4,
                          recompute="selective", recompute_layers=(1, 0))),
    # dp x tp x pp with interleaved stages and a sharded optimizer
    "gqa-dp2-tp2-pp2-vpp2": (
        pk.ModelSpec(num_layers=4, hidden_size=256, num_attention_heads=8, num_kv_heads=4,
                     seq_length=64, vocab_size=768, ffn_hidden_size=640, mlp="gated"),
        pk.ParallelConfig(dp=2, tp=2, pp=2, vpp=2, num_micro_batches=4, optimizer_shard=2)),
    # a published shape (the name comes back), two of its layers, tensor parallel
    "llama3-8b-2l-tp2": (
        pk.ModelSpec.preset("llama3-8b", num_layers=2, seq_length=256),
        pk.ParallelConfig(tp=2)),
    # qkv-only biases, plain MLP, pipeline without recompute, four micro-batches of 1
    "plain-qkv-bias-dp2-pp2": (
        pk.ModelSpec(num_layers=2, hidden_size=160, num_attention_heads=5, num_kv_heads=5,
                     seq_length=80, vocab_size=300, ffn_hidden_size=448, mlp="gpt",
                     norm="rmsnorm", bias="qkv", position_embedding="rope"),
        pk.ParallelConfig(dp=2, pp=2, num_micro_batches=4)),
}


def _simulate(root: Path, name: str) -> Path:
    model, parallel = JOBS[name]
    return pk.simulate(model, parallel, HW, steps=1, out=root / name, aic_metrics=None,
                       trace_kernels=False)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("jobs")
    return {name: _simulate(root, name) for name in JOBS}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def _kernel_dtypes(folder: Path) -> set[str]:
    """Input data types of the matrix multiplications, read from kernel_details.csv."""
    seen = set()
    for path in folder.rglob("kernel_details.csv"):
        with path.open(newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                if row["Type"].startswith("MatMul"):
                    seen.update(row["Input Data Types"].split(";"))
    return seen


def _assert_recovers(job: pk.Job, model: pk.ModelSpec, parallel: pk.ParallelConfig) -> None:
    assert job.model == model, (job.model, model)
    assert job.parallel == parallel, (job.parallel, parallel)
    assert job.hardware == HW
    assert job.seq_length == model.seq_length
    assert job.global_batch_size == parallel.dp * parallel.micro_batch_size \
        * parallel.num_micro_batches
    assert job.world_size == parallel.dp * parallel.tp * parallel.pp


@pytest.mark.parametrize("name", list(JOBS))
def test_every_field_of_the_simulated_job_comes_back(simulated, name: str) -> None:
    model, parallel = JOBS[name]
    job = pk.infer_job(pk.load(simulated[name], cache=False))
    _assert_recovers(job, model, parallel)
    # the matrix multiplications' type, read from the files themselves
    assert _kernel_dtypes(simulated[name]) == {"DT_BF16"}
    assert job.dtype == "bf16"
    # nothing that the fields above pin down came from a default
    ev = job.evidence.set_index("field")
    for field in ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
                  "ffn_hidden_size", "vocab_size", "mlp", "dp", "tp", "pp", "vpp",
                  "micro_batch_size", "num_micro_batches", "optimizer_shard", "recompute",
                  "seq_length", "dtype", "hardware"):
        assert ev.loc[field, "source"] == "profile", (field, ev.loc[field, "detail"])
        assert ev.loc[field, "detail"], field


def _rewrite_metadata(folder: Path, change) -> int:
    count = 0
    for path in folder.rglob("profiler_metadata.json"):
        doc = json.loads(path.read_text())
        assert "perfkit_simulation" in doc  # the answer key is there before
        change(doc)
        path.write_text(json.dumps(doc))
        count += 1
    return count


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_answer_key_is_not_read(simulated, tmp_path: Path) -> None:
    name = "gqa-dp2-tp2-pp2-vpp2"
    model, parallel = JOBS[name]
    gone = tmp_path / "no-key"
    shutil.copytree(simulated[name], gone)
    assert _rewrite_metadata(gone, lambda d: d.pop("perfkit_simulation")) == 8
    _assert_recovers(pk.infer_job(pk.load(gone, cache=False)), model, parallel)
    # a wrong answer key changes nothing either
    wrong = tmp_path / "wrong-key"
    shutil.copytree(simulated[name], wrong)
    liar = {"model": {"num_layers": 99, "hidden_size": 8}, "parallel": {"dp": 7}}
    _rewrite_metadata(wrong, lambda d: d.update(perfkit_simulation=liar))
    _assert_recovers(pk.infer_job(pk.load(wrong, cache=False)), model, parallel)


def test_learned_positions_without_rotary_leave_the_heads_unknown(tmp_path: Path) -> None:
    # BSH attention (b, s, a·d) without rotary kernels does not show how a·d splits
    model = pk.ModelSpec(num_layers=2, hidden_size=128, num_attention_heads=4, seq_length=64,
                         vocab_size=400, ffn_hidden_size=512, mlp="gpt")  # learned positions
    out = pk.simulate(model, pk.ParallelConfig(), HW, steps=1, out=tmp_path / "gpt",
                      aic_metrics=None, trace_kernels=False)
    job = pk.infer_job(pk.load(out, cache=False))
    assert job.model is None
    assert job.value("num_attention_heads") is None
    assert "not how it splits into heads" in job.detail("num_attention_heads")
    assert "attention heads" in job.detail("name")
    # what the shapes do show still comes back
    assert job.value("hidden_size") == 128 and job.value("ffn_hidden_size") == 512
    assert job.value("mlp") == "gpt" and job.value("num_layers") == 2
    # and the user can complete it (heads and key/value heads; bias and LayerNorm were read)
    assert job.value("bias") == "all" and job.value("norm") == "layernorm"
    done = job.with_overrides(num_attention_heads=4, num_kv_heads=4,
                              position_embedding="learned")
    assert done.model == model
    assert done.source("num_attention_heads") == "user"
