"""Altair chart builders, rendered offline.

Every builder takes a pandas DataFrame whose columns it documents and returns an Altair
chart; charts draw numbers, they never compute a metric. Clusters are usually air-gapped,
so :func:`chart_to_svg` renders a chart to a self-contained SVG string with vl-convert
(Vega runs inside the Python process): the SVG can go into an ``ipywidgets.HTML``, a
notebook output or a report without any script from a CDN.
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Iterable, Sequence
from typing import Any

import altair as alt
import pandas as pd

from .errors import InvalidArgumentError
from .format import BYTE_UNITS, bytes_unit, time_text
from .tables import shorten

__all__ = [
    "memory_chart", "chart_to_svg",
    "step_breakdown_chart", "top_operators_chart",
    "findings_frame", "findings_chart", "findings_html", "roofline_chart",
    "strategy_chart", "pipeline_plan_chart", "memory_timeline_chart", "slow_ranks_chart",
    "recompute_tradeoff_chart", "SVGChart", "svg", "HTMLBlock", "findings_table",
    "STEP_PARTS", "FINDING_COLUMNS", "SEVERITY_ORDER", "SELECTION", "MAX_MARKS",
    "chart_marks", "selection_param", "timeline_chart", "TIMELINE_COLORS",
]

MEMORY_COLUMNS = ("component", "GiB", "device_GiB")
GIB = 2**30

#: Name of the point selection of a chart built with ``select=True``: a click on a mark
#: selects its key (a rank, an operator, a finding); a double click clears it. In the
#: dashboard, ``altair.JupyterChart(chart).selections`` carries it back to Python, which
#: filters the table next to the chart.
SELECTION = "pick"
#: Most data rows (marks) a chart ships to the browser; builders aggregate or keep the
#: largest rows so that every chart stays under it (tests/test_chart_marks.py checks every
#: builder on every bundled profile).
MAX_MARKS = 5000


def selection_param(fields: Sequence[str], legend: bool = False) -> alt.Parameter:
    """The point selection :data:`SELECTION` on ``fields`` (click a mark; double click
    clears; with ``legend`` a click on a legend entry selects too)."""
    kwargs: dict[str, Any] = {"bind": "legend"} if legend else {}
    return alt.selection_point(name=SELECTION, fields=list(fields), on="click",
                               clear="dblclick", **kwargs)


def chart_marks(chart: alt.TopLevelMixin) -> int:
    """Data rows a chart ships to the browser (an upper bound of its marks).

    Counts the rows of every inline data set of the chart's Vega-Lite spec (top level,
    layers, facets and concatenations share the ``datasets`` of the spec).

    Parameters
    ----------
    chart : altair chart

    Returns
    -------
    int
    """
    spec = chart.to_dict()
    total = sum(len(rows) for rows in spec.get("datasets", {}).values())

    def inline(node: Any) -> int:
        if isinstance(node, dict):
            here = len(node["values"]) if isinstance(node.get("values"), list) and \
                node.get("values") and isinstance(node["values"][0], dict) else 0
            return here + sum(inline(v) for k, v in node.items() if k != "datasets")
        if isinstance(node, list):
            return sum(inline(v) for v in node)
        return 0

    return total + inline({k: v for k, v in spec.items() if k != "datasets"})


def _rank_axis(title: str = "rank") -> alt.Axis:
    """Rank ticks upright, thinned when they would overlap (hundreds of ranks)."""
    return alt.Axis(title=title, labelAngle=0, labelOverlap="greedy", labelSeparation=4)


def _unique_labels(full: Sequence[str], limit: int) -> list[str]:
    """Labels shortened to ``limit`` characters, made unique by a suffix when two collide."""
    out: list[str] = []
    seen: dict[str, int] = {}
    for text in full:
        short = shorten(text, limit)
        if short in seen:
            seen[short] += 1
            short = f"{short} ({seen[short]})"
        else:
            seen[short] = 1
        out.append(short)
    return out


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


# ----------------------------------------------------------------------------- steps

#: Parts of a step that add up to ``step_us`` (see :func:`perfkit.analysis.step_breakdown`),
#: in stacking order, with their legend labels.
STEP_PARTS: dict[str, str] = {
    "computing_us": "computing",
    "comm_not_overlapped_us": "communication (not overlapped)",
    "free_us": "free",
}
#: Colour of each step part (by column), the same in every chart.
_PART_COLORS = {"computing_us": "#4c78a8", "comm_not_overlapped_us": "#e45756",
                "comm_exposed_us": "#e45756", "free_us": "#bab0ac", "bubble_us": "#f58518"}


def step_breakdown_chart(frame: pd.DataFrame, title: str | None = None,
                         width: int | None = None, height: int = 220,
                         parts: dict[str, str] | None = None, select: bool = False,
                         max_bars: int = 96) -> alt.Chart:
    """Stacked bars of the step time per rank: computing, exposed communication, free.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per (rank, step) with columns ``rank``, ``step`` and the parts of
        ``parts`` in µs, i.e. the output of :func:`perfkit.analysis.step_breakdown`. NA
        parts are left out (never drawn as zero).
    title : str, optional
        Chart title.
    width : int, optional
        Width in pixels; by default 28 pixels per bar (at least 240, at most 900).
    height : int
        Height in pixels.
    parts : dict, optional
        Columns to stack, in order, with their legend labels (default :data:`STEP_PARTS`,
        whose sum is the step time).
    select : bool
        Add the point selection :data:`SELECTION` on ``rank`` (click a bar).
    max_bars : int
        Up to this many (rank, step) bars, each step of a rank is drawn side by side in
        the rank's group; beyond it each rank shows the mean of each part over its steps
        (``step`` is then ``"mean of n"``), so that hundreds of ranks stay readable.
        Beyond :data:`MAX_MARKS` bars and parts, only the slowest ranks are kept.

    Returns
    -------
    altair.Chart
        Bars with ``x = rank`` (ordinal, in rank order), ``xOffset = step``, ``y = ms``
        stacked by ``part``. The chart data has one row per (rank, step, part) with a
        known value: columns ``rank``, ``step``, ``part``, ``order``, ``ms`` and
        ``share`` (of the bar's total).
    """
    parts = dict(STEP_PARTS if parts is None else parts)
    _require(frame, ("rank", "step", *parts), "step_breakdown_chart")
    base = frame.loc[:, ["rank", "step", *parts]].copy()
    base["rank"] = base["rank"].astype("Int64")
    base["step"] = base["step"].astype("Int64").astype("string").fillna("NA")
    if len(base) > max_bars:
        steps = base.groupby("rank")["step"].size()
        base = base.groupby("rank", as_index=False)[list(parts)].mean()
        base["step"] = "mean of " + base["rank"].map(steps).astype(str)
    long = base.melt(id_vars=["rank", "step"], var_name="column", value_name="us")
    long = long.dropna(subset=["us"])
    long["part"] = long["column"].map(parts)
    long["order"] = long["column"].map({c: i for i, c in enumerate(parts)})
    long["ms"] = long["us"].astype(float) / 1000.0
    total = long.groupby(["rank", "step"])["ms"].transform("sum")
    long["share"] = (long["ms"] / total.where(total > 0)).astype(float)
    long["rank"] = long["rank"].astype(int)
    long["step"] = long["step"].astype(str)
    if len(long) > MAX_MARKS:  # thousands of ranks: keep the slowest ones
        per_rank = long.groupby("rank")["ms"].sum().sort_values(ascending=False)
        keep = per_rank.index[: max(1, MAX_MARKS // max(1, len(parts)))]
        long = long[long["rank"].isin(keep)]
    data = long.loc[:, ["rank", "step", "part", "order", "ms", "share"]].sort_values(
        ["rank", "step", "order"], kind="mergesort").reset_index(drop=True)
    labels = list(parts.values())
    colors = [_PART_COLORS.get(c, "#999") for c in parts]
    bars = max(1, len(base))
    if width is None:
        width = int(min(900, max(240, 28 * bars)))
    chart = alt.Chart(data).mark_bar().encode(
        x=alt.X("rank:O", axis=_rank_axis(), sort="ascending"),
        xOffset=alt.XOffset("step:N", title="step"),
        y=alt.Y("ms:Q", stack="zero", title="time per step (ms)"),
        color=alt.Color("part:N", sort=labels, title=None,
                        scale=alt.Scale(domain=labels, range=colors),
                        legend=alt.Legend(orient="bottom", direction="horizontal",
                                          labelLimit=0)),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("rank:O"), alt.Tooltip("step:N"), alt.Tooltip("part:N"),
                 alt.Tooltip("ms:Q", format=",.2f", title="time (ms)"),
                 alt.Tooltip("share:Q", format=".1%", title="share of the step")],
    ).properties(width=width, height=height)
    if select:
        pick = selection_param(["rank"])
        chart = chart.add_params(pick).encode(
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.35)))
    if title:
        chart = chart.properties(title=title)
    return chart


# ----------------------------------------------------------------------------- operators

def top_operators_chart(frame: pd.DataFrame, label: str = "key", n: int | None = 15,
                        title: str | None = None, width: int = 420,
                        value: str = "total_us", value_title: str | None = None,
                        select: bool = False, label_limit: int = 48) -> alt.Chart:
    """Horizontal bars of the operators that take the most device time.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per operator (type, name or name and shapes) with columns ``label``,
        ``value``, ``share`` and ``category``, sorted or not, i.e. the output of
        :func:`perfkit.analysis.top_operators`; ``count`` goes into the tooltip.
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

    Returns
    -------
    altair.Chart
        Bars with ``y = label`` (longest first), ``x = ms`` and ``color = category``.
        The chart data has one row per operator kept: ``label`` (shortened), ``full``,
        ``category``, ``ms`` (``value`` in ms), ``share`` (fraction of device time) and
        ``count`` when given.
    """
    _require(frame, (label, value, "share", "category"), "top_operators_chart")
    data = frame.sort_values(value, ascending=False, kind="stable")
    if n is not None:
        data = data.head(n)
    full = data[label].astype(str).tolist()
    out = pd.DataFrame({"label": _unique_labels(full, label_limit), "full": full,
                        "category": data["category"].astype(str).to_numpy(),
                        "ms": data[value].astype(float).to_numpy() / 1000.0,
                        "share": data["share"].astype(float).to_numpy()})
    if "count" in data.columns:
        out["count"] = data["count"].astype("float64").to_numpy()
    if value_title is None:
        value_title = ("device time, summed over ranks and steps (ms)" if value == "total_us"
                       else "device time per step and rank (ms)")
    tips = [alt.Tooltip("full:N", title=label), alt.Tooltip("category:N"),
            alt.Tooltip("ms:Q", format=",.3f", title=value_title),
            alt.Tooltip("share:Q", format=".1%", title="share of device time")]
    if "count" in out.columns:
        tips.append(alt.Tooltip("count:Q", format=",.0f", title="calls"))
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


# ----------------------------------------------------------------------------- findings

#: Columns of :func:`findings_frame` (the fields of :class:`perfkit.advisor.Finding`).
FINDING_COLUMNS = ("severity", "area", "title", "evidence", "recommendation", "notebook",
                   "score", "rule", "ms_per_step", "measured", "details")
#: Severities from the most to the least urgent (``warning``: risky, cost not measurable).
SEVERITY_ORDER = ("high", "medium", "low", "warning", "info")
_SEVERITY_COLORS = ["#c0392b", "#e67e22", "#f1c40f", "#8e44ad", "#95a5a6"]


def findings_frame(findings: Iterable[Any]) -> pd.DataFrame:
    """The advisor's findings as a DataFrame, in the order given (best first).

    Parameters
    ----------
    findings : iterable of perfkit.advisor.Finding
        What :func:`perfkit.advise` returned (anything with a ``to_dict()`` giving the
        fields of :data:`FINDING_COLUMNS`).

    Returns
    -------
    pandas.DataFrame
        One row per finding with the columns of :data:`FINDING_COLUMNS`; empty (with those
        columns) when there is no finding.
    """
    rows = [f.to_dict() for f in findings]
    frame = pd.DataFrame(rows, columns=list(FINDING_COLUMNS))
    return frame.astype({"ms_per_step": "float64"})


def findings_chart(frame: pd.DataFrame, n: int | None = 10, title: str | None = None,
                   width: int = 360, select: bool = False,
                   label_limit: int = 70) -> alt.Chart:
    """Bars of the milliseconds per step at stake per finding, coloured by severity.

    Findings whose cost cannot be measured (``measured`` False) have no bar to draw and
    are left out; the table (:func:`findings_html`) lists them.

    Parameters
    ----------
    frame : pandas.DataFrame
        :func:`findings_frame` output (columns ``title``, ``severity``, ``area``,
        ``score``, ``ms_per_step``), best first.
    n : int, optional
        Keep the first ``n`` findings (all when None).
    title : str, optional
        Chart title.
    width : int
        Width in pixels.
    select : bool
        Add the point selection :data:`SELECTION` on ``title`` (click a bar).
    label_limit : int
        Longest bar label (characters); the whole title is in the tooltip.

    Returns
    -------
    altair.Chart
        Bars with ``y = label`` (the shortened title, in the frame's order),
        ``x = ms_per_step`` and ``color = severity``; the chart data has one row per
        measured finding kept.
    """
    _require(frame, ("title", "severity", "area", "score"), "findings_chart")
    data = frame
    if "measured" in data.columns:
        data = data[data["measured"].astype(bool)]
    cols = ["title", "severity", "area", "score"] + \
        (["ms_per_step"] if "ms_per_step" in data.columns else [])
    data = data.loc[:, cols]
    if n is not None:
        data = data.head(n)
    data = data.reset_index(drop=True)
    data["label"] = _unique_labels(data["title"].astype(str).tolist(), label_limit)
    x = alt.X("ms_per_step:Q", title="time at stake per step (ms)") if "ms_per_step" in cols \
        else alt.X("score:Q", title="share of step time at stake", axis=alt.Axis(format="%"))
    tips = [alt.Tooltip("title:N", title="finding"), alt.Tooltip("area:N"),
            alt.Tooltip("severity:N")]
    if "ms_per_step" in cols:
        tips.append(alt.Tooltip("ms_per_step:Q", format=",.2f", title="at stake (ms per step)"))
    tips.append(alt.Tooltip("score:Q", format=".1%", title="share of the step"))
    chart = alt.Chart(data).mark_bar().encode(
        y=alt.Y("label:N", sort=list(data["label"]), title=None,
                axis=alt.Axis(labelLimit=0)),
        x=x,
        color=alt.Color("severity:N", scale=alt.Scale(domain=list(SEVERITY_ORDER),
                                                       range=_SEVERITY_COLORS)),
        tooltip=tips,
    ).properties(width=width, height=max(40, 22 * len(data)))
    if select:
        pick = selection_param(["title"])
        chart = chart.add_params(pick).encode(
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.35)))
    if title:
        chart = chart.properties(title=title)
    return chart


def findings_html(frame: pd.DataFrame, n: int | None = 10,
                  columns: Sequence[str] = ("severity", "ms per step", "title", "evidence",
                                            "recommendation", "details")) -> str:
    """The findings as an HTML table (text escaped), for notebooks, widgets and reports.

    Parameters
    ----------
    frame : pandas.DataFrame
        :func:`findings_frame` output, best first.
    n : int, optional
        Keep the first ``n`` findings (all when None).
    columns : sequence of str
        Columns to show, in order; ``"ms per step"`` is the time at stake written for
        people (``12.3 ms (4.5 %)``, or "not measurable").

    Returns
    -------
    str
        ``<table class="perfkit-findings">`` with one row per finding, or a paragraph
        saying that nothing abnormal was found.
    """
    frame = frame.copy()
    if "ms per step" in columns:
        if "ms_per_step" in frame.columns:
            frame["ms per step"] = [_at_stake(ms, sc) for ms, sc in
                                    zip(frame["ms_per_step"], frame["score"], strict=True)]
        else:
            frame["ms per step"] = [f"{100 * sc:.1f} % of the step" for sc in frame["score"]]
    _require(frame, tuple(columns), "findings_html")
    data = frame if n is None else frame.head(n)
    if data.empty:
        return '<p class="perfkit-findings">No finding: nothing abnormal was detected.</p>'
    head = "".join(f"<th style='text-align:left;vertical-align:bottom'>"
                   f"{html.escape(_FINDING_HEADERS.get(c, c))}</th>" for c in columns)
    body = []
    for _, row in data.iterrows():
        cells = "".join(
            f"<td style='text-align:left;vertical-align:top;"
            f"{_FINDING_CELL.get(c, 'white-space:normal;min-width:12em;max-width:32em')}'>"
            f"{html.escape(str(row[c]))}</td>" for c in columns)
        body.append(f"<tr>{cells}</tr>")
    return (f'<table class="perfkit-findings"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


_FINDING_HEADERS = {"ms per step": "at stake per step", "title": "what was seen",
                    "recommendation": "what to change"}
_FINDING_CELL = {"severity": "white-space:nowrap", "ms per step": "white-space:nowrap",
                 "area": "white-space:nowrap", "notebook": "white-space:nowrap",
                 "title": "white-space:normal;min-width:14em;max-width:24em",
                 "details": "white-space:normal;min-width:10em;max-width:22em;color:#555;"
                            "font-size:11px"}


def _at_stake(ms: float, share: float) -> str:
    """``12.3 ms (4.5 %)`` with 3 significant digits, or "not measurable"."""
    try:
        ms, share = float(ms), float(share)
    except (TypeError, ValueError):
        return str(ms)
    if ms != ms:
        return "not measurable"
    return f"{time_text(ms * 1e3, unit='ms')} ({100 * share:.1f} %)"


# ----------------------------------------------------------------------------- roofline

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
        Points (``x = intensity``, ``y = achieved_tflops``, ``size = total_us``,
        ``color = kind``) with the roof's two segments when known.
    """
    _require(frame, ("key", "kind", "intensity", "achieved_tflops", "total_us"),
             "roofline_chart")
    data = frame[(frame["intensity"] > 0) & (frame["achieved_tflops"] > 0)]
    data = data.sort_values("total_us", ascending=False)
    if n is not None:
        data = data.head(n)
    keep = [c for c in ("key", "kind", "input_shapes", "intensity", "achieved_tflops",
                        "total_us", "bound", "efficiency") if c in data.columns]
    data = data.loc[:, keep].reset_index(drop=True).assign(
        total_ms=lambda d: d["total_us"] / 1e3)
    data["kind"] = data["kind"].astype("string").fillna("other")
    tips = [alt.Tooltip("key:N", title="operator"), alt.Tooltip("kind:N")]
    if "input_shapes" in data.columns:
        tips.append(alt.Tooltip("input_shapes:N", title="input shapes"))
    tips += [alt.Tooltip("intensity:Q", format=",.2f", title="intensity (FLOP/byte)"),
             alt.Tooltip("achieved_tflops:Q", format=",.2f", title="achieved (TFLOP/s)"),
             alt.Tooltip("total_ms:Q", format=",.2f",
                         title="device time, summed over ranks and steps (ms)")]
    if "efficiency" in data.columns:
        tips.append(alt.Tooltip("efficiency:Q", format=".1%", title="of the roofline"))
    if "bound" in data.columns:
        tips.append(alt.Tooltip("bound:N"))
    points = alt.Chart(data).mark_circle(opacity=0.7).encode(
        x=alt.X("intensity:Q", scale=alt.Scale(type="log"),
                title="arithmetic intensity (FLOP / byte)", axis=alt.Axis(format=",~r")),
        y=alt.Y("achieved_tflops:Q", scale=alt.Scale(type="log"), title="achieved TFLOP/s",
                axis=alt.Axis(format=",~r")),
        size=alt.Size("total_ms:Q", title="time (ms)"),
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
        chart = alt.layer(line, points)
    if title:
        chart = chart.properties(title=title)
    return chart


# ----------------------------------------------------------------------------- planning

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
    _require(frame, ("step_s", "memory_bytes", "fits", "memory_limit_bytes"),
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
    _require(frame, ("stage", "chunk", "recompute", "layers"), "pipeline_plan_chart")
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


# ----------------------------------------------------------------------------- display

class SVGChart:
    """A chart rendered to SVG that notebooks display inline (no JavaScript, no CDN).

    Attributes
    ----------
    svg : str
        The ``<svg>`` markup from :func:`chart_to_svg`.
    """

    def __init__(self, svg: str) -> None:
        self.svg = svg

    def _repr_svg_(self) -> str:
        return self.svg

    def _repr_html_(self) -> str:
        return f'<div class="perfkit-chart">{self.svg}</div>'


def svg(chart: alt.TopLevelMixin) -> SVGChart:
    """Render ``chart`` offline for display as a notebook cell's result.

    Parameters
    ----------
    chart : altair chart
        Any top-level Altair chart (e.g. from :func:`step_breakdown_chart`).

    Returns
    -------
    SVGChart
        Shown as inline SVG by Jupyter, Voila and ``nbconvert``.
    """
    return SVGChart(chart_to_svg(chart))


class HTMLBlock:
    """Markup that notebooks display as HTML (e.g. :func:`findings_table`).

    Attributes
    ----------
    html : str
    """

    def __init__(self, markup: str) -> None:
        self.html = markup

    def _repr_html_(self) -> str:
        return self.html


def findings_table(frame: pd.DataFrame, n: int | None = 10) -> HTMLBlock:
    """:func:`findings_html` wrapped for display as a notebook cell's result.

    Parameters
    ----------
    frame : pandas.DataFrame
        :func:`findings_frame` output, best first.
    n : int, optional
        Keep the first ``n`` findings (all when None).

    Returns
    -------
    HTMLBlock
    """
    return HTMLBlock(findings_html(frame, n=n))


# ----------------------------------------------------------------------------- memory, cluster

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
        value.
    """
    if "series" in frame.columns:
        _require(frame, ("series", "ts_us", value), "memory_timeline_chart")
        data = frame.dropna(subset=[value])
        names = data["series"].astype(str)
    else:
        _require(frame, ("rank", "component", "ts_us", value), "memory_timeline_chart")
        data = frame.dropna(subset=[value])
        names = ("rank " + data["rank"].astype("Int64").astype(str) + " "
                 + data["component"].astype(str))
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
        x=alt.X("ms:Q", title="time since the profile's start (ms)"),
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


#: Readable names of the metrics of :func:`perfkit.analysis.slow_ranks`.
_METRIC_LABELS = {"free_us": "free time (device idle)", "preparing_us": "preparing (host)",
                  "computing_us": "computing", "comm_not_overlapped_us":
                  "exposed communication", "bubble_us": "pipeline bubble",
                  "stage_us": "stage time", "step_us": "step time"}


def slow_ranks_chart(frame: pd.DataFrame, title: str | None = None,
                     width: int | None = None, height: int = 150,
                     select: bool = False) -> alt.FacetChart:
    """Excess of each rank over its peers, one panel per check (the seed's order).

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per (rank, metric) with columns ``rank``, ``metric``, ``check_order``,
        ``excess_pct`` (percent above the peers' median) and ``slow`` (bool):
        :func:`perfkit.analysis.slow_ranks`; ``value_us`` and ``phase`` go into the
        tooltip when present.
    title : str, optional
        Chart title.
    width : int, optional
        Width of one panel in pixels (default: 14 pixels per rank, at least 150).
    height : int
        Height of one panel in pixels.
    select : bool
        Add the point selection :data:`SELECTION` on ``rank`` (click a bar).

    Returns
    -------
    altair.FacetChart
        Bars with ``x = rank`` (ordinal, in rank order), ``y = excess_pct``,
        ``color = slow``, faceted by ``metric`` (named in words: ``"free time (device
        idle)"`` for ``free_us``) in ``check_order``; the data has one row per input row
        (beyond :data:`MAX_MARKS` rows, the ranks furthest from their peers).
    """
    _require(frame, ("rank", "metric", "check_order", "excess_pct", "slow"),
             "slow_ranks_chart")
    data = pd.DataFrame({
        "rank": frame["rank"].astype("Int64").astype(int).to_numpy(),
        "metric": frame["metric"].astype(str).to_numpy(),
        "check_order": frame["check_order"].astype(float).to_numpy(),
        "excess_pct": frame["excess_pct"].astype(float).to_numpy(),
        "slow": frame["slow"].fillna(False).astype(bool).map(
            {True: "slow", False: "normal"}).to_numpy()})
    if len(data) > MAX_MARKS:  # thousands of ranks: keep those furthest from their peers
        worst = data.assign(_a=data["excess_pct"].abs()).groupby("rank")["_a"].max()
        per_metric = max(1, data["metric"].nunique())
        keep = worst.sort_values(ascending=False).index[: max(1, MAX_MARKS // per_metric)]
        mask = data["rank"].isin(keep).to_numpy()
        data, frame = data[mask].reset_index(drop=True), frame[mask].reset_index(drop=True)
    tips = [alt.Tooltip("rank:O"), alt.Tooltip("metric:N")]
    if "phase" in frame.columns:
        data["phase"] = frame["phase"].astype(str).to_numpy()
        tips.append(alt.Tooltip("phase:N", title="what it measures"))
    if "value_us" in frame.columns:
        data["value_ms"] = frame["value_us"].astype(float).to_numpy() / 1e3
        tips.append(alt.Tooltip("value_ms:Q", format=",.2f", title="time (ms)"))
    tips += [alt.Tooltip("excess_pct:Q", format=",.1f", title="above the peers' median (%)"),
             alt.Tooltip("slow:N")]
    data["metric"] = data["metric"].map(lambda m: _METRIC_LABELS.get(
        m, m.removesuffix("_us").replace("_", " ")))
    metrics = list(data.sort_values("check_order", kind="stable")["metric"].unique())
    ranks = data["rank"].nunique()
    if width is None:
        width = max(120, min(260, 12 * ranks))
    inner = alt.Chart(data).mark_bar().encode(
        x=alt.X("rank:O", sort="ascending", axis=_rank_axis()),
        y=alt.Y("excess_pct:Q", title="above peers' median (%)"),
        color=alt.Color("slow:N", title=None,
                        scale=alt.Scale(domain=["normal", "slow"],
                                        range=["#95a5a6", "#c0392b"])),
        tooltip=tips,
    ).properties(width=width, height=height)
    if select:
        pick = selection_param(["rank"])
        inner = inner.add_params(pick).encode(
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.35)))
    chart = inner.facet(column=alt.Column("metric:N", sort=metrics, title=None,
                                          header=alt.Header(labelLimit=0)))
    if title:
        chart = chart.properties(title=title)
    return chart


def recompute_tradeoff_chart(frame: pd.DataFrame, memory_limit_GiB: float | None = None,
                             title: str | None = None, width: int = 360,
                             height: int = 220) -> alt.LayerChart:
    """Memory against step time, one labelled point per recompute mode.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per mode with columns ``recompute``, ``memory_GiB`` and ``step_s``:
        :func:`perfkit.widgets.recompute_tradeoff`.
    memory_limit_GiB : float, optional
        Device memory, drawn as a dashed rule.
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
    _require(frame, ("recompute", "memory_GiB", "step_s"), "recompute_tradeoff_chart")
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


# ----------------------------------------------------------------------------- timeline

#: Colour of each event category on the timeline (device task categories, host
#: operators, free time, and blocks that mix categories).
TIMELINE_COLORS: dict[str, str] = {
    "compute": "#4c78a8", "communication": "#e45756", "memory": "#72b7b2",
    "other": "#9d755d", "host": "#54a24b", "mixed": "#b279a2", "free": "#d9d9d9",
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
                   row_height: int = 22, labels: bool = True, zoom: bool = True
                   ) -> alt.LayerChart:
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

    Returns
    -------
    altair.LayerChart
        ``x`` = ms from the window origin, ``y`` = track in ``track_order``, colour =
        category (:data:`TIMELINE_COLORS`); one rect per row of ``frame`` (the data are
        inline, so the event cap of the analysis, not Altair's row limit, bounds them).
        The tooltip gives the full name, track, category, start and duration in the unit
        that fits, and for a merged block the number of events and the span they cover.
    """
    _require(frame, _TIMELINE_NEEDS, "timeline_chart")
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
    chart = alt.layer(*layers).properties(
        width=width, height=max(row_height * len(tracks), row_height))
    if title:
        chart = chart.properties(title=title)
    return chart


# ----------------------------------------------------------------------------- journal

__all__ += ["journal_progress_chart", "journal_breakdown_chart", "journal_operators_chart"]

_JOURNAL_PARTS = {"computing_us": "computing",
                  "comm_not_overlapped_us": "communication (not overlapped)",
                  "free_us": "free", "bubble_us": "bubble"}


def journal_progress_chart(frame: pd.DataFrame, title: str | None = None, width: int = 460,
                           height: int = 150) -> alt.VConcatChart:
    """The progression of a tuning journal: tokens/s per device and MFU over the runs.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per run, in the order to draw, with columns ``label`` (the x axis, kept
        in row order), ``tokens_per_s_per_device`` and ``mfu`` (a fraction; NaN where
        the journal has none — not computed, or flagged by a guard — and the point is
        left out): :meth:`perfkit.Journal.runs`.
    title : str, optional
        Chart title.
    width, height : int
        Size of each of the two panels in pixels.

    Returns
    -------
    altair.VConcatChart
        Throughput above, MFU below, lines with labelled points; the runs share the x
        axis.
    """
    _require(frame, ("label", "tokens_per_s_per_device", "mfu"), "journal_progress_chart")
    labels = [str(x) for x in frame["label"]]
    data = pd.DataFrame({"label": labels,
                         "tokens": pd.to_numeric(frame["tokens_per_s_per_device"],
                                                 errors="coerce").to_numpy(float),
                         "mfu": pd.to_numeric(frame["mfu"], errors="coerce").to_numpy(float)})
    x = alt.X("label:N", sort=labels, title="run",
              axis=alt.Axis(labelAngle=0, labelLimit=140))

    def panel(field: str, title_y: str, fmt: str, color: str) -> alt.LayerChart:
        part = data.dropna(subset=[field])
        base = alt.Chart(part).encode(
            x=x, y=alt.Y(f"{field}:Q", title=title_y, axis=alt.Axis(format=fmt),
                         scale=alt.Scale(zero=False)),
            tooltip=[alt.Tooltip("label:N", title="run"),
                     alt.Tooltip(f"{field}:Q", format=fmt, title=title_y)])
        return alt.layer(
            base.mark_line(color=color), base.mark_point(filled=True, size=70, color=color),
            base.mark_text(dy=-10, fontSize=11).encode(text=alt.Text(f"{field}:Q",
                                                                     format=fmt)),
        ).properties(width=width, height=height)

    chart = alt.vconcat(panel("tokens", "tokens/s per device", ",.0f", "#2e86c1"),
                        panel("mfu", "MFU", ".1%", "#e67e22"))
    if title:
        chart = chart.properties(title=title)
    return chart


def journal_breakdown_chart(frame: pd.DataFrame, base_label: str, new_label: str,
                            title: str | None = None, width: int = 380) -> alt.Chart:
    """Where the step time went in two runs: the median step's parts side by side.

    Parameters
    ----------
    frame : pandas.DataFrame
        ``RunComparison.breakdown``: columns ``part`` (``computing_us``,
        ``comm_not_overlapped_us``, ``free_us``, ``bubble_us``, ...), ``base_us`` and
        ``new_us``. Parts other than computing, exposed communication, free and bubble
        are not drawn (the first three add up to the step; the bubble is inside them).
    base_label, new_label : str
        Names of the two runs.
    title : str, optional
    width : int

    Returns
    -------
    altair.Chart
        Horizontal bars in milliseconds, one pair (base, new) per part.
    """
    _require(frame, ("part", "base_us", "new_us"), "journal_breakdown_chart")
    rows = []
    for r in frame.itertuples(index=False):
        if r.part not in _JOURNAL_PARTS:
            continue
        for run, us in ((base_label, r.base_us), (new_label, r.new_us)):
            rows.append({"part": _JOURNAL_PARTS[r.part], "run": str(run),
                         "ms": float(us) / 1e3 if pd.notna(us) else None})
    data = pd.DataFrame(rows, columns=["part", "run", "ms"])
    chart = alt.Chart(data).mark_bar().encode(
        y=alt.Y("run:N", sort=[str(base_label), str(new_label)], title=None),
        x=alt.X("ms:Q", title="ms per step (median over ranks and steps)"),
        color=alt.Color("run:N", sort=[str(base_label), str(new_label)], title=None,
                        scale=alt.Scale(range=["#95a5a6", "#2e86c1"])),
        row=alt.Row("part:N", sort=list(_JOURNAL_PARTS.values()), title=None,
                    header=alt.Header(labelAngle=0, labelAlign="left")),
        tooltip=[alt.Tooltip("part:N"), alt.Tooltip("run:N"),
                 alt.Tooltip("ms:Q", format=",.2f")],
    ).properties(width=width, height=36)
    if title:
        chart = chart.properties(title=title)
    return chart


def journal_operators_chart(frame: pd.DataFrame, n: int | None = 10,
                            title: str | None = None, width: int = 380) -> alt.Chart:
    """The operators that moved most between two runs: time change per step.

    Parameters
    ----------
    frame : pandas.DataFrame
        ``RunComparison.operators`` (:data:`perfkit.analysis.compare.COMPARE_COLUMNS`):
        ``key`` and ``delta_us`` (new − base), sorted by ``|delta_us|``; rows without a
        delta (a name one run's table did not keep) are left out.
    n : int, optional
        Rows drawn (the first ``n``).
    title : str, optional
    width : int

    Returns
    -------
    altair.Chart
        Horizontal bars in milliseconds: red where the new run spends more time, green
        where it spends less.
    """
    _require(frame, ("key", "delta_us"), "journal_operators_chart")
    part = frame.dropna(subset=["delta_us"])
    part = part.head(n) if n is not None else part
    data = pd.DataFrame({"key": part["key"].astype(str).to_numpy(),
                         "delta_ms": part["delta_us"].astype(float).to_numpy() / 1e3})
    data["direction"] = ["more time" if v > 0 else "less time" for v in data["delta_ms"]]
    chart = alt.Chart(data).mark_bar().encode(
        y=alt.Y("key:N", sort=list(data["key"]), title=None),
        x=alt.X("delta_ms:Q", title="change in ms per rank and step"),
        color=alt.Color("direction:N", title=None,
                        scale=alt.Scale(domain=["less time", "more time"],
                                        range=["#27ae60", "#c0392b"])),
        tooltip=[alt.Tooltip("key:N", title="operators"),
                 alt.Tooltip("delta_ms:Q", format="+,.2f", title="change (ms)")],
    ).properties(width=width, height=max(60, 18 * len(data)))
    if title:
        chart = chart.properties(title=title)
    return chart
