"""The published-runs file of benchmarks/validation is well-formed and transcribed right.

Checks the data, not the model's errors: every row names a source described in SOURCES.md,
a known unit, a layout whose degrees multiply to its devices and whose batch is
``dp x micro x micro-batches``; the MosaicML rows agree with the printed table row they
quote (every field re-read from the quote) and with the table's own arithmetic (tokens/s =
GPUs x tokens/s/GPU, tokens per batch = batch x sequence, MFU from the README's formula);
torchtitan's A100 MFU follows from its tokens/s with 6·N + 12·L·h·s FLOPs per token (N
counted by hand from the Llama shapes); BLOOM's TFLOPs follow from its seconds per
iteration with Megatron's formula (Narayanan et al. 2021 eq. 3, recompute included) or,
for the rows logged before that formula was adopted, samples/s x s/iteration = batch; and
the mapping refuses, with a reason, what the
current model cannot express.
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "validation" / "published_runs.csv"
SOURCES = ROOT / "benchmarks" / "validation" / "SOURCES.md"


def _rows() -> list[dict[str, str]]:
    with open(DATA, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


ROWS = _rows()


def test_every_row_has_a_described_source_a_known_unit_and_a_quote():
    described = set(re.findall(r"^## `([^`]+)`", SOURCES.read_text(encoding="utf-8"), re.M))
    assert described == {r["source_id"] for r in ROWS}
    assert len({r["row_id"] for r in ROWS}) == len(ROWS)
    for r in ROWS:
        assert r["unit"] in ("tokens/s/device", "s"), r["row_id"]
        assert r["unit2"] in ("", "tokens/s", "MFU %", "model TFLOP/s/device",
                              "TFLOP/s/device"), r["row_id"]
        assert r["quote"] and r["reference"], r["row_id"]
        assert float(r["figure"]) > 0
        assert r["precision"] in ("bf16", "fp16", "fp8"), r["row_id"]


def test_four_sources_of_different_kinds_one_with_many_layouts_on_one_machine():
    kinds = {r["source_id"]: r["source_kind"] for r in ROWS}
    assert len(kinds) >= 4 and len(set(kinds.values())) == len(kinds)
    per_machine: dict[tuple[str, str], set] = {}
    for r in ROWS:
        key = (r["source_id"], r["hardware"])
        per_machine.setdefault(key, set()).add(
            (r["model"], r["devices"], r["micro_batch"], r["num_micro"], r["seq_length"],
             r["recompute"], r["precision"]))
    assert max(len(v) for v in per_machine.values()) >= 50


@pytest.mark.parametrize("r", ROWS, ids=[r["row_id"] for r in ROWS])
def test_layout_is_consistent(r):
    dp, tp, pp, cp = (int(r[k]) for k in ("dp", "tp", "pp", "cp"))
    assert dp * tp * pp * cp == int(r["devices"])
    assert int(r["global_batch"]) == dp * int(r["micro_batch"]) * int(r["num_micro"])
    # eight GPUs per node; a one-GPU run uses one of them
    assert int(r["per_node"]) == 8 or int(r["per_node"]) == int(r["devices"]) == 1


def test_groups_share_source_model_hardware_and_framework():
    seen: dict[str, tuple] = {}
    for r in ROWS:
        key = (r["source_id"], r["model"], r["hardware"], r["hardware_note"],
               r["framework"].split(";")[0])
        assert seen.setdefault(r["group"], key) == key, r["row_id"]


MOSAIC = [r for r in ROWS if r["source_id"] == "mosaic-llm-foundry"]
PEAK = {("h100", "bf16"): 989e12, ("h100", "fp8"): 1979e12, ("a100", "bf16"): 312e12}


@pytest.mark.parametrize("r", MOSAIC, ids=[r["row_id"] for r in MOSAIC])
def test_mosaic_row_matches_its_quoted_table_row(r):
    c = [x.strip() for x in r["quote"].strip("|").split("|")]
    model, seq, gpus, _, mfu, _, _, mbs, ga, gbs, _, tps, tpsg, gbst = c[:14]
    assert r["model"] == f"mpt-{model}"
    assert (r["seq_length"], r["devices"], r["micro_batch"], r["num_micro"],
            r["global_batch"], r["figure"], r["figure2"]) == (seq, gpus, mbs, ga, gbs, tpsg, tps)
    assert r["recompute"] == ("full" if c[17] == "True" else "none")
    s, g, n = int(seq), int(gpus), int(c[19])
    assert int(gbst) == int(gbs) * s                      # tokens per batch
    assert abs(int(tps) - g * int(tpsg)) <= g             # per-GPU figure rounded down
    layers, d = {"125m": (12, 768), "350m": (24, 1024), "760m": (24, 1536), "1b": (24, 2048),
                 "3b": (32, 2560), "7b": (32, 4096), "13b": (40, 5120), "30b": (48, 7168),
                 "70b": (80, 8192)}[model]
    # README: mfu = (3·2·N·s + 3·L·2·2·d·s²)·(sequences/s) / (GPUs·peak)
    flops_seq = 6 * n * s + 12 * layers * d * s * s
    mfu_calc = flops_seq * int(tps) / s / (g * PEAK[(r["hardware"], r["precision"])])
    assert mfu_calc * 100 == pytest.approx(float(mfu), rel=0.01)
    # the step time the harness uses: batch tokens over the devices' rate
    step = int(gbs) * s / (g * int(tpsg))
    assert step == pytest.approx(int(gbs) / (int(tps) / s), rel=0.02)


def _llama_params(layers, h, ffn, vocab, kv_heads, head_dim=128):
    per_layer = 2 * h * h + 2 * h * kv_heads * head_dim + 3 * h * ffn + 2 * h
    return 2 * vocab * h + layers * per_layer + h


@pytest.mark.parametrize("model, shape, seq", [
    ("llama3-8b", (32, 4096, 14336, 128256, 8), 8192),
    ("llama3-70b", (80, 8192, 28672, 128256, 8), 8192),
    ("llama2-13b", (40, 5120, 13824, 32000, 40), 4096),
    ("llama2-70b", (80, 8192, 28672, 32000, 8), 4096),
])
def test_torchtitan_a100_mfu_follows_from_tokens_per_second(model, shape, seq):
    n = _llama_params(*shape)
    rows = [r for r in ROWS if r["row_id"].startswith("tt-a100") and r["model"] == model]
    assert rows
    for r in rows:
        flops_token = 6 * n + 12 * shape[0] * shape[1] * seq
        mfu = float(r["figure"]) * flops_token / 312e12 * 100
        assert mfu == pytest.approx(float(r["figure2"]), rel=0.02), r["row_id"]


def test_mapping_refuses_with_reasons_and_maps_recompute():
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.validation.rows import MappedRow, Refusal, map_row, read_rows
    finally:
        sys.path.remove(str(ROOT))
    rows = {r["row_id"]: r for r in read_rows()}
    shapeless = map_row(dict(rows["nemo-h100-fp8-gpt3-5b-1"], model="unknown", model_fields=""))
    assert isinstance(shapeless, Refusal) and "no shape" in shapeless.reason
    layer = map_row(rows["tt-a100-llama3-8b-1"])        # selective layer AC: every 2nd layer
    assert isinstance(layer, MappedRow)
    assert layer.parallel.recompute == "full" and layer.parallel.recompute_layers in (16, (16,))
    assert layer.step_s == pytest.approx(64 * 8192 / (64 * 2904))
    mf = map_row(rows["mf-900a2-llama2-70b-2"])
    assert isinstance(mf, MappedRow) and mf.selective_layers == (10, 8, 6, 4, 2, 0, 0, 0)
    assert mf.static_scheme == "mindspore" and mf.extra["sharding"] == "optimizer-parallel"
    fsdp = map_row(rows["mosaic-h100-bf16-mpt-7b-1"])
    assert fsdp.parallel.zero_stage == 3 and fsdp.parallel.optimizer_shard == fsdp.parallel.dp
    # torchtitan's op policy names its ops (PROTOCOL.md amendment 4); the quote says "op"
    op = map_row(rows["tt-h100-llama31-8b-t1-1"])
    assert op.parallel.recompute == "selective"
    assert op.parallel.recompute_ops is not None and "out_proj" in op.parallel.recompute_ops
    assert "op policy" in rows["tt-h100-llama31-8b-t1-1"]["assumed"]
    # NeMo's launcher default, the distributed optimizer, sharded over dp (amendment 5)
    for r in (r for r in rows.values() if r["source_id"] == "nemo-24.07-summary"):
        nemo = map_row(r)
        assert nemo.parallel.optimizer_shard == r["dp"] and nemo.parallel.zero_stage == 0
        assert "distributed_fused_adam" in r["assumed"]
    # torchtitan's 405B recipe gathers FSDP's weights in float8 (amendment 6): its Float8
    # rows, and only they, price the gather at one byte per parameter
    for r in (r for r in rows.values() if r["source_id"].startswith("torchtitan")):
        kw = map_row(r).kwargs()
        flagged = "405b" in r["row_id"] and r["precision"] == "fp8"
        assert ("fsdp_float8_all_gather=1" in r["overlap"]) == flagged, r["row_id"]
        assert kw.get("overrides", {}).get("param_gather_bytes") == (1.0 if flagged else None)
    # torchao's float8 tensor parallelism (amendment 8): the Float8 rows that run tp with
    # sequence parallelism, and only they, gather their tp inputs in one byte
    for r in (r for r in rows.values() if r["source_id"].startswith("torchtitan")):
        mapped = map_row(r)
        kw = mapped.kwargs()
        flagged = "float8_linear=1" in r["overlap"] and r["tp"] > 1
        assert not flagged or mapped.parallel.sequence_parallel, r["row_id"]
        assert kw.get("overrides", {}).get("tp_gather_bytes") == (1.0 if flagged else None)
    assert map_row(rows["tt-h100-405b-2d-2"]).kwargs()["overrides"]["tp_gather_bytes"] == 1.0
    # torch.compile (amendment 9): the rows that state it, and only they, fuse their
    # layers' element-wise kernels; where a quoted table line names it, the row states it.
    # The other rows of PyTorch running the model's own code run them eager (amendment
    # 11); the library-kernel frameworks (NeMo, Megatron-DeepSpeed, MindSpore) say nothing
    for r in rows.values():
        kw = map_row(r).kwargs()
        flagged = "torch_compile=1" in r["overlap"]
        assert "torch.compile" not in r["quote"] or flagged, r["row_id"]
        plain_pytorch = r["framework"].startswith(("torchtitan", "composer"))
        expected = "compiled" if flagged else "eager" if plain_pytorch else None
        assert kw.get("overrides", {}).get("elementwise_kernels") == expected, r["row_id"]
    assert "torch_compile=1" not in rows["tt-h100-llama31-8b-t1-1"]["overlap"]
    # what a source states of its devices replaces the preset's figure (amendment 10):
    # torchtitan's H100 tables at d4c86e3758a8 ran HBM2e parts at 2.4 TB/s (amendment 10)
    from perfkit.specs import Hardware
    for r in rows.values():
        mapped = map_row(r)
        stated = r["reference"].startswith("docs/performance.md @ d4c86e3758a8") \
            and r["hardware"] == "h100"
        # and (amendment 15) at the 500 W limit their hardware note states
        one_nic = r["source_id"] == "oneflow-dlperf-megatron"  # amendment 19
        assert r["hardware_fields"] == ("memory_bandwidth=2.4e12;power_limit_w=500" if stated
                                        else "inter_node_bandwidth=1.5625e9" if one_nic
                                        else ""), r["row_id"]
        assert ("500 W power limit" in r["hardware_note"]) == stated, r["row_id"]
        assert ("one InfiniBand 100 Gb/s" in r["hardware_note"]) == one_nic, r["row_id"]
        preset = Hardware.preset(r["hardware"])
        expected = 2.4e12 if stated else preset.memory_bandwidth
        assert mapped.hardware.memory_bandwidth == expected, r["row_id"]
        assert mapped.hardware.power_limit_w == (500 if stated else None), r["row_id"]
        # one 100 Gb/s adapter (12.5 GB/s) shared by the node's 8 GPUs
        nic = 100e9 / 8 / 8 if one_nic else preset.inter_node_bandwidth
        assert mapped.hardware.inter_node_bandwidth == nic, r["row_id"]
        assert mapped.hardware.topology.nics_per_node * nic == (12.5e9 if one_nic else
                                                              8 * preset.inter_node_bandwidth)
        dtype = r["precision"] if r["precision"] != "fp8" else "bf16"
        assert mapped.hardware.peak(dtype) == preset.peak(dtype)
    assert "torch_compile=1" in rows["tt-h100-llama31-8b-t1-2"]["overlap"]
    # torchtitan's sequence parallelism keeps the gathered input for the backward
    # (amendment 12): its rows with tp and sequence parallelism, and only they, say so
    for r in rows.values():
        mapped = map_row(r)
        kw = mapped.kwargs()
        flagged = r["source_id"].startswith("torchtitan") and int(r["tp"]) > 1
        assert not flagged or mapped.parallel.sequence_parallel, r["row_id"]
        assert kw.get("overrides", {}).get("sp_ag_redo") == (False if flagged else None), \
            r["row_id"]
    assert int(rows["tt-h100-llama31-70b-1"]["tp"]) == 8


BLOOM = [r for r in ROWS if r["source_id"] == "bigscience-bloom-prequel"]


@pytest.mark.parametrize("r", BLOOM, ids=[r["row_id"] for r in BLOOM])
def test_bloom_tflops_follow_from_seconds_per_iteration(r):
    fields = dict(kv.split("=") for kv in r["model_fields"].split(";"))
    b, s = int(r["global_batch"]), int(r["seq_length"])
    layers, h, v = int(fields["num_layers"]), int(fields["hidden_size"]), int(fields["vocab_size"])
    # Megatron-DeepSpeed (after PR 251): 96·B·s·l·h²·(1 + s/6h + V/16lh), full recompute
    flops = 96 * b * s * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))
    tflops = flops / (float(r["figure"]) * int(r["devices"]) * 1e12)
    if "02-17" in r["notes"]:
        # printed before the chronicle's "TFLOPs calculation improved" (an older, lower
        # count): check the log line instead, samples/s x s/iteration = global batch
        sps = float(re.search(r"samples per second: ([0-9.]+)", r["quote"]).group(1))
        assert sps * float(r["figure"]) == pytest.approx(b, rel=0.005)
    else:
        assert tflops == pytest.approx(float(r["figure2"]), rel=0.01)


def test_harness_reports_refusals_instead_of_dropping_rows():
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.validation import run
        from benchmarks.validation.rows import read_rows
    finally:
        sys.path.remove(str(ROOT))
    rows = [r for r in read_rows() if r["source_id"] == "nemo-24.07-summary"][2:5]
    shapeless = dict(rows[1], row_id="no-shape", model="unknown-9b", model_fields="")
    df = run.evaluate(rows + [shapeless])
    assert len(df) == 4                                      # every row is reported
    assert list(df.loc[df["box_refused"].notna(), "row_id"]) == ["no-shape"]
    assert "no shape" in df.set_index("row_id").loc["no-shape", "box_refused"]
    table = run.summary(df).set_index(["source", "prediction"])
    assert table.loc[("all", "out of the box"), "refused"] == 1
    assert table.loc[("all", "out of the box"), "n"] == 3
    # an option a later model would take, which the current one rejects: refused, with why
    bad = run.evaluate(rows[:2], options=lambda m: {"overrides": {"no_such_rate": 1}})
    assert bad["box_refused"].str.contains("no_such_rate").all()
    assert "no_such_rate" in bad["cal_refused"].iloc[1]    # the anchor has no calibrated error


def test_a_framework_preset_keeps_the_rows_own_fields_in_the_calibration():
    """``--frameworks`` calibrates the anchor with the preset's rates and the row's own
    fields (its amendments) over them, as ``predict`` applies a behaviour then overrides."""
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.validation import run
        from benchmarks.validation.rows import map_row, read_rows
    finally:
        sys.path.remove(str(ROOT))
    rows = {r["row_id"]: r for r in read_rows()}
    m = map_row(rows["tt-h100-llama31-405b-t5-1"])
    options = run.framework_options(m)
    assert options["behaviour"].name == "fsdp"
    own = m.kwargs()["overrides"]
    assert own["param_gather_bytes"] == 1.0 and own["tp_gather_bytes"] == 1.0
    for name, value in {**options["behaviour"].overrides(), **own}.items():
        got = getattr(options["rates"], name)
        if isinstance(value, dict):  # a mapping of groups: the groups it names
            got = {k: got[k] for k in value}
        assert got == value, name


@pytest.mark.parametrize("r", MOSAIC[:60:7], ids=[r["row_id"] for r in MOSAIC[:60:7]])
def test_mosaic_model_fields_match_the_printed_parameter_count(r):
    # hand count from the row's fields: L·(4d² attention + 2·d·f MLP + 2d norms) + V·d
    # embedding (tied) + s·d learned positions + d final norm, against NumParams
    f = dict(kv.split("=") for kv in r["model_fields"].split(";"))
    layers, d, ffn, v = (int(f[k]) for k in ("num_layers", "hidden_size", "ffn_hidden_size",
                                             "vocab_size"))
    s = int(r["seq_length"])
    n = layers * (4 * d * d + 2 * d * ffn + 2 * d) + v * d + s * d + d
    printed = int(r["quote"].strip("|").split("|")[19])
    assert n == pytest.approx(printed, rel=1e-3)


DGXC = [r for r in ROWS if r["source_id"] == "nvidia-dgxc-benchmarking"]


@pytest.mark.parametrize("r", DGXC, ids=[r["row_id"] for r in DGXC])
def test_dgxc_step_times_follow_from_tokens_per_second(r):
    # the README's own formula: sequence length x global batch / step time = tokens/s
    tokens = int(r["global_batch"]) * int(r["seq_length"]) / float(r["figure"])
    assert tokens == pytest.approx(float(r["figure2"]), rel=0.005), r["row_id"]
    ga = int(re.search(r"GA=(\d+)", r["reference"]).group(1))
    assert int(r["num_micro"]) == ga and r["micro_batch"] in (1, "1")


DLPERF = [r for r in ROWS if r["source_id"] == "oneflow-dlperf-megatron"]
#: Megatron-LM's sequences per second as DLPerf's summary report prints them
#: (reports/GPT/dlperf_gpt_test_report_210512.md @ c89430bac64f), a figure of its own
DLPERF_SEQUENCES_PER_S = {"DP_1x1x1_2_1536x16": 4.31, "DP_32x1x1_64_1536x16": 93.63,
                          "MP_1x16x1_16_3072x16": 2.85, "2D_4x8x1_32_2304x24": 21.21,
                          "DP_PP_8x1x4_512_1536x16": 104.63, "MP_PP_1x8x4_512_2304x24": 23.10}


@pytest.mark.parametrize("r", DLPERF, ids=[r["row_id"] for r in DLPERF])
def test_dlperf_tflops_follow_from_the_latency(r):
    f = dict(kv.split("=") for kv in r["model_fields"].split(";"))
    b, s = int(r["global_batch"]), int(r["seq_length"])
    layers, h, v = int(f["num_layers"]), int(f["hidden_size"]), int(f["vocab_size"])
    # Megatron-LM's count with full recompute: 96·B·s·l·h²·(1 + s/6h + V/16lh)
    flops = 96 * b * s * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))
    assert flops / (float(r["figure"]) * int(r["devices"]) * 1e12) == pytest.approx(
        float(r["figure2"]), rel=0.005), r["row_id"]
    # the row's layout is the one its case name spells (dp x tp x pp _ global batch _ h x l)
    case = r["quote"].split("|")[1].strip()
    degrees, gbs, shape = case.split("_")[-3:]
    assert degrees == f"{r['dp']}x{r['tp']}x{r['pp']}" and gbs == r["global_batch"]
    assert shape == f"{h}x{layers}"
    if case in DLPERF_SEQUENCES_PER_S:
        assert b / float(r["figure"]) == pytest.approx(DLPERF_SEQUENCES_PER_S[case], rel=0.005)


def test_dlperf_rows_map_attention_computed_apart_with_dropout():
    # Megatron-LM at 8aa4619 (March 2021): baddbmm, fused softmax, bmm; dropout 0.1
    # (PROTOCOL.md amendments 3 and 19)
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.validation.rows import map_row, read_rows
    finally:
        sys.path.remove(str(ROOT))
    from perfkit.calc import ActivationModel
    dlperf = [r for r in read_rows() if r["source_id"] == "oneflow-dlperf-megatron"]
    assert len(dlperf) == 18
    for r in dlperf:
        m = map_row(r)
        assert m.activation_model == ActivationModel(), r["row_id"]
        assert not m.activation_model.flash_attention  # the table: dropout masks kept
        assert m.parallel.recompute == "full" and m.dtype == "fp16"
