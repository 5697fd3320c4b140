"""read_mindformers_config on configs written in the shapes of the tuning guide's examples.

Each test loads the same YAML with PyYAML and compares against the raw values.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from perfkit.errors import ConfigFileError
from perfkit.io.logs.config import parse_memory_size, read_mindformers_config
from perfkit.specs import ModelSpec

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"


def _yaml(name: str) -> dict:
    return yaml.safe_load((CONFIGS / name).read_text(encoding="utf-8"))


def _line_of(name: str, needle: str) -> int:
    lines = (CONFIGS / name).read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if needle in line)


def test_full_recompute_single_stage() -> None:
    raw = _yaml("llama2_13b_full.yaml")
    model, par, extras = read_mindformers_config(CONFIGS / "llama2_13b_full.yaml")
    pc, rc = raw["parallel_config"], raw["runner_config"]
    assert (par.dp, par.tp, par.pp) == (pc["data_parallel"], pc["model_parallel"],
                                        pc["pipeline_stage"])
    assert par.micro_batch_size == rc["batch_size"]
    assert par.num_micro_batches == rc["gradient_accumulation_steps"]  # pp == 1
    assert par.recompute == "full" and par.recompute_layers is None
    assert par.optimizer_shard == pc["data_parallel"]  # enable_parallel_optimizer, no size
    assert extras["global_batch_size"] == (pc["data_parallel"] * rc["batch_size"]
                                           * rc["gradient_accumulation_steps"])
    assert extras["max_device_memory_bytes"] == 58 * 2**30
    assert extras["profile"] == {k: raw[k] for k in raw if k.startswith(("profile",
                                                                          "init_start"))}
    assert extras["jit_level"] == raw["context"]["jit_config"]["jit_level"]
    # the model part is ModelSpec.from_mindformers_yaml; 13B has the published size
    assert model == ModelSpec.from_mindformers_yaml(CONFIGS / "llama2_13b_full.yaml")
    assert model.num_parameters() == ModelSpec.preset("llama2-13b").num_parameters()


def test_pp2_recompute_per_stage_and_select_list() -> None:
    raw = _yaml("llama2_13b_pp2_select.yaml")
    _, par, extras = read_mindformers_config(CONFIGS / "llama2_13b_pp2_select.yaml")
    rcfg = raw["recompute_config"]
    assert par.pp == 2 and par.recompute_layers == tuple(rcfg["recompute"])
    assert par.recompute == "selective"
    assert par.num_micro_batches == raw["parallel_config"]["micro_batch_num"]
    assert par.optimizer_shard == (
        raw["parallel"]["parallel_optimizer_config"]["optimizer_weight_shard_size"])
    # use_seq_parallel is ignored by MindFormers without model parallel
    assert raw["parallel_config"]["use_seq_parallel"] is True
    assert par.sequence_parallel is False and extras["use_seq_parallel"] is True
    assert extras["recompute_config"]["select_recompute"] == rcfg["select_recompute"]
    assert extras["recompute_config"]["select_comm_recompute"] == rcfg["select_comm_recompute"]
    assert extras["max_device_memory_bytes"] == pytest.approx(57.2 * 2**30)
    assert extras["profile"]["profiler_level"] == raw["profiler_level"]
    assert extras["profile"]["profile_communication"] is raw["profile_communication"]


def test_select_recompute_per_stage_dict() -> None:
    raw = _yaml("llama2_13b_select_dict.yaml")
    _, par, extras = read_mindformers_config(CONFIGS / "llama2_13b_select_dict.yaml")
    assert extras["recompute_config"]["select_recompute"] == raw["recompute_config"][
        "select_recompute"]
    assert len(extras["recompute_config"]["select_recompute"]) == len(
        raw["recompute_config"]["select_recompute"])
    assert par.recompute == "selective" and par.recompute_layers is None


def test_interleaved_chunks_are_summed_per_stage() -> None:
    raw = _yaml("interleaved_chunks.yaml")
    _, par, extras = read_mindformers_config(CONFIGS / "interleaved_chunks.yaml")
    chunks = raw["recompute_config"]["recompute"]
    assert par.recompute_layers == tuple(sum(col) for col in zip(*chunks, strict=True))
    assert par.vpp == raw["model"]["model_config"]["pp_interleave_num"]
    assert par.sequence_parallel is True  # tp > 1 here
    assert par.optimizer_shard == 1
    assert extras["recompute_config"]["select_comm_recompute"] is True


def test_garbled_dict_from_the_guide_names_its_line() -> None:
    with pytest.raises(ConfigFileError) as err:
        read_mindformers_config(CONFIGS / "bad_select_dict.yaml")
    assert "bad_select_dict.yaml" in str(err.value)
    assert f"line {_line_of('bad_select_dict.yaml', ']e')}:" in str(err.value)


def test_wrong_number_of_stages_names_its_line() -> None:
    with pytest.raises(ConfigFileError) as err:
        read_mindformers_config(CONFIGS / "bad_recompute_len.yaml")
    assert f"line {_line_of('bad_recompute_len.yaml', 'recompute:')}:" in str(err.value)
    assert "pipeline stage" in str(err.value)


MODEL = ("model:\n  model_config: {seq_length: 128, hidden_size: 64, num_layers: 2, "
         "num_heads: 4, vocab_size: 100}\n")


@pytest.mark.parametrize(("body", "needle"), [
    ("parallel_config:\n  data_parallel: eight\n", "data_parallel: eight"),
    ("context:\n  max_device_memory: lots\n", "max_device_memory"),
    ("parallel_config:\n  pipeline_stage: 2\n  micro_batch_num: 0\n", "micro_batch_num"),
    ("recompute_config:\n  recompute: maybe\n", "recompute: maybe"),
    ("recompute_config:\n  select_recompute: 3\n", "select_recompute"),
    ("parallel_config:\n  use_seq_parallel: 'maybe'\n", "use_seq_parallel"),
    ("parallel: [1, 2]\n", "parallel:"),
])
def test_bad_values_name_file_and_line(tmp_path: Path, body: str, needle: str) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text(body + MODEL, encoding="utf-8")
    line = next(i for i, text in enumerate((body + MODEL).splitlines(), 1) if needle in text)
    with pytest.raises(ConfigFileError) as err:
        read_mindformers_config(path)
    assert str(path) in str(err.value) and f"line {line}:" in str(err.value)


def test_missing_model_section_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text("parallel_config:\n  data_parallel: 2\n", encoding="utf-8")
    with pytest.raises(ConfigFileError, match="model_config"):
        read_mindformers_config(path)
    path.write_text("runner_config:\n  batch_size: 1\nmodel:\n  model_config:\n"
                    "    hidden_size: 64\n", encoding="utf-8")
    with pytest.raises(ConfigFileError, match=r"line 4: model_config lacks num_layers"):
        read_mindformers_config(path)
    with pytest.raises(ConfigFileError, match="cannot read"):
        read_mindformers_config(tmp_path / "nope.yaml")


def test_parse_memory_size() -> None:
    assert parse_memory_size("58GB") == 58 * 1024**3
    assert parse_memory_size("512MB") == 512 * 1024**2
    assert parse_memory_size(2) == 2 * 1024**3


@pytest.mark.parametrize(("select", "kind", "caveat"), [
    ("[0, 0]", "none", False),          # counts of zero select nothing
    ("[20, 20]", "selective", False),   # every layer of both stages (40 layers on pp 2)
    ("[10, 0]", "selective", True),     # part of stage 0, none of stage 1
    ("{'feed_forward\\.mul': [4, 0]}", "selective", True)])
def test_per_stage_select_recompute_counts(tmp_path: Path, select: str, kind: str,
                                           caveat: bool) -> None:
    """A new user's walk: ``select_recompute: [0, 0]`` read as selective recompute, its
    activations about 6× too low. Counts of zero now select nothing; counts short of a
    stage's layers are said (perfkit counts every layer selective), and the job says
    so among its problems."""
    import perfkit as pk

    text = (CONFIGS / "llama2_13b_pp2_select.yaml").read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if x.strip().startswith("select_recompute:"))
    text = text.replace(line, f"  select_recompute: {select}")
    text = "\n".join(x for x in text.splitlines()
                     if not x.strip().startswith("select_comm_recompute:"))
    path = tmp_path / "select.yaml"
    path.write_text(text, encoding="utf-8")
    raw = yaml.safe_load(text)
    assert raw["model"]["model_config"]["num_layers"] == 40  # 20 per stage
    _, par, extras = read_mindformers_config(path)
    assert par.recompute == kind
    assert bool(extras["notes"]) is caveat
    if caveat:
        (note,) = extras["notes"]["recompute"]
        assert note.startswith("recompute_config.select_recompute selects [") \
            and "layers per stage of [20, 20]" in note
        job = pk.infer_job(pk.load("sample:llama2-7b-tp2", progress=False), config=path)
        assert any(p.endswith(note) and p.startswith("select.yaml: ")
                   for p in job.problems())


def test_fewer_micro_batches_than_stages_is_a_job_problem(tmp_path: Path) -> None:
    """A walk: ``micro_batch_num: 1`` with ``pipeline_stage: 2`` passed silently; the
    schedule then idles (pp − 1) / (m + pp − 1) = 1/2 of the step."""
    import perfkit as pk

    text = (CONFIGS / "llama2_13b_pp2_select.yaml").read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    assert raw["parallel_config"]["pipeline_stage"] == 2
    line = next(x for x in text.splitlines() if x.strip().startswith("micro_batch_num:"))
    path = tmp_path / "mbn1.yaml"
    path.write_text(text.replace(line, line.split(":")[0] + ": 1"), encoding="utf-8")
    _, par, extras = read_mindformers_config(path)
    assert par.num_micro_batches == 1 * raw["runner_config"].get("gradient_accumulation_steps", 1)
    (note,) = extras["notes"]["num_micro_batches"]
    assert note.startswith("parallel_config.micro_batch_num 1 is below pipeline_stage 2: "
                           "each stage idles 50 % of the step")
    job = pk.infer_job(pk.load("sample:llama2-7b-tp2", progress=False), config=path)
    assert f"mbn1.yaml: {note}" in job.problems()


@pytest.mark.parametrize(("key", "value", "said"), [
    ("num_heads", "30", "num_attention_heads: must divide hidden_size"),
    ("num_layers", "[40]", "num_layers: expected a number")])
def test_a_model_error_names_the_line_of_its_key(tmp_path: Path, key: str, value: str,
                                                 said: str) -> None:
    """A walk: model errors named the ``model_config:`` line, not the key's."""
    text = (CONFIGS / "llama2_13b_full.yaml").read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if x.strip().startswith(f"{key}:"))
    path = tmp_path / "bad.yaml"
    path.write_text(text.replace(line, line.split(":")[0] + f": {value}"), encoding="utf-8")
    want = next(i for i, x in enumerate(path.read_text().splitlines(), 1)
                if x.strip().startswith(f"{key}:"))
    with pytest.raises(ConfigFileError, match=f"line {want}: .*{said}"):
        read_mindformers_config(path)
