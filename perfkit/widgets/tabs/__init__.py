"""The dashboard's tabs: each wires controls to package functions and formats their frames.

A tab computes when it is first shown (a spinner says so meanwhile, never a blank tab) and
again when its controls or the job change. Charts are live widgets
(:mod:`perfkit.widgets.render`): a tooltip on every mark, zoom and pan where there are many
points, and a click on a bar (a rank, an operator, a finding) filters the table next to it.
Tables aggregate over ranks by default (median, min, max and the worst rank,
:func:`perfkit.tables.over_ranks`) with a picker to show one rank, and say in their headers
what each figure is per.

Nothing is computed here: the figures come from :mod:`perfkit.analysis`,
:func:`perfkit.advise`, :mod:`perfkit.plan` and the helpers of :mod:`perfkit.widgets`.

One module per tab (:mod:`.overview`, :mod:`.timeline`, :mod:`.operators`,
:mod:`.communication`, :mod:`.memory`, :mod:`.recompute`, :mod:`.planner`, :mod:`.advice`,
:mod:`.history`); what they share (:class:`Context`, :class:`Tab`, :class:`JobTab`, the
layout helpers) is in :mod:`.base`. A new tab: a module here and one line in
:data:`TAB_CLASSES`, and its title in :data:`perfkit.widgets.dashboard.TAB_TITLES`.
"""

from .advice import AdviceTab
from .base import ALL_RANKS, READY_CLASS, Context, JobTab, Tab
from .communication import CommunicationTab
from .history import HistoryTab
from .memory import MemoryTab
from .operators import OperatorsTab
from .overview import OverviewTab
from .planner import PlannerTab
from .recompute import RecomputeTab
from .timeline import TimelineTab

__all__ = ["Context", "Tab", "JobTab", "OverviewTab", "TimelineTab", "OperatorsTab",
           "CommunicationTab", "MemoryTab", "RecomputeTab", "PlannerTab", "AdviceTab",
           "HistoryTab", "TAB_CLASSES", "ALL_RANKS", "READY_CLASS"]

#: The tab class of each title. A new tab: a module in this package with its class, and
#: one line here (its place among the dashboard's tabs is its title in
#: :data:`perfkit.widgets.dashboard.TAB_TITLES`).
TAB_CLASSES: dict[str, type[Tab]] = {
    "Overview": OverviewTab,
    "Timeline": TimelineTab,
    "Operators": OperatorsTab,
    "Communication": CommunicationTab,
    "Memory": MemoryTab,
    "Recompute": RecomputeTab,
    "Planner": PlannerTab,
    "Advice": AdviceTab,
    "History": HistoryTab,
}
