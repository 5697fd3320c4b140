"""The Memory tab says each thing once, in words that fit the figure.

- Its measured peak is the framework allocator's peak allocated, read here from the H100
  traces' ``[memory]`` events with gzip and json, said once; its theory without a
  measured peak is static + activations, and says so (the shown parts add up).
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

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "tests" / "data" / "kineto_llama_h100"
MSA = "wild/msa_kernel_details"
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
