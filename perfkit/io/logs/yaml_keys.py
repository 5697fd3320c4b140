"""Keys a MindFormers YAML gives twice, and the job field each one sets.

YAML loaders keep the last of two equal keys of a mapping, silently (PyYAML's
``safe_load``, which MindFormers reads its configs with, does): a config with
``num_layers: 40`` and, further down, ``num_layers: 80`` runs 80 layers, and a second
``parallel_config:`` section replaces the first whole. perfkit reads it the same way, and
says so: :func:`duplicate_keys` finds such keys (with different values: a key repeated with
its own value changes nothing), and :func:`field_of` names the layout or model field each
one sets, so the sentence comes with that field as the job's other notes on the config do.
"""

from __future__ import annotations

from typing import Any

from ...specs.model_config import MINDFORMERS_KEYS

__all__ = ["duplicate_keys", "field_of", "PARALLEL_KEYS"]

#: ``parallel_config`` / ``runner_config`` / ``recompute_config`` keys -> the
#: ParallelConfig field they set (what :func:`perfkit.io.logs.config.read_mindformers_config`
#: reads).
PARALLEL_KEYS: dict[str, str] = {
    "data_parallel": "dp", "model_parallel": "tp", "tensor_model_parallel_size": "tp",
    "pipeline_stage": "pp", "micro_batch_num": "num_micro_batches",
    "gradient_accumulation_steps": "num_micro_batches", "batch_size": "micro_batch_size",
    "use_seq_parallel": "sequence_parallel", "pp_interleave_num": "vpp",
    "recompute": "recompute", "select_recompute": "recompute",
    "select_comm_recompute": "recompute", "recompute_config": "recompute",
    "parallel_config": "dp", "runner_config": "micro_batch_size",
    "optimizer_shard": "optimizer_shard", "optimizer_weight_shard_size": "optimizer_shard",
    "enable_parallel_optimizer": "optimizer_shard",
}
_MODEL_KEYS = {key: field for field, keys in MINDFORMERS_KEYS.items() for key in keys}


def _text(node: Any) -> str:
    """A node's value as written (a mapping or a list: its whole source span)."""
    import yaml

    if isinstance(node, yaml.ScalarNode):
        return str(node.value)
    return f"<{type(node).__name__} at line {node.start_mark.line + 1}>"


def duplicate_keys(node: Any, prefix: tuple[str, ...] = ()
                   ) -> list[tuple[tuple[str, ...], int, int]]:
    """Keys given twice, with different values, in any mapping under ``node`` (a composed
    YAML node): ``(key path, line of the first, line of the last)``, in document order."""
    import yaml

    out: list[tuple[tuple[str, ...], int, int]] = []
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, tuple[int, str]] = {}
        for key, value in node.value:
            name, line = str(key.value), key.start_mark.line + 1
            if name in seen and seen[name][1] != _text(value):
                out.append(((*prefix, name), seen[name][0], line))
            seen.setdefault(name, (line, _text(value)))
            out.extend(duplicate_keys(value, (*prefix, name)))
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            out.extend(duplicate_keys(item, prefix))
    return out


def field_of(keys: tuple[str, ...]) -> str | None:
    """The job field a key path sets (a ``model_config`` key: a ModelSpec field; a layout
    key: a ParallelConfig field), or None."""
    name = keys[-1]
    if len(keys) >= 2 and keys[-2] == "model_config" and name in _MODEL_KEYS:
        return _MODEL_KEYS[name]
    return PARALLEL_KEYS.get(name)
