"""The planner's memory prediction against the allocator's measured peaks on one H100.

``tests/data/kineto_llama_layouts_h100``: one small Llama (h 2048, 16 heads, 8 layers,
SwiGLU f 5632, V 32,000, s 2048) trained in bf16 autocast with fused AdamW at four layouts
(a: micro-batch 4, b: 4 with full recompute, c: 8, d: 8 with full recompute);
``environment.json`` holds ``torch.cuda.max_memory_allocated`` of each (reset per layout,
the model built afresh). ``max_memory_allocated`` counts live tensors only, not the
allocator's cache, so the prediction is compared with it directly. The prediction is
``plan.predict(plan.calibrate(a), parallel=...)`` with the accounting the profile shows.

Independent arithmetic from the model code (``tools/make_kineto_llama_layouts.py``), in
bytes per ``s·b·h`` (``sbh`` = 16,777,216 elements at micro-batch 4) unless said:

==================================  ======  =============================================
tensor one decoder layer keeps      bytes   why
==================================  ======  =============================================
layer input ``x``                   4       fp32: the embedding's output is fp32 under
                                            autocast and ``x + bf16`` stays fp32; ``pow``
                                            and ``mul`` keep it (the norm input)
``x·rsqrt(mean x² + eps)``          4       fp32, kept by the weight multiply (unfused)
bf16 cast of the norm output        2       autocast's cast for ``wqkv``, kept by the mm
qkv projection output               6       alive through the ``v`` view SDPA keeps
rotated q and k                     2 + 2   new tensors (unfused rotary), kept by SDPA
attention output                    2       the ``wo`` input (its reshape is a view)
``x2 = x + wo(...)``                4       fp32, the second norm's input
second ``x·rsqrt(...)``             4
bf16 casts of the MLP input         2 + 2   one per linear: ``w1`` and ``w3`` each cast
gate, up, SiLU, product             4·5.5   ``f/h`` = 2.75, bf16
softmax statistics                  ~0      ``4·a·s·b``, 0.03 ``sbh``
**per layer**                       **56**  perfkit before: 42 (no unfused norm 2·4, no
                                            rotary 4, one MLP-input cast)
full recompute keeps                4       the fp32 layer input only
==================================  ======  =============================================

Once per step, at the peak: the final norm (input 4, ``x·rsqrt`` 4, head's bf16 input 2:
``10·sbh``); the logits ``b·s·V``: bf16 2 + fp32 copy 4 (``.float()``) + fp32 log-softmax 4
= ``10·bsV`` (2.62 GB at micro-batch 4), which perfkit left out entirely. Static: fp32
parameters 4 + fp32 gradients 4 (the previous step's: this loop zeroes them after the
forward) + Adam's m and v 8 = 16 B/param (plain PyTorch AMP, no separate master copy),
plus autocast's bf16 copy of each matmul weight, 2 B, alive from its first use to the
backward: 17.76 B/param on average; Megatron-LM's 18 (perfkit's scheme for PyTorch)
counts 2 B too many on the embedding and norms, +131 MB.

========  ========  ===========  ===========  ==========  =============================
layout    peak      before       now          now − peak  still not modelled
========  ========  ===========  ===========  ==========  =============================
a         18.65     14.34 -23 %  18.44 -1.1%  -224 MB     2nd MLP cast -268, static
                                                          +131, allocator level -68,
                                                          rest -19
b         12.13      9.34 -23 %  12.19 +0.5%  +63 MB      static +131, level -68
c         28.25     19.60 -31 %  27.79 -1.6%  -492 MB     2nd MLP cast -537, static
                                                          +131, level -67, rest -19
d         15.22      9.59 -37 %  15.28 +0.4%  +64 MB      static +131, level -67
========  ========  ===========  ===========  ==========  =============================

(GiB; "level": what the allocator holds at the start of the profiled window besides 16
B/param, read from the trace: 64 MiB and the batch's tokens.) The peak itself sits inside
``aten::nll_loss_forward``, just after the three logits allocations: the trace's memory
events say so (first test).
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import pytest

import perfkit as pk
from perfkit import plan

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto_llama_layouts_h100"
ENV = json.loads((DATA / "environment.json").read_text())
# the model code's sizes (tools/make_kineto_llama_layouts.py), as environment.json records
H, HEADS, L, S, V, F = 2048, 16, 8, 2048, 32000, 5632
assert ENV["model"] == {**ENV["model"], "hidden": H, "heads": HEADS, "layers": L,
                        "seq": S, "vocab": V, "ffn": F}
MATMUL = L * (3 * H * H + H * H + 3 * H * F) + V * H  # wqkv, wo, w1, w3, w2; the head
N = MATMUL + V * H + (2 * L + 1) * H  # + the embedding and the norms
PER_LAYER, FULL_LAYER, OUTPUT_SBH, LOGITS = 56, 4, 10, 10  # the docstring's table
LAYOUTS = {name: (v["micro_batch"], v["recompute"]) for name, v in ENV["layouts"].items()}


def _peak(name: str) -> int:
    return int(ENV["layouts"][name]["max_memory_allocated_bytes"])


@cache
def _calibration() -> object:
    return plan.calibrate(pk.load(DATA / "a.pt.trace.json.gz", progress=False))


@cache
def _trace(name: str) -> tuple[list[dict], list[dict]]:
    """(device memory events in time order, cpu ops) of a layout's raw trace."""
    with gzip.open(DATA / f"{name}.pt.trace.json.gz", "rt") as fh:
        events = json.load(fh)["traceEvents"]
    mem = sorted((e for e in events if e.get("name") == "[memory]"
                  and e["args"].get("Device Type") == 1), key=lambda e: e["ts"])
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    return mem, ops


