"""Overview tab: where the step time goes, rank by rank."""

from __future__ import annotations

import altair as alt
import pandas as pd

from .._text_dtype import TEXT
from .base import MAX_MARKS, rank_axis, require, selection_param

__all__ = ["STEP_PARTS", "TRACE_PHASES", "WHOLE_STEP", "WAIT_COLOR", "step_parts",
           "step_breakdown_chart"]

#: Parts of a step that add up to ``step_us`` (see :func:`perfkit.analysis.step_breakdown`),
#: in stacking order, with their legend labels.
STEP_PARTS: dict[str, str] = {
    "computing_us": "computing",
    "comm_not_overlapped_us": "communication (not overlapped)",
    "free_us": "free",
}
#: The phases of MindSpore's legacy step trace (MindInsight; raw CANN output has them too),
#: which add up to its step total: drawn where a profile has them but no computing /
#: communication / free split.
TRACE_PHASES: dict[str, str] = {
    "iteration_interval_us": "step interval (waiting for data)",
    "fp_and_bp_us": "forward and backward",
    "tail_us": "step tail (gradients, update)",
}
#: A step whose parts the profile does not give: drawn whole.
WHOLE_STEP: dict[str, str] = {"step_us": "step (no parts in this profile)"}
#: Colour of the device's wait before a step's first task, in the step chart and on the
#: Timeline (and in the headline's split bar, :mod:`perfkit.widgets.headline`).
WAIT_COLOR = "#eeca3b"
#: Colour of each step part (by column), the same in every chart.
_PART_COLORS = {"computing_us": "#4c78a8", "computing_or_free_us": "#9ecae9",
                "comm_not_overlapped_us": "#e45756",
                "comm_exposed_us": "#e45756", "free_us": "#bab0ac", "bubble_us": "#f58518",
                # the step interval is the wait before the step, as the split bar colours it
                "iteration_interval_us": WAIT_COLOR, "fp_and_bp_us": "#4c78a8",
                "tail_us": "#72b7b2", "step_us": "#9d9d9d", "preparing_us": WAIT_COLOR}


def step_parts(frame: pd.DataFrame, parts: dict[str, str] | None = None) -> dict[str, str]:
    """The parts of the step to stack: ``parts`` (default :data:`STEP_PARTS`) where some row
    has a value of them, else the legacy step-trace phases (:data:`TRACE_PHASES`), else the
    whole step (:data:`WHOLE_STEP`), so that a profile without a split still shows its
    steps. ``parts`` itself when no row has any of them."""
    wanted = dict(STEP_PARTS if parts is None else parts)
    if not isinstance(frame, pd.DataFrame):  # the chart says what it needs
        return wanted
    for candidate in (wanted, TRACE_PHASES, WHOLE_STEP):
        cols = list(candidate)
        if all(c in frame.columns for c in cols) and bool(frame[cols].notna().any().any()):
            return dict(candidate)
    return wanted


def step_breakdown_chart(frame: pd.DataFrame, title: str | None = None,
                         width: int | None = None, height: int = 220,
                         parts: dict[str, str] | None = None, select: bool = False,
                         max_bars: int = 96) -> alt.LayerChart:
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
        whose sum is the step time). Where no row has a value of them, the legacy
        step-trace phases or the whole step are drawn instead (:func:`step_parts`).
    select : bool
        Add the point selection :data:`SELECTION` on ``rank`` (click a bar).
    max_bars : int
        Up to this many (rank, step) bars, each step of a rank is drawn side by side in
        the rank's group; beyond it each rank shows the mean of each part over its steps
        (``step`` is then ``"mean of n"``), so that hundreds of ranks stay readable.
        Beyond :data:`MAX_MARKS` bars and parts, only the slowest ranks are kept.

    Returns
    -------
    altair.LayerChart
        Its first layer: bars with ``x = rank`` (ordinal, in rank order),
        ``xOffset = step``, ``y = ms`` stacked by ``part``. When a rank has several bars
        (steps), a second layer writes each bar's step number above it, and the axis
        title says so. The chart data has one row per (rank, step, part) with a
        known value: columns ``rank``, ``step``, ``part``, ``order``, ``ms`` and
        ``share`` (of the bar's total).
    """
    parts = step_parts(frame, parts)
    require(frame, ("rank", "step", *parts), "step_breakdown_chart")
    base = frame.loc[:, ["rank", "step", *parts]].copy()
    base["rank"] = base["rank"].astype("Int64")
    base["step"] = base["step"].astype("Int64").astype(TEXT).fillna("NA")
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
    steps_in_order = _step_order(long["step"].unique())
    long["step_pos"] = long["step"].map({s: i for i, s in enumerate(steps_in_order)})
    data = long.loc[:, ["rank", "step", "part", "order", "ms", "share", "step_pos"]] \
        .sort_values(["rank", "step_pos", "order"], kind="mergesort") \
        .drop(columns="step_pos").reset_index(drop=True)
    labels = list(parts.values())
    colors = [_PART_COLORS.get(c, "#999") for c in parts]
    bars = max(1, len(base))
    if width is None:
        width = int(min(900, max(240, 28 * bars)))
    several = bool(len(data)) and data.groupby("rank")["step"].nunique().max() > 1
    x = alt.X("rank:O", sort="ascending", axis=rank_axis(
        "rank (one bar per step, its number above it)" if several else "rank"))
    # the step numbers are labels (text): in their numeric order, not Vega's text order
    # that puts step 10 before step 5
    offset = alt.XOffset("step:N", title="step", sort=steps_in_order)
    bar = alt.Chart().mark_bar().encode(
        x=x, xOffset=offset,
        y=alt.Y("ms:Q", stack="zero", title="time per step (ms)"),
        color=alt.Color("part:N", sort=labels, title=None,
                        scale=alt.Scale(domain=labels, range=colors),
                        legend=alt.Legend(orient="bottom", direction="horizontal",
                                          labelLimit=0)),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("rank:O"), alt.Tooltip("step:N"), alt.Tooltip("part:N"),
                 alt.Tooltip("ms:Q", format=",.2f", title="time (ms)"),
                 alt.Tooltip("share:Q", format=".1%", title="share of the step")],
    )
    if select:
        pick = selection_param(["rank"])
        bar = bar.add_params(pick).encode(
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.35)))
    layers = [bar]
    if several:  # which bar is which step: its number on top of it
        layers.append(alt.Chart().transform_aggregate(
            total="sum(ms)", groupby=["rank", "step"]).mark_text(
            dy=-5, fontSize=9, color="#333").encode(
            x=x, xOffset=offset, y=alt.Y("total:Q"), text=alt.Text("step:N")))
    chart = alt.layer(*layers, data=data).properties(width=width, height=height)
    if title:
        chart = chart.properties(title=title)
    return chart


def _step_order(labels: object) -> list[str]:
    """Step labels (``"5"``, ``"10"``, ``"NA"``, ``"mean of 3"``) in numeric order, the
    labels that are not numbers after them in text order."""
    def key(label: str) -> tuple[int, float, str]:
        try:
            return (0, float(label), label)
        except ValueError:
            return (1, 0.0, label)
    return sorted((str(v) for v in labels), key=key)
