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
    "ActivationModel",
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
        """One row per pipeline stage: ``stage``, ``bytes``, ``GB`` and ``GiB``."""
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


@dataclass(frozen=True)
class ActivationModel:
    """How activation bytes per layer are counted (a convention, hence a parameter).

    Parameters
    ----------
    accounting : {"table", "tensors"}
        ``"table"`` (default): the seed's dynamic-memory table (Korthikanti et al. 2022,
        Table 2) as printed — a GPT layer with MHA, ``4h`` MLP and dropout, whatever the
        model. ``"tensors"``: the same tensor-by-tensor accounting generalised to the
        model: GQA (K and V are ``2sbh/q`` each), the MLP width ``f`` and gated MLPs
        (gate, up, activation and product outputs: ``8sbf``), dropout on or off, norm
        input bytes, flash attention. For a GPT layer with dropout it equals the table.
    flash_attention : bool
        ``"tensors"`` only: no ``s²`` tensors are kept (flash attention recomputes them);
        the softmax statistics are, counted as one fp32 value per head and token
        (``4·a·s·b`` bytes; Ascend's FlashAttentionScore is reported to keep more, still
        about 1 % of a Llama layer).
    dropout : bool, optional
        ``"tensors"`` only: dropout masks and outputs; default True for GPT MLPs and
        False for gated ones (Llama has none).
    norm_bytes : float
        ``"tensors"`` only: bytes per element of each norm's saved input (2; 4 when the
        norm computes in fp32 after a Cast, as MindFormers' RmsNorm does).
    selective : tuple of {"attention_core", "mlp_activation"}
        What ``recompute="selective"`` drops: the attention core's ``s²`` tensors
        (Korthikanti's selective recompute) and/or the MLP activation outputs (the seed's
        SiLU/Mul ``select_recompute``). ``"table"`` supports only the first.
    """

    accounting: str = "table"
    flash_attention: bool = False
    dropout: bool | None = None
    norm_bytes: float = 2.0
    selective: tuple[str, ...] = ("attention_core",)

    def __post_init__(self) -> None:
        check_choice("accounting", self.accounting, ("table", "tensors"))
        check_non_negative("norm_bytes", self.norm_bytes)
        parts = tuple(self.selective)
        for part in parts:
            check_choice("selective", part, ("attention_core", "mlp_activation"))
        if self.accounting == "table" and parts != ("attention_core",):
            raise InvalidArgumentError("selective", "the 'table' accounting only knows "
                                       "('attention_core',); use accounting='tensors'", parts)
        object.__setattr__(self, "selective", parts)

    @classmethod
    def mindformers(cls) -> ActivationModel:
        """MindFormers Llama defaults: flash attention, no dropout, fp32 norm inputs,
        selective recompute of the SiLU and Mul outputs (the seed's Llama2 cases)."""
        return cls("tensors", flash_attention=True, dropout=False, norm_bytes=4.0,
                   selective=("mlp_activation",))


def activation_per_layer(model: ModelSpec, micro_batch_size: int = 1, tp: int = 1,
                         sequence_parallel: bool = False, recompute: str = "none",
                         activation_model: ActivationModel | None = None,
                         ) -> tuple[float, str]:
    """Bytes of activations one layer keeps for one micro-batch, and the rule used.

    With the default ``ActivationModel()`` this is the seed's dynamic-memory table
    (Korthikanti et al. 2022, Table 2), ``a`` heads, ``t`` = tp:

    ===============================  =============================
    no parallelism                   ``sbh·(34 + 5as/h)``
    tensor parallel                  ``sbh·(10 + 24/t + 5as/(ht))``
    tensor + sequence parallel       ``sbh·(34 + 5as/h)/t``
    tensor parallel + selective      ``sbh·(10 + 24/t)``
    tensor + sequence + selective    ``34·sbh/t``
    full recompute                   ``2·sbh`` (``/t`` with sequence parallel)
    ===============================  =============================

    The table counts, per layer, ``10sbh`` that tensor parallelism leaves whole
    (attention and MLP inputs ``2+2``, two norm inputs ``2+2``, two dropout masks
    ``1+1``) and ``24sbh + 5as²b`` that it splits (Q, K, V ``2+2+2``, projection input
    ``2``, MLP activation input and output ``8+8``, softmax ``2as²b``, its dropout mask
    ``as²b`` and output ``2as²b``). ``ActivationModel(accounting="tensors")`` applies the
    same bookkeeping to the actual model (see :class:`ActivationModel`).
    """
    model = as_model(model)
    check_choice("recompute", recompute, ("none", "selective", "full"))
    am = ActivationModel() if activation_model is None else activation_model
    s, h, a = model.seq_length, model.hidden_size, model.num_attention_heads
    b, t = float(micro_batch_size), float(tp)
    sbh = s * b * h
    sp = sequence_parallel and tp > 1
    if recompute == "full":
        return (2.0 * sbh / t, "full recompute, sequence parallel") if sp \
            else (2.0 * sbh, "full recompute")
    selective = recompute == "selective"
    if am.accounting == "table":
        replicated, split = 10.0, 24.0
        s2 = 0.0 if selective else 5.0 * a * s / h
    else:
        dropout = (model.mlp == "gpt") if am.dropout is None else am.dropout
        q = model.gqa_ratio
        f = (model.moe_ffn_hidden_size * model.moe_top_k if model.is_moe
             else model.ffn_hidden_size) / h
        gated = model.mlp == "gated"
        replicated = 2.0 + 2.0 + 2.0 * am.norm_bytes + (2.0 if dropout else 0.0)
        attention = 2.0 + 4.0 / q + 2.0
        mlp = (8.0 if gated else 4.0) * f
        if selective and "mlp_activation" in am.selective:
            mlp -= (4.0 if gated else 2.0) * f
        if am.flash_attention:
            s2 = 4.0 * a / h
        elif selective and "attention_core" in am.selective:
            s2 = 0.0
        else:
            s2 = (2.0 + (3.0 if dropout else 0.0)) * a * s / h
        split = attention + mlp
    total = sbh * (replicated + split + s2) / t if sp else sbh * (replicated + (split + s2) / t)
    return total, _row_name(tp > 1, sp, selective, am.accounting)


def _row_name(tensor: bool, sequence: bool, selective: bool, accounting: str) -> str:
    """The seed-table row a configuration falls in, e.g. 'tensor parallel + selective'."""
    parts = ["tensor + sequence parallel" if sequence else "tensor parallel"] if tensor else []
    if selective:
        parts.append("selective recompute")
    name = " + ".join(parts) or "no parallelism"
    return name if accounting == "table" else f"{name} (tensor accounting)"


def activation_memory(model: ModelSpec, parallel: ParallelConfig, stage: int | None = None,
                      less_memory: bool = False,
                      activation_model: ActivationModel | None = None) -> ActivationBreakdown:
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
    reported. Embedding and loss activations are not included. ``activation_model``
    chooses the per-layer accounting (default: the seed's table).
    """
    model = as_model(model)
    parallel.validate(model)
    p, v = parallel.pp, parallel.vpp
    mode = "selective" if parallel.recompute == "selective" else "none"
    per_layer, formula = activation_per_layer(model, parallel.micro_batch_size, parallel.tp,
                                              parallel.sequence_parallel, mode,
                                              activation_model)
    full_bytes, _ = activation_per_layer(model, parallel.micro_batch_size, parallel.tp,
                                         parallel.sequence_parallel, "full", activation_model)
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
