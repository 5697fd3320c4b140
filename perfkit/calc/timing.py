"""The calibrated step-time model: kernels, collectives, pipeline and optimizer of one step.

:func:`step_times` evaluates many layouts at once (numpy columns, one row per
configuration); :func:`perfkit.plan.predict` calls it with one row, and
:func:`perfkit.plan.search` with ``calibration=`` with every candidate, so both rank with
the same model. The simulator (:mod:`perfkit.simulate`) times its kernels with
:func:`gemm_seconds` and :func:`memory_seconds` and lays out the same passes, so a
simulated profile and this model agree by construction (tests check it).

What one step is made of, per rank
----------------------------------
* **Layer passes** (:func:`layer_costs`), per micro-batch and layer: the GEMMs of the
  attention and the MLP split ``tp`` ways, each timed on the size curve
  (:mod:`perfkit.calc.rates`) or, when its bytes outweigh its FLOPs, at the memory rate
  (roofline); the attention core (one fused kernel with flash attention, causal work
  halved, timed on its implementation's published curve by sequence length per call,
  head dimension, mask and pass, :mod:`perfkit.calc.attention_rate`; otherwise two
  batched GEMMs plus the softmax and dropout over ``a·s²`` elements, Korthikanti et al.
  2022); the memory-bound kernels (norms, residual adds,
  rotary embedding, MLP activation, dropout) from their bytes. The backward runs each
  GEMM twice (input and weight gradients), the flash-attention backward 2.5 times its
  forward (PyTorch ``flop_counter``), the memory-bound kernels with their gradient
  traffic.
* **Recompute**: a fully recomputed layer reruns its forward before its backward —
  entirely (``recompute_style="all"``, Megatron-LM, Narayanan et al. 2021 eq. (3)) or
  without the MLP output projection, its tensor-parallel reduction and the last residual
  add, whose outputs the backward never reads (``"needed"``, graph-mode frameworks such
  as MindSpore; the MindFormers guide's "20 % to 25 % more computation"); selective
  recompute reruns the attention core (Korthikanti et al. 2022 §5) and/or the MLP
  activation (the guide's SiLU/Mul ``select_recompute``).
* **Tensor parallelism**: two all-reduces forward and two backward per layer, or their
  all-gather / reduce-scatter halves under sequence parallelism, where the backward also
  all-gathers each column-parallel input again (Megatron-LM's implementation,
  Calculon's ``seq_par_ag_redo``); a recomputed forward repeats its collectives. They
  sit on the critical path of the micro-batch (``overlap["tp"]`` hides a share).
* **Pipeline**: each stage runs ``m`` micro-batches at its own pace, the slowest sets the
  steady state and the warm-up/cool-down bubble is ``(p − 1)/v`` of its per-micro-batch
  time (Narayanan et al. 2021 §2.2). Every activation a stage receives blocks it for the
  message time (Megatron's synchronous send/recv); the message is ``b·s·h/t`` bytes:
  Megatron scatters it over the tensor-parallel ranks and gathers it after the send,
  with or without sequence parallelism (Narayanan et al. 2021 §4.1, "scatter/gather
  communication optimization").
* **Context parallelism**: the key/value ring of each attention layer (forward, again in
  the backward with the gradients) overlaps that layer's attention core; only what the
  core does not cover is exposed (Megatron-LM context parallel).
* **Expert parallelism**: dispatch and combine all-to-alls forward and backward, exposed.
* **Data parallelism and the optimizer**: after the last backward the gradients are
  reduced (reduce-scatter with optimizer sharding, all-reduce otherwise) over the
  ``dp·cp`` replicas; with ``dp_buckets`` buckets all but the last overlap the last
  micro-batch's backward. Then the optimizer updates the device's share of the
  parameters (memory-bound, ``optimizer_bytes_per_param`` each) and, with sharding, the
  updated 16-bit weights are all-gathered. None of this scales with the micro-batches,
  which is why a layout that runs more micro-batches per step (strong scaling the other
  way) or holds fewer parameters per device gets faster per token — except where the
  framework adds up the micro-batches' gradients outside the GEMMs
  (``grad_accumulation``: DeepSpeed's bf16 optimizer, autograd's ``.grad``;
  :mod:`perfkit.calc.grad_accumulation`), a memory-bound pass per micro-batch charged to
  the ``optimizer`` part.
* **Contention**: traffic hidden under compute is not free; the compute beside it runs
  slower by ``Rates.overlap_contention`` (:mod:`perfkit.calc.contention`: 18.9 % on
  GPUs, Lee et al. 2025), charged to the part of the collective that was hidden.
* **Overhead** (fixed costs, each its own term): ``overhead_s`` per step,
  ``kernel_gap_s`` per kernel, ``layer_overhead_s`` per layer per micro-batch.
* **Frozen weights** (``trainable_fraction`` < 1, LoRA / PEFT): the frozen share of
  the weight-gradient GEMMs, of the gradient reduction, the weight all-gather and the
  optimizer update is left out.
* **Framework behaviour** (:mod:`perfkit.calc.behaviour`): ``tp_comm_overlap`` hides
  the tp traffic under the layer's compute (only the excess shows);
  ``param_gather_overlap`` hides the sharded optimizer's weight all-gather under the
  stage's first forward; ``dp_bucket_params`` / ``dp_bucket_per_layer`` set the
  gradient buckets from the parameters (Megatron's 40M, DDP's 25 MB, FSDP per layer).
  ``elementwise_kernels`` says how a layer's memory-bound kernels run: fused library
  kernels, eager PyTorch operator by operator (on 16-bit weights, or under autocast on
  fp32 weights, whose casts it counts), or compiled (:mod:`perfkit.calc.elementwise`).

Activations, keys and values, tokens and gathered weights travel in 16 bits, in 32 in an
fp32 or tf32 run (no mixed precision), whose gradients are 4 bytes too. Collectives are
priced at their group's shape on ``hardware.topology`` by
:func:`perfkit.calc.topology.collective_seconds`: ring inside a node (all-reduce
``2(n−1)/n·M``, all-gather / reduce-scatter and all-to-all ``(n−1)/n·M`` per rank),
hierarchical across nodes (inside, then each rank's ``M/r`` shard over the node's NICs),
plus ``link_latency_s`` per tier; ranks placed ``tp-cp-ep-dp-pp`` from the inside out
unless ``rank_order`` says otherwise. Inside a full-mesh node (HCCS, Infinity Fabric) a
group of ``r`` ranks has ``r − 1`` of a device's ``D − 1`` links
(:meth:`perfkit.specs.Node.bandwidth_among`): a tensor-parallel pair on a 910B server
all-reduces over one 28 GB/s link, not the NPU's 196 GB/s.

This module evaluates the step (:func:`step_times`, :func:`uniform_stages`); a layer's
times are :mod:`perfkit.calc.timing_layer`, its kernels :mod:`perfkit.calc.timing_kernels`.
"""

