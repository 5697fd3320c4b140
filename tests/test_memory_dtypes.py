"""Static memory follows the run's real type and the gradients its reduction moves, alike on
every path (static_memory, estimate_step, plan.predict, plan.search, the job's figures,
analysis.memory_vs_theory).

The expected figures are Megatron-LM's own bytes per parameter, written out here from its
table (NVIDIA/Megatron-LM d98e8a64, ``docs/user-guide/features/dist_optimizer.md`` lines
16-20; ``d`` the distributed optimizer's data-parallel size)::

    fp16 parameters, fp16 gradients    20    4 + 16/d
    bf16 parameters, fp32 gradients    18    6 + 12/d
    fp32 parameters, fp32 gradients    16    8 + 8/d

and from its source: the gradient buffer is fp32 only with ``grad_reduce_in_fp32``
(``megatron/core/distributed/param_and_grad_buffer.py`` line 924), which ``arguments.py``
(lines 1204-1217) turns on for bf16 alone; the data-parallel reduction reduces that buffer
in place (lines 718-731); a 16-bit buffer is copied to fp32 main gradients for the
optimizer step (``megatron/core/optimizer/optimizer.py`` line 1097,
``distrib_optimizer.py`` line 2792), 4 more bytes per parameter sharded with the
optimizer — so a bf16 run whose reduction moves 2-byte gradients (``--grad-reduce-in-bf16``)
keeps 2 + 2 + 16 bytes, and an fp16 run with ``--accumulate-allreduce-grads-in-fp32``
2 + 4 + 12.
"""

from __future__ import annotations

import pytest
from shared_samples import PT_LEVEL1, shared_sample

import perfkit as pk
from perfkit.calc.rates import Rates
from perfkit.widgets.planner_words import gradient_sentence
from perfkit.widgets.summary import memory_breakdown, metrics_summary

GIB = 2**30
#: Megatron-LM's table: dtype -> (bytes per parameter without the distributed optimizer,
#: (bytes kept whole, bytes sharded over d) with it).
MEGATRON = {"fp16": (20, (4, 16)), "bf16": (18, (6, 12)), None: (18, (6, 12)),
            "fp32": (16, (8, 8))}


def _llama2_7b_parameters() -> int:
    """Llama2-7B counted from its published shapes: embedding and untied output ``V·h``,
    per layer ``4h²`` attention, ``3·h·f`` gated MLP and two RMSNorm weights, a final norm."""
    v, h, f, layers = 32000, 4096, 11008, 32
    return 2 * v * h + layers * (4 * h * h + 3 * h * f + 2 * h) + h


@pytest.mark.parametrize("dtype", list(MEGATRON))
def test_megatron_static_memory_is_megatron_lms_table_for_each_type(dtype) -> None:
    n = 1e9  # parameters of the device (tp = pp = 1)
    plain, (kept, sharded) = MEGATRON[dtype]
    one = pk.static_memory(n, pk.ParallelConfig(dp=8), "megatron", dtype=dtype)
    assert one.total_bytes == pytest.approx(plain * n, rel=1e-12)
    dist = pk.static_memory(n, pk.ParallelConfig(dp=8, optimizer_shard=8), "megatron",
                            dtype=dtype)
    assert dist.total_bytes == pytest.approx((kept + sharded / 8) * n, rel=1e-12)


def test_an_fp16_run_keeps_an_fp16_buffer_and_fp32_main_gradients() -> None:
    n, d = 1e9, 8
    got = pk.static_memory(n, pk.ParallelConfig(dp=d, optimizer_shard=d), "megatron",
                           dtype="fp16")
    assert got.weights_bytes == pytest.approx(2 * n)  # fp16 weights, whole
    assert got.gradients_bytes == pytest.approx(2 * n)  # the fp16 buffer the reduction moves
    # fp32 main gradients 4 + main weights 4 + Adam m 4 + v 4, sharded over d
    assert got.optimizer_bytes == pytest.approx(16 * n / d)
    # the same buffer as the reduction's element size, 2 bytes
    assert pk.calc.memory.scheme_gradient_bytes("megatron", "fp16") == 2


