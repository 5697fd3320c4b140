"""Static memory (weights, gradients, optimizer state) and activation memory per device.

Static memory, three published schemes (``scheme=``):

* ``"mindspore"`` — the seed guide: fp16 weights 2 B + fp32 Adam variance 4 B + fp32
  momentum 4 B = ``10N``; optimizer parallel of size ``t`` shards weights and optimizer
  state: ``10N/t``; with gradient accumulation or pipeline parallelism an unsharded fp16
  gradient adds ``2N``: ``10N/t + 2N``. No fp32 master copy.
* ``"megatron"`` — Megatron-LM ``theoretical_memory_usage.py``: 18 B/param (bf16 weight
  2 + fp32 grad 4 + fp32 main param 4 + Adam m 4 + v 4); the distributed optimizer
  shards the 12 optimizer bytes: ``6 + 12/d``.
* ``"zero"`` — Rajbhandari et al. 2020 (ZeRO), Fig. 1: ``2 + 2 + K`` with ``K = 12``;
  stage 1 shards the optimizer, 2 also the gradients, 3 also the weights, over ``dp``.

Activation memory: Korthikanti et al. 2022, Table 2, as printed in the seed's
"Dynamic Memory" table (16-bit activations, 1-byte dropout masks, GPT layer), times the
micro-batches in flight on a pipeline stage (MindFormers SAPP ``compute_activation_nums``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from ..errors import InvalidArgumentError, check_choice, check_non_negative
from ..specs import ModelSpec, ParallelConfig
from ._common import as_model, as_param_count
from .pipeline import in_flight_micro_batches

__all__ = [
    "MemoryBreakdown",
    "ActivationBreakdown",
    "parameters_per_device",
    "static_memory",
    "activation_per_layer",
    "activation_memory",
]

STATIC_SCHEMES = ("mindspore", "megatron", "zero")
_DEFAULT_BYTES = {  # scheme -> (weight, gradient, optimizer) bytes per parameter
    "mindspore": (2.0, 2.0, 8.0),
    "megatron": (2.0, 4.0, 12.0),
    "zero": (2.0, 2.0, 12.0),
}


def _frame(rows: dict[str, float]) -> pd.DataFrame:
    frame = pd.DataFrame({"component": list(rows), "bytes": list(rows.values())})
    frame["GB"] = frame["bytes"] / 1e9
    frame["GiB"] = frame["bytes"] / 2**30
    return frame


@dataclass(frozen=True)
class MemoryBreakdown:
    """Static memory of the most loaded device, in bytes.

    Attributes: ``scheme``, ``parameters`` (held by the device before any optimizer
    sharding), ``weights_bytes``, ``gradients_bytes``, ``optimizer_bytes``,
    ``total_bytes``.
    """

    scheme: str
    parameters: float
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    total_bytes: float

    def to_frame(self) -> pd.DataFrame:
        """One row per component with bytes, GB (1e9) and GiB (2**30)."""
        return _frame({"weights": self.weights_bytes, "gradients": self.gradients_bytes,
                       "optimizer": self.optimizer_bytes, "total": self.total_bytes})


@dataclass(frozen=True)
class ActivationBreakdown:
    """Activation memory of one pipeline stage (the peak one unless a stage was asked).

    Attributes
    ----------
    formula : str
        The row of the seed's dynamic-memory table used for layers that are not fully
        recomputed.
    per_layer_bytes : float
        Bytes one layer keeps for one micro-batch under that row.
    full_recompute_layer_bytes : float
        Bytes a fully recomputed layer keeps (its input, ``2sbh``, ``/t`` with SP).
    stage : int
        The pipeline stage described (0-based).
    layers_on_stage, full_recompute_layers : int
    in_flight : float
        Micro-batches whose activations the stage holds at its peak (averaged over its
        virtual chunks, so Megatron's ``p·(1 + (p−1)/(p·v))`` for stage 0).
    total_bytes : float
    per_stage_bytes : tuple of float
        ``total_bytes`` of every stage, for comparison.
    """

    formula: str
    per_layer_bytes: float
    full_recompute_layer_bytes: float
    stage: int
    layers_on_stage: int
    full_recompute_layers: int
    in_flight: float
    total_bytes: float
    per_stage_bytes: tuple[float, ...]

    def to_frame(self) -> pd.DataFrame:
        """One row per stage: layers, fully recomputed layers, bytes, GB and GiB."""
        frame = pd.DataFrame({"stage": range(len(self.per_stage_bytes)),
                              "bytes": self.per_stage_bytes})
        frame["GB"] = frame["bytes"] / 1e9
        frame["GiB"] = frame["bytes"] / 2**30
        return frame

    def as_dict(self) -> dict[str, object]:
        """Plain dict of the fields."""
        return asdict(self)


def parameters_per_device(model: ModelSpec | float, parallel: ParallelConfig) -> float:
    """Parameters held by the most loaded device, before optimizer sharding.

    For a plain parameter count: ``N / (tp · pp)``. For a :class:`ModelSpec`: the layers
    of the fullest stage with their matrices split ``tp`` ways (experts also ``ep`` ways),
    norms and router replicated; the first stage adds the vocabulary-parallel embedding
    (``V·h/tp``) and learned positions, the last stage the final norm and the output
    head (a copy of the embedding when tied and ``pp > 1``, as Megatron keeps).
    """
    if not isinstance(model, ModelSpec):
        return as_param_count(model) / (parallel.tp * parallel.pp)
    b = model.parameter_breakdown()
    tp, ep = parallel.tp, parallel.ep
    per_layer = (b["attention"] / tp + b["mlp"] / (tp * (ep if model.is_moe else 1))
                 + b["router"] + b["norms"])
    stages = parallel.layers_per_stage(model)
    first = stages[0] * per_layer + b["embedding"] / tp + b["position"]
    last_head = b["final_norm"] + (b["output"] if not model.tied_embeddings
                                   else (b["embedding"] if parallel.pp > 1 else 0)) / tp
    if parallel.pp == 1:
        return first + last_head
    return max(first, stages[-1] * per_layer + last_head)


def static_memory(model: ModelSpec | float, parallel: ParallelConfig,
                  scheme: str = "mindspore", weight_bytes: float | None = None,
                  gradient_bytes: float | None = None, optimizer_bytes: float | None = None,
                  gradient_buffer: bool | None = None) -> MemoryBreakdown:
    """Weights + gradients + optimizer state of the most loaded device, in bytes.

    Parameters
    ----------
    model : ModelSpec or number of parameters
    parallel : ParallelConfig
        ``tp``/``pp`` split the parameters (:func:`parameters_per_device`);
        ``optimizer_shard`` is the sharding size for ``"mindspore"`` (the seed's ``t``)
        and ``"megatron"`` (distributed optimizer ``d``); ``zero_stage`` and ``dp`` drive
        ``"zero"``.
    scheme : {"mindspore", "megatron", "zero"}
        See the module docstring. Per parameter, defaults (weight, gradient, optimizer):
        mindspore 2/2/8, megatron 2/4/12, zero 2/2/12.
    weight_bytes, gradient_bytes, optimizer_bytes : float, optional
        Override the scheme's bytes per parameter (e.g. fp32 gradients in MindSpore).
    gradient_buffer : bool, optional
        ``"mindspore"`` only: whether a gradient buffer exists. Default: when
        ``num_micro_batches > 1`` (gradient accumulation) or ``pp > 1``, as the seed says.

    Examples
    --------
    The seed's 7B example, ``t = 8``: 70 GB without parallelism, 8.75 GB with optimizer
    parallel, 22.75 GB with optimizer parallel and gradient accumulation.
    """
    check_choice("scheme", scheme, STATIC_SCHEMES)
    n = parameters_per_device(model, parallel)
    w, g, o = _DEFAULT_BYTES[scheme]
    w = w if weight_bytes is None else check_non_negative("weight_bytes", weight_bytes)
    g = g if gradient_bytes is None else check_non_negative("gradient_bytes", gradient_bytes)
    o = o if optimizer_bytes is None else check_non_negative("optimizer_bytes",
                                                              optimizer_bytes)
    if scheme == "mindspore":
        t = parallel.optimizer_shard
        has_grad = (parallel.num_micro_batches > 1 or parallel.pp > 1) \
            if gradient_buffer is None else bool(gradient_buffer)
        weights, grads, optim = w * n / t, (g * n if has_grad else 0.0), o * n / t
    elif scheme == "megatron":
        d = parallel.optimizer_shard
        weights, grads, optim = w * n, g * n, o * n / d
    else:
        nd, stage = parallel.dp, parallel.zero_stage
        weights = w * n / (nd if stage >= 3 else 1)
        grads = g * n / (nd if stage >= 2 else 1)
        optim = o * n / (nd if stage >= 1 else 1)
    return MemoryBreakdown(scheme, n, weights, grads, optim, weights + grads + optim)


def activation_per_layer(model: ModelSpec, micro_batch_size: int = 1, tp: int = 1,
                         sequence_parallel: bool = False,
                         recompute: str = "none") -> tuple[float, str]:
    """Bytes of activations one layer keeps for one micro-batch, and the table row used.

    The seed's dynamic-memory table (Korthikanti et al. 2022, Table 2), ``a`` heads,
    ``t`` = tp:

    ===============================  =============================
    no parallelism                   ``sbh·(34 + 5as/h)``
    tensor parallel                  ``sbh·(10 + 24/t + 5as/(ht))``
    tensor + sequence parallel       ``sbh·(34 + 5as/h)/t``
    tensor parallel + selective      ``sbh·(10 + 24/t)``
    tensor + sequence + selective    ``34·sbh/t``
    full recompute                   ``2·sbh`` (``/t`` with sequence parallel)
    ===============================  =============================

    The table models a GPT layer (MHA, ``4h`` MLP, dropout); for gated MLPs and GQA it
    is an approximation. "selective" is Korthikanti's: the attention core's ``s²``
    tensors are recomputed.
    """
    model = as_model(model)
    check_choice("recompute", recompute, ("none", "selective", "full"))
    s, h, a = model.seq_length, model.hidden_size, model.num_attention_heads
    b, t = float(micro_batch_size), float(tp)
    sbh = s * b * h
    sp = sequence_parallel and tp > 1
    if recompute == "full":
        return (2.0 * sbh / t, "full recompute, sequence parallel") if sp \
            else (2.0 * sbh, "full recompute")
    if recompute == "selective":
        if sp:
            return 34.0 * sbh / t, "tensor + sequence parallel + selective recompute"
        name = "tensor parallel + selective recompute" if tp > 1 else "selective recompute"
        return sbh * (10.0 + 24.0 / t), name
    if sp:
        return sbh * (34.0 + 5.0 * a * s / h) / t, "tensor + sequence parallel"
    name = "tensor parallel" if tp > 1 else "no parallelism"
    return sbh * (10.0 + (24.0 + 5.0 * a * s / h) / t), name


def activation_memory(model: ModelSpec, parallel: ParallelConfig, stage: int | None = None,
                      less_memory: bool = False) -> ActivationBreakdown:
    """Activation bytes held by a pipeline stage at its peak.

    ``total = Σ_chunks in_flight[chunk, stage] · layers_per_chunk · per_layer``, where
    fully recomputed layers (``parallel.recompute_layers``, or all with
    ``recompute="full"``) keep ``2sbh`` and the others the row of
    :func:`activation_per_layer` for ``parallel.recompute`` (with ``"full"`` and an
    explicit list, the layers not listed keep everything, as in ``hardware_flops``).
    In-flight micro-batches follow
    :func:`~perfkit.calc.pipeline.in_flight_micro_batches` (1F1B stage ``s`` holds
    ``p − s``; interleaving adds Megatron's ``1 + (p−1)/(p·v)`` on stage 0; capped at
    ``num_micro_batches``). With ``stage=None`` the stage with the largest total is
    reported. Embedding and loss activations are not included.
    """
    model = as_model(model)
    parallel.validate(model)
    p, v = parallel.pp, parallel.vpp
    mode = "selective" if parallel.recompute == "selective" else "none"
    per_layer, formula = activation_per_layer(model, parallel.micro_batch_size, parallel.tp,
                                              parallel.sequence_parallel, mode)
    full_bytes, _ = activation_per_layer(model, parallel.micro_batch_size, parallel.tp,
                                         parallel.sequence_parallel, "full")
    layers = parallel.layers_per_stage(model)
    full_layers = parallel.full_recompute_layers_per_stage(model)
    if parallel.recompute == "full" and parallel.recompute_layers is None:
        formula = "full recompute"
    inflight = in_flight_micro_batches(p, parallel.num_micro_batches, v, less_memory)
    totals = []
    for s in range(p):
        n, nf = layers[s], full_layers[s]
        avg_layer = ((n - nf) * per_layer + nf * full_bytes) / n
        totals.append(float(inflight[:, s].sum() * (n / v) * avg_layer))
    if stage is None:
        stage = int(np.argmax(totals))
    elif not 0 <= stage < p:
        raise InvalidArgumentError("stage", f"must be in 0..{p - 1}", stage)
    return ActivationBreakdown(
        formula=formula, per_layer_bytes=per_layer, full_recompute_layer_bytes=full_bytes,
        stage=stage, layers_on_stage=layers[stage], full_recompute_layers=full_layers[stage],
        in_flight=float(inflight[:, stage].sum() / v), total_bytes=totals[stage],
        per_stage_bytes=tuple(totals))
