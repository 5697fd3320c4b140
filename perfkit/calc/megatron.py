"""Megatron-LM's ``theoretical_memory_usage`` formulas, for a ModelSpec and ParallelConfig.

Source: NVIDIA/Megatron-LM ``megatron/training/theoretical_memory_usage.py`` at d98e8a64
(``compute_weight_and_optimizer_memory``, ``compute_activation_memory``,
``compute_activation_memory_without_sp``, ``report_theoretical_memory``). Megatron prints
these numbers at start-up ("Theoretical memory footprints: weight and optimizer=... MB,
activation=... MB"); :func:`perfkit.calc.static_memory` with ``scheme="megatron"`` and
:func:`perfkit.calc.activation_memory` with ``convention="megatron"`` use them.

What Megatron assumes, and perfkit reproduces:

* the **most loaded shard is the first pipeline stage**: ``1/pp`` of the transformer block
  (the final norm included, so spread over the stages) plus the whole input embedding
  ``V·h/tp``; the output layer ``V·h/tp`` is counted only when ``pp = 1`` and the
  embeddings are untied (with ``pp > 1`` it lives on the last stage, which Megatron does
  not report);
* attention, dense MLPs and shared experts are split ``tp`` ways; norms, routers and the
  final norm are replicated; routed experts are split ``expert_tp × ep`` ways;
* 18 bytes per parameter (bf16 weight 2, fp32 gradient 4, fp32 main weight 4, Adam 8), or
  ``6 + 12/d`` with the distributed optimizer, ``d`` the data-parallel size for dense
  parameters and the expert data-parallel size ``world/(expert_tp·ep·pp)`` for experts;
* activations of the first stage only, with two formulas: sequence parallelism with
  selective recompute uses ``s·b·h·(18 + 4·f/h)`` per layer (34 for ``f = 4h``), all
  divided by ``tp``; anything else uses ``s·b·h·(10 + 24/tp)`` per layer (the selective
  row without SP — even without recompute, and even with full recompute) and multiplies
  the total by 1.05. Both add ``8·s·b·pp`` (token ids) and ``s·b·h·pp`` (embedding
  dropout), multiply by the interleaving penalty ``1 + (pp−1)/(pp·vpp)`` or, without
  interleaving, by ``min(1, m/pp)``, and with ``pp = 1`` add the output layer:
  ``4·s·b·h·(1 + V/h)`` with SP, ``2·(s·b·V/tp + s·b·h)`` without.

perfkit's own additions, for a model Megatron's estimator does not describe: learned
position embeddings (``s·h``, replicated, on the first stage) and linear biases are
counted (Megatron's estimator omits both); with context parallelism every activation term
uses the local ``s/cp`` tokens (Megatron's estimator has no ``cp``; its CP guide says
activation memory shrinks by the CP degree).
"""

from __future__ import annotations

from ..specs import ModelSpec, ParallelConfig

__all__ = ["megatron_parameters_on_first_stage", "megatron_weight_and_optimizer_bytes",
           "megatron_activation_per_layer", "megatron_activation_bytes"]


def megatron_parameters_on_first_stage(model: ModelSpec,
                                       parallel: ParallelConfig) -> dict[str, float]:
    """Parameters of Megatron's "most loaded model shard", split by how they are held.

    Returns ``tp_sharded``, ``replicated``, ``expert_sharded`` and ``total`` (the
    ``num_parameters_on_most_loaded_model_shard`` Megatron prints).
    """
    b = model.parameter_breakdown()
    p, tp = parallel.pp, parallel.tp
    experts_split = parallel.expert_tp_size * parallel.ep
    nm, nd = b["moe_layers"], b["dense_layers"]
    dense_mlp = b["dense_mlp"] if model.is_moe else b["mlp"]
    tp_block = (b["attention"] + dense_mlp) * nd + (b["attention"] + b["shared_mlp"]) * nm
    replicated_block = b["norms"] * nd + (b["norms"] + b["router"]) * nm + b["final_norm"]
    expert_block = b["mlp"] * nm if model.is_moe else 0
    tp_sharded = (tp_block / p + b["embedding"]) / tp
    if not model.tied_embeddings and p == 1:
        tp_sharded += b["output"] / tp
    replicated = replicated_block / p + b["position"]
    expert_sharded = expert_block / p / experts_split
    return {"tp_sharded": tp_sharded, "replicated": replicated,
            "expert_sharded": expert_sharded,
            "total": tp_sharded + replicated + expert_sharded}


