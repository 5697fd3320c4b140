"""Model, parallel-configuration and hardware descriptions.

Three frozen dataclasses feed every calculator:

* :class:`ModelSpec` — the shape of a decoder-only transformer (GPT or Llama style,
  GQA, gated MLP, optional MoE, tied or untied embeddings), with an exact parameter count.
* :class:`ParallelConfig` — dp / tp / pp / vpp, micro-batching, sequence parallel,
  optimizer sharding, ZeRO stage and recompute; it checks its own rules.
* :class:`Hardware` — peak FLOP/s per dtype, memory and link bandwidths of one device.

Presets come with their sources in comments; a user can always build their own.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ._values import (
    parse_bool,
    parse_number,
    parse_whole,
    parse_whole_fields,
    read_config_text,
)
from .errors import (
    ConfigFileError,
    InvalidArgumentError,
    ParallelConfigError,
    PerfkitWarning,
    boundary,
    check_choice,
    check_positive,
    check_positive_int,
)

__all__ = ["ModelSpec", "ParallelConfig", "Hardware", "mindformers_ffn_hidden_size",
           "llama_ffn_hidden_size"]

MLP_KINDS = ("gpt", "gated")
NORM_KINDS = ("layernorm", "rmsnorm")
BIAS_KINDS = ("none", "qkv", "all")
POSITION_KINDS = ("rope", "learned")
RECOMPUTE_KINDS = ("none", "selective", "full")


def llama_ffn_hidden_size(hidden_size: int, multiple_of: int = 256,
                          ffn_dim_multiplier: float | None = None) -> int:
    """FFN size as Meta's Llama reference code derives it.

    ``f = int(2 * 4h / 3)``; then ``f = int(ffn_dim_multiplier * f)`` if a multiplier is
    given; then ``f`` is rounded up to a multiple of ``multiple_of``.
    Source: facebookresearch/llama ``model.py`` (``FeedForward.__init__``).
    """
    check_positive_int("hidden_size", hidden_size)
    check_positive_int("multiple_of", multiple_of)
    f = int(2 * 4 * hidden_size / 3)
    if ffn_dim_multiplier is not None:
        f = int(check_positive("ffn_dim_multiplier", ffn_dim_multiplier) * f)
    return multiple_of * ((f + multiple_of - 1) // multiple_of)


def mindformers_ffn_hidden_size(hidden_size: int, multiple_of: int = 256,
                                ffn_dim_multiplier: float | None = None,
                                intermediate_size: int | None = None) -> int:
    """FFN size as MindFormers derives it for Llama-style models.

    MindFormers (``LlamaFeedForward.__init__`` and ``convert_model_config``) differs from
    Meta's code: the multiplier is applied to ``4h`` *before* the 2/3 and is bumped by
    0.01::

        f = 4h
        if intermediate_size: f = intermediate_size           (and nothing else)
        else:
            if ffn_dim_multiplier: f = int((ffn_dim_multiplier + 0.01) * f)
            f = int(2 * f / 3)
            f = multiple_of * ceil(f / multiple_of)

    For the published Llama shapes both rules give the same result (13B: 13824,
    70B: 28672 with multiplier 1.3 and multiple_of 4096).
    """
    if intermediate_size is not None:
        return check_positive_int("intermediate_size", intermediate_size)
    check_positive_int("hidden_size", hidden_size)
    check_positive_int("multiple_of", multiple_of)
    f = 4 * hidden_size
    if ffn_dim_multiplier is not None:
        f = int((check_positive("ffn_dim_multiplier", ffn_dim_multiplier) + 0.01) * f)
    f = int(2 * f / 3)
    return multiple_of * ((f + multiple_of - 1) // multiple_of)


def _optional(default: Any) -> Any:
    """A field for a feature that is off at its default. ``dataclasses.fields`` still lists
    it; its metadata lets a serializer leave it out while it is off (the simulator's
    ``profiler_metadata.json`` stays the same for a job that does not use it)."""
    return field(default=default, metadata={"omit_when_default": True})


# --------------------------------------------------------------------------------------
# ModelSpec
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelSpec:
    """Shape of a decoder-only transformer.

    Parameters
    ----------
    num_layers, hidden_size, num_attention_heads, seq_length, vocab_size : int
        ``L``, ``h``, ``a``, ``s`` and ``V`` in the formulas.
    ffn_hidden_size : int, optional
        ``f`` (ĥ in the seed). Defaults to ``4h`` for ``mlp="gpt"`` and to Llama's rule
        (:func:`llama_ffn_hidden_size`) for ``mlp="gated"``. In a MoE model with
        ``first_dense_layers`` it is the width of those dense layers' MLP.
    num_kv_heads : int, optional
        Key/value heads (GQA); defaults to ``num_attention_heads`` (MHA).
        The GQA ratio ``q = a / num_kv_heads``.
    mlp : {"gpt", "gated"}
        ``"gpt"``: two GEMMs ``h→f→h``; ``"gated"``: three (gate, up, down) as in Llama.
    num_experts, moe_top_k : int
        MoE: the MLP of every MoE layer is ``num_experts`` routed experts of which
        ``moe_top_k`` run per token, plus a router ``h × num_experts``.
    tied_embeddings : bool
        Whether the output projection shares the input embedding matrix.
    name : str, optional
        Display name.
    head_dim : int, optional
        Per-head size; defaults to ``h / a``. With MLA this is the non-rotary part of the
        query/key head (DeepSeek's ``qk_nope_head_dim``).
    norm : {"layernorm", "rmsnorm"}, optional
        Defaults to LayerNorm (weight and bias) for GPT, RMSNorm (weight) for gated MLPs.
    bias : {"none", "qkv", "all"}, optional
        Linear-layer biases. Defaults to ``"all"`` for GPT and ``"none"`` for gated MLPs.
    position_embedding : {"rope", "learned"}, optional
        Learned absolute positions add ``s × h`` parameters. Defaults to learned for GPT,
        rotary for gated MLPs.
    moe_ffn_hidden_size : int, optional
        FFN size of each routed expert (HF ``moe_intermediate_size``); defaults to
        ``ffn_hidden_size``.
    num_shared_experts : int
        Experts every token goes through besides the ``moe_top_k`` routed ones
        (DeepSeek ``n_shared_experts``; Qwen2-MoE has one). 0 by default.
    shared_expert_ffn_hidden_size : int, optional
        FFN size of each shared expert; defaults to ``moe_ffn_hidden_size``
        (Qwen2-MoE's ``shared_expert_intermediate_size`` is the size of its single one).
    first_dense_layers : int
        The first layers keep a dense MLP of ``ffn_hidden_size`` (DeepSeek
        ``first_k_dense_replace``); the others are MoE layers. 0 by default.
    qk_norm : bool
        A norm on each query and key head (Qwen3's ``q_norm``/``k_norm``): ``2·head_dim``
        more parameters per layer (twice that for LayerNorm).
    q_lora_rank, kv_lora_rank : int, optional
        Multi-head latent attention (DeepSeek-V2/V3) when ``kv_lora_rank`` is given:
        queries through a rank-``q_lora_rank`` bottleneck (or a plain ``h × a·(d + d_r)``
        projection when None), keys and values from a compressed ``kv_lora_rank`` latent.
    qk_rope_head_dim : int
        MLA only: the rotary part ``d_r`` of each query/key head (DeepSeek 64).
    v_head_dim : int, optional
        MLA only: per-head value size (default ``head_dim``).
    """

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    seq_length: int
    vocab_size: int
    ffn_hidden_size: int | None = None
    num_kv_heads: int | None = None
    mlp: str = "gpt"
    num_experts: int = 1
    moe_top_k: int = 1
    tied_embeddings: bool = False
    name: str | None = None
    head_dim: int | None = None
    norm: str | None = None
    bias: str | None = None
    position_embedding: str | None = None
    moe_ffn_hidden_size: int | None = None
    num_shared_experts: int = _optional(0)
    shared_expert_ffn_hidden_size: int | None = _optional(None)
    first_dense_layers: int = _optional(0)
    qk_norm: bool = _optional(False)
    q_lora_rank: int | None = _optional(None)
    kv_lora_rank: int | None = _optional(None)
    qk_rope_head_dim: int = _optional(0)
    v_head_dim: int | None = _optional(None)

    _PRESETS: ClassVar[dict[str, dict[str, Any]]] = {}

    def __post_init__(self) -> None:
        for name in ("num_layers", "hidden_size", "num_attention_heads", "seq_length",
                     "vocab_size", "num_experts", "moe_top_k"):
            object.__setattr__(self, name, check_positive_int(name, getattr(self, name)))
        check_choice("mlp", self.mlp, MLP_KINDS)
        gated = self.mlp == "gated"
        a, h = self.num_attention_heads, self.hidden_size
        if self.head_dim is None:
            if h % a:
                raise InvalidArgumentError(
                    "num_attention_heads", f"must divide hidden_size={h} (or give head_dim)", a)
            object.__setattr__(self, "head_dim", h // a)
        else:
            object.__setattr__(self, "head_dim", check_positive_int("head_dim", self.head_dim))
        self._check_mla()
        kv = a if self.num_kv_heads is None else check_positive_int("num_kv_heads",
                                                                     self.num_kv_heads)
        if a % kv:
            raise InvalidArgumentError("num_kv_heads",
                                       f"must divide num_attention_heads={a}", kv)
        if self.is_mla and kv != a:
            raise InvalidArgumentError("num_kv_heads", "multi-head latent attention has one "
                                       "key/value head per query head", kv)
        object.__setattr__(self, "num_kv_heads", kv)
        if self.ffn_hidden_size is None:
            ffn = llama_ffn_hidden_size(h) if gated else 4 * h
        else:
            ffn = check_positive_int("ffn_hidden_size", self.ffn_hidden_size)
        object.__setattr__(self, "ffn_hidden_size", ffn)
        moe_ffn = ffn if self.moe_ffn_hidden_size is None else check_positive_int(
            "moe_ffn_hidden_size", self.moe_ffn_hidden_size)
        object.__setattr__(self, "moe_ffn_hidden_size", moe_ffn)
        if self.moe_top_k > self.num_experts:
            raise InvalidArgumentError(
                "moe_top_k", f"must be <= num_experts={self.num_experts}", self.moe_top_k)
        self._check_moe_extras()
        defaults = {"norm": "rmsnorm" if gated else "layernorm",
                    "bias": "none" if gated else "all",
                    "position_embedding": "rope" if gated else "learned"}
        for name, kinds in (("norm", NORM_KINDS), ("bias", BIAS_KINDS),
                            ("position_embedding", POSITION_KINDS)):
            value = getattr(self, name)
            object.__setattr__(self, name, defaults[name] if value is None
                               else check_choice(name, value, kinds))
        for name in ("tied_embeddings", "qk_norm"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidArgumentError(name, "must be True or False", getattr(self, name))
        if self.is_mla and self.bias != "none":
            raise InvalidArgumentError("bias", "multi-head latent attention is modelled "
                                       "without linear biases (DeepSeek has none)", self.bias)

    def _check_mla(self) -> None:
        """Rules of the multi-head latent attention fields."""
        for name in ("q_lora_rank", "kv_lora_rank", "v_head_dim"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, check_positive_int(name, value))
        rope = self.qk_rope_head_dim
        if isinstance(rope, bool) or not isinstance(rope, int) or rope < 0:
            raise InvalidArgumentError("qk_rope_head_dim", "must be a whole number >= 0", rope)
        if self.kv_lora_rank is None:
            for name, value, unset in (("q_lora_rank", self.q_lora_rank, None),
                                       ("qk_rope_head_dim", rope, 0),
                                       ("v_head_dim", self.v_head_dim, None)):
                if value != unset:
                    raise InvalidArgumentError(name, "is a multi-head latent attention "
                                               "field: give kv_lora_rank too", value)

    def _check_moe_extras(self) -> None:
        """Rules of shared experts and dense-first layers."""
        for name in ("num_shared_experts", "first_dense_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgumentError(name, "must be a whole number >= 0", value)
        shared = self.shared_expert_ffn_hidden_size
        if shared is not None:  # kept as given: None means "a routed expert's size"
            object.__setattr__(self, "shared_expert_ffn_hidden_size",
                               check_positive_int("shared_expert_ffn_hidden_size", shared))
        if not self.is_moe:
            for name in ("num_shared_experts", "first_dense_layers"):
                if getattr(self, name):
                    raise InvalidArgumentError(name, "needs a MoE model (num_experts > 1)",
                                               getattr(self, name))
        if self.first_dense_layers >= self.num_layers:
            raise InvalidArgumentError("first_dense_layers",
                                       f"must be < num_layers={self.num_layers}",
                                       self.first_dense_layers)

    # ---- derived sizes ---------------------------------------------------------------
    @property
    def gqa_ratio(self) -> float:
        """``q = num_attention_heads / num_kv_heads`` (1 for MHA)."""
        return self.num_attention_heads / self.num_kv_heads

    @property
    def is_moe(self) -> bool:
        """True when the MLP is a mixture of experts."""
        return self.num_experts > 1

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention (``kv_lora_rank`` given)."""
        return self.kv_lora_rank is not None

    @property
    def attention_width(self) -> int:
        """``a × head_dim``: width of the query projection output (MLA: ``a·(d + d_r)``)."""
        return self.num_attention_heads * self.qk_head_dim

    @property
    def kv_width(self) -> int:
        """``num_kv_heads × head_dim``: width of the K projection (MLA: ``a·(d + d_r)``)."""
        return self.num_kv_heads * self.qk_head_dim

    @property
    def qk_head_dim(self) -> int:
        """Size of one query/key head: ``head_dim`` (+ ``qk_rope_head_dim`` with MLA)."""
        return self.head_dim + self.qk_rope_head_dim

    @property
    def value_head_dim(self) -> int:
        """Size of one value head: ``head_dim``, or MLA's ``v_head_dim``."""
        return self.head_dim if self.v_head_dim is None else self.v_head_dim

    @property
    def shared_ffn_hidden_size(self) -> int:
        """FFN size of one shared expert: ``shared_expert_ffn_hidden_size``, or a routed
        expert's ``moe_ffn_hidden_size`` when not given."""
        shared = self.shared_expert_ffn_hidden_size
        return self.moe_ffn_hidden_size if shared is None else shared

    @property
    def num_moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts (0 for a dense model)."""
        return self.num_layers - self.first_dense_layers if self.is_moe else 0

    def layer_is_moe(self, index: int) -> bool:
        """Whether layer ``index`` (0-based) has a MoE MLP."""
        return self.is_moe and index >= self.first_dense_layers

    # ---- parameters ------------------------------------------------------------------
    def _norm_size(self) -> int:
        return 2 * self.hidden_size if self.norm == "layernorm" else self.hidden_size

    def _attention_parameters(self) -> int:
        h, a = self.hidden_size, self.num_attention_heads
        per_norm = 2 if self.norm == "layernorm" else 1
        if self.is_mla:
            dqk, dv, rank_kv = self.qk_head_dim, self.value_head_dim, self.kv_lora_rank
            if self.q_lora_rank is None:
                q = h * a * dqk
            else:  # q_a_proj, q_a_layernorm, q_b_proj
                q = h * self.q_lora_rank + per_norm * self.q_lora_rank \
                    + self.q_lora_rank * a * dqk
            # kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj
            kv = h * (rank_kv + self.qk_rope_head_dim) + per_norm * rank_kv \
                + rank_kv * a * (self.head_dim + dv)
            attention = q + kv + a * dv * h
        else:
            qw, kvw = self.attention_width, self.kv_width
            attention = h * qw + 2 * h * kvw + qw * h
            if self.bias in ("qkv", "all"):
                attention += qw + 2 * kvw
            if self.bias == "all":
                attention += h
        if self.qk_norm:
            attention += 2 * per_norm * self.head_dim
        return attention

    def _one_mlp(self, width: int) -> int:
        n_mats = 3 if self.mlp == "gated" else 2
        params = n_mats * self.hidden_size * width
        if self.bias == "all":
            params += (n_mats - 1) * width + self.hidden_size
        return params

    def parameter_breakdown(self) -> dict[str, int]:
        """Exact parameter counts by component.

        Returns a dict with ``attention`` (per layer), ``mlp`` (per layer: the dense MLP, or
        all routed experts of a MoE layer), ``shared_mlp`` (shared experts of a MoE layer),
        ``router`` (per MoE layer), ``norms`` (per layer, two norms), ``layer`` (sum per
        layer; for MoE, per MoE layer), ``dense_mlp`` and ``dense_layer`` (a layer with a
        dense MLP: the first ``first_dense_layers`` of a MoE model, every layer of a dense
        one), ``moe_layers`` and ``dense_layers`` (how many of each), ``embedding``
        (``V × h``), ``position`` (``s × h`` if learned), ``final_norm``, ``output``
        (``V × h`` unless tied) and ``total``.
        """
        h = self.hidden_size
        attention = self._attention_parameters()
        dense_mlp = self._one_mlp(self.ffn_hidden_size)
        norms = 2 * self._norm_size()
        if self.is_moe:
            mlp = self._one_mlp(self.moe_ffn_hidden_size) * self.num_experts
            shared = self._one_mlp(self.shared_ffn_hidden_size) * self.num_shared_experts
            router = h * self.num_experts
        else:
            mlp, shared, router = dense_mlp, 0, 0
        layer = attention + mlp + shared + router + norms
        dense_layer = attention + dense_mlp + norms
        moe_layers = self.num_moe_layers
        dense_layers = self.num_layers - moe_layers
        embedding = self.vocab_size * h
        position = self.seq_length * h if self.position_embedding == "learned" else 0
        output = 0 if self.tied_embeddings else self.vocab_size * h
        body = self.num_layers * layer if dense_layers == 0 or moe_layers == 0 \
            else moe_layers * layer + dense_layers * dense_layer
        total = body + embedding + position + self._norm_size() + output
        return {"attention": attention, "mlp": mlp, "shared_mlp": shared, "router": router,
                "norms": norms, "layer": layer, "dense_mlp": dense_mlp,
                "dense_layer": dense_layer, "moe_layers": moe_layers,
                "dense_layers": dense_layers, "embedding": embedding, "position": position,
                "final_norm": self._norm_size(), "output": output, "total": total}

    def layer_parameters(self, index: int) -> int:
        """Parameters of layer ``index`` (0-based): a MoE layer or a dense one."""
        b = self.parameter_breakdown()
        return b["layer"] if self.layer_is_moe(index) or not self.is_moe else b["dense_layer"]

    def num_parameters(self) -> int:
        """Exact number of trainable parameters (all experts counted)."""
        return self.parameter_breakdown()["total"]

    def num_active_parameters(self) -> int:
        """Parameters that touch one token: a MoE layer counts ``moe_top_k`` of its routed
        experts (all shared experts and the router count)."""
        b = self.parameter_breakdown()
        if not self.is_moe:
            return b["total"]
        active_mlp = b["mlp"] // self.num_experts * self.moe_top_k
        moe_layer = b["layer"] - b["mlp"] + active_mlp
        return (b["moe_layers"] * moe_layer + b["dense_layers"] * b["dense_layer"]
                + b["embedding"] + b["position"] + b["final_norm"] + b["output"])

    # ---- constructors ----------------------------------------------------------------
    def replace(self, **changes: Any) -> ModelSpec:
        """A copy with some fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def presets(cls) -> list[str]:
        """Names accepted by :meth:`preset`."""
        return sorted(cls._PRESETS)

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ModelSpec:
        """A published model shape, e.g. ``ModelSpec.preset("llama2-7b", seq_length=2048)``."""
        key = str(name).lower()
        if key not in cls._PRESETS:
            raise InvalidArgumentError("name", f"unknown model preset; known: "
                                       f"{', '.join(cls.presets())}", name)
        return cls(**{**cls._PRESETS[key], "name": key, **overrides})

    @classmethod
    @boundary(ConfigFileError, path_arg="config", what="a Hugging Face config.json")
    def from_hf_config(cls, config: Mapping[str, Any] | str | Path,
                       seq_length: int | None = None) -> ModelSpec:
        """Build from a Hugging Face ``config.json`` (a dict or a path to the file).

        Understood keys: ``num_hidden_layers``/``n_layer``, ``hidden_size``/``n_embd``,
        ``num_attention_heads``/``n_head``, ``num_key_value_heads``, ``intermediate_size``/
        ``n_inner``, ``vocab_size``, ``max_position_embeddings``/``n_positions``,
        ``tie_word_embeddings`` (when missing: transformers' default for the
        ``model_type``, False for Llama-family classes, True otherwise), ``head_dim``,
        ``num_local_experts``/``num_experts``/``n_routed_experts``, ``num_experts_per_tok``,
        ``moe_intermediate_size``, ``n_shared_experts``, ``shared_expert_intermediate_size``
        (Qwen2-MoE: one shared expert of that size), ``first_k_dense_replace``,
        ``q_lora_rank``, ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``,
        ``v_head_dim`` (multi-head latent attention), ``model_type``, ``hidden_act``.
        Llama-family models (``silu`` activation or a known ``model_type``) get a gated MLP
        and RMSNorm; ``gpt2`` gets LayerNorm, biases and learned positions; ``qwen3`` and
        ``qwen3_moe`` get their per-head q/k norms.

        ``seq_length`` is the **training** sequence length. A ``config.json`` only holds the
        longest context the model supports (``max_position_embeddings``), which is rarely
        what a job trains with; when ``seq_length`` is not given, that maximum is used and
        a :class:`~perfkit.errors.PerfkitWarning` naming the config says so.
        """
        source = "<dict>"
        if not isinstance(config, Mapping):
            source = str(config)
            config = _read_json(config)
        cfg = dict(config)

        def pick(*keys: str, default: Any = None, required: bool = False) -> Any:
            for key in keys:
                if cfg.get(key) is not None:
                    return cfg[key]
            if required:
                raise ConfigFileError(source, f"missing key {' / '.join(keys)}")
            return default

        model_type = str(pick("model_type", default="")).lower()
        act = str(pick("hidden_act", "activation_function", default="")).lower()
        llama_like = model_type in _GATED_HF_TYPES or act in ("silu", "swiglu", "swish")
        gpt2_like = model_type in ("gpt2", "gpt_bigcode")
        hidden = pick("hidden_size", "n_embd", "d_model", required=True)
        experts = pick("num_local_experts", "num_experts", "n_routed_experts", default=1)
        context_as_seq = seq_length is None
        if context_as_seq:
            seq_length = pick("max_position_embeddings", "n_positions", "seq_length", "n_ctx",
                              required=True)
        kwargs: dict[str, Any] = {
            "num_layers": pick("num_hidden_layers", "n_layer", "num_layers", required=True),
            "hidden_size": hidden,
            "num_attention_heads": pick("num_attention_heads", "n_head", required=True),
            "num_kv_heads": pick("num_key_value_heads", "num_kv_heads"),
            "vocab_size": pick("vocab_size", required=True),
            "seq_length": seq_length,
            "ffn_hidden_size": pick("intermediate_size", "n_inner", "ffn_dim"),
            "mlp": "gated" if llama_like else "gpt",
            "tied_embeddings": parse_bool(pick("tie_word_embeddings",
                                               default=model_type not in _UNTIED_HF_TYPES),
                                          "tie_word_embeddings", source),
            "head_dim": pick("head_dim"),
            "num_experts": experts,
            "moe_top_k": pick("num_experts_per_tok", "moe_top_k", default=1),
            "moe_ffn_hidden_size": pick("moe_intermediate_size"),
            "name": pick("_name_or_path", default=model_type or None),
        }
        kwargs.update(_hf_moe_and_mla(cfg, experts, kwargs["head_dim"]))
        if model_type in ("qwen3", "qwen3_moe"):
            kwargs["qk_norm"] = True
        parse_whole_fields(kwargs, _WHOLE_FIELDS, cfg, source)
        if gpt2_like:
            kwargs.update(norm="layernorm", bias="all", position_embedding="learned")
        elif llama_like:
            kwargs.update(norm="rmsnorm", position_embedding="rope",
                          bias="qkv" if model_type.startswith("qwen2") else "none")
        try:
            spec = cls(**kwargs)
        except InvalidArgumentError as exc:
            raise ConfigFileError(source, f"inconsistent model shape: {exc}") from exc
        if context_as_seq:  # only for a config that loads: a refused one says why instead
            warnings.warn(PerfkitWarning(
                f"{source}: no seq_length given, so the model's maximum context "
                f"({seq_length} tokens, from the config) is used as the training sequence "
                "length; pass seq_length=<what the job trains with>"), stacklevel=3)
        return spec

    @classmethod
    @boundary(ConfigFileError, path_arg="path", what="a MindFormers YAML")
    def from_mindformers_yaml(cls, path: str | Path | Mapping[str, Any],
                              seq_length: int | None = None) -> ModelSpec:
        """Build from a MindFormers YAML (``model: model_config:``), a path or a loaded dict.

        Keys read: ``type``, ``num_layers``, ``hidden_size``, ``num_heads``,
        ``n_kv_heads``, ``seq_length``, ``vocab_size``, ``intermediate_size``,
        ``multiple_of`` (default 256), ``ffn_dim_multiplier``, ``tie_word_embeddings``,
        and ``moe_config: expert_num, num_experts_chosen, shared_expert_num,
        first_k_dense_replace, moe_intermediate_size``; the newer ``mcore`` spellings
        (``num_attention_heads``, ``num_query_groups``, ``ffn_hidden_size``) also work.
        The FFN size follows MindFormers' own rule, :func:`mindformers_ffn_hidden_size`.
        GPT configs (``type`` containing ``GPT``) get a 4h (``expand_ratio``) MLP.
        """
        source = "<dict>" if isinstance(path, Mapping) else str(path)
        doc = path if isinstance(path, Mapping) else _read_yaml(path)
        model = doc.get("model") if isinstance(doc, Mapping) else None
        mc = model.get("model_config") if isinstance(model, Mapping) else None
        if not isinstance(mc, Mapping):
            raise ConfigFileError(source, "no 'model: model_config:' section found")

        def pick(*keys: str, default: Any = None, required: bool = False) -> Any:
            for key in keys:
                if mc.get(key) is not None:
                    return mc[key]
            if required:
                raise ConfigFileError(source, f"model_config lacks {' / '.join(keys)}")
            return default

        mtype = str(pick("type", default=""))
        hidden = parse_whole(pick("hidden_size", required=True), "hidden_size", source)
        gpt = "gpt" in mtype.lower()
        if gpt:
            ffn = pick("intermediate_size", "ffn_hidden_size",
                       default=parse_whole(pick("expand_ratio", default=4), "expand_ratio",
                                           source) * hidden)
        else:
            explicit = pick("intermediate_size", "ffn_hidden_size")
            multiplier = pick("ffn_dim_multiplier")
            ffn = mindformers_ffn_hidden_size(
                hidden, parse_whole(pick("multiple_of", default=256), "multiple_of", source),
                None if multiplier is None else parse_number(multiplier, "ffn_dim_multiplier",
                                                             source),
                None if explicit is None else parse_whole(explicit, "intermediate_size",
                                                          source))
        groups = pick("n_kv_heads", "num_query_groups", "num_key_value_heads")
        if mc.get("num_query_groups") is not None and not parse_bool(
                mc.get("group_query_attention", True), "group_query_attention", source):
            groups = None
        moe = doc.get("moe_config") if isinstance(doc.get("moe_config"), Mapping) else {}
        experts = moe.get("expert_num") or pick("num_experts", "num_moe_experts", default=1)
        top_k = moe.get("num_experts_chosen") or pick("moe_router_topk", default=1)
        kwargs = {
            "num_layers": pick("num_layers", "num_hidden_layers", required=True),
            "hidden_size": hidden,
            "num_attention_heads": pick("num_heads", "num_attention_heads", required=True),
            "num_kv_heads": groups,
            "seq_length": seq_length or pick("seq_length", required=True),
            "vocab_size": pick("vocab_size", required=True),
            "ffn_hidden_size": ffn,
            "mlp": "gpt" if gpt else "gated",
            "tied_embeddings": parse_bool(pick("tie_word_embeddings",
                                               "share_embeddings_and_output_weights",
                                               default=False), "tie_word_embeddings", source),
            "num_experts": experts,
            "moe_top_k": top_k,
            "name": mtype or None,
        }
        for key, field_name in (("shared_expert_num", "num_shared_experts"),
                                ("first_k_dense_replace", "first_dense_layers"),
                                ("moe_intermediate_size", "moe_ffn_hidden_size")):
            if moe.get(key):
                kwargs[field_name] = moe[key]
        parse_whole_fields(kwargs, _WHOLE_FIELDS, {**moe, **mc}, source)
        try:
            return cls(**kwargs)
        except InvalidArgumentError as exc:
            raise ConfigFileError(source, f"inconsistent model shape: {exc}") from exc


# Config classes whose tie_word_embeddings defaults to False (transformers' own defaults);
# any other model_type takes PretrainedConfig's default, True, when the key is missing.
_UNTIED_HF_TYPES = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                    "internlm2", "baichuan", "yi", "deepseek", "deepseek_v2", "gpt_neox",
                    "gptj", "phi3", "olmo", "olmo2", "stablelm", "deepseek_v3"}
_GATED_HF_TYPES = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                   "gemma", "gemma2", "internlm2", "baichuan", "yi", "deepseek", "deepseek_v2",
                   "deepseek_v3"}


def _hf_moe_and_mla(cfg: Mapping[str, Any], experts: Any, head_dim: Any) -> dict[str, Any]:
    """ModelSpec keywords for shared experts, dense-first layers and MLA in an HF config.

    DeepSeek: ``n_shared_experts`` experts of ``moe_intermediate_size``,
    ``first_k_dense_replace`` dense layers, MLA from ``kv_lora_rank`` (``qk_nope_head_dim``
    is the per-head size, ``qk_rope_head_dim`` its rotary part). Qwen2-MoE: one shared
    expert of ``shared_expert_intermediate_size``.
    """
    out: dict[str, Any] = {}
    if experts not in (None, 1):
        if cfg.get("n_shared_experts"):
            out["num_shared_experts"] = cfg["n_shared_experts"]
        elif cfg.get("shared_expert_intermediate_size"):
            out["num_shared_experts"] = 1
            out["shared_expert_ffn_hidden_size"] = cfg["shared_expert_intermediate_size"]
        if cfg.get("first_k_dense_replace"):
            out["first_dense_layers"] = cfg["first_k_dense_replace"]
    if cfg.get("kv_lora_rank"):
        out.update(kv_lora_rank=cfg["kv_lora_rank"], q_lora_rank=cfg.get("q_lora_rank"),
                   qk_rope_head_dim=cfg.get("qk_rope_head_dim") or 0,
                   v_head_dim=cfg.get("v_head_dim"),
                   head_dim=cfg.get("qk_nope_head_dim") or head_dim)
    return out

# Published shapes. Sources:
#   Llama 2: Touvron et al. 2023, "Llama 2", Table 1 and the released params.json /
#            HF config.json (meta-llama/Llama-2-{7,13,70}b-hf): vocab 32000, context 4096.
#   Llama 3: Llama Team 2024, "The Llama 3 Herd of Models", Table 3 (layers, model dim,
#            FFN dim, heads, KV heads, vocab 128 000 -> 128256 in config.json), context 8192.
#   GPT-3:   Brown et al. 2020, Table 2.1 (175B: 96 layers, d_model 12288, 96 heads,
#            context 2048), GPT-2 BPE vocab 50257, tied input/output embeddings.
#   Mixtral: Jiang et al. 2024, "Mixtral of Experts", Table 1 (8 experts, top-2) and the
#            released config.json (mistralai/Mixtral-8x7B-v0.1): 46.7B total, 12.9B active
#            (model card); exact 46,702,792,704 as transformers counts the checkpoint.
#   DeepSeek-V3: DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", and the released
#            config.json (deepseek-ai/DeepSeek-V3): 61 layers, the first 3 dense
#            (first_k_dense_replace), h 7168, dense FFN 18432, 256 routed experts of 2048
#            plus 1 shared, top-8, 128 heads with MLA (q_lora_rank 1536, kv_lora_rank 512,
#            qk_nope 128, qk_rope 64, v_head 128), vocab 129280, untied, context 4096 in
#            pre-training. "671B total parameters, 37B activated per token"; the HF files
#            hold 685B = 671B main model + 14B multi-token-prediction module, which is not
#            part of this preset. The router's e_score_correction_bias (256 per MoE layer,
#            14,848 in all) is not counted.
#   Qwen3-MoE: Qwen team 2025, "Qwen3 Technical Report", Table 2, and the released
#            config.json files (Qwen/Qwen3-30B-A3B, Qwen/Qwen3-235B-A22B): 128 experts,
#            top-8, no shared expert, GQA with 4 KV heads, head_dim 128, q/k RMSNorm,
#            vocab 151936, untied. Model cards: 30.5B total / 3.3B activated (29.9B
#            non-embedding) and 235B total / 22B activated (234B non-embedding).
ModelSpec._PRESETS.update({
    "llama2-7b": dict(num_layers=32, hidden_size=4096, num_attention_heads=32,
                      ffn_hidden_size=11008, vocab_size=32000, seq_length=4096, mlp="gated"),
    "llama2-13b": dict(num_layers=40, hidden_size=5120, num_attention_heads=40,
                       ffn_hidden_size=13824, vocab_size=32000, seq_length=4096, mlp="gated"),
    "llama2-70b": dict(num_layers=80, hidden_size=8192, num_attention_heads=64,
                       num_kv_heads=8, ffn_hidden_size=28672, vocab_size=32000,
                       seq_length=4096, mlp="gated"),
    "llama3-8b": dict(num_layers=32, hidden_size=4096, num_attention_heads=32,
                      num_kv_heads=8, ffn_hidden_size=14336, vocab_size=128256,
                      seq_length=8192, mlp="gated"),
    "llama3-70b": dict(num_layers=80, hidden_size=8192, num_attention_heads=64,
                       num_kv_heads=8, ffn_hidden_size=28672, vocab_size=128256,
                       seq_length=8192, mlp="gated"),
    "llama3-405b": dict(num_layers=126, hidden_size=16384, num_attention_heads=128,
                        num_kv_heads=8, ffn_hidden_size=53248, vocab_size=128256,
                        seq_length=8192, mlp="gated"),
    "gpt3-175b": dict(num_layers=96, hidden_size=12288, num_attention_heads=96,
                      vocab_size=50257, seq_length=2048, mlp="gpt", tied_embeddings=True),
    "mixtral-8x7b": dict(num_layers=32, hidden_size=4096, num_attention_heads=32,
                         num_kv_heads=8, ffn_hidden_size=14336, vocab_size=32000,
                         seq_length=4096, mlp="gated", num_experts=8, moe_top_k=2),
    "deepseek-v3": dict(num_layers=61, hidden_size=7168, num_attention_heads=128,
                        head_dim=128, q_lora_rank=1536, kv_lora_rank=512,
                        qk_rope_head_dim=64, v_head_dim=128, ffn_hidden_size=18432,
                        vocab_size=129280, seq_length=4096, mlp="gated", num_experts=256,
                        moe_top_k=8, moe_ffn_hidden_size=2048, num_shared_experts=1,
                        first_dense_layers=3),
    "qwen3-30b-a3b": dict(num_layers=48, hidden_size=2048, num_attention_heads=32,
                          num_kv_heads=4, head_dim=128, qk_norm=True, ffn_hidden_size=6144,
                          vocab_size=151936, seq_length=4096, mlp="gated", num_experts=128,
                          moe_top_k=8, moe_ffn_hidden_size=768),
    "qwen3-235b-a22b": dict(num_layers=94, hidden_size=4096, num_attention_heads=64,
                            num_kv_heads=4, head_dim=128, qk_norm=True, ffn_hidden_size=12288,
                            vocab_size=151936, seq_length=4096, mlp="gated", num_experts=128,
                            moe_top_k=8, moe_ffn_hidden_size=1536),
})


_WHOLE_FIELDS = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
                 "seq_length", "vocab_size", "ffn_hidden_size", "head_dim", "num_experts",
                 "moe_top_k", "moe_ffn_hidden_size", "num_shared_experts",
                 "shared_expert_ffn_hidden_size", "first_dense_layers", "q_lora_rank",
                 "kv_lora_rank", "qk_rope_head_dim", "v_head_dim")
