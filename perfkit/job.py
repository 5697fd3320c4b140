"""Know the job: the model, parallel layout and hardware of the run a profile recorded.

Every number that mixes theory with measurement (MFU, memory theory, the planner, the
recompute trade-off) needs the job that ran. :func:`infer_job` reads it from the profile —
communication groups for the layout (:mod:`perfkit.analysis.layout`), operator input
shapes for the model and the micro-batching (:mod:`perfkit.analysis.shapes`), the device
type for the hardware, the step table for the measured step — and lets a description the
user gives win, field by field: a MindFormers YAML, a Hugging Face ``config.json``, a
MindFormers training log, or explicit values. The :class:`Job` it returns keeps, for every
field, the value used, where it came from (``profile``, ``config``, ``user`` or
``default``) and what was read or why nothing could be (``Job.evidence``). A field that
cannot be read stays None with the reason; a model whose shape is not pinned down is None
(``Job.model``), and a view without a model says so instead of computing with a default.
See docs/job.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .analysis import layout as L
from .analysis.memory import framework_component, memory_peaks
from .analysis.shapes import read_model
from .analysis.steps import measured_step_s, step_breakdown
from .errors import ConfigFileError, InvalidArgumentError, ParallelConfigError, PerfkitError
from .io.config import read_mindformers_config, read_rank_table
from .io.logs import read_training_log
from .specs import Hardware, ModelSpec, ParallelConfig

__all__ = ["Job", "infer_job", "read_job_config", "SOURCES", "MODEL_FIELDS",
           "PARALLEL_FIELDS", "RUN_FIELDS", "JOB_FIELDS", "EVIDENCE_COLUMNS"]

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

_CORE_MODEL = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
               "ffn_hidden_size", "vocab_size", "mlp")
_INT_FIELDS = {"num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
               "ffn_hidden_size", "vocab_size", "num_experts", "moe_top_k", "world_size", "dp",
               "tp", "pp", "vpp", "cp", "ep", "micro_batch_size", "num_micro_batches",
               "optimizer_shard", "zero_stage", "seq_length", "global_batch_size"}
_FLOAT_FIELDS = {"step_time_s", "peak_memory_bytes"}
_BOOL_FIELDS = {"tied_embeddings", "sequence_parallel"}
_CHOICES = {"mlp": ("gated", "gpt"), "norm": ("rmsnorm", "layernorm"),
            "bias": ("none", "qkv", "all"), "position_embedding": ("rope", "learned"),
            "recompute": ("none", "selective", "full"),
            "dtype": ("bf16", "fp16", "fp32", "tf32", "fp8", "int8")}
_LABELS = {"num_layers": "layers", "hidden_size": "hidden size",
           "num_attention_heads": "attention heads", "num_kv_heads": "key/value heads",
           "ffn_hidden_size": "FFN size", "vocab_size": "vocabulary", "mlp": "MLP",
           "micro_batch_size": "micro-batch size", "num_micro_batches": "micro-batches",
           "seq_length": "sequence length", "global_batch_size": "global batch",
           "step_time_s": "step time", "head_dim": "head size"}


@dataclass(frozen=True)
class _Value:
    value: Any
    source: str
    detail: str


def _label(name: str) -> str:
    return _LABELS.get(name, name.replace("_", " "))


# --------------------------------------------------------------------------------------
# the Job
# --------------------------------------------------------------------------------------

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
    _values: Mapping[str, _Value] = field(default_factory=dict, repr=False, compare=False)
    _base: Mapping[str, _Value] = field(default_factory=dict, repr=False, compare=False)

    # ---- reading --------------------------------------------------------------------
    def value(self, name: str) -> Any:
        """The value used for field ``name`` (see :data:`JOB_FIELDS`)."""
        _check_field(name)
        return self._values[name].value

    def source(self, name: str) -> str:
        """Where field ``name`` came from: one of :data:`SOURCES`."""
        _check_field(name)
        return self._values[name].source

    def detail(self, name: str) -> str:
        """What was read for field ``name``, or why nothing could be."""
        _check_field(name)
        return self._values[name].detail

    @property
    def profile_layers(self) -> int | None:
        """Layers the profile shows (all stages together), whatever the job says."""
        return self.observed.get("num_layers", (None, ""))[0]

    def missing(self) -> list[str]:
        """What the metrics need but the job lacks, as sentences (empty when complete)."""
        out = []
        if self.model is None:
            out.append("the model: " + self._values["name"].detail)
        if self.hardware is None:
            out.append("the hardware: " + self._values["hardware"].detail)
        if self.step_time_s is None:
            out.append("the step time: " + self._values["step_time_s"].detail)
        return out

    def problems(self) -> list[str]:
        """Where the job disagrees with what the profile shows, one sentence each.

        A config or the user may describe another job than the one profiled — the full
        40-layer model of an 8-layer test run, another batch. Each field whose value is
        not the profile's gives a sentence such as "the job has 40 layers but the profile
        shows 8 (8 per stage)"; the global batch is also checked against
        dp × micro-batch × micro-batches.
        """
        out = []
        for name, (seen, _detail) in self.observed.items():
            if seen is None or name not in self._values:
                continue
            used = self._values[name]
            if used.source not in ("user", "config") or used.value is None:
                continue
            if _same(used.value, seen):
                continue
            if name == "num_layers":
                per = self.observed.get("layers_per_stage", (None, ""))[0]
                extra = f" ({'+'.join(map(str, per))} per stage)" if per and len(per) > 1 \
                    else f" ({seen} per stage)" if per else ""
                out.append(f"the job has {used.value} layers ({used.source}) but the profile "
                           f"shows {seen}{extra}")
            else:
                out.append(f"the job has {_label(name)} {_text(used.value)} ({used.source}) "
                           f"but the profile shows {_text(seen)}")
        world = self.world_size
        if world and self.parallel.world_size != world:
            p = self.parallel
            out.append(f"dp × tp × pp = {p.dp} × {p.tp} × {p.pp} = {p.world_size} but the "
                       f"job has {world} ranks ({self._values['world_size'].source})")
        gbs = self.global_batch_size
        if gbs is not None and gbs != self.parallel.global_batch_size:
            p = self.parallel
            out.append(f"the global batch is {gbs} ({self._values['global_batch_size'].source})"
                       f" but dp × micro-batch × micro-batches = {p.dp} × "
                       f"{p.micro_batch_size} × {p.num_micro_batches} = "
                       f"{p.global_batch_size}")
        return out

    def describe(self) -> str:
        """One line: model, layout, batch, device, dtype and step time."""
        m = self.model
        model = (f"{m.name or 'model'} ({m.num_layers} layers, h {m.hidden_size}, "
                 f"{m.num_attention_heads}/{m.num_kv_heads} heads, FFN {m.ffn_hidden_size} "
                 f"{m.mlp}, vocab {m.vocab_size})") if m else "model unknown"
        p = self.parallel
        layout = f"dp {p.dp} × tp {p.tp} × pp {p.pp}" + (f" (vpp {p.vpp})" if p.vpp > 1
                                                          else "")
        batch = (f"batch {self.global_batch_size} × {self.seq_length}"
                 if self.global_batch_size and self.seq_length else "batch unknown")
        hw = self.hardware.name if self.hardware else "no hardware preset"
        step = f"step {self.step_time_s:.3g} s" if self.step_time_s else "step unknown"
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
        for name, v in _user_values(overrides).items():
            if v.value is None:
                values[name] = self._config_values().get(name, self._base[name])
            else:
                values[name] = v
        return _assemble(values, self.observed, self._base, self.path,
                         strict_sources=("user",))

    def with_config(self, config: Any) -> Job:
        """A copy where a config (path, dict or several) wins over the profile.

        See :func:`read_job_config` for what is read from each kind of file.
        """
        values = dict(self._values)
        for name, v in read_job_config(config, self).items():
            if values.get(name) is None or values[name].source != "user":
                values[name] = v
        return _assemble(values, self.observed, self._base, self.path,
                         strict_sources=("user", "config"))

    def reset(self) -> Job:
        """The job as the profile alone shows it (every config and user value dropped)."""
        return _assemble(dict(self._base), self.observed, self._base, self.path)

    def _config_values(self) -> dict[str, _Value]:
        return {n: v for n, v in self._values.items() if v.source == "config"}


def _check_field(name: str) -> None:
    if name not in JOB_FIELDS:
        raise InvalidArgumentError("field", "must be one of " + ", ".join(JOB_FIELDS), name)


def _same(a: Any, b: Any) -> bool:
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


def _text(value: Any) -> str:
    if isinstance(value, Hardware):
        return value.name
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


# --------------------------------------------------------------------------------------
# reading the profile
# --------------------------------------------------------------------------------------

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
      from all-gather / reduce-scatter in the tensor-parallel group;
    * **model and batch** — the operator input shapes (:func:`perfkit.analysis.shapes.
      read_model`): hidden, FFN and vocabulary sizes, heads and key/value heads, layers,
      micro-batch size, sequence length, micro-batches per step, gated or plain MLP,
      recompute, dtype;
    * **hardware** — the device type: an Ascend NPU is the 910B preset (its task types
      ``AI_VECTOR_CORE`` / ``MIX_AIC`` exist from the 910B generation on), a GPU by its
      name in ``deviceProperties`` (A100, H100, H200); a CPU run has none;
    * **measurements** — the step time (:func:`perfkit.analysis.measured_step_s`) and the
      framework allocator's peak memory.
    """
    meta = getattr(profile_or_cluster, "meta", None)
    if meta is None:
        raise InvalidArgumentError("profile_or_cluster", "must be a Profile or Cluster from "
                                   "perfkit.load", type(profile_or_cluster).__name__)
    read = _profile_values(profile_or_cluster)
    base = {name: read[name] for name in JOB_FIELDS}
    seen = {name: (v.value, v.detail) for name, v in read.items()
            if v.source == "profile" and v.value is not None}
    job = _assemble(dict(base), seen, base, str(meta.path))
    if config is not None:
        job = job.with_config(config)
    if overrides:
        job = job.with_overrides(**overrides)
    return job


