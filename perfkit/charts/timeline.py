"""Timeline tab: swimlanes of one step, an event per rect."""

from __future__ import annotations

import math
from typing import Any

import altair as alt
import pandas as pd

from .base import require
from .overview import WAIT_COLOR

__all__ = ["TIMELINE_COLORS", "FRAGMENT_TITLE", "timeline_chart"]

#: Colour of each event category on the timeline (device task categories, host
#: operators, free time, and blocks that mix categories).
TIMELINE_COLORS: dict[str, str] = {
    "compute": "#4c78a8", "communication": "#e45756", "memory": "#72b7b2",
    "other": "#9d755d", "host": "#54a24b", "mixed": "#b279a2", "free": "#d9d9d9",
    "wait": WAIT_COLOR,  # the device's wait before the first task, as in the step split
}

_TIMELINE_NEEDS = ("track", "track_order", "name", "label", "category", "kind", "start_us",
                   "end_us", "dur_us", "n_events", "labelled")


def _time_text(us: float) -> str:
    """A time in the unit that fits, 3 significant digits (``1.23 ms``, ``850 µs``)."""
    if not math.isfinite(us):
        return "n/a"
    a = abs(us)
    value, unit = (us / 1e6, "s") if a >= 1e6 else (us / 1e3, "ms") if a >= 1e3 else (us, "µs")
    if value == 0:
        return f"0 {unit}"
    digits = max(0, 2 - int(math.floor(math.log10(abs(value)))))
    return f"{value:.{digits}f} {unit}"


#: What the timeline's title adds when the events drawn are a fragment of the step.
FRAGMENT_TITLE = "a fragment of the step: only part of its device tasks were recorded"


def _timeline_title(info: dict[str, Any]) -> str:
    """``"Step 3 · rank 5 (slowest), rank 2 (fastest)"`` from a timeline's attrs."""
    names = []
    for r in info.get("ranks", []):
        tag = ("slowest" if r == info.get("slowest_rank") else
               "fastest" if r == info.get("fastest_rank") else "")
        names.append(f"rank {'?' if r is None else r}" + (f" ({tag})" if tag else ""))
    step = info.get("step")
    return (f"Step {step} · " if step is not None else "") + ", ".join(names)


