"""ModelSpec, ParallelConfig and Hardware: published shapes, config readers, rules."""

import json
import warnings

import pytest

import perfkit as pk
from perfkit.errors import PerfkitWarning
from perfkit.specs import llama_ffn_hidden_size, mindformers_ffn_hidden_size

# Parameter counts as published (Hugging Face model cards / papers), exact where the
# released checkpoints give them.
PUBLISHED_PARAMETERS = {
    "llama2-7b": 6_738_415_616,
    "llama2-13b": 13_015_864_320,
    "llama2-70b": 68_976_648_192,
    "llama3-8b": 8_030_261_248,
    "llama3-70b": 70_553_706_496,
    "llama3-405b": 405_853_388_800,
    "mixtral-8x7b": 46_702_792_704,
    # HF model.safetensors.index.json total_size (bf16 bytes) / 2
    "qwen3-30b-a3b": 30_532_122_624,
    "qwen3-235b-a22b": 235_093_634_560,
}


@pytest.mark.parametrize("name,count", sorted(PUBLISHED_PARAMETERS.items()))
def test_preset_parameter_counts_match_published(name, count):
    assert pk.ModelSpec.preset(name).num_parameters() == count


def test_gpt3_parameter_count_by_hand():
    # 96 layers of 12h^2 + 13h (QKV/O and MLP weights and biases, two LayerNorms),
    # tied 50257-token embedding, 2048 learned positions, final LayerNorm.
    h, L = 12288, 96
    expected = L * (12 * h * h + 13 * h) + 50257 * h + 2048 * h + 2 * h
    m = pk.ModelSpec.preset("gpt3-175b")
    assert m.num_parameters() == expected
    assert abs(expected - 175e9) / 175e9 < 0.003  # "175B" in the paper


def test_llama2_7b_parameter_count_by_hand():
    h, f, V, L = 4096, 11008, 32000, 32
    per_layer = 4 * h * h + 3 * h * f + 2 * h
    assert pk.ModelSpec.preset("llama2-7b").num_parameters() == L * per_layer + 2 * V * h + h


def test_gqa_and_moe_counts_by_hand():
    m = pk.ModelSpec(num_layers=2, hidden_size=64, num_attention_heads=8, num_kv_heads=2,
                     seq_length=16, vocab_size=100, ffn_hidden_size=96, mlp="gated",
                     num_experts=4, moe_top_k=2)
    d = 8
    attention = 64 * 64 + 2 * 64 * (2 * d) + 64 * 64
    experts = 4 * 3 * 64 * 96
    router = 64 * 4
    per_layer = attention + experts + router + 2 * 64
    assert m.num_parameters() == 2 * per_layer + 2 * 100 * 64 + 64
    active = 2 * (attention + 2 * 3 * 64 * 96 + router + 2 * 64) + 2 * 100 * 64 + 64
    assert m.num_active_parameters() == active
    tied = m.replace(tied_embeddings=True)
    assert m.num_parameters() - tied.num_parameters() == 100 * 64


def test_presets_listed_and_unknown_rejected():
    assert {"llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b",
            "llama3-405b", "gpt3-175b", "mixtral-8x7b", "deepseek-v3", "qwen3-30b-a3b",
            "qwen3-235b-a22b"} <= set(pk.ModelSpec.presets())
    with pytest.raises(pk.InvalidArgumentError, match="name"):
        pk.ModelSpec.preset("llama9-1t")


