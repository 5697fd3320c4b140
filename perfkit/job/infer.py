"""infer_job: the job a profile recorded, read field by field with the evidence.

The profile's readers run in order — the layout (:mod:`~perfkit.job.layout`), the model
and the micro-batching from the operator shapes (:func:`perfkit.analysis.shapes.
read_model`), the rest of the layout, the hardware (:mod:`~perfkit.job.device`) and the
measurements (:mod:`~perfkit.job.measured`) — then a config and the user's values win,
field by field.
"""

from __future__ import annotations

from typing import Any

from ..analysis import layout as L
from ..analysis.operators.attention_kernel import read_attention_kernel
from ..analysis.shapes import read_model
from ..errors import InvalidArgumentError
from .activations import ACTIVATIONS, ATTENTION_KERNEL, read_activations
from .core import WIDTH_FIELDS, Job, assemble
from .device import read_framework, read_hardware, read_static_scheme
from .fields import CORE_MODEL, JOB_FIELDS, FieldValue, Readings
from .global_batch import read_global_batch
from .gradients import read_reduced_gradient
from .inference import read_fused_moe_fields, read_step_tokens
from .layout import PIPELINE_STAGES, read_layout, read_sharding, read_vpp
from .measured import TRAINING_STEP, read_memory, read_step_time, read_training_step
from .micro_batches import read_micro_batches
from .network import read_network
from .tp_reductions import read_sequence_parallel, read_tp_from_reductions
from .tp_widths import read_tp_from_widths

__all__ = ["infer_job", "profile_values"]


def infer_job(profile_or_cluster: Any, config: Any = None, **overrides: Any) -> Job:
    """The job a profile recorded: model, parallel layout, hardware, batch, dtype, step.

    Parameters
    ----------
    profile_or_cluster : Profile or Cluster
        From :func:`perfkit.load`.
    config : str, path, dict or sequence of them, optional
        A job description that wins over the profile, field by field: a MindFormers YAML
        (:func:`perfkit.read_mindformers_config`), a Hugging Face ``config.json``
        (:meth:`ModelSpec.from_hf_config`), a MindFormers training log
        (:func:`perfkit.read_training_log`: step time, global batch, sequence length), or
        a dict of field values. See :func:`read_job_config`.
    **overrides
        Field values that win over everything (source ``"user"``), as for
        :meth:`Job.with_overrides`.

    Returns
    -------
    Job
        Its ``evidence`` says, per field, the value, the source and the file and what was
        read. Nothing is guessed silently: a field the profile cannot show is None with
        the reason, or a stated default.

    Notes
    -----
    Read from the profile (docs/job.md has the full table):

    * **layout** — ``parallel_group_info`` (torch_npu / MindSpore), ``pg_config``
      (Kineto) or the communication matrix: world size, dp / tp / pp / cp / ep; vpp from
      the first stage's pipeline sends per step (``m·(2·vpp − 1)``); optimizer sharding
      from reduce-scatter / all-gather in the data-parallel group; sequence parallelism
      from all-gather / reduce-scatter in the tensor-parallel group; where no tp is
      recorded, tp from the widths when two agree (:mod:`~perfkit.job.tp_widths`: the
      hidden size k × the query width per rank, and the MLP width per rank × k a standard
      MLP width), or, in a step with no backward pass, from the group of its all-reduces
      of activations (:mod:`~perfkit.job.tp_reductions`);
    * **model and batch** — the operator input shapes (:func:`perfkit.analysis.shapes.
      read_model`): hidden, FFN and vocabulary sizes, heads and key/value heads, layers,
      micro-batch size, sequence length, micro-batches per step, gated or plain MLP,
      recompute, dtype;
    * **hardware** — the device type: an Ascend NPU is the 910B preset (its task types
      ``AI_VECTOR_CORE`` / ``MIX_AIC`` exist from the 910B generation on), a GPU by its
      name in ``deviceProperties`` (every preset of :mod:`perfkit.specs.hardware_presets`
      lists the names it matches: V100 ... B200, MI250X ... MI325X, Ascend SoCs), through
      :func:`perfkit.analysis.efficiency.hardware.read_device`; a CPU run has none;
    * **measurements** — the step time (:func:`perfkit.analysis.measured_step_s`) and the
      framework allocator's peak memory.
    """
    meta = getattr(profile_or_cluster, "meta", None)
    if meta is None:
        raise InvalidArgumentError("profile_or_cluster", "must be a Profile or Cluster from "
                                   "perfkit.load", type(profile_or_cluster).__name__)
    read = profile_values(profile_or_cluster)
    base = {name: read[name] for name in JOB_FIELDS}
    seen = {name: (v.value, v.detail) for name, v in read.items()
            if v.source == "profile" and v.value is not None}
    job = assemble(dict(base), seen, base, str(meta.path))
    if config is not None:
        job = job.with_config(config)
    if overrides:
        job = job.with_overrides(**overrides)
    return job


