"""Communication tab (and the cluster explorer): ranks that lag behind their peers."""

from __future__ import annotations

import altair as alt
import pandas as pd

from .base import MAX_MARKS, rank_axis, require, selection_param

__all__ = ["slow_ranks_chart"]

#: Readable names of the metrics of :func:`perfkit.analysis.slow_ranks`.
_METRIC_LABELS = {"free_us": "free time (device idle)", "preparing_us": "preparing (host)",
                  "computing_us": "computing", "comm_exposed_us": "exposed communication",
                  "comm_not_overlapped_us": "communication (not overlapped)",
                  "bubble_us": "pipeline bubble",
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
    require(frame, ("rank", "metric", "check_order", "excess_pct", "slow"),
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
        x=alt.X("rank:O", sort="ascending", axis=rank_axis()),
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