def _profile_values(profile: Any) -> dict[str, _Value]:
    """Every field as the profile shows it (source ``profile``), or its default."""
    out: dict[str, _Value] = {}
    meta = profile.meta

    def put(name: str, value: Any, detail: str, source: str = "profile") -> None:
        out[name] = _Value(value, source, detail)

    # ---- layout from the communication groups ----------------------------------------
    groups = L.communication_groups(profile)
    sizes = L.group_sizes(groups)
    loaded = list(getattr(profile, "ranks", None) or [meta.rank])
    world_src = []
    world = meta.world_size
    if world:
        how = {"kineto": "distributedInfo",
               "mindspore_legacy": "MindSpore's rank_size"}.get(
            str(meta.source_format), "the ranks of the communication groups")
        world_src.append(f"{world} ({how})")
    if not groups.empty:
        members = {r for rs in groups["ranks"] for r in rs}
        biggest = int(groups["size"].dropna().max()) if groups["size"].notna().any() else 0
        cand = max([len(members), biggest] + ([world] if world else []))
        if cand != world:
            world_src.append(f"{cand} (members of the largest group)")
        world = cand
    if not world:
        world = len(loaded)
        world_src.append(f"{world} (the ranks loaded; no group or world size recorded)")
        put("world_size", world, "; ".join(world_src), "default")
    else:
        put("world_size", world, "world size " + "; ".join(world_src))
    have_groups = not groups.empty
    group_text = (f"{len(groups)} communication group(s) ({groups['source'].iloc[0]})"
                  if have_groups else "")
    strategy = {} if have_groups else L.recorded_strategy(profile)
    if strategy.get("rank_size") and out["world_size"].source == "default":
        put("world_size", strategy["rank_size"],
            f"{strategy['source']}: rank_size {strategy['rank_size']}")
        world = strategy["rank_size"]
    for kind in ("tp", "pp", "cp", "ep"):
        if kind in sizes:
            put(kind, sizes[kind][0], sizes[kind][1])
        elif have_groups:
            put(kind, 1, f"no {kind} group among the {group_text}")
        elif kind == "pp" and strategy.get("stage_num"):
            put("pp", strategy["stage_num"], f"{strategy['source']}: stage_num "
                                             f"{strategy['stage_num']} (pipeline stages)")
        elif kind == "tp" and _data_parallel_mode(strategy):
            put("tp", 1, f"{strategy['source']}: parallel mode "
                         f"{strategy['parallel_mode']} (no model parallelism)")
        elif strategy and kind in ("cp", "ep"):
            put(kind, 1, f"{strategy['source']}: parallel mode "
                         f"{strategy.get('parallel_mode', '?')}, no {kind}: 1 assumed",
                "default")
        else:
            put(kind, 1, "no communication groups recorded: 1 assumed", "default")
    tp, pp, cp = out["tp"].value, out["pp"].value, out["cp"].value
    if "dp" in sizes:
        put("dp", sizes["dp"][0], sizes["dp"][1])
    elif strategy and world % (tp * pp * cp) == 0:
        how = (f"{strategy['source']}: rank_size {world} / stage_num {pp}"
               f" (parallel mode {strategy.get('parallel_mode', '?')})")
        put("dp", world // (tp * pp * cp), how,
            "profile" if out["tp"].source == "profile" else "default")
    elif have_groups and world % (tp * pp * cp) == 0:
        kinds = set(groups["kind"].dropna())
        unnamed = groups[groups["kind"].isna()]
        smaller = sorted({int(n) for n in unnamed["size"].dropna() if int(n) < world})
        if smaller:
            put("dp", world // (tp * pp * cp),
                f"the {group_text} include unnamed groups of {smaller} ranks whose kind "
                f"(dp, tp, ...) the profile does not say: world {world} / (tp {tp} × pp "
                f"{pp}) assumed", "default")
        elif kinds <= {"world"}:
            put("dp", world // (tp * pp * cp),
                f"the {group_text} hold no tensor/pipeline group: every rank is a "
                f"data-parallel replica (world {world})")
        else:
            put("dp", world // (tp * pp * cp), f"world {world} / (tp {tp} × pp {pp}"
                + (f" × cp {cp}" if cp > 1 else "") + ") with no dp group listed")
    else:
        put("dp", max(1, world // (tp * pp * cp)),
            f"no communication groups recorded: all {world} rank(s) counted as data "
            "parallel (tp = pp = 1 assumed)", "default")
    dp = out["dp"].value

    # ---- model and micro-batching from the operator shapes ---------------------------
    stage_of = L.stage_of_ranks(groups)
    reading = read_model(profile, tp=tp, stage_of=stage_of, pp=pp)
    for name in ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
                 "head_dim", "ffn_hidden_size", "vocab_size", "mlp", "norm", "bias",
                 "position_embedding", "seq_length", "micro_batch_size",
                 "num_micro_batches", "dtype", "recompute", "recompute_layers"):
        put(name, reading.get(name), reading.details.get(name, "not read"))
    out["layers_per_stage"] = _Value(reading.get("layers_per_stage"), "profile",
                                     reading.details.get("layers_per_stage", ""))
    moe = reading.get("moe")
    put("num_experts", 1 if moe is False else None,
        reading.details.get("moe", "") + (": dense model" if moe is False else
                                          "; the expert count is not read"))
    put("moe_top_k", 1 if moe is False else None, out["num_experts"].detail)
    put("tied_embeddings", False, "the profile cannot show whether the output layer shares "
                                  "the embedding table: untied assumed", "default")
    put("name", None, "no preset name matched yet")
    if out["recompute"].value is None:
        put("recompute", "none", out["recompute"].detail + ": none assumed", "default")
    m = out["num_micro_batches"].value

    # ---- the rest of the layout ------------------------------------------------------
    _read_vpp(profile, put, pp, m, stage_of)
    _read_sharding(profile, put, groups, dp, tp)
    put("zero_stage", 0, "a ZeRO stage is not visible in a profile (sharded optimizer "
                         "state shows as optimizer_shard): 0", "default")
    b = out["micro_batch_size"].value
    if dp and b and m:
        put("global_batch_size", dp * b * m, f"dp × micro-batch × micro-batches = {dp} × "
                                             f"{b} × {m}")
    else:
        put("global_batch_size", None, "needs dp, the micro-batch size and the "
                                       "micro-batches per step")

    # ---- hardware, measurements ------------------------------------------------------
    _read_hardware(profile, put)
    if out["dtype"].value is None and out["hardware"].value is not None:
        hw = out["hardware"].value
        put("dtype", hw.default_dtype, out["dtype"].detail + f"; {hw.name}'s default "
                                                             f"{hw.default_dtype} assumed",
            "default")
    try:
        steps = step_breakdown(profile)
        step = measured_step_s(steps)
    except PerfkitError as exc:
        steps, step = pd.DataFrame(), math.nan
        why = str(exc)
    else:
        why = "; ".join(steps.attrs.get("notes", [])) or "no step with a duration"
    if math.isfinite(step) and step > 0:
        src = ", ".join(sorted({str(s) for s in steps.get("source", []) if s == s}))
        put("step_time_s", step, f"median over {steps['step'].nunique()} step(s) of the "
                                 f"slowest rank's step time ({src} step figures)")
    else:
        put("step_time_s", None, f"no measured step: {why}")
    _read_memory(profile, put)
    return out


