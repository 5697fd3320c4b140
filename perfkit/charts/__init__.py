"""Altair chart builders, by dashboard tab, rendered offline.

Every builder takes a pandas DataFrame whose columns it documents and returns an Altair
chart; charts draw numbers, they never compute a metric. Clusters are usually air-gapped,
so :func:`chart_to_svg` renders a chart to a self-contained SVG string with vl-convert
(Vega runs inside the Python process): the SVG can go into an ``ipywidgets.HTML``, a
notebook output or a report without any script from a CDN.

One module per tab of the dashboard, the shared pieces apart:

* :mod:`~perfkit.charts.base` — the selection, the cap on marks, rank axes, column checks;
* :mod:`~perfkit.charts.display` — SVG rendering and notebook display wrappers;
* :mod:`~perfkit.charts.overview` — the step time per rank;
* :mod:`~perfkit.charts.timeline` — the swimlanes of one step;
* :mod:`~perfkit.charts.operators` — top operators and the roofline;
* :mod:`~perfkit.charts.communication` — ranks that lag behind their peers;
* :mod:`~perfkit.charts.memory` — memory by component and over time;
* :mod:`~perfkit.charts.recompute` — the recompute trade-off;
* :mod:`~perfkit.charts.planner` — measured against predicted, candidate strategies and
  the pipeline plan;
* :mod:`~perfkit.charts.advice` — the advisor's findings;
* :mod:`~perfkit.charts.history` — the tuning journal.

Every builder is importable from here (``perfkit.charts.step_breakdown_chart``).
"""

from .advice import (
    FINDING_COLUMNS,
    SEVERITY_ORDER,
    findings_chart,
    findings_frame,
    findings_html,
    findings_table,
)
from .base import GIB as GIB  # (this and MEMORY_COLUMNS: importable here, not in __all__)
from .base import MAX_MARKS, SELECTION, chart_marks, selection_param
from .communication import slow_ranks_chart
from .display import HTMLBlock, SVGChart, chart_to_svg, svg
from .history import journal_breakdown_chart, journal_operators_chart, journal_progress_chart
from .memory import MEMORY_COLUMNS as MEMORY_COLUMNS
from .memory import memory_chart, memory_timeline_chart
from .operators import roofline_chart, top_operators_chart
from .overview import STEP_PARTS, TRACE_PHASES, WHOLE_STEP, step_breakdown_chart, step_parts
from .planner import pipeline_plan_chart, prediction_chart, strategy_chart
from .recompute import recompute_tradeoff_chart
from .timeline import TIMELINE_COLORS, timeline_chart

__all__ = [
    "memory_chart", "chart_to_svg",
    "step_breakdown_chart", "top_operators_chart",
    "findings_frame", "findings_chart", "findings_html", "roofline_chart",
    "strategy_chart", "prediction_chart", "pipeline_plan_chart", "memory_timeline_chart",
    "slow_ranks_chart",
    "recompute_tradeoff_chart", "SVGChart", "svg", "HTMLBlock", "findings_table",
    "STEP_PARTS", "TRACE_PHASES", "WHOLE_STEP", "step_parts",
    "FINDING_COLUMNS", "SEVERITY_ORDER", "SELECTION", "MAX_MARKS",
    "chart_marks", "selection_param", "timeline_chart", "TIMELINE_COLORS",
    "journal_progress_chart", "journal_breakdown_chart", "journal_operators_chart",
]
