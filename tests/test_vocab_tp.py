"""The vocabulary under tensor parallelism: the embedding table's rows × tp, when split.

``wild/msa_kernel_details`` (msprof-analyze's ``kernel_details.csv`` of a real torch_npu
GPT run, one rank of a tp group read from the widths) holds a token table of ``rows``
rows, and its logits MatMul writes ``h → rows``: both show the same slice of a
vocab-parallel vocabulary, so the model's vocabulary is ``rows × tp``. The rows, the
logits width and tp (hidden size / query width per rank) are read here with the ``csv``
module; the FLOPs per token and the parameters per device are checked by hand.
The bundled ``llama2-7b-tp2`` simulation writes its logits per rank (``h → V / 2``): the
vocabulary read must be its scenario's (``perfkit_simulation`` in
``profiler_metadata.json``, read with ``json``).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from shared_samples import sample

import perfkit as pk
from perfkit.analysis.shapes.vocab import vocab_from_table
from perfkit.calc.memory import parameters_per_device

MSA = "wild/msa_kernel_details"
TP2 = Path(__file__).resolve().parents[1] / "data" / "simulated" / "llama2-7b-tp2"


def _dims(text: str) -> list[tuple[int, ...]]:
    """``"4096,12288;6400,12288"`` as shapes, by hand (non-numeric entries left out)."""
    return [tuple(int(x) for x in part.split(",")) for part in text.strip('"').split(";")
            if part and all(x.strip().isdigit() for x in part.split(","))]


def _msa_raw() -> dict[str, int]:
    """From the csv: hidden size and token-table rows (``GatherV2``'s table that is not
    the sequence's position table), the logits widths (MatMuls ``(tokens, h) × (w, h)ᵀ``
    whose weight has the table's rows), tp (hidden / (heads per rank × head size)),
    layers, batch, sequence, MLP width per rank."""
    with (sample(MSA) / "kernel_details.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    tables = [_dims(r["Input Shapes"])[0] for r in rows if r["Type"] == "GatherV2"]
    (h,) = {t[1] for t in tables}
    softmax = {_dims(r["Input Shapes"])[0] for r in rows if r["Type"] == "ScaledMaskedSoftmax"}
    ((b, heads, s, _),) = softmax
    n_layers = sum(r["Type"] == "ScaledMaskedSoftmax" for r in rows)
    d = min(_dims(r["Input Shapes"])[0][-1] for r in rows if r["Type"] == "BatchMatMul")
    (table_rows,) = {t[0] for t in tables if t[0] != s}
    mm = [_dims(r["Input Shapes"]) for r in rows if r["Type"] == "MatMul"]
    logits = {w[0] for x, w in mm if x == (b * s, h) and w == (table_rows, h)}
    ups = {w[0] for x, w in mm if x[1] == h}
    downs = {x[1] for x, w in mm if w[0] == h}
    q = heads * d
    (ffn,) = {w for w in ups & downs if w != q and (w - q) % (2 * d)}
    return {"h": h, "rows": table_rows, "logits": logits, "tp": h // q, "q": q, "d": d,
            "layers": n_layers, "b": b, "s": s, "ffn": ffn}


@pytest.mark.shared_samples
def test_msa_vocabulary_is_the_rows_times_tp() -> None:
    raw = _msa_raw()
    rows, k, h = raw["rows"], raw["tp"], raw["h"]
    # the sample is what the rule is for: the logits are as wide as the table, tp > 1
    assert raw["logits"] == {rows} and k > 1
    job = pk.infer_job(pk.load(sample(MSA), progress=False))
    assert job.parallel.tp == k
    assert job.value("vocab_size") == rows * k
    detail = job.detail("vocab_size")
    for figure in (rows, h, k, rows * k):
        assert str(figure) in detail
    assert "split over the tp ranks" in detail


@pytest.mark.shared_samples
def test_msa_flops_and_parameters_count_the_whole_vocabulary() -> None:
    raw = _msa_raw()
    rows, k, h, s = raw["rows"], raw["tp"], raw["h"], raw["s"]
    job = pk.infer_job(pk.load(sample(MSA), progress=False))
    # forward FLOPs per token by hand (GPT MLP, full attention, widths × k): QKV (the
    # heads' key/value as wide as the query here), scores and values, output, MLP, logits
    qw = raw["q"] * k
    per_layer = 2 * h * 3 * qw + 4 * s * qw + 2 * qw * h + 2 * 2 * h * raw["ffn"] * k
    forward = raw["layers"] * per_layer + 2 * h * rows * k
    assert job.value("num_kv_heads") == job.value("num_attention_heads")
    assert job.forward_flops_per_token() == pytest.approx(forward, rel=1e-12)
    # memory: each rank holds the table of the csv, rows × h, as the embedding's share
    # (V·h/tp), and as much again for the untied output layer
    model, parallel = job.model, job.parallel
    share = model.parameter_breakdown()["embedding"] / parallel.tp
    assert share == rows * h
    whole = parameters_per_device(model, parallel)
    smaller = parameters_per_device(model.replace(vocab_size=rows), parallel)
    assert whole - smaller == pytest.approx(2 * (rows * k - rows) * h / k)


def test_tp2_simulation_vocabulary_is_its_scenario() -> None:
    meta = json.loads(next(TP2.rglob("profiler_metadata.json")).read_text())
    truth = meta["perfkit_simulation"]
    job = pk.infer_job(pk.load(TP2, progress=False))
    assert job.parallel.tp == truth["parallel"]["tp"] > 1
    assert job.value("vocab_size") == truth["model"]["vocab_size"]


@pytest.mark.parametrize("tp", [2, 8])
def test_the_rows_are_split_only_when_the_logits_show_the_slice(tp: int) -> None:
    rows, h = 6400, 12288
    # split: the logits are as wide as the table
    vocab, local, why = vocab_from_table(rows, h, tp, {rows, 4 * h}, "csv")
    assert (vocab, local) == (rows * tp, rows)
    assert f"{rows} × tp {tp} = {rows * tp}" in why
    # replicated: the logits are the table's rows / tp
    vocab, local, why = vocab_from_table(rows, h, tp, {rows // tp, 4 * h}, "csv")
    assert (vocab, local) == (rows, rows // tp)
    assert "whole vocabulary" in why
    # no logits on the loaded ranks: the rows, and the sentence says what else they may be
    vocab, local, why = vocab_from_table(rows, h, tp, {4 * h}, "csv")
    assert (vocab, local) == (rows, rows // tp)
    assert str(rows * tp) in why and why.endswith("whole vocabulary")
    # tp 1: the rows whatever the logits
    assert vocab_from_table(rows, h, 1, {rows}, "csv")[:2] == (rows, rows)
