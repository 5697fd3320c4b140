"""A layout's step, memory and MFU as a calculator: the step model without a calibration.

:func:`estimate_step` prices a layout with the one step model
(:func:`perfkit.calc.layout_rows.layout_step`, i.e. :func:`perfkit.calc.timing.step_times`:
GEMMs by shape, attention by its kernel's published curve, memory-bound kernels by bytes,
every collective at its group's shape on ``hardware.topology``, the pipeline bubble, the
gradient reduction and the optimizer), at perfkit's default rates
(:class:`~perfkit.calc.rates.Rates`) — the step :func:`perfkit.plan.predict` gives the
same layout uncalibrated. A framework's behaviour (``behaviour=``), given rates
(``rates=``) and a what-if's round numbers (``efficiency``, ``comm_efficiency``, the
overlaps, ``overhead_s``: :meth:`Rates.with_terms <perfkit.calc.rates.Rates.with_terms>`)
change the rates it runs at, not the model. Memory is that of the most loaded device
(:func:`perfkit.calc.layout_memory.layout_memory`).

It used to be a first-order model of its own (one efficiency for every matrix product,
one for every link, no fixed costs); that model is retired: one model prices a layout
wherever perfkit shows a step (docs/planner.md, "One step model").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import pandas as pd

from ..errors import InvalidArgumentError, check_choice, check_fraction, check_positive
from ..format import bytes_text, share_text, time_text
from ..specs import Hardware, ModelSpec, ParallelConfig
from ._common import as_model
from .activation import ActivationModel
from .behaviour import Behaviour
from .contention import contention_share
from .flops import flops_per_token, hardware_flops
from .layout_memory import layout_memory
from .layout_rows import default_split, layout_step, run_types, validate_layout
from .rates import GROUPS, Rates
from .timing import PART_NAMES
from .usable_memory import MEMORY_RESERVE

__all__ = ["StepEstimate", "estimate_step"]


@dataclass(frozen=True)
class StepEstimate:
    """Result of :func:`estimate_step`; times in seconds, memory in bytes.

    ``parts`` are the step model's (:data:`perfkit.calc.timing.PART_NAMES`), adding up to
    ``step_s``; ``compute_s``, ``recompute_s``, ``bubble_s``, ``optimizer_s`` and
    ``overhead_s`` are those parts, ``exposed_comm_s`` the five communication parts
    (what overlap leaves), and ``*_comm_s`` each group's traffic time before overlap
    (``cp_comm_s``: the context-parallel key/value exchange). ``rates`` are the rates the
    step was priced at.
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
    recompute_s: float = 0.0
    optimizer_s: float = 0.0
    parts: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}),
                                       repr=False)
    rates: Rates | None = field(default=None, repr=False)

    def to_frame(self) -> pd.DataFrame:
        """One row per part of the step (``part``, ``seconds``, ``share``)."""
        frame = pd.DataFrame({"part": list(self.parts),
                              "seconds": [float(v) for v in self.parts.values()]})
        frame["share"] = frame["seconds"] / self.step_s
        return frame


