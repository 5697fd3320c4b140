"""ParallelConfig: how one training step is split over devices, and the rules it keeps."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import (
    InvalidArgumentError,
    ParallelConfigError,
    check_choice,
    check_positive_int,
)
from ._fields import optional
from .recompute_ops import resolve_recompute_ops

if TYPE_CHECKING:
    from .model import ModelSpec

__all__ = ["ParallelConfig", "RECOMPUTE_KINDS"]

RECOMPUTE_KINDS = ("none", "selective", "full")


@dataclass(frozen=True)
class ParallelConfig:
    """How one training step is split over devices.

    Parameters
    ----------
    dp, tp, pp : int
        Data-, tensor- (MindSpore "model parallel", mp) and pipeline-parallel sizes.
    vpp : int
        Virtual pipeline stages (model chunks) per device; 1 = plain 1F1B.
    micro_batch_size : int
        Sequences per micro-batch, ``b``.
    num_micro_batches : int
        Micro-batches per step per data-parallel rank, ``m`` (gradient accumulation steps
        or MindFormers' ``micro_batch_num``).
    sequence_parallel : bool
        Megatron/MindSpore sequence parallelism inside the TP group.
    optimizer_shard : int
        Size of the group over which optimizer state (and in MindSpore the weights) is
        sharded: MindSpore's optimizer parallel, Megatron's distributed optimizer. 1 = off.
        Must divide ``dp``.
    zero_stage : int
        ZeRO stage 0-3 (DeepSpeed, FSDP's sharding strategies). Every static-memory
        scheme counts it (:func:`perfkit.calc.static_memory`): stage 1 shards the optimizer
        state over the data-parallel ranks (``"mindspore"`` and ``"megatron"`` as their
        ``optimizer_shard``), 2 the gradients too and 3 the weights (as ``"zero"``).
    recompute : {"none", "selective", "full"}
    recompute_layers : int or sequence of int, optional
        Layers per pipeline stage that are *fully* recomputed (MindFormers
        ``recompute: [4, 0]``). An int applies to every stage. With ``recompute="full"``
        the default is every layer; with ``"selective"`` the listed layers are full and
        the rest selective; with ``"none"`` the listed layers are full and the rest none.
        Torchtitan's ``selective_ac_option="<k>"`` and Megatron's ``--recompute-method
        uniform --recompute-num-layers`` are :meth:`every_kth_layer`.
    recompute_ops : str or tuple of str, optional
        With ``recompute="selective"``: the ops of each selectively recomputed layer that
        are rerun in the backward (op-level selective activation checkpointing), instead
        of the activation model's ``selective`` kinds. Names from
        :data:`perfkit.specs.recompute_ops.LAYER_OPS` (``attn_norm, qkv | q, k, v, rope,
        core, out_proj, attn_residual, mlp_norm, router, permute, fc1 | gate, up, act,
        fc2, mlp_residual``) or aliases (Megatron's ``core_attn``, ``layernorm``, ``mlp``,
        ``moe_act``), or a framework preset: ``"torchtitan-op-sac"``,
        ``"megatron-selective"``, ``"mindformers-select-recompute"``
        (:mod:`perfkit.specs.recompute_ops` gives their sources). Stored as the canonical
        names in layer order. Time: the forward of those ops is added to each such
        layer's backward; memory: the tensors they produce are not kept
        (:func:`perfkit.calc.activation.activation_per_layer`).
    ep : int
        Expert-parallel size (MoE): the routed experts of a layer are split over ``ep``
        ranks, tokens travel to their experts by all-to-all.
    cp : int
        Context-parallel size: every sequence is split into ``cp`` chunks on ``cp`` ranks
        (Megatron-LM ``--context-parallel-size``); attention exchanges keys and values.
        The job has ``dp × tp × pp × cp`` devices.
    expert_tp : int, optional
        Tensor-parallel size inside each expert (Megatron ``--expert-tensor-parallel-size``);
        default ``tp``.
    trainable_fraction : float
        Share of the parameters that train, in (0, 1] (LoRA / PEFT / a frozen base: the
        frozen weights get no weight gradients, no gradient reduction and no optimizer
        update; the adapters' own small work is not counted). Default 1.
    rank_order : str
        Rank placement, innermost first (Megatron-LM's ``order``, default
        ``"tp-cp-ep-dp-pp"``): which groups' ranks share a node
        (:mod:`perfkit.calc.topology`).

    Notes
    -----
    Expert parallelism follows Megatron-LM's expert grid (``initialize_model_parallel`` in
    ``megatron/core/parallel_state.py``): the ``tp × cp × dp`` ranks of a pipeline stage
    are regrouped as ``expert_tp × ep × expert_dp``, so ``ep × expert_tp`` must divide
    ``tp × cp × dp`` — with the default ``expert_tp = tp``, ``ep`` divides ``dp × cp`` —
    and ``expert_dp = tp·cp·dp / (ep·expert_tp)`` ranks hold copies of the same experts
    (their gradients are reduced, and a distributed optimizer shards their state, over
    that group). ``ep`` must divide the number of experts (``validate_args``).
    """

    dp: int = 1
    tp: int = 1
    pp: int = 1
    vpp: int = 1
    micro_batch_size: int = 1
    num_micro_batches: int = 1
    sequence_parallel: bool = False
    optimizer_shard: int = 1
    zero_stage: int = 0
    recompute: str = "none"
    recompute_layers: int | tuple[int, ...] | None = None
    ep: int = 1
    cp: int = optional(1)
    expert_tp: int | None = optional(None)
    rank_order: str = optional("tp-cp-ep-dp-pp")
    trainable_fraction: float = optional(1.0)
    recompute_ops: tuple[str, ...] | None = optional(None)

    def __post_init__(self) -> None:
        try:
            for name in ("dp", "tp", "pp", "vpp", "micro_batch_size", "num_micro_batches",
                         "optimizer_shard", "ep", "cp"):
                object.__setattr__(self, name, check_positive_int(name, getattr(self, name)))
            if self.expert_tp is not None:
                object.__setattr__(self, "expert_tp",
                                   check_positive_int("expert_tp", self.expert_tp))
            check_choice("recompute", self.recompute, RECOMPUTE_KINDS)
            object.__setattr__(self, "recompute_ops",
                               resolve_recompute_ops(self.recompute_ops))
        except ParallelConfigError:
            raise
        except InvalidArgumentError as exc:
            raise ParallelConfigError(exc.parameter, exc.rule, exc.value) from None
        if self.zero_stage not in (0, 1, 2, 3) or isinstance(self.zero_stage, bool):
            raise ParallelConfigError("zero_stage", "must be 0, 1, 2 or 3", self.zero_stage)
        tf = self.trainable_fraction
        if isinstance(tf, bool) or not isinstance(tf, (int, float)) or not 0 < tf <= 1:
            raise ParallelConfigError("trainable_fraction", "must be in (0, 1]", tf)
        if not isinstance(self.rank_order, str) or sorted(self.rank_order.split("-")) \
                != sorted(("tp", "cp", "ep", "dp", "pp")):
            raise ParallelConfigError("rank_order", "must name tp, cp, ep, dp and pp once "
                                      "each, innermost first (e.g. 'tp-cp-ep-dp-pp')",
                                      self.rank_order)
        if not isinstance(self.sequence_parallel, bool):
            raise ParallelConfigError("sequence_parallel", "must be True or False",
                                      self.sequence_parallel)
        if self.recompute_ops is not None and self.recompute != "selective":
            raise ParallelConfigError("recompute_ops", "names what a selectively recomputed "
                                      "layer reruns: needs recompute='selective'",
                                      self.recompute_ops)
        rl = self.recompute_layers
        if rl is not None:
            if isinstance(rl, Sequence) and not isinstance(rl, str):
                values = tuple(rl)
                if len(values) != self.pp:
                    raise ParallelConfigError(
                        "recompute_layers", f"needs one entry per pipeline stage (pp={self.pp})",
                        rl)
            else:
                values = (rl,)
            for v in values:
                if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                    raise ParallelConfigError("recompute_layers",
                                              "entries must be whole numbers >= 0", rl)
            object.__setattr__(self, "recompute_layers",
                               values if isinstance(rl, Sequence) else rl)
        rules = self.problems()
        if rules:
            param, _, rule = rules[0].partition(": ")
            raise ParallelConfigError(param, rule, getattr(self, param, None), rules=rules)

    @classmethod
    def every_kth_layer(cls, k: int, layers_per_stage: int, **fields: Any) -> ParallelConfig:
        """A layout that fully recomputes every ``k``-th layer of each stage.

        Torchtitan's ``activation_checkpoint.selective_ac_option = "<k>"`` wraps every
        ``k``-th transformer block in a full checkpoint; this is
        ``recompute_layers = layers_per_stage // k`` (``"none"`` for the other layers
        unless ``fields`` says ``recompute="selective"``). Megatron-LM's
        ``--recompute-method block --recompute-num-layers N`` is ``recompute_layers=N``
        directly (``uniform`` with ``N`` layers per chunk checkpoints them all:
        ``recompute="full"``). Every layer of a stage costs the same in the step and
        memory models, so which layers are recomputed does not matter, only how many.
        """
        k = check_positive_int("k", k)
        layers_per_stage = check_positive_int("layers_per_stage", layers_per_stage)
        fields.setdefault("recompute", "none")
        return cls(recompute_layers=layers_per_stage // k, **fields)

    @property
    def world_size(self) -> int:
        """``dp × tp × pp × cp`` devices."""
        return self.dp * self.tp * self.pp * self.cp

    @property
    def expert_tp_size(self) -> int:
        """Tensor-parallel size inside an expert: ``expert_tp``, or ``tp`` when not given."""
        return self.tp if self.expert_tp is None else self.expert_tp

    @property
    def expert_dp(self) -> int:
        """Ranks holding the same experts: ``tp·cp·dp / (ep·expert_tp)`` (Megatron's
        expert data-parallel size)."""
        return self.tp * self.cp * self.dp // (self.ep * self.expert_tp_size)

    @property
    def global_batch_size(self) -> int:
        """Sequences per step: ``dp × micro_batch_size × num_micro_batches``."""
        return self.dp * self.micro_batch_size * self.num_micro_batches

    def full_recompute_layers_per_stage(self, model: ModelSpec | None = None) -> tuple[int, ...]:
        """Fully recomputed layers on each stage (needs ``model`` for the default "all")."""
        rl = self.recompute_layers
        if rl is None:
            if self.recompute != "full":
                return (0,) * self.pp
            if model is None:
                raise InvalidArgumentError("model", "is needed to count 'all layers'")
            return tuple(self.layers_per_stage(model))
        return tuple(rl) if isinstance(rl, tuple) else (rl,) * self.pp

    def layers_per_stage(self, model: ModelSpec) -> list[int]:
        """Layers on each pipeline stage for an even split (remainder on the first stages)."""
        base, extra = divmod(model.num_layers, self.pp)
        return [base + (1 if s < extra else 0) for s in range(self.pp)]

    def problems(self, model: ModelSpec | None = None,
                 num_devices: int | None = None) -> list[str]:
        """Every rule this configuration breaks, as ``"parameter: rule"`` strings.

        Rules without a model: ``vpp > 1`` needs ``pp > 1``; when interleaved,
        ``num_micro_batches`` a multiple of ``pp`` (Megatron's rule; fewer micro-batches
        than stages are allowed with plain 1F1B: the step is ``m + pp − 1`` stage slots,
        only ``m`` of them busy, :func:`perfkit.calc.pipeline.bubble_fraction`);
        ``optimizer_shard`` divides ``dp``; ``ep × expert_tp``
        divides ``tp × cp × dp`` (``ep`` divides ``dp × cp`` when ``expert_tp = tp``:
        Megatron's expert grid, see the class notes); ``sequence_parallel`` needs
        ``tp > 1``.
        With a model: ``tp`` divides the attention heads and the KV heads; ``pp × vpp``
        divides ``num_layers``; fully recomputed layers fit on their stage; ``ep > 1`` and
        ``expert_tp`` need a MoE model and ``ep`` divides ``num_experts``; with ``cp > 1``
        the sequence length is a multiple of ``2·cp`` (Megatron's ``validate_args``: each
        rank takes two chunks for causal load balance). With ``num_devices``:
        ``dp × tp × pp × cp == num_devices``.
        """
        out: list[str] = []
        p, v, m = self.pp, self.vpp, self.num_micro_batches
        if v > 1 and p == 1:
            out.append("vpp: virtual stages need pipeline parallelism (pp > 1)")
        if v > 1 and m < p:
            out.append(f"num_micro_batches: must be >= pp={p} with vpp > 1 (interleaving)")
        elif v > 1 and m % p:
            out.append(f"num_micro_batches: must be a multiple of pp={p} with vpp > 1")
        if self.dp % self.optimizer_shard:
            out.append(f"optimizer_shard: must divide dp={self.dp}")
        etp = self.expert_tp_size
        if (self.tp * self.cp * self.dp) % (self.ep * etp):
            if self.expert_tp is None:
                out.append(f"ep: must divide dp*cp={self.dp * self.cp} (Megatron's expert "
                           "grid takes the expert-parallel ranks from the data- and "
                           "context-parallel ranks)")
            else:
                out.append(f"ep: ep*expert_tp={self.ep * etp} must divide "
                           f"tp*cp*dp={self.tp * self.cp * self.dp}")
        if self.sequence_parallel and self.tp == 1:
            out.append("sequence_parallel: needs tensor parallelism (tp > 1)")
        if model is not None:
            if model.num_attention_heads % self.tp:
                out.append(f"tp: must divide num_attention_heads={model.num_attention_heads}")
            elif model.num_kv_heads % self.tp:
                out.append(f"tp: must divide num_kv_heads={model.num_kv_heads}")
            if model.num_layers % (p * v):
                out.append(f"pp: pp*vpp={p * v} must divide num_layers={model.num_layers}")
            elif self.recompute_layers is not None:
                per_stage = model.num_layers // p
                if any(n > per_stage for n in self.full_recompute_layers_per_stage(model)):
                    out.append(f"recompute_layers: more than the {per_stage} layers per stage")
            if model.num_experts % self.ep:
                out.append(f"ep: must divide num_experts={model.num_experts}")
            elif self.ep > 1 and not model.is_moe:
                out.append("ep: expert parallelism needs a MoE model (num_experts > 1)")
            if self.cp > 1 and model.seq_length % (2 * self.cp):
                out.append(f"cp: seq_length={model.seq_length} must be a multiple of "
                           f"2*cp={2 * self.cp}")
        if num_devices is not None and self.world_size != num_devices:
            name = "dp*tp*pp*cp" if self.cp > 1 else "dp*tp*pp"
            out.append(f"dp: {name}={self.world_size} must equal num_devices={num_devices}")
        return out

    def validate(self, model: ModelSpec | None = None,
                 num_devices: int | None = None) -> ParallelConfig:
        """Raise :class:`~perfkit.errors.ParallelConfigError` naming every broken rule.

        Returns ``self`` so it can be chained.
        """
        rules = self.problems(model, num_devices)
        if rules:
            param, _, rule = rules[0].partition(": ")
            more = f" (and {len(rules) - 1} more: {'; '.join(rules[1:])})" if len(rules) > 1 \
                else ""
            raise ParallelConfigError(param, rule + more, getattr(self, param, None),
                                      rules=rules)
        return self

    def replace(self, **changes: Any) -> ParallelConfig:
        """A copy with some fields changed (re-validated)."""
        return dataclasses.replace(self, **changes)
