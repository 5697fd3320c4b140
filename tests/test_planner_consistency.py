"""The Planner agrees with the rest of perfkit: it names the static-memory scheme it counts
(as the Memory and Recompute tabs do), its strategy chart marks the profiled layout that
its table ranks, and its step model reduces gradients of the size ``estimate_step`` does
for the job's scheme (4 bytes under the Megatron-LM scheme, 2 under MindSpore's).

Every expected figure is read here from the raw files: the H100 Kineto traces with gzip and
json (``distributedInfo``: the data-parallel ranks; the model's sizes from the recording's
PROVENANCE.md), the bundled simulated profile's ``profiler_metadata.json`` (its model,
layout, hardware and the scheme it was made with), and the parameters counted by hand
from the model's sizes; the gradient reduction is ``params · bytes · ring factor``.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
from shared_samples import shared_sample
from widget_html import panel_html

import perfkit as pk
from perfkit.calc.timing import step_times
from perfkit.plan.predict import layout_columns, stage_rows
from perfkit.widgets import dashboard
from perfkit.widgets.prediction import fit_job

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "data" / "simulated" / "llama2-13b-baseline-dp16"
KINETO = ROOT / "tests" / "data" / "kineto_llama_h100"
QWEN = "wild/tl_qwen_h100"
_TAGS = re.compile(r"<[^>]+>")


def _text(panel) -> str:
    html = re.sub(r"<style>.*?</style>", "", panel_html(panel), flags=re.S)
    return re.sub(r"\s+", " ", _TAGS.sub(" ", html)).replace("&#x27;", "'")


def _simulation() -> dict:
    folder = sorted(BUNDLED.glob("*_ascend_pt"))[0]
    meta = json.loads((folder / "profiler_metadata.json").read_text(encoding="utf-8"))
    return meta["perfkit_simulation"]


def _llama_parameters(vocab: int, hidden: int, ffn: int, layers: int) -> int:
    """A Llama decoder's parameters with an untied output head: embedding and head
    ``V·h`` each; per layer q, k, v, o ``4h²``, the gated MLP ``3·h·f`` and two RMSNorm
    weights ``2h``; the final norm ``h``."""
    return 2 * vocab * hidden + layers * (4 * hidden * hidden + 3 * hidden * ffn
                                          + 2 * hidden) + hidden


def _kineto_model() -> dict[str, int]:
    """The recorded model's sizes, as its PROVENANCE.md states them."""
    text = (KINETO / "PROVENANCE.md").read_text(encoding="utf-8").replace(",", "")
    found = {key: int(re.search(pattern, text).group(1)) for key, pattern in (
        ("hidden", r"hidden (\d+)"), ("layers", r"(\d+) layers"),
        ("ffn", r"FFN (\d+)"), ("vocab", r"vocabulary (\d+)"))}
    return found


@pytest.fixture(scope="module")
def kineto():
    profile = pk.load(KINETO)
    job = pk.infer_job(profile)
    return profile, job, fit_job(profile, job)


def test_the_planners_gradient_reduction_moves_fp32_gradients_under_megatron(kineto) -> None:
    profile, job, fit = kineto
    with gzip.open(KINETO / "rank0.pt.trace.json.gz", "rt", encoding="utf-8") as fh:
        trace = json.load(fh)
    d = int(trace["distributedInfo"]["world_size"])  # data parallel only (PROVENANCE.md)
    assert d > 1 and trace["deviceProperties"]  # a PyTorch job on a GPU: Megatron-LM scheme
    assert fit.calibration is not None and fit.calibration.job.static_scheme == "megatron"
    size = _kineto_model()
    params = _llama_parameters(size["vocab"], size["hidden"], size["ffn"], size["layers"])
    # one all-reduce of fp32 gradients over d ranks: 2·(d-1)/d of them through each link
    volume = params * 4 * 2 * (d - 1) / d
    rates = fit.calibration.rates
    # the premises of reading the exposed time as the whole reduction: one bucket (the
    # run's reduction is on the host, gloo: no overlap measured), nothing hidden
    assert rates.dp_buckets == 1 and rates.overlap["dp"] == 0
    hw = job.hardware
    assert d <= hw.devices_per_node
    link = hw.intra_node_bandwidth * rates.link("dp", True)
    assert fit.prediction.parts["dp_comm"] == pytest.approx(
        volume / link + rates.link_latency_s, rel=1e-9)
    # estimate_step moves the same bytes (here at a what-if's link efficiency, no latency)
    est = pk.estimate_step(job.model, job.parallel, hw, static_scheme=job.static_scheme,
                           comm_efficiency=0.8, rates=pk.Rates(link_latency_s=0.0))
    assert est.dp_comm_s * hw.intra_node_bandwidth * 0.8 == pytest.approx(volume, rel=1e-9)


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_bundled_mindspore_simulation_keeps_16_bit_gradients() -> None:
    sim = _simulation()
    assert sim["settings"]["static_scheme"] == "mindspore"
    model, par, hw_raw = sim["model"], sim["parallel"], sim["hardware"]
    assert model["mlp"] == "gated" and not model["tied_embeddings"] and model["bias"] == "none"
    params = _llama_parameters(model["vocab_size"], model["hidden_size"],
                               model["ffn_hidden_size"], model["num_layers"])
    d = par["dp"] * par["tp"] * par["pp"]
    assert par["tp"] == par["pp"] == 1 and par["optimizer_shard"] == d
    # sharded optimizer: a reduce-scatter of 2-byte gradients and an all-gather of the
    # 16-bit weights, each (d-1)/d of the parameters through each link
    scatter = params * 2 * (d - 1) / d
    gather = params * 2 * (d - 1) / d
    profile = pk.load(BUNDLED)
    job = pk.infer_job(profile)
    fit = fit_job(profile, job)
    assert fit.calibration is not None and fit.calibration.job.static_scheme == "mindspore"
    rates = fit.calibration.rates
    intra = d <= hw_raw["devices_per_node"]
    link = (hw_raw["intra_node_bandwidth"] if intra else hw_raw["inter_node_bandwidth"]) \
        * rates.link("dp", intra)
    out = step_times(job.model, job.hardware, rates, layout_columns(job.parallel),
                     stage_rows(job.model, job.parallel),
                     params={"dense": np.array([float(params)]), "experts": np.zeros(1)},
                     static_scheme=fit.calibration.job.static_scheme)
    lat = rates.link_latency_s
    assert out["dp_comm_raw_s"][0] == pytest.approx(
        scatter / link + lat + gather / link + lat, rel=1e-9)


