"""The named teaching scenarios of ``data/simulated/``, in one place.

``tools/make_data.py`` writes the bundled profiles from these definitions and
``perfkit simulate OUT --scenario NAME`` writes any one of them again (anywhere). Every
scenario runs on the ``ascend-910b`` preset at a matrix-kernel efficiency of
:data:`EFFICIENCY`, with seed 0 and, except for two small ones, no PMU counters
(``aic_metrics=None``) and no per-kernel events in ``trace_view.json``: the settings that
keep ``data/`` within its size budget. The exceptions: the data-stall scenario keeps every
kernel in ``trace_view.json``, and ``llama2-7b-tp2``, two ranks with everything a Level1
export holds (PMU counters of ``PipeUtilization`` included), is the bundled Ascend profile
of the tour and of the first notebook. The Llama2-13B-like jobs keep the real layer widths,
sequence length and per-replica layouts of the seed's case study (the baseline's batch of
2 sequences in one micro-batch, the pipelined runs' micro-batches of 1) but only 8 of the
40 layers and 8 micro-batches instead of 128, and recompute as MindSpore does (a fully
recomputed layer reruns only what its backward reads); the fault scenarios use a 4-layer
Llama2-7B-like model.

Why the pipelined layout is faster per device although it still recomputes every layer
(the guide's +15 %), in the step model's terms (:mod:`perfkit.calc.timing`): the
baseline runs 2 sequences per device per step and then reduce-scatters the gradients
and all-gathers the updated weights of *every* parameter, across the two nodes; the
pipelined layout holds half the parameters, keeps that traffic inside a node and pays
it once per 8 micro-batches. What it gives back is the bubble, ``(p − 1)/m``. The tuned
layout then spends the memory the pipeline freed on less recompute (the guide's +38 %).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidArgumentError
from ..specs import Hardware, ModelSpec, ParallelConfig
from .faults import DataLoadingStall, Fault, SlowLink, SlowRank

__all__ = ["Scenario", "SCENARIOS", "EFFICIENCY", "MERGE_US", "HARDWARE", "SEED",
           "scenario", "scenario_names", "write_scenario"]

#: Hardware preset of every scenario.
HARDWARE = "ascend-910b"
#: Matrix-kernel efficiency of every scenario: with it the tuned configuration lands near
#: the seed's measured tokens/s/p (see data/simulated/README.md).
EFFICIENCY = 0.78
#: Overlap Analysis tracks of trace_view.json close gaps shorter than this (file size).
MERGE_US = 20.0
#: Seed of the bundled profiles.
SEED = 0

LLAMA13B_8L = ModelSpec.preset("llama2-13b").replace(num_layers=8, name="llama2-13b-8l")
LLAMA7B_4L = ModelSpec.preset("llama2-7b").replace(num_layers=4, name="llama2-7b-4l")


@dataclass(frozen=True)
class Scenario:
    """One simulated profile of ``data/simulated/``.

    Attributes
    ----------
    name : str
        Folder name under ``data/simulated/``.
    title : str
        One line saying what the profile shows.
    model : ModelSpec
    parallel : ParallelConfig
    steps : int
    faults : tuple of Fault
    story : str
        A paragraph for the scenario's README.
    look_at : tuple of str
        Where the symptom shows (README bullet points).
    trace_kernels : bool
        Whether every kernel goes into ``trace_view.json``.
    aic_metrics : str or None
        PMU metric set written into ``kernel_details.csv`` (None: no counters).
    bundled : bool
        Whether ``tools/make_data.py`` writes it into ``data/simulated/``. The pipelined
        Llama2-13B step is not bundled (size budget): only its measurements are, in the
        case's tuning journal (``data/journals/``), and this scenario regenerates its
        profile byte for byte (``perfkit simulate OUT --scenario NAME``).
    recompute_style : {"all", "needed"}
        What a fully recomputed layer reruns (:func:`perfkit.simulate.simulate`).
    """

    name: str
    title: str
    model: ModelSpec
    parallel: ParallelConfig
    steps: int
    faults: tuple[Fault, ...] = ()
    story: str = ""
    look_at: tuple[str, ...] = field(default=())
    trace_kernels: bool = False
    aic_metrics: str | None = None
    bundled: bool = True
    recompute_style: str = "all"

    @property
    def hardware(self) -> Hardware:
        """The hardware preset (:data:`HARDWARE`)."""
        return Hardware.preset(HARDWARE)

    @property
    def num_ranks(self) -> int:
        """dp × tp × pp."""
        p = self.parallel
        return p.dp * p.tp * p.pp


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "llama2-13b-baseline-dp16", "Llama2-13B-like baseline: pure data parallel, full recompute",
        LLAMA13B_8L,
        ParallelConfig(dp=16, micro_batch_size=2, num_micro_batches=1, optimizer_shard=16,
                       recompute="full"),
        steps=1,
        story="The starting point of the seed's Llama2-13B case: every device holds the whole "
              "model (data parallel 16 over two 8-NPU nodes, optimizer state sharded), runs "
              "one micro-batch of 2 sequences per step (the batch of the configuration the "
              "guide starts from) and recomputes every layer to fit in memory.",
        look_at=("steps: Computing dominates; the forward kernels appear twice per layer "
                 "(recompute)",
                 "comm_ops: the gradient reduce-scatter and the weight all-gather of every "
                 "parameter cross the two nodes (RDMA) each step: about a quarter of it"),
        recompute_style="needed"),
    Scenario(
        "llama2-13b-pipelined-dp8-pp2",
        "Llama2-13B-like pipelined: dp 8 x pp 2, still full recompute",
        LLAMA13B_8L,
        ParallelConfig(dp=8, pp=2, num_micro_batches=8, optimizer_shard=8, recompute="full"),
        steps=1,
        story="The middle step of the seed's Llama2-13B case: the same 16 devices split into "
              "two pipeline stages (one per node) with data parallel 8 inside each, every "
              "layer still recomputed. Each device now holds half the layers, which frees "
              "the memory the next step spends on less recompute. Not bundled as a profile "
              "(size budget): its measurements are in the case's tuning journal.",
        look_at=("steps: Bubble (hcom_receive) appears; the gradient traffic stays inside a "
                 "node and is paid once per 8 micro-batches",
                 "memory: half the weights and optimizer state per device, but a gradient "
                 "accumulation buffer now that a step has several micro-batches"),
        bundled=False, recompute_style="needed"),
    Scenario(
        "llama2-13b-tuned-dp8-pp2", "Llama2-13B-like tuned: dp 8 x pp 2, partial recompute",
        LLAMA13B_8L,
        ParallelConfig(dp=8, pp=2, num_micro_batches=8, optimizer_shard=8,
                       recompute="selective", recompute_layers=(1, 0)),
        steps=1,
        story="The seed's tuned configuration: two pipeline stages (one per node), data "
              "parallel 8 inside each node, full recompute only for the first layers of "
              "stage 0 (the seed's recompute [4, 0] of 20 layers per stage, scaled to 4 "
              "layers per stage) and SiLU/Mul selective recompute elsewhere.",
        look_at=("steps: Bubble (hcom_receive) on both stages; less Computing per token than "
                 "the baseline",
                 "memory: stage 0 holds more micro-batches in flight than stage 1"),
        recompute_style="needed"),
    Scenario(
        "slow-rank", "Slow rank: one NPU computes 25 % slower", LLAMA7B_4L,
        ParallelConfig(dp=4, num_micro_batches=2), steps=2, faults=(SlowRank(2, 1.25),),
        story="Four data-parallel ranks; rank 2 runs its compute kernels 25 % slower.",
        look_at=("steps: rank 2's computing_us is the outlier",
                 "comm_ops: the other ranks wait for rank 2 inside the gradient all-reduce "
                 "(wait_us)")),
    Scenario(
        "slow-link", "Slow link: the HCCS link between ranks 2 and 3 at 15 %", LLAMA7B_4L,
        ParallelConfig(dp=4, num_micro_batches=2), steps=2,
        faults=(SlowLink(2, 3, 0.15),),
        story="Four data-parallel ranks; the link between rank 2 and rank 3 delivers 15 % "
              "of its bandwidth, so every gradient all-reduce is paced by it.",
        look_at=("comm_matrix: the 2-3 link's bandwidth_gbps is far below the other links",
                 "comm_ops: transit_us of the all-reduces grows on every rank")),
    Scenario(
        "data-stall", "Data-loading stall: the loader blocks every other step", LLAMA7B_4L,
        ParallelConfig(dp=2, pp=2, num_micro_batches=2), steps=3,
        faults=(DataLoadingStall(120_000.0, every=2),),
        story="Four ranks (dp 2 x pp 2); on steps 1 and 3 the host waits 120 ms for the data "
              "loader before it launches anything.",
        look_at=("steps: preparing_us jumps on the stalled steps; the step takes that much "
                 "longer",
                 "ops: on those steps the host launches nothing for the first 120 ms of the "
                 "ProfilerStep (this scenario keeps every kernel and host op in "
                 "trace_view.json)"),
        trace_kernels=True),
    Scenario(
        "llama2-7b-tp2", "Llama2-7B-like on 2 NPUs (tp 2): a complete Level1 export",
        LLAMA7B_4L, ParallelConfig(tp=2, num_micro_batches=2, recompute="selective"), steps=2,
        story="A small healthy job to learn the tabs on: two NPUs of one node split every "
              "layer in two (tensor parallel 2) and all-reduce the partial results over "
              "HCCS after each attention and each MLP block; SiLU/Mul selective recompute, "
              "as MindFormers configures Llama by default. Unlike the other scenarios it "
              "keeps everything a torch_npu Level1 export with "
              "aic_metrics=PipeUtilization holds: every kernel and host operator in "
              "trace_view.json, the PMU counters in kernel_details.csv, and the memory "
              "records.",
        look_at=("steps: Computing dominates; the tensor-parallel all-reduces are barely "
                 "hidden (comm_not_overlapped_us about 5 % of the step)",
                 "ops / kernels: the matrix multiplications (MatMulV3) take most of the "
                 "device time, then the optimizer update and attention; every kernel "
                 "carries its PMU ratios (aic_mac_ratio, aic_mte2_ratio, ...)",
                 "comm_ops: 32 all-reduces per rank and step: two per layer and "
                 "micro-batch in the forward pass, two in the backward pass",
                 "memory: about 11 GB reserved per rank at the peak, of the NPU's 64 GB"),
        trace_kernels=True, aic_metrics="PipeUtilization"),
)


def scenario_names() -> list[str]:
    """Names of :data:`SCENARIOS`, in order."""
    return [s.name for s in SCENARIOS]


def scenario(name: str) -> Scenario:
    """The scenario called ``name``; :class:`InvalidArgumentError` listing the names if none."""
    for s in SCENARIOS:
        if s.name == name:
            return s
    raise InvalidArgumentError("scenario", f"must be one of {', '.join(scenario_names())}",
                               name)


def write_scenario(which: str | Scenario, out: str | os.PathLike[str], *,
                   seed: int = SEED, steps: int | None = None,
                   framework: str = "pytorch") -> Path:
    """Simulate one scenario into ``out`` with the settings of the bundled data.

    Parameters
    ----------
    which : str or Scenario
        A name of :data:`SCENARIOS` or a scenario.
    out : path
        Folder that receives the rank folders (see :func:`perfkit.simulate.simulate`).
    seed : int
        Seed (the bundled data use :data:`SEED`).
    steps : int, optional
        Steps to simulate (default: the scenario's).
    framework : {"pytorch", "mindspore"}
        Export layout.

    Returns
    -------
    Path
        ``out``.
    """
    from . import simulate

    s = scenario(which) if isinstance(which, str) else which
    return simulate(s.model, s.parallel, s.hardware, steps=s.steps if steps is None else steps,
                    faults=s.faults, seed=seed, out=out, framework=framework,
                    efficiency=EFFICIENCY, aic_metrics=s.aic_metrics,
                    trace_kernels=s.trace_kernels, overlap_merge_us=MERGE_US,
                    recompute_style=s.recompute_style)
