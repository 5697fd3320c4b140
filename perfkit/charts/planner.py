"""Planner tab: measured against predicted, candidate strategies and the pipeline stages'
layer plan."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from ..format import counted
from .base import GIB, memory_limit_rule, require

__all__ = ["strategy_chart", "STRATEGY_POINTS", "prediction_chart", "pipeline_plan_chart",
           "PROFILED_LABEL", "FITS_TITLE", "step_domain", "BAND_REACH"]

_STRATEGY_TOOLTIP = {"dp": "dp", "tp": "tp", "pp": "pp", "vpp": "vpp",
                     "micro_batch_size": "micro-batch", "num_micro_batches": "micro-batches",
                     "optimizer_shard": "optimizer shard", "recompute": "recompute",
                     "rank": "rank"}
"""The candidates' fields the strategy chart's tooltip shows, with the words it shows."""


#: How many candidates :func:`strategy_chart` draws by default, the fastest.
STRATEGY_POINTS = 400


def strategy_chart(frame: pd.DataFrame, n: int | None = STRATEGY_POINTS,
                   title: str | None = None,
                   width: int = 420, height: int = 260,
                   step_title: str = "estimated step time (s)",
                   profiled: Mapping[str, float] | None = None) -> alt.LayerChart:
    """Scatter of candidate strategies: step time against memory per device, by ``fits``.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per candidate with columns ``step_s``, ``memory_bytes``, ``fits`` and
        ``memory_limit_bytes`` (the output of :func:`perfkit.plan.search`, with
        ``include_rejected=True`` to see what does not fit). The columns ``dp``, ``tp``,
        ``pp``, ``vpp``, ``micro_batch_size``, ``num_micro_batches``, ``recompute`` and
        ``rank`` go into the tooltip when present; with ``low_s`` and ``high_s`` (a
        calibrated search: the band of :func:`perfkit.plan.predict`) each point whose
        band fits on the step axis (:func:`step_domain`) gets a vertical bar over it; the
        others' bands are in their tooltips, and a subtitle counts them.
    n : int, optional
        Keep the first ``n`` rows in ascending ``step_s`` (all when None; default
        :data:`STRATEGY_POINTS`); searches can return thousands of candidates and the fast
        ones are the interesting ones. A title should say so.
    title : str, optional
        Chart title.
    width, height : int
        Size in pixels.
    step_title : str
        The step axis's title (say whether the step is calibrated).
    profiled : mapping, optional
        The profiled layout as predicted: ``step_s`` and ``memory_bytes`` (``low_s`` and
        ``high_s`` too when calibrated), e.g. the ``profiled`` row of
        :func:`perfkit.widgets.prediction.best_layouts`. Drawn as a black diamond over the
        candidates, in the legend and tooltip as "the profiled layout", whether or not
        the search holds it (another device count or batch does not).

    Returns
    -------
    altair.LayerChart
        Points with ``x = memory_GiB``, ``y = step_s``, ``color = fits``, plus a dashed
        rule at the memory limit (and the band's bars, under the points; and the
        profiled layout's diamond, on top). The point layer's data has one row per
        candidate kept.
    """
    require(frame, ("step_s", "memory_bytes", "fits", "memory_limit_bytes"),
             "strategy_chart")
    data = frame.sort_values("step_s", kind="stable")
    if n is not None:
        data = data.head(n)
    extra = [c for c in _STRATEGY_TOOLTIP if c in data.columns]
    band = [c for c in ("low_s", "high_s") if c in data.columns]
    if len(band) == 2 and data["low_s"].notna().any():
        extra += band
    points = data.loc[:, ["step_s", "fits", *extra]].reset_index(drop=True)
    points["memory_GiB"] = data["memory_bytes"].astype(float).to_numpy() / GIB
    points["fits"] = points["fits"].map({True: "fits", False: "does not fit"})
    if "recompute" in points.columns:
        points["recompute"] = points["recompute"].astype(str)
    limit = pd.DataFrame({"limit_GiB": [float(frame["memory_limit_bytes"].max()) / GIB]})
    domain = step_domain(points, profiled)
    dots = alt.Chart(points).mark_point(filled=True, size=40, opacity=0.7).encode(
        x=alt.X("memory_GiB:Q", title="memory per device (GiB)"),
        y=alt.Y("step_s:Q", title=step_title, scale=alt.Scale(zero=False, domain=domain)),
        color=_fits_color(),
        tooltip=[alt.Tooltip("step_s:Q", format=",.3f", title="step (s)"),
                 alt.Tooltip("memory_GiB:Q", format=",.2f", title="memory per device (GiB)"),
                 *[alt.Tooltip(c, format=",.3f", title=f"band {c[:-2]} (s)")
                   if c in ("low_s", "high_s") else alt.Tooltip(c, title=_STRATEGY_TOOLTIP[c])
                   for c in extra]],
    ).interactive()  # zoom and pan
    layers = [dots, *memory_limit_rule(float(limit["limit_GiB"].iloc[0]))]
    beyond = 0
    if "low_s" in points.columns:
        lo, hi = domain if isinstance(domain, list) else (-np.inf, np.inf)
        inside = (points["low_s"] >= lo) & (points["high_s"] <= hi)
        beyond = int((~inside & points["low_s"].notna()).sum())
        if inside.any():
            bars = alt.Chart(points[inside]).mark_rule(opacity=0.25).encode(
                x="memory_GiB:Q", y="low_s:Q", y2="high_s:Q",
                color=_fits_color())
            layers.insert(0, bars)
    if profiled is not None:
        layers.append(_profiled_mark(profiled))
    chart = alt.layer(*layers).properties(width=width, height=height)
    if title or beyond:
        every = beyond == len(points)
        note = alt.Undefined if not beyond else (
            "every band reaches beyond the axis (no bar; see the tooltips): the points' "
            "order is within the model's uncertainty") if every else (
            f"{counted(beyond, 'band')} reaching beyond the axis: no bar, see the tooltip")
        chart = chart.properties(title=alt.TitleParams(text=title or "", subtitle=note))
    return chart


#: How far beyond the points' step range a band end may take the strategy chart's axis:
#: the larger of that range's width and this share of the fastest step.
BAND_REACH = 0.3


def step_domain(points: pd.DataFrame,
                profiled: Mapping[str, float] | None = None) -> list[float] | Any:
    """The strategy chart's step axis: every point, and the band ends near them.

    The axis spans the candidates' ``step_s`` (and the profiled layout's), widened to hold
    each band end (``low_s``, ``high_s``) that lies within the larger of that span and
    :data:`BAND_REACH` of the fastest step beyond it, plus 5 % on each side: the points
    keep a third of the axis or more, or their band ends stay within 30 % of them. A band
    that reaches 0 or ten times the step (a calibration far from the edited job) would
    otherwise stretch the axis until the points lie on one line; such a band gets no bar
    (:func:`strategy_chart`). Without any step, the axis is left to Vega-Lite
    (``alt.Undefined``).
    """
    steps = [float(v) for v in points["step_s"].dropna()]
    if profiled is not None and profiled.get("step_s") is not None:
        steps.append(float(profiled["step_s"]))
    if not steps:
        return alt.Undefined
    lo, hi = min(steps), max(steps)
    reach = max(hi - lo, BAND_REACH * abs(lo), 1e-9)
    ends = [float(v) for col in ("low_s", "high_s") if col in points.columns
            for v in points[col].dropna()]
    near = [v for v in ends if lo - reach <= v <= hi + reach]
    lo, hi = min([lo, *near]), max([hi, *near])
    pad = 0.05 * (hi - lo) if hi > lo else 0.05 * max(abs(hi), 1e-9)
    return [max(lo - pad, 0.0), hi + pad]


#: The strategy chart's legend title over "fits" and "does not fit".
FITS_TITLE = "in device memory"


def _fits_color() -> alt.Color:
    """The colour by ``fits``, the same in every layer of the strategy chart.

    Vega-Lite merges the layers' legends of one scale into one, and an explicit
    ``legend=None`` in any layer drops the merged legend: every layer gets the same
    legend, which then shows once.
    """
    return alt.Color("fits:N", title=FITS_TITLE,
                     scale=alt.Scale(domain=["fits", "does not fit"],
                                     range=["#2e86c1", "#c0392b"]),
                     legend=alt.Legend(symbolOpacity=0.9))


#: The profiled layout's label in the strategy chart's legend and tooltip.
PROFILED_LABEL = "the profiled layout"


def _profiled_mark(profiled: Mapping[str, float]) -> alt.Chart:
    """The profiled layout's point: a black diamond with its own legend entry."""
    row = {"layout": PROFILED_LABEL, "step_s": float(profiled["step_s"]),
           "memory_GiB": float(profiled["memory_bytes"]) / GIB}
    tooltip = [alt.Tooltip("layout:N", title="layout"),
               alt.Tooltip("step_s:Q", format=",.3f", title="step (s)"),
               alt.Tooltip("memory_GiB:Q", format=",.2f", title="memory per device (GiB)")]
    band = [profiled.get("low_s"), profiled.get("high_s")]
    if all(v is not None and not pd.isna(v) for v in band):
        row["low_s"], row["high_s"] = (float(v) for v in band)
        tooltip += [alt.Tooltip(c, format=",.3f", title=f"band {c[:-2]} (s)")
                    for c in ("low_s", "high_s")]
    return alt.Chart(pd.DataFrame([row])).mark_point(
        filled=True, size=170, color="black", opacity=1.0).encode(
        x="memory_GiB:Q", y="step_s:Q",
        shape=alt.Shape("layout:N", title=None,
                        scale=alt.Scale(domain=[PROFILED_LABEL], range=["diamond"])),
        tooltip=tooltip)


