"""A profile of one rank is not described by its "slowest rank", nor by "no step times".

- The Overview's step time said "median over 2 steps of the slowest rank's step (1 rank
  loaded)" and its steps table had the columns of a spread over ranks (median, fastest,
  slowest, slowest rank), each the same figure or rank 0 (``gpu/hta-trace_filter``'s rank-0
  file alone). It now says "the one rank's step" and shows that rank's steps.
- The findings' basis said "the mean over steps of the slowest rank's step" on one rank
  (``wild/k_resnet50_nw4``).
- A trace without step marks (``wild/tl_b200_eager``) has one step time, the Overview's, yet
  its Timeline said "no step times" and drew "rank 0: the first (no step times to rank
  them)" of one rank.

The figures are read from the raw traces (:func:`raw_kineto.raw_walls`, json).
"""

from __future__ import annotations

import re
import statistics

import pytest
from raw_kineto import raw_events, raw_walls
from shared_samples import HTA, shared_sample
from widget_html import panel_words

from perfkit.widgets import tab_panel

pytestmark = pytest.mark.shared_samples


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_the_overview_of_one_rank_shows_its_steps() -> None:
    path = shared_sample(f"{HTA}/sampled_rank-0.json.gz")
    walls = {s: float(w) for s, w in raw_walls(path).items()}
    assert sorted(walls) == [551, 552]
    text = panel_words(tab_panel("Overview", str(path)))
    card = re.search(r"step time ([\d.]+) ms (median over [^(]*\(1 rank loaded\))", text)
    assert card, text[:600]
    assert float(card[1]) == pytest.approx(statistics.median(walls.values()) / 1e3, abs=0.5)
    assert card[2] == ("median over 2 steps of the one rank's step with the wait before its "
                       "first device task (1 rank loaded)")
    table = text.split("Steps of rank 0: each step's time and its split", 1)[1]
    heads = [c.strip() for c in table.split(" | ")[:6]]
    assert heads[0].endswith("step") and heads[1] == "step time (ms)"
    assert "slowest rank" not in table.split("What was opened")[0]
    for step, wall in walls.items():
        row = re.search(rf"\| {step} \| ([\d.]+) \|", table)
        assert row and float(row[1]) == pytest.approx(wall / 1e3, abs=0.5), step


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_the_findings_basis_of_one_rank_is_its_step() -> None:
    folder = shared_sample("wild/k_resnet50_nw4")
    (trace,) = folder.glob("*.json.gz")
    walls = [float(w) / 1e3 for w in raw_walls(trace).values()]  # ms, the 6 steps
    assert len(walls) == 6
    mean, median = statistics.mean(walls), statistics.median(walls)
    assert mean - median > 0.1 * median  # a slow first step: the two bases differ
    text = panel_words(tab_panel("Advice", str(folder)))
    note = re.search(r"Shares of ([\d.]+) ms, (the mean over steps of [^;]*); the step time "
                     r"shown, ([\d.]+) ms, is the median over the steps", text)
    assert note, text[:600]
    assert float(note[1]) == pytest.approx(mean, abs=0.5)
    assert float(note[3]) == pytest.approx(median, abs=0.5)
    assert note[2] == "the mean over steps of the one rank's step and the preparing before it"


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_a_trace_without_step_marks_has_a_step_time_but_no_step_number() -> None:
    folder = shared_sample("wild/tl_b200_eager")
    (trace,) = folder.glob("*.json.gz")
    assert not [e for e in raw_events(trace)
                if str(e.get("name", "")).startswith("ProfilerStep#")]
    overview = panel_words(tab_panel("Overview", str(folder)))
    assert "the one span without step numbers: no step marks in the profile" in overview
    timeline = panel_words(tab_panel("Timeline", str(folder)))
    assert timeline.startswith("no step marks in the profile: the whole trace is one "
                               "window; rank 0: the only rank"), timeline[:300]
    assert "no step times" not in timeline and "the first" not in timeline
