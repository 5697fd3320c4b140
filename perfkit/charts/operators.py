"""Operators tab: the operators that take the most time, and the roofline."""

from __future__ import annotations

import altair as alt
import pandas as pd

from .._text_dtype import TEXT
from .base import nothing_to_draw, require, selection_param, unique_labels

__all__ = ["top_operators_chart", "roofline_chart", "TFLOPS_LABELS", "INTENSITY_LABELS"]


def top_operators_chart(frame: pd.DataFrame, label: str = "key", n: int | None = 15,
                        title: str | None = None, width: int = 420,
                        value: str = "total_us", value_title: str | None = None,
                        select: bool = False, label_limit: int = 48,
                        time_word: str = "device time") -> alt.Chart:
    """Horizontal bars of the operators that take the most device time.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per operator (type, name or name and shapes) with columns ``label``,
        ``value``, ``share`` and ``category``, sorted or not, i.e. the output of
        :func:`perfkit.analysis.top_operators`; the calls on the bars' basis go into
        the tooltip (``calls_per_step`` with ``per_step_us``, ``count`` with
        ``total_us``).
    label : str
        Column that names a bar (``"key"``, ``"type"`` or ``"name"``).
    n : int, optional
        Keep the first ``n`` rows in descending ``value`` (all when None).
    title : str, optional
        Chart title.
    width : int
        Width in pixels.
    value : str
        Column (µs) giving the bar's length: ``"total_us"`` (summed over ranks and steps)
        or ``"per_step_us"`` (per step and rank).
    value_title : str, optional
        Axis title (default says which of the two).
    select : bool
        Add the point selection :data:`SELECTION` on ``full`` (click a bar).
    label_limit : int
        Longest bar label (characters); longer names are shortened in the middle and
        shown whole in the tooltip.
    time_word : str
        What the time is, in the axis and the tooltip: ``"device time"``, or
        ``"host self time"`` for the host operators of a CPU-only run.

    Returns
    -------
    altair.Chart
        Bars with ``y = label`` (longest first), ``x = ms`` and ``color = category``.
        The chart data has one row per operator kept: ``label`` (shortened), ``full``,
        ``category``, ``ms`` (``value`` in ms), ``share`` (fraction of device time) and
        ``count`` (the calls on the same basis as ``ms``) when given.
    """
    require(frame, (label, value, "share", "category"), "top_operators_chart")
    data = frame.sort_values(value, ascending=False, kind="stable")
    if n is not None:
        data = data.head(n)
    full = data[label].astype(str).tolist()
    out = pd.DataFrame({"label": unique_labels(full, label_limit), "full": full,
                        "category": data["category"].astype(str).to_numpy(),
                        "ms": data[value].astype(float).to_numpy() / 1000.0,
                        "share": data["share"].astype(float).to_numpy()})
    # the calls on the basis of the bars: per rank and step, or summed over them
    per_step = value != "total_us"
    calls = "calls_per_step" if per_step else "count"
    if calls in data.columns:
        out["count"] = data[calls].astype("float64").to_numpy()
    if value_title is None:
        value_title = (f"{time_word}, summed over ranks and steps (ms)" if not per_step
                       else f"{time_word} per rank and step (ms)")
    tips = [alt.Tooltip("full:N", title=label), alt.Tooltip("category:N"),
            alt.Tooltip("ms:Q", format=",.3f", title=value_title),
            alt.Tooltip("share:Q", format=".1%", title=f"share of {time_word}")]
    if "count" in out.columns:
        tips.append(alt.Tooltip("count:Q", format=",.3~r" if per_step else ",.0f",
                                title="calls per rank and step" if per_step else
                                "calls, summed over ranks and steps"))
    chart = alt.Chart(out).mark_bar().encode(
        y=alt.Y("label:N", sort=list(out["label"]), title=None,
                axis=alt.Axis(labelLimit=0)),
        x=alt.X("ms:Q", title=value_title),
        color=alt.Color("category:N", title="category"),
        tooltip=tips,
    ).properties(width=width, height=max(60, 18 * len(out)))
    if select:
        pick = selection_param(["full"])
        chart = chart.add_params(pick).encode(
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.35)))
    if title:
        chart = chart.properties(title=title)
    return chart


#: Tick labels of a log axis in TFLOP/s, with the SI prefix that keeps them readable:
#: ``"100 T"``, ``"10 G"``, ``"100 M"`` (never ``0.0000001``); powers of ten only (the
#: ticks between are drawn, unlabelled, where labels would crowd).
TFLOPS_LABELS = (
    "abs(log(datum.value) / LN10 - round(log(datum.value) / LN10)) > 1e-6 ? '' : "
    "datum.value >= 1 ? format(datum.value, ',~r') + ' T' : "
    "datum.value >= 1e-3 ? format(datum.value * 1e3, ',~r') + ' G' : "
    "datum.value >= 1e-6 ? format(datum.value * 1e6, ',~r') + ' M' : "
    "format(datum.value * 1e9, ',~r') + ' k'")
#: Tick labels of a log axis of FLOP per byte: a value under 0.01 as a fraction
#: (``"1/1,000"``, never ``0.001``'s smaller neighbours written out).
INTENSITY_LABELS = ("abs(log(datum.value) / LN10 - round(log(datum.value) / LN10)) > 1e-6 "
                    "? '' : datum.value >= 0.01 ? format(datum.value, ',~r') : "
                    "'1/' + format(round(1 / datum.value), ',')")


