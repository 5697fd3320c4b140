"""Reading a model's shape from a Hugging Face ``config.json`` or a MindFormers YAML.

Each reader returns the :class:`~perfkit.specs.ModelSpec` keywords the file gives (the
class methods :meth:`~perfkit.specs.ModelSpec.from_hf_config` and
:meth:`~perfkit.specs.ModelSpec.from_mindformers_yaml` build the spec and document every
key read). A key that is missing or not a number raises
:class:`~perfkit.errors.ConfigFileError` naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._values import (
    parse_bool,
    parse_number,
    parse_whole,
    parse_whole_fields,
    read_config_text,
)
from ..errors import ConfigFileError
from .ffn import mindformers_ffn_hidden_size

__all__ = ["hf_config_kwargs", "mindformers_kwargs", "MINDFORMERS_KEYS"]


def hf_config_kwargs(config: Mapping[str, Any] | str | Path, seq_length: int | None = None
                     ) -> tuple[dict[str, Any], str, Any]:
    """ModelSpec keywords from a Hugging Face config (a dict, or a path to the file).

    Returns
    -------
    (dict, str, object)
        The keywords, the source named in messages (``"<dict>"`` or the path), and the
        config's maximum context when it stands in for a missing ``seq_length`` (else
        None): the caller warns about it once the spec is built.
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
    return kwargs, source, (seq_length if context_as_seq else None)


#: The ``model_config`` keys read for each ModelSpec field, in the order they are tried
#: (:func:`mindformers_kwargs`; a YAML error names the line of the first one present).
MINDFORMERS_KEYS: dict[str, tuple[str, ...]] = {
    "num_layers": ("num_layers", "num_hidden_layers"),
    "hidden_size": ("hidden_size",),
    "num_attention_heads": ("num_heads", "num_attention_heads"),
    "num_kv_heads": ("n_kv_heads", "num_query_groups", "num_key_value_heads"),
    "ffn_hidden_size": ("intermediate_size", "ffn_hidden_size"),
    "vocab_size": ("vocab_size",),
    "seq_length": ("seq_length",),
}


def mindformers_kwargs(path: str | Path | Mapping[str, Any], seq_length: int | None = None
                       ) -> tuple[dict[str, Any], str]:
    """ModelSpec keywords from a MindFormers YAML (``model: model_config:``) or its dict.

    Returns
    -------
    (dict, str)
        The keywords and the source named in messages (``"<dict>"`` or the path).
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

    keys = MINDFORMERS_KEYS
    mtype = str(pick("type", default=""))
    hidden = parse_whole(pick(*keys["hidden_size"], required=True), "hidden_size", source)
    gpt = "gpt" in mtype.lower()
    if gpt:
        ffn = pick(*keys["ffn_hidden_size"],
                   default=parse_whole(pick("expand_ratio", default=4), "expand_ratio",
                                       source) * hidden)
    else:
        explicit = pick(*keys["ffn_hidden_size"])
        multiplier = pick("ffn_dim_multiplier")
        ffn = mindformers_ffn_hidden_size(
            hidden, parse_whole(pick("multiple_of", default=256), "multiple_of", source),
            None if multiplier is None else parse_number(multiplier, "ffn_dim_multiplier",
                                                         source),
            None if explicit is None else parse_whole(explicit, "intermediate_size",
                                                      source))
    groups = pick(*keys["num_kv_heads"])
    if mc.get("num_query_groups") is not None and not parse_bool(
            mc.get("group_query_attention", True), "group_query_attention", source):
        groups = None
    moe = doc.get("moe_config") if isinstance(doc.get("moe_config"), Mapping) else {}
    experts = moe.get("expert_num") or pick("num_experts", "num_moe_experts", default=1)
    top_k = moe.get("num_experts_chosen") or pick("moe_router_topk", default=1)
    kwargs = {
        "num_layers": pick(*keys["num_layers"], required=True),
        "hidden_size": hidden,
        "num_attention_heads": pick(*keys["num_attention_heads"], required=True),
        "num_kv_heads": groups,
        "seq_length": seq_length or pick(*keys["seq_length"], required=True),
        "vocab_size": pick(*keys["vocab_size"], required=True),
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
    return kwargs, source


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
