"""Attention run as 3-D ``BatchMatMul``, ``ScaledMaskedSoftmax``, ``BatchMatMul`` on Ascend.

msprof-analyze's ``kernel_details.csv`` (``wild/msa_kernel_details``, a real torch_npu run
of a GPT model) computes each attention as ``BatchMatMul (N, S, d) x (N, d, S)``, the fused
scale-mask-softmax of the scores viewed as ``(b, a, S, S)``, then a dropout and a strided
copy, ``BatchMatMul (N, S, S) x (N, S, d)``; the dropout mask is generated on a second
stream. The tests read the csv themselves (csv module: the rows of each stream in start
order, their Input Shapes) and check the chains, the model reading, the Operators tab's
pattern and the advisor's finding against that reading; a hand-written table checks that
a ``ScaledMaskedSoftmax`` of other values is not taken for attention.
"""

from __future__ import annotations

import csv
import math
from collections import Counter, defaultdict

import numpy as np
import pytest
from shared_samples import sample

import perfkit as pk
from perfkit.advisor import ASSUMPTIONS
from perfkit.analysis.shapes import bmm_attention, read_model
from perfkit.analysis.shapes.bmm_attention import bmm_attention_triples
from perfkit.analysis.shapes.records import parse_shapes

MSA = "wild/msa_kernel_details"
NPU = pk.Hardware.preset("ascend-910b")


def _rows() -> list[dict]:
    with (sample(MSA) / "kernel_details.csv").open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _dims(text: str) -> list[list[int]]:
    """Input Shapes text (``"12,1024,512;12,512,1024"``) as lists of ints, by hand."""
    return [[int(x) for x in part.split(",")] for part in text.strip('"').split(";")
            if part and all(x.strip().isdigit() for x in part.split(","))]


def _raw_chains(rows: list[dict]) -> list[dict]:
    """Each ``BatchMatMul``, ``ScaledMaskedSoftmax``, ``BatchMatMul`` in a row among one
    stream's products and softmaxes, with the shapes of attention: ``(N, S, d) x (N, d,
    S)``, scores of ``N·S·S`` values ending in ``S``, ``(N, S, S) x (N, S, d)``; with the
    stream's kernels from the first product to the second."""
    by_stream: dict[str, list[dict]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: float(r["Start Time(us)"])):
        by_stream[r["Stream ID"]].append(r)
    out = []
    for seq in by_stream.values():
        at = [i for i, r in enumerate(seq)
              if r["Type"] in ("BatchMatMul", "MatMul", "ScaledMaskedSoftmax")]
        for i, j, k in zip(at, at[1:], at[2:], strict=False):
            a, b, c = seq[i], seq[j], seq[k]
            if (a["Type"], b["Type"], c["Type"]) != ("BatchMatMul", "ScaledMaskedSoftmax",
                                                     "BatchMatMul"):
                continue
            (q, kt), scores, (p, v) = _dims(a["Input Shapes"])[:2], \
                _dims(b["Input Shapes"])[0], _dims(c["Input Shapes"])[:2]
            n, s, d = q
            if kt != [n, d, s] or p != [n, s, s] or v != [n, s, d]:
                continue
            if scores[-1] != s or math.prod(scores) != n * s * s:
                continue
            out.append({"n": n, "s": s, "d": d, "scores": scores, "kernels": seq[i:k + 1]})
    return out


@pytest.mark.shared_samples
def test_scaled_masked_softmax_attention_is_found_as_the_raw_csv_has_it() -> None:
    raw = _raw_chains(_rows())
    assert len(raw) == 2  # the csv's two layers
    found = bmm_attention(pk.load(sample(MSA), cache=False, progress=False))
    assert list(zip(found["batch_heads"], found["seq"], found["head_dim"], strict=True)) == \
        [(t["n"], t["s"], t["d"]) for t in raw]
    assert not found["backward"].any()  # the csv has no backward pass
    assert list(found["softmax_shapes"].str.strip('"')) == \
        [t["kernels"][[r["Type"] for r in t["kernels"]].index("ScaledMaskedSoftmax")]
         ["Input Shapes"].strip('"') for t in raw]


def _lookups_per_table(rows: list[dict]) -> int:
    """The csv's embedding lookups (``GatherV2``) of each table, by hand: each table (the
    tokens', the learned positions') is looked up once per micro-batch."""
    lookups = Counter(r["Input Shapes"].split(";")[0] for r in rows if r["Type"] == "GatherV2")
    assert len(lookups) == 2  # (6400, 12288) and (1024, 12288)
    (micro,) = set(lookups.values())
    return micro