def _level_extra(name: str) -> int:
    """What the allocator holds at the profiled window's start besides 16 B/param."""
    first = _trace(name)[0][0]["args"]
    return int(first["Total Allocated"] - first["Bytes"]) - 16 * N


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_the_peak_is_at_the_loss_after_the_logits_three_copies(name: str) -> None:
    mem, ops = _trace(name)
    b = LAYOUTS[name][0]
    i = max(range(len(mem)), key=lambda k: mem[k]["args"]["Total Allocated"])
    peak = mem[i]["args"]["Total Allocated"]
    assert peak == pytest.approx(_peak(name), rel=1e-3)  # the profiled step's is the peak
    inside = {o["name"] for o in ops if o["ts"] <= mem[i]["ts"] <= o["ts"] + o["dur"]}
    assert "aten::nll_loss_forward" in inside
    big = [e["args"]["Bytes"] for e in mem[:i] if e["args"]["Bytes"] > 10**8][-3:]
    assert big == [2 * b * S * V, 4 * b * S * V, 4 * b * S * V]  # bf16, fp32, log-softmax


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_static_memory_is_what_plain_amp_holds(name: str) -> None:
    # between steps the allocator holds 16 B/param (fp32 weights, gradients, Adam m and v)
    # and about 64 MiB more: no 16-bit weight or separate fp32 master copy
    assert 0 < _level_extra(name) < 70e6
    job = _calibration().job
    assert job.model.num_parameters() == N
    mb, rc = LAYOUTS[name]
    pred = plan.predict(_calibration(), parallel=job.parallel.replace(
        micro_batch_size=mb, recompute=rc))
    assert pred.static_bytes == 18 * N  # Megatron-LM's bf16 scheme
    amp = 16 * N + 2 * MATMUL  # + autocast's bf16 weight copies, held at the peak
    # 18 against 17.76 B/param: 2 B too many on the embedding and norms (not cast)
    assert pred.static_bytes == pytest.approx(amp, rel=0.014)


def test_the_profile_shows_the_tensors_the_model_code_keeps() -> None:
    job = _calibration().job
    am = job.activation_model
    assert (am.accounting, am.flash_attention, am.dropout, am.norm_bytes, am.element_bytes,
            am.unfused_norm, am.unfused_rotary, am.input_bytes, am.logits_bytes) == \
        ("tensors", True, False, 4.0, 2.0, True, True, 4.0, 10.0)
    sbh = S * 4 * H
    softmax_stats = 4 * HEADS * S * 4  # fp32 per head and token (flash), b = 4
    per_layer, _ = pk.activation_per_layer(job.model, 4, activation_model=am)
    # all of the table's 56 but the second bf16 cast of the MLP input (not modelled)
    assert per_layer == (PER_LAYER - 2) * sbh + softmax_stats
    full, _ = pk.activation_per_layer(job.model, 4, recompute="full", activation_model=am)
    assert full == FULL_LAYER * sbh
    act = pk.activation_memory(job.model, job.parallel, activation_model=am)
    assert act.extra_bytes == OUTPUT_SBH * sbh + LOGITS * 4 * S * V


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_predicted_memory_is_the_measured_peak(name: str) -> None:
    """Within 2 %: the unmodelled items of the docstring's table are at most 1.8 % of a
    peak (the second MLP-input cast at micro-batch 8); what the table does not explain is
    under 0.1 %."""
    mb, rc = LAYOUTS[name]
    cal = _calibration()
    pred = plan.predict(cal, parallel=cal.job.parallel.replace(micro_batch_size=mb,
                                                               recompute=rc))
    peak = _peak(name)
    assert pred.memory_bytes == pytest.approx(peak, rel=0.02)
    sbh = S * mb * H
    second_cast = 2 * sbh * L if rc == "none" else 0
    static_over = 18 * N - (16 * N + 2 * MATMUL)
    explained = pred.memory_bytes - static_over + second_cast + _level_extra(name)
    assert explained == pytest.approx(peak, rel=0.001)
