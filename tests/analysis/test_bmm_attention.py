"""Attention run as 3-D batched products: ``q·kᵀ`` bmm, softmax, ``·v`` bmm.

HuggingFace's TimeSformer (``wild/tl_timesformer_h100``, an H100 Kineto trace with
``record_shapes``) folds batch and heads into one dimension and runs its attention as
``bmm (N, S, d) x (N, d, S)``, a softmax over the last dimension, ``bmm (N, S, S) x
(N, S, d)``. The tests read the raw gzip JSON themselves (its ``cpu_op`` events and their
``Input Dims``, the device tasks and their ``External id``) and check the recognition, the
model reading and the advisor's unfused-attention finding against it; a hand-written table
checks that 3-D bmms outside that chain are not taken for attention.
"""

from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest
from shared_samples import sample

import perfkit as pk
from perfkit.advisor import ASSUMPTIONS
from perfkit.advisor.words import fmt_time
from perfkit.analysis._util import table
from perfkit.analysis.operators import kernel_tokens
from perfkit.analysis.shapes import read_model
from perfkit.profile import Profile, ProfileMeta

TIMESFORMER = "wild/tl_timesformer_h100"
H100 = pk.Hardware.preset("h100")
_PRODUCTS = {"aten::bmm", "aten::baddbmm", "aten::mm", "aten::addmm"}
_DEVICE = {"kernel", "gpu_memset", "gpu_memcpy"}


def _raw(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)["traceEvents"]


