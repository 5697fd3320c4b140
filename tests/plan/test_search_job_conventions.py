"""The Planner's uncalibrated ranking counts static memory as the job runs: its framework's
scheme, its type and the gradients its reductions move (as the calibrated ranking and the
profiled layout's prediction do), not the MindSpore scheme at the hardware's default type.

Expected bytes per parameter are Megatron-LM's own table (NVIDIA/Megatron-LM d98e8a64,
``docs/user-guide/features/dist_optimizer.md`` lines 16-20; ``d`` the distributed
optimizer's data-parallel size), written out here::

    bf16 parameters, fp32 gradients    18    6 + 12/d
    fp32 parameters, fp32 gradients    16    8 + 8/d

and the parameters are Llama2-7B's, counted from its published shapes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import perfkit as pk
from perfkit.widgets.prediction import PlannerFit, ranked_layouts

DATA = Path(__file__).resolve().parents[2] / "data"


def _llama2_7b_parameters() -> int:
    """Embedding and untied output ``V·h``, per layer ``4h²`` attention, ``3·h·f`` gated
    MLP and two RMSNorm weights, a final norm."""
    v, h, f, layers = 32000, 4096, 11008, 32
    return 2 * v * h + layers * (4 * h * h + 3 * h * f + 2 * h) + h


@pytest.fixture(scope="module")
def pytorch_job() -> pk.Job:
    """A PyTorch job (the Kineto sample: Megatron-LM's scheme; its all-reduces move fp32,
    read in tests/analysis/test_reduced_dtype.py's way below) given Llama2-7B on 8 devices."""
    profile = pk.load(DATA / "kineto-tiny-llama", progress=False)
    return pk.infer_job(profile).with_overrides(model=pk.ModelSpec.preset("llama2-7b"),
                                                dp=8, tp=1, pp=1)


@pytest.mark.parametrize(("hardware", "dtype", "whole", "kept", "sharded"), [
    ("a100", "bf16", 18, 6, 12),
    ("a100", "fp32", 16, 8, 8),
    # no fp32 peak on the 910B: timed at its default peak, memory still fp32's
    ("ascend-910b", "fp32", 16, 8, 8),
])
def test_uncalibrated_ranking_counts_the_jobs_scheme_and_type(
        pytorch_job, hardware, dtype, whole, kept, sharded) -> None:
    job = pytorch_job.with_overrides(hardware=hardware, dtype=dtype)
    assert job.framework == "pytorch" and job.static_scheme == "megatron"
    # the gradients are reduced in fp32 (4 bytes): Megatron-LM's size for bf16 and fp32
    assert job.gradient_bytes in (None, 4.0)
    fit = PlannerFit(None, None, "uncalibrated", "")  # type: ignore[arg-type]
    rows = ranked_layouts(job, fit, num_devices=8, global_batch_size=16)
    n = _llama2_7b_parameters()
    plain = rows[(rows["tp"] == 1) & (rows["pp"] == 1) & (rows["cp"] == 1)]
    whole_rows = plain[plain["optimizer_shard"] == 1]
    shard_rows = plain[plain["optimizer_shard"] == 8]
    assert len(whole_rows) and len(shard_rows)
    assert (whole_rows["static_bytes"] / n).to_numpy() == pytest.approx(whole, rel=1e-9)
    assert (shard_rows["static_bytes"] / n).to_numpy() == pytest.approx(
        kept + sharded / 8, rel=1e-9)