def timeline_chart(frame: pd.DataFrame, title: str | None = None, width: int = 900,
                   row_height: int = 22, labels: bool = True, zoom: bool = True,
                   fragment: bool = False) -> alt.LayerChart:
    """Swimlanes of one step: a rect per event, the longest labelled, zoomable on x.

    Parameters
    ----------
    frame : pandas.DataFrame
        :func:`perfkit.analysis.timeline` output: columns ``track`` (the y value,
        ``"rank 0 · stream 2"``), ``track_order``, ``name``, ``label``, ``category``,
        ``kind``, ``start_us``, ``end_us``, ``dur_us``, ``n_events``, ``labelled``. Its
        ``attrs["timeline"]["step"]`` names the step on the x axis.
    title : str, optional
        Chart title; default ``"Step N · rank a (slowest), rank b (fastest)"`` from the
        frame's attrs.
    width : int
        Width of the plot in pixels.
    row_height : int
        Height of one track in pixels.
    labels : bool
        Write the short ``label`` of the ``labelled`` events inside their rect (hidden
        while the rect is narrower than 24 px; cut with "…" to the rect's width).
    zoom : bool
        Zoom and pan on the x axis with the mouse wheel and drag
        (``selection_interval(bind="scales", encodings=["x"])``); double-click resets.
    fragment : bool
        The events drawn are a fragment of the step: only part of its device tasks were
        recorded (:func:`perfkit.analysis.recorded.fragment_text`). The default title then
        says so (:data:`FRAGMENT_TITLE`), so that the chart, seen or saved on its own, is
        not read as the whole step.

    Returns
    -------
    altair.LayerChart
        ``x`` = ms from the window origin, ``y`` = track in ``track_order``, colour =
        category (:data:`TIMELINE_COLORS`); one rect per row of ``frame`` (the data are
        inline, so the event cap of the analysis, not Altair's row limit, bounds them).
        The tooltip gives the full name, track, category, start and duration in the unit
        that fits, and for a merged block the number of events and the span they cover.
    """
    require(frame, _TIMELINE_NEEDS, "timeline_chart")
    info = frame.attrs.get("timeline", {})
    start = frame["start_us"].astype(float).to_numpy()
    end = frame["end_us"].astype(float).to_numpy()
    dur = frame["dur_us"].astype(float).to_numpy()
    n_events = frame["n_events"].astype(int).to_numpy()
    kind = frame["kind"].astype(str).to_numpy()
    data = pd.DataFrame({
        "track": frame["track"].astype(str).to_numpy(),
        "start_ms": (start / 1e3).round(6), "end_ms": (end / 1e3).round(6),
        "category": frame["category"].astype(str).to_numpy(),
        "event": frame["name"].astype(str).to_numpy(),
        "label": frame["label"].astype(str).to_numpy(),
        "start": [_time_text(v) for v in start],
        "duration": [_time_text(v) for v in dur],
        "events": n_events,
        "span": [_time_text(e - s) if k == "block" else "" for s, e, k in
                 zip(start, end, kind, strict=True)],
        "labelled": frame["labelled"].astype(bool).to_numpy(),
    })
    tracks = list(frame.sort_values("track_order", kind="mergesort")["track"]
                  .astype(str).drop_duplicates())
    cats = [c for c in TIMELINE_COLORS if c in set(data["category"])]
    cats += sorted(set(data["category"]) - set(cats))
    colors = [TIMELINE_COLORS.get(c, "#bab0ac") for c in cats]
    step = info.get("step")
    x_title = (f"ms from the start of step {step}" if step is not None
               else "ms from the start of the window")
    values = data.to_dict("records")
    for row in values:  # an event, not a block: no "span (block)" row in its tooltip
        if not row["span"]:
            del row["span"]
    # a plain {"values": [...]} skips Altair's per-row schema validation (0.4 s at 5,000
    # rows) and its 5,000-row limit: the analysis's event cap bounds the rows
    base = alt.Chart({"values": values})
    x = alt.X("start_ms:Q", title=x_title, scale=alt.Scale(zero=False, nice=False))
    y = alt.Y("track:N", sort=tracks, title=None, axis=alt.Axis(labelLimit=260))
    tooltip = [alt.Tooltip("event:N", title="event"), alt.Tooltip("track:N", title="lane"),
               alt.Tooltip("category:N"), alt.Tooltip("start:N", title="start"),
               alt.Tooltip("duration:N", title="duration"),
               alt.Tooltip("events:Q", title="events", format="d"),
               alt.Tooltip("span:N", title="span (block)")]
    px = "(scale('x', datum.end_ms) - scale('x', datum.start_ms))"  # rect width in pixels
    # a thin white edge separates neighbours once they are wide enough to show one; on a
    # sub-pixel rect it would paint the event white
    rects = base.mark_rect(clip=True, stroke="white",
                           strokeWidth=alt.ExprRef(f"{px} >= 4 ? 0.5 : 0")).encode(
        x=x, x2="end_ms:Q", y=y,
        color=alt.Color("category:N", title=None,
                        scale=alt.Scale(domain=cats, range=colors),
                        legend=alt.Legend(orient="bottom", direction="horizontal")),
        tooltip=tooltip)
    if zoom:
        rects = rects.add_params(alt.selection_interval(bind="scales", encodings=["x"]))
    layers: list[Any] = [rects]
    if labels and bool(data["labelled"].any()):
        text = base.mark_text(
            clip=True, align="left", baseline="middle", dx=3, fontSize=10, color="white",
            limit=alt.ExprRef(f"max(0, {px} - 6)"),
            opacity=alt.ExprRef(f"{px} >= 24 ? 1 : 0"),
        ).encode(x=alt.X("start_ms:Q"), y=y, text=alt.Text("label:N"),
                 tooltip=tooltip).transform_filter("datum.labelled")
        layers.append(text)
    if title is None and info:
        title = _timeline_title(info)
    if fragment and title is None:
        title = FRAGMENT_TITLE[0].upper() + FRAGMENT_TITLE[1:]
    elif fragment:
        title = f"{title} · {FRAGMENT_TITLE}"
    chart = alt.layer(*layers).properties(
        width=width, height=max(row_height * len(tracks), row_height))
    if title:
        chart = chart.properties(title=title)
    return chart
