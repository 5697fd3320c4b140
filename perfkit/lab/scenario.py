"""What one student's pack is made of, drawn from the class seed.

Each student gets a :class:`Setup`: two small simulated profiles (their *job*, with one
planted problem, and a four-rank data-parallel *cluster* with a slow rank or a slow link),
a pipeline to price (the bubble question), a layout of a full-size model to fit in memory,
a planning job for :func:`perfkit.plan.search`, and a MindSpore IR dump with its
``select_recompute`` configuration. Everything is drawn from ``numpy.random.default_rng
([seed, student, attempt])``, so the same seed gives the same class; :meth:`Setup.to_dict`
is what ``instructor/key.json`` records, and :meth:`Setup.from_dict` reads it back.

Profiles are kept small on purpose (two or four ranks, one step, two or four layers of a
real model's width): a class of thirty is written in well under a minute, and every
symptom is still where a tuning engineer would look for it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, check_choice
from ..simulate import faults as F
from ..specs import Hardware, ModelSpec, ParallelConfig
from .ir import BASES, NAMINGS, select_patterns

__all__ = ["LEVELS", "HARDWARE", "JOB_FAULTS", "CLUSTER_FAULTS", "Simulation", "Layout",
           "Pipeline", "PlannerJob", "RecomputeCase", "Setup", "draw", "student_name",
           "model_to_dict", "parallel_to_dict", "fault_to_dict", "fault_from_dict",
           "layout_memory", "MEMORY_RESERVE"]

#: Difficulty levels of a pack.
LEVELS = ("intro", "advanced")
#: Hardware preset of every simulation and calculation.
HARDWARE = "ascend-910b"
#: Model presets a student's job is cut from (the full model is the one the memory,
#: planner and questions use).
MODELS = ("llama2-7b", "llama3-8b", "llama2-13b")
#: Decoder layers of the simulated job and cluster (real widths, few layers: small files).
JOB_LAYERS = 4
CLUSTER_LAYERS = 2
#: The problems planted in the job, one per student, spread evenly over the class.
JOB_FAULTS = ("DataLoadingStall", "UnfusedOperators", "MemoryPressure", "UnbalancedStage",
              "FullRecompute", "NoOverlap")
#: The problems planted in the cluster.
CLUSTER_FAULTS = ("SlowRank", "SlowLink")
#: Recompute cases: which real IR dump (data/ir) and what the configuration says.
RECOMPUTE_BASES = tuple(BASES)
#: Share of device memory kept free (workspace, fragmentation), as the planner's default.
MEMORY_RESERVE = 0.1


def student_name(index: int) -> str:
    """Folder name of the ``index``-th student (1-based): ``student-3``."""
    return f"student-{index}"


# ---- plain dicts for key.json --------------------------------------------------------

def model_to_dict(model: ModelSpec) -> dict[str, Any]:
    """Every field of a ModelSpec, as JSON-ready values (``ModelSpec(**d)`` reads it)."""
    return {f.name: getattr(model, f.name) for f in dataclasses.fields(model)}


def parallel_to_dict(parallel: ParallelConfig) -> dict[str, Any]:
    """The fields of a ParallelConfig, as JSON-ready values."""
    out = {f.name: getattr(parallel, f.name) for f in dataclasses.fields(parallel)}
    for name in ("recompute_layers", "recompute_ops"):  # JSON lists, tuples again on read
        if isinstance(out.get(name), tuple):
            out[name] = list(out[name])
    return out


def _parallel_from_dict(d: dict[str, Any]) -> ParallelConfig:
    d = dict(d)
    if isinstance(d.get("recompute_layers"), list):
        d["recompute_layers"] = tuple(d["recompute_layers"])
    return ParallelConfig(**d)


def fault_to_dict(fault: F.Fault) -> dict[str, Any]:
    """``{"fault": "SlowRank", "rank": 2, "factor": 1.4}``: the class and its parameters."""
    out: dict[str, Any] = {"fault": type(fault).__name__}
    for f in dataclasses.fields(fault):
        value = getattr(fault, f.name)
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def fault_from_dict(d: dict[str, Any]) -> F.Fault:
    """The fault :func:`fault_to_dict` wrote."""
    params = {k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()
              if k != "fault"}
    cls = getattr(F, str(d.get("fault")), None)
    if not (isinstance(cls, type) and issubclass(cls, F.Fault)):
        raise InvalidArgumentError("fault", "must name a fault of perfkit.simulate.faults",
                                   d.get("fault"))
    return cls(**params)


# ---- the parts of a setup ------------------------------------------------------------

@dataclass(frozen=True)
class Simulation:
    """One simulated profile of a student's pack (:func:`perfkit.simulate`'s inputs).

    Attributes
    ----------
    name : str
        ``"job"`` or ``"cluster"``; the profile is written to ``profiles/<name>``.
    preset : str
        The model preset it is cut from (``model`` keeps its widths, fewer layers).
    model, parallel : ModelSpec, ParallelConfig
    faults : tuple of Fault
    seed : int
        The simulator's noise seed.
    efficiency : float
        Achieved share of peak FLOP/s on matrix kernels.
    steps : int
    """

    name: str
    preset: str
    model: ModelSpec
    parallel: ParallelConfig
    faults: tuple[F.Fault, ...]
    seed: int
    efficiency: float
    steps: int = 1
    hardware: str = HARDWARE

    @property
    def path(self) -> str:
        """The profile's folder, relative to the student's folder."""
        return f"profiles/{self.name}"

    def simulate_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`perfkit.simulate` that reproduce the profile."""
        return {"steps": self.steps, "faults": self.faults, "seed": self.seed,
                "efficiency": self.efficiency, "aic_metrics": None,
                "trace_kernels": False}

    def run(self, folder: Path) -> Path:
        """Write the profile into ``folder / self.path``."""
        from ..simulate import simulate

        return simulate(self.model, self.parallel, Hardware.preset(self.hardware),
                        out=folder / self.path, **self.simulate_kwargs())

    def to_dict(self) -> dict[str, Any]:
        """What key.json records: every input of :func:`perfkit.simulate`."""
        return {"name": self.name, "path": self.path, "preset": self.preset,
                "hardware": self.hardware, "model": model_to_dict(self.model),
                "parallel": parallel_to_dict(self.parallel), "steps": self.steps,
                "seed": self.seed, "faults": [fault_to_dict(f) for f in self.faults],
                "simulate": {"efficiency": self.efficiency, "aic_metrics": None,
                             "trace_kernels": False}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Simulation:
        """Read :meth:`to_dict` back."""
        return cls(name=d["name"], preset=d["preset"], model=ModelSpec(**d["model"]),
                   parallel=_parallel_from_dict(d["parallel"]),
                   faults=tuple(fault_from_dict(f) for f in d["faults"]), seed=d["seed"],
                   efficiency=d["simulate"]["efficiency"], steps=d["steps"],
                   hardware=d["hardware"])


@dataclass(frozen=True)
class Pipeline:
    """A pipeline to price: ``pp`` stages, ``m`` micro-batches, ``vpp`` virtual stages."""

    pp: int
    num_micro_batches: int
    vpp: int = 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Layout:
    """A layout of a full-size model, to fit in device memory."""

    preset: str
    parallel: ParallelConfig
    hardware: str = HARDWARE

    @property
    def model(self) -> ModelSpec:
        """The full model (the preset)."""
        return ModelSpec.preset(self.preset)

    def to_dict(self) -> dict[str, Any]:
        """The preset name, every model field and the layout."""
        return {"preset": self.preset, "hardware": self.hardware,
                "model": model_to_dict(self.model),
                "parallel": parallel_to_dict(self.parallel)}


@dataclass(frozen=True)
class PlannerJob:
    """The job a student asks :func:`perfkit.plan.search` about.

    The search is restricted to plain layouts (:meth:`space`): tensor, pipeline and data
    parallelism with one micro-batch size, the optimizer sharded over data parallelism,
    selective or full recompute; the search's step model runs at the lab's round numbers:
    every matrix product at the student's measured matrix efficiency, every link at 80 %
    (:data:`perfkit.lab.evidence.PLANNER_LINK_EFFICIENCY`).
    """

    preset: str
    num_devices: int
    global_batch_size: int
    efficiency: float
    hardware: str = HARDWARE

    def space(self) -> Any:
        """The :class:`perfkit.plan.SearchSpace` of the question."""
        from ..plan import SearchSpace

        return SearchSpace(**self.space_dict())

    @staticmethod
    def space_dict() -> dict[str, Any]:
        """The search space's arguments, as key.json records them."""
        return {"tp": [1, 2, 4, 8], "pp": [1, 2, 4], "vpp": [1], "micro_batch_size": [1],
                "cp": [1], "sequence_parallel": [False], "optimizer_shard": ["dp"],
                "recompute": ["selective", "full"], "full_layer_fractions": []}

    def to_dict(self) -> dict[str, Any]:
        """Everything :func:`perfkit.plan.search` is called with."""
        return {"preset": self.preset, "hardware": self.hardware,
                "model": model_to_dict(ModelSpec.preset(self.preset)),
                "num_devices": self.num_devices,
                "global_batch_size": self.global_batch_size,
                "efficiency": self.efficiency, "space": self.space_dict()}


@dataclass(frozen=True)
class RecomputeCase:
    """The IR dump a student checks, and the recompute configuration they were given.

    ``base`` picks one of the real dumps of ``data/ir`` (see :mod:`perfkit.lab.ir`);
    ``naming`` renames the feed-forward cells; ``select`` are the ``select_recompute``
    patterns of the configuration (in the renamed cells); ``full_layers`` the
    MindFormers ``recompute: [n]`` (first layers fully recomputed).
    """

    base: str
    naming: str
    select: tuple[str, ...]
    full_layers: int = 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, with the dump's file."""
        return {"base": self.base, "dump": BASES[self.base].dump, "naming": self.naming,
                "select_recompute": list(self.select), "recompute": [self.full_layers]}

    def config(self) -> dict[str, Any]:
        """The configuration as :func:`perfkit.analysis.recompute_check` reads it."""
        return {"recompute": [self.full_layers], "select_recompute": list(self.select)}


@dataclass(frozen=True)
class Setup:
    """Everything one student's questions are about (see the module docstring)."""

    student: str
    level: str
    attempt: int
    job: Simulation
    cluster: Simulation
    pipeline: Pipeline
    layout: Layout
    planner: PlannerJob
    recompute: RecomputeCase
    pick: int

    def to_dict(self) -> dict[str, Any]:
        """The settings key.json records for the student."""
        return {"student": self.student, "level": self.level, "attempt": self.attempt,
                "job": self.job.to_dict(), "cluster": self.cluster.to_dict(),
                "pipeline": self.pipeline.to_dict(), "layout": self.layout.to_dict(),
                "planner": self.planner.to_dict(), "recompute": self.recompute.to_dict(),
                "pick": self.pick}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Setup:
        """Read :meth:`to_dict` back."""
        rc = d["recompute"]
        return cls(student=d["student"], level=d["level"], attempt=d["attempt"],
                   job=Simulation.from_dict(d["job"]),
                   cluster=Simulation.from_dict(d["cluster"]),
                   pipeline=Pipeline(**d["pipeline"]),
                   layout=Layout(d["layout"]["preset"],
                                 _parallel_from_dict(d["layout"]["parallel"]),
                                 d["layout"]["hardware"]),
                   planner=PlannerJob(d["planner"]["preset"], d["planner"]["num_devices"],
                                      d["planner"]["global_batch_size"],
                                      d["planner"]["efficiency"], d["planner"]["hardware"]),
                   recompute=RecomputeCase(rc["base"], rc["naming"],
                                           tuple(rc["select_recompute"]),
                                           rc["recompute"][0]),
                   pick=d["pick"])


# ---- drawing ---------------------------------------------------------------------------

def _spread(seed: int, index: int, kinds: tuple[str, ...], salt: int) -> str:
    """The kind of the ``index``-th student (0-based): every kind once per ``len(kinds)``
    students, in an order shuffled by the seed, so that a class sees them all."""
    n = len(kinds)
    rounds = np.random.default_rng([seed, salt, index // n]).permutation(n)
    return kinds[int(rounds[index % n])]


def _last_stage_ratio(model: ModelSpec, parallel: ParallelConfig) -> float:
    """Forward FLOPs of the last pipeline stage over the first's: the output head (and
    loss) on top of the same number of layers."""
    from ..calc import layer_forward_flops

    layers = parallel.layers_per_stage(model)
    per_layer = layer_forward_flops(model)["total"]
    head = 2.0 * model.hidden_size * model.vocab_size
    return (layers[-1] * per_layer + head) / (layers[0] * per_layer)


def _job_fault(kind: str, rng: np.random.Generator, parallel: ParallelConfig,
               model: ModelSpec, efficiency: float) -> F.Fault:
    if kind == "DataLoadingStall":
        # a quarter to three fifths of the step the job should take: far above noise
        from ..calc import estimate_step

        step_s = estimate_step(model, parallel, Hardware.preset(HARDWARE),
                               efficiency=efficiency).step_s
        return F.DataLoadingStall(stall_us=float(round(step_s * rng.uniform(0.25, 0.6)
                                                       * 1000) * 1000))
    if kind == "UnfusedOperators":
        ops = [("rms_norm",), ("rotary",), ("rms_norm", "rotary"),
               ("rms_norm", "rotary", "swiglu")][int(rng.integers(4))]
        return F.UnfusedOperators(ops=ops)
    if kind == "MemoryPressure":
        return F.MemoryPressure(fraction=round(float(rng.uniform(0.93, 0.98)), 3),
                                realloc_us=float(round(rng.uniform(200, 600))))
    if kind == "UnbalancedStage":
        # the last stage also holds the output head: stage 0 gets that much more work,
        # then 40-80 % beyond it, so that it stands out whatever the vocabulary
        natural = _last_stage_ratio(model, parallel)
        return F.UnbalancedStage(stage=0,
                                 factor=round(natural * float(rng.uniform(1.4, 1.8)), 2))
    if kind == "FullRecompute":
        return F.FullRecompute()
    if kind == "NoOverlap":
        return F.NoOverlap()
    raise InvalidArgumentError("fault", f"must be one of {JOB_FAULTS}", kind)


def _job_parallel(kind: str, rng: np.random.Generator, level: str) -> ParallelConfig:
    """Two ranks: data parallel 2 or pipeline 2 (whatever the fault needs)."""
    if kind == "UnbalancedStage":
        pipelined = True
    elif kind == "NoOverlap":
        pipelined = False
    else:
        pipelined = bool(rng.integers(2))
    if pipelined:
        return ParallelConfig(pp=2, num_micro_batches=int(rng.choice([4, 6])),
                              recompute="selective")
    shard = 2 if level == "advanced" and rng.integers(2) else 1
    return ParallelConfig(dp=2, num_micro_batches=2, optimizer_shard=shard,
                          recompute="selective")


def _cluster_fault(kind: str, rng: np.random.Generator) -> F.Fault:
    if kind == "SlowRank":
        return F.SlowRank(rank=int(rng.integers(4)),
                          factor=round(float(rng.uniform(1.3, 1.6)), 2))
    a, b = sorted(int(x) for x in rng.choice(4, size=2, replace=False))
    return F.SlowLink(src=a, dst=b, bandwidth_factor=round(float(rng.uniform(0.1, 0.3)), 2))


def _pipeline(rng: np.random.Generator, level: str) -> Pipeline:
    pp = int(rng.choice([2, 4, 8]))
    if level == "advanced":
        vpp = int(rng.choice([1, 2, 3, 4]))
        m = pp * int(rng.integers(1, 5))
        return Pipeline(pp, m, vpp)
    return Pipeline(pp, int(rng.integers(pp, 4 * pp + 1)), 1)


def layout_memory(layout: Layout) -> tuple[float, float, float]:
    """(static bytes, activation bytes, usable bytes) of a layout, with the conventions of
    the metrics panel and the planner: MindSpore static scheme, the seed's activation
    table on the peak stage, device memory less a 10 % reserve."""
    from ..calc import activation_memory, static_memory

    model = layout.model
    static = static_memory(model, layout.parallel, scheme="mindspore").total_bytes
    act = activation_memory(model, layout.parallel).total_bytes
    return static, act, Hardware.preset(layout.hardware).memory_bytes * (1 - MEMORY_RESERVE)


def _layout(preset: str, rng: np.random.Generator, level: str) -> Layout:
    """A layout that fits (or not: a coin) by a clear margin (at least 8 %)."""
    model = ModelSpec.preset(preset)
    want_fit = bool(rng.integers(2))
    for _ in range(500):
        tp = int(rng.choice([1, 2, 4, 8]))
        pp = int(rng.choice([1, 2, 4]))
        dp = int(rng.choice([1, 2, 4, 8]))
        m = int(rng.choice([4, 8, 16]))
        shard = dp if rng.integers(2) else 1
        recompute = str(rng.choice(["none", "selective", "full"]))
        sp = bool(level == "advanced" and tp > 1 and rng.integers(2))
        parallel = ParallelConfig(dp=dp, tp=tp, pp=pp, num_micro_batches=max(m, pp),
                                  optimizer_shard=shard, recompute=recompute,
                                  sequence_parallel=sp)
        if parallel.problems(model):
            continue
        layout = Layout(preset, parallel)
        static, act, limit = layout_memory(layout)
        ratio = (static + act) / limit
        if abs(ratio - 1) >= 0.08 and (ratio < 1) == want_fit and ratio < 4:
            return layout
    raise InvalidArgumentError("preset", "no layout with a clear memory margin found", preset)


def draw(index: int, seed: int = 0, level: str = "intro", attempt: int = 0) -> Setup:
    """The setup of the ``index``-th student (1-based) of a class drawn with ``seed``.

    ``attempt`` > 0 redraws the noise seeds and parameters (used when a draw's symptom is
    not clear enough to ask about, see :func:`perfkit.lab.make`); the planted kinds stay.
    """
    check_choice("level", level, LEVELS)
    if isinstance(index, bool) or not isinstance(index, int) or index < 1:
        raise InvalidArgumentError("index", "must be a whole number >= 1", index)
    rng = np.random.default_rng([seed, index, attempt])
    preset = MODELS[int(rng.integers(len(MODELS)))]
    full = ModelSpec.preset(preset)
    efficiency = round(float(rng.uniform(0.55, 0.75)), 2)

    job_kind = _spread(seed, index - 1, JOB_FAULTS, 1)
    job_parallel = _job_parallel(job_kind, rng, level)
    job_model = full.replace(num_layers=JOB_LAYERS, name=f"{preset}-{JOB_LAYERS}l")
    job = Simulation("job", preset, job_model, job_parallel,
                     (_job_fault(job_kind, rng, job_parallel, job_model, efficiency),),
                     seed=int(rng.integers(2**31)), efficiency=efficiency)

    cluster_kind = _spread(seed, index - 1, CLUSTER_FAULTS, 2)
    cluster = Simulation("cluster", preset,
                         full.replace(num_layers=CLUSTER_LAYERS,
                                      name=f"{preset}-{CLUSTER_LAYERS}l"),
                         ParallelConfig(dp=4, num_micro_batches=1),
                         (_cluster_fault(cluster_kind, rng),),
                         seed=int(rng.integers(2**31)), efficiency=efficiency)

    plan_preset = MODELS[int(rng.integers(len(MODELS)))]
    devices = int(rng.choice([8, 16, 32]))
    planner = PlannerJob(plan_preset, devices, devices * int(rng.choice([8, 16, 32])),
                         efficiency)

    base = _spread(seed, index - 1, RECOMPUTE_BASES, 3)
    naming = list(NAMINGS)[int(rng.integers(len(NAMINGS)))]
    recompute = RecomputeCase(base, naming, select_patterns(base, naming, rng))
    return Setup(student=student_name(index), level=level, attempt=attempt, job=job,
                 cluster=cluster, pipeline=_pipeline(rng, level),
                 layout=_layout(MODELS[int(rng.integers(len(MODELS)))], rng, level),
                 planner=planner, recompute=recompute, pick=int(rng.integers(1 << 30)))
