"""History tab: a tuning journal's progress and the comparison of two runs."""

from __future__ import annotations

import altair as alt
import pandas as pd

from .base import require

__all__ = ["journal_progress_chart", "journal_breakdown_chart", "journal_operators_chart"]

_JOURNAL_PARTS = {"computing_us": "computing",
                  "comm_not_overlapped_us": "communication (not overlapped)",
                  "free_us": "free", "bubble_us": "bubble",
                  "preparing_us": "before the first device task"}


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
    require(frame, ("label", "tokens_per_s_per_device", "mfu"), "journal_progress_chart")
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
    """Where the step time went in two runs: the job's step's parts side by side.

    Parameters
    ----------
    frame : pandas.DataFrame
        ``RunComparison.breakdown``: columns ``part`` (``computing_us``,
        ``comm_not_overlapped_us``, ``free_us``, ``bubble_us``, ...), ``base_us`` and
        ``new_us``. Parts other than computing, exposed communication, free, the bubble
        and the wait before the first device task are not drawn (all but the bubble add
        up to the step; the bubble is inside them).
    base_label, new_label : str
        Names of the two runs.
    title : str, optional
    width : int

    Returns
    -------
    altair.Chart
        Horizontal bars in milliseconds, one pair (base, new) per part.
    """
    require(frame, ("part", "base_us", "new_us"), "journal_breakdown_chart")
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
        # few ticks, overlapping labels dropped: "1,800" and "2,000" ran into "1,8002,000"
        x=alt.X("ms:Q", title="ms of the job's step (split over every rank and step)",
                axis=alt.Axis(tickCount=5, labelOverlap="greedy")),
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
    require(frame, ("key", "delta_us"), "journal_operators_chart")
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
