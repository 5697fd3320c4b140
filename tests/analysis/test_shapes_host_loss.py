""":func:`read_model` on host operators: one loss call per micro-batch, and the hidden size
of a model whose attention folds the batch into the heads.

* perfkit's recorded CPU trace (``tests/data/kineto_bmm_attention_cpu``, written by
  ``tools/make_kineto_bmm_attention.py``): ``aten::cross_entropy_loss`` runs
  ``aten::log_softmax`` / ``aten::_log_softmax`` and ``aten::nll_loss*`` inside itself on the
  same thread; that is one loss call, one micro-batch. The tests count the outermost loss
  operators of the raw trace themselves (time containment on each thread) and take the
  true model from the recording script's constants.
* TimeSformer (``wild/tl_timesformer_h100``): no embedding lookup and the batch folded
  into the heads, so only the fused QKV projection (``h → 3·heads·d``) shows the hidden
  size: its input width, read here from the raw ``aten::addmm`` / ``aten::linear``
  ``Input Dims``.
"""

from __future__ import annotations

import ast
import gzip
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest
from shared_samples import sample

import perfkit as pk
from perfkit.analysis.shapes import read_model

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests" / "data" / "kineto_bmm_attention_cpu" / \
    "bmm_attention.pt.trace.json.gz"
SCRIPT = ROOT / "tools" / "make_kineto_bmm_attention.py"
TIMESFORMER = "wild/tl_timesformer_h100"
#: The loss family as PyTorch's host operators name it (the wrapper and what it runs).
_LOSS_FAMILY = re.compile(r"^aten::(?:cross_entropy_loss|_?log_softmax|nll_loss\w*)$")
_ENGINE = "autograd::engine::evaluate_function"


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)["traceEvents"]


def _script_constants() -> dict[str, int]:
    """The module-level integer constants of the recording script (its true model)."""
    tree = ast.parse(SCRIPT.read_text(encoding="utf-8"))
    out: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple):
            for target, value in zip(node.targets[0].elts, node.value.elts, strict=True):
                out[target.id] = ast.literal_eval(value)
    return out


def _outermost_forward_losses(events: list[dict]) -> list[dict]:
    """The forward loss calls of the active step: loss-family host operators not inside
    another one on their thread, nor inside the autograd engine's backward functions."""
    step = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    lo = min(e["ts"] for e in step)
    hi = max(e["ts"] + e["dur"] for e in step)
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"
           and lo <= e["ts"] < hi]
    engine = [e for e in ops if e["name"].startswith(_ENGINE)]
    by_tid: dict = defaultdict(list)
    for e in sorted(ops, key=lambda e: (e["ts"], -e["dur"])):
        if _LOSS_FAMILY.match(e["name"]):
            by_tid[e["tid"]].append(e)
    out = []
    for seq in by_tid.values():
        reach = float("-inf")
        for e in seq:
            if e["ts"] >= reach:  # not inside the last loss call on this thread
                out.append(e)
            reach = max(reach, e["ts"] + e["dur"])
    return [e for e in out if not any(g["tid"] == e["tid"] and g["ts"] <= e["ts"]
                                      < g["ts"] + g["dur"] for g in engine)]


def test_a_nested_loss_call_is_one_micro_batch() -> None:
    events = _events(RECORDED)
    family = [e for e in events if e.get("cat") == "cpu_op"
              and _LOSS_FAMILY.match(e["name"])]
    calls = _outermost_forward_losses(events)
    true = _script_constants()
    # the trace nests several loss operators in one call: the double count was possible
    assert len({e["name"] for e in family}) > 1
    # the script calls cross_entropy once per step: one micro-batch
    assert len(calls) == 1
    r = read_model(pk.load(RECORDED, cache=False, progress=False))
    assert r.get("num_micro_batches") == len(calls)
    assert r.get("num_layers") == true["LAYERS"]
    assert r.get("layers_per_stage") == (true["LAYERS"],)
    assert "1 loss call per step" in r.details["num_micro_batches"]


def _fused_qkv_inputs(events: list[dict]) -> set[int]:
    """Input widths ``K`` of the raw products ``K → N`` with ``N = 3·heads·d``, for the
    head size ``d`` of the raw ``q·kᵀ`` bmms ``(n, s, d) x (n, d, s)`` and heads that split
    ``n·s`` into the product's rows (``aten::addmm``: bias, x ``(M, K)``, W ``(K, N)``;
    ``aten::linear``: x ``(.., K)``, W ``(N, K)``)."""
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    qk = set()
    for e in ops:
        dims = e["args"].get("Input Dims") or []
        if e["name"] == "aten::bmm" and len(dims) >= 2 and len(dims[0]) == 3 and \
                dims[1] == [dims[0][0], dims[0][2], dims[0][1]] and dims[0][1] != dims[0][2]:
            qk.add(tuple(dims[0]))
    out = set()
    for e in ops:
        dims = e["args"].get("Input Dims") or []
        if e["name"] == "aten::addmm" and len(dims) >= 3 and len(dims[1]) == 2:
            rows, k, n = dims[1][0], dims[1][1], dims[2][1]
        elif e["name"] == "aten::linear" and len(dims) >= 2 and len(dims[1]) == 2:
            rows = 1
            for x in dims[0][:-1]:
                rows *= x
            k, n = dims[0][-1], dims[1][0]
        else:
            continue
        for bh, s, d in qk:
            heads = n // (3 * d) if n % (3 * d) == 0 else 0
            if heads and bh % heads == 0 and rows * heads == bh * s:
                out.add(k)
    return out


@pytest.mark.shared_samples
def test_timesformer_hidden_size_is_the_fused_qkv_projections_input() -> None:
    path = next(sample(TIMESFORMER).glob("*.json.gz"))
    widths = _fused_qkv_inputs(_events(path))
    assert len(widths) == 1
    r = read_model(pk.load(path, cache=False, progress=False))
    assert r.get("hidden_size") == widths.pop()
    assert "fused QKV" in r.details["hidden_size"]


def test_recorded_hidden_size_is_the_fused_qkv_projections_input() -> None:
    widths = _fused_qkv_inputs(_events(RECORDED))
    assert widths == {_script_constants()["HIDDEN"]}
    r = read_model(pk.load(RECORDED, cache=False, progress=False))
    assert r.get("hidden_size") == _script_constants()["HIDDEN"]
    assert "fused QKV" in r.details["hidden_size"]
