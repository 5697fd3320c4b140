"""Attention run as 3-D bmm: its backward, its heads, and kernels counted once.

* The backward of ``q·kᵀ`` bmm, softmax, ``·v`` bmm (autograd's ``BmmBackward0``, then
  ``SoftmaxBackward0``, then ``BmmBackward0``) is matched: checked on a real CPU trace
  recorded here (``tests/data/kineto_bmm_attention_cpu``, ``tools/make_kineto_bmm_attention.py``),
  read raw with gzip/json, and on GPU kernels laid out in the order that trace shows, with
  the durations summed by hand.
* The heads of TimeSformer's attention (``wild/tl_timesformer_h100``), folded with the
  batch into the bmm's first dimension, are split by the projection beside them: checked
  against the raw ``Input Dims`` of its ``aten::bmm`` and ``aten::addmm``.
* An element-wise run inside an attention chain is the attention finding's time, not also
  the element-wise chain finding's.
"""

from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict
from pathlib import Path

import pytest
from gpu_kernels import one_stream_profile
from shared_samples import sample

import perfkit as pk
from perfkit.advisor import ASSUMPTIONS
from perfkit.analysis.shapes import bmm_attention, read_model

H100 = pk.Hardware.preset("h100")
RECORDED = Path(__file__).resolve().parents[1] / "data" / "kineto_bmm_attention_cpu" / \
    "bmm_attention.pt.trace.json.gz"
TIMESFORMER = "wild/tl_timesformer_h100"


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)["traceEvents"]


def _children(events: list[dict], parent: dict, name: str) -> list[dict]:
    """The ``name`` operators inside ``parent`` on its thread, in start order."""
    return sorted((e for e in events if e.get("cat") == "cpu_op" and e["name"] == name
                   and e["tid"] == parent["tid"] and parent["ts"] <= e["ts"]
                   and e["ts"] + e["dur"] <= parent["ts"] + parent["dur"]),
                  key=lambda e: e["ts"])


def _raw_backward(events: list[dict]) -> list[dict]:
    """Each ``BmmBackward0``, ``SoftmaxBackward0``, ``BmmBackward0`` in a row among the
    autograd nodes of those kinds, with the shapes of an attention's backward: the
    ``·v`` product's gradients ``(N, S, S) x (N, S, d)`` and ``(N, S, d) x (N, d, S)``,
    the softmax backward of ``N·S·S`` values, the ``q·kᵀ`` product's gradients ``(N, d, S)
    x (N, S, S)`` and ``(N, S, S) x (N, S, d)``."""
    nodes = sorted((e for e in events if e.get("cat") == "cpu_op"
                    and e["name"] in ("BmmBackward0", "SoftmaxBackward0")),
                   key=lambda e: e["ts"])
    out = []
    for a, b, c in zip(nodes, nodes[1:], nodes[2:], strict=False):
        if (a["name"], b["name"], c["name"]) != ("BmmBackward0", "SoftmaxBackward0",
                                                 "BmmBackward0"):
            continue
        pv = [x["args"]["Input Dims"][:2] for x in _children(events, a, "aten::bmm")]
        (sb,) = _children(events, b, "aten::_softmax_backward_data")
        qk = [x["args"]["Input Dims"][:2] for x in _children(events, c, "aten::bmm")]
        (n, s, d) = next(x[1] for x in pv if x[1][1] != x[1][2])  # grad (N, S, d)
        if sorted(pv) != sorted([[[n, s, s], [n, s, d]], [[n, s, d], [n, d, s]]]) or \
                sorted(qk) != sorted([[[n, d, s], [n, s, s]], [[n, s, s], [n, s, d]]]) or \
                math.prod(sb["args"]["Input Dims"][0]) != n * s * s:
            continue
        first = _children(events, a, "aten::bmm")[0]
        out.append({"n": n, "s": s, "d": d, "ts": first["ts"]})
    return out


