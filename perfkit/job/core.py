"""The Job: the training job a profile recorded, with where each value came from.

:func:`assemble` builds one from a value per field (the model and the layout from
:mod:`~perfkit.job.build`); its methods add a config's or the user's values
(:mod:`~perfkit.job.config`) and say where the job disagrees with the profile
(:mod:`~perfkit.job.problems`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .._text_dtype import TEXT
from ..analysis.reduced_dtype import reductions_are_gradients
from ..calc.activation import ActivationModel
from ..calc.memory import framework_static_scheme
from ..errors import ParallelConfigError
from ..format import listed, time_text
from ..specs import Hardware, ModelSpec, ParallelConfig
from .activations import ACTIVATIONS, ATTENTION_KERNEL
from .build import model_from_values, parallel_from_values
from .config import read_job_config, user_values
from .device import FRAMEWORK, STATIC_SCHEME, scheme_reason
from .fields import (
    CORE_MODEL,
    DEFAULT_VALUES,
    JOB_FIELDS,
    MODEL_FIELDS,
    PARALLEL_FIELDS,
    SOURCES,
    FieldValue,
    check_field,
    value_text,
)
from .gradients import REDUCED_GRADIENT
from .layout import PIPELINE_BUBBLE, PP_UNREAD
from .measured import TRAINING_STEP
from .problems import disagreements

__all__ = ["Job", "assemble", "WIDTH_FIELDS"]

#: The attention projection widths the profile shows (``a·d`` query, ``g·d`` key/value,
#: tp shards put together), kept in :attr:`Job.observed` under these names: the FLOPs of
#: a model whose heads cannot be read need only them.
WIDTH_FIELDS = ("attention_width", "kv_width")


@dataclass(frozen=True)
class Job:
    """The training job a profile recorded, with where each value came from.

    Attributes
    ----------
    model : ModelSpec or None
        The model that ran — as profiled: a profile of 8 layers describes 8 layers even
        when the full model has 40. None when the shapes do not pin it down (the evidence
        says which field is missing and why).
    parallel : ParallelConfig
        The layout; fields the profile does not show are ParallelConfig's defaults, with
        source ``"default"`` in the evidence.
    hardware : Hardware or None
        The device preset (None for a CPU run or an unnamed device).
    global_batch_size, seq_length : int or None
        Sequences per step and tokens per sequence.
    dtype : str or None
        The matrix multiplications' input type (``"bf16"``, ``"fp16"``, ``"fp32"``).
    evidence : pandas.DataFrame
        One row per field of :data:`JOB_FIELDS`: ``field``, ``value``, ``source`` (one of
        :data:`SOURCES`) and ``detail`` (the file and what was read, or why nothing
        could be).
    step_time_s : float or None
        The measured step time (the profile's, or a training log's).
    peak_memory_bytes : float or None
        The framework allocator's peak allocated memory, most loaded rank.
    world_size : int or None
        Ranks of the job.
    observed : dict
        What the profile itself showed, per field (``{field: (value, detail)}``), kept
        when a config or the user set another value, so that :meth:`problems` can say
        where they disagree.
    path : str
        The profile this job was inferred from.
    """

    model: ModelSpec | None
    parallel: ParallelConfig
    hardware: Hardware | None
    global_batch_size: int | None
    seq_length: int | None
    dtype: str | None
    evidence: pd.DataFrame = field(repr=False, compare=False)
    step_time_s: float | None = None
    peak_memory_bytes: float | None = None
    world_size: int | None = None
    observed: Mapping[str, tuple[Any, str]] = field(default_factory=dict, repr=False,
                                                    compare=False)
    path: str = field(default="", compare=False)
    _values: Mapping[str, FieldValue] = field(default_factory=dict, repr=False, compare=False)
    _base: Mapping[str, FieldValue] = field(default_factory=dict, repr=False, compare=False)

    # ---- reading --------------------------------------------------------------------
    def value(self, name: str) -> Any:
        """The value used for field ``name`` (see :data:`JOB_FIELDS`)."""
        check_field(name)
        return self._values[name].value

    def source(self, name: str) -> str:
        """Where field ``name`` came from: one of :data:`SOURCES`."""
        check_field(name)
        return self._values[name].source

    def detail(self, name: str) -> str:
        """What was read for field ``name``, or why nothing could be."""
        check_field(name)
        return self._values[name].detail

    @property
    def profile_layers(self) -> int | None:
        """Layers the profile shows (all stages together), whatever the job says."""
        return self.observed.get("num_layers", (None, ""))[0]

    def partial_model(self) -> dict[str, Any]:
        """The model fields the job has, even when they do not make a full model.

        When the attention heads cannot be read (3-D BSH / SBH attention inputs without
        softmax statistics or rotary kernels) :attr:`model` is None —
        :class:`~perfkit.specs.ModelSpec` needs the heads — but the layers, hidden size,
        FFN width, vocabulary, MLP kind and sequence length that were read stay here, with
        the projection widths ``attention_width`` (``a·d``) and ``kv_width`` (``g·d``) the
        profile shows. :meth:`missing_model_fields` names
        what is missing; :meth:`forward_flops_per_token` needs only these.
        """
        names = [n for n in MODEL_FIELDS if n != "name"] + ["seq_length"]
        out = {n: self._values[n].value for n in names if self._values[n].value is not None}
        if self.model is not None:
            out.update(attention_width=self.model.attention_width,
                       kv_width=self.model.kv_width)
        for name in WIDTH_FIELDS:
            seen = self.observed.get(name, (None, ""))[0]
            if name not in out and seen:
                out[name] = seen
        return out

    def missing_model_fields(self) -> list[str]:
        """The fields a full :class:`~perfkit.specs.ModelSpec` needs that the job lacks."""
        return [n for n in (*CORE_MODEL, "seq_length", "num_experts")
                if self._values[n].value is None]

    def forward_flops_per_token(self, causal: bool = False) -> float | None:
        """Forward FLOPs per token of the model (``"exact"`` convention), or None.

        With a full model: :func:`perfkit.calc.flops.forward_flops` per token. Without
        the heads, from :meth:`partial_model`'s widths
        (:func:`perfkit.calc.flops.forward_flops_from_widths`, the same count): multi-head
        attention needs the projection widths, not how they split into heads. None when
        a width, the layers, the hidden, FFN or vocabulary size, the MLP kind or the
        sequence length is missing, or the model is a mixture of experts.
        """
        from ..calc.flops import forward_flops, forward_flops_from_widths

        if self.model is not None:
            return forward_flops(self.model, 1.0, causal=causal)
        p = self.partial_model()
        need = ("num_layers", "hidden_size", "ffn_hidden_size", "vocab_size", "mlp",
                "seq_length", *WIDTH_FIELDS)
        if any(n not in p for n in need) or p.get("num_experts", 1) != 1:
            return None
        return forward_flops_from_widths(1.0, p["num_layers"], p["hidden_size"],
                                         p["attention_width"], p["kv_width"],
                                         p["ffn_hidden_size"], p["vocab_size"],
                                         p["seq_length"], p["mlp"], causal)

    def missing(self) -> list[str]:
        """What the metrics need but the job lacks, as sentences (empty when complete)."""
        out = []
        if self.model is None:
            text = "the model: " + self._values["name"].detail
            have = self.partial_model()
            if have:
                text += ("; kept: " + ", ".join(f"{k} {v}" for k, v in have.items())
                         + (" (FLOPs per token known from the projection widths)"
                            if self.forward_flops_per_token() is not None else ""))
            out.append(text)
        if self.hardware is None:
            out.append("the hardware: " + self._values["hardware"].detail)
        if self.step_time_s is None:
            out.append("the step time: " + self._values["step_time_s"].detail)
        return out

    def unknowns(self) -> list[Any]:
        """What the profile did not give that some figure needs: one
        :class:`~perfkit.job.unknowns.Unknown` per field (why, what waits for it, how to
        give it); see :func:`perfkit.job.unknowns.unknowns`."""
        from .unknowns import unknowns

        return unknowns(self)

    def problems(self) -> list[str]:
        """Where the job disagrees with what the profile shows, one sentence each.

        A config or the user may describe another job than the one profiled — the full
        40-layer model of an 8-layer test run, another batch. Each field whose value is
        not the profile's gives a sentence such as "the job has 40 layers but the profile
        shows 8 (8 per stage)"; the global batch is also checked against
        dp × micro-batch × micro-batches. A profile that runs no backward pass (an
        inference or evaluation step, :meth:`training_step`) comes first: the step model
        counts a training step. Last, what a config said that the job cannot hold (a
        value's ``caveat``: per-stage selective recompute counts, counted on every layer).
        """
        out = disagreements(self._values, self.observed, self.parallel, self.world_size,
                            self.global_batch_size)
        out += [v.caveat for v in self._values.values() if v.caveat]
        if self.training_step() is False:  # the figures' premise itself does not hold
            detail = self.observed[TRAINING_STEP][1]
            out.insert(0, f"the profile is not a training step: {detail}; the job's "
                          "predicted step counts a training step (forward and backward), "
                          "its MFU, HFU and memory theory the forward pass (as the Overview "
                          "and the Memory tab do)")
        return out

    def training_step(self) -> bool | None:
        """Whether the profiled step trains (runs a backward pass): False for an inference
        or evaluation step, None where the profile cannot tell
        (:func:`perfkit.job.measured.read_training_step`)."""
        return self.observed.get(TRAINING_STEP, (None, ""))[0]

    @property
    def framework(self) -> str | None:
        """The framework the profile recorded (``"pytorch"``, ``"mindspore"``), or None
        where it cannot tell (:func:`perfkit.job.device.read_framework`)."""
        return self.observed.get(FRAMEWORK, (None, ""))[0]

    @property
    def static_scheme(self) -> str:
        """The static-memory convention of this job, as the Planner's calibration counts it:
        the one a simulated profile was made with
        (:func:`perfkit.job.device.read_static_scheme`), else its framework's
        (:func:`perfkit.calc.memory.framework_static_scheme`): ``"megatron"`` for PyTorch,
        on a GPU or on an Ascend NPU (torch_npu), ``"mindspore"`` otherwise."""
        seen = self.observed.get(STATIC_SCHEME)
        return str(seen[0]) if seen else framework_static_scheme(self.framework)

    @property
    def static_scheme_detail(self) -> str:
        """Why :attr:`static_scheme`, in words (what was read, or the framework's
        convention)."""
        seen = self.observed.get(STATIC_SCHEME)
        return str(seen[1]) if seen else scheme_reason(self.framework, self.dtype,
                                                       self.gradient_bytes)

    @property
    def reduced_gradient(self) -> Any:
        """What the profile's all-reduces and reduce-scatters move
        (:class:`~perfkit.analysis.reduced_dtype.ReducedGradient`: element size, type,
        how many records), or None where none records its type and size
        (:func:`perfkit.job.gradients.read_reduced_gradient`)."""
        return self.observed.get(REDUCED_GRADIENT, (None, ""))[0]

    @property
    def gradient_bytes(self) -> float | None:
        """Bytes per gradient element of the job's data-parallel reduction as the profile
        records it, where its layout makes every reduction the gradients' (data
        parallelism without tensor, context or expert parallelism:
        :func:`~perfkit.analysis.reduced_dtype.reductions_are_gradients`), else None: the
        scheme's size (:func:`perfkit.calc.precision.scheme_gradient_bytes`) then counts.

        The gradients static memory keeps are those the reduction moves
        (:mod:`perfkit.calc.precision`), so the Memory tab, the job's figures and the
        Planner's calibration all count this size."""
        reading = self.reduced_gradient
        if reading is None or not reductions_are_gradients(self.parallel):
            return None
        return float(reading.element_bytes)

    @property
    def activation_model(self) -> ActivationModel:
        """How the memory theory counts this job's activations, as the profile shows its
        attention (:func:`perfkit.job.activations.read_activations`): tensor by tensor
        with a fused (flash) attention kernel, else the seed's table."""
        return self.observed.get(ACTIVATIONS, (ActivationModel(), ""))[0]

    @property
    def attention_implementation(self) -> str | None:
        """The fused attention kernel the profile's kernel names show (``"flash3"``,
        ``"cudnn"``, ``"flash2"``, ``"flash1"``;
        :func:`perfkit.analysis.operators.attention_kernel.read_attention_kernel`), or None
        when they show none of them: the step model then prices attention as ``"auto"``
        does. :func:`perfkit.plan.calibrate` on the profile uses it."""
        return self.observed.get(ATTENTION_KERNEL, (None, ""))[0]

    @property
    def attention_detail(self) -> str:
        """Which kernels :attr:`attention_implementation` was read from ("" when none)."""
        return self.observed.get(ATTENTION_KERNEL, (None, ""))[1]

    @property
    def activation_detail(self) -> str:
        """What :attr:`activation_model` was read from."""
        return self.observed.get(ACTIVATIONS, (None, "the profile shows no attention "
                                                     "kernel: Korthikanti's table"))[1]

    @property
    def pp_unread(self) -> str | None:
        """Why the layout's pp is a placeholder, or None when it is not one.

        Where the profile measures a pipeline bubble but records no pipeline group, pp
        is 1 with source ``default`` (:func:`perfkit.job.layout.read_pipeline_bubble`):
        the run is pipelined and its pp not read. A pp from a config or the user is not
        a placeholder.
        """
        seen = self.observed.get(PIPELINE_BUBBLE)
        if seen is None or self.source("pp") != "default":
            return None
        return seen[1]

    def model_read_in_part(self) -> bool:
        """No full model, but some of its sizes (layers, hidden, FFN, vocabulary) read."""
        p = self.partial_model()
        return self.model is None and any(
            p.get(n) is not None for n in ("num_layers", "hidden_size", "ffn_hidden_size",
                                           "vocab_size"))

    def model_text(self, verbose: bool = False) -> str:
        """The model's fields in words, those not read said unknown: ``4 layers, h 256,
        heads unknown, FFN 688 gated, vocab 1000`` (a model read in part is not dropped
        whole: :meth:`partial_model`). ``verbose``: as ``perfkit info`` writes a whole
        model, ``hidden 256, 8 heads (2 key/value)``; else as the job's one line
        (:meth:`describe`) does, ``h 256, 8/2 heads``."""
        p = self.partial_model()

        def said(name: str, known: str, word: str) -> str:
            return known.format(p[name]) if p.get(name) is not None else f"{word} unknown"
        kv = p.get("num_kv_heads", "?")
        heads = ((f"{p['num_attention_heads']} heads ({kv} key/value)" if verbose else
                  f"{p['num_attention_heads']}/{kv} heads")
                 if p.get("num_attention_heads") else "heads unknown")
        ffn = said("ffn_hidden_size", "FFN {}", "FFN") + (f" {p['mlp']}" if p.get("mlp")
                                                            else "")
        return ", ".join((said("num_layers", "{} layers", "layers"),
                          said("hidden_size", "hidden {}" if verbose else "h {}",
                               "hidden size"), heads, ffn,
                          said("vocab_size", "vocab {}", "vocabulary")))

    def describe(self) -> str:
        """One line: model, layout, batch, device, dtype and step time."""
        m = self.model
        if m is not None:
            model = (f"{m.name or 'model'} ({m.num_layers} layers, h {m.hidden_size}, "
                     f"{m.num_attention_heads}/{m.num_kv_heads} heads, FFN "
                     f"{m.ffn_hidden_size} {m.mlp}, vocab {m.vocab_size})")
        elif self.model_read_in_part():
            model = f"model read in part ({self.model_text()})"
        else:
            model = "model unknown"
        p = self.parallel
        layout = f"dp {p.dp} × tp {p.tp} × pp {p.pp}" + (f" (vpp {p.vpp})" if p.vpp > 1
                                                          else "")
        if self.pp_unread:
            layout += f" ({PP_UNREAD})"
        batch = (f"batch {self.global_batch_size} × {self.seq_length}"
                 if self.global_batch_size and self.seq_length else "batch unknown")
        hw = self.hardware.name if self.hardware else "no hardware preset"
        step = f"step {time_text(self.step_time_s * 1e6)}" if self.step_time_s \
            else "step unknown"
        return f"{model}; {layout}; {batch}; {hw}, {self.dtype or 'dtype unknown'}; {step}"

    def to_frame(self) -> pd.DataFrame:
        """The evidence table (a copy)."""
        return self.evidence.copy()

    # ---- changing -------------------------------------------------------------------
    def with_overrides(self, **overrides: Any) -> Job:
        """A copy with some fields set by the user (source ``"user"``), the rest kept.

        Parameters
        ----------
        **overrides
            Any field of :data:`JOB_FIELDS` (``num_layers=40``, ``dp=8``,
            ``hardware="h100"``, ``step_time_s=1.5``); ``model=`` a ModelSpec or a preset
            name sets every model field; ``parallel=`` a ParallelConfig every layout field;
            a value of None clears an earlier user value (back to the config, profile or
            default).

        Raises
        ------
        InvalidArgumentError
            An unknown field, a value of the wrong kind, or a combination that breaks a
            rule of ModelSpec / ParallelConfig (the message names the field).
        """
        values = dict(self._values)
        for name, v in user_values(overrides).items():
            if v.value is None:
                values[name] = self._config_values().get(name, self._base[name])
            else:
                values[name] = v
        return assemble(values, self.observed, self._base, self.path,
                        strict_sources=("user",))

    def with_config(self, config: Any) -> Job:
        """A copy where a config (path, dict or several) wins over the profile.

        See :func:`read_job_config` for what is read from each kind of file.
        """
        values = dict(self._values)
        for name, v in read_job_config(config, self).items():
            if values.get(name) is None or values[name].source != "user":
                values[name] = v
        return assemble(values, self.observed, self._base, self.path,
                        strict_sources=("user", "config"))

    def reset(self) -> Job:
        """The job as the profile alone shows it (every config and user value dropped)."""
        return assemble(dict(self._base), self.observed, self._base, self.path)

    def _config_values(self) -> dict[str, FieldValue]:
        return {n: v for n, v in self._values.items() if v.source == "config"}


