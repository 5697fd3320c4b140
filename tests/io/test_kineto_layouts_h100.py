"""The real H100 traces of one Llama, two sets recorded on two machines: each loaded in full
and read as the job that ran.

- ``tests/data/kineto_llama_layouts_h100``: layouts a-d (micro-batch 4 and 8, recompute none
  and full), all at the model's 8 layers and sequence 2,048;
- ``tests/data/kineto_llama_shapes_h100``: a again, e (16 layers), f (sequence 4,096,
  micro-batch 2) and g (micro-batch 2): its ``environment.json`` gives each layout's
  ``layers`` and ``seq``.

Expected values come from the raw JSON (read here with ``gzip`` and ``json``), from the
recording script's own record of the run (each set's ``environment.json``, written by
tools/make_kineto_llama_layouts.py) and from the second set's PROVENANCE.md table, not from
perfkit.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import perfkit as pk

ROOT = Path(__file__).resolve().parents[1] / "data"
SETS = ("kineto_llama_layouts_h100", "kineto_llama_shapes_h100")
ENVS = {folder: json.loads((ROOT / folder / "environment.json").read_text())
        for folder in SETS}
CASES = [(folder, name) for folder in SETS for name in sorted(ENVS[folder]["layouts"])]
#: the second set's PROVENANCE.md table: layout -> (layers, sequence, micro-batch)
SHAPES = {"a": (8, 2048, 4), "e": (16, 2048, 4), "f": (8, 4096, 2), "g": (8, 2048, 2)}
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver"}


def _raw(folder: str, layout: str) -> dict:
    with gzip.open(ROOT / folder / f"{layout}.pt.trace.json.gz", "rt") as fh:
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


def _shape(folder: str, name: str) -> tuple[int, int]:
    """(layers, sequence) a layout ran: its own where ``environment.json`` gives them (the
    second set), else the model's (the first set's layouts all ran the defaults)."""
    model, lay = ENVS[folder]["model"], ENVS[folder]["layouts"][name]
    return lay.get("layers", model["layers"]), lay.get("seq", model["seq"])


@pytest.fixture(scope="module", params=CASES, ids=[f"{f.split('_')[2]}-{n}" for f, n in CASES])
def layout(request) -> tuple[str, str, pk.Profile]:
    folder, name = request.param
    return folder, name, pk.load(ROOT / folder / f"{name}.pt.trace.json.gz", cache=False)


def test_the_sets_hold_the_shapes_their_provenance_lists():
    # the first set: the defaults only; the second: what PROVENANCE.md's table says, so
    # the parametrized job check below does cover a deeper model and a longer sequence
    assert {_shape(SETS[0], n) for n in ENVS[SETS[0]]["layouts"]} == {(8, 2048)}
    second = ENVS[SETS[1]]["layouts"]
    assert {n: (*_shape(SETS[1], n), v["micro_batch"]) for n, v in second.items()} == SHAPES
    assert all(v["recompute"] == "none" for v in second.values())


def test_every_kernel_of_the_profiled_steps_is_loaded(layout):
    folder, name, prof = layout
    raw = _raw(folder, name)
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
    folder, name, prof = layout
    env = ENVS[folder]
    model, lay = env["model"], env["layouts"][name]
    layers, seq = _shape(folder, name)
    job = pk.infer_job(prof)
    m = job.model
    assert m is not None
    assert (m.num_layers, m.hidden_size, m.num_attention_heads, m.num_kv_heads,
            m.ffn_hidden_size, m.vocab_size, m.seq_length) == \
        (layers, model["hidden"], model["heads"], model["heads"], model["ffn"],
         model["vocab"], seq)
    assert m.mlp == "gated"  # SwiGLU: gate and up projections, silu
    assert job.hardware is not None and job.hardware.name == "h100"  # deviceProperties
    assert job.dtype == "bf16"  # bf16 autocast
    assert job.parallel.dp * job.parallel.tp * job.parallel.pp == env["world_size"]
    assert job.parallel.micro_batch_size == lay["micro_batch"]
    assert job.parallel.recompute == lay["recompute"]
    assert job.global_batch_size == lay["micro_batch"] * env["world_size"]