from __future__ import annotations

import numpy as np

from ..specs import Hardware, ModelSpec
from .activation import ActivationModel
from .contention import contention_share
from .grad_accumulation import step_accumulation_bytes
from .memory import full_precision, scheme_gradient_bytes
from .rates import GROUPS, Rates
from .recompute_ops import (
    op_recompute_seconds,
    op_recompute_tp_gathers,
    op_recompute_tp_halves,
)
from .timing_kernels import gemm_seconds, memory_seconds
from .timing_layer import LayerCosts, layer_costs
from .topology import collective_seconds, layout_groups, parse_order

__all__ = ["LayerCosts", "layer_costs", "gemm_seconds", "memory_seconds", "step_times",
           "uniform_stages", "PART_NAMES"]

#: Parts of a step, in the order :func:`step_times` reports them (they sum to the step).
PART_NAMES = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "pp_comm",
              "bubble", "dp_comm", "optimizer", "overhead")


def uniform_stages(cols: dict[str, np.ndarray], num_layers: int) -> dict[str, np.ndarray]:
    """Stage rows for configurations whose stages are alike (:func:`perfkit.plan.search`).

    Two rows per configuration — the first stage (embedding) and the last (output head)
    — with ``L/pp`` layers, ``full_layers_per_stage`` fully recomputed and, with
    ``recompute == 1`` (selective), the rest selective; a single row when ``pp == 1``.
    Middle stages are never slower than the first, so the slowest stage is among them.
    """
    pp = cols["pp"].astype(np.int64)
    count = len(pp)
    idx = np.arange(count)
    two = pp > 1
    cand = np.concatenate([idx, idx[two]])
    first = np.concatenate([np.ones(count, bool), np.zeros(int(two.sum()), bool)])
    last = np.concatenate([~two, np.ones(int(two.sum()), bool)])
    layers = (num_layers // pp)[cand].astype(float)
    full = cols["full_layers_per_stage"][cand].astype(float)
    selective = np.where(cols["recompute"][cand] == 1, layers - full, 0.0)
    return {"cand": cand, "layers": layers, "full": full, "selective": selective,
            "comm": np.zeros(len(cand)), "first": first, "last": last}


def _groups_priced(hardware: Hardware, rates: Rates, c: dict[str, np.ndarray],
                   order: tuple[str, ...]) -> dict[str, tuple]:
    """Each group's ``(n, ranks per node, B_in, B_nic)`` for :func:`collective_seconds`:
    the rank placement ``order`` (:func:`perfkit.calc.topology.layout_groups`, the first
    and last stages' pipeline neighbours) on ``hardware.topology``, the bandwidths times
    the group's link efficiency. ``B_in`` is the bandwidth to the group's peers in the
    node (:meth:`perfkit.specs.Node.bandwidth_among`: in a full mesh, one link per peer)."""
    node = hardware.topology
    shapes = layout_groups(c, node.devices_per_node, order)
    out = {}
    for name, (n, per_node) in shapes.items():
        group = "dp" if name == "edp" else name
        out[name] = (n, per_node, node.bandwidth_among(per_node) * rates.link(group, True),
                     node.nic_bandwidth_per_device * rates.link(group, False))
    return out


def _costs_columns(model: ModelSpec, hardware: Hardware, rates: Rates,
                   cols: dict[str, np.ndarray], am: ActivationModel | None,
                   dtype: str | None) -> dict[str, np.ndarray]:
    """LayerCosts fields as arrays, one call of :func:`layer_costs` per distinct key."""
    keys = [np.asarray(cols[k]).astype(np.int64) for k in (
        "micro_batch_size", "tp", "sequence_parallel", "cp", "ep", "expert_tp")]
    code = np.zeros(len(keys[0]), dtype=np.int64)
    for column in keys:  # one integer per distinct key (mixed radix), then one unique
        values, inv = np.unique(column, return_inverse=True)
        code = code * len(values) + inv.reshape(-1)
    _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    uniq = [tuple(int(column[i]) for column in keys) for i in first]
    fields = LayerCosts.__dataclass_fields__
    table = {name: np.empty(len(uniq)) for name in fields}
    for i, (b, t, q, c, e, x) in enumerate(uniq):
        lc = layer_costs(model, hardware, rates, int(b), int(t), bool(q), int(c), int(e),
                         int(x) or int(t), am, dtype)
        for name in fields:
            table[name][i] = getattr(lc, name)
    return {name: values[inverse] for name, values in table.items()}


def _ops_columns(model: ModelSpec, hardware: Hardware, rates: Rates,
                 cols: dict[str, np.ndarray], am: ActivationModel, dtype: str | None,
                 ops: tuple[str, ...]) -> tuple[np.ndarray, ...]:
    """Per configuration: seconds, tp halves, kernels and tp all-gathers of rerunning
    ``ops`` (one layer, one micro-batch)."""
    keys = np.stack([np.asarray(cols[k]).astype(np.int64).reshape(-1) for k in (
        "micro_batch_size", "tp", "sequence_parallel", "cp", "ep", "expert_tp")], axis=1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    table = np.zeros((4, len(uniq)))
    for j, (b, t, q, c, e, x) in enumerate(uniq.tolist()):
        sec, kern = op_recompute_seconds(model, hardware, rates, ops, b, t, bool(q), c, e,
                                         x or t, am, dtype)
        table[:, j] = (sec, op_recompute_tp_halves(ops, t, bool(q)), kern,
                       op_recompute_tp_gathers(ops, t, bool(q)))
    inverse = inverse.reshape(-1)
    return tuple(row[inverse] for row in table)


def step_times(model: ModelSpec, hardware: Hardware, rates: Rates,
               cols: dict[str, np.ndarray], stages: dict[str, np.ndarray] | None = None, *,
               params: dict[str, np.ndarray] | None = None,
               activation_model: ActivationModel | None = None,
               dtype: str | None = None,
               static_scheme: str | None = None,
               tensor_dtype: str | None = None,
               rank_order: str | tuple[str, ...] | None = None,
               recompute_ops: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    """Step time and its parts for every configuration of ``cols`` (see module docstring).

    Parameters
    ----------
    model, hardware, rates
        What runs, on what, at which rates.
    cols : dict of arrays
        One entry per configuration: ``dp, tp, pp, cp, ep, expert_tp`` (0 = tp),
        ``vpp, micro_batch_size, num_micro_batches, sequence_parallel, optimizer_shard``
        and, for :func:`uniform_stages`, ``recompute`` (0 none, 1 selective, 2 full) and
        ``full_layers_per_stage``.
    stages : dict of arrays, optional
        Stage rows (``cand`` index, ``layers``, ``full``, ``selective``, ``comm`` —
        layers whose tensor-parallel all-gathers are recomputed —, ``first``, ``last``);
        default :func:`uniform_stages`. ``selective`` layers rerun what
        ``activation_model.selective`` drops.
    params : dict of arrays, optional
        ``dense`` and ``experts`` parameters of the most loaded stage per device (as
        :func:`perfkit.calc.memory.stage_parameters`); needed for data parallelism and the
        optimizer.
    activation_model : ActivationModel, optional
        Fused attention, dropout, norm storage and the selective-recompute kind.
    dtype : str, optional
        The run's type (its peak; fp32 keeps 4-byte gradients).
    static_scheme : str, optional
        The job's static-memory scheme: the gradients' size in the data-parallel
        reduction when ``rates.gradient_bytes`` is None
        (:func:`perfkit.calc.memory.scheme_gradient_bytes`: 4 bytes under
        ``"megatron"`` unless ``dtype`` is fp16, 2 otherwise).
    tensor_dtype : str, optional
        The type of the run's tensors where ``dtype`` names another peak (the hardware
        lists none for it: :func:`perfkit.plan.run_types`); the gradients' default
        size follows it (4 bytes for an fp32 run). None: ``dtype``.
    rank_order : str, optional
        Rank placement, innermost first (default ``"tp-cp-ep-dp-pp"``): where each
        group's ranks sit on ``hardware.topology`` (:mod:`perfkit.calc.topology`).
    recompute_ops : tuple of str, optional
        Op-level selective recompute (``ParallelConfig.recompute_ops``): each
        ``selective`` layer reruns the forward of exactly these ops
        (:func:`perfkit.calc.recompute_ops.op_recompute_seconds`) and the
        tensor-parallel collectives they start or end
        (:func:`~perfkit.calc.recompute_ops.op_recompute_tp_halves`) — with ``core`` the
        context-parallel K/V ring, with ``permute`` the expert all-to-alls, as a full
        recompute does —, instead of what ``activation_model.selective`` drops.

    Returns
    -------
    dict of arrays
        :data:`PART_NAMES` (seconds; they sum to ``step_s``), ``step_s``, ``stage_s``
        (the slowest stage's time per micro-batch), ``tp_comm_raw_s`` ...
        ``dp_comm_raw_s`` (each group's traffic time before overlap, per step) and
        ``kernels`` (kernels per step on the slowest stage).
    """
    am = ActivationModel() if activation_model is None else activation_model
    c = {k: np.asarray(v) for k, v in cols.items()}
    c["expert_tp"] = np.where(c["expert_tp"] == 0, c["tp"], c["expert_tp"])
    st = uniform_stages(c, model.num_layers) if stages is None else stages
    rates = rates.resolved(hardware.name, dtype)  # once here, not per layer shape priced
    lc = _costs_columns(model, hardware, rates, c, am, dtype)
    wide = full_precision(tensor_dtype or dtype)  # an fp32 run sends 4-byte tensors
    if wide:
        lc = {**lc, **{k: 2.0 * lc[k] for k in ("act_bytes", "kv_bytes", "a2a_bytes")}}
    f = {k: c[k].astype(float) for k in ("dp", "tp", "pp", "cp", "ep", "expert_tp", "vpp",
                                         "num_micro_batches", "optimizer_shard")}
    dp, tp, pp, cp, ep, etp, v, m, osh = (f[k] for k in (
        "dp", "tp", "pp", "cp", "ep", "expert_tp", "vpp", "num_micro_batches",
        "optimizer_shard"))
    sp = c["sequence_parallel"].astype(bool)
    ovl, lat = rates.overlap, rates.link_latency_s
    # per-collective times of each group (one operation of its usual message)
    g = _groups_priced(hardware, rates, c, parse_order(rank_order))
    alg = rates.collective_algorithm
    half_tp = collective_seconds("all-gather", lc["act_bytes"], *g["tp"], lat, alg)
    # torchao's float8 tensor parallelism all-gathers float8 tensors (Rates.tp_gather_bytes)
    gather_scale = 1.0 if rates.tp_gather_bytes is None \
        else rates.tp_gather_bytes / (4.0 if wide else 2.0)
    half_ag = half_tp if gather_scale == 1.0 else collective_seconds(
        "all-gather", lc["act_bytes"] * gather_scale, *g["tp"], lat, alg)
    kv_x = collective_seconds("all-gather", lc["kv_bytes"], *g["cp"], lat, alg)
    a2a = collective_seconds("all-to-all", lc["a2a_bytes"], *g["ep"], lat, alg)
    msg_pp = np.where(pp > 1, collective_seconds("p2p", lc["act_bytes"] / tp, *g["pp"], lat,
                                                 alg), 0.0)
    # tensor-parallel halves (all-gather or reduce-scatter) per layer and micro-batch
    redo = sp & rates.sp_ag_redo
    tp_fb = 8.0 + np.where(redo, 2.0, 0.0)
    tp_rec_all = np.full(len(tp), 4.0)
    tp_rec_needed = np.where(sp, 3.0, 2.0)
    # of those halves, the all-gathers (sequence parallelism: one before the attention's
    # and one before the MLP's column-parallel GEMMs; their gradients' in the backward)
    tp_fb_ag = np.where(sp, 4.0, 0.0) + np.where(redo, 2.0, 0.0)
    rec_ag = np.where(sp, 2.0, 0.0)
    style_all = rates.recompute_style == "all"
    rec_t = lc["rec_all"] if style_all else lc["rec_needed"]
    rec_tp = tp_rec_all if style_all else tp_rec_needed
    rec_k = lc["kernels_rec_all"] if style_all else lc["kernels_rec_needed"]
    sel_t = lc["sel_core"] * ("attention_core" in am.selective) \
        + lc["sel_act"] * ("mlp_activation" in am.selective)
    sel_tp = np.zeros(len(tp))
    sel_ag = np.zeros(len(tp))
    sel_k = np.zeros(len(tp))
    sel_cp = sel_ep = 0.0  # whether the rerun repeats the K/V ring / the all-to-alls
    if recompute_ops is not None:
        sel_cp, sel_ep = float("core" in recompute_ops), float("permute" in recompute_ops)
        sel_t, sel_tp, sel_k, sel_ag = _ops_columns(model, hardware, rates, c, am, dtype,
                                                    tuple(recompute_ops))
    # context parallelism: the K/V ring overlaps the attention core of the same layer
    cp_fb = np.maximum(0.0, 2 * kv_x - lc["core_fwd"]) + np.maximum(0.0, 3 * kv_x
                                                                     - lc["core_bwd"])
    cp_rec = np.maximum(0.0, 2 * kv_x - lc["core_fwd"])
    ep_fb = 4.0 * a2a * lc["moe_share"]
    ep_rec = 2.0 * a2a * lc["moe_share"]
    # per stage row, per micro-batch
    i = st["cand"]
    n, full, sel, comm = st["layers"], st["full"], st["selective"], st["comm"]
    first, last = st["first"].astype(bool), st["last"].astype(bool)
    recv = np.where(pp[i] > 1, np.where(first, 2 * v[i] - 1, 0.0)
                    + np.where(last, 2 * v[i] - 1, 0.0)
                    + np.where(~first & ~last, 2 * v[i], 0.0), 0.0)
    recv = np.where((pp[i] > 1) & first & last, 0.0, recv)
    frozen = 1.0 - np.asarray(c.get("trainable_fraction", np.ones(len(dp))), dtype=float)
    tp_raw = _tp_seconds(n * tp_fb[i] + full * rec_tp[i] + sel * sel_tp[i] + comm * 2.0,
                         n * tp_fb_ag[i] + full * rec_ag[i] + sel * sel_ag[i]
                         + comm * np.where(sp[i], 2.0, 0.0), half_tp[i], half_ag[i])
    cp_raw = (n * 5.0 + (full + sel * sel_cp) * 2.0) * kv_x[i]  # forward 2, backward 3
    ep_raw = n * ep_fb[i] + (full + sel * sel_ep) * ep_rec[i]
    pp_raw = recv * msg_pp[i]
    row = {
        "compute": n * (lc["fwd"][i] + lc["bwd"][i] - frozen[i] * lc["wgrad"][i])
        + np.where(first, lc["emb"][i], 0.0)
        + np.where(last, lc["head"][i], 0.0),
        "recompute": full * rec_t[i] + sel * sel_t[i],
        "tp_comm": tp_raw * (1 - ovl["tp"]),
        "cp_comm": (n * cp_fb[i] + (full + sel * sel_cp) * cp_rec[i]) * (1 - ovl["cp"]),
        "ep_comm": ep_raw * (1 - ovl["ep"]),
        "pp_comm": pp_raw * (1 - ovl["pp"]),
    }
    if rates.tp_comm_overlap:  # userbuffers: the tp traffic hides under the layer's compute
        row["tp_comm"] = np.maximum(0.0, row["tp_comm"] - row["compute"] - row["recompute"])
    # the traffic hidden under compute slows that compute (perfkit.calc.contention)
    cont = contention_share(rates.overlap_contention, hardware.name)
    if cont:
        for part, raw_s in (("tp_comm", tp_raw), ("cp_comm", cp_raw), ("ep_comm", ep_raw),
                            ("pp_comm", pp_raw)):
            row[part] = row[part] + cont * np.maximum(0.0, raw_s - row[part])
    kernels_row = n * (lc["kernels_fwd"][i] + lc["kernels_bwd"][i]
                       - frozen[i] * lc["kernels_wgrad"][i]) + full * rec_k[i] + sel * sel_k[i] \
        + np.where(last, lc["kernels_head"][i], 0.0)
    row["overhead"] = kernels_row * rates.kernel_gap_s + n * rates.layer_overhead_s
    per_mb = sum(row.values())
    count = len(dp)
    order = np.lexsort((per_mb, i))  # by configuration, then stage time
    ends = np.r_[np.nonzero(np.diff(i[order]))[0], len(order) - 1]
    pick = np.empty(count, dtype=np.int64)
    pick[i[order][ends]] = order[ends]  # each configuration's slowest stage row
    slowest = per_mb[pick]
    out = {name: m * row[name][pick] for name in row}
    out["overhead"] = out["overhead"] + rates.overhead_s
    out["bubble"] = (pp - 1) / v * slowest
    # data parallelism and the optimizer, on the stage holding the most parameters
    if params is None:
        dense = np.zeros(count)
        experts = np.zeros(count)
    else:
        dense, experts = params["dense"], params["experts"]
    dense, experts = dense * (1.0 - frozen), experts * (1.0 - frozen)  # what trains
    sharded = osh > 1
    gbytes = rates.gradient_bytes if rates.gradient_bytes is not None \
        else scheme_gradient_bytes(static_scheme, tensor_dtype or dtype)

    def reduction(count_params: np.ndarray, shape: tuple) -> np.ndarray:
        kind = np.where(sharded, 1.0, 0.0)  # reduce-scatter with sharding, else all-reduce
        msg = count_params * gbytes
        t = kind * collective_seconds("reduce-scatter", msg, *shape, lat, alg) \
            + (1 - kind) * collective_seconds("all-reduce", msg, *shape, lat, alg)
        # no collective without parameters to reduce (a dense model's expert group)
        return np.where(count_params > 0, t, 0.0)

    reduce_s = reduction(dense, g["dp"]) + reduction(experts, g["edp"])
    wbytes = rates.param_gather_bytes if rates.param_gather_bytes is not None \
        else 4.0 if wide else 2.0  # the run's weights
    gather_s = np.where(sharded, collective_seconds("all-gather", dense * wbytes,
                                                    *g["dp"], lat, alg), 0.0)
    nb = np.full(count, float(rates.dp_buckets))
    if rates.dp_bucket_params > 0:
        nb = np.maximum(nb, np.ceil((dense + experts) / rates.dp_bucket_params))
    if rates.dp_bucket_per_layer:
        nb = np.maximum(nb, st["layers"][pick])
    last_bwd = lc["bwd"] * st["layers"][pick]  # the last micro-batch's backward
    bucket = reduce_s / nb
    exposed_reduce = np.maximum(bucket, reduce_s - last_bwd * (nb - 1) / nb)
    exposed_reduce = np.where(reduce_s > 0, exposed_reduce, 0.0)
    gather_raw = gather_s
    if rates.param_gather_overlap:  # under the next step's first forward of the stage
        gather_s = np.maximum(0.0, gather_s - lc["fwd"] * st["layers"][pick])
    out["dp_comm"] = (exposed_reduce + gather_s) * (1 - ovl["dp"])
    if cont:  # the gradient and weight traffic hidden under compute slows it
        out["dp_comm"] = out["dp_comm"] + cont * np.maximum(
            0.0, reduce_s + gather_raw - out["dp_comm"])
    updated = (dense + experts) / np.maximum(osh, 1)
    # the micro-batches' gradients added up outside the GEMMs (perfkit.calc.grad_accumulation)
    accumulated = step_accumulation_bytes(
        rates.grad_accumulation, tensor_dtype or dtype or hardware.default_dtype, gbytes, m,
        dense + experts, osh, c.get("zero_stage", np.zeros(count)))
    out["optimizer"] = np.where(updated > 0, (updated * rates.optimizer_bytes_per_param
                                              + accumulated + rates.memory_half_bytes)
                                / (rates.memory_efficiency * hardware.memory_bandwidth), 0.0)
    out["step_s"] = sum(out[name] for name in PART_NAMES)
    out["stage_s"] = slowest
    out["kernels"] = m * kernels_row[pick]
    raw = {"tp": _tp_seconds(st["layers"][pick] * tp_fb + full[pick] * rec_tp
                             + sel[pick] * sel_tp,
                             st["layers"][pick] * tp_fb_ag + full[pick] * rec_ag
                             + sel[pick] * sel_ag, half_tp, half_ag) * m,
           "cp": cp_raw[pick] * m, "ep": ep_raw[pick] * m, "pp": pp_raw[pick] * m,
           "dp": reduce_s + gather_s}
    for g in GROUPS:
        out[f"{g}_comm_raw_s"] = raw[g]
    return out


def _tp_seconds(halves: np.ndarray, gathers: np.ndarray, half: np.ndarray,
                half_gather: np.ndarray) -> np.ndarray:
    """Tensor-parallel time of ``halves`` collective halves, ``gathers`` of them
    all-gathers (at ``half_gather`` each, their own byte size) and the rest at ``half``."""
    return gathers * half_gather + (halves - gathers) * half
