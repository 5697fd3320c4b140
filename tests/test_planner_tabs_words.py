"""The Planner, Recompute and Memory tabs say each thing once, in words that fit the figure.

- The Planner says how far the fitted model was off the measured step once (the
  calibration's own note said it again; on a trace without a backward pass:
  tests/test_widgets_step_figures.py).
- The Memory tab's measured peak is the framework allocator's peak allocated, read here
  from the H100 traces' ``[memory]`` events with gzip and json, said once; its theory
  without a measured peak is static + activations, and says so (the shown parts add up).
- A profile that cannot be fitted says why in a sentence (no step table: the raw folder
  holds only kernel_details.csv), not ``source: ...`` run into the next sentence.
- A pipeline layout that fully recomputes layers of one stage only (the bundled tuned
  simulation: its ``profiler_metadata.json`` says ``recompute_layers`` [1, 0]) is said in
  words per stage, once, and not as "1/0", nor cut short in the table.
- The gradients' element size where the profile records it: the H100 DDP traces with their
  all-reduces relabelled as bf16 (as a model cast to bf16 under plain DDP records them) go
  through both tabs; both say which size they used and why, and the data-parallel time is
  the hand count ``params · 2 bytes · 2(d-1)/d`` over the link; the Planner's and the
  Memory tab's static memory keep that 2-byte buffer alike (Megatron-LM's 20 bytes per
  parameter for a 16-bit buffer).
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from shared_samples import shared_sample
from widget_html import panel_html

from perfkit.format import bytes_text
from perfkit.widgets import dashboard
from perfkit.widgets.summary import memory_breakdown

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "tests" / "data" / "kineto_llama_h100"
TUNED = ROOT / "data" / "simulated" / "llama2-13b-tuned-dp8-pp2"
MSA = "wild/msa_kernel_details"
REDUCTION = re.compile(r"all_?reduce|reduce_?scatter", re.I)
_TAGS = re.compile(r"<[^>]+>")


def _text(panel) -> str:
    html = re.sub(r"<style>.*?</style>", "", panel_html(panel), flags=re.S)
    text = re.sub(r"\s+", " ", _TAGS.sub(" ", html))
    return text.replace("&#x27;", "'").replace("&amp;", "&")


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)["traceEvents"]


def _board(path: Path | str, *tabs: str):
    board = dashboard(str(path), background_bytes=None)
    for tab in tabs:
        board.select(tab)
    return board


@pytest.fixture(scope="module")
def h100():
    return _board(H100, "Planner", "Memory")


def test_the_planner_says_the_fits_gap_once(h100) -> None:
    panel = h100.panels["Planner"]
    text = _text(panel)
    cal = panel.fit.calibration
    # a signed share with a minus sign and a space before % (perfkit.format)
    gap = f"{'+' if cal.residual > 0 else '−'}{100 * abs(cal.residual):.1f} %"  # > 5 %
    assert abs(cal.residual) > 0.05  # far enough off for the calibration to note it
    assert any(gap in n for n in cal.notes)  # ... which it does, for programs
    assert text.count("off the measured step") == 1, text
    assert text.count("the run does something the model does not") == 1


def test_the_measured_peak_is_said_once(h100) -> None:
    peaks = []
    for path in sorted(H100.glob("*.json.gz")):
        # the CUDA caching allocator: device type 1 (type 0 is the host's)
        peaks.append(max(e["args"]["Total Allocated"] for e in _events(path)
                         if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1))
    text = _text(h100.panels["Memory"])
    line = text[text.index("Measured peak"):]
    line = line[:line.index("theory / measured")]
    assert line.startswith(f"Measured peak {bytes_text(max(peaks))} (")
    assert line.count("framework allocator") == 1 and line.count("allocated") == 1, line


@pytest.fixture(scope="module")
def msa():
    root = shared_sample(MSA)
    files = sorted(p.name for p in root.rglob("*") if p.is_file())
    assert files == ["kernel_details.csv"]  # no step_trace_time.csv, no memory files
    return _board(root, "Memory", "Planner")


@pytest.mark.shared_samples
def test_without_a_peak_the_theory_says_its_parts(msa) -> None:
    memory = _text(msa.panels["Memory"])
    found = re.search(r"Theory ([\d.]+) GiB \(static, [^,]+, ([\d.]+) GiB \+ activations "
                      r"([\d.]+) GiB", memory)
    assert found, memory
    total, static, act = (float(x) for x in found.groups())
    assert total == pytest.approx(static + act, abs=0.011)  # 3 significant digits each
    assert "no measured peak to compare with" in memory


@pytest.mark.shared_samples
def test_a_failed_fit_says_why_in_a_sentence(msa) -> None:
    planner = _text(msa.panels["Planner"])
    assert "could not be fitted: its steps table has no complete step. Static memory" \
        in planner
    assert "source:" not in planner


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_a_stage_of_full_recompute_is_said_per_stage_once() -> None:
    meta = json.loads(next(TUNED.glob("*/profiler_metadata.json")).read_text("utf-8"))
    par = meta["perfkit_simulation"]["parallel"]
    assert par["recompute"] == "selective" and par["recompute_layers"] == [1, 0]
    words = "selective + 1 full layer on stage 0"  # stage 0 holds one, stage 1 none
    panel = _board(TUNED, "Recompute").panels["Recompute"]
    text = _text(panel)
    assert f"the profiled layout (recompute {words}) predicts" in text
    assert "1/0" not in text and "(the profiled layout))" not in text
    row = panel.tradeoff[panel.tradeoff["profiled"]].iloc[0]
    assert row["recompute"] == f"{words} (the profiled layout)"
    assert f">{words} (the profiled layout)<" in panel_html(panel)  # whole, not cut short


def _llama_parameters() -> int:
    """The recorded model's parameters (PROVENANCE.md: hidden 1024, 4 layers, SwiGLU FFN
    2816, vocabulary 32,000; untied head): ``2·V·h + L·(4h² + 3·h·f + 2h) + h``."""
    text = (H100 / "PROVENANCE.md").read_text(encoding="utf-8").replace(",", "")
    h = int(re.search(r"hidden (\d+)", text).group(1))
    layers = int(re.search(r"(\d+) layers", text).group(1))
    f = int(re.search(r"FFN (\d+)", text).group(1))
    v = int(re.search(r"vocabulary (\d+)", text).group(1))
    return 2 * v * h + layers * (4 * h * h + 3 * h * f + 2 * h) + h


@pytest.fixture(scope="module")
def bf16_ddp(tmp_path_factory):
    """The H100 DDP traces with their reductions' ``Input type`` set to bf16, and the
    relabelled records counted: (folder, records, data-parallel ranks)."""
    out = tmp_path_factory.mktemp("bf16_ddp")
    records = 0
    for src in sorted(H100.glob("*.json.gz")):
        with gzip.open(src, "rt", encoding="utf-8") as fh:
            trace = json.load(fh)
        for e in trace["traceEvents"]:
            args = e.get("args") or {}
            if REDUCTION.search(str(e.get("name", ""))) and args.get("Input type") == \
                    ["float"]:
                args["Input type"] = ["c10::BFloat16"]
                records += 1
        with gzip.open(out / src.name, "wt", encoding="utf-8") as fh:
            json.dump(trace, fh)
    ranks = int(trace["distributedInfo"]["world_size"])
    assert records > 0 and ranks > 1
    return out, records, ranks


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_both_tabs_reduce_the_gradients_the_profile_records(bf16_ddp) -> None:
    folder, records, d = bf16_ddp
    board = _board(folder, "Planner", "Recompute", "Memory")
    planner, recompute = board.panels["Planner"], board.panels["Recompute"]
    fit = planner.fit
    rates = fit.calibration.rates
    assert fit.calibration.job.static_scheme == "megatron"  # whose rule says 4 bytes
    assert rates.gradient_bytes == 2
    said = (f"Gradients are reduced at 2 bytes per element, as the profile records it: "
            f"{records} all-reduce or reduce-scatter records among the profile's host "
            "collectives move c10::BFloat16 data")
    why = "the Megatron-LM scheme alone would reduce 4-byte gradients"
    for text in (_text(planner), _text(recompute)):
        assert text.count(said) == 1 and text.count(why) == 1, text
    # the hand count: one ring all-reduce of 2-byte gradients, 2(d-1)/d through each link
    volume = _llama_parameters() * 2 * 2 * (d - 1) / d
    assert rates.dp_buckets == 1 and rates.overlap["dp"] == 0  # the whole reduction exposed
    hw = fit.calibration.job.hardware
    assert d <= hw.devices_per_node
    link = hw.intra_node_bandwidth * rates.link("dp", True)
    assert fit.prediction.parts["dp_comm"] == pytest.approx(
        volume / link + rates.link_latency_s, rel=1e-9)
    # the same layout, the same step on both tabs
    own = recompute.tradeoff[recompute.tradeoff["profiled"]].iloc[0]
    assert float(own["step_s"]) == pytest.approx(fit.prediction.step_s, rel=1e-12)
    # static memory keeps the gradients the reduction moves, on the Planner and the Memory
    # tab alike: Megatron-LM with a 2-byte buffer (--grad-reduce-in-bf16) keeps bf16
    # weights 2 + the buffer 2 + fp32 main gradients 4 (optimizer.py line 1097 copies a
    # 16-bit buffer), main weights 4 and Adam m, v 8, no distributed optimizer: 20 bytes
    job = board.panels["Memory"].current
    assert job.parallel.optimizer_shard == 1 and job.parallel.tp == job.parallel.pp == 1
    want = 20 * _llama_parameters()
    assert fit.prediction.static_bytes == pytest.approx(want, rel=1e-9)
    assert memory_breakdown(job)["bytes"].iloc[:3].sum() == pytest.approx(want, rel=1e-9)
    memory = _text(board.panels["Memory"])
    assert memory.count("bf16 gradients (read from the profile's reductions)") == 1, memory
    assert "fp32 main gradients" in memory and "4 + 16/d" in memory
