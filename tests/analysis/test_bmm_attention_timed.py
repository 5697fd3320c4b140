"""The timed attention chains (the advisor's and the Operators tab's) find the backward a graph
interleaves, and time each chain by its own rows.

* MindSpore's CPU profiles (``tests/data/mindspore_cpu_recompute``, recorded here, and the
  bundled ``mindspore-cpu-tiny-llama``) run each attention's backward as two batched
  products, a softmax backward expanded into element-wise operators
  (``Expand/_SoftmaxBackward/...``) and two batched products, with the projections'
  gradient products scheduled between them. The counted search
  (:func:`~perfkit.analysis.shapes.bmm_attention`) found those chains; the timed one
  (:func:`perfkit.analysis.attention_chains`) found only the forward ones (6 of 10 chains).
* Its first forward chain held four ``Transpose`` rows between the softmax and the ``·v``
  product. They are not this attention's: their inputs are ``q`` ``(b, S, a, d)``, ``k``
  and ``v`` ``(b, S, kv, d)`` and the repeated ``k`` ``(b, a, S, d)`` (not the ``b·a·S·S``
  scores); the transposes of this chain's own ``q``, ``k`` and ``v`` ran before its
  ``q·kᵀ`` began, and the next attention's ``q·kᵀ`` follows these with no other
  transposes of ``q``, ``k``, ``v`` between: the graph runs the next attention's input
  layout inside this one. A chain is timed by its products and
  the rows on its scores (scale, mask, softmax, softmax backward), read here from the raw
  ``cpu_op_execute_timestamp`` (launch, duration) and ``cpu_framework`` (type, input shapes)
  files, whose lines are the same launches in start order.
* The same search on device tasks (hand-written GPU kernels, durations summed by hand): a
  backward with a projection's gradient product between its members is found by the
  Operators tab's pattern and by the advisor's chains alike, with that product left out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from gpu_kernels import one_stream_profile

import perfkit as pk
from perfkit.analysis.shapes import bmm_attention
from perfkit.bundled_samples import sample_path

ROOT = Path(__file__).resolve().parents[2]
MS_CPU = ROOT / "tests" / "data" / "mindspore_cpu_recompute"
NPU = pk.Hardware.preset("ascend-910b")
H100 = pk.Hardware.preset("h100")


@dataclass(frozen=True)
class _Op:
    name: str
    type: str
    dims: list[list[int]]
    dur_us: float


def _ops(folder: Path) -> list[_Op]:
    """Every operator launch in start order: its name and duration from
    ``cpu_op_execute_timestamp_*.txt`` (``name;kind;start,duration_ms,_ ...``), its type
    and input shapes (scalars left out) from the line of ``cpu_framework_*.txt`` at the
    same place (that file lists the launches in that order)."""
    (stamps,) = folder.rglob("cpu_op_execute_timestamp_*.txt")
    (frame,) = folder.rglob("cpu_framework_*.txt")
    launches = []
    for line in stamps.read_text(encoding="utf-8").splitlines():
        name, _, rest = line.split(";", 2)
        for item in rest.split():
            start, dur_ms, _ = item.split(",")
            launches.append((int(start), float(dur_ms) * 1e3, name))
    launches.sort()
    lines = frame.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(launches)
    out = []
    for (_, dur, name), line in zip(launches, lines, strict=True):
        typ, short = line.split(";")[:2]
        assert name == short or name.endswith("/" + short)
        dims = [[int(x) for x in m.split(",")] for m in re.findall(r":\[([\d, ]+)\]", line)]
        out.append(_Op(name, typ, dims, dur))
    return out


def _elements(op: _Op) -> int:
    return math.prod(op.dims[0]) if op.dims else -1


@dataclass(frozen=True)
class _Chain:
    first: int  # launches (places in :func:`_ops`)
    last: int
    own: list[int]
    sizes: tuple[int, int, int, int]  # (b, a, S, d)
    backward: bool


def _raw_chains(ops: list[_Op]) -> list[_Chain]:
    """Each attention by hand, in start order. Forward: a BatchMatMul ``(b, a, S, d) x
    (b, a, d, S)``, the next Softmax of ``(b, a, S, S)``, the next BatchMatMul ``(b, a, S, S)
    x (b, a, S, d)``. Backward: a run of ``_SoftmaxBackward/`` launches, the two
    BatchMatMuls before it (``(b, a, S, S) x (b, a, S, d)`` and ``(b, a, S, d) x
    (b, a, d, S)``) and the two after (``(b, a, S, S) x (b, a, S, d)`` and ``(b, a, d, S) x
    (b, a, S, S)``). Own launches: those products, and the launches between whose first
    input holds b·a·S·S elements."""
    bmm = [i for i, o in enumerate(ops) if o.type == "BatchMatMul"]
    found = []
    for i in bmm:
        (b, a, s, d), kt = ops[i].dims[0], ops[i].dims[1]
        if kt != [b, a, d, s]:
            continue
        soft = next(j for j in range(i + 1, len(ops))
                    if ops[j].type in ("Softmax", "BatchMatMul"))
        if ops[soft].type != "Softmax" or ops[soft].dims[0] != [b, a, s, s]:
            continue
        pv = next(j for j in bmm if j > soft)
        if ops[pv].dims[:2] == [[b, a, s, s], [b, a, s, d]]:
            found.append((i, pv, (b, a, s, d), False))
    for i, o in enumerate(ops):
        if "_SoftmaxBackward/" not in o.name or "_SoftmaxBackward/" in ops[i - 1].name:
            continue
        before = [j for j in bmm if j < i][-2:]
        after = [j for j in bmm if j > i][:2]
        grad_v = next(ops[j] for j in before if ops[j].dims[0][-1] == ops[j].dims[0][-2])
        b, a, s, _ = grad_v.dims[0]
        d = grad_v.dims[1][-1]
        assert sorted(tuple(map(tuple, ops[j].dims[:2])) for j in before + after) == sorted([
            ((b, a, s, s), (b, a, s, d)), ((b, a, s, d), (b, a, d, s)),
            ((b, a, s, s), (b, a, s, d)), ((b, a, d, s), (b, a, s, s))])
        found.append((before[0], after[1], (b, a, s, d), True))
    out = []
    for first, last, (b, a, s, d), backward in sorted(found):
        products = {((b, a, s, d), (b, a, d, s)), ((b, a, s, s), (b, a, s, d)),
                    ((b, a, d, s), (b, a, s, s))}
        own = [k for k in range(first, last + 1)
               if (ops[k].type == "BatchMatMul"
                   and tuple(map(tuple, ops[k].dims[:2])) in products)
               or (ops[k].type not in ("BatchMatMul", "MatMul")
                   and _elements(ops[k]) == b * a * s * s)]
        out.append(_Chain(first, last, own, (b, a, s, d), backward))
    return out


@pytest.mark.parametrize("folder", [MS_CPU, sample_path("mindspore-cpu-tiny-llama")],
                         ids=["recompute", "bundled"])
def test_mindspore_cpu_chains_forward_and_backward_timed_by_their_own_rows(folder: Path):
    ops = _ops(folder)
    raw = _raw_chains(ops)
    backward = [c for c in raw if c.backward]
    assert len(backward) >= 4 and len(raw) - len(backward) >= 4
    # between a backward's members: the projections' gradient products
    assert all(any(ops[k].type == "MatMul" for k in range(c.first, c.last + 1))
               for c in backward)
    profile = pk.load(folder, cache=False, progress=False)
    found = bmm_attention(profile)  # the counted search
    assert found["backward"].tolist() == [c.backward for c in raw]
    chains = pk.analysis.attention_chains(profile, NPU)
    assert len(chains) == len(raw)
    assert chains["kernels"].tolist() == [len(c.own) for c in raw]
    assert chains["total_us"].tolist() == pytest.approx(
        [sum(ops[k].dur_us for k in c.own) for c in raw], rel=1e-9)


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.parametrize("folder", [MS_CPU, sample_path("mindspore-cpu-tiny-llama")],
                         ids=["recompute", "bundled"])
def test_a_chain_whose_flops_cannot_be_read_has_no_saving(folder: Path):
    """MindSpore's CPU framework file gives each input's shape and no data type (every
    field after the third is ``input_N:`` and ``[dims]``, ``NoShape`` or ``TupleShape(…)``),
    so no product's FLOPs are priced: the chains keep their time, their fused time and
    saving are unknown (NaN, with a note), never the whole chain time as a saving from a
    fused kernel taking 0 µs; and the advisor's attention rule, run on them directly, finds
    nothing to claim."""
    (framework,) = folder.rglob("cpu_framework_*.txt")
    fields = [f for line in framework.read_text().splitlines() if line
              for f in line.rstrip(";").split(";")[3:]]
    shape = r"\[[\d, ]*\]|NoShape|TupleShape\([\w, ]*\)"
    assert fields and all(re.fullmatch(rf"input_\d+:({shape})", f) for f in fields)
    ops = _ops(folder)
    raw = _raw_chains(ops)
    profile = pk.load(folder, cache=False, progress=False)
    chains = pk.analysis.attention_chains(profile, H100)
    assert chains["total_us"].tolist() == pytest.approx(
        [sum(ops[k].dur_us for k in c.own) for c in raw], rel=1e-9)
    assert chains[["flops", "fused_us", "saving_us"]].isna().all().all()
    assert f"{len(raw)} attention chains not priced" in " ".join(chains.attrs["notes"])
    from perfkit.advisor.context import ASSUMPTIONS, Context
    from perfkit.advisor.operators import attention
    ctx = Context(profile, None, None, H100, dict(ASSUMPTIONS))
    ctx.start("attention", ())
    assert attention(ctx) == []


def test_the_transposes_inside_a_mindspore_chain_are_the_next_attentions_inputs():
    ops = _ops(MS_CPU)
    raw = _raw_chains(ops)
    forward = [c for c in raw if not c.backward]
    assert len(forward) == 6
    ((b, a, s, d),) = {c.sizes for c in forward}

    def inputs(lo: int, hi: int) -> list[tuple[int, ...]]:
        """The input shapes of the attention cell's forward transposes of ``q``
        ``(b, S, a, d)`` and of ``k``, ``v`` ``(b, S, kv, d)`` launched in [lo, hi)."""
        return sorted(tuple(ops[k].dims[0]) for k in range(lo, hi)
                      if re.search(r"attention-Attention/Transpose-op\d+$", ops[k].name)
                      and len(ops[k].dims[0]) == 4 and ops[k].dims[0][:2] == [b, s]
                      and ops[k].dims[0][3] == d)
    # before each forward q·kᵀ, since the one before: one q and two k/v transposes
    prev = 0
    for c in forward:
        got = inputs(prev, c.first)
        assert len(got) == 3 and got[2] == (b, s, a, d) and got[0] == got[1] != got[2], got
        prev = c.first + 1
    # the chains holding such transposes hold the next q·kᵀ's whole set, and none of the
    # other rows between this q·kᵀ and the next
    holding = [i for i, c in enumerate(forward) if inputs(c.first, c.last)]
    assert holding
    for i in holding:
        c, after = forward[i], forward[i + 1]
        assert inputs(c.first, c.last) == inputs(c.first + 1, after.first)
        assert [ops[k].type for k in c.own] == ["BatchMatMul", "Mul", "Add", "Softmax",
                                                "BatchMatMul"]
        assert c.last - c.first + 1 > len(c.own)  # the transposes are rows of the span
    chains = pk.analysis.attention_chains(pk.load(MS_CPU, cache=False, progress=False), NPU)
    for c, total in zip(raw, chains["total_us"], strict=True):
        if not c.backward:
            assert total == pytest.approx(sum(ops[k].dur_us for k in c.own), rel=1e-9)


# ---- device tasks: a projection's gradient product inside a backward -------------------------

GEMM, SOFTMAX = "cutlass_gemm_bf16", "softmax_warp_forward"


_gpu = one_stream_profile


def test_a_backward_with_a_projection_gradient_between_its_members_is_timed_without_it():
    n, s, d = 64, 1024, 128
    fwd = [("aten::bmm", GEMM, f"{n},{s},{d};{n},{d},{s}", 40.0),
           ("aten::_softmax", SOFTMAX, f"{n},{s},{s};;", 30.0),
           ("aten::bmm", GEMM, f"{n},{s},{s};{n},{s},{d}", 41.0)]
    projection = ("aten::mm", GEMM, "4096,1024;1024,1024", 77.0)  # a graph's scheduling
    bwd = [("aten::bmm", GEMM, f"{n},{s},{s};{n},{s},{d}", 43.0),   # grad v
           ("aten::bmm", GEMM, f"{n},{s},{d};{n},{d},{s}", 44.0),   # grad p
           projection,
           ("aten::_softmax_backward_data", "softmax_warp_backward",
            f"{n},{s},{s};{n},{s},{s};;", 35.0),
           ("aten::mul", "vectorized_mul_kernel", f"{n},{s},{s};", 12.0),
           ("aten::bmm", GEMM, f"{n},{d},{s};{n},{s},{s}", 45.0),   # grad kᵀ
           ("aten::bmm", GEMM, f"{n},{s},{s};{n},{s},{d}", 46.0)]   # grad q
    output = [("aten::addmm", GEMM, "1024;4096,1024;1024,1024", 20.0)]  # between the passes
    profile = _gpu(fwd + output + bwd)
    own = [r for r in bwd if r is not projection]
    chains = pk.analysis.attention_chains(profile, H100)
    assert chains["kernels"].tolist() == [len(fwd), len(own)]
    assert chains["total_us"].tolist() == pytest.approx(
        [sum(r[3] for r in fwd), sum(r[3] for r in own)], rel=1e-12)
    product = 2.0 * n * s * s * d  # two products forward, four backward; not the projection's
    assert chains["flops"].tolist() == pytest.approx([2 * product, 4 * product], rel=1e-12)
    uf = pk.analysis.unfused_patterns(profile, detail=True)
    att = uf[uf["pattern"] == "softmax_dropout_matmul"]
    assert att["kernels"].tolist() == [len(fwd), len(own)]
    assert att["total_us"].tolist() == pytest.approx(chains["total_us"].tolist(), rel=1e-12)
    # the table's attention row is the advisor's: as many chains as occurrences
    saved = pk.analysis.unfused_savings(profile, H100)
    (row,) = saved[saved["pattern"] == "softmax_dropout_matmul"].itertuples()
    assert row.saving_us == pytest.approx(float(chains["saving_us"].sum()), rel=1e-12)
