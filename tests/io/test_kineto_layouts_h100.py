"""The real H100 traces of one Llama at four layouts (tests/data/kineto_llama_layouts_h100):
each loaded in full and read as the job that ran.

Expected values come from the raw JSON (read here with ``gzip`` and ``json``) and from the
recording script's own record of the run (the fixture's ``environment.json``, written by
tools/make_kineto_llama_layouts.py), not from perfkit.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import perfkit as pk

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto_llama_layouts_h100"
ENV = json.loads((DATA / "environment.json").read_text())
LAYOUTS = sorted(ENV["layouts"])
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver"}


def _raw(layout: str) -> dict:
    with gzip.open(DATA / f"{layout}.pt.trace.json.gz", "rt") as fh:
        return json.load(fh)


def _host_steps(raw: dict) -> list[tuple[int, float, float]]:
    """(step, start, end) of the host's ProfilerStep#N spans (not their GPU-lane copies)."""
    return sorted((int(e["name"].split("#")[1]), float(e["ts"]), float(e["ts"]) + e["dur"])
                  for e in raw["traceEvents"]
                  if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
                  and e.get("cat") == "user_annotation")


def _in_steps(raw: dict, cats: set[str]) -> list[tuple[int, float]]:
    """(step, duration in us) of each device event of ``cats`` whose launch (the runtime
    call with the same correlation id) lies in a host ProfilerStep span."""
    steps = _host_steps(raw)
    launch = {e["args"]["correlation"]: float(e["ts"]) for e in raw["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") in LAUNCH_CATS
              and "correlation" in e.get("args", {})}
    out = []
    for e in raw["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") not in cats:
            continue
        ts = launch.get(e.get("args", {}).get("correlation"), float(e["ts"]))
        step = next((s for s, a, b in steps if a <= ts < b), None)
        if step is not None:
            out.append((step, float(e["dur"])))
    return out


@pytest.fixture(scope="module", params=LAYOUTS)
def layout(request) -> tuple[str, pk.Profile]:
    return request.param, pk.load(DATA / f"{request.param}.pt.trace.json.gz", cache=False)


def test_every_kernel_of_the_profiled_steps_is_loaded(layout):
    name, prof = layout
    raw = _raw(name)
    assert [s for s, _, _ in _host_steps(raw)] == [3, 4]  # schedule wait=1, warmup=2, active=2
    k = prof.kernels
    kernels = _in_steps(raw, {"kernel"})
    mine = k[k["type"] == "kernel"]
    assert len(kernels) > 1000
    assert len(mine) == len(kernels)
    assert mine["dur_us"].sum() == pytest.approx(sum(d for _, d in kernels), rel=1e-9)
    # per step too, and the copies and memsets with them
    want: dict[int, int] = {}
    for s, _ in _in_steps(raw, DEVICE_CATS):
        want[s] = want.get(s, 0) + 1
    assert k["step"].notna().all()
    assert k.groupby("step").size().to_dict() == want


def test_job_read_from_each_profile_is_the_recorded_one(layout):
    name, prof = layout
    model, lay = ENV["model"], ENV["layouts"][name]
    job = pk.infer_job(prof)
    m = job.model
    assert m is not None
    assert (m.num_layers, m.hidden_size, m.num_attention_heads, m.num_kv_heads,
            m.ffn_hidden_size, m.vocab_size, m.seq_length) == \
        (model["layers"], model["hidden"], model["heads"], model["heads"], model["ffn"],
         model["vocab"], model["seq"])
    assert m.mlp == "gated"  # SwiGLU: gate and up projections, silu
    assert job.hardware is not None and job.hardware.name == "h100"  # deviceProperties
    assert job.dtype == "bf16"  # bf16 autocast
    assert job.parallel.dp * job.parallel.tp * job.parallel.pp == ENV["world_size"]
    assert job.parallel.micro_batch_size == lay["micro_batch"]
    assert job.parallel.recompute == lay["recompute"]
    assert job.global_batch_size == lay["micro_batch"] * ENV["world_size"]