def profile_values(profile: Any) -> dict[str, FieldValue]:
    """Every field as the profile shows it (source ``profile``), or its default."""
    out = Readings()
    put = out.put
    groups = read_layout(profile, out)
    read_tp_from_reductions(profile, out, groups)  # tp, where an inference step shows it
    tp, pp, dp = out["tp"].value, out["pp"].value, out["dp"].value

    # ---- model and micro-batching from the operator shapes ---------------------------
    stage_of = L.stage_of_ranks(groups)
    if not stage_of and PIPELINE_STAGES in out:  # msprof-analyze's stage rows gave pp
        stage_of = {r: i for i, st in enumerate(out[PIPELINE_STAGES].value) for r in st}
    reading = read_model(profile, tp=tp, stage_of=stage_of, pp=pp)
    if read_tp_from_widths(reading, out):  # tp unrecorded, but the widths show it
        tp, dp = out["tp"].value, out["dp"].value
        reading = read_model(profile, tp=tp, stage_of=stage_of, pp=pp)
    for name in ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
                 "head_dim", "ffn_hidden_size", "vocab_size", "mlp", "norm", "bias",
                 "position_embedding", "seq_length", "micro_batch_size",
                 "num_micro_batches", "dtype", "recompute", "recompute_layers"):
        put(name, reading.get(name), reading.details.get(name, "not read"))
    out["layers_per_stage"] = FieldValue(reading.get("layers_per_stage"), "profile",
                                         reading.details.get("layers_per_stage", ""))
    # the projection widths (query a·d, key/value g·d), known even when the heads are not
    # (3-D BSH / SBH attention): the Job's FLOPs need only them (Job.forward_flops_per_token)
    for key, name in (("_q_width", WIDTH_FIELDS[0]), ("_kv_width", WIDTH_FIELDS[1])):
        width = reading.values.get(key)
        if width:
            out[name] = FieldValue(int(width) * (tp or 1), "profile",
                                   "the attention inputs' width × tp")
    kernel, why = read_attention_kernel(profile)  # which fused kernel, by its names
    out[ACTIVATIONS] = read_activations(profile, reading, out["mlp"].value,
                                        out["dtype"].value,
                                        fused=why if kernel is not None else None)
    if kernel is not None:
        out[ATTENTION_KERNEL] = FieldValue(kernel, "profile", why)
    moe = reading.get("moe")
    put("num_experts", 1 if moe is False else None,
        reading.details.get("moe", "") + (": dense model" if moe is False else
                                          "; the expert count is not read"))
    put("moe_top_k", 1 if moe is False else None, out["num_experts"].detail)
    if moe:  # vLLM's fused MoE layer shows the expert count (and says what it hides)
        read_fused_moe_fields(profile, out)
    put("tied_embeddings", False, "the profile cannot show whether the output layer shares "
                                  "the embedding table: untied assumed", "default")
    put("name", None, "no preset name matched yet")
    if out["recompute"].value is None:
        put("recompute", "none", out["recompute"].detail + ": none assumed", "default")
    m = out["num_micro_batches"].value

    # ---- the rest of the layout ------------------------------------------------------
    if m is None and read_micro_batches(profile, put, pp or 1, out["world_size"].value,
                                        stage_of):
        # the sends were read as m with vpp 1: reading vpp from them again would be circular
        put("vpp", 1, "the micro-batches were read from the first stage's sends with vpp 1 "
                      "(an interleaved schedule cannot be told from that count): 1 assumed",
            "default")
    else:
        read_vpp(profile, put, pp, m, stage_of)
    read_sharding(profile, put, groups, dp, tp)
    read_sequence_parallel(out)
    put("zero_stage", 0, "a ZeRO stage is not visible in a profile (sharded optimizer "
                         "state shows as optimizer_shard): 0", "default")
    read_global_batch(out)

    # ---- hardware, measurements ------------------------------------------------------
    read_hardware(profile, put)
    if out["dtype"].value is None and out["hardware"].value is not None:
        hw = out["hardware"].value
        put("dtype", hw.default_dtype, out["dtype"].detail + f"; {hw.name}'s default "
                                                             f"{hw.default_dtype} assumed",
            "default")
    read_step_time(profile, put)
    read_memory(profile, put)
    read_training_step(profile, out)
    if TRAINING_STEP in out and out[TRAINING_STEP].value is False:
        read_step_tokens(profile, out, tp)  # an inference step's FLOPs count its tokens
    read_framework(profile, out)
    if all(out[n].value is None for n in CORE_MODEL):  # nothing of a transformer's shape
        read_network(profile, out)
    read_static_scheme(profile, out)
    read_reduced_gradient(profile, out)
    return dict(out)
