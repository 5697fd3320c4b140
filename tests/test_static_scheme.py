"""Which static-memory scheme a job counts, and that the job, the Planner's calibration and
the pages agree on it.

PyTorch keeps Megatron-LM's bytes per parameter (18 in a bf16 run: bf16 weights, fp32
gradients, an fp32 main copy, Adam's two fp32 moments; 16 in an fp32 run, as the torch_npu
sample here) on an Ascend NPU too: torch_npu trains LLMs with
Megatron-LM or MindSpeed (Megatron-LM on Ascend). MindSpore's seed ``10N/t + 2N`` is
MindSpore's own optimizer. A profile written by ``perfkit.simulate`` keeps the scheme its
memory records were made with. Expected figures are counted here by hand from the model's
shapes, and the framework and simulation settings are read from the raw files.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from shared_samples import PT_LEVEL1, shared_sample

import perfkit as pk
from perfkit.widgets.prediction import fit_job, scheme_sentence
from perfkit.widgets.summary import memory_breakdown

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "data" / "simulated" / "llama2-13b-baseline-dp16"


def _llama2_7b_parameters() -> int:
    """Llama2-7B's parameters, counted from its published shapes: embedding and untied
    output ``V·h`` each, per layer the four attention projections ``4h²``, the gated MLP
    ``3·h·f`` and two RMSNorm weights ``2h``, and the final norm ``h``."""
    v, h, f, layers = 32000, 4096, 11008, 32
    return 2 * v * h + layers * (4 * h * h + 3 * h * f + 2 * h) + h


def _kernel_rows(rank: Path) -> list[dict[str, str]]:
    """The rows of a torch_npu rank folder's kernel_details.csv, read with csv."""
    path = rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _torch_npu_job(path: Path) -> tuple[pk.Profile, pk.Job]:
    profile = pk.load(path, cache=False)
    # the CNN of this sample shows no transformer: the model is the user's, as in the
    # dashboard's job panel
    job = pk.infer_job(profile).with_overrides(model="llama2-7b", seq_length=4096,
                                               global_batch_size=8)
    return profile, job


@pytest.mark.shared_samples
def test_a_torch_npu_job_counts_megatron_memory_in_the_job_and_the_calibration() -> None:
    path = shared_sample(PT_LEVEL1)
    # torch_npu's export, read from the raw folder: one *_ascend_pt folder per rank, with
    # the NPU among the profiler's activities
    ranks = sorted(p for p in path.iterdir() if p.name.endswith("_ascend_pt"))
    assert ranks
    info = json.loads((ranks[0] / "profiler_info_0.json").read_text(encoding="utf-8"))
    assert "ProfilerActivity.NPU" in info["config"]["common_config"]["activities"]
    profile, job = _torch_npu_job(path)
    assert job.hardware.name.startswith("ascend")
    assert job.static_scheme == "megatron"
    fit = fit_job(profile, job)
    assert fit.calibration is not None
    assert fit.calibration.job.static_scheme == job.static_scheme
    # the run computes in fp32: every matrix product and convolution of its raw
    # kernel_details.csv takes FLOAT inputs (the Ascend 910B lists no fp32 peak, so the
    # step model runs at its fp16 peak, but the tensors stay fp32)
    products = [r["Input Data Types"] for r in _kernel_rows(ranks[0])
                if "MatMul" in r["Type"] or "Conv" in r["Type"]]
    assert products and all(set(t.split(";")) <= {"FLOAT", "INT32"} for t in products)
    assert job.dtype == "fp32" and "fp32" not in job.hardware.peak_flops
    # Megatron-LM's fp32 row (docs/user-guide/features/dist_optimizer.md, d98e8a64,
    # lines 16-20: "fp32 parameters, fp32 gradients", 16 bytes, 8 + 8/d): 4 + 4 bytes per
    # parameter stay (weight, gradient), Adam's 8 are sharded by the distributed optimizer
    shard = job.parallel.optimizer_shard
    expected = _llama2_7b_parameters() * (8 + 8 / shard)
    assert fit.prediction.static_bytes == pytest.approx(expected, rel=1e-9)
    # the Memory tab counts the same job alike
    assert memory_breakdown(job)["bytes"].iloc[:3].sum() == pytest.approx(expected, rel=1e-9)
    # what the Recompute tab says next to its figures
    sentence = scheme_sentence(fit, job)
    assert "Megatron-LM scheme" in sentence and "torch_npu" in sentence


@pytest.mark.shared_samples
def test_calibrating_a_torch_npu_profile_directly_keeps_the_jobs_scheme() -> None:
    profile, job = _torch_npu_job(shared_sample(PT_LEVEL1))
    cal = pk.plan.calibrate(profile, job.model, job.parallel, job.hardware)
    assert cal.job.static_scheme == job.static_scheme == "megatron"