def test_the_backward_of_a_recorded_bmm_attention_is_matched() -> None:
    """Two layers trained for one step: two forward and two backward chains, each of the
    raw trace's sizes, starting where its first product starts."""
    events = _events(RECORDED)
    raw = _raw_backward(events)
    forward = sorted((e for e in events if e.get("cat") == "cpu_op"
                      and e["name"] == "aten::bmm"
                      and e["args"]["Input Dims"][1][1] != e["args"]["Input Dims"][1][2]
                      and len(e["args"]["Input Dims"][0]) == 3
                      and e["args"]["Input Dims"][0][1] != e["args"]["Input Dims"][0][2]
                      and not any(n["name"] == "BmmBackward0" and n["ts"] <= e["ts"]
                                  <= n["ts"] + n["dur"] for n in events
                                  if n.get("cat") == "cpu_op")),
                     key=lambda e: e["ts"])  # the forward q·kᵀ products: (N, S, d) x (N, d, S)
    assert len(raw) == 2 and len(forward) == 2
    found = bmm_attention(pk.load(RECORDED, cache=False, progress=False))
    back = found[found["backward"]]
    assert len(back) == len(raw) and (~found["backward"]).sum() == len(forward)
    assert sorted(zip(back["batch_heads"], back["seq"], back["head_dim"], strict=True)) == \
        sorted((t["n"], t["s"], t["d"]) for t in raw)
    # where each starts, as the raw times say (measured from the first forward product)
    t0 = forward[0]["ts"]
    starts = sorted(found["start_us"] - found["start_us"].min())
    assert starts == pytest.approx(sorted([e["ts"] - t0 for e in forward]
                                          + [t["ts"] - t0 for t in raw]), abs=1e-3)
    chains = pk.analysis.attention_chains(pk.load(RECORDED, cache=False, progress=False),
                                          H100)
    assert len(chains) == len(raw) + len(forward)
    # a backward chain's products: four, each 2·N·S·S·d
    assert sorted(chains["flops"])[-2:] == [4 * 2.0 * t["n"] * t["s"] ** 2 * t["d"]
                                            for t in raw]


_gpu = one_stream_profile


GEMM, SOFTMAX = "cutlass_gemm_bf16", "softmax_warp_forward"


def _forward(n: int, s: int, d: int) -> list[tuple[str, str, str, float]]:
    return [("aten::bmm", GEMM, f"{n},{s},{d};{n},{d},{s}", 40.0),
            ("aten::mul", "vectorized_mul_kernel", f"{n},{s},{s};", 9.0),
            ("aten::_softmax", SOFTMAX, f"{n},{s},{s};;", 30.0),
            ("aten::bmm", GEMM, f"{n},{s},{s};{n},{s},{d}", 41.0)]


def _backward(n: int, s: int, d: int) -> list[tuple[str, str, str, float]]:
    """The kernels of the backward in the order the recorded trace's autograd runs them."""
    return [("aten::bmm", GEMM, f"{n},{s},{s};{n},{s},{d}", 43.0),   # grad v
            ("aten::bmm", GEMM, f"{n},{s},{d};{n},{d},{s}", 44.0),   # grad p
            ("aten::mul", "vectorized_mul_kernel", f"{n},{s},{s};{n},{s},{s}", 11.0),
            ("aten::_softmax_backward_data", "softmax_warp_backward",
             f"{n},{s},{s};{n},{s},{s};;", 35.0),
            ("aten::mul", "vectorized_mul_kernel", f"{n},{s},{s};", 12.0),
            ("aten::bmm", GEMM, f"{n},{d},{s};{n},{s},{s}", 45.0),   # grad kᵀ
            ("aten::bmm", GEMM, f"{n},{s},{s};{n},{s},{d}", 46.0)]   # grad q


def _projection(tokens: int) -> list[tuple[str, str, str, float]]:
    return [("aten::addmm", GEMM, f"192;{tokens},64;64,192", 20.0)]


