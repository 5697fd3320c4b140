"""The planner's memory prediction against the allocator's measured peaks on one H100.

Two sets of real traces, each with ``environment.json`` (the recording script's record):
``kineto_llama_layouts_h100`` (a-d below), to which the memory accounting was fitted, and
``kineto_llama_shapes_h100`` (a again, e, f, g: the second table), recorded afterwards on
another machine, so an out-of-sample check of the same code.

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

Not in ``sbh``, and not modelled: the rotary ``cos`` and ``sin`` tables, ``s × d`` bf16
(``d = h/a`` = 128), made for q and again for k and kept by the multiplies: ``8·s·d`` B a
layer (2 MiB at s 2048). At the peak the trace holds four live blocks of ``2·s·d`` B per
layer, none with full recompute (``test_the_rotary_tables_are_kept_to_the_peak``).

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
                                                          rotary tables -17, rest -2
b         12.13      9.34 -23 %  12.19 +0.5%  +63 MB      static +131, level -68
c         28.25     19.60 -31 %  27.79 -1.6%  -492 MB     2nd MLP cast -537, static
                                                          +131, level -67, rotary -17,
                                                          rest -2
d         15.22      9.59 -37 %  15.28 +0.4%  +64 MB      static +131, level -67
========  ========  ===========  ===========  ==========  =============================

(GiB; "level": what the allocator holds at the start of the profiled window besides 16
B/param, read from the trace: 64 MiB and the batch's tokens.) The peak itself sits inside
``aten::nll_loss_forward``, just after the three logits allocations: the trace's memory
events say so (``test_the_peak_is_at_the_loss_after_the_logits_three_copies``).

``tests/data/kineto_llama_shapes_h100``, out of sample: each layout's own trace calibrated
(``plan.predict(plan.calibrate(profile, close=True))``: the job, 16 layers or sequence
4,096 included, as ``infer_job`` reads it). The same arithmetic, per layout: ``N`` =
``L·(4h² + 3hf) + 2Vh + (2L+1)·h`` parameters (the matmul weights, embedding and head,
norms), static ``18·N``; per layer ``54·sbh + 4·a·s·b`` (the table's 56 less the second
MLP-input cast, which perfkit does not model); once ``10·sbh + 10·bsV`` (GB = 10⁹ B,
peaks and predictions in GiB, the rest in MB):

======  ==  =====  ==  =======  =======  =======  ========  =====  =========  ==========
layout  L   s      b   N (M)    18·N     L·layer  once      now    peak       now − peak
======  ==  =====  ==  =======  =======  =======  ========  =====  =========  ==========
a       8   2048   4   542.1    9.759    7.252    2.789     18.44  18.65      -224 -1.1%
e       16  2048   4   953.2    17.158   14.504   2.789     32.09  32.56      -509 -1.5%
f       8   4096   2   542.1    9.759    7.252    2.789     18.44  18.66      -240 -1.2%
g       8   2048   2   542.1    9.759    3.626    1.395     13.76  13.85      -88 -0.6%
======  ==  =====  ==  =======  =======  =======  ========  =====  =========  ==========

(``sbh`` = 16 Mi elements at a, e and f, 8 Mi at g; f holds a's tokens as two longer
sequences, so its modelled bytes are a's.) What is still not modelled, as above: the second
MLP-input cast ``2·sbh·L`` (-268, -537, -268, -134), the rotary tables ``8·s·d·L`` (-17,
-34, -34, -17), static +131 each, the allocator's level (-68, -67, -67, -67), and a rest
of -1.7, -2.3, -1.7, -1.4 MB (under 0.01 % of a peak, as for a-d).
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import pytest

import perfkit as pk
from perfkit import plan

ROOT = Path(__file__).resolve().parents[1] / "data"
FIRST, SECOND = "kineto_llama_layouts_h100", "kineto_llama_shapes_h100"
ENVS = {folder: json.loads((ROOT / folder / "environment.json").read_text())
        for folder in (FIRST, SECOND)}
# the model code's sizes (tools/make_kineto_llama_layouts.py), as environment.json records
# (layers and seq: the defaults, which each layout of the second set gives its own)
H, HEADS, L, S, V, F = 2048, 16, 8, 2048, 32000, 5632
D = H // HEADS  # head dimension
for _env in ENVS.values():
    assert _env["model"] == {**_env["model"], "hidden": H, "heads": HEADS, "layers": L,
                             "seq": S, "vocab": V, "ffn": F}
PER_LAYER, FULL_LAYER, OUTPUT_SBH, LOGITS = 56, 4, 10, 10  # the docstring's table
ROTARY = 8  # bytes per s·d and layer: cos and sin, bf16, for q and for k (not modelled)
CASES = [(folder, name) for folder in ENVS for name in sorted(ENVS[folder]["layouts"])]
IDS = [f"{folder.split('_')[2]}-{name}" for folder, name in CASES]


def _layout(folder: str, name: str) -> tuple[int, int, int, str]:
    """(layers, sequence, micro-batch, recompute) of a layout, from environment.json."""
    lay = ENVS[folder]["layouts"][name]
    return lay.get("layers", L), lay.get("seq", S), lay["micro_batch"], lay["recompute"]


def _params(layers: int) -> tuple[int, int]:
    """(matmul weights, all parameters) of the model at ``layers``."""
    matmul = layers * (3 * H * H + H * H + 3 * H * F) + V * H  # wqkv, wo, w1, w3, w2; head
    return matmul, matmul + V * H + (2 * layers + 1) * H  # + the embedding and the norms


def _modelled(folder: str, name: str) -> int:
    """The docstring's arithmetic for what perfkit models: 18 B/param, per layer the
    table's 56 less the second MLP-input cast plus the softmax statistics (4 with full
    recompute), the output layer and logits once."""
    layers, seq, mb, rc = _layout(folder, name)
    sbh = seq * mb * H
    per_layer = ((PER_LAYER - 2) * sbh + 4 * HEADS * seq * mb if rc == "none"
                 else FULL_LAYER * sbh)
    return 18 * _params(layers)[1] + layers * per_layer + OUTPUT_SBH * sbh \
        + LOGITS * mb * seq * V


def _peak(folder: str, name: str) -> int:
    return int(ENVS[folder]["layouts"][name]["max_memory_allocated_bytes"])


@cache
def _calibration(folder: str, name: str) -> object:
    """The first set: its layout a's, for every layout (the planner asked for each layout's
    micro-batch and recompute); the second: each layout's own trace, closed, as the lead
    measured it."""
    if folder == FIRST:
        return plan.calibrate(pk.load(ROOT / FIRST / "a.pt.trace.json.gz", progress=False))
    return plan.calibrate(pk.load(ROOT / folder / f"{name}.pt.trace.json.gz",
                                  progress=False), close=True)


def _predict(folder: str, name: str) -> object:
    cal = _calibration(folder, name)
    if folder != FIRST:
        return plan.predict(cal)
    _, _, mb, rc = _layout(folder, name)
    return plan.predict(cal, parallel=cal.job.parallel.replace(micro_batch_size=mb,
                                                               recompute=rc))


@cache
def _trace(folder: str, name: str) -> tuple[list[dict], list[dict]]:
    """(device memory events in time order, cpu ops) of a layout's raw trace."""
    with gzip.open(ROOT / folder / f"{name}.pt.trace.json.gz", "rt") as fh:
        events = json.load(fh)["traceEvents"]
    mem = sorted((e for e in events if e.get("name") == "[memory]"
                  and e["args"].get("Device Type") == 1), key=lambda e: e["ts"])
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    return mem, ops


