"""Memory tab: a device's memory by component, and memory over the profiled time."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ..format import BYTE_UNITS, bytes_unit
from .base import MAX_MARKS, nothing_to_draw, require, selection_param

__all__ = ["MEMORY_COLUMNS", "memory_chart", "memory_timeline_chart"]

MEMORY_COLUMNS = ("component", "GiB", "device_GiB")


def memory_chart(frame: pd.DataFrame, title: str | None = None,
                 width: int = 460) -> alt.LayerChart:
    """One horizontal bar of a device's memory, stacked by component, against its capacity.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per component with columns ``component`` (str, in stacking order),
        ``GiB`` (float) and ``device_GiB`` (float, the device capacity, same on every row),
        e.g. :func:`perfkit.widgets.summary.memory_breakdown`.
    title : str, optional
        Chart title.
    width : int
        Width in pixels.

    Returns
    -------
    altair.LayerChart
        The stacked bar plus a vertical rule at ``device_GiB``.
    """
    require(frame, MEMORY_COLUMNS, "memory_chart")
    data = frame.loc[:, list(MEMORY_COLUMNS)].copy()
    order = list(data["component"])
    data["order"] = range(len(data))
    bars = alt.Chart(data).mark_bar(height=28).encode(
        x=alt.X("GiB:Q", stack="zero", title="GiB per device"),
        y=alt.Y("bar:N", title=None, axis=None),
        color=alt.Color("component:N", sort=order, title=None,
                        legend=alt.Legend(orient="bottom", direction="horizontal")),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("component:N"),
                 alt.Tooltip("GiB:Q", format=",.2f", title="memory (GiB)")],
    ).transform_calculate(bar="'memory'")
    capacity = alt.Chart(data.head(1)).mark_rule(color="#c0392b", strokeWidth=2,
                                                 strokeDash=[4, 3]).encode(
        x=alt.X("device_GiB:Q"))
    label = alt.Chart(data.head(1)).mark_text(align="right", dx=-4, dy=-22, color="#c0392b",
                                              fontSize=11).encode(
        x=alt.X("device_GiB:Q"),
        text=alt.Text("caption:N"),
    ).transform_calculate(caption="'device ' + format(datum.device_GiB, '.0f') + ' GiB'")
    chart = alt.layer(bars, capacity, label).properties(width=width, height=60)
    if title:
        chart = chart.properties(title=title)
    return chart


def memory_timeline_chart(frame: pd.DataFrame, value: str = "reserved_bytes",
                          title: str | None = None, width: int = 560,
                          height: int = 240, select: bool = False,
                          unit: str | None = None) -> alt.Chart:
    """Memory over the profiled time, one line per series, zoomable along time.

    Parameters
    ----------
    frame : pandas.DataFrame
        Binned samples with columns ``ts_us`` and ``value``, and either ``series`` (the
        line's name, e.g. from :func:`perfkit.widgets.memory_view.memory_series`, which
        groups components and aggregates ranks) or ``rank`` and ``component``
        (:func:`perfkit.analysis.memory_timeline`, one line per rank and component).
        Rows where ``value`` is NA are left out; beyond :data:`MAX_MARKS` rows every series
        is thinned alike, each group of consecutive samples keeping its maximum.
    value : str
        Which column to draw: ``"reserved_bytes"``, ``"allocated_bytes"`` or
        ``"active_bytes"``.
    title : str, optional
        Chart title.
    width, height : int
        Size in pixels.
    select : bool
        Add the point selection :data:`SELECTION` on ``series``, bound to the legend too
        (click a line or a legend entry).
    unit : {"B", "KiB", "MiB", "GiB", "TiB"}, optional
        Unit of the y axis (default: the one that fits the largest value, so a device
        profile reads in GiB and a CPU run in MiB).

    Returns
    -------
    altair.Chart
        Lines with ``x = ms``, ``y = <unit>`` (a column named after the unit, e.g. ``GiB``)
        and ``color = series`` (in the frame's order of
        series: put the largest first); the data has one row per input row with a known
        value. Without one, the reason in words
        (:func:`~perfkit.charts.base.nothing_to_draw`, the frame's note).
    """
    if "series" in frame.columns:
        require(frame, ("series", "ts_us", value), "memory_timeline_chart")
        data = frame.dropna(subset=[value])
        names = data["series"].astype(str)
    else:
        require(frame, ("rank", "component", "ts_us", value), "memory_timeline_chart")
        data = frame.dropna(subset=[value])
        names = ("rank " + data["rank"].astype("Int64").astype(str) + " "
                 + data["component"].astype(str))
    if data.empty:  # no axes without lines: say why (profile_memory off, no samples)
        return nothing_to_draw(frame, "memory samples", width, height, title)
    if len(data) > MAX_MARKS:  # thin every series alike, keeping each bin's maximum
        step = -(-len(data) // MAX_MARKS)
        key = names.to_numpy()
        pos = data.groupby(key, sort=False).cumcount().to_numpy() // step
        data = data.assign(_k=key, _b=pos).groupby(["_k", "_b"], sort=False).agg(
            ts_us=("ts_us", "first"), **{value: (value, "max")}).reset_index()
        names = data["_k"].astype(str)
    values = data[value].astype(float).to_numpy()
    if unit is None:  # the binary unit of the largest value: GiB on a device, MiB on a CPU
        unit = bytes_unit([float(values.max())] if len(values) else [])[0]
    size = dict(BYTE_UNITS)[unit]
    data = pd.DataFrame({
        "series": names.to_numpy(),
        "ms": data["ts_us"].astype(float).to_numpy() / 1000.0,
        unit: values / size})
    order = list(dict.fromkeys(data["series"]))
    what = value.removesuffix("_bytes")
    chart = alt.Chart(data).mark_line(interpolate="step-after", point=False).encode(
        # the axis spans the samples, not a rounded-out range (a sample a few µs before
        # the start would otherwise open the axis at -20 ms, or -1,000 ms on a long run)
        x=alt.X("ms:Q", title="time since the profile's start (ms)",
                scale=alt.Scale(nice=False, zero=False)),
        y=alt.Y(f"{unit}:Q", title=f"{what} ({unit})"),
        color=alt.Color("series:N", title=None, sort=order,
                        legend=alt.Legend(orient="right", labelLimit=0)),
        tooltip=[alt.Tooltip("series:N"),
                 alt.Tooltip("ms:Q", format=",.1f", title="time (ms)"),
                 alt.Tooltip(f"{unit}:Q", format=",.3f", title=f"{what} ({unit})")],
    ).properties(width=width, height=height)
    zoom = alt.selection_interval(bind="scales", encodings=["x"])
    chart = chart.add_params(zoom)
    if select:
        pick = selection_param(["series"], legend=True)
        chart = chart.add_params(pick).encode(
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.2)))
    if title:
        chart = chart.properties(title=title)
    return chart
