"""Batch and sequence of an attention run as 3-D bmm, softmax, bmm, where evidence agrees.

``wild/msa_kernel_details`` (msprof-analyze's ``kernel_details.csv`` of a real torch_npu
GPT run) folds batch and heads into ``BatchMatMul (12, 1024, 512)``, but its fused softmax
views the scores as ``(4, 3, 1024, 1024)``, the projections run over 4096 = 4·1024 tokens
and the embedding lookups take ``(4, 1024)`` ids, one of them from a position table of
1024 rows: the model reading takes batch 4, sequence 1024 there, and with the tokens known
the FFN, vocabulary, MLP and bias follow. TimeSformer (``wild/tl_timesformer_h100``), whose
``S`` is the frames of one attention and the patches of the next, stays unread. The tests
read the csv and the trace themselves (csv module, gzip/json; Input Shapes parsed by hand).
"""

from __future__ import annotations

import csv
import gzip
import json
from collections import Counter

import pytest
from shared_samples import sample

import perfkit as pk
from perfkit.analysis.shapes import read_model

MSA = "wild/msa_kernel_details"
COPY = "ascend/msprof-analyze-tests/compute_advice_v1"  # the same csv in its test tree
TIMESFORMER = "wild/tl_timesformer_h100"

pytestmark = pytest.mark.shared_samples


def _rows(name: str = MSA) -> list[dict]:
    with (sample(name) / "kernel_details.csv").open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _dims(text: str) -> list[list[int]]:
    """Input Shapes text (``"4096,12288;4608,12288"``) as lists of ints, by hand."""
    out = []
    for part in text.strip('"').split(";"):
        nums = [x.strip() for x in part.split(",")]
        if part and all(x.isdigit() for x in nums):
            out.append([int(x) for x in nums])
    return out


def _raw_model(rows: list[dict]) -> dict:
    """The model as the csv's rows say it, read by hand."""
    (scores,) = {tuple(_dims(r["Input Shapes"])[0]) for r in rows
                 if r["Type"] == "ScaledMaskedSoftmax"}
    b, heads, s, s2 = scores
    assert s == s2
    qk = {tuple(_dims(r["Input Shapes"])[0]) for r in rows if r["Type"] == "BatchMatMul"
          and _dims(r["Input Shapes"])[1][2] == s}  # (N, S, d) x (N, d, S)
    ((n, s3, d),) = qk
    assert (n, s3) == (b * heads, s)  # the view unfolds batch × heads
    gathers = [_dims(r["Input Shapes"]) for r in rows if r["Type"] == "GatherV2"]
    tables = sorted({tuple(g[0]) for g in gathers}, key=lambda t: -t[0])
    ids = {tuple(g[1]) for g in gathers}
    (vocab, hidden), (positions, hidden2) = tables
    assert hidden == hidden2
    # MatMul x (T, k) · W (n, k)ᵀ: tokens T, widths k → n
    mm = [_dims(r["Input Shapes"]) for r in rows if r["Type"] == "MatMul"]
    tokens = {x[0] for x, _w, *_ in mm}
    k_to_n = Counter((x[1], w[0]) for x, w, *_ in mm)
    attention = {heads * d, 3 * heads * d}  # the query / output width and the fused QKV
    ups = {n_ for k, n_ in k_to_n if k == hidden and n_ not in attention | {hidden}}
    downs = {k for k, n_ in k_to_n if n_ == hidden and k not in attention | {hidden}}
    layers = sum(r["Type"] == "ScaledMaskedSoftmax" for r in rows)
    return {"b": b, "s": s, "heads": heads, "d": d, "ids": ids, "positions": positions,
            "vocab": vocab, "hidden": hidden, "tokens": tokens, "ffn": ups & downs,
            "logits": ups - downs, "ups_per_layer": sum(
                c for (k, n_), c in k_to_n.items() if k == hidden and n_ in ups & downs)
            / layers, "operands": {len(_dims(r["Input Shapes"])) for r in rows
                                   if r["Type"] == "MatMul"}}


