"""Published iteration times of real training runs, with their sources: the validation set.

Every run records the published figure as printed (a step time, a per-GPU FLOP rate or a
per-device token rate), where it was printed (paper, table, row), the layout the authors
state and how the step time follows from the figure. Figures are the papers'; nothing
here comes from perfkit's own output. ``benchmarks/bench_predict.py`` and
``tests/plan/test_published.py`` use them with the protocol *calibrate on one run of a
study, predict the others*.

Studies
-------
* **Korthikanti et al. 2022**, "Reducing Activation Recomputation in Large Transformer
  Models" (arXiv 2205.05198), Table 5: iteration time of four GPT models with full
  recompute and with sequence parallelism + selective recompute, A100 80 GB (Selene).
  Layouts of Table 3 as encoded in Calculon's validation inputs (calculon-ai/calculon @
  caa4b11, ``validation/seqsel/tab5/*.json``, ``models/*.json``): data parallel 1,
  tensor parallel 8, 2048 tokens, vocabulary 51,200.
* **Narayanan et al. 2021**, "Efficient Large-Scale Language Model Training on GPU
  Clusters Using Megatron-LM" (SC21, arXiv 2104.04473), Table 1: achieved TFLOP/s per
  GPU of ten GPT models (weak scaling), A100 80 GB. The step time is
  ``F / (rate · GPUs)`` with the paper's eq. (3), ``F = 96·B·s·l·h²·(1 + s/(6h) +
  V/(16lh))`` (which counts the recomputed forward). Micro-batch sizes, virtual stages
  and the data-parallel implementation are those of the authors' script for the table,
  NVIDIA/Megatron-LM ``examples/sc21/run_table_1.sh`` (with ``CONFIG.sh``: fp16,
  2048 tokens, full uniform recompute).
* **Smith et al. 2022**, "Using DeepSpeed and Megatron to Train Megatron-Turing NLG
  530B" (arXiv 2201.11990), §2.4 system performance: iteration time 60.1 / 50.2 /
  44.4 s at 280 / 350 / 420 DGX A100 nodes (126 / 121 / 113 TFLOP/s per GPU), global
  batch 1920, tensor 8 × pipeline 35 (figures as quoted by cli99/llm-analysis
  ``examples/megatron-turing-nlg/README.md``). DeepSpeed ZeRO-1, full recompute,
  micro-batch 1.
* **Dubey et al. 2024**, "The Llama 3 Herd of Models" (arXiv 2407.21783), Table 4: BF16
  TFLOP/s per GPU of Llama 3 405B pre-training on H100 (8,192 and 16,384 GPUs; the last
  row with 131,072-token sequences and context parallel 16). The step time is the
  model's FLOPs of a 16M-token batch (perfkit's count with causal attention, the work
  a fused causal kernel does) over the rate. Pipeline stages hold 8 layers, the first
  and last 7 (§3.3.2). The paper states neither the interleaving depth nor the
  recompute: one layer per virtual stage (``vpp = 8``) and no recompute are assumed.
* **The MindFormers performance guide** (``perf_optimize.md``, "Llama2-13B Extreme
  Performance Optimization", the seed guide in ``shared/seeds``): Llama2-13B on Ascend
  910B, 1,860 → 2,136 → 2,353 → 2,562 tokens/s/p (per device). Layouts from the guide
  and from the configuration it points to (mindformers ``configs/llama2/
  pretrain_llama2_13b.yaml``: dp 8, batch 2, one micro-batch, full recompute, optimizer
  parallel, flash attention, fp16, ``gradient_aggregation_group: 4``, no
  ``parallel_speed_up_json_path``: MindSpore's defaults, under which the gradient
  reduce-scatter and the weight all-gather do not overlap computation).

Runs excluded from the error statistics (``in_statistics=False``) say why in ``notes``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..calc import ActivationModel
from ..calc.flops import model_flops
from ..calc.rates import Rates
from ..errors import InvalidArgumentError
from ..specs import Hardware, ModelSpec, ParallelConfig

__all__ = ["PublishedRun", "PUBLISHED_RUNS", "published_runs", "STUDIES", "validate", "BEHAVIOUR"]


@dataclass(frozen=True)
class PublishedRun:
    """One published training run and its measured step time.

    Attributes
    ----------
    key : str
        Short unique name, e.g. ``"korthikanti-175b-full"``.
    study : str
        The publication (one calibration per study).
    source : str
        Where the figure is printed: table and row.
    model, parallel : ModelSpec, ParallelConfig
        What ran, as the authors state it.
    hardware : str
        Hardware preset name.
    figure, unit : float, str
        The published number as printed and its unit (``"s"``, ``"TFLOP/s per GPU"``,
        ``"tokens/s per device"``).
    step_s : float
        The measured step time that follows from the figure (see ``derivation``).
    derivation : str
        How ``step_s`` follows from ``figure``.
    rates : Rates
        The framework's behaviour (recompute style, gradient-reduction overlap and
        bytes); its efficiencies are perfkit's defaults, calibration fits them.
    activation_model : ActivationModel
        Fused attention, dropout and norm storage of the implementation.
    stage_layers : tuple of int, optional
        Layers per pipeline stage when the split is uneven.
    calibrates : bool
        The study's calibrating run (its first run as published).
    in_statistics : bool
        Whether the run counts in the error statistics.
    notes : str
        Assumptions where the source is silent.
    """

    key: str
    study: str
    source: str
    model: ModelSpec
    parallel: ParallelConfig
    hardware: str
    figure: float
    unit: str
    step_s: float
    derivation: str
    rates: Rates = field(default_factory=Rates)
    activation_model: ActivationModel = field(default_factory=ActivationModel)
    stage_layers: tuple[int, ...] | None = None
    calibrates: bool = False
    in_statistics: bool = True
    notes: str = ""

    @property
    def hardware_spec(self) -> Hardware:
        """The :class:`~perfkit.Hardware` preset."""
        return Hardware.preset(self.hardware)

    @property
    def global_batch_size(self) -> int:
        """Sequences per step."""
        return self.parallel.global_batch_size


KORTHIKANTI = "Korthikanti et al. 2022"
NARAYANAN = "Narayanan et al. 2021"
MTNLG = "Smith et al. 2022 (MT-NLG)"
LLAMA3 = "Dubey et al. 2024 (Llama 3)"
SEED = "MindFormers guide (Llama2-13B)"
#: Study names, in the order the benchmark prints them.
STUDIES = (KORTHIKANTI, NARAYANAN, MTNLG, LLAMA3, SEED)


def _gpt(layers: int, hidden: int, heads: int, vocab: int = 51200, name: str = "") -> ModelSpec:
    return ModelSpec(num_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                     seq_length=2048, vocab_size=vocab, mlp="gpt", name=name)


# --- Korthikanti et al. 2022, Table 5 ----------------------------------------------------
# (name, layers, hidden, heads, pp, vpp, micro-batch, global batch, full s, SP+selective s)
_KORTHIKANTI = (
    ("22B", 48, 6144, 64, 1, 1, 4, 4, 1.42, 1.10),
    ("175B", 96, 12288, 96, 8, 3, 1, 64, 18.13, 13.75),
    ("530B", 105, 20480, 128, 35, 3, 1, 280, 49.05, 37.83),
    ("1T", 128, 25600, 160, 64, 1, 1, 512, 94.42, 71.49),
)


def _korthikanti() -> list[PublishedRun]:
    runs = []
    for name, layers, hidden, heads, pp, vpp, mbs, gbs, full_s, sel_s in _KORTHIKANTI:
        model = _gpt(layers, hidden, heads, name=f"gpt-{name}")
        m = gbs // mbs
        for mode, t in (("full", full_s), ("sp-selective", sel_s)):
            par = ParallelConfig(tp=8, pp=pp, vpp=vpp, micro_batch_size=mbs,
                                 num_micro_batches=m,
                                 recompute="full" if mode == "full" else "selective",
                                 sequence_parallel=mode != "full")
            column = "full recompute" if mode == "full" else "present work (SP + selective)"
            runs.append(PublishedRun(
                f"korthikanti-{name.lower()}-{mode}", KORTHIKANTI,
                f"Table 5, {name} row, '{column}' iteration time", model, par, "a100", t, "s",
                t, "printed iteration time", Rates(), ActivationModel(),
                calibrates=(name == "22B" and mode == "full")))
    return runs


# --- Narayanan et al. 2021, Table 1 (+ examples/sc21/run_table_1.sh) -----------------------
# (billions, heads, hidden, layers, tp, pp, GPUs, batch, TFLOP/s, micro-batch, vpp, DDP)
_NARAYANAN = (
    ("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137, 16, 1, "torch"),
    ("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138, 16, 1, "torch"),
    ("7.5B", 32, 4096, 36, 4, 1, 128, 512, 142, 16, 1, "torch"),
    ("18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135, 8, 1, "torch"),
    ("39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138, 4, 1, "local"),
    ("76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140, 2, 3, "local"),
    ("145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148, 2, 2, "local"),
    ("310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155, 1, 2, "local"),
    ("529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163, 1, 3, "local"),
    ("1008.0B", 160, 25600, 128, 8, 64, 3072, 3072, 163, 1, 1, "local"),
)


def narayanan_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """Narayanan et al. 2021 eq. (3): FLOPs of one iteration with activation recompute."""
    return 96.0 * batch * seq * layers * hidden ** 2 * (
        1 + seq / (6.0 * hidden) + vocab / (16.0 * layers * hidden))


def _narayanan() -> list[PublishedRun]:
    runs = []
    for i, (name, heads, hidden, layers, tp, pp, gpus, batch, rate, mbs, vpp, ddp) in \
            enumerate(_NARAYANAN):
        dp = gpus // (tp * pp)
        par = ParallelConfig(dp=dp, tp=tp, pp=pp, vpp=vpp, micro_batch_size=mbs,
                             num_micro_batches=batch // (dp * mbs), recompute="full")
        flops = narayanan_flops(batch, 2048, layers, hidden, 51200)
        step = flops / (rate * 1e12 * gpus)
        # PyTorch DDP overlaps the all-reduce with the backward in 25 MB buckets;
        # Megatron's "local" DDP reduces after the backward.
        rates = Rates(dp_buckets=64 if ddp == "torch" else 1)
        runs.append(PublishedRun(
            f"narayanan-{name.lower()}", NARAYANAN,
            f"Table 1, {name} row: {rate} TFLOP/s per GPU on {gpus} GPUs, batch {batch}",
            _gpt(layers, hidden, heads, name=f"gpt-{name}"), par, "a100", rate,
            "TFLOP/s per GPU", step,
            f"eq. (3) FLOPs {flops:.4g} / ({rate} TFLOP/s x {gpus} GPUs)", rates,
            ActivationModel(), calibrates=i == 0,
            notes=f"micro-batch {mbs}, vpp {vpp}, --DDP-impl {ddp} "
                  "(Megatron-LM examples/sc21/run_table_1.sh)"))
    return runs


# --- Smith et al. 2022, MT-NLG 530B ----------------------------------------------------------
def _mtnlg() -> list[PublishedRun]:
    runs = []
    model = _gpt(105, 20480, 128, name="mt-nlg-530b")
    for nodes, t, rate in ((280, 60.1, 126), (350, 50.2, 121), (420, 44.4, 113)):
        dp = nodes * 8 // (8 * 35)
        par = ParallelConfig(dp=dp, tp=8, pp=35, micro_batch_size=1,
                             num_micro_batches=1920 // dp, recompute="full",
                             optimizer_shard=dp)
        runs.append(PublishedRun(
            f"mtnlg-{nodes}-nodes", MTNLG,
            f"§2.4, {nodes} DGX A100 nodes: {t} s per iteration ({rate} TFLOP/s per GPU)",
            model, par, "a100", t, "s", t, "printed iteration time", Rates(),
            ActivationModel(), calibrates=nodes == 280,
            notes="vocabulary padded to 51,200 (Megatron pads 50,257 to a multiple of "
                  "128 x tp); ZeRO-1 sharding over the data-parallel replicas"))
    return runs


# --- Dubey et al. 2024, Llama 3 405B --------------------------------------------------------
def _llama3() -> list[PublishedRun]:
    runs = []
    base = ModelSpec.preset("llama3-405b")
    am = ActivationModel("tensors", flash_attention=True, dropout=False)
    # Llama 3 §3.3.4: FP32 gradient accumulation and FP32 reduce-scatter in FSDP.
    rates = Rates(dp_buckets=8, gradient_bytes=4.0)
    stages = (7,) + (8,) * 14 + (7,)
    rows = ((8192, 1, 64, 8192, 32, 430, True), (16384, 1, 128, 8192, 16, 400, True),
            (16384, 16, 8, 131072, 16, 380, False))
    for gpus, cp, dp, seq, per_dp, rate, stats in rows:
        model = base.replace(seq_length=seq)
        par = ParallelConfig(dp=dp, tp=8, pp=16, cp=cp, vpp=8, micro_batch_size=1,
                             num_micro_batches=per_dp, sequence_parallel=True,
                             optimizer_shard=dp)
        tokens = dp * per_dp * seq
        flops = model_flops(model, tokens, causal=True)
        step = flops / (rate * 1e12 * gpus)
        note = ("one layer per virtual stage (vpp 8) and no recompute assumed (not stated); "
                "FLOPs with causal attention (convention not stated)")
        if not stats:
            note += ("; left out of the statistics: at 131,072 tokens the attention core is "
                     "40 % of a layer's FLOPs (causal count), so the unstated convention "
                     "(causal or not) moves the implied step time by 40 %, and the fused "
                     "attention kernel's speed, which a step time cannot calibrate, weighs "
                     "as much as the GEMMs'")
        runs.append(PublishedRun(
            f"llama3-{gpus}-cp{cp}", LLAMA3,
            f"Table 4, {gpus:,} GPUs, TP 8 CP {cp} PP 16 DP {dp}, sequence {seq:,}: "
            f"{rate} TFLOP/s per GPU", model, par, "h100", rate, "TFLOP/s per GPU", step,
            f"model FLOPs {flops:.4g} of {tokens:,} tokens / ({rate} TFLOP/s x {gpus} GPUs)",
            rates, am, stages, calibrates=gpus == 8192, in_statistics=stats, notes=note))
    return runs


# --- MindFormers guide, Llama2-13B -----------------------------------------------------------
def _seed() -> list[PublishedRun]:
    model = ModelSpec.preset("llama2-13b")
    am = ActivationModel.mindformers()
    # The gradient reduce-scatter runs after the backward in every run (dp_buckets 1).
    # Without pipeline stages MindSpore overlaps it with the backward's dx computation
    # only when asked to: ascend_config parallel_speed_up_json_path option
    # enable_grad_comm_opt (later grad_computation_allreduce_overlap), "overlap between dx
    # ops and data parallel communication ops", default False (mindspore.set_context,
    # r2.3; the pass that does it, InsertDependForGradComm, runs only with it set and
    # without pipeline stages); the yaml sets no parallel_speed_up json. Its weight
    # all-gather likewise overlaps the forward only with enable_opt_shard_comm_opt
    # (default False), as the model charges it. MindFormers' gradient_aggregation_group
    # (4) fusion groups (LayerSetting.set_comm_fusion) say which gradients reduce
    # together, not when: and the embedding shares group 4 with layers 30-39, the output
    # head keeps the default group 1 with layers 0-9, so half the gradients could not
    # start before the backward ends anyway. With pipeline stages every layer shares one
    # fusion group (set_comm_fusion(2)), reduced once after the last micro-batch.
    rates = Rates(recompute_style="needed", dp_buckets=1)
    pipe = dict(dp=8, pp=2, micro_batch_size=1, num_micro_batches=128, optimizer_shard=8)
    rows = (
        ("baseline", "DP 8, MP 1, PP 1, full recompute", 1860,
         ParallelConfig(dp=8, micro_batch_size=2, num_micro_batches=1, recompute="full",
                        optimizer_shard=8)),
        ("pipelined", "DP 8, MP 1, PP 2, micro 128, full recompute", 2136,
         ParallelConfig(recompute="full", **pipe)),
        ("recompute-13-5", "full recompute of 13 and 5 layers, SiLU/Mul selective", 2353,
         ParallelConfig(recompute="selective", recompute_layers=(13, 5), **pipe)),
        ("tuned", "recompute [4, 0], SiLU/Mul selective (max_device_memory 57.2GB)", 2562,
         ParallelConfig(recompute="selective", recompute_layers=(4, 0), **pipe)),
    )
    runs = []
    for name, what, rate, par in rows:
        tokens = par.global_batch_size * model.seq_length / par.world_size
        runs.append(PublishedRun(
            f"seed-llama2-13b-{name}", SEED,
            f"perf_optimize.md, Llama2-13B case: {what}: {rate:,} tokens/s/p", model, par,
            "ascend-910b", rate, "tokens/s per device", tokens / rate,
            f"{tokens:,.0f} tokens per device per step / {rate:,} tokens/s", rates, am,
            calibrates=name == "baseline",
            notes="batch 2 per replica for the baseline (the yaml it names), 1 with 128 "
                  "micro-batches once pipelined; tokens/s/p is per device (the guide's MFU "
                  "of 55.4 % at 2,562 only holds per device)"))
    return runs


PUBLISHED_RUNS: tuple[PublishedRun, ...] = tuple(
    _korthikanti() + _narayanan() + _mtnlg() + _llama3() + _seed())


def published_runs(study: str | None = None) -> pd.DataFrame:
    """The validation set as a table: one row per run (``run`` holds the object).

    Columns: ``key, study, source, hardware, figure, unit, step_s, derivation,
    calibrates, in_statistics, notes, run``.
    """
    rows = [r for r in PUBLISHED_RUNS if study is None or r.study == study]
    if not rows:
        raise InvalidArgumentError("study", f"must be one of {', '.join(STUDIES)}", study)
    return pd.DataFrame([{"key": r.key, "study": r.study, "source": r.source,
                          "hardware": r.hardware, "figure": r.figure, "unit": r.unit,
                          "step_s": r.step_s, "derivation": r.derivation,
                          "calibrates": r.calibrates, "in_statistics": r.in_statistics,
                          "notes": r.notes, "run": r} for r in rows])


# ----------------------------------------------------------------------------- validation

#: Rates fields that describe what a run's framework does (not how fast it is): a
#: prediction for another run of the same study takes that run's own.
BEHAVIOUR = ("dp_buckets", "gradient_bytes", "recompute_style", "sp_ag_redo")


def _behaviour(run: PublishedRun) -> dict[str, object]:
    return {name: getattr(run.rates, name) for name in BEHAVIOUR}


def validate(runs: tuple[PublishedRun, ...] | None = None) -> pd.DataFrame:
    """Calibrate on each study's calibrating run, predict its other runs; out of the box too.

    Protocol: for each study, :func:`perfkit.plan.calibrate` takes the calibrating run's
    measured step time (``calibrates=True``: the study's first run as published) with its
    model, layout and hardware; :func:`perfkit.plan.predict` then predicts every other run
    of the study from that calibration, given only the other run's model, layout and
    framework behaviour (``rates`` fields :data:`BEHAVIOUR`). *Out of the box* is
    :func:`perfkit.plan.predict` without a calibration (perfkit's default rates).

    Returns
    -------
    DataFrame
        One row per run: ``study, key, role`` (``"calibrates"`` / ``"predicted"``),
        ``published_s``, ``out_of_box_s``, ``out_of_box_error``, ``predicted_s``,
        ``low_s``, ``high_s``, ``error`` (predicted / published − 1; 0 for the calibrating
        run, whose fit closes on it), ``in_band``, ``in_statistics``, ``source``.
    """
    from .calibrate import calibrate
    from .predict import predict

    runs = PUBLISHED_RUNS if runs is None else runs
    rows = []
    for study in dict.fromkeys(r.study for r in runs):
        group = [r for r in runs if r.study == study]
        anchor = next(r for r in group if r.calibrates)
        cal = calibrate(anchor.step_s, anchor.model, anchor.parallel, anchor.hardware_spec,
                        activation_model=anchor.activation_model, rates=anchor.rates,
                        stage_layers=anchor.stage_layers)
        for run in group:
            kw = dict(stage_layers=run.stage_layers, activation_model=run.activation_model,
                      overrides=_behaviour(run))
            box = predict(None, run.model, run.parallel, run.hardware_spec, **kw)
            pred = predict(cal, run.model, run.parallel, run.hardware_spec, **kw)
            rows.append({"study": study, "key": run.key,
                         "role": "calibrates" if run is anchor else "predicted",
                         "published_s": run.step_s, "out_of_box_s": box.step_s,
                         "out_of_box_error": box.step_s / run.step_s - 1.0,
                         "predicted_s": pred.step_s, "low_s": pred.low_s,
                         "high_s": pred.high_s, "error": pred.step_s / run.step_s - 1.0,
                         "in_band": pred.low_s <= run.step_s <= pred.high_s,
                         "in_statistics": run.in_statistics, "source": run.source})
    return pd.DataFrame(rows)
