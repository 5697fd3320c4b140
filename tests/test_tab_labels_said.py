"""What four dashboard labels say, checked on real profiles.

- The Planner's strategy chart colours layouts by whether they fit in device memory: its
  legend (rendered to SVG) names both colours, and the points coloured "fits" are those
  at or under the memory limit (arithmetic on the chart's own columns).
- On a step whose task list was cut short (``ascend/msinsight-pt-gpt3-old``, the share
  covered read here from the raw kernel_details.csv and step_trace_time.csv), the
  Timeline chart's title says it is a fragment; on a whole step it does not.
- On a Kineto trace the Communication tab says once, not twice, that the collectives'
  transit / wait / idle split is not recorded.
- A Kineto trace with no collective (its raw events read here with gzip and json) shows
  the loader's notes about the tab's tables under "No communication", once, except the
  one saying there is no collective, which the tab's own sentence says.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
from raw_ascend import covered_share
from shared_samples import PT_GPT3_OLD, PT_LEVEL1, shared_param, shared_sample
from widget_html import panel_html

from perfkit import charts as C
from perfkit.widgets import dashboard

# the whole dashboard, every tab x profile, or Dask against pandas: the slow group (README)
pytestmark = pytest.mark.slow

BASELINE = "simulated/llama2-13b-baseline-dp16"
H100 = str(Path(__file__).parent / "data" / "kineto_llama_h100")
_TAGS = re.compile(r"<[^>]+>")


def _text(panel: Any) -> str:
    """The words a tab shows, tags and styles taken out."""
    html = re.sub(r"<style>.*?</style>", "", panel_html(panel), flags=re.S)
    text = re.sub(r"\s+", " ", _TAGS.sub(" ", html))
    return text.replace("&#x27;", "'").replace("&amp;", "&")


def _strategy_chart(panel: Any) -> Any:
    """The Planner's strategy chart (the chart widget of its search result)."""
    charts = [w.chart for w in panel.result.children
              if hasattr(w, "chart") and "fits" in json.dumps(w.chart.to_dict())]
    assert len(charts) == 1
    return charts[0]


@pytest.mark.parametrize("name", [BASELINE, H100])
def test_the_strategy_chart_has_its_fits_legend(name: str) -> None:
    board = dashboard(name)
    board.select("Planner")
    chart = _strategy_chart(board.panels["Planner"])
    spec = chart.to_dict()
    colours = [layer["encoding"]["color"] for layer in spec["layer"]
               if layer.get("encoding", {}).get("color", {}).get("field") == "fits"]
    assert colours and all(c.get("legend", {}) is not None for c in colours)
    # the legend drawn: one label per colour, under its title
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", C.chart_to_svg(chart))
    assert texts.count("fits") == 1 and texts.count("does not fit") == 1
    titles = {c.get("title") for c in colours}
    assert len(titles) == 1 and texts.count(titles.pop()) == 1  # the legend's title
    # the colour is the memory fit: at or under the dashed limit
    points = chart.layer[[i for i, lay in enumerate(spec["layer"])
                          if lay["mark"]["type"] == "point"][0]].data
    limit = float(chart.layer[[i for i, lay in enumerate(spec["layer"])
                               if "limit_GiB" in json.dumps(lay)][0]].data["limit_GiB"][0])
    under = points["memory_GiB"] <= limit * (1 + 1e-12)
    assert ((points["fits"] == "fits") == under).all()


@pytest.mark.parametrize("name, fragment", [shared_param(PT_GPT3_OLD, True),
                                            shared_param(PT_LEVEL1, False)])
def test_the_timeline_title_says_when_it_draws_a_fragment(name: str, fragment: bool) -> None:
    root = shared_sample(name)
    outs = sorted(root.glob("*/ASCEND_PROFILER_OUTPUT"))
    shares = [covered_share(out) for out in outs]
    # the raw files: the tasks of gpt3-old cover well under half of the step's busy time
    assert (max(shares) < 0.5) == fragment
    board = dashboard(str(root))
    board.select("Timeline")
    panel = board.panels["Timeline"]
    titles = [c.chart.to_dict().get("title", "") for c in panel.charts]
    assert len(titles) == 1
    assert ("fragment" in titles[0]) == fragment, titles[0]
    assert titles[0].startswith("Step ")
    # the title and the warning above the chart agree
    assert ("fragment of the step" in _text(panel)) == fragment


def _kineto_events(path: Path) -> list[dict[str, Any]]:
    """The trace events of the one Kineto trace under ``path``, read with gzip and json."""
    files = sorted(path.glob("*.json.gz")) + sorted(path.glob("*.json"))
    files = files if path.is_dir() else [path]
    events = []
    for file in files:
        opener = gzip.open if file.name.endswith(".gz") else open
        with opener(file, "rt", encoding="utf-8") as fh:
            events += json.load(fh)["traceEvents"]
    return events


_COLLECTIVE = re.compile(r"nccl|rccl|gloo|c10d::|all_?reduce|all_?gather|broadcast",
                         re.IGNORECASE)


@pytest.mark.parametrize("name", [H100, shared_param("wild/tl_b200_eager")])
def test_kineto_communication_says_the_split_is_not_recorded_once(name: str) -> None:
    path = Path(name) if Path(name).is_absolute() else shared_sample(name)
    collectives = [e for e in _kineto_events(path) if _COLLECTIVE.search(str(e.get("name")))]
    assert collectives  # the raw trace records collectives: the tab has its table
    board = dashboard(str(path))
    board.select("Communication")
    text = _text(board.panels["Communication"])
    assert "Collectives: time per kind" in text
    # the split not recorded: the tab's own sentence, and not the loader's note again
    said = [s for s in re.split(r"(?<=[.;]) ", text) if "transit" in s]
    assert len(said) == 1 and "Not recorded in this profile" in said[0], said
    assert text.count("Not recorded in this profile") == 1
    assert "not recorded by Kineto" not in text
    # the rest of the loader's note is still said, once
    notes = [n for n in board.profile.meta.notes if "comm_ops: " in n]
    assert len(notes) == 1
    first = notes[0].split("comm_ops: ", 1)[1].split("; ")[0]
    assert text.count(first) == 1, (first, text)


@pytest.mark.shared_samples
@pytest.mark.parametrize("name", ["wild/k_resnet50_nw0", "wild/tl_qwen_h100"])
def test_an_empty_communication_tab_shows_the_loaders_notes_once(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tab says in its own words that the trace has no collective, so the loader's note
    saying the same is not repeated under it; any other note about the tab's tables is
    shown there, once (here one added to what the loader said)."""
    path = shared_sample(name)
    events = _kineto_events(path)
    assert events and not [e for e in events if _COLLECTIVE.search(str(e.get("name")))]
    from perfkit.widgets.tabs import communication as tab

    extra = "Rank 0, collectives: a marker note of this test."
    real = tab.notes_about
    monkeypatch.setattr(tab, "notes_about", lambda *a: [*real(*a), extra])
    board = dashboard(str(path))
    board.select("Communication")
    text = _text(board.panels["Communication"])
    assert text.count("No communication") == 1
    notes = [n for n in board.profile.meta.notes if "comm_ops: " in n]
    assert len(notes) == 1
    body = notes[0].split("comm_ops: ", 1)[1]
    assert "no communication kernel nor host collective" in body
    assert text.count(body) == 0, (body, text)  # the tab's own sentence says it
    assert text.count(extra) == 1
    assert text.index("No communication") < text.index(extra)
