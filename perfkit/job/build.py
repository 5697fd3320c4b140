"""The model and the parallel layout a job's values describe.

Values a config or the user gives must obey the rules of :class:`~perfkit.specs.ModelSpec`
and :class:`~perfkit.specs.ParallelConfig` (the error names the field); values read from
the profile that break one are set back to their default, and the evidence says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgumentError
from ..specs import ModelSpec, ParallelConfig
from .fields import CORE_MODEL, DEFAULT_VALUES, MODEL_FIELDS, FieldValue, field_label

__all__ = ["parallel_from_values", "model_from_values", "preset_of"]


def parallel_from_values(values: dict[str, FieldValue], strict: set[str]) -> ParallelConfig:
    """The ParallelConfig of ``values``; a field read from the profile that breaks a rule
    goes back to its default (``values`` records it), one from ``strict`` sources raises."""
    names = [f.name for f in dataclasses.fields(ParallelConfig)]
    kwargs = {}
    for name in names:
        v = values.get(name)
        if v is not None and v.value is not None:
            kwargs[name] = v.value
    pp = kwargs.get("pp", 1)
    m = values.get("num_micro_batches")
    if pp > 1 and ("num_micro_batches" not in kwargs or (
            m is not None and m.source == "default" and kwargs["num_micro_batches"] < pp)):
        # unknown micro-batches with a pipeline (or ParallelConfig's default 1, which no
        # pipeline runs): the fewest a pipeline runs, said as such
        kwargs["num_micro_batches"] = pp
        v = values["num_micro_batches"]
        values["num_micro_batches"] = FieldValue(
            pp, "default", f"{v.detail}; pp = {pp}, the fewest micro-batches a pipeline "
                           "runs, is used")
    try:
        return ParallelConfig(**kwargs)
    except InvalidArgumentError as exc:
        culprit = values.get(exc.parameter)
        if culprit is not None and culprit.source in strict:
            raise
        # a combination read from the profile that breaks a rule: keep the layout, note
        # the field that had to go back to its default
        for name in ("recompute_layers", "vpp", "num_micro_batches", "optimizer_shard",
                     "sequence_parallel", "ep"):
            v = values.get(name)
            if name in kwargs and (v is None or v.source not in strict):
                kwargs.pop(name)
                default = DEFAULT_VALUES.get(name, FieldValue(None, "default", ""))
                values[name] = FieldValue(default.value, "default",
                                          f"{v.detail if v else ''} — not used: {exc}")
                try:
                    return ParallelConfig(**kwargs)
                except InvalidArgumentError:
                    continue
        raise


#: The fields of a model's shape the others are read after: where none of the shape was
#: read, their reasons say it all (the heads, FFN, vocabulary and MLP follow from the same
#: kernels: :func:`_why_no_model`).
SHAPE_ROOTS = ("num_layers", "hidden_size", "seq_length")


def _why_no_model(values: dict[str, FieldValue], missing: list[str]) -> str:
    """Why no model: the missing fields, those of one reason named together; where none of
    the shape was read (a ResNet's trace: no attention kernel, no projection GEMM), only the
    reasons of :data:`SHAPE_ROOTS`, instead of eight fields' worth of one cause."""
    whole = all(n in missing for n in (*CORE_MODEL, "seq_length"))
    by_reason: dict[str, list[str]] = {}
    for n in (SHAPE_ROOTS if whole else missing):  # one reason's fields named together
        by_reason.setdefault(values[n].detail, []).append(field_label(n))
    reasons = "; ".join(f"{', '.join(names)} ({why})" for why, names in by_reason.items())
    if whole:
        return (f"none of its shape could be read from the profile: {reasons}; the other "
                "fields are read from the same kernels")
    return f"its shape cannot be read from the profile: {reasons}"


def model_from_values(values: dict[str, FieldValue], parallel: ParallelConfig,
                      observed: Mapping[str, tuple[Any, str]], strict: set[str]
                      ) -> ModelSpec | None:
    """The ModelSpec of ``values``, named after the preset its shape matches; None (and
    ``values["name"]`` says why) when a field is missing or the fields make no model."""
    missing = [n for n in (*CORE_MODEL, "seq_length") if values[n].value is None]
    if values["num_experts"].value is None:
        missing.append("num_experts")
    if missing:
        values["name"] = FieldValue(None, values["name"].source, _why_no_model(values, missing))
        return None
    kwargs = {n: values[n].value for n in MODEL_FIELDS if values[n].value is not None
              and n != "name"}
    kwargs["seq_length"] = values["seq_length"].value
    try:
        model = ModelSpec(**kwargs)
    except InvalidArgumentError as exc:
        culprit = values.get(exc.parameter)
        if culprit is not None and culprit.source in strict:
            raise
        values["name"] = FieldValue(None, "profile",
                                    f"the fields read do not make a model: {exc}")
        return None
    for name in ("head_dim", "norm", "bias", "position_embedding"):
        if values[name].value is None:
            values[name] = FieldValue(getattr(model, name), "default",
                                      values[name].detail + f"; ModelSpec's default for a "
                                      f"{model.mlp} MLP: {getattr(model, name)}")
    name = values["name"]
    if name.value is None or name.source not in ("user", "config"):
        preset = preset_of(model)
        if preset:
            layers = ModelSpec.preset(preset).num_layers
            note = "" if layers == model.num_layers else \
                f"; the profile shows {model.num_layers} of its {layers} layers"
            values["name"] = FieldValue(preset, name.source if name.value else "profile",
                                        f"the shape matches the {preset} preset (hidden, heads, "
                                        f"key/value heads, FFN, vocabulary, MLP){note}")
        else:
            values["name"] = FieldValue(None, "profile", "the shape matches no preset")
    model = dataclasses.replace(model, name=values["name"].value)
    return model


def preset_of(model: ModelSpec) -> str | None:
    """The model preset of the same shape (layers aside), if any."""
    keys = ("hidden_size", "num_attention_heads", "num_kv_heads", "ffn_hidden_size",
            "vocab_size", "mlp", "num_experts")
    for name in ModelSpec.presets():
        p = ModelSpec.preset(name)
        if all(getattr(p, k) == getattr(model, k) for k in keys):
            return name
    return None
