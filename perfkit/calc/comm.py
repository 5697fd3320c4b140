"""Communication volume of one training step, per device, by collective.

Ring-algorithm volumes (bytes each rank sends): all-reduce of ``M`` bytes over ``n``
ranks sends ``2·(n−1)/n·M``; all-gather and reduce-scatter send ``(n−1)/n·M`` (``M`` the
full, gathered size); all-to-all sends ``(n−1)/n·M``; point-to-point sends ``M``.

Sources: Rajbhandari et al. 2020 (ZeRO) §7 — data parallel and ZeRO-1/2 move ``2Ψ``,
ZeRO-3 ``3Ψ``; Shoeybi et al. 2019 / Korthikanti et al. 2022 §4.2 — tensor parallel: 2
all-reduces forward and 2 backward per layer of ``b·s·h`` elements, replaced by all-gather
+ reduce-scatter pairs of the same total with sequence parallel; Narayanan et al. 2021
§4.1 — pipeline send/recv of ``b·s·h/t`` per micro-batch per boundary: Megatron scatters
each activation over the ``t`` tensor-parallel ranks before the send and all-gathers it
(over the fast intra-node links) after, with or without sequence parallelism (the
"scatter/gather communication optimization"); MoE expert-parallel all-to-all of
``top_k·b·s·h`` for dispatch and again for combine (llm-analysis), forward and backward,
per MoE layer; context parallelism (Megatron-LM
``docs/user-guide/features/context_parallel.md``): every attention layer all-gathers the keys and
values of the sequence in the forward, again in the backward, and reduce-scatters their
gradients — point-to-point in a ring (``cp_comm_type="p2p"``, Megatron's default) or as
collectives (``"all_gather"``), the same bytes either way: ``(cp−1)/cp`` of ``2·s·b·g·d``
elements (K and V) each time.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..errors import check_choice, check_positive
from ..specs import ModelSpec, ParallelConfig
from ._common import as_model
from .memory import parameters_per_device, stage_parameters

__all__ = ["CommItem", "CommVolume", "comm_volume"]

KINDS = ("dp", "tp", "pp", "ep", "cp")
CP_COMM = ("p2p", "all_gather")


@dataclass(frozen=True)
class CommItem:
    """One kind of collective in a step.

    ``kind`` (dp / tp / pp / ep / cp), ``collective``, ``group_size``, ``count`` (operations
    per step per device), ``message_bytes`` (full tensor size of one operation),
    ``ring_factor`` (share of the message each rank sends) and ``bytes_per_device``
    (``count · message_bytes · ring_factor``).
    """

    kind: str
    collective: str
    group_size: int
    count: float
    message_bytes: float
    ring_factor: float

    @property
    def bytes_per_device(self) -> float:
        """Bytes this device sends for this collective in one step."""
        return self.count * self.message_bytes * self.ring_factor


@dataclass(frozen=True)
class CommVolume:
    """Bytes each device sends in one step, per collective (see :func:`comm_volume`)."""

    items: tuple[CommItem, ...]

    def bytes(self, kind: str) -> float:
        """Bytes per device per step of one kind: ``"dp"``, ``"tp"``, ``"pp"``, ``"ep"`` or
        ``"cp"``."""
        return float(sum(i.bytes_per_device for i in self.items if i.kind == kind))

    @property
    def dp_bytes(self) -> float:
        """Data-parallel gradient (and ZeRO parameter) traffic."""
        return self.bytes("dp")

    @property
    def tp_bytes(self) -> float:
        """Tensor-parallel traffic."""
        return self.bytes("tp")

    @property
    def pp_bytes(self) -> float:
        """Pipeline send/recv traffic."""
        return self.bytes("pp")

    @property
    def ep_bytes(self) -> float:
        """Expert-parallel all-to-all traffic."""
        return self.bytes("ep")

    @property
    def cp_bytes(self) -> float:
        """Context-parallel key/value traffic."""
        return self.bytes("cp")

    @property
    def total_bytes(self) -> float:
        """All traffic of the device in one step."""
        return float(sum(i.bytes_per_device for i in self.items))

    def to_frame(self) -> pd.DataFrame:
        """One row per collective with its count, sizes, ring factor and bytes per device."""
        columns = ["kind", "collective", "group_size", "count", "message_bytes",
                   "ring_factor", "bytes_per_device"]
        rows = [(i.kind, i.collective, i.group_size, i.count, i.message_bytes, i.ring_factor,
                 i.bytes_per_device) for i in self.items]
        return pd.DataFrame(rows, columns=columns)


def comm_volume(model: ModelSpec, parallel: ParallelConfig, dtype_bytes: float = 2.0,
                gradient_bytes: float | None = None, cp_comm: str = "p2p",
                param_gather_bytes: float | None = None) -> CommVolume:
    """Bytes each device sends in one step, by collective kind.

    Parameters
    ----------
    model : ModelSpec
    parallel : ParallelConfig
        ``dp``/``tp``/``pp``/``vpp``/``ep``/``cp``, micro-batching, sequence parallel, ZeRO
        stage and recompute (a fully recomputed layer repeats its forward collectives).
    dtype_bytes : float
        Bytes per activation and weight element (2 for fp16/bf16).
    gradient_bytes : float, optional
        Bytes per gradient element for the data-parallel reduction (its all-reduce or
        reduce-scatter; a sharded optimizer gathers the weights back in ``dtype_bytes``);
        default ``dtype_bytes`` (MindSpore, ZeRO); Megatron reduces fp32 gradients (4) in
        a bf16 run unless told otherwise.
    cp_comm : {"p2p", "all_gather"}
        How context parallelism moves keys and values (Megatron's ``cp_comm_type``): a
        ring of sends, or all-gather / reduce-scatter collectives. Same bytes.
    param_gather_bytes : float, optional
        Bytes per weight element the all-gathers of sharded weights move (the step
        model's ``Rates.param_gather_bytes``); default ``dtype_bytes``. 1 for torchao's
        float8 all-gather under FSDP2.

    Notes
    -----
    Counts are for the most loaded device: the first pipeline stage's layers, an interior
    stage's send/recv (one forward and one backward message per micro-batch and virtual
    chunk). Data-parallel gradients are one logical reduction of the device's parameters
    (bucketing changes latency, not volume) over the ``dp × cp`` ranks that hold the same
    weights (Megatron reduces over the data- and context-parallel group); a MoE model's
    routed experts reduce over the expert data-parallel ranks ``tp·cp·dp/(ep·expert_tp)``.
    Each rank's activations cover ``s/cp`` tokens. Expert parallelism sends, per MoE layer
    of the stage and micro-batch, a dispatch and a combine all-to-all forward and again
    backward (and once more forward for a fully recomputed layer, taken to be the stage's
    last layers when some are dense).
    """
    model = as_model(model)
    parallel.validate(model)
    check_choice("cp_comm", cp_comm, CP_COMM)
    a_bytes = check_positive("dtype_bytes", dtype_bytes)
    g_bytes = a_bytes if gradient_bytes is None else check_positive("gradient_bytes",
                                                                    gradient_bytes)
    w_bytes = a_bytes if param_gather_bytes is None else check_positive(
        "param_gather_bytes", param_gather_bytes)
    dp, tp, pp, v, ep = parallel.dp, parallel.tp, parallel.pp, parallel.vpp, parallel.ep
    cp = parallel.cp
    m, b = parallel.num_micro_batches, parallel.micro_batch_size
    seq = model.seq_length if cp == 1 else model.seq_length / cp
    bsh_bytes = b * seq * model.hidden_size * a_bytes
    layers = parallel.layers_per_stage(model)[0]
    full_layers = parallel.full_recompute_layers_per_stage(model)[0]
    items: list[CommItem] = []
    params = parameters_per_device(model, parallel)
    experts = 0.0
    if model.is_moe:
        experts = max(stage_parameters(model, parallel), key=lambda s: s["total"])["experts"]
    groups = [("", params - experts, dp * cp)]
    if experts:
        groups.append(("expert ", experts, parallel.expert_dp))
    trained = parallel.trainable_fraction  # frozen weights reduce no gradients
    for label, count, group in groups:
        if group <= 1 or not count:
            continue
        full_count, count = count, count * trained
        ring = (group - 1) / group
        if parallel.zero_stage >= 3:
            items.append(CommItem("dp", f"reduce-scatter ({label}gradients)", group, 1,
                                  count * g_bytes, ring))
            items.append(CommItem("dp", f"all-gather ({label}parameters, fwd and bwd)", group,
                                  2, full_count * w_bytes, ring))
        elif parallel.optimizer_shard > 1 or parallel.zero_stage >= 1:
            # the gradients are reduce-scattered in their own size; the updated weights
            # come back in theirs (Megatron-LM's distributed optimizer gathers its bf16
            # parameter buffer after reducing an fp32 gradient buffer)
            items.append(CommItem("dp", f"reduce-scatter ({label}gradients)", group, 1,
                                  count * g_bytes, ring))
            items.append(CommItem("dp", f"all-gather ({label}parameters)", group, 1,
                                  count * w_bytes, ring))
        else:
            items.append(CommItem("dp", f"all-reduce ({label}gradients)", group, 1,
                                  count * g_bytes, 2 * ring))
    if tp > 1:
        per_mb = 4 * layers + 2 * full_layers  # fwd 2 + bwd 2, recompute repeats fwd 2
        if parallel.sequence_parallel:  # each all-reduce becomes an AG + RS pair
            items.append(CommItem("tp", "all-gather", tp, m * per_mb, bsh_bytes,
                                  (tp - 1) / tp))
            items.append(CommItem("tp", "reduce-scatter", tp, m * per_mb, bsh_bytes,
                                  (tp - 1) / tp))
        else:
            items.append(CommItem("tp", "all-reduce", tp, m * per_mb, bsh_bytes,
                                  2 * (tp - 1) / tp))
    if pp > 1:
        message = bsh_bytes / tp  # scatter/gather (Narayanan et al. 2021 §4.1)
        items.append(CommItem("pp", "send/recv", 2, 2 * m * v, message, 1.0))
    if model.is_moe and ep > 1:
        moe_layers = sum(model.layer_is_moe(i) for i in range(layers))
        full_moe = min(full_layers, moe_layers)
        message = model.moe_top_k * bsh_bytes / (tp if parallel.sequence_parallel else 1)
        items.append(CommItem("ep", "all-to-all", ep, (4 * moe_layers + 2 * full_moe) * m,
                              message, (ep - 1) / ep))
    if cp > 1:
        kv_width = model.num_kv_heads * (model.qk_head_dim + model.value_head_dim) / tp
        kv_bytes = b * model.seq_length * kv_width * a_bytes  # K and V of the whole sequence
        ring = (cp - 1) / cp
        kv_name, grad_name = ("send/recv ring (K, V)", "send/recv ring (dK, dV)") \
            if cp_comm == "p2p" else ("all-gather (K, V)", "reduce-scatter (dK, dV)")
        items.append(CommItem("cp", kv_name + ", fwd and bwd", cp,
                              (2 * layers + full_layers) * m, kv_bytes, ring))
        items.append(CommItem("cp", grad_name + ", bwd", cp, layers * m, kv_bytes, ring))
    return CommVolume(tuple(items))