def test_attention_time_counts_forward_and_backward_kernels() -> None:
    n, s, d = 64, 1024, 128
    fwd, bwd = _forward(n, s, d), _backward(n, s, d)
    rows = _projection(512) + fwd + _projection(512) + bwd + _projection(512)
    chains = pk.analysis.attention_chains(_gpu(rows), H100)
    assert len(chains) == 2
    assert sorted(chains["kernels"]) == [len(fwd), len(bwd)]
    assert sorted(chains["total_us"]) == pytest.approx(
        sorted([sum(r[3] for r in fwd), sum(r[3] for r in bwd)]), rel=1e-12)
    # a fused kernel does the products' FLOPs: 2 products forward, 4 backward
    eff, peak = ASSUMPTIONS["kernel_efficiency"], H100.peak_flops["bf16"]
    product = 2.0 * n * s * s * d
    saving = sum(max(0.0, sum(r[3] for r in part) - k * product / (eff * peak) * 1e6)
                 for part, k in ((fwd, 2), (bwd, 4)))
    (att,) = [f for f in pk.advise(_gpu(rows), hardware=H100)
              if f.rule == "attention_not_fused"]
    assert att.ms_per_step == pytest.approx(saving / 1e3, rel=1e-9)
    assert "2 attention chains" in att.evidence