def estimate_step(model: ModelSpec, parallel: ParallelConfig, hardware: Hardware,
                  efficiency: float | None = None, comm_efficiency: float | None = None,
                  dtype: str | None = None, dp_overlap: float | None = None,
                  tp_overlap: float | None = None, pp_overlap: float | None = None,
                  ep_overlap: float | None = None,
                  static_scheme: str = "mindspore", selective_mode: str = "strict",
                  causal: bool = False, memory_reserve: float = MEMORY_RESERVE,
                  memory_limit_bytes: float | None = None,
                  overhead_s: float | None = None,
                  activation_model: ActivationModel | None = None,
                  gradient_bytes: float | None = None, cp_overlap: float | None = None,
                  activation_convention: str = "seed",
                  count_router: bool = True,
                  stage_layers: Sequence[int] | None = None,
                  collective_algorithm: str | None = None, *,
                  rates: Rates | None = None,
                  behaviour: Behaviour | str | None = None) -> StepEstimate:
    """Estimate the step time, memory and MFU of a layout (see module docstring).

    Parameters
    ----------
    model, parallel, hardware
        What runs, how it is split (every knob of :class:`~perfkit.ParallelConfig`,
        op-level recompute included), on what.
    efficiency : float, optional
        A what-if: every matrix product at this share of the peak FLOP/s, in (0, 1]
        (:meth:`~perfkit.calc.rates.Rates.with_terms`). None: the rates' own pricing
        (by shape on a measured surface, else on the size curve; attention on its
        kernel's curve).
    comm_efficiency : float, optional
        A what-if: every link at this share of its nominal bandwidth, in (0, 1]. None:
        the rates' (0.65 inside a node, 0.9 across by default).
    dtype : str, optional
        The run's type: its peak where ``hardware`` lists one, else the default peak with
        the tensors kept at ``dtype``'s size (:func:`~perfkit.calc.layout_rows.run_types`,
        said in ``assumptions``). Default ``hardware.default_dtype``.
    dp_overlap, tp_overlap, pp_overlap, ep_overlap, cp_overlap : float, optional
        Share of each group's communication hidden under compute beyond what the model
        schedules itself (``Rates.overlap``), in [0, 1]; None: the rates' (0).
    static_scheme : {"mindspore", "megatron", "zero", "deepspeed"}
        Static-memory accounting (:func:`~perfkit.calc.memory.static_memory`), and the
        gradients' size in the reduction when neither ``gradient_bytes`` nor the rates
        give it (:func:`~perfkit.calc.memory.scheme_gradient_bytes`).
    selective_mode, causal, count_router
        FLOPs conventions of the MFU and HFU figures
        (:func:`~perfkit.calc.flops.hardware_flops`); the step's time counts what the
        kernels run (causal attention halved by flash attention, selective recompute
        what ``activation_model.selective`` reruns).
    memory_reserve : float
        Share of device memory kept for workspace, fragmentation and communication
        buffers when ``memory_limit_bytes`` is not given.
    memory_limit_bytes : float, optional
        Usable memory (e.g. MindSpore's ``max_device_memory``).
    overhead_s : float, optional
        Fixed time per step outside the layers (data loading, host gaps); None: the
        rates' (0).
    activation_model : ActivationModel, optional
        Fused attention, stored tensors, the selective-recompute kind (default: the seed's
        table), see :class:`~perfkit.calc.memory.ActivationModel`.
    gradient_bytes : float, optional
        Bytes per gradient element, in the data-parallel reduction and in static memory
        (``Rates.gradient_bytes``); None: the rates', else the scheme's.
    activation_convention : {"seed", "korthikanti", "megatron", "llm-analysis"}
        Activation-memory convention for the memory check, see
        :func:`~perfkit.calc.activation.activation_memory`.
    stage_layers : sequence of int, optional
        Uneven layers per pipeline stage (e.g. 126 layers on 8 stages as
        ``[15] + [16] * 6 + [15]``). Default: the even split, or where the layers do not
        divide by ``pp · vpp``, torchtitan's automatic split
        (:func:`perfkit.calc.pipeline.split_layers`; the assumptions say so). Each stage is
        priced with its own layers, the slowest sets the pace.
    collective_algorithm : {"hierarchical", "flat"}, optional
        How collectives whose group spans nodes are priced
        (:data:`perfkit.calc.topology.ALGORITHMS`); None: the rates' (hierarchical).
    rates : Rates, optional
        The rates to price at (default ``Rates()``, perfkit's published defaults), e.g. a
        calibration's ``rates``.
    behaviour : Behaviour or str, optional
        A framework's overlap options and fixed costs
        (:class:`~perfkit.calc.behaviour.Behaviour` or a preset name: ``"megatron"``,
        ``"nemo"``, ``"fsdp"``, ``"deepspeed"``, ``"mindspore"`` …), applied over
        ``rates`` before the what-if terms.

    Returns
    -------
    StepEstimate

    Examples
    --------
    The step :func:`perfkit.plan.predict` gives the same layout uncalibrated:

    >>> import perfkit as pk
    >>> model, hw = pk.ModelSpec.preset("llama2-7b"), pk.Hardware.preset("h100")
    >>> par = pk.ParallelConfig(dp=8, num_micro_batches=4)
    >>> est = pk.estimate_step(model, par, hw)
    >>> est.step_s == pk.plan.predict(None, model, par, hw).step_s
    True
    """
    model = as_model(model)
    if not isinstance(parallel, ParallelConfig):
        raise InvalidArgumentError("parallel", "must be a ParallelConfig",
                                   type(parallel).__name__)
    if not isinstance(hardware, Hardware):
        raise InvalidArgumentError("hardware", "must be a Hardware (e.g. Hardware.preset('h100'))",
                                   type(hardware).__name__)
    check_choice("selective_mode", selective_mode, ("strict", "korthikanti"))
    reserve = check_fraction("memory_reserve", memory_reserve)
    if memory_limit_bytes is not None:
        check_positive("memory_limit_bytes", memory_limit_bytes)
    priced = _rates(rates, behaviour, efficiency, comm_efficiency, overhead_s,
                    {"dp": dp_overlap, "tp": tp_overlap, "pp": pp_overlap,
                     "ep": ep_overlap, "cp": cp_overlap},
                    gradient_bytes, collective_algorithm)
    stage_layers, split_said = default_split(model, parallel, stage_layers)
    uneven = stage_layers is not None
    validate_layout(model, parallel, uneven)
    peak_dtype, tensor_dtype, type_said = run_types(dtype, hardware)
    run_dtype = tensor_dtype or peak_dtype
    # the default accounting keeps the run's tensors at its type's size (as predict does)
    am = ActivationModel().in_dtype(dtype) if activation_model is None else activation_model
    out = layout_step(model, parallel, hardware, priced, stage_layers=stage_layers,
                      activation_model=am, dtype=peak_dtype, static_scheme=static_scheme,
                      tensor_dtype=tensor_dtype)
    parts = MappingProxyType({name: float(out[name][0]) for name in PART_NAMES})
    step_s = float(out["step_s"][0])
    raw = {g: float(out[f"{g}_comm_raw_s"][0]) for g in GROUPS}
    exposed = sum(parts[f"{g}_comm"] for g in GROUPS)
    memory = layout_memory(model, parallel, hardware, static_scheme, dtype=run_dtype,
                           gradient_bytes=priced.gradient_bytes,
                           # the other conventions have their own accounting
                           activation_model=am if activation_convention == "seed"
                           else activation_model,
                           activation_convention=activation_convention, uneven=uneven,
                           memory_limit_bytes=memory_limit_bytes, memory_reserve=reserve)
    peak = hardware.peak(peak_dtype)
    per_device = parallel.global_batch_size * model.seq_length / (step_s
                                                                   * parallel.world_size)
    full = int(out["rows"]["full"].sum())
    hw_per_token = hardware_flops(model, 1, parallel.recompute, selective_mode, causal,
                                  full_recompute_layers=full, count_router=count_router,
                                  selective_core=am.recomputes_attention_core)
    assumptions = (
        "the step model of perfkit.plan.predict (calc.timing.step_times), "
        + ("at perfkit's default rates" if rates is None else "at the rates given"),
        _compute_words(priced, hardware, peak_dtype, peak),
        _link_words(priced, parallel, hardware),
        f"memory: {static_scheme} static + peak-stage activations vs "
        f"{bytes_text(memory.limit_bytes)}",
        f"fixed overhead {time_text(priced.overhead_s * 1e6)} per step",
        f"gradients added up across micro-batches: {priced.grad_accumulation} "
        "(perfkit.calc.grad_accumulation)",
        *(said for said in (split_said, type_said) if said), *memory.notes,
    )
    return StepEstimate(
        compute_s=parts["compute"], bubble_s=parts["bubble"], overhead_s=parts["overhead"],
        tp_comm_s=raw["tp"], dp_comm_s=raw["dp"], pp_comm_s=raw["pp"], ep_comm_s=raw["ep"],
        exposed_comm_s=exposed, step_s=step_s, tokens_per_second_per_device=per_device,
        mfu=flops_per_token(model, causal, count_router=count_router) * per_device / peak,
        hfu=hw_per_token * per_device / peak,
        static_bytes=memory.static_bytes, activation_bytes=memory.activation_bytes,
        memory_bytes=memory.total_bytes, memory_limit_bytes=memory.limit_bytes,
        fits=memory.fits, assumptions=assumptions, cp_comm_s=raw["cp"],
        recompute_s=parts["recompute"], optimizer_s=parts["optimizer"], parts=parts,
        rates=priced)