def _bytes_per_parameter(distributed: bool, data_parallel: float) -> float:
    return 18.0 if not distributed else 6.0 + 12.0 / data_parallel


def megatron_weight_and_optimizer_bytes(model: ModelSpec, parallel: ParallelConfig,
                                        use_distributed_optimizer: bool | None = None
                                        ) -> float:
    """``compute_weight_and_optimizer_memory``: bytes of the most loaded shard.

    ``use_distributed_optimizer`` defaults to ``parallel.optimizer_shard > 1``; the dense
    parameters are then sharded over ``dp`` and the experts over
    ``world/(expert_tp·ep·pp)``, as Megatron does.
    """
    shard = megatron_parameters_on_first_stage(model, parallel)
    distributed = parallel.optimizer_shard > 1 if use_distributed_optimizer is None \
        else use_distributed_optimizer
    expert_dp = parallel.world_size / (parallel.expert_tp_size * parallel.ep * parallel.pp)
    return ((shard["tp_sharded"] + shard["replicated"])
            * _bytes_per_parameter(distributed, parallel.dp)
            + shard["expert_sharded"] * _bytes_per_parameter(distributed, expert_dp))


def _with_sp_path(parallel: ParallelConfig) -> bool:
    """Megatron's choice in ``report_theoretical_memory``."""
    return parallel.sequence_parallel and parallel.recompute == "selective"


def megatron_activation_per_layer(model: ModelSpec, parallel: ParallelConfig) -> float:
    """Activation bytes of one layer as Megatron's verbose report prints them.

    SP + selective: ``s·b·h·(18 + 4f/h)/tp``; otherwise ``s·b·h·(10 + 24/tp)``
    (``s`` is the local ``s/cp``).
    """
    s = model.seq_length / parallel.cp
    sbh = s * parallel.micro_batch_size * model.hidden_size
    t = parallel.tp
    if _with_sp_path(parallel):
        return sbh * (18 + 4 * model.ffn_hidden_size / model.hidden_size) / t
    return sbh * (10 + 24 / t)


def megatron_activation_bytes(model: ModelSpec, parallel: ParallelConfig) -> dict[str, float]:
    """Activation bytes of the first stage, ``compute_activation_memory[_without_sp]``.

    Returns ``layers`` (per-layer bytes × ``num_layers``, before the pipeline factor),
    ``embedding`` (``8·s·b·pp + s·b·h·pp``), ``pipeline_factor`` (interleaving penalty or
    ``min(1, m/pp)``), ``output`` (``pp = 1`` only), ``overhead_factor`` (1.05 on the no-SP
    path, else 1) and ``total`` — in bytes, already divided by ``tp`` where Megatron does.
    """
    s = model.seq_length / parallel.cp
    b, h, t = parallel.micro_batch_size, model.hidden_size, parallel.tp
    p, v, m = parallel.pp, parallel.vpp, parallel.num_micro_batches
    sbh = s * b * h
    sp_path = _with_sp_path(parallel)
    layers = megatron_activation_per_layer(model, parallel) * model.num_layers
    embedding = 8 * s * b * p + sbh * p
    if sp_path:
        embedding /= t
    if v > 1:
        factor = 1 + (p - 1) / (p * v)
    elif p > 1:
        factor = min(1.0, m / p)
    else:
        factor = 1.0
    output = 0.0
    if p == 1:
        output = 4 * sbh * (1 + model.vocab_size / h) / t if sp_path \
            else 2 * (s * b * model.vocab_size / t + sbh)
    overhead = 1.0 if sp_path else 1.05
    total = ((layers + embedding) * factor + output) * overhead
    return {"layers": layers, "embedding": embedding, "pipeline_factor": factor,
            "output": output, "overhead_factor": overhead, "total": total}