@pytest.fixture(scope="module")
def qwen():
    board = dashboard(str(shared_sample(QWEN)), background_bytes=None)
    board.select("Planner")
    board.panels["Planner"].plan_button.click()  # a forward pass: its training plan on request
    return board.panels["Planner"]


@pytest.fixture(scope="module")
def baseline():
    board = dashboard(str(BUNDLED), background_bytes=None)
    board.select("Planner")
    return board.panels["Planner"]


@pytest.mark.shared_samples
def test_the_planner_names_the_scheme_of_a_pytorch_gpu_trace(qwen) -> None:
    files = sorted(shared_sample(QWEN).glob("*.json.gz"))
    with gzip.open(files[0], "rt", encoding="utf-8") as fh:
        trace = json.load(fh)
    # a PyTorch profiler (Kineto) trace of a GPU: a ProfilerStep, CUDA device properties
    assert trace["deviceProperties"]
    assert any(str(e.get("name", "")).startswith("ProfilerStep#")
               for e in trace["traceEvents"])
    text = _text(qwen)
    assert ("Static memory (weights, gradients, optimizer state) is counted with the "
            "Megatron-LM scheme") in text


def test_the_planner_names_the_scheme_a_simulation_was_made_with(baseline) -> None:
    scheme = _simulation()["settings"]["static_scheme"]
    names = {"mindspore": "MindSpore scheme", "megatron": "Megatron-LM scheme"}
    text = _text(baseline)
    assert f"is counted with the {names[scheme]}" in text


def _profiled_points(panel) -> list[dict]:
    chart = panel.result.children[1].chart.to_dict()
    points = []
    for layer in chart["layer"]:
        shape = layer.get("encoding", {}).get("shape")
        if shape is not None:
            rows = chart["datasets"][layer["data"]["name"]]
            points += [dict(row, _domain=shape["scale"]["domain"]) for row in rows]
    return points


@pytest.mark.parametrize("which", [pytest.param("qwen", marks=pytest.mark.shared_samples),
                                   "baseline"])
def test_the_strategy_chart_marks_the_profiled_layout(which, request) -> None:
    panel = request.getfixturevalue(which)
    points = _profiled_points(panel)
    assert len(points) == 1, points
    point = points[0]
    assert point["layout"] == "the profiled layout" == point["_domain"][0]
    # where the table puts the profiled layout: its own row of the search, field by field
    job = panel.current
    ranked = panel.ranked
    same = ranked["fits"].notna()
    for name in ("dp", "tp", "pp", "cp", "vpp", "micro_batch_size", "num_micro_batches",
                 "optimizer_shard", "recompute"):
        same &= ranked[name] == getattr(job.parallel, name)
    same &= ranked["sequence_parallel"].astype(bool) == bool(job.parallel.sequence_parallel)
    if job.parallel.recompute == "full":
        same &= ranked["full_layers_per_stage"] == job.parallel.layers_per_stage(job.model)[0]
    rows = ranked[same]
    # the table's profiled row: the prediction of the profiled layout, ranked in the
    # search's own row when the search holds it (same devices, batch and micro-batch sizes)
    own = panel.best[panel.best["profiled"].astype(bool)]
    assert len(own) == 1 and len(rows) <= 1
    expected = [own.iloc[0], *(row for _, row in rows.iterrows())]
    for row in expected:
        assert point["step_s"] == pytest.approx(float(row["step_s"]), rel=1e-9)
        assert point["memory_GiB"] * 2**30 == pytest.approx(float(row["memory_bytes"]),
                                                            rel=1e-9)
    if which == "baseline":  # the bundled job is one of its search's layouts
        assert len(rows) == 1
