"""The metrics panel: its numbers come from perfkit.calc, it reacts, it survives errors."""

from __future__ import annotations

import re

import altair as alt
import pandas as pd
import pytest

import perfkit as pk
from perfkit.charts import chart_to_svg, memory_chart
from perfkit.widgets import MetricsPanel, memory_breakdown, metrics_panel, metrics_summary

__all__: list[str] = []

MODEL = "llama2-13b"
HARDWARE = "ascend-910b"
STEP_S = 12.8
PARALLEL = pk.ParallelConfig(dp=4, tp=1, pp=2, micro_batch_size=1, num_micro_batches=8,
                             recompute="selective", optimizer_shard=4)


@pytest.fixture(scope="module")
def summary() -> pd.Series:
    frame = metrics_summary(MODEL, HARDWARE, PARALLEL, STEP_S)
    assert list(frame.columns) == ["key", "metric", "value", "unit", "text", "note", "warning"]
    assert frame["warning"].isna().all()  # 12.8 s for this job: nothing implausible
    assert frame["key"].is_unique
    return frame.set_index("key")["value"]


def test_summary_equals_direct_calculator_calls(summary: pd.Series) -> None:
    model = pk.ModelSpec.preset(MODEL)
    hw = pk.Hardware.preset(HARDWARE)
    gbs, seq, devices = PARALLEL.global_batch_size, model.seq_length, PARALLEL.world_size
    tps = pk.tokens_per_second_per_device(gbs, seq, STEP_S, devices)
    # the uncalibrated step model, the one the strategy search and the Planner use
    est = pk.plan.predict(None, model, PARALLEL, hw)
    expected = {
        "devices": devices,
        "global_batch_size": gbs,
        "tokens_per_s_per_device": tps,
        "tokens_per_s_per_p": pk.tokens_per_second_per_p(gbs, seq, STEP_S, PARALLEL.dp),
        "samples_per_s": pk.samples_per_second(gbs, STEP_S),
        "mfu": pk.mfu(model, tps, hw.peak(), causal=False),
        "hfu": pk.hfu(model, tps, hw.peak(), recompute="selective", selective_mode="strict",
                      causal=False),
        "static_gib": pk.static_memory(model, PARALLEL, scheme="mindspore").total_bytes / 2**30,
        "activation_gib": pk.activation_memory(model, PARALLEL).total_bytes / 2**30,
        "device_memory_gib": hw.memory_bytes / 2**30,
        "bubble_fraction": pk.bubble_fraction(2, 8, 1),
        "predicted_step_s": est.step_s,
        "predicted_mfu": est.mfu,
    }
    for key, value in expected.items():
        assert summary[key] == pytest.approx(value, rel=1e-12), key
    assert summary["memory_gib"] == pytest.approx(summary["static_gib"]
                                                  + summary["activation_gib"])


def test_summary_by_independent_arithmetic(summary: pd.Series) -> None:
    # global batch = dp * mbs * m = 4 * 1 * 8 = 32 sequences of 4096 tokens, 8 devices
    assert summary["global_batch_size"] == 32
    assert summary["devices"] == 8
    assert summary["tokens_per_s_per_device"] == pytest.approx(32 * 4096 / (12.8 * 8))  # 1280
    assert summary["tokens_per_s_per_p"] == pytest.approx(32 * 4096 / (12.8 * 4))  # 2560
    assert summary["samples_per_s"] == pytest.approx(2.5)
    assert summary["bubble_fraction"] == pytest.approx(1 / 8)
    assert summary["device_memory_gib"] == pytest.approx(64.0)
    # HFU >= MFU: selective recompute adds FLOPs, never removes them
    assert summary["hfu"] > summary["mfu"] > 0


def test_tokens_per_p_says_when_it_is_the_figure_per_device() -> None:
    """The seed's tokens/s/p divides by dp: with a pipeline (dp 4 of 8 devices) that is
    twice the figure per device, and the row says it does not divide by all 8; with data
    parallelism only (dp 8 of 8) the two are one figure, and the row does not read as if
    8 devices were not all 8."""
    apart = metrics_summary(MODEL, HARDWARE, PARALLEL, STEP_S).set_index("key")
    assert apart.at["tokens_per_s_per_p", "value"] == pytest.approx(32 * 4096 / (12.8 * 4))
    assert apart.at["tokens_per_s_per_p", "note"].endswith("not by all 8 devices")
    dp_only = PARALLEL.replace(dp=8, pp=1, optimizer_shard=8)  # 8 devices, 64 sequences
    same = metrics_summary(MODEL, HARDWARE, dp_only, STEP_S).set_index("key")
    assert same.at["tokens_per_s_per_p", "value"] == pytest.approx(64 * 4096 / (12.8 * 8))
    assert same.at["tokens_per_s_per_device", "value"] == pytest.approx(64 * 4096
                                                                       / (12.8 * 8))
    note = same.at["tokens_per_s_per_p", "note"]
    assert "not by all" not in note and "equals the figure per device" in note


