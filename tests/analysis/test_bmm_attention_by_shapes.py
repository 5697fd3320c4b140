"""Attention run as batched products is judged by its shapes: ``BatchMatMul``, 4-D, backward.

* A ``BatchMatMul`` (Ascend ``kernel_details.csv``) or a 4-D product whose shapes are
  recorded is attention only where the shapes make one (``(…, S, d) x (…, d, S)``, a
  softmax of the ``N·S·S`` scores, ``(…, S, S) x (…, S, d)``), not wherever a matrix
  product, a softmax and a matrix product follow each other (a MoE's experts around a
  router's softmax). One whose operands do not multiply as recorded (a transpose flag the
  profile does not keep) is still judged by the letters: its shapes do not say.
* MindSpore's CPU profile (``tests/data/mindspore_cpu_recompute``, recorded here) runs
  its attention as 4-D ``BatchMatMul`` ``(b, a, S, d)``, ``Softmax``, ``BatchMatMul``,
  and the backward as the products' gradients around a softmax backward that MindSpore
  expands into element-wise operators (``Expand/_SoftmaxBackward/...``): both are found,
  counted against the raw ``FRAMEWORK`` files read here.
* On Ascend the backward (the ``BatchMatMul`` gradients around ``ScaledMaskedSoftmaxGrad``)
  is found: ``wild/msa_kernel_details`` (a real torch_npu forward pass) with the backward
  of its two layers appended, as rows whose shapes are written out below.
"""

from __future__ import annotations

import csv
import math
import re
from collections import defaultdict
from pathlib import Path

import pytest
from shared_samples import sample, writable_copy

import perfkit as pk
from perfkit.analysis.operators.attention_passes import recompute_evidence
from perfkit.analysis.operators.attention_spans import attention_spans
from perfkit.analysis.shapes import bmm_attention, read_model
from perfkit.analysis.shapes.records import parse_shapes

ROOT = Path(__file__).resolve().parents[2]
MS_CPU = ROOT / "tests" / "data" / "mindspore_cpu_recompute"
MSA = "wild/msa_kernel_details"
NPU = pk.Hardware.preset("ascend-910b")


# ---- the letters' matches judged by shapes (hand-written rows) -----------------------------

#: A MoE's expert products around a softmax: (E, T, h) x (E, h, f), a softmax, (E, T, f) x
#: (E, f, h): the first product's result is T × f, not the S × S scores of q·kᵀ.
_MOE = {"3d": [("BatchMatMul", "8,512,1024;8,1024,2816"), ("SoftmaxV2", "4096,8"),
               ("BatchMatMul", "8,512,2816;8,2816,1024")],
        "4d": [("BatchMatMul", "2,8,512,64;2,8,64,1024"), ("Softmax", "2,8,512,1024"),
               ("BatchMatMul", "2,8,512,1024;2,8,1024,64")]}


@pytest.mark.parametrize("kind", sorted(_MOE))
def test_a_letter_match_of_batched_products_that_are_no_attention_is_left_out(
        kind: str) -> None:
    rows = _MOE[kind]
    x, y = parse_shapes(rows[0][1])[:2]
    assert x[-1] == y[-2]  # they multiply as recorded
    assert x[-2] != y[-1]  # into x[-2] × y[-1] values a row, not the S × S scores
    spans = attention_spans([(0, 2)], [], lambda i: rows[i][0],
                            lambda i: parse_shapes(rows[i][1]))
    assert spans == []


def test_a_batchmatmul_whose_operands_do_not_multiply_as_recorded_keeps_the_letters() -> None:
    # q (N, S, d) and k (N, S, d) untransposed: the kernel's transpose flag is not in the
    # profile, so its shapes say nothing and the letters' match stands
    rows = [("BatchMatMul", "12,1024,512;12,1024,512"),
            ("ScaledMaskedSoftmax", "4,3,1024,1024;1,1,1024,1024"),
            ("BatchMatMul", "12,1024,1024;12,1024,512")]
    assert parse_shapes(rows[0][1])[0][-1] != parse_shapes(rows[0][1])[1][-2]
    assert attention_spans([(0, 2)], [], lambda i: rows[i][0],
                           lambda i: parse_shapes(rows[i][1])) == [(0, 2)]


# ---- MindSpore's 4-D attention and its expanded softmax backward ----------------------------

def _framework(folder: Path) -> list[tuple[str, list[list[int]]]]:
    """``FRAMEWORK/cpu_framework_*.txt`` read by hand: each operator run (in order) as its
    type and input shapes (``input_1:[2, 4, 24, 16]``; ``NoShape`` and scalars left out)."""
    (path,) = folder.rglob("cpu_framework_*.txt")
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split(";")
        dims = [[int(x) for x in m.split(",")] for m in re.findall(r":\[([\d, ]+)\]", line)]
        out.append((parts[0], dims))
    return out


