"""One run, one MFU: on a profile that is not a training step the advisor does not present a
training step's FLOPs over a forward pass as a utilisation — it gives the forward pass's own
MFU, the one the Overview shows —, the Recompute tab says that recompute does not apply to
it, and the Planner's table says that its MFU is a predicted training step's.

The sample is TraceLens's Qwen1.5-0.5B-Chat trace on an H100 (``shared/samples/wild/
tl_qwen_h100``), a forward pass only. Everything expected is read here from the raw trace
with gzip and json: its host operators (none of autograd's backward ones), the model's
sizes from the operators' ``Input Dims`` (batch, sequence, hidden, FFN, vocabulary, one
flash attention call per layer), and the MFU by hand — 6 FLOPs per weight and token plus
the non-causal attention's ``12·L·s·h`` for a training step, 2 per weight and a third of
that attention for the forward pass — over the step time the Overview states and the
H100 SXM's dense bf16 peak from NVIDIA's data sheet (989.5 TFLOP/s, the Overview's
"990 TFLOP/s").
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter

import pytest
from shared_samples import shared_sample
from widget_html import panel_html

import perfkit as pk
from perfkit.widgets import dashboard
from perfkit.widgets.summary import job_summary

pytestmark = pytest.mark.shared_samples

QWEN = "wild/tl_qwen_h100"
BACKWARD = re.compile(r"Backward|autograd::engine|backward")
#: NVIDIA H100 SXM5 data sheet: 1,979 TFLOP/s bf16 with sparsity, half of it dense.
H100_BF16 = 1979e12 / 2
_TAGS = re.compile(r"<[^>]+>")


def _events() -> list[dict]:
    (trace,) = shared_sample(QWEN).glob("*.json.gz")
    with gzip.open(trace, "rt", encoding="utf-8") as fh:
        return json.load(fh)["traceEvents"]


def _raw() -> dict:
    """The trace's host operators and the model's sizes, read from the raw events."""
    ops = [e for e in _events() if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    dims = Counter(json.dumps(e.get("args", {}).get("Input Dims"))
                   for e in ops if e["name"] == "aten::linear")
    shapes = [json.loads(d) for d in dims]
    batch, seq, hidden = shapes[0][0]
    ffn = next(w[0] for x, w, *_ in shapes if w[0] != hidden)
    weights = sum(n * w[0] * w[1] for (x, w, *_), n in
                  ((json.loads(d), n) for d, n in dims.items()))
    layers = sum(e["name"] == "aten::_flash_attention_forward" for e in ops)
    vocab = next(e["args"]["Input Dims"][0][0] for e in ops if e["name"] == "aten::embedding")
    return {"aten": sum(e["name"].startswith("aten::") for e in ops),
            "backward": sum(bool(BACKWARD.search(e["name"])) for e in ops),
            "batch": batch, "seq": seq, "hidden": hidden, "ffn": ffn, "layers": layers,
            "vocab": vocab, "linear_weights": weights}


def _flops_per_token(raw: dict) -> float:
    """A training step's FLOPs per token: 6 per weight of every layer's linear layers and
    of the untied output head, plus the non-causal attention core (QKᵀ and AV)."""
    h, f, s, n = raw["hidden"], raw["ffn"], raw["seq"], raw["layers"]
    per_layer = 4 * h * h + 3 * h * f  # q, k, v, o and the gated MLP
    return 6 * (n * per_layer + raw["vocab"] * h) + 12 * n * s * h


@pytest.fixture(scope="module")
def raw() -> dict:
    return _raw()


@pytest.fixture(scope="module")
def job():
    return pk.infer_job(pk.load(shared_sample(QWEN), progress=False))


def test_the_advisor_gives_a_forward_pass_its_forward_mfu(raw, job) -> None:
    # the trace runs a forward pass only
    assert raw["aten"] >= 50 and raw["backward"] == 0
    # the linear layers called: per layer q, k, v, o (4 h²) and a gated MLP (3 h f)
    assert raw["linear_weights"] == raw["layers"] * (4 * raw["hidden"] ** 2
                                                     + 3 * raw["hidden"] * raw["ffn"])
    tokens = raw["batch"] * raw["seq"]
    by_hand = _flops_per_token(raw) * tokens / job.step_time_s / H100_BF16
    shown = f"{by_hand * 100:.1f} %"
    # not the training step's figure: one forward pass over the step's tokens, as the
    # Overview counts it — 2 FLOPs per weight of the linear layers the trace runs (it runs
    # no output head) and the non-causal attention core 4·b·s²·h a layer
    core = raw["layers"] * 4 * raw["batch"] * raw["seq"] ** 2 * raw["hidden"]
    forward = (2 * raw["linear_weights"] * tokens + core) / job.step_time_s / H100_BF16
    # the job's figures give that forward figure too, not the training one
    row = job_summary(job).set_index("key").loc["mfu"]
    assert row["value"] == pytest.approx(forward, rel=1e-3)
    assert "not plausible" not in row["text"] and shown not in row["text"]

    profile = pk.load(shared_sample(QWEN), progress=False)
    found = [f for f in pk.advise(profile, model=job.model, parallel=job.parallel,
                                  hardware=job.hardware) if "mfu" in f.rule]
    assert len(found) == 1
    (f,) = found
    words = f"{f.title} {f.evidence} {f.recommendation}"
    assert f.title == f"Model FLOPs utilisation of this inference step is {100 * forward:.1f} %"
    assert f"{raw['aten']:,} PyTorch operators" in f.evidence
    assert "not plausible" not in words and shown not in words
    assert f.severity == "info" and not f.measured


def _text(panel) -> str:
    html = re.sub(r"<style>.*?</style>", "", panel_html(panel), flags=re.S)
    return re.sub(r"\s+", " ", _TAGS.sub(" ", html)).replace("&#x27;", "'")


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_recompute_tab_refuses_and_the_planner_says_its_mfu_is_predicted(raw, job) -> None:
    board = dashboard(str(shared_sample(QWEN)), background_bytes=None)
    board.select("Recompute")
    panel = board.panels["Recompute"]
    # a forward pass only (no autograd operator in the raw trace): recompute, a training
    # trade-off, does not apply, and the tab says so instead of predicting one
    assert raw["backward"] == 0
    assert panel.tradeoff is None
    text = _text(panel)
    assert "Recompute does not apply to this profile: it records an inference" in text
    assert "MFU of a predicted training step (%)" not in text
    board.select("Planner")
    planner = board.panels["Planner"]
    # an inference step: no predicted training step until the training plan is asked for
    assert "MFU of a predicted training step (%)" not in _text(planner)
    planner.plan_button.click()
    assert "MFU of a predicted training step (%)" in _text(planner)


def test_info_says_the_inference_warning_once(capsys: pytest.CaptureFixture[str]) -> None:
    from perfkit import cli

    assert cli.main(["info", str(shared_sample(QWEN)), "--findings", "0"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # lines joined where they wrap
    said = "no backward operator (autograd, *Backward) among its"
    assert text.count(said) == 1
    assert "models a training step: see the job's warning above" in text