@pytest.mark.shared_samples
def test_micro_batches_are_the_lookups_of_one_embedding_table() -> None:
    r = read_model(pk.load(sample(MSA), cache=False, progress=False))
    assert r.get("num_micro_batches") == _lookups_per_table(_rows())
    assert r.get("position_embedding") == "learned"  # the second table is the positions'


@pytest.mark.shared_samples
def test_read_model_takes_heads_and_layers_from_the_raw_attention() -> None:
    rows = _rows()
    raw = _raw_chains(rows)
    (n, s, d), = {(t["n"], t["s"], t["d"]) for t in raw}
    (scores,) = {tuple(t["scores"]) for t in raw}
    heads = scores[1]  # the scores as (b, a, S, S)
    assert scores[0] * heads == n
    # the fused QKV projection beside it writes 3 · heads · d columns per token
    qkv = [r for r in rows if r["Type"] == "MatMul"
           and _dims(r["Input Shapes"])[1][0] == 3 * heads * d]
    assert qkv and all(_dims(r["Input Shapes"])[0][0] == n * s // heads for r in qkv)
    r = read_model(pk.load(sample(MSA), cache=False, progress=False))
    assert r.get("head_dim") == d
    assert r.get("num_attention_heads") == heads
    micro = r.get("num_micro_batches")
    assert micro == _lookups_per_table(rows)
    assert r.get("num_layers") == len(raw) // micro
    assert r.get("flash_attention") is False
    assert r.get("recompute") is None  # no backward pass: nothing to compare with


@pytest.mark.shared_samples
def test_unfused_attention_pattern_and_finding_time_the_raw_kernels() -> None:
    raw = _raw_chains(_rows())
    eff = ASSUMPTIONS["kernel_efficiency"]
    peak = NPU.peak_flops["fp16"]  # the csv's products take FLOAT16
    totals, savings = [], []
    for t in raw:
        # the chain's kernels on its stream, less the strided copies (the copies pattern)
        tot = sum(float(r["Duration(us)"]) for r in t["kernels"] if r["Type"] != "AsStrided")
        fused = 2 * (2.0 * t["n"] * t["s"] * t["s"] * t["d"]) / (eff * peak) * 1e6
        totals.append(tot)
        savings.append(max(0.0, tot - fused))
    profile = pk.load(sample(MSA), cache=False, progress=False)
    chains = pk.analysis.attention_chains(profile, NPU)
    assert list(chains["total_us"]) == pytest.approx(totals, rel=1e-9)
    assert list(chains["kernels"]) == [sum(r["Type"] != "AsStrided" for r in t["kernels"])
                                       for t in raw]
    uf = pk.analysis.unfused_patterns(profile)
    (att,) = uf[uf["pattern"] == "softmax_dropout_matmul"].itertuples()
    assert att.occurrences == len(raw)
    assert att.total_us == pytest.approx(sum(totals), rel=1e-9)
    found = pk.advise(pk.load(sample(MSA), cache=False, progress=False), hardware=NPU)
    (f,) = [f for f in found if f.rule == "attention_not_fused"]
    assert f"{len(raw)} attention chains" in f.evidence
    assert f.ms_per_step == pytest.approx(sum(savings) / 1e3, rel=1e-9)  # one step


def _triples(rows: list[tuple[str, str]]) -> list:
    labels = [lab for lab, _ in rows]
    shapes = [parse_shapes(s) for _, s in rows]
    return bmm_attention_triples(labels, shapes, np.zeros(len(rows), dtype=int))


def test_a_scaled_masked_softmax_of_other_values_is_no_attention() -> None:
    qk, pv = ("BatchMatMul", "12,1024,512;12,512,1024"), ("BatchMatMul",
                                                          "12,1024,1024;12,1024,512")
    between = [("Mul", "12,1024,1024;"), ("DropOutDoMask", "4,3,1024,1024;1572864;"),
               ("AsStrided", "1024,4,4608;3;3;")]
    good = ("ScaledMaskedSoftmax", "4,3,1024,1024;1,1,1024,1024")
    (t,) = _triples([qk, between[0], good, *between[1:], pv])
    assert (t.n, t.s, t.d, t.backward) == (12, 1024, 512, False)
    # scores of another size, or another last dimension: not these products' softmax
    assert _triples([qk, ("ScaledMaskedSoftmax", "4,3,512,1024;1,1,512,1024"), pv]) == []
    assert _triples([qk, ("ScaledMaskedSoftmax", "4,3,2048,512;1,1,2048,512"), pv]) == []
    # a softmax-like name that is not the softmax
    assert _triples([qk, ("ScaledMaskedSoftmaxGradX", good[1]), pv]) == []
