"""Tensor parallelism read from the widths of the shapes, where no tp is recorded.

``wild/msa_kernel_details`` (msprof-analyze's ``kernel_details.csv`` of a real torch_npu
GPT run, one rank, no communication group) keeps the hidden size whole (the embedding
tables are ``(·, 12288)``) while the attention and the MLP run on a slice of it: the
query width per rank is a fraction of the hidden size, and the MLP width per rank × that
same factor is the plain MLP's 4h. The truth is read here from the csv with the ``csv``
module (Input Shapes, by hand); the figures downstream (heads, FFN, devices, tokens/s
per device, MFU) are checked against hand arithmetic. The bundled ``llama2-7b-tp2``
records its tp group in ``profiler_metadata.json`` (read with ``json``): that tp stays,
and the widths rule never runs over it.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from shared_samples import sample

import perfkit as pk
from perfkit.analysis.shapes import ShapeReading, read_model
from perfkit.job.fields import FieldValue, Readings
from perfkit.job.tp_widths import read_tp_from_widths, standard_ffn, tp_from_widths
from perfkit.widgets.summary import job_summary

MSA = "wild/msa_kernel_details"
TP2 = Path(__file__).resolve().parents[1] / "data" / "simulated" / "llama2-7b-tp2"


def _dims(text: str) -> list[tuple[int, ...]]:
    """``"4096,12288;4608,12288"`` as shapes, by hand (empty entries left out)."""
    return [tuple(int(x) for x in part.split(",")) for part in text.strip('"').split(";")
            if part and all(x.strip().isdigit() for x in part.split(","))]


def _raw_widths() -> dict[str, int]:
    """The widths of the msa csv, read with ``csv``: hidden size (embedding tables),
    heads per rank (the softmax's ``(b, a, S, S)``), head size (q·kᵀ's ``(N, S, d)``),
    MLP width per rank (w with ``h → w`` and ``w → h`` products besides attention's),
    layers (softmaxes), batch and sequence, vocabulary per rank (the token table's rows:
    vocab-parallel, the logits GEMM beside it is as wide)."""
    with (sample(MSA) / "kernel_details.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    tables = [_dims(r["Input Shapes"])[0] for r in rows if r["Type"] == "GatherV2"]
    (h,) = {t[1] for t in tables}
    softmax = [_dims(r["Input Shapes"])[0] for r in rows if r["Type"] == "ScaledMaskedSoftmax"]
    (b, heads, s, _), = set(softmax)
    qk = {_dims(r["Input Shapes"])[0] for r in rows if r["Type"] == "BatchMatMul"}
    d = min(x[-1] for x in qk)  # (N, S, d) and (N, S, S): the smaller last dim
    mm = [_dims(r["Input Shapes"]) for r in rows if r["Type"] == "MatMul"]
    ups = {w[0] for x, w in mm if x[1] == h}          # (tokens, h) × (w, h)ᵀ → w
    downs = {x[1] for x, w in mm if w[0] == h}        # (tokens, w) × (h, w)ᵀ → h
    q = heads * d
    qkv = {w for w in ups if w % d == 0 and w > q and (w - q) % (2 * d) == 0}
    (ffn,) = (ups & downs) - qkv - {q}
    (qkv_w,) = qkv
    return {"h": h, "heads": heads, "d": d, "q": q, "kv": (qkv_w - q) // 2, "ffn": ffn,
            "layers": len(softmax), "b": b, "s": s,
            "vocab": max(t[0] for t in tables if t[0] != s)}


@pytest.mark.shared_samples
def test_msa_reads_tp_from_two_widths() -> None:
    raw = _raw_widths()
    h, q, f = raw["h"], raw["q"], raw["ffn"]
    k = h // q
    assert h % q == 0 and k > 1 and f * k == 4 * h  # the sample is what the rule is for
    job = pk.infer_job(pk.load(sample(MSA), progress=False))
    assert job.parallel.tp == k and job.source("tp") == "profile"
    detail = job.detail("tp")
    for width in (h, q, f, f * k):
        assert str(width) in detail
    # the widths per rank × tp are the model's
    assert job.value("num_attention_heads") == raw["heads"] * k
    assert job.value("num_kv_heads") == raw["kv"] // raw["d"] * k
    assert job.value("ffn_hidden_size") == f * k
    assert job.value("hidden_size") == h and job.value("head_dim") == raw["d"]
    # a tp group of k ranks: the one loaded rank is one of them, dp stays an assumption
    assert job.world_size == k and job.parallel.dp == 1
    assert job.source("dp") == "default" and job.source("world_size") == "default"


@pytest.mark.shared_samples
def test_msa_throughput_and_mfu_count_every_tp_rank() -> None:
    raw = _raw_widths()
    h, k = raw["h"], raw["h"] // raw["q"]
    job = pk.infer_job(pk.load(sample(MSA), progress=False))
    rows = job_summary(job).set_index("key")
    tokens = raw["b"] * raw["s"]
    per_device = tokens / (job.step_time_s * k)
    assert rows.loc["tokens_per_s_per_device", "value"] == pytest.approx(per_device)
    assert rows.loc["devices", "value"] == k
    # forward FLOPs per token by hand, every width whole (× k): QKV, scores and values,
    # output projection, the plain MLP's two products; the logits over the whole
    # vocabulary (the table's rows per rank × k)
    qw = kvw = raw["q"] * k
    ffn = raw["ffn"] * k
    per_layer = (2 * h * (qw + 2 * kvw) + 4 * raw["s"] * qw + 2 * qw * h + 2 * 2 * h * ffn)
    forward = raw["layers"] * per_layer + 2 * h * raw["vocab"] * k
    peak = job.hardware.peak_flops[job.dtype]
    assert rows.loc["mfu", "value"] == pytest.approx(3 * forward * per_device / peak,
                                                     rel=1e-9)


def _tp2_group_size() -> int:
    """The tp group's size as ``profiler_metadata.json`` records it (``json``)."""
    meta = json.loads(next(TP2.rglob("profiler_metadata.json")).read_text())
    (group,) = [g for g in meta["parallel_group_info"].values() if g["group_name"] == "tp"]
    return len(group["global_ranks"])


def test_recorded_tp_is_kept_and_never_overridden() -> None:
    tp = _tp2_group_size()
    prof = pk.load(TP2, progress=False)
    job = pk.infer_job(prof)
    assert job.parallel.tp == tp and job.source("tp") == "profile"
    assert "width" not in job.detail("tp")
    # its widths per rank agree (the rule would read the same tp) ...
    reading = read_model(prof, tp=1)
    found = tp_from_widths(reading)
    assert found is not None and found[0] == tp
    # ... yet a tp read from the profile, or given in a config, is left as it is
    for source in ("profile", "config"):
        out = Readings(tp=FieldValue(1, source, "recorded"),
                       dp=FieldValue(1, "default", ""), pp=FieldValue(1, "default", ""),
                       cp=FieldValue(1, "default", ""),
                       world_size=FieldValue(1, "default", ""))
        assert read_tp_from_widths(reading, out) is None
        assert out["tp"] == FieldValue(1, source, "recorded")


def test_one_width_alone_reads_no_tp() -> None:
    """A hidden size 2 × the query width, with an MLP of 4h: a model that narrows its
    attention, not tensor parallelism (the MLP would be 2h per rank under tp 2)."""
    h = 4096
    reading = _reading(h=h, heads=16, d=128, ffn=4 * h, mlp="gpt")
    assert tp_from_widths(reading) is None
    assert tp_from_widths(_reading(h=h, heads=16, d=128, ffn=2 * h, mlp="gpt"))[0] == 2
    # gated: 8h/3 rounded up to 256 is Llama's 11008 for 4096; halved per rank under tp 2
    assert 11008 in standard_ffn(h, "gated")
    assert tp_from_widths(_reading(h=h, heads=16, d=128, ffn=11008 // 2, mlp="gated"))[0] == 2
    assert tp_from_widths(_reading(h=h, heads=16, d=128, ffn=11008, mlp="gated")) is None
    # a mixture of experts is not read
    assert tp_from_widths(_reading(h=h, heads=16, d=128, ffn=2 * h, mlp="gpt",
                                   moe=True)) is None


def _reading(h: int, heads: int, d: int, ffn: int, mlp: str,
             moe: bool = False) -> ShapeReading:
    """A reading with these widths per rank (as read_model with tp = 1 gives them)."""
    out = ShapeReading(source="kernels")
    for name, value in (("hidden_size", h), ("num_attention_heads", heads),
                        ("head_dim", d), ("ffn_hidden_size", ffn), ("mlp", mlp),
                        ("moe", moe)):
        out.put(name, value, "given")
    out.values["_q_width"] = heads * d
    return out
