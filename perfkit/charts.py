"""Altair chart builders, rendered offline.

Every builder takes a pandas DataFrame whose columns it documents and returns an Altair
chart; charts draw numbers, they never compute a metric. Clusters are usually air-gapped,
so :func:`chart_to_svg` renders a chart to a self-contained SVG string with vl-convert
(Vega runs inside the Python process): the SVG can go into an ``ipywidgets.HTML``, a
notebook output or a report without any script from a CDN.
"""

from __future__ import annotations

import io

import altair as alt
import pandas as pd

from .errors import InvalidArgumentError

__all__ = ["memory_chart", "chart_to_svg"]

MEMORY_COLUMNS = ("component", "GiB", "device_GiB")


def _require(frame: pd.DataFrame, columns: tuple[str, ...], builder: str) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise InvalidArgumentError("frame", f"{builder} needs a pandas DataFrame",
                                   type(frame).__name__)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InvalidArgumentError("frame", f"{builder} needs the columns "
                                   f"{', '.join(columns)}; missing {', '.join(missing)}")


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
    _require(frame, MEMORY_COLUMNS, "memory_chart")
    data = frame.loc[:, list(MEMORY_COLUMNS)].copy()
    order = list(data["component"])
    data["order"] = range(len(data))
    bars = alt.Chart(data).mark_bar(height=28).encode(
        x=alt.X("GiB:Q", stack="zero", title="GiB per device"),
        y=alt.Y("bar:N", title=None, axis=None),
        color=alt.Color("component:N", sort=order, title=None,
                        legend=alt.Legend(orient="bottom", direction="horizontal")),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("component:N"), alt.Tooltip("GiB:Q", format=".2f")],
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


def chart_to_svg(chart: alt.TopLevelMixin) -> str:
    """Render an Altair chart to a standalone SVG string, offline (vl-convert).

    Parameters
    ----------
    chart : altair chart
        Any top-level Altair chart.

    Returns
    -------
    str
        ``<svg ...>...</svg>``; it references no external script or font.
    """
    buffer = io.StringIO()
    chart.save(buffer, format="svg")
    return buffer.getvalue()
