"""tp read from the all-reduces of a forward-only step, and only from those.

Small Kineto traces written here: two transformer layers' products (``aten::linear`` over
``T`` tokens) with an all-reduce after the attention's and the MLP's, in a job whose
``pg_config`` names no group (``undefined``), 50 filler operators so that the missing
backward pass counts. The rule reads tp where the step has no backward pass and the
all-reduces take ``(T, h)`` activations between products; it leaves the layout as before
(every rank data parallel) for a training step, for all-reduces that are not activations
(a flat buffer of gradients or a one-element metric), and where the groups of more than
one rank differ in size (the all-reduces' group is then unknown).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import perfkit as pk

T, H, Q, F = 6, 32, 16, 64  # tokens, hidden size, query width per rank, MLP width per rank
LAYERS = 2


def _trace(path: Path, reduce_dims: tuple[int, ...] = (T, H), backward: bool = False,
           sizes: tuple[int, ...] = (4,), world: int = 4) -> int:
    """Write the trace; return how many all-reduce calls it holds."""
    events: list[dict] = []
    t = 1000.0

    def op(name: str, dims: list[list[int]], dur: float = 10.0) -> None:
        nonlocal t
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": t,
                       "dur": dur, "args": {"Input Dims": dims,
                                            "Input type": ["c10::BFloat16"] * len(dims)}})
        t += dur + 1

    op("aten::embedding", [[100, H], [T]])
    for _ in range(LAYERS):
        op("aten::linear", [[T, H], [Q, H], [Q]])   # the attention's output projection
        op("vllm::all_reduce", [list(reduce_dims)])
        op("aten::linear", [[T, H], [F, H], [F]])   # the MLP
        op("aten::linear", [[T, F], [H, F], [H]])
        op("vllm::all_reduce", [list(reduce_dims)])
    op("aten::linear", [[T, H], [100, H]])  # the logits
    if backward:
        op("autograd::engine::evaluate_function: MmBackward0", [])
        op("aten::mm", [[T, H], [H, Q]])
    for _ in range(50):
        op("aten::view", [[T, H]], 1.0)
    groups = [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
               "pg_size": world, "ranks": list(range(world))}]
    groups += [{"pg_name": str(i + 1), "pg_desc": "undefined", "backend_config": "cuda:nccl",
                "pg_size": n, "ranks": list(range(n))} for i, n in enumerate(sizes)]
    path.write_text(json.dumps({"traceEvents": events, "distributedInfo": {
        "backend": "nccl", "rank": 0, "world_size": world, "pg_config": groups}}))
    return sum(e["name"] == "vllm::all_reduce" for e in events)


def _job(tmp_path: Path, **kw: object) -> tuple[pk.Job, int]:
    path = tmp_path / "rank0.pt.trace.json"
    calls = _trace(path, **kw)  # type: ignore[arg-type]
    return pk.infer_job(pk.load(path, progress=False)), calls


def test_an_inference_steps_activation_all_reduces_read_tp(tmp_path: Path) -> None:
    job, calls = _job(tmp_path)
    assert calls == 2 * LAYERS
    assert job.training_step() is False
    # world 4, every group of more than one rank holds 4: tp 4, dp 4 / 4 = 1
    assert (job.parallel.tp, job.parallel.dp) == (4, 1)
    said = job.detail("tp")
    # the last all-reduce has a product after it (the logits): all are between products
    assert f"{calls} of the {calls} all-reduces on rank 0 take activations, ({T}, {H})" in said
    assert f"{calls} of them between two of those products" in said
    assert "holds 4 ranks (2 of the 2 groups in distributedInfo.pg_config)" in said
    assert job.value("sequence_parallel") is False
    assert "reduce-scatter" in job.detail("sequence_parallel")


@pytest.mark.parametrize("kw", [
    pytest.param({"backward": True}, id="a training step"),
    pytest.param({"reduce_dims": (T * H * 8,)}, id="a flat gradient buffer"),
    pytest.param({"reduce_dims": (1,)}, id="a one-element metric"),
    pytest.param({"reduce_dims": (T + 1, H)}, id="rows that are not the tokens"),
    pytest.param({"sizes": (2, 4)}, id="groups of two sizes"),
])
def test_other_all_reduces_leave_every_rank_data_parallel(tmp_path: Path,
                                                          kw: dict) -> None:
    job, _ = _job(tmp_path, **kw)
    # as before the rule: no group named tp, so world 4 / (tp 1 × pp 1)
    assert (job.parallel.tp, job.parallel.dp) == (1, 4)
    assert "all-reduces" not in job.detail("tp")