@pytest.mark.parametrize(("dtype", "reduced", "per_param"), [
    ("bf16", 2, 2 + 2 + 16),   # --grad-reduce-in-bf16: a 16-bit buffer, fp32 main gradients
    ("fp16", 4, 2 + 4 + 12),   # --accumulate-allreduce-grads-in-fp32: the fp32 buffer is its own
    ("bf16", 4, 2 + 4 + 12),   # the default bf16 run
])
def test_the_reductions_size_sets_the_buffer_on_every_path(dtype, reduced, per_param) -> None:
    """One rule: ``Rates.gradient_bytes`` (what a profile's reductions record) sizes the
    gradient buffer in static memory as it sizes the reduction, in estimate_step,
    plan.predict (given as an override or by a calibration) and plan.search."""
    model = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("a100")
    par = pk.ParallelConfig(dp=8, num_micro_batches=2)
    want = per_param * _llama2_7b_parameters()
    est = pk.estimate_step(model, par, hw, dtype=dtype, static_scheme="megatron",
                           gradient_bytes=reduced)
    assert est.static_bytes == pytest.approx(want, rel=1e-9)
    given = pk.plan.predict(None, model, par, hw, dtype=dtype, static_scheme="megatron",
                            overrides={"gradient_bytes": reduced})
    assert given.static_bytes == pytest.approx(want, rel=1e-9)
    cal = pk.plan.calibrate(2.0, model, par, hw, rates=Rates(gradient_bytes=reduced),
                            static_scheme="megatron", dtype=dtype)
    assert pk.plan.predict(cal).static_bytes == pytest.approx(want, rel=1e-9)
    space = pk.plan.SearchSpace(tp=(1,), pp=(1,), cp=(1,), micro_batch_size=(1,),
                                sequence_parallel=(False,), recompute=("none",),
                                optimizer_shard=("off",))
    rows = pk.plan.search(model, hw, 8, 16, calibration=cal, static_scheme="megatron",
                          dtype=dtype, space=space, include_rejected=True)
    row = rows[(rows["dp"] == 8) & (rows["num_micro_batches"] == 2)]
    assert len(row) == 1
    assert float(row["static_bytes"].iloc[0]) == pytest.approx(want, rel=1e-9)


def test_an_fp16_megatron_jobs_figure_counts_and_says_fp16() -> None:
    model = pk.ModelSpec.preset("llama2-7b")
    par = pk.ParallelConfig(dp=8, optimizer_shard=8)
    rows = metrics_summary(model, "a100", par, 1.0, "fp16",
                           static_scheme="megatron").set_index("key")
    row = rows.loc["static_gib"]
    # Megatron-LM's fp16 row with the distributed optimizer over d = 8: 4 + 16/8 = 6
    assert row["value"] * GIB == pytest.approx(6 * _llama2_7b_parameters(), rel=1e-9)
    note = row["note"]
    assert "fp16 weights" in note and "fp16 gradients" in note and "bf16" not in note
    assert "fp32 main gradients" in note and "4 + 16/d" in note
    bf16 = metrics_summary(model, "a100", par, 1.0, "bf16",
                           static_scheme="megatron").set_index("key").loc["static_gib"]
    assert bf16["value"] * GIB == pytest.approx(7.5 * _llama2_7b_parameters(), rel=1e-9)
    assert "bf16 weights + fp32 gradients" in bf16["note"] and "6 + 12/d" in bf16["note"]