def _level_extra(folder: str, name: str) -> int:
    """What the allocator holds at the profiled window's start besides 16 B/param."""
    first = _trace(folder, name)[0][0]["args"]
    n = _params(_layout(folder, name)[0])[1]
    return int(first["Total Allocated"] - first["Bytes"]) - 16 * n


def test_the_second_set_changes_depth_sequence_and_micro_batch() -> None:
    # what PROVENANCE.md's table lists, so the second set's cases below are not a-d again
    assert {n: _layout(SECOND, n) for n in ENVS[SECOND]["layouts"]} == {
        "a": (8, 2048, 4, "none"), "e": (16, 2048, 4, "none"), "f": (8, 4096, 2, "none"),
        "g": (8, 2048, 2, "none")}
    assert {_layout(FIRST, n)[:2] for n in ENVS[FIRST]["layouts"]} == {(L, S)}


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
@pytest.mark.parametrize(("folder", "name"), CASES, ids=IDS)
def test_the_peak_is_at_the_loss_after_the_logits_three_copies(folder: str, name: str) -> None:
    mem, ops = _trace(folder, name)
    _, seq, b, _ = _layout(folder, name)
    i = max(range(len(mem)), key=lambda k: mem[k]["args"]["Total Allocated"])
    peak = mem[i]["args"]["Total Allocated"]
    assert peak == pytest.approx(_peak(folder, name), rel=1e-3)  # the profiled step's
    inside = {o["name"] for o in ops if o["ts"] <= mem[i]["ts"] <= o["ts"] + o["dur"]}
    assert "aten::nll_loss_forward" in inside
    big = [e["args"]["Bytes"] for e in mem[:i] if e["args"]["Bytes"] > 10**8][-3:]
    assert big == [2 * b * seq * V, 4 * b * seq * V, 4 * b * seq * V]  # bf16, fp32, log-sm


