""":func:`read_model` counts a ``log_softmax`` as a loss call only when it is one.

A bare ``aten::_log_softmax`` is a loss only inside a loss call (``aten::cross_entropy_loss``
runs it) or when ``aten::nll_loss`` comes right after it in the same forward pass
(``F.nll_loss(F.log_softmax(x), y)``). A model whose output head returns log-probabilities
for a custom loss, a classifier's inference, or log-probabilities taken for a metric beside
the loss are not micro-batches.

The traces are synthetic host-operator Kineto traces written here (no embedding lookup, so
the micro-batches are read from the loss calls): two steps of ``calls`` forward passes,
each laid out as the script below says, with the PyTorch operator nesting (``log_softmax``
runs ``_log_softmax``; ``nll_loss_nd`` runs ``nll_loss``, which runs ``nll_loss_forward``;
``cross_entropy_loss`` runs both) and a backward call after each forward. The expected
counts are worked out from the layout by hand.

On GPU kernels nothing nests: a cross entropy is its ``_log_softmax`` kernel followed by its
``nll_loss_forward`` kernel. A ResNet-50 trace (``wild/k_resnet50_nw0``) and perfkit's
Llama trace (``tests/data/kineto_llama_h100``) keep one micro-batch per step, the raw
``aten::cross_entropy_loss`` calls per ``ProfilerStep#`` counted here.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from shared_samples import sample

import perfkit as pk
from perfkit.analysis.shapes import read_model

ROOT = Path(__file__).resolve().parents[2]
#: Logits of 8 samples over 10 classes, and their targets.
_LOGITS, _TARGET = [8, 10], [8]


def _op(name: str, ts: float, dur: float, dims: list[list[int]]) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts,
            "dur": dur, "args": {"Input Dims": dims,
                                 "Input type": ["float" if d else "" for d in dims]}}


def _log_softmax(ts: float) -> list[dict]:
    """``F.log_softmax(x, -1)``: 20 µs, ``_log_softmax`` inside it."""
    return [_op("aten::log_softmax", ts, 20, [_LOGITS, [], []]),
            _op("aten::_log_softmax", ts + 2, 16, [_LOGITS, [], []])]


def _nll(ts: float) -> list[dict]:
    """``F.nll_loss(logp, y)``: 20 µs, ``nll_loss`` and ``nll_loss_forward`` inside."""
    dims = [_LOGITS, _TARGET, [], [], []]
    return [_op("aten::nll_loss_nd", ts, 20, dims), _op("aten::nll_loss", ts + 2, 16, dims),
            _op("aten::nll_loss_forward", ts + 4, 12, dims)]


def _forward(kind: str, ts: float) -> list[dict]:
    """One forward pass's loss part, from ``ts`` (all within 200 µs):

    * ``"ce"``: ``F.cross_entropy`` (60 µs wrapping log_softmax then nll_loss);
    * ``"ce+metric"``: ``"ce"``, then ``F.log_softmax`` alone for a metric at ``ts + 100``;
    * ``"pair"``: ``F.log_softmax`` at ``ts``, ``F.nll_loss`` on it at ``ts + 30``;
    * ``"head"``: the model's head returns ``F.log_softmax`` and a custom loss
      (``aten::mse_loss``, not a loss the reader knows) follows at ``ts + 30``;
    * ``"infer"``: ``F.log_softmax`` alone (a classifier's prediction).
    """
    ce = [_op("aten::cross_entropy_loss", ts, 60, [_LOGITS, _TARGET, [], [], [], []]),
          *_log_softmax(ts + 5), *_nll(ts + 30)]
    return {"ce": ce,
            "ce+metric": ce + _log_softmax(ts + 100),
            "pair": _log_softmax(ts) + _nll(ts + 30),
            "head": _log_softmax(ts) + [_op("aten::mse_loss", ts + 30, 10,
                                            [_LOGITS, _LOGITS, []])],
            "infer": _log_softmax(ts)}[kind]


def _backward(ts: float) -> list[dict]:
    """What autograd runs for the loss (named as backward: never a forward loss call)."""
    return [{"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 2, "ts": ts, "dur": 40,
             "name": "autograd::engine::evaluate_function: LogSoftmaxBackward0"},
            _op("aten::_log_softmax_backward_data", ts + 5, 20, [_LOGITS, _LOGITS, [], []])
            | {"tid": 2}]


def _write(path: Path, kind: str, calls: int, backward: bool) -> Path:
    """Two steps (``ProfilerStep#1``, ``#2``) of 1000 µs, each with ``calls`` forward
    passes of ``kind`` 400 µs apart (each followed by its backward when ``backward``)."""
    events: list[dict] = []
    for step in (1, 2):
        t0 = 1000.0 * step
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                       "pid": 1, "tid": 1, "ts": t0, "dur": 1000, "args": {}})
        for k in range(calls):
            at = t0 + 10 + 400 * k
            events += _forward(kind, at)
            if backward:
                events += _backward(at + 250)
    path.write_text(json.dumps({"traceEvents": events}))
    return path


#: (forward pass, passes per step, micro-batches per step worked out by hand)
#: ``ce``: the cross-entropy call is one loss call (its log_softmax is inside it);
#: ``ce+metric``: the metric's log_softmax is followed by no nll_loss: still one per pass;
#: ``pair``: the log_softmax is followed by nll_loss: one per pass;
#: ``head`` / ``infer``: no loss the reader knows: unknown.
CASES = [("ce", 2, 2), ("ce+metric", 2, 2), ("pair", 2, 2), ("head", 2, None),
         ("infer", 1, None), ("ce+metric", 1, 1)]


@pytest.mark.parametrize("backward", [True, False], ids=["training", "forward-only"])
@pytest.mark.parametrize(("kind", "calls", "expected"), CASES,
                         ids=[f"{k}x{c}" for k, c, _ in CASES])
def test_a_log_softmax_is_a_micro_batch_only_inside_or_before_a_loss(
        tmp_path: Path, kind: str, calls: int, expected: int | None,
        backward: bool) -> None:
    path = _write(tmp_path / "loss.pt.trace.json", kind, calls, backward)
    # the raw trace as written: every kind has at least one log_softmax per pass
    raw = json.loads(path.read_text())["traceEvents"]
    per_step = [e for e in raw if e["name"] == "aten::_log_softmax"
                and 2000 <= e["ts"] < 3000]
    assert len(per_step) >= calls
    r = read_model(pk.load(path, cache=False, progress=False))
    assert r.source == "ops"
    assert r.get("num_micro_batches") == expected, r.details["num_micro_batches"]
    if expected is None:
        assert "no embedding lookup or loss" in r.details["num_micro_batches"]
    else:
        assert f"{expected} loss call" in r.details["num_micro_batches"]


def _cross_entropy_per_step(path: Path) -> list[int]:
    """The raw trace's ``aten::cross_entropy_loss`` host calls in each ``ProfilerStep#``
    (old traces file host operators under ``cat`` ``Operator``)."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "Operator")]
    steps = [e for e in ops + [e for e in events if e.get("cat") == "user_annotation"]
             if str(e.get("name", "")).startswith("ProfilerStep#")]
    calls = [e for e in ops if e["name"] == "aten::cross_entropy_loss"]
    return [sum(1 for c in calls if s["ts"] <= c["ts"] < s["ts"] + s["dur"]) for s in steps]


@pytest.mark.parametrize("where", [
    pytest.param("wild/k_resnet50_nw0", marks=pytest.mark.shared_samples),
    "tests/data/kineto_llama_h100/rank0.pt.trace.json.gz"])
def test_a_cross_entropys_kernels_are_one_loss_call_per_micro_batch(where: str) -> None:
    """GPU kernels carry no nesting: a cross entropy is its ``_log_softmax`` kernel, then
    its ``nll_loss_forward`` kernel on the same stream, one micro-batch."""
    path = ROOT / where if where.startswith("tests/") else \
        next(sample(where).glob("*.json.gz"))
    per_step = set(_cross_entropy_per_step(path))
    assert len(per_step) == 1 and per_step.pop() == 1  # one call in every step
    r = read_model(pk.load(path, cache=False, progress=False))
    assert r.source == "kernels"
    assert r.get("num_micro_batches") == 1, r.details["num_micro_batches"]
    assert "1 loss kernel per step" in r.details["num_micro_batches"]