def test_hfu_counts_fully_recomputed_layers_of_every_stage() -> None:
    # the seed's final Llama2-13B case: 4 fully recomputed layers on stage 0, none on
    # stage 1, selective recompute elsewhere
    parallel = PARALLEL.replace(recompute_layers=(4, 0))
    frame = metrics_summary(MODEL, HARDWARE, parallel, STEP_S).set_index("key")["value"]
    model = pk.ModelSpec.preset(MODEL)
    per_token = pk.hardware_flops(model, 1, recompute="selective", selective_mode="strict",
                                  causal=False, full_recompute_layers=4)
    peak = pk.Hardware.preset(HARDWARE).peak()
    assert frame["hfu"] == pytest.approx(per_token * 1280.0 / peak, rel=1e-12)
    # ParallelConfig's int is per stage: 2 on each of the 2 stages = 4 in the model
    frame2 = metrics_summary(MODEL, HARDWARE, PARALLEL.replace(recompute_layers=2), STEP_S)
    assert frame2.set_index("key").loc["hfu", "value"] == pytest.approx(frame["hfu"])


def test_hfu_of_silu_mul_selective_recompute_counts_only_full_layers() -> None:
    """MindFormers' selective recompute re-runs SiLU and Mul: no matrix FLOPs, so only the
    4 fully recomputed layers of stage 0 add a forward each (Llama2-13B: h 5120, FFN 13824
    gated, 4096 tokens; the per-token forward of a layer written out)."""
    parallel = PARALLEL.replace(recompute_layers=(4, 0))
    frame = metrics_summary(MODEL, HARDWARE, parallel, STEP_S,
                            activation_model=pk.ActivationModel.mindformers()
                            ).set_index("key")
    model = pk.ModelSpec.preset(MODEL)
    h, f, s = 5120, 13824, 4096
    layer = 2 * h * 3 * h + 4 * s * h + 2 * h * h + 2 * h * f * 3  # qkv, core, proj, MLP
    assert pk.layer_forward_flops(model)["total"] == pytest.approx(layer)
    per_token = pk.model_flops(model, 1) + 4 * layer
    peak = pk.Hardware.preset(HARDWARE).peak()
    assert frame.loc["hfu", "value"] == pytest.approx(per_token * 1280.0 / peak, rel=1e-12)
    assert "selective adds no matrix FLOPs (fused attention)" in frame.loc["hfu", "note"]
    default = metrics_summary(MODEL, HARDWARE, parallel, STEP_S).set_index("key")
    assert default.loc["hfu", "value"] > frame.loc["hfu", "value"]  # the core re-run
    assert "attention core re-run" in default.loc["hfu", "note"]


def test_summary_accepts_specs_and_names_conventions() -> None:
    frame = metrics_summary(pk.ModelSpec.preset(MODEL), pk.Hardware.preset(HARDWARE),
                            PARALLEL, STEP_S).set_index("key")
    assert "non-causal" in frame.loc["mfu", "note"]
    assert "strictly" in frame.loc["hfu", "note"]
    assert "p = dp = 4" in frame.loc["tokens_per_s_per_p", "note"]
    assert frame.loc["mfu", "text"].endswith("%")


def test_summary_rejects_invalid_config() -> None:
    with pytest.raises(pk.PerfkitError, match="tp: must divide num_attention_heads=40"):
        metrics_summary(MODEL, HARDWARE, pk.ParallelConfig(tp=3), STEP_S)
    with pytest.raises(pk.PerfkitError, match="step_time_s"):
        metrics_summary(MODEL, HARDWARE, PARALLEL, 0.0)


def test_memory_breakdown_and_chart() -> None:
    frame = memory_breakdown(MODEL, HARDWARE, PARALLEL)
    static = pk.static_memory(pk.ModelSpec.preset(MODEL), PARALLEL, scheme="mindspore")
    assert list(frame["component"]) == ["weights", "gradients", "optimizer state",
                                        "activations"]
    assert frame["bytes"].iloc[:3].sum() == pytest.approx(static.total_bytes)
    assert (frame["device_GiB"] == 64.0).all()
    chart = memory_chart(frame)
    assert isinstance(chart, alt.LayerChart)
    # the chart draws the frame's numbers as given
    assert list(chart.layer[0].data["GiB"]) == list(frame["GiB"])
    svg = chart_to_svg(chart)
    assert svg.lstrip().startswith("<svg")
    urls = set(re.findall(r"https?://[^\s\"'<>]+", svg))
    assert all(u.startswith("http://www.w3.org/") for u in urls), urls
    with pytest.raises(pk.PerfkitError, match="device_GiB"):
        memory_chart(frame.drop(columns="device_GiB"))


