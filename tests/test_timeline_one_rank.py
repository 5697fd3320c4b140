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

from perfkit.format import time_text
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
    own = time_text(float(walls[step]))
    assert f"step {step}: the median-duration step of rank 0, {own} long" in text or \
        f"step {step}: the only step of rank 0, {own} long" in text, text[:400]
    assert "slowest" not in text and "fastest" not in text and "Pick ranks" not in text
    picker = panel.step.options[0][0]
    assert "slowest" not in picker and picker.startswith("representative")


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_two_ranks_keep_their_slowest_and_fastest() -> None:
    root = shared_sample(HTA)
    walls = {int(re.search(r"rank-(\d+)", f.name)[1]): raw_walls(f)
             for f in sorted(root.glob("*.gz"))}
    medians = {r: statistics.median(w.values()) for r, w in walls.items()}
    assert len(medians) == 2 and len(set(medians.values())) == 2
    slowest = max(medians, key=medians.get)
    fastest = min(medians, key=medians.get)
    panel = tab_panel("Timeline", str(root))
    assert _title(panel).endswith(f"rank {slowest} (slowest), rank {fastest} (fastest)")
    text = panel_words(panel)
    assert f"the median-duration step of the slowest rank {slowest}, " in text
    assert "Pick ranks in the list" in text
    assert panel.step.options[0][0] == "representative (median step of the slowest rank)"


def test_the_caption_gives_the_drawn_steps_own_time_beside_the_median() -> None:
    """HTA's slowest rank has 2 steps: their median lies halfway between them (619 ms), and
    the caption said only that while it drew step 551, which took 608 ms. It gives the
    drawn step's own time, then the median, each in its own clause (raw walls of the
    slowest rank's trace, :func:`raw_kineto.raw_walls`)."""
    root = shared_sample(HTA)
    walls = {int(re.search(r"rank-(\d+)", f.name)[1]): raw_walls(f)
             for f in sorted(root.glob("*.gz"))}
    slowest = max(walls, key=lambda r: statistics.median(walls[r].values()))
    mine = {s: float(w) for s, w in walls[slowest].items()}
    assert len(mine) == 2
    step = min(mine)  # both steps are as near their median: the earlier is drawn
    own, med = time_text(mine[step]), time_text(statistics.median(mine.values()))
    assert own != med  # 608 ms and 619 ms
    text = panel_words(tab_panel("Timeline", str(root)))
    assert (f"step {step}: the median-duration step of the slowest rank {slowest}, {own} long; "
            f"the median over its 2 steps is {med};") in text, text[:400]