@pytest.mark.shared_samples
def test_timesformer_heads_and_head_size_are_read_from_the_raw_shapes() -> None:
    """head_dim is the bmm's ``d``; the heads ``h`` are what makes ``N·S / h`` the tokens
    of the fused QKV projection that writes ``3·h·d`` (both of the trace's attentions)."""
    events = _events(next(sample(TIMESFORMER).glob("*.json.gz")))
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    qk = {tuple(e["args"]["Input Dims"][0]) for e in ops if e["name"] == "aten::bmm"
          and e["args"]["Input Dims"][1][1:] == e["args"]["Input Dims"][0][:0:-1]}
    addmm = {(e["args"]["Input Dims"][1][0], e["args"]["Input Dims"][2][1])
             for e in ops if e["name"] == "aten::addmm"}  # (tokens, output width)
    assert qk and {d for _, _, d in qk} == {64}
    d = 64
    heads = {h for h in range(1, 257)
             if all(n % h == 0 and (n * s // h, 3 * h * d) in addmm and n * s % h == 0
                    for n, s, _ in qk)}
    assert heads == {12}
    r = read_model(pk.load(next(sample(TIMESFORMER).glob("*.json.gz")), cache=False,
                           progress=False))
    assert r.get("head_dim") == d
    assert r.get("num_attention_heads") == 12
    assert r.get("num_kv_heads") == 12  # the fused projection: q, k and v as wide
    assert "fused QKV" in r.details["num_attention_heads"]


def test_recorded_heads_are_split_by_the_fused_projection() -> None:
    events = _events(RECORDED)
    linear = {tuple(e["args"]["Input Dims"][1]) for e in events
              if e.get("cat") == "cpu_op" and e["name"] == "aten::linear"}
    qk = {tuple(e["args"]["Input Dims"][0]) for e in events if e.get("cat") == "cpu_op"
          and e["name"] == "aten::bmm"
          and e["args"]["Input Dims"][1][1:] == e["args"]["Input Dims"][0][:0:-1]}
    ((n, s, d),) = qk
    # the QKV weight (3·h·d, hidden): h heads of d
    (w,) = [x for x in linear if x[0] % (3 * d) == 0 and x[0] != x[1]]
    r = read_model(pk.load(RECORDED, cache=False, progress=False))
    assert r.get("head_dim") == d
    assert r.get("num_attention_heads") == w[0] // (3 * d)
    assert n % r.get("num_attention_heads") == 0


def _elementwise_inside(products: str) -> list[tuple[str, str, str, float]]:
    """An attention whose scale, mask and bias run as three element-wise kernels between
    the first product and the softmax (GPT-2's eager attention), products of 3-D bmm
    (matched by shapes) or of 4-D matmul (by the kernels' letters)."""
    if products == "bmm":
        op, qk, pv, sc = ("aten::bmm", "64,1024,128;64,128,1024", "64,1024,1024;64,1024,128",
                          "64,1024,1024")
    else:
        op, qk, pv, sc = ("aten::matmul", "4,16,1024,128;4,16,128,1024",
                          "4,16,1024,1024;4,16,1024,128", "4,16,1024,1024")
    return [(op, GEMM, qk, 400.0),
            ("aten::div", "div_true_kernel", f"{sc};", 390.0),
            ("aten::mul", "mul_kernel", f"{sc};{sc}", 380.0),
            ("aten::add", "add_kernel", f"{sc};{sc}", 370.0),
            ("aten::_softmax", SOFTMAX, f"{sc};;", 300.0),
            (op, GEMM, pv, 410.0)]


@pytest.mark.parametrize("products", ["bmm", "matmul"])
def test_an_elementwise_run_inside_an_attention_is_counted_once(products: str) -> None:
    rows = _elementwise_inside(products)
    profile = _gpu(rows)
    # alone, the three are a run: one fused kernel would move the scores once, not thrice
    ((run,),) = [pk.analysis.elementwise_chains(profile, H100)["kernels"].tolist()]
    assert run == 3
    found = {f.rule: f for f in pk.advise(profile, hardware=H100)}
    assert found["attention_not_fused"].measured
    chains = pk.analysis.attention_chains(profile, H100)
    assert chains["kernels"].tolist() == [len(rows)]  # the whole chain, its 3 included
    assert chains["total_us"].tolist() == pytest.approx([sum(r[3] for r in rows)])
    # both products priced (aten::bmm 64 × (1024 × 128 @ 128 × 1024); aten::matmul of 4-D
    # operands 4·16 × the same): 2·batch·m·n·k FLOPs each, so the fused kernel's time is
    # known and the saving is not the whole chain's time
    assert chains["flops"].tolist() == [2 * (2 * 64 * 1024 * 1024 * 128)]
    assert 0 < chains["saving_us"].iloc[0] < chains["total_us"].iloc[0]
    # the kernels each finding counts, by position: none twice
    counted: dict[int, int] = defaultdict(int)
    for i in range(len(rows)):  # the attention chain: every kernel
        counted[i] += 1
    if "elementwise_chains" in found:  # the run its evidence names
        names = " > ".join(r[0] for r in rows[1:4])
        assert names in found["elementwise_chains"].evidence
        for i in (1, 2, 3):
            counted[i] += 1
    assert max(counted.values()) == 1
    assert pk.analysis.elementwise_chains(profile, H100, without_attention=True).empty


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.shared_samples
def test_timesformer_findings_count_no_kernel_twice() -> None:
    """The attention chains' kernels (raw: on the stream from each chain's first bmm kernel
    to its last, less the copies) and the copies (``aten::copy_``'s kernels) are apart,
    the findings count each of them once, and no element-wise chain is left to count the
    attention's kernels again. (This trace has no element-wise run inside a chain: the
    check holds before the fix too; the hand-written tables above are where it failed.)"""
    path = next(sample(TIMESFORMER).glob("*.json.gz"))
    events = _events(path)
    host = {e["args"]["External id"]: e for e in events
            if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    tasks = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memcpy",
                                                          "gpu_memset")),
                   key=lambda e: e["ts"])
    ids = [e["args"].get("correlation") for e in tasks]
    assert len(set(ids)) == len(ids)  # a kernel's correlation id names it
    bmm = [i for i, e in enumerate(tasks)
           if host.get(e["args"].get("External id"), {}).get("name") == "aten::bmm"]
    assert len(bmm) % 2 == 0
    in_attention: list[int] = []
    for a, b in zip(bmm[::2], bmm[1::2], strict=True):  # each attention: its two products
        stream = tasks[a]["args"]["stream"]
        in_attention += [ids[i] for i in range(a, b + 1)
                         if tasks[i]["args"]["stream"] == stream
                         and host.get(tasks[i]["args"].get("External id"), {}).get("name")
                         != "aten::copy_"]
    copies = [ids[i] for i, e in enumerate(tasks)  # copy kernels (not the two memcpys)
              if e["cat"] == "kernel"
              and host.get(e["args"].get("External id"), {}).get("name") == "aten::copy_"]
    profile = pk.load(path, cache=False, progress=False)
    found = {f.rule: f for f in pk.advise(profile, hardware=H100)}
    chains = pk.analysis.attention_chains(profile, H100)
    ew = pk.analysis.elementwise_chains(profile, H100, without_attention=True)
    assert int(chains["kernels"].sum()) == len(in_attention)
    assert f"{len(bmm) // 2} attention chains" in found["attention_not_fused"].evidence
    assert f"{len(copies)} copy tasks" in found["redundant_copies"].evidence
    counted = in_attention + copies
    assert len(counted) == len(set(counted))  # no kernel in two findings
    assert "elementwise_chains" not in found and ew.empty
