"""Static memory (weights, gradients, optimizer state) per device; activation memory.

Static memory, four published schemes (``scheme=``):

* ``"mindspore"`` — the seed guide: fp16 weights 2 B + fp32 Adam variance 4 B + fp32
  momentum 4 B = ``10N``; optimizer parallel of size ``t`` shards weights and optimizer
  state: ``10N/t``; with gradient accumulation or pipeline parallelism an unsharded fp16
  gradient adds ``2N``: ``10N/t + 2N``. No fp32 master copy.
* ``"megatron"`` — Megatron-LM ``theoretical_memory_usage.py``
  (``compute_weight_and_optimizer_memory``): 18 B/param in a bf16 run (bf16 weight 2 +
  fp32 gradient buffer 4 + fp32 main param 4 + Adam m 4 + v 4); the distributed optimizer
  shards the 12 optimizer bytes: ``6 + 12/d``. An fp16 run keeps an fp16 gradient buffer
  (2) and its optimizer copies it to fp32 main gradients (4 more, sharded with the
  optimizer): 20 B/param, ``4 + 16/d`` — Megatron-LM's own table
  (:mod:`perfkit.calc.precision` cites the source lines). The parameters are those of
  Megatron's "most loaded shard" — the first stage's ``1/pp`` of the block and the
  embedding, the output layer only when ``pp = 1`` (:mod:`perfkit.calc.megatron`);
  experts use the expert data-parallel size.
* ``"zero"`` — Rajbhandari et al. 2020 (ZeRO), Fig. 1: ``2 + 2 + K`` with ``K = 12``;
  stage 1 shards the optimizer, 2 also the gradients, 3 also the weights, over the
  data-parallel ranks (``dp × cp``; routed experts over the expert data-parallel ranks).
* ``"deepspeed"`` — what DeepSpeed's own estimators compute
  (``estimate_zero2_model_states_mem_needs``, ``estimate_zero3_model_states_mem_needs``,
  :mod:`perfkit.calc.deepspeed`): 2 B weights + 16 B gradients and optimizer state per
  parameter (``2 + 18/N`` for ZeRO-2, ``18/N`` for ZeRO-3), ZeRO-3's gather buffer of
  ``4 × largest layer``, optimizer and parameter offload to the CPU, and the host memory
  per node.

These are mixed-precision schemes (16-bit weights, fp32 optimizer state). A run whose
tensors are fp32 (``dtype="fp32"`` or ``"tf32"``) keeps 4-byte weights and gradients and
no second fp32 copy of the weights: 4 + 4 + 8 (Adam's two moments) bytes per parameter
under the first three schemes, sharded as they shard (``dtype=``). The gradients counted
are those the data-parallel reduction moves, whose element size ``gradient_bytes`` sets
when a profile or the caller knows it (:func:`perfkit.calc.precision.parameter_bytes`:
one rule for static memory and the reduction).

Activation memory lives in :mod:`perfkit.calc.activation` (re-exported here).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import pandas as pd

from ..errors import (
    InvalidArgumentError,
    check_choice,
    check_non_negative,
    check_positive,
    check_positive_int,
)
from ..specs import ModelSpec, ParallelConfig
from ._common import as_param_count
from .activation import (
    ActivationBreakdown,
    ActivationModel,
    activation_memory,
    activation_per_layer,
)
from .deepspeed import estimate_zero2_model_states, estimate_zero3_model_states
from .megatron import megatron_parameters_on_first_stage
from .precision import full_precision, parameter_bytes, scheme_gradient_bytes

__all__ = [
    "MemoryBreakdown",
    "ActivationBreakdown",
    "ActivationModel",
    "largest_layer_parameters",
    "parameters_per_device",
    "stage_parameters",
    "static_memory",
    "STATIC_SCHEMES",
    "STATIC_SCHEME_NAMES",
    "framework_static_scheme",
    "full_precision",
    "scheme_gradient_bytes",
    "zero_stage_scheme",
    "activation_per_layer",
    "activation_memory",
]

STATIC_SCHEMES = ("mindspore", "megatron", "zero", "deepspeed")
#: Each scheme's name as the figures label it ("static memory (Megatron-LM scheme)").
STATIC_SCHEME_NAMES = {"mindspore": "MindSpore scheme", "megatron": "Megatron-LM scheme",
                       "zero": "ZeRO scheme", "deepspeed": "DeepSpeed's estimator"}


def framework_static_scheme(framework: str | None) -> str:
    """The static-memory scheme of a job's framework, as :attr:`perfkit.Job.static_scheme`
    and :func:`perfkit.plan.calibrate` count it for a profile.

    ``"megatron"`` for PyTorch on any device: on a GPU, and on an Ascend NPU too
    (torch_npu), where LLMs train with Megatron-LM itself or MindSpeed (Megatron-LM on
    Ascend, the same optimizer): in a bf16 run bf16 weights, fp32 gradients, an fp32 main
    copy and Adam's two fp32 moments, 18 B/param (Megatron-LM ``theoretical_memory_usage.py``;
    20 in an fp16 run, 16 in an fp32 one: :mod:`perfkit.calc.precision`;
    docs/calculators.md compares the schemes). MindSpore's seed ``10N/t + 2N`` (fp16 weights and
    Adam moments, no fp32 main copy) describes MindSpore's own optimizer, which a
    torch_npu job does not run. ``"mindspore"`` for MindSpore, and for an unknown
    framework (the seed's scheme, as before).

    Parameters
    ----------
    framework : str or None
        The profile's framework (``profile.meta.framework``: ``"pytorch"``,
        ``"mindspore"``), any case.

    Returns
    -------
    str
        One of :data:`STATIC_SCHEMES`.
    """
    return "megatron" if "pytorch" in str(framework or "").lower() else "mindspore"


def _frame(rows: dict[str, float]) -> pd.DataFrame:
    frame = pd.DataFrame({"component": list(rows), "bytes": list(rows.values())})
    frame["GB"] = frame["bytes"] / 1e9
    frame["GiB"] = frame["bytes"] / 2**30
    return frame


@dataclass(frozen=True)
class MemoryBreakdown:
    """Static memory of the most loaded device, in bytes.

    Attributes: ``scheme``, ``parameters`` (held by the device before any optimizer
    sharding), ``weights_bytes``, ``gradients_bytes``, ``optimizer_bytes`` (what stays on
    the device), ``total_bytes`` (device total, buffer included), ``buffer_bytes``
    (ZeRO-3's gather buffer for the largest layer, ``"deepspeed"`` only) and
    ``host_bytes_per_node`` (CPU memory DeepSpeed's estimator asks of each node:
    offloaded states, or the model built on the host; 0 for the other schemes).
    """

    scheme: str
    parameters: float
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    total_bytes: float
    buffer_bytes: float = 0.0
    host_bytes_per_node: float = 0.0

    def to_frame(self) -> pd.DataFrame:
        """One row per component with bytes, GB (1e9) and GiB (2**30); the gather buffer
        and the host memory appear when the scheme has them."""
        rows = {"weights": self.weights_bytes, "gradients": self.gradients_bytes,
                "optimizer": self.optimizer_bytes}
        if self.buffer_bytes:
            rows["gather buffer"] = self.buffer_bytes
        rows["total"] = self.total_bytes
        if self.scheme == "deepspeed":
            rows["host per node"] = self.host_bytes_per_node
        return _frame(rows)


def stage_parameters(model: ModelSpec, parallel: ParallelConfig) -> list[dict[str, float]]:
    """Parameters each pipeline stage holds per device, split by how they are sharded.

    One dict per stage with ``dense`` (attention, dense MLPs and shared experts ``/tp``,
    norms and routers whole, the embedding ``V·h/tp`` and learned positions on the first
    stage, the final norm and the output head ``V·h/tp`` on the last — a copy of the
    embedding when it is tied and ``pp > 1``, as Megatron keeps), ``experts`` (routed
    experts ``/(ep·expert_tp)``) and ``total``. Layers go to stages as
    :meth:`~perfkit.ParallelConfig.layers_per_stage` splits them, the first
    ``first_dense_layers`` being dense.
    """
    b = model.parameter_breakdown()
    tp = parallel.tp
    experts_split = parallel.ep * parallel.expert_tp_size
    dense_part = {"moe": b["attention"] / tp + b["shared_mlp"] / tp + b["router"] + b["norms"],
                  "dense": b["attention"] / tp + b["dense_mlp"] / tp + b["norms"]}
    expert_part = {"moe": b["mlp"] / experts_split if model.is_moe else 0.0, "dense": 0.0}
    if not model.is_moe:
        dense_part["moe"] = b["attention"] / tp + b["mlp"] / tp + b["norms"]
    out, start = [], 0
    stages = parallel.layers_per_stage(model)
    for s, n in enumerate(stages):
        kinds = ["moe" if model.layer_is_moe(i) or not model.is_moe else "dense"
                 for i in range(start, start + n)]
        start += n
        dense = sum(dense_part[k] for k in kinds)
        experts = sum(expert_part[k] for k in kinds)
        if s == 0:
            dense += b["embedding"] / tp + b["position"]
        if s == len(stages) - 1:
            head = b["output"] if not model.tied_embeddings \
                else (b["embedding"] if parallel.pp > 1 else 0)
            dense += b["final_norm"] + head / tp
        out.append({"dense": dense, "experts": experts, "total": dense + experts})
    return out


def parameters_per_device(model: ModelSpec | float, parallel: ParallelConfig) -> float:
    """Parameters held by the most loaded device, before optimizer sharding.

    For a plain parameter count: ``N / (tp · pp)``. For a :class:`ModelSpec`: the layers
    of the fullest stage with their matrices split ``tp`` ways (routed experts
    ``ep × expert_tp`` ways), norms and router replicated; the first stage adds the
    vocabulary-parallel embedding (``V·h/tp``) and learned positions, the last stage the
    final norm and the output head (a copy of the embedding when tied and ``pp > 1``, as
    Megatron keeps). See :func:`stage_parameters` for every stage.
    """
    if not isinstance(model, ModelSpec):
        return as_param_count(model) / (parallel.tp * parallel.pp)
    if model.is_moe and model.first_dense_layers:
        return max(s["total"] for s in stage_parameters(model, parallel))
    b = model.parameter_breakdown()
    tp, ep = parallel.tp, parallel.ep
    experts = b["mlp"] / (parallel.expert_tp_size * ep) if model.is_moe else b["mlp"] / tp
    per_layer = b["attention"] / tp + experts + b["router"] + b["norms"]
    if b["shared_mlp"]:
        per_layer += b["shared_mlp"] / tp
    stages = parallel.layers_per_stage(model)
    first = stages[0] * per_layer + b["embedding"] / tp + b["position"]
    last_head = b["final_norm"] + (b["output"] if not model.tied_embeddings
                                   else (b["embedding"] if parallel.pp > 1 else 0)) / tp
    if parallel.pp == 1:
        return first + last_head
    return max(first, stages[-1] * per_layer + last_head)


def largest_layer_parameters(model: ModelSpec, tp: int = 1) -> float:
    """The largest single module's own parameters, DeepSpeed's ``largest_layer_params``.

    DeepSpeed's ``model_to_params`` takes the largest ``sum(p.numel() for p in
    module.parameters(recurse=False))`` over the modules of a live model: one Linear or
    the embedding in a Hugging Face transformer. perfkit takes the largest of the input
    embedding ``V·h``, the output head, one MLP matrix (dense, routed-expert or shared
    width, bias included), the router ``h·E`` and the attention projections, divided by
    ``tp`` (a tensor-parallel rank gathers only its shard).
    """
    h = model.hidden_size
    bias = 1 if model.bias == "all" else 0
    candidates = [model.vocab_size * h, h * (model.ffn_hidden_size + bias),
                  h * model.attention_width + (model.attention_width if model.bias != "none"
                                               else 0),
                  model.num_attention_heads * model.value_head_dim * h]
    if model.is_moe:
        candidates += [h * (model.moe_ffn_hidden_size + bias), h * model.num_experts,
                       h * (model.shared_ffn_hidden_size + bias)]
    if model.is_mla:
        candidates += [model.kv_lora_rank * model.num_attention_heads
                       * (model.head_dim + model.value_head_dim)]
        if model.q_lora_rank is not None:
            candidates.append(model.q_lora_rank * model.attention_width)
    return max(candidates) / check_positive_int("tp", tp)


def static_memory(model: ModelSpec | float, parallel: ParallelConfig,
                  scheme: str = "mindspore", weight_bytes: float | None = None,
                  gradient_bytes: float | None = None, optimizer_bytes: float | None = None,
                  gradient_buffer: bool | None = None, *, offload_optimizer: bool = False,
                  offload_params: bool = False, largest_layer_params: float | None = None,
                  zero_init: bool = True, additional_buffer_factor: float = 1.5,
                  devices_per_node: int = 8, dtype: str | None = None) -> MemoryBreakdown:
    """Weights + gradients + optimizer state of the most loaded device, in bytes.

    Parameters
    ----------
    model : ModelSpec or number of parameters
    parallel : ParallelConfig
        ``tp``/``pp`` (and ``ep``/``expert_tp`` for experts) split the parameters
        (:func:`parameters_per_device`); ``optimizer_shard`` is the sharding size for
        ``"mindspore"`` (the seed's ``t``) and ``"megatron"`` (distributed optimizer
        ``d``); ``zero_stage`` and ``dp × cp`` drive ``"zero"`` and ``"deepspeed"``.
    scheme : {"mindspore", "megatron", "zero", "deepspeed"}
        See the module docstring. Per parameter, defaults (weight, gradient, optimizer):
        mindspore 2/2/8, megatron 2/4/12 (a bf16 run; 2/2/16 for ``dtype="fp16"``), zero
        2/2/12, deepspeed 2/6/12 (DeepSpeed's "2 fp16 + 4 fp32" gradients and "4 fp32
        params + 8 Adam"); :func:`perfkit.calc.precision.parameter_bytes`.
    weight_bytes, optimizer_bytes : float, optional
        Override the scheme's bytes per parameter. Not with ``"deepspeed"``, whose bytes
        are those of DeepSpeed's estimator.
    gradient_bytes : float, optional
        The element size of the gradients the data-parallel reduction moves (e.g. 4 for
        fp32 gradients in MindSpore; what a profile's collectives record), which the
        gradient buffer keeps; under ``"megatron"`` a 16-bit buffer adds the optimizer's
        fp32 main gradients (4 bytes, sharded with the optimizer), as Megatron-LM does
        (:func:`perfkit.calc.precision.parameter_bytes`). Default
        :func:`~perfkit.calc.precision.scheme_gradient_bytes`. Not with ``"deepspeed"``.
    gradient_buffer : bool, optional
        ``"mindspore"`` only: whether a gradient buffer exists. Default: when
        ``num_micro_batches > 1`` (gradient accumulation) or ``pp > 1``, as the seed says.
    offload_optimizer, offload_params : bool
        ``"deepspeed"`` only: ``offload_optimizer: {device: cpu}`` and (ZeRO-3, together
        with the optimizer) ``offload_param: {device: cpu}``; the offloaded states move to
        ``host_bytes_per_node``.
    largest_layer_params : float, optional
        ``"deepspeed"``, ZeRO-3: the largest layer gathered at once (DeepSpeed's
        ``largest_layer_params``); default :func:`largest_layer_parameters` of the model
        ``/ tp``. Required when ``model`` is a plain number.
    zero_init, additional_buffer_factor : bool, float
        ``"deepspeed"``: as DeepSpeed's estimator (``zero.Init`` used; the 1.5 safety
        factor on host memory).
    devices_per_node : int
        ``"deepspeed"``: GPUs per node, for the host memory per node (a job smaller than
        a node is one node of ``world_size`` GPUs).
    dtype : str, optional
        The type the run trains in. ``"fp32"`` or ``"tf32"``: no mixed precision, so
        4 / 4 / 8 bytes per parameter (fp32 weights, which are the optimizer's copy, fp32
        gradients, Adam's two moments) instead of the scheme's defaults, sharded as the
        scheme shards them (the seed's ``10N/t + 2N`` becomes ``12N/t + 4N``). None
        (default) and the 16-bit types: the scheme's mixed-precision bytes (``"fp16"``
        under ``"megatron"``: Megatron-LM's fp16 gradient buffer and fp32 main gradients,
        20 bytes per parameter). The explicit ``*_bytes`` arguments still win. Not with
        ``"deepspeed"``, whose estimator counts mixed precision only.

    Examples
    --------
    The seed's 7B example, ``t = 8``: 70 GB without parallelism, 8.75 GB with optimizer
    parallel, 22.75 GB with optimizer parallel and gradient accumulation. Megatron-LM's
    table for the distributed optimizer over ``d`` ranks: ``6 + 12/d`` bytes per parameter
    (bf16), ``4 + 16/d`` (``dtype="fp16"``), ``8 + 8/d`` (``dtype="fp32"``).
    """
    check_choice("scheme", scheme, STATIC_SCHEMES)
    scheme, parallel = _with_zero_stage(scheme, parallel)
    fp32 = full_precision(dtype)
    if scheme == "deepspeed":
        if fp32:
            raise InvalidArgumentError("dtype", "DeepSpeed's estimator counts mixed-precision "
                                       "training only; use scheme='zero' for an fp32 run",
                                       dtype)
        if any(x is not None for x in (weight_bytes, gradient_bytes, optimizer_bytes)):
            given = [name for name, x in (("weight_bytes", weight_bytes),
                                          ("gradient_bytes", gradient_bytes),
                                          ("optimizer_bytes", optimizer_bytes))
                     if x is not None]
            raise InvalidArgumentError(given[0], "the 'deepspeed' scheme uses DeepSpeed's "
                                       "own bytes per parameter; use scheme='zero' to "
                                       "choose them")
        return _deepspeed(model, parallel, offload_optimizer, offload_params,
                          largest_layer_params, zero_init, additional_buffer_factor,
                          devices_per_node)
    if offload_optimizer or offload_params:
        raise InvalidArgumentError("offload_optimizer" if offload_optimizer else
                                   "offload_params", "CPU offload is modelled by "
                                   "scheme='deepspeed' (DeepSpeed's estimator)", True)
    per = parameter_bytes(scheme, dtype, gradient_bytes)
    w = per.weight if weight_bytes is None else check_non_negative("weight_bytes",
                                                                   weight_bytes)
    g = per.gradient
    o = per.optimizer if optimizer_bytes is None else check_non_negative("optimizer_bytes",
                                                                         optimizer_bytes)
    if scheme == "megatron":
        return _megatron(model, parallel, w, g, o)
    n = parameters_per_device(model, parallel)
    if scheme == "mindspore":
        t = parallel.optimizer_shard
        has_grad = (parallel.num_micro_batches > 1 or parallel.pp > 1) \
            if gradient_buffer is None else bool(gradient_buffer)
        grad_shard = t if parallel.zero_stage >= 2 else 1  # optimizer_level "level2"
        weights, grads, optim = w * n / t, (g * n / grad_shard if has_grad else 0.0), o * n / t
        return MemoryBreakdown(scheme, n, weights, grads, optim, weights + grads + optim)
    stage = parallel.zero_stage
    dense, experts = _dense_and_experts(model, parallel, n)
    nd, ne = _zero_groups(parallel)
    weights = w * (dense / (nd if stage >= 3 else 1) + experts / (ne if stage >= 3 else 1))
    grads = g * (dense / (nd if stage >= 2 else 1) + experts / (ne if stage >= 2 else 1))
    optim = o * (dense / (nd if stage >= 1 else 1) + experts / (ne if stage >= 1 else 1))
    return MemoryBreakdown(scheme, n, weights, grads, optim, weights + grads + optim)


def _with_zero_stage(scheme: str, parallel: ParallelConfig) -> tuple[str, ParallelConfig]:
    """The scheme and layout that count ``parallel.zero_stage`` under ``scheme``: under
    ``"megatron"`` stage 1 is its distributed optimizer (ZeRO-1: ``optimizer_shard`` =
    ``dp``) and stage 2 or 3 shards gradients (and weights) as ``"zero"`` counts them
    (:func:`zero_stage_scheme`); under ``"mindspore"`` they are its optimizer parallel's
    levels (``optimizer_shard`` = ``dp``, which shards the weights with the optimizer
    state; from stage 2 the gradient buffer too). The step model and this function said
    the same layout's memory apart (Llama2-7B, dp 8, ZeRO-2: 3.75 bytes per parameter in
    ``estimate_step``, 18 here), and stage 1 was dropped by both."""
    scheme = zero_stage_scheme(scheme, parallel.zero_stage)
    if parallel.zero_stage >= 1 and scheme in ("mindspore", "megatron") \
            and parallel.optimizer_shard == 1 and parallel.dp > 1:
        parallel = dataclasses.replace(parallel, optimizer_shard=parallel.dp)
    return scheme, parallel


def _zero_groups(parallel: ParallelConfig) -> tuple[float, float]:
    """Ranks that shard dense parameters (``dp × cp``) and routed experts (expert DP)."""
    return float(parallel.dp * parallel.cp), float(parallel.expert_dp)


def _dense_and_experts(model: ModelSpec | float, parallel: ParallelConfig,
                       n: float) -> tuple[float, float]:
    """Split the most loaded device's ``n`` parameters into non-expert and routed-expert."""
    if not isinstance(model, ModelSpec) or not model.is_moe:
        return n, 0.0
    stages = stage_parameters(model, parallel)
    fullest = max(stages, key=lambda s: s["total"])
    return n - fullest["experts"], fullest["experts"]


def _megatron(model: ModelSpec | float, parallel: ParallelConfig, w: float, g: float,
              o: float) -> MemoryBreakdown:
    """Megatron-LM ``compute_weight_and_optimizer_memory`` with per-component bytes."""
    if isinstance(model, ModelSpec):
        shard = megatron_parameters_on_first_stage(model, parallel)
        dense, experts = shard["tp_sharded"] + shard["replicated"], shard["expert_sharded"]
    else:
        dense, experts = as_param_count(model) / (parallel.tp * parallel.pp), 0.0
    shard = parallel.optimizer_shard
    # Megatron-core shards the optimizer over the data-parallel group *with* the context-
    # parallel ranks (get_megatron_optimizer: intra_dp_cp_group), which hold the same
    # weights: 6 + 12/(d·cp) bytes per parameter, not 12/d
    d = shard * parallel.cp if shard > 1 else 1
    # the distributed optimizer shards experts over Megatron's expert data-parallel size
    # world/(expert_tp·ep·pp); a partial optimizer_shard keeps the same share of it
    d_experts = 1.0 if shard == 1 else shard / parallel.dp * parallel.world_size / (
        parallel.expert_tp_size * parallel.ep * parallel.pp)
    n = dense + experts
    weights, grads = w * n, g * n
    optim = o * dense / d + (o * experts / d_experts if experts else 0.0)
    return MemoryBreakdown("megatron", n, weights, grads, optim, weights + grads + optim)


def _deepspeed(model: ModelSpec | float, parallel: ParallelConfig, offload_optimizer: bool,
               offload_params: bool, largest_layer_params: float | None, zero_init: bool,
               factor: float, devices_per_node: int) -> MemoryBreakdown:
    """DeepSpeed's ``estimate_zero{2,3}_model_states_mem_needs`` on the device's share.

    DeepSpeed's estimator describes pure data parallelism: ``P`` parameters sharded over
    ``N`` GPUs. perfkit applies it to the device's model-parallel shard
    (``P = parameters_per_device``) over the ranks that shard it (``N = dp × cp``; routed
    experts over the expert data-parallel ranks), ``min(devices_per_node, N)`` GPUs per
    node. On the device, per parameter (DeepSpeed's comments and ``memory.rst``)::

        ZeRO-2   weights 2           gradients 6/N (2 fp16 + 4 fp32)   optimizer 12/N
        ZeRO-3   weights 2/N         gradients 4/N (fp32)              optimizer 12/N
                 + gather buffer 4 × largest layer (its fp16 weights and gradients)

    ``offload_optimizer`` moves gradients and optimizer to the host, ``offload_params``
    (ZeRO-3) the weights too. With ``tp = pp = cp = 1`` and no experts the totals are
    DeepSpeed's own numbers.
    """
    stage = parallel.zero_stage
    if stage not in (2, 3):
        raise InvalidArgumentError("parallel.zero_stage", "DeepSpeed's estimators cover "
                                   "ZeRO-2 and ZeRO-3: set ParallelConfig(zero_stage=2 or "
                                   "3), or use scheme='zero' for stages 0 and 1", stage)
    if offload_params and (stage != 3 or not offload_optimizer):
        raise InvalidArgumentError("offload_params", "DeepSpeed offloads parameters only "
                                   "with ZeRO-3 and together with the optimizer "
                                   "(offload_optimizer=True)", offload_params)
    check_positive("additional_buffer_factor", factor)
    per_node = check_positive_int("devices_per_node", devices_per_node)
    n = parameters_per_device(model, parallel)
    largest = 0.0
    if stage == 3:
        if largest_layer_params is None:
            if not isinstance(model, ModelSpec):
                raise InvalidArgumentError("largest_layer_params", "is needed for ZeRO-3 "
                                           "when the model is a plain parameter count")
            largest_layer_params = largest_layer_parameters(model, parallel.tp)
        largest = float(check_non_negative("largest_layer_params", largest_layer_params))
    dense, experts = _dense_and_experts(model, parallel, n)
    nd, ne = _zero_groups(parallel)
    weights = grads = optim = host = 0.0
    for params, group, layer in ((dense, nd, largest), (experts, ne, 0.0)):
        if not params:
            continue
        gpn = min(per_node, max(1, round(group)))
        nodes = max(1, math.ceil(group / gpn))
        if stage == 2:
            weights += 2.0 * params
            if not offload_optimizer:
                grads += 6.0 * params / group
                optim += 12.0 * params / group
            est = estimate_zero2_model_states(params, gpn, nodes, offload_optimizer, factor)
        else:
            weights += 0.0 if offload_params else 2.0 * params / group
            if not offload_optimizer:
                grads += 4.0 * params / group
                optim += 12.0 * params / group
            est = estimate_zero3_model_states(params, layer, gpn, nodes, offload_optimizer,
                                              offload_params, zero_init, factor)
        host += est.host_bytes_per_node
    buffer = 4.0 * largest
    total = weights + grads + optim + buffer
    return MemoryBreakdown("deepspeed", n, weights, grads, optim, total, buffer, host)


def zero_stage_scheme(scheme: str, zero_stage: int) -> str:
    """The static-memory scheme that counts a layout's ZeRO stage.

    ``"megatron"`` shards the optimizer state only (its distributed optimizer). A
    ``zero_stage`` of 2 or 3 (PyTorch FSDP's ``SHARD_GRAD_OP`` and ``FULL_SHARD``, FSDP2,
    DeepSpeed ZeRO-2/3), which the step model prices as such (:mod:`perfkit.calc.comm`:
    the parameters' all-gathers at stage 3), shards the gradients too, and at stage 3 the
    weights: ``"zero"`` counts that, so a run that fits is not reported as holding its
    whole unsharded model on every device. ``"mindspore"`` counts its own optimizer
    parallel levels (:func:`static_memory`); other schemes are returned as given.

    Examples
    --------
    >>> zero_stage_scheme("megatron", 3), zero_stage_scheme("megatron", 1)
    ('zero', 'megatron')
    """
    if zero_stage >= 2 and scheme == "megatron":
        return "zero"
    return scheme