def assemble(values: dict[str, FieldValue], observed: Mapping[str, tuple[Any, str]],
             base: Mapping[str, FieldValue], path: str, strict_sources: Iterable[str] = ()
             ) -> Job:
    """Build the Job from one value per field (filling what depends on other fields).

    ``base`` is the job as the profile alone shows it (what a cleared user value falls
    back to); fields whose value a config or the user gives (``strict_sources``) raise
    when they break a rule, profile values that do are set back to their default.
    """
    values = dict(values)
    strict = set(strict_sources)
    for name in JOB_FIELDS:
        values.setdefault(name, base.get(name, DEFAULT_VALUES.get(
            name, FieldValue(None, "default", "not set"))))
    # the global batch follows the layout unless a config or the user gives it
    gb = values["global_batch_size"]
    if gb.source not in ("user", "config"):
        parts = [values[n] for n in ("dp", "micro_batch_size", "num_micro_batches")]
        if all(p.value for p in parts):
            srcs = {p.source for p in parts}
            # a product resting on an assumed factor is assumed too, and says which
            assumed = [w for w, p in zip(("dp", "the micro-batch size", "the micro-batches"),
                                         parts, strict=True) if p.source == "default"]
            src = "default" if assumed else next(s for s in SOURCES if s in srcs)
            dp, b, m = (p.value for p in parts)
            values["global_batch_size"] = FieldValue(
                dp * b * m, src, f"dp × micro-batch × micro-batches = {dp} × {b} × {m}"
                + (f" ({listed(assumed)} assumed)" if assumed else ""))
    parallel = parallel_from_values(values, strict)
    for name in PARALLEL_FIELDS:
        if hasattr(parallel, name) and values[name].value is None and \
                getattr(parallel, name) is not None:
            used = getattr(parallel, name)
            values[name] = FieldValue(used, "default", f"{values[name].detail}; ParallelConfig's "
                                                       f"default {used} is used")
    model = model_from_values(values, parallel, observed, strict)
    if model is not None and strict:
        rules = parallel.problems(model)
        given = {n for n in ("tp", "pp", "vpp", "ep", "num_micro_batches", "recompute_layers",
                             "num_layers", "num_attention_heads", "num_kv_heads",
                             "num_experts") if values[n].source in strict}
        if rules and given:
            param, _, rule = rules[0].partition(": ")
            raise ParallelConfigError(param, rule + (f" (and: {'; '.join(rules[1:])})"
                                                     if len(rules) > 1 else ""),
                                      getattr(parallel, param, None), rules=rules)
    hardware = values["hardware"].value
    evidence = pd.DataFrame({
        "field": pd.Series(JOB_FIELDS, dtype=TEXT),
        "value": pd.Series([value_text(values[n].value) if values[n].value is not None else None
                            for n in JOB_FIELDS], dtype=object),
        "source": pd.Series([values[n].source for n in JOB_FIELDS], dtype=TEXT),
        "detail": pd.Series([values[n].detail for n in JOB_FIELDS], dtype=TEXT)})
    return Job(model=model, parallel=parallel, hardware=hardware,
               global_batch_size=values["global_batch_size"].value,
               seq_length=values["seq_length"].value, dtype=values["dtype"].value,
               evidence=evidence, step_time_s=values["step_time_s"].value,
               peak_memory_bytes=values["peak_memory_bytes"].value,
               world_size=values["world_size"].value, observed=dict(observed), path=path,
               _values=values, _base=dict(base))
