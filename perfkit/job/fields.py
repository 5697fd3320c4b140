"""The fields of a job, where a value can come from, and how values are written.

A job is one value per field of :data:`JOB_FIELDS`, each a :class:`FieldValue`: the value,
its source (one of :data:`SOURCES`) and what was read or why nothing could be.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError
from ..specs import Hardware

__all__ = ["SOURCES", "MODEL_FIELDS", "PARALLEL_FIELDS", "RUN_FIELDS", "JOB_FIELDS",
           "EVIDENCE_COLUMNS", "CORE_MODEL", "INT_FIELDS", "FLOAT_FIELDS", "BOOL_FIELDS",
           "CHOICES", "LABELS", "DEFAULT_VALUES", "FieldValue", "Readings", "field_label",
           "check_field", "same", "value_text"]

#: Where a value can come from, weakest last.
SOURCES = ("user", "config", "profile", "default")

#: Fields of the model, in the order of :class:`~perfkit.specs.ModelSpec`.
MODEL_FIELDS = ("name", "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
                "head_dim", "ffn_hidden_size", "vocab_size", "mlp", "norm", "bias",
                "position_embedding", "tied_embeddings", "num_experts", "moe_top_k")
#: Fields of the parallel layout (``world_size`` and ``cp`` are the job's, the rest
#: :class:`~perfkit.specs.ParallelConfig`'s).
PARALLEL_FIELDS = ("world_size", "dp", "tp", "pp", "vpp", "cp", "ep", "micro_batch_size",
                   "num_micro_batches", "sequence_parallel", "optimizer_shard", "zero_stage",
                   "recompute", "recompute_layers")
#: Fields of the run.
RUN_FIELDS = ("seq_length", "global_batch_size", "dtype", "hardware", "step_time_s",
              "peak_memory_bytes")
#: Every field of the evidence table, in its order.
JOB_FIELDS = MODEL_FIELDS + PARALLEL_FIELDS + RUN_FIELDS
#: Columns of :attr:`Job.evidence`.
EVIDENCE_COLUMNS = ("field", "value", "source", "detail")

CORE_MODEL = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
               "ffn_hidden_size", "vocab_size", "mlp")
INT_FIELDS = {"num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
               "ffn_hidden_size", "vocab_size", "num_experts", "moe_top_k", "world_size", "dp",
               "tp", "pp", "vpp", "cp", "ep", "micro_batch_size", "num_micro_batches",
               "optimizer_shard", "zero_stage", "seq_length", "global_batch_size"}
FLOAT_FIELDS = {"step_time_s", "peak_memory_bytes"}
BOOL_FIELDS = {"tied_embeddings", "sequence_parallel"}
CHOICES = {"mlp": ("gated", "gpt"), "norm": ("rmsnorm", "layernorm"),
            "bias": ("none", "qkv", "all"),
            "position_embedding": ("rope", "learned", "alibi", "none"),
            "recompute": ("none", "selective", "full"),
            "dtype": ("bf16", "fp16", "fp32", "tf32", "fp8", "int8")}
LABELS = {"num_layers": "layers", "hidden_size": "hidden size",
           "num_attention_heads": "attention heads", "num_kv_heads": "key/value heads",
           "ffn_hidden_size": "FFN size", "vocab_size": "vocabulary", "mlp": "MLP",
           "micro_batch_size": "micro-batch size", "num_micro_batches": "micro-batches",
           "seq_length": "sequence length", "global_batch_size": "global batch",
           "step_time_s": "step time", "head_dim": "head size"}


@dataclass(frozen=True)
class FieldValue:
    """One field's value, where it came from (:data:`SOURCES`) and what was read;
    ``caveat``, what the source said that the value cannot hold (a MindFormers YAML's
    per-stage selective recompute counts), which :meth:`perfkit.Job.problems` says."""

    value: Any
    source: str
    detail: str
    caveat: str = ""


class Readings(dict[str, FieldValue]):
    """The fields read so far, by name; :meth:`put` records one."""

    def put(self, name: str, value: Any, detail: str, source: str = "profile") -> None:
        """Record field ``name``: ``value`` from ``source``, with what was read."""
        self[name] = FieldValue(value, source, detail)


def field_label(name: str) -> str:
    """A field's name in words (``"hidden size"``)."""
    return LABELS.get(name, name.replace("_", " "))


def check_field(name: str) -> None:
    """Refuse a name that is not one of :data:`JOB_FIELDS`."""
    if name not in JOB_FIELDS:
        raise InvalidArgumentError("field", "must be one of " + ", ".join(JOB_FIELDS), name)


def same(a: Any, b: Any) -> bool:
    """Whether two values of a field agree (hardware by name, floats to 1e-6, sequences
    item by item)."""
    if isinstance(a, Hardware) or isinstance(b, Hardware):
        return getattr(a, "name", a) == getattr(b, "name", b)
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-6)
        except (TypeError, ValueError):
            return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return tuple(a) == tuple(b)
    return a == b


def value_text(value: Any) -> str:
    """A value as the evidence table and the messages write it."""
    if isinstance(value, Hardware):
        return value.name
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


#: What a field is when nothing gives it (fields not listed: None, "not set").
DEFAULT_VALUES = {
    "tied_embeddings": FieldValue(False, "default", "untied assumed"),
    "zero_stage": FieldValue(0, "default", "0 assumed"),
    "recompute": FieldValue("none", "default", "none assumed"),
    "sequence_parallel": FieldValue(False, "default", "off assumed"),
    **{n: FieldValue(1, "default", "1 assumed") for n in ("dp", "tp", "pp", "vpp", "cp", "ep",
                                                          "micro_batch_size",
                                                          "num_micro_batches",
                                                          "optimizer_shard", "num_experts",
                                                          "moe_top_k")},
}
