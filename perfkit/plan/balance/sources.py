"""Layer types for the balancer: from perfkit's own models or from SAPP's description file.

:func:`layers_from_model` needs no measurement (forward GEMM FLOPs over an efficiency of
the peak; memories from :func:`perfkit.calc.activation_per_layer`);
:func:`read_sapp_layers` reads MindFormers SAPP's ``layers_description`` JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...calc import ActivationModel, activation_per_layer, layer_forward_flops
from ...calc.power_limit import sustained_peak
from ...errors import ConfigFileError, InvalidArgumentError, check_positive
from ...specs import Hardware, ModelSpec, ParallelConfig
from .layers import LayerType

__all__ = ["layers_from_model", "read_sapp_layers"]


_SAPP_MEMORY_KEYS = {"none": "memory_activation", "selective": "memory_select_rec",
                     "comm": "memory_select_comm", "both": "memory_both_comm_select",
                     "full": "memory_recompute"}
_SAPP_TIME_KEYS = {"none": "backward_time", "selective": "select_rec_time",
                   "comm": "select_comm_time", "both": "both_comm_select_time",
                   "full": "recompute_time"}


def layers_from_model(model: ModelSpec, parallel: ParallelConfig, hardware: Hardware,
                      efficiency: float = 0.5, dtype: str | None = None,
                      static_bytes_per_param: float = 10.0,
                      unit_bytes: float = 2**20,
                      activation_model: ActivationModel | None = None) -> list[LayerType]:
    """Head, body and tail layer types from perfkit's own models (no measurement needed).

    Forward time of a decoder layer = its forward GEMM FLOPs for one micro-batch / tp /
    (efficiency · peak), in milliseconds. Memory in ``unit_bytes`` (default MiB, as SAPP):
    parameters × ``static_bytes_per_param`` / tp (routed experts / ``ep × expert_tp``, the
    average of dense and MoE layers for a MoE model; 10 = the seed's MindSpore scheme without
    optimizer sharding; divide yourself for sharding), activation per recompute type from
    :func:`perfkit.calc.activation_per_layer` under ``activation_model`` ("none",
    "selective" as that model defines it, "full" = layer input only). The head is the
    embedding, the tail the output head and its fp32 logits.
    """
    check_positive("efficiency", efficiency)
    peak = sustained_peak(hardware, dtype) * efficiency
    tokens = parallel.micro_batch_size * model.seq_length
    fwd_flops = layer_forward_flops(model)["total"] * tokens / parallel.tp
    b = model.parameter_breakdown()
    mem = {r: activation_per_layer(model, parallel.micro_batch_size, parallel.tp,
                                   parallel.sequence_parallel, r, activation_model)[0]
           / unit_bytes
           for r in ("none", "selective", "full")}
    ms = 1e3 / peak
    if model.is_moe:  # routed experts split ep × expert_tp ways; the average layer
        moe = ((b["attention"] + b["shared_mlp"]) / parallel.tp + b["router"] + b["norms"]
               + b["mlp"] / (parallel.ep * parallel.expert_tp_size))
        dense = (b["attention"] + b["dense_mlp"]) / parallel.tp + b["norms"]
        layer_params = (b["moe_layers"] * moe + b["dense_layers"] * dense) / model.num_layers
    else:
        layer_params = b["layer"] / parallel.tp
    body = LayerType("decoder", "body", model.num_layers, fwd_flops * ms,
                     layer_params * static_bytes_per_param / unit_bytes, mem)
    logits = 2.0 * model.hidden_size * model.vocab_size * tokens / parallel.tp
    sbh = tokens * model.hidden_size
    head = LayerType("embedding", "head", 1, max(sbh / peak * 1e3, 1e-9),
                     b["embedding"] * static_bytes_per_param / parallel.tp / unit_bytes,
                     {"none": 2.0 * sbh / unit_bytes})
    tail = LayerType("output", "tail", 1, logits * ms,
                     (b["output"] + b["final_norm"]) * static_bytes_per_param / parallel.tp
                     / unit_bytes,
                     {"none": (2.0 * sbh + 4.0 * tokens * model.vocab_size / parallel.tp)
                      / unit_bytes})
    return [head, body, tail]


def read_sapp_layers(path_or_data: str | Path | Sequence[Mapping[str, Any]]) -> list[LayerType]:
    """Read SAPP's layer description JSON (``layers_description`` list, or a file of it).

    Keys per entry: ``name``, ``type`` (HEAD/BODY/TAIL), ``nb_layer``, ``time`` (or
    ``forward_time``), ``memory_parameter``, ``memory_activation``, ``memory_select_rec``,
    ``memory_select_comm``, ``memory_both_comm_select``, ``memory_recompute`` and the
    optional times ``backward_time``, ``select_rec_time``, ``select_comm_time``,
    ``both_comm_select_time``, ``recompute_time``.
    """
    source = "<data>"
    data: Any = path_or_data
    if isinstance(path_or_data, (str, Path)):
        source = str(path_or_data)
        try:
            data = json.loads(Path(path_or_data).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigFileError(source, f"cannot read file ({exc.strerror or exc})") from exc
        except json.JSONDecodeError as exc:
            raise ConfigFileError(source, f"not valid JSON at line {exc.lineno}: {exc.msg}") \
                from exc
    if isinstance(data, Mapping):
        data = data.get("layers_description", data.get("layers"))
    if not isinstance(data, list):
        raise ConfigFileError(source, "expected a list of layer descriptions")
    out = []
    for i, entry in enumerate(data):
        try:
            mem = {r: float(entry[k]) for r, k in _SAPP_MEMORY_KEYS.items() if k in entry}
            times = {r: float(entry[k]) for r, k in _SAPP_TIME_KEYS.items() if k in entry}
            kind = str(entry.get("type", "BODY")).lower()
            out.append(LayerType(
                name=str(entry.get("name", f"layer{i}")), kind=kind,
                count=int(entry.get("nb_layer", 1)),
                forward_time=float(entry.get("forward_time", entry["time"])),
                memory_parameter=float(entry.get("memory_parameter", 0.0)),
                memory_activation=mem, backward_time=times or None))
        except KeyError as exc:
            raise ConfigFileError(source, f"entry {i}: missing key {exc.args[0]!r}") from exc
        except (TypeError, ValueError, InvalidArgumentError) as exc:
            raise ConfigFileError(source, f"entry {i}: {exc}") from exc
    return out
