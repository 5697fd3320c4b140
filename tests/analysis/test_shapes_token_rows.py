""":func:`read_model` reads the FFN width, the bias and the vocabulary when the tokens are
not known.

HuggingFace's TimeSformer (``wild/tl_timesformer_h100``, an H100 Kineto trace of an
inference step with ``record_shapes``) runs its attention as 3-D bmm products that fold the
batch into the heads, and has no embedding lookup (its tokens are a convolution's patches),
so the micro-batch's tokens ``b·s`` are never known. Its projections still show the model:
each block reads the hidden state and writes it back over the same rows (the temporal
attention over one count of rows, the spatial attention over another, the MLP over a
third), and its classifier reads one pooled row. perfkit's own eager-attention trace
(``tests/data/kineto_bmm_attention_cpu``: two attention layers, no MLP, a 10-class head over
the mean of the tokens, every ``nn.Linear`` with its default bias) is read the same way.

The expected values are read from the raw traces here: the hidden size from the layer
norms' weights, the FFN width from the GELU's input, the linears' weights ``(out, in)`` and
bias inputs ``(out,)`` from their ``Input Dims``.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
from collections import Counter
from pathlib import Path

import pytest
from shared_samples import sample

import perfkit as pk
from perfkit.analysis.shapes import read_model

ROOT = Path(__file__).resolve().parents[2]
TIMESFORMER = "wild/tl_timesformer_h100"
BMM_CPU = ROOT / "tests" / "data" / "kineto_bmm_attention_cpu"


@functools.lru_cache(maxsize=2)
def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)["traceEvents"]


def _ops(path: Path, name: str) -> list[list[list[int]]]:
    """The ``Input Dims`` of every host operator ``name`` in the raw trace."""
    return [e["args"]["Input Dims"] for e in _events(path)
            if e.get("cat") == "cpu_op" and e.get("name") == name]


@pytest.fixture(scope="module")
def timesformer() -> tuple[Path, object]:
    """The TimeSformer trace and its :func:`read_model` reading (loaded once)."""
    path = next(sample(TIMESFORMER).glob("*.json.gz"))
    return path, read_model(pk.load(path, cache=False, progress=False))


def _linears(path: Path) -> list[tuple[int, int, int, bool]]:
    """Each ``aten::linear`` as ``(rows, in, out, has a bias input)``: ``x (..., in)``,
    ``W (out, in)``, a bias ``(out,)`` third."""
    out = []
    for dims in _ops(path, "aten::linear"):
        x, w = dims[0], dims[1]
        assert x[-1] == w[1]
        out.append((math.prod(x[:-1]), w[1], w[0], len(dims) > 2 and dims[2] == [w[0]]))
    return out


@pytest.mark.shared_samples
def test_timesformer_ffn_bias_and_mlp_come_from_its_projections(timesformer: tuple) -> None:
    path, r = timesformer
    (h,) = {dims[2][0] for dims in _ops(path, "aten::layer_norm")}  # the norms' weight
    assert h == 768
    (f,) = {dims[0][-1] for dims in _ops(path, "aten::gelu")}  # the MLP's activation
    lin = _linears(path)
    # the MLP: h → f and f → h over the same rows (the GELU's rows)
    (gelu_rows,) = {math.prod(dims[0][:-1]) for dims in _ops(path, "aten::gelu")}
    assert {(m, k, n) for m, k, n, _ in lin if {k, n} == {h, f}} == \
        {(gelu_rows, h, f), (gelu_rows, f, h)}
    assert f == 3072
    # every linear of the trace takes a bias input, the fused QKV (h → 3h) ones too
    assert all(b for *_, b in lin) and any(n == 3 * h for _, k, n, _ in lin if k == h)
    # one up-projection h → f per layer: as many as the layers' GELUs
    ups = sum(1 for _, k, n, _ in lin if (k, n) == (h, f))
    assert ups == len(_ops(path, "aten::gelu")) == 12

    assert r.get("hidden_size") == h
    assert r.get("micro_batch_size") is None  # the tokens stay unknown
    assert r.get("ffn_hidden_size") == f, r.details["ffn_hidden_size"]
    assert f"{h} → {f} and {f} → {h}" in r.details["ffn_hidden_size"]
    assert str(gelu_rows) in r.details["ffn_hidden_size"]
    assert r.get("bias") == "all", r.details["bias"]
    assert r.get("mlp") == "gpt", r.details["mlp"]


@pytest.mark.shared_samples
def test_timesformer_shows_no_vocabulary_and_says_so(timesformer: tuple) -> None:
    path, r = timesformer
    # no token ids anywhere: no embedding lookup, no loss; the one product that leaves
    # the hidden state for good is the classifier over one pooled row
    assert not _ops(path, "aten::embedding")
    assert not _ops(path, "aten::cross_entropy_loss") and not _ops(path, "aten::nll_loss")
    rows = Counter(m for m, *_ in _linears(path))
    head = [(m, k, n) for m, k, n, _ in _linears(path) if rows[m] == 1]
    assert head == [(1, 768, 400)]
    assert r.get("vocab_size") is None
    why = r.details["vocab_size"]
    assert "no vocabulary" in why and "no embedding lookup" in why
    assert "768 → 400 over 1 row" in why


def test_eager_attention_trace_bias_from_its_linears_and_no_vocabulary() -> None:
    path = next(BMM_CPU.glob("*.json.gz"))
    lin = _linears(path)
    (h,) = {k for _, k, n, _ in lin if n == 3 * k}  # the fused QKV projection h → 3h
    assert h == 64 and all(b for *_, b in lin)  # nn.Linear's default bias, everywhere
    # no width w with both h → w and w → h but the attention's own (no MLP in the model)
    assert not ({n for _, k, n, _ in lin if k == h} - {h, 3 * h}) & \
        {k for _, k, n, _ in lin if n == h}
    (loss,) = _ops(path, "aten::cross_entropy_loss")
    classes = loss[0][-1]
    pooled = [(m, k, n) for m, k, n, _ in lin if n == classes]
    assert pooled == [(loss[0][0], h, classes)] and loss[0][0] != 64  # 2 rows, 64 tokens
    r = read_model(pk.load(BMM_CPU, cache=False, progress=False))
    assert r.get("hidden_size") == h
    assert r.get("bias") == "all", r.details["bias"]
    assert r.get("ffn_hidden_size") is None
    assert r.get("vocab_size") is None
    assert f"the loss's input is {classes} wide" in r.details["vocab_size"]
