"""autograd's gradient accumulation, read from a real PyTorch trace
(``tests/data/grad_accumulation_cpu``, PROVENANCE.md there), against the rule
``perfkit.calc.grad_accumulation`` prices as ``"autograd"``: nothing on the first
micro-batch, then one in-place add per parameter reading two gradient-size tensors and
writing one. The trace is read with the standard library, not with perfkit's loader."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np

from perfkit.calc.grad_accumulation import accumulation_bytes

DATA = Path(__file__).resolve().parent / "data" / "grad_accumulation_cpu"
NODE = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"
BYTES = {"float": 4}


def _accumulations() -> tuple[dict, list[tuple[float, list[list[int]] | None]]]:
    """The run's record, and per AccumulateGrad node (in time order): its start and the
    input shapes of the ``aten::add_`` inside it (None when it ran none)."""
    env = json.loads((DATA / "environment.json").read_text())
    with gzip.open(DATA / "trace.json.gz", "rt") as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    nodes = sorted((e for e in events if e["name"] == NODE), key=lambda e: e["ts"])
    adds = [e for e in events if e["name"] == "aten::add_"]
    out = []
    for n in nodes:
        inside = [a for a in adds if a["tid"] == n["tid"]
                  and n["ts"] <= a["ts"] <= n["ts"] + n["dur"]]
        assert len(inside) <= 1
        out.append((n["ts"], inside[0]["args"] if inside else None))
    return env, out


def test_the_first_micro_batch_adds_nothing_and_each_later_one_adds_every_gradient():
    env, nodes = _accumulations()
    m, shapes = env["micro_batches"], list(env["parameters"].values())
    assert m == 3 and len(nodes) == m * len(shapes)
    per_micro_batch = [nodes[i * len(shapes):(i + 1) * len(shapes)] for i in range(m)]
    assert all(args is None for _, args in per_micro_batch[0])
    for later in per_micro_batch[1:]:
        dims = sorted(tuple(args["Input Dims"][0]) for _, args in later)
        assert dims == sorted(tuple(s) for s in shapes)
        for _, args in later:  # in place: the gradient and the new one, same shape
            assert args["Input Dims"][0] == args["Input Dims"][1]
            assert args["Input type"][:2] == ["float", "float"]


def test_the_recorded_adds_move_what_the_autograd_pricing_charges():
    env, nodes = _accumulations()
    moved = sum(3 * BYTES[args["Input type"][0]] * math.prod(args["Input Dims"][0])
                for _, args in nodes if args is not None)  # read two, write one
    params = sum(math.prod(s) for s in env["parameters"].values())
    per_param, over_shard = accumulation_bytes("autograd", "fp32", 4.0,
                                               np.array([env["micro_batches"]]))
    assert over_shard
    assert moved == per_param[0] * params