@pytest.mark.parametrize("name", [MSA, COPY])
def test_folded_attention_reads_batch_and_sequence_where_the_csv_agrees(name: str) -> None:
    raw = _raw_model(_rows(name))
    b, s = raw["b"], raw["s"]
    # the independent evidence: projections over b·S tokens, (b, S) ids, S positions
    assert raw["tokens"] == {b * s}
    assert raw["ids"] == {(b, s)}
    assert raw["positions"] == s
    r = read_model(pk.load(sample(name), cache=False, progress=False))
    assert r.get("micro_batch_size") == b
    assert r.get("seq_length") == s
    said = r.details["seq_length"]
    assert said == r.details["micro_batch_size"]
    assert f"({b}, {raw['heads']}, {s}, {s})" in said  # the softmax's view
    assert f"{b * s} = {b}·{s} tokens" in said
    assert f"({b}, {s}) ids" in said
    assert f"({s}, {raw['hidden']})" in said  # the position table


@pytest.mark.parametrize("name", [MSA, COPY])
def test_with_the_tokens_known_the_widths_follow_the_raw_matmuls(name: str) -> None:
    raw = _raw_model(_rows(name))
    (ffn,) = raw["ffn"]  # the one width w with hidden → w and w → hidden
    assert raw["logits"] == {raw["vocab"]}  # the logits: hidden → vocabulary, no way back
    r = read_model(pk.load(sample(name), cache=False, progress=False))
    assert r.get("hidden_size") == raw["hidden"]
    assert r.get("ffn_hidden_size") == ffn
    assert r.get("vocab_size") == raw["vocab"]
    assert r.get("mlp") == ("gpt" if raw["ups_per_layer"] == 1 else "gated")
    assert raw["operands"] == {2}  # no MatMul takes a bias input
    assert r.get("bias") == "none"


def test_query_and_key_value_heads_are_worded_alike() -> None:
    raw = _raw_model(_rows())
    r = read_model(pk.load(sample(MSA), cache=False, progress=False))
    assert r.get("num_attention_heads") == r.get("num_kv_heads") == raw["heads"]
    assert r.details["num_attention_heads"].endswith(f": {raw['heads']} query heads per rank")
    assert r.details["num_kv_heads"].endswith(f": {raw['heads']} key/value heads per rank")
    # the fused QKV projection shows the key/value heads: (a + 2·g)·d wide
    assert f"{raw['hidden']} → {3 * raw['heads'] * raw['d']}" in r.details["num_kv_heads"]


def test_timesformer_sequence_stays_unread() -> None:
    """Its 4-D softmax views disagree on ``S`` (frames, then patches) and it has no
    embedding lookup: neither the batch nor the sequence is read."""
    path = next(sample(TIMESFORMER).glob("*.json.gz"))
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    views = {tuple(e["args"]["Input Dims"][0]) for e in events
             if e.get("cat") == "cpu_op" and e.get("name") == "aten::_softmax"}
    seqs = {v[-1] for v in views if len(v) == 4 and v[-1] == v[-2]}
    assert len(seqs) > 1
    assert not any(e.get("name") == "aten::embedding" for e in events
                   if e.get("cat") == "cpu_op")
    r = read_model(pk.load(path, cache=False, progress=False))
    assert r.get("seq_length") is None and r.get("micro_batch_size") is None
    for s in seqs:
        assert f" and {s}" in r.details["seq_length"]
    assert "the batch cannot be read" in r.details["seq_length"]
    assert r.details["num_kv_heads"].endswith(
        f": {r.get('num_kv_heads')} key/value heads per rank")


def test_without_the_embeddings_the_sequence_stays_unread(tmp_path) -> None:
    """The softmax's view and the projections' tokens alone do not settle ``S``: the same
    csv less its embedding lookups (written to a temporary folder) reads no sequence."""
    with (sample(MSA) / "kernel_details.csv").open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        fields, rows = reader.fieldnames, [r for r in reader if r["Type"] != "GatherV2"]
    with (tmp_path / "kernel_details.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    raw = _raw_model(_rows())
    r = read_model(pk.load(tmp_path, cache=False, progress=False))
    assert r.get("seq_length") is None and r.get("micro_batch_size") is None
    assert f"{raw['b'] * raw['heads']} and {raw['s']}" in r.details["seq_length"]