def _raw_triples(events: list[dict]) -> list[dict]:
    """Each ``aten::bmm``, ``aten::_softmax``, ``aten::bmm`` in a row among one host
    thread's products and softmaxes, with the shapes of attention: ``(N, S, d) x
    (N, d, S)``, a softmax over dim -1 of ``N·S·S`` values ending in ``S``, ``(N, S, S) x
    (N, S, d)``."""
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"
           and (e["name"] in _PRODUCTS or e["name"] == "aten::_softmax")]
    by_tid: dict = defaultdict(list)
    for e in sorted(ops, key=lambda e: e["ts"]):
        by_tid[e["tid"]].append(e)
    out = []
    for seq in by_tid.values():
        for a, b, c in zip(seq, seq[1:], seq[2:], strict=False):
            if (a["name"], b["name"], c["name"]) != ("aten::bmm", "aten::_softmax",
                                                     "aten::bmm"):
                continue
            q, k = a["args"]["Input Dims"][:2]
            scores = b["args"]["Input Dims"][0]
            p, v = c["args"]["Input Dims"][:2]
            n, s, d = q
            if k != [n, d, s] or p != [n, s, s] or v != [n, s, d]:
                continue
            if scores[-1] != s or math.prod(scores) != n * s * s or \
                    b["args"]["Concrete Inputs"][1] != "-1":
                continue
            out.append({"n": n, "s": s, "d": d, "qk": a, "softmax": b, "pv": c})
    return out


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
@pytest.mark.shared_samples
def test_timesformer_bmm_attention_is_recognised_as_the_raw_trace_has_it() -> None:
    path = next(sample(TIMESFORMER).glob("*.json.gz"))
    events = _raw(path)
    raw = _raw_triples(events)
    bmms = [e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::bmm"]
    assert raw and 2 * len(raw) == len(bmms)  # every bmm of the trace is in one attention
    # the model reading: the scores are computed apart (no fused kernel), heads folded
    r = read_model(pk.load(path, cache=False, progress=False))
    assert r.get("flash_attention") is False
    assert "bmm" in r.details["flash_attention"]
    for n, s in {(t["n"], t["s"]) for t in raw}:
        assert f"{n} and {s}" in r.details["seq_length"]

    from perfkit.analysis.shapes import bmm_attention

    found = bmm_attention(pk.load(path, cache=False, progress=False))
    assert len(found) == len(raw)
    assert sorted(zip(found["batch_heads"], found["seq"], found["head_dim"], strict=True)) \
        == sorted((t["n"], t["s"], t["d"]) for t in raw)
    # the members' shapes as the raw Input Dims write them, in the raw order
    as_text = lambda dims: ";".join(",".join(map(str, x)) for x in dims if x)  # noqa: E731
    assert [str(x).strip(";") for x in found["qk_shapes"]] == \
        [as_text(t["qk"]["args"]["Input Dims"]) for t in raw]
    assert [str(x).strip(";") for x in found["pv_shapes"]] == \
        [as_text(t["pv"]["args"]["Input Dims"]) for t in raw]
    assert not found["backward"].any()  # a forward-only trace


def _raw_chain_tasks(events: list[dict], raw: list[dict]) -> list[list[dict]]:
    """The device tasks of each chain of ``raw``: on the stream of its first kernel, from
    the ``q·kᵀ`` product's first kernel to the ``·v`` product's last, less the copies
    (``.contiguous()`` of ``v``: the copy finding's time, not attention's)."""
    host = {e["args"]["External id"]: e["name"] for e in events
            if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    tasks = sorted((e for e in events if e.get("cat") in _DEVICE), key=lambda e: e["ts"])
    out = []
    for t in raw:
        qk, pv = t["qk"]["args"]["External id"], t["pv"]["args"]["External id"]
        mine = [i for i, e in enumerate(tasks) if e["args"].get("External id") in (qk, pv)]
        stream = tasks[mine[0]]["args"]["stream"]
        out.append([e for e in tasks[mine[0]:mine[-1] + 1]
                    if e["args"].get("stream") == stream
                    and host.get(e["args"].get("External id")) != "aten::copy_"])
    return out


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.shared_samples
def test_timesformer_unfused_attention_finding_times_the_raw_kernels() -> None:
    path = next(sample(TIMESFORMER).glob("*.json.gz"))
    events = _raw(path)
    raw = _raw_triples(events)
    steps = len({e["name"] for e in events
                 if str(e.get("name", "")).startswith("ProfilerStep#")})
    peak = H100.peak_flops["bf16"]  # the trace's products take c10::BFloat16
    eff = ASSUMPTIONS["kernel_efficiency"]
    totals, savings = [], []
    for t, chain in zip(raw, _raw_chain_tasks(events, raw), strict=True):
        tot = sum(e["dur"] for e in chain)
        fused = 2 * (2.0 * t["n"] * t["s"] * t["s"] * t["d"]) / (eff * peak) * 1e6
        totals.append(tot)
        savings.append(max(0.0, tot - fused))
    found = pk.advise(pk.load(path, cache=False, progress=False), hardware=H100)
    (att,) = [f for f in found if f.rule == "attention_not_fused"]
    assert att.ms_per_step == pytest.approx(sum(savings) / steps / 1e3, rel=1e-9)
    assert f"{len(raw)} attention chains" in att.evidence
    chains = pk.analysis.attention_chains(pk.load(path, cache=False, progress=False), H100)
    assert sorted(chains["total_us"]) == pytest.approx(sorted(totals), rel=1e-9)


def _gpu(rows: list[tuple[int, str, str, str]]) -> Profile:
    """One rank, one step of GPU kernels: (stream, launching operator, kernel name, input
    shapes) each, 10 µs apart."""
    recs = [{"rank": 0, "step": 1, "name": kname, "type": "kernel", "category": "compute",
             "stream": stream, "start_us": 10.0 * i, "dur_us": 5.0, "op_name": op,
             "input_shapes": shapes, "input_dtypes": "c10::BFloat16;c10::BFloat16"}
            for i, (stream, op, kname, shapes) in enumerate(rows)]
    return Profile(ProfileMeta("test", framework="pytorch", rank=0, device_type="gpu"),
                   {"kernels": pd.DataFrame(recs)})


GEMM, SOFTMAX, MUL = "cutlass_gemm_bf16", "softmax_warp_forward", "vectorized_mul_kernel"


def _attention(n: int, s: int, d: int, stream: int = 7, softmax: str = "") -> list:
    return [(stream, "aten::bmm", GEMM, f"{n},{s},{d};{n},{d},{s}"),
            (stream, "aten::_softmax", SOFTMAX, softmax or f"{n // 4},4,{s},{s};;"),
            (stream, "aten::bmm", GEMM, f"{n},{s},{s};{n},{s},{d}")]


def test_only_the_whole_chain_on_one_stream_is_attention() -> None:
    others = [
        # the same two products with no softmax between them
        (7, "aten::bmm", GEMM, "32,128,64;32,64,128"), (7, "aten::mul", MUL, "32,128,128;"),
        (7, "aten::bmm", GEMM, "32,128,128;32,128,64"),
        # a softmax of other values (a router's) between them
        *_attention(8, 256, 64, softmax="4096,8;;"),
        # the chain split over two streams
        *[(7 if i == 0 else 9, *r[1:]) for i, r in enumerate(_attention(16, 512, 64))],
        # batched GEMMs of MoE experts, then a softmax
        (7, "aten::bmm", GEMM, "8,512,1024;8,1024,4096"), (7, "aten::_softmax", SOFTMAX,
                                                          "8,512,4096;;"),
        (7, "aten::bmm", GEMM, "8,512,4096;8,4096,1024"),
    ]
    assert read_model(_gpu(others + _attention(64, 1024, 128))).get("flash_attention") \
        is False
    assert read_model(_gpu(others)).get("flash_attention") is None

    from perfkit.analysis.shapes import bmm_attention

    assert bmm_attention(_gpu(others)).empty
    found = bmm_attention(_gpu(others + _attention(64, 1024, 128)))
    assert list(zip(found["batch_heads"], found["seq"], found["head_dim"], strict=True)) == \
        [(64, 1024, 128)]


@pytest.mark.shared_samples
def test_timesformer_gemm_finding_leaves_out_the_attention_chains_gemms() -> None:
    """The GEMM finding prices the GEMM calls outside the attention chains only: the
    chains' bmm kernels are the unfused-attention finding's time (129 ms per step there,
    which the GEMM finding priced again, 24 ms, before)."""
    path = next(sample(TIMESFORMER).glob("*.json.gz"))
    events = _raw(path)
    raw = _raw_triples(events)
    in_chains = {t[m]["args"]["External id"] for t in raw for m in ("qk", "pv")}
    steps = len({e["name"] for e in events
                 if str(e.get("name", "")).startswith("ProfilerStep#")})
    ops = {e["args"]["External id"]: e for e in events
           if e.get("cat") == "cpu_op" and e["name"] in _PRODUCTS}
    # every GEMM of the trace: its device tasks' time, grouped by operator, dims, dtypes
    time: dict = defaultdict(float)
    for e in events:
        if e.get("cat") in _DEVICE and e["args"].get("External id") in ops:
            time[e["args"]["External id"]] += e["dur"]
    assert {ops[i]["name"] for i in time} == {"aten::bmm", "aten::addmm"}
    assert in_chains <= set(time)  # every chain's products ran kernels
    groups: dict = defaultdict(lambda: [0, 0.0])
    for i, us in time.items():
        if i in in_chains:
            continue
        a = ops[i]["args"]
        assert ops[i]["name"] == "aten::addmm"  # every bmm is in a chain
        (m, k), (k2, n) = a["Input Dims"][1], a["Input Dims"][2]
        assert k == k2 and a["Input type"][:3] == ["c10::BFloat16"] * 3
        key = (m, k, n)
        groups[key][0] += 1
        groups[key][1] += us
    # the roofline of each group (calc.op_cost.gemm_cost: 2·m·n·k FLOPs, bf16 operands
    # and result read and written once), far below at under 35 %, scored at 70 %
    eff, far = ASSUMPTIONS["kernel_efficiency"], ASSUMPTIONS["far_below"]
    saving = 0.0
    for (m, k, n), (count, us) in groups.items():
        ideal = max(2.0 * m * n * k / H100.peak_flops["bf16"],
                    2.0 * (m * k + k * n + m * n) / H100.memory_bandwidth) * 1e6
        if count * ideal / us < far:
            saving += max(0.0, us - count * ideal / eff)
    found = pk.advise(pk.load(path, cache=False, progress=False), hardware=H100)
    (gemm,) = [f for f in found if f.rule == "gemm_below_roofline"]
    assert saving > 0
    assert gemm.ms_per_step == pytest.approx(saving / steps / 1e3, rel=1e-6)
    # and it says what it left out: the chains' GEMM calls and their time per step
    left = sum(us for i, us in time.items() if i in in_chains) / steps
    assert f"leaves out {len(in_chains)} GEMM calls ({fmt_time(left)} per step)" \
        in gemm.evidence
    # which is the products' time within the chains the attention finding counts
    chained = [e for c in _raw_chain_tasks(events, raw) for e in c
               if e["args"].get("External id") in in_chains]
    assert sum(e["dur"] for e in chained) / steps == pytest.approx(left, rel=1e-9)


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.shared_samples
def test_timesformer_unfused_pattern_rows_are_the_raw_attention_chains() -> None:
    """The Operators tab's unfused-attention rows are the chains the advisor counts: a
    copy between the softmax and the second bmm no longer hides them, and the copies are
    left to the copies row."""
    path = next(sample(TIMESFORMER).glob("*.json.gz"))
    events = _raw(path)
    raw = _raw_triples(events)
    chains = _raw_chain_tasks(events, raw)
    profile = pk.load(path, cache=False, progress=False)
    uf = pk.analysis.unfused_patterns(profile)
    (row,) = uf[uf["pattern"] == "softmax_dropout_matmul"].itertuples()
    assert row.occurrences == len(raw)
    assert row.kernels == sum(len(c) for c in chains)
    assert row.total_us == pytest.approx(sum(e["dur"] for c in chains for e in c), rel=1e-9)
    assert row.saving_us == pytest.approx(
        sum(sum(e["dur"] for e in c) - max(e["dur"] for e in c) for c in chains), rel=1e-9)
    det = pk.analysis.unfused_patterns(profile, detail=True)
    det = det[det["pattern"] == "softmax_dropout_matmul"]
    assert sorted(det["total_us"]) == pytest.approx(
        sorted(sum(e["dur"] for e in c) for c in chains), rel=1e-9)
    assert sorted(det["names"]) == sorted(" > ".join(e["name"] for e in c) for c in chains)
    # the advisor's chains, the same ones
    ch = pk.analysis.attention_chains(profile, H100)
    assert sorted(ch["total_us"]) == pytest.approx(sorted(det["total_us"]), rel=1e-9)
    assert sorted(ch["kernels"]) == sorted(det["kernels"])


def test_a_router_softmax_between_batched_gemms_is_not_attention() -> None:
    """bmm, softmax, bmm by their kernels' names, whose shapes make no attention (a MoE
    router's softmax between experts' batched GEMMs): neither the unfused-pattern table
    nor the advisor takes it for attention; the same kernels without shapes, and with the
    shapes of attention, are."""
    router = [(7, "aten::bmm", GEMM, "8,512,1024;8,1024,4096"),
              (7, "aten::_softmax", SOFTMAX, "8,512,4096;;"),
              (7, "aten::bmm", GEMM, "8,512,4096;8,4096,1024"),
              (7, "aten::bmm", GEMM, "8,256,64;8,64,256"),  # q·kᵀ shapes, a router's
              (7, "aten::_softmax", SOFTMAX, "4096,8;;"),  # softmax over 8 experts
              (7, "aten::bmm", GEMM, "8,256,256;8,256,64")]
    letters = "".join(kernel_tokens(table(_gpu(router), "kernels")))
    assert letters == "BFBBFB"  # what the letter pattern alone matches

    def attention_rows(profile: Profile) -> pd.DataFrame:
        uf = pk.analysis.unfused_patterns(profile)
        return uf[uf["pattern"] == "softmax_dropout_matmul"]

    def advised(profile: Profile) -> list[str]:
        return [f.rule for f in pk.advise(profile, hardware=H100)]

    routed = _gpu(router)
    assert attention_rows(routed).empty
    assert pk.analysis.attention_chains(routed, H100).empty
    assert "attention_not_fused" not in advised(routed)
    # without shapes the kernels' names are all there is: the letter pattern stands
    unshaped = _gpu([(s, op, name, "") for s, op, name, _ in router])
    assert attention_rows(unshaped)["occurrences"].sum() == 2
    # the shapes of attention after the router's: one chain, its three kernels
    real = _gpu(router + _attention(64, 1024, 128))
    row = attention_rows(real)
    assert row["occurrences"].tolist() == [1] and row["kernels"].tolist() == [3]
    assert len(pk.analysis.attention_chains(real, H100)) == 1
