"""Recompute tab: memory against step time, one point per recompute mode."""

from __future__ import annotations

import altair as alt
import pandas as pd

from .base import require

__all__ = ["recompute_tradeoff_chart"]


def recompute_tradeoff_chart(frame: pd.DataFrame, memory_limit_GiB: float | None = None,
                             title: str | None = None, width: int = 360,
                             height: int = 220) -> alt.LayerChart:
    """Memory against step time, one labelled point per recompute mode.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per mode with columns ``recompute``, ``memory_GiB`` and ``step_s``:
        :func:`perfkit.widgets.prediction.recompute_modes` (the Planner's model, as the
        dashboard's Recompute tab and notebook 06 predict it).
    memory_limit_GiB : float, optional
        Device memory, drawn as a dashed rule (the Planner's limit:
        ``fit.prediction.memory_limit_bytes / 2**30``).
    title : str, optional
        Chart title.
    width, height : int
        Size in pixels.

    Returns
    -------
    altair.LayerChart
        Points and their labels with ``x = memory_GiB``, ``y = step_s``; the point layer's
        data has one row per mode.
    """
    require(frame, ("recompute", "memory_GiB", "step_s"), "recompute_tradeoff_chart")
    data = pd.DataFrame({"recompute": frame["recompute"].astype(str).to_numpy(),
                         "memory_GiB": frame["memory_GiB"].astype(float).to_numpy(),
                         "step_s": frame["step_s"].astype(float).to_numpy()})
    base = alt.Chart(data).encode(
        x=alt.X("memory_GiB:Q", title="memory per device (GiB)"),
        y=alt.Y("step_s:Q", title="estimated step time (s)", scale=alt.Scale(zero=False)),
        tooltip=[alt.Tooltip("recompute:N"),
                 alt.Tooltip("memory_GiB:Q", format=",.2f", title="memory per device (GiB)"),
                 alt.Tooltip("step_s:Q", format=",.3f", title="estimated step (s)")])
    layers = [base.mark_point(filled=True, size=80, color="#2e86c1"),
              base.mark_text(align="left", dx=8, fontSize=12).encode(text="recompute:N")]
    if memory_limit_GiB is not None:
        limit = pd.DataFrame({"limit_GiB": [float(memory_limit_GiB)]})
        layers.append(alt.Chart(limit).mark_rule(color="#c0392b", strokeDash=[4, 3]).encode(
            x="limit_GiB:Q"))
    chart = alt.layer(*layers).properties(width=width, height=height)
    if title:
        chart = chart.properties(title=title)
    return chart