def _rates(rates: Rates | None, behaviour: Behaviour | str | None, efficiency: float | None,
           comm_efficiency: float | None, overhead_s: float | None,
           overlaps: dict[str, float | None], gradient_bytes: float | None,
           collective_algorithm: str | None) -> Rates:
    """``rates`` (default ``Rates()``), then ``behaviour``'s options, then the terms given."""
    if rates is None:
        rates = Rates()
    elif not isinstance(rates, Rates):
        raise InvalidArgumentError("rates", "must be a perfkit.calc.rates.Rates",
                                   type(rates).__name__)
    if behaviour is not None:
        rates = rates.replace(**Behaviour.of(behaviour).overrides())
    given = {g: check_fraction(f"{g}_overlap", v) for g, v in overlaps.items() if v is not None}
    rates = rates.with_terms(efficiency, comm_efficiency, given or None, overhead_s)
    if gradient_bytes is not None:
        rates = rates.replace(gradient_bytes=gradient_bytes)
    if collective_algorithm is not None:
        rates = rates.replace(collective_algorithm=collective_algorithm)
    return rates


def _compute_words(rates: Rates, hardware: Hardware, dtype: str | None, peak: float) -> str:
    """How the matrix products were priced, in words."""
    where = f"the {hardware.name} {dtype or hardware.default_dtype} peak " \
            f"({peak / 1e12:.1f} TFLOP/s)"
    if rates.gemm_model == "size" and rates.gemm_half_flops == 0 \
            and rates.gemm_memory == "max" and rates.attention_implementation == "gemm":
        e_max = rates.resolved(hardware.name, dtype).gemm_efficiency
        return f"every matrix product at {share_text(e_max, 0)} of {where}"
    return (f"GEMMs by shape or size ({rates.gemm_model}), attention on the "
            f"{rates.attention_implementation} kernel's curve, memory-bound kernels at "
            f"{share_text(rates.memory_efficiency, 0)} of the memory bandwidth; peak: {where}")


def _link_words(rates: Rates, parallel: ParallelConfig, hardware: Hardware) -> str:
    """The links, the placement, the overlap and its contention, in words."""
    shown = [g for g in GROUPS if g != "cp" or parallel.cp > 1]
    slowed = contention_share(rates.overlap_contention, hardware.name)
    tiers = {rates.intra_node_efficiency, rates.inter_node_efficiency}
    own = "".join(f", {g} {share_text(v, 0)}" for g, v in rates.link_efficiency.items()
                  if len(tiers) > 1 or v not in tiers)  # a group's own (calibrated) share
    return (f"links at {share_text(rates.intra_node_efficiency, 0)} of nominal inside a node, "
            f"{share_text(rates.inter_node_efficiency, 0)} across{own} "
            f"({rates.collective_algorithm}); "
            f"ranks placed {parallel.rank_order}; overlap "
            + ", ".join(f"{g} {share_text(rates.overlap[g], 0)}" for g in shown)
            + f"; hidden traffic slows the compute beside it by {share_text(slowed)} "
              "(perfkit.calc.contention)")
