"""What a system achieves: the rates and behaviours the calibrated step model runs at.

:class:`Rates` holds every number :func:`perfkit.calc.timing.step_times` needs besides the
model, the layout and the hardware's nominal figures: how close matrix multiplies come to
the peak as a function of their size, how much of the memory bandwidth memory-bound
kernels get, how much of each link's bandwidth each communication group gets, and what
the framework does (which recomputation it runs, whether it redoes all-gathers under
sequence parallelism, how it overlaps the gradient reduction). ``perfkit.plan.calibrate``
fits it to a measured run; its defaults are documented published figures, not fitted to
the validation data.

The size curves
---------------
A kernel of work ``W`` (FLOPs or bytes) on a unit of nominal rate ``R`` lasts

    ``t = (W + W½) / (e_max · R)``,

i.e. it reaches the share ``e(W) = e_max · W / (W + W½)`` of the nominal rate: a fixed
cost per call (``W½ / (e_max·R)``: launch, tile and wave quantisation, pipeline fill)
plus the work at the asymptotic efficiency ``e_max``. It is the hyperbola that fits
Calculon's A100 efficiency tables (calculon-ai/calculon ``systems/a100_80g.json``:
matrix ``gflops_efficiency`` 0.6 at 1 GFLOP, 0.9 at 16, 0.95 at 128 — ``e_max`` 0.95 and
``W½`` 0.58 GFLOP reproduce them within 0.03; memory ``MB_efficiency`` 0.75 at 10 MB,
0.9 at 100 MB — ``e_max`` 0.9, ``W½`` 2 MB). Wider models run larger GEMMs and so get
closer to ``e_max``: the rise of achieved throughput with model width that Narayanan et
al. 2021 (Table 1) report comes out of this curve and of the memory-bound share of a
layer, which shrinks as ``1/h``. The GEMM curve's ``e_max`` defaults, per device, to the
share its best measured matmul runs at where one is published (0.869 on an A100 SXM:
:mod:`perfkit.calc.gemm_ceiling`), the shape (``W½``) staying Calculon's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import pandas as pd

from ..errors import InvalidArgumentError, check_choice, check_fraction, check_non_negative
from .attention_rate import ATTENTION_IMPLEMENTATIONS
from .elementwise import ELEMENTWISE_KERNELS
from .gemm_ceiling import GEMM_EFFICIENCY_DEFAULT, size_curve_e_max
from .gemm_rate import GEMM_MODELS
from .grad_accumulation import GRAD_ACCUMULATION

__all__ = ["Rates", "GROUPS", "RECOMPUTE_STYLES", "RECOMPUTE_STYLE_MIN_SHARE",
           "GEMM_EFFICIENCY_DEFAULT", "GEMM_SURFACE_SCALE_MAX", "size_efficiency"]

#: The largest ``Rates.gemm_surface_scale``: each shape's efficiency on a surface is capped
#: at 1 anyway (:meth:`perfkit.calc.gemm_rate.GemmSurface.seconds`).
GEMM_SURFACE_SCALE_MAX = 2.0

#: Communication groups with their own link efficiency and overlap.
GROUPS = ("tp", "dp", "pp", "ep", "cp")
#: What a full recompute reruns: ``"all"`` the whole forward of the layer (reentrant
#: PyTorch checkpointing, Megatron-LM: Narayanan et al. 2021 eq. (3) counts four forward
#: passes), ``"needed"`` only what the backward reads (graph-mode recompute, MindSpore /
#: MindFormers: the MLP's output projection, its tensor-parallel reduction and the final
#: residual add feed nothing the layer's backward needs and are pruned — the guide's
#: "full recomputation costs 20 % to 25 % more computation"; non-reentrant
#: ``torch.utils.checkpoint`` too, which stops once the backward's tensors are back: the
#: H100 Llama's traces, docs/planner.md).
RECOMPUTE_STYLES = ("all", "needed")
#: From this share of its layers fully recomputed, a calibrating run's matrix products
#: show which style it ran (:func:`perfkit.plan.calibrate`); below it the style is the
#: rates' default, and :func:`perfkit.plan.predict` says what the other would give.
RECOMPUTE_STYLE_MIN_SHARE = 0.25

_DEFAULT_LINK: Mapping[str, float] = MappingProxyType({})
_DEFAULT_OVERLAP = MappingProxyType({g: 0.0 for g in GROUPS})


def size_efficiency(work: float, e_max: float, half: float) -> float:
    """``e_max · W / (W + W½)``: the share of the nominal rate a call of ``work`` gets."""
    return e_max * work / (work + half) if work > 0 else 0.0


@dataclass(frozen=True)
class Rates:
    """Achieved rates and framework behaviour for :func:`perfkit.calc.timing.step_times`.

    Parameters
    ----------
    gemm_efficiency : float, optional
        On the size curve, ``e_max`` of matrix multiplies: the share of the peak FLOP/s a
        very large GEMM gets. Default None: the device's own, resolved where the rates
        meet a device (:meth:`resolved`): the share its best measured matmul runs at
        where one is published (:func:`perfkit.calc.gemm_ceiling.size_curve_e_max`: 0.869
        on an A100 SXM, 0.776 on a B200, 0.514 on an MI300X, ...), else 0.95 (Calculon's
        A100 table, see the module docstring). Unused on a measured surface
        (``gemm_model``), whose rates ``gemm_surface_scale`` moves.
    gemm_half_flops : float
        ``W½`` of the GEMM size curve, FLOPs per call (default 0.58e9); unused on a
        measured surface, which has its fixed time per call and its halves per dimension.
    gemm_model : {"auto", "shape", "size"}
        How a GEMM call is timed. ``"shape"``: on the measured surface of the hardware's
        family by the call's (M, N, K) and type (:mod:`perfkit.calc.gemm_rate`: Hopper's
        bf16 and FP8 surfaces, measured on an H100 for perfkit); ``"size"``: on the size
        curve by its FLOPs (the module docstring). ``"auto"`` (default): ``"shape"`` where
        perfkit has a measured surface for the hardware (H100, H800, H200, GH200; V100
        from a published measurement),
        ``"size"`` elsewhere. A profile's operator fit (:func:`perfkit.plan.calibrate`)
        sets ``"size"``: the curve it fits to the run's own GEMM kernels.
    gemm_surface_scale : float
        On a measured surface, every shape's rate times this (default 1: as measured; a
        step-time calibration's factor moves it as it moves ``gemm_efficiency``), each
        shape's efficiency capped at 1; at most :data:`GEMM_SURFACE_SCALE_MAX`.
    attention_efficiency : float
        Calibration multiplier on the fused attention kernels' published efficiency
        (:mod:`perfkit.calc.attention_rate`; 1, the default: the published curve). With
        ``attention_implementation="gemm"``: relative to a GEMM of the same FLOPs.
    attention_implementation : {"auto", "flash2", "flash3", "cudnn", "flash1", \
"flash-triton", "gemm"}
        Which fused attention kernel times the attention core (with
        ``ActivationModel.flash_attention``; unfused attention keeps its GEMMs and
        softmax), each on its published curve by sequence length, head dimension, mask
        and pass (:mod:`perfkit.calc.attention_rate`): ``"auto"`` (default) cuDNN's on
        Hopper, where PyTorch SDPA runs it, FlashAttention-2's elsewhere (Ascend's
        FlashAttentionScore shares its curve); ``"flash2"``, ``"flash3"``, ``"cudnn"``
        (Hopper figures; off Hopper the last two fall back to FlashAttention-2);
        ``"flash1"``, ``"flash-triton"`` (FlashAttention 1 and FlashAttention in Triton:
        FlashAttention-2's curve slowed by the ratios its paper measured,
        :data:`~perfkit.calc.attention_rate.RELATIVE_TO_FLASH2`);
        ``"gemm"``: the former pricing, a GEMM of the same FLOPs on the GEMM size curve.
    memory_efficiency : float
        ``e_max`` of memory-bound kernels, share of the HBM bandwidth (default 0.9).
    memory_half_bytes : float
        ``W½`` of the memory size curve, bytes per call (default 2e6).
    elementwise_efficiency : float or None
        ``e_max`` of the model's memory-bound kernels alone (element-wise, norm, rotary,
        activation, loss), when it differs from ``memory_efficiency``, which then still
        times the GEMMs' byte term and the optimizer. None (default): they run at
        ``memory_efficiency``. A profile's closed fit (:func:`perfkit.plan.calibrate`) sets
        it: the run's unfused kernels the model does not count (the H100 Llama's
        RMSNorm and rotary: 40 ms of its 81 ms of computing where the model counts 14)
        are folded into the model's memory-bound kernels, which split with the layout as
        they do, not into the GEMMs.
    backward_elementwise_efficiency : float or None
        ``e_max`` of the backward pass's memory-bound kernels (the layers' gradients of
        the norms, residual adds, rotary and activation, the embedding's and the loss's
        gradients), when it differs from the forward's (``vector_efficiency``), which then
        still times the forward's, and so a recomputed forward's. None (default): the
        backward's run at ``vector_efficiency``. A profile's fit closed by kernel kind
        and pass (:func:`perfkit.plan.calibrate`, ``closing="kernels"``) sets both from
        the profile's own forward and backward kernel time.
    link_efficiency : mapping of group to float
        Share of the nominal link bandwidth each group's collectives get (``tp``, ``dp``,
        ``pp``, ``ep``, ``cp``), as calibrated; a group not in it runs at
        ``intra_node_efficiency`` or ``inter_node_efficiency`` by where its ranks are.
    intra_node_efficiency, inter_node_efficiency : float
        Default link efficiencies inside a node (NVLink, HCCS) and across nodes
        (InfiniBand, RoCE): 0.65 and 0.9, Calculon's A100 network figures.
    link_latency_s : float
        Fixed time per collective or message (default 10 µs, Calculon's NVLink figure).
    overlap : mapping of group to float
        Share of each group's communication hidden under compute beyond what the model
        schedules itself (default 0; the data-parallel reduction's overlap is
        ``dp_buckets``', context parallelism overlaps the attention core by design).
    dp_buckets : int
        Buckets of the gradient reduction: all but the last overlap the last
        micro-batch's backward (PyTorch DDP / Megatron ``--overlap-grad-reduce``,
        MindSpore's fused gradient groups with ``enable_grad_comm_opt``). 1: the
        reduction starts after the backward (Megatron-LM 2021/22 and DeepSpeed pipeline
        engine runs; MindSpore by default, whose overlap of the dx computation with
        data-parallel gradient communication is that opt-in option, default False, and
        only without pipeline stages). Default 1.
    gradient_bytes : float or None
        Bytes per gradient element in the data-parallel reduction (2: bf16/fp16; 4: fp32
        main gradients). None (default): by the job's static-memory scheme and dtype,
        :func:`perfkit.calc.memory.scheme_gradient_bytes` (4 under the Megatron-LM
        scheme, whose fp32 gradients Megatron-LM reduces in fp32 in a bf16 run; 2 in an
        fp16 run and under the other schemes), as
        :func:`perfkit.calc.estimate_step` does.
    optimizer_bytes_per_param : float
        Memory traffic of the optimizer step per parameter the device updates (default
        24: Adam reads and writes two fp32 moments, reads the gradient and reads and
        writes the 16-bit weight; the simulator's ``ApplyAdamW``).
    grad_accumulation : {"fused", "fp32-copy", "autograd"}
        Where the micro-batches' gradients are added up (:mod:`perfkit.calc.
        grad_accumulation`): inside the weight-gradient GEMMs (``"fused"``, default:
        Megatron-LM), in DeepSpeed's bf16 optimizer (18 bytes per parameter per
        micro-batch), or by autograd into ``.grad`` (3 gradient sizes per parameter per
        micro-batch after the first; DDP, FSDP). Charged to the ``optimizer`` part.
    recompute_style : {"all", "needed"}
        See :data:`RECOMPUTE_STYLES`.
    sp_ag_redo : bool
        Under sequence parallelism the backward all-gathers each column-parallel input
        again instead of keeping it gathered (Megatron-LM's implementation; Calculon's
        ``seq_par_ag_redo``, set for Korthikanti et al.'s Table 5 runs). Default True.
    overhead_s : float
        Fixed time per step outside the layers (host, data loading, logging).
    kernel_gap_s : float
        Idle time between consecutive kernels of a rank (launch gaps), per kernel.
    layer_overhead_s : float
        Fixed host time per layer per micro-batch (hooks, module dispatch); default 0.
    tp_comm_overlap : bool
        Tensor-parallel collectives run under the layer's compute (Transformer Engine
        userbuffers, Megatron ``--tp-comm-overlap``): only the excess shows. Default False.
    param_gather_overlap : bool
        A sharded optimizer's all-gather of the updated weights runs under the next
        step's first forward (Megatron ``--overlap-param-gather``). Default False.
    param_gather_bytes : float or None
        Bytes per parameter that the all-gather of sharded weights moves. None (default):
        the run's weights, 4 bytes in an fp32 or tf32 run (no mixed precision), 2 (16-bit
        weights) otherwise. Set 1 for torchao's float8 all-gather under FSDP2, which casts
        each weight shard to float8 before gathering it (torchtitan
        ``[float8] enable_fsdp_float8_all_gather``, on in its Llama 3.1 405B recipe,
        ``train_configs/llama3_405b.toml`` at ``3faaa1a0dee6``).
    tp_gather_bytes : float or None
        Bytes per element of the tensor-parallel all-gathers under sequence parallelism
        (the column-parallel GEMMs' inputs forward, the row-parallel outputs' gradients
        backward). None (default): the run's activations' (2, or 4 in an fp32 run). Set 1
        for torchao's float8 tensor parallelism (``Float8ColwiseParallel``,
        ``Float8RowwiseParallel``, ``PrepareFloat8ModuleInput``: each input is cast to
        float8 before its all-gather, each output's gradient before the all-gather of its
        backward), which torchtitan uses with ``float8.enable_float8_linear`` and tensor
        parallelism (``parallelize_llama.py`` at ``3faaa1a0dee6`` and ``d4c86e3758a8``);
        the reduce-scatters stay 16-bit.
    dp_bucket_params : float
        Parameters per gradient bucket; > 0 makes the buckets ``max(dp_buckets,
        ⌈parameters / dp_bucket_params⌉)`` (Megatron's 40e6, DDP's 25 MB). Default 0.
    dp_bucket_per_layer : bool
        One gradient bucket per layer of the stage (FSDP's per-layer wrapping).
    elementwise_kernels : {"library", "eager", "amp", "compiled"}
        How the memory-bound kernels between a layer's GEMMs run
        (:mod:`perfkit.calc.elementwise`, each kernel's bytes with its source):
        ``"library"`` (default) as fused library kernels (Megatron-LM, Transformer Engine,
        MindSpore: one kernel per norm, the counts the studies were built on);
        ``"eager"`` as PyTorch runs a Llama block's reference code operator by operator
        on 16-bit weights (RMSNorm in fp32 in six kernels of 36 bytes per element, rotary
        in five per tensor); ``"amp"`` the same under ``torch.autocast`` with fp32
        weights (every weight cast to 16 bits before its GEMM and its gradient back, the
        residual stream and the norms in fp32); ``"compiled"`` fused by
        ``torch.compile`` (TorchInductor: each chain one kernel reading its inputs and
        writing its outputs once; torchtitan's ``compile`` option compiles each block).
        The embedding, the output head and the loss are counted the same way in all of
        them (``"amp"`` adds the output layer's weight cast). :func:`perfkit.plan.
        calibrate` on a profile, given no rates, reads it from the profile's operators.
    overlap_contention : float or None
        Share by which compute slows while a collective runs under it (its kernels take
        multiprocessors and memory bandwidth): every second of traffic the model hides
        under compute adds this many seconds to the collective's part. None (default):
        the device's (:func:`perfkit.calc.contention.overlap_contention`: 0.189 on GPUs,
        Lee et al. 2025; 0 on Ascend). 0 turns it off.
    collective_algorithm : {"hierarchical", "flat"}
        How a collective whose group spans nodes with several ranks in each is priced
        (:mod:`perfkit.calc.topology`): reduce-scatter inside, the shard across over all
        the node's NICs, all-gather inside (default; NCCL/HCCL's hierarchical and tree
        algorithms), or one flat ring with every byte at a device's NIC share.
        :func:`perfkit.plan.calibrate` reads which a profile ran from its transports.
    """

    gemm_efficiency: float | None = None
    gemm_half_flops: float = 0.58e9
    gemm_model: str = "auto"
    gemm_surface_scale: float = 1.0
    attention_efficiency: float = 1.0
    attention_implementation: str = "auto"
    memory_efficiency: float = 0.9
    memory_half_bytes: float = 2e6
    elementwise_efficiency: float | None = None
    gemm_memory: str = "sum"
    link_efficiency: Mapping[str, float] = field(default_factory=lambda: _DEFAULT_LINK,
                                                 hash=False)
    intra_node_efficiency: float = 0.65
    inter_node_efficiency: float = 0.9
    link_latency_s: float = 10e-6
    overlap: Mapping[str, float] = field(default_factory=lambda: _DEFAULT_OVERLAP, hash=False)
    dp_buckets: int = 1
    gradient_bytes: float | None = None
    optimizer_bytes_per_param: float = 24.0
    grad_accumulation: str = "fused"
    recompute_style: str = "all"
    sp_ag_redo: bool = True
    overhead_s: float = 0.0
    kernel_gap_s: float = 0.0
    backward_elementwise_efficiency: float | None = None
    collective_algorithm: str = "hierarchical"
    layer_overhead_s: float = 0.0
    tp_comm_overlap: bool = False
    param_gather_overlap: bool = False
    param_gather_bytes: float | None = None
    tp_gather_bytes: float | None = None
    dp_bucket_params: float = 0.0
    dp_bucket_per_layer: bool = False
    elementwise_kernels: str = "library"
    overlap_contention: float | None = None

    def __post_init__(self) -> None:
        for name in ("memory_efficiency", "intra_node_efficiency", "inter_node_efficiency"):
            check_fraction(name, getattr(self, name), allow_zero=False)
        if self.gemm_efficiency is not None:
            check_fraction("gemm_efficiency", self.gemm_efficiency, allow_zero=False)
        if self.elementwise_efficiency is not None:
            check_fraction("elementwise_efficiency", self.elementwise_efficiency,
                           allow_zero=False)
        if self.backward_elementwise_efficiency is not None:
            check_fraction("backward_elementwise_efficiency",
                           self.backward_elementwise_efficiency, allow_zero=False)
        for name in ("gemm_half_flops", "memory_half_bytes", "link_latency_s",
                     "optimizer_bytes_per_param", "overhead_s", "kernel_gap_s",
                     "layer_overhead_s", "dp_bucket_params"):
            check_non_negative(name, getattr(self, name))
        if not 0 < self.attention_efficiency <= 2:
            raise InvalidArgumentError("attention_efficiency", "must be in (0, 2]",
                                       self.attention_efficiency)
        if self.overlap_contention is not None:
            check_fraction("overlap_contention", self.overlap_contention, allow_zero=True)
        if self.tp_gather_bytes is not None and not self.tp_gather_bytes > 0:
            raise InvalidArgumentError("tp_gather_bytes", "must be > 0", self.tp_gather_bytes)
        if self.param_gather_bytes is not None and not self.param_gather_bytes > 0:
            raise InvalidArgumentError("param_gather_bytes", "must be > 0",
                                       self.param_gather_bytes)
        if self.gradient_bytes is not None and not self.gradient_bytes > 0:
            raise InvalidArgumentError("gradient_bytes", "must be > 0", self.gradient_bytes)
        check_choice("recompute_style", self.recompute_style, RECOMPUTE_STYLES)
        check_choice("attention_implementation", self.attention_implementation,
                     ATTENTION_IMPLEMENTATIONS)
        check_choice("gemm_memory", self.gemm_memory, ("sum", "max"))
        check_choice("elementwise_kernels", self.elementwise_kernels, ELEMENTWISE_KERNELS)
        check_choice("gemm_model", self.gemm_model, GEMM_MODELS)
        check_choice("grad_accumulation", self.grad_accumulation, GRAD_ACCUMULATION)
        if not 0 < self.gemm_surface_scale <= GEMM_SURFACE_SCALE_MAX:
            raise InvalidArgumentError("gemm_surface_scale",
                                       f"must be in (0, {GEMM_SURFACE_SCALE_MAX:g}]",
                                       self.gemm_surface_scale)
        check_choice("collective_algorithm", self.collective_algorithm,
                     ("hierarchical", "flat"))
        if isinstance(self.dp_buckets, bool) or not isinstance(self.dp_buckets, int) \
                or self.dp_buckets < 1:
            raise InvalidArgumentError("dp_buckets", "must be a whole number >= 1",
                                       self.dp_buckets)
        object.__setattr__(self, "link_efficiency",
                           _groups("link_efficiency", self.link_efficiency, _DEFAULT_LINK,
                                   allow_zero=False))
        object.__setattr__(self, "overlap",
                           _groups("overlap", self.overlap, _DEFAULT_OVERLAP, allow_zero=True))

    @property
    def vector_efficiency(self) -> float:
        """``e_max`` the memory-bound kernels run at: ``elementwise_efficiency`` where set,
        else ``memory_efficiency``."""
        if self.elementwise_efficiency is not None:
            return self.elementwise_efficiency
        return self.memory_efficiency

    @property
    def backward_vector_efficiency(self) -> float:
        """``e_max`` the backward pass's memory-bound kernels run at:
        ``backward_elementwise_efficiency`` where set, else :attr:`vector_efficiency`."""
        if self.backward_elementwise_efficiency is not None:
            return self.backward_elementwise_efficiency
        return self.vector_efficiency

    def backward_rates(self) -> Rates:
        """These rates with the memory-bound kernels at the backward's efficiency
        (:attr:`backward_vector_efficiency`): what times a backward pass's kernels."""
        if self.backward_elementwise_efficiency is None:
            return self
        return self.replace(elementwise_efficiency=self.backward_elementwise_efficiency)

    def resolved(self, hardware_name: str | None, dtype: str | None = None) -> Rates:
        """These rates with the device's own defaults in place of the unset ones: the size
        curve's ``gemm_efficiency`` (None: :func:`perfkit.calc.gemm_ceiling.
        size_curve_e_max` for ``hardware_name`` and ``dtype``). The rates themselves when
        nothing is unset."""
        if self.gemm_efficiency is not None:
            return self
        return self.replace(gemm_efficiency=size_curve_e_max(hardware_name, dtype))

    def link(self, group: str, intra: bool) -> float:
        """Link efficiency of ``group``: calibrated, else the tier's default."""
        value = self.link_efficiency.get(group)
        if value is not None:
            return value
        return self.intra_node_efficiency if intra else self.inter_node_efficiency

    def replace(self, **changes: Any) -> Rates:
        """A copy with some fields changed; ``link_efficiency``/``overlap`` may be partial
        (a group set to None goes back to its tier's default)."""
        for name in ("link_efficiency", "overlap"):
            if isinstance(changes.get(name), Mapping):
                changes[name] = {**getattr(self, name), **dict(changes[name])}
        return dataclasses.replace(self, **changes)

    def scaled(self, factor: float) -> Rates:
        """Every compute rate (GEMM, attention, memory, the memory-bound kernels' own and
        the backward's where set) times ``factor``, capped at 1 (attention's multiplier
        at 2). Fused attention on a published curve (``attention_implementation`` other
        than ``"gemm"``) takes the factor on its ``attention_efficiency``; under ``"gemm"``
        it is a share of the GEMM efficiency and moves with it. A step time cannot tell
        the attention kernels from the rest, so one factor moves all: leaving attention on
        its curve and putting the whole factor on the other kernels made the held-out
        validation's calibrated-in-group error 116 % (mean) against 27.6 % this way
        (docs/planner.md, "Attention by shape")."""
        own, back = self.elementwise_efficiency, self.backward_elementwise_efficiency
        if self.gemm_efficiency is None:
            raise InvalidArgumentError(
                "gemm_efficiency", "is the device's default until the rates meet a device: "
                "scale rates.resolved(hardware.name, dtype)", None)
        return self.replace(gemm_efficiency=min(1.0, self.gemm_efficiency * factor),
                            gemm_surface_scale=min(GEMM_SURFACE_SCALE_MAX,
                                                   self.gemm_surface_scale * factor),
                            memory_efficiency=min(1.0, self.memory_efficiency * factor),
                            elementwise_efficiency=None if own is None
                            else min(1.0, own * factor),
                            backward_elementwise_efficiency=None if back is None
                            else min(1.0, back * factor),
                            attention_efficiency=min(2.0, self.attention_efficiency * (
                                factor if self.attention_implementation != "gemm" else 1.0)))

    def with_terms(self, efficiency: float | None = None,
                   comm_efficiency: float | None = None,
                   overlap: Mapping[str, float] | None = None,
                   overhead_s: float | None = None) -> Rates:
        """These rates with a what-if's round numbers in place of the fitted curves.

        Each term given replaces what it names; one left None keeps these rates'.

        Parameters
        ----------
        efficiency : float, optional
            Every matrix product at this share of the peak FLOP/s, whatever its size: the
            GEMMs on the size curve with no fixed cost per call (``gemm_model="size"``,
            ``gemm_half_flops=0``, ``gemm_efficiency=efficiency``) and on the roofline
            (``gemm_memory="max"``: at the memory rate only where their bytes outweigh
            their FLOPs), the attention core priced as GEMMs of its FLOPs at the same
            share (``attention_implementation="gemm"``). Memory-bound kernels keep their
            rate.
        comm_efficiency : float, optional
            Every link, inside a node and across, of every group at this share of its
            nominal bandwidth.
        overlap : mapping of group to float, optional
            Share of each group's communication hidden under compute (``{"dp": 0.5}``).
        overhead_s : float, optional
            Fixed time per step outside the layers.

        Examples
        --------
        >>> r = Rates().with_terms(efficiency=0.5, comm_efficiency=0.8)
        >>> r.gemm_model, r.gemm_efficiency, r.gemm_half_flops, r.link("dp", intra=False)
        ('size', 0.5, 0.0, 0.8)
        """
        changes: dict[str, Any] = {}
        if efficiency is not None:
            check_fraction("efficiency", efficiency, allow_zero=False)
            changes.update(gemm_model="size", gemm_efficiency=efficiency, gemm_half_flops=0.0,
                           gemm_memory="max", gemm_surface_scale=1.0,
                           attention_implementation="gemm", attention_efficiency=1.0)
        if comm_efficiency is not None:
            check_fraction("comm_efficiency", comm_efficiency, allow_zero=False)
            changes.update(intra_node_efficiency=comm_efficiency,
                           inter_node_efficiency=comm_efficiency,
                           link_efficiency=dict.fromkeys(GROUPS, comm_efficiency))
        if overlap is not None:
            changes["overlap"] = overlap
        if overhead_s is not None:
            changes["overhead_s"] = check_non_negative("overhead_s", overhead_s)
        return self.replace(**changes) if changes else self

    def to_frame(self) -> pd.DataFrame:
        """One row per rate: ``name``, ``value``."""
        rows = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Mapping):
                rows.extend((f"{f.name}[{k}]", v) for k, v in value.items())
            else:
                rows.append((f.name, value))
        return pd.DataFrame(rows, columns=["name", "value"])


def _groups(name: str, value: Mapping[str, float] | float, default: Mapping[str, float],
            allow_zero: bool) -> Mapping[str, float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = {g: float(value) for g in GROUPS}
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(name, "must be a mapping of group to share, e.g. "
                                   "{'tp': 0.7, 'dp': 0.9}", value)
    unknown = set(value) - set(GROUPS)
    if unknown:
        raise InvalidArgumentError(name, f"groups are {', '.join(GROUPS)}", sorted(unknown))
    out = dict(default)
    for g, v in value.items():
        if v is None:
            out.pop(g, None)
            continue
        out[g] = check_fraction(f"{name}[{g}]", v, allow_zero=allow_zero)
    return MappingProxyType(out)
