"""Planner tab: candidate strategies and the pipeline stages' layer plan."""

from __future__ import annotations

import altair as alt
import pandas as pd

from .base import GIB, require

__all__ = ["strategy_chart", "pipeline_plan_chart"]

_STRATEGY_TOOLTIP = ("dp", "tp", "pp", "vpp", "micro_batch_size", "num_micro_batches",
                     "recompute", "rank")


def strategy_chart(frame: pd.DataFrame, n: int | None = 400, title: str | None = None,
                   width: int = 420, height: int = 260) -> alt.LayerChart:
    """Scatter of candidate strategies: step time against memory per device, by ``fits``.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per candidate with columns ``step_s``, ``memory_bytes``, ``fits`` and
        ``memory_limit_bytes`` (the output of :func:`perfkit.plan.search`, with
        ``include_rejected=True`` to see what does not fit). The columns ``dp``, ``tp``,
        ``pp``, ``vpp``, ``micro_batch_size``, ``num_micro_batches``, ``recompute`` and
        ``rank`` go into the tooltip when present.
    n : int, optional
        Keep the first ``n`` rows in ascending ``step_s`` (all when None); searches can
        return thousands of candidates and the fast ones are the interesting ones.
    title : str, optional
        Chart title.
    width, height : int
        Size in pixels.

    Returns
    -------
    altair.LayerChart
        Points with ``x = memory_GiB``, ``y = step_s``, ``color = fits``, plus a dashed
        rule at the memory limit. The point layer's data has one row per candidate kept.
    """
    require(frame, ("step_s", "memory_bytes", "fits", "memory_limit_bytes"),
             "strategy_chart")
    data = frame.sort_values("step_s", kind="stable")
    if n is not None:
        data = data.head(n)
    extra = [c for c in _STRATEGY_TOOLTIP if c in data.columns]
    points = data.loc[:, ["step_s", "fits", *extra]].reset_index(drop=True)
    points["memory_GiB"] = data["memory_bytes"].astype(float).to_numpy() / GIB
    points["fits"] = points["fits"].map({True: "fits", False: "does not fit"})
    if "recompute" in points.columns:
        points["recompute"] = points["recompute"].astype(str)
    limit = pd.DataFrame({"limit_GiB": [float(frame["memory_limit_bytes"].max()) / GIB]})
    dots = alt.Chart(points).mark_point(filled=True, size=40, opacity=0.7).encode(
        x=alt.X("memory_GiB:Q", title="memory per device (GiB)"),
        y=alt.Y("step_s:Q", title="estimated step time (s)", scale=alt.Scale(zero=False)),
        color=alt.Color("fits:N", title=None,
                        scale=alt.Scale(domain=["fits", "does not fit"],
                                        range=["#2e86c1", "#c0392b"])),
        tooltip=[alt.Tooltip("step_s:Q", format=",.3f", title="estimated step (s)"),
                 alt.Tooltip("memory_GiB:Q", format=",.2f", title="memory per device (GiB)"),
                 *[alt.Tooltip(c) for c in extra]],
    ).interactive()  # zoom and pan
    rule = alt.Chart(limit).mark_rule(color="#c0392b", strokeDash=[4, 3]).encode(
        x=alt.X("limit_GiB:Q"))
    chart = alt.layer(dots, rule).properties(width=width, height=height)
    if title:
        chart = chart.properties(title=title)
    return chart


def pipeline_plan_chart(frame: pd.DataFrame, title: str | None = None,
                        cell: int = 48) -> alt.LayerChart:
    """Heatmap of layers per pipeline stage and recompute type, numbers in the cells.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per (stage, chunk, layer type, recompute type) with columns ``stage``,
        ``chunk``, ``recompute`` and ``layers``: ``BalancePlan.assignment`` from
        :func:`perfkit.plan.balance_pipeline`. With several chunks (vpp > 1) the rows are
        labelled ``recompute / chunk c``.
    title : str, optional
        Chart title.
    cell : int
        Size of one cell in pixels.

    Returns
    -------
    altair.LayerChart
        Rects with ``x = stage``, ``y = row`` (recompute type, per chunk when vpp > 1),
        ``color = layers`` and the layer count as text. The data has one row per input row.
    """
    require(frame, ("stage", "chunk", "recompute", "layers"), "pipeline_plan_chart")
    data = frame.loc[:, ["stage", "chunk", "recompute", "layers"]].reset_index(drop=True)
    data["stage"] = data["stage"].astype(int).astype(str)
    data["layers"] = data["layers"].astype(int)
    if data["chunk"].nunique() > 1:
        data["row"] = data["recompute"].astype(str) + " / chunk " + data["chunk"].astype(str)
    else:
        data["row"] = data["recompute"].astype(str)
    stages = sorted(data["stage"].unique(), key=int)
    rows = sorted(data["row"].unique())
    base = alt.Chart(data).encode(
        x=alt.X("stage:N", sort=stages, title="pipeline stage"),
        y=alt.Y("row:N", sort=rows, title="recompute"),
    )
    rects = base.mark_rect().encode(
        color=alt.Color("layers:Q", title="layers", scale=alt.Scale(scheme="blues")),
        tooltip=[alt.Tooltip("stage:N"), alt.Tooltip("chunk:Q"), alt.Tooltip("recompute:N"),
                 alt.Tooltip("layers:Q")],
    )
    text = base.mark_text(fontSize=13).encode(text=alt.Text("layers:Q"))
    chart = alt.layer(rects, text).properties(width=cell * max(1, len(stages)),
                                              height=cell * max(1, len(rows)))
    if title:
        chart = chart.properties(title=title)
    return chart
