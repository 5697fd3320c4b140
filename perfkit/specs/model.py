"""ModelSpec: the shape of a decoder-only transformer, with an exact parameter count.

GPT or Llama style, GQA, gated MLP, optional MoE (shared experts, dense-first layers),
multi-head latent attention, tied or untied embeddings. Published shapes are in
:mod:`~perfkit.specs.model_presets`; reading a Hugging Face ``config.json`` or a MindFormers
YAML is in :mod:`~perfkit.specs.model_config`.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..errors import (
    ConfigFileError,
    InvalidArgumentError,
    PerfkitWarning,
    boundary,
    check_choice,
    check_positive_int,
)
from ._fields import optional
from .ffn import llama_ffn_hidden_size
from .model_config import hf_config_kwargs, mindformers_kwargs
from .model_presets import MODEL_PRESETS

__all__ = ["ModelSpec", "MLP_KINDS", "NORM_KINDS", "BIAS_KINDS", "POSITION_KINDS"]

MLP_KINDS = ("gpt", "gated")
NORM_KINDS = ("layernorm", "rmsnorm")
BIAS_KINDS = ("none", "qkv", "all")
POSITION_KINDS = ("rope", "learned", "alibi", "none")


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
    position_embedding : {"rope", "learned", "alibi", "none"}, optional
        Learned absolute positions add ``s × h`` parameters. Defaults to learned for GPT,
        rotary for gated MLPs. ALiBi (Press et al. 2022: a per-head linear bias added to
        the attention scores; BLOOM, MPT) and ``"none"`` add no parameters and no rotary
        kernels; unfused, ALiBi adds one bias-add pass over the score matrix.
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
    num_shared_experts: int = optional(0)
    shared_expert_ffn_hidden_size: int | None = optional(None)
    first_dense_layers: int = optional(0)
    qk_norm: bool = optional(False)
    q_lora_rank: int | None = optional(None)
    kv_lora_rank: int | None = optional(None)
    qk_rope_head_dim: int = optional(0)
    v_head_dim: int | None = optional(None)

    #: Published shapes by name (:data:`perfkit.specs.model_presets.MODEL_PRESETS`).
    _PRESETS: ClassVar[dict[str, dict[str, Any]]] = MODEL_PRESETS

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
        kwargs, source, context = hf_config_kwargs(config, seq_length)
        try:
            spec = cls(**kwargs)
        except InvalidArgumentError as exc:
            raise ConfigFileError(source, f"inconsistent model shape: {exc}") from exc
        if context is not None:  # only for a config that loads: a refused one says why
            warnings.warn(PerfkitWarning(
                f"{source}: no seq_length given, so the model's maximum context "
                f"({context} tokens, from the config) is used as the training sequence "
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
        kwargs, source = mindformers_kwargs(path, seq_length)
        try:
            return cls(**kwargs)
        except InvalidArgumentError as exc:
            raise ConfigFileError(source, f"inconsistent model shape: {exc}") from exc
