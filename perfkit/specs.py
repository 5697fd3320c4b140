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
        (:func:`llama_ffn_hidden_size`) for ``mlp="gated"``.
    num_kv_heads : int, optional
        Key/value heads (GQA); defaults to ``num_attention_heads`` (MHA).
        The GQA ratio ``q = a / num_kv_heads``.
    mlp : {"gpt", "gated"}
        ``"gpt"``: two GEMMs ``h→f→h``; ``"gated"``: three (gate, up, down) as in Llama.
    num_experts, moe_top_k : int
        MoE: every layer's MLP is replaced by ``num_experts`` experts of which
        ``moe_top_k`` run per token, plus a router ``h × num_experts``.
    tied_embeddings : bool
        Whether the output projection shares the input embedding matrix.
    name : str, optional
        Display name.
    head_dim : int, optional
        Per-head size; defaults to ``h / a``.
    norm : {"layernorm", "rmsnorm"}, optional
        Defaults to LayerNorm (weight and bias) for GPT, RMSNorm (weight) for gated MLPs.
    bias : {"none", "qkv", "all"}, optional
        Linear-layer biases. Defaults to ``"all"`` for GPT and ``"none"`` for gated MLPs.
    position_embedding : {"rope", "learned"}, optional
        Learned absolute positions add ``s × h`` parameters. Defaults to learned for GPT,
        rotary for gated MLPs.
    moe_ffn_hidden_size : int, optional
        FFN size of each expert; defaults to ``ffn_hidden_size``.
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
        kv = a if self.num_kv_heads is None else check_positive_int("num_kv_heads",
                                                                     self.num_kv_heads)
        if a % kv:
            raise InvalidArgumentError("num_kv_heads",
                                       f"must divide num_attention_heads={a}", kv)
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
        defaults = {"norm": "rmsnorm" if gated else "layernorm",
                    "bias": "none" if gated else "all",
                    "position_embedding": "rope" if gated else "learned"}
        for name, kinds in (("norm", NORM_KINDS), ("bias", BIAS_KINDS),
                            ("position_embedding", POSITION_KINDS)):
            value = getattr(self, name)
            object.__setattr__(self, name, defaults[name] if value is None
                               else check_choice(name, value, kinds))
        if not isinstance(self.tied_embeddings, bool):
            raise InvalidArgumentError("tied_embeddings", "must be True or False",
                                       self.tied_embeddings)

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
    def attention_width(self) -> int:
        """``a × head_dim``: width of the query projection output."""
        return self.num_attention_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """``num_kv_heads × head_dim``: width of each of the K and V projections."""
        return self.num_kv_heads * self.head_dim

    # ---- parameters ------------------------------------------------------------------
    def parameter_breakdown(self) -> dict[str, int]:
        """Exact parameter counts by component.

        Returns a dict with ``attention`` (per layer), ``mlp`` (per layer, all experts),
        ``router`` (per layer), ``norms`` (per layer, two norms), ``layer`` (sum per layer),
        ``embedding`` (``V × h``), ``position`` (``s × h`` if learned), ``final_norm``,
        ``output`` (``V × h`` unless tied) and ``total``.
        """
        h, f = self.hidden_size, self.ffn_hidden_size
        qw, kvw = self.attention_width, self.kv_width
        attention = h * qw + 2 * h * kvw + qw * h
        if self.bias in ("qkv", "all"):
            attention += qw + 2 * kvw
        if self.bias == "all":
            attention += h
        n_mats = 3 if self.mlp == "gated" else 2
        expert_f = self.moe_ffn_hidden_size if self.is_moe else f
        one_mlp = n_mats * h * expert_f
        if self.bias == "all":
            one_mlp += (n_mats - 1) * expert_f + h
        mlp = one_mlp * self.num_experts
        router = h * self.num_experts if self.is_moe else 0
        norm_size = 2 * h if self.norm == "layernorm" else h
        norms = 2 * norm_size
        layer = attention + mlp + router + norms
        embedding = self.vocab_size * h
        position = self.seq_length * h if self.position_embedding == "learned" else 0
        output = 0 if self.tied_embeddings else self.vocab_size * h
        total = self.num_layers * layer + embedding + position + norm_size + output
        return {"attention": attention, "mlp": mlp, "router": router, "norms": norms,
                "layer": layer, "embedding": embedding, "position": position,
                "final_norm": norm_size, "output": output, "total": total}

    def num_parameters(self) -> int:
        """Exact number of trainable parameters (all experts counted)."""
        return self.parameter_breakdown()["total"]

    def num_active_parameters(self) -> int:
        """Parameters that touch one token: MoE counts only ``moe_top_k`` experts."""
        b = self.parameter_breakdown()
        active_mlp = b["mlp"] // self.num_experts * self.moe_top_k
        layer = b["layer"] - b["mlp"] + active_mlp
        return (self.num_layers * layer + b["embedding"] + b["position"] + b["final_norm"]
                + b["output"])

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
        ``num_local_experts``/``num_experts``, ``num_experts_per_tok``,
        ``moe_intermediate_size``, ``model_type``, ``hidden_act``.
        Llama-family models (``silu`` activation or a known ``model_type``) get a gated MLP
        and RMSNorm; ``gpt2`` gets LayerNorm, biases and learned positions.
        ``seq_length`` overrides the context length (default: the config's maximum).
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
        kwargs: dict[str, Any] = {
            "num_layers": pick("num_hidden_layers", "n_layer", "num_layers", required=True),
            "hidden_size": hidden,
            "num_attention_heads": pick("num_attention_heads", "n_head", required=True),
            "num_kv_heads": pick("num_key_value_heads", "num_kv_heads"),
            "vocab_size": pick("vocab_size", required=True),
            "seq_length": seq_length or pick("max_position_embeddings", "n_positions",
                                             "seq_length", "n_ctx", required=True),
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
        parse_whole_fields(kwargs, _WHOLE_FIELDS, cfg, source)
        if gpt2_like:
            kwargs.update(norm="layernorm", bias="all", position_embedding="learned")
        elif llama_like:
            kwargs.update(norm="rmsnorm", position_embedding="rope",
                          bias="qkv" if model_type.startswith("qwen2") else "none")
        try:
            return cls(**kwargs)
        except InvalidArgumentError as exc:
            raise ConfigFileError(source, f"inconsistent model shape: {exc}") from exc

    @classmethod
    @boundary(ConfigFileError, path_arg="path", what="a MindFormers YAML")
    def from_mindformers_yaml(cls, path: str | Path | Mapping[str, Any],
                              seq_length: int | None = None) -> ModelSpec:
        """Build from a MindFormers YAML (``model: model_config:``), a path or a loaded dict.

        Keys read: ``type``, ``num_layers``, ``hidden_size``, ``num_heads``,
        ``n_kv_heads``, ``seq_length``, ``vocab_size``, ``intermediate_size``,
        ``multiple_of`` (default 256), ``ffn_dim_multiplier``, ``tie_word_embeddings``,
        and ``moe_config: expert_num, num_experts_chosen``; the newer ``mcore`` spellings
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
        parse_whole_fields(kwargs, _WHOLE_FIELDS, {**moe, **mc}, source)
        try:
            return cls(**kwargs)
        except InvalidArgumentError as exc:
            raise ConfigFileError(source, f"inconsistent model shape: {exc}") from exc


# Config classes whose tie_word_embeddings defaults to False (transformers' own defaults);
# any other model_type takes PretrainedConfig's default, True, when the key is missing.
_UNTIED_HF_TYPES = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                    "internlm2", "baichuan", "yi", "deepseek", "deepseek_v2", "gpt_neox",
                    "gptj", "phi3", "olmo", "olmo2", "stablelm"}
_GATED_HF_TYPES = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                   "gemma", "gemma2", "internlm2", "baichuan", "yi", "deepseek", "deepseek_v2"}

# Published shapes. Sources:
#   Llama 2: Touvron et al. 2023, "Llama 2", Table 1 and the released params.json /
#            HF config.json (meta-llama/Llama-2-{7,13,70}b-hf): vocab 32000, context 4096.
#   Llama 3: Llama Team 2024, "The Llama 3 Herd of Models", Table 3 (layers, model dim,
#            FFN dim, heads, KV heads, vocab 128 000 -> 128256 in config.json), context 8192.
#   GPT-3:   Brown et al. 2020, Table 2.1 (175B: 96 layers, d_model 12288, 96 heads,
#            context 2048), GPT-2 BPE vocab 50257, tied input/output embeddings.
#   Mixtral: Jiang et al. 2024, "Mixtral of Experts", Table 1 (8 experts, top-2).
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
})


_WHOLE_FIELDS = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
                 "seq_length", "vocab_size", "ffn_hidden_size", "head_dim", "num_experts",
                 "moe_top_k", "moe_ffn_hidden_size")
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
        Expert-parallel size (MoE); must divide ``dp``.
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

    def __post_init__(self) -> None:
        try:
            for name in ("dp", "tp", "pp", "vpp", "micro_batch_size", "num_micro_batches",
                         "optimizer_shard", "ep"):
                object.__setattr__(self, name, check_positive_int(name, getattr(self, name)))
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
        """``dp × tp × pp`` devices."""
        return self.dp * self.tp * self.pp

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
        ``pp`` (Megatron's rule); ``optimizer_shard`` and ``ep`` divide ``dp``;
        ``sequence_parallel`` needs ``tp > 1``.
        With a model: ``tp`` divides the attention heads and the KV heads; ``pp × vpp``
        divides ``num_layers``; fully recomputed layers fit on their stage; ``ep`` divides
        ``num_experts``. With ``num_devices``: ``dp × tp × pp == num_devices``.
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
        if self.dp % self.ep:
            out.append(f"ep: must divide dp={self.dp}")
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
        if num_devices is not None and self.world_size != num_devices:
            out.append(f"dp: dp*tp*pp={self.world_size} must equal num_devices={num_devices}")
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
