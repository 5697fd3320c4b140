"""A metric's all-reduce (a loss, a gradient norm: a handful of elements) is not counted
with the gradients' reductions.

No shared sample records such an all-reduce with its shape and type: the nine Kineto
traces record the gradient buckets of HolisticTraceAnalysis's job (5,716,654 elements or
more) and vLLM's activations, the DB export four gradient buckets (2,469,696 elements or
more), the text exports and MindSpore none. So one is added here to a copy of
HolisticTraceAnalysis's rank 0, as ``dist.all_reduce(torch.tensor([loss]))`` records it
(an ``nccl:all_reduce`` span of ``Input Dims`` ``[[1]]``, ``float``), and the reading is
checked against the raw files, read here with gzip/json: the reductions of 1,024 elements
or more.
"""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from shared_samples import HTA, shared_sample

import perfkit as pk
from perfkit.analysis.reduced_dtype import METRIC_ELEMENTS, reduced_gradient_bytes

pytestmark = pytest.mark.shared_samples

#: Bytes per element of the types these traces record, written out for the test.
SIZES = {"float": 4, "double": 8, "c10::bfloat16": 2}


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)["traceEvents"]


def _raw(paths: list[Path]) -> tuple[str, int, float, int]:
    """(type, records, bytes) of the type whose all-reduces of at least 1,024 elements
    move the most bytes, and how many all-reduces of fewer elements there are."""
    moved: dict[str, float] = defaultdict(float)
    count: Counter = Counter()
    small = 0
    for path in paths:
        for e in _events(path):
            args = e.get("args") or {}
            if e.get("cat") not in ("user_annotation", "cpu_op") or \
                    e.get("name") != "nccl:all_reduce":
                continue
            dims, types = args.get("Input Dims") or [], args.get("Input type") or []
            if not dims or not dims[0] or not types:
                continue
            n = math.prod(dims[0])
            if n < 1024:
                small += 1
                continue
            moved[types[0]] += n * SIZES[types[0].lower()]
            count[types[0]] += 1
    top = max(moved, key=moved.get)
    return top, count[top], moved[top], small


def _with_a_loss_all_reduce(src: Path, dst: Path) -> Path:
    """A gzip copy of the trace ``src`` with one more ``nccl:all_reduce`` of one float
    element, after the last of the trace's own on the same thread."""
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    last = max((e for e in data["traceEvents"] if e.get("name") == "nccl:all_reduce"),
               key=lambda e: e["ts"])
    loss = {**last, "ts": last["ts"] + last["dur"] + 10, "dur": 20,
            "args": {"Input Dims": [[1]], "Input type": ["float"]}}
    data["traceEvents"].append(loss)
    with gzip.open(dst, "wt", encoding="utf-8") as fh:
        json.dump(data, fh)
    return dst


def test_a_loss_all_reduce_is_not_counted_with_the_gradients(tmp_path):
    root = shared_sample(HTA)
    folder = tmp_path / "hta"
    folder.mkdir()
    files = [_with_a_loss_all_reduce(root / "sampled_rank-0.json.gz",
                                     folder / "sampled_rank-0.json.gz"),
             folder / "sampled_rank-1.json.gz"]
    files[1].write_bytes((root / "sampled_rank-1.json.gz").read_bytes())
    dtype, n, moved, small = _raw(files)
    assert (dtype, small) == ("float", 1)
    assert METRIC_ELEMENTS == 1024
    got = reduced_gradient_bytes(pk.load(folder, cache=False, progress=False))
    assert got is not None
    assert (got.dtype, got.element_bytes, got.collectives) == (dtype, 4, n)
    assert got.moved_bytes == pytest.approx(moved)
    assert got.metrics == small
    assert "1 record of fewer than 1,024 elements left out" in got.evidence


def test_the_real_gradient_buckets_are_all_counted():
    """The shared HolisticTraceAnalysis job has no all-reduce below the threshold: every
    one of its records counts, as before."""
    root = shared_sample(HTA)
    files = sorted(root.glob("*.json.gz"))
    dtype, n, moved, small = _raw(files)
    assert small == 0
    got = reduced_gradient_bytes(pk.load(root, cache=False, progress=False))
    assert (got.dtype, got.collectives, got.metrics) == (dtype, n, 0)
    assert got.moved_bytes == pytest.approx(moved)
    assert "left out" not in got.evidence