def test_a_step_time_calibration_keeps_the_jobs_scheme_and_activations(tmp_path: Path) -> None:
    # a profile that cannot be fitted (its steps are cut out) falls back to the measured
    # step time: the calibration then counts memory and activations as the job does, not
    # with the step-time defaults (the MindSpore scheme, the seed's table)
    model = pk.ModelSpec.preset("llama2-7b").replace(num_layers=2, vocab_size=1024,
                                                     name="tiny")
    fused = pk.calc.ActivationModel("tensors", flash_attention=True)
    out = pk.simulate(model, pk.ParallelConfig(dp=2), pk.Hardware.preset("ascend-910b"),
                      steps=1, out=tmp_path / "run", static_scheme="megatron",
                      activation_model=fused)
    for path in Path(out).rglob("*"):
        if path.name in ("step_trace_time.csv", "trace_view.json"):
            path.unlink()
    profile = pk.load(out, cache=False)
    job = pk.infer_job(profile).with_overrides(step_time_s=0.5)  # as a training log gives
    fit = fit_job(profile, job)
    assert fit.source == "step time"
    assert fit.calibration.job.static_scheme == job.static_scheme == "megatron"
    assert fit.calibration.job.activation_model == job.activation_model
    assert job.activation_model.flash_attention


@pytest.mark.parametrize(("framework", "scheme"), [("mindspore", "megatron"),
                                                   ("pytorch", "zero")])
def test_a_simulated_profile_keeps_the_scheme_it_was_made_with(tmp_path: Path, framework: str,
                                                               scheme: str) -> None:
    model = pk.ModelSpec.preset("llama2-7b").replace(num_layers=2, vocab_size=1024,
                                                     name="tiny")
    out = pk.simulate(model, pk.ParallelConfig(dp=2), pk.Hardware.preset("ascend-910b"),
                      steps=1, out=tmp_path / "run", framework=framework,
                      static_scheme=scheme)
    rank = sorted(p for p in Path(out).iterdir() if p.is_dir())[0]
    written = json.loads((rank / "profiler_metadata.json").read_text(encoding="utf-8"))
    recorded = written["perfkit_simulation"]["settings"]["static_scheme"]
    profile = pk.load(out, cache=False)
    job = pk.infer_job(profile)
    assert job.static_scheme == recorded == scheme
    assert "simulation" in job.static_scheme_detail


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_the_bundled_simulations_keep_mindspore_memory_in_torch_npu_files() -> None:
    rank = sorted(p for p in BUNDLED.iterdir() if p.name.endswith("_ascend_pt"))[0]
    written = json.loads((rank / "profiler_metadata.json").read_text(encoding="utf-8"))
    recorded = written["perfkit_simulation"]["settings"]["static_scheme"]
    profile = pk.load(BUNDLED, cache=False)
    job = pk.infer_job(profile)
    assert job.framework == "pytorch"
    assert job.static_scheme == recorded
    fit = fit_job(profile, job)
    assert fit.calibration.job.static_scheme == recorded
    assert pk.calc.memory.STATIC_SCHEME_NAMES[recorded] in scheme_sentence(fit, job)


def _bytes_per_parameter(scheme: str, **layout: int) -> tuple[float, float]:
    """Llama2-7B on one stage: static bytes per parameter (counted by hand,
    :func:`_llama2_7b_parameters`) of ``static_memory`` and of the step model
    (``estimate_step``'s ``static_bytes``), for ``layout``."""
    model = pk.ModelSpec.preset("llama2-7b")
    par = pk.ParallelConfig(**layout)
    alone = pk.calc.static_memory(model, par, scheme)
    step = pk.calc.estimate_step(model, par, pk.Hardware.preset("h100"),
                                 static_scheme=scheme)
    n = _llama2_7b_parameters()
    return alone.total_bytes / n, step.static_bytes / n


@pytest.mark.parametrize(("stage", "scheme", "per"), [
    # ZeRO (Rajbhandari et al. 2020, §5): 2Ψ + 2Ψ + KΨ/Nd with K = 12, Nd = 8
    (1, "zero", 2 + 2 + 12 / 8),
    # Megatron-LM's distributed optimizer is ZeRO-1: 6 + 12/d (its docs' table)
    (1, "megatron", 6 + 12 / 8),
    # stage 2 shards the gradients too, stage 3 the weights: whatever the job's scheme
    (2, "megatron", 2 + (2 + 12) / 8), (3, "megatron", (2 + 2 + 12) / 8),
    # MindSpore's optimizer parallel shards weights with the optimizer state (the seed's
    # 10N/t + 2N, no gradient buffer with one micro-batch): its optimizer_level
    (1, "mindspore", (2 + 8) / 8), (3, "mindspore", (2 + 8) / 8)])
def test_static_memory_and_the_step_model_count_the_zero_stage_alike(
        stage: int, scheme: str, per: float) -> None:
    """``static_memory`` ignored ``zero_stage`` under the Megatron and MindSpore schemes
    (18 bytes per parameter at ZeRO-2) where the step model counted it (3.75), and both
    dropped stage 1. ZeRO-2 of a MindSpore job counted 3.75 under "zero"'s bytes where its
    own optimizer parallel holds 1.25."""
    alone, step = _bytes_per_parameter(scheme, dp=8, zero_stage=stage)
    assert alone == pytest.approx(per) and step == pytest.approx(per)


def test_megatrons_distributed_optimizer_shards_over_dp_and_cp() -> None:
    """Megatron-core gives the distributed optimizer the data-parallel group with its
    context-parallel ranks (``intra_dp_cp_group``): dp 2 × cp 2 shards the 12 bytes of
    optimizer state four ways, 6 + 12/4 = 9 bytes per parameter, not 6 + 12/2."""
    alone, step = _bytes_per_parameter("megatron", dp=2, cp=2, optimizer_shard=2)
    assert alone == pytest.approx(6 + 12 / 4) and step == pytest.approx(6 + 12 / 4)
