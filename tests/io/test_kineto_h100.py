"""The real H100 traces (tests/data/kineto_llama_h100): loaded, counted and read as a job.

Expected values come from the raw JSON (counted here with the standard library) and from
the recording script's own settings (tools/make_kineto_llama_gpu.py), not from perfkit.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import perfkit as pk

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto_llama_h100"
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
# the recording script's settings
MICRO_BATCH, SEQ, HIDDEN, FFN, WORLD = 4, 1024, 1024, 2816, 2
LAYERS, HEADS, VOCAB = 4, 16, 32000


def _raw(rank: int) -> dict:
    with gzip.open(DATA / f"rank{rank}.pt.trace.json.gz", "rt") as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def cluster():
    return pk.load(DATA, cache=False)


def test_every_device_task_of_each_rank_is_loaded(cluster):
    assert cluster.ranks == [0, 1]
    k = cluster.kernels
    for rank in (0, 1):
        events = [e for e in _raw(rank)["traceEvents"]
                  if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS]
        mine = k[k["rank"] == rank]
        assert len(mine) == len(events)
        assert mine["dur_us"].sum() == pytest.approx(sum(float(e["dur"]) for e in events),
                                                     rel=1e-9)


def test_job_read_from_the_traces(cluster):
    job = pk.infer_job(cluster)
    assert job.parallel.dp == WORLD  # distributedInfo
    assert job.hardware is not None and job.hardware.name == "h100"  # deviceProperties
    assert job.dtype == "bf16"
    # q, k, v of the cuDNN attention kernels' launching operator: (batch, heads, seq, dim)
    assert job.parallel.micro_batch_size == MICRO_BATCH
    assert job.seq_length == SEQ
    assert job.global_batch_size == MICRO_BATCH * WORLD


def test_gemm_priced_from_the_launching_operator(cluster):
    costs = pk.analysis.operator_costs(cluster)
    qkv = costs[(costs["label"] == "aten::mm")
                & (costs["input_shapes"] == f"{MICRO_BATCH * SEQ},{HIDDEN};{HIDDEN},{3 * HIDDEN}")]
    assert len(qkv) > 0
    want = 2 * MICRO_BATCH * SEQ * HIDDEN * 3 * HIDDEN
    assert (qkv["call_flops"] == want).all()
    # each call counted once: its memset takes no share, its GEMM kernel all of it
    per_call = qkv.groupby(["rank", "op_call"])["flops"].sum()
    assert per_call.to_numpy() == pytest.approx(want, rel=1e-12)
    assert (qkv.loc[qkv["category"] == "memory", "flops"] == 0).all()


def _host_steps(raw: dict) -> list[tuple[int, float, float]]:
    """(step, start, end) of the host's ProfilerStep#N spans (not their GPU-lane copies)."""
    return sorted((int(e["name"].split("#")[1]), float(e["ts"]), float(e["ts"]) + e["dur"])
                  for e in raw["traceEvents"]
                  if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
                  and e.get("cat") == "user_annotation")


def test_each_kernel_is_in_the_step_whose_host_span_launched_it(cluster):
    """Backward kernels are launched by the autograd thread, after the GPU lane's copy of
    ProfilerStep#N has ended: they belong to the host's step all the same."""
    k = cluster.kernels
    for rank in (0, 1):
        raw = _raw(rank)
        steps = _host_steps(raw)
        assert [s for s, _, _ in steps] == [3, 4]
        launch = {e["args"]["correlation"]: float(e["ts"]) for e in raw["traceEvents"]
                  if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
                  and "correlation" in e.get("args", {})}
        want: dict[int, int] = {}
        for e in raw["traceEvents"]:
            if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS:
                ts = launch.get(e["args"].get("correlation"), float(e["ts"]))
                step = next(s for s, a, b in steps if a <= ts < b)
                want[step] = want.get(step, 0) + 1
        mine = k[k["rank"] == rank]
        assert mine["step"].notna().all()
        assert mine.groupby("step").size().to_dict() == want


def test_model_read_from_the_traces(cluster):
    """Forward and backward products are told apart by the autograd engine's events."""
    model = pk.infer_job(cluster).model
    assert model is not None
    assert (model.num_layers, model.hidden_size, model.num_attention_heads,
            model.num_kv_heads, model.ffn_hidden_size, model.vocab_size) == \
        (LAYERS, HIDDEN, HEADS, HEADS, FFN, VOCAB)
    assert model.mlp == "gated"  # SwiGLU: gate and up projections, silu
    assert model.seq_length == SEQ