def test_ffn_rules_mindformers_and_meta():
    # MindFormers: multiplier applied to 4h (+0.01) before the 2/3, then round up.
    def mf(h, multiple_of, mult):
        f = 4 * h
        if mult is not None:
            f = int((mult + 0.01) * f)
        f = int(2 * f / 3)
        return -(-f // multiple_of) * multiple_of

    assert mindformers_ffn_hidden_size(5120, 256) == mf(5120, 256, None) == 13824
    assert mindformers_ffn_hidden_size(8192, 4096, 1.3) == mf(8192, 4096, 1.3) == 28672
    assert mindformers_ffn_hidden_size(4096, 1024, 1.3) == 14336  # Llama 3 8B
    assert mindformers_ffn_hidden_size(4096, 256, intermediate_size=11008) == 11008
    # A case where the two rules differ: the +0.01 and the order matter.
    assert mindformers_ffn_hidden_size(1000, 1, 1.5) == int(2 * int(1.51 * 4000) / 3) == 4026
    assert llama_ffn_hidden_size(1000, 1, 1.5) == int(1.5 * int(8000 / 3)) == 3999


def test_from_hf_config_dict_and_path(tmp_path):
    cfg = {"model_type": "llama", "hidden_act": "silu", "num_hidden_layers": 32,
           "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
           "intermediate_size": 14336, "vocab_size": 128256,
           "max_position_embeddings": 8192, "tie_word_embeddings": False}
    from_dict = pk.ModelSpec.from_hf_config(cfg, seq_length=8192)
    assert from_dict.num_parameters() == PUBLISHED_PARAMETERS["llama3-8b"]
    assert from_dict.mlp == "gated" and from_dict.num_kv_heads == 8
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert pk.ModelSpec.from_hf_config(path, seq_length=8192) == from_dict
    assert pk.ModelSpec.from_hf_config(tmp_path, seq_length=4096).seq_length == 4096


def test_from_hf_config_warns_when_it_uses_the_maximum_context(tmp_path):
    # max_position_embeddings is the longest context the model supports, not what a job
    # trains with: without seq_length, perfkit uses it and says so, naming the config.
    cfg = {"model_type": "llama", "hidden_act": "silu", "num_hidden_layers": 2,
           "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100,
           "intermediate_size": 128, "max_position_embeddings": 32768}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.warns(PerfkitWarning, match=r"config\.json: no seq_length given.*32768"):
        m = pk.ModelSpec.from_hf_config(path)
    assert m.seq_length == 32768
    with pytest.warns(PerfkitWarning, match="<dict>"):
        pk.ModelSpec.from_hf_config(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pk.ModelSpec.from_hf_config(cfg, seq_length=4096).seq_length == 4096


def test_from_hf_config_gpt2():
    cfg = {"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12,
           "vocab_size": 50257, "n_positions": 1024, "activation_function": "gelu_new"}
    m = pk.ModelSpec.from_hf_config(cfg, seq_length=1024)
    assert m.mlp == "gpt" and m.tied_embeddings and m.norm == "layernorm"
    assert m.num_parameters() == 124_439_808  # GPT-2 small, as transformers reports


def test_from_hf_config_mixtral():
    cfg = {"model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096,
           "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
           "vocab_size": 32000, "max_position_embeddings": 32768, "num_local_experts": 8,
           "num_experts_per_tok": 2, "hidden_act": "silu"}
    m = pk.ModelSpec.from_hf_config(cfg, seq_length=4096)
    assert m.num_parameters() == PUBLISHED_PARAMETERS["mixtral-8x7b"]
    assert (m.num_experts, m.moe_top_k) == (8, 2)


def test_from_hf_config_bad_inputs(tmp_path):
    with pytest.raises(pk.ConfigFileError, match="missing key"):
        pk.ModelSpec.from_hf_config({"hidden_size": 8})
    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": 8,')
    with pytest.raises(pk.ConfigFileError, match=r"config\.json.*not valid JSON"):
        pk.ModelSpec.from_hf_config(bad)
    with pytest.raises(pk.ConfigFileError, match="cannot read"):
        pk.ModelSpec.from_hf_config(tmp_path / "nope.json")
    with pytest.raises(pk.ConfigFileError, match="inconsistent"):
        pk.ModelSpec.from_hf_config({"num_hidden_layers": 2, "hidden_size": 10,
                                     "num_attention_heads": 3, "vocab_size": 5,
                                     "max_position_embeddings": 8}, seq_length=8)


LLAMA2_13B_YAML = """
model:
  model_config:
    type: LlamaConfig
    batch_size: 1
    seq_length: 4096
    hidden_size: 5120
    num_layers: 40
    num_heads: 40
    vocab_size: 32000
    multiple_of: 256
    rms_norm_eps: 1.0e-5
    compute_dtype: "float16"
  arch:
    type: LlamaForCausalLM
"""

LLAMA2_70B_YAML = """
model:
  model_config:
    type: LlamaConfig
    seq_length: 4096
    hidden_size: 8192
    num_layers: 80
    num_heads: 64
    n_kv_heads: 8
    vocab_size: 32000
    multiple_of: 4096
    ffn_dim_multiplier: 1.3
"""


def test_from_mindformers_yaml(tmp_path):
    p13 = tmp_path / "llama2_13b.yaml"
    p13.write_text(LLAMA2_13B_YAML)
    m13 = pk.ModelSpec.from_mindformers_yaml(p13)
    assert m13.ffn_hidden_size == 13824 and m13.mlp == "gated"
    assert m13.num_parameters() == PUBLISHED_PARAMETERS["llama2-13b"]
    p70 = tmp_path / "llama2_70b.yaml"
    p70.write_text(LLAMA2_70B_YAML)
    m70 = pk.ModelSpec.from_mindformers_yaml(p70)
    assert (m70.ffn_hidden_size, m70.num_kv_heads) == (28672, 8)
    assert m70.num_parameters() == PUBLISHED_PARAMETERS["llama2-70b"]


def test_from_mindformers_yaml_errors(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("model: [unclosed\n")
    with pytest.raises(pk.ConfigFileError, match="not valid YAML"):
        pk.ModelSpec.from_mindformers_yaml(p)
    p.write_text("runner_config:\n  epochs: 1\n")
    with pytest.raises(pk.ConfigFileError, match="model_config"):
        pk.ModelSpec.from_mindformers_yaml(p)
    p.write_text("model:\n  model_config:\n    hidden_size: 64\n")
    with pytest.raises(pk.ConfigFileError, match="num_layers"):
        pk.ModelSpec.from_mindformers_yaml(p)


@pytest.mark.parametrize("kwargs,param", [
    ({"num_layers": 0}, "num_layers"),
    ({"hidden_size": -8}, "hidden_size"),
    ({"num_attention_heads": 3}, "num_attention_heads"),
    ({"num_kv_heads": 3}, "num_kv_heads"),
    ({"mlp": "swiglu"}, "mlp"),
    ({"num_experts": 2, "moe_top_k": 3}, "moe_top_k"),
    ({"seq_length": 2.5}, "seq_length"),
])
def test_model_spec_rejects_bad_arguments(kwargs, param):
    base = dict(num_layers=2, hidden_size=64, num_attention_heads=8, seq_length=16,
                vocab_size=100)
    with pytest.raises(pk.InvalidArgumentError) as err:
        pk.ModelSpec(**{**base, **kwargs})
    assert err.value.parameter == param
    assert isinstance(err.value, ValueError) and isinstance(err.value, pk.PerfkitError)


def test_parallel_config_properties():
    par = pk.ParallelConfig(dp=8, tp=1, pp=2, micro_batch_size=1, num_micro_batches=128)
    assert par.world_size == 16
    assert par.global_batch_size == 8 * 1 * 128


@pytest.mark.parametrize("kwargs,param,words", [
    ({"dp": 0}, "dp", ">= 1"),
    ({"pp": 4, "vpp": 2, "num_micro_batches": 2}, "num_micro_batches", ">= pp"),
    ({"pp": 4, "vpp": 2, "num_micro_batches": 6}, "num_micro_batches", "multiple of pp"),
    ({"vpp": 2}, "vpp", "pipeline"),
    ({"dp": 4, "optimizer_shard": 3}, "optimizer_shard", "divide dp"),
    ({"sequence_parallel": True}, "sequence_parallel", "tp > 1"),
    ({"recompute": "partial"}, "recompute", "one of"),
    ({"zero_stage": 4}, "zero_stage", "0, 1, 2 or 3"),
    ({"pp": 2, "num_micro_batches": 2, "recompute_layers": [1]}, "recompute_layers",
     "per pipeline stage"),
])
def test_parallel_config_rules(kwargs, param, words):
    with pytest.raises(pk.ParallelConfigError) as err:
        pk.ParallelConfig(**kwargs)
    assert err.value.parameter == param
    assert words in str(err.value)


def test_parallel_config_rules_with_model():
    model = pk.ModelSpec.preset("llama2-70b")  # 64 heads, 8 KV heads, 80 layers
    assert pk.ParallelConfig(tp=8, pp=4, num_micro_batches=8).problems(model) == []
    with pytest.raises(pk.ParallelConfigError, match="num_kv_heads=8"):
        pk.ParallelConfig(tp=16).validate(model)
    with pytest.raises(pk.ParallelConfigError, match="num_layers=80"):
        pk.ParallelConfig(pp=3, num_micro_batches=3).validate(model)
    with pytest.raises(pk.ParallelConfigError, match="num_devices=64"):
        pk.ParallelConfig(dp=2, tp=8).validate(model, num_devices=64)
    with pytest.raises(pk.ParallelConfigError, match="layers per stage"):
        pk.ParallelConfig(pp=2, num_micro_batches=2, recompute_layers=[41, 0]).validate(model)
    # Several broken rules are all listed.
    err = pytest.raises(pk.ParallelConfigError, pk.ParallelConfig(tp=3, pp=3,
                                                                  num_micro_batches=3).validate,
                        model, 8)
    assert len(err.value.rules) == 3


def test_hardware_presets_and_peaks():
    names = pk.Hardware.presets()
    assert {"ascend-910b", "a100", "h100", "h200"} <= set(names)
    assert pk.Hardware.preset("a100").peak("bf16") == 312e12
    assert pk.Hardware.preset("h100").peak("bf16") == pytest.approx(989.5e12)
    # NVIDIA's "141 GB" of HBM3e, like the H100's "80 GB", is binary (the H100 preset's
    # 80 GiB): 141 GiB, not 141e9 bytes (131 GiB, 9 GiB short of the device)
    assert pk.Hardware.preset("h200").memory_bytes == 141 * 2**30
    assert pk.Hardware.preset("h100").memory_bytes == 80 * 2**30
    assert pk.Hardware.preset("910B").name == "ascend-910b"
    own = pk.Hardware.preset("ascend-910b").replace(peak_flops={"fp16": 400e12})
    assert own.peak() == 400e12
    with pytest.raises(pk.InvalidArgumentError, match="dtype"):
        pk.Hardware.preset("a100").peak("fp4")
    with pytest.raises(pk.InvalidArgumentError, match="peak_flops"):
        pk.Hardware(name="x", peak_flops={"bf16": 0}, memory_bytes=1, memory_bandwidth=1,
                    intra_node_bandwidth=1, inter_node_bandwidth=1)



def test_every_hardware_preset_row_names_its_source_and_its_aliases_resolve():
    from perfkit.specs.hardware_presets import HARDWARE_PRESETS, preset_source

    assert sorted(HARDWARE_PRESETS) == pk.Hardware.presets()
    seen: set[str] = set()
    for name, row in HARDWARE_PRESETS.items():
        assert row["name"] == name
        assert len(row["source"]) > 40, name  # a sentence naming the datasheet, not a tag
        assert preset_source(name) == row["source"]
        hw = pk.Hardware.preset(name)
        for alias in row["aliases"]:
            assert alias not in seen and alias not in HARDWARE_PRESETS, alias
            seen.add(alias)
            assert pk.Hardware.preset(alias.upper()) == hw
            assert preset_source(alias) == row["source"]
    with pytest.raises(pk.InvalidArgumentError, match="unknown hardware preset"):
        pk.Hardware.preset("no-such-device")

def test_hf_tied_default_follows_transformers():
    base = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
            "vocab_size": 100, "max_position_embeddings": 32, "intermediate_size": 128}
    def read(cfg):
        return pk.ModelSpec.from_hf_config(cfg, seq_length=32)

    assert not read({**base, "model_type": "llama"}).tied_embeddings
    assert read({**base, "model_type": "gemma", "hidden_act": "gelu"}).tied_embeddings
    assert not read({**base, "model_type": "gemma", "tie_word_embeddings": False}
                    ).tied_embeddings