_PART_COLORS = ("#2e86c1", "#e67e22", "#95a5a6", "#7f8c8d")


def prediction_chart(frame: pd.DataFrame, title: str | None = None, width: int = 520,
                     height: int = 90) -> alt.LayerChart:
    """The profiled layout's step, measured against predicted: two stacked bars and the band.

    Parameters
    ----------
    frame : pandas.DataFrame
        :func:`perfkit.widgets.prediction.measured_against_predicted`: columns ``run``
        (``"measured"``, ``"predicted"``), ``part``, ``seconds``, ``step_s``, ``low_s``
        and ``high_s`` (on the predicted rows).
    title : str, optional
    width, height : int
        Size in pixels.

    Returns
    -------
    altair.LayerChart
        Bars ``x = seconds`` stacked by ``part``, ``y = run``; a black bar with end ticks
        over the band ``low_s`` – ``high_s`` on the predicted row; a dashed rule at the
        measured step across both. The bar layer's data is ``frame`` row for row.
    """
    require(frame, ("run", "part", "seconds", "step_s", "low_s", "high_s"),
            "prediction_chart")
    data = frame.loc[:, ["run", "part", "seconds", "step_s"]].reset_index(drop=True)
    data["order"] = data.groupby("run").cumcount()
    parts = list(dict.fromkeys(data["part"]))
    runs = ["measured", "predicted"]
    y = alt.Y("run:N", sort=runs, title=None)
    bars = alt.Chart(data).mark_bar(height=22).encode(
        x=alt.X("seconds:Q", title="seconds per step", stack="zero"),
        y=y, order=alt.Order("order:Q"),
        color=alt.Color("part:N", title=None, sort=parts,
                        scale=alt.Scale(domain=parts, range=list(_PART_COLORS[:len(parts)])),
                        legend=alt.Legend(orient="bottom", labelLimit=320)),
        tooltip=[alt.Tooltip("run:N"), alt.Tooltip("part:N"),
                 alt.Tooltip("seconds:Q", format=",.3f", title="seconds"),
                 alt.Tooltip("step_s:Q", format=",.3f", title="step (s)")])
    layers: list[alt.Chart] = [bars]
    band = frame.dropna(subset=["low_s", "high_s"]).drop_duplicates("run")
    if not band.empty:
        band = band.loc[:, ["run", "low_s", "high_s", "step_s"]].reset_index(drop=True)
        base = alt.Chart(band).encode(y=y)
        layers += [
            base.mark_rule(color="black", strokeWidth=2).encode(
                x="low_s:Q", x2="high_s:Q",
                tooltip=[alt.Tooltip("low_s:Q", format=",.3f", title="band low (s)"),
                         alt.Tooltip("high_s:Q", format=",.3f", title="band high (s)")]),
            base.mark_tick(color="black", thickness=2, size=18).encode(x="low_s:Q"),
            base.mark_tick(color="black", thickness=2, size=18).encode(x="high_s:Q")]
    measured = frame[frame["run"] == "measured"].drop_duplicates("run")
    if not measured.empty:
        rule = pd.DataFrame({"measured_s": [float(measured["step_s"].iloc[0])]})
        layers.append(alt.Chart(rule).mark_rule(color="black", strokeDash=[4, 3]).encode(
            x="measured_s:Q",
            tooltip=[alt.Tooltip("measured_s:Q", format=",.3f", title="measured step (s)")]))
    chart = alt.layer(*layers).properties(width=width, height=height)
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
