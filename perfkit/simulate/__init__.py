"""Realistic simulated profiles in the Ascend text-export layout (teaching and test data).

:func:`simulate` runs a small event simulation of a training job built from perfkit's own
calculators and writes what the torch_npu (or MindSpore) profiler would have written for
every rank. Faults from :mod:`perfkit.simulate.faults` plant known problems.

What the numbers come from:

* **kernels**: every layer's forward, backward and recompute kernels (MatMul,
  FlashAttentionScore, RmsNorm, RotaryMul, SiLU (``Swish``), Mul, Add, Cast, ...), timed
  by the calibrated step model's functions (:mod:`perfkit.calc.timing`): matrix products
  on the hardware's measured GEMM surface by their (M, N, K) where perfkit has one (Hopper,
  V100: :mod:`perfkit.calc.gemm_rate`), scaled so that a very large product reaches
  ``efficiency`` of the peak, else (and the fused attention kernel) on the GEMM size curve
  at ``efficiency`` plus their operands' traffic, element-wise
  kernels ``bytes / (memory_efficiency × HBM bandwidth)``, each with a small fixed cost
  and seeded log-normal noise — so ``perfkit.plan.calibrate`` on a simulated profile
  recovers the settings and ``perfkit.plan.predict`` reproduces its step;
* **communication**: tensor-parallel all-reduces per layer, pipeline send/receive of one
  activation per micro-batch and data-parallel gradient reduction, sized by
  :func:`perfkit.calc.comm_volume` and timed over the hardware's intra-node (HCCS) or
  inter-node (RDMA) bandwidth at ``comm_efficiency``;
* **pipeline**: real 1F1B / interleaved schedules per stage; a stage that waits for its
  input sits in ``hcom_receive``, which is the bubble;
* **memory**: static memory (:func:`perfkit.calc.static_memory`) plus the activations of
  the micro-batches in flight (:func:`perfkit.calc.activation_memory`);
* **step figures** (``step_trace_time.csv``): computed from the simulated tasks the way
  torch_npu computes them (union of compute, of communication, their difference, gaps).
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path
from typing import Any

from ..calc.memory import ActivationModel
from ..errors import InvalidArgumentError, PerfkitWarning
from ..specs import Hardware, ModelSpec, ParallelConfig
from . import faults
from ._engine import Settings, reserved_bytes, run
from ._write import APP_RUNTIME_BYTES, write
from .faults import (
    DataLoadingStall,
    Fault,
    FullRecompute,
    HostBound,
    MemoryPressure,
    NoOverlap,
    SlowLink,
    SlowRank,
    UnbalancedStage,
    UnfusedOperators,
)

__all__ = [
    "simulate",
    "OutOfMemoryWarning",
    "OutOfMemoryError",
    "device_peak_bytes",
    "faults",
    "Fault",
    "SlowRank",
    "SlowLink",
    "UnbalancedStage",
    "DataLoadingStall",
    "UnfusedOperators",
    "HostBound",
    "NoOverlap",
    "MemoryPressure",
    "FullRecompute",
]

FRAMEWORKS = ("pytorch", "mindspore")


class OutOfMemoryWarning(PerfkitWarning):
    """A simulated job needs more device memory than the hardware has (``allow_oom=True``)."""


class OutOfMemoryError(InvalidArgumentError):
    """A simulated job needs more device memory than the hardware has, and ``allow_oom``
    is off. ``need`` says how much, on which rank, without the advice (the command line
    words the advice in its own flags)."""

    def __init__(self, need: str, parallel: object) -> None:
        self.need = need
        super().__init__("parallel", need + " (use more devices, optimizer sharding, "
                         "recompute or a smaller micro-batch); pass allow_oom=True to write "
                         "the profile anyway", parallel)


def device_peak_bytes(sim: Any, framework: str = "pytorch") -> dict[int, float]:
    """Peak device memory each rank's profile will report, in bytes.

    The allocator's reserved peak (allocated x 1.03 in whole 2 MiB blocks) plus, for
    torch_npu, the runtime memory its ``APP`` component adds
    (:data:`perfkit.simulate._write.APP_RUNTIME_BYTES`); MindSpore's export reports the
    framework's pool only.
    """
    runtime = APP_RUNTIME_BYTES if framework == "pytorch" else 0.0
    return {r: reserved_bytes(peak) + runtime for r, peak in sim.reserved_peak.items()}


def _summary(model: ModelSpec, parallel: ParallelConfig, hardware: Hardware, steps: int,
             faults_: tuple[Fault, ...], seed: int, settings: Settings) -> dict[str, Any]:
    def plain(obj: Any) -> Any:
        if dataclasses.is_dataclass(obj):
            return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                    if not (f.metadata.get("omit_when_default")
                            and getattr(obj, f.name) == f.default)}
        if isinstance(obj, (list, tuple)):
            return [plain(x) for x in obj]
        if isinstance(obj, dict):
            return {str(k): plain(v) for k, v in obj.items()}
        return obj

    # the simulator prices its links per device (intra / inter-node bandwidth), not by the
    # node the preset attaches (perfkit.specs.node): that node is not part of what it used,
    # and the bundled profiles keep the bytes they were made with
    hw = {k: v for k, v in plain(hardware).items() if k != "node"}
    return {"generator": "perfkit.simulate", "model": plain(model), "parallel": plain(parallel),
            "hardware": hw, "steps": steps, "seed": seed,
            "faults": [{"fault": type(f).__name__, **plain(f)} for f in faults_],
            "settings": plain(settings)}


def simulate(model: ModelSpec, parallel: ParallelConfig, hardware: Hardware, steps: int = 3,
             faults: tuple[Fault, ...] | list[Fault] = (), seed: int = 0,
             out: str | os.PathLike[str] = "simulated_profile", *,
             framework: str = "pytorch", efficiency: float = 0.62,
             memory_efficiency: float = 0.7, comm_efficiency: float = 0.8,
             noise: float = 0.03, aic_metrics: str | None = "PipeUtilization",
             trace_kernels: bool = True, dp_buckets: int = 4,
             activation_model: ActivationModel | None = None,
             static_scheme: str = "mindspore", first_step: int = 1,
             overlap_merge_us: float = 0.0, allow_oom: bool = False,
             recompute_style: str = "all") -> Path:
    """Simulate a training job and write its profile, one folder per rank.

    Parameters
    ----------
    model, parallel, hardware
        What trains, how it is split (ranks laid out tp-innermost, then dp, then pp), on
        what (peak FLOP/s of ``hardware.default_dtype``, HBM bandwidth, HCCS / RDMA
        bandwidth, ``devices_per_node``).
    steps : int
        Training steps to simulate (all are written).
    faults : sequence of Fault
        Problems to plant, e.g. ``(SlowRank(3), DataLoadingStall(80_000))``.
    seed : int
        Seed of the noise. The same inputs and seed give byte-identical files.
    out : path
        Folder that receives the rank folders (created; existing rank folders of the same
        name are overwritten).
    framework : {"pytorch", "mindspore"}
        Write a torch_npu (``*_ascend_pt``, torch_npu 2.7.1 / CANN 8.5 headers) or a
        MindSpore 2.9 (``*_ascend_ms``) export.
    efficiency : float
        Achieved share of peak FLOP/s on very large matrix kernels (on a measured GEMM
        surface, smaller and skinnier products less, by their shape).
    memory_efficiency : float
        Achieved share of HBM bandwidth on element-wise kernels.
    comm_efficiency : float
        Achieved share of nominal link bandwidth.
    noise : float
        Sigma of the log-normal noise on kernel durations.
    aic_metrics : str or None
        ``"PipeUtilization"`` writes the PMU columns of that metric set in
        kernel_details.csv; ``None`` writes none (``ACL_AICORE_NONE``), which keeps files
        small.
    trace_kernels : bool
        Put every device kernel into trace_view.json (as the profiler does); ``False`` keeps
        only steps, communication and the Overlap Analysis tracks (smaller files).
    dp_buckets : int
        Data-parallel gradient buckets; all but the last overlap the last backward pass
        unless :class:`NoOverlap` is given.
    activation_model : ActivationModel, optional
        Activation accounting for the memory files (default: MindFormers Llama, i.e.
        flash attention and SiLU/Mul selective recompute).
    static_scheme : {"mindspore", "megatron", "zero"}
        Static-memory accounting (see :func:`perfkit.calc.static_memory`).
    first_step : int
        Number of the first simulated step.
    overlap_merge_us : float
        In the "Overlap Analysis" tracks of trace_view.json only, close gaps shorter than
        this (fewer, longer events; smaller files). ``step_trace_time.csv`` always counts
        every gap. 0 (default) keeps every gap, as the profiler does.
    recompute_style : {"all", "needed"}
        What a fully recomputed layer reruns: its whole forward (PyTorch checkpointing,
        Megatron-LM) or only what the backward reads (graph-mode MindSpore, which prunes
        the MLP output projection), see :data:`perfkit.calc.rates.RECOMPUTE_STYLES`.
    allow_oom : bool
        A job whose peak device memory (:func:`device_peak_bytes`) exceeds
        ``hardware.memory_bytes`` cannot run: by default that raises
        :class:`~perfkit.errors.InvalidArgumentError` before anything is written; with
        ``allow_oom=True`` the profile is written anyway, with an
        :class:`OutOfMemoryWarning` and a ``does_not_fit`` entry in the recorded inputs
        (``perfkit_simulation`` in ``profiler_metadata.json``).

    Returns
    -------
    Path
        ``out``; load it with ``perfkit.load(out)``.

    Notes
    -----
    The files hold the level of detail of a ``profiler_level=Level1`` run with
    ``profile_memory=True`` and ``record_shapes=True``. One ``perfkit_simulation`` entry in
    each ``profiler_metadata.json`` records the inputs (as a user would with
    ``prof.add_metadata``), so a teaching scenario carries its own answer key.
    """
    if not isinstance(model, ModelSpec):
        raise InvalidArgumentError("model", "must be a ModelSpec", type(model).__name__)
    if not isinstance(parallel, ParallelConfig):
        raise InvalidArgumentError("parallel", "must be a ParallelConfig",
                                   type(parallel).__name__)
    if not isinstance(hardware, Hardware):
        raise InvalidArgumentError("hardware", "must be a Hardware", type(hardware).__name__)
    parallel.validate(model)
    if parallel.recompute_ops is not None:
        raise InvalidArgumentError("parallel", "recompute_ops (op-level recompute) is priced "
                                   "by perfkit.plan.predict; the simulator reruns what the "
                                   "activation model's 'selective' names",
                                   parallel.recompute_ops)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise InvalidArgumentError("steps", "must be a whole number >= 1", steps)
    if framework not in FRAMEWORKS:
        raise InvalidArgumentError("framework", f"must be one of {FRAMEWORKS}", framework)
    faults_ = tuple(faults)
    for f in faults_:
        if not isinstance(f, Fault):
            raise InvalidArgumentError("faults", "entries must be perfkit.simulate faults",
                                       type(f).__name__)
    for name, value in (("efficiency", efficiency), ("memory_efficiency", memory_efficiency),
                        ("comm_efficiency", comm_efficiency)):
        if not 0 < value <= 1:
            raise InvalidArgumentError(name, "must be in (0, 1]", value)
    if noise < 0:
        raise InvalidArgumentError("noise", "must be >= 0", noise)
    if recompute_style not in ("all", "needed"):
        raise InvalidArgumentError("recompute_style", "must be 'all' or 'needed'",
                                   recompute_style)
    settings = Settings(efficiency=efficiency, memory_efficiency=memory_efficiency,
                        comm_efficiency=comm_efficiency, noise=noise, dp_buckets=dp_buckets,
                        recompute_style=recompute_style,
                        static_scheme=static_scheme, first_step=first_step,
                        activation_model=activation_model or ActivationModel.mindformers())
    runtime = APP_RUNTIME_BYTES if framework == "pytorch" else 0.0
    try:
        sim = run(model, parallel, hardware, steps, faults_, seed, settings, runtime)
    except ValueError as exc:
        if isinstance(exc, InvalidArgumentError):
            raise
        raise InvalidArgumentError("faults", str(exc)) from None
    summary = _summary(model, parallel, hardware, steps, faults_, seed, settings)
    peaks = device_peak_bytes(sim, framework)
    worst = max(peaks, key=lambda r: peaks[r]) if peaks else None
    if worst is not None and peaks[worst] > hardware.memory_bytes:
        gib = 2.0**30
        need = (f"the job needs {peaks[worst] / gib:.1f} GiB of device memory on rank "
                f"{worst} ({100 * peaks[worst] / hardware.memory_bytes:.0f} % of the "
                f"{hardware.memory_bytes / gib:.1f} GiB of {hardware.name}): it cannot run "
                "as configured")
        if not allow_oom:
            raise OutOfMemoryError(need, parallel)
        msg = (need + " (use more devices, optimizer sharding, recompute or a smaller "
               "micro-batch)")
        warnings.warn(msg + "; writing it anyway (allow_oom=True)", OutOfMemoryWarning,
                      stacklevel=2)
        summary["does_not_fit"] = {"rank": worst, "peak_bytes": peaks[worst],
                                   "memory_bytes": hardware.memory_bytes}
    path = Path(out)
    write(sim, path, framework=framework, aic_metrics=aic_metrics, trace_kernels=trace_kernels,
          overlap_merge_us=overlap_merge_us, summary=summary)
    return path