def roofline_chart(frame: pd.DataFrame, peak_tflops: float | None = None,
                   bandwidth_gbps: float | None = None, n: int | None = 200,
                   title: str | None = None, width: int = 420, height: int = 300
                   ) -> alt.LayerChart | alt.Chart:
    """Roofline: achieved TFLOP/s against arithmetic intensity, log-log, one point per group.

    Parameters
    ----------
    frame : pandas.DataFrame
        :func:`perfkit.analysis.operator_efficiency` output (columns ``key``, ``kind``,
        ``intensity``, ``achieved_tflops``, ``total_us``; ``input_shapes``, ``bound``,
        ``efficiency`` and ``peak_tflops`` when present).
    peak_tflops, bandwidth_gbps : float, optional
        The roof: ``min(peak, intensity × bandwidth)``. Default: the frame's most common
        ``peak_tflops`` and no bandwidth (no roof drawn without both).
    n : int, optional
        Keep the ``n`` groups with the most time (groups without FLOPs cannot be placed
        on a log scale and are left out).
    title : str, optional
    width, height : int
        Size in pixels.

    Returns
    -------
    altair.Chart or altair.LayerChart
        Points (``x = intensity``, ``y = achieved_tflops``, ``size`` the time per rank
        and step, ``per_step_us``, as the Operators tab's tables give it, or ``total_us``
        summed over ranks and steps where the frame has no per-step time, said in the
        legend and tooltip; ``color = kind``) with the roof's two segments when known;
        with no point, the reason in words (:func:`~perfkit.charts.base.nothing_to_draw`,
        the frame's note).
    """
    require(frame, ("key", "kind", "intensity", "achieved_tflops", "total_us"),
             "roofline_chart")
    data = frame[(frame["intensity"] > 0) & (frame["achieved_tflops"] > 0)]
    data = data.sort_values("total_us", ascending=False)
    if n is not None:
        data = data.head(n)
    if data.empty:  # no axes without points: say why (no input shapes, no FLOPs counted)
        return nothing_to_draw(frame, "operator with FLOPs and bytes", width, height, title)
    # time on the basis of the tab's tables: per rank and step where the frame has it
    per_step = "per_step_us" in data.columns and bool(data["per_step_us"].notna().all())
    basis = "per rank and step" if per_step else "summed over ranks and steps"
    keep = [c for c in ("key", "kind", "input_shapes", "intensity", "achieved_tflops",
                        "total_us", "per_step_us", "bound", "efficiency") if c in data.columns]
    data = data.loc[:, keep].reset_index(drop=True)
    data = data.assign(total_ms=data["per_step_us" if per_step else "total_us"] / 1e3)
    data["kind"] = data["kind"].astype(TEXT).fillna("other")
    tips = [alt.Tooltip("key:N", title="operator"), alt.Tooltip("kind:N")]
    if "input_shapes" in data.columns:
        tips.append(alt.Tooltip("input_shapes:N", title="input shapes"))
    tips += [alt.Tooltip("intensity:Q", format=",.2f", title="intensity (FLOP/byte)"),
             alt.Tooltip("achieved_tflops:Q", format=",.2f", title="achieved (TFLOP/s)"),
             alt.Tooltip("total_ms:Q", format=",.3~r", title=f"device time, {basis} (ms)")]
    if "efficiency" in data.columns:
        tips.append(alt.Tooltip("efficiency:Q", format=".1%", title="of the roofline"))
    if "bound" in data.columns:
        tips.append(alt.Tooltip("bound:N"))
    points = alt.Chart(data).mark_circle(opacity=0.7).encode(
        x=alt.X("intensity:Q", scale=alt.Scale(type="log"),
                title="arithmetic intensity (FLOP / byte)",
                axis=alt.Axis(labelExpr=INTENSITY_LABELS)),
        y=alt.Y("achieved_tflops:Q", scale=alt.Scale(type="log"),
                title="achieved FLOP/s (T = 10¹², G = 10⁹, M = 10⁶, k = 10³)",
                axis=alt.Axis(labelExpr=TFLOPS_LABELS)),
        size=alt.Size("total_ms:Q", title=f"time, {basis} (ms)"),
        color=alt.Color("kind:N", title="kind"),
        tooltip=tips,
    ).properties(width=width, height=height).interactive()  # zoom and pan
    if peak_tflops is None and "peak_tflops" in frame.columns and \
            frame["peak_tflops"].notna().any():
        peak_tflops = float(frame["peak_tflops"].mode().iloc[0])
    chart: alt.Chart | alt.LayerChart = points
    if peak_tflops and bandwidth_gbps and not data.empty:
        lo = min(float(data["intensity"].min()), 0.01)
        hi = max(float(data["intensity"].max()), 1e4)
        ridge = peak_tflops * 1e12 / (bandwidth_gbps * 1e9)
        xs = [lo, ridge, hi]
        roof = pd.DataFrame({"intensity": xs,
                             "roof_tflops": [min(peak_tflops, x * bandwidth_gbps / 1e3)
                                             for x in xs]})
        line = alt.Chart(roof).mark_line(color="#555", strokeDash=[4, 3]).encode(
            x="intensity:Q", y="roof_tflops:Q")
        # whose roof it is: the operators in a dtype without a peak are under none
        dtypes = frame["peak_dtype"].dropna() if "peak_dtype" in frame.columns else []
        said = f"{dtypes.mode().iloc[0]} roof" if len(dtypes) else "roof"
        label = alt.Chart(roof.tail(1).assign(text=said)).mark_text(
            align="right", dy=-8, color="#555", fontSize=11).encode(
            x="intensity:Q", y="roof_tflops:Q", text="text:N")
        chart = alt.layer(line, points, label)
    if title:
        chart = chart.properties(title=title)
    return chart
