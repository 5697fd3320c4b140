"""A first-order estimate of one training step: time parts, memory, MFU.

Assumptions (also returned in ``StepEstimate.assumptions``):

1. Compute: each pipeline stage runs its layers' hardware FLOPs (recompute included,
   :func:`~perfkit.calc.flops.hardware_flops` rules) at ``efficiency × peak``; the
   slowest stage sets the pace; the last stage also runs the logits GEMM. A rank runs
   ``s/cp`` tokens of each sequence (their attention against all ``s`` keys); the GEMMs
   are split ``tp`` ways, routed experts included (balanced routing: expert parallelism
   moves tokens, each rank computes ``k`` experts' worth per local token).
2. Bubble: ``bubble_fraction(pp, m, vpp) ×`` the slowest stage's compute time
   (Narayanan et al. 2021).
3. Communication: each collective of :func:`~perfkit.calc.comm.comm_volume` priced at
   its group's shape on ``hardware.topology`` (:mod:`perfkit.calc.topology`: ring
   inside a node, hierarchical across nodes over all the node's NICs), links at
   ``comm_efficiency ×`` nominal; ranks placed by ``parallel.rank_order`` (Megatron's
   default ``tp-cp-ep-dp-pp``; experts ``expert_tp-ep-dp-pp``). A share ``*_overlap``
   of each kind hides under compute.
4. Overhead: a fixed ``overhead_s`` per step (data loading, host gaps), 0 unless given.
5. Memory: static (``static_scheme``) + activation (peak stage) must fit in
   ``memory_limit_bytes`` (default: device memory less ``memory_reserve``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ..errors import (
    InvalidArgumentError,
    ParallelConfigError,
    check_choice,
    check_fraction,
    check_non_negative,
    check_positive,
)
from ..format import bytes_text, time_text
from ..specs import Hardware, ModelSpec, ParallelConfig
from ._common import as_model
from .comm import KINDS, CommVolume, comm_volume
from .flops import flops_per_token, hardware_flops, layer_forward_flops
from .memory import (
    ActivationModel,
    activation_memory,
    full_precision,
    scheme_gradient_bytes,
    static_memory,
)
from .pipeline import bubble_fraction, split_when_uneven
from .topology import collective_kind, collective_seconds, layout_group
from .usable_memory import MEMORY_RESERVE

__all__ = ["StepEstimate", "estimate_step"]


@dataclass(frozen=True)
class StepEstimate:
    """Result of :func:`estimate_step`; times in seconds, memory in bytes.

    ``*_comm_s`` are each kind's communication time before overlap (``cp_comm_s``: the
    context-parallel key/value exchange); ``exposed_comm_s`` what is left after it.
    """

    compute_s: float
    bubble_s: float
    overhead_s: float
    tp_comm_s: float
    dp_comm_s: float
    pp_comm_s: float
    ep_comm_s: float
    exposed_comm_s: float
    step_s: float
    tokens_per_second_per_device: float
    mfu: float
    hfu: float
    static_bytes: float
    activation_bytes: float
    memory_bytes: float
    memory_limit_bytes: float
    fits: bool
    assumptions: tuple[str, ...]
    cp_comm_s: float = 0.0

    def to_frame(self) -> pd.DataFrame:
        """Step-time parts (compute, bubble, exposed communication, overhead), with shares."""
        parts = {"compute": self.compute_s, "bubble": self.bubble_s,
                 "exposed communication": self.exposed_comm_s, "overhead": self.overhead_s}
        frame = pd.DataFrame({"part": list(parts), "seconds": list(parts.values())})
        frame["share"] = frame["seconds"] / self.step_s
        return frame


def _comm_seconds(volume: CommVolume, parallel: ParallelConfig, hardware: Hardware,
                  comm_eff: float, algorithm: str) -> dict[str, float]:
    """Each kind's communication time before overlap: every collective of ``volume``
    priced at its group's shape on ``hardware.topology`` (rank placement
    ``parallel.rank_order``; ring inside a node, hierarchical across nodes:
    :func:`~perfkit.calc.topology.collective_seconds`), both tiers at ``comm_eff``."""
    node = hardware.topology
    b_in = node.intra_bandwidth * comm_eff
    b_nic = node.nic_bandwidth_per_device * comm_eff
    times = dict.fromkeys(KINDS, 0.0)
    for item in volume.items:
        group = "edp" if item.kind == "dp" and "expert" in item.collective else item.kind
        n, r = layout_group(parallel, group, node.devices_per_node, stage="interior")
        coll = {"cp": "all-gather", "pp": "p2p"}.get(item.kind,
                                                     collective_kind(item.collective))
        times[item.kind] += item.count * float(collective_seconds(
            coll, item.message_bytes, item.group_size if item.kind != "pp" else n, r,
            b_in, b_nic, algorithm=algorithm))
    return times


def estimate_step(model: ModelSpec, parallel: ParallelConfig, hardware: Hardware,
                  efficiency: float = 0.5, comm_efficiency: float = 0.8,
                  dtype: str | None = None, dp_overlap: float = 0.0, tp_overlap: float = 0.0,
                  pp_overlap: float = 0.0, ep_overlap: float = 0.0,
                  static_scheme: str = "mindspore", selective_mode: str = "strict",
                  causal: bool = False, memory_reserve: float = MEMORY_RESERVE,
                  memory_limit_bytes: float | None = None,
                  overhead_s: float = 0.0,
                  activation_model: ActivationModel | None = None,
                  gradient_bytes: float | None = None, cp_overlap: float = 0.0,
                  cp_comm: str = "p2p", activation_convention: str = "seed",
                  count_router: bool = True,
                  stage_layers: Sequence[int] | None = None,
                  collective_algorithm: str = "hierarchical") -> StepEstimate:
    """Estimate the step time, memory and MFU of a configuration (see module docstring).

    Parameters
    ----------
    model, parallel, hardware
        What runs, how it is split, on what.
    efficiency : float
        Achieved share of the peak FLOP/s on the model's GEMMs, in (0, 1].
    comm_efficiency : float
        Achieved share of nominal link bandwidth, in (0, 1].
    dtype : str, optional
        The run's type: the peak to use (default ``hardware.default_dtype``). ``"fp32"``
        and ``"tf32"`` (no mixed precision) also send 4-byte activations and gradients
        and keep fp32 weights (``static_memory(..., dtype=)``); otherwise activations are
        2 bytes.
    dp_overlap, tp_overlap, pp_overlap, ep_overlap, cp_overlap : float
        Share of each kind of communication hidden under compute, in [0, 1]. Default 0:
        nothing hidden (a pessimistic bound; calibrate against a profile).
    static_scheme : {"mindspore", "megatron", "zero", "deepspeed"}
        Static-memory accounting, see :func:`~perfkit.calc.memory.static_memory`.
    selective_mode, causal, count_router
        FLOPs conventions, see :func:`~perfkit.calc.flops.hardware_flops`. Selective
        recompute adds attention-core FLOPs only when ``activation_model`` recomputes the
        attention core (not with flash attention, nor for SiLU/Mul-style selective).
    memory_reserve : float
        Share of device memory kept for workspace, fragmentation and communication
        buffers when ``memory_limit_bytes`` is not given.
    memory_limit_bytes : float, optional
        Usable memory (e.g. MindSpore's ``max_device_memory``).
    overhead_s : float
        Fixed time per step outside compute, bubble and communication (data loading, host
        launch gaps: the profile's "free" time); 0 by default, fitted by
        ``perfkit.plan.calibrate``.
    activation_model : ActivationModel, optional
        Activation accounting (default: the seed's table), see
        :class:`~perfkit.calc.memory.ActivationModel`.
    gradient_bytes : float, optional
        Bytes per gradient element, in the data-parallel reduction and in static memory;
        default 4 with ``static_scheme="megatron"`` (fp32 gradient buffers, unless
        ``dtype="fp16"``) or an fp32 ``dtype``, and 2 otherwise
        (:func:`~perfkit.calc.memory.scheme_gradient_bytes`).
    cp_comm : {"p2p", "all_gather"}
        How context parallelism exchanges keys and values (same bytes), see
        :func:`~perfkit.calc.comm.comm_volume`.
    activation_convention : {"seed", "korthikanti", "megatron", "llm-analysis"}
        Activation-memory convention for the memory check, see
        :func:`~perfkit.calc.activation.activation_memory`.
    stage_layers : sequence of int, optional
        Uneven layers per pipeline stage (e.g. 126 layers on 8 stages as
        ``[15] + [16] * 6 + [15]``; ``vpp = 1``). Default: the even split, or where the
        layers do not divide by ``pp`` (``vpp = 1``), torchtitan's automatic split
        (:func:`perfkit.calc.pipeline.split_layers`; the assumptions say so). Each
        stage's compute counts its own layers; communication and memory are those of the
        most loaded stage (as if every stage held its layers: the model with
        ``pp · max(stage_layers)`` layers).
    collective_algorithm : {"hierarchical", "flat"}
        How collectives whose group spans nodes are priced
        (:data:`perfkit.calc.topology.ALGORITHMS`).
    """
    model = as_model(model)
    if parallel.recompute_ops is not None:
        raise InvalidArgumentError("parallel", "recompute_ops (op-level recompute) is priced "
                                   "by perfkit.plan.predict's step model; this first-order "
                                   "estimate knows recompute none/selective/full only",
                                   parallel.recompute_ops)
    shaped = model
    split_said: tuple[str, ...] = ()
    found = split_when_uneven(model.num_layers, parallel.pp) if stage_layers is None \
        and parallel.vpp == 1 else None
    if found is not None:
        stage_layers, said = found
        split_said = (said,)
    if stage_layers is None:
        parallel.validate(model)
        layers = parallel.layers_per_stage(model)
    else:
        layers, shaped = _uneven(model, parallel, stage_layers)
    if not isinstance(hardware, Hardware):
        raise InvalidArgumentError("hardware", "must be a Hardware (e.g. Hardware.preset('h100'))",
                                   type(hardware).__name__)
    eff = check_fraction("efficiency", efficiency, allow_zero=False)
    comm_eff = check_fraction("comm_efficiency", comm_efficiency, allow_zero=False)
    overlaps = {k: check_fraction(f"{k}_overlap", v) for k, v in
                (("dp", dp_overlap), ("tp", tp_overlap), ("pp", pp_overlap),
                 ("ep", ep_overlap), ("cp", cp_overlap))}
    check_choice("selective_mode", selective_mode, ("strict", "korthikanti"))
    check_choice("collective_algorithm", collective_algorithm, ("hierarchical", "flat"))
    reserve = check_fraction("memory_reserve", memory_reserve)
    overhead = check_non_negative("overhead_s", overhead_s)
    peak = hardware.peak(dtype)

    pp, v, cp = parallel.pp, parallel.vpp, parallel.cp
    tokens_per_replica = parallel.micro_batch_size * parallel.num_micro_batches \
        * model.seq_length
    if cp > 1:
        tokens_per_replica /= cp  # each rank of a cp group runs s/cp tokens per sequence
    # Selective recompute costs GEMM FLOPs only when it recomputes the attention core; the
    # MLP-activation kind (SiLU/Mul) recomputes element-wise work that FLOPs do not count.
    am = ActivationModel() if activation_model is None else activation_model
    recomputes_core = am.recomputes_attention_core
    factor = 1.0 if selective_mode == "strict" else 3.0
    full = tuple(layers) if parallel.recompute == "full" and parallel.recompute_layers is None \
        else parallel.full_recompute_layers_per_stage(model)
    stage_flops = _stage_flops(model, parallel, causal, count_router, layers, full,
                               recomputes_core, factor, tokens_per_replica)
    compute_s = max(stage_flops) / (peak * eff)
    bubble_s = bubble_fraction(pp, parallel.num_micro_batches, v) * compute_s

    fp32 = full_precision(dtype)
    gradient_bytes_given = gradient_bytes
    if gradient_bytes is None:
        gradient_bytes = scheme_gradient_bytes(static_scheme, dtype)
    volume = comm_volume(shaped, parallel, dtype_bytes=4.0 if fp32 else 2.0,
                         gradient_bytes=gradient_bytes, cp_comm=cp_comm)
    times = _comm_seconds(volume, parallel, hardware, comm_eff, collective_algorithm)
    exposed = sum(times[k] * (1.0 - overlaps[k]) for k in times)
    step_s = compute_s + bubble_s + exposed + overhead

    tokens_per_device = parallel.global_batch_size * model.seq_length / (step_s
                                                                          * parallel.world_size)
    hw_per_token = hardware_flops(model, 1, parallel.recompute, selective_mode, causal,
                                  full_recompute_layers=sum(full), count_router=count_router,
                                  selective_core=recomputes_core)
    static = static_memory(shaped, parallel, static_scheme,
                           gradient_bytes=None if gradient_bytes_given is None
                           else gradient_bytes_given, dtype=dtype).total_bytes
    act = activation_memory(shaped, parallel, activation_model=activation_model,
                            convention=activation_convention).total_bytes
    limit = hardware.memory_bytes * (1.0 - reserve) if memory_limit_bytes is None \
        else check_positive("memory_limit_bytes", memory_limit_bytes)
    shown = [k for k in overlaps if k != "cp" or cp > 1]
    assumptions = (
        f"compute at {eff:.0%} of the {hardware.name} {dtype or hardware.default_dtype} peak "
        f"({peak / 1e12:.1f} TFLOP/s); slowest stage sets the pace",
        f"bubble = (pp-1)/(vpp*m) x compute = {bubble_s / compute_s:.4f} x compute",
        f"links at {comm_eff:.0%} of nominal; ranks placed {parallel.rank_order}; overlap "
        + ", ".join(f"{k} {overlaps[k]:.0%}" for k in shown),
        f"memory: {static_scheme} static + peak-stage activations vs {bytes_text(limit)}",
        f"fixed overhead {time_text(overhead * 1e6)} per step",
        *split_said,
    )
    return StepEstimate(
        compute_s=compute_s, bubble_s=bubble_s, overhead_s=overhead, tp_comm_s=times["tp"],
        dp_comm_s=times["dp"], pp_comm_s=times["pp"], ep_comm_s=times["ep"],
        exposed_comm_s=exposed, step_s=step_s,
        tokens_per_second_per_device=tokens_per_device,
        mfu=flops_per_token(model, causal, count_router=count_router) * tokens_per_device
        / peak,
        hfu=hw_per_token * tokens_per_device / peak,
        static_bytes=static, activation_bytes=act, memory_bytes=static + act,
        memory_limit_bytes=limit, fits=static + act <= limit, assumptions=assumptions,
        cp_comm_s=times["cp"])


def _uneven(model: ModelSpec, parallel: ParallelConfig,
            stage_layers: Sequence[int]) -> tuple[list[int], ModelSpec]:
    """Check an uneven split; return it and the model its most loaded stage stands for."""
    layers = [int(n) for n in stage_layers]
    if len(layers) != parallel.pp or any(n < 1 for n in layers) \
            or sum(layers) != model.num_layers or parallel.vpp != 1:
        raise InvalidArgumentError("stage_layers", f"needs pp={parallel.pp} whole numbers >= 1 "
                                   f"adding up to num_layers={model.num_layers}, with vpp=1",
                                   stage_layers)
    rules = [r for r in parallel.problems(model) if not r.startswith("pp: pp*vpp=")
             and not r.startswith("recompute_layers: more than")]
    if rules:
        param, _, rule = rules[0].partition(": ")
        raise ParallelConfigError(param, rule, getattr(parallel, param, None), rules=rules)
    return layers, model.replace(num_layers=parallel.pp * max(layers))


def _stage_flops(model: ModelSpec, parallel: ParallelConfig, causal: bool, count_router: bool,
                 layers: list[int], full: tuple[int, ...], recomputes_core: bool,
                 factor: float, tokens: float) -> list[float]:
    """FLOPs of each pipeline stage per device for one step (recompute included).

    Every GEMM is split ``tp`` ways. Routed experts too: under balanced routing the
    stage's expert work is shared by all its ``tp·cp·dp`` ranks whatever ``ep`` and
    ``expert_tp`` are (expert tensor parallelism changes which weights a rank holds and
    who exchanges tokens, not how much a rank computes). With dense first layers each
    stage counts its own dense and MoE layers, and a fully recomputed layer costs the
    stage's average layer once more. A frozen share of the weights
    (``1 − trainable_fraction``) skips its weight-gradient GEMMs (one forward's worth).
    """
    tp, pp = parallel.tp, parallel.pp
    frozen = 1.0 - parallel.trainable_fraction
    logits_fwd = 2.0 * model.hidden_size * model.vocab_size
    if not model.is_moe or not model.first_dense_layers:
        parts = layer_forward_flops(model, causal, count_router=count_router)
        core_extra = parts["core"] * factor if recomputes_core else 0.0
        out = []
        for s in range(pp):
            selective = layers[s] - full[s] if parallel.recompute == "selective" else 0
            per_token = (3 * layers[s] * parts["total"] + full[s] * parts["total"]
                         + selective * core_extra + (3 * logits_fwd if s == pp - 1 else 0.0))
            # frozen weights: no weight-gradient GEMMs (the attention core has no weights)
            per_token -= frozen * (layers[s] * (parts["total"] - parts["core"])
                                   + (logits_fwd if s == pp - 1 else 0.0))
            out.append(tokens * per_token / tp)
        return out
    kinds = {k: layer_forward_flops(model, causal, count_router=count_router, layer=k)
             for k in ("dense", "moe")}
    out, start = [], 0
    for s in range(pp):
        n = layers[s]
        chosen = [kinds["moe" if model.layer_is_moe(i) else "dense"]
                  for i in range(start, start + n)]
        start += n
        work = sum(c["total"] for c in chosen)
        core = sum(c["core"] for c in chosen) / n
        selective = n - full[s] if parallel.recompute == "selective" else 0
        per_token = (3 + full[s] / n) * work + selective * (core * factor if recomputes_core
                                                            else 0.0)
        per_token -= frozen * (work - core * n)
        if s == pp - 1:
            per_token += (3 - frozen) * logits_fwd
        out.append(tokens * per_token / tp)
    return out