@pytest.mark.parametrize(("folder", "name"), CASES, ids=IDS)
def test_the_rotary_tables_are_kept_to_the_peak(folder: str, name: str) -> None:
    mem, _ = _trace(folder, name)
    layers, seq, mb, rc = _layout(folder, name)
    i = max(range(len(mem)), key=lambda k: mem[k]["args"]["Total Allocated"])
    live: dict[int, int] = {}  # address: bytes, of the blocks allocated in the window
    for e in mem[:i + 1]:
        if e["args"]["Bytes"] > 0:
            live[e["args"]["Addr"]] = e["args"]["Bytes"]
        else:
            live.pop(e["args"]["Addr"], None)
    table = ROTARY // 4 * seq * D  # one cos or sin, bf16
    stats = 4 * HEADS * seq * mb if rc == "none" else 0  # the same size at a, e
    want = 4 * layers if rc == "none" else 0
    got = sum(v == table for v in live.values()) - (layers if stats == table else 0)
    assert got == want


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.parametrize(("folder", "name"), CASES, ids=IDS)
def test_static_memory_is_what_plain_amp_holds(folder: str, name: str) -> None:
    # between steps the allocator holds 16 B/param (fp32 weights, gradients, Adam m and v)
    # and about 64 MiB more: no 16-bit weight or separate fp32 master copy
    assert 0 < _level_extra(folder, name) < 70e6
    matmul, n = _params(_layout(folder, name)[0])
    assert _calibration(folder, name).job.model.num_parameters() == n
    pred = _predict(folder, name)
    assert pred.static_bytes == 18 * n  # Megatron-LM's bf16 scheme
    amp = 16 * n + 2 * matmul  # + autocast's bf16 weight copies, held at the peak
    # 18 against 17.76 B/param: 2 B too many on the embedding and norms (not cast)
    assert pred.static_bytes == pytest.approx(amp, rel=0.014)


@pytest.mark.parametrize(("folder", "name"),
                         [c for c in CASES if c == (FIRST, "a") or c[0] == SECOND],
                         ids=[i for c, i in zip(CASES, IDS, strict=True)
                              if c == (FIRST, "a") or c[0] == SECOND])
def test_the_profile_shows_the_tensors_the_model_code_keeps(folder: str, name: str) -> None:
    job = _calibration(folder, name).job
    _, seq, mb, _ = _layout(folder, name)
    am = job.activation_model
    assert (am.accounting, am.flash_attention, am.dropout, am.norm_bytes, am.element_bytes,
            am.unfused_norm, am.unfused_rotary, am.input_bytes, am.logits_bytes) == \
        ("tensors", True, False, 4.0, 2.0, True, True, 4.0, 10.0)
    sbh = seq * mb * H
    softmax_stats = 4 * HEADS * seq * mb  # fp32 per head and token (flash)
    per_layer, _ = pk.activation_per_layer(job.model, mb, activation_model=am)
    # all of the table's 56 but the second bf16 cast of the MLP input (not modelled)
    assert per_layer == (PER_LAYER - 2) * sbh + softmax_stats
    full, _ = pk.activation_per_layer(job.model, mb, recompute="full", activation_model=am)
    assert full == FULL_LAYER * sbh
    act = pk.activation_memory(job.model, job.parallel, activation_model=am)
    assert act.extra_bytes == OUTPUT_SBH * sbh + LOGITS * mb * seq * V


@pytest.mark.parametrize(("folder", "name"), CASES, ids=IDS)
def test_predicted_memory_is_the_measured_peak(folder: str, name: str) -> None:
    """Within 2 %: the unmodelled items of the docstring's tables are at most 1.8 % of a
    peak (the second MLP-input cast at micro-batch 8); what the tables do not explain is
    under 0.01 %."""
    layers, seq, mb, rc = _layout(folder, name)
    pred = _predict(folder, name)
    peak = _peak(folder, name)
    assert pred.memory_bytes == pytest.approx(_modelled(folder, name), rel=1e-12)
    assert pred.memory_bytes == pytest.approx(peak, rel=0.02)
    sbh = seq * mb * H
    second_cast = 2 * sbh * layers if rc == "none" else 0
    rotary = ROTARY * seq * D * layers if rc == "none" else 0
    matmul, n = _params(layers)
    static_over = 18 * n - (16 * n + 2 * matmul)
    explained = pred.memory_bytes - static_over + second_cast + rotary \
        + _level_extra(folder, name)
    assert explained == pytest.approx(peak, rel=2e-4)
