"""The Timeline of a one-rank profile does not call its rank the slowest or ask to pick.

A folder holding one rank's Kineto trace (``wild/tl_qwen_h100``) loads as a cluster of
one rank: its Timeline titled the chart "rank 0 (slowest)" and its caption "the slowest
rank 0" beside "rank 0: the only rank", and asked the user to pick ranks in a list of one
"with none picked, the slowest and the fastest are drawn". A rank alone is neither: the
words are those of a single trace file (``gpu/hta-trace_filter/sampled_rank-0.json.gz``).
Two ranks (``gpu/hta-trace_filter``) keep "slowest" and "fastest", the slowest read here
from the raw traces' step walls (:func:`raw_kineto.raw_walls`), and the hint to pick.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

import pytest
from raw_kineto import raw_walls
from shared_samples import HTA, shared_sample
from widget_html import panel_words

from perfkit.widgets import tab_panel

pytestmark = pytest.mark.shared_samples


def _title(panel: Any) -> str:
    titles = [c.chart.to_dict().get("title", "") for c in panel.charts]
    assert len(titles) == 1
    return titles[0]


def _one_trace(folder: Path) -> Path:
    files = sorted(folder.glob("*.json.gz")) + sorted(folder.glob("*.json"))
    assert len(files) == 1
    return files[0]


@pytest.mark.parametrize("name", ["wild/tl_qwen_h100", f"{HTA}/sampled_rank-0.json.gz"])
def test_a_lone_rank_is_neither_slowest_nor_asked_to_be_picked(name: str) -> None:
    path = shared_sample(name)
    walls = raw_walls(path if path.is_file() else _one_trace(path))
    # the median-duration step of the trace (the lower middle one for an even count)
    ordered = sorted(walls, key=lambda s: (walls[s], s))
    step = ordered[(len(ordered) - 1) // 2]
    panel = tab_panel("Timeline", str(path))
    assert _title(panel) == f"Step {step} · rank 0"
    text = panel_words(panel)
    assert f"step {step}: the median-duration step of rank 0 " in text, text[:400]
    assert "slowest" not in text and "fastest" not in text and "Pick ranks" not in text
    picker = panel.step.options[0][0]
    assert "slowest" not in picker and picker.startswith("representative")


def test_two_ranks_keep_their_slowest_and_fastest() -> None:
    root = shared_sample(HTA)
    medians = {int(re.search(r"rank-(\d+)", f.name)[1]):
               statistics.median(raw_walls(f).values()) for f in sorted(root.glob("*.gz"))}
    assert len(medians) == 2 and len(set(medians.values())) == 2
    slowest = max(medians, key=medians.get)
    fastest = min(medians, key=medians.get)
    panel = tab_panel("Timeline", str(root))
    assert _title(panel).endswith(f"rank {slowest} (slowest), rank {fastest} (fastest)")
    text = panel_words(panel)
    assert f"the median-duration step of the slowest rank {slowest} " in text
    assert "Pick ranks in the list" in text
    assert panel.step.options[0][0] == "representative (median step of the slowest rank)"