def test_panel_shows_numbers_and_reacts() -> None:
    panel = metrics_panel(profile="/some/profile", step_time_s=STEP_S)
    assert isinstance(panel, MetricsPanel)
    assert panel.error is None
    assert "MFU" in panel.table.value and "tokens/s/p" in panel.table.value
    assert "/some/profile" in panel.header.value
    assert panel.chart.value.lstrip().startswith("<svg")
    before = panel.table.value
    tps = panel.summary.set_index("key").loc["tokens_per_s_per_device", "value"]
    panel.controls["step_time_s"].value = STEP_S / 2
    assert panel.table.value != before
    after = panel.summary.set_index("key").loc["tokens_per_s_per_device", "value"]
    assert after == pytest.approx(2 * tps)
    panel.controls["model"].value = "llama2-7b"
    assert panel.summary.set_index("key").loc["tokens_per_s_per_device", "value"] \
        == pytest.approx(after)  # 7B and 13B share seq length 4096
    assert "llama2-7b" in panel.chart.value  # the chart was redrawn (title)


def test_panel_shows_error_and_keeps_working() -> None:
    panel = metrics_panel()
    panel.controls["tp"].value = 3  # llama2-13b has 40 heads
    assert panel.error is not None
    assert "tp: must divide num_attention_heads=40" in panel.message.value
    assert panel.summary is None and panel.table.value == ""
    panel.controls["tp"].value = 2
    assert panel.error is None and panel.message.value == ""
    assert panel.summary.set_index("key").loc["devices", "value"] == 16
    panel.controls["pp"].value = 1  # vpp stays 1: valid
    panel.controls["vpp"].value = 2  # vpp > 1 needs pp > 1
    assert "vpp" in panel.message.value
    panel.controls["vpp"].value = 1
    assert panel.error is None
    panel.controls["recompute"].value = "full"
    assert panel.error is None
    assert "full recompute" in panel.table.value


def test_panel_static_fallback_bundle() -> None:
    bundle = metrics_panel(profile="p1")._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "MFU" in bundle["text/html"] and "p1" in bundle["text/html"]


def test_panel_rejects_unknown_preset() -> None:
    with pytest.raises(pk.PerfkitError, match="model"):
        metrics_panel(model="no-such-model")
    with pytest.raises(pk.PerfkitError, match="hardware"):
        metrics_panel(hardware="no-such-device")


def test_panel_divides_mfu_by_the_peak_of_the_chosen_precision() -> None:
    """Notebook 02's calculator said "fp16 peak" for a bf16 run: it had no precision. MFU
    is model FLOPs per second per device over the chosen peak (the datasheet figures of
    perfkit.Hardware), so choosing fp8 on an H100 divides the bf16 figure by the ratio of
    the two peaks; a device without the type falls back to its default."""
    panel = metrics_panel(hardware="h100", step_time_s=STEP_S)
    box = panel.controls["dtype"]
    assert box.value == "bf16" and "fp8" in box.options
    h100 = pk.Hardware.preset("h100")

    def mfu() -> float:
        return float(panel.summary.set_index("key").loc["mfu", "value"])

    bf16 = mfu()
    box.value = "fp8"
    assert mfu() == pytest.approx(bf16 * h100.peak_flops["bf16"] / h100.peak_flops["fp8"])
    assert "fp8 peak" in panel.table.value
    panel.controls["hardware"].value = "v100"  # no fp8 there: its default, fp16
    assert box.value == "fp16" and "fp8" not in box.options
    assert panel.error is None and "fp16 peak" in panel.table.value
    with pytest.raises(pk.PerfkitError, match="dtype"):
        metrics_panel(hardware="v100", dtype="fp8")


@pytest.mark.slow  # loads a 16-rank sample: about 2 s
def test_panel_starts_on_the_precision_of_the_job() -> None:
    """A bf16 job on an Ascend 910B (default fp16) starts on its bf16 peak."""
    job = pk.infer_job(pk.load("sample:llama2-13b-baseline-dp16", progress=False))
    assert job.dtype == "bf16" and job.hardware.default_dtype == "fp16"
    panel = metrics_panel(job=job)
    assert panel.controls["dtype"].value == "bf16"
    assert "bf16 peak" in panel.table.value