def _raw_4d_forward(ops: list[tuple[str, list[list[int]]]]) -> list[tuple[int, ...]]:
    """``(b, a, S, d)`` of each 4-D ``BatchMatMul`` q·kᵀ, ``Softmax``, ``BatchMatMul``
    ·v in a row among the file's batched products and softmaxes."""
    seq = [(t, d) for t, d in ops if t in ("BatchMatMul", "Softmax")]
    out = []
    for (t1, d1), (t2, d2), (t3, d3) in zip(seq, seq[1:], seq[2:], strict=False):
        if (t1, t2, t3) != ("BatchMatMul", "Softmax", "BatchMatMul"):
            continue
        (q, kt), (scores,), (p, v) = d1[:2], d2[:1], d3[:2]
        b, a, s, d = q
        if kt == [b, a, d, s] and scores == [b, a, s, s] and p == [b, a, s, s] and \
                v == [b, a, s, d]:
            out.append((b, a, s, d))
    return out


def _launches(folder: Path, pattern: str) -> int:
    """How many times the operators whose name matches ``pattern`` ran, from
    ``cpu_op_execute_timestamp_*.txt`` (each line: name;kind;launch launch ...)."""
    (path,) = folder.rglob("cpu_op_execute_timestamp_*.txt")
    n = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        name, _, launches = line.split(";", 2)
        if re.search(pattern, name):
            n += len(launches.split())
    return n


def test_mindspore_4d_attention_and_its_backward_are_found_as_the_raw_files_have_them() -> None:
    forward = _raw_4d_forward(_framework(MS_CPU))
    assert len(set(forward)) == 1
    b, a, s, d = forward[0]
    assert (b, a, s, d) == (2, 4, 24, 16)
    # one softmax backward per layer backward: its reduction of the N·S·S values
    backward = _launches(MS_CPU, r"^Expand/_SoftmaxBackward/ReduceSum-op\d+$")
    softmax = _launches(MS_CPU, r"/attention-Attention/Softmax-op\d+$")
    assert softmax == len(forward) == 6 and backward == 4
    found = bmm_attention(pk.load(MS_CPU, cache=False, progress=False))
    assert int((~found["backward"]).sum()) == len(forward)
    assert int(found["backward"].sum()) == backward
    assert set(zip(found["batch_heads"], found["seq"], found["head_dim"], strict=True)) == \
        {(b * a, s, d)}


def test_mindspore_recompute_evidence_counts_the_4d_chains() -> None:
    # the graph runs layer 0 (its cells under the recompute_ scope) twice forward:
    # 3 forward attentions for 2 backward ones in a step
    ops = _framework(MS_CPU)
    half = len(ops) // 2  # the file lists the two runs of the graph one after the other
    assert ops[:half] == ops[half:]
    fwd = len(_raw_4d_forward(ops[:half]))
    bwd = _launches(MS_CPU, r"^Expand/_SoftmaxBackward/ReduceSum-op\d+$") // 2
    assert (fwd, bwd) == (3, 2)
    ev = recompute_evidence(pk.load(MS_CPU, cache=False, progress=False))
    (row,) = ev.itertuples()
    assert row.forward / row.backward == pytest.approx(fwd / bwd)
    assert row.recompute == "partial"  # 1.2 < 1.5 < 1.8


# ---- Ascend: kernel_details.csv with a MoE-like chain, or with the backward -------------------

