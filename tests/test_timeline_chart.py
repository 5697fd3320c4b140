"""timeline_chart: swimlanes with tooltips, labels and x zoom, drawn offline to SVG."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import perfkit as pk
from perfkit.charts import TIMELINE_COLORS, chart_to_svg, timeline_chart
from perfkit.charts.timeline import _time_text

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def frame() -> Any:
    p = pk.load(ROOT / "data" / "simulated" / "slow-rank", cache=False, progress=False)
    return pk.analysis.timeline(p, step=1, ranks=[2, 3])


def _values(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of the chart's (consolidated) inline dataset."""
    data = spec["data"]
    return data["values"] if "values" in data else spec["datasets"][data["name"]]


def test_spec_has_one_rect_per_row_a_tooltip_and_x_zoom(frame):
    spec = timeline_chart(frame).to_dict()
    rects, text = spec["layer"]
    assert rects["mark"]["type"] == "rect" and text["mark"]["type"] == "text"
    assert len(_values(spec)) == len(frame)  # one dataset, shared by both layers
    params = [p for p in spec.get("params", []) + rects.get("params", [])]
    zoom = [p for p in params if p.get("bind") == "scales"]
    assert zoom and zoom[0]["select"]["encodings"] == ["x"]
    fields = {t["field"] for t in rects["encoding"]["tooltip"]}
    assert {"event", "track", "category", "start", "duration", "events"} <= fields
    assert rects["encoding"]["y"]["sort"] == list(
        frame.sort_values("track_order")["track"].drop_duplicates())
    colors = rects["encoding"]["color"]["scale"]
    assert colors["range"] == [TIMELINE_COLORS[c] for c in colors["domain"]]
    assert spec["layer"][0]["encoding"]["x"]["title"] == "ms from the start of step 1"
    # the sample's fault slows rank 2 down; rank 3 is the quickest of the others
    assert spec["title"] == "Step 1 · rank 2 (slowest), rank 3 (fastest)"


def test_tooltip_values_are_in_the_unit_that_fits(frame):
    spec = timeline_chart(frame).to_dict()
    values = _values(spec)
    row = max(values, key=lambda v: v["end_ms"] - v["start_ms"])
    ms = row["end_ms"] - row["start_ms"]  # an event (not a block): duration = its span
    assert 10 <= ms < 1000  # the longest event here is a collective of tens of ms
    assert row["duration"] == (f"{ms:.1f} ms" if ms < 100 else f"{ms:.0f} ms")
    assert _time_text(850.0) == "850 µs" and _time_text(1234.0) == "1.23 ms"
    assert _time_text(2.5e6) == "2.50 s" and _time_text(0.0) == "0 µs"
    # "span (block)" only where it means something: an event's tooltip has no empty row
    blocky = pk.analysis.timeline(pk.load(ROOT / "data" / "simulated" / "slow-rank",
                                          progress=False), step=1, max_events=100)
    kinds = blocky["kind"].astype(str).tolist()
    assert {"block", "event"} <= set(kinds)
    rows = _values(timeline_chart(blocky).to_dict())  # one row per frame row, in order
    assert [("span" in v) for v in rows] == [k == "block" for k in kinds]
    assert all(v["span"] for v in rows if "span" in v)


def test_svg_draws_every_event_and_labels_the_longest(frame):
    svg = chart_to_svg(timeline_chart(frame))
    start = svg.index('class="mark-rect role-mark')
    rects = svg[start:svg.index("</g>", start)].count("<path")
    assert rects == len(frame)
    labels = set(re.findall(r"<text[^>]*>([^<]+)</text>", svg))
    widest = frame.loc[frame["labelled"]].assign(w=frame["end_us"] - frame["start_us"])
    assert widest.sort_values("w")["label"].iloc[-1] in labels
    assert "ms from the start of step 1" in labels
    assert "http" not in svg.split("xmlns", 1)[-1].replace("http://www.w3.org", "")


def test_missing_columns_are_named():
    import pandas as pd

    with pytest.raises(pk.PerfkitError, match="track_order"):
        timeline_chart(pd.DataFrame({"track": ["a"]}))
