"""Advice tab: the advisor's findings as a frame, a chart, an HTML table."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

import altair as alt
import pandas as pd

from ..format import time_text
from .base import require, selection_param, unique_labels
from .display import HTMLBlock

__all__ = ["FINDING_COLUMNS", "SEVERITY_ORDER", "findings_frame", "findings_chart",
           "findings_html", "findings_table"]

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
                   label_limit: int = 120) -> alt.Chart:
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
        ``x = ms_per_step`` and ``color = severity`` (its legend lists only the
        severities of the findings drawn, in :data:`SEVERITY_ORDER`); the chart data has
        one row per measured finding kept.
    """
    require(frame, ("title", "severity", "area", "score"), "findings_chart")
    data = frame
    if "measured" in data.columns:
        data = data[data["measured"].astype(bool)]
    cols = ["title", "severity", "area", "score"] + \
        (["ms_per_step"] if "ms_per_step" in data.columns else [])
    data = data.loc[:, cols]
    if n is not None:
        data = data.head(n)
    data = data.reset_index(drop=True)
    data["label"] = unique_labels(data["title"].astype(str).tolist(), label_limit)
    # the legend lists the severities of the bars drawn, in their order, each its colour
    drawn = set(data["severity"].astype(str))
    present = [s for s in SEVERITY_ORDER if s in drawn]
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
        color=alt.Color("severity:N", scale=alt.Scale(domain=present, range=[
            _SEVERITY_COLORS[SEVERITY_ORDER.index(s)] for s in present])),
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
        people (``12.3 ms (4.5 %)``, or "not measurable"), unless the frame has that
        column with a text (a share of another step than the others', named).

    Returns
    -------
    str
        ``<table class="perfkit-findings">`` with one row per finding, or a paragraph
        saying that nothing abnormal was found.
    """
    frame = frame.copy()
    if "ms per step" in columns:
        if "ms_per_step" in frame.columns:
            # a text the caller wrote (a share of another step, named) is kept
            given = frame["ms per step"] if "ms per step" in frame.columns else \
                pd.Series(None, index=frame.index, dtype="object")
            frame["ms per step"] = [
                g if isinstance(g, str) and g else _at_stake(ms, sc) for g, ms, sc in
                zip(given, frame["ms_per_step"], frame["score"], strict=True)]
        else:
            frame["ms per step"] = [f"{100 * sc:.1f} % of the step" for sc in frame["score"]]
    require(frame, tuple(columns), "findings_html")
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
# the time at stake wraps after its figure where it names its basis (a share of the mean
# over some steps): nowrap pushed the last columns past a 1280-px window
_FINDING_CELL = {"severity": "white-space:nowrap",
                 "ms per step": "white-space:normal;min-width:9em;max-width:16em",
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