def _data_parallel_mode(strategy: dict[str, Any]) -> bool:
    mode = str(strategy.get("parallel_mode", "")).lower().replace("-", "_")
    return mode in ("data_parallel", "stand_alone")


def _read_vpp(profile: Any, put: Any, pp: int, m: int | None, stage_of: dict[int, int]
              ) -> None:
    if pp == 1:
        put("vpp", 1, "pp = 1: no virtual stages")
        return
    sends = L.p2p_sends_per_step(profile)
    first = [r for r, s in stage_of.items() if s == 0]
    sends = sends[sends["rank"].isin(first)] if len(sends) else sends
    if not m or sends.empty:
        put("vpp", 1, "the first stage's pipeline sends or the micro-batches per step are "
                      "unknown: 1 assumed", "default")
        return
    per = int(sends["sends"].mode().iloc[0])
    # first stage: m·v forward sends (every chunk) + m·(v − 1) backward (not chunk 0)
    v2 = per / m + 1
    if v2 % 2 or v2 < 2:
        put("vpp", 1, f"{per} pipeline sends per step on the first stage do not fit "
                      f"m·(2·vpp − 1) with m = {m}: 1 assumed", "default")
        return
    put("vpp", int(v2 // 2), f"communication.json: {per} pipeline sends per step on the "
                             f"first stage = m·(2·vpp − 1) with m = {m}")


def _read_sharding(profile: Any, put: Any, groups: pd.DataFrame, dp: int, tp: int) -> None:
    used = L.collectives_by_group(profile)
    kinds = {str(g): (None if pd.isna(k) else str(k))
             for g, k in zip(groups["group"], groups["kind"], strict=False)}
    if len(kinds) == 1 and not any(kinds.values()) and dp > 1:
        kinds = dict.fromkeys(kinds, "dp")  # the one unnamed group is the dp group
    dp_ops = set().union(*[v for g, v in used.items() if kinds.get(g) == "dp"] or [set()])
    tp_ops = set().union(*[v for g, v in used.items() if kinds.get(g) == "tp"] or [set()])
    if dp == 1:
        put("optimizer_shard", 1, "dp = 1: nothing to shard over")
    elif dp_ops & {"reducescatter", "allgather"}:
        put("optimizer_shard", dp, "gradients reduce-scattered and parameters all-gathered "
                                   f"in the dp group ({', '.join(sorted(dp_ops))}): "
                                   f"optimizer state sharded over dp = {dp}")
    elif dp_ops:
        put("optimizer_shard", 1, f"the dp group only runs {', '.join(sorted(dp_ops))}: "
                                  "no sharding")
    else:
        put("optimizer_shard", 1, "no data-parallel collectives recorded: 1 assumed",
            "default")
    if tp == 1:
        put("sequence_parallel", False, "tp = 1: sequence parallelism needs tp > 1")
    elif tp_ops & {"reducescatter", "allgather"}:
        put("sequence_parallel", True, "the tp group runs all-gather / reduce-scatter "
                                       "(sequence parallelism)")
    elif tp_ops:
        put("sequence_parallel", False, f"the tp group only runs {', '.join(sorted(tp_ops))}")
    else:
        put("sequence_parallel", False, "no tensor-parallel collectives recorded: off "
                                        "assumed", "default")


_GPU_NAMES = (("h200", "h200"), ("h100", "h100"), ("a100", "a100"))


def _read_hardware(profile: Any, put: Any) -> None:
    meta = profile.meta
    device = meta.device_type
    if device == "npu":
        cores = set()
        try:
            k = profile.kernels
            if "core" in k.columns:
                from .analysis._frames import distinct

                cores = set(distinct(k, ["core"])["core"].dropna().astype(str))
        except Exception:  # noqa: BLE001 - the hardware is then read without the cores
            cores = set()
        a2 = sorted(cores & {"AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV"})
        if a2:
            put("hardware", Hardware.preset("ascend-910b"),
                f"an Ascend NPU ({meta.source_format}) whose tasks run on {', '.join(a2)}: "
                "the 910B generation (Atlas A2) or later; the chip model is not recorded, "
                "the ascend-910b preset is used (set yours for its exact peak)")
        else:
            put("hardware", Hardware.preset("ascend-910b"),
                f"an Ascend NPU ({meta.source_format}) whose generation the profile does "
                "not show: the ascend-910b preset is assumed", "default")
        return
    if device == "gpu":
        names = list(meta.extra.get("devices") or [])
        for p in getattr(profile, "profiles", []) or []:
            names += list(p.meta.extra.get("devices") or [])
        for name in names:
            low = str(name).lower()
            for key, preset in _GPU_NAMES:
                if key in low:
                    put("hardware", Hardware.preset(preset),
                        f"deviceProperties names the GPU {name!r}: the {preset} preset")
                    return
        put("hardware", None, ("deviceProperties names " + ", ".join(sorted(set(names)))
                               + ": no preset for it") if names else
            "a GPU trace without deviceProperties: the device is not named")
        return
    if device == "cpu":
        put("hardware", None, "a CPU-only run: no accelerator, so no peak to compare with")
        return
    put("hardware", None, "the profile does not record the device type")


def _read_memory(profile: Any, put: Any) -> None:
    try:
        peaks = memory_peaks(profile)
        comp = framework_component(profile)
    except PerfkitError as exc:
        put("peak_memory_bytes", None, f"memory could not be read: {exc}")
        return
    if peaks.empty or comp is None:
        put("peak_memory_bytes", None, "no framework allocator samples (profile_memory off, "
                                       "or the source records none)")
        return
    fw = peaks[peaks["component"] == comp].dropna(subset=["peak_allocated_bytes"])
    if fw.empty:
        put("peak_memory_bytes", None, f"component {comp} has no allocated samples")
        return
    row = fw.loc[fw["peak_allocated_bytes"].idxmax()]
    put("peak_memory_bytes", float(row["peak_allocated_bytes"]),
        f"peak allocated of the framework allocator ({comp}), rank {row['rank']} "
        "(the most loaded)")


# --------------------------------------------------------------------------------------
# configs and user values
# --------------------------------------------------------------------------------------

def read_job_config(config: Any, job: Job | None = None) -> dict[str, _Value]:
    """Field values from a job description the user gives (source ``"config"``).

    Parameters
    ----------
    config : str, path, dict, ModelSpec, ParallelConfig or a sequence of them
        * ``*.yaml`` / ``*.yml``: a MindFormers config (:func:`perfkit.read_mindformers_config`)
          — every model and layout field, and ``runner_config.global_batch_size`` when
          present (else dp × batch × micro-batches);
        * an HCCL rank table (``*.json`` with ``server_list``,
          :func:`perfkit.io.config.read_rank_table`): the world size;
        * ``*.json`` (or a folder holding ``config.json``): a Hugging Face config
          (:meth:`ModelSpec.from_hf_config`) — the model fields; its
          ``max_position_embeddings`` is the context limit, not the training length, so
          the sequence length stays the profile's;
        * any other file: a MindFormers training log (:func:`perfkit.read_training_log`)
          — the median ``per_step_time``, and the ``global_batch_size`` /
          ``seq_length`` it prints;
        * a dict: field values (as for :meth:`Job.with_overrides`), or a loaded
          MindFormers / Hugging Face config (recognised by its keys);
        * a ModelSpec or ParallelConfig: its fields.
    job : Job, optional
        The job being completed (gives a Hugging Face config its sequence length).

    Returns
    -------
    dict
        ``{field: value with source "config" and the file and key read}``.

    Raises
    ------
    ConfigFileError
        A file that cannot be read as any of these (the message names it).
    """
    if isinstance(config, (list, tuple)):
        out: dict[str, _Value] = {}
        for item in config:
            out.update(read_job_config(item, job))
        return out
    if isinstance(config, ModelSpec):
        return _model_values(config, "config", "a ModelSpec given as config")
    if isinstance(config, ParallelConfig):
        return _parallel_values(config, "config", "a ParallelConfig given as config")
    if isinstance(config, Mapping):
        return _dict_config(config, job)
    path = Path(str(config)).expanduser()
    if not path.exists():
        raise ConfigFileError(path, "no such file; expected a MindFormers YAML, a Hugging Face "
                                    "config.json or a training log")
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        model, parallel, extras = read_mindformers_config(path)
        where = f"{path.name} (MindFormers YAML)"
        out = _model_values(model, "config", where)
        out.update(_parallel_values(parallel, "config", where))
        out["seq_length"] = _Value(model.seq_length, "config", f"{where}: model_config."
                                                               "seq_length")
        gbs = extras.get("global_batch_size")
        if gbs:
            out["global_batch_size"] = _Value(int(gbs), "config",
                                              f"{where}: runner_config global batch")
        return out
    if suffix == ".json":
        table = read_rank_table(path)
        if table is not None:
            where = f"{path.name} (rank table)"
            return {"world_size": _Value(table["world_size"], "config",
                                         f"{where}: {table['world_size']} devices on "
                                         f"{table['servers']} server(s)")}
    if suffix == ".json" or path.is_dir():
        seq = job.seq_length if job is not None and job.seq_length else None
        model = ModelSpec.from_hf_config(path, seq_length=seq)
        where = f"{path.name} (Hugging Face config)"
        out = _model_values(model, "config", where)
        if seq is None:
            out["seq_length"] = _Value(model.seq_length, "config",
                                       f"{where}: max_position_embeddings (the profile shows "
                                       "no sequence length)")
        return out
    return _log_values(path)


def _log_values(path: Path) -> dict[str, _Value]:
    try:
        log = read_training_log(path)
    except PerfkitError as exc:
        raise ConfigFileError(path, "not a MindFormers YAML (.yaml), a Hugging Face config "
                                    f"(.json) nor a training log: {exc}") from None
    where = f"{path.name} (training log)"
    out: dict[str, _Value] = {}
    times = log["per_step_time_ms"].dropna()
    if len(times) > 1:
        times = times.iloc[1:]  # the first step includes compilation
    if len(times):
        out["step_time_s"] = _Value(float(times.median()) / 1e3, "config",
                                    f"{where}: median per_step_time of {len(times)} step "
                                    "line(s) (the first step left out: it compiles)")
    for name in ("global_batch_size", "seq_length"):
        hit = log.attrs.get("settings", {}).get(name)
        if hit:
            out[name] = _Value(int(hit[0]), "config", f"{where}: line {hit[1]} prints "
                                                      f"{name}: {hit[0]}")
    return out


def _dict_config(config: Mapping[str, Any], job: Job | None) -> dict[str, _Value]:
    keys = set(config)
    if "model" in keys and isinstance(config.get("model"), Mapping):
        model = ModelSpec.from_mindformers_yaml(config)
        return _model_values(model, "config", "a MindFormers config dict")
    if keys & {"num_hidden_layers", "n_layer", "n_embd"}:
        seq = job.seq_length if job is not None and job.seq_length else None
        model = ModelSpec.from_hf_config(config, seq_length=seq)
        return _model_values(model, "config", "a Hugging Face config dict")
    return {n: _Value(v.value, "config", "a dict given as config")
            for n, v in _user_values(config).items()}


def _model_values(model: ModelSpec, source: str, where: str) -> dict[str, _Value]:
    out = {}
    for name in MODEL_FIELDS:
        out[name] = _Value(getattr(model, name), source, f"{where}: {name}")
    return out


def _parallel_values(parallel: ParallelConfig, source: str, where: str) -> dict[str, _Value]:
    out = {}
    for name in PARALLEL_FIELDS:
        if hasattr(parallel, name):
            out[name] = _Value(getattr(parallel, name), source, f"{where}: {name}")
    out["world_size"] = _Value(parallel.world_size, source, f"{where}: dp × tp × pp")
    return out


def _user_values(overrides: Mapping[str, Any]) -> dict[str, _Value]:
    out: dict[str, _Value] = {}
    for name, value in overrides.items():
        if name == "model":
            if value is None:
                out.update({n: _Value(None, "user", "") for n in MODEL_FIELDS})
                continue
            model = ModelSpec.preset(value) if isinstance(value, str) else value
            if not isinstance(model, ModelSpec):
                raise InvalidArgumentError("model", "must be a ModelSpec or a preset name",
                                           type(value).__name__)
            where = f"preset {value}" if isinstance(value, str) else "a ModelSpec"
            out.update(_model_values(model, "user", where))
            continue
        if name == "parallel":
            if not isinstance(value, ParallelConfig):
                raise InvalidArgumentError("parallel", "must be a ParallelConfig",
                                           type(value).__name__)
            out.update(_parallel_values(value, "user", "a ParallelConfig"))
            continue
        _check_field(name)
        out[name] = _Value(_coerce(name, value), "user", "set by the user")
    return out


def _coerce(name: str, value: Any) -> Any:
    """A user value in the field's type (text from a widget included)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if name == "hardware":
        if isinstance(value, Hardware):
            return value
        return Hardware.preset(str(value).strip())
    if name in _INT_FIELDS:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InvalidArgumentError(name, "must be a whole number", value) from None
        if number != int(number) or number < (0 if name == "zero_stage" else 1):
            raise InvalidArgumentError(name, "must be a whole number >= 1"
                                       if name != "zero_stage" else "must be 0..3", value)
        return int(number)
    if name in _FLOAT_FIELDS:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InvalidArgumentError(name, "must be a number", value) from None
        if not number > 0:
            raise InvalidArgumentError(name, "must be > 0", value)
        return number
    if name in _BOOL_FIELDS:
        if isinstance(value, str):
            low = value.strip().lower()
            if low not in ("true", "false", "yes", "no", "1", "0"):
                raise InvalidArgumentError(name, "must be true or false", value)
            return low in ("true", "yes", "1")
        return bool(value)
    if name in _CHOICES:
        text = str(value).strip().lower()
        if text not in _CHOICES[name]:
            raise InvalidArgumentError(name, "must be one of " + ", ".join(_CHOICES[name]),
                                       value)
        return text
    if name == "recompute_layers":
        if isinstance(value, str):
            parts = [p for p in value.replace("[", "").replace("]", "").split(",")
                     if p.strip()]
            try:
                nums = tuple(int(p) for p in parts)
            except ValueError:
                raise InvalidArgumentError(name, "must be a number or numbers per stage "
                                           "(e.g. 4,0)", value) from None
            return nums[0] if len(nums) == 1 else nums
        return tuple(value) if isinstance(value, (list, tuple)) else value
    if name == "name":
        return str(value)
    return value


_DEFAULT_VALUES = {
    "tied_embeddings": _Value(False, "default", "untied assumed"),
    "zero_stage": _Value(0, "default", "0 assumed"),
    "recompute": _Value("none", "default", "none assumed"),
    "sequence_parallel": _Value(False, "default", "off assumed"),
    **{n: _Value(1, "default", "1 assumed") for n in ("dp", "tp", "pp", "vpp", "cp", "ep",
                                                       "micro_batch_size",
                                                       "num_micro_batches",
                                                       "optimizer_shard", "num_experts",
                                                       "moe_top_k")},
}


# --------------------------------------------------------------------------------------
# assembling
# --------------------------------------------------------------------------------------

def _assemble(values: dict[str, _Value], observed: Mapping[str, tuple[Any, str]],
              base: Mapping[str, _Value], path: str, strict_sources: Iterable[str] = ()
              ) -> Job:
    """Build the Job from one value per field (filling what depends on other fields).

    ``base`` is the job as the profile alone shows it (what a cleared user value falls
    back to); fields whose value a config or the user gives (``strict_sources``) raise
    when they break a rule, profile values that do are set back to their default.
    """
    values = dict(values)
    strict = set(strict_sources)
    for name in JOB_FIELDS:
        values.setdefault(name, base.get(name, _DEFAULT_VALUES.get(
            name, _Value(None, "default", "not set"))))
    # the global batch follows the layout unless a config or the user gives it
    gb = values["global_batch_size"]
    if gb.source not in ("user", "config"):
        parts = [values[n] for n in ("dp", "micro_batch_size", "num_micro_batches")]
        if all(p.value for p in parts):
            srcs = {p.source for p in parts}
            src = next(s for s in SOURCES if s in srcs)
            dp, b, m = (p.value for p in parts)
            values["global_batch_size"] = _Value(dp * b * m, src,
                                                 f"dp × micro-batch × micro-batches = {dp} × "
                                                 f"{b} × {m}")
    parallel = _parallel(values, strict)
    for name in PARALLEL_FIELDS:
        if hasattr(parallel, name) and values[name].value is None and \
                getattr(parallel, name) is not None:
            used = getattr(parallel, name)
            values[name] = _Value(used, "default", f"{values[name].detail}; ParallelConfig's "
                                                   f"default {used} is used")
    model = _model(values, parallel, observed, strict)
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
        "field": pd.Series(JOB_FIELDS, dtype="string"),
        "value": pd.Series([_text(values[n].value) if values[n].value is not None else None
                            for n in JOB_FIELDS], dtype=object),
        "source": pd.Series([values[n].source for n in JOB_FIELDS], dtype="string"),
        "detail": pd.Series([values[n].detail for n in JOB_FIELDS], dtype="string")})
    return Job(model=model, parallel=parallel, hardware=hardware,
               global_batch_size=values["global_batch_size"].value,
               seq_length=values["seq_length"].value, dtype=values["dtype"].value,
               evidence=evidence, step_time_s=values["step_time_s"].value,
               peak_memory_bytes=values["peak_memory_bytes"].value,
               world_size=values["world_size"].value, observed=dict(observed), path=path,
               _values=values, _base=dict(base))


def _parallel(values: dict[str, _Value], strict: set[str]) -> ParallelConfig:
    names = [f.name for f in dataclasses.fields(ParallelConfig)]
    kwargs = {}
    for name in names:
        v = values.get(name)
        if v is not None and v.value is not None:
            kwargs[name] = v.value
    pp = kwargs.get("pp", 1)
    if pp > 1 and "num_micro_batches" not in kwargs:
        # unknown micro-batches with a pipeline: the fewest a pipeline runs, said as such
        kwargs["num_micro_batches"] = pp
        v = values["num_micro_batches"]
        values["num_micro_batches"] = _Value(pp, "default", f"{v.detail}; pp = {pp}, the "
                                                            "fewest micro-batches a pipeline "
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
                default = _DEFAULT_VALUES.get(name, _Value(None, "default", ""))
                values[name] = _Value(default.value, "default",
                                      f"{v.detail if v else ''} — not used: {exc}")
                try:
                    return ParallelConfig(**kwargs)
                except InvalidArgumentError:
                    continue
        raise


def _model(values: dict[str, _Value], parallel: ParallelConfig,
           observed: Mapping[str, tuple[Any, str]], strict: set[str]) -> ModelSpec | None:
    missing = [n for n in (*_CORE_MODEL, "seq_length") if values[n].value is None]
    if values["num_experts"].value is None:
        missing.append("num_experts")
    if missing:
        by_reason: dict[str, list[str]] = {}
        for n in missing:  # fields missing for the same reason are named together
            by_reason.setdefault(values[n].detail, []).append(_label(n))
        reasons = "; ".join(f"{', '.join(names)} ({why})" for why, names in by_reason.items())
        values["name"] = _Value(None, values["name"].source,
                                f"its shape cannot be read from the profile: {reasons}")
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
        values["name"] = _Value(None, "profile", f"the fields read do not make a model: "
                                                 f"{exc}")
        return None
    for name in ("head_dim", "norm", "bias", "position_embedding"):
        if values[name].value is None:
            values[name] = _Value(getattr(model, name), "default",
                                  values[name].detail + f"; ModelSpec's default for a "
                                  f"{model.mlp} MLP: {getattr(model, name)}")
    name = values["name"]
    if name.value is None or name.source not in ("user", "config"):
        preset = _preset_of(model)
        if preset:
            layers = ModelSpec.preset(preset).num_layers
            note = "" if layers == model.num_layers else \
                f"; the profile shows {model.num_layers} of its {layers} layers"
            values["name"] = _Value(preset, name.source if name.value else "profile",
                                    f"the shape matches the {preset} preset (hidden, heads, "
                                    f"key/value heads, FFN, vocabulary, MLP){note}")
        else:
            values["name"] = _Value(None, "profile", "the shape matches no preset")
    model = dataclasses.replace(model, name=values["name"].value)
    return model


def _preset_of(model: ModelSpec) -> str | None:
    keys = ("hidden_size", "num_attention_heads", "num_kv_heads", "ffn_hidden_size",
            "vocab_size", "mlp", "num_experts")
    for name in ModelSpec.presets():
        p = ModelSpec.preset(name)
        if all(getattr(p, k) == getattr(model, k) for k in keys):
            return name
    return None

