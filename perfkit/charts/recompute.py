"""Recompute tab: memory against step time, one point per recompute mode."""

from __future__ import annotations

import altair as alt
import pandas as pd

from .base import memory_limit_rule, require

__all__ = ["recompute_tradeoff_chart"]


def recompute_tradeoff_chart(frame: pd.DataFrame, memory_limit_GiB: float | None = None,
                             title: str | None = None, width: int = 360,
                             height: int = 220) -> alt.LayerChart:
    """Memory against step time, one point per recompute mode, coloured by mode.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per mode with columns ``recompute``, ``memory_GiB`` and ``step_s``:
        :func:`perfkit.widgets.prediction.recompute_modes` (the Planner's model, as the
        dashboard's Recompute tab and notebook 06 predict it).
    memory_limit_GiB : float, optional
        The memory usable on a device, drawn as a dashed rule labelled "usable … GiB"
        (the Planner's limit: ``fit.prediction.memory_limit_bytes / 2**30``).
    title : str, optional
        Chart title.
    width, height : int
        Size in pixels.

    Returns
    -------
    altair.LayerChart
        Points with ``x = memory_GiB``, ``y = step_s`` and ``color = recompute`` (a legend
        names each mode, in the frame's order); the point layer's data has one row per
        mode. The modes are named in the legend, not beside the points: two modes of
        nearly the same memory and step (selective, and selective with one fully
        recomputed layer on stage 0 of a pipeline) would print their names over each
        other.
    """
    require(frame, ("recompute", "memory_GiB", "step_s"), "recompute_tradeoff_chart")
    data = pd.DataFrame({"recompute": frame["recompute"].astype(str).to_numpy(),
                         "memory_GiB": frame["memory_GiB"].astype(float).to_numpy(),
                         "step_s": frame["step_s"].astype(float).to_numpy()})
    modes = list(dict.fromkeys(data["recompute"]))
    points = alt.Chart(data).mark_point(filled=True, size=80, opacity=0.9).encode(
        x=alt.X("memory_GiB:Q", title="memory per device (GiB)"),
        y=alt.Y("step_s:Q", title="estimated step time (s)", scale=alt.Scale(zero=False)),
        color=alt.Color("recompute:N", title="recompute", sort=modes,
                        scale=alt.Scale(domain=modes,
                                        range=list(_MODE_COLORS[:len(modes)])),
                        legend=alt.Legend(orient="bottom", direction="vertical",
                                          labelLimit=480)),
        tooltip=[alt.Tooltip("recompute:N"),
                 alt.Tooltip("memory_GiB:Q", format=",.2f", title="memory per device (GiB)"),
                 alt.Tooltip("step_s:Q", format=",.3f", title="estimated step (s)")])
    layers: list[alt.Chart] = [points]
    if memory_limit_GiB is not None:
        layers += memory_limit_rule(float(memory_limit_GiB))
    chart = alt.layer(*layers).properties(width=width, height=height)
    if title:
        chart = chart.properties(title=title)
    return chart


#: One colour per mode: none, selective, full, then a profiled layout of its own.
_MODE_COLORS = ("#2e86c1", "#e67e22", "#27ae60", "#000000", "#8e44ad", "#7f8c8d")