"""ModelSpec fields read as whole numbers from config files (``"4096"`` accepted)."""


def _read_json(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    text = read_config_text(p)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigFileError(p, f"not valid JSON at line {exc.lineno}, column {exc.colno}: "
                                 f"{exc.msg}") from exc
    if not isinstance(data, dict):
        raise ConfigFileError(p, f"expected a JSON object, found {type(data).__name__}")
    return data


def _read_yaml(path: str | Path) -> Mapping[str, Any]:
    import yaml

    p = Path(path)
    text = read_config_text(p)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigFileError(p, f"not valid YAML{where}: {getattr(exc, 'problem', exc)}") \
            from exc
    if not isinstance(data, Mapping):
        raise ConfigFileError(p, f"expected a YAML mapping, found {type(data).__name__}")
    return data


# --------------------------------------------------------------------------------------
# ParallelConfig
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ParallelConfig:
    """How one training step is split over devices.

    Parameters
    ----------
    dp, tp, pp : int
        Data-, tensor- (MindSpore "model parallel", mp) and pipeline-parallel sizes.
    vpp : int
        Virtual pipeline stages (model chunks) per device; 1 = plain 1F1B.
    micro_batch_size : int
        Sequences per micro-batch, ``b``.
    num_micro_batches : int
        Micro-batches per step per data-parallel rank, ``m`` (gradient accumulation steps
        or MindFormers' ``micro_batch_num``).
    sequence_parallel : bool
        Megatron/MindSpore sequence parallelism inside the TP group.
    optimizer_shard : int
        Size of the group over which optimizer state (and in MindSpore the weights) is
        sharded: MindSpore's optimizer parallel, Megatron's distributed optimizer. 1 = off.
        Must divide ``dp``.
    zero_stage : int
        DeepSpeed ZeRO stage 0-3 (used by ``static_memory(scheme="zero")``).
    recompute : {"none", "selective", "full"}
    recompute_layers : int or sequence of int, optional
        Layers per pipeline stage that are *fully* recomputed (MindFormers
        ``recompute: [4, 0]``). An int applies to every stage. With ``recompute="full"``
        the default is every layer; with ``"selective"`` the listed layers are full and
        the rest selective; with ``"none"`` the listed layers are full and the rest none.
    ep : int
        Expert-parallel size (MoE): the routed experts of a layer are split over ``ep``
        ranks, tokens travel to their experts by all-to-all.
    cp : int
        Context-parallel size: every sequence is split into ``cp`` chunks on ``cp`` ranks
        (Megatron-LM ``--context-parallel-size``); attention exchanges keys and values.
        The job has ``dp × tp × pp × cp`` devices.
    expert_tp : int, optional
        Tensor-parallel size inside each expert (Megatron ``--expert-tensor-parallel-size``);
        default ``tp``.

    Notes
    -----
    Expert parallelism follows Megatron-LM's expert grid (``initialize_model_parallel`` in
    ``megatron/core/parallel_state.py``): the ``tp × cp × dp`` ranks of a pipeline stage
    are regrouped as ``expert_tp × ep × expert_dp``, so ``ep × expert_tp`` must divide
    ``tp × cp × dp`` — with the default ``expert_tp = tp``, ``ep`` divides ``dp × cp`` —
    and ``expert_dp = tp·cp·dp / (ep·expert_tp)`` ranks hold copies of the same experts
    (their gradients are reduced, and a distributed optimizer shards their state, over
    that group). ``ep`` must divide the number of experts (``validate_args``).
    """

    dp: int = 1
    tp: int = 1
    pp: int = 1
    vpp: int = 1
    micro_batch_size: int = 1
    num_micro_batches: int = 1
    sequence_parallel: bool = False
    optimizer_shard: int = 1
    zero_stage: int = 0
    recompute: str = "none"
    recompute_layers: int | tuple[int, ...] | None = None
    ep: int = 1
    cp: int = _optional(1)
    expert_tp: int | None = _optional(None)

    def __post_init__(self) -> None:
        try:
            for name in ("dp", "tp", "pp", "vpp", "micro_batch_size", "num_micro_batches",
                         "optimizer_shard", "ep", "cp"):
                object.__setattr__(self, name, check_positive_int(name, getattr(self, name)))
            if self.expert_tp is not None:
                object.__setattr__(self, "expert_tp",
                                   check_positive_int("expert_tp", self.expert_tp))
            check_choice("recompute", self.recompute, RECOMPUTE_KINDS)
        except ParallelConfigError:
            raise
        except InvalidArgumentError as exc:
            raise ParallelConfigError(exc.parameter, exc.rule, exc.value) from None
        if self.zero_stage not in (0, 1, 2, 3) or isinstance(self.zero_stage, bool):
            raise ParallelConfigError("zero_stage", "must be 0, 1, 2 or 3", self.zero_stage)
        if not isinstance(self.sequence_parallel, bool):
            raise ParallelConfigError("sequence_parallel", "must be True or False",
                                      self.sequence_parallel)
        rl = self.recompute_layers
        if rl is not None:
            if isinstance(rl, Sequence) and not isinstance(rl, str):
                values = tuple(rl)
                if len(values) != self.pp:
                    raise ParallelConfigError(
                        "recompute_layers", f"needs one entry per pipeline stage (pp={self.pp})",
                        rl)
            else:
                values = (rl,)
            for v in values:
                if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                    raise ParallelConfigError("recompute_layers",
                                              "entries must be whole numbers >= 0", rl)
            object.__setattr__(self, "recompute_layers",
                               values if isinstance(rl, Sequence) else rl)
        rules = self.problems()
        if rules:
            param, _, rule = rules[0].partition(": ")
            raise ParallelConfigError(param, rule, getattr(self, param, None), rules=rules)

    @property
    def world_size(self) -> int:
        """``dp × tp × pp × cp`` devices."""
        return self.dp * self.tp * self.pp * self.cp

    @property
    def expert_tp_size(self) -> int:
        """Tensor-parallel size inside an expert: ``expert_tp``, or ``tp`` when not given."""
        return self.tp if self.expert_tp is None else self.expert_tp

    @property
    def expert_dp(self) -> int:
        """Ranks holding the same experts: ``tp·cp·dp / (ep·expert_tp)`` (Megatron's
        expert data-parallel size)."""
        return self.tp * self.cp * self.dp // (self.ep * self.expert_tp_size)

    @property
    def global_batch_size(self) -> int:
        """Sequences per step: ``dp × micro_batch_size × num_micro_batches``."""
        return self.dp * self.micro_batch_size * self.num_micro_batches

    def full_recompute_layers_per_stage(self, model: ModelSpec | None = None) -> tuple[int, ...]:
        """Fully recomputed layers on each stage (needs ``model`` for the default "all")."""
        rl = self.recompute_layers
        if rl is None:
            if self.recompute != "full":
                return (0,) * self.pp
            if model is None:
                raise InvalidArgumentError("model", "is needed to count 'all layers'")
            return tuple(self.layers_per_stage(model))
        return tuple(rl) if isinstance(rl, tuple) else (rl,) * self.pp

    def layers_per_stage(self, model: ModelSpec) -> list[int]:
        """Layers on each pipeline stage for an even split (remainder on the first stages)."""
        base, extra = divmod(model.num_layers, self.pp)
        return [base + (1 if s < extra else 0) for s in range(self.pp)]

    def problems(self, model: ModelSpec | None = None,
                 num_devices: int | None = None) -> list[str]:
        """Every rule this configuration breaks, as ``"parameter: rule"`` strings.

        Rules without a model: ``vpp > 1`` needs ``pp > 1``; ``num_micro_batches >= pp``
        (1F1B needs at least one micro-batch per stage) and, when interleaved, a multiple of
        ``pp`` (Megatron's rule); ``optimizer_shard`` divides ``dp``; ``ep × expert_tp``
        divides ``tp × cp × dp`` (``ep`` divides ``dp × cp`` when ``expert_tp = tp``:
        Megatron's expert grid, see the class notes); ``sequence_parallel`` needs
        ``tp > 1``.
        With a model: ``tp`` divides the attention heads and the KV heads; ``pp × vpp``
        divides ``num_layers``; fully recomputed layers fit on their stage; ``ep > 1`` and
        ``expert_tp`` need a MoE model and ``ep`` divides ``num_experts``; with ``cp > 1``
        the sequence length is a multiple of ``2·cp`` (Megatron's ``validate_args``: each
        rank takes two chunks for causal load balance). With ``num_devices``:
        ``dp × tp × pp × cp == num_devices``.
        """
        out: list[str] = []
        p, v, m = self.pp, self.vpp, self.num_micro_batches
        if v > 1 and p == 1:
            out.append("vpp: virtual stages need pipeline parallelism (pp > 1)")
        if p > 1 and m < p:
            out.append(f"num_micro_batches: must be >= pp={p} so every stage gets work")
        elif v > 1 and m % p:
            out.append(f"num_micro_batches: must be a multiple of pp={p} with vpp > 1")
        if self.dp % self.optimizer_shard:
            out.append(f"optimizer_shard: must divide dp={self.dp}")
        etp = self.expert_tp_size
        if (self.tp * self.cp * self.dp) % (self.ep * etp):
            if self.expert_tp is None:
                out.append(f"ep: must divide dp*cp={self.dp * self.cp} (Megatron's expert "
                           "grid takes the expert-parallel ranks from the data- and "
                           "context-parallel ranks)")
            else:
                out.append(f"ep: ep*expert_tp={self.ep * etp} must divide "
                           f"tp*cp*dp={self.tp * self.cp * self.dp}")
        if self.sequence_parallel and self.tp == 1:
            out.append("sequence_parallel: needs tensor parallelism (tp > 1)")
        if model is not None:
            if model.num_attention_heads % self.tp:
                out.append(f"tp: must divide num_attention_heads={model.num_attention_heads}")
            elif model.num_kv_heads % self.tp:
                out.append(f"tp: must divide num_kv_heads={model.num_kv_heads}")
            if model.num_layers % (p * v):
                out.append(f"pp: pp*vpp={p * v} must divide num_layers={model.num_layers}")
            elif self.recompute_layers is not None:
                per_stage = model.num_layers // p
                if any(n > per_stage for n in self.full_recompute_layers_per_stage(model)):
                    out.append(f"recompute_layers: more than the {per_stage} layers per stage")
            if model.num_experts % self.ep:
                out.append(f"ep: must divide num_experts={model.num_experts}")
            elif self.ep > 1 and not model.is_moe:
                out.append("ep: expert parallelism needs a MoE model (num_experts > 1)")
            if self.cp > 1 and model.seq_length % (2 * self.cp):
                out.append(f"cp: seq_length={model.seq_length} must be a multiple of "
                           f"2*cp={2 * self.cp}")
        if num_devices is not None and self.world_size != num_devices:
            name = "dp*tp*pp*cp" if self.cp > 1 else "dp*tp*pp"
            out.append(f"dp: {name}={self.world_size} must equal num_devices={num_devices}")
        return out

    def validate(self, model: ModelSpec | None = None,
                 num_devices: int | None = None) -> ParallelConfig:
        """Raise :class:`~perfkit.errors.ParallelConfigError` naming every broken rule.

        Returns ``self`` so it can be chained.
        """
        rules = self.problems(model, num_devices)
        if rules:
            param, _, rule = rules[0].partition(": ")
            more = f" (and {len(rules) - 1} more: {'; '.join(rules[1:])})" if len(rules) > 1 \
                else ""
            raise ParallelConfigError(param, rule + more, getattr(self, param, None),
                                      rules=rules)
        return self

    def replace(self, **changes: Any) -> ParallelConfig:
        """A copy with some fields changed (re-validated)."""
        return dataclasses.replace(self, **changes)


# --------------------------------------------------------------------------------------
# Hardware
# --------------------------------------------------------------------------------------

GB = 1e9
TB = 1e12
GIB = 2**30


@dataclass(frozen=True)
class Hardware:
    """One accelerator and its links.

    Parameters
    ----------
    name : str
    peak_flops : mapping of str to float
        Dense peak FLOP/s per dtype (keys like ``"bf16"``, ``"fp16"``, ``"fp32"``,
        ``"tf32"``, ``"fp8"``, ``"int8"``). Sparse figures are never used.
    memory_bytes : float
        Device memory in bytes.
    memory_bandwidth : float
        Device-memory bandwidth, bytes/s.
    intra_node_bandwidth : float
        Per-device, per-direction bandwidth to the other devices of the node, bytes/s
        (NVLink / HCCS).
    inter_node_bandwidth : float
        Per-device, per-direction bandwidth across nodes, bytes/s (InfiniBand / RoCE).
    devices_per_node : int
    default_dtype : str
        Dtype used when a calculator is given this Hardware but no dtype.
    """

    name: str
    peak_flops: Mapping[str, float] = field(hash=False)
    memory_bytes: float
    memory_bandwidth: float
    intra_node_bandwidth: float
    inter_node_bandwidth: float
    devices_per_node: int = 8
    default_dtype: str = "bf16"

    _PRESETS: ClassVar[dict[str, dict[str, Any]]] = {}

    def __post_init__(self) -> None:
        if not isinstance(self.peak_flops, Mapping) or not self.peak_flops:
            raise InvalidArgumentError("peak_flops", "must be a non-empty mapping dtype -> FLOP/s",
                                       self.peak_flops)
        for dtype, value in self.peak_flops.items():
            check_positive(f"peak_flops[{dtype!r}]", value)
        object.__setattr__(self, "peak_flops", dict(self.peak_flops))
        for name in ("memory_bytes", "memory_bandwidth", "intra_node_bandwidth",
                     "inter_node_bandwidth"):
            check_positive(name, getattr(self, name))
        object.__setattr__(self, "devices_per_node",
                           check_positive_int("devices_per_node", self.devices_per_node))
        if self.default_dtype not in self.peak_flops:
            raise InvalidArgumentError("default_dtype", "must be a key of peak_flops",
                                       self.default_dtype)

    def peak(self, dtype: str | None = None) -> float:
        """Dense peak FLOP/s for ``dtype`` (default: ``default_dtype``)."""
        dtype = self.default_dtype if dtype is None else dtype
        if dtype not in self.peak_flops:
            raise InvalidArgumentError("dtype", f"{self.name} has peaks for "
                                       f"{', '.join(sorted(self.peak_flops))}", dtype)
        return float(self.peak_flops[dtype])

    def replace(self, **changes: Any) -> Hardware:
        """A copy with some fields changed, e.g. your SKU's measured peak."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def presets(cls) -> list[str]:
        """Names accepted by :meth:`preset`."""
        return sorted(cls._PRESETS)

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> Hardware:
        """A published device, e.g. ``Hardware.preset("h100")``; aliases are listed below."""
        key = _HW_ALIASES.get(str(name).lower(), str(name).lower())
        if key not in cls._PRESETS:
            raise InvalidArgumentError("name", f"unknown hardware preset; known: "
                                       f"{', '.join(cls.presets())}", name)
        return cls(**{**cls._PRESETS[key], **overrides})


Hardware._PRESETS.update({
    # NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB column), dense (no sparsity):
    # FP64 9.7, FP64 Tensor 19.5, FP32 19.5, TF32 156, BF16/FP16 312 TFLOPS, INT8 624 TOPS;
    # 80GB HBM2e at 2,039 GB/s; NVLink 3 600 GB/s total = 300 GB/s per direction;
    # DGX A100 user guide: 8 x 200 Gb/s HDR InfiniBand, one per GPU = 25 GB/s per direction.
    "a100": dict(name="a100",
                 peak_flops={"bf16": 312 * TB, "fp16": 312 * TB, "tf32": 156 * TB,
                             "fp32": 19.5 * TB, "int8": 624 * TB},
                 memory_bytes=80 * GIB, memory_bandwidth=2039 * GB,
                 intra_node_bandwidth=300 * GB, inter_node_bandwidth=25 * GB),
    # NVIDIA H100 Tensor Core GPU datasheet (SXM5 column; the datasheet prints sparse
    # figures, dense = half): BF16/FP16 989.5, TF32 494.5, FP8 1979, INT8 1979, FP32 67
    # TFLOPS; 80GB HBM3 at 3.35 TB/s; NVLink 4 900 GB/s total = 450 GB/s per direction;
    # DGX H100: 8 x 400 Gb/s NDR ConnectX-7, one per GPU = 50 GB/s per direction.
    "h100": dict(name="h100",
                 peak_flops={"bf16": 989.5 * TB, "fp16": 989.5 * TB, "tf32": 494.5 * TB,
                             "fp8": 1979 * TB, "fp32": 67 * TB, "int8": 1979 * TB},
                 memory_bytes=80 * GIB, memory_bandwidth=3350 * GB,
                 intra_node_bandwidth=450 * GB, inter_node_bandwidth=50 * GB),
    # NVIDIA H200 Tensor Core GPU datasheet (SXM column): same Hopper compute as H100 SXM
    # (dense BF16/FP16 989.5, TF32 494.5, FP8 1979 TFLOPS), 141 GB HBM3e at 4.8 TB/s,
    # NVLink 900 GB/s total; HGX H200 nodes pair each GPU with a 400 Gb/s NDR NIC
    # = 50 GB/s per direction.
    "h200": dict(name="h200",
                 peak_flops={"bf16": 989.5 * TB, "fp16": 989.5 * TB, "tf32": 494.5 * TB,
                             "fp8": 1979 * TB, "fp32": 67 * TB, "int8": 1979 * TB},
                 memory_bytes=141 * GB, memory_bandwidth=4800 * GB,
                 intra_node_bandwidth=450 * GB, inter_node_bandwidth=50 * GB),
    # Ascend 910B (Atlas 800T A2 class). Huawei publishes no per-SKU datasheet we could
    # cite; the figures are the commonly reported ones and differ between 910B1..B4:
    # FP16/BF16 ~320 TFLOPS, INT8 ~640 TOPS (third-party spec summaries, 2024-2025);
    # 64 GB HBM2e per NPU (the seed guide's MS_MEMORY_STATISTIC log shows
    # "Device HBM memory size: 62432M" usable); HBM bandwidth ~1.6 TB/s (reported);
    # HCCS full mesh inside an 8-NPU node, commonly reported as 7 links x 56 GB/s
    # bidirectional, i.e. ~196 GB/s per direction; one 200 GbE RoCE port per NPU
    # = 25 GB/s per direction across nodes (reported; measure yours with hccl_test).
    # The seed's Llama2-13B case (2562 tokens/s/p at MFU 55.4 %) implies ~400 TFLOP/s
    # (see tests/test_seed_cases.py): pass your own SKU's peak via .replace().
    "ascend-910b": dict(name="ascend-910b",
                        peak_flops={"bf16": 320 * TB, "fp16": 320 * TB, "int8": 640 * TB},
                        memory_bytes=64 * GIB, memory_bandwidth=1600 * GB,
                        intra_node_bandwidth=196 * GB, inter_node_bandwidth=25 * GB,
                        default_dtype="fp16"),
})

_HW_ALIASES = {"910b": "ascend-910b", "ascend910b": "ascend-910b", "a100-sxm": "a100",
               "a100-80gb": "a100", "h100-sxm": "h100", "h200-sxm": "h200"}