def _csv(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def _with_rows(tmp_path: Path, extra: list[tuple[str, str, str, str]]) -> Path:
    """``wild/msa_kernel_details`` with ``extra`` kernels (type, name, input shapes,
    output shapes) on stream 16 after its last kernel, 50 µs apart, 20 µs each; the
    other columns as its first ``BatchMatMul`` row has them."""
    src = sample(MSA) / "kernel_details.csv"
    dst = writable_copy(src, tmp_path / "msa" / "kernel_details.csv")
    head, rows = _csv(dst)
    col = {c: head.index(c) for c in ("Name", "Type", "Start Time(us)", "Duration(us)",
                                      "Input Shapes", "Output Shapes")}
    model = next(r for r in rows if r[col["Type"]] == "BatchMatMul")
    t0 = max(float(r[col["Start Time(us)"]]) for r in rows) + 1000.0
    for i, (typ, name, ins, outs) in enumerate(extra):
        row = list(model)
        row[col["Type"]], row[col["Name"]] = typ, name
        row[col["Start Time(us)"]], row[col["Duration(us)"]] = f"{t0 + 50 * i:.3f}", "20"
        row[col["Input Shapes"]], row[col["Output Shapes"]] = f'"{ins}"', f'"{outs}"'
        rows.append(row)
    with dst.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([head, *rows])
    return dst.parent


def _raw_chains(folder: Path) -> int:
    """The csv's forward attention chains by hand: ``BatchMatMul (N, S, d) x (N, d, S)``,
    then among the stream's products and softmaxes a ``ScaledMaskedSoftmax`` of ``N·S·S``
    values ending in ``S``, then ``BatchMatMul (N, S, S) x (N, S, d)``."""
    head, rows = _csv(folder / "kernel_details.csv")
    typ, start, shp, stream = (head.index(c) for c in ("Type", "Start Time(us)",
                                                      "Input Shapes", "Stream ID"))
    by_stream: dict[str, list[list[str]]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: float(r[start])):
        if r[typ] in ("BatchMatMul", "MatMul", "ScaledMaskedSoftmax", "SoftmaxV2",
                      "ScaledMaskedSoftmaxGrad"):
            by_stream[r[stream]].append(r)
    n = 0
    for seq in by_stream.values():
        for x, y, z in zip(seq, seq[1:], seq[2:], strict=False):
            if (x[typ], y[typ], z[typ]) != ("BatchMatMul", "ScaledMaskedSoftmax",
                                            "BatchMatMul"):
                continue
            (q, kt), scores, (p, v) = (parse_shapes(x[shp])[:2], parse_shapes(y[shp])[0],
                                       parse_shapes(z[shp])[:2])
            nn, s, d = q
            if kt == (nn, d, s) and p == (nn, s, s) and v == (nn, s, d) and \
                    scores[-1] == s and math.prod(scores) == nn * s * s:
                n += 1
    return n


@pytest.mark.shared_samples
def test_ascend_batchmatmuls_around_a_softmax_that_are_no_attention_are_not_timed(
        tmp_path: Path) -> None:
    moe = [("BatchMatMul", "BatchMatMul900", "8,512,12288;8,12288,1536", "8,512,1536"),
           ("SoftmaxV2", "SoftmaxV2901", "4096,8", "4096,8"),
           ("BatchMatMul", "BatchMatMul902", "8,512,1536;8,1536,12288", "8,512,12288")]
    folder = _with_rows(tmp_path, moe)
    raw = _raw_chains(folder)
    assert raw == 2  # the csv's two layers; the rows added make none
    profile = pk.load(folder, cache=False, progress=False)
    chains = pk.analysis.attention_chains(profile, NPU)
    assert len(chains) == raw
    uf = pk.analysis.unfused_patterns(profile)
    (att,) = uf[uf["pattern"] == "softmax_dropout_matmul"].itertuples()
    assert att.occurrences == raw


#: The backward of one attention of the csv (N = 12, S = 1024, d = 512; the scores
#: viewed as (4, 3, S, S)), as autograd runs it: the ·v product's gradients (pᵀ · grad,
#: grad · vᵀ), the fused softmax's backward, the q·kᵀ product's gradients (grad · k,
#: qᵀ · grad); a dropout's backward and the scale's between them.
_BACKWARD = [("BatchMatMul", "12,1024,1024;12,1024,512", "12,1024,512"),
             ("BatchMatMul", "12,1024,512;12,512,1024", "12,1024,1024"),
             ("DropOutDoMask", "4,3,1024,1024;1572864;", "4,3,1024,1024"),
             ("ScaledMaskedSoftmaxGrad", "4,3,1024,1024;4,3,1024,1024;1,1,1024,1024",
              "4,3,1024,1024"),
             ("Mul", "12,1024,1024;", "12,1024,1024"),
             ("BatchMatMul", "12,1024,1024;12,1024,512", "12,1024,512"),
             ("BatchMatMul", "12,512,1024;12,1024,1024", "12,512,1024")]


def _backward_rows(layers: int, scores: str = "4,3,1024,1024") -> list[tuple[str, ...]]:
    out = []
    for layer in range(layers):
        for j, (typ, ins, outs) in enumerate(_BACKWARD):
            if typ == "ScaledMaskedSoftmaxGrad":
                ins = f"{scores};{scores};1,1,1024,1024"
            out.append((typ, f"{typ}{800 + 10 * layer + j}", ins, outs))
    return out


@pytest.mark.shared_samples
def test_ascend_backward_of_batchmatmul_attention_is_found(tmp_path: Path) -> None:
    folder = _with_rows(tmp_path, _backward_rows(2))
    fwd = _raw_chains(folder)
    assert fwd == 2
    profile = pk.load(folder, cache=False, progress=False)
    found = bmm_attention(profile)
    assert int((~found["backward"]).sum()) == fwd
    assert int(found["backward"].sum()) == 2  # one per layer written
    assert set(zip(found["batch_heads"], found["seq"], found["head_dim"], strict=True)) == \
        {(12, 1024, 512)}
    ev = recompute_evidence(profile)
    (row,) = ev.itertuples()
    assert (row.forward, row.backward, row.recompute) == (fwd, 2, "none")
    r = read_model(pk.load(folder, cache=False, progress=False))
    assert r.get("num_layers") == 2 and r.get("recompute") == "none"
    assert "backward attention kernels" in r.details["num_layers"]


@pytest.mark.shared_samples
def test_ascend_softmax_grad_of_other_scores_is_no_attention_backward(tmp_path: Path) -> None:
    # the softmax backward of scores that are not these products' (S = 512, not 1024)
    folder = _with_rows(tmp_path, _backward_rows(1, scores="4,3,512,1024"))
    found = bmm_attention(pk.load(folder, cache=False, progress=False))
    assert not found["backward"].any()
