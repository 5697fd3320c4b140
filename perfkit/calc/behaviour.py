"""Framework behaviour as named options: what a training framework overlaps, and its fixed
costs, as :class:`~perfkit.calc.rates.Rates` fields for the step model.

``Behaviour.preset("megatron")`` is Megatron-LM's defaults, ``"nemo"`` NeMo 2.0's
performance recipes, ``"fsdp"`` PyTorch FSDP's, ``"ddp"`` PyTorch DDP's, ``"deepspeed"``
DeepSpeed's, ``"mindspore"`` MindSpore/MindFormers'. :meth:`Behaviour.overrides` gives the
Rates fields to pass as ``plan.predict(..., overrides=...)`` (or ``behaviour=``).

What each option does in the model (:mod:`perfkit.calc.timing`)
---------------------------------------------------------------
* ``tp_comm_overlap`` — Transformer Engine's userbuffers split the tensor-parallel
  all-gather / reduce-scatter into chunks under the GEMMs they feed
  (Megatron-LM ``--tp-comm-overlap``, default off; NeMo's performance recipes turn it on,
  e.g. NeMo-Framework-Launcher ``conf/training/llama/llama3_1_70b.yaml`` at
  ``1ab2c781b50b``: ``ub_tp_comm_overlap``, ``overlap_grad_sync`` and
  ``overlap_param_sync`` true):
  the tp traffic of a layer hides under the layer's compute, only the excess shows.
* ``overlap_grad_reduce`` with ``bucket_params`` — the gradient reduction runs in buckets
  of ``bucket_params`` parameters as the backward produces them; all but the last overlap
  the last micro-batch's backward. Megatron-core ``DistributedDataParallelConfig``:
  ``overlap_grad_reduce`` default False, bucket ``max(40M, 1M·dp)`` parameters (40e6
  here); PyTorch DDP: always on, ``bucket_cap_mb=25`` (6.25e6 fp32 gradients);
  DeepSpeed ZeRO ``overlap_comm`` default False, and its pipeline engine reduces after
  the last micro-batch; MindSpore ``enable_grad_comm_opt`` default False.
* ``overlap_param_gather`` — a distributed optimizer's all-gather of the updated weights
  runs under the next step's first forward (Megatron ``--overlap-param-gather``, default
  off; on in NeMo's recipes): only what that forward does not cover shows.
* ``fsdp_prefetch`` — FSDP gathers each wrapped layer's weights just in time;
  ``backward_prefetch=BACKWARD_PRE`` (the default) issues the next gather before the
  current layer's gradient computation, so gathers overlap compute. The step model has
  no per-layer ZeRO-3 gathers yet (see docs/planner.md); the flag sets the overlap of
  the data-parallel traffic to the prefetch's share (1 with prefetch, 0 without).
* ``sp_regather`` — under sequence parallelism, whether the backward all-gathers each
  column-parallel input again (``Rates.sp_ag_redo``). Megatron-LM's linear layers save
  only the sequence shard of their input and gather it again for the weight gradient
  (``LinearWithGradAccumulationAndAsyncCommunication``; Korthikanti et al. 2022, the
  runs of whose Table 5 Calculon models with ``seq_par_ag_redo``): on in the
  ``"megatron"``, ``"nemo"`` and ``"deepspeed"`` presets. PyTorch's own tensor
  parallelism gathers once, in ``PrepareModuleInput``, and autograd saves the gathered
  tensor that the column-parallel linears take (torchtitan's ``apply_tp``,
  ``parallelize_llama.py`` at ``d4c86e3758a8``): off in ``"ddp"`` and ``"fsdp"``.
  MindSpore's is not read here: on, the default. A fully recomputed layer gathers in its
  recomputed forward either way.
* ``elementwise_kernels`` — how the memory-bound kernels between a layer's GEMMs run
  (:mod:`perfkit.calc.elementwise`, each kernel's bytes with its source): ``"library"``,
  fused library kernels (Megatron-LM and NeMo through Transformer Engine and apex,
  DeepSpeed's Megatron fork, MindSpore's fused operators); ``"eager"``, PyTorch running
  the model's own code operator by operator on 16-bit weights (the ``"fsdp"`` preset:
  FSDP's ``MixedPrecision(param_dtype=torch.bfloat16)``, torchtitan's FSDP2 policy, hands
  the layers 16-bit weights; a Llama's RMSNorm in fp32 is six kernels, its rotary five
  per tensor); ``"amp"``, the same under ``torch.autocast`` on fp32 weights (the
  ``"ddp"`` preset: DDP replicates the model as it is, and PyTorch's automatic mixed
  precision recipe keeps it in fp32 and autocasts: each weight cast before its GEMM,
  the residual stream fp32); ``"compiled"``,
  ``torch.compile``'s fused kernels (TorchInductor fuses point-wise and reduction ops and
  calls the libraries for matrix products and attention; Ansel et al., "PyTorch 2",
  ASPLOS 2024): set it where a run compiles (torchtitan's ``compile`` option compiles
  each transformer block, ``parallelize_llama.py`` ``apply_compile`` at
  ``d4c86e3758a8``). A calibration keeps the count it was fitted with against a preset;
  a value you set yourself applies.
* Fixed costs: ``kernel_gap_s`` per kernel (the device idles between two kernels a host
  launches back to back), ``layer_overhead_s`` per layer per micro-batch (hooks, module
  dispatch), ``overhead_s`` per step (data loading, logging). PyTorch eager on CUDA: a
  2.9 µs kernel streamed without synchronisation takes 3.8 µs per kernel, i.e. ~1 µs of
  launch gap (NVIDIA Technical Blog, "Getting Started with CUDA Graphs", 2019): 1e-6.
  Graph-mode frameworks sinking the graph to the device (MindSpore GRAPH_MODE on
  Ascend) publish no per-kernel figure: 0 until a profile fits it
  (:func:`perfkit.plan.calibrate` fits ``kernel_gap_s`` from the profile's own free
  time).
* ``grad_accumulation`` — where the micro-batches' gradients are added up
  (:mod:`perfkit.calc.grad_accumulation`, each with its source): ``"fused"`` into the
  fp32 buffer by the weight-gradient GEMMs themselves (Megatron-LM's
  gradient-accumulation fusion, on by default; ``"megatron"``, ``"nemo"``, and
  ``"mindspore"``, whose accumulation is not read); ``"fp32-copy"``, DeepSpeed's bf16
  optimizer adding each micro-batch's 16-bit gradients into fp32 ones, 18 bytes per
  parameter per micro-batch (``"deepspeed"``; its fp16 runs accumulate as autograd
  does); ``"autograd"``, PyTorch adding each micro-batch after the first into ``.grad``
  (``"ddp"``, ``"fsdp"``).
* ``overlap_contention`` — the share by which compute slows while a collective it
  hides runs beside it (:mod:`perfkit.calc.contention`): None (every preset) keeps the
  device's default, 0.189 on GPUs (Lee et al. 2025, arXiv:2507.03114, the average over
  A100, H100, MI250 and MI210), 0 on Ascend; set it where you measured your own.
* ``memory_efficiency``, ``memory_half_bytes`` — how fast the run's memory-bound kernels
  go (:attr:`~perfkit.calc.rates.Rates.memory_efficiency`). None keeps the Rates
  default (0.9 of the HBM bandwidth with 2 MB of fixed bytes per call, the fit of
  Calculon's A100 table, which the studies of Megatron-LM's and MindSpore's fused
  kernels were built on). The eager PyTorch presets (``"fsdp"``, ``"ddp"``) say 0.63
  and 0: what the project's four recorded H100 profile sets of an eager PyTorch Llama
  measure when calibrated kernel kind by kind (``calibrate(profile, close=True,
  closing="kernels")`` on layout ``a`` of ``tests/data/kineto_llama_*_h100``: 0.631,
  0.631, 0.631, 0.643, no fixed bytes per call). On A100 the same value is assumed (no
  A100 profile was recorded). A calibration keeps its own fit: ``plan.predict(cal,
  behaviour=...)`` does not replace it with the preset's.
* ``attention_implementation`` — which fused attention kernel the attention core runs
  (:mod:`perfkit.calc.attention_rate`): ``"auto"`` (cuDNN's fused attention on Hopper,
  FlashAttention-2 elsewhere), ``"flash2"``, ``"flash3"``, ``"cudnn"``, the 2022-23
  kernels ``"flash1"`` and ``"flash-triton"`` (FlashAttention 1, FlashAttention in
  Triton: FlashAttention-2 slowed by its paper's measured ratios), or ``"gemm"`` (the
  former GEMM pricing). Presets say ``"auto"``: PyTorch's
  ``scaled_dot_product_attention`` (DDP, FSDP, torchtitan) runs cuDNN's kernels on H100
  (the bundled H100 profiles launch ``cudnn_generated_fort_native_sdpa_sm90_flash_*``)
  and FlashAttention-2 elsewhere; Transformer Engine (Megatron, NeMo) chooses between
  ``flash-attn`` and cuDNN by version and environment (``NVTE_FLASH_ATTN`` /
  ``NVTE_FUSED_ATTN``), which a preset cannot know; MindSpore's FlashAttentionScore
  shares FlashAttention-2's curve. Set ``"flash2"`` / ``"flash3"`` where a run calls the
  ``flash-attn`` package (``flash_fwd_kernel`` / ``flash_bwd`` kernels: LLM Foundry's
  ``attn_impl: flash``, Megatron-DeepSpeed's ``--use-flash-attn-v2``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError, check_choice, check_fraction, check_non_negative
from .attention_rate import ATTENTION_IMPLEMENTATIONS
from .elementwise import ELEMENTWISE_KERNELS
from .grad_accumulation import GRAD_ACCUMULATION

__all__ = ["Behaviour", "BEHAVIOUR_PRESETS", "EAGER_MEMORY_EFFICIENCY", "FITTED_FIELDS"]

#: PyTorch eager's launch gap per kernel on CUDA (module docstring: the CUDA Graphs blog).
CUDA_EAGER_GAP_S = 1e-6

#: Behaviour fields that a calibration fits, or fits its rates with (the element-wise
#: kernels' count): ``plan.predict(cal, behaviour=...)`` keeps the calibration's values
#: of these; ``overrides=`` still sets them.
FITTED_FIELDS = ("memory_efficiency", "memory_half_bytes", "elementwise_kernels")

#: Eager PyTorch's memory-bound kernels on H100, share of the HBM bandwidth (module
#: docstring: the project's recorded profiles, calibrated kernel kind by kind).
EAGER_MEMORY_EFFICIENCY = 0.63

#: Each framework's defaults (module docstring gives the source of every one).
BEHAVIOUR_PRESETS: dict[str, dict[str, Any]] = {
    "megatron": dict(tp_comm_overlap=False, overlap_grad_reduce=False, bucket_params=40e6,
                     overlap_param_gather=False, kernel_gap_s=CUDA_EAGER_GAP_S),
    "nemo": dict(tp_comm_overlap=True, overlap_grad_reduce=True, bucket_params=40e6,
                 overlap_param_gather=True, kernel_gap_s=CUDA_EAGER_GAP_S),
    "ddp": dict(overlap_grad_reduce=True, bucket_params=6.25e6,
                kernel_gap_s=CUDA_EAGER_GAP_S, memory_efficiency=EAGER_MEMORY_EFFICIENCY,
                memory_half_bytes=0.0, elementwise_kernels="amp", sp_regather=False,
                grad_accumulation="autograd"),
    "fsdp": dict(overlap_grad_reduce=True, bucket_params=0.0, fsdp_prefetch=True,
                 kernel_gap_s=CUDA_EAGER_GAP_S, memory_efficiency=EAGER_MEMORY_EFFICIENCY,
                 memory_half_bytes=0.0, elementwise_kernels="eager", sp_regather=False,
                 grad_accumulation="autograd"),
    "deepspeed": dict(overlap_grad_reduce=False, kernel_gap_s=CUDA_EAGER_GAP_S,
                      grad_accumulation="fp32-copy"),
    "mindspore": dict(overlap_grad_reduce=False, kernel_gap_s=0.0),
}


@dataclass(frozen=True)
class Behaviour:
    """A framework's overlap options and fixed costs (see the module docstring).

    Parameters
    ----------
    name : str
    tp_comm_overlap, overlap_grad_reduce, overlap_param_gather, fsdp_prefetch : bool
    sp_regather : bool
        Under sequence parallelism, the backward gathers each column-parallel input
        again (default True, Megatron-LM's; module docstring).
    elementwise_kernels : {"library", "eager", "amp", "compiled"}
        How a layer's memory-bound kernels run (module docstring).
    bucket_params : float
        Parameters per gradient bucket (0: one bucket per layer, FSDP's wrapping).
    kernel_gap_s, layer_overhead_s, overhead_s : float
        Fixed costs per kernel, per layer and micro-batch, per step (seconds).
    memory_efficiency, memory_half_bytes : float or None
        The memory-bound kernels' ``e_max`` and ``W½`` (module docstring); None keeps
        the Rates default.
    attention_implementation : {"auto", "flash2", "flash3", "cudnn", "flash1", \
"flash-triton", "gemm"}
        The fused attention kernel (module docstring); default ``"auto"``.
    overlap_contention : float or None
        Share by which compute slows beside the traffic it hides (module docstring);
        None: the device's default.
    grad_accumulation : {"fused", "fp32-copy", "autograd"}
        Where the micro-batches' gradients are added up (module docstring); default
        ``"fused"``.
    """

    name: str = "custom"
    tp_comm_overlap: bool = False
    overlap_grad_reduce: bool = False
    bucket_params: float = 40e6
    overlap_param_gather: bool = False
    fsdp_prefetch: bool = False
    sp_regather: bool = True
    elementwise_kernels: str = "library"
    kernel_gap_s: float = 0.0
    layer_overhead_s: float = 0.0
    overhead_s: float = 0.0
    attention_implementation: str = "auto"
    memory_efficiency: float | None = None
    memory_half_bytes: float | None = None
    overlap_contention: float | None = None
    grad_accumulation: str = "fused"

    def __post_init__(self) -> None:
        for name in ("bucket_params", "kernel_gap_s", "layer_overhead_s", "overhead_s"):
            check_non_negative(name, getattr(self, name))
        check_choice("grad_accumulation", self.grad_accumulation, GRAD_ACCUMULATION)
        check_choice("attention_implementation", self.attention_implementation,
                     ATTENTION_IMPLEMENTATIONS)
        check_choice("elementwise_kernels", self.elementwise_kernels, ELEMENTWISE_KERNELS)
        if self.memory_efficiency is not None:
            check_fraction("memory_efficiency", self.memory_efficiency, allow_zero=False)
        if self.memory_half_bytes is not None:
            check_non_negative("memory_half_bytes", self.memory_half_bytes)
        if self.overlap_contention is not None:
            check_fraction("overlap_contention", self.overlap_contention)

    @classmethod
    def presets(cls) -> list[str]:
        """Names accepted by :meth:`preset`."""
        return sorted(BEHAVIOUR_PRESETS)

    @classmethod
    def preset(cls, name: str, **changes: Any) -> Behaviour:
        """A framework's defaults, e.g. ``Behaviour.preset("nemo")``."""
        key = str(name).lower()
        if key not in BEHAVIOUR_PRESETS:
            raise InvalidArgumentError("name", f"unknown framework; known: "
                                       f"{', '.join(cls.presets())}", name)
        return cls(name=key, **{**BEHAVIOUR_PRESETS[key], **changes})

    @classmethod
    def of(cls, value: Behaviour | str) -> Behaviour:
        """``value`` itself, or the preset it names (the ``behaviour=`` argument of
        :func:`perfkit.plan.predict` and :func:`perfkit.calc.estimate_step`)."""
        chosen = cls.preset(value) if isinstance(value, str) else value
        if not isinstance(chosen, Behaviour):
            raise InvalidArgumentError("behaviour", "must be a Behaviour or a preset name",
                                       type(value).__name__)
        return chosen

    def replace(self, **changes: Any) -> Behaviour:
        """A copy with some options changed."""
        return dataclasses.replace(self, **changes)

    def overrides(self) -> dict[str, Any]:
        """The :class:`~perfkit.calc.rates.Rates` fields this behaviour sets.

        ``dp_bucket_params`` is ``bucket_params`` with ``overlap_grad_reduce`` (0 with
        FSDP's per-layer buckets: ``dp_buckets`` then counts one per layer, see
        :func:`perfkit.calc.timing.step_times`), else 0 and ``dp_buckets`` 1.
        """
        out: dict[str, Any] = {
            "tp_comm_overlap": self.tp_comm_overlap,
            "param_gather_overlap": self.overlap_param_gather,
            "kernel_gap_s": self.kernel_gap_s, "layer_overhead_s": self.layer_overhead_s,
            "overhead_s": self.overhead_s, "dp_buckets": 1, "dp_bucket_params": 0.0,
            "dp_bucket_per_layer": False,
            "attention_implementation": self.attention_implementation,
            "elementwise_kernels": self.elementwise_kernels,
            "sp_ag_redo": self.sp_regather,
            "grad_accumulation": self.grad_accumulation,
        }
        if self.overlap_grad_reduce:
            if self.bucket_params > 0:
                out["dp_bucket_params"] = self.bucket_params
            else:
                out["dp_bucket_per_layer"] = True
        if self.fsdp_prefetch:
            out["overlap"] = {"dp": 1.0}
        if self.overlap_contention is not None:
            out["overlap_contention"] = self.overlap_contention
        for name in FITTED_FIELDS:
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    def overrides_over(self, calibration: Any) -> dict[str, Any]:
        """:meth:`overrides` to apply over ``calibration``'s rates: all of them without a
        calibration (None); with one, those it does not fit (not :data:`FITTED_FIELDS`:
        the run's own memory-bound rate, and the kernel count it was fitted with, stand
        over a framework's generic ones)."""
        out = self.overrides()
        if calibration is None:
            return out
        return {k: v for k, v in out.items() if k not in FITTED_FIELDS}