def test_an_fp32_run_on_a_device_without_an_fp32_peak_keeps_fp32_memory() -> None:
    """The Ascend 910B lists no fp32 peak: an fp32 run's step is timed at its default
    peak, but its weights and gradients stay fp32 (Megatron-LM's 16 bytes, 8 + 8/d)."""
    model = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("ascend-910b")
    assert "fp32" not in hw.peak_flops
    par = pk.ParallelConfig(dp=8, num_micro_batches=2, optimizer_shard=8)
    pred = pk.plan.predict(None, model, par, hw, dtype="fp32", static_scheme="megatron")
    assert pred.static_bytes == pytest.approx((8 + 8 / 8) * _llama2_7b_parameters(),
                                              rel=1e-9)
    assert any("fp32 has no peak on ascend-910b" in n for n in pred.notes)
    # the step-time calibration keeps the run's type for memory too
    cal = pk.plan.calibrate(2.0, model, par, hw, static_scheme="megatron", dtype="fp32")
    assert cal.job.dtype is None and cal.job.run_dtype == "fp32"
    assert pk.plan.predict(cal).static_bytes == pytest.approx(pred.static_bytes, rel=1e-12)


@pytest.mark.shared_samples
def test_memory_vs_theory_counts_the_jobs_type_as_the_memory_tab() -> None:
    """torch_npu's fp32 sample (its kernels' inputs are FLOAT: tests/test_static_scheme.py
    reads them) with Llama2-7B as its model: the theory against the measured peak counts
    fp32 static memory, 16 bytes per parameter without the distributed optimizer, as the
    Memory tab does."""
    profile = pk.load(shared_sample(PT_LEVEL1), cache=False)
    job = pk.infer_job(profile).with_overrides(model="llama2-7b", seq_length=4096,
                                               global_batch_size=8)
    assert job.dtype == "fp32" and job.parallel.optimizer_shard == 1
    out = pk.analysis.memory_vs_theory(profile, job.model, job.parallel, "megatron",
                                       dtype=job.dtype, gradient_bytes=job.gradient_bytes)
    static = out.loc[out["item"] == "theory_static", "bytes"]
    assert len(static) and (static == static.iloc[0]).all()
    assert static.iloc[0] == pytest.approx(16 * _llama2_7b_parameters(), rel=1e-9)
    assert static.iloc[0] == pytest.approx(memory_breakdown(job)["bytes"].iloc[:3].sum(),
                                           rel=1e-12)
    # a profile calibrated for another type than its own keeps the type asked for
    cal = pk.plan.calibrate(profile, job.model, job.parallel, job.hardware, dtype="bf16")
    assert cal.job.run_dtype == "bf16"
    assert pk.plan.predict(cal).static_bytes == pytest.approx(18 * _llama2_7b_parameters(),
                                                              rel=1e-9)


def test_the_planners_sentence_names_the_gradients_its_model_reduces_in_an_fp32_run() -> None:
    """An fp32 run on the Ascend 910B (no fp32 peak) under the MindSpore scheme reduces
    4-byte gradients (no mixed precision), as its step model prices them: the data-parallel
    part is the ring all-reduce of 4 bytes per parameter, 2·(d − 1)/d of them through each
    link, and the sentence says 4, not the 16-bit scheme's 2."""
    model = pk.ModelSpec.preset("llama2-7b")
    hw = pk.Hardware.preset("ascend-910b")
    d = 4
    par = pk.ParallelConfig(dp=d, num_micro_batches=2)
    cal = pk.plan.calibrate(2.0, model, par, hw, dtype="fp32")
    assert cal.job.static_scheme == "mindspore" and cal.job.run_dtype == "fp32"
    rates = cal.rates
    volume = _llama2_7b_parameters() * 4 * 2 * (d - 1) / d
    # the 4 ranks of a 910B server's HCCS full mesh reach each other over 3 of each NPU's
    # 7 links (28 GB/s each of the 196)
    link = hw.intra_node_bandwidth * 3 / 7 * rates.link("dp", True)
    assert rates.dp_buckets == 1 and rates.overlap["dp"] == 0
    assert pk.plan.predict(cal).parts["dp_comm"] == pytest.approx(
        volume / link + rates.link_latency_s, rel=1e-9)
    said = gradient_sentence(cal)
    assert " Gradients are reduced at 4 bytes per element, the MindSpore scheme's default" \
        in said, said
