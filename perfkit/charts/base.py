"""What every chart builder shares: the selection, the cap on marks, axes and checks.

Builders of :mod:`perfkit.charts` draw numbers, they never compute a metric. They all use
the point selection :data:`SELECTION` when asked to be clickable, keep what they ship to
the browser under :data:`MAX_MARKS` rows, draw rank axes the same way and refuse a frame
that lacks the columns they document (:func:`require`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import altair as alt
import pandas as pd

from ..errors import InvalidArgumentError
from ..tables import shorten

__all__ = ["SELECTION", "MAX_MARKS", "GIB", "selection_param", "chart_marks", "rank_axis",
           "unique_labels", "require", "nothing_to_draw", "memory_limit_rule"]

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


def rank_axis(title: str = "rank") -> alt.Axis:
    """Rank ticks upright, thinned when they would overlap (hundreds of ranks)."""
    return alt.Axis(title=title, labelAngle=0, labelOverlap="greedy", labelSeparation=4)


def unique_labels(full: Sequence[str], limit: int) -> list[str]:
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


def require(frame: pd.DataFrame, columns: tuple[str, ...], builder: str) -> None:
    """Refuse anything but a DataFrame holding ``columns`` (the message names ``builder``)."""
    if not isinstance(frame, pd.DataFrame):
        raise InvalidArgumentError("frame", f"{builder} needs a pandas DataFrame",
                                   type(frame).__name__)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InvalidArgumentError("frame", f"{builder} needs the columns "
                                   f"{', '.join(columns)}; missing {', '.join(missing)}")


def nothing_to_draw(frame: pd.DataFrame, what: str, width: int, height: int,
                    title: str | None = None) -> alt.Chart:
    """A chart that says why it has nothing to draw, in place of empty axes.

    Parameters
    ----------
    frame : pandas.DataFrame
        The empty input; its first ``attrs["notes"]`` entry (what the analysis could not
        read, e.g. "no memory samples") is the reason given.
    what : str
        What the chart would have drawn, for the sentence without a note.
    width, height : int
        Size in pixels, as the chart would have had.
    title : str, optional

    Returns
    -------
    altair.Chart
        Text marks only, one per line of ``Nothing to draw: <reason>.`` wrapped at 80
        characters.
    """
    notes = frame.attrs.get("notes") or []
    reason = str(notes[0]) if notes else f"no {what} in this profile"
    lines = textwrap.wrap(f"Nothing to draw: {reason.rstrip('.')}.", 80)
    text = alt.Chart(pd.DataFrame({"line": range(len(lines)), "text": lines})).mark_text(
        align="left", x=0, fontSize=13, color="#555").encode(
        y=alt.Y("line:O", axis=None), text="text:N").properties(
        width=width, height=min(height, 22 * len(lines)))
    return text.properties(title=title) if title else text


def memory_limit_rule(limit_gib: float, label: str = "usable") -> list[alt.Chart]:
    """A dashed red rule at a memory limit on a chart whose x is memory per device (GiB),
    and its words at the top (``"usable 57.6 GiB"``) and in its tooltip: an unlabelled
    line at 57.6 GiB read as the device's size (64 GiB)."""
    limit = pd.DataFrame({"limit_GiB": [float(limit_gib)],
                          "caption": [f"{label} {limit_gib:,.1f} GiB"]})
    rule = alt.Chart(limit).mark_rule(color="#c0392b", strokeDash=[4, 3]).encode(
        x="limit_GiB:Q", tooltip=[alt.Tooltip("caption:N", title="memory limit")])
    text = alt.Chart(limit).mark_text(align="right", dx=-4, y=8, color="#c0392b",
                                      fontSize=11).encode(x="limit_GiB:Q", text="caption:N")
    return [rule, text]
